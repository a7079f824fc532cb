/*
 * Status listings shared by the `nodepool` command and the web API, as
 * upstream Nodepool's status.py: each listing is a table of rows (JSON
 * objects whose keys are the column keys, in column order) that is shown
 * either as a PrettyTable-style text table or as JSON.
 *
 * Text (as status.py's _to_pretty_table with PrettyTable, align 'l'):
 *
 *   +------------+----------+
 *   | ID         | Provider |
 *   +------------+----------+
 *   | 0000000001 | static-a |
 *   +------------+----------+
 *
 * borders of '+', '-' and '|', one space of padding, every column (header
 * too) left aligned and as wide as its widest line; a value with newlines
 * takes several lines. Values print as Python's str(): null is empty, a
 * list is joined with ',', true/false print as True/False, an object as a
 * Python dict. The column `age` and columns ending in `_age` hold either an
 * epoch (integer; shown as the time since, "DD:HH:MM:SS") or a text
 * already formatted (node-list). No trailing newline.
 *
 * JSON (as json.dumps of the rows): a list of objects, ", " and ": " as
 * separators, ASCII only. Field selection applies to text only, as
 * upstream.
 *
 * Row builders (status_add_*) fill the columns exactly as upstream's
 * node_list, request_list, image_list, dib_image_list, image_status and
 * label_list do.
 */
#ifndef NP_STATUS_H
#define NP_STATUS_H

#include <stddef.h>
#include <jansson.h>

#include "protocol/model.h"

struct zk;
struct zk_cache;
struct zk_cache_entry;

/* One column: the key in the row objects and the text header. */
struct status_column {
	const char *key;
	const char *header;
};

/* The listings upstream's status.py has (and the tables of `nodepool info`
 * and `alien-image-list`). */
enum status_list {
	STATUS_NODE_LIST, /* 21 columns; `list` shows the first 9 */
	STATUS_REQUEST_LIST,
	STATUS_IMAGE_LIST,     /* uploads */
	STATUS_DIB_IMAGE_LIST, /* builds */
	STATUS_IMAGE_STATUS,
	STATUS_LABEL_LIST,
	STATUS_INFO_IMAGES,  /* info: Image Name, Build ID, Upload IDs */
	STATUS_INFO_NODES,   /* info: ID, Server ID */
	STATUS_ALIEN_IMAGES, /* alien-image-list: Provider, Name, Image ID */
	STATUS_LIST_COUNT
};

/* The web API's caps on a text-table cell (status_table's max_cell_*):
 * one long or many-lined value would otherwise widen or heighten every
 * row of the table (issue 23: one 20 kB comment, 10,000 nodes, 202 MB). */
#define STATUS_CELL_MAX_WIDTH 256 /* display columns, then "..." */
#define STATUS_CELL_MAX_LINES 32  /* lines, then "..." */

/*
 * A table: the columns (static) and the rows (owned JSON array). The
 * limits (0: none, as status_table_new leaves them) apply to status_text:
 * cells cut to max_cell_width columns and max_cell_lines lines, and no
 * text at all (NULL, errno EFBIG) when it would be longer than max_bytes.
 */
struct status_table {
	enum status_list kind;
	const struct status_column *cols;
	size_t ncols;
	json_t *rows;
	size_t max_cell_width, max_cell_lines, max_bytes;
};

/* The columns `nodepool list` shows without --detail (upstream's first 9). */
extern const char *const status_node_brief_fields[];
extern const size_t status_node_brief_nfields;

struct status_table *status_table_new(enum status_list kind);
void status_table_free(struct status_table *t);
/* Append a row object (reference stolen): keys not among the columns are
 * ignored by the text form, missing ones print empty. */
void status_table_add(struct status_table *t, json_t *row);
size_t status_table_rows(const struct status_table *t);

/*
 * "DD:HH:MM:SS" for a number of seconds (zero-padded to two digits; more
 * days print more digits; negative spans print as Python's divmod gives
 * them, e.g. -5 -> "-1:23:59:55"), as status.py's age(). buf gets at most
 * size bytes; returns buf.
 */
char *status_age(double seconds, char *buf, size_t size);

/*
 * The text table. fields: NULL or a list of column keys to show (others
 * are dropped, column order kept, as upstream); nfields 0 with fields
 * non-NULL shows no column. now: epoch seconds for epoch ages. malloc'd;
 * NULL (errno EFBIG) when longer than t->max_bytes.
 */
char *status_text(const struct status_table *t, const char *const *fields, size_t nfields,
		  double now);
/* The same with fields as a comma-separated list ("id,state"); NULL or ""
 * shows every column (as the web's fields= parameter). */
char *status_text_csv(const struct status_table *t, const char *fields_csv, double now);
/* The JSON list (json.dumps). malloc'd. */
char *status_json(const struct status_table *t);

/* Display width of a UTF-8 string as a terminal shows it (wide East Asian
 * characters 2, combining marks 0); invalid bytes count 1 each. */
size_t status_text_width(const char *s, size_t len);
/* Python's str() of a JSON value as the text table prints it (null ""). malloc'd. */
char *status_value_text(const json_t *v);
/* Python's repr() of a JSON value (dicts, lists, strings in quotes). malloc'd. */
char *status_py_repr(const json_t *v);

/*
 * Content negotiation as upstream's webapp (webob's acceptable_offers over
 * text/html, text/plain, application/json, in that order): 1 when the best
 * acceptable offer for the Accept header value is application/json, else 0
 * (no header, or nothing acceptable: text).
 */
int status_wants_json(const char *accept);

/* ---- row builders (as status.py) ------------------------------------------ */

/* A node: age is the time since state_time as text; locked is the number
 * of lock contenders; a connection_port that is not a number shows as
 * "redacted". */
