/*
 * The aws driver's listings (aws_int.h): paginated EC2 listings
 * (struct lister), list_instances, and list_resources in stages (hosts,
 * instances, volumes, AMIs, snapshots, then the object bucket's objects by
 * their S3 tags) with delete_resource for what leaked.
 */
#include "drivers/aws/aws_int.h"
#include "drivers/statemachine/reqformat.h"

#include <sys/queue.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "drivers/aws/aws_api.h"
#include "lib/net/curl_dl.h"
#include "lib/config/jsonget.h"
#include "lib/core/log.h"
#include "lib/net/ratelimit.h"
#include "lib/core/clock.h"

/* ---- describe items -> instances ---- */

struct sm_instance *
aws_instance_of(struct sm_adapter *a, const xmlNode *it)
{
	struct sm_instance *i = sm_instance_new();
	char buf[256], k[256], v[512];
	const xmlNode *t;
	int spot;

	sm_set_str(&i->external_id, aws_xtext(it, "instanceId", buf, sizeof(buf)));
	aws_xtext(it, "instanceState/name", buf, sizeof(buf));
	i->ready = strcmp(buf, "running") == 0;
	i->deleted = strcmp(buf, "shutting-down") == 0 || strcmp(buf, "terminated") == 0;
	if (aws_xtext(it, "privateIpAddress", buf, sizeof(buf))[0] != '\0')
		sm_set_str(&i->private_ipv4, buf);
	if (aws_xtext(it, "ipAddress", buf, sizeof(buf))[0] != '\0')
		sm_set_str(&i->public_ipv4, buf);
	if (aws_xtext(it, "networkInterfaceSet/item/ipv6AddressesSet/item/ipv6Address", buf,
		      sizeof(buf))[0] != '\0')
		sm_set_str(&i->public_ipv6, buf);
	sm_set_str(&i->interface_ip, i->public_ipv4 != NULL   ? i->public_ipv4
				     : i->public_ipv6 != NULL ? i->public_ipv6
							      : i->private_ipv4);
	if (aws_xtext(it, "placement/availabilityZone", buf, sizeof(buf))[0] != '\0')
		sm_set_str(&i->az, buf);
	if (aws_xtext(it, "placement/hostId", buf, sizeof(buf))[0] != '\0')
		sm_set_str(&i->host_id, buf);
	sm_set_str(&i->region, json_string_value(json_object_get(a->env->provider, "region-name")));
	for (t = aws_xpath(it, "tagSet/item"); t != NULL; t = aws_xnext(t))
		json_object_set_new(i->metadata, aws_xtext(t, "key", k, sizeof(k)),
				    json_string(aws_xtext(t, "value", v, sizeof(v))));
	spot = strcmp(aws_xtext(it, "instanceLifecycle", buf, sizeof(buf)), "spot") == 0;
	aws_xtext(it, "instanceType", buf, sizeof(buf));
	drv_quota_clear(&i->quota);
	if (i->host_id != NULL)
		aws_host_quota(buf, &i->quota);
	else
		aws_type_quota(a, buf, spot, &i->quota);
	i->driver_data =
	    json_pack("{s:s, s:s}", "instance_type", buf, "lifecycle", spot ? "spot" : "on-demand");
	return i;
}

static void lister_page(struct lister *ls, const char *token);

static void
lister_done(const struct aws_result *r, void *arg)
{
	struct lister *ls = arg;
	const xmlNode *it;
	char tok[2048];

	ls->call = NULL;
	if (r->code != NULL) {
		char err[512];
		snprintf(err, sizeof(err), "%s: %s: %s", ls->action, r->code, r->message);
		ls->end(ls, err);
		return;
	}
	if (strcmp(ls->action, "DescribeInstances") == 0) {
		const xmlNode *res;
		for (res = aws_xpath(r->root, "reservationSet/item"); res != NULL;
		     res = aws_xnext(res))
			for (it = aws_xpath(res, "instancesSet/item"); it != NULL;
			     it = aws_xnext(it))
				ls->item(ls, it);
	} else {
		for (it = aws_xpath(r->root, ls->set); it != NULL; it = aws_xnext(it))
			ls->item(ls, it);
	}
	aws_xtext(r->root, "nextToken", tok, sizeof(tok));
	if (tok[0] != '\0' && ls->pages + 1 >= AWS_MAX_LIST_PAGES) {
		/* a partial listing would read as resources gone: a failed one */
		char err[200];
		snprintf(err, sizeof(err), "%s: more than %d pages", ls->action,
			 AWS_MAX_LIST_PAGES);
		ls->end(ls, err);
	} else if (tok[0] != '\0') {
		ls->pages++;
		lister_page(ls, tok);
	} else
		ls->end(ls, NULL);
}

