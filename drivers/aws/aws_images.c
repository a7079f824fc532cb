/*
 * The aws driver's images (aws_int.h): the AMI listing (list_images), an
 * upload (the file put into the object bucket in parts, ImportSnapshot or
 * ImportImage, polled until done, then tagged) and an image's delete (the
 * AMI deregistered, its snapshots deleted).
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

/*
 * list_images: DescribeImages of the account's own AMIs (Owner self),
 * every page; tags from tagSet. Deregistered ones are left out.
 */
struct ilist {
	struct sm_adapter *a;
	drv_image_list_cb cb;
	void *arg;
	json_t *images; /* [{id, name, tags}] */
};

static void ilist_page(struct ilist *il, const char *token);

static void
ilist_done(const struct aws_result *r, void *arg)
{
	struct ilist *il = arg;
	const xmlNode *it, *t;
	char id[128], name[512], st[64], k[256], v[512], tok[1024];
	const json_t *o;
	size_t i, n;

	if (r->code != NULL) {
		char msg[600];
		snprintf(msg, sizeof(msg), "DescribeImages: %s: %s", r->code,
			 r->message ? r->message : "");
		il->cb(NULL, 0, msg, il->arg);
		json_decref(il->images);
		free(il);
		return;
	}
	for (it = aws_xpath(r->root, "imagesSet/item"); it != NULL; it = aws_xnext(it)) {
		json_t *tags = json_object();
		if (strcmp(aws_xtext(it, "imageState", st, sizeof(st)), "deregistered") == 0) {
			json_decref(tags);
			continue;
		}
		for (t = aws_xpath(it, "tagSet/item"); t != NULL; t = aws_xnext(t))
			json_object_set_new(tags, aws_xtext(t, "key", k, sizeof(k)),
					    json_string(aws_xtext(t, "value", v, sizeof(v))));
		json_array_append_new(
		    il->images,
		    json_pack("{s:s, s:s, s:o}", "id", aws_xtext(it, "imageId", id, sizeof(id)),
			      "name", aws_xtext(it, "name", name, sizeof(name)), "tags", tags));
	}
	if (aws_xtext(r->root, "nextToken", tok, sizeof(tok))[0] != '\0') {
		ilist_page(il, tok);
		return;
	}
	n = json_array_size(il->images);
	{
		struct drv_cloud_image *vv = calloc(n + 1, sizeof(*vv));
		if (vv == NULL)
			abort();
		json_array_foreach(il->images, i, o) vv[i] = (struct drv_cloud_image){
		    json_string_value(json_object_get(o, "id")),
		    json_string_value(json_object_get(o, "name")), json_object_get(o, "tags")};
		il->cb(vv, n, NULL, il->arg);
		free(vv);
	}
	json_decref(il->images);
	free(il);
}

static void
ilist_page(struct ilist *il, const char *token)
{
	char *form = NULL;

	aws_form_add(&form, "Owner.1", "self");
	if (token != NULL)
		aws_form_add(&form, "NextToken", token);
	aws_ec2(il->a->api, "DescribeImages", form, 0, ilist_done, il);
	free(form);
}

void
aws_list_images(struct sm_adapter *a, drv_image_list_cb cb, void *arg)
{
	struct ilist *il = calloc(1, sizeof(*il));

	if (il == NULL)
		abort();
	il->a = a;
	il->cb = cb;
	il->arg = arg;
	il->images = json_array();
	ilist_page(il, NULL);
}

/* ---- image upload (the builder's) ---- */

/*
 * As upstream's uploadImage with import-method snapshot: the file to the
 * provider's object-storage bucket as "<image name>.<format>" (tagged with
 * the upload's metadata; multipart in AWS_PART bytes parts, one part in
 * memory at a time), ImportSnapshot from it, DescribeImportSnapshotTasks
 * until the task completes, the snapshot tagged, RegisterImage on it (the
 * diskimage's architecture, ena-support, volume-size/-type, iops,
 * throughput, imds-support), the AMI tagged; then the S3 object is
 * deleted. Leaked AMIs and snapshots carry the metadata and are found by
 * list_resources.
 */
#define AWS_PART	(8u << 20) /* bytes per multipart part (S3 minimum 5 MiB) */
#define AWS_IMPORT_POLL 2.0	   /* s between import task checks */

enum up_state {
	UP_PUT,
	UP_CREATE,
	UP_PART,
	UP_COMPLETE,
	UP_IMPORT,
	UP_TASK,
	UP_TAGSNAP,
	UP_REGISTER,
	UP_TAGAMI,
	UP_DELOBJ
};

