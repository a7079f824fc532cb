/*
 * The ZooKeeper session and its operations on a libevent loop (zk.h).
 *
 * The C client (multi-threaded flavour) runs an I/O thread and a completion
 * thread per handle. Our completion, watcher and log callbacks run on those
 * threads and do one thing: copy what they were given into a struct zk_item
 * and append it to the zk's mutex-protected queue, waking the loop through
 * an eventfd. Everything else (state, callbacks, bookkeeping) happens on the
 * loop thread, so nothing but the queue is shared.
 *
 * Vocabulary:
 *   call   one operation as the caller sees it (zk_get, a makepath create,
 *          a recursive delete): holds the callback, the owner for
 *          zk_cancel(), and is counted by zk_pending();
 *   rq     one C client request made for a call (the completion's data);
 *   watch  one registered watcher (the watcher's context);
 *   gen    the session generation: a new handle after an expiry gets a new
 *          one, and the watches of the old one are dropped.
 */
#include "lib/zk/zk_private.h"
#include "lib/core/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <poll.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include "lib/core/xalloc.h"
#include "lib/core/clock.h"

#define ZK_LOG_SLOTS	  16
#define ZK_MAKEPATH_TRIES 4
#define ZK_RDELETE_TRIES  5
#define ZK_RESTART_MIN	  1.0 /* seconds before a failed session start is retried */
#define ZK_RESTART_MAX	  30.0

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
	} pcb;
	void *parg;
	/* create with makepath */
	char *data;
	int len;
	int flags;
	int makepath;
	int attempts;
	char *created;
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

	int share_watch;	       /* the rq_send() in progress shares its watch context */
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

static int path_ok(const char *path, int sequence);

double
zk_now(void)
{
	return np_mono_s();
}

struct timeval
zk_tv_of(double s)
{
	struct timeval tv;

	if (s < 0)
		s = 0;
	tv.tv_sec = (time_t)s;
	tv.tv_usec = (suseconds_t)((s - (double)tv.tv_sec) * 1e6);
	return tv;
}

static void
stat_copy(struct zk_stat *d, const struct Stat *s)
{
	d->czxid = s->czxid;
	d->mzxid = s->mzxid;
	d->pzxid = s->pzxid;
	d->ctime_ms = s->ctime;
	d->mtime_ms = s->mtime;
	d->version = s->version;
	d->cversion = s->cversion;
	d->aversion = s->aversion;
	d->num_children = s->numChildren;
	d->ephemeral_owner = s->ephemeralOwner;
	d->data_length = s->dataLength;
}

/* ---- the queue: the only thing the C client's threads touch ------------ */

static struct zk_item *
item_new(enum zk_item_kind kind, int rc)
{
	struct zk_item *it = xcalloc(1, sizeof(*it));

	it->kind = kind;
	it->rc = rc;
	return it;
}

static void
item_free(struct zk_item *it)
{
	int i;

	free(it->str);
	free(it->value);
	for (i = 0; i < it->count; i++)
		free(it->names[i]);
	free(it->names);
	free(it);
}

static void
enqueue(struct zk *zk, struct zk_item *it)
{
	uint64_t one = 1;
	int wake;

	pthread_mutex_lock(&zk->qmu);
	if (it->rq != NULL)
		it->rq->queued = 1;
	wake = zk->qhead == NULL;
	if (zk->qtail != NULL)
		zk->qtail->next = it;
	else
		zk->qhead = it;
	zk->qtail = it;
	pthread_mutex_unlock(&zk->qmu);
	if (wake && write(zk->efd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is saturated, so the loop is awake anyway. */
	}
}

/* C client completions (its completion thread, or ours on submission). */

static void
c_string_done(int rc, const char *value, const void *data)
{
	struct zk_rq *rq = (struct zk_rq *)data;
	struct zk_item *it = item_new(IT_RESULT, rc);

	it->rq = rq;
	if (rc == ZOK && value != NULL)
		it->str = xstrdup(value);
	enqueue(rq->zk, it);
}

static void
c_data_done(int rc, const char *value, int len, const struct Stat *st, const void *data)
{
	struct zk_rq *rq = (struct zk_rq *)data;
	struct zk_item *it = item_new(IT_RESULT, rc);

	it->rq = rq;
	if (rc == ZOK) {
		if (value == NULL || len < 0)
			len = 0;
		it->value = xmalloc((size_t)len + 1);
		if (len > 0)
			memcpy(it->value, value, (size_t)len);
		it->value[len] = '\0';
		it->len = len;
		if (st != NULL) {
			stat_copy(&it->st, st);
			it->has_stat = 1;
		}
	}
	enqueue(rq->zk, it);
}

static void
c_stat_done(int rc, const struct Stat *st, const void *data)
{
	struct zk_rq *rq = (struct zk_rq *)data;
	struct zk_item *it = item_new(IT_RESULT, rc);

	it->rq = rq;
	if (rc == ZOK && st != NULL) {
		stat_copy(&it->st, st);
		it->has_stat = 1;
	}
	enqueue(rq->zk, it);
}

static void
c_void_done(int rc, const void *data)
{
	struct zk_rq *rq = (struct zk_rq *)data;
	struct zk_item *it = item_new(IT_RESULT, rc);

	it->rq = rq;
	enqueue(rq->zk, it);
}

static void
c_strings_done(int rc, const struct String_vector *sv, const void *data)
{
	struct zk_rq *rq = (struct zk_rq *)data;
	struct zk_item *it = item_new(IT_RESULT, rc);
	int i;

	it->rq = rq;
	if (rc == ZOK && sv != NULL && sv->count > 0) {
		it->names = xcalloc((size_t)sv->count, sizeof(char *));
		for (i = 0; i < sv->count; i++)
			it->names[i] = xstrdup(sv->data[i]);
		it->count = sv->count;
	}
	enqueue(rq->zk, it);
}

static void
c_path_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	struct zk_watch *w = ctx;
	struct zk_item *it;

	/* The C client also hands every session event to every path watcher
	 * (and keeps it registered): those are reported once, as session
	 * events, by c_session_watcher. */
	if (type == ZOO_SESSION_EVENT)
		return;
	it = item_new(IT_WATCH, ZOK);
	it->w = w;
	it->type = type;
	it->str = xstrdup(path != NULL ? path : "");
	enqueue(w->zk, it);
}

static void
c_session_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	struct zk *zk = ctx;
	struct zk_item *it;

	if (type != ZOO_SESSION_EVENT)
		return;
	it = item_new(IT_SESSION, ZOK);
	it->zh = zh;
	it->state = state;
	enqueue(zk, it);
}

/* ---- the C client's log lines ------------------------------------------
 *
 * The C client logs through a per-handle callback that gets only the text.
 * To tell which zk a line (a TLS refusal in particular) belongs to, each zk
 * borrows one of a fixed set of trampolines; lines logged before the
 * callback is set (or by a zk beyond the set) go through the global stream
 * and are only logged.
 */

static pthread_mutex_t slot_mu = PTHREAD_MUTEX_INITIALIZER;
static struct zk *slot_zk[ZK_LOG_SLOTS];
static int slot_used[ZK_LOG_SLOTS];
static char slot_last[ZK_LOG_SLOTS + 1][256];
static double slot_last_t[ZK_LOG_SLOTS + 1];

/*
 * Log one C client line: "<time>:<pid>(<tid>):ZOO_<LEVEL>@<func>@<line>: msg".
 * Its errors are mostly connection failures it retries by itself: of a
 * zk's, the first since it was last connected is a warning and the rest
 * of the outage debug (counted; zk_session_item sums the outage up when
 * connected again). Lines of no zk (logged before its callback is set)
 * are warnings, a repeat of the previous one within a minute debug.
 * Everything else is debug. Called with slot_mu held.
 */
static void
zk_log_line(int slot, struct zk *zk, const char *line)
{
	char msg[1024], pat[32];
	const char *p = strstr(line, ":ZOO_"), *m = line;
	int err = 0;
	size_t n;
	double t;

	if (p != NULL) {
		err = strncmp(p + 5, "ERROR@", 6) == 0;
		if ((m = strchr(p + 5, '@')) != NULL && (m = strchr(m + 1, '@')) != NULL &&
		    (m = strstr(m, ": ")) != NULL)
			m += 2;
		else
			m = line;
	}
	snprintf(msg, sizeof(msg), "%s", m);
	n = strlen(msg);
	while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' ' || msg[n - 1] == '\r'))
		msg[--n] = '\0';
	if (n == 0)
		return;
	if (!err) {
		log_debug("zookeeper client: %s", msg);
		return;
	}
	t = zk_now();
	if (zk != NULL) {
		/* One line per outage: every address of an ensemble failing
		 * every 50-100 ms made ~40 lines a second (issue 27). The
		 * count and the outage's length are logged on reconnection. */
		atomic_fetch_add(&zk->conn_errors, 1);
		if (atomic_exchange(&zk->err_logged, 1))
			log_debug("zookeeper client: %s", msg);
		else
			log_warn("zookeeper client: %s (further connection errors are counted, "
				 "not logged, until connected)",
				 msg);
	} else if (strncmp(slot_last[slot], msg, sizeof(slot_last[0]) - 1) == 0 &&
		   t - slot_last_t[slot] < 60)
		log_debug("zookeeper client: %s", msg);
	else
		log_warn("zookeeper client: %s", msg);
	snprintf(slot_last[slot], sizeof(slot_last[0]), "%s", msg);
	slot_last_t[slot] = t;
	snprintf(pat, sizeof(pat), "zk retcode=%d,", ZSSLCONNECTIONERROR);
	if (zk != NULL && strstr(msg, pat) != NULL) {
		struct zk_item *it = item_new(IT_TLS, ZSSLCONNECTIONERROR);

		it->str = xstrdup(msg);
		enqueue(zk, it);
	}
}

