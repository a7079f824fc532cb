/*
 * Status listings: tables, their text and JSON forms, and the row builders
 * of upstream's status.py. See status.h.
 */
#include "lib/ops/status.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "protocol/nodesum.h"
#include "lib/zk/zk.h"
#include "lib/core/xalloc.h"

/* ---- columns (as status.py's headers tables) --------------------------------- */

static const struct status_column node_cols[] = {
    {"id", "ID"},
    {"provider", "Provider"},
    {"label", "Label"},
    {"server_id", "Server ID"},
    {"public_ipv4", "Public IPv4"},
    {"ipv6", "IPv6"},
    {"state", "State"},
    {"age", "Age"},
    {"locked", "Locked"},
    {"pool", "Pool"},
    {"hostname", "Hostname"},
    {"private_ipv4", "Private IPv4"},
    {"AZ", "AZ"},
    {"username", "Username"},
    {"connection_port", "Port"},
    {"launcher", "Launcher"},
    {"allocated_to", "Allocated To"},
    {"hold_job", "Hold Job"},
    {"comment", "Comment"},
    {"user_data", "User Data"},
    {"driver_data", "Driver Data"},
};

static const struct status_column request_cols[] = {
    {"id", "Request ID"},	    {"relative_priority", "Priority"}, {"state", "State"},
    {"requestor", "Requestor"},	    {"node_types", "Node Types"},      {"nodes", "Nodes"},
    {"declined_by", "Declined By"}, {"event_id", "Event ID"},
};

static const struct status_column image_cols[] = {
    {"id", "Build ID"},
    {"upload_id", "Upload ID"},
    {"provider", "Provider"},
    {"image", "Image"},
    {"external_name", "Provider Image Name"},
    {"external_id", "Provider Image ID"},
    {"state", "State"},
    {"age", "Age"},
    /* beyond upstream (nodepool.yaml(5) `validate`, `rollback-after`):
     * "serving" (the upload a launcher boots), "validating", "validated",
     * "validation failed: <reason>", "rolled back: <reason>"; an upload
     * the builder made again after a failed validation adds
     * "try N (upload U: validation failed: <reason>)" */
    {"service", "Service"},
};

static const struct status_column dib_cols[] = {
    {"id", "ID"},	    {"image", "Image"}, {"builder", "Builder"},
    {"formats", "Formats"}, {"state", "State"}, {"age", "Age"},
};

static const struct status_column image_status_cols[] = {
    {"image", "Image"},
    {"paused", "Paused"},
    {"build_request", "Build Request"},
    {"build_request_age", "Build Request Age"},
};

static const struct status_column label_cols[] = {
    {"label", "Label"},
};

static const struct status_column info_image_cols[] = {
    {"image", "Image Name"},
    {"build_id", "Build ID"},
    {"upload_ids", "Upload IDs"},
};

static const struct status_column info_node_cols[] = {
    {"id", "ID"},
    {"server_id", "Server ID"},
};

static const struct status_column alien_cols[] = {
    {"provider", "Provider"},
    {"name", "Name"},
    {"image_id", "Image ID"},
};

#define COLS(a) a, sizeof(a) / sizeof(a[0])
static const struct {
	const struct status_column *cols;
	size_t n;
} tables[STATUS_LIST_COUNT] = {
    [STATUS_NODE_LIST] = {COLS(node_cols)},
    [STATUS_REQUEST_LIST] = {COLS(request_cols)},
    [STATUS_IMAGE_LIST] = {COLS(image_cols)},
    [STATUS_DIB_IMAGE_LIST] = {COLS(dib_cols)},
    [STATUS_IMAGE_STATUS] = {COLS(image_status_cols)},
    [STATUS_LABEL_LIST] = {COLS(label_cols)},
    [STATUS_INFO_IMAGES] = {COLS(info_image_cols)},
    [STATUS_INFO_NODES] = {COLS(info_node_cols)},
    [STATUS_ALIEN_IMAGES] = {COLS(alien_cols)},
};

const char *const status_node_brief_fields[] = {
    "id", "provider", "label", "server_id", "public_ipv4", "ipv6", "state", "age", "locked"};
const size_t status_node_brief_nfields =
    sizeof(status_node_brief_fields) / sizeof(status_node_brief_fields[0]);

struct status_table *
status_table_new(enum status_list kind)
{
	struct status_table *t;

	if ((int)kind < 0 || kind >= STATUS_LIST_COUNT)
		return NULL;
	if ((t = calloc(1, sizeof(*t))) == NULL)
		np_oom();
	t->kind = kind;
	t->cols = tables[kind].cols;
	t->ncols = tables[kind].n;
	if ((t->rows = json_array()) == NULL)
		np_oom();
	return t;
}

void
status_table_free(struct status_table *t)
{
	if (t == NULL)
		return;
	json_decref(t->rows);
	free(t);
}

