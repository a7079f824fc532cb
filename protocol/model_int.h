/*
 * Internal to protocol/: the decode and encode helpers model.c shares with
 * the record files (model_node.c, model_request.c, model_image.c). Not for
 * use outside protocol/; model.h is the public contract.
 */
#ifndef NP_MODEL_INT_H
#define NP_MODEL_INT_H

#include <stddef.h>
#include <jansson.h>

#include "protocol/model.h"

/* One decode in progress (see model.c, "decoding"). */
struct dctx {
	const char *what; /* "node 0000000001", for messages */
	json_t *rest;	  /* keys not consumed yet */
	json_t *odd;	  /* key -> value kept verbatim */
	char *err;
	size_t errlen;
	int failed;
	int nodd;
};

/* Each documented at its definition in model.c. */
json_t *mdl_copy_or_null(const json_t *j);
int mdl_cstring(const json_t *v);
json_t *mdl_dextra(struct dctx *c);
json_t *mdl_dload(struct dctx *c, const char *data, size_t len);
void mdl_dodd(struct dctx *c, const char *key, const json_t *v, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
json_t *mdl_dtake(struct dctx *c, json_t *root, const char *key);
void mdl_dtype(struct dctx *c, const char *key, const char *want, const json_t *got);
char *mdl_finish(json_t *o, const json_t *extra, const json_t *odd, const json_t *odd_as, int bad,
		 size_t flags, size_t *len);
void mdl_get_any(struct dctx *c, json_t *root, const char *key, json_t **out);
void mdl_get_bool(struct dctx *c, json_t *root, const char *key, int dflt, int *out);
void mdl_get_int(struct dctx *c, json_t *root, const char *key, long long dflt, long long *out);
void mdl_get_obj(struct dctx *c, json_t *root, const char *key, json_t **out);
void mdl_get_state(struct dctx *c, json_t *root, int (*parse)(const char *), int dflt, int *out);
void mdl_get_str(struct dctx *c, json_t *root, const char *key, const char *dflt, char **out);
void mdl_get_strv(struct dctx *c, json_t *root, const char *key, struct np_strv *out);
int mdl_get_time(struct dctx *c, json_t *root, const char *key, double *out);
double mdl_now_seconds(void);
json_t *mdl_odd_as_of(const json_t *odd, const json_t *typed);
void mdl_put(json_t *o, const char *key, json_t *v, int *bad);
void mdl_put_str(json_t *o, const char *key, const char *s, int *bad);
int mdl_py_int_str(const char *s, long long *out);
json_t *mdl_ref_or_null(json_t *j);
int mdl_strv_cmp_sort(const void *a, const void *b);
void mdl_strv_from_array(struct dctx *c, const char *key, json_t *a, struct np_strv *out);
json_t *mdl_strv_json(const struct np_strv *sv);
long long mdl_trunc_ll(double x);

#endif
