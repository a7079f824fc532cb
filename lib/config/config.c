/*
 * nodepool.yaml loading (lib/config/config.h): read, parse, validate against the
 * schemas, cross-check references, merge secure.conf, build the typed
 * configuration, and cut per-provider slices with their fingerprints.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stdint.h>

#include "config.h"
#include "config_int.h"
#include "drvtraits.h"

#define DEFAULT_ZK_PORT		  2281
#define DEFAULT_IMAGE_NAME_FORMAT "{image_name}-{timestamp}"
#define NP_CONFIG_MAX_PARENTS	  32 /* levels of diskimage parents */

/* ---- small helpers ------------------------------------------------------ */

static void
strv_push(struct np_cfg_strv *sv, const char *s)
{
	char **nv = realloc(sv->v, (sv->n + 1) * sizeof(*nv));

	if (nv == NULL)
		cfg_oom();
	sv->v = nv;
	sv->v[sv->n++] = cfg_strdup(s);
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

static int
strp_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sort and drop duplicates (a Python set, printed sorted). */
static void
strv_sort_unique(struct np_cfg_strv *sv)
{
	size_t i, j;

	if (sv->n < 2)
		return;
	qsort(sv->v, sv->n, sizeof(*sv->v), strp_cmp);
	for (i = 1, j = 1; i < sv->n; i++) {
		if (strcmp(sv->v[i], sv->v[j - 1]) == 0)
			free(sv->v[i]);
		else
			sv->v[j++] = sv->v[i];
	}
	sv->n = j;
}

/* A list node's strings appended to sv (non-strings skipped). */
static void
strv_from_seq(struct np_cfg_strv *sv, const struct np_cfg_node *seq)
{
	size_t i;

	if (seq == NULL || seq->kind != NP_CFG_SEQ)
		return;
	for (i = 0; i < seq->n; i++)
		if (seq->items[i]->kind == NP_CFG_STR)
			strv_push(sv, seq->items[i]->text);
}

static const struct np_cfg_node *
get_seq(const struct np_cfg_node *map, const char *key)
{
	const struct np_cfg_node *n = np_cfg_get(map, key);

	return n && n->kind == NP_CFG_SEQ ? n : NULL;
}

static const struct np_cfg_node *
get_map(const struct np_cfg_node *map, const char *key)
{
	const struct np_cfg_node *n = np_cfg_get(map, key);

	return n && n->kind == NP_CFG_MAP ? n : NULL;
}

static char *
dup_str(const struct np_cfg_node *map, const char *key, const char *def)
{
	return cfg_strdup(np_cfg_str(map, key, def));
}

/* A mapping as a JSON object; an empty object when absent. */
static json_t *
json_obj_of(const struct np_cfg_node *map, const char *key)
{
	const struct np_cfg_node *n = get_map(map, key);
	json_t *j = n ? np_cfg_to_json(n) : json_object();

	if (j == NULL)
		cfg_oom();
	return j;
}

/* v.Coerce(float): int, float, bool or numeric string. */
static double
coerce_num(const struct np_cfg_node *map, const char *key, double def)
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

static const char *
provider_driver(const struct np_cfg_node *prov)
{
	return np_cfg_str(prov, "driver", "openstack");
}

/* ---- cross checks ------------------------------------------------------------
 *
 * They run on the raw tree even when the schema found problems (every error
 * at once), so every access is defensive.
 */

/*
 * A list of {name: ...} entries indexed by name: sorted by (name, position),
 * so lookups are O(log n) and a name's first definition comes first. Lists
 * can be long (a 16 MiB file), so nothing here is quadratic.
 */
struct name_ent {
	const char *name;
	size_t pos;
	const struct np_cfg_node *item;
};

struct name_index {
	struct name_ent *v;
	size_t n;
};

static int
name_ent_cmp(const void *pa, const void *pb)
{
	const struct name_ent *a = pa, *b = pb;
	int c = strcmp(a->name, b->name);

	if (c != 0)
		return c;
	return a->pos < b->pos ? -1 : a->pos > b->pos;
}

static void
nix_build(struct name_index *ix, const struct np_cfg_node *seq)
{
	size_t i;

	ix->v = NULL;
	ix->n = 0;
	if (seq == NULL || seq->kind != NP_CFG_SEQ || seq->n == 0)
		return;
	if ((ix->v = malloc(seq->n * sizeof(*ix->v))) == NULL)
		cfg_oom();
	for (i = 0; i < seq->n; i++) {
		const char *name = np_cfg_str(seq->items[i], "name", NULL);

		if (name == NULL)
			continue;
		ix->v[ix->n].name = name;
		ix->v[ix->n].pos = i;
		ix->v[ix->n].item = seq->items[i];
		ix->n++;
	}
	qsort(ix->v, ix->n, sizeof(*ix->v), name_ent_cmp);
}

static void
nix_free(struct name_index *ix)
{
	free(ix->v);
	ix->v = NULL;
	ix->n = 0;
}

/* The first entry named name, or NULL. */
static const struct name_ent *
nix_find_ent(const struct name_index *ix, const char *name)
{
	size_t lo = 0, hi = ix->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(ix->v[mid].name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < ix->n && strcmp(ix->v[lo].name, name) == 0 ? &ix->v[lo] : NULL;
}

static const struct np_cfg_node *
nix_find(const struct name_index *ix, const char *name)
{
	const struct name_ent *e = nix_find_ent(ix, name);

	return e ? e->item : NULL;
}

struct np_drv_check {
	const struct np_cfg_node *root;
	struct np_config_errors *errs;
	struct cfg_path path;
	struct name_index labels;			      /* top-level labels */
	struct name_index diskimages;			      /* top-level diskimages */
	struct name_index prov_cloud_images, prov_diskimages; /* the provider being checked */
};

/* Error at list[i].name (the name's own position). */
static void err_at_name(struct np_drv_check *c, const struct np_cfg_node *item, size_t i,
			const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void
err_at_name(struct np_drv_check *c, const struct np_cfg_node *item, size_t i, const char *fmt, ...)
{
	const struct np_cfg_node *name = np_cfg_get(item, "name");
	size_t o1 = cfg_path_idx(&c->path, i), o2 = cfg_path_key(&c->path, "name");
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		cfg_oom();
	va_end(ap);
	cfg_err(c->errs, name ? name : item, &c->path, "%s", msg);
	free(msg);
	cfg_path_pop(&c->path, o2);
	cfg_path_pop(&c->path, o1);
}

/* Names in a list of {name: ...} must be unique. what: "label", "pool"... */
static void
check_unique_names(struct np_drv_check *c, const struct np_cfg_node *seq, const char *what)
{
	struct name_index ix;
	const struct np_cfg_node **first;
	size_t i, j;

	nix_build(&ix, seq);
	if (ix.n < 2) {
		nix_free(&ix);
		return;
	}
	if ((first = calloc(seq->n, sizeof(*first))) == NULL)
		cfg_oom();
	for (i = 0; i < ix.n; i = j)
		for (j = i + 1; j < ix.n && strcmp(ix.v[i].name, ix.v[j].name) == 0; j++)
			first[ix.v[j].pos] = ix.v[i].item;
	for (i = 0; i < seq->n; i++)
		if (first[i] != NULL)
			err_at_name(c, seq->items[i], i, "%s %s already defined (line %d)", what,
				    np_cfg_str(seq->items[i], "name", "?"),
				    np_cfg_get(first[i], "name")->line);
	free(first);
	nix_free(&ix);
}

/* A top-level diskimage a provider may use: defined and not abstract. */
static const struct np_cfg_node *
top_diskimage(struct np_drv_check *c, const char *name, int *abstract)
{
	const struct np_cfg_node *d = nix_find(&c->diskimages, name);

	*abstract = d ? np_cfg_bool(d, "abstract", 0) : 0;
	return d;
}

static int
top_label_exists(struct np_drv_check *c, const char *name)
{
	return nix_find(&c->labels, name) != NULL;
}

static void diskimage_err(struct np_drv_check *c, const struct np_cfg_node *d, size_t i,
			  const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void
diskimage_err(struct np_drv_check *c, const struct np_cfg_node *d, size_t i, const char *fmt, ...)
{
	size_t o1 = cfg_path_idx(&c->path, i), o2 = cfg_path_key(&c->path, "parent");
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		cfg_oom();
	va_end(ap);
	cfg_err(c->errs, np_cfg_get(d, "parent"), &c->path, "%s", msg);
	free(msg);
	cfg_path_pop(&c->path, o2);
	cfg_path_pop(&c->path, o1);
}

static void
check_diskimages(struct np_drv_check *c)
{
	const struct np_cfg_node *seq = get_seq(c->root, "diskimages");
	size_t i, old;

	if (seq == NULL)
		return;
	old = cfg_path_key(&c->path, "diskimages");
	check_unique_names(c, seq, "diskimage");
	for (i = 0; i < seq->n; i++) {
		const struct np_cfg_node *d = seq->items[i], *cur;
		const struct np_cfg_node *seen[NP_CONFIG_MAX_PARENTS + 1];
		const char *parent = np_cfg_str(d, "parent", NULL);
		const char *name = np_cfg_str(d, "name", "?");
		size_t steps = 0, k;
		int loop = 0;

		if (parent == NULL)
			continue;
		if (nix_find(&c->diskimages, parent) == NULL) {
			diskimage_err(c, d, i, "diskimage %s has non-existent parent: %s", name,
				      parent);
			continue;
		}
		/* follow the chain: a loop comes back to an image already seen */
		for (cur = d; cur != NULL && !loop && steps <= NP_CONFIG_MAX_PARENTS; steps++) {
			const char *p = np_cfg_str(cur, "parent", NULL);

			for (k = 0; k < steps; k++)
				if (seen[k] == cur)
					loop = 1;
			seen[steps] = cur;
			cur = p ? nix_find(&c->diskimages, p) : NULL;
		}
		if (loop)
			diskimage_err(c, d, i, "diskimage %s has a parent loop", name);
		else if (cur != NULL)
			diskimage_err(c, d, i, "diskimage %s has more than %d levels of parents",
				      name, NP_CONFIG_MAX_PARENTS);
	}
	cfg_path_pop(&c->path, old);
}

/* All servers of one list must agree on the chroot. */
static void
check_zk_servers(struct np_drv_check *c, const struct np_cfg_node *doc)
{
	const struct np_cfg_node *seq = get_seq(doc, "zookeeper-servers");
	const char *first = NULL;
	size_t i, old;

	if (seq == NULL)
		return;
	old = cfg_path_key(&c->path, "zookeeper-servers");
	for (i = 0; i < seq->n; i++) {
		const char *ch = np_cfg_str(seq->items[i], "chroot", "");

		if (i == 0) {
			first = ch;
		} else if (strcmp(first, ch) != 0) {
			size_t o1 = cfg_path_idx(&c->path, i);

			cfg_err(
			    c->errs, seq->items[i], &c->path,
			    "every ZooKeeper server must use the same chroot ('%s' here, '%s' on "
			    "the first)",
			    ch, first);
			cfg_path_pop(&c->path, o1);
		}
	}
	cfg_path_pop(&c->path, old);
}

/* path is at providers[i]; checks a provider's diskimages[] (top-level). */
static void
check_provider_diskimages(struct np_drv_check *c, const struct np_cfg_node *prov, const char *pname)
{
	const struct np_cfg_node *seq = get_seq(prov, "diskimages");
	size_t i, old;

	if (seq == NULL)
		return;
	old = cfg_path_key(&c->path, "diskimages");
	check_unique_names(c, seq, "diskimage");
	for (i = 0; i < seq->n; i++) {
		const char *name = np_cfg_str(seq->items[i], "name", NULL);
		int abstract;

		if (name == NULL)
			continue;
		if (top_diskimage(c, name, &abstract) == NULL)
			err_at_name(c, seq->items[i], i,
				    "diskimage %s in provider %s is not defined in the main "
				    "diskimages list",
				    name, pname);
		else if (abstract)
			err_at_name(
			    c, seq->items[i], i,
			    "diskimage %s in provider %s is abstract and cannot be uploaded", name,
			    pname);
	}
	cfg_path_pop(&c->path, old);
}

/* ---- what driver traits' checks may use (drvtraits.h) ------------------------ */

static void
vcheck_err(struct np_drv_check *c, const struct np_cfg_node *at, const char *key, const char *fmt,
	   va_list ap)
{
	size_t old = c->path.len;
	char *msg;

	if (vasprintf(&msg, fmt, ap) < 0)
		cfg_oom();
	if (key != NULL) {
		old = cfg_path_key(&c->path, key);
		at = np_cfg_get(at, key);
	}
	cfg_err(c->errs, at, &c->path, "%s", msg);
	free(msg);
	cfg_path_pop(&c->path, old);
}

void
np_drv_check_err(struct np_drv_check *c, const struct np_cfg_node *at, const char *key,
		 const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vcheck_err(c, at, key, fmt, ap);
	va_end(ap);
}

size_t
np_drv_check_key(struct np_drv_check *c, const char *key)
{
	return cfg_path_key(&c->path, key);
}

size_t
np_drv_check_idx(struct np_drv_check *c, size_t i)
{
	return cfg_path_idx(&c->path, i);
}

void
np_drv_check_pop(struct np_drv_check *c, size_t old)
{
	cfg_path_pop(&c->path, old);
}

int
np_drv_check_top_label(const struct np_drv_check *c, const char *name)
{
	return nix_find(&c->labels, name) != NULL;
}

static int
pool_item_cmp(const void *pa, const void *pb)
{
	const struct np_drv_pool_item *a = pa, *b = pb;
	int c = strcmp(a->key, b->key);

	if (c != 0)
		return c;
	return a->order < b->order ? -1 : a->order > b->order;
}

struct np_drv_pool_item *
np_drv_pool_items(const struct np_cfg_node *prov, const char *list, const char *key, size_t *n)
{
	const struct np_cfg_node *pools = get_seq(prov, "pools");
	struct np_drv_pool_item *v = NULL;
	size_t i, j, cap = 0;

	*n = 0;
	for (i = 0; pools && i < pools->n; i++) {
		const struct np_cfg_node *seq = get_seq(pools->items[i], list);

		for (j = 0; seq && j < seq->n; j++) {
			const char *k = np_cfg_str(seq->items[j], key, NULL);

			if (k == NULL)
				continue;
			if (*n == cap) {
				cap = cap ? cap * 2 : 16;
				if ((v = realloc(v, cap * sizeof(*v))) == NULL)
					cfg_oom();
			}
			v[*n].item = seq->items[j];
			v[*n].key = k;
			v[*n].pool = i;
			v[*n].idx = j;
			v[*n].order = *n;
			(*n)++;
		}
	}
	if (*n > 1)
		qsort(v, *n, sizeof(*v), pool_item_cmp);
	return v;
}

size_t
np_drv_check_pool_item(struct np_drv_check *c, const struct np_drv_pool_item *it, const char *list)
{
	size_t old = cfg_path_key(&c->path, "pools");

	cfg_path_idx(&c->path, it->pool);
	cfg_path_key(&c->path, list);
	cfg_path_idx(&c->path, it->idx);
	return old;
}

void
np_cfg_static_node_labels(const struct np_cfg_node *node, struct np_cfg_strv *out)
{
	const struct np_cfg_node *l = np_cfg_get(node, "labels");

	if (l == NULL)
		return;
	if (l->kind == NP_CFG_STR) {
		const char *p = l->text;

		while (*p) {
			size_t n;
			char *w;

			while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\f' ||
			       *p == '\v')
				p++;
			n = strcspn(p, " \t\n\r\f\v");
			if (n == 0)
				break;
			w = strndup(p, n);
			if (w == NULL)
				cfg_oom();
			strv_push(out, w);
			free(w);
			p += n;
		}
	} else {
		strv_from_seq(out, l);
	}
}

int
np_cfg_static_port(const struct np_cfg_node *node)
{
	return (int)np_cfg_int(node, "connection-port", np_cfg_int(node, "ssh-port", 22));
}

/* ---- per provider ------------------------------------------------------------ */

/* path is at ...labels[k]: the label's references, then its driver's checks. */
static void
check_label(struct np_drv_check *c, const struct np_drv_traits *t, const struct np_cfg_node *prov,
	    const struct np_cfg_node *pool, const struct np_cfg_node *label)
{
	const char *pname = np_cfg_str(prov, "name", "?");
	const char *lname = np_cfg_str(label, "name", "?");
	const char *di = np_cfg_str(label, "diskimage", NULL);
	const char *ci = np_cfg_str(label, "cloud-image", NULL);
	int abstract;

	if (ci != NULL && nix_find(&c->prov_cloud_images, ci) == NULL)
		np_drv_check_err(
		    c, label, "cloud-image",
		    "cloud-image %s does not exist in provider %s but is referenced in label %s",
		    ci, pname, lname);
	if (di != NULL) {
		if (t->flags & NP_DRV_LABEL_TOP_DISKIMAGE) {
			if (top_diskimage(c, di, &abstract) == NULL)
				np_drv_check_err(c, label, "diskimage",
						 "label %s in provider %s uses diskimage %s which "
						 "is not defined in "
						 "the main diskimages list",
						 lname, pname, di);
			else if (abstract)
				np_drv_check_err(
				    c, label, "diskimage",
				    "label %s in provider %s uses diskimage %s which is abstract",
				    lname, pname, di);
		} else if (nix_find(&c->prov_diskimages, di) == NULL) {
			np_drv_check_err(c, label, "diskimage",
					 "diskimage %s does not exist in provider %s but is "
					 "referenced in label %s",
					 di, pname, lname);
		}
	}
	if (t->check_label != NULL)
		t->check_label(c, prov, pool, label);
}

/* path at providers[i]. */
static void
check_provider(struct np_drv_check *c, const struct np_cfg_node *prov)
{
	const struct np_drv_traits *t = np_drv_traits_find(provider_driver(prov));
	const char *pname = np_cfg_str(prov, "name", "?");
	const struct np_cfg_node *pools = get_seq(prov, "pools");
	size_t i, j, old;

	if (t == NULL)
		return; /* reported by the schema */
	nix_build(&c->prov_cloud_images, get_seq(prov, "cloud-images"));
	nix_build(&c->prov_diskimages, get_seq(prov, "diskimages"));
	if (t->flags & NP_DRV_MANAGES_IMAGES)
		check_provider_diskimages(c, prov, pname);
	if (get_seq(prov, "cloud-images") != NULL) {
		old = cfg_path_key(&c->path, "cloud-images");
		check_unique_names(c, get_seq(prov, "cloud-images"), "cloud-image");
		cfg_path_pop(&c->path, old);
	}
	if (t->check_provider != NULL)
		t->check_provider(c, prov);
	if (pools == NULL)
		goto out;
	old = cfg_path_key(&c->path, "pools");
	check_unique_names(c, pools, "pool");
	for (i = 0; i < pools->n; i++) {
		const struct np_cfg_node *pool = pools->items[i];
		const struct np_cfg_node *labels = get_seq(pool, "labels");
		size_t o1 = cfg_path_idx(&c->path, i), o2;

		if (t->check_pool != NULL)
			t->check_pool(c, prov, pool);
		if (labels != NULL) {
			o2 = cfg_path_key(&c->path, "labels");
			check_unique_names(c, labels, "label");
			for (j = 0; j < labels->n; j++) {
				const struct np_cfg_node *l = labels->items[j];
				const char *lname = np_cfg_str(l, "name", NULL);
				size_t o3;

				if (l->kind != NP_CFG_MAP)
					continue;
				if (lname != NULL && !top_label_exists(c, lname))
					err_at_name(
					    c, l, j,
					    "label %s in provider %s not in top-level labels",
					    lname, pname);
				o3 = cfg_path_idx(&c->path, j);
				check_label(c, t, prov, pool, l);
				cfg_path_pop(&c->path, o3);
			}
			cfg_path_pop(&c->path, o2);
		}
		cfg_path_pop(&c->path, o1);
	}
	cfg_path_pop(&c->path, old);
out:
	nix_free(&c->prov_cloud_images);
	nix_free(&c->prov_diskimages);
}

static void
check_references(const struct np_cfg_node *root, struct np_config_errors *errs)
{
	struct np_drv_check c;
	const struct np_cfg_node *provs;
	size_t i, old;

	memset(&c, 0, sizeof(c));
	c.root = root;
	c.errs = errs;
	if (root->kind != NP_CFG_MAP)
		return;
	nix_build(&c.labels, get_seq(root, "labels"));
	nix_build(&c.diskimages, get_seq(root, "diskimages"));
	if (get_seq(root, "labels") != NULL) {
		old = cfg_path_key(&c.path, "labels");
		check_unique_names(&c, get_seq(root, "labels"), "label");
		cfg_path_pop(&c.path, old);
	}
	check_diskimages(&c);
	check_zk_servers(&c, root);
	if ((provs = get_seq(root, "providers")) == NULL)
		goto out;
	old = cfg_path_key(&c.path, "providers");
	check_unique_names(&c, provs, "provider");
	for (i = 0; i < provs->n; i++) {
		size_t o1 = cfg_path_idx(&c.path, i);

		if (provs->items[i]->kind == NP_CFG_MAP)
			check_provider(&c, provs->items[i]);
		cfg_path_pop(&c.path, o1);
	}
	cfg_path_pop(&c.path, old);
out:
	nix_free(&c.labels);
	nix_free(&c.diskimages);
}

/* ---- the typed configuration ------------------------------------------------- */

static void
zk_servers_build(struct np_config *cfg, const struct np_cfg_node *seq)
{
	size_t i;

	cfg->zk_servers = calloc(seq->n ? seq->n : 1, sizeof(*cfg->zk_servers));
	if (cfg->zk_servers == NULL)
		cfg_oom();
	cfg->nzk_servers = seq->n;
	for (i = 0; i < seq->n; i++) {
		const struct np_cfg_node *s = seq->items[i];

		cfg->zk_servers[i].host = dup_str(s, "host", "");
		cfg->zk_servers[i].port = (int)np_cfg_int(s, "port", DEFAULT_ZK_PORT);
		cfg->zk_servers[i].chroot = dup_str(s, "chroot", NULL);
	}
}

static void
zk_servers_free(struct np_config *cfg)
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
	cfg->zk_tls_ca = dup_str(tls, "ca", NULL);
	cfg->zk_tls_cert = dup_str(tls, "cert", NULL);
	cfg->zk_tls_key = dup_str(tls, "key", NULL);
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
		d->dib_cmd = cfg_strdup(s);
	}
	strv_from_seq(&d->elements, get_seq(src, "elements"));
	if ((n = get_map(src, "env-vars")) != NULL) {
		json_t *ev = np_cfg_to_json(n);

		json_object_update(d->env_vars, ev);
		json_decref(ev);
	}
	if ((n = get_seq(src, "formats")) != NULL && n->n > 0) {
		np_cfg_strv_free(&d->formats);
		strv_from_seq(&d->formats, n);
		strv_sort_unique(&d->formats);
	}
	if ((n = get_seq(src, "keep-formats")) != NULL && n->n > 0) {
		np_cfg_strv_free(&d->keep_formats);
		strv_from_seq(&d->keep_formats, n);
		strv_sort_unique(&d->keep_formats);
	}
	if ((n = np_cfg_get(src, "delete-after-upload")) != NULL && n->kind == NP_CFG_BOOL)
		d->delete_after_upload = (int)n->i;
	if (np_cfg_bool(src, "pause", 0))
		d->pause = 1;
	if (np_cfg_bool(src, "validate", 0))
		d->validate = 1;
	if ((s = np_cfg_str(src, "python-path", NULL)) != NULL && *s) {
		free(d->python_path);
		d->python_path = cfg_strdup(s);
	}
	if ((s = np_cfg_str(src, "shell-type", NULL)) != NULL && *s) {
		free(d->shell_type);
		d->shell_type = cfg_strdup(s);
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
			d->release = cfg_strdup(s);
		}
	}
	if ((s = np_cfg_str(src, "username", NULL)) != NULL && *s) {
		free(d->username);
		d->username = cfg_strdup(s);
	}
	json_decref(d->metadata);
	d->metadata = json_obj_of(src, "metadata");
}

