/*
 * ppclock.h - the agent's clocks, read one way everywhere: CLOCK_MONOTONIC
 * for durations, deadlines and rate limits (it never jumps), any clock for
 * the few places that stamp profiles with wall time. Header only: a
 * clock_gettime and a multiplication.
 */
#ifndef PUSHPROF_PPCLOCK_H
#define PUSHPROF_PPCLOCK_H

#include <stdint.h>
#include <time.h>

/* Clock c in nanoseconds (CLOCK_REALTIME: since the epoch). */
static inline int64_t pp_clock_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t pp_mono_ns(void)
{
	return (uint64_t)pp_clock_ns(CLOCK_MONOTONIC);
}

#endif
