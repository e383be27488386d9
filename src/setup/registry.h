/* registry.h - pulling a pinned image from an OCI distribution registry for the native rootfs:
 * manifests and blobs by digest over HTTPS (plain HTTP only for a loopback registry, as Docker
 * allows), anonymous bearer-token auth as Docker Hub uses, an image index resolved to this
 * machine's architecture, and every byte checked against the digest that names it. */
#pragma once

#include <stddef.h>

#include "common/error.h"
#include "setup/setup.h"

/* A parsed image reference. */
struct registry_ref {
        char *host;       /* "registry-1.docker.io" for docker.io; "127.0.0.1:5000" */
        char *repository; /* "library/python" */
        char *digest;     /* "sha256:<64 hex>" */
        bool plain_http;  /* loopback registries only */
};

/**
 * registry_ref_parse() - parse NAME[:TAG]@sha256:<64 hex>. NAME's first component is a
 * registry host when it has a '.' or ':' or is "localhost"; otherwise the registry is Docker
 * Hub, and a one-component name gets "library/". A tag is ignored (the digest decides).
 * Return: 0, or -EINVAL with @err (an unpinned reference is refused: pin it by digest).
 */
int registry_ref_parse(const char *ref, struct registry_ref *ret, struct sbx_error *err);

/** registry_ref_done() - free what @r holds. */
void registry_ref_done(struct registry_ref *r);

/* What registry_pull() fetched: the layer blobs, in order, as files under the work folder. */
struct registry_image {
        char **layer_paths;  /* NULL-terminated */
        char **layer_sha256; /* 64 hex each, NULL-terminated; already checked once */
        size_t n_layers;
        char *manifest_digest; /* the platform manifest's digest (may differ from an index) */
};

/** registry_image_done() - free what @img holds (the files stay). */
void registry_image_done(struct registry_image *img);

/**
 * registry_pull() - fetch @ref's manifest (resolving an index to this machine's linux
 * architecture) and its layers into @workdir, checking every manifest and blob against its
 * digest while it arrives, with progress through @o.
 * @label: names the pull in progress lines ("python").
 * Return: 0; -EBADMSG for a digest mismatch (naming both digests) or an unusable manifest,
 * -ENOENT for an image without this architecture, -EACCES when the registry refuses,
 * -ECONNREFUSED/-EHOSTUNREACH when it cannot be reached, -EINTR when cancelled.
 */
int registry_pull(const struct registry_ref *ref, const char *workdir, const char *label,
                  const struct setup_opts *o, struct registry_image *ret, struct sbx_error *err);
