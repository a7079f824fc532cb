/* lib/zk/zk.c against a real ZooKeeper: operations, watches, sessions. */
#include <criterion/criterion.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

TestSuite(zk, .init = setup, .fini = teardown, .timeout = 60);

/* ---- synchronous operations ------------------------------------------------ */

Test(zk, create_get_set_delete)
{
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, NULL);
	struct zk_stat st;
	char *data, *path;
	int len;

	cr_assert_eq(zk_sync_create(zk, "/a", "hello", 5, 0, 0, &path), ZOK);
	cr_assert_str_eq(path, "/a");
	free(path);
	cr_assert_eq(zk_sync_get(zk, "/a", &data, &len, &st), ZOK);
	cr_assert_eq(len, 5);
	cr_assert_str_eq(data, "hello");
	cr_assert_eq(st.version, 0);
	cr_assert_eq(st.data_length, 5);
	cr_assert_eq(st.ephemeral_owner, 0);
	cr_assert_gt(st.ctime_ms, 1600000000000LL);
	free(data);

	cr_assert_eq(zk_sync_set(zk, "/a", "world!", 6, 0, &st), ZOK);
	cr_assert_eq(st.version, 1);
	cr_assert_eq(zk_sync_set(zk, "/a", "x", 1, 0, NULL), ZBADVERSION);
	cr_assert_eq(zk_sync_get(zk, "/a", &data, &len, NULL), ZOK);
	cr_assert_str_eq(data, "world!");
	free(data);

	cr_assert_eq(zk_sync_create(zk, "/a", NULL, 0, 0, 0, NULL), ZNODEEXISTS);
	cr_assert_eq(zk_sync_delete(zk, "/a", 0, 0), ZBADVERSION);
	cr_assert_eq(zk_sync_delete(zk, "/a", 1, 0), ZOK);
	cr_assert_eq(zk_sync_get(zk, "/a", &data, &len, NULL), ZNONODE);
	cr_assert_null(data);
	cr_assert_eq(zk_sync_delete(zk, "/a", -1, 0), ZNONODE);
	cr_assert_eq(zk_sync_exists(zk, "/a", NULL), ZNONODE);
	zk_free(zk);
}

Test(zk, empty_and_binary_data)
{
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, NULL);
	const char bin[] = {'a', 0, (char)0xff, '\n', 0, 'z'};
	const char *utf8 = "n\xc3\xb8\x64\x65p\xc3\xb6\xc3\xb6l \xe2\x9c\x93 \xf0\x9f\x90\x8d";
	size_t big = 600 * 1024, i;
	char *data, *large = malloc(big);
	int len;

	cr_assert_eq(zk_sync_create(zk, "/empty", NULL, 0, 0, 0, NULL), ZOK);
	cr_assert_eq(zk_sync_get(zk, "/empty", &data, &len, NULL), ZOK);
	cr_assert_not_null(data, "empty data is an empty string, not NULL");
	cr_assert_eq(len, 0);
	cr_assert_str_eq(data, "");
	free(data);

	cr_assert_eq(zk_sync_create(zk, "/bin", bin, sizeof(bin), 0, 0, NULL), ZOK);
	cr_assert_eq(zk_sync_get(zk, "/bin", &data, &len, NULL), ZOK);
	cr_assert_eq(len, (int)sizeof(bin));
	cr_assert_arr_eq(data, bin, sizeof(bin));
	cr_assert_eq(data[len], '\0');
	free(data);

	cr_assert_eq(zk_sync_create(zk, "/utf8", utf8, (int)strlen(utf8), 0, 0, NULL), ZOK);
	cr_assert_eq(zk_sync_get(zk, "/utf8", &data, &len, NULL), ZOK);
	cr_assert_str_eq(data, utf8);
	free(data);

	for (i = 0; i < big; i++)
		large[i] = (char)(i * 7);
	cr_assert_eq(zk_sync_create(zk, "/large", large, (int)big, 0, 0, NULL), ZOK);
	cr_assert_eq(zk_sync_get(zk, "/large", &data, &len, NULL), ZOK);
	cr_assert_eq(len, (int)big);
	cr_assert_arr_eq(data, large, big);
	free(data);
	free(large);
	zk_free(zk);
}

