/*
 * The `fake` driver's simulation and fault keys (lib/config/config.h,
 * drivers/fake/fake.c) are validated strictly: right types, ranges,
 * unknown keys refused, every error reported with its position.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "lib/config/config.h"

static char *
errors_of(const char *yaml, int *ok)
{
	struct np_config *cfg = NULL;
	struct np_cfg_errors *errs = NULL;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	*ok = np_cfg_load_buffer("f.yaml", yaml, strlen(yaml), NULL, NULL, 0, &cfg, &errs) == 0;
	np_cfg_free(cfg);
	f = open_memstream(&buf, &len);
	np_cfg_errors_print(errs, f);
	fclose(f);
	np_cfg_errors_free(errs);
	return buf;
}

#define assert_has(text, needle)                                                                   \
	cr_assert(strstr((text), (needle)) != NULL, "expected \"%s\" in:\n%s", (needle), (text))

Test(fake_config, every_key_accepted)
{
	int ok;
	char *t =
	    errors_of("labels: [{name: small}, {name: broken}]\n"
		      "providers:\n"
		      "  - name: sim\n"
		      "    driver: fake\n"
		      "    boot-delay: 0.5\n"
		      "    delete-delay: 1\n"
		      "    api-delay: 0.01\n"
		      "    failure-rate: 0.1\n"
		      "    boot-failures: 2\n"
		      "    never-ready-rate: 0\n"
		      "    create-error-rate: 0.2\n"
		      "    quota-error-rate: 1\n"
		      "    quota-errors: 3\n"
		      "    delete-failure-rate: 0.5\n"
		      "    leak-rate: 0.01\n"
		      "    volume-leak-rate: 1\n"
		      "    quota: {instances: 10, cores: 40, ram: 81920}\n"
		      "    report-quota: false\n"
		      "    unmanaged-instances: 2\n"
		      "    fake-ssh-port: 2222\n"
		      "    state-file: /tmp/cloud.json\n"
		      "    seed: 42\n"
		      "    persistent: true\n"
		      "    rate: 5\n"
		      "    cloud-availability-zones: [az-a, az-b]\n"
		      "    pools:\n"
		      "      - name: main\n"
		      "        availability-zones: [az-b]\n"
		      "        labels:\n"
		      "          - {name: small, cores: 2, ram: 2048, console-log: true,\n"
		      "             host-key-checking: true, boot-delay: 1, failure-rate: 0}\n"
		      "          - {name: broken, config-error: 'no such instance type'}\n",
		      &ok);
	cr_assert(ok, "%s", t);
	free(t);
}

Test(fake_config, bad_values_reported_with_positions)
{
	int ok;
	char *t = errors_of(
	    "labels: [{name: small}]\n"
	    "providers:\n"
	    "  - name: sim\n"
	    "    driver: fake\n"
	    "    api-delay: -1\n"
	    "    boot-failures: -2\n"
	    "    never-ready-rate: 1.5\n"
	    "    quota-errors: many\n"
	    "    leak-rate: 2\n"
	    "    report-quota: maybe\n"
	    "    fake-ssh-port: 70000\n"
	    "    state-file: ''\n"
	    "    persistent: yes-please\n"
	    "    unmanaged-instances: 1.5\n"
	    "    leak-everything: true\n"
	    "    cloud-availability-zones: [az-a, '']\n"
	    "    pools:\n"
	    "      - name: main\n"
	    "        labels: [{name: small, console-log: 1}, {name: b, config-error: ''},\n"
	    "                 {name: c, config-error: [x]}]\n",
	    &ok);
	cr_assert_not(ok);
	assert_has(t, "f.yaml:5:16: providers[0].api-delay: must not be negative");
	assert_has(t, "f.yaml:6:20: providers[0].boot-failures: must not be negative");
	assert_has(t, "f.yaml:7:23: providers[0].never-ready-rate: must be between 0 and 1");
	assert_has(t, "providers[0].quota-errors: expected an integer");
	assert_has(t, "providers[0].leak-rate: must be between 0 and 1");
	assert_has(t, "providers[0].report-quota: expected a boolean");
	assert_has(t, "providers[0].fake-ssh-port: must be a port number (1-65535)");
	assert_has(t, "providers[0].state-file: must not be empty");
	assert_has(t, "providers[0].persistent: expected a boolean");
	assert_has(t, "providers[0].unmanaged-instances: expected an integer");
	assert_has(t, "providers[0].leak-everything: extra keys not allowed");
	assert_has(t, "providers[0].cloud-availability-zones[1]: must not be empty");
	assert_has(t, "providers[0].pools[0].labels[0].console-log: expected a boolean");
	assert_has(t, "providers[0].pools[0].labels[1].config-error: must not be empty");
	assert_has(t, "providers[0].pools[0].labels[2].config-error: expected a string");
	free(t);
}

/* Upstream's fake driver is its OpenStack driver: every OpenStack provider,
 * pool, label, diskimage and cloud-image key is a fake key too. */
