/*
 * Private interface between the parts of the ZooKeeper client library:
 * lib/zk/zk.c (operations) with zk_bridge.c, zk_recipes.c, zk_retry.c and
 * zk_session.c, lib/zk/zk_lock.c (the kazoo Lock recipe) and
 * lib/zk/zk_cache.c (watch-driven caches). Not for use outside lib/zk*.c.
 *
 * The public operations of zk.h are thin wrappers around zk_submit(): it
 * reports one struct zk_result (which also carries the path the operation was
 * issued for and the session generation it ran in), and it separates the
 * owner (what zk_cancel() matches) from the callback argument.
 */
#ifndef NP_ZK_PRIVATE_H
#define NP_ZK_PRIVATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <sys/time.h>

#include <event2/util.h>

#include "lib/zk/zk.h"

/* The outcome of one operation, valid only during the callback. */
struct zk_result {
	int rc;
	const char *path;	    /* the path as submitted */
	unsigned gen;		    /* session generation the operation was submitted in */
	const char *value;	    /* get: the data (NUL-terminated; NULL unless ZOK);
				       create: the created path (NULL unless ZOK) */
	int len;		    /* get: data length */
	const struct zk_stat *stat; /* get, set, exists: NULL unless ZOK */
	int count;		    /* children */
	char *const *names;
	int mcount; /* multi: per-op results */
	const struct zk_multi_result *mres;
};
typedef void (*zk_result_cb)(const struct zk_result *r, void *arg);

enum zk_op_kind {
	ZK_OP_CREATE,
	ZK_OP_GET,
	ZK_OP_SET,
	ZK_OP_DELETE,
	ZK_OP_EXISTS,
	ZK_OP_CHILDREN,
	ZK_OP_MULTI,
	ZK_OP_WATCH,   /* zk.c's own: a zk_watch_tree addWatch */
	ZK_OP_CATCHUP, /* zk.c's own: the SetWatches requests of a zk_catch_up */
};

/*
 * One operation. Fields not used by the kind are ignored. Everything is
 * copied by zk_submit().
 *
 * owner: what zk_cancel() matches for cb (NULL: never cancelled).
 * wowner: the same for the watch.
 * always: also call cb (with the C client's ZCLOSING) while zk_free() tears
 * the session down, for callers whose arg must be freed (sync waiters,
 * detached lock contenders). Such callbacks must not submit anything that
 * they need to hear back from.
 */
struct zk_req {
	enum zk_op_kind kind;
	const char *path;
	const void *data; /* create, set; NULL with len 0 stores empty data */
	int len;
	int flags;	   /* create: ZOO_EPHEMERAL | ZOO_SEQUENCE */
	int version;	   /* set, delete */
	int makepath;	   /* create */
	int recursive;	   /* delete */
	zk_watch_cb watch; /* get, exists, children */
	void *warg;
	const void *wowner;
	zk_result_cb cb;
	void *arg;
	const void *owner;
	int always;
	const struct zk_multi_op *mops; /* multi: the ops (copied) */
	int mcount;
	/* one watcher context for every registration with the same watch,
	 * warg and wowner (and session), not one each: for watches set by
	 * the thousand (caches); see struct zk_watch below */
	int share_watch;
	/* after a lost connection in its session, send it again once
	 * connected (see zk_set_retry) instead of reporting ZCONNECTIONLOSS */
	int retry;
	/* a write under locks (zk_set_under...): every one must be held in
	 * the current session, and the call is sent (again) only in it */
	struct zk_lock *const *locks;
	int nlocks;
};
void zk_submit(struct zk *zk, const struct zk_req *req);

/* 1 when lock is held and was acquired in session generation gen
 * (zk_session_gen): what a write under it needs. */
int zk_lock_held_in(const struct zk_lock *lock, unsigned gen);

/*
 * Catching up after a lost connection in a session that was kept, for a
 * persistent watch (zk_watch_tree), which misses what changed while
 * disconnected: as ZooKeeper's own clients re-set their one-shot watches,
 * zk_catch_up sends SetWatches (zoo_aset_data_watches) with zxid and data
 * watches on the n absolute paths, split into requests of at most
 * ZK_CATCHUP_BYTES of paths each (the server takes up to jute.maxbuffer,
 * 1 MB by default; the Java client splits at 128 kB likewise). The server
 * answers with a NodeDeleted event for each path gone and NodeDataChanged
 * for each changed after zxid; they reach the tree watch covering the path
 * before cb, which is called once (on the loop, r->rc ZOK or the first
 * error; r->path "/") when every request is answered. paths are copied.
 * owner as in struct zk_req.
 */
