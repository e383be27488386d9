/* xalloc.c - aborting allocators. */
#include "common/xalloc.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void __attribute__((noreturn)) oom(void)
{
        static const char m[] = "vestibule: out of memory, aborting\n";
        (void)!write(STDERR_FILENO, m, sizeof(m) - 1);
        abort();
}

void *xmalloc(size_t n)
{
        void *p = malloc(n ? n : 1);
        if (!p)
                oom();
        return p;
}

void *xcalloc(size_t nmemb, size_t size)
{
        void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);
        if (!p)
                oom();
        return p;
}

void *xrealloc(void *p, size_t n)
{
        p = realloc(p, n ? n : 1);
        if (!p)
                oom();
        return p;
}

void *sbx_greedy_realloc(void **p, size_t *cap, size_t need, size_t size)
{
        size_t max = SIZE_MAX / (size ? size : 1), n;

        if (need <= *cap)
                return *p;
        if (need > max)
                oom();
        n = *cap > max / 2 ? max : *cap * 2;
        if (n < need)
                n = need;
        if (n < 16 && max >= 16)
                n = 16;
        *p = xrealloc(*p, n * size);
        *cap = n;
        return *p;
}

char *xstrdup(const char *s)
{
        char *p = strdup(s ? s : "");
        if (!p)
                oom();
        return p;
}

char *xstrndup(const char *s, size_t n)
{
        char *p = strndup(s ? s : "", n);
        if (!p)
                oom();
        return p;
}

char *xasprintf(const char *fmt, ...)
{
        va_list ap;
        char *s = NULL;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (r < 0)
                oom();
        return s;
}
