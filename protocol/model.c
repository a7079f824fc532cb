/*
 * The core of Nodepool's ZooKeeper records (see model.h): string lists,
 * state names, the decode and encode helpers every record shares (declared
 * in model_int.h), and the component records. Node, NodeRequest and image
 * records live in model_node.c, model_request.c and model_image.c; all
 * decode with upstream's tolerance and encode every key in upstream's
 * toDict() order.
 */
#include "protocol/model.h"
#include "protocol/model_int.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>
#include "lib/core/xalloc.h"

/* ---- small helpers ------------------------------------------------------- */

double
mdl_now_seconds(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

json_t *
mdl_ref_or_null(json_t *j)
{
	return j != NULL ? json_incref(j) : json_null();
}

json_t *
mdl_copy_or_null(const json_t *j)
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

int
mdl_strv_cmp_sort(const void *a, const void *b)
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

/* key's value v is odd: kept verbatim; the first note goes to err, later
 * ones are counted in it. */
void
mdl_dodd(struct dctx *c, const char *key, const json_t *v, const char *fmt, ...)
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

void
mdl_dtype(struct dctx *c, const char *key, const char *want, const json_t *got)
{
	mdl_dodd(c, key, got, "expected %s, got %s", want, jtype_name(got));
}

/*
 * Load data as a JSON object. Returns the object or NULL (message set).
 */
json_t *
mdl_dload(struct dctx *c, const char *data, size_t len)
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
json_t *
mdl_dtake(struct dctx *c, json_t *root, const char *key)
{
	json_t *v = dtake_any(c, root, key);

	if (v != NULL && np_json_raw_number(v) != NULL) {
		mdl_dodd(c, key, v, "a number beyond what this field holds");
		return NULL;
	}
	return v;
}

/* The remaining unknown keys, or NULL when none. Consumes rest. */
json_t *
mdl_dextra(struct dctx *c)
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
int
mdl_cstring(const json_t *v)
{
	return json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v) &&
	       np_json_raw_number(v) == NULL;
}

/* A string or null; dflt (may be NULL) when missing. */
void
mdl_get_str(struct dctx *c, json_t *root, const char *key, const char *dflt, char **out)
{
	json_t *v = mdl_dtake(c, root, key);

	free(*out);
	*out = NULL;
	if (v == NULL)
		*out = xstrdup(dflt);
	else if (mdl_cstring(v))
		*out = xstrdup(json_string_value(v));
	else if (json_is_string(v))
		mdl_dodd(c, key, v, "a string containing NUL");
	else if (!json_is_null(v))
		mdl_dtype(c, key, "a string or null", v);
}

/* A number (int or float, as time.time() or a hand-written int); 0 when
 * missing, null or odd. Returns 1 when a number was present. */
int
mdl_get_time(struct dctx *c, json_t *root, const char *key, double *out)
{
	json_t *v = mdl_dtake(c, root, key);

	*out = 0;
	if (v == NULL || json_is_null(v))
		return 0;
	if (!json_is_number(v)) {
		mdl_dtype(c, key, "a number or null", v);
		return 0;
	}
	*out = json_number_value(v);
	return 1;
}

/* Elements of a list: strings as they are; any other element is mdl_put in
 * the list as its compact JSON text (which matches no label or id) and
 * the key is odd. */
void
mdl_strv_from_array(struct dctx *c, const char *key, json_t *a, struct np_strv *out)
{
	size_t i;
	json_t *e;
	int odd = 0;

	json_array_foreach(a, i, e)
	{
		if (mdl_cstring(e)) {
			np_strv_push(out, json_string_value(e));
			continue;
		}
		if (!odd)
			mdl_dodd(c, key, a, "element %zu is %s, not a string", i, jtype_name(e));
		odd = 1;
		{
			char *t = json_dumps(e, JSON_ENCODE_ANY | JSON_COMPACT);
			np_strv_push(out, t != NULL ? t : "?");
			free(t);
		}
	}
}

/* A list of strings; empty when missing, null or odd. */
void
mdl_get_strv(struct dctx *c, json_t *root, const char *key, struct np_strv *out)
{
	json_t *v = mdl_dtake(c, root, key);

	np_strv_clear(out);
	if (v == NULL || json_is_null(v))
		return;
	if (!json_is_array(v)) {
		mdl_dtype(c, key, "a list of strings", v);
		return;
	}
	mdl_strv_from_array(c, key, v, out);
}

/* An object or null (NULL); anything else is odd. */
void
mdl_get_obj(struct dctx *c, json_t *root, const char *key, json_t **out)
{
	json_t *v = mdl_dtake(c, root, key);

	*out = NULL;
	if (v == NULL || json_is_null(v))
		return;
	if (!json_is_object(v)) {
		mdl_dtype(c, key, "an object or null", v);
		return;
	}
	*out = json_incref(v);
}

/* Any JSON value; null and missing give NULL. */
void
mdl_get_any(struct dctx *c, json_t *root, const char *key, json_t **out)
{
	json_t *v = dtake_any(c, root, key);

	*out = (v == NULL || json_is_null(v)) ? NULL : json_incref(v);
}

