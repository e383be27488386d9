/* sha256.c - see sha256.h. */
#include "lazy/sha256.h"

#include <errno.h>
#include <stdio.h>

#include "lazy/crypto.h"

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
        for (size_t i = 0; i < 32; i++)
                snprintf(out + 2 * i, 3, "%02x", md[i]);
        return 0;
}
