/*
 * zuul_load: a load generator that plays Zuul against a launcher through
 * ZooKeeper, step by step as Zuul's code does (pythonerdog/zuul:
 * zuul/nodepool.py, zuul/zk/nodepool.py, zuul/model.py): submit a node
 * request with exactly NodeRequest.toDict's keys, wait for it to be
 * fulfilled, read each node and check its allocation, lock it, delete the
 * request, set the nodes in-use with Zuul's user_data object and write
 * them back as Node.toDict does (every key read, plus id), set them used,
 * unlock. N requests, C in flight at once.
 *
 * Prints throughput, latency from request creation to fulfilled
 * (p50/p90/p99/max), and for each --pid given, that process's peak RSS
 * (VmHWM), CPU seconds used during the run and per request, and CPU used
 * while idle for --idle seconds afterwards.
 *
 *   zuul_load -z HOSTS [--ca F --cert F --key F] -l LABEL [-n 500] [-c 20]
 *             [--pid PID ...] [--idle 5]
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "lib/core/log.h"
#include "protocol/model.h"
#include "lib/zk/zk.h"
#include "lib/core/clock.h"

struct req {
	struct load *ld;
	int idx;
	char *path;	/* /nodepool/requests/100-NNN */
	const char *id; /* its last component */
	double t_create, t_fulfilled;
	int n_nodes;
	struct zk_lock **locks;
	json_t **nodes; /* Zuul's in-memory Node of each (zuul/model.py Node) */
	int pending;
	int bad;      /* a step failed: unlock what is locked, count a failure */
	int watching; /* a one-shot watch is armed on the request znode */
	int finished; /* done: free when the armed watch fires */
	int got;      /* fulfilled or failed seen: stop re-arming */
};

/* one node of a request */
struct nctx {
	struct req *r;
	int i;
};

struct load {
	struct event_base *base;
	struct zk *zk;
	const char *label;
	const char *tenant;
	char system_id[33]; /* Zuul's system id (zuul/zk/system.py: uuid4 hex) */
	int total, conc, started, done, failed;
	double *lat;
	double t0, t1;
};

