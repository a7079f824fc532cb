/*
 * libcurl multi on libevent. See http.h.
 *
 * The usual curl_multi_socket_action() dance: libcurl tells us which
 * sockets to watch (socket callback -> one persistent libevent event per
 * socket, kept in curl_multi_assign) and when to call it back (timer
 * callback -> one libevent timer); each event calls
 * curl_multi_socket_action() and then collects finished transfers with
 * curl_multi_info_read(). Calls wait in a FIFO queue for a concurrency
 * slot and then a rate token; a 429 puts the call back at the head of the
 * queue and pauses the rate limiter.
 */
#include "lib/net/http.h"

#include <sys/queue.h>
#include <sys/stat.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <event2/event.h>

#include "lib/core/log.h"
#include "lib/net/curl_dl.h"
#include "lib/net/ratelimit.h"

struct http_req {
	TAILQ_ENTRY(http_req) entry;
	struct http_client *c;
	int queued; /* on c->queue */
	int failed; /* on c->failed: its error is delivered on the next loop turn */
	CURL *easy; /* while in flight */
	char *method;
	char *url;
	struct curl_slist *hdrs;
	char *body;
	size_t body_len;
	char *body_file; /* streamed from this file instead of body */
	FILE *bf;	 /* open while in flight */
	double timeout;
	char *aws_sigv4, *username, *password;
	char *api; /* the call's API label, or NULL: the client's */
	/* the answer being received */
	char *rbuf;
	size_t rlen, rcap;
	int too_big;
	struct http_header *rh;
	size_t nrh, caprh;
	char errbuf[CURL_ERROR_SIZE];
	unsigned retries;
	double t_start;
	http_cb cb;
	void *arg;
	/* streaming calls (http_stream): a 2xx body goes to on_line, line by
	 * line, from line_ev on the loop (never from inside libcurl, where no
	 * new call could be started) */
	http_line_cb on_line;
	struct event *line_ev;
	int streaming;	/* -1 status not known yet, 1 a 2xx being streamed, 0 not */
	int delivering; /* inside on_line: a cancel only marks */
	int cancelled;
};

static int stream_write(struct http_req *r, const char *data, size_t len);
static int stream_drain(struct http_req *r, int at_end);

struct http_sock {
	struct http_client *c;
	struct event *ev;
	curl_socket_t fd;
};

struct http_client {
	struct event_base *base;
	CURLM *multi;
	struct event *timer;
	struct ratelimit *rl;
	struct ratelimit_wait *token_wait;
	TAILQ_HEAD(, http_req) queue;	 /* waiting */
	TAILQ_HEAD(, http_req) inflight; /* handed to libcurl */
	TAILQ_HEAD(, http_req) failed;	 /* could not start (a body file) */
	struct event *fail_ev;
	int max_concurrency, max_retries;
	int in_timer; /* inside timer_event_cb's curl_multi_socket_action */
	double timeout, backoff_max;
	size_t max_body;
	char *ca_file, *user_agent;
	char *api; /* options' api, or NULL */
	char *ca_pem, *cert_file, *key_file, *cert_pem, *key_pem;
	int insecure;
	struct http_stats st;
};

static void pump(struct http_client *c);

/* A PEM string as an in-memory blob option (libcurl copies it). */
static void
set_blob(CURL *e, CURLoption opt, const char *pem)
{
	struct curl_blob b;

	b.data = (void *)pem;
	b.len = strlen(pem);
	b.flags = CURL_BLOB_COPY;
	curl_easy_setopt(e, opt, &b);
}
static void check_done(struct http_client *c);

/* ---- libcurl callbacks ----------------------------------------------------- */

static void
sock_event_cb(evutil_socket_t fd, short what, void *arg)
{
	struct http_sock *s = arg;
	struct http_client *c = s->c;
	int running, action = 0;

	if (what & EV_READ)
		action |= CURL_CSELECT_IN;
	if (what & EV_WRITE)
		action |= CURL_CSELECT_OUT;
	curl_multi_socket_action(c->multi, fd, action, &running);
	check_done(c);
}

