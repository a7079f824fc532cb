/*
 * Non-blocking SSH host-key scanning and TCP reachability checks; the
 * contract is in nodescan.h.
 *
 * A request is a small state machine driven by three libevent events:
 *   deadline  the overall limit (armed at nodescan_start, queued time counts);
 *   timer     the current attempt's timeout, or the pause before the next
 *             attempt (state NS_WAITING; 0 s to continue "now" on the loop);
 *   io        the socket: writable for the TCP connect, then whatever libssh
 *             asks for (ssh_get_poll_flags) while ssh_connect says SSH_AGAIN.
 * Phases follow upstream's NodescanRequest: PROBE (TCP, plus one SSH key
 * exchange with every host key type when keys are gathered) retried until the
 * deadline; then KEYS, one connection per host key type.
 *
 * Rule for every function below that can finish a request (ns_finish frees
 * it): its caller returns right after, never touching the request again.
 */
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <netinet/in.h>
#include <arpa/inet.h>

#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>
#include <libssh/libssh.h>

#include "lib/core/dynlib.h"
#include "lib/core/log.h"
#include "lib/net/nodescan.h"
#include "lib/core/clock.h"

/*
 * libssh is loaded on the first host-key scan (lib/core/dynlib.h), not
 * linked: a worker whose provider never scans keys (host-key-checking off,
 * TCP-only checks) never maps it nor the Kerberos libraries it pulls in.
 * Each function used is a field typed by <libssh/libssh.h>; the macros
 * after ns_ssh_load() map the names to the fields.
 */
#define NS_SSH_FUNCS(X)                                                                            \
	X(ssh_init)                                                                                \
	X(ssh_finalize)                                                                            \
	X(ssh_new)                                                                                 \
	X(ssh_free)                                                                                \
	X(ssh_options_set)                                                                         \
	X(ssh_set_blocking)                                                                        \
	X(ssh_connect)                                                                             \
	X(ssh_get_error)                                                                           \
	X(ssh_get_poll_flags)                                                                      \
	X(ssh_get_server_publickey)                                                                \
	X(ssh_key_type)                                                                            \
	X(ssh_key_type_to_char)                                                                    \
	X(ssh_pki_export_pubkey_base64)                                                            \
	X(ssh_string_free_char)                                                                    \
	X(ssh_key_free)

static struct ns_ssh_api {
	NS_SSH_FUNCS(DYNLIB_FIELD)
} ns_ssh;
#define NS_SSH_SYM(f) DYNLIB_SYM(ns_ssh, f)
static const struct dynlib_sym ns_ssh_syms[] = {NS_SSH_FUNCS(NS_SSH_SYM)};
static struct dynlib ns_ssh_lib = DYNLIB_INIT("libssh.so.4", "libssh", "libssh-4", ns_ssh_syms);

/* Load libssh (once): 0, or -1 with the reason in err. */
static int
ns_ssh_load(char *err, size_t errlen)
{
	return dynlib_load(&ns_ssh_lib, "host-key scanning", err, errlen);
}

#define ssh_init		     (*ns_ssh.ssh_init)
#define ssh_finalize		     (*ns_ssh.ssh_finalize)
#define ssh_new			     (*ns_ssh.ssh_new)
#define ssh_free		     (*ns_ssh.ssh_free)
#define ssh_options_set		     (*ns_ssh.ssh_options_set)
#define ssh_set_blocking	     (*ns_ssh.ssh_set_blocking)
#define ssh_connect		     (*ns_ssh.ssh_connect)
#define ssh_get_error		     (*ns_ssh.ssh_get_error)
#define ssh_get_poll_flags	     (*ns_ssh.ssh_get_poll_flags)
#define ssh_get_server_publickey     (*ns_ssh.ssh_get_server_publickey)
#define ssh_key_type		     (*ns_ssh.ssh_key_type)
#define ssh_key_type_to_char	     (*ns_ssh.ssh_key_type_to_char)
#define ssh_pki_export_pubkey_base64 (*ns_ssh.ssh_pki_export_pubkey_base64)
#define ssh_string_free_char	     (*ns_ssh.ssh_string_free_char)
#define ssh_key_free		     (*ns_ssh.ssh_key_free)

/*
 * Host key types scanned one at a time, in upstream's (paramiko's) order.
 * The RSA entry offers every RSA signature algorithm so that a server that
 * refuses SHA-1 signatures still hands out its RSA key (once, as "ssh-rsa").
 * Types the linked libssh does not know are dropped at nodescan_new().
 */
static const char *const ns_key_types[] = {
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "rsa-sha2-512,rsa-sha2-256,ssh-rsa",
    "ssh-dss",
};
#define NS_NKEY_TYPES (sizeof(ns_key_types) / sizeof(ns_key_types[0]))

