/*
 * The cloud Adapter contract of the state-machine framework, as upstream
 * Nodepool's nodepool.driver.statemachine Adapter / StateMachine /
 * Instance / Resource (the "State Machine Drivers" developer guide, seed
 * 004; reference 3.2), made non-blocking for a single-threaded worker.
 *
 * An adapter knows one cloud's API; the framework (statemachine.h) does
 * everything else: launch retries, timeouts, nodescan, quota accounting,
 * leak cleanup, node records. One adapter instance serves one provider.
 *
 * Rules every slot follows:
 *   - Nothing blocks. A cloud call is started and its answer arrives later
 *     on the worker's loop (lib/net/http.h for HTTP APIs).
 *   - State machines are polled: advance() does what it can now and
 *     returns SM_AGAIN ("not yet"); the framework calls it again after
 *     m->retry_in seconds, or as soon as the adapter calls
 *     sm_machine_wake(m) (a call it made has answered), whichever is
 *     first. advance() is never re-entered and never called after free.
 *   - Asynchronous slots (list_*, delete_resource, quota_limits,
 *     upload_image, delete_image, console_log) call their callback exactly
 *     once, later, on the loop (never from inside the slot), unless the
 *     adapter is freed first: after adapter_free no callback is made.
 *   - Strings and JSON handed to a slot are borrowed for the duration of
 *     the call; the adapter copies what it keeps. What an adapter hands
 *     to a callback is borrowed for the duration of the callback.
 */
#ifndef NP_SM_ADAPTER_H
#define NP_SM_ADAPTER_H

#include <stddef.h>
#include <jansson.h>

#include "drivers/driver.h"
#include "protocol/model.h"

struct event_base;
struct evbuffer;
struct sm_adapter; /* the adapter's private state */
struct sm_label;   /* statemachine.h */
struct sm_image;   /* statemachine.h */
struct sm_config;  /* statemachine.h */

/* ---- instances and resources ----------------------------------------------- */

/*
 * A cloud instance in the framework's terms (upstream's Instance). The
 * adapter fills what it knows; NULL strings and -1/0 numbers mean unknown.
 * Owned by whoever holds it; free with sm_instance_free.
 */
struct sm_instance {
	char *external_id;  /* required: the cloud's id */
	int ready;	    /* the cloud says it is up */
	int deleted;	    /* the cloud says it is gone or going */
	char *interface_ip; /* required when ready: what nodescan and Zuul use */
	char *public_ipv4, *public_ipv6, *private_ipv4, *private_ipv6;
	char *cloud, *region, *az, *host_id;
	json_t *metadata;    /* object: the tags given at create (nodepool_*),
				as listed back by the cloud; never NULL */
	json_t *driver_data; /* anything, or NULL: stored as the node's driver_data */
	int slot;	     /* -1 = none */
	/* Optional overrides of what the image config set on the node
	 * (NULL / 0 = not overridden). */
	char *username, *python_path, *shell_type, *connection_type;
	int connection_port;
	/* An object to store as the node's connection_port instead of a
	 * number (the kubernetes drivers' credentials), or NULL; owned. */
	json_t *connection_port_obj;
	int has_host_keys; /* host_keys below replace the node's */
	struct np_strv host_keys;
	json_t *node_attributes; /* defaults under the pool's node-attributes, or NULL */
	/* What the instance uses (upstream's getQuotaInformation): at least
	 * instances = 1. */
	struct drv_quota quota;
};

struct sm_instance *sm_instance_new(void);    /* zeroed, slot -1, metadata {}, quota 1 instance */
void sm_instance_free(struct sm_instance *i); /* NULL is a no-op */

/* Set a string field: frees the old value, copies v (NULL clears). */
void sm_set_str(char **field, const char *v);

/*
 * A leakable cloud resource (upstream's Resource): instances, volumes,
 * images, ports... anything the adapter can list with its tags. type is a
 * singular noun ("instance", "volume"); its counter is leaked.<type>s.
 */
struct sm_resource {
	const char *type;
	const char *id;
	const json_t *metadata; /* object: nodepool_provider_name, nodepool_node_id,
				   nodepool_upload_id... (may be empty) */
};

/* ---- state machines ------------------------------------------------------- */

enum sm_status {
	SM_AGAIN, /* not yet: poll again after retry_in, or on sm_machine_wake */
	SM_DONE,  /* create: the instance is complete; delete: it is gone */
	SM_ERROR, /* see error / error_msg */
};

