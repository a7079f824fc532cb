/*
 * The aws driver's machines (aws_int.h): the create state machine (a
 * dedicated host allocated and awaited, the image resolved, a launch
 * template for fleets, RunInstances or CreateFleet with a ClientToken),
 * the delete one (TerminateInstances batched per loop turn, then
 * ReleaseHosts), the one shared DescribeInstances poll that answers every
 * machine waiting on its instance, and the spot interruption notices.
 */
#include "drivers/aws/aws_int.h"
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

static const char *const am_names[] = {
    "start",   "allocating host", "host pending",   "image", "template", "submitted",
    "waiting", "terminating",	  "releasing host", "done",  "failed"};

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
	else if (am->st == AM_IMAGE)
		TAILQ_REMOVE(&a->imaging, am, entry);
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
				am->inst = aws_instance_of(a, it);
			}
		}
	TAILQ_FOREACH(am, &a->waiting, entry)
	{
		if (am->seen == 1) /* asked about, not listed */
			am->seen = 3;
		machine_wake(am);
	}
	log_debug("aws %s: describe %llu answered (started %.3fs ago)", a->provider,
		  (unsigned long long)a->polls, np_mono_s() - a->last_poll);
	if (!TAILQ_EMPTY(&a->waiting))
		poll_schedule(a, AWS_PACE);
}

void
aws_poll_cb(evutil_socket_t fd, short what, void *arg)
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
	log_debug("aws %s: describe %llu starts", a->provider, (unsigned long long)a->polls);
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
	if (a->npoll > 0)
		return;
	sm_listing_arm(a->poll_ev, in, np_mono_s() - a->last_poll,
		       in == AWS_PACE ? poll_pace(a) : 0);
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

void
aws_term_cb(evutil_socket_t fd, short what, void *arg)
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

void
aws_image_key(const struct sm_label *l, const char *ext, char *buf, size_t len)
{
	if (ext != NULL)
		snprintf(buf, len, "id:%s", ext);
	else if (l->image != NULL && l->image->image_id != NULL)
		snprintf(buf, len, "id:%s", l->image->image_id);
	else
		snprintf(buf, len, "filters:%s", l->cloud_image != NULL ? l->cloud_image : "");
}

/* The machines that wait for the image lookup of key (AM_IMAGE, no call
 * of their own) go back to AM_START and are woken: the cache answers
 * them, or (the lookup failed or its machine went) the first of them
 * looks it up again. */
static void
image_followers_wake(struct sm_adapter *a, const char *key)
{
	struct amachine *am, *next;

	for (am = TAILQ_FIRST(&a->imaging); am != NULL; am = next) {
		next = TAILQ_NEXT(am, entry);
		if (am->call != NULL || strcmp(am->image_key, key) != 0)
			continue;
		unlist(am);
		am->st = AM_START;
		am->m.state = am_names[AM_START];
		machine_wake(am);
	}
}