enum ns_state {
	NS_QUEUED,     /* in ns->pending */
	NS_WAITING,    /* timer: next attempt (or the resolve result) */
	NS_RESOLVING,  /* lookup in flight */
	NS_CONNECTING, /* io: writable; timer: attempt timeout */
	NS_HANDSHAKE,  /* io: libssh's interest; timer: attempt timeout */
};

enum ns_phase { NS_PROBE, NS_KEYS };

/* The evdns base and its users: the scanner and each lookup in flight hold
 * a reference, so a lookup cancelled by nodescan_free() can still be
 * reported by libevent (later, on the loop) while the base exists. */
struct ns_resolver {
	struct evdns_base *dns;
	int owned; /* created by us: freed with the last reference */
	unsigned refs;
};

/* One evdns_getaddrinfo in flight; outlives its request when cancelled. */
struct ns_lookup {
	struct nodescan_req *req; /* NULL once the request gave up on it */
	struct ns_resolver *res;
	struct evdns_getaddrinfo_request *handle;
};

struct nodescan_req {
	TAILQ_ENTRY(nodescan_req) entry;
	struct nodescan *ns;
	char host[256];
	int port;
	int gather; /* scan host keys (ssh/network_cli and not tcp_only) */
	double attempt_timeout, deadline;
	nodescan_cb cb;
	void *arg;

	enum ns_state state;
	enum ns_phase phase;
	int queued;    /* in ns->pending (else in ns->active) */
	int finishing; /* unlinked, its callback running: cancel is a no-op */
	double t0;     /* np_mono_s() when the scan began */
	struct event *deadline_ev, *timer_ev, *io_ev;

	struct ns_lookup *lookup;
	int resolve_fatal; /* the name does not exist: fail at once */
	struct sockaddr_storage addrs[NODESCAN_MAX_ADDRS];
	socklen_t addrlens[NODESCAN_MAX_ADDRS];
	int naddrs, addr_idx;
	char addrtext[INET6_ADDRSTRLEN]; /* the address being tried */

	int fd;	   /* our socket, -1 once libssh owns it (or closed) */
	int io_fd; /* the socket io_ev watches */
	ssh_session ssh;
	size_t key_idx;

	char *keys[NS_NKEY_TYPES];
	size_t nkeys;
	unsigned attempts;
	double attempt_t0;		  /* ns_elapsed() when the last probe attempt began */
	enum nodescan_status last_status; /* NODESCAN_OK: no failure yet */
	char last_error[256];
};

TAILQ_HEAD(ns_req_list, nodescan_req);

struct nodescan {
	struct event_base *base;
	struct ns_resolver *res; /* NULL until a name needs resolving */
	struct evdns_base *user_dns;
	struct event *kick_ev; /* promotes queued requests, on the loop */
	struct ns_req_list pending, active;
	unsigned max_inflight, max_pending;
	struct nodescan_stats st;
	int ssh_ready;		   /* libssh loaded, ssh_init() done, key_ok known */
	int key_ok[NS_NKEY_TYPES]; /* the loaded libssh accepts this type */
	char probe_hostkeys[256];  /* every accepted type, comma-separated */
};

static void ns_attempt(struct nodescan_req *req);
static void ns_next_key(struct nodescan_req *req);
static void ns_ssh_step(struct nodescan_req *req);
static void ns_io_cb(evutil_socket_t fd, short what, void *arg);

static double
ns_elapsed(const struct nodescan_req *req)
{
	return np_mono_s() - req->t0;
}

const char *
nodescan_status_str(enum nodescan_status st)
{
	switch (st) {
	case NODESCAN_OK:
		return "ok";
	case NODESCAN_E_RESOLVE:
		return "resolve failed";
	case NODESCAN_E_REFUSED:
		return "connection refused";
	case NODESCAN_E_UNREACHABLE:
		return "host unreachable";
	case NODESCAN_E_TIMEOUT:
		return "timed out";
	case NODESCAN_E_SSH:
		return "ssh error";
	case NODESCAN_E_NOKEYS:
		return "no host keys";
	case NODESCAN_E_SYSTEM:
		return "system error";
	}
	return "unknown";
}

int
nodescan_type_gathers_keys(const char *ct)
{
	return ct == NULL || strcmp(ct, "ssh") == 0 || strcmp(ct, "network_cli") == 0;
}

/* --- resolver ------------------------------------------------------------ */

static void
ns_resolver_unref(struct ns_resolver *res)
{
	if (res == NULL || --res->refs > 0)
		return;
	if (res->owned)
		evdns_base_free(res->dns, 0);
	free(res);
}