static int
socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
	struct http_client *c = userp;
	struct http_sock *s = socketp;
	short kind = EV_PERSIST;

	(void)easy;
	if (what == CURL_POLL_REMOVE) {
		if (s != NULL) {
			event_free(s->ev);
			free(s);
			curl_multi_assign(c->multi, fd, NULL);
		}
		return 0;
	}
	if (what & CURL_POLL_IN)
		kind |= EV_READ;
	if (what & CURL_POLL_OUT)
		kind |= EV_WRITE;
	if (s == NULL) {
		s = calloc(1, sizeof(*s));
		if (s == NULL)
			return -1;
		s->c = c;
		s->fd = fd;
		curl_multi_assign(c->multi, fd, s);
	} else {
		event_free(s->ev);
	}
	s->ev = event_new(c->base, fd, kind, sock_event_cb, s);
	if (s->ev == NULL)
		return -1;
	event_add(s->ev, NULL);
	return 0;
}

static int
timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
	struct http_client *c = userp;
	struct timeval tv;

	(void)multi;
	if (timeout_ms < 0) {
		event_del(c->timer);
		return 0;
	}
	if (timeout_ms == 0 && !c->in_timer) {
		/* "as soon as possible" (a transfer just added): in this loop
		 * turn, after the callbacks already due. A zero timer ran in
		 * the next turn, after every callback that turn's poll
		 * brought: a busy launcher's RunInstances left a turn or two
		 * (several ms each under load) after their grant (issue 25).
		 * Asked again from the timer's own run: the next turn, so
		 * that libcurl can never keep the loop from polling. */
		event_del(c->timer);
		event_active(c->timer, EV_TIMEOUT, 0);
		return 0;
	}
	tv.tv_sec = timeout_ms / 1000;
	tv.tv_usec = (timeout_ms % 1000) * 1000;
	event_add(c->timer, &tv);
	return 0;
}

static void
timer_event_cb(evutil_socket_t fd, short what, void *arg)
{
	struct http_client *c = arg;
	int running;

	(void)fd;
	(void)what;
	c->in_timer = 1;
	curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	c->in_timer = 0;
	check_done(c);
}

static size_t
write_cb(char *data, size_t size, size_t n, void *arg)
{
	struct http_req *r = arg;
	size_t len = size * n;

	if (r->on_line != NULL && stream_write(r, data, len) == 1)
		return len;
	if (r->rlen + len > r->c->max_body) {
		r->too_big = 1;
		return 0; /* aborts the transfer: CURLE_WRITE_ERROR */
	}
	if (r->rlen + len + 1 > r->rcap) {
		size_t cap = r->rcap ? r->rcap : 1024;
		while (cap < r->rlen + len + 1)
			cap *= 2;
		r->rbuf = realloc(r->rbuf, cap);
		if (r->rbuf == NULL)
			abort();
		r->rcap = cap;
	}
	memcpy(r->rbuf + r->rlen, data, len);
	r->rlen += len;
	r->rbuf[r->rlen] = '\0';
	return len;
}

static void
headers_clear(struct http_req *r)
{
	size_t i;

	for (i = 0; i < r->nrh; i++) {
		free((char *)r->rh[i].name);
		free((char *)r->rh[i].value);
	}
	r->nrh = 0;
}

int
http_header_split(const char *line, size_t len, size_t *name_len, const char **value,
		  size_t *value_len)
{
	const char *colon = memchr(line, ':', len), *v, *end = line + len;

	if (colon == NULL)
		return -1;
	v = colon + 1;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && isspace((unsigned char)end[-1]))
		end--;
	*name_len = (size_t)(colon - line);
	*value = v;
	*value_len = (size_t)(end - v);
	return 0;
}

