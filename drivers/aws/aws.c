/*
 * The `aws` driver: Amazon EC2 behind a state-machine Adapter
 * (drivers/statemachine/adapter.h), as upstream Nodepool's
 * nodepool/driver/aws (adapter.py), non-blocking on the worker's loop.
 *
 * Calls go through aws_api.h (libcurl multi on libevent, SigV4 by
 * libcurl, credentials and endpoints as the AWS SDKs find them); answers
 * are EC2 Query XML parsed with libxml2.
 *
 * What it does per provider (keys of nodepool.yaml(5), driver aws):
 *   - create: RunInstances (on-demand, or spot with `use-spot`) from the
 *     label's cloud image (image-id, or image-filters resolved with
 *     DescribeImages to the newest match, cached 5 minutes as upstream) or
 *     the diskimage upload; instance type, key pair, subnet, security
 *     group, public IPv4/IPv6, EBS root volume (the image's root device:
 *     size, type, iops, throughput), userdata, IAM instance profile,
 *     IMDSv2, tags (label tags, dynamic tags from the request, then the
 *     nodepool_* metadata, Name = hostname) on the instance and its
 *     volume; labels with `fleet` go through a launch template (one per
 *     label and image, created on first use) and CreateFleet type
 *     instant with the instance-type list and allocation strategy.
 *     Every create carries a ClientToken, so a throttled call retried is
 *     never a second instance.
 *   - state: one DescribeInstances (filter instance-id, up to 200 ids a
 *     call) per poll for every instance being created or deleted, as
 *     upstream's rate-conscious shared listing.
 *   - delete: TerminateInstances batched: every delete asked for in the
 *     same loop turn goes in one call (upstream's delete queue), then
 *     the shared poll until terminated.
 *   - quota: the vCPU quotas of Service Quotas by instance family (the L-
 *     codes; spot and on-demand separately), vCPUs and memory per
 *     instance type from DescribeInstanceTypes.
 *   - dedicated hosts (`dedicated-host`): AllocateHosts (instance type,
 *     AZ, the node's tags), DescribeHosts until available, RunInstances on
 *     it (Placement Tenancy host, HostId); delete terminates the instance,
 *     then ReleaseHosts. The node's external_id is upstream's object
 *     {"instance", "host"}; quota counts one host of the family's L- code.
 *   - leaks: hosts, instances and volumes (and AMIs, snapshots, and the
 *     objects of the object-storage bucket by their S3 tags) carrying
 *     nodepool_provider_name for this provider.
 *   - rate: mutating calls per second; describes and lists at ten times
 *     that (upstream's two rate limiters). Throttling (RequestLimitExceeded)
 *     and 5xx are retried with jittered backoff.
 */
#include "drivers/statemachine/statemachine.h"
#include "drivers/statemachine/reqformat.h"

#include <sys/queue.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "drivers/aws/aws_api.h"
#include "lib/net/curl_dl.h"
#include "lib/config/jsonget.h"
#include "lib/core/log.h"
#include "lib/net/ratelimit.h"
#include "lib/core/clock.h"

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
static const char *const am_names[] = {
    "start",   "allocating host", "host pending",   "image", "template", "submitted",
    "waiting", "terminating",	  "releasing host", "done",  "failed"};

struct amachine {
	struct sm_machine m;
	struct sm_adapter *a;
	int create;
	enum am_state st;
	TAILQ_ENTRY(amachine) entry; /* waiting or terminating */
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

static const json_t *
lraw(const struct sm_label *l, const char *k)
{
	return json_object_get(l->raw, k);
}

static const char *
lstr(const struct sm_label *l, const char *k)
{
	return json_string_value(lraw(l, k));
}

static const char *
pstr(const struct sm_label *l, const char *k)
{
	return json_string_value(json_object_get(l->pool->raw, k));
}

/* ---- quota codes (upstream's QUOTA_CODES table, by family prefix) ---- */

static const char *
quota_code(const char *itype, int spot)
{
	static const struct {
		const char *prefix, *od, *spot;
	} t[] = {
	    {"u-", "L-43DA4232", NULL},		{"inf", "L-1945791B", "L-B5D1601B"},
	    {"dl", "L-6E869C2A", "L-85EED4F7"}, {"vt", "L-DB2E81BA", "L-3819A6DF"},
	    {"g", "L-DB2E81BA", "L-3819A6DF"},	{"p", "L-417A185B", "L-7212CCBC"},
	    {"f", "L-74FC7D96", "L-88CF9481"},	{"x", "L-7295265B", "L-E3A00192"},
	};
	char fam[16];
	size_t i = 0;

	if (itype == NULL)
		return NULL;
	while (i < sizeof(fam) - 1 && itype[i] != '\0' && !isdigit((unsigned char)itype[i])) {
		fam[i] = itype[i];
		i++;
	}
	fam[i] = '\0';
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (strncmp(fam, t[i].prefix, strlen(t[i].prefix)) == 0)
			return spot ? t[i].spot : t[i].od;
	if (fam[0] != '\0' && strchr("acdhimrtz", fam[0]) != NULL)
		return spot ? "L-34B43A08" : "L-1216C47A";
	return NULL;
}

/*
 * The Service Quotas code counting dedicated hosts of itype's family (the
 * part before the dot: "m5" for m5.large), as upstream's HOST_QUOTA_CODES
 * (AWS's codes for "Running Dedicated <family> Hosts"); NULL if unknown.
 */
static const char *
host_quota_code(const char *itype)
{
	static const struct {
		const char *family, *code;
	} t[] = {
	    {"a1", "L-949445B0"},	  {"c3", "L-8D142A2E"},	       {"c4", "L-E4BF28E0"},
	    {"c5", "L-81657574"},	  {"c5a", "L-03F01FD8"},       {"c5d", "L-C93F66A2"},
	    {"c5n", "L-20F13EBD"},	  {"c6a", "L-D75D2E84"},       {"c6g", "L-A749B537"},
	    {"c6gd", "L-545AED39"},	  {"c6gn", "L-5E3A299D"},      {"c6i", "L-5FA3355A"},
	    {"c6id", "L-1BBC5241"},	  {"c6in", "L-6C2C40CC"},      {"c7a", "L-698B67E5"},
	    {"c7g", "L-13B8FCE8"},	  {"c7gd", "L-EF58B059"},      {"c7gn", "L-97677CE3"},
	    {"c7i", "L-587AA6E3"},	  {"d2", "L-8B27377A"},	       {"dl1", "L-AD667A3D"},
	    {"f1", "L-5C4CD236"},	  {"g3", "L-DE82EABA"},	       {"g3s", "L-9675FDCD"},
	    {"g4ad", "L-FD8E9B9A"},	  {"g4dn", "L-CAE24619"},      {"g5", "L-A6E7FE5E"},
	    {"g5g", "L-4714FFEA"},	  {"g6", "L-B88B9D6B"},	       {"gr6", "L-E68C3AFF"},
	    {"h1", "L-84391ECC"},	  {"i2", "L-6222C1B6"},	       {"i3", "L-8E60B0B1"},
	    {"i3en", "L-77EE2B11"},	  {"i4g", "L-F62CBADB"},       {"i4i", "L-0300530D"},
	    {"im4gn", "L-93155D6F"},	  {"inf", "L-5480EFD2"},       {"inf2", "L-E5BCF7B5"},
	    {"is4gen", "L-CB4F5825"},	  {"m3", "L-3C82F907"},	       {"m4", "L-EF30B25E"},
	    {"m5", "L-8B7BF662"},	  {"m5a", "L-B10F70D6"},       {"m5ad", "L-74F41837"},
	    {"m5d", "L-8CCBD91B"},	  {"m5dn", "L-DA07429F"},      {"m5n", "L-24D7D4AD"},
	    {"m5zn", "L-BD9BD803"},	  {"m6a", "L-80F2B67F"},       {"m6g", "L-D50A37FA"},
	    {"m6gd", "L-84FB37AA"},	  {"m6i", "L-D269BEFD"},       {"m6id", "L-FDB0A352"},
	    {"m6idn", "L-9721EDD9"},	  {"m6in", "L-D037CF10"},      {"m7a", "L-4740F819"},
	    {"m7g", "L-9126620E"},	  {"m7gd", "L-F8516154"},      {"m7i", "L-30E31217"},
	    {"mac1", "L-A8448DC5"},	  {"mac2", "L-5D8DADF5"},      {"mac2-m2", "L-B90B5B66"},
	    {"mac2-m2pro", "L-14F120D1"}, {"p2", "L-2753CF59"},	       {"p3", "L-A0A19F79"},
	    {"p3dn", "L-B601B3B6"},	  {"p4d", "L-86A789C3"},       {"p5", "L-5136197D"},
	    {"r3", "L-B7208018"},	  {"r4", "L-313524BA"},	       {"r5", "L-EA4FD6CF"},
	    {"r5a", "L-8FE30D52"},	  {"r5ad", "L-EC7178B6"},      {"r5b", "L-A2D59C67"},
	    {"r5d", "L-8814B54F"},	  {"r5dn", "L-4AB14223"},      {"r5n", "L-52EF324A"},
	    {"r6a", "L-BC1589C5"},	  {"r6g", "L-B6D6065D"},       {"r6gd", "L-EF284EFB"},
	    {"r6i", "L-F13A970A"},	  {"r6id", "L-B89271A9"},      {"r6idn", "L-C4EABC2C"},
	    {"r6in", "L-EA99608B"},	  {"r7a", "L-4D15192B"},       {"r7g", "L-67B8B4C7"},
	    {"r7gd", "L-01137DCE"},	  {"r7i", "L-55E05032"},       {"r7iz", "L-BC9FCC71"},
	    {"t3", "L-1586174D"},	  {"trn1", "L-5E4FB836"},      {"trn1n", "L-39926A58"},
	    {"u-12tb1", "L-D6994875"},	  {"u-18tb1", "L-5F7FD336"},   {"u-24tb1", "L-FACBE655"},
	    {"u-3tb1", "L-7F5506AB"},	  {"u-6tb1", "L-89870E8E"},    {"u-9tb1", "L-98E1FFAC"},
	    {"u7in-16tb", "L-75B9BECB"},  {"u7in-24tb", "L-CA51381E"}, {"u7in-32tb", "L-9D28191F"},
	    {"vt1", "L-A68CFBF7"},	  {"x1", "L-DE3D9563"},	       {"x1e", "L-DEF8E115"},
	    {"x2gd", "L-5CC9EA82"},	  {"x2idn", "L-A84ABF80"},     {"x2iedn", "L-D0AA08B1"},
	    {"x2iezn", "L-888B4496"},	  {"z1d", "L-F035E935"},
	};
	char fam[32];
	size_t i;

	if (itype == NULL)
		return NULL;
	for (i = 0; i < sizeof(fam) - 1 && itype[i] != '\0' && itype[i] != '.'; i++)
		fam[i] = itype[i];
	fam[i] = '\0';
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (strcmp(fam, t[i].family) == 0)
			return t[i].code;
	return NULL;
}

/* The quota one node on a dedicated host of itype uses: one instance and
 * one host of its family; as upstream, its vCPUs are not counted against
 * the instance quotas. */
static void
host_quota(const char *itype, struct drv_quota *q)
{
	const char *code = host_quota_code(itype);

	q->instances = 1;
	if (code != NULL) {
		if (q->extra == NULL)
			q->extra = json_object();
		json_object_set_new(q->extra, code, json_real(1));
	}
}

/* A label on dedicated hosts. Not a fleet label: Nodepool allocates the
 * host, then launches the fleet elsewhere; we allocate none. */
static int
label_dedicated(const struct sm_label *l)
{
	return json_is_true(lraw(l, "dedicated-host")) && lraw(l, "fleet") == NULL;
}

static int
label_spot(const struct sm_label *l)
{
	return json_is_true(lraw(l, "use-spot"));
}

/* The quota one instance of itype uses. */
static void
type_quota(struct sm_adapter *a, const char *itype, int spot, struct drv_quota *q)
{
	const json_t *t = json_object_get(a->itypes, itype != NULL ? itype : "");
	const char *code = quota_code(itype, spot);
	double vcpus = t != NULL ? np_json_num(t, "vcpus", 0) : 0;

	q->instances = 1;
	q->cores = vcpus;
	q->ram = t != NULL ? np_json_num(t, "ram", 0) : 0;
	if (code != NULL && vcpus > 0) {
		if (q->extra == NULL)
			q->extra = json_object();
		json_object_set_new(q->extra, code, json_real(vcpus));
	}
}

/* ---- describe items -> instances ---- */

static struct sm_instance *
instance_of(struct sm_adapter *a, const xmlNode *it)
{
	struct sm_instance *i = sm_instance_new();
	char buf[256], k[256], v[512];
	const xmlNode *t;
	int spot;

	sm_set_str(&i->external_id, aws_xtext(it, "instanceId", buf, sizeof(buf)));
	aws_xtext(it, "instanceState/name", buf, sizeof(buf));
	i->ready = strcmp(buf, "running") == 0;
	i->deleted = strcmp(buf, "shutting-down") == 0 || strcmp(buf, "terminated") == 0;
	if (aws_xtext(it, "privateIpAddress", buf, sizeof(buf))[0] != '\0')
		sm_set_str(&i->private_ipv4, buf);
	if (aws_xtext(it, "ipAddress", buf, sizeof(buf))[0] != '\0')
		sm_set_str(&i->public_ipv4, buf);
	if (aws_xtext(it, "networkInterfaceSet/item/ipv6AddressesSet/item/ipv6Address", buf,
		      sizeof(buf))[0] != '\0')
		sm_set_str(&i->public_ipv6, buf);
	sm_set_str(&i->interface_ip, i->public_ipv4 != NULL   ? i->public_ipv4
				     : i->public_ipv6 != NULL ? i->public_ipv6
							      : i->private_ipv4);
	if (aws_xtext(it, "placement/availabilityZone", buf, sizeof(buf))[0] != '\0')
		sm_set_str(&i->az, buf);
	if (aws_xtext(it, "placement/hostId", buf, sizeof(buf))[0] != '\0')
		sm_set_str(&i->host_id, buf);
	sm_set_str(&i->region, json_string_value(json_object_get(a->env->provider, "region-name")));
	for (t = aws_xpath(it, "tagSet/item"); t != NULL; t = aws_xnext(t))
		json_object_set_new(i->metadata, aws_xtext(t, "key", k, sizeof(k)),
				    json_string(aws_xtext(t, "value", v, sizeof(v))));
	spot = strcmp(aws_xtext(it, "instanceLifecycle", buf, sizeof(buf)), "spot") == 0;
	aws_xtext(it, "instanceType", buf, sizeof(buf));
	drv_quota_clear(&i->quota);
	if (i->host_id != NULL)
		host_quota(buf, &i->quota);
	else
		type_quota(a, buf, spot, &i->quota);
	i->driver_data =
	    json_pack("{s:s, s:s}", "instance_type", buf, "lifecycle", spot ? "spot" : "on-demand");
	return i;
}

/* ---- the shared poll ---- */

static void poll_schedule(struct sm_adapter *a, double in);
static double poll_pace(struct sm_adapter *a);

static void
machine_wake(struct amachine *am)
{
	sm_machine_wake(&am->m);
}

static void
unlist(struct amachine *am)
{
	struct sm_adapter *a = am->a;

	if (!am->listed)
		return;
	if (am->st == AM_TERM)
		TAILQ_REMOVE(&a->terminating, am, entry);
	else
		TAILQ_REMOVE(&a->waiting, am, entry);
	am->listed = 0;
}

static void
wait_on_poll(struct amachine *am)
{
	am->st = AM_WAIT;
	am->m.state = am_names[AM_WAIT];
	TAILQ_INSERT_TAIL(&am->a->waiting, am, entry);
	am->listed = 1;
	poll_schedule(am->a, AWS_PACE);
}

static void
poll_done(const struct aws_result *r, void *arg)
{
	struct poll_ctx *pc = arg;
	struct sm_adapter *a = pc->a;
	struct amachine *am;
	const xmlNode *res, *it;
	char id[64];

	if (--a->npoll > 0 && r->code != NULL)
		return;
	if (r->code != NULL) {
		log_warn("aws %s: describing instances: %s: %s", a->provider, r->code, r->message);
		poll_schedule(a, AWS_POLL);
		return;
	}
	for (res = aws_xpath(r->root, "reservationSet/item"); res != NULL; res = aws_xnext(res))
		for (it = aws_xpath(res, "instancesSet/item"); it != NULL; it = aws_xnext(it)) {
			aws_xtext(it, "instanceId", id, sizeof(id));
			TAILQ_FOREACH(am, &a->waiting, entry)
			{
				if (am->iid == NULL || strcmp(am->iid, id) != 0)
					continue;
				am->seen = 2;
				aws_xtext(it, "instanceState/name", am->istate, sizeof(am->istate));
				if (am->m.seen_at == 0 && strcmp(am->istate, "running") == 0)
					am->m.seen_at =
					    a->last_poll; /* the boot estimate's sample */
				aws_xtext(it, "stateReason/message", am->reason,
					  sizeof(am->reason));
				sm_instance_free(am->inst);
				am->inst = instance_of(a, it);
			}
		}
	TAILQ_FOREACH(am, &a->waiting, entry)
	{
		if (am->seen == 1) /* asked about, not listed */
			am->seen = 3;
		machine_wake(am);
	}
	if (!TAILQ_EMPTY(&a->waiting))
		poll_schedule(a, AWS_PACE);
}

static void
poll_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sm_adapter *a = arg;
	struct amachine *am;
	char *form = NULL;
	int n = 0, slot = 0;