enum sm_error {
	SM_E_NONE,
	SM_E_FAILED,   /* this attempt failed (a retry may succeed) */
	SM_E_QUOTA,    /* the cloud refused for quota: the launch is ABORTED,
			  not retried (upstream's QuotaException) */
	SM_E_NOTFOUND, /* delete: the instance does not exist (counts as done) */
	SM_E_TIMEOUT,  /* set by the framework: launch-timeout, delete timeout */
};

struct sm_machine;

struct sm_machine_ops {
	/*
	 * Do what can be done now. Create machines: on SM_DONE set *out to a
	 * new instance (ownership passes to the framework); it must be ready.
	 * Delete machines: leave *out alone. Before returning SM_AGAIN set
	 * m->retry_in: seconds until a poll is useful (< 0: the default, 1 s
	 * as upstream; 0: the next loop turn), unless the adapter will call
	 * sm_machine_wake(). On SM_ERROR set m->error and m->error_msg.
	 */
	enum sm_status (*advance)(struct sm_machine *m, struct sm_instance **out);
	/* Abandon the machine: cancel the adapter's calls in flight for it
	 * and free it (m->external_id included). Called once, whatever the
	 * state. */
	void (*free)(struct sm_machine *m);
};

/*
 * A create or delete state machine (upstream's StateMachine). The adapter
 * embeds this as the first member of its own struct and fills ops; the
 * framework reads state and external_id and owns the fw_* fields.
 */
struct sm_machine {
	const struct sm_machine_ops *ops;
	const char *state; /* the adapter's state name, for logs and dumps
			      ("start", "submitted", "building"...) */
	char *external_id; /* create: the cloud's id, set (malloc'd) as soon
			      as known, so a failed or abandoned attempt can
			      be deleted; delete: the id being deleted */
	double retry_in;   /* see advance() */
	/* create: when (monotonic seconds, np_mono_s) the cloud answer that
	 * showed the instance ready was asked for (a shared listing's
	 * start); set before SM_DONE. 0: unknown, the framework takes the
	 * time advance() returned SM_DONE. Feeds the boot estimate that
	 * paces listings (listing_wait). */
	double seen_at;
	enum sm_error error;
	char error_msg[256];
	/* framework's */
	void *fw_run;
};

/* Ask the framework to advance m on the next loop turn (a call the
 * machine waits for has answered). Safe to call any number of times;
 * never re-enters advance(). A no-op once the machine is done. */
void sm_machine_wake(struct sm_machine *m);

/* ---- what a create machine is asked to build -------------------------------- */

struct sm_create_args {
	const char *hostname;		  /* "np<node id>" (Windows names: <= 15 chars) */
	const struct sm_label *label;	  /* the pool label (statemachine.h) */
	const char *image_external_id;	  /* a diskimage upload's id in this cloud;
					     NULL: use the label's cloud image */
	const json_t *metadata;		  /* object: store on the instance and list it back:
					     nodepool_node_id, nodepool_pool_name,
					     nodepool_provider_name */
	const struct np_request *request; /* the request it is for, or NULL */
	const char *az;			  /* availability zone, or NULL: the cloud's choice */
};

/* An image upload (the builder's job; the launcher does not call it). */
struct sm_upload_args {
	const struct sm_image *image; /* the provider's diskimage entry */
	const char *image_name;	      /* the name to give it in the cloud */
	const char *filename;	      /* the local file */
	const char *format;	      /* "qcow2", "raw", "vhd"... */
	const json_t *metadata;	      /* tags (nodepool_build_id, nodepool_upload_id,
					 nodepool_provider_name...) */
	const char *md5, *sha256;     /* of the file, or NULL */
};

