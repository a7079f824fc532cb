/*
 * The /nodepool/images snapshot (lib/zk/imagetree.c) against a real ZooKeeper:
 * what it reads, that it creates nothing, build request states, export and
 * the import check.
 */
#include <criterion/criterion.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/zk/imagetree.h"
#include "protocol/paths.h"
#include "lib/ops/status.h"
#include "tests/support/testzk.h"
#include "lib/zk/zk.h"

static struct event_base *base;

static void
setup(void)
{
	base = event_base_new();
	cr_assert_not_null(base);
}

static void
teardown(void)
{
	event_base_free(base);
}

TestSuite(imagetree, .init = setup, .fini = teardown, .timeout = 120);

#define B1 "0123456789abcdef0123456789abcdef"
#define B2 "fedcba9876543210fedcba9876543210"

static void
put(struct zk *zk, const char *path, const char *data)
{
	int rc = zk_sync_create(zk, path, data, data ? (int)strlen(data) : 0, 0, 1, NULL);

	cr_assert(rc == ZOK, "create %s: %s", path, zk_strerror(rc));
}

static const char *build_json = "{\"state\": \"ready\", \"state_time\": 1700000000.5, "
				"\"builder\": \"nb01\", \"formats\": \"qcow2,raw\"}";
static const char *upload_json = "{\"state\": \"ready\", \"state_time\": 1700000001, "
				 "\"external_id\": \"img-1\", \"external_name\": \"ubuntu-1\"}";

Test(imagetree, reads_the_tree_and_creates_nothing)
{
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, NULL);
	struct imgtree *t = NULL;
	struct status_table *st;
	const struct imgtree_image *im;
	json_t *exp;
	char *s;
	int rc, n;
	char **names;

	rc = imgtree_load_sync(base, zk, 10, &t);
	cr_assert_eq(rc, ZOK);
	cr_assert_eq(t->nimages, 0);
	imgtree_free(t);
	/* nothing was created by reading */
	cr_assert_eq(zk_sync_exists(zk, "/nodepool", NULL), ZNONODE);

	put(zk, "/nodepool/images/ubuntu/builds/" B1, build_json);
	put(zk, "/nodepool/images/ubuntu/builds/" B1 "/providers/rax/images/0000000001",
	    upload_json);
	put(zk, "/nodepool/images/ubuntu/builds/" B1 "/providers/rax/images/lock", NULL);
	put(zk, "/nodepool/images/ubuntu/builds/" B1 "/providers/ovh/images/0000000003",
	    "not json");
	put(zk, "/nodepool/images/ubuntu/builds/lock", NULL);
	put(zk, "/nodepool/images/ubuntu/pause", NULL);
	put(zk, "/nodepool/images/debian/request-build", NULL);
	put(zk, "/nodepool/images/debian/builds/" B2, NULL); /* empty: unreadable */

	rc = imgtree_load_sync(base, zk, 10, &t);
	cr_assert_eq(rc, ZOK);
	cr_assert_eq(t->nimages, 2);
	cr_assert_str_eq(t->images[0].name, "debian"); /* sorted */
	im = imgtree_image(t, "ubuntu");
	cr_assert(im->paused && !im->has_request);
	cr_assert_eq(im->nbuilds, 1); /* "lock" is not a build */
	cr_assert_eq(im->builds[0].nproviders, 2);
	cr_assert_str_eq(im->builds[0].providers[0].name, "ovh");
	cr_assert_eq(im->builds[0].providers[1].nuploads, 1);
	cr_assert_null(imgtree_build_request(im));
	cr_assert_str_eq(imgtree_build_request(imgtree_image(t, "debian")), "pending");

	st = status_table_new(STATUS_IMAGE_LIST);
	status_image_list(t, st);
	cr_assert_eq(status_table_rows(st), 1); /* the malformed upload is skipped */
	s = status_json(st);
	cr_assert_str_eq(s, "[{\"id\": \"" B1 "\", \"upload_id\": \"0000000001\", "
			    "\"provider\": \"rax\", \"image\": \"ubuntu\", \"external_name\": "
			    "\"ubuntu-1\", \"external_id\": \"img-1\", \"state\": \"ready\", "
			    "\"age\": 1700000001, \"service\": \"serving\"}]");
	free(s);
	status_table_free(st);
	st = status_table_new(STATUS_DIB_IMAGE_LIST);
	status_dib_image_list(t, st);
	s = status_json(st);
	cr_assert_str_eq(s, "[{\"id\": \"ubuntu-" B1 "\", \"image\": \"ubuntu\", \"builder\": "
			    "\"nb01\", \"formats\": [\"qcow2\", \"raw\"], \"state\": \"paused\", "
			    "\"age\": 1700000000}]");
	free(s);
	status_table_free(st);

	exp = imgtree_export(t);
	cr_assert_eq(json_object_size(exp), 5);
	cr_assert_str_eq(json_string_value(json_object_get(exp, "/nodepool/images/ubuntu/pause")),
			 "");
	cr_assert_str_eq(
	    json_string_value(json_object_get(exp, "/nodepool/images/ubuntu/builds/" B1)),
	    build_json);
	cr_assert_str_eq(
	    json_string_value(json_object_get(exp, "/nodepool/images/debian/builds/" B2)), "");
	json_decref(exp);
	imgtree_free(t);

	/* still no provider or lock dirs where there were none */
	rc = zk_sync_children(zk, "/nodepool/images/debian/builds/" B2, &n, &names);
	cr_assert_eq(rc, ZOK);
	cr_assert_eq(n, 0);
	zk_strings_free(n, names);

	/* a builder holds the build lock and made a new build: building */
	{
		struct zk_lock *l =
		    zk_lock_new(zk, "/nodepool/images/debian/builds/lock", "nb01", 0);
		cr_assert_eq(zk_lock_sync_acquire(l, 5), ZOK);
		rc = imgtree_load_sync(base, zk, 10, &t);
		cr_assert_eq(rc, ZOK);
		/* the lock dir is newer than the only build: still pending */
		cr_assert_str_eq(imgtree_build_request(imgtree_image(t, "debian")), "pending");
		imgtree_free(t);
		put(zk, "/nodepool/images/debian/builds/" B1, build_json);
		rc = imgtree_load_sync(base, zk, 10, &t);
		cr_assert_str_eq(imgtree_build_request(imgtree_image(t, "debian")), "building");
		imgtree_free(t);
		zk_lock_sync_release(l);
		zk_lock_free(l);
	}
	zk_free(zk);
}

