/*
 * nodepool-web's compact node records (lib/ops/nodeview.h) show exactly
 * what the full records show: /node-list (JSON, text, fields=, node_id=),
 * /metrics, /label-list and /request-list rendered from the compact form
 * and from the records themselves are the same bytes, for the golden
 * records of tests/data/golden (as upstream and Zuul write them) and a
 * fleet of records of unexpected shape.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "lib/zk/cachecodec.h"
#include "lib/ops/metrics.h"
#include "protocol/model.h"
#include "lib/ops/nodeview.h"
#include "lib/ops/status.h"
#include "tests/support/testzk.h"
#include "lib/zk/zk.h"

/* Records of odd shapes: every field a node-list row shows, with values
 * of unexpected types, odd numbers, Unicode, NUL, nesting, nulls. */
static const char *const varied[] = {
    "{}",
    "{\"state\": null, \"provider\": null, \"type\": null, \"user_data\": null}",
    "{\"state\": \"no-such-state\", \"provider\": 7, \"pool\": [1, 2], \"hostname\": {\"a\": 1}, "
    "\"hold_job\": 3.5, \"comment\": true, \"type\": [\"a\", \"b\", \"a\"]}",
    "{\"state\": 12, \"type\": [1, null, \"x\"], \"az\": \"\", \"username\": \"\"}",
    "{\"state\": \"ready\", \"external_id\": {\"instance\": \"i-0abc\", \"host\": null}, "
    "\"connection_port\": {\"token\": \"s3cr3t\", \"ca_crt\": \"--\"}}",
    "{\"state\": \"in-use\", \"connection_port\": \"2222\", \"ssh_port\": 22}",
    "{\"state\": \"in-use\", \"ssh_port\": 2200}",
    "{\"state\": \"hold\", \"comment\": \"h\\u00e9ld \\u4e2d\\u6587 \\ud83d\\ude00\", "
    "\"hold_job\": \"tenant/project/job\\nline2\", \"hold_expiration\": \"1_000\"}",
    "{\"state\": \"ready\", \"hostname\": \"a\\u0000b\", \"comment\": \"x\\u0000\"}",
    "{\"state\": \"used\", \"state_time\": \"1700000000\", \"created_time\": 1e400}",
    "{\"state\": \"used\", \"state_time\": -12.75, \"user_data\": {\"f\": 0.1, \"g\": "
    "1.0000000000000002, \"h\": -0.0, \"big\": 123456789012345678901234567890, \"neg\": "
    "-98765432109876543210, \"e\": 1e-300, \"nest\": [[], {}, [null, true, false]]}}",
    "{\"state\": \"deleting\", \"driver_data\": \"just a string\", \"user_data\": [1, \"two\"], "
    "\"external_id\": 42}",
    "{\"state\": \"ready\", \"external_id\": 99999999999999999999999, \"driver_data\": "
    "{\"z\": 1, \"a\": 2, \"m\": {\"k\": [1.5, 2.25]}}}",
    "{\"state\": \"building\", \"provider\": \"p\\\"q\\\\r\", \"pool\": \"\\t\", "
    "\"launcher\": \"host-\\u00fc\", \"public_ipv4\": \"203.0.113.9\", \"public_ipv6\": "
    "\"2001:db8::1\", \"private_ipv4\": 10, \"allocated_to\": \"200-0000000001\"}",
    "{\"state\": \"ready\", \"type\": \"one-label\", \"connection_port\": 70000}",
    "{\"state\": \"ready\", \"connection_port\": -1, \"state_time\": 1e300}",
    "{\"state\": \"failed\", \"provider\": \"cloud-a\", \"pool\": \"main\", \"extra_key\": "
    "{\"x\": 1}, \"attributes\": {\"a\": 1}, \"host_keys\": [\"ssh-rsa AAA\"]}",
    "{\"state\": \"aborted\", \"user_data\": {\"zuul_system\": \"abc\", \"project_name\": "
    "\"org/\\u00e5\"}, \"comment\": null, \"hold_job\": null}",
    "{\"state\": [\"ready\"], \"provider\": {\"x\": \"y\"}, \"hostname\": 1.5e10}",
    "{\"state\": \"in-use\", \"state_time\": true, \"hold_job\": [], \"comment\": {}}",
};

