/*
 * Request-attribute templates (see reqformat.h), as Python's str.format
 * with upstream's NodeRequest.getSafeAttributes() as `request`.
 */
#include "drivers/statemachine/reqformat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Python's repr of a float: the fewest significant digits that read back
 * the same, written out in full with a ".0" when the exponent is in
 * [-4, 16), else as d.ddde+XX. */
static void
py_float(double v, char *buf, size_t len)
{
	char e[64], digits[32], *dot, *x;
	int prec, exp10, nd, i;
	size_t o = 0;

	if (v != v || v - v != 0) { /* nan, inf */
		snprintf(buf, len, "%s", v != v ? "nan" : v > 0 ? "inf" : "-inf");
		return;
	}
	for (prec = 1; prec <= 17; prec++) {
		snprintf(e, sizeof(e), "%.*e", prec - 1, v);
		if (strtod(e, NULL) == v)
			break;
	}
	/* e is [-]d[.ddd]e[+-]XX */
	x = strchr(e, 'e');
	exp10 = atoi(x + 1);
	*x = '\0';
	nd = 0;
	for (dot = e; *dot; dot++)
		if (*dot >= '0' && *dot <= '9')
			digits[nd++] = *dot;
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	digits[nd] = '\0';
#define PUT(c)                                                                                     \
	do {                                                                                       \
		if (o + 1 < len)                                                                   \
			buf[o++] = (c);                                                            \
	} while (0)
	if (e[0] == '-')
		PUT('-');
	if (exp10 >= -4 && exp10 < 16) {
		if (exp10 < 0) {
			PUT('0');
			PUT('.');
			for (i = 0; i < -exp10 - 1; i++)
				PUT('0');
			for (i = 0; i < nd; i++)
				PUT(digits[i]);
		} else {
			for (i = 0; i <= exp10; i++)
				PUT(i < nd ? digits[i] : '0');
			PUT('.');
			if (nd <= exp10 + 1)
				PUT('0');
			for (i = exp10 + 1; i < nd; i++)
				PUT(digits[i]);
		}
		buf[o] = '\0';
	} else {
		PUT(digits[0]);
		if (nd > 1) {
			PUT('.');
			for (i = 1; i < nd; i++)
				PUT(digits[i]);
		}
		buf[o] = '\0';
		snprintf(buf + o, len - o, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
	}
#undef PUT
}

static void
put(FILE *out, const char *s)
{
	fputs(s != NULL ? s : "None", out);
}

/* The value of request.<name>, written to out; -1 if there is no such one. */
static int
attr(FILE *out, const struct np_request *req, const char *name, size_t n)
{
	char num[64];
	size_t i;

#define IS(s) (n == strlen(s) && strncmp(name, s, n) == 0)
	if (IS("id"))
		put(out, req->id);
	else if (IS("requestor"))
		put(out, req->requestor);
	else if (IS("event_id"))
		put(out, req->event_id);
	else if (IS("tenant_name"))
		put(out, req->tenant_name);
	else if (IS("relative_priority"))
		fprintf(out, "%lld", req->relative_priority);
	else if (IS("created_time")) {
		if (req->has_created_time) {
			py_float(req->created_time, num, sizeof(num));
			fputs(num, out);
		} else
			fputs("None", out);
	} else if (IS("labels")) {
		fputc('[', out);
		for (i = 0; i < req->node_types.n; i++)
			fprintf(out, "%s'%s'", i ? ", " : "", req->node_types.v[i]);
		fputc(']', out);
	} else
		return -1;
#undef IS
	return 0;
}

char *
sm_request_format(const char *tmpl, const struct np_request *req, char *err, size_t errlen)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out;
	const char *p = tmpl;
	int bad = 0;

	if (req == NULL) {
		snprintf(err, errlen, "no request to take attributes from");
		return NULL;
	}
	if ((out = open_memstream(&buf, &len)) == NULL)
		abort();
	while (*p && !bad) {
		if (p[0] == '{' && p[1] == '{') {
			fputc('{', out);
			p += 2;
		} else if (p[0] == '}' && p[1] == '}') {
			fputc('}', out);
			p += 2;
		} else if (p[0] == '}') {
			snprintf(err, errlen, "single '}' encountered in format string");
			bad = 1;
		} else if (p[0] == '{') {
			const char *end = strchr(p, '}');

			if (end == NULL) {
				snprintf(err, errlen, "expected '}' before end of string");
				bad = 1;
			} else if (strncmp(p + 1, "request.", 8) != 0 ||
				   attr(out, req, p + 9, (size_t)(end - p - 9)) != 0) {
				snprintf(err, errlen, "unknown field %.*s", (int)(end - p - 1),
					 p + 1);
				bad = 1;
			} else
				p = end + 1;
		} else
			fputc(*p++, out);
	}
	fclose(out);
	if (bad) {
		free(buf);
		return NULL;
	}
	return buf;
}
