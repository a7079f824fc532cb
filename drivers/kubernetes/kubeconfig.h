/*
 * Where a Kubernetes API server is and how to authenticate to it, read as
 * kubectl (client-go's clientcmd) and upstream Nodepool's get_client
 * (nodepool/driver/utils_k8s.py, through python-kubernetes'
 * load_kube_config / load_incluster_config) read it:
 *
 *   - the kubeconfig files: $KUBECONFIG (a ':'-separated list, merged: the
 *     first file to define a context, cluster or user by name wins, and
 *     the first current-context wins), else ~/.kube/config;
 *   - the context: the provider's `context`, else the current-context;
 *   - the cluster's server, certificate-authority(-data),
 *     insecure-skip-tls-verify; the user's token, tokenFile,
 *     client-certificate(-data), client-key(-data), username/password
 *     (basic); relative file names are relative to the kubeconfig file
 *     that names them; exec and auth-provider plugins are refused with a
 *     clear error (nodepoold runs no helper programs);
 *   - with no provider context and no usable kubeconfig: the in-cluster
 *     service account (KUBERNETES_SERVICE_HOST/PORT and the token and CA
 *     under /var/run/secrets/kubernetes.io/serviceaccount, or the
 *     directory $NODEPOOLD_K8S_SA_DIR names), as upstream.
 *
 * Reading happens once, at provider start (local files only).
 */
#ifndef NP_K8S_KUBECONFIG_H
#define NP_K8S_KUBECONFIG_H

#include <stddef.h>

/* One resolved connection. Every string is malloc'd or NULL. */
struct k8s_conn {
	char *context;	 /* the context used ("in-cluster" for the service account) */
	char *server;	 /* "https://host:port" (no trailing '/') */
	char *ca_pem;	 /* the CA to trust (PEM text), or NULL: the system store */
	char *cert_pem;	 /* client certificate (PEM), or NULL */
	char *key_pem;	 /* its key (PEM), or NULL */
	char *token;	 /* bearer token, or NULL */
	char *basic;	 /* "user:password", or NULL */
	char *namespace; /* the context's namespace, or NULL */
	int insecure;	 /* insecure-skip-tls-verify */
};

/*
 * Resolve the connection for context (NULL: the current context, else
 * in-cluster). 0 on success with *out filled (free with k8s_conn_clear);
 * -1 with a one-line reason in err ("context foo not in
 * /root/.kube/config", "user bar uses an exec plugin...").
 */
int k8s_conn_load(const char *context, struct k8s_conn *out, char *err, size_t errlen);
void k8s_conn_clear(struct k8s_conn *c);

/*
 * Decode standard base64 (blanks and newlines ignored) into a new
 * NUL-terminated buffer (*len, when len is not NULL, gets its length).
 * NULL when s is not valid base64.
 */
char *k8s_b64decode(const char *s, size_t *len);

#endif