void
status_table_add(struct status_table *t, json_t *row)
{
	if (row == NULL || json_array_append_new(t->rows, row) != 0)
		np_oom();
}

size_t
status_table_rows(const struct status_table *t)
{
	return json_array_size(t->rows);
}

/* ---- a growable string ---------------------------------------------------- */

struct sbuf {
	char *s;
	size_t len, cap;
};

static void
sb_grow(struct sbuf *b, size_t more)
{
	if (b->len + more + 1 <= b->cap)
		return;
	while (b->len + more + 1 > b->cap)
		b->cap = b->cap ? b->cap * 2 : 128;
	if ((b->s = realloc(b->s, b->cap)) == NULL)
		np_oom();
}

static void
sb_addn(struct sbuf *b, const char *s, size_t n)
{
	sb_grow(b, n);
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = '\0';
}

static void
sb_add(struct sbuf *b, const char *s)
{
	sb_addn(b, s, strlen(s));
}

static void
sb_addc(struct sbuf *b, char c, size_t n)
{
	sb_grow(b, n);
	memset(b->s + b->len, c, n);
	b->len += n;
	b->s[b->len] = '\0';
}

static void __attribute__((format(printf, 2, 3))) sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	sb_grow(b, (size_t)n);
	va_start(ap, fmt);
	vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

static char *
sb_take(struct sbuf *b)
{
	if (b->s == NULL)
		sb_grow(b, 0), b->s[0] = '\0';
	return b->s;
}

/* ---- age -------------------------------------------------------------------- */

/* Python's divmod for floats: floor division and a remainder of the
 * divisor's sign. */
static void
py_divmod(double a, double b, double *q, double *r)
{
	*q = floor(a / b);
	*r = a - *q * b;
	if (*r < 0 && b > 0) { /* rounding at the edge */
		*r += b;
		*q -= 1;
	}
}

/* Python's '%02d' % x for a float: int() truncates toward zero. */
static long long
py_int(double x)
{
	if (!isfinite(x))
		return 0;
	if (x > 9e18)
		return 9000000000000000000LL;
	if (x < -9e18)
		return -9000000000000000000LL;
	return (long long)x;
}

char *
status_age(double seconds, char *buf, size_t size)
{
	double d, h, m, s;

	py_divmod(seconds, 60, &m, &s);
	py_divmod(m, 60, &h, &m);
	py_divmod(h, 24, &d, &h);
	snprintf(buf, size, "%02lld:%02lld:%02lld:%02lld", py_int(d), py_int(h), py_int(m),
		 py_int(s));
	return buf;
}

/* ---- Python's str() and repr() of JSON values --------------------------------- */

/* Python's repr() of a float: the shortest text that reads back the same;
 * fixed notation for exponents -4..15, else d.ddde+XX; ".0" on integers. */
static void
py_float(struct sbuf *b, double v)
{
	char tmp[64], digits[40];
	int prec, exp, ndig, i;
	char *e;

	if (isnan(v)) {
		sb_add(b, "nan");
		return;
	}
	if (isinf(v)) {
		sb_add(b, v < 0 ? "-inf" : "inf");
		return;
	}
	for (prec = 1; prec <= 17; prec++) {
		snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, v);
		if (strtod(tmp, NULL) == v)
			break;
	}
	/* tmp: [-]d.ddde[+-]XX */
	e = strchr(tmp, 'e');
	exp = atoi(e + 1);
	ndig = 0;
	for (i = 0; tmp + i < e; i++)
		if (isdigit((unsigned char)tmp[i]))
			digits[ndig++] = tmp[i];
	digits[ndig] = '\0';
	while (ndig > 1 && digits[ndig - 1] == '0')
		digits[--ndig] = '\0';
	if (v < 0 || (v == 0 && signbit(v)))
		sb_add(b, "-");
	if (exp >= -4 && exp < 16) {
		if (exp < 0) {
			sb_add(b, "0.");
			sb_addc(b, '0', (size_t)(-exp - 1));
			sb_add(b, digits);
		} else if (ndig <= exp + 1) {
			sb_add(b, digits);
			sb_addc(b, '0', (size_t)(exp + 1 - ndig));
			sb_add(b, ".0");
		} else {
			sb_addn(b, digits, (size_t)exp + 1);
			sb_add(b, ".");
			sb_add(b, digits + exp + 1);
		}
	} else {
		sb_addn(b, digits, 1);
		if (ndig > 1) {
			sb_add(b, ".");
			sb_add(b, digits + 1);
		}
		sb_printf(b, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
	}
}

/* Decode one UTF-8 sequence at s (n bytes left): the code point and its
 * length, or -1 with length 1 for an invalid byte. */
