/* SPDX-License-Identifier: MIT */
/* The monotonic clock, in the units the daemon's timings and timeouts use. */
#ifndef LUP_CLOCK_H
#define LUP_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t lup_now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Seconds, for durations that are logged. */
static inline double lup_now_s(void)
{
        return (double)lup_now_ns() / 1e9;
}

#endif
