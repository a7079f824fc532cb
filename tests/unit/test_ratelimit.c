/*
 * lib/net/ratelimit.c on a real libevent loop: the grant time a caller
 * stamps its call with (ratelimit_last_grant) is 1/rate apart from one
 * grant to the next, whatever the loop does between a grant and its
 * callback, and it is the moment the grant was made, not a later one.
 */
#include <criterion/criterion.h>

#include <event2/event.h>

#include "lib/net/ratelimit.h"

#define CALLS 5

struct run {
	struct ratelimit *rl;
	struct event_base *base;
	double stamp[CALLS]; /* ratelimit_last_grant() in each grant */
	double ran[CALLS];   /* ratelimit_now() as each callback runs */
	int n;
};

/* A busy loop turn after every grant, as a launcher's loop under load:
 * the callback runs well after its grant. */
static void
busy(double secs)
{
	double end = ratelimit_now() + secs;

	while (ratelimit_now() < end)
		;
}

static void
granted(void *arg)
{
	struct run *r = arg;

	r->stamp[r->n] = ratelimit_last_grant(r->rl);
	busy(r->n % 2 == 0 ? 0.03 : 0); /* every other call held up */
	r->ran[r->n] = ratelimit_now();
	if (++r->n == CALLS)
		event_base_loopbreak(r->base);
}

Test(ratelimit, last_grant_is_spaced_by_rate_however_late_the_callback)
{
	struct run r = {0};
	int i;

	r.base = event_base_new();
	r.rl = ratelimit_new(r.base, 10, 1); /* 0.1 s apart */
	cr_assert_eq(ratelimit_last_grant(r.rl), 0);
	for (i = 0; i < CALLS; i++) {
		if (ratelimit_take(r.rl, granted, &r, NULL))
			granted(&r); /* the first: the bucket starts full */
	}
	cr_assert_eq(ratelimit_queued(r.rl), CALLS - 1);
	event_base_dispatch(r.base);
	cr_assert_eq(r.n, CALLS);
	cr_assert_eq(ratelimit_granted(r.rl), CALLS);
	for (i = 0; i < CALLS; i++) {
		/* the grant, not the callback's own later moment */
		cr_assert_leq(r.stamp[i], r.ran[i], "call %d", i);
		if (i > 0)
			cr_assert_geq(r.stamp[i] - r.stamp[i - 1], 0.1 - 1e-9,
				      "grants %d and %d %.6f s apart", i - 1, i,
				      r.stamp[i] - r.stamp[i - 1]);
	}
	ratelimit_free(r.rl);
	event_base_free(r.base);
}

Test(ratelimit, last_grant_of_an_unlimited_limiter_is_the_take)
{
	struct event_base *base = event_base_new();
	struct ratelimit *rl = ratelimit_new(base, 0, 1);
	double before = ratelimit_now(), after;

	cr_assert_eq(ratelimit_take(rl, NULL, NULL, NULL), 1);
	after = ratelimit_now();
	cr_assert_geq(ratelimit_last_grant(rl), before);
	cr_assert_leq(ratelimit_last_grant(rl), after);
	ratelimit_free(rl);
	event_base_free(base);
}
