/*
 * The struct driver slots of the state-machine framework, as upstream's
 * StateMachineProvider (QuotaSupport included) and the launch/delete glue
 * of StateMachineHandler. See statemachine.h.
 *
 * Per provider:
 *   - the adapter, a runner for its state machines, a nodescan worker
 *     (lib/nodescan: at most 100 scans at once, as upstream's);
 *   - the quota cache: the cloud's limits minus what instances unknown to
 *     ZooKeeper use (upstream's estimatedNodepoolQuota), read at start,
 *     re-read after SM_MAX_QUOTA_AGE seconds or at once after a quota
 *     error; until the first answer the provider counts as unlimited (a
 *     launch beyond the real limits is then refused by the cloud and
 *     aborted);
 *   - leak cleanup on the launcher's cleanup timer: resources tagged with
 *     our provider name whose node id (or upload) ZooKeeper does not know,
 *     two passes in a row, are deleted (counters leaked.<type>s);
 *   - the diskimage uploads it can boot from (images.c), when the launcher
 *     offers its ZooKeeper handle (drv_zk);
 *   - an event-loop lag probe: a 100 ms timer records how late it fires
 *     (the whole worker's loop: ZooKeeper, requests, launches), shown in
 *     the dump as the maximum since start and since the previous dump.
 */
#include "drivers/statemachine/statemachine.h"

#include <sys/queue.h>
#include <errno.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "lib/core/log.h"
#include "lib/ops/metrics.h"
#include "lib/net/nodescan.h"
#include "lib/net/sshcmd.h"
#include "lib/core/strset.h"
#include "lib/core/xalloc.h"
#include "lib/zk/zk.h"
#include "lib/core/clock.h"

#define LAG_INTERVAL 0.1 /* s between loop-lag probes */

struct glaunch {
	struct drv_provider *dp;
	struct drv_launch *l;
	struct sm_launch *sl;
	struct event *fail_ev; /* a launch refused before it started */
	char *fail_msg;
};

struct gdelete {
	TAILQ_ENTRY(gdelete) entry;
	struct drv_provider *dp;
	struct drv_delete *d;
	struct sm_delete *sd;
};

struct drv_provider {
	struct drv_host *lc;
	const struct sm_adapter_ops *ops;
	struct sm_adapter *ad;
	struct sm_config *cfg;
	struct sm_env env;
	json_t *stats;	/* see struct sm_env */
	json_t *leaked; /* "leaked.<type>s" -> count */
	struct nodescan *scanner;
	struct sm_runner *runner;
	TAILQ_HEAD(, gdelete) deletes;

	/* quota cache */
	struct drv_quota quota;	 /* limits - unmanaged usage, when quota_known */
	struct drv_quota limits; /* the limits of the refresh in flight */
	int quota_known, quota_busy, quota_stale;
	double quota_time, quota_retry_at;
	unsigned long long quota_reads;

	/* leak cleanup */
	struct strset *maybe_leaked; /* node ids (and "upload:<build>-<id>")
					unknown on the last pass */
	int leak_busy;
	struct strset *maybe_leaked_images; /* image ids: the list_images pass */
	int image_leak_busy;

	struct sm_images *images;	     /* NULL without a ZooKeeper handle */
	LIST_HEAD(, validation) validations; /* boots of uploads pending validation */
	json_t *upload_fails;		     /* upload path -> launches from it failed in a row */
	struct strset *unvalidatable;	     /* pending uploads no label here boots */

	/* error labels (upstream's StateMachineProvider.error_labels): names
	 * of labels whose adapter label_quota reported a permanent
	 * configuration error; kept until the provider is freed */
	struct strset *error_labels;

	/* loop lag */
	struct event *lag_ev;
	double lag_due;
	double lag_max, lag_window_max; /* seconds */

	int stopped;
};

/* ---- stats ---------------------------------------------------------------------- */

static void
stats_refresh(struct drv_provider *dp)
{
	struct sm_runner_stats st;
	const char *k;
	json_t *v;

	sm_runner_get_stats(dp->runner, &st);
#define SET(key, val) json_object_set_new(dp->stats, key, json_integer((json_int_t)(val)))
	SET("launches.in_flight", st.launches);
	SET("launches.ready", st.ready);
	SET("launches.failed", st.failed);
	SET("launches.aborted", st.aborted);
	SET("launches.attempts_failed", st.attempts_failed);
	SET("launches.unwound", st.unwound);
	SET("launches.cancelled_in_flight", st.orphans);
	SET("nodescan.failed", st.nodescan_failed);
	SET("deletes.in_flight", st.deletes);
	SET("deletes.ok", st.deleted);
	SET("deletes.failed", st.delete_errors);
	SET("machines.advances", st.advances);
	SET("quota.reads", dp->quota_reads);
	SET("loop.lag_max_ms", dp->lag_max * 1000.0);
#undef SET
	json_object_foreach(dp->leaked, k, v) json_object_set(dp->stats, k, v);
}

/* ---- loop lag ------------------------------------------------------------------------ */

static void
lag_arm(struct drv_provider *dp)
{
	struct timeval tv = np_tv_of(LAG_INTERVAL);

	dp->lag_due = np_mono_s() + LAG_INTERVAL;
	event_add(dp->lag_ev, &tv);
}

static void
lag_cb(evutil_socket_t fd, short what, void *arg)
{
	struct drv_provider *dp = arg;
	double late = np_mono_s() - dp->lag_due;

	if (late > dp->lag_max)
		dp->lag_max = late;
	if (late > dp->lag_window_max)
		dp->lag_window_max = late;
	stats_refresh(dp);
	lag_arm(dp);
}

/* ---- quota ---------------------------------------------------------------------------- */

static void quota_refresh(struct drv_provider *dp);

static void
quota_copy(struct drv_quota *dst, const struct drv_quota *src)
{
	drv_quota_clear(dst);
	*dst = *src;
	dst->extra = src->extra != NULL ? json_deep_copy(src->extra) : NULL;
}

static void known_validations(struct drv_provider *dp, struct strset *known);

static struct strset *
known_node_ids(struct drv_provider *dp)
{
	const struct np_node **nodes;
	size_t i, n = drv_provider_nodes(dp->lc, &nodes);
	struct strset *s = strset_new();

	for (i = 0; i < n; i++)
		if (nodes[i]->id != NULL)
			strset_add(s, nodes[i]->id);
	known_validations(dp, s);
	return s;
}

/* An instance of ours that ZooKeeper knows is managed; anything else
 * (another tool's, or one of ours that leaked) uses quota we cannot have. */
static int
managed(struct drv_provider *dp, const json_t *meta, const struct strset *known)
{
	const char *pn = json_string_value(json_object_get(meta, "nodepool_provider_name"));
	const char *nid = json_string_value(json_object_get(meta, "nodepool_node_id"));

	return pn != NULL && strcmp(pn, dp->cfg->provider) == 0 && nid != NULL &&
	       (strset_has(known, nid) || drv_node_unreadable(dp->lc, nid));
}

