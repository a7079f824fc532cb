/*
 * Writes the seed corpus of fuzz_ipc into the directory given: for every
 * message type and sample variant (tests/support/ipc_samples.c), one body
 * seed (mode byte 0x00) and one frame seed (mode 0x80 | chunk), plus one
 * stream of every frame. Not built by the Makefile; run it by hand after a
 * catalogue change, from the top of the tree:
 *
 *   cc -std=c11 -D_GNU_SOURCE -I. -Ilib/core -Iprotocol -Itests/support \
 *     tests/fuzz/gen_ipc_corpus.c tests/support/ipc_samples.c protocol/ipc.c \
 *     $(pkg-config --cflags --libs msgpack jansson) -o /tmp/gen_ipc_corpus
 *   /tmp/gen_ipc_corpus tests/fuzz/corpus/ipc
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/ipc.h"
#include "tests/support/ipc_samples.h"

static void
put(const char *dir, const char *name, unsigned char mode, const unsigned char *b, size_t n)
{
	char path[512];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((fp = fopen(path, "wb")) == NULL || fwrite(&mode, 1, 1, fp) != 1 ||
	    (n > 0 && fwrite(b, 1, n, fp) != n) || fclose(fp) != 0) {
		perror(path);
		exit(1);
	}
}

int
main(int argc, char **argv)
{
	unsigned char *stream = NULL, *b;
	size_t slen = 0, n;
	char name[64], lower[32], err[256];
	struct ipc_msg m;

	if (argc != 2) {
		fprintf(stderr, "usage: %s corpus-dir\n", argv[0]);
		return 2;
	}
	for (int t = IPC_NONE + 1; t < IPC_TYPE_COUNT; t++)
		for (int v = 0; v < IPC_SAMPLE_VARIANTS; v++) {
			size_t i;

			for (i = 0; ipc_type_name(t)[i] != '\0' && i < sizeof(lower) - 1; i++)
				lower[i] = (char)tolower((unsigned char)ipc_type_name(t)[i]);
			lower[i] = '\0';
			ipc_sample(t, v, &m);
			if (ipc_msg_encode(&m, &b, &n, err, sizeof(err)) < 0) {
				fprintf(stderr, "%s\n", err);
				return 1;
			}
			snprintf(name, sizeof(name), "seed-%s-%d-body", lower, v);
			put(argv[1], name, 0x00, b, n);
			free(b);
			if (ipc_frame_encode(&m, 0, &b, &n, err, sizeof(err)) < 0) {
				fprintf(stderr, "%s\n", err);
				return 1;
			}
			snprintf(name, sizeof(name), "seed-%s-%d-frame", lower, v);
			put(argv[1], name, 0x80 | (unsigned char)(t * 3 + v), b, n);
			stream = realloc(stream, slen + n);
			memcpy(stream + slen, b, n);
			slen += n;
			free(b);
			ipc_msg_clear(&m);
		}
	put(argv[1], "seed-stream", 0x80 | 6, stream, slen);
	free(stream);
	return 0;
}