Test(fake_config, openstack_keys_accepted)
{
	int ok;
	char *t = errors_of(
	    "labels: [{name: small}, {name: bfv}, {name: bare}]\n"
	    "diskimages: [{name: img}]\n"
	    "providers:\n"
	    "  - name: sim\n"
	    "    driver: fake\n"
	    "    cloud: mycloud\n"
	    "    region-name: r1\n"
	    "    rate: '0.0001'\n"
	    "    nodepool-id: legacy\n"
	    "    image-upload-timeout: 600\n"
	    "    clean-floating-ips: true\n"
	    "    port-cleanup-interval: 60\n"
	    "    post-upload-hook: /bin/true\n"
	    "    flavors: [{name: m1.small, cores: 1, ram: 2048}]\n"
	    "    cloud-networks: [public-net]\n"
	    "    quota: {volumes: 10, volume-gb: 500}\n"
	    "    diskimages: [{name: img, config-drive: true, meta: {a: b}, pause: false,\n"
	    "                  connection-type: ssh, connection-port: 22, username: zuul}]\n"
	    "    cloud-images: [{name: deb, image-name: Debian, config-drive: false}]\n"
	    "    pools:\n"
	    "      - name: main\n"
	    "        networks: [public-net]\n"
	    "        auto-floating-ip: false\n"
	    "        security-groups: [default]\n"
	    "        max-volumes: 4\n"
	    "        max-volume-gb: 200\n"
	    "        labels:\n"
	    "          - {name: small, diskimage: img, flavor-name: m1.small, key-name: k,\n"
	    "             networks: [public-net], userdata: x, instance-properties: {a: b},\n"
	    "             dynamic-instance-properties: {t: '{request.tenant_name}'}}\n"
	    "          - {name: bfv, cloud-image: deb, min-ram: 2048, boot-from-volume: true,\n"
	    "             volume-size: 80}\n"
	    "          - {name: bare}\n"
	    "      - name: empty\n"
	    "  - name: sim2\n"
	    "    driver: fake\n",
	    &ok);
	cr_assert(ok, "%s", t);
	free(t);
}

Test(fake_config, openstack_keys_checked)
{
	int ok;
	char *t = errors_of("labels: [{name: small}]\n"
			    "providers:\n"
			    "  - name: sim\n"
			    "    driver: fake\n"
			    "    rate: -1\n"
			    "    cloud: [x]\n"
			    "    flavors: [{name: m1, cores: 1}]\n"
			    "    cloud-images: [{name: a, image-id: x, image-name: y}]\n"
			    "    pools:\n"
			    "      - name: main\n"
			    "        networks: public\n"
			    "        labels: [{name: small, boot-from-volume: 1, min-ram: lots}]\n",
			    &ok);
	cr_assert_not(ok);
	assert_has(t, "providers[0].rate: must not be negative");
	assert_has(t, "providers[0].cloud: expected a string");
	assert_has(t, "providers[0].flavors[0].ram: required key not provided");
	assert_has(t, "providers[0].cloud-images[0].image-name: 'image-id' and 'image-name' are "
		      "mutually exclusive");
	assert_has(t, "providers[0].pools[0].networks: expected a list");
	assert_has(t, "providers[0].pools[0].labels[0].boot-from-volume: expected a boolean");
	assert_has(t, "providers[0].pools[0].labels[0].min-ram: expected an integer");
	free(t);
}
