/*
 * A per-provider call-rate limiter on a libevent loop: a token bucket
 * refilled at `rate` tokens per second, holding at most `burst` tokens, as
 * Nodepool's RateLimiter (driver/utils.py) spaces a provider's cloud calls
 * by 1/rate seconds (the `rate` provider option, calls per second). Waiting
 * is a timer, never a sleep.
 *
 * Callers ask for one token per call: granted at once when a token is
 * there (and nobody is queued ahead), else queued FIFO and granted by a
 * callback on the loop when the bucket refills. The queue is served on
 * its slots, 1/rate apart: a loop busy with other work runs that callback
 * late, and then it grants every slot that passed meanwhile at once (each
 * stamped with its slot, ratelimit_last_grant), so that a busy loop does
 * not slow the queue below `rate`; nothing is granted before its slot. A
 * take from inside a grant callback counts as queued behind it (the next
 * slot, granted at once when it passed too): a caller that keeps one
 * waiter at a time and its own queue behind it (lib/net/http.c) goes at
 * `rate` too. rate <= 0 means unlimited:
 * every request is granted at once unless the limiter is paused.
 *
 * ratelimit_pause_until() holds every grant until a monotonic time (a
 * cloud's HTTP 429 with Retry-After: the whole provider backs off, not only
 * the call that got the answer).
 *
 * Not thread-safe: use from the loop's thread.
 */
#ifndef NP_RATELIMIT_H
#define NP_RATELIMIT_H

#include <stddef.h>

struct event_base;
struct ratelimit;
struct ratelimit_wait;

/*
 * New limiter on base. rate: tokens per second (<= 0: unlimited); burst:
 * most tokens held (< 1 means 1: calls strictly 1/rate apart, as
 * upstream). The bucket starts full. Returns NULL only on allocation
 * failure.
 */
struct ratelimit *ratelimit_new(struct event_base *base, double rate, double burst);

/* Free the limiter; queued waiters are dropped without their callbacks.
 * NULL is a no-op. Not from inside a grant callback. */
void ratelimit_free(struct ratelimit *rl);

/* Change the rate (<= 0: unlimited); queued waiters are re-timed. */
void ratelimit_set_rate(struct ratelimit *rl, double rate);

/*
 * Ask for one token. Returns 1 when granted now (cb is NOT called; *wait
 * is set to NULL). Returns 0 when queued: cb(arg) runs on the loop once
 * the token is granted, and *wait (if wait is not NULL) gets a handle for
 * ratelimit_cancel(), valid until cb is entered.
 */
int ratelimit_take(struct ratelimit *rl, void (*cb)(void *arg), void *arg,
		   struct ratelimit_wait **wait);

/* Drop a queued waiter without calling it. NULL is a no-op. */
void ratelimit_cancel(struct ratelimit_wait *w);

/* Grant nothing before the monotonic time `until` (seconds, see
 * ratelimit_now()); an earlier time than a pause in force is ignored. */
void ratelimit_pause_until(struct ratelimit *rl, double until);

/* Monotonic seconds (np_mono_s, lib/core/clock.h), the limiter's time base. */
double ratelimit_now(void);

/* The ratelimit_now() time of the latest grant (0 before the first): for
 * a caller that stamps a call with the moment `rate` let it go, the moment
 * the spacing holds for (its callback runs later, on a busy loop). */
double ratelimit_last_grant(const struct ratelimit *rl);

/* Waiters queued now; grants made so far. */
size_t ratelimit_queued(const struct ratelimit *rl);
unsigned long long ratelimit_granted(const struct ratelimit *rl);

#endif