	(void)fd;
	(void)what;
	if (a->npoll > 0 || TAILQ_EMPTY(&a->waiting))
		return;
	if (poll_pace(a) > 0.001) { /* the pace moved later meanwhile */
		poll_schedule(a, AWS_PACE);
		return;
	}
	a->polls++;
	a->last_poll = np_mono_s();
	TAILQ_FOREACH(am, &a->waiting, entry)
	{
		if (am->iid == NULL)
			continue;
		if (slot == 64)
			break;
		if (n == 0)
			aws_form_add(&form, "Filter.1.Name", "instance-id");
		aws_form_addf(&form, am->iid, "Filter.1.Value.%d", n + 1);
		if (am->seen != 2)
			am->seen = 1;
		if (++n == AWS_IDS_PER_CALL || TAILQ_NEXT(am, entry) == NULL) {
			struct poll_ctx *pc = &a->pctx[slot];
			pc->a = a;
			pc->slot = slot++;
			a->npoll++;
			aws_ec2(a->api, "DescribeInstances", form, 0, poll_done, pc);
			free(form);
			form = NULL;
			n = 0;
		}
	}
	free(form);
}

/* Seconds until the next shared describe is useful (sm_listing_wait: the
 * instances' expected boots), describes going at ten times `rate`. */
static double
poll_pace(struct sm_adapter *a)
{
	double rate = a->env->cfg->rate;

	return sm_listing_wait(a->env, a->last_poll, rate > 0 ? 1 / (10 * rate) : 0);
}

/* The next shared describe: in seconds after the last one started, or
 * AWS_PACE: when the pace says (re-armed at every ask). */
static void
poll_schedule(struct sm_adapter *a, double in)
{
	struct timeval tv;
	double since = np_mono_s() - a->last_poll;

	if (a->npoll > 0)
		return;
	if (in == AWS_PACE) {
		in = poll_pace(a);
	} else {
		if (evtimer_pending(a->poll_ev, NULL))
			return;
		in = since >= in ? 0 : in - since;
	}
	tv.tv_sec = (time_t)in;
	tv.tv_usec = (suseconds_t)((in - floor(in)) * 1e6);
	evtimer_add(a->poll_ev, &tv);
}

/* ---- batched terminates ---- */

struct term_ctx {
	struct pend p;
	struct sm_adapter *a;
	struct amachine *v[1000];
	int n;
};

static void
term_done(const struct aws_result *r, void *arg)
{
	struct term_ctx *tc = arg;
	int i;

	LIST_REMOVE(&tc->p, entry);
	for (i = 0; i < tc->n; i++) {
		struct amachine *am = tc->v[i];
		am->call = NULL;
		TAILQ_REMOVE(&tc->a->terminating, am, entry);
		am->listed = 0;
		if (r->code == NULL) {
			am->since = np_mono_s();
			wait_on_poll(am);
		} else if (tc->n > 1) {
			/* one bad id fails the whole batch: each alone */
			am->solo = 1;
			TAILQ_INSERT_TAIL(&tc->a->terminating, am, entry);
			am->listed = 1;
		} else if (strcmp(r->code, "InvalidInstanceID.NotFound") == 0 ||
			   strcmp(r->code, "InvalidInstanceID.Malformed") == 0) {
			am->st = AM_DONE;
			am->m.error = SM_E_NOTFOUND;
		} else {
			am->st = AM_FAILED;
			am->m.error = SM_E_FAILED;
			snprintf(am->m.error_msg, sizeof(am->m.error_msg), "terminate: %s: %s",
				 r->code, r->message);
		}
		machine_wake(am);
	}
	if (!TAILQ_EMPTY(&tc->a->terminating))
		event_active(tc->a->term_ev, 0, 0);
	free(tc);
}

static void
term_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sm_adapter *a = arg;
	struct amachine *am;
	struct term_ctx *tc = NULL;
	char *form = NULL;

	(void)fd;
	(void)what;
	TAILQ_FOREACH(am, &a->terminating, entry)
	{
		if (am->call != NULL)
			continue;
		if (tc != NULL && (am->solo || tc->n == 1000))
			break;
		if (tc == NULL) {
			tc = calloc(1, sizeof(*tc));
			LIST_INSERT_HEAD(&a->pend, &tc->p, entry);
		}
		tc->a = a;
		aws_form_addf(&form, am->iid, "InstanceId.%d", tc->n + 1);
		tc->v[tc->n++] = am;
		if (am->solo)
			break;
	}
	if (tc == NULL)
		return;
	a->terminate_calls++;
	{
		struct aws_call *c = aws_ec2(a->api, "TerminateInstances", form, 1, term_done, tc);
		int i;
		for (i = 0; i < tc->n; i++)
			tc->v[i]->call = c;
	}
	free(form);
	/* more queued (over 1000, or solos): next turn */
	TAILQ_FOREACH(am, &a->terminating, entry)
	if (am->call == NULL) {
		event_active(a->term_ev, 0, 0);
		break;
	}
}

/* ---- images ---- */

static void
image_key(const struct sm_label *l, const char *ext, char *buf, size_t len)
{
	if (ext != NULL)
		snprintf(buf, len, "id:%s", ext);
	else if (l->image != NULL && l->image->image_id != NULL)
		snprintf(buf, len, "id:%s", l->image->image_id);
	else
		snprintf(buf, len, "filters:%s", l->cloud_image != NULL ? l->cloud_image : "");
}

static void
image_done(const struct aws_result *r, void *arg)
{
	struct amachine *am = arg;
	struct sm_adapter *a = am->a;
	const xmlNode *it, *best = NULL;
	char d[64], bd[64] = "", id[64], root[64];

	am->call = NULL;
	if (r->code != NULL) {
		am->st = AM_FAILED;
		am->m.error = SM_E_FAILED;
		snprintf(am->m.error_msg, sizeof(am->m.error_msg), "image: %s: %s", r->code,
			 r->message);
		machine_wake(am);
		return;
	}
	for (it = aws_xpath(r->root, "imagesSet/item"); it != NULL; it = aws_xnext(it)) {
		char st[32];
		if (strcmp(aws_xtext(it, "imageState", st, sizeof(st)), "available") != 0)
			continue;
		aws_xtext(it, "creationDate", d, sizeof(d));
		if (best == NULL || strcmp(d, bd) > 0) {
			best = it;
			snprintf(bd, sizeof(bd), "%s", d);
		}
	}
	if (best == NULL) {
		am->st = AM_FAILED;
		am->m.error = SM_E_FAILED;
		snprintf(am->m.error_msg, sizeof(am->m.error_msg), "no available image matches %s",
			 am->image_key);
	} else {
		json_object_set_new(a->images, am->image_key,
				    json_pack("{s:s, s:s, s:f}", "id",
					      aws_xtext(best, "imageId", id, sizeof(id)), "root",
					      aws_xtext(best, "rootDeviceName", root, sizeof(root)),
					      "t", np_mono_s()));
		am->st = AM_START;
	}
	machine_wake(am);
}

static void
image_describe(struct amachine *am)
{
	const struct sm_label *l = am->label;
	char *form = NULL;

	if (am->image_ref != NULL) {
		aws_form_add(&form, "ImageId.1", am->image_ref);
	} else {
		const json_t *f;
		size_t i, j;
		json_array_foreach(
		    json_object_get(l->image != NULL ? l->image->raw : NULL, "image-filters"), i, f)
		{
			const json_t *vals = json_object_get(f, "values");
			const char *name = json_string_value(json_object_get(f, "name"));
			const json_t *v;
			if (vals == NULL)
				vals = json_object_get(f, "Values");
			if (name == NULL)
				name = json_string_value(json_object_get(f, "Name"));
			aws_form_addf(&form, name, "Filter.%zu.Name", i + 1);
			json_array_foreach(vals, j, v) aws_form_addf(
			    &form, json_string_value(v), "Filter.%zu.Value.%zu", i + 1, j + 1);
		}
	}
	am->st = AM_IMAGE;
	am->m.state = am_names[AM_IMAGE];
	am->call = aws_ec2(am->a->api, "DescribeImages", form, 0, image_done, am);
	free(form);
}

/* ---- run parameters ---- */

static void
add_tags(char **form, const char *prefix, int n, const char *type, const json_t *tags)
{
	const char *k;
	const json_t *v;
	int t = 1;

	aws_form_addf(form, type, "%sTagSpecification.%d.ResourceType", prefix, n);
	json_object_foreach((json_t *)tags, k, v)
	{
		aws_form_addf(form, k, "%sTagSpecification.%d.Tag.%d.Key", prefix, n, t);
		aws_form_addf(form, json_string_value(v), "%sTagSpecification.%d.Tag.%d.Value",
			      prefix, n, t);
		t++;
	}
}

/* Launch parameters shared by RunInstances ("") and launch templates
 * ("LaunchTemplateData."). */
