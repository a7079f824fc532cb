/*
 * The openstack driver (openstack.c): drv_openstack for the registry, and
 * its state-machine Adapter on its own, for the builder's uploads and for
 * tests that drive the adapter's slots directly.
 */
#ifndef NP_OPENSTACK_H
#define NP_OPENSTACK_H

#include "drivers/driver.h"
#include "drivers/statemachine/adapter.h"

extern const struct driver drv_openstack;

/* The adapter's slots (static storage). */
const struct sm_adapter_ops *os_adapter_ops(void);

#endif
