/*
 * nodepool.yaml: loading, validation and the typed configuration.
 *
 * One loader for every process: the supervisor (`nodepoold`, `-n` checks a
 * config and exits), each provider worker (which loads its slice, see
 * np_cfg_slice), the builder and `nodepool config-validate`.
 *
 * Loading, as Nodepool's config.loadConfig/loadSecureConfig plus the checks
 * of its cmd/config_validator.py:
 *   1. `%(NODEPOOL_FOO)` is replaced by the value of the environment variable
 *      NODEPOOL_FOO (only names starting with NODEPOOL_, only set variables),
 *      before YAML parsing (as Nodepool's substitute_env_vars). Error
 *      positions still refer to the file as written.
 *   2. YAML (1.1 scalar rules, as PyYAML's safe loader) is parsed into a tree
 *      of struct np_cfg_node that keeps file, line and column of every node;
 *      anchors and aliases resolve to shared nodes; the `<<` merge key is
 *      supported (explicit keys win, then earlier merged maps); a repeated
 *      key keeps its last value (as PyYAML).
 *   3. The tree is checked against the schema of every section and of each
 *      provider's driver (static, openstack, aws, gce, azure, kubernetes,
 *      openshift, openshiftpods, metastatic, ibmvpc, and our simulated cloud
 *      `fake`), then the cross checks (labels and diskimages referenced exist,
 *      names unique, parents exist, ...). EVERY error is collected, each as
 *      "file:line:col: key.path: message", e.g.
 *        nodepool.yaml:41:7: providers[2].pools[0].labels[1].min-ram: expected an integer, got a
 * string Unknown keys are errors ("extra keys not allowed"), as Nodepool's voluptuous schemas.
 *   4. A valid file becomes a struct np_config; the raw tree is kept for
 *      driver-specific parsing.
 *
 * Deliberate differences from upstream (nodepool-features.md section 8):
 *   - checks upstream only hits when the launcher loads the file (a pool
 *     label missing from top-level labels, a cloud-image or diskimage that
 *     does not exist, metastatic backing-label consistency, ...) are
 *     reported by validation too; so are duplicate provider, pool, label and
 *     static node names (upstream silently keeps the last one);
 *   - `name` is required wherever the upstream loader indexes it;
 *   - diskimage `shell-type` and static node `ssh-port` are accepted
 *     (upstream's loader reads them, its validator rejects them);
 *   - an integer is accepted where a float is expected (zookeeper-timeout,
 *     gpu); a bool is not accepted as an integer;
 *   - a provider named fake* is not forced to the fake driver;
 *   - openshiftpods `max-pods` is honoured (upstream accepts and ignores it);
 *   - ibmvpc pool names may not contain '_' anywhere (as the docs say);
 *   - all zookeeper-servers must share one chroot, which must start with '/'
 *     (the chroot is written once, at the end of the host string, as the
 *     ZooKeeper C client wants it);
 *   - secure.conf keys other than zookeeper-servers, zookeeper-tls and
 *     diskimages are errors (upstream ignores them);
 *   - a diskimage parent loop, or more than 32 levels of parents, is an
 *     error (upstream recurses forever);
 *   - `1e5` (an exponent without a dot, as JSON writes floats) is a float;
 *     YAML 1.1 (PyYAML) reads it as a string;
 *   - a few value checks upstream lacks: webapp port in 1..65535,
 *     zookeeper-timeout > 0, non-empty provider, label, diskimage and
 *     ZooKeeper host names.
 *
 * The `nodepoold:` top-level section holds the settings upstream has no
 * place for (all optional; intervals are seconds, int or float, > 0):
 *   cleanup-interval       60   leaked-resource / static sync pass
 *   delete-interval        5    deleting-node scan
 *   stats-interval         5    statsd gauges
 *   worker-status-timeout  30   a worker silent this long is restarted
 *   control-socket         /run/nodepoold/nodepoold.sock
 *   pid-file               /run/nodepoold/nodepoold.pid
 *   restart-backoff-max    60   cap of a failed worker's restart back-off
 *   request-lock-cleanup-age 28800  request-lock dirs whose request is gone
 *                          are removed once unmodified this long (upstream's
 *                          fixed LOCK_CLEANUP, 8 h)
 *   peer-takeover-delay    2    with several launchers serving one pool
 *                          (nodepoold on several hosts), how long the
 *                          launcher ranked n-th for a request by rendezvous
 *                          hashing waits (times n-1) before taking it while
 *                          the others have not; 0: every launcher tries at
 *                          once (upstream's race for the request lock)
 *   reload-on-change       true nodepoold applies nodepool.yaml and secure.conf
 *                          whenever their contents change (false: on
 *                          SIGHUP or `nodepoolctl reload` only)
 *
 * The `fake` driver (our simulated cloud, drivers/fake) takes the OpenStack
 * schema, key for key, as upstream's fake driver (its OpenStack driver
 * against an in-process cloud) does; drivers/fake/fake.c and
 * nodepool.yaml(5) say what each key does in the simulated cloud. Laxer than
 * openstack: `cloud` is optional, a label needs neither min-ram/flavor-name
 * nor an image (at most one of cloud-image and diskimage; a diskimage must
 * be in the provider's diskimages), and `rate` (seconds between calls, as
 * OpenStack's; >= 0) defaults to 0, unlimited. host-key-checking defaults
 * to false (simulated nodes have no sshd). Plus these simulation and
 * fault-injection keys:
 *   boot-delay           seconds a server takes to become ready (0)
 *   delete-delay         seconds a delete takes (0)
 *   api-delay            seconds each cloud call takes to answer (0)
 *   failure-rate         0..1, share of servers that end in ERROR while
 *                        booting (0)
 *   boot-failures        int >= 0: the first N servers end in ERROR (0)
 *   never-ready-rate     0..1, share of servers that never become ready (0)
 *   create-error-rate    0..1, share of creates refused with an error (0)
 *   quota-error-rate     0..1, share of creates refused for quota (0)
 *   quota-errors         int >= 0: the first N creates refused for quota (0)
 *   delete-failure-rate  0..1, share of deletes that fail once (0)
 *   leak-rate            0..1, share of deletes answered "done" while the
 *                        server stays (0)
 *   volume-leak-rate     0..1, share of deleted servers whose volume stays (0)
 *   quota                {instances, cores, ram, volumes, volume-gb}: the
 *                        simulated cloud's limits, enforced at create
 *                        (unlimited)
 *   report-quota         bool: the limits are reported to nodepool (true)
 *   unmanaged-instances  int >= 0: servers not created by nodepool (0)
 *   fake-ssh-port        port: servers' interface_ip is 127.0.0.1 and their
 *                        connection port this (a real sshd for nodescan)
 *   state-file           path: a JSON picture of the simulated cloud,
 *                        rewritten as it changes (tests, benchmarks)
 *   seed                 integer seed of the failure dice (0: random)
 *   instance-id-base     int >= 0: ids are numbered from it (0: i-000001),
 *                        so fake clouds of one provider on several
 *                        nodepoold instances never name two servers alike
 *   cloud-availability-zones
 *                        list of non-empty strings: the simulated cloud's
 *                        zones, offered when a pool names no
 *                        availability-zones; creates in other zones fail
 *   persistent           bool: the simulated cloud outlives the worker; the
 *                        state-file is read back at start (false)
 *   flavors              [{name, cores, ram}] (all required): the cloud's
 *                        flavors for flavor-name/min-ram (upstream's fake
 *                        cloud's "Fake Flavor" and "Unreal Flavor", 4 cores
 *                        and 8192 MB each)
 *   cloud-networks       list of non-empty strings: the cloud's networks; a
 *                        label on another one fails (none: any name is one)
 * A fake label also takes instance-type, cores (1), ram (MB, 1024): its size
 * outright, instead of a flavor; per-label boot-delay and failure-rate
 * overriding the provider's; and config-error (a non-empty message: the
 * label is permanently misconfigured in the simulated cloud, which makes it
 * an error label; creates of it fail).
 *
 * Ownership: every string and array below is owned by its struct np_config;
 * json_t members are references owned by it too; raw nodes point into the
 * tree the config owns. Nothing is shared between two configs.
 */
