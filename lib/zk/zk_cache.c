/*
 * Caches of the children of one path (zk.h), kept current by ONE persistent
 * recursive watch on the path (zk_watch_tree; ZooKeeper's addWatch, as
 * upstream's tree caches use through kazoo), not one-shot watches per
 * child:
 *   <path>                     deleted: every entry goes, the path is made
 *                              again and listed;
 *   <path>/<child>             created, deleted, data changed: the entry is
 *                              loaded, removed, its data read again;
 *   <path>/<child>/lock[/<c>]  created, deleted: the contender count follows
 *                              the event (listed only while a listing is
 *                              in flight, or out of step), for entries
 *                              whose lock is followed (ZK_CACHE_LOCKS, the
 *                              lock filter); ignored for the others.
 * Anything deeper is ignored. Nothing is polled, and no watch is left per
 * child: the server keeps one watch per cache, the C client one entry.
 * Issue 25: a child created while we watch has its lock contenders
 * counted from its creation's event on, with no listing; our own writes
 * (zk_cache_write_begin/_end) are taken from their replies, not read back,
 * and with the object the writer encoded them from, not decoded back.
 * With ZK_CACHE_LAZY (zk.h) the reads these events ask for wait, the
 * entries queued, until zk_cache_refresh(): a reader that is seldom asked
 * reads once what changed many times.
 *
 * An entry being loaded (new, or re-read in a load phase) waits for its
 * reads (data, lock contenders) and is then announced (ADDED), or reported
 * if its mzxid or contender count differs from before (UPDATED). A read
 * asked for while the same read is in flight is made again once it is
 * back (the first may predate the change). The events while disconnected
 * are lost (the server does not replay them for persistent watches). After
 * a new session the path is listed again and every entry re-read (a load
 * phase: for data already held its stat first, the data only if its mzxid
 * moved). After a lost connection with the session kept, a catch-up
 * instead, as ZooKeeper's own clients re-set their watches: the path is
 * listed again (new and vanished children) and a SetWatches (zk_catch_up)
 * from the last zxid seen before the loss names the children deleted or
 * changed meanwhile, which alone are read (the zxid is held by the C client
 * from the first lost connection until every cache is synced again:
 * zk_catchup_begin/zk_catchup_end); lock contenders followed are
 * listed again (SetWatches covers data only). Issue 13: 20,000 children
 * cost a few SetWatches requests, not 20,000 stat reads. SYNCED follows the
 * first listing of a load phase (and the catch-up's reply) once all its
 * entries are loaded. zk.c adds the watch again before we hear of the
 * connection, so that nothing between the two is missed.
 * Reads that fail for a lost connection leave their entry waiting for the
 * next load phase.
 *
 * Entries are in an open-addressing table by name: a listing of n children
 * costs O(n), and an entry carries no links.
 *
 * Memory at fleet scale (issue 13; 10 workers each caching 20,000 nodes):
 * an entry is 64 bytes plus its name, one allocation (96 bytes from glibc
 * for a ten-digit name), its flags bits; the table adds 11-21 bytes per
 * entry. Every read in flight costs a request, a call and a response
 * buffer, so at most CACHE_MAX_INFLIGHT reads started by listings are in
 * flight at once: the other entries wait, marked queued, for a scan of the
 * table to start them (the load phase waits for them too). Reads caused by
 * an event are never held back.
 */
#include "lib/zk/zk_private.h"
#include "lib/core/log.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/core/xalloc.h"

#define CACHE_MAX_INFLIGHT 256 /* reads started by listings, in flight at once */

/*
 * One child. 64 bytes plus the name (glibc hands out 96 for a ten-digit
 * node name either way); the lock, hash and queue bookkeeping is in bits
 * and in the cache's slot table, not here.
 */
struct ent {
	union {
		struct zk_cache_entry pub;
		/* the same bytes: the bits live in pub.cache_bits, the name
		 * is pub.name */
		struct {
			char at_bits_[offsetof(struct zk_cache_entry, cache_bits)];
			unsigned short visible : 1;   /* ADDED was delivered */
			unsigned short have_data : 1; /* its data was read */
			unsigned short loading : 1; /* (re)loading: UPDATED waits for every read */
			unsigned short changed : 1; /* loading: something differs from before */
			unsigned short in_sync : 1; /* counted in the cache's sync_pending */
			unsigned short queued : 1;  /* waits for its load (counted in nqueued) */
			unsigned short seen : 1;    /* in the listing being processed */
			unsigned short lock_on : 1; /* its lock is followed (locks_wanted) */
			unsigned short retry : 1;   /* a read failed for a lost connection: loaded
						       again by the listing after reconnecting */
			unsigned short data_busy : 1, data_again : 1;
			unsigned short lock_busy : 1, lock_again : 1;
			unsigned short ephemeral : 1; /* its owner is in the cache's eph table */
			unsigned short
			    lock_only : 1; /* queued for its lock listing only (catch-up) */
			unsigned short lock_held : 1; /* ZK_CACHE_LAZY: a lock event waits */
			char name[];		      /* the child name, inline */
		};
	};
};
_Static_assert(offsetof(struct ent, name) == offsetof(struct zk_cache_entry, name),
	       "the entry's bits and name must overlay zk_cache_entry's");
_Static_assert(offsetof(struct ent, name) <= 40,
	       "a node's entry outgrew a 64-byte malloc chunk: issue 13 counts every byte");

/* The owner of an ephemeral child (few: components' registrations). */
struct eph {
	const struct ent *e;
	int64_t owner;
};

/*
 * An entry removed while a read of it was in flight: the reply must not be
 * taken for a child made again under the same name (a component's, say),
 * whose own read was sent after it. Replies come in the order the reads
 * were sent, so the first reply for the name is the ghost's.
 */
struct ghost {
	struct ghost *next;
	unsigned data, lock; /* replies still to come */
	char name[];
};

/*
 * A child we are writing (zk_cache_write_begin/_end): writes in flight,
 * and whether a change event came meanwhile whose read waits for the
 * write's outcome. Few at a time (the writes in flight).
 */
struct own {
	struct own *next;
	unsigned n;	   /* writes in flight */
	unsigned deferred; /* a change event waits for their outcome */
	char name[];
};

struct zk_cache {
	struct zk *zk;
	char *path;
	char *prefix; /* path, or "" for "/": child paths are prefix/name */
	size_t plen;
	unsigned flags;
	zk_cache_cb cb;
	void *arg;
	zk_cache_decode_fn decode;
	zk_cache_free_fn free_obj;
	zk_cache_want_locks_fn want_locks; /* NULL: every entry's lock */
	void *want_arg;

	/* entries by name: open addressing, linear probing, at most 3/4 full */
	struct ent **slots;
	size_t nslots; /* a power of two */
	size_t count;  /* all entries */
	size_t nvisible;
	unsigned gen; /* the session generation our reads belong to */

