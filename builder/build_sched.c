/*
 * Build scheduling (upstream's BuildWorker): which diskimage needs a build
 * (bld_check_build, on every pass) and a build's steps, from the image's
 * build lock to its READY or FAILED record (bld_run_build): dib-cmd's
 * argv and environment, the build log retention, statsd.
 */
#include "builder/builder_int.h"

#include <sys/stat.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "lib/core/clock.h"
#include "lib/core/log.h"
#include "lib/ops/statsd.h"
#include "protocol/paths.h"

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
	char *copy = bld_strdup(s), *save = NULL, *w;

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
	bld_task_free(t);
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
			bld_local_path(b, t->image, t->build, t->formats.v[i], path, sizeof(path));
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
	statsd_gauge(b->statsd, key, (double)(long long)bld_now_wall());
	statsd_flush(b->statsd);
}

/* A build, step by step (upstream's _checkImageFor*ImageUpdates,
 * _buildWrapper, _buildImage). */
void
bld_run_build(struct task *t)
{
	struct builder *b = t->b;
	const struct np_diskimage *d = np_cfg_diskimage(b->cfg, t->image);
	char path[NP_PATH_MAX];
	struct np_image_build *rec;
	char *json;
	size_t len;

	switch (t->step) {
	case BUILD_LOCK:
		np_path_image_build_lock(path, sizeof(path), t->image);
		bld_lock_new(t, &t->lock, path);
		zk_lock_acquire(t->lock, 0, bld_t_lock_cb, t);
		return;
	case BUILD_REREAD:
		if (t->rc != ZOK) {
			if (t->rc != ZK_LOCK_BUSY)
				bld_set_error(b, "build lock of %s: %s", t->image,
					      zk_strerror(t->rc));
			build_release(t);
			return;
		}
		/* re-read: another builder may have built it meanwhile */
		t->load = imgtree_load_start(b->zk, bld_t_tree_cb, t);
		return;
	case BUILD_CREATE: {
		const struct imgtree_image *im;
		const struct imgtree_build *nr;
		if (t->rc != ZOK || d == NULL) {
			build_release(t);
			return;
		}
		im = imgtree_image(bld_task_tree_tmp, t->image);
		nr = bld_newest_ready(im);
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
		rec->builder = bld_strdup(b->hostname);
		rec->builder_id = bld_strdup(b->builder_id);
		np_strv_copy(&rec->formats, &t->formats);
		np_image_build_set_state(rec, NP_BUILD_BUILDING);
		json = np_image_build_encode(rec, &len);
		np_image_build_free(rec);
		np_path_build(path, sizeof(path), t->image, t->build);
		t->step = BUILD_CREATING;
		free(t->created);
		t->created = bld_strdup(json);
		zk_create(b->zk, path, json, (int)len, 0, 1, bld_t_string_cb, t);
		free(json);
		return;
	}
	case BUILD_RUN:
		if (t->rc != ZOK && bld_create_lost(t))
			return;
		t->tries = 0;
		if (t->rc != ZOK) {
			bld_set_error(b, "storing build %s-%s: %s", t->image, t->build,
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
			bpool_submit(b->builds, "build", spec, bld_t_job_cb, t);
			json_decref(spec);
		}
		return;
	case BUILD_DONE: {
		int rc = -1, ok;
		double duration = np_mono_s() - t->started;
		if (t->job_ok)
			rc = (int)json_integer_value(json_object_get(t->job_result, "rc"));
		ok = t->job_ok && rc == 0;
		rec = np_image_build_new();
		rec->builder = bld_strdup(b->hostname);
		rec->builder_id = bld_strdup(b->builder_id);
		if (ok) {
			np_strv_copy(&rec->formats, &t->formats);
			free(rec->username);
			rec->username = d != NULL ? bld_strdup(d->username) : bld_strdup("zuul");
			rec->python_path = d != NULL ? bld_strdup(d->python_path) : NULL;
			rec->shell_type =
			    d != NULL && d->shell_type ? bld_strdup(d->shell_type) : NULL;
		} else {
			b->builds_failed++;
			bld_set_error(b, "image %s build %s failed: %s", t->image, t->build,
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
		bld_finish(t); /* then bld_build_finished() */
		return;
	}
	case BUILD_REQUEST_DONE:
		if (t->job_ok && t->manual) {
			np_path_image_request_build(path, sizeof(path), t->image);
			zk_delete(b->zk, path, -1, 0, bld_t_void_cb, t);
			return;
		}
		t->step = BUILD_RELEASE;
		/* fall through */
	case BUILD_RELEASE:
		build_release(t);
		bld_schedule_soon(b); /* uploads can start now */
		return;
	}
}

/* A build's outcome is recorded (or, recorded 0, is not ours). */
void
bld_build_finished(struct task *t, int recorded)
{
	struct builder *b = t->b;

	if (t->good && recorded > 0) {
		b->builds_ready++;
		log_info("image %s build %s is ready (%.1fs)", t->image, t->build,
			 np_mono_s() - t->started);
	} else if (t->good && recorded == 0) {
		/* as upstream: a build not recorded as ours leaves no files */
		b->builds_failed++;
		bld_set_error(b, "image %s build %s: not recorded (ZooKeeper session or lock lost)",
			      t->image, t->build);
		bld_delete_local_build(b, t->image, t->build);
	} else if (t->good)
		b->builds_failed++;
	t->job_ok = t->good && recorded > 0;
	t->step = BUILD_REQUEST_DONE;
	bld_run_build(t);
}

void
bld_check_build(struct builder *b, const struct imgtree *tree, const struct np_diskimage *d)
{
	const struct imgtree_image *im = imgtree_image(tree, d->name);
	const struct imgtree_build *nr = bld_newest_ready(im);
	struct np_strv formats = {NULL, 0};
	int manual, need;
	size_t i;
	struct task *t;

	if (strset_has(b->building, d->name) || d->pause || (im != NULL && im->paused))
		return;
	bld_needed_formats(b->cfg, d, &formats);
	if (formats.n == 0) /* as upstream: nothing asks for it */
		return;
	manual = im != NULL && im->has_request;
	need = manual || nr == NULL || bld_now_wall() - nr->b->state_time >= (double)d->rebuild_age;
	for (i = 0; !need && i < formats.n; i++)
		need = !np_strv_contains(&nr->b->formats, formats.v[i]);
	/* every build task holds a worker from its lock to its record */
	if (!need || (int)strset_count(b->building) >= b->opt.build_workers) {
		np_strv_clear(&formats);
		return;
	}
	t = bld_task_new(b, T_BUILD, d->name);
	t->formats = formats;
	t->manual = manual;
	t->seen_ready = nr != NULL ? bld_strdup(nr->id) : NULL;
	strset_add(b->building, d->name);
	bld_task_start(t);
}