static struct ns_resolver *
ns_resolver_get(struct nodescan *ns)
{
	struct ns_resolver *res;

	if (ns->res != NULL)
		return ns->res;
	if ((res = calloc(1, sizeof(*res))) == NULL)
		return NULL;
	if (ns->user_dns != NULL) {
		res->dns = ns->user_dns;
	} else {
		/* DISABLE_WHEN_INACTIVE: an idle resolver keeps no event
		 * pending, so it never holds the caller's loop open. */
		res->dns = evdns_base_new(ns->base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
							EVDNS_BASE_DISABLE_WHEN_INACTIVE);
		if (res->dns == NULL) {
			free(res);
			return NULL;
		}
		res->owned = 1;
	}
	res->refs = 1;
	ns->res = res;
	return res;
}

/* Stop caring about a lookup in flight: libevent still reports it (as
 * cancelled, later), and ns_dns_cb then frees it. */
static void
ns_lookup_abandon(struct nodescan_req *req)
{
	struct ns_lookup *lk = req->lookup;

	if (lk == NULL)
		return;
	req->lookup = NULL;
	lk->req = NULL;
	if (lk->handle != NULL)
		evdns_getaddrinfo_cancel(lk->handle);
}

/* --- connections ----------------------------------------------------------- */

/* Close the current attempt's socket and SSH session and stop their events. */
static void
ns_conn_close(struct nodescan_req *req)
{
	event_del(req->io_ev);
	event_del(req->timer_ev);
	if (req->ssh != NULL) {
		/* Not ssh_disconnect(): it would leave a socket given with
		 * SSH_OPTIONS_FD open behind us. ssh_free() closes it (unless
		 * libssh already did, on an error). */
		ssh_free(req->ssh);
		req->ssh = NULL;
	}
	if (req->fd >= 0)
		close(req->fd);
	req->fd = -1;
	req->io_fd = -1;
}

/* Stop everything the request has running (sockets, events, lookup). */
static void
ns_req_stop(struct nodescan_req *req)
{
	ns_conn_close(req);
	ns_lookup_abandon(req);
	event_del(req->deadline_ev);
}

static void
ns_req_free(struct nodescan_req *req)
{
	size_t i;

	if (req == NULL)
		return;
	ns_req_stop(req);
	event_free(req->io_ev);
	event_free(req->timer_ev);
	event_free(req->deadline_ev);
	for (i = 0; i < req->nkeys; i++)
		free(req->keys[i]);
	free(req);
}

static void
ns_kick(struct nodescan *ns)
{
	struct timeval zero = {0, 0};

	if (!TAILQ_EMPTY(&ns->pending) && ns->st.inflight < ns->max_inflight)
		event_add(ns->kick_ev, &zero);
}

/* Take the request out of the scanner's lists. */
static void
ns_unlink(struct nodescan_req *req)
{
	struct nodescan *ns = req->ns;

	if (req->queued) {
		TAILQ_REMOVE(&ns->pending, req, entry);
		ns->st.pending--;
	} else {
		TAILQ_REMOVE(&ns->active, req, entry);
		ns->st.inflight--;
	}
}

/* Report the outcome and free the request. */
static void
ns_finish(struct nodescan_req *req, enum nodescan_status status, const char *error)
{
	struct nodescan *ns = req->ns;
	struct nodescan_result r;

	ns_req_stop(req);
	ns_unlink(req);
	req->finishing = 1;
	if (status == NODESCAN_OK)
		ns->st.succeeded++;
	else
		ns->st.failed++;

	memset(&r, 0, sizeof(r));
	r.status = status;
	r.error = status == NODESCAN_OK ? NULL : error;
	r.nkeys = req->nkeys;
	r.keys = (const char *const *)req->keys;
	r.elapsed = ns_elapsed(req);
	r.attempts = req->attempts;
	if (status == NODESCAN_OK)
		log_debug("nodescan %s:%d: ok, %zu key(s) in %.2f s", req->host, req->port,
			  req->nkeys, r.elapsed);
	else
		log_debug("nodescan %s", error);
	req->cb(&r, req->arg);
	ns_req_free(req);
	ns_kick(ns);
}

/* Remember why this attempt failed (reported if the deadline comes first). */
static void
ns_set_error(struct nodescan_req *req, enum nodescan_status st, const char *fmt, ...)
{
	va_list ap;

	req->last_status = st;
	va_start(ap, fmt);
	vsnprintf(req->last_error, sizeof(req->last_error), fmt, ap);
	va_end(ap);
}

static void
ns_wait(struct nodescan_req *req, double seconds)
{
	struct timeval tv = np_tv_of(seconds);

	req->state = NS_WAITING;
	event_add(req->timer_ev, &tv);
}

/* The current attempt failed: in KEYS this key type is skipped; in PROBE the
 * next attempt (on the next address) comes after the retry delay. */
