/*
 * Quota exact across launchers (issue 22): the launch decisions of every
 * launcher serving a provider (nodepoold on several hosts, each with the
 * same provider) are serialized by one ZooKeeper lock per provider,
 *
 *     /nodepool/launcher-quota/<provider>   (kazoo's lock recipe)
 *
 * and the node records are the reservations. Upstream Nodepool has no such
 * lock (one launcher per provider); Zuul and upstream's tools never look
 * at the path.
 *
 * A launch reserves its resources before the cloud call: under the lock,
 * the launcher counts what the provider's nodes use (every node of the
 * provider in ZooKeeper, any state, by its `resources`, as upstream's
 * QuotaSupport), plus its own creates not yet in its view (reservations,
 * below), checks pool max-servers / max-cores / max-ram / max-resources,
 * the cloud's limits (provider quota) and tenant limits, and creates the
 * INIT node, with its resources, before anything is asked of the cloud.
 * The lock is released once every create sent under it has been answered
 * and read. The next holder's view includes those nodes: ZooKeeper
 * delivers the watch events of the nodes created before the lock changed
 * hands before the reply that hands it over, and the first round of a hold
 * waits until the node cache has read every child it was told of
 * (zk_cache_unloaded), so a node created by another launcher is counted
 * before anything is decided. A launch that fails or
 * is aborted releases its reservation by its node going (FAILED/ABORTED,
 * then deleted), as upstream; a launcher that dies keeps its reservations
 * (its nodes) until a peer adopts or deletes them.
 *
 * So at every instant the provider's nodes in ZooKeeper, and hence its
 * servers in the cloud (each created for a node that exists first), fit
 * every limit. Reuse of ready nodes and adoption of a lost launcher's
 * building nodes take no new resources and need no round.
 *
 * Tenant limits (tenant-resource-limits) are global, as upstream's: a
 * tenant's nodes of every provider count against them. So when any are
 * configured, a round also holds the tenants' lock,
 *
 *     /nodepool/launcher-quota-tenants     (kazoo's lock recipe)
 *
 * taken after the provider's lock (one order everywhere: no two launchers
 * wait for each other in a cycle), so that the rounds of every launcher
 * of every provider are serialized. Under it a launch for a tenant with
 * limits counts what the tenant's nodes use (every provider's, by their
 * `resources`; lc_tenant_usage), plus the creates of its own round, and
 * is made only if the new node fits (handler.c, tenant_has_room); its
 * INIT node carries the tenant's name and resources, so the next holder
 * counts it. A reused READY node becomes the tenant's when it is
 * allocated (tenant_name written into it): for a tenant with limits that
 * write is decided in a round too, after the node is locked and checked
 * (HN_ALLOC_WAIT), and counted as a reservation of the tenant until the
 * view shows it. As the allocation is a data change, not a new child, the
 * first round of a hold for tenants also waits until the node cache has
 * read every change it was told of (zk_cache_reads_pending). A request whose tenant is at its
 * limits goes back to `requested` (upstream defers it at assignment) and is taken again when a node
 * of the tenant goes. Assignment's first look (assign.c, tenant_allows) uses the same count,
 * outside the round.
 *
 * The price: with tenant limits configured, the launch decisions of every
 * provider are serialized (one lock round trip per batch of launches, as
 * for one provider). Every launcher must have the same tenant limits (a
 * launcher without them takes no tenants' lock).
 *
 * Rounds batch: a handler that wants to launch while no round is open asks
 * for one (lc_quota_want) and waits; the round, once the lock is held and
 * the view loaded, runs every handler with nodes to launch (handler.c,
 * lc_handler_quota_round) and closes. Where a round could run at once (the
 * locks held since a round with a complete view, nobody waiting for
 * them), a request being accepted opens one on the spot for its own
 * launches (lc_quota_enter), so that its INIT nodes ride in its accept.
 *
 * The locks are kept across rounds (issue 25) while this launcher keeps
 * wanting rounds and no other contender waits: a round wanted meanwhile
 * runs at once, under the same locks, without the contender create and
 * listing a new acquisition costs, and without waiting for the last
 * round's creates to be answered or read: rounds overlap. That keeps the
 * invariants: a peer creates nodes of the provider (or, under the tenants'
 * lock, nodes or allocations of a tenant with limits) only under the lock,
 * so while we hold it without a break nobody else did, and our view plus
 * our own creates not in it yet count every node exactly once:
 *
 * - Each create (a launch's INIT node, a static registration) and each
 *   allocation write of a tenant with limits sent in a round is a
 *   reservation (struct lc_qres, lc_quota_create_sent), with the node's
 *   pool, tenant and `resources`. has_remaining_quota (pool max-servers,
 *   max-cores, max-ram, max-resources and extra limits; the provider's
 *   cloud quota: every pool's) and lc_tenant_usage (tenant limits) add
 *   every reservation to what the view counts, as they add a node of the
 *   view: by its `resources` (one instance at least), its pool, its tenant.
 * - A reservation stops counting when the view counts its node
 *   (res_in_view): a created node is told of (NodeCreated) before the
 *   create's reply, so once answered it is in the view when visible there,
 *   or gone if the cache has nothing left to load; an allocation is
 *   written through the cache (zk_cache_write_end) before its reply is
 *   handed on. It stops counting at once when the create or write fails
 *   (lc_quota_create_done with no node). Before its reply a node cannot be
 *   visible (the cache's read of it is sent after the create, and answered
 *   after it), so it is never counted twice.
 * - A create whose outcome is unknown (a lost connection) counts until the
 *   handler finds its node in the re-synced view, or finds it absent; one
 *   dropped with its handler, unknown, makes the next round wait for a
 *   complete view, as the first of a hold.
 * - The first round of a hold (a new acquisition, or after a re-sync of
 *   the caches) waits for the view as before; later rounds of the same
 *   hold do not. overlapped counts the rounds run while reservations were
 *   outstanding (the dump's "overlapping").
 *
 * Releasing (a peer waits, we stop, or nothing was wanted for LINGER) still
 * waits until every reservation is answered and read (drained): answered,
 * so that the next holder, who hears of every node created before the
 * handover, counts them all; and read by our cache, so that no reservation
 * outlives the hold that made it and our own next hold starts from the
 * view alone, as any acquisition does.
 *
 * When a lock is taken, its dir's children are listed with a one-shot
 * watch, re-armed at each change while held: a contender that is not ours
 * (a peer waiting for the provider's lock, or for the tenants' lock, any
 * provider's launcher) makes us release both after the current round (and
 * its drain), and no round is run meanwhile. With
 * no round wanted the locks linger LINGER seconds (a batch that follows
 * needs no new acquisition), then go. Releasing is as before: both
 * locks, the tenants' first.
 */
