/* sha256.c - see sha256.h. */
#include "lazy/sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/xalloc.h"
#include "lazy/crypto.h"

#define FILE_CHUNK (1 << 16)

static void to_hex(const unsigned char *md, char out[SBX_SHA256_HEX_LEN + 1])
{
        static const char hex[] = "0123456789abcdef";

        for (size_t i = 0; i < 32; i++) {
                out[2 * i] = hex[md[i] >> 4];
                out[2 * i + 1] = hex[md[i] & 15];
        }
        out[SBX_SHA256_HEX_LEN] = '\0';
}

int sbx_sha256_hex(const void *data, size_t n, char out[SBX_SHA256_HEX_LEN + 1],
                   struct sbx_error *err)
{
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int len = 0;
        int r;

        out[0] = '\0';
        r = lazy_crypto_load(err);
        if (r < 0)
                return r;
        if (EVP_Digest(n ? data : "", n, md, &len, EVP_sha256(), NULL) != 1 || len != 32)
                return sbx_fail(err, EIO, "OpenSSL's SHA-256 failed (libcrypto.so.3)");
        to_hex(md, out);
        return 0;
}

int sbx_sha256_init(struct sbx_sha256 *s, struct sbx_error *err)
{
        int r = lazy_crypto_load(err);

        if (r < 0)
                return r;
        if (!s->md)
                s->md = EVP_MD_CTX_new();
        if (!s->md)
                abort(); /* out of memory, as xmalloc */
        if (EVP_DigestInit_ex(s->md, EVP_sha256(), NULL) != 1)
                return sbx_fail(err, EIO, "cannot start SHA-256 (libcrypto.so.3)");
        return 0;
}

int sbx_sha256_update(struct sbx_sha256 *s, const void *data, size_t n)
{
        if (n == 0)
                return 0;
        return EVP_DigestUpdate(s->md, data, n) == 1 ? 0 : -EIO;
}

int sbx_sha256_final_hex(struct sbx_sha256 *s, char out[SBX_SHA256_HEX_LEN + 1])
{
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int len = 0;

        out[0] = '\0';
        if (EVP_DigestFinal_ex(s->md, md, &len) != 1 || len != 32)
                return -EIO;
        to_hex(md, out);
        return 0;
}

void sbx_sha256_done(struct sbx_sha256 *s)
{
        if (s->md)
                EVP_MD_CTX_free(s->md);
        s->md = NULL;
}

int sbx_sha256_file(const char *path, const volatile sig_atomic_t *cancel,
                    char out[SBX_SHA256_HEX_LEN + 1], struct sbx_error *err)
{
        _cleanup_(sbx_sha256_done) struct sbx_sha256 s = {0};
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        _cleanup_free_ unsigned char *buf = NULL;
        ssize_t n;
        int r;

        out[0] = '\0';
        if (fd < 0)
                return sbx_fail(err, errno, "cannot open '%s': %s", path, strerror(errno));
        r = sbx_sha256_init(&s, err);
        if (r < 0)
                return r;
        buf = xmalloc(FILE_CHUNK);
        while ((n = read(fd, buf, FILE_CHUNK)) != 0) {
                if (cancel && *cancel)
                        return sbx_fail(err, EINTR, "hashing '%s' was cancelled", path);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return sbx_fail(err, errno, "cannot read '%s': %s", path, strerror(errno));
                if (sbx_sha256_update(&s, buf, (size_t)n) < 0)
                        return sbx_fail(err, EIO, "SHA-256 of '%s' failed (libcrypto.so.3)", path);
        }
        if (sbx_sha256_final_hex(&s, out) < 0)
                return sbx_fail(err, EIO, "SHA-256 of '%s' failed (libcrypto.so.3)", path);
        return 0;
}