static double
wall(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static unsigned long long
rnd64(void)
{
	return ((unsigned long long)random() << 33) ^ ((unsigned long long)random() << 11) ^
	       (unsigned long long)random();
}

/* A uuid4().hex-like id (32 hex digits). */
static void
hex32(char out[33])
{
	snprintf(out, 33, "%016llx%016llx", rnd64(), rnd64());
}

static void start_one(struct load *ld);
static void watch_req(struct req *r);

static void
req_free(struct req *r)
{
	int i;

	for (i = 0; i < r->n_nodes; i++) {
		zk_lock_free(r->locks[i]); /* releases a held lock */
		json_decref(r->nodes[i]);
	}
	free(r->locks);
	free(r->nodes);
	free(r->path);
	free(r);
}

static void
req_done(struct req *r)
{
	struct load *ld = r->ld;

	if (r->bad)
		ld->failed++;
	r->finished = 1;
	if (!r->watching)
		req_free(r); /* else freed when the watch fires (the delete) */
	ld->done++;
	if (ld->done == ld->total) {
		ld->t1 = np_mono_s();
		event_base_loopexit(ld->base, NULL);
		return;
	}
	if (ld->started < ld->total)
		start_one(ld);
}

static void
node_path(struct req *r, int i, char *path, size_t size)
{
	snprintf(path, size, "%s", zk_lock_path(r->locks[i]));
	*strrchr(path, '/') = '\0';
}

/*
 * Zuul's Node.toDict: id, state, hold_job, comment, user_data, tenant_name,
 * requestor, then every other key it read, in the order read (jansson
 * keeps insertion order). node holds what updateFromDict kept plus what
 * Zuul set.
 */
static char *
zuul_to_dict(const char *id, json_t *node)
{
	static const char *const first[] = {"state",	 "hold_job",	"comment",
					    "user_data", "tenant_name", "requestor"};
	json_t *d = json_object(), *v;
	const char *k;
	size_t i;
	char *s;

	json_object_set_new(d, "id", json_string(id));
	for (i = 0; i < sizeof(first) / sizeof(first[0]); i++) {
		v = json_object_get(node, first[i]);
		json_object_set(d, first[i], v != NULL ? v : json_null());
	}
	json_object_foreach(node, k, v)
	{
		if (strcmp(k, "name") != 0 && strcmp(k, "aliases") != 0)
			json_object_set(d, k, v);
	}
	s = json_dumps(d, JSON_REAL_PRECISION(17));
	json_decref(d);
	return s;
}

/* Node.state setter: the state and a fresh state_time. */
static void
zuul_set_state(json_t *node, const char *state)
{
	json_object_set_new(node, "state", json_string(state));
	json_object_set_new(node, "state_time", json_real(wall()));
}

/* ZooKeeperNodepool.storeNode: the whole body, unversioned. */
static void
zuul_store_node(struct req *r, int i, zk_stat_cb cb)
{
	char path[128], *json;

	node_path(r, i, path, sizeof(path));
	json = zuul_to_dict(strrchr(path, '/') + 1, r->nodes[i]);
	zk_set(r->ld->zk, path, json, (int)strlen(json), -1, cb, r);
	free(json);
}

static void
node_used(int rc, const struct zk_stat *st, void *arg)
{
	struct req *r = arg;

	if (rc != ZOK)
		r->bad = 1;
	/* Nodepool.unlockNodeSet: req_free releases every lock (after the
	 * stores, in order on our session) */
	if (--r->pending == 0)
		req_done(r);
}

/* Nodepool.returnNodeSet: Zuul's own copy of each in-use node set used and
 * stored (no fresh read), then every lock released. */
static void
return_node_set(struct req *r)
{
	int i;

	r->pending = 1;
	for (i = 0; i < r->n_nodes; i++) {
		const char *st = json_string_value(json_object_get(r->nodes[i], "state"));
		if (st == NULL || strcmp(st, "in-use") != 0)
			continue;
		zuul_set_state(r->nodes[i], "used");
		r->pending++;
		zuul_store_node(r, i, node_used);
	}
	node_used(ZOK, NULL, r);
}

static void
node_in_use(int rc, const struct zk_stat *st, void *arg)
{
	struct req *r = arg;

	if (rc != ZOK)
		r->bad = 1;
	if (--r->pending == 0)
		return_node_set(r); /* the job ran */
}

/* Nodepool.useNodeSet: each node in-use with Zuul's user_data object. */
static void
use_node_set(struct req *r)
{
	int i;

	r->pending = r->n_nodes;
	for (i = 0; i < r->n_nodes; i++) {
		json_t *ud = json_pack("{s:s, s:s}", "zuul_system", r->ld->system_id,
				       "project_name", "review.example.org/org/project");
		zuul_set_state(r->nodes[i], "in-use");
		json_object_set_new(r->nodes[i], "user_data", ud);
		zuul_store_node(r, i, node_in_use);
	}
}

static void
request_deleted(int rc, void *arg)
{
	use_node_set(arg);
}

/* Nodepool._unlockNodes after a failed lockNodes; the request is deleted
 * regardless (acceptNodes). */
static void
accept_failed(struct req *r)
{
	r->bad = 1;
	zk_delete(r->ld->zk, r->path, -1, 0, NULL, NULL);
	req_done(r);
}

static void
node_locked(struct zk_lock *lock, int rc, void *arg)
{
	struct nctx *x = arg;
	struct req *r = x->r;
	const char *to = json_string_value(json_object_get(r->nodes[x->i], "allocated_to"));

	free(x);
	/* lockNodes checks allocated_to again on its copy */
	if (rc != ZOK || to == NULL || strcmp(to, r->id) != 0) {
		if (rc != ZOK)
			fprintf(stderr, "lock %s: %s\n", zk_lock_path(lock), zk_strerror(rc));
		r->bad = 1;
	}
	if (--r->pending > 0)
		return;
	if (r->bad) {
		accept_failed(r);
		return;
	}
	/* acceptNodes -> deleteNodeRequest */
	zk_delete(r->ld->zk, r->path, -1, 0, request_deleted, r);
}

/* ZooKeeperNodepool.updateNode, then lockNode(timeout=30). */
static void
node_read(int rc, const char *data, int len, const struct zk_stat *st, void *arg)
{
	struct nctx *x = arg;
	struct req *r = x->r;
	json_t *node = NULL, *v;
	const char *to;

	if (rc == ZOK && len > 0)
		node = json_loadb(data, (size_t)len, 0, NULL);
	to = json_string_value(json_object_get(node, "allocated_to"));
	if (!json_is_object(node) || (v = json_object_get(node, "state")) == NULL || to == NULL ||
	    strcmp(to, r->id) != 0) {
		/* "Node allocated to ..., not ...": nothing locked yet */
		fprintf(stderr, "node %s: not allocated to %s\n", zk_lock_path(r->locks[x->i]),
			r->id);
		json_decref(node);
		r->bad = 1;
		free(x);
		if (--r->pending == 0)
			accept_failed(r);
		return;
	}
	json_object_del(node, "name"); /* updateFromDict skips these */
	json_object_del(node, "aliases");
	r->nodes[x->i] = node;
	zk_lock_acquire(r->locks[x->i], 30.0, node_locked, x);
}

/* The executor's lockNodes -> Nodepool.acceptNodes, node by node. */
static void
fulfilled(struct req *r, const struct np_request *q)
{
	struct load *ld = r->ld;
	char path[128];
	size_t i;

	r->t_fulfilled = np_mono_s();
	ld->lat[r->idx] = r->t_fulfilled - r->t_create;
	r->n_nodes = (int)q->nodes.n;
	r->locks = calloc(q->nodes.n ? q->nodes.n : 1, sizeof(*r->locks));
	r->nodes = calloc(q->nodes.n ? q->nodes.n : 1, sizeof(*r->nodes));
	r->pending = r->n_nodes;
	if (r->n_nodes == 0) {
		zk_delete(ld->zk, r->path, -1, 0, NULL, NULL);
		req_done(r);
		return;
	}
	for (i = 0; i < q->nodes.n; i++) {
		struct nctx *x = calloc(1, sizeof(*x));
		x->r = r;
		x->i = (int)i;
		snprintf(path, sizeof(path), "/nodepool/nodes/%s/lock", q->nodes.v[i]);
		r->locks[i] = zk_lock_new(ld->zk, path, NULL, 0);
		snprintf(path, sizeof(path), "/nodepool/nodes/%s", q->nodes.v[i]);
		zk_get(ld->zk, path, NULL, NULL, node_read, x);
	}
}

static void
req_read(int rc, const char *data, int len, const struct zk_stat *st, void *arg)
{
	struct req *r = arg;
	struct np_request *q = NULL;
	char err[128];

	r->watching = rc == ZOK; /* a successful read left a watch armed */
	if (r->got) {
		/* a read after the outcome was seen: only the watch matters */
		if (r->finished && !r->watching)
			req_free(r);
		return;
	}

	if (rc != ZOK || np_request_decode(NULL, data, (size_t)len, &q, err, sizeof(err)) != 0) {
		fprintf(stderr, "request %s: %s\n", r->path, rc != ZOK ? zk_strerror(rc) : err);
		r->bad = 1;
		req_done(r);
		np_request_free(q);
		return;
	}
	if (q->state == NP_REQ_FULFILLED) {
		r->got = 1;
		fulfilled(r, q);
	} else if (q->state == NP_REQ_FAILED) {
		r->got = 1;
		fprintf(stderr, "request %s failed\n", r->path);
		r->bad = 1;
		r->ld->lat[r->idx] = np_mono_s() - r->t_create;
		zk_delete(r->ld->zk, r->path, -1, 0, NULL, NULL);
		req_done(r);
	}
	/* else: the watch set by this read fires on the next change */
	np_request_free(q);
}

static void
req_watch(int type, const char *path, void *arg)
{
	struct req *r = arg;

	r->watching = 0;
	if (r->got) {
		if (r->finished)
			req_free(r);
		return;
	}
	watch_req(r);
}

static void
watch_req(struct req *r)
{
	zk_get(r->ld->zk, r->path, req_watch, r, req_read, r);
}

static void
req_created(int rc, const char *path, void *arg)
{
	struct req *r = arg;

	if (rc != ZOK) {
		fprintf(stderr, "create: %s\n", zk_strerror(rc));
		r->bad = 1;
		req_done(r);
		return;
	}
	r->path = strdup(path);
	r->id = strrchr(r->path, '/') + 1;
	watch_req(r);
}

/*
 * Nodepool.requestNodes -> ZooKeeperNodepool.submitNodeRequest: the body is
 * NodeRequest.toDict() of a new request, exactly its keys in its order;
 * requestor_data carries the saved span (tracing.getSpanInfo), whose
 * trace_id is a 128-bit integer, written as Python writes it.
 */
static char *
zuul_request_body(struct load *ld)
{
	char bs[33], ju[33], ev[33], trace[64], *s, *at, *out;
	double created = wall();
	unsigned __int128 t = ((unsigned __int128)rnd64() << 64) | rnd64();
	int k = 0;
	json_t *d;
	char digits[64];

	hex32(bs);
	hex32(ju);
	hex32(ev);
	do
		digits[k++] = (char)('0' + (int)(t % 10));
	while ((t /= 10) != 0);
	for (int i = 0; i < k; i++)
		trace[i] = digits[k - 1 - i];
	trace[k] = '\0';
	d = json_pack("{s:{s:s, s:s, s:s, s:s, s:s, s:{s:s, s:s, s:I, s:i, s:I, s:n}}, "
		      "s:[s], s:s, s:f, s:n, s:s, s:f, s:i, s:s, s:s}",
		      "requestor_data", "build_set_uuid", bs, "tenant_name", ld->tenant,
		      "pipeline_name", "check", "job_uuid", ju, "job_name", "load-job", "span_info",
		      "name", "RequestNodes", "trace_id", "@TRACE@", "span_id",
		      (json_int_t)(rnd64() >> 1), "trace_flags", 1, "start_time",
		      (json_int_t)(created * 1e9), "parent", "node_types", ld->label, "requestor",
		      ld->system_id, "created_time", created, "provider", "state", "requested",
		      "state_time", wall(), "relative_priority", 0, "event_id", ev, "tenant_name",
		      ld->tenant);
	s = json_dumps(d, JSON_REAL_PRECISION(17));
	json_decref(d);
	at = strstr(s, "\"@TRACE@\"");
	out = malloc(strlen(s) + sizeof(trace));
	memcpy(out, s, (size_t)(at - s));
	strcpy(out + (at - s), trace);
	strcat(out, at + strlen("\"@TRACE@\""));
	free(s);
	return out;
}

static void
start_one(struct load *ld)
{
	struct req *r = calloc(1, sizeof(*r));
	char *json;

	r->ld = ld;
	r->idx = ld->started++;
	json = zuul_request_body(ld);
	r->t_create = np_mono_s();
	/* '{}/{:0>3}-' sequential, persistent (Zuul's priority 100) */
	zk_create(ld->zk, "/nodepool/requests/100-", json, (int)strlen(json), ZOO_SEQUENCE, 1,
		  req_created, r);
	free(json);
}

static int
dcmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void
proc_stats(int pid, long *hwm_kb, double *cpu_s)
{
	char path[64], line[256];
	FILE *f;
	unsigned long ut = 0, st = 0;

	*hwm_kb = -1;
	*cpu_s = -1;
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if ((f = fopen(path, "r")) != NULL) {
		while (fgets(line, sizeof(line), f))
			if (strncmp(line, "VmHWM:", 6) == 0)
				*hwm_kb = strtol(line + 6, NULL, 10);
		fclose(f);
	}
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if ((f = fopen(path, "r")) != NULL) {
		if (fgets(line, sizeof(line), f)) {
			char *p = strrchr(line, ')');
			if (p &&
			    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
				   &ut, &st) == 2)
				*cpu_s = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
		}
		fclose(f);
	}
}