static void
quota_failed(struct drv_provider *dp, const char *what, const char *error)
{
	log_warn("provider %s: reading the cloud's %s: %s (keeping the last known quota)",
		 dp->cfg->provider, what, error);
	dp->quota_busy = 0;
	dp->quota_retry_at = np_mono_s() + 10;
}

static void
quota_instances_cb(struct sm_instance *const *v, size_t n, const char *error, void *arg)
{
	struct drv_provider *dp = arg;
	struct strset *known;
	struct drv_quota used;
	size_t i;

	if (error != NULL) {
		quota_failed(dp, "instances", error);
		return;
	}
	known = known_node_ids(dp);
	drv_quota_init(&used, 0, 0, 0);
	for (i = 0; i < n; i++)
		if (!managed(dp, v[i]->metadata, known))
			drv_quota_add(&used, &v[i]->quota);
	strset_free(known);
	drv_quota_sub(&dp->limits, &used);
	drv_quota_clear(&used);
	quota_copy(&dp->quota, &dp->limits);
	drv_quota_clear(&dp->limits);
	dp->quota_known = 1;
	dp->quota_busy = 0;
	dp->quota_stale = 0;
	dp->quota_time = np_mono_s();
	dp->quota_reads++;
	log_debug("provider %s: quota available to nodepool: cores %g instances %g ram %g",
		  dp->cfg->provider, dp->quota.cores, dp->quota.instances, dp->quota.ram);
}

static void
quota_limits_cb(const struct drv_quota *limits, const char *error, void *arg)
{
	struct drv_provider *dp = arg;

	if (error != NULL || limits == NULL) {
		quota_failed(dp, "limits", error ? error : "no answer");
		return;
	}
	quota_copy(&dp->limits, limits);
	if (dp->ops->list_instances != NULL)
		dp->ops->list_instances(dp->ad, quota_instances_cb, dp);
	else
		quota_instances_cb(NULL, 0, NULL, dp);
}

static void
quota_refresh(struct drv_provider *dp)
{
	if (dp->quota_busy || dp->stopped || np_mono_s() < dp->quota_retry_at)
		return;
	dp->quota_busy = 1;
	if (dp->ops->quota_limits != NULL) {
		dp->ops->quota_limits(dp->ad, quota_limits_cb, dp);
	} else {
		struct drv_quota u;
		drv_quota_unlimited(&u);
		quota_copy(&dp->limits, &u);
		if (dp->ops->list_instances != NULL)
			dp->ops->list_instances(dp->ad, quota_instances_cb, dp);
		else
			quota_instances_cb(NULL, 0, NULL, dp);
	}
}

void
sm_drv_provider_limits(struct drv_provider *dp, struct drv_quota *out)
{
	if (!dp->quota_known || dp->quota_stale || np_mono_s() - dp->quota_time > SM_MAX_QUOTA_AGE)
		quota_refresh(dp);
	if (dp->quota_known)
		quota_copy(out, &dp->quota);
}

/* ---- labels ----------------------------------------------------------------------------- */

/* The latest READY upload of a diskimage, as upstream's launch does. */
static int
latest_upload(struct drv_provider *dp, const char *image, char *eid, size_t idlen, char *path,
	      size_t pathlen)
{
	if (dp->images == NULL)
		return -1;
	return sm_images_latest(dp->images, image, eid, idlen, path, pathlen);
}

/* 1 ready, 0 not, -1 not known yet (driver.h's label_ready) */
static int
label_entry_ready(struct drv_provider *dp, const struct sm_label *l)
{
	char id[256], path[512];

	if (l->diskimage != NULL) {
		if (latest_upload(dp, l->diskimage, id, sizeof(id), path, sizeof(path)) == 0)
			return 1;
		/* the uploads not read once yet: a request that came with
		 * the launcher's start is not declined for an upload that
		 * is there */
		return dp->images != NULL && sm_images_walks(dp->images) == 0 ? -1 : 0;
	}
	if (dp->ops->label_ready != NULL)
		return dp->ops->label_ready(dp->ad, l);
	return 1;
}

int
sm_drv_label_ready(struct drv_provider *dp, const char *label)
{
	size_t i, j;
	int seen = 0, unknown = 0, r;

	for (i = 0; i < dp->cfg->npools; i++) {
		const struct sm_pool *p = &dp->cfg->pools[i];
		for (j = 0; j < p->nlabels; j++) {
			if (strcmp(p->labels[j].name, label) != 0)
				continue;
			seen = 1;
			if ((r = label_entry_ready(dp, &p->labels[j])) > 0)
				return 1;
			unknown |= r < 0;
		}
	}
	if (unknown)
		return -1;
	return !seen; /* not ours: the launcher declines it for other reasons */
}

/*
 * The adapter's label_quota for lab into out (which comes in as the
 * default, 1 instance), as upstream's quotaNeededByLabel: a permanent
 * configuration error is logged (once per label), the label becomes an
 * error label, and out is the empty quota so the request in hand goes on
 * (its launch then fails in the cloud).
 */
static void
label_quota_of(struct drv_provider *dp, const struct sm_label *lab, struct drv_quota *out)
{
	char err[256];

	if (dp->ops->label_quota == NULL)
		return;
	err[0] = '\0';
	if (dp->ops->label_quota(dp->ad, lab, out, err, sizeof(err)) == 0)
		return;
	if (strset_add(dp->error_labels, lab->name))
		log_error("provider %s: error getting quota for label %s, marking it "
			  "permanently unavailable: %s",
			  dp->cfg->provider, lab->name, err[0] != '\0' ? err : "(no reason given)");
	drv_quota_clear(out);
	drv_quota_init(out, 0, 0, 0);
}

void
sm_drv_label_quota(struct drv_provider *dp, const char *pool, const char *label,
		   struct drv_quota *out)
{
	const struct sm_label *l = sm_config_label(dp->cfg, pool, label);

	if (l != NULL)
		label_quota_of(dp, l, out);
}

int
sm_drv_label_error(struct drv_provider *dp, const char *label)
{
	return strset_has(dp->error_labels, label);
}

/* ---- launches ------------------------------------------------------------------------------ */

static void
glaunch_free(struct glaunch *g)
{
	if (g->fail_ev != NULL)
		event_free(g->fail_ev);
	free(g->fail_msg);
	free(g);
}

/*
 * Rollback (beyond upstream; nodepool.yaml(5) `rollback-after`): launches
 * from a diskimage's newest upload that fail (boot or keyscan, after
 * launch-retries) rollback-after times in a row, while a previous upload
 * could serve, make this provider fall back to the previous one at once:
 * said in the log, on statsd and /metrics (metrics_image_rollback), and on
 * the upload's record (image-list). A launch that succeeds resets the
 * count; a quota abort does not count.
 */
