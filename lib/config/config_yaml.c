/*
 * nodepool.yaml as a tree of positioned nodes (lib/config/config.h).
 *
 * libyaml's event parser drives an explicit stack (no recursion on input
 * depth); anchors map to shared nodes; plain scalars are resolved with YAML
 * 1.1 rules as PyYAML's SafeLoader does (yes/no/on/off are booleans, 012 is
 * octal, 1:30 is 90, 2001-12-14 is a timestamp), so a value has the type
 * upstream Nodepool sees. The one extension: 1e5 (an exponent without a
 * dot, as JSON writes it) is a float, so a JSON slice reads back as written.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "lib/config/config.h"
#include "lib/config/config_int.h"

#define CFG_MAX_INPUT	 (16u << 20)
#define CFG_MAX_EXPANDED 1000000u
#define CFG_MAX_DEPTH	 256
#define CFG_MAX_HEIGHT	 512

/* ---- document arena ------------------------------------------------------ */

struct arena_blk {
	struct arena_blk *next;
	size_t used, cap;
	max_align_t data[];
};

struct np_cfg_doc {
	struct arena_blk *blocks;
	char *file;
	struct np_cfg_node *root;
};

/* The public node plus what only the tree builder needs. */
struct node_ext {
	struct np_cfg_node pub;
	size_t expanded; /* node count with aliases expanded (saturated) */
	int height;	 /* levels below, aliases expanded (1 for a scalar) */
	int open;	 /* a container whose end event has not come yet */
	int merge;	 /* the merge key: a plain `<<` (or tagged !!merge) */
};

static void *
doc_alloc(struct np_cfg_doc *d, size_t size)
{
	struct arena_blk *b = d->blocks;
	size_t al = sizeof(max_align_t);
	void *p;

	size = (size + al - 1) / al * al;
	if (b == NULL || b->cap - b->used < size) {
		size_t cap = size > 65536 ? size : 65536;

		b = malloc(sizeof(*b) + cap);
		if (b == NULL)
			np_cfg_oom();
		b->next = d->blocks;
		b->used = 0;
		b->cap = cap;
		d->blocks = b;
	}
	p = (char *)b->data + b->used;
	b->used += size;
	return p;
}

static char *
doc_strndup(struct np_cfg_doc *d, const char *s, size_t n)
{
	char *p = doc_alloc(d, n + 1);

	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

void
np_cfg_doc_free(struct np_cfg_doc *doc)
{
	struct arena_blk *b, *nb;

	if (doc == NULL)
		return;
	for (b = doc->blocks; b != NULL; b = nb) {
		nb = b->next;
		free(b);
	}
	free(doc->file);
	free(doc);
}

const struct np_cfg_node *
np_cfg_doc_root(const struct np_cfg_doc *doc)
{
	return doc ? doc->root : NULL;
}

const char *
np_cfg_kind_name(enum np_cfg_kind kind)
{
	switch (kind) {
	case NP_CFG_NULL:
		return "null";
	case NP_CFG_BOOL:
		return "a boolean";
	case NP_CFG_INT:
		return "an integer";
	case NP_CFG_FLOAT:
		return "a float";
	case NP_CFG_STR:
		return "a string";
	case NP_CFG_TIME:
		return "a timestamp";
	case NP_CFG_SEQ:
		return "a list";
	case NP_CFG_MAP:
		return "a mapping";
	}
	return "?";
}

/* ---- environment substitution ------------------------------------------- */

/* One substitution: where it sits in the output and in the input (0-based
 * line and column in characters, as libyaml counts them). */
struct subst {
	int ol0, oc0, ol1, oc1;
	int il0, ic0, il1, ic1;
};

struct subst_map {
	struct subst *v;
	size_t n, cap;
};

/* Advance a (line, col) position over n bytes of text. */
static void
pos_advance(const char *s, size_t n, int *line, int *col)
{
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '\n' || (c == '\r' && (i + 1 >= n || s[i + 1] != '\n'))) {
			(*line)++;
			*col = 0;
		} else if (c == '\r') {
			continue;
		} else if ((c & 0xc0) != 0x80) {
			(*col)++;
		}
	}
}

/*
 * Replace %(NODEPOOL_X) by getenv("NODEPOOL_X") where that is set, as
 * Nodepool's substitute_env_vars. Returns a malloc'd buffer (*olen bytes)
 * and fills map; returns NULL (no substitution needed) when there is none.
 */
