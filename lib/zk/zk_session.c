/*
 * The ZooKeeper session (zk.h, zk_private.h): zk_new() checks the TLS files
 * and starts the C client's handle; its state changes arrive through the
 * bridge and become connected/reconnected/suspended/expired/auth-failed
 * events for the listeners and the zk's callback; an expired session is
 * replaced by a new one (a new generation), a failed start retried with
 * back-off. Also the C client's log lines (per-zk trampolines, one warning
 * per outage), the session accessors, and the tear-down (zk_free).
 */
#include "lib/zk/zk_private.h"
#include "lib/core/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include "lib/core/xalloc.h"
#include "lib/core/clock.h"

#define ZK_LOG_SLOTS   16
#define ZK_RESTART_MIN 1.0 /* seconds before a failed session start is retried */
#define ZK_RESTART_MAX 30.0

/* ---- the C client's log lines ------------------------------------------
 *
 * The C client logs through a per-handle callback that gets only the text.
 * To tell which zk a line (a TLS refusal in particular) belongs to, each zk
 * borrows one of a fixed set of trampolines; lines logged before the
 * callback is set (or by a zk beyond the set) go through the global stream
 * and are only logged.
 */

static pthread_mutex_t slot_mu = PTHREAD_MUTEX_INITIALIZER;
static struct zk *slot_zk[ZK_LOG_SLOTS];
static int slot_used[ZK_LOG_SLOTS];
static char slot_last[ZK_LOG_SLOTS + 1][256];
static double slot_last_t[ZK_LOG_SLOTS + 1];

/*
 * Log one C client line: "<time>:<pid>(<tid>):ZOO_<LEVEL>@<func>@<line>: msg".
 * Its errors are mostly connection failures it retries by itself: of a
 * zk's, the first since it was last connected is a warning and the rest
 * of the outage debug (counted; zk_session_item sums the outage up when
 * connected again). Lines of no zk (logged before its callback is set)
 * are warnings, a repeat of the previous one within a minute debug.
 * Everything else is debug. Called with slot_mu held.
 */
static void
zk_log_line(int slot, struct zk *zk, const char *line)
{
	char msg[1024], pat[32];
	const char *p = strstr(line, ":ZOO_"), *m = line;
	int err = 0;
	size_t n;
	double t;

	if (p != NULL) {
		err = strncmp(p + 5, "ERROR@", 6) == 0;
		if ((m = strchr(p + 5, '@')) != NULL && (m = strchr(m + 1, '@')) != NULL &&
		    (m = strstr(m, ": ")) != NULL)
			m += 2;
		else
			m = line;
	}
	snprintf(msg, sizeof(msg), "%s", m);
	n = strlen(msg);
	while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' ' || msg[n - 1] == '\r'))
		msg[--n] = '\0';
	if (n == 0)
		return;
	if (!err) {
		log_debug("zookeeper client: %s", msg);
		return;
	}
	t = zk_now();
	if (zk != NULL) {
		/* One line per outage: every address of an ensemble failing
		 * every 50-100 ms made ~40 lines a second (issue 27). The
		 * count and the outage's length are logged on reconnection. */
		atomic_fetch_add(&zk->conn_errors, 1);
		if (atomic_exchange(&zk->err_logged, 1))
			log_debug("zookeeper client: %s", msg);
		else
			log_warn("zookeeper client: %s (further connection errors are counted, "
				 "not logged, until connected)",
				 msg);
	} else if (strncmp(slot_last[slot], msg, sizeof(slot_last[0]) - 1) == 0 &&
		   t - slot_last_t[slot] < 60)
		log_debug("zookeeper client: %s", msg);
	else
		log_warn("zookeeper client: %s", msg);
	snprintf(slot_last[slot], sizeof(slot_last[0]), "%s", msg);
	slot_last_t[slot] = t;
	snprintf(pat, sizeof(pat), "zk retcode=%d,", ZSSLCONNECTIONERROR);
	if (zk != NULL && strstr(msg, pat) != NULL) {
		struct zk_item *it = zk_item_new(IT_TLS, ZSSLCONNECTIONERROR);

		it->str = xstrdup(msg);
		zk_enqueue(zk, it);
	}
}

static void
log_slot(int i, const char *line)
{
	pthread_mutex_lock(&slot_mu);
	zk_log_line(i, slot_zk[i], line);
	pthread_mutex_unlock(&slot_mu);
}

