/*
 * The ibmvpc driver (ibmvpc.c): drv_ibmvpc for the registry, its
 * state-machine Adapter on its own (for the builder and for tests that
 * drive its slots), and the credential lookup, exposed for unit tests.
 */
#ifndef NP_IBMVPC_H
#define NP_IBMVPC_H

#include <stddef.h>

#include "drivers/driver.h"
#include "drivers/statemachine/adapter.h"

extern const struct driver drv_ibmvpc;

/* The adapter's slots (static storage). */
const struct sm_adapter_ops *ibm_adapter_ops(void);

/*
 * Where the IBM Cloud credentials and endpoints come from, as the IBM
 * Cloud SDK's get_authenticator_from_environment("vpc") finds them
 * (ibm-cloud-sdk-core): the credentials file (the provider's
 * `credentials-file`, which upstream Nodepool puts in IBM_CREDENTIALS_FILE;
 * else IBM_CREDENTIALS_FILE; else ibm-credentials.env in $HOME, then in the
 * working directory), lines KEY=VALUE; when it holds no VPC_* entry, the
 * environment's VPC_* variables. All strings malloc'd (ibm_creds_clear).
 */
struct ibm_creds {
	char *auth_type;    /* VPC_AUTH_TYPE: "iam" (the default) or "bearertoken" */
	char *apikey;	    /* VPC_APIKEY (iam) */
	char *bearer_token; /* VPC_BEARER_TOKEN (bearertoken) */
	char *auth_url;	    /* VPC_AUTH_URL: the IAM base, default https://iam.cloud.ibm.com */
	/* Service endpoints. Upstream pins the VPC one to
	 * https://<region>.iaas.cloud.ibm.com/v1 and the resource APIs to
	 * their global URLs; nodepoold also reads the SDK's <SERVICE>_URL
	 * keys (VPC_URL, RESOURCE_MANAGER_URL, RESOURCE_CONTROLLER_URL), from
	 * the same file or the environment, for private endpoints and
	 * simulators. NULL: the default. */
	char *vpc_url, *rm_url, *rc_url;
	int disable_ssl;      /* VPC_DISABLE_SSL=true: no server verification */
	int auth_disable_ssl; /* VPC_AUTH_DISABLE_SSL=true: same for IAM */
	char *source;	      /* "/path/ibm-credentials.env" or "environment" */
};

/*
 * Find the credentials as above. file: the provider's credentials-file or
 * NULL. env: a getenv-like lookup (NULL: getenv). 0, or -1 with a
 * one-line reason in err (no file and no VPC_* variables, an auth type
 * other than iam/bearertoken, iam without an API key).
 */
int ibm_creds_find(struct ibm_creds *out, const char *file, const char *(*env)(const char *name),
		   char *err, size_t errlen);
void ibm_creds_clear(struct ibm_creds *c); /* NULL-safe */

/*
 * The nodepool metadata upstream encodes in names (adapter.py's
 * get_metadata_from_resource_group_object): an object named np<digits> is
 * node <digits>, npimage<digits>... upload <digits>; a resource group
 * np_<provider>_<pool> gives the provider and pool, npimages_<provider>
 * the provider. rg_name may be NULL. Returns a new JSON object (never
 * NULL).
 */
json_t *ibm_name_metadata(const char *obj_name, const char *rg_name);

/* ---- the parsers of answers (ibm_api.c; fuzzed) ---------------------------------------- */

/*
 * One line for an answer that failed: error (no answer: libcurl's
 * message) as is; else "HTTP <status> <code>: <message>" from the VPC
 * API's {"errors": [{"code", "message"}]}, IAM's {"errorCode",
 * "errorMessage"} or the resource APIs' {"message"}; else the body's start
 * (raw, may be NULL). body may be NULL. Always NUL-terminates out.
 */
void ibm_error_text(int status, const char *error, const json_t *body, const char *raw, char *out,
		    size_t n);

/* The start token of a collection's next.href ("...?start=T&limit=50"),
 * still URL-encoded, copied to out: 1, or 0 when there is none (or it does
 * not fit). */
int ibm_next_start(const char *href, char *out, size_t n);

/* The text of the first <tag>...</tag> in an S3 XML answer from *from on,
 * entities &amp; &lt; &gt; &quot; &apos; decoded, into out (truncated to
 * n - 1 bytes); *from moves past it. 1, or 0 when there is none (*from
 * unchanged). */
int ibm_xml_text(const char **from, const char *tag, char *out, size_t n);

/* s URL-encoded (RFC 3986 unreserved kept) into out, truncated to fit. */
void ibm_urlenc(const char *s, char *out, size_t n);

#endif
