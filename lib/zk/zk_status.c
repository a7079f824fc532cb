/* A session's state for IPC STATUS (zk_status.h). */
#include "lib/zk/zk_status.h"

int
zk_ipc_state(const struct zk *zk, enum zk_event last)
{
	if (zk == NULL)
		return IPC_ZK_CONNECTING;
	if (zk_is_connected(zk))
		return IPC_ZK_CONNECTED;
	switch (last) {
	case ZK_EV_SUSPENDED:
		return IPC_ZK_SUSPENDED;
	case ZK_EV_EXPIRED:
		return IPC_ZK_EXPIRED;
	default:
		return IPC_ZK_CONNECTING;
	}
}
