/* Watch-driven caches (lib/zk/zk_cache.c) against a real ZooKeeper. */
#include <criterion/criterion.h>
#include <event2/event.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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

TestSuite(zk_cache, .init = setup, .fini = teardown, .timeout = 120);

struct ev {
	enum zk_cache_event type;
	char name[64];
	char data[64];
	int len;
	int locked;
	int version;
};

struct rec {
	struct ev *ev;
	int n, cap;
	int synced;
	int added, updated, removed;
	struct zk_cache *free_me_on; /* free the cache from inside its callback */
};

static void
rec_cb(struct zk_cache *cache, enum zk_cache_event type, const struct zk_cache_entry *e, void *arg)
{
	struct rec *r = arg;
	struct ev *v;

	if (r->n == r->cap) {
		r->cap = r->cap ? r->cap * 2 : 64;
		r->ev = realloc(r->ev, (size_t)r->cap * sizeof(*r->ev));
		cr_assert_not_null(r->ev);
	}
	v = &r->ev[r->n++];
	memset(v, 0, sizeof(*v));
	v->type = type;
	if (e != NULL) {
		snprintf(v->name, sizeof(v->name), "%s", e->name);
		if (e->data != NULL)
			snprintf(v->data, sizeof(v->data), "%s", e->data);
		v->len = e->len;
		v->locked = e->locked;
		v->version = e->stat.version;
	} else {
		cr_assert_eq(type, ZK_CACHE_SYNCED);
	}
	switch (type) {
	case ZK_CACHE_ADDED:
		r->added++;
		break;
	case ZK_CACHE_UPDATED:
		r->updated++;
		break;
	case ZK_CACHE_REMOVED:
		r->removed++;
		break;
	case ZK_CACHE_SYNCED:
		r->synced++;
		break;
	}
	if (r->free_me_on == cache && type == ZK_CACHE_ADDED) {
		zk_cache_free(cache);
		r->free_me_on = NULL;
	}
}

static void
rec_reset(struct rec *r)
{
	free(r->ev);
	memset(r, 0, sizeof(*r));
}

static const struct ev *
last_of(const struct rec *r, enum zk_cache_event type, const char *name)
{
	int i;

	for (i = r->n - 1; i >= 0; i--) {
		if (r->ev[i].type == type && (name == NULL || strcmp(r->ev[i].name, name) == 0))
			return &r->ev[i];
	}
	return NULL;
}

struct want {
	const struct rec *r;
	enum zk_cache_event type;
	const char *name;
	const char *data;
	int locked; /* -1: any */
	int from;   /* only events recorded from this index on */
};

static int
seen(void *arg)
{
	const struct want *w = arg;
	int i;

	for (i = w->from; i < w->r->n; i++) {
		const struct ev *v = &w->r->ev[i];

		if (v->type == w->type && (w->name == NULL || strcmp(v->name, w->name) == 0) &&
		    (w->data == NULL || strcmp(v->data, w->data) == 0) &&
		    (w->locked < 0 || v->locked == w->locked))
			return 1;
	}
	return 0;
}

static void
expect(const struct rec *r, enum zk_cache_event type, const char *name, const char *data,
       int locked)
{
	struct want w = {r, type, name, data, locked, 0};

	cr_assert(testzk_run_until(base, seen, &w, 15), "no event %d for %s (data %s, locked %d)",
		  type, name ? name : "-", data ? data : "-", locked);
}

/* As expect, but only an event recorded at index from or later. */
static void
expect_from(const struct rec *r, int from, enum zk_cache_event type, const char *name, int locked)
{
	struct want w = {r, type, name, NULL, locked, from};

	cr_assert(testzk_run_until(base, seen, &w, 15), "no event %d for %s (locked %d) after %d",
		  type, name ? name : "-", locked, from);
}

static int
count_is(void *arg)
{
	struct zk_cache *c = ((void **)arg)[0];
	int want = *(int *)((void **)arg)[1];

	return zk_cache_count(c) == want;
}

static void
expect_count(struct zk_cache *c, int n)
{
	void *args[2] = {c, &n};

	cr_assert(testzk_run_until(base, count_is, args, 30), "count %d, want %d",
		  zk_cache_count(c), n);
}

Test(zk_cache, children_come_and_go)
{
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, NULL);
	struct rec r = {0};
	struct zk_cache *c = zk_cache_new(zk, "/kids", 0, rec_cb, &r);
	const struct zk_cache_entry *const *arr;
	int n;

	cr_assert_not_null(c);
	cr_assert(testzk_run_flag(base, &r.synced, 10));
	cr_assert(zk_cache_synced(c));
	cr_assert_eq(zk_cache_count(c), 0);
	cr_assert_eq(zk_sync_exists(zk, "/kids", NULL), ZOK, "the cache made its path");

	cr_assert_eq(zk_sync_create(zk, "/kids/b", "1", 1, 0, 0, NULL), ZOK);
	cr_assert_eq(zk_sync_create(zk, "/kids/c", NULL, 0, 0, 0, NULL), ZOK);
	cr_assert_eq(zk_sync_create(zk, "/kids/a", NULL, 0, 0, 0, NULL), ZOK);
	expect_count(c, 3);
	n = zk_cache_entries(c, &arr);
	cr_assert_eq(n, 3);
	cr_assert_str_eq(arr[0]->name, "a");
	cr_assert_str_eq(arr[1]->name, "b");
	cr_assert_str_eq(arr[2]->name, "c");
	cr_assert_null(arr[1]->data, "no data without ZK_CACHE_DATA");
	cr_assert_not_null(zk_cache_get(c, "b"));
	cr_assert_null(zk_cache_get(c, "z"));

	cr_assert_eq(zk_sync_delete(zk, "/kids/b", -1, 0), ZOK);
	expect(&r, ZK_CACHE_REMOVED, "b", NULL, -1);
	cr_assert_eq(zk_cache_count(c), 2);
	cr_assert_null(zk_cache_get(c, "b"));
	n = zk_cache_entries(c, &arr);
	cr_assert_eq(n, 2);
	cr_assert_str_eq(arr[0]->name, "a");
	cr_assert_str_eq(arr[1]->name, "c");
	cr_assert_eq(r.added, 3);
	cr_assert_eq(r.removed, 1);
	cr_assert_eq(r.updated, 0);
	cr_assert_eq(r.synced, 1);
	zk_cache_free(c);
	rec_reset(&r);
	zk_free(zk);
}

Test(zk_cache, data_added_updated_removed)
{
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, NULL);
	struct rec r = {0};
	struct zk_cache *c;
	const struct zk_cache_entry *e;
	int i;

	cr_assert_eq(zk_sync_create(zk, "/d/one", "first", 5, 0, 1, NULL), ZOK);
	cr_assert_eq(zk_sync_create(zk, "/d/two", NULL, 0, 0, 1, NULL), ZOK);
	c = zk_cache_new(zk, "/d", ZK_CACHE_DATA, rec_cb, &r);
	cr_assert(testzk_run_flag(base, &r.synced, 10));
	/* the initial entries are announced, with their data, before SYNCED */
	cr_assert_eq(r.n, 3);
	cr_assert_eq(r.ev[2].type, ZK_CACHE_SYNCED);
	cr_assert_str_eq(last_of(&r, ZK_CACHE_ADDED, "one")->data, "first");
	e = zk_cache_get(c, "one");
	cr_assert_str_eq(e->data, "first");
	cr_assert_eq(e->len, 5);
	cr_assert_eq(e->stat.version, 0);
	e = zk_cache_get(c, "two");
	cr_assert_null(e->data, "empty data is NULL");
	cr_assert_eq(e->len, 0);

	cr_assert_eq(zk_sync_set(zk, "/d/one", "second", 6, -1, NULL), ZOK);
	expect(&r, ZK_CACHE_UPDATED, "one", "second", -1);
	cr_assert_eq(last_of(&r, ZK_CACHE_UPDATED, "one")->version, 1);
	cr_assert_str_eq(zk_cache_get(c, "one")->data, "second");

	cr_assert_eq(zk_sync_create(zk, "/d/three", "3", 1, 0, 0, NULL), ZOK);
	expect(&r, ZK_CACHE_ADDED, "three", "3", -1);

	cr_assert_eq(zk_sync_delete(zk, "/d/one", -1, 0), ZOK);
	expect(&r, ZK_CACHE_REMOVED, "one", "second", -1); /* still valid in the call */
	cr_assert_null(zk_cache_get(c, "one"));

	/* many changes in a row: the watch is re-armed each time and the cache
	 * ends on the last value */
	for (i = 0; i < 200; i++) {
		char v[16];

		snprintf(v, sizeof(v), "v%d", i);
		cr_assert_eq(zk_sync_set(zk, "/d/two", v, (int)strlen(v), -1, NULL), ZOK);
		if (i % 50 == 0)
			testzk_run_for(base, 0.05);
	}
	expect(&r, ZK_CACHE_UPDATED, "two", "v199", -1);
	cr_assert_str_eq(zk_cache_get(c, "two")->data, "v199");
	cr_assert_eq(zk_cache_get(c, "two")->stat.version, 200);
	cr_assert_eq(r.added, 3);
	cr_assert_eq(r.removed, 1);
	cr_assert_eq(r.synced, 1);
	zk_cache_free(c);
	rec_reset(&r);
	zk_free(zk);
}

/* Owners are kept beside the entries (issue 13: a node's entry has no room
 * for one), and read as the stat said. */
