/*
 * IPC framing and message codec (see ipc.h, ipc_types.h).
 *
 * The catalogue is data: one field table per message (and per list item),
 * read by one encoder, one strict decoder, one free, one equality and one
 * JSON renderer. A message's encoder and decoder therefore cannot disagree
 * about a key or its type, and adding a field is one table line.
 *
 * Bytes from a peer are checked by mp_check() before msgpack-c sees them:
 * msgpack-c allocates an array's or map's items up front from the count in
 * its header, so a 6-byte "array of 4 billion" would ask for 64 GiB. The
 * check bounds every count by the bytes left (each item takes at least one
 * byte), so decoding a frame of N bytes allocates O(N).
 */
#include "protocol/ipc.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

/* ---- names ------------------------------------------------------------------ */

static const char *const type_names[IPC_TYPE_COUNT] = {
    [IPC_READY] = "READY",
    [IPC_STATUS] = "STATUS",
    [IPC_CONFIG_ACK] = "CONFIG_ACK",
    [IPC_DUMP_REPLY] = "DUMP_REPLY",
    [IPC_CONFIG] = "CONFIG",
    [IPC_STATUS_REQ] = "STATUS_REQ",
    [IPC_STOP] = "STOP",
    [IPC_DUMP_REQ] = "DUMP_REQ",
    [IPC_METRICS] = "METRICS",
    [IPC_CTL_STATUS] = "CTL_STATUS",
    [IPC_CTL_RESTART] = "CTL_RESTART",
    [IPC_CTL_RELOAD] = "CTL_RELOAD",
    [IPC_CTL_STOP] = "CTL_STOP",
    [IPC_CTL_STATUS_REPLY] = "CTL_STATUS_REPLY",
    [IPC_CTL_RESULT] = "CTL_RESULT",
    [IPC_JOB] = "JOB",
    [IPC_JOB_DONE] = "JOB_DONE",
};

static const char *const ws_names[IPC_WS_COUNT] = {
    "starting", "running", "paused", "draining", "stopping",
};
static const char *const zk_names[IPC_ZK_COUNT] = {
    "unknown", "connecting", "connected", "suspended", "expired",
};
static const char *const kind_names[IPC_KIND_COUNT] = {"provider", "builder", "web"};

static int
name_parse(const char *const *names, int n, const char *s)
{
	if (s == NULL)
		return -1;
	for (int i = 0; i < n; i++)
		if (names[i] != NULL && strcmp(names[i], s) == 0)
			return i;
	return -1;
}

const char *
ipc_type_name(int type)
{
	return type > IPC_NONE && type < IPC_TYPE_COUNT ? type_names[type] : NULL;
}

enum ipc_type
ipc_type_parse(const char *name)
{
	int t = name_parse(type_names, IPC_TYPE_COUNT, name);

	return t < 0 ? IPC_NONE : (enum ipc_type)t;
}

enum ipc_dir
ipc_type_dir(int type)
{
	if (type >= IPC_READY && type <= IPC_DUMP_REPLY)
		return IPC_DIR_CHILD_TO_SUP;
	if (type >= IPC_CONFIG && type <= IPC_METRICS)
		return IPC_DIR_SUP_TO_CHILD;
	if (type >= IPC_CTL_STATUS && type <= IPC_CTL_STOP)
		return IPC_DIR_CTL_REQUEST;
	if (type >= IPC_CTL_STATUS_REPLY && type <= IPC_CTL_RESULT)
		return IPC_DIR_CTL_REPLY;
	if (type == IPC_JOB)
		return IPC_DIR_BUILDER_TO_POOL;
	if (type == IPC_JOB_DONE)
		return IPC_DIR_POOL_TO_BUILDER;
	return IPC_DIR_NONE;
}

const char *
ipc_worker_state_name(int state)
{
	return state >= 0 && state < IPC_WS_COUNT ? ws_names[state] : NULL;
}

int
ipc_worker_state_parse(const char *name)
{
	return name_parse(ws_names, IPC_WS_COUNT, name);
}

const char *
ipc_zk_state_name(int state)
{
	return state >= 0 && state < IPC_ZK_COUNT ? zk_names[state] : NULL;
}

int
ipc_zk_state_parse(const char *name)
{
	return name_parse(zk_names, IPC_ZK_COUNT, name);
}

const char *
ipc_child_kind_name(int kind)
{
	return kind >= 0 && kind < IPC_KIND_COUNT ? kind_names[kind] : NULL;
}

int
ipc_child_kind_parse(const char *name)
{
	return name_parse(kind_names, IPC_KIND_COUNT, name);
}

/* ---- the catalogue as field tables ------------------------------------------ */

enum fkind {
	F_STR,	   /* char *, required string */
	F_STR_NIL, /* char *, string or nil (NULL) */
	F_INT,	   /* int64_t, any */
	F_UINT,	   /* int64_t, >= 0 */
	F_BOOL,	   /* bool */
	F_ENUM,	   /* int, wire: one of names[] */
	F_STRV,	   /* struct ipc_strv, wire: array of str */
	F_COUNTS,  /* struct ipc_counts, wire: map str -> uint */
	F_LIST	   /* struct ipc_pools / ipc_workers, wire: array of maps (item) */
};

struct item_desc;

struct field {
	const char *key;
	enum fkind kind;
	size_t off;		  /* in struct ipc_msg, or in the item struct for list items */
	const char *const *names; /* F_ENUM */
	int nnames;
	const struct item_desc *item; /* F_LIST */
	bool optional;		      /* a key added later: the decoder takes its absence,
					 the encoder leaves it out at its default (nil, 0) */
};

/* The layout of a list of items in a struct ipc_msg. */
struct item_desc {
	const struct field *fields;
	size_t nfields;
	size_t size; /* sizeof the item struct */
};

/*
 * F_LIST members (struct ipc_pools, struct ipc_workers) are read and written
 * through this shape with memcpy, which is why they must all match it.
 */
struct any_list {
	void *v;
	size_t n;
};
_Static_assert(sizeof(struct ipc_pools) == sizeof(struct any_list) &&
		   offsetof(struct ipc_pools, v) == offsetof(struct any_list, v) &&
		   offsetof(struct ipc_pools, n) == offsetof(struct any_list, n),
	       "ipc_pools layout");
_Static_assert(sizeof(struct ipc_workers) == sizeof(struct any_list) &&
		   offsetof(struct ipc_workers, v) == offsetof(struct any_list, v) &&
		   offsetof(struct ipc_workers, n) == offsetof(struct any_list, n),
	       "ipc_workers layout");

#define MAX_FIELDS 24
#define M(member)  offsetof(struct ipc_msg, u.member)
#define FLD(k, kind, off)                                                                          \
	{                                                                                          \
		k, kind, off, NULL, 0, NULL, false                                                 \
	}
