/*
 * Asynchronous ZooKeeper client on a libevent loop.
 *
 * Wraps the official ZooKeeper C client (multi-threaded flavour, built with
 * TLS by mk/zkclient.sh). The C client's own I/O thread (which also runs its
 * completions: mk/zkclient-io.patch) only hands results over: every
 * completion, watch and session event is delivered
 * on the libevent loop of the thread that created the struct zk, so callers
 * never need locks.
 *
 * Error codes are the C client's (ZOK, ZNONODE, ZNODEEXISTS, ZBADVERSION,
 * ZNOTEMPTY, ZCONNECTIONLOSS, ZSESSIONEXPIRED, ZCLOSING, ...), plus the
 * ZK_LOCK_* codes below. zk_strerror() names them.
 *
 * Paths are absolute inside the chroot given in the host string (as kazoo).
 *
 * The C client's own log lines go through lib/core/log.h: the first of its
 * errors (mostly connection failures it retries) since the session was
 * last connected as a warning, the others of that outage at debug level
 * (counted: zk_counters), and the outage summed up in the line that says
 * the connection is back; everything else at debug level (the C client
 * logs beyond errors only when log_get_level() is LOG_LVL_DEBUG at
 * zk_new()).
 */
#ifndef NP_ZK_H
#define NP_ZK_H

#include <stdint.h>
#include <stddef.h>
#include <zookeeper.h>

struct event_base;
struct zk;
struct zk_lock;

/* Session events, as kazoo's states. */
enum zk_event {
	ZK_EV_CONNECTED,   /* a new session is established (first, or after EXPIRED) */
	ZK_EV_SUSPENDED,   /* connection lost; the session may still be alive */
	ZK_EV_RECONNECTED, /* connection back on the same session: ephemerals intact */
	ZK_EV_EXPIRED,	   /* session lost: our ephemerals and locks are gone; a new
			      session is started at once and CONNECTED follows */
	ZK_EV_AUTH_FAILED, /* TLS or auth refused (e.g. untrusted server certificate,
			      or one for another name or address); retried with back-off
			      like a lost connection, reported once until a session
			      is established */
};

struct zk_options {
	const char *hosts;  /* "host:port[,host:port...][/chroot]"; required */
	double timeout;	    /* session timeout in seconds; <= 0 means 10 (zookeeper-timeout) */
	const char *tls_ca; /* PEM files; all three set (TLS) or all NULL (plain TCP) */
	const char *tls_cert;
	const char *tls_key;
};

struct zk_stat {
	int64_t czxid, mzxid, pzxid;
	int64_t ctime_ms, mtime_ms; /* epoch milliseconds */
	int32_t version, cversion, aversion;
	int32_t num_children;
	int64_t ephemeral_owner; /* session id, 0 for persistent znodes */
	int32_t data_length;
};

typedef void (*zk_session_cb)(struct zk *zk, enum zk_event ev, void *arg);
/* data is NUL-terminated for convenience (len excludes it); NULL when rc != ZOK. */
typedef void (*zk_data_cb)(int rc, const char *data, int len, const struct zk_stat *st, void *arg);
/* path: the created znode's path (with its sequence suffix), NULL when rc != ZOK. */
typedef void (*zk_string_cb)(int rc, const char *path, void *arg);
/* A create's: the created path and the new znode's stat (NULL unless ZOK). */
typedef void (*zk_create_cb)(int rc, const char *path, const struct zk_stat *st, void *arg);
typedef void (*zk_stat_cb)(int rc, const struct zk_stat *st, void *arg);
typedef void (*zk_void_cb)(int rc, void *arg);
/* names: child names (not paths), valid only during the call. */
typedef void (*zk_children_cb)(int rc, int count, char *const *names, void *arg);
/* type: ZOO_CREATED_EVENT, ZOO_DELETED_EVENT, ZOO_CHANGED_EVENT, ZOO_CHILD_EVENT. */
typedef void (*zk_watch_cb)(int type, const char *path, void *arg);

/*
 * Start a session. Connection happens in the background; session_cb reports
 * it. Returns NULL and fills err (errlen bytes) on bad options: no hosts,
 * hosts that do not resolve, only some TLS files given, a TLS file that is
 * unreadable or not PEM of its kind, a key that does not match the
 * certificate, a path with a comma (the C client takes "ca,cert,key").
 * The server must present a certificate from tls_ca that names the server
 * as the hosts string does: a host name among its DNS names, an IP address
 * among its IP addresses (mk/zkclient-tls.patch).
 */