#define SLOT_FN(i)                                                                                 \
	static void slot_cb_##i(const char *m)                                                     \
	{                                                                                          \
		log_slot(i, m);                                                                    \
	}
SLOT_FN(0)
SLOT_FN(1)
SLOT_FN(2)
SLOT_FN(3)
SLOT_FN(4)
SLOT_FN(5)
SLOT_FN(6)
SLOT_FN(7)
SLOT_FN(8)
SLOT_FN(9)
SLOT_FN(10)
SLOT_FN(11)
SLOT_FN(12)
SLOT_FN(13)
SLOT_FN(14)
SLOT_FN(15)
static const log_callback_fn slot_fns[ZK_LOG_SLOTS] = {
    slot_cb_0, slot_cb_1, slot_cb_2,  slot_cb_3,  slot_cb_4,  slot_cb_5,  slot_cb_6,  slot_cb_7,
    slot_cb_8, slot_cb_9, slot_cb_10, slot_cb_11, slot_cb_12, slot_cb_13, slot_cb_14, slot_cb_15,
};

static ssize_t
stream_write(void *cookie, const char *buf, size_t size)
{
	char line[2048];
	size_t i = 0, j;

	while (i < size) {
		for (j = i; j < size && buf[j] != '\n'; j++)
			;
		if (j > i) {
			size_t n = j - i < sizeof(line) - 1 ? j - i : sizeof(line) - 1;

			memcpy(line, buf + i, n);
			line[n] = '\0';
			pthread_mutex_lock(&slot_mu);
			zk_log_line(ZK_LOG_SLOTS, NULL, line);
			pthread_mutex_unlock(&slot_mu);
		}
		i = j + 1;
	}
	return (ssize_t)size;
}

static pthread_once_t stream_once = PTHREAD_ONCE_INIT;
static FILE *log_stream;

static void
stream_init(void)
{
	cookie_io_functions_t io = {.write = stream_write};

	log_stream = fopencookie(NULL, "w", io);
	if (log_stream != NULL) {
		setvbuf(log_stream, NULL, _IOLBF, 4096);
		zoo_set_log_stream(log_stream);
	}
}

static int
slot_take(struct zk *zk)
{
	int i, r = -1;

	pthread_mutex_lock(&slot_mu);
	for (i = 0; i < ZK_LOG_SLOTS; i++) {
		if (!slot_used[i]) {
			slot_used[i] = 1;
			slot_zk[i] = zk;
			slot_last[i][0] = '\0';
			r = i;
			break;
		}
	}
	pthread_mutex_unlock(&slot_mu);
	return r;
}

static void
slot_release(int i)
{
	if (i < 0)
		return;
	pthread_mutex_lock(&slot_mu);
	slot_used[i] = 0;
	slot_zk[i] = NULL;
	pthread_mutex_unlock(&slot_mu);
}

/*
 * On expiry the C client fails every request of the session, and its I/O
 * thread (which runs the completions, mk/zkclient-io.patch) hands them to
 * us at once; give it a moment to, since what is still queued inside the
 * C client when the handle is closed is lost there (completed by
 * zk_close_handle, but leaked there).
 */
static void
wait_failed(struct zk *zk)
{
	double deadline = zk_now() + 1;
	struct zk_rq *rq;
	int all;

	for (;;) {
		all = 1;
		pthread_mutex_lock(&zk->qmu);
		for (rq = zk->rqs; rq != NULL && all; rq = rq->next)
			all = rq->gen != zk->gen || rq->queued;
		pthread_mutex_unlock(&zk->qmu);
		if (all || zk_now() > deadline)
			return;
		usleep(1000);
	}
}

/*
 * Close the current handle. Requests it never completed get rc: the
 * multi-threaded C client drops the completions still queued when its I/O
 * thread (which runs them) stops.
 */
static void
zk_close_handle(struct zk *zk, int rc)
{
	zhandle_t *zh = zk->zh;
	struct zk_item *it;
	struct zk_rq *rq;

	if (zh == NULL)
		return;
	if (rc == ZSESSIONEXPIRED)
		wait_failed(zk);
	zk->zh = NULL;
	zk->connected = 0;
	/* Joins the C client's threads: every item of this handle is queued
	 * once it returns, so the marker below comes after all of them. */
	zookeeper_close(zh);
	for (rq = zk->rqs; rq != NULL; rq = rq->next) {
		if (rq->gen == zk->gen && !rq->queued) {
			it = zk_item_new(IT_RESULT, rc);
			it->rq = rq;
			zk_enqueue(zk, it);
		}
	}
	it = zk_item_new(IT_RELEASE, ZOK);
	it->gen = zk->gen;
	zk_enqueue(zk, it);
	zk->gen++;
}

