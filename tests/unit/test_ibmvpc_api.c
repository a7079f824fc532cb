/*
 * The ibmvpc driver's wire layer (drivers/ibmvpc/ibm_api.c): IBM Cloud
 * credentials found as the IBM SDK finds them (credentials file, then the
 * VPC_* environment), the nodepool metadata upstream reads from names
 * and resource groups, and the parsers of answers (error lines, the next
 * page's start token, Cloud Object Storage XML).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "drivers/ibmvpc/ibmvpc.h"

static char dir[64];
static const char *const *fake_env; /* NAME=VALUE, NULL-terminated */

static const char *
env(const char *name)
{
	size_t n = strlen(name), i;

	for (i = 0; fake_env != NULL && fake_env[i] != NULL; i++)
		if (strncmp(fake_env[i], name, n) == 0 && fake_env[i][n] == '=')
			return fake_env[i] + n + 1;
	return NULL;
}

static const char *
write_file(const char *name, const char *text)
{
	static char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	cr_assert(f != NULL, "%s", path);
	fputs(text, f);
	fclose(f);
	return path;
}

static void
setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/ibmcreds.XXXXXX");
	cr_assert(mkdtemp(dir) != NULL);
	cr_assert(chdir(dir) == 0);
	fake_env = NULL;
}