static long
utf8_next(const unsigned char *s, size_t n, size_t *len)
{
	unsigned long c;
	size_t need, i;

	*len = 1;
	if (s[0] < 0x80)
		return s[0];
	if ((s[0] & 0xe0) == 0xc0)
		need = 2, c = s[0] & 0x1f;
	else if ((s[0] & 0xf0) == 0xe0)
		need = 3, c = s[0] & 0x0f;
	else if ((s[0] & 0xf8) == 0xf0)
		need = 4, c = s[0] & 0x07;
	else
		return -1;
	if (n < need)
		return -1;
	for (i = 1; i < need; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return -1;
		c = (c << 6) | (s[i] & 0x3f);
	}
	if ((need == 2 && c < 0x80) || (need == 3 && c < 0x800) || (need == 4 && c < 0x10000) ||
	    c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return -1;
	*len = need;
	return (long)c;
}

static void
py_str_repr(struct sbuf *b, const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	char q = '\'';
	size_t i, len;

	if (memchr(s, '\'', n) != NULL && memchr(s, '"', n) == NULL)
		q = '"';
	sb_addc(b, q, 1);
	for (i = 0; i < n; i += len) {
		long c = utf8_next(u + i, n - i, &len);
		if (c == '\\' || c == q)
			sb_printf(b, "\\%c", (int)c);
		else if (c == '\n')
			sb_add(b, "\\n");
		else if (c == '\r')
			sb_add(b, "\\r");
		else if (c == '\t')
			sb_add(b, "\\t");
		else if (c < 0)
			sb_printf(b, "\\x%02x", u[i]);
		else if (c < 0x20 || (c >= 0x7f && c <= 0xa0) || c == 0xad)
			sb_printf(b, "\\x%02lx", c);
		else if (c == 0x2028 || c == 0x2029 || (c >= 0x200b && c <= 0x200f))
			sb_printf(b, "\\u%04lx", c);
		else
			sb_addn(b, s + i, len);
	}
	sb_addc(b, q, 1);
}

static void
py_repr(struct sbuf *b, const json_t *v)
{
	size_t i;
	const char *k;
	const json_t *x;
	int first = 1;

	switch (json_typeof(v)) {
	case JSON_OBJECT:
		sb_add(b, "{");
		json_object_foreach((json_t *)v, k, x)
		{
			if (!first)
				sb_add(b, ", ");
			first = 0;
			py_str_repr(b, k, strlen(k));
			sb_add(b, ": ");
			py_repr(b, x);
		}
		sb_add(b, "}");
		break;
	case JSON_ARRAY:
		sb_add(b, "[");
		json_array_foreach(v, i, x)
		{
			if (i)
				sb_add(b, ", ");
			py_repr(b, x);
		}
		sb_add(b, "]");
		break;
	case JSON_STRING:
		py_str_repr(b, json_string_value(v), json_string_length(v));
		break;
	case JSON_INTEGER:
		sb_printf(b, "%lld", (long long)json_integer_value(v));
		break;
	case JSON_REAL:
		py_float(b, json_real_value(v));
		break;
	case JSON_TRUE:
		sb_add(b, "True");
		break;
	case JSON_FALSE:
		sb_add(b, "False");
		break;
	case JSON_NULL:
	default:
		sb_add(b, "None");
		break;
	}
}

/* str(): strings as they are, containers as repr. */
static void
py_str(struct sbuf *b, const json_t *v)
{
	if (json_is_string(v))
		sb_addn(b, json_string_value(v), json_string_length(v));
	else
		py_repr(b, v);
}

char *
status_py_repr(const json_t *v)
{
	struct sbuf b = {0};

	py_repr(&b, v);
	return sb_take(&b);
}

char *
status_value_text(const json_t *v)
{
	struct sbuf b = {0};
	size_t i;
	const json_t *x;

	if (v == NULL || json_is_null(v)) {
		/* empty */
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, x)
		{
			if (i)
				sb_add(&b, ",");
			py_str(&b, x);
		}
	} else {
		py_str(&b, v);
	}
	return sb_take(&b);
}

/* ---- display width --------------------------------------------------------------- */

static int
cp_width(long c)
{
	if (c < 0)
		return 1;
	if (c == 0 || (c >= 0x300 && c <= 0x36f) || (c >= 0x200b && c <= 0x200f) ||
	    (c >= 0x20d0 && c <= 0x20ff) || (c >= 0xfe20 && c <= 0xfe2f))
		return 0;
	if ((c >= 0x1100 && c <= 0x115f) || (c >= 0x2e80 && c <= 0x303e) ||
	    (c >= 0x3041 && c <= 0x33ff) || (c >= 0x3400 && c <= 0x4dbf) ||
	    (c >= 0x4e00 && c <= 0x9fff) || (c >= 0xa000 && c <= 0xa4cf) ||
	    (c >= 0xac00 && c <= 0xd7a3) || (c >= 0xf900 && c <= 0xfaff) ||
	    (c >= 0xfe30 && c <= 0xfe4f) || (c >= 0xff00 && c <= 0xff60) ||
	    (c >= 0xffe0 && c <= 0xffe6) || (c >= 0x1f300 && c <= 0x1f64f) ||
	    (c >= 0x1f900 && c <= 0x1f9ff) || (c >= 0x20000 && c <= 0x3fffd))
		return 2;
	return 1;
}

