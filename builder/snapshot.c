/*
 * What the builder's duties ask of the configuration and of a snapshot of
 * /nodepool/images (lib/zk/imagetree.h): the format a provider takes, the
 * formats to build, the newest ready build, an upload's validation, the
 * local file of a build's format. Pure questions: nothing here writes
 * ZooKeeper or starts work.
 */
#include "builder/builder_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "drivers/driver.h"
#include "lib/core/log.h"
#include "lib/core/strset.h"

/*
 * The format a provider takes, as its driver answers (the image_format
 * slot, drivers/driver.h: asked on every pass, so an edited clouds.yaml
 * counts); qcow2 when the driver has no answer, its reason logged once
 * per provider and reason. Returns buf.
 */
const char *
bld_provider_format(const struct np_provider *p, char *buf, size_t len)
{
	static struct strset *warned; /* "provider: reason" already logged */
	const struct driver *drv = driver_lookup(p->driver != NULL ? p->driver : "openstack");
	char err[300], key[600];

	if (drv != NULL && drv->image_format != NULL &&
	    drv->image_format(p, buf, len, err, sizeof(err)) == 0)
		return buf;
	if (drv == NULL || drv->image_format == NULL)
		snprintf(err, sizeof(err), "driver %s names no image format",
			 p->driver != NULL ? p->driver : "openstack");
	snprintf(key, sizeof(key), "%s: %s", p->name, err);
	if (warned == NULL)
		warned = strset_new();
	if (strset_add(warned, key))
		log_warn("provider %s: %s; uploading qcow2", p->name, err);
	snprintf(buf, len, "qcow2");
	return buf;
}

/* 1 when the provider's driver is built in and can upload images (a
 * state-machine driver whose adapter has upload_image). */
int
bld_provider_uploads(const struct np_provider *p)
{
	const struct driver *drv = driver_lookup(p->driver != NULL ? p->driver : "openstack");

	return p->manage_images && drv != NULL && drv->image_upload != NULL;
}

const struct np_provider_image *
bld_provider_diskimage(const struct np_provider *p, const char *image)
{
	size_t i;

	for (i = 0; i < p->ndiskimages; i++)
		if (strcmp(p->diskimages[i].name, image) == 0)
			return &p->diskimages[i];
	return NULL;
}

static int
strv_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The formats to build for d: every managing provider's that uses it, plus
 * d's own formats; sorted. */
void
bld_needed_formats(const struct np_config *cfg, const struct np_diskimage *d, struct np_strv *out)
{
	char fmt[64];
	size_t i;

	np_strv_clear(out);
	for (i = 0; i < cfg->nproviders; i++) {
		const struct np_provider *p = &cfg->providers[i];
		if (p->manage_images && bld_provider_diskimage(p, d->name) != NULL &&
		    !np_strv_contains(out, bld_provider_format(p, fmt, sizeof(fmt))))
			np_strv_push(out, fmt);
	}
	for (i = 0; i < d->formats.n; i++)
		if (!np_strv_contains(out, d->formats.v[i]))
			np_strv_push(out, d->formats.v[i]);
	if (out->n > 1)
		qsort(out->v, out->n, sizeof(*out->v), strv_cmp);
}

/* The newest READY build (upstream's getMostRecentBuilds(1, READY)). */
const struct imgtree_build *
bld_newest_ready(const struct imgtree_image *im)
{
	const struct imgtree_build *best = NULL;
	size_t i;

	for (i = 0; im != NULL && i < im->nbuilds; i++) {
		const struct imgtree_build *ib = &im->builds[i];
		if (ib->b == NULL || ib->b->state != NP_BUILD_READY)
			continue;
		if (best == NULL || ib->b->state_time > best->b->state_time)
			best = ib;
	}
	return best;
}

const struct imgtree_provider *
bld_build_provider(const struct imgtree_build *ib, const char *provider)
{
	size_t i;

	for (i = 0; ib != NULL && i < ib->nproviders; i++)
		if (strcmp(ib->providers[i].name, provider) == 0)
			return &ib->providers[i];
	return NULL;
}