static void
ns_attempt_failed(struct nodescan_req *req, enum nodescan_status st, const char *fmt, ...)
{
	va_list ap;
	char msg[200];

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ns_conn_close(req);
	if (req->phase == NS_KEYS) {
		log_debug("nodescan %s:%d: key type %s: %s", req->host, req->port,
			  ns_key_types[req->key_idx], msg);
		ns_next_key(req);
		return;
	}
	ns_set_error(req, st, "%s", msg);
	log_debug("nodescan %s:%d: attempt %u: %s", req->host, req->port, req->attempts, msg);
	if (req->naddrs > 1)
		req->addr_idx = (req->addr_idx + 1) % req->naddrs;
	/* Attempts start at most once per retry delay: a refusal comes back
	 * at once and must not turn into a busy loop, while an attempt that
	 * timed out is followed by the next one straight away. */
	ns_wait(req, NODESCAN_RETRY_DELAY - (ns_elapsed(req) - req->attempt_t0));
}

static void
ns_connect_failed(struct nodescan_req *req, int err)
{
	enum nodescan_status st;

	switch (err) {
	case ECONNREFUSED:
		st = NODESCAN_E_REFUSED;
		break;
	case ETIMEDOUT:
		st = NODESCAN_E_TIMEOUT;
		break;
	case EHOSTUNREACH:
	case ENETUNREACH:
	case EHOSTDOWN:
	case ENETDOWN:
	case EADDRNOTAVAIL:
		st = NODESCAN_E_UNREACHABLE;
		break;
	default:
		st = NODESCAN_E_SYSTEM;
		break;
	}
	ns_attempt_failed(req, st, "connect to %s: %s", req->addrtext, strerror(err));
}

/* Add the server's host key of the finished key exchange. */
static void
ns_take_key(struct nodescan_req *req)
{
	ssh_key key = NULL;
	char *b64 = NULL, *line = NULL;
	const char *type;
	size_t i;

	if (ssh_get_server_publickey(req->ssh, &key) != SSH_OK)
		return;
	type = ssh_key_type_to_char(ssh_key_type(key));
	if (type != NULL && ssh_pki_export_pubkey_base64(key, &b64) == SSH_OK &&
	    asprintf(&line, "%s %s", type, b64) >= 0) {
		for (i = 0; i < req->nkeys; i++)
			if (strcmp(req->keys[i], line) == 0)
				break;
		if (i == req->nkeys && req->nkeys < NS_NKEY_TYPES) {
			req->keys[req->nkeys++] = line;
			line = NULL;
			log_debug("nodescan %s:%d: host key %s", req->host, req->port, type);
		}
	}
	free(line);
	ssh_string_free_char(b64);
	ssh_key_free(key);
}

/* An SSH key exchange completed. */
static void
ns_ssh_done(struct nodescan_req *req)
{
	if (req->phase == NS_PROBE) {
		/* The server speaks SSH: now one connection per key type. */
		ns_conn_close(req);
		req->phase = NS_KEYS;
		req->key_idx = (size_t)-1;
		ns_next_key(req);
		return;
	}
	ns_take_key(req);
	ns_conn_close(req);
	ns_next_key(req);
}

/* Drive ssh_connect one step; wait on the socket for what libssh wants. */
static void
ns_ssh_step(struct nodescan_req *req)
{
	int rc, flags;
	short what = 0;

	rc = ssh_connect(req->ssh);
	if (rc == SSH_OK) {
		ns_ssh_done(req);
		return;
	}
	if (rc != SSH_AGAIN) {
		ns_attempt_failed(req, NODESCAN_E_SSH, "ssh to %s: %s", req->addrtext,
				  ssh_get_error(req->ssh));
		return;
	}
	flags = ssh_get_poll_flags(req->ssh);
	if (flags & SSH_READ_PENDING)
		what |= EV_READ;
	if (flags & SSH_WRITE_PENDING)
		what |= EV_WRITE;
	if (what == 0)
		what = EV_READ;
	event_del(req->io_ev);
	event_assign(req->io_ev, req->ns->base, req->io_fd, what, ns_io_cb, req);
	event_add(req->io_ev, NULL);
}

/* Before the first key exchange: load libssh, ssh_init() (undone by
 * nodescan_free) and learn which host key types it accepts. 0, or -1 with
 * the reason in err. */
static int
ns_ssh_ready(struct nodescan *ns, char *err, size_t errlen)
{
	ssh_session probe;
	size_t i, off = 0;

	if (ns->ssh_ready)
		return 0;
	if (ns_ssh_load(err, errlen) != 0)
		return -1;
	if (ssh_init() != SSH_OK) {
		snprintf(err, errlen, "libssh initialisation failed");
		return -1;
	}
	if ((probe = ssh_new()) == NULL) {
		ssh_finalize();
		snprintf(err, errlen, "ssh_new: out of memory");
		return -1;
	}
	for (i = 0; i < NS_NKEY_TYPES; i++) {
		if (ssh_options_set(probe, SSH_OPTIONS_HOSTKEYS, ns_key_types[i]) < 0)
			continue;
		ns->key_ok[i] = 1;
		off += (size_t)snprintf(ns->probe_hostkeys + off, sizeof(ns->probe_hostkeys) - off,
					"%s%s", off ? "," : "", ns_key_types[i]);
	}
	ssh_free(probe);
	ns->ssh_ready = 1;
	return 0;
}

