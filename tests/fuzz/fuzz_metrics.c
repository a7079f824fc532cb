/*
 * libFuzzer target: the workers' metric records under /nodepoold/metrics
 * are written by any process with ZooKeeper access; nodepool-web renders
 * them for /metrics (metrics_render) and each worker adds its figures to
 * the record it reads back (metrics_record). The input is JSON: an array
 * of records (or anything else), used as the stored records, as the live
 * ones and as the base of this process's record. Properties: no crash;
 * the exposition stays line-structured (every line a comment or a sample
 * starting with a metric name), whatever the records' strings hold; the
 * record made is an object.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/ops/metrics.h"
#include "lib/ops/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_exposition(const char *text)
{
	const char *p = text, *nl;

	while (*p != '\0') {
		nl = strchr(p, '\n');
		if (nl != p && *p != '#' &&
		    !((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_' ||
		      *p == ':'))
			abort();
		if (nl == NULL)
			break;
		p = nl + 1;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *j = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL), *rec, *v;
	struct status_view view;
	char *text;
	size_t i;

	if (j == NULL)
		return 0;
	memset(&view, 0, sizeof(view));
	view.ready = 1;
	text = metrics_render(&view, json_is_array(j) ? j : NULL, j);
	if (text == NULL)
		abort();
	check_exposition(text);
	free(text);
	metrics_launch_phase("fuzz", METRICS_PHASE_BOOT, 1.5);
	metrics_launch_result("fuzz", "az", "zuul", "ready", 2.0);
	if (json_is_array(j)) {
		json_array_foreach(j, i, v)
		{
			const char *p = json_string_value(json_object_get(v, "provider"));
			rec = metrics_record(p != NULL ? p : "fuzz", v);
			if (!json_is_object(rec))
				abort();
			json_decref(rec);
		}
	} else {
		rec = metrics_record("fuzz", j);
		if (!json_is_object(rec))
			abort();
		json_decref(rec);
	}
	metrics_clear();
	json_decref(j);
	return 0;
}
