/*
 * Watch-driven caches of the children of one path (zk.h), the C client's
 * stand-in for the persistent recursive watches of upstream's tree caches
 * (the 3.8 C client has none).
 *
 * Watches kept per cache:
 *   <path>                 child watch: children come and go;
 *   <path>/<child>         data watch (ZK_CACHE_DATA);
 *   <path>/<child>         child watch (ZK_CACHE_LOCKS): a "lock" dir appears;
 *   <path>/<child>/lock    child watch (ZK_CACHE_LOCKS): contenders change.
 * Every one is set by the read that also fetches the current state, and
 * re-armed by the read its firing causes, so nothing is polled and no watch
 * is left on a path that does not exist (those would never fire, and pile
 * up for every deleted node).
 *
 * An entry being loaded (new, or re-read after an expiry) counts its reads
 * still in flight; when they are done it is announced (ADDED) or compared
 * with what it was (UPDATED). SYNCED follows the first listing of a load
 * phase once all its entries are loaded. Reads that fail for a lost
 * connection are redone when the session is back (one listing of the path
 * redoes everything missing); an expiry reloads everything.
 *
 * Entries are in a hash table by name: a listing of n children costs O(n).
 *
 * Memory at fleet scale (issue 13; 10 workers each caching 20,000 nodes):
 * every watch costs about 250 bytes in the C client and in zk.c, every read
 * in flight a request, a call and a response buffer. So a lock filter
 * (zk_cache_set_lock_filter) leaves the child and lock watches off the
 * entries whose lock the user does not read (another provider's nodes), and
 * at most CACHE_MAX_INFLIGHT reads started by listings are in flight at once:
 * the others wait in a FIFO (the load phase waits for them too). Reads
 * caused by a watch firing are never held back. Entries are one allocation
 * with their name inline and their flags as bits.
 */
#include "zk_private.h"
#include "log.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define CACHE_MAX_INFLIGHT 256 /* reads started by listings, in flight at once */

struct ent {
	struct zk_cache_entry pub;
	char *data; /* the text, or (packed) its deflated form of zlen bytes */
	struct ent *hnext;
	struct ent *qprev, *qnext; /* the read queue, while queued */
	int64_t old_mzxid;	   /* before a reload, to compare */
	int old_locked;
	int need;	      /* initial reads in flight (while loading) */
	int zlen;	      /* packed: bytes at data */
	unsigned mark;	      /* the listing that last saw it */
	unsigned visible : 1; /* ADDED was delivered */
	unsigned have_data : 1;
	unsigned gone : 1; /* a read found it deleted */
	unsigned data_armed : 1, data_busy : 1;
	unsigned kids_armed : 1, kids_busy : 1;
	unsigned lock_armed : 1, lock_busy : 1;
	unsigned has_lock : 1; /* the last listing of its children showed "lock" */
	unsigned loading : 1;  /* initial reads in flight (need) */
	unsigned in_sync : 1;  /* counted in the cache's sync_pending */
	unsigned queued : 1;   /* waits in the read queue */
	unsigned packed : 1;   /* data holds deflated text */
	char name[];	       /* the child name, inline */
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
	unsigned char *dict; /* ZK_CACHE_PACK: the preset dictionary */
	int dictlen;
	z_stream *zdef, *zinf;		   /* made on first use, reset per entry */
	zk_cache_want_locks_fn want_locks; /* NULL: every entry's lock */
	void *want_arg;

	struct ent **buckets;
	size_t nbuckets;
	size_t count; /* all entries */
	size_t nvisible;
	unsigned mark;
	unsigned gen; /* the session generation our reads belong to */

	int created; /* the path exists (we made sure) */
	int root_armed, root_busy, root_again;
	int root_watching; /* the listing in flight sets the child watch */
	int synced;
	int syncing;		   /* a load phase: initial, or after an expiry */
	int sync_listed;	   /* its first listing has been processed */
	int sync_pending;	   /* entries of the phase still loading */
	int reload;		   /* a new session must reload everything */
	int inflight;		   /* entry reads in flight (this session) */
	struct ent *qhead, *qtail; /* entries waiting to start their reads */

