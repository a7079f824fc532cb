/*
 * Private interface between the parts of the ZooKeeper client library:
 * lib/zk/zk.c (session, operations), lib/zk/zk_lock.c (the kazoo Lock recipe) and
 * lib/zk/zk_cache.c (watch-driven caches). Not for use outside lib/zk*.c.
 *
 * The public operations of zk.h are thin wrappers around zk_submit(): it
 * reports one struct zk_result (which also carries the path the operation was
 * issued for and the session generation it ran in), and it separates the
 * owner (what zk_cancel() matches) from the callback argument.
 */
#ifndef NP_ZK_PRIVATE_H
#define NP_ZK_PRIVATE_H

#include <sys/time.h>

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
	 * the thousand (caches); see struct zk_watch in zk.c */
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

/* A timeval of s seconds (negative as 0). */
struct timeval zk_tv_of(double s);
/* For zk_sync.c: the handle's event loop (borrowed), its "connected" flag
 * (1 while connected; borrowed, lives as long as zk), and its session
 * timeout in seconds. */
struct event_base *zk_loop_base(const struct zk *zk);
const int *zk_connected_flag(const struct zk *zk);
double zk_session_timeout(const struct zk *zk);

#endif
