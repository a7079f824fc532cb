/*
 * Node and request commands: list, delete, hold, request-list, info, erase
 * (as upstream's nodepoolcmd.py and status.py).
 */
#include "cli/nodepool/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/config/config.h"
#include "lib/zk/imagetree.h"
#include "protocol/model.h"
#include "protocol/paths.h"
#include "lib/ops/status.h"

/* ---- reading nodes ---------------------------------------------------------- */

struct node_set {
	struct np_node **v;
	int *locked;
	size_t n;
};

static void
node_set_free(struct node_set *s)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		np_node_free(s->v[i]);
	free(s->v);
	free(s->locked);
	memset(s, 0, sizeof(*s));
}

static int
cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The children of path, sorted (ZNONODE: none). */
static int
children_sorted(struct cli *c, const char *path, int *count, char ***names)
{
	int rc = zk_sync_children(c->zk, path, count, names);

	if (rc == ZNONODE) {
		*count = 0;
		*names = NULL;
		return ZOK;
	}
	if (rc != ZOK)
		return rc;
	qsort(*names, (size_t)*count, sizeof(**names), cmp_name);
	return ZOK;
}

static char *
path_of(int (*fn)(char *, size_t, const char *), const char *id)
{
	char buf[NP_PATH_MAX];

	if (fn(buf, sizeof(buf), id) < 0 || strlen(buf) >= sizeof(buf) - 1)
		return NULL;
	return strdup(buf);
}

/*
 * Nodes named in ids (all of /nodepool/nodes when ids is NULL), read
 * together, with their lock contender counts when with_locks. Missing,
 * empty and malformed records are skipped (a malformed one with a warning),
 * as upstream's nodeIterator skips nodes it cannot read.
 */
static int
load_nodes(struct cli *c, const char *const *ids, size_t nids, int with_locks, struct node_set *out)
{
	struct cli_read *r;
	char **names = NULL;
	int count = 0, rc;
	size_t i, n;

	memset(out, 0, sizeof(*out));
	if (ids == NULL) {
		rc = children_sorted(c, NP_NODE_ROOT, &count, &names);
		if (rc != ZOK)
			return cli_error("reading %s: %s", NP_NODE_ROOT, cli_zk_error(rc));
		ids = (const char *const *)names;
		nids = (size_t)count;
	}
	r = calloc(2 * nids + 1, sizeof(*r));
	out->v = calloc(nids + 1, sizeof(*out->v));
	out->locked = calloc(nids + 1, sizeof(*out->locked));
	if (r == NULL || out->v == NULL || out->locked == NULL)
		abort();
	for (i = n = 0; i < nids; i++) {
		char *p = path_of(np_path_node, ids[i]);
		if (p == NULL)
			continue; /* not a usable znode name: no such node */
		r[n].path = p;
		if (with_locks) {
			r[n + 1].path = path_of(np_path_node_lock, ids[i]);
			r[n + 1].contenders = 1;
		}
		n += with_locks ? 2 : 1;
	}
	cli_read_all(c, r, n);
	for (i = 0; i < n; i += with_locks ? 2 : 1) {
		struct np_node *node = NULL;
		char err[256];
		const char *id = strrchr(r[i].path, '/') + 1;
		if (r[i].rc == ZNONODE || (r[i].rc == ZOK && r[i].len == 0))
			continue;
		if (r[i].rc != ZOK) {
			rc = cli_error("reading %s: %s", r[i].path, cli_zk_error(r[i].rc));
			cli_read_clear(r, n);
			free(r);
			zk_strings_free(count, names);
			node_set_free(out);
			return rc;
		}
		if (np_node_decode(id, r[i].data, (size_t)r[i].len, &node, err, sizeof(err)) != 0) {
			fprintf(stderr, "nodepool: node %s: unreadable record skipped: %s\n", id,
				err);
			continue;
		}
		out->v[out->n] = node;
		out->locked[out->n] = with_locks && r[i + 1].rc == ZOK ? r[i + 1].ncontenders : 0;
		out->n++;
	}
	cli_read_clear(r, 2 * nids + 1);
	free(r);
	zk_strings_free(count, names);
	return CLI_OK;
}

/* Upstream's self.list(node_id=...): the node's row (brief columns), or an
 * empty table if it is gone. */
