/*
 * HTTP for cloud adapters: libcurl's multi interface driven by the
 * worker's libevent loop (curl_multi_socket_action, with
 * CURLMOPT_SOCKETFUNCTION and CURLMOPT_TIMERFUNCTION bound to libevent
 * events), so any number of calls run at once and one slow call never
 * stalls another, the loop or the ZooKeeper session.
 *
 * One struct http_client per provider carries the provider's limits, as
 * upstream's per-adapter RateLimiter and the SDKs' connection pools:
 *   - rate: calls started per second (the `rate` provider option; a token
 *     bucket on a timer, lib/net/ratelimit.h; <= 0 unlimited);
 *   - max_concurrency: calls in flight at once; further calls wait in a
 *     FIFO queue (not capped: each caller bounds its own work);
 *   - HTTP 429 (Too Many Requests) and 503 (Service Unavailable, which
 *     OpenStack's services and load balancers send when overloaded, often
 *     with Retry-After): the call is retried, up to max_retries
 *     times, after the delay the server's Retry-After gives (delta-seconds
 *     or an HTTP-date), else 1, 2, 4... seconds, capped at backoff_max; the
 *     whole client pauses meanwhile (the cloud throttles the account, not
 *     one call). When the retries are spent the 429/503 is handed back.
 *     A provider that wants the pause per API uses one client per API.
 *     Every such retry is logged at debug level naming the API and the
 *     wait, and reported to the process's retry observer (below), which
 *     a worker points at its per-provider, per-API counter.
 * Other statuses are handed back as they are (the adapter decides what a
 * 404 or 5xx means); redirects are not followed.
 *
 * Callbacks run on the loop, never from inside http_request() or
 * http_cancel(). Not thread-safe: use a client from its loop's thread.
 */
#ifndef NP_HTTP_H
#define NP_HTTP_H

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct http_client;
struct http_req;

#define HTTP_DEFAULT_MAX_CONCURRENCY 16
#define HTTP_DEFAULT_MAX_RETRIES     5
#define HTTP_DEFAULT_TIMEOUT	     60.0  /* seconds, one attempt */
#define HTTP_DEFAULT_BACKOFF_MAX     300.0 /* seconds */
#define HTTP_DEFAULT_MAX_BODY	     (64u << 20)

/* Zeroed fields take the defaults above. */
struct http_client_options {
	double rate;		/* calls per second; <= 0 unlimited */
	int max_concurrency;	/* calls in flight; <= 0: HTTP_DEFAULT_MAX_CONCURRENCY */
	int max_retries;	/* 429 retries; < 0: none; 0: HTTP_DEFAULT_MAX_RETRIES */
	double timeout;		/* seconds per attempt; <= 0: HTTP_DEFAULT_TIMEOUT */
	double backoff_max;	/* cap on a 429 delay, seconds; <= 0: the default */
	size_t max_body;	/* response body cap, bytes; 0: HTTP_DEFAULT_MAX_BODY */
	const char *ca_file;	/* PEM bundle to trust; NULL: the system store (copied) */
	const char *user_agent; /* NULL: "nodepoold" (copied) */
	/* the API its calls belong to, for the retry log line and counter
	 * when a call names none: "compute", "vpc" (copied); NULL: the URL's
	 * host */
	const char *api;
	/* TLS as a kubeconfig gives it (all copied; NULL: none). ca_pem: PEM
	 * CAs to trust instead of ca_file / the system store; cert_* and
	 * key_*: a client certificate and its key, as files or PEM text;
	 * insecure: no server certificate verification at all
	 * (insecure-skip-tls-verify). */
	const char *ca_pem;
	const char *cert_file, *key_file;
	const char *cert_pem, *key_pem;
	int insecure;
};

/* One call. Strings and the body are copied by http_request(). */
struct http_request_params {
	const char *method;	    /* "GET" when NULL; any token ("DELETE", "PATCH") */
	const char *url;	    /* required: http:// or https:// */
	const char *const *headers; /* NULL-terminated "Name: value" lines, or NULL */
	const void *body;	    /* request body, or NULL */
	size_t body_len;
	const char *body_file; /* or: a file streamed as the body in constant
				  memory (an image upload; its size is sent as
				  Content-Length); a file that cannot be opened
				  is reported as an error answer */
	double timeout;	       /* seconds per attempt; <= 0: the client's */
	/* AWS Signature Version 4, done by libcurl (CURLOPT_AWS_SIGV4): the
	 * provider string "aws:amz:<region>:<service>", with the access key
	 * id as username and the secret as password; NULL: unsigned. A
	 * session token goes in headers as "X-Amz-Security-Token: ..." (it
	 * is signed with the other headers). */
	const char *aws_sigv4;
	const char *username, *password;
	/* the API this call belongs to as the driver labels it
	 * ("ec2:RunInstances", "compute.instances.insert", "apps/v1") for the
	 * retry log line and counter (copied); NULL: the client's api */
	const char *api;
};

struct http_header {
	const char *name;  /* as received */
	const char *value; /* leading/trailing blanks removed */
};

/* The outcome handed to the callback; everything is borrowed and valid only
 * during the call. */
struct http_response {
	int status;	   /* HTTP status; 0 when no answer came (see error) */
	const char *error; /* NULL when the server answered (any status); else
			      a one-line message: "connection refused",
			      "timed out after 0.3 s", "response body over N
			      bytes"... */
	const char *body;  /* NUL-terminated; "" when empty */
	size_t body_len;
	const struct http_header *headers; /* of the final answer */
	size_t nheaders;
	unsigned retries; /* 429 retries made */
	double elapsed;	  /* seconds from http_request() to now */
};

