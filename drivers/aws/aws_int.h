/*
 * Private to the aws driver (drivers/aws/): the adapter's state (struct
 * sm_adapter), its machines and listers, and the functions its files
 * share. aws.c holds the adapter's life (new, stop, free, dump) and the
 * driver's registration; aws_machine.c, aws_list.c, aws_quota.c and
 * aws_images.c the rest, by duty (each opens with its role); aws_api.c the
 * API plumbing (aws_api.h). Not for use outside drivers/aws/.
 */
#ifndef NP_AWS_INT_H
#define NP_AWS_INT_H

#include "drivers/statemachine/statemachine.h"

#include <sys/queue.h>
#include <stddef.h>

#include <event2/util.h>
#include <libxml/tree.h>

#include "drivers/aws/aws_api.h"

#define AWS_POLL	  1.0	/* s: a failed shared describe is retried after this */
#define AWS_PACE	  -1.0	/* poll_schedule: when the framework's pace says */
#define AWS_IDS_PER_CALL  200	/* instance-id filter values per describe */
#define AWS_IMAGE_TTL	  300.0 /* s: image-filters answers cached (upstream: 5 min) */
#define AWS_MISSING_GRACE 60.0	/* s a new instance may be absent from describes */
#define AWS_SPOT_WATCH	  5.0	/* s between spot interruption notice checks */
/* pages one listing may take (a cloud that always answers with a next token
 * must not keep a worker listing forever) */
#define AWS_MAX_LIST_PAGES 1000

struct amachine;
TAILQ_HEAD(amachine_list, amachine);

struct itype {
	int vcpus;
	double ram; /* MiB */
};

/* A context of a call in flight that is not a machine's: freed with the
 * adapter when its call is cancelled unanswered. */
struct pend {
	LIST_ENTRY(pend) entry;
	void (*dtor)(struct pend *p); /* NULL: free(p) */
};
LIST_HEAD(pend_list, pend);

struct sm_adapter {
	struct pend_list pend;
	const struct sm_env *env;
	struct event_base *base;
	struct aws_api *api;
	char *provider;
	int stopped;
	/* the shared poll */
	struct amachine_list waiting;
	struct event *poll_ev;
	struct poll_ctx {
		struct sm_adapter *a;
		int slot;
	} pctx[64];
	int npoll;
	double last_poll;
	/* image lookups: each machine in AM_IMAGE, the one whose
	 * DescribeImages is in flight (call set) and those that wait for its
	 * answer (one lookup per cache key at a time) */
	struct amachine_list imaging;
	/* batched terminates */
	struct amachine_list terminating;
	struct event *term_ev;
	/* caches */
	json_t *images;	   /* key ("id:ami-..", "filters:<cloud image>") -> {id, root, t} */
	json_t *templates; /* name -> true once it exists */
	json_t *itypes;	   /* instance type -> {vcpus, ram} */
	struct aws_call *itypes_call;
	/* spot interruption notices (beyond upstream) */
	struct event *spot_ev;
	struct aws_call *spot_call;
	json_t *noticed;  /* instance id -> true, once reported */
	json_t *not_ours; /* untagged AMI/snapshot ids no import task of ours made */
	unsigned long long launched, polls, terminate_calls;
};

enum am_state {
	AM_START,
	AM_HOST,     /* AllocateHosts / DescribeHosts in flight (dedicated host) */
	AM_HOSTWAIT, /* the host is pending: describe it again */
	AM_IMAGE,    /* DescribeImages in flight */
	AM_TEMPLATE, /* Describe/CreateLaunchTemplate in flight */
	AM_SUBMIT,   /* RunInstances / CreateFleet in flight */
	AM_WAIT,     /* in the shared poll */
	AM_TERM,     /* delete: queued or TerminateInstances in flight */
	AM_RELEASE,  /* delete: ReleaseHosts in flight (or to retry) */
	AM_DONE,
	AM_FAILED,
};

struct amachine {
	struct sm_machine m;
	struct sm_adapter *a;
	int create;
	enum am_state st;
	TAILQ_ENTRY(amachine) entry; /* waiting, terminating or imaging (by st) */
	int listed;		     /* on a list */
	struct aws_call *call;
	double since;
	/* create */
	const struct sm_label *label;
	char *image_ref; /* image id to boot, or NULL (filters) */
	char *image_key; /* cache key */
	char *az;
	char *hostname;
	json_t *tags;
	char token[40];
	int spot;
	/* latest describe */
	int seen;
	char istate[32], reason[160];
	struct sm_instance *inst;
	int solo; /* delete: terminate alone (a batch failed) */
	/* the instance id (NULL until known; m.external_id is the JSON
	 * {"instance", "host"} when on a dedicated host) and the host */
	char *iid, *host;
	int dedicated, released;
	double again_at; /* delete: when to ask ReleaseHosts again */
};

