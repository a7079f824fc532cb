/*
 * A ZooKeeper session's state in the terms of an IPC STATUS message
 * (protocol/ipc_types.h IPC_ZK_*), as every process nodepoold forks reports
 * it to nodepoold and nodepoolctl shows it.
 */
#ifndef NP_ZK_STATUS_H
#define NP_ZK_STATUS_H

#include "protocol/ipc.h"
#include "lib/zk/zk.h"

/*
 * zk: the process's session, or NULL (none yet); last: the last session
 * event it heard. IPC_ZK_CONNECTED while connected; otherwise
 * IPC_ZK_SUSPENDED or IPC_ZK_EXPIRED after that event, IPC_ZK_CONNECTING
 * before any session or after any other event.
 */
int zk_ipc_state(const struct zk *zk, enum zk_event last);

#endif