static void
lister_page(struct lister *ls, const char *token)
{
	char *form = ls->params != NULL ? strdup(ls->params) : NULL;

	if (token != NULL)
		aws_form_add(&form, "NextToken", token);
	else
		ls->pages = 0;
	ls->call = aws_ec2(ls->a->api, ls->action, form, 0, lister_done, ls);
	free(form);
}

/* list_instances */

static void
li_item(struct lister *ls, const xmlNode *it)
{
	char st[32];

	if (strcmp(aws_xtext(it, "instanceState/name", st, sizeof(st)), "terminated") == 0)
		return;
	if (ls->ninst == ls->cap) {
		ls->cap = ls->cap ? ls->cap * 2 : 64;
		ls->inst = realloc(ls->inst, ls->cap * sizeof(*ls->inst));
	}
	ls->inst[ls->ninst++] = aws_instance_of(ls->a, it);
}
struct listers aws_all_listers; /* one worker per provider: one adapter */

static void
lister_forget(struct lister *ls)
{
	int i;

	for (i = 0; i < 32; i++)
		if (aws_all_listers.v[i] == ls)
			aws_all_listers.v[i] = NULL;
}

static struct lister *
lister_new(struct sm_adapter *a)
{
	struct lister *ls = calloc(1, sizeof(*ls));
	int i;

	ls->a = a;
	ls->meta = json_array();
	for (i = 0; i < 32; i++)
		if (aws_all_listers.v[i] == NULL) {
			aws_all_listers.v[i] = ls;
			break;
		}
	return ls;
}

void
aws_lister_free(struct lister *ls)
{
	size_t i;

	lister_forget(ls);
	aws_call_cancel(ls->call);
	for (i = 0; i < ls->ninst; i++)
		sm_instance_free(ls->inst[i]);
	free(ls->inst);
	free(ls->res);
	json_decref(ls->meta);
	json_decref(ls->keys);
	json_decref(ls->untagged);
	json_decref(ls->task_tags);
	free(ls->params);
	free(ls);
}

static void
li_end(struct lister *ls, const char *error)
{
	sm_instances_cb cb = (sm_instances_cb)ls->cb;

	if (error != NULL)
		cb(NULL, 0, error, ls->arg);
	else
		cb(ls->inst, ls->ninst, NULL, ls->arg);
	aws_lister_free(ls);
}

void
aws_list_instances(struct sm_adapter *a, sm_instances_cb cb, void *arg)
{
	struct lister *ls = lister_new(a);

	ls->action = "DescribeInstances";
	ls->item = li_item;
	ls->end = li_end;
	ls->cb = (void *)cb;
	ls->arg = arg;
	aws_form_add(&ls->params, "MaxResults", "1000");
	lister_page(ls, NULL);
}

/* list_resources: instances, volumes, AMIs, snapshots in stages */

static const struct {
	const char *action, *set, *type, *id, *state, *skip, *params;
} stages[] = {
    {"DescribeHosts", "hostSet/item", "host", "hostId", "state", "released", "&MaxResults=500"},
    {"DescribeInstances", NULL, "instance", "instanceId", "instanceState/name", "terminated",
     "&MaxResults=1000"},
    {"DescribeVolumes", "volumeSet/item", "volume", "volumeId", "status", "deleted",
     "&MaxResults=500"},
    {"DescribeImages", "imagesSet/item", "ami", "imageId", "imageState", "deregistered",
     "&Owner.1=self"},
    {"DescribeSnapshots", "snapshotSet/item", "snapshot", "snapshotId", "status", "",
     "&Owner.1=self&MaxResults=1000"},
};

/* One resource listed: type (static), id, meta (taken). */
static void
lr_add(struct lister *ls, const char *type, const char *id, json_t *meta)
{
	json_t *holder = json_pack("{s:s, s:o}", "id", id, "meta", meta);

	json_array_append_new(ls->meta, holder);
	if (ls->nres == ls->rcap) {
		ls->rcap = ls->rcap ? ls->rcap * 2 : 64;
		ls->res = realloc(ls->res, ls->rcap * sizeof(*ls->res));
	}
	ls->res[ls->nres++] =
	    (struct sm_resource){type, json_string_value(json_object_get(holder, "id")),
				 json_object_get(holder, "meta")};
}

