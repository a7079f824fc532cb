/*
 * TLS sessions: a session to the fixture's TLS port works, and a server
 * whose certificate is not from our CA, or is from our CA but names another
 * IP address or another host name than the one we connected to, is
 * refused; a certificate carrying only a DNS name is accepted for that
 * name. The refusing servers are `openssl s_server`
 * children on free loopback ports, stopped by pid. A burst of small and
 * large requests is answered whole and in order.
 */
#include <criterion/criterion.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/testzk.h"
#include "lib/zk/zk.h"

static struct event_base *base;

static void
setup(void)
{
	base = event_base_new();
	cr_assert_not_null(base);
}

static void
teardown(void)
{
	event_base_free(base);
}

TestSuite(zk_tls, .init = setup, .fini = teardown, .timeout = 60);

struct sess {
	int connected, auth_failed;
};

static void
sess_cb(struct zk *zk, enum zk_event ev, void *arg)
{
	struct sess *s = arg;

	if (ev == ZK_EV_CONNECTED || ev == ZK_EV_RECONNECTED)
		s->connected++;
	if (ev == ZK_EV_AUTH_FAILED)
		s->auth_failed++;
}

Test(zk_tls, session_over_tls)
{
	struct sess s = {0};
	struct zk *zk = testzk_connect(base, 1, sess_cb, &s, NULL);
	char *data;
	int len;

	cr_assert_eq(s.connected, 1);
	cr_assert_eq(s.auth_failed, 0);
	cr_assert_eq(zk_sync_create(zk, "/tls", "over tls", 8, 0, 0, NULL), ZOK);
	cr_assert_eq(zk_sync_get(zk, "/tls", &data, &len, NULL), ZOK);
	cr_assert_str_eq(data, "over tls");
	free(data);
	zk_free(zk);
}

/*
 * A burst over TLS: many requests issued at once, some far larger than a
 * socket buffer, while a proxy passes nothing to the server (the client
 * writes its queue in records of up to 16 KiB until the socket would
 * block, then writes the same bytes again when it can), and read back
 * (the client reads every response a read brings): every request is
 * answered, in the order issued, and each node reads back as written.
 */
#define BURST_N	  120
#define BURST_BIG (900 * 1024)

struct burst {
	int done, bad_order, failed;
	int order[BURST_N];
};

struct burst_rq {
	struct burst *b;
	int i;
};

static int
burst_len(int i)
{
	return i % 12 == 5 ? BURST_BIG + i : 1 + i * 37;
}

static char *
burst_data(int i)
{
	int len = burst_len(i), k;
	char *d = malloc((size_t)len);

	cr_assert_not_null(d);
	for (k = 0; k < len; k++)
		d[k] = (char)('a' + (i + k / 64) % 26);
	return d;
}

static int
burst_all(void *arg)
{
	return ((struct burst *)arg)->done == BURST_N;
}

static void
burst_note(struct burst_rq *r, int ok)
{
	struct burst *b = r->b;

	if (!ok)
		b->failed++;
	if (b->done != r->i)
		b->bad_order++;
	b->order[b->done++] = r->i;
}

static void
burst_created(int rc, const char *path, void *arg)
{
	burst_note(arg, rc == ZOK);
}

static void
burst_read(int rc, const char *data, int len, const struct zk_stat *st, void *arg)
{
	struct burst_rq *r = arg;
	char *want = burst_data(r->i);

	burst_note(r, rc == ZOK && len == burst_len(r->i) && memcmp(data, want, (size_t)len) == 0);
	free(want);
}

