/*
 * The `openstack` driver: a state-machine Adapter (drivers/statemachine/
 * adapter.h) that speaks the OpenStack REST APIs (Keystone v3, Nova v2.1,
 * Neutron v2.0, Glance v2, Cinder v3) through lib/net/http.h, so every
 * call is non-blocking on the worker's loop. It does what upstream
 * Nodepool's OpenStackAdapter (nodepool/driver/openstack/adapter.py) does
 * through openstacksdk, as HTTP calls:
 *
 *   credentials  clouds.yaml / secure.yaml as openstacksdk finds them
 *                (os_cloud.h); a Keystone v3 token (password or application
 *                credential) reused until 5 minutes before it expires, and
 *                fetched again on a 401; endpoints from the token's catalog
 *                (the cloud's interface and region; *_endpoint_override).
 *   rate         the provider's `rate` is seconds between calls (upstream:
 *                openstacksdk rate_limit = 1/rate), per API (compute,
 *                network, image, volume), each with its own HTTP client, so
 *                a 429/503 (Retry-After honoured) pauses only that API.
 *   create       flavor by flavor-name (name or id) or the smallest with
 *                >= min-ram whose name contains flavor-name; image by the
 *                upload's external id (diskimage), or the cloud-image's
 *                image-id, or image-name / name looked up in Glance; network
 *                names looked up in Neutron; POST /servers with metadata
 *                (groups "<provider>,<image>,<label>", instance-properties,
 *                dynamic-instance-properties formatted with the request,
 *                nodepool_*), key_name, security_groups, availability_zone,
 *                config_drive, user_data, block_device_mapping_v2 for
 *                boot-from-volume (volume-size, deleted with the server);
 *                then the server's status from a shared listing (below);
 *                ACTIVE without a public IPv4 in a pool with
 *                auto-floating-ip and a cloud with an external network: a
 *                floating IP created on the server's port and waited ACTIVE.
 *                A fault or refusal mentioning quota (or "number of ports
 *                exceeded") is a quota error.
 *   polling      one GET /servers/detail answers every machine waiting on a
 *                server's status (upstream's cached _listServers); a
 *                listing starts when the framework's pace says (drivers/
 *                statemachine/pace.c: the servers' expected boot), at most
 *                every `rate`, and only while somebody waits, so API calls
 *                per node stay low.
 *   delete       the server's floating IPs (via its ports), DELETE
 *                /servers/<id>, then polled until it leaves the listing.
 *   cleanup      leaked servers by metadata (list_resources); compute
 *                ports DOWN at two looks port-cleanup-interval apart
 *                (leaked.ports); unattached floating IPs when
 *                clean-floating-ips (leaked.floatingips).
 *   quota        GET /limits (compute) and, when a label boots from
 *                volume, the volume limits (extra "volumes", "volume-gb");
 *                per label: the flavor's vcpus and ram, plus 1 volume of
 *                volume-size GB for boot-from-volume.
 *   images       upload: POST /v2/images, PUT its file streamed from disk,
 *                wait active; delete: DELETE /v2/images/<id>.
 *   console      POST /servers/<id>/action os-getConsoleOutput.
 *
 * Files by duty (os_int.h): this one holds the adapter's life (new, stop,
 * free, dump) and the driver's registration; os_api.c Keystone, the
 * catalog and the calls; os_servers.c the create and delete machines;
 * os_list.c the listings and cleanup; os_quota.c flavors, networks, AZs,
 * lookups and quota; os_images.c uploads and image listings.
 */
#include "drivers/openstack/os_int.h"
#include "lib/core/xalloc.h"

#include <sys/queue.h>
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "lib/net/http.h"
#include "lib/config/jsonget.h"
#include "lib/core/log.h"
#include "drivers/openstack/openstack.h"
#include "lib/config/config.h" /* lib/config: struct np_provider */
#include "drivers/openstack/os_answer.h"
#include "drivers/openstack/os_cloud.h"
#include "lib/core/privsep.h"
#include "lib/net/ratelimit.h"
#include "lib/core/clock.h"
#include "lib/net/urlsafe.h"

/* ---- the adapter
 * ---------------------------------------------------------------------------------- */

static void
startup_fetch(struct sm_adapter *a)
{
	const struct sm_config *cfg = a->env->cfg;
	const char *id;
	size_t i;

	os_flavors_fetch(a);
	for (i = 0; cfg != NULL && i < cfg->ncloud_images; i++) {
		const struct sm_image *im = &cfg->cloud_images[i];
		if (np_json_str(im->raw, "image-id", NULL) == NULL)
			(void)os_lookup(a, a->images, SVC_IMAGE,
					np_json_str(im->raw, "image-name", im->name), &id);
	}
	os_ext_fetch(a);
	if (a->azs_call == NULL && !a->azs_read)
		a->azs_call = os_call_new(a, SVC_COMPUTE, "GET", "/os-availability-zone", NULL,
					  os_azs_done, NULL);
}

