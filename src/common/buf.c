/* buf.c - see buf.h. */
#include "common/buf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/xalloc.h"

#define BUF_FIRST 256
#define READ_STEP 65536

int sbx_buf_reserve(struct sbx_buf *b, size_t more)
{
        size_t need, cap;

        if (more > SIZE_MAX - 1 - b->len)
                return -EFBIG;
        if (b->max && b->len + more > b->max)
                return -EFBIG;
        need = b->len + more + 1;
        if (need <= b->cap)
                return 0;
        cap = b->cap ? b->cap : BUF_FIRST;
        while (cap < need)
                cap = cap > SIZE_MAX / 2 ? need : cap * 2;
        b->data = xrealloc(b->data, cap);
        b->cap = cap;
        b->data[b->len] = '\0';
        return 0;
}

int sbx_buf_add(struct sbx_buf *b, const void *p, size_t n)
{
        int r = sbx_buf_reserve(b, n);

        if (r < 0)
                return r;
        if (n)
                memcpy(b->data + b->len, p, n);
        b->len += n;
        b->data[b->len] = '\0';
        return 0;
}

int sbx_buf_puts(struct sbx_buf *b, const char *s)
{
        return sbx_buf_add(b, s, strlen(s));
}

int sbx_buf_printf(struct sbx_buf *b, const char *fmt, ...)
{
        va_list ap;
        int n, r;

        va_start(ap, fmt);
        n = vsnprintf(NULL, 0, fmt, ap);
        va_end(ap);
        if (n < 0)
                return -EINVAL;
        r = sbx_buf_reserve(b, (size_t)n);
        if (r < 0)
                return r;
        va_start(ap, fmt);
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
        b->len += (size_t)n;
        return 0;
}

int sbx_buf_read_fd(struct sbx_buf *b, int fd)
{
        for (;;) {
                size_t step = READ_STEP;
                ssize_t n;

                if (b->max) {
                        if (b->len == b->max) {
                                char more;
                                do
                                        n = read(fd, &more, 1);
                                while (n < 0 && errno == EINTR);
                                return n == 0 ? 0 : n < 0 ? -errno : -EFBIG;
                        }
                        if (step > b->max - b->len)
                                step = b->max - b->len;
                }
                int r = sbx_buf_reserve(b, step);
                if (r < 0)
                        return r;
                do
                        n = read(fd, b->data + b->len, step);
                while (n < 0 && errno == EINTR);
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return 0;
                b->len += (size_t)n;
                b->data[b->len] = '\0';
        }
}

char *sbx_buf_steal(struct sbx_buf *b, size_t *ret_len)
{
        char *d = b->data ? b->data : xstrdup("");

        if (ret_len)
                *ret_len = b->len;
        b->data = NULL;
        b->len = b->cap = 0;
        return d;
}

void sbx_buf_done(struct sbx_buf *b)
{
        free(b->data);
        b->data = NULL;
        b->len = b->cap = 0;
}
