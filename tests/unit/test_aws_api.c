/*
 * drivers/aws/aws_api: the credential chain and endpoints as the AWS SDKs
 * resolve them (profile-name, AWS_* variables, the shared credentials and
 * config files), with a fake environment and files in a temporary HOME;
 * the XML helpers on an EC2 answer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "drivers/aws/aws_api.h"
#include "lib/net/http.h"
#include "lib/net/xml_dl.h"

static const char *vars[32][2];
static char home[256];

static const char *
fake_env(const char *name)
{
	int i;

	for (i = 0; i < 32 && vars[i][0] != NULL; i++)
		if (strcmp(vars[i][0], name) == 0)
			return vars[i][1];
	return NULL;
}

static void
setv(const char *k, const char *v)
{
	int i;

	for (i = 0; i < 31 && vars[i][0] != NULL && strcmp(vars[i][0], k) != 0; i++)
		;
	vars[i][0] = k;
	vars[i][1] = v;
}

static void
write_file(const char *rel, const char *text)
{
	char p[512];
	FILE *f;

	snprintf(p, sizeof(p), "%s/.aws", home);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/%s", home, rel);
	f = fopen(p, "w");
	cr_assert(f != NULL);
	fputs(text, f);
	fclose(f);
}

static void
setup(void)
{
	memset(vars, 0, sizeof(vars));
	snprintf(home, sizeof(home), "/tmp/test_aws_api.XXXXXX");
	cr_assert(mkdtemp(home) != NULL);
	setv("HOME", home);
}

static void
teardown(void)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", home);
	cr_assert(system(cmd) == 0);
}

TestSuite(aws_api, .init = setup, .fini = teardown);

Test(aws_api, environment_first_without_profile_name)
{
	struct aws_creds c;
	char err[256];

	write_file(".aws/credentials", "[default]\naws_access_key_id = FILEKEY\n"
				       "aws_secret_access_key = filesecret\n");
	setv("AWS_ACCESS_KEY_ID", "ENVKEY");
	setv("AWS_SECRET_ACCESS_KEY", "envsecret");
	setv("AWS_SESSION_TOKEN", "tok");
	cr_assert_eq(aws_creds_find(&c, NULL, fake_env, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.access_key_id, "ENVKEY");
	cr_assert_str_eq(c.secret_access_key, "envsecret");
	cr_assert_str_eq(c.session_token, "tok");
	aws_creds_clear(&c);
}

Test(aws_api, profile_name_beats_environment_and_reads_config_file)
{
	struct aws_creds c;
	char err[256];

	write_file(".aws/credentials", "[default]\naws_access_key_id = FILEKEY\n"
				       "aws_secret_access_key = filesecret\n");
	write_file(".aws/config", "[default]\nregion = eu-west-1\n\n[profile ci]\n"
				  "aws_access_key_id=CIKEY\naws_secret_access_key=cisecret\n");
	setv("AWS_ACCESS_KEY_ID", "ENVKEY");
	setv("AWS_SECRET_ACCESS_KEY", "envsecret");
	cr_assert_eq(aws_creds_find(&c, "ci", fake_env, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.access_key_id, "CIKEY");
	cr_assert_str_eq(c.secret_access_key, "cisecret");
	cr_assert_null(c.session_token);
	aws_creds_clear(&c);
	/* a profile that does not exist is an error, not a fallback */
	cr_assert_eq(aws_creds_find(&c, "nope", fake_env, err, sizeof(err)), -1);
	cr_assert(strstr(err, "nope") != NULL, "%s", err);
}

Test(aws_api, shared_file_by_aws_profile_and_custom_path)
{
	struct aws_creds c;
	char err[256], path[400];

	write_file("creds", "# comment\n[other]\naws_access_key_id = OTHER\n"
			    "aws_secret_access_key = othersecret\n");
	snprintf(path, sizeof(path), "%s/creds", home);
	setv("AWS_SHARED_CREDENTIALS_FILE", path);
	cr_assert_eq(aws_creds_find(&c, NULL, fake_env, err, sizeof(err)), -1);
	setv("AWS_PROFILE", "other");
	cr_assert_eq(aws_creds_find(&c, NULL, fake_env, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.access_key_id, "OTHER");
	aws_creds_clear(&c);
}

Test(aws_api, endpoints)
{
	char *e = aws_endpoint("ec2", "eu-west-1", fake_env);

	cr_assert_str_eq(e, "https://ec2.eu-west-1.amazonaws.com");
	free(e);
	setv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000/");
	setv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9001");
	e = aws_endpoint("ec2", "eu-west-1", fake_env);
	cr_assert_str_eq(e, "http://127.0.0.1:9000");
	free(e);
	e = aws_endpoint("s3", "eu-west-1", fake_env);
	cr_assert_str_eq(e, "http://127.0.0.1:9001");
	free(e);
	e = aws_endpoint("servicequotas", "eu-west-1", fake_env);
	cr_assert_str_eq(e, "http://127.0.0.1:9000");
	free(e);
}

Test(aws_api, xml_helpers_and_form)
{
	static const char xml[] =
	    "<DescribeInstancesResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">"
	    "<reservationSet><item><instancesSet><item><instanceId>i-1</instanceId>"
	    "<instanceState><code>16</code><name>running</name></instanceState></item>"
	    "<item><instanceId>i-2</instanceId></item></instancesSet></item></reservationSet>"
	    "</DescribeInstancesResponse>";
	xmlDoc *d;
	xmlNode *it;
	char buf[64], *form = NULL, e[512];

	/* libxml2 and libcurl (aws_form_add escapes with it), as aws_api_new
	 * loads them */
	cr_assert_eq(xml_dl_load(NULL, e, sizeof(e)), 0, "%s", e);
	cr_assert_eq(http_load(NULL, e, sizeof(e)), 0, "%s", e);
	d = xmlReadMemory(xml, sizeof(xml) - 1, "x.xml", NULL, XML_PARSE_NONET);
	it = aws_xpath(xmlDocGetRootElement(d), "reservationSet/item/instancesSet/item");

	cr_assert_str_eq(aws_xtext(it, "instanceId", buf, sizeof(buf)), "i-1");
	cr_assert_str_eq(aws_xtext(it, "instanceState/name", buf, sizeof(buf)), "running");
	cr_assert_str_eq(aws_xtext(it, "missing/path", buf, sizeof(buf)), "");
	it = aws_xnext(it);
	cr_assert_str_eq(aws_xtext(it, "instanceId", buf, sizeof(buf)), "i-2");
	cr_assert_null(aws_xnext(it));
	xmlFreeDoc(d);
	aws_form_add(&form, "Filter.1.Name", "tag:a b");
	aws_form_addf(&form, "x&y=z", "Filter.%d.Value.%d", 1, 1);
	cr_assert_str_eq(form, "&Filter.1.Name=tag%3Aa%20b&Filter.1.Value.1=x%26y%3Dz");
	free(form);
}