static size_t
header_cb(char *data, size_t size, size_t n, void *arg)
{
	struct http_req *r = arg;
	size_t len = size * n, nl, vl;
	const char *v;
	char *name, *value;

	/* A status line starts a new answer (1xx, or a retried request):
	 * keep only the final answer's headers. */
	if (len >= 5 && strncmp(data, "HTTP/", 5) == 0) {
		headers_clear(r);
		return len;
	}
	if (http_header_split(data, len, &nl, &v, &vl) != 0)
		return len; /* the blank line, or junk */
	if (r->nrh == r->caprh) {
		r->caprh = r->caprh ? r->caprh * 2 : 16;
		r->rh = realloc(r->rh, r->caprh * sizeof(*r->rh));
		if (r->rh == NULL)
			abort();
	}
	name = strndup(data, nl);
	value = strndup(v, vl);
	if (name == NULL || value == NULL)
		abort();
	r->rh[r->nrh].name = name;
	r->rh[r->nrh].value = value;
	r->nrh++;
	return len;
}

/* ---- the call life cycle ----------------------------------------------------- */

static void
req_free(struct http_req *r)
{
	if (r->easy != NULL)
		curl_easy_cleanup(r->easy);
	if (r->line_ev != NULL)
		event_free(r->line_ev);
	headers_clear(r);
	free(r->rh);
	curl_slist_free_all(r->hdrs);
	free(r->method);
	free(r->url);
	free(r->body);
	free(r->aws_sigv4);
	free(r->api);
	free(r->username);
	if (r->password != NULL)
		explicit_bzero(r->password, strlen(r->password));
	free(r->password);
	free(r->body_file);
	if (r->bf != NULL)
		fclose(r->bf);
	free(r->rbuf);
	free(r);
}

static size_t
read_cb(char *buf, size_t size, size_t n, void *arg)
{
	struct http_req *r = arg;
	size_t got = fread(buf, 1, size * n, r->bf);

	if (got == 0 && ferror(r->bf))
		return CURL_READFUNC_ABORT;
	return got;
}

static int
start(struct http_req *r)
{
	struct http_client *c = r->c;
	CURL *e = curl_easy_init();
	long ms = (long)(r->timeout * 1000.0);

	if (e == NULL)
		return -1;
	r->easy = e;
	r->rlen = 0;
	r->too_big = 0;
	r->streaming = -1;
	if (r->on_line != NULL)
		curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	headers_clear(r);
	r->errbuf[0] = '\0';
	curl_easy_setopt(e, CURLOPT_URL, r->url);
	curl_easy_setopt(e, CURLOPT_PRIVATE, r);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, ms > 0 ? ms : 1L);
	curl_easy_setopt(e, CURLOPT_USERAGENT, c->user_agent);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	if (c->ca_file != NULL)
		curl_easy_setopt(e, CURLOPT_CAINFO, c->ca_file);
	if (c->ca_pem != NULL)
		set_blob(e, CURLOPT_CAINFO_BLOB, c->ca_pem);
	if (c->cert_file != NULL)
		curl_easy_setopt(e, CURLOPT_SSLCERT, c->cert_file);
	if (c->key_file != NULL)
		curl_easy_setopt(e, CURLOPT_SSLKEY, c->key_file);
	if (c->cert_pem != NULL)
		set_blob(e, CURLOPT_SSLCERT_BLOB, c->cert_pem);
	if (c->key_pem != NULL)
		set_blob(e, CURLOPT_SSLKEY_BLOB, c->key_pem);
	if (c->insecure) {
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (r->hdrs != NULL)
		curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->hdrs);
	if (r->body_file != NULL) {
		struct stat sb;

		if (r->bf != NULL)
			fclose(r->bf); /* a 429 retry starts the file again */
		r->bf = fopen(r->body_file, "rb");
		if (r->bf == NULL || fstat(fileno(r->bf), &sb) != 0) {
			curl_easy_cleanup(e);
			r->easy = NULL;
			return 1; /* reported by the caller */
		}
		curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(e, CURLOPT_READFUNCTION, read_cb);
		curl_easy_setopt(e, CURLOPT_READDATA, r);
		curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)sb.st_size);
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r->method);
	} else if (r->body != NULL) {
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body);
	}
	if (r->aws_sigv4 != NULL) {
		curl_easy_setopt(e, CURLOPT_AWS_SIGV4, r->aws_sigv4);
		curl_easy_setopt(e, CURLOPT_USERNAME, r->username != NULL ? r->username : "");
		curl_easy_setopt(e, CURLOPT_PASSWORD, r->password != NULL ? r->password : "");
	}
	if (strcmp(r->method, "HEAD") == 0)
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	else if (strcmp(r->method, "GET") != 0 || r->body != NULL)
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r->method);
	if (curl_multi_add_handle(c->multi, e) != CURLM_OK) {
		curl_easy_cleanup(e);
		r->easy = NULL;
		return -1;
	}
	TAILQ_INSERT_TAIL(&c->inflight, r, entry);
	c->st.started++;
	c->st.inflight++;
	if (c->st.inflight > c->st.peak_inflight)
		c->st.peak_inflight = c->st.inflight;
	return 0;
}

