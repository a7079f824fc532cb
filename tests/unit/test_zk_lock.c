/* The kazoo Lock recipe (lib/zk/zk_lock.c) against a real ZooKeeper. */
#include <criterion/criterion.h>
#include <event2/event.h>
#include <regex.h>
#include <signal.h>
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

TestSuite(zk_lock, .init = setup, .fini = teardown, .timeout = 90);

/* A second session on the same chroot. */
static struct zk *
second(const char *hosts)
{
	return testzk_session(base, hosts, 0, NULL, NULL);
}

static int
nchildren(struct zk *zk, const char *path)
{
	char **names;
	int n, rc = zk_sync_children(zk, path, &n, &names);

	cr_assert_eq(rc, ZOK, "children of %s: %s", path, zk_strerror(rc));
	zk_strings_free(n, names);
	return n;
}

struct lrec {
	int calls;
	int rc;
	int order;
};

static int acquired_seq;

static void
lrec_cb(struct zk_lock *lock, int rc, void *arg)
{
	struct lrec *r = arg;

	r->calls++;
	r->rc = rc;
	r->order = ++acquired_seq;
}

Test(zk_lock, contender_as_kazoo_and_busy)
{
	const char *hosts;
	struct zk *a = testzk_connect(base, 0, NULL, NULL, &hosts), *b = second(hosts);
	struct zk_lock *la = zk_lock_new(a, "/locks/x", "holder-a", 0);
	struct zk_lock *lb = zk_lock_new(b, "/locks/x", "waiter-b", 0);
	regex_t re;
	char **names, *data, path[256];
	int n, len;

	cr_assert_eq(zk_lock_sync_acquire(la, 0), ZOK);
	cr_assert(zk_lock_is_held(la));
	cr_assert_str_eq(zk_lock_path(la), "/locks/x");
	cr_assert_eq(zk_sync_children(a, "/locks/x", &n, &names), ZOK);
	cr_assert_eq(n, 1);
	cr_assert_eq(regcomp(&re, "^[0-9a-f]{32}__lock__[0-9]{10}$", REG_EXTENDED | REG_NOSUB), 0);
	cr_assert_eq(regexec(&re, names[0], 0, NULL, 0), 0, "contender name %s", names[0]);
	regfree(&re);
	cr_assert_eq(names[0][12], '4', "a uuid4: %s", names[0]);
	snprintf(path, sizeof(path), "/locks/x/%s", names[0]);
	zk_strings_free(n, names);
	{
		struct zk_stat st;

		cr_assert_eq(zk_sync_get(a, path, &data, &len, &st), ZOK);
		cr_assert_str_eq(data, "holder-a");
		cr_assert_eq(st.ephemeral_owner, zk_session_id(a));
		free(data);
	}

	/* non-blocking from another session: busy, and its contender is gone again */
	cr_assert_eq(zk_lock_sync_acquire(lb, 0), ZK_LOCK_BUSY);
	cr_assert_not(zk_lock_is_held(lb));
	cr_assert_eq(nchildren(a, "/locks/x"), 1);
	/* the same from a second lock object on the holder's own session */
	{
		struct zk_lock *la2 = zk_lock_new(a, "/locks/x", NULL, 0);

		cr_assert_eq(zk_lock_sync_acquire(la2, 0), ZK_LOCK_BUSY);
		zk_lock_free(la2);
	}
	/* acquiring a held lock again is a caller error */
	cr_assert_eq(zk_lock_sync_acquire(la, 0), ZBADARGUMENTS);
	cr_assert(zk_lock_is_held(la));

	cr_assert_eq(zk_lock_sync_release(la), ZOK);
	cr_assert_not(zk_lock_is_held(la));
	cr_assert_eq(nchildren(a, "/locks/x"), 0, "the dir stays, empty");
	cr_assert_eq(zk_lock_sync_acquire(lb, 0), ZOK);
	cr_assert_eq(zk_lock_sync_release(lb), ZOK);
	cr_assert_eq(zk_lock_sync_release(lb), ZOK, "releasing twice is harmless");
	zk_lock_free(la);
	zk_lock_free(lb);
	zk_free(b);
	zk_free(a);
}

Test(zk_lock, blocking_times_out)
{
	const char *hosts;
	struct zk *a = testzk_connect(base, 0, NULL, NULL, &hosts), *b = second(hosts);
	struct zk_lock *la = zk_lock_new(a, "/l", NULL, 0), *lb = zk_lock_new(b, "/l", NULL, 0);

	cr_assert_eq(zk_lock_sync_acquire(la, 0), ZOK);
	cr_assert_eq(zk_lock_sync_acquire(lb, 1.0), ZK_LOCK_TIMEOUT);
	cr_assert_not(zk_lock_is_held(lb));
	cr_assert(zk_lock_is_held(la));
	cr_assert_eq(nchildren(a, "/l"), 1, "the waiter removed its contender");
	zk_lock_free(lb);
	zk_lock_free(la);
	zk_free(b);
	zk_free(a);
}

Test(zk_lock, blocking_acquires_when_the_holder_releases)
{
	const char *hosts;
	struct zk *a = testzk_connect(base, 0, NULL, NULL, &hosts), *b = second(hosts);
	struct zk_lock *la = zk_lock_new(a, "/deep/l", NULL, 0);
	struct zk_lock *lb = zk_lock_new(b, "/deep/l", "b", 0);
	struct lrec rb = {0};
	char **ids;
	int n;

	cr_assert_eq(zk_lock_sync_acquire(la, 0), ZOK);
	zk_lock_acquire(lb, 30, lrec_cb, &rb);
	testzk_run_for(base, 0.5);
	cr_assert_eq(rb.calls, 0, "still waiting");
	cr_assert_eq(nchildren(a, "/deep/l"), 2);
	cr_assert_eq(zk_lock_sync_release(la), ZOK);
	cr_assert(testzk_run_flag(base, &rb.calls, 10));
	cr_assert_eq(rb.rc, ZOK);
	cr_assert(zk_lock_is_held(lb));
	cr_assert_eq(zk_lock_sync_contenders(a, "/deep/l", &n, &ids), ZOK);
	cr_assert_eq(n, 1);
	cr_assert_str_eq(ids[0], "b");
	zk_strings_free(n, ids);
	zk_lock_free(lb); /* releases */
	zk_lock_free(la);
	zk_free(b);
	cr_assert_eq(nchildren(a, "/deep/l"), 0);
	zk_free(a);
}

