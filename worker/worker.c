/*
 * The worker process around one launcher: where its configuration comes
 * from (a file when standalone, CONFIG messages from nodepoold), its exit
 * code, graceful stop.
 */
#include "launcher.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "config.h"
#include "slice.h"
#include "log.h"

struct worker {
	struct event_base *base;
	char *provider;
	int channel_fd;
	struct launcher *lc;
	json_t *slice;
	int exit_code;
	int stopping;
};

struct worker *
worker_new(struct event_base *base, const char *provider, int channel_fd)
{
	struct worker *w = calloc(1, sizeof(*w));

	if (w == NULL)
		abort();
	w->base = base;
	w->provider = strdup(provider);
	w->channel_fd = channel_fd;
	return w;
}

int
worker_apply_config(struct worker *w, const json_t *slice, char *err, size_t errlen)
{
	struct launcher *lc;

	if (w->slice != NULL && json_equal(w->slice, slice))
		return 0; /* unchanged: nothing to do */
	lc = launcher_new(w->base, slice, w->provider, err, errlen);
	if (lc == NULL)
		return -1;
	if (w->lc != NULL) {
		/* a changed provider: the old launcher lets go of everything
		 * (components, request locks) before the new one registers */
		launcher_stop(w->lc);
		launcher_free(w->lc);
	}
	w->lc = lc;
	json_decref(w->slice);
	w->slice = json_deep_copy(slice);
	if (launcher_start(lc, slice, err, errlen) != 0)
		return -1;
	return 0;
}

int
worker_load_file(struct worker *w, const char *path, const char *secure, char *err,
    size_t errlen)
{
	struct np_config *cfg = NULL;
	struct np_config_errors *errs = NULL;
	json_t *slice;
	int rc;

	if (np_config_load(path, secure, &cfg, &errs) != 0) {
		np_config_errors_print(errs, stderr);
		snprintf(err, errlen, "%s: %zu configuration error(s)", path,
		    np_config_errors_count(errs));
		np_config_errors_free(errs);
		return -1;
	}
	slice = np_config_worker_slice(cfg, w->provider);
	np_config_free(cfg);
	if (slice == NULL) {
		snprintf(err, errlen, "%s: no provider named %s", path, w->provider);
		return -1;
	}
	rc = worker_apply_config(w, slice, err, errlen);
	json_decref(slice);
	return rc;
}

void
worker_stop(struct worker *w)
{
	if (w->stopping)
		return;
	w->stopping = 1;
	if (w->lc != NULL)
		launcher_stop(w->lc);
	event_base_loopexit(w->base, NULL);
}

void
worker_dump(struct worker *w, struct evbuffer *out)
{
	if (w->lc != NULL)
		launcher_dump(w->lc, out);
	else
		evbuffer_add_printf(out, "no configuration yet\n");
}

int
worker_exit_code(const struct worker *w)
{
	return w->exit_code;
}

void
worker_free(struct worker *w)
{
	if (w == NULL)
		return;
	launcher_free(w->lc);
	json_decref(w->slice);
	free(w->provider);
	free(w);
}