/* An integer; dflt when missing, null or odd; a float is truncated (and
 * odd, so it is written back as it came). */
void
mdl_get_int(struct dctx *c, json_t *root, const char *key, long long dflt, long long *out)
{
	json_t *v = mdl_dtake(c, root, key);

	*out = dflt;
	if (v == NULL || json_is_null(v))
		return;
	if (json_is_real(v) && isfinite(json_real_value(v)) && fabs(json_real_value(v)) < 0x1p62) {
		*out = (long long)json_real_value(v);
		mdl_dtype(c, key, "an integer", v);
		return;
	}
	if (!json_is_integer(v)) {
		mdl_dtype(c, key, "an integer", v);
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
void
mdl_get_bool(struct dctx *c, json_t *root, const char *key, int dflt, int *out)
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
		mdl_dtype(c, key, "a boolean", v);
	}
}

/* The state key: a known name; dflt when missing or null; -1 (odd) for an
 * unknown name or a value that is not a string. */
void
mdl_get_state(struct dctx *c, json_t *root, int (*parse)(const char *), int dflt, int *out)
{
	json_t *v = mdl_dtake(c, root, "state");

	*out = dflt;
	if (v == NULL) {
		if (json_object_get(root, "state") != NULL)
			*out = -1; /* a number beyond 64 bits */
		return;
	}
	if (json_is_null(v))
		return;
	if (!mdl_cstring(v)) {
		mdl_dtype(c, "state", "a string", v);
		*out = -1;
		return;
	}
	*out = parse(json_string_value(v));
	if (*out < 0)
		mdl_dodd(c, "state", v, "unknown state '%.64s'", json_string_value(v));
}

/* After a decode: what each odd key's field encodes to now (absent keys
 * stay absent), so that encode can tell a field our code has not set. */
json_t *
mdl_odd_as_of(const json_t *odd, const json_t *typed)
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

static json_t *component_obj(const struct np_component *c, int *badp);

/* Saturating conversion of a double to long long, truncating toward 0. */
long long
mdl_trunc_ll(double x)
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
int
mdl_py_int_str(const char *s, long long *out)
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

void
mdl_put(json_t *o, const char *key, json_t *v, int *bad)
{
	if (v == NULL || json_object_set_new(o, key, v) != 0)
		*bad = 1;
}

void
mdl_put_str(json_t *o, const char *key, const char *s, int *bad)
{
	mdl_put(o, key, s != NULL ? json_string(s) : json_null(), bad);
}

json_t *
mdl_strv_json(const struct np_strv *sv)
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
char *
mdl_finish(json_t *o, const json_t *extra, const json_t *odd, const json_t *odd_as, int bad,
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
	if ((root = mdl_dload(&c, data, len)) == NULL)
		return -1;
	k = np_component_new(NULL);
	k->name = xstrdup(name);
	mdl_get_str(&c, root, "kind", NULL, &k->kind);
	/* Upstream's reader starts from the znode name as hostname. */
	mdl_get_str(&c, root, "hostname", name, &k->hostname);
	mdl_get_str(&c, root, "state", "stopped", &k->state);
	mdl_get_str(&c, root, "version", NULL, &k->version);
	mdl_get_int(&c, root, "model_api", 0, &k->model_api);
	/* Pool keys are the record's own only for pool components; elsewhere
	 * they stay in extra, untouched. */
	if (is_pool(k)) {
		mdl_get_str(&c, root, "id", NULL, &k->id);
		mdl_get_str(&c, root, "name", NULL, &k->pool_name);
		mdl_get_str(&c, root, "provider_name", NULL, &k->provider_name);
		mdl_get_strv(&c, root, "supported_labels", &k->supported_labels);
		mdl_get_int(&c, root, "priority", 100, &k->priority);
		mdl_get_bool(&c, root, "paused", 0, &k->paused);
	}
	k->extra = mdl_dextra(&c);
	if (c.odd != NULL) {
		int bad = 0;
		json_t *t = component_obj(k, &bad);

		k->odd = c.odd;
		k->odd_as = mdl_odd_as_of(c.odd, t);
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
	mdl_put_str(o, "hostname", c->hostname, &bad);
	mdl_put_str(o, "state", c->state, &bad);
	mdl_put_str(o, "kind", c->kind, &bad);
	mdl_put_str(o, "version", c->version, &bad);
	mdl_put(o, "model_api", json_integer(c->model_api), &bad);
	if (is_pool(c)) {
		mdl_put_str(o, "id", c->id, &bad);
		mdl_put_str(o, "name", c->pool_name, &bad);
		mdl_put_str(o, "provider_name", c->provider_name, &bad);
		mdl_put(o, "supported_labels", mdl_strv_json(&c->supported_labels), &bad);
		mdl_put(o, "priority", json_integer(c->priority), &bad);
		mdl_put(o, "paused", json_boolean(c->paused), &bad);
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
	return mdl_finish(o, c->extra, c->odd, c->odd_as, bad, JSON_SORT_KEYS, len);
}
