/* Compact node summaries (protocol/nodesum.h): what a worker keeps of
 * another provider's node. Records from tests/data/golden (as upstream and
 * Zuul write them). */
#include <criterion/criterion.h>

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/model.h"
#include "protocol/intern.h"
#include "protocol/nodesum.h"

static struct np_node *
golden(const char *name, const char *id)
{
	char path[256], err[256], *buf;
	struct np_node *n = NULL;
	FILE *f;
	long len;

	snprintf(path, sizeof(path), "tests/data/golden/%s", name);
	f = fopen(path, "rb");
	cr_assert_not_null(f, "%s", path);
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	buf = malloc((size_t)len + 1);
	cr_assert_eq(fread(buf, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	cr_assert_eq(np_node_decode(id, buf, (size_t)len, &n, err, sizeof(err)), 0, "%s", err);
	free(buf);
	return n;
}

Test(nodesum, keeps_what_consumers_read)
{
	struct np_node_sum *s = np_node_sum_new(golden("node-aws.json", "0000000042"), 0);
	const json_t *res = np_node_sum_resources(s);

	cr_assert_eq(np_node_sum_state(s), NP_NODE_READY);
	cr_assert_str_eq(np_node_sum_provider(s), "rax-dfw");
	cr_assert_str_eq(np_node_sum_pool(s), "main");
	cr_assert_str_eq(np_node_sum_az(s), "us-east-1a");
	cr_assert_str_eq(np_node_sum_tenant_name(s), "example");
	cr_assert_null(np_node_sum_allocated_to(s));
	cr_assert_eq(np_node_sum_type(s)->n, 1);
	cr_assert_str_eq(np_node_sum_type(s)->v[0], "ubuntu-jammy");
	cr_assert(json_is_object(res));
	cr_assert_eq(json_integer_value(json_object_get(res, "cores")), 2);
	cr_assert_eq(json_integer_value(json_object_get(res, "ram")), 4096);
	cr_assert_eq(json_integer_value(json_object_get(res, "L-1216C47A")), 2);
	cr_assert_null(np_node_sum_full(s), "another provider's record is not kept whole");
	cr_assert(np_node_sum_of_provider(s, "rax-dfw"));
	cr_assert_not(np_node_sum_of_provider(s, "rax-ord"));
	cr_assert_not(np_node_sum_of_provider(s, NULL));
	np_node_sum_free(s);
}

/* The summary of a record kept whole answers from the record. */
Test(nodesum, allocated_and_full)
{
	struct np_node *n = golden("node-zuul-in-use.json", "0000000007");
	char *want = n->allocated_to != NULL ? strdup(n->allocated_to) : NULL;
	struct np_node_sum *s = np_node_sum_new(n, 1);
	struct np_node_sum *f = np_node_sum_new(golden("node-zuul-in-use.json", "8"), 0);

	cr_assert_not_null(want, "the in-use record is allocated");
	cr_assert_eq(np_node_sum_state(s), NP_NODE_IN_USE);
	cr_assert_str_eq(np_node_sum_allocated_to(s), want);
	cr_assert_eq(np_node_sum_full(s), n, "kept whole when asked");
	cr_assert_str_eq(np_node_sum_full(s)->id, "0000000007");
	/* the same record as another provider's node: the same answers */
	cr_assert_null(np_node_sum_full(f));
	cr_assert_eq(np_node_sum_state(f), NP_NODE_IN_USE);
	cr_assert_str_eq(np_node_sum_allocated_to(f), want);
	cr_assert_str_eq(np_node_sum_provider(f), np_node_sum_provider(s));
	cr_assert_eq(np_node_sum_pool(f) == NULL, np_node_sum_pool(s) == NULL);
	cr_assert_eq(np_node_sum_type(f)->n, np_node_sum_type(s)->n);
	cr_assert_eq(np_node_sum_tenant_name(f) == NULL, np_node_sum_tenant_name(s) == NULL);
	cr_assert(
	    json_equal((json_t *)np_node_sum_resources(f), (json_t *)np_node_sum_resources(s)) ||
	    (np_node_sum_resources(f) == NULL && np_node_sum_resources(s) == NULL));
	free(want);
	np_node_sum_free(s);
	np_node_sum_free(f);
}

Test(nodesum, shared_values_are_held_once)
{
	struct np_node_sum *a = np_node_sum_new(golden("node-aws.json", "1"), 0);
	struct np_node_sum *b = np_node_sum_new(golden("node-aws.json", "2"), 0);
	struct np_node_sum *c = np_node_sum_new(golden("node-zuul-in-use.json", "3"), 0);
	struct np_node_sum *d = np_node_sum_new(golden("node-zuul-in-use.json", "4"), 0);

	cr_assert_eq(a, b, "two unallocated nodes with the same values share one summary");
	cr_assert_neq(c, d, "an allocated node has its own");
	cr_assert_eq(np_node_sum_provider(a), np_node_sum_provider(b), "provider interned");
	cr_assert_eq(np_node_sum_type(c), np_node_sum_type(d), "label set interned");
	cr_assert_eq(np_node_sum_resources(c), np_node_sum_resources(d), "resource shape interned");
	np_node_sum_free(a);
	/* b's shared values outlive a */
	cr_assert_str_eq(np_node_sum_provider(b), "rax-dfw");
	cr_assert_eq(json_integer_value(json_object_get(np_node_sum_resources(b), "cores")), 2);
	np_node_sum_free(b);
	np_node_sum_free(c);
	cr_assert_not_null(np_node_sum_allocated_to(d));
	np_node_sum_free(d);
}

/* Issue 13's budget: another provider's node costs at most 48 bytes with
 * malloc's overhead (one 16-byte-aligned chunk of usable + 8 bytes). */
Test(nodesum, foreign_node_fits_48_bytes)
{
	struct np_node *n = golden("node-zuul-in-use.json", "5");
	struct np_node_sum *keep = np_node_sum_new(golden("node-aws.json", "6"), 0);
	struct np_node_sum *s, *u;

	free(n->allocated_to);
	n->allocated_to = strdup("200-0000000042"); /* Zuul's request id */
	s = np_node_sum_new(n, 0);
	cr_assert_str_eq(np_node_sum_allocated_to(s), "200-0000000042");
	cr_assert_leq(malloc_usable_size(s) + 8, 48, "allocated: %zu usable bytes",
		      malloc_usable_size(s));
	/* an unallocated node equal to a held one allocates nothing */
	u = np_node_sum_new(golden("node-aws.json", "7"), 0);
	cr_assert_eq(u, keep);
	np_node_sum_free(u);
	np_node_sum_free(s);
	np_node_sum_free(keep);
}

Test(nodesum, minimal_record_defaults)
{
	struct np_node *n = NULL;
	struct np_node_sum *s;
	char err[256];
	const char *body = "{\"state\": \"ready\", \"type\": \"bare-label\", \"resources\": 5}";

	cr_assert_eq(np_node_decode("9", body, strlen(body), &n, err, sizeof(err)), 0);
	s = np_node_sum_new(n, 0);
	cr_assert_eq(np_node_sum_state(s), NP_NODE_READY);
	cr_assert_null(np_node_sum_provider(s));
	cr_assert_null(np_node_sum_pool(s));
	cr_assert_null(np_node_sum_tenant_name(s));
	cr_assert_null(np_node_sum_resources(s), "resources not an object: none");
	cr_assert_eq(np_node_sum_type(s)->n, 1, "a bare string is one label");
	cr_assert_str_eq(np_node_sum_type(s)->v[0], "bare-label");
	cr_assert_not(np_node_sum_of_provider(s, "x"));
	np_node_sum_free(s);

	body = "{\"state\": \"no-such-state\", \"provider\": 7, \"allocated_to\": [1]}";
	cr_assert_eq(np_node_decode("10", body, strlen(body), &n, err, sizeof(err)), 0);
	s = np_node_sum_new(n, 0);
	cr_assert_eq(np_node_sum_state(s), -1, "an unknown state matches no state test");
	cr_assert_eq(np_node_sum_type(s)->n, 0);
	cr_assert_null(np_node_sum_provider(s), "an odd provider is nobody's");
	cr_assert_null(np_node_sum_allocated_to(s));
	np_node_sum_free(s);
}

Test(nodesum, past_the_intern_limit_the_record_is_kept_whole)
{
	int i;
	char body[200], err[256];
	struct np_node_sum *keep[3];

	/* more distinct providers than the table holds: the later records
	 * are kept whole (not offered as full records), never dropped */
	for (i = 0; i < NP_INTERN_MAX + 3; i++) {
		struct np_node *n = NULL;
		struct np_node_sum *s;
		int k =
		    snprintf(body, sizeof(body),
			     "{\"provider\": \"p-%d\", \"pool\": \"q-%d\", \"type\": [\"l-%d\"], "
			     "\"allocated_to\": \"r-%d\", \"state\": \"in-use\"}",
			     i, i, i, i);
		cr_assert_eq(np_node_decode("1", body, (size_t)k, &n, err, sizeof(err)), 0);
		s = np_node_sum_new(n, 0);
		if (i >= NP_INTERN_MAX)
			keep[i - NP_INTERN_MAX] = s;
		else
			np_node_sum_free(s);
	}
	for (i = 0; i < 3; i++) {
		char want[32];
		snprintf(want, sizeof(want), "p-%d", NP_INTERN_MAX + i);
		cr_assert_str_eq(np_node_sum_provider(keep[i]), want);
		cr_assert(np_node_sum_of_provider(keep[i], want));
		snprintf(want, sizeof(want), "l-%d", NP_INTERN_MAX + i);
		cr_assert_str_eq(np_node_sum_type(keep[i])->v[0], want);
		snprintf(want, sizeof(want), "r-%d", NP_INTERN_MAX + i);
		cr_assert_str_eq(np_node_sum_allocated_to(keep[i]), want);
		cr_assert_eq(np_node_sum_state(keep[i]), NP_NODE_IN_USE);
		cr_assert_null(np_node_sum_full(keep[i]), "not offered as our own record");
		np_node_sum_free(keep[i]);
	}
}
