/*
 * The driver interface: one const vtable per driver, as Nodepool's
 * nodepool.driver.Driver / Provider / NodeRequestHandler split (devguide,
 * "Writing A New Provider Driver"), made event-driven for a single-threaded
 * worker: nothing here may block; long work completes later through the
 * launcher's completion functions (drv_launch_done, drv_delete_done).
 * Drivers run hosted by nodepool-launcher or nodepool-builder; what they
 * call back is the "Host services" section below (drivers/host.h).
 *
 * Division of labour, as upstream: the launcher (worker/) owns everything
 * that touches ZooKeeper — request locks, node records and locks, accept,
 * decline, fulfil, reuse of ready nodes, quota arithmetic, cleanup timers —
 * and the driver supplies primitives: create a node's resource, delete it,
 * say which labels are ready, how much quota a label needs, what the cloud
 * allows. The state-machine framework is itself a driver that adapts cloud
 * Adapters to this vtable.
 *
 * Drivers are registered at compile time in drivers/registry.c (one array);
 * duplicate names stop start-up.
 */
#ifndef NP_DRIVER_H
#define NP_DRIVER_H

#include <stddef.h>
#include <jansson.h>

#include "protocol/model.h"

struct event_base;
struct evbuffer;
struct zk;
struct drv_host;    /* the host's handle, opaque here (host.h) */
struct np_provider; /* lib/config/config.h: a provider's validated config */

/* Opaque per-provider driver state, owned by the driver. */
struct drv_provider;

/*
 * Quota, as upstream's QuotaInformation: cores, instances, ram (MiB) and
 * named extras. Unlimited is INFINITY (upstream's math.inf). `resources` on a node is the
 * JSON form of this (compute dict: {"cores": n, "instances": n, "ram": n,
 * ...extras}).
 */
struct drv_quota {
	double cores, instances, ram;
	json_t *extra; /* object name -> number, or NULL */
};

/*
 * One launch in progress: the launcher creates the INIT node, locks it and
 * sets it BUILDING, then hands it to the driver's launch slot. The driver
 * fills in the node (external_id, addresses, host_keys, connection info, az,
 * cloud, region, resources...) and calls drv_launch_done() exactly once,
 * unless cancelled first.
 */
struct drv_launch {
	struct np_node *node;		  /* owned by the launcher; the driver may edit fields */
	const char *label;		  /* the label being launched */
	const struct np_request *request; /* the request it is for (read-only; may be NULL) */
	/*
	 * The availability zone to launch in, chosen by the launcher for the
	 * whole nodeset (upstream's StateMachineHandler.chosen_az, handed to
	 * getCreateStateMachine): NULL = the cloud's choice. Only set for
	 * drivers with a pool_azs slot. Borrowed from the request's handler,
	 * valid until drv_launch_done or launch_cancel; copy to keep longer.
	 */
	const char *az;
	/*
	 * 1: the node is a BUILDING node whose launch began in an earlier
	 * launcher (this worker before a restart, or a peer whose ZooKeeper
	 * session ended), adopted from its record: node->external_id names
	 * the instance already created. The driver takes that instance over
	 * and goes on from where the record says (waits for it to boot, scans
	 * it) instead of creating another; a failed takeover is a failed
	 * attempt (the instance is deleted, the retries create new ones).
	 * Only set for nodes the driver's launch_resumable slot accepted.
	 */
	int resume;
	void *drv;   /* driver's private per-launch state */
	void *owner; /* the launcher's; drivers leave it alone */
};

enum drv_launch_result {
	DRV_LAUNCH_READY,   /* node is up: the launcher stores it READY */
	DRV_LAUNCH_FAILED,  /* launch-retries exhausted or permanent error: FAILED */
	DRV_LAUNCH_ABORTED, /* cloud quota error: ABORTED, not a failure; handler pauses */
};

/* One deletion in progress (node locked and DELETING in ZooKeeper). */
struct drv_delete {
	struct np_node *node; /* owned by the launcher */
	void *drv;
};

