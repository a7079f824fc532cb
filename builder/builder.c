/*
 * The builder process: configuration, ZooKeeper session, builder
 * component, and the three duties of upstream's builder.py (reference
 * section 4), each run every `interval` seconds (and at once when
 * something changes) from a snapshot of /nodepool/images
 * (lib/zk/imagetree.h). The snapshot is read again only when the
 * persistent recursive watch on /nodepool/images (zk_watch_tree) reports
 * a change, or after a lost connection or an expiry, whose events are
 * lost; the timer re-runs the time-driven decisions (rebuild-age,
 * cleanup-interval, the config file) on the snapshot in hand, it never
 * polls the tree:
 *
 *   builds   (BuildWorker): per diskimage, unless paused in the config or
 *            by the ZooKeeper pause flag: a manual request (request-build),
 *            no READY build, the newest READY one older than rebuild-age,
 *            or missing a format a provider needs -> take the image's build
 *            lock (non-blocking), re-read, create the build record
 *            (building), hand dib-cmd to a build worker, record READY or
 *            FAILED, remove the request after a READY manual build;
 *   uploads  (UploadWorker): per provider that manages images and each of
 *            its diskimages not paused: the newest READY build whose file
 *            of the provider's format is here and that has no READY upload
 *            there -> take the upload lock (non-blocking), re-read, create
 *            the upload record (uploading), hand it to an upload worker,
 *            record READY (external_id, external_name, format) or FAILED;
 *   cleanup  (CleanupWorker), every `cleanup_interval` seconds: keep the
 *            two newest READY builds of each configured image and the two
 *            newest READY uploads per image and provider; delete in the
 *            cloud, then in ZooKeeper, what is superseded, failed, marked
 *            deleting (`nodepool image-delete`, `dib-image-delete`), left
 *            uploading by a dead upload, of a removed image or no longer in
 *            a provider; remove upload records of providers that left the
 *            configuration (their cloud cannot be reached any more:
 *            upstream leaves them, and the build, forever); mark builds
 *            deleting and remove them once no upload is left; delete local
 *            files of builds that are gone or deleting, and with
 *            delete-after-upload the formats every provider has.
 *
 * The work itself runs in worker processes (pool.c); this process keeps
 * every lock and writes every record, so a crashing worker fails one job
 * and leaves records that say so.
 */
#include "builder/builder.h"

#include <sys/queue.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "lib/core/childproc.h"
#include "lib/config/config.h"
#include "drivers/driver.h"
#include "lib/zk/imagetree.h"
#include "protocol/ipc.h"
#include "lib/core/log.h"
#include "lib/core/memtrim.h"
#include "protocol/model.h"
#include "protocol/paths.h"
#include "lib/ops/statsd.h"
#include "lib/core/strset.h"
#include "lib/core/version.h"
#include "lib/zk/zk.h"
#include "lib/core/clock.h"
#include "lib/zk/zk_status.h"

#define EXIT_PERMANENT	100
#define KEEP_BUILDS	2
#define KEEP_UPLOADS	2
#define UPLOAD_ATTEMPTS 3
/* Uploads of one build to one provider that may fail their validation
 * before the builder waits for the next build (nodepool.yaml(5),
 * `validate`). */
#define VALIDATION_TRIES 3
/* Local files younger than this (seconds) are left to the next cleanup:
 * a build may have finished after the snapshot was read. */
#define LOCAL_FILE_GRACE 1.0

struct task;

struct builder {
	struct event_base *base;
	struct builder_options opt;
	/* configuration */
	struct np_config *cfg;
	int64_t generation;
	struct timespec cfg_mtime, sec_mtime;
	/* nodepoold */
	struct childproc_link *sup; /* or NULL when standalone */
	int ready_sent;
	/* ZooKeeper */
	struct zk *zk;
	char *component_path;
	int component_pending;
	struct comp_check *comp_checks; /* finding out whether a lost create landed */
	int suspended; /* connection lost (or session expired) since last connected */
	char *hostname;
	char builder_id[40];
	/* work */
	struct bpool *builds, *uploads;
	struct statsd *statsd;
	struct event *tick_ev, *soon_ev;
	struct imgtree_load *load;
	struct imgtree *tree; /* the last snapshot, current unless tree_stale */
	int tree_stale;	      /* the watch reported a change since it was asked for */
	int again;	      /* a pass was asked for while one was reading */
	double last_cleanup;
	double snapshot_time;	  /* wall clock when the snapshot in hand was asked for */
	struct strset *building;  /* images with a build of ours in flight */
	struct strset *uploading; /* "image/provider" with an upload of ours in flight */
	TAILQ_HEAD(, task) tasks; /* every build, upload and cleanup step in flight */
	TAILQ_HEAD(, task) acts;  /* cleanup steps waiting their turn */
	int cleanup_running;
	/* counters */
	unsigned long long builds_started, builds_ready, builds_failed;
	unsigned long long uploads_started, uploads_ready, uploads_failed;
	unsigned long long deleted_uploads, deleted_builds, cleanup_passes, passes;
	char last_error[256];
	double start;
	int stopping;
	int exit_code;
};

/* ---- small helpers ------------------------------------------------------------- */

