/*
 * The state-machine driver framework (drivers/statemachine/), as upstream
 * Nodepool's StateMachineDriver / StateMachineProvider /
 * StateMachineNodeLauncher / StateMachineNodeDeleter (reference 2.5, 2.6,
 * 3.2): a struct driver whose slots adapt a cloud Adapter (adapter.h).
 *
 * Three layers, each usable alone:
 *   - config.c: the common keys of a cloud provider's config
 *     (struct sm_config: pools, labels, cloud-images, diskimages,
 *     launch-retries, boot-timeout, launch-timeout, rate, ...);
 *   - runner.c: runs state machines on the loop (struct sm_runner), and on
 *     top of that one node's launch (struct sm_launch: attempts, launch-
 *     timeout, deleting a failed attempt's instance before the retry,
 *     nodescan until boot-timeout, console log on failure, quota abort)
 *     and one instance's deletion (struct sm_delete). No ZooKeeper here:
 *     unit tests drive it with a test adapter;
 *   - statemachine.c: the struct driver slots (launcher services, quota
 *     cache with unmanaged usage, leak cleanup, label readiness and images,
 *     event-loop lag, dump).
 *
 * A driver built on it (drivers/fake/fake.c) is:
 *
 *     static struct drv_provider *
 *     fake_provider_new(struct drv_host *lc, char *err, size_t n)
 *     {
 *             return sm_provider_new(&fake_adapter, lc, err, n);
 *     }
 *     const struct driver drv_fake = {
 *             .name = "fake", .pause_at_quota = 1,
 *             .provider_new = fake_provider_new, SM_DRIVER_SLOTS,
 *     };
 */
#ifndef NP_SM_STATEMACHINE_H
#define NP_SM_STATEMACHINE_H

#include <stddef.h>
#include <jansson.h>

#include "drivers/statemachine/adapter.h"
#include "drivers/driver.h"
#include "protocol/model.h"

struct event_base;
struct evbuffer;
struct nodescan;
struct drv_host;

/* ---- config (config.c) ------------------------------------------------------- */

/* Upstream's Provider delete timeout (StateMachineNodeDeleter.DELETE_TIMEOUT). */
#define SM_DELETE_TIMEOUT 600.0
/* Upstream's MAX_QUOTA_AGE: the cloud limits and unmanaged usage are
 * re-read after this many seconds (or at once after a quota error). */
#define SM_MAX_QUOTA_AGE 300.0
/* Upstream's state machine poll interval (MAXIMUM_SLEEP). */
#define SM_DEFAULT_POLL 1.0

/* A provider cloud-images[] or diskimages[] entry, with upstream's
 * defaults applied. */
struct sm_image {
	char *name;
	int diskimage;	       /* 1: diskimages[], 0: cloud-images[] */
	char *image_id;	       /* cloud image: image-id (or image-name), NULL */
	char *username;	       /* NULL: the node's default ("zuul") */
	char *python_path;     /* "auto" */
	char *shell_type;      /* NULL */
	char *connection_type; /* "ssh" */
	int connection_port;   /* 22; 5986 when connection-type is winrm */
	const json_t *raw;
};

struct sm_pool;

/* A pool's label entry. */
struct sm_label {
	char *name;
	const struct sm_pool *pool;
	char *cloud_image; /* names as written, NULL */
	char *diskimage;
	const struct sm_image *image; /* the entry either names, or NULL */
	int host_key_checking;	      /* label's, else pool's, else provider's */
	int console_log;	      /* console-log: 0 */
	const json_t *raw;	      /* driver-specific keys */
};

struct sm_pool {
	char *name;
	struct sm_label *labels;
	size_t nlabels;
	struct np_strv azs; /* availability-zones */
	int host_key_checking;
	int use_internal_ip;
	const json_t *raw;
};

