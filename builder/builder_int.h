/*
 * The builder process's own header (builder.c, snapshot.c, task.c,
 * build_sched.c, upload_sched.c, cleanup.c): the builder, its tasks and
 * their steps, and the functions the files share. Worker processes and
 * pool.c see only builder.h.
 *
 * Files by duty:
 *   builder.c       the process's life cycle: configuration, ZooKeeper
 *                   session and component, nodepoold's channel, the pass
 *                   that runs the duties on each snapshot;
 *   snapshot.c      questions of the configuration and the snapshot;
 *   task.c          task bookkeeping, recording outcomes across lost
 *                   sessions;
 *   build_sched.c   build scheduling;
 *   upload_sched.c  upload scheduling;
 *   cleanup.c       cleanup.
 */
#ifndef NP_BUILDER_INT_H
#define NP_BUILDER_INT_H

#include <sys/queue.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>

#include "builder/builder.h"
#include "lib/config/config.h"
#include "lib/core/strset.h"
#include "lib/zk/imagetree.h"
#include "lib/zk/zk.h"
#include "protocol/model.h"

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
struct comp_check;

/* The builder process (one per nodepool-builder). */
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

/* ---- tasks: one build, upload or cleanup step in flight ---- */
enum task_kind {
	T_BUILD,
	T_UPLOAD,
	T_UPLOAD_DELETE,  /* cleanup: mark deleting, delete in the cloud, remove */
	T_UPLOAD_CRUFT,	  /* cleanup: remove an uploading record nobody works on */
	T_BUILD_DELETING, /* cleanup: mark a build deleting */
	T_BUILD_REMOVE,	  /* cleanup: remove a build without uploads */
};

/* One task; its steps are the enum of its kind below (t->step). */
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
	/* recording the outcome of a build or upload (bld_finish()) */
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

/*
 * The steps of each kind of task, in order: an answer (task.c's
 * callbacks) moves a task to the next one, so each list is the order the
 * steps run in; a step may also set the next explicitly (a jump).
 */
enum build_step {
	BUILD_LOCK,	    /* take the image's build lock, non-blocking */
	BUILD_REREAD,	    /* locked: read the tree again */
	BUILD_CREATE,	    /* still needed: create the build record (building) */
	BUILD_CREATING,	    /* the create in flight (again after a lost reply) */
	BUILD_RUN,	    /* created: dib-cmd to a build worker */
	BUILD_DONE,	    /* the job is over: record READY or FAILED */
	BUILD_REQUEST_DONE, /* recorded: remove a manual build request */
	BUILD_RELEASE,	    /* the end */
};

enum upload_step {
	UPLOAD_LOCK,	      /* take the upload lock, non-blocking */
	UPLOAD_REREAD,	      /* locked: read the tree again */
	UPLOAD_CREATE,	      /* still needed: create the upload record (uploading) */
	UPLOAD_RUN,	      /* created: the file to an upload worker */
	UPLOAD_DONE,	      /* the job is over: record READY or FAILED */
	UPLOAD_DELETE_AGAIN,  /* not recorded as ours: delete its cloud image */
	UPLOAD_DELETED_AGAIN, /* the end */
};

enum upload_delete_step {
	UD_READ,       /* decode the record; an uploading one: is it in progress? */
	UD_LOCK,       /* take the upload-number lock */
	UD_MARK,       /* locked: mark it deleting */
	UD_UNLOCK,     /* marked: release the lock */
	UD_UNLOCKED,   /* released */
	UD_CLOUD,      /* delete the cloud image (an upload worker) */
	UD_CLOUD_DONE, /* deleted there (or not) */
	UD_RELOCK,     /* the upload-number lock again, for the record */
	UD_REMOVE,     /* locked: remove the record */
	UD_REMOVED,    /* the end */
	UD_NOTE_READ,  /* a failed validation: the build record being read */
	UD_NOTE,       /* read: note the failure on it */
	UD_NOTED,      /* noted: on to UD_LOCK */
};

enum upload_cruft_step {
	CRUFT_LOCK,    /* take the upload lock: busy means in progress */
	CRUFT_READ,    /* locked: read the record */
	CRUFT_REMOVE,  /* still uploading: remove it */
	CRUFT_REMOVED, /* the end */
};

enum build_deleting_step {
	BD_LOCK,   /* take the build's lock */
	BD_READ,   /* locked: read the record */
	BD_MARK,   /* mark it deleting */
	BD_MARKED, /* the end */
};

enum build_remove_step {
	BR_REMOVE,  /* remove the record */
	BR_REMOVED, /* the end */
};

/* ---- the process (builder.c) ---- */

/* Wall clock, seconds. A copy of s ("" for NULL), never NULL. The last
 * error (nodepoold's STATUS), also logged. A pass soon, on the loop. */