static double
now_wall(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static char *
xstrdup(const char *s)
{
	char *d = strdup(s != NULL ? s : "");

	if (d == NULL)
		abort();
	return d;
}

static void set_error(struct builder *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void
set_error(struct builder *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(b->last_error, sizeof(b->last_error), fmt, ap);
	va_end(ap);
	log_warn("%s", b->last_error);
}

/* mkdir -p */
static int
mkdirs(const char *path)
{
	char buf[4096], *p;

	snprintf(buf, sizeof(buf), "%s", path);
	for (p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) != 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(buf, 0755) != 0 && errno != EEXIST)
		return -1;
	return 0;
}

/*
 * The format a provider takes, as its driver answers (the image_format
 * slot, drivers/driver.h: asked on every pass, so an edited clouds.yaml
 * counts); qcow2 when the driver has no answer, its reason logged once
 * per provider and reason. Returns buf.
 */
static const char *
provider_format(const struct np_provider *p, char *buf, size_t len)
{
	static struct strset *warned; /* "provider: reason" already logged */
	const struct driver *drv = driver_lookup(p->driver != NULL ? p->driver : "openstack");
	char err[300], key[600];

	if (drv != NULL && drv->image_format != NULL &&
	    drv->image_format(p, buf, len, err, sizeof(err)) == 0)
		return buf;
	if (drv == NULL || drv->image_format == NULL)
		snprintf(err, sizeof(err), "driver %s names no image format",
			 p->driver != NULL ? p->driver : "openstack");
	snprintf(key, sizeof(key), "%s: %s", p->name, err);
	if (warned == NULL)
		warned = strset_new();
	if (strset_add(warned, key))
		log_warn("provider %s: %s; uploading qcow2", p->name, err);
	snprintf(buf, len, "qcow2");
	return buf;
}

/* 1 when the provider's driver is built in and can upload images (a
 * state-machine driver whose adapter has upload_image). */
static int
provider_uploads(const struct np_provider *p)
{
	const struct driver *drv = driver_lookup(p->driver != NULL ? p->driver : "openstack");

	return p->manage_images && drv != NULL && drv->image_upload != NULL;
}

static const struct np_provider_image *
provider_diskimage(const struct np_provider *p, const char *image)
{
	size_t i;

	for (i = 0; i < p->ndiskimages; i++)
		if (strcmp(p->diskimages[i].name, image) == 0)
			return &p->diskimages[i];
	return NULL;
}

static int
strv_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The formats to build for d: every managing provider's that uses it, plus
 * d's own formats; sorted. */
static void
needed_formats(const struct np_config *cfg, const struct np_diskimage *d, struct np_strv *out)
{
	char fmt[64];
	size_t i;

	np_strv_clear(out);
	for (i = 0; i < cfg->nproviders; i++) {
		const struct np_provider *p = &cfg->providers[i];
		if (p->manage_images && provider_diskimage(p, d->name) != NULL &&
		    !np_strv_contains(out, provider_format(p, fmt, sizeof(fmt))))
			np_strv_push(out, fmt);
	}
	for (i = 0; i < d->formats.n; i++)
		if (!np_strv_contains(out, d->formats.v[i]))
			np_strv_push(out, d->formats.v[i]);
	if (out->n > 1)
		qsort(out->v, out->n, sizeof(*out->v), strv_cmp);
}

/* The newest READY build (upstream's getMostRecentBuilds(1, READY)). */
static const struct imgtree_build *
newest_ready(const struct imgtree_image *im)
{
	const struct imgtree_build *best = NULL;
	size_t i;

	for (i = 0; im != NULL && i < im->nbuilds; i++) {
		const struct imgtree_build *ib = &im->builds[i];
		if (ib->b == NULL || ib->b->state != NP_BUILD_READY)
			continue;
		if (best == NULL || ib->b->state_time > best->b->state_time)
			best = ib;
	}
	return best;
}

static const struct imgtree_provider *
build_provider(const struct imgtree_build *ib, const char *provider)
{
	size_t i;

	for (i = 0; ib != NULL && i < ib->nproviders; i++)
		if (strcmp(ib->providers[i].name, provider) == 0)
			return &ib->providers[i];
	return NULL;
}

static int
has_ready_upload(const struct imgtree_build *ib, const char *provider)
{
	const struct imgtree_provider *ip = build_provider(ib, provider);
	size_t i;

	for (i = 0; ip != NULL && i < ip->nuploads; i++)
		if (ip->uploads[i].u != NULL && ip->uploads[i].u->state == NP_UPLOAD_READY)
			return 1;
	return 0;
}

/*
 * Validation before service (beyond upstream; man nodepool.yaml(5),
 * `validate`): the builder stores an upload of a diskimage that validates
 * READY with the extra key validation {"state": "pending"}; the launcher
 * of that provider boots a node from it and writes the verdict: READY with
 * "passed", or FAILED with "failed" and the reason. Upstream's readers see
 * an ordinary READY or FAILED upload.
 */
static const char *
upload_validation(const struct np_image_upload *u)
{
	const json_t *v = u != NULL ? json_object_get(u->extra, "validation") : NULL;

	return json_string_value(json_object_get(v, "state"));
}

static int
validation_failed(const struct np_image_upload *u)
{
	const char *v = upload_validation(u);

	return v != NULL && strcmp(v, "failed") == 0;
}

/* 1 when an upload of ib in provider failed its validation and is still
 * there: cleanup deletes it (noting the reason on the build record) before
 * the build is uploaded there again, so tries come at cleanup's pace. */
static int
has_failed_validation(const struct imgtree_build *ib, const char *provider)
{
	const struct imgtree_provider *ip = build_provider(ib, provider);
	size_t i;

	for (i = 0; ip != NULL && i < ip->nuploads; i++) {
		const struct np_image_upload *u = ip->uploads[i].u;
		if (u != NULL && u->state == NP_UPLOAD_FAILED && validation_failed(u))
			return 1;
	}
	return 0;
}

/*
 * A failed validation is noted on the build record before the builder
 * deletes the upload (cloud image and record) and uploads the build again:
 * the build's extra key validation_failures {provider: {count, upload,
 * external_id, reason, time}} keeps the reason and how many uploads of the
 * build failed there. The entry of provider, or NULL.
 */
static const json_t *
build_validation_failure(const struct np_image_build *bd, const char *provider)
{
	return json_object_get(
	    json_object_get(bd != NULL ? bd->extra : NULL, "validation_failures"), provider);
}

/* Uploads of bd that failed their validation in provider. */
static int
validation_tries(const struct np_image_build *bd, const char *provider)
{
	return (int)json_integer_value(
	    json_object_get(build_validation_failure(bd, provider), "count"));
}

/* The provider's diskimage entry's validate, else the diskimage's. */
static int
upload_validates(const struct builder *b, const struct np_provider *p, const char *image)
{
	const struct np_diskimage *d = np_config_diskimage(b->cfg, image);
	size_t i;

	for (i = 0; p != NULL && i < p->ndiskimages; i++)
		if (strcmp(p->diskimages[i].name, image) == 0 && p->diskimages[i].validate >= 0)
			return p->diskimages[i].validate;
	return d != NULL && d->validate;
}

static void
local_path(const struct builder *b, const char *image, const char *build, const char *ext,
	   char *buf, size_t size)
{
	snprintf(buf, size, "%s/%s-%s.%s", b->cfg->images_dir, image, build, ext);
}

/* The first word of a checksum file (md5sum/sha256sum output), or NULL. */
static char *
read_checksum(const char *path, size_t len)
{
	char buf[256];
	FILE *f = fopen(path, "r");
	size_t n;

	if (f == NULL)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	if (n < len)
		return NULL;
	buf[len] = '\0';
	return xstrdup(buf);
}

static void
schedule_soon(struct builder *b)
{
	if (!event_pending(b->soon_ev, EV_TIMEOUT, NULL))
		event_active(b->soon_ev, EV_TIMEOUT, 0);
}

/* ---- tasks: one build, upload or cleanup step in flight ------------------------ */

enum task_kind {
	T_BUILD,
	T_UPLOAD,
	T_UPLOAD_DELETE,  /* cleanup: mark deleting, delete in the cloud, remove */
	T_UPLOAD_CRUFT,	  /* cleanup: remove an uploading record nobody works on */
	T_BUILD_DELETING, /* cleanup: mark a build deleting */
	T_BUILD_REMOVE,	  /* cleanup: remove a build without uploads */
};

struct task {
	TAILQ_ENTRY(task) entry;
	struct builder *b;
	enum task_kind kind;
	int step;
	int rc;
	int queued; /* in b->acts, not b->tasks */
	char *image, *build, *provider, *upload;
	char *data; /* the record's JSON as read */
	struct zk_lock *lock, *lock2;
	struct imgtree_load *load;
	/* build */
	struct np_strv formats;
	char *seen_ready;
	int manual;
	double started;
	/* upload */
	char *format, *external_id, *username, *python_path, *shell_type;
	double upload_start;
	json_t *retry_of; /* {attempt, upload, reason}: the upload before failed its
			     validation (the build record's validation_failures) */
	/* cleanup of an upload that failed its validation */
	char *reason;	   /* the verdict's reason */
	char *build_data;  /* the build record's JSON as read */
	int build_version; /* ... and its version */
	/* job outcome */
	int job_ok;
	json_t *job_result;
	char *job_error;
	/* recording the outcome of a build or upload (finish()) */
	int phase;		/* 0 before the job, 1 job running, 2 recording */
	char *created;		/* the record's JSON as we created it */
	char *final;		/* the record's JSON we mean to leave */
	int relocking;		/* re-taking the lock after it was lost */
	int waiting;		/* recording waits for the lock to be re-taken */
	int reclaimed;		/* the lock was lost and taken again: re-read first */
	int lost;		/* someone else took the lock: the result is not ours */
	int good;		/* the outcome is READY (else FAILED) */
	int tries;		/* re-reads of the record after an unknown outcome */
	int session_lost;	/* an operation reported the session expired: the lock
				   went with it, whatever the lock says yet */
	struct event *retry_ev; /* re-taking the lock again after an error */
};

static void task_run(struct task *t);

static struct task *
task_new(struct builder *b, enum task_kind kind, const char *image)
{
	struct task *t = calloc(1, sizeof(*t));

	if (t == NULL)
		abort();
	t->b = b;
	t->kind = kind;
	t->image = xstrdup(image);
	return t;
}

static void
task_free(struct task *t)
{
	struct builder *b = t->b;

	if (t->queued)
		TAILQ_REMOVE(&b->acts, t, entry);
	else
		TAILQ_REMOVE(&b->tasks, t, entry);
	zk_lock_free(t->lock);
	zk_lock_free(t->lock2);
	imgtree_load_cancel(t->load);
	if (b->zk != NULL)
		zk_cancel(b->zk, t);
	np_strv_clear(&t->formats);
	free(t->image);
	free(t->build);
	free(t->provider);
	free(t->upload);
	free(t->data);
	free(t->seen_ready);
	free(t->format);
	free(t->external_id);
	free(t->username);
	free(t->python_path);
	free(t->shell_type);
	json_decref(t->retry_of);
	free(t->reason);
	free(t->build_data);
	free(t->created);
	free(t->final);
	json_decref(t->job_result);
	free(t->job_error);
	if (t->retry_ev != NULL)
		event_free(t->retry_ev);
	free(t);
}

static void
task_start(struct task *t)
{
	TAILQ_INSERT_TAIL(&t->b->tasks, t, entry);
	task_run(t);
}

/* Callbacks that store the outcome and move the task on. */
static void
t_lock_cb(struct zk_lock *lock, int rc, void *arg)
{
	struct task *t = arg;

	t->rc = rc;
	t->step++;
	task_run(t);
}

static void
t_void_cb(int rc, void *arg)
{
	struct task *t = arg;

	t->rc = rc;
	t->step++;
	task_run(t);
}

static void
t_stat_cb(int rc, const struct zk_stat *st, void *arg)
{
	t_void_cb(rc, arg);
}

static void
t_string_cb(int rc, const char *path, void *arg)
{
	struct task *t = arg;

	if (rc == ZOK && path != NULL && t->kind == T_UPLOAD) {
		const char *slash = strrchr(path, '/');
		free(t->upload);
		t->upload = xstrdup(slash ? slash + 1 : path);
	}
	t_void_cb(rc, arg);
}

static void
t_data_cb(int rc, const char *data, int len, const struct zk_stat *st, void *arg)
{
	struct task *t = arg;

	free(t->data);
	t->data = rc == ZOK ? xstrdup(data) : NULL;
	t_void_cb(rc, arg);
}

/* The build record and its version (t->data keeps the upload's). */
static void
t_build_data_cb(int rc, const char *data, int len, const struct zk_stat *st, void *arg)
{
	struct task *t = arg;

	free(t->build_data);
	t->build_data = rc == ZOK && data != NULL ? xstrdup(data) : NULL;
	t->build_version = rc == ZOK && st != NULL ? st->version : -1;
	t_void_cb(rc, arg);
}

static void t_tree_cb(int rc, struct imgtree *tree, void *arg);

static void
t_job_cb(bool ok, const json_t *result, const char *error, void *arg)
{
	struct task *t = arg;

	t->job_ok = ok;
	json_decref(t->job_result);
	t->job_result = result != NULL ? json_deep_copy(result) : NULL;
	free(t->job_error);
	t->job_error = error != NULL ? xstrdup(error) : NULL;
	t->step++;
	task_run(t);
}

/* The snapshot a task re-checks against after taking its lock. */
static struct imgtree *task_tree_tmp;

static void
t_tree_cb(int rc, struct imgtree *tree, void *arg)
{
	struct task *t = arg;

	t->load = NULL;
	t->rc = rc;
	t->step++;
	task_tree_tmp = tree;
	task_run(t);
	imgtree_free(task_tree_tmp);
	task_tree_tmp = NULL;
}

static void
lock_new(struct task *t, struct zk_lock **slot, const char *path)
{
	zk_lock_free(*slot);
	*slot = zk_lock_new(t->b->zk, path, t->b->hostname, 0);
}

/* ---- recording an outcome across lost connections and sessions -------------------
 *
 * A build or upload job can outlast the ZooKeeper session that took its
 * lock: a partition longer than the session timeout, or a server restart
 * that drops it. Upstream's builder records a build whose session was lost
 * meanwhile as FAILED (its _lost_zk_connection flag) and records an upload
 * READY whatever happened to its lock. We do better on both counts:
 *
 *   - the record is written with version 0, the version we created it
 *     with, so a record someone else changed meanwhile (cleanup, another
 *     builder, `nodepool image-delete`) is never overwritten;
 *   - with the lock still held (the same session, our contender found
 *     again after a lost connection), the outcome is written at once;
 *   - with the lock lost (expired session), it is taken again, non-blocking,
 *     as soon as a new session exists (relock_tasks() on CONNECTED) or when
 *     the job ends; then the tree is re-read and the outcome recorded only
 *     if our record is still as we created it (and, for an upload, the build
 *     is still READY with no other READY upload to that provider);
 *   - when someone else holds the lock, or the record moved on, the result
 *     is not ours: a build's files are removed, an upload's cloud image is
 *     deleted again (no leaked image, no second READY upload), and the
 *     record is left to its new owner or to cleanup;
 *   - a write whose outcome is unknown (the session ended while it was
 *     being sent again, zk_set_retry) is settled the same way: re-read on
 *     the next session, done if it holds our final record.
 *
 * FAILED outcomes are written with version 0 whatever the lock (it is our
 * record); if that fails, cleanup removes the record later.
 */

#define FINISH_TRIES 5

static void finish(struct task *t);
/* recorded: 1 yes, 0 not ours (someone else's lock or record), -1 unknown
 * (ZooKeeper kept failing; the files and the cloud image are left as they
 * are, for cleanup: better a leak than a READY record without its image) */
static void finish_done(struct task *t, int recorded);

static const char *
kind_name(const struct task *t)
{
	return t->kind == T_BUILD ? "build" : "upload";
}

static void
record_path(const struct task *t, char *path, size_t size)
{
	if (t->kind == T_BUILD)
		np_path_build(path, size, t->image, t->build);
	else
		np_path_upload(path, size, t->image, t->build, t->provider, t->upload);
}

static void
task_lock_path(const struct task *t, char *path, size_t size)
{
	if (t->kind == T_BUILD)
		np_path_image_build_lock(path, size, t->image);
	else
		np_path_upload_lock(path, size, t->image, t->build, t->provider);
}

static void relock(struct task *t);

/* Do we hold the task's lock? Not after an operation reported the session
 * expired, even before the lock itself has heard. */
static int
lock_held(const struct task *t)
{
	return t->lock != NULL && !t->session_lost && zk_lock_is_held(t->lock);
}

static void
relock_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	relock(arg);
}

static void
relock_cb(struct zk_lock *lock, int rc, void *arg)
{
	struct task *t = arg;

	t->relocking = 0;
	if (rc == ZOK) {
		t->reclaimed = 1;
		t->session_lost = 0;
		log_info("%s %s-%s%s%s: took the lock %s again", kind_name(t), t->image, t->build,
			 t->provider ? " in " : "", t->provider ? t->provider : "",
			 zk_lock_path(lock));
	} else if (rc == ZK_LOCK_BUSY) {
		t->lost = 1;
		log_warn("%s %s-%s%s%s: the lock %s is someone else's now; the result will not be "
			 "recorded as ours",
			 kind_name(t), t->image, t->build, t->provider ? " in " : "",
			 t->provider ? t->provider : "", zk_lock_path(lock));
	} else {
		struct timeval tv = {1, 0};
		log_warn("%s %s-%s: re-taking the lock %s: %s; trying again", kind_name(t),
			 t->image, t->build, zk_lock_path(lock), zk_strerror(rc));
		if (t->retry_ev == NULL)
			t->retry_ev = evtimer_new(t->b->base, relock_retry_cb, t);
		evtimer_add(t->retry_ev, &tv);
		return;
	}
	if (t->waiting) {
		t->waiting = 0;
		finish(t);
	}
}

/* Take the task's lock again (non-blocking); a no-op while disconnected
 * (relock_tasks() calls it again on the next session). */
static void
relock(struct task *t)
{
	char path[NP_PATH_MAX];

	if (t->relocking || t->lost || t->b->zk == NULL || !zk_is_connected(t->b->zk))
		return;
	if (lock_held(t))
		return;
	task_lock_path(t, path, sizeof(path));
	t->relocking = 1;
	lock_new(t, &t->lock, path);
	zk_lock_acquire(t->lock, 0, relock_cb, t);
}

/* On a new session or a reconnection: every build and upload whose job
 * runs, or whose outcome waits to be recorded, re-checks its lock and takes
 * it again if it was lost (before cleanup or another builder can). */
static void
relock_tasks(struct builder *b)
{
	struct task *t;

	TAILQ_FOREACH(t, &b->tasks, entry)
	if ((t->kind == T_BUILD || t->kind == T_UPLOAD) && t->phase >= 1)
		relock(t);
}

static void
finish_set_cb(int rc, const struct zk_stat *st, void *arg)
{
	struct task *t = arg;
	char path[NP_PATH_MAX];

	record_path(t, path, sizeof(path));
	if (rc == ZOK) {
		finish_done(t, 1);
		return;
	}
	if (rc == ZBADVERSION || rc == ZNONODE) {
		log_warn("%s: changed or removed by someone else meanwhile; not recorded as ours",
			 path);
		finish_done(t, 0);
		return;
	}
	if (!t->good || ++t->tries > FINISH_TRIES) {
		set_error(t->b, "recording %s: %s", path, zk_strerror(rc));
		finish_done(t, t->good ? -1 : 0);
		return;
	}
	/* unknown outcome: re-read (on the next session, if this one ended) */
	log_warn("recording %s: %s; finding out what happened", path, zk_strerror(rc));
	if (rc == ZSESSIONEXPIRED)
		t->session_lost = 1;
	t->reclaimed = 1;
	finish(t);
}

static void
finish_tree_cb(int rc, struct imgtree *tree, void *arg)
{
	struct task *t = arg;
	const struct imgtree_image *im;
	const struct imgtree_build *ib;
	const char *cur = NULL;
	char path[NP_PATH_MAX];
	size_t i;
	int other_ready = 0;

	t->load = NULL;
	if (rc == ZSESSIONEXPIRED)
		t->session_lost = 1;
	if (rc != ZOK) {
		if (++t->tries > FINISH_TRIES) {
			set_error(t->b, "re-reading %s-%s: %s", t->image, t->build,
				  zk_strerror(rc));
			finish_done(t, -1);
		} else
			finish(t);
		return;
	}
	im = imgtree_image(tree, t->image);
	ib = im != NULL ? imgtree_build(im, t->build) : NULL;
	if (t->kind == T_BUILD)
		cur = ib != NULL ? ib->data : NULL;
	else if (ib != NULL) {
		const struct imgtree_provider *ip = build_provider(ib, t->provider);
		for (i = 0; ip != NULL && i < ip->nuploads; i++) {
			const struct imgtree_upload *u = &ip->uploads[i];
			if (strcmp(u->id, t->upload) == 0)
				cur = u->data;
			else if (u->u != NULL && u->u->state == NP_UPLOAD_READY)
				other_ready = 1;
		}
	}
	record_path(t, path, sizeof(path));
	if (cur != NULL && strcmp(cur, t->final) == 0) {
		imgtree_free(tree);
		finish_done(t, 1); /* our write had landed */
		return;
	}
	if (cur == NULL || strcmp(cur, t->created) != 0 ||
	    (t->kind == T_UPLOAD &&
	     (other_ready || ib->b == NULL || ib->b->state != NP_BUILD_READY))) {
		log_warn("%s: %s while our lock was lost; not recorded as ours", path,
			 cur == NULL			? "removed"
			 : strcmp(cur, t->created) != 0 ? "changed"
			 : other_ready			? "another upload became ready"
							: "its build is no longer ready");
		imgtree_free(tree);
		finish_done(t, 0);
		return;
	}
	imgtree_free(tree);
	if (t->lost || !lock_held(t)) { /* lost again while reading */
		finish(t);
		return;
	}
	t->reclaimed = 0;
	zk_set(t->b->zk, path, t->final, (int)strlen(t->final), 0, finish_set_cb, t);
}

