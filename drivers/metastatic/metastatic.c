/*
 * The metastatic driver, as upstream Nodepool's
 * nodepool/driver/metastatic (adapter.py, config.py): a provider whose
 * nodes are slices of other providers' nodes. A state-machine adapter
 * (drivers/statemachine/adapter.h), as upstream's MetastaticAdapter is a
 * statemachine.Adapter: the framework runs launches, retries, timeouts,
 * the optional nodescan, quota and node records; this file allocates
 * slices and manages backing nodes. It needs no vtable slot of its own,
 * only host services: ZooKeeper (drv_zk) and the node and request caches
 * (drv_node_get, drv_all_nodes, drv_request_get; full_records set).
 *
 * The wire, exactly as upstream writes it (so upstream's CLI and Zuul see
 * upstream's picture):
 *   - a label with no backing node that has a free slot gets a new one: a
 *     node request for [backing-label], ephemeral and sequential under
 *     /nodepool/requests/100-, state requested, requestor
 *     "NodePool:metastatic:<provider>" (MS_ID below), reuse true, a uuid4
 *     event_id (upstream's storeNodeRequest);
 *   - once fulfilled, the backing node is locked with a persistent
 *     sequential contender whose data is MS_ID (kazoo's
 *     Lock(ephemeral=False, identifier=...), waiting up to 30 s), its
 *     user_data set to the JSON *string* {"owner": MS_ID, "label": <our
 *     label>, "slots": <max-parallel-jobs>, "failed": bool, "launched":
 *     epoch seconds}, its state to in-use; then the request is deleted;
 *   - a slice node gets the backing node's interface_ip, public_ipv4/6,
 *     private_ipv4, az, region, cloud, username, python_path, shell_type,
 *     connection_type/port, host_keys and attributes (under the pool's
 *     node-attributes), external_id = its own id, slot = its slot, and
 *     driver_data {"metadata": <create metadata>, "backing_node": <id>,
 *     "slot": n, "node": <its id>} (upstream's MetastaticInstance);
 *   - a backing node with no slice for grace-time seconds (0 once failed
 *     or past max-age, or when its label left the config), and older than
 *     min-retention-time, is set used and its lowest lock contender
 *     deleted (upstream's storeNode + forceUnlockNode): its own provider
 *     then deletes (or, static, recycles) it.
 *
 * What upstream loses across a launcher restart, and what we keep:
 * upstream rebuilds its backing records at start from the nodes whose
 * user_data names it and whose first lock contender is MS_ID, and the
 * slots from its nodes' driver_data (we do the same, in any node state,
 * so a slice whose record still exists holds its slot). It loses the
 * backing requests in flight (ephemeral, in memory only): a request
 * fulfilled after the launcher died leaves its node allocated to a
 * request nobody follows, and a launcher killed between taking the
 * persistent lock and writing user_data leaves the node locked for ever.
 * nodepoold keeps a journal entry per backing request, a persistent znode
 * under a path upstream never reads:
 *
 *     /nodepool/metastatic/<provider>/requests/<event_id>
 *         {"label": <our label>, "slots": n, "launched": epoch,
 *          "request": <request id, null until created>}
 *
 * written before the request is created, given the request id once it is,
 * and deleted once the backing node is ours (locked, user_data and in-use
 * stored) or the request failed. After a restart each entry becomes an
 * orphan record that takes no slices: its request, while the dead
 * session's ephemeral copy lasts, is followed to fulfilment; once it is
 * gone, the node allocated to it (allocated_to = the request id, READY),
 * or already locked by MS_ID, is adopted; an entry that finds nothing in
 * MS_ORPHAN_WAIT seconds is dropped. An adopted orphan serves slices like
 * any backing node and is returned after grace-time when none come.
 *
 * A slot is freed when its slice's node record is gone from ZooKeeper
 * (not when upstream frees it, at the slice's delete): a slice being
 * deleted still holds its slot, so no instant shows two records on one
 * slot. Also beyond upstream: a slice waiting for a backing request takes
 * a slot that frees up meanwhile on a backing node we hold, and a backing
 * request no slice waits for, and no provider serves yet, is withdrawn
 * (deleted, as Zuul cancels a request); against a backing provider with
 * few nodes (static) the slice could otherwise wait for our own idle
 * nodes' grace-time.
 *
 * Why the state-machine framework and no vtable slot of its own: upstream's
 * adapter is a statemachine.Adapter, and everything around a slice (node
 * records, launch retries and timeouts, the optional nodescan over the
 * backing node's address, quota, max-servers) is the framework's, as
 * there; a create machine here allocates a slot instead of calling a
 * cloud, a delete machine has nothing to do.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/time.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "drivers/driver.h"
#include "lib/core/clock.h"
#include "lib/config/jsonget.h"
#include "lib/core/log.h"
#include "protocol/model.h"
#include "protocol/paths.h"
#include "drivers/statemachine/statemachine.h"
#include "lib/core/xalloc.h"
#include "lib/zk/zk.h"

/* The poll interval of the allocation state (backing requests, slots,
 * grace-time): upstream polls state machines every second. */
#define MS_TICK 0.1
/* Upstream's lockNode(blocking=True, timeout=30) of a backing node. */
#define MS_LOCK_TIMEOUT 30.0
/* How long an orphan journal entry (see the top) looks for its node. */
#define MS_ORPHAN_WAIT 120.0
/* Ticks a slice's record must be missing before its slot is freed (the
 * node cache may lag a record our launcher has just created). */
#define MS_ABSENT_TICKS 2

struct ms_label {
	char *name, *backing_label;
	int max_parallel_jobs; /* 1 */
	double grace_time;     /* 60 */
	double min_retention;  /* min-retention-time: 0 */
	double max_age;	       /* 0 = none */
};

struct ms_slot {
	char *node;    /* the slice's node id, NULL = free */
	int launching; /* a create machine holds it */
	int absent;    /* ticks its record has been missing */
};

struct ms_backing {
	TAILQ_ENTRY(ms_backing) link;
	char *label; /* our label's name */
	int nslots;
	struct ms_slot *slots;
	char *node_id;	  /* the backing node, NULL until adopted */
	char *request_id; /* the backing request while it is followed */
	char event_id[33];
	int creating;	     /* journal or request create in flight */
	int adopting;	     /* lock and store in flight */
	int seen;	     /* the request has been in the cache */
	int absent;	     /* ticks the request or backing node has been missing */
	int failed;	     /* upstream's bnr.failed: no new slices */
	int orphan;	     /* its request is not ours to follow: no slices */
	double orphan_until; /* monotonic seconds (np_mono_s) */
	double last_used;    /* monotonic seconds: when its last slice ended */
	double launched;     /* epoch seconds: written in user_data, read back */
};
TAILQ_HEAD(ms_backings, ms_backing);
struct ms_create;
TAILQ_HEAD(ms_creates, ms_create);

