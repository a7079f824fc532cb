/*
 * nodescan against real OpenSSH servers (tests/support/sshd.c), plain
 * sockets that never speak SSH, closed ports, and a tiny DNS responder in
 * the test's own loop.
 */
#include <sys/socket.h>
#include <sys/types.h>

#include <netinet/in.h>
#include <arpa/inet.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <event2/dns.h>
#include <event2/event.h>

#include "lib/core/log.h"
#include "lib/net/nodescan.h"
#include "tests/support/sshd.h"

/* --- fixtures ---------------------------------------------------------------- */

struct outcome {
	int called;
	enum nodescan_status status;
	char error[1024];
	size_t nkeys;
	char *keys[8];
	double elapsed;
	unsigned attempts;
	struct event_base *base;
	int *remaining;	     /* loopbreak when it reaches 0, if set */
	struct nodescan *ns; /* to sample the gauge from the callback */
	unsigned max_inflight_seen;
};

static void
outcome_clear(struct outcome *o)
{
	size_t i;

	for (i = 0; i < o->nkeys; i++)
		free(o->keys[i]);
	o->nkeys = 0;
}

static void
on_done(const struct nodescan_result *r, void *arg)
{
	struct outcome *o = arg;
	struct nodescan_stats st;
	size_t i;

	o->called++;
	o->status = r->status;
	snprintf(o->error, sizeof(o->error), "%s", r->error ? r->error : "");
	for (i = 0; i < r->nkeys && i < 8; i++)
		o->keys[i] = strdup(r->keys[i]);
	o->nkeys = i;
	o->elapsed = r->elapsed;
	o->attempts = r->attempts;
	if (o->ns != NULL) {
		nodescan_get_stats(o->ns, &st);
		if (st.inflight > o->max_inflight_seen)
			o->max_inflight_seen = st.inflight;
	}
	if (o->remaining != NULL) {
		if (--*o->remaining == 0)
			event_base_loopbreak(o->base);
	} else {
		event_base_loopbreak(o->base);
	}
}

static int
has_key(char *const *keys, size_t n, const char *key)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(keys[i], key) == 0)
			return 1;
	return 0;
}

static struct test_sshd *
start_sshd(const char *tag, const char *const *types)
{
	char dir[512];
	struct test_sshd *s;

	cr_assert_eq(test_mkdtemp(dir, sizeof(dir), tag), 0);
	s = test_sshd_start(dir, types);
	cr_assert_not_null(s, "sshd did not start");
	return s;
}

static void
setup(void)
{
	signal(SIGPIPE, SIG_IGN);
	log_init("test_nodescan", LOG_LVL_WARN);
}

/* A TCP listener that accepts and never writes. */
struct silent {
	int lfd;
	int port;
	int accepted;
	int closed; /* an accepted connection reached EOF */
	struct event *accept_ev;
	struct event *conn_ev[16];
	int nconn;
	struct event_base *base;
	void (*on_accept)(struct silent *);
	void *arg;
};

static void
silent_read(evutil_socket_t fd, short what, void *arg)
{
	struct silent *s = arg;
	char buf[256];
	ssize_t n = read(fd, buf, sizeof(buf));

	if (n == 0 || (n < 0 && errno != EAGAIN)) {
		s->closed++;
		event_base_loopbreak(s->base);
	}
}

static void
silent_accept(evutil_socket_t fd, short what, void *arg)
{
	struct silent *s = arg;
	int c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (c < 0)
		return;
	s->accepted++;
	if (s->nconn < 16) {
		s->conn_ev[s->nconn] = event_new(s->base, c, EV_READ | EV_PERSIST, silent_read, s);
		event_add(s->conn_ev[s->nconn++], NULL);
	}
	if (s->on_accept)
		s->on_accept(s);
}

