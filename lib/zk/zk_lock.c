/*
 * kazoo's Lock recipe on the asynchronous client (zk.h), so that our locks
 * and those of Zuul and upstream Nodepool (kazoo.recipe.lock.Lock) exclude
 * each other.
 *
 * As kazoo: the lock path is a persistent directory, created on demand and
 * left in place; a contender is an EPHEMERAL|SEQUENCE child
 * "<uuid4 hex>__lock__<seq>" carrying the identifier; the holder is the
 * contender whose sequence text sorts lowest; a waiter watches only its
 * immediate predecessor and lists the directory again when that goes. A
 * create that may have happened without us hearing the name (a lost
 * connection) is found again by its uuid prefix, as kazoo does.
 *
 * An acquisition is a chain of callbacks on the loop:
 *   create contender -> list -> (lowest: held)
 *                             -> (not lowest, blocking: get+watch predecessor
 *                                 -> its watch fires -> list ...)
 *                             -> (not lowest, non-blocking: delete ours, BUSY)
 * A lost connection parks the chain until the session is back; an expiry
 * restarts it from the create (our contender went with the session).
 * A missing dir (the create fails with ZNONODE, or ZK_LOCK_NEW_DIR says so
 * first) is made with our contender in one multi: held, with no listing.
 */
#include "lib/zk/zk_private.h"
#include "lib/core/log.h"
#include "lib/core/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <openssl/rand.h>

#define LOCK_RETRY_DELAY 0.2 /* seconds between retries while connected */

enum lock_state {
	L_IDLE,
	L_ACQUIRING,
	L_HELD,
	L_DROPPING, /* deleting our contender, then reporting to the caller */
};

/* The create of our contender. It may complete after the lock gave up on it
 * (or was freed): then lock is NULL and the contender is deleted at once. */
struct lock_create {
	struct zk *zk;
	struct zk_lock *lock;
	char *path;   /* the lock dir */
	char *prefix; /* our contenders' name prefix */
};

struct zk_lock {
	struct zk *zk;
	char *path; /* the lock directory */
	char *ident;
	int identlen;
	int flags;
	char prefix[41];   /* "<32 hex>__lock__", fixed for the lock's life */
	char *create_path; /* path + "/" + prefix */
	char *node;	   /* our contender's name in the directory, or NULL */
	enum lock_state state;
	int create_tried; /* a create was sent: look for it before creating again */
	int dir_known;	  /* ZK_LOCK_NEW_DIR: the dir was seen to exist (or made) */
	int piped;	  /* listings sent right behind our create, not yet back */
	int piped_used;	  /* the one for the current contender was consumed */
	int blocking;
	struct event *deadline;
	struct event *retry;
	void (*resume)(struct zk_lock *); /* what to do once connected again */
	int waiting_conn;
	struct lock_create *creating;
	zk_lock_cb cb;
	void *cbarg;
	zk_void_cb rcb; /* DROPPING for a release */
	void *rarg;
	int drop_rc;	  /* DROPPING for a failed acquisition: what to report */
	int drop_release; /* DROPPING for a release (else for an acquisition) */
	unsigned gen;	  /* L_HELD: the session generation it was acquired in */
	/* zk_lock_acquire_with: the caller's ops (deep copies) until the
	 * first new-dir multi carries them; then how it went */
	struct zk_multi_op *xops;
	int nx;
	int x_sent;		      /* sent in a multi whose answer was lost: found = applied */
	int x_applied;		      /* the last acquisition applied them */
	struct zk_multi_result *xres; /* nx results (version -1: unknown) */
	char watch_owner;	      /* its address tags the predecessor watch */
	struct zk_listener listener;
};

const char *
zk_lock_seq(const char *name)
{
	size_t n = strlen(name), i;
	const char *d;

	if (n < 18)
		return NULL;
	d = name + n - 10;
	for (i = 0; i < 10; i++) {
		if (d[i] < '0' || d[i] > '9')
			return NULL;
	}
	if (d > name + 8 && d[-1] == '-' && n >= 19 && strncmp(d - 9, "__lock__", 8) == 0)
		return d - 1;
	if (strncmp(d - 8, "__lock__", 8) == 0)
		return d;
	return NULL;
}

static void step_create(struct zk_lock *lock);
static void step_create_dir(struct zk_lock *lock);
static void step_list(struct zk_lock *lock);
static void step_drop(struct zk_lock *lock);

static int
transient(int rc)
{
	return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZSESSIONEXPIRED ||
	       rc == ZINVALIDSTATE || rc == ZSESSIONMOVED || rc == ZSSLCONNECTIONERROR;
}

/* ---- contenders whose create we never heard back from ---------------------
 *
 * A create that failed for a lost connection may have happened: once the
 * connection is back, list the lock dir and delete whatever carries our
 * prefix (kazoo finds it the same way). Both requests are sent again
 * across lost connections; an expiry removed the contender anyway. */
struct sweep {
	struct zk *zk;
	char *path;
	char *prefix;
};

/* Our contender is the last component of `path` (the create's answer):
 * lock->node takes a copy. */
static void
set_contender(struct zk_lock *lock, const char *path)
{
	const char *slash = strrchr(path, '/');

	lock->node = xstrdup(slash != NULL ? slash + 1 : path);
}

/* The caller's extra ops (zk_lock_acquire_with), once sent or dropped. */
static void
xops_free(struct zk_lock *lock)
{
	int i;

	for (i = 0; lock->xops != NULL && i < lock->nx; i++) {
		free((void *)lock->xops[i].path);
		free((void *)lock->xops[i].data);
	}
	free(lock->xops);
	lock->xops = NULL;
}

/* The extra ops were applied with our contender: res (NULL: the answer
 * was lost, and the contender found later) gives their versions. */