	int created;   /* the path exists (we made sure) */
	int root_busy; /* its creation or listing is in flight */
	int root_again;
	int synced;
	int syncing;	  /* a load phase: initial, or after a lost connection */
	int sync_listed;  /* its first listing has been processed */
	int sync_pending; /* entries of the phase still loading */
	int inflight;	  /* entry reads in flight (this session) */
	/* catching up after a lost connection (session kept): SetWatches
	 * from catchup_zxid instead of re-reading every entry */
	int catchup;	/* the load phase is a catch-up */
	int cu_counted; /* counted in zk.c's round cu_round (zk_catchup_begin) */
	int sw_pending; /* its zk_catch_up is in flight */
	unsigned cu_round;
	int64_t catchup_zxid;
	size_t nreads;	/* reads submitted (zk_cache_reads) */
	size_t nqueued; /* entries waiting for their load (queued) */
	size_t qcursor; /* the slot the queue scan goes on from */
	struct ghost *ghosts;
	struct own *owns; /* children we are writing */
	/* our creates of sequential children in flight, and the children
	 * created meanwhile whose read waits for them (zk_cache_create_begin) */
	unsigned creating;
	struct own *cwaits;
	size_t nown_applied; /* own writes applied without a read (tests) */
	struct eph *eph;     /* ephemeral children's owners, unordered */
	size_t neph, ephcap;

	const struct zk_cache_entry **arr;
	size_t arrcap;
	int arr_dirty;

	/* ZK_CACHE_LAZY: a zk_cache_refresh is under way (queued entries
	 * are loaded), and whom to tell when it is over */
	int refreshing;
	zk_cache_refreshed_fn refresh_done;
	void *refresh_arg;

	int depth; /* inside our callbacks: free is deferred */
	int freed;
	struct zk_listener listener;
};

static void list_root(struct zk_cache *c);
static void start(struct zk_cache *c);
static void pump(struct zk_cache *c);

/* FNV-1a of n bytes */
static size_t
hash(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ULL;

	while (n-- > 0)
		h = (h ^ (unsigned char)*s++) * 1099511628211ULL;
	return (size_t)h;
}

/* The slot of the entry named name (n bytes), or of the empty slot where
 * it would go. */
static size_t
slot_of(const struct zk_cache *c, const char *name, size_t n)
{
	size_t mask = c->nslots - 1, i = hash(name, n) & mask;
	struct ent *e;

	while ((e = c->slots[i]) != NULL && (strncmp(e->name, name, n) != 0 || e->name[n] != '\0'))
		i = (i + 1) & mask;
	return i;
}

static struct ent *
lookup_n(const struct zk_cache *c, const char *name, size_t n)
{
	return c->slots[slot_of(c, name, n)];
}

static struct ent *
lookup(const struct zk_cache *c, const char *name)
{
	return lookup_n(c, name, strlen(name));
}

static void
grow(struct zk_cache *c)
{
	struct ent **old = c->slots;
	size_t n = c->nslots, i;

	c->nslots *= 2;
	c->slots = xcalloc(c->nslots, sizeof(*c->slots));
	for (i = 0; i < n; i++) {
		if (old[i] != NULL)
			c->slots[slot_of(c, old[i]->name, strlen(old[i]->name))] = old[i];
	}
	free(old);
	c->qcursor = 0;
}

static struct ent *
ent_add(struct zk_cache *c, const char *name)
{
	size_t len = strlen(name);
	/* a node's entry ("0000000042") is a 64-byte malloc chunk */
	struct ent *e = xcalloc(1, offsetof(struct ent, name) + len + 1);

	memcpy(e->name, name, len + 1);
	if ((c->count + 1) * 4 > c->nslots * 3)
		grow(c);
	c->slots[slot_of(c, name, len)] = e;
	c->count++;
	return e;
}

static size_t
eph_find(const struct zk_cache *c, const struct ent *e)
{
	size_t i;

	for (i = 0; i < c->neph && c->eph[i].e != e; i++)
		;
	return i;
}

/* Records e's owner (0: persistent, forgotten). */
static void
eph_set(struct zk_cache *c, struct ent *e, int64_t owner)
{
	size_t i = e->ephemeral ? eph_find(c, e) : c->neph;

	if (owner == 0) {
		if (i < c->neph)
			c->eph[i] = c->eph[--c->neph];
		e->ephemeral = 0;
		return;
	}
	if (i == c->neph) {
		if (c->neph == c->ephcap) {
			c->ephcap = c->ephcap ? c->ephcap * 2 : 8;
			c->eph = realloc(c->eph, c->ephcap * sizeof(*c->eph));
			if (c->eph == NULL)
				abort();
		}
		c->eph[c->neph++].e = e;
	}
	c->eph[i].owner = owner;
	e->ephemeral = 1;
}

static void
ent_free(struct zk_cache *c, struct ent *e)
{
	if (e->ephemeral)
		eph_set(c, e, 0);
	if (e->pub.obj != NULL && c->free_obj != NULL)
		c->free_obj(e->pub.obj);
	free((char *)e->pub.data);
	free(e);
}

/* Out of the table (backward-shift deletion: no tombstones). */
static void
ent_unlink(struct zk_cache *c, struct ent *e)
{
	size_t mask = c->nslots - 1, i = slot_of(c, e->name, strlen(e->name)), j = i, k;

	c->slots[i] = NULL;
	for (;;) {
		j = (j + 1) & mask;
		if (c->slots[j] == NULL)
			break;
		k = hash(c->slots[j]->name, strlen(c->slots[j]->name)) & mask;
		/* move it back unless its home lies cyclically in (i, j] */
		if ((i <= j) ? (i < k && k <= j) : (i < k || k <= j))
			continue;
		c->slots[i] = c->slots[j];
		c->slots[j] = NULL;
		i = j;
	}
	c->count--;
	if (e->queued) {
		e->queued = 0;
		c->nqueued--;
	}
	if (e->visible) {
		c->nvisible--;
		c->arr_dirty = 1;
	}
}

static void
emit(struct zk_cache *c, enum zk_cache_event ev, const struct ent *e)
{
	if (c->cb != NULL && !c->freed)
		c->cb(c, ev, e != NULL ? &e->pub : NULL, c->arg);
}

static void
enter(struct zk_cache *c)
{
	c->depth++;
}

static void cache_destroy(struct zk_cache *c);

static void
leave(struct zk_cache *c)
{
	if (--c->depth == 0 && c->freed)
		cache_destroy(c);
}

/* Child path: prefix/name[suffix]. */
static char *
child_path(const struct zk_cache *c, const char *name, const char *suffix)
{
	size_t n = c->plen + strlen(name) + strlen(suffix) + 2;
	char *p = malloc(n);

	if (p == NULL)
		abort();
	snprintf(p, n, "%s/%s%s", c->prefix, name, suffix);
	return p;
}

/* The entry a result or event path is about (NULL: not ours, or gone);
 * *sub is what follows the child's name ("", "/lock", "/lock/<contender>"). */
static struct ent *
ent_of(const struct zk_cache *c, const char *path, const char **sub)
{
	const char *s, *end;
	size_t n;

	if (strncmp(path, c->prefix, c->plen) != 0 || path[c->plen] != '/')
		return NULL;
	s = path + c->plen + 1;
	end = strchr(s, '/');
	n = end != NULL ? (size_t)(end - s) : strlen(s);
	*sub = s + n;
	return n > 0 ? lookup_n(c, s, n) : NULL;
}

/* ---- loading entries --------------------------------------------------------- */

static void
sync_check(struct zk_cache *c)
{
	if (c->syncing && c->sync_listed && c->sync_pending == 0 && c->sw_pending == 0) {
		c->syncing = 0;
		c->synced = 1;
		log_debug("zk cache %s: synced, %zu entries", c->path, c->nvisible);
		if (c->cu_counted) {
			/* caught up: what changed since the zxid is read */
			c->cu_counted = 0;
			zk_catchup_end(c->zk, c->cu_round, 1);
		}
		emit(c, ZK_CACHE_SYNCED, NULL);
	}
}

