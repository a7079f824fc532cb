/*
 * Google Compute Engine API plumbing for the gce adapter (drivers/gce/gce.c):
 * credentials found as Google's client libraries find them (google-auth's
 * "application default credentials"), OAuth2 access tokens fetched,
 * cached and renewed on the worker's loop, Compute Engine v1 JSON calls
 * through lib/net/http.h.
 *
 * Credentials, in google-auth's order (google.auth.default, minus the
 * gcloud SDK's own store and the metadata server):
 *   1. the JSON file GOOGLE_APPLICATION_CREDENTIALS names;
 *   2. else the well-known file gcloud writes with `gcloud auth
 *      application-default login`: $CLOUDSDK_CONFIG/application_default_
 *      credentials.json, else ~/.config/gcloud/application_default_
 *      credentials.json.
 * The file is a service-account key ("type": "service_account": an RS256
 * JWT signed with its private_key through OpenSSL, exchanged at its
 * token_uri for an access token, RFC 7523's JWT bearer grant) or an
 * authorized user ("type": "authorized_user": its refresh_token exchanged
 * at token_uri, RFC 6749 section 6). token_uri defaults to Google's
 * https://oauth2.googleapis.com/token; a simulator's key file names its own.
 *
 * Endpoint: CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE (gcloud's override of
 * the Compute API root, "https://host/compute/v1/"), else
 * https://compute.googleapis.com/compute/v1. A CA bundle to trust instead
 * of the system store: CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE (gcloud's
 * core/custom_ca_certs_file). Upstream Nodepool's googleapiclient has
 * neither override; nodepoold reads them for simulators and private
 * endpoints.
 *
 * Clients: one http_client for the Compute API at the provider's rate
 * (upstream's rate-limit, calls per second), one for the token endpoint
 * (unlimited), so a throttled Compute API never delays a token. HTTP 429
 * and 503 are retried by lib/net honouring Retry-After; 5xx, 403
 * rateLimitExceeded and connection errors here, with jittered back-off; a
 * 401 once with a fresh token.
 */
#ifndef NP_GCE_API_H
#define NP_GCE_API_H

#include <stddef.h>
#include <jansson.h>

struct event_base;

/* What the credential search found (gce_creds_clear frees the strings). */
struct gce_creds {
	int service_account;				 /* 1: JWT bearer grant; 0: refresh token */
	char *client_email;				 /* service account */
	char *private_key_id;				 /* JWT "kid", or NULL */
	char *private_key;				 /* PEM */
	char *client_id, *client_secret, *refresh_token; /* authorized user */
	char *token_uri;
	char *project_id; /* the file's, or NULL */
	char *source;	  /* the file read */
};

/*
 * Find and read the credentials file as above. env: a getenv-like lookup
 * (NULL: getenv). 0, or -1 with a one-line reason in err ("no Google
 * credentials: GOOGLE_APPLICATION_CREDENTIALS is not set and ... does not
 * exist", "...: not JSON", "...: no private_key").
 */
int gce_creds_find(struct gce_creds *out, const char *(*env)(const char *name), char *err,
		   size_t errlen);
void gce_creds_clear(struct gce_creds *c);

/*
 * The signed JWT of a service account's token request (RS256; claims iss,
 * scope, aud = token_uri, iat = now, exp = now + 3600), malloc'd; NULL with
 * err when the key does not load or signing fails. Exposed for tests.
 */
char *gce_jwt(const struct gce_creds *c, const char *scope, long long now, char *err,
	      size_t errlen);

/* ---- calls ----------------------------------------------------------------- */

struct gce_api;
struct gce_call;

/* The answer to one call, borrowed during the callback. */
struct gce_result {
	int status;	    /* HTTP status; 0 when no answer came */
	const char *reason; /* NULL on success; else the first errors[].reason of
			       Google's error body ("notFound", "quotaExceeded",
			       "alreadyExists"...), "httpError" when the body
			       names none, "connectionError", "authError" */
	const char *message;
	json_t *body;	   /* the decoded JSON answer, or NULL */
	unsigned attempts; /* attempts made (retries included) */
};
typedef void (*gce_cb)(const struct gce_result *r, void *arg);

struct gce_api_options {
	double rate;	    /* Compute calls per second (<= 0: unlimited) */
	int max_retries;    /* 5xx / connection / rateLimitExceeded retries (default 5) */
	double backoff_max; /* s (default 20) */
	double timeout;	    /* s per attempt (<= 0: lib/net's default) */
	const char *(*env)(const char *name);
};

/* NULL with err on failure (no credentials, libcurl missing). */
struct gce_api *gce_api_new(struct event_base *base, const struct gce_api_options *o, char *err,
			    size_t errlen);
void gce_api_free(struct gce_api *a); /* cancels everything, no callbacks */
const struct gce_creds *gce_api_creds(const struct gce_api *a);
/* The Compute API root in use, without a trailing '/'. */
const char *gce_api_endpoint(const struct gce_api *a);

/*
 * A Compute Engine call: method, path under the API root
 * ("projects/P/zones/Z/instances?maxResults=500"), body (JSON, borrowed:
 * serialised at once) or NULL. kind names the call in the counters
 * ("instances.insert"). The callback runs once, later, unless cancelled.
 */
struct gce_call *gce_compute(struct gce_api *a, const char *kind, const char *method,
			     const char *path, const json_t *body, gce_cb cb, void *arg);
void gce_call_cancel(struct gce_call *c); /* NULL no-op; no callback */

/* Counters: answers per kind (borrowed JSON object), Compute calls made,
 * tokens fetched. */
const json_t *gce_api_counts(const struct gce_api *a);
unsigned long long gce_api_total(const struct gce_api *a);
unsigned long long gce_api_tokens(const struct gce_api *a);

/*
 * The decoder of what Google answers (exposed for fuzzing): status and
 * body of one answer. Returns the decoded JSON (or NULL) and sets reason
 * ("" on a 2xx answer) and message. Never fails on any input.
 */
json_t *gce_answer_parse(int status, const char *body, size_t len, char *reason, size_t reasonlen,
			 char *msg, size_t msglen);

#endif