static char *
env_substitute(const char *buf, size_t len, size_t *olen, struct subst_map *map)
{
	size_t i = 0, last = 0, cap = 0, n = 0;
	int il = 0, ic = 0, ol = 0, oc = 0;
	char *out = NULL;

	while (i + 2 < len) {
		const char *close, *val;
		size_t namelen, vlen, need;
		char name[256];
		struct subst *s;

		if (buf[i] != '%' || buf[i + 1] != '(') {
			i++;
			continue;
		}
		close = memchr(buf + i + 2, ')', len - i - 2);
		if (close == NULL)
			break;
		namelen = (size_t)(close - (buf + i + 2));
		if (namelen < 9 || namelen >= sizeof(name) ||
		    strncmp(buf + i + 2, "NODEPOOL_", 9) != 0 ||
		    memchr(buf + i + 2, '\0', namelen) != NULL) {
			i += 2;
			continue;
		}
		memcpy(name, buf + i + 2, namelen);
		name[namelen] = '\0';
		if ((val = getenv(name)) == NULL) {
			i += 2;
			continue;
		}
		vlen = strlen(val);
		/* copy the text before the reference */
		need = n + (i - last) + vlen + 1;
		if (need > cap) {
			cap = need + len;
			if ((out = realloc(out, cap)) == NULL)
				np_cfg_oom();
		}
		pos_advance(buf + last, i - last, &il, &ic);
		pos_advance(buf + last, i - last, &ol, &oc);
		memcpy(out + n, buf + last, i - last);
		n += i - last;
		if (map->n == map->cap) {
			map->cap = map->cap ? map->cap * 2 : 8;
			map->v = realloc(map->v, map->cap * sizeof(*map->v));
			if (map->v == NULL)
				np_cfg_oom();
		}
		s = &map->v[map->n++];
		s->ol0 = ol, s->oc0 = oc, s->il0 = il, s->ic0 = ic;
		memcpy(out + n, val, vlen);
		n += vlen;
		pos_advance(val, vlen, &ol, &oc);
		pos_advance(buf + i, namelen + 3, &il, &ic);
		s->ol1 = ol, s->oc1 = oc, s->il1 = il, s->ic1 = ic;
		i += namelen + 3;
		last = i;
	}
	if (out == NULL)
		return NULL;
	if (n + (len - last) + 1 > cap) {
		cap = n + (len - last) + 1;
		if ((out = realloc(out, cap)) == NULL)
			np_cfg_oom();
	}
	memcpy(out + n, buf + last, len - last);
	n += len - last;
	out[n] = '\0';
	*olen = n;
	return out;
}

static int
pos_before(int l1, int c1, int l2, int c2)
{
	return l1 < l2 || (l1 == l2 && c1 < c2);
}

/* Map a 0-based output position back to the file as written. */
static void
subst_map_pos(const struct subst_map *m, int *line, int *col)
{
	size_t k;

	for (k = m->n; k-- > 0;) {
		const struct subst *s = &m->v[k];

		if (pos_before(*line, *col, s->ol0, s->oc0))
			continue;
		if (pos_before(*line, *col, s->ol1, s->oc1)) {
			*line = s->il0;
			*col = s->ic0;
		} else if (*line == s->ol1) {
			*col = s->ic1 + (*col - s->oc1);
			*line = s->il1;
		} else {
			*line = *line - s->ol1 + s->il1;
		}
		return;
	}
}

/* ---- scalar resolution (YAML 1.1, as PyYAML's resolver) ------------------ */

static int
is_one_of(const char *s, const char *const *words)
{
	for (; *words; words++)
		if (strcmp(s, *words) == 0)
			return 1;
	return 0;
}

static const char *const null_words[] = {"", "~", "null", "Null", "NULL", NULL};
static const char *const true_words[] = {"yes",	 "Yes", "YES", "true", "True",
					 "TRUE", "on",	"On",  "ON",   NULL};
static const char *const false_words[] = {"no",	   "No",  "NO",	 "false", "False",
					  "FALSE", "off", "Off", "OFF",	  NULL};

static int
isdig(char c)
{
	return c >= '0' && c <= '9';
}

