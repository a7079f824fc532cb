/*
 * Task bookkeeping: a task (struct task, builder_int.h) is one build,
 * upload or cleanup step in flight, a small state machine moved on by the
 * ZooKeeper and job callbacks below (each answer stores its outcome and
 * moves the task to its next step); it holds the locks. Also how a build or
 * upload records its outcome across lost connections and sessions
 * (bld_finish), and how a create whose reply was lost is settled
 * (bld_create_lost). The steps themselves are in build_sched.c,
 * upload_sched.c and cleanup.c.
 */
#include "builder/builder_int.h"

#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "lib/core/log.h"
#include "protocol/paths.h"

static void task_run(struct task *t);

struct task *
bld_task_new(struct builder *b, enum task_kind kind, const char *image)
{
	struct task *t = calloc(1, sizeof(*t));

	if (t == NULL)
		abort();
	t->b = b;
	t->kind = kind;
	t->image = bld_strdup(image);
	return t;
}

void
bld_task_free(struct task *t)
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

void
bld_task_start(struct task *t)
{
	TAILQ_INSERT_TAIL(&t->b->tasks, t, entry);
	task_run(t);
}

/* Callbacks that store the outcome and move the task on. */
void
bld_t_lock_cb(struct zk_lock *lock, int rc, void *arg)
{
	struct task *t = arg;

	t->rc = rc;
	t->step++;
	task_run(t);
}

void
bld_t_void_cb(int rc, void *arg)
{
	struct task *t = arg;

	t->rc = rc;
	t->step++;
	task_run(t);
}

void
bld_t_stat_cb(int rc, const struct zk_stat *st, void *arg)
{
	bld_t_void_cb(rc, arg);
}

void
bld_t_string_cb(int rc, const char *path, void *arg)
{
	struct task *t = arg;

	if (rc == ZOK && path != NULL && t->kind == T_UPLOAD) {
		const char *slash = strrchr(path, '/');
		free(t->upload);
		t->upload = bld_strdup(slash ? slash + 1 : path);
	}
	bld_t_void_cb(rc, arg);
}

void
bld_t_data_cb(int rc, const char *data, int len, const struct zk_stat *st, void *arg)
{
	struct task *t = arg;

	free(t->data);
	t->data = rc == ZOK ? bld_strdup(data) : NULL;
	bld_t_void_cb(rc, arg);
}

/* The build record and its version (t->data keeps the upload's). */
void
bld_t_build_data_cb(int rc, const char *data, int len, const struct zk_stat *st, void *arg)
{
	struct task *t = arg;

	free(t->build_data);
	t->build_data = rc == ZOK && data != NULL ? bld_strdup(data) : NULL;
	t->build_version = rc == ZOK && st != NULL ? st->version : -1;
	bld_t_void_cb(rc, arg);
}

void
bld_t_job_cb(bool ok, const json_t *result, const char *error, void *arg)
{
	struct task *t = arg;

	t->job_ok = ok;
	json_decref(t->job_result);
	t->job_result = result != NULL ? json_deep_copy(result) : NULL;
	free(t->job_error);
	t->job_error = error != NULL ? bld_strdup(error) : NULL;
	t->step++;
	task_run(t);
}

/* The snapshot a task re-checks against after taking its lock. */
struct imgtree *bld_task_tree_tmp;

void
bld_t_tree_cb(int rc, struct imgtree *tree, void *arg)
{
	struct task *t = arg;

	t->load = NULL;
	t->rc = rc;
	t->step++;
	bld_task_tree_tmp = tree;
	task_run(t);
	imgtree_free(bld_task_tree_tmp);
	bld_task_tree_tmp = NULL;
}

void
bld_lock_new(struct task *t, struct zk_lock **slot, const char *path)
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
		bld_finish(t);
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
	bld_lock_new(t, &t->lock, path);
	zk_lock_acquire(t->lock, 0, relock_cb, t);
}

/* On a new session or a reconnection: every build and upload whose job
 * runs, or whose outcome waits to be recorded, re-checks its lock and takes
 * it again if it was lost (before cleanup or another builder can). */