struct upload {
	struct pend p;
	struct sm_adapter *a;
	enum up_state st;
	sm_upload_cb cb;
	void *arg;
	FILE *f;
	long long size, sent;
	int part;
	json_t *etags; /* array, part n at n-1 */
	char *bucket, *key, *path, *upload_id, *task, *snapshot, *ami, *name, *format;
	json_t *meta;
	const json_t *image; /* the diskimage's raw config (provider's, borrowed) */
	char *error;
	struct event *timer;
	struct aws_call *call;
};

static void up_step(struct upload *u);

static void
up_free(struct pend *p)
{
	struct upload *u = (struct upload *)p;

	if (u->f != NULL)
		fclose(u->f);
	if (u->timer != NULL)
		event_free(u->timer);
	json_decref(u->etags);
	json_decref(u->meta);
	free(u->bucket);
	free(u->key);
	free(u->path);
	free(u->upload_id);
	free(u->task);
	free(u->snapshot);
	free(u->ami);
	free(u->name);
	free(u->format);
	free(u->error);
	free(u);
}

void
aws_noop_cb(const struct aws_result *r, void *arg)
{
	(void)r;
	(void)arg;
}

/* Finish: the S3 object is deleted first once it exists (success or not),
 * an unfinished multipart upload aborted; then call back. */
static void
up_finish(struct upload *u, const char *error)
{
	if (error != NULL && u->error == NULL) {
		u->error = strdup(error);
		log_warn("aws %s: upload of %s failed: %s", u->a->provider, u->name, error);
	}
	if (u->st >= UP_IMPORT && u->st != UP_DELOBJ) {
		u->st = UP_DELOBJ;
		up_step(u);
		return;
	}
	if (u->upload_id != NULL) {
		char q[2048];
		snprintf(q, sizeof(q), "%s?uploadId=%s", u->path, u->upload_id);
		aws_s3(u->a->api, "DELETE", q, NULL, 0, NULL, aws_noop_cb, NULL);
	}
	LIST_REMOVE(&u->p, entry);
	u->cb(u->error == NULL ? u->ami : NULL, u->error, u->arg);
	up_free(&u->p);
}

static void
up_done(const struct aws_result *r, void *arg)
{
	struct upload *u = arg;
	char buf[128], err[600];

	u->call = NULL;
	if (r->code != NULL && !(u->st == UP_DELOBJ)) {
		snprintf(err, sizeof(err), "%s: %s: %s",
			 u->st <= UP_COMPLETE ? "S3 upload" : "image import", r->code, r->message);
		up_finish(u, err);
		return;
	}
	switch (u->st) {
	case UP_PUT:
		u->st = UP_IMPORT;
		break;
	case UP_CREATE:
		free(u->upload_id);
		u->upload_id = strdup(aws_xtext(r->root, "UploadId", buf, sizeof(buf)));
		u->st = UP_PART;
		break;
	case UP_PART:
		json_array_append_new(u->etags, json_string(r->etag != NULL ? r->etag : ""));
		if (u->sent >= u->size)
			u->st = UP_COMPLETE;
		break;
	case UP_COMPLETE:
		free(u->upload_id);
		u->upload_id = NULL;
		u->st = UP_IMPORT;
		break;
	case UP_IMPORT:
		u->task = strdup(aws_xtext(r->root, "importTaskId", buf, sizeof(buf)));
		u->st = UP_TASK;
		break;
	case UP_TASK: {
		char st[32];
		aws_xtext(r->root, "importSnapshotTaskSet/item/snapshotTaskDetail/status", st,
			  sizeof(st));
		if (strcmp(st, "completed") == 0) {
			u->snapshot = strdup(aws_xtext(
			    r->root, "importSnapshotTaskSet/item/snapshotTaskDetail/snapshotId",
			    buf, sizeof(buf)));
			u->st = UP_TAGSNAP;
		} else if (strcmp(st, "deleted") == 0 || strcmp(st, "deleting") == 0 ||
			   st[0] == '\0') {
			aws_xtext(r->root,
				  "importSnapshotTaskSet/item/snapshotTaskDetail/statusMessage",
				  buf, sizeof(buf));
			snprintf(err, sizeof(err), "import snapshot task %s %s: %s", u->task,
				 st[0] ? st : "vanished", buf);
			up_finish(u, err);
			return;
		} else {
			struct timeval tv = {(time_t)AWS_IMPORT_POLL, 0};
			evtimer_add(u->timer, &tv);
			return;
		}
		break;
	}
	case UP_TAGSNAP:
		u->st = UP_REGISTER;
		break;
	case UP_REGISTER:
		u->ami = strdup(aws_xtext(r->root, "imageId", buf, sizeof(buf)));
		u->st = UP_TAGAMI;
		break;
	case UP_TAGAMI:
		log_info("aws %s: image %s uploaded as %s (snapshot %s)", u->a->provider, u->name,
			 u->ami, u->snapshot);
		u->st = UP_DELOBJ;
		break;
	case UP_DELOBJ:
		up_finish(u, NULL);
		return;
	}
	up_step(u);
}