static void
launch_params(struct amachine *am, const char *pfx, char **form, const char *image,
	      const char *root)
{
	const struct sm_label *l = am->label;
	const json_t *pool = l->pool->raw, *iam = lraw(l, "iam-instance-profile");
	const char *sg = pstr(l, "security-group-id"), *subnet = pstr(l, "subnet-id");
	int pub4 = np_json_bool(pool, "public-ipv4", np_json_bool(pool, "public-ip-address", 1));
	int pub6 = np_json_bool(pool, "public-ipv6", 0);
	char k[128], num[32];

	aws_form_addf(form, image, "%sImageId", pfx);
	if (lstr(l, "key-name") != NULL)
		aws_form_addf(form, lstr(l, "key-name"), "%sKeyName", pfx);
	aws_form_addf(form, "0", "%sNetworkInterface.1.DeviceIndex", pfx);
	aws_form_addf(form, pub4 ? "true" : "false",
		      "%sNetworkInterface.1.AssociatePublicIpAddress", pfx);
	if (pub6)
		aws_form_addf(form, "1", "%sNetworkInterface.1.Ipv6AddressCount", pfx);
	if (subnet != NULL)
		aws_form_addf(form, subnet, "%sNetworkInterface.1.SubnetId", pfx);
	if (sg != NULL)
		aws_form_addf(form, sg, "%sNetworkInterface.1.SecurityGroupId.1", pfx);
	if (lraw(l, "volume-size") != NULL || lraw(l, "volume-type") != NULL ||
	    lraw(l, "iops") != NULL || lraw(l, "throughput") != NULL) {
		aws_form_addf(form, root != NULL && root[0] != '\0' ? root : "/dev/xvda",
			      "%sBlockDeviceMapping.1.DeviceName", pfx);
		aws_form_addf(form, "true", "%sBlockDeviceMapping.1.Ebs.DeleteOnTermination", pfx);
		if (lraw(l, "volume-size") != NULL) {
			snprintf(num, sizeof(num), "%lld",
				 (long long)json_integer_value(lraw(l, "volume-size")));
			aws_form_addf(form, num, "%sBlockDeviceMapping.1.Ebs.VolumeSize", pfx);
		}
		if (lstr(l, "volume-type") != NULL)
			aws_form_addf(form, lstr(l, "volume-type"),
				      "%sBlockDeviceMapping.1.Ebs.VolumeType", pfx);
		if (lraw(l, "iops") != NULL) {
			snprintf(num, sizeof(num), "%lld",
				 (long long)json_integer_value(lraw(l, "iops")));
			aws_form_addf(form, num, "%sBlockDeviceMapping.1.Ebs.Iops", pfx);
		}
		if (lraw(l, "throughput") != NULL) {
			snprintf(num, sizeof(num), "%lld",
				 (long long)json_integer_value(lraw(l, "throughput")));
			aws_form_addf(form, num, "%sBlockDeviceMapping.1.Ebs.Throughput", pfx);
		}
	}
	if (lstr(l, "userdata") != NULL) {
		/* base64, as the EC2 API wants it */
		static const char b64[] =
		    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
		const unsigned char *s = (const unsigned char *)lstr(l, "userdata");
		size_t n = strlen((const char *)s), i, o = 0;
		char *out = malloc(4 * (n / 3 + 1) + 1);
		for (i = 0; i < n; i += 3) {
			unsigned v = s[i] << 16 | (i + 1 < n ? s[i + 1] << 8 : 0) |
				     (i + 2 < n ? s[i + 2] : 0);
			out[o++] = b64[v >> 18 & 63];
			out[o++] = b64[v >> 12 & 63];
			out[o++] = i + 1 < n ? b64[v >> 6 & 63] : '=';
			out[o++] = i + 2 < n ? b64[v & 63] : '=';
		}
		out[o] = '\0';
		aws_form_addf(form, out, "%sUserData", pfx);
		free(out);
	}
	if (json_string_value(json_object_get(iam, "arn")) != NULL)
		aws_form_addf(form, json_string_value(json_object_get(iam, "arn")),
			      "%sIamInstanceProfile.Arn", pfx);
	else if (json_string_value(json_object_get(iam, "name")) != NULL)
		aws_form_addf(form, json_string_value(json_object_get(iam, "name")),
			      "%sIamInstanceProfile.Name", pfx);
	if (lstr(l, "imdsv2") != NULL) {
		aws_form_addf(form, lstr(l, "imdsv2"), "%sMetadataOptions.HttpTokens", pfx);
		aws_form_addf(form, "enabled", "%sMetadataOptions.HttpEndpoint", pfx);
	}
	if (json_is_true(lraw(l, "ebs-optimized")))
		aws_form_addf(form, "true", "%sEbsOptimized", pfx);
	snprintf(k, sizeof(k), "%s", pfx);
}

/* ---- create ---- */

/* The machine's instance id is iid (NULL: none yet): its external_id is
 * that id, or on a dedicated host the JSON text of upstream's object
 * {"instance": iid, "host": host} (the framework stores it as an object). */
static void
set_ids(struct amachine *am, const char *iid)
{
	json_t *o;

	sm_set_str(&am->iid, iid);
	if (am->host == NULL) {
		sm_set_str(&am->m.external_id, iid);
		return;
	}
	o = json_object();
	if (iid != NULL)
		json_object_set_new(o, "instance", json_string(iid));
	json_object_set_new(o, "host", json_string(am->host));
	free(am->m.external_id);
	am->m.external_id = json_dumps(o, JSON_COMPACT);
	json_decref(o);
}

/* AllocateHosts, then DescribeHosts until the host is available, as
 * upstream's HOST_ALLOCATING states. */
static void
host_done(const struct aws_result *r, void *arg)
{
	struct amachine *am = arg;
	char buf[128];

	am->call = NULL;
	if (r->code != NULL) {
		am->st = AM_FAILED;
		am->m.error = strcmp(r->code, "HostLimitExceeded") == 0 ? SM_E_QUOTA : SM_E_FAILED;
		snprintf(am->m.error_msg, sizeof(am->m.error_msg), "%s: %s: %s",
			 am->host == NULL ? "AllocateHosts" : "DescribeHosts", r->code, r->message);
	} else if (am->host == NULL) {
		if (aws_xtext(r->root, "hostIdSet/item", buf, sizeof(buf))[0] == '\0') {
			am->st = AM_FAILED;
			am->m.error = SM_E_FAILED;
			snprintf(am->m.error_msg, sizeof(am->m.error_msg),
				 "AllocateHosts answered no host");
		} else {
			am->host = strdup(buf);
			set_ids(am, NULL); /* saved at once: a crash leaves no unknown host */
			am->st = AM_HOSTWAIT;
			am->since = np_mono_s();
		}
	} else {
		aws_xtext(r->root, "hostSet/item/state", buf, sizeof(buf));
		if (strcmp(buf, "available") == 0) {
			am->st = AM_START;
		} else if (buf[0] == '\0' || strcmp(buf, "pending") == 0) {
			am->st = AM_HOSTWAIT;
			am->since = np_mono_s() + AWS_POLL;
		} else {
			am->st = AM_FAILED;
			am->m.error = SM_E_FAILED;
			snprintf(am->m.error_msg, sizeof(am->m.error_msg), "host %s is %s",
				 am->host, buf);
		}
	}
	am->m.state = am_names[am->st];
	machine_wake(am);
}

static void
host_allocate(struct amachine *am)
{
	const struct sm_label *l = am->label;
	const char *az = am->az != NULL ? am->az : pstr(l, "availability-zone");
	char *form = NULL;

	aws_form_add(&form, "InstanceType", lstr(l, "instance-type"));
	aws_form_add(&form, "Quantity", "1");
	aws_form_add(&form, "AutoPlacement", "off");
	aws_form_add(&form, "HostRecovery", "off");
	aws_form_add(&form, "HostMaintenance", "off");
	if (az != NULL)
		aws_form_add(&form, "AvailabilityZone", az);
	add_tags(&form, "", 1, "dedicated-host", am->tags);
	am->st = AM_HOST;
	am->m.state = am_names[AM_HOST];
	am->call = aws_ec2(am->a->api, "AllocateHosts", form, 1, host_done, am);
	free(form);
}

static void
host_describe(struct amachine *am)
{
	char *form = NULL;

	aws_form_add(&form, "HostId.1", am->host);
	am->st = AM_HOST;
	am->m.state = am_names[AM_HOST];
	am->call = aws_ec2(am->a->api, "DescribeHosts", form, 0, host_done, am);
	free(form);
}

static void
submit_done(const struct aws_result *r, void *arg)
{
	struct amachine *am = arg;
	const xmlNode *it;
	char id[64] = "", code[128] = "", msg[256] = "";

	am->call = NULL;
	if (r->code != NULL) {
		snprintf(code, sizeof(code), "%s", r->code);
		snprintf(msg, sizeof(msg), "%s", r->message);
	} else if ((it = aws_xpath(r->root, "instancesSet/item")) != NULL) {
		aws_xtext(it, "instanceId", id, sizeof(id));
	} else {
		/* CreateFleet: the instance, else the first error */
		aws_xtext(r->root, "fleetInstanceSet/item/instanceIds/item", id, sizeof(id));
		if (id[0] == '\0') {
			aws_xtext(r->root, "errorSet/item/errorCode", code, sizeof(code));
			aws_xtext(r->root, "errorSet/item/errorMessage", msg, sizeof(msg));
			if (code[0] == '\0')
				snprintf(code, sizeof(code), "NoInstance");
		}
	}
	if (id[0] != '\0') {
		set_ids(am, id);
		am->since = np_mono_s();
		am->a->launched++;
		wait_on_poll(am);
	} else {
		int quota = strcmp(code, "VcpuLimitExceeded") == 0 ||
			    strcmp(code, "InstanceLimitExceeded") == 0 ||
			    strcmp(code, "MaxSpotInstanceCountExceeded") == 0 ||
			    strcmp(code, "VolumeLimitExceeded") == 0;
		am->st = AM_FAILED;
		am->m.error = quota ? SM_E_QUOTA : SM_E_FAILED;
		snprintf(am->m.error_msg, sizeof(am->m.error_msg), "%s: %s", code, msg);
	}
	machine_wake(am);
}

static const json_t *
fleet_of(const struct sm_label *l)
{
	return lraw(l, "fleet");
}

static void
template_name(struct amachine *am, const char *image, char *buf, size_t len)
{
	const struct sm_label *l = am->label;

	snprintf(buf, len, "nodepool-%s-%s-%s-%s", am->a->provider, l->pool->name, l->name, image);
	for (char *p = buf; *p; p++)
		if (!isalnum((unsigned char)*p) && strchr("()./_-", *p) == NULL)
			*p = '-';
}

static void
template_done(const struct aws_result *r, void *arg)
{
	struct amachine *am = arg;
	const json_t *img = json_object_get(am->a->images, am->image_key);
	char name[256];

	am->call = NULL;
	template_name(am, json_string_value(json_object_get(img, "id")), name, sizeof(name));
	if (r->code == NULL ||
	    strcmp(r->code, "InvalidLaunchTemplateName.AlreadyExistsException") == 0) {
		json_object_set_new(am->a->templates, name, json_true());
		am->st = AM_START;
	} else if (strcmp(r->code, "InvalidLaunchTemplateName.NotFoundException") == 0) {
		/* describe said missing: create it */
		const json_t *tpl_img = img;
		char *form = NULL, tn[256];

		aws_form_add(&form, "LaunchTemplateName", name);
		launch_params(am, "LaunchTemplateData.", &form,
			      json_string_value(json_object_get(tpl_img, "id")),
			      json_string_value(json_object_get(tpl_img, "root")));
		{
			json_t *t = json_pack("{s:s}", "nodepool_provider_name", am->a->provider);
			add_tags(&form, "", 1, "launch-template", t);
			json_decref(t);
		}
		snprintf(tn, sizeof(tn), "%s", name);
		am->call = aws_ec2(am->a->api, "CreateLaunchTemplate", form, 1, template_done, am);
		free(form);
		return;
	} else {
		am->st = AM_FAILED;
		am->m.error = SM_E_FAILED;
		snprintf(am->m.error_msg, sizeof(am->m.error_msg),
			 "launch template %.100s: %.60s: %.70s", name, r->code, r->message);
	}
	machine_wake(am);
}