/*
 * What a ZooKeeper reply finds the adapter through: the adapter may be
 * freed while replies are outstanding (some, lock contender listings, are
 * not cancellable), so each pending operation holds a reference to this
 * anchor, whose a is cleared at adapter_free; the last reference frees it.
 */
struct ms_anchor {
	struct sm_adapter *a;
	unsigned refs;
};

struct sm_adapter {
	struct ms_anchor *anc;
	const struct sm_env *env;
	struct drv_host *lc;
	char *my_id;	   /* NodePool:metastatic:<provider> */
	char *journal_dir; /* /nodepool/metastatic/<provider>/requests */
	struct ms_label *labels;
	size_t nlabels;
	struct ms_backings backings;
	struct ms_creates waiting; /* create machines waiting for a backing node */
	struct event *tick;
	int inited;	      /* 0 none, 1 recovering, 2 done */
	int init_pending;     /* recovery replies outstanding */
	int init_failed;      /* a recovery read failed: start over */
	json_t *init_journal; /* event_id -> entry, gathered during recovery */
	json_t *init_owned;   /* node id -> user_data object, contender checked */
	int stopping;
	unsigned long long adopted, released, requested, request_failed;
};

struct ms_create {
	struct sm_machine m;
	TAILQ_ENTRY(ms_create) link; /* in a->waiting while it waits */
	int waiting;
	struct sm_adapter *a;
	char *node_id;
	char *label;
	json_t *metadata;
	struct ms_backing *b;
	int slot;
};

struct ms_delete {
	struct sm_machine m;
};