Test(zk, sequence_ephemeral_makepath)
{
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, NULL);
	struct zk_stat st;
	char *p1, *p2, *data;
	int len;

	cr_assert_eq(zk_sync_create(zk, "/q/r/s/item-", "x", 1, ZOO_SEQUENCE, 0, NULL), ZNONODE);
	cr_assert_eq(zk_sync_exists(zk, "/q", NULL), ZNONODE);
	cr_assert_eq(zk_sync_create(zk, "/q/r/s/item-", "x", 1, ZOO_SEQUENCE, 1, &p1), ZOK);
	cr_assert_eq(zk_sync_create(zk, "/q/r/s/item-", "y", 1, ZOO_SEQUENCE, 1, &p2), ZOK);
	cr_assert_eq(strlen(p1), strlen("/q/r/s/item-0000000000"), "%s", p1);
	cr_assert_str_eq(p1, "/q/r/s/item-0000000000");
	cr_assert_str_eq(p2, "/q/r/s/item-0000000001");
	/* parents made by makepath are persistent and empty */
	cr_assert_eq(zk_sync_get(zk, "/q/r", &data, &len, &st), ZOK);
	cr_assert_eq(len, 0);
	cr_assert_eq(st.ephemeral_owner, 0);
	free(data);
	free(p1);
	free(p2);

	cr_assert_eq(zk_sync_create(zk, "/eph", "e", 1, ZOO_EPHEMERAL, 0, NULL), ZOK);
	cr_assert_eq(zk_sync_exists(zk, "/eph", &st), ZOK);
	cr_assert_eq(st.ephemeral_owner, zk_session_id(zk));
	cr_assert_neq(zk_session_id(zk), 0);
	cr_assert_eq(zk_sync_create(zk, "/eph/child", NULL, 0, 0, 0, NULL),
		     ZNOCHILDRENFOREPHEMERALS);
	cr_assert_eq(zk_sync_create(zk, "/es/x-", NULL, 0, ZOO_EPHEMERAL | ZOO_SEQUENCE, 1, &p1),
		     ZOK);
	cr_assert_str_eq(p1, "/es/x-0000000000");
	free(p1);
	zk_free(zk);
}

Test(zk, ephemerals_go_with_the_session)
{
	const char *hosts;
	struct zk *a = testzk_connect(base, 0, NULL, NULL, &hosts), *b;
	struct zk_options opt;
	char err[256];

	cr_assert_eq(zk_sync_create(a, "/eph", NULL, 0, ZOO_EPHEMERAL, 0, NULL), ZOK);
	testzk_options(&opt, hosts, 0);
	b = zk_new(base, &opt, NULL, NULL, err, sizeof(err));
	cr_assert_not_null(b, "%s", err);
	cr_assert_eq(zk_wait_connected(b, 15), ZOK);
	cr_assert_eq(zk_sync_exists(b, "/eph", NULL), ZOK);
	zk_free(a); /* closes the session: the server drops its ephemerals */
	cr_assert_eq(zk_sync_exists(b, "/eph", NULL), ZNONODE);
	zk_free(b);
}

Test(zk, children_and_recursive_delete)
{
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, NULL);
	char path[64], **names;
	int i, j, n;

	for (i = 0; i < 20; i++) {
		for (j = 0; j < 5; j++) {
			snprintf(path, sizeof(path), "/tree/n%02d/c%d", i, j);
			cr_assert_eq(zk_sync_create(zk, path, "d", 1, 0, 1, NULL), ZOK);
		}
	}
	cr_assert_eq(zk_sync_create(zk, "/tree/n00/c0/deep/deeper", NULL, 0, 0, 1, NULL), ZOK);
	cr_assert_eq(zk_sync_children(zk, "/tree", &n, &names), ZOK);
	cr_assert_eq(n, 20);
	for (i = 0; i < n; i++)
		cr_assert_eq(strncmp(names[i], "n", 1), 0);
	zk_strings_free(n, names);
	cr_assert_eq(zk_sync_children(zk, "/tree/n03", &n, &names), ZOK);
	cr_assert_eq(n, 5);
	zk_strings_free(n, names);
	cr_assert_eq(zk_sync_children(zk, "/nothere", &n, &names), ZNONODE);
	cr_assert_eq(n, 0);
	cr_assert_null(names);

	cr_assert_eq(zk_sync_delete(zk, "/tree", -1, 0), ZNOTEMPTY);
	cr_assert_eq(zk_sync_delete(zk, "/tree", -1, 1), ZOK);
	cr_assert_eq(zk_sync_exists(zk, "/tree", NULL), ZNONODE);
	/* ZNONODE anywhere is not an error for a recursive delete */
	cr_assert_eq(zk_sync_delete(zk, "/tree", -1, 1), ZOK);
	cr_assert_eq(zk_sync_create(zk, "/leaf", NULL, 0, 0, 0, NULL), ZOK);
	cr_assert_eq(zk_sync_delete(zk, "/leaf", -1, 1), ZOK);
	cr_assert_eq(zk_sync_exists(zk, "/leaf", NULL), ZNONODE);
	zk_free(zk);
}

/* ---- asynchronous operations ------------------------------------------------- */

struct rec {
	int calls;
	int rc;
	char data[256];
	int len;
	int count;
	struct zk_stat st;
	int has_stat;
};

static void
rec_string(int rc, const char *path, void *arg)
{
	struct rec *r = arg;

	r->calls++;
	r->rc = rc;
	if (path != NULL)
		snprintf(r->data, sizeof(r->data), "%s", path);
}

static void
rec_data(int rc, const char *data, int len, const struct zk_stat *st, void *arg)
{
	struct rec *r = arg;

	r->calls++;
	r->rc = rc;
	r->len = len;
	if (data != NULL)
		snprintf(r->data, sizeof(r->data), "%s", data);
	if (st != NULL) {
		r->st = *st;
		r->has_stat = 1;
	}
}

static void
rec_stat(int rc, const struct zk_stat *st, void *arg)
{
	struct rec *r = arg;

	r->calls++;
	r->rc = rc;
	if (st != NULL) {
		r->st = *st;
		r->has_stat = 1;
	}
}

static void
rec_void(int rc, void *arg)
{
	struct rec *r = arg;

	r->calls++;
	r->rc = rc;
}