/*
 * One diskimage upload, as upstream's ProviderManager.uploadImage
 * arguments (the builder's upload workers call image_upload; the
 * launcher never does). Everything is borrowed for the call.
 */
struct drv_image_upload {
	const char *image;	  /* the provider's diskimages[] entry name */
	const char *image_name;	  /* the name to give it in the cloud
				     (image-name-format applied) */
	const char *filename;	  /* the local file, streamed, never read whole */
	const char *format;	  /* "qcow2", "raw", "vhd"... */
	const json_t *metadata;	  /* tags: the diskimage's metadata, the provider
				     image's meta, nodepool_build_id,
				     nodepool_upload_id, nodepool_provider_name */
	const char *md5, *sha256; /* hex digests of the file, or NULL */
};
/* external_id of the new image, or NULL with error. */
typedef void (*drv_image_upload_cb)(const char *external_id, const char *error, void *arg);
/* One image of the cloud account, as the cloud lists it: everything
 * borrowed for the callback. */
struct drv_cloud_image {
	const char *id;	    /* the cloud's image id (an upload's external_id) */
	const char *name;   /* its name, or "" */
	const json_t *tags; /* object: its tags / properties (nodepool_build_id,
			       nodepool_upload_id, nodepool_provider_name...) */
};
/* The images (v[0..n)), or error (n 0) when the listing failed. */
typedef void (*drv_image_list_cb)(const struct drv_cloud_image *v, size_t n, const char *error,
				  void *arg);
/* ok 1 (gone, or never there), or 0 with error. */
typedef void (*drv_image_delete_cb)(int ok, const char *error, void *arg);

struct driver {
	const char *name; /* the `driver:` value in nodepool.yaml */
	/* PAUSE_AT_QUOTA: 1 = a handler at capacity pauses (cloud drivers);
	 * 0 = it releases the request (static). */
	int pause_at_quota;
	/* 1 = requests are served only by reusing existing ready nodes (static):
	 * the launcher never calls launch and consults label_available. */
	int reuse_only;
	/* 1 = the host keeps every node's record whole, whichever provider
	 * owns it, for drv_node_get / drv_all_nodes (metastatic reads its
	 * backing nodes, which belong to other providers). 0 = the host may
	 * keep whole records of this provider's nodes only (issue 13). */
	int full_records;
	/* 1 = a node's deletion frees what the next requests reuse (a static
	 * slot, a backing node's slot, a Kubernetes namespace kept for reuse):
	 * deleted at once. 0 = it frees only quota (the clouds): deferred
	 * LC_DELETE_DEFER behind the requests that come with a used node,
	 * unless a pool is paused at quota (worker/launcher.h,
	 * lc_schedule_delete_soon). */
	int delete_at_once;

	/*
	 * Create the provider's driver state from its config (the launcher's
	 * parsed provider). Return NULL with a message in err on failure (e.g.
	 * bad credentials: the worker then exits 100, do not restart).
	 */
	struct drv_provider *(*provider_new)(struct drv_host *lc, char *err, size_t errlen);
	/* Called once the ZooKeeper caches are synced and whenever the session
	 * is (re)established; the driver may register nodes (static). */
	void (*provider_start)(struct drv_provider *dp);
	/* Stop starting new work; in-flight work may complete. Then free. */
	void (*provider_stop)(struct drv_provider *dp);
	void (*provider_free)(struct drv_provider *dp);
	/* Periodic hook on the cleanup timer (leaked resources, static sync). */
	void (*cleanup)(struct drv_provider *dp);

