/*
 * Running state machines on the loop, and on top of that one node's launch
 * and one instance's deletion. See statemachine.h.
 *
 * Upstream polls every create and delete machine from two threads about
 * once a second. Here each machine has its own libevent timer: it is
 * advanced when the adapter says a poll is useful (retry_in) or when the
 * adapter wakes it (a cloud call answered), so a thousand machines waiting
 * for their clouds cost nothing between events, and an instant cloud
 * completes a launch in a few loop turns.
 *
 * Most clouds answer a machine's "is it up yet?" through one listing
 * shared by every machine waiting (the adapter's); when that listing runs
 * is paced from here (sm_runner_listing_wait): from each label's learnt
 * boot time, so that a server is seen soon after it comes up without
 * listing more often than upstream's period. pace.c says how.
 */
#include "drivers/statemachine/statemachine.h"
#include "lib/core/xalloc.h"

#include <sys/queue.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "lib/core/log.h"
#include "lib/ops/metrics.h"
#include "lib/net/nodescan.h"
#include "lib/core/clock.h"

static void
arm(struct event *ev, double secs)
{
	struct timeval tv;

	if (secs <= 0) {
		event_active(ev, EV_TIMEOUT, 0);
		return;
	}
	secs = ceil(secs * 1e6) / 1e6;
	tv.tv_sec = (time_t)secs;
	tv.tv_usec = (suseconds_t)((secs - (double)tv.tv_sec) * 1e6);
	event_add(ev, &tv);
}

/* ---- instances ----------------------------------------------------------------- */

struct sm_instance *
sm_instance_new(void)
{
	struct sm_instance *i = calloc(1, sizeof(*i));

	if (i == NULL)
		abort();
	i->slot = -1;
	i->metadata = json_object();
	drv_quota_init(&i->quota, 0, 1, 0);
	return i;
}

void
sm_instance_free(struct sm_instance *i)
{
	if (i == NULL)
		return;
	free(i->external_id);
	free(i->interface_ip);
	free(i->public_ipv4);
	free(i->public_ipv6);
	free(i->private_ipv4);
	free(i->private_ipv6);
	free(i->cloud);
	free(i->region);
	free(i->az);
	free(i->host_id);
	json_decref(i->metadata);
	json_decref(i->driver_data);
	free(i->username);
	free(i->python_path);
	free(i->shell_type);
	free(i->connection_type);
	np_strv_clear(&i->host_keys);
	json_decref(i->node_attributes);
	json_decref(i->connection_port_obj);
	drv_quota_clear(&i->quota);
	free(i);
}

void
sm_set_str(char **field, const char *v)
{
	char *n = xstrdup(v);

	free(*field);
	*field = n;
}

/* ---- runs ------------------------------------------------------------------------ */

struct sm_run {
	TAILQ_ENTRY(sm_run) entry;
	TAILQ_ENTRY(sm_run) ready_entry; /* on r->ready while queued */
	int queued;
	struct sm_runner *r;
	struct sm_machine *m;
	struct event *ev; /* the poll timer; firing queues the run */
	double deadline;  /* monotonic; 0: none */
	double timeout;
	sm_run_done done;
	sm_run_progress progress;
	void *arg;
	struct sm_launch *launch; /* the launch whose create machine this
				     runs, or NULL (deletes) */
};

enum lphase {
	LP_CREATE,  /* a create machine runs */
	LP_UNWIND,  /* deleting an attempt's instance (before a retry, or
		       after a cancel) */
	LP_SCAN,    /* nodescan */
	LP_CONSOLE, /* fetching the console log of a failed scan */
};

struct sm_launch {
	TAILQ_ENTRY(sm_launch) entry;
	struct sm_runner *r;
	struct np_node *node; /* NULL once cancelled */
	char *node_id;
	const struct sm_label *label;
	char *image_external_id, *az, *hostname;
	json_t *metadata;
	const struct np_request *request;
	int retries, attempt;
	double launch_timeout, boot_timeout;
	int use_internal_ip;
	enum lphase phase;
	struct sm_run *run;
	struct nodescan_req *scan;
	struct event *timer; /* delayed unwind retry */
	char *instance_id;   /* the current attempt's instance, once named */
	char *resume_id;     /* the first attempt takes this instance over (or NULL) */
	double unwind_deadline;
	char *fail_msg; /* why the attempt failed (while unwinding or
			   fetching the console) */
	int cancelled;
	double t_start;
	/* launch phases (metrics.h), monotonic seconds of this attempt: its
	 * create call, the cloud naming the server (0: not yet), the scan */
	char *provider;
	double t_attempt, t_named, t_scan;
	/* the starts of the last two listings that began after t_named and
	 * did not show the server ready (0: none), the boot sample's lower
	 * bound (the last may be the one that did: see create_done) */
	double t_lo, t_lo_prev;
	/* this attempt's server has paid its share of the listings (the
	 * budget: pace.c), its first look having come due */
	int paid;
	sm_launch_done done;
	void (*named)(void *arg);
	void *arg;
};

struct sm_delete {
	TAILQ_ENTRY(sm_delete) entry;
	struct sm_runner *r;
	char *id;
	struct sm_run *run;
	struct event *later; /* the NULL-id completion */
	sm_done_cb done;
	void *arg;
};

#define SM_BOOT_RING 1024

