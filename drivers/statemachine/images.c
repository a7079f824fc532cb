/*
 * The diskimage uploads one provider can boot from, read from ZooKeeper
 * (/nodepool/images/<image>/builds/<build>/providers/<provider>/images/
 * <upload>), as upstream's getMostRecentImageUpload(cached=True) and
 * getProviderUploads. See statemachine.h.
 *
 * A walk reads every image's builds, this provider's uploads of each, and
 * each upload's record; when every read has answered, the results replace
 * the previous ones at once (a walk that met an error keeps the previous
 * ones). Walks run every `interval` seconds and on demand (a label asked
 * for an image with no known upload), at most one at a time and at most
 * one every SM_IMAGES_MIN_GAP seconds.
 */
#include "statemachine.h"

#include <sys/queue.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "log.h"
#include "paths.h"
#include "strset.h"
#include "zk.h"
#include "clock.h"

#define SM_IMAGES_MIN_GAP 5.0 /* s between walks started on demand */

struct latest {
	char *image;
	char *external_id;
	char *path;
	double state_time;
};

struct table {
	struct latest *v;
	size_t n, cap;
	struct strset *known; /* "<build>-<upload>" of every upload, any state */
};

struct img_ctx {
	LIST_ENTRY(img_ctx) entry;
	struct sm_images *s;
	char *image, *build;
	char path[512];
};

struct sm_images {
	struct zk *zk;
	struct event_base *base;
	char *provider;
	double interval;
	struct event *timer;
	LIST_HEAD(, img_ctx) ctxs; /* reads in flight */
	int pending, walking, failed;
	double last_start;
	int walks; /* completed */
	struct table cur, next;
};

static void
table_clear(struct table *t)
{
	size_t i;

	for (i = 0; i < t->n; i++) {
		free(t->v[i].image);
		free(t->v[i].external_id);
		free(t->v[i].path);
	}
	free(t->v);
	strset_free(t->known);
	memset(t, 0, sizeof(*t));
}

static struct latest *
table_find(const struct table *t, const char *image)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		if (strcmp(t->v[i].image, image) == 0)
			return &t->v[i];
	return NULL;
}

static void
table_offer(struct table *t, const char *image, const char *eid, const char *path, double when)
{
	struct latest *l = table_find(t, image);

	if (l == NULL) {
		if (t->n == t->cap) {
			t->cap = t->cap ? t->cap * 2 : 8;
			t->v = realloc(t->v, t->cap * sizeof(*t->v));
			if (t->v == NULL)
				abort();
		}
		l = &t->v[t->n++];
		memset(l, 0, sizeof(*l));
		l->image = strdup(image);
		l->state_time = -1;
	}
	if (when <= l->state_time)
		return;
	free(l->external_id);
	free(l->path);
	l->external_id = strdup(eid);
	l->path = strdup(path);
	l->state_time = when;
}

/* A np_path_* result: a path that is valid and fits img_ctx.path. */
static int
fits(int ret)
{
	return ret > 0 && (size_t)ret < sizeof(((struct img_ctx *)0)->path);
}

static struct img_ctx *
ctx_new(struct sm_images *s, const char *image, const char *build)
{
	struct img_ctx *c = calloc(1, sizeof(*c));

	if (c == NULL)
		abort();
	c->s = s;
	c->image = image ? strdup(image) : NULL;
	c->build = build ? strdup(build) : NULL;
	LIST_INSERT_HEAD(&s->ctxs, c, entry);
	s->pending++;
	return c;
}

static void
walk_done(struct sm_images *s)
{
	s->walking = 0;
	if (s->failed) {
		table_clear(&s->next);
		return;
	}
	table_clear(&s->cur);
	s->cur = s->next;
	memset(&s->next, 0, sizeof(s->next));
	s->walks++;
}

/* One read answered (ctx freed). */
static void
ctx_done(struct img_ctx *c, int rc)
{
	struct sm_images *s = c->s;

	if (rc != ZOK && rc != ZNONODE)
		s->failed = 1;
	LIST_REMOVE(c, entry);
	free(c->image);
	free(c->build);
	free(c);
	if (--s->pending == 0)
		walk_done(s);
}

static void
upload_read(int rc, const char *data, int len, const struct zk_stat *st, void *arg)
{
	struct img_ctx *c = arg;
	struct np_image_upload *u = NULL;
	char err[128];
	const char *id = strrchr(c->path, '/') + 1;

	if (rc == ZOK && data != NULL && len > 0 &&
	    np_image_upload_decode(id, data, (size_t)len, &u, err, sizeof(err)) == 0 &&
	    u->state == NP_UPLOAD_READY && u->external_id != NULL)
		table_offer(&c->s->next, c->image, u->external_id, c->path, u->state_time);
	np_image_upload_free(u);
	ctx_done(c, rc);
}