/* The environment of an adapter (valid until adapter_free). */
struct sm_env {
	struct event_base *base;
	const char *provider_name;
	const json_t *provider;	     /* the provider's config (validated) */
	const struct sm_config *cfg; /* the framework's parse of it */
	/* The host's handle, for the drv_* host services (driver.h) an
	 * adapter needs beyond a cloud's API (metastatic: ZooKeeper, node and
	 * request records). */
	struct drv_host *host;
	/* Framework counters (object name -> integer: "leaked.instances",
	 * "launches.ready", "loop.lag_max_ms"...), for an adapter's own
	 * status output; read-only. */
	const json_t *stats;
	/*
	 * The cloud announced that instance external_id is about to go (an
	 * AWS spot interruption notice...); what: a one-line reason. Beyond
	 * upstream (which learns it when the instance is gone). The framework
	 * finds the node naming that instance: a READY node nobody has taken
	 * is set DELETING at once (its comment says why), so Zuul is never
	 * handed it; any other node (in use, allocated, locked) keeps its
	 * state and gets the reason in its record's comment (a version-checked
	 * write that never overwrites a concurrent one), for the operator and
	 * for Zuul's logs. Safe to call again for the same instance (the
	 * adapter should call once). Synchronous; the writes happen later.
	 */
	void (*instance_notice)(const struct sm_env *env, const char *external_id,
				const char *what);
	/*
	 * Beyond upstream (drivers/statemachine/pace.c): seconds from now
	 * (>= 0) until the adapter's next shared listing of instance states
	 * is useful, given the start of its last one (monotonic seconds,
	 * np_mono_s; 0: none yet) and the least gap between two that its
	 * rate allows (seconds). An adapter that polls its machines through
	 * one shared listing asks whenever somebody waits on it and no
	 * listing runs, and (re)arms its listing timer for the answer; its
	 * timer asks again when it fires (a machine may have finished
	 * meanwhile). Never sooner than SM_PACE_MIN_GAP after the last start.
	 */
	double (*listing_wait)(const struct sm_env *env, double last_start, double min_gap);
};

/*
 * env->listing_wait(env, last_start, min_gap) (runner.c), or where an
 * environment has none (an adapter's unit test) upstream's fixed period:
 * what remains of max(SM_DEFAULT_POLL, min_gap) since last_start.
 */
double sm_listing_wait(const struct sm_env *env, double last_start, double min_gap);

struct event;
/*
 * Arm an adapter's shared-listing timer ev (a libevent evtimer): when in < 0,
 * after pace_wait seconds (what its sm_listing_wait answered; re-armed at
 * every ask, as the pace may move); else in seconds after the last listing
 * started, since seconds ago (now when that is past), unless ev is already
 * pending. The adapter keeps the clock it reads since with.
 */
void sm_listing_arm(struct event *ev, double in, double since, double pace_wait);

/* ---- callbacks of the asynchronous slots -------------------------------------- */

/* error NULL on success; then v[0..n) is the listing. */
typedef void (*sm_instances_cb)(struct sm_instance *const *v, size_t n, const char *error,
				void *arg);
typedef void (*sm_resources_cb)(const struct sm_resource *v, size_t n, const char *error,
				void *arg);
/* ok 1, or 0 with error; "not found" counts as ok. */
typedef void (*sm_done_cb)(int ok, const char *error, void *arg);
/* limits: the cloud's (INFINITY where unlimited), or NULL with error. */
typedef void (*sm_quota_cb)(const struct drv_quota *limits, const char *error, void *arg);
/* external_id of the new image, or NULL with error. */
typedef void (*sm_upload_cb)(const char *external_id, const char *error, void *arg);
/* text (may be ""), or NULL with error. */
typedef void (*sm_console_cb)(const char *text, const char *error, void *arg);

/* ---- the adapter ---------------------------------------------------------------- */

struct sm_adapter_ops {
	const char *name; /* the driver name ("fake", "openstack") */
	/* 1 when each launcher sees a cloud of its own (the fake cloud lives
	 * in its worker, one state file per instance): the leaks a launcher
	 * lists are its own to delete, whatever the duty hash (leak/<id>)
	 * says, since no peer can see them. 0 for every real cloud. */
	int cloud_per_launcher;
	/* Beyond upstream (pace.c's budget): how many servers named pay for
	 * one shared listing of instance states; 0: SM_PACE_PER_LISTING (25,
	 * 0.04 listings a node). An adapter whose calls per node allow more
	 * (a cheap listing, other calls batched) may set fewer: each server
	 * then pays 1 / listing_servers listings, and a wave's listings are
	 * spread over more of its servers (sm_pace_aim). */
	double listing_servers;

	/* Create the adapter for env's provider (env stays valid until
	 * adapter_free). May start calls (a first listing, flavors). NULL
	 * with a message in err on failure (bad credentials: the worker exits
	 * 100, not restarted). */
	struct sm_adapter *(*adapter_new)(const struct sm_env *env, char *err, size_t errlen);
	/* Stop starting new work (provider stopping). May be NULL. */
	void (*adapter_stop)(struct sm_adapter *a);
	/* Free: cancel every call in flight without calling back. Machines
	 * are freed by the framework first. */
	void (*adapter_free)(struct sm_adapter *a);