/* A key added after version 1: absent from an older peer's messages. */
#define FOPT(k, kind, off)                                                                         \
	{                                                                                          \
		k, kind, off, NULL, 0, NULL, true                                                  \
	}
#define FENUM(k, off, names)                                                                       \
	{                                                                                          \
		k, F_ENUM, off, names, (int)(sizeof(names) / sizeof(names[0])), NULL, false        \
	}
#define FLIST(k, off, desc)                                                                        \
	{                                                                                          \
		k, F_LIST, off, NULL, 0, &desc, false                                              \
	}
#define NF(a) (sizeof(a) / sizeof(a[0]))

static const struct field ready_fields[] = {
    FLD("provider", F_STR, M(ready.provider)),
    FLD("pid", F_UINT, M(ready.pid)),
    FLD("zk_session", F_INT, M(ready.zk_session)),
    FLD("version", F_STR, M(ready.version)),
};

static const struct field pool_fields[] = {
    FLD("name", F_STR, offsetof(struct ipc_pool, name)),
    FLD("paused", F_BOOL, offsetof(struct ipc_pool, paused)),
    FLD("requests", F_UINT, offsetof(struct ipc_pool, requests)),
};
static const struct item_desc pool_desc = {pool_fields, NF(pool_fields), sizeof(struct ipc_pool)};

static const struct field status_fields[] = {
    FLD("seq", F_UINT, M(status.seq)),
    FLD("gen", F_UINT, M(status.generation)),
    FENUM("state", M(status.state), ws_names),
    FENUM("zk", M(status.zk_state), zk_names),
    FLD("accepted", F_UINT, M(status.accepted)),
    FLD("fulfilled", F_UINT, M(status.fulfilled)),
    FLD("declined", F_UINT, M(status.declined)),
    FLD("failed", F_UINT, M(status.failed)),
    FLD("launching", F_UINT, M(status.launching)),
    FLD("nodes", F_COUNTS, M(status.nodes)),
    FLIST("pools", M(status.pools), pool_desc),
    FLD("error", F_STR_NIL, M(status.last_error)),
    FLD("rss_kb", F_UINT, M(status.rss_kb)),
    FLD("cpu_ms", F_UINT, M(status.cpu_ms)),
    FLD("uptime_s", F_UINT, M(status.uptime_s)),
    FOPT("metrics", F_STR_NIL, M(status.metrics)),
    FOPT("zk_queue", F_UINT, M(status.zk_queue)),
    FOPT("peers", F_STRV, M(status.peers)),
    FOPT("lock_attempts", F_UINT, M(status.lock_attempts)),
    FOPT("lock_lost", F_UINT, M(status.lock_lost)),
    FOPT("pss_kb", F_UINT, M(status.pss_kb)),
};

static const struct field config_ack_fields[] = {
    FLD("gen", F_UINT, M(config_ack.generation)),
    FLD("ok", F_BOOL, M(config_ack.ok)),
    FLD("errors", F_STRV, M(config_ack.errors)),
};

static const struct field dump_reply_fields[] = {
    FLD("text", F_STR, M(dump_reply.text)),
};

static const struct field config_fields[] = {
    FLD("gen", F_UINT, M(config.generation)),
    FLD("provider", F_STR, M(config.provider)),
    FLD("config", F_STR, M(config.config)),
};

static const struct field status_req_fields[] = {
    FLD("seq", F_UINT, M(status_req.seq)),
};

static const struct field stop_fields[] = {
    FLD("graceful", F_BOOL, M(stop.graceful)),
};

static const struct field metrics_fields[] = {
    FLD("provider", F_STR, M(metrics.provider)),
    FLD("record", F_STR, M(metrics.record)),
};

static const struct field ctl_status_fields[] = {
    FLD("json", F_BOOL, M(ctl_status.json)),
};

static const struct field ctl_restart_fields[] = {
    FLD("provider", F_STR, M(ctl_restart.provider)),
};

#define W(member) offsetof(struct ipc_worker_info, member)
static const struct field worker_fields[] = {
    FLD("name", F_STR, W(name)),
    FENUM("kind", W(kind), kind_names),
    FLD("pid", F_UINT, W(pid)),
    FLD("state", F_STR, W(state)),
    FLD("uptime_s", F_UINT, W(uptime_s)),
    FLD("restarts", F_UINT, W(restarts)),
    FENUM("zk", W(zk_state), zk_names),
    FLD("accepted", F_UINT, W(accepted)),
    FLD("fulfilled", F_UINT, W(fulfilled)),
    FLD("declined", F_UINT, W(declined)),
    FLD("failed", F_UINT, W(failed)),
    FLD("nodes", F_COUNTS, W(nodes)),
    FLD("error", F_STR_NIL, W(last_error)),
    FOPT("peers", F_STRV, W(peers)),
    FOPT("lock_attempts", F_UINT, W(lock_attempts)),
    FOPT("lock_lost", F_UINT, W(lock_lost)),
    FOPT("rss_kb", F_UINT, W(rss_kb)),
    FOPT("pss_kb", F_UINT, W(pss_kb)),
};
static const struct item_desc worker_desc = {worker_fields, NF(worker_fields),
					     sizeof(struct ipc_worker_info)};

static const struct field ctl_status_reply_fields[] = {
    FLIST("workers", M(ctl_status_reply.workers), worker_desc),
};

static const struct field ctl_result_fields[] = {
    FLD("ok", F_BOOL, M(ctl_result.ok)),
    FLD("message", F_STR, M(ctl_result.message)),
    FLD("errors", F_STRV, M(ctl_result.errors)),
};

static const struct field job_fields[] = {
    FLD("id", F_UINT, M(job.id)),
    FLD("kind", F_STR, M(job.kind)),
    FLD("spec", F_STR, M(job.spec)),
};

static const struct field job_done_fields[] = {
    FLD("id", F_UINT, M(job_done.id)),
    FLD("ok", F_BOOL, M(job_done.ok)),
    FLD("result", F_STR_NIL, M(job_done.result)),
    FLD("error", F_STR_NIL, M(job_done.error)),
};

struct msg_desc {
	const struct field *fields;
	size_t nfields;
};

static const struct msg_desc msg_descs[IPC_TYPE_COUNT] = {
    [IPC_READY] = {ready_fields, NF(ready_fields)},
    [IPC_STATUS] = {status_fields, NF(status_fields)},
    [IPC_CONFIG_ACK] = {config_ack_fields, NF(config_ack_fields)},
    [IPC_DUMP_REPLY] = {dump_reply_fields, NF(dump_reply_fields)},
    [IPC_CONFIG] = {config_fields, NF(config_fields)},
    [IPC_STATUS_REQ] = {status_req_fields, NF(status_req_fields)},
    [IPC_STOP] = {stop_fields, NF(stop_fields)},
    [IPC_DUMP_REQ] = {NULL, 0},
    [IPC_METRICS] = {metrics_fields, NF(metrics_fields)},
    [IPC_CTL_STATUS] = {ctl_status_fields, NF(ctl_status_fields)},
    [IPC_CTL_RESTART] = {ctl_restart_fields, NF(ctl_restart_fields)},
    [IPC_CTL_RELOAD] = {NULL, 0},
    [IPC_CTL_STOP] = {NULL, 0},
    [IPC_CTL_STATUS_REPLY] = {ctl_status_reply_fields, NF(ctl_status_reply_fields)},
    [IPC_CTL_RESULT] = {ctl_result_fields, NF(ctl_result_fields)},
    [IPC_JOB] = {job_fields, NF(job_fields)},
    [IPC_JOB_DONE] = {job_done_fields, NF(job_done_fields)},
};