Test(zk_tls, burst_of_small_and_large_requests_answered_in_order)
{
	const char *chroot;
	struct testzk_proxy *px = testzk_proxy_start(testzk_hosts(1));
	struct sess s = {0};
	struct zk *zk;
	struct burst b;
	struct burst_rq rq[BURST_N];
	char path[64];
	int i, count;
	char **names;

	testzk_chroot(1, &chroot);
	zk = testzk_session(base, testzk_proxy_hosts(px, chroot), 1, sess_cb, &s);
	cr_assert_eq(s.connected, 1);
	cr_assert_eq(zk_sync_create(zk, "/burst", NULL, 0, 0, 0, NULL), ZOK);
	memset(&b, 0, sizeof(b));
	testzk_proxy_keep_requests(px, 1);
	for (i = 0; i < BURST_N; i++) {
		char *d = burst_data(i);

		rq[i] = (struct burst_rq){.b = &b, .i = i};
		snprintf(path, sizeof(path), "/burst/n%03d", i);
		zk_create(zk, path, d, burst_len(i), 0, 0, burst_created, &rq[i]);
		free(d);
	}
	testzk_run_for(base, 0.3); /* the client writes until the socket is full */
	cr_assert_eq(b.done, 0);
	testzk_proxy_keep_requests(px, 0);
	cr_assert(testzk_run_until(base, burst_all, &b, 50), "%d of %d creates answered", b.done,
		  BURST_N);
	cr_assert_eq(b.failed, 0);
	cr_assert_eq(b.bad_order, 0, "answers out of the order issued");

	memset(&b, 0, sizeof(b));
	for (i = 0; i < BURST_N; i++) {
		snprintf(path, sizeof(path), "/burst/n%03d", i);
		zk_get(zk, path, NULL, NULL, burst_read, &rq[i]);
	}
	cr_assert(testzk_run_until(base, burst_all, &b, 50), "%d of %d reads answered", b.done,
		  BURST_N);
	cr_assert_eq(b.failed, 0, "%d nodes read back other than written", b.failed);
	cr_assert_eq(b.bad_order, 0, "answers out of the order issued");
	cr_assert_eq(zk_sync_children(zk, "/burst", &count, &names), ZOK);
	cr_assert_eq(count, BURST_N);
	zk_strings_free(count, names);
	cr_assert_eq(zk_sync_delete(zk, "/burst", -1, 1), ZOK);
	zk_free(zk);
	testzk_proxy_stop(px);
}

static int
wait_file(const char *file, const char *needle, double timeout)
{
	int i;

	for (i = 0; i < (int)(timeout * 50); i++) {
		if (testzk_file_contains(file, needle))
			return 1;
		usleep(20000);
	}
	return testzk_file_contains(file, needle);
}

struct tls_run {
	struct sess s;
	char sout[4096]; /* s_server's output */
	char log[4096];	 /* our log */
};

/*
 * Start s_server with the named certificate and key (requiring a client
 * certificate from our CA, like ZooKeeper), point a TLS session with our CA
 * at it for 3 seconds and record what happened.
 */