static double
now_wall(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static const struct ms_label *
find_label(const struct sm_adapter *a, const char *name)
{
	size_t i;

	for (i = 0; i < a->nlabels; i++)
		if (strcmp(a->labels[i].name, name) == 0)
			return &a->labels[i];
	return NULL;
}

/* ---- backing records ---------------------------------------------------------------- */

static struct ms_backing *
backing_new(struct sm_adapter *a, const char *label, int nslots)
{
	struct ms_backing *b = xcalloc(1, sizeof(*b));

	b->slots = xcalloc((size_t)(nslots > 0 ? nslots : 1), sizeof(*b->slots));
	b->label = xstrdup(label);
	b->nslots = nslots;
	b->launched = now_wall();
	b->last_used = np_mono_s();
	TAILQ_INSERT_TAIL(&a->backings, b, link);
	return b;
}

static void
backing_free(struct sm_adapter *a, struct ms_backing *b)
{
	int i;

	TAILQ_REMOVE(&a->backings, b, link);
	for (i = 0; i < b->nslots; i++)
		free(b->slots[i].node);
	free(b->slots);
	free(b->label);
	free(b->node_id);
	free(b->request_id);
	free(b);
}

static int
backing_used(const struct ms_backing *b)
{
	int i;

	for (i = 0; i < b->nslots; i++)
		if (b->slots[i].node != NULL)
			return 1;
	return 0;
}

static int
backing_free_slot(const struct ms_backing *b)
{
	int i;

	if (b->failed || b->orphan)
		return -1;
	for (i = 0; i < b->nslots; i++)
		if (b->slots[i].node == NULL)
			return i;
	return -1;
}

/* A backing node was taken, or a slot freed: the machines waiting for a
 * backing node look again now rather than at their next poll. */
static void
wake_waiting(struct sm_adapter *a)
{
	struct ms_create *c;

	TAILQ_FOREACH(c, &a->waiting, link)
	sm_machine_wake(&c->m);
}

static void
slot_clear(struct ms_backing *b, int i)
{
	free(b->slots[i].node);
	memset(&b->slots[i], 0, sizeof(b->slots[i]));
	b->last_used = np_mono_s();
}

/* Free whatever slot node_id holds (upstream's _deallocateBackingNodeInner,
 * for a retried launch of the same node). */
static void
dealloc_node(struct sm_adapter *a, const char *node_id)
{
	struct ms_backing *b;
	int i;

	TAILQ_FOREACH(b, &a->backings, link)
	for (i = 0; i < b->nslots; i++)
		if (b->slots[i].node != NULL && strcmp(b->slots[i].node, node_id) == 0) {
			log_info("unassigned node %s from backing node %s slot %d", node_id,
				 b->node_id ? b->node_id : "(requested)", i);
			slot_clear(b, i);
			return;
		}
}

static void
anchor_unref(struct ms_anchor *anc)
{
	if (--anc->refs == 0)
		free(anc);
}

/* ---- ZooKeeper writes ------------------------------------------------------------------ */

static void
journal_path(const struct sm_adapter *a, const char *event_id, char *out, size_t n)
{
	snprintf(out, n, "%s/%s", a->journal_dir, event_id);
}

static char *
journal_json(const struct ms_backing *b)
{
	json_t *o = json_pack("{s:s, s:i, s:f, s:o}", "label", b->label, "slots", b->nslots,
			      "launched", b->launched, "request",
			      b->request_id ? json_string(b->request_id) : json_null());
	char *s = json_dumps(o, JSON_PRESERVE_ORDER | JSON_COMPACT);

	json_decref(o);
	if (s == NULL)
		np_oom();
	return s;
}

static void
journal_delete(struct sm_adapter *a, const char *event_id)
{
	char path[512];

	if (event_id[0] == '\0')
		return;
	journal_path(a, event_id, path, sizeof(path));
	zk_delete(drv_zk(a->lc), path, -1, 0, NULL, NULL);
}

/* A write's context: the adapter and the backing record it is for, found
 * again by its event id (the record may be gone when the reply comes). */
struct ms_op {
	struct ms_anchor *anc;
	struct sm_adapter *a; /* anc->a when the op was made or its reply came */
	char event_id[33];
	char *node_id;
	struct zk_lock *lock;
};

static struct ms_op *
op_new(struct sm_adapter *a, const struct ms_backing *b)
{
	struct ms_op *op = xcalloc(1, sizeof(*op));

	op->anc = a->anc;
	op->anc->refs++;
	op->a = a;
	memcpy(op->event_id, b->event_id, sizeof(op->event_id));
	if (b->node_id != NULL)
		op->node_id = xstrdup(b->node_id);
	return op;
}

static void
op_free(struct ms_op *op)
{
	if (op == NULL)
		return;
	zk_lock_free(op->lock);
	free(op->node_id);
	anchor_unref(op->anc);
	free(op);
}

/* The record op is for, or NULL (gone, or the adapter is). */
static struct ms_backing *
op_backing(struct ms_op *op)
{
	struct ms_backing *b;

	op->a = op->anc->a;
	if (op->a == NULL || op->a->stopping)
		return NULL;
	TAILQ_FOREACH(b, &op->a->backings, link)
	if (strcmp(b->event_id, op->event_id) == 0)
		return b;
	return NULL;
}

static void
request_created(int rc, const char *path, void *arg)
{
	struct ms_op *op = arg;
	struct ms_backing *b = op_backing(op);
	char jpath[512];
	char *js;

	if (b == NULL) {
		op_free(op);
		return;
	}
	b->creating = 0;
	if (rc != ZOK || path == NULL) {
		log_warn("backing request for %s: %s", b->label, zk_strerror(rc));
		b->failed = 1;
		b->orphan = 1; /* nothing to follow: dropped once empty */
		journal_delete(op->a, b->event_id);
		b->event_id[0] = '\0';
		op_free(op);
		return;
	}
	b->request_id = xstrdup(strrchr(path, '/') + 1);
	log_info("backing request %s for %s submitted", b->request_id, b->label);
	js = journal_json(b);
	journal_path(op->a, b->event_id, jpath, sizeof(jpath));
	zk_set(drv_zk(op->a->lc), jpath, js, (int)strlen(js), -1, NULL, NULL);
	free(js);
	op_free(op);
}

static void
journal_created(int rc, const char *path, void *arg)
{
	struct ms_op *op = arg;
	struct ms_backing *b = op_backing(op);
	const struct ms_label *lab;
	struct np_request *r;
	char *json;
	size_t len;

	(void)path;
	if (b == NULL) {
		op_free(op);
		return;
	}
	lab = find_label(op->a, b->label);
	if (rc != ZOK || lab == NULL) {
		log_warn("backing request journal for %s: %s", b->label, zk_strerror(rc));
		b->creating = 0;
		b->failed = 1;
		b->orphan = 1;
		b->event_id[0] = '\0';
		op_free(op);
		return;
	}
	/* upstream's NodeRequest as _allocateBackingNode fills it, stored
	 * with storeNodeRequest(req, priority='100') */
	r = np_request_new();
	np_request_set_state(r, NP_REQ_REQUESTED);
	np_strv_push(&r->node_types, lab->backing_label);
	r->requestor = xstrdup(op->a->my_id);
	r->event_id = xstrdup(b->event_id);
	r->created_time = now_wall();
	r->has_created_time = 1;
	json = np_request_encode(r, &len);
	np_request_free(r);
	zk_create(drv_zk(op->a->lc), "/nodepool/requests/100-", json, (int)len,
		  ZOO_EPHEMERAL | ZOO_SEQUENCE, 1, request_created, op);
	free(json);
}

/* Start a new backing node for label: journal entry, then request. */
static struct ms_backing *
backing_request(struct sm_adapter *a, const struct ms_label *lab)
{
	struct ms_backing *b = backing_new(a, lab->name, lab->max_parallel_jobs);
	char path[512];
	char *js;

	np_uuid4_hex(b->event_id);
	b->creating = 1;
	a->requested++;
	js = journal_json(b);
	journal_path(a, b->event_id, path, sizeof(path));
	zk_create(drv_zk(a->lc), path, js, (int)strlen(js), 0, 1, journal_created, op_new(a, b));
	free(js);
	return b;
}

static json_t *
user_data_of(const struct sm_adapter *a, const struct ms_backing *b)
{
	json_t *o = json_pack("{s:s, s:s, s:i, s:b, s:f}", "owner", a->my_id, "label", b->label,
			      "slots", b->nslots, "failed", b->failed, "launched", b->launched);
	/* json.dumps' default separators, as upstream writes it */
	char *s = json_dumps(o, JSON_PRESERVE_ORDER);
	json_t *v;

	json_decref(o);
	if (s == NULL)
		np_oom();
	v = json_string(s);
	free(s);
	return v;
}

/* The user_data object of a node that names us as its owner, or NULL. */
static json_t *
owned_user_data(const struct sm_adapter *a, const struct np_node *n)
{
	json_t *o;
	const char *s = json_string_value(n->user_data);

	if (s == NULL || strstr(s, a->my_id) == NULL)
		return NULL;
	o = json_loads(s, 0, NULL);
	if (!json_is_object(o) || !json_is_string(json_object_get(o, "owner")) ||
	    strcmp(json_string_value(json_object_get(o, "owner")), a->my_id) != 0 ||
	    !json_is_string(json_object_get(o, "label")) ||
	    json_integer_value(json_object_get(o, "slots")) < 1) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static void adopt_failed(struct sm_adapter *a, struct ms_backing *b, const char *why);

static void
adopt_stored(int rc, const struct zk_stat *st, void *arg)
{
	struct ms_op *op = arg;
	struct ms_backing *b = op_backing(op);
	char path[128];

	(void)st;
	if (b == NULL) {
		op_free(op);
		return;
	}
	if (rc != ZOK) {
		adopt_failed(op->a, b, zk_strerror(rc));
		op_free(op);
		return;
	}
	if (b->request_id != NULL) {
		snprintf(path, sizeof(path), "/nodepool/requests/%s", b->request_id);
		zk_delete(drv_zk(op->a->lc), path, -1, 0, NULL, NULL);
		log_info("backing request %s fulfilled with node %s", b->request_id, op->node_id);
	}
	journal_delete(op->a, b->event_id);
	b->event_id[0] = '\0';
	free(b->request_id);
	b->request_id = NULL;
	b->node_id = xstrdup(op->node_id);
	b->adopting = 0;
	b->orphan = 0;
	b->absent = 0;
	b->last_used = np_mono_s();
	op->a->adopted++;
	wake_waiting(op->a);
	op_free(op);
}

/* Locked (or found ours): re-read the node, then store it in-use with our
 * user_data. */
static void
adopt_read(int rc, const char *data, int len, const struct zk_stat *st, void *arg)
{
	struct ms_op *op = arg;
	struct ms_backing *b = op_backing(op);
	struct np_node *n = NULL;
	char err[128], path[128];
	char *json;
	size_t jlen;

	if (b == NULL) {
		op_free(op);
		return;
	}
	if (rc != ZOK ||
	    np_node_decode(op->node_id, data, (size_t)len, &n, err, sizeof(err)) != 0) {
		adopt_failed(op->a, b, rc != ZOK ? zk_strerror(rc) : err);
		op_free(op);
		return;
	}
	json_decref(n->user_data);
	n->user_data = user_data_of(op->a, b);
	np_node_set_state(n, NP_NODE_IN_USE);
	json = np_node_encode(n, &jlen);
	np_node_free(n);
	snprintf(path, sizeof(path), "/nodepool/nodes/%s", op->node_id);
	zk_set(drv_zk(op->a->lc), path, json, (int)jlen, st->version, adopt_stored, op);
	free(json);
}

/* Ours (locked): re-read the node, as upstream's lockNode does. */
static void
adopt_reread(struct ms_op *op)
{
	char path[128];

	snprintf(path, sizeof(path), "/nodepool/nodes/%s", op->node_id);
	zk_get(drv_zk(op->a->lc), path, NULL, NULL, adopt_read, op);
}

static void
adopt_locked(struct zk_lock *lock, int rc, void *arg)
{
	struct ms_op *op = arg;
	struct ms_backing *b = op_backing(op);

	if (rc == ZOK)
		zk_lock_disown(lock); /* persistent: it stays ours past this process */
	if (b == NULL) {
		op_free(op);
		return;
	}
	if (rc != ZOK) {
		adopt_failed(op->a, b, zk_strerror(rc));
		op_free(op);
		return;
	}
	adopt_reread(op);
}

static void
adopt_contenders(int rc, int count, char *const *idents, void *arg)
{
	struct ms_op *op = arg;
	struct ms_backing *b = op_backing(op);
	char path[128];

	if (b == NULL) {
		op_free(op);
		return;
	}
	if (rc == ZOK && count > 0 && strcmp(idents[0], op->a->my_id) == 0) {
		/* already ours: a previous incarnation locked it and died
		 * before the rest (upstream would leave it locked for ever) */
		log_info("backing node %s: already locked by %s", op->node_id, op->a->my_id);
		adopt_reread(op);
		return;
	}
	snprintf(path, sizeof(path), "/nodepool/nodes/%s/lock", op->node_id);
	op->lock = zk_lock_new(drv_zk(op->a->lc), path, op->a->my_id,
			       ZK_LOCK_NO_RESURRECT | ZK_LOCK_PERSISTENT);
	zk_lock_acquire(op->lock, MS_LOCK_TIMEOUT, adopt_locked, op);
}

/* Take node_id as b's backing node (upstream's _checkBackingNodeRequests
 * on a fulfilled request). */
static void
adopt(struct sm_adapter *a, struct ms_backing *b, const char *node_id)
{
	struct ms_op *op;
	char path[128];

	b->adopting = 1;
	op = op_new(a, b);
	op->node_id = xstrdup(node_id);
	snprintf(path, sizeof(path), "/nodepool/nodes/%s/lock", node_id);
	zk_lock_contenders(drv_zk(a->lc), path, adopt_contenders, op);
}

static void
adopt_failed(struct sm_adapter *a, struct ms_backing *b, const char *why)
{
	char path[128];

	log_warn("backing request %s: could not take its node: %s",
		 b->request_id ? b->request_id : "?", why);
	b->adopting = 0;
	b->failed = 1;
	if (b->request_id != NULL && !b->orphan) {
		snprintf(path, sizeof(path), "/nodepool/requests/%s", b->request_id);
		zk_delete(drv_zk(a->lc), path, -1, 0, NULL, NULL);
	}
	b->orphan = 1;
	journal_delete(a, b->event_id);
	b->event_id[0] = '\0';
	free(b->request_id);
	b->request_id = NULL;
	wake_waiting(a);
}

/* ---- returning a backing node ---------------------------------------------------------- */

static int
lock_seq(const char *name)
{
	const char *p = strstr(name, "__lock__");

	return p != NULL ? atoi(p + 8) : -1;
}

static void
unlock_listed(int rc, int count, char *const *names, void *arg)
{
	struct ms_op *op = arg;
	int i, best = -1;
	char path[256];

	/* (the adapter gone, a restart finds the node still ours and returns
	 * it again) */
	if ((op->a = op->anc->a) == NULL)
		count = 0;
	/* upstream's forceUnlockNode: delete the lowest contender */
	for (i = 0; rc == ZOK && i < count; i++)
		if (lock_seq(names[i]) >= 0 &&
		    (best < 0 || lock_seq(names[i]) < lock_seq(names[best])))
			best = i;
	if (best >= 0) {
		snprintf(path, sizeof(path), "/nodepool/nodes/%s/lock/%s", op->node_id,
			 names[best]);
		zk_delete(drv_zk(op->a->lc), path, -1, 0, NULL, NULL);
	}
	op_free(op);
}

static void
release_stored(int rc, const struct zk_stat *st, void *arg)
{
	struct ms_op *op = arg;
	char path[128];

	(void)st;
	if ((op->a = op->anc->a) == NULL) {
		op_free(op);
		return;
	}
	if (rc != ZOK && rc != ZNONODE)
		log_warn("backing node %s: storing used: %s", op->node_id, zk_strerror(rc));
	snprintf(path, sizeof(path), "/nodepool/nodes/%s/lock", op->node_id);
	zk_children(drv_zk(op->a->lc), path, NULL, NULL, unlock_listed, op);
}

/* Set the backing node used and unlock it (upstream's listResources
 * pass); the record is dropped at once. */
static void
release(struct sm_adapter *a, struct ms_backing *b, double idle)
{
	const struct np_node *cur = drv_node_get(a->lc, b->node_id);
	struct ms_op *op = op_new(a, b);

	log_info("backing node %s has been idle for %.0f seconds, releasing", b->node_id, idle);
	a->released++;
	if (cur != NULL) {
		struct np_node *n = np_node_dup(cur);
		char path[128], *json;
		size_t len;

		np_node_set_state(n, NP_NODE_USED);
		json = np_node_encode(n, &len);
		np_node_free(n);
		snprintf(path, sizeof(path), "/nodepool/nodes/%s", b->node_id);
		zk_set(drv_zk(a->lc), path, json, (int)len, -1, release_stored, op);
		free(json);
	} else
		release_stored(ZNONODE, NULL, op);
	backing_free(a, b);
}

/* ---- the periodic pass ---------------------------------------------------------------- */

/* A node allocated to request_id (what the backing provider launched for a
 * request that is gone), ready or already ours. */
static const struct np_node *
node_for_request(struct sm_adapter *a, const char *request_id)
{
	const struct np_node **v;
	size_t i, n = drv_all_nodes(a->lc, &v);

	for (i = 0; i < n; i++)
		if (v[i]->allocated_to != NULL && strcmp(v[i]->allocated_to, request_id) == 0 &&
		    v[i]->state == NP_NODE_READY)
			return v[i];
	return NULL;
}

static void
follow_request(struct sm_adapter *a, struct ms_backing *b, double now)
{
	const struct np_request *r = drv_request_get(a->lc, b->request_id);

	if (r != NULL) {
		b->seen = 1;
		b->absent = 0;
		if (r->state == NP_REQ_FULFILLED && r->nodes.n > 0) {
			adopt(a, b, r->nodes.v[0]);
		} else if (!b->orphan && !backing_used(b) && r->state == NP_REQ_REQUESTED) {
			/* every slice it was for went elsewhere (create_advance)
			 * and no provider is launching for it: withdraw it, as
			 * Zuul cancels a request, by deleting it (one being
			 * served is kept: its node will serve the next slices,
			 * or be returned after grace-time, rather than be left
			 * ready and unallocated with its provider) */
			char path[128];
			log_info("backing request %s withdrawn: no slice waits for it",
				 b->request_id);
			snprintf(path, sizeof(path), "/nodepool/requests/%s", b->request_id);
			zk_delete(drv_zk(a->lc), path, -1, 0, NULL, NULL);
			journal_delete(a, b->event_id);
			b->event_id[0] = '\0';
			free(b->request_id);
			b->request_id = NULL;
			b->failed = 1;
		} else if (r->state == NP_REQ_FAILED) {
			char path[128];
			log_warn("backing request %s failed", b->request_id);
			a->request_failed++;
			b->failed = 1;
			b->orphan = 1;
			snprintf(path, sizeof(path), "/nodepool/requests/%s", b->request_id);
			zk_delete(drv_zk(a->lc), path, -1, 0, NULL, NULL);
			journal_delete(a, b->event_id);
			b->event_id[0] = '\0';
			free(b->request_id);
			b->request_id = NULL;
		}
		return;
	}
	if (!b->seen && !b->orphan && b->absent++ < 25)
		return; /* not in the cache yet */
	if (!b->orphan) {
		/* our ephemeral request is gone (our session expired, or it
		 * was deleted): its slices fail over to other backing nodes;
		 * the node it may have got is looked for as an orphan's */
		log_warn("backing request %s is gone", b->request_id);
		b->orphan = 1;
		b->orphan_until = now + MS_ORPHAN_WAIT;
	}
	{
		const struct np_node *n = node_for_request(a, b->request_id);
		if (n != NULL) {
			log_info("backing request %s is gone; taking node %s allocated to it",
				 b->request_id, n->id);
			adopt(a, b, n->id);
		} else if (now > b->orphan_until) {
			log_info("backing request %s: no node came for it", b->request_id);
			journal_delete(a, b->event_id);
			b->event_id[0] = '\0';
			free(b->request_id);
			b->request_id = NULL;
		}
	}
}

static void
check_slots(struct sm_adapter *a, struct ms_backing *b)
{
	int i;

	for (i = 0; i < b->nslots; i++) {
		struct ms_slot *s = &b->slots[i];
		if (s->node == NULL || s->launching)
			continue;
		if (drv_node_get(a->lc, s->node) != NULL) {
			s->absent = 0;
		} else if (++s->absent >= MS_ABSENT_TICKS) {
			log_info("node %s is gone: backing node %s slot %d is free", s->node,
				 b->node_id ? b->node_id : "(requested)", i);
			slot_clear(b, i);
			wake_waiting(a);
		}
	}
}

static void recover_start(struct sm_adapter *a);

static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sm_adapter *a = arg;
	struct ms_backing *b, *tb;
	/* launched is a record's timestamp (wall clock, read back after a
	 * restart); the other ages are this process's (monotonic) */
	double wall = now_wall(), now = np_mono_s();

	(void)fd;
	(void)what;
	if (a->stopping || !drv_in_sync(a->lc) || drv_zk(a->lc) == NULL)
		return;
	if (a->inited == 0) {
		recover_start(a);
		return;
	}
	if (a->inited == 1)
		return;
	for (b = TAILQ_FIRST(&a->backings); b != NULL; b = tb) {
		const struct ms_label *lab = find_label(a, b->label);
		double grace = 0, min_time = 0;

		tb = TAILQ_NEXT(b, link);
		check_slots(a, b);
		if (b->creating || b->adopting)
			continue;
		if (b->node_id == NULL) {
			if (b->request_id != NULL)
				follow_request(a, b, now);
			else if (!backing_used(b))
				backing_free(a, b); /* failed, nothing left in it */
			continue;
		}
		if (drv_node_get(a->lc, b->node_id) == NULL) {
			if (++b->absent >= MS_ABSENT_TICKS && !b->failed) {
				log_warn("backing node %s is gone", b->node_id);
				b->failed = 1;
			}
		} else
			b->absent = 0;
		if (lab != NULL) {
			grace = lab->grace_time;
			min_time = lab->min_retention;
			if (lab->max_age > 0 && wall - b->launched > lab->max_age)
				b->failed = 1;
		}
		if (b->failed)
			grace = min_time = 0;
		if (!backing_used(b) && now - b->last_used > grace && wall - b->launched > min_time)
			release(a, b, now - b->last_used);
	}
}

/* ---- recovery after a (re)start ------------------------------------------------------------ */

static void
recover_finish(struct sm_adapter *a)
{
	const struct np_node **v;
	size_t i, n;
	const char *key;
	json_t *val;
	double now = np_mono_s();

	/* backing nodes: user_data names us and MS_ID holds the lock */
	json_object_foreach(a->init_owned, key, val)
	{
		const char *label = json_string_value(json_object_get(val, "label"));
		int slots = (int)json_integer_value(json_object_get(val, "slots"));
		struct ms_backing *b;

		TAILQ_FOREACH(b, &a->backings, link)
		if (b->node_id != NULL && strcmp(b->node_id, key) == 0)
			break;
		if (b != NULL)
			continue;
		b = backing_new(a, label, slots);
		b->node_id = xstrdup(key);
		b->failed = json_is_true(json_object_get(val, "failed"));
		b->launched = json_number_value(json_object_get(val, "launched"));
		log_info("found backing node %s for %s", key, label);
	}
	/* slices: every node of ours naming one (any state: a record that
	 * still exists holds its slot) */
	n = drv_all_nodes(a->lc, &v);
	for (i = 0; i < n; i++) {
		const json_t *dd = v[i]->driver_data;
		const char *bn = json_string_value(json_object_get(dd, "backing_node"));
		json_t *sv = json_object_get(dd, "slot");
		struct ms_backing *b;

		if (v[i]->provider == NULL || strcmp(v[i]->provider, a->env->provider_name) != 0 ||
		    bn == NULL || !json_is_integer(sv))
			continue;
		TAILQ_FOREACH(b, &a->backings, link)
		if (b->node_id != NULL && strcmp(b->node_id, bn) == 0)
			break;
		if (b == NULL)
			continue;
		if (json_integer_value(sv) < 0 || json_integer_value(sv) >= b->nslots ||
		    b->slots[json_integer_value(sv)].node != NULL) {
			log_warn("node %s: slot %lld of backing node %s is not free", v[i]->id,
				 (long long)json_integer_value(sv), bn);
			continue;
		}
		b->slots[json_integer_value(sv)].node = xstrdup(v[i]->id);
		log_info("found node %s assigned to backing node %s slot %lld", v[i]->id, bn,
			 (long long)json_integer_value(sv));
	}
	/* journal entries: backing requests a previous incarnation made */
	json_object_foreach(a->init_journal, key, val)
	{
		const char *req = json_string_value(json_object_get(val, "request"));
		const char *label = json_string_value(json_object_get(val, "label"));
		int slots = (int)json_integer_value(json_object_get(val, "slots"));
		struct ms_backing *b;

		if (req == NULL || label == NULL || slots < 1 || strlen(key) != 32) {
			journal_delete(a, key);
			continue;
		}
		b = backing_new(a, label, slots);
		memcpy(b->event_id, key, 33);
		b->request_id = xstrdup(req);
		b->launched = json_number_value(json_object_get(val, "launched"));
		b->orphan = 1;
		b->orphan_until = now + MS_ORPHAN_WAIT;
		log_info("following backing request %s of a previous run", req);
	}
	json_decref(a->init_owned);
	json_decref(a->init_journal);
	a->init_owned = a->init_journal = NULL;
	a->inited = 2;
}

/* One recovery read in flight. */
struct ms_rec {
	struct ms_anchor *anc;
	char *key;
	json_t *val;
};

static struct ms_rec *
rec_new(struct sm_adapter *a, const char *key, json_t *val)
{
	struct ms_rec *r = xcalloc(1, sizeof(*r));

	r->anc = a->anc;
	r->anc->refs++;
	r->key = xstrdup(key);
	r->val = val;
	a->init_pending++;
	return r;
}

/* One read is back: the adapter (NULL when gone), r freed. */
static struct sm_adapter *
rec_end(struct ms_rec *r)
{
	struct sm_adapter *a = r->anc->a;

	anchor_unref(r->anc);
	json_decref(r->val);
	free(r->key);
	free(r);
	return a;
}

static void
rec_done(struct sm_adapter *a)
{
	if (a == NULL || --a->init_pending != 0 || a->stopping)
		return;
	if (a->init_failed) {
		/* a partial view would leave a backing node unknown (locked
		 * for ever): read it all again on the next tick */
		log_warn("metastatic: reading back our state failed; retrying");
		json_decref(a->init_owned);
		json_decref(a->init_journal);
		a->init_owned = a->init_journal = NULL;
		a->inited = 0;
		return;
	}
	recover_finish(a);
}

/* A recovery read's outcome: ZNONODE is an answer (nothing there). */
static void
rec_rc(struct sm_adapter *a, int rc)
{
	if (a != NULL && rc != ZOK && rc != ZNONODE)
		a->init_failed = 1;
}

static void
rec_contenders(int rc, int count, char *const *idents, void *arg)
{
	struct ms_rec *r = arg;
	struct sm_adapter *a = r->anc->a;

	rec_rc(a, rc);
	if (a != NULL && rc == ZOK && count > 0 && strcmp(idents[0], a->my_id) == 0)
		json_object_set(a->init_owned, r->key, r->val);
	rec_done(rec_end(r));
}

static void
rec_journal_read(int rc, const char *data, int len, const struct zk_stat *st, void *arg)
{
	struct ms_rec *r = arg;
	struct sm_adapter *a = r->anc->a;
	json_t *o;

	(void)st;
	rec_rc(a, rc);
	if (a != NULL && rc == ZOK && (o = json_loadb(data, (size_t)len, 0, NULL)) != NULL) {
		if (json_is_object(o))
			json_object_set(a->init_journal, r->key, o);
		json_decref(o);
	}
	rec_done(rec_end(r));
}

static void
rec_journal_listed(int rc, int count, char *const *names, void *arg)
{
	struct ms_rec *lr = arg;
	struct sm_adapter *a = lr->anc->a;
	int i;
	char path[512];

	rec_rc(a, rc);
	for (i = 0; a != NULL && rc == ZOK && i < count; i++) {
		journal_path(a, names[i], path, sizeof(path));
		zk_get(drv_zk(a->lc), path, NULL, NULL, rec_journal_read,
		       rec_new(a, names[i], NULL));
	}
	rec_done(rec_end(lr));
}

/* As upstream's _init: read our state back from ZooKeeper before the
 * first allocation. Replies come on the loop; recover_finish builds the
 * records once all are in. */
static void
recover_start(struct sm_adapter *a)
{
	const struct np_node **v;
	size_t i, n = drv_all_nodes(a->lc, &v);
	char path[128];

	a->inited = 1;
	a->init_failed = 0;
	a->init_owned = json_object();
	a->init_journal = json_object();
	a->init_pending = 0;
	for (i = 0; i < n; i++) {
		json_t *ud = owned_user_data(a, v[i]);
		if (ud == NULL)
			continue;
		snprintf(path, sizeof(path), "/nodepool/nodes/%s/lock", v[i]->id);
		zk_lock_contenders(drv_zk(a->lc), path, rec_contenders, rec_new(a, v[i]->id, ud));
	}
	zk_children(drv_zk(a->lc), a->journal_dir, NULL, NULL, rec_journal_listed,
		    rec_new(a, "", NULL));
}

/* ---- state machines ------------------------------------------------------------------ */

static void
create_release_slot(struct ms_create *c)
{
	if (c->b != NULL && c->slot >= 0 && c->b->slots[c->slot].node != NULL &&
	    strcmp(c->b->slots[c->slot].node, c->node_id) == 0)
		c->b->slots[c->slot].launching = 0;
}

static struct sm_instance *
make_instance(struct ms_create *c, const struct np_node *bn)
{
	struct sm_instance *in = sm_instance_new();

	in->ready = 1;
	sm_set_str(&in->external_id, c->node_id);
	sm_set_str(&in->interface_ip, bn->interface_ip);
	sm_set_str(&in->public_ipv4, bn->public_ipv4);
	sm_set_str(&in->public_ipv6, bn->public_ipv6);
	sm_set_str(&in->private_ipv4, bn->private_ipv4);
	sm_set_str(&in->az, bn->az);
	sm_set_str(&in->region, bn->region);
	sm_set_str(&in->cloud, bn->cloud);
	sm_set_str(&in->username, bn->username);
	sm_set_str(&in->python_path, bn->python_path);
	sm_set_str(&in->shell_type, bn->shell_type);
	sm_set_str(&in->connection_type, bn->connection_type);
	if (bn->connection_port_obj != NULL)
		in->connection_port_obj = json_deep_copy(bn->connection_port_obj);
	else
		in->connection_port = bn->connection_port;
	in->has_host_keys = 1;
	np_strv_copy(&in->host_keys, &bn->host_keys);
	if (json_is_object(bn->attributes))
		in->node_attributes = json_deep_copy(bn->attributes);
	json_decref(in->metadata);
	in->metadata = json_deep_copy(c->metadata);
	in->slot = c->slot;
	in->driver_data = json_pack("{s:O, s:s, s:i, s:s}", "metadata", c->metadata, "backing_node",
				    bn->id, "slot", c->slot, "node", c->node_id);
	return in;
}

static enum sm_status
create_advance(struct sm_machine *m, struct sm_instance **out)
{
	struct ms_create *c = (struct ms_create *)m;
	struct sm_adapter *a = c->a;
	const struct np_node *bn;

	m->retry_in = MS_TICK;
	if (c->b == NULL) {
		const struct ms_label *lab = find_label(a, c->label);
		struct ms_backing *b;

		if (lab == NULL) {
			m->error = SM_E_FAILED;
			snprintf(m->error_msg, sizeof(m->error_msg), "label %s is not configured",
				 c->label);
			return SM_ERROR;
		}
		if (a->inited != 2 || !drv_in_sync(a->lc))
			return SM_AGAIN; /* state not recovered yet */
		dealloc_node(a, c->node_id);
		TAILQ_FOREACH(b, &a->backings, link)
		if (b->label != NULL && strcmp(b->label, lab->name) == 0 &&
		    backing_free_slot(b) >= 0)
			break;
		if (b == NULL)
			b = backing_request(a, lab);
		c->b = b;
		c->slot = backing_free_slot(b);
		b->slots[c->slot].node = xstrdup(c->node_id);
		b->slots[c->slot].launching = 1;
		log_info("assigned node %s to backing node %s slot %d", c->node_id,
			 b->node_id ? b->node_id : "(requested)", c->slot);
		sm_set_str(&m->external_id, c->node_id);
		m->state = "requesting backing node";
	}
	if (c->b->node_id == NULL || c->b->adopting) {
		struct ms_backing *o;
		int i;

		/* Beyond upstream (which waits for the request it made): a
		 * slot freed meanwhile on a backing node we hold serves the
		 * slice now; the request, left with no slice, is withdrawn
		 * (tick_cb). Against a backing provider with few nodes (static)
		 * waiting could last until our own idle nodes are returned. */
		TAILQ_FOREACH(o, &a->backings, link)
		if (o != c->b && o->node_id != NULL && !o->adopting &&
		    strcmp(o->label, c->b->label) == 0 && (i = backing_free_slot(o)) >= 0) {
			dealloc_node(a, c->node_id);
			c->b = o;
			c->slot = i;
			o->slots[i].node = xstrdup(c->node_id);
			o->slots[i].launching = 1;
			log_info("assigned node %s to backing node %s slot %d", c->node_id,
				 o->node_id, i);
			break;
		}
	}
	if (c->b->node_id == NULL || c->b->adopting) {
		if (c->b->failed || c->b->orphan) {
			m->error = SM_E_FAILED;
			snprintf(m->error_msg, sizeof(m->error_msg), "Backing node failed");
			dealloc_node(a, c->node_id);
			c->b = NULL;
			return SM_ERROR;
		}
		if (!c->waiting) {
			TAILQ_INSERT_TAIL(&a->waiting, c, link);
			c->waiting = 1;
		}
		return SM_AGAIN;
	}
	if (c->waiting) {
		TAILQ_REMOVE(&a->waiting, c, link);
		c->waiting = 0;
	}
	bn = drv_node_get(a->lc, c->b->node_id);
	if (bn == NULL) {
		/* adopted, but the cache has not shown the node in-use yet */
		return SM_AGAIN;
	}
	m->state = "complete";
	*out = make_instance(c, bn);
	return SM_DONE;
}

static void
create_free(struct sm_machine *m)
{
	struct ms_create *c = (struct ms_create *)m;

	if (c->waiting)
		TAILQ_REMOVE(&c->a->waiting, c, link);
	if (!c->a->stopping)
		create_release_slot(c);
	free(m->external_id);
	free(c->node_id);
	free(c->label);
	json_decref(c->metadata);
	free(c);
}

static const struct sm_machine_ops create_ops = {create_advance, create_free};

static struct sm_machine *
ms_create_machine(struct sm_adapter *a, const struct sm_create_args *args)
{
	struct ms_create *c = xcalloc(1, sizeof(*c));
	const char *nid = json_string_value(json_object_get(args->metadata, "nodepool_node_id"));

	c->m.ops = &create_ops;
	c->m.state = "start";
	c->a = a;
	c->node_id = xstrdup(nid != NULL ? nid : "");
	c->label = xstrdup(args->label->name);
	c->metadata = json_deep_copy(args->metadata);
	c->slot = -1;
	return &c->m;
}

/* The slice's slot is freed once its record is gone (see the top), so a
 * delete has nothing to do here (upstream deallocates at this point). */
static enum sm_status
delete_advance(struct sm_machine *m, struct sm_instance **out)
{
	(void)out;
	m->state = "complete";
	return SM_DONE;
}

static void
delete_free(struct sm_machine *m)
{
	free(m->external_id);
	free(m);
}

static const struct sm_machine_ops delete_ops = {delete_advance, delete_free};

static struct sm_machine *
ms_delete_machine(struct sm_adapter *a, const char *external_id)
{
	struct ms_delete *d = xcalloc(1, sizeof(*d));

	(void)a;
	d->m.ops = &delete_ops;
	d->m.state = "start";
	d->m.external_id = xstrdup(external_id);
	return &d->m;
}

/* ---- the adapter ---------------------------------------------------------------- */

struct ms_list {
	sm_instances_cb cb;
	void *arg;
};

static void
list_later(evutil_socket_t fd, short what, void *arg)
{
	struct ms_list *l = arg;

	(void)fd;
	(void)what;
	l->cb(NULL, 0, NULL, l->arg);
	free(l);
}

/* Upstream's listInstances: none (metastatic manages no cloud quota). */
static void
ms_list_instances(struct sm_adapter *a, sm_instances_cb cb, void *arg)
{
	struct ms_list *l = xcalloc(1, sizeof(*l));

	l->cb = cb;
	l->arg = arg;
	if (event_base_once(a->env->base, -1, EV_TIMEOUT, list_later, l, NULL) != 0)
		np_oom();
}

static void
ms_nodescan_failed(struct sm_adapter *a, const struct sm_label *label, const char *external_id)
{
	struct ms_backing *b;
	int i;

	(void)label;
	TAILQ_FOREACH(b, &a->backings, link)
	for (i = 0; i < b->nslots; i++)
		if (b->slots[i].node != NULL && strcmp(b->slots[i].node, external_id) == 0 &&
		    b->node_id != NULL) {
			const struct np_node *cur = drv_node_get(a->lc, b->node_id);
			log_info("nodescan failure of %s on %s, failing backing node", external_id,
				 b->node_id);
			b->failed = 1;
			if (cur != NULL) {
				struct np_node *n = np_node_dup(cur);
				char path[128], *json;
				size_t len;
				json_decref(n->user_data);
				n->user_data = user_data_of(a, b);
				json = np_node_encode(n, &len);
				np_node_free(n);
				snprintf(path, sizeof(path), "/nodepool/nodes/%s", b->node_id);
				zk_set(drv_zk(a->lc), path, json, (int)len, -1, NULL, NULL);
				free(json);
			}
			return;
		}
}

static void
ms_dump(struct sm_adapter *a, struct evbuffer *out)
{
	struct ms_backing *b;
	int i;

	evbuffer_add_printf(out,
			    "metastatic: %llu backing requests, %llu failed, %llu adopted, "
			    "%llu returned\n",
			    a->requested, a->request_failed, a->adopted, a->released);
	TAILQ_FOREACH(b, &a->backings, link)
	{
		evbuffer_add_printf(
		    out, "  backing %s (%s%s%s) label %s:", b->node_id ? b->node_id : "-",
		    b->request_id ? "request " : "", b->request_id ? b->request_id : "",
		    b->failed ? " failed" : "", b->label);
		for (i = 0; i < b->nslots; i++)
			evbuffer_add_printf(out, " %s", b->slots[i].node ? b->slots[i].node : "-");
		evbuffer_add_printf(out, "\n");
	}
}

static struct sm_adapter *
ms_adapter_new(const struct sm_env *env, char *err, size_t errlen)
{
	struct sm_adapter *a = xcalloc(1, sizeof(*a));
	const json_t *pools = json_object_get(env->provider, "pools"), *pool;
	size_t i, j, n = 0;
	struct timeval tv = np_tv_of(MS_TICK);
	char buf[512];

	a->env = env;
	a->lc = env->host;
	a->anc = xcalloc(1, sizeof(*a->anc));
	a->anc->a = a;
	a->anc->refs = 1;
	TAILQ_INIT(&a->backings);
	TAILQ_INIT(&a->waiting);
	snprintf(buf, sizeof(buf), "NodePool:metastatic:%s", env->provider_name);
	a->my_id = xstrdup(buf);
	snprintf(buf, sizeof(buf), "/nodepool/metastatic/%s/requests", env->provider_name);
	a->journal_dir = xstrdup(buf);
	json_array_foreach(pools, i, pool) n += json_array_size(json_object_get(pool, "labels"));
	a->labels = xcalloc(n ? n : 1, sizeof(*a->labels));
	json_array_foreach(pools, i, pool)
	{
		const json_t *lv;
		json_array_foreach(json_object_get(pool, "labels"), j, lv)
		{
			struct ms_label *l = &a->labels[a->nlabels];
			const json_t *v;
			if (find_label(a, np_json_str(lv, "name", "")) != NULL)
				continue;
			l->name = xstrdup(np_json_str(lv, "name", ""));
			l->backing_label = xstrdup(np_json_str(lv, "backing-label", ""));
			v = json_object_get(lv, "max-parallel-jobs");
			l->max_parallel_jobs = json_is_integer(v) ? (int)json_integer_value(v) : 1;
			v = json_object_get(lv, "grace-time");
			l->grace_time = json_is_number(v) ? json_number_value(v) : 60;
			v = json_object_get(lv, "min-retention-time");
			l->min_retention = json_is_number(v) ? json_number_value(v) : 0;
			v = json_object_get(lv, "max-age");
			l->max_age = json_is_number(v) ? json_number_value(v) : 0;
			if (l->max_parallel_jobs < 1) {
				snprintf(err, errlen,
					 "label %s: max-parallel-jobs must be at least 1", l->name);
				a->nlabels++;
				a->stopping = 1;
				break;
			}
			a->nlabels++;
		}
	}
	if (a->stopping) {
		for (i = 0; i < a->nlabels; i++) {
			free(a->labels[i].name);
			free(a->labels[i].backing_label);
		}
		free(a->labels);
		free(a->my_id);
		free(a->journal_dir);
		free(a->anc);
		free(a);
		return NULL;
	}
	a->tick = event_new(env->base, -1, EV_PERSIST, tick_cb, a);
	if (a->tick == NULL || event_add(a->tick, &tv) != 0)
		np_oom();
	return a;
}

static void
ms_adapter_stop(struct sm_adapter *a)
{
	if (a->tick != NULL)
		event_del(a->tick);
}

static void
ms_adapter_free(struct sm_adapter *a)
{
	size_t i;

	if (a == NULL)
		return;
	/* replies still in flight find no record: their ops free themselves
	 * (they are not cancelled: the backing writes go on, as they must) */
	a->stopping = 1;
	if (a->tick != NULL)
		event_free(a->tick);
	while (!TAILQ_EMPTY(&a->backings))
		backing_free(a, TAILQ_FIRST(&a->backings));
	json_decref(a->init_owned);
	json_decref(a->init_journal);
	for (i = 0; i < a->nlabels; i++) {
		free(a->labels[i].name);
		free(a->labels[i].backing_label);
	}
	free(a->labels);
	free(a->my_id);
	free(a->journal_dir);
	a->anc->a = NULL; /* replies still to come find no adapter */
	anchor_unref(a->anc);
	free(a);
}

static const struct sm_adapter_ops metastatic_adapter = {
    .name = "metastatic",
    .adapter_new = ms_adapter_new,
    .adapter_stop = ms_adapter_stop,
    .adapter_free = ms_adapter_free,
    .create_machine = ms_create_machine,
    .delete_machine = ms_delete_machine,
    .list_instances = ms_list_instances,
    .nodescan_failed = ms_nodescan_failed,
    .dump = ms_dump,
};

/* upstream's MetastaticProviderConfig defaults, as the traits
 * (traits.c); host-key-checking is off unless a pool or label asks. rate
 * paces nothing: upstream's adapter makes a RateLimiter it never uses. */
static const struct sm_defaults metastatic_defaults = {
    .boot_timeout = 120,
    .rate = 1,
    .host_key_checking = 0,
};

static struct drv_provider *
metastatic_provider_new(struct drv_host *lc, char *err, size_t errlen)
{
	return sm_provider_new(&metastatic_adapter, &metastatic_defaults, lc, err, errlen);
}

const struct driver drv_metastatic = {
    .name = "metastatic",
    .pause_at_quota = 1,
    .reuse_only = 0,
    .full_records = 1,
    .delete_at_once = 1,
    .provider_new = metastatic_provider_new,
    SM_DRIVER_SLOTS,
};
