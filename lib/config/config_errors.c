/*
 * The configuration error list (lib/config/config.h): every problem found while
 * loading a nodepool.yaml, printed as "file:line:col: path: message".
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/config/config.h"
#include "lib/config/config_int.h"

struct np_cfg_errors *
np_cfg_errors_new(void)
{
	struct np_cfg_errors *e = calloc(1, sizeof(*e));

	if (e == NULL)
		np_cfg_oom();
	return e;
}

void
np_cfg_errors_free(struct np_cfg_errors *errs)
{
	size_t i;

	if (errs == NULL)
		return;
	for (i = 0; i < errs->n; i++) {
		free(errs->v[i].file);
		free(errs->v[i].path);
		free(errs->v[i].msg);
	}
	free(errs->v);
	free(errs);
}

void
np_cfg_errors_add(struct np_cfg_errors *errs, const char *file, int line, int col, const char *path,
		  const char *fmt, ...)
{
	struct np_cfg_error *e;
	va_list ap;
	char *msg;

	if (errs == NULL)
		return;
	if (errs->n >= NP_CONFIG_MAX_ERRORS) {
		errs->dropped++;
		return;
	}
	if (errs->n == errs->cap) {
		size_t ncap = errs->cap ? errs->cap * 2 : 8;
		struct np_cfg_error *nv = realloc(errs->v, ncap * sizeof(*nv));

		if (nv == NULL)
			np_cfg_oom();
		errs->v = nv;
		errs->cap = ncap;
	}
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		np_cfg_oom();
	va_end(ap);
	e = &errs->v[errs->n++];
	e->file = np_cfg_strdup(file ? file : "");
	e->line = line;
	e->col = col;
	e->path = np_cfg_strdup(path ? path : "");
	e->msg = msg;
}

size_t
np_cfg_errors_count(const struct np_cfg_errors *errs)
{
	return errs ? errs->n + errs->dropped : 0;
}

char *
np_cfg_error_format(const struct np_cfg_error *e)
{
	char *s = NULL;
	char pos[64] = "";
	int r;

	if (e->line > 0)
		snprintf(pos, sizeof(pos), ":%d:%d", e->line, e->col);
	r = asprintf(&s, "%s%s: %s%s%s", e->file, pos, e->path, e->path[0] ? ": " : "", e->msg);
	if (r < 0)
		np_cfg_oom();
	return s;
}

size_t
np_cfg_errors_print(const struct np_cfg_errors *errs, FILE *out)
{
	size_t i;

	if (errs == NULL)
		return 0;
	for (i = 0; i < errs->n; i++) {
		char *s = np_cfg_error_format(&errs->v[i]);

		fprintf(out, "%s\n", s);
		free(s);
	}
	if (errs->dropped)
		fprintf(out, "... and %zu more errors\n", errs->dropped);
	return errs->n + errs->dropped;
}
