/*
 * The pace of shared status listings (beyond upstream): when a cloud
 * adapter's next listing of its instances is useful. Pure functions, no
 * I/O; the runner (runner.c, sm_runner_listing_wait) applies them to the
 * machines in flight, and an adapter asks through its env's listing_wait
 * (adapter.h).
 *
 * Upstream Nodepool polls every instance being created on a fixed period
 * (about a second, one cached listing shared by all), so a server that
 * comes up waits on average half a period, and up to a whole one, before
 * anybody notices: most of a launch's overhead above the cloud's own boot
 * time. Listing more often costs API calls, listing per server costs one
 * call per server and poll. Here the listing follows the servers' expected
 * boot times instead:
 *
 *   - Learn. For each label, a moving estimate of how long its servers
 *     take from the cloud naming them (the create call's answer) until a
 *     listing first shows them ready: mean and mean deviation, each moved
 *     a quarter of the way towards every new sample (as TCP's round-trip
 *     estimator, RFC 6298). What a server's listings tell is a bracket:
 *     not ready in the one that started at lo, ready in the one that
 *     started at hi (the adapter sets the machine's seen_at; the runner
 *     notes lo). A close bracket (a follow-up found it: SM_PACE_TIGHT)
 *     gives hi; a wide one (a listing that came late: the budget, a wave
 *     held for its last server) gives the estimate itself clamped to the
 *     bracket, its lower end moved SM_PACE_FOLLOW on so that the next
 *     first look comes after the failed one (an estimate a little short
 *     made every first look fail and every follow-up wait for the budget;
 *     the label's first sample, with no estimate to clamp, is the
 *     bracket's middle) (sm_boot_est_add_seen), so that late listings do not drag
 *     the estimate up after them: left to itself, an estimate sampled at
 *     hi drifted to the budget's pace (a 1 s boot learnt as 1.75 s, its
 *     first looks aimed 0.7 s late, at the OpenStack bench, issue 25). A
 *     server found ready by a listing before its own first look (a wave
 *     mate's: Share, below) gives no lower a sample than that first look
 *     would have: the estimate is where first looks find their servers
 *     (for the simulators' exact 1 s boot, 1.00-1.10 s at the benches: a
 *     server is named a create call after the cloud starts its boot, the
 *     first look comes SM_PACE_MARGIN before the estimate, and a failed
 *     one pushes it up), which is what the aim relies on.
 *
 *   - Aim. A server named at t is first looked for at t + mean - margin,
 *     margin = max(SM_PACE_MARGIN, 2 x deviation): a little early, so that
 *     a server that boots faster than the estimate is still seen at once,
 *     and the estimate follows it down (a listing that finds it ready gives
 *     an earlier sample). A server not ready by then is looked for again
 *     at the estimate itself (at least SM_PACE_MIN_GAP later), then
 *     SM_PACE_FOLLOW later, the follow-ups spacing out by half the time it
 *     is overdue, up to SM_DEFAULT_POLL (upstream's period): a server
 *     stuck in BUILD costs no more than it does upstream. (Issue 25's
 *     fourth round: with a margin of 0.05 s and the follow-up 0.1 s after
 *     the first look, the first look of a wave often found none of its
 *     servers and the follow-up all of them, 75-95 ms after their boot, at
 *     the OpenStack bench; a 0.02 s margin and the follow-up at the
 *     estimate took the fake bench's "ready listing - boot" p50 from 80 to
 *     29 ms with no more listings. A follow-up due a little before a
 *     wave's next look waits for it: sm_pace_batch. Issue 25's fifth
 *     round: the wave's listing, aimed at its last server's first look,
 *     misses the servers named in the margin before it, and with
 *     SM_PACE_MIN_GAP at 0.05 s their follow-up came 50 ms after it, 30
 *     ms after they were due; the close bracket then moved the estimate
 *     up by those 30 ms (1.03-1.04 s for the simulator's 1 s boot), and
 *     every server of the next waves with it. With the least gap equal to
 *     the margin, 0.02 s, the follow-up comes when they are due, the
 *     estimate stays at 1.00-1.02 s, and "ready listing - boot" went from
 *     26-34 to 13-18 ms at p50 at the OpenStack bench, for two listings a
 *     wave of 50: the budget's 25 servers a listing, 20-22 listings for
 *     500 servers where the late estimate's single listings took 16-17.
 *     With the margin and the gap at 0.01 s the wave's listing misses
 *     only the servers named in its last 10 ms, and fewer waves need a
 *     follow-up: 18-20 listings (2.04 calls per node, where 21-23 made
 *     2.05 in some runs), "ready listing - boot" p50 8-21 ms; a cloud
 *     whose boots vary gets its margin from the deviation, as before.)
 *
 *   - Share. The next listing starts when the earliest machine wants one;
 *     but servers named over a short while (a wave of requests the
 *     launcher works through) are first looked for together: the first
 *     looks due within SM_PACE_HOLD of the earliest are a wave. The wave
 *     pays for listings (one per SM_PACE_PER_LISTING servers, or an
 *     adapter's listing_servers: the budget below); one is kept for a
 *     follow-up of the servers its last listing finds still booting (they
 *     would wait for the next wave's otherwise, up to a period: issue 25's
 *     third round tried spreading all of them, and the OpenStack bench's
 *     p90 went from 0.12-0.27 s to 0.4-0.96 s), and the others are spread
 *     over it (sm_pace_aim): with
 *     T of them, the next is aimed at the first look of its (n/T)-th
 *     server, so that a server waits a fraction of the wave's spread, not
 *     half of it. A wave of 50 at 25 servers a listing pays two: one at
 *     its last first look and the follow-up, as before; at 10 a listing
 *     (an adapter whose calls per node allow it), five: four spread over
 *     the wave. Never sooner than SM_PACE_MIN_GAP after the
 *     last listing started, nor sooner than the provider's rate allows. A
 *     machine with no estimate (the provider's first launches: the
 *     provider-wide estimate stands in for a label's once there is one; a
 *     server an earlier launcher named) is looked for as it ages: the
 *     oldest such sets the pace, SM_PACE_COLD after it was named, then
 *     every half its age (sm_pace_want), never later than upstream's
 *     period after the last listing; the first wave was answered on
 *     upstream's period, and at the OpenStack bench (no warm-up) its 50
 *     servers were the p90, 0.55-0.6 s after their boot. Deletes (and failed
 *     attempts' unwinding) wait on upstream's period too (SM_PACE_IDLE),
 *     but nobody waits on them: a launch's listing due up to SM_PACE_RIDE
 *     later takes them along instead of a listing of their own
 *     (sm_pace_ride: two periods, so that the deletes of a wave just
 *     fulfilled wait for the next wave's first look), which at the bench
 *     found nothing for the launches and spent their budget. Anything
 *     else waiting on a listing (quota and leak listings) rides along with
 *     those. When nothing waits, the adapter does not list.
 *
 *   - Budget. However the servers come, listings cost no more calls per
 *     node than upstream's period at the same throughput: two token
 *     buckets (sm_pace_budget), one refilled at one listing per
 *     SM_DEFAULT_POLL (upstream's period), one at one listing per
 *     SM_PACE_PER_LISTING servers (an adapter's listing_servers, adapter.h,
 *     where its calls per node allow more); a listing may start when
 *     either has a token and takes one from both (the second's may owe a
 *     burst, so that while waves pay their own way its refill does not add
 *     a second budget; the servers' owes nothing, so that a wave after a
 *     stretch of listings the second paid for still pays its own at once),
 *     so listings keep to about the larger of the two rates. The server
 *     bucket is what a wave pays with: 50 servers named together bring two
 *     listings (its last first look and a follow-up) when they are due,
 *     where the second's bucket, drained by the waves before, would make
 *     the follow-up wait up to a second. A server pays when its first look
 *     comes due (or a listing shows it ready before), not when it is
 *     named (sm_pace_paid_at): paid when named, a wave's share went to the
 *     small waves and follow-ups listed before its first looks (ZooKeeper
 *     smearing a wave into a few), and its later servers waited a whole
 *     period for the second's bucket (the AWS and fake benches' 2 s boots,
 *     issue 25's fourth round). A follow-up neither bucket pays may borrow
 *     one listing from the servers to come (sm_pace_may_borrow: the
 *     servers' bucket then owes it, at most one), so that a wave's
 *     stragglers, still booting at its follow-up, are looked for again
 *     soon rather than a period later; the next wave pays it back.
 *     SM_PACE_PER_LISTING = 25 keeps a wave's calls per node at the bench's (0.04 listings a node,
 *     2.04 calls with the create and the delete).
 *
 * So in a steady state a wave of servers booting together costs the
 * listings it pays for, spread over its servers' boots, where a fixed
 * period lists every second whoever waits: servers noticed within a
 * fraction of the wave's spread (up to SM_PACE_HOLD) of being ready, with
 * no more listings than upstream's. A steady stream of servers (no waves: the
 * requests come one by one, or ZooKeeper's latency smears the waves over
 * a second) is looked for at the larger of the budget's rates, which is
 * upstream's period below SM_PACE_PER_LISTING servers a second: then a
 * server waits for the next listing as upstream's would, half a period on
 * average.
 */