static void
log_slot(int i, const char *line)
{
	pthread_mutex_lock(&slot_mu);
	zk_log_line(i, slot_zk[i], line);
	pthread_mutex_unlock(&slot_mu);
}

#define SLOT_FN(i)                                                                                 \
	static void slot_cb_##i(const char *m)                                                     \
	{                                                                                          \
		log_slot(i, m);                                                                    \
	}
SLOT_FN(0)
SLOT_FN(1)
SLOT_FN(2)
SLOT_FN(3)
SLOT_FN(4)
SLOT_FN(5)
SLOT_FN(6)
SLOT_FN(7)
SLOT_FN(8)
SLOT_FN(9)
SLOT_FN(10)
SLOT_FN(11)
SLOT_FN(12)
SLOT_FN(13)
SLOT_FN(14)
SLOT_FN(15)
static const log_callback_fn slot_fns[ZK_LOG_SLOTS] = {
    slot_cb_0, slot_cb_1, slot_cb_2,  slot_cb_3,  slot_cb_4,  slot_cb_5,  slot_cb_6,  slot_cb_7,
    slot_cb_8, slot_cb_9, slot_cb_10, slot_cb_11, slot_cb_12, slot_cb_13, slot_cb_14, slot_cb_15,
};

static ssize_t
stream_write(void *cookie, const char *buf, size_t size)
{
	char line[2048];
	size_t i = 0, j;

	while (i < size) {
		for (j = i; j < size && buf[j] != '\n'; j++)
			;
		if (j > i) {
			size_t n = j - i < sizeof(line) - 1 ? j - i : sizeof(line) - 1;

			memcpy(line, buf + i, n);
			line[n] = '\0';
			pthread_mutex_lock(&slot_mu);
			zk_log_line(ZK_LOG_SLOTS, NULL, line);
			pthread_mutex_unlock(&slot_mu);
		}
		i = j + 1;
	}
	return (ssize_t)size;
}

static pthread_once_t stream_once = PTHREAD_ONCE_INIT;
static FILE *log_stream;

static void
stream_init(void)
{
	cookie_io_functions_t io = {.write = stream_write};

	log_stream = fopencookie(NULL, "w", io);
	if (log_stream != NULL) {
		setvbuf(log_stream, NULL, _IOLBF, 4096);
		zoo_set_log_stream(log_stream);
	}
}

static int
slot_take(struct zk *zk)
{
	int i, r = -1;

	pthread_mutex_lock(&slot_mu);
	for (i = 0; i < ZK_LOG_SLOTS; i++) {
		if (!slot_used[i]) {
			slot_used[i] = 1;
			slot_zk[i] = zk;
			slot_last[i][0] = '\0';
			r = i;
			break;
		}
	}
	pthread_mutex_unlock(&slot_mu);
	return r;
}

static void
slot_release(int i)
{
	if (i < 0)
		return;
	pthread_mutex_lock(&slot_mu);
	slot_used[i] = 0;
	slot_zk[i] = NULL;
	pthread_mutex_unlock(&slot_mu);
}

/* ---- calls, requests, watches ------------------------------------------- */

static struct zk_call *
call_new(struct zk *zk, enum zk_op_kind kind, const char *path)
{
	struct zk_call *c = xcalloc(1, sizeof(*c));

	c->kind = kind;
	c->path = xstrdup(path != NULL ? path : "");
	c->gen = zk->gen;
	c->next = zk->calls;
	if (zk->calls != NULL)
		zk->calls->prev = c;
	zk->calls = c;
	zk->ncalls++;
	return c;
}

static void
call_free(struct zk *zk, struct zk_call *c)
{
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		zk->calls = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	zk->ncalls--;
	if (c->mops != NULL) {
		int i;
		for (i = 0; i < c->mcount; i++) {
			free((char *)c->mops[i].path);
			free((void *)c->mops[i].data);
		}
		free(c->mops);
	}
	free(c->path);
	free(c->data);
	free(c->created);
	free(c);
}

static struct zk_watch *
watch_new(struct zk *zk, zk_watch_cb cb, void *arg, const void *owner)
{
	struct zk_watch *w;

	if (zk->share_watch) {
		w = zk->last_shared;
		if (w == NULL || w->cb != cb || w->arg != arg || w->owner != owner ||
		    w->gen != zk->gen) {
			for (w = zk->watches; w != NULL; w = w->next) {
				if (w->shared && w->cb == cb && w->arg == arg &&
				    w->owner == owner && w->gen == zk->gen)
					break;
			}
		}
		if (w != NULL) {
			w->refs++;
			zk->last_shared = w;
			return w;
		}
	}
	w = xcalloc(1, sizeof(*w));
	w->refs = 1;
	w->shared = zk->share_watch;
	if (w->shared)
		zk->last_shared = w;

	w->zk = zk;
	w->cb = cb;
	w->arg = arg;
	w->owner = owner;
	w->gen = zk->gen;
	w->next = zk->watches;
	if (zk->watches != NULL)
		zk->watches->prev = w;
	zk->watches = w;
	return w;
}

static void
watch_free(struct zk *zk, struct zk_watch *w)
{
	if (zk->last_shared == w)
		zk->last_shared = NULL;
	if (w->prev != NULL)
		w->prev->next = w->next;
	else
		zk->watches = w->next;
	if (w->next != NULL)
		w->next->prev = w->prev;
	free(w);
}

/* One registration of w is done with (fired, or never made). */
static void
watch_put(struct zk *zk, struct zk_watch *w)
{
	if (--w->refs <= 0)
		watch_free(zk, w);
}

static struct zk_rq *
rq_new(struct zk *zk)
{
	struct zk_rq *rq = xcalloc(1, sizeof(*rq));

	rq->zk = zk;
	rq->gen = zk->gen;
	rq->next = zk->rqs;
	if (zk->rqs != NULL)
		zk->rqs->prev = rq;
	zk->rqs = rq;
	return rq;
}

static void
rq_free(struct zk_rq *rq)
{
	struct zk *zk = rq->zk;

	if (rq->prev != NULL)
		rq->prev->next = rq->next;
	else
		zk->rqs = rq->next;
	if (rq->next != NULL)
		rq->next->prev = rq->prev;
	if (rq->mcount > 0) {
		int i;
		for (i = 0; i < rq->mcount; i++) {
			free(rq->mpaths[i]);
			free(rq->mdata[i]);
			free(rq->mbufs[i]);
		}
		free(rq->mops);
		free(rq->mres);
		free(rq->mpaths);
		free(rq->mdata);
		free(rq->mbufs);
	}
	free(rq->path);
	free(rq);
}

/*
 * Send one request of call c. The completion (or the submission error)
 * always comes back as an IT_RESULT item. watch: register a watcher
 * (get, exists, children) with the call's watch callback.
 */
static void
rq_send(struct zk *zk, struct zk_call *c, struct zk_rdel *rd, enum zk_op_kind kind, int step,
	const char *path, const void *data, int len, int flags, int version, zk_watch_cb wcb,
	void *warg, const void *wowner)
{
	struct zk_rq *rq = rq_new(zk);
	zhandle_t *zh = zk->zh;
	int rc;

	rq->call = c;
	rq->rdel = rd;
	rq->kind = kind;
	rq->step = step;
	rq->path = xstrdup(path);
	c->outstanding++;
	if (zk->closing) {
		rc = ZCLOSING;
	} else if (zh == NULL) {
		rc = ZCONNECTIONLOSS; /* between sessions: retried like a lost connection */
	} else {
		if (wcb != NULL)
			rq->watch = watch_new(zk, wcb, warg, wowner);
		switch (kind) {
		case ZK_OP_CREATE:
			rc = zoo_acreate(zh, path, data != NULL ? data : "", data != NULL ? len : 0,
					 &ZOO_OPEN_ACL_UNSAFE, flags, c_string_done, rq);
			break;
		case ZK_OP_GET:
			rc = zoo_awget(zh, path, rq->watch ? c_path_watcher : NULL, rq->watch,
				       c_data_done, rq);
			break;
		case ZK_OP_SET:
			rc = zoo_aset(zh, path, data != NULL ? data : "", data != NULL ? len : 0,
				      version, c_stat_done, rq);
			break;
		case ZK_OP_DELETE:
			rc = zoo_adelete(zh, path, version, c_void_done, rq);
			break;
		case ZK_OP_EXISTS:
			rc = zoo_awexists(zh, path, rq->watch ? c_path_watcher : NULL, rq->watch,
					  c_stat_done, rq);
			break;
		case ZK_OP_CHILDREN:
			rc = zoo_awget_children(zh, path, rq->watch ? c_path_watcher : NULL,
						rq->watch, c_strings_done, rq);
			break;
		default:
			rc = ZBADARGUMENTS;
			break;
		}
	}
	if (rc != ZOK) {
		struct zk_item *it = item_new(IT_RESULT, rc);

		it->rq = rq;
		enqueue(zk, it);
	}
}

