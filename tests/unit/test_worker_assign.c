/*
 * worker/assign.c's decisions, one request at a time, against a fake driver
 * the test hosts: which requests a pool leaves to another launcher's pool,
 * which it declines and with what reason (labels, error labels, images,
 * max-servers, the driver's label capacity), and which a tenant's resource
 * limits defer. Requests and pool components are decoded from the JSON
 * records ZooKeeper holds (upstream's shapes); the reasons are the texts a
 * user reads in the request's declined_by log and in nodepool's logs.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "worker/launcher.h"
#include "protocol/model.h"

/* ---- the fake driver ---------------------------------------------------------- */

struct drv_provider {
	const char *error_label;   /* label_error: this one is unusable */
	const char *unready_label; /* label_ready: this one has no image yet */
	long capacity;		   /* label_capacity, for every label (-1 = unlimited) */
	int cores_per_node;	   /* label_quota: cores of every label */
	char last_pool[32];	   /* the pool name the driver was asked about */
};

static int
fake_label_error(struct drv_provider *dp, const char *label)
{
	return dp->error_label != NULL && strcmp(label, dp->error_label) == 0;
}

static int
fake_label_ready(struct drv_provider *dp, const char *label)
{
	return dp->unready_label == NULL || strcmp(label, dp->unready_label) != 0;
}

static long
fake_label_capacity(struct drv_provider *dp, const char *pool, const char *label)
{
	snprintf(dp->last_pool, sizeof(dp->last_pool), "%s", pool);
	return dp->capacity;
}

static void
fake_label_quota(struct drv_provider *dp, const char *pool, const char *label,
		 struct drv_quota *out)
{
	snprintf(dp->last_pool, sizeof(dp->last_pool), "%s", pool);
	drv_quota_init(out, dp->cores_per_node, 1, 1024);
}

static const struct driver fake_driver = {
    .name = "unit-fake",
    .label_error = fake_label_error,
    .label_ready = fake_label_ready,
    .label_capacity = fake_label_capacity,
    .label_quota = fake_label_quota,
};

/* A provider "rax" with one pool "main" (labels small, large; launcher id
 * "rax-main-1"), hosted on the fake driver. */
struct world {
	struct launcher lc;
	struct lc_pool pool;
	struct drv_provider dp;
};

static void
world_init(struct world *w)
{
	memset(w, 0, sizeof(*w));
	w->dp.capacity = -1;
	w->dp.cores_per_node = 2;
	w->lc.prov.lc = &w->lc;
	w->lc.prov.name = "rax";
	w->lc.prov.drv = &fake_driver;
	w->lc.prov.dp = &w->dp;
	w->lc.prov.pools = &w->pool;
	w->lc.prov.n_pools = 1;
	w->pool.prov = &w->lc.prov;
	w->pool.name = "main";
	w->pool.max_servers = -1;
	w->pool.priority = 100;
	w->pool.launcher_id = "rax-main-1";
	np_strv_push(&w->pool.labels, "small");
	np_strv_push(&w->pool.labels, "large");
}

static void
world_fini(struct world *w)
{
	np_strv_clear(&w->pool.labels);
}

static struct np_request *
request(const char *json)
{
	struct np_request *r = NULL;
	char err[256];

	cr_assert_eq(np_request_decode("200-0000000001", json, strlen(json), &r, err, sizeof(err)),
		     0, "%s", err);
	return r;
}

static struct np_component *
component(const char *json)
{
	struct np_component *c = NULL;
	char err[256];

	cr_assert_eq(np_component_decode("pool-x", json, strlen(json), &c, err, sizeof(err)), 0,
		     "%s", err);
	return c;
}

/* ---- decline ------------------------------------------------------------------ */

Test(worker_assign, a_request_the_pool_can_serve_is_not_declined)
{
	struct world w;
	struct np_request *r;

	world_init(&w);
	r = request("{\"state\": \"requested\", \"node_types\": [\"small\", \"large\"]}");
	cr_assert_null(lc_assign_decline_reason(&w.pool, r));
	cr_assert_str_eq(w.dp.last_pool, "main", "the capacity is asked by pool name (-1: none)");
	np_request_free(r);
	world_fini(&w);
}

Test(worker_assign, a_disabled_pool_declines_everything)
{
	struct world w;
	struct np_request *r;

	world_init(&w);
	w.pool.max_servers = 0;
	r = request("{\"state\": \"requested\", \"node_types\": [\"small\"]}");
	cr_assert_str_eq(lc_assign_decline_reason(&w.pool, r), "pool is disabled");
	np_request_free(r);
	world_fini(&w);
}

Test(worker_assign, labels_the_pool_lacks_are_named)
{
	struct world w;
	struct np_request *r;

	world_init(&w);
	r = request("{\"state\": \"requested\", \"node_types\": [\"small\", \"gpu\", \"arm\"]}");
	cr_assert_str_eq(lc_assign_decline_reason(&w.pool, r),
			 "node type(s) [gpu, arm] not available");
	np_request_free(r);
	world_fini(&w);
}

