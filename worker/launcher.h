/*
 * nodepool-launcher: one provider's worker process (worker/).
 *
 * One libevent loop serves one provider: it registers the provider's pools
 * as pool components in ZooKeeper, keeps watch-driven caches of nodes,
 * requests and pool components, and acts on their events: a new request is
 * assigned when ZooKeeper reports it, a released node is recycled when its
 * lock goes away. Periodic work (cleanup 60 s, deletion 5 s) runs on
 * timers, as upstream Nodepool's CleanupWorker and DeletedNodeWorker.
 *
 * Files: main.c (process, args, channel to the supervisor), launcher.c
 * (session, caches, components, event dispatch, timers), assign.c (request
 * acceptance, as PoolWorker._assignHandlers), handler.c (a request's life,
 * as NodeRequestHandler), cleanup.c (CleanupWorker, DeletedNodeWorker),
 * minready.c (min-ready requests), lcconfig.c (provider config -> lc_*).
 */
#ifndef NP_WORKER_LAUNCHER_H
#define NP_WORKER_LAUNCHER_H

#include <sys/queue.h>
#include <stdint.h>
#include <jansson.h>

#include "protocol/model.h"
#include "protocol/nodesum.h"
#include "lib/zk/zk.h"
#include "drivers/driver.h"
#include "drivers/host.h"

struct event;
struct event_base;
struct strset;

/* ---- configuration as the launcher uses it ------------------------------ */

/* A top-level label (labels:). */
struct lc_label {
	char *name;
	int min_ready;		  /* <= 0 disables */
	long max_ready_age;	  /* seconds; 0 = off */
	int min_ready_owner;	  /* 1 = this worker creates min-ready requests for it */
	int min_ready_inflight;	  /* creations in flight */
	double min_ready_backoff; /* monotonic s: no new requests before (one failed) */
};

struct lc_tenant_limit {
	char *tenant;
	struct drv_quota limits; /* unlimited where unset */
};

struct lc_pool {
	struct lc_provider *prov;
	char *name;
	long max_servers;	   /* -1 unlimited */
	double max_cores, max_ram; /* -1 unlimited */
	int priority;		   /* pool -> provider -> 100 */
	struct np_strv labels;	   /* label names this pool supports */
	json_t *node_attributes;   /* object or NULL */
	int host_key_checking;
	int ignore_provider_quota;
	json_t *raw; /* the pool's config (driver-specific keys) */

	/* runtime */
	char *launcher_id;     /* pool id, new on every worker start */
	char *component_path;  /* our pool component znode, or NULL */
	int component_pending; /* create in flight */
	int paused;	       /* a handler is paused at quota */
	int reported_paused;   /* value last written to the component */
	TAILQ_HEAD(, handler) handlers;
	int n_handlers;
};

struct lc_provider {
	struct launcher *lc; /* back-pointer */
	char *name;
	char *driver_name;
	const struct driver *drv;
	struct drv_provider *dp;
	int max_concurrency; /* -1 unlimited; 0 serves nothing */
	int priority;	     /* 100 */
	int launch_retries;  /* 3 */
	double boot_timeout, launch_timeout;
	json_t *raw; /* the provider's config as JSON (driver-specific keys) */
	struct lc_pool *pools;
	size_t n_pools;
};

/* Daemon settings (top-level `nodepoold:` section). */
struct lc_settings {
	double cleanup_interval; /* 60 */
	double delete_interval;	 /* 5 */
	/* request-lock-cleanup-age: request-lock dirs without a request are
	 * removed once unmodified this long (28800, upstream's LOCK_CLEANUP) */
	double request_lock_cleanup_age;
	/* peer-takeover-delay: see assign.c's rendezvous ranking; 0 = off */
	double peer_takeover_delay;
};

/* ---- a request in hand (as NodeRequestHandler) --------------------------- */

enum hnode_state {
	HN_WANTED,   /* nothing assigned yet */
	HN_LOCKING,  /* reusing: node lock being taken / node being re-read */
	HN_CHECKING, /* reusing: driver's reuse check in flight */
	HN_CREATING, /* launching: INIT node being created */
	HN_BUILDING, /* launching: driver launch in flight */
	HN_READY,    /* node ready and allocated to us, locked */
	HN_FAILED,   /* launch failed */
	HN_ABORTED,  /* quota: dropped from the nodeset, relaunched */
	HN_SETTLED,  /* fast path: locked (and checked), or failed; waiting */
	/* reusing for a tenant with limits: locked and checked, the
	 * allocation waits for a quota round (tenant limits exact) */
	HN_ALLOC_WAIT,
};

