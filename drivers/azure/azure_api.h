/*
 * Azure Resource Manager plumbing for the azure adapter (drivers/azure/
 * azure.c), as upstream Nodepool's nodepool/driver/azure/azul.py: the
 * service principal's auth file, OAuth2 client-credentials tokens, and
 * ARM calls through lib/net/http.h (libcurl multi on the worker's loop).
 *
 * The auth file (the provider's `auth-path`) is the JSON `az ad sp
 * create-for-rbac --sdk-auth` writes and upstream reads: clientId,
 * clientSecret, subscriptionId, tenantId, and the endpoint keys
 * activeDirectoryEndpointUrl (default https://login.microsoftonline.com)
 * and resourceManagerEndpointUrl (default https://management.azure.com/).
 * Upstream ignores the endpoint keys and always talks to the public cloud;
 * nodepoold follows them, as the Azure SDKs and azure-cli do for other
 * clouds, so a sovereign cloud or a simulator can be named there.
 * A CA bundle to trust instead of the system store is taken from
 * REQUESTS_CA_BUNDLE, the variable azure-cli (python requests) reads.
 *
 * Tokens: POST <ad>/<tenantId>/oauth2/token, grant_type client_credentials
 * with clientId, clientSecret and resource <arm>/ (azul.py's AzureAuth);
 * renewed when less than 60 s remain (expires_on), calls waiting meanwhile;
 * a 401 from ARM drops the token and the call is sent once more.
 *
 * Two http clients, one per API (login, ARM): the provider's `rate`
 * applies to ARM; 429 and 503 are retried after Retry-After by
 * lib/net/http.c. Other 5xx and connection errors are retried here, up to
 * 3 times with 1, 2, 4 s between (ARM's PUT and DELETE are idempotent).
 */
#ifndef NP_AZURE_API_H
#define NP_AZURE_API_H

#include <stddef.h>
#include <jansson.h>

struct event_base;
struct az_api;
struct az_call;

/* The auth file's keys, malloc'd; endpoints without a trailing '/'. */
struct az_auth {
	char *client_id, *client_secret, *subscription_id, *tenant_id;
	char *ad_endpoint, *arm_endpoint;
};

/* Read and check an auth file: 0, or -1 with a one-line reason in err
 * (file unreadable, not JSON, a required key missing). */
int az_auth_load(struct az_auth *out, const char *path, char *err, size_t errlen);
void az_auth_clear(struct az_auth *a);

/* The answer to one call, borrowed during the callback. */
struct az_result {
	int status;	     /* HTTP status; 0 when no answer came */
	const char *code;    /* NULL on a 2xx; else ARM's error code ("NotFound",
				"OperationNotAllowed"...), "HttpError",
				"ConnectionError" or "AuthenticationFailed" */
	const char *message; /* with code: a one-line message */
	json_t *body;	     /* the decoded 2xx body, or NULL (empty / not JSON) */
	/* Azure-AsyncOperation, else Location, of the answer, or NULL */
	const char *async_url;
	double retry_after; /* the answer's Retry-After, s (-1: none) */
};
typedef void (*az_cb)(const struct az_result *r, void *arg);

/* NULL with err on failure (libcurl missing...). auth is copied; rate:
 * ARM calls per second (<= 0 unlimited). */
struct az_api *az_api_new(struct event_base *base, const struct az_auth *auth, double rate,
			  char *err, size_t errlen);
void az_api_free(struct az_api *a); /* cancels every call, no callbacks; NULL no-op */
const struct az_auth *az_api_auth(const struct az_api *a);

/*
 * One ARM call. where: a full URL (a nextLink, an async operation: used as
 * it is), a path from the ARM root ("/subscriptions/.../x", a resource id)
 * or a path under the subscription ("resourceGroups/rg/providers/...").
 * api_version is appended (as ?api-version= or &api-version=) unless NULL
 * or where is a full URL. body: JSON to send, or NULL. The callback is
 * called once, later, unless cancelled. what: a name for the call counters
 * ("PUT virtualMachines").
 */
struct az_call *az_call(struct az_api *a, const char *method, const char *where,
			const char *api_version, const json_t *body, const char *what, az_cb cb,
			void *arg);
void az_call_cancel(struct az_call *c); /* NULL no-op; no callback */

/*
 * One page write of a page blob through a SAS URL (the upload disk's
 * accessSAS, which carries its own authorisation: no bearer token), as
 * azul.py's upload_sas_chunk: PUT <url>&comp=page with x-ms-blob-type
 * PageBlob, x-ms-page-write Update and Range bytes=<offset>-<offset+len-1>;
 * data (len bytes) is copied. Through a third http client (the storage
 * API). The callback gets the status (201 on success) and, without an
 * answer, code "ConnectionError".
 */
struct az_call *az_blob_put_page(struct az_api *a, const char *sas_url, long long offset,
				 const void *data, size_t len, az_cb cb, void *arg);

/* Calls answered per `what` (borrowed JSON object) and in all, token
 * requests included ("POST token"). */
const json_t *az_api_counts(const struct az_api *a);
unsigned long long az_api_total(const struct az_api *a);

/*
 * The decoder of what ARM answers (exposed for tests): status and body.
 * A 2xx returns the decoded JSON (NULL when empty or not JSON) and sets
 * code ""; otherwise NULL with code and msg from ARM's
 * {"error": {"code", "message"}} (or "HttpError" and the status when the
 * body says nothing usable). Never fails on any input.
 */
json_t *az_answer_parse(int status, const char *body, size_t len, char *code, size_t codelen,
			char *msg, size_t msglen);

/* Standard base64 of data, malloc'd (user-data and custom-data, which
 * Azure takes base64-encoded, as upstream's _encodeData). */
char *az_base64(const void *data, size_t len);

#endif
