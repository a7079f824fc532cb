/*
 * Token bucket on a libevent timer. See ratelimit.h.
 */
#include "lib/net/ratelimit.h"

#include <sys/queue.h>
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include <event2/event.h>
#include "lib/core/clock.h"

struct ratelimit_wait {
	TAILQ_ENTRY(ratelimit_wait) entry;
	struct ratelimit *rl;
	void (*cb)(void *arg);
	void *arg;
};

struct ratelimit {
	struct event_base *base;
	double rate;   /* tokens/s; <= 0 unlimited */
	double burst;  /* >= 1 */
	double tokens; /* at time `stamp` */
	double stamp;
	double paused_until;
	double last_grant; /* ratelimit_now() of the latest grant */
	int granting;	   /* inside timer_cb's grant callback */
	struct event *timer;
	TAILQ_HEAD(, ratelimit_wait) queue;
	size_t nqueued;
	unsigned long long granted;
};

double
ratelimit_now(void)
{
	return np_mono_s();
}

static void
refill(struct ratelimit *rl, double now)
{
	if (rl->rate <= 0) {
		rl->tokens = rl->burst;
	} else if (now > rl->stamp) {
		rl->tokens = fmin(rl->burst, rl->tokens + (now - rl->stamp) * rl->rate);
	}
	rl->stamp = now;
}

/* Seconds until one token may be granted (0 = now). */
static double
wait_time(struct ratelimit *rl, double now)
{
	double t = 0;

	refill(rl, now);
	if (rl->paused_until > now)
		t = rl->paused_until - now;
	if (rl->rate > 0 && rl->tokens < 1.0)
		t = fmax(t, (1.0 - rl->tokens) / rl->rate);
	return t;
}

static void
arm(struct ratelimit *rl, double secs)
{
	struct timeval tv;

	/* round up to the microsecond so the timer never fires a hair early
	 * and spins */
	secs = ceil(secs * 1e6) / 1e6;
	tv = np_tv_of(secs);
	event_add(rl->timer, &tv);
}

/*
 * The moment the bucket holds a token for the head of the queue (its
 * slot): at once when it does, else when the refill brings the token, and
 * never inside a pause. With waiters queued the bucket holds less than a
 * token after each grant, so its cap (burst) does not come into it.
 */
static double
next_slot(const struct ratelimit *rl)
{
	double slot = rl->stamp;

	if (rl->rate > 0 && rl->tokens < 1.0)
		slot += (1.0 - rl->tokens) / rl->rate;
	return fmax(slot, rl->paused_until);
}

/* One token granted at slot (<= now), the bucket taken as it was then. */
static void
grant_at(struct ratelimit *rl, double slot)
{
	if (rl->rate > 0 && slot > rl->stamp) {
		/* the bucket as it was at the slot: one token */
		rl->tokens = fmin(rl->burst, rl->tokens + (slot - rl->stamp) * rl->rate);
		rl->stamp = slot;
	}
	rl->tokens -= 1.0;
	rl->granted++;
	rl->last_grant = slot;
}

/*
 * Grants the queue its slots. A loop busy with other work runs this
 * timer late: every slot that passed meanwhile is granted now, each grant
 * stamped with its slot (ratelimit_last_grant), so that the queue goes at
 * `rate` (the slots 1/rate apart, as upstream's RateLimiter spaces its
 * calls) and not at one grant per loop turn (a launcher's busy loop
 * granted 250 a second at rate 1000, issue 25). Nothing is ever granted
 * before its slot.
 */
static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ratelimit *rl = arg;
	struct ratelimit_wait *w;
	double now, slot;

	(void)fd;
	(void)what;
	while ((w = TAILQ_FIRST(&rl->queue)) != NULL) {
		now = ratelimit_now();
		if (rl->rate <= 0) {
			refill(rl, now);
			slot = fmax(now, rl->paused_until);
		} else {
			slot = next_slot(rl);
		}
		if (slot > now) {
			arm(rl, slot - now);
			return;
		}
		grant_at(rl, slot);
		TAILQ_REMOVE(&rl->queue, w, entry);
		rl->nqueued--;
		/* the callback may take again (ratelimit_take: the next slot,
		 * when it passed too), queue more or cancel others; re-read
		 * the head each time round */
		rl->granting = 1;
		w->cb(w->arg);
		rl->granting = 0;
		free(w);
	}
}