static void
submit(struct amachine *am, const json_t *img)
{
	const struct sm_label *l = am->label;
	const char *image = json_string_value(json_object_get(img, "id"));
	const json_t *fleet = fleet_of(l);
	char *form = NULL, name[256];
	const char *az = am->az != NULL ? am->az : pstr(l, "availability-zone");

	aws_form_add(&form, "ClientToken", am->token);
	if (fleet == NULL) {
		launch_params(am, "", &form, image,
			      json_string_value(json_object_get(img, "root")));
		aws_form_add(&form, "InstanceType", lstr(l, "instance-type"));
		aws_form_add(&form, "MinCount", "1");
		aws_form_add(&form, "MaxCount", "1");
		if (am->spot)
			aws_form_add(&form, "InstanceMarketOptions.MarketType", "spot");
		if (am->host != NULL) {
			aws_form_add(&form, "Placement.Tenancy", "host");
			aws_form_add(&form, "Placement.HostId", am->host);
			aws_form_add(&form, "Placement.Affinity", "host");
		}
		if (az != NULL)
			aws_form_add(&form, "Placement.AvailabilityZone", az);
	} else {
		const char *strategy =
		    json_string_value(json_object_get(fleet, "allocation-strategy"));
		const json_t *types = json_object_get(fleet, "instance-types"), *t;
		size_t i;

		template_name(am, image, name, sizeof(name));
		if (!json_is_true(json_object_get(am->a->templates, name))) {
			char *q = NULL;
			aws_form_add(&q, "LaunchTemplateName.1", name);
			free(form);
			am->st = AM_TEMPLATE;
			am->m.state = am_names[AM_TEMPLATE];
			am->call =
			    aws_ec2(am->a->api, "DescribeLaunchTemplates", q, 0, template_done, am);
			free(q);
			return;
		}
		aws_form_add(&form, "Type", "instant");
		aws_form_add(&form,
			     "LaunchTemplateConfigs.1.LaunchTemplateSpecification."
			     "LaunchTemplateName",
			     name);
		aws_form_add(&form, "LaunchTemplateConfigs.1.LaunchTemplateSpecification.Version",
			     "$Latest");
		json_array_foreach(types, i, t)
		{
			char pri[32];
			aws_form_addf(&form, json_string_value(t),
				      "LaunchTemplateConfigs.1.Overrides.%zu.InstanceType", i + 1);
			if (strategy != NULL && strcmp(strategy, "prioritized") == 0) {
				snprintf(pri, sizeof(pri), "%zu", i);
				aws_form_addf(&form, pri,
					      "LaunchTemplateConfigs.1.Overrides.%zu.Priority",
					      i + 1);
			}
			if (az != NULL)
				aws_form_addf(&form, az,
					      "LaunchTemplateConfigs.1.Overrides.%zu."
					      "AvailabilityZone",
					      i + 1);
		}
		aws_form_add(&form, "TargetCapacitySpecification.TotalTargetCapacity", "1");
		aws_form_add(&form, "TargetCapacitySpecification.DefaultTargetCapacityType",
			     am->spot ? "spot" : "on-demand");
		if (strategy != NULL) {
			/* on-demand knows lowest-price and prioritized only */
			if (am->spot)
				aws_form_add(&form, "SpotOptions.AllocationStrategy", strategy);
			else
				aws_form_add(&form, "OnDemandOptions.AllocationStrategy",
					     strcmp(strategy, "prioritized") == 0 ? "prioritized"
										  : "lowest-price");
		}
	}
	add_tags(&form, "", 1, "instance", am->tags);
	add_tags(&form, "", 2, "volume", am->tags);
	am->st = AM_SUBMIT;
	am->m.state = am_names[AM_SUBMIT];
	am->call = aws_ec2(am->a->api, fleet != NULL ? "CreateFleet" : "RunInstances", form, 1,
			   submit_done, am);
	free(form);
}

static enum sm_status
create_advance(struct sm_machine *m, struct sm_instance **out)
{
	struct amachine *am = (struct amachine *)m;
	struct sm_adapter *a = am->a;

	m->retry_in = 30; /* we wake the machine when an answer comes */
	switch (am->st) {
	case AM_HOSTWAIT:
		if (np_mono_s() < am->since) {
			m->retry_in = am->since - np_mono_s();
			return SM_AGAIN;
		}
		host_describe(am);
		return SM_AGAIN;
	case AM_START: {
		const json_t *img = json_object_get(a->images, am->image_key);
		if (am->dedicated && am->host == NULL) {
			host_allocate(am);
			return SM_AGAIN;
		}
		if (img == NULL || np_mono_s() - np_json_num(img, "t", 0) > AWS_IMAGE_TTL) {
			image_describe(am);
			return SM_AGAIN;
		}
		submit(am, img);
		return am->st == AM_FAILED ? SM_ERROR : SM_AGAIN;
	}
	case AM_WAIT:
		if (am->seen == 3 && np_mono_s() - am->since > AWS_MISSING_GRACE) {
			m->error = SM_E_FAILED;
			snprintf(m->error_msg, sizeof(m->error_msg), "instance %s disappeared",
				 m->external_id);
			return SM_ERROR;
		}
		if (am->inst == NULL)
			return SM_AGAIN;
		if (strcmp(am->istate, "running") == 0) {
			unlist(am);
			am->st = AM_DONE;
			*out = am->inst;
			am->inst = NULL;
			sm_set_str(&(*out)->external_id, m->external_id);
			return SM_DONE;
		}
		if (strcmp(am->istate, "pending") != 0) {
			m->error = SM_E_FAILED;
			snprintf(m->error_msg, sizeof(m->error_msg), "instance %s is %s: %s",
				 m->external_id, am->istate, am->reason);
			return SM_ERROR;
		}
		return SM_AGAIN;
	case AM_FAILED:
		return SM_ERROR;
	default:
		return SM_AGAIN;
	}
}

/* ReleaseHosts: released (or already gone) ends the delete; a host still
 * holding its instance (shutting down) is asked again. */
static void
release_done(const struct aws_result *r, void *arg)
{
	struct amachine *am = arg;
	char code[128] = "", msg[256] = "";

	am->call = NULL;
	if (r->code != NULL) {
		snprintf(code, sizeof(code), "%s", r->code);
		snprintf(msg, sizeof(msg), "%s", r->message);
	} else {
		aws_xtext(r->root, "unsuccessful/item/error/code", code, sizeof(code));
		aws_xtext(r->root, "unsuccessful/item/error/message", msg, sizeof(msg));
	}
	if (code[0] == '\0' || strstr(code, "NotFound") != NULL) {
		am->released = 1;
		am->st = AM_DONE;
		am->m.error = SM_E_NONE;
	} else if (strstr(code, "InUse") != NULL && np_mono_s() - am->since < 600) {
		am->st = AM_RELEASE; /* again in a moment */
		am->again_at = np_mono_s() + AWS_POLL;
	} else {
		am->st = AM_FAILED;
		am->m.error = SM_E_FAILED;
		snprintf(am->m.error_msg, sizeof(am->m.error_msg), "release host %s: %s: %s",
			 am->host, code, msg);
	}
	am->m.state = am_names[am->st];
	machine_wake(am);
}

static void
host_release(struct amachine *am)
{
	char *form = NULL;

	aws_form_add(&form, "HostId.1", am->host);
	am->st = AM_RELEASE;
	am->m.state = am_names[AM_RELEASE];
	am->call = aws_ec2(am->a->api, "ReleaseHosts", form, 1, release_done, am);
	free(form);
}

static enum sm_status
delete_advance(struct sm_machine *m, struct sm_instance **out)
{
	struct amachine *am = (struct amachine *)m;

	(void)out;
	m->retry_in = 30;
	switch (am->st) {
	case AM_START:
		if (am->iid == NULL) {
			if (am->host == NULL)
				return SM_DONE;
			host_release(am);
			return SM_AGAIN;
		}
		am->st = AM_TERM;
		am->m.state = am_names[AM_TERM];
		TAILQ_INSERT_TAIL(&am->a->terminating, am, entry);
		am->listed = 1;
		event_active(am->a->term_ev, 0, 0);
		return SM_AGAIN;
	case AM_WAIT:
		if (am->seen == 3 || strcmp(am->istate, "terminated") == 0) {
			unlist(am);
			am->st = AM_DONE;
			if (am->host != NULL) {
				host_release(am);
				return SM_AGAIN;
			}
			return SM_DONE;
		}
		return SM_AGAIN;
	case AM_RELEASE:
		if (am->call == NULL && np_mono_s() >= am->again_at)
			host_release(am);
		else if (am->call == NULL)
			m->retry_in = am->again_at - np_mono_s();
		return SM_AGAIN;
	case AM_DONE:
		if (am->host != NULL && !am->released) { /* the instance was gone */
			am->m.error = SM_E_NONE;
			host_release(am);
			return SM_AGAIN;
		}
		return am->m.error == SM_E_NOTFOUND ? SM_ERROR : SM_DONE;
	case AM_FAILED:
		return SM_ERROR;
	default:
		return SM_AGAIN;
	}
}

static void
am_free(struct sm_machine *m)
{
	struct amachine *am = (struct amachine *)m;

	if (am->st == AM_TERM && am->call != NULL) {
		/* in a shared terminate batch: leave the call; drop us from it */
		struct amachine *o;
		int others = 0;
		TAILQ_FOREACH(o, &am->a->terminating, entry)
		if (o != am && o->call == am->call)
			others++;
		if (others == 0)
			aws_call_cancel(am->call);
		else
			log_debug("aws: delete machine freed with its terminate in flight");
		am->call = NULL;
	} else {
		aws_call_cancel(am->call);
	}
	unlist(am);
	sm_instance_free(am->inst);
	json_decref(am->tags);
	free(am->image_ref);
	free(am->image_key);
	free(am->az);
	free(am->hostname);
	free(am->iid);
	free(am->host);
	free(m->external_id);
	free(am);
}

static const struct sm_machine_ops create_ops = {create_advance, am_free};
static const struct sm_machine_ops delete_ops = {delete_advance, am_free};

static struct sm_machine *
aws_create_machine(struct sm_adapter *a, const struct sm_create_args *args)
{
	struct amachine *am = calloc(1, sizeof(*am));
	const struct sm_label *l = args->label;
	const json_t *v;
	const char *k;
	char key[512];
	unsigned char rnd[16];
	int i;

	if (am == NULL)
		abort();
	am->m.ops = &create_ops;
	am->a = a;
	am->create = 1;
	am->st = AM_START;
	am->m.state = am_names[AM_START];
	am->label = l;
	am->spot = label_spot(l);
	am->dedicated = label_dedicated(l);
	am->hostname = strdup(args->hostname);
	am->az = args->az != NULL ? strdup(args->az) : NULL;
	am->image_ref = args->image_external_id != NULL ? strdup(args->image_external_id)
			: l->image != NULL && l->image->image_id != NULL
			    ? strdup(l->image->image_id)
			    : NULL;
	image_key(l, args->image_external_id, key, sizeof(key));
	am->image_key = strdup(key);
	am->tags = json_object();
	json_object_foreach((json_t *)lraw(l, "tags"), k, v)
	{
		if (json_is_string(v))
			json_object_set_new(am->tags, k, json_incref((json_t *)v));
		else {
			char *s = json_dumps(v, JSON_ENCODE_ANY);
			json_object_set_new(am->tags, k, json_string(s != NULL ? s : ""));
			free(s);
		}
	}
	json_object_foreach((json_t *)lraw(l, "dynamic-tags"), k, v)
	{
		char ferr[256] = "not a string";
		char *s = json_is_string(v) ? sm_request_format(json_string_value(v), args->request,
								ferr, sizeof(ferr))
					    : NULL;
		if (s == NULL)
			log_warn("aws %s: dynamic tag %s: %s; left out (as upstream)", a->provider,
				 k, ferr);
		else
			json_object_set_new(am->tags, k, json_string(s));
		free(s);
	}
	json_object_update(am->tags, (json_t *)args->metadata);
	json_object_set_new(am->tags, "Name", json_string(args->hostname));
	/* ClientToken: idempotent RunInstances/CreateFleet across retries */
	for (i = 0; i < 16; i++)
		rnd[i] = (unsigned char)rand();
	{
		FILE *f = fopen("/dev/urandom", "rb");
		if (f != NULL) {
			if (fread(rnd, 1, sizeof(rnd), f) != sizeof(rnd))
				log_debug("aws: short read of /dev/urandom");
			fclose(f);
		}
	}
	for (i = 0; i < 16; i++)
		snprintf(am->token + 2 * i, 3, "%02x", rnd[i]);
	return &am->m;
}

static struct sm_machine *
aws_delete_machine(struct sm_adapter *a, const char *external_id)
{
	struct amachine *am = calloc(1, sizeof(*am));

	if (am == NULL)
		abort();
	am->m.ops = &delete_ops;
	am->a = a;
	am->st = AM_START;
	am->m.state = am_names[AM_START];
	am->m.external_id = strdup(external_id);
	am->since = np_mono_s();
	if (external_id[0] == '{') { /* {"instance", "host"}: either may be missing */
		json_t *o = json_loads(external_id, 0, NULL);
		const char *iid = json_string_value(json_object_get(o, "instance"));
		const char *host = json_string_value(json_object_get(o, "host"));
		am->iid = iid != NULL ? strdup(iid) : NULL;
		am->host = host != NULL ? strdup(host) : NULL;
		json_decref(o);
	} else {
		am->iid = strdup(external_id);
	}
	return &am->m;
}

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

static void lister_page(struct lister *ls, const char *token);

static void
lister_done(const struct aws_result *r, void *arg)
{
	struct lister *ls = arg;
	const xmlNode *it;
	char tok[2048];

	ls->call = NULL;
	if (r->code != NULL) {
		char err[512];
		snprintf(err, sizeof(err), "%s: %s: %s", ls->action, r->code, r->message);
		ls->end(ls, err);
		return;
	}
	if (strcmp(ls->action, "DescribeInstances") == 0) {
		const xmlNode *res;
		for (res = aws_xpath(r->root, "reservationSet/item"); res != NULL;
		     res = aws_xnext(res))
			for (it = aws_xpath(res, "instancesSet/item"); it != NULL;
			     it = aws_xnext(it))
				ls->item(ls, it);
	} else {
		for (it = aws_xpath(r->root, ls->set); it != NULL; it = aws_xnext(it))
			ls->item(ls, it);
	}
	aws_xtext(r->root, "nextToken", tok, sizeof(tok));
	if (tok[0] != '\0' && ls->pages + 1 >= AWS_MAX_LIST_PAGES) {
		/* a partial listing would read as resources gone: a failed one */
		char err[200];
		snprintf(err, sizeof(err), "%s: more than %d pages", ls->action,
			 AWS_MAX_LIST_PAGES);
		ls->end(ls, err);
	} else if (tok[0] != '\0') {
		ls->pages++;
		lister_page(ls, tok);
	} else
		ls->end(ls, NULL);
}