static void
image_done(const struct aws_result *r, void *arg)
{
	struct amachine *am = arg;
	struct sm_adapter *a = am->a;
	const xmlNode *it, *best = NULL;
	char d[64], bd[64] = "", id[64], root[64];

	am->call = NULL;
	unlist(am);
	if (r->code != NULL) {
		am->st = AM_FAILED;
		am->m.error = SM_E_FAILED;
		snprintf(am->m.error_msg, sizeof(am->m.error_msg), "image: %s: %s", r->code,
			 r->message);
		image_followers_wake(a, am->image_key);
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
	image_followers_wake(a, am->image_key);
	machine_wake(am);
}

/* The image of am's label, from the cache: NULL when it is not there or
 * (image-filters) older than AWS_IMAGE_TTL. As upstream's adapter: the
 * filters' answer cached for five minutes (image_id_by_filter_cache), an
 * image id's description for the provider's lifetime (_getImage's
 * lru_cache). */
static const json_t *
image_cached(const struct amachine *am)
{
	const json_t *img = json_object_get(am->a->images, am->image_key);

	if (img != NULL && strncmp(am->image_key, "filters:", 8) == 0 &&
	    np_mono_s() - np_json_num(img, "t", 0) > AWS_IMAGE_TTL)
		return NULL;
	return img;
}

/* DescribeImages for am's image, or (one for that key is in flight: a wave
 * of launches of one label) wait for its answer: one lookup per key at a
 * time, where every machine of a wave used to ask for itself. */
static void
image_describe(struct amachine *am)
{
	const struct sm_label *l = am->label;
	struct amachine *o;
	char *form = NULL;

	am->st = AM_IMAGE;
	am->m.state = am_names[AM_IMAGE];
	TAILQ_INSERT_TAIL(&am->a->imaging, am, entry);
	am->listed = 1;
	TAILQ_FOREACH(o, &am->a->imaging, entry)
	if (o->call != NULL && strcmp(o->image_key, am->image_key) == 0)
		return; /* its answer wakes us */
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
	const json_t *pool = l->pool->raw, *iam = aws_lraw(l, "iam-instance-profile");
	const char *sg = aws_pstr(l, "security-group-id"), *subnet = aws_pstr(l, "subnet-id");
	int pub4 = np_json_bool(pool, "public-ipv4", np_json_bool(pool, "public-ip-address", 1));
	int pub6 = np_json_bool(pool, "public-ipv6", 0);
	char k[128], num[32];

	aws_form_addf(form, image, "%sImageId", pfx);
	if (aws_lstr(l, "key-name") != NULL)
		aws_form_addf(form, aws_lstr(l, "key-name"), "%sKeyName", pfx);
	aws_form_addf(form, "0", "%sNetworkInterface.1.DeviceIndex", pfx);
	aws_form_addf(form, pub4 ? "true" : "false",
		      "%sNetworkInterface.1.AssociatePublicIpAddress", pfx);
	if (pub6)
		aws_form_addf(form, "1", "%sNetworkInterface.1.Ipv6AddressCount", pfx);
	if (subnet != NULL)
		aws_form_addf(form, subnet, "%sNetworkInterface.1.SubnetId", pfx);
	if (sg != NULL)
		aws_form_addf(form, sg, "%sNetworkInterface.1.SecurityGroupId.1", pfx);
	if (aws_lraw(l, "volume-size") != NULL || aws_lraw(l, "volume-type") != NULL ||
	    aws_lraw(l, "iops") != NULL || aws_lraw(l, "throughput") != NULL) {
		aws_form_addf(form, root != NULL && root[0] != '\0' ? root : "/dev/xvda",
			      "%sBlockDeviceMapping.1.DeviceName", pfx);
		aws_form_addf(form, "true", "%sBlockDeviceMapping.1.Ebs.DeleteOnTermination", pfx);
		if (aws_lraw(l, "volume-size") != NULL) {
			snprintf(num, sizeof(num), "%lld",
				 (long long)json_integer_value(aws_lraw(l, "volume-size")));
			aws_form_addf(form, num, "%sBlockDeviceMapping.1.Ebs.VolumeSize", pfx);
		}
		if (aws_lstr(l, "volume-type") != NULL)
			aws_form_addf(form, aws_lstr(l, "volume-type"),
				      "%sBlockDeviceMapping.1.Ebs.VolumeType", pfx);
		if (aws_lraw(l, "iops") != NULL) {
			snprintf(num, sizeof(num), "%lld",
				 (long long)json_integer_value(aws_lraw(l, "iops")));
			aws_form_addf(form, num, "%sBlockDeviceMapping.1.Ebs.Iops", pfx);
		}
		if (aws_lraw(l, "throughput") != NULL) {
			snprintf(num, sizeof(num), "%lld",
				 (long long)json_integer_value(aws_lraw(l, "throughput")));
			aws_form_addf(form, num, "%sBlockDeviceMapping.1.Ebs.Throughput", pfx);
		}
	}
	if (aws_lstr(l, "userdata") != NULL) {
		/* base64, as the EC2 API wants it */
		static const char b64[] =
		    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
		const unsigned char *s = (const unsigned char *)aws_lstr(l, "userdata");
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
	if (aws_lstr(l, "imdsv2") != NULL) {
		aws_form_addf(form, aws_lstr(l, "imdsv2"), "%sMetadataOptions.HttpTokens", pfx);
		aws_form_addf(form, "enabled", "%sMetadataOptions.HttpEndpoint", pfx);
	}
	if (json_is_true(aws_lraw(l, "ebs-optimized")))
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
	const char *az = am->az != NULL ? am->az : aws_pstr(l, "availability-zone");
	char *form = NULL;

	aws_form_add(&form, "InstanceType", aws_lstr(l, "instance-type"));
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

const json_t *
aws_fleet_of(const struct sm_label *l)
{
	return aws_lraw(l, "fleet");
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
	const json_t *fleet = aws_fleet_of(l);
	char *form = NULL, name[256];
	const char *az = am->az != NULL ? am->az : aws_pstr(l, "availability-zone");

	aws_form_add(&form, "ClientToken", am->token);
	if (fleet == NULL) {
		launch_params(am, "", &form, image,
			      json_string_value(json_object_get(img, "root")));
		aws_form_add(&form, "InstanceType", aws_lstr(l, "instance-type"));
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
		const json_t *img = image_cached(am);
		if (am->dedicated && am->host == NULL) {
			host_allocate(am);
			return SM_AGAIN;
		}
		if (img == NULL) {
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
	} else if (am->st == AM_IMAGE && am->call != NULL) {
		/* its lookup goes: those waiting for it look again */
		aws_call_cancel(am->call);
		am->call = NULL;
		unlist(am);
		image_followers_wake(am->a, am->image_key);
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

struct sm_machine *
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
	am->spot = aws_label_spot(l);
	am->dedicated = aws_label_dedicated(l);
	am->hostname = strdup(args->hostname);
	am->az = args->az != NULL ? strdup(args->az) : NULL;
	am->image_ref = args->image_external_id != NULL ? strdup(args->image_external_id)
			: l->image != NULL && l->image->image_id != NULL
			    ? strdup(l->image->image_id)
			    : NULL;
	aws_image_key(l, args->image_external_id, key, sizeof(key));
	am->image_key = strdup(key);
	am->tags = json_object();
	json_object_foreach((json_t *)aws_lraw(l, "tags"), k, v)
	{
		if (json_is_string(v))
			json_object_set_new(am->tags, k, json_incref((json_t *)v));
		else {
			char *s = json_dumps(v, JSON_ENCODE_ANY);
			json_object_set_new(am->tags, k, json_string(s != NULL ? s : ""));
			free(s);
		}
	}
	json_object_foreach((json_t *)aws_lraw(l, "dynamic-tags"), k, v)
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

/*
 * The resume_machine slot (launches survive their launcher): instance
 * external_id, which an earlier launcher's RunInstances / CreateFleet made
 * for the node, followed in the shared DescribeInstances poll as a new
 * one is (pending: wait; running: done; gone or terminated: failed).
 * Nothing is submitted. Only plain instance ids come here: a node on a
 * dedicated host (an {"instance", "host"} external id) is not resumable
 * (sm_drv_launch_resumable) and is deleted, host and all, as upstream.
 */
struct sm_machine *
aws_resume_machine(struct sm_adapter *a, const struct sm_create_args *args, const char *external_id)
{
	struct amachine *am = (struct amachine *)aws_create_machine(a, args);

	set_ids(am, external_id);
	am->since = np_mono_s();
	wait_on_poll(am);
	return &am->m;
}

struct sm_machine *
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
void
aws_spot_arm(struct sm_adapter *a)
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
	aws_spot_arm(a);
}

void
aws_spot_cb(evutil_socket_t fd, short what, void *arg)
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

int
aws_has_spot_labels(const struct sm_config *cfg)
{
	size_t p, l;

	for (p = 0; p < cfg->npools; p++)
		for (l = 0; l < cfg->pools[p].nlabels; l++)
			if (aws_label_spot(&cfg->pools[p].labels[l]))
				return 1;
	return 0;
}