struct hnode {
	char *label;
	int state; /* enum hnode_state */
	char *node_id;
	struct np_node *node; /* our copy, written by us */
	struct zk_lock *lock;
	struct drv_launch launch;
	int launching; /* launch handed to the driver */
	int version;   /* the node's data version: as cached (fast path), or
			  after our last write of it (-1: unknown) */
	int stores;    /* our writes of the node in flight (version is stale) */
	int fast_ok;   /* fast path: locked and checked */
	/* AZ grouping (see struct handler): the reuse in flight picked a node
	 * in the handler's chosen_az */
	int claims_az;
	/* launching: the AZ given to the driver (the handler's chosen_az when
	 * the launch started, borrowed; NULL = the cloud's choice) */
	const char *az;
	/* HN_CREATING whose create got no reply (a lost connection): it may
	 * have happened. Looked for in the node cache (by its launcher,
	 * allocated_to and created_time, which no other create shares) once
	 * the view is re-synced after sync epoch create_epoch (issue 27). */
	int create_unknown;
	unsigned create_epoch;
	/* adopting: node_id is a BUILDING node an earlier launcher left
	 * (lc_node_adoptable), locked and taken over instead of launched
	 * (HN_LOCKING, then HN_BUILDING with drv_launch.resume) */
	int resume;
	int no_adopt; /* an adoption failed: launch instead */
	/*
	 * The launch began at the node's create reply, while its lock and
	 * `building` were still on their way (handler.c, early launch): a
	 * store the driver asks for meanwhile (early_store) and its
	 * completion (early_done, early_result, early_error: malloc'd or
	 * NULL) wait for that answer; the lock refused, the launch is
	 * cancelled or its instance deleted.
	 */
	int early;
	int early_store;
	int early_done;
	int early_result; /* enum drv_launch_result */
	char *early_error;
	/* the reservation of the create (launching) or of the allocation
	 * write (a reuse for a tenant with limits) sent in a quota round,
	 * until its outcome is told to quota.c (lc_quota_create_done) */
	struct lc_qres *qres;
};

enum lc_handler_state {
	H_LOCKING,	/* request lock being taken */
	H_READING,	/* request re-read under the lock */
	H_ACCEPTING,	/* writing state pending */
	H_RUNNING,	/* collecting the nodeset */
	H_PAUSED,	/* at capacity, waiting */
	H_FAST,		/* one-round-trip fulfilment in flight (reuse-only drivers) */
	H_FULFILLING,	/* writing fulfilled */
	H_DECLINING,	/* writing declined/failed */
	H_DECLINE_WAIT, /* a decline waits for the caches to re-sync */
	H_DONE,
};

struct handler {
	TAILQ_ENTRY(handler) entry;
	struct lc_pool *pool;
	struct launcher *lc;
	char *req_id;
	struct np_request *req; /* fresh copy read under the lock */
	struct zk_lock *req_lock;
	int state;	     /* enum lc_handler_state */
	int min_ready;	     /* requestor NodePool:min-ready */
	struct hnode *nodes; /* one per node_types entry, same order */
	size_t n_nodes;
	int ops;	/* ZooKeeper operations in flight for it */
	int vanished;	/* the request znode is gone */
	int failed;	/* a launch failed: decline once all are done */
	int detached;	/* on lc->zombies, not in the pool's list */
	double started; /* monotonic seconds */
	char *decline_reason;
	int decline_clear;   /* H_DECLINE_WAIT: decline()'s clear_allocation */
	int req_version;     /* fast path: the request's cached version */
	int fast_failed;     /* fast path: fall back to the full sequence */
	int releasing;	     /* cancelled: the request lock is being released */
	double resume_after; /* paused after a quota abort: not rerun before (monotonic s) */
	/* the INIT creates of every node ride in the accept's multi (H_LOCKING;
	 * handler.c, plan_launches): nodes HN_CREATING, reservations taken */
	int accept_launches;
	/*
	 * AZ grouping, for drivers with a pool_azs slot (drivers/driver.h), as
	 * upstream's StateMachineHandler.chosen_az: the availability zone every
	 * node of this request's nodeset is reused from or launched in.
	 * malloc'd, never "" (an empty az fixes nothing, as upstream's
	 * falsy test); NULL = not fixed. Set when a ready node with an az is
	 * picked for reuse, or by the first launch (a random pool_azs entry).
	 * az_firm 0: it came from reuses still in flight only, and is dropped
	 * if they all fail (upstream fixes it only once a reuse succeeded; we
	 * pick several nodes at once, so the pick must constrain the others at
	 * once); 1: fixed for the handler's life (a reuse succeeded, or a
	 * launch started), so launches may borrow the string.
	 */
	char *chosen_az;
	int az_firm;
};