	/* As Provider.labelReady: the label's prerequisites (images) exist:
	 * 1, or 0 (a request for it is declined). -1: not known yet (the
	 * provider's view of its image uploads is still being read, right
	 * after start): a request for it waits instead of being declined
	 * (upstream reads ZooKeeper synchronously and never answers that).
	 * NULL = always ready. */
	int (*label_ready)(struct drv_provider *dp, const char *label);
	/* As QuotaSupport.quotaNeededByLabel. NULL = 1 instance. */
	void (*label_quota)(struct drv_provider *dp, const char *pool, const char *label,
			    struct drv_quota *out);
	/*
	 * 1 when the label is permanently unusable in this provider, else 0:
	 * as upstream's Provider.errorLabels (StateMachineProvider: labels
	 * whose getQuotaForLabel raised a RuntimeConfigurationException),
	 * which NodeRequestHandler._invalidNodeTypes adds to the pool's
	 * invalid node types. The launcher declines a request needing such a
	 * label with "node type(s) [...] not available". Labels are by name,
	 * provider-wide; the mark lasts for the life of the driver state
	 * (a worker restart or a reload of the provider's config clears it).
	 * Synchronous, from data the driver holds. NULL = never.
	 */
	int (*label_error)(struct drv_provider *dp, const char *label);
	/* The most nodes of a label the pool could ever hold at once (static:
	 * the sum of max-parallel-jobs of its hosts with that label); a request
	 * needing more is declined. NULL or < 0 = unlimited. */
	long (*label_capacity)(struct drv_provider *dp, const char *pool, const char *label);
	/* Provider limits (cloud limits minus unmanaged usage). NULL = unlimited. */
	void (*provider_limits)(struct drv_provider *dp, struct drv_quota *out);

	/*
	 * Reuse check of a READY node before it is handed out (as
	 * NodeRequestHandler.checkReusableNode; static: TCP liveness). Calls
	 * done(node_id, ok, arg) exactly once, possibly synchronously. NULL =
	 * always reusable.
	 */
	void (*check_reusable)(struct drv_provider *dp, const struct np_node *node,
			       void (*done)(const char *node_id, int ok, void *arg), void *arg);

	/*
	 * The availability zones a new node of this pool may be launched in,
	 * appended to out (empty: the cloud's choice): as upstream's
	 * StateMachineHandler.setNodeMetadata, the pool's availability-zones,
	 * else the cloud's (Adapter.getAZs). Synchronous, from config or data
	 * the driver holds.
	 *
	 * A driver with this slot gets a request's nodeset grouped in one AZ,
	 * as upstream's StateMachineHandler (the launcher keeps the request's
	 * chosen AZ and applies the rules, since it picks ready nodes before
	 * locking them): the first ready node reused with a non-empty az fixes
	 * it; ready nodes whose az differs from a fixed one (a null az
	 * included) are not reused for the request; the first launch with none
	 * fixed picks one of these at random; every launch gets it in
	 * drv_launch.az. NULL = no grouping, drv_launch.az stays NULL (static).
	 */
	void (*pool_azs)(struct drv_provider *dp, const char *pool, struct np_strv *out);

	/* Start a launch; complete with drv_launch_done(). */
	void (*launch)(struct drv_provider *dp, struct drv_launch *l);
	/*
	 * 1 when launch can resume node (a BUILDING record left by a launcher
	 * that is gone: drv_launch.resume), from what the record holds
	 * (external_id, driver-specific fields); 0: the launcher deletes the
	 * node and its instance, as upstream does with every unlocked
	 * BUILDING node. Synchronous. NULL = never (no launch survives).
	 */
	int (*launch_resumable)(struct drv_provider *dp, const struct np_node *node);
	/* Cancel a launch in progress (no completion follows); the launcher
	 * then deletes the node normally. May be NULL if launch completes
	 * synchronously. */
	void (*launch_cancel)(struct drv_provider *dp, struct drv_launch *l);
	/*
	 * Give a launch in progress up without undoing it, because the
	 * launcher's ZooKeeper session has ended: its node lock is gone and
	 * a peer (or this launcher, re-registered) adopts the BUILDING node
	 * from its record, external_id included, and may already be watching
	 * the instance. No completion follows; what the cloud has named is
	 * left alone (deleting it would destroy the server the adopter
	 * resumes); what it has not named yet is deleted as by launch_cancel.
	 * No upstream counterpart (upstream deletes lost launches). NULL:
	 * launch_cancel is used.
	 */
	void (*launch_abandon)(struct drv_provider *dp, struct drv_launch *l);

