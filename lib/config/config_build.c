/*
 * Building the typed configuration (struct np_config, lib/config/config.h)
 * from a validated nodepool.yaml tree, and merging secure.conf into it, as
 * Nodepool's config loader.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stdint.h>

#include "lib/config/config.h"
#include "lib/config/config_int.h"
#include "lib/config/drvtraits.h"

/* ---- the typed configuration ------------------------------------------------- */

static void
zk_servers_build(struct np_config *cfg, const struct np_cfg_node *seq)
{
	size_t i;

	cfg->zk_servers = calloc(seq->n ? seq->n : 1, sizeof(*cfg->zk_servers));
	if (cfg->zk_servers == NULL)
		np_cfg_oom();
	cfg->nzk_servers = seq->n;
	for (i = 0; i < seq->n; i++) {
		const struct np_cfg_node *s = seq->items[i];

		cfg->zk_servers[i].host = np_cfg_dup_str(s, "host", "");
		cfg->zk_servers[i].port = (int)np_cfg_int(s, "port", DEFAULT_ZK_PORT);
		cfg->zk_servers[i].chroot = np_cfg_dup_str(s, "chroot", NULL);
	}
}

void
np_cfg_zk_servers_free(struct np_config *cfg)
{
	size_t i;

	for (i = 0; i < cfg->nzk_servers; i++) {
		free(cfg->zk_servers[i].host);
		free(cfg->zk_servers[i].chroot);
	}
	free(cfg->zk_servers);
	cfg->zk_servers = NULL;
	cfg->nzk_servers = 0;
}

static void
zk_tls_build(struct np_config *cfg, const struct np_cfg_node *tls)
{
	free(cfg->zk_tls_ca);
	free(cfg->zk_tls_cert);
	free(cfg->zk_tls_key);
	cfg->zk_tls_ca = np_cfg_dup_str(tls, "ca", NULL);
	cfg->zk_tls_cert = np_cfg_dup_str(tls, "cert", NULL);
	cfg->zk_tls_key = np_cfg_dup_str(tls, "key", NULL);
}

/* One DiskImage.setFromConfig step (truthy values override, as upstream). */
static void
diskimage_apply(struct np_diskimage *d, const struct np_cfg_node *src)
{
	const struct np_cfg_node *n;
	const char *s;
	long long v;

	if ((v = np_cfg_int(src, "build-timeout", 0)) != 0)
		d->build_timeout = v;
	if ((s = np_cfg_str(src, "dib-cmd", NULL)) != NULL && *s) {
		free(d->dib_cmd);
		d->dib_cmd = np_cfg_strdup(s);
	}
	np_cfg_strv_from_seq(&d->elements, np_cfg_get_seq(src, "elements"));
	if ((n = np_cfg_get_map(src, "env-vars")) != NULL) {
		json_t *ev = np_cfg_to_json(n);

		json_object_update(d->env_vars, ev);
		json_decref(ev);
	}
	if ((n = np_cfg_get_seq(src, "formats")) != NULL && n->n > 0) {
		np_cfg_strv_free(&d->formats);
		np_cfg_strv_from_seq(&d->formats, n);
		np_cfg_strv_sort_unique(&d->formats);
	}
	if ((n = np_cfg_get_seq(src, "keep-formats")) != NULL && n->n > 0) {
		np_cfg_strv_free(&d->keep_formats);
		np_cfg_strv_from_seq(&d->keep_formats, n);
		np_cfg_strv_sort_unique(&d->keep_formats);
	}
	if ((n = np_cfg_get(src, "delete-after-upload")) != NULL && n->kind == NP_CFG_BOOL)
		d->delete_after_upload = (int)n->i;
	if (np_cfg_bool(src, "pause", 0))
		d->pause = 1;
	if (np_cfg_bool(src, "validate", 0))
		d->validate = 1;
	if ((s = np_cfg_str(src, "python-path", NULL)) != NULL && *s) {
		free(d->python_path);
		d->python_path = np_cfg_strdup(s);
	}
	if ((s = np_cfg_str(src, "shell-type", NULL)) != NULL && *s) {
		free(d->shell_type);
		d->shell_type = np_cfg_strdup(s);
	}
	if ((v = np_cfg_int(src, "rebuild-age", 0)) != 0)
		d->rebuild_age = v;
	if ((n = np_cfg_get(src, "release")) != NULL) {
		char buf[32];

		s = NULL;
		if (n->kind == NP_CFG_STR && n->text[0])
			s = n->text;
		else if (n->kind == NP_CFG_INT && n->i != 0) {
			snprintf(buf, sizeof(buf), "%lld", n->i);
			s = buf;
		}
		if (s != NULL) {
			free(d->release);
			d->release = np_cfg_strdup(s);
		}
	}
	if ((s = np_cfg_str(src, "username", NULL)) != NULL && *s) {
		free(d->username);
		d->username = np_cfg_strdup(s);
	}
	json_decref(d->metadata);
	d->metadata = np_cfg_json_obj_of(src, "metadata");
}

