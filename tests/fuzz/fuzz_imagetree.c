/*
 * libFuzzer target: the image tree under /nodepool/images is written by
 * builders and by anyone with ZooKeeper access; `nodepool image-list`,
 * dib-image-list, image-status, export-image-data and the web API read it
 * through an imgtree snapshot. The input is JSON describing a tree:
 *   {"<image>": {"paused": bool, "request": bool, "lock": n,
 *                "builds": {"<id>": {"data": "<build record>",
 *                                    "providers": {"<p>": {"<upload id>":
 *                                                          "<upload record>"}}}}}}
 * records decoded as the loader decodes them (malformed ones kept raw).
 * Properties: no crash; every listing renders as text and JSON; the export
 * is an object.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/zk/imagetree.h"
#include "protocol/model.h"
#include "lib/ops/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *
dup(const char *s)
{
	char *d = strdup(s != NULL ? s : "");

	if (d == NULL)
		abort();
	return d;
}

static void *
zalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	if (p == NULL)
		abort();
	return p;
}

static struct imgtree *
tree_of(const json_t *j)
{
	struct imgtree *t = zalloc(1, sizeof(*t));
	const char *iname, *bid, *pname, *uid;
	json_t *iv, *bv, *pv, *uv;
	char err[256];

	t->images = zalloc(json_object_size(j), sizeof(*t->images));
	json_object_foreach((json_t *)j, iname, iv)
	{
		struct imgtree_image *im = &t->images[t->nimages++];
		json_t *builds = json_object_get(iv, "builds");

		im->name = dup(iname);
		im->paused = json_is_true(json_object_get(iv, "paused"));
		im->has_request = json_is_true(json_object_get(iv, "request"));
		im->request_ctime = 1.7e9;
		im->lock_contenders = (int)json_integer_value(json_object_get(iv, "lock")) & 7;
		im->builds = zalloc(json_object_size(builds), sizeof(*im->builds));
		json_object_foreach(builds, bid, bv)
		{
			struct imgtree_build *b = &im->builds[im->nbuilds++];
			const char *d = json_string_value(json_object_get(bv, "data"));
			json_t *provs = json_object_get(bv, "providers");

			b->id = dup(bid);
			b->data = dup(d);
			b->ctime = 1.7e9;
			b->gone = d == NULL;
			if (d != NULL && *d != '\0')
				np_image_build_decode(bid, d, strlen(d), &b->b, err, sizeof(err));
			b->providers = zalloc(json_object_size(provs), sizeof(*b->providers));
			json_object_foreach(provs, pname, pv)
			{
				struct imgtree_provider *p = &b->providers[b->nproviders++];

				p->name = dup(pname);
				p->uploads = zalloc(json_object_size(pv), sizeof(*p->uploads));
				json_object_foreach(pv, uid, uv)
				{
					struct imgtree_upload *u = &p->uploads[p->nuploads++];
					const char *ud = json_string_value(uv);

					u->id = dup(uid);
					u->data = dup(ud);
					if (ud != NULL && *ud != '\0')
						np_image_upload_decode(uid, ud, strlen(ud), &u->u,
								       err, sizeof(err));
				}
			}
		}
	}
	return t;
}

static void
render(struct status_table *tab)
{
	char *s = status_text(tab, NULL, 0, 1.7e9);

	if (s == NULL)
		abort();
	free(s);
	if ((s = status_json(tab)) == NULL)
		abort();
	free(s);
	status_table_free(tab);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *j = json_loadb((const char *)data, size, 0, NULL), *ex;
	struct imgtree *t;
	struct status_table *tab;
	size_t i;

	if (!json_is_object(j)) {
		json_decref(j);
		return 0;
	}
	t = tree_of(j);
	tab = status_table_new(STATUS_IMAGE_LIST);
	status_image_list(t, tab);
	render(tab);
	tab = status_table_new(STATUS_DIB_IMAGE_LIST);
	status_dib_image_list(t, tab);
	render(tab);
	tab = status_table_new(STATUS_IMAGE_STATUS);
	status_image_status(t, tab);
	render(tab);
	for (i = 0; i < t->nimages; i++)
		(void)imgtree_build_request(&t->images[i]);
	ex = imgtree_export(t);
	if (!json_is_object(ex))
		abort();
	json_decref(ex);
	imgtree_free(t);
	json_decref(j);
	return 0;
}
