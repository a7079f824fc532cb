/*
 * OpenStack credentials and endpoints, as openstacksdk (os-client-config)
 * finds them, for the openstack adapter (openstack.c). No I/O beyond
 * reading the clouds.yaml / secure.yaml files; no network.
 *
 * Where the files are looked for, first found wins (openstacksdk's
 * CONFIG_FILES order):
 *   clouds.yaml: $OS_CLIENT_CONFIG_FILE, ./clouds.yaml,
 *                $XDG_CONFIG_HOME/openstack/clouds.yaml (default
 *                ~/.config/openstack/), /etc/openstack/clouds.yaml
 *   secure.yaml: $OS_CLIENT_SECURE_FILE, then secure.yaml in the same
 *                three directories; its clouds.<name> is merged over the
 *                cloud's entry (maps merged key by key, as the SDK).
 * The cloud's entry (clouds.<cloud>) gives auth (auth_url, username or
 * user_id, password, project_name/project_id (tenant_* accepted),
 * user_domain_name/_id, project_domain_name/_id, domain_name/_id as their
 * default; or application_credential_id/_name + _secret), auth_type
 * (password, v3password, v3applicationcredential; default password),
 * region_name or regions (a list of names or {name: ...} maps), interface
 * (public), cacert, verify (true), api_timeout (seconds), image_format
 * (qcow2), and <service>_endpoint_override (compute, network, image,
 * volume, block_storage, identity).
 */
#ifndef NP_OS_CLOUD_H
#define NP_OS_CLOUD_H

#include <stddef.h>
#include <jansson.h>

/* One cloud's settings; every string malloc'd or NULL. */
struct os_cloud {
	char *name;
	char *file;   /* the clouds.yaml it came from */
	char *region; /* region to use, or NULL (the catalog's only one) */
	int appcred;  /* 1: application credential auth, 0: password */
	char *auth_url;
	char *username, *user_id, *password;
	char *user_domain_name, *user_domain_id;
	char *project_name, *project_id;
	char *project_domain_name, *project_domain_id;
	char *appcred_id, *appcred_name, *appcred_secret;
	char *interface;    /* "public" (internal, admin) */
	char *cacert;	    /* PEM bundle, or NULL: the system store */
	int verify;	    /* 0: TLS certificates not checked */
	double api_timeout; /* seconds; 0: the HTTP client's default */
	char *image_format; /* "qcow2" unless set */
	json_t *overrides;  /* object: service type -> endpoint URL */
};

/*
 * Find and read the cloud named `cloud` (required) for region `region`
 * (the provider's region-name, or NULL: the cloud's region_name, or its
 * only listed region). Returns 0, or -1 with a one-line message in err
 * (no clouds.yaml found, no such cloud, a region the cloud does not
 * list, no auth_url, a YAML error with its file:line:col).
 */
int os_cloud_load(const char *cloud, const char *region, struct os_cloud *out, char *err,
		  size_t errlen);
void os_cloud_clear(struct os_cloud *c); /* frees the strings; zeroes c */

/*
 * The Keystone v3 POST /v3/auth/tokens body for c (new reference):
 * password auth scoped to the project (by id, else by name in its
 * domain), or an application credential (by id, else by name for the
 * user), unscoped as Keystone requires.
 */
json_t *os_auth_body(const struct os_cloud *c);

/* The token URL: auth_url with "/v3/auth/tokens" (auth_url may end in
 * "/v3" or "/"). malloc'd. */
char *os_token_url(const char *auth_url);

/*
 * The endpoint of the first of `types` (e.g. {"volumev3", "block-storage",
 * "volume", NULL}) in a Keystone v3 catalog (token.catalog array), with
 * this interface and, when region is not NULL, this region (region_id or
 * region). malloc'd, without a trailing '/'; NULL when none matches.
 */
char *os_catalog_url(const json_t *catalog, const char *const *types, const char *interface,
		     const char *region);

#endif