static void
diskimage_build(struct np_diskimage *d, const struct name_index *ix, const struct np_cfg_node *img)
{
	const struct np_cfg_node *chain[NP_CONFIG_MAX_PARENTS + 1];
	size_t n = 0, i;
	const struct np_cfg_node *cur = img;

	memset(d, 0, sizeof(*d));
	d->name = dup_str(img, "name", "");
	d->parent = dup_str(img, "parent", NULL);
	d->dib_cmd = cfg_strdup("disk-image-create");
	d->env_vars = json_object();
	d->release = cfg_strdup("");
	d->rebuild_age = 24 * 60 * 60;
	d->build_timeout = 8 * 60 * 60;
	d->username = cfg_strdup("zuul");
	d->python_path = cfg_strdup("auto");
	d->metadata = json_object();
	d->raw = img;
	/* parents root first; the checks ruled out loops and missing parents */
	while (cur != NULL && n < sizeof(chain) / sizeof(chain[0])) {
		const char *p = np_cfg_str(cur, "parent", NULL);

		chain[n++] = cur;
		cur = p ? nix_find(ix, p) : NULL;
	}
	for (i = n; i-- > 0;)
		diskimage_apply(d, chain[i]);
}

static void
diskimage_free(struct np_diskimage *d)
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
	im->name = dup_str(raw, "name", "");
	im->pause = np_cfg_bool(raw, "pause", 0);
	im->config_drive = np_cfg_bool(raw, "config-drive", -1);
	im->validate = np_cfg_bool(raw, "validate", -1);
	im->image_id = dup_str(raw, "image-id", NULL);
	im->image_name = dup_str(raw, "image-name", NULL);
	im->connection_type = dup_str(raw, "connection-type", "ssh");
	im->connection_port =
	    (int)np_cfg_int(raw, "connection-port", default_port(im->connection_type));
	if (!cloud && top != NULL && (t->flags & NP_DRV_IMAGE_USER_FROM_DISKIMAGE)) {
		/* these take the user (and interpreter) from the diskimage itself */
		int interp = (t->flags & NP_DRV_IMAGE_INTERP_FROM_DISKIMAGE) != 0;

		im->username = cfg_strdup(top->username);
		im->python_path =
		    cfg_strdup(interp ? top->python_path : np_cfg_str(raw, "python-path", "auto"));
		im->shell_type =
		    interp ? cfg_strdup(top->shell_type) : dup_str(raw, "shell-type", NULL);
	} else {
		im->username = dup_str(raw, "username", !cloud && top ? top->username : NULL);
		im->python_path = dup_str(raw, "python-path", "auto");
		im->shell_type = dup_str(raw, "shell-type", NULL);
	}
	if (get_map(raw, "meta"))
		im->meta = json_obj_of(raw, "meta");
	else
		im->meta = json_obj_of(raw, "tags");
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
	pl->name = dup_str(raw, "name", "");
	pl->diskimage = dup_str(raw, "diskimage", NULL);
	pl->cloud_image = dup_str(raw, "cloud-image", NULL);
	pl->flavor_name = dup_str(raw, "flavor-name", NULL);
	pl->instance_type = dup_str(raw, "instance-type", NULL);
	pl->min_ram = np_cfg_int(raw, "min-ram", 0);
	pl->key_name = dup_str(raw, "key-name", NULL);
	pl->host_key_checking = np_cfg_bool(raw, "host-key-checking", pool->host_key_checking);
	pl->backing_label = dup_str(raw, "backing-label", NULL);
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
	sn->name = dup_str(raw, "name", "");
	np_cfg_static_node_labels(raw, &sn->labels);
	sn->username = dup_str(raw, "username", "zuul");
	sn->timeout = np_cfg_int(raw, "timeout", 5);
	if (hk != NULL && hk->kind == NP_CFG_STR && hk->text[0])
		strv_push(&sn->host_keys, hk->text);
	else
		strv_from_seq(&sn->host_keys, hk);
	sn->host_key_checking = np_cfg_bool(raw, "host-key-checking", 1);
	sn->connection_type = dup_str(raw, "connection-type", "ssh");
	sn->connection_port = np_cfg_static_port(raw);
	sn->shell_type = dup_str(raw, "shell-type", NULL);
	sn->python_path = dup_str(raw, "python-path", "auto");
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
	const struct np_cfg_node *labels = get_seq(raw, "labels");
	const struct np_cfg_node *nodes = get_seq(raw, "nodes");
	const struct np_cfg_node *n;
	int hkc_default = 1, internal_default = 0;
	size_t i;

	memset(pool, 0, sizeof(*pool));
	pool->raw = raw;
	pool->name = dup_str(raw, "name", "");
	/* as their upstream loaders, some drivers' pools inherit the provider's limits */
	pool->max_servers = np_cfg_int(
	    raw, "max-servers", t->flags & NP_DRV_POOL_INHERITS_MAX_SERVERS ? p->max_servers : -1);
	pool->max_cores = np_cfg_int(
	    raw, "max-cores", t->flags & NP_DRV_POOL_INHERITS_MAX_CORES_RAM ? p->max_cores : -1);
	pool->max_ram = np_cfg_int(raw, "max-ram",
				   t->flags & NP_DRV_POOL_INHERITS_MAX_CORES_RAM ? p->max_ram : -1);
	pool->max_volumes = np_cfg_int(raw, "max-volumes", -1);
	pool->max_volume_gb = np_cfg_int(raw, "max-volume-gb", -1);
	pool->max_resources = json_obj_of(prov_raw, "max-resources");
	if ((n = get_map(raw, "max-resources")) != NULL) {
		json_t *j = np_cfg_to_json(n);

		json_object_update(pool->max_resources, j);
		json_decref(j);
	}
	n = np_cfg_get(raw, "priority");
	pool->priority = n && n->kind == NP_CFG_INT ? n->i : p->priority;
	if ((n = get_map(raw, "node-attributes")) != NULL)
		pool->node_attributes = np_cfg_to_json(n);
	pool->ignore_provider_quota = np_cfg_bool(raw, "ignore-provider-quota", 0);
	strv_from_seq(&pool->azs, get_seq(raw, "availability-zones"));
	if (np_cfg_str(raw, "availability-zone", NULL) != NULL)
		strv_push(&pool->azs, np_cfg_str(raw, "availability-zone", NULL));
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
			cfg_oom();
		for (i = 0; i < labels->n; i++) {
			pool_label_build(&pool->labels[pool->nlabels++], labels->items[i], p, pool);
			strv_push(&pool->label_names, pool->labels[i].name);
		}
	}
	if ((t->flags & NP_DRV_STATIC_NODES) && nodes != NULL && nodes->n > 0) {
		pool->nodes = calloc(nodes->n, sizeof(*pool->nodes));
		if (pool->nodes == NULL)
			cfg_oom();
		for (i = 0; i < nodes->n; i++) {
			struct np_static_node *sn = &pool->nodes[pool->nnodes++];
			size_t k;

			static_node_build(sn, nodes->items[i]);
			for (k = 0; k < sn->labels.n; k++)
				strv_push(&pool->label_names, sn->labels.v[k]);
		}
		strv_sort_unique(&pool->label_names); /* a set, as StaticPool.labels */
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
		cfg_oom();
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
	const char *drv = provider_driver(raw);
	const struct np_drv_traits *t = typed_traits(drv);
	const struct np_cfg_node *seq, *n, *quota;
	size_t i;

	memset(p, 0, sizeof(*p));
	p->raw = raw;
	p->name = dup_str(raw, "name", "");
	p->driver = cfg_strdup(drv);
	p->max_concurrency = np_cfg_int(raw, "max-concurrency", -1);
	n = np_cfg_get(raw, "priority");
	p->priority_set = n && n->kind == NP_CFG_INT;
	p->priority = p->priority_set ? n->i : 100;
	p->launch_retries = np_cfg_int(raw, "launch-retries", 3);
	p->boot_timeout = np_cfg_int(raw, "boot-timeout", t->boot_timeout);
	p->launch_timeout = np_cfg_int(raw, "launch-timeout", 3600);
	p->rate = coerce_num(raw, "rate", t->rate);
	p->host_key_checking =
	    np_cfg_bool(raw, "host-key-checking", t->flags & NP_DRV_NO_HOST_KEY_CHECK ? 0 : 1);
	p->cloud = dup_str(raw, t->cloud_key ? t->cloud_key : "context", NULL);
	p->region = dup_str(raw, t->region_key ? t->region_key : "region-name", NULL);
	p->manage_images = (t->flags & NP_DRV_MANAGES_IMAGES) != 0;
	if (t->image_format != NULL)
		p->image_format = t->flags & NP_DRV_IMAGE_FORMAT_FIXED
				      ? cfg_strdup(t->image_format)
				      : dup_str(raw, "image-format", t->image_format);
	if (t->image_timeout_key != NULL)
		p->image_upload_timeout = np_cfg_int(raw, t->image_timeout_key, t->image_timeout);
	else
		p->image_upload_timeout = np_cfg_int(raw, "image-import-timeout", -1);
	if (t->image_name_format != NULL)
		p->image_name_format = cfg_strdup(t->image_name_format);
	else if (p->manage_images)
		p->image_name_format = dup_str(raw, "image-name-format", DEFAULT_IMAGE_NAME_FORMAT);
	p->post_upload_hook = dup_str(raw, "post-upload-hook", NULL);
	p->max_servers =
	    np_cfg_int(raw, t->max_servers_key ? t->max_servers_key : "max-servers", -1);
	p->max_cores = np_cfg_int(raw, "max-cores", -1);
	p->max_ram = np_cfg_int(raw, "max-ram", -1);
	p->boot_delay = np_cfg_num(raw, "boot-delay", 0);
	p->delete_delay = np_cfg_num(raw, "delete-delay", 0);
	p->failure_rate = np_cfg_num(raw, "failure-rate", 0);
	p->delete_failure_rate = np_cfg_num(raw, "delete-failure-rate", 0);
	quota = t->flags & NP_DRV_PROVIDER_QUOTA ? get_map(raw, "quota") : NULL;
	p->quota_instances = np_cfg_int(quota, "instances", -1);
	p->quota_cores = np_cfg_int(quota, "cores", -1);
	p->quota_ram = np_cfg_int(quota, "ram", -1);
	p->seed = np_cfg_int(raw, "seed", 0);

	if (p->manage_images && (seq = get_seq(raw, "diskimages")) != NULL && seq->n > 0) {
		p->diskimages = calloc(seq->n, sizeof(*p->diskimages));
		if (p->diskimages == NULL)
			cfg_oom();
		for (i = 0; i < seq->n; i++) {
			const char *name = np_cfg_str(seq->items[i], "name", "");

			provider_image_build(&p->diskimages[p->ndiskimages++], seq->items[i], t, 0,
					     typed_index_find(dix, name));
		}
	}
	if ((seq = get_seq(raw, "cloud-images")) != NULL && seq->n > 0) {
		p->cloud_images = calloc(seq->n, sizeof(*p->cloud_images));
		if (p->cloud_images == NULL)
			cfg_oom();
		for (i = 0; i < seq->n; i++)
			provider_image_build(&p->cloud_images[p->ncloud_images++], seq->items[i], t,
					     1, NULL);
	}
	if ((seq = get_seq(raw, "pools")) != NULL && seq->n > 0) {
		p->pools = calloc(seq->n, sizeof(*p->pools));
		if (p->pools == NULL)
			cfg_oom();
		for (i = 0; i < seq->n; i++)
			pool_build(&p->pools[p->npools++], seq->items[i], p, raw);
	}
}