/* Record t->final (t->good: READY, else FAILED) as described above; ends
 * in finish_done(). */
static void
finish(struct task *t)
{
	char path[NP_PATH_MAX];

	t->phase = 2;
	if (t->relocking) {
		t->waiting = 1;
		return;
	}
	record_path(t, path, sizeof(path));
	if (!t->good) {
		zk_set(t->b->zk, path, t->final, (int)strlen(t->final), 0, finish_set_cb, t);
		return;
	}
	if (t->lost) {
		finish_done(t, 0);
		return;
	}
	if (!lock_held(t)) {
		log_info("%s: our lock was lost; recording waits until it is taken again", path);
		t->waiting = 1;
		relock(t);
		return;
	}
	if (t->reclaimed) {
		t->load = imgtree_load_start(t->b->zk, finish_tree_cb, t);
		return;
	}
	zk_set(t->b->zk, path, t->final, (int)strlen(t->final), 0, finish_set_cb, t);
}

/* ---- a record created with no reply ----------------------------------------------
 *
 * A create whose reply was lost with the connection may have happened
 * (zk_set_retry never sends creates again: a sequence create could happen
 * twice). Still holding the lock, find out from a re-read: a record of ours
 * (the very JSON we sent, its state_time makes it unique) is adopted, none
 * is created again; without the lock (the session expired) the task ends and
 * cleanup removes what may have landed. */

#define CREATE_TRIES 3

static void
create_path(const struct task *t, char *path, size_t size)
{
	if (t->kind == T_BUILD)
		np_path_build(path, size, t->image, t->build);
	else {
		np_path_uploads(path, size, t->image, t->build, t->provider);
		strncat(path, "/", size - strlen(path) - 1);
	}
}

static void
create_check_cb(int rc, struct imgtree *tree, void *arg)
{
	struct task *t = arg;
	const struct imgtree_image *im;
	const struct imgtree_build *ib;
	const char *found = NULL;
	char path[NP_PATH_MAX];
	size_t i;

	t->load = NULL;
	create_path(t, path, sizeof(path));
	if (rc != ZOK || !lock_held(t)) {
		log_warn("creating %s: the outcome is unknown and %s; left to cleanup", path,
			 rc != ZOK ? zk_strerror(rc) : "the lock is lost");
		imgtree_free(tree);
		t->rc = rc != ZOK ? rc : ZSESSIONEXPIRED;
		t->step = t->kind == T_BUILD ? 4 : 3;
		task_run(t);
		return;
	}
	im = imgtree_image(tree, t->image);
	ib = im != NULL ? imgtree_build(im, t->build) : NULL;
	if (t->kind == T_BUILD) {
		if (ib != NULL && strcmp(ib->data, t->created) == 0)
			found = t->build;
	} else if (ib != NULL) {
		const struct imgtree_provider *ip = build_provider(ib, t->provider);
		for (i = 0; ip != NULL && i < ip->nuploads; i++)
			if (strcmp(ip->uploads[i].data, t->created) == 0)
				found = ip->uploads[i].id;
	}
	if (found != NULL) {
		log_info("creating %s: it had happened (%s); carrying on", path, found);
		if (t->kind == T_UPLOAD) {
			free(t->upload);
			t->upload = xstrdup(found);
		}
		imgtree_free(tree);
		t->rc = ZOK;
		t->step = t->kind == T_BUILD ? 4 : 3;
		task_run(t);
		return;
	}
	imgtree_free(tree);
	log_info("creating %s: it had not happened; again", path);
	t->step = t->kind == T_BUILD ? 3 : 2;
	zk_create(t->b->zk, path, t->created, (int)strlen(t->created),
		  t->kind == T_BUILD ? 0 : ZOO_SEQUENCE, 1, t_string_cb, t);
}

/* After a create failed with rc: 1 if its outcome is being found out (the
 * task goes on from create_check_cb), 0 if rc is a plain failure. */
static int
create_lost(struct task *t)
{
	if ((t->rc != ZCONNECTIONLOSS && t->rc != ZOPERATIONTIMEOUT) || t->created == NULL ||
	    ++t->tries > CREATE_TRIES)
		return 0;
	t->load = imgtree_load_start(t->b->zk, create_check_cb, t);
	return 1;
}

/* ---- builds ------------------------------------------------------------------- */

static void
prune_build_logs(struct builder *b, const char *image)
{
	long long keep = b->cfg->build_log_retention;
	struct dirent *de;
	struct {
		char name[512];
		time_t mtime;
	} *logs = NULL;
	size_t n = 0, cap = 0, i, j, plen = strlen(image);
	DIR *d;

	if (keep < 0)
		return;
	if (keep < 1)
		keep = 1;
	d = opendir(b->cfg->build_log_dir);
	if (d == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		char path[4096];
		struct stat st;
		size_t len = strlen(de->d_name);
		if (len <= plen + 5 || strncmp(de->d_name, image, plen) != 0 ||
		    de->d_name[plen] != '-' || strcmp(de->d_name + len - 4, ".log") != 0 ||
		    len >= sizeof(logs->name))
			continue;
		/* <image>-<build id>.log: the id has no '-' */
		if (memchr(de->d_name + plen + 1, '-', len - plen - 5) != NULL)
			continue;
		snprintf(path, sizeof(path), "%s/%s", b->cfg->build_log_dir, de->d_name);
		if (stat(path, &st) != 0)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			logs = realloc(logs, cap * sizeof(*logs));
			if (logs == NULL)
				abort();
		}
		snprintf(logs[n].name, sizeof(logs[n].name), "%s", de->d_name);
		logs[n].mtime = st.st_mtime;
		n++;
	}
	closedir(d);
	/* newest first */
	for (i = 1; i < n; i++)
		for (j = i; j > 0 && logs[j].mtime > logs[j - 1].mtime; j--) {
			__typeof__(*logs) tmp = logs[j];
			logs[j] = logs[j - 1];
			logs[j - 1] = tmp;
		}
	for (i = (size_t)keep; i < n; i++) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/%s", b->cfg->build_log_dir, logs[i].name);
		if (unlink(path) == 0)
			log_info("removed old build log %s", path);
	}
	free(logs);
}

/* Split s at whitespace into argv (dib-cmd and elements, as shlex would
 * for unquoted words). */
static void
push_words(json_t *argv, const char *s, const char *pkgdir)
{
	char *copy = xstrdup(s), *save = NULL, *w;

	for (w = strtok_r(copy, " \t\n", &save); w != NULL; w = strtok_r(NULL, " \t\n", &save)) {
		char *pct = strstr(w, "%p");
		if (pct != NULL) {
			char buf[4096];
			snprintf(buf, sizeof(buf), "%.*s%s%s", (int)(pct - w), w, pkgdir, pct + 2);
			json_array_append_new(argv, json_string(buf));
		} else
			json_array_append_new(argv, json_string(w));
	}
	free(copy);
}

/* The build job: dib-cmd's argv and environment, as upstream's _buildImage. */
static json_t *
build_spec(struct builder *b, const struct np_diskimage *d, const char *build_id,
	   const struct np_strv *formats)
{
	json_t *argv = json_array(), *env = json_object();
	char base[4096], logp[4096], types[1024] = "", pkgdir[4096];
	const char *k, *slash;
	json_t *v;
	size_t i;
	int qcow2 = 0;

	snprintf(base, sizeof(base), "%s/%s-%s", b->cfg->images_dir, d->name, build_id);
	snprintf(logp, sizeof(logp), "%s/%s-%s.log", b->cfg->build_log_dir, d->name, build_id);
	for (i = 0; i < formats->n; i++) {
		snprintf(types + strlen(types), sizeof(types) - strlen(types), "%s%s", i ? "," : "",
			 formats->v[i]);
		qcow2 |= strcmp(formats->v[i], "qcow2") == 0;
	}
	slash = strrchr(b->opt.exe, '/');
	snprintf(pkgdir, sizeof(pkgdir), "%.*s", slash ? (int)(slash - b->opt.exe) : 1,
		 slash ? b->opt.exe : ".");
	push_words(argv, d->dib_cmd, pkgdir);
	json_array_append_new(argv, json_string("-x"));
	json_array_append_new(argv, json_string("-t"));
	json_array_append_new(argv, json_string(types));
	json_array_append_new(argv, json_string("--checksum"));
	json_array_append_new(argv, json_string("--no-tmpfs"));
	if (qcow2) {
		json_array_append_new(argv, json_string("--qemu-img-options"));
		json_array_append_new(argv, json_string("compat=0.10"));
	}
	json_array_append_new(argv, json_string("-o"));
	json_array_append_new(argv, json_string(base));
	for (i = 0; i < d->elements.n; i++)
		push_words(argv, d->elements.v[i], pkgdir);
	json_object_set_new(env, "DIB_RELEASE", json_string(d->release ? d->release : ""));
	json_object_set_new(env, "DIB_IMAGE_NAME", json_string(d->name));
	json_object_set_new(env, "DIB_IMAGE_FILENAME", json_string(base));
	if (b->cfg->elements_dir != NULL)
		json_object_set_new(env, "ELEMENTS_PATH", json_string(b->cfg->elements_dir));
	json_object_foreach(d->env_vars, k, v)
	{
		if (json_is_string(v))
			json_object_set(env, k, v);
	}
	return json_pack("{s:o, s:o, s:s, s:I}", "argv", argv, "env", env, "log", logp, "timeout",
			 (json_int_t)d->build_timeout);
}

static void
build_release(struct task *t)
{
	strset_del(t->b->building, t->image);
	task_free(t);
}

/* Size on disk (allocated bytes, as upstream's st_blocks * 512). */
static long long
allocated(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (long long)st.st_blocks * 512 : -1;
}

static void
build_stats(struct task *t, int rc, double duration, int ready)
{
	struct builder *b = t->b;
	char key[512], path[4096];
	size_t i;

	if (b->statsd == NULL)
		return;
	if (ready)
		for (i = 0; i < t->formats.n; i++) {
			long long sz;
			local_path(b, t->image, t->build, t->formats.v[i], path, sizeof(path));
			if ((sz = allocated(path)) < 0)
				continue;
			snprintf(key, sizeof(key), "nodepool.dib_image_build.%s.%s.size", t->image,
				 t->formats.v[i]);
			statsd_gauge(b->statsd, key, (double)sz);
		}
	snprintf(key, sizeof(key), "nodepool.dib_image_build.%s.status.duration", t->image);
	statsd_timing(b->statsd, key, duration * 1000.0);
	snprintf(key, sizeof(key), "nodepool.dib_image_build.%s.status.rc", t->image);
	statsd_gauge(b->statsd, key, rc);
	snprintf(key, sizeof(key), "nodepool.dib_image_build.%s.status.last_build", t->image);
	statsd_gauge(b->statsd, key, (double)(long long)now_wall());
	statsd_flush(b->statsd);
}

static void delete_local_build(struct builder *b, const char *image, const char *build);

/* A build, step by step (upstream's _checkImageFor*ImageUpdates,
 * _buildWrapper, _buildImage). */
