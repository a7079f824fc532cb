/*
 * lib/zk/zk_status: the ZooKeeper state a process reports in its STATUS
 * (what `nodepoolctl status` shows), for no session yet, a live session
 * and one whose connection a proxy cut, against a real ZooKeeper.
 */
#include <criterion/criterion.h>
#include <event2/event.h>

#include "tests/support/testzk.h"
#include "lib/zk/zk_status.h"

TestSuite(zk_status, .timeout = 120);

Test(zk_status, no_session_yet_is_connecting)
{
	cr_assert_eq(zk_ipc_state(NULL, ZK_EV_CONNECTED), IPC_ZK_CONNECTING);
	cr_assert_eq(zk_ipc_state(NULL, ZK_EV_EXPIRED), IPC_ZK_CONNECTING);
}

Test(zk_status, a_live_session_is_connected_whatever_was_heard_before)
{
	struct event_base *base = event_base_new();
	struct zk *zk = testzk_connect(base, 0, NULL, NULL, NULL);

	cr_assert_eq(zk_ipc_state(zk, ZK_EV_CONNECTED), IPC_ZK_CONNECTED);
	cr_assert_eq(zk_ipc_state(zk, ZK_EV_SUSPENDED), IPC_ZK_CONNECTED);
	zk_free(zk);
	event_base_free(base);
}

static int
disconnected(void *arg)
{
	return !zk_is_connected(arg);
}

Test(zk_status, a_lost_connection_reports_the_last_event)
{
	struct event_base *base = event_base_new();
	const char *path;
	struct testzk_proxy *px;
	struct zk *zk;

	testzk_chroot(0, &path);
	px = testzk_proxy_start(testzk_hosts(0));
	zk = testzk_session(base, testzk_proxy_hosts(px, path), 0, NULL, NULL);
	testzk_proxy_refuse(px, 1);
	testzk_proxy_drop(px);
	cr_assert(testzk_run_until(base, disconnected, zk, 15), "the cut was not seen");
	cr_assert_eq(zk_ipc_state(zk, ZK_EV_SUSPENDED), IPC_ZK_SUSPENDED);
	cr_assert_eq(zk_ipc_state(zk, ZK_EV_EXPIRED), IPC_ZK_EXPIRED);
	cr_assert_eq(zk_ipc_state(zk, ZK_EV_AUTH_FAILED), IPC_ZK_CONNECTING);
	zk_free(zk);
	testzk_proxy_stop(px);
	event_base_free(base);
}