#define ZK_CATCHUP_BYTES (128 * 1024)
void zk_catch_up(struct zk *zk, int64_t zxid, const char *const *paths, int n, zk_result_cb cb,
		 void *arg, const void *owner);

/*
 * The zxid to catch up from, for a listener hearing ZK_EV_RECONNECTED
 * (session kept): the last zxid seen before the first connection lost
 * since every catch-up last succeeded. The C client holds it from the
 * moment that connection is lost (zoo_catchup_zxid), in its I/O thread: a
 * connection that comes up and drops again before the loop hears of it
 * moves the client's last zxid past changes no one was told of, so the
 * zxid current when the loop hears of the reconnection would skip them.
 * zk_catchup_begin counts the caller into this reconnection's round and
 * sets *round; zk_catchup_end(round, ok) says it has caught up (ok: every
 * change read; its view is synced) or given up. Once every catch-up begun
 * in the round has ended ok (and a round with none at once), the C client
 * drops the point (zoo_resync_done), unless a connection was lost since;
 * otherwise the next reconnection catches up from the same point. A round
 * ends with the next reconnection or session: zk_catchup_end for an older
 * one does nothing. Called outside a reconnection's announcement,
 * zk_catchup_begin returns 0 (everything counts as changed).
 */
int64_t zk_catchup_begin(struct zk *zk, unsigned *round);
void zk_catchup_end(struct zk *zk, unsigned round, int ok);

/* Generation of the current session: bumped each time a new session is
 * started after an expiry (results and watches carry the one they ran in). */
unsigned zk_session_gen(const struct zk *zk);
struct event_base *zk_base(const struct zk *zk);
/* 1 once zk_free() has started: "always" callbacks must only clean up. */
int zk_closing(const struct zk *zk);
double zk_timeout(const struct zk *zk);

/*
 * Session listeners for the lock and cache modules: called on the loop for
 * every session event, before the zk_new() session callback. The struct is
 * embedded in the listener's own object; removing it during a callback
 * (also another listener) is safe.
 */
struct zk_listener {
	zk_session_cb cb;
	void *arg;
	struct zk_listener *prev, *next;
};
void zk_listener_add(struct zk *zk, struct zk_listener *l, zk_session_cb cb, void *arg);
void zk_listener_remove(struct zk *zk, struct zk_listener *l);

/* Monotonic clock in seconds. */
double zk_now(void);

/*
 * kazoo's contender pattern: a name ending in "__lock__" and a sequence of
 * 10 digits, optionally negative ("__lock__(-?\d{10})$", searched, not
 * anchored at the start). Returns a pointer to the sequence text inside
 * name, or NULL. Contenders are ordered by comparing these texts as
 * strings, as kazoo sorts its regex groups.
 */
const char *zk_lock_seq(const char *name);

/* For zk_sync.c: the handle's event loop (borrowed), its "connected" flag
 * (1 while connected; borrowed, lives as long as zk), and its session
 * timeout in seconds. */
struct event_base *zk_loop_base(const struct zk *zk);
const int *zk_connected_flag(const struct zk *zk);
double zk_session_timeout(const struct zk *zk);

/* ==== the zk's insides ======================================================
 * Shared by the files the ZooKeeper client is split into: zk.c (calls,
 * requests, watches, the operations), zk_bridge.c (the C client's threads
 * to the loop), zk_recipes.c (operations of several requests), zk_retry.c
 * (calls parked until the connection is back) and zk_session.c (the
 * session). Only those use what follows. */

#define ZK_MAKEPATH_TRIES 4
#define ZK_RDELETE_TRIES  5

/*
 * One watcher context. Normally one per registration; with zk_req.share_watch
 * one per (callback, argument, owner, session) for all registrations, so a
 * cache watching 20,000 znodes holds one, not 20,000 (issue 13): refs counts
 * the registrations that may still fire it. The C client keeps one
 * registration per (watcher, context) and path, so a shared context
 * registered twice on a path fires once: refs may stay above zero, and the
 * object then goes with its session (IT_RELEASE) or the zk.
 */
struct zk_watch {
	struct zk *zk; /* immutable: read by the C client's threads */
	struct zk_watch *prev, *next;
	zk_watch_cb cb; /* NULL once cancelled */
	void *arg;
	const void *owner;
	unsigned gen;
	int refs;
	int shared;
	int persistent; /* zk_watch_tree: fires any number of times; freed with
			   its session (IT_RELEASE) or the zk */
};

/*
 * A persistent recursive watch kept for the life of the zk (zk_watch_tree):
 * added again in every new session and on every reconnection, with a
 * watcher context of the current session.
 */
