/*
 * Status tables (lib/ops/status.c): PrettyTable-style text as upstream's
 * status.py prints it, json.dumps-style JSON, ages, Python's str()/repr()
 * of values, and the web's content negotiation.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/ops/status.h"

static void
age_is(double seconds, const char *want)
{
	char buf[64];

	cr_assert_str_eq(status_age(seconds, buf, sizeof(buf)), want, "age(%g)", seconds);
}

Test(status, age_formats_days_hours_minutes_seconds)
{
	age_is(0, "00:00:00:00");
	age_is(59.9, "00:00:00:59");
	age_is(3725.7, "00:01:02:05");
	age_is(90061, "01:01:01:01");
	age_is(86400.0 * 100 + 1, "100:00:00:01");
	/* clock skew: Python's divmod floors */
	age_is(-5, "-1:23:59:55");
}

static struct status_table *
labels(const char *const *names, size_t n)
{
	struct status_table *t = status_table_new(STATUS_LABEL_LIST);
	size_t i;

	for (i = 0; i < n; i++)
		status_add_label(t, names[i]);
	return t;
}

Test(status, text_table_borders_padding_left_alignment)
{
	struct status_table *t = labels((const char *const[]){"small", "a-much-longer-label"}, 2);
	char *s = status_text(t, NULL, 0, 0);

	cr_assert_str_eq(s, "+---------------------+\n"
			    "| Label               |\n"
			    "+---------------------+\n"
			    "| small               |\n"
			    "| a-much-longer-label |\n"
			    "+---------------------+");
	free(s);
	status_table_free(t);
}

Test(status, empty_table_prints_the_header)
{
	struct status_table *t = status_table_new(STATUS_REQUEST_LIST);
	char *s = status_text(t, NULL, 0, 0);

	cr_assert_str_eq(
	    s, "+------------+----------+-------+-----------+------------+-------+-------------+"
	       "----------+\n"
	       "| Request ID | Priority | State | Requestor | Node Types | Nodes | Declined By |"
	       " Event ID |\n"
	       "+------------+----------+-------+-----------+------------+-------+-------------+"
	       "----------+\n"
	       "+------------+----------+-------+-----------+------------+-------+-------------+"
	       "----------+");
	free(s);
	status_table_free(t);
}

Test(status, request_row_joins_lists_and_prints_null_empty)
{
	struct status_table *t = status_table_new(STATUS_REQUEST_LIST);
	struct np_request *r = np_request_new();
	const char *fields[] = {"id", "relative_priority", "node_types", "nodes", "requestor"};
	char *s, *j;

	r->id = strdup("100-0000000001");
	r->relative_priority = -3;
	np_strv_push(&r->node_types, "small");
	np_strv_push(&r->node_types, "large");
	status_add_request(t, r);
	s = status_text(t, fields, 5, 0);
	/* fields keep the table's column order, as upstream */
	cr_assert_str_eq(s,
			 "+----------------+----------+-----------+-------------+-------+\n"
			 "| Request ID     | Priority | Requestor | Node Types  | Nodes |\n"
			 "+----------------+----------+-----------+-------------+-------+\n"
			 "| 100-0000000001 | -3       |           | small,large |       |\n"
			 "+----------------+----------+-----------+-------------+-------+",
			 "%s", s);
	free(s);
	j = status_json(t);
	cr_assert_str_eq(j, "[{\"id\": \"100-0000000001\", \"relative_priority\": -3, "
			    "\"state\": \"requested\", \"requestor\": null, \"node_types\": "
			    "[\"small\", \"large\"], \"nodes\": [], \"declined_by\": [], "
			    "\"event_id\": null}]");
	free(j);
	np_request_free(r);
	status_table_free(t);
}

