/*
 * The ZooKeeper client's operations on a libevent loop (zk.h): calls,
 * the C client requests made for them, their watches, and delivering a
 * call's result; the public operations (zk_get, zk_create, ...) and
 * zk_submit(). The rest of the client is split by duty (zk_private.h):
 * zk_bridge.c, zk_recipes.c, zk_retry.c and zk_session.c.
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

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include "lib/core/xalloc.h"

/* ---- calls, requests, watches ------------------------------------------- */

struct zk_call *
zk_call_new(struct zk *zk, enum zk_op_kind kind, const char *path)
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

void
zk_call_free(struct zk *zk, struct zk_call *c)
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

struct zk_watch *
zk_watch_new(struct zk *zk, zk_watch_cb cb, void *arg, const void *owner)
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

void
zk_watch_free(struct zk *zk, struct zk_watch *w)
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
void
zk_watch_put(struct zk *zk, struct zk_watch *w)
{
	if (--w->refs <= 0)
		zk_watch_free(zk, w);
}

struct zk_rq *
zk_rq_new(struct zk *zk)
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
void
zk_rq_send(struct zk *zk, struct zk_call *c, struct zk_rdel *rd, enum zk_op_kind kind, int step,
	   const char *path, const void *data, int len, int flags, int version, zk_watch_cb wcb,
	   void *warg, const void *wowner)
{
	struct zk_rq *rq = zk_rq_new(zk);
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
			rq->watch = zk_watch_new(zk, wcb, warg, wowner);
		switch (kind) {
		case ZK_OP_CREATE:
			/* create2: the reply carries the new znode's stat */
			rc =
			    zoo_acreate2(zh, path, data != NULL ? data : "", data != NULL ? len : 0,
					 &ZOO_OPEN_ACL_UNSAFE, flags, zk_c_string_stat_done, rq);
			break;
		case ZK_OP_GET:
			rc = zoo_awget(zh, path, rq->watch ? zk_c_path_watcher : NULL, rq->watch,
				       zk_c_data_done, rq);
			break;
		case ZK_OP_SET:
			rc = zoo_aset(zh, path, data != NULL ? data : "", data != NULL ? len : 0,
				      version, zk_c_stat_done, rq);
			break;
		case ZK_OP_DELETE:
			rc = zoo_adelete(zh, path, version, zk_c_void_done, rq);
			break;
		case ZK_OP_EXISTS:
			rc = zoo_awexists(zh, path, rq->watch ? zk_c_path_watcher : NULL, rq->watch,
					  zk_c_stat_done, rq);
			break;
		case ZK_OP_CHILDREN:
			rc = zoo_awget_children(zh, path, rq->watch ? zk_c_path_watcher : NULL,
						rq->watch, zk_c_strings_done, rq);
			break;
		default:
			rc = ZBADARGUMENTS;
			break;
		}
		if (rc == ZOK)
			zk_count_sent(zk, kind, 0);
	}
	if (rc != ZOK) {
		struct zk_item *it = zk_item_new(IT_RESULT, rc);

		it->rq = rq;
		zk_enqueue(zk, it);
	}
}

void
zk_count_sent(struct zk *zk, enum zk_op_kind kind, int nops)
{
	static const enum zk_op_count map[] = {
	    [ZK_OP_CREATE] = ZK_COUNT_CREATE,
	    [ZK_OP_GET] = ZK_COUNT_GET,
	    [ZK_OP_SET] = ZK_COUNT_SET,
	    [ZK_OP_DELETE] = ZK_COUNT_DELETE,
	    [ZK_OP_EXISTS] = ZK_COUNT_EXISTS,
	    [ZK_OP_CHILDREN] = ZK_COUNT_CHILDREN,
	    [ZK_OP_MULTI] = ZK_COUNT_MULTI,
	    [ZK_OP_WATCH] = ZK_COUNT_ADDWATCH,
	    [ZK_OP_CATCHUP] = ZK_COUNT_SETWATCHES,
	};

	if ((size_t)kind < sizeof(map) / sizeof(map[0]))
		zk->ops.sent[map[kind]]++;
	zk->ops.multi_ops += (unsigned long long)nops;
}

void
zk_op_counts(const struct zk *zk, struct zk_op_counts *out)
{
	memset(out, 0, sizeof(*out));
	if (zk != NULL)
		*out = zk->ops;
}

