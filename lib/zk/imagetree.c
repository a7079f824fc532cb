/*
 * One-pass snapshot of /nodepool/images. See imagetree.h.
 *
 * Every read carries a small context (the load and the object it fills);
 * the contexts of reads in flight are kept on a list so that a cancelled
 * load can tell the client to forget each of them (zk_cancel is by
 * argument). A level's array is allocated once its listing is known, so
 * pointers into it stay valid while its children are read.
 */
#include "lib/zk/imagetree.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "lib/core/clock.h"
#include "protocol/paths.h"
#include "lib/zk/zk.h"
#include "lib/core/xalloc.h"

enum op_kind {
	OP_IMAGES,    /* children of /nodepool/images */
	OP_PAUSE,     /* exists …/pause */
	OP_REQUEST,   /* exists …/request-build */
	OP_LOCK,      /* exists …/builds/lock */
	OP_BUILDS,    /* children of …/builds */
	OP_BUILD,     /* get …/builds/<id> */
	OP_PROVIDERS, /* children of …/builds/<id>/providers */
	OP_UPLOADS,   /* children of …/providers/<p>/images */
	OP_UPLOAD,    /* get …/images/<upload> */
};

struct op {
	struct op *prev, *next;
	struct imgtree_load *l;
	enum op_kind kind;
	struct imgtree_image *im;
	struct imgtree_build *b;
	struct imgtree_provider *p;
	struct imgtree_upload *u;
};

struct imgtree_load {
	struct zk *zk;
	imgtree_cb cb;
	void *arg;
	struct imgtree *tree;
	struct op *ops; /* in flight */
	int rc;		/* first error */
};

void
imgtree_free(struct imgtree *t)
{
	size_t i, j, k, m;

	if (t == NULL)
		return;
	for (i = 0; i < t->nimages; i++) {
		struct imgtree_image *im = &t->images[i];
		for (j = 0; j < im->nbuilds; j++) {
			struct imgtree_build *b = &im->builds[j];
			for (k = 0; k < b->nproviders; k++) {
				struct imgtree_provider *p = &b->providers[k];
				for (m = 0; m < p->nuploads; m++) {
					free(p->uploads[m].id);
					free(p->uploads[m].data);
					np_image_upload_free(p->uploads[m].u);
				}
				free(p->uploads);
				free(p->name);
			}
			free(b->providers);
			free(b->id);
			free(b->data);
			np_image_build_free(b->b);
		}
		free(im->builds);
		free(im->name);
	}
	free(t->images);
	free(t);
}

/* ---- the load --------------------------------------------------------------- */

static struct op *
op_new(struct imgtree_load *l, enum op_kind kind)
{
	struct op *o = xcalloc(1, sizeof(*o));

	o->l = l;
	o->kind = kind;
	o->next = l->ops;
	if (l->ops != NULL)
		l->ops->prev = o;
	l->ops = o;
	return o;
}

static void
op_unlink(struct op *o)
{
	struct imgtree_load *l = o->l;

	if (o->prev != NULL)
		o->prev->next = o->next;
	else
		l->ops = o->next;
	if (o->next != NULL)
		o->next->prev = o->prev;
}

static int
cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted copies of names without "lock" (never an object). */
static char **
names_sorted(int count, char *const *names, size_t *n)
{
	char **v = xcalloc((size_t)count + 1, sizeof(*v));
	int i;

	*n = 0;
	for (i = 0; i < count; i++)
		if (strcmp(names[i], "lock") != 0)
			v[(*n)++] = xstrdup(names[i]);
	qsort(v, *n, sizeof(*v), cmp_name);
	return v;
}

static void load_step_done(struct imgtree_load *l, struct op *o, int rc);

static void on_children(int rc, int count, char *const *names, void *arg);
static void on_data(int rc, const char *data, int len, const struct zk_stat *st, void *arg);
static void on_stat(int rc, const struct zk_stat *st, void *arg);

static void
read_children(struct imgtree_load *l, struct op *o, const char *path)
{
	zk_children(l->zk, path, NULL, NULL, on_children, o);
}