struct zk *zk_new(struct event_base *base, const struct zk_options *opt, zk_session_cb session_cb,
		  void *arg, char *err, size_t errlen);
/*
 * Close the session (the server deletes our ephemerals) and free it.
 * Requests in flight are let finish first (up to the session timeout, or 1 s
 * while disconnected), but their callbacks, and those of watches, are not
 * called. May be called from a callback of this zk. Free locks and caches
 * first. NULL is a no-op.
 */
void zk_free(struct zk *zk);
/* 1 while connected (CONNECTED or RECONNECTED and not since SUSPENDED). */
int zk_is_connected(const struct zk *zk);
int64_t zk_session_id(const struct zk *zk);
const char *zk_strerror(int rc);
/* Operations submitted and not yet completed (a gauge for status/metrics). */
int zk_pending(const struct zk *zk);
/*
 * What befell the connection since zk_new (counters for status and
 * /metrics, issue 27): losses, connections lost (ZK_EV_SUSPENDED);
 * expirations, sessions expired; connect_errors, the C client's failed
 * connection attempts and other errors it logged (one line is logged per
 * outage, the rest only counted; the count and the outage's length are
 * in the "reconnected" line); resent, operations sent again after a lost
 * connection (zk_set_retry); lock_lost, writes under a lock not sent
 * since its session had ended (zk_set_under).
 */
struct zk_counters {
	unsigned long long losses, expirations, connect_errors, resent, lock_lost;
};
void zk_counters(const struct zk *zk, struct zk_counters *out);
/*
 * Requests sent to the server and watch events heard since zk_new, by
 * kind (issue 25: what a request costs ZooKeeper; the worker's SIGUSR2 dump
 * prints them, bench/fake_load.sh divides them by the requests served).
 * sent[] is indexed as enum zk_op_count: every C client request made,
 * including a makepath create's parent creates, a recursive delete's
 * listings and deletes, a lock's requests, a cache's reads, the addWatch of
 * a tree watch and the SetWatches of a catch-up; resent calls count again.
 * multi_ops: the operations inside the multis. events[]: persistent
 * (tree) watch events by type, [0] created, [1] deleted, [2] changed,
 * [3] child; oneshot: events of one-shot watches (data, exists, children).
 */
enum zk_op_count {
	ZK_COUNT_CREATE,
	ZK_COUNT_GET,
	ZK_COUNT_SET,
	ZK_COUNT_DELETE,
	ZK_COUNT_EXISTS,
	ZK_COUNT_CHILDREN,
	ZK_COUNT_MULTI,
	ZK_COUNT_ADDWATCH,
	ZK_COUNT_SETWATCHES,
	ZK_COUNT_KINDS
};
struct zk_op_counts {
	unsigned long long sent[ZK_COUNT_KINDS];
	unsigned long long multi_ops;
	unsigned long long events[4];
	unsigned long long oneshot;
};
void zk_op_counts(const struct zk *zk, struct zk_op_counts *out);
/*
 * The longest run of the loop's dispatch of what the C client handed over
 * (replies and watch events taken at one wake-up, each one's callbacks
 * included) since the last call with reset: *items taken and *ms it took
 * (CLOCK_MONOTONIC). A diagnostic of the loop's lag in a wave (issue 25).
 */
void zk_dispatch_max(struct zk *zk, int reset, unsigned *items, double *ms);
/* The counts as one line of name-value pairs, "create N get N ...
 * multi-ops N ... ev-created N ...", into buf (NUL-ended, truncated to
 * size). */
void zk_op_counts_format(const struct zk_op_counts *c, char *buf, size_t size);
/*
 * The C client's session id and password of the current session (what
 * zookeeper_init() takes to resume a session; tests use it to force an
 * expiry). NULL before the first session exists.
 */
const clientid_t *zk_client_id(const struct zk *zk);
/*
 * Forget every callback of zk_create/get/set/delete/exists/children and
 * every watch callback whose argument (arg or warg) is arg: they are never
 * called. For an object that is freed while
 * its operations or watches are outstanding (the operations still run on
 * the server). O(operations and watches outstanding).
 */
void zk_cancel(struct zk *zk, const void *arg);