/* ---- delivering a call's result ------------------------------------------ */

static void
pub_dispatch(const struct zk_result *r, void *arg)
{
	struct zk_call *c = arg;

	switch (c->pub) {
	case PUB_STRING:
		if (c->pcb.s != NULL)
			c->pcb.s(r->rc, r->rc == ZOK ? r->value : NULL, c->parg);
		break;
	case PUB_DATA:
		if (c->pcb.d != NULL)
			c->pcb.d(r->rc, r->rc == ZOK ? r->value : NULL, r->len, r->stat, c->parg);
		break;
	case PUB_STAT:
		if (c->pcb.st != NULL)
			c->pcb.st(r->rc, r->stat, c->parg);
		break;
	case PUB_VOID:
		if (c->pcb.v != NULL)
			c->pcb.v(r->rc, c->parg);
		break;
	case PUB_CHILDREN:
		if (c->pcb.c != NULL)
			c->pcb.c(r->rc, r->count, r->names, c->parg);
		break;
	case PUB_MULTI:
		if (c->pcb.m != NULL)
			c->pcb.m(r->rc, r->mcount, r->mres, c->parg);
		break;
	case PUB_NONE:
		break;
	}
}

static void park(struct zk *zk, struct zk_call *c);

/* Report r for c (unless cancelled, or torn down by zk_free) and free c.
 * A call made with retry that failed for a lost connection in its session
 * is parked instead, to be sent again once connected (zk_set_retry). */
static void
call_finish(struct zk *zk, struct zk_call *c, struct zk_result *r)
{
	if (c->retry && (r->rc == ZCONNECTIONLOSS || r->rc == ZOPERATIONTIMEOUT) && !zk->closing &&
	    c->gen == zk->gen &&
	    (c->cb != NULL || c->kind == ZK_OP_SET || c->kind == ZK_OP_DELETE ||
	     c->kind == ZK_OP_MULTI)) {
		park(zk, c);
		return;
	}
	if (c->retry && (r->rc == ZCONNECTIONLOSS || r->rc == ZOPERATIONTIMEOUT) && !zk->closing &&
	    c->gen != zk->gen)
		r->rc = c->under ? ZK_LOCK_LOST : ZSESSIONEXPIRED; /* lost with its session */
	r->path = c->path;
	r->gen = c->gen;
	if (r->rc == ZK_LOCK_LOST)
		zk->counters.lock_lost++;
	if (c->cb != NULL && (!zk->closing || c->always))
		c->cb(r, c->arg);
	call_free(zk, c);
}

static void
call_finish_rc(struct zk *zk, struct zk_call *c, int rc)
{
	struct zk_result r;

	memset(&r, 0, sizeof(r));
	r.rc = rc;
	call_finish(zk, c, &r);
}

/* ---- recursive delete --------------------------------------------------- */

static void rdel_start(struct zk *zk, struct zk_rdel *rd);

static struct zk_rdel *
rdel_new(struct zk_call *c, struct zk_rdel *parent, const char *path, int version)
{
	struct zk_rdel *rd = xcalloc(1, sizeof(*rd));

	rd->call = c;
	rd->parent = parent;
	rd->path = xstrdup(path);
	rd->version = version;
	return rd;
}

static void
rdel_done(struct zk *zk, struct zk_rdel *rd, int rc)
{
	struct zk_rdel *p = rd->parent;
	struct zk_call *c = rd->call;

	free(rd->path);
	free(rd);
	if (p == NULL) { /* the top: all its requests are done by now */
		call_finish_rc(zk, c, rc);
		return;
	}
	if (rc != ZOK && p->rc == ZOK)
		p->rc = rc;
	if (--p->pending == 0) {
		if (p->rc != ZOK)
			rdel_done(zk, p, p->rc);
		else
			rq_send(zk, c, p, ZK_OP_DELETE, 1, p->path, NULL, 0, 0, p->version, NULL,
				NULL, NULL);
	}
}

static void
rdel_start(struct zk *zk, struct zk_rdel *rd)
{
	rq_send(zk, rd->call, rd, ZK_OP_CHILDREN, 0, rd->path, NULL, 0, 0, 0, NULL, NULL, NULL);
}

static void
rdel_result(struct zk *zk, struct zk_rq *rq, struct zk_item *it)
{
	struct zk_rdel *rd = rq->rdel;
	char *child;
	size_t n;
	int i;

	if (rq->step == 0) { /* children listed */
		if (it->rc == ZNONODE) {
			rdel_done(zk, rd, ZOK);
		} else if (it->rc != ZOK) {
			rdel_done(zk, rd, it->rc);
		} else if (it->count == 0) {
			rq_send(zk, rd->call, rd, ZK_OP_DELETE, 1, rd->path, NULL, 0, 0,
				rd->version, NULL, NULL, NULL);
		} else {
			rd->pending = it->count;
			rd->rc = ZOK;
			for (i = 0; i < it->count; i++) {
				n = strlen(rd->path) + strlen(it->names[i]) + 2;
				child = xmalloc(n);
				snprintf(child, n, "%s/%s",
					 strcmp(rd->path, "/") == 0 ? "" : rd->path, it->names[i]);
				rdel_start(zk, rdel_new(rd->call, rd, child, -1));
				free(child);
			}
		}
		return;
	}
	/* the znode itself deleted */
	if (it->rc == ZOK || it->rc == ZNONODE)
		rdel_done(zk, rd, ZOK);
	else if (it->rc == ZNOTEMPTY && ++rd->attempts < ZK_RDELETE_TRIES)
		rdel_start(zk, rd); /* a child appeared meanwhile */
	else
		rdel_done(zk, rd, it->rc);
}

/* ---- create with makepath ------------------------------------------------ */

/* Send the creates of every missing parent and then of the target: a
 * session's requests are processed in order, so one round trip does. */
static void
create_with_parents(struct zk *zk, struct zk_call *c)
{
	char *p = xstrdup(c->path), *s;

	for (s = strchr(p + 1, '/'); s != NULL; s = strchr(s + 1, '/')) {
		*s = '\0';
		rq_send(zk, c, NULL, ZK_OP_CREATE, 1, p, NULL, 0, 0, 0, NULL, NULL, NULL);
		*s = '/';
	}
	free(p);
	rq_send(zk, c, NULL, ZK_OP_CREATE, 0, c->path, c->data, c->len, c->flags, 0, NULL, NULL,
		NULL);
}

/* ---- persistent recursive watches (zk_watch_tree) ------------------------- */

/* Add t's watch in the current session (again: the C client and the
 * server keep one registration per watcher context and path). The reply
 * comes back as an rq without a call. */
static void
tree_send(struct zk *zk, struct zk_tree *t)
{
	struct zk_rq *rq;
	struct zk_item *it;
	int rc;

	if (zk->zh == NULL || zk->closing)
		return; /* added once the next session is there */
	if (t->w == NULL || t->w->gen != zk->gen) {
		t->w = watch_new(zk, t->cb, t->arg, t->arg);
		t->w->persistent = 1;
	}
	rq = rq_new(zk);
	rq->kind = ZK_OP_WATCH;
	rq->path = xstrdup(t->path);
	rc = zoo_aadd_watch(zk->zh, t->path, ZOO_ADD_WATCH_PERSISTENT_RECURSIVE, c_path_watcher,
			    t->w, c_void_done, rq);
	if (rc != ZOK) {
		it = item_new(IT_RESULT, rc);
		it->rq = rq;
		enqueue(zk, it);
	}
}

static void
tree_added(struct zk *zk, struct zk_rq *rq, int rc)
{
	/* a lost connection or session: added again on the next (re)connection */
	if (rc == ZOK || rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT ||
	    rc == ZSESSIONEXPIRED || rc == ZCLOSING || rc == ZINVALIDSTATE)
		return;
	log_error("zookeeper: cannot watch %s: %s (ZooKeeper 3.6 or later is needed)", rq->path,
		  zk_strerror(rc));
}

/* Every tree watch, in a new session or after a reconnection: before
 * anyone hears of it, so that what they re-read is watched already (a
 * session's requests are processed in order). */
static void
trees_send(struct zk *zk)
{
	struct zk_tree *t;

	for (t = zk->trees; t != NULL; t = t->next)
		tree_send(zk, t);
}

/* ---- processing queue items on the loop ------------------------------------ */