struct sm_config {
	char *provider;
	int launch_retries;    /* launch-retries: 3 (attempts in all) */
	double boot_timeout;   /* boot-timeout, seconds (nodescan deadline) */
	double launch_timeout; /* launch-timeout: 3600 s per attempt */
	double rate;	       /* as written, in the driver's unit (see sm_config_new); 0 none */
	int host_key_checking;
	struct sm_image *cloud_images;
	size_t ncloud_images;
	struct sm_image *diskimages;
	size_t ndiskimages;
	struct sm_pool *pools;
	size_t npools;
	const json_t *raw; /* the provider's config, borrowed */
};

/* Driver defaults for keys the provider config leaves out. */
struct sm_defaults {
	double boot_timeout;   /* openstack/gce/fake 60, aws 180, azure 120 */
	double rate;	       /* openstack 1, aws 2, fake 0 */
	int host_key_checking; /* 1 (fake: 0) */
};

/* Parse a validated provider config (borrowed: it must outlive the
 * result). NULL with a message in err on an inconsistency the validator
 * cannot see (a label naming a missing image). */
struct sm_config *sm_config_new(const json_t *provider, const struct sm_defaults *def, char *err,
				size_t errlen);
void sm_config_free(struct sm_config *cfg); /* NULL is a no-op */
const struct sm_pool *sm_config_pool(const struct sm_config *cfg, const char *pool);
const struct sm_label *sm_config_label(const struct sm_config *cfg, const char *pool,
				       const char *label);
/* The first pool's entry for a label name, or NULL. */
const struct sm_label *sm_config_any_label(const struct sm_config *cfg, const char *label);

/* ---- the pace of shared listings (pace.c) ------------------------------------------ */

/* Seconds: a first look this much (at least) before a server's expected
 * boot; a follow-up this long after a look that did not find it ready; at
 * least this between two listings (the margin itself: a wave's follow-up
 * comes when the servers its first look missed are due, pace.c); and the
 * period of deletes (upstream's). */
#define SM_PACE_MARGIN	0.01
#define SM_PACE_FOLLOW	0.1
#define SM_PACE_MIN_GAP SM_PACE_MARGIN
#define SM_PACE_IDLE	1.0
/* Seconds after it is named that a server with no boot estimate is first
 * looked for (then every half its age: sm_pace_want). */
#define SM_PACE_COLD 0.5
/* Seconds the first look of a server waits for others named after it;
 * listings a burst may take beyond upstream's period; servers named that
 * pay for one listing (the budget: pace.c); seconds a delete's look may
 * wait to ride along with a launch's listing. */
#define SM_PACE_HOLD	    0.25
#define SM_PACE_BURST	    5.0
#define SM_PACE_PER_LISTING 25.0
#define SM_PACE_RIDE	    2.0
/* Seconds: a server seen ready this soon after a look that did not see it
 * gives its boot as it came (sm_boot_est_add_seen). */
#define SM_PACE_TIGHT (2 * SM_PACE_FOLLOW)
/* Seconds before a want that a listing starting then still serves: an
 * adapter starts a listing due within a millisecond at once (os_list_start,
 * the fake's and IBM VPC's poll), and one that came 0.1 ms before a cold
 * wave's look left it wanting that look again, SM_PACE_MIN_GAP later: two
 * listings 10 ms apart, the second wasted (the OpenStack bench, issue 25). */
#define SM_PACE_EARLY 0.002

/*
 * A moving estimate of a boot time (pace.c: what it is and why): mean and
 * mean deviation in seconds, over n samples. Zero it to start.
 */
struct sm_boot_est {
	double mean, dev;
	unsigned long n;
};
/* Add a sample (seconds, >= 0; others are ignored). */
void sm_boot_est_add(struct sm_boot_est *e, double sample);
/*
 * Add what one server's listings showed: not ready at lo, ready at hi
 * (seconds after it was named; lo 0: no listing showed it not ready).
 * Within SM_PACE_TIGHT (follow-ups looked closely) the sample is hi;
 * otherwise the estimate itself clamped to [lo + SM_PACE_FOLLOW (the next
 * first look after the one that failed), hi], so that a listing
 * that came late (the budget, a wave held for its last server) moves the
 * estimate only as far as the evidence goes; with no estimate yet, the
 * middle of [lo + SM_PACE_FOLLOW, hi] when there is a lo (its lower end
 * alone, at a cold start's looks 0.25-0.4 s apart, left the estimate
 * 0.15 s short and the next wave paid five listings), else hi. A server ready in a listing before
 * its first look (hi < the lead) counts as ready at the lead. Returns the sample taken
 * (-1: none, bad bounds).
 */
