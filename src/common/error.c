/* error.c - struct sbx_error helpers. */
#include "common/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int sbx_fail(struct sbx_error *err, int code, const char *fmt, ...)
{
        va_list ap;

        if (code <= 0)
                code = EIO;
        if (err) {
                err->code = code;
                va_start(ap, fmt);
                vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
                va_end(ap);
        }
        return -code;
}

int sbx_wrap(struct sbx_error *err, const char *fmt, ...)
{
        char prefix[sizeof(err->msg)], old[sizeof(err->msg)];
        va_list ap;

        if (!err)
                return -EIO;
        if (err->code <= 0)
                err->code = EIO;
        va_start(ap, fmt);
        vsnprintf(prefix, sizeof(prefix), fmt, ap);
        va_end(ap);
        memcpy(old, err->msg, sizeof(old));
        /* The result is used only to tell GCC that truncating the tail is intended. */
        if (snprintf(err->msg, sizeof(err->msg), "%s: %s", prefix, old) >= (int)sizeof(err->msg))
                err->msg[sizeof(err->msg) - 1] = '\0';
        return -err->code;
}

void sbx_error_clear(struct sbx_error *err)
{
        if (!err)
                return;
        err->code = 0;
        err->msg[0] = '\0';
}