static void
image_reads(struct imgtree_load *l, struct imgtree_image *im)
{
	char path[NP_PATH_MAX];
	struct op *o;

	if (np_path_image_pause(path, sizeof(path), im->name) < 0)
		return;
	o = op_new(l, OP_PAUSE);
	o->im = im;
	zk_exists(l->zk, path, NULL, NULL, on_stat, o);
	np_path_image_request_build(path, sizeof(path), im->name);
	o = op_new(l, OP_REQUEST);
	o->im = im;
	zk_exists(l->zk, path, NULL, NULL, on_stat, o);
	np_path_image_build_lock(path, sizeof(path), im->name);
	o = op_new(l, OP_LOCK);
	o->im = im;
	zk_exists(l->zk, path, NULL, NULL, on_stat, o);
	np_path_image_builds(path, sizeof(path), im->name);
	o = op_new(l, OP_BUILDS);
	o->im = im;
	read_children(l, o, path);
}

static void
on_children(int rc, int count, char *const *names, void *arg)
{
	struct op *o = arg, *n;
	struct imgtree_load *l = o->l;
	char path[NP_PATH_MAX];
	size_t i, cnt;
	char **v;

	if (rc != ZOK) {
		load_step_done(l, o, rc == ZNONODE ? ZOK : rc);
		return;
	}
	v = names_sorted(count, names, &cnt);
	switch (o->kind) {
	case OP_IMAGES:
		l->tree->images = xcalloc(cnt, sizeof(*l->tree->images));
		for (i = 0; i < cnt; i++) {
			struct imgtree_image *im = &l->tree->images[l->tree->nimages];
			char tmp[NP_PATH_MAX];
			if (np_path_image(tmp, sizeof(tmp), v[i]) < 0) {
				free(v[i]);
				continue;
			}
			im->name = v[i];
			l->tree->nimages++;
			image_reads(l, im);
		}
		break;
	case OP_BUILDS:
		o->im->builds = xcalloc(cnt, sizeof(*o->im->builds));
		for (i = 0; i < cnt; i++) {
			struct imgtree_build *b = &o->im->builds[o->im->nbuilds++];
			b->id = v[i];
			np_path_build(path, sizeof(path), o->im->name, b->id);
			n = op_new(l, OP_BUILD);
			n->im = o->im;
			n->b = b;
			zk_get(l->zk, path, NULL, NULL, on_data, n);
			np_path_build_providers(path, sizeof(path), o->im->name, b->id);
			n = op_new(l, OP_PROVIDERS);
			n->im = o->im;
			n->b = b;
			read_children(l, n, path);
		}
		break;
	case OP_PROVIDERS:
		o->b->providers = xcalloc(cnt, sizeof(*o->b->providers));
		for (i = 0; i < cnt; i++) {
			struct imgtree_provider *p = &o->b->providers[o->b->nproviders++];
			p->name = v[i];
			np_path_uploads(path, sizeof(path), o->im->name, o->b->id, p->name);
			n = op_new(l, OP_UPLOADS);
			n->im = o->im;
			n->b = o->b;
			n->p = p;
			read_children(l, n, path);
		}
		break;
	case OP_UPLOADS:
		o->p->uploads = xcalloc(cnt, sizeof(*o->p->uploads));
		for (i = 0; i < cnt; i++) {
			struct imgtree_upload *u = &o->p->uploads[o->p->nuploads++];
			u->id = v[i];
			np_path_upload(path, sizeof(path), o->im->name, o->b->id, o->p->name,
				       u->id);
			n = op_new(l, OP_UPLOAD);
			n->im = o->im;
			n->b = o->b;
			n->p = o->p;
			n->u = u;
			zk_get(l->zk, path, NULL, NULL, on_data, n);
		}
		break;
	default:
		for (i = 0; i < cnt; i++)
			free(v[i]);
		break;
	}
	free(v);
	load_step_done(l, o, ZOK);
}

