/*
 * nodepool.yaml loading (lib/config/config.h): read, parse, validate against the
 * schemas, then cross-check references (config_check.c), build the typed
 * configuration and merge secure.conf (config_build.c); per-provider slices
 * and their fingerprints are in slice.c. Here: shared small helpers, the
 * ZooKeeper host string, loading and lookups.
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

/* ---- small helpers ------------------------------------------------------ */

void
np_cfg_strv_push(struct np_cfg_strv *sv, const char *s)
{
	char **nv = realloc(sv->v, (sv->n + 1) * sizeof(*nv));

	if (nv == NULL)
		np_cfg_oom();
	sv->v = nv;
	sv->v[sv->n++] = np_cfg_strdup(s);
}

void
np_cfg_strv_free(struct np_cfg_strv *sv)
{
	size_t i;

	for (i = 0; i < sv->n; i++)
		free(sv->v[i]);
	free(sv->v);
	sv->v = NULL;
	sv->n = 0;
}

int
np_cfg_strv_contains(const struct np_cfg_strv *sv, const char *s)
{
	size_t i;

	for (i = 0; i < sv->n; i++)
		if (strcmp(sv->v[i], s) == 0)
			return 1;
	return 0;
}

int
np_cfg_strp_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sort and drop duplicates (a Python set, printed sorted). */
void
np_cfg_strv_sort_unique(struct np_cfg_strv *sv)
{
	size_t i, j;

	if (sv->n < 2)
		return;
	qsort(sv->v, sv->n, sizeof(*sv->v), np_cfg_strp_cmp);
	for (i = 1, j = 1; i < sv->n; i++) {
		if (strcmp(sv->v[i], sv->v[j - 1]) == 0)
			free(sv->v[i]);
		else
			sv->v[j++] = sv->v[i];
	}
	sv->n = j;
}

/* A list node's strings appended to sv (non-strings skipped). */
void
np_cfg_strv_from_seq(struct np_cfg_strv *sv, const struct np_cfg_node *seq)
{
	size_t i;

	if (seq == NULL || seq->kind != NP_CFG_SEQ)
		return;
	for (i = 0; i < seq->n; i++)
		if (seq->items[i]->kind == NP_CFG_STR)
			np_cfg_strv_push(sv, seq->items[i]->text);
}

const struct np_cfg_node *
np_cfg_get_seq(const struct np_cfg_node *map, const char *key)
{
	const struct np_cfg_node *n = np_cfg_get(map, key);

	return n && n->kind == NP_CFG_SEQ ? n : NULL;
}

const struct np_cfg_node *
np_cfg_get_map(const struct np_cfg_node *map, const char *key)
{
	const struct np_cfg_node *n = np_cfg_get(map, key);

	return n && n->kind == NP_CFG_MAP ? n : NULL;
}

char *
np_cfg_dup_str(const struct np_cfg_node *map, const char *key, const char *def)
{
	return np_cfg_strdup(np_cfg_str(map, key, def));
}

/* A mapping as a JSON object; an empty object when absent. */
json_t *
np_cfg_json_obj_of(const struct np_cfg_node *map, const char *key)
{
	const struct np_cfg_node *n = np_cfg_get_map(map, key);
	json_t *j = n ? np_cfg_to_json(n) : json_object();

	if (j == NULL)
		np_cfg_oom();
	return j;
}

/* v.Coerce(float): int, float, bool or numeric string. */
double
np_cfg_coerce_num(const struct np_cfg_node *map, const char *key, double def)
{
	const struct np_cfg_node *n = np_cfg_get(map, key);

	if (n == NULL)
		return def;
	switch (n->kind) {
	case NP_CFG_INT:
	case NP_CFG_FLOAT:
		return n->f;
	case NP_CFG_BOOL:
		return (double)n->i;
	case NP_CFG_STR:
		return strtod(n->text, NULL);
	default:
		return def;
	}
}

const char *
np_cfg_provider_driver(const struct np_cfg_node *prov)
{
	return np_cfg_str(prov, "driver", "openstack");
}

/* ---- ZooKeeper host string ------------------------------------------------------- */