struct sm_runner {
	struct event_base *base;
	const struct sm_adapter_ops *ops;
	struct sm_adapter *a;
	struct nodescan *ns;
	TAILQ_HEAD(, sm_run) runs;
	TAILQ_HEAD(, sm_run) ready; /* runs due for an advance() */
	struct event *pump_ev;
	int pump_scheduled;
	TAILQ_HEAD(, sm_launch) launches;
	TAILQ_HEAD(, sm_delete) deletes;
	struct sm_runner_stats st;
	/* boot estimates (pace.c): per label name, and provider-wide */
	struct boot_est {
		char *label;
		struct sm_boot_est e;
	} * ests;
	size_t nests;
	struct sm_boot_est est_all;
	/* sm_runner_listing_wait's last answer, valid while gen is */
	unsigned long long gen, pace_gen;
	double pace_last, pace_gap, pace_start;
	struct sm_pace_bucket budget;
	double *dues; /* sm_runner_listing_wait's first looks (sm_pace_aim) */
	size_t dues_cap;
	unsigned long long paid; /* servers that paid their share (launch_pay), in all */
	double lo_last;		 /* the last listing start noted in t_lo */
	/* the boots (named -> the create machine done) of the last
	 * SM_BOOT_RING launches, for the dump's percentiles */
	double boots[SM_BOOT_RING];
	unsigned long long nboots;
};

static void
run_free(struct sm_run *run)
{
	struct sm_runner *r = run->r;

	TAILQ_REMOVE(&r->runs, run, entry);
	if (run->queued)
		TAILQ_REMOVE(&r->ready, run, ready_entry);
	r->st.runs--;
	r->gen++;
	event_free(run->ev);
	run->m->fw_run = NULL;
	run->m->ops->free(run->m);
	free(run);
}

/*
 * Advances are made by one pump event, at most SM_ADVANCES_PER_TURN per
 * turn of the loop; the rest wait for the next turn (a zero timer, which
 * libevent runs after polling for I/O). So a thousand machines due at
 * once (a wave of servers booting together) never hold the loop for
 * long: ZooKeeper replies and other timers get their turn in between.
 */
#define SM_ADVANCES_PER_TURN 32

static void advance_run(struct sm_run *run);

static void
pump_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sm_runner *r = arg;
	struct sm_run *run;
	struct timeval zero = {0, 0};
	int n = 0;

	(void)fd;
	(void)what;
	/* pump_scheduled stays set while we work: runs queued meanwhile
	 * wait for the next turn */
	while (n < SM_ADVANCES_PER_TURN && (run = TAILQ_FIRST(&r->ready)) != NULL) {
		TAILQ_REMOVE(&r->ready, run, ready_entry);
		run->queued = 0;
		advance_run(run);
		n++;
	}
	if (TAILQ_EMPTY(&r->ready))
		r->pump_scheduled = 0;
	else
		event_add(r->pump_ev, &zero);
}

static void
enqueue(struct sm_run *run)
{
	struct sm_runner *r = run->r;

	if (run->queued)
		return;
	run->queued = 1;
	TAILQ_INSERT_TAIL(&r->ready, run, ready_entry);
	if (!r->pump_scheduled) {
		r->pump_scheduled = 1;
		event_active(r->pump_ev, EV_TIMEOUT, 0);
	}
}

static void
run_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	enqueue(arg);
}

static void
advance_run(struct sm_run *run)
{
	struct sm_machine *m = run->m;
	struct sm_instance *inst = NULL;
	enum sm_status st;
	double now = np_mono_s(), t;

	event_del(run->ev); /* woken early: drop the pending poll */
	if (run->deadline > 0 && now >= run->deadline) {
		m->error = SM_E_TIMEOUT;
		snprintf(m->error_msg, sizeof(m->error_msg), "timed out after %.0f s (state %s)",
			 run->timeout, m->state ? m->state : "?");
		st = SM_ERROR;
	} else {
		m->retry_in = -1;
		st = m->ops->advance(m, &inst);
		run->r->st.advances++;
		if (st == SM_AGAIN) {
			t = m->retry_in < 0 ? SM_DEFAULT_POLL : m->retry_in;
			if (run->deadline > 0 && np_mono_s() + t > run->deadline)
				t = fmax(0, run->deadline - np_mono_s());
			arm(run->ev, t);
			if (run->progress != NULL)
				run->progress(m, run->arg); /* may cancel the run: last */
			return;
		}
		if (st == SM_ERROR && m->error == SM_E_NONE)
			m->error = SM_E_FAILED;
	}
	/* finished: report, then free the machine */
	run->r->gen++;
	TAILQ_REMOVE(&run->r->runs, run, entry);
	if (run->queued) /* woken from inside advance() */
		TAILQ_REMOVE(&run->r->ready, run, ready_entry);
	run->r->st.runs--;
	event_free(run->ev);
	m->fw_run = NULL;
	run->done(st, inst, m, run->arg);
	m->ops->free(m);
	free(run);
}

struct sm_run *
sm_run_start(struct sm_runner *r, struct sm_machine *m, double timeout, sm_run_done done,
	     sm_run_progress progress, void *arg)
{
	struct sm_run *run = calloc(1, sizeof(*run));

	if (run == NULL)
		abort();
	run->r = r;
	run->m = m;
	run->timeout = timeout;
	run->deadline = timeout > 0 ? np_mono_s() + timeout : 0;
	run->done = done;
	run->progress = progress;
	run->arg = arg;
	run->ev = event_new(r->base, -1, 0, run_cb, run);
	if (run->ev == NULL)
		abort();
	m->fw_run = run;
	TAILQ_INSERT_TAIL(&r->runs, run, entry);
	r->st.runs++;
	r->gen++;
	enqueue(run);
	return run;
}