#include "worker/launcher.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "lib/core/clock.h"
#include "lib/core/log.h"
#include "lib/core/xalloc.h"

#define TENANT_LOCK "/nodepool/launcher-quota-tenants"
/* seconds the locks are kept with no round wanted: longer than the gap
 * between the waves of one boot time (1 s boots: ~1.2 s), so that a
 * launcher alone on its provider takes its lock once, not once a wave (an
 * acquisition and its view wait: 30-40 ms of each wave's first launch at
 * c=50). A peer loses nothing it would not lose to a busy holder: its
 * contender ends an idle hold at once (peers_listed). */
#define LINGER 2.0
/* seconds between looks at a drain awaited: each node read and each answer
 * looks too; this covers a re-sync that brings no node event */
#define DRAIN_POLL 0.05

struct lc_quota;

/* A lock's dir watched for peers' contenders while we hold the lock. */
struct quota_peers {
	struct lc_quota *q;
	struct zk_lock *lock;
	int watching; /* a children watch is set (in watch_session) */
	int64_t watch_session;
	int reading;	    /* a listing is in flight (at most one) */
	int read_watch;	    /* ... asked to set the watch */
	int reread;	    /* list again once it is answered */
	unsigned read_hold; /* hold it was sent in */
	unsigned hold;	    /* acquisitions of lock so far */
	int peer;	    /* a peer's contender seen during this hold */
};

