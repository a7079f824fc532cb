/*
 * The ZooKeeper client's recipes: operations made of several C client
 * requests. A recursive delete (children first, then the znode), a create
 * with makepath (every missing parent, then the target, in one round trip),
 * the persistent recursive watches kept for the life of a zk
 * (zk_watch_tree) and the catch-up of those watches after a reconnection
 * in a kept session (zk_catch_up, zk_catchup_begin/end: SetWatches from
 * the zxid the C client held at the first lost connection).
 */
#include "lib/zk/zk_private.h"
#include "lib/core/log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include "lib/core/xalloc.h"

struct zk_rdel *
zk_rdel_new(struct zk_call *c, struct zk_rdel *parent, const char *path, int version)
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
		zk_call_finish_rc(zk, c, rc);
		return;
	}
	if (rc != ZOK && p->rc == ZOK)
		p->rc = rc;
	if (--p->pending == 0) {
		if (p->rc != ZOK)
			rdel_done(zk, p, p->rc);
		else
			zk_rq_send(zk, c, p, ZK_OP_DELETE, 1, p->path, NULL, 0, 0, p->version, NULL,
				   NULL, NULL);
	}
}

void
zk_rdel_start(struct zk *zk, struct zk_rdel *rd)
{
	zk_rq_send(zk, rd->call, rd, ZK_OP_CHILDREN, 0, rd->path, NULL, 0, 0, 0, NULL, NULL, NULL);
}

void
zk_rdel_result(struct zk *zk, struct zk_rq *rq, struct zk_item *it)
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
			zk_rq_send(zk, rd->call, rd, ZK_OP_DELETE, 1, rd->path, NULL, 0, 0,
				   rd->version, NULL, NULL, NULL);
		} else {
			rd->pending = it->count;
			rd->rc = ZOK;
			for (i = 0; i < it->count; i++) {
				n = strlen(rd->path) + strlen(it->names[i]) + 2;
				child = xmalloc(n);
				snprintf(child, n, "%s/%s",
					 strcmp(rd->path, "/") == 0 ? "" : rd->path, it->names[i]);
				zk_rdel_start(zk, zk_rdel_new(rd->call, rd, child, -1));
				free(child);
			}
		}
		return;
	}
	/* the znode itself deleted */
	if (it->rc == ZOK || it->rc == ZNONODE)
		rdel_done(zk, rd, ZOK);
	else if (it->rc == ZNOTEMPTY && ++rd->attempts < ZK_RDELETE_TRIES)
		zk_rdel_start(zk, rd); /* a child appeared meanwhile */
	else
		rdel_done(zk, rd, it->rc);
}

/* ---- create with makepath ------------------------------------------------ */

/* Send the creates of every missing parent and then of the target: a
 * session's requests are processed in order, so one round trip does. */
void
zk_create_with_parents(struct zk *zk, struct zk_call *c)
{
	char *p = xstrdup(c->path), *s;

	for (s = strchr(p + 1, '/'); s != NULL; s = strchr(s + 1, '/')) {
		*s = '\0';
		zk_rq_send(zk, c, NULL, ZK_OP_CREATE, 1, p, NULL, 0, 0, 0, NULL, NULL, NULL);
		*s = '/';
	}
	free(p);
	zk_rq_send(zk, c, NULL, ZK_OP_CREATE, 0, c->path, c->data, c->len, c->flags, 0, NULL, NULL,
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
		t->w = zk_watch_new(zk, t->cb, t->arg, t->arg);
		t->w->persistent = 1;
	}
	rq = zk_rq_new(zk);
	rq->kind = ZK_OP_WATCH;
	rq->path = xstrdup(t->path);
	rc = zoo_aadd_watch(zk->zh, t->path, ZOO_ADD_WATCH_PERSISTENT_RECURSIVE, zk_c_path_watcher,
			    t->w, zk_c_void_done, rq);
	if (rc == ZOK)
		zk_count_sent(zk, ZK_OP_WATCH, 0);
	if (rc != ZOK) {
		it = zk_item_new(IT_RESULT, rc);
		it->rq = rq;
		zk_enqueue(zk, it);
	}
}

void
zk_tree_added(struct zk *zk, struct zk_rq *rq, int rc)
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
void
zk_trees_send(struct zk *zk)
{
	struct zk_tree *t;

	for (t = zk->trees; t != NULL; t = t->next)
		tree_send(zk, t);
}

/* Every catch-up of the round succeeded: the C client may drop the point
 * it held (unless a connection was lost since we read it). */
void
zk_catchup_check(struct zk *zk)
{
	if (zk->cu_announcing || zk->cu_done || zk->cu_waiting > 0 || zk->zh == NULL || zk->closing)
		return;
	zk->cu_done = 1;
	if (zk->cu_failed)
		return; /* held: the next reconnection catches up from it */
	zoo_resync_done(zk->zh, zk->cu_losses);
	log_debug("zookeeper: caught up from zxid 0x%llx", (unsigned long long)zk->cu_zxid);
}

/* One SetWatches request of call c (zk_catch_up). */
static void
catchup_send(struct zk *zk, struct zk_call *c, int64_t zxid, const char *const *paths, int n)
{
	struct zk_rq *rq = zk_rq_new(zk);
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
		rc = zoo_aset_data_watches(zk->zh, zxid, paths, n, zk_c_void_done, rq);
	if (rc == ZOK)
		zk_count_sent(zk, ZK_OP_CATCHUP, 0);
	if (rc != ZOK) {
		struct zk_item *it = zk_item_new(IT_RESULT, rc);

		it->rq = rq;
		zk_enqueue(zk, it);
	}
}

void
zk_catch_up(struct zk *zk, int64_t zxid, const char *const *paths, int n, zk_result_cb cb,
	    void *arg, const void *owner)
{
	struct zk_call *c = zk_call_new(zk, ZK_OP_CATCHUP, "/");
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
	zk_catchup_check(zk);
}

void
zk_watch_tree(struct zk *zk, const char *path, zk_watch_cb cb, void *arg)
{
	struct zk_tree *t;

	if (zk == NULL || cb == NULL || !zk_path_ok(path, 0))
		return;
	t = xcalloc(1, sizeof(*t));
	t->path = xstrdup(path);
	t->cb = cb;
	t->arg = arg;
	t->next = zk->trees;
	zk->trees = t;
	tree_send(zk, t);
}