static void
provider_free(struct np_provider *p)
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
		cfg_oom();
	for (i = 0; i < seq->n; i++) {
		const struct np_cfg_node *m = seq->items[i];
		struct np_tenant_limit *t = &cfg->tenant_limits[cfg->ntenant_limits++];

		t->tenant = dup_str(m, "tenant-name", "");
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
	s->control_socket = dup_str(m, "control-socket", "/run/nodepoold/nodepoold.sock");
	s->pid_file = dup_str(m, "pid-file", "/run/nodepoold/nodepoold.pid");
	s->restart_backoff_max = np_cfg_num(m, "restart-backoff-max", 60);
	s->request_lock_cleanup_age = np_cfg_num(m, "request-lock-cleanup-age", 8 * 3600);
	s->peer_takeover_delay = np_cfg_num(m, "peer-takeover-delay", 2);
	s->reload_on_change = np_cfg_bool(m, "reload-on-change", 1) != 0;
}

static void
config_build(struct np_config *cfg, const struct np_cfg_node *root)
{
	const struct np_cfg_node *seq, *n;
	size_t i;

	if ((seq = get_seq(root, "zookeeper-servers")) != NULL)
		zk_servers_build(cfg, seq);
	if ((n = get_map(root, "zookeeper-tls")) != NULL)
		zk_tls_build(cfg, n);
	cfg->zk_timeout = np_cfg_num(root, "zookeeper-timeout", 10.0);
	if ((seq = get_seq(root, "labels")) != NULL && seq->n > 0) {
		cfg->labels = calloc(seq->n, sizeof(*cfg->labels));
		if (cfg->labels == NULL)
			cfg_oom();
		for (i = 0; i < seq->n; i++) {
			struct np_label *l = &cfg->labels[cfg->nlabels++];

			l->raw = seq->items[i];
			l->name = dup_str(l->raw, "name", "");
			l->min_ready = np_cfg_int(l->raw, "min-ready", 0);
			l->max_ready_age = np_cfg_int(l->raw, "max-ready-age", 0);
		}
	}
	if ((seq = get_seq(root, "diskimages")) != NULL && seq->n > 0) {
		cfg->diskimages = calloc(seq->n, sizeof(*cfg->diskimages));
		if (cfg->diskimages == NULL)
			cfg_oom();
		struct name_index ix;

		nix_build(&ix, seq);
		for (i = 0; i < seq->n; i++)
			if (!np_cfg_bool(seq->items[i], "abstract", 0))
				diskimage_build(&cfg->diskimages[cfg->ndiskimages++], &ix,
						seq->items[i]);
		nix_free(&ix);
	}
	if ((seq = get_seq(root, "providers")) != NULL && seq->n > 0) {
		struct typed_index dix;

		typed_index_build(&dix, cfg);
		cfg->providers = calloc(seq->n, sizeof(*cfg->providers));
		if (cfg->providers == NULL)
			cfg_oom();
		for (i = 0; i < seq->n; i++)
			provider_build(&dix, &cfg->providers[cfg->nproviders++], seq->items[i]);
		free(dix.v);
	}
	cfg->max_hold_age = np_cfg_int(root, "max-hold-age", 0);
	if (cfg->max_hold_age < 0)
		cfg->max_hold_age = 0;
	if ((seq = get_seq(root, "tenant-resource-limits")) != NULL)
		tenant_limits_build(cfg, seq);
	n = get_map(root, "webapp");
	cfg->webapp_port = (int)np_cfg_int(n, "port", 8005);
	cfg->webapp_listen_address = dup_str(n, "listen_address", "0.0.0.0");
	cfg->webapp_max_connections = np_cfg_int(n, "max_connections", 64);
	cfg->webapp_max_connections_per_client = np_cfg_int(n, "max_connections_per_client", 8);
	cfg->webapp_request_timeout = np_cfg_num(n, "request_timeout", 10);
	cfg->webapp_max_response_size = np_cfg_int(n, "max_response_size", 32 << 20);
	cfg->elements_dir = dup_str(root, "elements-dir", NULL);
	cfg->images_dir = dup_str(root, "images-dir", NULL);
	cfg->build_log_dir = dup_str(root, "build-log-dir", "/var/log/nodepool/builds");
	cfg->build_log_retention = np_cfg_int(root, "build-log-retention", 7);
	nodepoold_build(&cfg->nodepoold, get_map(root, "nodepoold"));
}

