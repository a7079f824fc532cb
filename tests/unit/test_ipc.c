/*
 * protocol/ipc: framing, the frame reader, and every message's encoder and
 * strict decoder. Hostile bytes are built with msgpack-c's packer, as a
 * buggy or foreign peer would send them.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

#include "protocol/ipc.h"
#include "tests/support/ipc_samples.h"

#define ERRLEN 256

static uint32_t
be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void
body_of(const struct ipc_msg *m, unsigned char **out, size_t *len)
{
	char err[ERRLEN];

	cr_assert_eq(ipc_msg_encode(m, out, len, err, sizeof(err)), 0, "encode: %s", err);
}

/* Decode len bytes expecting failure; returns the error text (static). */
static const char *
decode_err(const void *p, size_t len)
{
	static char err[ERRLEN];
	struct ipc_msg m;

	err[0] = '\0';
	cr_assert_eq(ipc_msg_decode(p, len, &m, err, sizeof(err)), -1,
		     "decoded %zu bytes that should fail", len);
	cr_assert_eq(m.type, IPC_NONE);
	cr_assert_neq(err[0], '\0', "no error message");
	ipc_msg_clear(&m);
	return err;
}

/* ---- a re-packer: a valid message with one key changed ------------------------ */

enum mut { MUT_DROP, MUT_REPLACE, MUT_DUP, MUT_EXTRA };

struct mutation {
	const char *path[4]; /* keys, or list indexes as decimal strings */
	int depth;
	enum mut mode;
	void (*val)(msgpack_packer *pk);
};

static void
repack(msgpack_packer *pk, const msgpack_object *o, const struct mutation *mu, int level)
{
	const char *want = level < mu->depth ? mu->path[level] : NULL;
	bool last = level == mu->depth - 1;
	uint32_t n;

	if (o->type == MSGPACK_OBJECT_ARRAY && want != NULL) {
		msgpack_pack_array(pk, o->via.array.size);
		for (uint32_t i = 0; i < o->via.array.size; i++) {
			if ((uint32_t)atoi(want) == i)
				repack(pk, &o->via.array.ptr[i], mu, level + 1);
			else
				msgpack_pack_object(pk, o->via.array.ptr[i]);
		}
		return;
	}
	if (o->type != MSGPACK_OBJECT_MAP || want == NULL) {
		msgpack_pack_object(pk, *o);
		return;
	}
	n = o->via.map.size;
	if (last && mu->mode == MUT_DROP)
		n--;
	if (last && (mu->mode == MUT_DUP || mu->mode == MUT_EXTRA))
		n++;
	msgpack_pack_map(pk, n);
	if (last && mu->mode == MUT_EXTRA) {
		msgpack_pack_str_with_body(pk, "zz_future_key", 13);
		mu->val(pk);
	}
	for (uint32_t i = 0; i < o->via.map.size; i++) {
		const msgpack_object_kv *kv = &o->via.map.ptr[i];
		bool hit = kv->key.type == MSGPACK_OBJECT_STR &&
			   kv->key.via.str.size == strlen(want) &&
			   memcmp(kv->key.via.str.ptr, want, strlen(want)) == 0;

		if (!hit) {
			msgpack_pack_object(pk, kv->key);
			msgpack_pack_object(pk, kv->val);
			continue;
		}
		if (!last) {
			msgpack_pack_object(pk, kv->key);
			repack(pk, &kv->val, mu, level + 1);
			continue;
		}
		switch (mu->mode) {
		case MUT_DROP:
			break;
		case MUT_REPLACE:
			msgpack_pack_object(pk, kv->key);
			mu->val(pk);
			break;
		case MUT_DUP:
			msgpack_pack_object(pk, kv->key);
			msgpack_pack_object(pk, kv->val);
			msgpack_pack_object(pk, kv->key);
			msgpack_pack_object(pk, kv->val);
			break;
		case MUT_EXTRA:
			msgpack_pack_object(pk, kv->key);
			msgpack_pack_object(pk, kv->val);
			break;
		}
	}
}

/* The body of m with the mutation applied (malloc'd, *len set). */
static char *
mutate(const struct ipc_msg *m, const struct mutation *mu, size_t *len)
{
	unsigned char *body;
	size_t blen, off = 0;
	msgpack_unpacked u;
	msgpack_sbuffer sb;
	msgpack_packer pk;

	body_of(m, &body, &blen);
	msgpack_unpacked_init(&u);
	cr_assert_eq(msgpack_unpack_next(&u, (const char *)body, blen, &off),
		     MSGPACK_UNPACK_SUCCESS);
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	repack(&pk, &u.data, mu, 0);
	msgpack_unpacked_destroy(&u);
	free(body);
	*len = sb.size;
	return msgpack_sbuffer_release(&sb);
}

static void
pk_float(msgpack_packer *pk)
{
	msgpack_pack_double(pk, 3.5);
}
static void
pk_nil(msgpack_packer *pk)
{
	msgpack_pack_nil(pk);
}
static void
pk_neg(msgpack_packer *pk)
{
	msgpack_pack_int64(pk, -1);
}
static void
pk_huge(msgpack_packer *pk)
{
	msgpack_pack_uint64(pk, UINT64_MAX);
}
static void
pk_v2(msgpack_packer *pk)
{
	msgpack_pack_int64(pk, 2);
}
static void
pk_str_flying(msgpack_packer *pk)
{
	msgpack_pack_str_with_body(pk, "flying", 6);
}
static void
pk_str_true(msgpack_packer *pk)
{
	msgpack_pack_str_with_body(pk, "true", 4);
}
static void
pk_str_hello(msgpack_packer *pk)
{
	msgpack_pack_str_with_body(pk, "HELLO", 5);
}
static void
pk_str_nul(msgpack_packer *pk)
{
	msgpack_pack_str_with_body(pk, "rax\0dfw", 7);
}
static void
pk_nested(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 1);
	msgpack_pack_str_with_body(pk, "x", 1);
	msgpack_pack_array(pk, 2);
	msgpack_pack_bin_with_body(pk, "\x01\x02", 2);
	msgpack_pack_ext_with_body(pk, "abc", 3, 7);
}

