/* pins.h - the pinned sandbox images: python:3.12-slim and node:22-slim as of 2026-11-09, by
 * digest, so they can never change silently. The one place these digests live in C; the
 * defaults of VESTIBULE_IMAGE_PYTHON / VESTIBULE_IMAGE_NODE. Re-pinning means changing them
 * here (and in images/pins, which the images helper reads). */
#pragma once

#define SBX_PIN_IMAGE_PYTHON                                                                       \
        "docker.io/library/python@sha256:"                                                         \
        "5e2bdb1b0d542d5039cffb8181c65930093949194a65c365dfb1b0fe13a4fa5b"
#define SBX_PIN_IMAGE_NODE                                                                         \
        "docker.io/library/node@sha256:"                                                           \
        "5ec23b7c622b00547753bc6ffd78085dd868a68aeb41c8e0a1418f033e13d96d"

/* The Debian-built alternatives (VESTIBULE_IMAGE_SOURCE=debian, images/build.sh): the names setup
 * imports them under into an engine, as images/pins' python.debian / node.debian say. They are
 * the image defaults when the source is debian and VESTIBULE_IMAGE_PYTHON / _NODE are unset. */
#define SBX_DEBIAN_IMAGE_PYTHON "vestibule/python:bookworm"
#define SBX_DEBIAN_IMAGE_NODE "vestibule/node:bookworm"