size_t
status_text_width(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i, len, w = 0;

	for (i = 0; i < n; i += len)
		w += (size_t)cp_width(utf8_next(u + i, n - i, &len));
	return w;
}

/* ---- the text table ---------------------------------------------------------------- */

static int
is_age_key(const char *k)
{
	size_t n = strlen(k);

	return strcmp(k, "age") == 0 || (n >= 4 && strcmp(k + n - 4, "_age") == 0);
}

/* The text of one cell, as _to_pretty_table prints it. */
static char *
cell_text(const char *key, const json_t *v, double now)
{
	if (is_age_key(key) && v != NULL && json_is_number(v)) {
		char buf[64];
		double t = json_is_integer(v) ? (double)json_integer_value(v)
					      : (double)py_int(json_real_value(v));
		status_age(now - t, buf, sizeof(buf));
		return strdup(buf);
	}
	return status_value_text(v);
}

/*
 * A cell cut to max_width display columns per line and max_lines lines,
 * "..." marking each cut (0: no limit). Takes s; returns it or a new
 * string.
 */
static char *
cell_cap(char *s, size_t max_width, size_t max_lines)
{
	struct sbuf b = {0};
	const char *p = s, *nl;
	size_t lines = 0;
	int cut = 0;

	if (max_width == 0 && max_lines == 0)
		return s;
	for (;;) {
		const unsigned char *u = (const unsigned char *)p;
		size_t n, i = 0, len, w = 0;

		nl = strchr(p, '\n');
		n = nl ? (size_t)(nl - p) : strlen(p);
		if (lines > 0)
			sb_addc(&b, '\n', 1);
		if (max_lines > 0 && lines + 1 == max_lines && nl != NULL) {
			sb_add(&b, "..."); /* the last line kept says more follow */
			cut = 1;
			break;
		}
		lines++;
		if (max_width > 3 && status_text_width(p, n) > max_width) {
			while (i < n) {
				size_t cw = (size_t)cp_width(utf8_next(u + i, n - i, &len));
				if (w + cw + 3 > max_width)
					break;
				w += cw;
				i += len;
			}
			sb_addn(&b, p, i);
			sb_add(&b, "...");
			cut = 1;
		} else {
			sb_addn(&b, p, n);
		}
		if (nl == NULL)
			break;
		p = nl + 1;
	}
	if (!cut) {
		free(b.s);
		return s;
	}
	free(s);
	return sb_take(&b);
}

/* Widest line of a cell and its number of lines. */
static void
cell_size(const char *s, size_t *width, size_t *lines)
{
	const char *p = s, *nl;

	*width = 0;
	*lines = 0;
	for (;;) {
		size_t w;
		nl = strchr(p, '\n');
		w = status_text_width(p, nl ? (size_t)(nl - p) : strlen(p));
		if (w > *width)
			*width = w;
		(*lines)++;
		if (nl == NULL)
			break;
		p = nl + 1;
	}
}

static void
hrule(struct sbuf *b, const size_t *widths, size_t n)
{
	size_t i;

	sb_add(b, "+");
	for (i = 0; i < n; i++) {
		sb_addc(b, '-', widths[i] + 2);
		sb_add(b, "+");
	}
}

/* Line `line` of a cell (empty past its last line), padded to width. */
static void
cell_line(struct sbuf *b, const char *s, size_t line, size_t width)
{
	const char *p = s, *nl;
	size_t len, w;

	while (line > 0 && p != NULL) {
		nl = strchr(p, '\n');
		p = nl ? nl + 1 : NULL;
		line--;
	}
	if (p == NULL) {
		len = 0;
		p = "";
	} else {
		nl = strchr(p, '\n');
		len = nl ? (size_t)(nl - p) : strlen(p);
	}
	w = status_text_width(p, len);
	sb_add(b, " ");
	sb_addn(b, p, len);
	sb_addc(b, ' ', width - w + 1);
	sb_add(b, "|");
}