/*
 * Keep a persistent recursive watch on path for the life of the zk: cb
 * gets, on the loop, every ZOO_CREATED_EVENT, ZOO_DELETED_EVENT and
 * ZOO_CHANGED_EVENT of path and of every znode below it (path: the changed
 * znode's), without being re-armed. ZooKeeper's addWatch with
 * PERSISTENT_RECURSIVE (3.6 or later; the C client's is added by
 * mk/zkclient-watch.patch), as kazoo's add_watch that upstream's tree
 * caches use. The path need not exist. The watch is added again on every
 * reconnection and in every new session, before the session listeners and
 * the zk_new() callback hear of it: a re-read they start then misses no
 * later change. Changes made while disconnected are not reported (the
 * server does not replay them): re-read on ZK_EV_RECONNECTED and
 * ZK_EV_CONNECTED. zk_cancel(zk, arg) stops it for good (the server keeps
 * sending its events to this session, which drops them). A path that is
 * not absolute, or a NULL cb, is ignored.
 */
void zk_watch_tree(struct zk *zk, const char *path, zk_watch_cb cb, void *arg);
/*
 * For tests: the number of paths the C client holds a watcher for, by
 * kind: counts[0] data, [1] exists, [2] children (one-shot watches),
 * [3] persistent, [4] persistent recursive. ZINVALIDSTATE (all 0) between
 * sessions.
 */
int zk_watch_counts(const struct zk *zk, int counts[5]);

/*
 * Ride out lost connections (off by default): from now on, a zk_set,
 * zk_delete (also recursive), zk_multi without creates, and zk_get,
 * zk_exists or zk_children without a watch that fails with
 * ZCONNECTIONLOSS (or ZOPERATIONTIMEOUT) is sent again once the
 * connection is back in the same session, in submission order; while
 * any is waiting, or while disconnected, new ones wait behind it so that
 * none overtakes an earlier one. Its callback comes once, with the
 * outcome of the last try; after an expiry they end with
 * ZSESSIONEXPIRED. A first try may have landed unheard: a delete sent
 * again may then report ZNONODE, a multi its version check failing; a
 * zk_set with a version that finds the version moved reads the znode
 * and reports ZOK when it holds our data (the stat is then the one
 * read). Creates are never sent again (a sequence create could happen
 * twice). As kazoo's KazooRetry around upstream Nodepool's writes.
 */
void zk_set_retry(struct zk *zk, int on);

/*
 * Asynchronous operations. The callback (may be NULL) is called exactly once
 * on the loop, also when submission fails (then with the error). Data is
 * copied before return.
 *
 * zk_create: flags are ZOO_EPHEMERAL and/or ZOO_SEQUENCE; makepath creates
 * missing parents as persistent empty znodes (as kazoo's makepath=True).
 * zk_delete: version -1 = any; recursive deletes children first (as kazoo's
 * delete(recursive=True)); ZNONODE anywhere in the tree is not an error.
 * Watches (may be NULL) fire once, on the loop. A watch is set only where
 * ZooKeeper sets one: zk_get and zk_children on ZOK, zk_exists on ZOK and
 * ZNONODE. Watches set in a session that expired are dropped without a call
 * (the EXPIRED event says to re-read).
 */
void zk_create(struct zk *zk, const char *path, const void *data, int len, int flags, int makepath,
	       zk_string_cb cb, void *arg);
/* zk_create, and the callback has the new znode's stat too (ZooKeeper's
 * create2, which every create sends). */
void zk_create2(struct zk *zk, const char *path, const void *data, int len, int flags, int makepath,
		zk_create_cb cb, void *arg);
void zk_get(struct zk *zk, const char *path, zk_watch_cb watch, void *warg, zk_data_cb cb,
	    void *arg);
void zk_set(struct zk *zk, const char *path, const void *data, int len, int version, zk_stat_cb cb,
	    void *arg);
void zk_delete(struct zk *zk, const char *path, int version, int recursive, zk_void_cb cb,
	       void *arg);
void zk_exists(struct zk *zk, const char *path, zk_watch_cb watch, void *warg, zk_stat_cb cb,
	       void *arg);
void zk_children(struct zk *zk, const char *path, zk_watch_cb watch, void *warg, zk_children_cb cb,
		 void *arg);

/*
 * Atomic multi-operation (ZooKeeper's multi/transaction): every op is
 * applied, or none. Used where one round trip replaces several dependent
 * ones (recycling a static node, fulfilling a request). ops, paths and data
 * are copied. cb gets the overall rc (ZOK, or the error of the first op that
 * failed) and one result per op: its rc (ZRUNTIMEINCONSISTENCY for the ops
 * after a failure, as the server reports) and, for a create, the created
 * path (NULL otherwise). results are valid only during the call. Not
 * retried across a lost connection (a create may or may not have happened):
 * the caller sees ZCONNECTIONLOSS and decides.
 */