static void
on_session(struct zk *zk, enum zk_event ev, void *arg)
{
}

int
main(int argc, char **argv)
{
	struct load ld;
	struct zk_options opt;
	const char *hosts = NULL;
	int pids[16], npids = 0, c, i;
	double idle = 5, cpu0[16], cpu1[16], cpu2[16];
	long hwm[16];
	char err[256];
	static const struct option lo[] = {
	    {"ca", required_argument, NULL, 'A'},   {"cert", required_argument, NULL, 'C'},
	    {"key", required_argument, NULL, 'K'},  {"pid", required_argument, NULL, 'P'},
	    {"idle", required_argument, NULL, 'I'}, {NULL, 0, NULL, 0},
	};

	memset(&ld, 0, sizeof(ld));
	memset(&opt, 0, sizeof(opt));
	ld.total = 500;
	ld.conc = 20;
	ld.label = "small";
	ld.tenant = "tenant-one";
	srandom((unsigned)(time(NULL) ^ getpid()));
	hex32(ld.system_id);
	log_init("zuul_load", LOG_LVL_WARN);
	while ((c = getopt_long(argc, argv, "z:l:n:c:", lo, NULL)) != -1) {
		switch (c) {
		case 'z':
			hosts = optarg;
			break;
		case 'l':
			ld.label = optarg;
			break;
		case 'n':
			ld.total = atoi(optarg);
			break;
		case 'c':
			ld.conc = atoi(optarg);
			break;
		case 'A':
			opt.tls_ca = optarg;
			break;
		case 'C':
			opt.tls_cert = optarg;
			break;
		case 'K':
			opt.tls_key = optarg;
			break;
		case 'P':
			if (npids < 16)
				pids[npids++] = atoi(optarg);
			break;
		case 'I':
			idle = atof(optarg);
			break;
		default:
			fprintf(stderr, "usage: zuul_load -z HOSTS [-l LABEL] [-n N] [-c C] "
					"[--ca F --cert F --key F] [--pid PID]... [--idle S]\n");
			return 2;
		}
	}
	if (hosts == NULL || ld.total <= 0 || ld.conc <= 0)
		return 2;
	opt.hosts = hosts;
	ld.base = event_base_new();
	ld.zk = zk_new(ld.base, &opt, on_session, &ld, err, sizeof(err));
	if (ld.zk == NULL) {
		fprintf(stderr, "zk: %s\n", err);
		return 1;
	}
	if (zk_wait_connected(ld.zk, 15) != ZOK) {
		fprintf(stderr, "zk: could not connect to %s\n", hosts);
		return 1;
	}
	ld.lat = calloc((size_t)ld.total, sizeof(double));
	for (i = 0; i < npids; i++) {
		double x;
		proc_stats(pids[i], &hwm[i], &x);
		cpu0[i] = x;
	}
	ld.t0 = np_mono_s();
	for (i = 0; i < ld.conc && i < ld.total; i++)
		start_one(&ld);
	event_base_dispatch(ld.base);
	for (i = 0; i < npids; i++)
		proc_stats(pids[i], &hwm[i], &cpu1[i]);
	qsort(ld.lat, (size_t)ld.total, sizeof(double), dcmp);
	printf("requests: %d at concurrency %d, %d failed\n", ld.total, ld.conc, ld.failed);
	printf("throughput: %.1f requests/s (%.2f s)\n", ld.total / (ld.t1 - ld.t0), ld.t1 - ld.t0);
	printf("latency request->fulfilled: p50 %.1f ms  p90 %.1f ms  p99 %.1f ms  max %.1f ms\n",
	       ld.lat[ld.total / 2] * 1e3, ld.lat[ld.total * 9 / 10] * 1e3,
	       ld.lat[ld.total * 99 / 100] * 1e3, ld.lat[ld.total - 1] * 1e3);
	if (npids > 0 && idle > 0)
		usleep((useconds_t)(idle * 1e6));
	for (i = 0; i < npids; i++) {
		long h2;
		proc_stats(pids[i], &h2, &cpu2[i]);
		printf("pid %d: peak RSS %.1f MiB, CPU %.3f s (%.3f ms/request), idle CPU %.1f ms "
		       "over %.0f s\n",
		       pids[i], (double)h2 / 1024.0, cpu1[i] - cpu0[i],
		       (cpu1[i] - cpu0[i]) * 1e3 / ld.total, (cpu2[i] - cpu1[i]) * 1e3, idle);
	}
	zk_free(ld.zk);
	event_base_free(ld.base);
	free(ld.lat);
	return ld.failed ? 1 : 0;
}