static void
x_applied(struct zk_lock *lock, const struct zk_multi_result *res)
{
	int i;

	lock->x_sent = 0;
	lock->x_applied = 1;
	for (i = 0; i < lock->nx; i++) {
		lock->xres[i].rc = ZOK;
		/* a create's path (owned here: x_reset frees it) */
		free((void *)lock->xres[i].path);
		lock->xres[i].path =
		    res != NULL && res[i].path != NULL ? xstrdup(res[i].path) : NULL;
		lock->xres[i].mzxid = res != NULL ? res[i].mzxid : 0;
		lock->xres[i].version = res != NULL ? res[i].version : -1;
		lock->xres[i].ctime_ms = res != NULL ? res[i].ctime_ms : 0;
	}
}

static void
sweep_deleted(const struct zk_result *r, void *arg)
{
	if (r->rc != ZOK && r->rc != ZNONODE && r->rc != ZSESSIONEXPIRED && r->rc != ZCLOSING)
		log_warn("zk lock: cannot delete stray contender %s: %s", r->path,
			 zk_strerror(r->rc));
}

static void
sweep_listed(const struct zk_result *r, void *arg)
{
	struct sweep *sw = arg;
	size_t n = strlen(sw->prefix);
	char *p;
	int i;

	for (i = 0; r->rc == ZOK && !zk_closing(sw->zk) && i < r->count; i++) {
		if (strncmp(r->names[i], sw->prefix, n) != 0)
			continue;
		p = malloc(strlen(sw->path) + strlen(r->names[i]) + 2);
		if (p == NULL)
			abort();
		sprintf(p, "%s/%s", sw->path, r->names[i]);
		log_info("zk lock %s: removing contender %s created before the connection was lost",
			 sw->path, r->names[i]);
		{
			struct zk_req req = {.kind = ZK_OP_DELETE,
					     .path = p,
					     .version = -1,
					     .cb = sweep_deleted,
					     .retry = 1};
			zk_submit(sw->zk, &req);
		}
		free(p);
	}
	free(sw->path);
	free(sw->prefix);
	free(sw);
}

static void
sweep_orphan(struct zk *zk, const char *path, const char *prefix)
{
	struct sweep *sw = calloc(1, sizeof(*sw));
	struct zk_req req = {.kind = ZK_OP_CHILDREN, .cb = sweep_listed, .always = 1, .retry = 1};

	if (sw == NULL || (sw->path = strdup(path)) == NULL ||
	    (sw->prefix = strdup(prefix)) == NULL)
		abort();
	sw->zk = zk;
	req.path = sw->path;
	req.arg = sw;
	zk_submit(zk, &req);
}

static void
retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct zk_lock *lock = arg;
	void (*resume)(struct zk_lock *) = lock->resume;

	if (!lock->waiting_conn || resume == NULL)
		return;
	lock->waiting_conn = 0;
	lock->resume = NULL;
	resume(lock);
}

/* Continue with resume once the session is usable again. */
static void
wait_conn(struct zk_lock *lock, void (*resume)(struct zk_lock *))
{
	struct timeval tv = {0, (suseconds_t)(LOCK_RETRY_DELAY * 1e6)};

	lock->resume = resume;
	lock->waiting_conn = 1;
	if (zk_is_connected(lock->zk))
		evtimer_add(lock->retry, &tv); /* the failure came before the news */
}

/* Forget every request, watch and wait of the current attempt. */
static void
stop_attempt(struct zk_lock *lock)
{
	zk_cancel(lock->zk, lock);
	zk_cancel(lock->zk, &lock->watch_owner);
	evtimer_del(lock->retry);
	lock->waiting_conn = 0;
	lock->resume = NULL;
	if (lock->creating != NULL) {
		lock->creating->lock = NULL;
		lock->creating = NULL;
	} else if (lock->create_tried && lock->node == NULL && lock->state == L_ACQUIRING &&
		   !zk_closing(lock->zk)) {
		/* the last create failed for a lost connection: it may be there */
		sweep_orphan(lock->zk, lock->path, lock->prefix);
	}
	lock->create_tried = 0;
}

/* The acquisition ends with rc (ZOK: held). */
static void
finish(struct zk_lock *lock, int rc)
{
	zk_lock_cb cb = lock->cb;

	evtimer_del(lock->deadline);
	lock->state = rc == ZOK ? L_HELD : L_IDLE;
	lock->gen = zk_session_gen(lock->zk);
	lock->cb = NULL;
	if (rc != ZOK)
		log_debug("zk lock %s: not acquired: %s", lock->path, zk_strerror(rc));
	if (cb != NULL)
		cb(lock, rc, lock->cbarg);
}

/* Give up the attempt: delete our contender (if any), then report rc. */
static void
give_up(struct zk_lock *lock, int rc)
{
	stop_attempt(lock);
	evtimer_del(lock->deadline);
	if (lock->node == NULL) {
		finish(lock, rc);
		return;
	}
	lock->state = L_DROPPING;
	lock->drop_release = 0;
	lock->drop_rc = rc;
	step_drop(lock);
}

static void
drop_done(const struct zk_result *r, void *arg)
{
	struct zk_lock *lock = arg;
	zk_void_cb rcb;

	if (transient(r->rc) && r->rc != ZSESSIONEXPIRED) {
		wait_conn(lock, step_drop);
		return;
	}
	if (r->rc != ZOK && r->rc != ZNONODE && r->rc != ZSESSIONEXPIRED)
		log_warn("zk lock %s: cannot delete contender %s: %s", lock->path, lock->node,
			 zk_strerror(r->rc));
	free(lock->node);
	lock->node = NULL;
	if (!lock->drop_release) {
		finish(lock, lock->drop_rc);
		return;
	}
	lock->state = L_IDLE;
	rcb = lock->rcb;
	lock->rcb = NULL;
	if (rcb != NULL)
		rcb(r->rc == ZNONODE || r->rc == ZSESSIONEXPIRED ? ZOK : r->rc, lock->rarg);
}