static void
run_build(struct task *t)
{
	struct builder *b = t->b;
	const struct np_diskimage *d = np_config_diskimage(b->cfg, t->image);
	char path[NP_PATH_MAX];
	struct np_image_build *rec;
	char *json;
	size_t len;

	switch (t->step) {
	case 0: /* take the image's build lock, non-blocking */
		np_path_image_build_lock(path, sizeof(path), t->image);
		lock_new(t, &t->lock, path);
		zk_lock_acquire(t->lock, 0, t_lock_cb, t);
		return;
	case 1:
		if (t->rc != ZOK) {
			if (t->rc != ZK_LOCK_BUSY)
				set_error(b, "build lock of %s: %s", t->image, zk_strerror(t->rc));
			build_release(t);
			return;
		}
		/* re-read: another builder may have built it meanwhile */
		t->load = imgtree_load_start(b->zk, t_tree_cb, t);
		return;
	case 2: {
		const struct imgtree_image *im;
		const struct imgtree_build *nr;
		if (t->rc != ZOK || d == NULL) {
			build_release(t);
			return;
		}
		im = imgtree_image(task_tree_tmp, t->image);
		nr = newest_ready(im);
		if ((im != NULL && im->paused) || d->pause) {
			build_release(t);
			return;
		}
		if (t->manual ? im == NULL || !im->has_request
			      : (nr != NULL &&
				 (t->seen_ready == NULL || strcmp(nr->id, t->seen_ready) != 0))) {
			log_debug("image %s: built elsewhere meanwhile", t->image);
			build_release(t);
			return;
		}
		t->manual = im != NULL && im->has_request;
		/* the record, building */
		t->build = malloc(33);
		if (t->build == NULL || np_uuid4_hex(t->build) != 0)
			abort();
		rec = np_image_build_new();
		rec->builder = xstrdup(b->hostname);
		rec->builder_id = xstrdup(b->builder_id);
		np_strv_copy(&rec->formats, &t->formats);
		np_image_build_set_state(rec, NP_BUILD_BUILDING);
		json = np_image_build_encode(rec, &len);
		np_image_build_free(rec);
		np_path_build(path, sizeof(path), t->image, t->build);
		t->step = 3;
		free(t->created);
		t->created = xstrdup(json);
		zk_create(b->zk, path, json, (int)len, 0, 1, t_string_cb, t);
		free(json);
		return;
	}
	case 4:
		if (t->rc != ZOK && create_lost(t))
			return;
		t->tries = 0;
		if (t->rc != ZOK) {
			set_error(b, "storing build %s-%s: %s", t->image, t->build,
				  zk_strerror(t->rc));
			build_release(t);
			return;
		}
		b->builds_started++;
		prune_build_logs(b, t->image);
		{
			json_t *spec = build_spec(b, d, t->build, &t->formats);
			log_info(
			    "building image %s, build %s (%s)%s", t->image, t->build,
			    json_string_value(json_array_get(json_object_get(spec, "argv"), 0)),
			    t->manual ? ", requested" : "");
			t->started = np_mono_s();
			t->phase = 1;
			bpool_submit(b->builds, "build", spec, t_job_cb, t);
			json_decref(spec);
		}
		return;
	case 5: { /* the build is over: READY or FAILED */
		int rc = -1, ok;
		double duration = np_mono_s() - t->started;
		if (t->job_ok)
			rc = (int)json_integer_value(json_object_get(t->job_result, "rc"));
		ok = t->job_ok && rc == 0;
		rec = np_image_build_new();
		rec->builder = xstrdup(b->hostname);
		rec->builder_id = xstrdup(b->builder_id);
		if (ok) {
			np_strv_copy(&rec->formats, &t->formats);
			free(rec->username);
			rec->username = d != NULL ? xstrdup(d->username) : xstrdup("zuul");
			rec->python_path = d != NULL ? xstrdup(d->python_path) : NULL;
			rec->shell_type =
			    d != NULL && d->shell_type ? xstrdup(d->shell_type) : NULL;
		} else {
			b->builds_failed++;
			set_error(b, "image %s build %s failed: %s", t->image, t->build,
				  !t->job_ok ? t->job_error
				  : json_is_true(json_object_get(t->job_result, "timed_out"))
				      ? "build-timeout"
				      : "dib-cmd failed (see the build log)");
		}
		np_image_build_set_state(rec, ok ? NP_BUILD_READY : NP_BUILD_FAILED);
		build_stats(t, rc, duration, ok);
		t->good = ok;
		free(t->final);
		t->final = np_image_build_encode(rec, &len);
		np_image_build_free(rec);
		finish(t); /* then finish_done(), step 6 */
		return;
	}
	case 6:
		if (t->job_ok && t->manual) {
			np_path_image_request_build(path, sizeof(path), t->image);
			zk_delete(b->zk, path, -1, 0, t_void_cb, t);
			return;
		}
		t->step++;
		/* fall through */
	case 7:
		build_release(t);
		schedule_soon(b); /* uploads can start now */
		return;
	}
}

/* A build's outcome is recorded (or, recorded 0, is not ours). */
static void
build_finished(struct task *t, int recorded)
{
	struct builder *b = t->b;

	if (t->good && recorded > 0) {
		b->builds_ready++;
		log_info("image %s build %s is ready (%.1fs)", t->image, t->build,
			 np_mono_s() - t->started);
	} else if (t->good && recorded == 0) {
		/* as upstream: a build not recorded as ours leaves no files */
		b->builds_failed++;
		set_error(b, "image %s build %s: not recorded (ZooKeeper session or lock lost)",
			  t->image, t->build);
		delete_local_build(b, t->image, t->build);
	} else if (t->good)
		b->builds_failed++;
	t->job_ok = t->good && recorded > 0;
	t->step = 6;
	run_build(t);
}

static void
check_build(struct builder *b, const struct imgtree *tree, const struct np_diskimage *d)
{
	const struct imgtree_image *im = imgtree_image(tree, d->name);
	const struct imgtree_build *nr = newest_ready(im);
	struct np_strv formats = {NULL, 0};
	int manual, need;
	size_t i;
	struct task *t;

	if (strset_has(b->building, d->name) || d->pause || (im != NULL && im->paused))
		return;
	needed_formats(b->cfg, d, &formats);
	if (formats.n == 0) /* as upstream: nothing asks for it */
		return;
	manual = im != NULL && im->has_request;
	need = manual || nr == NULL || now_wall() - nr->b->state_time >= (double)d->rebuild_age;
	for (i = 0; !need && i < formats.n; i++)
		need = !np_strv_contains(&nr->b->formats, formats.v[i]);
	/* every build task holds a worker from its lock to its record */
	if (!need || (int)strset_count(b->building) >= b->opt.build_workers) {
		np_strv_clear(&formats);
		return;
	}
	t = task_new(b, T_BUILD, d->name);
	t->formats = formats;
	t->manual = manual;
	t->seen_ready = nr != NULL ? xstrdup(nr->id) : NULL;
	strset_add(b->building, d->name);
	task_start(t);
}

/* ---- uploads ------------------------------------------------------------------ */

static void
upload_release(struct task *t)
{
	char key[1024];

	snprintf(key, sizeof(key), "%s/%s", t->image, t->provider);
	strset_del(t->b->uploading, key);
	task_free(t);
}

/* image-name-format with {image_name}, {upload_id}, {timestamp}. */
static void
external_name(const char *fmt, const char *image, const char *upload_id, char *out, size_t size)
{
	char ts[32];
	size_t o = 0;

	snprintf(ts, sizeof(ts), "%lld", (long long)now_wall());
	while (*fmt && o + 1 < size) {
		const char *rep = NULL;
		size_t skip = 0;
		if (strncmp(fmt, "{image_name}", 12) == 0)
			rep = image, skip = 12;
		else if (strncmp(fmt, "{upload_id}", 11) == 0)
			rep = upload_id, skip = 11;
		else if (strncmp(fmt, "{timestamp}", 11) == 0)
			rep = ts, skip = 11;
		if (rep != NULL) {
			o += (size_t)snprintf(out + o, size - o, "%s", rep);
			if (o >= size)
				o = size - 1;
			fmt += skip;
		} else
			out[o++] = *fmt++;
	}
	out[o] = '\0';
}

static json_t *
provider_config_json(const struct np_provider *p)
{
	json_t *cfg = np_cfg_to_json(p->raw);

	/* the fake cloud's state-file is the launcher's picture of it */
	json_object_del(cfg, "state-file");
	json_object_del(cfg, "persistent");
	return cfg;
}

static json_t *
upload_spec(struct builder *b, struct task *t, const struct np_provider *p)
{
	const struct np_diskimage *d = np_config_diskimage(b->cfg, t->image);
	const struct np_provider_image *pi = provider_diskimage(p, t->image);
	json_t *meta = json_object();
	char file[4096], sum[4200], name[1024];
	char *md5, *sha256;
	json_t *spec;

	if (d != NULL && d->metadata != NULL)
		json_object_update(meta, d->metadata);
	if (pi != NULL && pi->meta != NULL)
		json_object_update(meta, pi->meta);
	json_object_set_new(meta, "nodepool_build_id", json_string(t->build));
	json_object_set_new(meta, "nodepool_upload_id", json_string(t->upload));
	json_object_set_new(meta, "nodepool_provider_name", json_string(p->name));
	local_path(b, t->image, t->build, t->format, file, sizeof(file));
	snprintf(sum, sizeof(sum), "%s.md5", file);
	md5 = read_checksum(sum, 32);
	snprintf(sum, sizeof(sum), "%s.sha256", file);
	sha256 = read_checksum(sum, 64);
	external_name(p->image_name_format ? p->image_name_format : "{image_name}-{timestamp}",
		      t->image, t->upload, name, sizeof(name));
	free(t->external_id);
	t->external_id = xstrdup(name); /* the external name, until the cloud names it */
	spec = json_pack(
	    "{s:s, s:o, s:s, s:s, s:s, s:s, s:o, s:s?, s:s?, s:I, s:i, s:f, s:s?}", "provider",
	    p->name, "config", provider_config_json(p), "image", t->image, "image_name", name,
	    "filename", file, "format", t->format, "metadata", meta, "md5", md5, "sha256", sha256,
	    "timeout", (json_int_t)p->image_upload_timeout, "retries", UPLOAD_ATTEMPTS,
	    "retry_delay", b->opt.upload_retry_delay, "post_upload_hook", p->post_upload_hook);
	free(md5);
	free(sha256);
	return spec;
}

/* An upload, step by step (upstream's _checkProviderImageUpload,
 * _uploadImage). */
static void
run_upload(struct task *t)
{
	struct builder *b = t->b;
	const struct np_provider *p = np_config_provider(b->cfg, t->provider);
	char path[NP_PATH_MAX];
	struct np_image_upload *rec;
	char *json;
	size_t len;

	switch (t->step) {
	case 0:
		np_path_upload_lock(path, sizeof(path), t->image, t->build, t->provider);
		lock_new(t, &t->lock, path);
		zk_lock_acquire(t->lock, 0, t_lock_cb, t);
		return;
	case 1:
		if (t->rc != ZOK) {
			if (t->rc != ZK_LOCK_BUSY)
				set_error(b, "upload lock of %s-%s in %s: %s", t->image, t->build,
					  t->provider, zk_strerror(t->rc));
			upload_release(t);
			return;
		}
		t->load = imgtree_load_start(b->zk, t_tree_cb, t);
		return;
	case 2: {
		const struct imgtree_image *im;
		const struct imgtree_build *ib;
		if (t->rc != ZOK || p == NULL) {
			upload_release(t);
			return;
		}
		im = imgtree_image(task_tree_tmp, t->image);
		ib = im != NULL ? imgtree_build(im, t->build) : NULL;
		/* uploaded meanwhile, or being deleted: nothing to do */
		if (ib == NULL || ib->b == NULL || ib->b->state != NP_BUILD_READY ||
		    has_ready_upload(ib, t->provider)) {
			upload_release(t);
			return;
		}
		rec = np_image_upload_new();
		np_image_upload_set_state(rec, NP_UPLOAD_UPLOADING);
		{
			const json_t *f = build_validation_failure(ib->b, t->provider);
			json_decref(t->retry_of);
			t->retry_of =
			    f == NULL
				? NULL
				: json_pack(
				      "{s:I, s:s?, s:s?}", "attempt",
				      (json_int_t)validation_tries(ib->b, t->provider) + 1,
				      "upload", json_string_value(json_object_get(f, "upload")),
				      "reason", json_string_value(json_object_get(f, "reason")));
			if (t->retry_of != NULL) {
				rec->extra = json_object();
				json_object_set(rec->extra, "retry_of", t->retry_of);
			}
		}
		rec->username = ib->b->username ? xstrdup(ib->b->username) : NULL;
		rec->python_path = ib->b->python_path ? xstrdup(ib->b->python_path) : NULL;
		rec->shell_type = ib->b->shell_type ? xstrdup(ib->b->shell_type) : NULL;
		t->username = rec->username ? xstrdup(rec->username) : NULL;
		t->python_path = rec->python_path ? xstrdup(rec->python_path) : NULL;
		t->shell_type = rec->shell_type ? xstrdup(rec->shell_type) : NULL;
		json = np_image_upload_encode(rec, &len);
		np_image_upload_free(rec);
		free(t->created);
		t->created = xstrdup(json);
		np_path_uploads(path, sizeof(path), t->image, t->build, t->provider);
		strcat(path, "/");
		zk_create(b->zk, path, json, (int)len, ZOO_SEQUENCE, 1, t_string_cb, t);
		free(json);
		return;
	}
	case 3: {
		json_t *spec;
		if (t->rc != ZOK && create_lost(t))
			return;
		t->tries = 0;
		if (t->rc != ZOK) {
			set_error(b, "storing the upload of %s-%s to %s: %s", t->image, t->build,
				  t->provider, zk_strerror(t->rc));
			upload_release(t);
			return;
		}
		b->uploads_started++;
		spec = upload_spec(b, t, p);
		log_info("uploading image %s build %s to %s (upload %s, %s)", t->image, t->build,
			 t->provider, t->upload, t->format);
		t->upload_start = np_mono_s();
		t->phase = 1;
		bpool_submit(b->uploads, "upload", spec, t_job_cb, t);
		json_decref(spec);
		return;
	}
	case 4: {
		const char *ext = json_string_value(json_object_get(t->job_result, "external_id"));
		int ok = t->job_ok && ext != NULL;
		rec = np_image_upload_new();
		if (ok) {
			rec->external_id = xstrdup(ext);
			rec->external_name = xstrdup(t->external_id);
			rec->format = xstrdup(t->format);
			rec->username = t->username ? xstrdup(t->username) : NULL;
			rec->python_path = t->python_path ? xstrdup(t->python_path) : NULL;
			rec->shell_type = t->shell_type ? xstrdup(t->shell_type) : NULL;
			free(t->external_id);
			t->external_id = xstrdup(ext);
			if (t->retry_of != NULL) {
				rec->extra = json_object();
				json_object_set(rec->extra, "retry_of", t->retry_of);
			}
			if (upload_validates(b, p, t->image)) {
				if (rec->extra == NULL)
					rec->extra = json_object();
				json_object_set_new(rec->extra, "validation",
						    json_pack("{s:s}", "state", "pending"));
				log_info("upload %s of %s-%s to %s waits for its validation",
					 t->upload, t->image, t->build, t->provider);
			}
		} else {
			b->uploads_failed++;
			set_error(b, "upload of %s-%s to %s failed: %s", t->image, t->build,
				  t->provider, t->job_error ? t->job_error : "no external id");
		}
		np_image_upload_set_state(rec, ok ? NP_UPLOAD_READY : NP_UPLOAD_FAILED);
		t->good = ok;
		free(t->final);
		t->final = np_image_upload_encode(rec, &len);
		np_image_upload_free(rec);
		finish(t); /* then upload_finished() */
		return;
	}
	case 5: /* not ours: the cloud image goes again */
		if (p != NULL && provider_uploads(p)) {
			json_t *spec =
			    json_pack("{s:s, s:o, s:s}", "provider", p->name, "config",
				      provider_config_json(p), "external_id", t->external_id);
			log_info(
			    "deleting image %s from %s again (upload %s of %s-%s not recorded)",
			    t->external_id, t->provider, t->upload, t->image, t->build);
			bpool_submit(b->uploads, "delete-image", spec, t_job_cb, t);
			json_decref(spec);
			return;
		}
		set_error(b, "image %s in %s is left: the provider is gone from the configuration",
			  t->external_id, t->provider);
		upload_release(t);
		return;
	case 6:
		if (!t->job_ok)
			set_error(b, "deleting image %s from %s: %s", t->external_id, t->provider,
				  t->job_error ? t->job_error : "?");
		upload_release(t);
		return;
	}
}