struct lc_quota {
	struct launcher *lc;
	struct zk_lock *lock;
	/* the tenants' lock (TENANT_LOCK), taken after lock when tenant
	 * limits are configured */
	struct zk_lock *tlock;
	int acquiring; /* zk_lock_acquire in flight */
	int releasing; /* zk_lock_release calls in flight */
	int open;      /* a round is running: launches may start */
	int want;      /* a round is wanted (after the current one) */
	int view_wait; /* a round waits for the node cache's reads */
	/* the next round waits for a complete view (a new hold, or an
	 * outcome unknown); else it runs at once under the held locks */
	int fresh;
	unsigned epoch;	     /* lc->sync_epoch the hold's view was complete in */
	struct lc_qres *res; /* reservations not shown by the cache yet */
	int unanswered;	     /* of them, not answered yet */
	struct event *retry_ev;
	struct event *linger_ev;     /* releases the idle locks */
	struct quota_peers peers[2]; /* [0] lock's dir, [1] tlock's */
	uint64_t rounds;
	uint64_t taken;	     /* acquisitions of the provider's lock */
	uint64_t overlapped; /* rounds run with reservations outstanding */
};

static void quota_acquire(struct lc_quota *q);
static void retry_later(struct lc_quota *q, double secs);
static int drained(struct lc_quota *q);

/* Tenant limits are configured: rounds hold the tenants' lock too. */
static int
need_tenants(const struct lc_quota *q)
{
	return q->tlock != NULL && q->lc->n_tenant_limits > 0;
}

/* Every lock a round needs is held. */
static int
round_held(const struct lc_quota *q)
{
	return q->lock != NULL && zk_lock_is_held(q->lock) &&
	       (!need_tenants(q) || zk_lock_is_held(q->tlock));
}

static void
quota_released(int rc, void *arg)
{
	struct lc_quota *q = arg;

	if (--q->releasing == 0 && q->want)
		quota_acquire(q);
}

static void
quota_release(struct lc_quota *q)
{
	if (q->releasing)
		return; /* quota_released goes on */
	if (q->linger_ev != NULL)
		event_del(q->linger_ev);
	if (q->tlock != NULL && zk_lock_is_held(q->tlock)) {
		q->releasing++;
		zk_lock_release(q->tlock, quota_released, q);
	}
	if (q->lock != NULL && zk_lock_is_held(q->lock)) {
		q->releasing++;
		zk_lock_release(q->lock, quota_released, q);
	}
	if (q->releasing)
		return;
	/* lost with its session meanwhile: a round still wanted starts over */
	if (q->want)
		quota_acquire(q);
}

/* A peer's contender waits for one of our locks. */
static int
peer_waiting(const struct lc_quota *q)
{
	return q->peers[0].peer || q->peers[1].peer;
}

static void
res_free(struct lc_qres *r)
{
	free(r->pool);
	free(r->tenant);
	json_decref(r->resources);
	free(r->node_id);
	free(r);
}

/*
 * 1 when the node cache counts reservation r's node (or its node is gone),
 * so that r must not count too. A create's node is told of (its
 * NodeCreated event) before the create's reply: once r is answered, the
 * node is in the view as soon as it is visible there, or gone if the cache
 * has nothing left to load. An allocation is written through the cache
 * (zk_cache_write_end, before its reply is handed on): it shows the tenant
 * at once, unless newer data came, which is read with the rest.
 */
