/*
 * Interoperability with Debian's python3-kazoo, the client Zuul and upstream
 * Nodepool use: its Lock and ours exclude each other both ways, each sees
 * the other's contenders, and bytes written by one are read intact by the
 * other. kazoo runs in tests/support/kazoo_helper.py, a child process
 * driven over a pipe.
 */
#include <criterion/criterion.h>
#include <event2/event.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

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

TestSuite(zk_kazoo, .init = setup, .fini = teardown, .timeout = 90);

static struct testzk_proc *
kazoo_start(const char *hosts)
{
	char *argv[] = {"/usr/bin/python3", (char *)testzk_support_file("kazoo_helper.py"),
			(char *)hosts, NULL};
	struct testzk_proc *p = testzk_spawn(argv, NULL);
	const char *line = testzk_proc_readline(p, 30);

	cr_assert_not_null(line, "kazoo helper did not start (is python3-kazoo installed?)");
	cr_assert(strstr(line, "\"ready\"") != NULL, "%s", line);
	return p;
}

static void
kazoo_send(struct testzk_proc *p, json_t *cmd)
{
	char *s = json_dumps(cmd, JSON_COMPACT);

	cr_assert_not_null(s);
	cr_assert_eq(testzk_proc_writeline(p, s), 0);
	free(s);
	json_decref(cmd);
}

/* The answer to the last command sent; must be {"ok": true}. */
static json_t *
kazoo_answer(struct testzk_proc *p)
{
	const char *line = testzk_proc_readline(p, 30);
	json_error_t err;
	json_t *r;

	cr_assert_not_null(line, "no answer from the kazoo helper");
	r = json_loads(line, 0, &err);
	cr_assert_not_null(r, "bad answer %s", line);
	cr_assert(json_is_true(json_object_get(r, "ok")), "kazoo: %s", line);
	return r;
}

static json_t *
kazoo(struct testzk_proc *p, json_t *cmd)
{
	kazoo_send(p, cmd);
	return kazoo_answer(p);
}

static int
kazoo_bool(struct testzk_proc *p, json_t *cmd, const char *key)
{
	json_t *r = kazoo(p, cmd);
	int v = json_is_true(json_object_get(r, key));

	json_decref(r);
	return v;
}

static void
kazoo_quit(struct testzk_proc *p)
{
	int st;

	kazoo_send(p, json_pack("[s]", "quit"));
	st = testzk_proc_wait(p, 15);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "kazoo helper status %d", st);
}

struct lrec {
	int calls, rc;
};

static void
lrec_cb(struct zk_lock *lock, int rc, void *arg)
{
	struct lrec *r = arg;

	r->calls++;
	r->rc = rc;
}

Test(zk_kazoo, kazoo_lock_excludes_ours)
{
	const char *hosts;
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, &hosts);
	struct testzk_proc *kz = kazoo_start(hosts);
	struct zk_lock *l = zk_lock_new(zk, "/nodepool/nodes/0000000001/lock", "nodepoold", 0);
	struct lrec r = {0};
	char **ids;
	int n;

	cr_assert(kazoo_bool(
	    kz,
	    json_pack("[s,s,s,b,n]", "lock", "/nodepool/nodes/0000000001/lock", "zuul-executor", 1),
	    "acquired"));
	cr_assert_eq(zk_lock_sync_acquire(l, 0), ZK_LOCK_BUSY);
	cr_assert_eq(zk_lock_sync_acquire(l, 0.5), ZK_LOCK_TIMEOUT);
	cr_assert_eq(zk_lock_sync_contenders(zk, "/nodepool/nodes/0000000001/lock", &n, &ids), ZOK);
	cr_assert_eq(n, 1);
	cr_assert_str_eq(ids[0], "zuul-executor");
	zk_strings_free(n, ids);

	/* we wait; kazoo lets go; we get it */
	zk_lock_acquire(l, 30, lrec_cb, &r);
	testzk_run_for(base, 0.3);
	cr_assert_eq(r.calls, 0);
	cr_assert(kazoo_bool(kz, json_pack("[s,s]", "release", "/nodepool/nodes/0000000001/lock"),
			     "released"));
	cr_assert(testzk_run_flag(base, &r.calls, 15));
	cr_assert_eq(r.rc, ZOK);
	cr_assert(zk_lock_is_held(l));
	cr_assert_eq(zk_lock_sync_release(l), ZOK);
	kazoo_quit(kz);
	zk_lock_free(l);
	zk_free(zk);
}

