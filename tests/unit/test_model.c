/*
 * Nodepool's ZooKeeper records against golden bodies built from upstream's
 * serialization code (tests/data/golden/README.md): decode what upstream
 * writes, check what a user would check, re-encode, and compare.
 */
#include <criterion/criterion.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/model.h"

/* ---- helpers ------------------------------------------------------------------ */

/* The golden file's bytes (malloc'd, NUL-terminated); *len its size. */
static char *
golden(const char *name, size_t *len)
{
	const char *b = getenv("NP_BUILD");
	char path[4096];
	FILE *f;
	char *buf;
	long n;

	if (b != NULL && *b != '\0')
		snprintf(path, sizeof(path), "%s/../tests/data/golden/%s.json", b, name);
	else
		snprintf(path, sizeof(path), "tests/data/golden/%s.json", name);
	f = fopen(path, "rb");
	cr_assert_not_null(f, "cannot open %s", path);
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

static json_t *
parse(const char *s)
{
	json_error_t e;
	json_t *j = json_loads(s, JSON_ALLOW_NUL, &e);

	cr_assert_not_null(j, "not JSON (%s): %s", e.text, s);
	return j;
}

/* Assert the keys of the JSON object text, in order, are exactly keys[]. */
static void
assert_keys(const char *text, const char *const *keys, size_t n)
{
	json_t *o = parse(text);
	void *it = json_object_iter(o);
	size_t i = 0;

	for (; it != NULL; it = json_object_iter_next(o, it), i++) {
		cr_assert_lt(i, n, "unexpected extra key '%s' in %s", json_object_iter_key(it),
			     text);
		cr_assert_str_eq(json_object_iter_key(it), keys[i], "key %zu in %s", i, text);
	}
	cr_assert_eq(i, n, "only %zu of %zu keys in %s", i, n, text);
	json_decref(o);
}

static void
assert_json_eq(const char *a, const char *b)
{
	json_t *ja = parse(a), *jb = parse(b);

	cr_assert(json_equal(ja, jb), "JSON differs:\n%s\n%s", a, b);
	json_decref(ja);
	json_decref(jb);
}

/* The value of key in the JSON text (a new reference). */
static json_t *
jget(const char *text, const char *key)
{
	json_t *o = parse(text), *v = json_object_get(o, key);

	cr_assert_not_null(v, "key %s missing in %s", key, text);
	json_incref(v);
	json_decref(o);
	return v;
}

/* Upstream's Node.toDict() keys, in order. */
static const char *const node_keys[] = {
    "state",	    "state_time",      "cloud",	      "provider",	 "pool",
    "type",	    "allocated_to",    "az",	      "region",		 "public_ipv4",
    "private_ipv4", "public_ipv6",     "host_id",     "interface_ip",	 "connection_port",
    "ssh_port",	    "image_id",	       "launcher",    "created_time",	 "external_id",
    "hostname",	    "comment",	       "user_data",   "hold_job",	 "host_keys",
    "username",	    "connection_type", "shell_type",  "hold_expiration", "resources",
    "slot",	    "attributes",      "python_path", "tenant_name",	 "driver_data",
    "requestor",
};
#define NODE_NKEYS (sizeof(node_keys) / sizeof(node_keys[0]))

static const char *const request_keys[] = {
    "state",	"state_time",	"declined_by",	  "node_types", "nodes",
    "reuse",	"requestor",	"requestor_data", "provider",	"relative_priority",
    "event_id", "created_time", "tenant_name",
};
#define REQUEST_NKEYS (sizeof(request_keys) / sizeof(request_keys[0]))

static const char *const upload_keys[] = {
    "state",  "state_time", "external_id", "external_name",
    "format", "username",   "python_path", "shell_type",
};

/*
 * Decode golden `name`, encode, decode the encoding and encode again: both
 * encodings must be the same JSON. Returns the first decode and its
 * encoding (*enc, malloc'd).
 */
static struct np_node *
node_roundtrip(const char *name, char **enc)
{
	char err[256] = "", *e2;
	size_t len;
	char *g = golden(name, &len);
	struct np_node *n = NULL, *n2 = NULL;

	cr_assert_eq(np_node_decode("0000000042", g, len, &n, err, sizeof(err)), 0, "%s: %s", name,
		     err);
	cr_assert_str_eq(n->id, "0000000042");
	*enc = np_node_encode(n, NULL);
	cr_assert_not_null(*enc);
	cr_assert_eq(np_node_decode("0000000042", *enc, strlen(*enc), &n2, err, sizeof(err)), 0,
		     "%s re-decode: %s", name, err);
	e2 = np_node_encode(n2, NULL);
	assert_json_eq(*enc, e2);
	free(e2);
	np_node_free(n2);
	free(g);
	return n;
}

static struct np_request *
request_roundtrip(const char *name, const char *id, char **enc)
{
	char err[256] = "", *e2;
	size_t len;
	char *g = golden(name, &len);
	struct np_request *r = NULL, *r2 = NULL;

	cr_assert_eq(np_request_decode(id, g, len, &r, err, sizeof(err)), 0, "%s: %s", name, err);
	*enc = np_request_encode(r, NULL);
	cr_assert_not_null(*enc);
	cr_assert_eq(np_request_decode(id, *enc, strlen(*enc), &r2, err, sizeof(err)), 0, "%s: %s",
		     name, err);
	e2 = np_request_encode(r2, NULL);
	assert_json_eq(*enc, e2);
	free(e2);
	np_request_free(r2);
	free(g);
	return r;
}

static struct np_image_build *
build_roundtrip(const char *name, char **enc)
{
	char err[256] = "", *e2;
	size_t len;
	char *g = golden(name, &len);
	struct np_image_build *b = NULL, *b2 = NULL;

	cr_assert_eq(
	    np_image_build_decode("3f2b9c7d1e8a4b6c9d0e1f2a3b4c5d6e", g, len, &b, err, sizeof(err)),
	    0, "%s: %s", name, err);
	*enc = np_image_build_encode(b, NULL);
	cr_assert_not_null(*enc);
	cr_assert_eq(np_image_build_decode(b->id, *enc, strlen(*enc), &b2, err, sizeof(err)), 0,
		     "%s: %s", name, err);
	e2 = np_image_build_encode(b2, NULL);
	assert_json_eq(*enc, e2);
	free(e2);
	np_image_build_free(b2);
	free(g);
	return b;
}

static struct np_image_upload *
upload_roundtrip(const char *name, char **enc)
{
	char err[256] = "", *e2;
	size_t len;
	char *g = golden(name, &len);
	struct np_image_upload *u = NULL, *u2 = NULL;

	cr_assert_eq(np_image_upload_decode("0000000001", g, len, &u, err, sizeof(err)), 0,
		     "%s: %s", name, err);
	*enc = np_image_upload_encode(u, NULL);
	cr_assert_not_null(*enc);
	cr_assert_eq(np_image_upload_decode(u->id, *enc, strlen(*enc), &u2, err, sizeof(err)), 0,
		     "%s: %s", name, err);
	e2 = np_image_upload_encode(u2, NULL);
	assert_json_eq(*enc, e2);
	free(e2);
	np_image_upload_free(u2);
	free(g);
	return u;
}

static struct np_component *
component_roundtrip(const char *name, const char *znode, char **enc)
{
	char err[256] = "", *e2;
	size_t len;
	char *g = golden(name, &len);
	struct np_component *c = NULL, *c2 = NULL;

	cr_assert_eq(np_component_decode(znode, g, len, &c, err, sizeof(err)), 0, "%s: %s", name,
		     err);
	*enc = np_component_encode(c, NULL);
	cr_assert_not_null(*enc);
	cr_assert_eq(np_component_decode(znode, *enc, strlen(*enc), &c2, err, sizeof(err)), 0,
		     "%s: %s", name, err);
	e2 = np_component_encode(c2, NULL);
	assert_json_eq(*enc, e2);
	free(e2);
	np_component_free(c2);
	free(g);
	return c;
}

/* Golden bodies that are exactly what upstream writes today: our encoding
 * must be the same JSON, and with these values (exact binary fractions) the
 * very same bytes as Python's json.dumps. */
static void
assert_same_as_golden(const char *name, const char *enc)
{
	size_t len;
	char *g = golden(name, &len);

	assert_json_eq(g, enc);
	cr_assert_str_eq(enc, g, "%s: not byte-identical to upstream's json.dumps", name);
	free(g);
}

/* ---- Node ------------------------------------------------------------------------ */

Test(node, ready_as_upstream_writes_it)
{
	char *enc;
	struct np_node *n = node_roundtrip("node-ready", &enc);

	cr_assert_eq(n->state, NP_NODE_READY);
	cr_assert_float_eq(n->state_time, 1726560123.456789, 1e-6);
	cr_assert_float_eq(n->created_time, 1726560001.25, 1e-9);
	cr_assert_eq(n->type.n, 1);
	cr_assert_str_eq(n->type.v[0], "ubuntu-jammy");
	cr_assert_str_eq(n->provider, "rax-dfw");
	cr_assert_str_eq(n->pool, "main");
	cr_assert_str_eq(n->interface_ip, "203.0.113.10");
	cr_assert_str_eq(n->public_ipv6, "2001:db8::10");
	cr_assert_eq(n->connection_port, 22);
	cr_assert_null(n->connection_port_obj);
	cr_assert_str_eq(n->connection_type, "ssh");
	cr_assert_str_eq(n->external_id, "6a1c3e8e-2d5b-4c77-9a3e-1b2c3d4e5f60");
	cr_assert_null(n->external_id_obj);
	cr_assert_eq(n->host_keys.n, 2);
	cr_assert(strncmp(n->host_keys.v[0], "ssh-ed25519 ", 12) == 0);
	cr_assert_str_eq(n->username, "zuul");
	cr_assert_str_eq(n->python_path, "auto");
	cr_assert_null(n->allocated_to);
	cr_assert_null(n->hostname);
	cr_assert_eq(n->has_hold_expiration, 0);
	cr_assert_eq(n->slot, -1);
	cr_assert_eq(json_integer_value(json_object_get(n->resources, "cores")), 4);
	cr_assert_str_eq(json_string_value(json_object_get(n->attributes, "executor-zone")), "dfw");
	cr_assert_str_eq(n->tenant_name, "example");
	cr_assert_str_eq(n->requestor, "zuul-scheduler-01");
	cr_assert(strncmp(n->launcher, "nl01.example.com-PoolWorker.rax-dfw-main-", 41) == 0);
	cr_assert(strstr(n->image_id, "/providers/rax-dfw/images/0000000001") != NULL);
	cr_assert_null(n->extra);
	assert_keys(enc, node_keys, NODE_NKEYS);
	assert_same_as_golden("node-ready", enc);
	free(enc);
	np_node_free(n);
}

Test(node, type_as_a_bare_string_and_missing_keys)
{
	char *enc;
	struct np_node *n = node_roundtrip("node-type-string", &enc);
	json_t *t;

	cr_assert_eq(n->state, NP_NODE_IN_USE);
	cr_assert_eq(n->type.n, 1);
	cr_assert_str_eq(n->type.v[0], "ubuntu-jammy");
	/* Missing keys take upstream's defaults and are written (as null). */
	cr_assert_eq(n->slot, -1);
	cr_assert_null(n->driver_data);
	cr_assert_null(n->attributes);
	cr_assert_null(n->tenant_name);
	cr_assert_null(n->requestor);
	assert_keys(enc, node_keys, NODE_NKEYS);
	t = jget(enc, "type");
	cr_assert(json_is_array(t) && json_array_size(t) == 1);
	cr_assert_str_eq(json_string_value(json_array_get(t, 0)), "ubuntu-jammy");
	json_decref(t);
	t = jget(enc, "slot");
	cr_assert(json_is_null(t));
	json_decref(t);
	t = jget(enc, "tenant_name");
	cr_assert(json_is_null(t));
	json_decref(t);
	free(enc);
	np_node_free(n);
}

Test(node, ssh_port_read_when_connection_port_is_missing)
{
	char *enc;
	struct np_node *n = node_roundtrip("node-ssh-port-only", &enc);
	json_t *cp = jget(enc, "connection_port"), *sp = jget(enc, "ssh_port");

	cr_assert_eq(n->connection_port, 2222);
	cr_assert_eq(json_integer_value(cp), 2222);
	cr_assert_eq(json_integer_value(sp), 2222);
	cr_assert_null(n->extra, "ssh_port is a known key, not extra");
	json_decref(cp);
	json_decref(sp);
	free(enc);
	np_node_free(n);
}

Test(node, connection_port_wins_over_ssh_port)
{
	const char *body = "{\"connection_port\": 5986, \"ssh_port\": 22}";
	char err[128], *enc;
	struct np_node *n;
	json_t *sp;

	cr_assert_eq(np_node_decode("1", body, strlen(body), &n, err, sizeof(err)), 0);
	cr_assert_eq(n->connection_port, 5986);
	enc = np_node_encode(n, NULL);
	sp = jget(enc, "ssh_port");
	cr_assert_eq(json_integer_value(sp), 5986);
	json_decref(sp);
	free(enc);
	np_node_free(n);
}

Test(node, k8s_credentials_in_connection_port)
{
	char *enc;
	struct np_node *n = node_roundtrip("node-k8s", &enc);
	json_t *cp = jget(enc, "connection_port"), *sp = jget(enc, "ssh_port");

	cr_assert_not_null(n->connection_port_obj);
	cr_assert_eq(n->connection_port, 0);
	cr_assert_str_eq(json_string_value(json_object_get(n->connection_port_obj, "namespace")),
			 "zuul-ci-abcdef-0000000042");
	cr_assert_str_eq(n->connection_type, "namespace");
	cr_assert(json_is_object(cp) && json_equal(cp, sp));
	cr_assert(json_equal(cp, n->connection_port_obj));
	/* An explicit null username stays null (d.get's default is only for
	 * a missing key). */
	cr_assert_null(n->username);
	cr_assert_eq(n->host_keys.n, 0);
	json_decref(cp);
	json_decref(sp);
	assert_same_as_golden("node-k8s", enc);
	free(enc);
	np_node_free(n);
}

static void
check_hold(const char *name, long long want)
{
	char *enc;
	struct np_node *n = node_roundtrip(name, &enc);
	json_t *h = jget(enc, "hold_expiration");

	cr_assert_eq(n->state, NP_NODE_HOLD);
	cr_assert_eq(n->has_hold_expiration, 1, "%s", name);
	cr_assert_eq(n->hold_expiration, want, "%s: %lld != %lld", name, n->hold_expiration, want);
	cr_assert(json_is_integer(h), "%s: hold_expiration is written as an int", name);
	cr_assert_eq(json_integer_value(h), want);
	json_decref(h);
	free(enc);
	np_node_free(n);
}

Test(node, hold_expiration_numeric_string)
{
	check_hold("node-hold-string", 12);
}

Test(node, hold_expiration_non_numeric_string_is_zero)
{
	check_hold("node-hold-nonnumeric", 0);
}

Test(node, hold_expiration_float_truncated)
{
	check_hold("node-hold-float", 12);
}

Test(node, hold_expiration_int)
{
	char *enc;
	struct np_node *n;

	check_hold("node-hold-int", 86400);
	n = node_roundtrip("node-hold-int", &enc);
	cr_assert_str_eq(n->hold_job, "example org/repo tox");
	cr_assert_str_eq(n->comment, "held by autohold");
	assert_same_as_golden("node-hold-int", enc);
	free(enc);
	np_node_free(n);
}

/* Python's int() on every shape Zuul, the CLI or a hand edit could leave. */
Test(node, hold_expiration_python_int_semantics)
{
	static const struct {
		const char *json;
		long long want;
	} cases[] = {
	    {"\"12\"", 12},
	    {"\" 12 \"", 12},
	    {"\"\\t+7\\n\"", 7},
	    {"\"-3\"", -3},
	    {"\"1_000\"", 1000},
	    {"\"0012\"", 12},
	    {"\"_1\"", 0},
	    {"\"1_\"", 0},
	    {"\"1__0\"", 0},
	    {"\"12.5\"", 0},
	    {"\"abc\"", 0},
	    {"\"\"", 0},
	    {"\"0x10\"", 0},
	    {"\"+\"", 0},
	    {"\"- 1\"", 0},
	    {"true", 1},
	    {"false", 0},
	    {"12.9", 12},
	    {"-12.9", -12},
	    {"0.5", 0},
	    {"1e30", LLONG_MAX},
	    {"-1e30", LLONG_MIN},
	    {"\"99999999999999999999\"", LLONG_MAX},
	    {"\"-99999999999999999999\"", LLONG_MIN},
	    {"\"-9223372036854775808\"", LLONG_MIN},
	    {"9223372036854775807", LLONG_MAX},
	    {"-5", -5},
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char body[128], err[128];
		struct np_node *n;

		snprintf(body, sizeof(body), "{\"state\": \"hold\", \"hold_expiration\": %s}",
			 cases[i].json);
		cr_assert_eq(np_node_decode("1", body, strlen(body), &n, err, sizeof(err)), 0,
			     "%s: %s", body, err);
		cr_assert_eq(n->has_hold_expiration, 1, "%s", body);
		cr_assert_eq(n->hold_expiration, cases[i].want, "%s: got %lld", body,
			     n->hold_expiration);
		np_node_free(n);
	}
}

Test(node, aws_external_id_object)
{
	char *enc;
	struct np_node *n = node_roundtrip("node-aws", &enc);
	json_t *x = jget(enc, "external_id");

	cr_assert_null(n->external_id);
	cr_assert_not_null(n->external_id_obj);
	cr_assert_str_eq(json_string_value(json_object_get(n->external_id_obj, "instance")),
			 "i-0123456789abcdef0");
	cr_assert_str_eq(json_string_value(json_object_get(n->external_id_obj, "host")),
			 "h-0fedcba9876543210");
	cr_assert(json_equal(x, n->external_id_obj));
	cr_assert_eq(json_integer_value(json_object_get(n->resources, "L-1216C47A")), 2);
	json_decref(x);
	assert_same_as_golden("node-aws", enc);
	free(enc);
	np_node_free(n);
}

Test(node, int_times_read_and_written_as_floats)
{
	char *enc;
	struct np_node *n = node_roundtrip("node-int-times", &enc);
	json_t *st = jget(enc, "state_time"), *ct = jget(enc, "created_time");

	cr_assert_eq(n->state_time, 1726560123.0);
	cr_assert_eq(n->created_time, 1726560001.0);
	cr_assert(json_is_real(st) && json_real_value(st) == 1726560123.0);
	cr_assert(json_is_real(ct) && json_real_value(ct) == 1726560001.0);
	json_decref(st);
	json_decref(ct);
	free(enc);
	np_node_free(n);
}

Test(node, unknown_keys_kept_and_written_back)
{
	char *enc;
	size_t len;
	struct np_node *n = node_roundtrip("node-extra-keys", &enc);
	char *g = golden("node-extra-keys", &len);
	json_t *gj = parse(g), *ff = jget(enc, "future_field"), *ze = jget(enc, "zuul_extra");

	cr_assert_not_null(n->extra);
	cr_assert_eq(json_object_size(n->extra), 2);
	cr_assert(json_equal(ff, json_object_get(gj, "future_field")));
	cr_assert_str_eq(json_string_value(ze), "kept");
	assert_same_as_golden("node-extra-keys", enc);
	json_decref(ff);
	json_decref(ze);
	json_decref(gj);
	free(g);
	free(enc);
	np_node_free(n);
}

Test(node, minimal_body_gets_upstream_defaults)
{
	char *enc;
	struct np_node *n = node_roundtrip("node-minimal", &enc);
	json_t *o;

	cr_assert_eq(n->state, NP_NODE_BUILDING);
	cr_assert_str_eq(n->provider, "rax-dfw");
	cr_assert_str_eq(n->username, "zuul");
	cr_assert_eq(n->connection_port, 22);
	cr_assert_eq(n->host_keys.n, 0);
	cr_assert_eq(n->slot, -1);
	cr_assert_eq(n->has_hold_expiration, 0);
	cr_assert_null(n->python_path);
	cr_assert_eq(n->state_time, 0);
	assert_keys(enc, node_keys, NODE_NKEYS);
	o = parse(enc);
	cr_assert_str_eq(json_string_value(json_object_get(o, "username")), "zuul");
	cr_assert_eq(json_integer_value(json_object_get(o, "ssh_port")), 22);
	cr_assert(json_is_null(json_object_get(o, "created_time")));
	cr_assert(json_is_null(json_object_get(o, "hold_expiration")));
	cr_assert_eq(json_array_size(json_object_get(o, "host_keys")), 0);
	json_decref(o);
	free(enc);
	np_node_free(n);
}

Test(node, metastatic_slot_driver_data_user_data)
{
	char *enc;
	struct np_node *n = node_roundtrip("node-metastatic", &enc);
	json_t *ud;

	cr_assert_eq(n->slot, 1);
	cr_assert_str_eq(json_string_value(json_object_get(n->driver_data, "backing_node")),
			 "0000000007");
	cr_assert_str_eq(n->requestor, "NodePool:metastatic:meta");
	ud = parse(json_string_value(n->user_data));
	cr_assert_eq(json_integer_value(json_object_get(ud, "slot")), 1);
	json_decref(ud);
	assert_same_as_golden("node-metastatic", enc);
	free(enc);
	np_node_free(n);
}

Test(node, new_node_writes_every_key)
{
	struct np_node *n = np_node_new();
	char *enc;
	size_t len;
	json_t *o;

	np_strv_push(&n->type, "debian");
	np_node_set_state(n, NP_NODE_BUILDING);
	cr_assert_gt(n->state_time, 1.6e9);
	enc = np_node_encode(n, &len);
	cr_assert_eq(len, strlen(enc));
	assert_keys(enc, node_keys, NODE_NKEYS);
	o = parse(enc);
	cr_assert_str_eq(json_string_value(json_object_get(o, "state")), "building");
	cr_assert(json_is_null(json_object_get(o, "slot")));
	cr_assert_str_eq(json_string_value(json_object_get(o, "username")), "zuul");
	json_decref(o);
	free(enc);
	np_node_free(n);
	np_node_free(NULL);
}

Test(node, dup_is_deep_and_equal)
{
	char *enc, *enc2;
	struct np_node *n = node_roundtrip("node-k8s", &enc), *d = np_node_dup(n);

	enc2 = np_node_encode(d, NULL);
	cr_assert_str_eq(enc, enc2);
	cr_assert_neq(d->connection_port_obj, n->connection_port_obj);
	np_node_free(n);
	free(enc2);
	/* d owns its own copies: still encodes after n is gone. */
	enc2 = np_node_encode(d, NULL);
	cr_assert_str_eq(enc, enc2);
	free(enc);
	free(enc2);
	np_node_free(d);
	cr_assert_null(np_node_dup(NULL));
}

Test(node, states_by_name)
{
	int i;

	for (i = 0; i < NP_NODE_STATE_COUNT; i++)
		cr_assert_eq(np_node_state_parse(np_node_state_name(i)), i);
	cr_assert_str_eq(np_node_state_name(NP_NODE_IN_USE), "in-use");
	cr_assert_null(np_node_state_name(NP_NODE_STATE_COUNT));
	cr_assert_null(np_node_state_name(-1));
	cr_assert_eq(np_node_state_parse("in_use"), -1);
	cr_assert_eq(np_node_state_parse(NULL), -1);
}

Test(node, invalid_utf8_fails_to_encode)
{
	struct np_node *n = np_node_new();

	n->comment = strdup("bad \xff byte");
	cr_assert_null(np_node_encode(n, NULL));
	np_node_free(n);
}

/* ---- bodies that are not objects; odd values ------------------------------------ */

/* Only a body that is not a JSON object is refused. */
Test(malformed, non_object_bodies_give_errors)
{
	static const struct {
		const char *body, *needle;
	} cases[] = {
	    {"", "empty"},
	    {"{", "invalid JSON"},
	    {"{\"state\": \"ready\",}", "invalid JSON"},
	    {"[1, 2]", "not an object"},
	    {"\"ready\"", "invalid JSON"},
	    {"42", "invalid JSON"},
	    {"null", "invalid JSON"},
	    {"{\"a\": 1} trailing", "invalid JSON"},
	    {"{\"a\": 1e999999999999999999999x}", "invalid JSON"},
	    {"{\"a\": \"\xff\"}", "invalid JSON"},
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char err[256] = "";
		const char *b = cases[i].body;
		struct np_node *n = (struct np_node *)1;
		struct np_request *r = (struct np_request *)1;
		struct np_image_build *bu = (struct np_image_build *)1;
		struct np_image_upload *up = (struct np_image_upload *)1;
		struct np_component *co = (struct np_component *)1;

		cr_assert_eq(np_node_decode("0000000007", b, strlen(b), &n, err, sizeof(err)), -1,
			     "accepted: %s", b);
		cr_assert_null(n);
		cr_assert(strstr(err, cases[i].needle) != NULL, "message for %s lacks '%s': %s", b,
			  cases[i].needle, err);
		cr_assert(strstr(err, "node 0000000007") != NULL, "message names the node: %s",
			  err);
		cr_assert_eq(np_request_decode("100-1", b, strlen(b), &r, err, sizeof(err)), -1);
		cr_assert_null(r);
		cr_assert_eq(np_image_build_decode("1", b, strlen(b), &bu, err, sizeof(err)), -1);
		cr_assert_null(bu);
		cr_assert_eq(np_image_upload_decode("1", b, strlen(b), &up, err, sizeof(err)), -1);
		cr_assert_null(up);
		cr_assert_eq(np_component_decode("h1", b, strlen(b), &co, err, sizeof(err)), -1);
		cr_assert_null(co);
	}
}

/*
 * One record kind: decode body (must succeed with a note naming key and
 * "kept verbatim"), encode, and find the key's value as it came.
 */
static void
check_odd(int kind, const char *body, const char *key, const char *needle)
{
	char err[256] = "x", *enc = NULL;
	json_t *in = parse(body), *out;
	int rc = -1;

	switch (kind) {
	case 0: {
		struct np_node *n = NULL;
		rc = np_node_decode("0000000007", body, strlen(body), &n, err, sizeof(err));
		if (rc == 0) {
			enc = np_node_encode(n, NULL);
			np_node_free(n);
		}
		break;
	}
	case 1: {
		struct np_request *r = NULL;
		rc = np_request_decode("100-0000000001", body, strlen(body), &r, err, sizeof(err));
		if (rc == 0) {
			enc = np_request_encode(r, NULL);
			np_request_free(r);
		}
		break;
	}
	case 2: {
		struct np_image_build *b = NULL;
		rc = np_image_build_decode("0000000001", body, strlen(body), &b, err, sizeof(err));
		if (rc == 0) {
			enc = np_image_build_encode(b, NULL);
			np_image_build_free(b);
		}
		break;
	}
	case 3: {
		struct np_image_upload *u = NULL;
		rc = np_image_upload_decode("0000000001", body, strlen(body), &u, err, sizeof(err));
		if (rc == 0) {
			enc = np_image_upload_encode(u, NULL);
			np_image_upload_free(u);
		}
		break;
	}
	case 4: {
		struct np_component *c = NULL;
		rc = np_component_decode("h0000000001", body, strlen(body), &c, err, sizeof(err));
		if (rc == 0) {
			enc = np_component_encode(c, NULL);
			np_component_free(c);
		}
		break;
	}
	}
	cr_assert_eq(rc, 0, "refused %s: %s", body, err);
	cr_assert(strstr(err, needle) != NULL, "note for %s lacks '%s': %s", body, needle, err);
	cr_assert(strstr(err, "kept verbatim") != NULL, "note for %s: %s", body, err);
	cr_assert_not_null(enc, "%s did not encode", body);
	out = parse(enc);
	cr_assert(json_equal(json_object_get(in, key), json_object_get(out, key)),
		  "key %s of %s not kept: %s", key, body, enc);
	json_decref(in);
	json_decref(out);
	free(enc);
}

/* A value of a type the field cannot hold keeps the record and is written
 * back as it came (degrade, never drop). */
Test(odd, node_values_are_kept_verbatim)
{
	static const struct {
		const char *body, *key, *needle;
	} cases[] = {
	    {"{\"state\": 5}", "state", "'state'"},
	    {"{\"state\": \"bogus\"}", "state", "unknown state 'bogus'"},
	    {"{\"state_time\": \"now\"}", "state_time", "'state_time'"},
	    {"{\"type\": 5}", "type", "'type'"},
	    {"{\"type\": [\"a\", 1]}", "type", "'type': element 1"},
	    {"{\"type\": {\"a\": 1}}", "type", "'type'"},
	    {"{\"provider\": 5}", "provider", "'provider'"},
	    {"{\"connection_port\": \"22\"}", "connection_port", "'connection_port'"},
	    {"{\"connection_port\": 70000}", "connection_port", "'connection_port': port 70000"},
	    {"{\"connection_port\": 22.0}", "connection_port", "'connection_port'"},
	    {"{\"ssh_port\": [22]}", "ssh_port", "'ssh_port'"},
	    {"{\"hold_expiration\": []}", "hold_expiration", "'hold_expiration'"},
	    {"{\"hold_expiration\": {}}", "hold_expiration", "'hold_expiration'"},
	    {"{\"host_keys\": \"ssh-rsa AAA\"}", "host_keys", "'host_keys'"},
	    {"{\"resources\": [1]}", "resources", "'resources'"},
	    {"{\"slot\": -2}", "slot", "'slot'"},
	    {"{\"slot\": \"1\"}", "slot", "'slot'"},
	    {"{\"slot\": 4294967296}", "slot", "'slot'"},
	    {"{\"created_time\": true}", "created_time", "'created_time'"},
	    {"{\"comment\": \"a\\u0000b\"}", "comment", "NUL"},
	    {"{\"comment\": [\"x\"]}", "comment", "'comment'"},
	    {"{\"hold_job\": 7}", "hold_job", "'hold_job'"},
	    {"{\"allocated_to\": {\"r\": 1}}", "allocated_to", "'allocated_to'"},
	    {"{\"state_time\": 1e400}", "state_time", "beyond"},
	    {"{\"slot\": 100000000000000000000000}", "slot", "beyond"},
	    {"{\"state_time\": NaN}", "state_time", "beyond"},
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		/* JSON for parse(): NaN/1e400/big ints are not jansson's */
		if (strstr(cases[i].body, "NaN") || strstr(cases[i].body, "e400") ||
		    strstr(cases[i].body, "0000000000000"))
			continue;
		check_odd(0, cases[i].body, cases[i].key, cases[i].needle);
	}
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char err[256] = "", *enc;
		struct np_node *n = NULL;
		const char *b = cases[i].body;

		cr_assert_eq(np_node_decode("0000000007", b, strlen(b), &n, err, sizeof(err)), 0,
			     "%s: %s", b, err);
		cr_assert(strstr(err, cases[i].needle) != NULL, "note for %s lacks '%s': %s", b,
			  cases[i].needle, err);
		enc = np_node_encode(n, NULL);
		cr_assert_not_null(enc);
		/* the value's text comes back as it was written */
		{
			const char *v = strchr(b, ':') + 2;
			char want[128];
			snprintf(want, sizeof(want), "\"%s\": %.*s", cases[i].key,
				 (int)(strlen(v) - 1), v);
			cr_assert(strstr(enc, want) != NULL, "%s: '%s' not in %s", b, want, enc);
		}
		free(enc);
		np_node_free(n);
	}
}