/* secure.conf over the main file, as Nodepool's loadSecureConfig. */
static void
secure_merge(struct np_config *cfg, const struct np_cfg_node *sroot, struct np_config_errors *errs)
{
	const struct np_cfg_node *seq, *n;
	struct cfg_path path;
	size_t i, old;

	memset(&path, 0, sizeof(path));
	if (sroot->kind != NP_CFG_MAP)
		return;
	if ((seq = get_seq(sroot, "zookeeper-servers")) != NULL && seq->n > 0) {
		zk_servers_free(cfg);
		zk_servers_build(cfg, seq);
	}
	if ((n = get_map(sroot, "zookeeper-tls")) != NULL)
		zk_tls_build(cfg, n);
	if ((seq = get_seq(sroot, "diskimages")) == NULL)
		return;
	old = cfg_path_key(&path, "diskimages");
	for (i = 0; i < seq->n; i++) {
		const char *name = np_cfg_str(seq->items[i], "name", NULL);
		const struct np_cfg_node *ev = get_map(seq->items[i], "env-vars");
		struct np_diskimage *d = NULL;
		size_t k;

		if (name == NULL)
			continue;
		for (k = 0; k < cfg->ndiskimages; k++)
			if (strcmp(cfg->diskimages[k].name, name) == 0)
				d = &cfg->diskimages[k];
		if (d == NULL) {
			size_t o1 = cfg_path_idx(&path, i), o2 = cfg_path_key(&path, "name");

			cfg_err(errs, np_cfg_get(seq->items[i], "name"), &path,
				"unknown diskimage %s", name);
			cfg_path_pop(&path, o2);
			cfg_path_pop(&path, o1);
			continue;
		}
		if (ev != NULL) {
			json_t *j = np_cfg_to_json(ev);

			json_object_update(d->env_vars, j);
			json_decref(j);
		}
	}
	cfg_path_pop(&path, old);
}

