/*
 * libFuzzer target for protocol/ipc: the frame reader and every message
 * decoder on arbitrary bytes, plus a round trip of whatever decodes.
 *
 * Input layout: byte 0 selects the mode.
 *   < 0x80  the rest is one frame body, given to ipc_msg_decode();
 *   >= 0x80 the rest is a byte stream fed to an ipc_reader in chunks of
 *           (byte0 & 0x3f) + 1 bytes, with a 256-byte cap if bit 0x40 is set
 *           (the default 1 MiB otherwise); every frame is decoded.
 * Anything that decodes must re-encode, decode to an equal message, encode
 * to the same bytes again (the encoding is canonical), frame-encode and
 * come back through a reader, and render as JSON. A violation aborts.
 *
 * Seeds: tests/fuzz/corpus/ipc/seed-*, written by gen_ipc_corpus.c (see its
 * header); tests/unit/test_ipc.c checks they still decode.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/ipc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check(int cond, const char *what)
{
	if (!cond) {
		fprintf(stderr, "fuzz_ipc: %s\n", what);
		abort();
	}
}

static void
round_trip(const unsigned char *body, size_t len)
{
	struct ipc_msg m, m2, m3;
	unsigned char *b2, *b3, *f;
	size_t l2, l3, fl, used, rl;
	struct ipc_reader *r;
	const unsigned char *rb;
	char err[256];
	json_t *j;

	if (ipc_msg_decode(body, len, &m, err, sizeof(err)) < 0) {
		check(m.type == IPC_NONE, "failed decode left a type");
		check(err[0] != '\0', "failed decode without a message");
		return;
	}
	check(ipc_type_name(m.type) != NULL, "decoded an unnamed type");
	check(ipc_msg_encode(&m, &b2, &l2, err, sizeof(err)) == 0,
	      "decoded message does not encode");
	check(ipc_msg_decode(b2, l2, &m2, err, sizeof(err)) == 0,
	      "re-encoded message does not decode");
	check(ipc_msg_equal(&m, &m2), "round trip changed the message");
	check(ipc_msg_encode(&m2, &b3, &l3, err, sizeof(err)) == 0, "second encode failed");
	check(l2 == l3 && memcmp(b2, b3, l2) == 0, "encoding is not canonical");
	/* The canonical form never grows past what came in (a bigger one
	 * could overflow a peer's frame cap). */
	check(l2 <= len, "re-encoding is longer than the input");

	check(ipc_frame_encode(&m, 0, &f, &fl, err, sizeof(err)) == 0, "frame encode failed");
	r = ipc_reader_new(0);
	check(r != NULL, "reader");
	check(ipc_reader_feed(r, f, fl, &used, err, sizeof(err)) == IPC_READ_FRAME,
	      "frame not read back");
	check(used == fl, "frame not fully consumed");
	rb = ipc_reader_frame(r, &rl);
	check(rl == l2 && memcmp(rb, b2, rl) == 0, "frame body differs");
	check(ipc_msg_decode(rb, rl, &m3, err, sizeof(err)) == 0 && ipc_msg_equal(&m, &m3),
	      "framed message differs");
	ipc_reader_free(r);

	j = ipc_msg_to_json(&m);
	check(j != NULL, "no JSON for a valid message");
	json_decref(j);

	free(f);
	free(b2);
	free(b3);
	ipc_msg_clear(&m);
	ipc_msg_clear(&m2);
	ipc_msg_clear(&m3);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ipc_reader *r;
	size_t chunk, pos = 0, used, blen;
	char err[256];
	uint8_t mode;

	if (size < 1)
		return 0;
	mode = data[0];
	data++;
	size--;
	if (mode < 0x80) {
		round_trip(data, size);
		return 0;
	}
	chunk = (size_t)(mode & 0x3f) + 1;
	r = ipc_reader_new(mode & 0x40 ? 256 : 0);
	check(r != NULL, "reader");
	while (pos < size) {
		size_t n = size - pos < chunk ? size - pos : chunk;
		const uint8_t *p = data + pos;
		enum ipc_read_result rr = IPC_READ_MORE;

		pos += n;
		while (n > 0 || rr == IPC_READ_FRAME) {
			rr = ipc_reader_feed(r, p, n, &used, err, sizeof(err));
			check(used <= n, "reader consumed more than given");
			p += used;
			n -= used;
			if (rr == IPC_READ_ERROR) {
				check(err[0] != '\0', "reader error without a message");
				ipc_reader_free(r);
				return 0;
			}
			if (rr == IPC_READ_MORE) {
				check(n == 0, "MORE with input left");
				break;
			}
			const unsigned char *b = ipc_reader_frame(r, &blen);
			check(b != NULL && blen > 0, "FRAME without a body");
			round_trip(b, blen);
		}
	}
	ipc_reader_free(r);
	return 0;
}
