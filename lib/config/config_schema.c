/*
 * The schema engine: checks a parsed tree against a struct np_cfg_schema and
 * reports every problem with its position and key path. Behaviour mirrors
 * voluptuous as Nodepool uses it: unknown keys are errors ("extra keys not
 * allowed"), missing required keys are errors, v.Exclusive groups allow at
 * most one key, v.Any alternatives accept the first that fits.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/config/config.h"
#include "lib/config/config_int.h"
#include "lib/config/drvtraits.h"

/* Append to the path's end (printf-style), clamped to its buffer; returns
 * the old length, for np_cfg_path_pop. */
static size_t path_append(struct np_cfg_path *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static size_t
path_append(struct np_cfg_path *p, const char *fmt, ...)
{
	size_t old = p->len;
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vsnprintf(p->buf + p->len, sizeof(p->buf) - p->len, fmt, ap);
	va_end(ap);
	if (r > 0)
		p->len += (size_t)r;
	if (p->len >= sizeof(p->buf))
		p->len = sizeof(p->buf) - 1;
	return old;
}

size_t
np_cfg_path_key(struct np_cfg_path *p, const char *key)
{
	return path_append(p, "%s%s", p->len ? "." : "", key);
}

size_t
np_cfg_path_idx(struct np_cfg_path *p, size_t i)
{
	return path_append(p, "[%zu]", i);
}

void
np_cfg_path_pop(struct np_cfg_path *p, size_t len)
{
	p->len = len;
	p->buf[len] = '\0';
}

void
np_cfg_err(struct np_cfg_errors *errs, const struct np_cfg_node *n, const struct np_cfg_path *path,
	   const char *fmt, ...)
{
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		np_cfg_oom();
	va_end(ap);
	np_cfg_errors_add(errs, n ? n->file : NULL, n ? n->line : 0, n ? n->col : 0,
			  path ? path->buf : "", "%s", msg);
	free(msg);
}

static const char *
expected_name(const struct np_cfg_schema *s)
{
	switch (s->type) {
	case SC_STR:
		return "a string";
	case SC_INT:
		return "an integer";
	case SC_BOOL:
		return "a boolean";
	case SC_FLOAT:
	case SC_NUMBER:
	case SC_COERCE_FLOAT:
		return "a number";
	case SC_STR_OR_INT:
		return "a string or an integer";
	case SC_STR_OR_STRSEQ:
		return "a string or a list of strings";
	case SC_DICT:
	case SC_MAP:
	case SC_STRMAP:
	case SC_PROVIDER:
		return "a mapping";
	case SC_LIST:
	case SC_SEQ:
		return "a list";
	default:
		return "something else";
	}
}

static void
type_error(const struct np_cfg_schema *s, const struct np_cfg_node *n, struct np_cfg_path *path,
	   struct np_cfg_errors *errs)
{
	np_cfg_err(errs, n, path, "expected %s, got %s", expected_name(s),
		   np_cfg_kind_name(n->kind));
}

static int
is_numeric_string(const char *s)
{
	char *end;

	if (*s == '\0')
		return 0;
	(void)strtod(s, &end);
	while (*end == ' ' || *end == '\t' || *end == '\n')
		end++;
	return *end == '\0';
}

/* The key's schema in s or its bases; NULL if unknown. */
static const struct np_cfg_schema_key *
find_key(const struct np_cfg_schema *s, const char *name)
{
	const struct np_cfg_schema_key *k;

	for (; s != NULL; s = s->base)
		for (k = s->keys; k && k->name; k++)
			if (strcmp(k->name, name) == 0)
				return k;
	return NULL;
}

/* Index of the string key `name` in map n, or -1. */
static long
key_index(const struct np_cfg_node *n, const char *name)
{
	size_t i;

	for (i = 0; i < n->n; i++)
		if (n->keys[i]->kind == NP_CFG_STR && strcmp(n->keys[i]->text, name) == 0)
			return (long)i;
	return -1;
}

static void
join_keys(char *buf, size_t len, const char *const *keys, const char *sep_last)
{
	size_t i, n = 0, off = 0;

	while (keys[n])
		n++;
	buf[0] = '\0';
	for (i = 0; i < n && off < len; i++) {
		int r = snprintf(buf + off, len - off, "%s%s",
				 i == 0 ? "" : (i + 1 == n ? sep_last : ", "), keys[i]);

		if (r < 0)
			break;
		off += (size_t)r;
	}
}

static void
check_groups(const struct np_cfg_schema *s, const struct np_cfg_node *n, struct np_cfg_path *path,
	     struct np_cfg_errors *errs)
{
	const struct np_cfg_schema *b;
	const struct np_cfg_schema_group *g;
	char names[256];

	for (b = s; b != NULL; b = b->base) {
		for (g = b->groups; g && g->keys; g++) {
			const char *const *k;
			long first = -1, second = -1;

			for (k = g->keys; *k; k++) {
				long idx = key_index(n, *k);

				if (idx < 0)
					continue;
				if (first < 0 || idx < first) {
					second = first;
					first = idx;
				} else if (second < 0 || idx < second) {
					second = idx;
				}
			}
			if (g->kind == GR_EXCL && second >= 0) {
				size_t old = np_cfg_path_key(path, n->keys[second]->text);

				np_cfg_err(errs, n->keys[second], path,
					   "'%s' and '%s' are mutually exclusive",
					   n->keys[first]->text, n->keys[second]->text);
				np_cfg_path_pop(path, old);
			} else if (g->kind == GR_ONE && first < 0) {
				join_keys(names, sizeof(names), g->keys, " or ");
				np_cfg_err(errs, n, path, "one of %s is required", names);
			}
		}
	}
}

static void
check_map(const struct np_cfg_schema *s, const struct np_cfg_node *n, struct np_cfg_path *path,
	  struct np_cfg_errors *errs)
{
	const struct np_cfg_schema *b;
	const struct np_cfg_schema_key *k;
	size_t i, old;

	for (i = 0; i < n->n; i++) {
		const struct np_cfg_node *key = n->keys[i];
		const struct np_cfg_schema_key *def;

		if (key->kind != NP_CFG_STR) {
			old = np_cfg_path_key(path, key->kind == NP_CFG_NULL ? "null" : key->text);
			if (s->item != NULL)
				np_cfg_err(errs, key, path, "expected a string key, got %s",
					   np_cfg_kind_name(key->kind));
			else
				np_cfg_err(errs, key, path, "extra keys not allowed");
			np_cfg_path_pop(path, old);
			continue;
		}
		old = np_cfg_path_key(path, key->text);
		def = find_key(s, key->text);
		if (def != NULL)
			np_cfg_schema_validate(def->s, n->items[i], path, errs);
		else if (s->item != NULL)
			np_cfg_schema_validate(s->item, n->items[i], path, errs);
		else
			np_cfg_err(errs, key, path, "extra keys not allowed");
		np_cfg_path_pop(path, old);
	}
	for (b = s; b != NULL; b = b->base)
		for (k = b->keys; k && k->name; k++) {
			if (!(k->flags & SK_REQ) || key_index(n, k->name) >= 0)
				continue;
			/* a key required in a base may be redefined (optional) above */
			if (find_key(s, k->name) != k)
				continue;
			old = np_cfg_path_key(path, k->name);
			np_cfg_err(errs, n, path, "required key not provided");
			np_cfg_path_pop(path, old);
		}
	check_groups(s, n, path, errs);
}

static void
check_provider(const struct np_cfg_node *n, struct np_cfg_path *path, struct np_cfg_errors *errs)
{
	const struct np_cfg_node *drv = np_cfg_get(n, "driver");
	const struct np_drv_traits *t;
	const char *name = "openstack";

	if (drv != NULL) {
		if (drv->kind != NP_CFG_STR) {
			/* reported by the common schema; check the rest as openstack */
			t = np_drv_traits_find(name);
			if (t != NULL)
				np_cfg_schema_validate(t->schema, n, path, errs);
			return;
		}
		name = drv->text;
	}
	t = np_drv_traits_find(name);
	if (t == NULL) {
		size_t old = np_cfg_path_key(path, "driver");

		np_cfg_err(errs, drv, path, "%s: unknown driver", name);
		np_cfg_path_pop(path, old);
		return;
	}
	np_cfg_schema_validate(t->schema, n, path, errs);
}

static void
check_anyof(const struct np_cfg_schema *s, const struct np_cfg_node *n, struct np_cfg_path *path,
	    struct np_cfg_errors *errs)
{
	const struct np_cfg_schema *const *a;
	struct np_cfg_errors *best = NULL;
	size_t best_n = (size_t)-1;

	for (a = s->alts; *a; a++) {
		struct np_cfg_errors *tmp = np_cfg_errors_new();
		size_t c;

		np_cfg_schema_validate(*a, n, path, tmp);
		c = np_cfg_errors_count(tmp);
		if (c == 0) {
			np_cfg_errors_free(tmp);
			np_cfg_errors_free(best);
			return;
		}
		if (c < best_n) {
			np_cfg_errors_free(best);
			best = tmp;
			best_n = c;
		} else {
			np_cfg_errors_free(tmp);
		}
	}
	if (best != NULL) {
		size_t i;

		for (i = 0; i < best->n; i++)
			np_cfg_errors_add(errs, best->v[i].file, best->v[i].line, best->v[i].col,
					  best->v[i].path, "%s", best->v[i].msg);
		errs->dropped += best->dropped;
		np_cfg_errors_free(best);
	}
}

void
np_cfg_schema_validate(const struct np_cfg_schema *s, const struct np_cfg_node *n,
		       struct np_cfg_path *path, struct np_cfg_errors *errs)
{
	size_t i, old;
	int ok = 1;

	if (n->kind == NP_CFG_NULL && (s->flags & SCF_NULL))
		return;
	switch (s->type) {
	case SC_ANY:
		break;
	case SC_STR:
		ok = n->kind == NP_CFG_STR;
		break;
	case SC_INT:
		ok = n->kind == NP_CFG_INT;
		if (ok && n->overflow) {
			np_cfg_err(errs, n, path, "integer out of range");
			return;
		}
		break;
	case SC_BOOL:
		ok = n->kind == NP_CFG_BOOL;
		break;
	case SC_FLOAT:
	case SC_NUMBER:
		ok = n->kind == NP_CFG_INT || n->kind == NP_CFG_FLOAT;
		if (ok && s->type == SC_FLOAT && !isfinite(n->f)) {
			np_cfg_err(errs, n, path, "expected a finite number");
			return;
		}
		break;
	case SC_COERCE_FLOAT:
		ok = n->kind == NP_CFG_INT || n->kind == NP_CFG_FLOAT || n->kind == NP_CFG_BOOL ||
		     (n->kind == NP_CFG_STR && is_numeric_string(n->text));
		break;
	case SC_STR_OR_INT:
		ok = n->kind == NP_CFG_STR || n->kind == NP_CFG_INT;
		break;
	case SC_STR_OR_STRSEQ:
		if (n->kind == NP_CFG_STR)
			break;
		ok = n->kind == NP_CFG_SEQ;
		for (i = 0; ok && i < n->n; i++)
			if (n->items[i]->kind != NP_CFG_STR) {
				old = np_cfg_path_idx(path, i);
				np_cfg_err(errs, n->items[i], path, "expected a string, got %s",
					   np_cfg_kind_name(n->items[i]->kind));
				np_cfg_path_pop(path, old);
			}
		break;
	case SC_DICT:
		ok = n->kind == NP_CFG_MAP;
		break;
	case SC_LIST:
		ok = n->kind == NP_CFG_SEQ;
		break;
	case SC_SEQ:
		if (!(ok = n->kind == NP_CFG_SEQ))
			break;
		for (i = 0; i < n->n; i++) {
			old = np_cfg_path_idx(path, i);
			np_cfg_schema_validate(s->item, n->items[i], path, errs);
			np_cfg_path_pop(path, old);
		}
		break;
	case SC_STRMAP:
		if (!(ok = n->kind == NP_CFG_MAP))
			break;
		for (i = 0; i < n->n; i++) {
			const struct np_cfg_node *key = n->keys[i];

			old = np_cfg_path_key(path, key->kind == NP_CFG_NULL ? "null" : key->text);
			if (key->kind != NP_CFG_STR)
				np_cfg_err(errs, key, path, "expected a string key, got %s",
					   np_cfg_kind_name(key->kind));
			else
				np_cfg_schema_validate(s->item, n->items[i], path, errs);
			np_cfg_path_pop(path, old);
		}
		break;
	case SC_MAP:
		if (!(ok = n->kind == NP_CFG_MAP))
			break;
		check_map(s, n, path, errs);
		break;
	case SC_ENUM: {
		const char *const *c;
		char names[256];

		if (n->kind == NP_CFG_STR)
			for (c = s->choices; *c; c++)
				if (strcmp(*c, n->text) == 0)
					break;
		if (n->kind != NP_CFG_STR || *c == NULL) {
			join_keys(names, sizeof(names), s->choices, " or ");
			np_cfg_err(errs, n, path, "expected one of %s%s", names,
				   (s->flags & SCF_NULL) ? " (or null)" : "");
			return;
		}
		break;
	}
	case SC_ANYOF:
		check_anyof(s, n, path, errs);
		return;
	case SC_PROVIDER:
		if (!(ok = n->kind == NP_CFG_MAP))
			break;
		check_provider(n, path, errs);
		return;
	}
	if (!ok) {
		type_error(s, n, path, errs);
		return;
	}
	if (s->check != NULL) {
		const char *msg = s->check(n);

		if (msg != NULL)
			np_cfg_err(errs, n, path, "%s", msg);
	}
}