Test(status, node_row_values_and_brief_fields)
{
	struct status_table *t = status_table_new(STATUS_NODE_LIST);
	struct np_node *n = np_node_new();
	json_t *rows;
	char *s;

	n->id = strdup("0000000007");
	n->provider = strdup("rax");
	np_strv_push(&n->type, "small");
	np_strv_push(&n->type, "fast");
	n->external_id_obj = json_pack("{s:s, s:s}", "instance", "i-1", "host", "h-2");
	n->public_ipv6 = strdup("2001:db8::1");
	n->state = NP_NODE_IN_USE;
	n->state_time = 1000;
	n->connection_port_obj = json_pack("{s:s}", "token", "secret");
	status_add_node(t, n, 1, 1000 + 3600 + 61);
	rows = t->rows;
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(rows, 0), "age")),
			 "00:01:01:01");
	cr_assert_str_eq(
	    json_string_value(json_object_get(json_array_get(rows, 0), "connection_port")),
	    "redacted");
	s = status_text(t, status_node_brief_fields, status_node_brief_nfields, 0);
	cr_assert_str_eq(
	    s,
	    "+------------+----------+------------+------------------------------------+"
	    "-------------+-------------+--------+-------------+--------+\n"
	    "| ID         | Provider | Label      | Server ID                          |"
	    " Public IPv4 | IPv6        | State  | Age         | Locked |\n"
	    "+------------+----------+------------+------------------------------------+"
	    "-------------+-------------+--------+-------------+--------+\n"
	    "| 0000000007 | rax      | small,fast | {'instance': 'i-1', 'host': 'h-2'} |"
	    "             | 2001:db8::1 | in-use | 00:01:01:01 | locked |\n"
	    "+------------+----------+------------+------------------------------------+"
	    "-------------+-------------+--------+-------------+--------+",
	    "%s", s);
	free(s);
	np_node_free(n);
	status_table_free(t);
}

Test(status, epoch_ages_and_booleans_in_image_tables)
{
	struct status_table *t = status_table_new(STATUS_IMAGE_STATUS);
	char *s;

	status_add_image_status(t, "ubuntu", 1, "building", 500.9);
	status_add_image_status(t, "debian", 0, NULL, 0);
	s = status_text(t, NULL, 0, 500 + 86400 + 7);
	cr_assert_str_eq(s,
			 "+--------+--------+---------------+-------------------+\n"
			 "| Image  | Paused | Build Request | Build Request Age |\n"
			 "+--------+--------+---------------+-------------------+\n"
			 "| ubuntu | True   | building      | 01:00:00:07       |\n"
			 "| debian | False  |               |                   |\n"
			 "+--------+--------+---------------+-------------------+",
			 "%s", s);
	free(s);
	s = status_json(t);
	cr_assert_str_eq(
	    s, "[{\"image\": \"ubuntu\", \"paused\": true, \"build_request\": "
	       "\"building\", \"build_request_age\": 500}, {\"image\": \"debian\", "
	       "\"paused\": false, \"build_request\": null, \"build_request_age\": null}]");
	free(s);
	status_table_free(t);
}

Test(status, multi_line_and_wide_cells)
{
	struct status_table *t = status_table_new(STATUS_LABEL_LIST);
	char *s;

	status_add_label(t, "one\ntwo-lines");
	status_add_label(t, "\xe6\x97\xa5\xe6\x9c\xac"); /* two wide characters */
	s = status_text(t, NULL, 0, 0);
	cr_assert_str_eq(s,
			 "+-----------+\n"
			 "| Label     |\n"
			 "+-----------+\n"
			 "| one       |\n"
			 "| two-lines |\n"
			 "| \xe6\x97\xa5\xe6\x9c\xac      |\n"
			 "+-----------+",
			 "%s", s);
	free(s);
	status_table_free(t);
}

Test(status, fields_csv_and_unknown_fields)
{
	struct status_table *t = labels((const char *const[]){"x"}, 1);
	char *s;

	s = status_text_csv(t, "label", 0);
	cr_assert(strstr(s, "| x     |") != NULL, "%s", s);
	free(s);
	s = status_text_csv(t, "", 0);
	cr_assert(strstr(s, "| Label |") != NULL, "%s", s);
	free(s);
	s = status_text_csv(t, "nosuch", 0);
	cr_assert_str_eq(s, "+\n|\n+\n|\n+", "%s", s);
	free(s);
	status_table_free(t);
}

