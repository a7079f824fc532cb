/*
 * An upload worker: hosts one provider's driver (made with its
 * provider_new, never started: no launches, no quota reads) and calls its
 * image_upload / image_delete slots, as upstream's UploadWorker._uploadImage
 * and CleanupWorker._deleteUpload through the ProviderManager.
 *
 * An upload is attempted up to `retries` times, `retry_delay` seconds
 * apart (upstream leaves the retry to its next pass; a short retry here
 * saves a rebuild of the upload record for a passing cloud error). The
 * provider's post-upload-hook runs after a successful upload with
 * (provider name, external id, local file); when it fails the image is
 * deleted again and the upload fails. When `timeout` passes the provider
 * is freed (which cancels the cloud call in flight) and the upload fails.
 */
#include "builder/builder.h"

#include <sys/wait.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "lib/core/chan.h"
#include "drivers/driver.h"
#include "drivers/host.h"
#include "protocol/ipc.h"
#include "lib/core/log.h"

struct up {
	struct event_base *base;
	struct chan *ch;
	/* the hosted provider */
	struct bld_host host;
	char *config_text; /* the provider config it was made from */
	const struct driver *drv;
	struct drv_provider *dp;
	/* the job in hand */
	int64_t job;
	int busy;
	json_t *spec;
	int attempt, retries;
	double retry_delay;
	struct event *retry_ev, *timeout_ev;
};

/* ---- the driver host services (host.h) --------------------------------------- */

static struct event_base *
host_event_base(struct drv_host *h)
{
	const struct bld_host *bh = h->owner;

	return bh->base;
}

static const char *
host_provider_name(struct drv_host *h)
{
	const struct bld_host *bh = h->owner;

	return bh->provider;
}

static const json_t *
host_provider_config(struct drv_host *h)
{
	const struct bld_host *bh = h->owner;

	return bh->config;
}

const struct drv_host_ops bld_host_ops = {
    .event_base = host_event_base,
    .provider_name = host_provider_name,
    .provider_config = host_provider_config,
};

/* ---- the upload worker -------------------------------------------------------- */

static void
reply(struct up *u, bool ok, json_t *result, const char *error)
{
	struct ipc_msg m;

	ipc_msg_init(&m, IPC_JOB_DONE);
	m.u.job_done.id = u->job;
	m.u.job_done.ok = ok;
	if (result != NULL)
		m.u.job_done.result = json_dumps(result, JSON_COMPACT);
	ipc_set_str(&m.u.job_done.error, error);
	if (chan_send(u->ch, &m) != 0)
		log_warn("upload worker: %s", chan_last_error(u->ch));
	ipc_msg_clear(&m);
	json_decref(result);
	json_decref(u->spec);
	u->spec = NULL;
	u->busy = 0;
	evtimer_del(u->timeout_ev);
	evtimer_del(u->retry_ev);
}

static void
provider_drop(struct up *u)
{
	if (u->dp != NULL) {
		if (u->drv->provider_stop != NULL)
			u->drv->provider_stop(u->dp);
		u->drv->provider_free(u->dp);
	}
	u->dp = NULL;
	u->drv = NULL;
	free(u->host.provider);
	u->host.provider = NULL;
	json_decref(u->host.config);
	u->host.config = NULL;
	free(u->config_text);
	u->config_text = NULL;
}

/* The provider of the job, made (again) when its config changed. */
static int
provider_get(struct up *u, const json_t *spec, char *err, size_t errlen)
{
	const char *name = json_string_value(json_object_get(spec, "provider"));
	const json_t *cfg = json_object_get(spec, "config");
	const char *dname;
	char *text;

	if (name == NULL || !json_is_object(cfg)) {
		snprintf(err, errlen, "bad job: provider and config are required");
		return -1;
	}
	text = json_dumps(cfg, JSON_COMPACT | JSON_SORT_KEYS);
	if (u->dp != NULL && strcmp(u->host.provider, name) == 0 &&
	    strcmp(u->config_text, text) == 0) {
		free(text);
		return 0;
	}
	provider_drop(u);
	dname = json_string_value(json_object_get(cfg, "driver"));
	if (dname == NULL)
		dname = "openstack";
	u->drv = driver_lookup(dname);
	if (u->drv == NULL || u->drv->image_upload == NULL) {
		snprintf(err, errlen, "provider %s: the %s driver %s", name, dname,
			 u->drv == NULL ? "is not built in" : "manages no images");
		u->drv = NULL;
		free(text);
		return -1;
	}
	u->host.provider = strdup(name);
	u->host.config = json_deep_copy(cfg);
	u->config_text = text;
	u->dp = u->drv->provider_new(&u->host.handle, err, errlen);
	if (u->dp == NULL) {
		provider_drop(u);
		return -1;
	}
	return 0;
}

static void upload_attempt(struct up *u);

/* Run the post-upload-hook and wait for it (this worker does nothing
 * else meanwhile). 0 when it succeeded. */
