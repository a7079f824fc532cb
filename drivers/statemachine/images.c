/*
 * The diskimage uploads one provider can boot from, as upstream's
 * getMostRecentImageUpload(cached=True) and getProviderUploads over the
 * launcher's image tree cache. See statemachine.h.
 *
 * One persistent recursive watch on /nodepool/images (zk_watch_tree, as
 * the node and request caches) tells of every upload of this provider
 * created, changed or deleted: the record is read again at once, and the
 * answer replaces what the view held. Nothing is polled. Since the watch
 * event and the read it starts are both ordered on the session with every
 * other event, a request created after an upload became ready (by a
 * client that saw it ready) is read after that upload's record: a label
 * whose upload became ready a moment ago is ready for it.
 *
 * A walk (every image's builds, this provider's uploads of each, their
 * records) fills the view at start and after every lost connection or
 * expiry (provider_start), when the watch's events may have been lost.
 * Every upload carries the generation of the walk or read that last saw
 * it; a walk that completes without error drops the uploads it did not
 * see and that no read has seen since it began. A walk that fails leaves
 * what it read in place and the rest as it was.
 */
#include "drivers/statemachine/statemachine.h"

#include <sys/queue.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "lib/core/log.h"
#include "protocol/paths.h"
#include "lib/core/xalloc.h"
#include "lib/zk/zk.h"

struct upl {
	char *image, *build, *upload;
	char *path;
	int state; /* NP_UPLOAD_*, -1 undecodable */
	double state_time;
	char *external_id;
	int64_t mzxid;
	unsigned gen;
	enum sm_validation validation;
	int rolled_back; /* the record's "rollback" key, or marked here */
};

struct img_ctx {
	LIST_ENTRY(img_ctx) entry;
	struct sm_images *s;
	char *image, *build;
	int walk; /* part of the current walk (else a watch read) */
	char path[512];
};

struct sm_images {
	struct zk *zk;
	struct event_base *base;
	char *provider;
	LIST_HEAD(, img_ctx) ctxs; /* reads in flight */
	struct upl *v;
	size_t n, cap;
	unsigned gen; /* bumped when a walk starts */
	int pending;  /* walk reads in flight */
	int walking, failed, again;
	int walks; /* completed */
	void (*notify)(void *arg);
	void *notify_arg;
};

static struct upl *
upl_find(struct sm_images *s, const char *path)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		if (strcmp(s->v[i].path, path) == 0)
			return &s->v[i];
	return NULL;
}

static void
upl_clear(struct upl *u)
{
	free(u->image);
	free(u->build);
	free(u->upload);
	free(u->path);
	free(u->external_id);
}

static void
upl_drop(struct sm_images *s, struct upl *u)
{
	upl_clear(u);
	*u = s->v[--s->n];
}

/* The upload at path (image/build/upload its parts) read with rc, data, st. */
static void
upl_update(struct sm_images *s, const char *image, const char *build, const char *upload,
	   const char *path, int rc, const char *data, int len, const struct zk_stat *st)
{
	struct upl *u = upl_find(s, path);
	struct np_image_upload *rec = NULL;
	char err[128];

	if (rc == ZNONODE) {
		if (u != NULL)
			upl_drop(s, u);
		return;
	}
	if (rc != ZOK)
		return;
	if (u != NULL && st->mzxid < u->mzxid)
		return; /* an older answer than the one held */
	if (u == NULL) {
		if (s->n == s->cap) {
			s->cap = s->cap ? s->cap * 2 : 16;
			s->v = realloc(s->v, s->cap * sizeof(*s->v));
			if (s->v == NULL)
				abort();
		}
		u = &s->v[s->n++];
		memset(u, 0, sizeof(*u));
		u->image = xstrdup(image);
		u->build = xstrdup(build);
		u->upload = xstrdup(upload);
		u->path = xstrdup(path);
	}
	u->mzxid = st->mzxid;
	u->gen = s->gen;
	free(u->external_id);
	u->external_id = NULL;
	u->state = -1;
	u->state_time = 0;
	u->validation = SM_VALID_NONE;
	u->rolled_back = 0;
	if (data != NULL && len > 0 &&
	    np_image_upload_decode(upload, data, (size_t)len, &rec, err, sizeof(err)) == 0) {
		const char *v = json_string_value(
		    json_object_get(json_object_get(rec->extra, "validation"), "state"));
		u->state = rec->state;
		u->state_time = rec->state_time;
		if (rec->external_id != NULL)
			u->external_id = xstrdup(rec->external_id);
		if (json_object_get(rec->extra, "rollback") != NULL)
			u->rolled_back = 1;
		if (v != NULL)
			u->validation = strcmp(v, "pending") == 0  ? SM_VALID_PENDING
					: strcmp(v, "passed") == 0 ? SM_VALID_PASSED
								   : SM_VALID_FAILED;
	} else if (data != NULL && len > 0) {
		log_warn("image upload %s: %s (skipped)", path, err);
	} else {
		u->state = NP_UPLOAD_UPLOADING; /* empty: being created */
	}
	np_image_upload_free(rec);
}