static void
announce(struct zk_cache *c, struct ent *e)
{
	e->visible = 1;
	c->nvisible++;
	c->arr_dirty = 1;
	emit(c, ZK_CACHE_ADDED, e);
}

/* A loading entry whose reads are all back is announced (ADDED), or
 * reported if it changed (UPDATED). */
static void
check_loaded(struct zk_cache *c, struct ent *e)
{
	if (!e->loading || e->data_busy || e->lock_busy || e->queued || e->retry)
		return;
	e->loading = 0;
	if (e->in_sync) {
		e->in_sync = 0;
		c->sync_pending--;
	}
	if (!e->visible) {
		/* a read that failed for good leaves it unannounced */
		if (!(c->flags & ZK_CACHE_DATA) || e->have_data)
			announce(c, e);
	} else if (e->changed) {
		emit(c, ZK_CACHE_UPDATED, e);
	}
	e->changed = 0;
	if (!c->freed)
		sync_check(c);
}

/* Something the user reads changed: reported now, or (loading) once the
 * entry is loaded. */
static void
ent_changed(struct zk_cache *c, struct ent *e)
{
	if (e->loading)
		e->changed = 1;
	else if (e->visible)
		emit(c, ZK_CACHE_UPDATED, e);
}

/* Follow this entry's lock contenders? With a filter, only once its data
 * is known (the filter reads the decoded object). */
static int
locks_wanted(const struct zk_cache *c, const struct ent *e)
{
	if (!(c->flags & ZK_CACHE_LOCKS))
		return 0;
	if (c->want_locks == NULL)
		return 1;
	return e->have_data && c->want_locks(&e->pub, c->want_arg);
}

static void data_read(const struct zk_result *r, void *arg);
static void stat_read(const struct zk_result *r, void *arg);
static void lock_read(const struct zk_result *r, void *arg);

static void
submit_read(struct zk_cache *c, struct ent *e, enum zk_op_kind kind, const char *suffix,
	    zk_result_cb cb)
{
	char *p = child_path(c, e->name, suffix);
	struct zk_req req = {.kind = kind, .path = p, .cb = cb, .arg = c, .owner = c};

	c->inflight++;
	c->nreads++;
	zk_submit(c->zk, &req);
	free(p);
}

/* Read the entry's data; one in flight is read again once back (it may
 * predate the change that asks for this one). */
static void
read_data(struct zk_cache *c, struct ent *e)
{
	if (e->data_busy) {
		e->data_again = 1;
		return;
	}
	e->data_busy = 1;
	submit_read(c, e, ZK_OP_GET, "", data_read);
}

/* Re-check data we have (a load phase): its stat first, the data only if
 * its mzxid moved. A re-sync of 20,000 unchanged nodes then moves 20,000
 * stats, not 20,000 records. */
static void
check_data(struct zk_cache *c, struct ent *e)
{
	if (!e->have_data || e->data_busy) {
		read_data(c, e);
		return;
	}
	e->data_busy = 1;
	submit_read(c, e, ZK_OP_EXISTS, "", stat_read);
}

/* List the contenders in the entry's lock dir (likewise). */
static void
read_lock(struct zk_cache *c, struct ent *e)
{
	if (e->lock_busy) {
		e->lock_again = 1;
		return;
	}
	e->lock_busy = 1;
	submit_read(c, e, ZK_OP_CHILDREN, "/lock", lock_read);
}

static void
set_locked(struct zk_cache *c, struct ent *e, int locked)
{
	if (locked > SHRT_MAX)
		locked = SHRT_MAX;
	if (e->pub.locked == locked)
		return;
	e->pub.locked = locked;
	ent_changed(c, e);
}

/* Follow the entry's lock from now on, or no longer (then it reads 0). */
static void
lock_follow(struct zk_cache *c, struct ent *e)
{
	if (locks_wanted(c, e)) {
		if (!e->lock_on) {
			e->lock_on = 1;
			read_lock(c, e);
		}
	} else if (e->lock_on) {
		e->lock_on = 0;
		set_locked(c, e, 0);
	}
}

/*
 * (Re)load an entry: read its data (ZK_CACHE_DATA) and its lock
 * contenders (if followed); ADDED or UPDATED once they are back. Without
 * any read to make, a new entry is announced at once.
 */
static void
ent_load_ex(struct zk_cache *c, struct ent *e, int fresh)
{
	/* held for its events (ZK_CACHE_LAZY): its data changed, or it is
	 * new (no stat first); its lock is read if an event asked (or it
	 * was not followed yet); a fresh entry's is counted from events */
	int held_load = c->refreshing && !c->syncing;
	int lock = (!held_load || e->lock_held || !e->lock_on) && !fresh;

	if (!e->loading) {
		e->loading = 1;
		e->changed = 0;
	}
	e->retry = 0;
	e->lock_held = 0;
	if ((c->flags & ZK_CACHE_DATA) && held_load)
		read_data(c, e);
	else if (c->flags & ZK_CACHE_DATA)
		check_data(c, e);
	if (locks_wanted(c, e) && lock) {
		e->lock_on = 1;
		read_lock(c, e);
	}
	check_loaded(c, e);
}

static void
ent_load(struct zk_cache *c, struct ent *e)
{
	ent_load_ex(c, e, 0);
}

/*
 * A child ZooKeeper told us was created (synced, connected): its lock
 * contenders are counted from 0 by their events, with no listing (issue
 * 25: one per node made), since the events of everything made below it
 * come after the event of its creation. Followed until its data says
 * otherwise (the lock filter, asked then as for any entry).
 */
static void
ent_load_created(struct zk_cache *c, struct ent *e)
{
	int fresh = (c->flags & ZK_CACHE_LOCKS) && !c->syncing && zk_is_connected(c->zk);

	if (fresh) {
		e->lock_on = 1;
		e->pub.locked = 0;
	}
	ent_load_ex(c, e, fresh);
}

/* ZK_CACHE_LAZY, synced and no refresh under way: reads for events wait. */
static int
held(const struct zk_cache *c)
{
	return (c->flags & ZK_CACHE_LAZY) && !c->syncing && !c->refreshing;
}

/* An event asks to load e (lock_only: its lock contenders only): now, or,
 * while held, queued until zk_cache_refresh; a full load asked for
 * meanwhile wins over a lock-only one. 1 when queued. */
static int
hold(struct zk_cache *c, struct ent *e, int lock_only)
{
	if (!held(c))
		return 0;
	if (!e->loading) {
		e->loading = 1;
		e->changed = 0;
	}
	if (lock_only)
		e->lock_held = 1;
	if (e->queued) {
		if (!lock_only)
			e->lock_only = 0;
		return 1;
	}
	e->lock_only = lock_only;
	e->queued = 1;
	c->nqueued++;
	return 1;
}

/* Start the loads of queued entries while fewer than CACHE_MAX_INFLIGHT
 * reads are in flight: a scan of the slots that goes on where it stopped.
 * Not while disconnected: they would only fail; the listing after the
 * reconnection pumps again. */
