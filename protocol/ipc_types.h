/*
 * IPC message catalogue, types only (functions are in ipc.h).
 *
 * nodepoold (the supervisor) fork+execs one nodepool-launcher per provider,
 * one nodepool-builder and one nodepool-web; each child holds its end of a Unix socketpair on
 * fd 3. nodepoolctl talks to the supervisor over the control socket. All of
 * them speak this one catalogue, framed as in ipc.h: a 4-byte big-endian
 * length, then one msgpack map.
 *
 * Every map carries "t" (the message name below, e.g. "STATUS") and "v"
 * (IPC_PROTO_VERSION). Keys are short strings; a decoder ignores keys it does
 * not know (so a field can be added without a version bump), and refuses a
 * message whose required keys are missing or of the wrong type. "v" changes
 * only for an incompatible change: a peer with another "v" is refused with
 * "protocol version N, expected M", which is how a supervisor notices a
 * worker binary from another install (or the reverse) after an upgrade.
 *
 * Ownership: every char * and array in a decoded message is malloc'd and
 * owned by the struct ipc_msg; ipc_msg_clear() frees them. NULL is msgpack
 * nil where a field allows it ("or nil" below), an empty list otherwise.
 * Integers are int64_t on the wire and here; counters, sizes and times are
 * never negative (the decoder refuses negative values there).
 */
#ifndef NP_IPC_TYPES_H
#define NP_IPC_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Incompatible wire changes bump this; "v" in every message. */
#define IPC_PROTO_VERSION 1

/* The default cap on one frame's body (bytes), as ipc_reader_new(0). */
#define IPC_FRAME_MAX_DEFAULT (1024 * 1024)
/* Length of the frame header: a big-endian uint32 giving the body length. */
#define IPC_FRAME_HDR 4

/*
 * The catalogue, grouped by direction. The wire name of each type is its
 * name without the IPC_ prefix ("READY", "CTL_STATUS", ...); see
 * ipc_type_name(). Values are not on the wire and may be renumbered.
 */
enum ipc_type {
	IPC_NONE = 0,
	/* worker, builder or web -> supervisor */
	IPC_READY,	/* struct ipc_ready: started, ZooKeeper session live */
	IPC_STATUS,	/* struct ipc_status: answer to STATUS_REQ (or unsolicited) */
	IPC_CONFIG_ACK, /* struct ipc_config_ack: answer to CONFIG */
	IPC_DUMP_REPLY, /* struct ipc_dump_reply: answer to DUMP_REQ */
	/* supervisor -> worker, builder or web */
	IPC_CONFIG,	/* struct ipc_config: the provider's config slice */
	IPC_STATUS_REQ, /* struct ipc_status_req */
	IPC_STOP,	/* struct ipc_stop */
	IPC_DUMP_REQ,	/* no fields: dump internal state as text */
	IPC_METRICS,	/* struct ipc_metrics: a provider's metrics record (to the web) */
	/* nodepoolctl -> supervisor */
	IPC_CTL_STATUS,	 /* struct ipc_ctl_status */
	IPC_CTL_RESTART, /* struct ipc_ctl_restart */
	IPC_CTL_RELOAD,	 /* no fields: re-read nodepool.yaml */
	IPC_CTL_STOP,	 /* no fields: stop every child, then the daemon */
	/* supervisor -> nodepoolctl */
	IPC_CTL_STATUS_REPLY, /* struct ipc_ctl_status_reply */
	IPC_CTL_RESULT,	      /* struct ipc_ctl_result */
	/* nodepool-builder -> one of its build or upload workers */
	IPC_JOB, /* struct ipc_job: run one build, upload or image delete */
	/* build or upload worker -> nodepool-builder */
	IPC_JOB_DONE, /* struct ipc_job_done: the job's outcome */
	IPC_TYPE_COUNT
};

/* Who sends a message; a channel accepts only what its peer may send. */
enum ipc_dir {
	IPC_DIR_NONE = 0,
	IPC_DIR_CHILD_TO_SUP,	 /* worker/builder -> supervisor */
	IPC_DIR_SUP_TO_CHILD,	 /* supervisor -> worker/builder */
	IPC_DIR_CTL_REQUEST,	 /* nodepoolctl -> supervisor */
	IPC_DIR_CTL_REPLY,	 /* supervisor -> nodepoolctl */
	IPC_DIR_BUILDER_TO_POOL, /* nodepool-builder -> its build/upload workers */
	IPC_DIR_POOL_TO_BUILDER	 /* build/upload worker -> nodepool-builder */
};

/* A worker's own view of itself (STATUS "state"). */
enum ipc_worker_state {
	IPC_WS_STARTING = 0, /* "starting" */
	IPC_WS_RUNNING,	     /* "running" */
	IPC_WS_PAUSED,	     /* "paused": every pool paused (at quota) */
	IPC_WS_DRAINING,     /* "draining": no new requests, finishing launches */
	IPC_WS_STOPPING,     /* "stopping" */
	IPC_WS_COUNT
};