Test(zk_cache, ephemeral_owners)
{
	const char *hosts;
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, &hosts), *other;
	struct rec r = {0};
	struct zk_cache *c;
	char name[16];
	int i;

	other = testzk_session(base, hosts, 0, NULL, NULL); /* a second session on the chroot */

	cr_assert_eq(zk_sync_create(zk, "/e/kept", "k", 1, 0, 1, NULL), ZOK);
	cr_assert_eq(zk_sync_create(zk, "/e/mine", "m", 1, ZOO_EPHEMERAL, 1, NULL), ZOK);
	cr_assert_eq(zk_sync_create(other, "/e/theirs", "t", 1, ZOO_EPHEMERAL, 1, NULL), ZOK);
	for (i = 0; i < 20; i++) { /* more than the table's first size */
		snprintf(name, sizeof(name), "m%02d", i);
		char path[32];
		snprintf(path, sizeof(path), "/e/%s", name);
		cr_assert_eq(zk_sync_create(zk, path, "x", 1, ZOO_EPHEMERAL, 1, NULL), ZOK);
	}
	c = zk_cache_new(zk, "/e", ZK_CACHE_DATA, rec_cb, &r);
	cr_assert(testzk_run_flag(base, &r.synced, 10));
	cr_assert_eq(zk_cache_ephemeral_owner(c, zk_cache_get(c, "kept")), 0);
	cr_assert_eq(zk_cache_ephemeral_owner(c, zk_cache_get(c, "mine")), zk_session_id(zk));
	cr_assert_eq(zk_cache_ephemeral_owner(c, zk_cache_get(c, "theirs")), zk_session_id(other));
	cr_assert_neq(zk_session_id(zk), zk_session_id(other));
	for (i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "m%02d", i);
		cr_assert_eq(zk_cache_ephemeral_owner(c, zk_cache_get(c, name)), zk_session_id(zk));
	}
	/* a change keeps the owner; the other session's end removes its child */
	cr_assert_eq(zk_sync_set(zk, "/e/mine", "m2", 2, -1, NULL), ZOK);
	expect(&r, ZK_CACHE_UPDATED, "mine", "m2", -1);
	cr_assert_eq(zk_cache_ephemeral_owner(c, zk_cache_get(c, "mine")), zk_session_id(zk));
	zk_free(other);
	expect(&r, ZK_CACHE_REMOVED, "theirs", "t", -1);
	cr_assert_null(zk_cache_get(c, "theirs"));
	for (i = 0; i < 20; i += 2) {
		char path[32];
		snprintf(path, sizeof(path), "/e/m%02d", i);
		cr_assert_eq(zk_sync_delete(zk, path, -1, 0), ZOK);
	}
	expect(&r, ZK_CACHE_REMOVED, "m18", "x", -1);
	for (i = 1; i < 20; i += 2) {
		snprintf(name, sizeof(name), "m%02d", i);
		cr_assert_eq(zk_cache_ephemeral_owner(c, zk_cache_get(c, name)), zk_session_id(zk));
	}
	cr_assert_eq(zk_cache_ephemeral_owner(c, zk_cache_get(c, "kept")), 0);
	zk_cache_free(c);
	rec_reset(&r);
	zk_free(zk);
}

Test(zk_cache, lock_contenders_counted)
{
	const char *hosts;
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, &hosts);
	struct rec r = {0};
	struct zk_cache *c;
	struct zk_lock *l1, *l2;
	size_t reads;
	int mark;

	cr_assert_eq(zk_sync_create(zk, "/n/0000000001", "{}", 2, 0, 1, NULL), ZOK);
	cr_assert_eq(zk_sync_create(zk, "/n/0000000002", "{}", 2, 0, 1, NULL), ZOK);
	l1 = zk_lock_new(zk, "/n/0000000002/lock", NULL, 0);
	cr_assert_eq(zk_lock_sync_acquire(l1, 0), ZOK);
	c = zk_cache_new(zk, "/n", ZK_CACHE_DATA | ZK_CACHE_LOCKS, rec_cb, &r);
	cr_assert(testzk_run_flag(base, &r.synced, 10));
	cr_assert_eq(zk_cache_get(c, "0000000001")->locked, 0);
	cr_assert_eq(zk_cache_get(c, "0000000002")->locked, 1, "known when first announced");
	cr_assert_eq(last_of(&r, ZK_CACHE_ADDED, "0000000002")->locked, 1);
	/* "lock" is a lock dir, not a cached child */
	cr_assert_eq(zk_cache_count(c), 2);
	reads = zk_cache_reads(c);

	/* first lock on a node: its lock dir appears */
	l2 = zk_lock_new(zk, "/n/0000000001/lock", NULL, 0);
	cr_assert_eq(zk_lock_sync_acquire(l2, 0), ZOK);
	expect(&r, ZK_CACHE_UPDATED, "0000000001", NULL, 1);
	cr_assert_eq(zk_lock_sync_release(l2), ZOK);
	expect(&r, ZK_CACHE_UPDATED, "0000000001", NULL, 0);
	cr_assert_eq(zk_cache_get(c, "0000000001")->locked, 0);
	mark = r.n; /* the first acquisition's event must not count */
	cr_assert_eq(zk_lock_sync_acquire(l2, 0), ZOK);
	expect_from(&r, mark, ZK_CACHE_UPDATED, "0000000001", 1);
	cr_assert_eq(zk_cache_get(c, "0000000001")->locked, 1);
	zk_lock_free(l2);

	/* a waiter is a second contender */
	{
		struct zk_lock *w = zk_lock_new(zk, "/n/0000000002/lock", NULL, 0);

		zk_lock_acquire(w, -1, NULL, NULL);
		expect(&r, ZK_CACHE_UPDATED, "0000000002", NULL, 2);
		zk_lock_free(w);
		expect(&r, ZK_CACHE_UPDATED, "0000000002", NULL, 1);
	}
	/* counted from the events: no listing of a lock dir (issue 25) */
	cr_assert_eq(zk_cache_reads(c), reads, "%zu reads", zk_cache_reads(c) - reads);
	/* deleting the node with its lock dir: one REMOVED */
	cr_assert_eq(zk_lock_sync_release(l1), ZOK);
	cr_assert_eq(zk_sync_delete(zk, "/n/0000000002", -1, 1), ZOK);
	expect(&r, ZK_CACHE_REMOVED, "0000000002", NULL, -1);
	cr_assert_eq(r.removed, 1);
	cr_assert_eq(zk_cache_count(c), 1);
	zk_lock_free(l1);
	zk_cache_free(c);
	rec_reset(&r);
	zk_free(zk);
}

static int
mine_only(const struct zk_cache_entry *e, void *arg)
{
	int *asked = arg;

	(*asked)++;
	return e->obj != NULL && *(int *)e->obj == 1;
}

static void *decode_int(const char *name, const char *data, int len);
static void free_int(void *p);

/* A lock filter: the locks of the entries it wants are counted, the others'
 * are not watched (locked 0, no event when one is taken), and an entry whose
 * data changes to wanted has its lock counted from then on. */
Test(zk_cache, lock_filter)
{
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, NULL);
	struct rec r = {0};
	struct zk_cache *c;
	struct zk_lock *l1, *l2;
	int asked = 0, mark;

	cr_assert_eq(zk_sync_create(zk, "/f/mine", "1", 1, 0, 1, NULL), ZOK);
	cr_assert_eq(zk_sync_create(zk, "/f/other", "2", 1, 0, 1, NULL), ZOK);
	l1 = zk_lock_new(zk, "/f/mine/lock", NULL, 0);
	l2 = zk_lock_new(zk, "/f/other/lock", NULL, 0);
	cr_assert_eq(zk_lock_sync_acquire(l1, 0), ZOK);
	cr_assert_eq(zk_lock_sync_acquire(l2, 0), ZOK);
	c = zk_cache_new(zk, "/f", ZK_CACHE_DATA | ZK_CACHE_LOCKS, rec_cb, &r);
	zk_cache_set_codec(c, decode_int, free_int);
	zk_cache_set_lock_filter(c, mine_only, &asked);
	cr_assert(testzk_run_flag(base, &r.synced, 10));
	cr_assert_eq(zk_cache_get(c, "mine")->locked, 1, "known when first announced");
	cr_assert_eq(last_of(&r, ZK_CACHE_ADDED, "mine")->locked, 1);
	cr_assert_eq(zk_cache_get(c, "other")->locked, 0, "not watched");
	cr_assert_geq(asked, 2);

	/* the other's lock goes and comes: nothing to report */
	mark = r.n;
	cr_assert_eq(zk_lock_sync_release(l2), ZOK);
	cr_assert_eq(zk_lock_sync_acquire(l2, 0), ZOK);
	cr_assert_eq(zk_lock_sync_release(l1), ZOK);
	expect_from(&r, mark, ZK_CACHE_UPDATED, "mine", 0);
	cr_assert_null(last_of(&r, ZK_CACHE_UPDATED, "other"));

	/* the other becomes wanted: its lock is read and counted */
	cr_assert_eq(zk_sync_set(zk, "/f/other", "1", 1, -1, NULL), ZOK);
	expect(&r, ZK_CACHE_UPDATED, "other", NULL, 1);
	cr_assert_eq(zk_cache_get(c, "other")->locked, 1);
	cr_assert_eq(zk_lock_sync_release(l2), ZOK);
	expect(&r, ZK_CACHE_UPDATED, "other", NULL, 0);
	cr_assert_eq(r.synced, 1);
	zk_lock_free(l1);
	zk_lock_free(l2);
	zk_cache_free(c);
	rec_reset(&r);
	zk_free(zk);
}

struct loadwatch {
	struct zk *zk;
	int *synced;
	int max;
};

static int
load_done(void *arg)
{
	struct loadwatch *lw = arg;

	if (zk_pending(lw->zk) > lw->max)
		lw->max = zk_pending(lw->zk);
	return *lw->synced;
}

/* Thousands of children, added and removed in bulk: every one is announced
 * exactly once each way. */
