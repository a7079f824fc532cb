/*
 * Non-blocking SSH host-key scanning and TCP reachability checks on a
 * libevent loop, as Nodepool's nodescan (nodeutils.py nodescan(), and the
 * NodescanWorker/NodescanRequest pair of driver/statemachine.py).
 *
 * Users (neither calls it when host-key-checking is false, as upstream):
 *   - the state-machine framework: once an instance is complete, scan it for
 *     SSH reachability and host keys with deadline = boot-timeout and the
 *     default 10 s per attempt;
 *   - the static driver: register a host only once its keys are scanned
 *     (deadline = attempt_timeout = the node's `timeout`, default 5) and the
 *     configured host-key(s) are a subset of them (nodescan_keys_match());
 *     keep an unreachable host out of service; a TCP liveness check before
 *     handing a node out (nodescan_check_reachable()).
 * Upstream's test hook (a host name containing "fake" yields
 * "ssh-rsa FAKEKEY" without connecting) is not reproduced here.
 *
 * One struct nodescan (the scanner) serves many requests on one event base.
 * At most max_inflight requests run at once (upstream: 100); further ones
 * wait in a FIFO queue capped at max_pending. A request's deadline counts
 * from nodescan_start(), queued time included (as upstream's start_time).
 *
 * A request, like upstream's:
 *   1. resolves the host once (a literal IPv4/IPv6 address directly; a name
 *      through evdns: /etc/hosts, then the nameservers of /etc/resolv.conf);
 *   2. probe: a non-blocking TCP connect (and, when keys are gathered, a
 *      full SSH key exchange with libssh) limited to attempt_timeout;
 *      on failure it tries again (on a timer, never sleeping; attempts
 *      start at most once per NODESCAN_RETRY_DELAY seconds, so a refused
 *      connection is retried a second later and a timed-out one at once),
 *      rotating through the resolved addresses, until the deadline;
 *   3. keys (connection types "ssh" and "network_cli" only): one SSH key
 *      exchange per host key type (SSH_OPTIONS_HOSTKEYS set to that single
 *      type), so a server with rsa, ecdsa and ed25519 keys yields all three;
 *      a type the server does not offer is skipped. Keys are
 *      "<type> <base64>" strings, the format of a node's host_keys
 *      ("ssh-ed25519 AAAA..."), in scan order, without duplicates. If no type
 *      yields a key, the whole scan is retried after the delay (until the
 *      deadline).
 * The host keys are not verified (this is how they are learnt); nothing
 * authenticates.
 *
 * Every socket is non-blocking and every wait is a libevent event or timer;
 * libssh runs in non-blocking mode on a socket we connected (SSH_OPTIONS_FD),
 * with the system and user ssh_config files ignored. libssh is loaded on the
 * first key exchange (dlopen, lib/core/dynlib.h): a scanner that only checks
 * TCP never maps it; without it a key scan fails with NODESCAN_E_SYSTEM and
 * "host-key scanning needs libssh (Debian package libssh-4): ...".
 *
 * Callbacks run on the loop, never from inside nodescan_start() or
 * nodescan_cancel(). Not thread-safe: use a scanner from its loop's thread.
 */
#ifndef NP_NODESCAN_H
#define NP_NODESCAN_H

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct evdns_base;
struct nodescan;
struct nodescan_req;

/* Upstream's NodescanWorker.MAX_REQUESTS. */
#define NODESCAN_DEFAULT_MAX_INFLIGHT 100
#define NODESCAN_DEFAULT_MAX_PENDING  10000
/* Upstream's per TCP attempt limit in nodescan (seconds). */
#define NODESCAN_DEFAULT_ATTEMPT_TIMEOUT 10.0
/* Upstream's default nodescan timeout (seconds) when none is given. */
#define NODESCAN_DEFAULT_DEADLINE 60.0
/* Least time between the starts of two probe attempts (seconds), as
 * upstream's 1 s poll. */
#define NODESCAN_RETRY_DELAY 1.0
/* Most addresses kept from a name's resolution. */
#define NODESCAN_MAX_ADDRS 8

/* Outcome of a request. Failures are retried, so every error is reported at
 * the deadline, naming what went wrong on the last attempt (or what was still
 * in progress) -- except a name that does not exist (NXDOMAIN, no address),
 * which fails at once with NODESCAN_E_RESOLVE, as upstream's getaddrinfo(). */
enum nodescan_status {
	NODESCAN_OK = 0,
	NODESCAN_E_RESOLVE,	/* the name does not resolve (or resolution failed
				   until the deadline) */
	NODESCAN_E_REFUSED,	/* connection refused */
	NODESCAN_E_UNREACHABLE, /* host or network unreachable */
	NODESCAN_E_TIMEOUT,	/* no TCP connection, or no SSH answer, in time */
	NODESCAN_E_SSH,		/* the SSH key exchange failed */
	NODESCAN_E_NOKEYS,	/* SSH answered but no host key type could be scanned */
	NODESCAN_E_SYSTEM,	/* local failure (out of memory, no sockets) */
};

/* "ok", "resolve failed", "connection refused", "host unreachable",
 * "timed out", "ssh error", "no host keys", "system error". */
const char *nodescan_status_str(enum nodescan_status st);