static void
silent_start(struct silent *s, struct event_base *base, int do_accept)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);

	memset(s, 0, sizeof(*s));
	s->base = base;
	s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	cr_assert_geq(s->lfd, 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(s->lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	cr_assert_eq(listen(s->lfd, 64), 0);
	cr_assert_eq(getsockname(s->lfd, (struct sockaddr *)&sin, &sl), 0);
	s->port = ntohs(sin.sin_port);
	if (do_accept) {
		s->accept_ev = event_new(base, s->lfd, EV_READ | EV_PERSIST, silent_accept, s);
		event_add(s->accept_ev, NULL);
	}
}

static void
silent_stop(struct silent *s)
{
	int i;

	for (i = 0; i < s->nconn; i++) {
		close(event_get_fd(s->conn_ev[i]));
		event_free(s->conn_ev[i]);
	}
	if (s->accept_ev)
		event_free(s->accept_ev);
	close(s->lfd);
}

/* A DNS server on a loopback UDP port answering every query NXDOMAIN, or
 * (answer == 0) never answering. */
struct fake_dns {
	int fd;
	int port;
	int answer;
	int queries;
	struct event *ev;
};

static void
fake_dns_read(evutil_socket_t fd, short what, void *arg)
{
	struct fake_dns *d = arg;
	unsigned char buf[512];
	struct sockaddr_storage from;
	socklen_t fl = sizeof(from);
	ssize_t n;

	while ((n = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl)) >= 12) {
		d->queries++;
		if (!d->answer)
			continue;
		/* Same id and question; QR, RD as asked, RA, RCODE 3. */
		buf[2] = (unsigned char)(0x80 | (buf[2] & 0x01));
		buf[3] = 0x83;
		memset(buf + 6, 0, 6); /* no answer/authority/additional */
		sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&from, fl);
		fl = sizeof(from);
	}
}