/* The top-level keys of m's encoding, in wire order (NULL-terminated, static). */
static const char **
wire_keys(const struct ipc_msg *m)
{
	static char names[32][24];
	static const char *keys[33];
	unsigned char *body;
	size_t blen, off = 0;
	msgpack_unpacked u;
	uint32_t i;

	body_of(m, &body, &blen);
	msgpack_unpacked_init(&u);
	cr_assert_eq(msgpack_unpack_next(&u, (const char *)body, blen, &off),
		     MSGPACK_UNPACK_SUCCESS);
	cr_assert_eq(u.data.type, MSGPACK_OBJECT_MAP);
	cr_assert_lt(u.data.via.map.size, 32);
	for (i = 0; i < u.data.via.map.size; i++) {
		const msgpack_object_str *k = &u.data.via.map.ptr[i].key.via.str;

		cr_assert_eq(u.data.via.map.ptr[i].key.type, MSGPACK_OBJECT_STR);
		cr_assert_lt(k->size, sizeof(names[i]));
		memcpy(names[i], k->ptr, k->size);
		names[i][k->size] = '\0';
		keys[i] = names[i];
	}
	keys[i] = NULL;
	msgpack_unpacked_destroy(&u);
	free(body);
	return keys;
}

/* ---- names and catalogue ----------------------------------------------------------- */

Test(ipc, names_and_directions)
{
	for (int t = IPC_NONE + 1; t < IPC_TYPE_COUNT; t++) {
		const char *n = ipc_type_name(t);

		cr_assert_not_null(n, "type %d has no name", t);
		cr_assert_eq(ipc_type_parse(n), t, "%s", n);
		cr_assert_neq(ipc_type_dir(t), IPC_DIR_NONE, "%s", n);
	}
	cr_assert_null(ipc_type_name(IPC_NONE));
	cr_assert_null(ipc_type_name(IPC_TYPE_COUNT));
	cr_assert_eq(ipc_type_parse("ready"), IPC_NONE, "wire names are upper case");
	cr_assert_eq(ipc_type_parse(NULL), IPC_NONE);
	cr_assert_eq(ipc_type_dir(IPC_READY), IPC_DIR_CHILD_TO_SUP);
	cr_assert_eq(ipc_type_dir(IPC_STATUS), IPC_DIR_CHILD_TO_SUP);
	cr_assert_eq(ipc_type_dir(IPC_CONFIG_ACK), IPC_DIR_CHILD_TO_SUP);
	cr_assert_eq(ipc_type_dir(IPC_DUMP_REPLY), IPC_DIR_CHILD_TO_SUP);
	cr_assert_eq(ipc_type_dir(IPC_CONFIG), IPC_DIR_SUP_TO_CHILD);
	cr_assert_eq(ipc_type_dir(IPC_STATUS_REQ), IPC_DIR_SUP_TO_CHILD);
	cr_assert_eq(ipc_type_dir(IPC_STOP), IPC_DIR_SUP_TO_CHILD);
	cr_assert_eq(ipc_type_dir(IPC_DUMP_REQ), IPC_DIR_SUP_TO_CHILD);
	cr_assert_eq(ipc_type_dir(IPC_METRICS), IPC_DIR_SUP_TO_CHILD);
	cr_assert_str_eq(ipc_type_name(IPC_METRICS), "METRICS");
	cr_assert_eq(ipc_type_dir(IPC_CTL_STATUS), IPC_DIR_CTL_REQUEST);
	cr_assert_eq(ipc_type_dir(IPC_CTL_RESTART), IPC_DIR_CTL_REQUEST);
	cr_assert_eq(ipc_type_dir(IPC_CTL_RELOAD), IPC_DIR_CTL_REQUEST);
	cr_assert_eq(ipc_type_dir(IPC_CTL_STOP), IPC_DIR_CTL_REQUEST);
	cr_assert_eq(ipc_type_dir(IPC_CTL_STATUS_REPLY), IPC_DIR_CTL_REPLY);
	cr_assert_eq(ipc_type_dir(IPC_CTL_RESULT), IPC_DIR_CTL_REPLY);
	cr_assert_eq(ipc_type_dir(IPC_JOB), IPC_DIR_BUILDER_TO_POOL);
	cr_assert_eq(ipc_type_dir(IPC_JOB_DONE), IPC_DIR_POOL_TO_BUILDER);

	cr_assert_str_eq(ipc_worker_state_name(IPC_WS_DRAINING), "draining");
	cr_assert_eq(ipc_worker_state_parse("paused"), IPC_WS_PAUSED);
	cr_assert_eq(ipc_worker_state_parse("sleeping"), -1);
	cr_assert_str_eq(ipc_zk_state_name(IPC_ZK_SUSPENDED), "suspended");
	cr_assert_eq(ipc_zk_state_parse("expired"), IPC_ZK_EXPIRED);
	cr_assert_str_eq(ipc_child_kind_name(IPC_KIND_BUILDER), "builder");
	cr_assert_eq(ipc_child_kind_parse("provider"), IPC_KIND_PROVIDER);
	cr_assert_str_eq(ipc_child_kind_name(IPC_KIND_WEB), "web");
	cr_assert_eq(ipc_child_kind_parse("web"), IPC_KIND_WEB);
	cr_assert_null(ipc_zk_state_name(IPC_ZK_COUNT));
}

/* ---- round trips --------------------------------------------------------------------- */

