/*
 * The openstack driver's listings (os_int.h): the one shared GET
 * /servers/detail that answers every machine and list_instances waiting
 * on it (started when the framework's pace says, at most every rate, only while somebody
 * waits), and the cleanup's listings: leaked servers, compute ports DOWN
 * at two looks, unattached floating IPs, and deleting them.
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

void
os_adapter_server_addresses(struct sm_adapter *a, const json_t *server, const char **pub4,
			    const char **priv4, const char **pub6)
{
	os_server_addresses(server, os_ext_net_cb, a, pub4, priv4, pub6);
}

struct sm_instance *
os_server_instance(struct sm_adapter *a, const json_t *s, const struct sm_label *l, const char *fip)
{
	struct sm_instance *in = sm_instance_new();
	const char *pub4, *priv4, *pub6, *st = os_jstr(s, "status");
	const json_t *meta = json_object_get(s, "metadata"), *fl = json_object_get(s, "flavor");

	os_adapter_server_addresses(a, s, &pub4, &priv4, &pub6);
	if (fip != NULL)
		pub4 = fip;
	sm_set_str(&in->external_id, os_jstr(s, "id"));
	in->ready = st != NULL && strcmp(st, "ACTIVE") == 0;
	in->deleted = st != NULL && (strcmp(st, "DELETED") == 0 || strcmp(st, "SOFT_DELETED") == 0);
	sm_set_str(&in->public_ipv4, pub4);
	sm_set_str(&in->private_ipv4, priv4);
	sm_set_str(&in->public_ipv6, pub6);
	sm_set_str(&in->interface_ip, pub4 ? pub4 : pub6 ? pub6 : priv4);
	sm_set_str(&in->cloud, a->cloud.name);
	sm_set_str(&in->region, a->cloud.region);
	sm_set_str(&in->az, os_jstr(s, "OS-EXT-AZ:availability_zone"));
	sm_set_str(&in->host_id, os_jstr(s, "hostId"));
	if (json_is_object(meta)) {
		json_decref(in->metadata);
		in->metadata = json_deep_copy(meta);
	}
	/* the flavor: embedded (microversion >= 2.47) or by id */
	if (json_object_get(fl, "vcpus") != NULL)
		os_quota_from_flavor(fl, l, &in->quota);
	else
		os_quota_from_flavor(os_flavor_by_id(a, os_jstr(fl, "id")), l, &in->quota);
	return in;
}

static void
list_deliver_waiters(struct sm_adapter *a, const char *error)
{
	struct os_listwait *w;
	TAILQ_HEAD(, os_listwait) ws;

	TAILQ_INIT(&ws);
	TAILQ_CONCAT(&ws, &a->listwaits, entry);
	while ((w = TAILQ_FIRST(&ws)) != NULL) {
		TAILQ_REMOVE(&ws, w, entry);
		if (w->kind == 0) {
			sm_instances_cb cb = (sm_instances_cb)w->cb;
			struct sm_instance **v = NULL;
			size_t n = 0, i;
			const char *k;
			json_t *s;
			if (error == NULL) {
				v = calloc(json_object_size(a->servers) + 1, sizeof(*v));
				json_object_foreach(a->servers, k, s)
				{
					const char *st = os_jstr(s, "status");
					if (st != NULL && strcmp(st, "DELETED") == 0)
						continue;
					v[n++] = os_server_instance(a, s, NULL, NULL);
				}
			}
			cb(v, n, error, w->arg);
			for (i = 0; i < n; i++)
				sm_instance_free(v[i]);
			free(v);
		} else {
			sm_resources_cb cb = (sm_resources_cb)w->cb;
			struct sm_resource *v = NULL;
			size_t n = 0;
			const char *k;
			json_t *s, *empty = json_object();
			if (error == NULL) {
				v = calloc(json_object_size(a->servers) + 1, sizeof(*v));
				json_object_foreach(a->servers, k, s)
				{
					const char *st = os_jstr(s, "status");
					const json_t *md = json_object_get(s, "metadata");
					if (st != NULL && strcmp(st, "DELETED") == 0)
						continue;
					v[n++] = (struct sm_resource){
					    "instance", k, json_is_object(md) ? md : empty};
				}
			}
			cb(v, n, error, w->arg);
			free(v);
			json_decref(empty);
		}
		free(w);
	}
}