static void
diskimage_build(struct np_diskimage *d, const struct name_index *ix, const struct np_cfg_node *img)
{
	const struct np_cfg_node *chain[NP_CONFIG_MAX_PARENTS + 1];
	size_t n = 0, i;
	const struct np_cfg_node *cur = img;

	memset(d, 0, sizeof(*d));
	d->name = np_cfg_dup_str(img, "name", "");
	d->parent = np_cfg_dup_str(img, "parent", NULL);
	d->dib_cmd = np_cfg_strdup("disk-image-create");
	d->env_vars = json_object();
	d->release = np_cfg_strdup("");
	d->rebuild_age = 24 * 60 * 60;
	d->build_timeout = 8 * 60 * 60;
	d->username = np_cfg_strdup("zuul");
	d->python_path = np_cfg_strdup("auto");
	d->metadata = json_object();
	d->raw = img;
	/* parents root first; the checks ruled out loops and missing parents */
	while (cur != NULL && n < sizeof(chain) / sizeof(chain[0])) {
		const char *p = np_cfg_str(cur, "parent", NULL);

		chain[n++] = cur;
		cur = p ? np_cfg_nix_find(ix, p) : NULL;
	}
	for (i = n; i-- > 0;)
		diskimage_apply(d, chain[i]);
}

void
np_cfg_diskimage_free(struct np_diskimage *d)
{
	free(d->name);
	free(d->parent);
	free(d->dib_cmd);
	np_cfg_strv_free(&d->elements);
	json_decref(d->env_vars);
	np_cfg_strv_free(&d->formats);
	np_cfg_strv_free(&d->keep_formats);
	free(d->release);
	free(d->username);
	free(d->python_path);
	free(d->shell_type);
	json_decref(d->metadata);
}

/* The traits of a provider of a validated config (every driver known);
 * an all-defaults entry otherwise, so a caller never sees NULL. */
static const struct np_drv_traits *
typed_traits(const char *drv)
{
	static const struct np_drv_traits none = {.name = ""};
	const struct np_drv_traits *t = np_drv_traits_find(drv);

	return t ? t : &none;
}

static int
default_port(const char *connection_type)
{
	return strcmp(connection_type, "winrm") == 0 ? 5986 : 22;
}