/* The TCP connection is up. */
static void
ns_connected(struct nodescan_req *req)
{
	const char *hostkeys;
	int off = 0;
	unsigned port = (unsigned)req->port;
	char err[384];

	if (!req->gather) {
		ns_finish(req, NODESCAN_OK, NULL);
		return;
	}
	if (ns_ssh_ready(req->ns, err, sizeof(err)) != 0) {
		/* no retry will find the library: fail now */
		ns_finish(req, NODESCAN_E_SYSTEM, err);
		return;
	}
	hostkeys = req->phase == NS_PROBE ? req->ns->probe_hostkeys : ns_key_types[req->key_idx];
	if ((req->ssh = ssh_new()) == NULL) {
		ns_attempt_failed(req, NODESCAN_E_SYSTEM, "ssh_new: out of memory");
		return;
	}
	/* Ignore ssh_config and known_hosts files: they could reorder or
	 * restrict the host key types, and nothing here is verified. */
	if (ssh_options_set(req->ssh, SSH_OPTIONS_PROCESS_CONFIG, &off) < 0 ||
	    ssh_options_set(req->ssh, SSH_OPTIONS_HOST, req->addrtext) < 0 ||
	    ssh_options_set(req->ssh, SSH_OPTIONS_PORT, &port) < 0 ||
	    ssh_options_set(req->ssh, SSH_OPTIONS_KNOWNHOSTS, "/dev/null") < 0 ||
	    ssh_options_set(req->ssh, SSH_OPTIONS_GLOBAL_KNOWNHOSTS, "/dev/null") < 0 ||
	    ssh_options_set(req->ssh, SSH_OPTIONS_HOSTKEYS, hostkeys) < 0 ||
	    ssh_options_set(req->ssh, SSH_OPTIONS_FD, &req->fd) < 0) {
		ns_attempt_failed(req, NODESCAN_E_SYSTEM, "ssh options: %s",
				  ssh_get_error(req->ssh));
		return;
	}
	ssh_set_blocking(req->ssh, 0);
	/* ssh_connect() adopts the socket (ssh_free closes it). It could only
	 * fail to before that on an allocation failure, costing one fd. */
	req->io_fd = req->fd;
	req->fd = -1;
	req->state = NS_HANDSHAKE;
	ns_ssh_step(req);
}