Test(zk_cache, thousands_of_children)
{
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, NULL);
	struct rec r = {0};
	struct zk_cache *c, *c2;
	const struct zk_cache_entry *const *arr;
	char path[64], name[16];
	struct rec r2 = {0};
	int i, n, done = 0;

	c = zk_cache_new(zk, "/many", ZK_CACHE_DATA, rec_cb, &r);
	cr_assert(testzk_run_flag(base, &r.synced, 10));
	for (i = 0; i < 2000; i++) {
		snprintf(path, sizeof(path), "/many/%010d", i);
		snprintf(name, sizeof(name), "d%d", i);
		zk_create(zk, path, name, (int)strlen(name), 0, 0, NULL, NULL);
	}
	expect_count(c, 2000);
	cr_assert_eq(r.added, 2000);
	n = zk_cache_entries(c, &arr);
	cr_assert_eq(n, 2000);
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "%010d", i);
		cr_assert_str_eq(arr[i]->name, name);
		snprintf(name, sizeof(name), "d%d", i);
		cr_assert_str_eq(arr[i]->data, name);
	}
	/* a second cache loads them all before its SYNCED */
	c2 = zk_cache_new(zk, "/many", ZK_CACHE_DATA | ZK_CACHE_LOCKS, rec_cb, &r2);
	{
		struct loadwatch lw = {zk, &r2.synced, 0};

		cr_assert(testzk_run_until(base, load_done, &lw, 30));
		/* 4,000 reads to make, a bounded number in flight at once */
		cr_assert_leq(lw.max, 256 + 8, "%d operations in flight", lw.max);
	}
	cr_assert_eq(zk_cache_count(c2), 2000);
	cr_assert_eq(r2.added, 2000);
	cr_assert_eq(r2.ev[r2.n - 1].type, ZK_CACHE_SYNCED);
	zk_cache_free(c2);

	zk_delete(zk, "/many", -1, 1, NULL, NULL);
	(void)done;
	expect_count(c, 0);
	cr_assert_eq(r.removed, 2000);
	cr_assert_eq(r.added, 2000);
	zk_cache_free(c);
	rec_reset(&r);
	rec_reset(&r2);
	zk_free(zk);
}

static int decoded, freed;

static void *
decode_int(const char *name, const char *data, int len)
{
	char *end;
	long v;
	int *p;

	if (len == 0)
		return NULL;
	v = strtol(data, &end, 10);
	if (*end != '\0')
		return NULL;
	p = malloc(sizeof(*p));
	*p = (int)v;
	decoded++;
	return p;
}

static void
free_int(void *p)
{
	freed++;
	free(p);
}

Test(zk_cache, codec)
{
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, NULL);
	struct rec r = {0};
	struct zk_cache *c;

	cr_assert_eq(zk_sync_create(zk, "/o/good", "42", 2, 0, 1, NULL), ZOK);
	cr_assert_eq(zk_sync_create(zk, "/o/bad", "{not a number", 13, 0, 1, NULL), ZOK);
	c = zk_cache_new(zk, "/o", ZK_CACHE_DATA, rec_cb, &r);
	zk_cache_set_codec(c, decode_int, free_int);
	cr_assert(testzk_run_flag(base, &r.synced, 10));
	cr_assert_eq(*(int *)zk_cache_get(c, "good")->obj, 42);
	cr_assert_null(zk_cache_get(c, "bad")->obj, "malformed: kept, undecoded");
	cr_assert_str_eq(zk_cache_get(c, "bad")->data, "{not a number");
	cr_assert_eq(zk_sync_set(zk, "/o/good", "43", 2, -1, NULL), ZOK);
	/* a decoded body is not kept as text too */
	expect(&r, ZK_CACHE_UPDATED, "good", NULL, -1);
	cr_assert_eq(*(int *)zk_cache_get(c, "good")->obj, 43);
	cr_assert_null(zk_cache_get(c, "good")->data);
	cr_assert_eq(zk_sync_set(zk, "/o/bad", "7", 1, -1, NULL), ZOK);
	expect(&r, ZK_CACHE_UPDATED, "bad", NULL, -1);
	cr_assert_eq(*(int *)zk_cache_get(c, "bad")->obj, 7);
	cr_assert_null(zk_cache_get(c, "bad")->data, "decodable now: the text is dropped");
	cr_assert_eq(zk_sync_delete(zk, "/o/good", -1, 0), ZOK);
	expect(&r, ZK_CACHE_REMOVED, "good", NULL, -1);
	zk_cache_free(c);
	cr_assert_eq(decoded, 3);
	cr_assert_eq(freed, 3, "every object freed once");
	rec_reset(&r);
	zk_free(zk);
}

struct sess {
	int expired, connected;
};

static void
sess_cb(struct zk *zk, enum zk_event ev, void *arg)
{
	struct sess *s = arg;

	if (ev == ZK_EV_EXPIRED)
		s->expired++;
	if (ev == ZK_EV_CONNECTED)
		s->connected++;
}

static int
resynced(void *arg)
{
	struct rec *r = arg;

	return r->synced >= 2;
}

/* Changes made while our session is dead are reported as differences
 * once a new session has read everything again. */
Test(zk_cache, resync_after_expiry)
{
	struct sess s = {0};
	const char *hosts;
	struct zk *zk = testzk_connect(base, 0, sess_cb, &s, &hosts), *other;
	struct event_base *base2 = event_base_new();
	struct rec r = {0};
	struct zk_cache *c;
	struct zk_lock *l;
	int before;

	/* the other session runs on its own loop, so that its sync calls do not
	 * run ours: our cache must not notice anything until we let it */
	cr_assert_not_null(base2);
	other = testzk_session(base2, hosts, 0, NULL, NULL); /* a second session on the chroot */
	cr_assert_eq(zk_sync_create(zk, "/r/same", "s", 1, 0, 1, NULL), ZOK);
	cr_assert_eq(zk_sync_create(zk, "/r/changed", "c0", 2, 0, 1, NULL), ZOK);
	cr_assert_eq(zk_sync_create(zk, "/r/deleted", "d", 1, 0, 1, NULL), ZOK);
	cr_assert_eq(zk_sync_create(zk, "/r/locked", "l", 1, 0, 1, NULL), ZOK);
	c = zk_cache_new(zk, "/r", ZK_CACHE_DATA | ZK_CACHE_LOCKS, rec_cb, &r);
	cr_assert(testzk_run_flag(base, &r.synced, 10));
	cr_assert_eq(r.added, 4);

	cr_assert_eq(testzk_expire(zk), 0);
	/* our session is closed on the server: nothing below reaches it */
	cr_assert_eq(zk_sync_set(other, "/r/changed", "c1", 2, -1, NULL), ZOK);
	cr_assert_eq(zk_sync_delete(other, "/r/deleted", -1, 0), ZOK);
	cr_assert_eq(zk_sync_create(other, "/r/new", "n", 1, 0, 0, NULL), ZOK);
	l = zk_lock_new(other, "/r/locked/lock", NULL, 0);
	cr_assert_eq(zk_lock_sync_acquire(l, 0), ZOK);
	before = r.n;

	cr_assert(testzk_run_until(base, resynced, &r, 30));
	cr_assert_eq(s.expired, 1);
	cr_assert_not(zk_cache_synced(c) == 0);
	{
		int i, added = 0, updated = 0, removed = 0;

		for (i = before; i < r.n; i++) {
			const struct ev *v = &r.ev[i];

			if (v->type == ZK_CACHE_ADDED) {
				added++;
				cr_assert_str_eq(v->name, "new");
				cr_assert_str_eq(v->data, "n");
			} else if (v->type == ZK_CACHE_UPDATED) {
				updated++;
				cr_assert(strcmp(v->name, "changed") == 0 ||
					      strcmp(v->name, "locked") == 0,
					  "%s", v->name);
			} else if (v->type == ZK_CACHE_REMOVED) {
				removed++;
				cr_assert_str_eq(v->name, "deleted");
			}
		}
		cr_assert_eq(added, 1);
		cr_assert_eq(updated, 2);
		cr_assert_eq(removed, 1);
		cr_assert_eq(r.ev[r.n - 1].type, ZK_CACHE_SYNCED, "the differences come first");
	}
	cr_assert_str_eq(zk_cache_get(c, "changed")->data, "c1");
	cr_assert_eq(zk_cache_get(c, "locked")->locked, 1);
	cr_assert_eq(zk_cache_count(c), 4);

	/* and the watches work again on the new session */
	cr_assert_eq(zk_sync_set(other, "/r/same", "s2", 2, -1, NULL), ZOK);
	expect(&r, ZK_CACHE_UPDATED, "same", "s2", -1);
	cr_assert_eq(zk_lock_sync_release(l), ZOK);
	expect(&r, ZK_CACHE_UPDATED, "locked", NULL, 0);
	zk_lock_free(l);
	zk_cache_free(c);
	rec_reset(&r);
	zk_free(other);
	event_base_free(base2);
	zk_free(zk);
}

Test(zk_cache, free_from_its_own_callback)
{
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, NULL);
	struct rec r = {0};
	struct zk_cache *c;

	cr_assert_eq(zk_sync_create(zk, "/ff/a", "1", 1, 0, 1, NULL), ZOK);
	cr_assert_eq(zk_sync_create(zk, "/ff/b", "2", 1, 0, 1, NULL), ZOK);
	c = zk_cache_new(zk, "/ff", ZK_CACHE_DATA | ZK_CACHE_LOCKS, rec_cb, &r);
	r.free_me_on = c;
	testzk_run_for(base, 1);
	cr_assert_eq(r.added, 1, "nothing after the free");
	cr_assert_eq(r.synced, 0);
	cr_assert_eq(zk_sync_set(zk, "/ff/a", "3", 1, -1, NULL), ZOK);
	testzk_run_for(base, 0.3);
	cr_assert_eq(r.n, 1);
	rec_reset(&r);
	zk_free(zk);
}

static int
synced_twice(void *arg)
{
	return ((const struct rec *)arg)->synced >= 2;
}

