/*
 * The builder process's life cycle: configuration (a file, re-read when
 * it changes, or nodepoold's CONFIG), the ZooKeeper session, the builder
 * component and builder_id.txt, nodepoold's channel, and the pass that
 * runs the three duties of upstream's builder.py (reference
 * section 4), each run every `interval` seconds (and at once when
 * something changes) from a snapshot of /nodepool/images
 * (lib/zk/imagetree.h). The snapshot is read again only when the
 * persistent recursive watch on /nodepool/images (zk_watch_tree) reports
 * a change, or after a lost connection or an expiry, whose events are
 * lost; the timer re-runs the time-driven decisions (rebuild-age,
 * cleanup-interval, the config file) on the snapshot in hand, it never
 * polls the tree:
 *
 *   builds   (BuildWorker): per diskimage, unless paused in the config or
 *            by the ZooKeeper pause flag: a manual request (request-build),
 *            no READY build, the newest READY one older than rebuild-age,
 *            or missing a format a provider needs -> take the image's build
 *            lock (non-blocking), re-read, create the build record
 *            (building), hand dib-cmd to a build worker, record READY or
 *            FAILED, remove the request after a READY manual build;
 *   uploads  (UploadWorker): per provider that manages images and each of
 *            its diskimages not paused: the newest READY build whose file
 *            of the provider's format is here and that has no READY upload
 *            there -> take the upload lock (non-blocking), re-read, create
 *            the upload record (uploading), hand it to an upload worker,
 *            record READY (external_id, external_name, format) or FAILED;
 *   cleanup  (CleanupWorker), every `cleanup_interval` seconds: keep the
 *            two newest READY builds of each configured image and the two
 *            newest READY uploads per image and provider; delete in the
 *            cloud, then in ZooKeeper, what is superseded, failed, marked
 *            deleting (`nodepool image-delete`, `dib-image-delete`), left
 *            uploading by a dead upload, failed its validation (then the
 *            build is uploaded again), of a removed image or no longer in
 *            a provider; remove upload records of providers that left the
 *            configuration (their cloud cannot be reached any more:
 *            upstream leaves them, and the build, forever); mark builds
 *            deleting and remove them once no upload is left; delete local
 *            files of builds that are gone or deleting, and with
 *            delete-after-upload the formats every provider has.
 *
 * The duties live in build_sched.c, upload_sched.c and cleanup.c, the
 * tasks that carry them out in task.c, their questions of the snapshot in
 * snapshot.c (builder_int.h). The work itself runs in worker processes
 * (pool.c); this process keeps every lock and writes every record, so a
 * crashing worker fails one job and leaves records that say so.
 */
#include "builder/builder_int.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "lib/core/childproc.h"
#include "lib/core/clock.h"
#include "lib/core/log.h"
#include "lib/core/memtrim.h"
#include "lib/core/version.h"
#include "lib/ops/statsd.h"
#include "lib/zk/zk_status.h"
#include "protocol/ipc.h"
#include "protocol/paths.h"

#define EXIT_PERMANENT 100

double
bld_now_wall(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

char *
bld_strdup(const char *s)
{
	char *d = strdup(s != NULL ? s : "");

	if (d == NULL)
		abort();
	return d;
}
void
bld_set_error(struct builder *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(b->last_error, sizeof(b->last_error), fmt, ap);
	va_end(ap);
	log_warn("%s", b->last_error);
}

/* mkdir -p */
static int
mkdirs(const char *path)
{
	char buf[4096], *p;

	snprintf(buf, sizeof(buf), "%s", path);
	for (p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) != 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(buf, 0755) != 0 && errno != EEXIST)
		return -1;
	return 0;
}

void
bld_schedule_soon(struct builder *b)
{
	if (!event_pending(b->soon_ev, EV_TIMEOUT, NULL))
		event_active(b->soon_ev, EV_TIMEOUT, 0);
}