static void
rollback_count(struct drv_provider *dp, const struct drv_launch *l, enum drv_launch_result res)
{
	const struct np_node *n = l->node;
	const struct sm_label *lab;
	const char *path = n->image_id;
	long long after, fails;
	char reason[256];

	if (dp->images == NULL || path == NULL || res == DRV_LAUNCH_ABORTED ||
	    (lab = sm_config_label(dp->cfg, n->pool, l->label)) == NULL || lab->diskimage == NULL ||
	    lab->image == NULL)
		return;
	after = json_integer_value(json_object_get(lab->image->raw, "rollback-after"));
	if (after <= 0)
		return;
	if (res == DRV_LAUNCH_READY) {
		json_object_del(dp->upload_fails, path);
		return;
	}
	fails = json_integer_value(json_object_get(dp->upload_fails, path)) + 1;
	json_object_set_new(dp->upload_fails, path, json_integer(fails));
	if (fails < after || !sm_images_has_previous(dp->images, lab->diskimage, path))
		return;
	snprintf(reason, sizeof(reason), "%lld launches from it failed in a row in %s", fails,
		 dp->cfg->provider);
	log_warn("image %s: rolling back from upload %s to the previous one: %s", lab->diskimage,
		 path, reason);
	sm_images_rollback(dp->images, path, reason);
	metrics_image_rollback(dp->cfg->provider, lab->diskimage);
	json_object_del(dp->upload_fails, path);
}

static void
launch_done(enum drv_launch_result res, const char *error, void *arg)
{
	struct glaunch *g = arg;
	struct drv_provider *dp = g->dp;
	struct drv_launch *l = g->l;

	l->drv = NULL;
	glaunch_free(g);
	rollback_count(dp, l, res);
	if (res == DRV_LAUNCH_ABORTED) {
		/* upstream's invalidateQuotaCache */
		dp->quota_stale = 1;
		dp->quota_retry_at = 0;
		quota_refresh(dp);
	}
	stats_refresh(dp);
	drv_launch_done(l, res, error);
}

/* The cloud named the launch's (new) instance: save the node now, so a
 * launcher that dies mid-launch leaves the id in ZooKeeper for whoever
 * deletes the BUILDING node (as StateMachineNodeLauncher.runStateMachine). */
static void
launch_named(void *arg)
{
	struct glaunch *g = arg;

	if (drv_store_node(g->dp->lc, g->l) != 0)
		log_warn("node %s: cannot store external id %s now: %s",
			 g->l->node->id ? g->l->node->id : "?",
			 g->l->node->external_id ? g->l->node->external_id : "-", strerror(errno));
}

static void
fail_cb(evutil_socket_t fd, short what, void *arg)
{
	struct glaunch *g = arg;
	struct drv_launch *l = g->l;
	char *msg = g->fail_msg;

	g->fail_msg = NULL;
	l->drv = NULL;
	glaunch_free(g);
	drv_launch_done(l, DRV_LAUNCH_FAILED, msg);
	free(msg);
}

/* Refuse a launch from the loop (never inside the launch slot). */
static void
fail_later(struct glaunch *g, const char *msg)
{
	log_warn("node %s: %s", g->l->node->id ? g->l->node->id : "?", msg);
	g->fail_msg = strdup(msg);
	g->fail_ev = event_new(drv_event_base(g->dp->lc), -1, 0, fail_cb, g);
	event_active(g->fail_ev, EV_TIMEOUT, 0);
}

void
sm_drv_pool_azs(struct drv_provider *dp, const char *pool, struct np_strv *out)
{
	const struct sm_pool *p = sm_config_pool(dp->cfg, pool);
	size_t i;

	if (p != NULL && p->azs.n > 0) {
		for (i = 0; i < p->azs.n; i++)
			np_strv_push(out, p->azs.v[i]);
		return;
	}
	if (dp->ops->azs != NULL)
		dp->ops->azs(dp->ad, out);
}

/* Image settings on the node, as upstream's startStateMachine. */
static void
apply_image(struct np_node *n, const struct sm_image *im)
{
	if (im == NULL) {
		sm_set_str(&n->connection_type, "ssh");
		return;
	}
	if (im->username != NULL)
		sm_set_str(&n->username, im->username);
	sm_set_str(&n->python_path, im->python_path);
	sm_set_str(&n->shell_type, im->shell_type);
	sm_set_str(&n->connection_type, im->connection_type);
	n->connection_port = im->connection_port;
}

void
sm_drv_launch(struct drv_provider *dp, struct drv_launch *l)
{
	struct glaunch *g = calloc(1, sizeof(*g));
	struct np_node *n = l->node;
	const struct sm_label *lab;
	struct sm_launch_params p;
	char image_eid[256], path[512], msg[512];
	struct drv_quota q;
	json_t *meta;

	if (g == NULL)
		abort();
	g->dp = dp;
	g->l = l;
	l->drv = g;
	lab = sm_config_label(dp->cfg, n->pool, l->label);
	if (dp->stopped) {
		fail_later(g, "the provider is stopping");
		return;
	}
	if (lab == NULL) {
		snprintf(msg, sizeof(msg), "label %s is not in pool %s", l->label,
			 n->pool ? n->pool : "?");
		fail_later(g, msg);
		return;
	}
	memset(&p, 0, sizeof(p));
	if (l->resume) {
		/* the instance exists, booted from the image the record
		 * names: nothing to look up */
		p.resume_id = n->external_id;
	} else if (lab->diskimage != NULL) {
		if (latest_upload(dp, lab->diskimage, image_eid, sizeof(image_eid), path,
				  sizeof(path)) != 0) {
			snprintf(msg, sizeof(msg), "Unable to find current cloud image %s in %s",
				 lab->diskimage, dp->cfg->provider);
			fail_later(g, msg);
			return;
		}
		sm_set_str(&n->image_id, path);
		p.image_external_id = image_eid;
	} else {
		sm_set_str(&n->image_id, lab->cloud_image);
	}
	if (!l->resume)
		apply_image(n, lab->image);
	drv_quota_init(&q, 0, 1, 0);
	label_quota_of(dp, lab, &q);
	json_decref(n->resources);
	n->resources = drv_quota_to_json(&q);
	drv_quota_clear(&q);

	meta = json_pack("{s:s, s:s, s:s}", "nodepool_node_id", n->id ? n->id : "",
			 "nodepool_pool_name", lab->pool->name, "nodepool_provider_name",
			 dp->cfg->provider);
	/* groups: provider, image and label, as upstream's OpenStack adapter
	 * (for Ansible inventories) */
	{
		char groups[512];
		snprintf(groups, sizeof(groups), "%s,%s,%s", dp->cfg->provider,
			 lab->image ? lab->image->name : "", lab->name);
		json_object_set_new(meta, "groups", json_string(groups));
	}
	p.label = lab;
	p.az = l->az; /* the nodeset's, chosen by the launcher (pool_azs) */
	p.metadata = meta;
	p.request = l->request;
	p.retries = dp->cfg->launch_retries;
	p.launch_timeout = dp->cfg->launch_timeout;
	p.boot_timeout = dp->cfg->boot_timeout;
	p.use_internal_ip = lab->pool->use_internal_ip;
	p.provider = dp->cfg->provider;
	p.named = launch_named;
	g->sl = sm_launch_start(dp->runner, n, &p, launch_done, g);
	json_decref(meta);
}

