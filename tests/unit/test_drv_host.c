/*
 * The driver host services (drivers/host.h): the drv_* functions a driver
 * calls dispatch to the ops the host registered, pass the host's handle
 * through unchanged, and give host.h's documented answer for a slot the
 * host leaves NULL; the launcher fills every slot, the builder's upload
 * workers only the loop, the provider's name and its config.
 */
#include <errno.h>
#include <string.h>

#include <criterion/criterion.h>
#include <event2/event.h>

#include "builder/builder.h"
#include "drivers/host.h"
#include "protocol/model.h"
#include "worker/launcher.h"

static void
no_host(void)
{
	drv_host_register(NULL);
}

TestSuite(drv_host, .init = no_host, .fini = no_host);

struct reg_seen {
	int calls;
	const char *id;
	int unknown;
};

static void
reg_done(const char *node_id, int unknown, void *arg)
{
	struct reg_seen *r = arg;

	r->calls++;
	r->id = node_id;
	r->unknown = unknown;
}

static struct np_node *
a_node(void)
{
	struct np_node *n = np_node_new();

	n->id = strdup("0000000042");
	n->hostname = strdup("static-host-1");
	return n;
}

/* The answers of a host with no session, no nodes, no pools, no launches
 * (every slot NULL), as host.h documents them. Node ownership is honoured:
 * under ASan a node not freed is a reported leak. */
static void
assert_null_answers(struct drv_host *lc)
{
	static const struct np_node *dummy;
	const struct np_node **nodes = &dummy;
	struct reg_seen seen = {0, "not called", -1};
	struct drv_launch l = {0};
	struct drv_delete d = {0};
	char who[16] = "untouched";

	cr_assert_null(drv_zk(lc));
	cr_assert_eq(drv_provider_nodes(lc, &nodes), 0);
	cr_assert_null(nodes);
	cr_assert_eq(drv_node_unreadable(lc, "0000000042"), 0);
	cr_assert_eq(drv_provider_peers(lc, who, sizeof(who)), 0);
	cr_assert_str_eq(who, "untouched");
	cr_assert_eq(drv_registration_round(lc), 1, "nobody else registers");
	cr_assert_eq(drv_duty_mine(lc, "leak/0000000042"), 1, "no peer acts on it");
	cr_assert_eq(drv_node_locked(lc, "0000000042"), 0);
	cr_assert_null(drv_node_get(lc, "0000000042"));
	nodes = &dummy;
	cr_assert_eq(drv_all_nodes(lc, &nodes), 0);
	cr_assert_null(nodes);
	cr_assert_null(drv_request_get(lc, "100-0000000042"));
	errno = 0;
	cr_assert_eq(drv_store_node(lc, &l), -1);
	cr_assert_eq(errno, EINVAL);
	drv_register_node(lc, a_node(), reg_done, &seen);
	cr_assert_eq(seen.calls, 1, "done is called before drv_register_node returns");
	cr_assert_null(seen.id);
	cr_assert_eq(seen.unknown, 0, "refused, certainly not written");
	drv_register_node(lc, a_node(), NULL, NULL);
	cr_assert_eq(drv_in_sync(lc), 1);
	cr_assert_eq(drv_sync_epoch(lc), 0);
	drv_update_node(lc, a_node());
	drv_deregister_node(lc, "0000000042");
	drv_launch_done(&l, DRV_LAUNCH_READY, NULL);
	drv_delete_done(&d, 1, NULL);
}

Test(drv_host, no_host_registered_every_service_answers_as_documented)
{
	cr_assert_null(drv_event_base(NULL));
	cr_assert_str_eq(drv_provider_name(NULL), "");
	cr_assert_null(drv_provider_config(NULL));
	assert_null_answers(NULL);
}

Test(drv_host, the_builder_upload_worker_offers_loop_name_and_config)
{
	struct event_base *base = event_base_new();
	json_t *cfg = json_pack("{s:s, s:s}", "name", "fake-cloud", "driver", "fake");
	char name[] = "fake-cloud";
	struct bld_host h = {{&h}, base, name, cfg};
	struct drv_host *lc = &h.handle;

	drv_host_register(&bld_host_ops);
	cr_assert_eq(drv_event_base(lc), base);
	cr_assert_str_eq(drv_provider_name(lc), "fake-cloud");
	cr_assert_eq(drv_provider_config(lc), cfg);
	/* everything else as a host without node records */
	assert_null_answers(lc);
	json_decref(cfg);
	event_base_free(base);
}

/* A host with two services: calls reach them with the handle unchanged;
 * the others keep their NULL answers. */
static struct drv_host *seen_lc;
static int in_sync_calls;

static int
test_in_sync(struct drv_host *lc)
{
	seen_lc = lc;
	in_sync_calls++;
	return 0;
}

static void
test_register(struct drv_host *lc, struct np_node *n,
	      void (*done)(const char *node_id, int unknown, void *arg), void *arg)
{
	seen_lc = lc;
	np_node_free(n);
	done("0000000007", 1, arg);
}

static const struct drv_host_ops partial_ops = {
    .in_sync = test_in_sync,
    .register_node = test_register,
};

Test(drv_host, registered_slots_get_the_calls_with_the_hosts_handle)
{
	int owner;
	struct drv_host handle = {&owner};
	struct drv_host *lc = &handle;
	struct reg_seen seen = {0, NULL, -1};

	drv_host_register(&partial_ops);
	cr_assert_eq(drv_in_sync(lc), 0);
	cr_assert_eq(in_sync_calls, 1);
	cr_assert_eq(seen_lc, lc);
	seen_lc = NULL;
	drv_register_node(lc, a_node(), reg_done, &seen);
	cr_assert_eq(seen_lc, lc);
	cr_assert_eq(seen.calls, 1);
	cr_assert_str_eq(seen.id, "0000000007");
	cr_assert_eq(seen.unknown, 1);
	cr_assert_eq(drv_sync_epoch(lc), 0, "a slot left NULL keeps its answer");
	drv_host_register(NULL);
	cr_assert_eq(drv_in_sync(lc), 1, "NULL unregisters");
	cr_assert_eq(in_sync_calls, 1);
}

/* The launcher implements every service: a new slot in host.h without
 * its launcher implementation fails here (every slot is a function
 * pointer, read one by one). */
Test(drv_host, the_launcher_fills_every_slot)
{
	typedef void (*fn)(void);
	size_t i, n = sizeof(struct drv_host_ops) / sizeof(fn);

	cr_assert_eq(sizeof(struct drv_host_ops) % sizeof(fn), 0);
	for (i = 0; i < n; i++) {
		fn f;
		memcpy(&f, (const char *)&lc_host_ops + i * sizeof(fn), sizeof(f));
		cr_assert_not_null(f, "slot %zu of lc_host_ops is NULL", i);
	}
}