char *
status_text(const struct status_table *t, const char *const *fields, size_t nfields, double now)
{
	struct sbuf b = {0};
	size_t nrows = json_array_size(t->rows), ncols = 0, i, j, k, f;
	size_t *idx, *widths, total_lines = 0, cell_bytes = 0;
	char **cells;

	idx = calloc(t->ncols + 1, sizeof(*idx));
	widths = calloc(t->ncols + 1, sizeof(*widths));
	cells = calloc(nrows * t->ncols + 1, sizeof(*cells));
	if (idx == NULL || widths == NULL || cells == NULL)
		np_oom();
	for (i = 0; i < t->ncols; i++) {
		if (fields != NULL) {
			for (f = 0; f < nfields; f++)
				if (fields[f] != NULL && strcmp(fields[f], t->cols[i].key) == 0)
					break;
			if (f == nfields)
				continue;
		}
		idx[ncols] = i;
		widths[ncols] = status_text_width(t->cols[i].header, strlen(t->cols[i].header));
		ncols++;
	}
	for (j = 0; j < nrows; j++) {
		const json_t *row = json_array_get(t->rows, j);
		size_t height = 1;
		for (k = 0; k < ncols; k++) {
			const char *key = t->cols[idx[k]].key;
			size_t w, lines;
			char *c = cell_text(key, json_object_get(row, key), now);
			if (c == NULL)
				np_oom();
			c = cell_cap(c, t->max_cell_width, t->max_cell_lines);
			cells[j * t->ncols + k] = c;
			cell_size(c, &w, &lines);
			if (w > widths[k])
				widths[k] = w;
			if (lines > height)
				height = lines;
			cell_bytes += strlen(c);
		}
		total_lines += height;
	}
	{
		/* an upper bound: every line padded to the full width, plus
		 * every cell's bytes beyond its columns (UTF-8); the buffer is
		 * made that large at once */
		size_t line = 2, bound;
		for (k = 0; k < ncols; k++)
			line += widths[k] + 3;
		bound = (total_lines + 4) * line + cell_bytes;
		if (t->max_bytes == 0 || bound <= t->max_bytes)
			sb_grow(&b, bound);
		else {
			for (i = 0; i < nrows * t->ncols; i++)
				free(cells[i]);
			free(cells);
			free(idx);
			free(widths);
			errno = EFBIG;
			return NULL;
		}
	}
	hrule(&b, widths, ncols);
	sb_add(&b, "\n|");
	for (k = 0; k < ncols; k++)
		cell_line(&b, t->cols[idx[k]].header, 0, widths[k]);
	sb_add(&b, "\n");
	hrule(&b, widths, ncols);
	for (j = 0; j < nrows; j++) {
		size_t height = 1;
		for (k = 0; k < ncols; k++) {
			size_t w, lines;
			cell_size(cells[j * t->ncols + k], &w, &lines);
			if (lines > height)
				height = lines;
		}
		for (i = 0; i < height; i++) {
			sb_add(&b, "\n|");
			for (k = 0; k < ncols; k++)
				cell_line(&b, cells[j * t->ncols + k], i, widths[k]);
		}
	}
	sb_add(&b, "\n");
	hrule(&b, widths, ncols);
	for (i = 0; i < nrows * t->ncols; i++)
		free(cells[i]);
	free(cells);
	free(idx);
	free(widths);
	return sb_take(&b);
}

char *
status_text_csv(const struct status_table *t, const char *fields_csv, double now)
{
	char *copy, *p, *tok, *save = NULL;
	const char **fields;
	size_t n = 0, cap = 1;
	char *out;

	if (fields_csv == NULL || *fields_csv == '\0')
		return status_text(t, NULL, 0, now);
	for (p = (char *)fields_csv; *p; p++)
		if (*p == ',')
			cap++;
	if ((copy = strdup(fields_csv)) == NULL || (fields = calloc(cap, sizeof(*fields))) == NULL)
		np_oom();
	/* split(','): empty items match no column */
	for (tok = strtok_r(copy, ",", &save); tok != NULL && n < cap;
	     tok = strtok_r(NULL, ",", &save))
		fields[n++] = tok;
	out = status_text(t, fields, n, now);
	free(fields);
	free(copy);
	return out;
}

char *
status_json(const struct status_table *t)
{
	char *s = json_dumps(t->rows, JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER |
					  JSON_REAL_PRECISION(17) | JSON_ENCODE_ANY);

	if (s == NULL)
		np_oom();
	return s;
}

/* ---- content negotiation (webob acceptable_offers) ---------------------------------- */

static const char *const offers[] = {"text/html", "text/plain", "application/json"};

/* Trim spaces and tabs in place; returns the start. */
static char *
trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
		*--e = '\0';
	return s;
}

