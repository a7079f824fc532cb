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

/*
 * Issue 25: a loop busy with other work runs the limiter's timer late.
 * The slots that passed meanwhile are the queue's: granted at once, each
 * stamped with its own slot (1/rate apart from the first grant on, never
 * later than the grant), so that the queue goes at `rate` and not at one
 * grant per busy turn; and nothing is granted before its slot (the grants
 * never outrun 1 + elapsed x rate).
 */
#define QUEUED 8

struct stall {
	struct ratelimit *rl;
	struct event_base *base;
	double t0; /* the first grant (the bucket starts full) */
	double stamp[QUEUED + 1], at[QUEUED + 1];
	int n;
};

static void
stall_granted(void *arg)
{
	struct stall *s = arg;

	s->stamp[s->n] = ratelimit_last_grant(s->rl);
	s->at[s->n] = ratelimit_now();
	if (++s->n == QUEUED + 1)
		event_base_loopbreak(s->base);
}

/* the loop's other work: holds the loop well past the first slots */
static void
hold_loop(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	busy(*(double *)arg);
}

Test(ratelimit, a_late_timer_grants_every_slot_that_passed)
{
	struct stall s = {0};
	double hold = 0.05; /* five slots at 100/s */
	struct event *ev;
	struct timeval now0 = {0, 0};
	int i;

	s.base = event_base_new();
	s.rl = ratelimit_new(s.base, 100, 1); /* slots 0.01 s apart */
	cr_assert_eq(ratelimit_take(s.rl, stall_granted, &s, NULL), 1);
	stall_granted(&s);
	s.t0 = s.stamp[0];
	for (i = 0; i < QUEUED; i++)
		cr_assert_eq(ratelimit_take(s.rl, stall_granted, &s, NULL), 0);
	/* a callback due at once that keeps the loop busy past the slots */
	ev = evtimer_new(s.base, hold_loop, &hold);
	evtimer_add(ev, &now0);
	event_base_dispatch(s.base);
	cr_assert_eq(s.n, QUEUED + 1);
	for (i = 1; i <= QUEUED; i++) {
		/* each on its own slot, granted at or after it */
		cr_assert_float_eq(s.stamp[i] - s.stamp[i - 1], 0.01, 1e-6, "grants %d, %d: %.6f",
				   i - 1, i, s.stamp[i] - s.stamp[i - 1]);
		cr_assert_leq(s.stamp[i], s.at[i], "grant %d", i);
		/* never ahead of the rate */
		cr_assert_leq(i, 1 + (s.at[i] - s.t0) * 100 + 1e-6, "grant %d at %.6f", i,
			      s.at[i] - s.t0);
	}
	/* the slots that passed while the loop was held are not lost: the
	 * grants stay on the grid from the first (a grant per busy turn, as
	 * before, stamped each one a turn late and drifted off it) */
	cr_assert_geq(s.at[1] - s.t0, hold, "held %.6f", s.at[1] - s.t0);
	for (i = 1; i <= QUEUED; i++)
		cr_assert_float_eq(s.stamp[i] - s.t0, 0.01 * i, 1e-6, "grant %d at slot %.6f", i,
				   s.stamp[i] - s.t0);
	event_free(ev);
	ratelimit_free(s.rl);
	event_base_free(s.base);
}

/*
 * Issue 25: lib/net/http.c keeps one waiter in the limiter and its own
 * queue behind it: each grant's callback starts a call and takes again
 * for the next (pump), until a take queues. After a late timer the takes
 * made inside the grant callback get the slots that passed too, each on
 * its own slot: the calls go at `rate`, not at two per busy loop turn (the
 * take refilled the bucket to now, capped at one token, and dropped the
 * rest).
 */
struct pumper {
	struct ratelimit *rl;
	struct event_base *base;
	double t0;
	double stamp[QUEUED + 1], at[QUEUED + 1];
	int n;
	int turns; /* grant callbacks entered (a take answered 0 each) */
};

static void pump_granted(void *arg);

/* Start calls while the limiter grants at once; queue one waiter. */
static void
pump_calls(struct pumper *p)
{
	while (p->n <= QUEUED) {
		if (!ratelimit_take(p->rl, pump_granted, p, NULL))
			return;
		p->stamp[p->n] = ratelimit_last_grant(p->rl);
		p->at[p->n] = ratelimit_now();
		if (++p->n == QUEUED + 1)
			event_base_loopbreak(p->base);
	}
}

static void
pump_granted(void *arg)
{
	struct pumper *p = arg;

	p->turns++;
	p->stamp[p->n] = ratelimit_last_grant(p->rl);
	p->at[p->n] = ratelimit_now();
	if (++p->n == QUEUED + 1) {
		event_base_loopbreak(p->base);
		return;
	}
	pump_calls(p);
}

Test(ratelimit, takes_inside_a_late_grant_get_the_slots_that_passed)
{
	struct pumper p = {0};
	double hold = 0.05; /* five slots at 100/s */
	struct event *ev;
	struct timeval now0 = {0, 0};
	int i;

	p.base = event_base_new();
	p.rl = ratelimit_new(p.base, 100, 1); /* slots 0.01 s apart */
	pump_calls(&p);			      /* the first at once (a full bucket), one waiter */
	cr_assert_eq(p.n, 1);
	cr_assert_eq(ratelimit_queued(p.rl), 1);
	p.t0 = p.stamp[0];
	ev = evtimer_new(p.base, hold_loop, &hold);
	evtimer_add(ev, &now0);
	event_base_dispatch(p.base);
	cr_assert_eq(p.n, QUEUED + 1);
	for (i = 1; i <= QUEUED; i++) {
		/* each on its own slot, never ahead of it */
		cr_assert_float_eq(p.stamp[i] - p.t0, 0.01 * i, 1e-6, "grant %d at slot %.6f", i,
				   p.stamp[i] - p.t0);
		cr_assert_leq(p.stamp[i], p.at[i], "grant %d", i);
		cr_assert_leq(i, 1 + (p.at[i] - p.t0) * 100 + 1e-6, "grant %d at %.6f", i,
			      p.at[i] - p.t0);
	}
	/* the late turn granted every slot that passed while the loop was
	 * held (at least five), not one and the take after it */
	cr_assert_lt(p.turns, QUEUED - 3, "%d grant callbacks for %d calls", p.turns, QUEUED);
	event_free(ev);
	ratelimit_free(p.rl);
	event_base_free(p.base);
}
