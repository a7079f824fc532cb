/*
 * Quota arithmetic, as upstream Nodepool's QuotaInformation
 * (driver/utils.py): cores, instances, ram and named extras. Unlimited is
 * INFINITY, as upstream's math.inf, so addition and subtraction need no
 * special cases. An extra missing from a sum counts as 0; missing from a
 * limit (the left side of a subtraction) it is unlimited.
 */
#include "drivers/driver.h"

#include <math.h>
#include <string.h>

void
drv_quota_init(struct drv_quota *q, double cores, double instances, double ram)
{
	q->cores = cores;
	q->instances = instances;
	q->ram = ram;
	q->extra = NULL;
}

void
drv_quota_unlimited(struct drv_quota *q)
{
	drv_quota_init(q, INFINITY, INFINITY, INFINITY);
}

void
drv_quota_clear(struct drv_quota *q)
{
	json_decref(q->extra);
	q->extra = NULL;
}

static void
q_op(struct drv_quota *q, const struct drv_quota *o, double sign)
{
	const char *k;
	json_t *v;

	q->cores += sign * o->cores;
	q->instances += sign * o->instances;
	q->ram += sign * o->ram;
	if (o->extra == NULL)
		return;
	if (q->extra == NULL)
		q->extra = json_object();
	json_object_foreach(o->extra, k, v)
	{
		double a = json_number_value(json_object_get(q->extra, k));
		/* a limit that does not name a resource does not limit it */
		if (sign < 0 && json_object_get(q->extra, k) == NULL)
			continue;
		json_object_set_new(q->extra, k, json_real(a + sign * json_number_value(v)));
	}
}

void
drv_quota_add(struct drv_quota *q, const struct drv_quota *other)
{
	q_op(q, other, 1);
}

void
drv_quota_sub(struct drv_quota *q, const struct drv_quota *other)
{
	q_op(q, other, -1);
}

int
drv_quota_non_negative(const struct drv_quota *q)
{
	const char *k;
	json_t *v;

	if (q->cores < 0 || q->instances < 0 || q->ram < 0)
		return 0;
	if (q->extra != NULL) {
		json_object_foreach(q->extra, k, v) if (json_number_value(v) < 0) return 0;
	}
	return 1;
}

static void
set_int(json_t *o, const char *k, double d)
{
	if (isfinite(d))
		json_object_set_new(o, k, json_integer((json_int_t)d));
}

json_t *
drv_quota_to_json(const struct drv_quota *q)
{
	json_t *o = json_object();
	const char *k;
	json_t *v;

	set_int(o, "cores", q->cores);
	set_int(o, "instances", q->instances);
	set_int(o, "ram", q->ram);
	if (q->extra != NULL) {
		json_object_foreach(q->extra, k, v) set_int(o, k, json_number_value(v));
	}
	return o;
}

void
drv_quota_from_json(struct drv_quota *q, const json_t *resources)
{
	const char *k;
	json_t *v;

	drv_quota_init(q, 0, 0, 0);
	if (!json_is_object(resources))
		return;
	json_object_foreach((json_t *)resources, k, v)
	{
		double d = json_number_value(v);
		if (!json_is_number(v))
			continue;
		if (strcmp(k, "cores") == 0)
			q->cores = d;
		else if (strcmp(k, "instances") == 0)
			q->instances = d;
		else if (strcmp(k, "ram") == 0)
			q->ram = d;
		else {
			if (q->extra == NULL)
				q->extra = json_object();
			json_object_set_new(q->extra, k, json_real(d));
		}
	}
}