static void
emit_gauges(struct builder *b, const struct imgtree *tree)
{
	char key[1024];
	size_t i, j;
	int requests = 0;

	if (b->statsd == NULL)
		return;
	for (i = 0; i < b->cfg->ndiskimages; i++) {
		const struct np_diskimage *d = &b->cfg->diskimages[i];
		const struct imgtree_image *im = imgtree_image(tree, d->name);
		int req = im != NULL && im->has_request;
		int paused = d->pause || (im != NULL && im->paused);
		requests += req;
		snprintf(key, sizeof(key), "nodepool.image.%s.image_build_requests", d->name);
		statsd_gauge(b->statsd, key, req);
		snprintf(key, sizeof(key), "nodepool.builder.%s.image.%s.build.state", b->hostname,
			 d->name);
		statsd_gauge(b->statsd, key, paused ? 3 : strset_has(b->building, d->name) ? 1 : 0);
		for (j = 0; j < b->cfg->nproviders; j++) {
			const struct np_provider *p = &b->cfg->providers[j];
			const struct np_provider_image *pi = bld_provider_diskimage(p, d->name);
			char k2[600];
			if (!p->manage_images || pi == NULL)
				continue;
			snprintf(k2, sizeof(k2), "%s/%s", d->name, p->name);
			snprintf(key, sizeof(key),
				 "nodepool.builder.%s.image.%s.provider.%s.upload.state",
				 b->hostname, d->name, p->name);
			statsd_gauge(b->statsd, key,
				     pi->pause			    ? 3
				     : strset_has(b->uploading, k2) ? 2
								    : 0);
		}
	}
	statsd_gauge(b->statsd, "nodepool.image_build_requests", requests);
	statsd_flush(b->statsd);
}

static int load_file_config(struct builder *b, int initial, char *err, size_t errlen);
static void register_component(struct builder *b);

/* The three duties on the snapshot in hand. */
static void
run_duties(struct builder *b, const struct imgtree *tree)
{
	size_t i, j;

	b->passes++;
	if (b->stopping)
		return;
	for (i = 0; i < b->cfg->ndiskimages; i++)
		bld_check_build(b, tree, &b->cfg->diskimages[i]);
	for (i = 0; i < b->cfg->nproviders; i++) {
		const struct np_provider *p = &b->cfg->providers[i];
		if (!p->manage_images)
			continue;
		for (j = 0; j < p->ndiskimages; j++)
			bld_check_upload(b, tree, p, &p->diskimages[j]);
	}
	if (!b->cleanup_running && np_mono_s() - b->last_cleanup >= b->opt.cleanup_interval)
		bld_cleanup(b, tree);
	emit_gauges(b, tree);
}

static void
pass_loaded(int rc, struct imgtree *tree, void *arg)
{
	struct builder *b = arg;

	b->load = NULL;
	if (rc != ZOK) {
		b->tree_stale = 1;
		bld_set_error(b, "reading %s: %s", NP_IMAGE_ROOT, zk_strerror(rc));
		return;
	}
	imgtree_free(b->tree);
	b->tree = tree;
	run_duties(b, tree);
	if (b->again) {
		b->again = 0;
		bld_schedule_soon(b);
	}
}

/* The watch on /nodepool/images: any change (a build request, a pause
 * flag, a record of ours or another builder's, an image-delete) makes
 * the snapshot stale and asks for a pass. */
static void
tree_changed(int type, const char *path, void *arg)
{
	struct builder *b = arg;

	(void)type;
	(void)path;
	b->tree_stale = 1;
	bld_schedule_soon(b);
}

static void
pass(struct builder *b)
{
	char err[512];

	if (b->load != NULL) {
		b->again = 1; /* something changed since this snapshot was asked for */
		return;
	}
	if (b->stopping || b->zk == NULL || !zk_is_connected(b->zk))
		return;
	register_component(b); /* if a registration was lost with the connection */
	if (b->opt.config != NULL && load_file_config(b, 0, err, sizeof(err)) < 0)
		bld_set_error(b, "%s", err);
	if (b->tree != NULL && !b->tree_stale) {
		/* no change reported since it was read: it stands for now */
		b->snapshot_time = bld_now_wall();
		run_duties(b, b->tree);
		return;
	}
	b->tree_stale = 0;
	b->snapshot_time = bld_now_wall();
	b->load = imgtree_load_start(b->zk, pass_loaded, b);
}