/* Changes made while the connection is down (the session lives on) show up
 * once it is back, then SYNCED again. */
Test(zk_cache, catches_up_after_a_lost_connection)
{
	const char *path;
	const char *direct = testzk_chroot(0, &path);
	struct testzk_proxy *px = testzk_proxy_start(testzk_hosts(0));
	struct zk *zk, *other;
	struct rec r = {0};
	struct zk_cache *c;
	struct zk_lock *l;

	zk = testzk_session(base, testzk_proxy_hosts(px, path), 0, NULL, NULL);
	other = testzk_session(base, direct, 0, NULL, NULL);
	cr_assert_eq(zk_sync_create(other, "/cc/old", "1", 1, 0, 1, NULL), ZOK);
	c = zk_cache_new(zk, "/cc", ZK_CACHE_DATA | ZK_CACHE_LOCKS, rec_cb, &r);
	cr_assert(testzk_run_flag(base, &r.synced, 10));

	testzk_proxy_refuse(px, 1);
	testzk_proxy_drop(px);
	testzk_run_for(base, 0.5);
	cr_assert_eq(zk_sync_set(other, "/cc/old", "2", 1, -1, NULL), ZOK);
	cr_assert_eq(zk_sync_create(other, "/cc/new", "n", 1, 0, 0, NULL), ZOK);
	l = zk_lock_new(other, "/cc/old/lock", NULL, 0);
	cr_assert_eq(zk_lock_sync_acquire(l, 0), ZOK);
	testzk_run_for(base, 0.5);
	cr_assert_eq(r.added, 1);
	cr_assert_eq(r.updated, 0);
	cr_assert_eq(zk_cache_synced(c), 0, "not in sync while the connection is down");

	testzk_proxy_refuse(px, 0);
	expect(&r, ZK_CACHE_ADDED, "new", "n", -1);
	expect(&r, ZK_CACHE_UPDATED, "old", "2", -1);
	expect(&r, ZK_CACHE_UPDATED, "old", NULL, 1);
	cr_assert(testzk_run_flag(base, &r.synced, 10));
	cr_assert(testzk_run_until(base, synced_twice, &r, 10), "re-synced after reconnecting");
	cr_assert_eq(zk_cache_synced(c), 1);
	cr_assert_eq(r.added, 2, "no reload: the session lived on");
	cr_assert_eq(r.removed, 0);
	/* the child watch on /cc is armed again: a later child is seen (the
	 * watch re-registered by the C client fired during the re-listing,
	 * which used to leave none) */
	cr_assert_eq(zk_sync_create(other, "/cc/later", "l", 1, 0, 0, NULL), ZOK);
	expect(&r, ZK_CACHE_ADDED, "later", "l", -1);
	cr_assert_eq(zk_sync_create(other, "/cc/later2", "m", 1, 0, 0, NULL), ZOK);
	expect(&r, ZK_CACHE_ADDED, "later2", "m", -1);
	zk_lock_free(l);
	zk_cache_free(c);
	rec_reset(&r);
	zk_free(other);
	zk_free(zk);
	testzk_proxy_stop(px);
}

static int
reads_in_flight(void *arg)
{
	/* the cache keeps at most 256 listing-started reads in flight; the
	 * rest of the 401 entries wait in its queue */
	return zk_pending(arg) >= 200;
}

/* The connection is cut while the cache is still loading: the reads that
 * failed are done again once it is back, and every child is announced
 * exactly once, before SYNCED. */
Test(zk_cache, loading_survives_a_lost_connection)
{
	const char *path;
	const char *direct = testzk_chroot(0, &path);
	struct testzk_proxy *px = testzk_proxy_start(testzk_hosts(0));
	struct zk *zk, *other;
	struct rec r = {0};
	struct zk_cache *c;
	char p[64];
	int i;

	other = testzk_session(base, direct, 0, NULL, NULL);
	for (i = 0; i < 400; i++) {
		snprintf(p, sizeof(p), "/load/n%04d", i);
		zk_create(other, p, "data", 4, 0, 1, NULL, NULL);
	}
	cr_assert_eq(zk_sync_create(other, "/load/n9999", "data", 4, 0, 1, NULL), ZOK);

	zk = testzk_session(base, testzk_proxy_hosts(px, path), 0, NULL, NULL);
	c = zk_cache_new(zk, "/load", ZK_CACHE_DATA | ZK_CACHE_LOCKS, rec_cb, &r);
	/* the listing is in and its reads are sent: hold the answers, cut */
	cr_assert(testzk_run_until(base, reads_in_flight, zk, 15));
	testzk_proxy_hold(px, 1);
	testzk_proxy_refuse(px, 1);
	testzk_proxy_drop(px);
	testzk_run_for(base, 0.5);
	cr_assert_lt(r.added, 401, "the cut came too late to test anything");
	testzk_proxy_hold(px, 0);
	testzk_proxy_refuse(px, 0);
	cr_assert(testzk_run_flag(base, &r.synced, 30));
	cr_assert_eq(zk_cache_count(c), 401);
	cr_assert_eq(r.added, 401);
	cr_assert_eq(r.ev[r.n - 1].type, ZK_CACHE_SYNCED);
	zk_cache_free(c);
	rec_reset(&r);
	zk_free(other);
	zk_free(zk);
	testzk_proxy_stop(px);
}

/*
 * The server's watches of session sid ("wchc", a four-letter command the
 * fixture allows): the number of distinct paths, and whether path is one.
 */
