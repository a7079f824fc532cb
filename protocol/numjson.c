/*
 * The number-preserving JSON layer (see numjson.h): jansson parsing and
 * dumping that keeps the numbers jansson cannot hold (big ints, NaN,
 * Infinity) as their literal text, for protocol/model.c's records.
 */
#include "protocol/numjson.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/time.h>
#include <unistd.h>

/* ---- numbers jansson cannot hold ---------------------------------------------
 *
 * Python writes any int (Zuul's span_info trace_id is 128 bits) and, for
 * floats, NaN and Infinity; jansson refuses those. When a body fails to
 * parse, such number tokens (only ever values) are replaced in the text by
 * placeholder strings "<nonce>:<i>", the text is parsed again, and each
 * placeholder in the tree becomes a stand-in: a string whose first byte is
 * 0xFF followed by the literal. jansson refuses invalid UTF-8 in what it
 * parses, so no input string can be a stand-in. Encoders turn stand-ins
 * back into placeholders (a fresh nonce per call, checked to occur exactly
 * once in the dumped text) and those into the literal.
 */

static int raw_used; /* a stand-in was made in this process */

/* 16 hex digits, fresh per call: splitmix64 of a counter from a seed read
 * once per process (getrandom), not a read of /dev/urandom per call
 * (issue 25: a Zuul request, whose trace_id is 128 bits, is decoded and
 * encoded through here, five system calls each). A nonce only has to be
 * unlikely in the input; a collision is detected and another tried. */
static void
raw_nonce(char out[24])
{
	static unsigned long long seed, seq;
	unsigned long long z;

	if (seed == 0) {
		struct timeval tv;

		if (getrandom(&seed, sizeof(seed), 0) != (ssize_t)sizeof(seed))
			seed = 0;
		gettimeofday(&tv, NULL);
		seed ^= ((unsigned long long)tv.tv_sec << 20) ^ (unsigned long long)tv.tv_usec ^
			((unsigned long long)getpid() << 40);
		seed |= 1;
	}
	z = seed + ++seq * 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	snprintf(out, 24, "npraw%016llx", z);
}

const char *
np_json_raw_number(const json_t *v)
{
	const char *s;

	if (!raw_used || !json_is_string(v) || json_string_length(v) < 2)
		return NULL;
	s = json_string_value(v);
	return (unsigned char)s[0] == 0xff ? s + 1 : NULL;
}

struct sbuf {
	char *s;
	size_t n, cap;
};

static void
sb_put(struct sbuf *b, const char *p, size_t n)
{
	if (b->n + n + 1 > b->cap) {
		b->cap = (b->n + n + 1) * 2;
		if ((b->s = realloc(b->s, b->cap)) == NULL)
			abort();
	}
	memcpy(b->s + b->n, p, n);
	b->n += n;
	b->s[b->n] = '\0';
}

/* Length of the JSON number token at p (n bytes), 0 if none; *is_int. */
static size_t
num_token(const char *p, size_t n, int *is_int)
{
	size_t i = 0, d;

	*is_int = 1;
	if (i < n && p[i] == '-')
		i++;
	d = i;
	while (i < n && p[i] >= '0' && p[i] <= '9')
		i++;
	if (i == d)
		return 0;
	if (i < n && p[i] == '.') {
		*is_int = 0;
		i++;
		while (i < n && p[i] >= '0' && p[i] <= '9')
			i++;
	}
	if (i < n && (p[i] == 'e' || p[i] == 'E')) {
		*is_int = 0;
		i++;
		if (i < n && (p[i] == '+' || p[i] == '-'))
			i++;
		while (i < n && p[i] >= '0' && p[i] <= '9')
			i++;
	}
	return i;
}

/* Does jansson refuse this number literal? */
static int
num_overflows(const char *p, size_t len, int is_int)
{
	char buf[512];
	char *end;
	double d;

	if (len >= sizeof(buf))
		return 1;
	memcpy(buf, p, len);
	buf[len] = '\0';
	errno = 0;
	if (is_int) {
		(void)strtoll(buf, &end, 10);
		return errno == ERANGE;
	}
	d = strtod(buf, &end);
	return errno == ERANGE && isinf(d);
}

/* The literals replaced by placeholders in one parse. */
struct rawlits {
	char **v;
	size_t n;
};