static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct builder *b = arg;
	struct timeval tv = {
	    (time_t)b->opt.interval,
	    (suseconds_t)((b->opt.interval - (double)(time_t)b->opt.interval) * 1e6)};

	pass(b);
	evtimer_add(b->tick_ev, &tv);
}

static void
soon_cb(evutil_socket_t fd, short what, void *arg)
{
	pass(arg);
}

/*
 * A registration whose reply was lost may have landed: an ephemeral child
 * named after our hostname and owned by our session is ours (another
 * builder on this host has its own session); none, and it is created again.
 */
struct comp_check {
	struct comp_check *next;
	struct builder *b;
	char path[512];
};

static void
comp_check_done(struct builder *b)
{
	if (b->comp_checks != NULL)
		return;
	b->component_pending = 0;
	if (b->component_path == NULL && b->zk != NULL && zk_is_connected(b->zk))
		register_component(b);
}

static void
comp_exists_cb(int rc, const struct zk_stat *st, void *arg)
{
	struct comp_check *c = arg, **pp;
	struct builder *b = c->b;

	if (rc == ZOK && st->ephemeral_owner == zk_session_id(b->zk) && b->component_path == NULL) {
		b->component_path = bld_strdup(c->path);
		log_info("registered as %s (builder id %s; found after a lost reply)", c->path,
			 b->builder_id);
	}
	for (pp = &b->comp_checks; *pp != NULL; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	free(c);
	comp_check_done(b);
}

static void
comp_list_cb(int rc, int count, char *const *names, void *arg)
{
	struct builder *b = arg;
	size_t hl = strlen(b->hostname);
	int i;

	for (i = 0; rc == ZOK && i < count; i++) {
		struct comp_check *c;
		if (strncmp(names[i], b->hostname, hl) != 0 ||
		    strspn(names[i] + hl, "0123456789") != strlen(names[i] + hl))
			continue;
		c = calloc(1, sizeof(*c));
		if (c == NULL)
			abort();
		c->b = b;
		snprintf(c->path, sizeof(c->path), "/nodepool/components/builder/%s", names[i]);
		c->next = b->comp_checks;
		b->comp_checks = c;
		zk_exists(b->zk, c->path, NULL, NULL, comp_exists_cb, c);
	}
	comp_check_done(b);
}

static void
component_created(int rc, const char *path, void *arg)
{
	struct builder *b = arg;

	if (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT) {
		log_warn("registering the builder component: %s; finding out what happened",
			 zk_strerror(rc));
		zk_children(b->zk, "/nodepool/components/builder", NULL, NULL, comp_list_cb, b);
		return; /* still pending */
	}
	b->component_pending = 0;
	if (rc != ZOK) {
		bld_set_error(b, "registering the builder component: %s", zk_strerror(rc));
		return;
	}
	free(b->component_path);
	b->component_path = bld_strdup(path);
	log_info("registered as %s (builder id %s)", path, b->builder_id);
}

static void
register_component(struct builder *b)
{
	struct np_component *c;
	char path[512], *json;

	if (b->component_path != NULL || b->component_pending)
		return;
	c = np_component_new("builder");
	c->hostname = bld_strdup(b->hostname);
	free(c->state);
	c->state = bld_strdup("running");
	c->version = bld_strdup(NP_VERSION);
	json = np_component_encode(c, NULL);
	np_component_free(c);
	snprintf(path, sizeof(path), "/nodepool/components/builder/%s", b->hostname);
	b->component_pending = 1;
	zk_create(b->zk, path, json, (int)strlen(json), ZOO_EPHEMERAL | ZOO_SEQUENCE, 1,
		  component_created, b);
	free(json);
}

static void send_ready(struct builder *b);

static void
session_cb(struct zk *zk, enum zk_event ev, void *arg)
{
	struct builder *b = arg;

	/* a failed TLS handshake while suspended is still a suspension */
	if (ev == ZK_EV_SUSPENDED || ev == ZK_EV_EXPIRED)
		b->suspended = 1;
	else if (ev == ZK_EV_CONNECTED || ev == ZK_EV_RECONNECTED)
		b->suspended = 0;
	switch (ev) {
	case ZK_EV_CONNECTED:
		log_info("ZooKeeper session 0x%llx", (unsigned long long)zk_session_id(zk));
		free(b->component_path);
		b->component_path = NULL;
		register_component(b);
		if (!b->ready_sent)
			send_ready(b);
		bld_relock_tasks(b); /* after an expiry: our locks went with the session */
		b->tree_stale = 1;   /* the watch's events meanwhile are lost */
		bld_schedule_soon(b);
		break;
	case ZK_EV_RECONNECTED:
		log_info("ZooKeeper connection back (session 0x%llx kept)",
			 (unsigned long long)zk_session_id(zk));
		bld_relock_tasks(b);
		b->tree_stale = 1;
		bld_schedule_soon(b);
		break;
	case ZK_EV_SUSPENDED:
		log_warn("ZooKeeper connection lost; waiting");
		break;
	case ZK_EV_EXPIRED:
		/* locks and the component are gone; builds and uploads in flight
		 * take their locks again on the new session (bld_finish()) */
		bld_set_error(b, "ZooKeeper session expired");
		free(b->component_path);
		b->component_path = NULL;
		break;
	case ZK_EV_AUTH_FAILED:
		/* also a server away behind a proxy or load balancer (the TCP
		 * connection is taken, the handshake fails): as the launcher */
		if (b->suspended)
			log_warn("ZooKeeper TLS handshake failed while the connection is lost "
				 "(server unreachable?); retrying");
		else
			bld_set_error(b,
				      "ZooKeeper TLS handshake failed (server unreachable, or it "
				      "refused our certificate); retrying");
		break;
	}
}

static int
builder_id_load(struct builder *b, char *err, size_t errlen)
{
	char path[4096], hex[33];
	FILE *f;

	snprintf(path, sizeof(path), "%s/builder_id.txt", b->cfg->images_dir);
	f = fopen(path, "r");
	if (f != NULL) {
		size_t n = fread(b->builder_id, 1, sizeof(b->builder_id) - 1, f);
		fclose(f);
		b->builder_id[n] = '\0';
		b->builder_id[strcspn(b->builder_id, "\r\n")] = '\0';
		if (b->builder_id[0] != '\0')
			return 0;
	}
	if (np_uuid4_hex(hex) != 0) {
		snprintf(err, errlen, "no randomness for the builder id");
		return -1;
	}
	/* str(uuid.uuid4()), as upstream */
	snprintf(b->builder_id, sizeof(b->builder_id), "%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8,
		 hex + 12, hex + 16, hex + 20);
	f = fopen(path, "w");
	if (f == NULL || fputs(b->builder_id, f) < 0 || fclose(f) != 0) {
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* Take a new configuration (validated); start ZooKeeper on the first. */
static int
apply_config(struct builder *b, struct np_config *cfg, char *err, size_t errlen)
{
	struct zk_options zo;

	if (cfg->images_dir == NULL) {
		snprintf(err, errlen, "%s: images-dir is required to run a builder", cfg->path);
		return -1;
	}
	if (cfg->zk_hosts == NULL) {
		snprintf(err, errlen, "%s: zookeeper-servers are required", cfg->path);
		return -1;
	}
	if (mkdirs(cfg->images_dir) != 0) {
		snprintf(err, errlen, "images-dir %s: %s", cfg->images_dir, strerror(errno));
		return -1;
	}
	if (mkdirs(cfg->build_log_dir) != 0)
		log_warn("build-log-dir %s: %s", cfg->build_log_dir, strerror(errno));
	if (b->cfg != NULL && strcmp(b->cfg->zk_hosts, cfg->zk_hosts) != 0)
		log_warn("zookeeper-servers changes take effect when the builder restarts");
	np_cfg_free(b->cfg);
	b->cfg = cfg;
	if (b->builder_id[0] == '\0' && builder_id_load(b, err, errlen) != 0)
		return -1;
	if (b->zk != NULL)
		return 0;
	memset(&zo, 0, sizeof(zo));
	zo.hosts = cfg->zk_hosts;
	zo.timeout = cfg->zk_timeout;
	zo.tls_ca = cfg->zk_tls_ca;
	zo.tls_cert = cfg->zk_tls_cert;
	zo.tls_key = cfg->zk_tls_key;
	b->zk = zk_new(b->base, &zo, session_cb, b, err, errlen);
	if (b->zk == NULL)
		return -1;
	/* writes and reads interrupted by a lost connection are sent again
	 * (upstream's KazooRetry); creates are not (see the tasks) */
	zk_set_retry(b->zk, 1);
	zk_watch_tree(b->zk, NP_IMAGE_ROOT, tree_changed, b);
	b->builds = bpool_new(b->base, "build", b->opt.build_workers, b->opt.exe, b->opt.debug);
	b->uploads = bpool_new(b->base, "upload", b->opt.upload_workers, b->opt.exe, b->opt.debug);
	tick_cb(-1, 0, b);
	return 0;
}

static int
mtime_of(const char *path, struct timespec *out)
{
	struct stat st;

	memset(out, 0, sizeof(*out));
	if (path == NULL || stat(path, &st) != 0)
		return -1;
	*out = st.st_mtim;
	return 0;
}

/* Standalone: (re)load the files when they changed (upstream re-reads its
 * config on every loop). 1 loaded, 0 unchanged, -1 error (kept the old). */
static int
load_file_config(struct builder *b, int initial, char *err, size_t errlen)
{
	struct timespec m1, m2;
	struct np_config *cfg = NULL;
	struct np_cfg_errors *errs = NULL;

	mtime_of(b->opt.config, &m1);
	mtime_of(b->opt.secure, &m2);
	if (!initial && m1.tv_sec == b->cfg_mtime.tv_sec && m1.tv_nsec == b->cfg_mtime.tv_nsec &&
	    m2.tv_sec == b->sec_mtime.tv_sec && m2.tv_nsec == b->sec_mtime.tv_nsec)
		return 0;
	b->cfg_mtime = m1;
	b->sec_mtime = m2;
	if (np_cfg_load(b->opt.config, b->opt.secure, &cfg, &errs) != 0) {
		char *e = errs != NULL && errs->n > 0 ? np_cfg_error_format(&errs->v[0]) : NULL;
		snprintf(err, errlen, "%s%s", e ? e : "configuration refused",
			 np_cfg_errors_count(errs) > 1 ? " (and more)" : "");
		if (errs != NULL)
			np_cfg_errors_print(errs, stderr);
		free(e);
		np_cfg_errors_free(errs);
		return -1;
	}
	if (apply_config(b, cfg, err, errlen) != 0) {
		if (b->cfg != cfg)
			np_cfg_free(cfg);
		return -1;
	}
	if (!initial)
		log_info("configuration reloaded");
	return 1;
}

static void
send_ready(struct builder *b)
{
	struct ipc_msg m;

	b->ready_sent = 1;
	log_info("ready: ZooKeeper session live, %d build and %d upload workers",
		 b->opt.build_workers, b->opt.upload_workers);
	np_mem_trim_startup("builder ready");
	if (!childproc_link_up(b->sup))
		return;
	childproc_ready(&m, "builder", zk_session_id(b->zk));
	childproc_link_send(b->sup, &m);
	ipc_msg_clear(&m);
}

static void
send_status(void *arg, int64_t seq)
{
	struct builder *b = arg;
	struct ipc_msg m;
	struct ipc_status *st = &m.u.status;

	childproc_status_init(&m, seq, b->generation, b->start);
	/* the builder keeps no last session event: a lost connection is
	 * "suspended" until it is back */
	st->zk_state = zk_ipc_state(b->zk, ZK_EV_SUSPENDED);
	st->state = b->stopping	    ? IPC_WS_STOPPING
		    : b->ready_sent ? IPC_WS_RUNNING
				    : IPC_WS_STARTING;
	/* a builder's jobs in the launcher's terms: accepted = started,
	 * fulfilled = ready, failed = failed */
	st->accepted = (int64_t)(b->builds_started + b->uploads_started);
	st->fulfilled = (int64_t)(b->builds_ready + b->uploads_ready);
	st->failed = (int64_t)(b->builds_failed + b->uploads_failed);
	st->launching = b->builds != NULL ? bpool_busy(b->builds) + bpool_busy(b->uploads) : 0;
	ipc_counts_add(&st->nodes, "building", (int64_t)strset_count(b->building));
	ipc_counts_add(&st->nodes, "uploading", (int64_t)strset_count(b->uploading));
	if (b->last_error[0] != '\0')
		ipc_set_str(&st->last_error, b->last_error);
	childproc_link_send(b->sup, &m);
	ipc_msg_clear(&m);
}

static void
on_config(void *arg, const struct ipc_config *c)
{
	struct builder *b = arg;
	struct ipc_msg ack;
	json_t *o = json_loads(c->config, 0, NULL), *sec;
	struct np_config *cfg = NULL;
	struct np_cfg_errors *errs = NULL;
	char *text = NULL, *stext = NULL, err[1024] = "";
	size_t i;

	ipc_msg_init(&ack, IPC_CONFIG_ACK);
	ack.u.config_ack.generation = c->generation;
	if (!json_is_object(o) || !json_is_object(json_object_get(o, "config"))) {
		ipc_strv_push(&ack.u.config_ack.errors, "builder config: not {config, secure}");
		goto out;
	}
	text = json_dumps(json_object_get(o, "config"), JSON_COMPACT);
	sec = json_object_get(o, "secure");
	if (json_is_object(sec))
		stext = json_dumps(sec, JSON_COMPACT);
	if (np_cfg_load_buffer("nodepool.yaml", text, strlen(text), "secure.conf", stext,
			       stext ? strlen(stext) : 0, &cfg, &errs) != 0) {
		for (i = 0; errs != NULL && i < errs->n; i++) {
			char *e = np_cfg_error_format(&errs->v[i]);
			ipc_strv_push(&ack.u.config_ack.errors, e);
			free(e);
		}
		goto out;
	}
	if (apply_config(b, cfg, err, sizeof(err)) != 0) {
		if (b->cfg != cfg)
			np_cfg_free(cfg);
		ipc_strv_push(&ack.u.config_ack.errors, err);
		goto out;
	}
	ack.u.config_ack.ok = true;
	b->generation = c->generation;
	bld_schedule_soon(b);
out:
	childproc_link_send(b->sup, &ack);
	if (!ack.u.config_ack.ok && b->cfg == NULL) {
		log_error("%s",
			  ack.u.config_ack.errors.n ? ack.u.config_ack.errors.v[0] : "config");
		b->exit_code = EXIT_PERMANENT;
		event_base_loopexit(b->base, NULL);
	}
	ipc_msg_clear(&ack);
	np_cfg_errors_free(errs);
	free(text);
	free(stext);
	json_decref(o);
}

/* builder_dump as a childproc_dump_fn */
static void
builder_dump_cb(void *arg, struct evbuffer *out)
{
	builder_dump(arg, out);
}

/* STOP, or the channel closed (childproc.h): a child exits when its
 * supervisor goes */
static void
on_stop(void *arg)
{
	builder_stop(arg);
}

static const struct childproc_ops builder_link_ops = {
    .config = on_config,
    .status = send_status,
    .dump = builder_dump_cb,
    .stop = on_stop,
};

struct builder *
builder_new(struct event_base *base, const struct builder_options *o, char *err, size_t errlen)
{
	struct builder *b = calloc(1, sizeof(*b));
	char serr[256];

	if (b == NULL)
		abort();
	b->base = base;
	b->opt = *o;
	b->start = np_mono_s();
	b->last_cleanup = -1e9;
	b->hostname = childproc_fqdn();
	b->building = strset_new();
	b->uploading = strset_new();
	TAILQ_INIT(&b->tasks);
	TAILQ_INIT(&b->acts);
	b->tick_ev = evtimer_new(base, tick_cb, b);
	b->soon_ev = event_new(base, -1, 0, soon_cb, b);
	b->statsd = statsd_new_from_env(serr, sizeof(serr));
	if (o->channel_fd >= 0) {
		b->sup = childproc_link_new(base, o->channel_fd, &builder_link_ops, b,
					    &b->exit_code, err, errlen);
		if (b->sup == NULL) {
			builder_free(b);
			return NULL;
		}
	} else if (load_file_config(b, 1, err, errlen) < 0) {
		builder_free(b);
		return NULL;
	}
	return b;
}

static void
stop_cb(evutil_socket_t fd, short what, void *arg)
{
	struct builder *b = arg;

	event_base_loopexit(b->base, NULL);
}

void
builder_stop(struct builder *b)
{
	if (b->stopping)
		return;
	b->stopping = 1;
	/* builds and uploads in flight are abandoned: their records stay
	 * building/uploading without a lock, which cleanup handles */
	event_base_once(b->base, -1, EV_TIMEOUT, stop_cb, b, NULL);
}

void
builder_sigchld(struct builder *b)
{
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (b->builds != NULL)
			bpool_reap(b->builds, pid, status);
		if (b->uploads != NULL)
			bpool_reap(b->uploads, pid, status);
	}
}

void
builder_dump(struct builder *b, struct evbuffer *out)
{
	struct task *t;
	static const char *const kinds[] = {"build",	    "upload",	      "upload-delete",
					    "upload-cruft", "build-deleting", "build-remove"};

	evbuffer_add_printf(out, "builder %s (id %s), ZooKeeper %s\n", b->hostname, b->builder_id,
			    b->zk != NULL && zk_is_connected(b->zk) ? "connected"
								    : "not connected");
	evbuffer_add_printf(out,
			    "builds: %llu started, %llu ready, %llu failed; uploads: %llu "
			    "started, %llu ready, %llu failed; removed: %llu uploads, %llu builds; "
			    "passes %llu, cleanups %llu\n",
			    b->builds_started, b->builds_ready, b->builds_failed,
			    b->uploads_started, b->uploads_ready, b->uploads_failed,
			    b->deleted_uploads, b->deleted_builds, b->passes, b->cleanup_passes);
	TAILQ_FOREACH(t, &b->tasks, entry)
	evbuffer_add_printf(out, "  %s %s %s %s %s step %d\n", kinds[t->kind], t->image,
			    t->build ? t->build : "", t->provider ? t->provider : "",
			    t->upload ? t->upload : "", t->step);
	if (b->builds != NULL) {
		bpool_dump(b->builds, out);
		bpool_dump(b->uploads, out);
	}
}

int
builder_exit_code(const struct builder *b)
{
	return b->exit_code;
}

void
builder_free(struct builder *b)
{
	struct task *t;

	if (b == NULL)
		return;
	bpool_free(b->builds, 5.0);
	bpool_free(b->uploads, 5.0);
	while ((t = TAILQ_FIRST(&b->acts)) != NULL)
		bld_task_free(t);
	while ((t = TAILQ_FIRST(&b->tasks)) != NULL)
		bld_task_free(t);
	imgtree_load_cancel(b->load);
	imgtree_free(b->tree);
	zk_free(b->zk);
	while (b->comp_checks != NULL) {
		struct comp_check *c = b->comp_checks;
		b->comp_checks = c->next;
		free(c);
	}
	childproc_link_free(b->sup);
	statsd_free(b->statsd);
	event_free(b->tick_ev);
	event_free(b->soon_ev);
	strset_free(b->building);
	strset_free(b->uploading);
	np_cfg_free(b->cfg);
	free(b->component_path);
	free(b->hostname);
	free(b);
}
