/*
 * Nodepool's ZooKeeper path catalogue and id helpers (reference section 1.2),
 * as upstream Nodepool's zk/zookeeper.py and zk/components.py build them.
 * Pure functions: no ZooKeeper, no allocation.
 *
 * Path builders are snprintf-style: they write at most `size` bytes
 * (always NUL-terminated when size > 0) and return the length of the whole
 * path, excluding the NUL, so `ret >= size` means truncated. They return -1
 * when an element is not a usable znode name: NULL, empty, ".", "..", or
 * containing '/'. NP_PATH_MAX is enough for any path of sane names.
 */
#ifndef NP_PATHS_H
#define NP_PATHS_H

#include <stddef.h>

#define NP_PATH_MAX 1024
#define NP_NAME_MAX 256 /* longest element np_path_parse() captures, with NUL */

#define NP_ROOT		     "/nodepool"
#define NP_NODE_ROOT	     "/nodepool/nodes"
#define NP_REQUEST_ROOT	     "/nodepool/requests"
#define NP_REQUEST_LOCK_ROOT "/nodepool/requests-lock"
#define NP_IMAGE_ROOT	     "/nodepool/images"
#define NP_COMPONENT_ROOT    "/nodepool/components"
#define NP_ELECTION_ROOT     "/nodepool/elections"
/* kazoo Election (a Lock) whose winner emits the node/request gauges;
 * contender data is "<hostname>-<pid>" (as upstream's StatsWorker). */
#define NP_STATS_ELECTION_PATH "/nodepool/elections/stats"
/* Legacy launcher registry: nothing writes it any more, old Zuul read it. */
#define NP_LAUNCHER_ROOT "/nodepool/launchers"

/* /nodepool/nodes/<id> and its lock dir /nodepool/nodes/<id>/lock. */
int np_path_node(char *buf, size_t size, const char *node_id);
int np_path_node_lock(char *buf, size_t size, const char *node_id);
/* /nodepool/requests/<id> and its lock dir /nodepool/requests-lock/<id>
 * (a separate tree so the lock outlives the request). */
int np_path_request(char *buf, size_t size, const char *request_id);
int np_path_request_lock(char *buf, size_t size, const char *request_id);
/* The sequential-create prefix for a new request of this priority, with
 * the priority zero-padded to 3 digits as Zuul and upstream write it:
 * 100 -> "/nodepool/requests/100-", 5 -> ".../005-". -1 if priority < 0. */
int np_path_request_prefix(char *buf, size_t size, int priority);

/* /nodepool/images/<image>[/pause|/request-build|/builds|/builds/lock] */
int np_path_image(char *buf, size_t size, const char *image);
int np_path_image_pause(char *buf, size_t size, const char *image);
int np_path_image_request_build(char *buf, size_t size, const char *image);
int np_path_image_builds(char *buf, size_t size, const char *image);
/* One build at a time per image, across builders. */
int np_path_image_build_lock(char *buf, size_t size, const char *image);
/* …/builds/<build>, …/builds/<build>/lock, …/builds/<build>/providers */
int np_path_build(char *buf, size_t size, const char *image, const char *build_id);
int np_path_build_lock(char *buf, size_t size, const char *image, const char *build_id);
int np_path_build_providers(char *buf, size_t size, const char *image, const char *build_id);
/* …/builds/<build>/providers/<provider>/images (the upload container),
 * …/images/lock (one upload at a time per image, build, provider),
 * …/images/<upload>, …/images/<upload>/lock. */
int np_path_uploads(char *buf, size_t size, const char *image, const char *build_id,
		    const char *provider);
int np_path_upload_lock(char *buf, size_t size, const char *image, const char *build_id,
			const char *provider);
int np_path_upload(char *buf, size_t size, const char *image, const char *build_id,
		   const char *provider, const char *upload_id);
int np_path_upload_id_lock(char *buf, size_t size, const char *image, const char *build_id,
			   const char *provider, const char *upload_id);

/* /nodepool/components/<kind>, and the ephemeral sequential-create prefix
 * /nodepool/components/<kind>/<hostname> (ZooKeeper appends 10 digits). */
int np_path_component_root(char *buf, size_t size, const char *kind);
int np_path_component_prefix(char *buf, size_t size, const char *kind, const char *hostname);

/* ---- parsing paths (what the caches see) -------------------------------- */