void
sm_run_cancel(struct sm_run *run)
{
	if (run != NULL)
		run_free(run);
}

void
sm_machine_wake(struct sm_machine *m)
{
	struct sm_run *run = m->fw_run;

	if (run != NULL)
		enqueue(run);
}

/* ---- the runner --------------------------------------------------------------------- */

struct sm_runner *
sm_runner_new(struct event_base *base, const struct sm_adapter_ops *ops, struct sm_adapter *a,
	      struct nodescan *ns)
{
	struct sm_runner *r = calloc(1, sizeof(*r));

	if (r == NULL)
		return NULL;
	r->base = base;
	r->ops = ops;
	r->a = a;
	r->ns = ns;
	r->budget.per = ops->listing_servers;
	TAILQ_INIT(&r->runs);
	TAILQ_INIT(&r->ready);
	r->pump_ev = event_new(base, -1, 0, pump_cb, r);
	if (r->pump_ev == NULL) {
		free(r);
		return NULL;
	}
	TAILQ_INIT(&r->launches);
	TAILQ_INIT(&r->deletes);
	return r;
}

static void launch_free(struct sm_launch *l);
static void delete_free(struct sm_delete *d);

void
sm_runner_free(struct sm_runner *r)
{
	struct sm_launch *l;
	struct sm_delete *d;
	struct sm_run *run;

	if (r == NULL)
		return;
	while ((l = TAILQ_FIRST(&r->launches)) != NULL)
		launch_free(l);
	while ((d = TAILQ_FIRST(&r->deletes)) != NULL)
		delete_free(d);
	while ((run = TAILQ_FIRST(&r->runs)) != NULL)
		run_free(run);
	while (r->nests > 0)
		free(r->ests[--r->nests].label);
	free(r->ests);
	free(r->dues);
	event_free(r->pump_ev);
	free(r);
}

void
sm_runner_get_stats(const struct sm_runner *r, struct sm_runner_stats *st)
{
	*st = r->st;
}

static const char *
phase_name(enum lphase p)
{
	switch (p) {
	case LP_CREATE:
		return "creating";
	case LP_UNWIND:
		return "deleting failed attempt";
	case LP_SCAN:
		return "nodescan";
	case LP_CONSOLE:
		return "console log";
	}
	return "?";
}

static int
dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

void
sm_runner_dump(const struct sm_runner *r, struct evbuffer *out)
{
	const struct sm_launch *l;
	const struct sm_delete *d;
	double now = np_mono_s();

	TAILQ_FOREACH(l, &r->launches, entry)
	{
		evbuffer_add_printf(out,
				    "    launch node %s%s: attempt %d/%d, %s, machine %s, "
				    "instance %s, %.1fs\n",
				    l->node_id, l->cancelled ? " (cancelled)" : "", l->attempt,
				    l->retries, phase_name(l->phase),
				    l->run != NULL && l->run->m->state != NULL ? l->run->m->state
									       : "-",
				    l->instance_id ? l->instance_id : "-", now - l->t_start);
	}
	TAILQ_FOREACH(d, &r->deletes, entry)
	evbuffer_add_printf(out, "    delete instance %s: machine %s\n", d->id ? d->id : "-",
			    d->run != NULL && d->run->m->state != NULL ? d->run->m->state : "-");
	if (r->nboots > 0) {
		size_t n = r->nboots < SM_BOOT_RING ? (size_t)r->nboots : SM_BOOT_RING;
		double v[SM_BOOT_RING];
		memcpy(v, r->boots, n * sizeof(v[0]));
		qsort(v, n, sizeof(v[0]), dbl_cmp);
		evbuffer_add_printf(
		    out,
		    "    boots noticed (named -> seen ready), last %zu: p50 %.3fs p90 "
		    "%.3fs p99 %.3fs max %.3fs\n",
		    n, v[n / 2], v[n * 9 / 10], v[n * 99 / 100], v[n - 1]);
	}
	for (size_t i = 0; i < r->nests; i++)
		evbuffer_add_printf(out,
				    "    boot estimate of label %s: %.3fs (deviation %.3fs, "
				    "%lu samples)\n",
				    r->ests[i].label, r->ests[i].e.mean, r->ests[i].e.dev,
				    r->ests[i].e.n);
}

/* ---- the pace of shared listings (pace.c) ------------------------------------------- */

const struct sm_boot_est *
sm_runner_boot_est(const struct sm_runner *r, const char *label)
{
	size_t i;

	if (label != NULL)
		for (i = 0; i < r->nests; i++)
			if (strcmp(r->ests[i].label, label) == 0)
				return r->ests[i].e.n > 0 ? &r->ests[i].e : NULL;
	return label == NULL && r->est_all.n > 0 ? &r->est_all : NULL;
}

/* A launch's boot: from the cloud naming its instance, not ready in a
 * listing lo seconds after (0: none showed it), ready in one hi seconds
 * after (sm_boot_est_add_seen). */
static void
boot_sample(struct sm_runner *r, const char *label, double lo, double hi)
{
	size_t i;

	for (i = 0; i < r->nests && strcmp(r->ests[i].label, label) != 0; i++)
		;
	if (i == r->nests) {
		struct boot_est *v = realloc(r->ests, (r->nests + 1) * sizeof(*v));
		if (v == NULL)
			abort();
		r->ests = v;
		r->ests[i].label = xstrdup(label);
		memset(&r->ests[i].e, 0, sizeof(r->ests[i].e));
		r->nests++;
	}
	sm_boot_est_add_seen(&r->ests[i].e, lo, hi);
	sm_boot_est_add_seen(&r->est_all, lo, hi);
	r->gen++;
}