Test(ipc, every_message_round_trips)
{
	char err[ERRLEN];

	for (int t = IPC_NONE + 1; t < IPC_TYPE_COUNT; t++) {
		for (int v = 0; v < IPC_SAMPLE_VARIANTS; v++) {
			struct ipc_msg m, d;
			unsigned char *frame, *body2;
			size_t flen, blen2;

			ipc_sample(t, v, &m);
			cr_assert_eq(ipc_frame_encode(&m, 0, &frame, &flen, err, sizeof(err)), 0,
				     "%s: %s", ipc_type_name(t), err);
			cr_assert_gt(flen, IPC_FRAME_HDR);
			cr_assert_eq(be32(frame), flen - IPC_FRAME_HDR, "header length");
			cr_assert_eq(ipc_msg_decode(frame + 4, flen - 4, &d, err, sizeof(err)), 0,
				     "%s/%d: %s", ipc_type_name(t), v, err);
			cr_assert_eq(d.type, t);
			cr_assert(ipc_msg_equal(&m, &d), "%s/%d differs after a round trip",
				  ipc_type_name(t), v);
			/* Canonical: the decoded message encodes to the same bytes. */
			body_of(&d, &body2, &blen2);
			cr_assert_eq(blen2, flen - 4);
			cr_assert_eq(memcmp(body2, frame + 4, blen2), 0);
			free(body2);
			free(frame);
			ipc_msg_clear(&d);
			ipc_msg_clear(&m);
		}
	}
}

Test(ipc, equal_sees_every_difference)
{
	struct ipc_msg a, b;

	ipc_sample(IPC_STATUS, 0, &a);
	ipc_sample(IPC_STATUS, 0, &b);
	cr_assert(ipc_msg_equal(&a, &b));
	b.u.status.pools.v[1].paused = false;
	cr_assert_not(ipc_msg_equal(&a, &b), "nested bool");
	b.u.status.pools.v[1].paused = true;
	b.u.status.nodes.v[2].n++;
	cr_assert_not(ipc_msg_equal(&a, &b), "count");
	b.u.status.nodes.v[2].n--;
	ipc_set_str(&b.u.status.last_error, NULL);
	cr_assert_not(ipc_msg_equal(&a, &b), "nil vs string");
	ipc_msg_clear(&b);
	ipc_sample(IPC_STATUS, 1, &b);
	cr_assert_not(ipc_msg_equal(&a, &b));
	ipc_msg_clear(&b);
	ipc_sample(IPC_CTL_STATUS, 0, &b);
	cr_assert_not(ipc_msg_equal(&a, &b), "type");
	ipc_msg_clear(&a);
	ipc_msg_clear(&b);
	ipc_msg_clear(NULL);
}

Test(ipc, wire_shape_is_a_map_with_short_keys)
{
	static const char *status_keys[] = {
	    "t",	"v",	     "seq",	      "gen",	   "state",	"zk",
	    "accepted", "fulfilled", "declined",      "failed",	   "launching", "nodes",
	    "pools",	"error",     "rss_kb",	      "cpu_ms",	   "uptime_s",	"metrics",
	    "zk_queue", "peers",     "lock_attempts", "lock_lost", "pss_kb",	NULL};
	struct ipc_msg m;
	const char **keys;
	unsigned char *body;
	size_t blen, off = 0;
	msgpack_unpacked u;
	const msgpack_object_map *map;
	int i;

	ipc_sample(IPC_STATUS, 0, &m);
	keys = wire_keys(&m);
	for (i = 0; status_keys[i] != NULL; i++) {
		cr_assert_not_null(keys[i], "missing %s", status_keys[i]);
		cr_assert_str_eq(keys[i], status_keys[i]);
	}
	cr_assert_null(keys[i]);

	body_of(&m, &body, &blen);
	msgpack_unpacked_init(&u);
	cr_assert_eq(msgpack_unpack_next(&u, (const char *)body, blen, &off),
		     MSGPACK_UNPACK_SUCCESS);
	map = &u.data.via.map;
	cr_assert_eq(map->ptr[0].val.type, MSGPACK_OBJECT_STR);
	cr_assert_eq(map->ptr[0].val.via.str.size, 6);
	cr_assert_eq(memcmp(map->ptr[0].val.via.str.ptr, "STATUS", 6), 0);
	cr_assert_eq(map->ptr[1].val.type, MSGPACK_OBJECT_POSITIVE_INTEGER);
	cr_assert_eq(map->ptr[1].val.via.u64, IPC_PROTO_VERSION);
	cr_assert_eq(map->ptr[4].val.type, MSGPACK_OBJECT_STR, "state is a name");
	cr_assert_eq(memcmp(map->ptr[4].val.via.str.ptr, "running", 7), 0);
	cr_assert_eq(map->ptr[11].val.type, MSGPACK_OBJECT_MAP, "nodes is a map");
	cr_assert_eq(map->ptr[11].val.via.map.size, 3);
	cr_assert_eq(map->ptr[12].val.type, MSGPACK_OBJECT_ARRAY, "pools is a list");
	cr_assert_eq(map->ptr[12].val.via.array.ptr[1].type, MSGPACK_OBJECT_MAP);
	cr_assert_eq(map->ptr[13].val.type, MSGPACK_OBJECT_STR);
	msgpack_unpacked_destroy(&u);
	free(body);
	ipc_msg_clear(&m);

	/* nil where allowed */
	ipc_sample(IPC_STATUS, 1, &m);
	body_of(&m, &body, &blen);
	msgpack_unpacked_init(&u);
	off = 0;
	cr_assert_eq(msgpack_unpack_next(&u, (const char *)body, blen, &off),
		     MSGPACK_UNPACK_SUCCESS);
	cr_assert_eq(u.data.via.map.ptr[13].val.type, MSGPACK_OBJECT_NIL);
	msgpack_unpacked_destroy(&u);
	free(body);
	ipc_msg_clear(&m);

	/* fieldless messages carry t and v only */
	ipc_msg_init(&m, IPC_CTL_RELOAD);
	keys = wire_keys(&m);
	cr_assert_str_eq(keys[0], "t");
	cr_assert_str_eq(keys[1], "v");
	cr_assert_null(keys[2]);
}