/* ---- paginated listings ---- */

struct lister;
typedef void (*lister_item)(struct lister *ls, const xmlNode *it);
typedef void (*lister_end)(struct lister *ls, const char *error);

struct lister {
	struct sm_adapter *a;
	const char *action, *set; /* "reservationSet/item" ... */
	char *params;
	lister_item item;
	lister_end end;
	struct aws_call *call;
	struct lister *next_stage; /* unused */
	/* results */
	struct sm_instance **inst;
	size_t ninst, cap;
	struct sm_resource *res;
	json_t *meta; /* array keeping resources' metadata and ids alive */
	size_t nres, rcap;
	int stage;
	json_t *keys;	   /* S3 object keys listed, whose tags are read next */
	json_t *untagged;  /* [{type, id, snap}]: untagged AMIs and snapshots */
	json_t *task_tags; /* snapshot id -> tags of the import task that made it */
	size_t kidx;
	int pages; /* of the listing in progress */
	void *cb;
	void *arg;
	struct listers *owner;
};

/* A listing's owner: listings in flight are freed with the adapter. */
struct listers {
	struct lister *v[32];
};

/* Every lister in flight, to free with the adapter (aws_list.c). */
extern struct listers aws_all_listers;

/* aws.c: a label's raw keys */
const json_t *aws_lraw(const struct sm_label *l, const char *k);
const char *aws_lstr(const struct sm_label *l, const char *k);
const char *aws_pstr(const struct sm_label *l, const char *k);
int aws_label_dedicated(const struct sm_label *l);
int aws_label_spot(const struct sm_label *l);

/* aws_machine.c: create, poll, terminate; spot notices */
void aws_poll_cb(evutil_socket_t fd, short what, void *arg);
void aws_term_cb(evutil_socket_t fd, short what, void *arg);
void aws_image_key(const struct sm_label *l, const char *ext, char *buf, size_t len);
const json_t *aws_fleet_of(const struct sm_label *l);
struct sm_machine *aws_create_machine(struct sm_adapter *a, const struct sm_create_args *args);
struct sm_machine *aws_delete_machine(struct sm_adapter *a, const char *external_id);
struct sm_machine *aws_resume_machine(struct sm_adapter *a, const struct sm_create_args *args,
				      const char *external_id);
void aws_spot_arm(struct sm_adapter *a);
void aws_spot_cb(evutil_socket_t fd, short what, void *arg);
int aws_has_spot_labels(const struct sm_config *cfg);

/* aws_list.c: listings and leaked resources */
struct sm_instance *aws_instance_of(struct sm_adapter *a, const xmlNode *it);
void aws_lister_free(struct lister *ls);
void aws_list_instances(struct sm_adapter *a, sm_instances_cb cb, void *arg);
void aws_list_resources(struct sm_adapter *a, sm_resources_cb cb, void *arg);
void aws_delete_resource(struct sm_adapter *a, const struct sm_resource *r, sm_done_cb cb,
			 void *arg);

/* aws_quota.c: quota codes and instance types */
void aws_host_quota(const char *itype, struct drv_quota *q);
void aws_type_quota(struct sm_adapter *a, const char *itype, int spot, struct drv_quota *q);
void aws_quota_limits(struct sm_adapter *a, sm_quota_cb cb, void *arg);
int aws_label_quota(struct sm_adapter *a, const struct sm_label *label, struct drv_quota *out,
		    char *err, size_t errlen);
void aws_itypes_fetch(struct sm_adapter *a);

/* aws_images.c: AMI listing, upload, delete */
void aws_list_images(struct sm_adapter *a, drv_image_list_cb cb, void *arg);
void aws_noop_cb(const struct aws_result *r, void *arg);
char *aws_s3_path(const char *bucket, const char *key);
void aws_upload_image(struct sm_adapter *a, const struct sm_upload_args *ua, sm_upload_cb cb,
		      void *arg);
void aws_delete_image(struct sm_adapter *a, const char *external_id, sm_done_cb cb, void *arg);

#endif