static void
step_drop(struct zk_lock *lock)
{
	char *p = malloc(strlen(lock->path) + strlen(lock->node) + 2);
	struct zk_req req = {
	    .kind = ZK_OP_DELETE, .version = -1, .cb = drop_done, .arg = lock, .owner = lock};

	if (p == NULL)
		abort();
	sprintf(p, "%s/%s", lock->path, lock->node);
	req.path = p;
	zk_submit(lock->zk, &req);
	free(p);
}

static void
deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct zk_lock *lock = arg;

	if (lock->state == L_ACQUIRING)
		give_up(lock, lock->blocking ? ZK_LOCK_TIMEOUT : ZOPERATIONTIMEOUT);
}

/* ---- the acquisition chain ---------------------------------------------- */

static void
pred_watch(int type, const char *path, void *arg)
{
	struct zk_lock *lock = arg;

	if (lock->state == L_ACQUIRING)
		step_list(lock);
}

static void
pred_done(const struct zk_result *r, void *arg)
{
	struct zk_lock *lock = arg;

	if (r->rc == ZOK)
		return; /* watching it: pred_watch continues */
	if (r->rc == ZNONODE)
		step_list(lock); /* already gone */
	else if (transient(r->rc))
		wait_conn(lock, step_list);
	else
		give_up(lock, r->rc);
}

static void
list_done(const struct zk_result *r, void *arg)
{
	struct zk_lock *lock = arg;
	const char *mine, *seq, *pred = NULL, *pred_seq = NULL;
	int i, found = 0;
	char *p;

	if (r->rc == ZNONODE) { /* the directory went away under us */
		free(lock->node);
		lock->node = NULL;
		lock->create_tried = 0;
		step_create(lock);
		return;
	}
	if (r->rc != ZOK) {
		if (transient(r->rc))
			wait_conn(lock, step_list);
		else
			give_up(lock, r->rc);
		return;
	}
	mine = zk_lock_seq(lock->node);
	for (i = 0; i < r->count; i++) {
		if ((seq = zk_lock_seq(r->names[i])) == NULL)
			continue;
		if (strcmp(r->names[i], lock->node) == 0) {
			found = 1;
			continue;
		}
		/* kazoo sorts by the sequence text; ours is never equal to another's */
		if (strcmp(seq, mine) < 0 && (pred_seq == NULL || strcmp(seq, pred_seq) > 0)) {
			pred = r->names[i];
			pred_seq = seq;
		}
	}
	if (!found) {
		/* our contender is gone (deleted by someone else): start over,
		 * as kazoo does */
		log_debug("zk lock %s: contender %s vanished", lock->path, lock->node);
		free(lock->node);
		lock->node = NULL;
		lock->create_tried = 0;
		step_create(lock);
		return;
	}
	if (pred == NULL) {
		log_debug("zk lock %s: acquired (%s)", lock->path, lock->node);
		finish(lock, ZOK);
		return;
	}
	if (!lock->blocking) {
		give_up(lock, ZK_LOCK_BUSY);
		return;
	}
	p = malloc(strlen(lock->path) + strlen(pred) + 2);
	if (p == NULL)
		abort();
	sprintf(p, "%s/%s", lock->path, pred);
	{
		struct zk_req req = {.kind = ZK_OP_GET,
				     .path = p,
				     .watch = pred_watch,
				     .warg = lock,
				     .wowner = &lock->watch_owner,
				     .cb = pred_done,
				     .arg = lock,
				     .owner = lock};

		zk_submit(lock->zk, &req);
	}
	free(p);
}

static void
step_list(struct zk_lock *lock)
{
	struct zk_req req = {.kind = ZK_OP_CHILDREN,
			     .path = lock->path,
			     .cb = list_done,
			     .arg = lock,
			     .owner = lock};

	zk_submit(lock->zk, &req);
}

static void
dir_done(const struct zk_result *r, void *arg)
{
	struct zk_lock *lock = arg;

	if (r->rc == ZOK || r->rc == ZNODEEXISTS) {
		lock->dir_known = 1;
		step_create(lock);
	} else if (r->rc == ZNONODE)
		give_up(lock, ZNONODE); /* NO_RESURRECT: the parent is gone */
	else if (transient(r->rc))
		wait_conn(lock, step_create);
	else
		give_up(lock, r->rc);
}

/* Make the lock dir (makepath unless NO_RESURRECT), then create again. */
static void
step_make_dir(struct zk_lock *lock)
{
	struct zk_req req = {.kind = ZK_OP_CREATE,
			     .path = lock->path,
			     .makepath = !(lock->flags & ZK_LOCK_NO_RESURRECT),
			     .cb = dir_done,
			     .arg = lock,
			     .owner = lock};

	zk_submit(lock->zk, &req);
}

static void
parent_done(const struct zk_result *r, void *arg)
{
	struct zk_lock *lock = arg;

	if (r->rc == ZOK || r->rc == ZNODEEXISTS)
		step_create_dir(lock); /* the caller's ops still with it */
	else if (transient(r->rc))
		wait_conn(lock, step_create);
	else
		give_up(lock, r->rc);
}

/* zk_lock_acquire_with on a fresh tree: make the lock dir's parent
 * (makepath), so that the dir, our contender and the caller's ops can
 * still go in one multi. */
static void
step_make_parent(struct zk_lock *lock)
{
	const char *slash = strrchr(lock->path, '/');
	char *parent;

	if (slash == NULL || slash == lock->path) {
		xops_free(lock);
		step_make_dir(lock);
		return;
	}
	parent = xstrdup(lock->path);
	parent[slash - lock->path] = '\0';
	{
		struct zk_req req = {.kind = ZK_OP_CREATE,
				     .path = parent,
				     .makepath = 1,
				     .cb = parent_done,
				     .arg = lock,
				     .owner = lock};

		zk_submit(lock->zk, &req);
	}
	free(parent);
}