static void
deliver(struct http_req *r, int status, const char *error)
{
	struct http_client *c = r->c;
	struct http_response res;

	if (r->on_line != NULL && r->streaming == 1) {
		/* the lines still buffered first (a last one without its
		 * newline only when the answer ended cleanly) */
		if (stream_drain(r, error == NULL) != 0)
			return; /* cancelled by on_line: freed */
		r->rlen = 0;
	}
	memset(&res, 0, sizeof(res));
	res.status = status;
	res.error = error;
	res.body = r->rbuf != NULL ? r->rbuf : "";
	res.body_len = r->rlen;
	res.headers = r->rh;
	res.nheaders = r->nrh;
	res.retries = r->retries;
	res.elapsed = ratelimit_now() - r->t_start;
	c->st.completed++;
	if (error != NULL)
		c->st.errors++;
	r->cb(&res, r->arg);
	req_free(r);
}

double
http_retry_after(const char *value, long long now)
{
	char *end;
	long long v;
	time_t t;

	while (*value == ' ' || *value == '\t')
		value++;
	if (*value >= '0' && *value <= '9') {
		errno = 0;
		v = strtoll(value, &end, 10);
		while (*end == ' ' || *end == '\t')
			end++;
		if (*end != '\0' || errno == ERANGE)
			return -1;
		return (double)v;
	}
	if (curl_dl_load(NULL, NULL, 0) != 0)
		return -1; /* no HTTP-date parser without libcurl */
	t = curl_getdate(value, NULL);
	if (t == (time_t)-1)
		return -1;
	return (double)t > (double)now ? (double)t - (double)now : 0;
}

static http_retry_fn g_retry_fn;
static void *g_retry_arg;

void
http_set_retry_observer(http_retry_fn fn, void *arg)
{
	g_retry_fn = fn;
	g_retry_arg = fn != NULL ? arg : NULL;
}

void
http_note_retry(const char *api, int status, const char *why, unsigned attempt, double wait)
{
	if (api == NULL)
		api = "";
	log_debug("API %s: HTTP %d%s%s%s, retry %u in %.2f s", api, status, why != NULL ? " (" : "",
		  why != NULL ? why : "", why != NULL ? ")" : "", attempt, wait);
	if (g_retry_fn != NULL)
		g_retry_fn(api, status, wait, g_retry_arg);
}

/* The API label of a call: its own, its client's, else its URL's host
 * (into buf). */
static const char *
req_api(const struct http_req *r, char *buf, size_t len)
{
	const char *h, *e;

	if (r->api != NULL)
		return r->api;
	if (r->c->api != NULL)
		return r->c->api;
	h = strstr(r->url, "://");
	h = h != NULL ? h + 3 : r->url;
	e = h + strcspn(h, "/?#");
	snprintf(buf, len, "%.*s", (int)(e - h), h);
	return buf;
}

/* Seconds to wait after a 429 or 503: Retry-After, else 1, 2, 4... by the
 * retries made; capped at backoff_max. */