static void
list_done(struct os_call *c, int status, const char *error, json_t *body,
	  const struct http_response *res)
{
	struct sm_adapter *a = c->a;
	json_t *v = json_object_get(body, "servers"), *s, *links, *l;
	const char *next = NULL;
	size_t i;
	char msg[300];

	a->list_call = NULL;
	if (error != NULL || status != 200 || !json_is_array(v)) {
		error_text(status, error, body, res ? res->body : NULL, msg, sizeof(msg));
		log_warn("openstack %s: listing servers failed: %s", a->env->provider_name, msg);
		json_decref(a->page);
		a->page = NULL;
		list_deliver_waiters(a, msg);
		/* the machines waiting ask again (os_list_start spaces the tries) */
		os_wake_all(a);
		return;
	}
	if (a->page == NULL)
		a->page = json_object();
	json_array_foreach(v, i, s)
	{
		const char *id = os_jstr(s, "id");
		if (id != NULL)
			json_object_set(a->page, id, s);
	}
	links = json_object_get(body, "servers_links");
	json_array_foreach(links, i,
			   l) if (os_jstr(l, "rel") && strcmp(os_jstr(l, "rel"), "next") == 0)
	    next = os_jstr(l, "href");
	/* the token goes with the request: only to the endpoint's own scheme,
	 * host and port (issue 23) */
	if (next != NULL && !url_same_origin(next, a->ep[SVC_COMPUTE])) {
		/* a partial listing would read as servers gone: a failed one */
		snprintf(msg, sizeof(msg), "a \"next\" link to another origin than %s",
			 a->ep[SVC_COMPUTE] ? a->ep[SVC_COMPUTE] : "the compute endpoint");
		log_warn("openstack %s: listing servers failed: %s", a->env->provider_name, msg);
		json_decref(a->page);
		a->page = NULL;
		list_deliver_waiters(a, msg);
		os_wake_all(a);
		return;
	}
	if (next != NULL && json_array_size(v) > 0 &&
	    json_integer_value(json_object_get(c->extra, "pages")) < OS_MAX_LIST_PAGES) {
		json_int_t pages = json_integer_value(json_object_get(c->extra, "pages"));
		a->list_call = os_call_new(a, SVC_COMPUTE, "GET", next, NULL, list_done, NULL);
		a->list_call->extra =
		    json_pack("{s:I, s:I}", "pages", pages + 1, "seq",
			      json_integer_value(json_object_get(c->extra, "seq")));
		return;
	}
	json_decref(a->servers);
	a->servers = a->page;
	a->page = NULL;
	a->list_done_seq = (unsigned long long)json_integer_value(json_object_get(c->extra, "seq"));
	a->list_done_started = a->list_started;
	a->listings++;
	log_debug("openstack %s: server listing %llu answered (started %.3fs ago)",
		  a->env->provider_name, a->list_done_seq, np_mono_s() - a->list_started);
	list_deliver_waiters(a, NULL);
	os_wake_all(a);
	if (a->list_wanted)
		os_list_start(a);
}

void
os_list_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	os_list_start(arg);
}

/* Ask for a listing that starts from now: when the framework's pace says
 * one is useful (sm_listing_wait: the servers' expected boots), at least
 * rate after the last one, and when none runs. */
void
os_list_start(struct sm_adapter *a)
{
	double wait;

	if (a->stopped && TAILQ_EMPTY(&a->machines) && TAILQ_EMPTY(&a->listwaits))
		return;
	if (a->list_call != NULL) {
		a->list_wanted = 1; /* after this one */
		return;
	}
	wait = sm_listing_wait(a->env, a->list_started, a->rate_s);
	if (a->list_seq > 0 && wait > 0.001) {
		struct timeval tv = np_tv_of(wait);
		event_add(a->list_timer, &tv); /* (re)armed: the pace may have moved */
		return;
	}
	a->list_wanted = 0;
	a->list_seq++;
	a->list_started = np_mono_s();
	log_debug("openstack %s: server listing %llu starts", a->env->provider_name, a->list_seq);
	json_decref(a->page);
	a->page = NULL;
	a->list_call = os_call_new(a, SVC_COMPUTE, "GET", "/servers/detail", NULL, list_done, NULL);
	a->list_call->extra = json_pack("{s:i, s:I}", "pages", 0, "seq", (json_int_t)a->list_seq);
}

/* ---- listings, resources, cleanup
 * ------------------------------------------------------------------ */

static void
listwait_add(struct sm_adapter *a, int kind, void *cb, void *arg)
{
	struct os_listwait *w = calloc(1, sizeof(*w));

	if (w == NULL)
		abort();
	w->kind = kind;
	w->cb = cb;
	w->arg = arg;
	TAILQ_INSERT_TAIL(&a->listwaits, w, entry);
	os_list_start(a);
}

void
os_list_instances(struct sm_adapter *a, sm_instances_cb cb, void *arg)
{
	if (a->flavors == NULL)
		os_flavors_fetch(a); /* for the instances' quota */
	listwait_add(a, 0, (void *)cb, arg);
}

static int
compute_port(const json_t *p)
{
	const char *o = os_jstr(p, "device_owner");

	return o == NULL || o[0] == '\0' || strncmp(o, "compute:", 8) == 0;
}

static void
port_deleted(struct os_call *c, int status, const char *error, json_t *body,
	     const struct http_response *res)
{
	(void)body;
	(void)res;
	if (error == NULL && (status == 204 || status == 404)) {
		c->a->leaked_ports++;
		log_info("openstack %s: removed DOWN port %s", c->a->env->provider_name,
			 os_jstr(c->extra, "id"));
	}
}