static void
rec_children(int rc, int count, char *const *names, void *arg)
{
	struct rec *r = arg;

	r->calls++;
	r->rc = rc;
	r->count = count;
}

Test(zk, async_callbacks_once_on_the_loop)
{
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, NULL);
	struct rec c = {0}, g = {0}, s = {0}, e = {0}, ch = {0}, d = {0}, bad = {0};

	zk_create(zk, "/x", "one", 3, 0, 0, rec_string, &c);
	zk_get(zk, "/x", NULL, NULL, rec_data, &g);
	zk_set(zk, "/x", "two", 3, -1, rec_stat, &s);
	zk_exists(zk, "/x", NULL, NULL, rec_stat, &e);
	zk_children(zk, "/", NULL, NULL, rec_children, &ch);
	zk_delete(zk, "/x", -1, 0, rec_void, &d);
	zk_get(zk, "no-slash", NULL, NULL, rec_data, &bad);
	/* nothing is called before the loop runs, not even the failed submission */
	cr_assert_eq(c.calls + g.calls + s.calls + e.calls + ch.calls + d.calls + bad.calls, 0);
	cr_assert_eq(zk_pending(zk), 7);
	cr_assert(testzk_run_flag(base, &d.calls, 10));
	testzk_run_flag(base, &bad.calls, 10);
	cr_assert_eq(zk_pending(zk), 0);

	cr_assert_eq(c.calls, 1);
	cr_assert_eq(c.rc, ZOK);
	cr_assert_str_eq(c.data, "/x");
	cr_assert_eq(g.calls, 1);
	cr_assert_eq(g.rc, ZOK);
	cr_assert_str_eq(g.data, "one");
	cr_assert_eq(g.len, 3);
	cr_assert(g.has_stat);
	cr_assert_eq(s.rc, ZOK);
	cr_assert_eq(s.st.version, 1);
	cr_assert_eq(e.rc, ZOK);
	cr_assert_eq(e.st.version, 1);
	cr_assert_eq(ch.rc, ZOK);
	cr_assert_eq(ch.count, 1);
	cr_assert_eq(d.calls, 1);
	cr_assert_eq(d.rc, ZOK);
	cr_assert_eq(bad.calls, 1);
	cr_assert_eq(bad.rc, ZBADARGUMENTS, "%d", bad.rc);

	/* one more loop pass calls nothing again */
	testzk_run_for(base, 0.2);
	cr_assert_eq(c.calls + g.calls + s.calls + e.calls + ch.calls + d.calls + bad.calls, 7);
	zk_free(zk);
}

struct wrec {
	int calls;
	int type;
	char path[256];
};

static void
wrec_cb(int type, const char *path, void *arg)
{
	struct wrec *w = arg;

	w->calls++;
	w->type = type;
	snprintf(w->path, sizeof(w->path), "%s", path);
}

Test(zk, watches_fire_once)
{
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, NULL);
	struct wrec dw = {0}, cw = {0}, ew = {0}, delw = {0}, nw = {0};
	struct rec r1 = {0}, r2 = {0}, r3 = {0}, r4 = {0}, r5 = {0};

	cr_assert_eq(zk_sync_create(zk, "/w", "a", 1, 0, 0, NULL), ZOK);
	zk_get(zk, "/w", wrec_cb, &dw, rec_data, &r1);
	zk_children(zk, "/w", wrec_cb, &cw, rec_children, &r2);
	zk_exists(zk, "/w/new", wrec_cb, &ew, rec_stat, &r3);
	zk_get(zk, "/missing", wrec_cb, &nw, rec_data, &r4);
	cr_assert(testzk_run_flag(base, &r4.calls, 10));
	cr_assert_eq(r3.rc, ZNONODE);
	cr_assert_eq(r4.rc, ZNONODE);

	cr_assert_eq(zk_sync_set(zk, "/w", "b", 1, -1, NULL), ZOK);
	cr_assert(testzk_run_flag(base, &dw.calls, 10));
	cr_assert_eq(dw.type, ZOO_CHANGED_EVENT);
	cr_assert_str_eq(dw.path, "/w", "watch paths are inside the chroot");

	cr_assert_eq(zk_sync_create(zk, "/w/new", NULL, 0, 0, 0, NULL), ZOK);
	cr_assert(testzk_run_flag(base, &cw.calls, 10));
	cr_assert(testzk_run_flag(base, &ew.calls, 10));
	cr_assert_eq(cw.type, ZOO_CHILD_EVENT);
	cr_assert_str_eq(cw.path, "/w");
	cr_assert_eq(ew.type, ZOO_CREATED_EVENT);
	cr_assert_str_eq(ew.path, "/w/new");

	zk_get(zk, "/w/new", wrec_cb, &delw, rec_data, &r5);
	cr_assert(testzk_run_flag(base, &r5.calls, 10));
	/* more changes: the one-shot watches above do not fire again */
	cr_assert_eq(zk_sync_set(zk, "/w", "c", 1, -1, NULL), ZOK);
	cr_assert_eq(zk_sync_delete(zk, "/w/new", -1, 0), ZOK);
	cr_assert(testzk_run_flag(base, &delw.calls, 10));
	cr_assert_eq(delw.type, ZOO_DELETED_EVENT);
	testzk_run_for(base, 0.3);
	cr_assert_eq(dw.calls, 1);
	cr_assert_eq(cw.calls, 1);
	cr_assert_eq(ew.calls, 1);
	cr_assert_eq(delw.calls, 1);
	cr_assert_eq(nw.calls, 0, "a get on a missing node sets no watch");
	cr_assert_eq(zk_sync_create(zk, "/missing", NULL, 0, 0, 0, NULL), ZOK);
	testzk_run_for(base, 0.3);
	cr_assert_eq(nw.calls, 0);
	zk_free(zk);
}