/* The rest of the record is intact next to an odd value: Zuul's in-use
 * node with user_data an object was dropped by our old decoder. */
Test(odd, other_keys_still_count)
{
	const char *b = "{\"state\": \"in-use\", \"provider\": \"p\", \"pool\": \"main\", "
			"\"type\": [\"small\"], \"slot\": \"zero\", \"resources\": {\"cores\": 2}, "
			"\"tenant_name\": \"t1\", \"user_data\": {\"zuul_system\": \"abc\"}}";
	char err[256];
	struct np_node *n = NULL;

	cr_assert_eq(np_node_decode("0000000007", b, strlen(b), &n, err, sizeof(err)), 0);
	cr_assert_eq(n->state, NP_NODE_IN_USE);
	cr_assert_str_eq(n->provider, "p");
	cr_assert_str_eq(n->pool, "main");
	cr_assert_str_eq(n->tenant_name, "t1");
	cr_assert_eq(json_integer_value(json_object_get(n->resources, "cores")), 2);
	cr_assert_eq(n->slot, -1);
	cr_assert_str_eq(json_string_value(json_object_get(n->user_data, "zuul_system")), "abc");
	np_node_free(n);
}

/* Once our code sets a field, ours is written, not the odd value. */
Test(odd, our_change_wins)
{
	const char *b = "{\"state\": \"in_use\", \"slot\": \"x\", \"comment\": 5}";
	char err[256], *enc;
	struct np_node *n = NULL;
	json_t *o;

	cr_assert_eq(np_node_decode("0000000007", b, strlen(b), &n, err, sizeof(err)), 0);
	cr_assert_eq(n->state, -1);
	cr_assert_null(np_node_state_name(n->state));
	np_node_set_state(n, NP_NODE_DELETING);
	n->comment = strdup("by us");
	enc = np_node_encode(n, NULL);
	o = parse(enc);
	cr_assert_str_eq(json_string_value(json_object_get(o, "state")), "deleting");
	cr_assert_str_eq(json_string_value(json_object_get(o, "comment")), "by us");
	cr_assert_str_eq(json_string_value(json_object_get(o, "slot")), "x");
	json_decref(o);
	free(enc);
	np_node_free(n);
}