_Static_assert(NF(status_fields) <= MAX_FIELDS && NF(worker_fields) <= MAX_FIELDS,
	       "raise MAX_FIELDS");

/* ---- field access ------------------------------------------------------------ */

#define AT(base, off, type)  ((type *)(void *)((char *)(base) + (off)))
#define CAT(base, off, type) ((const type *)(const void *)((const char *)(base) + (off)))

static struct any_list
list_get(const void *base, size_t off)
{
	struct any_list l;

	memcpy(&l, (const char *)base + off, sizeof(l));
	return l;
}

static void
list_put(void *base, size_t off, struct any_list l)
{
	memcpy((char *)base + off, &l, sizeof(l));
}

static int
fmt_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* ---- free, init, equality ----------------------------------------------------- */

static void fields_free(const struct field *f, size_t nf, void *base);

static void
strv_free(struct ipc_strv *sv)
{
	for (size_t i = 0; i < sv->n; i++)
		free(sv->v[i]);
	free(sv->v);
	sv->v = NULL;
	sv->n = 0;
}

static void
counts_free(struct ipc_counts *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->v[i].name);
	free(c->v);
	c->v = NULL;
	c->n = 0;
}

static void
field_free(const struct field *f, void *base)
{
	struct any_list l;

	switch (f->kind) {
	case F_STR:
	case F_STR_NIL:
		free(*AT(base, f->off, char *));
		*AT(base, f->off, char *) = NULL;
		break;
	case F_STRV:
		strv_free(AT(base, f->off, struct ipc_strv));
		break;
	case F_COUNTS:
		counts_free(AT(base, f->off, struct ipc_counts));
		break;
	case F_LIST:
		l = list_get(base, f->off);
		for (size_t i = 0; i < l.n; i++)
			fields_free(f->item->fields, f->item->nfields,
				    (char *)l.v + i * f->item->size);
		free(l.v);
		list_put(base, f->off, (struct any_list){NULL, 0});
		break;
	default:
		break;
	}
}

static void
fields_free(const struct field *f, size_t nf, void *base)
{
	for (size_t i = 0; i < nf; i++)
		field_free(&f[i], base);
}

void
ipc_msg_init(struct ipc_msg *m, enum ipc_type type)
{
	memset(m, 0, sizeof(*m));
	m->type = type;
}

void
ipc_msg_clear(struct ipc_msg *m)
{
	if (m == NULL)
		return;
	if (m->type > IPC_NONE && m->type < IPC_TYPE_COUNT)
		fields_free(msg_descs[m->type].fields, msg_descs[m->type].nfields, m);
	ipc_msg_init(m, IPC_NONE);
}

