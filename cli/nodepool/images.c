/*
 * Image commands: image-list, dib-image-list, image-status, image-build,
 * image-delete, dib-image-delete, image-pause, image-unpause,
 * alien-image-list, export-image-data, import-image-data (as upstream's
 * nodepoolcmd.py and zk/zookeeper.py).
 */
#include "cli/nodepool/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "lib/config/config.h"
#include "lib/config/drvtraits.h"
#include "drivers/driver.h"
#include "drivers/host.h"
#include "lib/zk/imagetree.h"
#include "protocol/model.h"
#include "protocol/paths.h"
#include "lib/ops/status.h"
#include "lib/core/strset.h"

static int
json_only(const char *cmd, int argc, char **argv, int *json)
{
	static const char *const names[] = {"json", NULL};
	int flags[1] = {0}, npos, rc;
	const char *values[1];

	rc = cli_parse(cmd, argc, argv, names, flags, values, NULL, 0, NULL, &npos);
	*json = flags[0];
	return rc;
}

static int
one_arg(const char *cmd, const char *what, int argc, char **argv, const char **arg)
{
	static const char *const names[] = {NULL};
	int flags[1], npos, rc;
	const char *values[1], *pos[1];

	if ((rc = cli_parse(cmd, argc, argv, names, flags, values, pos, 1, what, &npos)))
		return rc;
	*arg = pos[0];
	return 0;
}

static int
load_tree(struct cli *c, struct imgtree **tree)
{
	int rc = imgtree_load_sync(c->base, c->zk, c->op_timeout, tree);

	if (rc != ZOK)
		return cli_error("reading %s: %s", NP_IMAGE_ROOT, cli_zk_error(rc));
	return CLI_OK;
}

static int
listing(struct cli *c, const char *cmd, int argc, char **argv, enum status_list kind,
	void (*fill)(const struct imgtree *, struct status_table *))
{
	struct imgtree *tree = NULL;
	struct status_table *t;
	int json, rc;

	if ((rc = json_only(cmd, argc, argv, &json)))
		return rc;
	if ((rc = load_tree(c, &tree)) != CLI_OK)
		return rc;
	t = status_table_new(kind);
	fill(tree, t);
	cli_print_table(t, json, NULL, 0);
	status_table_free(t);
	imgtree_free(tree);
	return CLI_OK;
}

int
cmd_image_list(struct cli *c, int argc, char **argv)
{
	return listing(c, "image-list", argc, argv, STATUS_IMAGE_LIST, status_image_list);
}

int
cmd_dib_image_list(struct cli *c, int argc, char **argv)
{
	return listing(c, "dib-image-list", argc, argv, STATUS_DIB_IMAGE_LIST,
		       status_dib_image_list);
}

int
cmd_image_status(struct cli *c, int argc, char **argv)
{
	return listing(c, "image-status", argc, argv, STATUS_IMAGE_STATUS, status_image_status);
}

/*
 * alien-image-list hosts each provider's driver as the builder's upload
 * workers do (made with provider_new, never started: no ZooKeeper, no
 * launches), to call its image_list slot.
 */
struct alien_host {
	struct drv_host handle; /* owner: this struct */
	struct event_base *base;
	const char *provider;
	json_t *config;
};

static struct event_base *
alien_base(struct drv_host *h)
{
	return ((const struct alien_host *)h->owner)->base;
}

static const char *
alien_provider(struct drv_host *h)
{
	return ((const struct alien_host *)h->owner)->provider;
}

static const json_t *
alien_config(struct drv_host *h)
{
	return ((const struct alien_host *)h->owner)->config;
}

static const struct drv_host_ops alien_host_ops = {
    .event_base = alien_base,
    .provider_name = alien_provider,
    .provider_config = alien_config,
};

struct alien_listing {
	int done;
	char *error;
	json_t *images; /* [{id, name, tags}] */
};

static void
alien_listed(const struct drv_cloud_image *v, size_t n, const char *error, void *arg)
{
	struct alien_listing *l = arg;
	size_t i;

	l->done = 1;
	if (error != NULL) {
		l->error = strdup(error);
		return;
	}
	for (i = 0; i < n; i++)
		json_array_append_new(l->images,
				      json_pack("{s:s, s:s, s:O}", "id", v[i].id, "name",
						v[i].name ? v[i].name : "", "tags",
						v[i].tags ? (json_t *)v[i].tags : json_null()));
}