static void
up_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	up_step(arg);
}

static void
add_meta_tags(char **form, const char *prefix, const json_t *meta)
{
	const char *k;
	const json_t *v;
	int n = 1;

	json_object_foreach((json_t *)meta, k, v)
	{
		aws_form_addf(form, k, "%sTag.%d.Key", prefix, n);
		aws_form_addf(form, json_is_string(v) ? json_string_value(v) : "", "%sTag.%d.Value",
			      prefix, n);
		n++;
	}
}

static void
up_step(struct upload *u)
{
	struct sm_adapter *a = u->a;
	char *form = NULL, q[2048], num[32];

	switch (u->st) {
	case UP_PUT:
	case UP_PART: {
		size_t want = u->st == UP_PUT ? (size_t)u->size : AWS_PART, got;
		char *buf = malloc(want + 1);
		if (u->st == UP_PART)
			snprintf(q, sizeof(q), "%s?partNumber=%d&uploadId=%s", u->path, ++u->part,
				 u->upload_id);
		else
			snprintf(q, sizeof(q), "%s", u->path);
		got = fread(buf, 1, want, u->f);
		if (got < want && ferror(u->f)) {
			free(buf);
			up_finish(u, "reading the image file failed");
			return;
		}
		u->sent += (long long)got;
		if (u->st == UP_PUT) {
			char *tags = NULL, th[2100];
			const char *hdrs[2] = {th, NULL};
			const char *k;
			const json_t *v;
			json_object_foreach(u->meta, k, v)
			    aws_form_add(&tags, k, json_string_value(v));
			snprintf(th, sizeof(th), "x-amz-tagging: %s", tags != NULL ? tags + 1 : "");
			free(tags);
			u->call = aws_s3(a->api, "PUT", q, buf, got, hdrs, up_done, u);
		} else {
			u->call = aws_s3(a->api, "PUT", q, buf, got, NULL, up_done, u);
		}
		free(buf);
		return;
	}
	case UP_CREATE: {
		char *tags = NULL, th[2100];
		const char *hdrs[2] = {th, NULL};
		const char *k;
		const json_t *v;
		json_object_foreach(u->meta, k, v) aws_form_add(&tags, k, json_string_value(v));
		snprintf(th, sizeof(th), "x-amz-tagging: %s", tags != NULL ? tags + 1 : "");
		free(tags);
		/* "uploads=": libcurl 7.88 signs the query as written, and AWS
		 * canonicalises a bare key with "=" */
		snprintf(q, sizeof(q), "%s?uploads=", u->path);
		u->call = aws_s3(a->api, "POST", q, "", 0, hdrs, up_done, u);
		return;
	}
	case UP_COMPLETE: {
		struct evbuffer *b = evbuffer_new();
		size_t i, n;
		char *body;
		const json_t *e;
		evbuffer_add_printf(b, "<CompleteMultipartUpload>");
		json_array_foreach(u->etags, i, e) evbuffer_add_printf(
		    b, "<Part><PartNumber>%zu</PartNumber><ETag>%s</ETag></Part>", i + 1,
		    json_string_value(e));
		evbuffer_add_printf(b, "</CompleteMultipartUpload>");
		n = evbuffer_get_length(b);
		body = malloc(n + 1);
		evbuffer_remove(b, body, n);
		evbuffer_free(b);
		snprintf(q, sizeof(q), "%s?uploadId=%s", u->path, u->upload_id);
		u->call = aws_s3(a->api, "POST", q, body, n, NULL, up_done, u);
		free(body);
		return;
	}
	case UP_IMPORT: {
		char fmt[16];
		size_t i;
		snprintf(fmt, sizeof(fmt), "%s", u->format);
		for (i = 0; fmt[i]; i++)
			fmt[i] = (char)toupper((unsigned char)fmt[i]);
		aws_form_add(&form, "DiskContainer.Format", fmt);
		aws_form_add(&form, "DiskContainer.UserBucket.S3Bucket", u->bucket);
		aws_form_add(&form, "DiskContainer.UserBucket.S3Key", u->key);
		aws_form_add(&form, "Description", u->name);
		aws_form_add(&form, "TagSpecification.1.ResourceType", "import-snapshot-task");
		add_meta_tags(&form, "TagSpecification.1.", u->meta);
		u->call = aws_ec2(a->api, "ImportSnapshot", form, 1, up_done, u);
		break;
	}
	case UP_TASK:
		aws_form_add(&form, "ImportTaskId.1", u->task);
		u->call = aws_ec2(a->api, "DescribeImportSnapshotTasks", form, 0, up_done, u);
		break;
	case UP_TAGSNAP:
	case UP_TAGAMI:
		aws_form_add(&form, "ResourceId.1", u->st == UP_TAGSNAP ? u->snapshot : u->ami);
		add_meta_tags(&form, "", u->meta);
		u->call = aws_ec2(a->api, "CreateTags", form, 1, up_done, u);
		break;
	case UP_REGISTER: {
		const json_t *im = u->image;
		const char *arch = json_string_value(json_object_get(im, "architecture"));
		aws_form_add(&form, "Name", u->name);
		aws_form_add(&form, "Architecture", arch != NULL ? arch : "x86_64");
		aws_form_add(&form, "RootDeviceName", "/dev/sda1");
		aws_form_add(&form, "VirtualizationType", "hvm");
		aws_form_add(&form, "EnaSupport",
			     np_json_bool(im, "ena-support", 1) ? "true" : "false");
		if (json_string_value(json_object_get(im, "imds-support")) != NULL)
			aws_form_add(&form, "ImdsSupport",
				     json_string_value(json_object_get(im, "imds-support")));
		aws_form_add(&form, "BlockDeviceMapping.1.DeviceName", "/dev/sda1");
		aws_form_add(&form, "BlockDeviceMapping.1.Ebs.SnapshotId", u->snapshot);
		aws_form_add(&form, "BlockDeviceMapping.1.Ebs.DeleteOnTermination", "true");
		aws_form_add(&form, "BlockDeviceMapping.1.Ebs.VolumeType",
			     json_string_value(json_object_get(im, "volume-type")) != NULL
				 ? json_string_value(json_object_get(im, "volume-type"))
				 : "gp2");
		if (json_is_integer(json_object_get(im, "volume-size"))) {
			snprintf(num, sizeof(num), "%lld",
				 (long long)json_integer_value(json_object_get(im, "volume-size")));
			aws_form_add(&form, "BlockDeviceMapping.1.Ebs.VolumeSize", num);
		}
		if (json_is_integer(json_object_get(im, "iops"))) {
			snprintf(num, sizeof(num), "%lld",
				 (long long)json_integer_value(json_object_get(im, "iops")));
			aws_form_add(&form, "BlockDeviceMapping.1.Ebs.Iops", num);
		}
		if (json_is_integer(json_object_get(im, "throughput"))) {
			snprintf(num, sizeof(num), "%lld",
				 (long long)json_integer_value(json_object_get(im, "throughput")));
			aws_form_add(&form, "BlockDeviceMapping.1.Ebs.Throughput", num);
		}
		u->call = aws_ec2(a->api, "RegisterImage", form, 1, up_done, u);
		break;
	}
	case UP_DELOBJ:
		u->call = aws_s3(a->api, "DELETE", u->path, NULL, 0, NULL, up_done, u);
		break;
	}
	free(form);
}

