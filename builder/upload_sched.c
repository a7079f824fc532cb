/*
 * Upload scheduling (upstream's UploadWorker): which provider needs an
 * upload of the newest ready build (bld_check_upload, on every pass) and
 * an upload's steps, from the upload lock to its READY or FAILED record
 * (bld_run_upload), the cloud image deleted again when the result turned
 * out not to be ours. With `validate`, a new upload is stored pending its
 * validation, which the provider's launcher runs; after a failed
 * validation the next upload carries the reason (retry_of).
 */
#include "builder/builder_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "lib/core/clock.h"
#include "lib/core/log.h"
#include "lib/ops/statsd.h"
#include "protocol/paths.h"

static void
upload_release(struct task *t)
{
	char key[1024];

	snprintf(key, sizeof(key), "%s/%s", t->image, t->provider);
	strset_del(t->b->uploading, key);
	bld_task_free(t);
}

/* image-name-format with {image_name}, {upload_id}, {timestamp}. */
static void
external_name(const char *fmt, const char *image, const char *upload_id, char *out, size_t size)
{
	char ts[32];
	size_t o = 0;

	snprintf(ts, sizeof(ts), "%lld", (long long)bld_now_wall());
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
upload_spec(struct builder *b, struct task *t, const struct np_provider *p)
{
	const struct np_diskimage *d = np_cfg_diskimage(b->cfg, t->image);
	const struct np_provider_image *pi = bld_provider_diskimage(p, t->image);
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
	bld_local_path(b, t->image, t->build, t->format, file, sizeof(file));
	snprintf(sum, sizeof(sum), "%s.md5", file);
	md5 = bld_read_checksum(sum, 32);
	snprintf(sum, sizeof(sum), "%s.sha256", file);
	sha256 = bld_read_checksum(sum, 64);
	external_name(p->image_name_format ? p->image_name_format : "{image_name}-{timestamp}",
		      t->image, t->upload, name, sizeof(name));
	free(t->external_id);
	t->external_id = bld_strdup(name); /* the external name, until the cloud names it */
	spec = json_pack(
	    "{s:s, s:o, s:s, s:s, s:s, s:s, s:o, s:s?, s:s?, s:I, s:i, s:f, s:s?}", "provider",
	    p->name, "config", bld_provider_config_json(p), "image", t->image, "image_name", name,
	    "filename", file, "format", t->format, "metadata", meta, "md5", md5, "sha256", sha256,
	    "timeout", (json_int_t)p->image_upload_timeout, "retries", UPLOAD_ATTEMPTS,
	    "retry_delay", b->opt.upload_retry_delay, "post_upload_hook", p->post_upload_hook);
	free(md5);
	free(sha256);
	return spec;
}

/* An upload, step by step (upstream's _checkProviderImageUpload,
 * _uploadImage). */
void
bld_run_upload(struct task *t)
{
	struct builder *b = t->b;
	const struct np_provider *p = np_cfg_provider(b->cfg, t->provider);
	char path[NP_PATH_MAX];
	struct np_image_upload *rec;
	char *json;
	size_t len;

	switch (t->step) {
	case UPLOAD_LOCK:
		np_path_upload_lock(path, sizeof(path), t->image, t->build, t->provider);
		bld_lock_new(t, &t->lock, path);
		zk_lock_acquire(t->lock, 0, bld_t_lock_cb, t);
		return;
	case UPLOAD_REREAD:
		if (t->rc != ZOK) {
			if (t->rc != ZK_LOCK_BUSY)
				bld_set_error(b, "upload lock of %s-%s in %s: %s", t->image,
					      t->build, t->provider, zk_strerror(t->rc));
			upload_release(t);
			return;
		}
		t->load = imgtree_load_start(b->zk, bld_t_tree_cb, t);
		return;
	case UPLOAD_CREATE: {
		const struct imgtree_image *im;
		const struct imgtree_build *ib;
		if (t->rc != ZOK || p == NULL) {
			upload_release(t);
			return;
		}
		im = imgtree_image(bld_task_tree_tmp, t->image);
		ib = im != NULL ? imgtree_build(im, t->build) : NULL;
		/* uploaded meanwhile, or being deleted: nothing to do */
		if (ib == NULL || ib->b == NULL || ib->b->state != NP_BUILD_READY ||
		    bld_has_ready_upload(ib, t->provider)) {
			upload_release(t);
			return;
		}
		rec = np_image_upload_new();
		np_image_upload_set_state(rec, NP_UPLOAD_UPLOADING);
		{
			const json_t *f = bld_build_validation_failure(ib->b, t->provider);
			json_decref(t->retry_of);
			t->retry_of =
			    f == NULL
				? NULL
				: json_pack(
				      "{s:I, s:s?, s:s?}", "attempt",
				      (json_int_t)bld_validation_tries(ib->b, t->provider) + 1,
				      "upload", json_string_value(json_object_get(f, "upload")),
				      "reason", json_string_value(json_object_get(f, "reason")));
			if (t->retry_of != NULL) {
				rec->extra = json_object();
				json_object_set(rec->extra, "retry_of", t->retry_of);
			}
		}
		rec->username = ib->b->username ? bld_strdup(ib->b->username) : NULL;
		rec->python_path = ib->b->python_path ? bld_strdup(ib->b->python_path) : NULL;
		rec->shell_type = ib->b->shell_type ? bld_strdup(ib->b->shell_type) : NULL;
		t->username = rec->username ? bld_strdup(rec->username) : NULL;
		t->python_path = rec->python_path ? bld_strdup(rec->python_path) : NULL;
		t->shell_type = rec->shell_type ? bld_strdup(rec->shell_type) : NULL;
		json = np_image_upload_encode(rec, &len);
		np_image_upload_free(rec);
		free(t->created);
		t->created = bld_strdup(json);
		np_path_uploads(path, sizeof(path), t->image, t->build, t->provider);
		strcat(path, "/");
		zk_create(b->zk, path, json, (int)len, ZOO_SEQUENCE, 1, bld_t_string_cb, t);
		free(json);
		return;
	}
	case UPLOAD_RUN: {
		json_t *spec;
		if (t->rc != ZOK && bld_create_lost(t))
			return;
		t->tries = 0;
		if (t->rc != ZOK) {
			bld_set_error(b, "storing the upload of %s-%s to %s: %s", t->image,
				      t->build, t->provider, zk_strerror(t->rc));
			upload_release(t);
			return;
		}
		b->uploads_started++;
		spec = upload_spec(b, t, p);
		log_info("uploading image %s build %s to %s (upload %s, %s)", t->image, t->build,
			 t->provider, t->upload, t->format);
		t->upload_start = np_mono_s();
		t->phase = 1;
		bpool_submit(b->uploads, "upload", spec, bld_t_job_cb, t);
		json_decref(spec);
		return;
	}
	case UPLOAD_DONE: {
		const char *ext = json_string_value(json_object_get(t->job_result, "external_id"));
		int ok = t->job_ok && ext != NULL;
		rec = np_image_upload_new();
		if (ok) {
			rec->external_id = bld_strdup(ext);
			rec->external_name = bld_strdup(t->external_id);
			rec->format = bld_strdup(t->format);
			rec->username = t->username ? bld_strdup(t->username) : NULL;
			rec->python_path = t->python_path ? bld_strdup(t->python_path) : NULL;
			rec->shell_type = t->shell_type ? bld_strdup(t->shell_type) : NULL;
			free(t->external_id);
			t->external_id = bld_strdup(ext);
			if (t->retry_of != NULL) {
				rec->extra = json_object();
				json_object_set(rec->extra, "retry_of", t->retry_of);
			}
			if (bld_upload_validates(b, p, t->image)) {
				if (rec->extra == NULL)
					rec->extra = json_object();
				json_object_set_new(rec->extra, "validation",
						    json_pack("{s:s}", "state", "pending"));
				log_info("upload %s of %s-%s to %s waits for its validation",
					 t->upload, t->image, t->build, t->provider);
			}
		} else {
			b->uploads_failed++;
			bld_set_error(b, "upload of %s-%s to %s failed: %s", t->image, t->build,
				      t->provider, t->job_error ? t->job_error : "no external id");
		}
		np_image_upload_set_state(rec, ok ? NP_UPLOAD_READY : NP_UPLOAD_FAILED);
		t->good = ok;
		free(t->final);
		t->final = np_image_upload_encode(rec, &len);
		np_image_upload_free(rec);
		bld_finish(t); /* then bld_upload_finished() */
		return;
	}
	case UPLOAD_DELETE_AGAIN:
		if (p != NULL && bld_provider_uploads(p)) {
			json_t *spec =
			    json_pack("{s:s, s:o, s:s}", "provider", p->name, "config",
				      bld_provider_config_json(p), "external_id", t->external_id);
			log_info(
			    "deleting image %s from %s again (upload %s of %s-%s not recorded)",
			    t->external_id, t->provider, t->upload, t->image, t->build);
			bpool_submit(b->uploads, "delete-image", spec, bld_t_job_cb, t);
			json_decref(spec);
			return;
		}
		bld_set_error(b,
			      "image %s in %s is left: the provider is gone from the configuration",
			      t->external_id, t->provider);
		upload_release(t);
		return;
	case UPLOAD_DELETED_AGAIN:
		if (!t->job_ok)
			bld_set_error(b, "deleting image %s from %s: %s", t->external_id,
				      t->provider, t->job_error ? t->job_error : "?");
		upload_release(t);
		return;
	}
}

/* An upload's outcome is recorded (or, recorded 0, is not ours). */
void
bld_upload_finished(struct task *t, int recorded)
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
		bld_set_error(b,
			      "upload %s of %s-%s to %s: not recorded (ZooKeeper session or lock "
			      "lost); its image %s is deleted again",
			      t->upload, t->image, t->build, t->provider, t->external_id);
		t->step = UPLOAD_DELETE_AGAIN;
		bld_run_upload(t);
		return;
	} else if (t->good)
		b->uploads_failed++;
	upload_release(t);
	bld_schedule_soon(b);
}