enum zk_multi_type { ZK_MULTI_CREATE, ZK_MULTI_DELETE, ZK_MULTI_SET, ZK_MULTI_CHECK };
struct zk_multi_op {
	enum zk_multi_type type;
	const char *path;
	const void *data; /* create, set (NULL with len 0: empty) */
	int len;
	int flags;   /* create: ZOO_EPHEMERAL | ZOO_SEQUENCE */
	int version; /* delete, set (-1 any); check (the version required) */
	/* set: the record data encodes, for a writer whose cache of the path
	 * takes a copy of it instead of decoding data back (the launcher's
	 * lc_multi_under: a struct np_node or np_request, by path); borrowed
	 * for the call, ignored by zk_multi itself. NULL: none. */
	const void *record;
};
struct zk_multi_result {
	int rc;
	const char *path; /* create: the created path */
	/* set that succeeded (and the multi with it): the znode's mzxid and
	 * data version after the write, else 0 */
	int64_t mzxid;
	int32_t version;
	int64_t ctime_ms; /* the same: the znode's creation time (ms since the epoch) */
};
typedef void (*zk_multi_cb)(int rc, int count, const struct zk_multi_result *results, void *arg);
void zk_multi(struct zk *zk, const struct zk_multi_op *ops, int count, zk_multi_cb cb, void *arg);

/*
 * Writes made under locks (a node's record under its node lock, a
 * request's under its request lock: upstream Nodepool writes either only
 * while it holds the lock). As zk_set, zk_delete and zk_multi, and the
 * retry queue (zk_set_retry) knows which locks the write depends on:
 * locks[0..nlocks) must all be held (zk_lock_is_held) in the current
 * session when the write is submitted, else nothing is sent and cb gets
 * ZK_LOCK_LOST (on the loop); a write parked for a lost connection is
 * sent again only in the session its locks were held in: once that
 * session has ended (expiry, or a new session after an authentication
 * failure) it ends with ZK_LOCK_LOST, never sent on the new session,
 * since the locks went with the old one and the write would act for a
 * holder that no longer exists (issue 27: a fulfilment re-sent after an
 * expiry handed over a node its requester could not lock). A lock may be
 * released (or freed) after the write is submitted: the release is
 * ordered after it, as every call of a session. locks are not kept.
 */
void zk_set_under(struct zk *zk, struct zk_lock *const *locks, int nlocks, const char *path,
		  const void *data, int len, int version, zk_stat_cb cb, void *arg);
void zk_delete_under(struct zk *zk, struct zk_lock *const *locks, int nlocks, const char *path,
		     int version, int recursive, zk_void_cb cb, void *arg);
void zk_multi_under(struct zk *zk, struct zk_lock *const *locks, int nlocks,
		    const struct zk_multi_op *ops, int count, zk_multi_cb cb, void *arg);

/*
 * Synchronous forms for command-line tools and tests: they run the loop
 * until the operation completes (or, zk_wait_connected aside, twice the
 * session timeout passes: ZOPERATIONTIMEOUT). Requests fail with
 * ZCONNECTIONLOSS rather than wait while no server answers. Never call them
 * from inside a callback of the loop (libevent does not nest loops).
 * Output buffers are malloc'd and owned by the caller (free / zk_strings_free);
 * they are NULL (count 0) unless the result is ZOK.
 */
int zk_wait_connected(struct zk *zk, double timeout);
int zk_sync_create(struct zk *zk, const char *path, const void *data, int len, int flags,
		   int makepath, char **created_path);
int zk_sync_get(struct zk *zk, const char *path, char **data, int *len, struct zk_stat *st);
int zk_sync_set(struct zk *zk, const char *path, const void *data, int len, int version,
		struct zk_stat *st);
int zk_sync_delete(struct zk *zk, const char *path, int version, int recursive);
int zk_sync_exists(struct zk *zk, const char *path, struct zk_stat *st);
int zk_sync_children(struct zk *zk, const char *path, int *count, char ***names);
void zk_strings_free(int count, char **names);

