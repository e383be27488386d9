/* buf.h - the one growable byte buffer: appended to, always NUL-terminated, doubling as it
 * grows, with an optional cap. Running out of memory aborts (xrealloc, as in crun and
 * bubblewrap), so the only error is the cap: -EFBIG, and then nothing is appended, so the
 * caller can stop a transfer or an output flood cleanly and report it. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

struct sbx_buf {
        char *data; /* NULL until the first byte (or sbx_buf_reserve()); else NUL-terminated */
        size_t len; /* bytes held, the NUL not counted */
        size_t cap; /* bytes allocated */
        size_t max; /* the most bytes it may hold; 0 = no cap. Set before the first append. */
};

/**
 * sbx_buf_reserve() - make room for @more bytes after what @b holds (and the NUL).
 * Return: 0, or -EFBIG when @b would then hold more than @b->max, or the size overflows;
 * @b is then unchanged.
 */
int sbx_buf_reserve(struct sbx_buf *b, size_t more);

/**
 * sbx_buf_add() - append @n bytes at @p (NULL ok when @n is 0).
 * Return: 0, or -EFBIG (over @b->max: nothing appended).
 */
int sbx_buf_add(struct sbx_buf *b, const void *p, size_t n);

/** sbx_buf_puts() - append the string @s, without its NUL. Return: as sbx_buf_add(). */
int sbx_buf_puts(struct sbx_buf *b, const char *s);

/**
 * sbx_buf_printf() - append printf(3)-formatted text.
 * Return: 0, or -EFBIG (nothing appended), -EINVAL for a format vsnprintf refuses.
 */
int sbx_buf_printf(struct sbx_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/**
 * sbx_buf_read_fd() - append what @fd gives until end of file (EINTR retried).
 * Return: 0, -EFBIG when more than @b->max would be held (what fitted is kept), or what
 * read(2) said as a negative errno (EAGAIN included, for a non-blocking @fd).
 */
int sbx_buf_read_fd(struct sbx_buf *b, int fd);

/**
 * sbx_buf_steal() - the data, for the caller to free(); "" (allocated) when empty. @b is
 * emptied (its @max kept). @ret_len: the length, may be NULL.
 */
char *sbx_buf_steal(struct sbx_buf *b, size_t *ret_len);

/** sbx_buf_done() - free what @b holds and empty it (its @max kept). */
void sbx_buf_done(struct sbx_buf *b);