static void
uploads_listed(int rc, int count, char *const *names, void *arg)
{
	struct img_ctx *c = arg, *d;
	struct sm_images *s = c->s;
	char key[256];
	int i;

	for (i = 0; rc == ZOK && i < count; i++) {
		if (strcmp(names[i], "lock") == 0)
			continue;
		snprintf(key, sizeof(key), "%s-%s", c->build, names[i]);
		strset_add(s->next.known, key);
		d = ctx_new(s, c->image, c->build);
		if (!fits(np_path_upload(d->path, sizeof(d->path), c->image, c->build, s->provider,
					 names[i]))) {
			ctx_done(d, ZOK);
			continue;
		}
		zk_get(s->zk, d->path, NULL, NULL, upload_read, d);
	}
	ctx_done(c, rc);
}

static void
builds_listed(int rc, int count, char *const *names, void *arg)
{
	struct img_ctx *c = arg, *d;
	struct sm_images *s = c->s;
	int i;

	for (i = 0; rc == ZOK && i < count; i++) {
		if (strcmp(names[i], "lock") == 0)
			continue;
		d = ctx_new(s, c->image, names[i]);
		if (!fits(np_path_uploads(d->path, sizeof(d->path), c->image, names[i],
					  s->provider))) {
			ctx_done(d, ZOK);
			continue;
		}
		zk_children(s->zk, d->path, NULL, NULL, uploads_listed, d);
	}
	ctx_done(c, rc);
}

static void
images_listed(int rc, int count, char *const *names, void *arg)
{
	struct img_ctx *c = arg, *d;
	struct sm_images *s = c->s;
	int i;

	for (i = 0; rc == ZOK && i < count; i++) {
		d = ctx_new(s, names[i], NULL);
		if (!fits(np_path_image_builds(d->path, sizeof(d->path), names[i]))) {
			ctx_done(d, ZOK);
			continue;
		}
		zk_children(s->zk, d->path, NULL, NULL, builds_listed, d);
	}
	ctx_done(c, rc);
}

void
sm_images_refresh(struct sm_images *s)
{
	struct img_ctx *c;

	if (s->walking || !zk_is_connected(s->zk))
		return;
	s->walking = 1;
	s->failed = 0;
	s->last_start = np_mono_s();
	table_clear(&s->next);
	s->next.known = strset_new();
	c = ctx_new(s, NULL, NULL);
	snprintf(c->path, sizeof(c->path), "/nodepool/images");
	zk_children(s->zk, c->path, NULL, NULL, images_listed, c);
}

static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sm_images *s = arg;
	struct timeval tv = {(time_t)s->interval, 0};

	sm_images_refresh(s);
	event_add(s->timer, &tv);
}

struct sm_images *
sm_images_new(struct zk *zk, struct event_base *base, const char *provider, double interval)
{
	struct sm_images *s = calloc(1, sizeof(*s));

	if (s == NULL)
		abort();
	s->zk = zk;
	s->base = base;
	s->provider = strdup(provider);
	s->interval = interval > 0 ? interval : 60;
	LIST_INIT(&s->ctxs);
	s->timer = event_new(base, -1, 0, timer_cb, s);
	timer_cb(-1, 0, s);
	return s;
}

void
sm_images_free(struct sm_images *s)
{
	struct img_ctx *c;

	if (s == NULL)
		return;
	while ((c = LIST_FIRST(&s->ctxs)) != NULL) {
		zk_cancel(s->zk, c);
		LIST_REMOVE(c, entry);
		free(c->image);
		free(c->build);
		free(c);
	}
	event_free(s->timer);
	table_clear(&s->cur);
	table_clear(&s->next);
	free(s->provider);
	free(s);
}

int
sm_images_latest(struct sm_images *s, const char *image, char *external_id, size_t idlen,
		 char *path, size_t pathlen)
{
	const struct latest *l = table_find(&s->cur, image);

	if (l == NULL || l->external_id == NULL) {
		/* perhaps uploaded since the last walk */
		if (np_mono_s() - s->last_start > SM_IMAGES_MIN_GAP)
			sm_images_refresh(s);
		return -1;
	}
	snprintf(external_id, idlen, "%s", l->external_id);
	snprintf(path, pathlen, "%s", l->path);
	return 0;
}

int
sm_images_known_upload(const struct sm_images *s, const char *build_id, const char *upload_id)
{
	char key[256];

	if (s->walks == 0)
		return -1;
	snprintf(key, sizeof(key), "%s-%s", build_id, upload_id);
	return strset_has(s->cur.known, key);
}

int
sm_images_walks(const struct sm_images *s)
{
	return s->walks;
}