int
sm_drv_launch_resumable(struct drv_provider *dp, const struct np_node *node)
{
	return dp->runner != NULL && dp->ops->resume_machine != NULL && !dp->stopped &&
	       node->external_id != NULL && node->external_id[0] != '\0' &&
	       node->external_id_obj == NULL && node->type.n > 0 &&
	       sm_config_label(dp->cfg, node->pool, node->type.v[0]) != NULL;
}

void
sm_drv_launch_cancel(struct drv_provider *dp, struct drv_launch *l)
{
	struct glaunch *g = l->drv;

	if (g == NULL)
		return;
	l->drv = NULL;
	if (g->sl != NULL)
		sm_launch_cancel(g->sl);
	glaunch_free(g);
}

void
sm_drv_launch_abandon(struct drv_provider *dp, struct drv_launch *l)
{
	struct glaunch *g = l->drv;

	if (g == NULL)
		return;
	l->drv = NULL;
	if (g->sl != NULL)
		sm_launch_abandon(g->sl);
	glaunch_free(g);
}

/* ---- validation before service (beyond upstream) ---------------------------------
 *
 * An upload pending validation (images.c) is booted once, here, from the
 * first label of this provider that uses its diskimage, with keyscan
 * whatever the label's host-key-checking: a node that becomes ready and
 * answers SSH with its host keys passes; a create that fails (after the
 * provider's launch-retries) or a keyscan that finds nothing within
 * boot-timeout fails it, with the launch's error as the reason. The node
 * has no record in ZooKeeper: its instance is tagged nodepool_node_id
 * "validate-<build>-<upload>", counted as known by leak cleanup while the
 * validation runs, and deleted once the verdict is stored.
 */
struct validation {
	LIST_ENTRY(validation) entry;
	struct drv_provider *dp;
	char *path;
	struct sm_label label; /* the label's, with keyscan */
	struct np_node *node;
	struct sm_launch *launch;
	struct sshcmd *cmd; /* validate-command in flight */
};

static void
known_validations(struct drv_provider *dp, struct strset *known)
{
	struct validation *v;

	LIST_FOREACH(v, &dp->validations, entry)
	strset_add(known, v->node->id);
}

static void
validation_free(struct validation *v)
{
	LIST_REMOVE(v, entry);
	if (v->launch != NULL)
		sm_launch_cancel(v->launch);
	sshcmd_cancel(v->cmd);
	np_node_free(v->node);
	free(v->path);
	free(v);
}

static void
validation_instance_deleted(int ok, const char *error, void *arg)
{
	char *eid = arg;

	if (!ok)
		log_warn("validation instance %s: delete failed: %s (leak cleanup takes it)", eid,
			 error ? error : "?");
	free(eid);
}

/* The verdict is stored: the node goes. */
static void
validation_end(struct validation *v, int ok, const char *reason)
{
	struct drv_provider *dp = v->dp;

	if (ok)
		log_info("upload %s passed its validation (node %s, %s)", v->path,
			 v->node->external_id ? v->node->external_id : "?",
			 v->node->interface_ip ? v->node->interface_ip : "?");
	else
		log_warn("upload %s failed its validation: %s", v->path, reason);
	sm_images_verdict(dp->images, v->path, ok, reason);
	if (v->node->external_id != NULL)
		sm_delete_start(dp->runner, v->node->external_id, dp->cfg->launch_timeout,
				validation_instance_deleted, np_strdupz(v->node->external_id));
	validation_free(v);
}

static void
validation_cmd_done(int status, const char *error, void *arg)
{
	struct validation *v = arg;
	char reason[600];

	v->cmd = NULL;
	if (status == 0) {
		validation_end(v, 1, NULL);
		return;
	}
	if (error != NULL)
		snprintf(reason, sizeof(reason), "validation command failed: %s", error);
	else
		snprintf(reason, sizeof(reason), "validation command exited %d", status);
	validation_end(v, 0, reason);
}

static void
validation_done(enum drv_launch_result res, const char *error, void *arg)
{
	struct validation *v = arg;
	const json_t *raw = v->label.image != NULL ? v->label.image->raw : NULL;
	const char *cmd = json_string_value(json_object_get(raw, "validate-command"));
	char reason[512];

	v->launch = NULL;
	if (res == DRV_LAUNCH_ABORTED) {
		/* quota: not the image's fault; the next change tries again */
		log_warn("upload %s: validation boot aborted: %s", v->path, error ? error : "?");
		if (v->node->external_id != NULL)
			sm_delete_start(v->dp->runner, v->node->external_id,
					v->dp->cfg->launch_timeout, validation_instance_deleted,
					np_strdupz(v->node->external_id));
		validation_free(v);
		return;
	}
	if (res != DRV_LAUNCH_READY) {
		snprintf(reason, sizeof(reason), "validation boot failed: %s",
			 error ? error : "unknown error");
		validation_end(v, 0, reason);
		return;
	}
	if (cmd != NULL) {
		struct sshcmd_params p = {
		    .host = v->node->interface_ip,
		    .port = v->node->connection_port,
		    .user = v->node->username ? v->node->username : "zuul",
		    .key = json_string_value(json_object_get(raw, "validate-key")),
		    .command = cmd,
		    .timeout = (double)json_integer_value(json_object_get(raw, "validate-timeout")),
		};
		if (p.host == NULL || p.key == NULL) {
			validation_end(v, 0,
				       p.host == NULL
					   ? "validation command: the node has no address"
					   : "validation command: no validate-key");
			return;
		}
		log_info("upload %s: running its validation command on %s", v->path, p.host);
		if ((v->cmd = sshcmd_start(v->dp->env.base, &p, validation_cmd_done, v)) == NULL)
			validation_end(v, 0, "validation command: cannot start it");
		return;
	}
	validation_end(v, 1, NULL);
}

static const struct sm_label *
label_of_diskimage(const struct drv_provider *dp, const char *image)
{
	size_t i, j;

	for (i = 0; i < dp->cfg->npools; i++)
		for (j = 0; j < dp->cfg->pools[i].nlabels; j++) {
			const struct sm_label *l = &dp->cfg->pools[i].labels[j];
			if (l->diskimage != NULL && strcmp(l->diskimage, image) == 0)
				return l;
		}
	return NULL;
}

