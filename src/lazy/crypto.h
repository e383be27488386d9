/* lazy/crypto.h - OpenSSL libcrypto (libcrypto.so.3, Debian package libssl3), loaded on
 * first use.
 *
 * Include this instead of <openssl/evp.h>. SHA-256 over downloads and image tarballs (setup,
 * the engine's image import) uses it; those paths load libcurl (which maps libcrypto anyway)
 * or are one-shot commands; the audit log's code hash (lazy/sha256.h) loads it on a server's
 * first run, so an idle server never maps libcrypto nor initialises OpenSSL (its providers
 * and config cost ~3 MiB of RSS on the first digest). Call lazy_crypto_load() before the
 * first EVP_* call.
 * See lazy/lazy.h. */
#pragma once

#include <openssl/evp.h>

#include "common/error.h"

/* Every libcrypto function the code calls; add a name here when a new one is needed. */
#define LAZY_CRYPTO_SYMBOLS(X)                                                                     \
        X(EVP_Digest)                                                                              \
        X(EVP_DigestFinal_ex)                                                                      \
        X(EVP_DigestInit_ex)                                                                       \
        X(EVP_DigestUpdate)                                                                        \
        X(EVP_EncodeBlock)                                                                         \
        X(EVP_MD_CTX_free)                                                                         \
        X(EVP_MD_CTX_new)                                                                          \
        X(EVP_sha256)

struct lazy_crypto_table {
/* NOLINTNEXTLINE(bugprone-macro-parentheses): a declarator cannot be parenthesised */
#define LAZY_FIELD_(name) __typeof__(&name) name;
        LAZY_CRYPTO_SYMBOLS(LAZY_FIELD_)
#undef LAZY_FIELD_
};

/**
 * lazy_crypto_load() - load libcrypto.so.3 and resolve every name above, once per process.
 * Thread-safe; cheap after the first call.
 * Return: 0, or -ENOENT (libssl3 not installed) / -ENOSYS (a build without one of the
 * functions), with @err naming the package to install.
 */
int lazy_crypto_load(struct sbx_error *err);

/** lazy_crypto() - the resolved table; loads first, aborts if that fails (see lazy.h). */
const struct lazy_crypto_table *lazy_crypto(void);

#ifndef LAZY_CRYPTO_IMPL
#define EVP_Digest (lazy_crypto()->EVP_Digest)
#define EVP_DigestFinal_ex (lazy_crypto()->EVP_DigestFinal_ex)
#define EVP_DigestInit_ex (lazy_crypto()->EVP_DigestInit_ex)
#define EVP_DigestUpdate (lazy_crypto()->EVP_DigestUpdate)
#define EVP_EncodeBlock (lazy_crypto()->EVP_EncodeBlock)
#define EVP_MD_CTX_free (lazy_crypto()->EVP_MD_CTX_free)
#define EVP_MD_CTX_new (lazy_crypto()->EVP_MD_CTX_new)
#define EVP_sha256 (lazy_crypto()->EVP_sha256)
#endif
