/*
 * Nodepool's Node record (/nodepool/nodes/<id>, see model.h): its life
 * cycle, decode with upstream's tolerance, encode in toDict() order.
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
#include "lib/core/xalloc.h"

static json_t *node_obj(const struct np_node *n, int *badp);

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
	d->connection_port_obj = mdl_copy_or_null(n->connection_port_obj);
	d->image_id = xstrdup(n->image_id);
	d->launcher = xstrdup(n->launcher);
	d->external_id = xstrdup(n->external_id);
	d->external_id_obj = mdl_copy_or_null(n->external_id_obj);
	d->hostname = xstrdup(n->hostname);
	d->comment = xstrdup(n->comment);
	d->hold_job = xstrdup(n->hold_job);
	d->hold_expiration = n->hold_expiration;
	d->has_hold_expiration = n->has_hold_expiration;
	d->user_data = mdl_copy_or_null(n->user_data);
	np_strv_copy(&d->host_keys, &n->host_keys);
	d->username = xstrdup(n->username);
	d->python_path = xstrdup(n->python_path);
	d->shell_type = xstrdup(n->shell_type);
	d->resources = mdl_copy_or_null(n->resources);
	d->slot = n->slot;
	d->attributes = mdl_copy_or_null(n->attributes);
	d->tenant_name = xstrdup(n->tenant_name);
	d->requestor = xstrdup(n->requestor);
	d->driver_data = mdl_copy_or_null(n->driver_data);
	d->extra = mdl_copy_or_null(n->extra);
	d->odd = mdl_copy_or_null(n->odd);
	d->odd_as = mdl_copy_or_null(n->odd_as);
	return d;
}

void
np_node_set_state(struct np_node *n, int state)
{
	n->state = state;
	n->state_time = mdl_now_seconds();
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
		mdl_dtype(c, key, "an integer port or an object", v);
		return -1;
	}
	p = json_integer_value(v);
	if (p < 0 || p > 65535) {
		mdl_dodd(c, key, v, "port %lld out of range", p);
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
		n->hold_expiration = mdl_trunc_ll(json_real_value(v));
		break;
	case JSON_TRUE:
	case JSON_FALSE:
		n->hold_expiration = json_is_true(v);
		break;
	case JSON_STRING:
		/* int("abc") raises ValueError, which upstream maps to 0. */
		n->hold_expiration =
		    mdl_cstring(v) && mdl_py_int_str(json_string_value(v), &x) == 0 ? x : 0;
		break;
	default:
		/* int([]) / int({}) raise TypeError, which upstream does not catch. */
		mdl_dtype(c, "hold_expiration", "a number, a numeric string or null", v);
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
	if ((root = mdl_dload(&c, data, len)) == NULL)
		return -1;
	n = np_node_new();
	n->id = xstrdup(id);
	mdl_get_state(&c, root, np_node_state_parse, NP_NODE_INIT, &n->state);
	mdl_get_time(&c, root, "state_time", &n->state_time);
	mdl_get_str(&c, root, "cloud", NULL, &n->cloud);
	mdl_get_str(&c, root, "provider", NULL, &n->provider);
	mdl_get_str(&c, root, "pool", NULL, &n->pool);

	/* type: a list, or (older records) a bare string; falsy means []. */
	v = mdl_dtake(&c, root, "type");
	if (v == NULL || json_is_null(v) || json_is_false(v) ||
	    (json_is_string(v) && json_string_length(v) == 0) ||
	    (json_is_integer(v) && json_integer_value(v) == 0) ||
	    (json_is_real(v) && json_real_value(v) == 0) ||
	    (json_is_object(v) && json_object_size(v) == 0))
		; /* [] */
	else if (mdl_cstring(v))
		np_strv_push(&n->type, json_string_value(v));
	else if (json_is_array(v))
		mdl_strv_from_array(&c, "type", v, &n->type);
	else
		mdl_dtype(&c, "type", "a list of strings or a string", v);

	mdl_get_str(&c, root, "allocated_to", NULL, &n->allocated_to);
	mdl_get_str(&c, root, "az", NULL, &n->az);
	mdl_get_str(&c, root, "region", NULL, &n->region);
	mdl_get_str(&c, root, "public_ipv4", NULL, &n->public_ipv4);
	mdl_get_str(&c, root, "private_ipv4", NULL, &n->private_ipv4);
	mdl_get_str(&c, root, "public_ipv6", NULL, &n->public_ipv6);
	mdl_get_str(&c, root, "host_id", NULL, &n->host_id);
	mdl_get_str(&c, root, "interface_ip", NULL, &n->interface_ip);

	/* connection_port, else ssh_port (kept for old Zuul), else 22. */
	v = mdl_dtake(&c, root, "connection_port");
	{
		json_t *ssh = mdl_dtake(&c, root, "ssh_port");

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

	mdl_get_str(&c, root, "image_id", NULL, &n->image_id);
	mdl_get_str(&c, root, "launcher", NULL, &n->launcher);
	mdl_get_time(&c, root, "created_time", &n->created_time);

	v = mdl_dtake(&c, root, "external_id");
	if (v == NULL || json_is_null(v))
		;
	else if (mdl_cstring(v))
		n->external_id = xstrdup(json_string_value(v));
	else if (np_json_raw_number(v) != NULL)
		mdl_dtype(&c, "external_id", "a string, an object or null", v);
	else
		n->external_id_obj = json_incref(v); /* AWS: {instance, host} */

	mdl_get_str(&c, root, "hostname", NULL, &n->hostname);
	mdl_get_str(&c, root, "comment", NULL, &n->comment);
	mdl_get_any(&c, root, "user_data", &n->user_data);
	mdl_get_str(&c, root, "hold_job", NULL, &n->hold_job);
	mdl_get_strv(&c, root, "host_keys", &n->host_keys);
	mdl_get_str(&c, root, "username", "zuul", &n->username);
	mdl_get_str(&c, root, "connection_type", NULL, &n->connection_type);
	mdl_get_str(&c, root, "shell_type", NULL, &n->shell_type);
	node_hold_expiration(&c, mdl_dtake(&c, root, "hold_expiration"), n);
	mdl_get_obj(&c, root, "resources", &n->resources);

	/* slot: a non-negative int or null (-1 in the struct). */
	v = mdl_dtake(&c, root, "slot");
	if (v == NULL || json_is_null(v))
		n->slot = -1;
	else if (!json_is_integer(v))
		mdl_dtype(&c, "slot", "an integer or null", v);
	else if ((slot = json_integer_value(v)) < 0 || slot > INT_MAX)
		mdl_dodd(&c, "slot", v, "%lld out of range", slot);
	else
		n->slot = (int)slot;

	mdl_get_any(&c, root, "attributes", &n->attributes);
	mdl_get_str(&c, root, "python_path", NULL, &n->python_path);
	mdl_get_str(&c, root, "tenant_name", NULL, &n->tenant_name);
	mdl_get_any(&c, root, "driver_data", &n->driver_data);
	mdl_get_str(&c, root, "requestor", NULL, &n->requestor);
	n->extra = mdl_dextra(&c);
	if (c.odd != NULL) {
		int bad = 0;
		json_t *t = node_obj(n, &bad);

		n->odd = c.odd;
		n->odd_as = mdl_odd_as_of(c.odd, t);
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
	mdl_put_str(o, "state", np_node_state_name(n->state), &bad);
	mdl_put(o, "state_time", json_real(n->state_time), &bad);
	mdl_put_str(o, "cloud", n->cloud, &bad);
	mdl_put_str(o, "provider", n->provider, &bad);
	mdl_put_str(o, "pool", n->pool, &bad);
	mdl_put(o, "type", mdl_strv_json(&n->type), &bad);
	mdl_put_str(o, "allocated_to", n->allocated_to, &bad);
	mdl_put_str(o, "az", n->az, &bad);
	mdl_put_str(o, "region", n->region, &bad);
	mdl_put_str(o, "public_ipv4", n->public_ipv4, &bad);
	mdl_put_str(o, "private_ipv4", n->private_ipv4, &bad);
	mdl_put_str(o, "public_ipv6", n->public_ipv6, &bad);
	mdl_put_str(o, "host_id", n->host_id, &bad);
	mdl_put_str(o, "interface_ip", n->interface_ip, &bad);
	port = n->connection_port_obj != NULL ? json_deep_copy(n->connection_port_obj)
					      : json_integer(n->connection_port);
	mdl_put(o, "connection_port", port != NULL ? json_incref(port) : NULL, &bad);
	mdl_put(o, "ssh_port", port, &bad);
	mdl_put_str(o, "image_id", n->image_id, &bad);
	mdl_put_str(o, "launcher", n->launcher, &bad);
	mdl_put(o, "created_time", n->created_time != 0 ? json_real(n->created_time) : json_null(),
		&bad);
	if (n->external_id_obj != NULL)
		mdl_put(o, "external_id", json_deep_copy(n->external_id_obj), &bad);
	else
		mdl_put_str(o, "external_id", n->external_id, &bad);
	mdl_put_str(o, "hostname", n->hostname, &bad);
	mdl_put_str(o, "comment", n->comment, &bad);
	mdl_put(o, "user_data", mdl_ref_or_null(n->user_data), &bad);
	mdl_put_str(o, "hold_job", n->hold_job, &bad);
	mdl_put(o, "host_keys", mdl_strv_json(&n->host_keys), &bad);
	mdl_put_str(o, "username", n->username, &bad);
	mdl_put_str(o, "connection_type", n->connection_type, &bad);
	mdl_put_str(o, "shell_type", n->shell_type, &bad);
	mdl_put(o, "hold_expiration",
		n->has_hold_expiration ? json_integer(n->hold_expiration) : json_null(), &bad);
	mdl_put(o, "resources", mdl_ref_or_null(n->resources), &bad);
	mdl_put(o, "slot", n->slot >= 0 ? json_integer(n->slot) : json_null(), &bad);
	mdl_put(o, "attributes", mdl_ref_or_null(n->attributes), &bad);
	mdl_put_str(o, "python_path", n->python_path, &bad);
	mdl_put_str(o, "tenant_name", n->tenant_name, &bad);
	mdl_put(o, "driver_data", mdl_ref_or_null(n->driver_data), &bad);
	mdl_put_str(o, "requestor", n->requestor, &bad);
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
	return mdl_finish(o, n->extra, n->odd, n->odd_as, bad, 0, len);
}
