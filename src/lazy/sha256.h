/* sha256.h - SHA-256 of a buffer as hex, through OpenSSL's libcrypto (loaded on first use,
 * lazy/crypto.h), for the hashes on the server's request path: the audit record's
 * code_sha256 and the engine's context-name hash (the docker CLI's context store is keyed by
 * the SHA-256 of the context's name: docs.docker.com, "docker context"). A server that never
 * runs code never maps libcrypto; the first digest loads it (~3 MiB of RSS with OpenSSL's
 * initialisation, measured in docs/BENCHMARKS.md). */
#pragma once

#include <stddef.h>

#include "common/error.h"

#define SBX_SHA256_HEX_LEN 64

/**
 * sbx_sha256_hex() - the SHA-256 of @n bytes at @data (NULL ok when @n is 0) as 64 lowercase
 * hex digits and a NUL into @out (caller's buffer, 65 bytes).
 * Return: 0, or a negative errno with @err set: -ENOENT/-ENOSYS when libcrypto.so.3 cannot be
 * loaded (the message names the package, libssl3), -EIO when the digest fails; @out is then
 * the empty string.
 */
int sbx_sha256_hex(const void *data, size_t n, char out[SBX_SHA256_HEX_LEN + 1],
                   struct sbx_error *err);