static int
run_hook(const char *hook, const char *provider, const char *external_id, const char *filename,
	 char *err, size_t errlen)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		execl(hook, hook, provider, external_id, filename, (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid) {
		snprintf(err, errlen, "post-upload-hook %s: %s", hook, strerror(errno));
		return -1;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		snprintf(err, errlen, "post-upload-hook %s failed with exit code %d", hook,
			 WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
		return -1;
	}
	return 0;
}

struct hook_fail {
	struct up *u;
	char error[600];
};

static void
hook_image_deleted(int ok, const char *error, void *arg)
{
	struct hook_fail *hf = arg;

	if (!ok)
		log_warn("deleting the image after the failed hook: %s", error);
	reply(hf->u, false, NULL, hf->error);
	free(hf);
}

static void
uploaded(const char *external_id, const char *error, void *arg)
{
	struct up *u = arg;
	const json_t *spec = u->spec;
	const char *hook = json_string_value(json_object_get(spec, "post_upload_hook"));
	char err[600];

	if (external_id == NULL) {
		log_warn("upload attempt %d/%d of %s to %s failed: %s", u->attempt, u->retries,
			 json_string_value(json_object_get(spec, "image_name")), u->host.provider,
			 error ? error : "?");
		if (u->attempt < u->retries) {
			struct timeval tv = {
			    (time_t)u->retry_delay,
			    (suseconds_t)((u->retry_delay - (double)(time_t)u->retry_delay) * 1e6)};
			evtimer_add(u->retry_ev, &tv);
			return;
		}
		snprintf(err, sizeof(err), "upload failed after %d attempts: %s", u->attempt,
			 error ? error : "?");
		reply(u, false, NULL, err);
		return;
	}
	if (hook != NULL) {
		log_info("running post-upload-hook %s %s %s", hook, u->host.provider, external_id);
		if (run_hook(hook, u->host.provider, external_id,
			     json_string_value(json_object_get(spec, "filename")), err,
			     sizeof(err)) != 0) {
			struct hook_fail *hf = calloc(1, sizeof(*hf));
			if (hf == NULL)
				abort();
			log_error("%s", err);
			hf->u = u;
			snprintf(hf->error, sizeof(hf->error), "%s", err);
			u->drv->image_delete(u->dp, external_id, hook_image_deleted, hf);
			return;
		}
	}
	reply(u, true, json_pack("{s:s, s:i}", "external_id", external_id, "attempts", u->attempt),
	      NULL);
}

static void
upload_attempt(struct up *u)
{
	const json_t *s = u->spec;
	struct drv_image_upload a;

	u->attempt++;
	memset(&a, 0, sizeof(a));
	a.image = json_string_value(json_object_get(s, "image"));
	a.image_name = json_string_value(json_object_get(s, "image_name"));
	a.filename = json_string_value(json_object_get(s, "filename"));
	a.format = json_string_value(json_object_get(s, "format"));
	a.metadata = json_object_get(s, "metadata");
	a.md5 = json_string_value(json_object_get(s, "md5"));
	a.sha256 = json_string_value(json_object_get(s, "sha256"));
	log_info("uploading %s (%s) to %s as %s, attempt %d/%d", a.filename, a.format,
		 u->host.provider, a.image_name, u->attempt, u->retries);
	u->drv->image_upload(u->dp, &a, uploaded, u);
}

static void
retry_cb(evutil_socket_t fd, short what, void *arg)
{
	upload_attempt(arg);
}

static void
timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct up *u = arg;

	/* freeing the provider cancels the call in flight without a callback */
	provider_drop(u);
	reply(u, false, NULL, "upload timed out (image-upload-timeout)");
}

static void
deleted(int ok, const char *error, void *arg)
{
	struct up *u = arg;

	if (ok)
		reply(u, true, json_object(), NULL);
	else
		reply(u, false, NULL, error ? error : "delete failed");
}

static void
on_msg(struct chan *ch, struct ipc_msg *m, void *arg)
{
	struct up *u = arg;
	json_t *spec;
	char err[512];
	double timeout;

	if (m->type != IPC_JOB)
		return;
	u->job = m->u.job.id;
	spec = json_loads(m->u.job.spec, 0, NULL);
	if (u->busy || !json_is_object(spec)) {
		json_decref(spec);
		reply(u, false, NULL, u->busy ? "busy" : "bad job spec");
		return;
	}
	u->busy = 1;
	u->spec = spec;
	if (provider_get(u, spec, err, sizeof(err)) != 0) {
		reply(u, false, NULL, err);
		return;
	}
	if (strcmp(m->u.job.kind, "upload") == 0) {
		u->attempt = 0;
		u->retries = (int)json_integer_value(json_object_get(spec, "retries"));
		if (u->retries < 1)
			u->retries = 1;
		u->retry_delay = json_number_value(json_object_get(spec, "retry_delay"));
		timeout = json_number_value(json_object_get(spec, "timeout"));
		if (timeout > 0) {
			struct timeval tv = {(time_t)timeout, 0};
			evtimer_add(u->timeout_ev, &tv);
		}
		upload_attempt(u);
	} else if (strcmp(m->u.job.kind, "delete-image") == 0) {
		const char *id = json_string_value(json_object_get(spec, "external_id"));
		if (id == NULL) {
			reply(u, false, NULL, "bad job: external_id is required");
			return;
		}
		log_info("deleting image %s from %s", id, u->host.provider);
		u->drv->image_delete(u->dp, id, deleted, u);
	} else
		reply(u, false, NULL, "an upload worker runs upload and delete-image jobs only");
}

static void
on_close(struct chan *ch, enum chan_event ev, const char *why, void *arg)
{
	struct up *u = arg;

	event_base_loopbreak(u->base);
}

int
upload_worker_main(struct event_base *base)
{
	struct up u;
	char err[256];

	memset(&u, 0, sizeof(u));
	u.base = base;
	u.host.handle.owner = &u.host;
	u.host.base = base;
	u.retry_ev = evtimer_new(base, retry_cb, &u);
	u.timeout_ev = evtimer_new(base, timeout_cb, &u);
	u.ch = chan_new(base, CHAN_CHILD_FD, CHAN_POOL_CHILD, 0, 0, on_msg, on_close, &u, err,
			sizeof(err));
	if (u.ch == NULL) {
		log_error("upload worker: %s", err);
		return 1;
	}
	event_base_dispatch(base);
	provider_drop(&u);
	json_decref(u.spec);
	chan_free(u.ch);
	event_free(u.retry_ev);
	event_free(u.timeout_ev);
	return 0;
}
