/*
 * Nodepool's ZooKeeper path catalogue and ids, checked against the paths
 * upstream's zk/zookeeper.py and zk/components.py build (reference 1.2).
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include "protocol/paths.h"

#define IMG    "ubuntu-jammy"
#define BLD    "3f2b9c7d1e8a4b6c9d0e1f2a3b4c5d6e"
#define BUILDS "/nodepool/images/ubuntu-jammy/builds/" BLD

static void
expect(int rc, const char *buf, const char *want)
{
	cr_assert_eq(rc, (int)strlen(want), "length %d for %s", rc, want);
	cr_assert_str_eq(buf, want);
}

Test(paths, catalogue)
{
	char b[NP_PATH_MAX];

	expect(np_path_node(b, sizeof(b), "0000000042"), b, "/nodepool/nodes/0000000042");
	expect(np_path_node_lock(b, sizeof(b), "0000000042"), b, "/nodepool/nodes/0000000042/lock");
	expect(np_path_request(b, sizeof(b), "100-0000000007"), b,
	       "/nodepool/requests/100-0000000007");
	expect(np_path_request_lock(b, sizeof(b), "100-0000000007"), b,
	       "/nodepool/requests-lock/100-0000000007");
	expect(np_path_image(b, sizeof(b), IMG), b, "/nodepool/images/ubuntu-jammy");
	expect(np_path_image_pause(b, sizeof(b), IMG), b, "/nodepool/images/ubuntu-jammy/pause");
	expect(np_path_image_request_build(b, sizeof(b), IMG), b,
	       "/nodepool/images/ubuntu-jammy/request-build");
	expect(np_path_image_builds(b, sizeof(b), IMG), b, "/nodepool/images/ubuntu-jammy/builds");
	expect(np_path_image_build_lock(b, sizeof(b), IMG), b,
	       "/nodepool/images/ubuntu-jammy/builds/lock");
	expect(np_path_build(b, sizeof(b), IMG, BLD), b, BUILDS);
	expect(np_path_build_lock(b, sizeof(b), IMG, BLD), b, BUILDS "/lock");
	expect(np_path_build_providers(b, sizeof(b), IMG, BLD), b, BUILDS "/providers");
	expect(np_path_uploads(b, sizeof(b), IMG, BLD, "rax-dfw"), b,
	       BUILDS "/providers/rax-dfw/images");
	expect(np_path_upload_lock(b, sizeof(b), IMG, BLD, "rax-dfw"), b,
	       BUILDS "/providers/rax-dfw/images/lock");
	expect(np_path_upload(b, sizeof(b), IMG, BLD, "rax-dfw", "0000000001"), b,
	       BUILDS "/providers/rax-dfw/images/0000000001");
	expect(np_path_upload_id_lock(b, sizeof(b), IMG, BLD, "rax-dfw", "0000000001"), b,
	       BUILDS "/providers/rax-dfw/images/0000000001/lock");
	expect(np_path_component_root(b, sizeof(b), "pool"), b, "/nodepool/components/pool");
	expect(np_path_component_prefix(b, sizeof(b), "launcher", "nl01.example.com"), b,
	       "/nodepool/components/launcher/nl01.example.com");
	cr_assert_str_eq(NP_STATS_ELECTION_PATH, "/nodepool/elections/stats");
}

Test(paths, request_prefix_pads_priority_to_three_digits)
{
	char b[64];

	expect(np_path_request_prefix(b, sizeof(b), 100), b, "/nodepool/requests/100-");
	expect(np_path_request_prefix(b, sizeof(b), 900), b, "/nodepool/requests/900-");
	expect(np_path_request_prefix(b, sizeof(b), 5), b, "/nodepool/requests/005-");
	expect(np_path_request_prefix(b, sizeof(b), 0), b, "/nodepool/requests/000-");
	expect(np_path_request_prefix(b, sizeof(b), 1000), b, "/nodepool/requests/1000-");
	cr_assert_eq(np_path_request_prefix(b, sizeof(b), -1), -1);
}

Test(paths, bad_elements_are_refused)
{
	char b[NP_PATH_MAX];

	cr_assert_eq(np_path_node(b, sizeof(b), NULL), -1);
	cr_assert_eq(np_path_node(b, sizeof(b), ""), -1);
	cr_assert_eq(np_path_node(b, sizeof(b), "."), -1);
	cr_assert_eq(np_path_node(b, sizeof(b), ".."), -1);
	cr_assert_eq(np_path_node(b, sizeof(b), "00/1"), -1);
	cr_assert_eq(np_path_upload(b, sizeof(b), IMG, BLD, "a/b", "0000000001"), -1);
	cr_assert_eq(np_path_component_prefix(b, sizeof(b), "pool", NULL), -1);
}

Test(paths, truncation_is_reported_like_snprintf)
{
	char b[10];
	int rc = np_path_node(b, sizeof(b), "0000000042");

	cr_assert_eq(rc, (int)strlen("/nodepool/nodes/0000000042"));
	cr_assert_geq(rc, (int)sizeof(b));
	cr_assert_str_eq(b, "/nodepool");
	cr_assert_eq(np_path_node(NULL, 0, "0000000042"), rc, "size 0 just measures");
}

/* Every kind: parse gives the elements, format gives the path back. */
Test(paths, parse_and_format_every_kind)
{
	static const struct {
		const char *path;
		enum np_path_kind kind;
		const char *field, *value; /* one element to check */
	} cases[] = {
	    {"/nodepool/nodes/0000000042", NP_PATH_NODE, "id", "0000000042"},
	    {"/nodepool/nodes/0000000042/lock", NP_PATH_NODE_LOCK, "id", "0000000042"},
	    {"/nodepool/nodes/0000000042/lock/ab__lock__0000000001", NP_PATH_NODE_LOCK_CONTENDER,
	     "contender", "ab__lock__0000000001"},
	    {"/nodepool/requests/100-0000000007", NP_PATH_REQUEST, "id", "100-0000000007"},
	    {"/nodepool/requests-lock/100-0000000007", NP_PATH_REQUEST_LOCK, "id",
	     "100-0000000007"},
	    {"/nodepool/requests-lock/100-0000000007/x__lock__0000000000",
	     NP_PATH_REQUEST_LOCK_CONTENDER, "id", "100-0000000007"},
	    {"/nodepool/images/" IMG, NP_PATH_IMAGE, "image", IMG},
	    {"/nodepool/images/" IMG "/pause", NP_PATH_IMAGE_PAUSE, "image", IMG},
	    {"/nodepool/images/" IMG "/request-build", NP_PATH_IMAGE_REQUEST_BUILD, "image", IMG},
	    {"/nodepool/images/" IMG "/builds", NP_PATH_IMAGE_BUILDS, "image", IMG},
	    {"/nodepool/images/" IMG "/builds/lock", NP_PATH_IMAGE_BUILD_LOCK, "image", IMG},
	    {"/nodepool/images/" IMG "/builds/lock/c__lock__0000000002",
	     NP_PATH_IMAGE_BUILD_LOCK_CONTENDER, "contender", "c__lock__0000000002"},
	    {BUILDS, NP_PATH_BUILD, "build", BLD},
	    {BUILDS "/lock", NP_PATH_BUILD_LOCK, "build", BLD},
	    {BUILDS "/lock/c__lock__0000000002", NP_PATH_BUILD_LOCK_CONTENDER, "build", BLD},
	    {BUILDS "/providers", NP_PATH_BUILD_PROVIDERS, "build", BLD},
	    {BUILDS "/providers/rax-dfw", NP_PATH_BUILD_PROVIDER, "provider", "rax-dfw"},
	    {BUILDS "/providers/rax-dfw/images", NP_PATH_UPLOADS, "provider", "rax-dfw"},
	    {BUILDS "/providers/rax-dfw/images/lock", NP_PATH_UPLOAD_LOCK, "image", IMG},
	    {BUILDS "/providers/rax-dfw/images/lock/c__lock__0000000003",
	     NP_PATH_UPLOAD_LOCK_CONTENDER, "contender", "c__lock__0000000003"},
	    {BUILDS "/providers/rax-dfw/images/0000000001", NP_PATH_UPLOAD, "upload", "0000000001"},
	    {BUILDS "/providers/rax-dfw/images/0000000001/lock", NP_PATH_UPLOAD_ID_LOCK, "upload",
	     "0000000001"},
	    {BUILDS "/providers/rax-dfw/images/0000000001/lock/c__lock__0000000004",
	     NP_PATH_UPLOAD_ID_LOCK_CONTENDER, "contender", "c__lock__0000000004"},
	    {"/nodepool/components/pool", NP_PATH_COMPONENT_KIND, "kind", "pool"},
	    {"/nodepool/components/pool/nl01.example.com0000000003", NP_PATH_COMPONENT, "name",
	     "nl01.example.com0000000003"},
	};
	size_t i;
	int seen[NP_PATH_KIND_COUNT] = {0};

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct np_path_info pi;
		char b[NP_PATH_MAX];
		const char *v = NULL;

		cr_assert_eq(np_path_parse(cases[i].path, &pi), cases[i].kind, "%s -> %s",
			     cases[i].path, np_path_kind_name(np_path_parse(cases[i].path, &pi)));
		cr_assert_eq(pi.kind, cases[i].kind);
		if (strcmp(cases[i].field, "id") == 0)
			v = pi.id;
		else if (strcmp(cases[i].field, "image") == 0)
			v = pi.image;
		else if (strcmp(cases[i].field, "build") == 0)
			v = pi.build;
		else if (strcmp(cases[i].field, "provider") == 0)
			v = pi.provider;
		else if (strcmp(cases[i].field, "upload") == 0)
			v = pi.upload;
		else if (strcmp(cases[i].field, "kind") == 0)
			v = pi.comp_kind;
		else if (strcmp(cases[i].field, "name") == 0)
			v = pi.name;
		else if (strcmp(cases[i].field, "contender") == 0)
			v = pi.contender;
		cr_assert_not_null(v);
		cr_assert_str_eq(v, cases[i].value, "%s: %s", cases[i].path, cases[i].field);
		expect(np_path_format(b, sizeof(b), &pi), b, cases[i].path);
		cr_assert_not_null(np_path_kind_name(pi.kind));
		seen[cases[i].kind] = 1;
	}
	for (i = 1; i < NP_PATH_KIND_COUNT; i++)
		cr_assert(seen[i], "kind %zu (%s) untested", i, np_path_kind_name(i));
}