double sm_boot_est_add_seen(struct sm_boot_est *e, double lo, double hi);
/* Seconds after a server is named when it is first worth looking for:
 * mean - max(SM_PACE_MARGIN, 2 dev), >= 0; -1 with no sample (or NULL). */
double sm_boot_est_lead(const struct sm_boot_est *e);
/*
 * When (monotonic seconds) a server named at named_at, of a label with
 * estimate e (NULL or empty: none), next wants a listing, the last one
 * having started at last_start: its first look, else a follow-up; with no
 * estimate, SM_PACE_COLD after it was named (or SM_DEFAULT_POLL after
 * last_start if sooner), then every half its age (at least SM_PACE_FOLLOW,
 * at most SM_DEFAULT_POLL).
 */
double sm_pace_want(const struct sm_boot_est *e, double named_at, double last_start);
/*
 * The next listing's want from the launches' (create) and the deletes'
 * (del_min: INFINITY, none): a delete's look rides along with a launch's
 * listing up to SM_PACE_RIDE later.
 */
double sm_pace_ride(double create_want, double del_min);
/* When the next listing may start given the earliest want: not before
 * last_start + max(min_gap, SM_PACE_MIN_GAP). */
double sm_pace_start(double want, double last_start, double min_gap);
/*
 * Where the next listing of a wave aims (issue 25, third round): due[0..n)
 * are the first looks of the servers not looked for yet (monotonic
 * seconds; sorted here, in place), per the servers named that pay one
 * listing (sm_pace_budget; <= 0: SM_PACE_PER_LISTING). The wave is the
 * first looks within SM_PACE_HOLD of the earliest; it pays floor(n / per)
 * listings, one of which is kept for a follow-up; with T >= 2 others, the
 * next is aimed at the first look of its ceil(n / T)-th server (a wave of
 * 50 paying one listing per 10 servers: at its 13th), else at its last.
 * INFINITY when n is 0.
 */
double sm_pace_aim(double *due, size_t n, double per);
/*
 * The next listing's want from the machines': the earliest first look
 * (first_min) waits for the one aimed at (first_aim: sm_pace_aim) at most
 * SM_PACE_HOLD; other_min (follow-ups, deletes, others) is kept.
 * INFINITY: none of that kind.
 */
double sm_pace_batch(double first_min, double first_aim, double other_min);
/* The listing budget: two buckets, tokens of time and stokens of servers
 * named, after the last listing (at last, monotonic seconds, when `named`
 * servers had been named in all), over n listings. Zero it to start
 * (full). */
struct sm_pace_bucket {
	double tokens, stokens, last;
	unsigned long long n, named;
	/* servers named that pay one listing (<= 0: SM_PACE_PER_LISTING): an
	 * adapter's listing_servers (struct sm_adapter_ops) */
	double per;
	/* the caller's: the next listing is a follow-up that borrowed
	 * (sm_pace_may_borrow); cleared when a listing is noted */
	int borrow;
};
/*
 * Take note of a listing started at last_start (when later than the last
 * one noted: it takes a token from each bucket, after their refills: one
 * per SM_DEFAULT_POLL since the last, one per b->per (SM_PACE_PER_LISTING)
 * servers paid since, each holding SM_PACE_BURST; the period's may owe as
 * much, the servers' one listing, when b->borrow said a follow-up borrowed
 * it) and answer the earliest time the next may start within the budget
 * (last_start when either bucket has a token): so listings keep to about
 * the larger of the two rates, beyond the bursts. named: servers that have
 * paid so far (a running count; the runner's: their first looks come due).
 */