static int
res_in_view(const struct lc_quota *q, const struct lc_qres *r)
{
	struct launcher *lc = q->lc;
	const struct zk_cache_entry *e;
	const char *t;

	if (!r->answered || r->node_id == NULL)
		return 0;
	if (!lc_in_sync(lc))
		return 0; /* a view being re-listed shows nothing for sure */
	e = zk_cache_get(lc->nodes, r->node_id);
	if (r->kind != LC_QRES_ALLOC)
		return e != NULL || zk_cache_unloaded(lc->nodes) == 0;
	if (e == NULL)
		return 1; /* the reused node is gone */
	t = LC_SUM(e) != NULL ? np_node_sum_tenant_name(LC_SUM(e)) : NULL;
	return (t != NULL && r->tenant != NULL && strcmp(t, r->tenant) == 0) ||
	       zk_cache_reads_pending(lc->nodes) == 0;
}

static int
res_count(const struct lc_quota *q)
{
	int n = 0;

	for (const struct lc_qres *r = q->res; r != NULL; r = r->next)
		n++;
	return n;
}

/* Drop the reservations the view now counts. */
static void
res_prune(struct lc_quota *q)
{
	struct lc_qres **rp = &q->res;

	while (*rp != NULL) {
		struct lc_qres *r = *rp;
		if (res_in_view(q, r)) {
			*rp = r->next;
			res_free(r);
		} else
			rp = &r->next;
	}
}

/* Every create and allocation sent is answered and in the view: the locks
 * may go (quota_settle says why that is needed). */
static int
drained(struct lc_quota *q)
{
	res_prune(q);
	return q->res == NULL;
}

/*
 * No round is open: go on as the state asks. A round wanted runs at once
 * (from the loop, so that the wants of one burst share it) under the held
 * locks, whether or not the last round's creates are answered: their
 * reservations count them. The locks go (a peer waits, we stop, or after
 * LINGER with nothing wanted) only once drained: every create answered, so
 * that a peer's view, which hears of each node before the lock handover,
 * holds them all; and every one read by our own cache, so that no
 * reservation outlives its hold and a later hold of ours starts from the
 * view alone, as after any acquisition.
 */
static void
quota_settle(struct lc_quota *q)
{
	struct timeval tv = np_tv_of(LINGER);

	if (q->open || q->acquiring || q->releasing)
		return;
	if (q->lc->stopping || peer_waiting(q) || !round_held(q)) {
		if (!round_held(q) || drained(q))
			quota_release(q); /* a broken hold needs no drain */
		else
			retry_later(q, DRAIN_POLL);
		return;
	}
	if (q->want) {
		if (q->linger_ev != NULL)
			event_del(q->linger_ev);
		/* not after a slower retry still pending */
		if (q->retry_ev != NULL)
			event_del(q->retry_ev);
		retry_later(q, 0);
		return;
	}
	if (q->linger_ev == NULL || event_pending(q->linger_ev, EV_TIMEOUT, NULL))
		return;
	if (drained(q))
		event_add(q->linger_ev, &tv);
	else
		retry_later(q, DRAIN_POLL);
}

static void
linger_cb(evutil_socket_t fd, short what, void *arg)
{
	struct lc_quota *q = arg;

	if (!q->open && !q->want && drained(q))
		quota_release(q);
}

static void peers_list(struct quota_peers *p);

static void
peers_watch(int type, const char *path, void *arg)
{
	struct quota_peers *p = arg;

	p->watching = 0;
	if (zk_lock_is_held(p->lock))
		peers_list(p);
}