static void
rq_result(struct zk *zk, struct zk_item *it)
{
	struct zk_rq *rq = it->rq;
	struct zk_call *c = rq->call;
	struct zk_result r;
	int registered;

	/* A TLS handshake that fails while the server is away (a proxy that
	 * accepts and closes, say) fails the requests queued meanwhile with
	 * ZSSLCONNECTIONERROR: for the caller that is a lost connection. */
	if (it->rc == ZSSLCONNECTIONERROR)
		it->rc = ZCONNECTIONLOSS;
	if (rq->kind == ZK_OP_WATCH) {
		tree_added(zk, rq, it->rc);
		rq_free(rq);
		return;
	}
	c->outstanding--;
	if (rq->watch != NULL) {
		/* ZooKeeper sets the watch on success only, and exists() also on
		 * ZNONODE; any other watch can never fire. */
		registered = it->rc == ZOK || (rq->kind == ZK_OP_EXISTS && it->rc == ZNONODE);
		if (!registered)
			watch_put(zk, rq->watch);
	}
	if (rq->kind == ZK_OP_CATCHUP) {
		/* one of the call's SetWatches: reported when all are back */
		if (it->rc != ZOK && c->final_rc == ZOK)
			c->final_rc = it->rc;
		rq_free(rq);
		if (c->outstanding > 0)
			return;
		memset(&r, 0, sizeof(r));
		r.rc = c->final_rc;
		call_finish(zk, c, &r);
		return;
	}
	if (rq->rdel != NULL) {
		rdel_result(zk, rq, it);
		rq_free(rq);
		return;
	}
	if (rq->kind == ZK_OP_CREATE) {
		if (rq->step == 1) { /* a parent: its outcome shows in the target's */
			if (c->outstanding == 0 && c->final_rc != 1)
				goto finish_create;
			rq_free(rq);
			return;
		}
		if (it->rc == ZNONODE && c->makepath && c->attempts < ZK_MAKEPATH_TRIES &&
		    !zk->closing) {
			c->attempts++;
			create_with_parents(zk, c);
			rq_free(rq);
			return;
		}
		c->final_rc = it->rc;
		free(c->created);
		c->created = it->str != NULL ? xstrdup(it->str) : NULL;
		if (c->outstanding > 0) { /* parents still to report */
			rq_free(rq);
			return;
		}
	finish_create:
		rq_free(rq);
		memset(&r, 0, sizeof(r));
		r.rc = c->final_rc;
		r.value = r.rc == ZOK ? c->created : NULL;
		call_finish(zk, c, &r);
		return;
	}
	memset(&r, 0, sizeof(r));
	r.rc = it->rc;
	r.value = it->value;
	r.len = it->len;
	r.stat = it->has_stat ? &it->st : NULL;
	r.count = it->count;
	r.names = it->names;
	if (rq->kind == ZK_OP_MULTI) {
		struct zk_multi_result *mr =
		    xcalloc((size_t)(rq->mcount ? rq->mcount : 1), sizeof(*mr));
		int i, sent = rq->mres != NULL && it->rc != ZBADARGUMENTS;

		for (i = 0; i < rq->mcount; i++) {
			/* results are the server's only if the request was sent
			 * and answered: else every op carries the overall rc */
			mr[i].rc =
			    sent && (it->rc == ZOK || it->rc < ZAPIERROR || it->rc > ZSYSTEMERROR)
				? rq->mres[i].err
				: it->rc;
			if (mr[i].rc == ZOK && rq->mops[i].type != ZOO_DELETE_OP &&
			    rq->mops[i].type != ZOO_SETDATA_OP && rq->mops[i].type != ZOO_CHECK_OP)
				mr[i].path = rq->mbufs[i];
		}
		r.mcount = rq->mcount;
		r.mres = mr;
		call_finish(zk, c, &r);
		rq_free(rq);
		free(mr);
		return;
	}
	if (rq->kind == ZK_OP_SET && it->rc == ZBADVERSION && c->resent && c->version >= 0) {
		/* Sent again after a lost connection: the first try may have
		 * landed and moved the version. Ours if the data is ours. */
		rq_free(rq);
		rq_send(zk, c, NULL, ZK_OP_GET, 2, c->path, NULL, 0, 0, 0, NULL, NULL, NULL);
		return;
	}
	if (rq->kind == ZK_OP_GET && rq->step == 2) {
		if (it->rc == ZOK && it->len == c->len &&
		    (c->len == 0 || memcmp(it->value, c->data, (size_t)c->len) == 0)) {
			log_debug("zookeeper: set %s landed before the connection was lost",
				  c->path);
		} else if (it->rc == ZOK) {
			r.rc = ZBADVERSION;
			r.stat = NULL;
		}
		r.value = NULL;
		r.len = 0;
	}
	rq_free(rq);
	call_finish(zk, c, &r);
}

/* ---- calls waiting for the connection (zk_set_retry) ---------------------- */

static void
park(struct zk *zk, struct zk_call *c)
{
	c->outstanding = 0;
	c->final_rc = 1;
	c->attempts = 0;
	c->pnext = NULL;
	if (zk->ptail != NULL)
		zk->ptail->pnext = c;
	else
		zk->phead = c;
	zk->ptail = c;
}

static void multi_send(struct zk *zk, struct zk_call *c, const struct zk_multi_op *ops, int count);

/* Send a parked call again, as it was first sent. */
static void
resend(struct zk *zk, struct zk_call *c)
{
	c->gen = zk->gen;
	switch (c->kind) {
	case ZK_OP_SET:
		c->resent = 1;
		rq_send(zk, c, NULL, ZK_OP_SET, 0, c->path, c->data, c->len, 0, c->version, NULL,
			NULL, NULL);
		break;
	case ZK_OP_DELETE:
		c->resent = 1;
		if (c->recursive)
			rdel_start(zk, rdel_new(c, NULL, c->path, c->version));
		else
			rq_send(zk, c, NULL, ZK_OP_DELETE, 0, c->path, NULL, 0, 0, c->version, NULL,
				NULL, NULL);
		break;
	case ZK_OP_MULTI:
		c->resent = 1;
		multi_send(zk, c, c->mops, c->mcount);
		break;
	default: /* reads without a watch */
		rq_send(zk, c, NULL, c->kind, 0, c->path, NULL, 0, 0, 0, NULL, NULL, NULL);
		break;
	}
}

/* The connection is back: send the parked calls again, in their order. */
static void
flush_parked(struct zk *zk)
{
	struct zk_call *c = zk->phead, *next;
	int n = 0;

	zk->phead = zk->ptail = NULL;
	for (; c != NULL; c = next) {
		next = c->pnext;
		c->pnext = NULL;
		if (c->under && c->under_gen != zk->gen) {
			/* its locks went with the session it was made in */
			c->retry = 0;
			log_info("zookeeper: %s under a lock of an ended session not sent again",
				 c->path);
			call_finish_rc(zk, c, ZK_LOCK_LOST);
			continue;
		}
		resend(zk, c);
		n++;
	}
	zk->counters.resent += (unsigned long long)n;
	if (n > 0)
		log_info("zookeeper: %d operation%s interrupted by the lost connection sent again",
			 n, n == 1 ? "" : "s");
}

/* The session is gone (or zk_free): parked calls end with rc. */
static void
fail_parked(struct zk *zk, int rc)
{
	struct zk_call *c = zk->phead, *next;

	zk->phead = zk->ptail = NULL;
	for (; c != NULL; c = next) {
		next = c->pnext;
		c->pnext = NULL;
		c->retry = 0;
		call_finish_rc(zk, c, c->under && rc == ZSESSIONEXPIRED ? ZK_LOCK_LOST : rc);
	}
}

static void zk_emit(struct zk *zk, enum zk_event ev);
static int zk_start_handle(struct zk *zk);

/* Every catch-up of the round succeeded: the C client may drop the point
 * it held (unless a connection was lost since we read it). */
static void
catchup_check(struct zk *zk)
{
	if (zk->cu_announcing || zk->cu_done || zk->cu_waiting > 0 || zk->zh == NULL || zk->closing)
		return;
	zk->cu_done = 1;
	if (zk->cu_failed)
		return; /* held: the next reconnection catches up from it */
	zoo_resync_done(zk->zh, zk->cu_losses);
	log_debug("zookeeper: caught up from zxid 0x%llx", (unsigned long long)zk->cu_zxid);
}

/*
 * On expiry the C client fails every request of the session, and its
 * completion thread hands them to us at once; give it a moment to, since
 * what is still queued for that thread when the handle is closed is lost
 * inside the C client (completed by zk_close_handle, but leaked there).
 */
static void
wait_failed(struct zk *zk)
{
	double deadline = zk_now() + 1;
	struct zk_rq *rq;
	int all;

	for (;;) {
		all = 1;
		pthread_mutex_lock(&zk->qmu);
		for (rq = zk->rqs; rq != NULL && all; rq = rq->next)
			all = rq->gen != zk->gen || rq->queued;
		pthread_mutex_unlock(&zk->qmu);
		if (all || zk_now() > deadline)
			return;
		usleep(1000);
	}
}

/*
 * Close the current handle. Requests it never completed get rc: the
 * multi-threaded C client drops the completions still queued for its
 * completion thread when that thread stops.
 */
static void
zk_close_handle(struct zk *zk, int rc)
{
	zhandle_t *zh = zk->zh;
	struct zk_item *it;
	struct zk_rq *rq;

	if (zh == NULL)
		return;
	if (rc == ZSESSIONEXPIRED)
		wait_failed(zk);
	zk->zh = NULL;
	zk->connected = 0;
	/* Joins the C client's threads: every item of this handle is queued
	 * once it returns, so the marker below comes after all of them. */
	zookeeper_close(zh);
	for (rq = zk->rqs; rq != NULL; rq = rq->next) {
		if (rq->gen == zk->gen && !rq->queued) {
			it = item_new(IT_RESULT, rc);
			it->rq = rq;
			enqueue(zk, it);
		}
	}
	it = item_new(IT_RELEASE, ZOK);
	it->gen = zk->gen;
	enqueue(zk, it);
	zk->gen++;
}

static void
zk_restart_cb(evutil_socket_t fd, short what, void *arg)
{
	struct zk *zk = arg;

	if (zk->zh == NULL && !zk->closing)
		zk_start_handle(zk);
}

