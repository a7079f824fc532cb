/*
 * The web status API (see web.h).
 *
 * Connection cap. libevent 2.1's evhttp has no connection limit and no
 * public hook for a connection's end, so each connection's bufferevent is
 * made here (evhttp_set_bevcb) with an extra reference: while evhttp owns
 * it, it has evhttp's callbacks; evhttp_connection_free clears them and
 * drops its reference. A sweep (run right after a connection closes, from
 * the close callback of its first request, and every half second) drops
 * our reference on those, which closes the socket, and counts the rest.
 * While max_connections are open the listener stops accepting (new
 * clients wait in the kernel's backlog).
 *
 * The same list enforces the per-client cap and the whole-request deadline
 * (web.h). evhttp gives a connection its socket after new_bev returns, so
 * a connection's peer is looked up by the next sweep (made to run at once);
 * one over the cap, or past its deadline, is shut down (shutdown(2)):
 * evhttp then reads the end of the stream and frees the connection as if
 * the client had gone, and the sweep drops our reference.
 */
#include "lib/ops/web.h"

#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>

#include "lib/zk/imagetree.h"
#include "lib/core/log.h"
#include "lib/ops/metrics.h"
#include "lib/ops/nodeview.h"
#include "lib/ops/status.h"
#include "lib/ops/statuspage.h"
#include "lib/zk/zk.h"
#include "lib/core/clock.h"
#include "lib/core/xalloc.h"

#define WEB_CACHE_SLOTS	 32
#define WEB_MAX_WAITING	 64
#define WEB_CACHE_EXPIRY 1.0 /* seconds, as upstream's Cache(expiry=1) */
/* An answer that took longer to make is kept this many times as long as it
 * took: making listings then takes at most about a tenth of the loop's
 * time (/ready and the rest stay answered), however often they are asked. */
#define WEB_CACHE_COST_FACTOR 10.0

struct conn {
	struct conn *next;
	struct bufferevent *bev;
	double deadline; /* monotonic: a whole request head by then */
	int peer_known;	 /* peer looked up (or not a socket yet: 0) */
	int shut;	 /* shut down by us: no longer counted for its peer */
	char peer[INET6_ADDRSTRLEN];
};

/* An answer's body, shared by the cache slot and every reply being sent
 * (evbuffer_add_reference): a cached answer is sent without a copy, so
 * clients asking for a large listing again and again cost no memory each. */
struct cbody {
	int refs;
	size_t len;
	char data[];
};

struct cached {
	char *key;
	double at;
	int code;
	const char *ctype;
	struct cbody *body;
	size_t len;
	double expiry; /* seconds: WEB_CACHE_EXPIRY, or more (cost) */
};

enum need { NEED_NONE, NEED_IMAGES, NEED_METRICS, NEED_VIEW };

struct waiting {
	struct waiting *next;
	struct evhttp_request *req;
	char *path, *query, *key;
	int json;
	enum need need;
	int refreshed; /* the view was made current for it (web_set_refresh) */
};

struct web {
	struct event_base *base;
	struct evhttp *http;
	struct evconnlistener *listener;
	int listening;
	int port;
	status_view_fn view;
	web_live_metrics_fn live;
	void *arg;
	int max_conns;
	int max_per_client;
	double request_timeout;
	size_t max_response;
	double limit_logged; /* when a limit was last logged (one a minute) */
	struct conn *conns;
	int nconns;
	struct event *sweep_ev;
	struct cached cache[WEB_CACHE_SLOTS];
	/* image snapshot */
	struct imgtree *tree;
	double tree_at;
	struct imgtree_load *tree_load;
	/* metric records */
	json_t *records;
	double records_at;
	struct metrics_load *mload;
	struct waiting *waiting;
	int nwaiting;
	web_refresh_fn refresh; /* NULL: the view is always current */
};

