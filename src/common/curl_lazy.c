/* curl_lazy.c - libcurl, loaded on first use. libcurl and the ~30 libraries it pulls in (TLS,
 * LDAP, SSH, IDN, HTTP/2...) are only needed by the container backend and `setup`'s registry
 * pulls; linked at build time the dynamic loader maps and relocates all of them at every
 * start, which made `vestibule-mcp run` with the native backend pay ~half of its time before
 * main() and kept them in the server's RSS. So the binary does not link libcurl: this file
 * defines the libcurl functions the code calls, and the first call dlopen()s libcurl.so.4 and
 * forwards to it. When libcurl cannot be loaded the functions fail the way libcurl's own do on
 * an allocation failure (NULL handle, CURLE_FAILED_INIT), and curl_easy_strerror() names the
 * missing library, so the engine's errors say what to install. */
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>

#define CURL_SONAME "libcurl.so.4"

static struct {
        CURLcode (*global_init)(long);
        CURL *(*easy_init)(void);
        CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
        CURLcode (*easy_perform)(CURL *);
        void (*easy_cleanup)(CURL *);
        void (*easy_reset)(CURL *);
        CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
        const char *(*easy_strerror)(CURLcode);
        char *(*easy_escape)(CURL *, const char *, int);
        void (*free_)(void *);
        struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
        void (*slist_free_all)(struct curl_slist *);
        CURLM *(*multi_init)(void);
        CURLMcode (*multi_add_handle)(CURLM *, CURL *);
        CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
        CURLMcode (*multi_perform)(CURLM *, int *);
        CURLMcode (*multi_poll)(CURLM *, struct curl_waitfd[], unsigned, int, int *);
        CURLMsg *(*multi_info_read)(CURLM *, int *);
        CURLMcode (*multi_cleanup)(CURLM *);
} fn;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool loaded;
static char why[256];

static void load(void)
{
        void *h = dlopen(CURL_SONAME, RTLD_NOW | RTLD_LOCAL);
        const char *e;

        if (!h) {
                e = dlerror();
                snprintf(why, sizeof(why),
                         "libcurl cannot be loaded (%s): install libcurl4 (apt-get install "
                         "libcurl4)",
                         e ? e : CURL_SONAME);
                return;
        }
#define SYM(field, name)                                                                           \
        do {                                                                                       \
                *(void **)&fn.field = dlsym(h, name);                                              \
                if (!fn.field) {                                                                   \
                        snprintf(why, sizeof(why),                                                 \
                                 "libcurl is too old: no %s in " CURL_SONAME                       \
                                 " (install libcurl4 7.66 or later)",                              \
                                 name);                                                            \
                        return;                                                                    \
                }                                                                                  \
        } while (0)
        SYM(global_init, "curl_global_init");
        SYM(easy_init, "curl_easy_init");
        SYM(easy_setopt, "curl_easy_setopt");
        SYM(easy_perform, "curl_easy_perform");
        SYM(easy_cleanup, "curl_easy_cleanup");
        SYM(easy_reset, "curl_easy_reset");
        SYM(easy_getinfo, "curl_easy_getinfo");
        SYM(easy_strerror, "curl_easy_strerror");
        SYM(easy_escape, "curl_easy_escape");
        SYM(free_, "curl_free");
        SYM(slist_append, "curl_slist_append");
        SYM(slist_free_all, "curl_slist_free_all");
        SYM(multi_init, "curl_multi_init");
        SYM(multi_add_handle, "curl_multi_add_handle");
        SYM(multi_remove_handle, "curl_multi_remove_handle");
        SYM(multi_perform, "curl_multi_perform");
        SYM(multi_poll, "curl_multi_poll");
        SYM(multi_info_read, "curl_multi_info_read");
        SYM(multi_cleanup, "curl_multi_cleanup");
#undef SYM
        loaded = true; /* the handle stays open for the process's life */
}

static bool ready(void)
{
        pthread_once(&once, load);
        return loaded;
}