Test(zk_lock, contenders_acquire_in_sequence_order)
{
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, NULL);
	struct zk_lock *l[6];
	struct lrec r[6];
	char id[16], **ids;
	int i, n, held;

	memset(r, 0, sizeof(r));
	acquired_seq = 0;
	for (i = 0; i < 6; i++) {
		snprintf(id, sizeof(id), "c%d", i);
		l[i] = zk_lock_new(zk, "/order", id, 0);
		cr_assert_not_null(l[i]);
	}
	cr_assert_eq(zk_lock_sync_acquire(l[0], 0), ZOK);
	for (i = 1; i < 6; i++) {
		zk_lock_acquire(l[i], -1, lrec_cb, &r[i]);
		testzk_run_for(base, 0.1); /* contenders are made in this order */
	}
	cr_assert_eq(zk_lock_sync_contenders(zk, "/order", &n, &ids), ZOK);
	cr_assert_eq(n, 6);
	for (i = 0; i < 6; i++) {
		snprintf(id, sizeof(id), "c%d", i);
		cr_assert_str_eq(ids[i], id, "holder first, then by sequence");
	}
	zk_strings_free(n, ids);

	for (held = 0; held < 5; held++) {
		cr_assert_eq(zk_lock_sync_release(l[held]), ZOK);
		cr_assert(testzk_run_flag(base, &r[held + 1].calls, 10), "c%d", held + 1);
		cr_assert_eq(r[held + 1].rc, ZOK);
		cr_assert_eq(r[held + 1].order, held + 1);
		for (i = held + 2; i < 6; i++)
			cr_assert_eq(r[i].calls, 0, "c%d must wait for c%d", i, held + 1);
	}
	for (i = 0; i < 6; i++)
		zk_lock_free(l[i]);
	zk_free(zk);
}

/* The holder is the lowest sequence, not the lowest name. */
Test(zk_lock, lowest_sequence_not_lowest_name)
{
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, NULL);
	struct zk_lock *l = zk_lock_new(zk, "/seq", NULL, 0);
	char *holder;

	cr_assert_eq(zk_sync_create(zk, "/seq/zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz__lock__", "other", 5,
				    ZOO_EPHEMERAL | ZOO_SEQUENCE, 1, &holder),
		     ZOK);
	/* not a contender: no __lock__ suffix */
	cr_assert_eq(zk_sync_create(zk, "/seq/0000-not-a-contender", NULL, 0, 0, 0, NULL), ZOK);
	cr_assert_eq(zk_lock_sync_acquire(l, 0), ZK_LOCK_BUSY);
	cr_assert_eq(zk_sync_delete(zk, holder, -1, 0), ZOK);
	cr_assert_eq(zk_lock_sync_acquire(l, 0), ZOK);
	free(holder);
	zk_lock_free(l);
	zk_free(zk);
}

/* A waiter watches only its immediate predecessor and lists again when it
 * goes: a predecessor leaving out of turn does not give it the lock. */
Test(zk_lock, waits_for_the_immediate_predecessor)
{
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, NULL);
	struct zk_lock *l = zk_lock_new(zk, "/pred", "me", 0);
	struct lrec r = {0};
	char *h, *w;
	int n;
	char **ids;

	cr_assert_eq(
	    zk_sync_create(zk, "/pred/aaaa__lock__", "h", 1, ZOO_EPHEMERAL | ZOO_SEQUENCE, 1, &h),
	    ZOK);
	cr_assert_eq(
	    zk_sync_create(zk, "/pred/bbbb__lock__", "w", 1, ZOO_EPHEMERAL | ZOO_SEQUENCE, 0, &w),
	    ZOK);
	zk_lock_acquire(l, 30, lrec_cb, &r);
	testzk_run_for(base, 0.3);
	cr_assert_eq(r.calls, 0);
	cr_assert_eq(zk_lock_sync_contenders(zk, "/pred", &n, &ids), ZOK);
	cr_assert_eq(n, 3);
	cr_assert_str_eq(ids[0], "h");
	cr_assert_str_eq(ids[1], "w");
	cr_assert_str_eq(ids[2], "me");
	zk_strings_free(n, ids);
	cr_assert_eq(zk_sync_delete(zk, w, -1, 0), ZOK); /* the one we watch goes */
	testzk_run_for(base, 0.5);
	cr_assert_eq(r.calls, 0, "the holder is still there");
	cr_assert_eq(zk_sync_delete(zk, h, -1, 0), ZOK);
	cr_assert(testzk_run_flag(base, &r.calls, 10));
	cr_assert_eq(r.rc, ZOK);
	free(h);
	free(w);
	zk_lock_free(l);
	zk_free(zk);
}

Test(zk_lock, release_deletes_only_ours)
{
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, NULL);
	struct zk_lock *l = zk_lock_new(zk, "/only", NULL, 0);
	char **names, *other;
	int n;

	cr_assert_eq(zk_lock_sync_acquire(l, 0), ZOK);
	cr_assert_eq(zk_sync_create(zk, "/only/ffff__lock__", NULL, 0, ZOO_EPHEMERAL | ZOO_SEQUENCE,
				    0, &other),
		     ZOK);
	cr_assert_eq(zk_lock_sync_release(l), ZOK);
	cr_assert_eq(zk_sync_children(zk, "/only", &n, &names), ZOK);
	cr_assert_eq(n, 1);
	cr_assert_str_eq(names[0], strrchr(other, '/') + 1);
	zk_strings_free(n, names);
	free(other);
	cr_assert_eq(zk_sync_exists(zk, "/only", NULL), ZOK);
	zk_lock_free(l);
	zk_free(zk);
}

