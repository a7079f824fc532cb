/*
 * The configuration in force and the reload transaction.
 *
 * A reload parses and validates the whole file first; any error leaves
 * everything as it is (style rule 11). Only then are children compared,
 * by the JSON of the slice each would get: equal slices (the provider's
 * fingerprint is a hash of the same data) mean the child is left alone.
 *
 * Every reload loads the bytes of one read of the files (a cfgwatch
 * snapshot); the watcher (cfgwatch, while reload-on-change is true)
 * reports new bytes, so a change on disk goes through the same
 * transaction as SIGHUP, and bytes already loaded or rejected, whoever
 * read them, are not reported again.
 */
#include "supervisor/sup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <event2/event.h>

#include "lib/config/cfgwatch.h"
#include "lib/config/config.h"
#include "lib/core/clock.h"
#include "lib/core/log.h"
#include "lib/config/slice.h"

/* Settings of the nodepoold: section that only the supervisor reads; they
 * are taken out of a worker's slice so that changing them does not restart
 * every launcher. */
static const char *const sup_only_settings[] = {
    "worker-status-timeout",
    "control-socket",
    "pid-file",
    "restart-backoff-max",
};

json_t *
sup_worker_slice(const struct np_config *cfg, const char *provider)
{
	json_t *slice = np_cfg_worker_slice(cfg, provider), *np;
	size_t i;

	if (slice == NULL)
		return NULL;
	/* the web API is nodepool-web's (sup_web_slice), not a worker's */
	json_object_del(slice, "webapp");
	np = json_object_get(slice, "nodepoold");
	if (json_is_object(np))
		for (i = 0; i < sizeof(sup_only_settings) / sizeof(sup_only_settings[0]); i++)
			json_object_del(np, sup_only_settings[i]);
	return slice;
}

/*
 * The builder's slice: the whole configuration, because building and
 * uploading images concerns every provider:
 *   {"config": <nodepool.yaml as JSON>, "secure": <secure.conf as JSON, or null>}
 * The builder loads it with np_cfg_load_buffer() (JSON is YAML), which
 * merges secure.conf exactly as nodepoold did; environment substitution
 * has already been applied.
 */
json_t *
sup_builder_slice(const struct np_config *cfg)
{
	json_t *o = json_object();

	json_object_set_new(o, "config", np_cfg_to_json(np_cfg_doc_root(cfg->doc)));
	json_object_set_new(o, "secure",
			    cfg->secure_doc != NULL
				? np_cfg_to_json(np_cfg_doc_root(cfg->secure_doc))
				: json_null());
	return o;
}

json_t *
sup_web_slice(const struct np_config *cfg)
{
	return np_cfg_web_slice(cfg);
}

void
sup_reload_result_clear(struct sup_reload_result *res)
{
	np_cfg_errors_free(res->errs);
	memset(res, 0, sizeof(*res));
}

static void
set_slice(struct sup_child *c, json_t *slice, const char *fingerprint)
{
	json_decref(c->slice);
	c->slice = slice;
	snprintf(c->fingerprint, sizeof(c->fingerprint), "%s", fingerprint ? fingerprint : "");
}

/* Bring one wanted child in line with its new slice (owned: taken). */
static void
apply_child(struct sup *sup, const struct sup_role *role, const char *name, json_t *slice,
	    const char *fingerprint, struct sup_reload_result *res)
{
	struct sup_child *c = sup_child_find(sup, role->kind, name);

	if (c == NULL) {
		c = sup_child_new(sup, role, name);
		set_slice(c, slice, fingerprint);
		TAILQ_INSERT_TAIL(&sup->children, c, entry);
		if (sup->cfg != NULL)
			log_info("%s %s: added", role->role_name, name);
		res->added++;
		sup_child_dispatch(c, SUP_EV_UP);
		return;
	}
	if (c->want == SUP_WANT_GONE) {
		/* removed by an earlier reload and still stopping: back again */
		set_slice(c, slice, fingerprint);
		c->want = SUP_WANT_UP;
		log_info("%s %s: added again", role->role_name, name);
		res->added++;
		sup_child_dispatch(c, c->state == SUP_STOPPING ? SUP_EV_RESTART : SUP_EV_UP);
		return;
	}
	if (c->slice != NULL && json_equal(c->slice, slice)) {
		json_decref(slice);
		res->unchanged++;
		return;
	}
	if (fingerprint == NULL)
		log_info("%s %s: configuration changed", role->role_name, name);
	else
		log_info("%s %s: configuration changed (fingerprint %.12s -> %.12s)",
			 role->role_name, name, c->fingerprint[0] ? c->fingerprint : "-",
			 fingerprint);
	set_slice(c, slice, fingerprint);
	res->changed++;
	switch (c->state) {
	case SUP_STARTING:
	case SUP_RUNNING:
		/* the worker restarts its launcher in-process; a refusal makes us
		 * restart the process (child.c, on_config_ack) */
		if (sup_child_send_config(c) < 0) {
			snprintf(c->reason, sizeof(c->reason), "cannot send its new configuration");
			sup_child_dispatch(c, SUP_EV_RESTART);
		}
		break;
	case SUP_DOWN:
	case SUP_DEAD:
		sup_child_dispatch(c, SUP_EV_UP); /* a new config may cure it */
		break;
	case SUP_STOPPING:
	case SUP_BACKOFF:
	case SUP_STATE_COUNT:
		break; /* its next start uses the new slice */
	}
}