static void
zk_restart_cb(evutil_socket_t fd, short what, void *arg)
{
	struct zk *zk = arg;

	if (zk->zh == NULL && !zk->closing)
		zk_start_handle(zk);
}

/* Start a fresh session now; on failure retry with back-off. */

/*
 * The C client leaves its host re-resolution delay at 0, which means
 * "resolve unconditionally": it calls getaddrinfo() on every turn of its I/O
 * thread (measured: most of a busy launcher's CPU). Re-resolve at most once
 * a minute while connected; a reconnect always resolves afresh.
 */
static void
zk_tune_handle(zhandle_t *zh)
{
	zoo_set_servers_resolution_delay(zh, 60 * 1000);
}

int
zk_start_handle(struct zk *zk)
{
	struct timeval tv;
	zhandle_t *zh;
	int ms = (int)(zk->timeout * 1000);

	zk->handle_connected = 0;
	if (zk->certstr != NULL)
		zh = zookeeper_init_ssl(zk->hosts, zk->certstr, zk_c_session_watcher, ms, NULL, zk,
					ZOO_NO_LOG_CLIENTENV);
	else
		zh = zookeeper_init(zk->hosts, zk_c_session_watcher, ms, NULL, zk,
				    ZOO_NO_LOG_CLIENTENV);
	if (zh != NULL)
		zk_tune_handle(zh);
	if (zh == NULL) {
		log_warn("zookeeper: cannot start a session with %s: %s; retrying in %.0f s",
			 zk->hosts, strerror(errno), zk->restart_delay);
		tv = np_tv_of(zk->restart_delay);
		evtimer_add(zk->restart_ev, &tv);
		zk->restart_delay *= 2;
		if (zk->restart_delay > ZK_RESTART_MAX)
			zk->restart_delay = ZK_RESTART_MAX;
		return -1;
	}
	if (zk->log_slot >= 0)
		zoo_set_log_callback(zh, slot_fns[zk->log_slot]);
	zk->zh = zh;
	return 0;
}

/* The outage just ended, for the connection's log line: "" when there was
 * none (or nothing failed in it). */
static void
outage_summary(struct zk *zk, char *buf, size_t len)
{
	unsigned long long errs = atomic_load(&zk->conn_errors) - zk->errors_at_loss;

	buf[0] = '\0';
	if (zk->away_since > 0)
		snprintf(buf, len, " (away %.1f s, %llu connection error%s)",
			 zk_now() - zk->away_since, errs, errs == 1 ? "" : "s");
	else if (errs > 0)
		snprintf(buf, len, " (after %llu connection error%s)", errs, errs == 1 ? "" : "s");
	zk->away_since = 0;
	zk->errors_at_loss = atomic_load(&zk->conn_errors);
	atomic_store(&zk->err_logged, 0);
}

