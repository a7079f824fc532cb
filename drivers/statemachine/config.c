/*
 * The common keys of a cloud provider's config, as the state-machine
 * framework uses them (upstream's ProviderConfig / ConfigPool /
 * ConfigLabel / ProviderCloudImage / ProviderDiskImage common parts). The
 * config was validated by lib/config before it got here; this applies
 * upstream's defaults and links labels to image entries.
 */
#include "lib/config/jsonget.h"
#include "lib/core/xalloc.h"
#include "drivers/statemachine/statemachine.h"

#include "lib/config/config.h" /* lib/config: struct np_provider */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * `rate` as written, in the unit of the driver's upstream: calls per second
 * (aws, azure...) or seconds between calls (OpenStack, and the fake, which
 * upstream runs on its OpenStack driver); the adapter makes its rate limit
 * of it. v.Coerce(float): a numeric string or a bool counts. Not a positive
 * number: 0, no limit.
 */
static double
provider_rate(const json_t *prov, const struct sm_defaults *def)
{
	const json_t *v = json_object_get(prov, "rate");
	double r = def->rate;

	if (json_is_number(v))
		r = json_number_value(v);
	else if (json_is_boolean(v))
		r = json_is_true(v) ? 1 : 0;
	else if (json_is_string(v))
		r = strtod(json_string_value(v), NULL);
	return r > 0 ? r : 0; /* NaN too */
}

static void
image_build(struct sm_image *im, const json_t *raw, int diskimage)
{
	const char *ct = np_json_str(raw, "connection-type", "ssh");

	im->raw = raw;
	im->diskimage = diskimage;
	im->name = xstrdup(np_json_str(raw, "name", ""));
	if (!diskimage)
		im->image_id =
		    xstrdup(np_json_str(raw, "image-id", np_json_str(raw, "image-name", NULL)));
	im->username = xstrdup(np_json_str(raw, "username", NULL));
	im->python_path = xstrdup(np_json_str(raw, "python-path", "auto"));
	im->shell_type = xstrdup(np_json_str(raw, "shell-type", NULL));
	im->connection_type = xstrdup(ct);
	im->connection_port =
	    (int)np_json_num(raw, "connection-port", strcmp(ct, "winrm") == 0 ? 5986 : 22);
}

static void
image_free(struct sm_image *im)
{
	free(im->name);
	free(im->image_id);
	free(im->username);
	free(im->python_path);
	free(im->shell_type);
	free(im->connection_type);
}

static const struct sm_image *
image_find(const struct sm_image *v, size_t n, const char *name)
{
	size_t i;

	for (i = 0; name != NULL && i < n; i++)
		if (strcmp(v[i].name, name) == 0)
			return &v[i];
	return NULL;
}