static void
provider_image_build(struct np_provider_image *im, const struct np_cfg_node *raw,
		     const struct np_drv_traits *t, int cloud, const struct np_diskimage *top)
{
	memset(im, 0, sizeof(*im));
	im->raw = raw;
	im->name = np_cfg_dup_str(raw, "name", "");
	im->pause = np_cfg_bool(raw, "pause", 0);
	im->config_drive = np_cfg_bool(raw, "config-drive", -1);
	im->validate = np_cfg_bool(raw, "validate", -1);
	im->image_id = np_cfg_dup_str(raw, "image-id", NULL);
	im->image_name = np_cfg_dup_str(raw, "image-name", NULL);
	im->connection_type = np_cfg_dup_str(raw, "connection-type", "ssh");
	im->connection_port =
	    (int)np_cfg_int(raw, "connection-port", default_port(im->connection_type));
	if (!cloud && top != NULL && (t->flags & NP_DRV_IMAGE_USER_FROM_DISKIMAGE)) {
		/* these take the user (and interpreter) from the diskimage itself */
		int interp = (t->flags & NP_DRV_IMAGE_INTERP_FROM_DISKIMAGE) != 0;

		im->username = np_cfg_strdup(top->username);
		im->python_path = np_cfg_strdup(interp ? top->python_path
						       : np_cfg_str(raw, "python-path", "auto"));
		im->shell_type = interp ? np_cfg_strdup(top->shell_type)
					: np_cfg_dup_str(raw, "shell-type", NULL);
	} else {
		im->username =
		    np_cfg_dup_str(raw, "username", !cloud && top ? top->username : NULL);
		im->python_path = np_cfg_dup_str(raw, "python-path", "auto");
		im->shell_type = np_cfg_dup_str(raw, "shell-type", NULL);
	}
	if (np_cfg_get_map(raw, "meta"))
		im->meta = np_cfg_json_obj_of(raw, "meta");
	else
		im->meta = np_cfg_json_obj_of(raw, "tags");
}

static void
provider_image_free(struct np_provider_image *im)
{
	free(im->name);
	free(im->image_id);
	free(im->image_name);
	free(im->username);
	free(im->python_path);
	free(im->shell_type);
	free(im->connection_type);
	json_decref(im->meta);
}

static void
pool_label_build(struct np_pool_label *pl, const struct np_cfg_node *raw,
		 const struct np_provider *p, const struct np_pool *pool)
{
	memset(pl, 0, sizeof(*pl));
	pl->raw = raw;
	pl->name = np_cfg_dup_str(raw, "name", "");
	pl->diskimage = np_cfg_dup_str(raw, "diskimage", NULL);
	pl->cloud_image = np_cfg_dup_str(raw, "cloud-image", NULL);
	pl->flavor_name = np_cfg_dup_str(raw, "flavor-name", NULL);
	pl->instance_type = np_cfg_dup_str(raw, "instance-type", NULL);
	pl->min_ram = np_cfg_int(raw, "min-ram", 0);
	pl->key_name = np_cfg_dup_str(raw, "key-name", NULL);
	pl->host_key_checking = np_cfg_bool(raw, "host-key-checking", pool->host_key_checking);
	pl->backing_label = np_cfg_dup_str(raw, "backing-label", NULL);
	pl->max_parallel_jobs = np_cfg_int(raw, "max-parallel-jobs", 1);
	pl->grace_time = np_cfg_int(raw, "grace-time", 60);
	pl->min_retention_time = np_cfg_int(raw, "min-retention-time", 0);
	pl->max_age = np_cfg_int(raw, "max-age", 0);
	pl->cores = np_cfg_int(raw, "cores", 1);
	pl->ram = np_cfg_int(raw, "ram", 1024);
	pl->boot_delay = np_cfg_num(raw, "boot-delay", p->boot_delay);
	pl->failure_rate = np_cfg_num(raw, "failure-rate", p->failure_rate);
}

static void
pool_label_free(struct np_pool_label *pl)
{
	free(pl->name);
	free(pl->diskimage);
	free(pl->cloud_image);
	free(pl->flavor_name);
	free(pl->instance_type);
	free(pl->key_name);
	free(pl->backing_label);
}

static void
static_node_build(struct np_static_node *sn, const struct np_cfg_node *raw)
{
	const struct np_cfg_node *hk = np_cfg_get(raw, "host-key");

	memset(sn, 0, sizeof(*sn));
	sn->raw = raw;
	sn->name = np_cfg_dup_str(raw, "name", "");
	np_cfg_static_node_labels(raw, &sn->labels);
	sn->username = np_cfg_dup_str(raw, "username", "zuul");
	sn->timeout = np_cfg_int(raw, "timeout", 5);
	if (hk != NULL && hk->kind == NP_CFG_STR && hk->text[0])
		np_cfg_strv_push(&sn->host_keys, hk->text);
	else
		np_cfg_strv_from_seq(&sn->host_keys, hk);
	sn->host_key_checking = np_cfg_bool(raw, "host-key-checking", 1);
	sn->connection_type = np_cfg_dup_str(raw, "connection-type", "ssh");
	sn->connection_port = np_cfg_static_port(raw);
	sn->shell_type = np_cfg_dup_str(raw, "shell-type", NULL);
	sn->python_path = np_cfg_dup_str(raw, "python-path", "auto");
	sn->max_parallel_jobs = np_cfg_int(raw, "max-parallel-jobs", 1);
}

