/* sha256.h - SHA-256 (FIPS 180-4) without OpenSSL, for the hashes on the server's request
 * path: the audit record's code_sha256 and the engine's context-name hash. libcrypto (via
 * lazy/crypto.h) stays for setup's and the image import's digests; a native server thus never
 * maps it nor pays OpenSSL's ~3 MiB initialisation on its first run. Not constant-time
 * relative to secrets (it hashes no secrets); tested against the FIPS 180-4 / NIST vectors
 * and against OpenSSL on random inputs (tests/unit/test_lazy.c). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define SBX_SHA256_BYTES 32

struct sbx_sha256 {
        uint32_t h[8];
        uint64_t bytes;        /* total input so far */
        unsigned char buf[64]; /* a partial block */
        size_t fill;           /* bytes used in buf */
};

/** sbx_sha256_init() - start a digest in @s. */
void sbx_sha256_init(struct sbx_sha256 *s);

/** sbx_sha256_update() - feed @n bytes at @data (NULL ok when @n is 0). */
void sbx_sha256_update(struct sbx_sha256 *s, const void *data, size_t n);

/** sbx_sha256_final() - the 32-byte digest into @out; @s must be initialised again to reuse. */
void sbx_sha256_final(struct sbx_sha256 *s, unsigned char out[SBX_SHA256_BYTES]);

/** sbx_sha256_hex() - the digest of @n bytes at @data as 64 lowercase hex digits and a NUL. */
void sbx_sha256_hex(const void *data, size_t n, char out[2 * SBX_SHA256_BYTES + 1]);