/* The external ids of every upload of provider that ZooKeeper knows. */
static void
known_external_ids(const struct imgtree *t, const char *provider, struct strset *out)
{
	size_t i, j, k, m;

	for (i = 0; i < t->nimages; i++)
		for (j = 0; j < t->images[i].nbuilds; j++) {
			const struct imgtree_build *b = &t->images[i].builds[j];
			for (k = 0; k < b->nproviders; k++) {
				if (strcmp(b->providers[k].name, provider) != 0)
					continue;
				for (m = 0; m < b->providers[k].nuploads; m++) {
					const struct np_image_upload *u =
					    b->providers[k].uploads[m].u;
					if (u != NULL && u->external_id != NULL)
						strset_add(out, u->external_id);
				}
			}
		}
}

/* The images of p tagged by Nodepool that ZooKeeper does not know, as
 * rows of t; -1 with a message in err when the cloud could not be listed.
 * Tagged by Nodepool: nodepool_build_id (as upstream), or, for clouds
 * whose images carry no tags (ibmvpc: its uploads' resource group
 * npimages_<provider> says it), nodepool_provider_name naming p. */
static int
alien_provider_rows(struct cli *c, const struct np_provider *p, const struct imgtree *tree,
		    struct status_table *t, char *err, size_t errlen)
{
	const struct driver *drv = driver_lookup(p->driver != NULL ? p->driver : "openstack");
	struct alien_host host = {{NULL}, c->base, p->name, np_cfg_to_json(p->raw)};
	struct alien_listing l = {0, NULL, json_array()};
	struct drv_provider *dp;
	struct strset *known;
	const json_t *im;
	double waited = 0;
	size_t i;
	int rc = 0;

	if (drv == NULL || drv->image_list == NULL) {
		snprintf(err, errlen, "driver %s lists no images", p->driver ? p->driver : "?");
		rc = -1;
		goto out;
	}
	host.handle.owner = &host;
	if ((dp = drv->provider_new(&host.handle, err, errlen)) == NULL) {
		rc = -1;
		goto out;
	}
	drv->image_list(dp, alien_listed, &l);
	while (!l.done && waited < c->op_timeout) {
		struct timeval tv = {0, 50000};
		event_base_loopexit(c->base, &tv);
		event_base_dispatch(c->base);
		waited += 0.05;
	}
	if (drv->provider_stop != NULL)
		drv->provider_stop(dp);
	drv->provider_free(dp);
	if (!l.done || l.error != NULL) {
		snprintf(err, errlen, "%s", l.error ? l.error : "the cloud did not answer in time");
		rc = -1;
		goto out;
	}
	known = strset_new();
	known_external_ids(tree, p->name, known);
	json_array_foreach(l.images, i, im)
	{
		const json_t *tags = json_object_get(im, "tags");
		const char *pn = json_string_value(json_object_get(tags, "nodepool_provider_name"));
		const char *id = json_string_value(json_object_get(im, "id"));
		if ((json_object_get(tags, "nodepool_build_id") == NULL && pn == NULL) ||
		    (pn != NULL && strcmp(pn, p->name) != 0) || strset_has(known, id))
			continue;
		status_table_add(t, json_pack("{s:s, s:s, s:s}", "provider", p->name, "name",
					      json_string_value(json_object_get(im, "name")),
					      "image_id", id));
	}
	strset_free(known);
out:
	free(l.error);
	json_decref(l.images);
	json_decref(host.config);
	return rc;
}