void
bld_relock_tasks(struct builder *b)
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
		bld_set_error(t->b, "recording %s: %s", path, zk_strerror(rc));
		finish_done(t, t->good ? -1 : 0);
		return;
	}
	/* unknown outcome: re-read (on the next session, if this one ended) */
	log_warn("recording %s: %s; finding out what happened", path, zk_strerror(rc));
	if (rc == ZSESSIONEXPIRED)
		t->session_lost = 1;
	t->reclaimed = 1;
	bld_finish(t);
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
			bld_set_error(t->b, "re-reading %s-%s: %s", t->image, t->build,
				      zk_strerror(rc));
			finish_done(t, -1);
		} else
			bld_finish(t);
		return;
	}
	im = imgtree_image(tree, t->image);
	ib = im != NULL ? imgtree_build(im, t->build) : NULL;
	if (t->kind == T_BUILD)
		cur = ib != NULL ? ib->data : NULL;
	else if (ib != NULL) {
		const struct imgtree_provider *ip = bld_build_provider(ib, t->provider);
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
		bld_finish(t);
		return;
	}
	t->reclaimed = 0;
	zk_set(t->b->zk, path, t->final, (int)strlen(t->final), 0, finish_set_cb, t);
}

/* Record t->final (t->good: READY, else FAILED) as described above; ends
 * in finish_done(). */
void
bld_finish(struct task *t)
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
		t->step = t->kind == T_BUILD ? BUILD_RUN : UPLOAD_RUN;
		task_run(t);
		return;
	}
	im = imgtree_image(tree, t->image);
	ib = im != NULL ? imgtree_build(im, t->build) : NULL;
	if (t->kind == T_BUILD) {
		if (ib != NULL && strcmp(ib->data, t->created) == 0)
			found = t->build;
	} else if (ib != NULL) {
		const struct imgtree_provider *ip = bld_build_provider(ib, t->provider);
		for (i = 0; ip != NULL && i < ip->nuploads; i++)
			if (strcmp(ip->uploads[i].data, t->created) == 0)
				found = ip->uploads[i].id;
	}
	if (found != NULL) {
		log_info("creating %s: it had happened (%s); carrying on", path, found);
		if (t->kind == T_UPLOAD) {
			free(t->upload);
			t->upload = bld_strdup(found);
		}
		imgtree_free(tree);
		t->rc = ZOK;
		t->step = t->kind == T_BUILD ? BUILD_RUN : UPLOAD_RUN;
		task_run(t);
		return;
	}
	imgtree_free(tree);
	log_info("creating %s: it had not happened; again", path);
	/* its answer moves the task on to BUILD_RUN / UPLOAD_RUN */
	t->step = t->kind == T_BUILD ? BUILD_CREATING : UPLOAD_CREATE;
	zk_create(t->b->zk, path, t->created, (int)strlen(t->created),
		  t->kind == T_BUILD ? 0 : ZOO_SEQUENCE, 1, bld_t_string_cb, t);
}

/* After a create failed with rc: 1 if its outcome is being found out (the
 * task goes on from create_check_cb), 0 if rc is a plain failure. */
int
bld_create_lost(struct task *t)
{
	if ((t->rc != ZCONNECTIONLOSS && t->rc != ZOPERATIONTIMEOUT) || t->created == NULL ||
	    ++t->tries > CREATE_TRIES)
		return 0;
	t->load = imgtree_load_start(t->b->zk, create_check_cb, t);
	return 1;
}

static void
finish_done(struct task *t, int recorded)
{
	t->waiting = 0;
	if (t->kind == T_BUILD)
		bld_build_finished(t, recorded);
	else
		bld_upload_finished(t, recorded);
}

static void
task_run(struct task *t)
{
	switch (t->kind) {
	case T_BUILD:
		bld_run_build(t);
		break;
	case T_UPLOAD:
		bld_run_upload(t);
		break;
	case T_UPLOAD_DELETE:
		bld_run_upload_delete(t);
		break;
	case T_UPLOAD_CRUFT:
		bld_run_upload_cruft(t);
		break;
	case T_BUILD_DELETING:
		bld_run_build_deleting(t);
		break;
	case T_BUILD_REMOVE:
		bld_run_build_remove(t);
		break;
	}
}