static void
peers_listed(int rc, int count, char *const *names, void *arg)
{
	struct quota_peers *p = arg;
	struct lc_quota *q = p->q;
	const char *ours = zk_lock_contender(p->lock);

	p->reading = 0;
	if (rc == ZOK && p->read_watch) {
		p->watching = 1;
		p->watch_session = zk_session_id(q->lc->zk);
	}
	if (p->reread) {
		p->reread = 0;
		if (zk_lock_is_held(p->lock))
			peers_list(p);
		return; /* that listing decides */
	}
	if (p->read_hold != p->hold || ours == NULL)
		return; /* a listing of an earlier hold */
	if (rc != ZOK) {
		p->peer = 1; /* unknown: let it go after this round */
	} else {
		for (int i = 0; i < count; i++)
			if (strcmp(names[i], ours) != 0)
				p->peer = 1;
	}
	if (p->peer && q->linger_ev != NULL && event_pending(q->linger_ev, EV_TIMEOUT, NULL)) {
		event_del(q->linger_ev); /* held idle, lingering: release now */
		quota_release(q);
	} else if (p->peer)
		quota_settle(q); /* once drained */
}

/* List the lock dir's contenders, setting the watch if none is set. */
static void
peers_list(struct quota_peers *p)
{
	struct lc_quota *q = p->q;

	if (p->reading) {
		p->reread = 1;
		return;
	}
	if (p->watching && p->watch_session != zk_session_id(q->lc->zk))
		p->watching = 0; /* dropped with its session */
	p->reading = 1;
	p->read_watch = !p->watching;
	p->read_hold = p->hold;
	zk_children(q->lc->zk, zk_lock_path(p->lock), p->read_watch ? peers_watch : NULL, p,
		    peers_listed, p);
}

static void
retry_later(struct lc_quota *q, double secs)
{
	struct timeval tv = np_tv_of(secs);

	if (q->retry_ev != NULL && !event_pending(q->retry_ev, EV_TIMEOUT, NULL))
		event_add(q->retry_ev, &tv);
}

/*
 * The locks are ours: open the round. The first round of a hold (and the
 * first after a re-sync, or after an outcome unknown) waits until the view
 * holds every node: nodes others created before the lock came, and ours
 * from an earlier hold. Later rounds of the same hold run at once: nobody
 * else created a node meanwhile, and our creates not in the view yet are
 * counted by their reservations.
 */
static void
quota_round(struct lc_quota *q)
{
	struct launcher *lc = q->lc;

	if (lc->stopping || !round_held(q)) {
		q->want = 1;
		retry_later(q, 0.1);
		return;
	}
	if (!lc_in_sync(lc)) {
		q->view_wait = 1; /* lc_quota_nodes_read tries again */
		retry_later(q, 0.02);
		return;
	}
	if (q->fresh || q->epoch != lc->sync_epoch) {
		if (zk_cache_unloaded(lc->nodes) > 0) {
			/* nodes created by others (or by us) still loading:
			 * lc_quota_nodes_read tries again as each lands */
			q->view_wait = 1;
			retry_later(q, 0.02);
			return;
		}
		if (need_tenants(q) && zk_cache_reads_pending(lc->nodes) > 0) {
			/* a reuse's allocation (a data change, not a new
			 * child) makes a node its tenant's: the reads of
			 * changes heard before the lock came land first */
			q->view_wait = 1;
			retry_later(q, 0.005);
			return;
		}
		q->fresh = 0;
		q->epoch = lc->sync_epoch;
	}
	q->view_wait = 0;
	q->want = 0;
	q->open = 1;
	q->rounds++;
	res_prune(q);
	if (q->res != NULL) {
		q->overlapped++;
		log_debug("quota round %llu overlaps %d creates not answered, %d not read",
			  (unsigned long long)q->rounds, q->unanswered,
			  res_count(q) - q->unanswered);
	}
	lc_handler_quota_round(lc);
	/* a driver waiting to register (static) goes on now */
	if (lc->prov.dp != NULL && lc->prov.drv->peers_changed != NULL)
		lc->prov.drv->peers_changed(lc->prov.dp);
	q->open = 0;
	quota_settle(q);
}