void
zk_op_counts_format(const struct zk_op_counts *c, char *buf, size_t size)
{
	snprintf(buf, size,
		 "create %llu get %llu set %llu delete %llu exists %llu children %llu "
		 "multi %llu multi-ops %llu addwatch %llu setwatches %llu ev-created %llu "
		 "ev-deleted %llu ev-changed %llu ev-child %llu ev-oneshot %llu",
		 c->sent[ZK_COUNT_CREATE], c->sent[ZK_COUNT_GET], c->sent[ZK_COUNT_SET],
		 c->sent[ZK_COUNT_DELETE], c->sent[ZK_COUNT_EXISTS], c->sent[ZK_COUNT_CHILDREN],
		 c->sent[ZK_COUNT_MULTI], c->multi_ops, c->sent[ZK_COUNT_ADDWATCH],
		 c->sent[ZK_COUNT_SETWATCHES], c->events[0], c->events[1], c->events[2],
		 c->events[3], c->oneshot);
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
	case PUB_CREATE:
		if (c->pcb.cr != NULL)
			c->pcb.cr(r->rc, r->rc == ZOK ? r->value : NULL, r->stat, c->parg);
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
		zk_park(zk, c);
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
	zk_call_free(zk, c);
}

void
zk_call_finish_rc(struct zk *zk, struct zk_call *c, int rc)
{
	struct zk_result r;

	memset(&r, 0, sizeof(r));
	r.rc = rc;
	call_finish(zk, c, &r);
}

/* ---- processing queue items on the loop ------------------------------------ */

void
zk_rq_result(struct zk *zk, struct zk_item *it)
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
		zk_tree_added(zk, rq, it->rc);
		rq_free(rq);
		return;
	}
	c->outstanding--;
	if (rq->watch != NULL) {
		/* ZooKeeper sets the watch on success only, and exists() also on
		 * ZNONODE; any other watch can never fire. */
		registered = it->rc == ZOK || (rq->kind == ZK_OP_EXISTS && it->rc == ZNONODE);
		if (!registered)
			zk_watch_put(zk, rq->watch);
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
		zk_rdel_result(zk, rq, it);
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
			zk_create_with_parents(zk, c);
			rq_free(rq);
			return;
		}
		c->final_rc = it->rc;
		free(c->created);
		c->created = it->str != NULL ? xstrdup(it->str) : NULL;
		c->has_cstat = it->has_stat;
		if (it->has_stat)
			c->cstat = it->st;
		if (c->outstanding > 0) { /* parents still to report */
			rq_free(rq);
			return;
		}
	finish_create:
		rq_free(rq);
		memset(&r, 0, sizeof(r));
		r.rc = c->final_rc;
		r.value = r.rc == ZOK ? c->created : NULL;
		r.stat = r.rc == ZOK && c->has_cstat ? &c->cstat : NULL;
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
			if (mr[i].rc == ZOK && it->rc == ZOK &&
			    rq->mops[i].type == ZOO_SETDATA_OP && rq->mbufs[i] != NULL) {
				const struct Stat *st = (const struct Stat *)(void *)rq->mbufs[i];
				mr[i].mzxid = st->mzxid;
				mr[i].version = st->version;
				mr[i].ctime_ms = st->ctime;
			}
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
		zk_rq_send(zk, c, NULL, ZK_OP_GET, 2, c->path, NULL, 0, 0, 0, NULL, NULL, NULL);
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

/* ---- public: operations ---------------------------------------------------- */

/*
 * A znode path as ZooKeeper accepts it (the C client checks only the full
 * path after prepending the chroot, so "x" would become "/chrootx"):
 * absolute, no empty, "." or ".." component, no trailing slash except for
 * the root and a sequential create's prefix.
 */
int
zk_path_ok(const char *path, int sequence)
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
void
zk_multi_send(struct zk *zk, struct zk_call *c, const struct zk_multi_op *ops, int count)
{
	struct zk_rq *rq;
	zhandle_t *zh = zk->zh;
	int i, rc = ZOK;

	rq = zk_rq_new(zk);
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

		if (!zk_path_ok(o->path, o->type == ZK_MULTI_CREATE && (o->flags & ZOO_SEQUENCE)))
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
			/* the znode's stat after the write lands here (the
			 * caller's cache applies its own write with it) */
			rq->mbufs[i] = xcalloc(1, sizeof(struct Stat));
			zoo_set_op_init(&rq->mops[i], rq->mpaths[i], rq->mdata[i], len, o->version,
					(struct Stat *)(void *)rq->mbufs[i]);
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
			rc = zoo_amulti(zh, count, rq->mops, rq->mres, zk_c_void_done, rq);
		if (rc == ZOK)
			zk_count_sent(zk, ZK_OP_MULTI, count);
	}
	if (rc != ZOK) {
		struct zk_item *it = zk_item_new(IT_RESULT, rc);

		it->rq = rq;
		zk_enqueue(zk, it);
	}
}