Test(status, python_repr_of_values)
{
	json_t *v = json_loads("{\"a\": [1, 2.5, true, null, \"it's\"], \"b\": 1e16, "
			       "\"c\": 0.0001, \"d\": 1e-05, \"e\": 3.0, \"f\": \"q\\\\\\n\"}",
			       0, NULL);
	char *s;

	cr_assert_not_null(v);
	s = status_py_repr(v);
	cr_assert_str_eq(s,
			 "{'a': [1, 2.5, True, None, \"it's\"], 'b': 1e+16, 'c': 0.0001, "
			 "'d': 1e-05, 'e': 3.0, 'f': 'q\\\\\\n'}",
			 "%s", s);
	free(s);
	s = status_value_text(json_object_get(v, "a"));
	cr_assert_str_eq(s, "1,2.5,True,None,it's");
	free(s);
	json_decref(v);
}

Test(status, content_negotiation_as_webob)
{
	cr_assert_eq(status_wants_json(NULL), 0);
	cr_assert_eq(status_wants_json(""), 0);
	cr_assert_eq(status_wants_json("*/*"), 0);
	cr_assert_eq(status_wants_json("application/json"), 1);
	cr_assert_eq(status_wants_json("text/plain, application/json"), 0);
	cr_assert_eq(status_wants_json("text/*;q=0.5, application/json"), 1);
	cr_assert_eq(status_wants_json("*/*;q=0.1, application/json"), 1);
	cr_assert_eq(status_wants_json("application/json;q=0, */*"), 0);
	cr_assert_eq(status_wants_json("APPLICATION/JSON"), 1);
	cr_assert_eq(status_wants_json("image/png"), 0);
	cr_assert_eq(status_wants_json("application/json;q=2"), 0);
	cr_assert_eq(status_wants_json(",,;;/,application/*"), 1);
}

/* The web's caps (issue 23): a long label cut to the cell width with a
 * "..." mark, a many-lined one cut to the line cap, short ones untouched;
 * a table over max_bytes gives no text (EFBIG). */
Test(status, cell_caps_and_size_bound)
{
	char long_name[600], lines[200], *s, *p;
	struct status_table *t;
	size_t i, longest = 0, n;

	memset(long_name, 'x', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	for (i = 0, p = lines; i < 40; i++)
		p += sprintf(p, "l%zu\n", i);
	p[-1] = '\0';
	t = labels((const char *const[]){"small", long_name, lines}, 3);
	t->max_cell_width = STATUS_CELL_MAX_WIDTH;
	t->max_cell_lines = STATUS_CELL_MAX_LINES;
	s = status_text(t, NULL, 0, 0);
	cr_assert_not_null(s);
	for (p = s; *p; p += n + (p[n] == '\n')) {
		n = strcspn(p, "\n");
		if (n > longest)
			longest = n;
	}
	/* "| " + 256 columns + " |" */
	cr_assert_eq(longest, STATUS_CELL_MAX_WIDTH + 4, "%zu", longest);
	cr_assert_not_null(strstr(s, "| small "));
	cr_assert_not_null(strstr(s, "xxxxx... |"));
	cr_assert_not_null(strstr(s, "| l30 "));
	cr_assert_null(strstr(s, "| l31 "));
	cr_assert_not_null(strstr(s, "| ... "));
	free(s);
	t->max_bytes = 1000;
	errno = 0;
	cr_assert_null(status_text(t, NULL, 0, 0));
	cr_assert_eq(errno, EFBIG);
	/* no caps: as upstream, whole */
	t->max_cell_width = t->max_cell_lines = t->max_bytes = 0;
	s = status_text(t, NULL, 0, 0);
	cr_assert_not_null(strstr(s, long_name));
	cr_assert_not_null(strstr(s, "| l39 "));
	free(s);
	status_table_free(t);
}