Test(zk, cancel_forgets_callbacks)
{
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, NULL);
	struct wrec w = {0}, w2 = {0};
	struct rec r = {0}, other = {0};

	cr_assert_eq(zk_sync_create(zk, "/c", "a", 1, 0, 0, NULL), ZOK);
	zk_get(zk, "/c", wrec_cb, &w, rec_data, &r);
	zk_get(zk, "/c", wrec_cb, &w2, rec_data, &other);
	zk_cancel(zk, &r); /* the operation's callback */
	cr_assert(testzk_run_flag(base, &other.calls, 10));
	testzk_run_for(base, 0.2);
	cr_assert_eq(r.calls, 0);
	zk_cancel(zk, &w); /* the watch's callback */
	cr_assert_eq(zk_sync_set(zk, "/c", "b", 1, -1, NULL), ZOK);
	cr_assert(testzk_run_flag(base, &w2.calls, 10));
	testzk_run_for(base, 0.2);
	cr_assert_eq(w.calls, 0);
	cr_assert_eq(zk_pending(zk), 0);
	zk_free(zk);
}

/* Freeing with operations and watches outstanding calls nothing and leaks
 * nothing (ASan checks the latter). */
Test(zk, free_with_work_in_flight)
{
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, NULL);
	struct wrec w = {0};
	struct rec r[50];
	char path[32];
	int i;

	memset(r, 0, sizeof(r));
	cr_assert_eq(zk_sync_create(zk, "/f", "a", 1, 0, 0, NULL), ZOK);
	zk_exists(zk, "/f/none", wrec_cb, &w, NULL, NULL);
	zk_get(zk, "/f", wrec_cb, &w, NULL, NULL);
	testzk_run_for(base, 0.2);
	for (i = 0; i < 50; i++) {
		snprintf(path, sizeof(path), "/f/n%d", i);
		zk_create(zk, path, "x", 1, 0, 1, rec_string, &r[i]);
	}
	zk_delete(zk, "/f", -1, 1, rec_void, &r[0]);
	zk_free(zk);
	testzk_run_for(base, 0.2);
	for (i = 0; i < 50; i++)
		cr_assert_eq(r[i].calls, 0);
	cr_assert_eq(w.calls, 0);
}

/* ---- sessions ---------------------------------------------------------------- */

struct sess {
	int n;
	enum zk_event ev[32];
	int connected, expired, suspended;
};

static void
sess_cb(struct zk *zk, enum zk_event ev, void *arg)
{
	struct sess *s = arg;

	if (s->n < 32)
		s->ev[s->n++] = ev;
	if (ev == ZK_EV_CONNECTED)
		s->connected++;
	if (ev == ZK_EV_EXPIRED)
		s->expired++;
	if (ev == ZK_EV_SUSPENDED)
		s->suspended++;
}

static int
zk_is_connected_cond(void *arg)
{
	return zk_is_connected(arg);
}

static int
reconnected_after_expiry(void *arg)
{
	struct sess *s = arg;

	return s->expired > 0 && s->connected > 1;
}

Test(zk, expiry_starts_a_new_session)
{
	struct sess s = {0};
	struct zk *zk = testzk_connect(base, 0, sess_cb, &s, NULL);
	struct wrec w = {0};
	struct rec r = {0};
	int64_t old;
	char *data;
	int len, i;

	cr_assert_eq(s.n, 1);
	cr_assert_eq(s.ev[0], ZK_EV_CONNECTED);
	cr_assert(zk_is_connected(zk));
	old = zk_session_id(zk);
	cr_assert_eq(zk_sync_create(zk, "/eph", NULL, 0, ZOO_EPHEMERAL, 0, NULL), ZOK);
	cr_assert_eq(zk_sync_create(zk, "/keep", "k", 1, 0, 0, NULL), ZOK);
	zk_get(zk, "/keep", wrec_cb, &w, rec_data, &r);
	cr_assert(testzk_run_flag(base, &r.calls, 10));

	cr_assert_eq(testzk_expire(zk), 0);
	cr_assert(testzk_run_until(base, reconnected_after_expiry, &s, 30),
		  "events: %d (expired %d connected %d)", s.n, s.expired, s.connected);
	/* the order: SUSPENDED (the server dropped our connection; a quick
	 * RECONNECTED may come and go first), EXPIRED, then CONNECTED */
	cr_assert_eq(s.ev[1], ZK_EV_SUSPENDED);
	for (i = 1; i < s.n && s.ev[i] != ZK_EV_EXPIRED; i++)
		cr_assert(s.ev[i] == ZK_EV_SUSPENDED || s.ev[i] == ZK_EV_RECONNECTED);
	cr_assert_eq(s.ev[i], ZK_EV_EXPIRED);
	cr_assert_eq(s.ev[i + 1], ZK_EV_CONNECTED);
	cr_assert(zk_is_connected(zk));
	cr_assert_neq(zk_session_id(zk), old);
	cr_assert_eq(zk_sync_exists(zk, "/eph", NULL), ZNONODE, "our ephemeral went with it");
	cr_assert_eq(zk_sync_get(zk, "/keep", &data, &len, NULL), ZOK);
	cr_assert_str_eq(data, "k");
	free(data);
	/* the watch set in the old session is dropped, not called */
	cr_assert_eq(zk_sync_set(zk, "/keep", "l", 1, -1, NULL), ZOK);
	testzk_run_for(base, 0.3);
	cr_assert_eq(w.calls, 0);
	zk_free(zk);
}

