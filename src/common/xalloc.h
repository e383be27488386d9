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

/**
 * sbx_greedy_realloc() - make the array *@p (room for *@cap elements of @size bytes) hold at
 * least @need elements, as systemd's GREEDY_REALLOC (src/basic/alloc-util.h) does: when it is
 * too small it grows geometrically, to max(@need, 2 * *@cap, 16) elements, so n appends cost
 * O(n) in all. Elements past the old *@cap are uninitialised. A size that would overflow
 * size_t, and out-of-memory, abort (as xrealloc()).
 * Return: *@p (possibly moved); *@cap updated. Use it through GREEDY_REALLOC().
 */
void *sbx_greedy_realloc(void **p, size_t *cap, size_t need, size_t size);

/** GREEDY_REALLOC() - sbx_greedy_realloc() for the array @array (any pointer type) with room
 * for @cap elements (a size_t lvalue): afterwards it holds at least @need elements. */
#define GREEDY_REALLOC(array, cap, need)                                                           \
        sbx_greedy_realloc((void **)&(array), &(cap), (need), sizeof(*(array)))