static void
pump(struct zk_cache *c)
{
	size_t scanned = 0;
	struct ent *e;

	while (!held(c) && !c->freed && c->nqueued > 0 && c->inflight < CACHE_MAX_INFLIGHT &&
	       zk_is_connected(c->zk) && scanned <= c->nslots) {
		if (c->qcursor >= c->nslots)
			c->qcursor = 0;
		e = c->slots[c->qcursor];
		if (e == NULL || !e->queued) {
			c->qcursor++;
			scanned++;
			continue;
		}
		e->queued = 0;
		c->nqueued--;
		if (e->lock_only) {
			/* a catch-up (or ZK_CACHE_LAZY): only its lock
			 * contenders are unknown */
			e->lock_only = 0;
			e->lock_held = 0;
			if (e->lock_on)
				read_lock(c, e);
			check_loaded(c, e);
		} else {
			ent_load(c, e);
		}
	}
	if (c->refreshing && !c->freed && c->nqueued == 0 && c->inflight == 0) {
		/* every read the refresh asked for is back */
		zk_cache_refreshed_fn done = c->refresh_done;

		c->refreshing = 0;
		c->refresh_done = NULL;
		if (done != NULL)
			done(c, c->refresh_arg);
	}
}

/* The entry's data from a read's answer (r->value NUL-ended, r->len
 * bytes). With a codec, decoded straight from the answer: the text is
 * copied only when it does not decode (kept undecoded). */
static void
set_data(struct zk_cache *c, struct ent *e, const struct zk_result *r)
{
	void *obj = NULL;
	char *text = NULL;

	if (c->decode != NULL) {
		obj = c->decode(e->name, r->value, r->len);
		if (obj == NULL)
			log_warn("zk cache %s: cannot decode %s (%d bytes); kept undecoded",
				 c->path, e->name, r->len);
	}
	if (obj == NULL && r->len > 0) {
		if ((text = malloc((size_t)r->len + 1)) == NULL)
			abort();
		memcpy(text, r->value, (size_t)r->len + 1);
	}
	free((char *)e->pub.data);
	e->pub.data = text; /* the object stands for the text: not kept twice */
	e->pub.len = r->len;
	e->have_data = 1;
	if (c->decode != NULL) {
		if (e->pub.obj != NULL && c->free_obj != NULL)
			c->free_obj(e->pub.obj);
		e->pub.obj = obj;
	}
}

/* An object handed over with our own write that the cache does not keep. */
static void
obj_drop(struct zk_cache *c, void *obj)
{
	if (obj != NULL && c->free_obj != NULL)
		c->free_obj(obj);
}

/* set_data from bytes that need not end in a NUL (a write's or a create's
 * own data, len >= 0): as a read's answer would give them. */
static void
set_data_bytes(struct zk_cache *c, struct ent *e, const void *data, int len)
{
	struct zk_result r;
	char *text = xmalloc((size_t)len + 1); /* set_data wants it NUL-ended */

	if (len > 0)
		memcpy(text, data, (size_t)len);
	text[len] = '\0';
	memset(&r, 0, sizeof(r));
	r.rc = ZOK;
	r.value = text;
	r.len = len;
	set_data(c, e, &r);
	free(text);
}

/* What our own write gives is enough to set an entry's data from. */
static int
own_applicable(const struct zk_cache *c, const void *data, int len, const void *obj)
{
	return len >= 0 && (data != NULL || len == 0 || (obj != NULL && c->decode != NULL));
}

/*
 * The entry takes obj, the object the codec would decode from the len
 * bytes written (our own write or create, issue 25: decoding our own
 * bytes back was a fifth of the launcher's loop), instead of decoding
 * them: as set_data would leave it, with no bytes kept (a decoded body is
 * not held twice). Without obj (or without a codec), the bytes as a
 * read's answer; data may be NULL only with obj. obj is the cache's.
 */
static void
set_data_own(struct zk_cache *c, struct ent *e, const void *data, int len, void *obj)
{
	if (obj == NULL || c->decode == NULL) {
		obj_drop(c, obj); /* no codec: no object of its kind */
		set_data_bytes(c, e, data, len);
		return;
	}
	free((char *)e->pub.data);
	e->pub.data = NULL;
	e->pub.len = len;
	e->have_data = 1;
	if (e->pub.obj != NULL && c->free_obj != NULL)
		c->free_obj(e->pub.obj);
	e->pub.obj = obj;
}

/* Our reads fail for a lost connection: the listing after it redoes them
 * (retry: for an entry not loading too, since a catch-up would not). */
static int
transient(int rc)
{
	return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZSESSIONEXPIRED ||
	       rc == ZINVALIDSTATE || rc == ZSESSIONMOVED || rc == ZCLOSING ||
	       rc == ZSSLCONNECTIONERROR;
}

static void
ghosts_free(struct zk_cache *c)
{
	struct ghost *g;

	while ((g = c->ghosts) != NULL) {
		c->ghosts = g->next;
		free(g);
	}
}

static struct own *
own_find(const struct zk_cache *c, const char *name)
{
	struct own *o;

	for (o = c->owns; o != NULL && strcmp(o->name, name) != 0; o = o->next)
		;
	return o;
}

static void
owns_free(struct zk_cache *c)
{
	struct own *o;

	while ((o = c->owns) != NULL) {
		c->owns = o->next;
		free(o);
	}
	while ((o = c->cwaits) != NULL) {
		c->cwaits = o->next;
		free(o);
	}
}

/* A child created while our creates are in flight: unannounced, its read
 * waits for their replies (zk_cache_create_end). Its lock contenders are
 * counted from their events from now on, as ent_load_created's. */
static void
create_wait(struct zk_cache *c, struct ent *e)
{
	size_t n = strlen(e->name);
	struct own *o = xcalloc(1, sizeof(*o) + n + 1);

	memcpy(o->name, e->name, n + 1);
	o->next = c->cwaits;
	c->cwaits = o;
	if ((c->flags & ZK_CACHE_LOCKS) && zk_is_connected(c->zk)) {
		e->lock_on = 1;
		e->pub.locked = 0;
	}
	if (!e->loading) {
		e->loading = 1;
		e->changed = 0;
	}
}

/* Take name off the waiting list: 1 if it was on it. */
static int
create_unwait(struct zk_cache *c, const char *name)
{
	struct own *o, **po;

	for (po = &c->cwaits; (o = *po) != NULL && strcmp(o->name, name) != 0; po = &o->next)
		;
	if (o == NULL)
		return 0;
	*po = o->next;
	free(o);
	return 1;
}

static void
remove_ent(struct zk_cache *c, struct ent *e)
{
	struct ghost *g;
	size_t n;

	if (e->data_busy || e->lock_busy) {
		n = strlen(e->name);
		g = xcalloc(1, sizeof(*g) + n + 1);
		memcpy(g->name, e->name, n + 1);
		g->data = e->data_busy;
		g->lock = e->lock_busy;
		g->next = c->ghosts;
		c->ghosts = g;
	}
	ent_unlink(c, e);
	if (e->visible)
		emit(c, ZK_CACHE_REMOVED, e);
	if (e->in_sync) {
		/* the load phase no longer waits for it */
		c->sync_pending--;
		if (!c->freed)
			sync_check(c);
	}
	ent_free(c, e);
}

/* The entry a reply to one of our reads (lock: a lock listing) is for;
 * NULL for a reply about an entry gone meanwhile (or a ghost's). */
