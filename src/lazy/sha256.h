/* sha256.h - the one SHA-256 helper, through OpenSSL's libcrypto (loaded on first use,
 * lazy/crypto.h), in three forms: a buffer (the audit record's code_sha256, the engine's
 * context-name hash: the docker CLI's context store is keyed by the SHA-256 of the context's
 * name, docs.docker.com "docker context"; a registry manifest), a file (image tarballs, the
 * seccomp profile), and a stream (a download or an unpack that hashes as it reads). A server
 * that never runs code never maps libcrypto; the first digest loads it (~3 MiB of RSS with
 * OpenSSL's initialisation, measured in docs/BENCHMARKS.md). Source: EVP_DigestInit(3). */
#pragma once

#include <signal.h>
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

/**
 * sbx_sha256_file() - the SHA-256 of the bytes of the file @path, read in 64 KiB chunks.
 * @cancel: NULL, or a flag a signal handler sets: once set, stop with -EINTR.
 * @out:    65 bytes of the caller's: 64 lowercase hex digits and a NUL; "" on error.
 * Return: 0, or a negative errno with @err: what open(2)/read(2) said (naming @path),
 * -EINTR (cancelled), or as sbx_sha256_hex().
 */
int sbx_sha256_file(const char *path, const volatile sig_atomic_t *cancel,
                    char out[SBX_SHA256_HEX_LEN + 1], struct sbx_error *err);

/* A digest fed piece by piece. Zero-initialise, then sbx_sha256_init(); always
 * sbx_sha256_done() (also after a failed init). */
struct sbx_sha256 {
        struct evp_md_ctx_st *md; /* OpenSSL's EVP_MD_CTX */
};

/**
 * sbx_sha256_init() - load libcrypto and start (or restart, dropping what was fed) @s.
 * Return: 0, or a negative errno with @err as sbx_sha256_hex().
 */
int sbx_sha256_init(struct sbx_sha256 *s, struct sbx_error *err);

/** sbx_sha256_update() - feed @n bytes at @data. Return: 0, or -EIO (libcrypto failed). */
int sbx_sha256_update(struct sbx_sha256 *s, const void *data, size_t n);

/**
 * sbx_sha256_final_hex() - the digest of all that was fed, into @out (65 bytes: 64 lowercase
 * hex digits and a NUL; "" on error). @s must be started again before more is fed.
 * Return: 0, or -EIO.
 */
int sbx_sha256_final_hex(struct sbx_sha256 *s, char out[SBX_SHA256_HEX_LEN + 1]);

/** sbx_sha256_done() - free what @s holds; a zeroed @s is fine. */
void sbx_sha256_done(struct sbx_sha256 *s);