double sm_pace_budget(struct sm_pace_bucket *b, double last_start, unsigned long long named);
/*
 * When the servers' bucket of b can pay the next listing, its servers
 * paying when their first looks come due (issue 25, fourth round: paid
 * when named, a wave's tokens went to the small waves listed before its
 * first looks, and the wave waited a period): paid servers have paid so
 * far (sm_pace_budget's running count), due[0..n) are the first looks
 * still to come, sorted ascending (sm_pace_aim sorts them). -INFINITY: it
 * can now; INFINITY: not with these servers (the period's bucket then).
 */
/*
 * Whether a follow-up (servers looked for and not found ready, which have
 * paid their share) may borrow the next listing from the servers to come:
 * the servers' bucket of b owes nothing (a listing neither bucket pays
 * leaves it owing one, at most). So a wave's first look and follow-up (its
 * two tokens at 25 servers a listing) never leave its last servers waiting
 * a period for the next wave's budget when a second follow-up is needed
 * (issue 25: the OpenStack bench's p90 under load); the next wave pays it
 * back.
 */
int sm_pace_may_borrow(const struct sm_pace_bucket *b, unsigned long long paid);
double sm_pace_paid_at(const struct sm_pace_bucket *b, unsigned long long paid, const double *due,
		       size_t n);

/* ---- the runner (runner.c) ------------------------------------------------------ */

struct sm_runner;
struct sm_run;
struct sm_launch;
struct sm_delete;

/* Counters of a runner (for the dump and tests). */
struct sm_runner_stats {
	unsigned runs, launches, deletes, orphans; /* in flight now */
	unsigned long long advances;		   /* advance() calls */
	unsigned long long ready, failed, aborted; /* launch outcomes */
	unsigned long long attempts_failed;	   /* attempts that were retried or failed */
	unsigned long long unwound;		   /* failed attempts' instances deleted */
	unsigned long long nodescan_failed;
	unsigned long long deleted, delete_errors;
};

/*
 * A runner on base for one adapter. ns: the scanner for nodescans (may be
 * NULL when no label checks host keys). Returns NULL only on allocation
 * failure.
 */
struct sm_runner *sm_runner_new(struct event_base *base, const struct sm_adapter_ops *ops,
				struct sm_adapter *a, struct nodescan *ns);
/* Abandon every run, launch and delete WITHOUT their callbacks, freeing
 * their machines, and free the runner. NULL is a no-op. Free the adapter
 * after this, in the same loop turn. */
void sm_runner_free(struct sm_runner *r);
void sm_runner_get_stats(const struct sm_runner *r, struct sm_runner_stats *st);
/*
 * Seconds from now (>= 0) until the adapter's next shared listing of
 * instance states is useful (pace.c), its last having started at
 * last_start (monotonic; 0: none yet), its rate allowing one min_gap
 * seconds after the last: from the expected boot of every named instance
 * being created (a wave's listings spread over it: sm_pace_aim),
 * SM_PACE_IDLE for deletes (which ride along with a launch's listing up to
 * SM_PACE_RIDE later), SM_DEFAULT_POLL when no machine runs (another
 * listing's waiter); within the budget (sm_pace_budget: the servers
 * paying when their first looks come due, sm_pace_paid_at; a follow-up may
 * borrow one, sm_pace_may_borrow). Each new
 * last_start also tells the runner which servers that listing did not show
 * ready (their boot samples' lower bounds).
 */
double sm_runner_listing_wait(struct sm_runner *r, double last_start, double min_gap);
/* The boot estimate of a label (NULL: the provider-wide one); NULL when
 * none has a sample yet. */
const struct sm_boot_est *sm_runner_boot_est(const struct sm_runner *r, const char *label);
/* One line per launch and delete in flight. */
void sm_runner_dump(const struct sm_runner *r, struct evbuffer *out);

/*
 * Run machine m (taking it) until it is done, failed, or timeout seconds
 * (<= 0: no limit) have passed (then SM_ERROR with SM_E_TIMEOUT). The
 * first advance() comes on a later loop turn. done(st, inst, m, arg) is
 * called once: st SM_DONE (inst: the create machine's instance, which the
 * callback takes; NULL for deletes) or SM_ERROR (m->error, m->error_msg);
 * m is valid during the callback (its external_id in particular) and freed
 * after it. progress(m, arg) (may be NULL) is called after each advance()
 * that returned SM_AGAIN; it may cancel the run.
 */
