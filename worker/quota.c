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
 * QuotaSupport), plus its own creates not yet in its view, checks pool
 * max-servers / max-cores / max-ram / max-resources, the cloud's limits
 * (provider quota) and tenant limits, and creates the INIT node, with its
 * resources, before anything is asked of the cloud. The lock is released
 * once every create of the round has been answered. The next holder's
 * view includes those nodes: ZooKeeper delivers the watch events of the
 * nodes created before the lock changed hands before the reply that hands
 * it over, and the round waits until the node cache has read every child
 * it was told of (zk_cache_unloaded), so a node created by another
 * launcher is counted before anything is decided. A launch that fails or
 * is aborted releases its reservation by its node going (FAILED/ABORTED,
 * then deleted), as upstream; a launcher that dies keeps its reservations
 * (its nodes) until a peer adopts or deletes them.
 *
 * So at every instant the provider's nodes in ZooKeeper, and hence its
 * servers in the cloud (each created for a node that exists first), fit
 * every limit. Reuse of ready nodes and adoption of a lost launcher's
 * building nodes take no new resources and need no round.
 *
 * Rounds batch: a handler that wants to launch while no round is open asks
 * for one (lc_quota_want) and waits; the round, once the lock is held and
 * the view loaded, runs every handler with nodes to launch (handler.c,
 * handler_quota_round) and closes. One launcher's steady state is then one
 * lock round trip per batch of launches, not per node.
 */
#include "worker/launcher.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "lib/core/log.h"

struct lc_quota {
	struct launcher *lc;
	struct zk_lock *lock;
	int acquiring; /* zk_lock_acquire in flight */
	int releasing; /* zk_lock_release in flight */
	int open;      /* a round is running: launches may start */
	int creates;   /* creates of the last round not answered yet */
	int want;      /* a round is wanted (after the current one) */
	struct event *retry_ev;
	uint64_t rounds;
};

static void quota_acquire(struct lc_quota *q);

static void
quota_released(int rc, void *arg)
{
	struct lc_quota *q = arg;

	q->releasing = 0;
	if (q->want)
		quota_acquire(q);
}

static void
quota_release(struct lc_quota *q)
{
	if (q->releasing)
		return; /* quota_released goes on */
	if (q->lock != NULL && zk_lock_is_held(q->lock)) {
		q->releasing = 1;
		zk_lock_release(q->lock, quota_released, q);
		return;
	}
	/* lost with its session meanwhile: a round still wanted starts over */
	if (q->want)
		quota_acquire(q);
}

static void
retry_later(struct lc_quota *q, double secs)
{
	struct timeval tv = {(time_t)secs, (suseconds_t)((secs - (time_t)secs) * 1e6)};

	if (q->retry_ev != NULL && !event_pending(q->retry_ev, EV_TIMEOUT, NULL))
		event_add(q->retry_ev, &tv);
}

/* The lock is ours: open the round once our view holds every node. */
static void
quota_round(struct lc_quota *q)
{
	struct launcher *lc = q->lc;

	if (lc->stopping || q->lock == NULL || !zk_lock_is_held(q->lock)) {
		q->want = 1;
		retry_later(q, 0.1);
		return;
	}
	if (!lc_in_sync(lc) || zk_cache_unloaded(lc->nodes) > 0) {
		retry_later(q, 0.02); /* nodes created by others still loading */
		return;
	}
	q->want = 0;
	q->open = 1;
	q->rounds++;
	handler_quota_round(lc);
	/* a driver waiting to register (static) goes on now */
	if (lc->prov.dp != NULL && lc->prov.drv->peers_changed != NULL)
		lc->prov.drv->peers_changed(lc->prov.dp);
	q->open = 0;
	if (q->creates == 0)
		quota_release(q);
}

static void
quota_locked(struct zk_lock *lock, int rc, void *arg)
{
	struct lc_quota *q = arg;

	q->acquiring = 0;
	if (rc != ZOK) {
		if (!q->lc->stopping) {
			log_debug("provider quota lock: %s (trying again)", zk_strerror(rc));
			q->want = 1;
			retry_later(q, 0.5);
		}
		return;
	}
	quota_round(q);
}

static void
quota_acquire(struct lc_quota *q)
{
	if (q->acquiring || q->releasing || q->lc->stopping || q->lock == NULL)
		return;
	if (zk_lock_is_held(q->lock)) {
		if (q->creates == 0 && !q->open)
			quota_round(q);
		return; /* else: released, then acquired again, when they answer */
	}
	q->acquiring = 1;
	zk_lock_acquire(q->lock, 30, quota_locked, q);
}

static void
retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct lc_quota *q = arg;

	if (q->lock != NULL && zk_lock_is_held(q->lock))
		quota_round(q);
	else
		quota_acquire(q);
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
	q->retry_ev = event_new(lc->base, -1, 0, retry_cb, q);
	lc->quota = q;
	return 0;
}

void
lc_quota_free(struct launcher *lc)
{
	struct lc_quota *q = lc->quota;

	if (q == NULL)
		return;
	zk_lock_free(q->lock);
	if (q->retry_ev != NULL)
		event_free(q->retry_ev);
	free(q);
	lc->quota = NULL;
}

int
lc_quota_open(const struct launcher *lc)
{
	return lc->quota == NULL || lc->quota->open;
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

void
lc_quota_create_sent(struct launcher *lc)
{
	if (lc->quota != NULL)
		lc->quota->creates++;
}

void
lc_quota_create_done(struct launcher *lc)
{
	struct lc_quota *q = lc->quota;

	if (q == NULL || q->creates <= 0)
		return;
	if (--q->creates == 0 && !q->open)
		quota_release(q);
}

uint64_t
lc_quota_rounds(const struct launcher *lc)
{
	return lc->quota != NULL ? lc->quota->rounds : 0;
}