static int
print_nodes(struct cli *c, const char *const *ids, size_t nids, int detail, int json)
{
	struct node_set s;
	struct status_table *t;
	double now = cli_now();
	size_t i;
	int rc;

	if ((rc = load_nodes(c, ids, nids, 1, &s)) != CLI_OK)
		return rc;
	t = status_table_new(STATUS_NODE_LIST);
	for (i = 0; i < s.n; i++)
		status_add_node(t, s.v[i], s.locked[i], now);
	cli_print_table(t, json, detail ? NULL : status_node_brief_fields,
			detail ? 0 : status_node_brief_nfields);
	status_table_free(t);
	node_set_free(&s);
	return CLI_OK;
}

int
cmd_list(struct cli *c, int argc, char **argv)
{
	static const char *const names[] = {"detail", "json", NULL};
	int flags[2] = {0, 0}, npos, rc;
	const char *values[2];

	if ((rc = cli_parse("list", argc, argv, names, flags, values, NULL, 0, NULL, &npos)))
		return rc;
	return print_nodes(c, NULL, 0, flags[0], flags[1]);
}

/* ---- hold and delete ------------------------------------------------------------- */

/* Read one node: ZOK with *out, ZNONODE when missing or empty, or an error. */
static int
get_node(struct cli *c, const char *id, struct np_node **out)
{
	char path[NP_PATH_MAX], err[256];
	char *data = NULL;
	int len = 0, rc;

	*out = NULL;
	if (np_path_node(path, sizeof(path), id) < 0 || np_node_id_parse(id, NULL) != 0)
		return ZNONODE;
	rc = zk_sync_get(c->zk, path, &data, &len, NULL);
	if (rc == ZOK && len == 0)
		rc = ZNONODE;
	if (rc == ZOK && np_node_decode(id, data, (size_t)len, out, err, sizeof(err)) != 0) {
		cli_error("node %s: unreadable record: %s", id, err);
		rc = ZMARSHALLINGERROR;
	}
	free(data);
	return rc;
}

static int
store_node(struct cli *c, const struct np_node *n)
{
	char path[NP_PATH_MAX];
	size_t len;
	char *json = np_node_encode(n, &len);
	int rc;

	if (json == NULL)
		return cli_error("node %s: cannot encode the record", n->id);
	np_path_node(path, sizeof(path), n->id);
	rc = zk_sync_set(c->zk, path, json, (int)len, -1, NULL);
	free(json);
	if (rc != ZOK)
		return cli_error("storing node %s: %s", n->id, cli_zk_error(rc));
	return CLI_OK;
}

/*
 * As upstream's lockNode(blocking=True, timeout=5) followed by its re-read
 * of the node: ZOK with the lock held and *fresh the node as it is now;
 * ZNONODE when it is gone; CLI_ERROR when the lock was not had in time
 * (message printed).
 */
static int
lock_node(struct cli *c, const char *id, struct zk_lock **lock, struct np_node **fresh)
{
	char path[NP_PATH_MAX];
	int rc;

	np_path_node_lock(path, sizeof(path), id);
	/* NO_RESURRECT: locking a node deleted meanwhile must not recreate it */
	*lock = zk_lock_new(c->zk, path, NULL, ZK_LOCK_NO_RESURRECT);
	rc = zk_lock_sync_acquire(*lock, CLI_LOCK_TIMEOUT);
	if (rc == ZK_LOCK_TIMEOUT) {
		zk_lock_free(*lock);
		*lock = NULL;
		cli_error("Timeout trying to acquire lock %s", path);
		return -1;
	}
	if (rc == ZNONODE) {
		zk_lock_free(*lock);
		*lock = NULL;
		return ZNONODE;
	}
	if (rc != ZOK) {
		zk_lock_free(*lock);
		*lock = NULL;
		cli_error("locking %s: %s", path, cli_zk_error(rc));
		return -1;
	}
	rc = get_node(c, id, fresh);
	if (rc != ZOK) {
		zk_lock_sync_release(*lock);
		zk_lock_free(*lock);
		*lock = NULL;
		if (rc != ZNONODE) {
			if (rc != ZMARSHALLINGERROR)
				cli_error("reading node %s: %s", id, cli_zk_error(rc));
			return -1;
		}
	}
	return rc;
}

static void
unlock_node(struct zk_lock *lock)
{
	zk_lock_sync_release(lock);
	zk_lock_free(lock);
}

struct gone_wait {
	struct cli *c;
	const char *path;
	int gone, error, armed;
};

static void gone_check(struct gone_wait *g);

static void
gone_watch(int type, const char *path, void *arg)
{
	struct gone_wait *g = arg;

	g->armed = 0;
	gone_check(g);
}

