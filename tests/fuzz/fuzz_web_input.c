/*
 * libFuzzer target: what a web client controls, as the web API reads it:
 * the Accept header (content negotiation), If-Modified-Since (HTTP dates),
 * the fields= list (text table columns), and node values shown in a table
 * (Python str/repr of any JSON, display widths of any bytes). Properties:
 * no crash; negotiation gives 0 or 1; every line of a text table has the
 * same display width.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/ops/status.h"
#include "lib/ops/web.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
same_width(const char *text)
{
	const char *p = text, *nl;
	size_t first = (size_t)-1;

	for (;;) {
		size_t w;
		nl = strchr(p, '\n');
		w = status_text_width(p, nl ? (size_t)(nl - p) : strlen(p));
		if (first == (size_t)-1)
			first = w;
		else if (w != first) {
			fprintf(stderr, "ragged table:\n%s\n", text);
			abort();
		}
		if (nl == NULL)
			break;
		p = nl + 1;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1), *text;
	struct status_table *t;
	json_t *row, *v;
	int j;

	memcpy(s, data, size);
	s[size] = '\0';
	j = status_wants_json(s);
	if (j != 0 && j != 1)
		abort();
	(void)web_parse_http_date(s);

	/* the input as a label (any bytes, newlines) and as fields= */
	t = status_table_new(STATUS_REQUEST_LIST);
	row = json_object();
	json_object_set_new(row, "id", json_stringn_nocheck(s, strlen(s)));
	v = json_loads(s, JSON_DECODE_ANY, NULL);
	json_object_set_new(row, "requestor", v ? v : json_null());
	json_object_set_new(row, "node_types", json_pack("[s, s]", "a", "b"));
	status_table_add(t, row);
	text = status_text_csv(t, s, 0);
	same_width(text);
	free(text);
	text = status_text(t, NULL, 0, 0);
	same_width(text);
	free(text);
	if (v != NULL) {
		text = status_py_repr(v);
		free(text);
	}
	status_table_free(t);
	free(s);
	return 0;
}
