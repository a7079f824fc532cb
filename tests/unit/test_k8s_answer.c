/*
 * drivers/kubernetes/k8s_answer: the kubernetes drivers' reading of the
 * API server's answers, on real-shaped answers (the seeds of
 * tests/fuzz/corpus/k8s_answer/, shaped as a kube-apiserver answers): a
 * Running pod, ImagePullBackOff, Unschedulable with the scheduler's
 * message, a Failed pod, Status errors (409, 403 quota), a service-account
 * token Secret, namespace and project listings for leak cleanup.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "drivers/kubernetes/k8s_answer.h"

#define CORPUS "tests/fuzz/corpus/k8s_answer/"

/* A seed answer, decoded as the driver decodes a body. */
static json_t *
answer(const char *name)
{
	char path[256], *buf;
	FILE *f;
	long n;
	json_t *j;

	snprintf(path, sizeof(path), CORPUS "%s", name);
	f = fopen(path, "rb");
	cr_assert_not_null(f, "%s (run from the top of the tree)", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	j = k8s_answer_json(buf, (size_t)n);
	free(buf);
	cr_assert_not_null(j, "%s decodes", name);
	return j;
}

Test(k8s_answer, running_pod_gives_its_node)
{
	json_t *pod = answer("pod_running.json");
	const char *node = NULL;
	char why[256];

	cr_assert_eq(k8s_pod_read(pod, why, sizeof(why), &node), K8S_POD_RUNNING);
	cr_assert_str_eq(node, "worker-1");
	json_decref(pod);
}

Test(k8s_answer, image_pull_backoff_fails_at_once_with_the_kubelet_message)
{
	json_t *pod = answer("pod_imagepullbackoff.json");
	const char *node = "x";
	char why[256];

	cr_assert_eq(k8s_pod_read(pod, why, sizeof(why), &node), K8S_POD_FAILED);
	cr_assert_null(node);
	cr_assert_str_eq(why, "image pull failed: ImagePullBackOff: Back-off pulling image "
			      "\"docker.io/nosuch:1\"");
	json_decref(pod);
}

Test(k8s_answer, unschedulable_pod_waits_with_the_scheduler_message)
{
	json_t *pod = answer("pod_unschedulable.json");
	char why[512];

	cr_assert_eq(k8s_pod_read(pod, why, sizeof(why), NULL), K8S_POD_PENDING);
	cr_assert_str_eq(why, "not scheduled: Unschedulable: 0/3 nodes are available: 3 "
			      "Insufficient cpu. preemption: 0/3 nodes are available: 3 No "
			      "preemption victims found for incoming pod.");
	json_decref(pod);
}

Test(k8s_answer, failed_pod_fails_with_its_message)
{
	json_t *pod = answer("pod_failed.json");
	char why[256];

	cr_assert_eq(k8s_pod_read(pod, why, sizeof(why), NULL), K8S_POD_FAILED);
	cr_assert_str_eq(why, "pod Failed: The node was low on resource: ephemeral-storage.");
	json_decref(pod);
}

Test(k8s_answer, container_creating_is_pending)
{
	json_t *pod = json_loads("{\"status\": {\"phase\": \"Pending\", \"containerStatuses\": "
				 "[{\"state\": {\"waiting\": {\"reason\": "
				 "\"ContainerCreating\"}}}]}}",
				 0, NULL);
	char why[256];

	cr_assert_eq(k8s_pod_read(pod, why, sizeof(why), NULL), K8S_POD_PENDING);
	cr_assert_str_eq(why, "container waiting: ContainerCreating: ");
	json_decref(pod);
}

Test(k8s_answer, reason_is_cut_to_fit)
{
	json_t *pod = answer("pod_unschedulable.json");
	char why[16];

	cr_assert_eq(k8s_pod_read(pod, why, sizeof(why), NULL), K8S_POD_PENDING);
	cr_assert_str_eq(why, "not scheduled: ");
	json_decref(pod);
}

Test(k8s_answer, not_a_pod_is_pending)
{
	json_t *v = json_loads("[1, \"Running\"]", 0, NULL);
	char why[64];

	cr_assert_eq(k8s_pod_read(v, why, sizeof(why), NULL), K8S_POD_PENDING);
	cr_assert_str_eq(why, "pod Pending");
	cr_assert_eq(k8s_pod_read(NULL, why, sizeof(why), NULL), K8S_POD_PENDING);
	json_decref(v);
}

Test(k8s_answer, status_409_is_described)
{
	json_t *st = answer("status_409.json");
	char out[256];

	k8s_status_describe("POST /api/v1/namespaces", 409, NULL, st, out, sizeof(out));
	cr_assert_str_eq(out, "POST /api/v1/namespaces: 409 AlreadyExists: namespaces "
			      "\"main-0000000042\" already exists");
	cr_assert_not(k8s_status_is_quota(409, st));
	k8s_status_describe("POST /api/v1/namespaces", 0, "Connection refused", st, out,
			    sizeof(out));
	cr_assert_str_eq(out, "POST /api/v1/namespaces: Connection refused");
	k8s_status_describe("GET /x", 502, NULL, NULL, out, sizeof(out));
	cr_assert_str_eq(out, "GET /x: 502 ");
	json_decref(st);
}

Test(k8s_answer, resource_quota_refusal_is_a_quota_error)
{
	json_t *st = answer("status_403_quota.json");

	cr_assert(k8s_status_is_quota(403, st));
	json_decref(st);
	st = answer("status_429.json");
	cr_assert_not(k8s_status_is_quota(429, st));
	cr_assert_not(k8s_status_is_quota(403, st));
	json_decref(st);
}

Test(k8s_answer, token_secret_is_decoded)
{
	json_t *s = answer("secret_token.json");
	char *tok, *ca;

	cr_assert_eq(k8s_secret_token(s, 1, &tok, &ca), 0);
	cr_assert_str_eq(tok, "eyJhbGciOiJSUzI1NiIsImtpZCI6IkRPbm9zdWNoIn0.eyJpc3MiOiJrdWJlcm5ldGV"
			      "zL3NlcnZpY2VhY2NvdW50In0.c2lnbmF0dXJl");
	cr_assert_not_null(ca);
	cr_assert(strncmp(ca, "-----BEGIN CERTIFICATE-----\n", 28) == 0);
	free(tok);
	free(ca);
	json_decref(s);
}

Test(k8s_answer, unfilled_secret_is_not_ready)
{
	json_t *s = answer("secret_unfilled.json"), *noca;
	char *tok = (char *)1, *ca = (char *)1;

	cr_assert_eq(k8s_secret_token(s, 0, &tok, &ca), 1);
	cr_assert_null(tok);
	cr_assert_null(ca);
	json_decref(s);
	/* a token without its CA: ready only when the CA is not needed */
	noca = json_loads("{\"data\": {\"token\": \"dG9r\"}}", 0, NULL);
	cr_assert_eq(k8s_secret_token(noca, 1, &tok, &ca), 1);
	cr_assert_eq(k8s_secret_token(noca, 0, &tok, &ca), 0);
	cr_assert_str_eq(tok, "tok");
	cr_assert_null(ca);
	free(tok);
	json_decref(noca);
}

Test(k8s_answer, token_not_base64_is_an_error)
{
	json_t *s = json_loads("{\"data\": {\"token\": \"not base64!\"}}", 0, NULL);
	char *tok, *ca;

	cr_assert_eq(k8s_secret_token(s, 0, &tok, &ca), -1);
	cr_assert_null(tok);
	cr_assert_null(ca);
	json_decref(s);
}

Test(k8s_answer, namespace_listing_keeps_this_providers_namespaces)
{
	json_t *l = answer("namespace_list.json");
	json_t *owned = k8s_list_owned(json_object_get(l, "items"), 0, "kubespray");
	const json_t *o;

	cr_assert_not_null(owned);
	cr_assert_eq(json_array_size(owned), 1);
	o = json_array_get(owned, 0);
	cr_assert_str_eq(json_string_value(json_object_get(o, "name")), "main-0000000042");
	o = json_object_get(o, "metadata");
	cr_assert_str_eq(json_string_value(json_object_get(o, "nodepool_node_id")), "0000000042");
	cr_assert_str_eq(json_string_value(json_object_get(o, "nodepool_pool_name")), "main");
	json_decref(owned);
	owned = k8s_list_owned(json_object_get(l, "items"), 0, "other");
	cr_assert_eq(json_array_size(owned), 1);
	json_decref(owned);
	cr_assert_null(k8s_list_owned(json_object_get(l, "kind"), 0, "kubespray"));
	json_decref(l);
}

Test(k8s_answer, project_listing_reads_the_description)
{
	json_t *l = answer("project_list.json");
	json_t *owned = k8s_list_owned(json_object_get(l, "items"), 1, "kubespray");
	const json_t *o;

	cr_assert_eq(json_array_size(owned), 1);
	o = json_array_get(owned, 0);
	cr_assert_str_eq(json_string_value(json_object_get(o, "name")), "main-0000000044");
	cr_assert_str_eq(
	    json_string_value(json_object_get(json_object_get(o, "metadata"), "nodepool_node_id")),
	    "0000000044");
	json_decref(owned);
	/* read as namespaces (labels), projects carry no nodepool labels */
	owned = k8s_list_owned(json_object_get(l, "items"), 0, "kubespray");
	cr_assert_eq(json_array_size(owned), 0);
	json_decref(owned);
	json_decref(l);
}

Test(k8s_answer, bodies_that_are_not_json)
{
	cr_assert_null(k8s_answer_json("", 0));
	cr_assert_null(k8s_answer_json("<html>502 Bad Gateway</html>", 28));
	cr_assert_null(k8s_answer_json(NULL, 3));
}

Test(k8s_answer, token_request_gives_its_token_and_expiry)
{
	json_t *tr = answer("token_request.json");
	char *tok;
	double exp;

	cr_assert_eq(k8s_token_request_read(tr, &tok, &exp), 0);
	cr_assert_str_eq(tok, "eyJhbGciOiJSUzI1NiIsImtpZCI6IkRPbm9zdWNoIn0.eyJpc3MiOiJrdWJlcm5ldGV"
			      "zL3NlcnZpY2VhY2NvdW50In0.c2lnbmF0dXJl");
	cr_assert_eq(exp, 1827415800.0); /* 2027-11-28T15:30:00Z */
	free(tok);
	/* other spellings of the same time RFC 3339 allows */
	json_object_set_new(json_object_get(tr, "status"), "expirationTimestamp",
			    json_string("2027-11-28T17:30:00.250+02:00"));
	cr_assert_eq(k8s_token_request_read(tr, &tok, &exp), 0);
	cr_assert_eq(exp, 1827415800.0);
	free(tok);
	/* an unreadable time is no expiry known; no token is no answer */
	json_object_set_new(json_object_get(tr, "status"), "expirationTimestamp",
			    json_string("next year"));
	cr_assert_eq(k8s_token_request_read(tr, &tok, &exp), 0);
	cr_assert_eq(exp, 0.0);
	free(tok);
	json_object_del(json_object_get(tr, "status"), "token");
	tok = (char *)1;
	cr_assert_eq(k8s_token_request_read(tr, &tok, &exp), -1);
	cr_assert_null(tok);
	cr_assert_eq(exp, 0.0);
	json_decref(tr);
}