void
zk_session_item(struct zk *zk, struct zk_item *it)
{
	const clientid_t *cid;
	char away[96];

	if (it->zh != zk->zh || zk->closing)
		return; /* an event of a handle already closed */
	if (it->state == ZOO_CONNECTED_STATE || it->state == ZOO_READONLY_STATE) {
		if (zk->connected)
			return;
		zk->connected = 1;
		zk->tls_reported = 0;
		zk->restart_delay = ZK_RESTART_MIN;
		cid = zoo_client_id(zk->zh);
		zk->session_id = cid != NULL ? cid->client_id : 0;
		outage_summary(zk, away, sizeof(away));
		zk_trees_send(zk);
		zk_flush_parked(zk);
		if (zk->handle_connected) {
			log_info("zookeeper: reconnected, session 0x%llx%s",
				 (unsigned long long)zk->session_id, away);
			/* a round of catch-ups (zk_catchup_begin) from the
			 * point the C client held at the first lost
			 * connection not caught up from yet */
			zk->cu_round++;
			zk->cu_zxid = zoo_catchup_zxid(zk->zh, &zk->cu_losses);
			zk->cu_waiting = zk->cu_failed = zk->cu_done = 0;
			zk->cu_announcing = 1;
			log_debug("zookeeper: catching up from zxid 0x%llx (%lld connections lost)",
				  (unsigned long long)zk->cu_zxid, (long long)zk->cu_losses);
			zk_emit(zk, ZK_EV_RECONNECTED);
			zk->cu_announcing = 0;
			zk_catchup_check(zk);
		} else {
			zk->handle_connected = 1;
			zk->cu_round++; /* a new session loads everything */
			zk->cu_done = 1;
			log_info("zookeeper: connected, session 0x%llx%s",
				 (unsigned long long)zk->session_id, away);
			zk_emit(zk, ZK_EV_CONNECTED);
		}
	} else if (it->state == ZOO_CONNECTING_STATE || it->state == ZOO_ASSOCIATING_STATE) {
		if (!zk->connected)
			return;
		zk->connected = 0;
		zk->counters.losses++;
		zk->away_since = zk_now();
		log_warn("zookeeper: connection lost, session 0x%llx suspended",
			 (unsigned long long)zk->session_id);
		zk_emit(zk, ZK_EV_SUSPENDED);
	} else if (it->state == ZOO_EXPIRED_SESSION_STATE) {
		zk->counters.expirations++;
		log_warn("zookeeper: session 0x%llx expired; starting a new one",
			 (unsigned long long)zk->session_id);
		zk->cu_round++; /* a new session loads everything */
		zk->cu_done = 1;
		zk_close_handle(zk, ZSESSIONEXPIRED);
		zk_start_handle(zk);
		zk_fail_parked(zk, ZSESSIONEXPIRED);
		zk_emit(zk, ZK_EV_EXPIRED);
	} else if (it->state == ZOO_AUTH_FAILED_STATE) {
		struct timeval tv = np_tv_of(zk->restart_delay);

		log_warn("zookeeper: authentication failed; retrying in %.0f s", zk->restart_delay);
		zk_close_handle(zk, ZAUTHFAILED);
		evtimer_add(zk->restart_ev, &tv);
		zk->restart_delay *= 2;
		if (zk->restart_delay > ZK_RESTART_MAX)
			zk->restart_delay = ZK_RESTART_MAX;
		zk_emit(zk, ZK_EV_AUTH_FAILED);
	}
}

void
zk_emit(struct zk *zk, enum zk_event ev)
{
	struct zk_listener *l;

	for (l = zk->listeners; l != NULL && !zk->free_requested; l = zk->liter) {
		zk->liter = l->next;
		l->cb(zk, ev, l->arg);
	}
	zk->liter = NULL;
	if (zk->session_cb != NULL && !zk->free_requested)
		zk->session_cb(zk, ev, zk->session_arg);
}

/* ---- public: session ------------------------------------------------------- */

static int
passwd_none(char *buf, int size, int rw, void *u)
{
	return 0;
}

/* Load the three TLS files as the C client will, to report problems now
 * rather than as endless failed handshakes. */
static int
tls_check(const struct zk_options *opt, char *err, size_t errlen)
{
	const char *files[3] = {opt->tls_ca, opt->tls_cert, opt->tls_key};
	const char *what[3] = {"CA", "certificate", "key"};
	unsigned long e;
	SSL_CTX *ctx;
	FILE *f;
	int i, ok = 0;

	for (i = 0; i < 3; i++) {
		if (strchr(files[i], ',') != NULL) {
			snprintf(err, errlen, "zookeeper-tls %s path %s contains a comma", what[i],
				 files[i]);
			return -1;
		}
		if ((f = fopen(files[i], "r")) == NULL) {
			snprintf(err, errlen, "zookeeper-tls %s %s: %s", what[i], files[i],
				 strerror(errno));
			return -1;
		}
		fclose(f);
	}
	ERR_clear_error();
	if ((ctx = SSL_CTX_new(TLS_client_method())) == NULL) {
		snprintf(err, errlen, "cannot create a TLS context");
		return -1;
	}
	SSL_CTX_set_default_passwd_cb(ctx, passwd_none);
	if (SSL_CTX_load_verify_locations(ctx, opt->tls_ca, NULL) != 1)
		i = 0;
	else if (SSL_CTX_use_certificate_chain_file(ctx, opt->tls_cert) != 1)
		i = 1;
	else if (SSL_CTX_use_PrivateKey_file(ctx, opt->tls_key, SSL_FILETYPE_PEM) != 1)
		i = 2;
	else if (SSL_CTX_check_private_key(ctx) != 1)
		i = 3;
	else
		ok = 1;
	if (!ok) {
		char ebuf[256];

		e = ERR_peek_last_error();
		ERR_error_string_n(e, ebuf, sizeof(ebuf));
		if (i == 2 && ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH)
			i = 3;
		if (i < 3)
			snprintf(err, errlen, "zookeeper-tls %s %s: not usable (%s)", what[i],
				 files[i], ebuf);
		else
			snprintf(err, errlen, "zookeeper-tls key %s does not match certificate %s",
				 opt->tls_key, opt->tls_cert);
	}
	ERR_clear_error();
	SSL_CTX_free(ctx);
	return ok ? 0 : -1;
}