static double
now_wall(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- connections -------------------------------------------------------------- */

/* Does evhttp still own c (its callbacks are set)? */
static int
conn_live(const struct conn *c)
{
	bufferevent_data_cb r = NULL, wr = NULL;
	bufferevent_event_cb e = NULL;
	void *a = NULL;

	bufferevent_getcb(c->bev, &r, &wr, &e, &a);
	return r != NULL || wr != NULL || e != NULL;
}

/* Shut a connection down (evhttp sees its end and frees it); logs the
 * reason at most once a minute, as an attacker could make many. */
static void
conn_shut(struct web *w, struct conn *c, double now, const char *why)
{
	evutil_socket_t fd = bufferevent_getfd(c->bev);

	if (c->shut)
		return;
	c->shut = 1;
	if (fd >= 0)
		shutdown(fd, SHUT_RDWR);
	if (now - w->limit_logged >= 60 || w->limit_logged == 0) {
		w->limit_logged = now;
		log_warn("web: closing a connection from %s: %s (logged once a minute)",
			 c->peer[0] ? c->peer : "?", why);
	}
}

/* The peer address of c once evhttp gave it its socket; closes it when
 * its peer has max_per_client connections already. */
static void
conn_classify(struct web *w, struct conn *c, double now)
{
	evutil_socket_t fd = bufferevent_getfd(c->bev);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct conn *o;
	int same = 0;

	if (c->peer_known || fd < 0 || !conn_live(c))
		return;
	c->peer_known = 1;
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) < 0 ||
	    getnameinfo((struct sockaddr *)&ss, sl, c->peer, sizeof(c->peer), NULL, 0,
			NI_NUMERICHOST) != 0) {
		c->peer[0] = '\0';
		return;
	}
	for (o = w->conns; o != NULL; o = o->next)
		if (o != c && o->peer_known && !o->shut && conn_live(o) &&
		    strcmp(o->peer, c->peer) == 0)
			same++;
	if (same >= w->max_per_client)
		conn_shut(w, c, now, "max_connections_per_client reached");
}

static void
sweep(struct web *w)
{
	struct conn **pp = &w->conns, *c;
	double now = np_mono_s();

	/* new_bev makes a sweep run right after each accept: connections
	 * are looked up one at a time, in the order they came */
	for (c = w->conns; c != NULL; c = c->next)
		conn_classify(w, c, now);
	while ((c = *pp) != NULL) {
		bufferevent_data_cb r = NULL, wr = NULL;
		bufferevent_event_cb e = NULL;
		void *a = NULL;
		bufferevent_getcb(c->bev, &r, &wr, &e, &a);
		if (r == NULL && wr == NULL && e == NULL) {
			/* evhttp is done with it: the last reference closes it */
			*pp = c->next;
			bufferevent_decref(c->bev);
			free(c);
			w->nconns--;
		} else {
			if (now > c->deadline)
				conn_shut(w, c, now, "request_timeout passed");
			pp = &c->next;
		}
	}
	if (!w->listening && w->nconns < w->max_conns && w->listener != NULL) {
		evconnlistener_enable(w->listener);
		w->listening = 1;
	}
}

static void
sweep_cb(evutil_socket_t fd, short what, void *arg)
{
	sweep(arg);
}

static struct bufferevent *
new_bev(struct event_base *base, void *arg)
{
	struct web *w = arg;
	struct bufferevent *bev;
	struct conn *c;

	sweep(w);
	bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL)
		return NULL;
	bufferevent_incref(bev);
	if ((c = calloc(1, sizeof(*c))) == NULL)
		np_oom();
	c->bev = bev;
	c->deadline = np_mono_s() + w->request_timeout;
	/* its peer is known once evhttp has set its socket: sweep again as
	 * soon as this accept is done */
	event_active(w->sweep_ev, EV_TIMEOUT, 0);
	c->next = w->conns;
	w->conns = c;
	w->nconns++;
	if (w->nconns >= w->max_conns && w->listening) {
		evconnlistener_disable(w->listener);
		w->listening = 0;
	}
	return bev;
}

static void
conn_closed(struct evhttp_connection *evcon, void *arg)
{
	struct web *w = arg;

	/* evhttp frees the connection after this returns: sweep then */
	event_active(w->sweep_ev, EV_TIMEOUT, 0);
}

int
web_connections(const struct web *w)
{
	int n = 0;
	struct conn *c;

	for (c = w->conns; c != NULL; c = c->next)
		n += conn_live(c);
	return n;
}