static struct ent *
reply_ent(struct zk_cache *c, const struct zk_result *r, int lock)
{
	struct ghost **pg, *g;
	const char *s, *end;
	size_t n;

	c->inflight--;
	if (strncmp(r->path, c->prefix, c->plen) != 0 || r->path[c->plen] != '/')
		return NULL;
	s = r->path + c->plen + 1;
	end = strchr(s, '/');
	n = end != NULL ? (size_t)(end - s) : strlen(s);
	for (pg = &c->ghosts; (g = *pg) != NULL; pg = &g->next) {
		if (strncmp(g->name, s, n) != 0 || g->name[n] != '\0' ||
		    (lock ? g->lock : g->data) == 0)
			continue;
		if (lock)
			g->lock = 0;
		else
			g->data = 0;
		if (g->data == 0 && g->lock == 0) {
			*pg = g->next;
			free(g);
		}
		return NULL;
	}
	return lookup_n(c, s, n);
}

/*
 * The end of a data or stat reply for e (its success handled by the
 * caller): a failure's outcome, then the read asked for meanwhile, then
 * whether e's load is complete. e may be freed here (deleted).
 */
static void
data_reply_end(struct zk_cache *c, struct ent *e, const struct zk_result *r)
{
	if (r->rc == ZNONODE) {
		/* deleted: its event says so too, unless it went while we
		 * were disconnected (the listing we re-read for lists it no
		 * more) */
		remove_ent(c, e);
		return;
	}
	if (r->rc != ZOK) {
		if (transient(r->rc))
			/* the re-sync after reconnecting reads it again; a
			 * load waits for that */
			e->retry = 1;
		else
			/* will not go away: announced without data, never */
			log_warn("zk cache %s: reading %s: %s", c->path, r->path,
				 zk_strerror(r->rc));
		e->data_again = 0;
	}
	if (!c->freed && e->data_again) {
		e->data_again = 0;
		read_data(c, e);
	}
	if (!c->freed)
		check_loaded(c, e);
}

static void
data_read(const struct zk_result *r, void *arg)
{
	struct zk_cache *c = arg;
	struct ent *e;

	if (r->gen != c->gen)
		return;
	enter(c);
	if ((e = reply_ent(c, r, 0)) == NULL)
		goto out;
	e->data_busy = 0;
	if (r->rc == ZOK) {
		/* a read sent before one of our writes may come back after
		 * the write was applied (zk_cache_write_end): only newer data
		 * replaces what we hold (zxids only grow) */
		if (!e->have_data || r->stat->mzxid > e->pub.stat.mzxid) {
			set_data(c, e, r);
			e->pub.stat.mzxid = r->stat->mzxid;
			e->pub.stat.version = r->stat->version;
			if (r->stat->ephemeral_owner != 0 || e->ephemeral)
				eph_set(c, e, r->stat->ephemeral_owner);
			ent_changed(c, e);
		}
		/* the filter may now want its lock, or no longer */
		if (!c->freed)
			lock_follow(c, e);
	}
	data_reply_end(c, e, r);
out:
	pump(c);
	leave(c);
}

static void
stat_read(const struct zk_result *r, void *arg)
{
	struct zk_cache *c = arg;
	struct ent *e;

	if (r->gen != c->gen)
		return;
	enter(c);
	if ((e = reply_ent(c, r, 0)) == NULL)
		goto out;
	e->data_busy = 0;
	if (r->rc == ZOK && r->stat->mzxid != e->pub.stat.mzxid)
		e->data_again = 1; /* moved: read it */
	data_reply_end(c, e, r);
out:
	pump(c);
	leave(c);
}

static int
count_contenders(int n, char *const *names)
{
	int i, k = 0;

	for (i = 0; i < n; i++)
		k += zk_lock_seq(names[i]) != NULL;
	return k;
}

static void
lock_read(const struct zk_result *r, void *arg)
{
	struct zk_cache *c = arg;
	struct ent *e;

	if (r->gen != c->gen)
		return;
	enter(c);
	if ((e = reply_ent(c, r, 1)) == NULL)
		goto out;
	e->lock_busy = 0;
	if (!e->lock_on) {
		e->lock_again = 0; /* no longer followed: reads 0 */
	} else if (r->rc == ZOK) {
		set_locked(c, e, count_contenders(r->count, r->names));
	} else if (r->rc == ZNONODE) {
		set_locked(c, e, 0); /* no lock dir (yet) */
	} else if (transient(r->rc)) {
		e->lock_again = 0;
		e->retry = 1;
	} else {
		log_warn("zk cache %s: listing %s: %s", c->path, r->path, zk_strerror(r->rc));
		e->lock_again = 0;
	}
	if (!c->freed && e->lock_again) {
		e->lock_again = 0;
		read_lock(c, e);
	}
	if (!c->freed)
		check_loaded(c, e);
out:
	pump(c);
	leave(c);
}

/*
 * A contender in e's followed lock dir came or went (sub "/lock/<name>"),
 * or the dir itself (sub "/lock"): the count follows the event, with no
 * listing (issue 25: a lock taken and released cost two listings of the
 * dir in every process that follows it). The recursive watch tells of
 * every contender created and deleted while connected, and the count
 * starts from a listing (the entry's load, the re-sync after a lost
 * connection, whose events are lost), so it stays exact. 1 when counted;
 * 0 when the dir must be listed: a listing is in flight (read again once
 * back, as before), or the count is out of step (a deletion below 0).
 */
static int
lock_event(struct zk_cache *c, struct ent *e, const char *sub, int type)
{
	if (e->lock_busy)
		return 0;
	if (strcmp(sub, "/lock") == 0) {
		if (type == ZOO_DELETED_EVENT)
			set_locked(c, e, 0);
		return 1; /* a new dir has no contender yet: theirs follow */
	}
	if (zk_lock_seq(sub + 6) == NULL)
		return 1; /* not a contender: not counted by a listing either */
	if (type == ZOO_CREATED_EVENT && e->pub.locked < SHRT_MAX) {
		set_locked(c, e, e->pub.locked + 1);
		return 1;
	}
	if (type == ZOO_DELETED_EVENT && e->pub.locked > 0) {
		set_locked(c, e, e->pub.locked - 1);
		return 1;
	}
	return 0;
}

/* A change event for e while we write it: its read waits for the write's
 * reply (1), or there is no write of ours in flight (0). */
static int
own_defer(struct zk_cache *c, struct ent *e)
{
	struct own *o = own_find(c, e->name);

	if (o == NULL || o->n == 0)
		return 0;
	o->deferred = 1;
	return 1;
}

/*
 * The cache's recursive watch fired for path (zk_watch_tree): the path
 * itself, a child (created, deleted, data changed), the child's lock dir
 * or a contender in it (created, deleted); anything deeper is not ours.
 */
