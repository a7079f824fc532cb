/*
 * Host services: what a driver calls back in the program that hosts it.
 *
 * Two programs host drivers: nodepool-launcher (worker/: the launcher,
 * its ZooKeeper session and caches, its launches and deletions) and
 * nodepool-builder (builder/upload.c: an upload worker makes one
 * provider's driver state with provider_new, never starts it, and calls
 * image_upload / image_delete). Each provides its services as one const
 * struct drv_host_ops and registers it once at start, with
 * drv_host_register(), before any provider_new (and so before any
 * state-machine adapter_new).
 *
 * Drivers do not see this struct: they call the drv_* functions declared
 * in driver.h, which drivers/host.c implements as thin dispatchers (one
 * pointer load, one test, one indirect call). A slot the host leaves NULL
 * gives the answer documented on the slot below: the answer of a host
 * that has no ZooKeeper session, no node records, no pools and no
 * launches, which is what the builder's upload workers are. So a new
 * service is a new slot here, a dispatcher in host.c with its NULL
 * answer, and the launcher's implementation; the builder needs no edit.
 * Before any registration every slot counts as NULL.
 *
 * The struct drv_host pointer a driver gets in provider_new, and passes
 * back to the services, is the host's handle: one the host embeds in its
 * own struct (worker/: struct launcher's `host`; builder/: struct
 * bld_host's), with owner set to that struct. Drivers see only the
 * incomplete type; host.c passes it to the slots unchanged, and a slot
 * finds its own struct at h->owner. No cast between a host's types and
 * the drivers' is needed anywhere.
 *
 * Single-threaded: slots are called on the host's event loop.
 */
#ifndef NP_DRV_HOST_H
#define NP_DRV_HOST_H

#include "drivers/driver.h"

/* The host's handle (see above). */
struct drv_host {
	void *owner; /* the host's own struct: struct launcher, struct bld_host */
};

