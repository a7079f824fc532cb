/*
 * Nodepool's ZooKeeper records: Node, NodeRequest, ImageBuild, ImageUpload
 * and component records, as upstream Nodepool's zk/zookeeper.py and
 * zk/components.py read and write them (reference section 1.4).
 *
 * Rules, as upstream:
 * - the object id is the znode name, never in the body;
 * - encode writes every key (null where unset), so a reader of any version
 *   finds them all;
 * - decode tolerates missing keys (defaults below) and unknown keys, which
 *   are kept in `extra` and written back on encode, so a record written by a
 *   newer Nodepool or Zuul survives a round trip through us.
 *
 * Degrade, never drop (be liberal in what we read): upstream type-checks
 * almost nothing it reads (Node.updateFromDict takes d.get() as it comes),
 * and Zuul writes back every key it read (Node.toDict), so a value of a type
 * a field of ours cannot hold is not an error. The field takes its default
 * (documented per field; an unknown state reads as -1, which no state test
 * matches), the value is kept in `odd` exactly as it arrived, and encode
 * writes that value back verbatim for as long as our field still holds what
 * the decoder gave it (odd_as); once our code sets the field, ours is
 * written. Decode then returns 0 and leaves a note in err ("... kept
 * verbatim"); err is "" for a clean record. Only a body that is not a JSON
 * object at all (empty, not JSON, a list...) is an error.
 *
 * Numbers beyond what jansson holds (integers beyond 64 bits, such as the
 * 128-bit trace_id in the span_info Zuul puts in requestor_data, and floats
 * beyond double) and Python's NaN/Infinity tokens are kept as their literal
 * text and written back unchanged; inside json_t values they appear as a
 * string with a private per-process prefix (np_json_raw_number tells them).
 * Strings may contain NUL (\u0000): a typed string field holding one is an
 * odd value (kept verbatim, field NULL); free-form json_t values keep it.
 *
 * Strings are malloc'd and owned by the struct; NULL means JSON null.
 * json_t members are jansson references owned by the struct (NULL = null).
 * Times are epoch seconds as double; a time read as an int or a float is
 * written back as a float (as time.time() gives), missing/null reads as 0.
 *
 * Decoding follows Python's d.get(key, default): a missing key gives the
 * documented default, an explicit null gives NULL/unset (so username null
 * stays null, as upstream).
 *
 * Encoders return a malloc'd NUL-terminated JSON text (free() it), ASCII
 * only (json.dumps' ensure_ascii), keys in upstream's toDict() order,
 * unknown keys (`extra`) last; *len (may be NULL) excludes the NUL. They
 * return NULL when a string is not valid UTF-8 or a number is not finite.
 * Decoders return 0 and *out (with err "" or a note naming the odd keys),
 * or -1 with a message naming the record in err (errlen bytes, may be 0)
 * when the body is not a JSON object; *out is NULL on error.
 * Memory exhaustion aborts (there is no sane partial record).
 */
#ifndef NP_MODEL_H
#define NP_MODEL_H

#include <stddef.h>
#include <jansson.h>

#include "protocol/numjson.h"

/* A list of strings (labels, node ids, host keys...). */
struct np_strv {
	char **v;
	size_t n;
};
void np_strv_push(struct np_strv *sv, const char *s); /* copies s (NULL as "") */
void np_strv_clear(struct np_strv *sv);
int np_strv_contains(const struct np_strv *sv, const char *s);
void np_strv_copy(struct np_strv *dst, const struct np_strv *src); /* dst cleared first */

/* ---- Node (/nodepool/nodes/<id>) ---------------------------------------- */
enum np_node_state {
	NP_NODE_INIT,
	NP_NODE_BUILDING,
	NP_NODE_TESTING,
	NP_NODE_READY,
	NP_NODE_IN_USE,
	NP_NODE_USED,
	NP_NODE_HOLD,
	NP_NODE_DELETING,
	NP_NODE_FAILED,
	NP_NODE_ABORTED,
	NP_NODE_DELETED,
	NP_NODE_STATE_COUNT
};
/* "init", "building", ..., "in-use", ...; NULL for out-of-range. */
const char *np_node_state_name(int state);
/* The state for a name, or -1. */
int np_node_state_parse(const char *name);

