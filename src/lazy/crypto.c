/* lazy/crypto.c - libcrypto.so.3's table (see lazy/crypto.h). */
#define LAZY_CRYPTO_IMPL
#include "lazy/crypto.h"

#include "lazy/lazy.h"

static struct lazy_crypto_table table;
static struct lazy_state state =
    LAZY_STATE_INIT("libcrypto.so.3", "libssl3", "SHA-256 over downloads and images");

static void load_once(void)
{
        void *h = lazy_open(&state);

        if (!h)
                return;
#define LAZY_RESOLVE_(name) table.name = (__typeof__(table.name))lazy_sym(&state, h, #name);
        LAZY_CRYPTO_SYMBOLS(LAZY_RESOLVE_)
#undef LAZY_RESOLVE_
}

int lazy_crypto_load(struct sbx_error *err)
{
        pthread_once(&state.once, load_once);
        return lazy_result(&state, err);
}

const struct lazy_crypto_table *lazy_crypto(void)
{
        pthread_once(&state.once, load_once);
        lazy_require(&state);
        return &table;
}