static double
retry_delay(struct http_req *r)
{
	struct http_response tmp;
	const char *ra;
	double d = -1;

	memset(&tmp, 0, sizeof(tmp));
	tmp.headers = r->rh;
	tmp.nheaders = r->nrh;
	ra = http_response_header(&tmp, "Retry-After");
	if (ra != NULL)
		d = http_retry_after(ra, (long long)time(NULL));
	if (d < 0)
		d = ldexp(1.0, (int)(r->retries < 30 ? r->retries : 30));
	return fmin(d, r->c->backoff_max);
}

/* Collect finished transfers. */
static void
check_done(struct http_client *c)
{
	CURLMsg *m;
	int left;

	while ((m = curl_multi_info_read(c->multi, &left)) != NULL) {
		struct http_req *r = NULL;
		CURLcode rc;
		long status = 0, conns = 0;
		char err[CURL_ERROR_SIZE + 64];

		if (m->msg != CURLMSG_DONE)
			continue;
		rc = m->data.result;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&r);
		curl_easy_getinfo(m->easy_handle, CURLINFO_RESPONSE_CODE, &status);
		if (curl_easy_getinfo(m->easy_handle, CURLINFO_NUM_CONNECTS, &conns) == CURLE_OK &&
		    conns > 0)
			c->st.connects += (uint64_t)conns;
		curl_multi_remove_handle(c->multi, m->easy_handle);
		curl_easy_cleanup(r->easy);
		r->easy = NULL;
		TAILQ_REMOVE(&c->inflight, r, entry);
		c->st.inflight--;
		if (rc == CURLE_OK && (status == 429 || status == 503)) {
			c->st.throttled++;
			if ((int)r->retries < c->max_retries) {
				double d = retry_delay(r);
				char hb[256];
				r->retries++;
				http_note_retry(req_api(r, hb, sizeof(hb)), (int)status, NULL,
						r->retries, d);
				ratelimit_pause_until(c->rl, ratelimit_now() + d);
				TAILQ_INSERT_HEAD(&c->queue, r, entry);
				r->queued = 1;
				c->st.queued++;
				continue;
			}
		}
		if (rc == CURLE_OK) {
			deliver(r, (int)status, NULL);
			continue;
		}
		if (r->too_big)
			snprintf(err, sizeof(err), "response body over %zu bytes", c->max_body);
		else if (rc == CURLE_OPERATION_TIMEDOUT)
			snprintf(err, sizeof(err), "timed out after %.1f s", r->timeout);
		else if (rc == CURLE_COULDNT_CONNECT)
			snprintf(err, sizeof(err), "connection refused%s%s",
				 r->errbuf[0] ? ": " : "", r->errbuf);
		else
			snprintf(err, sizeof(err), "%s%s%s", curl_easy_strerror(rc),
				 r->errbuf[0] ? ": " : "", r->errbuf);
		deliver(r, 0, err);
	}
	pump(c);
}

/* Start the head of the queue (a token is in hand). */
static void
start_head(struct http_client *c)
{
	struct http_req *r = TAILQ_FIRST(&c->queue);

	if (r == NULL)
		return;
	TAILQ_REMOVE(&c->queue, r, entry);
	r->queued = 0;
	c->st.queued--;
	switch (start(r)) {
	case 0:
		break;
	case 1:
		/* never a callback from inside http_request(): on the loop */
		r->failed = 1;
		TAILQ_INSERT_TAIL(&c->failed, r, entry);
		event_active(c->fail_ev, EV_TIMEOUT, 0);
		break;
	default:
		abort(); /* libcurl out of memory */
	}
}

static void
fail_cb(evutil_socket_t fd, short what, void *arg)
{
	struct http_client *c = arg;
	struct http_req *r;

	(void)fd;
	(void)what;
	while ((r = TAILQ_FIRST(&c->failed)) != NULL) {
		TAILQ_REMOVE(&c->failed, r, entry);
		r->failed = 0;
		deliver(r, 0, "cannot open the file to upload");
	}
	pump(c);
}

static void
token_cb(void *arg)
{
	struct http_client *c = arg;

	c->token_wait = NULL;
	if ((int)c->st.inflight < c->max_concurrency)
		start_head(c);
	pump(c);
}