Test(zk, new_errors)
{
	struct zk_options opt;
	char err[256];

	memset(&opt, 0, sizeof(opt));
	cr_assert_null(zk_new(base, &opt, NULL, NULL, err, sizeof(err)));
	cr_assert(strstr(err, "hosts") != NULL, "%s", err);

	testzk_options(&opt, testzk_hosts(1), 1);
	opt.tls_key = NULL;
	cr_assert_null(zk_new(base, &opt, NULL, NULL, err, sizeof(err)));
	cr_assert(strstr(err, "ca, cert and key") != NULL, "%s", err);

	testzk_options(&opt, testzk_hosts(1), 1);
	opt.tls_cert = "/nonexistent/client.pem";
	cr_assert_null(zk_new(base, &opt, NULL, NULL, err, sizeof(err)));
	cr_assert(strstr(err, "/nonexistent/client.pem") != NULL, "%s", err);
	cr_assert(strstr(err, "No such file") != NULL, "%s", err);

	testzk_options(&opt, testzk_hosts(1), 1);
	opt.tls_ca = "/etc/hostname"; /* readable, but not a certificate */
	cr_assert_null(zk_new(base, &opt, NULL, NULL, err, sizeof(err)));
	cr_assert(strstr(err, "CA /etc/hostname: not usable") != NULL, "%s", err);

	testzk_options(&opt, testzk_hosts(1), 1);
	opt.tls_key = testzk_cert("server.key"); /* not the certificate's key */
	cr_assert_null(zk_new(base, &opt, NULL, NULL, err, sizeof(err)));
	cr_assert(strstr(err, "does not match") != NULL, "%s", err);

	testzk_options(&opt, "no-such-host.invalid:2181", 0);
	cr_assert_null(zk_new(base, &opt, NULL, NULL, err, sizeof(err)));
	cr_assert(strstr(err, "no-such-host.invalid") != NULL, "%s", err);
}

/* Without a server nothing hangs: requests fail as the connection attempt
 * fails, and waiting for a session times out. */
Test(zk, no_server_no_hang)
{
	struct zk_options opt;
	struct zk *zk;
	char err[256], hosts[64], *data;
	int len;

	snprintf(hosts, sizeof(hosts), "127.0.0.1:%d", testzk_free_port());
	testzk_options(&opt, hosts, 0);
	opt.timeout = 1;
	zk = zk_new(base, &opt, NULL, NULL, err, sizeof(err));
	cr_assert_not_null(zk, "%s", err);
	cr_assert_eq(zk_wait_connected(zk, 0.5), ZOPERATIONTIMEOUT);
	cr_assert_not(zk_is_connected(zk));
	cr_assert_eq(zk_sync_get(zk, "/x", &data, &len, NULL), ZCONNECTIONLOSS);
	cr_assert_null(data);
	zk_free(zk);
}

/* Freed while the connection attempt is still failing, with every kind of
 * request queued: nothing is called, nothing leaks (ASan checks). */
Test(zk, free_while_disconnected)
{
	struct zk_options opt;
	struct zk_lock *lock;
	struct wrec w = {0};
	struct rec r[4];
	struct zk *zk;
	char err[256], hosts[64];
	int i;

	memset(r, 0, sizeof(r));
	snprintf(hosts, sizeof(hosts), "127.0.0.1:%d", testzk_free_port());
	testzk_options(&opt, hosts, 0);
	zk = zk_new(base, &opt, NULL, NULL, err, sizeof(err));
	cr_assert_not_null(zk, "%s", err);
	for (i = 0; i < 3; i++) {
		zk_create(zk, "/a/b/c", "x", 1, 0, 1, rec_string, &r[0]);
		zk_delete(zk, "/a", -1, 1, rec_void, &r[1]);
		zk_get(zk, "/a", wrec_cb, &w, rec_data, &r[2]);
		zk_lock_contenders(zk, "/l", rec_children, &r[3]);
		lock = zk_lock_new(zk, "/l", "me", 0);
		zk_lock_acquire(lock, -1, NULL, NULL);
		if (i == 1)
			testzk_run_for(base, 0.05);
		zk_lock_free(lock);
	}
	/* (requests failed by the connection attempts meanwhile were reported) */
	memset(r, 0, sizeof(r));
	zk_free(zk);
	testzk_run_for(base, 0.1);
	for (i = 0; i < 4; i++)
		cr_assert_eq(r[i].calls, 0);
	cr_assert_eq(w.calls, 0);
}