/* ---- HTTP dates ---------------------------------------------------------------- */

static void
http_date(double t, char *buf, size_t size)
{
	time_t tt = (time_t)t;
	struct tm tm;

	gmtime_r(&tt, &tm);
	strftime(buf, size, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

long long
web_parse_http_date(const char *s)
{
	static const char *const formats[] = {"%a, %d %b %Y %H:%M:%S GMT",
					      "%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y"};
	struct tm tm;
	size_t i;
	const char *end;

	if (s == NULL)
		return -1;
	while (*s == ' ')
		s++;
	for (i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		memset(&tm, 0, sizeof(tm));
		end = strptime(s, formats[i], &tm);
		if (end != NULL) {
			while (*end == ' ')
				end++;
			if (*end == '\0' || *end == ';')
				return (long long)timegm(&tm);
		}
	}
	return -1;
}

/* ---- answers --------------------------------------------------------------------- */

static void
add_common_headers(struct evhttp_request *req, double last_modified)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	char date[64];

	evhttp_add_header(h, "Access-Control-Allow-Origin", "*");
	evhttp_add_header(h, "Cache-Control", "public, max-age=1");
	http_date(last_modified, date, sizeof(date));
	evhttp_add_header(h, "Last-Modified", date);
	http_date(last_modified + WEB_CACHE_EXPIRY, date, sizeof(date));
	evhttp_add_header(h, "Expires", date);
}

static void
send_plain(struct evhttp_request *req, int code, const char *reason, const char *body)
{
	struct evbuffer *b = evbuffer_new();
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);

	if (b == NULL)
		np_oom();
	evhttp_add_header(h, "Content-Type", "text/plain; charset=UTF-8");
	evbuffer_add(b, body, strlen(body));
	evhttp_send_reply(req, code, reason, b);
	evbuffer_free(b);
}

static void
cbody_unref(struct cbody *b)
{
	if (b != NULL && --b->refs == 0)
		free(b);
}

static void
cbody_unref_cb(const void *data, size_t len, void *arg)
{
	cbody_unref(arg);
}

/* A cached (or just made) answer, honouring If-Modified-Since. */
static void
send_cached(struct evhttp_request *req, const struct cached *c)
{
	struct evkeyvalq *in = evhttp_request_get_input_headers(req);
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	long long ims = web_parse_http_date(evhttp_find_header(in, "If-Modified-Since"));
	struct evbuffer *b;

	add_common_headers(req, c->at);
	evhttp_add_header(h, "Content-Type", c->ctype);
	if (c->code == 200 && ims >= 0 && (long long)floor(c->at) <= ims) {
		evhttp_send_reply(req, 304, "Not Modified", NULL);
		return;
	}
	if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) {
		/* evhttp leaves the length out when there is no body to send */
		char len[32];
		snprintf(len, sizeof(len), "%zu", c->len);
		evhttp_add_header(h, "Content-Length", len);
	}
	if ((b = evbuffer_new()) == NULL)
		np_oom();
	c->body->refs++;
	if (evbuffer_add_reference(b, c->body->data, c->len, cbody_unref_cb, c->body) < 0)
		np_oom();
	evhttp_send_reply(req, c->code, c->code == 200 ? "OK" : "Service Unavailable", b);
	evbuffer_free(b);
}

static struct cached *
cache_find(struct web *w, const char *key, double now)
{
	int i;

	for (i = 0; i < WEB_CACHE_SLOTS; i++)
		if (w->cache[i].key != NULL && strcmp(w->cache[i].key, key) == 0 &&
		    now <= w->cache[i].at + w->cache[i].expiry)
			return &w->cache[i];
	return NULL;
}

static void
cache_slot_clear(struct cached *c)
{
	free(c->key);
	cbody_unref(c->body);
	memset(c, 0, sizeof(*c));
}

