/*
 * protocol/intern: the per-process tables of repeated values are capped in
 * count, in the length of one value and in bytes (issue 23): a value past
 * a cap is not interned (-1) and the record keeping it holds its own copy,
 * freed with it.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/intern.h"
#include "protocol/nodesum.h"

Test(intern, a_value_longer_than_the_cap_is_not_interned)
{
	char *big = malloc(NP_INTERN_MAX_LEN + 2);
	struct np_strv one = {NULL, 0};

	memset(big, 'p', NP_INTERN_MAX_LEN + 1);
	big[NP_INTERN_MAX_LEN + 1] = '\0';
	cr_assert_eq(np_intern_str(big), -1);
	big[NP_INTERN_MAX_LEN] = '\0';
	cr_assert_gt(np_intern_str(big), 0, "exactly the cap is fine");
	np_strv_push(&one, big); /* its key is longer than the label */
	cr_assert_eq(np_intern_labels(&one), -1);
	np_strv_clear(&one);
	np_strv_push(&one, "small");
	cr_assert_gt(np_intern_labels(&one), 0);
	np_strv_clear(&one);
	free(big);
}

Test(intern, the_bytes_of_a_table_are_capped)
{
	char v[1001];
	int i, last = 0, refused = -1;

	/* 1000-byte values: the table takes about NP_INTERN_MAX_BYTES of them */
	for (i = 0; i < NP_INTERN_MAX_BYTES / 1000 + 10; i++) {
		snprintf(v, sizeof(v), "%04d", i);
		memset(v + 4, 'x', 996);
		v[1000] = '\0';
		last = np_intern_str(v);
		if (last < 0 && refused < 0)
			refused = i;
	}
	cr_assert_eq(last, -1);
	cr_assert_eq(refused, NP_INTERN_MAX_BYTES / 1000, "refused from value %d", refused);
	/* what is in stays usable; a value fits while bytes are left */
	cr_assert_str_eq(np_intern_str_get(1) + 4, v + 4);
	cr_assert_gt(np_intern_str("new"), 0);
	memset(v, 'y', 600);
	v[600] = '\0';
	cr_assert_eq(np_intern_str(v), -1, "%d bytes left", NP_INTERN_MAX_BYTES % 1000);
}

Test(intern, a_record_with_an_oversized_provider_is_kept_whole)
{
	char body[4096], err[256], name[2001];
	struct np_node *n = NULL;
	struct np_node_sum *s;
	int k;

	memset(name, 'q', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	k = snprintf(body, sizeof(body),
		     "{\"provider\": \"%s\", \"pool\": \"main\", \"type\": [\"small\"], "
		     "\"state\": \"ready\"}",
		     name);
	cr_assert_eq(np_node_decode("1", body, (size_t)k, &n, err, sizeof(err)), 0, "%s", err);
	s = np_node_sum_new(n, 0);
	cr_assert_str_eq(np_node_sum_provider(s), name);
	cr_assert_eq(np_node_sum_state(s), NP_NODE_READY);
	np_node_sum_free(s);
}