enum np_path_kind {
	NP_PATH_UNKNOWN = 0,		/* not in the catalogue */
	NP_PATH_NODE,			/* nodes/{id} */
	NP_PATH_NODE_LOCK,		/* nodes/{id}/lock */
	NP_PATH_NODE_LOCK_CONTENDER,	/* nodes/{id}/lock/{contender} */
	NP_PATH_REQUEST,		/* requests/{id} */
	NP_PATH_REQUEST_LOCK,		/* requests-lock/{id} */
	NP_PATH_REQUEST_LOCK_CONTENDER, /* requests-lock/{id}/{contender} */
	NP_PATH_IMAGE,			/* images/{image} */
	NP_PATH_IMAGE_PAUSE,		/* images/{image}/pause */
	NP_PATH_IMAGE_REQUEST_BUILD,	/* images/{image}/request-build */
	NP_PATH_IMAGE_BUILDS,		/* images/{image}/builds */
	NP_PATH_IMAGE_BUILD_LOCK,	/* images/{image}/builds/lock */
	NP_PATH_IMAGE_BUILD_LOCK_CONTENDER,
	NP_PATH_BUILD,	    /* …/builds/{build} */
	NP_PATH_BUILD_LOCK, /* …/builds/{build}/lock */
	NP_PATH_BUILD_LOCK_CONTENDER,
	NP_PATH_BUILD_PROVIDERS, /* …/builds/{build}/providers */
	NP_PATH_BUILD_PROVIDER,	 /* …/providers/{provider} */
	NP_PATH_UPLOADS,	 /* …/providers/{provider}/images */
	NP_PATH_UPLOAD_LOCK,	 /* …/images/lock */
	NP_PATH_UPLOAD_LOCK_CONTENDER,
	NP_PATH_UPLOAD,		/* …/images/{upload} */
	NP_PATH_UPLOAD_ID_LOCK, /* …/images/{upload}/lock */
	NP_PATH_UPLOAD_ID_LOCK_CONTENDER,
	NP_PATH_COMPONENT_KIND, /* components/{kind} */
	NP_PATH_COMPONENT,	/* components/{kind}/{name} */
	NP_PATH_KIND_COUNT
};

/* The elements a parsed path names; unused ones are "". */
struct np_path_info {
	enum np_path_kind kind;
	char id[NP_NAME_MAX]; /* node or request id */
	char image[NP_NAME_MAX];
	char build[NP_NAME_MAX];
	char provider[NP_NAME_MAX];
	char upload[NP_NAME_MAX];
	char comp_kind[NP_NAME_MAX]; /* component kind */
	char name[NP_NAME_MAX];	     /* component znode name (hostname + seq) */
	char contender[NP_NAME_MAX]; /* lock contender znode name */
};

/*
 * Classify an absolute path under /nodepool, as upstream's caches do: an
 * element named "lock" is never an object (a node, image, build, upload...),
 * only a lock dir. Paths must be canonical (no empty element, no trailing
 * '/'); an element longer than NP_NAME_MAX - 1 makes the path unknown.
 * Returns the kind (NP_PATH_UNKNOWN = 0 when not in the catalogue) and
 * fills *pi (kind and elements; zeroed first).
 */
enum np_path_kind np_path_parse(const char *path, struct np_path_info *pi);
/* The inverse: the path for pi->kind and its elements (snprintf-style; -1
 * for NP_PATH_UNKNOWN or an invalid element). */
int np_path_format(char *buf, size_t size, const struct np_path_info *pi);
/* "node", "node-lock", ... for logs; NULL when out of range. */
const char *np_path_kind_name(enum np_path_kind kind);

/* ---- ids -------------------------------------------------------------------- */

/*
 * A ZooKeeper sequence suffix: exactly 10 ASCII digits. 0 and *seq (may be
 * NULL), or -1.
 */
int np_seq_parse(const char *s, long long *seq);
/* Node ids and upload ids are sequences: "0000000042". */
int np_node_id_parse(const char *id, long long *seq);
int np_upload_id_parse(const char *id, long long *seq);
/*
 * Request id "<prio>-<seq>": prio 1..9 digits (Zuul writes 3, e.g. "100";
 * other widths are tolerated), '-', a 10-digit sequence. 0 with *prio and
 * *seq (each may be NULL), or -1.
 */
int np_request_id_parse(const char *id, int *prio, long long *seq);
/* Build ids: 32 hex digits (uuid4().hex; either case) or a legacy 10-digit
 * sequence. 1 if valid, 0 if not. */
int np_build_id_valid(const char *id);
/*
 * A kazoo lock contender name "<uuid4hex>__lock__<seq>": the sequence as
 * kazoo finds it, with the pattern __lock__(-?\d{10})$ (ASCII digits). The
 * holder of a lock is the contender with the lowest sequence, not the lowest
 * name. 0 and *seq (may be NULL), or -1 when the name does not match.
 */
int np_lock_contender_seq(const char *name, long long *seq);
/*
 * A name ending in a 10-digit sequence, as components ("<hostname><seq>")
 * and upstream's force-unlock ("ends in 10 digits"): returns the length of
 * the part before the sequence and sets *seq (may be NULL), or -1.
 */
int np_seq_suffix(const char *name, long long *seq);

/* ---- generators ---------------------------------------------------------- */

/* 32 lowercase hex digits of a random (version 4) UUID, as Python's
 * uuid.uuid4().hex, from OpenSSL's RAND_bytes. out gets 33 bytes. 0, or -1
 * if the random generator failed. */
int np_uuid4_hex(char out[33]);
/*
 * A pool worker (launcher) id, new on every worker start, as upstream's
 * PoolWorker: "<fqdn>-PoolWorker.<provider>-<pool>-<uuid4hex>". The same
 * value goes into the pool component's `id`, nodes' `launcher` and requests'
 * `declined_by`. snprintf-style; -1 on NULL arguments or RNG failure.
 */
int np_launcher_id(char *buf, size_t size, const char *fqdn, const char *provider,
		   const char *pool);

#endif