/* One actor per leaked port or floating IP among the launchers serving
 * the provider (drv_duty_mine, "leak/<kind>:<id>"): each lists, one
 * deletes. */
static int
leak_mine(struct sm_adapter *a, const char *kind, const char *id)
{
	char duty[320];

	snprintf(duty, sizeof(duty), "leak/%s:%s", kind, id);
	return drv_duty_mine(a->env->host, duty);
}

/* upstream's _cleanupLeakedPorts: compute ports DOWN at two looks at least
 * port-cleanup-interval apart are deleted. */
static void
ports_done(struct os_call *c, int status, const char *error, json_t *body,
	   const struct http_response *res)
{
	struct sm_adapter *a = c->a;
	json_t *cur = json_array(), *p, *id;
	size_t i, j;

	(void)res;
	a->ports_call = NULL;
	if (error != NULL || status != 200) {
		json_decref(cur);
		return;
	}
	json_array_foreach(json_object_get(body, "ports"), i,
			   p) if (compute_port(p) && os_jstr(p, "id"))
	    json_array_append_new(cur, json_string(os_jstr(p, "id")));
	if (a->down_ports != NULL) {
		json_array_foreach(cur, i, id)
		    json_array_foreach(a->down_ports, j, p) if (json_equal(p, id))
		{
			char path[300];
			struct os_call *d;
			if (!leak_mine(a, "port", json_string_value(id)))
				break; /* another launcher of the provider's */
			snprintf(path, sizeof(path), "/ports/%s", ID(json_string_value(id)));
			d = os_call_new(a, SVC_NETWORK, "DELETE", path, NULL, port_deleted, NULL);
			d->extra = json_pack("{s:O}", "id", id);
			break;
		}
	}
	json_decref(a->down_ports);
	a->down_ports = cur;
	a->down_ports_at = np_mono_s();
}

static void
fip_deleted(struct os_call *c, int status, const char *error, json_t *body,
	    const struct http_response *res)
{
	(void)body;
	(void)res;
	if (error == NULL && (status == 204 || status == 404))
		c->a->leaked_fips++;
}

/* upstream's delete_unattached_floating_ips (clean-floating-ips). */
static void
fips_done(struct os_call *c, int status, const char *error, json_t *body,
	  const struct http_response *res)
{
	struct sm_adapter *a = c->a;
	json_t *f;
	size_t i;

	(void)res;
	a->fips_call = NULL;
	if (error != NULL || status != 200)
		return;
	json_array_foreach(json_object_get(body, "floatingips"), i, f)
	{
		char path[300];
		if (!json_is_null(json_object_get(f, "port_id")) || os_jstr(f, "id") == NULL ||
		    !leak_mine(a, "floatingip", os_jstr(f, "id")))
			continue;
		log_info("openstack %s: deleting unattached floating IP %s", a->env->provider_name,
			 os_jstr(f, "floating_ip_address"));
		snprintf(path, sizeof(path), "/floatingips/%s", ID(os_jstr(f, "id")));
		os_call_new(a, SVC_NETWORK, "DELETE", path, NULL, fip_deleted, NULL);
	}
}

void
os_list_resources(struct sm_adapter *a, sm_resources_cb cb, void *arg)
{
	listwait_add(a, 1, (void *)cb, arg);
	if (a->stopped)
		return;
	if (a->port_cleanup_interval > 0 && a->ports_call == NULL &&
	    (a->down_ports == NULL || np_mono_s() - a->down_ports_at >= a->port_cleanup_interval))
		a->ports_call = os_call_new(a, SVC_NETWORK, "GET", "/ports?status=DOWN", NULL,
					    ports_done, NULL);
	if (a->clean_fips && a->fips_call == NULL)
		a->fips_call =
		    os_call_new(a, SVC_NETWORK, "GET", "/floatingips", NULL, fips_done, NULL);
}

void
os_resource_deleted(struct os_call *c, int status, const char *error, json_t *body,
		    const struct http_response *res)
{
	sm_done_cb cb = (sm_done_cb)c->ucb;
	char msg[300];

	if (error == NULL && (status < 300 || status == 404)) {
		cb(1, NULL, c->uarg);
		return;
	}
	error_text(status, error, body, res ? res->body : NULL, msg, sizeof(msg));
	cb(0, msg, c->uarg);
}

void
os_delete_resource(struct sm_adapter *a, const struct sm_resource *r, sm_done_cb cb, void *arg)
{
	char path[600];
	struct os_call *c;

	log_info("openstack %s: deleting leaked %s %s", a->env->provider_name, r->type, r->id);
	snprintf(path, sizeof(path), "/servers/%s", ID(r->id));
	c = os_call_new(a, SVC_COMPUTE, "DELETE", path, NULL, os_resource_deleted, NULL);
	c->ucb = (void *)cb;
	c->uarg = arg;
}
