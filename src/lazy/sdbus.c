/* lazy/sdbus.c - libsystemd.so.0's table (see lazy/sdbus.h). */
#define LAZY_SDBUS_IMPL
#include "lazy/sdbus.h"

#include "lazy/lazy.h"

static struct lazy_sdbus_table table;
static int loaded;
static struct lazy_state state =
    LAZY_STATE_INIT("libsystemd.so.0", "libsystemd0", "a transient systemd scope per run");

static void load_once(void)
{
        void *h = lazy_open(&state);

        if (!h)
                return;
#define LAZY_RESOLVE_(name) table.name = (__typeof__(table.name))lazy_sym(&state, h, #name);
        LAZY_SDBUS_SYMBOLS(LAZY_RESOLVE_)
#undef LAZY_RESOLVE_
        if (!state.code)
                __atomic_store_n(&loaded, 1, __ATOMIC_RELEASE);
}

int lazy_sdbus_load(struct sbx_error *err)
{
        pthread_once(&state.once, load_once);
        return lazy_result(&state, err);
}

int lazy_sdbus_loaded(void)
{
        return __atomic_load_n(&loaded, __ATOMIC_ACQUIRE);
}

const struct lazy_sdbus_table *lazy_sdbus(void)
{
        pthread_once(&state.once, load_once);
        lazy_require(&state);
        return &table;
}