static void
dir_and_contender_done(const struct zk_result *r, void *arg)
{
	struct lock_create *lc = arg;
	struct zk_lock *lock = lc->lock;
	const char *created = r->rc == ZOK && r->mcount >= 2 ? r->mres[1].path : NULL;
	int i;

	if (lock == NULL) { /* given up meanwhile: do not leave it behind */
		if (created != NULL && !zk_closing(lc->zk)) {
			struct zk_req req = {
			    .kind = ZK_OP_DELETE, .path = created, .version = -1, .retry = 1};
			zk_submit(lc->zk, &req);
		} else if (transient(r->rc) && r->rc != ZSESSIONEXPIRED && !zk_closing(lc->zk)) {
			sweep_orphan(lc->zk, lc->path, lc->prefix);
		}
		free(lc->path);
		free(lc->prefix);
		free(lc);
		return;
	}
	lock->creating = NULL;
	free(lc->path);
	free(lc->prefix);
	free(lc);
	if (zk_closing(lock->zk)) {
		lock->state = L_IDLE;
		return;
	}
	if (lock->x_sent && transient(r->rc)) {
		/* applied or not: our contender, if found, tells (find_done);
		 * never sent again */
		xops_free(lock);
	} else if (lock->x_sent) {
		lock->x_sent = 0;
		if (created != NULL) {
			x_applied(lock, r->mres + 2);
		} else {
			for (i = 0; r->mres != NULL && i < r->mcount && r->mres[i].rc == ZOK; i++)
				;
			if (i == 0 && r->rc == ZNONODE && lock->xops != NULL &&
			    !(lock->flags & ZK_LOCK_NO_RESURRECT)) {
				/* the dir's parent is missing (a fresh tree):
				 * made, then the same multi again */
				lock->create_tried = 0;
				step_make_parent(lock);
				return;
			}
			xops_free(lock); /* refused: as usual from here */
			if (i >= 2 && i < r->mcount) {
				/* one of the caller's ops was refused (the dir and
				 * our contender were fine): without them */
				log_debug("zk lock %s: the ops sent with it were refused (%s)",
					  lock->path, zk_strerror(r->mres[i].rc));
				lock->create_tried = 0;
				step_create_dir(lock);
				return;
			}
		}
	}
	if (created != NULL || r->rc == ZNODEEXISTS)
		lock->dir_known = 1;
	if (created != NULL) {
		/* the dir is ours, made in the same transaction as our
		 * contender: no one else's contender can be in it with a lower
		 * sequence, so it is held without a listing */
		set_contender(lock, created);
		log_debug("zk lock %s: acquired (%s, with its dir)", lock->path, lock->node);
		finish(lock, ZOK);
	} else if (r->rc == ZNODEEXISTS) {
		/* someone made the dir meanwhile: contend in it */
		lock->create_tried = 0;
		step_create(lock);
	} else if (r->rc == ZNONODE) {
		/* the dir's parent is missing: made (makepath) unless
		 * NO_RESURRECT, as before */
		lock->create_tried = 0;
		if (lock->flags & ZK_LOCK_NO_RESURRECT)
			give_up(lock, ZNONODE);
		else
			step_make_dir(lock);
	} else if (transient(r->rc)) {
		wait_conn(lock, step_create); /* create_tried: look before creating */
	} else {
		give_up(lock, r->rc);
	}
}

/*
 * The lock dir is missing (our create found no parent): the dir and our
 * contender in one multi (issue 25: a create of the dir, a create of the
 * contender and a listing before, for every first lock of a request or a
 * node). kazoo makes the same two znodes (ensure_path, then the create);
 * a dir made by someone else meanwhile fails the multi and we contend as
 * usual.
 */
static void
step_create_dir(struct zk_lock *lock)
{
	struct lock_create *lc = calloc(1, sizeof(*lc));
	struct zk_multi_op *ops;
	int i, n = 2 + (lock->xops != NULL ? lock->nx : 0);

	if (lc == NULL || (ops = calloc((size_t)n, sizeof(*ops))) == NULL)
		abort();
	lc->zk = lock->zk;
	lc->lock = lock;
	if ((lc->path = strdup(lock->path)) == NULL || (lc->prefix = strdup(lock->prefix)) == NULL)
		abort();
	ops[0].type = ZK_MULTI_CREATE;
	ops[0].path = lock->path;
	ops[1].type = ZK_MULTI_CREATE;
	ops[1].path = lock->create_path;
	ops[1].data = lock->ident;
	ops[1].len = lock->identlen;
	ops[1].flags =
	    (lock->flags & ZK_LOCK_PERSISTENT) ? ZOO_SEQUENCE : ZOO_EPHEMERAL | ZOO_SEQUENCE;
	for (i = 2; i < n; i++)
		ops[i] = lock->xops[i - 2];
	lock->creating = lc;
	lock->create_tried = 1;
	{
		struct zk_req req = {.kind = ZK_OP_MULTI,
				     .path = "/",
				     .mops = ops,
				     .mcount = n,
				     .cb = dir_and_contender_done,
				     .arg = lc,
				     .always = 1};

		zk_submit(lock->zk, &req);
	}
	free(ops);
	if (lock->xops != NULL)
		lock->x_sent = 1; /* kept until the answer says they were refused */
}