/* ---- kazoo Lock recipe ----------------------------------------------------
 *
 * Interoperable with kazoo's Lock (and so with Zuul and upstream Nodepool):
 * the lock path is a persistent directory, created on demand and never
 * deleted on release; a contender is an EPHEMERAL|SEQUENCE child named
 * "<32 hex uuid4>__lock__<10 digits>" whose data is the identifier (UTF-8,
 * may be empty); the holder is the contender with the lowest sequence
 * (parsed from the "__lock__" suffix, not the lowest name).
 */
enum {
	ZK_LOCK_BUSY = -1000,	 /* non-blocking acquire: someone else holds it */
	ZK_LOCK_TIMEOUT = -1001, /* blocking acquire: timed out */
	ZK_LOCK_LOST = -1002	 /* a write under a lock (zk_set_under...) whose lock
				    is not held in the current session: not sent */
};
/* ZK_LOCK_NO_RESURRECT: create only the last path component of a missing lock
 * dir; if its parent is gone, acquire fails with ZNONODE. Used for node locks
 * (/nodepool/nodes/<id>/lock) so that locking a deleted node never recreates
 * an empty node znode (upstream's kazoo does, then cleans it up later). */
#define ZK_LOCK_NO_RESURRECT 0x1
/* ZK_LOCK_PERSISTENT: our contender is a persistent sequential znode (kazoo's
 * Lock(..., ephemeral=False)), so the lock outlives our session: upstream's
 * metastatic driver holds its backing nodes so across launcher restarts.
 * Its holder keeps it past zk_lock_free() only after zk_lock_disown(); it is
 * released by deleting the contender (upstream's forceUnlockNode). */
#define ZK_LOCK_PERSISTENT 0x2
/* ZK_LOCK_NEW_DIR: the lock dir is probably missing (the first lock of a
 * request, of a node just made): the first attempt makes the dir and our
 * contender in one multi and holds the lock without listing it (one
 * request instead of five: issue 25). A dir that exists after all costs
 * one request more (the multi fails), then it is contended as usual; so
 * do later attempts of the same lock. The znodes made are kazoo's. */
#define ZK_LOCK_NEW_DIR 0x4

struct zk_lock;
/* rc: ZOK (held), ZK_LOCK_BUSY, ZK_LOCK_TIMEOUT, ZNONODE (see flag), or a ZK error. */
typedef void (*zk_lock_cb)(struct zk_lock *lock, int rc, void *arg);

/* path and identifier (NULL = empty) are copied. */
struct zk_lock *zk_lock_new(struct zk *zk, const char *path, const char *identifier, int flags);
/*
 * timeout: 0 = non-blocking (our contender is removed again if we are not
 * the lowest), < 0 = wait forever, > 0 = wait that many seconds watching the
 * immediate predecessor, then remove our contender and report ZK_LOCK_TIMEOUT.
 * The callback comes after our contender is removed again. A lost
 * connection is waited out (kazoo retries too): up to the timeout, or for a
 * non-blocking acquire up to the session timeout (then ZOPERATIONTIMEOUT);
 * after an expiry the attempt starts over on the new session. Acquiring a
 * lock that is held or being acquired is a caller error: cb gets
 * ZBADARGUMENTS before zk_lock_acquire returns.
 */
void zk_lock_acquire(struct zk_lock *lock, double timeout, zk_lock_cb cb, void *arg);
/*
 * As zk_lock_acquire, and with ZK_LOCK_NEW_DIR (the dir not seen yet)
 * ops[0..count) ride in the multi that makes the dir and our contender
 * (issue 25: a request locked and set `pending`, a node just made locked
 * and set `building`, in one round trip). ops are copied. The transaction
 * is atomic: if any of the ops is refused (a version moved, a znode gone)
 * or the dir exists, nothing of it is made and the lock is acquired as
 * zk_lock_acquire would, without the ops; zk_lock_applied then says 0 and
 * the caller does their work itself. Sent at most once: an answer lost
 * with the connection is resolved by looking for our contender (found: the
 * ops were applied too). After a session expiry mid-acquisition whether
 * they were applied is unknown (reported 0). Without NEW_DIR, or with the
 * dir seen before, the ops are not sent at all. The lock stays
 * kazoo's: the same dir and contender, just more in the transaction.
 */
void zk_lock_acquire_with(struct zk_lock *lock, double timeout, const struct zk_multi_op *ops,
			  int count, zk_lock_cb cb, void *arg);