static int
server_watch_paths(int64_t sid, const char *path, int *has_path)
{
	const char *hp = testzk_hosts(0), *colon = strrchr(hp, ':');
	struct sockaddr_in sa = {.sin_family = AF_INET};
	char *buf = NULL, sidtxt[32], *line, *save = NULL, last[512] = "";
	size_t len = 0, cap = 0;
	int fd, mine = 0, n = 0;
	ssize_t k;

	*has_path = 0;
	sa.sin_port = htons((uint16_t)atoi(colon + 1));
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_geq(fd, 0);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(write(fd, "wchc", 4), 4);
	for (;;) {
		if (len + 4096 + 1 > cap) {
			cap = cap ? cap * 2 : 65536;
			buf = realloc(buf, cap);
			cr_assert_not_null(buf);
		}
		if ((k = read(fd, buf + len, 4096)) <= 0)
			break;
		len += (size_t)k;
	}
	close(fd);
	buf[len] = '\0';
	cr_assert(strstr(buf, "not executed") == NULL, "wchc refused: %s", buf);
	snprintf(sidtxt, sizeof(sidtxt), "0x%llx", (unsigned long long)sid);
	/* "0x<session>" lines, each followed by "\t<path>" lines; a
	 * persistent watch is listed once per watch table (data, child) */
	for (line = strtok_r(buf, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
		if (line[0] != '\t') {
			mine = strcmp(line, sidtxt) == 0;
			last[0] = '\0';
		} else if (mine && strcmp(line + 1, last) != 0) {
			n++;
			*has_path |= strcmp(line + 1, path) == 0;
			snprintf(last, sizeof(last), "%s", line + 1);
		}
	}
	free(buf);
	return n;
}

/* The C client's watch tables: no one-shot watch at all, one recursive. */
static void
assert_one_recursive_watch(struct zk *zk)
{
	int counts[5];

	cr_assert_eq(zk_watch_counts(zk, counts), ZOK);
	cr_assert_eq(counts[0] + counts[1] + counts[2], 0,
		     "one-shot watches: data %d, exists %d, children %d", counts[0], counts[1],
		     counts[2]);
	cr_assert_eq(counts[3], 0);
	cr_assert_eq(counts[4], 1, "recursive watches: %d", counts[4]);
}

static int
created_all(void *arg)
{
	return zk_pending(arg) == 0;
}

/*
 * One persistent recursive watch per cache, however many children: it
 * tells of a child, a grandchild lock contender and data changes, and
 * survives a lost connection (the C client re-registers it, zk.c adds it
 * again) with the cache re-synced.
 */
Test(zk_cache, one_recursive_watch_survives_a_lost_connection)
{
	const char *path;
	const char *direct = testzk_chroot(0, &path);
	struct testzk_proxy *px = testzk_proxy_start(testzk_hosts(0));
	struct zk *zk, *other;
	struct rec r = {0};
	struct zk_cache *c;
	struct zk_lock *la, *lb;
	char p[64], root[128];
	int i, has, mark;

	snprintf(root, sizeof(root), "%s/rw", path);
	zk = testzk_session(base, testzk_proxy_hosts(px, path), 0, NULL, NULL);
	other = testzk_session(base, direct, 0, NULL, NULL);
	cr_assert_eq(zk_sync_create(other, "/rw/a", "a1", 2, 0, 1, NULL), ZOK);
	c = zk_cache_new(zk, "/rw", ZK_CACHE_DATA | ZK_CACHE_LOCKS, rec_cb, &r);
	cr_assert(testzk_run_flag(base, &r.synced, 10));
	assert_one_recursive_watch(zk);

	/* 200 children more: still one watch, in the client and the server */
	for (i = 0; i < 200; i++) {
		snprintf(p, sizeof(p), "/rw/n%04d", i);
		zk_create(other, p, "x", 1, 0, 0, NULL, NULL);
	}
	cr_assert(testzk_run_until(base, created_all, other, 15));
	expect_count(c, 201);
	la = zk_lock_new(other, "/rw/a/lock", NULL, 0);
	cr_assert_eq(zk_lock_sync_acquire(la, 0), ZOK);
	expect(&r, ZK_CACHE_UPDATED, "a", NULL, 1);
	assert_one_recursive_watch(zk);
	cr_assert_eq(server_watch_paths(zk_session_id(zk), root, &has), 1,
		     "the server holds one watch for our session");
	cr_assert(has, "on %s", root);

	/* cut; meanwhile a child, a data change and a contender come and go */
	testzk_proxy_refuse(px, 1);
	testzk_proxy_drop(px);
	testzk_run_for(base, 0.3);
	cr_assert_eq(zk_sync_create(other, "/rw/gap", "g", 1, 0, 0, NULL), ZOK);
	cr_assert_eq(zk_sync_set(other, "/rw/a", "a2", 2, -1, NULL), ZOK);
	cr_assert_eq(zk_lock_sync_release(la), ZOK);
	mark = r.n;
	testzk_proxy_refuse(px, 0);
	cr_assert(testzk_run_until(base, synced_twice, &r, 15), "re-synced after reconnecting");
	cr_assert_not_null(zk_cache_get(c, "gap"));
	cr_assert_str_eq(zk_cache_get(c, "a")->data, "a2");
	cr_assert_eq(zk_cache_get(c, "a")->locked, 0);
	/* only what changed is reported: a (data and lock) and gap */
	cr_assert_eq(r.added, 202, "a, 200 children, gap");
	for (i = mark; i < r.n; i++)
		cr_assert(r.ev[i].type == ZK_CACHE_SYNCED || strcmp(r.ev[i].name, "a") == 0 ||
			      strcmp(r.ev[i].name, "gap") == 0,
			  "event %d for %s after the re-sync", r.ev[i].type, r.ev[i].name);

	/* the watch is back: a child, its data, a grandchild contender */
	mark = r.n;
	cr_assert_eq(zk_sync_create(other, "/rw/b", "b1", 2, 0, 0, NULL), ZOK);
	expect_from(&r, mark, ZK_CACHE_ADDED, "b", 0);
	cr_assert_eq(zk_sync_set(other, "/rw/b", "b2", 2, -1, NULL), ZOK);
	expect(&r, ZK_CACHE_UPDATED, "b", "b2", -1);
	lb = zk_lock_new(other, "/rw/b/lock", NULL, 0);
	cr_assert_eq(zk_lock_sync_acquire(lb, 0), ZOK);
	expect(&r, ZK_CACHE_UPDATED, "b", NULL, 1);
	cr_assert_eq(zk_sync_delete(other, "/rw/n0007", -1, 0), ZOK);
	expect(&r, ZK_CACHE_REMOVED, "n0007", NULL, -1);
	assert_one_recursive_watch(zk);
	/* the recursive watch, and the one-shot data watches the catch-up
	 * left on the children that did not change (n0000-n0199 but the
	 * deleted n0007; a fired at once, gap and b were not known): each
	 * fires once at most, merged with the recursive watch */
	cr_assert_eq(server_watch_paths(zk_session_id(zk), root, &has), 1 + 199,
		     "one watch after the reconnection, and the catch-up's one-shot ones");
	cr_assert(has);

	zk_lock_free(lb);
	zk_lock_free(la);
	zk_cache_free(c);
	rec_reset(&r);
	zk_free(other);
	zk_free(zk);
	testzk_proxy_stop(px);
}

/*
 * A lost connection with the session kept is caught up with SetWatches
 * (ZooKeeper's own way): the server names what changed or went while the
 * connection was down, and the cache reads only those, not a stat per
 * child. Changes after it are reported once each, though the server keeps
 * a one-shot watch on every unchanged child besides the recursive one.
 */
Test(zk_cache, catch_up_reads_only_what_changed)
{
	const char *path;
	const char *direct = testzk_chroot(0, &path);
	struct testzk_proxy *px = testzk_proxy_start(testzk_hosts(0));
	struct zk *zk, *other;
	struct rec r = {0};
	struct zk_cache *c;
	char p[64];
	size_t reads;
	int i, mark;

	zk = testzk_session(base, testzk_proxy_hosts(px, path), 0, NULL, NULL);
	other = testzk_session(base, direct, 0, NULL, NULL);
	for (i = 0; i < 100; i++) {
		snprintf(p, sizeof(p), "/cu/n%03d", i);
		cr_assert_eq(zk_sync_create(other, p, "x", 1, 0, 1, NULL), ZOK);
	}
	c = zk_cache_new(zk, "/cu", ZK_CACHE_DATA, rec_cb, &r);
	cr_assert(testzk_run_flag(base, &r.synced, 10));
	cr_assert_eq(r.added, 100);
	/* a reply newer than the creations: the zxid the catch-up is from */
	cr_assert_eq(zk_sync_exists(zk, "/cu", NULL), ZOK);

	/* cut; meanwhile three children change, one goes, one comes */
	testzk_proxy_refuse(px, 1);
	testzk_proxy_drop(px);
	testzk_run_for(base, 0.3);
	cr_assert_eq(zk_sync_set(other, "/cu/n010", "y", 1, -1, NULL), ZOK);
	cr_assert_eq(zk_sync_set(other, "/cu/n050", "y", 1, -1, NULL), ZOK);
	cr_assert_eq(zk_sync_set(other, "/cu/n099", "y", 1, -1, NULL), ZOK);
	cr_assert_eq(zk_sync_delete(other, "/cu/n020", -1, 0), ZOK);
	cr_assert_eq(zk_sync_create(other, "/cu/new", "z", 1, 0, 0, NULL), ZOK);
	mark = r.n;
	reads = zk_cache_reads(c);
	testzk_proxy_refuse(px, 0);
	cr_assert(testzk_run_until(base, synced_twice, &r, 15), "re-synced after reconnecting");

	/* exactly those are reported, with their new data */
	cr_assert_eq(r.n - mark, 6, "3 updated, 1 removed, 1 added, synced: %d events", r.n - mark);
	for (i = mark; i < r.n - 1; i++) {
		const struct ev *v = &r.ev[i];

		if (v->type == ZK_CACHE_UPDATED)
			cr_assert(strcmp(v->name, "n010") == 0 || strcmp(v->name, "n050") == 0 ||
				      strcmp(v->name, "n099") == 0,
				  "updated %s", v->name);
		else if (v->type == ZK_CACHE_REMOVED)
			cr_assert_str_eq(v->name, "n020");
		else
			cr_assert(v->type == ZK_CACHE_ADDED && strcmp(v->name, "new") == 0,
				  "event %d for %s", v->type, v->name);
	}
	cr_assert_eq(r.ev[r.n - 1].type, ZK_CACHE_SYNCED);
	cr_assert_str_eq(zk_cache_get(c, "n050")->data, "y");
	cr_assert_str_eq(zk_cache_get(c, "new")->data, "z");
	cr_assert_null(zk_cache_get(c, "n020"));
	cr_assert_eq(zk_cache_count(c), 100);
	/* a read for each changed child and the new one; none for the 96
	 * unchanged */
	cr_assert_eq(zk_cache_reads(c) - reads, 4, "%zu reads for the catch-up",
		     zk_cache_reads(c) - reads);

	/* an unchanged child changes later: one event, one read (the
	 * catch-up's one-shot watch and the recursive one are one
	 * notification); the second change shows the first is done with */
	mark = r.n;
	reads = zk_cache_reads(c);
	cr_assert_eq(zk_sync_set(other, "/cu/n030", "w", 1, -1, NULL), ZOK);
	cr_assert_eq(zk_sync_set(other, "/cu/n031", "w", 1, -1, NULL), ZOK);
	expect_from(&r, mark, ZK_CACHE_UPDATED, "n031", -1);
	cr_assert_eq(r.n - mark, 2);
	cr_assert_str_eq(r.ev[mark].name, "n030");
	cr_assert_eq(zk_cache_reads(c) - reads, 2);

	zk_cache_free(c);
	rec_reset(&r);
	zk_free(other);
	zk_free(zk);
	testzk_proxy_stop(px);
}

static int synced_mark;

static int
synced_again(void *arg)
{
	return ((const struct rec *)arg)->synced > synced_mark;
}

static void
got_data(int rc, const char *data, int len, const struct zk_stat *st, void *arg)
{
	(void)data;
	(void)len;
	(void)st;
	*(int *)arg = rc == ZOK ? 1 : -1;
}

/*
 * A connection that comes up and drops again before the loop hears of it
 * (a flapping link, a proxy that takes the connection and then fails):
 * the replies on it move the C client's last zxid past what changed while
 * the first connection was down, so a catch-up from the zxid current when
 * the loop hears of the reconnection would skip those changes. The point
 * is held in the C client from the first lost connection until every
 * cache has caught up. Here the loop is kept from running (the other
 * session has a loop of its own) while the link is cut, restored, a read
 * answered on the short connection, cut again and restored.
 */
Test(zk_cache, catch_up_after_a_connection_that_came_and_went)
{
	const char *path;
	const char *direct = testzk_chroot(0, &path);
	struct testzk_proxy *px = testzk_proxy_start(testzk_hosts(0));
	struct event_base *base2 = event_base_new();
	struct zk *zk, *other;
	struct rec r = {0};
	struct zk_cache *c;
	char p[64];
	size_t reads;
	int i, got = 0;

	cr_assert_not_null(base2);
	zk = testzk_session(base, testzk_proxy_hosts(px, path), 0, NULL, NULL);
	other = testzk_session(base2, direct, 0, NULL, NULL);
	for (i = 0; i < 20; i++) {
		snprintf(p, sizeof(p), "/fl/n%02d", i);
		cr_assert_eq(zk_sync_create(other, p, "x", 1, 0, 1, NULL), ZOK);
	}
	c = zk_cache_new(zk, "/fl", ZK_CACHE_DATA, rec_cb, &r);
	cr_assert(testzk_run_flag(base, &r.synced, 10));
	cr_assert_eq(r.added, 20);
	cr_assert_eq(zk_sync_exists(zk, "/fl", NULL), ZOK);

	/* first cut: n01 changes, n02 goes */
	testzk_proxy_refuse(px, 1);
	testzk_proxy_drop(px);
	testzk_run_for(base, 0.3);
	cr_assert_eq(zk_sync_set(other, "/fl/n01", "gap1", 4, -1, NULL), ZOK);
	cr_assert_eq(zk_sync_delete(other, "/fl/n02", -1, 0), ZOK);
	/* from here on our loop does not run: the reconnection is not heard
	 * of; a read is answered on the new connection (sent once the C
	 * client has reconnected, 50-100 ms; a read queued before would fail
	 * with a connection attempt refused) */
	testzk_proxy_refuse(px, 0);
	for (i = 0; i < 1500 && !zk_client_connected(zk); i++)
		usleep(10 * 1000);
	cr_assert(zk_client_connected(zk), "the C client reconnected within 15 s");
	zk_get(zk, "/fl", NULL, NULL, got_data, &got);
	usleep(1000 * 1000); /* its reply: a round trip on loopback */
	/* second cut, before the loop heard of the first reconnection: n03
	 * changes meanwhile */
	testzk_proxy_refuse(px, 1);
	testzk_proxy_drop(px);
	usleep(300 * 1000);
	cr_assert_eq(zk_sync_set(other, "/fl/n03", "gap2", 4, -1, NULL), ZOK);
	testzk_proxy_refuse(px, 0);
	usleep(1000 * 1000);

	/* now the loop hears of it all */
	cr_assert(testzk_run_flag(base, &got, 10));
	cr_assert_eq(got, 1, "the read was answered on the short connection");
	cr_assert(testzk_run_until(base, synced_twice, &r, 15), "re-synced after reconnecting");
	testzk_run_for(base, 0.3); /* a further catch-up, if one was owed */
	cr_assert_not_null(zk_cache_get(c, "n01"));
	cr_assert_str_eq(zk_cache_get(c, "n01")->data, "gap1",
			 "the change made during the first cut was caught up");
	cr_assert_null(zk_cache_get(c, "n02"));
	cr_assert_str_eq(zk_cache_get(c, "n03")->data, "gap2");
	cr_assert_eq(zk_cache_count(c), 19);

	/* caught up: the point was let go, so the next cut catches up from
	 * a point after it: only what changes then is read (n01 and n03 are
	 * not read again) */
	testzk_proxy_refuse(px, 1);
	testzk_proxy_drop(px);
	testzk_run_for(base, 0.3);
	cr_assert_eq(zk_sync_set(other, "/fl/n04", "gap3", 4, -1, NULL), ZOK);
	reads = zk_cache_reads(c);
	synced_mark = r.synced;
	testzk_proxy_refuse(px, 0);
	cr_assert(testzk_run_until(base, synced_again, &r, 15), "re-synced again");
	cr_assert_eq(zk_cache_reads(c) - reads, 1, "%zu reads for the catch-up",
		     zk_cache_reads(c) - reads);
	cr_assert_str_eq(zk_cache_get(c, "n04")->data, "gap3");

	zk_cache_free(c);
	rec_reset(&r);
	zk_free(other);
	zk_free(zk);
	event_base_free(base2);
	testzk_proxy_stop(px);
}

static int
held_is_2(void *arg)
{
	return zk_cache_held(arg) == 2;
}

static void
refreshed(struct zk_cache *c, void *arg)
{
	(*(int *)arg)++;
}

/* ZK_CACHE_LAZY (nodepool-web, issue 25): once synced, changes are heard
 * but not read until a refresh; a child changed three times is then read
 * once, a new child is read then; a deletion needs no read and is seen at
 * once, and so is a lock taken (counted from the events). */
Test(zk_cache, lazy_reads_at_refresh)
{
	const char *hosts;
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, &hosts);
	struct rec r = {0};
	struct zk_cache *c;
	struct zk_lock *l;
	size_t reads;
	int done = 0;

	cr_assert_eq(zk_sync_create(zk, "/lz/a", "1", 1, 0, 1, NULL), ZOK);
	cr_assert_eq(zk_sync_create(zk, "/lz/b", "1", 1, 0, 1, NULL), ZOK);
	cr_assert_eq(zk_sync_create(zk, "/lz/d", "1", 1, 0, 1, NULL), ZOK);
	c = zk_cache_new(zk, "/lz", ZK_CACHE_DATA | ZK_CACHE_LOCKS | ZK_CACHE_LAZY, rec_cb, &r);
	cr_assert(testzk_run_flag(base, &r.synced, 10));
	cr_assert_eq(zk_cache_count(c), 3);
	cr_assert_eq(zk_cache_refresh(c, refreshed, &done), 1, "nothing to read yet");
	reads = zk_cache_reads(c);

	cr_assert_eq(zk_sync_set(zk, "/lz/a", "2", 1, -1, NULL), ZOK);
	cr_assert_eq(zk_sync_set(zk, "/lz/a", "3", 1, -1, NULL), ZOK);
	cr_assert_eq(zk_sync_set(zk, "/lz/a", "4", 1, -1, NULL), ZOK);
	cr_assert_eq(zk_sync_create(zk, "/lz/c", "x", 1, 0, 1, NULL), ZOK);
	l = zk_lock_new(zk, "/lz/b/lock", NULL, 0);
	cr_assert_eq(zk_lock_sync_acquire(l, 0), ZOK);
	cr_assert_eq(zk_sync_delete(zk, "/lz/d", -1, 1), ZOK);
	cr_assert(testzk_run_until(base, held_is_2, c, 15), "held %zu", zk_cache_held(c));
	expect(&r, ZK_CACHE_REMOVED, "d", NULL, -1);
	/* the events of all the above are in before the answer to this */
	cr_assert_eq(zk_sync_exists(zk, "/lz", NULL), ZOK);
	/* nothing read meanwhile: the view is as it was */
	cr_assert_eq(zk_cache_reads(c), reads);
	cr_assert_str_eq(zk_cache_get(c, "a")->data, "1");
	cr_assert_eq(zk_cache_get(c, "b")->locked, 1);
	cr_assert_null(zk_cache_get(c, "c"));

	cr_assert_eq(zk_cache_refresh(c, refreshed, &done), 0);
	cr_assert(testzk_run_flag(base, &done, 15));
	cr_assert_eq(done, 1);
	cr_assert_str_eq(zk_cache_get(c, "a")->data, "4");
	cr_assert_eq(zk_cache_get(c, "b")->locked, 1);
	cr_assert_not_null(zk_cache_get(c, "c"));
	cr_assert_str_eq(zk_cache_get(c, "c")->data, "x");
	expect(&r, ZK_CACHE_ADDED, "c", "x", 0);
	expect(&r, ZK_CACHE_UPDATED, "a", "4", -1);
	/* a's data once, c's data and lock */
	cr_assert_eq(zk_cache_reads(c) - reads, 3, "%zu reads", zk_cache_reads(c) - reads);
	cr_assert_eq(zk_cache_held(c), 0);
	zk_lock_free(l);
	zk_cache_free(c);
	rec_reset(&r);
	zk_free(zk);
}