struct drv_host_ops {
	/*
	 * The event loop the driver's I/O and timers run on (drv_event_base).
	 * Launcher: the worker's loop. Upload worker: its loop. NULL slot:
	 * NULL (a host that makes providers must fill this slot).
	 */
	struct event_base *(*event_base)(struct drv_host *lc);
	/*
	 * The host's ZooKeeper session (drv_zk), for drivers that read
	 * records. Launcher: its session. NULL slot: NULL (no session; the
	 * builder's upload workers have none, the builder parent holds it).
	 */
	struct zk *(*zk)(struct drv_host *lc);
	/*
	 * The provider's name (drv_provider_name), borrowed, valid while the
	 * provider lives. Launcher and upload worker: the nodepool.yaml
	 * provider name. NULL slot: "".
	 */
	const char *(*provider_name)(struct drv_host *lc);
	/*
	 * The provider's nodepool.yaml mapping as JSON, validated, borrowed
	 * (drv_provider_config). Launcher and upload worker: the provider's
	 * entry. NULL slot: NULL.
	 */
	const json_t *(*provider_config)(struct drv_host *lc);
	/*
	 * The provider's cached node records (drv_provider_nodes): *out gets
	 * an array valid until the loop runs again, the count is returned.
	 * Launcher: its node cache, this provider's nodes, any pool, any
	 * state. NULL slot: *out = NULL, 0 (no nodes).
	 */
	size_t (*provider_nodes)(struct drv_host *lc, const struct np_node ***out);
	/*
	 * 1 when /nodepool/nodes/<id> exists but is not a JSON object
	 * (drv_node_unreadable). Launcher: from its node cache. NULL slot: 0
	 * (no node records; a host without them runs no leak cleanup).
	 */
	int (*node_unreadable)(struct drv_host *lc, const char *id);
	/*
	 * Pool registrations of this provider held by other ZooKeeper
	 * sessions (drv_provider_peers; who gets the first one's hostname).
	 * Launcher: from its components cache. NULL slot: 0, who untouched
	 * (no peers).
	 */
	size_t (*provider_peers)(struct drv_host *lc, char *who, size_t wholen);
	/*
	 * 1 if the node has lock contenders (drv_node_locked). Launcher: the
	 * cached lock state or its own work on the node. NULL slot: 0.
	 */
	int (*node_locked)(struct drv_host *lc, const char *node_id);
	/*
	 * Any provider's node record by id (drv_node_get; contract in
	 * driver.h). Launcher: its node cache (whole records of every node
	 * when the driver sets full_records); a node it deleted and the cache
	 * still shows counts as gone. NULL slot: NULL (no node records).
	 */
	const struct np_node *(*node_get)(struct drv_host *lc, const char *node_id);
	/*
	 * Every whole node record (drv_all_nodes). Launcher: its node cache,
	 * any provider. NULL slot: *out = NULL, 0.
	 */
	size_t (*all_nodes)(struct drv_host *lc, const struct np_node ***out);
	/*
	 * A node request by id (drv_request_get). Launcher: its request
	 * cache. NULL slot: NULL (no requests).
	 */
	const struct np_request *(*request_get)(struct drv_host *lc, const char *request_id);
	/*
	 * 1 while the provider's serialization round is open
	 * (drv_registration_round). Launcher: its quota round (worker/quota.c),
	 * asked for when not open. NULL slot: 1 (nobody else registers).
	 */
	int (*registration_round)(struct drv_host *lc);
	/*
	 * 1 when this launcher is the one live launcher of the provider that
	 * acts on duty item key (drv_duty_mine; contract in driver.h).
	 * Launcher: rendezvous hashing over its provider's pool components
	 * (worker/assign.c, lc_duty_mine). NULL slot: 1 (no peers).
	 */
	int (*duty_mine)(struct drv_host *lc, const char *key);
	/*
	 * Write a launch's node record now (drv_store_node; contract in
	 * driver.h). Launcher: an ordered asynchronous write under the
	 * launch's node lock. NULL slot: -1 with errno EINVAL (no launch is
	 * ever in flight in a host without launches).
	 */
	int (*store_node)(struct drv_host *lc, const struct drv_launch *l);
	/*
	 * Register a new node record (drv_register_node; takes ownership of
	 * n). Launcher: a sequential create; done gets the id, or NULL and
	 * whether the outcome is unknown. NULL slot: n is freed and done (if
	 * any) is called at once with (NULL, 0, arg): refused, certainly not
	 * written.
	 */
	void (*register_node)(struct drv_host *lc, struct np_node *n,
			      void (*done)(const char *node_id, int unknown, void *arg), void *arg);
	/*
	 * 1 while connected with every cache synced (drv_in_sync). Launcher:
	 * its sync state. NULL slot: 1 (no caches to wait for).
	 */
	int (*in_sync)(struct drv_host *lc);
	/*
	 * Bumped each time the caches have (re-)synced (drv_sync_epoch).
	 * Launcher: its counter. NULL slot: 0 (never changes).
	 */
	unsigned (*sync_epoch)(struct drv_host *lc);
	/*
	 * Update a READY node in place under its lock (drv_update_node; takes
	 * ownership of n). NULL slot: n is freed, nothing is written.
	 */
	void (*update_node)(struct drv_host *lc, struct np_node *n);
	/*
	 * Delete a READY unallocated node (drv_deregister_node). NULL slot:
	 * nothing happens.
	 */
	void (*deregister_node)(struct drv_host *lc, const char *node_id);
	/*
	 * A launch completed (drv_launch_done). Launcher: stores the node
	 * READY / FAILED / ABORTED and goes on with the request. NULL slot:
	 * nothing happens (a host without launches hands out no drv_launch).
	 */
	void (*launch_done)(struct drv_launch *l, enum drv_launch_result result, const char *error);
	/*
	 * A deletion completed (drv_delete_done). Launcher: removes the node
	 * record, or retries later. NULL slot: nothing happens (a host without
	 * node records hands out no drv_delete).
	 */
	void (*delete_done)(struct drv_delete *d, int ok, const char *error);
};

/*
 * Make ops the host's services, for every drv_* call from now on. Called
 * once at start, before any provider_new; ops is borrowed and must outlive
 * every driver (a static const struct). NULL makes every slot NULL again
 * (tests). Not to be called while providers exist.
 */
void drv_host_register(const struct drv_host_ops *ops);

#endif