/* A launch's server pays its share of the listings (sm_pace_paid_at): its
 * first look come due, or its server seen ready before. Once an attempt. */
static void
launch_pay(struct sm_launch *l)
{
	if (l->paid || l->t_named == 0)
		return;
	l->paid = 1;
	l->r->paid++;
}

/* The boot estimate a launch's server is looked for by (NULL: none): its
 * label's, else the provider's; none for a server an earlier launcher
 * named (booting since when?). */
static const struct sm_boot_est *
launch_est(const struct sm_runner *r, const struct sm_launch *l)
{
	const struct sm_boot_est *e;

	if (l->resume_id != NULL && l->attempt == 1)
		return NULL;
	e = sm_runner_boot_est(r, l->label->name);
	return e != NULL ? e : sm_runner_boot_est(r, NULL);
}

double
sm_listing_wait(const struct sm_env *env, double last_start, double min_gap)
{
	if (env != NULL && env->listing_wait != NULL)
		return env->listing_wait(env, last_start, min_gap);
	return fmax(0, last_start + fmax(min_gap, SM_DEFAULT_POLL) - np_mono_s());
}

double
sm_runner_listing_wait(struct sm_runner *r, double last_start, double min_gap)
{
	const struct sm_run *run;
	const struct sm_launch *l;
	const struct sm_boot_est *e;
	struct sm_launch *nl;
	double now = np_mono_s(), want, w, named, budget, aim;
	double first_min = INFINITY, other_min = INFINITY;
	double del_min = INFINITY, cold_named = INFINITY;
	size_t ndues = 0;

	if (last_start > r->lo_last) {
		/* a listing that started at last_start is answered: the servers
		 * named before it and still waiting were not ready in it (or
		 * were, and have not advanced yet: create_done tells); those
		 * whose first look it was (or that have no estimate) pay their
		 * share of it */
		TAILQ_FOREACH(nl, &r->launches, entry)
		{
			if (nl->phase != LP_CREATE || nl->t_named == 0 || nl->t_named >= last_start)
				continue;
			e = launch_est(r, nl);
			if (e == NULL ||
			    nl->t_named + sm_boot_est_lead(e) <= last_start + SM_PACE_EARLY)
				launch_pay(nl);
			if (nl->t_lo < last_start && nl->run != NULL && nl->run->m->seen_at == 0) {
				nl->t_lo_prev = nl->t_lo;
				nl->t_lo = last_start;
			}
		}
		r->lo_last = last_start;
	}
	budget = sm_pace_budget(&r->budget, last_start, r->paid);
	if (r->pace_gen == r->gen && r->pace_last == last_start && r->pace_gap == min_gap)
		return fmax(0, r->pace_start - now);
	TAILQ_FOREACH(run, &r->runs, entry)
	{
		l = run->launch;
		if (l != NULL && l->run == run && l->phase == LP_CREATE && !l->cancelled) {
			named = l->t_named;
			if (named == 0 && run->m->external_id == NULL)
				continue; /* its create call runs: no listing shows it */
			if (run->m->seen_at > 0)
				continue; /* seen up (a floating IP follows): no more */
			if (named == 0)
				named = now; /* named in this advance: t_named follows */
			e = launch_est(r, l);
			if (e == NULL) {
				/* no estimate: it pays when named, and the
				 * oldest such sets the pace for all (a cold
				 * wave looked for as its first server ages,
				 * the others along) */
				launch_pay(run->launch);
				cold_named = fmin(cold_named, named);
				continue;
			}
			w = sm_pace_want(e, named, last_start);
			if (e != NULL && w == named + sm_boot_est_lead(e)) {
				first_min = fmin(first_min, w); /* its first look */
				if (ndues == r->dues_cap) {
					double *v;
					r->dues_cap = r->dues_cap ? 2 * r->dues_cap : 64;
					v = realloc(r->dues, r->dues_cap * sizeof(*r->dues));
					if (v == NULL)
						np_oom();
					r->dues = v;
				}
				r->dues[ndues++] = w;
				continue;
			}
			other_min = fmin(other_min, w); /* a follow-up */
		} else {
			/* deletes: nobody waits; on upstream's period, or
			 * along with a launch's listing a little later */
			del_min = fmin(del_min, last_start + SM_PACE_IDLE);
		}
	}
	if (cold_named < INFINITY)
		other_min = fmin(other_min, sm_pace_want(NULL, cold_named, last_start));
	aim = sm_pace_aim(r->dues, ndues, r->budget.per); /* sorts r->dues */
	want = sm_pace_ride(sm_pace_batch(first_min, aim, other_min), del_min);
	/* the servers pay when their first looks come due */
	budget = fmin(budget, sm_pace_paid_at(&r->budget, r->paid, r->dues, ndues));
	if (want == INFINITY) /* a waiter the runner does not know (a quota
				 listing) or a machine before its first advance */
		want = last_start + SM_DEFAULT_POLL;
	if (first_min < INFINITY || other_min < INFINITY)
		/* a launch waits: the budget's debt (waves the servers paid
		 * for) never holds it past upstream's period since the last
		 * listing; deletes and quota listings still wait it out */
		budget = fmin(budget, last_start + SM_DEFAULT_POLL);
	r->budget.borrow = 0;
	if (other_min < INFINITY && budget > other_min && sm_pace_may_borrow(&r->budget, r->paid)) {
		budget = other_min; /* a follow-up: borrowed */
		r->budget.borrow = 1;
	}
	want = fmax(want, budget);
	r->pace_gen = r->gen;
	r->pace_last = last_start;
	r->pace_gap = min_gap;
	r->pace_start = sm_pace_start(want, last_start, min_gap);
	return fmax(0, r->pace_start - now);
}

