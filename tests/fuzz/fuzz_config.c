/*
 * Fuzz the nodepool.yaml loader: parse, validate, build, and for a valid
 * config cut every provider's slice and load it again (the path a worker
 * takes). Any input must give a config or a list of errors, never a crash.
 * Seeds: tests/fuzz/corpus/config/ (the configs of tests/data/configs).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/config/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct np_config *cfg = NULL, *w = NULL;
	struct np_cfg_errors *errs = NULL;
	size_t i;

	if (np_cfg_load_buffer("fuzz.yaml", (const char *)data, size, NULL, NULL, 0, &cfg, &errs) !=
	    0) {
		for (i = 0; i < errs->n; i++)
			free(np_cfg_error_format(&errs->v[i]));
		np_cfg_errors_free(errs);
		return 0;
	}
	for (i = 0; i < cfg->nproviders && i < 4; i++) {
		json_t *slice = np_cfg_slice(cfg, cfg->providers[i].name);
		char *text = json_dumps(slice, JSON_COMPACT);

		if (text != NULL && np_cfg_load_buffer("slice.json", text, strlen(text), NULL, NULL,
						       0, &w, &errs) == 0) {
			const struct np_provider *p = np_cfg_provider(w, cfg->providers[i].name);

			/* a slice reloads to the same provider */
			if (p == NULL || strcmp(p->fingerprint, cfg->providers[i].fingerprint) != 0)
				abort();
			np_cfg_free(w);
		} else if (text != NULL) {
			abort(); /* a valid config's slice must be valid */
		}
		free(text);
		json_decref(slice);
	}
	np_cfg_free(cfg);
	return 0;
}