static void
create_done(const struct zk_result *r, void *arg)
{
	struct lock_create *lc = arg;
	struct zk_lock *lock = lc->lock;

	if (lock == NULL) { /* given up meanwhile: do not leave it behind */
		if (r->rc == ZOK && r->value != NULL && !zk_closing(lc->zk)) {
			struct zk_req req = {
			    .kind = ZK_OP_DELETE, .path = r->value, .version = -1, .retry = 1};
			zk_submit(lc->zk, &req);
		} else if (transient(r->rc) && r->rc != ZSESSIONEXPIRED && !zk_closing(lc->zk)) {
			sweep_orphan(lc->zk, lc->path, lc->prefix);
		}
		free(lc->path);
		free(lc->prefix);
		free(lc);
		return;
	}
	lock->creating = NULL;
	free(lc->path);
	free(lc->prefix);
	free(lc);
	if (zk_closing(lock->zk)) { /* zk_free(): nobody to tell */
		lock->state = L_IDLE;
		return;
	}
	if (r->rc == ZOK) {
		lock->dir_known = 1;
		set_contender(lock, r->value);
		/* the piped listing (already sent) decides; without one, list */
		lock->piped_used = 0;
		if (lock->piped == 0)
			step_list(lock);
	} else if (r->rc == ZNONODE) {
		lock->create_tried = 0; /* certainly not created */
		step_create_dir(lock);
	} else if (transient(r->rc)) {
		wait_conn(lock, step_create); /* create_tried: look before creating */
	} else {
		give_up(lock, r->rc);
	}
}

static void
find_done(const struct zk_result *r, void *arg)
{
	struct zk_lock *lock = arg;
	size_t n = strlen(lock->prefix);
	int i;

	if (r->rc == ZOK) {
		for (i = 0; i < r->count; i++) {
			if (strncmp(r->names[i], lock->prefix, n) == 0) {
				lock->node = strdup(r->names[i]);
				if (lock->node == NULL)
					abort();
				if (lock->x_sent) /* the multi that made it did them */
					x_applied(lock, NULL);
				step_list(lock);
				return;
			}
		}
	} else if (transient(r->rc)) {
		wait_conn(lock, step_create);
		return;
	} else if (r->rc != ZNONODE) {
		give_up(lock, r->rc);
		return;
	}
	lock->x_sent = 0; /* not made: neither were the caller's ops */
	lock->create_tried = 0;
	step_create(lock);
}

/* The listing sent with a create: used if the create succeeded (its
 * completion comes first and names our contender), ignored otherwise. */
static void
piped_list_done(const struct zk_result *r, void *arg)
{
	struct zk_lock *lock = arg;

	lock->piped--;
	if (lock->state != L_ACQUIRING || lock->node == NULL || lock->creating != NULL ||
	    lock->piped_used)
		return;
	lock->piped_used = 1;
	list_done(r, lock);
}

static void
step_create(struct zk_lock *lock)
{
	struct lock_create *lc;

	if (lock->create_tried) {
		/* the last create may have been made without our hearing of it */
		struct zk_req req = {.kind = ZK_OP_CHILDREN,
				     .path = lock->path,
				     .cb = find_done,
				     .arg = lock,
				     .owner = lock};

		zk_submit(lock->zk, &req);
		return;
	}
	if ((lock->flags & ZK_LOCK_NEW_DIR) && !lock->dir_known) {
		step_create_dir(lock);
		return;
	}
	lc = calloc(1, sizeof(*lc));
	if (lc == NULL)
		abort();
	lc->zk = lock->zk;
	lc->lock = lock;
	if ((lc->path = strdup(lock->path)) == NULL || (lc->prefix = strdup(lock->prefix)) == NULL)
		abort();
	lock->creating = lc;
	lock->create_tried = 1;
	{
		struct zk_req req = {.kind = ZK_OP_CREATE,
				     .path = lock->create_path,
				     .data = lock->ident,
				     .len = lock->identlen,
				     .flags = (lock->flags & ZK_LOCK_PERSISTENT)
						  ? ZOO_SEQUENCE
						  : ZOO_EPHEMERAL | ZOO_SEQUENCE,
				     .cb = create_done,
				     .arg = lc,
				     .always = 1};
		/* The listing goes out right behind the create: one session's
		 * requests are served in order, so it includes our contender and
		 * the acquisition takes one round trip instead of two. */
		struct zk_req list = {.kind = ZK_OP_CHILDREN,
				      .path = lock->path,
				      .cb = piped_list_done,
				      .arg = lock,
				      .owner = lock};

		zk_submit(lock->zk, &req);
		lock->piped++;
		zk_submit(lock->zk, &list);
	}
}

/* ---- session events ---------------------------------------------------- */

static void
recheck_done(const struct zk_result *r, void *arg)
{
	struct zk_lock *lock = arg;
	const char *slash = strrchr(r->path, '/');

	if (r->rc != ZNONODE || lock->state != L_HELD || lock->node == NULL || slash == NULL ||
	    strcmp(slash + 1, lock->node) != 0)
		return;
	log_warn("zk lock %s: lost (our contender %s was deleted while we were away)", lock->path,
		 lock->node);
	free(lock->node);
	lock->node = NULL;
	lock->state = L_IDLE;
}

/* Back on the same session: our contender should still be there (only
 * someone deleting it removes it); check, as the lock's holder relies on
 * it. */
static void
recheck_held(struct zk_lock *lock)
{
	char *p = malloc(strlen(lock->path) + strlen(lock->node) + 2);
	struct zk_req req = {.kind = ZK_OP_EXISTS, .cb = recheck_done, .arg = lock, .owner = lock};

	if (p == NULL)
		abort();
	sprintf(p, "%s/%s", lock->path, lock->node);
	req.path = p;
	zk_submit(lock->zk, &req);
	free(p);
}