static void
gone_stat(int rc, const struct zk_stat *st, void *arg)
{
	struct gone_wait *g = arg;

	if (rc == ZNONODE)
		g->gone = 1;
	else if (rc != ZOK)
		g->error = rc;
	else
		g->armed = 1;
}

static void
gone_check(struct gone_wait *g)
{
	zk_exists(g->c->zk, g->path, gone_watch, g, gone_stat, g);
}

/* Wait for a znode to go, watching it; 0 when gone, -1 on timeout. */
static int
wait_gone(struct cli *c, const char *path, double timeout)
{
	struct gone_wait g = {c, path, 0, 0, 0};
	int rc;

	gone_check(&g);
	rc = cli_run_until(c, &g.gone, timeout);
	/* forget the watch and any read in flight: g lives on our stack */
	zk_cancel(c->zk, &g);
	return rc;
}

static int
set_node_state(struct cli *c, const char *cmd, const char *id, int state, int now, int json)
{
	struct np_node *n = NULL, *fresh = NULL;
	struct zk_lock *lock = NULL;
	const struct np_provider *prov;
	char path[NP_PATH_MAX];
	int rc;

	rc = get_node(c, id, &n);
	if (rc == ZNONODE) {
		printf("Node id %s not found\n", id);
		return CLI_OK;
	}
	if (rc != ZOK) {
		if (rc != ZMARSHALLINGERROR)
			cli_error("reading node %s: %s", id, cli_zk_error(rc));
		return CLI_ERROR;
	}
	if (now) {
		/* `delete --now`: the node's provider must be ours to ask */
		prov = n->provider ? np_cfg_provider(c->cfg, n->provider) : NULL;
		if (prov == NULL) {
			printf("Provider %s for node %s not defined on this launcher\n",
			       n->provider ? n->provider : "None", id);
			np_node_free(n);
			return CLI_OK;
		}
	}
	np_node_free(n);
	rc = lock_node(c, id, &lock, &fresh);
	if (rc == ZNONODE) {
		printf("Node id %s not found\n", id);
		return CLI_OK;
	}
	if (rc != ZOK)
		return CLI_ERROR;
	np_node_set_state(fresh, state);
	rc = store_node(c, fresh);
	unlock_node(lock);
	if (rc != CLI_OK) {
		np_node_free(fresh);
		return rc;
	}
	if (now) {
		/*
		 * The provider belongs to its launcher (one worker process per
		 * provider): rather than deleting the cloud resource from here,
		 * as upstream's --now does, we marked the node deleting and wait
		 * for the launcher to delete it and remove the record.
		 */
		np_path_node(path, sizeof(path), id);
		if (wait_gone(c, path, CLI_DELETE_NOW_TIMEOUT) != 0) {
			cli_error("node %s is marked deleting, but the launcher of provider %s did "
				  "not remove it within %g s (is it running?)",
				  id, fresh->provider, CLI_DELETE_NOW_TIMEOUT);
			np_node_free(fresh);
			return CLI_ERROR;
		}
	}
	(void)cmd;
	if (now) {
		np_node_free(fresh);
		return print_nodes(c, (const char *const[]){id}, 1, 0, json);
	}
	/* the record as we wrote it, unlocked: a launcher may delete a node
	 * marked deleting before a re-read (upstream's self.list) would find it */
	struct status_table *t = status_table_new(STATUS_NODE_LIST);

	status_add_node(t, fresh, 0, cli_now());
	cli_print_table(t, json, status_node_brief_fields, status_node_brief_nfields);
	status_table_free(t);
	np_node_free(fresh);
	return CLI_OK;
}

int
cmd_delete(struct cli *c, int argc, char **argv)
{
	static const char *const names[] = {"now", "json", NULL};
	int flags[2] = {0, 0}, npos, rc;
	const char *values[2], *pos[1];

	if ((rc = cli_parse("delete", argc, argv, names, flags, values, pos, 1, "id", &npos)))
		return rc;
	return set_node_state(c, "delete", pos[0], NP_NODE_DELETING, flags[0], flags[1]);
}

int
cmd_hold(struct cli *c, int argc, char **argv)
{
	static const char *const names[] = {"json", NULL};
	int flags[1] = {0}, npos, rc;
	const char *values[1], *pos[1];

	if ((rc = cli_parse("hold", argc, argv, names, flags, values, pos, 1, "id", &npos)))
		return rc;
	return set_node_state(c, "hold", pos[0], NP_NODE_HOLD, 0, flags[0]);
}