static void
pump(struct http_client *c)
{
	while (c->token_wait == NULL && !TAILQ_EMPTY(&c->queue) &&
	       (int)c->st.inflight < c->max_concurrency) {
		if (!ratelimit_take(c->rl, token_cb, c, &c->token_wait))
			return; /* token_cb continues */
		start_head(c);
	}
}

/* ---- public ------------------------------------------------------------------- */

int
http_load(const char *who, char *err, size_t errlen)
{
	return curl_dl_load(who, err, errlen);
}

struct http_client *
http_client_new(struct event_base *base, const struct http_client_options *opt, char *err,
		size_t errlen)
{
	struct http_client *c;
	struct http_client_options o;

	memset(&o, 0, sizeof(o));
	if (opt != NULL)
		o = *opt;
	if (curl_dl_load(NULL, err, errlen) != 0)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	c->base = base;
	TAILQ_INIT(&c->queue);
	TAILQ_INIT(&c->inflight);
	TAILQ_INIT(&c->failed);
	c->fail_ev = event_new(base, -1, 0, fail_cb, c);
	c->max_concurrency =
	    o.max_concurrency > 0 ? o.max_concurrency : HTTP_DEFAULT_MAX_CONCURRENCY;
	c->max_retries = o.max_retries < 0    ? 0
			 : o.max_retries == 0 ? HTTP_DEFAULT_MAX_RETRIES
					      : o.max_retries;
	c->timeout = o.timeout > 0 ? o.timeout : HTTP_DEFAULT_TIMEOUT;
	c->backoff_max = o.backoff_max > 0 ? o.backoff_max : HTTP_DEFAULT_BACKOFF_MAX;
	c->max_body = o.max_body > 0 ? o.max_body : HTTP_DEFAULT_MAX_BODY;
	c->ca_file = o.ca_file != NULL ? strdup(o.ca_file) : NULL;
	c->user_agent = strdup(o.user_agent != NULL ? o.user_agent : "nodepoold");
	c->api = o.api != NULL ? strdup(o.api) : NULL;
	c->ca_pem = o.ca_pem != NULL ? strdup(o.ca_pem) : NULL;
	c->cert_file = o.cert_file != NULL ? strdup(o.cert_file) : NULL;
	c->key_file = o.key_file != NULL ? strdup(o.key_file) : NULL;
	c->cert_pem = o.cert_pem != NULL ? strdup(o.cert_pem) : NULL;
	c->key_pem = o.key_pem != NULL ? strdup(o.key_pem) : NULL;
	c->insecure = o.insecure;
	c->multi = curl_multi_init();
	c->timer = event_new(base, -1, 0, timer_event_cb, c);
	c->rl = ratelimit_new(base, o.rate, 1);
	if (c->multi == NULL || c->timer == NULL || c->rl == NULL || c->user_agent == NULL) {
		snprintf(err, errlen, "cannot set up libcurl multi");
		http_client_free(c);
		return NULL;
	}
	curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
	curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
	curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
	curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
	/* Connections kept for reuse: four per call that may be in flight,
	 * libcurl's own ratio, but of our concurrency limit. Its default is
	 * four per handle added, and ours are added per call and removed
	 * when it ends, so the cache shrank with every lull and a wave of
	 * calls opened its connections again: 143 connections for 1,024 calls
	 * at the OpenStack bench (issue 25), each a TCP (on a real cloud, TLS)
	 * handshake and a thread of the simulator's; 16 now. A cache of one
	 * per call in flight was not enough over TLS: the waves of
	 * test_connections_kept_between_waves still opened 23. */
	curl_multi_setopt(c->multi, CURLMOPT_MAXCONNECTS, 4L * c->max_concurrency);
	return c;
}

