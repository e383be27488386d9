/* log.c - stderr logging. */
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile int current_level = SBX_LOG_INFO;

void sbx_log_set_level(enum sbx_log_level level)
{
        current_level = level;
}

enum sbx_log_level sbx_log_get_level(void)
{
        return (enum sbx_log_level)current_level;
}

void sbx_log(enum sbx_log_level level, const char *fmt, ...)
{
        static const char *const names[] = {"error", "warning", "info", "debug"};
        char line[2048];
        va_list ap;
        int n;

        if ((int)level > current_level)
                return;
        n = snprintf(line, sizeof(line), "vestibule[%d]: %s: ", (int)getpid(), names[level]);
        va_start(ap, fmt);
        vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
        va_end(ap);
        n = (int)strlen(line);
        line[n++] = '\n';
        /* One write(2) per line keeps lines from concurrent threads whole. */
        (void)!write(STDERR_FILENO, line, (size_t)n);
}