#include "drivers/statemachine/statemachine.h"

#include <math.h>
#include <stdlib.h>

#include <event2/event.h>

void
sm_boot_est_add(struct sm_boot_est *e, double sample)
{
	if (!(sample >= 0) || !isfinite(sample))
		return;
	if (e->n == 0) {
		e->mean = sample;
		e->dev = sample / 4;
	} else {
		e->dev += (fabs(sample - e->mean) - e->dev) / 4;
		e->mean += (sample - e->mean) / 4;
	}
	e->n++;
}

double
sm_boot_est_add_seen(struct sm_boot_est *e, double lo, double hi)
{
	double sample;

	if (!isfinite(lo) || !isfinite(hi) || !(lo >= 0) || !(hi >= lo))
		return -1;
	if (lo > 0 && hi - lo <= SM_PACE_TIGHT) {
		sample = hi; /* looked for closely: as it came */
	} else {
		/* not ready at lo: the next first look (SM_PACE_MARGIN early)
		 * should come after it, or the estimate sits where every first
		 * look fails and every follow-up waits for the budget */
		if (lo > 0)
			lo = fmin(hi, lo + SM_PACE_FOLLOW);
		if (e->n == 0)
			/* the first: the middle of what is known (the lower
			 * end alone, at a cold start's widely spaced looks,
			 * left the estimate 0.15 s short at the OpenStack
			 * bench, and the next wave's first look fell before
			 * its servers' boot: five listings for that wave) */
			sample = lo > 0 ? (lo + hi) / 2 : hi;
		else
			/* found ready by a look before its first (a wave's
			 * listing aimed at a server named before it:
			 * sm_pace_aim) tells no more than its first look
			 * would have: the estimate stays where first looks
			 * find their servers */
			sample = fmin(fmax(hi, sm_boot_est_lead(e)), fmax(lo, e->mean));
	}
	sm_boot_est_add(e, sample);
	return sample;
}