/* ---- slices and fingerprints --------------------------------------------------- */

static json_t *
strv_json(const struct np_cfg_strv *sv)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; i < sv->n; i++)
		json_array_append_new(a, json_string(sv->v[i]));
	return a;
}

/* A resolved diskimage as a flat diskimages[] entry (no parent). */
static json_t *
diskimage_json(const struct np_diskimage *d)
{
	json_t *j = json_object();

	json_object_set_new(j, "name", json_string(d->name));
	json_object_set_new(j, "dib-cmd", json_string(d->dib_cmd));
	json_object_set_new(j, "elements", strv_json(&d->elements));
	json_object_set(j, "env-vars", d->env_vars);
	json_object_set_new(j, "formats", strv_json(&d->formats));
	json_object_set_new(j, "keep-formats", strv_json(&d->keep_formats));
	json_object_set_new(j, "delete-after-upload", json_boolean(d->delete_after_upload));
	json_object_set_new(j, "validate", json_boolean(d->validate));
	json_object_set_new(j, "pause", json_boolean(d->pause));
	json_object_set_new(j, "release", json_string(d->release));
	json_object_set_new(j, "rebuild-age", json_integer(d->rebuild_age));
	json_object_set_new(j, "build-timeout", json_integer(d->build_timeout));
	json_object_set_new(j, "username", json_string(d->username));
	json_object_set_new(j, "python-path", json_string(d->python_path));
	if (d->shell_type != NULL)
		json_object_set_new(j, "shell-type", json_string(d->shell_type));
	json_object_set(j, "metadata", d->metadata);
	return j;
}