/*
 * While held after zk_lock_acquire_with: 1 when its ops were applied with
 * our contender, *res (owned by the lock, valid until the next acquire or
 * free) their *n results (rc ZOK; a set's version and mzxid after it, a
 * create's path, or version -1, mzxid 0 and path NULL when the answer was
 * lost and our contender found later); 0 (and *res NULL, *n 0) when they
 * were not, or the lock is not held. res and n may be NULL.
 */
int zk_lock_applied(const struct zk_lock *lock, const struct zk_multi_result **res, int *n);
/*
 * Delete our contender only (the lock dir stays). cb may be NULL; it gets
 * ZOK once the contender is gone (also if the session expired meanwhile).
 * Releasing a lock being acquired cancels the acquisition (its callback is
 * not called). With nothing to delete (not held) cb gets ZOK before
 * zk_lock_release returns.
 */
void zk_lock_release(struct zk_lock *lock, zk_void_cb cb, void *arg);
/* 1 while held (and the session has not expired since). After a lost
 * connection (same session) our contender is looked up again: found
 * deleted (someone removed it meanwhile), the lock is idle. */
int zk_lock_is_held(const struct zk_lock *lock);
const char *zk_lock_path(const struct zk_lock *lock);
/* Our contender's name in the lock dir while held, else NULL. */
const char *zk_lock_contender(const struct zk_lock *lock);
/* The holder deleted our contender itself (e.g. in a zk_multi that removed
 * the locked znode): forget it without deleting; the lock is then idle. */
void zk_lock_disown(struct zk_lock *lock);
/* Releases (fire and forget) if held or pending, then frees; no callback is
 * called. The deletion of our contender is sent again after a lost
 * connection, and a contender whose create had no reply is looked for by
 * its prefix and deleted: nothing stays locked by our live session. Free
 * locks before their zk. NULL is a no-op. */
void zk_lock_free(struct zk_lock *lock);
/* Synchronous acquire/release for tools and tests. */
int zk_lock_sync_acquire(struct zk_lock *lock, double timeout);
int zk_lock_sync_release(struct zk_lock *lock);

/*
 * The contenders of a lock dir, sorted by sequence (holder first): their
 * identifiers (data), as kazoo's Lock.contenders() (which also creates a
 * missing dir; we do not). ZNONODE for a missing lock dir is reported as ZOK
 * with count 0. names is valid only during the call. Not cancellable with
 * zk_cancel().
 */
void zk_lock_contenders(struct zk *zk, const char *path, zk_children_cb cb, void *arg);
int zk_lock_sync_contenders(struct zk *zk, const char *path, int *count, char ***idents);

/* ---- watch-driven caches --------------------------------------------------
 *
 * A cache of the children of one path (depth 1) and, optionally, their data
 * and their lock contenders. Kept current by one persistent recursive watch
 * on the path (zk_watch_tree; ZooKeeper 3.6 or later), not a watch per
 * child; no polling. After a lost connection or a session expiry it
 * re-reads everything and reports the differences. Events are delivered on
 * the loop.
 *
 * Used for /nodepool/nodes, /nodepool/requests, /nodepool/components/<kind>.
 */
enum zk_cache_event {
	ZK_CACHE_ADDED,	  /* child appeared (with data if ZK_CACHE_DATA) */
	ZK_CACHE_UPDATED, /* data changed, or lock contenders appeared/vanished */
	ZK_CACHE_REMOVED, /* child deleted; entry is still valid during the call */
	ZK_CACHE_SYNCED,  /* the initial listing, or a re-listing after a lost
			     connection or an expiry, is complete (with every
			     read it needed); name is NULL, entry is NULL */
};
#define ZK_CACHE_DATA  0x1 /* fetch and watch each child's data */
#define ZK_CACHE_LOCKS 0x2 /* watch each child's "lock" subdir: entry->locked */
/* Read on demand (issue 25; nodepool-web): once synced, what an event asks
 * to read (a new child, changed data, lock contenders) waits until
 * zk_cache_refresh(); meanwhile the entry keeps what was read before (a new
 * child is not listed yet). A reader that is seldom asked then does work
 * in proportion to what it is asked, not to the churn: a child changed ten
 * times between two refreshes is read once. Load phases (the first
 * listing, the re-sync after a lost connection or an expiry) read
 * everything at once as without the flag. */
#define ZK_CACHE_LAZY 0x4

/* The parts of a child's stat a cache keeps (readers: the version for
 * conditional writes; the mzxid tells a re-read that changed nothing). The
 * owner of an ephemeral child: zk_cache_ephemeral_owner(). */
