/*
 * The `azure` driver: Azure Resource Manager behind a state-machine
 * Adapter (drivers/statemachine/adapter.h), as upstream Nodepool's
 * nodepool/driver/azure (adapter.py, azul.py, config.py), non-blocking on
 * the worker's loop. Calls go through azure_api.h (the auth file,
 * OAuth2 client credentials, ARM over lib/net/http.h).
 *
 * What it does per provider (keys of nodepool.yaml(5), driver azure):
 *   - start: the subnet (`subnet-id`, else `network` looked up with
 *     subnets.get, subnet "default" unless named) and the compute resource
 *     SKUs (vCPUs, MemoryGB per size and location) for quota, as
 *     upstream's AzureAdapter.__init__.
 *   - create (AzureCreateStateMachine): PUT virtualMachines/<hostname>
 *     with the image reference (cloud image `image-reference`, `image-id`,
 *     `image-filter` resolved against the resource group's images, newest
 *     name first, or a community / shared gallery image; a diskimage
 *     upload by its image's id), osProfile (adminUsername, the key as
 *     authorized_keys, password or a generated one, customData), the OS
 *     disk (deleteOption Delete, `volume-size`), one NIC configuration
 *     with an IPv4 and/or IPv6 configuration on the subnet and Standard
 *     static public addresses per the pool's ipv4/ipv6/public-* keys, all
 *     with deleteOption Delete, userData, and the tags (label tags,
 *     dynamic tags from the request, then the nodepool_* metadata). The
 *     VM, then its NIC's private addresses, then its public addresses are
 *     awaited from shared listings of the resource group (one list per
 *     kind per poll for every machine waiting: upstream's cached
 *     _listVirtualMachines / _listNetworkInterfaces / _listPublicIPAddresses).
 *   - delete: DELETE the VM (its NIC, addresses and OS disk go with it),
 *     then the shared VM listing until it is gone.
 *   - leaks: VMs, NICs, public IPs, disks and images of the resource group
 *     tagged with this provider, by their tags (listResources).
 *   - quota: compute usages of the location (cores, virtualMachines
 *     limits); per label from the SKU of its vm-size.
 *   - images: a diskimage upload is deleted with DELETE images/<name>,
 *     its long-running operation polled through Azure-AsyncOperation /
 *     Location (azul.py's wait_for_async_operation).
 * Beyond upstream: a create refused for quota (OperationNotAllowed naming
 * a quota, QuotaExceeded) aborts the launch as a quota error (upstream
 * fails and retries it).
 */
#include "drivers/statemachine/statemachine.h"
#include "drivers/statemachine/reqformat.h"

#include <sys/queue.h>
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "drivers/azure/azure_api.h"
#include "lib/config/jsonget.h"
#include "lib/core/clock.h"
#include "lib/core/log.h"
#include "lib/net/ratelimit.h"

/* api-versions as upstream's azul.py */
#define V_NET	 "2020-11-01" /* networkInterfaces, publicIPAddresses */
#define V_VM	 "2023-03-01"
#define V_DISK	 "2020-06-30"
#define V_IMAGE	 "2020-12-01"
#define V_SUBNET "2020-07-01"
#define V_USAGE	 "2020-12-01"
#define V_SKU	 "2019-04-01"

#define AZ_PACE		 -1.0  /* poll_schedule: when the framework's pace says */
#define AZ_IMAGE_TTL	 10.0  /* s an image listing serves image-filters (upstream's ttl_cache) */
#define AZ_MISSING_GRACE 60.0  /* s a new VM may be absent from listings */
#define AZ_SUBNET_RETRY	 10.0  /* s between subnet lookups that failed */
#define AZ_ASYNC_TIMEOUT 600.0 /* s: wait_for_async_operation's timeout */

enum kind { K_VM, K_NIC, K_PIP, K_NKINDS };
static const char *const kind_path[] = {
    "providers/Microsoft.Compute/virtualMachines",
    "providers/Microsoft.Network/networkInterfaces",
    "providers/Microsoft.Network/publicIPAddresses",
};
static const char *const kind_version[] = {V_VM, V_NET, V_NET};
static const char *const kind_what[] = {"GET virtualMachines", "GET networkInterfaces",
					"GET publicIPAddresses"};

struct amachine;
TAILQ_HEAD(amachine_list, amachine);

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
	struct az_api *api;
	char *provider, *rg, *location;
	int stopped;
	/* the subnet machines' NICs go on */
	char *subnet_id;
	struct az_call *subnet_call;
	double subnet_failed_at;
	int subnet_missing; /* the lookup answered 404 */
	char subnet_error[256];
	/* SKUs: "<name lowercase>|<location lowercase>" -> {vcpus, ram} */
	json_t *skus;
	int skus_known;
	/* the shared poll */
	struct amachine_list waiting;
	struct event *poll_ev;
	unsigned round;		       /* rounds started */
	unsigned data_round[K_NKINDS]; /* the round whose listing cur[] holds */
	json_t *cur[K_NKINDS];	       /* the latest listing of each kind (array) */
	int npoll;		       /* listings of the round in flight */
	int phase, need_np;	       /* the round's phase (1: VMs, 2: NICs and IPs) */
	double last_poll, done_poll;   /* the last round's start, the newest done's */
	/* image-filter listings (cached AZ_IMAGE_TTL) and diskimage ids */
	json_t *images;
	double images_at;
	int images_listing;
	json_t *dimages; /* upload name -> image resource id */
	unsigned long long launched, polls;
};

enum am_state {
	AM_START,
	AM_IMAGE,    /* GET images/<upload> or the images listing in flight */
	AM_SUBMIT,   /* PUT virtualMachines in flight */
	AM_VM,	     /* waiting for the VM to be Succeeded */
	AM_NIC,	     /* waiting for its NIC's private addresses */
	AM_PIP,	     /* waiting for its public addresses */
	AM_DELETING, /* DELETE in flight */
	AM_GONE,     /* delete: waiting for the VM to leave the listing */
	AM_DONE,
	AM_FAILED,
};
static const char *const am_names[] = {"start",	       "image",	       "creating vm", "creating vm",
				       "querying nic", "querying pip", "deleting vm", "deleting vm",
				       "complete",     "failed"};

struct amachine {
	struct sm_machine m;
	struct sm_adapter *a;
	int create;
	enum am_state st;
	TAILQ_ENTRY(amachine) entry;
	int listed;
	unsigned min_round; /* listings from this round on answer this machine */
	struct az_call *call;
	double since;
	/* create */
	const struct sm_label *label;
	char *image_upload; /* diskimage upload name (external id), or NULL */
	json_t *image_ref;  /* imageReference, once known */
	json_t *tags;
	json_t *vm, *nic; /* latest seen */
	json_t *pip_ids;  /* public IP resource ids of the NIC */
	json_t *pips;	  /* their listings */
};

static double
now_s(void)
{
	return ratelimit_now();
}

static const json_t *
lraw(const struct sm_label *l, const char *k)
{
	return json_object_get(l->raw, k);
}