int
status_wants_json(const char *accept)
{
	double q_of[3] = {-1, -1, -1};
	int spec_of[3] = {-1, -1, -1};
	char *copy, *item, *save = NULL;
	int i, best = -1;

	if (accept == NULL)
		return 0;
	if (strlen(accept) > 8192 || (copy = strdup(accept)) == NULL)
		return 0;
	if (*trim(copy) == '\0') {
		free(copy);
		return 0;
	}
	for (item = strtok_r(copy, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save)) {
		char *range, *params, *slash, *param, *psave = NULL;
		double q = 1.0;
		int spec;

		params = strchr(item, ';');
		if (params != NULL)
			*params++ = '\0';
		range = trim(item);
		if (*range == '\0' || (slash = strchr(range, '/')) == NULL)
			continue;
		for (param = params ? strtok_r(params, ";", &psave) : NULL; param != NULL;
		     param = strtok_r(NULL, ";", &psave)) {
			char *eq = strchr(param, '='), *name, *val, *end;
			if (eq == NULL)
				continue;
			*eq = '\0';
			name = trim(param);
			val = trim(eq + 1);
			if (strcasecmp(name, "q") == 0) {
				q = strtod(val, &end);
				if (end == val || *end != '\0' || !(q >= 0 && q <= 1))
					q = -1; /* invalid: webob ignores the range */
			}
		}
		if (q < 0)
			continue;
		*slash = '\0';
		if (strcmp(range, "*") == 0 && strcmp(slash + 1, "*") == 0)
			spec = 0;
		else if (strcmp(slash + 1, "*") == 0)
			spec = 1;
		else
			spec = 2;
		for (i = 0; i < 3; i++) {
			const char *o = offers[i], *os = strchr(o, '/');
			int match;
			if (spec == 0)
				match = 1;
			else if (spec == 1)
				match = strncasecmp(o, range, (size_t)(os - o)) == 0 &&
					strlen(range) == (size_t)(os - o);
			else
				match = strncasecmp(o, range, (size_t)(os - o)) == 0 &&
					strlen(range) == (size_t)(os - o) &&
					strcasecmp(os + 1, slash + 1) == 0;
			/* the most specific matching range decides the offer's q */
			if (match && spec > spec_of[i]) {
				spec_of[i] = spec;
				q_of[i] = q;
			}
		}
	}
	free(copy);
	for (i = 0; i < 3; i++)
		if (q_of[i] > 0 && (best < 0 || q_of[i] > q_of[best]))
			best = i;
	return best == 2;
}

/* ---- row builders ------------------------------------------------------------------------ */

static json_t *
jstr(const char *s)
{
	json_t *v = s != NULL ? json_string(s) : json_null();

	/* a string that is not UTF-8 (jansson refuses it) shows as null */
	return v != NULL ? v : json_null();
}

static json_t *
jstrv(const struct np_strv *sv)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; i < sv->n; i++)
		json_array_append_new(a, jstr(sv->v[i]));
	return a;
}

static json_t *
jcopy(const json_t *v)
{
	return v != NULL ? np_json_export(v) : json_null();
}

static void
set(json_t *row, const char *key, json_t *v)
{
	if (v == NULL)
		v = json_null();
	if (json_object_set_new(row, key, v) != 0)
		np_oom();
}

/* The node's value for key as it is in ZooKeeper: an odd value (one the
 * record's field cannot hold, model.h) as it came, else typed. */
static json_t *
as_stored(const struct status_node_row *n, const char *key, json_t *typed)
{
	json_t *v = n->odd != NULL ? json_object_get(n->odd, key) : NULL;

	if (v == NULL)
		return typed;
	json_decref(typed);
	return np_json_export(v);
}

void
status_add_node_row(struct status_table *t, const struct status_node_row *n, int locked, double now)
{
	json_t *row = json_object();
	char age[64];

	set(row, "id", jstr(n->id));
	set(row, "provider", as_stored(n, "provider", jstr(n->provider)));
	set(row, "label", jstrv(n->type));
	set(row, "server_id",
	    n->external_id_obj ? jcopy(n->external_id_obj) : jstr(n->external_id));
	set(row, "public_ipv4", jstr(n->public_ipv4));
	set(row, "ipv6", jstr(n->public_ipv6));
	set(row, "state", as_stored(n, "state", jstr(np_node_state_name(n->state))));
	set(row, "age", json_string(status_age(now - n->state_time, age, sizeof(age))));
	set(row, "locked", json_string(locked > 0 ? "locked" : "unlocked"));
	set(row, "pool", as_stored(n, "pool", jstr(n->pool)));
	set(row, "hostname", as_stored(n, "hostname", jstr(n->hostname)));
	set(row, "private_ipv4", jstr(n->private_ipv4));
	set(row, "AZ", jstr(n->az));
	set(row, "username", jstr(n->username));
	/* a port that carries credentials (k8s) is not shown, as upstream */
	set(row, "connection_port",
	    n->port_redacted ? json_string("redacted") : json_integer(n->connection_port));
	set(row, "launcher", jstr(n->launcher));
	set(row, "allocated_to", jstr(n->allocated_to));
	set(row, "hold_job", as_stored(n, "hold_job", jstr(n->hold_job)));
	set(row, "comment", as_stored(n, "comment", jstr(n->comment)));
	set(row, "user_data", jcopy(n->user_data));
	set(row, "driver_data", jcopy(n->driver_data));
	status_table_add(t, row);
}

