/*
 * Private to the openstack driver (drivers/openstack/): the adapter's state
 * (struct sm_adapter), its calls, machines and uploads, and the functions
 * its files share. openstack.c holds the adapter's life (new, stop, free,
 * dump) and the driver's registration; os_api.c, os_quota.c, os_list.c,
 * os_servers.c and os_images.c the rest, by duty (each opens with its
 * role). Not for use outside drivers/openstack/.
 */
#ifndef NP_OS_INT_H
#define NP_OS_INT_H

#include "drivers/statemachine/statemachine.h"

#include <sys/queue.h>
#include <stddef.h>

#include <event2/util.h>

#include "lib/net/http.h"
#include "lib/config/jsonget.h"
#include "drivers/openstack/openstack.h"
#include "lib/config/config.h" /* lib/config: struct np_provider */
#include "drivers/openstack/os_answer.h"
#include "drivers/openstack/os_cloud.h"

#define OS_TOKEN_MARGIN	  300.0 /* s: fetch a new token this long before expiry */
#define OS_IMAGE_RECHECK  300.0 /* s: a missing cloud image is looked up again (upstream) */
#define OS_AUTH_RETRY	  5.0	/* s: after a failed authentication */
#define OS_FIP_POLL	  1.0	/* s */
#define OS_UPLOAD_POLL	  2.0	/* s */
#define OS_STARTUP_RETRY  10.0	/* s: flavors, networks, AZs after a failed read */
#define OS_MAX_LIST_PAGES 100

enum os_svc { SVC_COMPUTE, SVC_NETWORK, SVC_IMAGE, SVC_VOLUME, SVC_IDENTITY, NSVC };

struct os_call;
typedef void (*os_call_cb)(struct os_call *c, int status, const char *error, json_t *body,
			   const struct http_response *res);

/* One API call: waits for a token, runs, re-authenticates once on a 401. */
struct os_call {
	TAILQ_ENTRY(os_call) entry;
	struct sm_adapter *a;
	enum os_svc svc;
	char *method, *path; /* path: under the service endpoint, or a full URL */
	char *body;
	size_t body_len;
	char *body_file;
	const char *ctype;
	struct http_req *req;
	struct event *ev; /* deferred error */
	int waiting_auth, reauthed;
	os_call_cb cb;
	void *owner;   /* machine or operation */
	void *ucb;     /* the slot's callback */
	void *uarg;    /* and its argument */
	json_t *extra; /* call-specific state */
};

/* A waiter for the next server listing. */
struct os_listwait {
	TAILQ_ENTRY(os_listwait) entry;
	int kind; /* 0 instances, 1 resources */
	void *cb, *arg;
};

struct osm;
struct upload;

struct sm_adapter {
	const struct sm_env *env;
	struct event_base *base;
	struct os_cloud cloud;
	struct http_client *http[NSVC];
	char *ep[NSVC];
	char *token, *project_id;
	double token_exp; /* epoch */
	struct os_call *auth_call;
	double auth_failed_at;
	char auth_error[256];
	int auth_ok_once;
	TAILQ_HEAD(, os_call) calls;
	TAILQ_HEAD(, osm) machines;
	TAILQ_HEAD(, upload) uploads_inflight;
	/* config */
	double rate_s;
	int clean_fips;
	double port_cleanup_interval;
	int any_bfv;
	/* flavors (sorted by ram), external networks, AZs */
	json_t *flavors;
	struct os_call *flavors_call;
	double flavors_failed_at;
	json_t *ext_nets; /* array of network objects; NULL until read */
	struct os_call *ext_call;
	double ext_failed_at;
	struct np_strv azs;
	int azs_read;
	struct os_call *azs_call;
	/* name -> {"id": id or null, "at": time} */
	json_t *images, *nets;
	/* the shared server listing */
	json_t *servers; /* object id -> server */
	json_t *page;	 /* listing being assembled */
	unsigned long long list_seq, list_done_seq;
	double list_started, list_done_started; /* the last listing's, the newest in's */
	struct os_call *list_call;
	struct event *list_timer;
	int list_wanted;
	TAILQ_HEAD(, os_listwait) listwaits;
	/* cleanup */
	json_t *down_ports; /* array of ids seen DOWN at the last look, or NULL */
	double down_ports_at;
	struct os_call *ports_call, *fips_call;
	/* counters */
	unsigned long long calls_by_svc[NSVC], auths, reauths, creates, create_errors, quota_errors,
	    deletes, listings, fips_created, fips_deleted, leaked_ports, leaked_fips, uploads;
	int stopped;
};

/* The answer decoding lives in os_answer.c (pure, fuzzed). */
#define parse_iso    os_parse_iso
#define error_text   os_error_text
#define is_quota_msg os_is_quota_msg

/* An id from the cloud or a node record (external_id) as one URL path
 * segment (urlsafe.h): "../images/x" names no other resource. "-" (no such
 * resource) when it is too long to be an id. */
#define OS_SEG_MAX 768
#define ID(s)	   os_seg((s), (char[OS_SEG_MAX]){0})

/* ---- machines (declared early: lookups wake them) ------------------------------------------ */

enum osm_state {
	OS_START,
	OS_SUBMITTED,
	OS_BUILDING,
	OS_FIP_PORT,
	OS_FIP_CREATE,
	OS_FIP_WAIT,
	OS_DEL_PORTS,
	OS_DEL_FIPS,
	OS_DEL_SERVER,
	OS_DELETING,
	OS_DONE,
	OS_FAILED,
};