	/* Delete the node's resource; complete with drv_delete_done(). Not
	 * found counts as success. NULL = nothing to delete. */
	void (*node_delete)(struct drv_provider *dp, struct drv_delete *d);
	/* Notification after the node's znode is gone (static: re-register). */
	void (*node_deleted)(struct drv_provider *dp, const struct np_node *node);
	/* Notification that a pool registration of this provider held by
	 * another ZooKeeper session went away (see drv_provider_peers), or
	 * that a registration round asked for opened (drv_registration_round).
	 * May be NULL. */
	void (*peers_changed)(struct drv_provider *dp);

	/* Append a human-readable state dump (SIGUSR2). May be NULL. */
	void (*dump)(struct drv_provider *dp, struct evbuffer *out);

	/*
	 * Image management, for nodepool-builder's upload workers (as
	 * upstream's ProviderManager.uploadImage / deleteImage). The provider
	 * is made with provider_new as in a launcher (the builder is the host:
	 * see "Host services" below, and drivers/host.h) and never started.
	 * The callback is called exactly once, later, on the loop, unless the
	 * provider is freed first. NULL: the driver manages no images.
	 */
	void (*image_upload)(struct drv_provider *dp, const struct drv_image_upload *u,
			     drv_image_upload_cb cb, void *arg);
	void (*image_delete)(struct drv_provider *dp, const char *external_id,
			     drv_image_delete_cb cb, void *arg);
	/*
	 * The disk image format this provider's uploads take ("qcow2", "raw",
	 * "vhd"...): what nodepool-builder builds for it and hands to
	 * image_upload, as upstream's builder asks each provider
	 * (OpenStack: the cloud's image_format in clouds.yaml, found as
	 * openstacksdk finds it; the other drivers: the provider's
	 * image-format, or the driver's fixed one).
	 *
	 * Asked by the builder's main process from the provider's validated
	 * config alone (no provider_new, no host, no loop): synchronous, no
	 * network, at most local files read; asked on every pass, so the
	 * answer follows an edited file without a restart. Writes a
	 * NUL-terminated name of [a-z0-9]+ into out (outlen bytes) and returns
	 * 0; or returns -1 with a one-line reason in err (errlen bytes): the
	 * builder then logs it once and builds and uploads qcow2, as before.
	 * A driver with image_upload has this slot; NULL: the driver uploads
	 * no images.
	 */
	int (*image_format)(const struct np_provider *p, char *out, size_t outlen, char *err,
			    size_t errlen);
	/*
	 * Every image of the provider's cloud account the driver can see,
	 * with its tags, as upstream's ProviderManager.listImages: for
	 * `nodepool alien-image-list` (the CLI hosts the provider as the
	 * builder's upload workers do: made, never started) and for the
	 * launcher's leak cleanup of uploads. cb is called exactly once,
	 * later, on the loop, unless the provider is freed first. NULL: the
	 * driver has no images (a driver with image_upload has this slot).
	 */
	void (*image_list)(struct drv_provider *dp, drv_image_list_cb cb, void *arg);
};

/*
 * Host services: what a driver may call back in the program hosting it,
 * nodepool-launcher (worker/) or nodepool-builder (builder/upload.c: an
 * upload worker hosts one provider at a time to call image_upload and
 * image_delete). The functions below are implemented in drivers/host.c as
 * thin dispatchers to the struct drv_host_ops the host registered at start
 * (drivers/host.h, which documents every slot); a service the host leaves
 * NULL answers as a host with no ZooKeeper session, no node records, no
 * pools and no launches: the answer is given with each function below
 * ("no host:"). The builder fills only the loop, the provider's name and
 * its config. A new service is a new slot in host.h, a dispatcher in
 * host.c and the launcher's implementation; the builder needs no edit.
 *
 * The struct drv_host pointer a driver gets in provider_new, and passes to
 * these functions, is the host's handle, opaque to drivers (host.h): the
 * driver interface names no type of the programs that host it. A pool is
 * given to a driver by its nodepool.yaml name (label_quota,
 * label_capacity, pool_azs).
 */

/*
 * Completion functions: the launcher stores the node READY, FAILED or
 * ABORTED and goes on with the request; removes the deleted node's record
 * (or retries the deletion later). No host: nothing happens.
 */