static void
on_data(int rc, const char *data, int len, const struct zk_stat *st, void *arg)
{
	struct op *o = arg;
	struct imgtree_load *l = o->l;

	if (rc == ZNONODE) {
		if (o->kind == OP_BUILD)
			o->b->gone = 1;
		load_step_done(l, o, ZOK);
		return;
	}
	if (rc != ZOK) {
		load_step_done(l, o, rc);
		return;
	}
	if (o->kind == OP_BUILD) {
		o->b->data = xstrdup(data != NULL ? data : "");
		o->b->ctime = (double)st->ctime_ms / 1000.0;
		if (len > 0)
			np_image_build_decode(o->b->id, data, (size_t)len, &o->b->b, NULL, 0);
	} else if (o->kind == OP_UPLOAD) {
		o->u->data = xstrdup(data != NULL ? data : "");
		if (len > 0)
			np_image_upload_decode(o->u->id, data, (size_t)len, &o->u->u, NULL, 0);
	}
	load_step_done(l, o, ZOK);
}

static void
on_stat(int rc, const struct zk_stat *st, void *arg)
{
	struct op *o = arg;
	struct imgtree_load *l = o->l;

	if (rc == ZOK) {
		switch (o->kind) {
		case OP_PAUSE:
			o->im->paused = 1;
			break;
		case OP_REQUEST:
			o->im->has_request = 1;
			o->im->request_ctime = (double)st->ctime_ms / 1000.0;
			break;
		case OP_LOCK:
			o->im->lock_contenders = st->num_children;
			o->im->lock_ctime = (double)st->ctime_ms / 1000.0;
			break;
		default:
			break;
		}
	}
	load_step_done(l, o, rc == ZNONODE ? ZOK : rc);
}

static void
load_free(struct imgtree_load *l)
{
	struct op *o, *next;

	for (o = l->ops; o != NULL; o = next) {
		next = o->next;
		zk_cancel(l->zk, o);
		free(o);
	}
	imgtree_free(l->tree);
	free(l);
}

static void
load_step_done(struct imgtree_load *l, struct op *o, int rc)
{
	op_unlink(o);
	free(o);
	if (rc != ZOK && l->rc == ZOK)
		l->rc = rc;
	if (l->ops != NULL)
		return;
	if (l->rc == ZOK) {
		struct imgtree *t = l->tree;
		l->tree = NULL;
		l->cb(ZOK, t, l->arg);
	} else {
		l->cb(l->rc, NULL, l->arg);
	}
	load_free(l);
}

struct imgtree_load *
imgtree_load_start(struct zk *zk, imgtree_cb cb, void *arg)
{
	struct imgtree_load *l = xcalloc(1, sizeof(*l));
	struct op *o;

	l->zk = zk;
	l->cb = cb;
	l->arg = arg;
	l->rc = ZOK;
	l->tree = xcalloc(1, sizeof(*l->tree));
	o = op_new(l, OP_IMAGES);
	read_children(l, o, NP_IMAGE_ROOT);
	return l;
}

void
imgtree_load_cancel(struct imgtree_load *l)
{
	if (l != NULL)
		load_free(l);
}

struct sync_state {
	int done, rc;
	struct imgtree *tree;
};

static void
sync_done(int rc, struct imgtree *tree, void *arg)
{
	struct sync_state *s = arg;

	s->done = 1;
	s->rc = rc;
	s->tree = tree;
}

static void
sync_timer(evutil_socket_t fd, short what, void *arg)
{
	*(int *)arg = 1;
}

int
imgtree_load_sync(struct event_base *base, struct zk *zk, double timeout, struct imgtree **out)
{
	struct sync_state s = {0, 0, NULL};
	struct imgtree_load *l = imgtree_load_start(zk, sync_done, &s);
	int expired = 0;
	struct event *t = evtimer_new(base, sync_timer, &expired);
	struct timeval tv;

	*out = NULL;
	if (t == NULL)
		np_oom();
	tv = np_tv_of(timeout);
	evtimer_add(t, &tv);
	while (!s.done && !expired)
		if (event_base_loop(base, EVLOOP_ONCE) < 0)
			break;
	event_free(t);
	if (!s.done) {
		imgtree_load_cancel(l);
		return ZOPERATIONTIMEOUT;
	}
	*out = s.tree;
	return s.rc;
}

/* ---- lookups and listings ---------------------------------------------------------- */

const struct imgtree_image *
imgtree_image(const struct imgtree *t, const char *name)
{
	size_t i;

	for (i = 0; t != NULL && name != NULL && i < t->nimages; i++)
		if (strcmp(t->images[i].name, name) == 0)
			return &t->images[i];
	return NULL;
}

