/*
 * Nodepool's ZooKeeper records (see model.h): decode with upstream's
 * tolerance, encode every key in upstream's toDict() order.
 */
#include "model.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>
#include "xalloc.h"

/* ---- small helpers ------------------------------------------------------- */

static double
now_seconds(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static json_t *
ref_or_null(json_t *j)
{
	return j != NULL ? json_incref(j) : json_null();
}

static json_t *
copy_or_null(const json_t *j)
{
	/* json_deep_copy takes a non-const pointer in jansson < 2.14. */
	return j != NULL ? json_deep_copy((json_t *)j) : NULL;
}

void
np_strv_push(struct np_strv *sv, const char *s)
{
	char **v = realloc(sv->v, (sv->n + 1) * sizeof(*v));

	if (v == NULL)
		abort();
	sv->v = v;
	sv->v[sv->n++] = xstrdup(s != NULL ? s : "");
}

void
np_strv_clear(struct np_strv *sv)
{
	size_t i;

	for (i = 0; i < sv->n; i++)
		free(sv->v[i]);
	free(sv->v);
	sv->v = NULL;
	sv->n = 0;
}

int
np_strv_contains(const struct np_strv *sv, const char *s)
{
	size_t i;

	if (s == NULL)
		return 0;
	for (i = 0; i < sv->n; i++)
		if (strcmp(sv->v[i], s) == 0)
			return 1;
	return 0;
}

void
np_strv_copy(struct np_strv *dst, const struct np_strv *src)
{
	size_t i;

	np_strv_clear(dst);
	for (i = 0; i < src->n; i++)
		np_strv_push(dst, src->v[i]);
}

static int
strv_cmp_sort(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ---- state names ----------------------------------------------------------- */

static const char *const node_states[NP_NODE_STATE_COUNT] = {
    "init", "building", "testing", "ready",   "in-use",	 "used",
    "hold", "deleting", "failed",  "aborted", "deleted",
};
static const char *const request_states[NP_REQ_STATE_COUNT] = {
    "requested",
    "pending",
    "fulfilled",
    "failed",
};
static const char *const build_states[NP_BUILD_STATE_COUNT] = {
    "building",
    "ready",
    "failed",
    "deleting",
};
static const char *const upload_states[NP_UPLOAD_STATE_COUNT] = {
    "uploading",
    "ready",
    "failed",
    "deleting",
};

static const char *
state_name(const char *const *names, int count, int state)
{
	return state >= 0 && state < count ? names[state] : NULL;
}

static int
state_parse(const char *const *names, int count, const char *name)
{
	int i;

	if (name == NULL)
		return -1;
	for (i = 0; i < count; i++)
		if (strcmp(names[i], name) == 0)
			return i;
	return -1;
}

const char *
np_node_state_name(int state)
{
	return state_name(node_states, NP_NODE_STATE_COUNT, state);
}

int
np_node_state_parse(const char *name)
{
	return state_parse(node_states, NP_NODE_STATE_COUNT, name);
}

const char *
np_request_state_name(int state)
{
	return state_name(request_states, NP_REQ_STATE_COUNT, state);
}

int
np_request_state_parse(const char *name)
{
	return state_parse(request_states, NP_REQ_STATE_COUNT, name);
}

const char *
np_build_state_name(int state)
{
	return state_name(build_states, NP_BUILD_STATE_COUNT, state);
}

int
np_build_state_parse(const char *name)
{
	return state_parse(build_states, NP_BUILD_STATE_COUNT, name);
}

const char *
np_upload_state_name(int state)
{
	return state_name(upload_states, NP_UPLOAD_STATE_COUNT, state);
}

int
np_upload_state_parse(const char *name)
{
	return state_parse(upload_states, NP_UPLOAD_STATE_COUNT, name);
}

/* ---- decoding ---------------------------------------------------------------
 *
 * A decode loads the body, then takes each known key out of a shallow copy
 * of the object ("rest"); what remains is the record's `extra`. Every getter
 * follows upstream's d.get(key, default): a missing key gives the default,
 * JSON null gives NULL/unset (not the default). A value of a type the field
 * cannot hold is "odd": the field keeps its default, the value goes to `odd`
 * and a note to err; the record is still decoded.
 */

struct dctx {
	const char *what; /* "node 0000000001", for messages */
	json_t *rest;	  /* keys not consumed yet */
	json_t *odd;	  /* key -> value kept verbatim */
	char *err;
	size_t errlen;
	int failed;
	int nodd;
};

static const char *
jtype_name(const json_t *j)
{
	if (np_json_raw_number(j) != NULL)
		return "a number beyond 64 bits";
	switch (json_typeof(j)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "a list";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
		return "an integer";
	case JSON_REAL:
		return "a float";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	case JSON_NULL:
		return "null";
	}
	return "?";
}

static void dfail(struct dctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
dfail(struct dctx *c, const char *fmt, ...)
{
	va_list ap;
	int n = 0;

	if (c->failed)
		return; /* keep the first message */
	c->failed = 1;
	if (c->err == NULL || c->errlen == 0)
		return;
	n = snprintf(c->err, c->errlen, "%s: ", c->what);
	if (n < 0 || (size_t)n >= c->errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
	va_end(ap);
}

static void dodd(struct dctx *c, const char *key, const json_t *v, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* key's value v is odd: kept verbatim; the first note goes to err, later
 * ones are counted in it. */
static void
dodd(struct dctx *c, const char *key, const json_t *v, const char *fmt, ...)
{
	va_list ap;
	int n;
	size_t used;

	if (c->odd == NULL && (c->odd = json_object()) == NULL)
		abort();
	if (json_object_get(c->odd, key) != NULL)
		return; /* one note per key */
	json_object_set(c->odd, key, (json_t *)v);
	c->nodd++;
	if (c->err == NULL || c->errlen == 0)
		return;
	if (c->nodd == 1) {
		n = snprintf(c->err, c->errlen, "%s: key '%s': ", c->what, key);
		if (n < 0 || (size_t)n >= c->errlen)
			return;
		va_start(ap, fmt);
		vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
		va_end(ap);
		used = strlen(c->err);
		snprintf(c->err + used, c->errlen - used, " (kept verbatim)");
	} else {
		char *more = strstr(c->err, " (kept verbatim");
		if (more != NULL)
			snprintf(more, c->errlen - (size_t)(more - c->err),
				 " (kept verbatim; %d keys in all)", c->nodd);
	}
}

static void
dtype(struct dctx *c, const char *key, const char *want, const json_t *got)
{
	dodd(c, key, got, "expected %s, got %s", want, jtype_name(got));
}

/*
 * Load data as a JSON object. Returns the object or NULL (message set).
 */
static json_t *
dload(struct dctx *c, const char *data, size_t len)
{
	json_error_t jerr;
	json_t *root;

	if (c->err != NULL && c->errlen > 0)
		c->err[0] = '\0';
	if (data == NULL || len == 0) {
		dfail(c, "empty body");
		return NULL;
	}
	root = json_loadb(data, len, JSON_ALLOW_NUL, &jerr);
	if (root == NULL)
		root = np_json_raw_load(data, len);
	if (root == NULL) {
		dfail(c, "invalid JSON at line %d column %d: %s", jerr.line, jerr.column,
		      jerr.text);
		return NULL;
	}
	if (!json_is_object(root)) {
		dfail(c, "body is %s, not an object", jtype_name(root));
		json_decref(root);
		return NULL;
	}
	c->rest = json_copy(root);
	if (c->rest == NULL)
		abort();
	return root;
}

/* Take key out of rest; NULL when missing. Borrowed from root. */
static json_t *
dtake_any(struct dctx *c, json_t *root, const char *key)
{
	json_t *v = json_object_get(root, key);

	if (v != NULL)
		json_object_del(c->rest, key);
	return v;
}

/* As dtake_any, for a typed field: a number jansson cannot hold is odd and
 * reads as missing. */
static json_t *
dtake(struct dctx *c, json_t *root, const char *key)
{
	json_t *v = dtake_any(c, root, key);

	if (v != NULL && np_json_raw_number(v) != NULL) {
		dodd(c, key, v, "a number beyond what this field holds");
		return NULL;
	}
	return v;
}

/* The remaining unknown keys, or NULL when none. Consumes rest. */
static json_t *
dextra(struct dctx *c)
{
	json_t *e = c->rest;

	c->rest = NULL;
	if (e != NULL && json_object_size(e) == 0) {
		json_decref(e);
		e = NULL;
	}
	return e;
}

/* A string without NUL (a C string can hold it). */
static int
cstring(const json_t *v)
{
	return json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v) &&
	       np_json_raw_number(v) == NULL;
}

/* A string or null; dflt (may be NULL) when missing. */
static void
get_str(struct dctx *c, json_t *root, const char *key, const char *dflt, char **out)
{
	json_t *v = dtake(c, root, key);

	free(*out);
	*out = NULL;
	if (v == NULL)
		*out = xstrdup(dflt);
	else if (cstring(v))
		*out = xstrdup(json_string_value(v));
	else if (json_is_string(v))
		dodd(c, key, v, "a string containing NUL");
	else if (!json_is_null(v))
		dtype(c, key, "a string or null", v);
}

/* A number (int or float, as time.time() or a hand-written int); 0 when
 * missing, null or odd. Returns 1 when a number was present. */
static int
get_time(struct dctx *c, json_t *root, const char *key, double *out)
{
	json_t *v = dtake(c, root, key);

	*out = 0;
	if (v == NULL || json_is_null(v))
		return 0;
	if (!json_is_number(v)) {
		dtype(c, key, "a number or null", v);
		return 0;
	}
	*out = json_number_value(v);
	return 1;
}

/* Elements of a list: strings as they are; any other element is put in
 * the list as its compact JSON text (which matches no label or id) and
 * the key is odd. */
static void
strv_from_array(struct dctx *c, const char *key, json_t *a, struct np_strv *out)
{
	size_t i;
	json_t *e;
	int odd = 0;

	json_array_foreach(a, i, e)
	{
		if (cstring(e)) {
			np_strv_push(out, json_string_value(e));
			continue;
		}
		if (!odd)
			dodd(c, key, a, "element %zu is %s, not a string", i, jtype_name(e));
		odd = 1;
		{
			char *t = json_dumps(e, JSON_ENCODE_ANY | JSON_COMPACT);
			np_strv_push(out, t != NULL ? t : "?");
			free(t);
		}
	}
}

/* A list of strings; empty when missing, null or odd. */
static void
get_strv(struct dctx *c, json_t *root, const char *key, struct np_strv *out)
{
	json_t *v = dtake(c, root, key);

	np_strv_clear(out);
	if (v == NULL || json_is_null(v))
		return;
	if (!json_is_array(v)) {
		dtype(c, key, "a list of strings", v);
		return;
	}
	strv_from_array(c, key, v, out);
}

/* An object or null (NULL); anything else is odd. */
static void
get_obj(struct dctx *c, json_t *root, const char *key, json_t **out)
{
	json_t *v = dtake(c, root, key);

	*out = NULL;
	if (v == NULL || json_is_null(v))
		return;
	if (!json_is_object(v)) {
		dtype(c, key, "an object or null", v);
		return;
	}
	*out = json_incref(v);
}

/* Any JSON value; null and missing give NULL. */
static void
get_any(struct dctx *c, json_t *root, const char *key, json_t **out)
{
	json_t *v = dtake_any(c, root, key);

	*out = (v == NULL || json_is_null(v)) ? NULL : json_incref(v);
}

/* An integer; dflt when missing, null or odd; a float is truncated (and
 * odd, so it is written back as it came). */
static void
get_int(struct dctx *c, json_t *root, const char *key, long long dflt, long long *out)
{
	json_t *v = dtake(c, root, key);

	*out = dflt;
	if (v == NULL || json_is_null(v))
		return;
	if (json_is_real(v) && isfinite(json_real_value(v)) && fabs(json_real_value(v)) < 0x1p62) {
		*out = (long long)json_real_value(v);
		dtype(c, key, "an integer", v);
		return;
	}
	if (!json_is_integer(v)) {
		dtype(c, key, "an integer", v);
		return;
	}
	*out = json_integer_value(v);
}

/* Python's truthiness of a JSON value. */
static int
truthy(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return json_object_size(v) > 0;
	case JSON_ARRAY:
		return json_array_size(v) > 0;
	case JSON_STRING:
		return json_string_length(v) > 0;
	case JSON_INTEGER:
		return json_integer_value(v) != 0;
	case JSON_REAL:
		return json_real_value(v) != 0;
	case JSON_TRUE:
		return 1;
	default:
		return 0;
	}
}

/* A boolean; dflt when missing, false when null (Python: None is falsy);
 * any other value by Python's truthiness, as upstream's `if x` (odd). */
static void
get_bool(struct dctx *c, json_t *root, const char *key, int dflt, int *out)
{
	json_t *v = dtake_any(c, root, key);

	*out = dflt;
	if (v == NULL)
		return;
	if (json_is_null(v))
		*out = 0;
	else if (json_is_boolean(v))
		*out = json_is_true(v);
	else {
		*out = np_json_raw_number(v) != NULL ? 1 : truthy(v);
		dtype(c, key, "a boolean", v);
	}
}

/* The state key: a known name; dflt when missing or null; -1 (odd) for an
 * unknown name or a value that is not a string. */
static void
get_state(struct dctx *c, json_t *root, int (*parse)(const char *), int dflt, int *out)
{
	json_t *v = dtake(c, root, "state");

	*out = dflt;
	if (v == NULL) {
		if (json_object_get(root, "state") != NULL)
			*out = -1; /* a number beyond 64 bits */
		return;
	}
	if (json_is_null(v))
		return;
	if (!cstring(v)) {
		dtype(c, "state", "a string", v);
		*out = -1;
		return;
	}
	*out = parse(json_string_value(v));
	if (*out < 0)
		dodd(c, "state", v, "unknown state '%.64s'", json_string_value(v));
}

/* After a decode: what each odd key's field encodes to now (absent keys
 * stay absent), so that encode can tell a field our code has not set. */
static json_t *
odd_as_of(const json_t *odd, const json_t *typed)
{
	json_t *as = json_object(), *v;
	const char *k;

	if (as == NULL)
		abort();
	json_object_foreach((json_t *)odd, k, v)
	{
		json_t *t = json_object_get(typed, k);
		if (t != NULL)
			json_object_set(as, k, t);
	}
	return as;
}

static json_t *node_obj(const struct np_node *n, int *badp);
static json_t *request_obj(const struct np_request *r, int *badp);
static json_t *image_build_obj(const struct np_image_build *b, int *badp);
static json_t *image_upload_obj(const struct np_image_upload *u, int *badp);
static json_t *component_obj(const struct np_component *c, int *badp);

/* Saturating conversion of a double to long long, truncating toward 0. */
static long long
trunc_ll(double x)
{
	if (x >= 0x1p63)
		return LLONG_MAX;
	if (x < -0x1p63)
		return LLONG_MIN;
	return (long long)x;
}

/*
 * Python's int(str) for base 10: surrounding whitespace, an optional sign,
 * digits with single underscores between them. Returns 0 and *out on
 * success (saturating), -1 when not a number.
 */
static int
py_int_str(const char *s, long long *out)
{
	const char *ws = " \t\n\v\f\r\x1c\x1d\x1e\x1f";
	int neg = 0, digits = 0;
	unsigned long long v = 0, lim;
	const char *end;

	while (*s != '\0' && strchr(ws, *s) != NULL)
		s++;
	end = s + strlen(s);
	while (end > s && strchr(ws, end[-1]) != NULL)
		end--;
	if (s < end && (*s == '+' || *s == '-'))
		neg = *s++ == '-';
	lim = neg ? (unsigned long long)LLONG_MAX + 1 : (unsigned long long)LLONG_MAX;
	for (; s < end; s++) {
		if (*s == '_') {
			if (digits == 0 || s + 1 >= end || s[1] < '0' || s[1] > '9')
				return -1;
			continue;
		}
		if (*s < '0' || *s > '9')
			return -1;
		digits++;
		if (v > (lim - (unsigned long long)(*s - '0')) / 10)
			v = lim; /* saturate */
		else
			v = v * 10 + (unsigned long long)(*s - '0');
	}
	if (digits == 0)
		return -1;
	if (neg)
		*out = v == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN : -(long long)v;
	else
		*out = (long long)v;
	return 0;
}

/* ---- encoding helpers -------------------------------------------------------
 * Each setter records failure (invalid UTF-8, non-finite number) in *bad.
 */

static void
put(json_t *o, const char *key, json_t *v, int *bad)
{
	if (v == NULL || json_object_set_new(o, key, v) != 0)
		*bad = 1;
}

static void
put_str(json_t *o, const char *key, const char *s, int *bad)
{
	put(o, key, s != NULL ? json_string(s) : json_null(), bad);
}

static json_t *
strv_json(const struct np_strv *sv)
{
	json_t *a = json_array();
	size_t i;

	if (a == NULL)
		return NULL;
	for (i = 0; i < sv->n; i++) {
		if (json_array_append_new(a, json_string(sv->v[i])) != 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/*
 * Put the odd values back where our field still holds what the decoder
 * gave it, add the unknown keys back (never over a known key), dump, free
 * o; stand-ins for big numbers become their literal again.
 */
static char *
finish(json_t *o, const json_t *extra, const json_t *odd, const json_t *odd_as, int bad,
       size_t flags, size_t *len)
{
	char *s = NULL;
	const char *k;
	json_t *v;

	if (!bad && odd != NULL && json_is_object(odd)) {
		json_object_foreach((json_t *)odd, k, v)
		{
			json_t *now = json_object_get(o, k);
			json_t *then = odd_as != NULL ? json_object_get(odd_as, k) : NULL;
			if ((now == NULL && then == NULL) ||
			    (now != NULL && then != NULL && json_equal(now, then)))
				json_object_set(o, k, v);
		}
	}
	if (!bad && extra != NULL && json_is_object(extra) &&
	    json_object_update_missing(o, (json_t *)extra) != 0)
		bad = 1;
	if (!bad)
		s = np_json_raw_dumps(o, flags | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(17));
	json_decref(o);
	if (len != NULL)
		*len = s != NULL ? strlen(s) : 0;
	return s;
}

/* ---- Node ------------------------------------------------------------------- */

struct np_node *
np_node_new(void)
{
	struct np_node *n = calloc(1, sizeof(*n));

	if (n == NULL)
		abort();
	n->state = NP_NODE_INIT;
	n->connection_port = 22;
	n->slot = -1;
	n->username = xstrdup("zuul");
	return n;
}

void
np_node_free(struct np_node *n)
{
	if (n == NULL)
		return;
	free(n->id);
	free(n->cloud);
	free(n->region);
	free(n->az);
	free(n->provider);
	free(n->pool);
	np_strv_clear(&n->type);
	free(n->allocated_to);
	free(n->public_ipv4);
	free(n->private_ipv4);
	free(n->public_ipv6);
	free(n->interface_ip);
	free(n->host_id);
	free(n->connection_type);
	json_decref(n->connection_port_obj);
	free(n->image_id);
	free(n->launcher);
	free(n->external_id);
	json_decref(n->external_id_obj);
	free(n->hostname);
	free(n->comment);
	free(n->hold_job);
	json_decref(n->user_data);
	np_strv_clear(&n->host_keys);
	free(n->username);
	free(n->python_path);
	free(n->shell_type);
	json_decref(n->resources);
	json_decref(n->attributes);
	free(n->tenant_name);
	free(n->requestor);
	json_decref(n->driver_data);
	json_decref(n->extra);
	json_decref(n->odd);
	json_decref(n->odd_as);
	free(n);
}

struct np_node *
np_node_dup(const struct np_node *n)
{
	struct np_node *d;

	if (n == NULL)
		return NULL;
	d = calloc(1, sizeof(*d));
	if (d == NULL)
		abort();
	d->id = xstrdup(n->id);
	d->state = n->state;
	d->state_time = n->state_time;
	d->created_time = n->created_time;
	d->cloud = xstrdup(n->cloud);
	d->region = xstrdup(n->region);
	d->az = xstrdup(n->az);
	d->provider = xstrdup(n->provider);
	d->pool = xstrdup(n->pool);
	np_strv_copy(&d->type, &n->type);
	d->allocated_to = xstrdup(n->allocated_to);
	d->public_ipv4 = xstrdup(n->public_ipv4);
	d->private_ipv4 = xstrdup(n->private_ipv4);
	d->public_ipv6 = xstrdup(n->public_ipv6);
	d->interface_ip = xstrdup(n->interface_ip);
	d->host_id = xstrdup(n->host_id);
	d->connection_type = xstrdup(n->connection_type);
	d->connection_port = n->connection_port;
	d->connection_port_obj = copy_or_null(n->connection_port_obj);
	d->image_id = xstrdup(n->image_id);
	d->launcher = xstrdup(n->launcher);
	d->external_id = xstrdup(n->external_id);
	d->external_id_obj = copy_or_null(n->external_id_obj);
	d->hostname = xstrdup(n->hostname);
	d->comment = xstrdup(n->comment);
	d->hold_job = xstrdup(n->hold_job);
	d->hold_expiration = n->hold_expiration;
	d->has_hold_expiration = n->has_hold_expiration;
	d->user_data = copy_or_null(n->user_data);
	np_strv_copy(&d->host_keys, &n->host_keys);
	d->username = xstrdup(n->username);
	d->python_path = xstrdup(n->python_path);
	d->shell_type = xstrdup(n->shell_type);
	d->resources = copy_or_null(n->resources);
	d->slot = n->slot;
	d->attributes = copy_or_null(n->attributes);
	d->tenant_name = xstrdup(n->tenant_name);
	d->requestor = xstrdup(n->requestor);
	d->driver_data = copy_or_null(n->driver_data);
	d->extra = copy_or_null(n->extra);
	d->odd = copy_or_null(n->odd);
	d->odd_as = copy_or_null(n->odd_as);
	return d;
}

void
np_node_set_state(struct np_node *n, int state)
{
	n->state = state;
	n->state_time = now_seconds();
}

/* connection_port / ssh_port: an int port or an object (credentials). */
static int
node_port(struct dctx *c, const char *key, json_t *v, struct np_node *n)
{
	long long p;

	if (json_is_object(v)) {
		n->connection_port = 0;
		n->connection_port_obj = json_incref(v);
		return 0;
	}
	if (!json_is_integer(v)) {
		dtype(c, key, "an integer port or an object", v);
		return -1;
	}
	p = json_integer_value(v);
	if (p < 0 || p > 65535) {
		dodd(c, key, v, "port %lld out of range", p);
		return -1;
	}
	n->connection_port = (int)p;
	return 0;
}

/* Python's int() as upstream's Node.updateFromDict applies it. */
static void
node_hold_expiration(struct dctx *c, json_t *v, struct np_node *n)
{
	long long x;

	n->has_hold_expiration = 0;
	n->hold_expiration = 0;
	if (v == NULL || json_is_null(v))
		return;
	switch (json_typeof(v)) {
	case JSON_INTEGER:
		n->hold_expiration = json_integer_value(v);
		break;
	case JSON_REAL:
		n->hold_expiration = trunc_ll(json_real_value(v));
		break;
	case JSON_TRUE:
	case JSON_FALSE:
		n->hold_expiration = json_is_true(v);
		break;
	case JSON_STRING:
		/* int("abc") raises ValueError, which upstream maps to 0. */
		n->hold_expiration =
		    cstring(v) && py_int_str(json_string_value(v), &x) == 0 ? x : 0;
		break;
	default:
		/* int([]) / int({}) raise TypeError, which upstream does not catch. */
		dtype(c, "hold_expiration", "a number, a numeric string or null", v);
		return;
	}
	n->has_hold_expiration = 1;
}

int
np_node_decode(const char *id, const char *data, size_t len, struct np_node **out, char *err,
	       size_t errlen)
{
	char what[96];
	struct dctx c = {.what = what, .err = err, .errlen = errlen};
	struct np_node *n;
	json_t *root, *v;
	long long slot;

	*out = NULL;
	snprintf(what, sizeof(what), "node %.64s", id != NULL ? id : "(new)");
	if ((root = dload(&c, data, len)) == NULL)
		return -1;
	n = np_node_new();
	n->id = xstrdup(id);
	get_state(&c, root, np_node_state_parse, NP_NODE_INIT, &n->state);
	get_time(&c, root, "state_time", &n->state_time);
	get_str(&c, root, "cloud", NULL, &n->cloud);
	get_str(&c, root, "provider", NULL, &n->provider);
	get_str(&c, root, "pool", NULL, &n->pool);

	/* type: a list, or (older records) a bare string; falsy means []. */
	v = dtake(&c, root, "type");
	if (v == NULL || json_is_null(v) || json_is_false(v) ||
	    (json_is_string(v) && json_string_length(v) == 0) ||
	    (json_is_integer(v) && json_integer_value(v) == 0) ||
	    (json_is_real(v) && json_real_value(v) == 0) ||
	    (json_is_object(v) && json_object_size(v) == 0))
		; /* [] */
	else if (cstring(v))
		np_strv_push(&n->type, json_string_value(v));
	else if (json_is_array(v))
		strv_from_array(&c, "type", v, &n->type);
	else
		dtype(&c, "type", "a list of strings or a string", v);

	get_str(&c, root, "allocated_to", NULL, &n->allocated_to);
	get_str(&c, root, "az", NULL, &n->az);
	get_str(&c, root, "region", NULL, &n->region);
	get_str(&c, root, "public_ipv4", NULL, &n->public_ipv4);
	get_str(&c, root, "private_ipv4", NULL, &n->private_ipv4);
	get_str(&c, root, "public_ipv6", NULL, &n->public_ipv6);
	get_str(&c, root, "host_id", NULL, &n->host_id);
	get_str(&c, root, "interface_ip", NULL, &n->interface_ip);

	/* connection_port, else ssh_port (kept for old Zuul), else 22. */
	v = dtake(&c, root, "connection_port");
	{
		json_t *ssh = dtake(&c, root, "ssh_port");

		const char *src = NULL;

		if (v == NULL || json_is_null(v)) {
			v = ssh;
			if (v != NULL && !json_is_null(v))
				node_port(&c, src = "ssh_port", v, n);
		} else {
			node_port(&c, src = "connection_port", v, n);
		}
		/* An odd port is written back to both keys, as upstream's
		 * toDict writes ssh_port = connection_port. */
		if (src != NULL && c.odd != NULL && (v = json_object_get(c.odd, src)) != NULL) {
			json_object_set(c.odd, "connection_port", v);
			json_object_set(c.odd, "ssh_port", v);
		}
	}

	get_str(&c, root, "image_id", NULL, &n->image_id);
	get_str(&c, root, "launcher", NULL, &n->launcher);
	get_time(&c, root, "created_time", &n->created_time);

	v = dtake(&c, root, "external_id");
	if (v == NULL || json_is_null(v))
		;
	else if (cstring(v))
		n->external_id = xstrdup(json_string_value(v));
	else if (np_json_raw_number(v) != NULL)
		dtype(&c, "external_id", "a string, an object or null", v);
	else
		n->external_id_obj = json_incref(v); /* AWS: {instance, host} */

	get_str(&c, root, "hostname", NULL, &n->hostname);
	get_str(&c, root, "comment", NULL, &n->comment);
	get_any(&c, root, "user_data", &n->user_data);
	get_str(&c, root, "hold_job", NULL, &n->hold_job);
	get_strv(&c, root, "host_keys", &n->host_keys);
	get_str(&c, root, "username", "zuul", &n->username);
	get_str(&c, root, "connection_type", NULL, &n->connection_type);
	get_str(&c, root, "shell_type", NULL, &n->shell_type);
	node_hold_expiration(&c, dtake(&c, root, "hold_expiration"), n);
	get_obj(&c, root, "resources", &n->resources);

	/* slot: a non-negative int or null (-1 in the struct). */
	v = dtake(&c, root, "slot");
	if (v == NULL || json_is_null(v))
		n->slot = -1;
	else if (!json_is_integer(v))
		dtype(&c, "slot", "an integer or null", v);
	else if ((slot = json_integer_value(v)) < 0 || slot > INT_MAX)
		dodd(&c, "slot", v, "%lld out of range", slot);
	else
		n->slot = (int)slot;

	get_any(&c, root, "attributes", &n->attributes);
	get_str(&c, root, "python_path", NULL, &n->python_path);
	get_str(&c, root, "tenant_name", NULL, &n->tenant_name);
	get_any(&c, root, "driver_data", &n->driver_data);
	get_str(&c, root, "requestor", NULL, &n->requestor);
	n->extra = dextra(&c);
	if (c.odd != NULL) {
		int bad = 0;
		json_t *t = node_obj(n, &bad);

		n->odd = c.odd;
		n->odd_as = odd_as_of(c.odd, t);
		json_decref(t);
	}
	json_decref(root);
	if (c.failed) {
		np_node_free(n);
		return -1;
	}
	*out = n;
	return 0;
}

/* The record's typed fields as a JSON object (NULL if out of memory);
 * *badp set when a value cannot be written. */
static json_t *
node_obj(const struct np_node *n, int *badp)
{
	json_t *o = json_object(), *port;
	int bad = 0;

	if (o == NULL)
		return NULL;
	/* Key order as upstream's Node.toDict(). */
	put_str(o, "state", np_node_state_name(n->state), &bad);
	put(o, "state_time", json_real(n->state_time), &bad);
	put_str(o, "cloud", n->cloud, &bad);
	put_str(o, "provider", n->provider, &bad);
	put_str(o, "pool", n->pool, &bad);
	put(o, "type", strv_json(&n->type), &bad);
	put_str(o, "allocated_to", n->allocated_to, &bad);
	put_str(o, "az", n->az, &bad);
	put_str(o, "region", n->region, &bad);
	put_str(o, "public_ipv4", n->public_ipv4, &bad);
	put_str(o, "private_ipv4", n->private_ipv4, &bad);
	put_str(o, "public_ipv6", n->public_ipv6, &bad);
	put_str(o, "host_id", n->host_id, &bad);
	put_str(o, "interface_ip", n->interface_ip, &bad);
	port = n->connection_port_obj != NULL ? json_deep_copy(n->connection_port_obj)
					      : json_integer(n->connection_port);
	put(o, "connection_port", port != NULL ? json_incref(port) : NULL, &bad);
	put(o, "ssh_port", port, &bad);
	put_str(o, "image_id", n->image_id, &bad);
	put_str(o, "launcher", n->launcher, &bad);
	put(o, "created_time", n->created_time != 0 ? json_real(n->created_time) : json_null(),
	    &bad);
	if (n->external_id_obj != NULL)
		put(o, "external_id", json_deep_copy(n->external_id_obj), &bad);
	else
		put_str(o, "external_id", n->external_id, &bad);
	put_str(o, "hostname", n->hostname, &bad);
	put_str(o, "comment", n->comment, &bad);
	put(o, "user_data", ref_or_null(n->user_data), &bad);
	put_str(o, "hold_job", n->hold_job, &bad);
	put(o, "host_keys", strv_json(&n->host_keys), &bad);
	put_str(o, "username", n->username, &bad);
	put_str(o, "connection_type", n->connection_type, &bad);
	put_str(o, "shell_type", n->shell_type, &bad);
	put(o, "hold_expiration",
	    n->has_hold_expiration ? json_integer(n->hold_expiration) : json_null(), &bad);
	put(o, "resources", ref_or_null(n->resources), &bad);
	put(o, "slot", n->slot >= 0 ? json_integer(n->slot) : json_null(), &bad);
	put(o, "attributes", ref_or_null(n->attributes), &bad);
	put_str(o, "python_path", n->python_path, &bad);
	put_str(o, "tenant_name", n->tenant_name, &bad);
	put(o, "driver_data", ref_or_null(n->driver_data), &bad);
	put_str(o, "requestor", n->requestor, &bad);
	*badp |= bad;
	return o;
}

char *
np_node_encode(const struct np_node *n, size_t *len)
{
	int bad = 0;
	json_t *o = node_obj(n, &bad);

	if (o == NULL)
		return NULL;
	return finish(o, n->extra, n->odd, n->odd_as, bad, 0, len);
}

/* ---- NodeRequest -------------------------------------------------------------- */

struct np_request *
np_request_new(void)
{
	struct np_request *r = calloc(1, sizeof(*r));

	if (r == NULL)
		abort();
	r->state = NP_REQ_REQUESTED;
	r->reuse = 1;
	return r;
}

void
np_request_free(struct np_request *r)
{
	if (r == NULL)
		return;
	free(r->id);
	np_strv_clear(&r->node_types);
	np_strv_clear(&r->nodes);
	np_strv_clear(&r->declined_by);
	free(r->requestor);
	json_decref(r->requestor_data);
	free(r->provider);
	free(r->event_id);
	free(r->tenant_name);
	json_decref(r->extra);
	json_decref(r->odd);
	json_decref(r->odd_as);
	free(r);
}

struct np_request *
np_request_dup(const struct np_request *r)
{
	struct np_request *d;

	if (r == NULL)
		return NULL;
	d = np_request_new();
	d->id = xstrdup(r->id);
	d->state = r->state;
	d->state_time = r->state_time;
	np_strv_copy(&d->node_types, &r->node_types);
	np_strv_copy(&d->nodes, &r->nodes);
	np_strv_copy(&d->declined_by, &r->declined_by);
	d->reuse = r->reuse;
	d->requestor = xstrdup(r->requestor);
	d->requestor_data = copy_or_null(r->requestor_data);
	d->provider = xstrdup(r->provider);
	d->relative_priority = r->relative_priority;
	d->event_id = xstrdup(r->event_id);
	d->created_time = r->created_time;
	d->has_created_time = r->has_created_time;
	d->tenant_name = xstrdup(r->tenant_name);
	d->extra = copy_or_null(r->extra);
	d->odd = copy_or_null(r->odd);
	d->odd_as = copy_or_null(r->odd_as);
	return d;
}

void
np_request_set_state(struct np_request *r, int state)
{
	r->state = state;
	r->state_time = now_seconds();
}

int
np_request_decode(const char *id, const char *data, size_t len, struct np_request **out, char *err,
		  size_t errlen)
{
	char what[96];
	struct dctx c = {.what = what, .err = err, .errlen = errlen};
	struct np_request *r;
	json_t *root;

	*out = NULL;
	snprintf(what, sizeof(what), "request %.64s", id != NULL ? id : "(new)");
	if ((root = dload(&c, data, len)) == NULL)
		return -1;
	r = np_request_new();
	r->id = xstrdup(id);
	get_state(&c, root, np_request_state_parse, NP_REQ_REQUESTED, &r->state);
	get_time(&c, root, "state_time", &r->state_time);
	get_strv(&c, root, "declined_by", &r->declined_by);
	get_strv(&c, root, "node_types", &r->node_types);
	get_strv(&c, root, "nodes", &r->nodes);
	get_bool(&c, root, "reuse", 1, &r->reuse);
	get_str(&c, root, "requestor", NULL, &r->requestor);
	get_any(&c, root, "requestor_data", &r->requestor_data);
	get_str(&c, root, "provider", NULL, &r->provider);
	get_int(&c, root, "relative_priority", 0, &r->relative_priority);
	get_str(&c, root, "event_id", NULL, &r->event_id);
	r->has_created_time = get_time(&c, root, "created_time", &r->created_time);
	get_str(&c, root, "tenant_name", NULL, &r->tenant_name);
	r->extra = dextra(&c);
	if (c.odd != NULL) {
		int bad = 0;
		json_t *t = request_obj(r, &bad);

		r->odd = c.odd;
		r->odd_as = odd_as_of(c.odd, t);
		json_decref(t);
	}
	json_decref(root);
	if (c.failed) {
		np_request_free(r);
		return -1;
	}
	*out = r;
	return 0;
}

/* The record's typed fields as a JSON object (NULL if out of memory);
 * *badp set when a value cannot be written. */
static json_t *
request_obj(const struct np_request *r, int *badp)
{
	json_t *o = json_object();
	int bad = 0;

	if (o == NULL)
		return NULL;
	/* Key order as upstream's NodeRequest.toDict(). */
	put_str(o, "state", np_request_state_name(r->state), &bad);
	put(o, "state_time", json_real(r->state_time), &bad);
	put(o, "declined_by", strv_json(&r->declined_by), &bad);
	put(o, "node_types", strv_json(&r->node_types), &bad);
	put(o, "nodes", strv_json(&r->nodes), &bad);
	put(o, "reuse", json_boolean(r->reuse), &bad);
	put_str(o, "requestor", r->requestor, &bad);
	put(o, "requestor_data", ref_or_null(r->requestor_data), &bad);
	put_str(o, "provider", r->provider, &bad);
	put(o, "relative_priority", json_integer(r->relative_priority), &bad);
	put_str(o, "event_id", r->event_id, &bad);
	put(o, "created_time", r->has_created_time ? json_real(r->created_time) : json_null(),
	    &bad);
	put_str(o, "tenant_name", r->tenant_name, &bad);
	*badp |= bad;
	return o;
}

char *
np_request_encode(const struct np_request *r, size_t *len)
{
	int bad = 0;
	json_t *o = request_obj(r, &bad);

	if (o == NULL)
		return NULL;
	return finish(o, r->extra, r->odd, r->odd_as, bad, 0, len);
}

/* Split an id at its first '-' into prefix and sequence (sequence "" when
 * there is no '-'). */
static void
request_id_split(const char *id, size_t *plen, const char **seq)
{
	const char *dash;

	if (id == NULL)
		id = "";
	dash = strchr(id, '-');
	if (dash == NULL) {
		*plen = strlen(id);
		*seq = id + *plen;
	} else {
		*plen = (size_t)(dash - id);
		*seq = dash + 1;
	}
}

int
np_request_cmp(const struct np_request *a, const struct np_request *b)
{
	const char *ida = a->id != NULL ? a->id : "", *idb = b->id != NULL ? b->id : "";
	const char *sa, *sb;
	size_t pa, pb;
	int r;

	request_id_split(ida, &pa, &sa);
	request_id_split(idb, &pb, &sb);
	/* Python string comparison of the prefixes: bytewise, shorter first on
	 * a common prefix. */
	r = memcmp(ida, idb, pa < pb ? pa : pb);
	if (r == 0 && pa != pb)
		r = pa < pb ? -1 : 1;
	if (r != 0)
		return r < 0 ? -1 : 1;
	if (a->relative_priority != b->relative_priority)
		return a->relative_priority < b->relative_priority ? -1 : 1;
	r = strcmp(sa, sb);
	return r < 0 ? -1 : r > 0;
}

/* ---- ImageBuild ---------------------------------------------------------------- */

struct np_image_build *
np_image_build_new(void)
{
	struct np_image_build *b = calloc(1, sizeof(*b));

	if (b == NULL)
		abort();
	b->state = NP_BUILD_BUILDING;
	b->username = xstrdup("zuul");
	return b;
}

void
np_image_build_free(struct np_image_build *b)
{
	if (b == NULL)
		return;
	free(b->id);
	free(b->builder);
	free(b->builder_id);
	np_strv_clear(&b->formats);
	free(b->username);
	free(b->python_path);
	free(b->shell_type);
	json_decref(b->extra);
	json_decref(b->odd);
	json_decref(b->odd_as);
	free(b);
}

void
np_image_build_set_state(struct np_image_build *b, int state)
{
	b->state = state;
	b->state_time = now_seconds();
}

int
np_image_build_decode(const char *id, const char *data, size_t len, struct np_image_build **out,
		      char *err, size_t errlen)
{
	char what[96];
	struct dctx c = {.what = what, .err = err, .errlen = errlen};
	struct np_image_build *b;
	json_t *root, *v;

	*out = NULL;
	snprintf(what, sizeof(what), "image build %.64s", id != NULL ? id : "(new)");
	if ((root = dload(&c, data, len)) == NULL)
		return -1;
	b = np_image_build_new();
	b->id = xstrdup(id);
	get_state(&c, root, np_build_state_parse, NP_BUILD_BUILDING, &b->state);
	get_time(&c, root, "state_time", &b->state_time);
	get_str(&c, root, "builder", NULL, &b->builder);
	get_str(&c, root, "builder_id", NULL, &b->builder_id);
	get_str(&c, root, "username", "zuul", &b->username);
	get_str(&c, root, "python_path", "/usr/bin/python2", &b->python_path);
	get_str(&c, root, "shell_type", NULL, &b->shell_type);

	/* formats: "qcow2,raw"; split only a non-empty string. */
	v = dtake(&c, root, "formats");
	if (v == NULL || json_is_null(v))
		;
	else if (!json_is_string(v))
		dtype(&c, "formats", "a comma-separated string", v);
	else if (json_string_length(v) > 0) {
		const char *s = json_string_value(v), *comma;
		char *tok;

		for (;;) {
			comma = strchr(s, ',');
			tok = comma != NULL ? strndup(s, (size_t)(comma - s)) : strdup(s);
			if (tok == NULL)
				abort();
			np_strv_push(&b->formats, tok);
			free(tok);
			if (comma == NULL)
				break;
			s = comma + 1;
		}
	}
	b->extra = dextra(&c);
	if (c.odd != NULL) {
		int bad = 0;
		json_t *t = image_build_obj(b, &bad);

		b->odd = c.odd;
		b->odd_as = odd_as_of(c.odd, t);
		json_decref(t);
	}
	json_decref(root);
	if (c.failed) {
		np_image_build_free(b);
		return -1;
	}
	*out = b;
	return 0;
}

/* The record's typed fields as a JSON object (NULL if out of memory);
 * *badp set when a value cannot be written. */
static json_t *
image_build_obj(const struct np_image_build *b, int *badp)
{
	json_t *o = json_object();
	int bad = 0;

	if (o == NULL)
		return NULL;
	/* Key order as upstream's ImageBuild.toDict(); builder, builder_id
	 * and formats are left out when unset. */
	put_str(o, "state", np_build_state_name(b->state), &bad);
	put(o, "state_time", json_real(b->state_time), &bad);
	if (b->builder != NULL)
		put_str(o, "builder", b->builder, &bad);
	if (b->builder_id != NULL)
		put_str(o, "builder_id", b->builder_id, &bad);
	if (b->formats.n > 0) {
		char **sorted = malloc(b->formats.n * sizeof(*sorted));
		size_t i, total = 1;
		char *joined;

		if (sorted == NULL)
			abort();
		memcpy(sorted, b->formats.v, b->formats.n * sizeof(*sorted));
		qsort(sorted, b->formats.n, sizeof(*sorted), strv_cmp_sort);
		for (i = 0; i < b->formats.n; i++)
			total += strlen(sorted[i]) + 1;
		if ((joined = malloc(total)) == NULL)
			abort();
		joined[0] = '\0';
		for (i = 0; i < b->formats.n; i++) {
			if (i > 0)
				strcat(joined, ",");
			strcat(joined, sorted[i]);
		}
		put_str(o, "formats", joined, &bad);
		free(joined);
		free(sorted);
	}
	put_str(o, "username", b->username, &bad);
	put_str(o, "python_path", b->python_path, &bad);
	put_str(o, "shell_type", b->shell_type, &bad);
	*badp |= bad;
	return o;
}

char *
np_image_build_encode(const struct np_image_build *b, size_t *len)
{
	int bad = 0;
	json_t *o = image_build_obj(b, &bad);

	if (o == NULL)
		return NULL;
	return finish(o, b->extra, b->odd, b->odd_as, bad, 0, len);
}

/* ---- ImageUpload ---------------------------------------------------------------- */

struct np_image_upload *
np_image_upload_new(void)
{
	struct np_image_upload *u = calloc(1, sizeof(*u));

	if (u == NULL)
		abort();
	u->state = NP_UPLOAD_UPLOADING;
	return u;
}

void
np_image_upload_free(struct np_image_upload *u)
{
	if (u == NULL)
		return;
	free(u->id);
	free(u->external_id);
	free(u->external_name);
	free(u->format);
	free(u->username);
	free(u->python_path);
	free(u->shell_type);
	json_decref(u->extra);
	json_decref(u->odd);
	json_decref(u->odd_as);
	free(u);
}

void
np_image_upload_set_state(struct np_image_upload *u, int state)
{
	u->state = state;
	u->state_time = now_seconds();
}

int
np_image_upload_decode(const char *id, const char *data, size_t len, struct np_image_upload **out,
		       char *err, size_t errlen)
{
	char what[96];
	struct dctx c = {.what = what, .err = err, .errlen = errlen};
	struct np_image_upload *u;
	json_t *root;

	*out = NULL;
	snprintf(what, sizeof(what), "image upload %.64s", id != NULL ? id : "(new)");
	if ((root = dload(&c, data, len)) == NULL)
		return -1;
	u = np_image_upload_new();
	u->id = xstrdup(id);
	get_state(&c, root, np_upload_state_parse, NP_UPLOAD_UPLOADING, &u->state);
	get_time(&c, root, "state_time", &u->state_time);
	get_str(&c, root, "external_id", NULL, &u->external_id);
	get_str(&c, root, "external_name", NULL, &u->external_name);
	get_str(&c, root, "format", NULL, &u->format);
	get_str(&c, root, "username", "zuul", &u->username);
	get_str(&c, root, "python_path", "/usr/bin/python2", &u->python_path);
	get_str(&c, root, "shell_type", NULL, &u->shell_type);
	u->extra = dextra(&c);
	if (c.odd != NULL) {
		int bad = 0;
		json_t *t = image_upload_obj(u, &bad);

		u->odd = c.odd;
		u->odd_as = odd_as_of(c.odd, t);
		json_decref(t);
	}
	json_decref(root);
	if (c.failed) {
		np_image_upload_free(u);
		return -1;
	}
	*out = u;
	return 0;
}

/* The record's typed fields as a JSON object (NULL if out of memory);
 * *badp set when a value cannot be written. */
static json_t *
image_upload_obj(const struct np_image_upload *u, int *badp)
{
	json_t *o = json_object();
	int bad = 0;

	if (o == NULL)
		return NULL;
	/* Key order as upstream's ImageUpload.toDict(). */
	put_str(o, "state", np_upload_state_name(u->state), &bad);
	put(o, "state_time", json_real(u->state_time), &bad);
	put_str(o, "external_id", u->external_id, &bad);
	put_str(o, "external_name", u->external_name, &bad);
	put_str(o, "format", u->format, &bad);
	put_str(o, "username", u->username, &bad);
	put_str(o, "python_path", u->python_path, &bad);
	put_str(o, "shell_type", u->shell_type, &bad);
	*badp |= bad;
	return o;
}

char *
np_image_upload_encode(const struct np_image_upload *u, size_t *len)
{
	int bad = 0;
	json_t *o = image_upload_obj(u, &bad);

	if (o == NULL)
		return NULL;
	return finish(o, u->extra, u->odd, u->odd_as, bad, 0, len);
}

/* ---- Components ----------------------------------------------------------------- */

static int
is_pool(const struct np_component *c)
{
	return c->kind != NULL && strcmp(c->kind, "pool") == 0;
}

struct np_component *
np_component_new(const char *kind)
{
	struct np_component *c = calloc(1, sizeof(*c));

	if (c == NULL)
		abort();
	c->kind = xstrdup(kind);
	c->state = xstrdup("stopped");
	c->priority = 100;
	return c;
}

void
np_component_free(struct np_component *c)
{
	if (c == NULL)
		return;
	free(c->name);
	free(c->kind);
	free(c->hostname);
	free(c->state);
	free(c->version);
	free(c->id);
	free(c->pool_name);
	free(c->provider_name);
	np_strv_clear(&c->supported_labels);
	json_decref(c->extra);
	json_decref(c->odd);
	json_decref(c->odd_as);
	free(c);
}

int
np_component_decode(const char *name, const char *data, size_t len, struct np_component **out,
		    char *err, size_t errlen)
{
	char what[96];
	struct dctx c = {.what = what, .err = err, .errlen = errlen};
	struct np_component *k;
	json_t *root;

	*out = NULL;
	snprintf(what, sizeof(what), "component %.64s", name != NULL ? name : "(new)");
	if ((root = dload(&c, data, len)) == NULL)
		return -1;
	k = np_component_new(NULL);
	k->name = xstrdup(name);
	get_str(&c, root, "kind", NULL, &k->kind);
	/* Upstream's reader starts from the znode name as hostname. */
	get_str(&c, root, "hostname", name, &k->hostname);
	get_str(&c, root, "state", "stopped", &k->state);
	get_str(&c, root, "version", NULL, &k->version);
	get_int(&c, root, "model_api", 0, &k->model_api);
	/* Pool keys are the record's own only for pool components; elsewhere
	 * they stay in extra, untouched. */
	if (is_pool(k)) {
		get_str(&c, root, "id", NULL, &k->id);
		get_str(&c, root, "name", NULL, &k->pool_name);
		get_str(&c, root, "provider_name", NULL, &k->provider_name);
		get_strv(&c, root, "supported_labels", &k->supported_labels);
		get_int(&c, root, "priority", 100, &k->priority);
		get_bool(&c, root, "paused", 0, &k->paused);
	}
	k->extra = dextra(&c);
	if (c.odd != NULL) {
		int bad = 0;
		json_t *t = component_obj(k, &bad);

		k->odd = c.odd;
		k->odd_as = odd_as_of(c.odd, t);
		json_decref(t);
	}
	json_decref(root);
	if (c.failed) {
		np_component_free(k);
		return -1;
	}
	*out = k;
	return 0;
}

/* The record's typed fields as a JSON object (NULL if out of memory);
 * *badp set when a value cannot be written. */
static json_t *
component_obj(const struct np_component *c, int *badp)
{
	json_t *o = json_object();
	int bad = 0;

	if (o == NULL)
		return NULL;
	put_str(o, "hostname", c->hostname, &bad);
	put_str(o, "state", c->state, &bad);
	put_str(o, "kind", c->kind, &bad);
	put_str(o, "version", c->version, &bad);
	put(o, "model_api", json_integer(c->model_api), &bad);
	if (is_pool(c)) {
		put_str(o, "id", c->id, &bad);
		put_str(o, "name", c->pool_name, &bad);
		put_str(o, "provider_name", c->provider_name, &bad);
		put(o, "supported_labels", strv_json(&c->supported_labels), &bad);
		put(o, "priority", json_integer(c->priority), &bad);
		put(o, "paused", json_boolean(c->paused), &bad);
	}
	*badp |= bad;
	return o;
}

char *
np_component_encode(const struct np_component *c, size_t *len)
{
	int bad = 0;
	json_t *o = component_obj(c, &bad);

	if (o == NULL)
		return NULL;
	return finish(o, c->extra, c->odd, c->odd_as, bad, JSON_SORT_KEYS, len);
}