int
bld_has_ready_upload(const struct imgtree_build *ib, const char *provider)
{
	const struct imgtree_provider *ip = bld_build_provider(ib, provider);
	size_t i;

	for (i = 0; ip != NULL && i < ip->nuploads; i++)
		if (ip->uploads[i].u != NULL && ip->uploads[i].u->state == NP_UPLOAD_READY)
			return 1;
	return 0;
}

/*
 * Validation before service (beyond upstream; man nodepool.yaml(5),
 * `validate`): the builder stores an upload of a diskimage that validates
 * READY with the extra key validation {"state": "pending"}; the launcher
 * of that provider boots a node from it and writes the verdict: READY with
 * "passed", or FAILED with "failed" and the reason. Upstream's readers see
 * an ordinary READY or FAILED upload.
 */
static const char *
upload_validation(const struct np_image_upload *u)
{
	const json_t *v = u != NULL ? json_object_get(u->extra, "validation") : NULL;

	return json_string_value(json_object_get(v, "state"));
}

int
bld_validation_failed(const struct np_image_upload *u)
{
	const char *v = upload_validation(u);

	return v != NULL && strcmp(v, "failed") == 0;
}

/* 1 when an upload of ib in provider failed its validation and is still
 * there: cleanup deletes it (noting the reason on the build record) before
 * the build is uploaded there again, so tries come at cleanup's pace. */
int
bld_has_failed_validation(const struct imgtree_build *ib, const char *provider)
{
	const struct imgtree_provider *ip = bld_build_provider(ib, provider);
	size_t i;

	for (i = 0; ip != NULL && i < ip->nuploads; i++) {
		const struct np_image_upload *u = ip->uploads[i].u;
		if (u != NULL && u->state == NP_UPLOAD_FAILED && bld_validation_failed(u))
			return 1;
	}
	return 0;
}

/*
 * A failed validation is noted on the build record before the builder
 * deletes the upload (cloud image and record) and uploads the build again:
 * the build's extra key validation_failures {provider: {count, upload,
 * external_id, reason, time}} keeps the reason and how many uploads of the
 * build failed there. The entry of provider, or NULL.
 */
const json_t *
bld_build_validation_failure(const struct np_image_build *bd, const char *provider)
{
	return json_object_get(
	    json_object_get(bd != NULL ? bd->extra : NULL, "validation_failures"), provider);
}

/* Uploads of bd that failed their validation in provider. */
int
bld_validation_tries(const struct np_image_build *bd, const char *provider)
{
	return (int)json_integer_value(
	    json_object_get(bld_build_validation_failure(bd, provider), "count"));
}

/* The provider's diskimage entry's validate, else the diskimage's. */
int
bld_upload_validates(const struct builder *b, const struct np_provider *p, const char *image)
{
	const struct np_diskimage *d = np_cfg_diskimage(b->cfg, image);
	size_t i;

	for (i = 0; p != NULL && i < p->ndiskimages; i++)
		if (strcmp(p->diskimages[i].name, image) == 0 && p->diskimages[i].validate >= 0)
			return p->diskimages[i].validate;
	return d != NULL && d->validate;
}

void
bld_local_path(const struct builder *b, const char *image, const char *build, const char *ext,
	       char *buf, size_t size)
{
	snprintf(buf, size, "%s/%s-%s.%s", b->cfg->images_dir, image, build, ext);
}

/* The first word of a checksum file (md5sum/sha256sum output), or NULL. */
char *
bld_read_checksum(const char *path, size_t len)
{
	char buf[256];
	FILE *f = fopen(path, "r");
	size_t n;

	if (f == NULL)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	if (n < len)
		return NULL;
	buf[len] = '\0';
	return bld_strdup(buf);
}

json_t *
bld_provider_config_json(const struct np_provider *p)
{
	json_t *cfg = np_cfg_to_json(p->raw);

	/* the fake cloud's state-file is the launcher's picture of it */
	json_object_del(cfg, "state-file");
	json_object_del(cfg, "persistent");
	return cfg;
}
