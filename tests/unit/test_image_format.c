/*
 * The drivers' image_format slot (drivers/driver.h), as nodepool-builder
 * asks it: every driver that uploads answers for itself; the config's
 * image-format (or its traits' default) for aws and fake; for openstack
 * the provider's image-format, else the cloud's image_format in
 * clouds.yaml, read again on every call (an edited file counts), and a
 * reason when the cloud cannot be found. And the `validate` keys
 * (validation before service), checked as `nodepoold -n` checks them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "lib/config/config.h"
#include "drivers/driver.h"

static struct np_config *
load(const char *yaml)
{
	struct np_cfg_errors *errs = NULL;
	struct np_config *cfg = NULL;

	np_cfg_load_buffer("t.yaml", yaml, strlen(yaml), NULL, NULL, 0, &cfg, &errs);
	if (errs != NULL)
		np_cfg_errors_print(errs, stderr);
	cr_assert_null(errs, "config errors");
	cr_assert_not_null(cfg);
	return cfg;
}

static int
ask(const struct np_config *cfg, const char *provider, char *out, size_t outlen, char *err,
    size_t errlen)
{
	const struct np_provider *p = np_cfg_provider(cfg, provider);
	const struct driver *d = driver_lookup(p->driver);

	cr_assert_not_null(d->image_format, "driver %s", p->driver);
	return d->image_format(p, out, outlen, err, errlen);
}

static void
write_clouds(const char *path, const char *format)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f);
	fprintf(f,
		"clouds:\n  simc:\n    auth:\n      auth_url: http://127.0.0.1:1/v3\n"
		"      username: u\n      password: p\n      project_name: x\n"
		"    region_name: R\n%s%s%s",
		format ? "    image_format: " : "", format ? format : "", format ? "\n" : "");
	fclose(f);
}

Test(image_format, every_uploading_driver_answers_for_itself)
{
	static const char *const uploaders[] = {"openstack", "aws", "fake"};
	size_t i;

	for (i = 0; i < sizeof(uploaders) / sizeof(*uploaders); i++)
		cr_assert_not_null(driver_lookup(uploaders[i])->image_format,
				   "driver %s uploads but names no format", uploaders[i]);
}

Test(image_format, config_and_clouds_yaml)
{
	char clouds[] = "/tmp/np-test-clouds.XXXXXX";
	char out[64], err[300];
	int fd = mkstemp(clouds);
	struct np_config *cfg;

	cr_assert_geq(fd, 0);
	close(fd);
	setenv("OS_CLIENT_CONFIG_FILE", clouds, 1);
	cfg =
	    load("labels: [{name: l}]\n"
		 "providers:\n"
		 "  - {name: ec2, driver: aws, region-name: us-east-1,\n"
		 "     pools: [{name: p, labels: [{name: l, instance-type: t3.small, key-name: k, "
		 "cloud-image: c}]}],\n"
		 "     cloud-images: [{name: c, image-id: ami-1, username: u}]}\n"
		 "  - {name: ec2vhd, driver: aws, region-name: us-east-1, image-format: vhd,\n"
		 "     pools: [{name: p, labels: [{name: l, instance-type: t3.small, key-name: k, "
		 "cloud-image: c}]}],\n"
		 "     cloud-images: [{name: c, image-id: ami-1, username: u}]}\n"
		 "  - {name: sim, driver: fake, pools: [{name: p, labels: [{name: l}]}]}\n"
		 "  - {name: os, driver: openstack, cloud: simc,\n"
		 "     pools: [{name: p, labels: [{name: l, flavor-name: f, cloud-image: c}]}],\n"
		 "     cloud-images: [{name: c}]}\n"
		 "  - {name: gone, driver: openstack, cloud: nosuch,\n"
		 "     pools: [{name: p, labels: [{name: l, flavor-name: f, cloud-image: c}]}],\n"
		 "     cloud-images: [{name: c}]}\n");

	cr_assert_eq(ask(cfg, "ec2", out, sizeof(out), err, sizeof(err)), 0);
	cr_assert_str_eq(out, "raw");
	cr_assert_eq(ask(cfg, "ec2vhd", out, sizeof(out), err, sizeof(err)), 0);
	cr_assert_str_eq(out, "vhd");
	cr_assert_eq(ask(cfg, "sim", out, sizeof(out), err, sizeof(err)), 0);
	cr_assert_str_eq(out, "qcow2");

	write_clouds(clouds, NULL);
	cr_assert_eq(ask(cfg, "os", out, sizeof(out), err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(out, "qcow2");
	write_clouds(clouds, "vhd"); /* edited: no restart needed */
	cr_assert_eq(ask(cfg, "os", out, sizeof(out), err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(out, "vhd");
	cr_assert_eq(ask(cfg, "gone", out, sizeof(out), err, sizeof(err)), -1);
	cr_assert(strstr(err, "nosuch") != NULL, "%s", err);

	np_cfg_free(cfg);
	unlink(clouds);
}

/* `validate` (validation before service) on a diskimage and on a provider's
 * diskimages entry: booleans, checked as `nodepoold -n` checks. */
Test(image_format, validate_keys)
{
	struct np_cfg_errors *errs = NULL;
	struct np_config *cfg = NULL;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	static const char bad[] =
	    "labels: [{name: l}]\n"
	    "diskimages: [{name: img, validate: maybe}]\n"
	    "providers:\n"
	    "  - {name: sim, driver: fake, diskimages: [{name: img, validate: 3}],\n"
	    "     pools: [{name: p, labels: [{name: l, diskimage: img}]}]}\n";

	cfg =
	    load("labels: [{name: l}, {name: m}]\n"
		 "diskimages: [{name: img, validate: true}, {name: other}]\n"
		 "providers:\n"
		 "  - {name: sim, driver: fake,\n"
		 "     diskimages: [{name: img, validate: false}, {name: other, validate: true}],\n"
		 "     pools: [{name: p, labels: [{name: l, diskimage: img},\n"
		 "                                {name: m, diskimage: other}]}]}\n");
	cr_assert_eq(np_cfg_diskimage(cfg, "img")->validate, 1);
	cr_assert_eq(np_cfg_diskimage(cfg, "other")->validate, 0);
	cr_assert_eq(np_cfg_provider(cfg, "sim")->diskimages[0].validate, 0);
	cr_assert_eq(np_cfg_provider(cfg, "sim")->diskimages[1].validate, 1);
	np_cfg_free(cfg);

	cfg = NULL;
	np_cfg_load_buffer("t.yaml", bad, strlen(bad), NULL, NULL, 0, &cfg, &errs);
	cr_assert_not_null(errs);
	f = open_memstream(&buf, &len);
	np_cfg_errors_print(errs, f);
	fclose(f);
	cr_assert(strstr(buf, "diskimages[0].validate") != NULL, "%s", buf);
	cr_assert(strstr(buf, "providers[0].diskimages[0].validate") != NULL, "%s", buf);
	free(buf);
	np_cfg_errors_free(errs);
	np_cfg_free(cfg);
}