static void
tree_event(int type, const char *path, void *arg)
{
	struct zk_cache *c = arg;
	const char *sub = "";
	struct ent *e;
	size_t b;

	enter(c);
	if (strcmp(path, c->path) == 0) {
		if (type == ZOO_DELETED_EVENT && c->created) {
			/* the path itself was deleted: everything under it is
			 * gone (its children's events came first); make it
			 * again */
			for (b = 0; b < c->nslots && !c->freed; b++) {
				while ((e = c->slots[b]) != NULL && !c->freed)
					remove_ent(c, e);
			}
			c->created = 0;
			if (!c->freed)
				start(c);
		}
		goto out;
	}
	if (strncmp(path, c->prefix, c->plen) != 0 || path[c->plen] != '/')
		goto out;
	e = ent_of(c, path, &sub);
	if (*sub == '\0') {
		if (type == ZOO_DELETED_EVENT) {
			if (e != NULL)
				remove_ent(c, e);
		} else if (e == NULL) {
			/* created (or changed before we knew it): load it */
			e = ent_add(c, path + c->plen + 1);
			if (hold(c, e, 0))
				; /* read at the next refresh */
			else if (type == ZOO_CREATED_EVENT && c->creating > 0 &&
				 (c->flags & ZK_CACHE_DATA) && !c->syncing)
				create_wait(c, e); /* ours, maybe: the reply says */
			else if (type == ZOO_CREATED_EVENT)
				ent_load_created(c, e);
			else
				ent_load(c, e);
		} else if (type == ZOO_CREATED_EVENT) {
			/* deleted and made again between two of our looks */
			if (!hold(c, e, 0))
				ent_load(c, e);
		} else if (type == ZOO_CHANGED_EVENT && (c->flags & ZK_CACHE_DATA) &&
			   hold(c, e, 0)) {
			/* read at the next refresh */
		} else if (type == ZOO_CHANGED_EVENT && (c->flags & ZK_CACHE_DATA) &&
			   !(c->syncing && c->catchup) && c->owns != NULL && own_defer(c, e)) {
			/* we are writing it: the write's reply says whether
			 * this change is ours (zk_cache_write_end) */
		} else if (type == ZOO_CHANGED_EVENT && (c->flags & ZK_CACHE_DATA)) {
			if (c->syncing && c->catchup) {
				/* named by the catch-up (or changed during
				 * it): SYNCED waits for the read */
				if (!e->loading) {
					e->loading = 1;
					e->changed = 0;
				}
				if (!e->in_sync) {
					e->in_sync = 1;
					c->sync_pending++;
				}
			}
			read_data(c, e);
		}
	} else if (e != NULL && e->lock_on &&
		   (strcmp(sub, "/lock") == 0 ||
		    (strncmp(sub, "/lock/", 6) == 0 && strchr(sub + 6, '/') == NULL)) &&
		   type != ZOO_CHANGED_EVENT) {
		/* the lock dir or a contender came or went: counted from
		 * the event, else listed */
		if (!lock_event(c, e, sub, type) && !hold(c, e, 1))
			read_lock(c, e);
	}
out:
	pump(c);
	leave(c);
}

/* ---- the listing of the path ------------------------------------------------- */

static void
root_listed(const struct zk_result *r, void *arg)
{
	struct zk_cache *c = arg;
	struct ent *e, **gone;
	size_t b, ngone = 0;
	int i, reload, catchup, lock_only;

	if (r->gen != c->gen)
		return;
	enter(c);
	c->root_busy = 0;
	if (r->rc == ZNONODE) {
		/* deleted before we listed it: its deletion event follows
		 * and makes it again (or did already) */
		c->created = 0;
		start(c);
		goto out;
	}
	if (r->rc != ZOK) {
		if (!transient(r->rc))
			log_warn("zk cache %s: listing: %s", c->path, zk_strerror(r->rc));
		goto out;
	}
	for (i = 0; i < r->count; i++) {
		if ((e = lookup(c, r->names[i])) == NULL)
			e = ent_add(c, r->names[i]);
		e->seen = 1;
	}
	/* gone from the listing: removed (collected first, since removing
	 * moves entries between slots) */
	gone = xcalloc(c->count, sizeof(*gone));
	for (b = 0; b < c->nslots; b++) {
		if ((e = c->slots[b]) != NULL && !e->seen)
			gone[ngone++] = e;
	}
	for (b = 0; b < ngone && !c->freed; b++)
		remove_ent(c, gone[b]);
	free(gone);
	/* Present: load what is new; in a load phase (initial, or after a
	 * new session: events were missed) re-read everything. In a
	 * catch-up (a lost connection, session kept), the SetWatches names
	 * what changed: here load what is new, what a lost connection left
	 * unread (retry) and the lock contenders followed (SetWatches covers
	 * data only), and wait for what is loading. Past CACHE_MAX_INFLIGHT
	 * reads they wait in the queue. */
	reload = c->syncing && !c->sync_listed;
	catchup = reload && c->catchup;
	for (b = 0; b < c->nslots && !c->freed; b++) {
		if ((e = c->slots[b]) == NULL)
			continue;
		e->seen = 0;
		lock_only = 0;
		if (catchup && !e->retry && (e->visible || e->loading)) {
			if (e->loading) {
				/* queued (its load reads the lock too), or its
				 * reads in flight (the lock may predate the
				 * cut: read again) */
				if (!e->in_sync) {
					e->in_sync = 1;
					c->sync_pending++;
				}
				if (!e->queued && e->lock_on)
					read_lock(c, e);
				continue;
			}
			if (!e->lock_on)
				continue;
			lock_only = 1;
		} else if (!reload && (e->visible || e->loading)) {
			continue;
		}
		if (reload && !e->in_sync) {
			e->in_sync = 1;
			c->sync_pending++;
		}
		if (e->queued) {
			if (!lock_only)
				e->lock_only = 0; /* a full load after all */
			continue;
		}
		if (!e->loading) {
			e->loading = 1;
			e->changed = 0;
		}
		e->lock_only = lock_only;
		e->queued = 1;
		c->nqueued++;
	}
	c->qcursor = 0;
	pump(c);
	if (!c->freed && reload) {
		c->sync_listed = 1;
		sync_check(c);
	}
	if (!c->freed && c->root_again) {
		c->root_again = 0;
		list_root(c);
	}
out:
	leave(c);
}

static void
list_root(struct zk_cache *c)
{
	struct zk_req req = {
	    .kind = ZK_OP_CHILDREN, .path = c->path, .cb = root_listed, .arg = c, .owner = c};

	if (!c->created) {
		start(c);
		return;
	}
	if (c->root_busy) {
		c->root_again = 1;
		return;
	}
	c->root_busy = 1;
	zk_submit(c->zk, &req);
}

static void
root_created(const struct zk_result *r, void *arg)
{
	struct zk_cache *c = arg;

	if (r->gen != c->gen)
		return;
	enter(c);
	c->root_busy = 0;
	if (r->rc == ZOK || r->rc == ZNODEEXISTS) {
		c->created = 1;
		c->root_again = 0;
		list_root(c);
	} else if (!transient(r->rc)) {
		log_warn("zk cache %s: creating: %s", c->path, zk_strerror(r->rc));
	}
	leave(c);
}

/* Make sure the path exists, then list it. */
static void
start(struct zk_cache *c)
{
	struct zk_req req = {.kind = ZK_OP_CREATE,
			     .path = c->path,
			     .makepath = 1,
			     .cb = root_created,
			     .arg = c,
			     .owner = c};

	if (c->root_busy) {
		c->root_again = 1;
		return;
	}
	c->root_busy = 1;
	zk_submit(c->zk, &req);
}

/* ---- catching up after a lost connection ----------------------------------- */

static void
caught_up(const struct zk_result *r, void *arg)
{
	struct zk_cache *c = arg;

	if (r->gen != c->gen)
		return;
	enter(c);
	c->sw_pending = 0;
	if (r->rc == ZOK) {
		/* the events it caused came first: their reads are counted */
		sync_check(c);
	} else if (!transient(r->rc)) {
		log_warn("zk cache %s: catching up: %s; re-reading every entry", c->path,
			 zk_strerror(r->rc));
		c->catchup = 0;
		c->sync_listed = 0; /* the next listing re-reads everything */
		list_root(c);
	} /* else a lost connection again: the next reconnection catches up
	     from the same zxid (zk.c's point stays held) */
	pump(c);
	leave(c);
}