Test(paths, upload_path_names_all_its_parts)
{
	struct np_path_info pi;

	cr_assert_eq(np_path_parse(BUILDS "/providers/rax-dfw/images/0000000001", &pi),
		     NP_PATH_UPLOAD);
	cr_assert_str_eq(pi.image, IMG);
	cr_assert_str_eq(pi.build, BLD);
	cr_assert_str_eq(pi.provider, "rax-dfw");
	cr_assert_str_eq(pi.upload, "0000000001");
	cr_assert_str_eq(pi.contender, "");
}

/* As upstream's caches: anything named lock is never an object. */
Test(paths, lock_is_never_an_object_and_unknown_paths)
{
	static const char *const unknown[] = {
	    "/nodepool/nodes/lock",
	    "/nodepool/requests/lock",
	    "/nodepool/images/lock",
	    "/nodepool/nodes",
	    "/nodepool",
	    "/",
	    "",
	    "nodepool/nodes/0000000001",
	    "/nodepool/nodes/0000000001/",
	    "/nodepool//nodes/0000000001",
	    "/nodepool/nodes//0000000001",
	    "/nodepool/nodes/0000000001/data",
	    "/nodepool/nodes/0000000001/lock/a/b",
	    "/nodepool/requestsx/1",
	    "/nodepool/images/x/builds/y/providers/p/images/u/lock/c/d",
	    "/nodepool/images/x/builds/y/other",
	    "/nodepool/launchers/x",
	    "/nodepool/elections/stats",
	    "/zuul/nodes/0000000001",
	    "/nodepool/nodes/.",
	    "/nodepool/nodes/..",
	    "/nodepool/images/x/builds/lock/lock",
	    "/nodepool/components/pool/lock",
	};
	size_t i;
	struct np_path_info pi;
	char b[NP_PATH_MAX];

	for (i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		cr_assert_eq(np_path_parse(unknown[i], &pi), NP_PATH_UNKNOWN, "%s", unknown[i]);
		cr_assert_eq(pi.kind, NP_PATH_UNKNOWN);
		cr_assert_str_eq(pi.image, "");
	}
	cr_assert_eq(np_path_parse(NULL, &pi), NP_PATH_UNKNOWN);
	cr_assert_eq(np_path_format(b, sizeof(b), &pi), -1);
	cr_assert_str_eq(np_path_kind_name(NP_PATH_UNKNOWN), "unknown");
	cr_assert_null(np_path_kind_name(NP_PATH_KIND_COUNT));
}