static void
count_load(int rc, struct imgtree *tree, void *arg)
{
	(*(int *)arg)++;
	imgtree_free(tree);
}

/* A cancelled load never calls back (its replies, arriving later, are
 * dropped), and the session goes on serving the next load in full. */
Test(imagetree, cancel_before_completion)
{
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, NULL);
	struct imgtree_load *l;
	struct imgtree *t = NULL;
	int i, calls = 0;

	for (i = 0; i < 5; i++) {
		char path[128];
		snprintf(path, sizeof(path), "/nodepool/images/img%d/builds/%s", i, B1);
		put(zk, path, build_json);
	}
	l = imgtree_load_start(zk, count_load, &calls);
	imgtree_load_cancel(l);
	testzk_run_for(base, 0.3);
	cr_assert_eq(calls, 0, "a cancelled load called back");
	cr_assert_eq(imgtree_load_sync(base, zk, 10, &t), ZOK);
	cr_assert_eq(t->nimages, 5);
	cr_assert_str_eq(t->images[4].name, "img4");
	cr_assert_eq(t->images[4].nbuilds, 1);
	imgtree_free(t);
	cr_assert_eq(calls, 0);
	zk_free(zk);
}

static int
check(const char *json_text, char *err, size_t errlen)
{
	json_t *j = json_loads(json_text, 0, NULL);
	int rc;

	cr_assert_not_null(j, "%s", json_text);
	rc = imgtree_import_check(j, err, errlen);
	json_decref(j);
	return rc;
}

Test(imagetree, import_check)
{
	char err[512];

	cr_assert_eq(check("{}", err, sizeof(err)), 0);
	cr_assert_eq(check("{\"/nodepool/images/u/pause\": \"\", \"/nodepool/images/u/builds/" B1
			   "\": \"{\\\"state\\\": \\\"ready\\\"}\", \"/nodepool/images/u/builds/" B1
			   "/providers/p/images/0000000004\": \"\"}",
			   err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(check("[]", err, sizeof(err)), -1);
	cr_assert_eq(check("{\"/nodepool/nodes/0000000001\": \"\"}", err, sizeof(err)), -1);
	cr_assert(strstr(err, "not an image pause flag") != NULL);
	cr_assert_eq(check("{\"/nodepool/images/u/pause\": 1}", err, sizeof(err)), -1);
	cr_assert(strstr(err, "not a string") != NULL);
	cr_assert_eq(check("{\"/nodepool/images/u/builds/nothex\": \"\"}", err, sizeof(err)), -1);
	cr_assert_eq(check("{\"/nodepool/images/u/builds/" B1 "\": \"[1]\"}", err, sizeof(err)),
		     -1);
	cr_assert_eq(check("{\"/nodepool/images/u/builds/" B1 "/providers/p/images/12\": \"\"}",
			   err, sizeof(err)),
		     -1);
	cr_assert_eq(check("{\"/nodepool/images/u/builds/" B1
			   "/providers/p/images/0099999999\": \"\"}",
			   err, sizeof(err)),
		     -1);
	cr_assert_eq(check("{\"/nodepool/images/u/builds/lock\": \"\"}", err, sizeof(err)), -1);
}
