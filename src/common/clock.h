/* clock.h - the server's one clock for deadlines and durations: CLOCK_MONOTONIC, which no
 * settimeofday(2) or NTP step moves. clock_gettime(2). */
#pragma once

#include <stdint.h>
#include <time.h>

/** sbx_now_ms() - CLOCK_MONOTONIC in milliseconds (since an unspecified start: only
 * differences mean anything). Cannot fail. */
uint64_t sbx_now_ms(void);

/** sbx_deadline_ts() - the CLOCK_MONOTONIC time @ms_from_now milliseconds from now, as the
 * struct timespec pthread_cond_timedwait(3p) wants from a condition variable whose clock is
 * CLOCK_MONOTONIC (pthread_condattr_setclock(3p)); tv_nsec normalised to [0, 1e9). Cannot
 * fail. */
struct timespec sbx_deadline_ts(uint64_t ms_from_now);