/* A host list: the C client tries the hosts in turn; the chroot applies. */
Test(zk, host_list_with_chroot)
{
	const char *path;
	const char *plain = testzk_chroot(0, &path);
	struct zk_options opt;
	struct zk *zk, *root;
	char hosts[256], err[256], full[128];

	snprintf(hosts, sizeof(hosts), "127.0.0.1:%d,%s", testzk_free_port(), plain);
	testzk_options(&opt, hosts, 0);
	zk = zk_new(base, &opt, NULL, NULL, err, sizeof(err));
	cr_assert_not_null(zk, "%s", err);
	cr_assert_eq(zk_wait_connected(zk, 20), ZOK);
	cr_assert_eq(zk_sync_create(zk, "/inside", NULL, 0, 0, 0, NULL), ZOK);
	testzk_options(&opt, testzk_hosts(0), 0);
	root = zk_new(base, &opt, NULL, NULL, err, sizeof(err));
	cr_assert_not_null(root, "%s", err);
	cr_assert_eq(zk_wait_connected(root, 15), ZOK);
	snprintf(full, sizeof(full), "%s/inside", path);
	cr_assert_eq(zk_sync_exists(root, full, NULL), ZOK);
	zk_free(root);
	zk_free(zk);
}

/* A network failure shorter than the session timeout: SUSPENDED, then
 * RECONNECTED on the same session with ephemerals and watches intact. */
Test(zk, suspended_then_reconnected)
{
	const char *path;
	const char *direct = testzk_chroot(0, &path);
	struct testzk_proxy *px = testzk_proxy_start(testzk_hosts(0));
	struct sess s = {0};
	struct zk *zk, *other;
	struct wrec w = {0};
	struct rec r = {0}, during = {0};
	int64_t sid;
	int i;

	zk = testzk_session(base, testzk_proxy_hosts(px, path), 0, sess_cb, &s);
	other = testzk_session(base, direct, 0, NULL, NULL);
	sid = zk_session_id(zk);
	cr_assert_eq(zk_sync_create(zk, "/eph", NULL, 0, ZOO_EPHEMERAL, 0, NULL), ZOK);
	cr_assert_eq(zk_sync_create(zk, "/w", "a", 1, 0, 0, NULL), ZOK);
	zk_get(zk, "/w", wrec_cb, &w, rec_data, &r);
	cr_assert(testzk_run_flag(base, &r.calls, 10));

	testzk_proxy_refuse(px, 1);
	testzk_proxy_drop(px);
	cr_assert(testzk_run_flag(base, &s.suspended, 10));
	cr_assert_not(zk_is_connected(zk));
	/* requests while cut off fail instead of hanging */
	zk_get(zk, "/w", NULL, NULL, rec_data, &during);
	cr_assert(testzk_run_flag(base, &during.calls, 10));
	cr_assert_eq(during.rc, ZCONNECTIONLOSS);
	/* the node we watch changes meanwhile */
	cr_assert_eq(zk_sync_set(other, "/w", "b", 1, -1, NULL), ZOK);
	testzk_run_for(base, 1);
	cr_assert_eq(w.calls, 0);

	testzk_proxy_refuse(px, 0);
	cr_assert(testzk_run_until(base, zk_is_connected_cond, zk, 20));
	for (i = 0; i < s.n && s.ev[i] != ZK_EV_SUSPENDED; i++)
		;
	cr_assert_eq(s.ev[i + 1], ZK_EV_RECONNECTED);
	cr_assert_eq(s.expired, 0);
	cr_assert_eq(zk_session_id(zk), sid);
	cr_assert_eq(zk_sync_exists(other, "/eph", NULL), ZOK, "the ephemeral survived");
	/* the watch was set again on reconnection and reports the change */
	cr_assert(testzk_run_flag(base, &w.calls, 10));
	cr_assert_eq(w.type, ZOO_CHANGED_EVENT);
	zk_free(other);
	zk_free(zk);
	testzk_proxy_stop(px);
}

struct multi_out {
	int done, rc, count;
	int rcs[8];
	char paths[8][128];
	int64_t mzxid[8];
	int32_t version[8];
};

static void
multi_done(int rc, int count, const struct zk_multi_result *res, void *arg)
{
	struct multi_out *o = arg;
	int i;

	o->rc = rc;
	o->count = count;
	for (i = 0; i < count && i < 8; i++) {
		o->rcs[i] = res[i].rc;
		snprintf(o->paths[i], sizeof(o->paths[i]), "%s", res[i].path ? res[i].path : "");
		o->mzxid[i] = res[i].mzxid;
		o->version[i] = res[i].version;
	}
	o->done = 1;
}