/* Called exactly once per call that is neither cancelled nor freed with its
 * client. The call handle is invalid from the moment the callback is
 * entered. The callback may start and cancel other calls but must not free
 * the client. */
typedef void (*http_cb)(const struct http_response *res, void *arg);

struct http_stats {
	unsigned inflight, queued, peak_inflight;
	uint64_t started;   /* attempts handed to libcurl */
	uint64_t completed; /* callbacks made */
	uint64_t errors;    /* of which without an HTTP answer */
	uint64_t throttled; /* 429 answers seen (retried or not) */
	uint64_t connects;  /* connections opened (libcurl's CURLINFO_NUM_CONNECTS) */
};

/*
 * Load libcurl, which the binaries do not link (lib/net/curl_dl.h: a
 * process that never makes an HTTP call never maps it). Done by
 * http_client_new() too; a driver calls it first so that a missing library
 * is reported with its name. Returns 0 (at once once loaded), or -1 with
 * err "<who> needs libcurl (Debian package libcurl4): <reason>" (who:
 * "driver openstack"; NULL: "nodepoold").
 */
int http_load(const char *who, char *err, size_t errlen);

/* New client on base; NULL (with a message in err) if libcurl cannot be
 * loaded or set up. */
struct http_client *http_client_new(struct event_base *base, const struct http_client_options *opt,
				    char *err, size_t errlen);

/* Abort every call, queued or in flight, WITHOUT calling their callbacks,
 * and free the client. NULL is a no-op. Not from inside a callback. */
void http_client_free(struct http_client *c);

/*
 * Queue a call; cb(res, arg) reports the outcome later on the loop.
 * Returns the handle (for http_cancel) or NULL with errno EINVAL (no URL,
 * or a header line without ':').
 */
struct http_req *http_request(struct http_client *c, const struct http_request_params *p,
			      http_cb cb, void *arg);

/* Abandon a queued or running call: its connection is dropped at once and
 * its callback never called. NULL is a no-op. */
void http_cancel(struct http_req *req);

/* One line of a streamed answer, without its newline (NUL-terminated there),
 * borrowed for the call. */
typedef void (*http_line_cb)(const char *line, size_t len, void *arg);

/*
 * A streaming call (a Kubernetes watch: newline-delimited JSON that lasts
 * for minutes): as http_request(), but the body of a 2xx answer is handed
 * to on_line(line, len, arg) one line at a time, on the loop, as it
 * arrives; a line longer than the client's max_body aborts the call. At the
 * end cb(res, arg) is called once as for any call: a 2xx that ended
 * cleanly with status and body "" (a last line without a newline went to
 * on_line first), a dropped connection or the timeout (the whole stream's:
 * p->timeout) with error set; any other status with its body collected as
 * usual (429/503 retried first). on_line may start calls and may cancel
 * this one (http_cancel: then neither on_line nor cb is called again).
 * Returns the handle, or NULL with errno EINVAL.
 */
struct http_req *http_stream(struct http_client *c, const struct http_request_params *p,
			     http_line_cb on_line, http_cb cb, void *arg);

/* The value of the first header named name (case-insensitive), or NULL. */
const char *http_response_header(const struct http_response *res, const char *name);

void http_get_stats(const struct http_client *c, struct http_stats *st);

/* Change the rate (calls per second; <= 0 unlimited). */
void http_client_set_rate(struct http_client *c, double rate);

/*
 * Retries made visible (issue 24: a throttled cloud must show). A retry is
 * one more attempt of a call after a 429/503 (this client's own), or after
 * whatever a driver's own retry path retries (http_note_retry). Each is
 * logged at debug level:
 *   "API <api>: HTTP <status>[ (<why>)], retry <n> in <wait> s"
 * (status 0: no answer; why: the error as the driver read it)
 * and passed to the process-wide observer, if one is set (a worker sets
 * one that counts per provider and API: nodepool_api_retries_total in
 * /metrics, nodepool.provider.<p>.api.<api>.retries in statsd;
 * lib/ops/metrics.h). api is never NULL in the observer ("" at worst);
 * borrowed for the call.
 */
typedef void (*http_retry_fn)(const char *api, int status, double wait, void *arg);
/* Sets (fn NULL: clears) the observer. Not thread-safe: at start-up. */
void http_set_retry_observer(http_retry_fn fn, void *arg);
/* A driver's own retry of a call of api after status (why: its error
 * text, or NULL), in wait seconds (attempt: the retry's number, from 1):
 * logged and observed as above. */
void http_note_retry(const char *api, int status, const char *why, unsigned attempt, double wait);

/*
 * The parsers of what a server sends (exposed for fuzzing):
 *
 * http_header_split: one raw header line as libcurl hands it ("Name:
 * value\r\n", len bytes, not NUL-terminated). Returns 0 with the name
 * (name_len bytes from line) and the value (value_len bytes from *value,
 * blanks trimmed) inside the line; -1 for a line with no ':' (a status line,
 * the blank end of the headers, junk).
 *
 * http_retry_after: a Retry-After value, delta-seconds ("120") or an
 * HTTP-date ("Wed, 21 Oct 2015 07:28:00 GMT"), as seconds to wait from
 * the epoch time `now` (a date in the past is 0); -1 when malformed.
 */
int http_header_split(const char *line, size_t len, size_t *name_len, const char **value,
		      size_t *value_len);
double http_retry_after(const char *value, long long now);

#endif