/* ---- launches ----------------------------------------------------------------------- */

static void begin_attempt(struct sm_launch *l);
static void attempt_failed(struct sm_launch *l, const char *msg);
static void start_unwind(struct sm_launch *l);

static void
launch_free(struct sm_launch *l)
{
	struct sm_runner *r = l->r;

	TAILQ_REMOVE(&r->launches, l, entry);
	if (l->cancelled)
		r->st.orphans--;
	else
		r->st.launches--;
	if (l->run != NULL)
		sm_run_cancel(l->run);
	if (l->scan != NULL)
		nodescan_cancel(l->scan);
	if (l->timer != NULL)
		event_free(l->timer);
	json_decref(l->metadata);
	free(l->node_id);
	free(l->image_external_id);
	free(l->az);
	free(l->hostname);
	free(l->instance_id);
	free(l->resume_id);
	free(l->fail_msg);
	free(l->provider);
	free(l);
}

/* One phase of a live launch, for /metrics (not after a cancel). */
static void
phase_done(struct sm_launch *l, enum metrics_phase ph, double since)
{
	if (l->provider != NULL && !l->cancelled && since > 0)
		metrics_launch_phase(l->provider, ph, np_mono_s() - since);
}

static void
complete(struct sm_launch *l, enum drv_launch_result res, const char *error)
{
	struct sm_runner *r = l->r;
	sm_launch_done done = l->done;
	void *arg = l->arg;
	char *err = xstrdup(error);

	if (res == DRV_LAUNCH_READY)
		r->st.ready++;
	else if (res == DRV_LAUNCH_ABORTED)
		r->st.aborted++;
	else
		r->st.failed++;
	launch_free(l);
	done(res, err, arg);
	free(err);
}

/*
 * Set node n's external_id from an adapter's id: an id that is the JSON
 * text of an object (the aws driver's {"instance", "host"} for a node on a
 * dedicated host, as upstream's AwsInstance.external_id) goes to
 * external_id_obj, written to ZooKeeper as that object; any other id (or
 * NULL) to the external_id string. Exactly one of the two is left set.
 */
static void
node_set_external_id(struct np_node *n, const char *id)
{
	json_t *o = id != NULL && id[0] == '{' ? json_loads(id, 0, NULL) : NULL;

	json_decref(n->external_id_obj);
	n->external_id_obj = NULL;
	if (json_is_object(o)) {
		free(n->external_id);
		n->external_id = NULL;
		n->external_id_obj = o;
		return;
	}
	json_decref(o);
	sm_set_str(&n->external_id, id);
}

static void
set_instance_id(struct sm_launch *l, const char *id)
{
	if (id == NULL || (l->instance_id != NULL && strcmp(l->instance_id, id) == 0))
		return;
	sm_set_str(&l->instance_id, id);
	if (l->node == NULL) /* cancelled */
		return;
	if (l->phase == LP_CREATE && l->t_named == 0) {
		/* create: from the create call until the cloud has the server */
		phase_done(l, METRICS_PHASE_CREATE, l->t_attempt);
		l->t_named = np_mono_s();
		l->t_lo = l->t_lo_prev = 0;
		l->paid = 0;
		l->r->gen++;
		log_debug("node %s: instance %s named, %.3fs after the create call", l->node_id, id,
			  l->t_named - l->t_attempt);
	}
	node_set_external_id(l->node, id);
	if (l->named != NULL)
		l->named(l->arg);
}

/* As upstream's updateNodeFromInstance. */
static void
update_node(struct sm_launch *l, const struct sm_instance *in)
{
	struct np_node *n = l->node;
	const char *ip = in->interface_ip;

	if (l->use_internal_ip && (in->private_ipv4 != NULL || in->private_ipv6 != NULL))
		ip = in->private_ipv4 != NULL ? in->private_ipv4 : in->private_ipv6;
	node_set_external_id(n, in->external_id);
	sm_set_str(&n->interface_ip, ip);
	sm_set_str(&n->public_ipv4, in->public_ipv4);
	sm_set_str(&n->private_ipv4, in->private_ipv4);
	sm_set_str(&n->public_ipv6, in->public_ipv6);
	sm_set_str(&n->host_id, in->host_id);
	sm_set_str(&n->cloud, in->cloud);
	sm_set_str(&n->region, in->region);
	sm_set_str(&n->az, in->az);
	n->slot = in->slot;
	json_decref(n->resources);
	n->resources = drv_quota_to_json(&in->quota);
	if (in->username != NULL)
		sm_set_str(&n->username, in->username);
	if (in->python_path != NULL)
		sm_set_str(&n->python_path, in->python_path);
	if (in->shell_type != NULL)
		sm_set_str(&n->shell_type, in->shell_type);
	if (in->connection_type != NULL)
		sm_set_str(&n->connection_type, in->connection_type);
	if (in->connection_port > 0)
		n->connection_port = in->connection_port;
	if (in->connection_port_obj != NULL) {
		json_decref(n->connection_port_obj);
		n->connection_port_obj = json_deep_copy(in->connection_port_obj);
		n->connection_port = 0;
	}
	if (in->has_host_keys)
		np_strv_copy(&n->host_keys, &in->host_keys);
	if (in->driver_data != NULL) {
		/* as upstream's updateNodeFromInstance: node.driver_data =
		 * instance.driver_data (metastatic's slot record) */
		json_decref(n->driver_data);
		n->driver_data = json_deep_copy(in->driver_data);
	}
	if (in->node_attributes != NULL) {
		/* the instance's are defaults, the pool's win */
		json_t *attrs = json_deep_copy(in->node_attributes);
		if (json_is_object(n->attributes))
			json_object_update(attrs, n->attributes);
		json_decref(n->attributes);
		n->attributes = attrs;
	}
}