Test(zk_kazoo, our_lock_excludes_kazoo)
{
	const char *hosts;
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, &hosts);
	struct testzk_proc *kz = kazoo_start(hosts);
	const char *ident = "nodepoold-\xc3\xb8-\xe2\x9c\x93"; /* UTF-8 */
	struct zk_lock *l = zk_lock_new(zk, "/nodepool/requests-lock/100-0000000001", ident, 0);
	json_t *r, *c;
	char **ids;
	int n;

	cr_assert_eq(zk_lock_sync_acquire(l, 0), ZOK);
	cr_assert_not(kazoo_bool(
	    kz,
	    json_pack("[s,s,s,b,n]", "lock", "/nodepool/requests-lock/100-0000000001", "zuul", 0),
	    "acquired"));
	cr_assert_not(
	    kazoo_bool(kz,
		       json_pack("[s,s,s,b,f]", "lock", "/nodepool/requests-lock/100-0000000001",
				 "zuul", 1, 0.5),
		       "acquired"));
	r = kazoo(kz, json_pack("[s,s]", "contenders", "/nodepool/requests-lock/100-0000000001"));
	c = json_object_get(r, "contenders");
	cr_assert_eq(json_array_size(c), 1, "kazoo removed its contenders after failing");
	cr_assert_str_eq(json_string_value(json_array_get(c, 0)), ident);
	json_decref(r);

	/* kazoo waits (blocking, in the helper); we let go; kazoo gets it */
	kazoo_send(kz, json_pack("[s,s,s,b,f]", "lock", "/nodepool/requests-lock/100-0000000001",
				 "zuul", 1, 20.0));
	testzk_run_for(base, 0.5);
	cr_assert_eq(
	    zk_lock_sync_contenders(zk, "/nodepool/requests-lock/100-0000000001", &n, &ids), ZOK);
	cr_assert_eq(n, 2);
	cr_assert_str_eq(ids[0], ident);
	cr_assert_str_eq(ids[1], "zuul");
	zk_strings_free(n, ids);
	cr_assert_eq(zk_lock_sync_release(l), ZOK);
	r = kazoo_answer(kz);
	cr_assert(json_is_true(json_object_get(r, "acquired")));
	json_decref(r);
	cr_assert_eq(zk_lock_sync_acquire(l, 0), ZK_LOCK_BUSY);
	cr_assert(
	    kazoo_bool(kz, json_pack("[s,s]", "release", "/nodepool/requests-lock/100-0000000001"),
		       "released"));
	cr_assert_eq(zk_lock_sync_acquire(l, 0), ZOK);
	cr_assert_eq(zk_lock_sync_release(l), ZOK);
	kazoo_quit(kz);
	zk_lock_free(l);
	zk_free(zk);
}

static char *
hex(const char *data, size_t n)
{
	char *s = malloc(2 * n + 1);
	size_t i;

	for (i = 0; i < n; i++)
		sprintf(s + 2 * i, "%02x", (unsigned char)data[i]);
	s[2 * n] = '\0';
	return s;
}

Test(zk_kazoo, bytes_intact_both_ways)
{
	const char *hosts;
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, &hosts);
	struct testzk_proc *kz = kazoo_start(hosts);
	/* JSON as Nodepool stores it, with non-ASCII UTF-8, plus raw bytes */
	const char ours[] = "{\"comment\": \"h\xc3\xa9ld f\xc3\xb6r d\xc3\xa9\x62ug \xe2\x9c\x93 "
			    "\xf0\x9f\x90\x8d\", \"state\": \"hold\"}\x00\xff\x01";
	const char theirs[] = "{\"label\": \"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\"}\n\x00\x80";
	char *h, *data;
	json_t *r;
	int len;

	cr_assert_eq(zk_sync_create(zk, "/data/ours", ours, (int)sizeof(ours) - 1, 0, 1, NULL),
		     ZOK);
	r = kazoo(kz, json_pack("[s,s]", "read", "/data/ours"));
	h = hex(ours, sizeof(ours) - 1);
	cr_assert_str_eq(json_string_value(json_object_get(r, "hex")), h);
	free(h);
	json_decref(r);

	h = hex(theirs, sizeof(theirs) - 1);
	json_decref(kazoo(kz, json_pack("[s,s,s]", "write", "/data/theirs", h)));
	free(h);
	cr_assert_eq(zk_sync_get(zk, "/data/theirs", &data, &len, NULL), ZOK);
	cr_assert_eq(len, (int)sizeof(theirs) - 1);
	cr_assert_arr_eq(data, theirs, sizeof(theirs) - 1);
	free(data);

	/* an empty value both ways */
	json_decref(kazoo(kz, json_pack("[s,s,s]", "write", "/data/empty", "")));
	cr_assert_eq(zk_sync_get(zk, "/data/empty", &data, &len, NULL), ZOK);
	cr_assert_eq(len, 0);
	free(data);
	cr_assert_eq(zk_sync_create(zk, "/data/empty2", NULL, 0, 0, 0, NULL), ZOK);
	r = kazoo(kz, json_pack("[s,s]", "read", "/data/empty2"));
	cr_assert_str_eq(json_string_value(json_object_get(r, "hex")), "");
	json_decref(r);
	kazoo_quit(kz);
	zk_free(zk);
}