static void
remove_child(struct sup_child *c, struct sup_reload_result *res)
{
	log_info("%s %s: removed from the configuration", c->role->role_name, c->name);
	res->removed++;
	c->want = SUP_WANT_GONE;
	sup_child_dispatch(c, SUP_EV_DOWN); /* frees c once it has no process */
}

/* Run the builder? Diskimages configured, and the binary installed. */
static bool
builder_wanted(struct sup *sup, const struct np_config *cfg)
{
	char *path;
	bool ok;

	if (cfg->ndiskimages == 0 || sup->no_builder)
		return false;
	ok = sup_program_path(sup_role(IPC_KIND_BUILDER), sup->bindir, &path) == 0;
	if (!ok && !sup->builder_absent_logged) {
		log_warn("diskimages are configured but %s is not installed: no builder is run",
			 path);
		sup->builder_absent_logged = true;
	}
	if (ok)
		sup->builder_absent_logged = false;
	free(path);
	return ok;
}

/* Does cfg's webapp section say port and address? */
static bool
webapp_is(const struct np_config *cfg, int port, const char *address)
{
	return cfg->webapp_port == port &&
	       strcmp(cfg->webapp_listen_address ? cfg->webapp_listen_address : "0.0.0.0",
		      address ? address : "0.0.0.0") == 0;
}

void
sup_apply_config(struct sup *sup, struct np_config *cfg, struct sup_reload_result *res)
{
	const struct sup_role *prov = sup_role(IPC_KIND_PROVIDER);
	const struct sup_role *bld = sup_role(IPC_KIND_BUILDER);
	const struct sup_role *web = sup_role(IPC_KIND_WEB);
	struct sup_child *c, *next;
	bool want_builder = builder_wanted(sup, cfg);
	size_t i;

	memset(res, 0, sizeof(*res));
	sup->gen++;
	for (c = TAILQ_FIRST(&sup->children); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		if (c->want == SUP_WANT_GONE)
			continue;
		if ((c->role->kind == IPC_KIND_PROVIDER && np_cfg_provider(cfg, c->name) == NULL) ||
		    (c->role->kind == IPC_KIND_BUILDER && !want_builder))
			remove_child(c, res);
	}
	/* The settings first: a new child starts under the new ones. */
	sup->status_timeout = cfg->nodepoold.worker_status_timeout;
	sup->backoff_max = cfg->nodepoold.restart_backoff_max;
	if (sup->cfg == NULL) {
		/* the web API's address is read once, at start, as upstream */
		sup->webapp_port = cfg->webapp_port;
		free(sup->webapp_listen_address);
		sup->webapp_listen_address =
		    strdup(cfg->webapp_listen_address ? cfg->webapp_listen_address : "0.0.0.0");
		if (sup->webapp_listen_address == NULL)
			abort();
	} else if (!webapp_is(cfg, sup->webapp_port, sup->webapp_listen_address) &&
		   !webapp_is(cfg, sup->cfg->webapp_port, sup->cfg->webapp_listen_address)) {
		/* once per new value, not at every reload */
		log_warn("webapp changes take effect when nodepoold restarts (serving on %s "
			 "port %d)",
			 sup->webapp_listen_address, sup->webapp_port);
	}
	for (i = 0; i < cfg->nproviders; i++) {
		const struct np_provider *p = &cfg->providers[i];
		apply_child(sup, prov, p->name, sup_worker_slice(cfg, p->name), p->fingerprint,
			    res);
	}
	if (want_builder)
		apply_child(sup, bld, "builder", sup_builder_slice(cfg), NULL, res);
	/* the web API always runs (upstream's launcher always serves it), on
	 * the address read at start */
	{
		json_t *slice = sup_web_slice(cfg);
		json_object_set_new(slice, "webapp",
				    json_pack("{s:i, s:s}", "port", sup->webapp_port,
					      "listen_address", sup->webapp_listen_address));
		apply_child(sup, web, "web", slice, NULL, res);
	}
	if (sup->cfg != NULL) {
		if (strcmp(sup->cfg->nodepoold.control_socket, cfg->nodepoold.control_socket) !=
			0 ||
		    strcmp(sup->cfg->nodepoold.pid_file, cfg->nodepoold.pid_file) != 0)
			log_warn("control-socket and pid-file changes take effect when nodepoold "
				 "restarts (in use: %s, %s)",
				 sup->ctl_path, sup->pid_file);
		np_cfg_free(sup->cfg);
	}
	sup->cfg = cfg;
	/* the STATUS poll follows worker-status-timeout */
	if (sup->tick != NULL) {
		double p = sup_poll_interval(sup->status_timeout);
		struct timeval tv = np_tv_of(p);
		event_add(sup->tick, &tv);
	}
	if (sup->stats_ev != NULL && sup->statsd != NULL) {
		double p = cfg->nodepoold.stats_interval > 0 ? cfg->nodepoold.stats_interval : 5;
		struct timeval tv = np_tv_of(p);
		event_add(sup->stats_ev, &tv);
	}
	res->ok = 1;
}

