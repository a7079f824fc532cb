/*
 * drivers/gce/gce_api: the application default credentials as google-auth
 * finds them (GOOGLE_APPLICATION_CREDENTIALS, gcloud's well-known file),
 * with a fake environment and files in a temporary directory; the RS256
 * JWT of the service account grant, verified here with OpenSSL against the
 * key's public half; Google's error bodies.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include "drivers/gce/gce_api.h"

static const char *vars[16][2];
static char dir[256];

static const char *
fake_env(const char *name)
{
	int i;

	for (i = 0; i < 16 && vars[i][0] != NULL; i++)
		if (strcmp(vars[i][0], name) == 0)
			return vars[i][1];
	return NULL;
}

static void
setv(const char *k, const char *v)
{
	int i;

	for (i = 0; i < 15 && vars[i][0] != NULL && strcmp(vars[i][0], k) != 0; i++)
		;
	vars[i][0] = k;
	vars[i][1] = v;
}

static const char *
write_file(const char *rel, const char *text)
{
	static char p[512];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	f = fopen(p, "w");
	cr_assert(f != NULL);
	fputs(text, f);
	fclose(f);
	return p;
}

static void
setup(void)
{
	memset(vars, 0, sizeof(vars));
	snprintf(dir, sizeof(dir), "/tmp/test_gce_api.XXXXXX");
	cr_assert(mkdtemp(dir) != NULL);
	setv("HOME", dir);
}

static void
teardown(void)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert(system(cmd) == 0);
}

TestSuite(gce_api, .init = setup, .fini = teardown);

/* A fresh RSA key: its PEM (private, PKCS#8) and the key itself. */
static EVP_PKEY *
new_key(char **pem)
{
	EVP_PKEY *k = EVP_RSA_gen(2048);
	BIO *b = BIO_new(BIO_s_mem());
	char *data;
	long n;

	cr_assert(k != NULL && b != NULL);
	cr_assert(PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL) == 1);
	n = BIO_get_mem_data(b, &data);
	*pem = strndup(data, (size_t)n);
	BIO_free(b);
	return k;
}

static char *
sa_json(const char *pem, const char *token_uri)
{
	json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s}", "type", "service_account", "project_id",
			      "p1", "private_key_id", "kid-1", "private_key", pem, "client_email",
			      "np@p1.iam.gserviceaccount.com");
	char *s;

	if (token_uri != NULL)
		json_object_set_new(j, "token_uri", json_string(token_uri));
	s = json_dumps(j, 0);
	json_decref(j);
	return s;
}

