/* nodepool-web's compact node records (nodeview.h). */
#include "lib/ops/nodeview.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/intern.h"
#include "lib/zk/zk.h"

/* The packed fields, in their order in data[]: strings, then JSON texts. */
enum {
	F_HOSTNAME,
	F_PUBLIC_IPV4,
	F_PRIVATE_IPV4,
	F_PUBLIC_IPV6,
	F_EXTERNAL_ID,
	F_ALLOCATED_TO,
	F_HOLD_JOB,
	F_COMMENT,
	F_JSON, /* the JSON texts from here */
	F_EXTERNAL_ID_OBJ = F_JSON,
	F_USER_DATA,
	F_DRIVER_DATA,
	F_ODD, /* the odd values of odd_keys[], as stored */
	F_COUNT = F_ODD + 6
};

/* The keys status.c shows as stored when odd. */
static const char *const odd_keys[6] = {"provider", "state",	"pool",
					"hostname", "hold_job", "comment"};

struct np_node_view {
	double state_time;
	int32_t connection_port;
	uint32_t present; /* 1 << F_x: field x is in data[] */
	/* intern.h indices, 0 = none */
	uint16_t provider, pool, az, username, launcher, type;
	uint16_t cores; /* resources.cores, saturated; 0 unknown */
	signed char state;
	unsigned char whole;	/* data[] holds a struct np_node * instead */
	unsigned char redacted; /* the port is an object: shown "redacted" */
	uint32_t ram;		/* resources.ram (MiB), saturated; 0 unknown */
	char data[];
};

#define VIEW_HEAD offsetof(struct np_node_view, data)

/* A JSON value as the text status.c's rendering reads back: exported as it
 * shows it (np_json_export), compact; NULL when it cannot be written. */
static char *
json_text(const json_t *v)
{
	json_t *e = np_json_export(v);
	char *s;

	if (e == NULL)
		return NULL;
	s = json_dumps(e, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY |
			      JSON_REAL_PRECISION(17));
	json_decref(e);
	return s;
}

static int
fit(int ix, uint16_t *out)
{
	if (ix < 0)
		return 0;
	*out = (uint16_t)ix;
	return 1;
}

/* resources.cores and .ram of n, saturated to the view's fields. */
static void
resources_of(const struct np_node *n, uint16_t *cores, uint32_t *ram)
{
	json_int_t c = json_integer_value(json_object_get(n->resources, "cores"));
	json_int_t r = json_integer_value(json_object_get(n->resources, "ram"));

	*cores = c <= 0 ? 0 : c > UINT16_MAX ? UINT16_MAX : (uint16_t)c;
	*ram = r <= 0 ? 0 : r > (json_int_t)UINT32_MAX ? UINT32_MAX : (uint32_t)r;
}

static struct np_node_view *
keep_whole(struct np_node *n, int *taken)
{
	struct np_node_view *v = calloc(1, VIEW_HEAD + sizeof(n));

	if (v == NULL)
		abort();
	v->whole = 1;
	memcpy(v->data, &n, sizeof(n));
	*taken = 1;
	return v;
}

static const struct np_node *
whole_of(const struct np_node_view *v)
{
	const struct np_node *n;

	memcpy(&n, v->data, sizeof(n));
	return n;
}

struct np_node_view *
np_node_view_new(struct np_node *n, int *taken)
{
	const char *str[F_COUNT] = {0};
	char *own[F_COUNT] = {0};
	struct np_node_view h, *v;
	size_t len[F_COUNT], total = 0, i;
	char *p;
	int ok = 1;

	*taken = 0;
	memset(&h, 0, sizeof(h));
	if (!fit(np_intern_str(n->provider), &h.provider) ||
	    !fit(np_intern_str(n->pool), &h.pool) || !fit(np_intern_str(n->az), &h.az) ||
	    !fit(np_intern_str(n->username), &h.username) ||
	    !fit(np_intern_str(n->launcher), &h.launcher) ||
	    !fit(np_intern_labels(&n->type), &h.type) || n->state < -1 || n->state > 127 ||
	    n->state == NP_NODE_HOLD)
		return keep_whole(n, taken); /* a held node: few, and its expiry is shown */
	resources_of(n, &h.cores, &h.ram);
	h.state = (signed char)n->state;
	h.state_time = n->state_time;
	h.connection_port = n->connection_port;
	h.redacted = n->connection_port_obj != NULL;
	str[F_HOSTNAME] = n->hostname;
	str[F_PUBLIC_IPV4] = n->public_ipv4;
	str[F_PRIVATE_IPV4] = n->private_ipv4;
	str[F_PUBLIC_IPV6] = n->public_ipv6;
	str[F_EXTERNAL_ID] = n->external_id;
	str[F_ALLOCATED_TO] = n->allocated_to;
	str[F_HOLD_JOB] = n->hold_job;
	str[F_COMMENT] = n->comment;
	if (n->external_id_obj != NULL)
		ok &= (str[F_EXTERNAL_ID_OBJ] = own[F_EXTERNAL_ID_OBJ] =
			   json_text(n->external_id_obj)) != NULL;
	if (n->user_data != NULL)
		ok &= (str[F_USER_DATA] = own[F_USER_DATA] = json_text(n->user_data)) != NULL;
	if (n->driver_data != NULL)
		ok &= (str[F_DRIVER_DATA] = own[F_DRIVER_DATA] = json_text(n->driver_data)) != NULL;
	for (i = 0; i < 6 && n->odd != NULL; i++) {
		const json_t *o = json_object_get(n->odd, odd_keys[i]);
		if (o != NULL)
			ok &= (str[F_ODD + i] = own[F_ODD + i] = json_text(o)) != NULL;
	}
	for (i = 0; i < F_COUNT; i++)
		if (str[i] != NULL) {
			len[i] = strlen(str[i]) + 1;
			total += len[i];
			h.present |= 1u << i;
		}
	if (!ok) {
		for (i = 0; i < F_COUNT; i++)
			free(own[i]);
		return keep_whole(n, taken);
	}
	if ((v = malloc(VIEW_HEAD + total)) == NULL)
		abort();
	memcpy(v, &h, VIEW_HEAD);
	for (p = v->data, i = 0; i < F_COUNT; i++)
		if (str[i] != NULL) {
			memcpy(p, str[i], len[i]);
			p += len[i];
			free(own[i]);
		}
	return v;
}

