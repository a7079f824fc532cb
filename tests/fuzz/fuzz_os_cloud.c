/*
 * Fuzz the openstack driver's reading of outside input that is not the
 * cloud's plain JSON fields (drivers/openstack/os_cloud.c): a clouds.yaml
 * (cloud, regions, auth, secure merge) through os_cloud_load and the Keystone
 * request built from it, and a token's service catalog through
 * os_catalog_url. Input: one document, used as clouds.yaml (cloud "c",
 * region "R" and none) and, when it is JSON, as a catalog.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "drivers/openstack/os_cloud.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char path[64];
	static const char *const types[] = {"volumev3", "block-storage", "compute", NULL};
	struct os_cloud c;
	char err[512];
	const char *regions[] = {"R", NULL};
	json_t *j;
	FILE *f;
	size_t i;

	if (path[0] == '\0') {
		snprintf(path, sizeof(path), "/tmp/fuzz_os_cloud.%d.yaml", (int)getpid());
		setenv("OS_CLIENT_CONFIG_FILE", path, 1);
		setenv("OS_CLIENT_SECURE_FILE", "/nonexistent/secure.yaml", 1);
		setenv("HOME", "/nonexistent", 1);
	}
	f = fopen(path, "wb");
	if (f == NULL)
		return 0;
	fwrite(data, 1, size, f);
	fclose(f);
	for (i = 0; i < 2; i++) {
		if (os_cloud_load("c", regions[i], &c, err, sizeof(err)) == 0) {
			char *s, *u;
			j = os_auth_body(&c);
			s = json_dumps(j, JSON_COMPACT);
			if (s == NULL)
				abort();
			free(s);
			json_decref(j);
			u = os_token_url(c.auth_url);
			free(u);
			os_cloud_clear(&c);
		} else if (err[0] == '\0') {
			abort(); /* a failure always says why */
		}
	}
	unlink(path);
	j = json_loadb((const char *)data, size, 0, NULL);
	if (j != NULL) {
		char *u = os_catalog_url(j, types, "public", "R");
		free(u);
		u = os_catalog_url(json_object_get(json_object_get(j, "token"), "catalog"), types,
				   "internal", NULL);
		free(u);
		json_decref(j);
	}
	return 0;
}