	/* A machine that creates an instance as args says (upstream's
	 * getCreateStateMachine). Never NULL. The first advance() comes on a
	 * later loop turn. */
	struct sm_machine *(*create_machine)(struct sm_adapter *a,
					     const struct sm_create_args *args);
	/*
	 * A create machine that takes over instance external_id, created for
	 * the same node by an earlier launcher that is gone (a worker killed
	 * mid-launch, a peer whose ZooKeeper session ended): it goes on from
	 * the cloud's view of that instance (still building: wait; up: done;
	 * in error or gone: SM_E_FAILED) and never creates one. args as for
	 * create_machine; m->external_id is external_id from the start. No
	 * upstream counterpart (upstream deletes such an instance). NULL: the
	 * adapter cannot, and such a node is deleted.
	 */
	struct sm_machine *(*resume_machine)(struct sm_adapter *a,
					     const struct sm_create_args *args,
					     const char *external_id);
	/* A machine that deletes external_id (getDeleteStateMachine); an
	 * instance that does not exist ends in SM_E_NOTFOUND or SM_DONE. */
	struct sm_machine *(*delete_machine)(struct sm_adapter *a, const char *external_id);

	/* Every instance this account can see, ours or not (listInstances),
	 * for unmanaged-quota accounting. */
	void (*list_instances)(struct sm_adapter *a, sm_instances_cb cb, void *arg);
	/* Every taggable resource, instances included (listResources), for
	 * leak cleanup. NULL: no leak cleanup. */
	void (*list_resources)(struct sm_adapter *a, sm_resources_cb cb, void *arg);
	/* Delete a resource from an earlier listing (deleteResource). */
	void (*delete_resource)(struct sm_adapter *a, const struct sm_resource *r, sm_done_cb cb,
				void *arg);

	/* The cloud's limits (getQuotaLimits). NULL: unlimited. */
	void (*quota_limits)(struct sm_adapter *a, sm_quota_cb cb, void *arg);
	/*
	 * What one node of the label uses (getQuotaForLabel), synchronously:
	 * from the config or data the adapter already holds (flavors fetched
	 * at start). out comes in as 1 instance. NULL: 1 instance.
	 *
	 * Returns 0, or -1 when the label can never work in this cloud as
	 * configured (upstream's RuntimeConfigurationException: an instance
	 * type the cloud does not have...), with a one-line reason in
	 * err[0..errlen) (NUL-terminated; out is then ignored). A -1 is
	 * permanent: the framework logs it and marks the label an error label
	 * (statemachine.c, driver slot label_error) until the worker restarts;
	 * the request in hand goes on with empty quota, every later request
	 * for the label is declined. A passing problem (a listing not yet in)
	 * is not a -1: answer from defaults instead.
	 */
	int (*label_quota)(struct sm_adapter *a, const struct sm_label *label,
			   struct drv_quota *out, char *err, size_t errlen);
	/* Whether the label's cloud image exists (labelReady), synchronously
	 * from held data; diskimage labels are the framework's business.
	 * NULL: always. */
	int (*label_ready)(struct sm_adapter *a, const struct sm_label *label);
	/* Availability zones to pick from when the pool names none (getAZs);
	 * append to out. NULL or none: let the cloud choose. */
	void (*azs)(struct sm_adapter *a, struct np_strv *out);

	/* Image management (the builder's uploads). May be NULL. */
	void (*upload_image)(struct sm_adapter *a, const struct sm_upload_args *u, sm_upload_cb cb,
			     void *arg);
	void (*delete_image)(struct sm_adapter *a, const char *external_id, sm_done_cb cb,
			     void *arg);
	/* Every image of the account with its tags (the driver's image_list
	 * slot): cb once, later, on the loop. An adapter with upload_image
	 * has it. May be NULL. */
	void (*list_images)(struct sm_adapter *a, drv_image_list_cb cb, void *arg);
	/* 1 when list_resources already reports the account's images (aws:
	 * its AMIs; fake: its images), so leak cleanup finds uploads' leaks
	 * there; 0: leak cleanup lists them with list_images (openstack). */
	int images_in_resources;

	/* The instance's console log (getConsoleLog), fetched when a
	 * nodescan fails and the label has console-log set. May be NULL. */
	void (*console_log)(struct sm_adapter *a, const struct sm_label *label,
			    const char *external_id, sm_console_cb cb, void *arg);
	/* A nodescan of this instance failed (notifyNodescanFailure). May be
	 * NULL. */
	void (*nodescan_failed)(struct sm_adapter *a, const struct sm_label *label,
				const char *external_id);

	/* Append a human-readable state dump (SIGUSR2). May be NULL. */
	void (*dump)(struct sm_adapter *a, struct evbuffer *out);
};

#endif