static void
quota_locked(struct zk_lock *lock, int rc, void *arg)
{
	struct lc_quota *q = arg;

	q->acquiring = 0;
	if (rc != ZOK) {
		if (!q->lc->stopping) {
			log_debug("%s quota lock: %s (trying again)",
				  lock == q->tlock ? "tenants'" : "provider", zk_strerror(rc));
			q->want = 1;
			retry_later(q, 0.5);
		}
		return;
	}
	struct quota_peers *p = &q->peers[lock == q->tlock];

	if (lock == q->lock)
		q->taken++;
	q->fresh = 1; /* a new hold: its first round waits for the view */
	p->hold++;
	p->peer = 0;
	peers_list(p);
	if (!round_held(q))
		quota_acquire(q); /* the tenants' lock next */
	else
		quota_round(q);
}

static void
quota_acquire(struct lc_quota *q)
{
	if (q->acquiring || q->releasing || q->lc->stopping || q->lock == NULL)
		return;
	if (round_held(q)) {
		quota_settle(q); /* a round at once, or a handover first */
		return;
	}
	q->acquiring = 1;
	/* always the provider's lock first, then the tenants': one order,
	 * so launchers of different providers never wait for each other in
	 * a cycle */
	if (!zk_lock_is_held(q->lock))
		zk_lock_acquire(q->lock, 30, quota_locked, q);
	else
		zk_lock_acquire(q->tlock, 30, quota_locked, q);
}

static void
retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct lc_quota *q = arg;

	if (q->open)
		return;
	if (!round_held(q) && q->want)
		quota_acquire(q);
	else if (round_held(q) && q->want && !q->lc->stopping && !peer_waiting(q))
		quota_round(q);
	else
		quota_settle(q); /* a drain awaited, or a handover */
}

int
lc_quota_init(struct launcher *lc)
{
	struct lc_quota *q = calloc(1, sizeof(*q));
	char path[300];

	if (q == NULL)
		return -1;
	q->lc = lc;
	snprintf(path, sizeof(path), "/nodepool/launcher-quota/%s", lc->prov.name);
	q->lock = zk_lock_new(lc->zk, path, lc->hostname, 0);
	q->tlock = zk_lock_new(lc->zk, TENANT_LOCK, lc->hostname, 0);
	q->retry_ev = event_new(lc->base, -1, 0, retry_cb, q);
	q->linger_ev = event_new(lc->base, -1, 0, linger_cb, q);
	q->peers[0] = (struct quota_peers){.q = q, .lock = q->lock};
	q->peers[1] = (struct quota_peers){.q = q, .lock = q->tlock};
	lc->quota = q;
	return 0;
}

void
lc_quota_free(struct launcher *lc)
{
	struct lc_quota *q = lc->quota;

	if (q == NULL)
		return;
	while (q->res != NULL) {
		struct lc_qres *r = q->res;
		q->res = r->next;
		res_free(r);
	}
	zk_cancel(lc->zk, &q->peers[0]);
	zk_cancel(lc->zk, &q->peers[1]);
	zk_lock_free(q->tlock);
	zk_lock_free(q->lock);
	if (q->retry_ev != NULL)
		event_free(q->retry_ev);
	if (q->linger_ev != NULL)
		event_free(q->linger_ev);
	free(q);
	lc->quota = NULL;
}

int
lc_quota_open(const struct launcher *lc)
{
	return lc->quota == NULL || lc->quota->open;
}

/*
 * A round opened on the spot (issue 25: a request's launches decided at
 * its accept, so that their INIT nodes ride in the accept's multi): only
 * where a round would run at once anyway, inside a hold whose view was
 * complete (its first round has run, no re-sync or unknown outcome
 * since), nobody else waiting for the locks, nothing being taken, given
 * up or stopped. The hold is unbroken from its last round to this one,
 * so nobody else created a node meanwhile and the view plus the
 * reservations count every node, as in a round the loop runs.
 */