/* ---- request-list ------------------------------------------------------------------- */

int
cmd_request_list(struct cli *c, int argc, char **argv)
{
	static const char *const names[] = {"json", NULL};
	int flags[1] = {0}, npos, rc, count = 0, i;
	const char *values[1];
	char **names_v = NULL;
	struct cli_read *r;
	struct status_table *t;

	if ((rc =
		 cli_parse("request-list", argc, argv, names, flags, values, NULL, 0, NULL, &npos)))
		return rc;
	rc = children_sorted(c, NP_REQUEST_ROOT, &count, &names_v);
	if (rc != ZOK)
		return cli_error("reading %s: %s", NP_REQUEST_ROOT, cli_zk_error(rc));
	r = calloc((size_t)count + 1, sizeof(*r));
	if (r == NULL)
		abort();
	for (i = 0; i < count; i++)
		r[i].path = path_of(np_path_request, names_v[i]);
	cli_read_all(c, r, (size_t)count);
	t = status_table_new(STATUS_REQUEST_LIST);
	for (i = 0; i < count; i++) {
		struct np_request *req = NULL;
		char err[256];
		if (r[i].rc == ZNONODE || (r[i].rc == ZOK && r[i].len == 0))
			continue;
		if (r[i].rc != ZOK) {
			rc = cli_error("reading %s: %s", r[i].path, cli_zk_error(r[i].rc));
			break;
		}
		if (np_request_decode(names_v[i], r[i].data, (size_t)r[i].len, &req, err,
				      sizeof(err)) != 0) {
			fprintf(stderr, "nodepool: request %s: unreadable record skipped: %s\n",
				names_v[i], err);
			continue;
		}
		status_add_request(t, req);
		np_request_free(req);
	}
	if (rc == CLI_OK)
		cli_print_table(t, flags[0], NULL, 0);
	status_table_free(t);
	cli_read_clear(r, (size_t)count);
	free(r);
	zk_strings_free(count, names_v);
	return rc;
}

/* ---- info and erase ---------------------------------------------------------------- */

/* Does the build have an entry for provider? */
static const struct imgtree_provider *
build_provider(const struct imgtree_build *b, const char *provider)
{
	size_t k;

	for (k = 0; k < b->nproviders; k++)
		if (strcmp(b->providers[k].name, provider) == 0)
			return &b->providers[k];
	return NULL;
}

int
cmd_info(struct cli *c, int argc, char **argv)
{
	static const char *const names[] = {"json", NULL};
	int flags[1] = {0}, npos, rc;
	const char *values[1], *pos[1];
	struct imgtree *tree = NULL;
	struct status_table *ti, *tn;
	struct node_set s;
	size_t i, j, m;

	if ((rc = cli_parse("info", argc, argv, names, flags, values, pos, 1, "PROVIDER", &npos)))
		return rc;
	rc = imgtree_load_sync(c->base, c->zk, c->op_timeout, &tree);
	if (rc != ZOK)
		return cli_error("reading %s: %s", NP_IMAGE_ROOT, cli_zk_error(rc));
	if ((rc = load_nodes(c, NULL, 0, 0, &s)) != CLI_OK) {
		imgtree_free(tree);
		return rc;
	}
	ti = status_table_new(STATUS_INFO_IMAGES);
	for (i = 0; i < tree->nimages; i++) {
		const struct imgtree_image *im = &tree->images[i];
		for (j = 0; j < im->nbuilds; j++) {
			const struct imgtree_provider *p = build_provider(&im->builds[j], pos[0]);
			json_t *row, *ids;
			char *joined;
			if (p == NULL)
				continue;
			ids = json_array();
			for (m = 0; m < p->nuploads; m++)
				if (p->uploads[m].u != NULL)
					json_array_append_new(ids, json_string(p->uploads[m].id));
			row = json_object();
			json_object_set_new(row, "image", json_string(im->name));
			json_object_set_new(row, "build_id", json_string(im->builds[j].id));
			/* text: comma-joined as upstream; JSON keeps the list */
			if (!flags[0]) {
				joined = status_value_text(ids);
				json_object_set_new(row, "upload_ids", json_string(joined));
				free(joined);
				json_decref(ids);
			} else {
				json_object_set_new(row, "upload_ids", ids);
			}
			status_table_add(ti, row);
		}
	}
	tn = status_table_new(STATUS_INFO_NODES);
	for (i = 0; i < s.n; i++) {
		const struct np_node *n = s.v[i];
		json_t *row;
		if (n->provider == NULL || strcmp(n->provider, pos[0]) != 0)
			continue;
		row = json_object();
		json_object_set_new(row, "id", json_string(n->id));
		json_object_set_new(row, "server_id",
				    n->external_id_obj ? np_json_export(n->external_id_obj)
				    : n->external_id   ? json_string(n->external_id)
						       : json_null());
		status_table_add(tn, row);
	}
	if (flags[0]) {
		json_t *o = json_pack("{s:s, s:O, s:O}", "provider", pos[0], "images", ti->rows,
				      "nodes", tn->rows);
		char *txt = json_dumps(o, JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER);
		printf("%s\n", txt);
		free(txt);
		json_decref(o);
	} else {
		printf("ZooKeeper data for provider %s\n\n", pos[0]);
		printf("Image data:\n");
		cli_print_table(ti, 0, NULL, 0);
		printf("\nNodes:\n");
		cli_print_table(tn, 0, NULL, 0);
	}
	status_table_free(ti);
	status_table_free(tn);
	node_set_free(&s);
	imgtree_free(tree);
	return CLI_OK;
}