Test(zk_lock, no_resurrect)
{
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, NULL);
	struct zk_lock *gone =
	    zk_lock_new(zk, "/nodes/0000000001/lock", NULL, ZK_LOCK_NO_RESURRECT);
	struct zk_lock *there =
	    zk_lock_new(zk, "/nodes/0000000002/lock", NULL, ZK_LOCK_NO_RESURRECT);
	struct zk_lock *plain = zk_lock_new(zk, "/nodes/0000000003/lock", NULL, 0);

	cr_assert_eq(zk_sync_create(zk, "/nodes/0000000002", "{}", 2, 0, 1, NULL), ZOK);
	cr_assert_eq(zk_lock_sync_acquire(gone, 0), ZNONODE);
	cr_assert_eq(zk_lock_sync_acquire(gone, 5), ZNONODE);
	cr_assert_eq(zk_sync_exists(zk, "/nodes/0000000001", NULL), ZNONODE, "not recreated");
	cr_assert_not(zk_lock_is_held(gone));

	cr_assert_eq(zk_lock_sync_acquire(there, 0), ZOK);
	cr_assert_eq(zk_sync_exists(zk, "/nodes/0000000002/lock", NULL), ZOK);
	/* without the flag, as kazoo: the whole path is made */
	cr_assert_eq(zk_lock_sync_acquire(plain, 0), ZOK);
	cr_assert_eq(zk_sync_exists(zk, "/nodes/0000000003", NULL), ZOK);
	zk_lock_free(gone);
	zk_lock_free(there);
	zk_lock_free(plain);
	zk_free(zk);
}

/* A lock whose dir is missing (the first lock of a request or a node):
 * the dir and our contender are made together, as kazoo's ensure_path and
 * create leave them, and the lock excludes others as any. */
Test(zk_lock, missing_dir_made_with_the_contender)
{
	const char *hosts;
	struct zk *a = testzk_connect(base, 0, NULL, NULL, &hosts), *b = second(hosts);
	struct zk_lock *la = zk_lock_new(a, "/requests-lock/100-0000000001", "launcher-a", 0);
	struct zk_lock *lb = zk_lock_new(b, "/requests-lock/100-0000000001", "launcher-b", 0);
	char **names, *data, path[256];
	int n, len;
	struct zk_stat st;

	cr_assert_eq(zk_lock_sync_acquire(la, 0), ZOK);
	cr_assert(zk_lock_is_held(la));
	cr_assert_eq(zk_sync_get(a, "/requests-lock/100-0000000001", &data, &len, &st), ZOK);
	cr_assert_eq(len, 0, "the dir is empty, as kazoo's ensure_path makes it");
	cr_assert_eq(st.ephemeral_owner, 0, "the dir is persistent");
	free(data);
	cr_assert_eq(zk_sync_children(a, "/requests-lock/100-0000000001", &n, &names), ZOK);
	cr_assert_eq(n, 1);
	cr_assert_str_eq(names[0], zk_lock_contender(la));
	cr_assert(strstr(names[0], "__lock__") != NULL, "a kazoo contender: %s", names[0]);
	snprintf(path, sizeof(path), "/requests-lock/100-0000000001/%s", names[0]);
	zk_strings_free(n, names);
	cr_assert_eq(zk_sync_get(a, path, &data, &len, &st), ZOK);
	cr_assert_str_eq(data, "launcher-a");
	cr_assert_eq(st.ephemeral_owner, zk_session_id(a), "the contender is ours, ephemeral");
	free(data);
	cr_assert_eq(zk_lock_sync_acquire(lb, 0), ZK_LOCK_BUSY);
	cr_assert_eq(zk_lock_sync_release(la), ZOK);
	cr_assert_eq(zk_lock_sync_acquire(lb, 0), ZOK, "taken in the dir that stayed");
	cr_assert_eq(nchildren(a, "/requests-lock/100-0000000001"), 1);
	zk_lock_free(la);
	zk_lock_free(lb);
	zk_free(b);
	zk_free(a);
}

/* ZK_LOCK_NEW_DIR is a hint: right (no dir) or wrong (the dir is there,
 * held or free), the lock behaves as any. */
Test(zk_lock, new_dir_hint_right_or_wrong)
{
	const char *hosts;
	struct zk *a = testzk_connect(base, 0, NULL, NULL, &hosts), *b = second(hosts);
	struct zk_lock *fresh =
	    zk_lock_new(a, "/nodes/0000000001/lock", "a", ZK_LOCK_NO_RESURRECT | ZK_LOCK_NEW_DIR);
	struct zk_lock *other =
	    zk_lock_new(b, "/nodes/0000000001/lock", "b", ZK_LOCK_NO_RESURRECT | ZK_LOCK_NEW_DIR);
	struct zk_lock *gone =
	    zk_lock_new(a, "/nodes/0000000009/lock", "a", ZK_LOCK_NO_RESURRECT | ZK_LOCK_NEW_DIR);
	struct zk_lock *deep = zk_lock_new(a, "/deep/er/lock", "a", ZK_LOCK_NEW_DIR);

	cr_assert_eq(zk_sync_create(a, "/nodes/0000000001", "{}", 2, 0, 1, NULL), ZOK);
	cr_assert_eq(zk_lock_sync_acquire(fresh, 0), ZOK);
	cr_assert_eq(nchildren(a, "/nodes/0000000001/lock"), 1);
	/* wrong: the dir is there and held */
	cr_assert_eq(zk_lock_sync_acquire(other, 0), ZK_LOCK_BUSY);
	cr_assert_eq(nchildren(a, "/nodes/0000000001/lock"), 1, "b's contender removed");
	/* wrong: the dir is there and free */
	cr_assert_eq(zk_lock_sync_release(fresh), ZOK);
	cr_assert_eq(zk_lock_sync_acquire(other, 0), ZOK);
	cr_assert_eq(nchildren(a, "/nodes/0000000001/lock"), 1);
	/* NO_RESURRECT still holds: a node that is gone is not made */
	cr_assert_eq(zk_lock_sync_acquire(gone, 0), ZNONODE);
	cr_assert_eq(zk_sync_exists(a, "/nodes/0000000009", NULL), ZNONODE);
	/* without it, the whole path is made, as kazoo */
	cr_assert_eq(zk_lock_sync_acquire(deep, 0), ZOK);
	cr_assert_eq(nchildren(a, "/deep/er/lock"), 1);
	zk_lock_free(fresh);
	zk_lock_free(other);
	zk_lock_free(gone);
	zk_lock_free(deep);
	zk_free(b);
	zk_free(a);
}

static int
lrec_done(void *arg)
{
	return ((struct lrec *)arg)->calls > 0;
}