int
cmd_alien_image_list(struct cli *c, int argc, char **argv)
{
	static const char *const names[] = {"json", NULL};
	int flags[1] = {0}, npos, rc;
	const char *values[1], *pos[1] = {NULL};
	struct imgtree *tree = NULL;
	struct status_table *t;
	char err[512];
	size_t i;

	if ((rc = cli_parse("alien-image-list", argc, argv, names, flags, values, pos, 1, NULL,
			    &npos)))
		return rc;
	if (pos[0] != NULL && np_cfg_provider(c->cfg, pos[0]) == NULL)
		return cli_error("no provider %s in the configuration", pos[0]);
	if ((rc = load_tree(c, &tree)) != CLI_OK)
		return rc;
	/*
	 * As upstream: per provider, the cloud images tagged by Nodepool
	 * (nodepool_build_id) whose id no upload of that provider in
	 * ZooKeeper names; a provider whose cloud cannot be listed is
	 * reported and skipped.
	 */
	drv_host_register(&alien_host_ops);
	t = status_table_new(STATUS_ALIEN_IMAGES);
	for (i = 0; i < c->cfg->nproviders; i++) {
		const struct np_provider *p = &c->cfg->providers[i];
		const struct np_drv_traits *tr =
		    np_drv_traits_find(p->driver != NULL ? p->driver : "openstack");
		if ((pos[0] != NULL && strcmp(pos[0], p->name) != 0) ||
		    !(p->manage_images || (tr != NULL && (tr->flags & NP_DRV_LISTS_IMAGES))))
			continue;
		if (alien_provider_rows(c, p, tree, t, err, sizeof(err)) != 0)
			fprintf(stderr, "nodepool: listing alien images of %s: %s\n", p->name, err);
	}
	cli_print_table(t, flags[0], NULL, 0);
	status_table_free(t);
	imgtree_free(tree);
	return CLI_OK;
}

int
cmd_image_build(struct cli *c, int argc, char **argv)
{
	const struct np_diskimage *d;
	const char *image;
	char path[NP_PATH_MAX];
	int rc;

	if ((rc = one_arg("image-build", "image", argc, argv, &image)))
		return rc;
	d = np_cfg_diskimage(c->cfg, image);
	if (d == NULL)
		return cli_error("Trying to build a non disk-image-builder image: %s", image);
	if (d->pause)
		return cli_error("Skipping build request for image %s; paused", image);
	if (np_path_image_request_build(path, sizeof(path), image) < 0)
		return cli_error("invalid image name: %s", image);
	/* as kazoo's ensure_path: an existing request is fine */
	rc = zk_sync_create(c->zk, path, NULL, 0, 0, 1, NULL);
	if (rc != ZOK && rc != ZNODEEXISTS)
		return cli_error("creating %s: %s", path, cli_zk_error(rc));
	return CLI_OK;
}

static int
set_paused(struct cli *c, const char *cmd, int argc, char **argv, int paused)
{
	const char *image;
	char path[NP_PATH_MAX];
	int rc;

	if ((rc = one_arg(cmd, "image", argc, argv, &image)))
		return rc;
	if (np_path_image_pause(path, sizeof(path), image) < 0)
		return cli_error("invalid image name: %s", image);
	if (paused) {
		/* makepath: an image may be paused before its first build */
		rc = zk_sync_create(c->zk, path, NULL, 0, 0, 1, NULL);
		if (rc == ZNODEEXISTS)
			rc = ZOK;
	} else {
		rc = zk_sync_delete(c->zk, path, -1, 0);
		if (rc == ZNONODE)
			rc = ZOK;
	}
	if (rc != ZOK)
		return cli_error("%s %s: %s", paused ? "creating" : "deleting", path,
				 cli_zk_error(rc));
	return CLI_OK;
}

int
cmd_image_pause(struct cli *c, int argc, char **argv)
{
	return set_paused(c, "image-pause", argc, argv, 1);
}

int
cmd_image_unpause(struct cli *c, int argc, char **argv)
{
	return set_paused(c, "image-unpause", argc, argv, 0);
}