/* One scan. Strings are copied by nodescan_start(). */
struct nodescan_params {
	const char *host;	     /* name or IPv4/IPv6 literal; required */
	int port;		     /* connection-port; <= 0 means 22 */
	const char *connection_type; /* NULL means "ssh"; "ssh" and "network_cli"
					gather keys, any other type (e.g. "winrm")
					is a TCP reachability check only */
	int tcp_only;		     /* nonzero: TCP reachability only, whatever
					the connection type (gather_hostkeys=False) */
	double attempt_timeout;	     /* seconds for each TCP connect + SSH key
					exchange; <= 0 means 10 */
	double deadline;	     /* seconds from nodescan_start() until the scan
					gives up (boot-timeout; the static node's
					timeout); <= 0 means 60 */
};

/* What a finished request hands its callback; everything is borrowed and
 * valid only during the call (copy what you keep). */
struct nodescan_result {
	enum nodescan_status status;
	const char *error;	 /* NULL when ok; else a one-line message, e.g.
				    "10.0.0.5:22: timed out after 60.0 s; last
				    attempt: connection refused" */
	size_t nkeys;		 /* 0 for TCP-only checks */
	const char *const *keys; /* "<type> <base64>", nkeys entries */
	double elapsed;		 /* seconds since nodescan_start() */
	unsigned attempts;	 /* probe attempts made */
};

/* Called exactly once per request that is neither cancelled nor freed with
 * its scanner. The request handle is invalid from the moment the callback is
 * entered. The callback may start and cancel other requests, but must not
 * free the scanner. */
typedef void (*nodescan_cb)(const struct nodescan_result *res, void *arg);

/* Gauges and counters, for statsd and tests. */
struct nodescan_stats {
	unsigned inflight;	/* requests out of the queue and not finished */
	unsigned pending;	/* requests waiting in the queue */
	unsigned peak_inflight; /* highest inflight seen since nodescan_new() */
	uint64_t started, succeeded, failed, cancelled;
};

/*
 * Create a scanner on base. dns: the resolver for host names, or NULL to
 * create (on first use) one owned by the scanner from /etc/resolv.conf and
 * /etc/hosts. A given dns base must outlive the scanner and stays the
 * caller's. max_inflight, max_pending: <= 0 means the defaults above.
 * Returns NULL only on allocation failure.
 */
struct nodescan *nodescan_new(struct event_base *base, struct evdns_base *dns, int max_inflight,
			      int max_pending);

/*
 * Cancel every request, queued or running, WITHOUT calling their callbacks,
 * close their sockets and free the scanner. NULL is a no-op. Must not be
 * called from a nodescan callback. If a request was still resolving a name,
 * libevent reports the cancelled lookup on a later turn of the loop: the
 * scanner's own resolver is released then (run the loop once more before
 * event_base_free() to release it).
 */
void nodescan_free(struct nodescan *ns);

/*
 * Queue a scan; cb(res, arg) reports the outcome later on the loop.
 * Returns the request handle (for nodescan_cancel) or NULL with errno set:
 * EINVAL (no host, or a host longer than 255 bytes, or port > 65535),
 * EAGAIN (the queue holds max_pending requests), ENOMEM.
 */
struct nodescan_req *nodescan_start(struct nodescan *ns, const struct nodescan_params *p,
				    nodescan_cb cb, void *arg);

/*
 * TCP liveness check, as the static driver's before handing a node out
 * (upstream: nodescan with gather_hostkeys=False and the node's timeout):
 * connect attempts to host:port until one succeeds or timeout seconds have
 * passed. Shares the scanner's queue and concurrency limit. Returns as
 * nodescan_start(); res->status is NODESCAN_OK when reachable.
 */
struct nodescan_req *nodescan_check_reachable(struct nodescan *ns, const char *host, int port,
					      double timeout, nodescan_cb cb, void *arg);

/*
 * Cancel a queued or running request: its socket is closed at once and its
 * callback is never called; req is freed. NULL is a no-op, and so is a
 * request cancelling itself from inside its own callback. Do not pass a
 * handle whose callback has returned (it is freed).
 */
void nodescan_cancel(struct nodescan_req *req);

/* Fill st with the current gauges and counters. */
void nodescan_get_stats(const struct nodescan *ns, struct nodescan_stats *st);

/* 1 when connection type ct gathers host keys ("ssh", "network_cli"; NULL
 * counts as "ssh"), else 0. */
int nodescan_type_gathers_keys(const char *ct);

/*
 * Normalise one host key to "<type> <base64>" into out (outlen bytes):
 * leading/trailing whitespace and anything after the key data (a comment)
 * are dropped, runs of blanks become one space. Returns 0, or -1 when the
 * text has no two fields or does not fit.
 */
int nodescan_key_normalize(const char *key, char *out, size_t outlen);

/*
 * The static driver's host-key check (upstream: set(host-key) is a subset
 * of set(scanned keys)): 1 when every configured key in want[0..nwant) is
 * among have[0..nhave), comparing normalised "<type> <base64>"; 0 when one
 * is missing or malformed. nwant == 0 matches anything.
 */
int nodescan_keys_match(const char *const *want, size_t nwant, const char *const *have,
			size_t nhave);

#endif