struct zk *
zk_new(struct event_base *base, const struct zk_options *opt, zk_session_cb session_cb, void *arg,
       char *err, size_t errlen)
{
	struct zk *zk;
	int ntls;
	size_t n;

	if (errlen > 0)
		err[0] = '\0';
	if (base == NULL || opt == NULL || opt->hosts == NULL || opt->hosts[0] == '\0' ||
	    opt->hosts[0] == '/') {
		snprintf(err, errlen, "zookeeper: no hosts given");
		return NULL;
	}
	ntls = (opt->tls_ca != NULL) + (opt->tls_cert != NULL) + (opt->tls_key != NULL);
	if (ntls != 0 && ntls != 3) {
		snprintf(err, errlen, "zookeeper-tls needs ca, cert and key together");
		return NULL;
	}
	if (ntls == 3 && tls_check(opt, err, errlen) != 0)
		return NULL;

	pthread_once(&stream_once, stream_init);
	zoo_set_debug_level(log_get_level() >= LOG_LVL_DEBUG && getenv("NP_ZK_QUIET") == NULL
				? ZOO_LOG_LEVEL_DEBUG
				: ZOO_LOG_LEVEL_ERROR);

	zk = xcalloc(1, sizeof(*zk));
	zk->log_slot = -1;
	zk->efd = -1;
	zk->base = base;
	zk->hosts = xstrdup(opt->hosts);
	zk->timeout = opt->timeout > 0 ? opt->timeout : 10.0;
	zk->session_cb = session_cb;
	zk->session_arg = arg;
	zk->restart_delay = ZK_RESTART_MIN;
	zk->cu_done = 1; /* no reconnection being caught up from */
	if (ntls == 3) {
		n = strlen(opt->tls_ca) + strlen(opt->tls_cert) + strlen(opt->tls_key) + 3;
		zk->certstr = xmalloc(n);
		snprintf(zk->certstr, n, "%s,%s,%s", opt->tls_ca, opt->tls_cert, opt->tls_key);
	}
	pthread_mutex_init(&zk->qmu, NULL);
	zk->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (zk->efd < 0) {
		snprintf(err, errlen, "zookeeper: eventfd: %s", strerror(errno));
		goto fail;
	}
	zk->wake_ev = event_new(base, zk->efd, EV_READ | EV_PERSIST, zk_on_wake, zk);
	zk->restart_ev = evtimer_new(base, zk_restart_cb, zk);
	if (zk->wake_ev == NULL || zk->restart_ev == NULL || event_add(zk->wake_ev, NULL) != 0) {
		snprintf(err, errlen, "zookeeper: cannot register with the event loop");
		goto fail;
	}
	zk->log_slot = slot_take(zk);
	if (zk->certstr != NULL)
		zk->zh =
		    zookeeper_init_ssl(zk->hosts, zk->certstr, zk_c_session_watcher,
				       (int)(zk->timeout * 1000), NULL, zk, ZOO_NO_LOG_CLIENTENV);
	else
		zk->zh = zookeeper_init(zk->hosts, zk_c_session_watcher, (int)(zk->timeout * 1000),
					NULL, zk, ZOO_NO_LOG_CLIENTENV);
	if (zk->zh == NULL) {
		snprintf(err, errlen, "zookeeper: bad hosts %s: %s", zk->hosts,
			 errno == EINVAL ? "cannot parse or resolve" : strerror(errno));
		goto fail;
	}
	zk_tune_handle(zk->zh);
	if (zk->log_slot >= 0)
		zoo_set_log_callback(zk->zh, slot_fns[zk->log_slot]);
	return zk;
fail:
	zk_destroy(zk);
	return NULL;
}