CURLcode curl_global_init(long flags)
{
        return ready() ? fn.global_init(flags) : CURLE_FAILED_INIT;
}

CURL *curl_easy_init(void)
{
        return ready() ? fn.easy_init() : NULL;
}

/* The option's type is encoded in its number (curl.h: CURLOPTTYPE_*): forward the one
 * argument with that type. */
CURLcode curl_easy_setopt(CURL *h, CURLoption opt, ...)
{
        va_list ap;
        CURLcode r;

        if (!ready() || !h)
                return CURLE_FAILED_INIT;
        va_start(ap, opt);
        if (opt < CURLOPTTYPE_OBJECTPOINT)
                r = fn.easy_setopt(h, opt, va_arg(ap, long));
        else if (opt < CURLOPTTYPE_FUNCTIONPOINT)
                r = fn.easy_setopt(h, opt, va_arg(ap, void *));
        else if (opt < CURLOPTTYPE_OFF_T)
                r = fn.easy_setopt(h, opt, va_arg(ap, void (*)(void)));
        else if (opt < CURLOPTTYPE_BLOB)
                r = fn.easy_setopt(h, opt, va_arg(ap, curl_off_t));
        else
                r = fn.easy_setopt(h, opt, va_arg(ap, void *));
        va_end(ap);
        return r;
}

CURLcode curl_easy_perform(CURL *h)
{
        return ready() && h ? fn.easy_perform(h) : CURLE_FAILED_INIT;
}

void curl_easy_cleanup(CURL *h)
{
        if (ready() && h)
                fn.easy_cleanup(h);
}

void curl_easy_reset(CURL *h)
{
        if (ready() && h)
                fn.easy_reset(h);
}

/* Every CURLINFO takes one pointer to where the answer goes. */
CURLcode curl_easy_getinfo(CURL *h, CURLINFO info, ...)
{
        va_list ap;
        CURLcode r;

        if (!ready() || !h)
                return CURLE_FAILED_INIT;
        va_start(ap, info);
        r = fn.easy_getinfo(h, info, va_arg(ap, void *));
        va_end(ap);
        return r;
}

const char *curl_easy_strerror(CURLcode code)
{
        return ready() ? fn.easy_strerror(code) : why;
}

char *curl_easy_escape(CURL *h, const char *s, int len)
{
        return ready() ? fn.easy_escape(h, s, len) : NULL;
}

void curl_free(void *p)
{
        if (ready() && p)
                fn.free_(p);
}

struct curl_slist *curl_slist_append(struct curl_slist *l, const char *s)
{
        return ready() ? fn.slist_append(l, s) : NULL;
}

void curl_slist_free_all(struct curl_slist *l)
{
        if (ready() && l)
                fn.slist_free_all(l);
}

CURLM *curl_multi_init(void)
{
        return ready() ? fn.multi_init() : NULL;
}

CURLMcode curl_multi_add_handle(CURLM *m, CURL *h)
{
        return ready() ? fn.multi_add_handle(m, h) : CURLM_BAD_HANDLE;
}

CURLMcode curl_multi_remove_handle(CURLM *m, CURL *h)
{
        return ready() ? fn.multi_remove_handle(m, h) : CURLM_BAD_HANDLE;
}

CURLMcode curl_multi_perform(CURLM *m, int *running)
{
        return ready() ? fn.multi_perform(m, running) : CURLM_BAD_HANDLE;
}

CURLMcode curl_multi_poll(CURLM *m, struct curl_waitfd extra[], unsigned n, int timeout_ms,
                          int *ret)
{
        return ready() ? fn.multi_poll(m, extra, n, timeout_ms, ret) : CURLM_BAD_HANDLE;
}

CURLMsg *curl_multi_info_read(CURLM *m, int *left)
{
        return ready() ? fn.multi_info_read(m, left) : NULL;
}

CURLMcode curl_multi_cleanup(CURLM *m)
{
        return ready() ? fn.multi_cleanup(m) : CURLM_BAD_HANDLE;
}