Test(worker_assign, a_driver_error_label_is_not_available)
{
	struct world w;
	struct np_request *r;

	world_init(&w);
	w.dp.error_label = "large";
	r = request("{\"state\": \"requested\", \"node_types\": [\"small\", \"large\"]}");
	cr_assert_str_eq(lc_assign_decline_reason(&w.pool, r),
			 "node type(s) [large] not available");
	np_request_free(r);
	world_fini(&w);
}

Test(worker_assign, a_label_without_its_image_declines)
{
	struct world w;
	struct np_request *r;

	world_init(&w);
	w.dp.unready_label = "large";
	r = request("{\"state\": \"requested\", \"node_types\": [\"large\"]}");
	cr_assert_str_eq(lc_assign_decline_reason(&w.pool, r), "images are not available");
	np_request_free(r);
	world_fini(&w);
}

Test(worker_assign, more_nodes_than_max_servers_would_exceed_quota)
{
	struct world w;
	struct np_request *r;

	world_init(&w);
	w.pool.max_servers = 2;
	r = request("{\"state\": \"requested\", \"node_types\": [\"small\", \"small\"]}");
	cr_assert_null(lc_assign_decline_reason(&w.pool, r), "two nodes fit in max-servers 2");
	np_request_free(r);
	r = request(
	    "{\"state\": \"requested\", \"node_types\": [\"small\", \"small\", \"large\"]}");
	cr_assert_str_eq(lc_assign_decline_reason(&w.pool, r), "it would exceed quota");
	np_request_free(r);
	world_fini(&w);
}

Test(worker_assign, more_of_a_label_than_the_driver_can_hold_would_exceed_quota)
{
	struct world w;
	struct np_request *r;

	world_init(&w);
	w.dp.capacity = 1; /* e.g. one static host with max-parallel-jobs 1 */
	r = request("{\"state\": \"requested\", \"node_types\": [\"small\", \"large\"]}");
	cr_assert_null(lc_assign_decline_reason(&w.pool, r), "one of each label fits");
	cr_assert_str_eq(w.dp.last_pool, "main", "the driver is asked about the pool by name");
	np_request_free(r);
	r = request("{\"state\": \"requested\", \"node_types\": [\"small\", \"small\"]}");
	cr_assert_str_eq(lc_assign_decline_reason(&w.pool, r), "it would exceed quota");
	np_request_free(r);
	world_fini(&w);
}

/* ---- assign: taken here, or left to another launcher's pool ------------------- */

#define OTHER_POOL(prov, prio, paused, labels)                                                     \
	"{\"kind\": \"pool\", \"id\": \"" prov "-main-9\", \"name\": \"main\", "                   \
	"\"provider_name\": \"" prov "\", \"priority\": " #prio ", \"paused\": " paused            \
	", \"supported_labels\": " labels "}"

static const char *
defer(struct world *w, const char *req_json, const char *comp_json)
{
	struct np_request *r = request(req_json);
	struct np_component *c[2];
	const char *why;
	int n = 0;

	c[n++] = component("{\"kind\": \"pool\", \"id\": \"rax-main-1\", \"name\": \"main\", "
			   "\"provider_name\": \"rax\", \"supported_labels\": [\"small\", "
			   "\"large\"]}");
	if (comp_json != NULL)
		c[n++] = component(comp_json);
	why = lc_assign_defer_reason(&w->pool, r, (const struct np_component *const *)c, n);
	while (n > 0)
		np_component_free(c[--n]);
	np_request_free(r);
	return why;
}

Test(worker_assign, alone_the_pool_takes_every_request)
{
	struct world w;

	world_init(&w);
	cr_assert_null(defer(&w, "{\"node_types\": [\"small\"]}", NULL));
	/* even one it lacks labels for: it is taken, to be declined */
	cr_assert_null(defer(&w, "{\"node_types\": [\"gpu\"]}", NULL));
	/* and one naming another provider nobody serves */
	cr_assert_null(defer(&w, "{\"node_types\": [\"small\"], \"provider\": \"ovh\"}", NULL));
	world_fini(&w);
}

Test(worker_assign, a_request_naming_another_provider_is_left_to_it)
{
	struct world w;

	world_init(&w);
	cr_assert_str_eq(defer(&w, "{\"node_types\": [\"small\"], \"provider\": \"ovh\"}",
			       OTHER_POOL("ovh", 100, "false", "[\"small\"]")),
			 "the requested provider can serve it");
	/* not when the named provider lacks the label */
	cr_assert_null(defer(&w, "{\"node_types\": [\"large\"], \"provider\": \"ovh\"}",
			     OTHER_POOL("ovh", 100, "false", "[\"small\"]")));
	/* nor when it is us */
	cr_assert_null(defer(&w, "{\"node_types\": [\"small\"], \"provider\": \"rax\"}",
			     OTHER_POOL("ovh", 100, "false", "[\"small\"]")));
	world_fini(&w);
}

