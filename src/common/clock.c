/* clock.c - the monotonic clock in milliseconds, and deadlines on it (clock.h). */
#include "common/clock.h"

#include <time.h>

uint64_t sbx_now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

struct timespec sbx_deadline_ts(uint64_t ms_from_now)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += (time_t)(ms_from_now / 1000u);
        ts.tv_nsec += (long)(ms_from_now % 1000u) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
        }
        return ts;
}