double bld_now_wall(void);
char *bld_strdup(const char *s);
void bld_set_error(struct builder *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void bld_schedule_soon(struct builder *b);

/* ---- questions of the configuration and the snapshot (snapshot.c) ---- */

/* Each documented at its definition. */
const char *bld_provider_format(const struct np_provider *p, char *buf, size_t len);
int bld_provider_uploads(const struct np_provider *p);
const struct np_provider_image *bld_provider_diskimage(const struct np_provider *p,
						       const char *image);
void bld_needed_formats(const struct np_config *cfg, const struct np_diskimage *d,
			struct np_strv *out);
const struct imgtree_build *bld_newest_ready(const struct imgtree_image *im);
const struct imgtree_provider *bld_build_provider(const struct imgtree_build *ib,
						  const char *provider);
int bld_has_ready_upload(const struct imgtree_build *ib, const char *provider);
int bld_validation_failed(const struct np_image_upload *u);
int bld_has_failed_validation(const struct imgtree_build *ib, const char *provider);
const json_t *bld_build_validation_failure(const struct np_image_build *bd, const char *provider);
int bld_validation_tries(const struct np_image_build *bd, const char *provider);
int bld_upload_validates(const struct builder *b, const struct np_provider *p, const char *image);
void bld_local_path(const struct builder *b, const char *image, const char *build, const char *ext,
		    char *buf, size_t size);
char *bld_read_checksum(const char *path, size_t len);
json_t *bld_provider_config_json(const struct np_provider *p);

/* ---- tasks (task.c) ---- */

/* A task: made (the image copied), started (in b->tasks, first step run),
 * freed (out of its list, its locks and calls dropped). */
struct task *bld_task_new(struct builder *b, enum task_kind kind, const char *image);
void bld_task_free(struct task *t);
void bld_task_start(struct task *t);
/* ZooKeeper and job answers: each stores the outcome (t->rc, t->data,
 * t->build_data and t->build_version, the job's result) and moves the task
 * to its next step (t->step + 1). bld_t_tree_cb lends the tree it read as
 * bld_task_tree_tmp for that step only. */
void bld_t_lock_cb(struct zk_lock *lock, int rc, void *arg);
void bld_t_void_cb(int rc, void *arg);
void bld_t_stat_cb(int rc, const struct zk_stat *st, void *arg);
void bld_t_string_cb(int rc, const char *path, void *arg);
void bld_t_data_cb(int rc, const char *data, int len, const struct zk_stat *st, void *arg);
void bld_t_build_data_cb(int rc, const char *data, int len, const struct zk_stat *st, void *arg);
void bld_t_job_cb(bool ok, const json_t *result, const char *error, void *arg);
extern struct imgtree *bld_task_tree_tmp;
void bld_t_tree_cb(int rc, struct imgtree *tree, void *arg);
/* A new lock on path in *slot (the old one freed). */
void bld_lock_new(struct task *t, struct zk_lock **slot, const char *path);
/* On a new session: builds and uploads in flight take their locks again. */
void bld_relock_tasks(struct builder *b);
/* Record t->final (READY when t->good, else FAILED) as task.c describes;
 * then bld_build_finished or bld_upload_finished. */
void bld_finish(struct task *t);
/* After a failed create (t->rc): 1 when its outcome is being found out,
 * 0 when t->rc is a plain failure. */
int bld_create_lost(struct task *t);

/* ---- builds (build_sched.c) ---- */

/* A build's next step; its outcome recorded (recorded: 1 yes, 0 not ours,
 * -1 unknown); a build of d started when it needs one. */
void bld_run_build(struct task *t);
void bld_build_finished(struct task *t, int recorded);
void bld_check_build(struct builder *b, const struct imgtree *tree, const struct np_diskimage *d);

/* ---- uploads (upload_sched.c) ---- */

/* An upload's next step; its outcome recorded (as builds); an upload of
 * pi's newest ready build to p started when it needs one. */
void bld_run_upload(struct task *t);
void bld_upload_finished(struct task *t, int recorded);
void bld_check_upload(struct builder *b, const struct imgtree *tree, const struct np_provider *p,
		      const struct np_provider_image *pi);

/* ---- cleanup (cleanup.c) ---- */

/* The queued cleanup steps; a build's local files removed; a cleanup
 * pass on the snapshot tree. */
void bld_run_upload_delete(struct task *t);
void bld_run_upload_cruft(struct task *t);
void bld_run_build_deleting(struct task *t);
void bld_run_build_remove(struct task *t);
void bld_delete_local_build(struct builder *b, const char *image, const char *build);
void bld_cleanup(struct builder *b, const struct imgtree *tree);

#endif