static struct sm_adapter *
os_adapter_new(const struct sm_env *env, char *err, size_t errlen)
{
	struct sm_adapter *a = calloc(1, sizeof(*a));
	const json_t *p = env->provider, *pool, *lab;
	struct http_client_options ho;
	const char *cloud = np_json_str(p, "cloud", NULL);
	size_t i, j;
	int s;

	if (a == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	/* first: without libcurl nothing below matters */
	if (http_load("driver openstack", err, errlen) != 0) {
		free(a);
		return NULL;
	}
	a->env = env;
	a->base = env->base;
	TAILQ_INIT(&a->calls);
	TAILQ_INIT(&a->machines);
	TAILQ_INIT(&a->listwaits);
	TAILQ_INIT(&a->uploads_inflight);
	if (cloud == NULL) {
		snprintf(err, errlen, "provider %s: no cloud", env->provider_name);
		free(a);
		return NULL;
	}
	if (os_cloud_load(cloud, np_json_str(p, "region-name", NULL), &a->cloud, err, errlen) !=
	    0) {
		free(a);
		return NULL;
	}
	/* rate: seconds between calls (upstream), per API; the framework
	 * coerced it as upstream's v.Coerce(float) */
	a->rate_s = env->cfg != NULL ? env->cfg->rate : np_json_num(p, "rate", 1.0);
	a->clean_fips = np_json_bool(p, "clean-floating-ips", 0);
	a->port_cleanup_interval = np_json_num(p, "port-cleanup-interval", 600);
	json_array_foreach(json_object_get(p, "pools"), i, pool)
	    json_array_foreach(json_object_get(pool, "labels"), j,
			       lab) if (np_json_bool(lab, "boot-from-volume", 0)) a->any_bfv = 1;
	memset(&ho, 0, sizeof(ho));
	ho.rate = a->rate_s > 0 ? 1.0 / a->rate_s : 0;
	ho.timeout = a->cloud.api_timeout;
	ho.ca_file = a->cloud.cacert;
	ho.insecure = !a->cloud.verify;
	ho.user_agent = "nodepoold (openstack)";
	for (s = 0; s < NSVC; s++) {
		struct http_client_options o = ho;
		if (s == SVC_IDENTITY)
			o.rate = 0; /* tokens are not rate limited by upstream */
		/* the API named by retry logs and counts (lib/net/http.h) */
		o.api = os_svc_names[s];
		a->http[s] = http_client_new(a->base, &o, err, errlen);
		if (a->http[s] == NULL) {
			while (--s >= 0)
				http_client_free(a->http[s]);
			os_cloud_clear(&a->cloud);
			free(a);
			return NULL;
		}
	}
	a->images = json_object();
	a->nets = json_object();
	a->list_timer = event_new(a->base, -1, 0, os_list_timer_cb, a);
	log_info("openstack %s: cloud %s from %s, region %s, rate %gs between calls per API",
		 env->provider_name, a->cloud.name, a->cloud.file,
		 a->cloud.region ? a->cloud.region : "(any)", a->rate_s);
	if (!a->cloud.verify)
		log_warn("openstack %s: cloud %s has verify: false: no service's TLS certificate "
			 "or host name is checked, Keystone's password exchange included",
			 env->provider_name, a->cloud.name);
	startup_fetch(a);
	return a;
}

static void
os_adapter_stop(struct sm_adapter *a)
{
	a->stopped = 1;
}

static void
os_adapter_free(struct sm_adapter *a)
{
	struct os_call *c;
	struct os_listwait *w;
	struct upload *u;
	int s;

	if (a == NULL)
		return;
	while ((c = TAILQ_FIRST(&a->calls)) != NULL)
		os_call_free(c);
	while ((w = TAILQ_FIRST(&a->listwaits)) != NULL) {
		TAILQ_REMOVE(&a->listwaits, w, entry);
		free(w);
	}
	while ((u = TAILQ_FIRST(&a->uploads_inflight)) != NULL)
		os_upload_free(u);
	for (s = 0; s < NSVC; s++) {
		http_client_free(a->http[s]);
		free(a->ep[s]);
	}
	if (a->list_timer != NULL)
		event_free(a->list_timer);
	privsep_free_secret_str(a->token);
	free(a->project_id);
	json_decref(a->flavors);
	json_decref(a->ext_nets);
	json_decref(a->images);
	json_decref(a->nets);
	json_decref(a->servers);
	json_decref(a->page);
	json_decref(a->down_ports);
	np_strv_clear(&a->azs);
	os_cloud_clear(&a->cloud);
	free(a);
}

static void
os_dump(struct sm_adapter *a, struct evbuffer *out)
{
	int s;
	struct osm *m;

	evbuffer_add_printf(out,
			    "openstack: cloud %s region %s token %s; flavors %zu, external "
			    "networks %zu, AZs %zu\n",
			    a->cloud.name, a->cloud.region ? a->cloud.region : "-",
			    a->token ? "held" : "none", json_array_size(a->flavors),
			    json_array_size(a->ext_nets), a->azs.n);
	evbuffer_add_printf(out,
			    "openstack: creates %llu (errors %llu, quota %llu), deletes %llu, "
			    "listings %llu, auths %llu (re-auth on 401: %llu), floating ips "
			    "%llu created %llu deleted, leaked ports %llu, leaked floating ips "
			    "%llu, uploads %llu\n",
			    a->creates, a->create_errors, a->quota_errors, a->deletes, a->listings,
			    a->auths, a->reauths, a->fips_created, a->fips_deleted, a->leaked_ports,
			    a->leaked_fips, a->uploads);
	for (s = 0; s < NSVC; s++) {
		struct http_stats st;
		http_get_stats(a->http[s], &st);
		evbuffer_add_printf(out,
				    "openstack: api %s %s: calls %llu, in flight %u, queued %u, "
				    "throttled %llu, errors %llu, connections opened %llu\n",
				    os_svc_names[s], a->ep[s] ? a->ep[s] : "-", a->calls_by_svc[s],
				    st.inflight, st.queued, (unsigned long long)st.throttled,
				    (unsigned long long)st.errors, (unsigned long long)st.connects);
	}
	TAILQ_FOREACH(m, &a->machines, entry)
	evbuffer_add_printf(out, "openstack: %s machine %s: %s\n", m->create ? "create" : "delete",
			    m->m.external_id ? m->m.external_id : "-", m->m.state);
}

static const struct sm_adapter_ops os_adapter = {
    .name = "openstack",
    .adapter_new = os_adapter_new,
    .adapter_stop = os_adapter_stop,
    .adapter_free = os_adapter_free,
    .create_machine = os_create_machine,
    .resume_machine = os_resume_machine,
    .delete_machine = os_delete_machine,
    .list_instances = os_list_instances,
    .list_resources = os_list_resources,
    .delete_resource = os_delete_resource,
    .quota_limits = os_quota_limits,
    .label_quota = os_label_quota,
    .label_ready = os_label_ready,
    .azs = os_azs,
    .upload_image = os_upload_image,
    .delete_image = os_delete_image,
    .list_images = os_list_images,
    .console_log = os_console_log,
    .dump = os_dump,
};

/* Upstream's OpenStack defaults: boot-timeout 60, rate 1 second between
 * calls. */
static const struct sm_defaults os_defaults = {
    .boot_timeout = 60,
    .rate = 1,
    .host_key_checking = 1,
};

static struct drv_provider *
os_provider_new(struct drv_host *lc, char *err, size_t errlen)
{
	return sm_provider_new(&os_adapter, &os_defaults, lc, err, errlen);
}

/* The openstack driver (upstream's OpenStackDriver: a state-machine
 * driver, PAUSE_AT_QUOTA as every state-machine driver). */
/*
 * The image_format slot: the provider's image-format when set, else the
 * cloud's image_format in clouds.yaml (qcow2 when unset there), read on
 * every call so an edited clouds.yaml counts without a restart.
 */
static int
os_image_format(const struct np_provider *p, char *out, size_t outlen, char *err, size_t errlen)
{
	struct os_cloud c;
	int n;

	if (p->image_format != NULL && p->image_format[0])
		return sm_drv_config_image_format(p, out, outlen, err, errlen);
	if (p->cloud == NULL) {
		snprintf(err, errlen, "provider %s names no cloud", p->name);
		return -1;
	}
	if (os_cloud_load(p->cloud, p->region, &c, err, errlen) != 0)
		return -1;
	n = snprintf(out, outlen, "%s", c.image_format ? c.image_format : "qcow2");
	os_cloud_clear(&c);
	if (n < 0 || (size_t)n >= outlen) {
		snprintf(err, errlen, "cloud %s: image_format too long", p->cloud);
		return -1;
	}
	return 0;
}

const struct driver drv_openstack = {
    .name = "openstack",
    .pause_at_quota = 1,
    .reuse_only = 0,
    .provider_new = os_provider_new,
    SM_DRIVER_SLOTS,
    .image_format = os_image_format,
};

const struct sm_adapter_ops *
os_adapter_ops(void)
{
	return &os_adapter;
}
