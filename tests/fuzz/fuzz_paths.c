/*
 * libFuzzer target for the path and id parsers (protocol/paths.c). The input
 * is taken as one string (up to the first NUL). Properties checked:
 * - a path np_path_parse() classifies formats back to the same bytes;
 * - an element used to build a node path parses back as that node;
 * - the id parsers agree with each other (a request id's sequence is a
 *   sequence, a contender's digits are a sequence suffix, ...).
 * Any violation aborts.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/paths.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check(int ok, const char *what, const char *s)
{
	if (!ok) {
		fprintf(stderr, "paths property broken: %s: '%s'\n", what, s);
		abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct np_path_info pi, pi2;
	char *s, buf[NP_PATH_MAX];
	char small[16];
	long long seq, seq2;
	int prio, rc;

	if ((s = malloc(size + 1)) == NULL)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';

	/* parse -> format is the identity on what parse accepts */
	if (np_path_parse(s, &pi) != NP_PATH_UNKNOWN) {
		rc = np_path_format(buf, sizeof(buf), &pi);
		check(rc >= 0 && (size_t)rc < sizeof(buf) && strcmp(buf, s) == 0,
		      "format(parse(p)) != p", s);
		check(np_path_parse(buf, &pi2) == pi.kind && memcmp(&pi, &pi2, sizeof(pi)) == 0,
		      "parse not stable", s);
		check(np_path_kind_name(pi.kind) != NULL, "kind without a name", s);
	} else {
		check(pi.kind == NP_PATH_UNKNOWN && pi.id[0] == '\0', "unknown not zeroed", s);
	}

	/* builders: a usable element gives a path that parses back to it */
	rc = np_path_node(buf, sizeof(buf), s);
	if (rc >= 0 && (size_t)rc < sizeof(buf) && strlen(s) < NP_NAME_MAX &&
	    strcmp(s, "lock") != 0) {
		check(np_path_parse(buf, &pi) == NP_PATH_NODE && strcmp(pi.id, s) == 0,
		      "node path does not parse back", s);
	}
	rc = np_path_upload(buf, sizeof(buf), s, s, s, s);
	if (rc >= 0 && (size_t)rc < sizeof(buf) && strlen(s) < NP_NAME_MAX &&
	    strcmp(s, "lock") != 0) {
		check(np_path_parse(buf, &pi) == NP_PATH_UPLOAD && strcmp(pi.upload, s) == 0 &&
			  strcmp(pi.image, s) == 0,
		      "upload path does not parse back", s);
	}
	/* truncation is reported, and the buffer stays a string */
	rc = np_path_request_lock(small, sizeof(small), s);
	check(rc < 0 ||
		  strlen(small) == ((size_t)rc < sizeof(small) ? (size_t)rc : sizeof(small) - 1),
	      "truncated length", s);

	/* ids */
	if (np_request_id_parse(s, &prio, &seq) == 0) {
		const char *dash = strchr(s, '-');

		check(dash != NULL && np_seq_parse(dash + 1, &seq2) == 0 && seq == seq2 &&
			  prio >= 0,
		      "request id parts", s);
	}
	if (np_node_id_parse(s, &seq) == 0) {
		check(strlen(s) == 10 && np_build_id_valid(s) && np_seq_suffix(s, &seq2) == 0 &&
			  seq2 == seq,
		      "node id", s);
		snprintf(buf, sizeof(buf), "%010lld", seq);
		check(strcmp(buf, s) == 0, "node id digits", s);
	}
	(void)np_upload_id_parse(s, NULL);
	(void)np_build_id_valid(s);
	if (np_lock_contender_seq(s, &seq) == 0) {
		check(strstr(s, "__lock__") != NULL, "contender without __lock__", s);
		if (seq >= 0)
			check(np_seq_suffix(s, &seq2) >= 0 && seq2 == seq, "contender seq", s);
	}
	rc = np_seq_suffix(s, &seq);
	if (rc >= 0)
		check(np_seq_parse(s + rc, &seq2) == 0 && seq2 == seq, "seq suffix", s);
	free(s);
	return 0;
}
