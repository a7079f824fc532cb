/*
 * The static driver, as upstream Nodepool's driver/static (the "Nodepool
 * Drivers" spec, seed 003; reference 3.3): pre-existing hosts registered
 * as READY nodes, one per slot (max-parallel-jobs); requests are served
 * only by reuse; a used node is deleted and a new READY node registered in
 * its slot. Config changes are applied by a sync at start, on every
 * cleanup pass and after each deletion: missing slots registered, removed
 * hosts or slots deregistered (when unlocked and unallocated), changed
 * attributes updated in place.
 *
 * Identity of a static node: (name, username, connection-port), unique.
 *
 * With host-key-checking (the default) a host is registered only after
 * its SSH host keys are scanned within `timeout` and include every
 * configured host-key; an unreachable host stays out of service and is
 * retried every STATIC_RETRY seconds until it answers. Before a node is
 * handed out its host must accept a TCP connection (liveness check),
 * unless host-key-checking is off.
 *
 * A slot is registered only in a registration round of the provider
 * (drv_registration_round): every launcher serving it (nodepoold on
 * several hosts, or a worker and its killed predecessor whose session has
 * not expired yet) registers one at a time, under one ZooKeeper lock, from
 * a view holding every node registered before. Upstream registers anyway
 * and may briefly hold two nodes for one slot; here each slot has one node
 * at every instant, and a launcher that dies leaves its slots to the
 * others (the nodes stay). Each host has one registrant (duty_mine): a
 * lost launcher's hosts pass to a peer when its registration goes.
 */
#include "lib/config/jsonget.h"
#include "lib/core/xalloc.h"
#include "drivers/driver.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "lib/core/log.h"
#include "lib/net/nodescan.h"
#include "lib/core/clock.h"

#define STATIC_RETRY 3.0 /* s between scans of an unreachable host (upstream: 60) */

struct static_host {
	char *pool;
	char *name;
	struct np_strv labels;
	char *username;
	double timeout;
	struct np_strv host_keys;
	int host_key_checking;
	char *connection_type;
	int connection_port;
	char *shell_type;
	char *python_path;
	int max_parallel_jobs;
	json_t *attributes; /* pool node-attributes */
	int scanning;	    /* registration scan in flight */
	double next_try;    /* monotonic s; 0 = now */
	struct np_strv scanned_keys;
};

/* Contexts of the driver's asynchronous work, freed with the provider when
 * their callbacks will never run (the launcher stopped first). */
struct sctx {
	struct sctx *prev, *next;
};

/*
 * A slot's registration until the node cache shows its node: first the
 * create in flight (id NULL), then the created node the cache has not read
 * yet (the create's reply comes before the cache's read of the new child,
 * and a sync in between must not take the slot for empty). Dropped when
 * the cache has the id, the node is deleted, the create fails, or
 * PENDING_MAX seconds after the create (deleted before we saw it).
 */
struct pending {
	struct pending *next;
	char key[64]; /* "<host index>/<slot>" */
	char *id;     /* the new node's id, NULL while the create is in flight */
	double since; /* monotonic seconds at the create's reply */
	/* the create's outcome is unknown (connection lost): held until the
	 * caches have re-synced (drv_sync_epoch past epoch) */
	int unknown;
	unsigned epoch;
};

#define PENDING_MAX 30.0

static void
pending_drop(struct pending **pp)
{
	struct pending *p = *pp;

	*pp = p->next;
	free(p->id);
	free(p);
}

struct drv_provider {
	struct drv_host *lc;
	struct sctx ctxs; /* list head */
	char *name;
	struct static_host *hosts;
	size_t n_hosts;
	struct pending *pending; /* slots registered, not yet in the node cache */
	struct nodescan *scanner;
	struct event *retry_ev;
	int stopped;
	int waiting_peer; /* registration held back for another session */
};

