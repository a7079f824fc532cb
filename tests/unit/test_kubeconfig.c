/*
 * drivers/kubernetes/kubeconfig: the kubeconfig as kubectl reads it, on
 * files written to a temporary directory: the context (the provider's, or
 * current-context), a KUBECONFIG list merged first-wins, CA data vs a CA
 * file (relative to the kubeconfig naming it), token vs tokenFile, client
 * certificates, the in-cluster service account when there is no context,
 * and an exec plugin refused with a reason.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "drivers/kubernetes/kubeconfig.h"

static char dir[64];

static void
setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/np-kubeconfig.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	setenv("HOME", dir, 1);
	unsetenv("KUBECONFIG");
	unsetenv("KUBERNETES_SERVICE_HOST");
	unsetenv("KUBERNETES_SERVICE_PORT");
	setenv("NODEPOOLD_K8S_SA_DIR", "/nonexistent", 1);
}

static void
teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		cr_log_warn("cannot remove %s", dir);
}

/* Write text to dir/name; the path is returned (static buffer per call
 * slot). */
static const char *
put(const char *name, const char *text)
{
	static char paths[8][256];
	static int slot;
	char *p = paths[slot++ % 8];
	FILE *f;

	snprintf(p, 256, "%s/%s", dir, name);
	f = fopen(p, "w");
	cr_assert_not_null(f, "%s", p);
	fputs(text, f);
	fclose(f);
	return p;
}

/* "LS0t..." is base64 of "-----BEGIN CERTIFICATE-----\nCA-A\n" */
#define CA_A_PEM "-----BEGIN CERTIFICATE-----\nCA-A\n"
#define CA_A_B64 "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkNBLUEK"

static const char *const kc_two_contexts = "apiVersion: v1\n"
					   "kind: Config\n"
					   "current-context: alpha\n"
					   "clusters:\n"
					   "- name: a\n"
					   "  cluster:\n"
					   "    server: https://a.example:6443/\n"
					   "    certificate-authority-data: " CA_A_B64 "\n"
					   "- name: b\n"
					   "  cluster:\n"
					   "    server: https://b.example:6443\n"
					   "    certificate-authority: certs/ca-b.crt\n"
					   "contexts:\n"
					   "- name: alpha\n"
					   "  context: {cluster: a, user: tok, namespace: zuul}\n"
					   "- name: beta\n"
					   "  context: {cluster: b, user: tokfile}\n"
					   "users:\n"
					   "- name: tok\n"
					   "  user: {token: inline-token}\n"
					   "- name: tokfile\n"
					   "  user: {tokenFile: token.txt}\n";

TestSuite(kubeconfig, .init = setup, .fini = teardown);