struct ratelimit *
ratelimit_new(struct event_base *base, double rate, double burst)
{
	struct ratelimit *rl = calloc(1, sizeof(*rl));

	if (rl == NULL)
		return NULL;
	rl->base = base;
	rl->rate = rate;
	rl->burst = burst < 1 ? 1 : burst;
	rl->tokens = rl->burst;
	rl->stamp = ratelimit_now();
	TAILQ_INIT(&rl->queue);
	rl->timer = event_new(base, -1, 0, timer_cb, rl);
	if (rl->timer == NULL) {
		free(rl);
		return NULL;
	}
	return rl;
}

void
ratelimit_free(struct ratelimit *rl)
{
	struct ratelimit_wait *w;

	if (rl == NULL)
		return;
	while ((w = TAILQ_FIRST(&rl->queue)) != NULL) {
		TAILQ_REMOVE(&rl->queue, w, entry);
		free(w);
	}
	event_free(rl->timer);
	free(rl);
}

void
ratelimit_set_rate(struct ratelimit *rl, double rate)
{
	refill(rl, ratelimit_now());
	rl->rate = rate;
	if (!TAILQ_EMPTY(&rl->queue)) {
		event_del(rl->timer);
		arm(rl, wait_time(rl, ratelimit_now()));
	}
}

int
ratelimit_take(struct ratelimit *rl, void (*cb)(void *arg), void *arg, struct ratelimit_wait **wait)
{
	struct ratelimit_wait *w;
	double t;

	if (wait != NULL)
		*wait = NULL;
	if (rl->granting && rl->rate > 0 && TAILQ_EMPTY(&rl->queue)) {
		/*
		 * A take from inside a late grant's callback is the queue's
		 * next in line, as a caller that keeps one waiter at a time
		 * and its own queue behind it (lib/net/http.c) takes: it gets
		 * the next slot when that passed too. Refilled to now, the
		 * bucket (capped at burst) would drop the slots the late timer
		 * owes, and such a caller went at two grants per busy loop
		 * turn (RunInstances ~5 ms apart at rate 1000, issue 25).
		 */
		double slot = next_slot(rl);

		if (slot <= ratelimit_now()) {
			grant_at(rl, slot);
			return 1;
		}
	} else if (TAILQ_EMPTY(&rl->queue) && (t = wait_time(rl, ratelimit_now())) <= 0) {
		rl->tokens -= 1.0;
		rl->granted++;
		rl->last_grant = rl->stamp; /* wait_time's now */
		return 1;
	}
	w = calloc(1, sizeof(*w));
	if (w == NULL)
		abort();
	w->rl = rl;
	w->cb = cb;
	w->arg = arg;
	TAILQ_INSERT_TAIL(&rl->queue, w, entry);
	rl->nqueued++;
	/* (no refill here while others wait: capped at burst, it would drop
	 * the slots a late timer owes the queue) */
	if (!event_pending(rl->timer, EV_TIMEOUT, NULL))
		arm(rl, fmax(0, next_slot(rl) - ratelimit_now()));
	if (wait != NULL)
		*wait = w;
	return 0;
}

void
ratelimit_cancel(struct ratelimit_wait *w)
{
	struct ratelimit *rl;

	if (w == NULL)
		return;
	rl = w->rl;
	TAILQ_REMOVE(&rl->queue, w, entry);
	rl->nqueued--;
	free(w);
	if (TAILQ_EMPTY(&rl->queue))
		event_del(rl->timer);
}

void
ratelimit_pause_until(struct ratelimit *rl, double until)
{
	if (until <= rl->paused_until)
		return;
	rl->paused_until = until;
	if (!TAILQ_EMPTY(&rl->queue)) {
		event_del(rl->timer);
		arm(rl, wait_time(rl, ratelimit_now()));
	}
}

double
ratelimit_last_grant(const struct ratelimit *rl)
{
	return rl->last_grant;
}

size_t
ratelimit_queued(const struct ratelimit *rl)
{
	return rl->nqueued;
}

unsigned long long
ratelimit_granted(const struct ratelimit *rl)
{
	return rl->granted;
}