/* Integers beyond 64 bits (Zuul's span_info trace_id is 128) and floats
 * beyond double are written back digit for digit. */
Test(odd, big_numbers_round_trip_as_text)
{
	const char *b = "{\"state\": \"requested\", \"node_types\": [\"small\"], "
			"\"requestor_data\": {\"span_info\": {\"trace_id\": "
			"227905469349181577839468446349154138577, \"span_id\": "
			"18446744073709551615, \"start_time\": 1726560199750000000}}, "
			"\"relative_priority\": 1e999, \"x\": [-99999999999999999999]}";
	char err[256], *enc, *enc2;
	struct np_request *r = NULL, *r2 = NULL;

	cr_assert_eq(np_request_decode("100-1", b, strlen(b), &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(r->node_types.v[0], "small");
	cr_assert_eq(r->relative_priority, 0);
	enc = np_request_encode(r, NULL);
	cr_assert(strstr(enc, "\"trace_id\": 227905469349181577839468446349154138577") != NULL,
		  "%s", enc);
	cr_assert(strstr(enc, "\"span_id\": 18446744073709551615") != NULL, "%s", enc);
	cr_assert(strstr(enc, "\"start_time\": 1726560199750000000") != NULL, "%s", enc);
	cr_assert(strstr(enc, "\"relative_priority\": 1e999") != NULL, "%s", enc);
	cr_assert(strstr(enc, "\"x\": [-99999999999999999999]") != NULL, "%s", enc);
	cr_assert_eq(np_request_decode("100-1", enc, strlen(enc), &r2, err, sizeof(err)), 0);
	enc2 = np_request_encode(r2, NULL);
	cr_assert_str_eq(enc, enc2);
	/* shown (web, CLI) as the nearest number */
	{
		json_t *x = np_json_export(json_object_get(r->requestor_data, "span_info"));
		cr_assert(json_is_real(json_object_get(x, "trace_id")));
		cr_assert_float_eq(json_real_value(json_object_get(x, "trace_id")), 2.279e38, 1e36);
		json_decref(x);
	}
	/* a set field replaces the odd value */
	r2->relative_priority = 3;
	free(enc2);
	enc2 = np_request_encode(r2, NULL);
	cr_assert(strstr(enc2, "\"relative_priority\": 3") != NULL, "%s", enc2);
	free(enc);
	free(enc2);
	np_request_free(r);
	np_request_free(r2);
}

/* Strings that look like our stand-ins or placeholders stay strings. */
Test(odd, lookalike_strings_stay_strings)
{
	const char *b = "{\"state\": \"requested\", \"requestor_data\": [\"\\u00ff12\", "
			"\"npraw0123456789abcdef:0\", 1e999], \"npraw0123456789abcdef:0\": 5}";
	char err[256], *enc;
	struct np_request *r = NULL;

	cr_assert_eq(np_request_decode("100-1", b, strlen(b), &r, err, sizeof(err)), 0, "%s", err);
	enc = np_request_encode(r, NULL);
	cr_assert(strstr(enc, "[\"\\u00FF12\", \"npraw0123456789abcdef:0\", 1e999]") != NULL, "%s",
		  enc);
	cr_assert(strstr(enc, "\"npraw0123456789abcdef:0\": 5") != NULL, "%s", enc);
	free(enc);
	np_request_free(r);
}

Test(odd, other_records_keep_values_verbatim)
{
	static const struct {
		int kind; /* 1 request, 2 build, 3 upload, 4 component */
		const char *body, *key, *needle;
	} cases[] = {
	    {1, "{\"state\": \"done\"}", "state", "unknown state 'done'"},
	    {1, "{\"node_types\": \"ubuntu\"}", "node_types", "'node_types'"},
	    {1, "{\"nodes\": [1]}", "nodes", "'nodes': element 0"},
	    {1, "{\"declined_by\": {}}", "declined_by", "'declined_by'"},
	    {1, "{\"reuse\": \"yes\"}", "reuse", "'reuse'"},
	    {1, "{\"relative_priority\": 1.5}", "relative_priority", "'relative_priority'"},
	    {1, "{\"relative_priority\": \"1\"}", "relative_priority", "'relative_priority'"},
	    {1, "{\"created_time\": \"x\"}", "created_time", "'created_time'"},
	    {1, "{\"tenant_name\": 5}", "tenant_name", "'tenant_name'"},
	    {2, "{\"state\": \"uploading\"}", "state", "unknown state 'uploading'"},
	    {2, "{\"formats\": [\"qcow2\"]}", "formats", "'formats'"},
	    {2, "{\"builder\": 1}", "builder", "'builder'"},
	    {3, "{\"state\": \"building\"}", "state", "unknown state 'building'"},
	    {3, "{\"external_id\": {\"a\": 1}}", "external_id", "'external_id'"},
	    {3, "{\"format\": 1}", "format", "'format'"},
	    {4, "{\"model_api\": \"0\"}", "model_api", "'model_api'"},
	    {4, "{\"kind\": \"pool\", \"supported_labels\": [1]}", "supported_labels",
	     "'supported_labels': element 0"},
	    {4, "{\"kind\": \"pool\", \"priority\": \"high\"}", "priority", "'priority'"},
	    {4, "{\"kind\": \"pool\", \"paused\": 1}", "paused", "'paused'"},
	    {4, "{\"kind\": 7}", "kind", "'kind'"},
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_odd(cases[i].kind, cases[i].body, cases[i].key, cases[i].needle);
}

Test(malformed, tiny_error_buffers_are_safe)
{
	char err[8];
	struct np_node *n;

	cr_assert_eq(np_node_decode("1", "{\"type\": 5", 10, &n, err, sizeof(err)), -1);
	cr_assert_eq(strlen(err), 7);
	cr_assert_eq(np_node_decode("1", "{\"type\": 5}", 11, &n, err, sizeof(err)), 0);
	cr_assert_eq(strlen(err), 7); /* the note, cut short */
	np_node_free(n);
	cr_assert_eq(np_node_decode("1", "{\"type\": 5", 10, &n, NULL, 0), -1);
	cr_assert_eq(np_node_decode("1", NULL, 0, &n, NULL, 0), -1);
}

/* Bodies need not be NUL-terminated: only len bytes are read. */
Test(malformed, length_bounded_input)
{
	const char body[] = "{\"state\": \"ready\"}GARBAGE";
	char err[128];
	struct np_node *n;

	cr_assert_eq(np_node_decode("1", body, 18, &n, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(n->state, NP_NODE_READY);
	np_node_free(n);
}

/* ---- NodeRequest ------------------------------------------------------------------ */

Test(request, as_zuul_submits_it)
{
	char *enc;
	struct np_request *r = request_roundtrip("request-zuul", "100-0000000042", &enc);

	cr_assert_str_eq(r->id, "100-0000000042");
	cr_assert_eq(r->state, NP_REQ_REQUESTED);
	cr_assert_eq(r->node_types.n, 2);
	cr_assert_str_eq(r->node_types.v[0], "ubuntu-jammy");
	cr_assert_str_eq(r->node_types.v[1], "ubuntu-jammy");
	cr_assert_eq(r->nodes.n, 0);
	cr_assert_eq(r->declined_by.n, 0);
	cr_assert_eq(r->reuse, 1);
	cr_assert_str_eq(r->requestor, "zuul-scheduler-01");
	cr_assert_str_eq(json_string_value(json_object_get(r->requestor_data, "job_name")),
			 "tox-py311");
	cr_assert_null(r->provider);
	cr_assert_eq(r->relative_priority, 0);
	cr_assert_str_eq(r->event_id, "c2b8a7e6d5f44e3a9b1c0d2e3f4a5b6c");
	cr_assert_eq(r->has_created_time, 1);
	cr_assert_eq(r->created_time, 1726560199.75);
	cr_assert_str_eq(r->tenant_name, "example");
	assert_keys(enc, request_keys, REQUEST_NKEYS);
	assert_same_as_golden("request-zuul", enc);
	free(enc);
	np_request_free(r);
}

Test(request, min_ready)
{
	char *enc;
	struct np_request *r = request_roundtrip("request-min-ready", "900-0000000003", &enc);
	json_t *ct = jget(enc, "created_time");

	cr_assert_eq(r->reuse, 0);
	cr_assert_str_eq(r->requestor, "NodePool:min-ready");
	cr_assert_null(r->requestor_data);
	cr_assert_eq(r->has_created_time, 0);
	cr_assert(json_is_null(ct));
	json_decref(ct);
	assert_same_as_golden("request-min-ready", enc);
	free(enc);
	np_request_free(r);
}

Test(request, fulfilled_with_nodes_in_order)
{
	char *enc;
	struct np_request *r = request_roundtrip("request-fulfilled", "100-0000000042", &enc);

	cr_assert_eq(r->state, NP_REQ_FULFILLED);
	cr_assert_eq(r->nodes.n, 2);
	cr_assert_str_eq(r->nodes.v[0], "0000000001");
	cr_assert_str_eq(r->nodes.v[1], "0000000002");
	cr_assert_eq(r->declined_by.n, 1);
	cr_assert(np_strv_contains(
	    &r->declined_by,
	    "nl02.example.com-PoolWorker.aws-east-main-aa11bb22cc33dd44ee55ff6677889900"));
	cr_assert_str_eq(r->provider, "rax-dfw");
	cr_assert_eq(r->relative_priority, 2);
	assert_same_as_golden("request-fulfilled", enc);
	free(enc);
	np_request_free(r);
}

Test(request, minimal_defaults_and_unknown_key)
{
	char *enc;
	struct np_request *r = request_roundtrip("request-minimal", "100-0000000001", &enc);
	json_t *o = parse(enc);

	cr_assert_eq(r->reuse, 1);
	cr_assert_eq(r->relative_priority, 0);
	cr_assert_eq(r->nodes.n, 0);
	cr_assert_eq(json_integer_value(json_object_get(r->extra, "x-unknown")), 5);
	cr_assert_eq(json_object_size(o), REQUEST_NKEYS + 1);
	cr_assert_eq(json_integer_value(json_object_get(o, "x-unknown")), 5);
	cr_assert(json_is_true(json_object_get(o, "reuse")));
	cr_assert_eq(json_array_size(json_object_get(o, "declined_by")), 0);
	json_decref(o);
	free(enc);
	np_request_free(r);
}

Test(request, new_and_dup)
{
	struct np_request *r = np_request_new(), *d;
	char *a, *b;

	np_strv_push(&r->node_types, "x");
	r->requestor_data = json_pack("{s:i}", "k", 1);
	np_request_set_state(r, NP_REQ_PENDING);
	d = np_request_dup(r);
	a = np_request_encode(r, NULL);
	b = np_request_encode(d, NULL);
	cr_assert_str_eq(a, b);
	assert_keys(a, request_keys, REQUEST_NKEYS);
	free(a);
	free(b);
	np_request_free(r);
	np_request_free(d);
	np_request_free(NULL);
}

static int
cmp_ids(const char *a, long long rpa, const char *b, long long rpb)
{
	struct np_request ra = {0}, rb = {0};

	ra.id = (char *)a;
	rb.id = (char *)b;
	ra.relative_priority = rpa;
	rb.relative_priority = rpb;
	return np_request_cmp(&ra, &rb);
}

/* Upstream sorts by (prefix string, relative_priority, sequence string). */
Test(request, ordering_matches_upstream_priority_tuple)
{
	cr_assert_lt(cmp_ids("100-0000000009", 0, "200-0000000001", 0), 0);
	cr_assert_gt(cmp_ids("300-0000000001", -5, "200-0000000009", 5), 0);
	/* prefix first, then relative_priority, then sequence */
	cr_assert_lt(cmp_ids("100-0000000009", 0, "100-0000000001", 1), 0);
	cr_assert_lt(cmp_ids("100-0000000001", 0, "100-0000000002", 0), 0);
	cr_assert_eq(cmp_ids("100-0000000001", 0, "100-0000000001", 0), 0);
	cr_assert_lt(cmp_ids("100-0000000005", -1, "100-0000000001", 0), 0);
	/* prefixes compare as strings: "1000" < "200", "99" > "100" */
	cr_assert_lt(cmp_ids("1000-0000000001", 0, "200-0000000001", 0), 0);
	cr_assert_gt(cmp_ids("99-0000000001", 0, "100-0000000001", 0), 0);
	cr_assert_lt(cmp_ids("10-0000000001", 0, "100-0000000001", 0), 0);
	/* min-ready (900) after Zuul's usual 100/200/300 */
	cr_assert_gt(cmp_ids("900-0000000001", 0, "300-0000000099", 0), 0);
	/* ids without '-' sort by the whole id */
	cr_assert_lt(cmp_ids("abc", 0, "abd", 0), 0);
	cr_assert_eq(cmp_ids(NULL, 0, "", 0), 0);
}

/* ---- ImageBuild / ImageUpload -------------------------------------------------- */

static const char *const build_keys_full[] = {
    "state",   "state_time", "builder",	    "builder_id",
    "formats", "username",   "python_path", "shell_type",
};
static const char *const build_keys_noformats[] = {
    "state", "state_time", "builder", "builder_id", "username", "python_path", "shell_type",
};

Test(build, ready_with_formats)
{
	char *enc;
	struct np_image_build *b = build_roundtrip("build-ready", &enc);

	cr_assert_eq(b->state, NP_BUILD_READY);
	cr_assert_str_eq(b->builder, "nb01.example.com");
	cr_assert_str_eq(b->builder_id, "9b6c1f0e-6a3d-4f55-8a0e-2c1d3e4f5a6b");
	cr_assert_eq(b->formats.n, 3);
	cr_assert(np_strv_contains(&b->formats, "qcow2"));
	cr_assert(np_strv_contains(&b->formats, "vhd"));
	cr_assert_str_eq(b->python_path, "auto");
	cr_assert_null(b->shell_type);
	assert_keys(enc, build_keys_full, 8);
	assert_same_as_golden("build-ready", enc);
	free(enc);
	np_image_build_free(b);
}

Test(build, building_without_formats_omits_the_key)
{
	char *enc;
	struct np_image_build *b = build_roundtrip("build-building", &enc);

	cr_assert_eq(b->state, NP_BUILD_BUILDING);
	cr_assert_eq(b->formats.n, 0);
	assert_keys(enc, build_keys_noformats, 7);
	assert_same_as_golden("build-building", enc);
	free(enc);
	np_image_build_free(b);
}

Test(build, legacy_defaults_and_sorted_formats)
{
	static const char *const keys[] = {"state",    "state_time",  "builder",   "formats",
					   "username", "python_path", "shell_type"};
	char *enc;
	struct np_image_build *b = build_roundtrip("build-legacy", &enc);
	json_t *f = jget(enc, "formats");

	cr_assert_str_eq(b->username, "zuul");
	cr_assert_str_eq(b->python_path, "/usr/bin/python2");
	cr_assert_null(b->builder_id);
	cr_assert_eq(b->formats.n, 2);
	cr_assert_str_eq(json_string_value(f), "qcow2,raw");
	assert_keys(enc, keys, 7);
	json_decref(f);
	free(enc);
	np_image_build_free(b);
}

Test(build, unset_builder_and_formats_are_omitted)
{
	static const char *const keys[] = {"state", "state_time", "username", "python_path",
					   "shell_type"};
	struct np_image_build *b = np_image_build_new();
	char *enc;

	np_image_build_set_state(b, NP_BUILD_FAILED);
	enc = np_image_build_encode(b, NULL);
	assert_keys(enc, keys, 5);
	cr_assert(strstr(enc, "\"failed\"") != NULL);
	free(enc);
	/* Formats in any order come out sorted, empty entries included. */
	np_strv_push(&b->formats, "vhd");
	np_strv_push(&b->formats, "raw");
	np_strv_push(&b->formats, "qcow2");
	enc = np_image_build_encode(b, NULL);
	cr_assert(strstr(enc, "\"formats\": \"qcow2,raw,vhd\"") != NULL, "%s", enc);
	free(enc);
	np_image_build_free(b);
	np_image_build_free(NULL);
}

Test(upload, ready_and_legacy)
{
	char *enc;
	struct np_image_upload *u = upload_roundtrip("upload-ready", &enc);

	cr_assert_eq(u->state, NP_UPLOAD_READY);
	cr_assert_str_eq(u->external_id, "f1e2d3c4-b5a6-4978-8a9b-0c1d2e3f4a5b");
	cr_assert_str_eq(u->external_name, "ubuntu-jammy-1726550000");
	cr_assert_str_eq(u->format, "qcow2");
	assert_keys(enc, upload_keys, 8);
	assert_same_as_golden("upload-ready", enc);
	free(enc);
	np_image_upload_free(u);

	u = upload_roundtrip("upload-legacy", &enc);
	cr_assert_eq(u->state, NP_UPLOAD_UPLOADING);
	cr_assert_eq(u->state_time, 1500000100.0);
	cr_assert_null(u->external_id);
	cr_assert_null(u->format);
	cr_assert_str_eq(u->username, "zuul");
	cr_assert_str_eq(u->python_path, "/usr/bin/python2");
	assert_keys(enc, upload_keys, 8);
	free(enc);
	np_image_upload_free(u);
	np_image_upload_free(NULL);
}

Test(build, states_by_name)
{
	int i;

	for (i = 0; i < NP_BUILD_STATE_COUNT; i++)
		cr_assert_eq(np_build_state_parse(np_build_state_name(i)), i);
	for (i = 0; i < NP_UPLOAD_STATE_COUNT; i++)
		cr_assert_eq(np_upload_state_parse(np_upload_state_name(i)), i);
	for (i = 0; i < NP_REQ_STATE_COUNT; i++)
		cr_assert_eq(np_request_state_parse(np_request_state_name(i)), i);
	cr_assert_eq(np_upload_state_parse("building"), -1);
}

/* ---- Components ------------------------------------------------------------------ */

static const char *const base_keys[] = {"hostname", "kind", "model_api", "state", "version"};
static const char *const pool_keys[] = {
    "hostname", "id",	    "kind",	     "model_api", "name",
    "paused",	"priority", "provider_name", "state",	  "supported_labels",
    "version"};

Test(component, launcher_and_builder_have_no_pool_keys)
{
	char *enc;
	struct np_component *c =
	    component_roundtrip("component-launcher", "nl01.example.com0000000003", &enc);

	cr_assert_str_eq(c->kind, "launcher");
	cr_assert_str_eq(c->hostname, "nl01.example.com");
	cr_assert_str_eq(c->state, "running");
	cr_assert_str_eq(c->version, "10.0.1.dev12");
	cr_assert_eq(c->model_api, 0);
	assert_keys(enc, base_keys, 5);
	assert_same_as_golden("component-launcher", enc);
	free(enc);
	np_component_free(c);

	c = component_roundtrip("component-builder", "nb01.example.com0000000000", &enc);
	cr_assert_str_eq(c->kind, "builder");
	cr_assert_str_eq(c->state, "paused");
	assert_same_as_golden("component-builder", enc);
	free(enc);
	np_component_free(c);
}

Test(component, pool_as_upstream_registers_it)
{
	char *enc;
	struct np_component *c =
	    component_roundtrip("component-pool", "nl01.example.com0000000004", &enc);

	cr_assert_str_eq(c->kind, "pool");
	cr_assert(strncmp(c->id, "nl01.example.com-PoolWorker.rax-dfw-main-", 41) == 0);
	cr_assert_str_eq(c->pool_name, "main");
	cr_assert_str_eq(c->provider_name, "rax-dfw");
	cr_assert_eq(c->supported_labels.n, 2);
	cr_assert_str_eq(c->supported_labels.v[1], "debian-bookworm");
	cr_assert_eq(c->priority, 50);
	cr_assert_eq(c->paused, 1);
	assert_keys(enc, pool_keys, 11);
	assert_same_as_golden("component-pool", enc);
	free(enc);
	np_component_free(c);
}

Test(component, old_pool_record_gets_defaults)
{
	char *enc;
	struct np_component *c =
	    component_roundtrip("component-pool-old", "nl00.example.com0000000001", &enc);

	cr_assert_eq(c->priority, 100);
	cr_assert_eq(c->paused, 0);
	cr_assert_null(c->pool_name);
	cr_assert_eq(c->supported_labels.n, 1);
	assert_keys(enc, pool_keys, 11);
	free(enc);
	np_component_free(c);
}

Test(component, pool_keys_on_other_kinds_stay_extra)
{
	const char *body = "{\"hostname\": \"h\", \"id\": \"x\", \"kind\": \"launcher\", "
			   "\"priority\": 5}";
	char err[128], *enc;
	struct np_component *c;
	json_t *o;

	cr_assert_eq(np_component_decode("h0000000001", body, strlen(body), &c, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_null(c->id);
	cr_assert_eq(json_object_size(c->extra), 2);
	enc = np_component_encode(c, NULL);
	o = parse(enc);
	cr_assert_str_eq(json_string_value(json_object_get(o, "id")), "x");
	cr_assert_eq(json_integer_value(json_object_get(o, "priority")), 5);
	cr_assert_eq(json_object_size(o), 7);
	json_decref(o);
	free(enc);
	np_component_free(c);
}

Test(component, missing_hostname_is_the_znode_name)
{
	const char *body = "{\"kind\": \"builder\"}";
	char err[128], *enc;
	struct np_component *c;

	cr_assert_eq(np_component_decode("nb02.example.com0000000009", body, strlen(body), &c, err,
					 sizeof(err)),
		     0, "%s", err);
	cr_assert_str_eq(c->hostname, "nb02.example.com0000000009");
	cr_assert_str_eq(c->state, "stopped");
	enc = np_component_encode(c, NULL);
	cr_assert_str_eq(
	    enc, "{\"hostname\": \"nb02.example.com0000000009\", \"kind\": "
		 "\"builder\", \"model_api\": 0, \"state\": \"stopped\", \"version\": null}");
	free(enc);
	np_component_free(c);
}

Test(component, new_pool_sorted_keys)
{
	struct np_component *c = np_component_new("pool");
	char *enc;

	c->hostname = strdup("nl01");
	np_strv_push(&c->supported_labels, "b");
	np_strv_push(&c->supported_labels, "a");
	c->extra = json_pack("{s:{s:i,s:i}}", "zz", "b", 1, "a", 2);
	enc = np_component_encode(c, NULL);
	cr_assert_str_eq(enc,
			 "{\"hostname\": \"nl01\", \"id\": null, \"kind\": \"pool\", "
			 "\"model_api\": 0, \"name\": null, \"paused\": false, \"priority\": 100, "
			 "\"provider_name\": null, \"state\": \"stopped\", \"supported_labels\": "
			 "[\"b\", \"a\"], \"version\": null, \"zz\": {\"a\": 2, \"b\": 1}}");
	free(enc);
	np_component_free(c);
	np_component_free(NULL);
}

/* ---- strv ---------------------------------------------------------------------------- */

Test(strv, push_copy_contains_clear)
{
	struct np_strv a = {0}, b = {0};

	np_strv_push(&a, "x");
	np_strv_push(&a, NULL);
	np_strv_push(&b, "old");
	np_strv_copy(&b, &a);
	cr_assert_eq(b.n, 2);
	cr_assert_str_eq(b.v[1], "");
	cr_assert(np_strv_contains(&b, "x"));
	cr_assert_not(np_strv_contains(&b, "old"));
	cr_assert_not(np_strv_contains(&b, NULL));
	np_strv_clear(&a);
	np_strv_clear(&b);
	cr_assert_eq(a.n, 0);
	cr_assert_null(a.v);
}

/* ---- every golden against its meaning ------------------------------------------ */

/*
 * What our encoding must hold for key k of golden g, by the documented
 * defaults (model.h): the same JSON except for upstream's coercions. Returns
 * a new reference, or NULL to skip a key checked by its own test.
 */
static json_t *
expected_value(int kind, json_t *g, const char *k, json_t *v)
{
	if (strcmp(k, "state_time") == 0 || strcmp(k, "created_time") == 0) {
		/* an int time is written as the same float */
		if (json_is_integer(v))
			return json_real((double)json_integer_value(v));
		return json_incref(v);
	}
	if (kind == 0 && strcmp(k, "type") == 0 && json_is_string(v)) {
		json_t *a = json_array();

		if (json_string_length(v) > 0)
			json_array_append(a, v);
		return a;
	}
	if (kind == 0 && strcmp(k, "ssh_port") == 0) {
		json_t *cp = json_object_get(g, "connection_port");

		return json_incref(cp != NULL && !json_is_null(cp) ? cp : v);
	}
	if (kind == 0 && strcmp(k, "hold_expiration") == 0 && !json_is_integer(v) &&
	    !json_is_null(v))
		return NULL; /* coerced: node.hold_expiration_* tests */
	if (kind == 1 && strcmp(k, "formats") == 0)
		return NULL; /* sorted: build.legacy_defaults_and_sorted_formats */
	return json_incref(v);
}

static void
check_meaning(int kind, const char *name)
{
	char err[256] = "", *enc = NULL;
	size_t len;
	char *g = golden(name, &len);
	json_t *gj = parse(g), *ej, *v, *want;
	const char *k;
	int rc = -1;

	switch (kind) {
	case 0: {
		struct np_node *n;

		if ((rc = np_node_decode("0000000001", g, len, &n, err, sizeof(err))) == 0) {
			enc = np_node_encode(n, NULL);
			np_node_free(n);
		}
		break;
	}
	case 1: {
		struct np_image_build *b;

		if ((rc = np_image_build_decode("0000000001", g, len, &b, err, sizeof(err))) == 0) {
			enc = np_image_build_encode(b, NULL);
			np_image_build_free(b);
		}
		break;
	}
	case 2: {
		struct np_request *r;

		if ((rc = np_request_decode("100-0000000001", g, len, &r, err, sizeof(err))) == 0) {
			enc = np_request_encode(r, NULL);
			np_request_free(r);
		}
		break;
	}
	case 3: {
		struct np_image_upload *u;

		if ((rc = np_image_upload_decode("0000000001", g, len, &u, err, sizeof(err))) ==
		    0) {
			enc = np_image_upload_encode(u, NULL);
			np_image_upload_free(u);
		}
		break;
	}
	case 4: {
		struct np_component *c;

		if ((rc = np_component_decode("h0000000001", g, len, &c, err, sizeof(err))) == 0) {
			enc = np_component_encode(c, NULL);
			np_component_free(c);
		}
		break;
	}
	}
	cr_assert_eq(rc, 0, "%s: %s", name, err);
	cr_assert_not_null(enc);
	ej = parse(enc);
	json_object_foreach(gj, k, v)
	{
		json_t *got = json_object_get(ej, k);

		cr_assert_not_null(got, "%s: key '%s' lost", name, k);
		want = expected_value(kind, gj, k, v);
		if (want == NULL)
			continue;
		cr_assert(json_equal(want, got), "%s: key '%s' changed", name, k);
		json_decref(want);
	}
	json_decref(ej);
	json_decref(gj);
	free(enc);
	free(g);
}

Test(golden, every_golden_keeps_its_meaning)
{
	static const char *const nodes[] = {
	    "node-ready",	"node-type-string",	"node-ssh-port-only", "node-k8s",
	    "node-hold-string", "node-hold-nonnumeric", "node-hold-float",    "node-hold-int",
	    "node-aws",		"node-int-times",	"node-extra-keys",    "node-minimal",
	    "node-metastatic"};
	static const char *const builds[] = {"build-ready", "build-building", "build-legacy"};
	static const char *const requests[] = {"request-zuul", "request-min-ready",
					       "request-fulfilled", "request-minimal"};
	static const char *const uploads[] = {"upload-ready", "upload-legacy"};
	static const char *const comps[] = {"component-launcher", "component-builder",
					    "component-pool", "component-pool-old"};
	size_t i;

	for (i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++)
		check_meaning(0, nodes[i]);
	for (i = 0; i < sizeof(builds) / sizeof(builds[0]); i++)
		check_meaning(1, builds[i]);
	for (i = 0; i < sizeof(requests) / sizeof(requests[0]); i++)
		check_meaning(2, requests[i]);
	for (i = 0; i < sizeof(uploads) / sizeof(uploads[0]); i++)
		check_meaning(3, uploads[i]);
	for (i = 0; i < sizeof(comps) / sizeof(comps[0]); i++)
		check_meaning(4, comps[i]);
}

/* ---- records as Zuul writes them (tests/data/golden/make_golden.py) -------------- */

/* JSON value of text; numbers beyond jansson's as floats (for json_equal). */
static json_t *
parse_loose(const char *s)
{
	json_error_t e;
	json_t *j = json_loads(s, JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, &e);

	cr_assert_not_null(j, "not JSON (%s): %s", e.text, s);
	return j;
}

/*
 * A body Zuul writes decodes without a note (nothing of it is odd to us),
 * and encodes back to the same JSON value: every key, Zuul's `id` and
 * user_data object among them, with its value as written.
 */
Test(zuul, nodes_round_trip_verbatim)
{
	static const char *const names[] = {"node-zuul-in-use", "node-zuul-used", "node-zuul-hold",
					    "node-zuul-released", "node-zuul-static-in-use"};
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		size_t len;
		char *g = golden(names[i], &len), err[256] = "x", *enc, *enc2;
		struct np_node *n = NULL, *n2 = NULL;
		json_t *gj, *ej;

		cr_assert_eq(np_node_decode("0000000042", g, len, &n, err, sizeof(err)), 0, "%s",
			     err);
		cr_assert_str_eq(err, "", "%s: %s", names[i], err);
		cr_assert(json_is_object(n->user_data), "%s: user_data", names[i]);
		cr_assert_str_eq(json_string_value(json_object_get(n->user_data, "zuul_system")),
				 "3a9f2c61d8b04e7f95c2a1b0e4d7f6c8");
		enc = np_node_encode(n, NULL);
		gj = parse(g);
		ej = parse(enc);
		cr_assert(json_equal(gj, ej), "%s changed:\n%s\n%s", names[i], g, enc);
		cr_assert_eq(np_node_decode("0000000042", enc, strlen(enc), &n2, err, sizeof(err)),
			     0);
		enc2 = np_node_encode(n2, NULL);
		cr_assert_str_eq(enc, enc2);
		json_decref(gj);
		json_decref(ej);
		free(enc);
		free(enc2);
		free(g);
		np_node_free(n);
		np_node_free(n2);
	}
}

/* What Zuul's state and hold keys mean to us. */
Test(zuul, hold_and_in_use_as_zuul_sets_them)
{
	size_t len;
	char *g = golden("node-zuul-hold", &len), err[256];
	struct np_node *n = NULL;

	cr_assert_eq(np_node_decode("0000000042", g, len, &n, err, sizeof(err)), 0);
	cr_assert_eq(n->state, NP_NODE_HOLD);
	cr_assert_str_eq(n->hold_job, "example review.example.org/org/repo tox-py311 .*");
	cr_assert_str_eq(n->comment, "debugging a flaky test");
	cr_assert_eq(n->has_hold_expiration, 1);
	cr_assert_eq(n->hold_expiration, 86400);
	cr_assert_str_eq(n->provider, "rax-dfw");
	cr_assert_eq(json_integer_value(json_object_get(n->resources, "cores")), 4);
	np_node_free(n);
	free(g);
	g = golden("node-zuul-static-in-use", &len);
	cr_assert_eq(np_node_decode("0000000042", g, len, &n, err, sizeof(err)), 0);
	cr_assert_eq(n->state, NP_NODE_IN_USE);
	cr_assert_eq(n->slot, 0);
	cr_assert_str_eq(n->hostname, "host-a");
	np_node_free(n);
	free(g);
}

/* Our writes to a node Zuul wrote (a used node set deleting) keep what Zuul
 * put there: its `id` and user_data object. */
Test(zuul, our_writes_keep_zuul_keys)
{
	size_t len;
	char *g = golden("node-zuul-used", &len), err[256], *enc;
	struct np_node *n = NULL;
	json_t *o, *gj;

	cr_assert_eq(np_node_decode("0000000042", g, len, &n, err, sizeof(err)), 0);
	np_node_set_state(n, NP_NODE_DELETING);
	enc = np_node_encode(n, NULL);
	o = parse(enc);
	gj = parse(g);
	cr_assert_str_eq(json_string_value(json_object_get(o, "state")), "deleting");
	cr_assert_str_eq(json_string_value(json_object_get(o, "id")), "0000000042");
	cr_assert(json_equal(json_object_get(o, "user_data"), json_object_get(gj, "user_data")));
	json_decref(o);
	json_decref(gj);
	free(enc);
	free(g);
	np_node_free(n);
}

/* A request as Zuul submits it: 128-bit trace ids come back digit for
 * digit; every other key as written; fulfilling it adds our keys. */
Test(zuul, request_round_trips_verbatim)
{
	size_t len;
	char *g = golden("request-zuul-submit", &len), err[256] = "x", *enc;
	struct np_request *r = NULL;
	json_t *gj, *ej;

	cr_assert_eq(np_request_decode("200-0000000042", g, len, &r, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_str_eq(err, "");
	cr_assert_eq(r->node_types.n, 2);
	cr_assert_str_eq(r->requestor, "3a9f2c61d8b04e7f95c2a1b0e4d7f6c8");
	cr_assert_str_eq(r->tenant_name, "example");
	cr_assert_eq(r->reuse, 1);
	enc = np_request_encode(r, NULL);
	cr_assert(strstr(enc, "\"trace_id\": 227905469349181577839468446349154138577") != NULL,
		  "%s", enc);
	cr_assert(strstr(enc, "\"span_id\": 16143534102395214143") != NULL, "%s", enc);
	gj = parse_loose(g);
	ej = parse_loose(enc);
	{
		const char *k;
		json_t *v;
		json_object_foreach(gj, k, v)
		    cr_assert(json_equal(v, json_object_get(ej, k)), "key %s changed: %s", k, enc);
	}
	json_decref(gj);
	json_decref(ej);
	free(enc);
	/* the launcher's acceptance */
	np_request_set_state(r, NP_REQ_PENDING);
	np_strv_push(&r->declined_by, "nl02-PoolWorker.x-main-0");
	enc = np_request_encode(r, NULL);
	cr_assert(strstr(enc, "\"trace_id\": 227905469349181577839468446349154138577") != NULL);
	cr_assert(strstr(enc, "\"state\": \"pending\"") != NULL);
	free(enc);
	free(g);
	np_request_free(r);
}

/* ---- a copy stands for a decode of its encoding (issue 25) ------------------ */

/* NULL and NULL, or equal JSON values. */
static int
json_same(const json_t *a, const json_t *b)
{
	return (a == NULL && b == NULL) || (a != NULL && b != NULL && json_equal(a, b));
}

/* What a cache holds after our own write of n: a copy (np_node_dup), in
 * place of a decode of what was written (worker/launcher.c own_obj). */
static void
check_node_copy(struct np_node *n, const char *what)
{
	char err[256], *enc = np_node_encode(n, NULL), *a, *b;
	struct np_node *d = np_node_dup(n), *y = NULL;

	cr_assert_not_null(enc, "%s", what);
	cr_assert_eq(np_node_decode(n->id, enc, strlen(enc), &y, err, sizeof(err)), 0, "%s", what);
	a = np_node_encode(d, NULL);
	b = np_node_encode(y, NULL);
	cr_assert_str_eq(a, b, "%s", what);
	cr_assert_str_eq(d->id, y->id);
	cr_assert_eq(d->state, y->state, "%s", what);
	cr_assert_eq(d->state_time, y->state_time, "%s: times to 17 digits", what);
	cr_assert_eq(d->created_time, y->created_time, "%s", what);
	cr_assert(json_same(d->odd, y->odd), "%s: odd values", what);
	cr_assert(json_same(d->odd_as, y->odd_as), "%s: what they read as", what);
	cr_assert(json_same(d->extra, y->extra), "%s: unknown keys", what);
	free(enc);
	free(a);
	free(b);
	np_node_free(d);
	np_node_free(y);
}

/*
 * The launcher's caches take a copy of a record it wrote instead of
 * decoding the bytes back: for every record we read (goldens, Zuul's,
 * odd values kept verbatim) and then change as the launcher does, the
 * copy is what the decode would give: the same fields, odd values and
 * unknown keys, times to the last bit.
 */
Test(node, dup_stands_for_a_decode_of_its_encoding)
{
	static const char *const names[] = {"node-ready",
					    "node-type-string",
					    "node-ssh-port-only",
					    "node-k8s",
					    "node-hold-string",
					    "node-hold-float",
					    "node-aws",
					    "node-int-times",
					    "node-extra-keys",
					    "node-minimal",
					    "node-metastatic",
					    "node-zuul-in-use",
					    "node-zuul-static-in-use"};
	static const char *const odd[] = {"{\"state\": \"bogus\"}",
					  "{\"type\": [\"a\", 1]}",
					  "{\"connection_port\": \"22\"}",
					  "{\"hold_expiration\": []}",
					  "{\"slot\": -2}",
					  "{\"comment\": \"a\\u0000b\"}",
					  "{\"allocated_to\": {\"r\": 1}}",
					  "{\"state_time\": 1e400, \"x\": NaN}"};
	char err[256];
	size_t i, len;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char *g = golden(names[i], &len);
		struct np_node *n = NULL;

		cr_assert_eq(np_node_decode("0000000042", g, len, &n, err, sizeof(err)), 0);
		check_node_copy(n, names[i]);
		np_node_set_state(n, NP_NODE_DELETING); /* our change, as cleanup's */
		check_node_copy(n, names[i]);
		free(g);
		np_node_free(n);
	}
	for (i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
		struct np_node *n = NULL;

		cr_assert_eq(
		    np_node_decode("0000000007", odd[i], strlen(odd[i]), &n, err, sizeof(err)), 0);
		check_node_copy(n, odd[i]);
		free(n->public_ipv4);
		n->public_ipv4 = strdup("203.0.113.9");
		check_node_copy(n, odd[i]);
		np_node_free(n);
	}
}

/* The same for node requests. */
Test(request, dup_stands_for_a_decode_of_its_encoding)
{
	static const char *const names[] = {"request-zuul", "request-min-ready",
					    "request-fulfilled", "request-minimal"};
	char err[256];
	size_t i, len;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char *g = golden(names[i], &len), *enc, *a, *b;
		struct np_request *r = NULL, *d, *y = NULL;

		cr_assert_eq(np_request_decode("200-0000000042", g, len, &r, err, sizeof(err)), 0);
		np_request_set_state(r, NP_REQ_PENDING);
		np_strv_push(&r->declined_by, "other-launcher");
		enc = np_request_encode(r, NULL);
		d = np_request_dup(r);
		cr_assert_eq(np_request_decode(r->id, enc, strlen(enc), &y, err, sizeof(err)), 0);
		a = np_request_encode(d, NULL);
		b = np_request_encode(y, NULL);
		cr_assert_str_eq(a, b, "%s", names[i]);
		cr_assert_str_eq(d->id, y->id);
		cr_assert_eq(d->state_time, y->state_time);
		cr_assert(json_same(d->odd, y->odd));
		cr_assert(json_same(d->odd_as, y->odd_as));
		cr_assert(json_same(d->extra, y->extra));
		cr_assert(json_same(d->requestor_data, y->requestor_data));
		free(g);
		free(enc);
		free(a);
		free(b);
		np_request_free(r);
		np_request_free(d);
		np_request_free(y);
	}
}