Test(ipc, json_rendering_uses_wire_keys)
{
	struct ipc_msg m;
	json_t *j, *w;

	ipc_sample(IPC_CTL_STATUS_REPLY, 0, &m);
	j = ipc_msg_to_json(&m);
	cr_assert_not_null(j);
	cr_assert_str_eq(json_string_value(json_object_get(j, "t")), "CTL_STATUS_REPLY");
	cr_assert_eq(json_integer_value(json_object_get(j, "v")), IPC_PROTO_VERSION);
	w = json_array_get(json_object_get(j, "workers"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(w, "name")), "rax-dfw");
	cr_assert_str_eq(json_string_value(json_object_get(w, "kind")), "provider");
	cr_assert_str_eq(json_string_value(json_object_get(w, "zk")), "connected");
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(w, "nodes"), "ready")), 3);
	w = json_array_get(json_object_get(j, "workers"), 1);
	cr_assert_str_eq(json_string_value(json_object_get(w, "kind")), "builder");
	cr_assert(json_is_null(json_object_get(w, "error")));
	json_decref(j);
	m.u.ctl_status_reply.workers.v[0].kind = 9;
	cr_assert_null(ipc_msg_to_json(&m), "an unencodable message has no JSON");
	ipc_msg_clear(&m);
}

/* ---- the frame reader --------------------------------------------------------------- */

/* Every sample message, framed and concatenated. */
static unsigned char *
sample_stream(size_t *len, struct ipc_msg *want, int *nwant)
{
	unsigned char *s = NULL, *f;
	size_t flen;
	char err[ERRLEN];

	*len = 0;
	*nwant = 0;
	for (int t = IPC_NONE + 1; t < IPC_TYPE_COUNT; t++)
		for (int v = 0; v < IPC_SAMPLE_VARIANTS; v++) {
			ipc_sample(t, v, &want[*nwant]);
			cr_assert_eq(
			    ipc_frame_encode(&want[*nwant], 0, &f, &flen, err, sizeof(err)), 0);
			s = realloc(s, *len + flen);
			memcpy(s + *len, f, flen);
			*len += flen;
			free(f);
			(*nwant)++;
		}
	return s;
}

/* Feed s[0..len) in chunks cut at the offsets in cuts[] (ascending); check
 * every frame decodes to want[] in order. */
static void
feed_and_check(const unsigned char *s, size_t len, const size_t *cuts, size_t ncuts,
	       const struct ipc_msg *want, int nwant)
{
	struct ipc_reader *r = ipc_reader_new(0);
	char err[ERRLEN];
	size_t start = 0;
	int got = 0;

	cr_assert_not_null(r);
	for (size_t c = 0; c <= ncuts; c++) {
		size_t end = c < ncuts ? cuts[c] : len;
		const unsigned char *p = s + start;
		size_t n = end - start, used;

		for (;;) {
			enum ipc_read_result rr = ipc_reader_feed(r, p, n, &used, err, sizeof(err));

			cr_assert_neq(rr, IPC_READ_ERROR, "%s", err);
			cr_assert_leq(used, n);
			p += used;
			n -= used;
			if (rr == IPC_READ_MORE) {
				cr_assert_eq(n, 0, "MORE must consume everything");
				break;
			}
			{
				struct ipc_msg m;
				size_t blen;
				const unsigned char *b = ipc_reader_frame(r, &blen);

				cr_assert_not_null(b);
				cr_assert_lt(got, nwant);
				cr_assert_eq(ipc_msg_decode(b, blen, &m, err, sizeof(err)), 0, "%s",
					     err);
				cr_assert(ipc_msg_equal(&m, &want[got]), "frame %d differs", got);
				ipc_msg_clear(&m);
				got++;
			}
		}
		start = end;
	}
	cr_assert_eq(got, nwant, "got %d frames of %d", got, nwant);
	cr_assert_eq(ipc_reader_pending(r), 0);
	ipc_reader_free(r);
}

Test(ipc, frames_split_at_every_byte_reassemble)
{
	struct ipc_msg want[2 * IPC_TYPE_COUNT];
	int nwant;
	size_t len;
	unsigned char *s = sample_stream(&len, want, &nwant);
	size_t *cuts;

	/* One cut at every possible offset... */
	for (size_t k = 0; k <= len; k++)
		feed_and_check(s, len, &k, 1, want, nwant);
	/* ...two cuts at every pair in the first frames... */
	for (size_t a = 0; a < 40; a++)
		for (size_t b = a; b < 80; b++) {
			size_t c2[2] = {a, b};
			feed_and_check(s, len, c2, 2, want, nwant);
		}
	/* ...and one byte at a time. */
	cuts = malloc(len * sizeof(*cuts));
	for (size_t k = 0; k < len; k++)
		cuts[k] = k;
	feed_and_check(s, len, cuts, len, want, nwant);
	free(cuts);
	free(s);
	for (int i = 0; i < nwant; i++)
		ipc_msg_clear(&want[i]);
}