/* ---- our own writes (issue 25) ------------------------------------------------ */

struct ownw {
	struct zk_cache *c;
	const char *name, *data;
	int done, rc;
};

static void
ownw_done(int rc, const struct zk_stat *st, void *arg)
{
	struct ownw *w = arg;

	zk_cache_write_end(w->c, w->name, rc == ZOK, w->data, (int)strlen(w->data), NULL,
			   st != NULL ? st->mzxid : 0, st != NULL ? st->version : 0);
	w->rc = rc;
	w->done = 1;
}

/* Our write, as the launcher sends it: begun, sent, ended with the reply. */
static void
own_set(struct zk *zk, struct ownw *w, const char *path, int version)
{
	w->done = 0;
	zk_cache_write_begin(w->c, w->name);
	zk_set(zk, path, w->data, (int)strlen(w->data), version, ownw_done, w);
}

/*
 * The cache takes our own write from its reply, not by reading it back;
 * changes by others, before our write (overwritten) or after it, and a
 * write of ours that fails, are read as any. The other session runs on a
 * loop of its own, so that its writes are all in ZooKeeper before our
 * loop hears of any.
 */
Test(zk_cache, own_writes_are_not_read_back)
{
	const char *hosts;
	struct event_base *obase = event_base_new();
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, &hosts);
	struct zk *other;
	struct rec r = {0};
	struct ownw w = {0};
	struct zk_cache *c;
	size_t reads;
	int from;

	other = testzk_session(obase, hosts, 0, NULL, NULL);
	cr_assert_eq(zk_sync_create(zk, "/o/a", "v0", 2, 0, 1, NULL), ZOK);
	c = zk_cache_new(zk, "/o", ZK_CACHE_DATA, rec_cb, &r);
	cr_assert(testzk_run_flag(base, &r.synced, 10));
	w.c = c;
	w.name = "a";

	/* ours alone: UPDATED with what we wrote, no read */
	reads = zk_cache_reads(c);
	w.data = "mine1";
	own_set(zk, &w, "/o/a", -1);
	cr_assert(testzk_run_flag(base, &w.done, 10));
	cr_assert_eq(w.rc, ZOK);
	expect(&r, ZK_CACHE_UPDATED, "a", "mine1", -1);
	cr_assert_eq(zk_cache_get(c, "a")->stat.version, 1);
	testzk_run_for(base, 0.2);
	cr_assert_eq(zk_cache_reads(c), reads, "our own write read back");
	cr_assert_eq(zk_cache_own_applied(c), 1);

	/* someone else's change after ours: read */
	from = r.n;
	cr_assert_eq(zk_sync_set(other, "/o/a", "theirs1", 7, -1, NULL), ZOK);
	expect_from(&r, from, ZK_CACHE_UPDATED, "a", -1);
	expect(&r, ZK_CACHE_UPDATED, "a", "theirs1", -1);
	cr_assert_eq(zk_cache_get(c, "a")->stat.version, 2);
	cr_assert_eq(zk_cache_reads(c), reads + 1);

	/* someone else's change, then ours over it before we heard of
	 * theirs: ours is the data, and theirs is not read */
	cr_assert_eq(zk_sync_set(other, "/o/a", "theirs2", 7, -1, NULL), ZOK);
	w.data = "mine2";
	own_set(zk, &w, "/o/a", -1);
	cr_assert(testzk_run_flag(base, &w.done, 10));
	cr_assert_eq(w.rc, ZOK);
	cr_assert_str_eq(zk_cache_get(c, "a")->data, "mine2");
	cr_assert_eq(zk_cache_get(c, "a")->stat.version, 4);
	testzk_run_for(base, 0.2);
	cr_assert_str_eq(zk_cache_get(c, "a")->data, "mine2");
	cr_assert_eq(zk_cache_reads(c), reads + 1);

	/* ours fails (a stale version: someone else changed it first): their
	 * change is read */
	cr_assert_eq(zk_sync_set(other, "/o/a", "theirs3", 7, -1, NULL), ZOK);
	w.data = "mine3";
	own_set(zk, &w, "/o/a", 4);
	cr_assert(testzk_run_flag(base, &w.done, 10));
	cr_assert_eq(w.rc, ZBADVERSION);
	expect(&r, ZK_CACHE_UPDATED, "a", "theirs3", -1);
	cr_assert_eq(zk_cache_get(c, "a")->stat.version, 5);
	cr_assert_eq(zk_cache_own_applied(c), 2);

	/* and a change after all that is still seen */
	cr_assert_eq(zk_sync_set(other, "/o/a", "theirs4", 7, -1, NULL), ZOK);
	expect(&r, ZK_CACHE_UPDATED, "a", "theirs4", -1);
	zk_cache_free(c);
	rec_reset(&r);
	zk_free(other);
	zk_free(zk);
	event_base_free(obase);
}