static void *
sctx_new(struct drv_provider *dp, size_t size)
{
	struct sctx *c = calloc(1, sizeof(*c) + size);

	if (c == NULL)
		abort();
	c->next = dp->ctxs.next;
	c->prev = &dp->ctxs;
	dp->ctxs.next->prev = c;
	dp->ctxs.next = c;
	return c + 1;
}

static void
sctx_free(void *p)
{
	struct sctx *c = (struct sctx *)p - 1;

	c->prev->next = c->next;
	c->next->prev = c->prev;
	free(c);
}

static void
strv_from_json(struct np_strv *sv, const json_t *v)
{
	size_t i;
	const json_t *e;

	if (json_is_string(v)) {
		np_strv_push(sv, json_string_value(v));
		return;
	}
	json_array_foreach(v, i, e) if (json_is_string(e)) np_strv_push(sv, json_string_value(e));
}

static struct drv_provider *
static_provider_new(struct drv_host *lc, char *err, size_t errlen)
{
	struct drv_provider *dp = calloc(1, sizeof(*dp));
	const json_t *cfg = drv_provider_config(lc), *pool, *node;
	size_t i, j, n = 0;

	dp->lc = lc;
	dp->ctxs.next = dp->ctxs.prev = &dp->ctxs;
	dp->name = strdup(drv_provider_name(lc));
	json_array_foreach(json_object_get(cfg, "pools"), i, pool) n +=
	    json_array_size(json_object_get(pool, "nodes"));
	dp->hosts = calloc(n ? n : 1, sizeof(*dp->hosts));
	json_array_foreach(json_object_get(cfg, "pools"), i, pool)
	{
		json_array_foreach(json_object_get(pool, "nodes"), j, node)
		{
			struct static_host *h = &dp->hosts[dp->n_hosts++];
			const json_t *hkc = json_object_get(node, "host-key-checking");
			const json_t *attrs = json_object_get(pool, "node-attributes");
			h->pool = strdup(np_json_str(pool, "name", "main"));
			h->name = strdup(np_json_str(node, "name", ""));
			strv_from_json(&h->labels, json_object_get(node, "labels"));
			h->username = strdup(np_json_str(node, "username", "zuul"));
			h->timeout = np_json_num(node, "timeout", 5);
			strv_from_json(&h->host_keys, json_object_get(node, "host-key"));
			h->host_key_checking = json_is_boolean(hkc) ? json_is_true(hkc) : 1;
			h->connection_type = strdup(np_json_str(node, "connection-type", "ssh"));
			h->connection_port = (int)np_json_num(node, "connection-port",
							      np_json_num(node, "ssh-port", 22));
			h->shell_type = xstrdup(np_json_str(node, "shell-type", NULL));
			h->python_path = strdup(np_json_str(node, "python-path", "auto"));
			h->max_parallel_jobs = (int)np_json_num(node, "max-parallel-jobs", 1);
			h->attributes = json_is_object(attrs) ? json_deep_copy(attrs) : NULL;
		}
	}
	dp->scanner = nodescan_new(drv_event_base(lc), NULL, 0, 0);
	(void)err;
	(void)errlen;
	return dp;
}

static void
static_provider_free(struct drv_provider *dp)
{
	size_t i;

	if (dp == NULL)
		return;
	nodescan_free(dp->scanner);
	while (dp->ctxs.next != &dp->ctxs)
		sctx_free(dp->ctxs.next + 1);
	if (dp->retry_ev != NULL)
		event_free(dp->retry_ev);
	for (i = 0; i < dp->n_hosts; i++) {
		struct static_host *h = &dp->hosts[i];
		free(h->pool);
		free(h->name);
		np_strv_clear(&h->labels);
		free(h->username);
		np_strv_clear(&h->host_keys);
		np_strv_clear(&h->scanned_keys);
		free(h->connection_type);
		free(h->shell_type);
		free(h->python_path);
		json_decref(h->attributes);
	}
	free(dp->hosts);
	while (dp->pending != NULL)
		pending_drop(&dp->pending);
	free(dp->name);
	free(dp);
}