Test(paths, over_long_elements_are_unknown)
{
	char path[NP_NAME_MAX + 64], name[NP_NAME_MAX + 1];
	struct np_path_info pi;

	memset(name, 'a', NP_NAME_MAX);
	name[NP_NAME_MAX] = '\0';
	snprintf(path, sizeof(path), "/nodepool/nodes/%s", name);
	cr_assert_eq(np_path_parse(path, &pi), NP_PATH_UNKNOWN);
	name[NP_NAME_MAX - 1] = '\0';
	snprintf(path, sizeof(path), "/nodepool/nodes/%s", name);
	cr_assert_eq(np_path_parse(path, &pi), NP_PATH_NODE);
	cr_assert_eq(strlen(pi.id), NP_NAME_MAX - 1);
}

Test(paths, format_refuses_bad_fields)
{
	struct np_path_info pi;
	char b[NP_PATH_MAX];

	memset(&pi, 0, sizeof(pi));
	pi.kind = NP_PATH_NODE;
	cr_assert_eq(np_path_format(b, sizeof(b), &pi), -1, "empty id");
	strcpy(pi.id, "lock");
	cr_assert_eq(np_path_format(b, sizeof(b), &pi), -1);
	strcpy(pi.id, "a/b");
	cr_assert_eq(np_path_format(b, sizeof(b), &pi), -1);
	pi.kind = NP_PATH_KIND_COUNT;
	cr_assert_eq(np_path_format(b, sizeof(b), &pi), -1);
}

