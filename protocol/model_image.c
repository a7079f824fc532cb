/*
 * Nodepool's ImageBuild and ImageUpload records (see model.h): decode,
 * encode in toDict() order.
 */
#include "protocol/model.h"
#include "protocol/model_int.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/core/xalloc.h"

static json_t *image_build_obj(const struct np_image_build *b, int *badp);
static json_t *image_upload_obj(const struct np_image_upload *u, int *badp);

/* ---- ImageBuild ---------------------------------------------------------------- */

struct np_image_build *
np_image_build_new(void)
{
	struct np_image_build *b = calloc(1, sizeof(*b));

	if (b == NULL)
		abort();
	b->state = NP_BUILD_BUILDING;
	b->username = xstrdup("zuul");
	return b;
}

void
np_image_build_free(struct np_image_build *b)
{
	if (b == NULL)
		return;
	free(b->id);
	free(b->builder);
	free(b->builder_id);
	np_strv_clear(&b->formats);
	free(b->username);
	free(b->python_path);
	free(b->shell_type);
	json_decref(b->extra);
	json_decref(b->odd);
	json_decref(b->odd_as);
	free(b);
}

void
np_image_build_set_state(struct np_image_build *b, int state)
{
	b->state = state;
	b->state_time = mdl_now_seconds();
}

int
np_image_build_decode(const char *id, const char *data, size_t len, struct np_image_build **out,
		      char *err, size_t errlen)
{
	char what[96];
	struct dctx c = {.what = what, .err = err, .errlen = errlen};
	struct np_image_build *b;
	json_t *root, *v;

	*out = NULL;
	snprintf(what, sizeof(what), "image build %.64s", id != NULL ? id : "(new)");
	if ((root = mdl_dload(&c, data, len)) == NULL)
		return -1;
	b = np_image_build_new();
	b->id = xstrdup(id);
	mdl_get_state(&c, root, np_build_state_parse, NP_BUILD_BUILDING, &b->state);
	mdl_get_time(&c, root, "state_time", &b->state_time);
	mdl_get_str(&c, root, "builder", NULL, &b->builder);
	mdl_get_str(&c, root, "builder_id", NULL, &b->builder_id);
	mdl_get_str(&c, root, "username", "zuul", &b->username);
	mdl_get_str(&c, root, "python_path", "/usr/bin/python2", &b->python_path);
	mdl_get_str(&c, root, "shell_type", NULL, &b->shell_type);

	/* formats: "qcow2,raw"; split only a non-empty string. */
	v = mdl_dtake(&c, root, "formats");
	if (v == NULL || json_is_null(v))
		;
	else if (!json_is_string(v))
		mdl_dtype(&c, "formats", "a comma-separated string", v);
	else if (json_string_length(v) > 0) {
		const char *s = json_string_value(v), *comma;
		char *tok;

		for (;;) {
			comma = strchr(s, ',');
			tok = comma != NULL ? strndup(s, (size_t)(comma - s)) : strdup(s);
			if (tok == NULL)
				abort();
			np_strv_push(&b->formats, tok);
			free(tok);
			if (comma == NULL)
				break;
			s = comma + 1;
		}
	}
	b->extra = mdl_dextra(&c);
	if (c.odd != NULL) {
		int bad = 0;
		json_t *t = image_build_obj(b, &bad);

		b->odd = c.odd;
		b->odd_as = mdl_odd_as_of(c.odd, t);
		json_decref(t);
	}
	json_decref(root);
	if (c.failed) {
		np_image_build_free(b);
		return -1;
	}
	*out = b;
	return 0;
}

/* The record's typed fields as a JSON object (NULL if out of memory);
 * *badp set when a value cannot be written. */
static json_t *
image_build_obj(const struct np_image_build *b, int *badp)
{
	json_t *o = json_object();
	int bad = 0;

	if (o == NULL)
		return NULL;
	/* Key order as upstream's ImageBuild.toDict(); builder, builder_id
	 * and formats are left out when unset. */
	mdl_put_str(o, "state", np_build_state_name(b->state), &bad);
	mdl_put(o, "state_time", json_real(b->state_time), &bad);
	if (b->builder != NULL)
		mdl_put_str(o, "builder", b->builder, &bad);
	if (b->builder_id != NULL)
		mdl_put_str(o, "builder_id", b->builder_id, &bad);
	if (b->formats.n > 0) {
		char **sorted = malloc(b->formats.n * sizeof(*sorted));
		size_t i, total = 1;
		char *joined;

		if (sorted == NULL)
			abort();
		memcpy(sorted, b->formats.v, b->formats.n * sizeof(*sorted));
		qsort(sorted, b->formats.n, sizeof(*sorted), mdl_strv_cmp_sort);
		for (i = 0; i < b->formats.n; i++)
			total += strlen(sorted[i]) + 1;
		if ((joined = malloc(total)) == NULL)
			abort();
		joined[0] = '\0';
		for (i = 0; i < b->formats.n; i++) {
			if (i > 0)
				strcat(joined, ",");
			strcat(joined, sorted[i]);
		}
		mdl_put_str(o, "formats", joined, &bad);
		free(joined);
		free(sorted);
	}
	mdl_put_str(o, "username", b->username, &bad);
	mdl_put_str(o, "python_path", b->python_path, &bad);
	mdl_put_str(o, "shell_type", b->shell_type, &bad);
	*badp |= bad;
	return o;
}