static char *
slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	cr_assert_not_null(f, "%s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* Every record: the golden node records, then the varied ones. */
static size_t
records(char ***out)
{
	DIR *d = opendir("tests/data/golden");
	struct dirent *de;
	char **r = calloc(256, sizeof(*r)), path[512];
	size_t n = 0, i, len;

	cr_assert_not_null(d);
	while ((de = readdir(d)) != NULL && n < 200)
		if (strncmp(de->d_name, "node-", 5) == 0 && strstr(de->d_name, ".json") != NULL) {
			snprintf(path, sizeof(path), "tests/data/golden/%s", de->d_name);
			r[n++] = slurp(path, &len);
		}
	closedir(d);
	cr_assert_geq(n, 10, "the golden node records");
	for (i = 0; i < sizeof(varied) / sizeof(varied[0]); i++)
		r[n++] = strdup(varied[i]);
	*out = r;
	return n;
}

static void
same_table(const struct status_table *a, const struct status_table *b, const char *what)
{
	static const char *const csv[] = {NULL, "id,state,label,age", "provider,pool,comment",
					  "server_id,connection_port,user_data,driver_data", ""};
	char *x = status_json(a), *y = status_json(b);
	size_t i;

	cr_assert_str_eq(x, y, "%s: JSON", what);
	free(x);
	free(y);
	for (i = 0; i < sizeof(csv) / sizeof(csv[0]); i++) {
		x = status_text_csv(a, csv[i], 1800000000.0);
		y = status_text_csv(b, csv[i], 1800000000.0);
		cr_assert_str_eq(x, y, "%s: text, fields %s", what, csv[i] ? csv[i] : "(all)");
		free(x);
		free(y);
	}
}

Test(nodeview, rows_are_those_of_the_full_record)
{
	char **recs;
	size_t n = records(&recs), i, decoded = 0, whole = 0, held = 0;

	for (i = 0; i < n; i++) {
		struct np_node *nd = NULL;
		struct np_node_view *v;
		struct status_table *a = status_table_new(STATUS_NODE_LIST);
		struct status_table *b = status_table_new(STATUS_NODE_LIST);
		char err[256], what[64];
		int taken;

		if (np_node_decode("0000000042", recs[i], strlen(recs[i]), &nd, err, sizeof(err)) !=
		    0) {
			free(recs[i]);
			continue; /* malformed: skipped by both forms */
		}
		decoded++;
		v = np_node_view_new(nd, &taken);
		whole += taken;
		if (nd->state == NP_NODE_HOLD) {
			/* the status page shows a held node's expiry: kept whole */
			held++;
			cr_assert(taken && np_node_view_whole(v) == nd);
		}
		status_add_node(a, nd, (int)(i % 3), 1800000000.0);
		status_add_node_view(b, "0000000042", v, (int)(i % 3), 1800000000.0);
		snprintf(what, sizeof(what), "record %zu", i);
		same_table(a, b, what);
		cr_assert_eq(np_node_view_state(v), nd->state, "%s: state", what);
		cr_assert_eq(np_node_view_provider(v) == NULL, nd->provider == NULL);
		if (nd->provider != NULL)
			cr_assert_str_eq(np_node_view_provider(v), nd->provider);
		cr_assert_eq(np_node_view_type(v)->n, nd->type.n);
		{
			/* the status page's quota use: resources.cores and .ram */
			long long c, r;
			json_int_t wc = json_integer_value(json_object_get(nd->resources, "cores"));
			json_int_t wr = json_integer_value(json_object_get(nd->resources, "ram"));
			np_node_view_resources(v, &c, &r);
			cr_assert_eq(c, wc > 0 ? wc : 0, "%s: cores", what);
			cr_assert_eq(r, wr > 0 ? wr : 0, "%s: ram", what);
		}
		status_table_free(a);
		status_table_free(b);
		np_node_view_free(v);
		if (!taken)
			np_node_free(nd);
		free(recs[i]);
	}
	free(recs);
	cr_assert_geq(decoded, n - 1, "every record but none is decodable");
	cr_assert_gt(held, 0, "a held record among them");
	cr_assert_eq(whole, held, "none but the held ones needs to be kept whole");
}

/* ---- the endpoints over ZooKeeper, both representations ------------------- */

static void *
view_decode(const char *name, const char *data, int len)
{
	struct np_node *n = NULL;
	struct np_node_view *v;
	char err[256];
	int taken;

	if (data == NULL || len == 0 || np_node_decode(name, data, (size_t)len, &n, err, 256) != 0)
		return NULL;
	v = np_node_view_new(n, &taken);
	if (!taken)
		np_node_free(n);
	return v;
}

static void
view_free(void *o)
{
	np_node_view_free(o);
}

struct caches {
	struct zk_cache *text, *views, *requests, *pools;
};

static int
all_synced(void *arg)
{
	struct caches *c = arg;

	return zk_cache_synced(c->text) && zk_cache_synced(c->views) &&
	       zk_cache_synced(c->requests) && zk_cache_synced(c->pools) &&
	       zk_cache_count(c->text) == zk_cache_count(c->views);
}

/* What web.c's render() answers for a listing of view v. */
static char *
listing(struct status_view *v, int kind, const char *node_id, int json, const char *fields)
{
	struct status_table *t;
	char *out;

	if (kind == 0) {
		t = status_table_new(STATUS_NODE_LIST);
		if (v->node_views)
			status_nodes_from_views(t, v->nodes, node_id, 1800000000.0);
		else
			status_nodes_from_cache(t, v->nodes, node_id, 1800000000.0);
	} else if (kind == 1) {
		t = status_table_new(STATUS_REQUEST_LIST);
		status_requests_from_cache(t, v->requests);
	} else {
		t = status_table_new(STATUS_LABEL_LIST);
		status_labels_from_cache(t, v->pools);
	}
	out = json ? status_json(t) : status_text_csv(t, fields, 1800000000.0);
	status_table_free(t);
	return out;
}

Test(nodeview, endpoints_render_the_same_bytes, .timeout = 60)
{
	struct event_base *base = event_base_new();
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, NULL);
	struct status_view pv, vv;
	struct caches c;
	char **recs, path[128], *text;
	size_t n = records(&recs), i, dlen = 0;
	int k, json;

	/* the fleet: every record, some locked; requests and a pool */
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "/nodepool/nodes/%010zu", i + 1);
		cr_assert_eq(zk_sync_create(zk, path, recs[i], (int)strlen(recs[i]), 0, 1, NULL),
			     ZOK);
		if (i % 3 == 1) {
			snprintf(path, sizeof(path),
				 "/nodepool/nodes/%010zu/lock/x__lock__0000000000", i + 1);
			cr_assert_eq(zk_sync_create(zk, path, "", 0, 0, 1, NULL), ZOK);
		}
		free(recs[i]);
	}
	free(recs);
	cr_assert_eq(zk_sync_create(zk, "/nodepool/nodes/0000009999", "not json", 8, 0, 1, NULL),
		     ZOK);
	cr_assert_eq(zk_sync_create(zk, "/nodepool/nodes/0000009998", NULL, 0, 0, 1, NULL), ZOK);
	text = slurp("tests/data/golden/request-zuul.json", &dlen);
	cr_assert_eq(
	    zk_sync_create(zk, "/nodepool/requests/200-0000000001", text, (int)dlen, 0, 1, NULL),
	    ZOK);
	free(text);
	text = slurp("tests/data/golden/component-pool.json", &dlen);
	cr_assert_eq(zk_sync_create(zk, "/nodepool/components/pool/p-0000000001", text, (int)dlen,
				    0, 1, NULL),
		     ZOK);
	free(text);

	/* before (nodepool-web until session 4: the records' text, decoded
	 * per listing) and after (compact views), on one session */
	c.text = zk_cache_new(zk, "/nodepool/nodes", ZK_CACHE_DATA | ZK_CACHE_LOCKS, NULL, NULL);
	c.views = zk_cache_new(zk, "/nodepool/nodes", ZK_CACHE_DATA | ZK_CACHE_LOCKS, NULL, NULL);
	zk_cache_set_codec(c.views, view_decode, view_free);
	c.requests = zk_cache_new(zk, "/nodepool/requests", ZK_CACHE_DATA, NULL, NULL);
	zk_cache_set_codec(c.requests, np_request_cache_decode, np_request_cache_free);
	c.pools = zk_cache_new(zk, "/nodepool/components/pool", ZK_CACHE_DATA, NULL, NULL);
	zk_cache_set_codec(c.pools, np_component_cache_decode, np_component_cache_free);
	cr_assert(testzk_run_until(base, all_synced, &c, 20), "caches synced");
	testzk_run_for(base, 0.5); /* every lock read */

	memset(&pv, 0, sizeof(pv));
	pv.zk = zk;
	pv.nodes = c.text;
	pv.requests = c.requests;
	pv.pools = c.pools;
	pv.ready = 1;
	vv = pv;
	vv.nodes = c.views;
	vv.node_views = 1;
	for (k = 0; k < 3; k++)
		for (json = 0; json < 2; json++) {
			char *a = listing(&pv, k, NULL, json, NULL),
			     *b = listing(&vv, k, NULL, json, NULL);
			cr_assert_str_eq(a, b, "listing %d json %d", k, json);
			if (k == 0)
				cr_assert(strstr(a, "0000000001") != NULL &&
					      strstr(a, "locked") != NULL,
					  "the fleet is listed: %.200s", a);
			free(a);
			free(b);
		}
	for (i = 1; i <= n + 2; i++) {
		char id[16], *a, *b;
		snprintf(id, sizeof(id), "%010zu", i);
		a = listing(&pv, 0, id, 1, NULL);
		b = listing(&vv, 0, id, 1, NULL);
		cr_assert_str_eq(a, b, "node_id %s", id);
		free(a);
		free(b);
		a = listing(&pv, 0, id, 0, "id,state,locked,comment");
		b = listing(&vv, 0, id, 0, "id,state,locked,comment");
		cr_assert_str_eq(a, b, "node_id %s text", id);
		free(a);
		free(b);
	}
	{
		char *a = metrics_render(&pv, NULL, NULL), *b = metrics_render(&vv, NULL, NULL);
		cr_assert_str_eq(a, b, "/metrics");
		cr_assert(strstr(a, "nodepool_nodes{") != NULL, "%.300s", a);
		free(a);
		free(b);
	}
	zk_cache_free(c.text);
	zk_cache_free(c.views);
	zk_cache_free(c.requests);
	zk_cache_free(c.pools);
	zk_free(zk);
	event_base_free(base);
}