static int
ishex(char c)
{
	return isdig(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Digits (per accept) and '_' only, at least one char. */
static int
all_of(const char *s, int (*accept)(char))
{
	if (*s == '\0')
		return 0;
	for (; *s; s++)
		if (*s != '_' && !accept(*s))
			return 0;
	return 1;
}

static int
isbin(char c)
{
	return c == '0' || c == '1';
}

static int
isoct(char c)
{
	return c >= '0' && c <= '7';
}

/* ":[0-5]?[0-9]" groups, one or more, to the end. */
static int
sexa_tail(const char *s)
{
	int groups = 0;

	while (*s == ':') {
		s++;
		if (!isdig(s[0]))
			return 0;
		if (isdig(s[1])) {
			if (s[0] > '5')
				return 0;
			s += 2;
		} else {
			s += 1;
		}
		groups++;
	}
	return groups > 0 && *s == '\0';
}

/* Accumulate v = v * base + d with overflow tracking. */
static void
acc(unsigned long long *v, unsigned base, unsigned d, int *ovf)
{
	if (*v > (ULLONG_MAX - d) / base)
		*ovf = 1;
	else
		*v = *v * base + d;
}

static int
hexval(char c)
{
	if (isdig(c))
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return c - 'A' + 10;
}

/* YAML 1.1 int; returns 1 and sets *out and *ovf when s is one. */
static int
parse_int(const char *s, long long *out, int *ovf)
{
	int neg = 0;
	unsigned long long v = 0;
	const char *p;

	*ovf = 0;
	if (*s == '-' || *s == '+')
		neg = *s++ == '-';
	if (s[0] == '0' && s[1] == 'b') {
		if (!all_of(s + 2, isbin))
			return 0;
		for (p = s + 2; *p; p++)
			if (*p != '_')
				acc(&v, 2, (unsigned)(*p - '0'), ovf);
	} else if (s[0] == '0' && s[1] == 'x') {
		if (!all_of(s + 2, ishex))
			return 0;
		for (p = s + 2; *p; p++)
			if (*p != '_')
				acc(&v, 16, (unsigned)hexval(*p), ovf);
	} else if (s[0] == '0' && s[1] != '\0') {
		if (!all_of(s + 1, isoct))
			return 0;
		for (p = s + 1; *p; p++)
			if (*p != '_')
				acc(&v, 8, (unsigned)(*p - '0'), ovf);
	} else if (s[0] == '0') {
		v = 0;
	} else if (s[0] >= '1' && s[0] <= '9') {
		const char *colon = strchr(s, ':');

		if (colon != NULL) {
			/* sexagesimal: [1-9][0-9_]*(:[0-5]?[0-9])+, e.g. 1:30 = 90 */
			for (p = s; p < colon; p++)
				if (*p != '_' && !isdig(*p))
					return 0;
			if (!sexa_tail(colon))
				return 0;
			for (p = s;;) {
				unsigned long long part = 0;

				for (; *p && *p != ':'; p++)
					if (*p != '_')
						acc(&part, 10, (unsigned)(*p - '0'), ovf);
				if (v > (ULLONG_MAX - part) / 60)
					*ovf = 1;
				else
					v = v * 60 + part;
				if (*p != ':')
					break;
				p++;
			}
		} else {
			if (!all_of(s, isdig))
				return 0;
			for (p = s; *p; p++)
				if (*p != '_')
					acc(&v, 10, (unsigned)(*p - '0'), ovf);
		}
	} else {
		return 0;
	}
	if (!neg && v > (unsigned long long)LLONG_MAX)
		*ovf = 1;
	if (neg && v > (unsigned long long)LLONG_MAX + 1)
		*ovf = 1;
	if (*ovf)
		*out = neg ? LLONG_MIN : LLONG_MAX;
	else
		*out = neg ? (long long)(0 - v) : (long long)v;
	return 1;
}

/* Copy s without '_' into buf (bufsz); 0 if too long. */
static int
strip_us(const char *s, char *buf, size_t bufsz)
{
	size_t n = 0;

	for (; *s; s++) {
		if (*s == '_')
			continue;
		if (n + 1 >= bufsz)
			return 0;
		buf[n++] = *s;
	}
	buf[n] = '\0';
	return 1;
}

/* YAML 1.1 float (plus a dotless exponent form); 1 and *out when s is one. */
static int
parse_float(const char *s, double *out)
{
	const char *p = s, *q;
	char buf[512];
	int sign = 1;

	if (strcmp(s, ".nan") == 0 || strcmp(s, ".NaN") == 0 || strcmp(s, ".NAN") == 0) {
		*out = NAN;
		return 1;
	}
	if (*p == '-' || *p == '+')
		sign = *p++ == '-' ? -1 : 1;
	if (strcmp(p, ".inf") == 0 || strcmp(p, ".Inf") == 0 || strcmp(p, ".INF") == 0) {
		*out = sign * INFINITY;
		return 1;
	}
	/* [0-9][0-9_]*(:[0-5]?[0-9])+\.[0-9_]*  (sexagesimal float) */
	if (isdig(*p) && (q = strchr(p, ':')) != NULL) {
		const char *dot = strchr(q, '.');
		double v = 0, part = 0;
		char tail[64];

		if (dot == NULL || (size_t)(dot - q) >= sizeof(tail))
			return 0;
		memcpy(tail, q, (size_t)(dot - q));
		tail[dot - q] = '\0';
		for (q = p; *q != ':'; q++)
			if (*q != '_' && !isdig(*q))
				return 0;
		if (!sexa_tail(tail))
			return 0;
		for (q = dot + 1; *q; q++)
			if (*q != '_' && !isdig(*q))
				return 0;
		for (q = p; q < dot; q++) {
			if (*q == '_')
				continue;
			if (*q == ':') {
				v = v * 60 + part;
				part = 0;
				continue;
			}
			part = part * 10 + (*q - '0');
		}
		if (!strip_us(dot, buf, sizeof(buf)))
			return 0;
		v = v * 60 + part + strtod(buf, NULL);
		*out = sign * v;
		return 1;
	}
	/* mantissa: [0-9][0-9_]*\.[0-9_]* | \.[0-9][0-9_]* | [0-9][0-9_]* (exponent required) */
	q = p;
	{
		int intdigits = 0, dot = 0, fracdigits = 0, exp = 0;

		if (isdig(*q)) {
			intdigits = 1;
			while (isdig(*q) || *q == '_')
				q++;
		}
		if (*q == '.') {
			dot = 1;
			q++;
			if (!intdigits && !isdig(*q))
				return 0;
			while (isdig(*q) || *q == '_') {
				if (isdig(*q))
					fracdigits = 1;
				q++;
			}
		}
		if (!intdigits && (!fracdigits || p != s))
			return 0; /* ".5" is a float, "-.5" a string (PyYAML) */
		if (*q == 'e' || *q == 'E') {
			q++;
			if (*q == '-' || *q == '+')
				q++;
			else if (dot)
				return 0; /* YAML 1.1 wants the sign */
			if (!isdig(*q))
				return 0;
			while (isdig(*q))
				q++;
			exp = 1;
		}
		if (*q != '\0' || (!dot && !exp))
			return 0;
	}
	if (!strip_us(s, buf, sizeof(buf)))
		return 0;
	errno = 0;
	*out = strtod(buf, NULL);
	return 1;
}

/* n digits at *p (n_opt more optional); advances. */
static int
digits(const char **p, int n, int n_opt)
{
	while (n-- > 0) {
		if (!isdig(**p))
			return 0;
		(*p)++;
	}
	while (n_opt-- > 0 && isdig(**p))
		(*p)++;
	return 1;
}

/* YAML 1.1 timestamp: 2001-12-14, or 2001-12-14t21:59:43.10-05:00 and the
 * other forms of PyYAML's resolver. */
static int
is_timestamp(const char *s)
{
	const char *p = s;

	if (!digits(&p, 4, 0) || *p++ != '-' || !digits(&p, 1, 1) || *p++ != '-' ||
	    !digits(&p, 1, 1))
		return 0;
	if (*p == '\0')
		return p - s == 10; /* the date-only form wants 2-digit month and day */
	if (*p == 'T' || *p == 't') {
		p++;
	} else if (*p == ' ' || *p == '\t') {
		while (*p == ' ' || *p == '\t')
			p++;
	} else {
		return 0;
	}
	if (!digits(&p, 1, 1) || *p++ != ':' || !digits(&p, 2, 0) || *p++ != ':' ||
	    !digits(&p, 2, 0))
		return 0;
	if (*p == '.') {
		p++;
		while (isdig(*p))
			p++;
	}
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p == 'Z') {
		p++;
	} else if (*p == '-' || *p == '+') {
		p++;
		if (!digits(&p, 1, 1))
			return 0;
		if (*p == ':') {
			p++;
			if (!digits(&p, 2, 0))
				return 0;
		}
	}
	return *p == '\0';
}

/* ---- the tree builder: libyaml events -> the node tree ------------------ */

struct frame {
	struct node_ext *node;
	struct np_cfg_node **v; /* SEQ items, or MAP key, value, key, value... */
	size_t n, cap;
};

struct anchor {
	char *name;
	struct node_ext *node;
};

struct tree_builder {
	struct np_cfg_doc *doc;
	struct np_cfg_errors *errs;
	const struct subst_map *map;
	struct frame *stack;
	size_t depth, cap;
	struct anchor *anchors; /* open addressing, power-of-two size */
	size_t nanchors, acap;
	int failed;
	int docs;
};

static void b_error(struct tree_builder *b, yaml_mark_t mark, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
b_error(struct tree_builder *b, yaml_mark_t mark, const char *fmt, ...)
{
	va_list ap;
	char *msg;
	int line = (int)mark.line, col = (int)mark.column;

	if (b->failed)
		return; /* the first structural error is the one worth reading */
	b->failed = 1;
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		np_cfg_oom();
	va_end(ap);
	subst_map_pos(b->map, &line, &col);
	np_cfg_errors_add(b->errs, b->doc->file, line + 1, col + 1, "", "%s", msg);
	free(msg);
}

static size_t
hash_str(const char *s)
{
	size_t h = 5381;

	while (*s)
		h = h * 33 + (unsigned char)*s++;
	return h;
}

static void
anchor_set(struct tree_builder *b, const char *name, struct node_ext *node)
{
	size_t i, mask;

	if (b->nanchors * 2 >= b->acap) {
		size_t ocap = b->acap, ncap = ocap ? ocap * 2 : 64;
		struct anchor *old = b->anchors;

		b->anchors = calloc(ncap, sizeof(*b->anchors));
		if (b->anchors == NULL)
			np_cfg_oom();
		b->acap = ncap;
		b->nanchors = 0;
		for (i = 0; i < ocap; i++)
			if (old[i].name != NULL) {
				size_t j = hash_str(old[i].name) & (ncap - 1);

				while (b->anchors[j].name != NULL)
					j = (j + 1) & (ncap - 1);
				b->anchors[j] = old[i];
				b->nanchors++;
			}
		free(old);
	}
	mask = b->acap - 1;
	for (i = hash_str(name) & mask; b->anchors[i].name != NULL; i = (i + 1) & mask)
		if (strcmp(b->anchors[i].name, name) == 0) {
			b->anchors[i].node = node; /* redefinition: later wins */
			return;
		}
	b->anchors[i].name = np_cfg_strdup(name);
	b->anchors[i].node = node;
	b->nanchors++;
}

static struct node_ext *
anchor_get(const struct tree_builder *b, const char *name)
{
	size_t i, mask;

	if (b->acap == 0)
		return NULL;
	mask = b->acap - 1;
	for (i = hash_str(name) & mask; b->anchors[i].name != NULL; i = (i + 1) & mask)
		if (strcmp(b->anchors[i].name, name) == 0)
			return b->anchors[i].node;
	return NULL;
}

static struct node_ext *
new_node(struct tree_builder *b, enum np_cfg_kind kind, yaml_mark_t mark)
{
	struct node_ext *x = doc_alloc(b->doc, sizeof(*x));
	int line = (int)mark.line, col = (int)mark.column;

	memset(x, 0, sizeof(*x));
	subst_map_pos(b->map, &line, &col);
	x->pub.kind = kind;
	x->pub.file = b->doc->file;
	x->pub.line = line + 1;
	x->pub.col = col + 1;
	x->expanded = 1;
	x->height = 1;
	return x;
}

static size_t
sat_add(size_t a, size_t b)
{
	return a > CFG_MAX_EXPANDED || b > CFG_MAX_EXPANDED || a + b > CFG_MAX_EXPANDED
		   ? CFG_MAX_EXPANDED + 1
		   : a + b;
}

static void
frame_push_item(struct tree_builder *b, struct np_cfg_node *n)
{
	struct frame *f = &b->stack[b->depth - 1];

	if (f->n == f->cap) {
		f->cap = f->cap ? f->cap * 2 : 8;
		f->v = realloc(f->v, f->cap * sizeof(*f->v));
		if (f->v == NULL)
			np_cfg_oom();
	}
	f->v[f->n++] = n;
	f->node->expanded = sat_add(f->node->expanded, ((struct node_ext *)n)->expanded);
	if (((struct node_ext *)n)->height + 1 > f->node->height)
		f->node->height = ((struct node_ext *)n)->height + 1;
}

/* Attach a finished node to its parent, or make it the root. */
static void
attach(struct tree_builder *b, struct node_ext *x)
{
	if (b->depth == 0)
		b->doc->root = &x->pub;
	else
		frame_push_item(b, &x->pub);
}

#define YTAG "tag:yaml.org,2002:"

static void
scalar_event(struct tree_builder *b, const yaml_event_t *ev)
{
	const char *tag = (const char *)ev->data.scalar.tag;
	const char *text = (const char *)ev->data.scalar.value;
	size_t len = ev->data.scalar.length;
	int plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
	struct node_ext *x;
	struct np_cfg_node *n;
	int ovf;

	if (memchr(text, '\0', len) != NULL) {
		b_error(b, ev->start_mark, "a NUL character in a scalar is not supported");
		return;
	}
	x = new_node(b, NP_CFG_STR, ev->start_mark);
	n = &x->pub;
	n->text = doc_strndup(b->doc, text, len);
	if (tag != NULL && strcmp(tag, "!") == 0)
		tag = YTAG "str";
	if ((tag == NULL && plain && strcmp(n->text, "<<") == 0) ||
	    (tag != NULL && strcmp(tag, YTAG "merge") == 0)) {
		x->merge = 1; /* a quoted '<<' is an ordinary key, as in PyYAML */
	} else if (tag == NULL && plain) {
		if (is_one_of(n->text, null_words)) {
			n->kind = NP_CFG_NULL;
		} else if (is_one_of(n->text, true_words)) {
			n->kind = NP_CFG_BOOL;
			n->i = 1;
		} else if (is_one_of(n->text, false_words)) {
			n->kind = NP_CFG_BOOL;
		} else if (parse_int(n->text, &n->i, &ovf)) {
			n->kind = NP_CFG_INT;
			n->overflow = ovf;
			n->f = (double)n->i;
		} else if (parse_float(n->text, &n->f)) {
			n->kind = NP_CFG_FLOAT;
		} else if (is_timestamp(n->text)) {
			n->kind = NP_CFG_TIME;
		}
	} else if (tag != NULL && strcmp(tag, YTAG "str") != 0) {
		if (strcmp(tag, YTAG "null") == 0) {
			n->kind = NP_CFG_NULL;
		} else if (strcmp(tag, YTAG "bool") == 0) {
			if (is_one_of(n->text, true_words))
				n->i = 1;
			else if (!is_one_of(n->text, false_words))
				b_error(b, ev->start_mark, "invalid boolean '%s'", n->text);
			n->kind = NP_CFG_BOOL;
		} else if (strcmp(tag, YTAG "int") == 0) {
			if (!parse_int(n->text, &n->i, &ovf))
				b_error(b, ev->start_mark, "invalid integer '%s'", n->text);
			n->kind = NP_CFG_INT;
			n->overflow = ovf;
			n->f = (double)n->i;
		} else if (strcmp(tag, YTAG "float") == 0) {
			long long i;

			if (parse_int(n->text, &i, &ovf))
				n->f = (double)i;
			else if (!parse_float(n->text, &n->f))
				b_error(b, ev->start_mark, "invalid float '%s'", n->text);
			n->kind = NP_CFG_FLOAT;
		} else if (strcmp(tag, YTAG "timestamp") == 0) {
			n->kind = NP_CFG_TIME;
		} else {
			b_error(b, ev->start_mark,
				"could not determine a constructor for the tag '%s'", tag);
		}
	}
	if (ev->data.scalar.anchor != NULL)
		anchor_set(b, (const char *)ev->data.scalar.anchor, x);
	attach(b, x);
}

static void
start_container(struct tree_builder *b, const yaml_event_t *ev, enum np_cfg_kind kind)
{
	const char *tag, *anchor;
	struct node_ext *x;
	struct frame *f;

	if (kind == NP_CFG_SEQ) {
		tag = (const char *)ev->data.sequence_start.tag;
		anchor = (const char *)ev->data.sequence_start.anchor;
	} else {
		tag = (const char *)ev->data.mapping_start.tag;
		anchor = (const char *)ev->data.mapping_start.anchor;
	}
	if (tag != NULL && strcmp(tag, "!") != 0 &&
	    strcmp(tag, kind == NP_CFG_SEQ ? YTAG "seq" : YTAG "map") != 0)
		b_error(b, ev->start_mark, "could not determine a constructor for the tag '%s'",
			tag);
	if (b->depth >= CFG_MAX_DEPTH) {
		b_error(b, ev->start_mark, "nesting deeper than %d levels", CFG_MAX_DEPTH);
		return;
	}
	x = new_node(b, kind, ev->start_mark);
	x->open = 1;
	if (anchor != NULL)
		anchor_set(b, anchor, x);
	if (b->depth == b->cap) {
		b->cap = b->cap ? b->cap * 2 : 16;
		b->stack = realloc(b->stack, b->cap * sizeof(*b->stack));
		if (b->stack == NULL)
			np_cfg_oom();
	}
	f = &b->stack[b->depth++];
	memset(f, 0, sizeof(*f));
	f->node = x;
}

static int
is_merge_key(const struct np_cfg_node *k)
{
	return ((const struct node_ext *)k)->merge;
}

/* Order of keys for duplicate detection: by kind, then value. */
static int
key_cmp(const struct np_cfg_node *a, const struct np_cfg_node *b)
{
	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1;
	switch (a->kind) {
	case NP_CFG_INT:
	case NP_CFG_BOOL:
		return a->i < b->i ? -1 : a->i > b->i;
	case NP_CFG_FLOAT:
		return a->f < b->f ? -1 : a->f > b->f;
	case NP_CFG_NULL:
		return 0;
	default:
		return strcmp(a->text, b->text);
	}
}

struct kv {
	struct np_cfg_node *k, *v;
	size_t pos;
};

static int
kv_cmp(const void *pa, const void *pb)
{
	const struct kv *a = pa, *b = pb;
	int c = key_cmp(a->k, b->k);

	if (c != 0)
		return c;
	return a->pos < b->pos ? -1 : a->pos > b->pos;
}

static void
kv_push(struct kv **v, size_t *n, size_t *cap, struct np_cfg_node *k, struct np_cfg_node *val)
{
	if (*n == *cap) {
		*cap = *cap ? *cap * 2 : 16;
		*v = realloc(*v, *cap * sizeof(**v));
		if (*v == NULL)
			np_cfg_oom();
	}
	(*v)[*n].k = k;
	(*v)[*n].v = val;
	(*v)[*n].pos = *n;
	(*n)++;
}

/*
 * Finish a mapping: apply `<<` merges (as PyYAML's flatten_mapping: merged
 * pairs first, a list's earlier maps win, explicit keys win over merged
 * ones), then keep one entry per key: its first position, its last value.
 */
static void
finish_map(struct tree_builder *b, struct frame *f, yaml_mark_t mark)
{
	struct np_cfg_node *n = &f->node->pub;
	struct kv *all = NULL, *sorted;
	size_t nall = 0, cap = 0, i, j, out;
	size_t *keep;

	for (i = 0; i + 1 < f->n; i += 2) {
		struct np_cfg_node *k = f->v[i], *v = f->v[i + 1];

		if (k->kind == NP_CFG_SEQ || k->kind == NP_CFG_MAP) {
			b_error(b, mark, "a mapping key must be a scalar (line %d, column %d)",
				k->line, k->col);
			goto done;
		}
		if (!is_merge_key(k))
			continue;
		if (v->kind == NP_CFG_MAP) {
			for (j = 0; j < v->n; j++)
				kv_push(&all, &nall, &cap, v->keys[j], v->items[j]);
		} else if (v->kind == NP_CFG_SEQ) {
			size_t s;

			for (s = v->n; s-- > 0;) {
				struct np_cfg_node *m = v->items[s];

				if (m->kind != NP_CFG_MAP) {
					b_error(b, mark,
						"expected a mapping for merging, but found %s "
						"(line %d, "
						"column %d)",
						np_cfg_kind_name(m->kind), m->line, m->col);
					goto done;
				}
				for (j = 0; j < m->n; j++)
					kv_push(&all, &nall, &cap, m->keys[j], m->items[j]);
			}
		} else {
			b_error(b, mark,
				"expected a mapping or list of mappings for merging, but found %s "
				"(line %d, column %d)",
				np_cfg_kind_name(v->kind), v->line, v->col);
			goto done;
		}
	}
	for (i = 0; i + 1 < f->n; i += 2)
		if (!is_merge_key(f->v[i]))
			kv_push(&all, &nall, &cap, f->v[i], f->v[i + 1]);

	sorted = malloc((nall ? nall : 1) * sizeof(*sorted));
	keep = malloc((nall ? nall : 1) * sizeof(*keep));
	if (sorted == NULL || keep == NULL)
		np_cfg_oom();
	if (nall > 0)
		memcpy(sorted, all, nall * sizeof(*sorted));
	qsort(sorted, nall, sizeof(*sorted), kv_cmp);
	for (i = 0; i < nall; i++)
		keep[i] = SIZE_MAX;
	for (i = 0; i < nall; i = j) {
		for (j = i + 1; j < nall && key_cmp(sorted[i].k, sorted[j].k) == 0; j++)
			;
		keep[sorted[i].pos] = sorted[j - 1].pos; /* first position, last value */
	}
	for (i = 0, out = 0; i < nall; i++)
		if (keep[i] != SIZE_MAX)
			out++;
	n->n = out;
	n->keys = doc_alloc(b->doc, (out ? out : 1) * sizeof(*n->keys));
	n->items = doc_alloc(b->doc, (out ? out : 1) * sizeof(*n->items));
	f->node->expanded = 1;
	for (i = 0, j = 0; i < nall; i++) {
		if (keep[i] == SIZE_MAX)
			continue;
		n->keys[j] = all[i].k;
		n->items[j] = all[keep[i]].v;
		f->node->expanded =
		    sat_add(f->node->expanded, ((struct node_ext *)all[i].k)->expanded +
						   ((struct node_ext *)all[keep[i]].v)->expanded);
		j++;
	}
	free(sorted);
	free(keep);
done:
	free(all);
}

static void
end_container(struct tree_builder *b, const yaml_event_t *ev)
{
	struct frame *f;
	struct node_ext *x;

	if (b->depth == 0)
		return; /* after a depth error */
	f = &b->stack[--b->depth];
	x = f->node;
	if (x->pub.kind == NP_CFG_SEQ) {
		x->pub.n = f->n;
		x->pub.items = doc_alloc(b->doc, (f->n ? f->n : 1) * sizeof(*x->pub.items));
		if (f->n)
			memcpy(x->pub.items, f->v, f->n * sizeof(*f->v));
	} else if (!b->failed) {
		finish_map(b, f, ev->start_mark);
	}
	free(f->v);
	x->open = 0;
	if (x->expanded > CFG_MAX_EXPANDED)
		b_error(b, ev->start_mark,
			"document too large: more than %u nodes once aliases are expanded",
			CFG_MAX_EXPANDED);
	/* every later pass recurses on the expanded tree: bound its height */
	if (x->height > CFG_MAX_HEIGHT)
		b_error(b, ev->start_mark,
			"nesting deeper than %d levels once aliases are expanded", CFG_MAX_HEIGHT);
	attach(b, x);
}

static void
alias_event(struct tree_builder *b, const yaml_event_t *ev)
{
	const char *name = (const char *)ev->data.alias.anchor;
	struct node_ext *x = anchor_get(b, name);

	if (x == NULL) {
		b_error(b, ev->start_mark, "found undefined alias '%s'", name);
		return;
	}
	if (x->open) {
		b_error(b, ev->start_mark, "recursive alias '%s' is not supported", name);
		return;
	}
	attach(b, x);
}

static void
tree_builder_free(struct tree_builder *b)
{
	size_t i;

	for (i = 0; i < b->depth; i++)
		free(b->stack[i].v);
	free(b->stack);
	for (i = 0; i < b->acap; i++)
		free(b->anchors[i].name);
	free(b->anchors);
}

static const char *
yaml_problem(const yaml_parser_t *p)
{
	return p->problem ? p->problem : "unknown error";
}

struct np_cfg_doc *
np_cfg_parse(const char *file, const char *buf, size_t len, struct np_cfg_errors *errs)
{
	struct subst_map map = {NULL, 0, 0};
	struct tree_builder b;
	yaml_parser_t parser;
	yaml_event_t ev;
	char *sub;
	size_t sublen = 0;
	int done = 0;
	struct np_cfg_doc *doc;

	if (file == NULL)
		file = "<config>";
	if (len > CFG_MAX_INPUT) {
		np_cfg_errors_add(errs, file, 0, 0, "", "file too large (over %u bytes)",
				  CFG_MAX_INPUT);
		return NULL;
	}
	doc = calloc(1, sizeof(*doc));
	if (doc == NULL)
		np_cfg_oom();
	doc->file = np_cfg_strdup(file);
	sub = env_substitute(buf, len, &sublen, &map);
	memset(&b, 0, sizeof(b));
	b.doc = doc;
	b.errs = errs;
	b.map = &map;

	if (!yaml_parser_initialize(&parser))
		np_cfg_oom();
	if (sub != NULL)
		yaml_parser_set_input_string(&parser, (const unsigned char *)sub, sublen);
	else
		yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);

	while (!done && !b.failed) {
		if (!yaml_parser_parse(&parser, &ev)) {
			yaml_mark_t m = parser.problem_mark;

			if (parser.context != NULL) {
				int cl = (int)parser.context_mark.line;
				int cc = (int)parser.context_mark.column;

				subst_map_pos(&map, &cl, &cc);
				b_error(&b, m, "YAML syntax error: %s (%s at line %d, column %d)",
					yaml_problem(&parser), parser.context, cl + 1, cc + 1);
			} else {
				if (parser.error == YAML_READER_ERROR) {
					/* reader errors carry a byte offset, not a mark */
					const char *in = sub ? sub : buf;
					size_t inlen = sub ? sublen : len;
					size_t off = parser.problem_offset;
					int rl = 0, rc = 0;

					pos_advance(in, off < inlen ? off : inlen, &rl, &rc);
					m.line = (size_t)rl;
					m.column = (size_t)rc;
				}
				b_error(&b, m, "YAML syntax error: %s", yaml_problem(&parser));
			}
			break;
		}
		switch (ev.type) {
		case YAML_STREAM_END_EVENT:
			done = 1;
			break;
		case YAML_DOCUMENT_START_EVENT:
			if (++b.docs > 1)
				b_error(&b, ev.start_mark,
					"expected a single document in the stream, found another");
			break;
		case YAML_SCALAR_EVENT:
			scalar_event(&b, &ev);
			break;
		case YAML_SEQUENCE_START_EVENT:
			start_container(&b, &ev, NP_CFG_SEQ);
			break;
		case YAML_MAPPING_START_EVENT:
			start_container(&b, &ev, NP_CFG_MAP);
			break;
		case YAML_SEQUENCE_END_EVENT:
		case YAML_MAPPING_END_EVENT:
			end_container(&b, &ev);
			break;
		case YAML_ALIAS_EVENT:
			alias_event(&b, &ev);
			break;
		default:
			break;
		}
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&parser);
	tree_builder_free(&b);
	free(sub);
	free(map.v);
	if (b.failed) {
		np_cfg_doc_free(doc);
		return NULL;
	}
	if (doc->root == NULL) {
		/* an empty stream is an empty (null) document */
		yaml_mark_t m = {0, 0, 0};

		b.map = &(struct subst_map){NULL, 0, 0};
		doc->root = &new_node(&b, NP_CFG_NULL, m)->pub;
		doc->root->text = "";
	}
	return doc;
}

/* ---- access ---------------------------------------------------------------- */

const struct np_cfg_node *
np_cfg_get(const struct np_cfg_node *map, const char *key)
{
	size_t i;

	if (map == NULL || map->kind != NP_CFG_MAP)
		return NULL;
	for (i = 0; i < map->n; i++)
		if (map->keys[i]->kind == NP_CFG_STR && strcmp(map->keys[i]->text, key) == 0)
			return map->items[i];
	return NULL;
}

const char *
np_cfg_str(const struct np_cfg_node *map, const char *key, const char *def)
{
	const struct np_cfg_node *n = np_cfg_get(map, key);

	return n && n->kind == NP_CFG_STR ? n->text : def;
}

long long
np_cfg_int(const struct np_cfg_node *map, const char *key, long long def)
{
	const struct np_cfg_node *n = np_cfg_get(map, key);

	return n && n->kind == NP_CFG_INT ? n->i : def;
}

double
np_cfg_num(const struct np_cfg_node *map, const char *key, double def)
{
	const struct np_cfg_node *n = np_cfg_get(map, key);

	if (n && n->kind == NP_CFG_INT)
		return (double)n->i;
	if (n && n->kind == NP_CFG_FLOAT)
		return n->f;
	return def;
}

int
np_cfg_bool(const struct np_cfg_node *map, const char *key, int def)
{
	const struct np_cfg_node *n = np_cfg_get(map, key);

	return n && n->kind == NP_CFG_BOOL ? (int)n->i : def;
}

json_t *
np_cfg_to_json(const struct np_cfg_node *n)
{
	json_t *j = NULL;
	size_t i;

	switch (n->kind) {
	case NP_CFG_NULL:
		j = json_null();
		break;
	case NP_CFG_BOOL:
		j = json_boolean(n->i);
		break;
	case NP_CFG_INT:
		j = json_integer(n->i);
		break;
	case NP_CFG_FLOAT:
		if (isnan(n->f))
			j = json_string(".nan");
		else if (isinf(n->f))
			j = json_string(n->f > 0 ? ".inf" : "-.inf");
		else
			j = json_real(n->f);
		break;
	case NP_CFG_STR:
	case NP_CFG_TIME:
		j = json_string(n->text);
		break;
	case NP_CFG_SEQ:
		j = json_array();
		for (i = 0; j && i < n->n; i++)
			json_array_append_new(j, np_cfg_to_json(n->items[i]));
		break;
	case NP_CFG_MAP:
		j = json_object();
		for (i = 0; j && i < n->n; i++) {
			const struct np_cfg_node *k = n->keys[i];

			json_object_set_new(j, k->kind == NP_CFG_NULL ? "null" : k->text,
					    np_cfg_to_json(n->items[i]));
		}
		break;
	}
	return j;
}