static void
ns_io_cb(evutil_socket_t fd, short what, void *arg)
{
	struct nodescan_req *req = arg;
	int err = 0;
	socklen_t len = sizeof(err);

	if (req->state == NS_CONNECTING) {
		if (getsockopt(req->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			err = errno;
		if (err != 0) {
			ns_connect_failed(req, err);
			return;
		}
		ns_connected(req);
	} else if (req->state == NS_HANDSHAKE) {
		ns_ssh_step(req);
	}
}

/* Start one TCP connection to the current address. */
static void
ns_connect(struct nodescan_req *req)
{
	const struct sockaddr *sa = (const struct sockaddr *)&req->addrs[req->addr_idx];
	struct timeval tv = np_tv_of(req->attempt_timeout);
	char ip[INET6_ADDRSTRLEN];
	const void *a;

	if (sa->sa_family == AF_INET6)
		a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
	else
		a = &((const struct sockaddr_in *)sa)->sin_addr;
	if (inet_ntop(sa->sa_family, a, ip, sizeof(ip)) == NULL)
		snprintf(ip, sizeof(ip), "?");
	snprintf(req->addrtext, sizeof(req->addrtext), "%s", ip);

	req->fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (req->fd < 0) {
		ns_attempt_failed(req, NODESCAN_E_SYSTEM, "socket: %s", strerror(errno));
		return;
	}
	req->io_fd = req->fd;
	event_add(req->timer_ev, &tv);
	req->state = NS_CONNECTING;
	if (connect(req->fd, sa, req->addrlens[req->addr_idx]) == 0) {
		ns_connected(req);
		return;
	}
	if (errno != EINPROGRESS) {
		ns_connect_failed(req, errno);
		return;
	}
	event_assign(req->io_ev, req->ns->base, req->fd, EV_WRITE, ns_io_cb, req);
	event_add(req->io_ev, NULL);
}

static void
ns_dns_cb(int err, struct evutil_addrinfo *ai, void *arg)
{
	struct ns_lookup *lk = arg;
	struct nodescan_req *req = lk->req;
	struct evutil_addrinfo *p;

	ns_resolver_unref(lk->res);
	free(lk);
	if (req == NULL) {
		/* Abandoned (cancelled); err is EVUTIL_EAI_CANCEL. */
		if (ai != NULL)
			evutil_freeaddrinfo(ai);
		return;
	}
	req->lookup = NULL;
	req->naddrs = 0;
	for (p = err == 0 ? ai : NULL; p != NULL && req->naddrs < NODESCAN_MAX_ADDRS;
	     p = p->ai_next) {
		if ((p->ai_family != AF_INET && p->ai_family != AF_INET6) ||
		    p->ai_addrlen > sizeof(req->addrs[0]))
			continue;
		memcpy(&req->addrs[req->naddrs], p->ai_addr, p->ai_addrlen);
		req->addrlens[req->naddrs++] = (socklen_t)p->ai_addrlen;
	}
	if (ai != NULL)
		evutil_freeaddrinfo(ai);
	if (req->naddrs > 0) {
		req->addr_idx = 0;
		ns_wait(req, 0); /* connect from the loop, not from evdns */
		return;
	}
	if (err == 0)
		err = EVUTIL_EAI_NODATA;
	ns_set_error(req, NODESCAN_E_RESOLVE, "resolve %s: %s", req->host,
		     evutil_gai_strerror(err));
	/* A name that does not exist fails at once, as upstream's
	 * getaddrinfo(); anything else (no answer) is retried. */
	req->resolve_fatal = err == EVUTIL_EAI_NONAME || err == EVUTIL_EAI_NODATA;
	ns_wait(req, req->resolve_fatal ? 0 : NODESCAN_RETRY_DELAY);
}

static void
ns_resolve(struct nodescan_req *req)
{
	struct ns_resolver *res;
	struct ns_lookup *lk;
	struct evutil_addrinfo hints;
	struct evdns_getaddrinfo_request *h;
	char port[8];

	res = ns_resolver_get(req->ns);
	if (res == NULL || (lk = calloc(1, sizeof(*lk))) == NULL) {
		ns_set_error(req, NODESCAN_E_RESOLVE, "resolve %s: no resolver", req->host);
		ns_wait(req, NODESCAN_RETRY_DELAY);
		return;
	}
	lk->req = req;
	lk->res = res;
	res->refs++;
	req->lookup = lk;
	req->state = NS_RESOLVING;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_protocol = IPPROTO_TCP;
	snprintf(port, sizeof(port), "%d", req->port);
	/* Answers from /etc/hosts come back inside this call (and then h is
	 * NULL and lk already freed); others later, from the loop. */
	h = evdns_getaddrinfo(res->dns, req->host, port, &hints, ns_dns_cb, lk);
	if (h != NULL)
		lk->handle = h;
}

/* Next step of the scan: resolve, or one connection. */
static void
ns_attempt(struct nodescan_req *req)
{
	if (req->naddrs == 0) {
		ns_resolve(req);
		return;
	}
	if (req->phase == NS_PROBE) {
		req->attempts++;
		req->attempt_t0 = ns_elapsed(req);
	}
	ns_connect(req);
}

/* KEYS phase: connect for the next key type, or finish. */
static void
ns_next_key(struct nodescan_req *req)
{
	struct nodescan *ns = req->ns;

	for (req->key_idx++; req->key_idx < NS_NKEY_TYPES; req->key_idx++)
		if (ns->key_ok[req->key_idx])
			break;
	if (req->key_idx < NS_NKEY_TYPES) {
		ns_attempt(req);
		return;
	}
	if (req->nkeys > 0) {
		ns_finish(req, NODESCAN_OK, NULL);
		return;
	}
	/* SSH answered the probe but no key type could be scanned (the server
	 * went away, or offers only types we do not know): start over. */
	req->phase = NS_PROBE;
	ns_set_error(req, NODESCAN_E_NOKEYS, "no host key could be scanned from %s", req->addrtext);
	ns_wait(req, NODESCAN_RETRY_DELAY);
}

static void
ns_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct nodescan_req *req = arg;
	char msg[600];

	switch (req->state) {
	case NS_CONNECTING:
		ns_attempt_failed(req, NODESCAN_E_TIMEOUT, "connect to %s: no answer within %.1f s",
				  req->addrtext, req->attempt_timeout);
		break;
	case NS_HANDSHAKE:
		ns_attempt_failed(req, NODESCAN_E_TIMEOUT,
				  "ssh to %s: no key exchange within %.1f s", req->addrtext,
				  req->attempt_timeout);
		break;
	case NS_WAITING:
		if (req->resolve_fatal) {
			snprintf(msg, sizeof(msg), "%s:%d: %s", req->host, req->port,
				 req->last_error);
			ns_finish(req, NODESCAN_E_RESOLVE, msg);
			return;
		}
		ns_attempt(req);
		break;
	case NS_QUEUED:
	case NS_RESOLVING:
		break;
	}
}

/* The overall deadline: report the last failure, or what was in progress. */
static void
ns_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct nodescan_req *req = arg;
	enum nodescan_status st = req->last_status;
	char msg[1024];
	const char *cause = req->last_error;
	char now[300];

	switch (req->state) {
	case NS_QUEUED:
		st = NODESCAN_E_TIMEOUT;
		snprintf(now, sizeof(now), "still queued (%u scans in flight)",
			 req->ns->st.inflight);
		cause = now;
		break;
	case NS_RESOLVING:
		st = NODESCAN_E_RESOLVE;
		snprintf(now, sizeof(now), "resolve %s: no answer", req->host);
		cause = now;
		break;
	case NS_CONNECTING:
		st = NODESCAN_E_TIMEOUT;
		snprintf(now, sizeof(now), "connect to %s: no answer", req->addrtext);
		cause = now;
		break;
	case NS_HANDSHAKE:
		st = NODESCAN_E_TIMEOUT;
		snprintf(now, sizeof(now), "ssh to %s: no key exchange%s%s", req->addrtext,
			 req->phase == NS_KEYS ? " for key type " : "",
			 req->phase == NS_KEYS ? ns_key_types[req->key_idx] : "");
		cause = now;
		break;
	case NS_WAITING:
		if (st == NODESCAN_OK) {
			st = NODESCAN_E_TIMEOUT;
			cause = "no attempt finished";
		}
		break;
	}
	snprintf(msg, sizeof(msg), "%s:%d: %s (gave up after %.1f s, %u attempt%s)", req->host,
		 req->port, cause, req->deadline, req->attempts, req->attempts == 1 ? "" : "s");
	ns_finish(req, st, msg);
}

