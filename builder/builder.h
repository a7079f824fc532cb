/*
 * nodepool-builder: diskimage builds and uploads, as upstream Nodepool's
 * builder.py (reference section 4), in three kinds of processes:
 *
 *   the builder (builder.c and the files builder_int.h lists): one
 *     ZooKeeper session, the builder component, every lock, every record;
 *     schedules builds, uploads and cleanup from snapshots of
 *     /nodepool/images (lib/zk/imagetree.h);
 *   build workers (dib.c): run dib-cmd for one build at a time;
 *   upload workers (upload.c): host one provider's driver at a time and
 *     call its image_upload / image_delete slots.
 *
 * Workers are child processes of the builder (pool.c), exec'd from the
 * builder's own binary with `--worker build|upload`, talking JOB and
 * JOB_DONE frames (protocol/ipc_types.h) over a socketpair on fd 3. A
 * worker that dies fails only its own job (recorded FAILED, retried on a
 * later pass) and is started again; the other workers go on.
 *
 * JOB specs (JSON objects):
 *   build:  {argv: [str], env: {str: str} (added to the builder's
 *           environment), log: path, timeout: seconds (<= 0 none)}
 *           -> result {rc: int, duration: seconds, timed_out: bool}
 *   upload: {provider: name, config: the provider's nodepool.yaml entry,
 *           image, image_name, filename, format, metadata: {}, md5, sha256
 *           (or null), timeout (<= 0 none), retries (attempts in all),
 *           post_upload_hook (or null)}
 *           -> result {external_id: str, attempts: int}
 *   delete-image: {provider, config, external_id} -> result {}
 */
#ifndef NP_BUILDER_H
#define NP_BUILDER_H

#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>

#include "drivers/host.h"

struct event_base;
struct evbuffer;

/* ---- worker pools (pool.c) ------------------------------------------------ */

struct bpool;

/*
 * The outcome of a job: ok with result (a JSON object, borrowed for the
 * call), or !ok with error (the worker's reason, or "worker exited ..."
 * when it died).
 */
typedef void (*bpool_done_cb)(bool ok, const json_t *result, const char *error, void *arg);

/*
 * A pool of size worker processes of kind ("build" or "upload"), exec'd
 * from exe (the builder's binary) with `--worker KIND --channel 3` (and
 * -d when debug). Workers that die are started again after a second.
 */
struct bpool *bpool_new(struct event_base *base, const char *kind, int size, const char *exe,
			bool debug);
/* Kill every worker (SIGTERM, then SIGKILL after grace seconds), fail
 * nothing (no callback is called), free. NULL is a no-op. */
void bpool_free(struct bpool *p, double grace);
/*
 * Queue a job (spec is copied); done is called exactly once, on the loop,
 * unless the pool is freed first. Jobs start in submission order on the
 * first idle worker. Returns the job id.
 */
int64_t bpool_submit(struct bpool *p, const char *kind, const json_t *spec, bpool_done_cb done,
		     void *arg);
/* Workers neither busy nor promised to a queued job (<= 0: full). */
int bpool_free_slots(const struct bpool *p);
/* Jobs running or queued. */
int bpool_busy(const struct bpool *p);
/* One line per worker: pid, state, job. */
void bpool_dump(const struct bpool *p, struct evbuffer *out);
/* Reap exited workers (call from the SIGCHLD handler). */
void bpool_reap(struct bpool *p, pid_t pid, int status);

/* ---- worker processes ------------------------------------------------------- */

/* Run a build worker or an upload worker on fd 3 until the builder goes
 * away. Returns the exit code. */
int dib_worker_main(struct event_base *base);
int upload_worker_main(struct event_base *base);

/*
 * What an upload worker offers the driver it hosts: handle (owner: this
 * struct) is what provider_new gets, and bld_host_ops read the rest. Owned
 * by the upload worker; provider and config are its own copies.
 */
struct bld_host {
	struct drv_host handle;
	struct event_base *base;
	char *provider;
	json_t *config; /* the provider's nodepool.yaml entry */
};

/*
 * The builder's driver host services (drivers/host.h; upload.c): only
 * event_base, provider_name and provider_config, read from the struct
 * bld_host; every other slot is NULL, so a driver sees no ZooKeeper
 * session, no nodes, no peers, caches in sync, and node writes refused.
 * main.c registers them at start, in every mode.
 */
struct drv_host_ops;
extern const struct drv_host_ops bld_host_ops;

/* ---- the builder (builder.c) ---------------------------------------------- */

struct builder;

struct builder_options {
	const char *config, *secure; /* standalone: the files (secure may be NULL) */
	int channel_fd;		     /* under nodepoold: CHAN_CHILD_FD, else -1 */
	int build_workers;	     /* upstream's --build-workers (1) */
	int upload_workers;	     /* upstream's --upload-workers (4) */
	double interval;	     /* seconds between scheduling passes (10) */
	double cleanup_interval;     /* seconds between cleanup passes (60) */
	double upload_retry_delay;   /* seconds between upload attempts (10) */
	bool debug;
	const char *exe; /* the builder's binary, for the workers */
};

struct builder *builder_new(struct event_base *base, const struct builder_options *o, char *err,
			    size_t errlen);
void builder_stop(struct builder *b);
void builder_dump(struct builder *b, struct evbuffer *out);
void builder_sigchld(struct builder *b);
int builder_exit_code(const struct builder *b);
void builder_free(struct builder *b);

#endif