static void
teardown(void)
{
	char cmd[200];

	cr_assert(chdir("/") == 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert(system(cmd) == 0);
}

TestSuite(ibm_creds, .init = setup, .fini = teardown);

Test(ibm_creds, provider_file_with_endpoints)
{
	struct ibm_creds c;
	char err[256];
	const char *p = write_file("creds.env", "# IBM\nVPC_AUTH_TYPE=iam\n"
						"VPC_APIKEY = \"k-123\"\n"
						"VPC_AUTH_URL=https://iam.example/identity/token\n"
						"VPC_URL=https://vpc.example/v1\n"
						"RESOURCE_MANAGER_URL=https://rm.example\n"
						"VPC_DISABLE_SSL=true\n");
	static const char *const e[] = {"VPC_APIKEY=from-env", NULL};

	fake_env = e;
	cr_assert_eq(ibm_creds_find(&c, p, env, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.auth_type, "iam");
	cr_assert_str_eq(c.apikey, "k-123"); /* the file wins, as the SDK */
	cr_assert_str_eq(c.auth_url, "https://iam.example/identity/token");
	cr_assert_str_eq(c.vpc_url, "https://vpc.example/v1");
	cr_assert_str_eq(c.rm_url, "https://rm.example");
	cr_assert_null(c.rc_url);
	cr_assert_eq(c.disable_ssl, 1);
	cr_assert_eq(c.auth_disable_ssl, 0);
	cr_assert_str_eq(c.source, p);
	ibm_creds_clear(&c);
}

Test(ibm_creds, environment_when_no_file_names_vpc)
{
	struct ibm_creds c;
	char err[256];
	static const char *const e[] = {"HOME=/nonexistent", "VPC_APIKEY=envkey",
					"RESOURCE_CONTROLLER_URL=https://rc.example", NULL};

	fake_env = e;
	write_file("ibm-credentials.env", "OTHER_APIKEY=x\n"); /* cwd: no VPC_ keys */
	cr_assert_eq(ibm_creds_find(&c, NULL, env, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.apikey, "envkey");
	cr_assert_str_eq(c.auth_type, "iam");
	cr_assert_str_eq(c.source, "environment");
	cr_assert_str_eq(c.rc_url, "https://rc.example");
	ibm_creds_clear(&c);
}

Test(ibm_creds, ibm_credentials_file_variable_and_home)
{
	struct ibm_creds c;
	char err[256], home[128], envhome[160];
	const char *e[3] = {NULL, NULL, NULL};

	snprintf(home, sizeof(home), "%s", dir);
	write_file("ibm-credentials.env", "VPC_APIKEY=home-key\n");
	snprintf(envhome, sizeof(envhome), "HOME=%s", home);
	e[0] = envhome;
	fake_env = e;
	cr_assert_eq(ibm_creds_find(&c, NULL, env, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.apikey, "home-key");
	ibm_creds_clear(&c);
	write_file("other.env", "VPC_APIKEY=named-key\n");
	{
		char v[200];
		snprintf(v, sizeof(v), "IBM_CREDENTIALS_FILE=%s/other.env", dir);
		e[1] = v;
		cr_assert_eq(ibm_creds_find(&c, NULL, env, err, sizeof(err)), 0, "%s", err);
		cr_assert_str_eq(c.apikey, "named-key");
		ibm_creds_clear(&c);
	}
}

Test(ibm_creds, errors_are_clear)
{
	struct ibm_creds c;
	char err[256];
	static const char *const none[] = {"HOME=/nonexistent", NULL};
	static const char *const cos[] = {"VPC_AUTH_TYPE=cp4d", "VPC_APIKEY=k", NULL};

	fake_env = none;
	cr_assert_eq(ibm_creds_find(&c, NULL, env, err, sizeof(err)), -1);
	cr_assert(strstr(err, "no IBM Cloud credentials") != NULL, "%s", err);
	cr_assert_eq(ibm_creds_find(&c, "/nonexistent/creds.env", env, err, sizeof(err)), -1);
	cr_assert(strstr(err, "/nonexistent/creds.env") != NULL, "%s", err);
	cr_assert_eq(
	    ibm_creds_find(&c, write_file("x.env", "VPC_AUTH_TYPE=iam\n"), env, err, sizeof(err)),
	    -1);
	cr_assert(strstr(err, "without VPC_APIKEY") != NULL, "%s", err);
	fake_env = cos;
	cr_assert_eq(ibm_creds_find(&c, NULL, env, err, sizeof(err)), -1);
	cr_assert(strstr(err, "cp4d is not supported") != NULL, "%s", err);
}

static void
expect_meta(const char *obj, const char *rg, const char *want)
{
	json_t *m = ibm_name_metadata(obj, rg);
	char *got = json_dumps(m, JSON_SORT_KEYS | JSON_COMPACT);

	cr_assert_str_eq(got, want, "%s in %s", obj, rg ? rg : "(none)");
	free(got);
	json_decref(m);
}

Test(ibm_metadata, as_upstream_reads_names)
{
	expect_meta("np0000000042", "np_ibmvpc_private",
		    "{\"nodepool_node_id\":\"0000000042\",\"nodepool_pool_name\":\"private\","
		    "\"nodepool_provider_name\":\"ibmvpc\"}");
	expect_meta(
	    "npimage0000000007", "npimages_ibm-east",
	    "{\"nodepool_provider_name\":\"ibm-east\",\"nodepool_upload_id\":\"0000000007\"}");
	expect_meta("npimage12abc", NULL, "{\"nodepool_upload_id\":\"12\"}");
	expect_meta("np42x", "np_a_b",
		    "{\"nodepool_pool_name\":\"b\",\"nodepool_provider_name\":"
		    "\"a\"}");
	expect_meta("builder", "Default", "{}");
	expect_meta("np42", "np_a_b_c", "{\"nodepool_node_id\":\"42\"}");
	expect_meta("np", "np__b", "{}");
	expect_meta(NULL, NULL, "{}");
}

Test(ibm_answers, error_lines_name_code_and_message)
{
	char out[300];
	json_t *vpc = json_loads("{\"errors\": [{\"code\": \"over_quota\", \"message\": \"Quota "
				 "exceeded\"}], \"trace\": \"t\"}",
				 0, NULL);
	json_t *iam = json_loads("{\"errorCode\": \"BXNIM0415E\", \"errorMessage\": \"Provided API "
				 "key could not be found.\"}",
				 0, NULL);
	json_t *rm = json_loads("{\"message\": \"not found\", \"status_code\": 404}", 0, NULL);

	ibm_error_text(400, NULL, vpc, "", out, sizeof(out));
	cr_assert_str_eq(out, "HTTP 400 over_quota: Quota exceeded");
	ibm_error_text(400, NULL, iam, "", out, sizeof(out));
	cr_assert_str_eq(out, "HTTP 400 BXNIM0415E: Provided API key could not be found.");
	ibm_error_text(404, NULL, rm, "", out, sizeof(out));
	cr_assert_str_eq(out, "HTTP 404: not found");
	ibm_error_text(502, NULL, NULL, "<html>bad gateway</html>", out, sizeof(out));
	cr_assert_str_eq(out, "HTTP 502: <html>bad gateway</html>");
	ibm_error_text(0, "timed out after 60 s", NULL, NULL, out, sizeof(out));
	cr_assert_str_eq(out, "timed out after 60 s");
	json_decref(vpc);
	json_decref(iam);
	json_decref(rm);
}

Test(ibm_answers, next_page_start_token)
{
	char tok[64];

	cr_assert(
	    ibm_next_start("https://us-south.iaas.cloud.ibm.com/v1/instances?start=0717-a%2Bb&"
			   "limit=50",
			   tok, sizeof(tok)));
	cr_assert_str_eq(tok, "0717-a%2Bb");
	cr_assert(ibm_next_start("https://x/v1/images?limit=50&start=r006-x", tok, sizeof(tok)));
	cr_assert_str_eq(tok, "r006-x");
	cr_assert_not(ibm_next_start("https://x/v1/images?limit=50&restart=1", tok, sizeof(tok)));
	cr_assert_not(ibm_next_start("https://x/v1/images?start=", tok, sizeof(tok)));
	cr_assert_not(
	    ibm_next_start("https://x/v1/images?start=0123456789012345678901234567890123456"
			   "789012345678901234567890123456789",
			   tok, sizeof(tok)));
}

Test(ibm_answers, cos_xml)
{
	const char *x =
	    "<?xml version=\"1.0\"?><ListBucketResult><Contents><Key>npimage1.qcow2</Key>"
	    "</Contents><Contents><Key>a&amp;b&lt;c</Key></Contents></ListBucketResult>";
	const char *from = x;
	char key[8];

	cr_assert(ibm_xml_text(&from, "Key", key, sizeof(key)));
	cr_assert_str_eq(key, "npimage"); /* truncated to fit */
	cr_assert(ibm_xml_text(&from, "Key", key, sizeof(key)));
	cr_assert_str_eq(key, "a&b<c");
	cr_assert_not(ibm_xml_text(&from, "Key", key, sizeof(key)));
	from = "<LocationConstraint>us-south-smart";
	cr_assert_not(ibm_xml_text(&from, "LocationConstraint", key, sizeof(key)));
}
