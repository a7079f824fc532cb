/*
 * Cleanup (upstream's CleanupWorker), every cleanup-interval: which
 * uploads and builds go (bld_cleanup, from the snapshot: superseded,
 * failed, failed validation, marked deleting, abandoned, of removed images
 * or providers), the queued steps that delete them one at a time (in the
 * cloud through an upload worker, then in ZooKeeper), and the local files
 * of builds that are gone (and, with delete-after-upload, formats every
 * provider has).
 */
#include "builder/builder_int.h"

#include <sys/stat.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "lib/core/clock.h"
#include "lib/core/log.h"
#include "protocol/paths.h"

static void act_next(struct builder *b);

static void
act_done(struct task *t)
{
	struct builder *b = t->b;

	bld_task_free(t);
	act_next(b);
}

static void
act_queue(struct builder *b, enum task_kind kind, const char *image, const char *build,
	  const char *provider, const char *upload, const char *data)
{
	struct task *t = bld_task_new(b, kind, image);

	t->build = build ? bld_strdup(build) : NULL;
	t->provider = provider ? bld_strdup(provider) : NULL;
	t->upload = upload ? bld_strdup(upload) : NULL;
	t->data = data ? bld_strdup(data) : NULL;
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
	bld_task_start(t);
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
void
bld_run_upload_delete(struct task *t)
{
	struct builder *b = t->b;
	const struct np_provider *p = np_cfg_provider(b->cfg, t->provider);
	struct np_image_upload *u = NULL;
	char path[NP_PATH_MAX], err[256], *json;
	size_t len;

	switch (t->step) {
	case UD_READ:
		if (t->data == NULL || np_image_upload_decode(t->upload, t->data, strlen(t->data),
							      &u, err, sizeof(err)) != 0) {
			/* a malformed record: nothing to delete in the cloud */
			t->step = UD_RELOCK;
			bld_run_upload_delete(t);
			return;
		}
		t->rc = u->state;
		free(t->external_id);
		t->external_id = u->external_id ? bld_strdup(u->external_id) : NULL;
		if (u->state == NP_UPLOAD_FAILED && bld_validation_failed(u)) {
			const char *why = json_string_value(
			    json_object_get(json_object_get(u->extra, "validation"), "reason"));
			free(t->reason);
			t->reason = bld_strdup(why != NULL ? why : "?");
		}
		np_image_upload_free(u);
		if (t->reason != NULL) {
			/* note it on the build record first */
			np_path_build(path, sizeof(path), t->image, t->build);
			t->step = UD_NOTE_READ;
			zk_get(b->zk, path, NULL, NULL, bld_t_build_data_cb, t);
			return;
		}
		if (t->rc == NP_UPLOAD_DELETING) {
			t->step = UD_CLOUD;
			bld_run_upload_delete(t);
			return;
		}
		if (t->rc == NP_UPLOAD_UPLOADING) {
			/* in progress when someone holds the upload lock */
			np_path_upload_lock(path, sizeof(path), t->image, t->build, t->provider);
			bld_lock_new(t, &t->lock2, path);
			zk_lock_acquire(t->lock2, 0, bld_t_lock_cb, t);
			return;
		}
		t->rc = ZOK;
		t->step = UD_LOCK;
		/* fall through */
	case UD_LOCK:
		if (t->rc != ZOK) {
			act_done(t);
			return;
		}
		np_path_upload_id_lock(path, sizeof(path), t->image, t->build, t->provider,
				       t->upload);
		bld_lock_new(t, &t->lock, path);
		zk_lock_acquire(t->lock, 0, bld_t_lock_cb, t);
		return;
	case UD_MARK:
		if (t->rc != ZOK) {
			act_done(t);
			return;
		}
		json = upload_with_state(t, NP_UPLOAD_DELETING, &len);
		np_path_upload(path, sizeof(path), t->image, t->build, t->provider, t->upload);
		zk_set(b->zk, path, json, (int)len, -1, bld_t_stat_cb, t);
		free(json);
		return;
	case UD_UNLOCK:
		t->job_ok = t->rc == ZOK;
		zk_lock_release(t->lock, bld_t_void_cb, t);
		return;
	case UD_UNLOCKED:
		if (!t->job_ok) {
			act_done(t);
			return;
		}
		t->step = UD_CLOUD;
		/* fall through */
	case UD_CLOUD: /* deleting: the cloud first */
		if (t->external_id != NULL && p != NULL && bld_provider_uploads(p)) {
			json_t *spec =
			    json_pack("{s:s, s:o, s:s}", "provider", p->name, "config",
				      bld_provider_config_json(p), "external_id", t->external_id);
			log_info("deleting image build %s-%s from %s (%s)", t->image, t->build,
				 t->provider, t->external_id);
			bpool_submit(b->uploads, "delete-image", spec, bld_t_job_cb, t);
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
		t->step = UD_CLOUD_DONE;
		/* fall through */
	case UD_CLOUD_DONE:
		if (!t->job_ok) {
			bld_set_error(b, "deleting image %s from %s: %s", t->external_id,
				      t->provider, t->job_error ? t->job_error : "?");
			act_done(t); /* retried on the next pass */
			return;
		}
		/* fall through */
	case UD_RELOCK: /* the record, under the upload-number lock */
		np_path_upload_id_lock(path, sizeof(path), t->image, t->build, t->provider,
				       t->upload);
		bld_lock_new(t, &t->lock, path);
		t->step = UD_RELOCK;
		zk_lock_acquire(t->lock, 0, bld_t_lock_cb, t);
		return;
	case UD_REMOVE:
		if (t->rc != ZOK) {
			act_done(t);
			return;
		}
		np_path_upload(path, sizeof(path), t->image, t->build, t->provider, t->upload);
		zk_delete(b->zk, path, -1, 1, bld_t_void_cb, t);
		return;
	case UD_REMOVED:
		zk_lock_disown(t->lock); /* its contender went with the record */
		if (t->rc == ZOK || t->rc == ZNONODE) {
			b->deleted_uploads++;
			log_info("removed upload %s of %s-%s in %s", t->upload, t->image, t->build,
				 t->provider);
		} else
			bld_set_error(b, "removing upload %s: %s", t->upload, zk_strerror(t->rc));
		act_done(t);
		return;
	case UD_NOTE: { /* a failed validation: note it on the build record */
		struct np_image_build *bd = NULL;
		const json_t *f;
		json_t *all;
		int tries;
		if (t->rc != ZOK) {
			act_done(t); /* the next pass tries again */
			return;
		}
		if (t->build_data == NULL ||
		    np_image_build_decode(t->build, t->build_data, strlen(t->build_data), &bd, err,
					  sizeof(err)) != 0) {
			/* nothing to note it on: the upload goes all the same */
			log_warn("build %s-%s: unreadable (%s); upload %s in %s failed its "
				 "validation (%s) and is deleted without a note",
				 t->image, t->build, t->build_data == NULL ? "empty" : err,
				 t->upload, t->provider, t->reason);
			np_image_build_free(bd);
			t->rc = ZOK;
			t->step = UD_LOCK;
			bld_run_upload_delete(t);
			return;
		}
		f = bld_build_validation_failure(bd, t->provider);
		tries = bld_validation_tries(bd, t->provider);
		if (f != NULL && json_string_value(json_object_get(f, "upload")) != NULL &&
		    strcmp(json_string_value(json_object_get(f, "upload")), t->upload) == 0) {
			/* noted by an earlier pass whose delete did not finish */
			np_image_build_free(bd);
			t->rc = ZOK;
			t->step = UD_LOCK;
			bld_run_upload_delete(t);
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
					      (json_int_t)bld_now_wall()));
		json = np_image_build_encode(bd, &len);
		np_image_build_free(bd);
		if (tries < VALIDATION_TRIES)
			bld_set_error(
			    b,
			    "upload %s of %s-%s to %s failed its validation: %s; deleting it, "
			    "the build is uploaded again (%d of %d tries failed)",
			    t->upload, t->image, t->build, t->provider, t->reason, tries,
			    VALIDATION_TRIES);
		else
			bld_set_error(
			    b,
			    "upload %s of %s-%s to %s failed its validation: %s; deleting it; "
			    "%d tries failed, the next build is uploaded there",
			    t->upload, t->image, t->build, t->provider, t->reason, tries);
		np_path_build(path, sizeof(path), t->image, t->build);
		zk_set(b->zk, path, json, (int)len, t->build_version, bld_t_stat_cb, t);
		free(json);
		return;
	}
	case UD_NOTED:
		if (t->rc != ZOK) {
			log_warn("noting the failed validation of upload %s on build %s-%s: %s; "
				 "the next pass tries again",
				 t->upload, t->image, t->build, zk_strerror(t->rc));
			act_done(t);
			return;
		}
		t->rc = ZOK;
		t->step = UD_LOCK;
		bld_run_upload_delete(t);
		return;
	default:
		act_done(t);
		return;
	}
}

/* An uploading record on a kept build nobody works on: remove it
 * (upstream's _cleanupCurrentProviderUploads). */
void
bld_run_upload_cruft(struct task *t)
{
	struct builder *b = t->b;
	char path[NP_PATH_MAX], err[256];
	struct np_image_upload *u = NULL;

	switch (t->step) {
	case CRUFT_LOCK:
		np_path_upload_lock(path, sizeof(path), t->image, t->build, t->provider);
		bld_lock_new(t, &t->lock, path);
		zk_lock_acquire(t->lock, 0, bld_t_lock_cb, t);
		return;
	case CRUFT_READ:
		if (t->rc != ZOK) { /* in progress */
			act_done(t);
			return;
		}
		np_path_upload(path, sizeof(path), t->image, t->build, t->provider, t->upload);
		zk_get(b->zk, path, NULL, NULL, bld_t_data_cb, t);
		return;
	case CRUFT_REMOVE:
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
		zk_delete(b->zk, path, -1, 1, bld_t_void_cb, t);
		return;
	case CRUFT_REMOVED:
	default:
		if (t->rc == ZOK)
			b->deleted_uploads++;
		act_done(t);
		return;
	}
}

void
bld_run_build_deleting(struct task *t)
{
	struct builder *b = t->b;
	char path[NP_PATH_MAX], err[256], *json;
	struct np_image_build *bd = NULL;
	size_t len;

	switch (t->step) {
	case BD_LOCK:
		np_path_build_lock(path, sizeof(path), t->image, t->build);
		bld_lock_new(t, &t->lock, path);
		zk_lock_acquire(t->lock, 0, bld_t_lock_cb, t);
		return;
	case BD_READ:
		if (t->rc != ZOK) {
			act_done(t);
			return;
		}
		np_path_build(path, sizeof(path), t->image, t->build);
		zk_get(b->zk, path, NULL, NULL, bld_t_data_cb, t);
		return;
	case BD_MARK:
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
		zk_set(b->zk, path, json, (int)len, -1, bld_t_stat_cb, t);
		free(json);
		log_info("build %s-%s is deleting", t->image, t->build);
		return;
	case BD_MARKED:
	default:
		act_done(t);
		return;
	}
}

/* Remove a build none of whose uploads is left (the snapshot said so;
 * upstream's deleteBuild). */
void
bld_run_build_remove(struct task *t)
{
	struct builder *b = t->b;
	char path[NP_PATH_MAX];

	switch (t->step) {
	case BR_REMOVE:
		np_path_build(path, sizeof(path), t->image, t->build);
		zk_delete(b->zk, path, -1, 1, bld_t_void_cb, t);
		return;
	case BR_REMOVED:
	default:
		if (t->rc == ZOK) {
			b->deleted_builds++;
			log_info("removed build %s-%s", t->image, t->build);
		}
		act_done(t);
		return;
	}
}

static int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

/* Remove a build's local files (upstream's deleteLocalBuild). */
void
bld_delete_local_build(struct builder *b, const char *image, const char *build)
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
	const struct np_diskimage *d = np_cfg_diskimage(b->cfg, image);
	struct np_strv keep = {NULL, 0};
	char fmt[64];
	size_t i;

	if (d == NULL || !d->delete_after_upload)
		return;
	for (i = 0; i < d->keep_formats.n; i++)
		np_strv_push(&keep, d->keep_formats.v[i]);
	for (i = 0; i < b->cfg->nproviders; i++) {
		const struct np_provider *p = &b->cfg->providers[i];
		if (p->manage_images && bld_provider_diskimage(p, image) != NULL &&
		    !bld_has_ready_upload(ib, p->name))
			np_strv_push(&keep, bld_provider_format(p, fmt, sizeof(fmt)));
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
		bld_local_path(b, image, ib->id, f, path, sizeof(path));
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
			bld_delete_local_build(b, key, id);
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
		const struct imgtree_provider *ip = bld_build_provider(ib, provider);
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
	const struct np_diskimage *d = np_cfg_diskimage(b->cfg, im->name);
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
			const struct np_provider *p = np_cfg_provider(b->cfg, ip->name);
			int obsolete = p == NULL || !p->manage_images ||
				       bld_provider_diskimage(p, im->name) == NULL;
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

void
bld_cleanup(struct builder *b, const struct imgtree *tree)
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