typedef void (*sm_run_done)(enum sm_status st, struct sm_instance *inst, struct sm_machine *m,
			    void *arg);
typedef void (*sm_run_progress)(struct sm_machine *m, void *arg);
struct sm_run *sm_run_start(struct sm_runner *r, struct sm_machine *m, double timeout,
			    sm_run_done done, sm_run_progress progress, void *arg);
/* Stop and free the run and its machine; no callback. NULL is a no-op. */
void sm_run_cancel(struct sm_run *run);

/* One node launch (upstream's StateMachineNodeLauncher). */
struct sm_launch_params {
	const struct sm_label *label;
	const char *image_external_id;	  /* diskimage upload's id, or NULL */
	const char *az;			  /* or NULL */
	const json_t *metadata;		  /* nodepool_* tags (copied) */
	const struct np_request *request; /* borrowed until the callback; may be NULL */
	int retries;			  /* attempts in all (>= 1) */
	double launch_timeout;		  /* per attempt, from its create machine's start */
	double boot_timeout;		  /* the nodescan deadline */
	int use_internal_ip;		  /* interface_ip = private address when there is one */
	/* The provider's name, for the launch phase histograms (metrics.h:
	 * create, boot, keyscan); copied; NULL records none. */
	const char *provider;
	/*
	 * Called (may be NULL) with the launch's arg each time node->external_id
	 * starts naming a new instance: the first attempt's, once the cloud
	 * names it, and each retry's; not after a cancel. For the caller to
	 * save the node at once (upstream stores node.external_id as soon as
	 * the create state machine reports it), so a launcher that dies
	 * mid-launch leaves the id for whoever deletes the node. Called from
	 * inside an advance: it must not cancel the launch.
	 */
	void (*named)(void *arg);
	/* The instance an earlier launcher created for this node (adapter
	 * slot resume_machine): the first attempt takes it over instead of
	 * creating one; NULL: create. Copied. */
	const char *resume_id;
};

/*
 * Launch into node (borrowed until the callback or sm_launch_cancel): its
 * id names the instance ("np<id>"); node->external_id is set as soon as
 * the cloud names the instance (then p->named is called), and the
 * instance's addresses, az, cloud,
 * region, resources, overrides and host keys once it is complete. An
 * attempt that fails (error, launch-timeout, nodescan until boot-timeout)
 * has its instance deleted by a delete machine, then the next attempt
 * starts; after `retries` attempts the launch fails. A quota error aborts
 * at once. done(result, error, arg) is called once, on the loop; on
 * FAILED and ABORTED node->external_id names what is left to delete (or
 * is NULL).
 */
typedef void (*sm_launch_done)(enum drv_launch_result res, const char *error, void *arg);
struct sm_launch *sm_launch_start(struct sm_runner *r, struct np_node *node,
				  const struct sm_launch_params *p, sm_launch_done done, void *arg);
/*
 * Cancel: no callback follows and node is no longer touched (the caller may
 * free it). Whatever the launch created is deleted in the background (once
 * the cloud has named it); the runner frees the launch when that is done.
 * NULL is a no-op.
 */
void sm_launch_cancel(struct sm_launch *l);
/*
 * Abandon (the launcher's session ended, so its node may be adopted by
 * another launcher): no callback follows and node is no longer touched.
 * An instance the cloud has named is left as it is, for the adopter
 * (drv_launch.resume) or, when its record never named it, for leak
 * cleanup; a create not named yet, or an attempt already unwinding, goes
 * on as after sm_launch_cancel. NULL is a no-op.
 */
void sm_launch_abandon(struct sm_launch *l);

/* Delete external_id (NULL: nothing to do) with delete machines until
 * done, not found, or timeout seconds; done(ok, error, arg) once, on the
 * loop. */
struct sm_delete *sm_delete_start(struct sm_runner *r, const char *external_id, double timeout,
				  sm_done_cb done, void *arg);
/* Stop; no callback. NULL is a no-op. */
void sm_delete_cancel(struct sm_delete *d);