static void
lr_item(struct lister *ls, const xmlNode *it)
{
	char id[128], st[64], k[256], v[512];
	const xmlNode *t;
	json_t *meta;

	if (strcmp(aws_xtext(it, stages[ls->stage].state, st, sizeof(st)),
		   stages[ls->stage].skip) == 0)
		return;
	aws_xtext(it, stages[ls->stage].id, id, sizeof(id));
	meta = json_object();
	for (t = aws_xpath(it, "tagSet/item"); t != NULL; t = aws_xnext(t))
		json_object_set_new(meta, aws_xtext(t, "key", k, sizeof(k)),
				    json_string(aws_xtext(t, "value", v, sizeof(v))));
	if (json_object_size(meta) == 0 && (strcmp(stages[ls->stage].type, "ami") == 0 ||
					    strcmp(stages[ls->stage].type, "snapshot") == 0)) {
		/* maybe ours, its tags not yet copied from its import task */
		const char *snap =
		    strcmp(stages[ls->stage].type, "snapshot") == 0
			? id
			: aws_xtext(it, "blockDeviceMapping/item/ebs/snapshotId", v, sizeof(v));
		json_decref(meta);
		if (json_object_get(ls->a->not_ours, id) != NULL)
			return;
		if (snap[0] == '\0') {
			json_object_set_new(ls->a->not_ours, id, json_true());
			return;
		}
		if (ls->untagged == NULL)
			ls->untagged = json_array();
		json_array_append_new(ls->untagged,
				      json_pack("{s:s, s:s, s:s}", "type", stages[ls->stage].type,
						"id", id, "snap", snap));
		return;
	}
	lr_add(ls, stages[ls->stage].type, id, meta);
}

/*
 * As upstream's _tagAmis/_tagSnapshots: an AMI or snapshot without tags
 * made by an import task tagged for this provider (a builder stopped
 * between the import and its tagging) gets the task's tags (CreateTags),
 * so the leak rule can judge it in this very listing. Costs one
 * DescribeImportSnapshotTasks listing, and only in a pass that found
 * untagged ones; those no task of ours made are remembered and not looked
 * at again.
 */
static void lr_after_ec2(struct lister *ls);

static void
lt_item(struct lister *ls, const xmlNode *it)
{
	char snap[128], k[256], v[512];
	const xmlNode *t;
	json_t *tags;

	if (aws_xtext(it, "snapshotTaskDetail/snapshotId", snap, sizeof(snap))[0] == '\0')
		return;
	tags = json_object();
	for (t = aws_xpath(it, "tagSet/item"); t != NULL; t = aws_xnext(t))
		json_object_set_new(tags, aws_xtext(t, "key", k, sizeof(k)),
				    json_string(aws_xtext(t, "value", v, sizeof(v))));
	json_object_set_new(ls->task_tags, snap, tags);
}

static void
lt_end(struct lister *ls, const char *error)
{
	size_t i;
	const json_t *u;

	if (error != NULL) {
		log_warn("aws %s: %s (untagged images left for the next pass)", ls->a->provider,
			 error);
		lr_after_ec2(ls);
		return;
	}
	json_array_foreach(ls->untagged, i, u)
	{
		const char *id = json_string_value(json_object_get(u, "id"));
		const json_t *tags =
		    json_object_get(ls->task_tags, json_string_value(json_object_get(u, "snap")));
		const char *pn = json_string_value(json_object_get(tags, "nodepool_provider_name"));
		const char *k;
		const json_t *v;
		char *form = NULL;
		int n = 1;

		if (pn == NULL || strcmp(pn, ls->a->provider) != 0) {
			json_object_set_new(ls->a->not_ours, id, json_true());
			continue;
		}
		log_info("aws %s: copying the tags of its import task to %s %s", ls->a->provider,
			 json_string_value(json_object_get(u, "type")), id);
		aws_form_add(&form, "ResourceId.1", id);
		json_object_foreach((json_t *)tags, k, v)
		{
			aws_form_addf(&form, k, "Tag.%d.Key", n);
			aws_form_addf(&form, json_string_value(v), "Tag.%d.Value", n);
			n++;
		}
		aws_ec2(ls->a->api, "CreateTags", form, 1, aws_noop_cb, NULL);
		free(form);
		lr_add(ls,
		       strcmp(json_string_value(json_object_get(u, "type")), "ami") == 0
			   ? "ami"
			   : "snapshot",
		       id, json_deep_copy(tags));
	}
	lr_after_ec2(ls);
}
static void lr_finish(struct lister *ls, const char *error);