/* Start a fresh session now; on failure retry with back-off. */

/*
 * The C client leaves its host re-resolution delay at 0, which means
 * "resolve unconditionally": it calls getaddrinfo() on every turn of its I/O
 * thread (measured: most of a busy launcher's CPU). Re-resolve at most once
 * a minute while connected; a reconnect always resolves afresh.
 */
static void
zk_tune_handle(zhandle_t *zh)
{
	zoo_set_servers_resolution_delay(zh, 60 * 1000);
}

static int
zk_start_handle(struct zk *zk)
{
	struct timeval tv;
	zhandle_t *zh;
	int ms = (int)(zk->timeout * 1000);

	zk->handle_connected = 0;
	if (zk->certstr != NULL)
		zh = zookeeper_init_ssl(zk->hosts, zk->certstr, c_session_watcher, ms, NULL, zk,
					ZOO_NO_LOG_CLIENTENV);
	else
		zh = zookeeper_init(zk->hosts, c_session_watcher, ms, NULL, zk,
				    ZOO_NO_LOG_CLIENTENV);
	if (zh != NULL)
		zk_tune_handle(zh);
	if (zh == NULL) {
		log_warn("zookeeper: cannot start a session with %s: %s; retrying in %.0f s",
			 zk->hosts, strerror(errno), zk->restart_delay);
		tv = zk_tv_of(zk->restart_delay);
		evtimer_add(zk->restart_ev, &tv);
		zk->restart_delay *= 2;
		if (zk->restart_delay > ZK_RESTART_MAX)
			zk->restart_delay = ZK_RESTART_MAX;
		return -1;
	}
	if (zk->log_slot >= 0)
		zoo_set_log_callback(zh, slot_fns[zk->log_slot]);
	zk->zh = zh;
	return 0;
}

/* The outage just ended, for the connection's log line: "" when there was
 * none (or nothing failed in it). */
static void
outage_summary(struct zk *zk, char *buf, size_t len)
{
	unsigned long long errs = atomic_load(&zk->conn_errors) - zk->errors_at_loss;

	buf[0] = '\0';
	if (zk->away_since > 0)
		snprintf(buf, len, " (away %.1f s, %llu connection error%s)",
			 zk_now() - zk->away_since, errs, errs == 1 ? "" : "s");
	else if (errs > 0)
		snprintf(buf, len, " (after %llu connection error%s)", errs, errs == 1 ? "" : "s");
	zk->away_since = 0;
	zk->errors_at_loss = atomic_load(&zk->conn_errors);
	atomic_store(&zk->err_logged, 0);
}

static void
zk_session_item(struct zk *zk, struct zk_item *it)
{
	const clientid_t *cid;
	char away[96];

	if (it->zh != zk->zh || zk->closing)
		return; /* an event of a handle already closed */
	if (it->state == ZOO_CONNECTED_STATE || it->state == ZOO_READONLY_STATE) {
		if (zk->connected)
			return;
		zk->connected = 1;
		zk->tls_reported = 0;
		zk->restart_delay = ZK_RESTART_MIN;
		cid = zoo_client_id(zk->zh);
		zk->session_id = cid != NULL ? cid->client_id : 0;
		outage_summary(zk, away, sizeof(away));
		trees_send(zk);
		flush_parked(zk);
		if (zk->handle_connected) {
			log_info("zookeeper: reconnected, session 0x%llx%s",
				 (unsigned long long)zk->session_id, away);
			/* a round of catch-ups (zk_catchup_begin) from the
			 * point the C client held at the first lost
			 * connection not caught up from yet */
			zk->cu_round++;
			zk->cu_zxid = zoo_catchup_zxid(zk->zh, &zk->cu_losses);
			zk->cu_waiting = zk->cu_failed = zk->cu_done = 0;
			zk->cu_announcing = 1;
			log_debug("zookeeper: catching up from zxid 0x%llx (%lld connections lost)",
				  (unsigned long long)zk->cu_zxid, (long long)zk->cu_losses);
			zk_emit(zk, ZK_EV_RECONNECTED);
			zk->cu_announcing = 0;
			catchup_check(zk);
		} else {
			zk->handle_connected = 1;
			zk->cu_round++; /* a new session loads everything */
			zk->cu_done = 1;
			log_info("zookeeper: connected, session 0x%llx%s",
				 (unsigned long long)zk->session_id, away);
			zk_emit(zk, ZK_EV_CONNECTED);
		}
	} else if (it->state == ZOO_CONNECTING_STATE || it->state == ZOO_ASSOCIATING_STATE) {
		if (!zk->connected)
			return;
		zk->connected = 0;
		zk->counters.losses++;
		zk->away_since = zk_now();
		log_warn("zookeeper: connection lost, session 0x%llx suspended",
			 (unsigned long long)zk->session_id);
		zk_emit(zk, ZK_EV_SUSPENDED);
	} else if (it->state == ZOO_EXPIRED_SESSION_STATE) {
		zk->counters.expirations++;
		log_warn("zookeeper: session 0x%llx expired; starting a new one",
			 (unsigned long long)zk->session_id);
		zk->cu_round++; /* a new session loads everything */
		zk->cu_done = 1;
		zk_close_handle(zk, ZSESSIONEXPIRED);
		zk_start_handle(zk);
		fail_parked(zk, ZSESSIONEXPIRED);
		zk_emit(zk, ZK_EV_EXPIRED);
	} else if (it->state == ZOO_AUTH_FAILED_STATE) {
		struct timeval tv = zk_tv_of(zk->restart_delay);

		log_warn("zookeeper: authentication failed; retrying in %.0f s", zk->restart_delay);
		zk_close_handle(zk, ZAUTHFAILED);
		evtimer_add(zk->restart_ev, &tv);
		zk->restart_delay *= 2;
		if (zk->restart_delay > ZK_RESTART_MAX)
			zk->restart_delay = ZK_RESTART_MAX;
		zk_emit(zk, ZK_EV_AUTH_FAILED);
	}
}

static void
zk_process(struct zk *zk, struct zk_item *it)
{
	struct zk_watch *w, *next;
	struct zk_tree *t;

	switch (it->kind) {
	case IT_RESULT:
		rq_result(zk, it);
		break;
	case IT_WATCH:
		w = it->w;
		if (w->persistent) {
			if (w->gen == zk->gen && w->cb != NULL && !zk->closing)
				w->cb(it->type, it->str, w->arg);
			break;
		}
		if (w->gen == zk->gen && w->cb != NULL && !zk->closing) {
			zk_watch_cb cb = w->cb;
			void *arg = w->arg;

			watch_put(zk, w);
			cb(it->type, it->str, arg);
		} else {
			watch_put(zk, w);
		}
		break;
	case IT_SESSION:
		zk_session_item(zk, it);
		break;
	case IT_TLS:
		if (!zk->closing && !zk->connected && !zk->tls_reported) {
			const char *why = strstr(it->str, "): ");

			zk->tls_reported = 1;
			log_warn("zookeeper: TLS handshake with %s failed: %s (the server is "
				 "unreachable, or it or we refused the other's certificate)",
				 zk->hosts, why != NULL ? why + 3 : it->str);
			zk_emit(zk, ZK_EV_AUTH_FAILED);
		}
		break;
	case IT_RELEASE:
		for (t = zk->trees; t != NULL; t = t->next) {
			if (t->w != NULL && t->w->gen == it->gen)
				t->w = NULL;
		}
		for (w = zk->watches; w != NULL; w = next) {
			next = w->next;
			if (w->gen == it->gen)
				watch_free(zk, w);
		}
		break;
	}
}

static struct zk_item *
queue_take(struct zk *zk)
{
	struct zk_item *it;

	pthread_mutex_lock(&zk->qmu);
	it = zk->qhead;
	zk->qhead = zk->qtail = NULL;
	pthread_mutex_unlock(&zk->qmu);
	return it;
}

static void zk_destroy(struct zk *zk);

static void
zk_on_wake(evutil_socket_t fd, short what, void *arg)
{
	struct zk *zk = arg;
	struct zk_item *it;
	uint64_t v;

	if (read(fd, &v, sizeof(v)) < 0) {
		/* EAGAIN: woken for items already taken */
	}
	zk->dispatching++;
	zk->batch = queue_take(zk);
	while ((it = zk->batch) != NULL && !zk->free_requested) {
		zk->batch = it->next;
		zk_process(zk, it);
		item_free(it);
	}
	zk->dispatching--;
	if (zk->free_requested && zk->dispatching == 0)
		zk_destroy(zk);
}

static void
zk_emit(struct zk *zk, enum zk_event ev)
{
	struct zk_listener *l;

	for (l = zk->listeners; l != NULL && !zk->free_requested; l = zk->liter) {
		zk->liter = l->next;
		l->cb(zk, ev, l->arg);
	}
	zk->liter = NULL;
	if (zk->session_cb != NULL && !zk->free_requested)
		zk->session_cb(zk, ev, zk->session_arg);
}

/* ---- public: session ------------------------------------------------------- */

static int
passwd_none(char *buf, int size, int rw, void *u)
{
	return 0;
}

/* Load the three TLS files as the C client will, to report problems now
 * rather than as endless failed handshakes. */