Test(ipc, oversize_length_refused_before_the_body)
{
	struct ipc_reader *r;
	char err[ERRLEN];
	size_t used;
	unsigned char hdr[4] = {0xff, 0xff, 0xff, 0xff};
	unsigned char f[4 + 65] = {0, 0, 0, 65};

	/* A 4 GiB announcement: refused on the header alone, nothing allocated
	 * for it (under ASan a 4 GiB malloc would abort the test). */
	r = ipc_reader_new(0);
	cr_assert_eq(ipc_reader_feed(r, hdr, 4, &used, err, sizeof(err)), IPC_READ_ERROR);
	cr_assert_eq(used, 4);
	cr_assert_str_eq(err, "frame of 4294967295 bytes exceeds the 1048576-byte limit");
	/* The stream is out of step: the error sticks. */
	err[0] = '\0';
	cr_assert_eq(ipc_reader_feed(r, f, sizeof(f), &used, err, sizeof(err)), IPC_READ_ERROR);
	cr_assert_eq(used, 0);
	cr_assert_str_eq(err, "frame of 4294967295 bytes exceeds the 1048576-byte limit");
	ipc_reader_free(r);

	/* The cap is a parameter: 64 passes, 65 does not. */
	r = ipc_reader_new(64);
	cr_assert_eq(ipc_reader_feed(r, f, 3, &used, err, sizeof(err)), IPC_READ_MORE);
	cr_assert_eq(ipc_reader_pending(r), 3);
	cr_assert_eq(ipc_reader_feed(r, f + 3, 1, &used, err, sizeof(err)), IPC_READ_ERROR);
	cr_assert_str_eq(err, "frame of 65 bytes exceeds the 64-byte limit");
	ipc_reader_free(r);
	r = ipc_reader_new(64);
	f[3] = 64;
	cr_assert_eq(ipc_reader_feed(r, f, 4 + 64, &used, err, sizeof(err)), IPC_READ_FRAME);
	cr_assert_eq(used, 68);
	ipc_reader_free(r);
	ipc_reader_free(NULL);
}

Test(ipc, empty_frame_is_an_error)
{
	struct ipc_reader *r = ipc_reader_new(0);
	unsigned char z[8] = {0};
	char err[ERRLEN];
	size_t used;

	cr_assert_eq(ipc_reader_feed(r, z, sizeof(z), &used, err, sizeof(err)), IPC_READ_ERROR);
	cr_assert_str_eq(err, "empty frame (length 0)");
	ipc_reader_free(r);
	cr_assert_str_eq(decode_err("", 0), "empty message");
}

Test(ipc, reader_frame_accessors)
{
	struct ipc_reader *r = ipc_reader_new(0);
	struct ipc_msg m;
	unsigned char *f;
	size_t flen, used, blen;
	char err[ERRLEN];

	ipc_sample(IPC_STOP, 0, &m);
	cr_assert_eq(ipc_frame_encode(&m, 0, &f, &flen, err, sizeof(err)), 0);
	cr_assert_null(ipc_reader_frame(r, &blen));
	cr_assert_eq(ipc_reader_feed(r, f, 0, &used, err, sizeof(err)), IPC_READ_MORE);
	cr_assert_eq(ipc_reader_feed(r, f, flen - 1, &used, err, sizeof(err)), IPC_READ_MORE);
	cr_assert_eq(ipc_reader_pending(r), flen - 1);
	cr_assert_null(ipc_reader_frame(r, &blen));
	cr_assert_eq(ipc_reader_feed(r, f + flen - 1, 1, &used, err, sizeof(err)), IPC_READ_FRAME);
	cr_assert_eq(ipc_reader_pending(r), 0);
	cr_assert_not_null(ipc_reader_frame(r, &blen));
	cr_assert_eq(blen, flen - 4);
	cr_assert_eq(memcmp(ipc_reader_frame(r, NULL), f + 4, blen), 0);
	free(f);
	ipc_msg_clear(&m);
	ipc_reader_free(r);
}

Test(ipc, encoder_enforces_the_frame_cap)
{
	struct ipc_msg m;
	unsigned char *f;
	size_t flen, used;
	char err[ERRLEN];
	char *big = malloc(2 * 1024 * 1024 + 1);
	struct ipc_reader *r;

	memset(big, 'x', 2 * 1024 * 1024);
	big[2 * 1024 * 1024] = '\0';
	ipc_msg_init(&m, IPC_CONFIG);
	ipc_set_str(&m.u.config.provider, "p");
	m.u.config.config = big;
	cr_assert_eq(ipc_frame_encode(&m, 0, &f, &flen, err, sizeof(err)), -1);
	cr_assert(strstr(err, "exceeds the 1048576-byte frame limit") != NULL, "%s", err);
	cr_assert_eq(ipc_frame_encode(&m, 4 << 20, &f, &flen, err, sizeof(err)), 0, "%s", err);
	r = ipc_reader_new(0);
	cr_assert_eq(ipc_reader_feed(r, f, flen, &used, err, sizeof(err)), IPC_READ_ERROR,
		     "a peer with the default cap refuses it");
	cr_assert_eq(used, 4);
	ipc_reader_free(r);
	free(f);
	ipc_msg_clear(&m);
}

/* ---- hostile input ------------------------------------------------------------------ */

Test(ipc, every_truncation_is_an_error)
{
	for (int t = IPC_NONE + 1; t < IPC_TYPE_COUNT; t++) {
		struct ipc_msg m;
		unsigned char *b;
		size_t blen;

		ipc_sample(t, 0, &m);
		body_of(&m, &b, &blen);
		for (size_t k = 1; k < blen; k++) {
			const char *e = decode_err(b, k);

			/* Cut inside a value, or after a container header whose
			 * count no longer fits in what is left. */
			cr_assert(strcmp(e, "truncated msgpack value") == 0 ||
				      strncmp(e, "msgpack container claims", 24) == 0,
				  "%s cut at %zu: %s", ipc_type_name(t), k, e);
		}
		free(b);
		ipc_msg_clear(&m);
	}
}

