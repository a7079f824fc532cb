/*
 * OpenStack credentials as openstacksdk finds them (drivers/openstack/
 * os_cloud.h): where clouds.yaml and secure.yaml are looked for, which
 * cloud and region is picked, what Keystone is asked, which endpoint of
 * the catalog is used.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "drivers/openstack/os_cloud.h"

static char dir[64];

static void
write_file(const char *sub, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, sub);
	f = fopen(path, "w");
	cr_assert(f != NULL, "%s", path);
	fputs(text, f);
	fclose(f);
}

static void
setup(void)
{
	char path[256];

	snprintf(dir, sizeof(dir), "/tmp/os_cloud.XXXXXX");
	cr_assert(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/home/.config/openstack", dir);
	cr_assert(system(NULL) != 0);
	{
		char cmd[400];
		snprintf(cmd, sizeof(cmd), "mkdir -p %s %s/cwd", path, dir);
		cr_assert(system(cmd) == 0);
	}
	snprintf(path, sizeof(path), "%s/home", dir);
	setenv("HOME", path, 1);
	unsetenv("XDG_CONFIG_HOME");
	unsetenv("OS_CLIENT_CONFIG_FILE");
	unsetenv("OS_CLIENT_SECURE_FILE");
	snprintf(path, sizeof(path), "%s/cwd", dir);
	cr_assert(chdir(path) == 0);
}

static void
teardown(void)
{
	char cmd[200];

	cr_assert(chdir("/") == 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert(system(cmd) == 0);
}

TestSuite(os_cloud, .init = setup, .fini = teardown);

static const char *const CLOUDS = "clouds:\n"
				  "  rax:\n"
				  "    auth:\n"
				  "      auth_url: https://identity.example.com/v3/\n"
				  "      username: nodepool\n"
				  "      project_name: ci\n"
				  "      domain_name: Default\n"
				  "    regions: [DFW, {name: IAD}]\n"
				  "    interface: internal\n"
				  "    api_timeout: 30\n"
				  "    verify: false\n"
				  "    compute_endpoint_override: http://nova.example.com/v2.1\n";

Test(os_cloud, home_clouds_yaml_with_secure_yaml_merged)
{
	struct os_cloud c;
	char err[300];

	write_file("home/.config/openstack/clouds.yaml", CLOUDS);
	write_file("home/.config/openstack/secure.yaml",
		   "clouds: {rax: {auth: {password: s3cret}}}\n");
	cr_assert_eq(os_cloud_load("rax", "IAD", &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.password, "s3cret");
	cr_assert_str_eq(c.username, "nodepool");
	cr_assert_str_eq(c.region, "IAD");
	cr_assert_str_eq(c.interface, "internal");
	cr_assert_str_eq(c.user_domain_name, "Default");
	cr_assert_str_eq(c.project_domain_name, "Default");
	cr_assert_eq(c.api_timeout, 30);
	cr_assert_eq(c.verify, 0);
	cr_assert_eq(c.appcred, 0);
	cr_assert_str_eq(c.image_format, "qcow2");
	cr_assert_str_eq(json_string_value(json_object_get(c.overrides, "compute")),
			 "http://nova.example.com/v2.1");
	os_cloud_clear(&c);
}

Test(os_cloud, order_of_the_places)
{
	struct os_cloud c;
	char err[300], env[300];

	write_file("home/.config/openstack/clouds.yaml", CLOUDS);
	/* ./clouds.yaml wins over ~/.config */
	write_file("cwd/clouds.yaml", "clouds: {rax: {auth: {auth_url: http://cwd/v3, password: "
				      "p}, region_name: ORD}}\n");
	cr_assert_eq(os_cloud_load("rax", NULL, &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.auth_url, "http://cwd/v3");
	cr_assert_str_eq(c.region, "ORD"); /* region_name when the provider names none */
	os_cloud_clear(&c);
	/* OS_CLIENT_CONFIG_FILE wins over both */
	write_file("env.yaml", "clouds: {rax: {auth: {auth_url: http://env/v3, password: p}}}\n");
	snprintf(env, sizeof(env), "%s/env.yaml", dir);
	setenv("OS_CLIENT_CONFIG_FILE", env, 1);
	cr_assert_eq(os_cloud_load("rax", NULL, &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.auth_url, "http://env/v3");
	cr_assert_null(c.region);
	os_cloud_clear(&c);
}

Test(os_cloud, clear_errors)
{
	struct os_cloud c;
	char err[300];

	cr_assert_eq(os_cloud_load("rax", NULL, &c, err, sizeof(err)), -1);
	cr_assert(strstr(err, "no clouds.yaml") != NULL, "%s", err);
	write_file("cwd/clouds.yaml", CLOUDS);
	cr_assert_eq(os_cloud_load("nope", NULL, &c, err, sizeof(err)), -1);
	cr_assert(strstr(err, "no cloud named nope") != NULL, "%s", err);
	cr_assert_eq(os_cloud_load("rax", "LON", &c, err, sizeof(err)), -1);
	cr_assert(strstr(err, "has no region LON") != NULL, "%s", err);
	cr_assert_eq(os_cloud_load("rax", "DFW", &c, err, sizeof(err)), -1);
	cr_assert(strstr(err, "no password") != NULL, "%s", err);
	write_file("cwd/clouds.yaml", "clouds: {rax: {auth: [\n");
	cr_assert_eq(os_cloud_load("rax", NULL, &c, err, sizeof(err)), -1);
	cr_assert(strstr(err, "clouds.yaml:") != NULL, "a position: %s", err);
}

Test(os_cloud, password_auth_body_scoped_to_the_project)
{
	struct os_cloud c;
	char err[300], *s;
	json_t *b;

	write_file("cwd/clouds.yaml", CLOUDS);
	write_file("cwd/secure.yaml", "clouds: {rax: {auth: {password: pw}}}\n");
	cr_assert_eq(os_cloud_load("rax", "DFW", &c, err, sizeof(err)), 0, "%s", err);
	b = os_auth_body(&c);
	s = json_dumps(b, JSON_SORT_KEYS | JSON_COMPACT);
	cr_assert_str_eq(s, "{\"auth\":{\"identity\":{\"methods\":[\"password\"],\"password\":{"
			    "\"user\":{\"domain\":{\"name\":\"Default\"},\"name\":\"nodepool\","
			    "\"password\":\"pw\"}}},\"scope\":{\"project\":{\"domain\":{\"name\":"
			    "\"Default\"},\"name\":\"ci\"}}}}");
	free(s);
	json_decref(b);
	s = os_token_url(c.auth_url);
	cr_assert_str_eq(s, "https://identity.example.com/v3/auth/tokens");
	free(s);
	s = os_token_url("http://k:5000");
	cr_assert_str_eq(s, "http://k:5000/v3/auth/tokens");
	free(s);
	os_cloud_clear(&c);
}

Test(os_cloud, application_credential_auth_body)
{
	struct os_cloud c;
	char err[300], *s;
	json_t *b;

	write_file("cwd/clouds.yaml",
		   "clouds:\n  ac:\n    auth_type: v3applicationcredential\n    auth:\n"
		   "      auth_url: http://k/v3\n      application_credential_id: abc\n"
		   "      application_credential_secret: sec\n");
	cr_assert_eq(os_cloud_load("ac", NULL, &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(c.appcred, 1);
	b = os_auth_body(&c);
	s = json_dumps(b, JSON_SORT_KEYS | JSON_COMPACT);
	cr_assert_str_eq(s, "{\"auth\":{\"identity\":{\"application_credential\":{\"id\":\"abc\","
			    "\"secret\":\"sec\"},\"methods\":[\"application_credential\"]}}}");
	free(s);
	json_decref(b);
	os_cloud_clear(&c);
}

Test(os_cloud, catalog_endpoint_by_type_interface_region)
{
	json_t *cat = json_loads(
	    "[{\"type\":\"compute\",\"endpoints\":["
	    "{\"interface\":\"public\",\"region_id\":\"DFW\",\"url\":\"http://dfw/v2.1/\"},"
	    "{\"interface\":\"internal\",\"region_id\":\"DFW\",\"url\":\"http://dfw-int/v2.1\"},"
	    "{\"interface\":\"public\",\"region\":\"IAD\",\"url\":\"http://iad/v2.1\"}]},"
	    "{\"type\":\"block-storage\",\"endpoints\":["
	    "{\"interface\":\"public\",\"region_id\":\"DFW\",\"url\":\"http://cinder/v3/p\"}]}]",
	    0, NULL);
	const char *const compute[] = {"compute", NULL};
	const char *const volume[] = {"volumev3", "block-storage", NULL};
	char *u;

	u = os_catalog_url(cat, compute, "public", "DFW");
	cr_assert_str_eq(u, "http://dfw/v2.1");
	free(u);
	u = os_catalog_url(cat, compute, "internal", "DFW");
	cr_assert_str_eq(u, "http://dfw-int/v2.1");
	free(u);
	u = os_catalog_url(cat, compute, "public", "IAD");
	cr_assert_str_eq(u, "http://iad/v2.1");
	free(u);
	u = os_catalog_url(cat, volume, "public", "DFW");
	cr_assert_str_eq(u, "http://cinder/v3/p");
	free(u);
	cr_assert_null(os_catalog_url(cat, compute, "public", "ORD"));
	cr_assert_null(os_catalog_url(cat, volume, "internal", "DFW"));
	json_decref(cat);
}