static int
tls_check(const struct zk_options *opt, char *err, size_t errlen)
{
	const char *files[3] = {opt->tls_ca, opt->tls_cert, opt->tls_key};
	const char *what[3] = {"CA", "certificate", "key"};
	unsigned long e;
	SSL_CTX *ctx;
	FILE *f;
	int i, ok = 0;

	for (i = 0; i < 3; i++) {
		if (strchr(files[i], ',') != NULL) {
			snprintf(err, errlen, "zookeeper-tls %s path %s contains a comma", what[i],
				 files[i]);
			return -1;
		}
		if ((f = fopen(files[i], "r")) == NULL) {
			snprintf(err, errlen, "zookeeper-tls %s %s: %s", what[i], files[i],
				 strerror(errno));
			return -1;
		}
		fclose(f);
	}
	ERR_clear_error();
	if ((ctx = SSL_CTX_new(TLS_client_method())) == NULL) {
		snprintf(err, errlen, "cannot create a TLS context");
		return -1;
	}
	SSL_CTX_set_default_passwd_cb(ctx, passwd_none);
	if (SSL_CTX_load_verify_locations(ctx, opt->tls_ca, NULL) != 1)
		i = 0;
	else if (SSL_CTX_use_certificate_chain_file(ctx, opt->tls_cert) != 1)
		i = 1;
	else if (SSL_CTX_use_PrivateKey_file(ctx, opt->tls_key, SSL_FILETYPE_PEM) != 1)
		i = 2;
	else if (SSL_CTX_check_private_key(ctx) != 1)
		i = 3;
	else
		ok = 1;
	if (!ok) {
		char ebuf[256];

		e = ERR_peek_last_error();
		ERR_error_string_n(e, ebuf, sizeof(ebuf));
		if (i == 2 && ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH)
			i = 3;
		if (i < 3)
			snprintf(err, errlen, "zookeeper-tls %s %s: not usable (%s)", what[i],
				 files[i], ebuf);
		else
			snprintf(err, errlen, "zookeeper-tls key %s does not match certificate %s",
				 opt->tls_key, opt->tls_cert);
	}
	ERR_clear_error();
	SSL_CTX_free(ctx);
	return ok ? 0 : -1;
}

struct zk *
zk_new(struct event_base *base, const struct zk_options *opt, zk_session_cb session_cb, void *arg,
       char *err, size_t errlen)
{
	struct zk *zk;
	int ntls;
	size_t n;

	if (errlen > 0)
		err[0] = '\0';
	if (base == NULL || opt == NULL || opt->hosts == NULL || opt->hosts[0] == '\0' ||
	    opt->hosts[0] == '/') {
		snprintf(err, errlen, "zookeeper: no hosts given");
		return NULL;
	}
	ntls = (opt->tls_ca != NULL) + (opt->tls_cert != NULL) + (opt->tls_key != NULL);
	if (ntls != 0 && ntls != 3) {
		snprintf(err, errlen, "zookeeper-tls needs ca, cert and key together");
		return NULL;
	}
	if (ntls == 3 && tls_check(opt, err, errlen) != 0)
		return NULL;

	pthread_once(&stream_once, stream_init);
	zoo_set_debug_level(log_get_level() >= LOG_LVL_DEBUG ? ZOO_LOG_LEVEL_DEBUG
							     : ZOO_LOG_LEVEL_ERROR);

	zk = xcalloc(1, sizeof(*zk));
	zk->log_slot = -1;
	zk->efd = -1;
	zk->base = base;
	zk->hosts = xstrdup(opt->hosts);
	zk->timeout = opt->timeout > 0 ? opt->timeout : 10.0;
	zk->session_cb = session_cb;
	zk->session_arg = arg;
	zk->restart_delay = ZK_RESTART_MIN;
	zk->cu_done = 1; /* no reconnection being caught up from */
	if (ntls == 3) {
		n = strlen(opt->tls_ca) + strlen(opt->tls_cert) + strlen(opt->tls_key) + 3;
		zk->certstr = xmalloc(n);
		snprintf(zk->certstr, n, "%s,%s,%s", opt->tls_ca, opt->tls_cert, opt->tls_key);
	}
	pthread_mutex_init(&zk->qmu, NULL);
	zk->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (zk->efd < 0) {
		snprintf(err, errlen, "zookeeper: eventfd: %s", strerror(errno));
		goto fail;
	}
	zk->wake_ev = event_new(base, zk->efd, EV_READ | EV_PERSIST, zk_on_wake, zk);
	zk->restart_ev = evtimer_new(base, zk_restart_cb, zk);
	if (zk->wake_ev == NULL || zk->restart_ev == NULL || event_add(zk->wake_ev, NULL) != 0) {
		snprintf(err, errlen, "zookeeper: cannot register with the event loop");
		goto fail;
	}
	zk->log_slot = slot_take(zk);
	if (zk->certstr != NULL)
		zk->zh =
		    zookeeper_init_ssl(zk->hosts, zk->certstr, c_session_watcher,
				       (int)(zk->timeout * 1000), NULL, zk, ZOO_NO_LOG_CLIENTENV);
	else
		zk->zh = zookeeper_init(zk->hosts, c_session_watcher, (int)(zk->timeout * 1000),
					NULL, zk, ZOO_NO_LOG_CLIENTENV);
	if (zk->zh == NULL) {
		snprintf(err, errlen, "zookeeper: bad hosts %s: %s", zk->hosts,
			 errno == EINVAL ? "cannot parse or resolve" : strerror(errno));
		goto fail;
	}
	zk_tune_handle(zk->zh);
	if (zk->log_slot >= 0)
		zoo_set_log_callback(zk->zh, slot_fns[zk->log_slot]);
	return zk;
fail:
	zk_destroy(zk);
	return NULL;
}

/*
 * Process queue items until no request is outstanding, for at most timeout
 * seconds, without the loop. zk_destroy lets requests in flight finish
 * before it closes the handle (a delete of a lock contender, say, should
 * happen rather than be cut off).
 */
static void
drain(struct zk *zk, double timeout)
{
	double deadline = zk_now() + timeout;
	struct pollfd pfd = {.fd = zk->efd, .events = POLLIN};
	struct zk_item *it;
	uint64_t v;
	int ms;

	for (;;) {
		if ((it = zk->batch) == NULL && (it = zk->batch = queue_take(zk)) == NULL) {
			if (zk->rqs == NULL || (ms = (int)((deadline - zk_now()) * 1000)) <= 0)
				break;
			if (poll(&pfd, 1, ms) > 0 && read(zk->efd, &v, sizeof(v)) < 0) {
				/* EAGAIN: taken already */
			}
			continue;
		}
		zk->batch = it->next;
		zk_process(zk, it);
		item_free(it);
	}
}

/* Tear down: let requests in flight finish, close the handle, deliver what
 * must be delivered, free. */
static void
zk_destroy(struct zk *zk)
{
	zk->closing = 1;
	fail_parked(zk, ZCLOSING);
	/* Disconnected, requests end with the next failed connection attempt
	 * (milliseconds for a refused one): wait a little for that too, since
	 * the C client loses those still queued when it closes (mt_adaptor.c's
	 * process_async() is 0, so destroy() never runs its completion queue). */
	if (zk->zh != NULL)
		drain(zk, zk->connected ? zk->timeout : (zk->timeout < 1 ? zk->timeout : 1));
	zk_close_handle(zk, ZCLOSING);
	drain(zk, 0);
	while (zk->watches != NULL)
		watch_free(zk, zk->watches);
	while (zk->trees != NULL) {
		struct zk_tree *t = zk->trees;

		zk->trees = t->next;
		free(t->path);
		free(t);
	}
	while (zk->calls != NULL)
		call_free(zk, zk->calls);
	slot_release(zk->log_slot);
	if (zk->wake_ev != NULL)
		event_free(zk->wake_ev);
	if (zk->restart_ev != NULL)
		event_free(zk->restart_ev);
	if (zk->efd >= 0)
		close(zk->efd);
	pthread_mutex_destroy(&zk->qmu);
	free(zk->hosts);
	free(zk->certstr);
	free(zk);
}

void
zk_free(struct zk *zk)
{
	if (zk == NULL || zk->free_requested)
		return;
	zk->free_requested = 1;
	if (zk->dispatching == 0)
		zk_destroy(zk);
}

int
zk_is_connected(const struct zk *zk)
{
	return zk != NULL && zk->connected;
}

int
zk_client_connected(const struct zk *zk)
{
	return zk != NULL && zk->zh != NULL && zoo_state(zk->zh) == ZOO_CONNECTED_STATE;
}

int64_t
zk_session_id(const struct zk *zk)
{
	return zk != NULL ? zk->session_id : 0;
}

const clientid_t *
zk_client_id(const struct zk *zk)
{
	return zk != NULL && zk->zh != NULL ? zoo_client_id(zk->zh) : NULL;
}

int
zk_watch_counts(const struct zk *zk, int counts[5])
{
	if (zk == NULL || zk->zh == NULL) {
		memset(counts, 0, 5 * sizeof(int));
		return ZINVALIDSTATE;
	}
	return zoo_watch_counts(zk->zh, counts);
}

void
zk_counters(const struct zk *zk, struct zk_counters *out)
{
	memset(out, 0, sizeof(*out));
	if (zk == NULL)
		return;
	*out = zk->counters;
	out->connect_errors = atomic_load(&((struct zk *)zk)->conn_errors);
}

