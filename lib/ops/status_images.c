/*
 * The status tables of the image tree (lib/zk/imagetree.h): the rows of
 * `nodepool image-list`, `dib-image-list` and `image-status`, and of the web
 * API's /image-list, /dib-image-list and /image-status, as upstream's
 * status.image_list, dib_image_list and image_status. The tree is read by
 * lib/zk; what an operator sees of it is built here, beside status.c.
 */
#include "status.h"

#include <stddef.h>

#include "imagetree.h"

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
				for (m = 0; m < p->nuploads; m++)
					if (p->uploads[m].u != NULL)
						status_add_upload(out, im->name, b->id, p->name,
								  p->uploads[m].u);
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