/* zk_lock_acquire_with: extra ops ride in the multi that makes the lock
 * dir and our contender (a request locked and set `pending` at once), all
 * or nothing; refused, the lock is taken as usual and says so. */
static int
with_acquire(struct zk_lock *lock, const char *path, const char *data, int version)
{
	struct zk_multi_op op = {.type = ZK_MULTI_SET,
				 .path = path,
				 .data = data,
				 .len = (int)strlen(data),
				 .version = version};
	struct lrec r = {0};

	zk_lock_acquire_with(lock, 0, &op, 1, lrec_cb, &r);
	cr_assert(testzk_run_until(base, lrec_done, &r, 10), "acquire_with answered");
	cr_assert_eq(r.calls, 1);
	return r.rc;
}

Test(zk_lock, acquire_with_ops_all_or_nothing)
{
	const char *hosts;
	struct zk *a = testzk_connect(base, 0, NULL, NULL, &hosts), *b = second(hosts);
	struct zk_lock *l1 = zk_lock_new(a, "/requests-lock/r1", "a", ZK_LOCK_NEW_DIR);
	struct zk_lock *l2 = zk_lock_new(a, "/requests-lock/r2", "a", ZK_LOCK_NEW_DIR);
	struct zk_lock *l3 = zk_lock_new(a, "/requests-lock/r3", "a", ZK_LOCK_NEW_DIR);
	struct zk_lock *other = zk_lock_new(b, "/requests-lock/r3", "b", ZK_LOCK_NEW_DIR);
	const struct zk_multi_result *res;
	struct zk_stat st;
	char *data;
	int n, len;

	cr_assert_eq(zk_sync_create(a, "/requests/r1", "requested", 9, 0, 1, NULL), ZOK);
	cr_assert_eq(zk_sync_create(a, "/requests/r2", "requested", 9, 0, 1, NULL), ZOK);
	cr_assert_eq(zk_sync_create(a, "/requests/r3", "requested", 9, 0, 1, NULL), ZOK);
	cr_assert_eq(zk_sync_create(a, "/requests-lock", NULL, 0, 0, 1, NULL), ZOK);

	/* the usual case: dir new, version right: one transaction did all
	 * (here on a fresh tree: the dir's parent is made first) */
	cr_assert_eq(with_acquire(l1, "/requests/r1", "pending", 0), ZOK);
	cr_assert(zk_lock_is_held(l1));
	cr_assert_eq(zk_lock_applied(l1, &res, &n), 1);
	cr_assert_eq(n, 1);
	cr_assert_eq(res[0].version, 1);
	cr_assert_eq(zk_sync_get(a, "/requests/r1", &data, &len, &st), ZOK);
	cr_assert_str_eq(data, "pending");
	cr_assert_eq(st.mzxid, res[0].mzxid);
	free(data);
	cr_assert_eq(nchildren(a, "/requests-lock/r1"), 1);

	/* the request changed since it was read: the lock is taken, the
	 * write is not made */
	cr_assert_eq(with_acquire(l2, "/requests/r2", "pending", 7), ZOK);
	cr_assert(zk_lock_is_held(l2));
	cr_assert_eq(zk_lock_applied(l2, &res, &n), 0);
	cr_assert_null(res);
	cr_assert_eq(zk_sync_get(a, "/requests/r2", &data, &len, NULL), ZOK);
	cr_assert_str_eq(data, "requested");
	free(data);
	cr_assert_eq(nchildren(a, "/requests-lock/r2"), 1);

	/* another launcher holds it (the dir exists): busy, nothing written */
	cr_assert_eq(zk_lock_sync_acquire(other, 0), ZOK);
	cr_assert_eq(with_acquire(l3, "/requests/r3", "pending", 0), ZK_LOCK_BUSY);
	cr_assert_eq(zk_lock_applied(l3, NULL, NULL), 0);
	cr_assert_eq(zk_sync_get(a, "/requests/r3", &data, &len, NULL), ZOK);
	cr_assert_str_eq(data, "requested");
	free(data);
	cr_assert_eq(nchildren(a, "/requests-lock/r3"), 1, "only the holder's contender");
	/* free again, the dir known: taken as usual, the ops not sent */
	cr_assert_eq(zk_lock_sync_release(other), ZOK);
	cr_assert_eq(with_acquire(l3, "/requests/r3", "pending", 0), ZOK);
	cr_assert_eq(zk_lock_applied(l3, NULL, NULL), 0);
	cr_assert_eq(zk_sync_get(a, "/requests/r3", &data, &len, NULL), ZOK);
	cr_assert_str_eq(data, "requested");
	free(data);

	/* the request is gone: the lock alone, as usual */
	cr_assert_eq(zk_lock_sync_release(l1), ZOK);
	cr_assert_eq(zk_sync_delete(a, "/requests/r1", -1, 1), ZOK);
	cr_assert_eq(zk_sync_delete(a, "/requests-lock/r1", -1, 1), ZOK);
	cr_assert_eq(with_acquire(l1, "/requests/r1", "pending", 1), ZOK);
	cr_assert_eq(zk_lock_applied(l1, NULL, NULL), 0);
	cr_assert_eq(zk_sync_exists(a, "/requests/r1", NULL), ZNONODE);
	/* a plain acquire after one with ops: nothing of them is left */
	cr_assert_eq(zk_lock_sync_release(l1), ZOK);
	cr_assert_eq(zk_lock_sync_acquire(l1, 0), ZOK);
	cr_assert_eq(zk_lock_applied(l1, NULL, NULL), 0);

	zk_lock_free(l1);
	zk_lock_free(l2);
	zk_lock_free(l3);
	zk_lock_free(other);
	zk_free(b);
	zk_free(a);
}

/* Sequential creates among the extra ops (a request's INIT nodes made with
 * its accept, issue 25): the results name the znodes made, in the same
 * transaction (one zxid) as the set beside them; refused, none is made. */