/* An upload's outcome is recorded (or, recorded 0, is not ours). */
static void
upload_finished(struct task *t, int recorded)
{
	struct builder *b = t->b;
	char key[512];

	if (t->good && recorded > 0) {
		b->uploads_ready++;
		log_info("image %s build %s in %s is ready: %s (upload %s)", t->image, t->build,
			 t->provider, t->external_id, t->upload);
		if (b->statsd != NULL) {
			snprintf(key, sizeof(key), "nodepool.image_update.%s.%s", t->image,
				 t->provider);
			statsd_timing(b->statsd, key, (np_mono_s() - t->upload_start) * 1000.0);
			statsd_incr(b->statsd, key, 1);
			statsd_flush(b->statsd);
		}
	} else if (t->good && recorded == 0) {
		b->uploads_failed++;
		set_error(b,
			  "upload %s of %s-%s to %s: not recorded (ZooKeeper session or lock "
			  "lost); its image %s is deleted again",
			  t->upload, t->image, t->build, t->provider, t->external_id);
		t->step = 5;
		run_upload(t);
		return;
	} else if (t->good)
		b->uploads_failed++;
	upload_release(t);
	schedule_soon(b);
}

static void
finish_done(struct task *t, int recorded)
{
	t->waiting = 0;
	if (t->kind == T_BUILD)
		build_finished(t, recorded);
	else
		upload_finished(t, recorded);
}

static void
check_upload(struct builder *b, const struct imgtree *tree, const struct np_provider *p,
	     const struct np_provider_image *pi)
{
	const struct imgtree_image *im = imgtree_image(tree, pi->name);
	const struct imgtree_build *nr = newest_ready(im);
	char fbuf[64];
	const char *fmt = provider_format(p, fbuf, sizeof(fbuf));
	char key[1024], file[4096];
	struct task *t;

	snprintf(key, sizeof(key), "%s/%s", pi->name, p->name);
	if (pi->pause || nr == NULL || strset_has(b->uploading, key))
		return;
	if (!provider_uploads(p)) {
		log_debug("provider %s: its driver (%s) cannot upload images here", p->name,
			  p->driver);
		return;
	}
	/* a failed validation: cleanup deletes that upload, then this build
	 * is uploaded again, VALIDATION_TRIES times in all */
	if (has_ready_upload(nr, p->name) || has_failed_validation(nr, p->name) ||
	    validation_tries(nr->b, p->name) >= VALIDATION_TRIES ||
	    !np_strv_contains(&nr->b->formats, fmt))
		return;
	local_path(b, pi->name, nr->id, fmt, file, sizeof(file));
	if (access(file, R_OK) != 0) /* only the builder with the files uploads */
		return;
	if ((int)strset_count(b->uploading) >= b->opt.upload_workers)
		return;
	t = task_new(b, T_UPLOAD, pi->name);
	t->build = xstrdup(nr->id);
	t->provider = xstrdup(p->name);
	t->format = xstrdup(fmt);
	strset_add(b->uploading, key);
	task_start(t);
}

/* ---- cleanup ------------------------------------------------------------------ */

static void act_next(struct builder *b);

static void
act_done(struct task *t)
{
	struct builder *b = t->b;

	task_free(t);
	act_next(b);
}

static void
act_queue(struct builder *b, enum task_kind kind, const char *image, const char *build,
	  const char *provider, const char *upload, const char *data)
{
	struct task *t = task_new(b, kind, image);

	t->build = build ? xstrdup(build) : NULL;
	t->provider = provider ? xstrdup(provider) : NULL;
	t->upload = upload ? xstrdup(upload) : NULL;
	t->data = data ? xstrdup(data) : NULL;
	t->queued = 1;
	TAILQ_INSERT_TAIL(&b->acts, t, entry);
}

static void
act_next(struct builder *b)
{
	struct task *t = TAILQ_FIRST(&b->acts);

	if (t == NULL || b->stopping || b->zk == NULL) {
		b->cleanup_running = 0;
		return;
	}
	TAILQ_REMOVE(&b->acts, t, entry);
	t->queued = 0;
	task_start(t);
}

/* Re-encode an upload record with a new state. NULL when unreadable. */
static char *
upload_with_state(const struct task *t, int state, size_t *len)
{
	struct np_image_upload *u = NULL;
	char err[256], *json;

	if (t->data == NULL ||
	    np_image_upload_decode(t->upload, t->data, strlen(t->data), &u, err, sizeof(err)) != 0)
		return NULL;
	np_image_upload_set_state(u, state);
	json = np_image_upload_encode(u, len);
	np_image_upload_free(u);
	return json;
}

/*
 * Delete one upload (upstream's _deleteUpload): unless it is already
 * deleting, and unless it is in progress (uploading under a held upload
 * lock), mark it deleting under its upload-number lock; then delete the
 * image in the cloud (through an upload worker) and remove the record.
 */
static void
run_upload_delete(struct task *t)
{
	struct builder *b = t->b;
	const struct np_provider *p = np_config_provider(b->cfg, t->provider);
	struct np_image_upload *u = NULL;
	char path[NP_PATH_MAX], err[256], *json;
	size_t len;

	switch (t->step) {
	case 0:
		if (t->data == NULL || np_image_upload_decode(t->upload, t->data, strlen(t->data),
							      &u, err, sizeof(err)) != 0) {
			/* a malformed record: nothing to delete in the cloud */
			t->step = 7;
			run_upload_delete(t);
			return;
		}
		t->rc = u->state;
		free(t->external_id);
		t->external_id = u->external_id ? xstrdup(u->external_id) : NULL;
		if (u->state == NP_UPLOAD_FAILED && validation_failed(u)) {
			const char *why = json_string_value(
			    json_object_get(json_object_get(u->extra, "validation"), "reason"));
			free(t->reason);
			t->reason = xstrdup(why != NULL ? why : "?");
		}
		np_image_upload_free(u);
		if (t->reason != NULL) {
			/* note it on the build record first (steps 10-12) */
			np_path_build(path, sizeof(path), t->image, t->build);
			t->step = 10;
			zk_get(b->zk, path, NULL, NULL, t_build_data_cb, t);
			return;
		}
		if (t->rc == NP_UPLOAD_DELETING) {
			t->step = 5;
			run_upload_delete(t);
			return;
		}
		if (t->rc == NP_UPLOAD_UPLOADING) {
			/* in progress when someone holds the upload lock */
			np_path_upload_lock(path, sizeof(path), t->image, t->build, t->provider);
			lock_new(t, &t->lock2, path);
			zk_lock_acquire(t->lock2, 0, t_lock_cb, t);
			return;
		}
		t->rc = ZOK;
		t->step = 1;
		/* fall through */
	case 1:
		if (t->rc != ZOK) {
			act_done(t);
			return;
		}
		np_path_upload_id_lock(path, sizeof(path), t->image, t->build, t->provider,
				       t->upload);
		lock_new(t, &t->lock, path);
		zk_lock_acquire(t->lock, 0, t_lock_cb, t);
		return;
	case 2:
		if (t->rc != ZOK) {
			act_done(t);
			return;
		}
		json = upload_with_state(t, NP_UPLOAD_DELETING, &len);
		np_path_upload(path, sizeof(path), t->image, t->build, t->provider, t->upload);
		zk_set(b->zk, path, json, (int)len, -1, t_stat_cb, t);
		free(json);
		return;
	case 3:
		t->job_ok = t->rc == ZOK;
		zk_lock_release(t->lock, t_void_cb, t);
		return;
	case 4:
		if (!t->job_ok) {
			act_done(t);
			return;
		}
		t->step = 5;
		/* fall through */
	case 5: /* deleting: the cloud first */
		if (t->external_id != NULL && p != NULL && provider_uploads(p)) {
			json_t *spec =
			    json_pack("{s:s, s:o, s:s}", "provider", p->name, "config",
				      provider_config_json(p), "external_id", t->external_id);
			log_info("deleting image build %s-%s from %s (%s)", t->image, t->build,
				 t->provider, t->external_id);
			bpool_submit(b->uploads, "delete-image", spec, t_job_cb, t);
			json_decref(spec);
			return;
		}
		if (t->external_id != NULL)
			log_warn("upload %s of %s-%s: provider %s is %s; the record is removed, "
				 "the cloud image %s is left to its owner",
				 t->upload, t->image, t->build, t->provider,
				 p == NULL ? "no longer configured" : "out of this builder's reach",
				 t->external_id);
		t->job_ok = 1;
		t->step = 6;
		/* fall through */
	case 6:
		if (!t->job_ok) {
			set_error(b, "deleting image %s from %s: %s", t->external_id, t->provider,
				  t->job_error ? t->job_error : "?");
			act_done(t); /* retried on the next pass */
			return;
		}
		/* fall through */
	case 7: /* the record, under the upload-number lock */
		np_path_upload_id_lock(path, sizeof(path), t->image, t->build, t->provider,
				       t->upload);
		lock_new(t, &t->lock, path);
		t->step = 7;
		zk_lock_acquire(t->lock, 0, t_lock_cb, t);
		return;
	case 8:
		if (t->rc != ZOK) {
			act_done(t);
			return;
		}
		np_path_upload(path, sizeof(path), t->image, t->build, t->provider, t->upload);
		zk_delete(b->zk, path, -1, 1, t_void_cb, t);
		return;
	case 9:
		zk_lock_disown(t->lock); /* its contender went with the record */
		if (t->rc == ZOK || t->rc == ZNONODE) {
			b->deleted_uploads++;
			log_info("removed upload %s of %s-%s in %s", t->upload, t->image, t->build,
				 t->provider);
		} else
			set_error(b, "removing upload %s: %s", t->upload, zk_strerror(t->rc));
		act_done(t);
		return;
	case 11: { /* a failed validation: note it on the build record */
		struct np_image_build *bd = NULL;
		const json_t *f;
		json_t *all;
		int tries;
		if (t->rc != ZOK || t->build_data == NULL ||
		    np_image_build_decode(t->build, t->build_data, strlen(t->build_data), &bd, err,
					  sizeof(err)) != 0) {
			np_image_build_free(bd);
			act_done(t); /* the next pass tries again */
			return;
		}
		f = build_validation_failure(bd, t->provider);
		tries = validation_tries(bd, t->provider);
		if (f != NULL && json_string_value(json_object_get(f, "upload")) != NULL &&
		    strcmp(json_string_value(json_object_get(f, "upload")), t->upload) == 0) {
			/* noted by an earlier pass whose delete did not finish */
			np_image_build_free(bd);
			t->rc = ZOK;
			t->step = 1;
			run_upload_delete(t);
			return;
		}
		tries++;
		if (bd->extra == NULL)
			bd->extra = json_object();
		all = json_object_get(bd->extra, "validation_failures");
		if (!json_is_object(all)) {
			all = json_object();
			json_object_set_new(bd->extra, "validation_failures", all);
		}
		json_object_set_new(all, t->provider,
				    json_pack("{s:I, s:s, s:s?, s:s, s:I}", "count",
					      (json_int_t)tries, "upload", t->upload, "external_id",
					      t->external_id, "reason", t->reason, "time",
					      (json_int_t)now_wall()));
		json = np_image_build_encode(bd, &len);
		np_image_build_free(bd);
		if (tries < VALIDATION_TRIES)
			set_error(
			    b,
			    "upload %s of %s-%s to %s failed its validation: %s; deleting it, "
			    "the build is uploaded again (%d of %d tries failed)",
			    t->upload, t->image, t->build, t->provider, t->reason, tries,
			    VALIDATION_TRIES);
		else
			set_error(
			    b,
			    "upload %s of %s-%s to %s failed its validation: %s; deleting it; "
			    "%d tries failed, the next build is uploaded there",
			    t->upload, t->image, t->build, t->provider, t->reason, tries);
		np_path_build(path, sizeof(path), t->image, t->build);
		zk_set(b->zk, path, json, (int)len, t->build_version, t_stat_cb, t);
		free(json);
		return;
	}
	case 12:
		if (t->rc != ZOK) {
			log_warn("noting the failed validation of upload %s on build %s-%s: %s; "
				 "the next pass tries again",
				 t->upload, t->image, t->build, zk_strerror(t->rc));
			act_done(t);
			return;
		}
		t->rc = ZOK;
		t->step = 1;
		run_upload_delete(t);
		return;
	default:
		act_done(t);
		return;
	}
}