/* Does a node record belong to this configured host? (identity) */
static int
host_matches(const struct static_host *h, const struct np_node *n)
{
	return n->hostname != NULL && strcmp(n->hostname, h->name) == 0 &&
	       n->connection_port == h->connection_port && n->username != NULL &&
	       strcmp(n->username, h->username) == 0;
}

static int
node_live(const struct np_node *n)
{
	return n->state != NP_NODE_DELETING && n->state != NP_NODE_DELETED;
}

static struct np_node *
host_node(struct drv_provider *dp, struct static_host *h, int slot)
{
	struct np_node *n = np_node_new();
	struct in6_addr a6;
	struct in_addr a4;
	size_t i;

	np_node_set_state(n, NP_NODE_READY);
	n->created_time = n->state_time;
	n->provider = strdup(dp->name);
	n->pool = strdup(h->pool);
	for (i = 0; i < h->labels.n; i++)
		np_strv_push(&n->type, h->labels.v[i]);
	n->external_id = strdup(h->name);
	n->hostname = strdup(h->name);
	n->interface_ip = strdup(h->name);
	if (inet_pton(AF_INET, h->name, &a4) == 1)
		n->public_ipv4 = strdup(h->name);
	else if (inet_pton(AF_INET6, h->name, &a6) == 1)
		n->public_ipv6 = strdup(h->name);
	n->launcher = strdup("static driver");
	free(n->connection_type);
	n->connection_type = strdup(h->connection_type);
	n->connection_port = h->connection_port;
	free(n->username);
	n->username = strdup(h->username);
	n->python_path = strdup(h->python_path);
	n->shell_type = xstrdup(h->shell_type);
	if (h->host_key_checking)
		np_strv_copy(&n->host_keys, &h->scanned_keys);
	else
		np_strv_copy(&n->host_keys, &h->host_keys);
	if (h->attributes != NULL)
		n->attributes = json_deep_copy(h->attributes);
	n->slot = slot;
	return n;
}

/* Fields a config change may alter on a registered node. */
static int
node_differs(const struct np_node *cur, const struct np_node *want)
{
	size_t i;

	if (cur->type.n != want->type.n)
		return 1;
	for (i = 0; i < cur->type.n; i++)
		if (strcmp(cur->type.v[i], want->type.v[i]) != 0)
			return 1;
	if ((cur->pool == NULL) != (want->pool == NULL) ||
	    (cur->pool && strcmp(cur->pool, want->pool) != 0))
		return 1;
	if (strcmp(cur->connection_type ? cur->connection_type : "",
		   want->connection_type ? want->connection_type : "") != 0)
		return 1;
	if (strcmp(cur->python_path ? cur->python_path : "",
		   want->python_path ? want->python_path : "") != 0)
		return 1;
	if (strcmp(cur->shell_type ? cur->shell_type : "",
		   want->shell_type ? want->shell_type : "") != 0)
		return 1;
	if (!json_equal(cur->attributes ? cur->attributes : json_null(),
			want->attributes ? want->attributes : json_null()))
		return 1;
	return 0;
}

struct reg {
	struct drv_provider *dp;
	char key[64];
};

static struct pending **
pending_find(struct drv_provider *dp, const char *key, const char *id)
{
	struct pending **pp;

	for (pp = &dp->pending; *pp != NULL; pp = &(*pp)->next)
		if ((key != NULL && strcmp((*pp)->key, key) == 0) ||
		    (id != NULL && (*pp)->id != NULL && strcmp((*pp)->id, id) == 0))
			return pp;
	return NULL;
}

static void
reg_done(const char *node_id, int unknown, void *arg)
{
	struct reg *r = arg;
	struct pending **pp = pending_find(r->dp, r->key, NULL);

	if (pp != NULL) {
		if (node_id == NULL && unknown) {
			/* it may have landed: the re-synced node cache tells */
			(*pp)->unknown = 1;
			(*pp)->epoch = drv_sync_epoch(r->dp->lc);
		} else if (node_id == NULL)
			pending_drop(pp); /* failed: the next sync tries again */
		else {
			(*pp)->id = strdup(node_id);
			(*pp)->since = np_mono_s();
		}
	}
	sctx_free(r);
}

