/* lazy/curl.c - libcurl's table (see lazy/curl.h). */
#define LAZY_CURL_IMPL
#include "lazy/curl.h"

#include <errno.h>
#include <stdio.h>

#include "lazy/lazy.h"

static struct lazy_curl_table table;
static struct lazy_state state =
    LAZY_STATE_INIT("libcurl.so.4", "libcurl4", "the container backend and setup");

static void load_once(void)
{
        void *h = lazy_open(&state);
        CURLcode rc;

        if (!h)
                return;
#define LAZY_RESOLVE_(name) table.name = (__typeof__(table.name))lazy_sym(&state, h, #name);
        LAZY_CURL_SYMBOLS(LAZY_RESOLVE_)
#undef LAZY_RESOLVE_
        if (state.code)
                return;
        rc = table.curl_global_init(CURL_GLOBAL_DEFAULT);
        if (rc != CURLE_OK) {
                state.code = EIO;
                snprintf(state.msg, sizeof(state.msg),
                         "libcurl failed to initialise (curl_global_init: %s); reinstall "
                         "libcurl4 (apt-get install --reinstall libcurl4)",
                         table.curl_easy_strerror(rc));
        }
}

int lazy_curl_load(struct sbx_error *err)
{
        pthread_once(&state.once, load_once);
        return lazy_result(&state, err);
}

const struct lazy_curl_table *lazy_curl(void)
{
        pthread_once(&state.once, load_once);
        lazy_require(&state);
        return &table;
}