void
http_client_free(struct http_client *c)
{
	struct http_req *r;

	if (c == NULL)
		return;
	while ((r = TAILQ_FIRST(&c->queue)) != NULL) {
		TAILQ_REMOVE(&c->queue, r, entry);
		req_free(r);
	}
	while ((r = TAILQ_FIRST(&c->failed)) != NULL) {
		TAILQ_REMOVE(&c->failed, r, entry);
		req_free(r);
	}
	if (c->fail_ev != NULL)
		event_free(c->fail_ev);
	/* in flight: removing a handle closes its sockets through the
	 * socket callback */
	while ((r = TAILQ_FIRST(&c->inflight)) != NULL) {
		TAILQ_REMOVE(&c->inflight, r, entry);
		curl_multi_remove_handle(c->multi, r->easy);
		req_free(r);
	}
	if (c->multi != NULL)
		curl_multi_cleanup(c->multi);
	ratelimit_free(c->rl);
	if (c->timer != NULL)
		event_free(c->timer);
	free(c->ca_file);
	free(c->user_agent);
	free(c->api);
	free(c->ca_pem);
	free(c->cert_file);
	free(c->key_file);
	free(c->cert_pem);
	free(c->key_pem);
	free(c);
}

struct http_req *
http_request(struct http_client *c, const struct http_request_params *p, http_cb cb, void *arg)
{
	struct http_req *r;
	size_t i;

	if (p == NULL || p->url == NULL || p->url[0] == '\0') {
		errno = EINVAL;
		return NULL;
	}
	for (i = 0; p->headers != NULL && p->headers[i] != NULL; i++) {
		if (strchr(p->headers[i], ':') == NULL) {
			errno = EINVAL;
			return NULL;
		}
	}
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		abort();
	r->c = c;
	r->method = strdup(p->method != NULL ? p->method : "GET");
	r->url = strdup(p->url);
	for (i = 0; p->headers != NULL && p->headers[i] != NULL; i++)
		r->hdrs = curl_slist_append(r->hdrs, p->headers[i]);
	/* no "Expect: 100-continue" round trip before a body (not for
	 * SigV4: libcurl 7.88 would sign the removed header; it only
	 * expects for bodies over 1 MiB anyway) */
	if (p->body_file != NULL) {
		if (p->aws_sigv4 == NULL)
			r->hdrs = curl_slist_append(r->hdrs, "Expect:");
		r->body_file = strdup(p->body_file);
	} else if (p->body != NULL) {
		if (p->aws_sigv4 == NULL)
			r->hdrs = curl_slist_append(r->hdrs, "Expect:");
		r->body = malloc(p->body_len + 1);
		if (r->body == NULL)
			abort();
		memcpy(r->body, p->body, p->body_len);
		r->body[p->body_len] = '\0';
		r->body_len = p->body_len;
	}
	r->timeout = p->timeout > 0 ? p->timeout : c->timeout;
	if (p->api != NULL && (r->api = strdup(p->api)) == NULL)
		abort();
	if (p->aws_sigv4 != NULL) {
		r->aws_sigv4 = strdup(p->aws_sigv4);
		r->username = p->username != NULL ? strdup(p->username) : NULL;
		r->password = p->password != NULL ? strdup(p->password) : NULL;
	}
	r->t_start = ratelimit_now();
	r->cb = cb;
	r->arg = arg;
	TAILQ_INSERT_TAIL(&c->queue, r, entry);
	r->queued = 1;
	c->st.queued++;
	pump(c);
	return r;
}

void
http_cancel(struct http_req *r)
{
	struct http_client *c;

	if (r == NULL)
		return;
	c = r->c;
	if (r->cancelled)
		return;
	if (r->queued) {
		TAILQ_REMOVE(&c->queue, r, entry);
		c->st.queued--;
	} else if (r->failed) {
		TAILQ_REMOVE(&c->failed, r, entry);
	} else if (r->easy != NULL) {
		curl_multi_remove_handle(c->multi, r->easy);
		TAILQ_REMOVE(&c->inflight, r, entry);
		c->st.inflight--;
	}
	if (r->delivering) {
		/* from inside on_line: stream_drain frees it on return */
		r->cancelled = 1;
		if (r->easy != NULL) {
			curl_easy_cleanup(r->easy);
			r->easy = NULL;
		}
		pump(c);
		return;
	}
	req_free(r);
	pump(c);
}