/* ---- ids ---------------------------------------------------------------------------- */

Test(ids, request_ids)
{
	int prio = -1;
	long long seq = -1;

	cr_assert_eq(np_request_id_parse("100-0000000042", &prio, &seq), 0);
	cr_assert_eq(prio, 100);
	cr_assert_eq(seq, 42);
	cr_assert_eq(np_request_id_parse("900-0000000000", &prio, &seq), 0);
	cr_assert_eq(prio, 900);
	cr_assert_eq(seq, 0);
	/* other priority widths are tolerated */
	cr_assert_eq(np_request_id_parse("5-0000000001", &prio, NULL), 0);
	cr_assert_eq(prio, 5);
	cr_assert_eq(np_request_id_parse("1000-9999999999", &prio, &seq), 0);
	cr_assert_eq(prio, 1000);
	cr_assert_eq(seq, 9999999999LL);
	cr_assert_eq(np_request_id_parse("005-0000000001", &prio, NULL), 0);
	cr_assert_eq(prio, 5);
	cr_assert_eq(np_request_id_parse("100-0000000001", NULL, NULL), 0);
	/* malformed */
	cr_assert_eq(np_request_id_parse("100-42", NULL, NULL), -1);
	cr_assert_eq(np_request_id_parse("100-00000000001", NULL, NULL), -1);
	cr_assert_eq(np_request_id_parse("-0000000001", NULL, NULL), -1);
	cr_assert_eq(np_request_id_parse("abc-0000000001", NULL, NULL), -1);
	cr_assert_eq(np_request_id_parse("100_0000000001", NULL, NULL), -1);
	cr_assert_eq(np_request_id_parse("100-000000000a", NULL, NULL), -1);
	cr_assert_eq(np_request_id_parse("1234567890-0000000001", NULL, NULL), -1);
	cr_assert_eq(np_request_id_parse("100-0000000001-0000000001", NULL, NULL), -1);
	cr_assert_eq(np_request_id_parse("", NULL, NULL), -1);
	cr_assert_eq(np_request_id_parse(NULL, NULL, NULL), -1);
}

Test(ids, node_upload_and_build_ids)
{
	long long seq = -1;

	cr_assert_eq(np_node_id_parse("0000000042", &seq), 0);
	cr_assert_eq(seq, 42);
	cr_assert_eq(np_node_id_parse("000000042", &seq), -1);
	cr_assert_eq(np_node_id_parse("00000000420", &seq), -1);
	cr_assert_eq(np_node_id_parse("000000004a", &seq), -1);
	cr_assert_eq(np_node_id_parse(NULL, &seq), -1);
	cr_assert_eq(np_upload_id_parse("0000000001", &seq), 0);
	cr_assert_eq(seq, 1);
	cr_assert_eq(np_upload_id_parse("lock", &seq), -1);
	cr_assert_eq(np_seq_parse("9999999999", &seq), 0);
	cr_assert_eq(seq, 9999999999LL);

	cr_assert(np_build_id_valid(BLD));
	cr_assert(np_build_id_valid("3F2B9C7D1E8A4B6C9D0E1F2A3B4C5D6E"));
	cr_assert(np_build_id_valid("0000000007"));
	cr_assert_not(np_build_id_valid("3f2b9c7d1e8a4b6c9d0e1f2a3b4c5d6"));
	cr_assert_not(np_build_id_valid("3f2b9c7d1e8a4b6c9d0e1f2a3b4c5d6g"));
	cr_assert_not(np_build_id_valid("3f2b9c7d-1e8a-4b6c-9d0e-1f2a3b4c5d6e"));
	cr_assert_not(np_build_id_valid("000000000a"));
	cr_assert_not(np_build_id_valid("lock"));
	cr_assert_not(np_build_id_valid(NULL));
}

