/*
 * What the kubernetes drivers read from the API server's answers, as pure
 * functions of the decoded JSON (no adapter, no I/O), so they can be
 * fuzzed (tests/fuzz/fuzz_k8s_answer.c) and unit-tested
 * (tests/unit/test_k8s_answer.c). Any JSON value of any shape is accepted:
 * a missing or mistyped field reads as absent, never a crash.
 *
 * Answer shapes are the Kubernetes API's (core/v1 Pod, Secret,
 * NamespaceList, meta/v1 Status) and OpenShift's project.openshift.io/v1
 * ProjectList; the readings mirror upstream Nodepool's
 * nodepool/driver/kubernetes/handler.py and provider.py (pod waiting,
 * token secret, cleanupLeakedResources).
 */
#ifndef NP_K8S_ANSWER_H
#define NP_K8S_ANSWER_H

#include <stddef.h>

#include <jansson.h>

/* The prefix of the openshift.io/description annotation under which the
 * openshift driver stores a project's nodepool_* metadata as JSON. */
#define K8S_DESC_PREFIX "nodepool:"

/* Decode an answer body (len bytes, need not be NUL-terminated): the JSON
 * value, or NULL for an empty or undecodable body. New reference. */
json_t *k8s_answer_json(const char *body, size_t len);

/*
 * "POST /api/v1/namespaces: 409 AlreadyExists: namespaces \"x\" already
 * exists" into out (always NUL-terminated): what (the call), then the
 * transport error when error is not NULL, else the status code and the
 * meta/v1 Status object's reason and message when body is one.
 */
void k8s_status_describe(const char *what, int status, const char *error, const json_t *body,
			 char *out, size_t outlen);

/* 1 when an answer is a ResourceQuota refusal (403 whose Status message
 * says "exceeded quota"), which the framework treats as a quota error. */
int k8s_status_is_quota(int status, const json_t *body);

enum k8s_pod_state {
	K8S_POD_PENDING, /* may still start: wait (up to boot-timeout) */
	K8S_POD_RUNNING, /* status.phase Running: the node is ready */
	K8S_POD_FAILED,	 /* will never run: fail the launch attempt now */
};

/*
 * Read a core/v1 Pod: its state, with why (always NUL-terminated) telling
 * a Pending or Failed pod's reason: "pod Failed: <message>", "image pull
 * failed: ImagePullBackOff: <message>" (ErrImagePull, ImagePullBackOff,
 * InvalidImageName, ErrImageNeverPull are fatal, as upstream), "container
 * waiting: <reason>: <message>", "not scheduled: Unschedulable: <the
 * scheduler's message>", else "pod Pending". *node_name (when node_name is
 * not NULL) gets spec.nodeName of a Running pod, borrowed from pod, or
 * NULL.
 */
enum k8s_pod_state k8s_pod_read(const json_t *pod, char *why, size_t whylen,
				const char **node_name);

/*
 * Read a service-account token Secret (data.token, data["ca.crt"], both
 * base64). 0 with *token (and *ca_crt, when there is one) malloc'd and
 * decoded; 1 while the token controller has not filled it (no token, or
 * no CA when need_ca); -1 when the token is not valid base64 (a CA that is
 * not base64 reads as no CA). *token and *ca_crt are NULL unless 0.
 */
int k8s_secret_token(const json_t *secret, int need_ca, char **token, char **ca_crt);

/*
 * Read an authentication.k8s.io/v1 TokenRequest answer (the create of
 * serviceaccounts/<sa>/token): 0 with *token malloc'd (status.token) and
 * *expires the time it stops working (status.expirationTimestamp,
 * RFC 3339 "YYYY-MM-DDTHH:MM:SS[.frac](Z|+hh:mm)", as seconds since the
 * epoch; 0 when absent or unreadable); -1 (*token NULL, *expires 0) when
 * the answer has no token.
 */
int k8s_token_request_read(const json_t *tr, char **token, double *expires);

/*
 * The nodepool_* metadata of one listed Namespace, Pod or (openshift
 * true) Project: from its nodepool_node_id / nodepool_provider_name /
 * nodepool_pool_name labels, or, for a project, the JSON object after
 * K8S_DESC_PREFIX in its openshift.io/description annotation. NULL when
 * the object is not nodepool's. New reference.
 */
json_t *k8s_item_meta(int openshift, const json_t *item);

/*
 * The objects of a listing (items: the "items" array of one or more list
 * answers) that belong to provider: a new array of {"name": <the object's
 * metadata.name>, "metadata": <k8s_item_meta>} for each item with a name
 * whose metadata names provider as nodepool_provider_name. NULL when items
 * is not an array.
 */
json_t *k8s_list_owned(const json_t *items, int openshift, const char *provider);

#endif