/* Promote queued requests while there is room. */
static void
ns_kick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct nodescan *ns = arg;
	struct nodescan_req *req;

	while (ns->st.inflight < ns->max_inflight && (req = TAILQ_FIRST(&ns->pending)) != NULL) {
		TAILQ_REMOVE(&ns->pending, req, entry);
		ns->st.pending--;
		req->queued = 0;
		TAILQ_INSERT_TAIL(&ns->active, req, entry);
		ns->st.inflight++;
		if (ns->st.inflight > ns->st.peak_inflight)
			ns->st.peak_inflight = ns->st.inflight;
		req->state = NS_WAITING;
		ns_attempt(req); /* may finish req (then it is gone) */
	}
}

/* --- public --------------------------------------------------------------- */

struct nodescan *
nodescan_new(struct event_base *base, struct evdns_base *dns, int max_inflight, int max_pending)
{
	struct nodescan *ns;

	if ((ns = calloc(1, sizeof(*ns))) == NULL)
		return NULL;
	ns->base = base;
	ns->user_dns = dns;
	ns->max_inflight =
	    max_inflight > 0 ? (unsigned)max_inflight : NODESCAN_DEFAULT_MAX_INFLIGHT;
	ns->max_pending = max_pending > 0 ? (unsigned)max_pending : NODESCAN_DEFAULT_MAX_PENDING;
	TAILQ_INIT(&ns->pending);
	TAILQ_INIT(&ns->active);
	if ((ns->kick_ev = evtimer_new(base, ns_kick_cb, ns)) == NULL)
		goto fail;
	return ns;
fail:
	if (ns->kick_ev != NULL)
		event_free(ns->kick_ev);
	free(ns);
	return NULL;
}

void
nodescan_free(struct nodescan *ns)
{
	struct nodescan_req *req;

	if (ns == NULL)
		return;
	while ((req = TAILQ_FIRST(&ns->pending)) != NULL) {
		ns_unlink(req);
		ns_req_free(req);
	}
	while ((req = TAILQ_FIRST(&ns->active)) != NULL) {
		ns_unlink(req);
		ns_req_free(req);
	}
	event_free(ns->kick_ev);
	ns_resolver_unref(ns->res);
	if (ns->ssh_ready)
		ssh_finalize();
	free(ns);
}