Test(zk_lock, acquire_with_creates_named)
{
	const char *hosts;
	struct zk *a = testzk_connect(base, 0, NULL, NULL, &hosts), *b = second(hosts);
	struct zk_lock *l1 = zk_lock_new(a, "/requests-lock/c1", "a", ZK_LOCK_NEW_DIR);
	struct zk_lock *l2 = zk_lock_new(a, "/requests-lock/c2", "a", ZK_LOCK_NEW_DIR);
	struct zk_lock *other = zk_lock_new(b, "/requests-lock/c2", "b", ZK_LOCK_NEW_DIR);
	struct zk_multi_op ops[3] = {
	    {.type = ZK_MULTI_SET,
	     .path = "/requests/c1",
	     .data = "pending",
	     .len = 7,
	     .version = 0},
	    {.type = ZK_MULTI_CREATE,
	     .path = "/nodes/",
	     .data = "n1",
	     .len = 2,
	     .flags = ZOO_SEQUENCE},
	    {.type = ZK_MULTI_CREATE,
	     .path = "/nodes/",
	     .data = "n2",
	     .len = 2,
	     .flags = ZOO_SEQUENCE},
	};
	const struct zk_multi_result *res;
	struct zk_stat st;
	struct lrec r = {0};
	char *data;
	int n, len, count;
	char **names;

	cr_assert_eq(zk_sync_create(a, "/requests/c1", "requested", 9, 0, 1, NULL), ZOK);
	cr_assert_eq(zk_sync_create(a, "/requests/c2", "requested", 9, 0, 1, NULL), ZOK);
	cr_assert_eq(zk_sync_create(a, "/requests-lock", NULL, 0, 0, 1, NULL), ZOK);
	cr_assert_eq(zk_sync_create(a, "/nodes", NULL, 0, 0, 1, NULL), ZOK);

	zk_lock_acquire_with(l1, 0, ops, 3, lrec_cb, &r);
	cr_assert(testzk_run_until(base, lrec_done, &r, 10), "acquire_with answered");
	cr_assert_eq(r.rc, ZOK);
	cr_assert_eq(zk_lock_applied(l1, &res, &n), 1);
	cr_assert_eq(n, 3);
	cr_assert_null(res[0].path);
	cr_assert_not_null(res[1].path);
	cr_assert_not_null(res[2].path);
	cr_assert_eq(strncmp(res[1].path, "/nodes/", 7), 0, "%s", res[1].path);
	cr_assert_neq(strcmp(res[1].path, res[2].path), 0);
	cr_assert_eq(zk_sync_get(a, res[1].path, &data, &len, &st), ZOK);
	cr_assert_str_eq(data, "n1");
	free(data);
	/* one transaction: the creates' zxid is the set's */
	cr_assert_eq(st.czxid, res[0].mzxid);
	cr_assert_eq(zk_sync_get(a, res[2].path, &data, &len, NULL), ZOK);
	cr_assert_str_eq(data, "n2");
	free(data);

	/* another launcher holds the lock: the multi is refused, nothing of
	 * it is made (no node) */
	cr_assert_eq(zk_lock_sync_acquire(other, 0), ZOK);
	ops[0].path = "/requests/c2";
	memset(&r, 0, sizeof(r));
	zk_lock_acquire_with(l2, 0, ops, 3, lrec_cb, &r);
	cr_assert(testzk_run_until(base, lrec_done, &r, 10), "acquire_with answered");
	cr_assert_eq(r.rc, ZK_LOCK_BUSY);
	cr_assert_eq(zk_lock_applied(l2, NULL, NULL), 0);
	cr_assert_eq(zk_sync_children(a, "/nodes", &count, &names), ZOK);
	cr_assert_eq(count, 2, "only the first multi's nodes");
	zk_strings_free(count, names);

	zk_lock_free(l1);
	zk_lock_free(l2);
	zk_lock_free(other);
	zk_free(b);
	zk_free(a);
}

/* A node just made: its lock (NO_RESURRECT) and `building` at version 0
 * in one transaction; a node that is gone is neither locked nor made. */
Test(zk_lock, acquire_with_ops_no_resurrect)
{
	const char *hosts;
	struct zk *a = testzk_connect(base, 0, NULL, NULL, &hosts);
	struct zk_lock *fresh =
	    zk_lock_new(a, "/nodes/0000000001/lock", "a", ZK_LOCK_NO_RESURRECT | ZK_LOCK_NEW_DIR);
	struct zk_lock *gone =
	    zk_lock_new(a, "/nodes/0000000002/lock", "a", ZK_LOCK_NO_RESURRECT | ZK_LOCK_NEW_DIR);
	const struct zk_multi_result *res;
	char *data;
	int n, len;

	cr_assert_eq(zk_sync_create(a, "/nodes/0000000001", "init", 4, 0, 1, NULL), ZOK);
	cr_assert_eq(with_acquire(fresh, "/nodes/0000000001", "building", 0), ZOK);
	cr_assert_eq(zk_lock_applied(fresh, &res, &n), 1);
	cr_assert_eq(n, 1);
	cr_assert_eq(res[0].version, 1);
	cr_assert_eq(zk_sync_get(a, "/nodes/0000000001", &data, &len, NULL), ZOK);
	cr_assert_str_eq(data, "building");
	free(data);
	cr_assert_eq(with_acquire(gone, "/nodes/0000000002", "building", 0), ZNONODE);
	cr_assert_eq(zk_lock_applied(gone, NULL, NULL), 0);
	cr_assert_eq(zk_sync_exists(a, "/nodes/0000000002", NULL), ZNONODE);
	zk_lock_free(fresh);
	zk_lock_free(gone);
	zk_free(a);
}

struct sess {
	int expired, connected;
	struct zk_lock *lock;
	int held_at_expiry;
};

static void
sess_cb(struct zk *zk, enum zk_event ev, void *arg)
{
	struct sess *s = arg;

	if (ev == ZK_EV_EXPIRED) {
		s->expired++;
		s->held_at_expiry = zk_lock_is_held(s->lock);
	}
	if (ev == ZK_EV_CONNECTED)
		s->connected++;
}

static int
back(void *arg)
{
	struct sess *s = arg;

	return s->expired && s->connected > 1;
}