static void
static_node_free(struct np_static_node *sn)
{
	free(sn->name);
	np_cfg_strv_free(&sn->labels);
	free(sn->username);
	np_cfg_strv_free(&sn->host_keys);
	free(sn->connection_type);
	free(sn->shell_type);
	free(sn->python_path);
}

static void
pool_build(struct np_pool *pool, const struct np_cfg_node *raw, const struct np_provider *p,
	   const struct np_cfg_node *prov_raw)
{
	const struct np_drv_traits *t = typed_traits(p->driver);
	const struct np_cfg_node *labels = np_cfg_get_seq(raw, "labels");
	const struct np_cfg_node *nodes = np_cfg_get_seq(raw, "nodes");
	const struct np_cfg_node *n;
	int hkc_default = 1, internal_default = 0;
	size_t i;

	memset(pool, 0, sizeof(*pool));
	pool->raw = raw;
	pool->name = np_cfg_dup_str(raw, "name", "");
	/* as their upstream loaders, some drivers' pools inherit the provider's limits */
	pool->max_servers = np_cfg_int(
	    raw, "max-servers", t->flags & NP_DRV_POOL_INHERITS_MAX_SERVERS ? p->max_servers : -1);
	pool->max_cores = np_cfg_int(
	    raw, "max-cores", t->flags & NP_DRV_POOL_INHERITS_MAX_CORES_RAM ? p->max_cores : -1);
	pool->max_ram = np_cfg_int(raw, "max-ram",
				   t->flags & NP_DRV_POOL_INHERITS_MAX_CORES_RAM ? p->max_ram : -1);
	pool->max_volumes = np_cfg_int(raw, "max-volumes", -1);
	pool->max_volume_gb = np_cfg_int(raw, "max-volume-gb", -1);
	pool->max_resources = np_cfg_json_obj_of(prov_raw, "max-resources");
	if ((n = np_cfg_get_map(raw, "max-resources")) != NULL) {
		json_t *j = np_cfg_to_json(n);

		json_object_update(pool->max_resources, j);
		json_decref(j);
	}
	n = np_cfg_get(raw, "priority");
	pool->priority = n && n->kind == NP_CFG_INT ? n->i : p->priority;
	if ((n = np_cfg_get_map(raw, "node-attributes")) != NULL)
		pool->node_attributes = np_cfg_to_json(n);
	pool->ignore_provider_quota = np_cfg_bool(raw, "ignore-provider-quota", 0);
	np_cfg_strv_from_seq(&pool->azs, np_cfg_get_seq(raw, "availability-zones"));
	if (np_cfg_str(raw, "availability-zone", NULL) != NULL)
		np_cfg_strv_push(&pool->azs, np_cfg_str(raw, "availability-zone", NULL));
	if (t->pool_hkc == NP_DRV_POOL_HKC_PROVIDER) {
		hkc_default = p->host_key_checking;
		internal_default = np_cfg_bool(prov_raw, "use-internal-ip", 0);
	} else if (t->pool_hkc == NP_DRV_POOL_HKC_OFF) {
		hkc_default = 0;
	}
	pool->host_key_checking = np_cfg_bool(raw, "host-key-checking", hkc_default);
	pool->use_internal_ip = np_cfg_bool(raw, "use-internal-ip", internal_default);

	if (labels != NULL && labels->n > 0) {
		pool->labels = calloc(labels->n, sizeof(*pool->labels));
		if (pool->labels == NULL)
			np_cfg_oom();
		for (i = 0; i < labels->n; i++) {
			pool_label_build(&pool->labels[pool->nlabels++], labels->items[i], p, pool);
			np_cfg_strv_push(&pool->label_names, pool->labels[i].name);
		}
	}
	if ((t->flags & NP_DRV_STATIC_NODES) && nodes != NULL && nodes->n > 0) {
		pool->nodes = calloc(nodes->n, sizeof(*pool->nodes));
		if (pool->nodes == NULL)
			np_cfg_oom();
		for (i = 0; i < nodes->n; i++) {
			struct np_static_node *sn = &pool->nodes[pool->nnodes++];
			size_t k;

			static_node_build(sn, nodes->items[i]);
			for (k = 0; k < sn->labels.n; k++)
				np_cfg_strv_push(&pool->label_names, sn->labels.v[k]);
		}
		np_cfg_strv_sort_unique(&pool->label_names); /* a set, as StaticPool.labels */
	}
}

