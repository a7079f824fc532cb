/*
 * The state-machine framework's diskimage upload cache
 * (drivers/statemachine/images.c) against a real ZooKeeper: the most
 * recent READY upload per image for one provider, uploads in other states
 * and of other providers ignored, the set of known uploads for leak
 * cleanup, and changes found through the watch, without another walk.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <event2/event.h>

#include "protocol/model.h"
#include "protocol/paths.h"
#include "drivers/statemachine/statemachine.h"
#include "tests/support/testzk.h"

static struct event_base *base;
static struct zk *zk;

static void
setup(void)
{
	base = event_base_new();
	zk = testzk_connect(base, 0, NULL, NULL, NULL);
}

static void
teardown(void)
{
	zk_free(zk);
	event_base_free(base);
}

TestSuite(sm_images, .init = setup, .fini = teardown, .timeout = 60);

/* Write an upload record. */
static void
upload(const char *image, const char *build, const char *provider, const char *id, int state,
       const char *eid, double state_time)
{
	struct np_image_upload *u = np_image_upload_new();
	char path[512];
	char *json;
	size_t len;

	np_image_upload_set_state(u, state);
	u->state_time = state_time;
	u->external_id = eid ? strdup(eid) : NULL;
	json = np_image_upload_encode(u, &len);
	cr_assert_gt(np_path_upload(path, sizeof(path), image, build, provider, id), 0);
	cr_assert_eq(zk_sync_create(zk, path, json, (int)len, 0, 1, NULL), ZOK, "%s", path);
	free(json);
	np_image_upload_free(u);
}

static void
wait_walks(struct sm_images *s, int n)
{
	int i;

	while (sm_images_walks(s) < n) {
		for (i = 0; i < 100 && sm_images_walks(s) < n; i++)
			testzk_run_for(base, 0.02);
		cr_assert_geq(sm_images_walks(s), n, "walk %d did not complete", n);
	}
}

Test(sm_images, latest_ready_upload_of_this_provider)
{
	struct sm_images *s;
	char eid[128], path[512];

	upload("debian", "0000000001", "sim", "0000000001", NP_UPLOAD_READY, "img-old", 1000);
	upload("debian", "0000000002", "sim", "0000000002", NP_UPLOAD_READY, "img-new", 2000);
	upload("debian", "0000000002", "sim", "0000000003", NP_UPLOAD_UPLOADING, "img-partial",
	       3000);
	upload("debian", "0000000002", "sim", "0000000004", NP_UPLOAD_FAILED, "img-failed", 4000);
	upload("debian", "0000000003", "other", "0000000005", NP_UPLOAD_READY, "img-other", 5000);
	upload("fedora", "0000000001", "other", "0000000001", NP_UPLOAD_READY, "f-other", 5000);

	s = sm_images_new(zk, base, "sim");
	wait_walks(s, 1);
	cr_assert_eq(sm_images_latest(s, "debian", eid, sizeof(eid), path, sizeof(path)), 0);
	cr_assert_str_eq(eid, "img-new");
	cr_assert_str_eq(
	    path, "/nodepool/images/debian/builds/0000000002/providers/sim/images/0000000002");
	cr_assert_eq(sm_images_latest(s, "fedora", eid, sizeof(eid), path, sizeof(path)), -1,
		     "another provider's upload is not ours");
	cr_assert_eq(sm_images_latest(s, "nope", eid, sizeof(eid), path, sizeof(path)), -1);

	/* every upload of ours, any state, for leak cleanup */
	cr_assert_eq(sm_images_known_upload(s, "0000000002", "0000000004"), 1);
	cr_assert_eq(sm_images_known_upload(s, "0000000001", "0000000001"), 1);
	cr_assert_eq(sm_images_known_upload(s, "0000000003", "0000000005"), 0);
	cr_assert_eq(sm_images_known_upload(s, "0000000009", "0000000009"), 0);
	sm_images_free(s);
}

/* Run the loop until the latest READY upload of image is eid (NULL: none). */
static void
wait_latest(struct sm_images *s, const char *image, const char *eid)
{
	char got[128], path[512];
	int i, rc = -1;

	for (i = 0; i < 250; i++) {
		rc = sm_images_latest(s, image, got, sizeof(got), path, sizeof(path));
		if (eid == NULL ? rc == -1 : rc == 0 && strcmp(got, eid) == 0)
			return;
		testzk_run_for(base, 0.02);
	}
	cr_assert_fail("latest upload of %s: rc %d %s, want %s", image, rc, rc == 0 ? got : "",
		       eid ? eid : "none");
}

Test(sm_images, changes_found_through_the_watch_without_a_walk)
{
	struct sm_images *s;
	char path[512];

	s = sm_images_new(zk, base, "sim");
	wait_walks(s, 1);
	cr_assert_eq(sm_images_known_upload(s, "0000000001", "0000000001"), 0);
	wait_latest(s, "debian", NULL);
	/* a new upload, then a newer one: each is seen as ZooKeeper reports it */
	upload("debian", "0000000001", "sim", "0000000001", NP_UPLOAD_READY, "img-1", 1000);
	wait_latest(s, "debian", "img-1");
	upload("debian", "0000000002", "sim", "0000000002", NP_UPLOAD_UPLOADING, NULL, 2000);
	testzk_run_for(base, 0.2);
	wait_latest(s, "debian", "img-1");
	cr_assert_eq(sm_images_known_upload(s, "0000000002", "0000000002"), 1);
	cr_assert_eq(
	    np_path_upload(path, sizeof(path), "debian", "0000000002", "sim", "0000000002") > 0, 1);
	cr_assert_eq(zk_sync_delete(zk, path, -1, 0), ZOK);
	upload("debian", "0000000002", "sim", "0000000003", NP_UPLOAD_READY, "img-2", 2000);
	wait_latest(s, "debian", "img-2");
	cr_assert_eq(sm_images_known_upload(s, "0000000002", "0000000002"), 0,
		     "deleted: forgotten");
	/* image-delete marks the newest deleting: the previous one serves */
	{
		struct np_image_upload *u = np_image_upload_new();
		char *json;
		size_t len;

		np_image_upload_set_state(u, NP_UPLOAD_DELETING);
		u->external_id = strdup("img-2");
		json = np_image_upload_encode(u, &len);
		cr_assert_gt(
		    np_path_upload(path, sizeof(path), "debian", "0000000002", "sim", "0000000003"),
		    0);
		cr_assert_eq(zk_sync_set(zk, path, json, (int)len, -1, NULL), ZOK);
		free(json);
		np_image_upload_free(u);
	}
	wait_latest(s, "debian", "img-1");
	cr_assert_eq(sm_images_walks(s), 1, "no walk was needed");
	sm_images_free(s);
}

Test(sm_images, before_the_first_walk_nothing_is_judged)
{
	struct sm_images *s = sm_images_new(zk, base, "sim");

	cr_assert_eq(sm_images_known_upload(s, "0000000001", "0000000001"), -1);
	sm_images_free(s); /* with reads in flight: no callback follows */
	testzk_run_for(base, 0.2);
}
