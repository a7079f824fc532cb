/*
 * Nodepool's NodeRequest record (/nodepool/requests/<id>, see model.h):
 * decode, encode in toDict() order, and the queue order of requests.
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

static json_t *request_obj(const struct np_request *r, int *badp);

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
	d->requestor_data = mdl_copy_or_null(r->requestor_data);
	d->provider = xstrdup(r->provider);
	d->relative_priority = r->relative_priority;
	d->event_id = xstrdup(r->event_id);
	d->created_time = r->created_time;
	d->has_created_time = r->has_created_time;
	d->tenant_name = xstrdup(r->tenant_name);
	d->extra = mdl_copy_or_null(r->extra);
	d->odd = mdl_copy_or_null(r->odd);
	d->odd_as = mdl_copy_or_null(r->odd_as);
	return d;
}

void
np_request_set_state(struct np_request *r, int state)
{
	r->state = state;
	r->state_time = mdl_now_seconds();
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
	if ((root = mdl_dload(&c, data, len)) == NULL)
		return -1;
	r = np_request_new();
	r->id = xstrdup(id);
	mdl_get_state(&c, root, np_request_state_parse, NP_REQ_REQUESTED, &r->state);
	mdl_get_time(&c, root, "state_time", &r->state_time);
	mdl_get_strv(&c, root, "declined_by", &r->declined_by);
	mdl_get_strv(&c, root, "node_types", &r->node_types);
	mdl_get_strv(&c, root, "nodes", &r->nodes);
	mdl_get_bool(&c, root, "reuse", 1, &r->reuse);
	mdl_get_str(&c, root, "requestor", NULL, &r->requestor);
	mdl_get_any(&c, root, "requestor_data", &r->requestor_data);
	mdl_get_str(&c, root, "provider", NULL, &r->provider);
	mdl_get_int(&c, root, "relative_priority", 0, &r->relative_priority);
	mdl_get_str(&c, root, "event_id", NULL, &r->event_id);
	r->has_created_time = mdl_get_time(&c, root, "created_time", &r->created_time);
	mdl_get_str(&c, root, "tenant_name", NULL, &r->tenant_name);
	r->extra = mdl_dextra(&c);
	if (c.odd != NULL) {
		int bad = 0;
		json_t *t = request_obj(r, &bad);

		r->odd = c.odd;
		r->odd_as = mdl_odd_as_of(c.odd, t);
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
	mdl_put_str(o, "state", np_request_state_name(r->state), &bad);
	mdl_put(o, "state_time", json_real(r->state_time), &bad);
	mdl_put(o, "declined_by", mdl_strv_json(&r->declined_by), &bad);
	mdl_put(o, "node_types", mdl_strv_json(&r->node_types), &bad);
	mdl_put(o, "nodes", mdl_strv_json(&r->nodes), &bad);
	mdl_put(o, "reuse", json_boolean(r->reuse), &bad);
	mdl_put_str(o, "requestor", r->requestor, &bad);
	mdl_put(o, "requestor_data", mdl_ref_or_null(r->requestor_data), &bad);
	mdl_put_str(o, "provider", r->provider, &bad);
	mdl_put(o, "relative_priority", json_integer(r->relative_priority), &bad);
	mdl_put_str(o, "event_id", r->event_id, &bad);
	mdl_put(o, "created_time", r->has_created_time ? json_real(r->created_time) : json_null(),
		&bad);
	mdl_put_str(o, "tenant_name", r->tenant_name, &bad);
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
	return mdl_finish(o, r->extra, r->odd, r->odd_as, bad, 0, len);
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