int
lc_quota_enter(struct launcher *lc)
{
	struct lc_quota *q = lc->quota;

	if (q == NULL)
		return 1;
	if (q->open || q->acquiring || q->releasing || q->view_wait || q->fresh ||
	    q->epoch != lc->sync_epoch || lc->stopping || !lc_in_sync(lc) || !round_held(q) ||
	    peer_waiting(q))
		return 0;
	q->open = 1;
	q->rounds++;
	res_prune(q);
	if (q->res != NULL)
		q->overlapped++;
	return 1;
}

void
lc_quota_leave(struct launcher *lc)
{
	struct lc_quota *q = lc->quota;
	struct timeval tv = np_tv_of(LINGER);

	if (q == NULL || !q->open)
		return;
	q->open = 0;
	/* used: the idle hold lingers from now */
	if (q->linger_ev != NULL && event_pending(q->linger_ev, EV_TIMEOUT, NULL)) {
		event_del(q->linger_ev);
		event_add(q->linger_ev, &tv);
	}
	quota_settle(q);
}

void
lc_quota_want(struct launcher *lc)
{
	struct lc_quota *q = lc->quota;

	if (q == NULL || q->open)
		return;
	q->want = 1;
	quota_acquire(q);
}

struct lc_qres *
lc_quota_create_sent(struct launcher *lc, enum lc_qres_kind kind, const struct np_node *n,
		     const char *tenant)
{
	struct lc_quota *q = lc->quota;
	struct lc_qres *r;

	if (q == NULL)
		return NULL;
	r = xcalloc(1, sizeof(*r));
	r->kind = kind;
	if (kind == LC_QRES_LAUNCH && n->pool != NULL)
		r->pool = xstrdup(n->pool);
	if (kind != LC_QRES_REGISTER) {
		r->tenant = tenant != NULL ? xstrdup(tenant) : NULL;
		r->resources = n->resources != NULL ? json_deep_copy(n->resources) : NULL;
	}
	if (kind == LC_QRES_ALLOC && n->id != NULL)
		r->node_id = xstrdup(n->id);
	r->next = q->res;
	q->res = r;
	q->unanswered++;
	return r;
}

void
lc_quota_create_done(struct launcher *lc, struct lc_qres *r, const char *node_id, int unknown)
{
	struct lc_quota *q = lc->quota;
	struct lc_qres **rp;

	if (q == NULL || r == NULL)
		return;
	if (!r->answered) {
		r->answered = 1;
		q->unanswered--;
	}
	if (unknown)
		q->fresh = 1; /* the node may exist: a re-synced view tells */
	if (node_id == NULL) {
		for (rp = &q->res; *rp != NULL && *rp != r; rp = &(*rp)->next)
			;
		if (*rp == r)
			*rp = r->next;
		res_free(r);
	} else if (r->node_id == NULL)
		r->node_id = xstrdup(node_id);
	quota_settle(q);
}

const struct lc_qres *
lc_quota_reservations(struct launcher *lc)
{
	struct lc_quota *q = lc->quota;

	if (q == NULL || q->res == NULL)
		return NULL;
	res_prune(q);
	if (q->res == NULL && !q->open)
		quota_settle(q); /* drained here (assignment's look): linger */
	return q->res;
}

uint64_t
lc_quota_rounds(const struct launcher *lc)
{
	return lc->quota != NULL ? lc->quota->rounds : 0;
}

void
lc_quota_nodes_read(struct launcher *lc)
{
	struct lc_quota *q = lc->quota;

	if (q == NULL || q->retry_ev == NULL)
		return;
	if (q->view_wait) {
		/* from the loop, once the cache's callback is over */
		event_del(q->retry_ev);
		retry_later(q, 0);
	} else if (q->res != NULL)
		quota_settle(q); /* drained now? */
}

uint64_t
lc_quota_overlapped(const struct launcher *lc)
{
	return lc->quota != NULL ? lc->quota->overlapped : 0;
}

uint64_t
lc_quota_taken(const struct launcher *lc)
{
	return lc->quota != NULL ? lc->quota->taken : 0;
}