static void
pool_free(struct np_pool *pool)
{
	size_t i;

	free(pool->name);
	json_decref(pool->max_resources);
	json_decref(pool->node_attributes);
	np_cfg_strv_free(&pool->azs);
	for (i = 0; i < pool->nlabels; i++)
		pool_label_free(&pool->labels[i]);
	free(pool->labels);
	np_cfg_strv_free(&pool->label_names);
	for (i = 0; i < pool->nnodes; i++)
		static_node_free(&pool->nodes[i]);
	free(pool->nodes);
}

/* The typed diskimages by name (sorted), for building providers. */
struct typed_index {
	struct np_diskimage **v;
	size_t n;
};

static int
typed_cmp(const void *pa, const void *pb)
{
	const struct np_diskimage *a = *(struct np_diskimage *const *)pa;
	const struct np_diskimage *b = *(struct np_diskimage *const *)pb;

	return strcmp(a->name, b->name);
}

static void
typed_index_build(struct typed_index *ix, struct np_config *cfg)
{
	size_t i;

	ix->n = cfg->ndiskimages;
	if ((ix->v = malloc((ix->n ? ix->n : 1) * sizeof(*ix->v))) == NULL)
		np_cfg_oom();
	for (i = 0; i < ix->n; i++)
		ix->v[i] = &cfg->diskimages[i];
	qsort(ix->v, ix->n, sizeof(*ix->v), typed_cmp);
}