void drv_launch_done(struct drv_launch *l, enum drv_launch_result result, const char *error);
void drv_delete_done(struct drv_delete *d, int ok, const char *error);

/* The host's event loop. No host: NULL (every host fills it). */
struct event_base *drv_event_base(struct drv_host *lc);
/* The launcher's ZooKeeper session (for drivers that read upload records).
 * No host (and the builder's upload workers): NULL. */
struct zk *drv_zk(struct drv_host *lc);
/* The provider's name. No host: "". */
const char *drv_provider_name(struct drv_host *lc);
/* The provider's config as JSON (the nodepool.yaml mapping, validated).
 * No host: NULL. */
const json_t *drv_provider_config(struct drv_host *lc);
/* The cached node records of this provider (any pool, any state); array
 * valid until the loop runs again. No host: *out = NULL, 0. */
size_t drv_provider_nodes(struct drv_host *lc, const struct np_node ***out);
/* 1 when /nodepool/nodes/<id> exists but is not a JSON object (so no
 * provider can be told from it): a leak cleanup must not take the
 * instance of such a node for a leak. 0 otherwise. No host: 0. */
int drv_node_unreadable(struct drv_host *lc, const char *id);
/*
 * Pool registrations (/nodepool/components/pool) of this provider held by
 * ZooKeeper sessions other than ours: a previous incarnation of this worker
 * whose session has not expired yet (kill -9, hang), or another launcher
 * serving the same provider. Until such a session ends, writes it sent may
 * still land. who (may be NULL) gets the first one's hostname. No upstream
 * counterpart: upstream's static driver registers blindly and dedupes on
 * its next cleanup pass. No host: 0, who untouched.
 */
size_t drv_provider_peers(struct drv_host *lc, char *who, size_t wholen);
/*
 * Registrations (drv_register_node) by every launcher serving this
 * provider, and every incarnation of one, are made one launcher at a time:
 * 1 while this launcher's round is open, its view of the provider's nodes
 * holding every node registered before (a create that landed before the
 * round, or never will); registrations made now are part of the round,
 * which ends once they are answered. 0: a round is asked for, and the
 * driver's peers_changed slot is called once it opens (call again then).
 * So each static slot is registered once at every instant, whichever
 * nodepoold instances serve the provider and whichever dies (issue 22).
 * No host: 1.
 */
int drv_registration_round(struct drv_host *lc);
/*
 * One actor per duty (issue 22): 1 when this launcher is the one live
 * launcher serving the provider that acts on the duty item key (a
 * NUL-terminated string naming the item, prefixed by its duty:
 * "leak/<node id>", "static/<host name>"...), 0 when a peer is. Every
 * launcher of the provider computes the same answer from the same pool
 * registrations (rendezvous hashing of launcher id and key, as requests
 * are shared), so each item has exactly one actor while the registrations
 * stand, and a lost launcher's items move to the others once its
 * registrations go (its ZooKeeper session ends). No host: 1.
 */
int drv_duty_mine(struct drv_host *lc, const char *key);
/* 1 if the node has lock contenders (cached "probably locked"). No host: 0. */
int drv_node_locked(struct drv_host *lc, const char *node_id);
/*
 * Any provider's node record by id, from the host's cache: borrowed, valid
 * until the loop runs again; NULL when the node is not (or no longer)
 * there, or when its record is not kept whole (a driver wanting other
 * providers' records sets full_records). What a driver reads to follow a
 * node it uses but does not own (metastatic: its backing nodes, as
 * upstream's zk.getNode). No host: NULL.
 */
const struct np_node *drv_node_get(struct drv_host *lc, const char *node_id);
/* Every node record the host keeps whole, any provider (with full_records
 * set: every readable node). *out: an array valid until the loop runs
 * again; returns the count. As upstream's zk.nodeIterator(). No host:
 * *out = NULL, 0. */
size_t drv_all_nodes(struct drv_host *lc, const struct np_node ***out);
/* A node request by id (/nodepool/requests/<id>), from the host's cache:
 * borrowed, valid until the loop runs again; NULL when it does not exist
 * (or is malformed). For a driver that requests nodes itself and follows
 * its requests (metastatic's backing requests). No host: NULL. */