/* Keep an answer (the body is taken); returns its slot. */
static struct cached *
cache_put(struct web *w, const char *key, double now, int code, const char *ctype, char *body)
{
	struct cached *slot = &w->cache[0];
	int i;

	for (i = 0; i < WEB_CACHE_SLOTS; i++) {
		struct cached *c = &w->cache[i];
		if (c->key == NULL || strcmp(c->key, key) == 0 || now > c->at + c->expiry) {
			slot = c;
			break;
		}
		if (c->at < slot->at)
			slot = c; /* all fresh: replace the oldest */
	}
	cache_slot_clear(slot);
	if ((slot->key = strdup(key)) == NULL)
		np_oom();
	slot->at = now;
	slot->expiry = WEB_CACHE_EXPIRY;
	slot->code = code;
	slot->ctype = ctype;
	slot->len = strlen(body);
	if ((slot->body = malloc(sizeof(*slot->body) + slot->len + 1)) == NULL)
		np_oom();
	slot->body->refs = 1;
	slot->body->len = slot->len;
	memcpy(slot->body->data, body, slot->len + 1);
	free(body);
	return slot;
}

/*
 * The cache key of a listing: its path, the parameters a listing reads
 * (fields, node_id; the status page's provider, label) and the type; any
 * other key in the query changes
 * nothing in the answer, so it must not make a new one (issue 23: ?x=N
 * made every request a fresh render). malloc'd.
 */
static char *
cache_key(const char *path, const char *query, int json)
{
	struct evkeyvalq params;
	const char *fields, *node_id, *prov, *label;
	char *key;

	TAILQ_INIT(&params);
	if (query != NULL)
		evhttp_parse_query_str(query, &params);
	fields = evhttp_find_header(&params, "fields");
	node_id = evhttp_find_header(&params, "node_id");
	prov = evhttp_find_header(&params, "provider");
	label = evhttp_find_header(&params, "label");
	if (asprintf(&key, "%s|%s%s|%s%s|%s%s|%s%s|%s", path, fields ? "f=" : "",
		     fields ? fields : "", node_id ? "n=" : "", node_id ? node_id : "",
		     prov ? "p=" : "", prov ? prov : "", label ? "l=" : "", label ? label : "",
		     json ? "json" : "pretty") < 0)
		np_oom();
	evhttp_clear_headers(&params);
	return key;
}

/* ---- rendering -------------------------------------------------------------------- */

enum list_kind {
	L_NONE,
	L_NODES,
	L_REQUESTS,
	L_LABELS,
	L_IMAGES,
	L_DIB,
	L_STATUS,
	L_METRICS,
	L_PAGE,
	L_SUMMARY /* the status page (statuspage.h) */
};