	const struct zk_cache_entry **arr;
	size_t arrcap;
	int arr_dirty;

	int depth; /* inside our callbacks: free is deferred */
	int freed;
	struct zk_listener listener;
};

static void list_root(struct zk_cache *c);
static void start(struct zk_cache *c);
static void pump(struct zk_cache *c);

static void *
xcalloc(size_t n, size_t m)
{
	void *p = calloc(n ? n : 1, m ? m : 1);

	if (p == NULL)
		abort();
	return p;
}

/* FNV-1a */
static size_t
hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ULL;
	return (size_t)h;
}

static struct ent *
lookup(const struct zk_cache *c, const char *name)
{
	struct ent *e;

	for (e = c->buckets[hash(name) & (c->nbuckets - 1)]; e != NULL; e = e->hnext) {
		if (strcmp(e->name, name) == 0)
			return e;
	}
	return NULL;
}

static void
grow(struct zk_cache *c)
{
	size_t n = c->nbuckets * 2, i;
	struct ent **b = xcalloc(n, sizeof(*b)), *e, *next;

	for (i = 0; i < c->nbuckets; i++) {
		for (e = c->buckets[i]; e != NULL; e = next) {
			next = e->hnext;
			e->hnext = b[hash(e->name) & (n - 1)];
			b[hash(e->name) & (n - 1)] = e;
		}
	}
	free(c->buckets);
	c->buckets = b;
	c->nbuckets = n;
}

static struct ent *
ent_add(struct zk_cache *c, const char *name)
{
	size_t len = strlen(name);
	struct ent *e = xcalloc(1, sizeof(*e) + len + 1);
	size_t b;

	memcpy(e->name, name, len + 1);
	e->pub.name = e->name;
	if (c->count + 1 > c->nbuckets)
		grow(c);
	b = hash(name) & (c->nbuckets - 1);
	e->hnext = c->buckets[b];
	c->buckets[b] = e;
	c->count++;
	return e;
}

static void
ent_free(struct zk_cache *c, struct ent *e)
{
	if (e->pub.obj != NULL && c->free_obj != NULL)
		c->free_obj(e->pub.obj);
	free(e->data);
	free(e);
}

static void
ent_unlink(struct zk_cache *c, struct ent *e)
{
	struct ent **pp = &c->buckets[hash(e->name) & (c->nbuckets - 1)];

	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	c->count--;
	if (e->visible) {
		c->nvisible--;
		c->arr_dirty = 1;
	}
}

static void
q_push(struct zk_cache *c, struct ent *e)
{
	e->queued = 1;
	e->qnext = NULL;
	e->qprev = c->qtail;
	if (c->qtail != NULL)
		c->qtail->qnext = e;
	else
		c->qhead = e;
	c->qtail = e;
}