/* ZooKeeper session state, as kazoo's KazooState plus the connecting phase. */
enum ipc_zk_state {
	IPC_ZK_UNKNOWN = 0, /* "unknown": no STATUS seen yet (supervisor's view) */
	IPC_ZK_CONNECTING,  /* "connecting" */
	IPC_ZK_CONNECTED,   /* "connected" */
	IPC_ZK_SUSPENDED,   /* "suspended": connection lost, session may survive */
	IPC_ZK_EXPIRED,	    /* "expired": session gone, ephemeral nodes and locks lost */
	IPC_ZK_COUNT
};

/* Kind of a supervised child (CTL_STATUS_REPLY "kind"). */
enum ipc_child_kind {
	IPC_KIND_PROVIDER = 0, /* "provider": a nodepool-launcher */
	IPC_KIND_BUILDER,      /* "builder": the nodepool-builder */
	IPC_KIND_WEB,	       /* "web": the nodepool-web (the web API) */
	IPC_KIND_COUNT
};

/* A list of strings (msgpack array of str). */
struct ipc_strv {
	char **v;
	size_t n;
};

/* One entry of a name -> count map, e.g. node state "ready" -> 3. */
struct ipc_count {
	char *name;
	int64_t n; /* >= 0 */
};

/* A msgpack map of str -> non-negative int, kept in wire order. */
struct ipc_counts {
	struct ipc_count *v;
	size_t n;
};

/* One pool of a provider, as STATUS "pools" items: {name, paused, requests}. */
struct ipc_pool {
	char *name;
	bool paused;	  /* "paused": at quota, upstream's PoolWorker paused_handler */
	int64_t requests; /* "requests": node requests in hand (accepted, not done) */
};

struct ipc_pools {
	struct ipc_pool *v;
	size_t n;
};

/*
 * READY {t, v, provider, pid, zk_session, version}: the child is up (driver
 * loaded, ZooKeeper session live); only then does the supervisor count it as
 * started. The builder sends its own name ("builder") as provider.
 */
struct ipc_ready {
	char *provider;	    /* "provider": provider (or builder) name */
	int64_t pid;	    /* "pid": >= 0 (the supervisor compares it with fork's) */
	int64_t zk_session; /* "zk_session": ZooKeeper session id (any int64) */
	char *version;	    /* "version": the binary's version string */
};

/*
 * STATUS: a worker's counters, answer to STATUS_REQ (seq echoed) or sent
 * unsolicited with seq 0. Counters count since the process started.
 */
struct ipc_status {
	int64_t seq;		 /* "seq": STATUS_REQ's seq, 0 if unsolicited */
	int64_t generation;	 /* "gen": config generation in force */
	int state;		 /* "state": enum ipc_worker_state */
	int zk_state;		 /* "zk": enum ipc_zk_state */
	int64_t accepted;	 /* "accepted": node requests accepted */
	int64_t fulfilled;	 /* "fulfilled" */
	int64_t declined;	 /* "declined" */
	int64_t failed;		 /* "failed" */
	int64_t launching;	 /* "launching": node launches in flight */
	struct ipc_counts nodes; /* "nodes": this provider's nodes by state name */
	struct ipc_pools pools;	 /* "pools" */
	char *last_error;	 /* "error": last error text, or nil */
	int64_t rss_kb;		 /* "rss_kb": resident set size, KiB */
	int64_t cpu_ms;		 /* "cpu_ms": user+system CPU time, ms */
	int64_t uptime_s;	 /* "uptime_s": seconds since the process started */
	char *metrics;		 /* "metrics": the worker's metrics record (lib/ops/metrics.h,
				    metrics_record) as JSON text, or nil; optional (absent
				    from an older worker) */
	int64_t zk_queue;	 /* "zk_queue": ZooKeeper operations submitted and not
				    answered yet (upstream's zk.client.connection_queue);
				    optional, 0 when absent */
	/* "peers" (optional): the other launchers serving this provider, from
	 * their pool components, one "hostname pool launcher-id" each */
	struct ipc_strv peers;
	int64_t lock_attempts; /* "lock_attempts" (optional): request locks tried */
	int64_t lock_lost;     /* "lock_lost" (optional): of those, held by another */
	int64_t pss_kb;	       /* "pss_kb": proportional set size, KiB (shared pages
				  shared out); optional, 0 when absent or unknown */
};

/* CONFIG_ACK {gen, ok, errors}: a CONFIG was applied (ok) or refused. */
struct ipc_config_ack {
	int64_t generation;	/* "gen": CONFIG's generation */
	bool ok;		/* "ok" */
	struct ipc_strv errors; /* "errors": "file:line:col: message" each */
};

/* DUMP_REPLY {text}: free-form internal state, for debugging. */
struct ipc_dump_reply {
	char *text; /* "text" */
};

/*
 * CONFIG {gen, provider, config}: the provider's slice of nodepool.yaml as
 * JSON text (the child parses it with jansson). A child answers CONFIG_ACK
 * and keeps its running config when it refuses one (reload is a transaction).
 */