/* Drop the registrations the cache now shows (or that waited too long). */
static void
pending_settle(struct drv_provider *dp, const struct np_node **nodes, size_t n)
{
	struct pending **pp = &dp->pending;
	double now = np_mono_s();
	size_t i;

	while (*pp != NULL) {
		struct pending *p = *pp;
		int seen = (p->id != NULL && now - p->since > PENDING_MAX) ||
			   (p->unknown && drv_sync_epoch(dp->lc) != p->epoch);
		for (i = 0; i < n && !seen && p->id != NULL; i++)
			seen = nodes[i]->id != NULL && strcmp(nodes[i]->id, p->id) == 0;
		if (seen)
			pending_drop(pp);
		else
			pp = &p->next;
	}
}

static void static_sync(struct drv_provider *dp);

static void
register_slot(struct drv_provider *dp, size_t hi, int slot)
{
	struct static_host *h = &dp->hosts[hi];
	struct reg *r = sctx_new(dp, sizeof(*r));
	struct pending *p;

	r->dp = dp;
	snprintf(r->key, sizeof(r->key), "%zu/%d", hi, slot);
	if ((p = calloc(1, sizeof(*p))) == NULL)
		abort();
	snprintf(p->key, sizeof(p->key), "%s", r->key);
	p->next = dp->pending;
	dp->pending = p;
	log_info("registering static node %s port %d slot %d (%s)", h->name, h->connection_port,
		 slot, h->pool);
	drv_register_node(dp->lc, host_node(dp, h, slot), reg_done, r);
}

/* ---- host-key scans --------------------------------------------------------- */

struct scan_ctx {
	struct drv_provider *dp;
	size_t hi;
};

static void
retry_cb(evutil_socket_t fd, short what, void *arg)
{
	static_sync(arg);
}

static void
schedule_retry(struct drv_provider *dp)
{
	struct timeval tv = {(time_t)STATIC_RETRY, 0};

	if (dp->retry_ev == NULL)
		dp->retry_ev = event_new(drv_event_base(dp->lc), -1, 0, retry_cb, dp);
	if (!event_pending(dp->retry_ev, EV_TIMEOUT, NULL))
		event_add(dp->retry_ev, &tv);
}

static void
scan_done(const struct nodescan_result *res, void *arg)
{
	struct scan_ctx *c = arg;
	struct drv_provider *dp = c->dp;
	struct static_host *h = &dp->hosts[c->hi];
	size_t i;

	sctx_free(c);
	h->scanning = 0;
	if (dp->stopped)
		return;
	if (res->status != NODESCAN_OK) {
		log_warn("static node %s:%d unreachable, kept out of service: %s", h->name,
			 h->connection_port, res->error);
		h->next_try = np_mono_s() + STATIC_RETRY;
		schedule_retry(dp);
		return;
	}
	np_strv_clear(&h->scanned_keys);
	for (i = 0; i < res->nkeys; i++)
		np_strv_push(&h->scanned_keys, res->keys[i]);
	if (!nodescan_keys_match((const char *const *)h->host_keys.v, h->host_keys.n,
				 (const char *const *)h->scanned_keys.v, h->scanned_keys.n)) {
		log_warn("static node %s: configured host-key not among the host's keys; "
			 "not registered",
			 h->name);
		np_strv_clear(&h->scanned_keys);
		h->next_try = np_mono_s() + STATIC_RETRY;
		schedule_retry(dp);
		return;
	}
	h->next_try = 0;
	static_sync(dp);
}

