/* trace.c - the opt-in timing trace. */
#include "common/trace.h"

#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static atomic_ulong trace_runs;

uint64_t sbx_trace_now_us(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void sbx_trace_begin(struct sbx_trace *t, bool on, const char *backend)
{
        *t = (struct sbx_trace){.on = on, .backend = backend};
        if (!on)
                return;
        t->run = atomic_fetch_add(&trace_runs, 1) + 1;
        t->start_us = t->last_us = sbx_trace_now_us();
}

void sbx_trace_span(const struct sbx_trace *t, const char *phase, uint64_t us)
{
        char line[160];
        int n;

        if (!t->on)
                return;
        /* Written whatever VESTIBULE_LOG_LEVEL is: asking for the trace is asking for these. */
        n = snprintf(line, sizeof(line),
                     "vestibule[%d]: debug: trace run=%lu backend=%s phase=%s us=%llu\n",
                     (int)getpid(), t->run, t->backend, phase, (unsigned long long)us);
        if (n > 0 && (size_t)n < sizeof(line))
                (void)!write(STDERR_FILENO, line, (size_t)n);
}

void sbx_trace_lap(struct sbx_trace *t, const char *phase)
{
        uint64_t now;

        if (!t->on)
                return;
        now = sbx_trace_now_us();
        sbx_trace_span(t, phase, now - t->last_us);
        t->last_us = now;
}

void sbx_trace_end(struct sbx_trace *t)
{
        if (!t->on)
                return;
        sbx_trace_span(t, "total", sbx_trace_now_us() - t->start_us);
}