struct ipc_config {
	int64_t generation; /* "gen": >= 0, increases with each reload */
	char *provider;	    /* "provider" */
	char *config;	    /* "config": JSON text */
};

/* STATUS_REQ {seq}: ask for a STATUS carrying the same seq. */
struct ipc_status_req {
	int64_t seq; /* "seq": >= 0 */
};

/* STOP {graceful}: graceful = finish launches in flight first (draining). */
struct ipc_stop {
	bool graceful; /* "graceful" */
};

/*
 * METRICS {provider, record}: the supervisor passes a provider's metrics
 * record, as its worker's last STATUS carried it, on to the web API's
 * process (nodepool-web), which serves every provider's figures on
 * /metrics. Sent when a record changed and, for every provider, when the
 * web process becomes READY.
 */
struct ipc_metrics {
	char *provider; /* "provider" */
	char *record;	/* "record": JSON text (an object) */
};

/* CTL_STATUS {json}: list the children; json = the client prints JSON. */
struct ipc_ctl_status {
	bool json; /* "json" */
};

/* CTL_RESTART {provider}: restart one child (provider or "builder"). */
struct ipc_ctl_restart {
	char *provider; /* "provider" */
};

/* One supervised child in CTL_STATUS_REPLY "workers". */
struct ipc_worker_info {
	char *name;		 /* "name": provider name, or "builder" */
	int kind;		 /* "kind": enum ipc_child_kind */
	int64_t pid;		 /* "pid": 0 while not running */
	char *state;		 /* "state": the supervisor's lifecycle state name */
	int64_t uptime_s;	 /* "uptime_s" */
	int64_t restarts;	 /* "restarts": times restarted since nodepoold started */
	int zk_state;		 /* "zk": enum ipc_zk_state, from its last STATUS */
	int64_t accepted;	 /* "accepted" (from its last STATUS) */
	int64_t fulfilled;	 /* "fulfilled" */
	int64_t declined;	 /* "declined" */
	int64_t failed;		 /* "failed" */
	struct ipc_counts nodes; /* "nodes": by state */
	char *last_error;	 /* "error": or nil */
	struct ipc_strv peers;	 /* "peers" (optional): as in STATUS */
	int64_t lock_attempts;	 /* "lock_attempts" (optional) */
	int64_t lock_lost;	 /* "lock_lost" (optional) */
	int64_t rss_kb;		 /* "rss_kb", "pss_kb": from its last STATUS; optional, */
	int64_t pss_kb;		 /* 0 when absent or unknown */
};

struct ipc_workers {
	struct ipc_worker_info *v;
	size_t n;
};

/* CTL_STATUS_REPLY {workers}. */
struct ipc_ctl_status_reply {
	struct ipc_workers workers; /* "workers" */
};

/* CTL_RESULT {ok, message, errors}: the outcome of a CTL_RESTART/RELOAD/STOP
 * (or a refusal of any request). */
struct ipc_ctl_result {
	bool ok;		/* "ok" */
	char *message;		/* "message": one line for the user */
	struct ipc_strv errors; /* "errors": e.g. config errors, one per line */
};

/*
 * JOB {id, kind, spec}: the builder hands one piece of work to a child of
 * its build or upload worker pool (builder/README.md). id is the builder's
 * own job number, echoed in JOB_DONE. kind is "build" (run dib-cmd),
 * "upload" (upload an image file through the provider's adapter) or
 * "delete-image" (delete an uploaded image in the cloud). spec is a JSON
 * object whose keys depend on kind (builder/builder.h documents them).
 */
struct ipc_job {
	int64_t id; /* "id": >= 0 */
	char *kind; /* "kind" */
	char *spec; /* "spec": JSON text */
};

/*
 * JOB_DONE {id, ok, result, error}: the outcome of JOB id. result is a
 * JSON object (kind-specific: rc and duration of a build, external_id of
 * an upload) or nil; error a one-line reason when !ok, else nil.
 */
struct ipc_job_done {
	int64_t id;   /* "id" */
	bool ok;      /* "ok" */
	char *result; /* "result": JSON text, or nil */
	char *error;  /* "error": or nil */
};

/*
 * One message: type plus the struct for it (DUMP_REQ, CTL_RELOAD and
 * CTL_STOP have no fields and no union member).
 */
struct ipc_msg {
	enum ipc_type type;
	union {
		struct ipc_ready ready;
		struct ipc_status status;
		struct ipc_config_ack config_ack;
		struct ipc_dump_reply dump_reply;
		struct ipc_config config;
		struct ipc_status_req status_req;
		struct ipc_stop stop;
		struct ipc_metrics metrics;
		struct ipc_ctl_status ctl_status;
		struct ipc_ctl_restart ctl_restart;
		struct ipc_ctl_status_reply ctl_status_reply;
		struct ipc_ctl_result ctl_result;
		struct ipc_job job;
		struct ipc_job_done job_done;
	} u;
};

#endif