static void
name_add(struct np_cfg_strv *sv, const char *s)
{
	if (s != NULL)
		strv_push(sv, s);
}

/* Is s in sv (sorted by strv_sort_unique)? */
static int
strv_sorted_has(const struct np_cfg_strv *sv, const char *s)
{
	return sv->n > 0 && bsearch(&s, sv->v, sv->n, sizeof(*sv->v), strp_cmp) != NULL;
}

json_t *
np_config_slice(const struct np_config *cfg, const char *provider_name)
{
	const struct np_provider *p = np_config_provider(cfg, provider_name);
	struct np_cfg_strv labels = {NULL, 0}, images = {NULL, 0};
	const struct np_cfg_node *root = np_cfg_doc_root(cfg->doc), *n;
	json_t *j, *a, *np;
	size_t i, k;

	if (p == NULL)
		return NULL;
	j = json_object();
	a = json_array();
	for (i = 0; i < cfg->nzk_servers; i++) {
		json_t *s = json_object();

		json_object_set_new(s, "host", json_string(cfg->zk_servers[i].host));
		json_object_set_new(s, "port", json_integer(cfg->zk_servers[i].port));
		if (cfg->zk_servers[i].chroot != NULL)
			json_object_set_new(s, "chroot", json_string(cfg->zk_servers[i].chroot));
		json_array_append_new(a, s);
	}
	json_object_set_new(j, "zookeeper-servers", a);
	if (cfg->zk_tls_ca != NULL)
		json_object_set_new(j, "zookeeper-tls",
				    json_pack("{s:s, s:s, s:s}", "ca", cfg->zk_tls_ca, "cert",
					      cfg->zk_tls_cert, "key", cfg->zk_tls_key));
	json_object_set_new(j, "zookeeper-timeout", json_real(cfg->zk_timeout));
	if ((n = np_cfg_get(root, "max-hold-age")) != NULL)
		json_object_set_new(j, "max-hold-age", np_cfg_to_json(n));
	if ((n = np_cfg_get(root, "tenant-resource-limits")) != NULL)
		json_object_set_new(j, "tenant-resource-limits", np_cfg_to_json(n));
	np = json_object();
	json_object_set_new(np, "cleanup-interval", json_real(cfg->nodepoold.cleanup_interval));
	json_object_set_new(np, "delete-interval", json_real(cfg->nodepoold.delete_interval));
	json_object_set_new(np, "stats-interval", json_real(cfg->nodepoold.stats_interval));
	json_object_set_new(np, "worker-status-timeout",
			    json_real(cfg->nodepoold.worker_status_timeout));
	json_object_set_new(np, "request-lock-cleanup-age",
			    json_real(cfg->nodepoold.request_lock_cleanup_age));
	json_object_set_new(np, "peer-takeover-delay",
			    json_real(cfg->nodepoold.peer_takeover_delay));
	/* control-socket, pid-file, restart-backoff-max are the supervisor's own:
	 * left out so that changing them restarts no worker */
	json_object_set_new(j, "nodepoold", np);

	/* the labels and diskimages this provider uses */
	for (i = 0; i < p->npools; i++) {
		for (k = 0; k < p->pools[i].label_names.n; k++)
			name_add(&labels, p->pools[i].label_names.v[k]);
		for (k = 0; k < p->pools[i].nlabels; k++)
			name_add(&images, p->pools[i].labels[k].diskimage);
	}
	for (i = 0; i < p->ndiskimages; i++)
		name_add(&images, p->diskimages[i].name);
	strv_sort_unique(&labels);
	strv_sort_unique(&images);
	a = json_array();
	for (i = 0; i < cfg->nlabels; i++)
		if (strv_sorted_has(&labels, cfg->labels[i].name))
			json_array_append_new(a, np_cfg_to_json(cfg->labels[i].raw));
	json_object_set_new(j, "labels", a);
	a = json_array();
	for (i = 0; i < cfg->ndiskimages; i++)
		if (strv_sorted_has(&images, cfg->diskimages[i].name))
			json_array_append_new(a, diskimage_json(&cfg->diskimages[i]));
	json_object_set_new(j, "diskimages", a);
	a = json_array();
	json_array_append_new(a, np_cfg_to_json(p->raw));
	json_object_set_new(j, "providers", a);
	np_cfg_strv_free(&labels);
	np_cfg_strv_free(&images);
	return j;
}