/* A np_path_* result: a path that is valid and fits img_ctx.path. */
static int
fits(int ret)
{
	return ret > 0 && (size_t)ret < sizeof(((struct img_ctx *)0)->path);
}

static struct img_ctx *
ctx_new(struct sm_images *s, const char *image, const char *build, int walk)
{
	struct img_ctx *c = calloc(1, sizeof(*c));

	if (c == NULL)
		abort();
	c->s = s;
	c->image = image ? xstrdup(image) : NULL;
	c->build = build ? xstrdup(build) : NULL;
	c->walk = walk;
	LIST_INSERT_HEAD(&s->ctxs, c, entry);
	if (walk)
		s->pending++;
	return c;
}

static void
walk_done(struct sm_images *s)
{
	size_t i;

	s->walking = 0;
	if (!s->failed) {
		for (i = 0; i < s->n;) {
			if (s->v[i].gen != s->gen)
				upl_drop(s, &s->v[i]);
			else
				i++;
		}
		s->walks++;
	}
	if (s->again) {
		s->again = 0;
		sm_images_refresh(s);
	}
}

/* One read answered (ctx freed). */
static void
ctx_done(struct img_ctx *c, int rc)
{
	struct sm_images *s = c->s;
	int walk = c->walk;

	if (walk && rc != ZOK && rc != ZNONODE)
		s->failed = 1;
	LIST_REMOVE(c, entry);
	free(c->image);
	free(c->build);
	free(c);
	if (walk && --s->pending == 0)
		walk_done(s);
}

static void
upload_read(int rc, const char *data, int len, const struct zk_stat *st, void *arg)
{
	struct img_ctx *c = arg;
	const char *id = strrchr(c->path, '/') + 1;

	struct sm_images *s = c->s;

	upl_update(s, c->image, c->build, id, c->path, rc, data, len, st);
	ctx_done(c, rc);
	if (s->notify != NULL)
		s->notify(s->notify_arg);
}

static void
uploads_listed(int rc, int count, char *const *names, void *arg)
{
	struct img_ctx *c = arg, *d;
	struct sm_images *s = c->s;
	int i;

	for (i = 0; rc == ZOK && i < count; i++) {
		if (strcmp(names[i], "lock") == 0)
			continue;
		d = ctx_new(s, c->image, c->build, 1);
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
		d = ctx_new(s, c->image, names[i], 1);
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
		d = ctx_new(s, names[i], NULL, 1);
		if (!fits(np_path_image_builds(d->path, sizeof(d->path), names[i]))) {
			ctx_done(d, ZOK);
			continue;
		}
		zk_children(s->zk, d->path, NULL, NULL, builds_listed, d);
	}
	ctx_done(c, rc);
}

/*
 * The watch: an event on /nodepool/images/<image>/builds/<build>/
 * providers/<our provider>/images/<upload> reads that upload again;
 * everything else in the tree (builds, locks, other providers) is not
 * ours to follow.
 */