static enum list_kind
kind_of(const char *path)
{
	static const struct {
		const char *path;
		enum list_kind kind;
	} table[] = {
	    {"/node-list", L_NODES},	    {"/request-list", L_REQUESTS},
	    {"/label-list", L_LABELS},	    {"/image-list", L_IMAGES},
	    {"/dib-image-list", L_DIB},	    {"/image-status", L_STATUS},
	    {"/metrics", L_METRICS},	    {"/", L_PAGE},
	    {"/status-summary", L_SUMMARY},
	};
	size_t i;

	for (i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (strcmp(path, table[i].path) == 0)
			return table[i].kind;
	return L_NONE;
}

/* The body of an answer over max_response_size (503). malloc'd. */
static char *
too_large(const struct web *w)
{
	char *s;

	if (asprintf(&s,
		     "The answer would be larger than max_response_size (%zu bytes): ask for "
		     "fewer columns (fields=) or one node (node_id=)\n",
		     w->max_response) < 0)
		np_oom();
	return s;
}

/* The body of a listing (malloc'd); *code 200, or 503 when it is larger
 * than max_response_size. */
static char *
render(struct web *w, enum list_kind kind, const char *query, int json, double now, int *code)
{
	struct status_view v;
	struct status_table *t = NULL;
	struct evkeyvalq params;
	const char *fields, *node_id;
	char *out = NULL;

	memset(&v, 0, sizeof(v));
	w->view(w->arg, &v);
	TAILQ_INIT(&params);
	if (query != NULL)
		evhttp_parse_query_str(query, &params);
	fields = evhttp_find_header(&params, "fields");
	node_id = evhttp_find_header(&params, "node_id");
	switch (kind) {
	case L_PAGE:
	case L_SUMMARY: {
		json_t *live = w->live ? w->live(w->arg) : NULL;
		json_t *sum = statuspage_summary(&v, w->tree, w->records, live, query, now);
		out = kind == L_PAGE ? statuspage_html(sum) : json_dumps(sum, JSON_COMPACT);
		json_decref(sum);
		json_decref(live);
		evhttp_clear_headers(&params);
		if (out == NULL)
			np_oom();
		break;
	}
	case L_METRICS: {
		json_t *live = w->live ? w->live(w->arg) : NULL;
		out = metrics_render(&v, w->records, live);
		json_decref(live);
		evhttp_clear_headers(&params);
		break;
	}
	case L_NODES:
		t = status_table_new(STATUS_NODE_LIST);
		if (v.node_sums)
			status_nodes_from_sums(t, v.nodes, node_id, now);
		else if (v.node_views)
			status_nodes_from_views(t, v.nodes, node_id, now);
		else
			status_nodes_from_cache(t, v.nodes, node_id, now);
		break;
	case L_REQUESTS:
		t = status_table_new(STATUS_REQUEST_LIST);
		status_requests_from_cache(t, v.requests);
		break;
	case L_LABELS:
		t = status_table_new(STATUS_LABEL_LIST);
		status_labels_from_cache(t, v.pools);
		break;
	case L_IMAGES:
		t = status_table_new(STATUS_IMAGE_LIST);
		if (w->tree)
			status_image_list(w->tree, t);
		break;
	case L_DIB:
		t = status_table_new(STATUS_DIB_IMAGE_LIST);
		if (w->tree)
			status_dib_image_list(w->tree, t);
		break;
	case L_STATUS:
		t = status_table_new(STATUS_IMAGE_STATUS);
		if (w->tree)
			status_image_status(w->tree, t);
		break;
	default:
		break;
	}
	if (t != NULL) {
		t->max_cell_width = STATUS_CELL_MAX_WIDTH;
		t->max_cell_lines = STATUS_CELL_MAX_LINES;
		t->max_bytes = w->max_response;
		out = json ? status_json(t) : status_text_csv(t, fields, now);
		status_table_free(t);
		evhttp_clear_headers(&params);
	}
	*code = 200;
	if (out == NULL || strlen(out) > w->max_response) {
		free(out);
		out = too_large(w);
		*code = 503;
	}
	return out;
}

static void
answer(struct web *w, struct evhttp_request *req, enum list_kind kind, const char *key,
       const char *query, int json)
{
	double now = now_wall(), t0 = np_mono_s(), cost;
	int code;
	char *body = render(w, kind, query, json, now, &code);
	struct cached *c;
	const char *ctype = code != 200			? "text/plain; charset=UTF-8"
			    : kind == L_METRICS		? "text/plain; version=0.0.4; charset=utf-8"
			    : kind == L_PAGE		? "text/html; charset=utf-8"
			    : json || kind == L_SUMMARY ? "application/json"
							: "text/plain; charset=UTF-8";

	c = cache_put(w, key, now, code, ctype, body);
	cost = np_mono_s() - t0;
	if (cost * WEB_CACHE_COST_FACTOR > c->expiry)
		c->expiry = cost * WEB_CACHE_COST_FACTOR;
	send_cached(req, c);
}

/* ---- waiting for reads ---------------------------------------------------------------- */

static void proceed(struct web *w, struct waiting *x, int fresh);
static void waiting_free(struct waiting *x);

static void
finish_waiting(struct web *w, enum need need, int ok)
{
	struct waiting **pp = &w->waiting, *x, *done = NULL;

	/* taken out first: going on (NEED_VIEW) may queue them again */
	while ((x = *pp) != NULL) {
		if (x->need != need) {
			pp = &x->next;
			continue;
		}
		*pp = x->next;
		w->nwaiting--;
		x->next = done;
		done = x;
	}
	while ((x = done) != NULL) {
		done = x->next;
		x->next = NULL;
		if (ok && need == NEED_VIEW)
			proceed(w, x, 0);
		else if (ok)
			answer(w, x->req, kind_of(x->path), x->key, x->query, x->json);
		else
			send_plain(x->req, 503, "Service Unavailable",
				   "ZooKeeper could not be read; try again\n");
		if (!ok || need != NEED_VIEW)
			waiting_free(x);
	}
}

static void
tree_loaded(int rc, struct imgtree *tree, void *arg)
{
	struct web *w = arg;

	w->tree_load = NULL;
	if (rc == ZOK) {
		imgtree_free(w->tree);
		w->tree = tree;
		w->tree_at = now_wall();
	} else {
		log_warn("web: reading image data: %s", zk_strerror(rc));
	}
	finish_waiting(w, NEED_IMAGES, rc == ZOK);
}

static void
records_loaded(int rc, json_t *records, void *arg)
{
	struct web *w = arg;

	w->mload = NULL;
	if (rc == ZOK) {
		json_decref(w->records);
		w->records = records;
		w->records_at = now_wall();
	} else {
		log_warn("web: reading metric records: %s", zk_strerror(rc));
	}
	finish_waiting(w, NEED_METRICS, rc == ZOK);
}

/* Make sure the data a listing needs is fresh; 1 when it is (answer now),
 * 0 when a read was started (the request waits), -1 when it cannot be
 * read (503). */
static int
ensure_data(struct web *w, enum need need)
{
	struct status_view v;
	double now = now_wall();

	if (need == NEED_NONE)
		return 1;
	if (need == NEED_IMAGES && w->tree != NULL && now - w->tree_at < WEB_CACHE_EXPIRY)
		return 1;
	if (need == NEED_METRICS && w->records != NULL && now - w->records_at < WEB_CACHE_EXPIRY)
		return 1;
	memset(&v, 0, sizeof(v));
	w->view(w->arg, &v);
	if (v.zk == NULL || !zk_is_connected(v.zk))
		return -1;
	if (need == NEED_IMAGES && w->tree_load == NULL)
		w->tree_load = imgtree_load_start(v.zk, tree_loaded, w);
	if (need == NEED_METRICS && w->mload == NULL)
		w->mload = metrics_load_start(v.zk, records_loaded, w);
	return 0;
}

/* ---- requests ------------------------------------------------------------------------- */

/* Listings that read the view's caches (nodes, requests, pools). */
static int
reads_view(enum list_kind kind)
{
	return kind == L_NODES || kind == L_REQUESTS || kind == L_LABELS || kind == L_METRICS ||
	       kind == L_PAGE || kind == L_SUMMARY;
}

static void
waiting_free(struct waiting *x)
{
	free(x->path);
	free(x->query);
	free(x->key);
	free(x);
}

/*
 * Answer x (taken) now, or once what it reads is at hand: first the view
 * made current (web_set_refresh), then the image snapshot or the metric
 * records. fresh: a request just come (the waiting limit applies), not
 * one that waited already.
 */
static void
proceed(struct web *w, struct waiting *x, int fresh)
{
	enum list_kind kind = kind_of(x->path);
	enum need need;
	int rc = 1;

	if (!x->refreshed && w->refresh != NULL && reads_view(kind)) {
		x->refreshed = 1;
		/* -1 (not connected): the listing shows what is held; -2:
		 * nothing held (503) */
		rc = w->refresh(w->arg);
		if (rc == 0 || rc == -2) {
			need = NEED_VIEW;
			rc = rc == 0 ? 0 : -1;
			goto wait;
		}
		rc = 1;
	}
	need = kind == L_IMAGES || kind == L_DIB || kind == L_STATUS ? NEED_IMAGES
	       : kind == L_METRICS				     ? NEED_METRICS
								     : NEED_NONE;
	if (kind == L_PAGE || kind == L_SUMMARY) {
		/* the page waits for the launch figures; the images it shows
		 * as last read (a read is started for the next answer) */
		if (ensure_data(w, NEED_IMAGES) < 0)
			need = NEED_NONE;
		else
			need = NEED_METRICS;
	}
	rc = ensure_data(w, need);
wait:
	if (rc < 0 || (rc == 0 && fresh && w->nwaiting >= WEB_MAX_WAITING)) {
		send_plain(x->req, 503, "Service Unavailable",
			   rc < 0 ? "ZooKeeper is not connected\n" : "Too many requests waiting\n");
		waiting_free(x);
	} else if (rc == 0) {
		x->need = need;
		x->next = w->waiting;
		w->waiting = x;
		w->nwaiting++;
	} else {
		answer(w, x->req, kind, x->key, x->query, x->json);
		waiting_free(x);
	}
}

static void
on_request(struct evhttp_request *req, void *arg)
{
	struct web *w = arg;
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	const char *rawpath = uri ? evhttp_uri_get_path(uri) : NULL;
	const char *query = uri ? evhttp_uri_get_query(uri) : NULL;
	const char *accept;
	char *path, *key;
	enum list_kind kind;
	struct waiting *x;
	struct cached *c;
	int json;

	if (evcon != NULL) {
		struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
		struct conn *cn;
		evhttp_connection_set_closecb(evcon, conn_closed, w);
		/* a whole request came: the next one has its own time */
		for (cn = w->conns; cn != NULL; cn = cn->next)
			if (cn->bev == bev)
				cn->deadline = np_mono_s() + w->request_timeout;
	}
	if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, HEAD");
		send_plain(req, 405, "Method Not Allowed", "Method Not Allowed\n");
		return;
	}
	path = evhttp_uridecode(rawpath && *rawpath ? rawpath : "/", 0, NULL);
	if (path == NULL)
		np_oom();
	if (strcmp(path, "/ready") == 0) {
		struct status_view v;
		memset(&v, 0, sizeof(v));
		w->view(w->arg, &v);
		if (v.ready) {
			add_common_headers(req, now_wall());
			send_plain(req, 200, "OK", "OK");
		} else {
			send_plain(req, 503, "Service Unavailable", "Service Unavailable\n");
		}
		free(path);
		return;
	}
	kind = kind_of(path);
	if (kind == L_NONE) {
		send_plain(req, 404, "Not Found", "Not Found\n");
		free(path);
		return;
	}
	accept = evhttp_find_header(evhttp_request_get_input_headers(req), "Accept");
	json = kind != L_METRICS && status_wants_json(accept);
	key = cache_key(path, query, json);
	c = cache_find(w, key, now_wall());
	if (c != NULL) {
		send_cached(req, c);
		free(key);
		free(path);
		return;
	}
	x = calloc(1, sizeof(*x));
	if (x == NULL || (x->path = strdup(path)) == NULL ||
	    (x->query = strdup(query ? query : "")) == NULL)
		np_oom();
	x->req = req;
	x->key = key;
	x->json = json;
	proceed(w, x, 1);
	free(path);
}