/* 64-bit FNV-1a of the canonical JSON of the provider's slice: a short
 * name for the slice in logs, not a decision (the supervisor compares the
 * slices themselves), so no cryptographic hash (nor OpenSSL in nodepoold). */
static void
fingerprint(const struct np_config *cfg, struct np_provider *p)
{
	json_t *slice = np_config_slice(cfg, p->name);
	char *text = json_dumps(slice, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENSURE_ASCII);
	uint64_t h = 0xcbf29ce484222325ULL;
	const unsigned char *c;

	if (text == NULL)
		cfg_oom();
	for (c = (const unsigned char *)text; *c != '\0'; c++) {
		h ^= *c;
		h *= 0x100000001b3ULL;
	}
	snprintf(p->fingerprint, sizeof(p->fingerprint), "%016llx", (unsigned long long)h);
	free(text);
	json_decref(slice);
}

/* ---- ZooKeeper host string ------------------------------------------------------- */

char *
np_config_zk_hosts(const struct np_zk_server *servers, size_t n)
{
	size_t i, len = 0, cap = 64;
	char *out;

	if (n == 0)
		return NULL;
	if ((out = malloc(cap)) == NULL)
		cfg_oom();
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
			cfg_oom();
		memcpy(out + len, item, il + 1);
		len += il;
	}
	if (servers[0].chroot != NULL && servers[0].chroot[0]) {
		size_t cl = strlen(servers[0].chroot);

		if ((out = realloc(out, len + cl + 1)) == NULL)
			cfg_oom();
		memcpy(out + len, servers[0].chroot, cl + 1);
	}
	return out;
}

