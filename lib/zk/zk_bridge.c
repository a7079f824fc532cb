/*
 * The thread bridge of the ZooKeeper client (zk_private.h): the C client
 * (multi-threaded flavour) calls its completions and watchers on its own
 * threads; these copy what they were given into a struct zk_item and append
 * it to the zk's mutex-protected queue, waking the loop through an eventfd.
 * On the loop, zk_on_wake() takes the queue and hands each item to the
 * operations (results, watches) or the session (state changes); zk_drain()
 * does the same without the loop while a zk is torn down. The queue is the
 * only thing the C client's threads and the loop share.
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

#include <event2/event.h>
#include "lib/core/xalloc.h"
#include "lib/core/clock.h"

double
zk_now(void)
{
	return np_mono_s();
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

struct zk_item *
zk_item_new(enum zk_item_kind kind, int rc)
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

void
zk_enqueue(struct zk *zk, struct zk_item *it)
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

/* C client completions (its I/O thread, or ours on submission). */

void
zk_c_string_done(int rc, const char *value, const void *data)
{
	struct zk_rq *rq = (struct zk_rq *)data;
	struct zk_item *it = zk_item_new(IT_RESULT, rc);

	it->rq = rq;
	if (rc == ZOK && value != NULL)
		it->str = xstrdup(value);
	zk_enqueue(rq->zk, it);
}

/* A create's (zoo_acreate2): the created path and the new znode's stat. */
void
zk_c_string_stat_done(int rc, const char *value, const struct Stat *st, const void *data)
{
	struct zk_rq *rq = (struct zk_rq *)data;
	struct zk_item *it = zk_item_new(IT_RESULT, rc);

	it->rq = rq;
	if (rc == ZOK && value != NULL)
		it->str = xstrdup(value);
	if (rc == ZOK && st != NULL) {
		stat_copy(&it->st, st);
		it->has_stat = 1;
	}
	zk_enqueue(rq->zk, it);
}

void
zk_c_data_done(int rc, const char *value, int len, const struct Stat *st, const void *data)
{
	struct zk_rq *rq = (struct zk_rq *)data;
	struct zk_item *it = zk_item_new(IT_RESULT, rc);

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
	zk_enqueue(rq->zk, it);
}

void
zk_c_stat_done(int rc, const struct Stat *st, const void *data)
{
	struct zk_rq *rq = (struct zk_rq *)data;
	struct zk_item *it = zk_item_new(IT_RESULT, rc);

	it->rq = rq;
	if (rc == ZOK && st != NULL) {
		stat_copy(&it->st, st);
		it->has_stat = 1;
	}
	zk_enqueue(rq->zk, it);
}

void
zk_c_void_done(int rc, const void *data)
{
	struct zk_rq *rq = (struct zk_rq *)data;
	struct zk_item *it = zk_item_new(IT_RESULT, rc);

	it->rq = rq;
	zk_enqueue(rq->zk, it);
}

void
zk_c_strings_done(int rc, const struct String_vector *sv, const void *data)
{
	struct zk_rq *rq = (struct zk_rq *)data;
	struct zk_item *it = zk_item_new(IT_RESULT, rc);
	int i;

	it->rq = rq;
	if (rc == ZOK && sv != NULL && sv->count > 0) {
		it->names = xcalloc((size_t)sv->count, sizeof(char *));
		for (i = 0; i < sv->count; i++)
			it->names[i] = xstrdup(sv->data[i]);
		it->count = sv->count;
	}
	zk_enqueue(rq->zk, it);
}

void
zk_c_path_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	struct zk_watch *w = ctx;
	struct zk_item *it;

	/* The C client also hands every session event to every path watcher
	 * (and keeps it registered): those are reported once, as session
	 * events, by zk_c_session_watcher. */
	if (type == ZOO_SESSION_EVENT)
		return;
	it = zk_item_new(IT_WATCH, ZOK);
	it->w = w;
	it->type = type;
	it->str = xstrdup(path != NULL ? path : "");
	zk_enqueue(w->zk, it);
}

void
zk_c_session_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	struct zk *zk = ctx;
	struct zk_item *it;

	if (type != ZOO_SESSION_EVENT)
		return;
	it = zk_item_new(IT_SESSION, ZOK);
	it->zh = zh;
	it->state = state;
	zk_enqueue(zk, it);
}

static void
zk_process(struct zk *zk, struct zk_item *it)
{
	struct zk_watch *w, *next;
	struct zk_tree *t;

	switch (it->kind) {
	case IT_RESULT:
		zk_rq_result(zk, it);
		break;
	case IT_WATCH:
		w = it->w;
		if (w->persistent) {
			if (it->type == ZOO_CREATED_EVENT)
				zk->ops.events[0]++;
			else if (it->type == ZOO_DELETED_EVENT)
				zk->ops.events[1]++;
			else if (it->type == ZOO_CHANGED_EVENT)
				zk->ops.events[2]++;
			else
				zk->ops.events[3]++;
			if (w->gen == zk->gen && w->cb != NULL && !zk->closing)
				w->cb(it->type, it->str, w->arg);
			break;
		}
		zk->ops.oneshot++;
		if (w->gen == zk->gen && w->cb != NULL && !zk->closing) {
			zk_watch_cb cb = w->cb;
			void *arg = w->arg;

			zk_watch_put(zk, w);
			cb(it->type, it->str, arg);
		} else {
			zk_watch_put(zk, w);
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
				zk_watch_free(zk, w);
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

void
zk_on_wake(evutil_socket_t fd, short what, void *arg)
{
	struct zk *zk = arg;
	struct zk_item *it;
	uint64_t v;
	unsigned n = 0;
	double t0;

	if (read(fd, &v, sizeof(v)) < 0) {
		/* EAGAIN: woken for items already taken */
	}
	zk->dispatching++;
	zk->batch = queue_take(zk);
	t0 = zk_now();
	while ((it = zk->batch) != NULL && !zk->free_requested) {
		zk->batch = it->next;
		zk_process(zk, it);
		item_free(it);
		n++;
	}
	t0 = zk_now() - t0;
	if (t0 > zk->disp_secs) {
		zk->disp_secs = t0;
		zk->disp_items = n;
	}
	zk->dispatching--;
	if (zk->free_requested && zk->dispatching == 0)
		zk_destroy(zk);
}

void
zk_dispatch_max(struct zk *zk, int reset, unsigned *items, double *ms)
{
	*items = zk->disp_items;
	*ms = zk->disp_secs * 1000.0;
	if (reset) {
		zk->disp_items = 0;
		zk->disp_secs = 0;
	}
}

/*
 * Process queue items until no request is outstanding, for at most timeout
 * seconds, without the loop. zk_destroy lets requests in flight finish
 * before it closes the handle (a delete of a lock contender, say, should
 * happen rather than be cut off).
 */
void
zk_drain(struct zk *zk, double timeout)
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