char *
np_cfg_zk_hosts(const struct np_zk_server *servers, size_t n)
{
	size_t i, len = 0, cap = 64;
	char *out;

	if (n == 0)
		return NULL;
	if ((out = malloc(cap)) == NULL)
		np_cfg_oom();
	out[0] = '\0';
	for (i = 0; i < n; i++) {
		char host[INET6_ADDRSTRLEN + 2], item[600];
		unsigned char a6[16];
		char norm[INET6_ADDRSTRLEN];
		size_t il;

		if (inet_pton(AF_INET6, servers[i].host, a6) == 1 &&
		    inet_ntop(AF_INET6, a6, norm, sizeof(norm)) != NULL)
			snprintf(host, sizeof(host), "[%s]", norm);
		else
			host[0] = '\0';
		il = (size_t)snprintf(item, sizeof(item), "%s%s:%d", i ? "," : "",
				      host[0] ? host : servers[i].host, servers[i].port);
		if (il >= sizeof(item))
			il = sizeof(item) - 1;
		while (len + il + 1 > cap)
			cap *= 2;
		if ((out = realloc(out, cap)) == NULL)
			np_cfg_oom();
		memcpy(out + len, item, il + 1);
		len += il;
	}
	if (servers[0].chroot != NULL && servers[0].chroot[0]) {
		size_t cl = strlen(servers[0].chroot);

		if ((out = realloc(out, len + cl + 1)) == NULL)
			np_cfg_oom();
		memcpy(out + len, servers[0].chroot, cl + 1);
	}
	return out;
}

/* ---- loading ------------------------------------------------------------------------ */

void
np_cfg_free(struct np_config *cfg)
{
	size_t i;

	if (cfg == NULL)
		return;
	free(cfg->path);
	free(cfg->secure_path);
	np_cfg_zk_servers_free(cfg);
	free(cfg->zk_hosts);
	free(cfg->zk_tls_ca);
	free(cfg->zk_tls_cert);
	free(cfg->zk_tls_key);
	for (i = 0; i < cfg->nlabels; i++)
		free(cfg->labels[i].name);
	free(cfg->labels);
	for (i = 0; i < cfg->nproviders; i++)
		np_cfg_provider_free(&cfg->providers[i]);
	free(cfg->providers);
	for (i = 0; i < cfg->ndiskimages; i++)
		np_cfg_diskimage_free(&cfg->diskimages[i]);
	free(cfg->diskimages);
	for (i = 0; i < cfg->ntenant_limits; i++) {
		free(cfg->tenant_limits[i].tenant);
		json_decref(cfg->tenant_limits[i].limits);
	}
	free(cfg->tenant_limits);
	free(cfg->webapp_listen_address);
	free(cfg->elements_dir);
	free(cfg->images_dir);
	free(cfg->build_log_dir);
	free(cfg->nodepoold.control_socket);
	free(cfg->nodepoold.pid_file);
	np_cfg_doc_free(cfg->doc);
	np_cfg_doc_free(cfg->secure_doc);
	free(cfg);
}

static int
finish(struct np_config *cfg, struct np_cfg_errors *e, struct np_config **out,
       struct np_cfg_errors **errs)
{
	if (np_cfg_errors_count(e) > 0) {
		np_cfg_free(cfg);
		*out = NULL;
		if (errs != NULL)
			*errs = e;
		else
			np_cfg_errors_free(e);
		return -1;
	}
	np_cfg_errors_free(e);
	*out = cfg;
	if (errs != NULL)
		*errs = NULL;
	return 0;
}

int
np_cfg_load_buffer(const char *name, const char *buf, size_t len, const char *secure_name,
		   const char *secure, size_t secure_len, struct np_config **out,
		   struct np_cfg_errors **errs)
{
	struct np_cfg_errors *e = np_cfg_errors_new();
	struct np_config *cfg = calloc(1, sizeof(*cfg));
	struct np_cfg_path path;
	const struct np_cfg_node *root;
	size_t i;

	if (cfg == NULL)
		np_cfg_oom();
	memset(&path, 0, sizeof(path));
	cfg->path = np_cfg_strdup(name ? name : "<config>");
	cfg->doc = np_cfg_parse(cfg->path, buf, len, e);
	if (secure != NULL) {
		cfg->secure_path = np_cfg_strdup(secure_name ? secure_name : "<secure>");
		cfg->secure_doc = np_cfg_parse(cfg->secure_path, secure, secure_len, e);
	}
	if (cfg->doc != NULL) {
		root = np_cfg_doc_root(cfg->doc);
		np_cfg_schema_validate(&np_cfg_schema_top, root, &path, e);
		np_cfg_check_references(root, e);
	}
	if (cfg->secure_doc != NULL) {
		struct np_drv_check c;

		root = np_cfg_doc_root(cfg->secure_doc);
		np_cfg_schema_validate(&np_cfg_schema_secure, root, &path, e);
		memset(&c, 0, sizeof(c));
		c.root = root;
		c.errs = e;
		np_cfg_check_zk_servers(&c, root);
	}
	if (np_cfg_errors_count(e) > 0)
		return finish(cfg, e, out, errs);

