/*
 * libFuzzer target: `nodepool import-image-data` reads a JSON file an
 * operator gives it; imgtree_import_check decides what may be written to
 * ZooKeeper. Properties: no crash; a rejection has a message; what it
 * accepts is an object whose every key parses as a pause flag, build or
 * upload path.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/zk/imagetree.h"
#include "protocol/paths.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512] = "";
	json_t *j = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
	const char *k;
	json_t *v;

	if (j == NULL)
		return 0;
	if (imgtree_import_check(j, err, sizeof(err)) != 0) {
		if (err[0] == '\0')
			abort();
	} else {
		json_object_foreach(j, k, v)
		{
			struct np_path_info pi;
			enum np_path_kind kind = np_path_parse(k, &pi);
			if ((kind != NP_PATH_IMAGE_PAUSE && kind != NP_PATH_BUILD &&
			     kind != NP_PATH_UPLOAD) ||
			    !json_is_string(v))
				abort();
		}
	}
	json_decref(j);
	return 0;
}
