/*
 * Fuzz what the kubernetes drivers read from the API server
 * (drivers/kubernetes/k8s_answer.h): the input is an answer body, decoded
 * as the drivers decode it and read as every kind of answer they expect
 * (a Status error for describe and quota, a Pod for its state, a token
 * Secret, a TokenRequest, a NamespaceList / PodList / ProjectList for leak cleanup, with
 * and without the openshift reading). Any body must give an answer or a
 * clear "not this", never a crash; reasons are NUL-terminated and fit.
 * Seeds: tests/fuzz/corpus/k8s_answer/ (real-shaped answers).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* the fuzz build links lib/ and protocol/ only: compile the readers in */
#include "drivers/kubernetes/k8s_answer.c"
#include "drivers/kubernetes/kubeconfig.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
read_listing(const json_t *items, int openshift)
{
	json_t *owned = k8s_list_owned(items, openshift, "kubespray");
	const json_t *o;
	size_t i;

	if (owned == NULL) {
		if (json_is_array(items))
			abort(); /* an array always gives a list */
		return;
	}
	json_array_foreach(owned, i, o)
	{
		const char *name = json_string_value(json_object_get(o, "name"));
		const json_t *meta = json_object_get(o, "metadata");
		if (name == NULL || name[0] == '\0' || !json_is_object(meta) ||
		    strcmp(np_json_str(meta, "nodepool_provider_name", ""), "kubespray") != 0)
			abort();
	}
	json_decref(owned);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *body = k8s_answer_json((const char *)data, size);
	char why[128], small[8];
	const char *node;
	char *tok, *ca;
	enum k8s_pod_state ps;
	int r, need_ca;

	k8s_status_describe("GET /api/v1/namespaces/x", 409, NULL, body, why, sizeof(why));
	if (strlen(why) >= sizeof(why))
		abort();
	k8s_status_describe("DELETE /x", 0, "timed out", body, small, sizeof(small));
	(void)k8s_status_is_quota(403, body);

	ps = k8s_pod_read(body, why, sizeof(why), &node);
	if (ps != K8S_POD_RUNNING && node != NULL)
		abort();
	(void)k8s_pod_read(body, small, sizeof(small), NULL);
	(void)k8s_pod_read(body, why, 0, NULL);

	for (need_ca = 0; need_ca < 2; need_ca++) {
		r = k8s_secret_token(body, need_ca, &tok, &ca);
		if ((r != 0 && (tok != NULL || ca != NULL)) || (r == 0 && tok == NULL))
			abort();
		free(tok);
		free(ca);
	}

	{
		double exp = -1;
		r = k8s_token_request_read(body, &tok, &exp);
		if ((r != 0 && (tok != NULL || exp != 0)) || (r == 0 && tok == NULL) || exp < 0)
			abort();
		free(tok);
	}

	read_listing(json_object_get(body, "items"), 0);
	read_listing(json_object_get(body, "items"), 1);
	read_listing(body, 0);
	json_decref(k8s_item_meta(1, body));
	json_decref(k8s_item_meta(0, body));
	json_decref(body);
	return 0;
}