/*
 * Contexts of asynchronous work (a lock being taken, a record being
 * written...) are registered with the launcher, so that those still in
 * flight when it stops (their callbacks will never run) are cleaned up by
 * lc_free instead of leaking. cleanup (may be NULL) releases what the
 * context holds (locks, records), not the context itself.
 */
struct lc_ctx_hdr {
	TAILQ_ENTRY(lc_ctx_hdr) entry;
	void (*cleanup)(void *ctx);
};
TAILQ_HEAD(lc_ctx_list, lc_ctx_hdr);

/* ---- the launcher --------------------------------------------------------- */

struct lc_counters {
	uint64_t accepted, fulfilled, declined, failed;
	uint64_t launches_ready, launches_failed, launches_aborted;
	uint64_t deleted;
	/* request locks tried, and those another launcher held (lost races):
	 * the lock contention rendezvous hashing removes */
	uint64_t req_lock_attempts, req_lock_lost;
	/* requests whose nodes were made with their accept (handler.c) */
	uint64_t accept_launched;
	/* deletion passes asked for by node events (lc_schedule_delete_soon):
	 * deferred LC_DELETE_DEFER, or run at once (a pool paused at quota,
	 * a driver with delete_at_once) */
	uint64_t delete_deferred, delete_at_once;
};

struct launcher {
	struct drv_host host; /* the handle its driver gets (owner: this launcher) */
	struct event_base *base;
	char *hostname; /* FQDN */
	struct lc_provider prov;
	struct lc_label *labels;
	size_t n_labels;
	struct lc_tenant_limit *tenant_limits;
	size_t n_tenant_limits;
	long max_hold_age; /* seconds, 0 = unlimited */
	struct lc_settings settings;

	struct zk *zk;
	int zk_state; /* last enum zk_event */
	/* /nodepool/nodes, data + locks; obj: struct np_node_sum (nodesum.h),
	 * with the full record (np_node_sum_full) for our provider's nodes
	 * only, or for every node when full_records is set; the node id is the
	 * entry's name */
	struct zk_cache *nodes;
	struct zk_cache *requests;	  /* /nodepool/requests, data, obj np_request */
	struct zk_cache *pool_components; /* /nodepool/components/pool, obj np_component */
	char *launcher_component_path;
	/* keep every node's full record (set before the session is
	 * established, for a worker that lists every node) */
	int full_records;
	int started;	     /* caches synced, driver started */
	unsigned sync_epoch; /* bumped each time every cache is (re-)synced */
	double zk_timeout;   /* zookeeper-timeout, seconds */
	/* monotonic s when a pool registration last went away (a session
	 * ended): failing a request as declined by every pool waits
	 * zk_timeout after it, for that pool to register again */
	double pools_removed_at;
	double connected_at; /* monotonic s of the last (re)connection */
	int stopping;
	/* set while the handlers are dropped after a session expiry: their
	 * launches are abandoned (driver slot launch_abandon), not cancelled */
	int abandon_launches;

	struct event *assign_ev;	  /* deferred assignment pass */
	struct event *cleanup_ev;	  /* cleanup timer */
	struct event *delete_ev;	  /* deletion timer */
	struct event *deferred_delete_ev; /* deferred deletion pass (node events) */
	struct event *minready_ev;	  /* deferred min-ready pass */
	struct event *assign_later_ev;	  /* an assignment pass a little later */
	double assign_later_at;		  /* monotonic s it is due (while pending) */