static void
rawlits_clear(struct rawlits *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

/*
 * The body with every number jansson refuses (and NaN, Infinity,
 * -Infinity) outside strings replaced by "<nonce>:<i>" (literal i in
 * lits); NULL when there is none (the failure is something else).
 */
static char *
raw_rewrite(const char *data, size_t len, const char *nonce, struct rawlits *lits, size_t *outlen)
{
	static const char *const words[] = {"-Infinity", "Infinity", "NaN"};
	struct sbuf b = {NULL, 0, 0};
	size_t i = 0, copied = 0, k, t;
	int in_str = 0, is_int;
	char ph[64];

	while (i < len) {
		char ch = data[i];
		if (in_str) {
			if (ch == '\\')
				i++;
			else if (ch == '"')
				in_str = 0;
			i++;
			continue;
		}
		if (ch == '"') {
			in_str = 1;
			i++;
			continue;
		}
		t = 0;
		for (k = 0; k < sizeof(words) / sizeof(words[0]); k++)
			if (len - i >= strlen(words[k]) &&
			    memcmp(data + i, words[k], strlen(words[k])) == 0) {
				t = strlen(words[k]);
				break;
			}
		if (t == 0 && (ch == '-' || (ch >= '0' && ch <= '9'))) {
			t = num_token(data + i, len - i, &is_int);
			if (t > 0 && !num_overflows(data + i, t, is_int)) {
				i += t;
				continue;
			}
		}
		if (t == 0) {
			i++;
			continue;
		}
		sb_put(&b, data + copied, i - copied);
		snprintf(ph, sizeof(ph), "\"%s:%zu\"", nonce, lits->n);
		sb_put(&b, ph, strlen(ph));
		if ((lits->v = realloc(lits->v, (lits->n + 1) * sizeof(*lits->v))) == NULL ||
		    (lits->v[lits->n] = strndup(data + i, t)) == NULL)
			abort();
		lits->n++;
		i += t;
		copied = i;
	}
	if (lits->n == 0) {
		free(b.s);
		return NULL;
	}
	sb_put(&b, data + copied, len - copied);
	*outlen = b.n;
	return b.s;
}

/* The stand-in of a literal: 0xFF, then the literal. */
static json_t *
raw_standin(const char *lit)
{
	size_t n = strlen(lit);
	char *s = malloc(n + 2);
	json_t *j;

	if (s == NULL)
		abort();
	s[0] = (char)0xff;
	memcpy(s + 1, lit, n + 1);
	j = json_stringn_nocheck(s, n + 1);
	free(s);
	if (j == NULL)
		abort();
	return j;
}

/* Index of placeholder v ("<nonce>:<i>"), or -1. */
static long
raw_index(const json_t *v, const char *nonce)
{
	size_t nl = strlen(nonce);
	const char *s;
	char *end;
	long i;

	if (!json_is_string(v))
		return -1;
	s = json_string_value(v);
	if (strncmp(s, nonce, nl) != 0 || s[nl] != ':' || s[nl + 1] < '0' || s[nl + 1] > '9')
		return -1;
	i = strtol(s + nl + 1, &end, 10);
	return *end == '\0' ? i : -1;
}

/* Replace the placeholders in the values of j by stand-ins; seen counts
 * each. */
static void
raw_place(json_t *j, const char *nonce, const struct rawlits *lits, unsigned *seen)
{
	const char *k;
	json_t *v;
	size_t i;
	long x;

	if (json_is_object(j)) {
		json_object_foreach(j, k, v)
		{
			if ((x = raw_index(v, nonce)) >= 0 && (size_t)x < lits->n) {
				seen[x]++;
				json_object_set_new(j, k, raw_standin(lits->v[x]));
			} else
				raw_place(v, nonce, lits, seen);
		}
	} else if (json_is_array(j)) {
		json_array_foreach(j, i, v)
		{
			if ((x = raw_index(v, nonce)) >= 0 && (size_t)x < lits->n) {
				seen[x]++;
				json_array_set_new(j, i, raw_standin(lits->v[x]));
			} else
				raw_place(v, nonce, lits, seen);
		}
	}
}

/*
 * Parse a body jansson refused as it is: with its big numbers as stand-ins.
 * NULL when that does not parse either.
 */
json_t *
np_json_raw_load(const char *data, size_t len)
{
	int attempt;

	for (attempt = 0; attempt < 4; attempt++) {
		struct rawlits lits = {NULL, 0};
		char nonce[24], *d2;
		size_t l2 = 0, i;
		unsigned *seen;
		json_t *root;
		int ok = 1;

		raw_nonce(nonce);
		if ((d2 = raw_rewrite(data, len, nonce, &lits, &l2)) == NULL)
			return NULL;
		root = json_loadb(d2, l2, JSON_ALLOW_NUL, NULL);
		free(d2);
		if (root == NULL) {
			rawlits_clear(&lits);
			return NULL;
		}
		if ((seen = calloc(lits.n, sizeof(*seen))) == NULL)
			abort();
		raw_used = 1;
		raw_place(root, nonce, &lits, seen);
		for (i = 0; i < lits.n; i++)
			ok &= seen[i] == 1; /* else an input string was a placeholder */
		free(seen);
		rawlits_clear(&lits);
		if (ok)
			return root;
		json_decref(root);
	}
	return NULL;
}

/* Does j hold a stand-in? */
static int
raw_any(const json_t *j)
{
	const char *k;
	json_t *v;
	size_t i;

	if (np_json_raw_number(j) != NULL)
		return 1;
	if (json_is_object(j)) {
		json_object_foreach((json_t *)j, k, v) if (raw_any(v)) return 1;
	} else if (json_is_array(j)) {
		json_array_foreach(j, i, v) if (raw_any(v)) return 1;
	}
	return 0;
}

/* Keep lit as the next literal of lits; its placeholder string "nonce:N". */
static json_t *
raw_placeholder(const char *lit, const char *nonce, struct rawlits *lits)
{
	char ph[64];

	snprintf(ph, sizeof(ph), "%s:%zu", nonce, lits->n);
	if ((lits->v = realloc(lits->v, (lits->n + 1) * sizeof(*lits->v))) == NULL ||
	    (lits->v[lits->n] = strdup(lit)) == NULL)
		abort();
	lits->n++;
	return json_string(ph);
}

/* Replace the stand-ins of j (a private copy) by placeholders. */
static void
raw_unplace(json_t *j, const char *nonce, struct rawlits *lits)
{
	const char *k;
	json_t *v;
	size_t i;

	if (json_is_object(j)) {
		json_object_foreach(j, k, v)
		{
			const char *lit = np_json_raw_number(v);
			if (lit == NULL) {
				raw_unplace(v, nonce, lits);
				continue;
			}
			json_object_set_new(j, k, raw_placeholder(lit, nonce, lits));
		}
	} else if (json_is_array(j)) {
		json_array_foreach(j, i, v)
		{
			const char *lit = np_json_raw_number(v);
			if (lit == NULL) {
				raw_unplace(v, nonce, lits);
				continue;
			}
			json_array_set_new(j, i, raw_placeholder(lit, nonce, lits));
		}
	}
}

/* json_dumps, writing stand-ins as their literal. NULL on failure. */
char *
np_json_raw_dumps(const json_t *o, size_t flags)
{
	int attempt;

	if (!raw_used || !raw_any(o))
		return json_dumps(o, flags);
	for (attempt = 0; attempt < 4; attempt++) {
		struct rawlits lits = {NULL, 0};
		json_t *c = json_deep_copy(o);
		char nonce[24], tok[80], *s, *p, *q;
		struct sbuf b = {NULL, 0, 0};
		size_t i;
		int ok = 1;

		if (c == NULL)
			return NULL;
		raw_nonce(nonce);
		raw_unplace(c, nonce, &lits);
		s = json_dumps(c, flags);
		json_decref(c);
		if (s == NULL) {
			rawlits_clear(&lits);
			return NULL;
		}
		/* each placeholder token exactly once, else an input string
		 * happened to be one: try another nonce */
		for (i = 0; ok && i < lits.n; i++) {
			snprintf(tok, sizeof(tok), "\"%s:%zu\"", nonce, i);
			p = strstr(s, tok);
			ok = p != NULL && strstr(p + 1, tok) == NULL;
		}
		if (ok) {
			p = s;
			while ((q = strstr(p, nonce)) != NULL) {
				char *end;
				unsigned long x;
				if (q == s || q[-1] != '"' ||
				    (x = strtoul(q + strlen(nonce) + 1, &end, 10), *end != '"') ||
				    q[strlen(nonce)] != ':' || x >= lits.n) {
					sb_put(&b, p, (size_t)(q - p) + 1); /* not ours */
					p = q + 1;
					continue;
				}
				sb_put(&b, p, (size_t)(q - 1 - p));
				sb_put(&b, lits.v[x], strlen(lits.v[x]));
				p = end + 1;
			}
			sb_put(&b, p, strlen(p));
		}
		free(s);
		rawlits_clear(&lits);
		if (ok)
			return b.s;
		free(b.s);
	}
	return NULL;
}

json_t *
np_json_export(const json_t *v)
{
	const char *lit, *k;
	json_t *c, *e;
	size_t i;

	if (v == NULL)
		return NULL;
	if ((lit = np_json_raw_number(v)) != NULL) {
		double d = strtod(lit, NULL);
		return isfinite(d) ? json_real(d) : json_null();
	}
	if (json_is_object(v)) {
		c = json_object();
		json_object_foreach((json_t *)v, k, e) json_object_set_new(c, k, np_json_export(e));
		return c;
	}
	if (json_is_array(v)) {
		c = json_array();
		json_array_foreach(v, i, e) json_array_append_new(c, np_json_export(e));
		return c;
	}
	return json_deep_copy((json_t *)v);
}