static void
lock_session(struct zk *zk, enum zk_event ev, void *arg)
{
	struct zk_lock *lock = arg;
	void (*resume)(struct zk_lock *);
	zk_void_cb rcb;

	switch (ev) {
	case ZK_EV_EXPIRED:
		/* our contender went with the session */
		if (lock->state == L_HELD) {
			log_warn("zk lock %s: lost (session expired)", lock->path);
			lock->state = L_IDLE;
			free(lock->node);
			lock->node = NULL;
		} else if (lock->state == L_ACQUIRING) {
			lock->create_tried = 0; /* gone with the session: no sweep */
			lock->x_sent = 0;	/* unknown: the caller looks itself */
			xops_free(lock);	/* and never on a new session */
			stop_attempt(lock);
			free(lock->node);
			lock->node = NULL;
			lock->create_tried = 0;
			lock->resume = step_create;
			lock->waiting_conn = 1;
		} else if (lock->state == L_DROPPING) {
			stop_attempt(lock);
			free(lock->node);
			lock->node = NULL;
			if (!lock->drop_release) {
				finish(lock, lock->drop_rc);
			} else {
				lock->state = L_IDLE;
				rcb = lock->rcb;
				lock->rcb = NULL;
				if (rcb != NULL)
					rcb(ZOK, lock->rarg);
			}
		}
		break;
	case ZK_EV_CONNECTED:
	case ZK_EV_RECONNECTED:
		if (ev == ZK_EV_RECONNECTED && lock->state == L_HELD)
			recheck_held(lock);
		if (lock->waiting_conn && lock->resume != NULL) {
			resume = lock->resume;
			lock->waiting_conn = 0;
			lock->resume = NULL;
			evtimer_del(lock->retry);
			resume(lock);
		}
		break;
	default:
		break;
	}
}

/* ---- public ---------------------------------------------------------------- */

struct zk_lock *
zk_lock_new(struct zk *zk, const char *path, const char *identifier, int flags)
{
	struct zk_lock *lock = calloc(1, sizeof(*lock));
	unsigned char u[16];
	size_t n;
	int i;

	if (lock == NULL)
		return NULL;
	lock->zk = zk;
	lock->flags = flags;
	lock->path = strdup(path);
	lock->ident = strdup(identifier != NULL ? identifier : "");
	if (lock->path == NULL || lock->ident == NULL || RAND_bytes(u, sizeof(u)) != 1)
		goto fail;
	lock->identlen = (int)strlen(lock->ident);
	/* a uuid4, as kazoo's uuid.uuid4().hex */
	u[6] = (unsigned char)((u[6] & 0x0f) | 0x40);
	u[8] = (unsigned char)((u[8] & 0x3f) | 0x80);
	for (i = 0; i < 16; i++)
		snprintf(lock->prefix + 2 * i, 3, "%02x", u[i]);
	strcpy(lock->prefix + 32, "__lock__");
	n = strlen(path) + strlen(lock->prefix) + 2;
	if ((lock->create_path = malloc(n)) == NULL)
		goto fail;
	snprintf(lock->create_path, n, "%s/%s", path, lock->prefix);
	lock->deadline = evtimer_new(zk_base(zk), deadline_cb, lock);
	lock->retry = evtimer_new(zk_base(zk), retry_cb, lock);
	if (lock->deadline == NULL || lock->retry == NULL)
		goto fail;
	zk_listener_add(zk, &lock->listener, lock_session, lock);
	return lock;
fail:
	if (lock->deadline != NULL)
		event_free(lock->deadline);
	if (lock->retry != NULL)
		event_free(lock->retry);
	free(lock->path);
	free(lock->ident);
	free(lock->create_path);
	free(lock);
	return NULL;
}

/* Forget what an earlier acquire_with left. */
static void
x_reset(struct zk_lock *lock)
{
	int i;

	xops_free(lock);
	for (i = 0; lock->xres != NULL && i < lock->nx; i++)
		free((void *)lock->xres[i].path);
	free(lock->xres);
	lock->xres = NULL;
	lock->nx = 0;
	lock->x_sent = 0;
	lock->x_applied = 0;
}

static void
acquire(struct zk_lock *lock, double timeout, zk_lock_cb cb, void *arg)
{
	struct timeval tv;
	double t;

	lock->state = L_ACQUIRING;
	lock->cb = cb;
	lock->cbarg = arg;
	lock->blocking = timeout != 0;
	lock->create_tried = 0;
	/* non-blocking: bounded only while waiting for a lost connection */
	t = timeout > 0 ? timeout : timeout == 0 ? zk_timeout(lock->zk) : -1;
	if (t > 0) {
		tv.tv_sec = (time_t)t;
		tv.tv_usec = (suseconds_t)((t - (double)tv.tv_sec) * 1e6);
		evtimer_add(lock->deadline, &tv);
	}
	step_create(lock);
}

void
zk_lock_acquire(struct zk_lock *lock, double timeout, zk_lock_cb cb, void *arg)
{
	if (lock->state != L_IDLE) {
		log_warn("zk lock %s: acquire while %s", lock->path,
			 lock->state == L_HELD ? "held" : "busy");
		if (cb != NULL)
			cb(lock, ZBADARGUMENTS, arg);
		return;
	}
	x_reset(lock);
	acquire(lock, timeout, cb, arg);
}

