/*
 * TLS sessions: a session to the fixture's TLS port works, and a server
 * whose certificate is not from our CA, or is from our CA but names another
 * IP address or another host name than the one we connected to, is
 * refused; a certificate carrying only a DNS name is accepted for that
 * name. The refusing servers are `openssl s_server`
 * children on free loopback ports, stopped by pid.
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
