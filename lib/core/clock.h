/*
 * The monotonic clock (CLOCK_MONOTONIC), nodepoold's one time base for
 * timeouts, ages and durations: it never jumps with the wall clock. Wall
 * time (a record's timestamps, upstream's "state_time") stays time(2) or
 * CLOCK_REALTIME, read where it is written.
 */
#ifndef NP_CLOCK_H
#define NP_CLOCK_H

#include <stdint.h>
#include <sys/time.h>
#include <time.h>

/* Monotonic seconds (an arbitrary origin, fractions to the nanosecond). */
static inline double
np_mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Monotonic milliseconds (the same origin as np_mono_s). */
static inline int64_t
np_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A duration in seconds as a struct timeval (libevent's timers); a
 * negative one is 0. */
static inline struct timeval
np_tv_of(double s)
{
	struct timeval tv;

	if (s < 0)
		s = 0;
	tv.tv_sec = (time_t)s;
	tv.tv_usec = (suseconds_t)((s - (double)tv.tv_sec) * 1e6);
	return tv;
}

#endif
