/* clock.h - the server's one clock for deadlines and durations: CLOCK_MONOTONIC, which no
 * settimeofday(2) or NTP step moves. clock_gettime(2). */
#pragma once

#include <stdint.h>

/** sbx_now_ms() - CLOCK_MONOTONIC in milliseconds (since an unspecified start: only
 * differences mean anything). Cannot fail. */
uint64_t sbx_now_ms(void);
