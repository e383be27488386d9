/* archive_lazy.c - libarchive, loaded on first use, as curl_lazy.c does for libcurl. Only
 * `setup` unpacks archives, but linked at build time libarchive brings ~15 libraries (libxml2,
 * ICU, libstdc++, ACL, nettle...) that the dynamic loader maps and relocates at every start
 * of every command, a native run included. This file defines the libarchive functions
 * src/setup calls; the first call dlopen()s libarchive.so.13. When it cannot be loaded the
 * constructors return NULL, which `setup` reports (the log names the missing library). */
#include <archive.h>
#include <archive_entry.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

#include "common/log.h"

#define ARCHIVE_SONAME "libarchive.so.13"

/* Each function: its type, its pointer, and a forwarder that fails like an allocation
 * failure (NULL, ARCHIVE_FATAL) when the library is not there. */
#define LA_FUNCS(X)                                                                                \
        X(void, entry_copy_hardlink, (struct archive_entry * e, const char *s), (e, s), )          \
        X(void, entry_copy_pathname, (struct archive_entry * e, const char *s), (e, s), )          \
        X(__LA_MODE_T, entry_filetype, (struct archive_entry * e), (e), 0)                         \
        X(const char *, entry_hardlink, (struct archive_entry * e), (e), NULL)                     \
        X(const char *, entry_pathname, (struct archive_entry * e), (e), NULL)                     \
        X(__LA_MODE_T, entry_perm, (struct archive_entry * e), (e), 0)                             \
        X(void, entry_set_fflags, (struct archive_entry * e, unsigned long s, unsigned long c),    \
          (e, s, c), )                                                                             \
        X(void, entry_set_perm, (struct archive_entry * e, __LA_MODE_T m), (e, m), )              \
        X(la_int64_t, entry_size, (struct archive_entry * e), (e), 0)                              \
        X(void, entry_xattr_clear, (struct archive_entry * e), (e), )                              \
        X(const char *, error_string, (struct archive * a), (a), why)                              \
        X(int, read_data_block,                                                                    \
          (struct archive * a, const void **b, size_t *n, la_int64_t *o), (a, b, n, o),           \
          ARCHIVE_FATAL)                                                                           \
        X(int, read_free, (struct archive * a), (a), ARCHIVE_FATAL)                                \
        X(struct archive *, read_new, (void), (), NULL)                                            \
        X(int, read_next_header, (struct archive * a, struct archive_entry * *e), (a, e),         \
          ARCHIVE_FATAL)                                                                           \
        X(int, read_open,                                                                          \
          (struct archive * a, void *d, archive_open_callback *o, archive_read_callback *r,        \
           archive_close_callback *c),                                                             \
          (a, d, o, r, c), ARCHIVE_FATAL)                                                          \
        X(int, read_support_filter_bzip2, (struct archive * a), (a), ARCHIVE_FATAL)                \
        X(int, read_support_filter_gzip, (struct archive * a), (a), ARCHIVE_FATAL)                 \
        X(int, read_support_filter_none, (struct archive * a), (a), ARCHIVE_FATAL)                 \
        X(int, read_support_filter_xz, (struct archive * a), (a), ARCHIVE_FATAL)                   \
        X(int, read_support_filter_zstd, (struct archive * a), (a), ARCHIVE_FATAL)                 \
        X(int, read_support_format_tar, (struct archive * a), (a), ARCHIVE_FATAL)                  \
        X(int, write_close, (struct archive * a), (a), ARCHIVE_FATAL)                              \
        X(la_ssize_t, write_data_block, (struct archive * a, const void *b, size_t n, la_int64_t o), \
          (a, b, n, o), ARCHIVE_FATAL)                                                             \
        X(struct archive *, write_disk_new, (void), (), NULL)                                      \
        X(int, write_disk_set_options, (struct archive * a, int f), (a, f), ARCHIVE_FATAL)        \
        X(int, write_finish_entry, (struct archive * a), (a), ARCHIVE_FATAL)                       \
        X(int, write_free, (struct archive * a), (a), ARCHIVE_FATAL)                               \
        X(int, write_header, (struct archive * a, struct archive_entry * e), (a, e),              \
          ARCHIVE_FATAL)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool loaded;
static char why[256];

#define LA_PTR(ret, name, params, args, fail) static ret(*p_##name) params;
LA_FUNCS(LA_PTR)
static void (*p_set_error)(struct archive *, int, const char *, ...);

static void load(void)
{
        void *h = dlopen(ARCHIVE_SONAME, RTLD_NOW | RTLD_LOCAL);
        const char *e;

        if (!h) {
                e = dlerror();
                snprintf(why, sizeof(why),
                         "libarchive cannot be loaded (%s): install libarchive13 "
                         "(apt-get install libarchive13)",
                         e ? e : ARCHIVE_SONAME);
                log_error("%s", why);
                return;
        }
#define LA_SYM(ret, name, params, args, fail)                                                      \
        *(void **)&p_##name = dlsym(h, "archive_" #name);                                          \
        if (!p_##name) {                                                                           \
                snprintf(why, sizeof(why),                                                         \
                         "libarchive is too old: no archive_%s in " ARCHIVE_SONAME, #name);        \
                log_error("%s", why);                                                              \
                return;                                                                            \
        }
        LA_FUNCS(LA_SYM)
        *(void **)&p_set_error = dlsym(h, "archive_set_error");
        if (!p_set_error) {
                snprintf(why, sizeof(why), "libarchive is too old: no archive_set_error");
                log_error("%s", why);
                return;
        }
        loaded = true; /* the handle stays open for the process's life */
}

static bool ready(void)
{
        pthread_once(&once, load);
        return loaded;
}

#define LA_DEF(ret, name, params, args, fail)                                                      \
        ret archive_##name params                                                                  \
        {                                                                                          \
                if (!ready())                                                                      \
                        return fail;                                                               \
                return p_##name args;                                                              \
        }
LA_FUNCS(LA_DEF)

void archive_set_error(struct archive *a, int err, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;

        if (!ready())
                return;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        p_set_error(a, err, "%s", msg);
}
