/*
 * The openstack driver's servers (os_int.h): the create and delete state
 * machines (struct osm) and their steps. Create: flavor, image and
 * networks resolved, POST /servers with metadata, polled through the
 * shared listing until ACTIVE, a floating IP when the pool wants one;
 * delete: the server's floating IPs, DELETE /servers/<id>, polled until
 * gone. Also the console log (os-getConsoleOutput).
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

static const char *const osm_names[] = {"start",
					"submitted",
					"building",
					"floating ip: port",
					"floating ip: create",
					"floating ip: wait",
					"delete: ports",
					"delete: floating ips",
					"delete: server",
					"deleting",
					"done",
					"failed"};

/* A server as the newest listing that started after seq shows it: 1 with
 * *s (NULL: not listed), 0 when no such listing is in yet (one is asked
 * for). */
static int
listed_server(struct sm_adapter *a, unsigned long long seq, const char *id, const json_t **s)
{
	if (a->list_done_seq <= seq || a->servers == NULL) {
		os_list_start(a);
		return 0;
	}
	*s = json_object_get(a->servers, id);
	return 1;
}

/* ---- create and delete machines
 * ------------------------------------------------------------------ */

static void
osm_set(struct osm *m, enum osm_state st)
{
	m->st = st;
	m->m.state = osm_names[st];
}