static int
host_ready_to_register(struct drv_provider *dp, size_t hi)
{
	struct static_host *h = &dp->hosts[hi];
	struct nodescan_params req;
	struct scan_ctx *c;

	if (!h->host_key_checking || h->scanned_keys.n > 0)
		return 1;
	if (h->scanning || np_mono_s() < h->next_try)
		return 0;
	memset(&req, 0, sizeof(req));
	req.host = h->name;
	req.port = h->connection_port;
	req.connection_type = h->connection_type;
	req.attempt_timeout = h->timeout;
	req.deadline = h->timeout;
	c = sctx_new(dp, sizeof(*c));
	c->dp = dp;
	c->hi = hi;
	h->scanning = 1;
	if (nodescan_start(dp->scanner, &req, scan_done, c) == NULL) {
		h->scanning = 0;
		sctx_free(c);
	}
	return 0;
}

/* ---- sync -------------------------------------------------------------------- */

/*
 * One actor per host (issue 22): of the launchers serving the provider,
 * the one drv_duty_mine names for "static/<host name>" registers the
 * host's slots, updates their attributes and deregisters its removed
 * nodes; the others leave them. When it is lost, its hosts are its peers'
 * once its registration goes (peers_changed syncs then).
 */
static int
duty_mine(struct drv_provider *dp, const char *name)
{
	char duty[300];

	snprintf(duty, sizeof(duty), "static/%s", name);
	return drv_duty_mine(dp->lc, duty);
}

static void
static_sync(struct drv_provider *dp)
{
	const struct np_node **nodes;
	size_t n, i, hi;
	int slot;
	char key[64];
	unsigned char *claimed;
	int round = -1; /* not asked yet */

	/* not on a view that is not current (provider_start comes again
	 * once the caches have re-synced) */
	if (dp->stopped || !drv_in_sync(dp->lc))
		return;
	n = drv_provider_nodes(dp->lc, &nodes);
	pending_settle(dp, nodes, n);
	claimed = calloc(n ? n : 1, 1);
	for (hi = 0; hi < dp->n_hosts; hi++) {
		struct static_host *h = &dp->hosts[hi];
		int mine = duty_mine(dp, h->name);
		for (slot = 0; slot < h->max_parallel_jobs; slot++) {
			const struct np_node *found = NULL;
			for (i = 0; i < n; i++) {
				if (claimed[i] || !node_live(nodes[i]) ||
				    !host_matches(h, nodes[i]) || nodes[i]->slot != slot)
					continue;
				found = nodes[i];
				claimed[i] = 1;
				break;
			}
			/* A node of this host whose slot is unknown (null, or a
			 * value of an odd type: model.h) takes this slot, so the
			 * slot is not given a second node. */
			for (i = 0; found == NULL && i < n; i++) {
				if (claimed[i] || !node_live(nodes[i]) ||
				    !host_matches(h, nodes[i]) || nodes[i]->slot >= 0)
					continue;
				found = nodes[i];
				claimed[i] = 1;
			}
			snprintf(key, sizeof(key), "%zu/%d", hi, slot);
			if (!mine)
				continue; /* a peer registers and updates it */
			if (found != NULL) {
				struct np_node *want;
				if (found->state != NP_NODE_READY || found->allocated_to != NULL ||
				    drv_node_locked(dp->lc, found->id))
					continue;
				want = host_node(dp, h, slot);
				np_strv_copy(&want->host_keys, &found->host_keys);
				if (node_differs(found, want)) {
					free(want->id);
					want->id = strdup(found->id);
					want->created_time = found->created_time;
					log_info("static node %s slot %d: updating attributes",
						 h->name, slot);
					drv_update_node(dp->lc, want);
				} else
					np_node_free(want);
				continue;
			}
			if (pending_find(dp, key, NULL) != NULL)
				continue;
			if (round < 0)
				round = drv_registration_round(dp->lc);
			if (!round) {
				/* registered in the provider's next round
				 * (peers_changed): one launcher at a time, so a
				 * create another launcher (or our killed
				 * predecessor) sent cannot give the slot a
				 * second node */
				dp->waiting_peer = 1;
				continue;
			}
			if (!host_ready_to_register(dp, hi))
				break; /* scan pending: no slot of this host yet */
			register_slot(dp, hi, slot);
		}
	}
	if (round == 1)
		dp->waiting_peer = 0;
	/* Nodes of ours that match no configured slot: deregister. */
	for (i = 0; i < n; i++) {
		if (claimed[i] || !node_live(nodes[i]) || nodes[i]->state != NP_NODE_READY ||
		    nodes[i]->allocated_to != NULL ||
		    !duty_mine(dp, nodes[i]->hostname ? nodes[i]->hostname : nodes[i]->id))
			continue;
		drv_deregister_node(dp->lc, nodes[i]->id);
	}
	free(claimed);
}