const struct np_request *drv_request_get(struct drv_host *lc, const char *request_id);
/*
 * Write a launch's node record to ZooKeeper now, as l->node stands, while
 * the launch goes on: as StateMachineNodeLauncher's zk.storeNode(node)
 * once the create state machine reports the instance's external_id, so
 * that if this launcher dies mid-launch, whoever deletes the BUILDING
 * node (its lock gone with our session) can delete the instance too.
 *
 * l must be a launch handed to the driver's launch slot and not yet
 * completed or cancelled; the launcher locked its node before handing it
 * over and still holds that lock. The node is encoded before the call
 * returns: it stays the launcher's, and the driver may go on editing it.
 * The write is asynchronous, one of the session's ordered writes (the
 * launch's final store comes after it); a write that fails is logged and
 * counted as the launcher's last error, and the launch goes on (the final
 * store writes everything again). Returns 0 when the write was sent; -1
 * with errno EINVAL when l is not a launch in flight (always, with no
 * host), ESTALE when the node lock is no longer held (session expired: the
 * launch is about to be cancelled), ENOTCONN when the ZooKeeper connection
 * is down (nothing is queued; the final store covers it).
 */
int drv_store_node(struct drv_host *lc, const struct drv_launch *l);
/*
 * Register a new node record (static driver): the node is written as given
 * (state, provider, pool, launcher, type...) as a new sequential znode.
 * Takes ownership of n. done (may be NULL) gets the new id, or NULL on
 * error; unknown is 1 when the create's outcome is unknown (the connection
 * or the session was lost before the reply: it may have landed; the node
 * cache shows it once drv_sync_epoch() has moved on). No host: n is freed
 * and done gets (NULL, 0) before the call returns.
 */
void drv_register_node(struct drv_host *lc, struct np_node *n,
		       void (*done)(const char *node_id, int unknown, void *arg), void *arg);
/*
 * 1 while connected with every cache (nodes, requests, pool registrations)
 * synced: what drv_provider_nodes() and drv_provider_peers() say is then
 * current. After a lost connection or an expiry it is 0 until the caches
 * have re-synced, and then provider_start is called again: a driver takes
 * no decision on what it reads meanwhile (a static slot registered twice).
 * No host: 1 (no caches to wait for).
 */
int drv_in_sync(struct drv_host *lc);
/* Bumped each time the caches have (re-)synced. No host: 0. */
unsigned drv_sync_epoch(struct drv_host *lc);
/* Update a READY, unallocated, unlocked node in place under its lock (static
 * config change); takes ownership of n (whose id names the node). No host:
 * n is freed. */
void drv_update_node(struct drv_host *lc, struct np_node *n);
/* Deregister: lock non-blocking and delete the node if it is still READY,
 * unallocated; otherwise leave it (retried on the next sync). No host:
 * nothing happens. */
void drv_deregister_node(struct drv_host *lc, const char *node_id);

/* Registry: the driver for a name, or NULL. */
const struct driver *driver_lookup(const char *name);
/* The i-th registered driver (0-based), NULL past the last. */
const struct driver *driver_nth(size_t i);
/* 0, or -1 when two drivers share a name (start-up refuses to run). */
int driver_registry_check(void);

/* Quota arithmetic helpers (as upstream's QuotaInformation). */
void drv_quota_init(struct drv_quota *q, double cores, double instances, double ram);
void drv_quota_unlimited(struct drv_quota *q);
void drv_quota_clear(struct drv_quota *q);
void drv_quota_add(struct drv_quota *q, const struct drv_quota *other);
void drv_quota_sub(struct drv_quota *q, const struct drv_quota *other);
/* 1 when no limited value is negative. */
int drv_quota_non_negative(const struct drv_quota *q);
/* The node `resources` JSON (new reference) for a quota. */
json_t *drv_quota_to_json(const struct drv_quota *q);
/* Fill from a node's resources JSON (NULL leaves zeros). */
void drv_quota_from_json(struct drv_quota *q, const json_t *resources);

#endif
