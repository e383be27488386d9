/* error.h - the one error type every module returns: a positive errno plus a message that
 * names what failed and how to fix it. Fixed size, so a cloned child can fill it without
 * allocating and send it, as is, over a socketpair. */
#pragma once

#include <stddef.h>

struct sbx_error {
        int code;       /* positive errno; 0 = no error */
        char msg[1024]; /* what failed, on what, how to fix it; NUL-terminated (1024: a
                         * Blocked: from auto carries both backends' reasons and fixes) */
};

/**
 * sbx_fail() - fill @err and return -@code.
 * @err:  may be NULL (then only the return value carries the failure).
 * @code: a positive errno (EINVAL, ENOENT, ...). 0 is treated as EIO.
 * Return: -@code, so callers can write `return sbx_fail(err, EINVAL, "...")`.
 */
int sbx_fail(struct sbx_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/**
 * sbx_wrap() - prepend "ctx: " to @err->msg (truncating the tail if it no longer fits).
 * Return: -@err->code (or -EIO if @err holds no code), so it can end a failing path.
 */
int sbx_wrap(struct sbx_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** sbx_error_clear() - reset @err to "no error". */
void sbx_error_clear(struct sbx_error *err);