static void
run_against_host(const char *cert, const char *key, const char *host, struct tls_run *r)
{
	struct testzk_proc *srv;
	struct zk_options opt;
	struct zk *zk;
	char port[16], accept[64], hosts[64], err[256];
	int port_n = testzk_free_port(), saved, fd;

	snprintf(port, sizeof(port), "%d", port_n);
	snprintf(accept, sizeof(accept), "127.0.0.1:%d", port_n);
	snprintf(r->sout, sizeof(r->sout), "%s", testzk_tmpfile("s_server.out"));
	snprintf(r->log, sizeof(r->log), "%s", testzk_tmpfile("zk.log"));
	char *argv[] = {"openssl", "s_server",
			"-accept", accept,
			"-cert",   (char *)testzk_cert(cert),
			"-key",	   (char *)testzk_cert(key),
			"-CAfile", (char *)testzk_cert("ca.pem"),
			"-Verify", "1",
			NULL};
	srv = testzk_spawn(argv, r->sout);
	cr_assert_not_null(srv);
	cr_assert(wait_file(r->sout, "ACCEPT", 10), "s_server did not start");

	/* our log lines go to a file for the duration */
	fflush(stderr);
	saved = dup(2);
	fd = open(r->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	cr_assert_geq(fd, 0);
	dup2(fd, 2);
	close(fd);

	snprintf(hosts, sizeof(hosts), "%s:%s", host, port);
	testzk_options(&opt, hosts, 1);
	zk = zk_new(base, &opt, sess_cb, &r->s, err, sizeof(err));
	cr_assert_not_null(zk, "%s", err);
	testzk_run_for(base, 3);
	zk_free(zk);

	dup2(saved, 2);
	close(saved);
	testzk_proc_stop(srv);
}

static void
run_against(const char *cert, const char *key, struct tls_run *r)
{
	run_against_host(cert, key, "127.0.0.1", r);
}

Test(zk_tls, certificate_from_another_ca_is_refused)
{
	struct tls_run r;

	memset(&r, 0, sizeof(r));
	run_against("rogue-server.pem", "rogue-server.key", &r);
	cr_assert_eq(r.s.connected, 0);
	cr_assert_eq(r.s.auth_failed, 1, "the refusal is reported once, not per retry");
	/* our client aborted the handshake with "unknown CA" */
	cr_assert(testzk_file_contains(r.sout, "alert unknown ca"), "see %s", r.sout);
	cr_assert_not(testzk_file_contains(r.sout, "CIPHER is"));
	cr_assert(testzk_file_contains(r.log, "TLS handshake with 127.0.0.1:"), "see %s", r.log);
	cr_assert(testzk_file_contains(r.log, "error in ssl connect"), "see %s", r.log);
	/* the C client's lines come through lib/core/log.h, not raw */
	cr_assert_not(testzk_file_contains(r.log, "ZOO_ERROR@"), "see %s", r.log);
}

Test(zk_tls, certificate_for_another_address_is_refused)
{
	struct tls_run r;

	memset(&r, 0, sizeof(r));
	run_against("wrongip-server.pem", "wrongip-server.key", &r);
	cr_assert_eq(r.s.connected, 0);
	cr_assert_eq(r.s.auth_failed, 1);
	/* the chain verified (the server saw the handshake through), then
	 * the address check refused it */
	cr_assert(testzk_file_contains(r.sout, "CIPHER is"), "see %s", r.sout);
	cr_assert(
	    testzk_file_contains(r.log, "server certificate does not match the server address"),
	    "see %s", r.log);
}

/* The positive control for the two above: the same set-up with the right
 * certificate completes the handshake and reports no refusal (s_server is
 * no ZooKeeper, so there is no session either). */
Test(zk_tls, right_certificate_completes_the_handshake)
{
	struct tls_run r;

	memset(&r, 0, sizeof(r));
	run_against("server.pem", "server.key", &r);
	cr_assert(testzk_file_contains(r.sout, "CIPHER is"), "see %s", r.sout);
	cr_assert_eq(r.s.auth_failed, 0, "see %s", r.log);
	cr_assert_eq(r.s.connected, 0);
	cr_assert_not(testzk_file_contains(r.log, "does not match"));
	cr_assert_not(testzk_file_contains(r.log, "error in ssl connect"));
}

/* A certificate that carries only a DNS name (localhost, no IP address) is
 * good for a connection to "localhost:port": the name we asked for is
 * checked, not only the address it resolved to. */
Test(zk_tls, dns_name_certificate_matches_the_host_name)
{
	struct tls_run r;

	memset(&r, 0, sizeof(r));
	run_against_host("dnsonly-server.pem", "dnsonly-server.key", "localhost", &r);
	cr_assert(testzk_file_contains(r.sout, "CIPHER is"), "see %s", r.sout);
	cr_assert_eq(r.s.auth_failed, 0, "see %s", r.log);
	cr_assert_not(testzk_file_contains(r.log, "does not match"), "see %s", r.log);
	cr_assert_not(testzk_file_contains(r.log, "error in ssl connect"), "see %s", r.log);
}

/* Our CA, but a certificate for another name: refused for "localhost". */
Test(zk_tls, certificate_for_another_name_is_refused)
{
	struct tls_run r;

	memset(&r, 0, sizeof(r));
	run_against_host("wrongname-server.pem", "wrongname-server.key", "localhost", &r);
	cr_assert_eq(r.s.connected, 0);
	cr_assert_eq(r.s.auth_failed, 1, "see %s", r.log);
	cr_assert(testzk_file_contains(
		      r.log, "server certificate does not match the server address (localhost)"),
		  "see %s", r.log);
}

/* The DNS-only certificate does not vouch for an IP address: connecting to
 * "127.0.0.1:port" with it is refused (the address is not in it). */
Test(zk_tls, dns_name_certificate_does_not_match_an_ip_address)
{
	struct tls_run r;

	memset(&r, 0, sizeof(r));
	run_against_host("dnsonly-server.pem", "dnsonly-server.key", "127.0.0.1", &r);
	cr_assert_eq(r.s.connected, 0);
	cr_assert_eq(r.s.auth_failed, 1, "see %s", r.log);
	cr_assert(testzk_file_contains(
		      r.log, "server certificate does not match the server address (127.0.0.1)"),
		  "see %s", r.log);
}