struct nodescan_req *
nodescan_start(struct nodescan *ns, const struct nodescan_params *p, nodescan_cb cb, void *arg)
{
	struct nodescan_req *req;
	struct addrinfo hints, *ai = NULL;
	struct timeval tv;
	char port[8];

	if (p == NULL || p->host == NULL || p->host[0] == '\0' ||
	    strlen(p->host) >= sizeof(req->host) || p->port > 65535 || cb == NULL) {
		errno = EINVAL;
		return NULL;
	}
	if (ns->st.pending >= ns->max_pending) {
		errno = EAGAIN;
		return NULL;
	}
	if ((req = calloc(1, sizeof(*req))) == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	req->ns = ns;
	req->fd = req->io_fd = -1;
	snprintf(req->host, sizeof(req->host), "%s", p->host);
	req->port = p->port > 0 ? p->port : 22;
	req->gather = !p->tcp_only && nodescan_type_gathers_keys(p->connection_type);
	req->attempt_timeout =
	    p->attempt_timeout > 0 ? p->attempt_timeout : NODESCAN_DEFAULT_ATTEMPT_TIMEOUT;
	req->deadline = p->deadline > 0 ? p->deadline : NODESCAN_DEFAULT_DEADLINE;
	req->cb = cb;
	req->arg = arg;
	req->state = NS_QUEUED;
	req->phase = NS_PROBE;
	req->deadline_ev = evtimer_new(ns->base, ns_deadline_cb, req);
	req->timer_ev = evtimer_new(ns->base, ns_timer_cb, req);
	req->io_ev = event_new(ns->base, -1, 0, ns_io_cb, req);
	if (req->deadline_ev == NULL || req->timer_ev == NULL || req->io_ev == NULL) {
		ns_req_free(req);
		errno = ENOMEM;
		return NULL;
	}

	/* An address literal needs no resolver (AI_NUMERICHOST never blocks). */
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	snprintf(port, sizeof(port), "%d", req->port);
	if (getaddrinfo(req->host, port, &hints, &ai) == 0 && ai != NULL &&
	    ai->ai_addrlen <= sizeof(req->addrs[0])) {
		memcpy(&req->addrs[0], ai->ai_addr, ai->ai_addrlen);
		req->addrlens[0] = (socklen_t)ai->ai_addrlen;
		req->naddrs = 1;
	}
	if (ai != NULL)
		freeaddrinfo(ai);

	req->t0 = np_mono_s();
	tv = np_tv_of(req->deadline);
	event_add(req->deadline_ev, &tv);
	req->queued = 1;
	TAILQ_INSERT_TAIL(&ns->pending, req, entry);
	ns->st.pending++;
	ns->st.started++;
	ns_kick(ns);
	return req;
}

struct nodescan_req *
nodescan_check_reachable(struct nodescan *ns, const char *host, int port, double timeout,
			 nodescan_cb cb, void *arg)
{
	struct nodescan_params p;

	memset(&p, 0, sizeof(p));
	p.host = host;
	p.port = port;
	p.tcp_only = 1;
	p.attempt_timeout = timeout;
	p.deadline = timeout;
	return nodescan_start(ns, &p, cb, arg);
}

void
nodescan_cancel(struct nodescan_req *req)
{
	struct nodescan *ns;

	if (req == NULL || req->finishing)
		return;
	ns = req->ns;
	ns_unlink(req);
	ns->st.cancelled++;
	ns_req_free(req);
	ns_kick(ns);
}

void
nodescan_get_stats(const struct nodescan *ns, struct nodescan_stats *st)
{
	*st = ns->st;
}

/* --- host keys -------------------------------------------------------------- */

int
nodescan_key_normalize(const char *key, char *out, size_t outlen)
{
	const char *t, *b;
	size_t tl, bl;

	if (key == NULL)
		return -1;
	for (t = key; isspace((unsigned char)*t); t++)
		;
	for (tl = 0; t[tl] != '\0' && !isspace((unsigned char)t[tl]); tl++)
		;
	for (b = t + tl; isspace((unsigned char)*b); b++)
		;
	for (bl = 0; b[bl] != '\0' && !isspace((unsigned char)b[bl]); bl++)
		;
	if (tl == 0 || bl == 0 || tl + 1 + bl + 1 > outlen)
		return -1;
	memcpy(out, t, tl);
	out[tl] = ' ';
	memcpy(out + tl + 1, b, bl);
	out[tl + 1 + bl] = '\0';
	return 0;
}

/* Normalised keys are short (an RSA-16384 key is ~2.8 KB of base64): use a
 * bound that keeps every real key and rejects absurd input. */
#define NS_KEY_MAX 16384

int
nodescan_keys_match(const char *const *want, size_t nwant, const char *const *have, size_t nhave)
{
	char *w, *h;
	size_t i, j;
	int found = 1;

	if (nwant == 0)
		return 1;
	w = malloc(NS_KEY_MAX);
	h = malloc(NS_KEY_MAX);
	if (w == NULL || h == NULL) {
		free(w);
		free(h);
		return 0;
	}
	for (i = 0; i < nwant && found; i++) {
		found = 0;
		if (nodescan_key_normalize(want[i], w, NS_KEY_MAX) < 0)
			break;
		for (j = 0; j < nhave && !found; j++)
			if (nodescan_key_normalize(have[j], h, NS_KEY_MAX) == 0 &&
			    strcmp(w, h) == 0)
				found = 1;
	}
	free(w);
	free(h);
	return found;
}
