/* lazy/archive.c - libarchive.so.13's table (see lazy/archive.h). */
#define LAZY_ARCHIVE_IMPL
#include "lazy/archive.h"

#include "lazy/lazy.h"

static struct lazy_archive_table table;
static struct lazy_state state =
    LAZY_STATE_INIT("libarchive.so.13", "libarchive13", "setup (unpacking a rootfs)");

static void load_once(void)
{
        void *h = lazy_open(&state);

        if (!h)
                return;
#define LAZY_RESOLVE_(name) table.name = (__typeof__(table.name))lazy_sym(&state, h, #name);
        LAZY_ARCHIVE_SYMBOLS(LAZY_RESOLVE_)
#undef LAZY_RESOLVE_
}

int lazy_archive_load(struct sbx_error *err)
{
        pthread_once(&state.once, load_once);
        return lazy_result(&state, err);
}

const struct lazy_archive_table *lazy_archive(void)
{
        pthread_once(&state.once, load_once);
        lazy_require(&state);
        return &table;
}