const char *
http_response_header(const struct http_response *res, const char *name)
{
	size_t i;

	for (i = 0; i < res->nheaders; i++)
		if (strcasecmp(res->headers[i].name, name) == 0)
			return res->headers[i].value;
	return NULL;
}

void
http_get_stats(const struct http_client *c, struct http_stats *st)
{
	*st = c->st;
}

void
http_client_set_rate(struct http_client *c, double rate)
{
	ratelimit_set_rate(c->rl, rate);
}

/* ---- streaming (http_stream) ------------------------------------------------------------------
 */

/* write_cb's part for a streaming call: 1 when the data was taken (a 2xx
 * answer: buffered for stream_drain), 0 when the usual body collection
 * applies (another status, or a line over max_body, which aborts). */
static int
stream_write(struct http_req *r, const char *data, size_t len)
{
	if (r->streaming == -1) {
		long status = 0;

		curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
		r->streaming = status >= 200 && status < 300;
	}
	if (r->streaming != 1 || r->rlen + len > r->c->max_body)
		return 0;
	if (r->rlen + len + 1 > r->rcap) {
		size_t cap = r->rcap ? r->rcap : 4096;
		while (cap < r->rlen + len + 1)
			cap *= 2;
		r->rbuf = realloc(r->rbuf, cap);
		if (r->rbuf == NULL)
			abort();
		r->rcap = cap;
	}
	memcpy(r->rbuf + r->rlen, data, len);
	r->rlen += len;
	r->rbuf[r->rlen] = '\0';
	if (memchr(data, '\n', len) != NULL)
		event_active(r->line_ev, EV_TIMEOUT, 0);
	return 1;
}

/* Hand every complete buffered line to on_line (and, at_end, a last one
 * without its newline). Returns -1 when on_line cancelled the call (it is
 * freed), else 0. */
static int
stream_drain(struct http_req *r, int at_end)
{
	size_t off = 0;
	char *nl;

	r->delivering = 1;
	while (off < r->rlen && !r->cancelled) {
		nl = memchr(r->rbuf + off, '\n', r->rlen - off);
		if (nl == NULL) {
			if (at_end)
				r->on_line(r->rbuf + off, r->rlen - off, r->arg);
			if (at_end)
				off = r->rlen;
			break;
		}
		*nl = '\0';
		r->on_line(r->rbuf + off, (size_t)(nl - (r->rbuf + off)), r->arg);
		off = (size_t)(nl - r->rbuf) + 1;
	}
	r->delivering = 0;
	if (r->cancelled) {
		req_free(r);
		return -1;
	}
	memmove(r->rbuf, r->rbuf + off, r->rlen - off);
	r->rlen -= off;
	if (r->rbuf != NULL)
		r->rbuf[r->rlen] = '\0';
	return 0;
}

static void
line_ev_cb(evutil_socket_t fd, short what, void *arg)
{
	struct http_req *r = arg;

	(void)fd;
	(void)what;
	if (r->streaming == 1)
		stream_drain(r, 0);
}

struct http_req *
http_stream(struct http_client *c, const struct http_request_params *p, http_line_cb on_line,
	    http_cb cb, void *arg)
{
	struct http_req *r;

	if (on_line == NULL) {
		errno = EINVAL;
		return NULL;
	}
	r = http_request(c, p, cb, arg);
	if (r == NULL)
		return NULL;
	/* not started before the loop turns (pump only hands it to libcurl,
	 * which writes nothing before its next socket action) */
	r->on_line = on_line;
	r->streaming = -1;
	if (r->easy != NULL) /* handed to libcurl, which has not connected yet */
		curl_easy_setopt(r->easy, CURLOPT_TCP_KEEPALIVE, 1L);
	r->line_ev = event_new(c->base, -1, 0, line_ev_cb, r);
	if (r->line_ev == NULL)
		abort();
	return r;
}