static void
static_provider_start(struct drv_provider *dp)
{
	static_sync(dp);
}

static void
static_provider_stop(struct drv_provider *dp)
{
	dp->stopped = 1;
}

static void
static_cleanup(struct drv_provider *dp)
{
	static_sync(dp);
}

static void
static_peers_changed(struct drv_provider *dp)
{
	/* a round opened, a peer was lost (its hosts may be ours now), or a
	 * peer recycled a node of a host we own */
	static_sync(dp);
}

static void
static_node_deleted(struct drv_provider *dp, const struct np_node *node)
{
	struct pending **pp;

	/* served and recycled before a sync saw it in the cache */
	if (node->id != NULL && (pp = pending_find(dp, NULL, node->id)) != NULL)
		pending_drop(pp);
	/* a used node is gone: register a new one in its slot */
	static_sync(dp);
}

static long
static_label_capacity(struct drv_provider *dp, const char *pool, const char *label)
{
	size_t i;
	long cap = 0;

	for (i = 0; i < dp->n_hosts; i++) {
		const struct static_host *h = &dp->hosts[i];
		if (np_strv_contains(&h->labels, label) && strcmp(pool, h->pool) == 0)
			cap += h->max_parallel_jobs;
	}
	return cap;
}

/* ---- liveness check before hand-out ------------------------------------------- */

struct live_ctx {
	void (*done)(const char *node_id, int ok, void *arg);
	void *arg;
	char node_id[64];
};

static void
live_done(const struct nodescan_result *res, void *arg)
{
	struct live_ctx *c = arg;

	c->done(c->node_id, res->status == NODESCAN_OK, c->arg);
	sctx_free(c);
}

static void
static_check_reusable(struct drv_provider *dp, const struct np_node *node,
		      void (*done)(const char *node_id, int ok, void *arg), void *arg)
{
	struct live_ctx *c;
	size_t i;
	double timeout = 5;
	int hkc = 1;

	for (i = 0; i < dp->n_hosts; i++) {
		if (host_matches(&dp->hosts[i], node)) {
			hkc = dp->hosts[i].host_key_checking;
			timeout = dp->hosts[i].timeout;
			break;
		}
	}
	if (!hkc || node->hostname == NULL) {
		done(node->id, 1, arg);
		return;
	}
	c = sctx_new(dp, sizeof(*c));
	c->done = done;
	c->arg = arg;
	snprintf(c->node_id, sizeof(c->node_id), "%s", node->id);
	if (nodescan_check_reachable(dp->scanner, node->hostname, node->connection_port, timeout,
				     live_done, c) == NULL) {
		sctx_free(c);
		done(node->id, 1, arg);
	}
}

static void
static_dump(struct drv_provider *dp, struct evbuffer *out)
{
	(void)dp;
	(void)out;
}

const struct driver drv_static = {
    .name = "static",
    .pause_at_quota = 0,
    .reuse_only = 1,
    .delete_at_once = 1,
    .provider_new = static_provider_new,
    .provider_start = static_provider_start,
    .provider_stop = static_provider_stop,
    .provider_free = static_provider_free,
    .cleanup = static_cleanup,
    .label_capacity = static_label_capacity,
    .check_reusable = static_check_reusable,
    .node_deleted = static_node_deleted,
    .peers_changed = static_peers_changed,
    .dump = static_dump,
};