static const char *
object_bucket(const struct sm_adapter *a)
{
	return json_string_value(
	    json_object_get(json_object_get(a->env->provider, "object-storage"), "bucket-name"));
}

static void lr_tag_next(struct lister *ls);

static void
lr_tag_done(const struct aws_result *r, void *arg)
{
	struct lister *ls = arg;
	const char *key = json_string_value(json_array_get(ls->keys, ls->kidx));
	const xmlNode *t;
	char k[256], v[512];

	ls->call = NULL;
	if (r->code == NULL) {
		json_t *meta = json_object();
		for (t = aws_xpath(r->root, "TagSet/Tag"); t != NULL; t = aws_xnext(t))
			json_object_set_new(meta, aws_xtext(t, "Key", k, sizeof(k)),
					    json_string(aws_xtext(t, "Value", v, sizeof(v))));
		lr_add(ls, "object", key, meta);
	} else {
		log_debug("aws %s: tags of object %s: %s: %s (skipped)", ls->a->provider, key,
			  r->code, r->message);
	}
	ls->kidx++;
	lr_tag_next(ls);
}

static void
lr_tag_next(struct lister *ls)
{
	char *path, *q;

	if (ls->kidx >= json_array_size(ls->keys)) {
		lr_finish(ls, NULL);
		return;
	}
	path = aws_s3_path(object_bucket(ls->a),
			   json_string_value(json_array_get(ls->keys, ls->kidx)));
	q = malloc(strlen(path) + 10);
	sprintf(q, "%s?tagging=", path); /* "tagging=": the canonical query libcurl signs */
	ls->call = aws_s3(ls->a->api, "GET", q, NULL, 0, NULL, lr_tag_done, ls);
	free(q);
	free(path);
}

static void lr_objects_page(struct lister *ls, const char *token);

static void
lr_objects_done(const struct aws_result *r, void *arg)
{
	struct lister *ls = arg;
	const xmlNode *c;
	char key[1100], tok[2048];

	ls->call = NULL;
	if (r->code != NULL) {
		log_warn("aws %s: listing bucket %s: %s: %s (objects left out)", ls->a->provider,
			 object_bucket(ls->a), r->code, r->message);
		json_array_clear(ls->keys);
		lr_finish(ls, NULL);
		return;
	}
	for (c = aws_xpath(r->root, "Contents"); c != NULL; c = aws_xnext(c))
		if (aws_xtext(c, "Key", key, sizeof(key))[0] != '\0')
			json_array_append_new(ls->keys, json_string(key));
	aws_xtext(r->root, "NextContinuationToken", tok, sizeof(tok));
	if (strcmp(aws_xtext(r->root, "IsTruncated", key, sizeof(key)), "true") == 0 &&
	    tok[0] != '\0' && ++ls->pages < AWS_MAX_LIST_PAGES)
		lr_objects_page(ls, tok);
	else {
		if (ls->pages >= AWS_MAX_LIST_PAGES)
			log_warn("aws %s: bucket %s: more than %d pages of objects: the rest are "
				 "left out of leak cleanup",
				 ls->a->provider, object_bucket(ls->a), AWS_MAX_LIST_PAGES);
		lr_tag_next(ls);
	}
}

static void
lr_objects_page(struct lister *ls, const char *token)
{
	char *b = curl_easy_escape(NULL, object_bucket(ls->a), 0);
	char *t = token != NULL ? curl_easy_escape(NULL, token, 0) : NULL;
	size_t n = strlen(b) + (t != NULL ? strlen(t) : 0) + 64;
	char *q = malloc(n);

	if (token == NULL)
		ls->pages = 0;
	/* query keys in order: what SigV4 signs */
	if (t != NULL)
		snprintf(q, n, "/%s?continuation-token=%s&list-type=2", b, t);
	else
		snprintf(q, n, "/%s?list-type=2", b);
	ls->call = aws_s3(ls->a->api, "GET", q, NULL, 0, NULL, lr_objects_done, ls);
	free(q);
	curl_free(b);
	curl_free(t);
}