static const char *
jstr(const json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

/* properties.<k> of an ARM resource */
static const json_t *
prop(const json_t *o, const char *k)
{
	return json_object_get(json_object_get(o, "properties"), k);
}

static const char *
prov_state(const json_t *o)
{
	const char *s = json_string_value(prop(o, "provisioningState"));
	return s != NULL ? s : "";
}

static char *
xstrdup(const char *s)
{
	char *d = strdup(s != NULL ? s : "");

	if (d == NULL)
		abort();
	return d;
}

static void
machine_wake(struct amachine *am)
{
	sm_machine_wake(&am->m);
}

/* Upstream's pool defaults (AzurePool.load): public-ipv4 true, public-ipv6
 * false, ipv4/ipv6 on when their public key is, IPv4 when neither. */
static void
pool_ips(const struct sm_adapter *a, const struct sm_pool *pool, int *v4, int *v6, int *pub4,
	 int *pub6)
{
	const json_t *p = a->env->provider, *pr = pool->raw;

	*pub4 = np_json_bool(pr, "public-ipv4", np_json_bool(p, "public-ipv4", 1));
	*pub6 = np_json_bool(pr, "public-ipv6", np_json_bool(p, "public-ipv6", 0));
	*v4 = np_json_bool(pr, "ipv4", np_json_bool(p, "ipv4", 0)) || *pub4;
	*v6 = np_json_bool(pr, "ipv6", np_json_bool(p, "ipv6", 0)) || *pub6;
	if (!*v4 && !*v6)
		*v4 = 1;
}

/* ---- SKUs and quota ---- */

static void
sku_key(const char *name, const char *loc, char *buf, size_t len)
{
	size_t i;

	snprintf(buf, len, "%s|%s", name != NULL ? name : "", loc != NULL ? loc : "");
	for (i = 0; buf[i] != '\0'; i++)
		buf[i] = (char)tolower((unsigned char)buf[i]);
}

/* upstream's quota_info_from_sku: vCPUs and MemoryGB (as MiB), 1 instance */
static void
sku_quota(const struct sm_adapter *a, const char *size, const char *loc, struct drv_quota *q)
{
	char key[256];
	const json_t *s;

	sku_key(size, loc, key, sizeof(key));
	s = json_object_get(a->skus, key);
	drv_quota_init(q, 0, 1, 0);
	if (s != NULL) {
		q->cores = np_json_num(s, "vcpus", 0);
		q->ram = np_json_num(s, "ram", 0);
	}
}

/* ---- paginated listings (value[] and nextLink) ---- */

struct lister;
typedef void (*lister_done)(struct lister *ls, const char *error);

struct lister {
	struct pend p;
	struct sm_adapter *a;
	char *what;
	json_t *items;
	struct az_call *call;
	lister_done done;
	void *cb, *arg;
	int kind, stage;
	/* list_resources / list_instances results */
	struct sm_resource *res;
	size_t nres, rcap;
	json_t *keep;
};

static void
lister_dtor(struct pend *p)
{
	struct lister *ls = (struct lister *)p;

	json_decref(ls->items);
	json_decref(ls->keep);
	free(ls->res);
	free(ls->what);
	free(ls);
}

/* Free a lister whose callback has run (or never will). */
static void
lister_free(struct lister *ls)
{
	LIST_REMOVE(&ls->p, entry);
	az_call_cancel(ls->call);
	lister_dtor(&ls->p);
}

static void
lister_page_done(const struct az_result *r, void *arg)
{
	struct lister *ls = arg;
	const char *next;
	char err[640];

	ls->call = NULL;
	if (r->code != NULL) {
		snprintf(err, sizeof(err), "%s: %s: %s", ls->what, r->code, r->message);
		ls->done(ls, err);
		return;
	}
	json_array_extend(ls->items, json_object_get(r->body, "value"));
	next = jstr(r->body, "nextLink");
	if (next != NULL && *next != '\0') {
		ls->call =
		    az_call(ls->a->api, "GET", next, NULL, NULL, ls->what, lister_page_done, ls);
		return;
	}
	ls->done(ls, NULL);
}

/* Start listing path (under the subscription) with api-version v. */
static struct lister *
lister_start(struct sm_adapter *a, const char *path, const char *v, const char *what,
	     lister_done done, void *cb, void *arg)
{
	struct lister *ls = calloc(1, sizeof(*ls));

	if (ls == NULL)
		abort();
	ls->p.dtor = lister_dtor;
	ls->a = a;
	ls->what = xstrdup(what);
	ls->items = json_array();
	ls->done = done;
	ls->cb = cb;
	ls->arg = arg;
	LIST_INSERT_HEAD(&a->pend, &ls->p, entry);
	ls->call = az_call(a->api, "GET", path, v, NULL, what, lister_page_done, ls);
	return ls;
}

static char *
rg_path(const struct sm_adapter *a, const char *sub, const char *name)
{
	char *s = NULL;

	if (asprintf(&s, "resourceGroups/%s/%s%s%s", a->rg, sub, name != NULL ? "/" : "",
		     name != NULL ? name : "") < 0)
		abort();
	return s;
}

/* ---- the shared poll ---- */

static void poll_schedule(struct sm_adapter *a, double in);
static double poll_pace(struct sm_adapter *a);

/* Wait for the next listings (from the next round on). */
static void
wait_on_poll(struct amachine *am, enum am_state st)
{
	struct sm_adapter *a = am->a;

	am->st = st;
	am->m.state = am_names[st];
	am->min_round = a->round + 1;
	if (!am->listed) {
		TAILQ_INSERT_TAIL(&a->waiting, am, entry);
		am->listed = 1;
	}
	poll_schedule(a, AZ_PACE);
}

static void
unlist(struct amachine *am)
{
	if (!am->listed)
		return;
	TAILQ_REMOVE(&am->a->waiting, am, entry);
	am->listed = 0;
}

static void poll_phase2(struct sm_adapter *a);
static const json_t *find(const struct amachine *am, enum kind k, const char *key, const char *v);

static void
poll_list_done(struct lister *ls, const char *error)
{
	struct sm_adapter *a = ls->a;
	struct amachine *am;

	if (error != NULL) {
		log_warn("azure %s: %s", a->provider, error);
	} else {
		json_decref(a->cur[ls->kind]);
		a->cur[ls->kind] = json_incref(ls->items);
		a->data_round[ls->kind] = (unsigned)ls->stage;
	}
	lister_free(ls);
	if (--a->npoll > 0)
		return;
	if (a->phase == 1) {
		/* a VM now up needs its NIC and addresses: list them in this
		 * round, after the VMs */
		TAILQ_FOREACH(am, &a->waiting, entry)
		if (am->st == AM_VM && a->data_round[K_VM] == a->round) {
			const json_t *vm = find(am, K_VM, "name", am->m.external_id);
			if (vm != NULL && strcmp(prov_state(vm), "Succeeded") == 0)
				a->need_np = 1;
		}
		if (a->need_np) {
			poll_phase2(a);
			return;
		}
	}
	a->done_poll = a->last_poll;
	TAILQ_FOREACH(am, &a->waiting, entry)
	machine_wake(am);
	if (!TAILQ_EMPTY(&a->waiting))
		poll_schedule(a, AZ_PACE);
}

static void
poll_list(struct sm_adapter *a, enum kind k)
{
	struct lister *ls;
	char *path = rg_path(a, kind_path[k], NULL);

	a->npoll++;
	ls = lister_start(a, path, kind_version[k], kind_what[k], poll_list_done, NULL, NULL);
	ls->kind = k;
	ls->stage = (int)a->round;
	free(path);
}

/* The second phase of a round: NICs and public IPs. */
static void
poll_phase2(struct sm_adapter *a)
{
	a->phase = 2;
	poll_list(a, K_NIC);
	poll_list(a, K_PIP);
}

/*
 * One round of shared listings for every machine waiting: the VMs first
 * (when a machine waits for a VM), then the NICs and public IPs (when a
 * machine waits for them, or a VM listed in the first phase is up), so a
 * VM seen up has its addresses read in the same round.
 */
static void
poll_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sm_adapter *a = arg;
	struct amachine *am;
	int vm = 0;

	(void)fd;
	(void)what;
	if (a->npoll > 0 || TAILQ_EMPTY(&a->waiting))
		return;
	if (poll_pace(a) > 0.001) { /* the pace moved later meanwhile */
		poll_schedule(a, AZ_PACE);
		return;
	}
	a->need_np = 0;
	TAILQ_FOREACH(am, &a->waiting, entry)
	{
		if (am->st == AM_VM || am->st == AM_GONE)
			vm = 1;
		else
			a->need_np = 1;
	}
	a->round++;
	a->polls++;
	a->last_poll = now_s();
	if (vm) {
		a->phase = 1;
		poll_list(a, K_VM);
	} else {
		poll_phase2(a);
	}
}

/* Seconds until the next round of listings is useful (sm_listing_wait:
 * the VMs' expected boots), ARM calls going at `rate` a second. */
static double
poll_pace(struct sm_adapter *a)
{
	double rate = a->env->cfg->rate;

	return sm_listing_wait(a->env, a->last_poll, rate > 0 ? 1 / rate : 0);
}

/* The next round: in seconds after the last one started, or AZ_PACE: when
 * the pace says (re-armed at every ask). */
static void
poll_schedule(struct sm_adapter *a, double in)
{
	if (a->npoll > 0)
		return;
	sm_listing_arm(a->poll_ev, in, now_s() - a->last_poll, in == AZ_PACE ? poll_pace(a) : 0);
}

/* The item of listing kind k whose `key` equals v (case-insensitive, as
 * ARM names and ids are), or NULL; only from a listing new enough for am. */
static const json_t *
find(const struct amachine *am, enum kind k, const char *key, const char *v)
{
	const struct sm_adapter *a = am->a;
	const json_t *it;
	size_t i;

	if (v == NULL)
		return NULL;
	json_array_foreach(a->cur[k], i, it)
	{
		const char *s = jstr(it, key);
		if (s != NULL && strcasecmp(s, v) == 0)
			return it;
	}
	return NULL;
}

/* Go on to st with the listings of the round in hand (they were taken
 * after the one that moved the machine on). */
static void
same_round(struct amachine *am, enum am_state st)
{
	am->st = st;
	am->m.state = am_names[st];
}

static int
fresh(const struct amachine *am, enum kind k)
{
	return am->a->data_round[k] >= am->min_round && am->a->cur[k] != NULL;
}

/* ---- the subnet ---- */

static void
subnet_done(const struct az_result *r, void *arg)
{
	struct sm_adapter *a = arg;

	a->subnet_call = NULL;
	if (r->code == NULL && jstr(r->body, "id") != NULL) {
		a->subnet_id = xstrdup(jstr(r->body, "id"));
		log_info("azure %s: subnet %s", a->provider, a->subnet_id);
		return;
	}
	a->subnet_failed_at = now_s();
	/* a network or subnet that does not exist fails launches at once
	 * (upstream's adapter fails to start); anything else is tried again */
	a->subnet_missing = r->status == 404;
	snprintf(a->subnet_error, sizeof(a->subnet_error), "subnet lookup: %s: %s",
		 r->code != NULL ? r->code : "no id", r->message != NULL ? r->message : "");
	log_warn("azure %s: %s", a->provider, a->subnet_error);
}