static void
up_timer_fail(evutil_socket_t fd, short what, void *arg)
{
	struct upload *u = arg;

	(void)fd;
	(void)what;
	LIST_REMOVE(&u->p, entry);
	u->cb(NULL, u->error, u->arg);
	up_free(&u->p);
}

char *
aws_s3_path(const char *bucket, const char *key)
{
	char *eb = curl_easy_escape(NULL, bucket, 0), *ek = curl_easy_escape(NULL, key, 0), *out;

	if (asprintf(&out, "/%s/%s", eb, ek) < 0)
		abort();
	curl_free(eb);
	curl_free(ek);
	return out;
}

void
aws_upload_image(struct sm_adapter *a, const struct sm_upload_args *ua, sm_upload_cb cb, void *arg)
{
	struct upload *u = calloc(1, sizeof(*u));
	const char *bucket = json_string_value(
	    json_object_get(json_object_get(a->env->provider, "object-storage"), "bucket-name"));
	const char *k;
	const json_t *v;
	char key[600];

	u->p.dtor = up_free;
	LIST_INSERT_HEAD(&a->pend, &u->p, entry);
	u->a = a;
	u->cb = cb;
	u->arg = arg;
	u->name = strdup(ua->image_name);
	u->format = strdup(ua->format != NULL ? ua->format : "raw");
	u->image = ua->image != NULL ? ua->image->raw : NULL;
	u->etags = json_array();
	u->meta = json_object();
	json_object_foreach((json_t *)ua->metadata, k, v)
	{
		if (json_is_string(v))
			json_object_set_new(u->meta, k, json_incref((json_t *)v));
	}
	u->timer = evtimer_new(a->base, up_timer, u);
	snprintf(key, sizeof(key), "%s.%s", ua->image_name, u->format);
	u->key = strdup(key);
	u->bucket = strdup(bucket != NULL ? bucket : "");
	u->path = aws_s3_path(u->bucket, u->key);
	u->f = fopen(ua->filename, "rb");
	if (bucket == NULL || u->f == NULL) {
		/* answered on the loop, never from inside the slot */
		u->error = strdup(bucket == NULL ? "object-storage bucket-name is not set"
						 : "cannot open the image file");
		u->st = UP_DELOBJ;
		event_base_once(a->base, -1, EV_TIMEOUT, up_timer_fail, u, NULL);
		return;
	}
	fseek(u->f, 0, SEEK_END);
	u->size = ftell(u->f);
	fseek(u->f, 0, SEEK_SET);
	u->st = u->size > (long long)AWS_PART ? UP_CREATE : UP_PUT;
	log_info("aws %s: uploading %s (%lld bytes) to s3://%s/%s", a->provider, u->name, u->size,
		 u->bucket, u->key);
	up_step(u);
}