/* Tear down: let requests in flight finish, close the handle, deliver what
 * must be delivered, free. */
void
zk_destroy(struct zk *zk)
{
	zk->closing = 1;
	zk_fail_parked(zk, ZCLOSING);
	/* Disconnected, requests end with the next failed connection attempt
	 * (milliseconds for a refused one): wait a little for that too, since
	 * the C client loses those still queued when it closes (mt_adaptor.c's
	 * process_async() is 0, so destroy() never runs its completion queue). */
	if (zk->zh != NULL)
		zk_drain(zk, zk->connected ? zk->timeout : (zk->timeout < 1 ? zk->timeout : 1));
	zk_close_handle(zk, ZCLOSING);
	zk_drain(zk, 0);
	while (zk->watches != NULL)
		zk_watch_free(zk, zk->watches);
	while (zk->trees != NULL) {
		struct zk_tree *t = zk->trees;

		zk->trees = t->next;
		free(t->path);
		free(t);
	}
	while (zk->calls != NULL)
		zk_call_free(zk, zk->calls);
	slot_release(zk->log_slot);
	if (zk->wake_ev != NULL)
		event_free(zk->wake_ev);
	if (zk->restart_ev != NULL)
		event_free(zk->restart_ev);
	if (zk->efd >= 0)
		close(zk->efd);
	pthread_mutex_destroy(&zk->qmu);
	free(zk->hosts);
	free(zk->certstr);
	free(zk);
}

void
zk_free(struct zk *zk)
{
	if (zk == NULL || zk->free_requested)
		return;
	zk->free_requested = 1;
	if (zk->dispatching == 0)
		zk_destroy(zk);
}

int
zk_is_connected(const struct zk *zk)
{
	return zk != NULL && zk->connected;
}

int
zk_client_connected(const struct zk *zk)
{
	return zk != NULL && zk->zh != NULL && zoo_state(zk->zh) == ZOO_CONNECTED_STATE;
}

int64_t
zk_session_id(const struct zk *zk)
{
	return zk != NULL ? zk->session_id : 0;
}

const clientid_t *
zk_client_id(const struct zk *zk)
{
	return zk != NULL && zk->zh != NULL ? zoo_client_id(zk->zh) : NULL;
}

int
zk_watch_counts(const struct zk *zk, int counts[5])
{
	if (zk == NULL || zk->zh == NULL) {
		memset(counts, 0, 5 * sizeof(int));
		return ZINVALIDSTATE;
	}
	return zoo_watch_counts(zk->zh, counts);
}

void
zk_counters(const struct zk *zk, struct zk_counters *out)
{
	memset(out, 0, sizeof(*out));
	if (zk == NULL)
		return;
	*out = zk->counters;
	out->connect_errors = atomic_load(&((struct zk *)zk)->conn_errors);
}

unsigned
zk_session_gen(const struct zk *zk)
{
	return zk->gen;
}

int
zk_closing(const struct zk *zk)
{
	return zk->closing;
}

struct event_base *
zk_base(const struct zk *zk)
{
	return zk->base;
}

double
zk_timeout(const struct zk *zk)
{
	return zk->timeout;
}

void
zk_listener_add(struct zk *zk, struct zk_listener *l, zk_session_cb cb, void *arg)
{
	l->cb = cb;
	l->arg = arg;
	l->prev = NULL;
	l->next = zk->listeners;
	if (zk->listeners != NULL)
		zk->listeners->prev = l;
	zk->listeners = l;
}

void
zk_listener_remove(struct zk *zk, struct zk_listener *l)
{
	if (zk->liter == l)
		zk->liter = l->next;
	if (l->prev != NULL)
		l->prev->next = l->next;
	else if (zk->listeners == l)
		zk->listeners = l->next;
	if (l->next != NULL)
		l->next->prev = l->prev;
	l->prev = l->next = NULL;
}

/* ---- for zk_sync.c (zk_private.h) ------------------------------------------ */

struct event_base *
zk_loop_base(const struct zk *zk)
{
	return zk->base;
}

const int *
zk_connected_flag(const struct zk *zk)
{
	return &zk->connected;
}

double
zk_session_timeout(const struct zk *zk)
{
	return zk->timeout;
}