static void
lister_page(struct lister *ls, const char *token)
{
	char *form = ls->params != NULL ? strdup(ls->params) : NULL;

	if (token != NULL)
		aws_form_add(&form, "NextToken", token);
	else
		ls->pages = 0;
	ls->call = aws_ec2(ls->a->api, ls->action, form, 0, lister_done, ls);
	free(form);
}

/* list_instances */

static void
li_item(struct lister *ls, const xmlNode *it)
{
	char st[32];

	if (strcmp(aws_xtext(it, "instanceState/name", st, sizeof(st)), "terminated") == 0)
		return;
	if (ls->ninst == ls->cap) {
		ls->cap = ls->cap ? ls->cap * 2 : 64;
		ls->inst = realloc(ls->inst, ls->cap * sizeof(*ls->inst));
	}
	ls->inst[ls->ninst++] = instance_of(ls->a, it);
}

/* A listing's owner: listings in flight are freed with the adapter. */
struct listers {
	struct lister *v[32];
};
static struct listers all_listers; /* one worker per provider: one adapter */

static void
lister_forget(struct lister *ls)
{
	int i;

	for (i = 0; i < 32; i++)
		if (all_listers.v[i] == ls)
			all_listers.v[i] = NULL;
}

static struct lister *
lister_new(struct sm_adapter *a)
{
	struct lister *ls = calloc(1, sizeof(*ls));
	int i;

	ls->a = a;
	ls->meta = json_array();
	for (i = 0; i < 32; i++)
		if (all_listers.v[i] == NULL) {
			all_listers.v[i] = ls;
			break;
		}
	return ls;
}

static void
lister_free(struct lister *ls)
{
	size_t i;

	lister_forget(ls);
	aws_call_cancel(ls->call);
	for (i = 0; i < ls->ninst; i++)
		sm_instance_free(ls->inst[i]);
	free(ls->inst);
	free(ls->res);
	json_decref(ls->meta);
	json_decref(ls->keys);
	json_decref(ls->untagged);
	json_decref(ls->task_tags);
	free(ls->params);
	free(ls);
}

static void
li_end(struct lister *ls, const char *error)
{
	sm_instances_cb cb = (sm_instances_cb)ls->cb;

	if (error != NULL)
		cb(NULL, 0, error, ls->arg);
	else
		cb(ls->inst, ls->ninst, NULL, ls->arg);
	lister_free(ls);
}

static void
aws_list_instances(struct sm_adapter *a, sm_instances_cb cb, void *arg)
{
	struct lister *ls = lister_new(a);

	ls->action = "DescribeInstances";
	ls->item = li_item;
	ls->end = li_end;
	ls->cb = (void *)cb;
	ls->arg = arg;
	aws_form_add(&ls->params, "MaxResults", "1000");
	lister_page(ls, NULL);
}

/*
 * list_images: DescribeImages of the account's own AMIs (Owner self),
 * every page; tags from tagSet. Deregistered ones are left out.
 */
struct ilist {
	struct sm_adapter *a;
	drv_image_list_cb cb;
	void *arg;
	json_t *images; /* [{id, name, tags}] */
};

static void ilist_page(struct ilist *il, const char *token);

static void
ilist_done(const struct aws_result *r, void *arg)
{
	struct ilist *il = arg;
	const xmlNode *it, *t;
	char id[128], name[512], st[64], k[256], v[512], tok[1024];
	const json_t *o;
	size_t i, n;

	if (r->code != NULL) {
		char msg[600];
		snprintf(msg, sizeof(msg), "DescribeImages: %s: %s", r->code,
			 r->message ? r->message : "");
		il->cb(NULL, 0, msg, il->arg);
		json_decref(il->images);
		free(il);
		return;
	}
	for (it = aws_xpath(r->root, "imagesSet/item"); it != NULL; it = aws_xnext(it)) {
		json_t *tags = json_object();
		if (strcmp(aws_xtext(it, "imageState", st, sizeof(st)), "deregistered") == 0) {
			json_decref(tags);
			continue;
		}
		for (t = aws_xpath(it, "tagSet/item"); t != NULL; t = aws_xnext(t))
			json_object_set_new(tags, aws_xtext(t, "key", k, sizeof(k)),
					    json_string(aws_xtext(t, "value", v, sizeof(v))));
		json_array_append_new(
		    il->images,
		    json_pack("{s:s, s:s, s:o}", "id", aws_xtext(it, "imageId", id, sizeof(id)),
			      "name", aws_xtext(it, "name", name, sizeof(name)), "tags", tags));
	}
	if (aws_xtext(r->root, "nextToken", tok, sizeof(tok))[0] != '\0') {
		ilist_page(il, tok);
		return;
	}
	n = json_array_size(il->images);
	{
		struct drv_cloud_image *vv = calloc(n + 1, sizeof(*vv));
		if (vv == NULL)
			abort();
		json_array_foreach(il->images, i, o) vv[i] = (struct drv_cloud_image){
		    json_string_value(json_object_get(o, "id")),
		    json_string_value(json_object_get(o, "name")), json_object_get(o, "tags")};
		il->cb(vv, n, NULL, il->arg);
		free(vv);
	}
	json_decref(il->images);
	free(il);
}

static void
ilist_page(struct ilist *il, const char *token)
{
	char *form = NULL;

	aws_form_add(&form, "Owner.1", "self");
	if (token != NULL)
		aws_form_add(&form, "NextToken", token);
	aws_ec2(il->a->api, "DescribeImages", form, 0, ilist_done, il);
	free(form);
}

static void
aws_list_images(struct sm_adapter *a, drv_image_list_cb cb, void *arg)
{
	struct ilist *il = calloc(1, sizeof(*il));

	if (il == NULL)
		abort();
	il->a = a;
	il->cb = cb;
	il->arg = arg;
	il->images = json_array();
	ilist_page(il, NULL);
}

/* list_resources: instances, volumes, AMIs, snapshots in stages */

static const struct {
	const char *action, *set, *type, *id, *state, *skip, *params;
} stages[] = {
    {"DescribeHosts", "hostSet/item", "host", "hostId", "state", "released", "&MaxResults=500"},
    {"DescribeInstances", NULL, "instance", "instanceId", "instanceState/name", "terminated",
     "&MaxResults=1000"},
    {"DescribeVolumes", "volumeSet/item", "volume", "volumeId", "status", "deleted",
     "&MaxResults=500"},
    {"DescribeImages", "imagesSet/item", "ami", "imageId", "imageState", "deregistered",
     "&Owner.1=self"},
    {"DescribeSnapshots", "snapshotSet/item", "snapshot", "snapshotId", "status", "",
     "&Owner.1=self&MaxResults=1000"},
};

/* One resource listed: type (static), id, meta (taken). */
static void
lr_add(struct lister *ls, const char *type, const char *id, json_t *meta)
{
	json_t *holder = json_pack("{s:s, s:o}", "id", id, "meta", meta);

	json_array_append_new(ls->meta, holder);
	if (ls->nres == ls->rcap) {
		ls->rcap = ls->rcap ? ls->rcap * 2 : 64;
		ls->res = realloc(ls->res, ls->rcap * sizeof(*ls->res));
	}
	ls->res[ls->nres++] =
	    (struct sm_resource){type, json_string_value(json_object_get(holder, "id")),
				 json_object_get(holder, "meta")};
}

static void
lr_item(struct lister *ls, const xmlNode *it)
{
	char id[128], st[64], k[256], v[512];
	const xmlNode *t;
	json_t *meta;

	if (strcmp(aws_xtext(it, stages[ls->stage].state, st, sizeof(st)),
		   stages[ls->stage].skip) == 0)
		return;
	aws_xtext(it, stages[ls->stage].id, id, sizeof(id));
	meta = json_object();
	for (t = aws_xpath(it, "tagSet/item"); t != NULL; t = aws_xnext(t))
		json_object_set_new(meta, aws_xtext(t, "key", k, sizeof(k)),
				    json_string(aws_xtext(t, "value", v, sizeof(v))));
	if (json_object_size(meta) == 0 && (strcmp(stages[ls->stage].type, "ami") == 0 ||
					    strcmp(stages[ls->stage].type, "snapshot") == 0)) {
		/* maybe ours, its tags not yet copied from its import task */
		const char *snap =
		    strcmp(stages[ls->stage].type, "snapshot") == 0
			? id
			: aws_xtext(it, "blockDeviceMapping/item/ebs/snapshotId", v, sizeof(v));
		json_decref(meta);
		if (json_object_get(ls->a->not_ours, id) != NULL)
			return;
		if (snap[0] == '\0') {
			json_object_set_new(ls->a->not_ours, id, json_true());
			return;
		}
		if (ls->untagged == NULL)
			ls->untagged = json_array();
		json_array_append_new(ls->untagged,
				      json_pack("{s:s, s:s, s:s}", "type", stages[ls->stage].type,
						"id", id, "snap", snap));
		return;
	}
	lr_add(ls, stages[ls->stage].type, id, meta);
}

/*
 * As upstream's _tagAmis/_tagSnapshots: an AMI or snapshot without tags
 * made by an import task tagged for this provider (a builder stopped
 * between the import and its tagging) gets the task's tags (CreateTags),
 * so the leak rule can judge it in this very listing. Costs one
 * DescribeImportSnapshotTasks listing, and only in a pass that found
 * untagged ones; those no task of ours made are remembered and not looked
 * at again.
 */
static void lr_after_ec2(struct lister *ls);
static void noop_cb(const struct aws_result *r, void *arg);

static void
lt_item(struct lister *ls, const xmlNode *it)
{
	char snap[128], k[256], v[512];
	const xmlNode *t;
	json_t *tags;

	if (aws_xtext(it, "snapshotTaskDetail/snapshotId", snap, sizeof(snap))[0] == '\0')
		return;
	tags = json_object();
	for (t = aws_xpath(it, "tagSet/item"); t != NULL; t = aws_xnext(t))
		json_object_set_new(tags, aws_xtext(t, "key", k, sizeof(k)),
				    json_string(aws_xtext(t, "value", v, sizeof(v))));
	json_object_set_new(ls->task_tags, snap, tags);
}

static void
lt_end(struct lister *ls, const char *error)
{
	size_t i;
	const json_t *u;

	if (error != NULL) {
		log_warn("aws %s: %s (untagged images left for the next pass)", ls->a->provider,
			 error);
		lr_after_ec2(ls);
		return;
	}
	json_array_foreach(ls->untagged, i, u)
	{
		const char *id = json_string_value(json_object_get(u, "id"));
		const json_t *tags =
		    json_object_get(ls->task_tags, json_string_value(json_object_get(u, "snap")));
		const char *pn = json_string_value(json_object_get(tags, "nodepool_provider_name"));
		const char *k;
		const json_t *v;
		char *form = NULL;
		int n = 1;

		if (pn == NULL || strcmp(pn, ls->a->provider) != 0) {
			json_object_set_new(ls->a->not_ours, id, json_true());
			continue;
		}
		log_info("aws %s: copying the tags of its import task to %s %s", ls->a->provider,
			 json_string_value(json_object_get(u, "type")), id);
		aws_form_add(&form, "ResourceId.1", id);
		json_object_foreach((json_t *)tags, k, v)
		{
			aws_form_addf(&form, k, "Tag.%d.Key", n);
			aws_form_addf(&form, json_string_value(v), "Tag.%d.Value", n);
			n++;
		}
		aws_ec2(ls->a->api, "CreateTags", form, 1, noop_cb, NULL);
		free(form);
		lr_add(ls,
		       strcmp(json_string_value(json_object_get(u, "type")), "ami") == 0
			   ? "ami"
			   : "snapshot",
		       id, json_deep_copy(tags));
	}
	lr_after_ec2(ls);
}

/*
 * Then the objects of the provider's object-storage bucket, as upstream's
 * listResources: ListObjectsV2 (all pages), then GetObjectTagging of each
 * (one at a time); an object whose tags carry an upload's metadata that
 * this provider has no record of (a builder stopped between the S3 upload
 * and its cleanup) is deleted by the framework's leak rule. An object
 * whose tags cannot be read is skipped, as upstream; a failed listing
 * leaves the objects out of this pass.
 */
static char *s3_path(const char *bucket, const char *key);
static void lr_finish(struct lister *ls, const char *error);

static const char *
object_bucket(const struct sm_adapter *a)
{
	return json_string_value(
	    json_object_get(json_object_get(a->env->provider, "object-storage"), "bucket-name"));
}

static void lr_tag_next(struct lister *ls);

static void
lr_tag_done(const struct aws_result *r, void *arg)
{
	struct lister *ls = arg;
	const char *key = json_string_value(json_array_get(ls->keys, ls->kidx));
	const xmlNode *t;
	char k[256], v[512];

	ls->call = NULL;
	if (r->code == NULL) {
		json_t *meta = json_object();
		for (t = aws_xpath(r->root, "TagSet/Tag"); t != NULL; t = aws_xnext(t))
			json_object_set_new(meta, aws_xtext(t, "Key", k, sizeof(k)),
					    json_string(aws_xtext(t, "Value", v, sizeof(v))));
		lr_add(ls, "object", key, meta);
	} else {
		log_debug("aws %s: tags of object %s: %s: %s (skipped)", ls->a->provider, key,
			  r->code, r->message);
	}
	ls->kidx++;
	lr_tag_next(ls);
}

