/*
 * The openstack driver's images (os_int.h): the Glance image listing
 * (list_images), an upload (POST /v2/images, the file PUT streamed from
 * disk, polled until active) and DELETE /v2/images/<id>.
 */
#include "drivers/openstack/os_int.h"
#include "lib/core/xalloc.h"

#include <sys/queue.h>
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "lib/net/http.h"
#include "lib/config/jsonget.h"
#include "lib/core/log.h"
#include "drivers/openstack/openstack.h"
#include "lib/config/config.h" /* lib/config: struct np_provider */
#include "drivers/openstack/os_answer.h"
#include "drivers/openstack/os_cloud.h"
#include "lib/core/privsep.h"
#include "lib/net/ratelimit.h"
#include "lib/core/clock.h"
#include "lib/net/urlsafe.h"

/* ---- images (the builder's uploads)
 * -------------------------------------------------------------------- */

/*
 * list_images: GET /v2/images, every page (its "next"); an image's tags
 * are its properties, which Glance v2 shows as top-level keys (the
 * builder's upload sets nodepool_build_id & co. as properties).
 */
static void
images_listed(struct os_call *c, int status, const char *error, json_t *body,
	      const struct http_response *res)
{
	drv_image_list_cb cb = (drv_image_list_cb)c->ucb;
	json_t *acc = json_object_get(c->extra, "images");
	const char *next = os_jstr(body, "next");
	const json_t *im;
	size_t i, n;
	char msg[300];

	if (error != NULL || status >= 300) {
		error_text(status, error, body, res ? res->body : NULL, msg, sizeof(msg));
		cb(NULL, 0, msg, c->uarg);
		return;
	}
	json_array_extend(acc, json_object_get(body, "images"));
	if (next != NULL && strchr(next, '?') != NULL) {
		char path[1024];
		struct os_call *nc;
		snprintf(path, sizeof(path), "/images%s", strchr(next, '?'));
		nc = os_call_new(c->a, SVC_IMAGE, "GET", path, NULL, images_listed, NULL);
		nc->ucb = c->ucb;
		nc->uarg = c->uarg;
		nc->extra = json_incref(c->extra);
		return;
	}
	n = json_array_size(acc);
	{
		struct drv_cloud_image *v = calloc(n + 1, sizeof(*v));
		size_t k = 0;
		if (v == NULL)
			abort();
		json_array_foreach(acc, i, im)
		{
			if (os_jstr(im, "id") == NULL)
				continue;
			v[k++] = (struct drv_cloud_image){
			    os_jstr(im, "id"), os_jstr(im, "name") ? os_jstr(im, "name") : "", im};
		}
		cb(v, k, NULL, c->uarg);
		free(v);
	}
}

void
os_list_images(struct sm_adapter *a, drv_image_list_cb cb, void *arg)
{
	struct os_call *c =
	    os_call_new(a, SVC_IMAGE, "GET", "/images?limit=1000", NULL, images_listed, NULL);

	c->ucb = (void *)cb;
	c->uarg = arg;
	c->extra = json_pack("{s:[]}", "images");
}

static void upload_poll_cb(evutil_socket_t fd, short what, void *arg);

void
os_upload_free(struct upload *u)
{
	TAILQ_REMOVE(&u->a->uploads_inflight, u, entry);
	if (u->poll != NULL)
		event_free(u->poll);
	free(u->id);
	free(u->file);
	free(u);
}

static void
upload_end(struct upload *u, const char *id, const char *error)
{
	if (error != NULL && u->id != NULL) {
		/* do not leave a half-made image behind */
		char path[300];
		snprintf(path, sizeof(path), "/images/%s", ID(u->id));
		os_call_new(u->a, SVC_IMAGE, "DELETE", path, NULL, os_ignore_answer, NULL);
	}
	u->cb(id, error, u->arg);
	os_upload_free(u);
}

static void
upload_status_done(struct os_call *c, int status, const char *error, json_t *body,
		   const struct http_response *res)
{
	struct upload *u = c->owner;
	const char *st = os_jstr(body, "status");
	char msg[300];
	struct timeval tv = {(time_t)OS_UPLOAD_POLL, 0};

	if (error != NULL || status != 200) {
		error_text(status, error, body, res ? res->body : NULL, msg, sizeof(msg));
		upload_end(u, NULL, msg);
		return;
	}
	if (st != NULL && strcmp(st, "active") == 0) {
		char *id = xstrdup(u->id);
		c->a->uploads++;
		upload_end(u, id, NULL);
		free(id);
		return;
	}
	if (st != NULL && (strcmp(st, "killed") == 0 || strcmp(st, "deleted") == 0)) {
		snprintf(msg, sizeof(msg), "image %s ended %s", u->id, st);
		upload_end(u, NULL, msg);
		return;
	}
	if (np_mono_s() > u->deadline) {
		upload_end(u, NULL, "image-upload-timeout passed");
		return;
	}
	event_add(u->poll, &tv);
}