static bool
str_eq(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

static bool fields_equal(const struct field *f, size_t nf, const void *a, const void *b);

static bool
field_equal(const struct field *f, const void *a, const void *b)
{
	const struct ipc_strv *sa, *sb;
	const struct ipc_counts *ca, *cb;
	struct any_list la, lb;

	switch (f->kind) {
	case F_STR:
	case F_STR_NIL:
		return str_eq(*CAT(a, f->off, char *), *CAT(b, f->off, char *));
	case F_INT:
	case F_UINT:
		return *CAT(a, f->off, int64_t) == *CAT(b, f->off, int64_t);
	case F_BOOL:
		return *CAT(a, f->off, bool) == *CAT(b, f->off, bool);
	case F_ENUM:
		return *CAT(a, f->off, int) == *CAT(b, f->off, int);
	case F_STRV:
		sa = CAT(a, f->off, struct ipc_strv);
		sb = CAT(b, f->off, struct ipc_strv);
		if (sa->n != sb->n)
			return false;
		for (size_t i = 0; i < sa->n; i++)
			if (!str_eq(sa->v[i], sb->v[i]))
				return false;
		return true;
	case F_COUNTS:
		ca = CAT(a, f->off, struct ipc_counts);
		cb = CAT(b, f->off, struct ipc_counts);
		if (ca->n != cb->n)
			return false;
		for (size_t i = 0; i < ca->n; i++)
			if (!str_eq(ca->v[i].name, cb->v[i].name) || ca->v[i].n != cb->v[i].n)
				return false;
		return true;
	case F_LIST:
		la = list_get(a, f->off);
		lb = list_get(b, f->off);
		if (la.n != lb.n)
			return false;
		for (size_t i = 0; i < la.n; i++)
			if (!fields_equal(f->item->fields, f->item->nfields,
					  (const char *)la.v + i * f->item->size,
					  (const char *)lb.v + i * f->item->size))
				return false;
		return true;
	}
	return false;
}

static bool
fields_equal(const struct field *f, size_t nf, const void *a, const void *b)
{
	for (size_t i = 0; i < nf; i++)
		if (!field_equal(&f[i], a, b))
			return false;
	return true;
}

bool
ipc_msg_equal(const struct ipc_msg *a, const struct ipc_msg *b)
{
	if (a->type != b->type)
		return false;
	if (a->type <= IPC_NONE || a->type >= IPC_TYPE_COUNT)
		return true;
	return fields_equal(msg_descs[a->type].fields, msg_descs[a->type].nfields, a, b);
}

/* ---- builders ------------------------------------------------------------------ */

int
ipc_set_str(char **dst, const char *s)
{
	char *c = NULL;

	if (s != NULL && (c = strdup(s)) == NULL)
		return -1;
	free(*dst);
	*dst = c;
	return 0;
}

int
ipc_strv_push(struct ipc_strv *sv, const char *s)
{
	char **v, *c;

	if ((c = strdup(s)) == NULL)
		return -1;
	if ((v = realloc(sv->v, (sv->n + 1) * sizeof(*v))) == NULL) {
		free(c);
		return -1;
	}
	v[sv->n++] = c;
	sv->v = v;
	return 0;
}

int
ipc_counts_add(struct ipc_counts *c, const char *name, int64_t n)
{
	struct ipc_count *v;
	char *s;

	if ((s = strdup(name)) == NULL)
		return -1;
	if ((v = realloc(c->v, (c->n + 1) * sizeof(*v))) == NULL) {
		free(s);
		return -1;
	}
	v[c->n].name = s;
	v[c->n].n = n;
	c->n++;
	c->v = v;
	return 0;
}

struct ipc_pool *
ipc_pools_add(struct ipc_pools *p, const char *name)
{
	struct ipc_pool *v;
	char *s;

	if ((s = strdup(name)) == NULL)
		return NULL;
	if ((v = realloc(p->v, (p->n + 1) * sizeof(*v))) == NULL) {
		free(s);
		return NULL;
	}
	p->v = v;
	memset(&v[p->n], 0, sizeof(v[p->n]));
	v[p->n].name = s;
	return &v[p->n++];
}

struct ipc_worker_info *
ipc_workers_add(struct ipc_workers *w, const char *name)
{
	struct ipc_worker_info *v;
	char *s;

	if ((s = strdup(name)) == NULL)
		return NULL;
	if ((v = realloc(w->v, (w->n + 1) * sizeof(*v))) == NULL) {
		free(s);
		return NULL;
	}
	w->v = v;
	memset(&v[w->n], 0, sizeof(v[w->n]));
	v[w->n].name = s;
	return &v[w->n++];
}

/* ---- encoding ------------------------------------------------------------------- */

struct enc {
	msgpack_packer pk;
	int rc; /* OR of every msgpack_pack_* result: nonzero = out of memory */
	char *err;
	size_t errlen;
	const char *ctx; /* "STATUS", "STATUS: pools[1]" */
};

static void
enc_str(struct enc *e, const char *s)
{
	size_t n = strlen(s);

	e->rc |= msgpack_pack_str(&e->pk, n);
	e->rc |= msgpack_pack_str_body(&e->pk, s, n);
}

static int enc_fields(struct enc *e, const struct field *f, size_t nf, const void *base);

static int
enc_bad(struct enc *e, const struct field *f, const char *what)
{
	return fmt_err(e->err, e->errlen, "%s: key \"%s\": %s", e->ctx, f->key, what);
}

static int
enc_field(struct enc *e, const struct field *f, const void *base)
{
	const char *s;
	const struct ipc_strv *sv;
	const struct ipc_counts *c;
	struct any_list l;
	const char *saved_ctx;
	char ctx[96];
	int64_t i;
	int en;

	enc_str(e, f->key);
	switch (f->kind) {
	case F_STR:
	case F_STR_NIL:
		s = *CAT(base, f->off, char *);
		if (s == NULL && f->kind == F_STR)
			return enc_bad(e, f, "required string is NULL");
		if (s == NULL)
			e->rc |= msgpack_pack_nil(&e->pk);
		else if (strlen(s) > UINT32_MAX)
			return enc_bad(e, f, "string too long");
		else
			enc_str(e, s);
		break;
	case F_INT:
	case F_UINT:
		i = *CAT(base, f->off, int64_t);
		if (f->kind == F_UINT && i < 0)
			return enc_bad(e, f, "negative value");
		e->rc |= msgpack_pack_int64(&e->pk, i);
		break;
	case F_BOOL:
		if (*CAT(base, f->off, bool))
			e->rc |= msgpack_pack_true(&e->pk);
		else
			e->rc |= msgpack_pack_false(&e->pk);
		break;
	case F_ENUM:
		en = *CAT(base, f->off, int);
		if (en < 0 || en >= f->nnames)
			return enc_bad(e, f, "enum value out of range");
		enc_str(e, f->names[en]);
		break;
	case F_STRV:
		sv = CAT(base, f->off, struct ipc_strv);
		if (sv->n > UINT32_MAX)
			return enc_bad(e, f, "list too long");
		e->rc |= msgpack_pack_array(&e->pk, sv->n);
		for (size_t k = 0; k < sv->n; k++) {
			if (sv->v[k] == NULL)
				return enc_bad(e, f, "NULL string in list");
			enc_str(e, sv->v[k]);
		}
		break;
	case F_COUNTS:
		c = CAT(base, f->off, struct ipc_counts);
		if (c->n > UINT32_MAX)
			return enc_bad(e, f, "map too long");
		e->rc |= msgpack_pack_map(&e->pk, c->n);
		for (size_t k = 0; k < c->n; k++) {
			if (c->v[k].name == NULL)
				return enc_bad(e, f, "NULL name in map");
			if (c->v[k].n < 0)
				return enc_bad(e, f, "negative count");
			enc_str(e, c->v[k].name);
			e->rc |= msgpack_pack_int64(&e->pk, c->v[k].n);
		}
		break;
	case F_LIST:
		l = list_get(base, f->off);
		if (l.n > UINT32_MAX)
			return enc_bad(e, f, "list too long");
		e->rc |= msgpack_pack_array(&e->pk, l.n);
		saved_ctx = e->ctx;
		for (size_t k = 0; k < l.n; k++) {
			snprintf(ctx, sizeof(ctx), "%s: %s[%zu]", saved_ctx, f->key, k);
			e->ctx = ctx;
			if (enc_fields(e, f->item->fields, f->item->nfields,
				       (const char *)l.v + k * f->item->size) < 0)
				return -1;
		}
		e->ctx = saved_ctx;
		break;
	}
	return 0;
}

/* An optional key at its default (nil, 0, an empty list) is left out: the
 * encoding stays what an older peer sent, and never longer than what a peer
 * sent us. */
static bool
omitted(const struct field *f, const void *base)
{
	if (!f->optional)
		return false;
	switch (f->kind) {
	case F_STR:
	case F_STR_NIL:
		return *CAT(base, f->off, char *) == NULL;
	case F_INT:
	case F_UINT:
		return *CAT(base, f->off, int64_t) == 0;
	case F_STRV:
		return CAT(base, f->off, struct ipc_strv)->n == 0;
	default:
		return false;
	}
}

static size_t
present(const struct field *f, size_t nf, const void *base)
{
	size_t n = 0;

	for (size_t i = 0; i < nf; i++)
		n += !omitted(&f[i], base);
	return n;
}

static int
enc_fields(struct enc *e, const struct field *f, size_t nf, const void *base)
{
	e->rc |= msgpack_pack_map(&e->pk, present(f, nf, base));
	for (size_t i = 0; i < nf; i++)
		if (!omitted(&f[i], base) && enc_field(e, &f[i], base) < 0)
			return -1;
	return 0;
}

/* Append the body of *m to sb. */
static int
enc_msg(msgpack_sbuffer *sb, const struct ipc_msg *m, char *err, size_t errlen)
{
	const struct msg_desc *d;
	struct enc e;

	if (m->type <= IPC_NONE || m->type >= IPC_TYPE_COUNT)
		return fmt_err(err, errlen, "cannot encode message type %d", (int)m->type);
	d = &msg_descs[m->type];
	memset(&e, 0, sizeof(e));
	msgpack_packer_init(&e.pk, sb, msgpack_sbuffer_write);
	e.err = err;
	e.errlen = errlen;
	e.ctx = type_names[m->type];
	e.rc |= msgpack_pack_map(&e.pk, present(d->fields, d->nfields, m) + 2);
	enc_str(&e, "t");
	enc_str(&e, type_names[m->type]);
	enc_str(&e, "v");
	e.rc |= msgpack_pack_int64(&e.pk, IPC_PROTO_VERSION);
	for (size_t i = 0; i < d->nfields; i++)
		if (!omitted(&d->fields[i], m) && enc_field(&e, &d->fields[i], m) < 0)
			return -1;
	if (e.rc != 0)
		return fmt_err(err, errlen, "%s: out of memory", type_names[m->type]);
	return 0;
}

int
ipc_msg_encode(const struct ipc_msg *m, unsigned char **out, size_t *outlen, char *err,
	       size_t errlen)
{
	msgpack_sbuffer sb;

	msgpack_sbuffer_init(&sb);
	if (enc_msg(&sb, m, err, errlen) < 0) {
		msgpack_sbuffer_destroy(&sb);
		return -1;
	}
	*outlen = sb.size;
	*out = (unsigned char *)msgpack_sbuffer_release(&sb);
	return 0;
}

int
ipc_frame_encode(const struct ipc_msg *m, size_t max_body, unsigned char **out, size_t *outlen,
		 char *err, size_t errlen)
{
	static const char zero[IPC_FRAME_HDR];
	msgpack_sbuffer sb;
	size_t body;
	unsigned char *p;

	if (max_body == 0)
		max_body = IPC_FRAME_MAX_DEFAULT;
	msgpack_sbuffer_init(&sb);
	if (msgpack_sbuffer_write(&sb, zero, sizeof(zero)) != 0) {
		msgpack_sbuffer_destroy(&sb);
		return fmt_err(err, errlen, "out of memory");
	}
	if (enc_msg(&sb, m, err, errlen) < 0) {
		msgpack_sbuffer_destroy(&sb);
		return -1;
	}
	body = sb.size - IPC_FRAME_HDR;
	if (body > max_body || body > UINT32_MAX) {
		msgpack_sbuffer_destroy(&sb);
		return fmt_err(err, errlen,
			       "%s: message of %zu bytes exceeds the %zu-byte frame limit",
			       type_names[m->type], body, max_body);
	}
	p = (unsigned char *)sb.data;
	p[0] = (unsigned char)(body >> 24);
	p[1] = (unsigned char)(body >> 16);
	p[2] = (unsigned char)(body >> 8);
	p[3] = (unsigned char)body;
	*outlen = sb.size;
	*out = (unsigned char *)msgpack_sbuffer_release(&sb);
	return 0;
}

/* ---- JSON rendering ---------------------------------------------------------------- */

static json_t *json_fields(const struct field *f, size_t nf, const void *base);

static json_t *
json_field(const struct field *f, const void *base)
{
	const struct ipc_strv *sv;
	const struct ipc_counts *c;
	struct any_list l;
	const char *s;
	json_t *j;
	int en;

	switch (f->kind) {
	case F_STR:
	case F_STR_NIL:
		s = *CAT(base, f->off, char *);
		if (s == NULL)
			return f->kind == F_STR ? NULL : json_null();
		/* jansson refuses invalid UTF-8; peers' strings are opaque bytes. */
		return json_stringn_nocheck(s, strlen(s));
	case F_INT:
	case F_UINT:
		return json_integer((json_int_t)*CAT(base, f->off, int64_t));
	case F_BOOL:
		return json_boolean(*CAT(base, f->off, bool));
	case F_ENUM:
		en = *CAT(base, f->off, int);
		return en >= 0 && en < f->nnames ? json_string(f->names[en]) : NULL;
	case F_STRV:
		sv = CAT(base, f->off, struct ipc_strv);
		j = json_array();
		for (size_t k = 0; j != NULL && k < sv->n; k++)
			if (sv->v[k] == NULL ||
			    json_array_append_new(
				j, json_stringn_nocheck(sv->v[k], strlen(sv->v[k]))) < 0) {
				json_decref(j);
				j = NULL;
			}
		return j;
	case F_COUNTS:
		c = CAT(base, f->off, struct ipc_counts);
		j = json_object();
		for (size_t k = 0; j != NULL && k < c->n; k++)
			if (c->v[k].name == NULL ||
			    json_object_set_new_nocheck(j, c->v[k].name, json_integer(c->v[k].n)) <
				0) {
				json_decref(j);
				j = NULL;
			}
		return j;
	case F_LIST:
		l = list_get(base, f->off);
		j = json_array();
		for (size_t k = 0; j != NULL && k < l.n; k++)
			if (json_array_append_new(
				j, json_fields(f->item->fields, f->item->nfields,
					       (const char *)l.v + k * f->item->size)) < 0) {
				json_decref(j);
				j = NULL;
			}
		return j;
	}
	return NULL;
}

static json_t *
json_fields(const struct field *f, size_t nf, const void *base)
{
	json_t *o = json_object();

	for (size_t i = 0; o != NULL && i < nf; i++)
		if (json_object_set_new_nocheck(o, f[i].key, json_field(&f[i], base)) < 0) {
			json_decref(o);
			o = NULL;
		}
	return o;
}

json_t *
ipc_msg_to_json(const struct ipc_msg *m)
{
	const struct msg_desc *d;
	json_t *o;

	if (m->type <= IPC_NONE || m->type >= IPC_TYPE_COUNT)
		return NULL;
	d = &msg_descs[m->type];
	if ((o = json_fields(d->fields, d->nfields, m)) == NULL)
		return NULL;
	if (json_object_set_new(o, "t", json_string(type_names[m->type])) < 0 ||
	    json_object_set_new(o, "v", json_integer(IPC_PROTO_VERSION)) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* ---- pre-check of untrusted msgpack ------------------------------------------------ */

#define MP_MAX_DEPTH 16

static uint64_t
be(const unsigned char *p, size_t n)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

/*
 * Walk one msgpack value in p[0..len) without building anything: it must be
 * complete, end exactly at len, nest at most MP_MAX_DEPTH containers (msgpack-c
 * itself stops at 32, with an "out of memory" error), and no container may
 * claim more items than bytes remain.
 */
static int
mp_check(const unsigned char *p, size_t len, char *err, size_t errlen)
{
	uint64_t rem[MP_MAX_DEPTH + 1]; /* items left in each open container */
	uint64_t total = 1;		/* items left overall */
	size_t pos = 0, hdr, skip;
	uint64_t items;
	int d = 0;
	unsigned char b;

	rem[0] = 1;
	while (total > 0) {
		while (rem[d] == 0)
			d--;
		if (pos >= len)
			return fmt_err(err, errlen, "truncated msgpack value");
		b = p[pos];
		hdr = 1;
		skip = 0;
		items = 0;
		if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
			/* fixint, nil, bool */
		} else if (b <= 0x8f) {
			items = 2 * (uint64_t)(b & 0x0f);
		} else if (b <= 0x9f) {
			items = b & 0x0f;
		} else if (b <= 0xbf) {
			skip = b & 0x1f;
		} else if (b == 0xc1) {
			return fmt_err(err, errlen, "invalid msgpack byte 0xc1");
		} else if (b >= 0xc4 && b <= 0xc6) { /* bin 8/16/32 */
			hdr = 1 + ((size_t)1 << (b - 0xc4));
		} else if (b >= 0xc7 && b <= 0xc9) { /* ext 8/16/32: len, type */
			hdr = 2 + ((size_t)1 << (b - 0xc7));
		} else if (b == 0xca || b == 0xcb) { /* float 32/64 */
			skip = b == 0xca ? 4 : 8;
		} else if (b >= 0xcc && b <= 0xd3) { /* uint/int 8..64 */
			skip = (size_t)1 << ((b - 0xcc) & 3);
		} else if (b >= 0xd4 && b <= 0xd8) { /* fixext 1..16: type, data */
			skip = 1 + ((size_t)1 << (b - 0xd4));
		} else if (b >= 0xd9 && b <= 0xdb) { /* str 8/16/32 */
			hdr = 1 + ((size_t)1 << (b - 0xd9));
		} else if (b == 0xdc || b == 0xdd) { /* array 16/32 */
			hdr = b == 0xdc ? 3 : 5;
		} else { /* 0xde, 0xdf: map 16/32 */
			hdr = b == 0xde ? 3 : 5;
		}
		if (len - pos < hdr)
			return fmt_err(err, errlen, "truncated msgpack value");
		if ((b >= 0xc4 && b <= 0xc6) || (b >= 0xd9 && b <= 0xdb))
			skip = (size_t)be(p + pos + 1, hdr - 1);
		else if (b >= 0xc7 && b <= 0xc9)
			skip = (size_t)be(p + pos + 1, hdr - 2);
		else if (b == 0xdc || b == 0xdd)
			items = be(p + pos + 1, hdr - 1);
		else if (b == 0xde || b == 0xdf)
			items = 2 * be(p + pos + 1, hdr - 1);
		pos += hdr;
		if (len - pos < skip)
			return fmt_err(err, errlen, "truncated msgpack value");
		pos += skip;
		rem[d]--;
		total--;
		if ((b >= 0x80 && b <= 0x9f) || (b >= 0xdc && b <= 0xdf)) {
			if (d >= MP_MAX_DEPTH)
				return fmt_err(err, errlen, "msgpack nested deeper than %d levels",
					       MP_MAX_DEPTH);
			if (items > len - pos || total + items > len - pos)
				return fmt_err(err, errlen,
					       "msgpack container claims %" PRIu64
					       " items with %zu bytes left",
					       items, len - pos);
			total += items;
			rem[++d] = items;
		}
	}
	if (pos != len)
		return fmt_err(err, errlen, "%zu trailing bytes after the msgpack value",
			       len - pos);
	return 0;
}

/* ---- decoding ---------------------------------------------------------------------- */

static const char *
obj_type_name(const msgpack_object *o)
{
	switch (o->type) {
	case MSGPACK_OBJECT_NIL:
		return "nil";
	case MSGPACK_OBJECT_BOOLEAN:
		return "boolean";
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		return "integer";
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64:
		return "float";
	case MSGPACK_OBJECT_STR:
		return "string";
	case MSGPACK_OBJECT_BIN:
		return "binary";
	case MSGPACK_OBJECT_ARRAY:
		return "array";
	case MSGPACK_OBJECT_MAP:
		return "map";
	case MSGPACK_OBJECT_EXT:
		return "ext";
	}
	return "unknown";
}

static bool
is_int(const msgpack_object *o)
{
	return o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ||
	       o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER;
}

static bool
is_str(const msgpack_object *o)
{
	return o->type == MSGPACK_OBJECT_STR;
}

struct dec {
	char *err;
	size_t errlen;
	const char *ctx;
};

static int dec_bad(struct dec *d, const struct field *f, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
dec_bad(struct dec *d, const struct field *f, const char *fmt, ...)
{
	char what[128];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return fmt_err(d->err, d->errlen, "%s: key \"%s\": %s", d->ctx, f->key, what);
}

static bool
obj_is_key(const msgpack_object *o, const char *key)
{
	size_t n = strlen(key);

	return o->type == MSGPACK_OBJECT_STR && o->via.str.size == n &&
	       memcmp(o->via.str.ptr, key, n) == 0;
}

/* A copy of a str object; NULL with *why set on a wrong type, NUL byte or ENOMEM. */
static char *
obj_strdup(const msgpack_object *o, const char **why)
{
	char *s;

	if (o->type != MSGPACK_OBJECT_STR) {
		*why = "expected string";
		return NULL;
	}
	if (memchr(o->via.str.ptr, '\0', o->via.str.size) != NULL) {
		*why = "string contains a NUL byte";
		return NULL;
	}
	if ((s = malloc((size_t)o->via.str.size + 1)) == NULL) {
		*why = "out of memory";
		return NULL;
	}
	memcpy(s, o->via.str.ptr, o->via.str.size);
	s[o->via.str.size] = '\0';
	return s;
}

/* An integer object as int64_t; -1 with *why on a wrong type or range. */
static int
obj_int(const msgpack_object *o, bool nonneg, int64_t *out, const char **why)
{
	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
		if (o->via.u64 > INT64_MAX) {
			*why = "integer out of range";
			return -1;
		}
		*out = (int64_t)o->via.u64;
		return 0;
	}
	if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		if (nonneg) {
			*why = "must not be negative";
			return -1;
		}
		*out = o->via.i64;
		return 0;
	}
	*why = "expected integer";
	return -1;
}

static int
cmp_count_name(const void *a, const void *b)
{
	const struct ipc_count *x = *(const struct ipc_count *const *)a;
	const struct ipc_count *y = *(const struct ipc_count *const *)b;

	return strcmp(x->name, y->name);
}

static int dec_map(struct dec *d, const struct field *f, size_t nf, const msgpack_object *o,
		   void *base);

static int
dec_field(struct dec *d, const struct field *f, const msgpack_object *o, void *base)
{
	const char *why = NULL;
	struct ipc_strv *sv;
	struct ipc_counts *c;
	struct ipc_count **sorted;
	struct any_list l;
	const char *saved_ctx;
	char ctx[96];
	char *s;
	uint32_t n;
	int en;

	switch (f->kind) {
	case F_STR:
	case F_STR_NIL:
		if (o->type == MSGPACK_OBJECT_NIL && f->kind == F_STR_NIL)
			return 0;
		if ((s = obj_strdup(o, &why)) == NULL)
			return dec_bad(d, f, "%s%s%s", why, is_str(o) ? "" : ", got ",
				       is_str(o) ? "" : obj_type_name(o));
		*AT(base, f->off, char *) = s;
		return 0;
	case F_INT:
	case F_UINT:
		if (obj_int(o, f->kind == F_UINT, AT(base, f->off, int64_t), &why) < 0)
			return dec_bad(d, f, "%s%s%s", why, is_int(o) ? "" : ", got ",
				       is_int(o) ? "" : obj_type_name(o));
		return 0;
	case F_BOOL:
		if (o->type != MSGPACK_OBJECT_BOOLEAN)
			return dec_bad(d, f, "expected boolean, got %s", obj_type_name(o));
		*AT(base, f->off, bool) = o->via.boolean;
		return 0;
	case F_ENUM:
		if ((s = obj_strdup(o, &why)) == NULL)
			return dec_bad(d, f, "%s%s%s", why, is_str(o) ? "" : ", got ",
				       is_str(o) ? "" : obj_type_name(o));
		en = name_parse(f->names, f->nnames, s);
		if (en < 0) {
			dec_bad(d, f, "unknown value \"%.40s\"", s);
			free(s);
			return -1;
		}
		free(s);
		*AT(base, f->off, int) = en;
		return 0;
	case F_STRV:
		if (o->type != MSGPACK_OBJECT_ARRAY)
			return dec_bad(d, f, "expected array of strings, got %s", obj_type_name(o));
		sv = AT(base, f->off, struct ipc_strv);
		n = o->via.array.size;
		if (n == 0)
			return 0;
		if ((sv->v = calloc(n, sizeof(*sv->v))) == NULL)
			return dec_bad(d, f, "out of memory");
		for (uint32_t i = 0; i < n; i++) {
			if ((sv->v[i] = obj_strdup(&o->via.array.ptr[i], &why)) == NULL)
				return dec_bad(d, f, "item %u: %s", i, why);
			sv->n++;
		}
		return 0;
	case F_COUNTS:
		if (o->type != MSGPACK_OBJECT_MAP)
			return dec_bad(d, f, "expected map of counts, got %s", obj_type_name(o));
		c = AT(base, f->off, struct ipc_counts);
		n = o->via.map.size;
		if (n == 0)
			return 0;
		if ((c->v = calloc(n, sizeof(*c->v))) == NULL)
			return dec_bad(d, f, "out of memory");
		for (uint32_t i = 0; i < n; i++) {
			const msgpack_object_kv *kv = &o->via.map.ptr[i];

			if ((s = obj_strdup(&kv->key, &why)) == NULL)
				return dec_bad(d, f, "entry %u: name: %s", i, why);
			c->v[i].name = s;
			c->n++;
			if (obj_int(&kv->val, true, &c->v[i].n, &why) < 0)
				return dec_bad(d, f, "\"%.40s\": %s", s, why);
		}
		/* Duplicate names would make the map ambiguous: refuse them. */
		if (n > 1) {
			if ((sorted = malloc(n * sizeof(*sorted))) == NULL)
				return dec_bad(d, f, "out of memory");
			for (uint32_t i = 0; i < n; i++)
				sorted[i] = &c->v[i];
			qsort(sorted, n, sizeof(*sorted), cmp_count_name);
			for (uint32_t i = 1; i < n; i++)
				if (strcmp(sorted[i - 1]->name, sorted[i]->name) == 0) {
					dec_bad(d, f, "duplicate name \"%.40s\"", sorted[i]->name);
					free(sorted);
					return -1;
				}
			free(sorted);
		}
		return 0;
	case F_LIST:
		if (o->type != MSGPACK_OBJECT_ARRAY)
			return dec_bad(d, f, "expected array of maps, got %s", obj_type_name(o));
		n = o->via.array.size;
		if (n == 0)
			return 0;
		l.n = n;
		if ((l.v = calloc(n, f->item->size)) == NULL)
			return dec_bad(d, f, "out of memory");
		/* Stored before the items are filled, so a failure frees them all. */
		list_put(base, f->off, l);
		saved_ctx = d->ctx;
		for (uint32_t i = 0; i < n; i++) {
			snprintf(ctx, sizeof(ctx), "%s: %s[%u]", saved_ctx, f->key, i);
			d->ctx = ctx;
			if (dec_map(d, f->item->fields, f->item->nfields, &o->via.array.ptr[i],
				    (char *)l.v + (size_t)i * f->item->size) < 0)
				return -1;
		}
		d->ctx = saved_ctx;
		return 0;
	}
	return -1;
}

/*
 * Decode the map *o into base by the field table: every field's key must be
 * there exactly once; other keys are ignored (forward compatibility) but
 * must be strings.
 */
static int
dec_map(struct dec *d, const struct field *f, size_t nf, const msgpack_object *o, void *base)
{
	bool seen[MAX_FIELDS] = {false};

	if (o->type != MSGPACK_OBJECT_MAP)
		return fmt_err(d->err, d->errlen, "%s: expected a map, got %s", d->ctx,
			       obj_type_name(o));
	for (uint32_t i = 0; i < o->via.map.size; i++) {
		const msgpack_object_kv *kv = &o->via.map.ptr[i];
		size_t k;

		if (kv->key.type != MSGPACK_OBJECT_STR)
			return fmt_err(d->err, d->errlen, "%s: map key is a %s, not a string",
				       d->ctx, obj_type_name(&kv->key));
		for (k = 0; k < nf; k++)
			if (obj_is_key(&kv->key, f[k].key))
				break;
		if (k == nf)
			continue;
		if (seen[k])
			return dec_bad(d, &f[k], "appears twice");
		seen[k] = true;
		if (dec_field(d, &f[k], &kv->val, base) < 0)
			return -1;
	}
	for (size_t k = 0; k < nf; k++)
		if (!seen[k] && !f[k].optional)
			return fmt_err(d->err, d->errlen, "%s: missing key \"%s\"", d->ctx,
				       f[k].key);
	return 0;
}

/* The value of key in the map *o: NULL if absent, *twice set if repeated. */
static const msgpack_object *
map_find(const msgpack_object *o, const char *key, bool *twice)
{
	const msgpack_object *found = NULL;

	*twice = false;
	for (uint32_t i = 0; i < o->via.map.size; i++)
		if (obj_is_key(&o->via.map.ptr[i].key, key)) {
			if (found != NULL)
				*twice = true;
			found = &o->via.map.ptr[i].val;
		}
	return found;
}

static int
dec_top(const msgpack_object *o, struct ipc_msg *out, char *err, size_t errlen)
{
	const msgpack_object *t, *v;
	struct dec d = {err, errlen, NULL};
	char name[24];
	enum ipc_type type;
	bool twice;

	if (o->type != MSGPACK_OBJECT_MAP)
		return fmt_err(err, errlen, "message is a msgpack %s, not a map", obj_type_name(o));
	t = map_find(o, "t", &twice);
	if (t == NULL)
		return fmt_err(err, errlen, "message has no type (key \"t\")");
	if (twice)
		return fmt_err(err, errlen, "message has key \"t\" twice");
	if (t->type != MSGPACK_OBJECT_STR)
		return fmt_err(err, errlen, "message type (key \"t\") is a %s, not a string",
			       obj_type_name(t));
	if (t->via.str.size >= sizeof(name) ||
	    memchr(t->via.str.ptr, '\0', t->via.str.size) != NULL)
		return fmt_err(err, errlen, "unknown message type");
	memcpy(name, t->via.str.ptr, t->via.str.size);
	name[t->via.str.size] = '\0';
	if ((type = ipc_type_parse(name)) == IPC_NONE)
		return fmt_err(err, errlen, "unknown message type \"%s\"", name);

	v = map_find(o, "v", &twice);
	if (v == NULL)
		return fmt_err(err, errlen, "%s: no protocol version (key \"v\")", name);
	if (twice)
		return fmt_err(err, errlen, "%s: key \"v\" twice", name);
	if (v->type != MSGPACK_OBJECT_POSITIVE_INTEGER &&
	    v->type != MSGPACK_OBJECT_NEGATIVE_INTEGER)
		return fmt_err(err, errlen,
			       "%s: protocol version (key \"v\") is a %s, not an integer", name,
			       obj_type_name(v));
	if (v->type != MSGPACK_OBJECT_POSITIVE_INTEGER || v->via.u64 != IPC_PROTO_VERSION)
		return fmt_err(
		    err, errlen,
		    "%s: protocol version %" PRId64 ", expected %d (nodepoold binaries from "
		    "different versions?)",
		    name,
		    v->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (int64_t)v->via.u64 : v->via.i64,
		    IPC_PROTO_VERSION);

	out->type = type;
	d.ctx = type_names[type];
	return dec_map(&d, msg_descs[type].fields, msg_descs[type].nfields, o, out);
}

int
ipc_msg_decode(const void *body, size_t len, struct ipc_msg *out, char *err, size_t errlen)
{
	msgpack_unpacked u;
	msgpack_unpack_return r;
	size_t off = 0;
	int rc;

	ipc_msg_init(out, IPC_NONE);
	if (len == 0)
		return fmt_err(err, errlen, "empty message");
	if (mp_check(body, len, err, errlen) < 0)
		return -1;
	msgpack_unpacked_init(&u);
	r = msgpack_unpack_next(&u, body, len, &off);
	if (r != MSGPACK_UNPACK_SUCCESS || off != len) {
		msgpack_unpacked_destroy(&u);
		return fmt_err(err, errlen, "%s",
			       r == MSGPACK_UNPACK_NOMEM_ERROR ? "out of memory decoding msgpack"
							       : "malformed msgpack");
	}
	rc = dec_top(&u.data, out, err, errlen);
	msgpack_unpacked_destroy(&u);
	if (rc < 0)
		ipc_msg_clear(out);
	return rc;
}

/* ---- frame reader ---------------------------------------------------------------- */

/* A body buffer larger than this is released once its frame is consumed, so
 * one big CONFIG does not pin a megabyte for the process's life. */
#define READER_KEEP 65536

enum rd_state { RD_HEADER, RD_BODY, RD_FRAME, RD_ERROR };

struct ipc_reader {
	size_t max_body;
	enum rd_state state;
	unsigned char hdr[IPC_FRAME_HDR];
	size_t hdr_have;
	unsigned char *body;
	size_t body_cap, body_len, body_have;
	char err[160];
};

struct ipc_reader *
ipc_reader_new(size_t max_body)
{
	struct ipc_reader *r = calloc(1, sizeof(*r));

	if (r == NULL)
		return NULL;
	r->max_body = max_body == 0 ? IPC_FRAME_MAX_DEFAULT : max_body;
	if (r->max_body > UINT32_MAX)
		r->max_body = UINT32_MAX;
	return r;
}

void
ipc_reader_free(struct ipc_reader *r)
{
	if (r == NULL)
		return;
	free(r->body);
	free(r);
}

static enum ipc_read_result
rd_fail(struct ipc_reader *r, char *err, size_t errlen)
{
	r->state = RD_ERROR;
	fmt_err(err, errlen, "%s", r->err);
	return IPC_READ_ERROR;
}

enum ipc_read_result
ipc_reader_feed(struct ipc_reader *r, const void *data, size_t len, size_t *used, char *err,
		size_t errlen)
{
	const unsigned char *p = data;
	size_t pos = 0, n;

	*used = 0;
	if (r->state == RD_ERROR)
		return rd_fail(r, err, errlen);
	if (r->state == RD_FRAME) {
		r->state = RD_HEADER;
		r->hdr_have = 0;
		if (r->body_cap > READER_KEEP) {
			free(r->body);
			r->body = NULL;
			r->body_cap = 0;
		}
	}
	if (r->state == RD_HEADER) {
		n = IPC_FRAME_HDR - r->hdr_have;
		if (n > len)
			n = len;
		if (n > 0)
			memcpy(r->hdr + r->hdr_have, p, n);
		r->hdr_have += n;
		pos += n;
		*used = pos;
		if (r->hdr_have < IPC_FRAME_HDR)
			return IPC_READ_MORE;
		r->body_len = (size_t)be(r->hdr, IPC_FRAME_HDR);
		if (r->body_len == 0) {
			snprintf(r->err, sizeof(r->err), "empty frame (length 0)");
			return rd_fail(r, err, errlen);
		}
		/* The cap is checked here, before the body is allocated. */
		if (r->body_len > r->max_body) {
			snprintf(r->err, sizeof(r->err),
				 "frame of %zu bytes exceeds the %zu-byte limit", r->body_len,
				 r->max_body);
			return rd_fail(r, err, errlen);
		}
		if (r->body_cap < r->body_len) {
			free(r->body);
			r->body_cap = 0;
			if ((r->body = malloc(r->body_len)) == NULL) {
				snprintf(r->err, sizeof(r->err),
					 "out of memory for a %zu-byte frame", r->body_len);
				return rd_fail(r, err, errlen);
			}
			r->body_cap = r->body_len;
		}
		r->body_have = 0;
		r->state = RD_BODY;
	}
	n = r->body_len - r->body_have;
	if (n > len - pos)
		n = len - pos;
	if (n > 0)
		memcpy(r->body + r->body_have, p + pos, n);
	r->body_have += n;
	pos += n;
	*used = pos;
	if (r->body_have < r->body_len)
		return IPC_READ_MORE;
	r->state = RD_FRAME;
	return IPC_READ_FRAME;
}

const unsigned char *
ipc_reader_frame(const struct ipc_reader *r, size_t *len)
{
	if (r->state != RD_FRAME) {
		if (len != NULL)
			*len = 0;
		return NULL;
	}
	if (len != NULL)
		*len = r->body_len;
	return r->body;
}

size_t
ipc_reader_pending(const struct ipc_reader *r)
{
	switch (r->state) {
	case RD_HEADER:
		return r->hdr_have;
	case RD_BODY:
		return IPC_FRAME_HDR + r->body_have;
	default:
		return 0;
	}
}