static void
tree_event(int type, const char *path, void *arg)
{
	struct sm_images *s = arg;
	char buf[512], *part[10], *save = NULL, *p;
	struct img_ctx *c;
	int n = 0;

	(void)type;
	if (path == NULL || strlen(path) >= sizeof(buf))
		return;
	memcpy(buf, path, strlen(path) + 1);
	for (p = strtok_r(buf, "/", &save); p != NULL && n < 10; p = strtok_r(NULL, "/", &save))
		part[n++] = p;
	if (p != NULL || n != 9 || strcmp(part[0], "nodepool") != 0 ||
	    strcmp(part[1], "images") != 0 || strcmp(part[3], "builds") != 0 ||
	    strcmp(part[5], "providers") != 0 || strcmp(part[6], s->provider) != 0 ||
	    strcmp(part[7], "images") != 0 || strcmp(part[8], "lock") == 0)
		return;
	c = ctx_new(s, part[2], part[4], 0);
	snprintf(c->path, sizeof(c->path), "%s", path);
	zk_get(s->zk, c->path, NULL, NULL, upload_read, c);
}

void
sm_images_refresh(struct sm_images *s)
{
	struct img_ctx *c;

	if (s->walking) {
		s->again = 1;
		return;
	}
	if (!zk_is_connected(s->zk))
		return;
	s->walking = 1;
	s->failed = 0;
	s->gen++;
	c = ctx_new(s, NULL, NULL, 1);
	snprintf(c->path, sizeof(c->path), "/nodepool/images");
	zk_children(s->zk, c->path, NULL, NULL, images_listed, c);
}

struct sm_images *
sm_images_new(struct zk *zk, struct event_base *base, const char *provider)
{
	struct sm_images *s = calloc(1, sizeof(*s));

	if (s == NULL)
		abort();
	s->zk = zk;
	s->base = base;
	s->provider = xstrdup(provider);
	LIST_INIT(&s->ctxs);
	/* the watch first: a walk started after it misses no change */
	zk_watch_tree(zk, "/nodepool/images", tree_event, s);
	sm_images_refresh(s);
	return s;
}

void
sm_images_free(struct sm_images *s)
{
	struct img_ctx *c;
	size_t i;

	if (s == NULL)
		return;
	zk_cancel(s->zk, s);
	while ((c = LIST_FIRST(&s->ctxs)) != NULL) {
		zk_cancel(s->zk, c);
		LIST_REMOVE(c, entry);
		free(c->image);
		free(c->build);
		free(c);
	}
	for (i = 0; i < s->n; i++)
		upl_clear(&s->v[i]);
	free(s->v);
	free(s->provider);
	free(s);
}

int
sm_images_latest(struct sm_images *s, const char *image, char *external_id, size_t idlen,
		 char *path, size_t pathlen)
{
	const struct upl *best = NULL;
	size_t i;

	for (i = 0; i < s->n; i++) {
		const struct upl *u = &s->v[i];
		if (u->state != NP_UPLOAD_READY || u->external_id == NULL ||
		    u->validation == SM_VALID_PENDING || u->rolled_back ||
		    strcmp(u->image, image) != 0)
			continue;
		if (best == NULL || u->state_time > best->state_time)
			best = u;
	}
	if (best == NULL)
		return -1;
	snprintf(external_id, idlen, "%s", best->external_id);
	snprintf(path, pathlen, "%s", best->path);
	return 0;
}

int
sm_images_known_upload(const struct sm_images *s, const char *build_id, const char *upload_id)
{
	size_t i;

	if (s->walks == 0)
		return -1;
	for (i = 0; i < s->n; i++)
		if (strcmp(s->v[i].build, build_id) == 0 && strcmp(s->v[i].upload, upload_id) == 0)
			return 1;
	return 0;
}

int
sm_images_walks(const struct sm_images *s)
{
	return s->walks;
}

void
sm_images_set_notify(struct sm_images *s, void (*cb)(void *arg), void *arg)
{
	s->notify = cb;
	s->notify_arg = arg;
}

int
sm_images_pending_nth(const struct sm_images *s, size_t nth, const char **image, const char **path,
		      const char **external_id)
{
	size_t i;

	for (i = 0; i < s->n; i++) {
		const struct upl *u = &s->v[i];
		if (u->state != NP_UPLOAD_READY || u->validation != SM_VALID_PENDING ||
		    u->external_id == NULL)
			continue;
		if (nth-- == 0) {
			*image = u->image;
			*path = u->path;
			*external_id = u->external_id;
			return 0;
		}
	}
	return -1;
}