void
zk_lock_acquire_with(struct zk_lock *lock, double timeout, const struct zk_multi_op *ops, int count,
		     zk_lock_cb cb, void *arg)
{
	int i;

	if (lock->state != L_IDLE || count < 0 || (count > 0 && ops == NULL)) {
		log_warn("zk lock %s: acquire while %s", lock->path,
			 lock->state == L_IDLE	 ? "idle (bad ops)"
			 : lock->state == L_HELD ? "held"
						 : "busy");
		if (cb != NULL)
			cb(lock, ZBADARGUMENTS, arg);
		return;
	}
	x_reset(lock);
	if (count > 0 && (lock->flags & ZK_LOCK_NEW_DIR) && !lock->dir_known) {
		lock->nx = count;
		lock->xops = xcalloc((size_t)count, sizeof(*lock->xops));
		lock->xres = xcalloc((size_t)count, sizeof(*lock->xres));
		for (i = 0; i < count; i++) {
			lock->xops[i] = ops[i];
			lock->xops[i].path = xstrdup(ops[i].path);
			lock->xops[i].record = NULL; /* borrowed for the call only */
			lock->xops[i].data = NULL;
			if (ops[i].data != NULL && ops[i].len > 0) {
				void *d = xmalloc((size_t)ops[i].len);
				memcpy(d, ops[i].data, (size_t)ops[i].len);
				lock->xops[i].data = d;
			}
		}
	}
	acquire(lock, timeout, cb, arg);
}

int
zk_lock_applied(const struct zk_lock *lock, const struct zk_multi_result **res, int *n)
{
	if (lock == NULL || lock->state != L_HELD || !lock->x_applied) {
		if (res != NULL)
			*res = NULL;
		if (n != NULL)
			*n = 0;
		return 0;
	}
	if (res != NULL)
		*res = lock->xres;
	if (n != NULL)
		*n = lock->nx;
	return 1;
}

void
zk_lock_release(struct zk_lock *lock, zk_void_cb cb, void *arg)
{
	switch (lock->state) {
	case L_IDLE:
		if (cb != NULL)
			cb(ZOK, arg);
		return;
	case L_DROPPING:
		if (lock->drop_release) {
			if (cb != NULL)
				cb(ZBADARGUMENTS, arg);
			return;
		}
		/* giving up an acquisition already: report to this caller instead */
		break;
	case L_ACQUIRING:
		stop_attempt(lock);
		evtimer_del(lock->deadline);
		break;
	case L_HELD:
		break;
	}
	lock->cb = NULL; /* an acquisition cancelled by the release is not reported */
	lock->rcb = cb;
	lock->rarg = arg;
	lock->drop_release = 1;
	if (lock->node == NULL) {
		lock->state = L_IDLE;
		lock->rcb = NULL;
		if (cb != NULL)
			cb(ZOK, arg);
		return;
	}
	if (lock->state != L_DROPPING) {
		lock->state = L_DROPPING;
		step_drop(lock);
	}
}

int
zk_lock_is_held(const struct zk_lock *lock)
{
	return lock != NULL && lock->state == L_HELD;
}

int
zk_lock_held_in(const struct zk_lock *lock, unsigned gen)
{
	return lock != NULL && lock->state == L_HELD && lock->gen == gen;
}

const char *
zk_lock_path(const struct zk_lock *lock)
{
	return lock->path;
}

const char *
zk_lock_contender(const struct zk_lock *lock)
{
	return lock != NULL && lock->state == L_HELD ? lock->node : NULL;
}

void
zk_lock_disown(struct zk_lock *lock)
{
	if (lock == NULL || lock->state != L_HELD)
		return;
	free(lock->node);
	lock->node = NULL;
	lock->state = L_IDLE;
}

void
zk_lock_free(struct zk_lock *lock)
{
	char *p;

	if (lock == NULL)
		return;
	stop_attempt(lock);
	if (lock->node != NULL) {
		p = malloc(strlen(lock->path) + strlen(lock->node) + 2);
		if (p == NULL)
			abort();
		sprintf(p, "%s/%s", lock->path, lock->node);
		{
			/* sent again after a lost connection: never left behind
			 * while our session lives */
			struct zk_req req = {
			    .kind = ZK_OP_DELETE, .path = p, .version = -1, .retry = 1};
			zk_submit(lock->zk, &req);
		}
		free(p);
	}
	x_reset(lock);
	zk_listener_remove(lock->zk, &lock->listener);
	event_free(lock->deadline);
	event_free(lock->retry);
	free(lock->node);
	free(lock->path);
	free(lock->ident);
	free(lock->create_path);
	free(lock);
}

/* ---- synchronous forms -------------------------------------------------------- */

struct lock_wait {
	int done;
	int rc;
};

static void
sync_lock_cb(struct zk_lock *lock, int rc, void *arg)
{
	struct lock_wait *w = arg;

	w->rc = rc;
	w->done = 1;
}

static void
sync_void_cb(int rc, void *arg)
{
	struct lock_wait *w = arg;

	w->rc = rc;
	w->done = 1;
}

static void
tick(evutil_socket_t fd, short what, void *arg)
{
}

static void
run_until(struct zk *zk, const int *flag, double timeout)
{
	struct event *t = evtimer_new(zk_base(zk), tick, NULL);
	double deadline = zk_now() + timeout, left;
	struct timeval tv;

	while (!*flag && (timeout < 0 || (left = deadline - zk_now()) > 0)) {
		if (timeout < 0)
			left = 60;
		tv.tv_sec = (time_t)left;
		tv.tv_usec = (suseconds_t)((left - (double)tv.tv_sec) * 1e6);
		evtimer_add(t, &tv);
		if (event_base_loop(zk_base(zk), EVLOOP_ONCE) < 0)
			break;
	}
	event_free(t);
}

int
zk_lock_sync_acquire(struct zk_lock *lock, double timeout)
{
	struct lock_wait w = {0, 0};

	zk_lock_acquire(lock, timeout, sync_lock_cb, &w);
	/* the lock's own deadline ends it; the margin covers removing our
	 * contender afterwards */
	run_until(lock->zk, &w.done,
		  timeout < 0
		      ? -1
		      : (timeout > 0 ? timeout : zk_timeout(lock->zk)) + 2 * zk_timeout(lock->zk));
	if (!w.done) {
		lock->cb = NULL;
		lock->rcb = NULL;
		zk_lock_release(lock, NULL, NULL);
		return ZOPERATIONTIMEOUT;
	}
	return w.rc;
}