	/* node ids this process is working on right now (locking, deleting,
	 * allocating): the caches lag our own writes, so these keep us from
	 * acting twice on one node. */
	struct strset *busy;
	/* nodes we deleted that the cache has not yet seen go: treated as
	 * absent (else the static driver would find its slot still taken) */
	struct strset *gone;
	/* nodes whose delete we sent and whose REMOVED has not come: ZooKeeper
	 * tells our session of a deletion before it answers the delete, and
	 * REMOVED must know the deletion was ours (issue 25: taken for a
	 * peer's, it cost a barrier round trip and a driver re-scan per
	 * request, and the gone mark set after it stayed for good) */
	struct strset *deleting;

	/* handlers detached while ZooKeeper operations were still in flight;
	 * freed when those complete, or at lc_free */
	TAILQ_HEAD(, handler) zombies;
	struct lc_ctx_list ctxs; /* see lc_ctx_new */

	struct lc_quota *quota; /* quota.c */
	int upstream_refused;	/* lc_upstream_peer's answer while we refuse (1, 2), 0 */
	/* request id -> monotonic s when an assignment pass first found it
	 * ranked below a peer (assign.c); entries of gone requests pruned */
	json_t *req_seen;

	struct lc_counters counters;
	char last_error[256];
	double start_time;
	int ready;	   /* first pass complete (web /ready) */
	double assign_max; /* s, the longest assign pass since the last dump (lc_dump) */

	/* hooks for the process around the launcher (status to the supervisor). */
	void (*on_change)(struct launcher *lc);
	void *hook_arg;
};

/* Zeroed memory of size bytes, registered (see struct lc_ctx_hdr). */
void *lc_ctx_new(struct launcher *lc, size_t size, void (*cleanup)(void *ctx));
/* Unregister and free (no cleanup call). NULL is a no-op. */
void lc_ctx_free(struct launcher *lc, void *ctx);

/* launcher.c */
struct launcher *lc_new(struct event_base *base, const json_t *config, const char *provider,
			char *err, size_t errlen);
/* Connect to ZooKeeper (zookeeper-servers, zookeeper-tls, zookeeper-timeout
 * of config) and start the timers; work begins once the caches are synced. */
int lc_start(struct launcher *lc, const json_t *config, char *err, size_t errlen);
/* Graceful: unregister components, release request locks, stop driver. */
void lc_stop(struct launcher *lc);
void lc_free(struct launcher *lc);
void lc_dump(struct launcher *lc, struct evbuffer *out);
void lc_schedule_assign(struct launcher *lc);
/* A deletion pass (lc_delete_pass) at once, on this loop turn (one
 * deferred by lc_schedule_delete_soon comes now instead): at start-up and
 * after a re-sync. */
void lc_schedule_delete(struct launcher *lc);
/* A pass lc_schedule_delete_soon deferred, if any, at once (a pool just
 * paused at quota: the room it waits for). */
void lc_delete_deferred_now(struct launcher *lc);
/*
 * A deletion pass for a node event (a node of ours used, failed, ...):
 * LC_DELETE_DEFER seconds later, one pass for every event meanwhile; at
 * once (as lc_schedule_delete, a pass deferred already too) while a pool
 * is paused at quota, or always for a driver whose deletions free what
 * the next requests reuse (struct driver's delete_at_once: a static slot,
 * a metastatic backing node's slot, a Kubernetes namespace kept for
 * reuse), since that is what those requests wait for (a pool that pauses
 * later takes a deferred pass at once: lc_delete_deferred_now). Beyond
 * upstream,
 * whose DeletedNodeWorker looks every delete-interval (5 s): a used node
 * is deleted within a fraction of a second, but not in the same moment as
 * the requests that come with it (issue 25: Zuul marks a wave of nodes
 * used as it submits the next wave's requests, and the deletions' locks,
 * writes and cloud calls, started at once, queued ahead of those
 * requests' accepts at ZooKeeper: 35 ms of the OpenStack bench's p50).
 */