int
cmd_erase(struct cli *c, int argc, char **argv)
{
	static const char *const names[] = {"force", NULL};
	int flags[1] = {0}, npos, rc;
	const char *values[1], *pos[1];
	const char *provider;
	struct imgtree *tree = NULL;
	struct node_set s;
	size_t i, j;

	if ((rc = cli_parse("erase", argc, argv, names, flags, values, pos, 1, "PROVIDER", &npos)))
		return rc;
	provider = pos[0];
	if (!flags[0]) {
		char line[256];
		printf("\nWARNING! This action is not reversible!\n");
		printf("Erase ZooKeeper data for provider %s? [N/y] ", provider);
		fflush(stdout);
		if (fgets(line, sizeof(line), stdin) == NULL) {
			printf("\nAborting. No data erased.\n");
			return CLI_ERROR;
		}
		line[strcspn(line, "\r\n")] = '\0';
		if (strcmp(line, "y") != 0 && strcmp(line, "Y") != 0) {
			printf("Aborting. No data erased.\n");
			return CLI_OK;
		}
	}
	rc = imgtree_load_sync(c->base, c->zk, c->op_timeout, &tree);
	if (rc != ZOK)
		return cli_error("reading %s: %s", NP_IMAGE_ROOT, cli_zk_error(rc));
	if ((rc = load_nodes(c, NULL, 0, 0, &s)) != CLI_OK) {
		imgtree_free(tree);
		return rc;
	}
	printf("Erasing build data for %s...\n", provider);
	fflush(stdout);
	for (i = 0; i < tree->nimages && rc == CLI_OK; i++) {
		const struct imgtree_image *im = &tree->images[i];
		for (j = 0; j < im->nbuilds && rc == CLI_OK; j++) {
			char path[NP_PATH_MAX];
			int zrc;
			if (build_provider(&im->builds[j], provider) == NULL)
				continue;
			np_path_build_providers(path, sizeof(path), im->name, im->builds[j].id);
			if (strlen(path) + strlen(provider) + 2 > sizeof(path))
				continue;
			strcat(path, "/");
			strcat(path, provider);
			zrc = zk_sync_delete(c->zk, path, -1, 1);
			if (zrc != ZOK && zrc != ZNONODE)
				rc = cli_error("deleting %s: %s", path, cli_zk_error(zrc));
		}
	}
	if (rc == CLI_OK) {
		printf("Erasing node data for %s...\n", provider);
		fflush(stdout);
	}
	for (i = 0; i < s.n && rc == CLI_OK; i++) {
		struct np_node *n = s.v[i];
		char path[NP_PATH_MAX];
		int zrc;
		if (n->provider == NULL || strcmp(n->provider, provider) != 0)
			continue;
		/* as upstream's deleteNode: state deleted first, so anyone holding
		 * the lock sees the node go away on purpose */
		np_node_set_state(n, NP_NODE_DELETED);
		if ((rc = store_node(c, n)) != CLI_OK)
			break;
		np_path_node(path, sizeof(path), n->id);
		zrc = zk_sync_delete(c->zk, path, -1, 1);
		if (zrc != ZOK && zrc != ZNONODE)
			rc = cli_error("deleting %s: %s", path, cli_zk_error(zrc));
	}
	node_set_free(&s);
	imgtree_free(tree);
	return rc;
}