struct np_node {
	char *id;  /* znode name (10 digits); not in the body */
	int state; /* enum np_node_state; missing/null reads as init; -1 unknown */
	double state_time;
	double created_time; /* 0 = unset, written as null (upstream's None) */
	char *cloud, *region, *az;
	char *provider, *pool;
	struct np_strv type; /* labels; a bare string on the wire is read as one label */
	char *allocated_to;
	char *public_ipv4, *private_ipv4, *public_ipv6, *interface_ip;
	char *host_id;
	char *connection_type;
	/* connection_port: int 0..65535 (default 22), or an object (k8s
	 * credentials), in which case connection_port_obj holds it and
	 * connection_port is 0. ssh_port is written with the same value; it is
	 * read only when connection_port is missing or null (then 22 if neither
	 * is set). Any other value is odd (port 22). */
	int connection_port;
	json_t *connection_port_obj;
	char *image_id;
	char *launcher;
	/* external_id: a string, or any other JSON value (AWS writes an object
	 * {instance, host}) in external_id_obj; exactly one of the two is set,
	 * or neither (null). */
	char *external_id;
	json_t *external_id_obj;
	char *hostname;
	char *comment, *hold_job;
	/* hold_expiration: seconds; 0 = none. Read with Python int(): an int
	 * as is, a float truncated toward 0, a bool as 0/1, a numeric string
	 * ("12", " -3 ", "1_000") as its value, any other string as 0
	 * (upstream's ValueError fallback); huge values saturate; a list or
	 * object is odd (null here; upstream's uncaught TypeError). */
	long long hold_expiration;
	int has_hold_expiration; /* 0: null (missing or null on read) */
	/* user_data: any JSON, verbatim (NULL = null). Zuul's useNodeSet
	 * writes an object {"zuul_system": ..., "project_name": ...};
	 * metastatic a JSON string. */
	json_t *user_data;
	struct np_strv host_keys;
	char *username; /* default "zuul" on read */
	char *python_path, *shell_type;
	json_t *resources;  /* object or NULL */
	int slot;	    /* -1 = null; a negative or non-int slot on read is odd */
	json_t *attributes; /* any JSON or NULL; pools write an object */
	char *tenant_name, *requestor;
	json_t *driver_data;  /* any JSON or NULL */
	json_t *extra;	      /* unknown keys (object) or NULL */
	json_t *odd, *odd_as; /* odd values and what the fields read them as */
};

struct np_node *np_node_new(void); /* defaults: state init, port 22, slot -1, username zuul */
void np_node_free(struct np_node *n);
struct np_node *np_node_dup(const struct np_node *n); /* deep copy; NULL gives NULL */
/* 0 and *out set, or -1 with a message in err. id is copied (may be NULL).
 * An unknown state name is odd (state -1; upstream's setter raises). */
int np_node_decode(const char *id, const char *data, size_t len, struct np_node **out, char *err,
		   size_t errlen);
/* Upstream's Node.toDict() keys (36, with ssh_port) plus extra. */
char *np_node_encode(const struct np_node *n, size_t *len);
/* Set state and state_time = now (as upstream's Node.state setter). */
void np_node_set_state(struct np_node *n, int state);

/* ---- NodeRequest (/nodepool/requests/<prio>-<seq>) ----------------------- */
enum np_request_state {
	NP_REQ_REQUESTED,
	NP_REQ_PENDING,
	NP_REQ_FULFILLED,
	NP_REQ_FAILED,
	NP_REQ_STATE_COUNT
};
const char *np_request_state_name(int state);
int np_request_state_parse(const char *name);

struct np_request {
	char *id;  /* znode name "<3-digit prio>-<10-digit seq>"; not in the body */
	int state; /* missing/null reads as requested */
	double state_time;
	struct np_strv node_types;  /* order significant, duplicates allowed */
	struct np_strv nodes;	    /* node ids, in node_types order once fulfilled */
	struct np_strv declined_by; /* pool (launcher) ids */
	int reuse;		    /* default 1 (missing); otherwise Python truthiness (null 0) */
	char *requestor;
	json_t *requestor_data; /* any JSON, untouched */
	char *provider;
	long long relative_priority; /* default 0 (missing, null or odd); a float truncates */
	char *event_id;
	double created_time;  /* meaningful when has_created_time */
	int has_created_time; /* 0: written as null */
	char *tenant_name;
	json_t *extra;
	json_t *odd, *odd_as;
};

struct np_request *np_request_new(void); /* state requested, reuse 1 */
void np_request_free(struct np_request *r);
struct np_request *np_request_dup(const struct np_request *r);
int np_request_decode(const char *id, const char *data, size_t len, struct np_request **out,
		      char *err, size_t errlen);