Test(gce_api, service_account_from_the_variable)
{
	struct gce_creds c;
	char err[256] = "", *pem, *js;
	EVP_PKEY *k = new_key(&pem);

	js = sa_json(pem, "https://sim.example/token");
	setv("GOOGLE_APPLICATION_CREDENTIALS", write_file("sa.json", js));
	cr_assert_eq(gce_creds_find(&c, fake_env, err, sizeof(err)), 0, "%s", err);
	cr_assert(c.service_account);
	cr_assert_str_eq(c.client_email, "np@p1.iam.gserviceaccount.com");
	cr_assert_str_eq(c.private_key_id, "kid-1");
	cr_assert_str_eq(c.token_uri, "https://sim.example/token");
	cr_assert_str_eq(c.project_id, "p1");
	gce_creds_clear(&c);
	/* no token_uri: Google's */
	free(js);
	js = sa_json(pem, NULL);
	write_file("sa.json", js);
	cr_assert_eq(gce_creds_find(&c, fake_env, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.token_uri, "https://oauth2.googleapis.com/token");
	gce_creds_clear(&c);
	free(js);
	free(pem);
	EVP_PKEY_free(k);
}

Test(gce_api, authorized_user_from_gclouds_file)
{
	struct gce_creds c;
	char err[256] = "", p[512];

	snprintf(p, sizeof(p), "%s/.config", dir);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/.config/gcloud", dir);
	mkdir(p, 0700);
	write_file(".config/gcloud/application_default_credentials.json",
		   "{\"type\": \"authorized_user\", \"client_id\": \"cid\", \"client_secret\": "
		   "\"sec\", \"refresh_token\": \"1//rt\"}");
	cr_assert_eq(gce_creds_find(&c, fake_env, err, sizeof(err)), 0, "%s", err);
	cr_assert(!c.service_account);
	cr_assert_str_eq(c.refresh_token, "1//rt");
	cr_assert(strstr(c.source, ".config/gcloud/application_default_credentials.json"));
	gce_creds_clear(&c);
	/* CLOUDSDK_CONFIG moves gcloud's directory */
	setv("CLOUDSDK_CONFIG", dir);
	cr_assert_eq(gce_creds_find(&c, fake_env, err, sizeof(err)), -1);
	cr_assert(strstr(err, "GOOGLE_APPLICATION_CREDENTIALS is not set"), "%s", err);
	write_file("application_default_credentials.json",
		   "{\"type\": \"authorized_user\", \"client_id\": \"cid\", \"client_secret\": "
		   "\"sec\", \"refresh_token\": \"1//other\"}");
	cr_assert_eq(gce_creds_find(&c, fake_env, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.refresh_token, "1//other");
	gce_creds_clear(&c);
}

Test(gce_api, bad_files_are_reported)
{
	struct gce_creds c;
	char err[256] = "";

	cr_assert_eq(gce_creds_find(&c, fake_env, err, sizeof(err)), -1);
	cr_assert(strstr(err, "no Google credentials"), "%s", err);
	setv("GOOGLE_APPLICATION_CREDENTIALS", write_file("bad.json", "{not json"));
	cr_assert_eq(gce_creds_find(&c, fake_env, err, sizeof(err)), -1);
	cr_assert(strstr(err, "bad.json"), "%s", err);
	write_file("bad.json", "{\"type\": \"external_account\"}");
	cr_assert_eq(gce_creds_find(&c, fake_env, err, sizeof(err)), -1);
	cr_assert(strstr(err, "type external_account is not supported"), "%s", err);
	write_file("bad.json", "{\"type\": \"service_account\", \"client_email\": \"x@y\"}");
	cr_assert_eq(gce_creds_find(&c, fake_env, err, sizeof(err)), -1);
	cr_assert(strstr(err, "private_key"), "%s", err);
}

static unsigned char *
unb64url(const char *s, size_t n, size_t *outlen)
{
	char *t = malloc(n + 4);
	unsigned char *out = malloc(n + 4);
	size_t i, m = n;
	int len;

	for (i = 0; i < n; i++)
		t[i] = s[i] == '-' ? '+' : s[i] == '_' ? '/' : s[i];
	while (m % 4 != 0)
		t[m++] = '=';
	len = EVP_DecodeBlock(out, (unsigned char *)t, (int)m);
	cr_assert(len >= 0);
	*outlen = (size_t)len - (m - n); /* the padding decoded as zeros */
	free(t);
	return out;
}

Test(gce_api, jwt_is_rs256_signed_by_the_key)
{
	struct gce_creds c = {0};
	char err[256] = "", *pem;
	EVP_PKEY *k = new_key(&pem);
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	char *jwt, *d1, *d2;
	unsigned char *hdr, *cl, *sig;
	size_t hl, cll, sl;
	json_t *h, *claims;

	c.service_account = 1;
	c.client_email = "np@p1.iam.gserviceaccount.com";
	c.private_key_id = "kid-1";
	c.private_key = pem;
	c.token_uri = "https://sim.example/token";
	jwt = gce_jwt(&c, "https://www.googleapis.com/auth/compute", 1700000000, err, sizeof(err));
	cr_assert(jwt != NULL, "%s", err);
	d1 = strchr(jwt, '.');
	d2 = strchr(d1 + 1, '.');
	cr_assert(d1 != NULL && d2 != NULL && strchr(d2 + 1, '.') == NULL);
	cr_assert(strpbrk(jwt, "+/=") == NULL); /* base64url, no padding */
	hdr = unb64url(jwt, (size_t)(d1 - jwt), &hl);
	cl = unb64url(d1 + 1, (size_t)(d2 - d1 - 1), &cll);
	sig = unb64url(d2 + 1, strlen(d2 + 1), &sl);
	h = json_loadb((char *)hdr, hl, 0, NULL);
	claims = json_loadb((char *)cl, cll, 0, NULL);
	cr_assert(h != NULL && claims != NULL);
	cr_assert_str_eq(json_string_value(json_object_get(h, "alg")), "RS256");
	cr_assert_str_eq(json_string_value(json_object_get(h, "kid")), "kid-1");
	cr_assert_str_eq(json_string_value(json_object_get(claims, "iss")), c.client_email);
	cr_assert_str_eq(json_string_value(json_object_get(claims, "aud")), c.token_uri);
	cr_assert_str_eq(json_string_value(json_object_get(claims, "scope")),
			 "https://www.googleapis.com/auth/compute");
	cr_assert_eq(json_integer_value(json_object_get(claims, "iat")), 1700000000);
	cr_assert_eq(json_integer_value(json_object_get(claims, "exp")), 1700003600);
	/* the signature over "header.claims" verifies with the public key */
	cr_assert_eq(sl, 256);
	cr_assert_eq(EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, k), 1);
	cr_assert_eq(EVP_DigestVerify(md, sig, sl, (unsigned char *)jwt, (size_t)(d2 - jwt)), 1);
	/* a key that is not PEM: an error, not a crash */
	c.private_key = "-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n";
	cr_assert_null(gce_jwt(&c, "s", 1, err, sizeof(err)));
	cr_assert(strstr(err, "does not load"), "%s", err);
	json_decref(h);
	json_decref(claims);
	EVP_MD_CTX_free(md);
	free(hdr);
	free(cl);
	free(sig);
	free(jwt);
	free(pem);
	EVP_PKEY_free(k);
}

Test(gce_api, answers)
{
	char reason[64], msg[256];
	json_t *j;
	const char *notfound =
	    "{\"error\": {\"code\": 404, \"message\": \"The resource 'x' was not found\", "
	    "\"errors\": [{\"domain\": \"global\", \"reason\": \"notFound\", \"message\": "
	    "\"The resource 'x' was not found\"}]}}";

	j = gce_answer_parse(404, notfound, strlen(notfound), reason, sizeof(reason), msg,
			     sizeof(msg));
	cr_assert_str_eq(reason, "notFound");
	cr_assert_str_eq(msg, "The resource 'x' was not found");
	json_decref(j);
	j = gce_answer_parse(400, "{\"error\": \"invalid_grant\", \"error_description\": \"bad\"}",
			     54, reason, sizeof(reason), msg, sizeof(msg));
	cr_assert_str_eq(reason, "invalid_grant");
	cr_assert_str_eq(msg, "bad");
	json_decref(j);
	j = gce_answer_parse(502, "<html>bad gateway</html>", 24, reason, sizeof(reason), msg,
			     sizeof(msg));
	cr_assert_null(j);
	cr_assert_str_eq(reason, "httpError");
	cr_assert_str_eq(msg, "HTTP 502");
	j = gce_answer_parse(200, "{\"kind\": \"compute#operation\"}", 29, reason, sizeof(reason),
			     msg, sizeof(msg));
	cr_assert_str_eq(reason, "");
	cr_assert_str_eq(json_string_value(json_object_get(j, "kind")), "compute#operation");
	json_decref(j);
}