struct zk_tree {
	struct zk_tree *next;
	char *path;
	zk_watch_cb cb;
	void *arg;
	struct zk_watch *w; /* the context of the session it was last added in */
};

struct zk_call;
struct zk_rdel;

struct zk_rq {
	struct zk *zk;		   /* immutable: read by the C client's threads */
	struct zk_rq *prev, *next; /* zk->rqs: every rq not yet processed */
	unsigned gen;		   /* the session it was sent in */
	int queued;		   /* its result is in the queue (set under qmu) */
	struct zk_call *call;
	struct zk_rdel *rdel; /* recursive delete: the tree node this is for */
	enum zk_op_kind kind;
	int step; /* create: 0 target, 1 parent; rdel: 0 list, 1 delete */
	char *path;
	struct zk_watch *watch;
	/* multi: the C client writes results (and created paths) into these
	 * at completion, so they live as long as the request */
	int mcount;
	zoo_op_t *mops;
	zoo_op_result_t *mres;
	char **mpaths; /* our copies of the op paths */
	char **mdata;  /* our copies of the op data */
	char **mbufs;  /* created-path buffers */
};

/* One znode of a recursive delete: its children first, then itself. */
struct zk_rdel {
	struct zk_call *call;
	struct zk_rdel *parent;
	char *path;
	int version;
	int pending; /* children not yet deleted */
	int rc;	     /* first error of a child */
	int attempts;
};

enum zk_pub {
	PUB_NONE,
	PUB_STRING,
	PUB_DATA,
	PUB_STAT,
	PUB_VOID,
	PUB_CHILDREN,
	PUB_MULTI,
	PUB_CREATE,
};

struct zk_call {
	struct zk_call *prev, *next;
	enum zk_op_kind kind;
	char *path;
	unsigned gen;
	zk_result_cb cb; /* NULL once cancelled */
	void *arg;
	const void *owner;
	int always;
	/* a public zk.h callback, called through pub_dispatch() */
	enum zk_pub pub;
	union {
		zk_string_cb s;
		zk_data_cb d;
		zk_stat_cb st;
		zk_void_cb v;
		zk_children_cb c;
		zk_multi_cb m;
		zk_create_cb cr;
	} pcb;
	void *parg;
	/* create with makepath */
	char *data;
	int len;
	int flags;
	int makepath;
	int attempts;
	char *created;
	int has_cstat; /* the target's stat (create2) */
	struct zk_stat cstat;
	int final_rc;
	int outstanding; /* rqs in flight */
	/* re-sent after a lost connection (zk_set_retry): what to send again */
	int retry;
	int version;		  /* set, delete */
	int recursive;		  /* delete */
	int resent;		  /* sent again at least once: its first try may have landed */
	int under;		  /* a write under locks (zk_set_under...): sent only in */
	unsigned under_gen;	  /* this session, the one its locks were held in */
	struct zk_multi_op *mops; /* multi: deep copy (paths, data owned) */
	int mcount;
	struct zk_call *pnext; /* zk->parked, in submission order */
};

enum zk_item_kind {
	IT_RESULT,  /* rq completed (or failed to submit) */
	IT_WATCH,   /* a watch fired */
	IT_SESSION, /* session state change of handle zh */
	IT_TLS,	    /* the C client logged a TLS failure */
	IT_RELEASE, /* the handle of generation gen is closed: drop its watches */
};

struct zk_item {
	struct zk_item *next;
	enum zk_item_kind kind;
	int rc;
	struct zk_rq *rq;
	struct zk_call *call;
	struct zk_watch *w;
	int type;
	int state;
	zhandle_t *zh;
	unsigned gen;
	char *str; /* watch path, created path, log message */
	char *value;
	int len;
	int has_stat;
	struct zk_stat st;
	int count;
	char **names;
};

struct zk {
	struct event_base *base;
	char *hosts;
	char *certstr; /* "ca,cert,key" or NULL for plain TCP */
	double timeout;
	zk_session_cb session_cb;
	void *session_arg;

	zhandle_t *zh;
	unsigned gen;
	int connected;
	int handle_connected; /* this handle has been connected once */
	int tls_reported;     /* AUTH_FAILED sent since the last connect */
	/* an outage: the C client's connection errors after its first are
	 * counted, not logged (set and read by its I/O thread's log
	 * callback, cleared by the loop once connected) */
	atomic_int err_logged;
	atomic_ullong conn_errors;
	unsigned long long errors_at_loss; /* conn_errors when the outage began */
	double away_since;		   /* monotonic s the outage began, 0: none */
	struct zk_counters counters;	   /* the loop's own (zk_counters) */
	struct zk_op_counts ops;	   /* zk_op_counts: counted on the loop */
	unsigned disp_items;		   /* zk_dispatch_max */
	double disp_secs;
	int64_t session_id;
	double restart_delay;
	struct event *restart_ev;
	int log_slot;