/*
 * After a lost connection (session kept): SetWatches for the data we hold,
 * from the last zxid seen before it was lost; the server names what was
 * deleted or changed since (tree_event reads it), instead of a stat read
 * per entry. Without ZK_CACHE_DATA only deletions matter: the listing
 * finds those.
 */
static void
catch_up(struct zk_cache *c)
{
	const char **paths;
	char **own;
	size_t b, n = 0;
	struct ent *e;

	if (!(c->flags & ZK_CACHE_DATA) || c->count == 0)
		return;
	own = xcalloc(c->count, sizeof(*own));
	for (b = 0; b < c->nslots; b++) {
		if ((e = c->slots[b]) != NULL && e->have_data)
			own[n++] = child_path(c, e->name, "");
	}
	if (n == 0) {
		free(own);
		return;
	}
	paths = (const char **)own;
	log_debug("zk cache %s: catching up from zxid 0x%llx, %zu entries", c->path,
		  (unsigned long long)c->catchup_zxid, n);
	c->sw_pending = 1;
	zk_catch_up(c->zk, c->catchup_zxid, paths, (int)n, caught_up, c, c);
	while (n > 0)
		free(own[--n]);
	free(own);
}

/* ---- session events ---------------------------------------------------------- */

/* A load phase re-reads every entry: no change event waits any more. */
static void
owns_clear_deferred(struct zk_cache *c)
{
	struct own *o;

	for (o = c->owns; o != NULL; o = o->next)
		o->deferred = 0;
}

static void
cache_session(struct zk *zk, enum zk_event ev, void *arg)
{
	struct zk_cache *c = arg;
	struct ent *e;
	size_t b;

	enter(c);
	if (ev == ZK_EV_EXPIRED) {
		/* our reads went with the session (their replies are
		 * dropped); the watch is added again by zk.c */
		c->gen = zk_session_gen(zk);
		c->root_busy = c->root_again = 0;
		c->inflight = 0;
		c->nqueued = 0;
		ghosts_free(c);
		for (b = 0; b < c->nslots; b++) {
			if ((e = c->slots[b]) == NULL)
				continue;
			e->data_busy = e->data_again = 0;
			e->lock_busy = e->lock_again = 0;
			e->queued = e->in_sync = e->retry = e->lock_only = e->lock_held = 0;
			e->loading = !e->visible || e->loading;
		}
		c->synced = 0;
		c->syncing = 0;
		c->sync_pending = 0;
		c->catchup = c->cu_counted = c->sw_pending = 0;
		owns_clear_deferred(c);
	} else if (ev == ZK_EV_SUSPENDED) {
		/* what changed meanwhile is unknown until re-read */
		c->synced = 0;
	} else if (ev == ZK_EV_CONNECTED || ev == ZK_EV_RECONNECTED) {
		int kept = c->gen == zk_session_gen(zk);

		if (!kept) {
			c->gen = zk_session_gen(zk);
			c->root_busy = c->root_again = 0;
			c->inflight = 0;
			c->cu_counted = c->sw_pending = 0;
			ghosts_free(c);
		}
		log_debug("zk cache %s: re-syncing (%s)", c->path,
			  ev == ZK_EV_CONNECTED ? "new session" : "lost connection");
		/* A load phase: the events while disconnected are lost (the
		 * recursive watch is back already: zk.c adds it before we
		 * hear of the connection). In a new session the path is
		 * listed again and every entry re-read; after a lost
		 * connection (session kept) a catch-up: the path is listed
		 * again and SetWatches names what changed meanwhile. What
		 * differs is reported, then SYNCED once the listing, the
		 * SetWatches and the reads are back. */
		c->synced = 0;
		c->syncing = 1;
		c->sync_listed = 0;
		c->catchup = ev == ZK_EV_RECONNECTED && kept;
		if (!c->catchup)
			owns_clear_deferred(c);
		c->cu_counted = 0; /* a round before this one is over */
		if (c->catchup && (c->flags & ZK_CACHE_DATA)) {
			/* from the last zxid seen before the first lost
			 * connection not caught up from yet (held by the C
			 * client: not what it has seen since) */
			c->catchup_zxid = zk_catchup_begin(zk, &c->cu_round);
			c->cu_counted = 1;
			/* one still in flight (sent once the connection was
			 * back) is from the same point: its answer counts */
			if (c->created && c->sw_pending == 0)
				catch_up(c);
		}
		list_root(c);
	}
	leave(c);
}

/* ---- public --------------------------------------------------------------------- */

struct zk_cache *
zk_cache_new(struct zk *zk, const char *path, unsigned flags, zk_cache_cb cb, void *arg)
{
	struct zk_cache *c;

	if (zk == NULL || path == NULL || path[0] != '/')
		return NULL;
	c = xcalloc(1, sizeof(*c));
	c->zk = zk;
	c->flags = flags;
	c->cb = cb;
	c->arg = arg;
	if ((c->path = strdup(path)) == NULL)
		abort();
	if ((c->prefix = strdup(strcmp(path, "/") == 0 ? "" : path)) == NULL)
		abort();
	c->plen = strlen(c->prefix);
	c->nslots = 64;
	c->slots = xcalloc(c->nslots, sizeof(*c->slots));
	c->gen = zk_session_gen(zk);
	c->syncing = 1;
	zk_listener_add(zk, &c->listener, cache_session, c);
	/* the watch first: the listing that follows misses nothing */
	zk_watch_tree(zk, c->path, tree_event, c);
	start(c);
	return c;
}

void
zk_cache_set_codec(struct zk_cache *cache, zk_cache_decode_fn decode, zk_cache_free_fn free_obj)
{
	cache->decode = decode;
	cache->free_obj = free_obj;
}

void
zk_cache_set_lock_filter(struct zk_cache *cache, zk_cache_want_locks_fn want, void *arg)
{
	cache->want_locks = want;
	cache->want_arg = arg;
}

static void
cache_destroy(struct zk_cache *c)
{
	struct ent *e;
	size_t b;

	for (b = 0; b < c->nslots; b++) {
		if ((e = c->slots[b]) != NULL)
			ent_free(c, e);
	}
	free(c->slots);
	ghosts_free(c);
	owns_free(c);
	free(c->arr);
	free(c->eph);
	free(c->path);
	free(c->prefix);
	free(c);
}

void
zk_cache_free(struct zk_cache *cache)
{
	if (cache == NULL || cache->freed)
		return;
	cache->freed = 1;
	if (cache->cu_counted) /* nothing left to catch up */
		zk_catchup_end(cache->zk, cache->cu_round, 1);
	zk_cancel(cache->zk, cache);
	zk_listener_remove(cache->zk, &cache->listener);
	if (cache->depth == 0)
		cache_destroy(cache);
}

int
zk_cache_synced(const struct zk_cache *cache)
{
	return cache->synced;
}

const struct zk_cache_entry *
zk_cache_get(const struct zk_cache *cache, const char *name)
{
	struct ent *e = lookup(cache, name);

	return e != NULL && e->visible ? &e->pub : NULL;
}

int64_t
zk_cache_ephemeral_owner(const struct zk_cache *cache, const struct zk_cache_entry *e)
{
	const struct ent *x = (const struct ent *)e;
	size_t i;

	if (!x->ephemeral)
		return 0;
	i = eph_find(cache, x);
	return i < cache->neph ? cache->eph[i].owner : 0;
}

static int
by_name(const void *a, const void *b)
{
	return strcmp((*(const struct zk_cache_entry *const *)a)->name,
		      (*(const struct zk_cache_entry *const *)b)->name);
}

