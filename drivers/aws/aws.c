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
 *
 * Files by duty (aws_int.h): this one holds the adapter's life (new, stop,
 * free, dump) and the driver's registration; aws_machine.c the create and
 * delete machines, the shared poll and spot notices; aws_list.c the
 * listings and leaked resources; aws_quota.c the quota; aws_images.c the
 * image listing, uploads and deletes; aws_api.c the API plumbing.
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

const json_t *
aws_lraw(const struct sm_label *l, const char *k)
{
	return json_object_get(l->raw, k);
}

const char *
aws_lstr(const struct sm_label *l, const char *k)
{
	return json_string_value(aws_lraw(l, k));
}

const char *
aws_pstr(const struct sm_label *l, const char *k)
{
	return json_string_value(json_object_get(l->pool->raw, k));
}

/* A label on dedicated hosts. Not a fleet label: Nodepool allocates the
 * host, then launches the fleet elsewhere; we allocate none. */
int
aws_label_dedicated(const struct sm_label *l)
{
	return json_is_true(aws_lraw(l, "dedicated-host")) && aws_lraw(l, "fleet") == NULL;
}

int
aws_label_spot(const struct sm_label *l)
{
	return json_is_true(aws_lraw(l, "use-spot"));
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
	TAILQ_INIT(&a->imaging);
	a->poll_ev = evtimer_new(env->base, aws_poll_cb, a);
	a->term_ev = event_new(env->base, -1, 0, aws_term_cb, a);
	a->images = json_object();
	a->templates = json_object();
	a->itypes = json_object();
	a->noticed = json_object();
	a->not_ours = json_object();
	a->spot_ev = evtimer_new(env->base, aws_spot_cb, a);
	aws_itypes_fetch(a);
	if (aws_has_spot_labels(env->cfg))
		aws_spot_arm(a);
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
		if (aws_all_listers.v[i] != NULL && aws_all_listers.v[i]->a == a)
			aws_lister_free(aws_all_listers.v[i]);
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
    /* one DescribeInstances per 12 instances named (0.083 a node, twice
     * the default's): terminates go in batches (~0.16-0.2 calls a node,
     * where a per-server delete costs 1), so a node still costs 1.2-1.3
     * calls, inside what it cost before the pace (issue 25: 1.17-1.32),
     * and a wave's instances are noticed sooner (pace.c, sm_pace_aim) */
    .listing_servers = 12,
    .adapter_new = aws_adapter_new,
    .adapter_stop = aws_adapter_stop,
    .adapter_free = aws_adapter_free,
    .create_machine = aws_create_machine,
    .resume_machine = aws_resume_machine,
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