static enum sm_status osm_fail(struct osm *m, enum sm_error e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static enum sm_status
osm_fail(struct osm *m, enum sm_error e, const char *fmt, ...)
{
	va_list ap;

	osm_set(m, OS_FAILED);
	m->m.error = e;
	va_start(ap, fmt);
	vsnprintf(m->m.error_msg, sizeof(m->m.error_msg), fmt, ap);
	va_end(ap);
	return SM_ERROR;
}

/* The machine's call answered: keep the answer, wake the machine. */
static void
osm_answer(struct os_call *c, int status, const char *error, json_t *body,
	   const struct http_response *res)
{
	struct osm *m = c->owner;

	m->call = NULL;
	m->answered = 1;
	m->status = error != NULL ? 0 : status;
	m->errmsg[0] = '\0';
	if (error != NULL || status >= 300)
		error_text(status, error, body, res ? res->body : NULL, m->errmsg,
			   sizeof(m->errmsg));
	json_decref(m->answer);
	m->answer = json_incref(body);
	sm_machine_wake(&m->m);
}

static void
osm_call(struct osm *m, enum os_svc svc, const char *method, const char *path, json_t *body)
{
	m->answered = 0;
	m->call = os_call_new(m->a, svc, method, path, body, osm_answer, m);
}

/* Wait for the call in flight: SM_AGAIN until answered. */
#define WAIT_CALL(m)                                                                               \
	do {                                                                                       \
		if (!(m)->answered) {                                                              \
			(m)->m.retry_in = 3600;                                                    \
			return SM_AGAIN;                                                           \
		}                                                                                  \
	} while (0)

/* {request.<attr>} in s, as Python's str.format over upstream's
 * NodeRequest.getSafeAttributes (id, labels, requestor, requestor_data,
 * relative_priority, event_id, created_time, tenant_name). NULL when s
 * names anything else (upstream logs the error and leaves the key out). */
static char *
format_request(const char *s, const struct np_request *r)
{
	struct evbuffer *b = evbuffer_new();
	char *out = NULL;
	size_t n;

	while (*s) {
		if (s[0] == '{' && s[1] == '{') {
			evbuffer_add(b, "{", 1);
			s += 2;
		} else if (s[0] == '}' && s[1] == '}') {
			evbuffer_add(b, "}", 1);
			s += 2;
		} else if (s[0] == '{') {
			const char *e = strchr(s, '}');
			char key[128];
			if (e == NULL || r == NULL || (size_t)(e - s) >= sizeof(key) ||
			    strncmp(s, "{request.", 9) != 0)
				goto bad;
			snprintf(key, sizeof(key), "%.*s", (int)(e - s - 9), s + 9);
			if (strcmp(key, "id") == 0)
				evbuffer_add_printf(b, "%s", r->id ? r->id : "");
			else if (strcmp(key, "requestor") == 0)
				evbuffer_add_printf(b, "%s", r->requestor ? r->requestor : "None");
			else if (strcmp(key, "event_id") == 0)
				evbuffer_add_printf(b, "%s", r->event_id ? r->event_id : "None");
			else if (strcmp(key, "tenant_name") == 0)
				evbuffer_add_printf(b, "%s",
						    r->tenant_name ? r->tenant_name : "None");
			else if (strcmp(key, "relative_priority") == 0)
				evbuffer_add_printf(b, "%lld", r->relative_priority);
			else if (strcmp(key, "created_time") == 0)
				evbuffer_add_printf(b, "%.17g", r->created_time);
			else if (strcmp(key, "labels") == 0) {
				size_t i;
				evbuffer_add(b, "[", 1);
				for (i = 0; i < r->node_types.n; i++)
					evbuffer_add_printf(b, "%s'%s'", i ? ", " : "",
							    r->node_types.v[i]);
				evbuffer_add(b, "]", 1);
			} else if (strcmp(key, "requestor_data") == 0) {
				char *j = r->requestor_data
					      ? json_dumps(r->requestor_data,
							   JSON_ENCODE_ANY | JSON_COMPACT)
					      : NULL;
				evbuffer_add_printf(b, "%s", j ? j : "None");
				free(j);
			} else
				goto bad;
			s = e + 1;
		} else {
			evbuffer_add(b, s, 1);
			s++;
		}
	}
	n = evbuffer_get_length(b);
	out = malloc(n + 1);
	evbuffer_remove(b, out, n);
	out[n] = '\0';
bad:
	evbuffer_free(b);
	return out;
}

/* The metadata of a new server: groups, instance properties, nodepool_*. */
static json_t *
server_metadata(struct sm_adapter *a, const struct sm_create_args *args, const char *image_name)
{
	const struct sm_label *l = args->label;
	json_t *meta = json_object(), *v;
	const char *k;
	char groups[1024];

	snprintf(groups, sizeof(groups), "%s,%s,%s", a->env->provider_name,
		 image_name ? image_name : "", l->name);
	json_object_set_new(meta, "groups", json_string(groups));
	json_object_foreach(json_object_get(l->raw, "instance-properties"), k, v)
	{
		if (json_is_string(v))
			json_object_set(meta, k, v);
		else {
			char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
			json_object_set_new(meta, k, json_string(t ? t : ""));
			free(t);
		}
	}
	json_object_foreach(json_object_get(l->raw, "dynamic-instance-properties"), k, v)
	{
		char *t =
		    json_is_string(v) ? format_request(json_string_value(v), args->request) : NULL;
		if (t == NULL)
			log_error("openstack %s: error formatting dynamic instance property %s",
				  a->env->provider_name, k);
		else
			json_object_set_new(meta, k, json_string(t));
		free(t);
	}
	json_object_foreach((json_t *)args->metadata, k, v)
	{
		if (json_is_string(v))
			json_object_set(meta, k, v);
		else {
			char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
			json_object_set_new(meta, k, json_string(t ? t : ""));
			free(t);
		}
	}
	return meta;
}

static char *
b64(const char *s)
{
	static const char tb[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t n = strlen(s), i, o = 0;
	char *out = malloc(4 * ((n + 2) / 3) + 1);

	for (i = 0; i < n; i += 3) {
		unsigned v = (unsigned char)s[i] << 16;
		if (i + 1 < n)
			v |= (unsigned char)s[i + 1] << 8;
		if (i + 2 < n)
			v |= (unsigned char)s[i + 2];
		out[o++] = tb[(v >> 18) & 63];
		out[o++] = tb[(v >> 12) & 63];
		out[o++] = i + 1 < n ? tb[(v >> 6) & 63] : '=';
		out[o++] = i + 2 < n ? tb[v & 63] : '=';
	}
	out[o] = '\0';
	return out;
}

/* The config-drive setting of the image entry: 1, 0, or -1 unset. */
static int
config_drive(const struct sm_label *l)
{
	const json_t *v = l->image ? json_object_get(l->image->raw, "config-drive") : NULL;

	return json_is_boolean(v) ? json_is_true(v) : -1;
}

static json_t *
create_body(struct osm *m, const json_t *flavor)
{
	const struct sm_label *l = m->label;
	const json_t *pr = l->pool->raw, *v;
	json_t *s = json_object(), *sg;
	const char *kn = np_json_str(l->raw, "key-name", NULL),
		   *ud = np_json_str(l->raw, "userdata", NULL);
	int cd = config_drive(l);
	size_t i;

	json_object_set_new(s, "name", json_string(m->name));
	json_object_set_new(s, "flavorRef", json_string(os_jstr(flavor, "id")));
	if (np_json_bool(l->raw, "boot-from-volume", 0)) {
		json_object_set_new(s, "block_device_mapping_v2",
				    json_pack("[{s:i, s:s, s:s, s:s, s:I, s:b}]", "boot_index", 0,
					      "uuid", m->image_id, "source_type", "image",
					      "destination_type", "volume", "volume_size",
					      (json_int_t)np_json_num(l->raw, "volume-size", 50),
					      "delete_on_termination", 1));
		json_object_set_new(s, "imageRef", json_string(""));
	} else {
		json_object_set_new(s, "imageRef", json_string(m->image_id));
	}
	if (kn != NULL)
		json_object_set_new(s, "key_name", json_string(kn));
	if (m->az != NULL)
		json_object_set_new(s, "availability_zone", json_string(m->az));
	if (cd >= 0)
		json_object_set_new(s, "config_drive", json_boolean(cd));
	if (ud != NULL) {
		char *e = b64(ud);
		json_object_set_new(s, "user_data", json_string(e));
		free(e);
	}
	if (json_array_size(m->net_ids) > 0) {
		json_t *nets = json_array();
		json_array_foreach(m->net_ids, i, v)
		    json_array_append_new(nets, json_pack("{s:O}", "uuid", v));
		json_object_set_new(s, "networks", nets);
	}
	sg = json_object_get(pr, "security-groups");
	if (json_array_size(sg) > 0) {
		json_t *g = json_array();
		json_array_foreach(sg, i, v) if (json_is_string(v))
		    json_array_append_new(g, json_pack("{s:O}", "name", v));
		json_object_set_new(s, "security_groups", g);
	}
	json_object_set(s, "metadata", m->meta);
	return json_pack("{s:o}", "server", s);
}

/* The networks of the label (else the pool): 1 all resolved into
 * m->net_ids, 0 waiting, -1 one does not exist (message in m->errmsg). */
static int
resolve_networks(struct osm *m)
{
	const json_t *nets = json_object_get(m->label->raw, "networks"), *v;
	size_t i;

	if (nets == NULL)
		nets = json_object_get(m->label->pool->raw, "networks");
	json_array_clear(m->net_ids);
	json_array_foreach(nets, i, v)
	{
		const char *id = NULL;
		int r;
		if (!json_is_string(v))
			continue;
		r = os_lookup(m->a, m->a->nets, SVC_NETWORK, json_string_value(v), &id);
		if (r == 0)
			return 0;
		if (r < 0) {
			snprintf(m->errmsg, sizeof(m->errmsg),
				 "Unable to find network %s in provider %s", json_string_value(v),
				 m->a->env->provider_name);
			return -1;
		}
		json_array_append_new(m->net_ids, json_string(id));
	}
	return 1;
}

static int
needs_fip(struct osm *m, const json_t *server)
{
	const char *pub4, *priv4, *pub6;

	if (!np_json_bool(m->label->pool->raw, "auto-floating-ip", 1))
		return 0;
	if (json_array_size(m->a->ext_nets) == 0)
		return 0;
	os_adapter_server_addresses(m->a, server, &pub4, &priv4, &pub6);
	return pub4 == NULL && priv4 != NULL;
}

static enum sm_status
create_advance(struct sm_machine *mm, struct sm_instance **out)
{
	struct osm *m = (struct osm *)mm;
	struct sm_adapter *a = m->a;
	const json_t *s, *flavor;
	const char *id, *st;
	int loaded, r;
	char path[600];

	switch (m->st) {
	case OS_START:
		if (a->stopped)
			return osm_fail(m, SM_E_FAILED, "the provider is stopping");
		flavor = os_find_flavor(a, m->label, &loaded);
		if (!loaded) {
			if (a->flavors_call == NULL && a->flavors_failed_at > 0 &&
			    np_mono_s() - a->flavors_failed_at < 1.0)
				return osm_fail(m, SM_E_FAILED, "cannot list the cloud's flavors");
			os_flavors_fetch(a);
			mm->retry_in = 3600;
			return SM_AGAIN;
		}
		if (flavor == NULL)
			return osm_fail(m, SM_E_FAILED, "Unable to find flavor for label %s",
					m->label->name);
		if (a->ext_nets == NULL &&
		    np_json_bool(m->label->pool->raw, "auto-floating-ip", 1)) {
			if (a->ext_call == NULL &&
			    (a->ext_failed_at == 0 || np_mono_s() - a->ext_failed_at > 1.0))
				os_ext_fetch(a);
			if (a->ext_call != NULL) {
				mm->retry_in = 3600;
				return SM_AGAIN;
			}
		}
		if (m->image_id == NULL) {
			const struct sm_image *im = m->label->image;
			const char *iid = im ? np_json_str(im->raw, "image-id", NULL) : NULL;
			if (iid != NULL) {
				m->image_id = xstrdup(iid);
			} else {
				const char *nm = im ? np_json_str(im->raw, "image-name", im->name)
						    : m->label->cloud_image;
				r = os_lookup(a, a->images, SVC_IMAGE, nm ? nm : "", &id);
				if (r == 0) {
					mm->retry_in = 3600;
					return SM_AGAIN;
				}
				if (r < 0)
					return osm_fail(m, SM_E_FAILED,
							"Unable to find image %s in provider %s",
							nm, a->env->provider_name);
				m->image_id = xstrdup(id);
			}
		}
		r = resolve_networks(m);
		if (r == 0) {
			mm->retry_in = 3600;
			return SM_AGAIN;
		}
		if (r < 0)
			return osm_fail(m, SM_E_FAILED, "%s", m->errmsg);
		json_decref(m->flavor);
		m->flavor = json_deep_copy(flavor);
		a->creates++;
		osm_set(m, OS_SUBMITTED);
		osm_call(m, SVC_COMPUTE, "POST", "/servers", create_body(m, flavor));
		mm->retry_in = 3600;
		return SM_AGAIN;
	case OS_SUBMITTED:
		WAIT_CALL(m);
		id = os_jstr(json_object_get(m->answer, "server"), "id");
		if (m->status != 202 && m->status != 200) {
			a->create_errors++;
			if (m->status == 400)
				os_caches_clear(a); /* stale image, flavor or network (upstream) */
			if (is_quota_msg(m->errmsg)) {
				a->quota_errors++;
				return osm_fail(m, SM_E_QUOTA, "%s", m->errmsg);
			}
			return osm_fail(m, SM_E_FAILED, "server create: %s", m->errmsg);
		}
		if (id == NULL)
			return osm_fail(m, SM_E_FAILED, "server create answered without an id");
		sm_set_str(&mm->external_id, id);
		m->seq = a->list_seq;
		osm_set(m, OS_BUILDING);
		/* fall through */
	case OS_BUILDING:
		if (!listed_server(a, m->seq, mm->external_id, &s)) {
			mm->retry_in = 5; /* woken by the listing; this is a safety net */
			return SM_AGAIN;
		}
		m->seq = a->list_done_seq;
		if (s == NULL && m->resumed)
			/* a listing begun after the takeover lacks a server
			 * created long before it: gone (a new server may still
			 * be missing from a listing; this one is not new) */
			return osm_fail(m, SM_E_FAILED, "server %s is gone", mm->external_id);
		st = os_jstr(s, "status");
		if (s == NULL || st == NULL || strcmp(st, "BUILD") == 0) {
			os_list_start(a); /* not listed yet, or still building */
			mm->retry_in = 30;
			return SM_AGAIN;
		}
		json_decref(m->server);
		m->server = json_deep_copy(s);
		if (strcmp(st, "ERROR") == 0) {
			const char *fault = os_jstr(json_object_get(s, "fault"), "message");
			a->create_errors++;
			if (fault != NULL && is_quota_msg(fault)) {
				a->quota_errors++;
				return osm_fail(m, SM_E_QUOTA, "%s", fault);
			}
			return osm_fail(m, SM_E_FAILED,
					"Error in creating the server. Compute service reports "
					"fault: %s",
					fault ? fault : "(none)");
		}
		if (strcmp(st, "ACTIVE") != 0) {
			os_list_start(a);
			mm->retry_in = 30;
			return SM_AGAIN;
		}
		mm->seen_at = a->list_done_started; /* the boot estimate's sample */
		if (!needs_fip(m, s)) {
			*out = os_server_instance(a, s, m->label, NULL);
			osm_set(m, OS_DONE);
			return SM_DONE;
		}
		osm_set(m, OS_FIP_PORT);
		snprintf(path, sizeof(path), "/ports?device_id=%s", mm->external_id);
		osm_call(m, SVC_NETWORK, "GET", path, NULL);
		mm->retry_in = 3600;
		return SM_AGAIN;
	case OS_FIP_PORT: {
		const json_t *ports, *net;
		WAIT_CALL(m);
		ports = json_object_get(m->answer, "ports");
		if (m->status != 200 || json_array_size(ports) == 0)
			return osm_fail(m, SM_E_FAILED, "no port for a floating IP: %s",
					m->errmsg[0] ? m->errmsg : "the server has no port");
		free(m->port_id);
		m->port_id = xstrdup(os_jstr(json_array_get(ports, 0), "id"));
		net = json_array_get(a->ext_nets, 0);
		osm_set(m, OS_FIP_CREATE);
		osm_call(m, SVC_NETWORK, "POST", "/floatingips",
			 json_pack("{s:{s:s, s:s}}", "floatingip", "floating_network_id",
				   os_jstr(net, "id") ? os_jstr(net, "id") : "", "port_id",
				   m->port_id ? m->port_id : ""));
		mm->retry_in = 3600;
		return SM_AGAIN;
	}
	case OS_FIP_CREATE:
	case OS_FIP_WAIT: {
		const json_t *f;
		WAIT_CALL(m);
		f = json_object_get(m->answer, "floatingip");
		if (m->status != 201 && m->status != 200) {
			if (is_quota_msg(m->errmsg))
				return osm_fail(m, SM_E_QUOTA, "floating IP: %s", m->errmsg);
			return osm_fail(m, SM_E_FAILED, "floating IP: %s", m->errmsg);
		}
		if (m->st == OS_FIP_CREATE) {
			a->fips_created++;
			free(m->fip_id);
			m->fip_id = xstrdup(os_jstr(f, "id"));
			osm_set(m, OS_FIP_WAIT);
		}
		st = os_jstr(f, "status");
		if (st != NULL && strcmp(st, "ACTIVE") == 0 && os_jstr(f, "floating_ip_address")) {
			*out = os_server_instance(a, m->server, m->label,
						  os_jstr(f, "floating_ip_address"));
			osm_set(m, OS_DONE);
			return SM_DONE;
		}
		if (m->next_poll > np_mono_s()) {
			mm->retry_in = m->next_poll - np_mono_s();
			return SM_AGAIN;
		}
		m->next_poll = np_mono_s() + OS_FIP_POLL;
		snprintf(path, sizeof(path), "/floatingips/%s", ID(m->fip_id ? m->fip_id : ""));
		osm_call(m, SVC_NETWORK, "GET", path, NULL);
		m->answered = 0;
		mm->retry_in = 3600;
		return SM_AGAIN;
	}
	default:
		return osm_fail(m, SM_E_FAILED, "advanced after finishing");
	}
}

static enum sm_status
delete_advance(struct sm_machine *mm, struct sm_instance **out)
{
	struct osm *m = (struct osm *)mm;
	struct sm_adapter *a = m->a;
	const json_t *s, *v;
	char path[600];
	size_t i;

	(void)out;
	switch (m->st) {
	case OS_START:
		/* the server's floating IPs first (upstream), found through its
		 * ports; only in a cloud that has floating IPs */
		if (a->ext_nets == NULL && a->ext_call == NULL &&
		    (a->ext_failed_at == 0 || np_mono_s() - a->ext_failed_at > 1.0))
			os_ext_fetch(a);
		if (a->ext_nets == NULL && a->ext_call != NULL) {
			mm->retry_in = 3600;
			return SM_AGAIN;
		}
		if (json_array_size(a->ext_nets) > 0) {
			osm_set(m, OS_DEL_PORTS);
			snprintf(path, sizeof(path), "/ports?device_id=%s", mm->external_id);
			osm_call(m, SVC_NETWORK, "GET", path, NULL);
			mm->retry_in = 3600;
			return SM_AGAIN;
		}
		osm_set(m, OS_DEL_SERVER);
		goto del_server;
	case OS_DEL_PORTS:
		WAIT_CALL(m);
		json_decref(m->fip_ids);
		m->fip_ids = json_array();
		m->fip_next = 0;
		if (m->status == 200) {
			/* remember the ports; their floating IPs are asked next */
			json_array_foreach(json_object_get(m->answer, "ports"), i, v)
			    json_array_append_new(m->fip_ids,
						  json_pack("{s:s?}", "port", os_jstr(v, "id")));
		}
		osm_set(m, OS_DEL_FIPS);
		m->answered = 1;
		json_decref(m->answer);
		m->answer = NULL;
		/* fall through */
	case OS_DEL_FIPS:
		WAIT_CALL(m);
		if (m->answer != NULL) {
			const json_t *fips = json_object_get(m->answer, "floatingips");
			json_array_foreach(fips, i, v) if (os_jstr(v, "id")) json_array_append_new(
			    m->fip_ids, json_pack("{s:s}", "fip", os_jstr(v, "id")));
			json_decref(m->answer);
			m->answer = NULL;
		}
		while (m->fip_next < json_array_size(m->fip_ids)) {
			v = json_array_get(m->fip_ids, m->fip_next++);
			if (os_jstr(v, "port") != NULL) {
				snprintf(path, sizeof(path), "/floatingips?port_id=%s",
					 os_jstr(v, "port"));
				osm_call(m, SVC_NETWORK, "GET", path, NULL);
				mm->retry_in = 3600;
				return SM_AGAIN;
			}
			if (os_jstr(v, "fip") != NULL) {
				snprintf(path, sizeof(path), "/floatingips/%s",
					 ID(os_jstr(v, "fip")));
				a->fips_deleted++;
				osm_call(m, SVC_NETWORK, "DELETE", path, NULL);
				mm->retry_in = 3600;
				return SM_AGAIN;
			}
		}
		osm_set(m, OS_DEL_SERVER);
		/* fall through */
	case OS_DEL_SERVER:
	del_server:
		a->deletes++;
		snprintf(path, sizeof(path), "/servers/%s", ID(mm->external_id));
		osm_set(m, OS_DELETING);
		osm_call(m, SVC_COMPUTE, "DELETE", path, NULL);
		mm->retry_in = 3600;
		return SM_AGAIN;
	case OS_DELETING:
		WAIT_CALL(m);
		if (!m->del_acked) {
			/* the DELETE's answer */
			if (m->status == 404)
				return osm_fail(m, SM_E_NOTFOUND, "no server %s", mm->external_id);
			if (m->status != 204 && m->status != 202 && m->status != 200)
				return osm_fail(m, SM_E_FAILED, "server delete: %s", m->errmsg);
			m->del_acked = 1;
			m->seq = a->list_seq;
		}
		if (!listed_server(a, m->seq, mm->external_id, &s)) {
			mm->retry_in = 5; /* woken by the listing; this is a safety net */
			return SM_AGAIN;
		}
		m->seq = a->list_done_seq;
		if (s == NULL ||
		    (os_jstr(s, "status") && strcmp(os_jstr(s, "status"), "DELETED") == 0)) {
			osm_set(m, OS_DONE);
			return SM_DONE;
		}
		os_list_start(a);
		mm->retry_in = 30;
		return SM_AGAIN;
	default:
		return osm_fail(m, SM_E_FAILED, "advanced after finishing");
	}
}

static void
osm_free(struct sm_machine *mm)
{
	struct osm *m = (struct osm *)mm;

	os_call_cancel(m->call);
	TAILQ_REMOVE(&m->a->machines, m, entry);
	free(m->m.external_id);
	free(m->name);
	free(m->az);
	free(m->image_id);
	free(m->image_name);
	free(m->fip_id);
	free(m->fip_addr);
	free(m->port_id);
	json_decref(m->meta);
	json_decref(m->net_ids);
	json_decref(m->server);
	json_decref(m->fip_ids);
	json_decref(m->answer);
	json_decref(m->flavor);
	free(m);
}

static const struct sm_machine_ops create_ops = {create_advance, osm_free};
static const struct sm_machine_ops delete_ops = {delete_advance, osm_free};

static struct osm *
osm_new(struct sm_adapter *a, const struct sm_machine_ops *ops)
{
	struct osm *m = calloc(1, sizeof(*m));

	if (m == NULL)
		abort();
	m->m.ops = ops;
	m->a = a;
	osm_set(m, OS_START);
	m->net_ids = json_array();
	TAILQ_INSERT_TAIL(&a->machines, m, entry);
	return m;
}

struct sm_machine *
os_create_machine(struct sm_adapter *a, const struct sm_create_args *args)
{
	struct osm *m = osm_new(a, &create_ops);
	const struct sm_label *l = args->label;
	const char *image_name;

	m->create = 1;
	m->name = xstrdup(args->hostname);
	m->label = l;
	m->az = xstrdup(args->az);
	if (args->image_external_id != NULL)
		m->image_id = xstrdup(args->image_external_id); /* a diskimage upload */
	image_name = l->image != NULL ? l->image->name
		     : l->diskimage   ? l->diskimage
				      : l->cloud_image;
	m->image_name = xstrdup(image_name);
	m->meta = server_metadata(a, args, image_name);
	return &m->m;
}

/* The resume_machine slot: a server an earlier launcher created for the
 * node, followed from its listing as the create machine's building state
 * (then its floating IP, as for a new server). */
struct sm_machine *
os_resume_machine(struct sm_adapter *a, const struct sm_create_args *args, const char *external_id)
{
	struct osm *m = (struct osm *)os_create_machine(a, args);

	m->m.external_id = np_strdupz(external_id);
	m->seq = a->list_seq;
	m->resumed = 1;
	osm_set(m, OS_BUILDING);
	return &m->m;
}

struct sm_machine *
os_delete_machine(struct sm_adapter *a, const char *external_id)
{
	struct osm *m = osm_new(a, &delete_ops);

	m->m.external_id = xstrdup(external_id);
	return &m->m;
}

/* ---- console log
 * ------------------------------------------------------------------------------------ */

static void
console_done(struct os_call *c, int status, const char *error, json_t *body,
	     const struct http_response *res)
{
	sm_console_cb cb = (sm_console_cb)c->ucb;
	char msg[300];

	if (error == NULL && status == 200) {
		cb(os_jstr(body, "output") ? os_jstr(body, "output") : "", NULL, c->uarg);
		return;
	}
	error_text(status, error, body, res ? res->body : NULL, msg, sizeof(msg));
	cb(NULL, msg, c->uarg);
}

void
os_console_log(struct sm_adapter *a, const struct sm_label *label, const char *external_id,
	       sm_console_cb cb, void *arg)
{
	char path[600];
	struct os_call *c;

	(void)label;
	snprintf(path, sizeof(path), "/servers/%s/action", ID(external_id));
	c = os_call_new(a, SVC_COMPUTE, "POST", path,
			json_pack("{s:{s:n}}", "os-getConsoleOutput", "length"), console_done,
			NULL);
	c->ucb = (void *)cb;
	c->uarg = arg;
}