/* ---- the driver (statemachine.c) --------------------------------------------------- */

/*
 * provider_new for a state-machine driver: parse the provider config
 * (drv_provider_config), create the adapter, the runner, the nodescan
 * worker, the loop-lag probe, and start the first quota read.
 */
struct drv_provider *sm_provider_new(const struct sm_adapter_ops *ops,
				     const struct sm_defaults *def, struct drv_host *lc, char *err,
				     size_t errlen);

/* The generic slots (use SM_DRIVER_SLOTS). */
void sm_drv_provider_start(struct drv_provider *dp);
void sm_drv_provider_stop(struct drv_provider *dp);
void sm_drv_provider_free(struct drv_provider *dp);
void sm_drv_cleanup(struct drv_provider *dp);
/* driver.h's label_ready: 1, 0, or -1 while the uploads are not read yet */
int sm_drv_label_ready(struct drv_provider *dp, const char *label);
/* Through the adapter's label_quota; a permanent error there makes the
 * label an error label (sm_drv_label_error) and answers the empty quota. */
void sm_drv_label_quota(struct drv_provider *dp, const char *pool, const char *label,
			struct drv_quota *out);
/* The driver slot label_error: 1 once the adapter's label_quota reported a
 * permanent error for the label (upstream's errorLabels). */
int sm_drv_label_error(struct drv_provider *dp, const char *label);
void sm_drv_provider_limits(struct drv_provider *dp, struct drv_quota *out);
/* The pool's availability-zones, else the adapter's azs() (upstream's
 * StateMachineHandler.setNodeMetadata choice list). Having this slot
 * makes the launcher group each request's nodeset in one AZ, which the
 * launch then gets as drv_launch.az (passed on to create_machine). */
void sm_drv_pool_azs(struct drv_provider *dp, const char *pool, struct np_strv *out);
void sm_drv_launch(struct drv_provider *dp, struct drv_launch *l);
void sm_drv_launch_cancel(struct drv_provider *dp, struct drv_launch *l);
/* The driver slot launch_abandon: sm_launch_abandon. */
void sm_drv_launch_abandon(struct drv_provider *dp, struct drv_launch *l);
/* The driver slot launch_resumable: the adapter has resume_machine and the
 * node names its instance (external_id a string) in one of our pools. */
int sm_drv_launch_resumable(struct drv_provider *dp, const struct np_node *node);
void sm_drv_node_delete(struct drv_provider *dp, struct drv_delete *d);
void sm_drv_dump(struct drv_provider *dp, struct evbuffer *out);
/* Through the adapter's upload_image / delete_image (an adapter without
 * them answers with an error, on the loop). */
/* Through the adapter's list_images (without: an error, on the loop). */
void sm_drv_image_list(struct drv_provider *dp, drv_image_list_cb cb, void *arg);
void sm_drv_image_upload(struct drv_provider *dp, const struct drv_image_upload *u,
			 drv_image_upload_cb cb, void *arg);
void sm_drv_image_delete(struct drv_provider *dp, const char *external_id, drv_image_delete_cb cb,
			 void *arg);

#define SM_DRIVER_SLOTS                                                                            \
	.provider_start = sm_drv_provider_start, .provider_stop = sm_drv_provider_stop,            \
	.provider_free = sm_drv_provider_free, .cleanup = sm_drv_cleanup,                          \
	.label_ready = sm_drv_label_ready, .label_quota = sm_drv_label_quota,                      \
	.label_error = sm_drv_label_error, .provider_limits = sm_drv_provider_limits,              \
	.pool_azs = sm_drv_pool_azs, .launch = sm_drv_launch,                                      \
	.launch_cancel = sm_drv_launch_cancel, .launch_abandon = sm_drv_launch_abandon,            \
	.launch_resumable = sm_drv_launch_resumable, .node_delete = sm_drv_node_delete,            \
	.dump = sm_drv_dump, .image_upload = sm_drv_image_upload,                                  \
	.image_delete = sm_drv_image_delete, .image_list = sm_drv_image_list