double
sm_boot_est_lead(const struct sm_boot_est *e)
{
	if (e == NULL || e->n == 0)
		return -1;
	return fmax(0, e->mean - fmax(SM_PACE_MARGIN, 2 * e->dev));
}

double
sm_pace_want(const struct sm_boot_est *e, double named_at, double last_start)
{
	double first, overdue;

	if (e == NULL || e->n == 0) {
		/* no estimate (the provider's first launch, a server taken over
		 * from an earlier launcher): looked for SM_PACE_COLD after it is
		 * named, then again as it ages, every half its age (at least
		 * SM_PACE_FOLLOW, at most upstream's period), so that the first
		 * wave is seen within about a third of its boot, not up to a
		 * period after it (issue 25: the OpenStack bench's first 50
		 * servers were its p90, 0.55-0.6 s late) */
		overdue = last_start - named_at;
		if (overdue < SM_PACE_COLD - SM_PACE_EARLY) /* nor later than upstream's */
			return fmin(named_at + SM_PACE_COLD, last_start + SM_DEFAULT_POLL);
		return last_start + fmin(SM_DEFAULT_POLL, fmax(SM_PACE_FOLLOW, overdue / 2));
	}
	first = named_at + sm_boot_est_lead(e);
	if (last_start < first - SM_PACE_EARLY)
		return first; /* not looked for since it is due */
	if (last_start < named_at + e->mean - SM_PACE_EARLY)
		/* its first look, a little early, did not find it: again at
		 * the estimate itself, not SM_PACE_FOLLOW on (a wave's first
		 * look found none of its servers, its follow-up all of them
		 * 75-95 ms after their boot, at the OpenStack bench: issue 25's
		 * fourth round) */
		return fmax(named_at + e->mean, last_start + SM_PACE_MIN_GAP);
	overdue = fmax(0, last_start - (named_at + e->mean));
	return last_start + fmin(SM_DEFAULT_POLL, SM_PACE_FOLLOW + overdue / 2);
}