/* A multi applies every op or none, and reports each op's outcome. */
Test(zk, multi_is_atomic)
{
	struct zk *zk = testzk_connect(base, 1, NULL, NULL, NULL);
	struct multi_out o;
	struct zk_stat st;
	char *data;
	int len;
	struct zk_multi_op ok_ops[] = {
	    {.type = ZK_MULTI_CREATE, .path = "/m"},
	    {.type = ZK_MULTI_CREATE,
	     .path = "/m/seq-",
	     .data = "x",
	     .len = 1,
	     .flags = ZOO_SEQUENCE},
	    {.type = ZK_MULTI_SET, .path = "/m", .data = "top", .len = 3, .version = 0},
	    {.type = ZK_MULTI_CHECK, .path = "/m", .version = 1},
	};
	struct zk_multi_op bad_ops[] = {
	    {.type = ZK_MULTI_CREATE, .path = "/m/never"},
	    {.type = ZK_MULTI_CHECK, .path = "/m", .version = 7}, /* wrong version */
	    {.type = ZK_MULTI_DELETE, .path = "/m/seq-0000000000", .version = -1},
	};

	memset(&o, 0, sizeof(o));
	zk_multi(zk, ok_ops, 4, multi_done, &o);
	cr_assert(testzk_run_flag(base, &o.done, 10));
	cr_assert_eq(o.rc, ZOK);
	cr_assert_eq(o.count, 4);
	cr_assert_str_eq(o.paths[0], "/m");
	cr_assert_str_eq(o.paths[1], "/m/seq-0000000000");
	cr_assert_eq(o.rcs[2], ZOK);
	cr_assert_eq(zk_sync_get(zk, "/m", &data, &len, &st), ZOK);
	cr_assert_str_eq(data, "top");
	cr_assert_eq(st.version, 1);
	/* a set reports the stat it left, as zk_set does */
	cr_assert_eq(o.version[2], 1);
	cr_assert_eq(o.mzxid[2], st.mzxid);
	cr_assert_eq(o.mzxid[0], 0, "only a set has a stat");
	free(data);

	memset(&o, 0, sizeof(o));
	zk_multi(zk, bad_ops, 3, multi_done, &o);
	cr_assert(testzk_run_flag(base, &o.done, 10));
	cr_assert_eq(o.rc, ZBADVERSION);
	cr_assert_eq(o.rcs[1], ZBADVERSION);
	/* nothing was applied: the create and the delete did not happen */
	cr_assert_eq(zk_sync_exists(zk, "/m/never", NULL), ZNONODE);
	cr_assert_eq(zk_sync_exists(zk, "/m/seq-0000000000", NULL), ZOK);
	zk_free(zk);
}

/* ---- persistent recursive watches (zk_watch_tree) -------------------------- */

struct tree_rec {
	int n;
	int type[64];
	char path[64][128];
};

static void
tree_cb(int type, const char *path, void *arg)
{
	struct tree_rec *t = arg;

	if (t->n < 64) {
		t->type[t->n] = type;
		snprintf(t->path[t->n], sizeof(t->path[0]), "%s", path);
	}
	t->n++;
}

static int
tree_has(const struct tree_rec *t, int from, int type, const char *path)
{
	int i;

	for (i = from; i < t->n && i < 64; i++)
		if (t->type[i] == type && strcmp(t->path[i], path) == 0)
			return 1;
	return 0;
}

struct tree_want {
	const struct tree_rec *t;
	int from, type;
	const char *path;
};

static int
tree_seen(void *arg)
{
	const struct tree_want *w = arg;

	return tree_has(w->t, w->from, w->type, w->path);
}

static void
expect_tree(const struct tree_rec *t, int from, int type, const char *path)
{
	struct tree_want w = {t, from, type, path};

	cr_assert(testzk_run_until(base, tree_seen, &w, 10), "no event %d for %s", type, path);
}

/* Fires for the path and everything below it, again and again, and keeps
 * doing so in the session that follows an expiry; zk_cancel stops it. */
Test(zk, tree_watch_is_persistent_and_recursive)
{
	struct sess s = {0};
	struct zk *zk = testzk_connect(base, 0, sess_cb, &s, NULL);
	struct tree_rec t = {0};
	int counts[5], mark;

	zk_watch_tree(zk, "/tw", tree_cb, &t);
	cr_assert_eq(zk_sync_create(zk, "/tw", NULL, 0, 0, 0, NULL), ZOK);
	expect_tree(&t, 0, ZOO_CREATED_EVENT, "/tw");
	cr_assert_eq(zk_sync_create(zk, "/tw/a", "1", 1, 0, 0, NULL), ZOK);
	cr_assert_eq(zk_sync_create(zk, "/tw/a/lock", NULL, 0, 0, 0, NULL), ZOK);
	cr_assert_eq(zk_sync_create(zk, "/tw/a/lock/x__lock__0000000001", NULL, 0, 0, 0, NULL),
		     ZOK);
	cr_assert_eq(zk_sync_set(zk, "/tw/a", "2", 1, -1, NULL), ZOK);
	cr_assert_eq(zk_sync_set(zk, "/tw/a", "3", 1, -1, NULL), ZOK);
	expect_tree(&t, 0, ZOO_CREATED_EVENT, "/tw/a/lock/x__lock__0000000001");
	expect_tree(&t, 0, ZOO_CHANGED_EVENT, "/tw/a");
	cr_assert_eq(zk_sync_delete(zk, "/tw/a", -1, 1), ZOK);
	expect_tree(&t, 0, ZOO_DELETED_EVENT, "/tw/a");
	cr_assert(tree_has(&t, 0, ZOO_CREATED_EVENT, "/tw/a"));
	cr_assert(tree_has(&t, 0, ZOO_DELETED_EVENT, "/tw/a/lock/x__lock__0000000001"));
	/* both changes, no re-arming; no children events (recursive) */
	cr_assert_eq(t.n, 9, "events: %d", t.n);
	cr_assert_eq(zk_watch_counts(zk, counts), ZOK);
	cr_assert_eq(counts[4], 1);
	cr_assert_eq(counts[0] + counts[1] + counts[2], 0);

	cr_assert_eq(testzk_expire(zk), 0);
	cr_assert(testzk_run_until(base, reconnected_after_expiry, &s, 30));
	mark = t.n;
	cr_assert_eq(zk_sync_create(zk, "/tw/b", NULL, 0, 0, 0, NULL), ZOK);
	expect_tree(&t, mark, ZOO_CREATED_EVENT, "/tw/b");
	cr_assert_eq(zk_watch_counts(zk, counts), ZOK);
	cr_assert_eq(counts[4], 1, "added again in the new session");

	zk_cancel(zk, &t);
	mark = t.n;
	cr_assert_eq(zk_sync_create(zk, "/tw/c", NULL, 0, 0, 0, NULL), ZOK);
	testzk_run_for(base, 0.3);
	cr_assert_eq(t.n, mark, "cancelled");
	zk_free(zk);
}