/* ---- life cycle ------------------------------------------------------------------------- */

struct web *
web_new(struct event_base *base, const struct web_options *opt, status_view_fn view,
	web_live_metrics_fn live, void *arg, char *err, size_t errlen)
{
	struct web *w = calloc(1, sizeof(*w));
	struct addrinfo hints, *res = NULL;
	const char *addr = opt->listen_address ? opt->listen_address : "0.0.0.0";
	char port[16];
	int rc;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (w == NULL)
		np_oom();
	w->base = base;
	w->view = view;
	w->live = live;
	w->arg = arg;
	w->max_conns = opt->max_connections > 0 ? opt->max_connections : 64;
	w->max_per_client = opt->max_per_client > 0 ? opt->max_per_client : 8;
	w->request_timeout = opt->request_timeout > 0 ? opt->request_timeout : 10;
	w->max_response = opt->max_response_size > 0 ? opt->max_response_size : 32 << 20;
	snprintf(port, sizeof(port), "%d", opt->port);
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	if ((rc = getaddrinfo(addr, port, &hints, &res)) != 0 || res == NULL) {
		snprintf(err, errlen, "web: %s:%s: %s", addr, port, gai_strerror(rc));
		free(w);
		return NULL;
	}
	w->listener = evconnlistener_new_bind(
	    base, NULL, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC,
	    128, res->ai_addr, (int)res->ai_addrlen);
	freeaddrinfo(res);
	if (w->listener == NULL) {
		snprintf(err, errlen, "web: cannot listen on %s:%s: %s", addr, port,
			 strerror(errno));
		free(w);
		return NULL;
	}
	if (getsockname(evconnlistener_get_fd(w->listener), (struct sockaddr *)&ss, &sl) == 0)
		w->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
							 : ((struct sockaddr_in *)&ss)->sin_port);
	w->listening = 1;
	w->http = evhttp_new(base);
	if (w->http == NULL)
		np_oom();
	evhttp_set_max_headers_size(w->http, 8192);
	evhttp_set_max_body_size(w->http, 1024);
	evhttp_set_timeout(w->http, opt->timeout > 0 ? opt->timeout : 10);
	/* every method reaches on_request, which answers 405 where upstream's
	 * WSGI app would have answered as for GET */
	evhttp_set_allowed_methods(w->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
						EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
						EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
						EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
	evhttp_set_bevcb(w->http, new_bev, w);
	evhttp_set_gencb(w->http, on_request, w);
	if (evhttp_bind_listener(w->http, w->listener) == NULL) {
		snprintf(err, errlen, "web: evhttp_bind_listener failed");
		evhttp_free(w->http);
		evconnlistener_free(w->listener);
		free(w);
		return NULL;
	}
	w->sweep_ev = event_new(base, -1, EV_PERSIST, sweep_cb, w);
	if (w->sweep_ev == NULL)
		np_oom();
	{
		struct timeval tv = {0, 500000};
		event_add(w->sweep_ev, &tv);
	}
	log_info("web: serving on %s:%d", addr, w->port);
	return w;
}

