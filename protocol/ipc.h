/*
 * IPC framing and the message catalogue's codec. Pure: no I/O, no global
 * state; safe on bytes from any peer (fuzzed by tests/fuzz/fuzz_ipc.c).
 * Types and the catalogue itself are in ipc_types.h.
 *
 * Framing (one framing everywhere, style rule 4): a 4-byte big-endian
 * length N, then N bytes holding exactly one msgpack value. N is checked
 * against the reader's cap before a byte of the body is allocated; N = 0 is
 * an error (a frame always holds one value).
 *
 * Errors: functions returning int give 0 on success and -1 on failure, with a
 * one-line message in err (errlen bytes, may be 0/NULL to not ask for it),
 * e.g. `STATUS: pools[1]: key "paused": expected boolean, got string`.
 */
#ifndef NP_IPC_H
#define NP_IPC_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "protocol/ipc_types.h"

/* ---- names --------------------------------------------------------------- */

/* Wire name ("READY", ...) of a type; NULL for IPC_NONE or out of range. */
const char *ipc_type_name(int type);
/* The type for a wire name, or IPC_NONE. */
enum ipc_type ipc_type_parse(const char *name);
/* Who may send a type; IPC_DIR_NONE for IPC_NONE or out of range. */
enum ipc_dir ipc_type_dir(int type);

/* "starting", "running", ...; NULL when out of range. */
const char *ipc_worker_state_name(int state);
int ipc_worker_state_parse(const char *name); /* -1 if unknown */
/* "unknown", "connecting", "connected", "suspended", "expired". */
const char *ipc_zk_state_name(int state);
int ipc_zk_state_parse(const char *name);
/* "provider", "builder". */
const char *ipc_child_kind_name(int kind);
int ipc_child_kind_parse(const char *name);

/* ---- messages -------------------------------------------------------------- */

/* Zero *m and set its type (every field empty: NULL strings, empty lists,
 * 0, false, enum value 0). */
void ipc_msg_init(struct ipc_msg *m, enum ipc_type type);
/* Free everything *m owns and re-init it as IPC_NONE. NULL is a no-op. */
void ipc_msg_clear(struct ipc_msg *m);
/* Deep equality (type and every field). */
bool ipc_msg_equal(const struct ipc_msg *a, const struct ipc_msg *b);

/*
 * Decode one message body (the bytes of one frame, without the header) into
 * *out, which is overwritten (not freed first); the caller ipc_msg_clear()s
 * it after use. On failure *out is left empty (IPC_NONE). Strict: the body must be exactly
 * one msgpack map with "t" naming a known type and "v" equal to
 * IPC_PROTO_VERSION, every key of that type present (once) with the right
 * type and range; strings must not contain NUL bytes. Keys it does not know
 * are ignored. Containers claiming more items than there are bytes left, or
 * nested over 32 deep, are refused before msgpack-c allocates for them.
 */
int ipc_msg_decode(const void *body, size_t len, struct ipc_msg *out, char *err, size_t errlen);

/*
 * Encode *m as one frame (4-byte header + body) into a malloc'd buffer
 * (*out, *outlen; the caller frees *out). Fails, with a message in err,
 * when a required string is NULL, a counter negative, an enum out of range,
 * or the body would exceed max_body bytes (0 = IPC_FRAME_MAX_DEFAULT).
 */
int ipc_frame_encode(const struct ipc_msg *m, size_t max_body, unsigned char **out, size_t *outlen,
		     char *err, size_t errlen);
/* The same, body only (no header, no size cap). */
int ipc_msg_encode(const struct ipc_msg *m, unsigned char **out, size_t *outlen, char *err,
		   size_t errlen);

/*
 * The message as a JSON object with the wire keys (including "t" and "v"),
 * for nodepoolctl's JSON output and debugging. New reference, or NULL if *m
 * does not encode (same checks as ipc_msg_encode).
 */
json_t *ipc_msg_to_json(const struct ipc_msg *m);

/* Builders. Each copies its string arguments and returns 0 / -1 (ENOMEM). */
/* Replace *dst with a copy of s (NULL allowed: sets NULL). */
int ipc_set_str(char **dst, const char *s);
int ipc_strv_push(struct ipc_strv *sv, const char *s);
int ipc_counts_add(struct ipc_counts *c, const char *name, int64_t n);
/* Append a zeroed item named name; NULL on ENOMEM. The pointer is valid
 * until the next append to the same list. */
struct ipc_pool *ipc_pools_add(struct ipc_pools *p, const char *name);
struct ipc_worker_info *ipc_workers_add(struct ipc_workers *w, const char *name);

/* ---- incremental frame reader --------------------------------------------- */

/*
 * Reassembles frames from a byte stream arriving in any chunking. Owns one
 * body buffer, allocated only once a header has passed the cap check.
 */
struct ipc_reader;

/* max_body: the cap on a frame's body in bytes (0 = IPC_FRAME_MAX_DEFAULT).
 * NULL on ENOMEM. */
struct ipc_reader *ipc_reader_new(size_t max_body);
void ipc_reader_free(struct ipc_reader *r);

enum ipc_read_result {
	IPC_READ_ERROR = -1, /* the stream is broken; err says why */
	IPC_READ_MORE = 0,   /* all input consumed, no complete frame yet */
	IPC_READ_FRAME = 1   /* a frame is complete: see ipc_reader_frame() */
};

/*
 * Consume bytes from data[0..len) until one frame completes or the input
 * ends; *used gets the number of bytes consumed (the rest belongs to the next
 * frames: call again with data + *used). On IPC_READ_FRAME the body is
 * available through ipc_reader_frame() until the next call. Errors: a
 * header announcing 0 bytes or more than the cap. After an error, every call
 * returns IPC_READ_ERROR with the same message (the stream is out of step).
 */
enum ipc_read_result ipc_reader_feed(struct ipc_reader *r, const void *data, size_t len,
				     size_t *used, char *err, size_t errlen);
/* The completed frame's body and its length; NULL unless the last feed
 * returned IPC_READ_FRAME. Owned by the reader. */
const unsigned char *ipc_reader_frame(const struct ipc_reader *r, size_t *len);
/* Bytes of an incomplete frame held (0 at a frame boundary). */
size_t ipc_reader_pending(const struct ipc_reader *r);

#endif