double
sm_pace_start(double want, double last_start, double min_gap)
{
	return fmax(want, last_start + fmax(min_gap, SM_PACE_MIN_GAP));
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double
sm_pace_aim(double *due, size_t n, double per)
{
	size_t t, k;

	if (n == 0)
		return INFINITY;
	if (!(per > 0))
		per = SM_PACE_PER_LISTING;
	qsort(due, n, sizeof(*due), cmp_double);
	/* the wave: the first looks this listing may serve (sm_pace_batch
	 * holds the earliest at most SM_PACE_HOLD); a wave named later (the
	 * rest of the requests a quota round let through) pays its own */
	for (t = 1; t < n && due[t] <= due[0] + SM_PACE_HOLD; t++)
		;
	n = t;
	/* the listings it pays for, but one: kept for a follow-up of the
	 * servers its last listing finds still booting (without it they
	 * would wait for the next wave's, up to a period) */
	t = (size_t)floor((double)n / per + 1e-9);
	if (t < 3)
		return due[n - 1];
	t--;
	k = (n + t - 1) / t;
	return due[k - 1];
}

double
sm_pace_batch(double first_min, double first_aim, double other_min)
{
	double first = first_min == INFINITY ? INFINITY : fmin(first_aim, first_min + SM_PACE_HOLD);

	/* a follow-up due a little before a wave's next look waits for it:
	 * the servers a spread listing missed are looked for by the next
	 * (issue 25's fourth round: each paid for a follow-up of its own, and
	 * the wave's last ones waited for the budget) */
	if (first <= other_min + SM_PACE_FOLLOW)
		return first;
	return fmin(first, other_min);
}

double
sm_pace_ride(double create_want, double del_min)
{
	if (create_want <= del_min + SM_PACE_RIDE)
		return create_want;
	return del_min;
}

/* The servers named since the last listing noted, in tokens. */
static double
named_tokens(const struct sm_pace_bucket *b, unsigned long long named)
{
	double per = b->per > 0 ? b->per : SM_PACE_PER_LISTING;

	return named > b->named ? (double)(named - b->named) / per : 0;
}

double
sm_pace_budget(struct sm_pace_bucket *b, double last_start, unsigned long long named)
{
	if (last_start > b->last) {
		/* a listing started at last_start: it took a token of each */
		if (b->n == 0) {
			b->tokens = b->stokens = SM_PACE_BURST;
		} else {
			b->tokens = fmin(SM_PACE_BURST,
					 b->tokens + (last_start - b->last) / SM_DEFAULT_POLL);
			b->stokens = fmin(SM_PACE_BURST, b->stokens + named_tokens(b, named));
		}
		/* the second's may owe up to a burst: while the servers pay
		 * (waves), its refill does not add up to a second budget; the
		 * servers' owes nothing, so that a wave named after listings
		 * the second paid for (a stream) pays its own first look */
		if (b->borrow && b->stokens < 1 - 1e-9 && b->tokens < 1 - 1e-9)
			/* neither paid: a follow-up that borrowed from the
			 * servers to come (sm_pace_may_borrow): owed, at most
			 * one (a launch held a period owes nothing: its wave
			 * would pay for it, then miss its own listing) */
			b->stokens = fmax(-1, b->stokens - 1);
		else
			b->stokens = fmax(0, b->stokens - 1);
		b->tokens = fmax(-SM_PACE_BURST, b->tokens - 1);
		b->last = last_start;
		b->named = named;
		b->borrow = 0;
		b->n++;
	}
	/* (a wave's fractions of a token add up to whole ones: 1e-9 for
	 * their rounding) */
	if (b->n == 0 || b->tokens >= 1 - 1e-9 || b->stokens + named_tokens(b, named) >= 1 - 1e-9)
		return last_start;
	return b->last + (1 - b->tokens) * SM_DEFAULT_POLL;
}

int
sm_pace_may_borrow(const struct sm_pace_bucket *b, unsigned long long paid)
{
	return b->n > 0 && b->stokens + named_tokens(b, paid) >= -1e-9;
}

double
sm_pace_paid_at(const struct sm_pace_bucket *b, unsigned long long paid, const double *due,
		size_t n)
{
	double per = b->per > 0 ? b->per : SM_PACE_PER_LISTING, have, need;
	size_t k;

	have = b->n == 0 ? SM_PACE_BURST : b->stokens + named_tokens(b, paid);
	if (have >= 1 - 1e-9)
		return -INFINITY;
	/* the servers whose first looks come due pay their share then */
	need = ceil((1 - have) * per - 1e-9);
	if (need < 1)
		need = 1;
	k = (size_t)need;
	return k <= n ? due[k - 1] : INFINITY;
}

void
sm_listing_arm(struct event *ev, double in, double since, double pace_wait)
{
	struct timeval tv;

	if (in < 0)
		in = pace_wait;
	else if (evtimer_pending(ev, NULL))
		return;
	else
		in = since >= in ? 0 : in - since;
	tv.tv_sec = (time_t)in;
	tv.tv_usec = (suseconds_t)((in - floor(in)) * 1e6);
	evtimer_add(ev, &tv);
}