int
zk_cache_entries(const struct zk_cache *cache, const struct zk_cache_entry *const **out)
{
	struct zk_cache *c = (struct zk_cache *)cache; /* the array is a cache of ours */
	struct ent *e;
	size_t b, n = 0;

	if (c->arr_dirty || c->arr == NULL) {
		if (c->arrcap < c->nvisible || c->arr == NULL) {
			c->arrcap = c->nvisible > 16 ? c->nvisible : 16;
			free(c->arr);
			c->arr = xcalloc(c->arrcap, sizeof(*c->arr));
		}
		for (b = 0; b < c->nslots; b++) {
			if ((e = c->slots[b]) != NULL && e->visible)
				c->arr[n++] = &e->pub;
		}
		qsort(c->arr, n, sizeof(*c->arr), by_name);
		c->arr_dirty = 0;
	}
	*out = c->arr;
	return (int)c->nvisible;
}

size_t
zk_cache_unloaded(const struct zk_cache *cache)
{
	return cache != NULL && cache->count > cache->nvisible ? cache->count - cache->nvisible : 0;
}

int
zk_cache_refresh(struct zk_cache *cache, zk_cache_refreshed_fn done, void *arg)
{
	if (!(cache->flags & ZK_CACHE_LAZY) || cache->freed ||
	    (cache->nqueued == 0 && cache->inflight == 0))
		return 1;
	cache->refreshing = 1;
	cache->refresh_done = NULL;
	cache->qcursor = 0;
	enter(cache);
	pump(cache);
	leave(cache);
	if (!cache->refreshing)
		return 1; /* nothing to read after all (a lock no longer followed) */
	cache->refresh_done = done;
	cache->refresh_arg = arg;
	return 0;
}

size_t
zk_cache_held(const struct zk_cache *cache)
{
	return cache != NULL && held(cache) ? cache->nqueued : 0;
}

size_t
zk_cache_reads(const struct zk_cache *cache)
{
	return cache != NULL ? cache->nreads : 0;
}

size_t
zk_cache_reads_pending(const struct zk_cache *cache)
{
	return cache != NULL ? (size_t)cache->inflight + (size_t)cache->nqueued : 0;
}

int
zk_cache_count(const struct zk_cache *cache)
{
	return (int)cache->nvisible;
}

void
zk_cache_write_begin(struct zk_cache *cache, const char *name)
{
	struct own *o;
	size_t n;

	if (cache == NULL || cache->freed || !(cache->flags & ZK_CACHE_DATA))
		return;
	if ((o = own_find(cache, name)) == NULL) {
		n = strlen(name);
		o = xcalloc(1, sizeof(*o) + n + 1);
		memcpy(o->name, name, n + 1);
		o->next = cache->owns;
		cache->owns = o;
	}
	o->n++;
}

/*
 * Why this is exact: ZooKeeper sends a session the events of a change
 * before its reply to any later request, and its reply to our write right
 * after the events of the write itself, all in zxid order. So when the
 * write's reply (mzxid Z) comes, every change event of the child up to Z
 * has come, and none after: those deferred meanwhile are our write's or
 * older ones it overwrote (a set replaces the whole data), and the data at
 * Z is what we wrote. An event after the reply is a change after Z: read
 * as any. A write that failed (or whose outcome is unknown) leaves the
 * deferred events to be read now.
 */
void
zk_cache_write_end(struct zk_cache *cache, const char *name, int ok, const void *data, int len,
		   void *obj, int64_t mzxid, int32_t version)
{
	struct zk_cache *c = cache;
	struct own *o, **po;
	struct ent *e;
	int deferred;

	if (c == NULL)
		return;
	if (c->freed || !(c->flags & ZK_CACHE_DATA)) {
		obj_drop(c, obj);
		return;
	}
	if (!own_applicable(c, data, len, obj))
		ok = 0; /* nothing to apply: read as any change */
	for (po = &c->owns; (o = *po) != NULL && strcmp(o->name, name) != 0; po = &o->next)
		;
	if (o == NULL || o->n == 0) {
		obj_drop(c, obj);
		return; /* not begun (or begun before the cache was) */
	}
	o->n--;
	deferred = o->deferred;
	o->deferred = 0; /* covered by the write, or read below */
	if (o->n == 0) {
		*po = o->next;
		free(o);
	}
	enter(c);
	/* also in a load phase: after a lost connection the catch-up names
	 * only what changed after the last zxid seen, and a change event
	 * deferred before the loss is not named again */
	if ((e = lookup(c, name)) == NULL)
		goto out; /* gone */
	if (ok && mzxid > e->pub.stat.mzxid && e->have_data && len >= 0) {
		set_data_own(c, e, data, len, obj);
		obj = NULL;
		e->pub.stat.mzxid = mzxid;
		e->pub.stat.version = version;
		c->nown_applied++;
		ent_changed(c, e);
		if (!c->freed)
			lock_follow(c, e);
	} else if (deferred && !ok && !hold(c, e, 0)) {
		read_data(c, e);
	}
out:
	obj_drop(c, obj);
	pump(c);
	leave(c);
}

void
zk_cache_create_begin(struct zk_cache *cache)
{
	if (cache == NULL || cache->freed || !(cache->flags & ZK_CACHE_DATA))
		return;
	cache->creating++;
}

/*
 * Why this is exact: the event of a child's creation comes before the
 * reply to the create (a session hears a change's events before any later
 * reply), so our child is on the waiting list when the reply names it,
 * unless it was deleted meanwhile (then its entry is gone too). The data
 * it was made with is its data as of the reply's mzxid; a change after
 * the creation came as an event, which reads it as any (the newer data
 * wins by its mzxid).
 */
void
zk_cache_create_end(struct zk_cache *cache, const char *name, const void *data, int len, void *obj,
		    const struct zk_stat *st)
{
	struct zk_cache *c = cache;
	struct own *o;
	struct ent *e;

	if (c == NULL)
		return;
	if (c->freed || !(c->flags & ZK_CACHE_DATA) || c->creating == 0) {
		obj_drop(c, obj);
		return;
	}
	c->creating--;
	enter(c);
	if (!own_applicable(c, data, len, obj))
		name = NULL; /* nothing to apply: read as another's */
	if (name != NULL && st != NULL && len >= 0 && create_unwait(c, name) &&
	    (e = lookup(c, name)) != NULL && (!e->have_data || st->mzxid > e->pub.stat.mzxid)) {
		if (!e->loading) {
			e->loading = 1;
			e->changed = 0;
		}
		e->pub.stat.mzxid = st->mzxid;
		e->pub.stat.version = st->version;
		if (st->ephemeral_owner != 0)
			eph_set(c, e, st->ephemeral_owner);
		c->nown_applied++;
		set_data_own(c, e, data, len, obj);
		obj = NULL;
		check_loaded(c, e); /* announced: ADDED */
		if (!c->freed)
			lock_follow(c, e);
	}
	/* none of ours in flight: the others created meanwhile are read */
	while (c->creating == 0 && !c->freed && (o = c->cwaits) != NULL) {
		c->cwaits = o->next;
		if ((e = lookup(c, o->name)) != NULL && !e->have_data && !e->data_busy)
			ent_load_ex(c, e, e->lock_on);
		free(o);
	}
	obj_drop(c, obj);
	pump(c);
	leave(c);
}

size_t
zk_cache_own_applied(const struct zk_cache *cache)
{
	return cache != NULL ? cache->nown_applied : 0;
}