static void
lr_end(struct lister *ls, const char *error)
{
	if (error == NULL && ls->stage + 1 < (int)(sizeof(stages) / sizeof(stages[0]))) {
		ls->stage++;
		ls->action = stages[ls->stage].action;
		ls->set = stages[ls->stage].set;
		free(ls->params);
		ls->params = strdup(stages[ls->stage].params);
		lister_page(ls, NULL);
		return;
	}
	if (error != NULL) {
		lr_finish(ls, error);
		return;
	}
	if (json_array_size(ls->untagged) > 0) {
		ls->action = "DescribeImportSnapshotTasks";
		ls->set = "importSnapshotTaskSet/item";
		ls->item = lt_item;
		ls->end = lt_end;
		free(ls->params);
		ls->params = NULL;
		ls->task_tags = json_object();
		lister_page(ls, NULL);
		return;
	}
	lr_after_ec2(ls);
}

/* After the EC2 listings: the bucket's objects, if any, then the answer. */
static void
lr_after_ec2(struct lister *ls)
{
	if (object_bucket(ls->a) != NULL) {
		ls->keys = json_array();
		lr_objects_page(ls, NULL);
		return;
	}
	lr_finish(ls, NULL);
}

static void
lr_finish(struct lister *ls, const char *error)
{
	sm_resources_cb cb = (sm_resources_cb)ls->cb;

	if (error != NULL)
		cb(NULL, 0, error, ls->arg);
	else
		cb(ls->res, ls->nres, NULL, ls->arg);
	aws_lister_free(ls);
}

void
aws_list_resources(struct sm_adapter *a, sm_resources_cb cb, void *arg)
{
	struct lister *ls = lister_new(a);

	ls->stage = 0;
	ls->action = stages[0].action;
	ls->set = stages[0].set;
	ls->params = strdup(stages[0].params);
	ls->item = lr_item;
	ls->end = lr_end;
	ls->cb = (void *)cb;
	ls->arg = arg;
	lister_page(ls, NULL);
}

struct del_ctx {
	struct pend p;
	sm_done_cb cb;
	void *arg;
	struct aws_call *call;
};

static void
del_done(const struct aws_result *r, void *arg)
{
	struct del_ctx *d = arg;
	int gone = r->code != NULL && strstr(r->code, "NotFound") != NULL;
	char err[512];

	LIST_REMOVE(&d->p, entry);
	if (r->code != NULL && !gone)
		snprintf(err, sizeof(err), "%s: %s", r->code, r->message);
	d->cb(r->code == NULL || gone, r->code == NULL || gone ? NULL : err, d->arg);
	free(d);
}

void
aws_delete_resource(struct sm_adapter *a, const struct sm_resource *r, sm_done_cb cb, void *arg)
{
	struct del_ctx *d = calloc(1, sizeof(*d));
	char *form = NULL;
	const char *action;

	d->cb = cb;
	d->arg = arg;
	LIST_INSERT_HEAD(&a->pend, &d->p, entry);
	log_info("aws %s: deleting leaked %s %s", a->provider, r->type, r->id);
	if (strcmp(r->type, "object") == 0) {
		char *path = aws_s3_path(object_bucket(a), r->id);
		d->call = aws_s3(a->api, "DELETE", path, NULL, 0, NULL, del_done, d);
		free(path);
		return;
	}
	if (strcmp(r->type, "host") == 0) {
		/* a host with an instance still on it is refused (unsuccessful):
		 * the next cleanup asks again, once its leaked instance is gone */
		action = "ReleaseHosts";
		aws_form_add(&form, "HostId.1", r->id);
	} else if (strcmp(r->type, "instance") == 0) {
		action = "TerminateInstances";
		aws_form_add(&form, "InstanceId.1", r->id);
	} else if (strcmp(r->type, "volume") == 0) {
		action = "DeleteVolume";
		aws_form_add(&form, "VolumeId", r->id);
	} else if (strcmp(r->type, "ami") == 0) {
		action = "DeregisterImage";
		aws_form_add(&form, "ImageId", r->id);
	} else {
		action = "DeleteSnapshot";
		aws_form_add(&form, "SnapshotId", r->id);
	}
	d->call = aws_ec2(a->api, action, form, 1, del_done, d);
	free(form);
}