const struct imgtree_build *
imgtree_build(const struct imgtree_image *im, const char *id)
{
	size_t i;

	for (i = 0; im != NULL && id != NULL && i < im->nbuilds; i++)
		if (strcmp(im->builds[i].id, id) == 0 && !im->builds[i].gone)
			return &im->builds[i];
	return NULL;
}

const char *
imgtree_build_request(const struct imgtree_image *im)
{
	const struct imgtree_build *newest = NULL;
	size_t i;

	if (!im->has_request)
		return NULL;
	if (im->lock_contenders <= 0)
		return "pending";
	for (i = 0; i < im->nbuilds; i++)
		if (!im->builds[i].gone && (newest == NULL || im->builds[i].ctime > newest->ctime))
			newest = &im->builds[i];
	/* a lock but no build yet: the build is being set up */
	if (newest == NULL || newest->ctime < im->lock_ctime)
		return "pending";
	return "building";
}

json_t *
imgtree_export(const struct imgtree *t)
{
	json_t *o = json_object();
	char path[NP_PATH_MAX];
	size_t i, j, k, m;

	for (i = 0; i < t->nimages; i++) {
		const struct imgtree_image *im = &t->images[i];
		if (im->paused && np_path_image_pause(path, sizeof(path), im->name) > 0)
			json_object_set_new(o, path, json_string(""));
		for (j = 0; j < im->nbuilds; j++) {
			const struct imgtree_build *b = &im->builds[j];
			if (b->gone || b->data == NULL)
				continue;
			np_path_build(path, sizeof(path), im->name, b->id);
			json_object_set_new(o, path, json_string(b->data));
			for (k = 0; k < b->nproviders; k++) {
				const struct imgtree_provider *p = &b->providers[k];
				for (m = 0; m < p->nuploads; m++) {
					if (p->uploads[m].data == NULL)
						continue;
					np_path_upload(path, sizeof(path), im->name, b->id, p->name,
						       p->uploads[m].id);
					json_object_set_new(o, path,
							    json_string(p->uploads[m].data));
				}
			}
		}
	}
	return o;
}

int
imgtree_import_check(const json_t *data, char *err, size_t errlen)
{
	const char *key;
	json_t *v;
	char why[256];

	if (!json_is_object(data)) {
		snprintf(err, errlen, "expected a JSON object of znode paths");
		return -1;
	}
	json_object_foreach((json_t *)data, key, v)
	{
		struct np_path_info pi;
		enum np_path_kind kind = np_path_parse(key, &pi);
		const char *s = json_string_value(v);
		size_t len = json_string_length(v);
		long long seq;

		if (!json_is_string(v)) {
			snprintf(err, errlen, "%.300s: the value is not a string", key);
			return -1;
		}
		switch (kind) {
		case NP_PATH_IMAGE_PAUSE:
			break;
		case NP_PATH_BUILD:
			if (!np_build_id_valid(pi.build)) {
				snprintf(err, errlen, "%.300s: not a build id", key);
				return -1;
			}
			if (len > 0) {
				struct np_image_build *b = NULL;
				if (np_image_build_decode(pi.build, s, len, &b, why, sizeof(why)) !=
				    0) {
					snprintf(err, errlen, "%.300s: %s", key, why);
					return -1;
				}
				np_image_build_free(b);
			}
			break;
		case NP_PATH_UPLOAD:
			if (!np_build_id_valid(pi.build) ||
			    np_upload_id_parse(pi.upload, &seq) != 0 ||
			    seq >= IMGTREE_MAX_UPLOAD_SEQ) {
				snprintf(err, errlen, "%.300s: not a build id and upload number",
					 key);
				return -1;
			}
			if (len > 0) {
				struct np_image_upload *u = NULL;
				if (np_image_upload_decode(pi.upload, s, len, &u, why,
							   sizeof(why)) != 0) {
					snprintf(err, errlen, "%.300s: %s", key, why);
					return -1;
				}
				np_image_upload_free(u);
			}
			break;
		default:
			snprintf(err, errlen,
				 "%.300s: not an image pause flag, build or upload path", key);
			return -1;
		}
	}
	return 0;
}