/* ---- loading ------------------------------------------------------------------------ */

void
np_config_free(struct np_config *cfg)
{
	size_t i;

	if (cfg == NULL)
		return;
	free(cfg->path);
	free(cfg->secure_path);
	zk_servers_free(cfg);
	free(cfg->zk_hosts);
	free(cfg->zk_tls_ca);
	free(cfg->zk_tls_cert);
	free(cfg->zk_tls_key);
	for (i = 0; i < cfg->nlabels; i++)
		free(cfg->labels[i].name);
	free(cfg->labels);
	for (i = 0; i < cfg->nproviders; i++)
		provider_free(&cfg->providers[i]);
	free(cfg->providers);
	for (i = 0; i < cfg->ndiskimages; i++)
		diskimage_free(&cfg->diskimages[i]);
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
finish(struct np_config *cfg, struct np_config_errors *e, struct np_config **out,
       struct np_config_errors **errs)
{
	if (np_config_errors_count(e) > 0) {
		np_config_free(cfg);
		*out = NULL;
		if (errs != NULL)
			*errs = e;
		else
			np_config_errors_free(e);
		return -1;
	}
	np_config_errors_free(e);
	*out = cfg;
	if (errs != NULL)
		*errs = NULL;
	return 0;
}

int
np_config_load_buffer(const char *name, const char *buf, size_t len, const char *secure_name,
		      const char *secure, size_t secure_len, struct np_config **out,
		      struct np_config_errors **errs)
{
	struct np_config_errors *e = np_config_errors_new();
	struct np_config *cfg = calloc(1, sizeof(*cfg));
	struct cfg_path path;
	const struct np_cfg_node *root;
	size_t i;

	if (cfg == NULL)
		cfg_oom();
	memset(&path, 0, sizeof(path));
	cfg->path = cfg_strdup(name ? name : "<config>");
	cfg->doc = np_cfg_parse(cfg->path, buf, len, e);
	if (secure != NULL) {
		cfg->secure_path = cfg_strdup(secure_name ? secure_name : "<secure>");
		cfg->secure_doc = np_cfg_parse(cfg->secure_path, secure, secure_len, e);
	}
	if (cfg->doc != NULL) {
		root = np_cfg_doc_root(cfg->doc);
		sc_validate(&sc_top, root, &path, e);
		check_references(root, e);
	}
	if (cfg->secure_doc != NULL) {
		struct np_drv_check c;

		root = np_cfg_doc_root(cfg->secure_doc);
		sc_validate(&sc_secure, root, &path, e);
		memset(&c, 0, sizeof(c));
		c.root = root;
		c.errs = e;
		check_zk_servers(&c, root);
	}
	if (np_config_errors_count(e) > 0)
		return finish(cfg, e, out, errs);

	config_build(cfg, np_cfg_doc_root(cfg->doc));
	if (cfg->secure_doc != NULL)
		secure_merge(cfg, np_cfg_doc_root(cfg->secure_doc), e);
	cfg->zk_hosts = np_config_zk_hosts(cfg->zk_servers, cfg->nzk_servers);
	for (i = 0; i < cfg->nproviders; i++)
		fingerprint(cfg, &cfg->providers[i]);
	return finish(cfg, e, out, errs);
}

/* Read a whole file; a missing one is retried twice 0.5 s apart (as
 * Nodepool's openConfig, for editors that replace the file). */
static char *
read_file(const char *path, size_t *len, struct np_config_errors *e)
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
		np_config_errors_add(e, path, 0, 0, "", "cannot open: %s", strerror(errno));
		return NULL;
	}
	for (;;) {
		size_t r;

		if (n == cap) {
			cap = cap ? cap * 2 : 65536;
			if (cap > (32u << 20)) {
				np_config_errors_add(e, path, 0, 0, "", "file too large");
				free(buf);
				fclose(f);
				return NULL;
			}
			if ((buf = realloc(buf, cap)) == NULL)
				cfg_oom();
		}
		r = fread(buf + n, 1, cap - n, f);
		n += r;
		if (r == 0)
			break;
	}
	if (ferror(f)) {
		np_config_errors_add(e, path, 0, 0, "", "cannot read: %s", strerror(errno));
		free(buf);
		fclose(f);
		return NULL;
	}
	fclose(f);
	*len = n;
	return buf ? buf : calloc(1, 1);
}

int
np_config_load(const char *path, const char *secure_path, struct np_config **cfg,
	       struct np_config_errors **errs)
{
	struct np_config_errors *e = np_config_errors_new();
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
			np_config_errors_free(e);
		return -1;
	}
	np_config_errors_free(e);
	rc = np_config_load_buffer(path, buf, len, secure_path, sbuf, slen, cfg, errs);
	free(buf);
	free(sbuf);
	return rc;
}

/* ---- lookups -------------------------------------------------------------------------- */

const struct np_provider *
np_config_provider(const struct np_config *cfg, const char *name)
{
	size_t i;

	for (i = 0; cfg && i < cfg->nproviders; i++)
		if (strcmp(cfg->providers[i].name, name) == 0)
			return &cfg->providers[i];
	return NULL;
}

const struct np_label *
np_config_label(const struct np_config *cfg, const char *name)
{
	size_t i;

	for (i = 0; cfg && i < cfg->nlabels; i++)
		if (strcmp(cfg->labels[i].name, name) == 0)
			return &cfg->labels[i];
	return NULL;
}

const struct np_diskimage *
np_config_diskimage(const struct np_config *cfg, const char *name)
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