Test(ipc, garbage_is_an_error)
{
	uint64_t x = 0x9e3779b97f4a7c15ULL;
	unsigned char buf[64];

	/* Hand-picked bytes a broken peer could send. */
	cr_assert_str_eq(decode_err("\xc1", 1), "invalid msgpack byte 0xc1");
	cr_assert_str_eq(decode_err("\x93\x01\x02\x03", 4),
			 "message is a msgpack array, not a map");
	cr_assert_str_eq(decode_err("\x80", 1), "message has no type (key \"t\")");
	cr_assert_str_eq(decode_err("\x81\xa1t\x01", 4),
			 "message type (key \"t\") is a integer, not a string");
	cr_assert_str_eq(decode_err("\x80\x80", 2), "1 trailing bytes after the msgpack value");
	/* JSON is not msgpack: '{' reads as the positive fixint 123. */
	cr_assert_str_eq(decode_err("{\"t\":\"READY\"}", 13),
			 "12 trailing bytes after the msgpack value");
	/* Containers claiming more items than bytes: refused before msgpack-c
	 * would allocate 4 billion objects. */
	cr_assert_str_eq(decode_err("\xdd\xff\xff\xff\xff", 5),
			 "msgpack container claims 4294967295 items with 0 bytes left");
	cr_assert_str_eq(decode_err("\xdf\xff\xff\xff\xff\xc0\xc0", 7),
			 "msgpack container claims 8589934590 items with 2 bytes left");
	cr_assert_str_eq(decode_err("\x92\xdc\x00\x03\xc0\xc0\xc0", 7),
			 "msgpack container claims 3 items with 3 bytes left");
	/* Nesting. */
	memset(buf, 0x91, sizeof(buf));
	buf[sizeof(buf) - 1] = 0xc0;
	cr_assert_str_eq(decode_err(buf, sizeof(buf)), "msgpack nested deeper than 16 levels");
	/* Lengths past the end. */
	cr_assert_str_eq(decode_err("\xdb\x00\x00\x01\x00zz", 7), "truncated msgpack value");
	cr_assert_str_eq(decode_err("\xc7\x05\x01zz", 5), "truncated msgpack value");

	/* Pseudo-random bytes never decode, never crash. */
	for (int i = 0; i < 20000; i++) {
		struct ipc_msg m;
		char err[ERRLEN];
		size_t n = 1 + (size_t)(x % sizeof(buf));

		for (size_t k = 0; k < n; k++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			buf[k] = (unsigned char)x;
		}
		if (i % 2)
			buf[0] = 0x80 | (buf[0] & 0x0f); /* a fixmap, to get further */
		cr_assert_eq(ipc_msg_decode(buf, n, &m, err, sizeof(err)), -1);
		cr_assert_neq(err[0], '\0');
		ipc_msg_clear(&m);
	}
}

Test(ipc, missing_keys_are_errors)
{
	char want[128];

	for (int t = IPC_NONE + 1; t < IPC_TYPE_COUNT; t++) {
		struct ipc_msg m;
		const char **keys;

		ipc_sample(t, 0, &m);
		keys = wire_keys(&m);
		for (int k = 0; keys[k] != NULL; k++) {
			struct mutation mu = {{keys[k]}, 1, MUT_DROP, NULL};
			size_t len;
			char *b;

			if (t == IPC_STATUS &&
			    (strcmp(keys[k], "metrics") == 0 || strcmp(keys[k], "zk_queue") == 0 ||
			     strcmp(keys[k], "peers") == 0 ||
			     strcmp(keys[k], "lock_attempts") == 0 ||
			     strcmp(keys[k], "lock_lost") == 0 || strcmp(keys[k], "pss_kb") == 0))
				continue; /* optional: status_without_metrics_decodes */
			b = mutate(&m, &mu, &len);
			if (strcmp(keys[k], "t") == 0)
				snprintf(want, sizeof(want), "message has no type (key \"t\")");
			else if (strcmp(keys[k], "v") == 0)
				snprintf(want, sizeof(want), "%s: no protocol version (key \"v\")",
					 ipc_type_name(t));
			else
				snprintf(want, sizeof(want), "%s: missing key \"%s\"",
					 ipc_type_name(t), keys[k]);
			cr_assert_str_eq(decode_err(b, len), want);
			free(b);
		}
		ipc_msg_clear(&m);
	}
}

Test(ipc, wrong_types_are_errors)
{
	for (int t = IPC_NONE + 1; t < IPC_TYPE_COUNT; t++) {
		struct ipc_msg m;
		const char **keys;

		ipc_sample(t, 0, &m);
		keys = wire_keys(&m);
		for (int k = 0; keys[k] != NULL; k++) {
			struct mutation mu = {{keys[k]}, 1, MUT_REPLACE, pk_float};
			size_t len;
			char *b = mutate(&m, &mu, &len);
			const char *e = decode_err(b, len);

			if (strcmp(keys[k], "t") == 0)
				cr_assert_str_eq(
				    e, "message type (key \"t\") is a float, not a string");
			else if (strcmp(keys[k], "v") == 0)
				cr_assert(strstr(e, "protocol version (key \"v\") is a float") !=
					      NULL,
					  "%s", e);
			else
				cr_assert(strstr(e, keys[k]) != NULL &&
					      strstr(e, "got float") != NULL,
					  "%s.%s: %s", ipc_type_name(t), keys[k], e);
			free(b);

			/* nil: allowed only for "error", STATUS's "metrics" and
			 * JOB_DONE's "result" */
			mu.val = pk_nil;
			b = mutate(&m, &mu, &len);
			if (strcmp(keys[k], "error") == 0 || strcmp(keys[k], "metrics") == 0 ||
			    (t == IPC_JOB_DONE && strcmp(keys[k], "result") == 0)) {
				struct ipc_msg d;
				char err[ERRLEN];

				cr_assert_eq(ipc_msg_decode(b, len, &d, err, sizeof(err)), 0, "%s",
					     err);
				if (t == IPC_JOB_DONE)
					cr_assert_null(strcmp(keys[k], "error") == 0
							   ? d.u.job_done.error
							   : d.u.job_done.result);
				else
					cr_assert_null(keys[k][0] == 'e' ? d.u.status.last_error
									 : d.u.status.metrics);
				ipc_msg_clear(&d);
			} else {
				decode_err(b, len);
			}
			free(b);
		}
		ipc_msg_clear(&m);
	}
}

