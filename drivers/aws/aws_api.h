/*
 * AWS API plumbing for the aws adapter (drivers/aws/aws.c): credentials
 * and endpoints found as the AWS SDKs find them, calls signed by libcurl's
 * SigV4 (CURLOPT_AWS_SIGV4 through lib/net/http.h), EC2 Query answers
 * parsed with libxml2, throttling retried with backoff.
 *
 * Credentials, in the SDKs' order (botocore's credential chain, minus the
 * instance-metadata and SSO providers):
 *   1. a profile named by the provider (`profile-name`): that profile of
 *      the shared credentials file, else of the config file;
 *   2. else AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN);
 *   3. else the profile AWS_PROFILE names (or "default") in the shared
 *      credentials file (AWS_SHARED_CREDENTIALS_FILE, ~/.aws/credentials),
 *      then in the config file (AWS_CONFIG_FILE, ~/.aws/config, where it is
 *      "[profile NAME]", "[default]" for the default).
 * Endpoints: AWS_ENDPOINT_URL_EC2 / _S3 / _SERVICE_QUOTAS, else
 * AWS_ENDPOINT_URL (as the SDKs since 2023: botocore 1.31, aws-sdk-go-v2),
 * else https://<service>.<region>.amazonaws.com. Upstream Nodepool has no
 * endpoint override; nodepoold reads these for simulators and private
 * endpoints.
 */
#ifndef NP_AWS_API_H
#define NP_AWS_API_H

#include <stddef.h>
#include <libxml/tree.h>

struct event_base;
struct http_client;

/* What the credential chain found; strings malloc'd (aws_creds_clear). */
struct aws_creds {
	char *access_key_id, *secret_access_key, *session_token;
	char *source; /* "env", "profile default in /root/.aws/credentials"... */
};

/*
 * Resolve credentials as above. profile: the provider's profile-name or
 * NULL. env: a getenv-like lookup (NULL: getenv), so tests need not touch
 * the process environment. 0, or -1 with a one-line reason in err.
 */
int aws_creds_find(struct aws_creds *out, const char *profile, const char *(*env)(const char *name),
		   char *err, size_t errlen);
void aws_creds_clear(struct aws_creds *c);

/* The endpoint base URL (no trailing '/') of service ("ec2", "s3",
 * "servicequotas") in region, malloc'd. env as above. */
char *aws_endpoint(const char *service, const char *region, const char *(*env)(const char *name));

/* ---- calls ----------------------------------------------------------------- */

struct aws_api;

/* The answer to one call, borrowed during the callback. */
struct aws_result {
	int status;	  /* HTTP status; 0 when no answer came */
	const char *code; /* AWS error code ("InvalidInstanceID.NotFound",
			     "RequestLimitExceeded"...), or "HttpError" / "ConnectionError";
			     NULL on success */
	const char *message;
	xmlNode *root;	  /* EC2 / S3 XML answer's root element (success), or NULL */
	const char *body; /* raw body (Service Quotas JSON) */
	size_t body_len;
	unsigned attempts; /* calls made (throttled ones retried) */
	const char *etag;  /* S3: the ETag header, or NULL */
};
typedef void (*aws_cb)(const struct aws_result *r, void *arg);

struct aws_api_options {
	const char *region;
	double rate;	    /* mutating calls per second (<= 0 unlimited);
			       describes/lists run at 10x (as upstream) */
	int max_retries;    /* throttling/5xx/connection retries (default 6) */
	double backoff_max; /* s (default 20) */
	const char *(*env)(const char *name);
};

/* NULL with err on failure (no credentials...). */
struct aws_api *aws_api_new(struct event_base *base, const struct aws_api_options *o,
			    const char *profile, char *err, size_t errlen);
void aws_api_free(struct aws_api *a); /* cancels everything, no callbacks */
const struct aws_creds *aws_api_creds(const struct aws_api *a);

struct aws_call;
/*
 * An EC2 Query call: params is the form after Action/Version
 * ("InstanceId.1=i-1&..." already encoded, or ""). mutating selects the
 * rate limit. The callback is called once, later, unless cancelled.
 */
struct aws_call *aws_ec2(struct aws_api *a, const char *action, const char *params, int mutating,
			 aws_cb cb, void *arg);
/* A Service Quotas JSON 1.1 call (target "GetServiceQuota"...), body JSON. */
struct aws_call *aws_quotas(struct aws_api *a, const char *target, const char *json, aws_cb cb,
			    void *arg);
/* An S3 call: method, "/bucket/key?query" (encoded), body (may be NULL).
 * The payload's SHA-256 goes in x-amz-content-sha256 (S3 requires it;
 * libcurl 7.88 does not add it). */
struct aws_call *aws_s3(struct aws_api *a, const char *method, const char *path, const void *body,
			size_t len, const char *const *headers, aws_cb cb, void *arg);
void aws_call_cancel(struct aws_call *c); /* NULL no-op; no callback */

/* Counters: calls answered per action ("ec2:RunInstances"...), JSON object
 * (borrowed). */
const struct json_t *aws_api_counts(const struct aws_api *a);
unsigned long long aws_api_total(const struct aws_api *a);

/*
 * The decoder of what AWS answers (exposed for fuzzing): status and body
 * of one answer; xml: EC2/S3 (XML), else Service Quotas (JSON). On a 2xx
 * XML answer returns the document (free with xmlFreeDoc) and code "";
 * otherwise NULL, with the AWS error code and message in code/msg ("" and
 * "" for a 2xx non-XML answer; "HttpError" / "MalformedAnswer" when the
 * body says nothing usable). Never fails on any input.
 */
xmlDoc *aws_answer_parse(int status, const char *body, size_t len, int xml, char *code,
			 size_t codelen, char *msg, size_t msglen);

/* ---- XML and form helpers ---------------------------------------------------- */

/* The first child element of n named name (local name), or NULL. */
xmlNode *aws_xchild(const xmlNode *n, const char *name);
/* Follow a "a/b/c" path of child elements. */
xmlNode *aws_xpath(const xmlNode *n, const char *path);
/* The text of child `path` of n copied to buf (""/0 when missing); returns buf. */
const char *aws_xtext(const xmlNode *n, const char *path, char *buf, size_t len);
/* Next sibling element named like n (for "item" lists). */
xmlNode *aws_xnext(const xmlNode *n);

/* Append "&k=v" (both form-encoded) to a growing string (malloc'd, *s may
 * be NULL). Encodes with libcurl: aws_api_new() (or http_load()) first. */
void aws_form_add(char **s, const char *k, const char *v);
void aws_form_addf(char **s, const char *v, const char *kfmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