Test(zk_lock, lost_on_expiry)
{
	struct sess s = {0};
	const char *hosts;
	struct zk *a = testzk_connect(base, 0, sess_cb, &s, &hosts), *b = second(hosts);
	struct zk_lock *lb = zk_lock_new(b, "/exp", NULL, 0);

	s.lock = zk_lock_new(a, "/exp", NULL, 0);
	cr_assert_eq(zk_lock_sync_acquire(s.lock, 0), ZOK);
	cr_assert_eq(zk_lock_sync_acquire(lb, 0), ZK_LOCK_BUSY);
	cr_assert_eq(testzk_expire(a), 0);
	cr_assert(testzk_run_until(base, back, &s, 30));
	cr_assert_eq(s.held_at_expiry, 0, "not held any more when EXPIRED is reported");
	cr_assert_not(zk_lock_is_held(s.lock));
	cr_assert_eq(zk_lock_sync_acquire(lb, 0), ZOK, "the other session gets it");
	cr_assert_eq(zk_lock_sync_acquire(s.lock, 1), ZK_LOCK_TIMEOUT);
	cr_assert_eq(zk_lock_sync_release(lb), ZOK);
	cr_assert_eq(zk_lock_sync_acquire(s.lock, 0), ZOK, "usable on the new session");
	zk_lock_free(s.lock);
	zk_lock_free(lb);
	zk_free(b);
	zk_free(a);
}

/* A waiter whose session expires starts over on the new session. */
Test(zk_lock, waiting_survives_expiry)
{
	struct sess s = {0};
	const char *hosts;
	struct zk *a = testzk_connect(base, 0, sess_cb, &s, &hosts), *b = second(hosts);
	struct zk_lock *lb = zk_lock_new(b, "/w", NULL, 0);
	struct lrec r = {0};

	s.lock = zk_lock_new(a, "/w", NULL, 0);
	cr_assert_eq(zk_lock_sync_acquire(lb, 0), ZOK);
	zk_lock_acquire(s.lock, 60, lrec_cb, &r);
	testzk_run_for(base, 0.3);
	cr_assert_eq(testzk_expire(a), 0);
	cr_assert(testzk_run_until(base, back, &s, 30));
	testzk_run_for(base, 0.5);
	cr_assert_eq(r.calls, 0);
	cr_assert_eq(nchildren(b, "/w"), 2, "a fresh contender on the new session");
	cr_assert_eq(zk_lock_sync_release(lb), ZOK);
	cr_assert(testzk_run_flag(base, &r.calls, 10));
	cr_assert_eq(r.rc, ZOK);
	zk_lock_free(s.lock);
	zk_lock_free(lb);
	zk_free(b);
	zk_free(a);
}

Test(zk_lock, release_or_free_while_waiting)
{
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, NULL);
	struct zk_lock *h = zk_lock_new(zk, "/rw", NULL, 0);
	struct zk_lock *w1 = zk_lock_new(zk, "/rw", NULL, 0), *w2 = zk_lock_new(zk, "/rw", NULL, 0);
	struct lrec r1 = {0}, r2 = {0};

	cr_assert_eq(zk_lock_sync_acquire(h, 0), ZOK);
	zk_lock_acquire(w1, -1, lrec_cb, &r1);
	zk_lock_acquire(w2, -1, lrec_cb, &r2);
	testzk_run_for(base, 0.3);
	cr_assert_eq(nchildren(zk, "/rw"), 3);
	cr_assert_eq(zk_lock_sync_release(w1), ZOK); /* cancels its acquisition */
	zk_lock_free(w2);
	testzk_run_for(base, 0.3);
	cr_assert_eq(nchildren(zk, "/rw"), 1);
	cr_assert_eq(r1.calls, 0);
	cr_assert_eq(r2.calls, 0);
	cr_assert(zk_lock_is_held(h));
	zk_lock_free(w1);
	zk_lock_free(h);
	zk_free(zk);
}

Test(zk_lock, contenders_of_a_missing_dir)
{
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, NULL);
	char **ids;
	int n;

	cr_assert_eq(zk_lock_sync_contenders(zk, "/none", &n, &ids), ZOK);
	cr_assert_eq(n, 0);
	cr_assert_null(ids);
	cr_assert_eq(zk_sync_exists(zk, "/none", NULL), ZNONODE);
	zk_free(zk);
}

/* A waiter cut off from the server while the holder lets go gets the lock
 * once it is back on the same session. */
Test(zk_lock, waiting_survives_a_lost_connection)
{
	const char *path;
	const char *direct = testzk_chroot(0, &path);
	struct testzk_proxy *px = testzk_proxy_start(testzk_hosts(0));
	struct zk *a = second(direct), *b;
	struct zk_lock *la = zk_lock_new(a, "/cut", NULL, 0), *lb;
	struct lrec r = {0};

	b = second(testzk_proxy_hosts(px, path));
	lb = zk_lock_new(b, "/cut", NULL, 0);
	cr_assert_eq(zk_lock_sync_acquire(la, 0), ZOK);
	zk_lock_acquire(lb, 60, lrec_cb, &r);
	testzk_run_for(base, 0.3);
	testzk_proxy_refuse(px, 1);
	testzk_proxy_drop(px);
	testzk_run_for(base, 0.5);
	cr_assert_not(zk_is_connected(b));
	cr_assert_eq(zk_lock_sync_release(la), ZOK);
	testzk_run_for(base, 0.5);
	cr_assert_eq(r.calls, 0);
	testzk_proxy_refuse(px, 0);
	cr_assert(testzk_run_flag(base, &r.calls, 20));
	cr_assert_eq(r.rc, ZOK);
	cr_assert(zk_is_connected(b));
	cr_assert_eq(zk_lock_sync_acquire(la, 0), ZK_LOCK_BUSY);
	zk_lock_free(lb);
	zk_lock_free(la);
	zk_free(b);
	zk_free(a);
	testzk_proxy_stop(px);
}

/* The connection drops after our contender was created but before we heard
 * its name: we find it again by its uuid prefix (kazoo's trick) instead of
 * creating a second one that would queue behind the first, ours. */