static void
fake_dns_start(struct fake_dns *d, struct event_base *base, int answer)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);

	memset(d, 0, sizeof(*d));
	d->answer = answer;
	d->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	cr_assert_geq(d->fd, 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(d->fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	cr_assert_eq(getsockname(d->fd, (struct sockaddr *)&sin, &sl), 0);
	d->port = ntohs(sin.sin_port);
	d->ev = event_new(base, d->fd, EV_READ | EV_PERSIST, fake_dns_read, d);
	event_add(d->ev, NULL);
}

static void
fake_dns_stop(struct fake_dns *d)
{
	event_free(d->ev);
	close(d->fd);
}

/* An evdns base that asks only the fake server and knows the names of a
 * test hosts file ("sshtarget.test" is 127.0.0.1). */
static struct evdns_base *
test_dns(struct event_base *base, const struct fake_dns *d, const char *dir)
{
	struct evdns_base *dns = evdns_base_new(base, 0);
	char ns[64], hosts[600];
	FILE *f;

	cr_assert_not_null(dns);
	snprintf(ns, sizeof(ns), "127.0.0.1:%d", d->port);
	cr_assert_eq(evdns_base_nameserver_ip_add(dns, ns), 0);
	snprintf(hosts, sizeof(hosts), "%s/hosts", dir);
	f = fopen(hosts, "w");
	cr_assert_not_null(f);
	fprintf(f, "127.0.0.1 sshtarget.test\n");
	fclose(f);
	cr_assert_eq(evdns_base_load_hosts(dns, hosts), 0);
	return dns;
}

static struct nodescan_params
params(const char *host, int port, double attempt, double deadline)
{
	struct nodescan_params p;

	memset(&p, 0, sizeof(p));
	p.host = host;
	p.port = port;
	p.attempt_timeout = attempt;
	p.deadline = deadline;
	return p;
}

/* --- host keys ------------------------------------------------------------------ */

TestSuite(nodescan, .init = setup, .timeout = 60);

Test(nodescan, scans_every_host_key_type)
{
	struct test_sshd *s = start_sshd("ns-all", NULL);
	struct event_base *base = event_base_new();
	struct nodescan *ns = nodescan_new(base, NULL, 0, 0);
	struct outcome o = {.base = base};
	struct nodescan_params p = params("127.0.0.1", s->port, 5, 20);
	size_t i;

	cr_assert_eq(s->nkeys, 3);
	cr_assert_not_null(nodescan_start(ns, &p, on_done, &o));
	event_base_dispatch(base);
	cr_assert_eq(o.called, 1);
	cr_assert_eq(o.status, NODESCAN_OK, "error: %s", o.error);
	cr_assert_eq(o.nkeys, 3, "got %zu keys", o.nkeys);
	for (i = 0; i < s->nkeys; i++)
		cr_assert(has_key(o.keys, o.nkeys, s->keys[i]), "missing %s", s->keys[i]);
	/* The static driver's check: configured keys are a subset. */
	cr_assert(nodescan_keys_match((const char *const *)s->keys, s->nkeys,
				      (const char *const *)o.keys, o.nkeys));
	cr_assert_eq(o.attempts, 1);

	outcome_clear(&o);
	nodescan_free(ns);
	event_base_free(base);
	test_sshd_stop(s);
}

Test(nodescan, one_key_type_only)
{
	static const char *const ed[] = {"ed25519", NULL};
	static const char *const ec[] = {"ecdsa", NULL};
	struct test_sshd *s1 = start_sshd("ns-ed", ed);
	struct test_sshd *s2 = start_sshd("ns-ec", ec);
	struct event_base *base = event_base_new();
	struct nodescan *ns = nodescan_new(base, NULL, 0, 0);
	struct outcome o1 = {.base = base}, o2 = {.base = base};
	struct nodescan_params p1 = params("127.0.0.1", s1->port, 5, 20);
	struct nodescan_params p2 = params("127.0.0.1", s2->port, 5, 20);
	int remaining = 2;

	o1.remaining = o2.remaining = &remaining;
	cr_assert_not_null(nodescan_start(ns, &p1, on_done, &o1));
	cr_assert_not_null(nodescan_start(ns, &p2, on_done, &o2));
	event_base_dispatch(base);
	cr_assert_eq(o1.status, NODESCAN_OK, "error: %s", o1.error);
	cr_assert_eq(o1.nkeys, 1);
	cr_assert_str_eq(o1.keys[0], s1->keys[0]);
	cr_assert_eq(strncmp(o1.keys[0], "ssh-ed25519 ", 12), 0);
	cr_assert_eq(o2.status, NODESCAN_OK, "error: %s", o2.error);
	cr_assert_eq(o2.nkeys, 1);
	cr_assert_str_eq(o2.keys[0], s2->keys[0]);
	cr_assert_eq(strncmp(o2.keys[0], "ecdsa-sha2-nistp256 ", 20), 0);

	/* A key of another server is not a subset: the static driver's
	 * host key mismatch. */
	cr_assert_not(nodescan_keys_match((const char *const *)s1->keys, 1,
					  (const char *const *)o2.keys, o2.nkeys));

	outcome_clear(&o1);
	outcome_clear(&o2);
	nodescan_free(ns);
	event_base_free(base);
	test_sshd_stop(s1);
	test_sshd_stop(s2);
}

Test(nodescan, host_name_through_system_resolver)
{
	static const char *const ec[] = {"ecdsa", NULL};
	struct test_sshd *s = start_sshd("ns-localhost", ec);
	struct event_base *base = event_base_new();
	struct nodescan *ns = nodescan_new(base, NULL, 0, 0);
	struct outcome o = {.base = base};
	struct nodescan_params p = params("localhost", s->port, 5, 20);

	/* As a static node named "localhost": /etc/hosts via evdns. */
	cr_assert_not_null(nodescan_start(ns, &p, on_done, &o));
	event_base_dispatch(base);
	cr_assert_eq(o.status, NODESCAN_OK, "error: %s", o.error);
	cr_assert_eq(o.nkeys, 1);
	cr_assert_str_eq(o.keys[0], s->keys[0]);

	outcome_clear(&o);
	nodescan_free(ns);
	event_base_free(base);
	test_sshd_stop(s);
}

Test(nodescan, names_hosts_file_nxdomain_and_silent_dns)
{
	static const char *const ed[] = {"ed25519", NULL};
	struct test_sshd *s = start_sshd("ns-dns", ed);
	struct event_base *base = event_base_new();
	struct fake_dns nx, mute;
	struct evdns_base *dns_nx, *dns_mute;
	struct nodescan *ns_nx, *ns_mute;
	struct outcome o1 = {.base = base}, o2 = {.base = base}, o3 = {.base = base};
	struct nodescan_params p1 = params("sshtarget.test", s->port, 5, 20);
	struct nodescan_params p2 = params("nonexistent.test", s->port, 5, 20);
	struct nodescan_params p3 = params("unanswered.test", s->port, 5, 1);
	int remaining = 3;

	fake_dns_start(&nx, base, 1);
	fake_dns_start(&mute, base, 0);
	dns_nx = test_dns(base, &nx, s->dir);
	dns_mute = test_dns(base, &mute, s->dir);
	ns_nx = nodescan_new(base, dns_nx, 0, 0);
	ns_mute = nodescan_new(base, dns_mute, 0, 0);
	o1.remaining = o2.remaining = o3.remaining = &remaining;

	cr_assert_not_null(nodescan_start(ns_nx, &p1, on_done, &o1));
	cr_assert_not_null(nodescan_start(ns_nx, &p2, on_done, &o2));
	cr_assert_not_null(nodescan_start(ns_mute, &p3, on_done, &o3));
	event_base_dispatch(base);

	/* A name from the hosts file is scanned. */
	cr_assert_eq(o1.status, NODESCAN_OK, "error: %s", o1.error);
	cr_assert_eq(o1.nkeys, 1);
	cr_assert_str_eq(o1.keys[0], s->keys[0]);
	/* NXDOMAIN fails at once (long before the 20 s deadline). */
	cr_assert_eq(o2.status, NODESCAN_E_RESOLVE);
	cr_assert_lt(o2.elapsed, 20.0);
	cr_assert_eq(o2.attempts, 0);
	cr_assert(strstr(o2.error, "nonexistent.test") != NULL, "%s", o2.error);
	cr_assert_geq(nx.queries, 1);
	/* No answer at all: resolve failure at the deadline. */
	cr_assert_eq(o3.status, NODESCAN_E_RESOLVE);
	cr_assert(strstr(o3.error, "no answer") != NULL, "%s", o3.error);
	cr_assert(strstr(o3.error, "gave up after 1.0 s") != NULL, "%s", o3.error);
	cr_assert_geq(mute.queries, 1);

	outcome_clear(&o1);
	nodescan_free(ns_nx);
	nodescan_free(ns_mute);
	/* Let libevent report the abandoned lookup before freeing its base. */
	event_base_loop(base, EVLOOP_NONBLOCK);
	evdns_base_free(dns_nx, 0);
	evdns_base_free(dns_mute, 0);
	fake_dns_stop(&nx);
	fake_dns_stop(&mute);
	event_base_free(base);
	test_sshd_stop(s);
}

struct late {
	char dir[512];
	int port;
	struct test_sshd *s;
};

static void
start_late(evutil_socket_t fd, short what, void *arg)
{
	static const char *const ed[] = {"ed25519", NULL};
	struct late *l = arg;

	/* Blocks the loop while sshd starts: only the test does that. */
	l->s = test_sshd_start_port(l->dir, ed, l->port);
}

Test(nodescan, host_that_comes_up_later_is_scanned)
{
	struct event_base *base = event_base_new();
	struct nodescan *ns = nodescan_new(base, NULL, 0, 0);
	struct outcome o = {.base = base};
	struct late l;
	struct timeval later = {1, 500000};
	struct nodescan_params p;

	memset(&l, 0, sizeof(l));
	cr_assert_eq(test_mkdtemp(l.dir, sizeof(l.dir), "ns-late"), 0);
	l.port = test_free_port();
	p = params("127.0.0.1", l.port, 2, 20);
	/* Refused at first (boot in progress), retried until sshd answers. */
	cr_assert_not_null(nodescan_start(ns, &p, on_done, &o));
	event_base_once(base, -1, EV_TIMEOUT, start_late, &l, &later);
	event_base_dispatch(base);

	cr_assert_not_null(l.s, "sshd did not start");
	cr_assert_eq(o.status, NODESCAN_OK, "error: %s", o.error);
	cr_assert_geq(o.attempts, 2);
	cr_assert_eq(o.nkeys, 1);
	cr_assert_str_eq(o.keys[0], l.s->keys[0]);

	outcome_clear(&o);
	nodescan_free(ns);
	event_base_free(base);
	test_sshd_stop(l.s);
}

Test(nodescan, tries_each_address_of_a_name)
{
	static const char *const ed[] = {"ed25519", NULL};
	struct test_sshd *s = start_sshd("ns-multi", ed);
	struct event_base *base = event_base_new();
	struct evdns_base *dns = evdns_base_new(base, 0);
	struct nodescan *ns = nodescan_new(base, dns, 0, 0);
	struct outcome o = {.base = base};
	struct nodescan_params p = params("multi.test", s->port, 2, 20);
	char hosts[600];
	FILE *f;

	/* sshd listens on 127.0.0.1 only: the first address refuses. */
	snprintf(hosts, sizeof(hosts), "%s/hosts-multi", s->dir);
	cr_assert_not_null(f = fopen(hosts, "w"));
	fprintf(f, "127.0.0.2 multi.test\n127.0.0.1 multi.test\n");
	fclose(f);
	cr_assert_eq(evdns_base_load_hosts(dns, hosts), 0);
	cr_assert_not_null(nodescan_start(ns, &p, on_done, &o));
	event_base_dispatch(base);

	cr_assert_eq(o.status, NODESCAN_OK, "error: %s", o.error);
	cr_assert_eq(o.attempts, 2);
	cr_assert_eq(o.nkeys, 1);
	cr_assert_str_eq(o.keys[0], s->keys[0]);

	outcome_clear(&o);
	nodescan_free(ns);
	evdns_base_free(dns, 0);
	event_base_free(base);
	test_sshd_stop(s);
}

/* --- failures --------------------------------------------------------------------- */

Test(nodescan, closed_port_fails_at_deadline)
{
	struct event_base *base = event_base_new();
	struct nodescan *ns = nodescan_new(base, NULL, 0, 0);
	struct outcome o = {.base = base};
	int port = test_free_port();
	struct nodescan_params p = params("127.0.0.1", port, 1, 1.5);

	cr_assert_gt(port, 0);
	cr_assert_not_null(nodescan_start(ns, &p, on_done, &o));
	event_base_dispatch(base);
	cr_assert_eq(o.called, 1);
	cr_assert_eq(o.status, NODESCAN_E_REFUSED, "error: %s", o.error);
	cr_assert(strstr(o.error, "Connection refused") != NULL, "%s", o.error);
	cr_assert(strstr(o.error, "gave up after 1.5 s") != NULL, "%s", o.error);
	/* Retried (once a second, as upstream) until the deadline. */
	cr_assert_geq(o.attempts, 2);
	cr_assert_eq(o.nkeys, 0);

	nodescan_free(ns);
	event_base_free(base);
}

struct ticker {
	struct event *ev;
	int ticks;
};

static void
tick(evutil_socket_t fd, short what, void *arg)
{
	struct ticker *t = arg;

	t->ticks++;
}

Test(nodescan, silent_server_times_out_without_blocking_the_loop)
{
	struct event_base *base = event_base_new();
	struct nodescan *ns = nodescan_new(base, NULL, 0, 0);
	struct outcome o = {.base = base};
	struct silent srv;
	struct ticker t = {0};
	struct timeval every = {0, 50000};
	struct nodescan_params p;

	/* Never accepted: the kernel completes the TCP handshake (backlog),
	 * and no SSH banner ever comes. */
	silent_start(&srv, base, 0);
	p = params("127.0.0.1", srv.port, 0.6, 1.5);
	t.ev = event_new(base, -1, EV_PERSIST, tick, &t);
	event_add(t.ev, &every);
	cr_assert_not_null(nodescan_start(ns, &p, on_done, &o));
	event_base_dispatch(base);

	cr_assert_eq(o.called, 1);
	cr_assert_eq(o.status, NODESCAN_E_TIMEOUT, "error: %s", o.error);
	cr_assert(strstr(o.error, "no key exchange") != NULL, "%s", o.error);
	cr_assert_geq(o.attempts, 2);
	/* The loop kept running: a 50 ms timer fired all along the 1.5 s. */
	cr_assert_geq(t.ticks, 10, "timer fired %d times", t.ticks);

	event_free(t.ev);
	silent_stop(&srv);
	nodescan_free(ns);
	event_base_free(base);
}

/* --- concurrency, cancellation, the queue --------------------------------------- */

struct sampler {
	struct nodescan *ns;
	struct event *ev;
	unsigned max_inflight, max_pending;
};

static void
sample(evutil_socket_t fd, short what, void *arg)
{
	struct sampler *sm = arg;
	struct nodescan_stats st;

	nodescan_get_stats(sm->ns, &st);
	if (st.inflight > sm->max_inflight)
		sm->max_inflight = st.inflight;
	if (st.pending > sm->max_pending)
		sm->max_pending = st.pending;
}

Test(nodescan, concurrency_limit_holds)
{
	static const char *const ed[] = {"ed25519", NULL};
	struct test_sshd *s[3];
	struct event_base *base = event_base_new();
	struct nodescan *ns = nodescan_new(base, NULL, 2, 0);
	struct outcome o[12];
	struct sampler sm = {.ns = ns};
	struct timeval every = {0, 2000};
	struct nodescan_stats st;
	struct nodescan_params p;
	int remaining = 12, i;

	s[0] = start_sshd("ns-c0", ed);
	s[1] = start_sshd("ns-c1", ed);
	s[2] = start_sshd("ns-c2", ed);
	memset(o, 0, sizeof(o));
	for (i = 0; i < 12; i++) {
		o[i].base = base;
		o[i].remaining = &remaining;
		o[i].ns = ns;
		p = params("127.0.0.1", s[i % 3]->port, 5, 30);
		cr_assert_not_null(nodescan_start(ns, &p, on_done, &o[i]));
	}
	nodescan_get_stats(ns, &st);
	cr_assert_eq(st.pending, 12);
	cr_assert_eq(st.inflight, 0);
	sm.ev = event_new(base, -1, EV_PERSIST, sample, &sm);
	event_add(sm.ev, &every);
	event_base_dispatch(base);

	for (i = 0; i < 12; i++) {
		cr_assert_eq(o[i].status, NODESCAN_OK, "scan %d: %s", i, o[i].error);
		cr_assert_eq(o[i].nkeys, 1);
		cr_assert_str_eq(o[i].keys[0], s[i % 3]->keys[0]);
		cr_assert_leq(o[i].max_inflight_seen, 2);
		outcome_clear(&o[i]);
	}
	nodescan_get_stats(ns, &st);
	cr_assert_eq(st.peak_inflight, 2);
	cr_assert_leq(sm.max_inflight, 2);
	cr_assert_eq(st.succeeded, 12);
	cr_assert_eq(st.inflight, 0);
	cr_assert_eq(st.pending, 0);

	event_free(sm.ev);
	nodescan_free(ns);
	event_base_free(base);
	for (i = 0; i < 3; i++)
		test_sshd_stop(s[i]);
}

static struct nodescan_req *to_cancel;

static void
cancel_on_accept(struct silent *s)
{
	nodescan_cancel(to_cancel);
	to_cancel = NULL;
}

Test(nodescan, cancel_running_scan_closes_its_connection)
{
	struct event_base *base = event_base_new();
	struct nodescan *ns = nodescan_new(base, NULL, 0, 0);
	struct outcome o = {.base = base};
	struct silent srv;
	struct nodescan_stats st;
	struct nodescan_params p;

	silent_start(&srv, base, 1);
	srv.on_accept = cancel_on_accept;
	p = params("127.0.0.1", srv.port, 30, 30);
	to_cancel = nodescan_start(ns, &p, on_done, &o);
	cr_assert_not_null(to_cancel);
	/* Runs until the server reads EOF on the scan's connection. */
	event_base_dispatch(base);

	cr_assert_eq(srv.accepted, 1);
	cr_assert_eq(srv.closed, 1);
	cr_assert_eq(o.called, 0);
	nodescan_get_stats(ns, &st);
	cr_assert_eq(st.cancelled, 1);
	cr_assert_eq(st.inflight, 0);
	cr_assert_eq(st.failed + st.succeeded, 0);

	silent_stop(&srv);
	nodescan_free(ns);
	event_base_free(base);
}

Test(nodescan, cancel_queued_scan_and_queue_cap)
{
	static const char *const ed[] = {"ed25519", NULL};
	struct test_sshd *s = start_sshd("ns-q", ed);
	struct event_base *base = event_base_new();
	struct nodescan *ns = nodescan_new(base, NULL, 1, 2);
	struct outcome o1 = {.base = base}, o2 = {.base = base};
	struct nodescan_params p = params("127.0.0.1", s->port, 5, 20);
	struct nodescan_req *r2;
	struct nodescan_stats st;

	cr_assert_not_null(nodescan_start(ns, &p, on_done, &o1));
	cr_assert_not_null(r2 = nodescan_start(ns, &p, on_done, &o2));
	/* The queue holds 2. */
	errno = 0;
	cr_assert_null(nodescan_start(ns, &p, on_done, &o2));
	cr_assert_eq(errno, EAGAIN);
	nodescan_cancel(r2);
	event_base_dispatch(base);

	cr_assert_eq(o1.called, 1);
	cr_assert_eq(o1.status, NODESCAN_OK, "error: %s", o1.error);
	cr_assert_eq(o2.called, 0);
	nodescan_get_stats(ns, &st);
	cr_assert_eq(st.cancelled, 1);
	cr_assert_eq(st.succeeded, 1);
	cr_assert_eq(st.pending, 0);

	outcome_clear(&o1);
	nodescan_free(ns);
	event_base_free(base);
	test_sshd_stop(s);
}

static void
free_scanner(evutil_socket_t fd, short what, void *arg)
{
	struct nodescan **nsp = arg;

	nodescan_free(*nsp);
	*nsp = NULL;
}

Test(nodescan, free_cancels_everything_without_callbacks)
{
	static const char *const ed[] = {"ed25519", NULL};
	struct test_sshd *s = start_sshd("ns-free", ed);
	struct event_base *base = event_base_new();
	struct fake_dns mute;
	struct evdns_base *dns;
	struct nodescan *ns;
	struct outcome o[4];
	struct silent srv;
	struct nodescan_params p;
	struct timeval soon = {0, 300000};
	int i;

	fake_dns_start(&mute, base, 0);
	dns = test_dns(base, &mute, s->dir);
	ns = nodescan_new(base, dns, 3, 0);
	silent_start(&srv, base, 0);
	memset(o, 0, sizeof(o));
	for (i = 0; i < 4; i++)
		o[i].base = base;
	/* Running: a silent server, an unanswered lookup, a closed port;
	 * queued: an sshd. */
	p = params("127.0.0.1", srv.port, 30, 30);
	cr_assert_not_null(nodescan_start(ns, &p, on_done, &o[0]));
	p = params("unanswered.test", 22, 30, 30);
	cr_assert_not_null(nodescan_start(ns, &p, on_done, &o[1]));
	p = params("127.0.0.1", test_free_port(), 30, 30);
	cr_assert_not_null(nodescan_start(ns, &p, on_done, &o[2]));
	p = params("127.0.0.1", s->port, 30, 30);
	cr_assert_not_null(nodescan_start(ns, &p, on_done, &o[3]));
	event_base_once(base, -1, EV_TIMEOUT, free_scanner, &ns, &soon);
	/* Nothing of the scanner's is left to keep the loop going once freed
	 * (the DNS and silent servers are stopped below). */
	event_base_loopexit(base, &(struct timeval){1, 0});
	event_base_dispatch(base);

	cr_assert_null(ns);
	for (i = 0; i < 4; i++)
		cr_assert_eq(o[i].called, 0, "callback %d was called", i);
	cr_assert_geq(mute.queries, 1);

	event_base_loop(base, EVLOOP_NONBLOCK);
	evdns_base_free(dns, 0);
	fake_dns_stop(&mute);
	silent_stop(&srv);
	event_base_free(base);
	test_sshd_stop(s);
}

/* --- reachability ------------------------------------------------------------------ */

Test(nodescan, reachability_check)
{
	static const char *const ed[] = {"ed25519", NULL};
	struct test_sshd *s = start_sshd("ns-reach", ed);
	struct event_base *base = event_base_new();
	struct nodescan *ns = nodescan_new(base, NULL, 0, 0);
	struct outcome up = {.base = base}, down = {.base = base}, winrm = {.base = base};
	struct nodescan_params p = params("127.0.0.1", s->port, 2, 2);
	int remaining = 3;

	up.remaining = down.remaining = winrm.remaining = &remaining;
	cr_assert_not_null(nodescan_check_reachable(ns, "127.0.0.1", s->port, 2, on_done, &up));
	cr_assert_not_null(
	    nodescan_check_reachable(ns, "127.0.0.1", test_free_port(), 1.2, on_done, &down));
	/* A connection type that is not ssh/network_cli: TCP only. */
	p.connection_type = "winrm";
	cr_assert_not_null(nodescan_start(ns, &p, on_done, &winrm));
	event_base_dispatch(base);

	cr_assert_eq(up.status, NODESCAN_OK, "error: %s", up.error);
	cr_assert_eq(up.nkeys, 0);
	cr_assert_eq(down.status, NODESCAN_E_REFUSED, "error: %s", down.error);
	cr_assert(strstr(down.error, "gave up after 1.2 s") != NULL, "%s", down.error);
	cr_assert_eq(winrm.status, NODESCAN_OK, "error: %s", winrm.error);
	cr_assert_eq(winrm.nkeys, 0);

	nodescan_free(ns);
	event_base_free(base);
	test_sshd_stop(s);
}

/* --- argument checks and the host-key helper ------------------------------------- */

Test(nodescan, bad_arguments)
{
	struct event_base *base = event_base_new();
	struct nodescan *ns = nodescan_new(base, NULL, 0, 0);
	struct outcome o = {.base = base};
	struct nodescan_params p = params(NULL, 22, 1, 1);
	char longname[300];

	errno = 0;
	cr_assert_null(nodescan_start(ns, &p, on_done, &o));
	cr_assert_eq(errno, EINVAL);
	p.host = "";
	cr_assert_null(nodescan_start(ns, &p, on_done, &o));
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	p.host = longname;
	cr_assert_null(nodescan_start(ns, &p, on_done, &o));
	p.host = "127.0.0.1";
	p.port = 70000;
	cr_assert_null(nodescan_start(ns, &p, on_done, &o));
	cr_assert_eq(errno, EINVAL);
	nodescan_free(NULL);
	nodescan_cancel(NULL);
	nodescan_free(ns);
	event_base_free(base);
}

Test(nodescan, connection_types)
{
	cr_assert(nodescan_type_gathers_keys(NULL));
	cr_assert(nodescan_type_gathers_keys("ssh"));
	cr_assert(nodescan_type_gathers_keys("network_cli"));
	cr_assert_not(nodescan_type_gathers_keys("winrm"));
	cr_assert_not(nodescan_type_gathers_keys("namespace"));
	cr_assert_str_eq(nodescan_status_str(NODESCAN_E_REFUSED), "connection refused");
	cr_assert_str_eq(nodescan_status_str(NODESCAN_E_TIMEOUT), "timed out");
	cr_assert_str_eq(nodescan_status_str(NODESCAN_E_NOKEYS), "no host keys");
}

Test(nodescan, host_key_subset_match)
{
	const char *scanned[] = {
	    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEd",
	    "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTY",
	    "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABgQ",
	};
	const char *one[] = {"ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABgQ"};
	const char *commented[] = {
	    "  ssh-ed25519\tAAAAC3NzaC1lZDI1NTE5AAAAIEd   root@host \n",
	    "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTY\n",
	};
	const char *wrong_data[] = {"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEX"};
	const char *wrong_type[] = {"ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIEd"};
	const char *partial[] = {
	    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEd",
	    "ssh-dss AAAAB3NzaC1kc3MAAACBAP",
	};
	const char *malformed[] = {"ssh-ed25519"};
	const char *empty[] = {""};
	char out[128];

	cr_assert(nodescan_keys_match(one, 1, scanned, 3));
	cr_assert(nodescan_keys_match(commented, 2, scanned, 3));
	cr_assert(nodescan_keys_match(scanned, 3, scanned, 3));
	cr_assert(nodescan_keys_match(NULL, 0, scanned, 3));
	cr_assert_not(nodescan_keys_match(wrong_data, 1, scanned, 3));
	cr_assert_not(nodescan_keys_match(wrong_type, 1, scanned, 3));
	cr_assert_not(nodescan_keys_match(partial, 2, scanned, 3));
	cr_assert_not(nodescan_keys_match(malformed, 1, scanned, 3));
	cr_assert_not(nodescan_keys_match(empty, 1, scanned, 3));
	cr_assert_not(nodescan_keys_match(one, 1, NULL, 0));

	cr_assert_eq(nodescan_key_normalize(" ssh-rsa  AAAA  c o m m e n t\n", out, sizeof(out)),
		     0);
	cr_assert_str_eq(out, "ssh-rsa AAAA");
	cr_assert_eq(nodescan_key_normalize("ssh-rsa AAAA", out, 12), -1);
	cr_assert_eq(nodescan_key_normalize("ssh-rsa AAAA", out, 13), 0);
	cr_assert_eq(nodescan_key_normalize("   ", out, sizeof(out)), -1);
	cr_assert_eq(nodescan_key_normalize(NULL, out, sizeof(out)), -1);
}