int
cmd_dib_image_delete(struct cli *c, int argc, char **argv)
{
	const char *id, *dash;
	char image[NP_NAME_MAX], path[NP_PATH_MAX], err[256];
	char *data = NULL, *json;
	struct np_image_build *b = NULL;
	int len = 0, rc;
	size_t jlen;

	if ((rc = one_arg("dib-image-delete", "id", argc, argv, &id)))
		return rc;
	/* "<image>-<build id>", split at the last '-' as upstream */
	dash = strrchr(id, '-');
	if (dash == NULL)
		return cli_error("dib image id %s is not <image>-<build id>", id);
	if ((size_t)(dash - id) >= sizeof(image))
		dash = id; /* too long to be an image name: not found below */
	snprintf(image, sizeof(image), "%.*s", (int)(dash - id), id);
	if (np_path_build(path, sizeof(path), image, dash + 1) < 0 ||
	    strcmp(dash + 1, "lock") == 0) {
		printf("Build %s not found\n", id);
		return CLI_OK;
	}
	rc = zk_sync_get(c->zk, path, &data, &len, NULL);
	if (rc == ZNONODE || (rc == ZOK && np_image_build_decode(dash + 1, data, (size_t)len, &b,
								 err, sizeof(err)) != 0)) {
		free(data);
		printf("Build %s not found\n", id);
		return CLI_OK;
	}
	free(data);
	if (rc != ZOK)
		return cli_error("reading %s: %s", path, cli_zk_error(rc));
	if (b->state == NP_BUILD_BUILDING) {
		np_image_build_free(b);
		printf("Cannot delete a build in progress\n");
		return CLI_OK;
	}
	np_image_build_set_state(b, NP_BUILD_DELETING);
	json = np_image_build_encode(b, &jlen);
	np_image_build_free(b);
	if (json == NULL)
		return cli_error("build %s: cannot encode the record", id);
	rc = zk_sync_set(c->zk, path, json, (int)jlen, -1, NULL);
	free(json);
	if (rc != ZOK)
		return cli_error("storing %s: %s", path, cli_zk_error(rc));
	return CLI_OK;
}

int
cmd_image_delete(struct cli *c, int argc, char **argv)
{
	static const char *const names[] = {"provider=!", "image=!", "upload-id=!", "build-id=!",
					    NULL};
	int flags[4] = {0, 0, 0, 0}, npos, rc, len = 0;
	const char *values[4] = {NULL, NULL, NULL, NULL};
	char path[NP_PATH_MAX], err[256];
	char *data = NULL, *json;
	struct np_image_upload *u = NULL;
	size_t jlen;

	if ((rc =
		 cli_parse("image-delete", argc, argv, names, flags, values, NULL, 0, NULL, &npos)))
		return rc;
	if (np_path_upload(path, sizeof(path), values[1], values[3], values[0], values[2]) < 0 ||
	    strcmp(values[2], "lock") == 0 || strcmp(values[3], "lock") == 0) {
		printf("Image upload not found\n");
		return CLI_OK;
	}
	rc = zk_sync_get(c->zk, path, &data, &len, NULL);
	if (rc == ZNONODE || (rc == ZOK && np_image_upload_decode(values[2], data, (size_t)len, &u,
								  err, sizeof(err)) != 0)) {
		free(data);
		printf("Image upload not found\n");
		return CLI_OK;
	}
	free(data);
	if (rc != ZOK)
		return cli_error("reading %s: %s", path, cli_zk_error(rc));
	if (u->state == NP_UPLOAD_UPLOADING) {
		np_image_upload_free(u);
		printf("Cannot delete because image upload in progress\n");
		return CLI_OK;
	}
	np_image_upload_set_state(u, NP_UPLOAD_DELETING);
	json = np_image_upload_encode(u, &jlen);
	np_image_upload_free(u);
	if (json == NULL)
		return cli_error("upload: cannot encode the record");
	rc = zk_sync_set(c->zk, path, json, (int)jlen, -1, NULL);
	free(json);
	if (rc != ZOK)
		return cli_error("storing %s: %s", path, cli_zk_error(rc));
	return CLI_OK;
}

/* ---- export and import -------------------------------------------------------- */