char *
np_image_build_encode(const struct np_image_build *b, size_t *len)
{
	int bad = 0;
	json_t *o = image_build_obj(b, &bad);

	if (o == NULL)
		return NULL;
	return mdl_finish(o, b->extra, b->odd, b->odd_as, bad, 0, len);
}

/* ---- ImageUpload ---------------------------------------------------------------- */

struct np_image_upload *
np_image_upload_new(void)
{
	struct np_image_upload *u = calloc(1, sizeof(*u));

	if (u == NULL)
		abort();
	u->state = NP_UPLOAD_UPLOADING;
	return u;
}

void
np_image_upload_free(struct np_image_upload *u)
{
	if (u == NULL)
		return;
	free(u->id);
	free(u->external_id);
	free(u->external_name);
	free(u->format);
	free(u->username);
	free(u->python_path);
	free(u->shell_type);
	json_decref(u->extra);
	json_decref(u->odd);
	json_decref(u->odd_as);
	free(u);
}

void
np_image_upload_set_state(struct np_image_upload *u, int state)
{
	u->state = state;
	u->state_time = mdl_now_seconds();
}

int
np_image_upload_decode(const char *id, const char *data, size_t len, struct np_image_upload **out,
		       char *err, size_t errlen)
{
	char what[96];
	struct dctx c = {.what = what, .err = err, .errlen = errlen};
	struct np_image_upload *u;
	json_t *root;

	*out = NULL;
	snprintf(what, sizeof(what), "image upload %.64s", id != NULL ? id : "(new)");
	if ((root = mdl_dload(&c, data, len)) == NULL)
		return -1;
	u = np_image_upload_new();
	u->id = xstrdup(id);
	mdl_get_state(&c, root, np_upload_state_parse, NP_UPLOAD_UPLOADING, &u->state);
	mdl_get_time(&c, root, "state_time", &u->state_time);
	mdl_get_str(&c, root, "external_id", NULL, &u->external_id);
	mdl_get_str(&c, root, "external_name", NULL, &u->external_name);
	mdl_get_str(&c, root, "format", NULL, &u->format);
	mdl_get_str(&c, root, "username", "zuul", &u->username);
	mdl_get_str(&c, root, "python_path", "/usr/bin/python2", &u->python_path);
	mdl_get_str(&c, root, "shell_type", NULL, &u->shell_type);
	u->extra = mdl_dextra(&c);
	if (c.odd != NULL) {
		int bad = 0;
		json_t *t = image_upload_obj(u, &bad);

		u->odd = c.odd;
		u->odd_as = mdl_odd_as_of(c.odd, t);
		json_decref(t);
	}
	json_decref(root);
	if (c.failed) {
		np_image_upload_free(u);
		return -1;
	}
	*out = u;
	return 0;
}

/* The record's typed fields as a JSON object (NULL if out of memory);
 * *badp set when a value cannot be written. */
static json_t *
image_upload_obj(const struct np_image_upload *u, int *badp)
{
	json_t *o = json_object();
	int bad = 0;

	if (o == NULL)
		return NULL;
	/* Key order as upstream's ImageUpload.toDict(). */
	mdl_put_str(o, "state", np_upload_state_name(u->state), &bad);
	mdl_put(o, "state_time", json_real(u->state_time), &bad);
	mdl_put_str(o, "external_id", u->external_id, &bad);
	mdl_put_str(o, "external_name", u->external_name, &bad);
	mdl_put_str(o, "format", u->format, &bad);
	mdl_put_str(o, "username", u->username, &bad);
	mdl_put_str(o, "python_path", u->python_path, &bad);
	mdl_put_str(o, "shell_type", u->shell_type, &bad);
	*badp |= bad;
	return o;
}

char *
np_image_upload_encode(const struct np_image_upload *u, size_t *len)
{
	int bad = 0;
	json_t *o = image_upload_obj(u, &bad);

	if (o == NULL)
		return NULL;
	return mdl_finish(o, u->extra, u->odd, u->odd_as, bad, 0, len);
}
