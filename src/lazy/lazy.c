/* lazy.c - the generic part of the on-first-use library loading (see lazy.h). */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "lazy/lazy.h"

void *lazy_open(struct lazy_state *st)
{
        void *h;
        const char *why;

        dlerror(); /* reset: dlerror() reports the last failure of this thread */
        h = dlopen(st->soname, RTLD_NOW | RTLD_LOCAL);
        if (h)
                return h;
        why = dlerror();
        st->code = ENOENT;
        snprintf(st->msg, sizeof(st->msg),
                 "%s is not installed (%s needs %s: %s): apt-get install %s", st->package,
                 st->users, st->soname, why ? why : "not found", st->package);
        return NULL;
}

void *lazy_sym(struct lazy_state *st, void *handle, const char *name)
{
        void *p;
        const char *why;

        dlerror();
        p = dlsym(handle, name);
        why = dlerror();
        if (!why && p)
                return p;
        if (!st->code) {
                st->code = ENOSYS;
                snprintf(st->msg, sizeof(st->msg),
                         "%s is too old or not the expected build: %s has no '%s' (%s needs "
                         "it): apt-get install --only-upgrade %s",
                         st->package, st->soname, name, st->users, st->package);
        }
        return NULL;
}

int lazy_result(const struct lazy_state *st, struct sbx_error *err)
{
        if (!st->code)
                return 0;
        return sbx_fail(err, st->code, "%s", st->msg);
}

void lazy_require(const struct lazy_state *st)
{
        if (!st->code)
                return;
        log_error("%s (used before it was loaded; this is a bug, please report it)", st->msg);
        abort();
}

int lazy_is_loaded(const char *soname)
{
        void *h = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);

        if (!h)
                return 0;
        dlclose(h); /* drops only the reference NOLOAD took */
        return 1;
}