void
web_options_from_json(struct web_options *o, const json_t *webapp)
{
	const json_t *v;

	o->listen_address = json_string_value(json_object_get(webapp, "listen_address"));
	o->port = (int)json_integer_value(json_object_get(webapp, "port"));
	if ((v = json_object_get(webapp, "max_connections")) != NULL && json_is_integer(v))
		o->max_connections = (int)json_integer_value(v);
	if ((v = json_object_get(webapp, "max_connections_per_client")) != NULL &&
	    json_is_integer(v))
		o->max_per_client = (int)json_integer_value(v);
	if ((v = json_object_get(webapp, "request_timeout")) != NULL && json_is_number(v))
		o->request_timeout = json_number_value(v);
	if ((v = json_object_get(webapp, "max_response_size")) != NULL && json_is_integer(v) &&
	    json_integer_value(v) > 0)
		o->max_response_size = (size_t)json_integer_value(v);
}

int
web_port(const struct web *w)
{
	return w ? w->port : 0;
}

void
web_set_refresh(struct web *w, web_refresh_fn refresh)
{
	w->refresh = refresh;
}

void
web_view_current(struct web *w)
{
	if (w != NULL)
		finish_waiting(w, NEED_VIEW, 1);
}

void
web_view_failed(struct web *w)
{
	if (w != NULL)
		finish_waiting(w, NEED_VIEW, 0);
}

void
web_reset(struct web *w)
{
	int i;

	if (w == NULL)
		return;
	imgtree_load_cancel(w->tree_load);
	w->tree_load = NULL;
	metrics_load_cancel(w->mload);
	w->mload = NULL;
	finish_waiting(w, NEED_IMAGES, 0);
	finish_waiting(w, NEED_METRICS, 0);
	finish_waiting(w, NEED_VIEW, 0);
	for (i = 0; i < WEB_CACHE_SLOTS; i++)
		cache_slot_clear(&w->cache[i]);
	imgtree_free(w->tree);
	w->tree = NULL;
	json_decref(w->records);
	w->records = NULL;
}

void
web_free(struct web *w)
{
	struct conn *c, *n;

	if (w == NULL)
		return;
	web_reset(w);
	/* evhttp_free frees the bound listener and every connection */
	evhttp_free(w->http);
	for (c = w->conns; c != NULL; c = n) {
		n = c->next;
		bufferevent_decref(c->bev);
		free(c);
	}
	event_free(w->sweep_ev);
	free(w);
}
