/* xalloc.h - allocation that aborts on out-of-memory (as crun and bubblewrap do), so ENOMEM
 * is not threaded through every call. */
#pragma once

#include <stddef.h>

/* Each returns new memory the caller frees with free(); none returns NULL: on out-of-memory
 * they write one line to stderr and abort(). A size of 0 is allocated as 1 byte. NULL @s is
 * copied as "". */
void *xmalloc(size_t n);
void *xcalloc(size_t nmemb, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/** xasprintf() - printf into a new heap string; the caller frees it. Never returns NULL. */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