void
status_node_row_of(struct status_node_row *r, const struct np_node *n)
{
	memset(r, 0, sizeof(*r));
	r->id = n->id;
	r->provider = n->provider;
	r->pool = n->pool;
	r->az = n->az;
	r->username = n->username;
	r->launcher = n->launcher;
	r->hostname = n->hostname;
	r->public_ipv4 = n->public_ipv4;
	r->private_ipv4 = n->private_ipv4;
	r->public_ipv6 = n->public_ipv6;
	r->external_id = n->external_id;
	r->allocated_to = n->allocated_to;
	r->hold_job = n->hold_job;
	r->comment = n->comment;
	r->type = &n->type;
	r->state = n->state;
	r->state_time = n->state_time;
	r->connection_port = n->connection_port;
	r->port_redacted = n->connection_port_obj != NULL;
	r->external_id_obj = n->external_id_obj;
	r->user_data = n->user_data;
	r->driver_data = n->driver_data;
	r->odd = n->odd;
}

void
status_add_node(struct status_table *t, const struct np_node *n, int locked, double now)
{
	struct status_node_row r;

	status_node_row_of(&r, n);
	status_add_node_row(t, &r, locked, now);
}

void
status_add_request(struct status_table *t, const struct np_request *r)
{
	json_t *row = json_object();

	set(row, "id", jstr(r->id));
	set(row, "relative_priority", json_integer(r->relative_priority));
	set(row, "state", jstr(np_request_state_name(r->state)));
	set(row, "requestor", jstr(r->requestor));
	set(row, "node_types", jstrv(&r->node_types));
	set(row, "nodes", jstrv(&r->nodes));
	set(row, "declined_by", jstrv(&r->declined_by));
	set(row, "event_id", jstr(r->event_id));
	status_table_add(t, row);
}

static json_t *
epoch_int(double t)
{
	return json_integer((json_int_t)py_int(t));
}

void
status_add_upload(struct status_table *t, const char *image, const char *build_id,
		  const char *provider, const struct np_image_upload *u, int serving)
{
	json_t *row = json_object();

	set(row, "id", jstr(build_id));
	set(row, "upload_id", jstr(u->id));
	set(row, "provider", jstr(provider));
	set(row, "image", jstr(image));
	set(row, "external_name", jstr(u->external_name));
	set(row, "external_id", jstr(u->external_id));
	set(row, "state", jstr(np_upload_state_name(u->state)));
	set(row, "age", epoch_int(u->state_time));
	{
		const json_t *v = json_object_get(u->extra, "validation");
		const char *vs = json_string_value(json_object_get(v, "state"));
		const char *why = json_string_value(json_object_get(v, "reason"));
		const json_t *rb = json_object_get(u->extra, "rollback");
		char buf[1024] = "";

		if (rb != NULL)
			snprintf(buf, sizeof(buf), "rolled back: %s",
				 json_string_value(json_object_get(rb, "reason"))
				     ? json_string_value(json_object_get(rb, "reason"))
				     : "?");
		else if (vs != NULL && strcmp(vs, "pending") == 0)
			snprintf(buf, sizeof(buf), "validating");
		else if (vs != NULL && strcmp(vs, "failed") == 0)
			snprintf(buf, sizeof(buf), "validation failed: %s", why ? why : "?");
		else if (serving)
			snprintf(buf, sizeof(buf), "serving%s",
				 vs != NULL && strcmp(vs, "passed") == 0 ? ", validated" : "");
		else if (vs != NULL && strcmp(vs, "passed") == 0)
			snprintf(buf, sizeof(buf), "validated");
		/* the builder's retry after a failed validation (nodepool.yaml(5)
		 * `validate`): the reason stays in view */
		if (json_is_object(json_object_get(u->extra, "retry_of"))) {
			const json_t *ro = json_object_get(u->extra, "retry_of");
			const char *pu = json_string_value(json_object_get(ro, "upload"));
			const char *pr = json_string_value(json_object_get(ro, "reason"));
			size_t o = strlen(buf);
			snprintf(buf + o, sizeof(buf) - o,
				 "%stry %lld (upload %s: validation failed: %s)", o ? "; " : "",
				 (long long)json_integer_value(json_object_get(ro, "attempt")),
				 pu ? pu : "?", pr ? pr : "?");
		}
		set(row, "service", jstr(buf));
	}
	status_table_add(t, row);
}