/* delete_image: the AMI and its snapshots */
struct imgdel {
	struct pend p;
	struct sm_adapter *a;
	sm_done_cb cb;
	void *arg;
	char *ami;
	json_t *snaps;
	int stage; /* 0 describe, 1 deregister, 2.. snapshots */
};

static void imgdel_step(struct imgdel *d);

static void
imgdel_free(struct pend *p)
{
	struct imgdel *d = (struct imgdel *)p;

	free(d->ami);
	json_decref(d->snaps);
	free(d);
}

static void
imgdel_done(const struct aws_result *r, void *arg)
{
	struct imgdel *d = arg;
	const xmlNode *bd;
	char buf[128], err[512];

	if (r->code != NULL && strstr(r->code, "NotFound") == NULL) {
		snprintf(err, sizeof(err), "%s: %s", r->code, r->message);
		LIST_REMOVE(&d->p, entry);
		d->cb(0, err, d->arg);
		imgdel_free(&d->p);
		return;
	}
	if (d->stage == 0 && r->code == NULL)
		for (bd = aws_xpath(r->root, "imagesSet/item/blockDeviceMapping/item"); bd != NULL;
		     bd = aws_xnext(bd))
			if (aws_xtext(bd, "ebs/snapshotId", buf, sizeof(buf))[0] != '\0')
				json_array_append_new(d->snaps, json_string(buf));
	d->stage++;
	imgdel_step(d);
}

static void
imgdel_step(struct imgdel *d)
{
	char *form = NULL;

	if (d->stage == 0) {
		aws_form_add(&form, "ImageId.1", d->ami);
		aws_ec2(d->a->api, "DescribeImages", form, 0, imgdel_done, d);
	} else if (d->stage == 1) {
		aws_form_add(&form, "ImageId", d->ami);
		aws_ec2(d->a->api, "DeregisterImage", form, 1, imgdel_done, d);
	} else if ((size_t)d->stage - 2 < json_array_size(d->snaps)) {
		aws_form_add(&form, "SnapshotId",
			     json_string_value(json_array_get(d->snaps, (size_t)d->stage - 2)));
		aws_ec2(d->a->api, "DeleteSnapshot", form, 1, imgdel_done, d);
	} else {
		LIST_REMOVE(&d->p, entry);
		d->cb(1, NULL, d->arg);
		imgdel_free(&d->p);
	}
	free(form);
}

void
aws_delete_image(struct sm_adapter *a, const char *external_id, sm_done_cb cb, void *arg)
{
	struct imgdel *d = calloc(1, sizeof(*d));

	d->p.dtor = imgdel_free;
	LIST_INSERT_HEAD(&a->pend, &d->p, entry);
	d->a = a;
	d->cb = cb;
	d->arg = arg;
	d->ami = strdup(external_id);
	d->snaps = json_array();
	imgdel_step(d);
}