int
zk_lock_sync_release(struct zk_lock *lock)
{
	struct lock_wait w = {0, 0};

	zk_lock_release(lock, sync_void_cb, &w);
	run_until(lock->zk, &w.done, 2 * zk_timeout(lock->zk));
	if (!w.done) {
		lock->rcb = NULL;
		return ZOPERATIONTIMEOUT;
	}
	return w.rc;
}

/* ---- contenders --------------------------------------------------------------- */

struct contenders {
	struct zk *zk;
	zk_children_cb cb;
	void *arg;
	char *path;
	int n;
	char **names;  /* contender names, sorted by sequence */
	char **idents; /* their data; NULL: vanished meanwhile */
	int pending;
	int rc;
	int closing;
};

static int
by_seq(const void *a, const void *b)
{
	return strcmp(zk_lock_seq(*(char *const *)a), zk_lock_seq(*(char *const *)b));
}

static void
contenders_end(struct contenders *c)
{
	char **out = NULL;
	int i, n = 0;

	if (!c->closing && !zk_closing(c->zk) && c->cb != NULL) {
		if (c->rc == ZOK && c->n > 0) {
			out = calloc((size_t)c->n, sizeof(char *));
			if (out == NULL)
				abort();
			for (i = 0; i < c->n; i++) {
				if (c->idents[i] != NULL)
					out[n++] = c->idents[i];
			}
		}
		c->cb(c->rc, c->rc == ZOK ? n : 0, out, c->arg);
	}
	free(out);
	for (i = 0; i < c->n; i++) {
		free(c->names[i]);
		free(c->idents[i]);
	}
	free(c->names);
	free(c->idents);
	free(c->path);
	free(c);
}

struct contender_get {
	struct contenders *c;
	int i;
};

static void
contender_data(const struct zk_result *r, void *arg)
{
	struct contender_get *g = arg;
	struct contenders *c = g->c;

	if (r->rc == ZOK) {
		c->idents[g->i] = strdup(r->value);
		if (c->idents[g->i] == NULL)
			abort();
	} else if (r->rc == ZCLOSING) {
		c->closing = 1;
	} else if (r->rc != ZNONODE && c->rc == ZOK) {
		c->rc = r->rc;
	}
	free(g);
	if (--c->pending == 0)
		contenders_end(c);
}

static void
contender_list(const struct zk_result *r, void *arg)
{
	struct contenders *c = arg;
	struct contender_get *g;
	char *p;
	int i;

	if (r->rc == ZCLOSING)
		c->closing = 1;
	if (r->rc != ZOK) {
		c->rc = r->rc == ZNONODE ? ZOK : r->rc;
		contenders_end(c);
		return;
	}
	c->names = calloc((size_t)(r->count ? r->count : 1), sizeof(char *));
	c->idents = calloc((size_t)(r->count ? r->count : 1), sizeof(char *));
	if (c->names == NULL || c->idents == NULL)
		abort();
	for (i = 0; i < r->count; i++) {
		if (zk_lock_seq(r->names[i]) == NULL)
			continue;
		if ((c->names[c->n++] = strdup(r->names[i])) == NULL)
			abort();
	}
	qsort(c->names, (size_t)c->n, sizeof(char *), by_seq);
	if (c->n == 0) {
		contenders_end(c);
		return;
	}
	c->pending = c->n;
	for (i = 0; i < c->n; i++) {
		g = calloc(1, sizeof(*g));
		p = malloc(strlen(c->path) + strlen(c->names[i]) + 2);
		if (g == NULL || p == NULL)
			abort();
		g->c = c;
		g->i = i;
		sprintf(p, "%s/%s", c->path, c->names[i]);
		{
			struct zk_req req = {.kind = ZK_OP_GET,
					     .path = p,
					     .cb = contender_data,
					     .arg = g,
					     .always = 1};

			zk_submit(c->zk, &req);
		}
		free(p);
	}
}

void
zk_lock_contenders(struct zk *zk, const char *path, zk_children_cb cb, void *arg)
{
	struct contenders *c = calloc(1, sizeof(*c));
	struct zk_req req = {
	    .kind = ZK_OP_CHILDREN, .path = path, .cb = contender_list, .always = 1};

	if (c == NULL || (c->path = strdup(path != NULL ? path : "")) == NULL)
		abort();
	c->zk = zk;
	c->cb = cb;
	c->arg = arg;
	req.arg = c;
	zk_submit(zk, &req);
}

struct contenders_wait {
	int done;
	int abandoned; /* the sync form timed out: the callback frees this */
	int rc;
	int count;
	char **idents;
};

static void
sync_contenders_cb(int rc, int count, char *const *names, void *arg)
{
	struct contenders_wait *w = arg;
	int i;

	if (w->abandoned) {
		free(w);
		return;
	}
	w->rc = rc;
	w->count = count;
	if (count > 0) {
		w->idents = calloc((size_t)count, sizeof(char *));
		if (w->idents == NULL)
			abort();
		for (i = 0; i < count; i++) {
			if ((w->idents[i] = strdup(names[i])) == NULL)
				abort();
		}
	}
	w->done = 1;
}

int
zk_lock_sync_contenders(struct zk *zk, const char *path, int *count, char ***idents)
{
	struct contenders_wait *w = calloc(1, sizeof(*w));
	int rc;

	if (w == NULL)
		abort();
	*count = 0;
	*idents = NULL;
	zk_lock_contenders(zk, path, sync_contenders_cb, w);
	run_until(zk, &w->done, 2 * zk_timeout(zk));
	if (!w->done) {
		w->abandoned = 1; /* left to the late callback */
		return ZOPERATIONTIMEOUT;
	}
	rc = w->rc;
	*count = w->count;
	*idents = w->idents;
	free(w);
	return rc;
}