static void
lr_tag_next(struct lister *ls)
{
	char *path, *q;

	if (ls->kidx >= json_array_size(ls->keys)) {
		lr_finish(ls, NULL);
		return;
	}
	path = s3_path(object_bucket(ls->a), json_string_value(json_array_get(ls->keys, ls->kidx)));
	q = malloc(strlen(path) + 10);
	sprintf(q, "%s?tagging=", path); /* "tagging=": the canonical query libcurl signs */
	ls->call = aws_s3(ls->a->api, "GET", q, NULL, 0, NULL, lr_tag_done, ls);
	free(q);
	free(path);
}

static void lr_objects_page(struct lister *ls, const char *token);

static void
lr_objects_done(const struct aws_result *r, void *arg)
{
	struct lister *ls = arg;
	const xmlNode *c;
	char key[1100], tok[2048];

	ls->call = NULL;
	if (r->code != NULL) {
		log_warn("aws %s: listing bucket %s: %s: %s (objects left out)", ls->a->provider,
			 object_bucket(ls->a), r->code, r->message);
		json_array_clear(ls->keys);
		lr_finish(ls, NULL);
		return;
	}
	for (c = aws_xpath(r->root, "Contents"); c != NULL; c = aws_xnext(c))
		if (aws_xtext(c, "Key", key, sizeof(key))[0] != '\0')
			json_array_append_new(ls->keys, json_string(key));
	aws_xtext(r->root, "NextContinuationToken", tok, sizeof(tok));
	if (strcmp(aws_xtext(r->root, "IsTruncated", key, sizeof(key)), "true") == 0 &&
	    tok[0] != '\0' && ++ls->pages < AWS_MAX_LIST_PAGES)
		lr_objects_page(ls, tok);
	else {
		if (ls->pages >= AWS_MAX_LIST_PAGES)
			log_warn("aws %s: bucket %s: more than %d pages of objects: the rest are "
				 "left out of leak cleanup",
				 ls->a->provider, object_bucket(ls->a), AWS_MAX_LIST_PAGES);
		lr_tag_next(ls);
	}
}

static void
lr_objects_page(struct lister *ls, const char *token)
{
	char *b = curl_easy_escape(NULL, object_bucket(ls->a), 0);
	char *t = token != NULL ? curl_easy_escape(NULL, token, 0) : NULL;
	size_t n = strlen(b) + (t != NULL ? strlen(t) : 0) + 64;
	char *q = malloc(n);

	if (token == NULL)
		ls->pages = 0;
	/* query keys in order: what SigV4 signs */
	if (t != NULL)
		snprintf(q, n, "/%s?continuation-token=%s&list-type=2", b, t);
	else
		snprintf(q, n, "/%s?list-type=2", b);
	ls->call = aws_s3(ls->a->api, "GET", q, NULL, 0, NULL, lr_objects_done, ls);
	free(q);
	curl_free(b);
	curl_free(t);
}

static void
lr_end(struct lister *ls, const char *error)
{
	if (error == NULL && ls->stage + 1 < (int)(sizeof(stages) / sizeof(stages[0]))) {
		ls->stage++;
		ls->action = stages[ls->stage].action;
		ls->set = stages[ls->stage].set;
		free(ls->params);
		ls->params = strdup(stages[ls->stage].params);
		lister_page(ls, NULL);
		return;
	}
	if (error != NULL) {
		lr_finish(ls, error);
		return;
	}
	if (json_array_size(ls->untagged) > 0) {
		ls->action = "DescribeImportSnapshotTasks";
		ls->set = "importSnapshotTaskSet/item";
		ls->item = lt_item;
		ls->end = lt_end;
		free(ls->params);
		ls->params = NULL;
		ls->task_tags = json_object();
		lister_page(ls, NULL);
		return;
	}
	lr_after_ec2(ls);
}

/* After the EC2 listings: the bucket's objects, if any, then the answer. */
static void
lr_after_ec2(struct lister *ls)
{
	if (object_bucket(ls->a) != NULL) {
		ls->keys = json_array();
		lr_objects_page(ls, NULL);
		return;
	}
	lr_finish(ls, NULL);
}

static void
lr_finish(struct lister *ls, const char *error)
{
	sm_resources_cb cb = (sm_resources_cb)ls->cb;

	if (error != NULL)
		cb(NULL, 0, error, ls->arg);
	else
		cb(ls->res, ls->nres, NULL, ls->arg);
	lister_free(ls);
}

static void
aws_list_resources(struct sm_adapter *a, sm_resources_cb cb, void *arg)
{
	struct lister *ls = lister_new(a);

	ls->stage = 0;
	ls->action = stages[0].action;
	ls->set = stages[0].set;
	ls->params = strdup(stages[0].params);
	ls->item = lr_item;
	ls->end = lr_end;
	ls->cb = (void *)cb;
	ls->arg = arg;
	lister_page(ls, NULL);
}

struct del_ctx {
	struct pend p;
	sm_done_cb cb;
	void *arg;
	struct aws_call *call;
};

static void
del_done(const struct aws_result *r, void *arg)
{
	struct del_ctx *d = arg;
	int gone = r->code != NULL && strstr(r->code, "NotFound") != NULL;
	char err[512];

	LIST_REMOVE(&d->p, entry);
	if (r->code != NULL && !gone)
		snprintf(err, sizeof(err), "%s: %s", r->code, r->message);
	d->cb(r->code == NULL || gone, r->code == NULL || gone ? NULL : err, d->arg);
	free(d);
}

static void
aws_delete_resource(struct sm_adapter *a, const struct sm_resource *r, sm_done_cb cb, void *arg)
{
	struct del_ctx *d = calloc(1, sizeof(*d));
	char *form = NULL;
	const char *action;

	d->cb = cb;
	d->arg = arg;
	LIST_INSERT_HEAD(&a->pend, &d->p, entry);
	log_info("aws %s: deleting leaked %s %s", a->provider, r->type, r->id);
	if (strcmp(r->type, "object") == 0) {
		char *path = s3_path(object_bucket(a), r->id);
		d->call = aws_s3(a->api, "DELETE", path, NULL, 0, NULL, del_done, d);
		free(path);
		return;
	}
	if (strcmp(r->type, "host") == 0) {
		/* a host with an instance still on it is refused (unsuccessful):
		 * the next cleanup asks again, once its leaked instance is gone */
		action = "ReleaseHosts";
		aws_form_add(&form, "HostId.1", r->id);
	} else if (strcmp(r->type, "instance") == 0) {
		action = "TerminateInstances";
		aws_form_add(&form, "InstanceId.1", r->id);
	} else if (strcmp(r->type, "volume") == 0) {
		action = "DeleteVolume";
		aws_form_add(&form, "VolumeId", r->id);
	} else if (strcmp(r->type, "ami") == 0) {
		action = "DeregisterImage";
		aws_form_add(&form, "ImageId", r->id);
	} else {
		action = "DeleteSnapshot";
		aws_form_add(&form, "SnapshotId", r->id);
	}
	d->call = aws_ec2(a->api, action, form, 1, del_done, d);
	free(form);
}

/* ---- quota ---- */

struct quota_ctx {
	struct pend p;
	struct sm_adapter *a;
	sm_quota_cb cb;
	void *arg;
	int pending;
	char error[512];
	struct drv_quota limits;
};

struct quota_one {
	struct pend p;
	struct quota_ctx *q;
	char code[32];
};

static void
quota_one_done(const struct aws_result *r, void *arg)
{
	struct quota_one *one = arg;
	struct quota_ctx *q = one->q;
	const char *code = one->code;

	LIST_REMOVE(&one->p, entry);
	if (r->code == NULL) {
		json_t *j = json_loadb(r->body, r->body_len, 0, NULL);
		const json_t *v = json_object_get(json_object_get(j, "Quota"), "Value");
		if (json_is_number(v))
			json_object_set_new(q->limits.extra, code, json_real(json_number_value(v)));
		json_decref(j);
	} else if (strcmp(r->code, "NoSuchResourceException") != 0 && q->error[0] == '\0') {
		snprintf(q->error, sizeof(q->error), "GetServiceQuota %s: %s: %s", code, r->code,
			 r->message);
	}
	if (--q->pending > 0) {
		free(one);
		return;
	}
	free(one);
	LIST_REMOVE(&q->p, entry);
	if (q->error[0] != '\0')
		q->cb(NULL, q->error, q->arg);
	else
		q->cb(&q->limits, NULL, q->arg);
	drv_quota_clear(&q->limits);
	free(q);
}

static void
quota_ctx_free(struct pend *p)
{
	struct quota_ctx *q = (struct quota_ctx *)p;

	drv_quota_clear(&q->limits);
	free(q);
}

static void
add_label_codes(const struct sm_label *l, json_t *codes)
{
	const json_t *fleet = fleet_of(l), *t;
	size_t i;
	int spot = label_spot(l);

	if (label_dedicated(l)) {
		const char *c = host_quota_code(lstr(l, "instance-type"));
		if (c != NULL)
			json_object_set_new(codes, c, json_true());
		return;
	}
	if (fleet == NULL) {
		const char *c = quota_code(lstr(l, "instance-type"), spot);
		if (c != NULL)
			json_object_set_new(codes, c, json_true());
		return;
	}
	json_array_foreach(json_object_get(fleet, "instance-types"), i, t)
	{
		const char *c = quota_code(json_string_value(t), spot);
		if (c != NULL)
			json_object_set_new(codes, c, json_true());
	}
}

static void
aws_quota_limits(struct sm_adapter *a, sm_quota_cb cb, void *arg)
{
	const struct sm_config *cfg = a->env->cfg;
	struct quota_ctx *q = calloc(1, sizeof(*q));
	json_t *codes = json_object();
	const char *code;
	const json_t *v;
	size_t p, l;

	q->a = a;
	q->cb = cb;
	q->arg = arg;
	q->limits.cores = q->limits.ram = q->limits.instances = INFINITY;
	q->limits.extra = json_object();
	for (p = 0; p < cfg->npools; p++)
		for (l = 0; l < cfg->pools[p].nlabels; l++)
			add_label_codes(&cfg->pools[p].labels[l], codes);
	q->p.dtor = quota_ctx_free;
	LIST_INSERT_HEAD(&a->pend, &q->p, entry);
	if (json_object_size(codes) == 0) /* ask one anyway: the answer comes later */
		json_object_set_new(codes, "L-1216C47A", json_true());
	q->pending = (int)json_object_size(codes);
	json_object_foreach(codes, code, v)
	{
		char body[256];
		struct quota_one *one = calloc(1, sizeof(*one));
		one->q = q;
		snprintf(one->code, sizeof(one->code), "%s", code);
		LIST_INSERT_HEAD(&a->pend, &one->p, entry);
		snprintf(body, sizeof(body), "{\"ServiceCode\":\"ec2\",\"QuotaCode\":\"%s\"}",
			 code);
		aws_quotas(a->api, "GetServiceQuota", body, quota_one_done, one);
	}
	json_decref(codes);
}

static int
aws_label_quota(struct sm_adapter *a, const struct sm_label *label, struct drv_quota *out,
		char *err, size_t errlen)
{
	const json_t *fleet = fleet_of(label), *t;
	size_t i;

	(void)err;
	(void)errlen;
	if (label_dedicated(label)) {
		host_quota(lstr(label, "instance-type"), out);
		return 0;
	}
	if (fleet == NULL) {
		type_quota(a, lstr(label, "instance-type"), label_spot(label), out);
		return 0;
	}
	/* a fleet may get any of its types: count the largest */
	json_array_foreach(json_object_get(fleet, "instance-types"), i, t)
	{
		struct drv_quota q;
		drv_quota_init(&q, 0, 0, 0);
		type_quota(a, json_string_value(t), label_spot(label), &q);
		if (q.cores >= out->cores) {
			drv_quota_clear(out);
			*out = q;
		} else {
			drv_quota_clear(&q);
		}
	}
	if (out->instances < 1)
		out->instances = 1;
	return 0;
}

/* instance types: vCPUs and memory (DescribeInstanceTypes, at start) */
static void
itypes_done(const struct aws_result *r, void *arg)
{
	struct sm_adapter *a = arg;
	const xmlNode *it;
	char t[64], v[32], m[32];

	a->itypes_call = NULL;
	if (r->code != NULL) {
		log_warn("aws %s: DescribeInstanceTypes: %s: %s (label quota: instances only)",
			 a->provider, r->code, r->message);
		return;
	}
	for (it = aws_xpath(r->root, "instanceTypeSet/item"); it != NULL; it = aws_xnext(it))
		json_object_set_new(
		    a->itypes, aws_xtext(it, "instanceType", t, sizeof(t)),
		    json_pack("{s:i, s:f}", "vcpus",
			      atoi(aws_xtext(it, "vCpuInfo/defaultVCpus", v, sizeof(v))), "ram",
			      atof(aws_xtext(it, "memoryInfo/sizeInMiB", m, sizeof(m)))));
}

static void
itypes_fetch(struct sm_adapter *a)
{
	const struct sm_config *cfg = a->env->cfg;
	json_t *types = json_object();
	const char *k;
	const json_t *v;
	char *form = NULL;
	size_t p, l, i, n = 0;

	for (p = 0; p < cfg->npools; p++)
		for (l = 0; l < cfg->pools[p].nlabels; l++) {
			const struct sm_label *lb = &cfg->pools[p].labels[l];
			const json_t *t;
			if (lstr(lb, "instance-type") != NULL)
				json_object_set_new(types, lstr(lb, "instance-type"), json_true());
			json_array_foreach(json_object_get(fleet_of(lb), "instance-types"), i, t)
			    json_object_set_new(types, json_string_value(t), json_true());
		}
	json_object_foreach(types, k, v) aws_form_addf(&form, k, "InstanceType.%zu", ++n);
	json_decref(types);
	if (n > 0)
		a->itypes_call = aws_ec2(a->api, "DescribeInstanceTypes", form, 0, itypes_done, a);
	free(form);
}