/* kazoo: __lock__(-?\d{10})$ anywhere in the name; the holder is the lowest
 * sequence, not the lowest name. */
Test(ids, lock_contender_sequences)
{
	long long seq = 0;

	cr_assert_eq(
	    np_lock_contender_seq("5f1e0b4a9f8d4e2a8b7c6d5e4f3a2b1c__lock__0000000003", &seq), 0);
	cr_assert_eq(seq, 3);
	cr_assert_eq(np_lock_contender_seq("__lock__0000000012", &seq), 0);
	cr_assert_eq(seq, 12);
	cr_assert_eq(np_lock_contender_seq("x__lock__-2147483648", &seq), 0);
	cr_assert_eq(seq, -2147483648LL);
	cr_assert_eq(np_lock_contender_seq("a__lock__b__lock__0000000004", &seq), 0);
	cr_assert_eq(seq, 4);
	/* what kazoo's pattern does not match */
	cr_assert_eq(np_lock_contender_seq("x__lock__000000003", &seq), -1);
	cr_assert_eq(np_lock_contender_seq("x__lock__00000000033", &seq), -1,
		     "11 digits: __lock__ is not right before the last 10");
}

Test(ids, lock_contender_non_matches)
{
	long long seq = 0;

	/* "__lock__" must sit right before the (optionally signed) 10 digits */
	cr_assert_eq(np_lock_contender_seq("x__lock__0000000003x", &seq), -1);
	cr_assert_eq(np_lock_contender_seq("x__rlock__0000000003", &seq), -1);
	cr_assert_eq(np_lock_contender_seq("x-lock-0000000003", &seq), -1);
	cr_assert_eq(np_lock_contender_seq("x__lock__-000000003", &seq), -1);
	cr_assert_eq(np_lock_contender_seq("x__lock__+0000000003", &seq), -1);
	cr_assert_eq(np_lock_contender_seq("0000000003", &seq), -1);
	cr_assert_eq(np_lock_contender_seq("", &seq), -1);
	cr_assert_eq(np_lock_contender_seq(NULL, &seq), -1);
}

Test(ids, sequence_suffix_of_component_names)
{
	long long seq = -1;

	cr_assert_eq(np_seq_suffix("nl01.example.com0000000003", &seq), 16);
	cr_assert_eq(seq, 3);
	cr_assert_eq(np_seq_suffix("0000000009", &seq), 0);
	cr_assert_eq(seq, 9);
	cr_assert_eq(np_seq_suffix("host0000000009", NULL), 4);
	cr_assert_eq(np_seq_suffix("host", &seq), -1);
	cr_assert_eq(np_seq_suffix("host00000000x1", &seq), -1);
	cr_assert_eq(np_seq_suffix(NULL, &seq), -1);
}

/* ---- generators ------------------------------------------------------------------ */

static void
assert_uuid4_hex(const char *u)
{
	size_t i;

	cr_assert_eq(strlen(u), 32, "%s", u);
	for (i = 0; i < 32; i++)
		cr_assert(strchr("0123456789abcdef", u[i]) != NULL, "%s", u);
	cr_assert_eq(u[12], '4', "version nibble: %s", u);
	cr_assert(strchr("89ab", u[16]) != NULL, "variant nibble: %s", u);
}

Test(gen, uuid4_hex)
{
	char a[33], b[33];

	cr_assert_eq(np_uuid4_hex(a), 0);
	cr_assert_eq(np_uuid4_hex(b), 0);
	assert_uuid4_hex(a);
	assert_uuid4_hex(b);
	cr_assert_str_neq(a, b);
	cr_assert(np_build_id_valid(a));
}

Test(gen, launcher_id)
{
	char b[NP_PATH_MAX], c[NP_PATH_MAX];
	const char *prefix = "nl01.example.com-PoolWorker.rax-dfw-main-";
	int rc = np_launcher_id(b, sizeof(b), "nl01.example.com", "rax-dfw", "main");

	cr_assert_eq(rc, (int)strlen(prefix) + 32);
	cr_assert_eq(strncmp(b, prefix, strlen(prefix)), 0, "%s", b);
	assert_uuid4_hex(b + strlen(prefix));
	np_launcher_id(c, sizeof(c), "nl01.example.com", "rax-dfw", "main");
	cr_assert_str_neq(b, c, "new on every worker start");
	cr_assert_eq(np_launcher_id(b, sizeof(b), NULL, "p", "q"), -1);
}