static void
scan_done(const struct nodescan_result *res, void *arg)
{
	struct sm_launch *l = arg;
	char msg[512];
	size_t i;

	l->scan = NULL;
	if (res->status == NODESCAN_OK) {
		if (res->nkeys > 0) {
			np_strv_clear(&l->node->host_keys);
			for (i = 0; i < res->nkeys; i++)
				np_strv_push(&l->node->host_keys, res->keys[i]);
		}
		log_debug("node %s: nodescan done in %.1fs (%zu keys)", l->node_id, res->elapsed,
			  res->nkeys);
		phase_done(l, METRICS_PHASE_KEYSCAN, l->t_scan);
		complete(l, DRV_LAUNCH_READY, NULL);
		return;
	}
	l->r->st.nodescan_failed++;
	snprintf(msg, sizeof(msg), "nodescan of %s failed: %s",
		 l->instance_id ? l->instance_id : "?",
		 res->error ? res->error : nodescan_status_str(res->status));
	attempt_failed(l, msg);
}

static void
start_scan(struct sm_launch *l)
{
	struct nodescan_params p;
	char msg[256];

	if (l->node->interface_ip == NULL) {
		attempt_failed(l, "the instance has no address to scan");
		return;
	}
	if (l->r->ns == NULL) {
		attempt_failed(l, "no nodescan worker");
		return;
	}
	memset(&p, 0, sizeof(p));
	p.host = l->node->interface_ip;
	p.port = l->node->connection_port;
	p.connection_type = l->node->connection_type;
	p.deadline = l->boot_timeout;
	l->phase = LP_SCAN;
	l->t_scan = np_mono_s();
	l->scan = nodescan_start(l->r->ns, &p, scan_done, l);
	if (l->scan == NULL) {
		snprintf(msg, sizeof(msg), "nodescan: %s", strerror(errno));
		attempt_failed(l, msg);
	}
}

static void
orphan_done(struct sm_launch *l)
{
	log_info("node %s: the cancelled launch's instance %s is deleted", l->node_id,
		 l->instance_id ? l->instance_id : "-");
	launch_free(l);
}

static void
unwind_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	start_unwind(arg);
}

static void
unwind_done(enum sm_status st, struct sm_instance *inst, struct sm_machine *m, void *arg)
{
	struct sm_launch *l = arg;
	char msg[600];

	l->run = NULL;
	sm_instance_free(inst);
	if (st == SM_DONE || m->error == SM_E_NOTFOUND) {
		l->r->st.unwound++;
		free(l->instance_id);
		l->instance_id = NULL;
		if (l->cancelled) {
			orphan_done(l);
			return;
		}
		node_set_external_id(l->node, NULL);
		l->attempt++;
		begin_attempt(l);
		return;
	}
	/* as upstream: keep trying, so two instances never exist for one node */
	if (m->error != SM_E_TIMEOUT && np_mono_s() < l->unwind_deadline) {
		log_warn("node %s: deleting instance %s of a failed attempt: %s (retrying)",
			 l->node_id, l->instance_id, m->error_msg);
		if (l->timer == NULL)
			l->timer = event_new(l->r->base, -1, 0, unwind_retry_cb, l);
		arm(l->timer, SM_DEFAULT_POLL);
		return;
	}
	if (l->cancelled) {
		log_warn("node %s: could not delete instance %s of a cancelled launch: %s (left "
			 "to leak cleanup)",
			 l->node_id, l->instance_id, m->error_msg);
		launch_free(l);
		return;
	}
	snprintf(msg, sizeof(msg), "%s; deleting its instance %s failed: %s",
		 l->fail_msg ? l->fail_msg : "launch failed", l->instance_id, m->error_msg);
	complete(l, DRV_LAUNCH_FAILED, msg);
}

static void
start_unwind(struct sm_launch *l)
{
	struct sm_runner *r = l->r;
	struct sm_machine *m = r->ops->delete_machine(r->a, l->instance_id);

	l->phase = LP_UNWIND;
	l->run =
	    sm_run_start(r, m, fmax(1, l->unwind_deadline - np_mono_s()), unwind_done, NULL, l);
}

static void
unwind(struct sm_launch *l)
{
	if (l->instance_id == NULL) {
		if (l->cancelled)
			launch_free(l);
		else {
			l->attempt++;
			begin_attempt(l);
		}
		return;
	}
	l->unwind_deadline = np_mono_s() + SM_DELETE_TIMEOUT;
	start_unwind(l);
}