/*
 * A node made while we watch has its lock counted from its creation, with
 * no listing of its lock dir (issue 25), including contenders that came
 * before its data was read, and a filter that declines it (known only from
 * its data) leaves it at 0. The other session runs on a loop of its own,
 * so that all its writes are in before our loop hears of the first.
 */
Test(zk_cache, new_nodes_lock_counted_from_their_creation)
{
	const char *hosts;
	struct event_base *obase = event_base_new();
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, &hosts);
	struct zk *other;
	struct rec r = {0};
	struct zk_cache *c;
	struct zk_lock *lm, *lo, *w;
	size_t reads;
	int asked = 0;

	other = testzk_session(obase, hosts, 0, NULL, NULL);
	c = zk_cache_new(zk, "/g", ZK_CACHE_DATA | ZK_CACHE_LOCKS, rec_cb, &r);
	zk_cache_set_codec(c, decode_int, free_int);
	zk_cache_set_lock_filter(c, mine_only, &asked);
	cr_assert(testzk_run_flag(base, &r.synced, 10));
	reads = zk_cache_reads(c);

	/* made and locked (a holder and a waiter) before we hear of it */
	cr_assert_eq(zk_sync_create(other, "/g/mine", "1", 1, 0, 0, NULL), ZOK);
	cr_assert_eq(zk_sync_create(other, "/g/theirs", "2", 1, 0, 0, NULL), ZOK);
	lm = zk_lock_new(other, "/g/mine/lock", NULL, 0);
	lo = zk_lock_new(other, "/g/theirs/lock", NULL, 0);
	cr_assert_eq(zk_lock_sync_acquire(lm, 0), ZOK);
	cr_assert_eq(zk_lock_sync_acquire(lo, 0), ZOK);
	w = zk_lock_new(other, "/g/mine/lock", NULL, 0);
	cr_assert_eq(zk_lock_sync_acquire(w, 0), ZK_LOCK_BUSY); /* came and went */
	expect(&r, ZK_CACHE_ADDED, "mine", NULL, 1);
	expect(&r, ZK_CACHE_ADDED, "theirs", NULL, 0);
	testzk_run_for(base, 0.2);
	cr_assert_eq(zk_cache_get(c, "mine")->locked, 1);
	cr_assert_eq(zk_cache_get(c, "theirs")->locked, 0, "declined by the filter");
	cr_assert_eq(zk_cache_reads(c), reads + 2, "only the two data reads: %zu",
		     zk_cache_reads(c) - reads);

	/* and later changes are followed as any */
	cr_assert_eq(zk_lock_sync_release(lm), ZOK);
	expect(&r, ZK_CACHE_UPDATED, "mine", NULL, 0);
	cr_assert_eq(zk_lock_sync_release(lo), ZOK);
	testzk_run_for(base, 0.2);
	cr_assert_eq(zk_cache_get(c, "theirs")->locked, 0);
	zk_lock_free(lm);
	zk_lock_free(lo);
	zk_lock_free(w);
	zk_cache_free(c);
	rec_reset(&r);
	zk_free(other);
	zk_free(zk);
	event_base_free(obase);
}

/* ---- our own creates (issue 25) ------------------------------------------------ */

struct ownc {
	struct zk_cache *c;
	const char *data;
	char created[128];
	int done, rc;
	int had_stat;
};

static void
ownc_done(int rc, const char *path, const struct zk_stat *st, void *arg)
{
	struct ownc *o = arg;
	const char *name = rc == ZOK && path != NULL ? strrchr(path, '/') : NULL;

	zk_cache_create_end(o->c, name != NULL ? name + 1 : NULL, o->data, (int)strlen(o->data),
			    NULL, st);
	o->rc = rc;
	o->had_stat = st != NULL;
	snprintf(o->created, sizeof(o->created), "%s", path != NULL ? path : "");
	o->done = 1;
}

/* Our create, as the launcher sends it: begun, sent, ended with the reply. */
static void
own_create(struct zk *zk, struct ownc *o, const char *prefix)
{
	o->done = 0;
	zk_cache_create_begin(o->c);
	zk_create2(zk, prefix, o->data, (int)strlen(o->data), ZOO_SEQUENCE, 0, ownc_done, o);
}

/*
 * A child we make with a sequence number is announced from the create's
 * reply (its data and stat), not read back; one someone else makes while
 * ours is in flight is read once ours is back; a create of ours that
 * fails leaves the others to be read; and a change after our creation is
 * read as any. The lock of our new child is counted from its creation.
 */
Test(zk_cache, own_creates_are_not_read_back)
{
	const char *hosts;
	struct event_base *obase = event_base_new();
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, &hosts);
	struct zk *other;
	struct rec r = {0};
	struct ownc o = {0}, bad = {0};
	struct zk_cache *c;
	struct zk_lock *l;
	const struct zk_cache_entry *e;
	char *theirs, name[64];
	size_t reads;

	other = testzk_session(obase, hosts, 0, NULL, NULL);
	cr_assert_eq(zk_sync_create(zk, "/oc", NULL, 0, 0, 0, NULL), ZOK);
	c = zk_cache_new(zk, "/oc", ZK_CACHE_DATA | ZK_CACHE_LOCKS, rec_cb, &r);
	cr_assert(testzk_run_flag(base, &r.synced, 10));
	o.c = c;
	bad.c = c;
	reads = zk_cache_reads(c);

	/* ours: ADDED with what we wrote, at the reply, no read */
	o.data = "n1";
	own_create(zk, &o, "/oc/n-");
	cr_assert(testzk_run_flag(base, &o.done, 10));
	cr_assert_eq(o.rc, ZOK);
	cr_assert(o.had_stat, "create2 gives the stat");
	snprintf(name, sizeof(name), "%s", strrchr(o.created, '/') + 1);
	e = zk_cache_get(c, name);
	cr_assert_not_null(e, "announced by the reply");
	cr_assert_str_eq(e->data, "n1");
	cr_assert_eq(e->stat.version, 0);
	testzk_run_for(base, 0.2);
	cr_assert_eq(zk_cache_reads(c), reads, "our own create read back");
	cr_assert_eq(zk_cache_own_applied(c), 1);

	/* its lock counted from its creation, without a listing */
	l = zk_lock_new(other, "/oc/n-0000000000/lock", NULL, 0);
	cr_assert_str_eq(name, "n-0000000000");
	cr_assert_eq(zk_lock_sync_acquire(l, 0), ZOK);
	expect(&r, ZK_CACHE_UPDATED, name, NULL, 1);
	cr_assert_eq(zk_lock_sync_release(l), ZOK);
	expect(&r, ZK_CACHE_UPDATED, name, NULL, 0);
	cr_assert_eq(zk_cache_reads(c), reads);

	/* someone else's child made while ours is in flight: read after ours */
	cr_assert_eq(zk_sync_create(other, "/oc/n-", "t1", 2, ZOO_SEQUENCE, 0, &theirs), ZOK);
	o.data = "n2";
	own_create(zk, &o, "/oc/n-");
	cr_assert(testzk_run_flag(base, &o.done, 10));
	cr_assert_eq(o.rc, ZOK);
	expect(&r, ZK_CACHE_ADDED, strrchr(theirs, '/') + 1, "t1", -1);
	cr_assert_str_eq(zk_cache_get(c, strrchr(o.created, '/') + 1)->data, "n2");
	cr_assert_eq(zk_cache_reads(c), reads + 1, "only theirs read");
	free(theirs);

	/* a create of ours that fails (no parent): theirs still read */
	cr_assert_eq(zk_sync_create(other, "/oc/n-", "t2", 2, ZOO_SEQUENCE, 0, &theirs), ZOK);
	bad.data = "never";
	own_create(zk, &bad, "/nowhere/n-");
	cr_assert(testzk_run_flag(base, &bad.done, 10));
	cr_assert_eq(bad.rc, ZNONODE);
	expect(&r, ZK_CACHE_ADDED, strrchr(theirs, '/') + 1, "t2", -1);
	free(theirs);

	/* a change after our creation is read */
	cr_assert_eq(zk_sync_set(other, "/oc/n-0000000000", "changed", 7, -1, NULL), ZOK);
	expect(&r, ZK_CACHE_UPDATED, "n-0000000000", "changed", -1);
	cr_assert_eq(zk_cache_count(c), 4);
	zk_lock_free(l);
	zk_cache_free(c);
	rec_reset(&r);
	zk_free(other);
	zk_free(zk);
	event_base_free(obase);
}