static void
validation_start(struct drv_provider *dp, const char *image, const char *path, const char *eid)
{
	const struct sm_label *lab = label_of_diskimage(dp, image);
	struct sm_launch_params p;
	struct validation *v;
	const char *b, *u;
	char id[128];
	json_t *meta;

	if (lab == NULL) {
		if (strset_add(dp->unvalidatable, path))
			log_warn("upload %s waits for validation, but no label of provider %s "
				 "boots diskimage %s",
				 path, dp->cfg->provider, image);
		return;
	}
	/* .../builds/<build>/providers/<p>/images/<upload> */
	b = strstr(path, "/builds/");
	u = strrchr(path, '/');
	snprintf(id, sizeof(id), "validate-%.*s-%s", b ? (int)strcspn(b + 8, "/") : 0,
		 b ? b + 8 : "", u ? u + 1 : "");
	v = calloc(1, sizeof(*v));
	if (v == NULL)
		abort();
	v->dp = dp;
	v->path = np_strdupz(path);
	v->label = *lab;
	v->label.host_key_checking = 1;
	v->node = np_node_new();
	v->node->id = np_strdupz(id);
	v->node->provider = np_strdupz(dp->cfg->provider);
	v->node->pool = np_strdupz(lab->pool->name);
	sm_set_str(&v->node->image_id, path);
	apply_image(v->node, lab->image);
	LIST_INSERT_HEAD(&dp->validations, v, entry);
	log_info("validating upload %s: booting %s from label %s", path, id, lab->name);
	meta = json_pack("{s:s, s:s, s:s}", "nodepool_node_id", id, "nodepool_pool_name",
			 lab->pool->name, "nodepool_provider_name", dp->cfg->provider);
	memset(&p, 0, sizeof(p));
	p.label = &v->label;
	p.image_external_id = eid;
	p.metadata = meta;
	p.retries = dp->cfg->launch_retries;
	p.launch_timeout = dp->cfg->launch_timeout;
	p.boot_timeout = dp->cfg->boot_timeout;
	p.use_internal_ip = lab->pool->use_internal_ip;
	p.provider = dp->cfg->provider;
	v->launch = sm_launch_start(dp->runner, v->node, &p, validation_done, v);
	json_decref(meta);
}

/* The upload view changed: boot every pending upload not booted yet. */
static void
validations_check(void *arg)
{
	struct drv_provider *dp = arg;
	const char *image, *path, *eid;
	struct validation *v;
	size_t i;

	if (dp->stopped || !drv_in_sync(dp->lc))
		return;
	for (i = 0; sm_images_pending_nth(dp->images, i, &image, &path, &eid) == 0; i++) {
		LIST_FOREACH(v, &dp->validations, entry)
		if (strcmp(v->path, path) == 0)
			break;
		if (v == NULL)
			validation_start(dp, image, path, eid);
	}
}

/* ---- deletes ------------------------------------------------------------------------------------
 */

static void
delete_done(int ok, const char *error, void *arg)
{
	struct gdelete *g = arg;
	struct drv_provider *dp = g->dp;
	struct drv_delete *d = g->d;

	TAILQ_REMOVE(&dp->deletes, g, entry);
	free(g);
	stats_refresh(dp);
	drv_delete_done(d, ok, error);
}

void
sm_drv_node_delete(struct drv_provider *dp, struct drv_delete *d)
{
	struct gdelete *g = calloc(1, sizeof(*g));
	char *eid;

	if (g == NULL)
		abort();
	g->dp = dp;
	g->d = d;
	TAILQ_INSERT_TAIL(&dp->deletes, g, entry);
	/* an object external id (AWS {instance, host}) goes to the adapter as
	 * its compact JSON text, as the adapter gave it */
	eid = d->node->external_id_obj != NULL
		  ? json_dumps(d->node->external_id_obj, JSON_COMPACT | JSON_ENCODE_ANY)
	      : d->node->external_id != NULL ? strdup(d->node->external_id)
					     : NULL;
	if (eid != NULL)
		log_info("node %s: deleting instance %s", d->node->id ? d->node->id : "?", eid);
	g->sd = sm_delete_start(dp->runner, eid, SM_DELETE_TIMEOUT, delete_done, g);
	free(eid);
}

/* ---- leak cleanup -------------------------------------------------------------------------------
 */

struct leak_ctx {
	struct drv_provider *dp;
	char *type, *id, *node_id;
};

static void
leak_deleted(int ok, const char *error, void *arg)
{
	struct leak_ctx *x = arg;
	struct drv_provider *dp = x->dp;
	char key[512];

	if (ok) {
		snprintf(key, sizeof(key), "leaked.%ss", x->type);
		json_object_set_new(
		    dp->leaked, key,
		    json_integer(json_integer_value(json_object_get(dp->leaked, key)) + 1));
		log_info("provider %s: deleted leaked %s %s (%s%s)", dp->cfg->provider, x->type,
			 x->id, strncmp(x->node_id, "upload:", 7) == 0 ? "" : "node ", x->node_id);
		/* as upstream's cleanupLeakedResources, once per resource deleted */
		snprintf(key, sizeof(key), "nodepool.provider.%s.leaked.%ss", dp->cfg->provider,
			 x->type);
		metrics_statsd_incr(key, 1);
		stats_refresh(dp);
	} else {
		log_warn("provider %s: unable to delete leaked %s %s (%s): %s", dp->cfg->provider,
			 x->type, x->id, x->node_id, error ? error : "?");
	}
	free(x->type);
	free(x->id);
	free(x->node_id);
	free(x);
}

/*
 * One actor per leaked item (issue 22): every launcher serving the provider
 * lists the cloud and keeps its two-pass memory of suspects (so whichever
 * becomes an item's actor when a peer is lost may act at its next pass),
 * but only the one drv_duty_mine names for the item ("leak/<node id>" or
 * "leak/upload:<build>-<upload>") deletes it: one delete per leaked
 * resource, not one per launcher. A peer's instance is never a suspect:
 * its node record is in ZooKeeper before the cloud is asked (quota.c).
 */
static int
leak_mine(struct drv_provider *dp, const char *key)
{
	char duty[320];

	if (dp->ops->cloud_per_launcher)
		return 1; /* no peer sees this cloud (the fake's) */
	snprintf(duty, sizeof(duty), "leak/%s", key);
	return drv_duty_mine(dp->lc, duty);
}

/* As upstream's cleanupLeakedResources: a resource tagged with our
 * provider whose node id ZooKeeper does not know, or whose upload
 * (nodepool_build_id, nodepool_upload_id) this provider has no record of,
 * on two passes in a row (so a launch or upload racing the listing is not
 * mistaken for a leak). Uploads are judged only once the upload cache has
 * read ZooKeeper (not without a ZooKeeper handle: see drv_zk). */