Test(zk_lock, contender_created_unheard_is_found_again)
{
	const char *path;
	const char *direct = testzk_chroot(0, &path);
	struct testzk_proxy *px = testzk_proxy_start(testzk_hosts(0));
	struct zk *d = second(direct), *b;
	struct zk_lock *l;
	struct lrec r = {0};

	cr_assert_eq(zk_sync_create(d, "/unheard", NULL, 0, 0, 0, NULL), ZOK);
	b = second(testzk_proxy_hosts(px, path));
	l = zk_lock_new(b, "/unheard", "me", 0);
	testzk_proxy_hold(px, 1);
	testzk_run_for(base, 0.1);
	zk_lock_acquire(l, 0, lrec_cb, &r);
	testzk_run_for(base, 0.3); /* the create reaches the server; no answer */
	cr_assert_eq(nchildren(d, "/unheard"), 1);
	testzk_proxy_refuse(px, 1);
	testzk_proxy_drop(px);
	testzk_run_for(base, 0.3);
	testzk_proxy_hold(px, 0);
	testzk_proxy_refuse(px, 0);
	cr_assert(testzk_run_flag(base, &r.calls, 20));
	cr_assert_eq(r.rc, ZOK);
	cr_assert_eq(nchildren(d, "/unheard"), 1, "no second contender");
	cr_assert_eq(zk_lock_sync_release(l), ZOK);
	cr_assert_eq(nchildren(d, "/unheard"), 0);
	zk_lock_free(l);
	zk_free(b);
	zk_free(d);
	testzk_proxy_stop(px);
}

/* A TLS session on hosts (the proxy, for the tests below). */
static struct zk *
second_tls(const char *hosts)
{
	/* a TLS write to a connection the proxy closed raises SIGPIPE (the
	 * daemon ignores it) */
	signal(SIGPIPE, SIG_IGN);
	return testzk_session(base, hosts, 1, NULL, NULL);
}

static int
children_are(void *arg)
{
	void **a = arg;
	char **names;
	int n, rc = zk_sync_children(a[0], a[1], &n, &names);

	zk_strings_free(n, names);
	return rc == ZOK && n == *(int *)a[2];
}

/* While the server is away behind a proxy that takes the TCP connection and
 * closes it, every TLS handshake fails and the C client fails the queued
 * requests with ZSSLCONNECTIONERROR: an acquisition started then is not
 * given up (it used to end with that error, its contender forgotten), and
 * completes once the server is back. */
Test(zk_lock, acquisition_rides_out_failing_tls_handshakes)
{
	const char *path;
	const char *direct = testzk_chroot(1, &path);
	struct testzk_proxy *px = testzk_proxy_start(testzk_hosts(1));
	struct zk *d = second_tls(direct), *b;
	struct zk_lock *l;
	struct lrec r = {0};
	int one = 1;
	void *args[3] = {NULL, "/tlscut", &one};

	b = second_tls(testzk_proxy_hosts(px, path));
	l = zk_lock_new(b, "/tlscut", "me", 0);
	testzk_proxy_refuse(px, 1);
	testzk_proxy_drop(px);
	testzk_run_for(base, 0.3);
	cr_assert_not(zk_is_connected(b));
	zk_lock_acquire(l, 30, lrec_cb, &r);
	testzk_run_for(base, 1.5); /* handshakes fail meanwhile */
	cr_assert_eq(r.calls, 0, "given up: %s", zk_strerror(r.rc));
	testzk_proxy_refuse(px, 0);
	cr_assert(testzk_run_flag(base, &r.calls, 20));
	cr_assert_eq(r.rc, ZOK, "%s", zk_strerror(r.rc));
	args[0] = d;
	cr_assert(testzk_run_until(base, children_are, args, 5), "one contender, ours");
	cr_assert_eq(zk_lock_sync_release(l), ZOK);
	zk_lock_free(l);
	zk_free(b);
	zk_free(d);
	testzk_proxy_stop(px);
}

/* A held lock freed while the connection is down (worker/handler.c's
 * hn_release): its contender is deleted once the connection is back, not
 * left locked by our live session forever. */
Test(zk_lock, free_while_disconnected_deletes_the_contender_later)
{
	const char *path;
	const char *direct = testzk_chroot(1, &path);
	struct testzk_proxy *px = testzk_proxy_start(testzk_hosts(1));
	struct zk *d = second_tls(direct), *b;
	struct zk_lock *l, *other;
	int zero = 0;
	void *args[3] = {NULL, "/freecut", &zero};

	b = second_tls(testzk_proxy_hosts(px, path));
	l = zk_lock_new(b, "/freecut", "me", 0);
	cr_assert_eq(zk_lock_sync_acquire(l, 0), ZOK);
	testzk_proxy_refuse(px, 1);
	testzk_proxy_drop(px);
	testzk_run_for(base, 0.3);
	zk_lock_free(l);
	testzk_run_for(base, 1.0);
	cr_assert_eq(nchildren(d, "/freecut"), 1, "still ours while we are away");
	testzk_proxy_refuse(px, 0);
	args[0] = d;
	cr_assert(testzk_run_until(base, children_are, args, 10), "contender deleted");
	other = zk_lock_new(d, "/freecut", NULL, 0);
	cr_assert_eq(zk_lock_sync_acquire(other, 0), ZOK);
	zk_lock_free(other);
	zk_free(b);
	zk_free(d);
	testzk_proxy_stop(px);
}

/* ---- writes under a lock (zk_set_under...; issue 27) ---------------------- */

struct under {
	struct zk *zk;
	struct zk_lock *lock;
	int calls, rc;
	/* what the callback submits (as worker/handler.c did: a failed node
	 * store went on to fulfil the request) */
	int nested_calls, nested_rc;
	int plain_calls, plain_rc;
};

static void
nested_done(int rc, const struct zk_stat *st, void *arg)
{
	struct under *u = arg;

	u->nested_calls++;
	u->nested_rc = rc;
}

static void
plain_done(int rc, const struct zk_stat *st, void *arg)
{
	struct under *u = arg;

	u->plain_calls++;
	u->plain_rc = rc;
}

static void
under_done(int rc, const struct zk_stat *st, void *arg)
{
	struct under *u = arg;

	u->calls++;
	u->rc = rc;
	if (u->zk == NULL)
		return;
	zk_set_under(u->zk, &u->lock, 1, "/u", "3", 1, -1, nested_done, u);
	zk_set(u->zk, "/plain", "p", 1, -1, plain_done, u);
}

static int
data_is(struct zk *zk, const char *path, const char *want)
{
	char *data = NULL;
	int len = 0, ok;

	cr_assert_eq(zk_sync_get(zk, path, &data, &len, NULL), ZOK);
	ok = len == (int)strlen(want) && memcmp(data, want, (size_t)len) == 0;
	free(data);
	return ok;
}