/* An uploading record on a kept build nobody works on: remove it
 * (upstream's _cleanupCurrentProviderUploads). */
static void
run_upload_cruft(struct task *t)
{
	struct builder *b = t->b;
	char path[NP_PATH_MAX], err[256];
	struct np_image_upload *u = NULL;

	switch (t->step) {
	case 0:
		np_path_upload_lock(path, sizeof(path), t->image, t->build, t->provider);
		lock_new(t, &t->lock, path);
		zk_lock_acquire(t->lock, 0, t_lock_cb, t);
		return;
	case 1:
		if (t->rc != ZOK) { /* in progress */
			act_done(t);
			return;
		}
		np_path_upload(path, sizeof(path), t->image, t->build, t->provider, t->upload);
		zk_get(b->zk, path, NULL, NULL, t_data_cb, t);
		return;
	case 2:
		if (t->rc != ZOK || t->data == NULL ||
		    np_image_upload_decode(t->upload, t->data, strlen(t->data), &u, err,
					   sizeof(err)) != 0 ||
		    u->state != NP_UPLOAD_UPLOADING) {
			np_image_upload_free(u);
			act_done(t);
			return;
		}
		np_image_upload_free(u);
		log_info("removing the record of an abandoned upload %s of %s-%s in %s", t->upload,
			 t->image, t->build, t->provider);
		np_path_upload(path, sizeof(path), t->image, t->build, t->provider, t->upload);
		zk_delete(b->zk, path, -1, 1, t_void_cb, t);
		return;
	default:
		if (t->rc == ZOK)
			b->deleted_uploads++;
		act_done(t);
		return;
	}
}

static void
run_build_deleting(struct task *t)
{
	struct builder *b = t->b;
	char path[NP_PATH_MAX], err[256], *json;
	struct np_image_build *bd = NULL;
	size_t len;

	switch (t->step) {
	case 0:
		np_path_build_lock(path, sizeof(path), t->image, t->build);
		lock_new(t, &t->lock, path);
		zk_lock_acquire(t->lock, 0, t_lock_cb, t);
		return;
	case 1:
		if (t->rc != ZOK) {
			act_done(t);
			return;
		}
		np_path_build(path, sizeof(path), t->image, t->build);
		zk_get(b->zk, path, NULL, NULL, t_data_cb, t);
		return;
	case 2:
		if (t->rc != ZOK || t->data == NULL ||
		    np_image_build_decode(t->build, t->data, strlen(t->data), &bd, err,
					  sizeof(err)) != 0) {
			act_done(t);
			return;
		}
		np_image_build_set_state(bd, NP_BUILD_DELETING);
		json = np_image_build_encode(bd, &len);
		np_image_build_free(bd);
		np_path_build(path, sizeof(path), t->image, t->build);
		zk_set(b->zk, path, json, (int)len, -1, t_stat_cb, t);
		free(json);
		log_info("build %s-%s is deleting", t->image, t->build);
		return;
	default:
		act_done(t);
		return;
	}
}

/* Remove a build none of whose uploads is left (the snapshot said so;
 * upstream's deleteBuild). */
static void
run_build_remove(struct task *t)
{
	struct builder *b = t->b;
	char path[NP_PATH_MAX];

	switch (t->step) {
	case 0:
		np_path_build(path, sizeof(path), t->image, t->build);
		zk_delete(b->zk, path, -1, 1, t_void_cb, t);
		return;
	default:
		if (t->rc == ZOK) {
			b->deleted_builds++;
			log_info("removed build %s-%s", t->image, t->build);
		}
		act_done(t);
		return;
	}
}

static void
task_run(struct task *t)
{
	switch (t->kind) {
	case T_BUILD:
		run_build(t);
		break;
	case T_UPLOAD:
		run_upload(t);
		break;
	case T_UPLOAD_DELETE:
		run_upload_delete(t);
		break;
	case T_UPLOAD_CRUFT:
		run_upload_cruft(t);
		break;
	case T_BUILD_DELETING:
		run_build_deleting(t);
		break;
	case T_BUILD_REMOVE:
		run_build_remove(t);
		break;
	}
}

static int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

/* Remove a build's local files (upstream's deleteLocalBuild). */
static void
delete_local_build(struct builder *b, const char *image, const char *build)
{
	char stem[1024], path[4096];
	struct dirent *de;
	size_t slen;
	DIR *d = opendir(b->cfg->images_dir);

	if (d == NULL)
		return;
	snprintf(stem, sizeof(stem), "%s-%s.", image, build);
	slen = strlen(stem);
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, stem, slen) != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", b->cfg->images_dir, de->d_name);
		if (strcmp(de->d_name + slen, "d") == 0) {
			/* the manifest dir */
			if (nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
				log_warn("cannot remove %s: %s", path, strerror(errno));
			else
				log_info("removed DIB manifest %s", path);
		} else if (unlink(path) != 0)
			log_warn("cannot remove %s: %s", path, strerror(errno));
		else
			log_info("removed DIB file %s", path);
	}
	closedir(d);
}

/* A format name as diskimage-builder writes them (qcow2, raw, vhd): a
 * build record's formats come from ZooKeeper and become file names, so
 * anything else (a '/', "..") could name a file outside images-dir. */
static int
format_name_ok(const char *f)
{
	return f[0] != '\0' && strspn(f, "abcdefghijklmnopqrstuvwxyz0123456789") == strlen(f);
}

/* Formats of a READY build no provider needs any more
 * (upstream's _pruneLocalBuildFormats, delete-after-upload). */
static void
prune_local_formats(struct builder *b, const struct imgtree_build *ib, const char *image)
{
	const struct np_diskimage *d = np_config_diskimage(b->cfg, image);
	struct np_strv keep = {NULL, 0};
	char fmt[64];
	size_t i;

	if (d == NULL || !d->delete_after_upload)
		return;
	for (i = 0; i < d->keep_formats.n; i++)
		np_strv_push(&keep, d->keep_formats.v[i]);
	for (i = 0; i < b->cfg->nproviders; i++) {
		const struct np_provider *p = &b->cfg->providers[i];
		if (p->manage_images && provider_diskimage(p, image) != NULL &&
		    !has_ready_upload(ib, p->name))
			np_strv_push(&keep, provider_format(p, fmt, sizeof(fmt)));
	}
	for (i = 0; i < ib->b->formats.n; i++) {
		const char *f = ib->b->formats.v[i];
		char path[4096], sum[4200];
		if (np_strv_contains(&keep, f))
			continue;
		if (!format_name_ok(f)) {
			log_warn("build %s-%s: \"%.64s\" in its formats is not a format name "
				 "([a-z0-9]+): skipped",
				 image, ib->id, f);
			continue;
		}
		local_path(b, image, ib->id, f, path, sizeof(path));
		if (unlink(path) == 0)
			log_info("removed DIB file %s (delete-after-upload)", path);
		snprintf(sum, sizeof(sum), "%s.md5", path);
		unlink(sum);
		snprintf(sum, sizeof(sum), "%s.sha256", path);
		unlink(sum);
	}
	np_strv_clear(&keep);
}

static void
cleanup_local(struct builder *b, const struct imgtree *tree)
{
	struct strset *seen = strset_new();
	struct dirent *de;
	DIR *d = opendir(b->cfg->images_dir);

	if (d == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		char name[512], path[4096], key[600];
		const char *dot = strrchr(de->d_name, '.'), *dash, *id;
		const struct imgtree_image *im;
		const struct imgtree_build *ib;
		struct stat st;
		size_t i;

		if (dot == NULL || dot == de->d_name || strlen(de->d_name) >= sizeof(name))
			continue;
		for (i = 1; dot[i]; i++)
			if (!(dot[i] == '_' || (dot[i] >= 'a' && dot[i] <= 'z') ||
			      (dot[i] >= 'A' && dot[i] <= 'Z') || (dot[i] >= '0' && dot[i] <= '9')))
				break;
		if (dot[i] != '\0' || i == 1)
			continue;
		snprintf(name, sizeof(name), "%.*s", (int)(dot - de->d_name), de->d_name);
		dash = strrchr(name, '-');
		if (dash == NULL || dash == name || dash[1] == '\0')
			continue;
		id = dash + 1;
		if (strspn(id, "0123456789abcdef") != strlen(id))
			continue;
		if (!strset_add(seen, name))
			continue;
		snprintf(path, sizeof(path), "%s/%s", b->cfg->images_dir, de->d_name);
		if (stat(path, &st) != 0 ||
		    (double)st.st_mtim.tv_sec + (double)st.st_mtim.tv_nsec / 1e9 >
			b->snapshot_time - LOCAL_FILE_GRACE)
			continue;
		snprintf(key, sizeof(key), "%.*s", (int)(dash - name), name);
		if (strset_has(b->building, key))
			continue;
		im = imgtree_image(tree, key);
		ib = im != NULL ? imgtree_build(im, id) : NULL;
		if (ib == NULL || ib->gone ||
		    (ib->b != NULL && ib->b->state == NP_BUILD_DELETING)) {
			log_info("deleting on-disk build %s", name);
			delete_local_build(b, key, id);
		} else if (ib->b != NULL && ib->b->state == NP_BUILD_READY)
			prune_local_formats(b, ib, key);
	}
	closedir(d);
	strset_free(seen);
}

/* Is a non-kept build still being built? (upstream's _inProgressBuild:
 * building, and the image's build lock held) */
static int
build_in_progress(struct builder *b, const struct imgtree_image *im, const struct imgtree_build *ib)
{
	if (ib->b == NULL || ib->b->state != NP_BUILD_BUILDING)
		return 0;
	return im->lock_contenders > 0 || strset_has(b->building, im->name);
}

/* Is this upload one of ours in flight (job running or its outcome being
 * recorded)? */
static int
upload_in_flight(struct builder *b, const char *image, const char *build, const char *provider,
		 const char *upload)
{
	struct task *t;

	TAILQ_FOREACH(t, &b->tasks, entry)
	if (t->kind == T_UPLOAD && t->upload != NULL && strcmp(t->image, image) == 0 &&
	    strcmp(t->build, build) == 0 && strcmp(t->provider, provider) == 0 &&
	    strcmp(t->upload, upload) == 0)
		return 1;
	return 0;
}

struct recent {
	const char *build, *upload;
	double t;
};

/* Is (build, upload) among the KEEP_UPLOADS newest READY uploads of the
 * image in provider, across READY builds? (_buildUploadRecencyTable) */
static int
recent_upload(const struct imgtree_image *im, const char *provider, const char *build,
	      const char *upload)
{
	struct recent top[KEEP_UPLOADS];
	int ntop = 0, i, j;
	size_t k, m;

	for (k = 0; k < im->nbuilds; k++) {
		const struct imgtree_build *ib = &im->builds[k];
		const struct imgtree_provider *ip = build_provider(ib, provider);
		if (ib->b == NULL || ib->b->state != NP_BUILD_READY || ip == NULL)
			continue;
		for (m = 0; m < ip->nuploads; m++) {
			const struct imgtree_upload *u = &ip->uploads[m];
			if (u->u == NULL || u->u->state != NP_UPLOAD_READY)
				continue;
			/* insert into top (newest first) */
			for (i = 0; i < ntop && top[i].t >= u->u->state_time; i++)
				;
			if (i >= KEEP_UPLOADS)
				continue;
			for (j = ntop < KEEP_UPLOADS ? ntop : KEEP_UPLOADS - 1; j > i; j--)
				top[j] = top[j - 1];
			top[i].build = ib->id;
			top[i].upload = u->id;
			top[i].t = u->u->state_time;
			if (ntop < KEEP_UPLOADS)
				ntop++;
		}
	}
	for (i = 0; i < ntop; i++)
		if (strcmp(top[i].build, build) == 0 && strcmp(top[i].upload, upload) == 0)
			return 1;
	return 0;
}