static void
subnet_lookup(struct sm_adapter *a)
{
	const json_t *net = json_object_get(a->env->provider, "network");
	const char *rg = a->rg, *vnet, *subnet = "default";
	char *path = NULL;

	if (a->subnet_call != NULL || a->subnet_id != NULL)
		return;
	a->subnet_missing = 0;
	if (json_is_string(net)) {
		vnet = json_string_value(net);
	} else {
		rg = np_json_str(net, "resource-group", a->rg);
		vnet = np_json_str(net, "network", NULL);
		subnet = np_json_str(net, "subnet", "default");
	}
	if (vnet == NULL) {
		snprintf(a->subnet_error, sizeof(a->subnet_error),
			 "neither subnet-id nor network is set");
		a->subnet_failed_at = now_s();
		return;
	}
	if (asprintf(&path,
		     "resourceGroups/%s/providers/Microsoft.Network/virtualNetworks/%s/subnets/%s",
		     rg, vnet, subnet) < 0)
		abort();
	a->subnet_call =
	    az_call(a->api, "GET", path, V_SUBNET, NULL, "GET subnets", subnet_done, a);
	free(path);
}

/* ---- SKUs ---- */

static void
skus_done(struct lister *ls, const char *error)
{
	struct sm_adapter *a = ls->a;
	const json_t *s, *loc, *cap;
	size_t i, j, k;

	if (error != NULL) {
		log_warn("azure %s: %s (labels count as 1 instance until the next read)",
			 a->provider, error);
		lister_free(ls);
		return;
	}
	json_array_foreach(ls->items, i, s)
	{
		double vcpus = -1, ram = -1;
		json_array_foreach(json_object_get(s, "capabilities"), k, cap)
		{
			const char *n = jstr(cap, "name"), *v = jstr(cap, "value");
			if (n == NULL || v == NULL)
				continue;
			if (strcmp(n, "vCPUs") == 0)
				vcpus = (double)atoi(v);
			else if (strcmp(n, "MemoryGB") == 0)
				ram = floor(strtod(v, NULL) * 1024);
		}
		json_array_foreach(json_object_get(s, "locations"), j, loc)
		{
			char key[256];
			json_t *q = json_object();
			if (vcpus >= 0)
				json_object_set_new(q, "vcpus", json_real(vcpus));
			if (ram >= 0)
				json_object_set_new(q, "ram", json_real(ram));
			sku_key(jstr(s, "name"), json_string_value(loc), key, sizeof(key));
			json_object_set_new(a->skus, key, q);
		}
	}
	a->skus_known = 1;
	log_info("azure %s: %zu compute SKUs", a->provider, json_array_size(ls->items));
	lister_free(ls);
}

/* ---- create ---- */