void
np_node_view_free(struct np_node_view *v)
{
	if (v == NULL)
		return;
	if (v->whole)
		np_node_free((struct np_node *)whole_of(v));
	free(v);
}

int
np_node_view_state(const struct np_node_view *v)
{
	return v->whole ? whole_of(v)->state : v->state;
}

const char *
np_node_view_provider(const struct np_node_view *v)
{
	return v->whole ? whole_of(v)->provider : np_intern_str_get(v->provider);
}

const struct np_strv *
np_node_view_type(const struct np_node_view *v)
{
	return v->whole ? &whole_of(v)->type : np_intern_labels_get(v->type);
}

const char *
np_node_view_pool(const struct np_node_view *v)
{
	return v->whole ? whole_of(v)->pool : np_intern_str_get(v->pool);
}

double
np_node_view_state_time(const struct np_node_view *v)
{
	return v->whole ? whole_of(v)->state_time : v->state_time;
}

void
np_node_view_resources(const struct np_node_view *v, long long *cores, long long *ram)
{
	uint16_t c;
	uint32_t r;

	if (v->whole)
		resources_of(whole_of(v), &c, &r);
	else
		c = v->cores, r = v->ram;
	*cores = c;
	*ram = r;
}

const struct np_node *
np_node_view_whole(const struct np_node_view *v)
{
	return v->whole ? whole_of(v) : NULL;
}

static json_t *
json_back(const char *text)
{
	json_t *j = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);

	/* written by json_text: cannot fail but for memory */
	if (j == NULL)
		abort();
	return j;
}

void
status_add_node_view(struct status_table *t, const char *id, const struct np_node_view *v,
		     int locked, double now)
{
	const char *f[F_COUNT] = {0}, *p = v->data;
	json_t *j[F_COUNT] = {0}, *odd = NULL;
	struct status_node_row r;
	size_t i;

	if (v->whole) {
		status_node_row_of(&r, whole_of(v));
		r.id = id;
		status_add_node_row(t, &r, locked, now);
		return;
	}
	for (i = 0; i < F_COUNT; i++)
		if (v->present & (1u << i)) {
			f[i] = p;
			p += strlen(p) + 1;
			if (i >= F_JSON)
				j[i] = json_back(f[i]);
		}
	for (i = 0; i < 6; i++)
		if (j[F_ODD + i] != NULL) {
			if (odd == NULL && (odd = json_object()) == NULL)
				abort();
			json_object_set(odd, odd_keys[i], j[F_ODD + i]);
		}
	memset(&r, 0, sizeof(r));
	r.id = id;
	r.provider = np_intern_str_get(v->provider);
	r.pool = np_intern_str_get(v->pool);
	r.az = np_intern_str_get(v->az);
	r.username = np_intern_str_get(v->username);
	r.launcher = np_intern_str_get(v->launcher);
	r.type = np_intern_labels_get(v->type);
	r.hostname = f[F_HOSTNAME];
	r.public_ipv4 = f[F_PUBLIC_IPV4];
	r.private_ipv4 = f[F_PRIVATE_IPV4];
	r.public_ipv6 = f[F_PUBLIC_IPV6];
	r.external_id = f[F_EXTERNAL_ID];
	r.allocated_to = f[F_ALLOCATED_TO];
	r.hold_job = f[F_HOLD_JOB];
	r.comment = f[F_COMMENT];
	r.state = v->state;
	r.state_time = v->state_time;
	r.connection_port = v->connection_port;
	r.port_redacted = v->redacted;
	r.external_id_obj = j[F_EXTERNAL_ID_OBJ];
	r.user_data = j[F_USER_DATA];
	r.driver_data = j[F_DRIVER_DATA];
	r.odd = odd;
	status_add_node_row(t, &r, locked, now);
	for (i = 0; i < F_COUNT; i++)
		json_decref(j[i]);
	json_decref(odd);
}

void
status_nodes_from_views(struct status_table *t, const struct zk_cache *nodes, const char *node_id,
			double now)
{
	const struct zk_cache_entry *const *ents;
	int i, n;

	if (nodes == NULL)
		return;
	if (node_id != NULL && *node_id != '\0') {
		const struct zk_cache_entry *e = zk_cache_get(nodes, node_id);
		if (e != NULL && e->obj != NULL)
			status_add_node_view(t, e->name, e->obj, e->locked, now);
		return;
	}
	n = zk_cache_entries(nodes, &ents);
	for (i = 0; i < n; i++)
		if (ents[i]->obj != NULL)
			status_add_node_view(t, ents[i]->name, ents[i]->obj, ents[i]->locked, now);
}
