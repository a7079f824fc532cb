/*
 * nodepool.yaml cross-checks (lib/config/config.h): references between
 * labels, diskimages and providers, unique names, ZooKeeper servers, and
 * the helpers driver traits' checks may use (drvtraits.h), as Nodepool's
 * config validator. They run on the raw tree after the schemas.
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

/* ---- cross checks ------------------------------------------------------------
 *
 * They run on the raw tree even when the schema found problems (every error
 * at once), so every access is defensive.
 */

static int
name_ent_cmp(const void *pa, const void *pb)
{
	const struct name_ent *a = pa, *b = pb;
	int c = strcmp(a->name, b->name);

	if (c != 0)
		return c;
	return a->pos < b->pos ? -1 : a->pos > b->pos;
}

void
np_cfg_nix_build(struct name_index *ix, const struct np_cfg_node *seq)
{
	size_t i;

	ix->v = NULL;
	ix->n = 0;
	if (seq == NULL || seq->kind != NP_CFG_SEQ || seq->n == 0)
		return;
	if ((ix->v = malloc(seq->n * sizeof(*ix->v))) == NULL)
		np_cfg_oom();
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

void
np_cfg_nix_free(struct name_index *ix)
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

const struct np_cfg_node *
np_cfg_nix_find(const struct name_index *ix, const char *name)
{
	const struct name_ent *e = nix_find_ent(ix, name);

	return e ? e->item : NULL;
}

/* Error at list[i].name (the name's own position). */
static void err_at_name(struct np_drv_check *c, const struct np_cfg_node *item, size_t i,
			const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void
err_at_name(struct np_drv_check *c, const struct np_cfg_node *item, size_t i, const char *fmt, ...)
{
	const struct np_cfg_node *name = np_cfg_get(item, "name");
	size_t o1 = np_cfg_path_idx(&c->path, i), o2 = np_cfg_path_key(&c->path, "name");
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		np_cfg_oom();
	va_end(ap);
	np_cfg_err(c->errs, name ? name : item, &c->path, "%s", msg);
	free(msg);
	np_cfg_path_pop(&c->path, o2);
	np_cfg_path_pop(&c->path, o1);
}

/* Names in a list of {name: ...} must be unique. what: "label", "pool"... */
static void
check_unique_names(struct np_drv_check *c, const struct np_cfg_node *seq, const char *what)
{
	struct name_index ix;
	const struct np_cfg_node **first;
	size_t i, j;

	np_cfg_nix_build(&ix, seq);
	if (ix.n < 2) {
		np_cfg_nix_free(&ix);
		return;
	}
	if ((first = calloc(seq->n, sizeof(*first))) == NULL)
		np_cfg_oom();
	for (i = 0; i < ix.n; i = j)
		for (j = i + 1; j < ix.n && strcmp(ix.v[i].name, ix.v[j].name) == 0; j++)
			first[ix.v[j].pos] = ix.v[i].item;
	for (i = 0; i < seq->n; i++)
		if (first[i] != NULL)
			err_at_name(c, seq->items[i], i, "%s %s already defined (line %d)", what,
				    np_cfg_str(seq->items[i], "name", "?"),
				    np_cfg_get(first[i], "name")->line);
	free(first);
	np_cfg_nix_free(&ix);
}

/* A top-level diskimage a provider may use: defined and not abstract. */
static const struct np_cfg_node *
top_diskimage(struct np_drv_check *c, const char *name, int *abstract)
{
	const struct np_cfg_node *d = np_cfg_nix_find(&c->diskimages, name);

	*abstract = d ? np_cfg_bool(d, "abstract", 0) : 0;
	return d;
}

static int
top_label_exists(struct np_drv_check *c, const char *name)
{
	return np_cfg_nix_find(&c->labels, name) != NULL;
}

static void diskimage_err(struct np_drv_check *c, const struct np_cfg_node *d, size_t i,
			  const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void
diskimage_err(struct np_drv_check *c, const struct np_cfg_node *d, size_t i, const char *fmt, ...)
{
	size_t o1 = np_cfg_path_idx(&c->path, i), o2 = np_cfg_path_key(&c->path, "parent");
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		np_cfg_oom();
	va_end(ap);
	np_cfg_err(c->errs, np_cfg_get(d, "parent"), &c->path, "%s", msg);
	free(msg);
	np_cfg_path_pop(&c->path, o2);
	np_cfg_path_pop(&c->path, o1);
}

static void
check_diskimages(struct np_drv_check *c)
{
	const struct np_cfg_node *seq = np_cfg_get_seq(c->root, "diskimages");
	size_t i, old;

	if (seq == NULL)
		return;
	old = np_cfg_path_key(&c->path, "diskimages");
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
		if (np_cfg_nix_find(&c->diskimages, parent) == NULL) {
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
			cur = p ? np_cfg_nix_find(&c->diskimages, p) : NULL;
		}
		if (loop)
			diskimage_err(c, d, i, "diskimage %s has a parent loop", name);
		else if (cur != NULL)
			diskimage_err(c, d, i, "diskimage %s has more than %d levels of parents",
				      name, NP_CONFIG_MAX_PARENTS);
	}
	np_cfg_path_pop(&c->path, old);
}

/* All servers of one list must agree on the chroot. */
void
np_cfg_check_zk_servers(struct np_drv_check *c, const struct np_cfg_node *doc)
{
	const struct np_cfg_node *seq = np_cfg_get_seq(doc, "zookeeper-servers");
	const char *first = NULL;
	size_t i, old;

	if (seq == NULL)
		return;
	old = np_cfg_path_key(&c->path, "zookeeper-servers");
	for (i = 0; i < seq->n; i++) {
		const char *ch = np_cfg_str(seq->items[i], "chroot", "");

		if (i == 0) {
			first = ch;
		} else if (strcmp(first, ch) != 0) {
			size_t o1 = np_cfg_path_idx(&c->path, i);

			np_cfg_err(
			    c->errs, seq->items[i], &c->path,
			    "every ZooKeeper server must use the same chroot ('%s' here, '%s' on "
			    "the first)",
			    ch, first);
			np_cfg_path_pop(&c->path, o1);
		}
	}
	np_cfg_path_pop(&c->path, old);
}

/* path is at providers[i]; checks a provider's diskimages[] (top-level). */
static void
check_provider_diskimages(struct np_drv_check *c, const struct np_cfg_node *prov, const char *pname)
{
	const struct np_cfg_node *seq = np_cfg_get_seq(prov, "diskimages");
	size_t i, old;

	if (seq == NULL)
		return;
	old = np_cfg_path_key(&c->path, "diskimages");
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
	np_cfg_path_pop(&c->path, old);
}

/* ---- what driver traits' checks may use (drvtraits.h) ------------------------ */

static void
vcheck_err(struct np_drv_check *c, const struct np_cfg_node *at, const char *key, const char *fmt,
	   va_list ap)
{
	size_t old = c->path.len;
	char *msg;

	if (vasprintf(&msg, fmt, ap) < 0)
		np_cfg_oom();
	if (key != NULL) {
		old = np_cfg_path_key(&c->path, key);
		at = np_cfg_get(at, key);
	}
	np_cfg_err(c->errs, at, &c->path, "%s", msg);
	free(msg);
	np_cfg_path_pop(&c->path, old);
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
	return np_cfg_path_key(&c->path, key);
}

size_t
np_drv_check_idx(struct np_drv_check *c, size_t i)
{
	return np_cfg_path_idx(&c->path, i);
}

void
np_drv_check_pop(struct np_drv_check *c, size_t old)
{
	np_cfg_path_pop(&c->path, old);
}

int
np_drv_check_top_label(const struct np_drv_check *c, const char *name)
{
	return np_cfg_nix_find(&c->labels, name) != NULL;
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
	const struct np_cfg_node *pools = np_cfg_get_seq(prov, "pools");
	struct np_drv_pool_item *v = NULL;
	size_t i, j, cap = 0;

	*n = 0;
	for (i = 0; pools && i < pools->n; i++) {
		const struct np_cfg_node *seq = np_cfg_get_seq(pools->items[i], list);

		for (j = 0; seq && j < seq->n; j++) {
			const char *k = np_cfg_str(seq->items[j], key, NULL);

			if (k == NULL)
				continue;
			if (*n == cap) {
				cap = cap ? cap * 2 : 16;
				if ((v = realloc(v, cap * sizeof(*v))) == NULL)
					np_cfg_oom();
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
	size_t old = np_cfg_path_key(&c->path, "pools");

	np_cfg_path_idx(&c->path, it->pool);
	np_cfg_path_key(&c->path, list);
	np_cfg_path_idx(&c->path, it->idx);
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
				np_cfg_oom();
			np_cfg_strv_push(out, w);
			free(w);
			p += n;
		}
	} else {
		np_cfg_strv_from_seq(out, l);
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

	if (ci != NULL && np_cfg_nix_find(&c->prov_cloud_images, ci) == NULL)
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
		} else if (np_cfg_nix_find(&c->prov_diskimages, di) == NULL) {
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
	const struct np_drv_traits *t = np_drv_traits_find(np_cfg_provider_driver(prov));
	const char *pname = np_cfg_str(prov, "name", "?");
	const struct np_cfg_node *pools = np_cfg_get_seq(prov, "pools");
	size_t i, j, old;

	if (t == NULL)
		return; /* reported by the schema */
	np_cfg_nix_build(&c->prov_cloud_images, np_cfg_get_seq(prov, "cloud-images"));
	np_cfg_nix_build(&c->prov_diskimages, np_cfg_get_seq(prov, "diskimages"));
	if (t->flags & NP_DRV_MANAGES_IMAGES)
		check_provider_diskimages(c, prov, pname);
	if (np_cfg_get_seq(prov, "cloud-images") != NULL) {
		old = np_cfg_path_key(&c->path, "cloud-images");
		check_unique_names(c, np_cfg_get_seq(prov, "cloud-images"), "cloud-image");
		np_cfg_path_pop(&c->path, old);
	}
	if (t->check_provider != NULL)
		t->check_provider(c, prov);
	if (pools == NULL)
		goto out;
	old = np_cfg_path_key(&c->path, "pools");
	check_unique_names(c, pools, "pool");
	for (i = 0; i < pools->n; i++) {
		const struct np_cfg_node *pool = pools->items[i];
		const struct np_cfg_node *labels = np_cfg_get_seq(pool, "labels");
		size_t o1 = np_cfg_path_idx(&c->path, i), o2;

		if (t->check_pool != NULL)
			t->check_pool(c, prov, pool);
		if (labels != NULL) {
			o2 = np_cfg_path_key(&c->path, "labels");
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
				o3 = np_cfg_path_idx(&c->path, j);
				check_label(c, t, prov, pool, l);
				np_cfg_path_pop(&c->path, o3);
			}
			np_cfg_path_pop(&c->path, o2);
		}
		np_cfg_path_pop(&c->path, o1);
	}
	np_cfg_path_pop(&c->path, old);
out:
	np_cfg_nix_free(&c->prov_cloud_images);
	np_cfg_nix_free(&c->prov_diskimages);
}

void
np_cfg_check_references(const struct np_cfg_node *root, struct np_cfg_errors *errs)
{
	struct np_drv_check c;
	const struct np_cfg_node *provs;
	size_t i, old;

	memset(&c, 0, sizeof(c));
	c.root = root;
	c.errs = errs;
	if (root->kind != NP_CFG_MAP)
		return;
	np_cfg_nix_build(&c.labels, np_cfg_get_seq(root, "labels"));
	np_cfg_nix_build(&c.diskimages, np_cfg_get_seq(root, "diskimages"));
	if (np_cfg_get_seq(root, "labels") != NULL) {
		old = np_cfg_path_key(&c.path, "labels");
		check_unique_names(&c, np_cfg_get_seq(root, "labels"), "label");
		np_cfg_path_pop(&c.path, old);
	}
	check_diskimages(&c);
	np_cfg_check_zk_servers(&c, root);
	if ((provs = np_cfg_get_seq(root, "providers")) == NULL)
		goto out;
	old = np_cfg_path_key(&c.path, "providers");
	check_unique_names(&c, provs, "provider");
	for (i = 0; i < provs->n; i++) {
		size_t o1 = np_cfg_path_idx(&c.path, i);

		if (provs->items[i]->kind == NP_CFG_MAP)
			check_provider(&c, provs->items[i]);
		np_cfg_path_pop(&c.path, o1);
	}
	np_cfg_path_pop(&c.path, old);
out:
	np_cfg_nix_free(&c.labels);
	np_cfg_nix_free(&c.diskimages);
}
