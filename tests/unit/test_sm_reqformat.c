/*
 * Request-attribute templates (drivers/statemachine/reqformat.h), as
 * upstream fills dynamic-instance-properties: Python's str.format with the
 * request's safe attributes.
 */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "protocol/model.h"
#include "drivers/statemachine/reqformat.h"

static struct np_request *
request(void)
{
	struct np_request *r = np_request_new();

	r->id = strdup("100-0000000042");
	r->tenant_name = strdup("t1");
	r->requestor = strdup("zuul");
	r->relative_priority = 3;
	r->created_time = 1700000000.5;
	r->has_created_time = 1;
	np_strv_push(&r->node_types, "small");
	np_strv_push(&r->node_types, "large");
	return r;
}

static void
expect(const char *tmpl, const char *want)
{
	struct np_request *r = request();
	char err[200] = "", *got = sm_request_format(tmpl, r, err, sizeof(err));

	cr_assert_not_null(got, "%s: %s", tmpl, err);
	cr_assert_str_eq(got, want);
	free(got);
	np_request_free(r);
}

static void
refused(const char *tmpl, const char *why)
{
	struct np_request *r = request();
	char err[200] = "", *got = sm_request_format(tmpl, r, err, sizeof(err));

	cr_assert_null(got, "%s gave %s", tmpl, got);
	cr_assert(strstr(err, why) != NULL, "%s: %s", tmpl, err);
	np_request_free(r);
}

Test(reqformat, attributes_as_python_writes_them)
{
	expect("Tenant is {request.tenant_name}", "Tenant is t1");
	expect("{request.id}/{request.requestor}", "100-0000000042/zuul");
	expect("{request.relative_priority}", "3");
	expect("{request.created_time}", "1700000000.5");
	expect("{request.labels}", "['small', 'large']");
	expect("{request.event_id}", "None");
	expect("{{literal}} {request.tenant_name}}}", "{literal} t1}");
	expect("no fields", "no fields");
}

static void
float_is(double v, const char *want)
{
	struct np_request *r = request();
	char err[200], *got;

	r->created_time = v;
	got = sm_request_format("{request.created_time}", r, err, sizeof(err));
	cr_assert_str_eq(got, want);
	free(got);
	np_request_free(r);
}

/* What Python's str(float) prints for each. */
Test(reqformat, floats_as_python_prints_them)
{
	float_is(1700000000, "1700000000.0");
	float_is(1732467123.456789, "1732467123.456789");
	float_is(0.1, "0.1");
	float_is(0.0001, "0.0001");
	float_is(0.00001, "1e-05");
	float_is(1e16, "1e+16");
	float_is(1.5e16, "1.5e+16");
	float_is(123456789012345.0, "123456789012345.0");
	float_is(-2.5, "-2.5");
	float_is(0, "0.0");
}

Test(reqformat, what_upstream_cannot_format_is_refused)
{
	struct np_request *r = NULL;
	char err[200];

	refused("{request.nope}", "unknown field request.nope");
	refused("{node.id}", "unknown field node.id");
	refused("{request.id!r}", "unknown field");
	refused("{request.id", "expected '}'");
	refused("a } b", "single '}'");
	cr_assert_null(sm_request_format("x", r, err, sizeof(err)));
}