	np_cfg_config_build(cfg, np_cfg_doc_root(cfg->doc));
	if (cfg->secure_doc != NULL)
		np_cfg_secure_merge(cfg, np_cfg_doc_root(cfg->secure_doc), e);
	cfg->zk_hosts = np_cfg_zk_hosts(cfg->zk_servers, cfg->nzk_servers);
	for (i = 0; i < cfg->nproviders; i++)
		np_cfg_fingerprint(cfg, &cfg->providers[i]);
	return finish(cfg, e, out, errs);
}

/* Read a whole file; a missing one is retried twice 0.5 s apart (as
 * Nodepool's openConfig, for editors that replace the file). */
static char *
read_file(const char *path, size_t *len, struct np_cfg_errors *e)
{
	FILE *f = NULL;
	char *buf = NULL;
	size_t cap = 0, n = 0;
	int tries;

	for (tries = 0; tries < 3; tries++) {
		if ((f = fopen(path, "rb")) != NULL || errno != ENOENT)
			break;
		if (tries < 2) {
			struct timespec ts = {0, 500000000};

			nanosleep(&ts, NULL);
		}
	}
	if (f == NULL) {
		np_cfg_errors_add(e, path, 0, 0, "", "cannot open: %s", strerror(errno));
		return NULL;
	}
	for (;;) {
		size_t r;

		if (n == cap) {
			cap = cap ? cap * 2 : 65536;
			if (cap > (32u << 20)) {
				np_cfg_errors_add(e, path, 0, 0, "", "file too large");
				free(buf);
				fclose(f);
				return NULL;
			}
			if ((buf = realloc(buf, cap)) == NULL)
				np_cfg_oom();
		}
		r = fread(buf + n, 1, cap - n, f);
		n += r;
		if (r == 0)
			break;
	}
	if (ferror(f)) {
		np_cfg_errors_add(e, path, 0, 0, "", "cannot read: %s", strerror(errno));
		free(buf);
		fclose(f);
		return NULL;
	}
	fclose(f);
	*len = n;
	return buf ? buf : calloc(1, 1);
}

int
np_cfg_load(const char *path, const char *secure_path, struct np_config **cfg,
	    struct np_cfg_errors **errs)
{
	struct np_cfg_errors *e = np_cfg_errors_new();
	char *buf, *sbuf = NULL;
	size_t len = 0, slen = 0;
	int rc;

	buf = read_file(path, &len, e);
	if (secure_path != NULL)
		sbuf = read_file(secure_path, &slen, e);
	if (buf == NULL || (secure_path != NULL && sbuf == NULL)) {
		free(buf);
		free(sbuf);
		*cfg = NULL;
		if (errs != NULL)
			*errs = e;
		else
			np_cfg_errors_free(e);
		return -1;
	}
	np_cfg_errors_free(e);
	rc = np_cfg_load_buffer(path, buf, len, secure_path, sbuf, slen, cfg, errs);
	free(buf);
	free(sbuf);
	return rc;
}

/* ---- lookups -------------------------------------------------------------------------- */

const struct np_provider *
np_cfg_provider(const struct np_config *cfg, const char *name)
{
	size_t i;

	for (i = 0; cfg && i < cfg->nproviders; i++)
		if (strcmp(cfg->providers[i].name, name) == 0)
			return &cfg->providers[i];
	return NULL;
}

const struct np_label *
np_cfg_label(const struct np_config *cfg, const char *name)
{
	size_t i;

	for (i = 0; cfg && i < cfg->nlabels; i++)
		if (strcmp(cfg->labels[i].name, name) == 0)
			return &cfg->labels[i];
	return NULL;
}

const struct np_diskimage *
np_cfg_diskimage(const struct np_config *cfg, const char *name)
{
	size_t i;

	for (i = 0; cfg && i < cfg->ndiskimages; i++)
		if (strcmp(cfg->diskimages[i].name, name) == 0)
			return &cfg->diskimages[i];
	return NULL;
}

const struct np_pool *
np_provider_pool(const struct np_provider *p, const char *name)
{
	size_t i;

	for (i = 0; p && i < p->npools; i++)
		if (strcmp(p->pools[i].name, name) == 0)
			return &p->pools[i];
	return NULL;
}