void
status_add_build(struct status_table *t, const char *image, const struct np_image_build *b,
		 int paused)
{
	json_t *row = json_object();
	char id[1024];

	snprintf(id, sizeof(id), "%s-%s", image, b->id ? b->id : "");
	set(row, "id", jstr(id));
	set(row, "image", jstr(image));
	set(row, "builder", jstr(b->builder));
	set(row, "formats", jstrv(&b->formats));
	set(row, "state", jstr(paused ? "paused" : np_build_state_name(b->state)));
	set(row, "age", epoch_int(b->state_time));
	status_table_add(t, row);
}

void
status_add_image_status(struct status_table *t, const char *image, int paused,
			const char *build_request, double request_time)
{
	json_t *row = json_object();

	set(row, "image", jstr(image));
	set(row, "paused", json_boolean(paused));
	set(row, "build_request", jstr(build_request));
	set(row, "build_request_age", build_request ? epoch_int(request_time) : json_null());
	status_table_add(t, row);
}

void
status_add_label(struct status_table *t, const char *label)
{
	json_t *row = json_object();

	set(row, "label", jstr(label));
	status_table_add(t, row);
}

/* ---- from the caches ---------------------------------------------------------------------- */

const struct np_node *
status_node_of(const struct zk_cache *nodes, const struct zk_cache_entry *e, struct np_node **tmp)
{
	char err[256];

	(void)nodes;
	*tmp = NULL;
	if (e == NULL)
		return NULL;
	if (e->obj != NULL)
		return e->obj;
	if (e->len <= 0 || e->data == NULL)
		return NULL;
	if (np_node_decode(e->name, e->data, (size_t)e->len, tmp, err, sizeof(err)) != 0) {
		*tmp = NULL;
		return NULL; /* malformed: skipped (its decoder logged it) */
	}
	return *tmp;
}

static void
add_node_entry(struct status_table *t, const struct zk_cache *nodes, const struct zk_cache_entry *e,
	       double now)
{
	struct np_node *tmp;
	const struct np_node *nd = status_node_of(nodes, e, &tmp);

	if (nd != NULL)
		status_add_node(t, nd, e->locked, now);
	np_node_free(tmp);
}

void
status_nodes_from_cache(struct status_table *t, const struct zk_cache *nodes, const char *node_id,
			double now)
{
	const struct zk_cache_entry *const *ents;
	int i, n;

	if (nodes == NULL)
		return;
	if (node_id != NULL && *node_id != '\0') {
		add_node_entry(t, nodes, zk_cache_get(nodes, node_id), now);
		return;
	}
	n = zk_cache_entries(nodes, &ents);
	for (i = 0; i < n; i++)
		add_node_entry(t, nodes, ents[i], now);
}

void
status_nodes_from_sums(struct status_table *t, const struct zk_cache *nodes, const char *node_id,
		       double now)
{
	const struct zk_cache_entry *const *ents;
	const struct np_node_sum *s;
	int i, n;

	if (nodes == NULL)
		return;
	if (node_id != NULL && *node_id != '\0') {
		const struct zk_cache_entry *e = zk_cache_get(nodes, node_id);
		if (e != NULL && (s = e->obj) != NULL && np_node_sum_full(s) != NULL)
			status_add_node(t, np_node_sum_full(s), e->locked, now);
		return;
	}
	n = zk_cache_entries(nodes, &ents);
	for (i = 0; i < n; i++)
		if ((s = ents[i]->obj) != NULL && np_node_sum_full(s) != NULL)
			status_add_node(t, np_node_sum_full(s), ents[i]->locked, now);
}

void
status_requests_from_cache(struct status_table *t, const struct zk_cache *requests)
{
	const struct zk_cache_entry *const *ents;
	int i, n;

	if (requests == NULL)
		return;
	n = zk_cache_entries(requests, &ents);
	for (i = 0; i < n; i++)
		if (ents[i]->obj != NULL)
			status_add_request(t, ents[i]->obj);
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void
status_labels_from_cache(struct status_table *t, const struct zk_cache *pools)
{
	const struct zk_cache_entry *const *ents;
	const char **labels = NULL;
	size_t nl = 0, cap = 0, i, j;
	int k, n;

	if (pools == NULL)
		return;
	n = zk_cache_entries(pools, &ents);
	for (k = 0; k < n; k++) {
		const struct np_component *c = ents[k]->obj;
		if (c == NULL)
			continue;
		for (i = 0; i < c->supported_labels.n; i++) {
			if (nl == cap) {
				cap = cap ? cap * 2 : 16;
				if ((labels = realloc(labels, cap * sizeof(*labels))) == NULL)
					np_oom();
			}
			labels[nl++] = c->supported_labels.v[i];
		}
	}
	if (nl > 0)
		qsort(labels, nl, sizeof(*labels), cmp_str);
	for (i = 0; i < nl; i = j) {
		status_add_label(t, labels[i]);
		for (j = i + 1; j < nl && strcmp(labels[j], labels[i]) == 0; j++)
			;
	}
	free(labels);
}