static const struct np_diskimage *
typed_index_find(const struct typed_index *ix, const char *name)
{
	size_t lo = 0, hi = ix->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(ix->v[mid]->name, name);

		if (c == 0)
			return ix->v[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static void
provider_build(const struct typed_index *dix, struct np_provider *p, const struct np_cfg_node *raw)
{
	const char *drv = np_cfg_provider_driver(raw);
	const struct np_drv_traits *t = typed_traits(drv);
	const struct np_cfg_node *seq, *n, *quota;
	size_t i;

	memset(p, 0, sizeof(*p));
	p->raw = raw;
	p->name = np_cfg_dup_str(raw, "name", "");
	p->driver = np_cfg_strdup(drv);
	p->max_concurrency = np_cfg_int(raw, "max-concurrency", -1);
	n = np_cfg_get(raw, "priority");
	p->priority_set = n && n->kind == NP_CFG_INT;
	p->priority = p->priority_set ? n->i : 100;
	p->launch_retries = np_cfg_int(raw, "launch-retries", 3);
	p->boot_timeout = np_cfg_int(raw, "boot-timeout", t->boot_timeout);
	p->launch_timeout = np_cfg_int(raw, "launch-timeout", 3600);
	p->rate = np_cfg_coerce_num(raw, "rate", t->rate);
	p->host_key_checking =
	    np_cfg_bool(raw, "host-key-checking", t->flags & NP_DRV_NO_HOST_KEY_CHECK ? 0 : 1);
	p->cloud = np_cfg_dup_str(raw, t->cloud_key ? t->cloud_key : "context", NULL);
	p->region = np_cfg_dup_str(raw, t->region_key ? t->region_key : "region-name", NULL);
	p->manage_images = (t->flags & NP_DRV_MANAGES_IMAGES) != 0;
	if (t->image_format != NULL)
		p->image_format = t->flags & NP_DRV_IMAGE_FORMAT_FIXED
				      ? np_cfg_strdup(t->image_format)
				      : np_cfg_dup_str(raw, "image-format", t->image_format);
	if (t->image_timeout_key != NULL)
		p->image_upload_timeout = np_cfg_int(raw, t->image_timeout_key, t->image_timeout);
	else
		p->image_upload_timeout = np_cfg_int(raw, "image-import-timeout", -1);
	if (t->image_name_format != NULL)
		p->image_name_format = np_cfg_strdup(t->image_name_format);
	else if (p->manage_images)
		p->image_name_format =
		    np_cfg_dup_str(raw, "image-name-format", DEFAULT_IMAGE_NAME_FORMAT);
	p->post_upload_hook = np_cfg_dup_str(raw, "post-upload-hook", NULL);
	p->max_servers =
	    np_cfg_int(raw, t->max_servers_key ? t->max_servers_key : "max-servers", -1);
	p->max_cores = np_cfg_int(raw, "max-cores", -1);
	p->max_ram = np_cfg_int(raw, "max-ram", -1);
	p->boot_delay = np_cfg_num(raw, "boot-delay", 0);
	p->delete_delay = np_cfg_num(raw, "delete-delay", 0);
	p->failure_rate = np_cfg_num(raw, "failure-rate", 0);
	p->delete_failure_rate = np_cfg_num(raw, "delete-failure-rate", 0);
	quota = t->flags & NP_DRV_PROVIDER_QUOTA ? np_cfg_get_map(raw, "quota") : NULL;
	p->quota_instances = np_cfg_int(quota, "instances", -1);
	p->quota_cores = np_cfg_int(quota, "cores", -1);
	p->quota_ram = np_cfg_int(quota, "ram", -1);
	p->seed = np_cfg_int(raw, "seed", 0);

	if (p->manage_images && (seq = np_cfg_get_seq(raw, "diskimages")) != NULL && seq->n > 0) {
		p->diskimages = calloc(seq->n, sizeof(*p->diskimages));
		if (p->diskimages == NULL)
			np_cfg_oom();
		for (i = 0; i < seq->n; i++) {
			const char *name = np_cfg_str(seq->items[i], "name", "");

			provider_image_build(&p->diskimages[p->ndiskimages++], seq->items[i], t, 0,
					     typed_index_find(dix, name));
		}
	}
	if ((seq = np_cfg_get_seq(raw, "cloud-images")) != NULL && seq->n > 0) {
		p->cloud_images = calloc(seq->n, sizeof(*p->cloud_images));
		if (p->cloud_images == NULL)
			np_cfg_oom();
		for (i = 0; i < seq->n; i++)
			provider_image_build(&p->cloud_images[p->ncloud_images++], seq->items[i], t,
					     1, NULL);
	}
	if ((seq = np_cfg_get_seq(raw, "pools")) != NULL && seq->n > 0) {
		p->pools = calloc(seq->n, sizeof(*p->pools));
		if (p->pools == NULL)
			np_cfg_oom();
		for (i = 0; i < seq->n; i++)
			pool_build(&p->pools[p->npools++], seq->items[i], p, raw);
	}
}

void
np_cfg_provider_free(struct np_provider *p)
{
	size_t i;

	free(p->name);
	free(p->driver);
	free(p->cloud);
	free(p->region);
	free(p->image_format);
	free(p->image_name_format);
	free(p->post_upload_hook);
	for (i = 0; i < p->ndiskimages; i++)
		provider_image_free(&p->diskimages[i]);
	free(p->diskimages);
	for (i = 0; i < p->ncloud_images; i++)
		provider_image_free(&p->cloud_images[i]);
	free(p->cloud_images);
	for (i = 0; i < p->npools; i++)
		pool_free(&p->pools[i]);
	free(p->pools);
}

static void
tenant_limits_build(struct np_config *cfg, const struct np_cfg_node *seq)
{
	size_t i, j;

	cfg->tenant_limits = calloc(seq->n ? seq->n : 1, sizeof(*cfg->tenant_limits));
	if (cfg->tenant_limits == NULL)
		np_cfg_oom();
	for (i = 0; i < seq->n; i++) {
		const struct np_cfg_node *m = seq->items[i];
		struct np_tenant_limit *t = &cfg->tenant_limits[cfg->ntenant_limits++];

		t->tenant = np_cfg_dup_str(m, "tenant-name", "");
		t->limits = json_object();
		for (j = 0; j < m->n; j++) {
			const char *k = m->keys[j]->text;

			if (strcmp(k, "tenant-name") == 0 || m->items[j]->kind != NP_CFG_INT)
				continue;
			if (strcmp(k, "max-cores") == 0)
				k = "cores";
			else if (strcmp(k, "max-servers") == 0)
				k = "instances";
			else if (strcmp(k, "max-ram") == 0)
				k = "ram";
			else if (strcmp(k, "max-volumes") == 0)
				k = "volumes";
			else if (strcmp(k, "max-volume-gb") == 0)
				k = "volume-gb";
			json_object_set_new(t->limits, k, json_integer(m->items[j]->i));
		}
	}
}

static void
nodepoold_build(struct np_nodepoold_settings *s, const struct np_cfg_node *m)
{
	s->cleanup_interval = np_cfg_num(m, "cleanup-interval", 60);
	s->delete_interval = np_cfg_num(m, "delete-interval", 5);
	s->stats_interval = np_cfg_num(m, "stats-interval", 5);
	s->worker_status_timeout = np_cfg_num(m, "worker-status-timeout", 30);
	s->control_socket = np_cfg_dup_str(m, "control-socket", "/run/nodepoold/nodepoold.sock");
	s->pid_file = np_cfg_dup_str(m, "pid-file", "/run/nodepoold/nodepoold.pid");
	s->restart_backoff_max = np_cfg_num(m, "restart-backoff-max", 60);
	s->request_lock_cleanup_age = np_cfg_num(m, "request-lock-cleanup-age", 8 * 3600);
	s->peer_takeover_delay = np_cfg_num(m, "peer-takeover-delay", 2);
	s->reload_on_change = np_cfg_bool(m, "reload-on-change", 1) != 0;
}

void
np_cfg_config_build(struct np_config *cfg, const struct np_cfg_node *root)
{
	const struct np_cfg_node *seq, *n;
	size_t i;

	if ((seq = np_cfg_get_seq(root, "zookeeper-servers")) != NULL)
		zk_servers_build(cfg, seq);
	if ((n = np_cfg_get_map(root, "zookeeper-tls")) != NULL)
		zk_tls_build(cfg, n);
	cfg->zk_timeout = np_cfg_num(root, "zookeeper-timeout", 10.0);
	if ((seq = np_cfg_get_seq(root, "labels")) != NULL && seq->n > 0) {
		cfg->labels = calloc(seq->n, sizeof(*cfg->labels));
		if (cfg->labels == NULL)
			np_cfg_oom();
		for (i = 0; i < seq->n; i++) {
			struct np_label *l = &cfg->labels[cfg->nlabels++];

			l->raw = seq->items[i];
			l->name = np_cfg_dup_str(l->raw, "name", "");
			l->min_ready = np_cfg_int(l->raw, "min-ready", 0);
			l->max_ready_age = np_cfg_int(l->raw, "max-ready-age", 0);
		}
	}
	if ((seq = np_cfg_get_seq(root, "diskimages")) != NULL && seq->n > 0) {
		cfg->diskimages = calloc(seq->n, sizeof(*cfg->diskimages));
		if (cfg->diskimages == NULL)
			np_cfg_oom();
		struct name_index ix;

		np_cfg_nix_build(&ix, seq);
		for (i = 0; i < seq->n; i++)
			if (!np_cfg_bool(seq->items[i], "abstract", 0))
				diskimage_build(&cfg->diskimages[cfg->ndiskimages++], &ix,
						seq->items[i]);
		np_cfg_nix_free(&ix);
	}
	if ((seq = np_cfg_get_seq(root, "providers")) != NULL && seq->n > 0) {
		struct typed_index dix;

		typed_index_build(&dix, cfg);
		cfg->providers = calloc(seq->n, sizeof(*cfg->providers));
		if (cfg->providers == NULL)
			np_cfg_oom();
		for (i = 0; i < seq->n; i++)
			provider_build(&dix, &cfg->providers[cfg->nproviders++], seq->items[i]);
		free(dix.v);
	}
	cfg->max_hold_age = np_cfg_int(root, "max-hold-age", 0);
	if (cfg->max_hold_age < 0)
		cfg->max_hold_age = 0;
	if ((seq = np_cfg_get_seq(root, "tenant-resource-limits")) != NULL)
		tenant_limits_build(cfg, seq);
	n = np_cfg_get_map(root, "webapp");
	cfg->webapp_port = (int)np_cfg_int(n, "port", 8005);
	cfg->webapp_listen_address = np_cfg_dup_str(n, "listen_address", "0.0.0.0");
	cfg->webapp_max_connections = np_cfg_int(n, "max_connections", 64);
	cfg->webapp_max_connections_per_client = np_cfg_int(n, "max_connections_per_client", 8);
	cfg->webapp_request_timeout = np_cfg_num(n, "request_timeout", 10);
	cfg->webapp_max_response_size = np_cfg_int(n, "max_response_size", 32 << 20);
	cfg->webapp_view_idle_timeout = np_cfg_num(n, "view_idle_timeout", 60);
	cfg->elements_dir = np_cfg_dup_str(root, "elements-dir", NULL);
	cfg->images_dir = np_cfg_dup_str(root, "images-dir", NULL);
	cfg->build_log_dir = np_cfg_dup_str(root, "build-log-dir", "/var/log/nodepool/builds");
	cfg->build_log_retention = np_cfg_int(root, "build-log-retention", 7);
	nodepoold_build(&cfg->nodepoold, np_cfg_get_map(root, "nodepoold"));
}

/* secure.conf over the main file, as Nodepool's loadSecureConfig. */
void
np_cfg_secure_merge(struct np_config *cfg, const struct np_cfg_node *sroot,
		    struct np_cfg_errors *errs)
{
	const struct np_cfg_node *seq, *n;
	struct np_cfg_path path;
	size_t i, old;

	memset(&path, 0, sizeof(path));
	if (sroot->kind != NP_CFG_MAP)
		return;
	if ((seq = np_cfg_get_seq(sroot, "zookeeper-servers")) != NULL && seq->n > 0) {
		np_cfg_zk_servers_free(cfg);
		zk_servers_build(cfg, seq);
	}
	if ((n = np_cfg_get_map(sroot, "zookeeper-tls")) != NULL)
		zk_tls_build(cfg, n);
	if ((seq = np_cfg_get_seq(sroot, "diskimages")) == NULL)
		return;
	old = np_cfg_path_key(&path, "diskimages");
	for (i = 0; i < seq->n; i++) {
		const char *name = np_cfg_str(seq->items[i], "name", NULL);
		const struct np_cfg_node *ev = np_cfg_get_map(seq->items[i], "env-vars");
		struct np_diskimage *d = NULL;
		size_t k;

		if (name == NULL)
			continue;
		for (k = 0; k < cfg->ndiskimages; k++)
			if (strcmp(cfg->diskimages[k].name, name) == 0)
				d = &cfg->diskimages[k];
		if (d == NULL) {
			size_t o1 = np_cfg_path_idx(&path, i), o2 = np_cfg_path_key(&path, "name");

			np_cfg_err(errs, np_cfg_get(seq->items[i], "name"), &path,
				   "unknown diskimage %s", name);
			np_cfg_path_pop(&path, o2);
			np_cfg_path_pop(&path, o1);
			continue;
		}
		if (ev != NULL) {
			json_t *j = np_cfg_to_json(ev);

			json_object_update(d->env_vars, j);
			json_decref(j);
		}
	}
	np_cfg_path_pop(&path, old);
}