struct zk_cache_stat {
	int64_t mzxid;
	int32_t version; /* data version */
};

/*
 * A cached child. 40 bytes and the name: a node's entry ("0000000042") is
 * a 64-byte malloc chunk, and a worker holds one per node of the fleet
 * (issue 13), so nothing is here that most children do not need.
 */
struct zk_cache_entry {
	/* NUL-terminated, NULL until read or if empty; with a codec, kept only
	 * while obj is NULL (undecodable): a decoded body is not held twice */
	const char *data;
	void *obj;		   /* decoded object (zk_cache_set_codec), NULL if undecodable */
	struct zk_cache_stat stat; /* ZK_CACHE_DATA: as of the data read */
	int len;
	short locked; /* ZK_CACHE_LOCKS: contenders under <child>/lock (at most SHRT_MAX) */
	unsigned short cache_bits; /* the cache's own bookkeeping: not for users */
	char name[];		   /* the child's name, e.g. "0000000042" */
};

struct zk_cache;
typedef void (*zk_cache_cb)(struct zk_cache *cache, enum zk_cache_event ev,
			    const struct zk_cache_entry *entry, void *arg);
/* decode returns a new object or NULL (malformed: logged by the cache, entry
 * kept with obj NULL); free_obj frees one. */
typedef void *(*zk_cache_decode_fn)(const char *name, const char *data, int len);
typedef void (*zk_cache_free_fn)(void *obj);

/*
 * The path is created (persistent, makepath) if missing, and again if it is
 * deleted later. cb may be NULL. NULL for a path that is not absolute.
 * One recursive watch on the path tells of children created, deleted and
 * changed (ZK_CACHE_DATA: the data is read again) and of contenders in
 * their "lock" dirs (ZK_CACHE_LOCKS: listed again). ZK_CACHE_UPDATED for a
 * lock comes when the number of contenders changes. After a lost
 * connection (same session) or an expiry, whose events are lost, the path
 * is listed again and every entry re-read; what changed (its mzxid, its
 * contender count) is reported once its reads are back, then
 * ZK_CACHE_SYNCED.
 */
struct zk_cache *zk_cache_new(struct zk *zk, const char *path, unsigned flags, zk_cache_cb cb,
			      void *arg);
/* Set before the first event: objects are decoded once per data change. */
void zk_cache_set_codec(struct zk_cache *cache, zk_cache_decode_fn decode,
			zk_cache_free_fn free_obj);
/*
 * ZK_CACHE_LOCKS for some entries only: want(entry, arg) says whether the
 * lock contenders of this entry are followed (1) or not (0). It is asked
 * once the entry's data is read (entry->obj decoded, with a codec) and
 * again on each later read: an entry it declines costs no read of its
 * lock, its lock events are ignored, and it reads locked 0. Without it
 * every entry's lock is followed. Set
 * before the first event. A worker watches the locks of its own provider's
 * nodes only: the other providers' are never read (issue 13).
 */
typedef int (*zk_cache_want_locks_fn)(const struct zk_cache_entry *entry, void *arg);
void zk_cache_set_lock_filter(struct zk_cache *cache, zk_cache_want_locks_fn want, void *arg);
/* No callback after this; may be called from the cache's own callback.
 * Free before the zk. NULL is a no-op. */
void zk_cache_free(struct zk_cache *cache);
/* 1 once the initial listing (and data, with ZK_CACHE_DATA) is complete;
 * 0 again from a lost connection (or expiry) until the cache is re-synced
 * (ZK_CACHE_SYNCED): what changed meanwhile is not known before. */
int zk_cache_synced(const struct zk_cache *cache);
const struct zk_cache_entry *zk_cache_get(const struct zk_cache *cache, const char *name);

/*
 * The session that owns entry e of cache (its ephemeralOwner) as of its
 * data read: 0 for a persistent child or one not read yet. Ephemeral
 * children (components' registrations) are few; their owners are kept
 * beside the entries, not in each.
 */
int64_t zk_cache_ephemeral_owner(const struct zk_cache *cache, const struct zk_cache_entry *e);
/* Entries in child-name order; the array is owned by the cache and valid until
 * the loop runs again. */
int zk_cache_entries(const struct zk_cache *cache, const struct zk_cache_entry *const **out);
int zk_cache_count(const struct zk_cache *cache);
/* Children ZooKeeper told of whose first read has not completed (they are
 * not in zk_cache_entries yet): 0 once the view holds every child created
 * before the last event heard. For a reader that must count every child
 * (worker/quota.c). */