/* ---- our own writes applied from the writer's object (issue 25) ------------- */

static int *
int_obj(int v)
{
	int *p = malloc(sizeof(*p));

	cr_assert_not_null(p);
	*p = v;
	return p;
}

/* testzk_run_until: entry name of cache holds the object value. */
struct int_want {
	struct zk_cache *c;
	const char *name;
	int value;
};

static int
int_is(void *arg)
{
	const struct int_want *w = arg;
	const struct zk_cache_entry *e = zk_cache_get(w->c, w->name);

	return e != NULL && e->obj != NULL && *(const int *)e->obj == w->value;
}

/* A write of ours that hands the cache the object it encoded (the
 * launcher's way): no bytes kept, only their length. */
struct ownwo {
	struct zk_cache *c;
	const char *name, *data;
	int value; /* what data encodes */
	int done, rc;
	int64_t mzxid;
};

static void
ownwo_done(int rc, const struct zk_stat *st, void *arg)
{
	struct ownwo *w = arg;

	zk_cache_write_end(w->c, w->name, rc == ZOK, NULL, (int)strlen(w->data), int_obj(w->value),
			   st != NULL ? st->mzxid : 0, st != NULL ? st->version : 0);
	w->rc = rc;
	w->mzxid = st != NULL ? st->mzxid : 0;
	w->done = 1;
}

static void
own_set_obj(struct zk *zk, struct ownwo *w, const char *path, int version)
{
	w->done = 0;
	zk_cache_write_begin(w->c, w->name);
	zk_set(zk, path, w->data, (int)strlen(w->data), version, ownwo_done, w);
}

/*
 * Our own write handed over as the object it encodes: the entry takes it
 * as its decoded object, with the write's version and mzxid, and nothing
 * is decoded or read (its watch event is recognised as ours); a foreign
 * write after it is read and decoded as any; an object whose write
 * failed is freed, and the foreign change it lost to is read.
 */
Test(zk_cache, own_writes_applied_from_the_object)
{
	const char *hosts;
	struct event_base *obase = event_base_new();
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, &hosts);
	struct zk *other;
	struct rec r = {0};
	struct ownwo w = {0};
	struct zk_cache *c;
	const struct zk_cache_entry *e;
	struct zk_stat st;
	struct int_want iw = {0};
	size_t reads;
	int dec, fr;

	other = testzk_session(obase, hosts, 0, NULL, NULL);
	cr_assert_eq(zk_sync_create(zk, "/ob/a", "1", 1, 0, 1, NULL), ZOK);
	c = zk_cache_new(zk, "/ob", ZK_CACHE_DATA, rec_cb, &r);
	zk_cache_set_codec(c, decode_int, free_int);
	cr_assert(testzk_run_flag(base, &r.synced, 10));
	cr_assert_eq(*(int *)zk_cache_get(c, "a")->obj, 1);
	w.c = c;
	w.name = "a";
	iw.c = c;
	iw.name = "a";
	reads = zk_cache_reads(c);
	dec = decoded;
	fr = freed;

	/* ours: the object is the entry's, undecoded, unread */
	w.data = "17";
	w.value = 17;
	own_set_obj(zk, &w, "/ob/a", -1);
	cr_assert(testzk_run_flag(base, &w.done, 10));
	cr_assert_eq(w.rc, ZOK);
	expect(&r, ZK_CACHE_UPDATED, "a", NULL, -1);
	testzk_run_for(base, 0.2); /* its watch event, heard before the reply */
	e = zk_cache_get(c, "a");
	cr_assert_eq(*(int *)e->obj, 17);
	cr_assert_null(e->data, "a decoded body is not kept as text too");
	cr_assert_eq(e->len, 2);
	cr_assert_eq(e->stat.version, 1);
	cr_assert_eq(e->stat.mzxid, w.mzxid);
	cr_assert_eq(zk_sync_exists(other, "/ob/a", &st), ZOK);
	cr_assert_eq(e->stat.mzxid, st.mzxid, "the mzxid ZooKeeper holds");
	cr_assert_eq(decoded, dec, "our own write decoded back");
	cr_assert_eq(freed, fr + 1, "only the object it replaced freed");
	cr_assert_eq(zk_cache_reads(c), reads, "our own write read back");
	cr_assert_eq(zk_cache_own_applied(c), 1);

	/* someone else's write after ours: read and decoded */
	cr_assert_eq(zk_sync_set(other, "/ob/a", "23", 2, -1, NULL), ZOK);
	iw.value = 23;
	cr_assert(testzk_run_until(base, int_is, &iw, 10));
	e = zk_cache_get(c, "a");
	cr_assert_eq(e->stat.version, 2);
	cr_assert_eq(decoded, dec + 1);
	cr_assert_eq(zk_cache_reads(c), reads + 1);

	/* ours fails (a stale version): the object is freed, theirs read */
	fr = freed;
	cr_assert_eq(zk_sync_set(other, "/ob/a", "29", 2, -1, NULL), ZOK);
	w.data = "31";
	w.value = 31;
	own_set_obj(zk, &w, "/ob/a", 2);
	cr_assert(testzk_run_flag(base, &w.done, 10));
	cr_assert_eq(w.rc, ZBADVERSION);
	iw.value = 29;
	cr_assert(testzk_run_until(base, int_is, &iw, 10));
	cr_assert_eq(zk_cache_get(c, "a")->stat.version, 3);
	cr_assert_eq(freed, fr + 2, "the unused object and the one replaced");
	cr_assert_eq(zk_cache_own_applied(c), 1);
	zk_cache_free(c);
	rec_reset(&r);
	zk_free(other);
	zk_free(zk);
	event_base_free(obase);
}

struct owncw {
	struct zk_cache *c;
	const char *data;
	int value;
	char name[64];
	int done, rc;
};

static void
owncw_done(int rc, const char *path, const struct zk_stat *st, void *arg)
{
	struct owncw *o = arg;
	const char *name = rc == ZOK && path != NULL ? strrchr(path, '/') : NULL;

	zk_cache_create_end(o->c, name != NULL ? name + 1 : NULL, NULL, (int)strlen(o->data),
			    int_obj(o->value), st);
	snprintf(o->name, sizeof(o->name), "%s", name != NULL ? name + 1 : "");
	o->rc = rc;
	o->done = 1;
}

/*
 * Our own create handed over as the object it encodes: announced with it
 * (undecoded, unread); a foreign write after it is read and decoded; the
 * object of a create that failed is freed.
 */
Test(zk_cache, own_creates_applied_from_the_object)
{
	const char *hosts;
	struct event_base *obase = event_base_new();
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, &hosts);
	struct zk *other;
	struct rec r = {0};
	struct owncw o = {0};
	struct zk_cache *c;
	const struct zk_cache_entry *e;
	struct int_want iw = {0};
	char path[128];
	size_t reads;
	int dec, fr;

	other = testzk_session(obase, hosts, 0, NULL, NULL);
	cr_assert_eq(zk_sync_create(zk, "/obc", NULL, 0, 0, 0, NULL), ZOK);
	c = zk_cache_new(zk, "/obc", ZK_CACHE_DATA | ZK_CACHE_LOCKS, rec_cb, &r);
	zk_cache_set_codec(c, decode_int, free_int);
	cr_assert(testzk_run_flag(base, &r.synced, 10));
	reads = zk_cache_reads(c);
	dec = decoded;
	fr = freed;
	o.c = c;
	o.data = "5";
	o.value = 5;
	zk_cache_create_begin(c);
	zk_create2(zk, "/obc/n-", o.data, 1, ZOO_SEQUENCE, 0, owncw_done, &o);
	cr_assert(testzk_run_flag(base, &o.done, 10));
	cr_assert_eq(o.rc, ZOK);
	testzk_run_for(base, 0.2);
	e = zk_cache_get(c, o.name);
	cr_assert_not_null(e, "announced by the reply");
	expect(&r, ZK_CACHE_ADDED, o.name, NULL, 0);
	cr_assert_eq(*(int *)e->obj, 5);
	cr_assert_null(e->data);
	cr_assert_eq(e->len, 1);
	cr_assert_eq(e->stat.version, 0);
	cr_assert_eq(decoded, dec, "our own create decoded back");
	cr_assert_eq(freed, fr);
	cr_assert_eq(zk_cache_reads(c), reads, "our own create read back");

	/* someone else's write after it: read and decoded */
	snprintf(path, sizeof(path), "/obc/%s", o.name);
	cr_assert_eq(zk_sync_set(other, path, "6", 1, -1, NULL), ZOK);
	iw.c = c;
	iw.name = o.name;
	iw.value = 6;
	cr_assert(testzk_run_until(base, int_is, &iw, 10));
	cr_assert_eq(zk_cache_get(c, o.name)->stat.version, 1);
	cr_assert_eq(decoded, dec + 1);
	cr_assert_eq(zk_cache_reads(c), reads + 1);

	/* a create of ours that fails: its object is freed */
	fr = freed;
	o.done = 0;
	zk_cache_create_begin(c);
	zk_create2(zk, "/nowhere/n-", o.data, 1, ZOO_SEQUENCE, 0, owncw_done, &o);
	cr_assert(testzk_run_flag(base, &o.done, 10));
	cr_assert_eq(o.rc, ZNONODE);
	cr_assert_eq(freed, fr + 1);
	cr_assert_eq(zk_cache_count(c), 1);
	zk_cache_free(c);
	rec_reset(&r);
	zk_free(other);
	zk_free(zk);
	event_base_free(obase);
}