static void
console_done(const char *text, const char *error, void *arg)
{
	struct sm_launch *l = arg;
	char *copy, *line, *save = NULL;
	char *msg;

	if (l->cancelled) {
		unwind(l);
		return;
	}
	if (text != NULL) {
		log_info("node %s: console log of instance %s:", l->node_id, l->instance_id);
		copy = xstrdup(text);
		for (line = strtok_r(copy, "\n", &save); line != NULL;
		     line = strtok_r(NULL, "\n", &save))
			log_info("node %s: console: %s", l->node_id, line);
		free(copy);
	} else {
		log_warn("node %s: no console log of instance %s: %s", l->node_id, l->instance_id,
			 error ? error : "unknown error");
	}
	msg = l->fail_msg;
	l->fail_msg = NULL;
	attempt_failed(l, msg);
	free(msg);
}

static void
attempt_failed(struct sm_launch *l, const char *msg)
{
	struct sm_runner *r = l->r;

	/* a failed scan: notify the adapter and show the console first */
	if (l->phase == LP_SCAN) {
		if (r->ops->nodescan_failed != NULL && l->instance_id != NULL)
			r->ops->nodescan_failed(r->a, l->label, l->instance_id);
		if (l->label->console_log && r->ops->console_log != NULL &&
		    l->instance_id != NULL) {
			l->phase = LP_CONSOLE;
			sm_set_str(&l->fail_msg, msg);
			r->ops->console_log(r->a, l->label, l->instance_id, console_done, l);
			return;
		}
	}
	r->st.attempts_failed++;
	log_warn("launch attempt %d/%d for node %s failed: %s", l->attempt, l->retries, l->node_id,
		 msg);
	if (l->attempt >= l->retries) {
		complete(l, DRV_LAUNCH_FAILED, msg);
		return;
	}
	sm_set_str(&l->fail_msg, msg);
	unwind(l);
}

static void
create_progress(struct sm_machine *m, void *arg)
{
	struct sm_launch *l = arg;

	if (m->external_id == NULL)
		return;
	set_instance_id(l, m->external_id);
	if (l->cancelled) {
		/* the cloud has named it: stop building, delete it */
		sm_run_cancel(l->run);
		l->run = NULL;
		unwind(l);
	}
}

static void
create_done(enum sm_status st, struct sm_instance *inst, struct sm_machine *m, void *arg)
{
	struct sm_launch *l = arg;
	char msg[300];

	l->run = NULL;
	set_instance_id(l, m->external_id);
	if (st == SM_DONE && inst != NULL)
		set_instance_id(l, inst->external_id);
	if (l->cancelled) {
		sm_instance_free(inst);
		unwind(l);
		return;
	}
	if (st == SM_DONE && inst == NULL) {
		attempt_failed(l, "the create state machine returned no instance");
		return;
	}
	if (st == SM_DONE) {
		/* boot: from the server's creation until it is active */
		phase_done(l, METRICS_PHASE_BOOT, l->t_named);
		launch_pay(l); /* seen before its first look: served all the same */
		if (l->t_named > 0 && !(l->resume_id != NULL && l->attempt == 1)) {
			double seen = m->seen_at > 0 ? m->seen_at : np_mono_s(), lo = 0;
			/* the last listing noted may be the one that showed
			 * it ready (noted before this machine advanced) */
			if (l->t_lo > 0 && l->t_lo < seen)
				lo = l->t_lo - l->t_named;
			else if (l->t_lo_prev > 0 && l->t_lo_prev < seen)
				lo = l->t_lo_prev - l->t_named;
			boot_sample(l->r, l->label->name, lo, seen - l->t_named);
			l->r->boots[l->r->nboots++ % SM_BOOT_RING] = np_mono_s() - l->t_named;
		}
		update_node(l, inst);
		sm_instance_free(inst);
		log_debug("node %s: instance %s complete (attempt %d): named -> seen ready %.3fs "
			  "(the listing that showed it started %.3fs after naming)",
			  l->node_id, l->instance_id, l->attempt,
			  l->t_named > 0 ? np_mono_s() - l->t_named : -1,
			  l->t_named > 0 && m->seen_at > 0 ? m->seen_at - l->t_named : -1);
		if (l->label->host_key_checking)
			start_scan(l);
		else
			complete(l, DRV_LAUNCH_READY, NULL);
		return;
	}
	if (m->error == SM_E_QUOTA) {
		log_info("aborting node %s due to quota failure: %s", l->node_id, m->error_msg);
		complete(l, DRV_LAUNCH_ABORTED, m->error_msg);
		return;
	}
	snprintf(msg, sizeof(msg), "%s", m->error_msg[0] ? m->error_msg : "create failed");
	attempt_failed(l, msg);
}

static void
begin_attempt(struct sm_launch *l)
{
	struct sm_runner *r = l->r;
	struct sm_create_args args;
	struct sm_machine *m;

	memset(&args, 0, sizeof(args));
	args.hostname = l->hostname;
	args.label = l->label;
	args.image_external_id = l->image_external_id;
	args.metadata = l->metadata;
	args.request = l->request;
	args.az = l->az;
	l->phase = LP_CREATE;
	l->t_attempt = np_mono_s();
	l->t_named = 0;
	if (l->resume_id != NULL && l->attempt == 1 && r->ops->resume_machine != NULL) {
		/* an earlier launcher's instance: named from the start, so a
		 * failed takeover deletes it before the next attempt */
		m = r->ops->resume_machine(r->a, &args, l->resume_id);
		log_info("node %s: resuming the launch of instance %s", l->node_id, l->resume_id);
		set_instance_id(l, l->resume_id);
	} else {
		m = r->ops->create_machine(r->a, &args);
		log_debug("node %s: create (attempt %d/%d)", l->node_id, l->attempt, l->retries);
	}
	l->run = sm_run_start(r, m, l->launch_timeout, create_done, create_progress, l);
	l->run->launch = l;
}