static void
cleanup_image(struct builder *b, const struct imgtree_image *im)
{
	const struct np_diskimage *d = np_config_diskimage(b->cfg, im->name);
	const struct imgtree_build *keep[KEEP_BUILDS] = {NULL};
	size_t k, m, n;
	int i, j, nkeep = 0;

	if (d != NULL)
		for (k = 0; k < im->nbuilds; k++) {
			const struct imgtree_build *ib = &im->builds[k];
			if (ib->b == NULL || ib->b->state != NP_BUILD_READY)
				continue;
			for (i = 0; i < nkeep && keep[i]->b->state_time >= ib->b->state_time; i++)
				;
			if (i >= KEEP_BUILDS)
				continue;
			for (j = nkeep < KEEP_BUILDS ? nkeep : KEEP_BUILDS - 1; j > i; j--)
				keep[j] = keep[j - 1];
			keep[i] = ib;
			if (nkeep < KEEP_BUILDS)
				nkeep++;
		}
	for (k = 0; k < im->nbuilds; k++) {
		const struct imgtree_build *ib = &im->builds[k];
		int kept = 0, uploads = 0, deleting = 0, in_progress;
		if (ib->b == NULL || ib->gone)
			continue;
		for (i = 0; i < nkeep; i++)
			kept |= keep[i] == ib;
		in_progress =
		    ib->b->state != NP_BUILD_DELETING && !kept && build_in_progress(b, im, ib);
		for (m = 0; m < ib->nproviders; m++) {
			const struct imgtree_provider *ip = &ib->providers[m];
			const struct np_provider *p = np_config_provider(b->cfg, ip->name);
			int obsolete = p == NULL || !p->manage_images ||
				       provider_diskimage(p, im->name) == NULL;
			for (n = 0; n < ip->nuploads; n++) {
				const struct imgtree_upload *u = &ip->uploads[n];
				int st = u->u != NULL ? u->u->state : -1;
				uploads++;
				deleting += st == NP_UPLOAD_DELETING;
				/* ours, in flight: its lock may be lost for a while
				 * (an expired session), it is still no cruft */
				if (in_progress ||
				    upload_in_flight(b, im->name, ib->id, ip->name, u->id))
					continue;
				if (obsolete)
					act_queue(b, T_UPLOAD_DELETE, im->name, ib->id, ip->name,
						  u->id, u->data);
				else if (kept) {
					if (st == NP_UPLOAD_UPLOADING)
						act_queue(b, T_UPLOAD_CRUFT, im->name, ib->id,
							  ip->name, u->id, NULL);
					else if (st == NP_UPLOAD_DELETING || st < 0 ||
						 st == NP_UPLOAD_FAILED)
						act_queue(b, T_UPLOAD_DELETE, im->name, ib->id,
							  ip->name, u->id, u->data);
				} else if (!recent_upload(im, ip->name, ib->id, u->id))
					act_queue(b, T_UPLOAD_DELETE, im->name, ib->id, ip->name,
						  u->id, u->data);
			}
		}
		if (kept || in_progress)
			continue;
		if ((uploads == 0 || uploads == deleting) && ib->b->state != NP_BUILD_DELETING)
			act_queue(b, T_BUILD_DELETING, im->name, ib->id, NULL, NULL, NULL);
		if (uploads == 0)
			act_queue(b, T_BUILD_REMOVE, im->name, ib->id, NULL, NULL, NULL);
	}
}

static void
cleanup(struct builder *b, const struct imgtree *tree)
{
	size_t i;

	b->cleanup_passes++;
	b->last_cleanup = np_mono_s();
	for (i = 0; i < tree->nimages; i++)
		cleanup_image(b, &tree->images[i]);
	cleanup_local(b, tree);
	if (!TAILQ_EMPTY(&b->acts)) {
		b->cleanup_running = 1;
		act_next(b);
	}
}

/* ---- the pass ------------------------------------------------------------------- */

static void
emit_gauges(struct builder *b, const struct imgtree *tree)
{
	char key[1024];
	size_t i, j;
	int requests = 0;

	if (b->statsd == NULL)
		return;
	for (i = 0; i < b->cfg->ndiskimages; i++) {
		const struct np_diskimage *d = &b->cfg->diskimages[i];
		const struct imgtree_image *im = imgtree_image(tree, d->name);
		int req = im != NULL && im->has_request;
		int paused = d->pause || (im != NULL && im->paused);
		requests += req;
		snprintf(key, sizeof(key), "nodepool.image.%s.image_build_requests", d->name);
		statsd_gauge(b->statsd, key, req);
		snprintf(key, sizeof(key), "nodepool.builder.%s.image.%s.build.state", b->hostname,
			 d->name);
		statsd_gauge(b->statsd, key, paused ? 3 : strset_has(b->building, d->name) ? 1 : 0);
		for (j = 0; j < b->cfg->nproviders; j++) {
			const struct np_provider *p = &b->cfg->providers[j];
			const struct np_provider_image *pi = provider_diskimage(p, d->name);
			char k2[600];
			if (!p->manage_images || pi == NULL)
				continue;
			snprintf(k2, sizeof(k2), "%s/%s", d->name, p->name);
			snprintf(key, sizeof(key),
				 "nodepool.builder.%s.image.%s.provider.%s.upload.state",
				 b->hostname, d->name, p->name);
			statsd_gauge(b->statsd, key,
				     pi->pause			    ? 3
				     : strset_has(b->uploading, k2) ? 2
								    : 0);
		}
	}
	statsd_gauge(b->statsd, "nodepool.image_build_requests", requests);
	statsd_flush(b->statsd);
}

static int load_file_config(struct builder *b, int initial, char *err, size_t errlen);
static void register_component(struct builder *b);

/* The three duties on the snapshot in hand. */
static void
run_duties(struct builder *b, const struct imgtree *tree)
{
	size_t i, j;

	b->passes++;
	if (b->stopping)
		return;
	for (i = 0; i < b->cfg->ndiskimages; i++)
		check_build(b, tree, &b->cfg->diskimages[i]);
	for (i = 0; i < b->cfg->nproviders; i++) {
		const struct np_provider *p = &b->cfg->providers[i];
		if (!p->manage_images)
			continue;
		for (j = 0; j < p->ndiskimages; j++)
			check_upload(b, tree, p, &p->diskimages[j]);
	}
	if (!b->cleanup_running && np_mono_s() - b->last_cleanup >= b->opt.cleanup_interval)
		cleanup(b, tree);
	emit_gauges(b, tree);
}

static void
pass_loaded(int rc, struct imgtree *tree, void *arg)
{
	struct builder *b = arg;

	b->load = NULL;
	if (rc != ZOK) {
		b->tree_stale = 1;
		set_error(b, "reading %s: %s", NP_IMAGE_ROOT, zk_strerror(rc));
		return;
	}
	imgtree_free(b->tree);
	b->tree = tree;
	run_duties(b, tree);
	if (b->again) {
		b->again = 0;
		schedule_soon(b);
	}
}

/* The watch on /nodepool/images: any change (a build request, a pause
 * flag, a record of ours or another builder's, an image-delete) makes
 * the snapshot stale and asks for a pass. */
static void
tree_changed(int type, const char *path, void *arg)
{
	struct builder *b = arg;

	(void)type;
	(void)path;
	b->tree_stale = 1;
	schedule_soon(b);
}

static void
pass(struct builder *b)
{
	char err[512];

	if (b->load != NULL) {
		b->again = 1; /* something changed since this snapshot was asked for */
		return;
	}
	if (b->stopping || b->zk == NULL || !zk_is_connected(b->zk))
		return;
	register_component(b); /* if a registration was lost with the connection */
	if (b->opt.config != NULL && load_file_config(b, 0, err, sizeof(err)) < 0)
		set_error(b, "%s", err);
	if (b->tree != NULL && !b->tree_stale) {
		/* no change reported since it was read: it stands for now */
		b->snapshot_time = now_wall();
		run_duties(b, b->tree);
		return;
	}
	b->tree_stale = 0;
	b->snapshot_time = now_wall();
	b->load = imgtree_load_start(b->zk, pass_loaded, b);
}

static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct builder *b = arg;
	struct timeval tv = {
	    (time_t)b->opt.interval,
	    (suseconds_t)((b->opt.interval - (double)(time_t)b->opt.interval) * 1e6)};

	pass(b);
	evtimer_add(b->tick_ev, &tv);
}

static void
soon_cb(evutil_socket_t fd, short what, void *arg)
{
	pass(arg);
}

/* ---- ZooKeeper and the component -------------------------------------------------- */

/*
 * A registration whose reply was lost may have landed: an ephemeral child
 * named after our hostname and owned by our session is ours (another
 * builder on this host has its own session); none, and it is created again.
 */
struct comp_check {
	struct comp_check *next;
	struct builder *b;
	char path[512];
};

static void
comp_check_done(struct builder *b)
{
	if (b->comp_checks != NULL)
		return;
	b->component_pending = 0;
	if (b->component_path == NULL && b->zk != NULL && zk_is_connected(b->zk))
		register_component(b);
}