	pthread_mutex_t qmu;
	struct zk_item *qhead, *qtail;
	int efd;
	struct event *wake_ev;
	struct zk_item *batch; /* items taken from the queue, not yet processed */

	struct zk_call *calls;
	int ncalls;
	struct zk_rq *rqs;
	struct zk_watch *watches;
	struct zk_tree *trees;
	struct zk_listener *listeners;
	struct zk_listener *liter; /* next listener of a running emit */

	int share_watch;	       /* the zk_rq_send() in progress shares its watch context */
	struct zk_watch *last_shared;  /* the shared context found or made last */
	int retry_mode;		       /* zk_set_retry() */
	struct zk_call *phead, *ptail; /* calls parked until the connection is back */

	/* the catch-up after a reconnection (zk_catchup_begin): the C
	 * client's point and its count of lost connections when we heard of
	 * the reconnection; the round (one per reconnection or session);
	 * caches still catching up in it, whether one failed, whether the
	 * reconnection is still being announced, whether it is done */
	int64_t cu_zxid, cu_losses;
	unsigned cu_round;
	int cu_waiting, cu_failed, cu_announcing, cu_done;

	int dispatching;
	int free_requested;
	int closing;
};

/* calls, requests and watches, and a request's result (zk.c) */
struct zk_call *zk_call_new(struct zk *zk, enum zk_op_kind kind, const char *path);
void zk_call_free(struct zk *zk, struct zk_call *c);
struct zk_watch *zk_watch_new(struct zk *zk, zk_watch_cb cb, void *arg, const void *owner);
void zk_watch_free(struct zk *zk, struct zk_watch *w);
void zk_watch_put(struct zk *zk, struct zk_watch *w);
struct zk_rq *zk_rq_new(struct zk *zk);
void zk_rq_send(struct zk *zk, struct zk_call *c, struct zk_rdel *rd, enum zk_op_kind kind,
		int step, const char *path, const void *data, int len, int flags, int version,
		zk_watch_cb wcb, void *warg, const void *wowner);
void zk_call_finish_rc(struct zk *zk, struct zk_call *c, int rc);
void zk_rq_result(struct zk *zk, struct zk_item *it);
int zk_path_ok(const char *path, int sequence);
void zk_multi_send(struct zk *zk, struct zk_call *c, const struct zk_multi_op *ops, int count);
/* count one request sent (zk_op_counts); nops: a multi's operations */
void zk_count_sent(struct zk *zk, enum zk_op_kind kind, int nops);

/* the thread bridge (zk_bridge.c) */
struct zk_item *zk_item_new(enum zk_item_kind kind, int rc);
void zk_enqueue(struct zk *zk, struct zk_item *it);
void zk_c_string_done(int rc, const char *value, const void *data);
void zk_c_string_stat_done(int rc, const char *value, const struct Stat *st, const void *data);
void zk_c_data_done(int rc, const char *value, int len, const struct Stat *st, const void *data);
void zk_c_stat_done(int rc, const struct Stat *st, const void *data);
void zk_c_void_done(int rc, const void *data);
void zk_c_strings_done(int rc, const struct String_vector *sv, const void *data);
void zk_c_path_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx);
void zk_c_session_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx);
void zk_on_wake(evutil_socket_t fd, short what, void *arg);
void zk_drain(struct zk *zk, double timeout);

/* recursive delete, makepath, tree watches, catch-up (zk_recipes.c) */
struct zk_rdel *zk_rdel_new(struct zk_call *c, struct zk_rdel *parent, const char *path,
			    int version);
void zk_rdel_start(struct zk *zk, struct zk_rdel *rd);
void zk_rdel_result(struct zk *zk, struct zk_rq *rq, struct zk_item *it);
void zk_create_with_parents(struct zk *zk, struct zk_call *c);
void zk_tree_added(struct zk *zk, struct zk_rq *rq, int rc);
void zk_trees_send(struct zk *zk);
void zk_catchup_check(struct zk *zk);

/* the retry queue (zk_retry.c) */
void zk_park(struct zk *zk, struct zk_call *c);
void zk_flush_parked(struct zk *zk);
void zk_fail_parked(struct zk *zk, int rc);
int zk_retryable(const struct zk_req *req);

/* the session (zk_session.c) */
int zk_start_handle(struct zk *zk);
void zk_session_item(struct zk *zk, struct zk_item *it);
void zk_emit(struct zk *zk, enum zk_event ev);
void zk_destroy(struct zk *zk);

#endif