/* What the config is read from: nodepool.yaml, and secure.conf if any. */
static size_t
config_paths(const struct sup *sup, const char *paths[2])
{
	paths[0] = sup->config_path;
	paths[1] = sup->secure_path;
	return sup->secure_path != NULL ? 2 : 1;
}

int
sup_reload_snapshot(struct sup *sup, const struct cfgwatch_snapshot *snap,
		    struct sup_reload_result *res)
{
	struct np_config *cfg = NULL;
	struct np_cfg_errors *errs = NULL;

	memset(res, 0, sizeof(*res));
	if (snap != &sup->seen) {
		cfgwatch_snapshot_clear(&sup->seen);
		cfgwatch_snapshot_copy(&sup->seen, snap);
	}
	cfgwatch_seen(sup->watch, snap);
	if (cfgwatch_load_config(snap, &cfg, &errs) != 0) {
		res->errs = errs;
		return -1;
	}
	sup_apply_config(sup, cfg, res);
	sup_watch_update(sup);
	return 0;
}

int
sup_reload(struct sup *sup, struct sup_reload_result *res)
{
	struct cfgwatch_snapshot snap = {0};
	const char *paths[2];
	int rc;

	cfgwatch_snapshot_read(paths, config_paths(sup, paths), &snap);
	rc = sup_reload_snapshot(sup, &snap, res);
	cfgwatch_snapshot_clear(&snap);
	return rc;
}

/* Log a reload's outcome: the counts, or every error with its position. */
static void
log_result(struct sup *sup, const struct sup_reload_result *res)
{
	size_t i;

	if (res->ok) {
		log_info("configuration generation %lld in force: %zu unchanged, %zu changed, "
			 "%zu added, %zu removed",
			 (long long)sup->gen, res->unchanged, res->changed, res->added,
			 res->removed);
		return;
	}
	log_error("reload failed: %zu configuration error(s); the running configuration "
		  "stays in force",
		  np_cfg_errors_count(res->errs));
	for (i = 0; i < res->errs->n; i++) {
		char *line = np_cfg_error_format(&res->errs->v[i]);
		log_error("%s", line);
		free(line);
	}
	if (res->errs->dropped > 0)
		log_error("... and %zu more errors", res->errs->dropped);
}

void
sup_reload_and_log(struct sup *sup, struct sup_reload_result *res)
{
	if (sup->stopping) {
		memset(res, 0, sizeof(*res));
		log_warn("reload ignored: nodepoold is stopping");
		return;
	}
	log_info("reloading %s", sup->config_path);
	sup_reload(sup, res);
	log_result(sup, res);
}

/* The watcher saw new contents: the same transaction as SIGHUP. */
static void
on_config_change(const struct cfgwatch_snapshot *snap, void *arg)
{
	struct sup *sup = arg;
	struct sup_reload_result res;

	if (sup->stopping)
		return;
	log_info("configuration changed on disk: reloading %s%s%s", sup->config_path,
		 sup->secure_path != NULL ? " and " : "",
		 sup->secure_path != NULL ? sup->secure_path : "");
	sup_reload_snapshot(sup, snap, &res);
	log_result(sup, &res);
	sup_reload_result_clear(&res);
}

void
sup_watch_update(struct sup *sup)
{
	const char *paths[2];
	char err[256];
	size_t n = config_paths(sup, paths);
	bool want = sup->cfg != NULL && sup->cfg->nodepoold.reload_on_change && !sup->stopping;

	if (!want && sup->watch != NULL) {
		cfgwatch_free(sup->watch);
		sup->watch = NULL;
		log_info("reload-on-change off: the configuration is reloaded on SIGHUP only");
	} else if (want && sup->watch == NULL) {
		sup->watch = cfgwatch_new(sup->base, paths, n, &sup->seen, on_config_change, sup,
					  err, sizeof(err));
		if (sup->watch == NULL)
			log_warn("cannot watch %s (%s): the configuration is reloaded on SIGHUP "
				 "only",
				 sup->config_path, err);
		else
			log_info("watching %s%s%s for changes", sup->config_path,
				 n > 1 ? " and " : "", n > 1 ? sup->secure_path : "");
	}
}