static char *
gen_password(void)
{
	static const char set[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	unsigned char rnd[64];
	char *pw = malloc(65);
	FILE *f;
	int i, lo, up, dg;

	if (pw == NULL)
		abort();
	for (;;) {
		f = fopen("/dev/urandom", "rb");
		if (f == NULL || fread(rnd, 1, sizeof(rnd), f) != sizeof(rnd))
			for (i = 0; i < 64; i++)
				rnd[i] = (unsigned char)rand();
		if (f != NULL)
			fclose(f);
		lo = up = dg = 0;
		for (i = 0; i < 64; i++) {
			/* 248 = 4 * 62: no modulo bias */
			while (rnd[i] >= 248)
				rnd[i] = (unsigned char)rand();
			pw[i] = set[rnd[i] % 62];
			lo |= islower((unsigned char)pw[i]) != 0;
			up |= isupper((unsigned char)pw[i]) != 0;
			dg |= isdigit((unsigned char)pw[i]) != 0;
		}
		pw[64] = '\0';
		if (lo && up && dg)
			return pw;
	}
}

/* upstream's make_ip_config */
static json_t *
ip_config(const char *name, const char *version, const char *subnet, int pip)
{
	char buf[300];
	json_t *c;

	snprintf(buf, sizeof(buf), "%s-config", name);
	c = json_pack("{s:s, s:{s:s, s:{s:s}}}", "name", buf, "properties",
		      "privateIPAddressVersion", version, "subnet", "id", subnet);
	if (pip) {
		snprintf(buf, sizeof(buf), "%s-ip", name);
		json_object_set_new(
		    json_object_get(c, "properties"), "publicIPAddressConfiguration",
		    json_pack("{s:s, s:{s:s, s:s}, s:{s:s}}", "name", buf, "properties",
			      "deleteOption", "Delete", "publicIPAllocationMethod", "Static", "sku",
			      "name", "Standard"));
	}
	return c;
}

/* The VM's PUT body (upstream's _createVirtualMachine). */
static json_t *
vm_spec(struct amachine *am)
{
	struct sm_adapter *a = am->a;
	const struct sm_label *l = am->label;
	const struct sm_image *img = l->image;
	const json_t *iraw = img != NULL ? img->raw : NULL;
	const char *hostname = am->m.external_id;
	const char *key = np_json_str(iraw, "key", NULL), *user, *pw;
	json_t *os = json_pack("{s:s}", "computerName", hostname);
	json_t *disk =
	    json_pack("{s:s, s:s}", "createOption", "FromImage", "deleteOption", "Delete");
	json_t *ipcs = json_array(), *spec;
	int v4, v6, pub4, pub6;
	char name[300];

	if (key == NULL && img != NULL && !img->diskimage)
		key = np_json_str(a->env->provider, "zuul-public-key", NULL);
	user = img != NULL ? img->username : NULL;
	if (user == NULL && img != NULL && img->diskimage)
		user = "zuul"; /* the diskimage's username default */
	if (key != NULL) {
		char path[512];
		snprintf(path, sizeof(path), "/home/%s/.ssh/authorized_keys",
			 user != NULL ? user : "");
		json_object_set_new(os, "linuxConfiguration",
				    json_pack("{s:{s:[{s:s, s:s}]}, s:b}", "ssh", "publicKeys",
					      "path", path, "keyData", key,
					      "disablePasswordAuthentication", 1));
	}
	if (user != NULL)
		json_object_set_new(os, "adminUsername", json_string(user));
	pw = np_json_str(iraw, "password", NULL);
	if (pw != NULL)
		json_object_set_new(os, "adminPassword", json_string(pw));
	else if (np_json_bool(iraw, "generate-password", 0)) {
		char *g = gen_password();
		json_object_set_new(os, "adminPassword", json_string(g));
		free(g);
	}
	if (json_is_string(lraw(l, "custom-data")) && *json_string_value(lraw(l, "custom-data"))) {
		const char *s = json_string_value(lraw(l, "custom-data"));
		char *b = az_base64(s, strlen(s));
		json_object_set_new(os, "customData", json_string(b));
		free(b);
	}
	if (json_is_integer(lraw(l, "volume-size")))
		json_object_set_new(disk, "diskSizeGB",
				    json_integer(json_integer_value(lraw(l, "volume-size"))));
	pool_ips(a, l->pool, &v4, &v6, &pub4, &pub6);
	if (v4) {
		snprintf(name, sizeof(name), "%s-v4", hostname);
		json_array_append_new(ipcs, ip_config(name, "IPv4", a->subnet_id, pub4));
	}
	if (v6) {
		snprintf(name, sizeof(name), "%s-v6", hostname);
		json_array_append_new(ipcs, ip_config(name, "IPv6", a->subnet_id, pub6));
	}
	snprintf(name, sizeof(name), "%s-nic", hostname);
	spec = json_pack(
	    "{s:s, s:O, s:{s:o, s:{s:s}, s:{s:O, s:o}, s:{s:s, s:[{s:s, s:{s:s, s:o}}]}}}",
	    "location", a->location, "tags", am->tags, "properties", "osProfile", os,
	    "hardwareProfile", "vmSize",
	    np_json_str(json_object_get(l->raw, "hardware-profile"), "vm-size", ""),
	    "storageProfile", "imageReference", am->image_ref, "osDisk", disk, "networkProfile",
	    "networkApiVersion", V_NET, "networkInterfaceConfigurations", "name", name,
	    "properties", "deleteOption", "Delete", "ipConfigurations", ipcs);
	if (spec == NULL)
		abort();
	if (json_is_string(lraw(l, "user-data")) && *json_string_value(lraw(l, "user-data"))) {
		const char *s = json_string_value(lraw(l, "user-data"));
		char *b = az_base64(s, strlen(s));
		json_object_set_new(json_object_get(spec, "properties"), "userData",
				    json_string(b));
		free(b);
	}
	return spec;
}

/* A quota refusal: ARM answers 409 OperationNotAllowed naming the quota
 * ("... results in exceeding approved standardBSFamily Cores quota"). */
static int
is_quota(const char *code, const char *msg)
{
	if (code == NULL)
		return 0;
	if (strcasestr(code, "QuotaExceeded") != NULL)
		return 1;
	return strcmp(code, "OperationNotAllowed") == 0 && msg != NULL &&
	       strcasestr(msg, "quota") != NULL;
}

static void
submit_done(const struct az_result *r, void *arg)
{
	struct amachine *am = arg;

	am->call = NULL;
	if (r->code != NULL) {
		am->st = AM_FAILED;
		am->m.state = am_names[AM_FAILED];
		am->m.error = is_quota(r->code, r->message) ? SM_E_QUOTA : SM_E_FAILED;
		snprintf(am->m.error_msg, sizeof(am->m.error_msg), "create VM %s: %s: %s",
			 am->m.external_id, r->code, r->message);
		machine_wake(am);
		return;
	}
	am->a->launched++;
	json_decref(am->vm);
	am->vm = json_incref(r->body);
	am->since = now_s();
	wait_on_poll(am, AM_VM);
}

static void
submit(struct amachine *am)
{
	json_t *spec = vm_spec(am);
	char *path =
	    rg_path(am->a, "providers/Microsoft.Compute/virtualMachines", am->m.external_id);

	am->st = AM_SUBMIT;
	am->m.state = am_names[AM_SUBMIT];
	am->call =
	    az_call(am->a->api, "PUT", path, V_VM, spec, "PUT virtualMachines", submit_done, am);
	free(path);
	json_decref(spec);
}

static void
dimage_done(const struct az_result *r, void *arg)
{
	struct amachine *am = arg;

	am->call = NULL;
	if (r->code != NULL || jstr(r->body, "id") == NULL) {
		am->st = AM_FAILED;
		am->m.state = am_names[AM_FAILED];
		am->m.error = SM_E_FAILED;
		snprintf(am->m.error_msg, sizeof(am->m.error_msg), "image %s: %s: %s",
			 am->image_upload, r->code != NULL ? r->code : "no id",
			 r->message != NULL ? r->message : "");
	} else {
		json_object_set_new(am->a->dimages, am->image_upload,
				    json_string(jstr(r->body, "id")));
		am->st = AM_START;
		am->m.state = am_names[AM_START];
	}
	machine_wake(am);
}

static void
images_done(struct lister *ls, const char *error)
{
	struct sm_adapter *a = ls->a;
	struct amachine *am = ls->arg;

	a->images_listing = 0;
	am->call = NULL;
	if (error != NULL) {
		log_warn("azure %s: %s", a->provider, error);
		am->st = AM_FAILED;
		am->m.state = am_names[AM_FAILED];
		am->m.error = SM_E_FAILED;
		snprintf(am->m.error_msg, sizeof(am->m.error_msg), "%s", error);
	} else {
		json_decref(a->images);
		a->images = json_incref(ls->items);
		a->images_at = now_s();
		am->st = AM_START;
		am->m.state = am_names[AM_START];
	}
	/* ls->call is NULL here: the lister is freed below, not cancelled */
	lister_free(ls);
	machine_wake(am);
}

static int
name_cmp(const void *x, const void *y)
{
	const json_t *const *p = x, *const *q = y;
	const char *a = jstr(*p, "name"), *b = jstr(*q, "name");
	return strcmp(a != NULL ? a : "", b != NULL ? b : "");
}

/* upstream's _getImageFromFilter: Succeeded images matching name,
 * location and tags; the last by name. NULL when none. */
static const char *
image_from_filter(const struct sm_adapter *a, const json_t *filter)
{
	const json_t *it, *want_tags = json_object_get(filter, "tags");
	const char *name = jstr(filter, "name"), *loc = jstr(filter, "location");
	const json_t **v = calloc(json_array_size(a->images) + 1, sizeof(*v));
	const char *best = NULL;
	size_t i, n = 0;

	if (v == NULL)
		abort();
	json_array_foreach(a->images, i, it)
	{
		const char *k;
		const json_t *tv;
		int ok = strcmp(prov_state(it), "Succeeded") == 0;
		if (ok && name != NULL)
			ok = jstr(it, "name") != NULL && strcmp(jstr(it, "name"), name) == 0;
		if (ok && loc != NULL)
			ok = jstr(it, "location") != NULL && strcmp(jstr(it, "location"), loc) == 0;
		json_object_foreach((json_t *)want_tags, k, tv)
		{
			const json_t *have = json_object_get(json_object_get(it, "tags"), k);
			if (ok && !json_equal((json_t *)have, (json_t *)tv))
				ok = 0;
		}
		if (ok)
			v[n++] = it;
	}
	if (n > 0) {
		qsort(v, n, sizeof(*v), name_cmp);
		best = jstr(v[n - 1], "id");
	}
	free(v);
	return best;
}

static json_t *
gallery_ref(const json_t *g, const char *kind, const char *key)
{
	char buf[1024];
	int n = snprintf(buf, sizeof(buf), "/%s/%s/Images/%s", kind,
			 np_json_str(g, "gallery-name", ""), np_json_str(g, "name", ""));

	if (jstr(g, "version") != NULL)
		snprintf(buf + n, sizeof(buf) - (size_t)n, "/Versions/%s", jstr(g, "version"));
	return json_pack("{s:s}", key, buf);
}

/* Work out the image reference; 1 when known, 0 when a call was started
 * (or the machine failed). */
static int
resolve_image(struct amachine *am)
{
	struct sm_adapter *a = am->a;
	const struct sm_label *l = am->label;
	const json_t *raw = l->image != NULL ? l->image->raw : NULL, *f;

	if (am->image_ref != NULL)
		return 1;
	if (am->image_upload != NULL) {
		const char *id = json_string_value(json_object_get(a->dimages, am->image_upload));
		char *path;
		if (id != NULL) {
			am->image_ref = json_pack("{s:s}", "id", id);
			return 1;
		}
		path = rg_path(a, "providers/Microsoft.Compute/images", am->image_upload);
		am->st = AM_IMAGE;
		am->m.state = am_names[AM_IMAGE];
		am->call =
		    az_call(a->api, "GET", path, V_IMAGE, NULL, "GET images", dimage_done, am);
		free(path);
		return 0;
	}
	if ((f = json_object_get(raw, "image-filter")) != NULL) {
		const char *id;
		if (a->images == NULL || now_s() - a->images_at > AZ_IMAGE_TTL) {
			char *path;
			if (a->images_listing) {
				am->m.retry_in = 0.2; /* another machine's listing */
				return 0;
			}
			path = rg_path(a, "providers/Microsoft.Compute/images", NULL);
			a->images_listing = 1;
			am->st = AM_IMAGE;
			am->m.state = am_names[AM_IMAGE];
			lister_start(a, path, V_IMAGE, "GET images", images_done, NULL, am);
			free(path);
			return 0;
		}
		id = image_from_filter(a, f);
		if (id == NULL) {
			char *fs = json_dumps(f, JSON_COMPACT | JSON_SORT_KEYS);
			am->st = AM_FAILED;
			am->m.error = SM_E_FAILED;
			snprintf(am->m.error_msg, sizeof(am->m.error_msg),
				 "unable to find image matching filter: %s", fs != NULL ? fs : "");
			free(fs);
			return 0;
		}
		am->image_ref = json_pack("{s:s}", "id", id);
		return 1;
	}
	if ((f = json_object_get(raw, "image-reference")) != NULL)
		am->image_ref = json_deep_copy(f);
	else if ((f = json_object_get(raw, "community-gallery-image")) != NULL)
		am->image_ref = gallery_ref(f, "CommunityGalleries", "communityGalleryImageId");
	else if ((f = json_object_get(raw, "shared-gallery-image")) != NULL)
		am->image_ref = gallery_ref(f, "SharedGalleries", "sharedGalleryImageId");
	else
		am->image_ref = json_pack("{s:s}", "id", np_json_str(raw, "image-id", ""));
	return 1;
}

/* The framework's instance from what was listed (upstream's AzureInstance). */
static struct sm_instance *
instance_of(const struct sm_adapter *a, const json_t *vm, const json_t *nic, const json_t *pips)
{
	struct sm_instance *in = sm_instance_new();
	const json_t *c, *p, *tags = json_object_get(vm, "tags"), *zones;
	size_t i;

	sm_set_str(&in->external_id, jstr(vm, "name"));
	if (json_is_object(tags)) {
		json_decref(in->metadata);
		in->metadata = json_deep_copy(tags);
	}
	json_array_foreach(prop(nic, "ipConfigurations"), i, c)
	{
		const char *ver = json_string_value(prop(c, "privateIPAddressVersion"));
		const char *ip = json_string_value(prop(c, "privateIPAddress"));
		if (ver != NULL && strcmp(ver, "IPv4") == 0)
			sm_set_str(&in->private_ipv4, ip);
		else if (ver != NULL && strcmp(ver, "IPv6") == 0)
			sm_set_str(&in->private_ipv6, ip);
	}
	json_array_foreach(pips, i, p)
	{
		const char *ver = json_string_value(prop(p, "publicIPAddressVersion"));
		const char *ip = json_string_value(prop(p, "ipAddress"));
		if (ver != NULL && strcmp(ver, "IPv6") == 0)
			sm_set_str(&in->public_ipv6, ip);
		else
			sm_set_str(&in->public_ipv4, ip);
	}
	sm_set_str(&in->interface_ip, in->public_ipv4 != NULL	 ? in->public_ipv4
				      : in->public_ipv6 != NULL	 ? in->public_ipv6
				      : in->private_ipv4 != NULL ? in->private_ipv4
								 : in->private_ipv6);
	sm_set_str(&in->cloud, "Azure");
	sm_set_str(&in->region, jstr(vm, "location"));
	zones = json_object_get(vm, "zones");
	sm_set_str(&in->az,
		   json_array_size(zones) > 0 ? json_string_value(json_array_get(zones, 0)) : "");
	in->ready = strcmp(prov_state(vm), "Succeeded") == 0;
	in->deleted = strcmp(prov_state(vm), "Deleting") == 0;
	sku_quota(a, json_string_value(json_object_get(prop(vm, "hardwareProfile"), "vmSize")),
		  jstr(vm, "location"), &in->quota);
	return in;
}

static enum sm_status
create_advance(struct sm_machine *m, struct sm_instance **out)
{
	struct amachine *am = (struct amachine *)m;
	struct sm_adapter *a = am->a;
	const json_t *it, *c;
	size_t i;

	m->retry_in = 30; /* we wake the machine when an answer comes */
	switch (am->st) {
	case AM_START:
		if (a->subnet_id == NULL) {
			if (a->subnet_missing && now_s() - a->subnet_failed_at <= AZ_SUBNET_RETRY) {
				m->error = SM_E_FAILED;
				snprintf(m->error_msg, sizeof(m->error_msg), "%s", a->subnet_error);
				return SM_ERROR;
			}
			if (a->subnet_call == NULL &&
			    now_s() - a->subnet_failed_at > AZ_SUBNET_RETRY)
				subnet_lookup(a);
			m->retry_in = 1;
			return SM_AGAIN;
		}
		if (!resolve_image(am))
			return am->st == AM_FAILED ? SM_ERROR : SM_AGAIN;
		submit(am);
		return SM_AGAIN;
	case AM_VM:
		if (!fresh(am, K_VM))
			return SM_AGAIN;
		it = find(am, K_VM, "name", m->external_id);
		if (it == NULL) {
			if (now_s() - am->since > AZ_MISSING_GRACE) {
				m->error = SM_E_FAILED;
				snprintf(m->error_msg, sizeof(m->error_msg), "VM %s disappeared",
					 m->external_id);
				return SM_ERROR;
			}
			wait_on_poll(am, AM_VM);
			return SM_AGAIN;
		}
		json_decref(am->vm);
		am->vm = json_deep_copy(it);
		if (strcmp(prov_state(it), "Failed") == 0) {
			unlist(am);
			m->error = SM_E_FAILED;
			snprintf(m->error_msg, sizeof(m->error_msg), "VM %s in failed state",
				 m->external_id);
			return SM_ERROR;
		}
		if (strcmp(prov_state(it), "Succeeded") != 0) {
			wait_on_poll(am, AM_VM);
			return SM_AGAIN;
		}
		/* the same round's NIC listing came after this VM listing: on */
		same_round(am, AM_NIC);
		/* fall through */
	case AM_NIC: {
		const json_t *nics;
		const char *nic_id;
		int all = 1;
		nics = json_object_get(prop(am->vm, "networkProfile"), "networkInterfaces");
		nic_id = jstr(json_array_get(nics, 0), "id");
		if (!fresh(am, K_NIC))
			return SM_AGAIN;
		it = find(am, K_NIC, "id", nic_id);
		if (it == NULL) {
			wait_on_poll(am, AM_NIC);
			return SM_AGAIN;
		}
		json_array_foreach(prop(it, "ipConfigurations"), i, c)
		{
			if (prop(c, "privateIPAddress") == NULL)
				all = 0;
		}
		if (!all) {
			wait_on_poll(am, AM_NIC);
			return SM_AGAIN;
		}
		json_decref(am->nic);
		am->nic = json_deep_copy(it);
		json_array_clear(am->pip_ids);
		json_array_foreach(prop(it, "ipConfigurations"), i, c)
		{
			const char *pid = jstr(prop(c, "publicIPAddress"), "id");
			if (pid != NULL)
				json_array_append_new(am->pip_ids, json_string(pid));
		}
		if (json_array_size(am->pip_ids) == 0)
			goto complete;
		same_round(am, AM_PIP);
	}
		/* fall through */
	case AM_PIP: {
		const json_t *pid;
		int all = 1;
		if (!fresh(am, K_PIP))
			return SM_AGAIN;
		json_array_clear(am->pips);
		json_array_foreach(am->pip_ids, i, pid)
		{
			it = find(am, K_PIP, "id", json_string_value(pid));
			if (it == NULL || prop(it, "ipAddress") == NULL)
				all = 0;
			else
				json_array_append_new(am->pips, json_deep_copy(it));
		}
		if (!all) {
			wait_on_poll(am, AM_PIP);
			return SM_AGAIN;
		}
		goto complete;
	}
	case AM_FAILED:
		return SM_ERROR;
	default:
		return SM_AGAIN;
	}
complete:
	unlist(am);
	am->st = AM_DONE;
	am->m.state = am_names[AM_DONE];
	am->m.seen_at = a->done_poll; /* the boot estimate's sample */
	*out = instance_of(a, am->vm, am->nic, am->pips);
	return SM_DONE;
}

/* ---- delete ---- */

static void
delete_done(const struct az_result *r, void *arg)
{
	struct amachine *am = arg;

	am->call = NULL;
	if (r->status == 404 || r->status == 204) {
		/* 204: ARM's answer for a resource that does not exist */
		am->st = AM_DONE;
		am->m.error = r->status == 404 ? SM_E_NOTFOUND : SM_E_NONE;
		if (r->status == 404)
			snprintf(am->m.error_msg, sizeof(am->m.error_msg), "VM %s not found",
				 am->m.external_id);
	} else if (r->code != NULL) {
		am->st = AM_FAILED;
		am->m.error = SM_E_FAILED;
		snprintf(am->m.error_msg, sizeof(am->m.error_msg), "delete VM %s: %s: %s",
			 am->m.external_id, r->code, r->message);
	} else {
		am->since = now_s();
		wait_on_poll(am, AM_GONE);
		machine_wake(am);
		return;
	}
	am->m.state = am_names[am->st];
	machine_wake(am);
}

static enum sm_status
delete_advance(struct sm_machine *m, struct sm_instance **out)
{
	struct amachine *am = (struct amachine *)m;

	(void)out;
	m->retry_in = 30;
	switch (am->st) {
	case AM_START: {
		char *path =
		    rg_path(am->a, "providers/Microsoft.Compute/virtualMachines", m->external_id);
		am->st = AM_DELETING;
		am->m.state = am_names[AM_DELETING];
		am->call = az_call(am->a->api, "DELETE", path, V_VM, NULL, "DELETE virtualMachines",
				   delete_done, am);
		free(path);
		return SM_AGAIN;
	}
	case AM_GONE:
		if (!fresh(am, K_VM))
			return SM_AGAIN;
		if (find(am, K_VM, "name", m->external_id) == NULL) {
			unlist(am);
			am->st = AM_DONE;
			return SM_DONE;
		}
		wait_on_poll(am, AM_GONE);
		return SM_AGAIN;
	case AM_DONE:
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

	az_call_cancel(am->call);
	if (am->st == AM_IMAGE && am->image_upload == NULL) {
		/* our image listing: it goes on for the others, without us */
		struct pend *p;
		LIST_FOREACH(p, &am->a->pend, entry)
		if (p->dtor == lister_dtor && ((struct lister *)p)->arg == am) {
			lister_free((struct lister *)p);
			am->a->images_listing = 0;
			break;
		}
	}
	unlist(am);
	json_decref(am->image_ref);
	json_decref(am->tags);
	json_decref(am->vm);
	json_decref(am->nic);
	json_decref(am->pip_ids);
	json_decref(am->pips);
	free(am->image_upload);
	free(m->external_id);
	free(am);
}

static const struct sm_machine_ops create_ops = {create_advance, am_free};
static const struct sm_machine_ops delete_ops = {delete_advance, am_free};

static struct sm_machine *
azure_create_machine(struct sm_adapter *a, const struct sm_create_args *args)
{
	struct amachine *am = calloc(1, sizeof(*am));
	const struct sm_label *l = args->label;
	const json_t *v;
	const char *k;

	if (am == NULL)
		abort();
	am->m.ops = &create_ops;
	am->a = a;
	am->create = 1;
	am->st = AM_START;
	am->m.state = am_names[AM_START];
	am->label = l;
	/* upstream: external_id = hostname, known before the create */
	am->m.external_id = xstrdup(args->hostname);
	am->image_upload =
	    args->image_external_id != NULL ? xstrdup(args->image_external_id) : NULL;
	am->pip_ids = json_array();
	am->pips = json_array();
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
			log_warn("azure %s: error formatting tag %s: %s; left out (as upstream)",
				 a->provider, k, ferr);
		else
			json_object_set_new(am->tags, k, json_string(s));
		free(s);
	}
	/* the nodepool_* metadata, as upstream's StateMachineNodeLauncher
	 * gives it; not the framework's "groups" (upstream's OpenStack
	 * adapter's alone) */
	json_object_foreach((json_t *)args->metadata, k, v)
	{
		if (strcmp(k, "groups") != 0)
			json_object_set_new(am->tags, k, json_incref((json_t *)v));
	}
	return &am->m;
}

static struct sm_machine *
azure_delete_machine(struct sm_adapter *a, const char *external_id)
{
	struct amachine *am = calloc(1, sizeof(*am));

	if (am == NULL)
		abort();
	am->m.ops = &delete_ops;
	am->a = a;
	am->st = AM_START;
	am->m.state = am_names[AM_START];
	am->m.external_id = xstrdup(external_id);
	am->since = now_s();
	return &am->m;
}

/* ---- list_instances ---- */

static void
li_done(struct lister *ls, const char *error)
{
	sm_instances_cb cb = (sm_instances_cb)ls->cb;
	struct sm_instance **v = NULL;
	const json_t *vm;
	size_t i, n = 0;

	if (error != NULL) {
		void *arg = ls->arg;
		char e[640];
		snprintf(e, sizeof(e), "%s", error);
		lister_free(ls);
		cb(NULL, 0, e, arg);
		return;
	}
	v = calloc(json_array_size(ls->items) + 1, sizeof(*v));
	if (v == NULL)
		abort();
	json_array_foreach(ls->items, i, vm) v[n++] = instance_of(ls->a, vm, NULL, NULL);
	cb(v, n, NULL, ls->arg);
	for (i = 0; i < n; i++)
		sm_instance_free(v[i]);
	free(v);
	lister_free(ls);
}

static void
azure_list_instances(struct sm_adapter *a, sm_instances_cb cb, void *arg)
{
	char *path = rg_path(a, kind_path[K_VM], NULL);

	lister_start(a, path, V_VM, "GET virtualMachines", li_done, (void *)cb, arg);
	free(path);
}

/* ---- list_resources (upstream's listResources) ---- */

static const struct {
	const char *type, *path, *version, *what;
} res_kinds[] = {
    {"instance", "providers/Microsoft.Compute/virtualMachines", V_VM, "GET virtualMachines"},
    {"nic", "providers/Microsoft.Network/networkInterfaces", V_NET, "GET networkInterfaces"},
    {"pip", "providers/Microsoft.Network/publicIPAddresses", V_NET, "GET publicIPAddresses"},
    {"disk", "providers/Microsoft.Compute/disks", V_DISK, "GET disks"},
    {"image", "providers/Microsoft.Compute/images", V_IMAGE, "GET images"},
};
#define NRES_KINDS (sizeof(res_kinds) / sizeof(res_kinds[0]))

struct lr_ctx {
	struct pend p;
	struct sm_adapter *a;
	sm_resources_cb cb;
	void *arg;
	size_t stage;
	json_t *keep; /* [{type, id, meta}] */
	struct lister *ls;
};

static void lr_next(struct lr_ctx *c);

static void
lr_dtor(struct pend *p)
{
	struct lr_ctx *c = (struct lr_ctx *)p;

	json_decref(c->keep);
	free(c);
}

static void
lr_finish(struct lr_ctx *c, const char *error)
{
	struct sm_resource *v = calloc(json_array_size(c->keep) + 1, sizeof(*v));
	const json_t *h;
	size_t i;

	if (v == NULL)
		abort();
	LIST_REMOVE(&c->p, entry);
	json_array_foreach(c->keep, i, h) v[i] =
	    (struct sm_resource){res_kinds[json_integer_value(json_object_get(h, "k"))].type,
				 jstr(h, "id"), json_object_get(h, "meta")};
	if (error != NULL)
		c->cb(NULL, 0, error, c->arg);
	else
		c->cb(v, json_array_size(c->keep), NULL, c->arg);
	free(v);
	lr_dtor(&c->p);
}

static void
lr_list_done(struct lister *ls, const char *error)
{
	struct lr_ctx *c = ls->arg;
	const json_t *it;
	size_t i;
	char e[640];

	c->ls = NULL;
	if (error != NULL) {
		snprintf(e, sizeof(e), "%s", error);
		lister_free(ls);
		lr_finish(c, e);
		return;
	}
	json_array_foreach(ls->items, i, it)
	{
		const json_t *tags = json_object_get(it, "tags");
		if (jstr(it, "name") == NULL)
			continue;
		json_array_append_new(c->keep,
				      json_pack("{s:I, s:s, s:O}", "k", (json_int_t)c->stage, "id",
						jstr(it, "name"), "meta",
						json_is_object(tags) ? tags : json_object()));
	}
	lister_free(ls);
	c->stage++;
	lr_next(c);
}

static void
lr_next(struct lr_ctx *c)
{
	char *path;

	if (c->stage == NRES_KINDS) {
		lr_finish(c, NULL);
		return;
	}
	path = rg_path(c->a, res_kinds[c->stage].path, NULL);
	c->ls = lister_start(c->a, path, res_kinds[c->stage].version, res_kinds[c->stage].what,
			     lr_list_done, NULL, c);
	free(path);
}

static void
lr_ctx_dtor(struct pend *p)
{
	lr_dtor(p); /* its lister is a pend of its own */
}

static void
azure_list_resources(struct sm_adapter *a, sm_resources_cb cb, void *arg)
{
	struct lr_ctx *c = calloc(1, sizeof(*c));

	if (c == NULL)
		abort();
	c->p.dtor = lr_ctx_dtor;
	c->a = a;
	c->cb = cb;
	c->arg = arg;
	c->keep = json_array();
	LIST_INSERT_HEAD(&a->pend, &c->p, entry);
	lr_next(c);
}

struct del_ctx {
	struct pend p;
	sm_done_cb cb;
	void *arg;
	struct az_call *call;
};

static void
del_done(const struct az_result *r, void *arg)
{
	struct del_ctx *d = arg;
	int ok = r->code == NULL || r->status == 404;
	char err[640];

	LIST_REMOVE(&d->p, entry);
	if (!ok)
		snprintf(err, sizeof(err), "%s: %s", r->code, r->message);
	d->cb(ok, ok ? NULL : err, d->arg);
	free(d);
}

static void
azure_delete_resource(struct sm_adapter *a, const struct sm_resource *r, sm_done_cb cb, void *arg)
{
	struct del_ctx *d = calloc(1, sizeof(*d));
	char *path, what[64];
	size_t k;

	if (d == NULL)
		abort();
	for (k = 0; k < NRES_KINDS - 1; k++)
		if (strcmp(res_kinds[k].type, r->type) == 0)
			break;
	d->cb = cb;
	d->arg = arg;
	LIST_INSERT_HEAD(&a->pend, &d->p, entry);
	log_info("azure %s: deleting leaked %s %s", a->provider, r->type, r->id);
	path = rg_path(a, res_kinds[k].path, r->id);
	snprintf(what, sizeof(what), "DELETE %s", strrchr(res_kinds[k].path, '/') + 1);
	d->call = az_call(a->api, "DELETE", path, res_kinds[k].version, NULL, what, del_done, d);
	free(path);
}

/* ---- quota ---- */

static void
usages_done(struct lister *ls, const char *error)
{
	sm_quota_cb cb = (sm_quota_cb)ls->cb;
	void *arg = ls->arg;
	struct drv_quota q;
	const json_t *it;
	size_t i;
	char e[640];

	if (error != NULL) {
		snprintf(e, sizeof(e), "%s", error);
		lister_free(ls);
		cb(NULL, e, arg);
		return;
	}
	drv_quota_unlimited(&q);
	json_array_foreach(ls->items, i, it)
	{
		const char *n = jstr(json_object_get(it, "name"), "value");
		const json_t *lim = json_object_get(it, "limit");
		if (n == NULL || !json_is_number(lim))
			continue;
		if (strcmp(n, "cores") == 0)
			q.cores = json_number_value(lim);
		else if (strcmp(n, "virtualMachines") == 0)
			q.instances = json_number_value(lim);
	}
	lister_free(ls);
	cb(&q, NULL, arg);
	drv_quota_clear(&q);
}

static void
azure_quota_limits(struct sm_adapter *a, sm_quota_cb cb, void *arg)
{
	char *path = NULL;

	if (asprintf(&path, "providers/Microsoft.Compute/locations/%s/usages", a->location) < 0)
		abort();
	lister_start(a, path, V_USAGE, "GET usages", usages_done, (void *)cb, arg);
	free(path);
}

static int
azure_label_quota(struct sm_adapter *a, const struct sm_label *label, struct drv_quota *out,
		  char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	drv_quota_clear(out);
	sku_quota(a, np_json_str(json_object_get(label->raw, "hardware-profile"), "vm-size", ""),
		  a->location, out);
	return 0;
}

/* ---- long-running operations (azul.py's wait_for_async_operation) ---- */

/*
 * A call whose answer may name an operation to wait for: its
 * Azure-AsyncOperation (else Location) is polled after each answer's
 * Retry-After (default 2 s, as azul.py) until it is no longer InProgress,
 * at most AZ_ASYNC_TIMEOUT s. done(out, error) gets the operation's
 * answer (status, properties.output...) or, without an operation, the
 * call's own answer (may be NULL); out is borrowed.
 */
struct lro;
typedef void (*lro_done)(struct lro *l, const json_t *out, const char *error);

struct lro {
	struct sm_adapter *a;
	struct az_call *call;
	struct event *ev;
	char *url;
	double started;
	char what[64];
	lro_done done;
};

static void lro_poll_done(const struct az_result *r, void *arg);

static void
lro_timer(evutil_socket_t fd, short what, void *arg)
{
	struct lro *l = arg;

	(void)fd;
	(void)what;
	l->call = az_call(l->a->api, "GET", l->url, NULL, NULL, "GET operation", lro_poll_done, l);
}

static void
lro_wait(struct lro *l, double retry_after)
{
	double in = retry_after >= 0 ? retry_after : 2;
	struct timeval tv = np_tv_of(in);

	if (now_s() - l->started > AZ_ASYNC_TIMEOUT) {
		l->done(l, NULL, "timeout waiting for async operation");
		return;
	}
	if (l->ev == NULL)
		l->ev = evtimer_new(l->a->base, lro_timer, l);
	evtimer_add(l->ev, &tv);
}

static void
lro_poll_done(const struct az_result *r, void *arg)
{
	struct lro *l = arg;
	const char *st = jstr(r->body, "status");
	char err[640];

	l->call = NULL;
	if (r->code != NULL) {
		snprintf(err, sizeof(err), "%s: operation: %s: %s", l->what, r->code, r->message);
		l->done(l, NULL, err);
		return;
	}
	/* the Location form: 202 while running, then the result (or empty) */
	if (r->status == 202 || (st != NULL && strcmp(st, "InProgress") == 0)) {
		lro_wait(l, r->retry_after);
		return;
	}
	if (st != NULL && strcmp(st, "Succeeded") != 0) {
		snprintf(err, sizeof(err), "%s: operation %s", l->what, st);
		l->done(l, NULL, err);
		return;
	}
	l->done(l, r->body, NULL);
}

static void
lro_answer(const struct az_result *r, void *arg)
{
	struct lro *l = arg;
	char err[640];

	l->call = NULL;
	if (r->code != NULL && r->status != 404) {
		snprintf(err, sizeof(err), "%s: %s: %s", l->what, r->code, r->message);
		l->done(l, NULL, err);
		return;
	}
	if (r->code != NULL || r->async_url == NULL) {
		l->done(l, r->code != NULL ? NULL : r->body, r->code != NULL ? "not found" : NULL);
		return;
	}
	free(l->url);
	l->url = xstrdup(r->async_url);
	lro_wait(l, r->retry_after);
}

static void
lro_start(struct lro *l, struct sm_adapter *a, const char *method, const char *path,
	  const char *version, const json_t *body, const char *what, lro_done done)
{
	l->a = a;
	l->done = done;
	l->started = now_s();
	snprintf(l->what, sizeof(l->what), "%s", what);
	l->call = az_call(a->api, method, path, version, body, what, lro_answer, l);
}

static void
lro_clear(struct lro *l)
{
	az_call_cancel(l->call);
	l->call = NULL;
	if (l->ev != NULL)
		event_free(l->ev);
	l->ev = NULL;
	free(l->url);
	l->url = NULL;
}

/* ---- images: delete (upstream's deleteImage) ---- */

struct imgdel {
	struct pend p;
	struct lro l;
	char *name;
	sm_done_cb cb;
	void *arg;
};

static void
imgdel_dtor(struct pend *p)
{
	struct imgdel *d = (struct imgdel *)p;

	lro_clear(&d->l);
	free(d->name);
	free(d);
}

static void
imgdel_done(struct lro *l, const json_t *out, const char *error)
{
	struct imgdel *d = (struct imgdel *)((char *)l - offsetof(struct imgdel, l));

	(void)out;
	if (error != NULL && strcmp(error, "not found") == 0)
		error = NULL; /* already gone */
	LIST_REMOVE(&d->p, entry);
	l->call = NULL;
	if (error == NULL)
		log_info("azure %s: deleted image %s", l->a->provider, d->name);
	d->cb(error == NULL, error, d->arg);
	imgdel_dtor(&d->p);
}

static void
azure_delete_image(struct sm_adapter *a, const char *external_id, sm_done_cb cb, void *arg)
{
	struct imgdel *d = calloc(1, sizeof(*d));
	char *path;

	if (d == NULL)
		abort();
	d->p.dtor = imgdel_dtor;
	d->name = xstrdup(external_id);
	d->cb = cb;
	d->arg = arg;
	LIST_INSERT_HEAD(&a->pend, &d->p, entry);
	path = rg_path(a, "providers/Microsoft.Compute/images", external_id);
	lro_start(&d->l, a, "DELETE", path, V_IMAGE, NULL, "delete image", imgdel_done);
	free(path);
}

/*
 * list_images: the resource group's images (Images - List By Resource
 * Group, GET resourceGroups/<rg>/providers/Microsoft.Compute/images, every
 * page through nextLink), each named by its name (an upload's external id)
 * with its tags.
 */
static void
ilist_done(struct lister *ls, const char *error)
{
	drv_image_list_cb cb = (drv_image_list_cb)ls->cb;
	struct drv_cloud_image *v;
	const json_t *it;
	json_t *none;
	size_t i, n = 0;

	if (error != NULL) {
		char e[640];
		snprintf(e, sizeof(e), "%s", error);
		cb(NULL, 0, e, ls->arg);
		lister_free(ls);
		return;
	}
	v = calloc(json_array_size(ls->items) + 1, sizeof(*v));
	none = json_object(); /* an image without tags */
	if (v == NULL || none == NULL)
		abort();
	json_array_foreach(ls->items, i, it)
	{
		const json_t *tags = json_object_get(it, "tags");
		if (jstr(it, "name") == NULL)
			continue;
		v[n++] = (struct drv_cloud_image){jstr(it, "name"), jstr(it, "name"),
						  json_is_object(tags) ? tags : none};
	}
	cb(v, n, NULL, ls->arg);
	free(v);
	json_decref(none);
	lister_free(ls);
}

static void
azure_list_images(struct sm_adapter *a, drv_image_list_cb cb, void *arg)
{
	char *path = rg_path(a, "providers/Microsoft.Compute/images", NULL);

	lister_start(a, path, V_IMAGE, "GET images", ilist_done, (void *)cb, arg);
	free(path);
}

/* ---- images: upload (upstream's AzureSnapshotUploader) ---- */

#define AZ_PAGE_SIZE	(4u << 20) /* upstream's segment_size: 4 MiB */
#define AZ_PAGE_RETRIES 10	   /* upstream's _upload_chunk attempts */

enum up_step {
	UP_DISK,   /* PUT disks/<name> createOption Upload */
	UP_GRANT,  /* POST beginGetAccess: the SAS URL */
	UP_PAGES,  /* the page writes */
	UP_REVOKE, /* POST endGetAccess */
	UP_IMAGE,  /* PUT images/<name> from the disk */
	UP_DELETE, /* DELETE the disk */
};

struct upload {
	struct pend p;
	struct lro l;
	struct sm_adapter *a;
	enum up_step step;
	char *name, *disk_id, *sas;
	json_t *meta;
	FILE *f;
	long long size, off;
	unsigned char *page;
	size_t page_len;
	int tries;
	struct az_call *page_call;
	struct event *retry_ev;
	sm_upload_cb cb;
	void *arg;
	char err[600];
};

static void up_next(struct upload *u);

static void
up_dtor(struct pend *p)
{
	struct upload *u = (struct upload *)p;

	lro_clear(&u->l);
	az_call_cancel(u->page_call);
	if (u->retry_ev != NULL)
		event_free(u->retry_ev);
	if (u->f != NULL)
		fclose(u->f);
	json_decref(u->meta);
	free(u->page);
	free(u->name);
	free(u->disk_id);
	free(u->sas);
	free(u);
}

static void
up_finish(struct upload *u, const char *error)
{
	LIST_REMOVE(&u->p, entry);
	if (error == NULL)
		log_info("azure %s: uploaded image %s", u->a->provider, u->name);
	u->cb(error == NULL ? u->name : NULL, error, u->arg);
	up_dtor(&u->p);
}

static void
up_lro_done(struct lro *l, const json_t *out, const char *error)
{
	struct upload *u = (struct upload *)((char *)l - offsetof(struct upload, l));
	const json_t *o = json_object_get(json_object_get(out, "properties"), "output");

	lro_clear(l);
	if (error != NULL) {
		up_finish(u, error);
		return;
	}
	switch (u->step) {
	case UP_DISK:
		if (jstr(o, "id") == NULL) {
			up_finish(u, "unable to create disk for image upload");
			return;
		}
		u->disk_id = xstrdup(jstr(o, "id"));
		break;
	case UP_GRANT:
		if (jstr(o, "accessSAS") == NULL) {
			up_finish(u, "unable to begin write access on disk");
			return;
		}
		u->sas = xstrdup(jstr(o, "accessSAS"));
		break;
	default:
		break;
	}
	u->step++;
	up_next(u);
}

static void up_page(struct upload *u);

static void
up_page_retry(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	up_page(arg);
}

static void
up_page_done(const struct az_result *r, void *arg)
{
	struct upload *u = arg;
	char err[640];

	u->page_call = NULL;
	if (r->code != NULL) {
		if (++u->tries < AZ_PAGE_RETRIES) {
			/* upstream: sleep 2 * attempt, then again */
			struct timeval tv = {2 * (u->tries - 1), 0};
			if (u->retry_ev == NULL)
				u->retry_ev = evtimer_new(u->a->base, up_page_retry, u);
			evtimer_add(u->retry_ev, &tv);
			return;
		}
		snprintf(err, sizeof(err), "upload page at %lld: %s (HTTP %d) %s", u->off, r->code,
			 r->status, r->message != NULL ? r->message : "");
		up_finish(u, err);
		return;
	}
	u->off += (long long)u->page_len;
	u->page_len = 0;
	u->tries = 0;
	up_next(u);
}

/* Send the page at u->off (read once, kept for its retries). */
static void
up_page(struct upload *u)
{
	u->page_call =
	    az_blob_put_page(u->a->api, u->sas, u->off, u->page, u->page_len, up_page_done, u);
}

static void
up_next(struct upload *u)
{
	struct sm_adapter *a = u->a;
	json_t *body;
	char *path;

	switch (u->step) {
	case UP_DISK:
		body = json_pack("{s:s, s:O, s:{s:{s:s, s:I}}}", "location", a->location, "tags",
				 u->meta, "properties", "creationData", "createOption", "Upload",
				 "uploadSizeBytes", (json_int_t)u->size);
		path = rg_path(a, "providers/Microsoft.Compute/disks", u->name);
		lro_start(&u->l, a, "PUT", path, V_DISK, body, "create upload disk", up_lro_done);
		break;
	case UP_GRANT:
		body =
		    json_pack("{s:s, s:i}", "access", "Write", "durationInSeconds", 24 * 60 * 60);
		path = rg_path(a, "providers/Microsoft.Compute/disks", u->name);
		path = realloc(path, strlen(path) + 32);
		strcat(path, "/beginGetAccess");
		lro_start(&u->l, a, "POST", path, V_DISK, body, "begin disk access", up_lro_done);
		break;
	case UP_PAGES:
		if (u->off >= u->size) {
			u->step = UP_REVOKE;
			up_next(u);
			return;
		}
		u->page_len = fread(u->page, 1, AZ_PAGE_SIZE, u->f);
		if (u->page_len == 0) {
			up_finish(u, "image file shorter than its size");
			return;
		}
		up_page(u);
		return;
	case UP_REVOKE:
		body = json_object();
		path = rg_path(a, "providers/Microsoft.Compute/disks", u->name);
		path = realloc(path, strlen(path) + 32);
		strcat(path, "/endGetAccess");
		lro_start(&u->l, a, "POST", path, V_DISK, body, "end disk access", up_lro_done);
		break;
	case UP_IMAGE:
		body = json_pack("{s:s, s:O, s:{s:s, s:{s:{s:s, s:{s:s}, s:s}, s:b}}}", "location",
				 a->location, "tags", u->meta, "properties", "hyperVGeneration",
				 "V2", "storageProfile", "osDisk", "osType", "Linux", "managedDisk",
				 "id", u->disk_id, "osState", "Generalized", "zoneResilient", 1);
		path = rg_path(a, "providers/Microsoft.Compute/images", u->name);
		lro_start(&u->l, a, "PUT", path, V_IMAGE, body, "create image", up_lro_done);
		break;
	case UP_DELETE:
		body = NULL;
		path = rg_path(a, "providers/Microsoft.Compute/disks", u->name);
		lro_start(&u->l, a, "DELETE", path, V_DISK, NULL, "delete upload disk",
			  up_lro_done);
		break;
	default:
		up_finish(u, NULL);
		return;
	}
	json_decref(body);
	free(path);
}

static void
up_fail_cb(evutil_socket_t fd, short what, void *arg)
{
	struct upload *u = arg;

	(void)fd;
	(void)what;
	up_finish(u, u->err);
}

static void
azure_upload_image(struct sm_adapter *a, const struct sm_upload_args *ua, sm_upload_cb cb,
		   void *arg)
{
	struct upload *u = calloc(1, sizeof(*u));

	if (u == NULL)
		abort();
	u->p.dtor = up_dtor;
	u->a = a;
	u->name = xstrdup(ua->image_name);
	u->meta = json_deep_copy(ua->metadata != NULL ? ua->metadata : json_object());
	u->cb = cb;
	u->arg = arg;
	u->l.a = a;
	LIST_INSERT_HEAD(&a->pend, &u->p, entry);
	u->f = fopen(ua->filename, "rb");
	if (u->f == NULL || fseeko(u->f, 0, SEEK_END) != 0 || (u->size = ftello(u->f)) < 0 ||
	    fseeko(u->f, 0, SEEK_SET) != 0) {
		struct timeval now = {0, 0};
		snprintf(u->err, sizeof(u->err), "%s: %s", ua->filename, strerror(errno));
		/* the callback comes later, on the loop, as the contract says */
		u->retry_ev = evtimer_new(a->base, up_fail_cb, u);
		evtimer_add(u->retry_ev, &now);
		return;
	}
	u->page = malloc(AZ_PAGE_SIZE);
	if (u->page == NULL)
		abort();
	log_info("azure %s: uploading %s (%lld bytes) as image %s", a->provider, ua->filename,
		 u->size, u->name);
	u->step = UP_DISK;
	up_next(u);
}

/* ---- the adapter ---- */

static struct sm_adapter *
azure_adapter_new(const struct sm_env *env, char *err, size_t errlen)
{
	struct sm_adapter *a;
	struct az_auth auth;
	const json_t *p = env->provider;
	char *path = NULL;

	if (az_auth_load(&auth, np_json_str(p, "auth-path", getenv("AZURE_AUTH_LOCATION")), err,
			 errlen) != 0)
		return NULL;
	a = calloc(1, sizeof(*a));
	if (a == NULL)
		abort();
	LIST_INIT(&a->pend);
	TAILQ_INIT(&a->waiting);
	a->env = env;
	a->base = env->base;
	a->api = az_api_new(env->base, &auth, env->cfg->rate, err, errlen);
	az_auth_clear(&auth);
	if (a->api == NULL) {
		free(a);
		return NULL;
	}
	a->provider = xstrdup(env->provider_name);
	a->rg = xstrdup(np_json_str(p, "resource-group", ""));
	a->location = xstrdup(np_json_str(p, "location", ""));
	a->skus = json_object();
	a->dimages = json_object();
	a->poll_ev = evtimer_new(env->base, poll_cb, a);
	a->subnet_failed_at = -1e9;
	if (np_json_str(p, "subnet-id", NULL) != NULL)
		a->subnet_id = xstrdup(np_json_str(p, "subnet-id", NULL));
	else
		subnet_lookup(a);
	if (asprintf(&path, "providers/Microsoft.Compute/skus") < 0)
		abort();
	lister_start(a, path, V_SKU, "GET skus", skus_done, NULL, NULL);
	free(path);
	return a;
}

static void
azure_adapter_stop(struct sm_adapter *a)
{
	a->stopped = 1;
}

static void
azure_adapter_free(struct sm_adapter *a)
{
	int k;

	az_call_cancel(a->subnet_call);
	while (!LIST_EMPTY(&a->pend)) {
		struct pend *p = LIST_FIRST(&a->pend);
		LIST_REMOVE(p, entry);
		if (p->dtor == lister_dtor)
			az_call_cancel(((struct lister *)p)->call);
		if (p->dtor != NULL)
			p->dtor(p);
		else {
			az_call_cancel(((struct del_ctx *)p)->call);
			free(p);
		}
	}
	az_api_free(a->api);
	event_free(a->poll_ev);
	for (k = 0; k < K_NKINDS; k++)
		json_decref(a->cur[k]);
	json_decref(a->images);
	json_decref(a->dimages);
	json_decref(a->skus);
	free(a->subnet_id);
	free(a->provider);
	free(a->rg);
	free(a->location);
	free(a);
}

static void
azure_dump(struct sm_adapter *a, struct evbuffer *out)
{
	struct amachine *am;
	char *counts = json_dumps(az_api_counts(a->api), JSON_SORT_KEYS | JSON_COMPACT);

	evbuffer_add_printf(out, "azure %s: %llu API calls %s; %llu VMs created, %llu polls\n",
			    a->provider, az_api_total(a->api), counts != NULL ? counts : "{}",
			    a->launched, a->polls);
	free(counts);
	TAILQ_FOREACH(am, &a->waiting, entry)
	evbuffer_add_printf(out, "  %s %s %s\n", am->create ? "create" : "delete",
			    am->m.external_id != NULL ? am->m.external_id : "-", am->m.state);
}

static const struct sm_adapter_ops azure_adapter = {
    .name = "azure",
    .adapter_new = azure_adapter_new,
    .adapter_stop = azure_adapter_stop,
    .adapter_free = azure_adapter_free,
    .create_machine = azure_create_machine,
    .delete_machine = azure_delete_machine,
    .list_instances = azure_list_instances,
    .list_resources = azure_list_resources,
    .delete_resource = azure_delete_resource,
    .quota_limits = azure_quota_limits,
    .label_quota = azure_label_quota,
    .upload_image = azure_upload_image,
    .delete_image = azure_delete_image,
    .list_images = azure_list_images,
    .images_in_resources = 1, /* list_resources lists the images */
    .dump = azure_dump,
};

/* upstream's Azure defaults (AzureProviderConfig.load): boot-timeout 120 s,
 * rate 1 call/s */
static const struct sm_defaults azure_defaults = {
    .boot_timeout = 120,
    .rate = 1,
    .host_key_checking = 1,
};

static struct drv_provider *
azure_provider_new(struct drv_host *lc, char *err, size_t errlen)
{
	return sm_provider_new(&azure_adapter, &azure_defaults, lc, err, errlen);
}

const struct driver drv_azure = {
    .name = "azure",
    .pause_at_quota = 1,
    .reuse_only = 0,
    .provider_new = azure_provider_new,
    .image_format = sm_drv_config_image_format,
    SM_DRIVER_SLOTS,
};
