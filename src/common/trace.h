/* trace.h - the opt-in timing trace (VESTIBULE_TRACE=timing): one stderr line per phase of a
 * sandbox's life, with its duration in microseconds, so scripts/bench can say where the time
 * of a run goes. Off, every call is a branch and nothing else. Thread-safe; each run has its
 * own struct sbx_trace on the stack of the thread that runs it.
 *
 * Line format (stable, parsed by scripts/bench):
 *   vestibule[PID]: debug: trace run=N backend=NAME phase=PHASE us=MICROSECONDS
 * N numbers the runs of this process, so concurrent runs' lines can be told apart. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct sbx_trace {
        bool on;
        const char *backend; /* "native", "container" */
        unsigned long run;   /* this process's run number, from 1 */
        uint64_t start_us;   /* sbx_trace_begin() */
        uint64_t last_us;    /* the previous lap */
};

/** sbx_trace_now_us() - CLOCK_MONOTONIC in µs (async-signal-safe: a cloned child may call it). */
uint64_t sbx_trace_now_us(void);

/** sbx_trace_begin() - start timing one run of @backend; does nothing more when !@on. */
void sbx_trace_begin(struct sbx_trace *t, bool on, const char *backend);

/** sbx_trace_lap() - log @phase as the time since the previous lap (or the begin). */
void sbx_trace_lap(struct sbx_trace *t, const char *phase);

/** sbx_trace_span() - log @phase with a duration measured elsewhere (@us); the lap clock is
 * not moved. For phases timed inside the sandbox's own child. */
void sbx_trace_span(const struct sbx_trace *t, const char *phase, uint64_t us);

/** sbx_trace_end() - log phase "total", the time since sbx_trace_begin(). */
void sbx_trace_end(struct sbx_trace *t);
