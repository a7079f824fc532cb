/*
 * The web status API of a launcher process, as upstream Nodepool's
 * webapp.py, on libevent's evhttp, read-only:
 *
 *   /node-list [node_id, fields]   /request-list [fields]   /label-list [fields]
 *   /image-list [fields]   /dib-image-list [fields]   /image-status [fields]
 *   /ready      200 "OK" once the launcher finished its first pass, else 503
 *   /metrics    Prometheus text (ours; see metrics.h)
 *
 * Listings are text tables or JSON by the Accept header (status.h's
 * negotiation); `fields` (comma list) selects text columns. Every answer
 * carries Access-Control-Allow-Origin: *, Cache-Control: public,
 * max-age=1, Last-Modified and Expires (+1 s); answers are kept 1 s per
 * (path, query, type), and If-Modified-Since is honoured (304), as
 * upstream. Unknown paths are 404; methods other than GET and HEAD 405.
 *
 * Data: the launcher's caches (nodes, requests, pool components) through a
 * status_view; image listings read a snapshot of /nodepool/images
 * (imagetree.h) at most once a second, /metrics the workers' metric records
 * (metrics.h); requests that need them wait (asynchronously) for the read.
 *
 * Limits (nodepool.yaml(5), webapp; nodepoold(8), SECURITY): at most
 * max_connections open connections (then the listener waits), at most
 * max_connections_per_client from one address (more are closed at once),
 * request headers of at most 8 KiB and no body (evhttp answers 413 / 400);
 * a connection gets request_timeout seconds from its accept, and from each
 * request it made, to send a whole request head (a client trickling one
 * header line at a time is closed then, however often it writes), and is
 * closed after timeout seconds without a byte; at most 64 requests waiting
 * for a read. An answer larger than max_response_size bytes is not sent
 * (503, saying so); text-table cells are cut at STATUS_CELL_MAX_WIDTH
 * columns and STATUS_CELL_MAX_LINES lines (status.h). The cache key holds
 * the parameters the listing reads (fields, node_id), not the raw query.
 */
#ifndef NP_WEB_H
#define NP_WEB_H

#include <stddef.h>
#include <jansson.h>

#include "lib/ops/status.h"

struct event_base;
struct web;

struct web_options {
	const char *listen_address; /* "0.0.0.0" if NULL */
	int port;		    /* 0: any free port (see web_port) */
	int max_connections;	    /* <= 0: 64 */
	int timeout;		    /* idle seconds; <= 0: 10 */
	int max_per_client;	    /* <= 0: 8 */
	double request_timeout;	    /* seconds for a whole request head; <= 0: 10 */
	size_t max_response_size;   /* bytes; 0: 32 MiB */
};

/* Fills o from a slice's "webapp" object (slice.h; borrowed: the address
 * points into it); absent keys leave the defaults. */
void web_options_from_json(struct web_options *o, const json_t *webapp);

/* live_metrics (may be NULL) gives this process's own metrics record
 * (new reference or NULL) for /metrics, fresher than its stored copy. */
typedef json_t *(*web_live_metrics_fn)(void *arg);

/* Bind and serve on base. NULL with a message when the address cannot be
 * bound. */
struct web *web_new(struct event_base *base, const struct web_options *opt, status_view_fn view,
		    web_live_metrics_fn live_metrics, void *arg, char *err, size_t errlen);
/*
 * A view whose caches are read on demand (zk.h ZK_CACHE_LAZY: nodepool-web)
 * is made current before a listing that reads them is rendered (once per
 * answer; answers are kept 1 s). refresh(arg) (arg: web_new's) returns 1
 * when it is current now, 0 when reads were started: the owner then calls
 * web_view_current(w) once they are back (the listings waiting go on),
 * -1 when it cannot be (not connected: the listing shows what is held),
 * and -2 when nothing is held and it cannot be read (503).
 * Without one the view is taken as always current.
 */
typedef int (*web_refresh_fn)(void *arg);
void web_set_refresh(struct web *w, web_refresh_fn refresh);
void web_view_current(struct web *w); /* NULL is a no-op */
/* The view could not be made current after all (nodepool-web's view woken
 * from sleep did not sync in time): the listings waiting for it get 503.
 * NULL is a no-op. */
void web_view_failed(struct web *w);
/* The session behind the view is about to go: reads on it are abandoned
 * and the requests waiting for them get 503; cached answers are dropped. */
void web_reset(struct web *w);
/* Stop serving: open connections are closed. NULL is a no-op. */
void web_free(struct web *w);
/* The bound port (useful with port 0). */
int web_port(const struct web *w);
/* Open connections now (tests). */
int web_connections(const struct web *w);

/* Parse an HTTP date (RFC 1123, RFC 850 or asctime): epoch seconds, or -1. */
long long web_parse_http_date(const char *s);

#endif
