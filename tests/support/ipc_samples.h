/*
 * Sample IPC messages for the unit tests and the fuzz seed generator: one
 * filled message per catalogue type, in two variants.
 */
#ifndef NP_TEST_IPC_SAMPLES_H
#define NP_TEST_IPC_SAMPLES_H

#include "protocol/ipc.h"

/* Number of variants ipc_sample() knows. */
#define IPC_SAMPLE_VARIANTS 2

/*
 * Fill *m (initialised here; the caller ipc_msg_clear()s it) with a sample
 * of type. variant 0: every field set, lists of several items, negative
 * zk_session, non-nil last_error. variant 1: empty lists, nil last_error,
 * zero counters, other enum values.
 */
void ipc_sample(enum ipc_type type, int variant, struct ipc_msg *m);

#endif