static void
upload_poll_cb(evutil_socket_t fd, short what, void *arg)
{
	struct upload *u = arg;
	char path[300];

	(void)fd;
	(void)what;
	snprintf(path, sizeof(path), "/images/%s", ID(u->id));
	os_call_new(u->a, SVC_IMAGE, "GET", path, NULL, upload_status_done, u);
}

static void
upload_put_done(struct os_call *c, int status, const char *error, json_t *body,
		const struct http_response *res)
{
	struct upload *u = c->owner;
	char msg[300];

	if (error != NULL || (status != 204 && status != 200 && status != 201)) {
		error_text(status, error, body, res ? res->body : NULL, msg, sizeof(msg));
		upload_end(u, NULL, msg);
		return;
	}
	upload_poll_cb(-1, 0, u);
}

static void
upload_create_done(struct os_call *c, int status, const char *error, json_t *body,
		   const struct http_response *res)
{
	struct upload *u = c->owner;
	struct os_call *put;
	char msg[300], path[300];

	if (error != NULL || status != 201 || os_jstr(body, "id") == NULL) {
		error_text(status, error, body, res ? res->body : NULL, msg, sizeof(msg));
		upload_end(u, NULL, msg);
		return;
	}
	u->id = xstrdup(os_jstr(body, "id"));
	snprintf(path, sizeof(path), "/images/%s/file", ID(u->id));
	put = os_call_prep(u->a, SVC_IMAGE, "PUT", path, NULL, upload_put_done, u);
	put->body_file = xstrdup(u->file);
	put->ctype = "application/octet-stream";
	os_call_go(put);
}

/* upstream's uploadImage: openstacksdk create_image(name, filename,
 * disk_format, container_format bare, visibility private, md5, sha256,
 * **metadata) with Glance v2's create + upload + wait. */
void
os_upload_image(struct sm_adapter *a, const struct sm_upload_args *ua, sm_upload_cb cb, void *arg)
{
	struct upload *u = calloc(1, sizeof(*u));
	json_t *body = json_object(), *v;
	const char *k;
	struct os_call *c;

	if (u == NULL)
		abort();
	u->a = a;
	u->cb = cb;
	u->arg = arg;
	u->file = xstrdup(ua->filename);
	u->poll = event_new(a->base, -1, 0, upload_poll_cb, u);
	TAILQ_INSERT_TAIL(&a->uploads_inflight, u, entry);
	u->deadline = np_mono_s() + np_json_num(a->env->provider, "image-upload-timeout", 3600);
	/* properties: the provider diskimage's meta, then the tags; Glance
	 * takes extra properties as strings */
	if (ua->image != NULL)
		json_object_foreach(json_object_get(ua->image->raw, "meta"), k, v)
		{
			if (json_is_string(v))
				json_object_set(body, k, v);
			else {
				char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
				json_object_set_new(body, k, json_string(t ? t : ""));
				free(t);
			}
		}
	json_object_foreach((json_t *)ua->metadata, k, v)
	{
		if (json_is_string(v))
			json_object_set(body, k, v);
		else {
			char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
			json_object_set_new(body, k, json_string(t ? t : ""));
			free(t);
		}
	}
	if (ua->md5 != NULL)
		json_object_set_new(body, "owner_specified.openstack.md5", json_string(ua->md5));
	if (ua->sha256 != NULL)
		json_object_set_new(body, "owner_specified.openstack.sha256",
				    json_string(ua->sha256));
	json_object_set_new(body, "name", json_string(ua->image_name));
	json_object_set_new(body, "disk_format",
			    json_string(ua->format ? ua->format : a->cloud.image_format));
	json_object_set_new(body, "container_format", json_string("bare"));
	json_object_set_new(body, "visibility", json_string("private"));
	c = os_call_new(a, SVC_IMAGE, "POST", "/images", body, upload_create_done, u);
	(void)c;
}

void
os_delete_image(struct sm_adapter *a, const char *external_id, sm_done_cb cb, void *arg)
{
	char path[300];
	struct os_call *c;

	snprintf(path, sizeof(path), "/images/%s", ID(external_id));
	c = os_call_new(a, SVC_IMAGE, "DELETE", path, NULL, os_resource_deleted, NULL);
	c->ucb = (void *)cb;
	c->uarg = arg;
}