int
zk_pending(const struct zk *zk)
{
	return zk != NULL ? zk->ncalls : 0;
}

const char *
zk_strerror(int rc)
{
	switch (rc) {
	case ZK_LOCK_BUSY:
		return "lock is held by another contender";
	case ZK_LOCK_TIMEOUT:
		return "timed out waiting for the lock";
	case ZK_LOCK_LOST:
		return "not sent: the lock it was made under is no longer held";
	default:
		return zerror(rc);
	}
}

unsigned
zk_session_gen(const struct zk *zk)
{
	return zk->gen;
}

int
zk_closing(const struct zk *zk)
{
	return zk->closing;
}

struct event_base *
zk_base(const struct zk *zk)
{
	return zk->base;
}

double
zk_timeout(const struct zk *zk)
{
	return zk->timeout;
}

void
zk_cancel(struct zk *zk, const void *arg)
{
	struct zk_call *c;
	struct zk_watch *w;
	struct zk_tree **pt;

	if (zk == NULL || arg == NULL)
		return;
	for (c = zk->calls; c != NULL; c = c->next) {
		if (c->owner == arg) {
			c->cb = NULL;
		}
	}
	for (w = zk->watches; w != NULL; w = w->next) {
		if (w->owner == arg)
			w->cb = NULL;
	}
	for (pt = &zk->trees; *pt != NULL;) {
		struct zk_tree *t = *pt;

		if (t->arg == arg) {
			*pt = t->next;
			free(t->path);
			free(t);
		} else {
			pt = &t->next;
		}
	}
}

/* One SetWatches request of call c (zk_catch_up). */
static void
catchup_send(struct zk *zk, struct zk_call *c, int64_t zxid, const char *const *paths, int n)
{
	struct zk_rq *rq = rq_new(zk);
	int rc;

	rq->call = c;
	rq->kind = ZK_OP_CATCHUP;
	rq->path = xstrdup(c->path);
	c->outstanding++;
	if (zk->closing)
		rc = ZCLOSING;
	else if (zk->zh == NULL)
		rc = ZCONNECTIONLOSS;
	else
		rc = zoo_aset_data_watches(zk->zh, zxid, paths, n, c_void_done, rq);
	if (rc != ZOK) {
		struct zk_item *it = item_new(IT_RESULT, rc);

		it->rq = rq;
		enqueue(zk, it);
	}
}

void
zk_catch_up(struct zk *zk, int64_t zxid, const char *const *paths, int n, zk_result_cb cb,
	    void *arg, const void *owner)
{
	struct zk_call *c = call_new(zk, ZK_OP_CATCHUP, "/");
	size_t bytes, len;
	int i = 0, j;

	c->cb = cb;
	c->arg = arg;
	c->owner = owner;
	c->final_rc = ZOK;
	do {
		/* a path is sent as a 4-byte length and its bytes */
		for (j = i, bytes = 0; j < n; j++) {
			len = strlen(paths[j]) + 4;
			if (j > i && bytes + len > ZK_CATCHUP_BYTES)
				break;
			bytes += len;
		}
		catchup_send(zk, c, zxid, paths + i, j - i);
		i = j;
	} while (i < n);
}

int64_t
zk_catchup_begin(struct zk *zk, unsigned *round)
{
	*round = zk->cu_round;
	if (zk->cu_done)
		return 0; /* not announcing a reconnection: from nothing */
	zk->cu_waiting++;
	return zk->cu_zxid;
}

void
zk_catchup_end(struct zk *zk, unsigned round, int ok)
{
	if (round != zk->cu_round || zk->cu_done)
		return; /* a round that is over */
	if (!ok)
		zk->cu_failed = 1;
	zk->cu_waiting--;
	catchup_check(zk);
}

void
zk_watch_tree(struct zk *zk, const char *path, zk_watch_cb cb, void *arg)
{
	struct zk_tree *t;

	if (zk == NULL || cb == NULL || !path_ok(path, 0))
		return;
	t = xcalloc(1, sizeof(*t));
	t->path = xstrdup(path);
	t->cb = cb;
	t->arg = arg;
	t->next = zk->trees;
	zk->trees = t;
	tree_send(zk, t);
}

void
zk_listener_add(struct zk *zk, struct zk_listener *l, zk_session_cb cb, void *arg)
{
	l->cb = cb;
	l->arg = arg;
	l->prev = NULL;
	l->next = zk->listeners;
	if (zk->listeners != NULL)
		zk->listeners->prev = l;
	zk->listeners = l;
}

void
zk_listener_remove(struct zk *zk, struct zk_listener *l)
{
	if (zk->liter == l)
		zk->liter = l->next;
	if (l->prev != NULL)
		l->prev->next = l->next;
	else if (zk->listeners == l)
		zk->listeners = l->next;
	if (l->next != NULL)
		l->next->prev = l->prev;
	l->prev = l->next = NULL;
}

/* ---- public: operations ---------------------------------------------------- */

/*
 * A znode path as ZooKeeper accepts it (the C client checks only the full
 * path after prepending the chroot, so "x" would become "/chrootx"):
 * absolute, no empty, "." or ".." component, no trailing slash except for
 * the root and a sequential create's prefix.
 */
static int
path_ok(const char *path, int sequence)
{
	const char *p, *comp;
	size_t n;

	if (path == NULL || path[0] != '/')
		return 0;
	if (path[1] == '\0')
		return 1;
	for (comp = p = path + 1;; p++) {
		if (*p == '/' || *p == '\0') {
			n = (size_t)(p - comp);
			if (n == 0 && !(*p == '\0' && sequence))
				return 0;
			if ((n == 1 && comp[0] == '.') ||
			    (n == 2 && comp[0] == '.' && comp[1] == '.'))
				return 0;
			if (*p == '\0')
				return 1;
			comp = p + 1;
		} else if ((unsigned char)*p < 0x20 || *p == 0x7f) {
			return 0;
		}
	}
}

/* Send call c's multi: the C client writes results and created paths into
 * the request at completion, so ops, paths, data and buffers live in it. */
static void
multi_send(struct zk *zk, struct zk_call *c, const struct zk_multi_op *ops, int count)
{
	struct zk_rq *rq;
	zhandle_t *zh = zk->zh;
	int i, rc = ZOK;

	rq = rq_new(zk);
	rq->call = c;
	rq->kind = ZK_OP_MULTI;
	rq->path = xstrdup(c->path);
	rq->mcount = count;
	rq->mops = xcalloc((size_t)(count ? count : 1), sizeof(*rq->mops));
	rq->mres = xcalloc((size_t)(count ? count : 1), sizeof(*rq->mres));
	rq->mpaths = xcalloc((size_t)(count ? count : 1), sizeof(char *));
	rq->mdata = xcalloc((size_t)(count ? count : 1), sizeof(char *));
	rq->mbufs = xcalloc((size_t)(count ? count : 1), sizeof(char *));
	c->outstanding++;
	for (i = 0; i < count; i++) {
		const struct zk_multi_op *o = &ops[i];
		int len = o->data != NULL && o->len > 0 ? o->len : 0;

		if (!path_ok(o->path, o->type == ZK_MULTI_CREATE && (o->flags & ZOO_SEQUENCE)))
			rc = ZBADARGUMENTS;
		rq->mpaths[i] = xstrdup(o->path != NULL ? o->path : "");
		rq->mdata[i] = xmalloc((size_t)len + 1);
		if (len > 0)
			memcpy(rq->mdata[i], o->data, (size_t)len);
		switch (o->type) {
		case ZK_MULTI_CREATE:
			rq->mbufs[i] = xcalloc(1, 1024);
			zoo_create_op_init(&rq->mops[i], rq->mpaths[i], rq->mdata[i], len,
					   &ZOO_OPEN_ACL_UNSAFE, o->flags, rq->mbufs[i], 1024);
			break;
		case ZK_MULTI_DELETE:
			zoo_delete_op_init(&rq->mops[i], rq->mpaths[i], o->version);
			break;
		case ZK_MULTI_SET:
			zoo_set_op_init(&rq->mops[i], rq->mpaths[i], rq->mdata[i], len, o->version,
					NULL);
			break;
		case ZK_MULTI_CHECK:
			zoo_check_op_init(&rq->mops[i], rq->mpaths[i], o->version);
			break;
		default:
			rc = ZBADARGUMENTS;
		}
	}
	if (rc == ZOK) {
		if (zk->closing)
			rc = ZCLOSING;
		else if (zh == NULL)
			rc = ZCONNECTIONLOSS;
		else
			rc = zoo_amulti(zh, count, rq->mops, rq->mres, c_void_done, rq);
	}
	if (rc != ZOK) {
		struct zk_item *it = item_new(IT_RESULT, rc);

		it->rq = rq;
		enqueue(zk, it);
	}
}