/* ---- image upload (the builder's) ---- */

/*
 * As upstream's uploadImage with import-method snapshot: the file to the
 * provider's object-storage bucket as "<image name>.<format>" (tagged with
 * the upload's metadata; multipart in AWS_PART bytes parts, one part in
 * memory at a time), ImportSnapshot from it, DescribeImportSnapshotTasks
 * until the task completes, the snapshot tagged, RegisterImage on it (the
 * diskimage's architecture, ena-support, volume-size/-type, iops,
 * throughput, imds-support), the AMI tagged; then the S3 object is
 * deleted. Leaked AMIs and snapshots carry the metadata and are found by
 * list_resources.
 */
#define AWS_PART	(8u << 20) /* bytes per multipart part (S3 minimum 5 MiB) */
#define AWS_IMPORT_POLL 2.0	   /* s between import task checks */

enum up_state {
	UP_PUT,
	UP_CREATE,
	UP_PART,
	UP_COMPLETE,
	UP_IMPORT,
	UP_TASK,
	UP_TAGSNAP,
	UP_REGISTER,
	UP_TAGAMI,
	UP_DELOBJ
};

struct upload {
	struct pend p;
	struct sm_adapter *a;
	enum up_state st;
	sm_upload_cb cb;
	void *arg;
	FILE *f;
	long long size, sent;
	int part;
	json_t *etags; /* array, part n at n-1 */
	char *bucket, *key, *path, *upload_id, *task, *snapshot, *ami, *name, *format;
	json_t *meta;
	const json_t *image; /* the diskimage's raw config (provider's, borrowed) */
	char *error;
	struct event *timer;
	struct aws_call *call;
};

static void up_step(struct upload *u);

static void
up_free(struct pend *p)
{
	struct upload *u = (struct upload *)p;

	if (u->f != NULL)
		fclose(u->f);
	if (u->timer != NULL)
		event_free(u->timer);
	json_decref(u->etags);
	json_decref(u->meta);
	free(u->bucket);
	free(u->key);
	free(u->path);
	free(u->upload_id);
	free(u->task);
	free(u->snapshot);
	free(u->ami);
	free(u->name);
	free(u->format);
	free(u->error);
	free(u);
}

static void
noop_cb(const struct aws_result *r, void *arg)
{
	(void)r;
	(void)arg;
}

/* Finish: the S3 object is deleted first once it exists (success or not),
 * an unfinished multipart upload aborted; then call back. */
static void
up_finish(struct upload *u, const char *error)
{
	if (error != NULL && u->error == NULL) {
		u->error = strdup(error);
		log_warn("aws %s: upload of %s failed: %s", u->a->provider, u->name, error);
	}
	if (u->st >= UP_IMPORT && u->st != UP_DELOBJ) {
		u->st = UP_DELOBJ;
		up_step(u);
		return;
	}
	if (u->upload_id != NULL) {
		char q[2048];
		snprintf(q, sizeof(q), "%s?uploadId=%s", u->path, u->upload_id);
		aws_s3(u->a->api, "DELETE", q, NULL, 0, NULL, noop_cb, NULL);
	}
	LIST_REMOVE(&u->p, entry);
	u->cb(u->error == NULL ? u->ami : NULL, u->error, u->arg);
	up_free(&u->p);
}

static void
up_done(const struct aws_result *r, void *arg)
{
	struct upload *u = arg;
	char buf[128], err[600];

	u->call = NULL;
	if (r->code != NULL && !(u->st == UP_DELOBJ)) {
		snprintf(err, sizeof(err), "%s: %s: %s",
			 u->st <= UP_COMPLETE ? "S3 upload" : "image import", r->code, r->message);
		up_finish(u, err);
		return;
	}
	switch (u->st) {
	case UP_PUT:
		u->st = UP_IMPORT;
		break;
	case UP_CREATE:
		free(u->upload_id);
		u->upload_id = strdup(aws_xtext(r->root, "UploadId", buf, sizeof(buf)));
		u->st = UP_PART;
		break;
	case UP_PART:
		json_array_append_new(u->etags, json_string(r->etag != NULL ? r->etag : ""));
		if (u->sent >= u->size)
			u->st = UP_COMPLETE;
		break;
	case UP_COMPLETE:
		free(u->upload_id);
		u->upload_id = NULL;
		u->st = UP_IMPORT;
		break;
	case UP_IMPORT:
		u->task = strdup(aws_xtext(r->root, "importTaskId", buf, sizeof(buf)));
		u->st = UP_TASK;
		break;
	case UP_TASK: {
		char st[32];
		aws_xtext(r->root, "importSnapshotTaskSet/item/snapshotTaskDetail/status", st,
			  sizeof(st));
		if (strcmp(st, "completed") == 0) {
			u->snapshot = strdup(aws_xtext(
			    r->root, "importSnapshotTaskSet/item/snapshotTaskDetail/snapshotId",
			    buf, sizeof(buf)));
			u->st = UP_TAGSNAP;
		} else if (strcmp(st, "deleted") == 0 || strcmp(st, "deleting") == 0 ||
			   st[0] == '\0') {
			aws_xtext(r->root,
				  "importSnapshotTaskSet/item/snapshotTaskDetail/statusMessage",
				  buf, sizeof(buf));
			snprintf(err, sizeof(err), "import snapshot task %s %s: %s", u->task,
				 st[0] ? st : "vanished", buf);
			up_finish(u, err);
			return;
		} else {
			struct timeval tv = {(time_t)AWS_IMPORT_POLL, 0};
			evtimer_add(u->timer, &tv);
			return;
		}
		break;
	}
	case UP_TAGSNAP:
		u->st = UP_REGISTER;
		break;
	case UP_REGISTER:
		u->ami = strdup(aws_xtext(r->root, "imageId", buf, sizeof(buf)));
		u->st = UP_TAGAMI;
		break;
	case UP_TAGAMI:
		log_info("aws %s: image %s uploaded as %s (snapshot %s)", u->a->provider, u->name,
			 u->ami, u->snapshot);
		u->st = UP_DELOBJ;
		break;
	case UP_DELOBJ:
		up_finish(u, NULL);
		return;
	}
	up_step(u);
}

static void
up_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	up_step(arg);
}

static void
add_meta_tags(char **form, const char *prefix, const json_t *meta)
{
	const char *k;
	const json_t *v;
	int n = 1;

	json_object_foreach((json_t *)meta, k, v)
	{
		aws_form_addf(form, k, "%sTag.%d.Key", prefix, n);
		aws_form_addf(form, json_is_string(v) ? json_string_value(v) : "", "%sTag.%d.Value",
			      prefix, n);
		n++;
	}
}

static void
up_step(struct upload *u)
{
	struct sm_adapter *a = u->a;
	char *form = NULL, q[2048], num[32];

	switch (u->st) {
	case UP_PUT:
	case UP_PART: {
		size_t want = u->st == UP_PUT ? (size_t)u->size : AWS_PART, got;
		char *buf = malloc(want + 1);
		if (u->st == UP_PART)
			snprintf(q, sizeof(q), "%s?partNumber=%d&uploadId=%s", u->path, ++u->part,
				 u->upload_id);
		else
			snprintf(q, sizeof(q), "%s", u->path);
		got = fread(buf, 1, want, u->f);
		if (got < want && ferror(u->f)) {
			free(buf);
			up_finish(u, "reading the image file failed");
			return;
		}
		u->sent += (long long)got;
		if (u->st == UP_PUT) {
			char *tags = NULL, th[2100];
			const char *hdrs[2] = {th, NULL};
			const char *k;
			const json_t *v;
			json_object_foreach(u->meta, k, v)
			    aws_form_add(&tags, k, json_string_value(v));
			snprintf(th, sizeof(th), "x-amz-tagging: %s", tags != NULL ? tags + 1 : "");
			free(tags);
			u->call = aws_s3(a->api, "PUT", q, buf, got, hdrs, up_done, u);
		} else {
			u->call = aws_s3(a->api, "PUT", q, buf, got, NULL, up_done, u);
		}
		free(buf);
		return;
	}
	case UP_CREATE: {
		char *tags = NULL, th[2100];
		const char *hdrs[2] = {th, NULL};
		const char *k;
		const json_t *v;
		json_object_foreach(u->meta, k, v) aws_form_add(&tags, k, json_string_value(v));
		snprintf(th, sizeof(th), "x-amz-tagging: %s", tags != NULL ? tags + 1 : "");
		free(tags);
		/* "uploads=": libcurl 7.88 signs the query as written, and AWS
		 * canonicalises a bare key with "=" */
		snprintf(q, sizeof(q), "%s?uploads=", u->path);
		u->call = aws_s3(a->api, "POST", q, "", 0, hdrs, up_done, u);
		return;
	}
	case UP_COMPLETE: {
		struct evbuffer *b = evbuffer_new();
		size_t i, n;
		char *body;
		const json_t *e;
		evbuffer_add_printf(b, "<CompleteMultipartUpload>");
		json_array_foreach(u->etags, i, e) evbuffer_add_printf(
		    b, "<Part><PartNumber>%zu</PartNumber><ETag>%s</ETag></Part>", i + 1,
		    json_string_value(e));
		evbuffer_add_printf(b, "</CompleteMultipartUpload>");
		n = evbuffer_get_length(b);
		body = malloc(n + 1);
		evbuffer_remove(b, body, n);
		evbuffer_free(b);
		snprintf(q, sizeof(q), "%s?uploadId=%s", u->path, u->upload_id);
		u->call = aws_s3(a->api, "POST", q, body, n, NULL, up_done, u);
		free(body);
		return;
	}
	case UP_IMPORT: {
		char fmt[16];
		size_t i;
		snprintf(fmt, sizeof(fmt), "%s", u->format);
		for (i = 0; fmt[i]; i++)
			fmt[i] = (char)toupper((unsigned char)fmt[i]);
		aws_form_add(&form, "DiskContainer.Format", fmt);
		aws_form_add(&form, "DiskContainer.UserBucket.S3Bucket", u->bucket);
		aws_form_add(&form, "DiskContainer.UserBucket.S3Key", u->key);
		aws_form_add(&form, "Description", u->name);
		aws_form_add(&form, "TagSpecification.1.ResourceType", "import-snapshot-task");
		add_meta_tags(&form, "TagSpecification.1.", u->meta);
		u->call = aws_ec2(a->api, "ImportSnapshot", form, 1, up_done, u);
		break;
	}
	case UP_TASK:
		aws_form_add(&form, "ImportTaskId.1", u->task);
		u->call = aws_ec2(a->api, "DescribeImportSnapshotTasks", form, 0, up_done, u);
		break;
	case UP_TAGSNAP:
	case UP_TAGAMI:
		aws_form_add(&form, "ResourceId.1", u->st == UP_TAGSNAP ? u->snapshot : u->ami);
		add_meta_tags(&form, "", u->meta);
		u->call = aws_ec2(a->api, "CreateTags", form, 1, up_done, u);
		break;
	case UP_REGISTER: {
		const json_t *im = u->image;
		const char *arch = json_string_value(json_object_get(im, "architecture"));
		aws_form_add(&form, "Name", u->name);
		aws_form_add(&form, "Architecture", arch != NULL ? arch : "x86_64");
		aws_form_add(&form, "RootDeviceName", "/dev/sda1");
		aws_form_add(&form, "VirtualizationType", "hvm");
		aws_form_add(&form, "EnaSupport",
			     np_json_bool(im, "ena-support", 1) ? "true" : "false");
		if (json_string_value(json_object_get(im, "imds-support")) != NULL)
			aws_form_add(&form, "ImdsSupport",
				     json_string_value(json_object_get(im, "imds-support")));
		aws_form_add(&form, "BlockDeviceMapping.1.DeviceName", "/dev/sda1");
		aws_form_add(&form, "BlockDeviceMapping.1.Ebs.SnapshotId", u->snapshot);
		aws_form_add(&form, "BlockDeviceMapping.1.Ebs.DeleteOnTermination", "true");
		aws_form_add(&form, "BlockDeviceMapping.1.Ebs.VolumeType",
			     json_string_value(json_object_get(im, "volume-type")) != NULL
				 ? json_string_value(json_object_get(im, "volume-type"))
				 : "gp2");
		if (json_is_integer(json_object_get(im, "volume-size"))) {
			snprintf(num, sizeof(num), "%lld",
				 (long long)json_integer_value(json_object_get(im, "volume-size")));
			aws_form_add(&form, "BlockDeviceMapping.1.Ebs.VolumeSize", num);
		}
		if (json_is_integer(json_object_get(im, "iops"))) {
			snprintf(num, sizeof(num), "%lld",
				 (long long)json_integer_value(json_object_get(im, "iops")));
			aws_form_add(&form, "BlockDeviceMapping.1.Ebs.Iops", num);
		}
		if (json_is_integer(json_object_get(im, "throughput"))) {
			snprintf(num, sizeof(num), "%lld",
				 (long long)json_integer_value(json_object_get(im, "throughput")));
			aws_form_add(&form, "BlockDeviceMapping.1.Ebs.Throughput", num);
		}
		u->call = aws_ec2(a->api, "RegisterImage", form, 1, up_done, u);
		break;
	}
	case UP_DELOBJ:
		u->call = aws_s3(a->api, "DELETE", u->path, NULL, 0, NULL, up_done, u);
		break;
	}
	free(form);
}

