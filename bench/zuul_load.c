/*
 * zuul_load: a load generator that plays Zuul against a launcher through
 * ZooKeeper, as zuul/zk/nodepool.py does: submit a node request, wait for
 * it to be fulfilled, lock its nodes, set them in-use, delete the request,
 * set them used, unlock. N requests, C in flight at once.
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

#include "log.h"
#include "model.h"
#include "zk.h"

struct req {
	struct load *ld;
	int idx;
	char *path; /* /nodepool/requests/100-NNN */
	double t_create, t_fulfilled;
	int n_nodes;
	struct zk_lock **locks;
	int pending;
	int watching; /* a one-shot watch is armed on the request znode */
	int finished; /* done: free when the armed watch fires */
	int got;      /* fulfilled or failed seen: stop re-arming */
};

/* one node of a request: which lock (and so which znode) */
struct nctx {
	struct req *r;
	int i;
};

struct load {
	struct event_base *base;
	struct zk *zk;
	const char *label;
	int total, conc, started, done, failed;
	double *lat;
	double t0, t1;
};

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void start_one(struct load *ld);
static void watch_req(struct req *r);

static void
req_free(struct req *r)
{
	int i;

	for (i = 0; i < r->n_nodes; i++)
		zk_lock_free(r->locks[i]);
	free(r->locks);
	free(r->path);
	free(r);
}

static void
req_done(struct req *r)
{
	struct load *ld = r->ld;

	r->finished = 1;
	if (!r->watching)
		req_free(r); /* else freed when the watch fires (the delete) */
	ld->done++;
	if (ld->done == ld->total) {
		ld->t1 = now();
		event_base_loopexit(ld->base, NULL);
		return;
	}
	if (ld->started < ld->total)
		start_one(ld);
}

static void
node_used(int rc, const struct zk_stat *st, void *arg)
{
	struct req *r = arg;

	if (--r->pending == 0) {
		/* unlock (release is ordered after the stores on our session) */
		req_done(r);
	}
}

static void
node_read_used(int rc, const char *data, int len, const struct zk_stat *st, void *arg)
{
	struct nctx *x = arg;
	struct req *r = x->r;
	struct np_node *n = NULL;
	char err[128], path[128];
	size_t jl;
	char *json;

	snprintf(path, sizeof(path), "%s", zk_lock_path(r->locks[x->i]));
	*strrchr(path, '/') = '\0';
	free(x);
	if (rc != ZOK || np_node_decode(NULL, data, (size_t)len, &n, err, sizeof(err)) != 0) {
		node_used(rc, NULL, r);
		return;
	}
	np_node_set_state(n, NP_NODE_USED);
	json = np_node_encode(n, &jl);
	zk_set(r->ld->zk, path, json, (int)jl, -1, node_used, r);
	free(json);
	np_node_free(n);
}

/* in-use -> (job) -> used, for every node, then unlock */
static void
finish_nodes(struct req *r)
{
	int i;
	char path[128];

	r->pending = r->n_nodes;
	for (i = 0; i < r->n_nodes; i++) {
		struct nctx *x = calloc(1, sizeof(*x));
		x->r = r;
		x->i = i;
		snprintf(path, sizeof(path), "%s", zk_lock_path(r->locks[i]));
		*strrchr(path, '/') = '\0';
		zk_get(r->ld->zk, path, NULL, NULL, node_read_used, x);
	}
}

static void
request_deleted(int rc, void *arg)
{
	finish_nodes(arg);
}

static void
node_in_use(int rc, const struct zk_stat *st, void *arg)
{
	struct req *r = arg;

	if (--r->pending == 0)
		zk_delete(r->ld->zk, r->path, -1, 0, request_deleted, r);
}

static void
node_read(int rc, const char *data, int len, const struct zk_stat *st, void *arg)
{
	struct nctx *x = arg;
	struct req *r = x->r;
	struct np_node *n = NULL;
	char err[128], path[128];
	char *json;
	size_t jl;

	snprintf(path, sizeof(path), "%s", zk_lock_path(r->locks[x->i]));
	*strrchr(path, '/') = '\0';
	free(x);
	if (rc != ZOK || np_node_decode(NULL, data, (size_t)len, &n, err, sizeof(err)) != 0) {
		node_in_use(rc, NULL, r);
		return;
	}
	np_node_set_state(n, NP_NODE_IN_USE);
	json = np_node_encode(n, &jl);
	zk_set(r->ld->zk, path, json, (int)jl, -1, node_in_use, r);
	free(json);
	np_node_free(n);
}

static void
node_locked(struct zk_lock *lock, int rc, void *arg)
{
	struct nctx *x = arg;
	char path[128];

	if (rc != ZOK) {
		fprintf(stderr, "lock %s: %s\n", zk_lock_path(lock), zk_strerror(rc));
		x->r->ld->failed++;
	}
	snprintf(path, sizeof(path), "%s", zk_lock_path(lock));
	*strrchr(path, '/') = '\0';
	zk_get(x->r->ld->zk, path, NULL, NULL, node_read, x);
}

static void
fulfilled(struct req *r, const struct np_request *q)
{
	struct load *ld = r->ld;
	char path[128];
	size_t i;

	r->t_fulfilled = now();
	ld->lat[r->idx] = r->t_fulfilled - r->t_create;
	r->n_nodes = (int)q->nodes.n;
	r->locks = calloc(q->nodes.n ? q->nodes.n : 1, sizeof(*r->locks));
	r->pending = r->n_nodes;
	if (r->n_nodes == 0) {
		zk_delete(ld->zk, r->path, -1, 0, NULL, NULL);
		req_done(r);
		return;
	}
	for (i = 0; i < q->nodes.n; i++) {
		snprintf(path, sizeof(path), "/nodepool/nodes/%s/lock", q->nodes.v[i]);
		struct nctx *x = calloc(1, sizeof(*x));
		x->r = r;
		x->i = (int)i;
		r->locks[i] = zk_lock_new(ld->zk, path, NULL, 0);
		zk_lock_acquire(r->locks[i], 30.0, node_locked, x);
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
		r->ld->failed++;
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
		r->ld->failed++;
		r->ld->lat[r->idx] = now() - r->t_create;
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
		r->ld->failed++;
		req_done(r);
		return;
	}
	r->path = strdup(path);
	watch_req(r);
}

static void
start_one(struct load *ld)
{
	struct req *r = calloc(1, sizeof(*r));
	struct np_request *q = np_request_new();
	char *json;
	size_t len;

	r->ld = ld;
	r->idx = ld->started++;
	np_request_set_state(q, NP_REQ_REQUESTED);
	np_strv_push(&q->node_types, ld->label);
	q->requestor = strdup("zuul-load");
	q->created_time = (double)time(NULL);
	q->has_created_time = 1;
	json = np_request_encode(q, &len);
	r->t_create = now();
	zk_create(ld->zk, "/nodepool/requests/100-", json, (int)len, ZOO_SEQUENCE, 1, req_created,
		  r);
	free(json);
	np_request_free(q);
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
	ld.t0 = now();
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
