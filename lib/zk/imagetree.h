/*
 * A snapshot of the image data under /nodepool/images (builds, uploads,
 * pause flags, build requests), read in one pass without watches and
 * without creating anything (a missing znode is simply absent), as
 * upstream's uncached ZooKeeper.getImageNames/getBuildIds/getBuild/
 * getBuildProviders/getImageUploadNumbers/getImageUpload walk the tree.
 *
 * Used by `nodepool` (image-list, dib-image-list, image-status, info,
 * export-image-data) and by the web API, which refreshes one at most once a
 * second while image listings are asked for (upstream's web cache also
 * keeps results for 1 s), so only the serving worker ever reads the tree.
 *
 * The reads of one level are issued together (the latency of a snapshot is
 * the tree's depth in round trips, not its size). Names are sorted at every
 * level (upstream's order is ZooKeeper's, i.e. arbitrary, for builds and
 * uploads); "lock" is never an object. Everything is owned by the snapshot.
 */
#ifndef NP_IMAGETREE_H
#define NP_IMAGETREE_H

#include <stddef.h>
#include <jansson.h>

#include "protocol/model.h"

struct event_base;
struct zk;

struct imgtree_upload {
	char *id;		   /* "0000000001" */
	char *data;		   /* raw JSON (NUL-terminated), "" if empty */
	struct np_image_upload *u; /* decoded, NULL if malformed */
};

struct imgtree_provider {
	char *name;
	struct imgtree_upload *uploads;
	size_t nuploads;
};

struct imgtree_build {
	char *id;
	char *data;		  /* raw JSON, "" if empty */
	double ctime;		  /* epoch seconds the build znode was created */
	int gone;		  /* listed, then deleted before it was read */
	struct np_image_build *b; /* decoded, NULL if malformed */
	struct imgtree_provider *providers;
	size_t nproviders;
};

struct imgtree_image {
	char *name;
	int paused;	      /* …/<image>/pause exists */
	int has_request;      /* …/<image>/request-build exists */
	double request_ctime; /* its creation, epoch seconds */
	int lock_contenders;  /* children of …/builds/lock (a build running) */
	double lock_ctime;
	struct imgtree_build *builds;
	size_t nbuilds;
};

struct imgtree {
	struct imgtree_image *images;
	size_t nimages;
};

void imgtree_free(struct imgtree *t);

/* A load in progress. */
struct imgtree_load;
/* rc ZOK with the snapshot (ownership passes to the callee), or a
 * ZooKeeper error with tree NULL. */
typedef void (*imgtree_cb)(int rc, struct imgtree *tree, void *arg);

/* Start reading; cb is called once on the loop (never before this returns). */
struct imgtree_load *imgtree_load_start(struct zk *zk, imgtree_cb cb, void *arg);
/* Abandon a load: its reads are cancelled (zk_cancel), cb is not called.
 * Call before the zk is freed. NULL is a no-op. */
void imgtree_load_cancel(struct imgtree_load *l);
/* For tools: load and wait, running base (the zk's loop) up to timeout
 * seconds. Returns ZOK and *out, or an error (ZOPERATIONTIMEOUT on
 * timeout). */
int imgtree_load_sync(struct event_base *base, struct zk *zk, double timeout, struct imgtree **out);

/* Lookups; NULL if absent. */
const struct imgtree_image *imgtree_image(const struct imgtree *t, const char *name);
const struct imgtree_build *imgtree_build(const struct imgtree_image *im, const char *id);

/*
 * Image status of one image as upstream's getBuildRequest: NULL without a
 * request; with one, "building" when a builder holds the image's build lock
 * and a build znode was created after the lock dir, else "pending". We look
 * at the newest build; upstream looks at an arbitrary one.
 */
const char *imgtree_build_request(const struct imgtree_image *im);

/*
 * As upstream's exportImageData: an object {znode path: data} of every
 * pause flag (""), build and upload (their JSON text), in tree order.
 * New reference.
 */
json_t *imgtree_export(const struct imgtree *t);

/*
 * Check an import (the object export writes) before anything is written:
 * every key a pause flag, build or upload path under /nodepool/images
 * (build ids 32 hex or 10 digits, upload ids 10 digits below
 * IMGTREE_MAX_UPLOAD_SEQ), every value a string, builds and uploads
 * readable records (or empty). 0, or -1 with a message in err. Pure.
 */
#define IMGTREE_MAX_UPLOAD_SEQ 10000000LL
int imgtree_import_check(const json_t *data, char *err, size_t errlen);

#endif