static void
up_timer_fail(evutil_socket_t fd, short what, void *arg)
{
	struct upload *u = arg;

	(void)fd;
	(void)what;
	LIST_REMOVE(&u->p, entry);
	u->cb(NULL, u->error, u->arg);
	up_free(&u->p);
}

static char *
s3_path(const char *bucket, const char *key)
{
	char *eb = curl_easy_escape(NULL, bucket, 0), *ek = curl_easy_escape(NULL, key, 0), *out;

	if (asprintf(&out, "/%s/%s", eb, ek) < 0)
		abort();
	curl_free(eb);
	curl_free(ek);
	return out;
}

static void
aws_upload_image(struct sm_adapter *a, const struct sm_upload_args *ua, sm_upload_cb cb, void *arg)
{
	struct upload *u = calloc(1, sizeof(*u));
	const char *bucket = json_string_value(
	    json_object_get(json_object_get(a->env->provider, "object-storage"), "bucket-name"));
	const char *k;
	const json_t *v;
	char key[600];

	u->p.dtor = up_free;
	LIST_INSERT_HEAD(&a->pend, &u->p, entry);
	u->a = a;
	u->cb = cb;
	u->arg = arg;
	u->name = strdup(ua->image_name);
	u->format = strdup(ua->format != NULL ? ua->format : "raw");
	u->image = ua->image != NULL ? ua->image->raw : NULL;
	u->etags = json_array();
	u->meta = json_object();
	json_object_foreach((json_t *)ua->metadata, k, v)
	{
		if (json_is_string(v))
			json_object_set_new(u->meta, k, json_incref((json_t *)v));
	}
	u->timer = evtimer_new(a->base, up_timer, u);
	snprintf(key, sizeof(key), "%s.%s", ua->image_name, u->format);
	u->key = strdup(key);
	u->bucket = strdup(bucket != NULL ? bucket : "");
	u->path = s3_path(u->bucket, u->key);
	u->f = fopen(ua->filename, "rb");
	if (bucket == NULL || u->f == NULL) {
		/* answered on the loop, never from inside the slot */
		u->error = strdup(bucket == NULL ? "object-storage bucket-name is not set"
						 : "cannot open the image file");
		u->st = UP_DELOBJ;
		event_base_once(a->base, -1, EV_TIMEOUT, up_timer_fail, u, NULL);
		return;
	}
	fseek(u->f, 0, SEEK_END);
	u->size = ftell(u->f);
	fseek(u->f, 0, SEEK_SET);
	u->st = u->size > (long long)AWS_PART ? UP_CREATE : UP_PUT;
	log_info("aws %s: uploading %s (%lld bytes) to s3://%s/%s", a->provider, u->name, u->size,
		 u->bucket, u->key);
	up_step(u);
}

/* delete_image: the AMI and its snapshots */
struct imgdel {
	struct pend p;
	struct sm_adapter *a;
	sm_done_cb cb;
	void *arg;
	char *ami;
	json_t *snaps;
	int stage; /* 0 describe, 1 deregister, 2.. snapshots */
};

static void imgdel_step(struct imgdel *d);

static void
imgdel_free(struct pend *p)
{
	struct imgdel *d = (struct imgdel *)p;

	free(d->ami);
	json_decref(d->snaps);
	free(d);
}

static void
imgdel_done(const struct aws_result *r, void *arg)
{
	struct imgdel *d = arg;
	const xmlNode *bd;
	char buf[128], err[512];

	if (r->code != NULL && strstr(r->code, "NotFound") == NULL) {
		snprintf(err, sizeof(err), "%s: %s", r->code, r->message);
		LIST_REMOVE(&d->p, entry);
		d->cb(0, err, d->arg);
		imgdel_free(&d->p);
		return;
	}
	if (d->stage == 0 && r->code == NULL)
		for (bd = aws_xpath(r->root, "imagesSet/item/blockDeviceMapping/item"); bd != NULL;
		     bd = aws_xnext(bd))
			if (aws_xtext(bd, "ebs/snapshotId", buf, sizeof(buf))[0] != '\0')
				json_array_append_new(d->snaps, json_string(buf));
	d->stage++;
	imgdel_step(d);
}

static void
imgdel_step(struct imgdel *d)
{
	char *form = NULL;

	if (d->stage == 0) {
		aws_form_add(&form, "ImageId.1", d->ami);
		aws_ec2(d->a->api, "DescribeImages", form, 0, imgdel_done, d);
	} else if (d->stage == 1) {
		aws_form_add(&form, "ImageId", d->ami);
		aws_ec2(d->a->api, "DeregisterImage", form, 1, imgdel_done, d);
	} else if ((size_t)d->stage - 2 < json_array_size(d->snaps)) {
		aws_form_add(&form, "SnapshotId",
			     json_string_value(json_array_get(d->snaps, (size_t)d->stage - 2)));
		aws_ec2(d->a->api, "DeleteSnapshot", form, 1, imgdel_done, d);
	} else {
		LIST_REMOVE(&d->p, entry);
		d->cb(1, NULL, d->arg);
		imgdel_free(&d->p);
	}
	free(form);
}

static void
aws_delete_image(struct sm_adapter *a, const char *external_id, sm_done_cb cb, void *arg)
{
	struct imgdel *d = calloc(1, sizeof(*d));

	d->p.dtor = imgdel_free;
	LIST_INSERT_HEAD(&a->pend, &d->p, entry);
	d->a = a;
	d->cb = cb;
	d->arg = arg;
	d->ami = strdup(external_id);
	d->snaps = json_array();
	imgdel_step(d);
}

/* ---- spot interruption notices (beyond upstream) ---- */

/*
 * AWS gives a spot instance two minutes' notice before it reclaims it: the
 * spot request's status becomes marked-for-termination (or -stop,
 * -hibernation). Upstream Nodepool does not look; Zuul then gets a node
 * that dies under its job. Every AWS_SPOT_WATCH seconds (while the
 * provider has spot labels) one DescribeSpotInstanceRequests lists the
 * marked requests; each instance is reported once to the framework
 * (sm_env.instance_notice), which deletes a ready node before Zuul can
 * take it and notes the notice in the record of one in use.
 */
static void
spot_arm(struct sm_adapter *a)
{
	struct timeval tv = {(time_t)AWS_SPOT_WATCH, 0};

	if (!a->stopped)
		evtimer_add(a->spot_ev, &tv);
}

static void
spot_done(const struct aws_result *r, void *arg)
{
	struct sm_adapter *a = arg;
	const xmlNode *it;
	char id[64], code[64], t[64], what[256];

	a->spot_call = NULL;
	if (r->code != NULL) {
		log_warn("aws %s: DescribeSpotInstanceRequests: %s: %s", a->provider, r->code,
			 r->message);
	} else {
		for (it = aws_xpath(r->root, "spotInstanceRequestSet/item"); it != NULL;
		     it = aws_xnext(it)) {
			aws_xtext(it, "instanceId", id, sizeof(id));
			if (id[0] == '\0' || json_object_get(a->noticed, id) != NULL)
				continue;
			json_object_set_new(a->noticed, id, json_true());
			snprintf(what, sizeof(what), "AWS spot interruption notice (%s at %s)",
				 aws_xtext(it, "status/code", code, sizeof(code)),
				 aws_xtext(it, "status/updateTime", t, sizeof(t)));
			if (a->env->instance_notice != NULL)
				a->env->instance_notice(a->env, id, what);
		}
	}
	spot_arm(a);
}

static void
spot_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sm_adapter *a = arg;
	char *form = NULL;

	(void)fd;
	(void)what;
	aws_form_add(&form, "Filter.1.Name", "status-code");
	aws_form_add(&form, "Filter.1.Value.1", "marked-for-termination");
	aws_form_add(&form, "Filter.1.Value.2", "marked-for-stop");
	aws_form_add(&form, "Filter.1.Value.3", "marked-for-hibernation");
	a->spot_call = aws_ec2(a->api, "DescribeSpotInstanceRequests", form, 0, spot_done, a);
	free(form);
}

static int
has_spot_labels(const struct sm_config *cfg)
{
	size_t p, l;

	for (p = 0; p < cfg->npools; p++)
		for (l = 0; l < cfg->pools[p].nlabels; l++)
			if (label_spot(&cfg->pools[p].labels[l]))
				return 1;
	return 0;
}

/* ---- the adapter ---- */

static const char *(*aws_getenv)(const char *) = NULL;

static struct sm_adapter *
aws_adapter_new(const struct sm_env *env, char *err, size_t errlen)
{
	struct sm_adapter *a = calloc(1, sizeof(*a));
	struct aws_api_options o = {0};
	const char *region = json_string_value(json_object_get(env->provider, "region-name"));

	if (a == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	LIST_INIT(&a->pend);
	a->env = env;
	a->base = env->base;
	a->provider = strdup(env->provider_name);
	o.region = region != NULL ? region : "us-east-1";
	o.rate = env->cfg->rate;
	o.env = aws_getenv;
	a->api = aws_api_new(env->base, &o,
			     json_string_value(json_object_get(env->provider, "profile-name")), err,
			     errlen);
	if (a->api == NULL) {
		free(a->provider);
		free(a);
		return NULL;
	}
	TAILQ_INIT(&a->waiting);
	TAILQ_INIT(&a->terminating);
	a->poll_ev = evtimer_new(env->base, poll_cb, a);
	a->term_ev = event_new(env->base, -1, 0, term_cb, a);
	a->images = json_object();
	a->templates = json_object();
	a->itypes = json_object();
	a->noticed = json_object();
	a->not_ours = json_object();
	a->spot_ev = evtimer_new(env->base, spot_cb, a);
	itypes_fetch(a);
	if (has_spot_labels(env->cfg))
		spot_arm(a);
	return a;
}

static void
aws_adapter_stop(struct sm_adapter *a)
{
	a->stopped = 1;
	evtimer_del(a->spot_ev);
}

static void
aws_adapter_free(struct sm_adapter *a)
{
	int i;

	for (i = 0; i < 32; i++)
		if (all_listers.v[i] != NULL && all_listers.v[i]->a == a)
			lister_free(all_listers.v[i]);
	aws_api_free(a->api); /* cancels every call, poll and terminate included */
	while (!LIST_EMPTY(&a->pend)) {
		struct pend *p = LIST_FIRST(&a->pend);
		LIST_REMOVE(p, entry);
		if (p->dtor != NULL)
			p->dtor(p);
		else
			free(p); /* the first member of its malloc'd context */
	}
	event_free(a->poll_ev);
	event_free(a->term_ev);
	event_free(a->spot_ev);
	json_decref(a->noticed);
	json_decref(a->not_ours);
	json_decref(a->images);
	json_decref(a->templates);
	json_decref(a->itypes);
	free(a->provider);
	free(a);
}

static int
aws_label_ready(struct sm_adapter *a, const struct sm_label *label)
{
	(void)a;
	(void)label;
	return 1;
}

static void
aws_dump(struct sm_adapter *a, struct evbuffer *out)
{
	struct amachine *am;
	char *counts = json_dumps(aws_api_counts(a->api), JSON_SORT_KEYS | JSON_COMPACT);

	evbuffer_add_printf(out,
			    "aws %s: %llu API calls %s; %llu launched, %llu shared describes, "
			    "%llu terminate calls\n",
			    a->provider, aws_api_total(a->api), counts != NULL ? counts : "{}",
			    a->launched, a->polls, a->terminate_calls);
	free(counts);
	TAILQ_FOREACH(am, &a->waiting, entry)
	evbuffer_add_printf(out, "  %s %s %s %s\n", am->create ? "create" : "delete",
			    am->m.external_id != NULL ? am->m.external_id : "-", am->m.state,
			    am->istate);
}

static const struct sm_adapter_ops aws_adapter = {
    .name = "aws",
    .adapter_new = aws_adapter_new,
    .adapter_stop = aws_adapter_stop,
    .adapter_free = aws_adapter_free,
    .create_machine = aws_create_machine,
    .delete_machine = aws_delete_machine,
    .list_instances = aws_list_instances,
    .list_resources = aws_list_resources,
    .delete_resource = aws_delete_resource,
    .quota_limits = aws_quota_limits,
    .label_quota = aws_label_quota,
    .label_ready = aws_label_ready,
    .upload_image = aws_upload_image,
    .delete_image = aws_delete_image,
    .list_images = aws_list_images,
    .images_in_resources = 1,
    .dump = aws_dump,
};

/* upstream's AWS defaults: boot-timeout 180 s, rate 2 calls/s */
static const struct sm_defaults aws_defaults = {
    .boot_timeout = 180,
    .rate = 2,
    .host_key_checking = 1,
};

static struct drv_provider *
aws_provider_new(struct drv_host *lc, char *err, size_t errlen)
{
	return sm_provider_new(&aws_adapter, &aws_defaults, lc, err, errlen);
}

const struct driver drv_aws = {
    .name = "aws",
    .pause_at_quota = 1,
    .reuse_only = 0,
    .provider_new = aws_provider_new,
    SM_DRIVER_SLOTS,
    .image_format = sm_drv_config_image_format,
};