char *np_request_encode(const struct np_request *r, size_t *len);
void np_request_set_state(struct np_request *r, int state);
/*
 * Order of service, as upstream's NodeRequest.priority: the id's prefix
 * (string compare), then relative_priority, then the sequence (string
 * compare). <0, 0, >0 like strcmp. Ids without '-' sort by the whole id.
 */
int np_request_cmp(const struct np_request *a, const struct np_request *b);

/* ---- ImageBuild (/nodepool/images/<image>/builds/<build-id>) ------------- */
enum np_build_state {
	NP_BUILD_BUILDING,
	NP_BUILD_READY,
	NP_BUILD_FAILED,
	NP_BUILD_DELETING,
	NP_BUILD_STATE_COUNT
};
const char *np_build_state_name(int state);
int np_build_state_parse(const char *name);

struct np_image_build {
	char *id;  /* 32 hex (uuid4) or legacy 10-digit sequence; not in the body */
	int state; /* missing/null reads as building */
	double state_time;
	char *builder;	  /* FQDN; omitted from the body when NULL */
	char *builder_id; /* uuid; omitted when NULL */
	/* formats: read by splitting a non-empty string at ','; written as a
	 * comma-joined sorted string; omitted if empty. */
	struct np_strv formats;
	char *username;	   /* default "zuul" (new and missing on read) */
	char *python_path; /* default "/usr/bin/python2" when missing on read */
	char *shell_type;
	json_t *extra;
	json_t *odd, *odd_as;
};
struct np_image_build *np_image_build_new(void); /* state building, username zuul */
void np_image_build_free(struct np_image_build *b);
/* Set state and state_time = now (as upstream's BaseModel.state setter). */
void np_image_build_set_state(struct np_image_build *b, int state);
int np_image_build_decode(const char *id, const char *data, size_t len, struct np_image_build **out,
			  char *err, size_t errlen);
char *np_image_build_encode(const struct np_image_build *b, size_t *len);

/* ---- ImageUpload (…/providers/<provider>/images/<upload-id>) ------------- */
enum np_upload_state {
	NP_UPLOAD_UPLOADING,
	NP_UPLOAD_READY,
	NP_UPLOAD_FAILED,
	NP_UPLOAD_DELETING,
	NP_UPLOAD_STATE_COUNT
};
const char *np_upload_state_name(int state);
int np_upload_state_parse(const char *name);

struct np_image_upload {
	char *id;  /* 10-digit sequence; not in the body */
	int state; /* missing/null reads as uploading */
	double state_time;
	char *external_id, *external_name;
	char *format;
	/* On read, as upstream: username "zuul" and python_path
	 * "/usr/bin/python2" when missing. */
	char *username, *python_path, *shell_type;
	json_t *extra;
	json_t *odd, *odd_as;
};
struct np_image_upload *np_image_upload_new(void); /* state uploading, strings NULL */
void np_image_upload_free(struct np_image_upload *u);
void np_image_upload_set_state(struct np_image_upload *u, int state);
int np_image_upload_decode(const char *id, const char *data, size_t len,
			   struct np_image_upload **out, char *err, size_t errlen);
char *np_image_upload_encode(const struct np_image_upload *u, size_t *len);

/* ---- Components (/nodepool/components/<kind>/<hostname><seq>) ------------ */
struct np_component {
	char *name;	/* znode name; not in the body */
	char *kind;	/* "launcher", "builder", "pool" (from the body) */
	char *hostname; /* default on read: the znode name (as upstream's registry) */
	char *state;	/* "initializing", "running", "paused", "stopped" (default) */
	char *version;
	long long model_api; /* 0 */
	/* pool components only (kind "pool"): */
	char *id;	 /* launcher id "<fqdn>-PoolWorker.<provider>-<pool>-<uuid4hex>" */
	char *pool_name; /* key "name" */
	char *provider_name;
	struct np_strv supported_labels;
	long long priority; /* default 100 */
	int paused;
	json_t *extra;
	json_t *odd, *odd_as;
};
/* kind copied (may be NULL); state "stopped", priority 100, the rest unset. */
struct np_component *np_component_new(const char *kind);
void np_component_free(struct np_component *c);
/* Pool keys are read only for kind "pool"; on other kinds they are unknown
 * keys kept in extra. */
int np_component_decode(const char *name, const char *data, size_t len, struct np_component **out,
			char *err, size_t errlen);
/* JSON with sorted keys, as upstream (json.dumps(sort_keys=True)). Pool keys
 * are written only for kind "pool". */
char *np_component_encode(const struct np_component *c, size_t *len);

#endif