Test(kubeconfig, current_context_with_ca_data_and_token)
{
	struct k8s_conn c;
	char err[512] = "";

	setenv("KUBECONFIG", put("config", kc_two_contexts), 1);
	cr_assert_eq(k8s_conn_load(NULL, &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.context, "alpha");
	cr_assert_str_eq(c.server, "https://a.example:6443", "trailing '/' dropped");
	cr_assert_str_eq(c.ca_pem, CA_A_PEM);
	cr_assert_str_eq(c.token, "inline-token");
	cr_assert_str_eq(c.namespace, "zuul");
	cr_assert_null(c.cert_pem);
	cr_assert_eq(c.insecure, 0);
	k8s_conn_clear(&c);
}

Test(kubeconfig, provider_context_with_ca_file_and_token_file)
{
	struct k8s_conn c;
	char err[512] = "", sub[128];

	setenv("KUBECONFIG", put("config", kc_two_contexts), 1);
	snprintf(sub, sizeof(sub), "%s/certs", dir);
	cr_assert_eq(mkdir(sub, 0700), 0);
	put("certs/ca-b.crt", "-----BEGIN CERTIFICATE-----\nCA-B\n");
	put("token.txt", "file-token\n");
	cr_assert_eq(k8s_conn_load("beta", &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.context, "beta");
	cr_assert_str_eq(c.server, "https://b.example:6443");
	cr_assert_str_eq(c.ca_pem, "-----BEGIN CERTIFICATE-----\nCA-B\n",
			 "the CA file is read relative to the kubeconfig");
	cr_assert_str_eq(c.token, "file-token", "the token file's newline is dropped");
	cr_assert_null(c.namespace);
	k8s_conn_clear(&c);
}

Test(kubeconfig, unknown_context_names_the_file)
{
	struct k8s_conn c;
	char err[512] = "";
	const char *p = put("config", kc_two_contexts);

	setenv("KUBECONFIG", p, 1);
	cr_assert_eq(k8s_conn_load("gamma", &c, err, sizeof(err)), -1);
	cr_assert(strstr(err, "context gamma not found in") != NULL, "%s", err);
	cr_assert(strstr(err, p) != NULL, "%s", err);
}

Test(kubeconfig, missing_ca_file_is_named)
{
	struct k8s_conn c;
	char err[512] = "";

	setenv("KUBECONFIG", put("config", kc_two_contexts), 1);
	put("certs", ""); /* a file, so certs/ca-b.crt cannot exist */
	cr_assert_eq(k8s_conn_load("beta", &c, err, sizeof(err)), -1);
	cr_assert(strstr(err, "cluster b: ") != NULL && strstr(err, "ca-b.crt") != NULL, "%s", err);
}

Test(kubeconfig, kubeconfig_list_merges_first_wins)
{
	struct k8s_conn c;
	char err[512] = "", list[1024];
	/* the first file: its current-context, and a user "tok" that
	 * shadows the second file's */
	const char *first = put("first", "current-context: beta\n"
					 "users:\n"
					 "- name: tokfile\n"
					 "  user: {token: first-wins}\n"
					 "contexts:\n"
					 "- name: alpha\n"
					 "  context: {cluster: a, user: tokfile}\n");
	const char *second = put("second", kc_two_contexts);

	snprintf(list, sizeof(list), "%s/missing:%s:%s", dir, first, second);
	setenv("KUBECONFIG", list, 1);
	put("certs", "");
	/* current-context beta from the first file; context beta, cluster b
	 * from the second; cluster b's CA file missing: the error names it */
	cr_assert_eq(k8s_conn_load(NULL, &c, err, sizeof(err)), -1);
	cr_assert(strstr(err, "ca-b.crt") != NULL, "%s", err);
	/* alpha: the first file's context wins (user tokfile), whose user
	 * is the first file's too (an inline token, no token file read) */
	cr_assert_eq(k8s_conn_load("alpha", &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.server, "https://a.example:6443");
	cr_assert_str_eq(c.token, "first-wins");
	cr_assert_null(c.namespace, "the first file's alpha has no namespace");
	k8s_conn_clear(&c);
}

Test(kubeconfig, home_kube_config_without_kubeconfig)
{
	struct k8s_conn c;
	char err[512] = "", kd[128];

	snprintf(kd, sizeof(kd), "%s/.kube", dir);
	cr_assert_eq(mkdir(kd, 0700), 0);
	put(".kube/config", kc_two_contexts);
	cr_assert_eq(k8s_conn_load("alpha", &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.token, "inline-token");
	k8s_conn_clear(&c);
}

Test(kubeconfig, client_certificate_needs_its_key)
{
	struct k8s_conn c;
	char err[512] = "";

	setenv("KUBECONFIG",
	       put("config", "current-context: c\n"
			     "clusters: [{name: a, cluster: {server: 'https://a:1', "
			     "insecure-skip-tls-verify: true}}]\n"
			     "contexts: [{name: c, context: {cluster: a, user: u}}]\n"
			     "users: [{name: u, user: {client-certificate-data: " CA_A_B64 "}}]\n"),
	       1);
	cr_assert_eq(k8s_conn_load(NULL, &c, err, sizeof(err)), -1);
	cr_assert_str_eq(err, "user u: a client certificate needs its key");
	setenv("KUBECONFIG",
	       put("config2", "current-context: c\n"
			      "clusters: [{name: a, cluster: {server: 'https://a:1', "
			      "insecure-skip-tls-verify: true}}]\n"
			      "contexts: [{name: c, context: {cluster: a, user: u}}]\n"
			      "users: [{name: u, user: {client-certificate-data: " CA_A_B64
			      ", client-key-data: " CA_A_B64 "}}]\n"),
	       1);
	cr_assert_eq(k8s_conn_load(NULL, &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.cert_pem, CA_A_PEM);
	cr_assert_str_eq(c.key_pem, CA_A_PEM);
	cr_assert_eq(c.insecure, 1);
	cr_assert_null(c.ca_pem);
	k8s_conn_clear(&c);
}

Test(kubeconfig, exec_user_is_refused_with_a_reason)
{
	struct k8s_conn c;
	char err[512] = "";

	setenv("KUBECONFIG",
	       put("config", "current-context: eks\n"
			     "clusters: [{name: a, cluster: {server: 'https://a:1'}}]\n"
			     "contexts: [{name: eks, context: {cluster: a, user: aws}}]\n"
			     "users:\n"
			     "- name: aws\n"
			     "  user:\n"
			     "    exec:\n"
			     "      apiVersion: client.authentication.k8s.io/v1beta1\n"
			     "      command: aws\n"
			     "      args: [eks, get-token, --cluster-name, x]\n"),
	       1);
	cr_assert_eq(k8s_conn_load(NULL, &c, err, sizeof(err)), -1);
	cr_assert_str_eq(err, "user aws uses an exec plugin: nodepoold supports tokens, token "
			      "files and client certificates only");
}

Test(kubeconfig, no_context_falls_back_to_in_cluster)
{
	struct k8s_conn c;
	char err[512] = "", sa[128];

	/* a kubeconfig without a current-context, as upstream: in-cluster */
	setenv("KUBECONFIG", put("config", "clusters: []\n"), 1);
	snprintf(sa, sizeof(sa), "%s/sa", dir);
	cr_assert_eq(mkdir(sa, 0700), 0);
	put("sa/token", "sa-token\n");
	put("sa/ca.crt", CA_A_PEM);
	put("sa/namespace", "nodepool\n");
	setenv("NODEPOOLD_K8S_SA_DIR", sa, 1);
	cr_assert_eq(k8s_conn_load(NULL, &c, err, sizeof(err)), -1);
	cr_assert(strstr(err, "not in a cluster") != NULL, "%s", err);
	setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	cr_assert_eq(k8s_conn_load(NULL, &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.context, "in-cluster");
	cr_assert_str_eq(c.server, "https://10.96.0.1:443");
	cr_assert_str_eq(c.token, "sa-token");
	cr_assert_str_eq(c.ca_pem, CA_A_PEM);
	cr_assert_str_eq(c.namespace, "nodepool");
	k8s_conn_clear(&c);
	setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
	cr_assert_eq(k8s_conn_load(NULL, &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.server, "https://[fd00::1]:443");
	k8s_conn_clear(&c);
	/* a context named by the provider is never in-cluster */
	cr_assert_eq(k8s_conn_load("alpha", &c, err, sizeof(err)), -1);
	cr_assert(strstr(err, "context alpha not found") != NULL, "%s", err);
}

Test(kubeconfig, base64_ignores_blanks_and_rejects_garbage)
{
	size_t n;
	char *s = k8s_b64decode(" aGVs\nbG8= ", &n);

	cr_assert_str_eq(s, "hello");
	cr_assert_eq(n, 5);
	free(s);
	cr_assert_null(k8s_b64decode("aGVsbG8", NULL));
	cr_assert_null(k8s_b64decode("a!b@", NULL));
}