static void
leak_list_cb(const struct sm_resource *v, size_t n, const char *error, void *arg)
{
	struct drv_provider *dp = arg;
	struct strset *known, *seen;
	size_t i;

	dp->leak_busy = 0;
	if (error != NULL) {
		log_warn("provider %s: listing resources for leak cleanup: %s", dp->cfg->provider,
			 error);
		return;
	}
	if (dp->stopped)
		return;
	known = known_node_ids(dp);
	seen = strset_new();
	for (i = 0; i < n; i++) {
		const char *pn =
		    json_string_value(json_object_get(v[i].metadata, "nodepool_provider_name"));
		const char *nid =
		    json_string_value(json_object_get(v[i].metadata, "nodepool_node_id"));
		struct leak_ctx *x;

		const char *bid =
		    json_string_value(json_object_get(v[i].metadata, "nodepool_build_id"));
		const char *uid =
		    json_string_value(json_object_get(v[i].metadata, "nodepool_upload_id"));
		char key[300];

		if (pn == NULL || strcmp(pn, dp->cfg->provider) != 0)
			continue;
		if (nid != NULL && drv_node_unreadable(dp->lc, nid))
			continue; /* its record exists, unreadable: not a leak */
		if (nid != NULL && !strset_has(known, nid))
			snprintf(key, sizeof(key), "%s", nid);
		else if (uid != NULL && bid != NULL && dp->images != NULL &&
			 sm_images_known_upload(dp->images, bid, uid) == 0)
			snprintf(key, sizeof(key), "upload:%s-%s", bid, uid);
		else
			continue;
		strset_add(seen, key);
		if (!strset_has(dp->maybe_leaked, key) || dp->ops->delete_resource == NULL)
			continue;
		if (!leak_mine(dp, key))
			continue; /* another launcher of the provider deletes it */
		x = calloc(1, sizeof(*x));
		x->dp = dp;
		x->type = strdup(v[i].type);
		x->id = strdup(v[i].id);
		x->node_id = strdup(key);
		dp->ops->delete_resource(dp->ad, &v[i], leak_deleted, x);
	}
	strset_free(known);
	strset_free(dp->maybe_leaked);
	dp->maybe_leaked = seen;
}

/*
 * Uploads' leaks through list_images, for adapters whose resource listing
 * has no images (openstack): an image tagged with our provider and an
 * upload (nodepool_build_id, nodepool_upload_id) this provider has no
 * record of, two passes in a row, is deleted through delete_image (an
 * image stored just before its upload worker was killed, whose record the
 * builder then removed as cruft).
 */
static void
image_leak_deleted(int ok, const char *error, void *arg)
{
	leak_deleted(ok, error, arg);
}

static void
image_leak_list_cb(const struct drv_cloud_image *v, size_t n, const char *error, void *arg)
{
	struct drv_provider *dp = arg;
	struct strset *seen;
	size_t i;

	dp->image_leak_busy = 0;
	if (error != NULL) {
		log_warn("provider %s: listing images for leak cleanup: %s", dp->cfg->provider,
			 error);
		return;
	}
	if (dp->stopped || dp->images == NULL)
		return;
	seen = strset_new();
	for (i = 0; i < n; i++) {
		const char *pn =
		    json_string_value(json_object_get(v[i].tags, "nodepool_provider_name"));
		const char *bid =
		    json_string_value(json_object_get(v[i].tags, "nodepool_build_id"));
		const char *uid =
		    json_string_value(json_object_get(v[i].tags, "nodepool_upload_id"));
		struct leak_ctx *x;
		char key[300];

		if (pn == NULL || strcmp(pn, dp->cfg->provider) != 0 || bid == NULL ||
		    uid == NULL || sm_images_known_upload(dp->images, bid, uid) != 0)
			continue;
		strset_add(seen, v[i].id);
		if (!strset_has(dp->maybe_leaked_images, v[i].id))
			continue;
		snprintf(key, sizeof(key), "upload:%s-%s", bid, uid);
		if (!leak_mine(dp, key))
			continue; /* another launcher of the provider deletes it */
		x = calloc(1, sizeof(*x));
		if (x == NULL)
			abort();
		x->dp = dp;
		x->type = strdup("image");
		x->id = strdup(v[i].id);
		x->node_id = strdup(key);
		dp->ops->delete_image(dp->ad, v[i].id, image_leak_deleted, x);
	}
	strset_free(dp->maybe_leaked_images);
	dp->maybe_leaked_images = seen;
}

void
sm_drv_cleanup(struct drv_provider *dp)
{
	if (dp->stopped)
		return;
	if (dp->ops->images_in_resources == 0 && dp->ops->list_images != NULL &&
	    dp->ops->delete_image != NULL && dp->images != NULL && !dp->image_leak_busy) {
		dp->image_leak_busy = 1;
		dp->ops->list_images(dp->ad, image_leak_list_cb, dp);
	}
	if (dp->ops->list_resources != NULL && !dp->leak_busy) {
		dp->leak_busy = 1;
		dp->ops->list_resources(dp->ad, leak_list_cb, dp);
	}
	if (dp->quota_stale || np_mono_s() - dp->quota_time > SM_MAX_QUOTA_AGE)
		quota_refresh(dp);
}

/* ---- life cycle
 * ----------------------------------------------------------------------------------- */

/* ---- the pace of shared listings (sm_env.listing_wait) ------------------------------ */

static double
listing_wait(const struct sm_env *env, double last_start, double min_gap)
{
	struct drv_provider *dp =
	    (struct drv_provider *)(void *)((char *)env - offsetof(struct drv_provider, env));

	if (dp->runner == NULL) /* from inside adapter_new */
		return fmax(0, last_start + fmax(min_gap, SM_DEFAULT_POLL) - np_mono_s());
	return sm_runner_listing_wait(dp->runner, last_start, min_gap);
}

/* ---- instance notices (sm_env.instance_notice) --------------------------------------- */

/* A counter among the extra ones stats_refresh copies into the stats
 * (dp->leaked: "leaked.<type>s", "notices.*"). */
static void
stat_add(struct drv_provider *dp, const char *key, long long n)
{
	json_t *v = json_object_get(dp->leaked, key);

	json_object_set_new(dp->leaked, key,
			    json_integer((v != NULL ? json_integer_value(v) : 0) + n));
}

struct notice_ctx {
	struct zk *zk;
	char *path, *what;
	int tries;
};

static void notice_read(int rc, const char *data, int len, const struct zk_stat *st, void *arg);

static void
notice_free(struct notice_ctx *c)
{
	free(c->path);
	free(c->what);
	free(c);
}

