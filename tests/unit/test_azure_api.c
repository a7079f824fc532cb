/*
 * drivers/azure/azure_api: the service principal's auth file as upstream
 * reads it (its endpoint keys, their defaults, what is missing), ARM's
 * answers decoded (success, ARM's error body, an error body that says
 * nothing), and base64 as user-data and custom-data need it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "drivers/azure/azure_api.h"

static char path[64];

static const char *
write_file(const char *text)
{
	int fd;

	snprintf(path, sizeof(path), "/tmp/test_azure_api.XXXXXX");
	fd = mkstemp(path);
	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

Test(azure_api, auth_file_with_endpoints)
{
	struct az_auth a;
	char err[256];

	write_file(
	    "{\"clientId\": \"c\", \"clientSecret\": \"s\", \"subscriptionId\": \"sub\","
	    " \"tenantId\": \"t\", \"activeDirectoryEndpointUrl\": \"https://login.example/\","
	    " \"resourceManagerEndpointUrl\": \"https://arm.example:8443/\"}");
	cr_assert_eq(az_auth_load(&a, path, err, sizeof(err)), 0, "%s", err);
	unlink(path);
	cr_assert_str_eq(a.client_id, "c");
	cr_assert_str_eq(a.client_secret, "s");
	cr_assert_str_eq(a.subscription_id, "sub");
	cr_assert_str_eq(a.tenant_id, "t");
	cr_assert_str_eq(a.ad_endpoint, "https://login.example");
	cr_assert_str_eq(a.arm_endpoint, "https://arm.example:8443");
	az_auth_clear(&a);
}

Test(azure_api, auth_file_defaults_to_the_public_cloud)
{
	struct az_auth a;
	char err[256];

	write_file("{\"clientId\": \"c\", \"clientSecret\": \"s\", \"subscriptionId\": \"sub\","
		   " \"tenantId\": \"t\"}");
	cr_assert_eq(az_auth_load(&a, path, err, sizeof(err)), 0, "%s", err);
	unlink(path);
	cr_assert_str_eq(a.ad_endpoint, "https://login.microsoftonline.com");
	cr_assert_str_eq(a.arm_endpoint, "https://management.azure.com");
	az_auth_clear(&a);
}

Test(azure_api, bad_auth_files_are_named)
{
	struct az_auth a;
	char err[256];

	write_file("{\"clientId\": \"c\", \"subscriptionId\": \"sub\", \"tenantId\": \"t\"}");
	cr_assert_eq(az_auth_load(&a, path, err, sizeof(err)), -1);
	cr_assert(strstr(err, "no \"clientSecret\"") != NULL, "%s", err);
	unlink(path);
	write_file("not json");
	cr_assert_eq(az_auth_load(&a, path, err, sizeof(err)), -1);
	cr_assert(strstr(err, path) != NULL, "%s", err);
	unlink(path);
	cr_assert_eq(az_auth_load(&a, "/nonexistent/azure.json", err, sizeof(err)), -1);
	cr_assert(strstr(err, "/nonexistent/azure.json") != NULL, "%s", err);
	cr_assert_eq(az_auth_load(&a, NULL, err, sizeof(err)), -1);
}

Test(azure_api, answers)
{
	char code[64], msg[256];
	const char *ok = "{\"value\": [{\"name\": \"np1\"}]}";
	const char *quota = "{\"error\": {\"code\": \"OperationNotAllowed\", \"message\": "
			    "\"exceeding approved Total Regional Cores quota\"}}";
	json_t *j;

	j = az_answer_parse(200, ok, strlen(ok), code, sizeof(code), msg, sizeof(msg));
	cr_assert_not_null(j);
	cr_assert_str_eq(code, "");
	cr_assert_str_eq(json_string_value(json_object_get(
			     json_array_get(json_object_get(j, "value"), 0), "name")),
			 "np1");
	json_decref(j);
	cr_assert_null(az_answer_parse(204, "", 0, code, sizeof(code), msg, sizeof(msg)));
	cr_assert_str_eq(code, "");
	cr_assert_null(
	    az_answer_parse(409, quota, strlen(quota), code, sizeof(code), msg, sizeof(msg)));
	cr_assert_str_eq(code, "OperationNotAllowed");
	cr_assert(strstr(msg, "Cores quota") != NULL);
	/* an error body without a usable code still reads as an error */
	cr_assert_null(az_answer_parse(409, "{\"error\": {\"code\": \"\"}}", 22, code, sizeof(code),
				       msg, sizeof(msg)));
	cr_assert_str_eq(code, "HttpError");
	cr_assert_null(az_answer_parse(502, "<html>bad gateway</html>", 24, code, sizeof(code), msg,
				       sizeof(msg)));
	cr_assert_str_eq(code, "HttpError");
	cr_assert(strstr(msg, "HTTP 502") != NULL, "%s", msg);
}

Test(azure_api, base64)
{
	static const struct {
		const char *in, *out;
	} v[] = {{"", ""},
		 {"f", "Zg=="},
		 {"fo", "Zm8="},
		 {"foo", "Zm9v"},
		 {"foob", "Zm9vYg=="},
		 {"This is the user data", "VGhpcyBpcyB0aGUgdXNlciBkYXRh"}};
	size_t i;

	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		char *b = az_base64(v[i].in, strlen(v[i].in));
		cr_assert_str_eq(b, v[i].out);
		free(b);
	}
}
