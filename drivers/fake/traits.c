/*
 * The fake driver's traits (lib/config/drvtraits.h): the provider schema
 * of our simulated cloud (see lib/config/config.h) and its defaults (no
 * host key checks, a configurable quota, qcow2 images).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "lib/config/drvtraits.h"
#include "drivers/openstack/os_traits.h"

/*
 * Upstream's fake driver is its OpenStack driver against an in-process cloud
 * (nodepool/driver/fake/config.py: FakeProviderConfig is an
 * OpenStackProviderConfig), so its configs carry OpenStack's keys. Ours takes
 * the OpenStack schema (drivers/openstack/traits.c), key for key (drivers/fake/fake.c gives each
 * its meaning in the simulated cloud), plus the simulation keys. Deliberately laxer than OpenStack:
 * `cloud` is optional, and a label needs neither min-ram/flavor-name nor an image (a simulated
 * server needs no flavor).
 */

static const struct np_cfg_schema fake_label = {
    .type = SC_MAP,
    .base = &openstack_label_keys,
    .keys = KEYS(OPT("instance-type", STR), OPT("cores", INT), OPT("ram", INT),
		 OPT("boot-delay", NONNEG), OPT("failure-rate", RATE01),
		 OPT("config-error", NONEMPTY_STR)),
    .groups = GROUPS(EXCL("diskimage", "cloud-image")),
};

static const struct np_cfg_schema fake_pool = {
    .type = SC_MAP,
    .base = &openstack_pool,
    .keys = KEYS(OPT("labels", SEQ(&fake_label))),
};

static const struct np_cfg_schema fake_provider_diskimage = {
    .type = SC_MAP,
    .base = &openstack_provider_diskimage,
    .keys = KEYS(OPT("username", STR)),
};

static const struct np_cfg_schema fake_provider = {
    .type = SC_MAP,
    .base = &openstack_provider,
    .keys = KEYS(
	OPT("cloud", STR), OPT("rate", COERCE_NONNEG), OPT("pools", SEQ(&fake_pool)),
	OPT("diskimages", SEQ(&fake_provider_diskimage)), OPT("host-key-checking", BOOL),
	OPT("boot-delay", NONNEG), OPT("delete-delay", NONNEG), OPT("api-delay", NONNEG),
	OPT("failure-rate", RATE01), OPT("boot-failures", NONNEG_INT),
	OPT("never-ready-rate", RATE01), OPT("create-error-rate", RATE01),
	OPT("quota-error-rate", RATE01), OPT("quota-errors", NONNEG_INT),
	OPT("delete-failure-rate", RATE01), OPT("leak-rate", RATE01),
	OPT("volume-leak-rate", RATE01),
	OPT("quota", MAP(OPT("instances", INT), OPT("cores", INT), OPT("ram", INT),
			 OPT("volumes", INT), OPT("volume-gb", INT))),
	OPT("report-quota", BOOL), OPT("unmanaged-instances", NONNEG_INT),
	OPT("fake-ssh-port", PORT), OPT("state-file", NONEMPTY_STR), OPT("seed", INT),
	OPT("instance-id-base", NONNEG_INT), OPT("cloud-availability-zones", SEQ(NONEMPTY_STR)),
	OPT("persistent", BOOL),
	OPT("flavors",
	    SEQ(MAP(REQ("name", NONEMPTY_STR), REQ("cores", NONNEG_INT), REQ("ram", NONNEG_INT)))),
	OPT("cloud-networks", SEQ(NONEMPTY_STR)), OPT("image-dir", NONEMPTY_STR),
	OPT("upload-delay", NONNEG), OPT("upload-failures", NONNEG_INT), OPT("image-format", STR)),
};

const struct np_drv_traits np_traits_fake = {
    .name = "fake",
    .schema = &fake_provider,
    .flags = NP_DRV_MANAGES_IMAGES | NP_DRV_PROVIDER_QUOTA | NP_DRV_NO_HOST_KEY_CHECK,
    .pool_hkc = NP_DRV_POOL_HKC_PROVIDER,
    .boot_timeout = 60,
    .image_format = "qcow2",
};