static void
notice_written(int rc, const struct zk_stat *st, void *arg)
{
	struct notice_ctx *c = arg;

	(void)st;
	if (rc == ZBADVERSION && ++c->tries < 3) {
		zk_get(c->zk, c->path, NULL, NULL, notice_read, c);
		return;
	}
	if (rc != ZOK)
		log_warn("%s: cannot note \"%s\" in the record: %s", c->path, c->what,
			 zk_strerror(rc));
	notice_free(c);
}

/* Read the record as it is now and write it back with the comment, only
 * if nobody wrote it in between (version-checked): fields we do not know
 * are kept verbatim by the codec. */
static void
notice_read(int rc, const char *data, int len, const struct zk_stat *st, void *arg)
{
	struct notice_ctx *c = arg;
	struct np_node *n = NULL;
	char err[128], *out;
	size_t olen;

	if (rc != ZOK || np_node_decode(NULL, data, (size_t)len, &n, err, sizeof(err)) != 0) {
		notice_free(c);
		return;
	}
	free(n->comment);
	n->comment = strdup(c->what);
	out = np_node_encode(n, &olen);
	np_node_free(n);
	zk_set(c->zk, c->path, out, (int)olen, st->version, notice_written, c);
	free(out);
}

static void
instance_notice(const struct sm_env *env, const char *external_id, const char *what)
{
	struct drv_provider *dp =
	    (struct drv_provider *)(void *)((char *)env - offsetof(struct drv_provider, env));
	const struct np_node **v;
	size_t n = drv_provider_nodes(dp->lc, &v), i;

	for (i = 0; i < n; i++) {
		const struct np_node *nd = v[i];
		const char *label = nd->type.n > 0 ? nd->type.v[0] : "?";

		if (nd->external_id == NULL || strcmp(nd->external_id, external_id) != 0)
			continue;
		if (nd->state == NP_NODE_READY && nd->allocated_to == NULL &&
		    !drv_node_locked(dp->lc, nd->id)) {
			struct np_node *c = np_node_dup(nd);
			log_warn("node %s (%s): %s: deleting it before it is used", nd->id, label,
				 what);
			np_node_set_state(c, NP_NODE_DELETING);
			free(c->comment);
			c->comment = strdup(what);
			stat_add(dp, "notices.deleted_ready", 1);
			drv_update_node(dp->lc, c);
		} else {
			struct zk *zk = drv_zk(dp->lc);
			char path[128];
			log_warn("node %s (%s, %s): %s", nd->id, label,
				 np_node_state_name(nd->state), what);
			stat_add(dp, "notices.reported", 1);
			if (zk != NULL) {
				struct notice_ctx *c = calloc(1, sizeof(*c));
				snprintf(path, sizeof(path), "/nodepool/nodes/%s", nd->id);
				c->zk = zk;
				c->path = strdup(path);
				c->what = strdup(what);
				zk_get(zk, path, NULL, NULL, notice_read, c);
			}
		}
		return;
	}
	log_info("instance %s (no node of ours): %s", external_id, what);
}

struct drv_provider *
sm_provider_new(const struct sm_adapter_ops *ops, const struct sm_defaults *def,
		struct drv_host *lc, char *err, size_t errlen)
{
	struct drv_provider *dp = calloc(1, sizeof(*dp));
	struct event_base *base = drv_event_base(lc);

	if (dp == NULL)
		abort();
	dp->lc = lc;
	dp->ops = ops;
	TAILQ_INIT(&dp->deletes);
	dp->cfg = sm_config_new(drv_provider_config(lc), def, err, errlen);
	if (dp->cfg == NULL) {
		free(dp);
		return NULL;
	}
	dp->stats = json_object();
	dp->leaked = json_object();
	dp->maybe_leaked = strset_new();
	dp->error_labels = strset_new();
	drv_quota_unlimited(&dp->quota);
	drv_quota_init(&dp->limits, 0, 0, 0);
	dp->env.base = base;
	dp->env.provider_name = dp->cfg->provider;
	dp->env.provider = drv_provider_config(lc);
	dp->env.cfg = dp->cfg;
	dp->env.host = lc;
	dp->env.stats = dp->stats;
	dp->env.instance_notice = instance_notice;
	dp->env.listing_wait = listing_wait;
	dp->ad = ops->adapter_new(&dp->env, err, errlen);
	if (dp->ad == NULL) {
		json_decref(dp->stats);
		json_decref(dp->leaked);
		strset_free(dp->maybe_leaked);
		strset_free(dp->error_labels);
		sm_config_free(dp->cfg);
		free(dp);
		return NULL;
	}
	dp->scanner = nodescan_new(base, NULL, 0, 0);
	dp->runner = sm_runner_new(base, ops, dp->ad, dp->scanner);
	if (drv_zk(lc) != NULL)
		dp->images = sm_images_new(drv_zk(lc), base, dp->cfg->provider);
	LIST_INIT(&dp->validations);
	dp->upload_fails = json_object();
	dp->unvalidatable = strset_new();
	dp->maybe_leaked_images = strset_new();
	if (dp->images != NULL)
		sm_images_set_notify(dp->images, validations_check, dp);
	dp->lag_ev = event_new(base, -1, 0, lag_cb, dp);
	if (dp->scanner == NULL || dp->runner == NULL || dp->lag_ev == NULL)
		abort();
	stats_refresh(dp);
	lag_arm(dp);
	log_info("provider %s: %s adapter ready (launch-retries %d, boot-timeout %.0fs, "
		 "launch-timeout %.0fs, rate %g)",
		 dp->cfg->provider, ops->name, dp->cfg->launch_retries, dp->cfg->boot_timeout,
		 dp->cfg->launch_timeout, dp->cfg->rate);
	return dp;
}

void
sm_drv_provider_start(struct drv_provider *dp)
{
	dp->quota_retry_at = 0;
	quota_refresh(dp);
	/* synced again after a lost connection or an expiry: the image
	 * watch's events of that time are lost, read the tree again */
	if (dp->images != NULL) {
		sm_images_refresh(dp->images);
		validations_check(dp);
	}
}

void
sm_drv_provider_stop(struct drv_provider *dp)
{
	dp->stopped = 1;
	if (dp->ops->adapter_stop != NULL)
		dp->ops->adapter_stop(dp->ad);
}