Test(worker_assign, a_higher_priority_pool_that_is_not_paused_goes_first)
{
	struct world w;

	world_init(&w);
	cr_assert_str_eq(defer(&w, "{\"node_types\": [\"small\"]}",
			       OTHER_POOL("ovh", 50, "false", "[\"small\"]")),
			 "a higher-priority pool can serve it");
	cr_assert_null(defer(&w, "{\"node_types\": [\"small\"]}",
			     OTHER_POOL("ovh", 50, "true", "[\"small\"]")),
		       "a paused pool does not hold requests back");
	cr_assert_null(defer(&w, "{\"node_types\": [\"small\"]}",
			     OTHER_POOL("ovh", 200, "false", "[\"small\"]")),
		       "a lower-priority pool does not either");
	cr_assert_null(defer(&w, "{\"node_types\": [\"small\"], \"declined_by\": [\"ovh-main-9\"]}",
			     OTHER_POOL("ovh", 50, "false", "[\"small\"]")),
		       "nor one that already declined the request");
	world_fini(&w);
}

Test(worker_assign, a_request_we_lack_labels_for_goes_to_a_pool_with_them_all)
{
	struct world w;

	world_init(&w);
	cr_assert_str_eq(defer(&w, "{\"node_types\": [\"small\", \"gpu\"]}",
			       OTHER_POOL("ovh", 100, "false", "[\"small\", \"gpu\"]")),
			 "a pool with every label can serve it");
	cr_assert_null(defer(&w, "{\"node_types\": [\"small\", \"gpu\"]}",
			     OTHER_POOL("ovh", 100, "false", "[\"gpu\"]")),
		       "no other pool has every label: ours takes it (and declines it)");
	world_fini(&w);
}

/* ---- tenant limits ------------------------------------------------------------ */

static int
fits(struct world *w, double max_cores, double max_instances, double used_cores,
     double used_instances, const char *req_json)
{
	struct lc_tenant_limit tl = {.tenant = "tenant-a"};
	struct drv_quota used;
	struct np_request *r = request(req_json);
	int ok;

	drv_quota_unlimited(&tl.limits);
	tl.limits.cores = max_cores;
	tl.limits.instances = max_instances;
	drv_quota_init(&used, used_cores, used_instances, 0);
	ok = lc_assign_tenant_fits(&w->pool, &tl, &used, r);
	np_request_free(r);
	return ok;
}

Test(worker_assign, a_tenant_within_its_limits_is_served)
{
	struct world w;

	world_init(&w); /* every label: 2 cores, 1 instance */
	cr_assert(fits(&w, 8, INFINITY, 4, 2, "{\"node_types\": [\"small\", \"large\"]}"),
		  "4 cores used + 2 x 2 needed = 8: exactly at the limit is allowed");
	cr_assert_str_eq(w.dp.last_pool, "main");
	cr_assert(fits(&w, INFINITY, INFINITY, 1000, 500, "{\"node_types\": [\"small\"]}"),
		  "no limit set: unlimited");
	world_fini(&w);
}

Test(worker_assign, a_tenant_over_its_limits_is_deferred)
{
	struct world w;

	world_init(&w);
	cr_assert_not(fits(&w, 8, INFINITY, 6, 3, "{\"node_types\": [\"small\", \"large\"]}"),
		      "6 cores used + 4 needed > 8");
	cr_assert_not(fits(&w, INFINITY, 3, 0, 2, "{\"node_types\": [\"small\", \"small\"]}"),
		      "2 instances used + 2 > max-servers 3");
	w.dp.cores_per_node = 0; /* a driver whose labels take no cores */
	cr_assert(fits(&w, 8, INFINITY, 8, 3, "{\"node_types\": [\"small\"]}"));
	world_fini(&w);
}

Test(worker_assign, without_label_quota_each_node_is_one_instance)
{
	static const struct driver no_quota_driver = {.name = "unit-bare"};
	struct world w;

	world_init(&w);
	w.lc.prov.drv = &no_quota_driver;
	cr_assert(fits(&w, 0, 2, 0, 1, "{\"node_types\": [\"small\"]}"),
		  "1 used + 1 = 2 instances; no cores asked for");
	cr_assert_not(fits(&w, 0, 2, 0, 1, "{\"node_types\": [\"small\", \"large\"]}"));
	world_fini(&w);
}

/* ---- a launch's end, as upstream names it in statsd and /metrics --------------- */

Test(worker_assign, launch_results_have_upstreams_names)
{
	cr_assert_str_eq(lc_launch_result_key(DRV_LAUNCH_READY), "ready");
	cr_assert_str_eq(lc_launch_result_key(DRV_LAUNCH_ABORTED), "error.quota");
	cr_assert_str_eq(lc_launch_result_key(DRV_LAUNCH_FAILED), "error.unknown");
}