void status_add_node(struct status_table *t, const struct np_node *n, int locked, double now);

/*
 * Everything a node-list row shows of a node (as upstream's node_list), so
 * that a process may keep only that (nodepool-web: nodeview.h) and render
 * exactly what the full record would. Borrowed pointers; NULL strings and
 * JSON values show as null. odd: the record's odd values (model.h), key ->
 * value as stored, shown verbatim for provider, state, pool, hostname,
 * hold_job and comment; NULL for none.
 */
struct status_node_row {
	const char *id, *provider, *pool, *az, *username, *launcher, *hostname;
	const char *public_ipv4, *private_ipv4, *public_ipv6, *external_id, *allocated_to;
	const char *hold_job, *comment;
	const struct np_strv *type; /* never NULL */
	int state;		    /* enum np_node_state, -1 unknown */
	double state_time;	    /* epoch seconds */
	int connection_port;
	int port_redacted; /* the port is an object (credentials): "redacted" */
	const json_t *external_id_obj, *user_data, *driver_data;
	const json_t *odd;
};
/* The row's inputs of a full record (borrowed from n). */
void status_node_row_of(struct status_node_row *r, const struct np_node *n);
/* status_add_node from the row's inputs. */
void status_add_node_row(struct status_table *t, const struct status_node_row *n, int locked,
			 double now);
void status_add_request(struct status_table *t, const struct np_request *r);
/* An upload of build_id of image in provider (age: epoch of state_time);
 * serving: it is the one launchers of provider boot (imgtree.h). */
void status_add_upload(struct status_table *t, const char *image, const char *build_id,
		       const char *provider, const struct np_image_upload *u, int serving);
/* A build; state shows "paused" when the image is paused. */
void status_add_build(struct status_table *t, const char *image, const struct np_image_build *b,
		      int paused);
/* build_request: "pending", "building" or NULL; request_time: epoch of the
 * request-build znode (ignored when build_request is NULL). */
void status_add_image_status(struct status_table *t, const char *image, int paused,
			     const char *build_request, double request_time);
void status_add_label(struct status_table *t, const char *label);

/* Rows for every upload (image-list), build (dib-image-list) and image
 * (image-status) of an image tree (lib/zk/imagetree.h), in the tree's
 * order; status_images.c. */
struct imgtree;
void status_image_list(const struct imgtree *t, struct status_table *out);
void status_dib_image_list(const struct imgtree *t, struct status_table *out);
void status_image_status(const struct imgtree *t, struct status_table *out);

/* ---- the launcher's state, as the web API, metrics and statsd see it ------ */

/*
 * What a launcher process offers to the web API, /metrics and statsd: its
 * ZooKeeper session and caches (any may be NULL before the session is
 * established) and a few figures. Filled on demand by the process around
 * the launcher (worker/worker.c), so consumers never hold pointers across
 * a reconfiguration; they are told to drop what refers to the session
 * (web_reset, ...) before it goes.
 */
struct statuspage_history;
struct status_view {
	struct zk *zk;		/* NULL until started; connected or not */
	struct zk_cache *nodes; /* /nodepool/nodes, data and locks, np_node objects */
	/* nodes' objects are struct np_node_sum (nodesum.h), not np_node: a
	 * launcher's cache, whose full records are those of its own provider
	 * (or every node's, when it keeps them all for the web API) */
	int node_sums;
	/* nodes' objects are struct np_node_view (nodeview.h): nodepool-web's */
	int node_views;
	struct zk_cache *requests; /* /nodepool/requests, np_request objects */
	struct zk_cache *pools;	   /* /nodepool/components/pool, np_component objects */
	int ready;		   /* the launcher finished its first pass */
	const char *provider;	   /* this worker's provider (NULL if none) */
	/* request handling counters of this process since it started */
	unsigned long long accepted, fulfilled, declined, failed;
	/* nodepool-web only (NULL elsewhere): what the status page shows of
	 * the configuration (the web slice's "status": providers, pools and
	 * their limits, tenant limits; statuspage.h) and
	 * the page's ring of node samples */
	const json_t *status_config;
	const struct statuspage_history *history;
};
typedef void (*status_view_fn)(void *arg, struct status_view *out);

/* ---- whole listings from the launcher's caches (the web API) -------------- */

/* Nodes of a /nodepool/nodes cache (ZK_CACHE_DATA | ZK_CACHE_LOCKS, decoded
 * np_node objects, or raw records decoded here for the listing), in
 * child-name order; node_id non-NULL and non-empty lists that node only
 * (none if unknown). */
void status_nodes_from_cache(struct status_table *t, const struct zk_cache *nodes,
			     const char *node_id, double now);
/* The same from a cache of np_node_sum objects: the nodes whose full
 * record it keeps. */
void status_nodes_from_sums(struct status_table *t, const struct zk_cache *nodes,
			    const char *node_id, double now);
/*
 * The node of an entry e of the /nodepool/nodes cache nodes: its decoded
 * np_node object, or, in a cache kept without a codec (the records' text),
 * the record decoded now into
 * *tmp, which the caller frees with np_node_free (NULL when nothing was
 * decoded). NULL for an empty or malformed record.
 */
const struct np_node *status_node_of(const struct zk_cache *nodes, const struct zk_cache_entry *e,
				     struct np_node **tmp);
/* Requests of a /nodepool/requests cache (np_request objects). */
void status_requests_from_cache(struct status_table *t, const struct zk_cache *requests);
/* The union of supported labels of a /nodepool/components/pool cache
 * (np_component objects), sorted (upstream's order is a set's). */
void status_labels_from_cache(struct status_table *t, const struct zk_cache *pools);

#endif