static struct zk_call *
submit(struct zk *zk, const struct zk_req *req)
{
	struct zk_call *c = zk_call_new(zk, req->kind, req->path);
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
	    !zk_path_ok(req->path, req->kind == ZK_OP_CREATE && (req->flags & ZOO_SEQUENCE)))
		bad = ZBADARGUMENTS;
	if (bad != ZOK) {
		/* reported on the loop, as every outcome */
		struct zk_item *it;
		struct zk_rq *rq = zk_rq_new(zk);

		c->retry = 0;
		rq->call = c;
		rq->kind = ZK_OP_GET;
		rq->path = xstrdup("");
		c->outstanding++;
		it = zk_item_new(IT_RESULT, bad);
		it->rq = rq;
		zk_enqueue(zk, it);
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
				c->mops[i].record = NULL; /* borrowed for the call only */
			}
		}
		/* behind calls already waiting, or while disconnected: wait too
		 * (a call sent now could overtake one sent before it) */
		if (zk->phead != NULL || !zk->connected) {
			zk_park(zk, c);
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
		zk_rq_send(zk, c, NULL, ZK_OP_CREATE, 0, req->path, c->data, c->len, c->flags, 0,
			   NULL, NULL, NULL);
		break;
	case ZK_OP_DELETE:
		if (req->recursive)
			zk_rdel_start(zk, zk_rdel_new(c, NULL, req->path, req->version));
		else
			zk_rq_send(zk, c, NULL, ZK_OP_DELETE, 0, req->path, NULL, 0, 0,
				   req->version, NULL, NULL, NULL);
		break;
	case ZK_OP_MULTI:
		zk_multi_send(zk, c, c->mops != NULL ? c->mops : req->mops, req->mcount);
		break;
	case ZK_OP_SET:
		zk_rq_send(zk, c, NULL, ZK_OP_SET, 0, req->path, req->data,
			   req->data != NULL && req->len > 0 ? req->len : 0, 0, req->version, NULL,
			   NULL, NULL);
		break;
	default:
		zk->share_watch = req->watch != NULL && req->share_watch;
		zk_rq_send(zk, c, NULL, req->kind, 0, req->path, NULL, 0, 0, 0, req->watch,
			   req->warg, req->wowner);
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

/* Public forms: the call's callback is pub_dispatch with the call itself as
 * argument, and the owner is the caller's arg, as zk_cancel() promises. */
static struct zk_call *
pub_call(struct zk *zk, struct zk_req *req, enum zk_pub pub, void *arg)
{
	struct zk_call *c;

	req->cb = pub_dispatch;
	req->owner = arg;
	req->retry = zk->retry_mode && zk_retryable(req);
	c = submit(zk, req);
	c->arg = c;
	c->pub = pub;
	c->parg = arg;
	return c;
}

/* The call of a create (zk_create, zk_create2): its pcb is the caller's. */
static struct zk_call *
create_call(struct zk *zk, const char *path, const void *data, int len, int flags, int makepath,
	    enum zk_pub pub, void *arg)
{
	struct zk_req req = {.kind = ZK_OP_CREATE,
			     .path = path,
			     .data = data,
			     .len = len,
			     .flags = flags,
			     .makepath = makepath};

	return pub_call(zk, &req, pub, arg);
}

void
zk_create(struct zk *zk, const char *path, const void *data, int len, int flags, int makepath,
	  zk_string_cb cb, void *arg)
{
	create_call(zk, path, data, len, flags, makepath, PUB_STRING, arg)->pcb.s = cb;
}

void
zk_create2(struct zk *zk, const char *path, const void *data, int len, int flags, int makepath,
	   zk_create_cb cb, void *arg)
{
	create_call(zk, path, data, len, flags, makepath, PUB_CREATE, arg)->pcb.cr = cb;
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