static struct zk_call *
submit(struct zk *zk, const struct zk_req *req)
{
	struct zk_call *c = call_new(zk, req->kind, req->path);
	int i, bad = ZOK;

	c->cb = req->cb;
	c->arg = req->arg;
	c->owner = req->owner;
	c->always = req->always;
	c->final_rc = 1; /* not known yet */
	c->version = req->version;
	c->recursive = req->recursive;
	c->retry = req->retry;
	for (i = 0; i < req->nlocks; i++) {
		if (!zk_lock_held_in(req->locks[i], zk->gen)) {
			bad = ZK_LOCK_LOST;
			break;
		}
	}
	if (req->nlocks > 0) {
		c->under = 1;
		c->under_gen = zk->gen;
	}
	if (bad == ZOK &&
	    !path_ok(req->path, req->kind == ZK_OP_CREATE && (req->flags & ZOO_SEQUENCE)))
		bad = ZBADARGUMENTS;
	if (bad != ZOK) {
		/* reported on the loop, as every outcome */
		struct zk_item *it;
		struct zk_rq *rq = rq_new(zk);

		c->retry = 0;
		rq->call = c;
		rq->kind = ZK_OP_GET;
		rq->path = xstrdup("");
		c->outstanding++;
		it = item_new(IT_RESULT, bad);
		it->rq = rq;
		enqueue(zk, it);
		return c;
	}
	if (c->retry) {
		if (req->kind == ZK_OP_SET) {
			c->len = req->data != NULL && req->len > 0 ? req->len : 0;
			c->data = xmalloc((size_t)c->len + 1);
			if (c->len > 0)
				memcpy(c->data, req->data, (size_t)c->len);
		} else if (req->kind == ZK_OP_MULTI) {
			c->mcount = req->mcount;
			c->mops =
			    xcalloc((size_t)(req->mcount ? req->mcount : 1), sizeof(*c->mops));
			for (i = 0; i < req->mcount; i++) {
				const struct zk_multi_op *o = &req->mops[i];
				int len = o->data != NULL && o->len > 0 ? o->len : 0;
				char *d = xmalloc((size_t)len + 1);

				if (len > 0)
					memcpy(d, o->data, (size_t)len);
				c->mops[i] = *o;
				c->mops[i].path = xstrdup(o->path != NULL ? o->path : "");
				c->mops[i].data = d;
				c->mops[i].len = len;
			}
		}
		/* behind calls already waiting, or while disconnected: wait too
		 * (a call sent now could overtake one sent before it) */
		if (zk->phead != NULL || !zk->connected) {
			park(zk, c);
			return c;
		}
	}
	switch (req->kind) {
	case ZK_OP_CREATE:
		c->flags = req->flags;
		c->makepath = req->makepath;
		c->len = req->data != NULL && req->len > 0 ? req->len : 0;
		c->data = xmalloc((size_t)c->len + 1);
		if (c->len > 0)
			memcpy(c->data, req->data, (size_t)c->len);
		rq_send(zk, c, NULL, ZK_OP_CREATE, 0, req->path, c->data, c->len, c->flags, 0, NULL,
			NULL, NULL);
		break;
	case ZK_OP_DELETE:
		if (req->recursive)
			rdel_start(zk, rdel_new(c, NULL, req->path, req->version));
		else
			rq_send(zk, c, NULL, ZK_OP_DELETE, 0, req->path, NULL, 0, 0, req->version,
				NULL, NULL, NULL);
		break;
	case ZK_OP_MULTI:
		multi_send(zk, c, c->mops != NULL ? c->mops : req->mops, req->mcount);
		break;
	case ZK_OP_SET:
		rq_send(zk, c, NULL, ZK_OP_SET, 0, req->path, req->data,
			req->data != NULL && req->len > 0 ? req->len : 0, 0, req->version, NULL,
			NULL, NULL);
		break;
	default:
		zk->share_watch = req->watch != NULL && req->share_watch;
		rq_send(zk, c, NULL, req->kind, 0, req->path, NULL, 0, 0, 0, req->watch, req->warg,
			req->wowner);
		zk->share_watch = 0;
		break;
	}
	return c;
}

void
zk_submit(struct zk *zk, const struct zk_req *req)
{
	submit(zk, req);
}

/* What zk_set_retry() sends again: writes whose repetition is harmless
 * (set, delete, a multi without creates: its version checks or deletes
 * fail if it landed) and reads without a watch. */
static int
retryable(const struct zk_req *req)
{
	int i;

	switch (req->kind) {
	case ZK_OP_SET:
	case ZK_OP_DELETE:
		return 1;
	case ZK_OP_GET:
	case ZK_OP_EXISTS:
	case ZK_OP_CHILDREN:
		return req->watch == NULL;
	case ZK_OP_MULTI:
		for (i = 0; i < req->mcount; i++)
			if (req->mops[i].type == ZK_MULTI_CREATE)
				return 0;
		return 1;
	default:
		return 0;
	}
}

void
zk_set_retry(struct zk *zk, int on)
{
	zk->retry_mode = on;
}

/* Public forms: the call's callback is pub_dispatch with the call itself as
 * argument, and the owner is the caller's arg, as zk_cancel() promises. */
static struct zk_call *
pub_call(struct zk *zk, struct zk_req *req, enum zk_pub pub, void *arg)
{
	struct zk_call *c;

	req->cb = pub_dispatch;
	req->owner = arg;
	req->retry = zk->retry_mode && retryable(req);
	c = submit(zk, req);
	c->arg = c;
	c->pub = pub;
	c->parg = arg;
	return c;
}

void
zk_create(struct zk *zk, const char *path, const void *data, int len, int flags, int makepath,
	  zk_string_cb cb, void *arg)
{
	struct zk_req req = {.kind = ZK_OP_CREATE,
			     .path = path,
			     .data = data,
			     .len = len,
			     .flags = flags,
			     .makepath = makepath};

	pub_call(zk, &req, PUB_STRING, arg)->pcb.s = cb;
}

void
zk_get(struct zk *zk, const char *path, zk_watch_cb watch, void *warg, zk_data_cb cb, void *arg)
{
	struct zk_req req = {
	    .kind = ZK_OP_GET, .path = path, .watch = watch, .warg = warg, .wowner = warg};

	pub_call(zk, &req, PUB_DATA, arg)->pcb.d = cb;
}

void
zk_set(struct zk *zk, const char *path, const void *data, int len, int version, zk_stat_cb cb,
       void *arg)
{
	struct zk_req req = {
	    .kind = ZK_OP_SET, .path = path, .data = data, .len = len, .version = version};

	pub_call(zk, &req, PUB_STAT, arg)->pcb.st = cb;
}

void
zk_delete(struct zk *zk, const char *path, int version, int recursive, zk_void_cb cb, void *arg)
{
	struct zk_req req = {
	    .kind = ZK_OP_DELETE, .path = path, .version = version, .recursive = recursive};

	pub_call(zk, &req, PUB_VOID, arg)->pcb.v = cb;
}

void
zk_exists(struct zk *zk, const char *path, zk_watch_cb watch, void *warg, zk_stat_cb cb, void *arg)
{
	struct zk_req req = {
	    .kind = ZK_OP_EXISTS, .path = path, .watch = watch, .warg = warg, .wowner = warg};

	pub_call(zk, &req, PUB_STAT, arg)->pcb.st = cb;
}

void
zk_children(struct zk *zk, const char *path, zk_watch_cb watch, void *warg, zk_children_cb cb,
	    void *arg)
{
	struct zk_req req = {
	    .kind = ZK_OP_CHILDREN, .path = path, .watch = watch, .warg = warg, .wowner = warg};

	pub_call(zk, &req, PUB_CHILDREN, arg)->pcb.c = cb;
}

void
zk_multi(struct zk *zk, const struct zk_multi_op *ops, int count, zk_multi_cb cb, void *arg)
{
	/* the call's path is only reported; the ops carry their own */
	struct zk_req req = {.kind = ZK_OP_MULTI, .path = "/", .mops = ops, .mcount = count};

	pub_call(zk, &req, PUB_MULTI, arg)->pcb.m = cb;
}

void
zk_set_under(struct zk *zk, struct zk_lock *const *locks, int nlocks, const char *path,
	     const void *data, int len, int version, zk_stat_cb cb, void *arg)
{
	struct zk_req req = {.kind = ZK_OP_SET,
			     .path = path,
			     .data = data,
			     .len = len,
			     .version = version,
			     .locks = locks,
			     .nlocks = nlocks};

	pub_call(zk, &req, PUB_STAT, arg)->pcb.st = cb;
}

void
zk_delete_under(struct zk *zk, struct zk_lock *const *locks, int nlocks, const char *path,
		int version, int recursive, zk_void_cb cb, void *arg)
{
	struct zk_req req = {.kind = ZK_OP_DELETE,
			     .path = path,
			     .version = version,
			     .recursive = recursive,
			     .locks = locks,
			     .nlocks = nlocks};

	pub_call(zk, &req, PUB_VOID, arg)->pcb.v = cb;
}

void
zk_multi_under(struct zk *zk, struct zk_lock *const *locks, int nlocks,
	       const struct zk_multi_op *ops, int count, zk_multi_cb cb, void *arg)
{
	struct zk_req req = {.kind = ZK_OP_MULTI,
			     .path = "/",
			     .mops = ops,
			     .mcount = count,
			     .locks = locks,
			     .nlocks = nlocks};

	pub_call(zk, &req, PUB_MULTI, arg)->pcb.m = cb;
}

/* ---- for zk_sync.c (zk_private.h) ------------------------------------------ */

struct event_base *
zk_loop_base(const struct zk *zk)
{
	return zk->base;
}

const int *
zk_connected_flag(const struct zk *zk)
{
	return &zk->connected;
}

double
zk_session_timeout(const struct zk *zk)
{
	return zk->timeout;
}