struct sm_config *
sm_config_new(const json_t *prov, const struct sm_defaults *def, char *err, size_t errlen)
{
	struct sm_config *cfg = calloc(1, sizeof(*cfg));
	const json_t *v, *pools = json_object_get(prov, "pools"), *pv, *lv;
	size_t i, j;

	if (cfg == NULL)
		abort();
	cfg->raw = prov;
	cfg->provider = xstrdup(np_json_str(prov, "name", ""));
	cfg->launch_retries = (int)np_json_num(prov, "launch-retries", 3);
	if (cfg->launch_retries < 1)
		cfg->launch_retries = 1; /* upstream makes at least one attempt */
	cfg->boot_timeout = np_json_num(prov, "boot-timeout", def->boot_timeout);
	cfg->launch_timeout = np_json_num(prov, "launch-timeout", 3600);
	cfg->rate = provider_rate(prov, def);
	cfg->host_key_checking = np_json_bool(prov, "host-key-checking", def->host_key_checking);

	v = json_object_get(prov, "cloud-images");
	cfg->cloud_images = calloc(json_array_size(v) + 1, sizeof(*cfg->cloud_images));
	for (i = 0; i < json_array_size(v); i++)
		image_build(&cfg->cloud_images[cfg->ncloud_images++], json_array_get(v, i), 0);
	v = json_object_get(prov, "diskimages");
	cfg->diskimages = calloc(json_array_size(v) + 1, sizeof(*cfg->diskimages));
	for (i = 0; i < json_array_size(v); i++)
		image_build(&cfg->diskimages[cfg->ndiskimages++], json_array_get(v, i), 1);

	cfg->pools = calloc(json_array_size(pools) + 1, sizeof(*cfg->pools));
	json_array_foreach(pools, i, pv)
	{
		struct sm_pool *p = &cfg->pools[cfg->npools++];
		const json_t *labels = json_object_get(pv, "labels"), *az;
		size_t k;

		p->raw = pv;
		p->name = xstrdup(np_json_str(pv, "name", ""));
		p->host_key_checking =
		    np_json_bool(pv, "host-key-checking", cfg->host_key_checking);
		p->use_internal_ip =
		    np_json_bool(pv, "use-internal-ip", np_json_bool(prov, "use-internal-ip", 0));
		json_array_foreach(json_object_get(pv, "availability-zones"), k,
				   az) if (json_is_string(az))
		    np_strv_push(&p->azs, json_string_value(az));
		p->labels = calloc(json_array_size(labels) + 1, sizeof(*p->labels));
		json_array_foreach(labels, j, lv)
		{
			struct sm_label *l = &p->labels[p->nlabels++];
			l->raw = lv;
			l->pool = p;
			l->name = xstrdup(json_is_string(lv) ? json_string_value(lv)
							     : np_json_str(lv, "name", ""));
			l->cloud_image = xstrdup(np_json_str(lv, "cloud-image", NULL));
			l->diskimage = xstrdup(np_json_str(lv, "diskimage", NULL));
			l->host_key_checking =
			    np_json_bool(lv, "host-key-checking", p->host_key_checking);
			l->console_log = np_json_bool(lv, "console-log", 0);
			if (l->cloud_image != NULL) {
				l->image = image_find(cfg->cloud_images, cfg->ncloud_images,
						      l->cloud_image);
				if (l->image == NULL) {
					snprintf(err, errlen,
						 "pool %s label %s: cloud-image %s is not "
						 "in the provider's cloud-images",
						 p->name, l->name, l->cloud_image);
					sm_config_free(cfg);
					return NULL;
				}
			} else if (l->diskimage != NULL) {
				l->image =
				    image_find(cfg->diskimages, cfg->ndiskimages, l->diskimage);
				if (l->image == NULL) {
					snprintf(err, errlen,
						 "pool %s label %s: diskimage %s is not in "
						 "the provider's diskimages",
						 p->name, l->name, l->diskimage);
					sm_config_free(cfg);
					return NULL;
				}
			}
		}
	}
	return cfg;
}

void
sm_config_free(struct sm_config *cfg)
{
	size_t i, j;

	if (cfg == NULL)
		return;
	for (i = 0; i < cfg->npools; i++) {
		struct sm_pool *p = &cfg->pools[i];
		for (j = 0; j < p->nlabels; j++) {
			free(p->labels[j].name);
			free(p->labels[j].cloud_image);
			free(p->labels[j].diskimage);
		}
		free(p->labels);
		np_strv_clear(&p->azs);
		free(p->name);
	}
	free(cfg->pools);
	for (i = 0; i < cfg->ncloud_images; i++)
		image_free(&cfg->cloud_images[i]);
	free(cfg->cloud_images);
	for (i = 0; i < cfg->ndiskimages; i++)
		image_free(&cfg->diskimages[i]);
	free(cfg->diskimages);
	free(cfg->provider);
	free(cfg);
}

const struct sm_pool *
sm_config_pool(const struct sm_config *cfg, const char *pool)
{
	size_t i;

	for (i = 0; pool != NULL && i < cfg->npools; i++)
		if (strcmp(cfg->pools[i].name, pool) == 0)
			return &cfg->pools[i];
	return NULL;
}

const struct sm_label *
sm_config_label(const struct sm_config *cfg, const char *pool, const char *label)
{
	const struct sm_pool *p = sm_config_pool(cfg, pool);
	size_t i;

	for (i = 0; p != NULL && label != NULL && i < p->nlabels; i++)
		if (strcmp(p->labels[i].name, label) == 0)
			return &p->labels[i];
	return NULL;
}

const struct sm_label *
sm_config_any_label(const struct sm_config *cfg, const char *label)
{
	size_t i, j;

	for (i = 0; i < cfg->npools; i++)
		for (j = 0; j < cfg->pools[i].nlabels; j++)
			if (strcmp(cfg->pools[i].labels[j].name, label) == 0)
				return &cfg->pools[i].labels[j];
	return NULL;
}

int
sm_drv_config_image_format(const struct np_provider *p, char *out, size_t outlen, char *err,
			   size_t errlen)
{
	if (p->image_format == NULL || p->image_format[0] == '\0') {
		snprintf(err, errlen, "provider %s has no image-format", p->name);
		return -1;
	}
	if ((size_t)snprintf(out, outlen, "%s", p->image_format) >= outlen) {
		snprintf(err, errlen, "provider %s: image-format too long", p->name);
		return -1;
	}
	return 0;
}
