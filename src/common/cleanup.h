/* cleanup.h - scope-bound cleanup (__attribute__((cleanup))) for memory and fds. Helpers for
 * third-party types live in the module that uses that library. */
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))

static inline void freep(void *ptr)
{
        free(*(void **)ptr);
}

static inline void closep(int *fd)
{
        if (*fd >= 0)
                close(*fd);
}

static inline void fclosep(FILE **f)
{
        if (*f)
                fclose(*f);
}

static inline void strv_freep(char ***v)
{
        if (*v) {
                for (char **p = *v; *p; p++)
                        free(*p);
                free(*v);
        }
}

#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)
#define _cleanup_strv_free_ _cleanup_(strv_freep)

/* Take ownership away from a cleanup variable: returns its value and sets it to NULL. */
#define TAKE_PTR(p)                                                                                \
        ({                                                                                         \
                __typeof__(p) _t = (p);                                                            \
                (p) = NULL;                                                                        \
                _t;                                                                                \
        })
/* The same for an fd: returns it and sets the variable to -1. */
#define TAKE_FD(fd)                                                                                \
        ({                                                                                         \
                int _t = (fd);                                                                     \
                (fd) = -1;                                                                         \
                _t;                                                                                \
        })

#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))
