/*
 * The OpenStack provider schemas the fake driver's schema builds on
 * (drivers/fake/traits.c: upstream's fake driver is its OpenStack driver
 * against an in-process cloud). Defined in drivers/openstack/traits.c.
 */
#ifndef NP_DRIVERS_OS_TRAITS_H
#define NP_DRIVERS_OS_TRAITS_H

#include "lib/config/schema.h"

/* a pool label's keys, without the label's groups of keys */
extern const struct np_cfg_schema openstack_label_keys;
/* a pool, a provider diskimages[] entry, the whole provider section */
extern const struct np_cfg_schema openstack_pool;
extern const struct np_cfg_schema openstack_provider_diskimage;
extern const struct np_cfg_schema openstack_provider;

#endif