size_t zk_cache_unloaded(const struct zk_cache *cache);
/*
 * ZK_CACHE_LAZY: start the reads the events since the last refresh asked
 * for. 1 when there is none to make (the view is as current as the events
 * heard); 0 when they were started: done(cache, arg) follows once, when
 * every one is back (replacing the done of a refresh still under way, which
 * then gets none). While disconnected the reads wait for the re-sync, so
 * done may come late: a caller that answers people should not wait for it
 * unbounded. Without ZK_CACHE_LAZY: 1.
 */
typedef void (*zk_cache_refreshed_fn)(struct zk_cache *cache, void *arg);
int zk_cache_refresh(struct zk_cache *cache, zk_cache_refreshed_fn done, void *arg);
/* ZK_CACHE_LAZY: entries with reads waiting for zk_cache_refresh (tests). */
size_t zk_cache_held(const struct zk_cache *cache);

/* For tests and benchmarks: the reads (get, exists, lock listings) the
 * cache has submitted since it was made; its listings of the path and
 * catch-up requests are not counted. */
size_t zk_cache_reads(const struct zk_cache *cache);
/* Reads of entries (created or changed) heard of and not completed yet,
 * sent or queued: 0 once the view holds every change heard before the last
 * event. For a reader that must see every record's latest data
 * (worker/quota.c, tenant limits). */
size_t zk_cache_reads_pending(const struct zk_cache *cache);

/*
 * Our own writes of a child's data (issue 25: the launcher read back every
 * record it had just written, as the watch told of the change). A writer
 * calls zk_cache_write_begin(cache, name) right before it sends a set (or
 * a multi with a set) of <path>/<name>, and zk_cache_write_end once the
 * reply is back, always, once per begin: ok when the set succeeded, with
 * the data written (len bytes, need not be NUL-ended) and the stat's mzxid
 * and version the reply gave. Meanwhile a change event for that child
 * waits for the reply instead of being read; on success the entry takes
 * the written data (decoded, UPDATED) unless it holds newer already, and
 * no read is made, since the events of changes up to the write's zxid all
 * come before its reply (the comment at zk_cache_write_end); on failure
 * the change is read as any. Without ZK_CACHE_DATA, a no-op.
 */
void zk_cache_write_begin(struct zk_cache *cache, const char *name);
/*
 * obj (may be NULL): the object the cache's codec (zk_cache_set_codec)
 * would decode from the data written, made by the writer from the record
 * it encoded (issue 25: decoding our own bytes back was about a fifth of
 * the launcher's loop). Handed over: the cache keeps it as the entry's
 * object, without decoding data, or frees it with its free function,
 * whatever the outcome (a NULL cache takes nothing). With obj and a codec,
 * data may be NULL (only len is kept: a decoded body is not held as text
 * as well); otherwise data is NULL only with len 0.
 */
void zk_cache_write_end(struct zk_cache *cache, const char *name, int ok, const void *data, int len,
			void *obj, int64_t mzxid, int32_t version);
/*
 * Our own creates of children with a sequence number (issue 25: the
 * launcher read back every node it had just made, as the watch told of
 * it). The name is known only from the reply, and the creation's event
 * comes first: while any create begun is in flight, a child the watch says
 * was created waits, unannounced, instead of being read; the create's
 * reply (zk_cache_create_end with the created child's name, the data it
 * was made with and the reply's stat, zk_create2) announces it from
 * those, without a read; once none is in flight, the others that waited
 * are read as usual (a round trip late: another writer's child). A writer
 * calls zk_cache_create_begin right before it sends the create and
 * zk_cache_create_end once the reply is back, always, once per begin
 * (name NULL when the create failed). Without ZK_CACHE_DATA, a no-op.
 */
void zk_cache_create_begin(struct zk_cache *cache);
/* data, len and obj as zk_cache_write_end's (obj handed over likewise). */
void zk_cache_create_end(struct zk_cache *cache, const char *name, const void *data, int len,
			 void *obj, const struct zk_stat *st);
/* For tests: own writes (and creates) applied without a read since the
 * cache was made. */
size_t zk_cache_own_applied(const struct zk_cache *cache);

/* For tests: 1 when the C client's own I/O thread holds a live connection
 * now (zoo_state), whether or not the loop has heard of it yet; safe from
 * a thread whose loop is not running. */
int zk_client_connected(const struct zk *zk);

#endif