struct sm_launch *
sm_launch_start(struct sm_runner *r, struct np_node *node, const struct sm_launch_params *p,
		sm_launch_done done, void *arg)
{
	struct sm_launch *l = calloc(1, sizeof(*l));
	char host[64];

	if (l == NULL)
		abort();
	l->r = r;
	l->node = node;
	l->node_id = xstrdup(node->id ? node->id : "?");
	snprintf(host, sizeof(host), "np%s", l->node_id);
	l->hostname = xstrdup(host);
	l->label = p->label;
	l->image_external_id = xstrdup(p->image_external_id);
	l->az = xstrdup(p->az);
	l->metadata = p->metadata ? json_deep_copy(p->metadata) : json_object();
	l->request = p->request;
	l->retries = p->retries > 0 ? p->retries : 1;
	l->attempt = 1;
	l->launch_timeout = p->launch_timeout;
	l->boot_timeout = p->boot_timeout;
	l->use_internal_ip = p->use_internal_ip;
	l->provider = p->provider != NULL ? xstrdup(p->provider) : NULL;
	l->t_start = np_mono_s();
	l->done = done;
	l->named = p->named;
	l->resume_id = p->resume_id != NULL ? np_strdupz(p->resume_id) : NULL;
	l->arg = arg;
	TAILQ_INSERT_TAIL(&r->launches, l, entry);
	r->st.launches++;
	begin_attempt(l);
	return l;
}

void
sm_launch_cancel(struct sm_launch *l)
{
	if (l == NULL || l->cancelled)
		return;
	l->cancelled = 1;
	l->node = NULL;
	l->request = NULL;
	l->done = NULL;
	l->named = NULL;
	l->r->st.launches--;
	l->r->st.orphans++;
	log_info("node %s: launch cancelled (phase %s)", l->node_id, phase_name(l->phase));
	switch (l->phase) {
	case LP_CREATE:
		if (l->instance_id != NULL) {
			sm_run_cancel(l->run);
			l->run = NULL;
			unwind(l);
		}
		/* else: create_progress or create_done deletes it once named */
		break;
	case LP_SCAN:
		nodescan_cancel(l->scan);
		l->scan = NULL;
		unwind(l);
		break;
	case LP_UNWIND:	 /* unwind_done frees it */
	case LP_CONSOLE: /* console_done unwinds */
		break;
	}
}

void
sm_launch_abandon(struct sm_launch *l)
{
	if (l == NULL || l->cancelled)
		return;
	if (l->instance_id == NULL || (l->phase != LP_CREATE && l->phase != LP_SCAN)) {
		/* nothing named that an adopter could take over, or a failed
		 * attempt's instance on its way out: as a cancel */
		sm_launch_cancel(l);
		return;
	}
	log_info("node %s: launch of instance %s left to the launcher that adopts the node "
		 "(phase %s)",
		 l->node_id, l->instance_id, phase_name(l->phase));
	launch_free(l); /* stops the run or the scan; the instance stays */
}

/* ---- deletes ------------------------------------------------------------------------ */

static void
delete_free(struct sm_delete *d)
{
	struct sm_runner *r = d->r;

	TAILQ_REMOVE(&r->deletes, d, entry);
	r->st.deletes--;
	if (d->run != NULL)
		sm_run_cancel(d->run);
	if (d->later != NULL)
		event_free(d->later);
	free(d->id);
	free(d);
}

static void
delete_done(enum sm_status st, struct sm_instance *inst, struct sm_machine *m, void *arg)
{
	struct sm_delete *d = arg;
	sm_done_cb done = d->done;
	void *darg = d->arg;
	int ok = st == SM_DONE || m->error == SM_E_NOTFOUND;
	char err[300];

	sm_instance_free(inst);
	d->run = NULL;
	snprintf(err, sizeof(err), "%s", ok ? "" : m->error_msg);
	if (ok) {
		d->r->st.deleted++;
		if (st != SM_DONE)
			log_info("instance %s not found in the cloud: deleted", d->id);
	} else
		d->r->st.delete_errors++;
	delete_free(d);
	done(ok, ok ? NULL : err, darg);
}

static void
delete_nothing_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sm_delete *d = arg;
	sm_done_cb done = d->done;
	void *darg = d->arg;

	delete_free(d);
	done(1, NULL, darg);
}

struct sm_delete *
sm_delete_start(struct sm_runner *r, const char *external_id, double timeout, sm_done_cb done,
		void *arg)
{
	struct sm_delete *d = calloc(1, sizeof(*d));

	if (d == NULL)
		abort();
	d->r = r;
	d->id = xstrdup(external_id);
	d->done = done;
	d->arg = arg;
	TAILQ_INSERT_TAIL(&r->deletes, d, entry);
	r->st.deletes++;
	if (external_id == NULL) {
		d->later = event_new(r->base, -1, 0, delete_nothing_cb, d);
		event_active(d->later, EV_TIMEOUT, 0);
		return d;
	}
	d->run = sm_run_start(r, r->ops->delete_machine(r->a, external_id), timeout, delete_done,
			      NULL, d);
	return d;
}

void
sm_delete_cancel(struct sm_delete *d)
{
	if (d != NULL)
		delete_free(d);
}