int
cmd_export_image_data(struct cli *c, int argc, char **argv)
{
	const char *file;
	struct imgtree *tree = NULL;
	json_t *o;
	char *txt;
	size_t len, off = 0;
	int fd, rc;

	if ((rc = one_arg("export-image-data", "path", argc, argv, &file)))
		return rc;
	if ((rc = load_tree(c, &tree)) != CLI_OK)
		return rc;
	o = imgtree_export(tree);
	imgtree_free(tree);
	txt = json_dumps(o, JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (txt == NULL)
		return cli_error("export: cannot encode the data");
	/* owner-only, as upstream: builds may carry credentials in metadata */
	fd = open(file, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		free(txt);
		return cli_error("%s: %s", file, strerror(errno));
	}
	len = strlen(txt);
	while (off < len) {
		ssize_t w = write(fd, txt + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			rc = cli_error("%s: %s", file, strerror(errno));
			break;
		}
		off += (size_t)w;
	}
	free(txt);
	if (close(fd) != 0 && rc == CLI_OK)
		rc = cli_error("%s: %s", file, strerror(errno));
	return rc;
}

/*
 * Make later sequential creates under parent (an uploads container) return
 * numbers above highest, as upstream's importImageData: ZooKeeper numbers
 * children from the parent's child-change count, so create (and, unless it
 * is one of ours, delete again) throw-away sequential children until one
 * gets a number >= highest.
 */
static int
bump_sequence(struct cli *c, const char *parent, long long highest, const json_t *data)
{
	char prefix[NP_PATH_MAX];
	long long seq = -1, rounds = 0;
	int rc;

	snprintf(prefix, sizeof(prefix), "%s/", parent);
	while (seq < highest) {
		char *created = NULL;
		const char *name;
		if (++rounds > 2 * highest + 16)
			return cli_error("%s: sequence does not advance", parent);
		rc = zk_sync_create(c->zk, prefix, NULL, 0, ZOO_SEQUENCE, 1, &created);
		if (rc != ZOK)
			return cli_error("creating under %s: %s", parent, cli_zk_error(rc));
		name = strrchr(created, '/') + 1;
		if (np_seq_parse(name, &seq) != 0)
			seq = highest; /* cannot happen: stop */
		if (json_object_get(data, created) == NULL) {
			rc = zk_sync_delete(c->zk, created, -1, 0);
			if (rc != ZOK && rc != ZNONODE) {
				rc = cli_error("deleting %s: %s", created, cli_zk_error(rc));
				free(created);
				return rc;
			}
		}
		free(created);
	}
	return CLI_OK;
}

int
cmd_import_image_data(struct cli *c, int argc, char **argv)
{
	const char *file, *key;
	json_t *data, *highest, *v;
	json_error_t jerr;
	char err[512];
	int rc;

	if ((rc = one_arg("import-image-data", "path", argc, argv, &file)))
		return rc;
	data = json_load_file(file, JSON_REJECT_DUPLICATES, &jerr);
	if (data == NULL)
		return cli_error("%s:%d:%d: %s", file, jerr.line, jerr.column, jerr.text);
	if (imgtree_import_check(data, err, sizeof(err)) != 0) {
		json_decref(data);
		return cli_error("%s: %s", file, err);
	}
	/* the highest upload number per uploads container */
	highest = json_object();
	json_object_foreach(data, key, v)
	{
		struct np_path_info pi;
		long long seq;
		char parent[NP_PATH_MAX];
		json_t *h;
		if (np_path_parse(key, &pi) != NP_PATH_UPLOAD || np_seq_parse(pi.upload, &seq) != 0)
			continue;
		np_path_uploads(parent, sizeof(parent), pi.image, pi.build, pi.provider);
		h = json_object_get(highest, parent);
		if (h == NULL || json_integer_value(h) < seq)
			json_object_set_new(highest, parent, json_integer(seq));
	}
	json_object_foreach(highest, key, v)
	{
		if ((rc = bump_sequence(c, key, (long long)json_integer_value(v), data)) != CLI_OK)
			break;
	}
	json_decref(highest);
	if (rc == CLI_OK) {
		json_object_foreach(data, key, v)
		{
			const char *s = json_string_value(v);
			int len = (int)json_string_length(v);
			int zrc = zk_sync_exists(c->zk, key, NULL);
			if (zrc == ZOK)
				zrc = zk_sync_set(c->zk, key, s, len, -1, NULL);
			else if (zrc == ZNONODE)
				zrc = zk_sync_create(c->zk, key, s, len, 0, 1, NULL);
			if (zrc != ZOK) {
				rc = cli_error("writing %s: %s", key, cli_zk_error(zrc));
				break;
			}
		}
	}
	json_decref(data);
	return rc;
}