/*
 * The driver's image_format slot for adapters whose format is the
 * provider's `image-format` (its traits' default when unset: aws raw, fake
 * qcow2, ibmvpc qcow2, azure vhd): copies np_provider.image_format, -1
 * when the config has none.
 */
int sm_drv_config_image_format(const struct np_provider *p, char *out, size_t outlen, char *err,
			       size_t errlen);

/* ---- diskimage uploads (images.c) ---------------------------------------------------- */

struct zk;
struct sm_images;

/*
 * The uploads a provider can boot from, kept by a persistent recursive
 * watch on /nodepool/images (no polling): the most recent READY upload of
 * each diskimage (upstream's getMostRecentImageUpload(cached=True)) and
 * the set of every upload of this provider (getProviderUploads, for leak
 * cleanup). An upload's change is read when ZooKeeper reports it, ahead
 * of any request created after it. zk stays the caller's and must outlive
 * the view.
 */
struct sm_images *sm_images_new(struct zk *zk, struct event_base *base, const char *provider);
void sm_images_free(struct sm_images *s); /* NULL is a no-op */
/* Read the whole tree again (the watch's events may have been lost: after
 * a lost connection or an expiry); one walk at a time, a call during one
 * starts another after it. */
void sm_images_refresh(struct sm_images *s);
/*
 * 0 with the external id of image's most recent READY upload and its znode
 * path (.../builds/<build>/providers/<provider>/images/<upload>, a node's
 * image_id) copied into the buffers; -1 when none is known.
 */
int sm_images_latest(struct sm_images *s, const char *image, char *external_id, size_t idlen,
		     char *path, size_t pathlen);
/* 1 when this provider has an upload <build_id>-<upload_id> in ZooKeeper
 * (any state), 0 when not, -1 before the first complete walk. */
int sm_images_known_upload(const struct sm_images *s, const char *build_id, const char *upload_id);
/* Walks completed. */
int sm_images_walks(const struct sm_images *s);

/*
 * Validation before service (beyond upstream; nodepool.yaml(5)
 * `validate`): an upload the builder stored READY with the extra key
 * validation {"state": "pending"} is not served (sm_images_latest skips
 * it) until this provider's launcher has booted a node from it and
 * written the verdict.
 */
enum sm_validation {
	SM_VALID_NONE,	  /* no validation asked for */
	SM_VALID_PENDING, /* waits for its verdict: not served */
	SM_VALID_PASSED,
	SM_VALID_FAILED,
};
/* cb(arg) after every upload record read (a change reported by the watch,
 * or a walk's read): the caller looks for pending uploads. */
void sm_images_set_notify(struct sm_images *s, void (*cb)(void *arg), void *arg);
/* The nth (0-based) READY upload pending validation: 0 with its image,
 * znode path and external id (valid until the loop runs again), -1 past
 * the last. */
int sm_images_pending_nth(const struct sm_images *s, size_t nth, const char **image,
			  const char **path, const char **external_id);
/* Store the verdict on the upload at path, if it is still READY and
 * pending (read, then written with the version read): ok, validation
 * "passed"; else state FAILED, validation "failed" with reason. Errors are
 * logged; the watch then reports the change. */
void sm_images_verdict(struct sm_images *s, const char *path, int ok, const char *reason);

/*
 * Rollback (beyond upstream; nodepool.yaml(5) `rollback-after`): 1 when
 * image has a READY upload other than path that could serve (validated or
 * not validating, not rolled back), else 0.
 */
int sm_images_has_previous(const struct sm_images *s, const char *image, const char *path);
/* Stop serving the upload at path here at once, and record it on the
 * upload (extra key rollback {"reason": reason}, kept by every later write
 * and read back by every launcher, also after a restart). */
void sm_images_rollback(struct sm_images *s, const char *path, const char *reason);

/*
 * The launcher's ZooKeeper handle, for the upload cache above: a launcher
 * service the launcher does not offer yet. The framework carries a weak
 * default returning NULL (then diskimage labels are never ready, as
 * upstream with no READY upload, and uploads are never taken for leaks);
 * a launcher that defines it (`return lc->zk;`) wins at link time.
 */
struct zk *drv_zk(struct drv_host *lc);

#endif