/* What zk_op_counts reports: each request sent, by kind (a makepath
 * create's parents and a recursive delete's listings included), the
 * operations inside multis, and the tree watch's events by type. */
Test(zk, op_counts_by_kind)
{
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, NULL);
	struct tree_rec t = {0};
	struct zk_op_counts a, b;
	struct zk_multi_op ops[2];
	struct multi_out o;
	char *data, line[512];
	int len;

	zk_watch_tree(zk, "/oc", tree_cb, &t);
	cr_assert_eq(zk_sync_exists(zk, "/oc", NULL), ZNONODE); /* the addWatch is back */
	zk_op_counts(zk, &a);
	cr_assert_eq(a.sent[ZK_COUNT_ADDWATCH], 1);
	cr_assert_eq(a.sent[ZK_COUNT_EXISTS], 1);

	/* a makepath create of /oc/x: /oc/x refused (ZNONODE), /oc, /oc/x */
	cr_assert_eq(zk_sync_create(zk, "/oc/x", "1", 1, 0, 1, NULL), ZOK);
	cr_assert_eq(zk_sync_get(zk, "/oc/x", &data, &len, NULL), ZOK);
	free(data);
	cr_assert_eq(zk_sync_set(zk, "/oc/x", "2", 1, -1, NULL), ZOK);
	memset(ops, 0, sizeof(ops));
	ops[0].type = ZK_MULTI_SET;
	ops[0].path = "/oc/x";
	ops[0].data = "3";
	ops[0].len = 1;
	ops[0].version = -1;
	ops[1].type = ZK_MULTI_CREATE;
	ops[1].path = "/oc/y";
	memset(&o, 0, sizeof(o));
	zk_multi(zk, ops, 2, multi_done, &o);
	cr_assert(testzk_run_flag(base, &o.done, 10));
	cr_assert_eq(o.rc, ZOK);
	/* a session hears a change's events before the reply to the change */
	zk_op_counts(zk, &b);
	cr_assert_eq(b.sent[ZK_COUNT_CREATE] - a.sent[ZK_COUNT_CREATE], 3);
	cr_assert_eq(b.sent[ZK_COUNT_GET] - a.sent[ZK_COUNT_GET], 1);
	cr_assert_eq(b.sent[ZK_COUNT_SET] - a.sent[ZK_COUNT_SET], 1);
	cr_assert_eq(b.sent[ZK_COUNT_MULTI] - a.sent[ZK_COUNT_MULTI], 1);
	cr_assert_eq(b.multi_ops - a.multi_ops, 2);
	/* /oc, /oc/x, /oc/y created; /oc/x changed twice */
	cr_assert_eq(b.events[0] - a.events[0], 3);
	cr_assert_eq(b.events[2] - a.events[2], 2);
	cr_assert(tree_has(&t, 0, ZOO_CREATED_EVENT, "/oc/y"));

	/* a recursive delete of /oc: list /oc, /oc/x, /oc/y; delete all three */
	zk_op_counts(zk, &a);
	cr_assert_eq(zk_sync_delete(zk, "/oc", -1, 1), ZOK);
	zk_op_counts(zk, &b);
	cr_assert_eq(b.sent[ZK_COUNT_CHILDREN] - a.sent[ZK_COUNT_CHILDREN], 3);
	cr_assert_eq(b.sent[ZK_COUNT_DELETE] - a.sent[ZK_COUNT_DELETE], 3);
	cr_assert_eq(b.events[1] - a.events[1], 3);
	cr_assert_eq(b.oneshot, 0);

	zk_op_counts_format(&b, line, sizeof(line));
	cr_assert(strstr(line, "create 3 ") != NULL, "%s", line);
	cr_assert(strstr(line, "multi-ops 2 ") != NULL, "%s", line);
	cr_assert(strstr(line, "ev-deleted 3 ") != NULL, "%s", line);
	zk_free(zk);
}