static void
comp_exists_cb(int rc, const struct zk_stat *st, void *arg)
{
	struct comp_check *c = arg, **pp;
	struct builder *b = c->b;

	if (rc == ZOK && st->ephemeral_owner == zk_session_id(b->zk) && b->component_path == NULL) {
		b->component_path = xstrdup(c->path);
		log_info("registered as %s (builder id %s; found after a lost reply)", c->path,
			 b->builder_id);
	}
	for (pp = &b->comp_checks; *pp != NULL; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	free(c);
	comp_check_done(b);
}

static void
comp_list_cb(int rc, int count, char *const *names, void *arg)
{
	struct builder *b = arg;
	size_t hl = strlen(b->hostname);
	int i;

	for (i = 0; rc == ZOK && i < count; i++) {
		struct comp_check *c;
		if (strncmp(names[i], b->hostname, hl) != 0 ||
		    strspn(names[i] + hl, "0123456789") != strlen(names[i] + hl))
			continue;
		c = calloc(1, sizeof(*c));
		if (c == NULL)
			abort();
		c->b = b;
		snprintf(c->path, sizeof(c->path), "/nodepool/components/builder/%s", names[i]);
		c->next = b->comp_checks;
		b->comp_checks = c;
		zk_exists(b->zk, c->path, NULL, NULL, comp_exists_cb, c);
	}
	comp_check_done(b);
}

static void
component_created(int rc, const char *path, void *arg)
{
	struct builder *b = arg;

	if (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT) {
		log_warn("registering the builder component: %s; finding out what happened",
			 zk_strerror(rc));
		zk_children(b->zk, "/nodepool/components/builder", NULL, NULL, comp_list_cb, b);
		return; /* still pending */
	}
	b->component_pending = 0;
	if (rc != ZOK) {
		set_error(b, "registering the builder component: %s", zk_strerror(rc));
		return;
	}
	free(b->component_path);
	b->component_path = xstrdup(path);
	log_info("registered as %s (builder id %s)", path, b->builder_id);
}

static void
register_component(struct builder *b)
{
	struct np_component *c;
	char path[512], *json;

	if (b->component_path != NULL || b->component_pending)
		return;
	c = np_component_new("builder");
	c->hostname = xstrdup(b->hostname);
	free(c->state);
	c->state = xstrdup("running");
	c->version = xstrdup(NP_VERSION);
	json = np_component_encode(c, NULL);
	np_component_free(c);
	snprintf(path, sizeof(path), "/nodepool/components/builder/%s", b->hostname);
	b->component_pending = 1;
	zk_create(b->zk, path, json, (int)strlen(json), ZOO_EPHEMERAL | ZOO_SEQUENCE, 1,
		  component_created, b);
	free(json);
}

static void send_ready(struct builder *b);

static void
session_cb(struct zk *zk, enum zk_event ev, void *arg)
{
	struct builder *b = arg;

	/* a failed TLS handshake while suspended is still a suspension */
	if (ev == ZK_EV_SUSPENDED || ev == ZK_EV_EXPIRED)
		b->suspended = 1;
	else if (ev == ZK_EV_CONNECTED || ev == ZK_EV_RECONNECTED)
		b->suspended = 0;
	switch (ev) {
	case ZK_EV_CONNECTED:
		log_info("ZooKeeper session 0x%llx", (unsigned long long)zk_session_id(zk));
		free(b->component_path);
		b->component_path = NULL;
		register_component(b);
		if (!b->ready_sent)
			send_ready(b);
		relock_tasks(b);   /* after an expiry: our locks went with the session */
		b->tree_stale = 1; /* the watch's events meanwhile are lost */
		schedule_soon(b);
		break;
	case ZK_EV_RECONNECTED:
		log_info("ZooKeeper connection back (session 0x%llx kept)",
			 (unsigned long long)zk_session_id(zk));
		relock_tasks(b);
		b->tree_stale = 1;
		schedule_soon(b);
		break;
	case ZK_EV_SUSPENDED:
		log_warn("ZooKeeper connection lost; waiting");
		break;
	case ZK_EV_EXPIRED:
		/* locks and the component are gone; builds and uploads in flight
		 * take their locks again on the new session (finish()) */
		set_error(b, "ZooKeeper session expired");
		free(b->component_path);
		b->component_path = NULL;
		break;
	case ZK_EV_AUTH_FAILED:
		/* also a server away behind a proxy or load balancer (the TCP
		 * connection is taken, the handshake fails): as the launcher */
		if (b->suspended)
			log_warn("ZooKeeper TLS handshake failed while the connection is lost "
				 "(server unreachable?); retrying");
		else
			set_error(b, "ZooKeeper TLS handshake failed (server unreachable, or it "
				     "refused our certificate); retrying");
		break;
	}
}

static int
builder_id_load(struct builder *b, char *err, size_t errlen)
{
	char path[4096], hex[33];
	FILE *f;

	snprintf(path, sizeof(path), "%s/builder_id.txt", b->cfg->images_dir);
	f = fopen(path, "r");
	if (f != NULL) {
		size_t n = fread(b->builder_id, 1, sizeof(b->builder_id) - 1, f);
		fclose(f);
		b->builder_id[n] = '\0';
		b->builder_id[strcspn(b->builder_id, "\r\n")] = '\0';
		if (b->builder_id[0] != '\0')
			return 0;
	}
	if (np_uuid4_hex(hex) != 0) {
		snprintf(err, errlen, "no randomness for the builder id");
		return -1;
	}
	/* str(uuid.uuid4()), as upstream */
	snprintf(b->builder_id, sizeof(b->builder_id), "%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8,
		 hex + 12, hex + 16, hex + 20);
	f = fopen(path, "w");
	if (f == NULL || fputs(b->builder_id, f) < 0 || fclose(f) != 0) {
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* Take a new configuration (validated); start ZooKeeper on the first. */
static int
apply_config(struct builder *b, struct np_config *cfg, char *err, size_t errlen)
{
	struct zk_options zo;

	if (cfg->images_dir == NULL) {
		snprintf(err, errlen, "%s: images-dir is required to run a builder", cfg->path);
		return -1;
	}
	if (cfg->zk_hosts == NULL) {
		snprintf(err, errlen, "%s: zookeeper-servers are required", cfg->path);
		return -1;
	}
	if (mkdirs(cfg->images_dir) != 0) {
		snprintf(err, errlen, "images-dir %s: %s", cfg->images_dir, strerror(errno));
		return -1;
	}
	if (mkdirs(cfg->build_log_dir) != 0)
		log_warn("build-log-dir %s: %s", cfg->build_log_dir, strerror(errno));
	if (b->cfg != NULL && strcmp(b->cfg->zk_hosts, cfg->zk_hosts) != 0)
		log_warn("zookeeper-servers changes take effect when the builder restarts");
	np_config_free(b->cfg);
	b->cfg = cfg;
	if (b->builder_id[0] == '\0' && builder_id_load(b, err, errlen) != 0)
		return -1;
	if (b->zk != NULL)
		return 0;
	memset(&zo, 0, sizeof(zo));
	zo.hosts = cfg->zk_hosts;
	zo.timeout = cfg->zk_timeout;
	zo.tls_ca = cfg->zk_tls_ca;
	zo.tls_cert = cfg->zk_tls_cert;
	zo.tls_key = cfg->zk_tls_key;
	b->zk = zk_new(b->base, &zo, session_cb, b, err, errlen);
	if (b->zk == NULL)
		return -1;
	/* writes and reads interrupted by a lost connection are sent again
	 * (upstream's KazooRetry); creates are not (see the tasks) */
	zk_set_retry(b->zk, 1);
	zk_watch_tree(b->zk, NP_IMAGE_ROOT, tree_changed, b);
	b->builds = bpool_new(b->base, "build", b->opt.build_workers, b->opt.exe, b->opt.debug);
	b->uploads = bpool_new(b->base, "upload", b->opt.upload_workers, b->opt.exe, b->opt.debug);
	tick_cb(-1, 0, b);
	return 0;
}

static int
mtime_of(const char *path, struct timespec *out)
{
	struct stat st;

	memset(out, 0, sizeof(*out));
	if (path == NULL || stat(path, &st) != 0)
		return -1;
	*out = st.st_mtim;
	return 0;
}

/* Standalone: (re)load the files when they changed (upstream re-reads its
 * config on every loop). 1 loaded, 0 unchanged, -1 error (kept the old). */
static int
load_file_config(struct builder *b, int initial, char *err, size_t errlen)
{
	struct timespec m1, m2;
	struct np_config *cfg = NULL;
	struct np_config_errors *errs = NULL;

	mtime_of(b->opt.config, &m1);
	mtime_of(b->opt.secure, &m2);
	if (!initial && m1.tv_sec == b->cfg_mtime.tv_sec && m1.tv_nsec == b->cfg_mtime.tv_nsec &&
	    m2.tv_sec == b->sec_mtime.tv_sec && m2.tv_nsec == b->sec_mtime.tv_nsec)
		return 0;
	b->cfg_mtime = m1;
	b->sec_mtime = m2;
	if (np_config_load(b->opt.config, b->opt.secure, &cfg, &errs) != 0) {
		char *e = errs != NULL && errs->n > 0 ? np_config_error_format(&errs->v[0]) : NULL;
		snprintf(err, errlen, "%s%s", e ? e : "configuration refused",
			 np_config_errors_count(errs) > 1 ? " (and more)" : "");
		if (errs != NULL)
			np_config_errors_print(errs, stderr);
		free(e);
		np_config_errors_free(errs);
		return -1;
	}
	if (apply_config(b, cfg, err, errlen) != 0) {
		if (b->cfg != cfg)
			np_config_free(cfg);
		return -1;
	}
	if (!initial)
		log_info("configuration reloaded");
	return 1;
}

/* ---- nodepoold's channel ----------------------------------------------------------- */

static void
send_ready(struct builder *b)
{
	struct ipc_msg m;

	b->ready_sent = 1;
	log_info("ready: ZooKeeper session live, %d build and %d upload workers",
		 b->opt.build_workers, b->opt.upload_workers);
	np_mem_trim_startup("builder ready");
	if (!childproc_link_up(b->sup))
		return;
	childproc_ready(&m, "builder", zk_session_id(b->zk));
	childproc_link_send(b->sup, &m);
	ipc_msg_clear(&m);
}

static void
send_status(void *arg, int64_t seq)
{
	struct builder *b = arg;
	struct ipc_msg m;
	struct ipc_status *st = &m.u.status;

	childproc_status_init(&m, seq, b->generation, b->start);
	/* the builder keeps no last session event: a lost connection is
	 * "suspended" until it is back */
	st->zk_state = zk_ipc_state(b->zk, ZK_EV_SUSPENDED);
	st->state = b->stopping	    ? IPC_WS_STOPPING
		    : b->ready_sent ? IPC_WS_RUNNING
				    : IPC_WS_STARTING;
	/* a builder's jobs in the launcher's terms: accepted = started,
	 * fulfilled = ready, failed = failed */
	st->accepted = (int64_t)(b->builds_started + b->uploads_started);
	st->fulfilled = (int64_t)(b->builds_ready + b->uploads_ready);
	st->failed = (int64_t)(b->builds_failed + b->uploads_failed);
	st->launching = b->builds != NULL ? bpool_busy(b->builds) + bpool_busy(b->uploads) : 0;
	ipc_counts_add(&st->nodes, "building", (int64_t)strset_count(b->building));
	ipc_counts_add(&st->nodes, "uploading", (int64_t)strset_count(b->uploading));
	if (b->last_error[0] != '\0')
		ipc_set_str(&st->last_error, b->last_error);
	childproc_link_send(b->sup, &m);
	ipc_msg_clear(&m);
}

static void
on_config(void *arg, const struct ipc_config *c)
{
	struct builder *b = arg;
	struct ipc_msg ack;
	json_t *o = json_loads(c->config, 0, NULL), *sec;
	struct np_config *cfg = NULL;
	struct np_config_errors *errs = NULL;
	char *text = NULL, *stext = NULL, err[1024] = "";
	size_t i;

	ipc_msg_init(&ack, IPC_CONFIG_ACK);
	ack.u.config_ack.generation = c->generation;
	if (!json_is_object(o) || !json_is_object(json_object_get(o, "config"))) {
		ipc_strv_push(&ack.u.config_ack.errors, "builder config: not {config, secure}");
		goto out;
	}
	text = json_dumps(json_object_get(o, "config"), JSON_COMPACT);
	sec = json_object_get(o, "secure");
	if (json_is_object(sec))
		stext = json_dumps(sec, JSON_COMPACT);
	if (np_config_load_buffer("nodepool.yaml", text, strlen(text), "secure.conf", stext,
				  stext ? strlen(stext) : 0, &cfg, &errs) != 0) {
		for (i = 0; errs != NULL && i < errs->n; i++) {
			char *e = np_config_error_format(&errs->v[i]);
			ipc_strv_push(&ack.u.config_ack.errors, e);
			free(e);
		}
		goto out;
	}
	if (apply_config(b, cfg, err, sizeof(err)) != 0) {
		if (b->cfg != cfg)
			np_config_free(cfg);
		ipc_strv_push(&ack.u.config_ack.errors, err);
		goto out;
	}
	ack.u.config_ack.ok = true;
	b->generation = c->generation;
	schedule_soon(b);
out:
	childproc_link_send(b->sup, &ack);
	if (!ack.u.config_ack.ok && b->cfg == NULL) {
		log_error("%s",
			  ack.u.config_ack.errors.n ? ack.u.config_ack.errors.v[0] : "config");
		b->exit_code = EXIT_PERMANENT;
		event_base_loopexit(b->base, NULL);
	}
	ipc_msg_clear(&ack);
	np_config_errors_free(errs);
	free(text);
	free(stext);
	json_decref(o);
}

/* builder_dump as a childproc_dump_fn */
static void
builder_dump_cb(void *arg, struct evbuffer *out)
{
	builder_dump(arg, out);
}

/* STOP, or the channel closed (childproc.h): a child exits when its
 * supervisor goes */
static void
on_stop(void *arg)
{
	builder_stop(arg);
}

static const struct childproc_ops builder_link_ops = {
    .config = on_config,
    .status = send_status,
    .dump = builder_dump_cb,
    .stop = on_stop,
};

/* ---- life cycle ------------------------------------------------------------------ */

struct builder *
builder_new(struct event_base *base, const struct builder_options *o, char *err, size_t errlen)
{
	struct builder *b = calloc(1, sizeof(*b));
	char serr[256];

	if (b == NULL)
		abort();
	b->base = base;
	b->opt = *o;
	b->start = np_mono_s();
	b->last_cleanup = -1e9;
	b->hostname = childproc_fqdn();
	b->building = strset_new();
	b->uploading = strset_new();
	TAILQ_INIT(&b->tasks);
	TAILQ_INIT(&b->acts);
	b->tick_ev = evtimer_new(base, tick_cb, b);
	b->soon_ev = event_new(base, -1, 0, soon_cb, b);
	b->statsd = statsd_new_from_env(serr, sizeof(serr));
	if (o->channel_fd >= 0) {
		b->sup = childproc_link_new(base, o->channel_fd, &builder_link_ops, b,
					    &b->exit_code, err, errlen);
		if (b->sup == NULL) {
			builder_free(b);
			return NULL;
		}
	} else if (load_file_config(b, 1, err, errlen) < 0) {
		builder_free(b);
		return NULL;
	}
	return b;
}

static void
stop_cb(evutil_socket_t fd, short what, void *arg)
{
	struct builder *b = arg;

	event_base_loopexit(b->base, NULL);
}

void
builder_stop(struct builder *b)
{
	if (b->stopping)
		return;
	b->stopping = 1;
	/* builds and uploads in flight are abandoned: their records stay
	 * building/uploading without a lock, which cleanup handles */
	event_base_once(b->base, -1, EV_TIMEOUT, stop_cb, b, NULL);
}

void
builder_sigchld(struct builder *b)
{
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (b->builds != NULL)
			bpool_reap(b->builds, pid, status);
		if (b->uploads != NULL)
			bpool_reap(b->uploads, pid, status);
	}
}

void
builder_dump(struct builder *b, struct evbuffer *out)
{
	struct task *t;
	static const char *const kinds[] = {"build",	    "upload",	      "upload-delete",
					    "upload-cruft", "build-deleting", "build-remove"};

	evbuffer_add_printf(out, "builder %s (id %s), ZooKeeper %s\n", b->hostname, b->builder_id,
			    b->zk != NULL && zk_is_connected(b->zk) ? "connected"
								    : "not connected");
	evbuffer_add_printf(out,
			    "builds: %llu started, %llu ready, %llu failed; uploads: %llu "
			    "started, %llu ready, %llu failed; removed: %llu uploads, %llu builds; "
			    "passes %llu, cleanups %llu\n",
			    b->builds_started, b->builds_ready, b->builds_failed,
			    b->uploads_started, b->uploads_ready, b->uploads_failed,
			    b->deleted_uploads, b->deleted_builds, b->passes, b->cleanup_passes);
	TAILQ_FOREACH(t, &b->tasks, entry)
	evbuffer_add_printf(out, "  %s %s %s %s %s step %d\n", kinds[t->kind], t->image,
			    t->build ? t->build : "", t->provider ? t->provider : "",
			    t->upload ? t->upload : "", t->step);
	if (b->builds != NULL) {
		bpool_dump(b->builds, out);
		bpool_dump(b->uploads, out);
	}
}

int
builder_exit_code(const struct builder *b)
{
	return b->exit_code;
}

void
builder_free(struct builder *b)
{
	struct task *t;

	if (b == NULL)
		return;
	bpool_free(b->builds, 5.0);
	bpool_free(b->uploads, 5.0);
	while ((t = TAILQ_FIRST(&b->acts)) != NULL)
		task_free(t);
	while ((t = TAILQ_FIRST(&b->tasks)) != NULL)
		task_free(t);
	imgtree_load_cancel(b->load);
	imgtree_free(b->tree);
	zk_free(b->zk);
	while (b->comp_checks != NULL) {
		struct comp_check *c = b->comp_checks;
		b->comp_checks = c->next;
		free(c);
	}
	childproc_link_free(b->sup);
	statsd_free(b->statsd);
	event_free(b->tick_ev);
	event_free(b->soon_ev);
	strset_free(b->building);
	strset_free(b->uploading);
	np_config_free(b->cfg);
	free(b->component_path);
	free(b->hostname);
	free(b);
}
