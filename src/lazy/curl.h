/* lazy/curl.h - libcurl (libcurl.so.4, Debian package libcurl4), loaded on first use.
 *
 * Include this instead of <curl/curl.h>. Only the container backend (src/engine) and setup's
 * registry pulls use libcurl; a native server never maps it, nor the ~40 libraries it drags
 * in. Call lazy_curl_load() at the entry points (engine_connect, engine_backend_new*, the
 * registry client) before the first curl call; it also runs curl_global_init() once, which
 * libcurl wants done before any other thread uses it. When libcurl is missing the error says
 * "libcurl4 is not installed ...: apt-get install libcurl4". See lazy/lazy.h for the
 * mechanism. curl_easy_setopt/getinfo lose curl's GCC type-check macros (typecheck-gcc.h)
 * here; the calls are still checked against the real variadic prototypes.
 */
#pragma once

#include <curl/curl.h>

#include "common/error.h"

/* Every libcurl function the code calls; add a name here when a new one is needed. */
#define LAZY_CURL_SYMBOLS(X)                                                                       \
        X(curl_easy_cleanup)                                                                       \
        X(curl_easy_escape)                                                                        \
        X(curl_easy_getinfo)                                                                       \
        X(curl_easy_init)                                                                          \
        X(curl_easy_perform)                                                                       \
        X(curl_easy_recv)                                                                          \
        X(curl_easy_reset)                                                                         \
        X(curl_easy_send)                                                                          \
        X(curl_easy_setopt)                                                                        \
        X(curl_easy_strerror)                                                                      \
        X(curl_free)                                                                               \
        X(curl_global_init)                                                                        \
        X(curl_multi_add_handle)                                                                   \
        X(curl_multi_cleanup)                                                                      \
        X(curl_multi_fdset)                                                                        \
        X(curl_multi_info_read)                                                                    \
        X(curl_multi_init)                                                                         \
        X(curl_multi_perform)                                                                      \
        X(curl_multi_poll)                                                                         \
        X(curl_multi_remove_handle)                                                                \
        X(curl_multi_timeout)                                                                      \
        X(curl_multi_wakeup)                                                                       \
        X(curl_slist_append)                                                                       \
        X(curl_slist_free_all)

struct lazy_curl_table {
/* NOLINTNEXTLINE(bugprone-macro-parentheses): a declarator cannot be parenthesised */
#define LAZY_FIELD_(name) __typeof__(&name) name;
        LAZY_CURL_SYMBOLS(LAZY_FIELD_)
#undef LAZY_FIELD_
};

/**
 * lazy_curl_load() - load libcurl and resolve every name above, once per process, then run
 * curl_global_init(CURL_GLOBAL_DEFAULT) once. Thread-safe; cheap after the first call.
 * Return: 0, or -ENOENT (libcurl4 not installed) / -ENOSYS (a libcurl without one of the
 * functions) / -EIO (curl_global_init failed), with @err saying which package to install.
 */
int lazy_curl_load(struct sbx_error *err);

/** lazy_curl() - the resolved table; loads first, aborts if that fails (see lazy.h). */
const struct lazy_curl_table *lazy_curl(void);

#ifndef LAZY_CURL_IMPL
#undef curl_easy_setopt
#undef curl_easy_getinfo
#undef curl_multi_setopt
#undef curl_share_setopt
#define curl_easy_cleanup (lazy_curl()->curl_easy_cleanup)
#define curl_easy_escape (lazy_curl()->curl_easy_escape)
#define curl_easy_getinfo (lazy_curl()->curl_easy_getinfo)
#define curl_easy_init (lazy_curl()->curl_easy_init)
#define curl_easy_perform (lazy_curl()->curl_easy_perform)
#define curl_easy_recv (lazy_curl()->curl_easy_recv)
#define curl_easy_reset (lazy_curl()->curl_easy_reset)
#define curl_easy_send (lazy_curl()->curl_easy_send)
#define curl_easy_setopt (lazy_curl()->curl_easy_setopt)
#define curl_easy_strerror (lazy_curl()->curl_easy_strerror)
#define curl_free (lazy_curl()->curl_free)
#define curl_global_init (lazy_curl()->curl_global_init)
#define curl_multi_add_handle (lazy_curl()->curl_multi_add_handle)
#define curl_multi_cleanup (lazy_curl()->curl_multi_cleanup)
#define curl_multi_fdset (lazy_curl()->curl_multi_fdset)
#define curl_multi_info_read (lazy_curl()->curl_multi_info_read)
#define curl_multi_init (lazy_curl()->curl_multi_init)
#define curl_multi_perform (lazy_curl()->curl_multi_perform)
#define curl_multi_poll (lazy_curl()->curl_multi_poll)
#define curl_multi_remove_handle (lazy_curl()->curl_multi_remove_handle)
#define curl_multi_timeout (lazy_curl()->curl_multi_timeout)
#define curl_multi_wakeup (lazy_curl()->curl_multi_wakeup)
#define curl_slist_append (lazy_curl()->curl_slist_append)
#define curl_slist_free_all (lazy_curl()->curl_slist_free_all)
#endif