static int
under_back(void *arg)
{
	struct under *u = arg;

	return u->nested_calls > 0 && u->plain_calls > 0;
}

/*
 * A write under a lock is sent only while the lock is held in the session
 * it is sent in: one parked by a lost connection is not sent again once
 * that session has expired, nor is one submitted (from the failure's own
 * callback) before the loop hears of the expiry; writes that depend on no
 * lock still are. A lock taken again in the new session is good again.
 */
Test(zk_lock, writes_under_a_lock_end_with_its_session)
{
	const char *path;
	const char *direct = testzk_chroot(0, &path);
	struct testzk_proxy *px = testzk_proxy_start(testzk_hosts(0));
	struct sess s = {0};
	struct zk *d = second(direct), *a;
	struct zk_lock *idle;
	struct under u = {0}, first = {0}, never = {0};

	cr_assert_eq(zk_sync_create(d, "/u", "0", 1, 0, 0, NULL), ZOK);
	cr_assert_eq(zk_sync_create(d, "/plain", "0", 1, 0, 0, NULL), ZOK);
	a = testzk_session(base, testzk_proxy_hosts(px, path), 0, sess_cb, &s);
	zk_set_retry(a, 1);
	s.lock = zk_lock_new(a, "/u-lock", NULL, 0);
	idle = zk_lock_new(a, "/u-lock", NULL, 0);
	cr_assert_eq(zk_lock_sync_acquire(s.lock, 0), ZOK);

	/* held: written */
	zk_set_under(a, &s.lock, 1, "/u", "1", 1, -1, under_done, &first);
	cr_assert(testzk_run_flag(base, &first.calls, 10));
	cr_assert_eq(first.rc, ZOK, "%s", zk_strerror(first.rc));
	cr_assert(data_is(d, "/u", "1"));
	/* a lock not held: nothing sent */
	zk_set_under(a, &idle, 1, "/u", "x", 1, -1, under_done, &never);
	cr_assert(testzk_run_flag(base, &never.calls, 10));
	cr_assert_eq(never.rc, ZK_LOCK_LOST, "%s", zk_strerror(never.rc));

	/* cut off: the write waits for the connection */
	testzk_proxy_refuse(px, 1);
	testzk_proxy_drop(px);
	testzk_run_for(base, 0.3);
	u.zk = a;
	u.lock = s.lock;
	zk_set_under(a, &s.lock, 1, "/u", "2", 1, -1, under_done, &u);
	testzk_run_for(base, 0.5);
	cr_assert_eq(u.calls, 0, "parked while disconnected");
	/* the session ends while we are away; then the link is back */
	cr_assert_eq(testzk_expire(a), 0);
	testzk_proxy_refuse(px, 0);
	cr_assert(testzk_run_until(base, back, &s, 30));
	cr_assert(testzk_run_until(base, under_back, &u, 20));
	cr_assert_eq(u.calls, 1);
	cr_assert_eq(u.rc, ZK_LOCK_LOST, "%s", zk_strerror(u.rc));
	cr_assert_eq(u.nested_rc, ZK_LOCK_LOST, "%s", zk_strerror(u.nested_rc));
	cr_assert_eq(u.plain_rc, ZOK, "a write under no lock goes on: %s", zk_strerror(u.plain_rc));
	cr_assert(data_is(d, "/plain", "p"));
	testzk_run_for(base, 0.5);
	cr_assert(data_is(d, "/u", "1"), "nothing under the lost lock reached the server");

	/* taken again in the new session: writes go again */
	cr_assert_eq(zk_lock_sync_acquire(s.lock, 0), ZOK);
	memset(&first, 0, sizeof(first));
	zk_set_under(a, &s.lock, 1, "/u", "4", 1, -1, under_done, &first);
	cr_assert(testzk_run_flag(base, &first.calls, 10));
	cr_assert_eq(first.rc, ZOK);
	cr_assert(data_is(d, "/u", "4"));
	zk_lock_free(s.lock);
	zk_lock_free(idle);
	zk_free(a);
	zk_free(d);
	testzk_proxy_stop(px);
}

/* ZK_LOCK_PERSISTENT (kazoo's Lock(ephemeral=False), upstream's metastatic
 * backing-node lock): the contender is persistent, carries the identifier,
 * and, disowned, outlives the lock object and the session; the lock stays
 * held for everyone else until the contender is deleted. */
Test(zk_lock, persistent_contender_outlives_the_session)
{
	const char *hosts;
	struct zk *a = testzk_connect(base, 0, NULL, NULL, &hosts), *b = second(hosts);
	struct zk_lock *la = zk_lock_new(a, "/pers", "NodePool:metastatic:m", ZK_LOCK_PERSISTENT);
	struct zk_lock *lb = zk_lock_new(b, "/pers", NULL, 0);
	char **names, **ids, path[256], *data;
	struct zk_stat st;
	int n, len;

	cr_assert_eq(zk_lock_sync_acquire(la, 5), ZOK);
	cr_assert_eq(zk_sync_children(a, "/pers", &n, &names), ZOK);
	cr_assert_eq(n, 1);
	snprintf(path, sizeof(path), "/pers/%s", names[0]);
	zk_strings_free(n, names);
	cr_assert_eq(zk_sync_get(a, path, &data, &len, &st), ZOK);
	cr_assert_str_eq(data, "NodePool:metastatic:m");
	cr_assert_eq(st.ephemeral_owner, 0, "persistent");
	free(data);
	zk_lock_disown(la);
	zk_lock_free(la);
	zk_free(a);
	/* the session is gone: the lock is still held */
	cr_assert_eq(zk_lock_sync_contenders(b, "/pers", &n, &ids), ZOK);
	cr_assert_eq(n, 1);
	cr_assert_str_eq(ids[0], "NodePool:metastatic:m");
	zk_strings_free(n, ids);
	cr_assert_eq(zk_lock_sync_acquire(lb, 0), ZK_LOCK_BUSY);
	/* deleting the contender (forceUnlockNode) releases it */
	cr_assert_eq(zk_sync_delete(b, path, -1, 0), ZOK);
	cr_assert_eq(zk_lock_sync_acquire(lb, 0), ZOK);
	zk_lock_free(lb);
	zk_free(b);
}