/* Decode the STATUS sample with a mutation; return the error. */
static const char *
status_err(struct mutation mu)
{
	struct ipc_msg m;
	size_t len;
	char *b;
	const char *e;

	ipc_sample(IPC_STATUS, 0, &m);
	b = mutate(&m, &mu, &len);
	e = decode_err(b, len);
	free(b);
	ipc_msg_clear(&m);
	return e;
}

/* "metrics" came after version 1: a STATUS without it (an older worker's)
 * decodes, with no record. */
Test(ipc, status_without_metrics_decodes)
{
	struct ipc_msg m, d;
	struct mutation mu = {{"metrics"}, 1, MUT_DROP, NULL};
	struct mutation mq = {{"zk_queue"}, 1, MUT_DROP, NULL};
	char err[ERRLEN];
	size_t len;
	char *b;

	ipc_sample(IPC_STATUS, 0, &m);
	b = mutate(&m, &mu, &len);
	cr_assert_eq(ipc_msg_decode(b, len, &d, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(d.type, IPC_STATUS);
	cr_assert_null(d.u.status.metrics);
	cr_assert_eq(d.u.status.zk_queue, m.u.status.zk_queue);
	free(b);
	ipc_msg_clear(&d);
	b = mutate(&m, &mq, &len);
	cr_assert_eq(ipc_msg_decode(b, len, &d, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(d.u.status.zk_queue, 0);
	cr_assert_str_eq(d.u.status.metrics, m.u.status.metrics);
	/* at their defaults the optional keys are left out, as an older
	 * worker sends it */
	{
		struct ipc_msg z;
		const char **keys;
		ipc_sample(IPC_STATUS, 1, &z);
		keys = wire_keys(&z);
		for (int k = 0; keys[k] != NULL; k++) {
			cr_assert_str_neq(keys[k], "metrics");
			cr_assert_str_neq(keys[k], "zk_queue");
		}
		ipc_msg_clear(&z);
	}
	cr_assert_eq(d.u.status.accepted, m.u.status.accepted);
	free(b);
	ipc_msg_clear(&m);
	ipc_msg_clear(&d);
}

Test(ipc, values_out_of_range_are_errors)
{
	cr_assert_str_eq(status_err((struct mutation){{"accepted"}, 1, MUT_REPLACE, pk_neg}),
			 "STATUS: key \"accepted\": must not be negative");
	cr_assert_str_eq(status_err((struct mutation){{"gen"}, 1, MUT_REPLACE, pk_huge}),
			 "STATUS: key \"gen\": integer out of range");
	cr_assert_str_eq(status_err((struct mutation){{"state"}, 1, MUT_REPLACE, pk_str_flying}),
			 "STATUS: key \"state\": unknown value \"flying\"");
	cr_assert_str_eq(status_err((struct mutation){{"zk"}, 1, MUT_REPLACE, pk_str_flying}),
			 "STATUS: key \"zk\": unknown value \"flying\"");
	cr_assert_str_eq(
	    status_err((struct mutation){{"v"}, 1, MUT_REPLACE, pk_v2}),
	    "STATUS: protocol version 2, expected 1 (nodepoold binaries from different versions?)");
	cr_assert_str_eq(status_err((struct mutation){{"v"}, 1, MUT_REPLACE, pk_neg}),
			 "STATUS: protocol version -1, expected 1 (nodepoold binaries from "
			 "different versions?)");
	cr_assert_str_eq(status_err((struct mutation){{"t"}, 1, MUT_REPLACE, pk_str_hello}),
			 "unknown message type \"HELLO\"");
	cr_assert_str_eq(status_err((struct mutation){{"error"}, 1, MUT_REPLACE, pk_str_nul}),
			 "STATUS: key \"error\": string contains a NUL byte");
	/* Nested: the error names the item. */
	cr_assert_str_eq(
	    status_err((struct mutation){{"pools", "1", "paused"}, 3, MUT_REPLACE, pk_str_true}),
	    "STATUS: pools[1]: key \"paused\": expected boolean, got string");
	cr_assert_str_eq(status_err((struct mutation){{"metrics"}, 1, MUT_REPLACE, pk_neg}),
			 "STATUS: key \"metrics\": expected string, got integer");
	cr_assert_str_eq(status_err((struct mutation){{"pools", "0", "name"}, 3, MUT_DROP, NULL}),
			 "STATUS: pools[0]: missing key \"name\"");
	cr_assert_str_eq(status_err((struct mutation){{"nodes", "ready"}, 2, MUT_REPLACE, pk_neg}),
			 "STATUS: key \"nodes\": \"ready\": must not be negative");
	cr_assert_str_eq(status_err((struct mutation){{"nodes", "ready"}, 2, MUT_DUP, NULL}),
			 "STATUS: key \"nodes\": duplicate name \"ready\"");
	cr_assert_str_eq(status_err((struct mutation){{"pools"}, 1, MUT_REPLACE, pk_nested}),
			 "STATUS: key \"pools\": expected array of maps, got map");
}

Test(ipc, duplicate_keys_are_errors)
{
	cr_assert_str_eq(status_err((struct mutation){{"gen"}, 1, MUT_DUP, NULL}),
			 "STATUS: key \"gen\": appears twice");
	cr_assert_str_eq(status_err((struct mutation){{"t"}, 1, MUT_DUP, NULL}),
			 "message has key \"t\" twice");
	cr_assert_str_eq(
	    status_err((struct mutation){{"pools", "1", "requests"}, 3, MUT_DUP, NULL}),
	    "STATUS: pools[1]: key \"requests\": appears twice");
}

Test(ipc, unknown_keys_are_ignored)
{
	for (int t = IPC_NONE + 1; t < IPC_TYPE_COUNT; t++) {
		struct ipc_msg m, d;
		struct mutation mu = {{"t"}, 1, MUT_EXTRA, pk_nested};
		char err[ERRLEN];
		size_t len;
		char *b;

		ipc_sample(t, 0, &m);
		b = mutate(&m, &mu, &len);
		cr_assert_eq(ipc_msg_decode(b, len, &d, err, sizeof(err)), 0, "%s: %s",
			     ipc_type_name(t), err);
		cr_assert(ipc_msg_equal(&m, &d));
		free(b);
		ipc_msg_clear(&d);
		ipc_msg_clear(&m);
	}
	/* in list items too */
	{
		struct ipc_msg m, d;
		struct mutation mu = {{"workers", "1", "name"}, 3, MUT_EXTRA, pk_float};
		char err[ERRLEN];
		size_t len;
		char *b;

		ipc_sample(IPC_CTL_STATUS_REPLY, 0, &m);
		b = mutate(&m, &mu, &len);
		cr_assert_eq(ipc_msg_decode(b, len, &d, err, sizeof(err)), 0, "%s", err);
		cr_assert(ipc_msg_equal(&m, &d));
		free(b);
		ipc_msg_clear(&d);
		ipc_msg_clear(&m);
	}
}

Test(ipc, non_string_keys_are_errors)
{
	/* {"t": "STOP", "v": 1, 7: true, "graceful": true} */
	static const unsigned char b[] = {0x84, 0xa1, 't',  0xa4, 'S',	'T',  'O', 'P',
					  0xa1, 'v',  0x01, 0x07, 0xc3, 0xa8, 'g', 'r',
					  'a',	'c',  'e',  'f',  'u',	'l',  0xc3};

	cr_assert_str_eq(decode_err(b, sizeof(b)), "STOP: map key is a integer, not a string");
}

Test(ipc, encoder_refuses_invalid_structs)
{
	struct ipc_msg m;
	unsigned char *b;
	size_t len;
	char err[ERRLEN];

	ipc_msg_init(&m, IPC_READY);
	cr_assert_eq(ipc_msg_encode(&m, &b, &len, err, sizeof(err)), -1);
	cr_assert_str_eq(err, "READY: key \"provider\": required string is NULL");
	ipc_msg_clear(&m);

	ipc_sample(IPC_STATUS, 0, &m);
	m.u.status.state = IPC_WS_COUNT;
	cr_assert_eq(ipc_msg_encode(&m, &b, &len, err, sizeof(err)), -1);
	cr_assert_str_eq(err, "STATUS: key \"state\": enum value out of range");
	m.u.status.state = IPC_WS_RUNNING;
	m.u.status.pools.v[1].requests = -3;
	cr_assert_eq(ipc_msg_encode(&m, &b, &len, err, sizeof(err)), -1);
	cr_assert_str_eq(err, "STATUS: pools[1]: key \"requests\": negative value");
	m.u.status.pools.v[1].requests = 3;
	m.u.status.nodes.v[0].n = -1;
	cr_assert_eq(ipc_frame_encode(&m, 0, &b, &len, err, sizeof(err)), -1);
	cr_assert_str_eq(err, "STATUS: key \"nodes\": negative count");
	ipc_msg_clear(&m);

	ipc_msg_init(&m, IPC_NONE);
	cr_assert_eq(ipc_msg_encode(&m, &b, &len, err, sizeof(err)), -1);
	cr_assert_str_eq(err, "cannot encode message type 0");
	m.type = IPC_TYPE_COUNT;
	cr_assert_eq(ipc_frame_encode(&m, 0, &b, &len, NULL, 0), -1, "err may be NULL");
}

/*
 * The fuzz seeds (tests/fuzz/corpus/ipc/seed-*) are valid inputs for
 * fuzz_ipc: byte 0 selects the mode (< 0x80: the rest is one body; else the
 * rest is a frame stream). Keep them decodable as the catalogue evolves.
 */
Test(ipc, fuzz_seeds_decode)
{
	const char *dir = "tests/fuzz/corpus/ipc";
	DIR *dp = opendir(dir);
	struct dirent *de;
	int seeds = 0;

	cr_assert_not_null(dp, "run from the top of the tree: %s", dir);
	while ((de = readdir(dp)) != NULL) {
		char path[512], err[ERRLEN];
		unsigned char buf[8192];
		struct ipc_msg m;
		size_t n;
		FILE *fp;

		if (strncmp(de->d_name, "seed-", 5) != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		fp = fopen(path, "rb");
		cr_assert_not_null(fp);
		n = fread(buf, 1, sizeof(buf), fp);
		fclose(fp);
		cr_assert_gt(n, 1);
		if (buf[0] < 0x80) {
			cr_assert_eq(ipc_msg_decode(buf + 1, n - 1, &m, err, sizeof(err)), 0,
				     "%s: %s", de->d_name, err);
		} else {
			struct ipc_reader *r = ipc_reader_new(0);
			size_t used;

			cr_assert_eq(ipc_reader_feed(r, buf + 1, n - 1, &used, err, sizeof(err)),
				     IPC_READ_FRAME, "%s", de->d_name);
			const unsigned char *b = ipc_reader_frame(r, &n);
			cr_assert_eq(ipc_msg_decode(b, n, &m, err, sizeof(err)), 0, "%s: %s",
				     de->d_name, err);
			ipc_reader_free(r);
		}
		ipc_msg_clear(&m);
		seeds++;
	}
	closedir(dp);
	cr_assert_geq(seeds, 2 * (IPC_TYPE_COUNT - 1), "one seed per message and mode");
}