struct osm {
	struct sm_machine m; /* first */
	TAILQ_ENTRY(osm) entry;
	struct sm_adapter *a;
	int create;
	enum osm_state st;
	struct os_call *call; /* in flight */
	int answered;	      /* the last call's answer is in */
	int status;	      /* of the last call */
	char errmsg[240];
	json_t *answer;		/* the last call's body */
	unsigned long long seq; /* a listing started after this is fresh */
	int resumed;		/* an earlier launcher's server (os_resume_machine) */
	double next_poll;
	/* create */
	char *name, *az, *image_id, *image_name;
	const struct sm_label *label;
	json_t *meta;
	json_t *net_ids; /* array */
	json_t *server;	 /* last seen */
	char *fip_id, *fip_addr, *port_id;
	json_t *fip_ids; /* delete: floating IPs to delete */
	size_t fip_next;
	int del_acked; /* delete: the DELETE was accepted */
	json_t *flavor;
};

struct lookup {
	json_t *cache;
	char *name;
	int by_id; /* second try: the name as an id */
	enum os_svc svc;
	const char *kind; /* "images" / "networks" */
};

/* One upload: create the record, PUT the file, wait until active. */
struct upload {
	TAILQ_ENTRY(upload) entry;
	struct sm_adapter *a;
	sm_upload_cb cb;
	void *arg;
	char *id, *file;
	struct event *poll;
	double deadline;
};

/* The services' names, by enum os_svc (os_api.c). */
extern const char *const os_svc_names[NSVC];

/* os_api.c: Keystone, the catalog, calls */
const char *os_jstr(const json_t *o, const char *k);
void os_call_free(struct os_call *c);
void os_call_cancel(struct os_call *c);
struct os_call *os_call_prep(struct sm_adapter *a, enum os_svc svc, const char *method,
			     const char *path, json_t *body, os_call_cb cb, void *owner);
void os_call_go(struct os_call *c);
struct os_call *os_call_new(struct sm_adapter *a, enum os_svc svc, const char *method,
			    const char *path, json_t *body, os_call_cb cb, void *owner);
void os_ignore_answer(struct os_call *c, int status, const char *error, json_t *body,
		      const struct http_response *res);
const char *os_seg(const char *s, char *buf);
void os_urlenc(const char *s, char *out, size_t n);

/* os_quota.c: flavors, networks, AZs, name lookups, quota */
void os_wake_all(struct sm_adapter *a);
void os_flavors_fetch(struct sm_adapter *a);
void os_ext_fetch(struct sm_adapter *a);
void os_azs_done(struct os_call *c, int status, const char *error, json_t *body,
		 const struct http_response *res);
int os_lookup(struct sm_adapter *a, json_t *cache, enum os_svc svc, const char *name,
	      const char **id);
void os_caches_clear(struct sm_adapter *a);
const json_t *os_find_flavor(struct sm_adapter *a, const struct sm_label *l, int *loaded);
const json_t *os_flavor_by_id(struct sm_adapter *a, const char *id);
void os_quota_from_flavor(const json_t *f, const struct sm_label *l, struct drv_quota *q);
int os_ext_net_cb(void *arg, const char *net);
void os_quota_limits(struct sm_adapter *a, sm_quota_cb cb, void *arg);
int os_label_quota(struct sm_adapter *a, const struct sm_label *label, struct drv_quota *out,
		   char *err, size_t errlen);
int os_label_ready(struct sm_adapter *a, const struct sm_label *label);
void os_azs(struct sm_adapter *a, struct np_strv *out);

/* os_list.c: the shared server listing, cleanup listings */
void os_adapter_server_addresses(struct sm_adapter *a, const json_t *server, const char **pub4,
				 const char **priv4, const char **pub6);
struct sm_instance *os_server_instance(struct sm_adapter *a, const json_t *s,
				       const struct sm_label *l, const char *fip);
void os_list_timer_cb(evutil_socket_t fd, short what, void *arg);
void os_list_start(struct sm_adapter *a);
void os_list_instances(struct sm_adapter *a, sm_instances_cb cb, void *arg);
void os_list_resources(struct sm_adapter *a, sm_resources_cb cb, void *arg);
void os_resource_deleted(struct os_call *c, int status, const char *error, json_t *body,
			 const struct http_response *res);
void os_delete_resource(struct sm_adapter *a, const struct sm_resource *r, sm_done_cb cb,
			void *arg);

/* os_servers.c: the create and delete machines, console */
struct sm_machine *os_create_machine(struct sm_adapter *a, const struct sm_create_args *args);
struct sm_machine *os_resume_machine(struct sm_adapter *a, const struct sm_create_args *args,
				     const char *external_id);
struct sm_machine *os_delete_machine(struct sm_adapter *a, const char *external_id);
void os_console_log(struct sm_adapter *a, const struct sm_label *label, const char *external_id,
		    sm_console_cb cb, void *arg);

/* os_images.c: image listing, upload, delete */
void os_list_images(struct sm_adapter *a, drv_image_list_cb cb, void *arg);
void os_upload_free(struct upload *u);
void os_upload_image(struct sm_adapter *a, const struct sm_upload_args *ua, sm_upload_cb cb,
		     void *arg);
void os_delete_image(struct sm_adapter *a, const char *external_id, sm_done_cb cb, void *arg);

#endif