void
bld_check_upload(struct builder *b, const struct imgtree *tree, const struct np_provider *p,
		 const struct np_provider_image *pi)
{
	const struct imgtree_image *im = imgtree_image(tree, pi->name);
	const struct imgtree_build *nr = bld_newest_ready(im);
	char fbuf[64];
	const char *fmt = bld_provider_format(p, fbuf, sizeof(fbuf));
	char key[1024], file[4096];
	struct task *t;

	snprintf(key, sizeof(key), "%s/%s", pi->name, p->name);
	if (pi->pause || nr == NULL || strset_has(b->uploading, key))
		return;
	if (!bld_provider_uploads(p)) {
		log_debug("provider %s: its driver (%s) cannot upload images here", p->name,
			  p->driver);
		return;
	}
	/* a failed validation: cleanup deletes that upload, then this build
	 * is uploaded again, VALIDATION_TRIES times in all */
	if (bld_has_ready_upload(nr, p->name) || bld_has_failed_validation(nr, p->name) ||
	    bld_validation_tries(nr->b, p->name) >= VALIDATION_TRIES ||
	    !np_strv_contains(&nr->b->formats, fmt))
		return;
	bld_local_path(b, pi->name, nr->id, fmt, file, sizeof(file));
	if (access(file, R_OK) != 0) /* only the builder with the files uploads */
		return;
	if ((int)strset_count(b->uploading) >= b->opt.upload_workers)
		return;
	t = bld_task_new(b, T_UPLOAD, pi->name);
	t->build = bld_strdup(nr->id);
	t->provider = bld_strdup(p->name);
	t->format = bld_strdup(fmt);
	strset_add(b->uploading, key);
	bld_task_start(t);
}