void
sm_drv_provider_free(struct drv_provider *dp)
{
	struct gdelete *g;

	if (dp == NULL)
		return;
	/* Deletions the launcher still waits for end as failures (the nodes
	 * stay `deleting`, retried by the next launcher), so nothing the
	 * launcher holds for them is left behind. */
	while ((g = TAILQ_FIRST(&dp->deletes)) != NULL) {
		struct drv_delete *d = g->d;
		TAILQ_REMOVE(&dp->deletes, g, entry);
		sm_delete_cancel(g->sd);
		free(g);
		drv_delete_done(d, 0, "the provider stopped");
	}
	while (!LIST_EMPTY(&dp->validations)) {
		struct validation *v = LIST_FIRST(&dp->validations);
		validation_free(v); /* its launch cancelled: no callback */
	}
	strset_free(dp->unvalidatable);
	strset_free(dp->maybe_leaked_images);
	json_decref(dp->upload_fails);
	sm_runner_free(dp->runner);
	dp->ops->adapter_free(dp->ad);
	sm_images_free(dp->images);
	nodescan_free(dp->scanner);
	event_free(dp->lag_ev);
	drv_quota_clear(&dp->quota);
	drv_quota_clear(&dp->limits);
	strset_free(dp->maybe_leaked);
	strset_free(dp->error_labels);
	json_decref(dp->stats);
	json_decref(dp->leaked);
	sm_config_free(dp->cfg);
	free(dp);
}

void
sm_drv_dump(struct drv_provider *dp, struct evbuffer *out)
{
	struct sm_runner_stats st;
	const char *k;
	json_t *v;

	stats_refresh(dp);
	sm_runner_get_stats(dp->runner, &st);
	evbuffer_add_printf(out,
			    "  state machines (%s): %u launches, %u deletes, %u cancelled "
			    "launches cleaning up, %u machines running\n",
			    dp->ops->name, st.launches, st.deletes, st.orphans, st.runs);
	evbuffer_add_printf(out,
			    "    launches: ready %llu failed %llu aborted %llu; failed "
			    "attempts %llu (instances deleted %llu), nodescan failures %llu\n",
			    st.ready, st.failed, st.aborted, st.attempts_failed, st.unwound,
			    st.nodescan_failed);
	evbuffer_add_printf(out, "    deletes: ok %llu failed %llu\n", st.deleted,
			    st.delete_errors);
	if (dp->quota_known)
		evbuffer_add_printf(out,
				    "    quota for nodepool: cores %g instances %g ram %g "
				    "(read %.0fs ago%s)\n",
				    dp->quota.cores, dp->quota.instances, dp->quota.ram,
				    np_mono_s() - dp->quota_time, dp->quota_stale ? ", stale" : "");
	else
		evbuffer_add_printf(out, "    quota for nodepool: not read yet (unlimited)\n");
	json_object_foreach(dp->leaked, k, v)
	    evbuffer_add_printf(out, "    %s: %lld\n", k, (long long)json_integer_value(v));
	if (dp->images != NULL)
		evbuffer_add_printf(out, "    diskimage uploads: %d reads of ZooKeeper\n",
				    sm_images_walks(dp->images));
	else if (dp->cfg->ndiskimages > 0)
		evbuffer_add_printf(out, "    diskimage uploads: unknown (no ZooKeeper handle from "
					 "the launcher)\n");
	evbuffer_add_printf(out,
			    "    event loop lag: max %.1f ms since start, %.1f ms since the "
			    "last dump\n",
			    dp->lag_max * 1000.0, dp->lag_window_max * 1000.0);
	dp->lag_window_max = 0;
	sm_runner_dump(dp->runner, out);
	if (dp->ops->dump != NULL)
		dp->ops->dump(dp->ad, out);
}

/* ---- image management (the builder's upload workers) ----------------------------------- */

struct img_call {
	drv_image_upload_cb up;
	drv_image_delete_cb del;
	drv_image_list_cb list;
	void *arg;
	char *error; /* an answer decided before any adapter call */
};

static void
img_upload_answer(const char *external_id, const char *error, void *arg)
{
	struct img_call *ic = arg;

	ic->up(external_id, error, ic->arg);
	free(ic->error);
	free(ic);
}

static void
img_delete_answer(int ok, const char *error, void *arg)
{
	struct img_call *ic = arg;

	ic->del(ok, error, ic->arg);
	free(ic->error);
	free(ic);
}

/* An error known at once, reported from the loop as the contract says. */
static void
img_refuse_cb(evutil_socket_t fd, short what, void *arg)
{
	struct img_call *ic = arg;
	char *e = ic->error;

	ic->error = NULL;
	if (ic->up != NULL)
		img_upload_answer(NULL, e, ic);
	else if (ic->list != NULL) {
		ic->list(NULL, 0, e, ic->arg);
		free(ic);
	} else
		img_delete_answer(0, e, ic);
	free(e);
}

static void
img_refuse(struct drv_provider *dp, struct img_call *ic, const char *fmt, const char *a)
{
	char buf[512];

	snprintf(buf, sizeof(buf), fmt, a);
	ic->error = strdup(buf);
	if (event_base_once(dp->env.base, -1, EV_TIMEOUT, img_refuse_cb, ic, NULL) != 0)
		abort();
}

void
sm_drv_image_upload(struct drv_provider *dp, const struct drv_image_upload *u,
		    drv_image_upload_cb cb, void *arg)
{
	struct img_call *ic = calloc(1, sizeof(*ic));
	const struct sm_image *im = NULL;
	struct sm_upload_args a;
	size_t i;

	if (ic == NULL)
		abort();
	ic->up = cb;
	ic->arg = arg;
	for (i = 0; i < dp->cfg->ndiskimages; i++)
		if (strcmp(dp->cfg->diskimages[i].name, u->image) == 0)
			im = &dp->cfg->diskimages[i];
	if (dp->ops->upload_image == NULL) {
		img_refuse(dp, ic, "the %s adapter cannot upload images", dp->ops->name);
		return;
	}
	if (im == NULL) {
		img_refuse(dp, ic, "no diskimage %s in this provider", u->image);
		return;
	}
	memset(&a, 0, sizeof(a));
	a.image = im;
	a.image_name = u->image_name;
	a.filename = u->filename;
	a.format = u->format;
	a.metadata = u->metadata;
	a.md5 = u->md5;
	a.sha256 = u->sha256;
	dp->ops->upload_image(dp->ad, &a, img_upload_answer, ic);
}

void
sm_drv_image_delete(struct drv_provider *dp, const char *external_id, drv_image_delete_cb cb,
		    void *arg)
{
	struct img_call *ic = calloc(1, sizeof(*ic));

	if (ic == NULL)
		abort();
	ic->del = cb;
	ic->arg = arg;
	if (dp->ops->delete_image == NULL) {
		img_refuse(dp, ic, "the %s adapter cannot delete images", dp->ops->name);
		return;
	}
	dp->ops->delete_image(dp->ad, external_id, img_delete_answer, ic);
}

void
sm_drv_image_list(struct drv_provider *dp, drv_image_list_cb cb, void *arg)
{
	struct img_call *ic;

	if (dp->ops->list_images != NULL) {
		dp->ops->list_images(dp->ad, cb, arg);
		return;
	}
	if ((ic = calloc(1, sizeof(*ic))) == NULL)
		abort();
	ic->list = cb;
	ic->arg = arg;
	img_refuse(dp, ic, "the %s adapter cannot list images", dp->ops->name);
}
