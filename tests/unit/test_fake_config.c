/*
 * The `fake` driver's simulation and fault keys (lib/config/config.h,
 * drivers/fake/fake.c) are validated strictly: right types, ranges,
 * unknown keys refused, every error reported with its position.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "config.h"

static char *
errors_of(const char *yaml, int *ok)
{
	struct np_config *cfg = NULL;
	struct np_config_errors *errs = NULL;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	*ok = np_config_load_buffer("f.yaml", yaml, strlen(yaml), NULL, NULL, 0, &cfg, &errs) == 0;
	np_config_free(cfg);
	f = open_memstream(&buf, &len);
	np_config_errors_print(errs, f);
	fclose(f);
	np_config_errors_free(errs);
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