/* ---- the verdict: read, edit, write back with the version read ---------- */

struct verdict {
	struct sm_images *s;
	char *path, *reason;
	int ok;
	int rollback; /* a rollback mark, not a validation verdict */
};

static void
verdict_free(struct verdict *v)
{
	free(v->path);
	free(v->reason);
	free(v);
}

static void
verdict_written(int rc, const struct zk_stat *st, void *arg)
{
	struct verdict *v = arg;

	(void)st;
	if (rc != ZOK)
		log_warn("image upload %s: storing its validation: %s", v->path, zk_strerror(rc));
	verdict_free(v);
}

static void
verdict_read(int rc, const char *data, int len, const struct zk_stat *st, void *arg)
{
	struct verdict *v = arg;
	struct np_image_upload *u = NULL;
	const char *id = strrchr(v->path, '/') + 1;
	char err[128], *out;
	json_t *val;
	size_t olen;

	if (rc != ZOK || data == NULL || len <= 0 ||
	    np_image_upload_decode(id, data, (size_t)len, &u, err, sizeof(err)) != 0) {
		if (rc == ZOK)
			log_warn("image upload %s: unreadable, its validation is not stored",
				 v->path);
		verdict_free(v);
		return;
	}
	if (v->rollback) {
		if (u->state != NP_UPLOAD_READY) {
			np_image_upload_free(u);
			verdict_free(v);
			return;
		}
		if (u->extra == NULL)
			u->extra = json_object();
		json_object_set_new(u->extra, "rollback",
				    json_pack("{s:s}", "reason", v->reason ? v->reason : "?"));
		out = np_image_upload_encode(u, &olen);
		np_image_upload_free(u);
		zk_set(v->s->zk, v->path, out, (int)olen, st->version, verdict_written, v);
		free(out);
		return;
	}
	val = json_object_get(u->extra, "validation");
	if (u->state != NP_UPLOAD_READY ||
	    json_string_value(json_object_get(val, "state")) == NULL ||
	    strcmp(json_string_value(json_object_get(val, "state")), "pending") != 0) {
		/* decided meanwhile (image-delete, another launcher) */
		np_image_upload_free(u);
		verdict_free(v);
		return;
	}
	val = json_pack("{s:s}", "state", v->ok ? "passed" : "failed");
	if (!v->ok)
		json_object_set_new(val, "reason", json_string(v->reason ? v->reason : "?"));
	json_object_set_new(u->extra, "validation", val);
	if (!v->ok)
		np_image_upload_set_state(u, NP_UPLOAD_FAILED);
	out = np_image_upload_encode(u, &olen);
	np_image_upload_free(u);
	zk_set(v->s->zk, v->path, out, (int)olen, st->version, verdict_written, v);
	free(out);
}

void
sm_images_verdict(struct sm_images *s, const char *path, int ok, const char *reason)
{
	struct verdict *v = calloc(1, sizeof(*v));

	if (v == NULL)
		abort();
	v->s = s;
	v->path = xstrdup(path);
	v->reason = reason != NULL ? xstrdup(reason) : NULL;
	v->ok = ok;
	zk_get(s->zk, path, NULL, NULL, verdict_read, v);
}

int
sm_images_has_previous(const struct sm_images *s, const char *image, const char *path)
{
	size_t i;

	for (i = 0; i < s->n; i++) {
		const struct upl *u = &s->v[i];
		if (u->state == NP_UPLOAD_READY && u->external_id != NULL &&
		    u->validation != SM_VALID_PENDING && !u->rolled_back &&
		    strcmp(u->image, image) == 0 && strcmp(u->path, path) != 0)
			return 1;
	}
	return 0;
}

void
sm_images_rollback(struct sm_images *s, const char *path, const char *reason)
{
	struct upl *u = upl_find(s, path);
	struct verdict *v;

	if (u != NULL)
		u->rolled_back = 1; /* at once: the next launch boots the previous */
	v = calloc(1, sizeof(*v));
	if (v == NULL)
		abort();
	v->s = s;
	v->path = xstrdup(path);
	v->reason = xstrdup(reason);
	v->rollback = 1;
	zk_get(s->zk, path, NULL, NULL, verdict_read, v);
}