void lc_schedule_delete_soon(struct launcher *lc);
#define LC_DELETE_DEFER 0.3
/* An assignment pass in secs seconds (paused handlers waiting out a delay). */
void lc_schedule_assign_in(struct launcher *lc, double secs);
/* 1 while connected and every cache is synced with ZooKeeper: decisions
 * (assign, decline, fail, delete, static slots) are taken only then. */
int lc_in_sync(const struct launcher *lc);
double lc_now(void); /* wall clock, epoch seconds */
/* A launch's end as upstream's statsd/metrics result name: ready "ready",
 * aborted (quota) "error.quota", failed "error.unknown". */
const char *lc_launch_result_key(enum drv_launch_result r);
double lc_monotonic(void); /* monotonic seconds */
void lc_set_error(struct launcher *lc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The full record of one of our provider's nodes (or any node, with
 * full_records) from the cache, or NULL (unknown, unreadable, or another
 * provider's: see lc_node_sum). */
const struct np_node *lc_node(struct launcher *lc, const char *id);
/* The summary of any node from the cache, or NULL (unknown, unreadable). */
const struct np_node_sum *lc_node_sum(struct launcher *lc, const char *id);
/* The summary of a cache entry of lc->nodes (NULL: empty or unreadable). */
#define LC_SUM(entry) ((const struct np_node_sum *)(entry)->obj)
const struct np_request *lc_request(struct launcher *lc, const char *id);
/* Busy set. */
int lc_busy(struct launcher *lc, const char *node_id);
void lc_busy_add(struct launcher *lc, const char *node_id);
void lc_busy_del(struct launcher *lc, const char *node_id);
/* The node's znode is deleted (see struct launcher's gone). */
void lc_node_gone(struct launcher *lc, const char *node_id);
/* A delete of the node's znode is about to be sent (see struct launcher's
 * deleting); lc_node_deleted when its reply is back (ok: it was deleted). */
void lc_node_deleting(struct launcher *lc, const char *node_id);
void lc_node_deleted(struct launcher *lc, const char *node_id, int ok);
/*
 * zk_set_under and zk_multi_under for the launcher's writes of node and
 * request records (/nodepool/nodes/<id>, /nodepool/requests/<id>): the
 * caches take the data written from the reply instead of reading it back
 * (zk_cache_write_begin); other paths are written as by zk_set_under and
 * zk_multi_under. cb and arg as theirs; cb is always called.
 */
void lc_set_under(struct launcher *lc, struct zk_lock *const *locks, int nlocks, const char *path,
		  const void *data, int len, int version, zk_stat_cb cb, void *arg);
void lc_multi_under(struct launcher *lc, struct zk_lock *const *locks, int nlocks,
		    const struct zk_multi_op *ops, int count, zk_multi_cb cb, void *arg);
/*
 * lc_set_under with the record data encodes (a struct np_node for a
 * node's path, a struct np_request for a request's; borrowed for the
 * call): the cache takes a copy of it instead of decoding data back
 * (issue 25). A set in lc_multi_under or lc_lock_acquire_with names its
 * record likewise in zk_multi_op.record. NULL: as lc_set_under.
 */
void lc_set_record_under(struct launcher *lc, struct zk_lock *const *locks, int nlocks,
			 const char *path, const void *data, int len, const void *record,
			 int version, zk_stat_cb cb, void *arg);
/*
 * zk_lock_acquire_with for the launcher's records: lock (ZK_LOCK_NEW_DIR),
 * and the sets among ops (a request's `pending`, a new node's `building`)
 * ride in the multi that makes the lock's dir and contender; the caches
 * take what they wrote from the reply, as lc_multi_under (a write not
 * applied, or whose reply was lost, is read back as any change); a
 * sequential create of a node among ops (a launch's INIT node riding in a
 * request's accept) is announced to the node cache from the reply too
 * (zk_cache_create_begin/_end, its mzxid the batch's: one transaction,
 * one zxid), when a set in the same batch reports that zxid. cb and arg
 * as zk_lock_acquire's; zk_lock_applied(lock) says whether the ops went in.
 * cb is always called (the caches wait for it), so the lock must not be
 * released or freed while it is being acquired (handlers hold it until
 * the callback: their operation reference keeps them).
 */
void lc_lock_acquire_with(struct launcher *lc, struct zk_lock *lock, const struct zk_multi_op *ops,
			  int count, zk_lock_cb cb, void *arg);
/* Write a node (encode + set) under lock (the node's lock, held: the write
 * is never sent once the session that holds it has ended; zk_set_under),
 * or NULL for none; cb may be NULL (it gets ZK_LOCK_LOST for a lock lost). */
void lc_store_node(struct launcher *lc, const struct np_node *n, struct zk_lock *lock,
		   zk_stat_cb cb, void *arg);
/* Create a new node znode (sequential); cb gets the path. */
void lc_create_node(struct launcher *lc, const struct np_node *n, zk_string_cb cb, void *arg);
/* Update our pool component (paused flag). */
void lc_pool_update_component(struct lc_pool *pool);
/*
 * 1 when n (a cached or read record) is a BUILDING node of our provider
 * whose launch our driver can resume (its launch_resumable slot): when
 * unlocked, the launcher that started it is gone (killed, restarted, or a
 * peer whose session ended), and the request it is allocated to adopts it
 * (handler.c) instead of launching again, while the cleanup leaves it
 * alone. Launches survive their launcher; upstream deletes such nodes.
 */
int lc_node_adoptable(struct launcher *lc, const struct np_node *n);
/* An unlocked adoptable node waiting for its request: allocated to a
 * request that is still requested or pending. */
int lc_node_awaits_adoption(struct launcher *lc, const struct np_node *n);
/* Nonzero when a launcher that takes no provider lock (a pool component of
 * our provider without nodepoold's marker key) serves our provider, so
 * nodepoold serves nothing of it meanwhile (who gets "hostname (launcher
 * id)"): 2 when its version is 0.x, what a nodepoold from before the
 * marker writes (Nodepool's own releases with pool components are 3.x and
 * later), 1 otherwise (an upstream Nodepool launcher). */
int lc_upstream_peer(struct launcher *lc, char *who, size_t wholen);
/* The other launchers serving our provider (pool components not ours),
 * appended to out as "hostname pool launcher-id". */
struct ipc_strv;
void lc_peers(struct launcher *lc, struct ipc_strv *out);
/* Delete a node record entirely, as upstream's deleteNode: with lock held,
 * our contender, the lock dir and the node in one multi; else (or refused:
 * another contender) state deleted, then a recursive delete. Takes n and
 * lock (NULL: none held). */
void lc_delete_node_record(struct launcher *lc, struct np_node *n, struct zk_lock *lock);

/* lcconfig.c */
int lc_config_load(struct launcher *lc, const json_t *config, const char *provider, char *err,
		   size_t errlen);
void lc_config_free(struct launcher *lc);
const struct lc_label *lc_label_get(const struct launcher *lc, const char *name);

/* assign.c */
void lc_assign_pass(struct launcher *lc);
/*
 * One actor per duty (issue 22): 1 when this launcher is the one live
 * launcher of its provider that acts on duty item key, the launcher whose
 * pool component has the best rendezvous score of (launcher id, key)
 * among the provider's pool components (the hash requests are shared by;
 * ties to the smaller id). Keys: "min-ready/<label>" (minready.c),
 * "node/<id>" (max-ready-age, hold expiry: cleanup.c), "leak/<item>"
 * (statemachine.c, openstack.c), "static/<host>" (static.c). Every
 * launcher computes the same owner from the same registrations; a lost
 * launcher's items move to the others when its registration goes (session
 * end), and only its items move. 1 when no registration of the provider is
 * seen (nobody else acts either).
 */
int lc_duty_mine(struct launcher *lc, const char *key);

/*
 * The decisions of an assign pass, one request at a time (assign.c), as
 * upstream's PoolWorker._assignHandlers and NodeRequestHandler:
 *
 * lc_assign_defer_reason: why pool leaves r to another launcher's pool this
 * pass, or NULL when this pool takes it (to serve or to decline). comps:
 * every launcher's pool components (ours included, skipped by
 * pool->launcher_id). Left: r names another provider and one of its pools
 * can serve every label; a pool of lower priority number, not paused, can;
 * or this pool lacks a label and another pool has them all. The reason is
 * a static string.
 *
 * lc_assign_decline_reason: why pool must decline r (reference 2.2 step 4),
 * or NULL: upstream's texts "pool is disabled" (max-servers 0),
 * "node type(s) [a, b] not available" (not in the pool, or one of the
 * driver's error labels), "images are not available" (label_ready), "it
 * would exceed quota" (more nodes than max-servers, or than the driver's
 * label_capacity). Static string, valid until the next call.
 *
 * lc_assign_tenant_fits: 1 when tenant limit tl leaves room for r in pool on
 * top of used (the tenant's current usage: the `resources` of its nodes),
 * each label needing the driver's label_quota (1 instance without one); 0
 * when a limit would be exceeded (the request is deferred, not declined).
 */
struct np_component;
const char *lc_assign_defer_reason(const struct lc_pool *pool, const struct np_request *r,
				   const struct np_component *const *comps, int ncomp);
const char *lc_assign_decline_reason(struct lc_pool *pool, const struct np_request *r);
int lc_assign_tenant_fits(const struct lc_pool *pool, const struct lc_tenant_limit *tl,
			  const struct drv_quota *used, const struct np_request *r);
/* The tenant-resource-limits entry of tenant, or NULL (none, or tenant
 * NULL). */
const struct lc_tenant_limit *lc_tenant_limit(const struct launcher *lc, const char *tenant);
/*
 * What tenant uses now, added to *used (initialized by the caller): the
 * `resources` of every node of the tenant in the node cache (any provider,
 * any state, as upstream's tenant accounting and Zuul's; one instance for
 * a node without, as a static node), plus this
 * launcher's nodes of the tenant not yet in it for certain (INIT creates
 * and reuse allocations sent, not answered: counted twice rather than
 * missed). Exact across launchers and providers inside a quota round
 * (quota.c's design).
 */
void lc_tenant_usage(struct launcher *lc, const char *tenant, struct drv_quota *used);

/* handler.c */
struct handler *lc_handler_new(struct lc_pool *pool, const char *req_id);
void lc_handler_start(struct handler *h);
void lc_handler_request_removed(struct handler *h);
void lc_handler_rerun(struct handler *h); /* a paused handler tries again */
/* The caches re-synced: declines held back meanwhile are decided now. */
void lc_handler_resynced(struct launcher *lc);
void lc_handler_free(struct handler *h);
int lc_handler_active_launches(const struct handler *h);
struct handler *lc_find_handler(struct launcher *lc, const char *req_id);
/* At lc_free: destroy detached handlers whose operations will never
 * complete. */
void lc_handler_reap_zombies(struct launcher *lc);

/* The launcher's driver host services (drivers/host.h), every slot filled
 * (launcher.c); main.c registers them before the provider is made. */
extern const struct drv_host_ops lc_host_ops;
/* Its launch_done and store_node slots (handler.c). */
void lc_host_launch_done(struct drv_launch *l, enum drv_launch_result result, const char *error);
int lc_host_store_node(struct drv_host *h, const struct drv_launch *l);

/* cleanup.c */
void lc_cleanup_pass(struct launcher *lc);
/* The delete_done slot of lc_host_ops. */
void lc_host_delete_done(struct drv_delete *d, int ok, const char *error);
void lc_delete_pass(struct launcher *lc);
/* Start deleting one node (locks it, drives the driver); safe to call twice. */
void lc_cleanup_delete_node(struct launcher *lc, const char *node_id);
/* Delete the instance of n (taken; its external_id: none, nothing to do)
 * through the driver's node_delete, leaving its record alone: a launch
 * begun before its node's lock was answered, whose lock was refused
 * (handler.c). A failed delete is logged; the leak cleanup takes it. */
void lc_cleanup_delete_instance(struct launcher *lc, struct np_node *n);

/* quota.c: launch decisions serialized across the provider's launchers
 * (the design is at the top of quota.c). */
int lc_quota_init(struct launcher *lc);	 /* after lc->zk exists; -1 ENOMEM */
void lc_quota_free(struct launcher *lc); /* before zk_free; NULL quota: no-op */
/* 1 while a round is open (or for a launcher without one): a launch may
 * be decided and its INIT node created now. */
int lc_quota_open(const struct launcher *lc);
/* Ask for a round: lc_handler_quota_round runs once the lock is held. */
void lc_quota_want(struct launcher *lc);
/* Open a round now, outside the loop's, if one could run at once (the
 * locks held without a break since a round with a complete view, no peer
 * waiting): 1, and lc_quota_open is 1 until lc_quota_leave, which the
 * caller calls before returning to the loop; 0 when not (nothing
 * changed: ask with lc_quota_want). Without a quota: 1. */
int lc_quota_enter(struct launcher *lc);
void lc_quota_leave(struct launcher *lc);
/*
 * A reservation (quota.c's design): a create or allocation write sent in a
 * round, counted by the rounds that follow until the node cache shows its
 * node (then the view counts it), or until it fails. Owned by quota.c;
 * the fields are for the counters (has_remaining_quota, lc_tenant_usage).
 */
enum lc_qres_kind {
	LC_QRES_LAUNCH,	  /* a launch's INIT node: pool and tenant usage */
	LC_QRES_ALLOC,	  /* a reused node allocated to a tenant with limits */
	LC_QRES_REGISTER, /* a static node's registration: counts for nothing */
};
struct lc_qres {
	struct lc_qres *next;
	int kind;	   /* enum lc_qres_kind */
	int answered;	   /* lc_quota_create_done called */
	char *pool;	   /* LC_QRES_LAUNCH: the node's pool */
	char *tenant;	   /* the tenant it counts for; NULL: none */
	json_t *resources; /* the node's `resources` (owned); NULL: none */
	char *node_id;	   /* once answered (LC_QRES_ALLOC: from the start) */
};
/* A create (LAUNCH, REGISTER) or allocation write (ALLOC) of node n is
 * about to be sent in the open round (n: its record as sent, read only;
 * tenant: the request's tenant, NULL for none). The reservation returned
 * (never NULL: memory exhaustion aborts) is handed back, once, to
 * lc_quota_create_done. Without a quota (no rounds): NULL. */
struct lc_qres *lc_quota_create_sent(struct launcher *lc, enum lc_qres_kind kind,
				     const struct np_node *n, const char *tenant);
/* Its outcome: node_id the node created or written (it counts until the
 * cache shows it), NULL when it failed (it stops counting now); unknown
 * (a lost connection, or dropped without one: the node may exist) makes
 * the next round wait for a re-synced view. r NULL: a no-op. */
void lc_quota_create_done(struct launcher *lc, struct lc_qres *r, const char *node_id, int unknown);
/* The reservations not shown by the node cache yet, in no order (valid
 * until the loop runs again). */
const struct lc_qres *lc_quota_reservations(struct launcher *lc);
uint64_t lc_quota_rounds(const struct launcher *lc);
/* Rounds that ran while creates of an earlier round of the same hold were
 * not answered or not read yet (issue 25: rounds overlap). */
uint64_t lc_quota_overlapped(const struct launcher *lc);
/* The node cache read a node: a round waiting for its view tries again
 * now rather than at its next poll. */
void lc_quota_nodes_read(struct launcher *lc);
/* Times the provider's lock was taken (fewer than rounds while it is kept
 * across rounds: issue 25). */
uint64_t lc_quota_taken(const struct launcher *lc);
/* handler.c: run every handler with nodes to launch (a round is open). */
void lc_handler_quota_round(struct launcher *lc);

/* minready.c */
void lc_minready_pass(struct launcher *lc);

/* worker.c: the process around the launcher (config source, supervisor
 * channel, exit code). */
struct worker;
struct worker *lc_worker_new(struct event_base *base, const char *provider, int channel_fd);
/* Standalone: load nodepool.yaml (+ secure), validate, start. */
int lc_worker_load_file(struct worker *w, const char *path, const char *secure, char *err,
			size_t errlen);
/* Start (or restart) the launcher from a config slice (JSON). */
int lc_worker_apply_config(struct worker *w, const json_t *slice, char *err, size_t errlen);
void lc_worker_stop(struct worker *w);
/* After the loop has stopped: run it until the ZooKeeper operations still
 * in flight have completed (their callbacks free what they own; zk_free
 * would drop them), at most timeout seconds. */
void lc_worker_drain(struct worker *w, double timeout);
void lc_worker_dump(struct worker *w, struct evbuffer *out);
int lc_worker_exit_code(const struct worker *w);
void lc_worker_free(struct worker *w);

#endif