#ifndef NP_CONFIG_H
#define NP_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <jansson.h>

/* ---- errors -------------------------------------------------------------- */

/* One problem. line/col are 1-based; 0 when not tied to a position (e.g. an
 * unreadable file). path is the key path ("providers[0].pools[1].name"),
 * "" for the document itself or a YAML syntax error. */
struct np_cfg_error {
	char *file;
	int line, col;
	char *path;
	char *msg;
};

/* A list of errors, in the order found. At most NP_CONFIG_MAX_ERRORS are
 * kept; `dropped` counts the ones beyond. */
struct np_cfg_errors {
	struct np_cfg_error *v;
	size_t n, cap;
	size_t dropped;
};
#define NP_CONFIG_MAX_ERRORS 500

/* An empty list; np_cfg_errors_free(NULL) is a no-op. */
struct np_cfg_errors *np_cfg_errors_new(void);
void np_cfg_errors_free(struct np_cfg_errors *errs);
/* Append one error (strings copied). path may be NULL (= ""). */
void np_cfg_errors_add(struct np_cfg_errors *errs, const char *file, int line, int col,
		       const char *path, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* Total number of errors found (kept + dropped). NULL counts 0. */
size_t np_cfg_errors_count(const struct np_cfg_errors *errs);
/* "file:line:col: path: msg" (parts omitted when empty/0); malloc'd. */
char *np_cfg_error_format(const struct np_cfg_error *e);
/*
 * Print every error, one per line, in the format above, then, if errors were
 * dropped, "... and N more errors". Used by `nodepoold -n` and `nodepool
 * config-validate`. Returns the number of errors. NULL prints nothing.
 */
size_t np_cfg_errors_print(const struct np_cfg_errors *errs, FILE *out);

/* ---- the raw tree ---------------------------------------------------------- */

enum np_cfg_kind {
	NP_CFG_NULL,
	NP_CFG_BOOL,
	NP_CFG_INT,
	NP_CFG_FLOAT,
	NP_CFG_STR,
	NP_CFG_TIME, /* a YAML 1.1 timestamp (2001-12-14): kept as text */
	NP_CFG_SEQ,
	NP_CFG_MAP,
};

/*
 * A node of a parsed document. Scalars have `text` (the value as written,
 * for STR the string itself) and the typed value; sequences have n items;
 * mappings have n keys (scalar nodes) and n values, in file order, keys
 * unique. A node reached through several aliases is one shared node.
 * Strings are valid UTF-8 without NUL.
 */
struct np_cfg_node {
	enum np_cfg_kind kind;
	const char *file;
	int line, col; /* 1-based */
	const char *text;
	long long i;  /* INT (saturated if out of range, see `overflow`), BOOL 0/1 */
	double f;     /* FLOAT; also INT as a double */
	int overflow; /* INT beyond 64 bits */
	size_t n;
	struct np_cfg_node **items; /* SEQ items, MAP values */
	struct np_cfg_node **keys;  /* MAP keys */
};

/* A parsed document: owns its nodes (freed with np_cfg_doc_free, NULL ok). */
struct np_cfg_doc;

/*
 * Parse a YAML buffer (env substitution first, see above). file names the
 * source in positions (copied). On a syntax error, errors are added to errs
 * and NULL is returned. An empty document gives a root of kind NULL.
 * Documents over 16 MiB, with more than one YAML document, with recursive
 * aliases or expanding (through aliases) to more than 1,000,000 nodes are
 * errors.
 */
struct np_cfg_doc *np_cfg_parse(const char *file, const char *buf, size_t len,
				struct np_cfg_errors *errs);
void np_cfg_doc_free(struct np_cfg_doc *doc);
const struct np_cfg_node *np_cfg_doc_root(const struct np_cfg_doc *doc);
const char *np_cfg_kind_name(enum np_cfg_kind kind); /* "a string", "an integer", ... */

/* Mapping access by string key; NULL if map is not a mapping or has no such key. */
const struct np_cfg_node *np_cfg_get(const struct np_cfg_node *map, const char *key);
/* Typed getters: the value when present with the right kind, else def.
 * np_cfg_num accepts INT and FLOAT. */
const char *np_cfg_str(const struct np_cfg_node *map, const char *key, const char *def);
long long np_cfg_int(const struct np_cfg_node *map, const char *key, long long def);
double np_cfg_num(const struct np_cfg_node *map, const char *key, double def);
int np_cfg_bool(const struct np_cfg_node *map, const char *key, int def);
/*
 * The subtree as JSON (new reference; NULL only on allocation failure).
 * Mapping keys become strings (their text); non-finite floats become the
 * strings ".inf", "-.inf", ".nan"; timestamps become strings.
 */
json_t *np_cfg_to_json(const struct np_cfg_node *n);

/* ---- the typed configuration ------------------------------------------------ */

/* A list of strings, owned by the struct holding it. (protocol/model.h's
 * np_strv has the same shape; this one keeps lib/config free of it.) */
struct np_cfg_strv {
	char **v;
	size_t n;
};
/* 1 if s is in sv (linear). */
int np_cfg_strv_contains(const struct np_cfg_strv *sv, const char *s);
/* Free sv's strings and array; sv is left empty (reusable). */
void np_cfg_strv_free(struct np_cfg_strv *sv);

/* zookeeper-servers[]: as Nodepool's ZooKeeperConnectionConfig. */
struct np_zk_server {
	char *host;
	int port;     /* default 2281 (as upstream's code; its docs say 2181) */
	char *chroot; /* NULL = none */
};

/* labels[] */
struct np_label {
	char *name;
	long long min_ready;	 /* default 0; <= 0 disables */
	long long max_ready_age; /* seconds; default 0 = off */
	const struct np_cfg_node *raw;
};

/*
 * diskimages[]: a buildable (non-abstract) image with its parents applied
 * root first, as Nodepool's Config.setDiskImages/DiskImage.setFromConfig:
 * scalar keys override (a 0/false/empty value does not override, as
 * upstream), elements append, env-vars update; metadata is the image's own
 * (upstream does not inherit it). secure.conf env-vars are merged last.
 */
struct np_diskimage {
	char *name;
	char *parent;		     /* as written, NULL if none */
	char *dib_cmd;		     /* "disk-image-create" */
	struct np_cfg_strv elements; /* parents' first */
	json_t *env_vars;	     /* object of strings */
	struct np_cfg_strv formats;  /* explicit formats (builder adds provider formats) */
	struct np_cfg_strv keep_formats;
	int delete_after_upload; /* 0 */
	int pause;		 /* 0 */
	/* validate (beyond upstream): a new upload serves only once a node
	 * booted from it in that provider passed keyscan; 0 */
	int validate;
	char *release;		       /* stringified; "" if unset */
	long long rebuild_age;	       /* seconds, 86400 */
	long long build_timeout;       /* seconds, 28800 */
	char *username;		       /* "zuul" */
	char *python_path;	       /* "auto" */
	char *shell_type;	       /* NULL */
	json_t *metadata;	       /* object (empty if unset) */
	const struct np_cfg_node *raw; /* the image's own entry */
};

/* A provider's diskimages[] or cloud-images[] entry (drivers that have them). */
struct np_provider_image {
	char *name;
	int pause;	   /* diskimages: 0 */
	int config_drive;  /* -1 unset, 0, 1 (openstack) */
	int validate;	   /* diskimages: -1 unset (the diskimage's), 0, 1 */
	char *image_id;	   /* cloud images: NULL if unset */
	char *image_name;  /* openstack cloud images */
	char *username;	   /* diskimage: entry's or the diskimage's; cloud image: NULL if unset */
	char *python_path; /* "auto" unless set (openstack diskimage: the diskimage's) */
	char *shell_type;  /* NULL */
	char *connection_type; /* "ssh" */
	int connection_port;   /* 22, or 5986 for winrm */
	json_t *meta;	       /* openstack meta / aws, azure tags: object (may be empty) */
	const struct np_cfg_node *raw;
};

/* A label of a pool, with the settings most drivers share. */
struct np_pool_label {
	char *name;
	char *diskimage;       /* NULL */
	char *cloud_image;     /* NULL */
	char *flavor_name;     /* openstack, fake */
	char *instance_type;   /* aws, gce, fake */
	long long min_ram;     /* openstack, fake: 0 */
	char *key_name;	       /* NULL */
	int host_key_checking; /* label's, else pool's */
	/* metastatic */
	char *backing_label;
	long long max_parallel_jobs;  /* 1 */
	long long grace_time;	      /* 60 */
	long long min_retention_time; /* 0 */
	long long max_age;	      /* 0 = none */
	/* fake */
	long long cores;     /* 1 */
	long long ram;	     /* MB, 1024 */
	double boot_delay;   /* provider's unless set */
	double failure_rate; /* provider's unless set */
	const struct np_cfg_node *raw;
};

/* A static node, as Nodepool's StaticPool.load. Identity: (name, username,
 * connection_port), unique within a provider. */
struct np_static_node {
	char *name;
	struct np_cfg_strv labels; /* a string is split on whitespace */
	char *username;		   /* "zuul" */
	long long timeout;	   /* ssh connect timeout, seconds: 5 */
	struct np_cfg_strv host_keys;
	int host_key_checking;	     /* 1 */
	char *connection_type;	     /* "ssh" */
	int connection_port;	     /* connection-port, else legacy ssh-port, else 22 */
	char *shell_type;	     /* NULL */
	char *python_path;	     /* "auto" */
	long long max_parallel_jobs; /* 1 */
	const struct np_cfg_node *raw;
};

/* -1 in any limit below means unlimited (upstream's math.inf). */
struct np_pool {
	char *name;
	long long max_servers;
	long long max_cores, max_ram, max_volumes, max_volume_gb;
	json_t *max_resources;	      /* object name -> int (aws, k8s, openshift), may be empty */
	long long priority;	      /* effective: pool's, else provider's, else 100 */
	json_t *node_attributes;      /* object, or NULL */
	int ignore_provider_quota;    /* 0 */
	struct np_cfg_strv azs;	      /* availability-zones (or aws availability-zone) */
	int host_key_checking;	      /* pool's (static: see nodes; metastatic default 0) */
	int use_internal_ip;	      /* 0 */
	struct np_pool_label *labels; /* label entries (static: none) */
	size_t nlabels;
	struct np_cfg_strv label_names; /* supported labels (static: union of node labels) */
	struct np_static_node *nodes;	/* static only */
	size_t nnodes;
	const struct np_cfg_node *raw;
};

struct np_provider {
	char *name;
	char *driver;		   /* "openstack" if unset */
	long long max_concurrency; /* -1 = unlimited; 0 stops request handling (as upstream) */
	long long priority;	   /* configured, else 100 */
	int priority_set;
	/* common cloud keys; defaults per driver as upstream */
	long long launch_retries; /* 3 */
	/* seconds: openstack/gce/fake 60, aws 180, azure/ibmvpc/metastatic 120 */
	long long boot_timeout;
	long long launch_timeout; /* 3600 */
	double rate;	       /* as written: openstack, fake: s between calls; others: calls/s */
	int host_key_checking; /* provider-level default for pools (1; fake 0) */
	char *cloud;	       /* openstack cloud, k8s/openshift context, NULL */
	char *region;	       /* region-name / region / azure location, NULL */
	char *image_format;    /* aws image-format (raw), azure vhd, ibmvpc image-format (qcow2);
				  NULL: openstack (from clouds.yaml) or no image management */
	int manage_images;     /* openstack, aws, azure, ibmvpc, fake */
	long long image_upload_timeout; /* openstack 3600; aws image-import-timeout or -1 */
	char *image_name_format; /* "{image_name}-{timestamp}" (ibmvpc "npimage{upload_id}") */
	char *post_upload_hook;	 /* NULL */
	long long max_servers, max_cores, max_ram; /* provider-level limits: -1 */
	struct np_provider_image *diskimages;
	size_t ndiskimages;
	struct np_provider_image *cloud_images;
	size_t ncloud_images;
	struct np_pool *pools;
	size_t npools;
	/* fake driver faults (see the top of this file) */
	double boot_delay, delete_delay, failure_rate, delete_failure_rate;
	long long quota_instances, quota_cores, quota_ram; /* -1 */
	long long seed;
	const struct np_cfg_node *raw;
	/*
	 * 64-bit FNV-1a (16 hex digits) of the canonical JSON (sorted keys)
	 * of this provider's slice, for logs: equal fingerprints mean a
	 * worker has nothing to reload (the supervisor decides by comparing
	 * the slices themselves). It
	 * changes with the provider's own entry, the top-level labels and
	 * diskimages it uses, and the shared settings in every slice
	 * (zookeeper, tenant limits, max-hold-age, nodepoold); not with other
	 * providers. Upstream compares parsed provider configs by value.
	 */
	char fingerprint[17];
};

/* tenant-resource-limits[]: limits is an object with the keys set: "cores",
 * "instances", "ram", "volumes", "volume-gb" and any other driver resource;
 * an absent key is unlimited (as Config.setTenantResourceLimits). */
struct np_tenant_limit {
	char *tenant;
	json_t *limits;
};

/* The nodepoold: section; see the top of this file. */
struct np_nodepoold_settings {
	double cleanup_interval;
	double delete_interval;
	double stats_interval;
	double worker_status_timeout;
	char *control_socket;
	char *pid_file;
	double restart_backoff_max;
	double request_lock_cleanup_age;
	double peer_takeover_delay;
	bool reload_on_change;
};

struct np_config {
	char *path;			 /* the main file as given */
	char *secure_path;		 /* NULL if none */
	struct np_zk_server *zk_servers; /* secure.conf's replace the main file's */
	size_t nzk_servers;
	char *zk_hosts;				    /* np_cfg_zk_hosts() of them, NULL if none */
	char *zk_tls_ca, *zk_tls_cert, *zk_tls_key; /* NULL if unset */
	double zk_timeout;			    /* seconds, 10.0 */
	struct np_label *labels;
	size_t nlabels;
	struct np_provider *providers;
	size_t nproviders;
	struct np_diskimage *diskimages; /* non-abstract only */
	size_t ndiskimages;
	long long max_hold_age; /* seconds; 0 = unlimited (unset or <= 0) */
	struct np_tenant_limit *tenant_limits;
	size_t ntenant_limits;
	int webapp_port;	       /* 8005 */
	char *webapp_listen_address;   /* "0.0.0.0" */
	char *elements_dir;	       /* NULL */
	char *images_dir;	       /* NULL (the builder requires it) */
	char *build_log_dir;	       /* "/var/log/nodepool/builds" */
	long long build_log_retention; /* 7; -1 keeps all */
	struct np_nodepoold_settings nodepoold;
	struct np_cfg_doc *doc;	       /* the main file's tree */
	struct np_cfg_doc *secure_doc; /* secure.conf's, NULL if none */

	/* ours: the web API's limits, webapp section (web.h, nodepool.yaml(5)) */
	long long webapp_max_connections;	     /* 64 */
	long long webapp_max_connections_per_client; /* 8 */
	double webapp_request_timeout;		     /* 10 s */
	long long webapp_max_response_size;	     /* 32 MiB */
	/* seconds without a listing before nodepool-web stops watching nodes
	 * and requests (web/webproc.h); 0: never */
	double webapp_view_idle_timeout; /* 60 s */
};

/*
 * Load and validate path, then merge secure_path (may be NULL) as Nodepool's
 * loadSecureConfig: zookeeper-servers replace the main list when non-empty,
 * zookeeper-tls replaces, diskimages [{name, env-vars}] update the named
 * (non-abstract) diskimage's env-vars; an unknown name is an error.
 * A missing file is retried twice 0.5 s apart (an editor replacing it).
 * Returns 0 with *cfg set and *errs NULL, or -1 with *cfg NULL and *errs a
 * non-empty list (free with np_cfg_errors_free). errs may be NULL.
 */
int np_cfg_load(const char *path, const char *secure_path, struct np_config **cfg,
		struct np_cfg_errors **errs);
/*
 * The same from memory (tests, fuzzing, a worker's slice). name labels
 * positions; secure (secure_len bytes, named secure_name) may be NULL.
 */
int np_cfg_load_buffer(const char *name, const char *buf, size_t len, const char *secure_name,
		       const char *secure, size_t secure_len, struct np_config **cfg,
		       struct np_cfg_errors **errs);
void np_cfg_free(struct np_config *cfg);

/* Lookups by name; NULL if absent. */
const struct np_provider *np_cfg_provider(const struct np_config *cfg, const char *name);
const struct np_label *np_cfg_label(const struct np_config *cfg, const char *name);
const struct np_diskimage *np_cfg_diskimage(const struct np_config *cfg, const char *name);
const struct np_pool *np_provider_pool(const struct np_provider *p, const char *name);

/*
 * The settings a worker for one provider needs, as a JSON document that
 * np_cfg_load_buffer accepts (JSON is YAML): zookeeper-servers (merged
 * with secure.conf), zookeeper-tls, zookeeper-timeout, max-hold-age,
 * tenant-resource-limits, the nodepoold intervals (cleanup, delete, stats,
 * worker-status-timeout; not the supervisor's own keys), the top-level
 * labels and the (resolved, flattened: no parent) diskimages this provider
 * uses, secure.conf env-vars included, and the provider entry itself. New reference, NULL if there
 * is no such provider. Loading a slice gives the same fingerprint for that provider.
 */
json_t *np_cfg_slice(const struct np_config *cfg, const char *provider_name);

/*
 * The ZooKeeper connection string for the C client, as Nodepool's
 * buildZooKeeperHosts: "host:port,host:port/chroot"; IPv6 literals in [].
 * The chroot (the first server's, validation makes them agree) is written
 * once at the end. malloc'd; NULL when n is 0.
 */
char *np_cfg_zk_hosts(const struct np_zk_server *servers, size_t n);

#endif