static void
q_unlink(struct zk_cache *c, struct ent *e)
{
	if (!e->queued)
		return;
	if (e->qprev != NULL)
		e->qprev->qnext = e->qnext;
	else
		c->qhead = e->qnext;
	if (e->qnext != NULL)
		e->qnext->qprev = e->qprev;
	else
		c->qtail = e->qprev;
	e->qprev = e->qnext = NULL;
	e->queued = 0;
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

/* The entry a result or watch path is about (NULL: not ours, or gone);
 * *sub is what follows the child's name ("" or "/lock"). */
static struct ent *
ent_of(const struct zk_cache *c, const char *path, const char **sub)
{
	char buf[512], *name = buf;
	const char *s, *end;
	struct ent *e;
	size_t n;

	if (strncmp(path, c->prefix, c->plen) != 0 || path[c->plen] != '/')
		return NULL;
	s = path + c->plen + 1;
	end = strchr(s, '/');
	n = end != NULL ? (size_t)(end - s) : strlen(s);
	if (n >= sizeof(buf) && (name = malloc(n + 1)) == NULL)
		abort();
	memcpy(name, s, n);
	name[n] = '\0';
	e = lookup(c, name);
	if (name != buf)
		free(name);
	*sub = s + n;
	return e;
}

/* ---- loading entries --------------------------------------------------------- */

static void
sync_check(struct zk_cache *c)
{
	if (c->syncing && c->sync_listed && c->sync_pending == 0) {
		c->syncing = 0;
		c->synced = 1;
		log_debug("zk cache %s: synced, %zu entries", c->path, c->nvisible);
		emit(c, ZK_CACHE_SYNCED, NULL);
	}
}

/* One read of a loading entry is done. */
static void
loaded(struct zk_cache *c, struct ent *e)
{
	int changed;

	if (!e->loading || --e->need > 0)
		return;
	e->loading = 0;
	if (e->in_sync) {
		e->in_sync = 0;
		c->sync_pending--;
	}
	if (!e->visible) {
		if (!e->gone && (!(c->flags & ZK_CACHE_DATA) || e->have_data)) {
			e->visible = 1;
			c->nvisible++;
			c->arr_dirty = 1;
			emit(c, ZK_CACHE_ADDED, e);
		}
	} else {
		changed = ((c->flags & ZK_CACHE_DATA) && e->pub.stat.mzxid != e->old_mzxid) ||
			  ((c->flags & ZK_CACHE_LOCKS) && e->pub.locked != e->old_locked);
		if (changed)
			emit(c, ZK_CACHE_UPDATED, e);
	}
	if (!c->freed)
		sync_check(c);
}

/* Watch this entry's lock contenders? With a filter, only once its data
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
static void kids_read(const struct zk_result *r, void *arg);
static void lock_read(const struct zk_result *r, void *arg);
static void ent_watch(int type, const char *path, void *arg);

/* Start one read of the entry's znode (suffix "" or "/lock"), setting the
 * cache's shared watch with it unless one is armed there already. */
static void
submit_read(struct zk_cache *c, struct ent *e, enum zk_op_kind kind, const char *suffix,
	    zk_result_cb cb, int armed)
{
	char *p = child_path(c, e->name, suffix);
	struct zk_req req = {.kind = kind, .path = p, .cb = cb, .arg = c, .owner = c};

	if (!armed) {
		req.watch = ent_watch;
		req.warg = c;
		req.wowner = c;
		req.share_watch = 1;
	}
	c->inflight++;
	zk_submit(c->zk, &req);
	free(p);
}

static void
read_data(struct zk_cache *c, struct ent *e)
{
	e->data_busy = 1;
	submit_read(c, e, ZK_OP_GET, "", data_read, e->data_armed);
}

static void
read_kids(struct zk_cache *c, struct ent *e)
{
	e->kids_busy = 1;
	submit_read(c, e, ZK_OP_CHILDREN, "", kids_read, e->kids_armed);
}

static void
read_lock(struct zk_cache *c, struct ent *e)
{
	e->lock_busy = 1;
	submit_read(c, e, ZK_OP_CHILDREN, "/lock", lock_read, e->lock_armed);
}

/* The entry lacks a watch (a read would be started for it). */
static int
ent_lacks(const struct zk_cache *c, const struct ent *e)
{
	int locks = locks_wanted(c, e);

	return ((c->flags & ZK_CACHE_DATA) && !e->data_armed && !e->data_busy) ||
	       (locks && !e->kids_armed && !e->kids_busy) ||
	       (locks && !e->kids_busy && e->kids_armed && e->has_lock && !e->lock_armed &&
		!e->lock_busy);
}

/* Start whatever reads the entry lacks (its watches are not all set).
 * While loading, they count towards its announcement. In a load phase
 * (initial, or a re-sync after a lost connection) reads already in flight
 * (a watch that fired) count too: the phase ends after they are back. */
static void
ent_refresh(struct zk_cache *c, struct ent *e)
{
	int load = !e->visible || c->syncing;
	int want_data = (c->flags & ZK_CACHE_DATA) && !e->data_armed && !e->data_busy;
	int locks = locks_wanted(c, e);
	int want_kids = locks && !e->kids_armed && !e->kids_busy;
	/* a lock listing that failed (lost connection) while the child
	 * listing stayed armed: only we redo it */
	int want_lock =
	    locks && !want_kids && !e->kids_busy && e->has_lock && !e->lock_armed && !e->lock_busy;
	int busy = e->data_busy + e->kids_busy + e->lock_busy;

	if (!want_data && !want_kids && !want_lock && !(load && busy > 0 && !e->loading))
		return;
	if (load && !e->loading) {
		e->loading = 1;
		e->need = busy;
		e->gone = 0;
		e->old_mzxid = e->pub.stat.mzxid;
		e->old_locked = e->pub.locked;
	}
	if (want_data) {
		if (e->loading)
			e->need++;
		read_data(c, e);
	}
	if (want_kids) {
		if (e->loading)
			e->need++;
		read_kids(c, e);
	}
	if (want_lock) {
		if (e->loading)
			e->need++;
		read_lock(c, e);
	}
}

/*
 * Start the reads of a listed entry; one that needs none (its watches are
 * set) and was never announced is announced now. An entry counted in the
 * load phase (in_sync) that starts nothing no longer holds it up.
 */
static void
ent_kick(struct zk_cache *c, struct ent *e)
{
	ent_refresh(c, e);
	if (c->freed)
		return;
	if (!e->visible && !e->loading) {
		e->visible = 1;
		c->nvisible++;
		c->arr_dirty = 1;
		emit(c, ZK_CACHE_ADDED, e);
	}
	if (!c->freed && e->in_sync && !e->loading) {
		e->in_sync = 0;
		c->sync_pending--;
		sync_check(c);
	}
}

/* Start the reads of queued entries while fewer than CACHE_MAX_INFLIGHT
 * are in flight. Not while disconnected: they would only fail; the listing
 * after the reconnection pumps again. */
static void
pump(struct zk_cache *c)
{
	struct ent *e;

	while (!c->freed && c->qhead != NULL && c->inflight < CACHE_MAX_INFLIGHT &&
	       zk_is_connected(c->zk)) {
		e = c->qhead;
		q_unlink(c, e);
		ent_kick(c, e);
	}
}

/* Deflate text of len bytes into a new buffer of *zlen bytes; NULL when
 * it fails or does not shrink (the text is kept as it is). */
static char *
pack(struct zk_cache *c, const char *text, int len, int *zlen)
{
	uLong cap;
	unsigned char *out;
	char *res;

	if (c->zdef == NULL) {
		c->zdef = xcalloc(1, sizeof(*c->zdef));
		if (deflateInit2(c->zdef, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -15, 8,
				 Z_DEFAULT_STRATEGY) != Z_OK) {
			free(c->zdef);
			c->zdef = NULL;
			return NULL;
		}
	} else if (deflateReset(c->zdef) != Z_OK) {
		return NULL;
	}
	if (c->dictlen > 0 && deflateSetDictionary(c->zdef, c->dict, (uInt)c->dictlen) != Z_OK)
		return NULL;
	cap = deflateBound(c->zdef, (uLong)len);
	if ((out = malloc(cap)) == NULL)
		abort();
	c->zdef->next_in = (Bytef *)(uintptr_t)text;
	c->zdef->avail_in = (uInt)len;
	c->zdef->next_out = out;
	c->zdef->avail_out = (uInt)cap;
	if (deflate(c->zdef, Z_FINISH) != Z_STREAM_END || c->zdef->total_out >= (uLong)len) {
		free(out);
		return NULL;
	}
	*zlen = (int)c->zdef->total_out;
	if ((res = malloc((size_t)*zlen)) == NULL)
		abort();
	memcpy(res, out, (size_t)*zlen);
	free(out);
	return res;
}

static void
set_data(struct zk_cache *c, struct ent *e, const struct zk_result *r)
{
	free(e->data);
	e->data = NULL;
	e->packed = 0;
	if (r->len > 0 && (c->flags & ZK_CACHE_PACK) && c->decode == NULL &&
	    (e->data = pack(c, r->value, r->len, &e->zlen)) != NULL) {
		e->packed = 1;
	} else if (r->len > 0) {
		if ((e->data = malloc((size_t)r->len + 1)) == NULL)
			abort();
		memcpy(e->data, r->value, (size_t)r->len + 1);
	}
	e->pub.data = e->packed ? NULL : e->data;
	e->pub.len = r->len;
	e->pub.stat = *r->stat;
	e->have_data = 1;
	if (c->decode != NULL) {
		if (e->pub.obj != NULL && c->free_obj != NULL)
			c->free_obj(e->pub.obj);
		e->pub.obj = c->decode(e->name, r->value, r->len);
		if (e->pub.obj == NULL) {
			log_warn("zk cache %s: cannot decode %s (%d bytes); kept undecoded",
				 c->path, e->name, r->len);
		} else {
			/* the object stands for the text: not kept twice */
			free(e->data);
			e->data = NULL;
			e->pub.data = NULL;
		}
	}
}

/* Our reads fail for a lost connection: the next listing redoes them. */
static int
transient(int rc)
{
	return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZSESSIONEXPIRED ||
	       rc == ZINVALIDSTATE || rc == ZSESSIONMOVED || rc == ZCLOSING ||
	       rc == ZSSLCONNECTIONERROR;
}

/*
 * A read failed. For a lost connection it no longer counts towards the
 * entry's load: the listing after the reconnection starts it again and
 * counts it again. Any other error (no permission, say) will not go away:
 * the entry is not announced, but no longer holds up SYNCED either.
 */
static void
read_failed(struct zk_cache *c, struct ent *e, const char *what, const char *path, int rc)
{
	if (transient(rc)) {
		if (e != NULL && e->loading && e->need > 0)
			e->need--;
		return;
	}
	log_warn("zk cache %s: %s %s: %s", c->path, what, path, zk_strerror(rc));
	if (e != NULL) {
		e->gone = 1;
		loaded(c, e);
	}
}

static void
data_read(const struct zk_result *r, void *arg)
{
	struct zk_cache *c = arg;
	const char *sub;
	struct ent *e;
	int64_t before;

	if (r->gen != c->gen)
		return;
	c->inflight--;
	enter(c);
	if ((e = ent_of(c, r->path, &sub)) == NULL) {
		pump(c);
		leave(c);
		return;
	}
	e->data_busy = 0;
	if (r->rc == ZOK) {
		e->data_armed = 1;
		before = e->pub.stat.mzxid;
		if (!e->have_data || r->stat->mzxid != before) {
			set_data(c, e, r);
			if (e->visible && !e->loading)
				emit(c, ZK_CACHE_UPDATED, e);
		}
		/* the filter may now want its lock (read before it counts
		 * as loaded) */
		if (!c->freed && locks_wanted(c, e) && !e->kids_armed && !e->kids_busy) {
			if (e->loading)
				e->need++;
			read_kids(c, e);
		}
		if (!c->freed)
			loaded(c, e);
	} else if (r->rc == ZNONODE) {
		e->gone = 1; /* the listing that follows removes it */
		loaded(c, e);
	} else {
		read_failed(c, e, "reading", r->path, r->rc);
	}
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
set_locked(struct zk_cache *c, struct ent *e, int locked)
{
	if (e->pub.locked == locked)
		return;
	e->pub.locked = locked;
	if (e->visible && !e->loading)
		emit(c, ZK_CACHE_UPDATED, e);
}

static void
kids_read(const struct zk_result *r, void *arg)
{
	struct zk_cache *c = arg;
	const char *sub;
	struct ent *e;
	int i, has_lock = 0;

	if (r->gen != c->gen)
		return;
	c->inflight--;
	enter(c);
	if ((e = ent_of(c, r->path, &sub)) == NULL) {
		pump(c);
		leave(c);
		return;
	}
	e->kids_busy = 0;
	if (r->rc == ZOK) {
		e->kids_armed = 1;
		for (i = 0; i < r->count; i++)
			has_lock |= strcmp(r->names[i], "lock") == 0;
		e->has_lock = has_lock;
		if (has_lock && !e->lock_armed && !e->lock_busy) {
			if (e->loading)
				e->need++;
			read_lock(c, e);
		} else if (!has_lock) {
			set_locked(c, e, 0);
		}
		if (!c->freed)
			loaded(c, e);
	} else if (r->rc == ZNONODE) {
		e->gone = 1;
		loaded(c, e);
	} else {
		read_failed(c, e, "listing", r->path, r->rc);
	}
	pump(c);
	leave(c);
}

static void
lock_read(const struct zk_result *r, void *arg)
{
	struct zk_cache *c = arg;
	const char *sub;
	struct ent *e;

	if (r->gen != c->gen)
		return;
	c->inflight--;
	enter(c);
	if ((e = ent_of(c, r->path, &sub)) == NULL) {
		pump(c);
		leave(c);
		return;
	}
	e->lock_busy = 0;
	if (r->rc == ZOK) {
		e->lock_armed = 1;
		set_locked(c, e, count_contenders(r->count, r->names));
		if (!c->freed)
			loaded(c, e);
	} else if (r->rc == ZNONODE) {
		e->has_lock = 0;
		set_locked(c, e, 0); /* the node's child watch sees it come back */
		if (!c->freed)
			loaded(c, e);
	} else {
		read_failed(c, e, "listing", r->path, r->rc);
	}
	pump(c);
	leave(c);
}

/* A watch on <path>/<child> or <path>/<child>/lock fired. */
static void
ent_watch(int type, const char *path, void *arg)
{
	struct zk_cache *c = arg;
	const char *sub;
	struct ent *e = ent_of(c, path, &sub);

	if (e == NULL)
		return;
	enter(c);
	if (*sub == '\0') {
		if (type == ZOO_CHANGED_EVENT) {
			e->data_armed = 0;
			if (!e->data_busy) {
				e->need += e->loading;
				read_data(c, e);
			}
		} else if (type == ZOO_CHILD_EVENT) {
			e->kids_armed = 0;
			if (!locks_wanted(c, e)) {
				/* no longer wanted (its data changed): let go */
				e->has_lock = 0;
				set_locked(c, e, 0);
			} else if (!e->kids_busy) {
				e->need += e->loading;
				read_kids(c, e);
			}
		} else if (type == ZOO_DELETED_EVENT) {
			/* both watches fire; the listing removes the entry */
			e->data_armed = 0;
			e->kids_armed = 0;
		}
	} else if (strcmp(sub, "/lock") == 0) {
		e->lock_armed = 0;
		if (type == ZOO_CHILD_EVENT) {
			if (!locks_wanted(c, e)) {
				set_locked(c, e, 0);
			} else if (!e->lock_busy) {
				e->need += e->loading;
				read_lock(c, e);
			}
		} else if (type == ZOO_DELETED_EVENT) {
			e->has_lock = 0;
			set_locked(c, e, 0);
		}
	}
	leave(c);
}

/* ---- the listing of the path ------------------------------------------------- */

static void
remove_ent(struct zk_cache *c, struct ent *e)
{
	ent_unlink(c, e);
	q_unlink(c, e);
	if (e->in_sync) {
		e->in_sync = 0;
		c->sync_pending--;
	}
	if (e->visible)
		emit(c, ZK_CACHE_REMOVED, e);
	ent_free(c, e);
}

static void
root_listed(const struct zk_result *r, void *arg)
{
	struct zk_cache *c = arg;
	struct ent *e, *next;
	size_t b;
	int i, watching;

	if (r->gen != c->gen)
		return;
	enter(c);
	c->root_busy = 0;
	watching = c->root_watching;
	c->root_watching = 0;
	if (r->rc == ZNONODE) {
		/* the path itself was deleted: everything under it is gone */
		c->root_armed = 0;
		c->created = 0;
		for (b = 0; b < c->nbuckets && !c->freed; b++) {
			while ((e = c->buckets[b]) != NULL && !c->freed)
				remove_ent(c, e);
		}
		if (!c->freed)
			start(c);
		leave(c);
		return;
	}
	if (r->rc != ZOK) {
		read_failed(c, NULL, "listing", r->path, r->rc);
		leave(c);
		return;
	}
	/* Armed only by a listing that asked for the watch: one sent
	 * without (the watch was still set, e.g. re-registered by the C
	 * client on reconnecting) leaves it as the watch's firing left it. */
	if (watching)
		c->root_armed = 1;
	c->mark++;
	for (i = 0; i < r->count; i++) {
		if ((e = lookup(c, r->names[i])) == NULL)
			e = ent_add(c, r->names[i]);
		e->mark = c->mark;
	}
	/* gone from the listing: removed */
	for (b = 0; b < c->nbuckets && !c->freed; b++) {
		for (e = c->buckets[b]; e != NULL && !c->freed; e = next) {
			next = e->hnext;
			if (e->mark != c->mark)
				remove_ent(c, e);
		}
	}
	/* present: start what they lack (or queue them, past
	 * CACHE_MAX_INFLIGHT reads); new ones without reads are ready now */
	for (b = 0; b < c->nbuckets && !c->freed; b++) {
		for (e = c->buckets[b]; e != NULL && !c->freed; e = next) {
			next = e->hnext;
			if (e->queued || (c->inflight >= CACHE_MAX_INFLIGHT && ent_lacks(c, e))) {
				if (!e->queued)
					q_push(c, e);
				if (c->syncing && !c->sync_listed && !e->in_sync) {
					e->in_sync = 1;
					c->sync_pending++;
				}
				continue;
			}
			ent_refresh(c, e);
			if (c->syncing && !c->sync_listed && e->loading && !e->in_sync) {
				e->in_sync = 1;
				c->sync_pending++;
			}
			if (!e->visible && !e->loading) {
				e->visible = 1;
				c->nvisible++;
				c->arr_dirty = 1;
				emit(c, ZK_CACHE_ADDED, e);
			}
		}
	}
	pump(c);
	if (!c->freed && c->syncing && !c->sync_listed) {
		c->sync_listed = 1;
		sync_check(c);
	}
	if (!c->freed && c->root_again) {
		c->root_again = 0;
		list_root(c);
	}
	leave(c);
}

static void
root_watch(int type, const char *path, void *arg)
{
	struct zk_cache *c = arg;

	enter(c);
	c->root_armed = 0;
	if (c->root_busy)
		c->root_again = 1;
	else
		list_root(c);
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
	if (!c->root_armed) {
		req.watch = root_watch;
		req.warg = c;
		req.wowner = c;
		req.share_watch = 1;
	}
	c->root_watching = !c->root_armed;
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
		list_root(c);
	} else {
		read_failed(c, NULL, "creating", r->path, r->rc);
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

	if (c->root_busy)
		return;
	c->root_busy = 1;
	zk_submit(c->zk, &req);
}

/* ---- session events ---------------------------------------------------------- */

static void
cache_session(struct zk *zk, enum zk_event ev, void *arg)
{
	struct zk_cache *c = arg;
	struct ent *e;
	size_t b;

	enter(c);
	if (ev == ZK_EV_EXPIRED) {
		/* our watches and reads went with the session */
		c->gen = zk_session_gen(zk);
		c->root_armed = c->root_busy = c->root_again = 0;
		c->inflight = 0;
		while (c->qhead != NULL)
			q_unlink(c, c->qhead);
		for (b = 0; b < c->nbuckets; b++) {
			for (e = c->buckets[b]; e != NULL; e = e->hnext) {
				e->data_armed = e->data_busy = 0;
				e->kids_armed = e->kids_busy = 0;
				e->lock_armed = e->lock_busy = 0;
				e->loading = e->need = e->in_sync = 0;
			}
		}
		c->synced = 0;
		c->syncing = 0;
		c->sync_pending = 0;
		c->reload = 1;
	} else if (ev == ZK_EV_SUSPENDED) {
		/* what changed meanwhile is unknown until re-read */
		c->synced = 0;
	} else if (ev == ZK_EV_CONNECTED || ev == ZK_EV_RECONNECTED) {
		if (c->reload || c->gen != zk_session_gen(zk)) {
			c->gen = zk_session_gen(zk);
			c->reload = 0;
			log_debug("zk cache %s: reloading after a session expiry", c->path);
		} else {
			log_debug("zk cache %s: re-syncing after a lost connection", c->path);
		}
		/* a load phase: SYNCED once the listing below and every read it
		 * starts, or that is in flight, are back */
		c->synced = 0;
		c->syncing = 1;
		c->sync_listed = 0;
		/* one listing redoes every read that failed meanwhile */
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
	c->nbuckets = 64;
	c->buckets = xcalloc(c->nbuckets, sizeof(*c->buckets));
	c->gen = zk_session_gen(zk);
	c->syncing = 1;
	zk_listener_add(zk, &c->listener, cache_session, c);
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

void
zk_cache_set_pack_dict(struct zk_cache *cache, const void *dict, int len)
{
	free(cache->dict);
	cache->dict = NULL;
	cache->dictlen = 0;
	if (dict == NULL || len <= 0)
		return;
	if (len > 32768) { /* the window: only its end is used */
		dict = (const char *)dict + (len - 32768);
		len = 32768;
	}
	if ((cache->dict = malloc((size_t)len)) == NULL)
		abort();
	memcpy(cache->dict, dict, (size_t)len);
	cache->dictlen = len;
}

char *
zk_cache_text(const struct zk_cache *cache, const struct zk_cache_entry *entry, int *len)
{
	struct zk_cache *c = (struct zk_cache *)cache; /* its inflate stream */
	const struct ent *e;
	char *text;
	int rc;

	*len = 0;
	if (entry == NULL || entry->len <= 0)
		return NULL;
	e = (const struct ent *)(const void *)((const char *)entry - offsetof(struct ent, pub));
	if (!e->packed && entry->data == NULL)
		return NULL;
	if ((text = malloc((size_t)entry->len + 1)) == NULL)
		abort();
	if (!e->packed) {
		memcpy(text, entry->data, (size_t)entry->len + 1);
		*len = entry->len;
		return text;
	}
	if (c->zinf == NULL) {
		c->zinf = xcalloc(1, sizeof(*c->zinf));
		if (inflateInit2(c->zinf, -15) != Z_OK) {
			free(c->zinf);
			c->zinf = NULL;
			free(text);
			return NULL;
		}
	} else {
		inflateReset(c->zinf);
	}
	if (c->dictlen > 0)
		inflateSetDictionary(c->zinf, c->dict, (uInt)c->dictlen);
	c->zinf->next_in = (Bytef *)e->data;
	c->zinf->avail_in = (uInt)e->zlen;
	c->zinf->next_out = (Bytef *)text;
	c->zinf->avail_out = (uInt)entry->len;
	rc = inflate(c->zinf, Z_FINISH);
	if (rc != Z_STREAM_END || c->zinf->total_out != (uLong)entry->len) {
		log_warn("zk cache %s: cannot inflate %s: %s", c->path, entry->name,
			 c->zinf->msg != NULL ? c->zinf->msg : "short");
		free(text);
		return NULL;
	}
	text[entry->len] = '\0';
	*len = entry->len;
	return text;
}

static void
cache_destroy(struct zk_cache *c)
{
	struct ent *e;
	size_t b;

	for (b = 0; b < c->nbuckets; b++) {
		while ((e = c->buckets[b]) != NULL) {
			c->buckets[b] = e->hnext;
			ent_free(c, e);
		}
	}
	free(c->buckets);
	free(c->arr);
	if (c->zdef != NULL) {
		deflateEnd(c->zdef);
		free(c->zdef);
	}
	if (c->zinf != NULL) {
		inflateEnd(c->zinf);
		free(c->zinf);
	}
	free(c->dict);
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
		for (b = 0; b < c->nbuckets; b++) {
			for (e = c->buckets[b]; e != NULL; e = e->hnext) {
				if (e->visible)
					c->arr[n++] = &e->pub;
			}
		}
		qsort(c->arr, n, sizeof(*c->arr), by_name);
		c->arr_dirty = 0;
	}
	*out = c->arr;
	return (int)c->nvisible;
}

int
zk_cache_count(const struct zk_cache *cache)
{
	return (int)cache->nvisible;
}
