/*
 * The status tables of the image tree (lib/zk/imagetree.h): the rows of
 * `nodepool image-list`, `dib-image-list` and `image-status`, and of the web
 * API's /image-list, /dib-image-list and /image-status, as upstream's
 * status.image_list, dib_image_list and image_status. The tree is read by
 * lib/zk; what an operator sees of it is built here, beside status.c.
 */
#include "lib/ops/status.h"

#include <stddef.h>
#include <string.h>

#include <jansson.h>

#include "lib/zk/imagetree.h"
#include "protocol/model.h"

/* 1 when a launcher may boot u: READY, not waiting for its validation,
 * not rolled back (drivers/statemachine/images.c chooses the same way). */
static int
upload_serves(const struct np_image_upload *u)
{
	const char *vs =
	    json_string_value(json_object_get(json_object_get(u->extra, "validation"), "state"));

	return u->state == NP_UPLOAD_READY && u->external_id != NULL &&
	       (vs == NULL || strcmp(vs, "pending") != 0) &&
	       json_object_get(u->extra, "rollback") == NULL;
}

/* The upload launchers of provider boot for im: the newest that serves. */
static const struct np_image_upload *
serving_upload(const struct imgtree_image *im, const char *provider)
{
	const struct np_image_upload *best = NULL;
	size_t j, k, m;

	for (j = 0; j < im->nbuilds; j++)
		for (k = 0; k < im->builds[j].nproviders; k++) {
			const struct imgtree_provider *p = &im->builds[j].providers[k];
			if (strcmp(p->name, provider) != 0)
				continue;
			for (m = 0; m < p->nuploads; m++) {
				const struct np_image_upload *u = p->uploads[m].u;
				if (u != NULL && upload_serves(u) &&
				    (best == NULL || u->state_time > best->state_time))
					best = u;
			}
		}
	return best;
}

void
status_image_list(const struct imgtree *t, struct status_table *out)
{
	size_t i, j, k, m;

	for (i = 0; i < t->nimages; i++) {
		const struct imgtree_image *im = &t->images[i];
		for (j = 0; j < im->nbuilds; j++) {
			const struct imgtree_build *b = &im->builds[j];
			for (k = 0; k < b->nproviders; k++) {
				const struct imgtree_provider *p = &b->providers[k];
				const struct np_image_upload *s = serving_upload(im, p->name);
				for (m = 0; m < p->nuploads; m++)
					if (p->uploads[m].u != NULL)
						status_add_upload(out, im->name, b->id, p->name,
								  p->uploads[m].u,
								  p->uploads[m].u == s);
			}
		}
	}
}

void
status_dib_image_list(const struct imgtree *t, struct status_table *out)
{
	size_t i, j;

	for (i = 0; i < t->nimages; i++) {
		const struct imgtree_image *im = &t->images[i];
		for (j = 0; j < im->nbuilds; j++)
			if (im->builds[j].b != NULL && !im->builds[j].gone)
				status_add_build(out, im->name, im->builds[j].b, im->paused);
	}
}

void
status_image_status(const struct imgtree *t, struct status_table *out)
{
	size_t i;

	for (i = 0; i < t->nimages; i++) {
		const struct imgtree_image *im = &t->images[i];
		status_add_image_status(out, im->name, im->paused, imgtree_build_request(im),
					im->request_ctime);
	}
}
