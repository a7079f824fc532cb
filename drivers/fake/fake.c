/*
 * The `fake` driver: a simulated cloud inside the worker, behind a
 * state-machine Adapter (drivers/statemachine/adapter.h), for tests and
 * for benchmarks of the framework itself. Upstream has a fake driver for
 * its own tests (driver/fake: a fake OpenStack SDK); this one simulates
 * the cloud, not an SDK, and can be told to misbehave.
 *
 * The cloud: servers (instances) with ids ("i-000001"), a name
 * (the hostname "np<node id>"), addresses (public 203.0.113.x, private
 * 10.x.y.z, IPv6 2001:db8::x), the metadata given at create, the label's
 * cores and ram; one volume per server ("vol-000001", same metadata);
 * images uploaded by the builder. Calls to it (create, delete, list,
 * upload, console) are asynchronous: they wait for the provider's `rate`
 * and then answer after `api-delay` seconds (0: on the next loop turn).
 * A server is ACTIVE `boot-delay` seconds after its create (unless a fault
 * says otherwise) and is gone `delete-delay` seconds after its delete.
 * As a real cloud's, a create machine learns its server's status only from
 * a status listing (one call, like OpenStack's GET /servers/detail) shared
 * by every machine waiting, paced by the framework from the servers'
 * expected boot (sm_listing_wait, drivers/statemachine/pace.c); the state
 * file counts them (status_listings).
 *
 * OpenStack's keys (upstream's fake driver is its OpenStack driver against
 * an in-process cloud, so its configs carry them; the schema is
 * lib/config's, nodepool.yaml(5) has the user's view):
 *   cloud                 the nodes' cloud ("fake")
 *   rate                  seconds between calls (0: no limit)
 *   flavor-name, min-ram  the server's size from `flavors` (label_size)
 *   networks              label's, else pool's: recorded on the server; with
 *                         cloud-networks, an unknown one fails the create
 *   security-groups, key-name, userdata, config-drive (of the image)
 *                         recorded on the server
 *   auto-floating-ip      false: no public addresses
 *   boot-from-volume, volume-size (50)
 *                         the server's volume is a boot volume of that many
 *                         GB, in the label's and the instance's quota
 *                         (volumes, volume-gb) and the cloud's `quota`
 *   instance-properties, dynamic-instance-properties
 *                         merged into the server's metadata, as upstream's
 *                         OpenStack adapter (server_metadata)
 *   nodepool-id, clean-floating-ips, port-cleanup-interval
 *                         nothing to act on in this cloud
 *
 * Simulation keys (validated by lib/config; see lib/config/config.h):
 *   boot-delay, delete-delay, api-delay   seconds (0)
 *   failure-rate          0..1 share of servers ending in ERROR while booting
 *   boot-failures         the first N servers end in ERROR (deterministic)
 *   never-ready-rate      0..1 share of servers that stay BUILD forever
 *   create-error-rate     0..1 share of creates refused with an error
 *   quota-error-rate      0..1 share of creates refused with a quota error
 *   quota-errors          the first N creates refused with a quota error
 *   delete-failure-rate   0..1 share of deletes that fail (once per server)
 *   leak-rate             0..1 share of deletes answered "done" while the
 *                         server stays (a leaked instance)
 *   volume-leak-rate      0..1 share of deleted servers leaving their volume
 *   quota                 {instances, cores, ram}: the cloud's limits,
 *                         enforced at create (unlimited)
 *   report-quota          the limits are reported to nodepool (true); false:
 *                         only enforced, so launches run into quota errors
 *   unmanaged-instances   servers of somebody else's from the start (0),
 *                         1 core and 1024 MB each
 *   fake-ssh-port         servers' interface_ip is 127.0.0.1 and their
 *                         connection port this: a real sshd there makes
 *                         the real nodescan path run (host-key-checking)
 * A stored image (image-dir) whose metadata (the upload's tags: the
 * diskimage's metadata and the provider image's meta) has fake-boot:
 * "fail" boots servers that go to ERROR; fake-ssh-port: "N" gives its
 * servers that connection port instead of the cloud's (a port where no
 * sshd answers: keyscan fails), for tests of validation before service.
 *   state-file            path of a JSON picture of the cloud (servers,
 *                         volumes, images, counters, the framework's
 *                         counters) rewritten within 0.25 s of a change
 *                         and every second, for tests ("nothing left
 *                         behind") and benchmarks
 *   seed                  seed of the fault dice (0: random)
 *   instance-id-base      ids are numbered from it (0): fake clouds of one
 *                         provider on several nodepoold instances (each its
 *                         own cloud) then never share an id
 *   cloud-availability-zones
 *                         the zones the cloud has (none): what it reports
 *                         as its AZ list (upstream's Adapter.getAZs, which
 *                         the launcher picks from when a pool names no
 *                         availability-zones); a create naming a zone not
 *                         in it is refused; a server created without a
 *                         zone lands in the first (none: "fake-az-1")
 *   persistent            the cloud outlives the worker: the state-file is
 *                         read back at start (false; see load_state)
 *   image-dir             the cloud's image store, shared by every process
 *                         that has this provider (the launcher and the
 *                         builder's upload workers): an upload streams the
 *                         file into <image-dir>/<id>.<format> (after
 *                         upload-delay) in 1 MiB steps, one per loop
 *                         turn (constant memory),
 *                         checks the sha256 it was given, and writes
 *                         <id>.json (name, format, size, sha256,
 *                         metadata); a delete removes both; a create from
 *                         a diskimage upload whose image is not there is
 *                         refused. Unset: images live in the process.
 *   upload-delay          seconds an upload waits before its data streams (0)
 *   upload-failures       the first N uploads (of this process's adapter)
 *                         fail after upload-delay (deterministic)
 *   image-format          the format this cloud takes (qcow2): what the
 *                         builder builds and uploads for it
 *   flavors               [{name, cores, ram}]: the cloud's flavors
 *                         (upstream's fake cloud's two by default)
 *   cloud-networks        the cloud's networks (none: any name is one)
 * Label keys: cores (1), ram (MB, 1024): the size outright, instead of a
 * flavor; boot-delay, failure-rate (the
 * provider's unless set), console-log, and config-error: a message; the
 * label is one this cloud can never serve as configured (as an AWS
 * instance type the region lacks): label_quota reports the message as a
 * permanent configuration error (upstream's RuntimeConfigurationException
 * from getQuotaForLabel) and every create of it is refused with it.
 */
#include "drivers/statemachine/statemachine.h"

#include <sys/queue.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <openssl/evp.h>

#include "lib/config/jsonget.h"
#include "lib/core/log.h"
#include "lib/net/ratelimit.h"
#include "drivers/statemachine/reqformat.h"
#include "lib/core/clock.h"

#define FAKE_FLUSH_DIRTY 0.25 /* s: state-file rewrite after a change */
#define FAKE_FLUSH_EVERY 1.0  /* s: and at least this often */

enum fstatus { F_BUILD, F_ACTIVE, F_ERROR, F_DELETING };

static const char *const fstatus_names[] = {"BUILD", "ACTIVE", "ERROR", "DELETING"};

struct fserver {
	TAILQ_ENTRY(fserver) entry;
	char id[32];
	char *name;
	enum fstatus status;
	double created;	 /* epoch seconds its create reached the cloud (state-file) */
	double ready_at; /* monotonic: BUILD -> ACTIVE (or ERROR) */
	double gone_at;	 /* monotonic: DELETING -> removed */
	int will_fail, never_ready, unmanaged, delete_failed_once, leak_volume;
	int ssh_port; /* the image's fake-ssh-port, else 0 (the cloud's) */
	json_t *metadata;
	char ipv4[16], priv4[16], ipv6[48];
	char *label, *image, *az;
	int cores, ram;
	char volume[32]; /* "" when none */
	json_t *os;	 /* what the create asked for, as OpenStack keeps it:
			    flavor, networks, security_groups, key_name,
			    config_drive, user_data, boot_from_volume */
};

struct fvolume {
	TAILQ_ENTRY(fvolume) entry;
	char id[32];
	json_t *metadata;
	char server[32]; /* "" when detached */
	long long size;	 /* GB: a boot-from-volume server's boot volume; 0: the
			    simulation's scratch volume, outside volume quota */
};

/* A flavor of the simulated cloud (`flavors`). */
struct fflavor {
	char *name;
	long long cores, ram;
};

struct fimage {
	TAILQ_ENTRY(fimage) entry;
	char id[32];
	char *name;
	json_t *metadata;
};

struct fmachine;
struct sm_adapter;

/* An upload streaming into image-dir, one chunk per loop turn. */
struct fupload {
	TAILQ_ENTRY(fupload) entry;
	struct sm_adapter *f;
	struct event *ev;
	int in, out;
	char id[40];
	char *filename, *name, *format, *sha256, *part;
	json_t *meta;
	EVP_MD_CTX *md;
	long long size;
	int done; /* upload-delay over: streaming */
	sm_upload_cb cb;
	void *arg;
};

/* A call to the simulated API in flight. */
struct fcall {
	TAILQ_ENTRY(fcall) entry;
	struct sm_adapter *f;
	struct fmachine *owner; /* the machine waiting for it, or NULL */
	struct ratelimit_wait *wait;
	struct event *ev;
	double at;		      /* monotonic: the call reached the cloud (its rate grant) */
	void (*run)(struct fcall *c); /* does the work and calls back */
	/* arguments and callback, by kind */
	char *s1, *s2;
	const struct sm_label *label;
	json_t *meta;
	union {
		sm_instances_cb instances;
		sm_resources_cb resources;
		sm_done_cb done;
		sm_quota_cb quota;
		sm_upload_cb upload;
		sm_console_cb console;
	} cb;
	void *arg;
};

struct sm_adapter {
	const struct sm_env *env;
	struct event_base *base;
	struct ratelimit *rl;
	double wall_off; /* the cloud's clock: epoch seconds = np_mono_s() + wall_off */
	TAILQ_HEAD(, fserver) servers;
	TAILQ_HEAD(, fvolume) volumes;
	TAILQ_HEAD(, fimage) images;
	TAILQ_HEAD(, fcall) calls;
	unsigned long long seq;
	uint64_t dice;
	/* config */
	double boot_delay, delete_delay, api_delay;
	double failure_rate, never_ready_rate, create_error_rate, quota_error_rate;
	double delete_failure_rate, leak_rate, volume_leak_rate;
	long long boot_failures, quota_errors;
	double q_instances, q_cores, q_ram; /* INFINITY = unlimited */
	double q_volumes, q_volume_gb;	    /* boot volumes and their GB */
	struct fflavor *flavors;	    /* by ram, then name (as upstream lists them) */
	size_t nflavors;
	struct np_strv networks; /* cloud-networks: none = any name is one */
	const char *cloud;	 /* `cloud`, "fake" */
	int report_quota;
	int ssh_port;
	struct np_strv zones; /* cloud-availability-zones */
	char *state_file;
	char *image_dir;	       /* image-dir, or NULL */
	double upload_delay;	       /* upload-delay */
	long long upload_failures;     /* upload-failures left */
	TAILQ_HEAD(, fupload) uploads; /* streaming into image-dir */
	TAILQ_HEAD(, flist) lists;     /* list_images answers due */
	/* counters */
	unsigned long long creates, create_errors, quota_refusals, boot_errors, deletes,
	    delete_errors, leaked_on_delete, volumes_leaked, listings;
	/* the shared status listing of create machines waiting on a boot */
	TAILQ_HEAD(, fmachine) building;
	struct fcall *poll_call;
	struct event *poll_ev;
	double poll_started, poll_done_started; /* the last started, the newest in */
	unsigned long long poll_seq, poll_done_seq, status_listings;
	int poll_wanted;
	/* state file */
	struct event *flush_ev; /* every FAKE_FLUSH_EVERY */
	struct event *dirty_ev; /* FAKE_FLUSH_DIRTY after a change */
	int dirty;
	int stopped;
};

/* xorshift64*: the fault dice, reproducible from `seed`. */
static double
roll(struct sm_adapter *f)
{
	f->dice ^= f->dice >> 12;
	f->dice ^= f->dice << 25;
	f->dice ^= f->dice >> 27;
	return (double)((f->dice * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

static int
chance(struct sm_adapter *f, double p)
{
	return p > 0 && roll(f) < p;
}

static void
mark_dirty(struct sm_adapter *f)
{
	struct timeval tv = np_tv_of(FAKE_FLUSH_DIRTY);

	f->dirty = 1;
	if (f->dirty_ev != NULL && !event_pending(f->dirty_ev, EV_TIMEOUT, NULL))
		event_add(f->dirty_ev, &tv);
}

/* ---- the cloud's database ------------------------------------------------------ */

static struct fserver *
server_get(struct sm_adapter *f, const char *id)
{
	struct fserver *s;

	TAILQ_FOREACH(s, &f->servers, entry)
	if (strcmp(s->id, id) == 0)
		return s;
	return NULL;
}

static struct fvolume *
volume_get(struct sm_adapter *f, const char *id)
{
	struct fvolume *v;

	TAILQ_FOREACH(v, &f->volumes, entry)
	if (strcmp(v->id, id) == 0)
		return v;
	return NULL;
}

static void
volume_remove(struct sm_adapter *f, struct fvolume *v)
{
	TAILQ_REMOVE(&f->volumes, v, entry);
	json_decref(v->metadata);
	free(v);
	mark_dirty(f);
}

static void
server_remove(struct sm_adapter *f, struct fserver *s)
{
	struct fvolume *v = s->volume[0] ? volume_get(f, s->volume) : NULL;

	if (v != NULL) {
		if (s->leak_volume) {
			v->server[0] = '\0'; /* detached, left behind */
			f->volumes_leaked++;
		} else
			volume_remove(f, v);
	}
	TAILQ_REMOVE(&f->servers, s, entry);
	json_decref(s->metadata);
	json_decref(s->os);
	free(s->name);
	free(s->label);
	free(s->image);
	free(s->az);
	free(s);
	mark_dirty(f);
}

/* Time passes: servers boot and finish deleting. */
static void
settle(struct sm_adapter *f)
{
	struct fserver *s, *next;
	double now = np_mono_s();

	for (s = TAILQ_FIRST(&f->servers); s != NULL; s = next) {
		next = TAILQ_NEXT(s, entry);
		if (s->status == F_BUILD && !s->never_ready && now >= s->ready_at) {
			s->status = s->will_fail ? F_ERROR : F_ACTIVE;
			if (s->will_fail)
				f->boot_errors++;
			mark_dirty(f);
		} else if (s->status == F_DELETING && now >= s->gone_at) {
			server_remove(f, s);
		}
	}
}

/* ---- what a label asks of the cloud: its OpenStack keys ------------------------------- */

static int
flavor_cmp(const void *pa, const void *pb)
{
	const struct fflavor *a = pa, *b = pb;

	if (a->ram != b->ram)
		return a->ram < b->ram ? -1 : 1;
	return strcmp(a->name, b->name);
}

/*
 * The size of a server of this label (raw: the pool label's config), as
 * upstream's OpenStack adapter picks a flavor (_findFlavor): with min-ram,
 * the first flavor (by ram, then name) with at least that much ram whose
 * name contains flavor-name when that is set too; with flavor-name alone,
 * the flavor of that name. The fake's own cores/ram keys, when set, give
 * the size outright (no flavor is looked up; flavor-name is kept as the
 * flavor's name). A label with none of these: 1 core, 1024 MB, no flavor.
 * Returns -1 with upstream's message in err when no flavor fits, or with
 * the label's config-error; *flavor then is NULL.
 */
static int
label_size(const struct sm_adapter *f, const json_t *raw, long long *cores, long long *ram,
	   const char **flavor, char *err, size_t errlen)
{
	const char *bad = json_string_value(json_object_get(raw, "config-error"));
	const char *fname = json_string_value(json_object_get(raw, "flavor-name"));
	long long min_ram = (long long)np_json_num(raw, "min-ram", 0);
	size_t i;

	*cores = 1;
	*ram = 1024;
	*flavor = NULL;
	if (bad != NULL) {
		snprintf(err, errlen, "%s", bad);
		return -1;
	}
	if (json_object_get(raw, "cores") != NULL || json_object_get(raw, "ram") != NULL) {
		*cores = (long long)np_json_num(raw, "cores", 1);
		*ram = (long long)np_json_num(raw, "ram", 1024);
		*flavor = fname;
		return 0;
	}
	if (min_ram <= 0 && fname == NULL)
		return 0;
	for (i = 0; i < f->nflavors; i++) {
		const struct fflavor *fl = &f->flavors[i];

		if (min_ram > 0 ? fl->ram >= min_ram && (fname == NULL || strstr(fl->name, fname))
				: strcmp(fl->name, fname) == 0) {
			*cores = fl->cores;
			*ram = fl->ram;
			*flavor = fl->name;
			return 0;
		}
	}
	if (min_ram > 0)
		snprintf(err, errlen, "Unable to find flavor with min ram: %lld", min_ram);
	else
		snprintf(err, errlen, "Unable to find flavor: %s", fname);
	return -1;
}

/* The label's boot volume in GB (boot-from-volume; volume-size, 50), or 0. */
static long long
label_boot_volume(const json_t *raw)
{
	if (!np_json_bool(raw, "boot-from-volume", 0))
		return 0;
	return (long long)np_json_num(raw, "volume-size", 50);
}

/* The networks a server of the label is attached to: the label's, else its
 * pool's (as upstream's ProviderLabel.networks); borrowed, may be NULL. */
static const json_t *
label_networks(const struct sm_label *l)
{
	const json_t *n = json_object_get(l->raw, "networks");

	return n != NULL ? n : json_object_get(l->pool->raw, "networks");
}

/* NULL, or why the cloud refuses the label's networks (upstream's
 * _findNetwork error) when the cloud names its own (cloud-networks). */
static const char *
networks_missing(const struct sm_adapter *f, const struct sm_label *l, char *msg, size_t len)
{
	const json_t *v;
	size_t i;

	if (f->networks.n == 0)
		return NULL;
	json_array_foreach(label_networks(l), i, v)
	{
		if (json_is_string(v) && !np_strv_contains(&f->networks, json_string_value(v))) {
			snprintf(msg, len, "Unable to find network %s in provider %s",
				 json_string_value(v), f->env->provider_name);
			return msg;
		}
	}
	return NULL;
}

/* The OpenStack attributes a create records on the server. */
static json_t *
server_os(const struct sm_adapter *f, const struct sm_label *l, const char *flavor)
{
	const json_t *nets = label_networks(l),
		     *sg = json_object_get(l->pool->raw, "security-groups");
	const json_t *cd = l->image != NULL ? json_object_get(l->image->raw, "config-drive") : NULL;
	const char *ud = json_string_value(json_object_get(l->raw, "userdata"));
	const char *key = json_string_value(json_object_get(l->raw, "key-name"));

	(void)f;
	return json_pack("{s:s?, s:o, s:o, s:s?, s:o, s:s?, s:b}", "flavor", flavor, "networks",
			 json_is_array(nets) ? json_deep_copy(nets) : json_array(),
			 "security_groups", json_is_array(sg) ? json_deep_copy(sg) : json_array(),
			 "key_name", key, "config_drive",
			 json_is_boolean(cd) ? json_deep_copy(cd) : json_null(), "user_data", ud,
			 "boot_from_volume", label_boot_volume(l->raw) > 0);
}

static json_t *image_metadata(struct sm_adapter *f, const char *id);

/* A server the cloud made on a create that reached it at `at` (monotonic):
 * created then, on the cloud's clock. */
static struct fserver *
server_new(struct sm_adapter *f, double at, const char *name, const struct sm_label *label,
	   const char *image, const json_t *meta, const char *az)
{
	struct fserver *s = calloc(1, sizeof(*s));
	struct fvolume *v = calloc(1, sizeof(*v));
	unsigned long long n = ++f->seq;
	double boot = f->boot_delay, frate = f->failure_rate;

	if (s == NULL || v == NULL)
		abort();
	snprintf(s->id, sizeof(s->id), "i-%06llu", n);
	s->name = strdup(name);
	s->metadata = meta != NULL ? json_deep_copy(meta) : json_object();
	snprintf(s->ipv4, sizeof(s->ipv4), "203.0.113.%llu", n % 254 + 1);
	snprintf(s->priv4, sizeof(s->priv4), "10.%llu.%llu.%llu", (n >> 16) & 255, (n >> 8) & 255,
		 n & 255);
	snprintf(s->ipv6, sizeof(s->ipv6), "2001:db8::%llx", n);
	s->cores = 1;
	s->ram = 1024;
	if (label != NULL) {
		long long cores, ram;
		const char *flavor;
		char err[8];

		(void)label_size(f, label->raw, &cores, &ram, &flavor, err, sizeof(err));
		s->label = strdup(label->name);
		s->cores = (int)cores;
		s->ram = (int)ram;
		s->os = server_os(f, label, flavor);
		v->size = label_boot_volume(label->raw);
		if (!np_json_bool(label->pool->raw, "auto-floating-ip", 1)) {
			/* no floating IP: only the private address (upstream's
			 * fake cloud on its no-auto-ip network) */
			s->ipv4[0] = '\0';
			s->ipv6[0] = '\0';
		}
		boot = np_json_num(label->raw, "boot-delay", boot);
		frate = np_json_num(label->raw, "failure-rate", frate);
	}
	s->image = image != NULL ? strdup(image) : NULL;
	s->az = strdup(az != NULL ? az : f->zones.n > 0 ? f->zones.v[0] : "fake-az-1");
	/* the moment `rate` let the create go, not when this runs (a loop turn
	 * and api-delay later): what the provider's rate spaces */
	s->created = at + f->wall_off;
	s->ready_at = np_mono_s() + boot;
	if (f->boot_failures > 0) {
		f->boot_failures--;
		s->will_fail = 1;
	} else
		s->will_fail = chance(f, frate);
	{
		json_t *im = image_metadata(f, image);
		const char *fb = json_string_value(json_object_get(im, "fake-boot"));
		const char *sp = json_string_value(json_object_get(im, "fake-ssh-port"));

		if (fb != NULL && strcmp(fb, "fail") == 0)
			s->will_fail = 1;
		if (sp != NULL)
			s->ssh_port = atoi(sp);
		json_decref(im);
	}
	s->never_ready = chance(f, f->never_ready_rate);
	s->status = F_BUILD;
	snprintf(v->id, sizeof(v->id), "vol-%06llu", n);
	v->metadata = json_deep_copy(s->metadata);
	snprintf(v->server, sizeof(v->server), "%s", s->id);
	snprintf(s->volume, sizeof(s->volume), "%s", v->id);
	TAILQ_INSERT_TAIL(&f->servers, s, entry);
	TAILQ_INSERT_TAIL(&f->volumes, v, entry);
	mark_dirty(f);
	return s;
}

static struct sm_instance *
server_instance(struct sm_adapter *f, const struct fserver *s)
{
	struct sm_instance *i = sm_instance_new();
	const struct fvolume *v;

	sm_set_str(&i->external_id, s->id);
	i->ready = s->status == F_ACTIVE;
	i->deleted = s->status == F_DELETING;
	sm_set_str(&i->public_ipv4, s->ipv4);
	sm_set_str(&i->private_ipv4, s->priv4);
	sm_set_str(&i->public_ipv6, s->ipv6);
	if (s->ssh_port > 0 || f->ssh_port > 0) {
		sm_set_str(&i->interface_ip, "127.0.0.1");
		i->connection_port = s->ssh_port > 0 ? s->ssh_port : f->ssh_port;
	} else
		sm_set_str(&i->interface_ip, s->ipv4[0] ? s->ipv4 : s->priv4);
	sm_set_str(&i->cloud, f->cloud);
	sm_set_str(&i->region, json_string_value(json_object_get(f->env->provider, "region-name")));
	sm_set_str(&i->az, s->az);
	sm_set_str(&i->host_id, "fake-host-1");
	json_decref(i->metadata);
	i->metadata = json_deep_copy(s->metadata);
	drv_quota_init(&i->quota, s->cores, 1, s->ram);
	if ((v = s->volume[0] ? volume_get(f, s->volume) : NULL) != NULL && v->size > 0)
		i->quota.extra =
		    json_pack("{s:i, s:I}", "volumes", 1, "volume-gb", (json_int_t)v->size);
	return i;
}

/* Is there room for one more server of this size? (limits count every
 * server, deleting ones included, as a real cloud's usage does) */
static const char *
over_quota(struct sm_adapter *f, int cores, int ram, long long volume_gb)
{
	static char msg[160];
	const struct fserver *s;
	const struct fvolume *v;
	double n = 0, c = 0, r = 0, nv = 0, gb = 0;

	TAILQ_FOREACH(s, &f->servers, entry)
	{
		n += 1;
		c += s->cores;
		r += s->ram;
	}
	TAILQ_FOREACH(v, &f->volumes, entry)
	{
		nv += v->size > 0;
		gb += (double)v->size;
	}
	if (n + 1 > f->q_instances)
		snprintf(msg, sizeof(msg),
			 "Quota exceeded for instances: Requested 1, but already "
			 "used %.0f of %.0f instances",
			 n, f->q_instances);
	else if (c + cores > f->q_cores)
		snprintf(msg, sizeof(msg),
			 "Quota exceeded for cores: Requested %d, but already "
			 "used %.0f of %.0f cores",
			 cores, c, f->q_cores);
	else if (r + ram > f->q_ram)
		snprintf(msg, sizeof(msg),
			 "Quota exceeded for ram: Requested %d, but already used "
			 "%.0f of %.0f ram",
			 ram, r, f->q_ram);
	else if (volume_gb > 0 && nv + 1 > f->q_volumes)
		snprintf(msg, sizeof(msg),
			 "Quota exceeded for volumes: Requested 1, but already used "
			 "%.0f of %.0f volumes",
			 nv, f->q_volumes);
	else if (volume_gb > 0 && gb + (double)volume_gb > f->q_volume_gb)
		snprintf(msg, sizeof(msg),
			 "Quota exceeded for gigabytes: Requested %lld, but already used "
			 "%.0f of %.0f gigabytes",
			 volume_gb, gb, f->q_volume_gb);
	else
		return NULL;
	return msg;
}

/* ---- the state file ------------------------------------------------------------------ */

static json_t *
cloud_json(struct sm_adapter *f)
{
	json_t *o = json_object(), *a = json_array(), *vols = json_array(), *imgs = json_array();
	const struct fserver *s;
	const struct fvolume *v;
	const struct fimage *im;

	TAILQ_FOREACH(s, &f->servers, entry)
	{
		json_t *e = json_pack(
		    "{s:s, s:s, s:s, s:O, s:s?, s:s?, s:s, s:s, s:s, s:s, s:i, s:i, s:b, s:f}",
		    "id", s->id, "name", s->name, "status", fstatus_names[s->status], "metadata",
		    s->metadata, "label", s->label, "image", s->image, "az", s->az, "public_ipv4",
		    s->ipv4, "private_ipv4", s->priv4, "public_ipv6", s->ipv6, "cores", s->cores,
		    "ram", s->ram, "unmanaged", s->unmanaged, "created", s->created);

		if (s->os != NULL)
			json_object_update(e, s->os);
		json_array_append_new(a, e);
	}
	TAILQ_FOREACH(v, &f->volumes, entry)
	json_array_append_new(
	    vols, json_pack("{s:s, s:O, s:s?, s:I}", "id", v->id, "metadata", v->metadata, "server",
			    v->server[0] ? v->server : NULL, "size", (json_int_t)v->size));
	TAILQ_FOREACH(im, &f->images, entry)
	json_array_append_new(imgs, json_pack("{s:s, s:s, s:O}", "id", im->id, "name", im->name,
					      "metadata", im->metadata));
	json_object_set_new(o, "provider", json_string(f->env->provider_name));
	json_object_set_new(o, "instances", a);
	json_object_set_new(o, "volumes", vols);
	json_object_set_new(o, "images", imgs);
	json_object_set_new(
	    o, "counters",
	    json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "creates",
		      (json_int_t)f->creates, "create_errors", (json_int_t)f->create_errors,
		      "quota_errors", (json_int_t)f->quota_refusals, "boot_errors",
		      (json_int_t)f->boot_errors, "deletes", (json_int_t)f->deletes,
		      "delete_errors", (json_int_t)f->delete_errors, "leaked_on_delete",
		      (json_int_t)f->leaked_on_delete, "volumes_leaked",
		      (json_int_t)f->volumes_leaked, "listings", (json_int_t)f->listings,
		      "status_listings", (json_int_t)f->status_listings));
	json_object_set(o, "framework", (json_t *)f->env->stats);
	return o;
}

/* Small and local: written from the loop (tests and benchmarks only). */
static void
flush_state(struct sm_adapter *f)
{
	char tmp[4096];
	json_t *o;

	if (f->state_file == NULL)
		return;
	settle(f);
	o = cloud_json(f);
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", f->state_file, (int)getpid());
	if (json_dump_file(o, tmp, JSON_INDENT(1) | JSON_SORT_KEYS) != 0 ||
	    rename(tmp, f->state_file) != 0) {
		log_warn("fake: cannot write state-file %s", f->state_file);
		unlink(tmp);
	}
	json_decref(o);
	f->dirty = 0;
}

static void
flush_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sm_adapter *f = arg;
	struct timeval tv = {(time_t)FAKE_FLUSH_EVERY, 0};

	flush_state(f);
	event_add(f->flush_ev, &tv);
}

static void
dirty_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sm_adapter *f = arg;

	if (f->dirty)
		flush_state(f);
}

/*
 * `persistent`: the cloud outlives the worker, as a real cloud does. At
 * start the state-file's servers, volumes, images and counters are read
 * back, so a worker started after another one died (kill -9) finds what
 * that one left in the cloud, and tests can tell who deleted what. Time
 * in the cloud went on meanwhile: a server in BUILD becomes ACTIVE its
 * (label's or provider's) boot-delay after its creation, one that was
 * being deleted is gone. The fault dice drawn for a server (failure-rate,
 * never-ready-rate, volume-leak-rate) are not kept. A missing file is an
 * empty cloud; an unreadable one too, with a warning. Returns 1 when
 * servers were read (unmanaged-instances then come from the file).
 */
static unsigned long long
id_seq(const char *id)
{
	const char *dash = id != NULL ? strrchr(id, '-') : NULL;

	return dash != NULL ? strtoull(dash + 1, NULL, 10) : 0;
}

static void
copy_id(char *dst, size_t len, const json_t *v)
{
	snprintf(dst, len, "%s", json_is_string(v) ? json_string_value(v) : "");
}

static char *
dup_field(const json_t *o, const char *key)
{
	const char *v = json_string_value(json_object_get(o, key));

	return v != NULL ? strdup(v) : NULL;
}

static int
load_state(struct sm_adapter *f)
{
	json_error_t jerr;
	json_t *o, *a, *e, *c;
	size_t i;
	struct timespec ts;
	double now, boot;
	int servers = 0;

	if (access(f->state_file, F_OK) != 0)
		return 0;
	if ((o = json_load_file(f->state_file, 0, &jerr)) == NULL || !json_is_object(o)) {
		log_warn("fake: state-file %s unreadable (%s): starting with an empty cloud",
			 f->state_file, o == NULL ? jerr.text : "not an object");
		json_decref(o);
		return 0;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	now = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	a = json_object_get(o, "instances");
	json_array_foreach(a, i, e)
	{
		const char *st = json_string_value(json_object_get(e, "status"));
		const struct sm_label *lab;
		struct fserver *s;
		int k;

		if (!json_is_object(e) || !json_is_string(json_object_get(e, "id")) || st == NULL ||
		    strcmp(st, "DELETING") == 0)
			continue;
		if ((s = calloc(1, sizeof(*s))) == NULL)
			abort();
		copy_id(s->id, sizeof(s->id), json_object_get(e, "id"));
		s->name = dup_field(e, "name");
		if (s->name == NULL)
			s->name = strdup(s->id);
		s->status = F_BUILD;
		for (k = 0; k < (int)(sizeof(fstatus_names) / sizeof(fstatus_names[0])); k++)
			if (strcmp(st, fstatus_names[k]) == 0)
				s->status = (enum fstatus)k;
		s->metadata = json_is_object(json_object_get(e, "metadata"))
				  ? json_deep_copy(json_object_get(e, "metadata"))
				  : json_object();
		s->label = dup_field(e, "label");
		s->image = dup_field(e, "image");
		s->az = dup_field(e, "az");
		if (s->az == NULL)
			s->az = strdup("fake-az-1");
		copy_id(s->ipv4, sizeof(s->ipv4), json_object_get(e, "public_ipv4"));
		copy_id(s->priv4, sizeof(s->priv4), json_object_get(e, "private_ipv4"));
		copy_id(s->ipv6, sizeof(s->ipv6), json_object_get(e, "public_ipv6"));
		s->cores = (int)np_json_num(e, "cores", 1);
		s->ram = (int)np_json_num(e, "ram", 1024);
		s->unmanaged = json_is_true(json_object_get(e, "unmanaged"));
		if (json_object_get(e, "networks") != NULL) {
			static const char *const os_keys[] = {
			    "flavor",	    "networks",	 "security_groups",  "key_name",
			    "config_drive", "user_data", "boot_from_volume", NULL};

			s->os = json_object();
			for (k = 0; os_keys[k] != NULL; k++)
				if (json_object_get(e, os_keys[k]) != NULL)
					json_object_set(s->os, os_keys[k],
							json_object_get(e, os_keys[k]));
		}
		s->created = np_json_num(e, "created", now);
		boot = f->boot_delay;
		if (s->label != NULL && (lab = sm_config_any_label(f->env->cfg, s->label)) != NULL)
			boot = np_json_num(lab->raw, "boot-delay", boot);
		s->ready_at = np_mono_s() + fmax(0, s->created + boot - now);
		if (id_seq(s->id) > f->seq)
			f->seq = id_seq(s->id);
		TAILQ_INSERT_TAIL(&f->servers, s, entry);
		servers++;
	}
	a = json_object_get(o, "volumes");
	json_array_foreach(a, i, e)
	{
		struct fvolume *v;
		struct fserver *s;
		const char *server = json_string_value(json_object_get(e, "server"));

		if (!json_is_object(e) || !json_is_string(json_object_get(e, "id")))
			continue;
		if ((v = calloc(1, sizeof(*v))) == NULL)
			abort();
		copy_id(v->id, sizeof(v->id), json_object_get(e, "id"));
		v->size = (long long)np_json_num(e, "size", 0);
		v->metadata = json_is_object(json_object_get(e, "metadata"))
				  ? json_deep_copy(json_object_get(e, "metadata"))
				  : json_object();
		/* attached only to a server that is still there */
		if (server != NULL && (s = server_get(f, server)) != NULL) {
			snprintf(v->server, sizeof(v->server), "%s", s->id);
			snprintf(s->volume, sizeof(s->volume), "%s", v->id);
		}
		if (id_seq(v->id) > f->seq)
			f->seq = id_seq(v->id);
		TAILQ_INSERT_TAIL(&f->volumes, v, entry);
	}
	a = json_object_get(o, "images");
	json_array_foreach(a, i, e)
	{
		struct fimage *im;

		if (!json_is_object(e) || !json_is_string(json_object_get(e, "id")))
			continue;
		if ((im = calloc(1, sizeof(*im))) == NULL)
			abort();
		copy_id(im->id, sizeof(im->id), json_object_get(e, "id"));
		im->name = dup_field(e, "name");
		if (im->name == NULL)
			im->name = strdup(im->id);
		im->metadata = json_is_object(json_object_get(e, "metadata"))
				   ? json_deep_copy(json_object_get(e, "metadata"))
				   : json_object();
		if (id_seq(im->id) > f->seq)
			f->seq = id_seq(im->id);
		TAILQ_INSERT_TAIL(&f->images, im, entry);
	}
	c = json_object_get(o, "counters");
#define LOADC(field, key) f->field = (unsigned long long)np_json_num(c, key, 0)
	LOADC(creates, "creates");
	LOADC(create_errors, "create_errors");
	LOADC(quota_refusals, "quota_errors");
	LOADC(boot_errors, "boot_errors");
	LOADC(deletes, "deletes");
	LOADC(delete_errors, "delete_errors");
	LOADC(leaked_on_delete, "leaked_on_delete");
	LOADC(volumes_leaked, "volumes_leaked");
	LOADC(listings, "listings");
#undef LOADC
	json_decref(o);
	log_info("fake: cloud read back from %s: %d servers", f->state_file, servers);
	return servers > 0;
}

/* ---- calls ---------------------------------------------------------------------------- */

static void
call_free(struct fcall *c)
{
	TAILQ_REMOVE(&c->f->calls, c, entry);
	ratelimit_cancel(c->wait);
	if (c->ev != NULL)
		event_free(c->ev);
	free(c->s1);
	free(c->s2);
	json_decref(c->meta);
	free(c);
}

static void
call_fire(evutil_socket_t fd, short what, void *arg)
{
	struct fcall *c = arg;

	settle(c->f);
	c->run(c);
	call_free(c);
}

static void
call_granted(void *arg)
{
	struct fcall *c = arg;
	struct timeval tv;
	double d = c->f->api_delay;

	c->wait = NULL;
	c->at = ratelimit_last_grant(c->f->rl);
	if (d <= 0) {
		event_active(c->ev, EV_TIMEOUT, 0);
		return;
	}
	tv = np_tv_of(d);
	event_add(c->ev, &tv);
}

static struct fcall *
call_start(struct sm_adapter *f, struct fmachine *owner, void (*run)(struct fcall *), void *arg)
{
	struct fcall *c = calloc(1, sizeof(*c));

	if (c == NULL)
		abort();
	c->f = f;
	c->owner = owner;
	c->run = run;
	c->arg = arg;
	c->ev = event_new(f->base, -1, 0, call_fire, c);
	TAILQ_INSERT_TAIL(&f->calls, c, entry);
	if (ratelimit_take(f->rl, call_granted, c, &c->wait))
		call_granted(c);
	return c;
}

/* ---- machines ---------------------------------------------------------------------------- */

enum fm_state { FM_START, FM_SUBMITTED, FM_BUILDING, FM_DELETING, FM_FAILED };

static const char *const fm_names[] = {"start", "submitted", "building", "deleting", "failed"};

struct fmachine {
	struct sm_machine m; /* first */
	struct sm_adapter *f;
	int create;
	enum fm_state st;
	struct fcall *call; /* in flight */
	/* create */
	char *name, *image, *az;
	int image_upload; /* image is a diskimage upload's id */
	const struct sm_label *label;
	json_t *meta;
	/* the last call's answer */
	enum sm_error err;
	char errmsg[200];
	/* building: on f->building; the status the newest listing showed
	 * (-1 not listed), of listing number lst_seq, started at lst_at; a
	 * listing numbered above seq answers the machine */
	TAILQ_ENTRY(fmachine) bentry;
	int in_building, lst;
	unsigned long long seq, lst_seq;
	double lst_at;
};

static void
fm_set(struct fmachine *fm, enum fm_state st)
{
	fm->st = st;
	fm->m.state = fm_names[st];
}

/* 1 when image-dir holds the image id. */
static int
image_stored(struct sm_adapter *f, const char *id)
{
	char path[4096];

	if (id == NULL || strchr(id, '/') != NULL)
		return 0;
	snprintf(path, sizeof(path), "%s/%s.json", f->image_dir, id);
	return access(path, F_OK) == 0;
}

/* The stored image's metadata (new reference), or NULL. */
static json_t *
image_metadata(struct sm_adapter *f, const char *id)
{
	char path[4096];
	json_t *j, *m;

	if (f->image_dir == NULL || id == NULL || strchr(id, '/') != NULL)
		return NULL;
	snprintf(path, sizeof(path), "%s/%s.json", f->image_dir, id);
	if ((j = json_load_file(path, 0, NULL)) == NULL)
		return NULL;
	m = json_incref(json_object_get(j, "metadata"));
	json_decref(j);
	return m;
}

static void
create_call(struct fcall *c)
{
	struct sm_adapter *f = c->f;
	struct fmachine *fm = c->owner;
	long long cores, ram, volume_gb = label_boot_volume(fm->label->raw);
	const char *q, *flavor;
	char bad[200];
	int unfit = label_size(f, fm->label->raw, &cores, &ram, &flavor, bad, sizeof(bad));
	struct fserver *s;

	fm->call = NULL;
	f->creates++;
	if (f->quota_errors > 0 || chance(f, f->quota_error_rate)) {
		if (f->quota_errors > 0)
			f->quota_errors--;
		f->quota_refusals++;
		fm->err = SM_E_QUOTA;
		snprintf(fm->errmsg, sizeof(fm->errmsg),
			 "Quota exceeded for instances (simulated)");
	} else if (unfit != 0) { /* config-error, or no flavor fits */
		f->create_errors++;
		fm->err = SM_E_FAILED;
		snprintf(fm->errmsg, sizeof(fm->errmsg), "%s", bad);
	} else if ((q = over_quota(f, (int)cores, (int)ram, volume_gb)) != NULL) {
		f->quota_refusals++;
		fm->err = SM_E_QUOTA;
		snprintf(fm->errmsg, sizeof(fm->errmsg), "%s", q);
	} else if ((q = networks_missing(f, fm->label, bad, sizeof(bad))) != NULL) {
		f->create_errors++;
		fm->err = SM_E_FAILED;
		snprintf(fm->errmsg, sizeof(fm->errmsg), "%s", q);
	} else if (chance(f, f->create_error_rate)) {
		f->create_errors++;
		fm->err = SM_E_FAILED;
		snprintf(fm->errmsg, sizeof(fm->errmsg), "create refused (simulated error)");
	} else if (f->image_dir != NULL && fm->image_upload && !image_stored(f, fm->image)) {
		f->create_errors++;
		fm->err = SM_E_FAILED;
		snprintf(fm->errmsg, sizeof(fm->errmsg), "image %s not found", fm->image);
	} else if (fm->az != NULL && f->zones.n > 0 && !np_strv_contains(&f->zones, fm->az)) {
		f->create_errors++;
		fm->err = SM_E_FAILED;
		snprintf(fm->errmsg, sizeof(fm->errmsg), "availability zone %s does not exist",
			 fm->az);
	} else {
		s = server_new(f, c->at, fm->name, fm->label, fm->image, fm->meta, fm->az);
		sm_set_str(&fm->m.external_id, s->id);
		fm->err = SM_E_NONE;
	}
	sm_machine_wake(&fm->m);
}

static void
delete_call(struct fcall *c)
{
	struct sm_adapter *f = c->f;
	struct fmachine *fm = c->owner;
	struct fserver *s = server_get(f, fm->m.external_id);

	fm->call = NULL;
	fm->err = SM_E_NONE;
	if (s == NULL) {
		fm->err = SM_E_NOTFOUND;
		snprintf(fm->errmsg, sizeof(fm->errmsg), "no server %s", fm->m.external_id);
	} else if (!s->delete_failed_once && chance(f, f->delete_failure_rate)) {
		s->delete_failed_once = 1;
		f->delete_errors++;
		fm->err = SM_E_FAILED;
		snprintf(fm->errmsg, sizeof(fm->errmsg), "delete of %s failed (simulated error)",
			 s->id);
	} else if (s->status != F_DELETING) {
		f->deletes++;
		if (chance(f, f->leak_rate)) {
			f->leaked_on_delete++; /* "done", but it stays */
		} else {
			s->status = F_DELETING;
			s->gone_at = np_mono_s() + f->delete_delay;
			s->leak_volume = chance(f, f->volume_leak_rate);
			mark_dirty(f);
			settle(f);
		}
	}
	sm_machine_wake(&fm->m);
}

static enum sm_status
fm_fail(struct fmachine *fm, enum sm_error e, const char *msg)
{
	fm_set(fm, FM_FAILED);
	fm->m.error = e;
	snprintf(fm->m.error_msg, sizeof(fm->m.error_msg), "%s", msg);
	return SM_ERROR;
}

/* ---- the shared status listing ---------------------------------------------------------- */

static void poll_ask(struct sm_adapter *f);

/* The listing's answer: each building machine gets its server's status
 * (as the call found it: after api-delay), and is woken. */
static void
status_call(struct fcall *c)
{
	struct sm_adapter *f = c->f;
	struct fmachine *fm;
	const struct fserver *s;

	f->poll_call = NULL;
	f->status_listings++;
	log_debug("fake: status listing %s answered (started %.3fs ago)", c->s1,
		  np_mono_s() - f->poll_started);
	f->poll_done_seq = strtoull(c->s1, NULL, 10);
	f->poll_done_started = f->poll_started;
	TAILQ_FOREACH(fm, &f->building, bentry)
	{
		s = fm->m.external_id != NULL ? server_get(f, fm->m.external_id) : NULL;
		fm->lst = s == NULL ? -1 : (int)s->status;
		fm->lst_seq = f->poll_done_seq;
		fm->lst_at = f->poll_done_started;
		sm_machine_wake(&fm->m);
	}
	if (f->poll_wanted)
		poll_ask(f);
}

static void
poll_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	poll_ask(arg);
}

/* A machine waits on a listing that starts from now: when the framework's
 * pace says one is useful, at the provider's rate, one at a time. */
static void
poll_ask(struct sm_adapter *f)
{
	double wait;
	char seq[32];

	if (TAILQ_EMPTY(&f->building))
		return;
	if (f->poll_call != NULL) {
		f->poll_wanted = 1; /* after this one */
		return;
	}
	wait = sm_listing_wait(f->env, f->poll_started, f->env->cfg->rate);
	if (f->poll_seq > 0 && wait > 0.001) {
		struct timeval tv = np_tv_of(wait);
		event_add(f->poll_ev, &tv); /* (re)armed: the pace may have moved */
		return;
	}
	f->poll_wanted = 0;
	f->poll_seq++;
	f->poll_started = np_mono_s();
	snprintf(seq, sizeof(seq), "%llu", f->poll_seq);
	log_debug("fake: status listing %llu starts", f->poll_seq);
	f->poll_call = call_start(f, NULL, status_call, NULL);
	f->poll_call->s1 = strdup(seq);
}

static void
building_leave(struct fmachine *fm)
{
	if (fm->in_building) {
		TAILQ_REMOVE(&fm->f->building, fm, bentry);
		fm->in_building = 0;
	}
}

static enum sm_status
create_advance(struct sm_machine *m, struct sm_instance **out)
{
	struct fmachine *fm = (struct fmachine *)m;
	struct sm_adapter *f = fm->f;
	struct fserver *s;

	switch (fm->st) {
	case FM_START:
		if (f->stopped)
			return fm_fail(fm, SM_E_FAILED, "the provider is stopping");
		fm_set(fm, FM_SUBMITTED);
		fm->call = call_start(f, fm, create_call, NULL);
		m->retry_in = 3600; /* woken by the answer */
		return SM_AGAIN;
	case FM_SUBMITTED:
		if (fm->call != NULL) {
			m->retry_in = 3600;
			return SM_AGAIN;
		}
		if (fm->err != SM_E_NONE)
			return fm_fail(fm, fm->err, fm->errmsg);
		fm_set(fm, FM_BUILDING);
		fm->seq = f->poll_seq; /* a listing started from now on */
		fm->lst_seq = 0;
		TAILQ_INSERT_TAIL(&f->building, fm, bentry);
		fm->in_building = 1;
		/* fall through */
	case FM_BUILDING:
		m->retry_in = 5; /* woken by the listing; this is a safety net */
		if (fm->lst_seq <= fm->seq) {
			poll_ask(f);
			return SM_AGAIN;
		}
		fm->seq = fm->lst_seq;
		s = server_get(f, m->external_id);
		if (fm->lst < 0 || fm->lst == F_DELETING || s == NULL) {
			building_leave(fm);
			return fm_fail(fm, SM_E_FAILED, "the server vanished while building");
		}
		if (fm->lst == F_ERROR) {
			building_leave(fm);
			return fm_fail(fm, SM_E_FAILED, "the server went to ERROR while booting");
		}
		if (fm->lst == F_ACTIVE) {
			building_leave(fm);
			m->seen_at = fm->lst_at; /* the boot estimate's sample */
			*out = server_instance(f, s);
			return SM_DONE;
		}
		poll_ask(f);
		return SM_AGAIN;
	default:
		return fm_fail(fm, SM_E_FAILED, "advanced after failing");
	}
}

static enum sm_status
delete_advance(struct sm_machine *m, struct sm_instance **out)
{
	struct fmachine *fm = (struct fmachine *)m;
	struct sm_adapter *f = fm->f;
	struct fserver *s;

	(void)out;
	switch (fm->st) {
	case FM_START:
		fm_set(fm, FM_SUBMITTED);
		fm->call = call_start(f, fm, delete_call, NULL);
		m->retry_in = 3600;
		return SM_AGAIN;
	case FM_SUBMITTED:
		if (fm->call != NULL) {
			m->retry_in = 3600;
			return SM_AGAIN;
		}
		if (fm->err != SM_E_NONE)
			return fm_fail(fm, fm->err, fm->errmsg);
		fm_set(fm, FM_DELETING);
		/* fall through */
	case FM_DELETING:
		settle(f);
		s = server_get(f, m->external_id);
		if (s == NULL || s->status != F_DELETING)
			return SM_DONE; /* gone (or "gone": a leak) */
		m->retry_in = fmax(0, s->gone_at - np_mono_s());
		return SM_AGAIN;
	default:
		return fm_fail(fm, SM_E_FAILED, "advanced after failing");
	}
}

static void
fm_free(struct sm_machine *m)
{
	struct fmachine *fm = (struct fmachine *)m;

	if (fm->call != NULL)
		call_free(fm->call);
	building_leave(fm);
	free(fm->m.external_id);
	free(fm->name);
	free(fm->image);
	free(fm->az);
	json_decref(fm->meta);
	free(fm);
}

static const struct sm_machine_ops create_ops = {create_advance, fm_free};
static const struct sm_machine_ops delete_ops = {delete_advance, fm_free};

/*
 * The server's metadata, as upstream's OpenStack adapter builds it: groups,
 * then the label's instance-properties and dynamic-instance-properties
 * (formatted with the request's attributes; one that does not format is
 * logged and left out, as upstream), then nodepool's own keys, which win.
 */
static json_t *
server_metadata(const struct sm_create_args *args)
{
	const json_t *raw = args->label->raw, *v;
	json_t *m = json_object();
	const char *k;

	if ((v = json_object_get(args->metadata, "groups")) != NULL)
		json_object_set(m, "groups", (json_t *)v);
	json_object_foreach((json_t *)json_object_get(raw, "instance-properties"), k, v)
	    json_object_set(m, k, (json_t *)v);
	json_object_foreach((json_t *)json_object_get(raw, "dynamic-instance-properties"), k, v)
	{
		char err[200], *val = json_is_string(v)
					  ? sm_request_format(json_string_value(v), args->request,
							      err, sizeof(err))
					  : NULL;

		if (val == NULL) {
			log_warn("fake: label %s: dynamic instance property %s left out: %s",
				 args->label->name, k, json_is_string(v) ? err : "not a string");
			continue;
		}
		json_object_set_new(m, k, json_string(val));
		free(val);
	}
	json_object_update(m, (json_t *)args->metadata);
	return m;
}

static struct sm_machine *
fake_create_machine(struct sm_adapter *f, const struct sm_create_args *args)
{
	struct fmachine *fm = calloc(1, sizeof(*fm));

	if (fm == NULL)
		abort();
	fm->m.ops = &create_ops;
	fm->f = f;
	fm->create = 1;
	fm_set(fm, FM_START);
	fm->name = strdup(args->hostname);
	fm->label = args->label;
	fm->image_upload = args->image_external_id != NULL;
	fm->image = args->image_external_id != NULL ? strdup(args->image_external_id)
		    : args->label->image != NULL && args->label->image->image_id != NULL
			? strdup(args->label->image->image_id)
		    : args->label->cloud_image != NULL ? strdup(args->label->cloud_image)
						       : NULL;
	fm->az = args->az != NULL ? strdup(args->az) : NULL;
	fm->meta = server_metadata(args);
	return &fm->m;
}

/* The resume_machine slot: an earlier launcher's server, watched until it
 * is up (the create machine's building state). */
static struct sm_machine *
fake_resume_machine(struct sm_adapter *f, const struct sm_create_args *args,
		    const char *external_id)
{
	struct sm_machine *m = fake_create_machine(f, args);
	struct fmachine *fm = (struct fmachine *)m;

	m->external_id = strdup(external_id);
	fm_set(fm, FM_BUILDING);
	/* on the shared status listing, as a create's building state is */
	fm->seq = f->poll_seq;
	fm->lst_seq = 0;
	TAILQ_INSERT_TAIL(&f->building, fm, bentry);
	fm->in_building = 1;
	return m;
}

static struct sm_machine *
fake_delete_machine(struct sm_adapter *f, const char *external_id)
{
	struct fmachine *fm = calloc(1, sizeof(*fm));

	if (fm == NULL)
		abort();
	fm->m.ops = &delete_ops;
	fm->f = f;
	fm_set(fm, FM_START);
	fm->m.external_id = strdup(external_id);
	return &fm->m;
}

/* ---- listings, quota, resources ---------------------------------------------------------------
 */

static void
list_instances_call(struct fcall *c)
{
	struct sm_adapter *f = c->f;
	struct sm_instance **v;
	const struct fserver *s;
	size_t n = 0, i;

	f->listings++;
	TAILQ_FOREACH(s, &f->servers, entry)
	n++;
	v = calloc(n + 1, sizeof(*v));
	n = 0;
	TAILQ_FOREACH(s, &f->servers, entry)
	v[n++] = server_instance(f, s);
	c->cb.instances(v, n, NULL, c->arg);
	for (i = 0; i < n; i++)
		sm_instance_free(v[i]);
	free(v);
}

static void
fake_list_instances(struct sm_adapter *f, sm_instances_cb cb, void *arg)
{
	struct fcall *c = call_start(f, NULL, list_instances_call, arg);

	c->cb.instances = cb;
}

static void
list_resources_call(struct fcall *c)
{
	struct sm_adapter *f = c->f;
	struct sm_resource *v;
	const struct fserver *s;
	const struct fvolume *vol;
	const struct fimage *im;
	size_t n = 0;

	f->listings++;
	TAILQ_FOREACH(s, &f->servers, entry)
	n++;
	TAILQ_FOREACH(vol, &f->volumes, entry)
	n++;
	TAILQ_FOREACH(im, &f->images, entry)
	n++;
	v = calloc(n + 1, sizeof(*v));
	n = 0;
	TAILQ_FOREACH(s, &f->servers, entry)
	v[n++] = (struct sm_resource){"instance", s->id, s->metadata};
	TAILQ_FOREACH(vol, &f->volumes, entry)
	v[n++] = (struct sm_resource){"volume", vol->id, vol->metadata};
	TAILQ_FOREACH(im, &f->images, entry)
	v[n++] = (struct sm_resource){"image", im->id, im->metadata};
	c->cb.resources(v, n, NULL, c->arg);
	free(v);
}

/* list_images: the store's images (image-dir, every process's uploads),
 * else this process's; answered from the loop. */
struct flist {
	TAILQ_ENTRY(flist) entry;
	struct sm_adapter *f;
	drv_image_list_cb cb;
	void *arg;
	struct event *ev;
};

static void
flist_free(struct flist *fl)
{
	TAILQ_REMOVE(&fl->f->lists, fl, entry);
	event_free(fl->ev);
	free(fl);
}

static void
flist_fire(evutil_socket_t fd, short what, void *arg)
{
	struct flist *fl = arg;
	struct sm_adapter *f = fl->f;
	struct drv_cloud_image *v = NULL;
	json_t *keep = json_array();
	size_t n = 0, cap = 0;
	const struct fimage *im;

	(void)fd;
	(void)what;
	if (f->image_dir != NULL) {
		DIR *d = opendir(f->image_dir);
		struct dirent *de;
		while (d != NULL && (de = readdir(d)) != NULL) {
			size_t l = strlen(de->d_name);
			char path[4096];
			json_t *j;
			if (l < 6 || strcmp(de->d_name + l - 5, ".json") != 0)
				continue;
			snprintf(path, sizeof(path), "%s/%s", f->image_dir, de->d_name);
			if ((j = json_load_file(path, 0, NULL)) == NULL ||
			    json_string_value(json_object_get(j, "id")) == NULL) {
				json_decref(j);
				continue;
			}
			json_array_append_new(keep, j);
		}
		if (d != NULL)
			closedir(d);
		cap = json_array_size(keep);
		v = calloc(cap + 1, sizeof(*v));
		for (n = 0; n < cap; n++) {
			const json_t *j = json_array_get(keep, n);
			const json_t *md = json_object_get(j, "metadata");
			v[n] = (struct drv_cloud_image){
			    json_string_value(json_object_get(j, "id")),
			    json_string_value(json_object_get(j, "name"))
				? json_string_value(json_object_get(j, "name"))
				: "",
			    md};
		}
	} else {
		TAILQ_FOREACH(im, &f->images, entry)
		cap++;
		v = calloc(cap + 1, sizeof(*v));
		TAILQ_FOREACH(im, &f->images, entry)
		v[n++] = (struct drv_cloud_image){im->id, im->name ? im->name : "", im->metadata};
	}
	fl->cb(v, n, NULL, fl->arg);
	free(v);
	json_decref(keep);
	flist_free(fl);
}

static void
fake_list_images(struct sm_adapter *f, drv_image_list_cb cb, void *arg)
{
	struct flist *fl = calloc(1, sizeof(*fl));

	if (fl == NULL)
		abort();
	fl->f = f;
	fl->cb = cb;
	fl->arg = arg;
	if ((fl->ev = event_new(f->base, -1, 0, flist_fire, fl)) == NULL)
		abort();
	TAILQ_INSERT_TAIL(&f->lists, fl, entry);
	event_active(fl->ev, EV_TIMEOUT, 0);
}

static void
fake_list_resources(struct sm_adapter *f, sm_resources_cb cb, void *arg)
{
	struct fcall *c = call_start(f, NULL, list_resources_call, arg);

	c->cb.resources = cb;
}

static void
delete_resource_call(struct fcall *c)
{
	struct sm_adapter *f = c->f;
	struct fserver *s;
	struct fvolume *v;
	struct fimage *im;

	if (strcmp(c->s1, "instance") == 0 && (s = server_get(f, c->s2)) != NULL) {
		f->deletes++;
		s->leak_volume = 0;
		server_remove(f, s);
	} else if (strcmp(c->s1, "volume") == 0 && (v = volume_get(f, c->s2)) != NULL) {
		volume_remove(f, v);
	} else if (strcmp(c->s1, "image") == 0) {
		TAILQ_FOREACH(im, &f->images, entry)
		if (strcmp(im->id, c->s2) == 0)
			break;
		if (im != NULL) {
			TAILQ_REMOVE(&f->images, im, entry);
			free(im->name);
			json_decref(im->metadata);
			free(im);
			mark_dirty(f);
		}
	}
	c->cb.done(1, NULL, c->arg); /* not found counts as done */
}

static void
fake_delete_resource(struct sm_adapter *f, const struct sm_resource *r, sm_done_cb cb, void *arg)
{
	struct fcall *c = call_start(f, NULL, delete_resource_call, arg);

	c->cb.done = cb;
	c->s1 = strdup(r->type);
	c->s2 = strdup(r->id);
}

static void
quota_call(struct fcall *c)
{
	struct sm_adapter *f = c->f;
	struct drv_quota q;

	if (f->report_quota) {
		drv_quota_init(&q, f->q_cores, f->q_instances, f->q_ram);
		if (isfinite(f->q_volumes) || isfinite(f->q_volume_gb))
			q.extra = json_object();
		if (isfinite(f->q_volumes))
			json_object_set_new(q.extra, "volumes", json_real(f->q_volumes));
		if (isfinite(f->q_volume_gb))
			json_object_set_new(q.extra, "volume-gb", json_real(f->q_volume_gb));
	} else
		drv_quota_unlimited(&q);
	c->cb.quota(&q, NULL, c->arg);
	drv_quota_clear(&q);
}

static void
fake_quota_limits(struct sm_adapter *f, sm_quota_cb cb, void *arg)
{
	struct fcall *c = call_start(f, NULL, quota_call, arg);

	c->cb.quota = cb;
}

static int
fake_label_quota(struct sm_adapter *f, const struct sm_label *label, struct drv_quota *out,
		 char *err, size_t errlen)
{
	long long cores, ram, gb = label_boot_volume(label->raw);
	const char *flavor;

	if (label_size(f, label->raw, &cores, &ram, &flavor, err, errlen) != 0)
		return -1;
	out->cores = (double)cores;
	out->ram = (double)ram;
	out->instances = 1;
	if (gb > 0) { /* as upstream's OpenStack adapter: a boot volume counts */
		json_decref(out->extra);
		out->extra = json_pack("{s:i, s:I}", "volumes", 1, "volume-gb", (json_int_t)gb);
	}
	return 0;
}

static void
console_call(struct fcall *c)
{
	struct sm_adapter *f = c->f;
	const struct fserver *s = server_get(f, c->s1);
	char text[512];

	if (s == NULL) {
		c->cb.console(NULL, "no such server", c->arg);
		return;
	}
	snprintf(text, sizeof(text),
		 "[    0.000000] Linux version 6.1.0-fake (fake cloud)\n"
		 "[    1.234567] fake-init: %s (%s) booting\n"
		 "%s login:\n",
		 s->name, s->id, s->name);
	c->cb.console(text, NULL, c->arg);
}

static void
fake_console_log(struct sm_adapter *f, const struct sm_label *label, const char *external_id,
		 sm_console_cb cb, void *arg)
{
	struct fcall *c = call_start(f, NULL, console_call, arg);

	c->cb.console = cb;
	c->s1 = strdup(external_id);
}

static void
upload_call(struct fcall *c)
{
	struct sm_adapter *f = c->f;
	struct fimage *im = calloc(1, sizeof(*im));

	snprintf(im->id, sizeof(im->id), "img-%06llu", ++f->seq);
	im->name = strdup(c->s1);
	im->metadata = c->meta != NULL ? json_incref(c->meta) : json_object();
	TAILQ_INSERT_TAIL(&f->images, im, entry);
	mark_dirty(f);
	c->cb.upload(im->id, NULL, c->arg);
}

#define FAKE_UPLOAD_CHUNK (1024 * 1024)

static void
fupload_free(struct fupload *u)
{
	TAILQ_REMOVE(&u->f->uploads, u, entry);
	if (u->ev != NULL)
		event_free(u->ev);
	if (u->in >= 0)
		close(u->in);
	if (u->out >= 0)
		close(u->out);
	if (u->part != NULL)
		unlink(u->part);
	EVP_MD_CTX_free(u->md);
	free(u->part);
	free(u->filename);
	free(u->name);
	free(u->format);
	free(u->sha256);
	json_decref(u->meta);
	free(u);
}

/* Ends an upload: the callback, then free (no callback after adapter_free). */
static void
fupload_end(struct fupload *u, const char *id, const char *error)
{
	sm_upload_cb cb = u->cb;
	void *arg = u->arg;
	char idbuf[sizeof(u->id)];

	/* id may be u's own */
	snprintf(idbuf, sizeof(idbuf), "%s", id != NULL ? id : "");
	fupload_free(u);
	cb(id != NULL ? idbuf : NULL, error, arg);
}

static void
fupload_step(evutil_socket_t fd, short what, void *arg)
{
	struct fupload *u = arg;
	struct sm_adapter *f = u->f;
	static unsigned char buf[FAKE_UPLOAD_CHUNK];
	unsigned char dig[EVP_MAX_MD_SIZE];
	unsigned int dlen = 0;
	char hex[2 * EVP_MAX_MD_SIZE + 1], path[4096], err[300];
	json_t *rec;
	ssize_t n;

	if (!u->done) { /* upload-delay is over: the transfer starts */
		u->done = 1;
		if (f->upload_failures > 0) {
			f->upload_failures--;
			fupload_end(u, NULL, "upload refused (simulated error)");
			return;
		}
		u->in = open(u->filename, O_RDONLY | O_CLOEXEC);
		if (u->in < 0) {
			snprintf(err, sizeof(err), "%s: %s", u->filename, strerror(errno));
			fupload_end(u, NULL, err);
			return;
		}
		u->out = open(u->part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (u->out < 0) {
			snprintf(err, sizeof(err), "image store: %s", strerror(errno));
			fupload_end(u, NULL, err);
			return;
		}
	}
	n = read(u->in, buf, sizeof(buf));
	if (n < 0) {
		snprintf(err, sizeof(err), "reading the image: %s", strerror(errno));
		fupload_end(u, NULL, err);
		return;
	}
	if (n > 0) {
		if (write(u->out, buf, (size_t)n) != n) {
			snprintf(err, sizeof(err), "image store full: %s", strerror(errno));
			fupload_end(u, NULL, err);
			return;
		}
		EVP_DigestUpdate(u->md, buf, (size_t)n);
		u->size += n;
		event_active(u->ev, EV_TIMEOUT, 0);
		return;
	}
	EVP_DigestFinal_ex(u->md, dig, &dlen);
	for (unsigned int i = 0; i < dlen; i++)
		snprintf(hex + 2 * i, 3, "%02x", dig[i]);
	if (u->sha256 != NULL && strcmp(u->sha256, hex) != 0) {
		snprintf(err, sizeof(err), "checksum mismatch: got %s, told %s", hex, u->sha256);
		fupload_end(u, NULL, err);
		return;
	}
	snprintf(path, sizeof(path), "%s/%s.%s", f->image_dir, u->id, u->format);
	if (rename(u->part, path) != 0) {
		snprintf(err, sizeof(err), "image store: %s", strerror(errno));
		fupload_end(u, NULL, err);
		return;
	}
	free(u->part);
	u->part = NULL;
	rec = json_pack("{s:s, s:s, s:s, s:I, s:s, s:O}", "id", u->id, "name", u->name, "format",
			u->format, "size", (json_int_t)u->size, "sha256", hex, "metadata", u->meta);
	snprintf(path, sizeof(path), "%s/%s.json", f->image_dir, u->id);
	if (rec == NULL || json_dump_file(rec, path, JSON_SORT_KEYS) != 0) {
		json_decref(rec);
		fupload_end(u, NULL, "image store: cannot write the image record");
		return;
	}
	json_decref(rec);
	fupload_end(u, u->id, NULL);
}

static void
fake_upload_image(struct sm_adapter *f, const struct sm_upload_args *u, sm_upload_cb cb, void *arg)
{
	struct fcall *c;
	struct fupload *fu;
	unsigned char rnd[6];
	char path[4096];
	int r;

	if (f->image_dir == NULL) {
		c = call_start(f, NULL, upload_call, arg);
		c->cb.upload = cb;
		c->s1 = strdup(u->image_name);
		c->meta = u->metadata != NULL ? json_deep_copy(u->metadata) : NULL;
		return;
	}
	fu = calloc(1, sizeof(*fu));
	if (fu == NULL)
		abort();
	fu->f = f;
	fu->cb = cb;
	fu->arg = arg;
	fu->in = fu->out = -1;
	fu->filename = strdup(u->filename);
	fu->name = strdup(u->image_name);
	fu->format = strdup(u->format != NULL ? u->format : "raw");
	fu->sha256 = u->sha256 != NULL ? strdup(u->sha256) : NULL;
	fu->meta = u->metadata != NULL ? json_deep_copy(u->metadata) : json_object();
	fu->md = EVP_MD_CTX_new();
	if (fu->md == NULL || EVP_DigestInit_ex(fu->md, EVP_sha256(), NULL) != 1)
		abort();
	/* ids unique across the processes sharing the store */
	r = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (r < 0 || read(r, rnd, sizeof(rnd)) != (ssize_t)sizeof(rnd))
		memset(rnd, 0, sizeof(rnd));
	if (r >= 0)
		close(r);
	snprintf(fu->id, sizeof(fu->id), "img-%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2],
		 rnd[3], rnd[4], rnd[5]);
	snprintf(path, sizeof(path), "%s/%s.part", f->image_dir, fu->id);
	fu->part = strdup(path);
	fu->ev = event_new(f->base, -1, 0, fupload_step, fu);
	TAILQ_INSERT_TAIL(&f->uploads, fu, entry);
	/* the transfer takes upload-delay, then the data streams in; every
	 * outcome is reported from the loop, never from inside this slot */
	{
		double d = f->upload_delay;
		struct timeval tv = np_tv_of(d);
		event_add(fu->ev, &tv);
	}
}

static void
delete_image_call(struct fcall *c)
{
	struct sm_adapter *f = c->f;
	struct fimage *im;

	TAILQ_FOREACH(im, &f->images, entry)
	if (strcmp(im->id, c->s1) == 0)
		break;
	if (im != NULL) {
		TAILQ_REMOVE(&f->images, im, entry);
		free(im->name);
		json_decref(im->metadata);
		free(im);
		mark_dirty(f);
	}
	if (f->image_dir != NULL && strchr(c->s1, '/') == NULL && c->s1[0] != '.') {
		char path[4096];
		json_t *rec;
		const char *fmt;

		snprintf(path, sizeof(path), "%s/%s.json", f->image_dir, c->s1);
		rec = json_load_file(path, 0, NULL);
		fmt = json_string_value(json_object_get(rec, "format"));
		if (fmt != NULL && strchr(fmt, '/') == NULL) {
			char data[4096];
			snprintf(data, sizeof(data), "%s/%s.%s", f->image_dir, c->s1, fmt);
			unlink(data);
		}
		unlink(path); /* gone already counts as deleted */
		json_decref(rec);
	}
	c->cb.done(1, NULL, c->arg);
}

static void
fake_delete_image(struct sm_adapter *f, const char *external_id, sm_done_cb cb, void *arg)
{
	struct fcall *c = call_start(f, NULL, delete_image_call, arg);

	c->cb.done = cb;
	c->s1 = strdup(external_id);
}

/* ---- life cycle ---------------------------------------------------------------------------------
 */

static double
limit(const json_t *q, const char *k)
{
	const json_t *v = json_object_get(q, k);

	return json_is_number(v) && json_number_value(v) >= 0 ? json_number_value(v) : INFINITY;
}

static void
flavors_free(struct sm_adapter *f)
{
	size_t i;

	for (i = 0; i < f->nflavors; i++)
		free(f->flavors[i].name);
	free(f->flavors);
}

static struct sm_adapter *
fake_adapter_new(const struct sm_env *env, char *err, size_t errlen)
{
	struct sm_adapter *f = calloc(1, sizeof(*f));
	const json_t *p = env->provider, *q = json_object_get(p, "quota");
	const char *sf = json_string_value(json_object_get(p, "state-file"));
	long long seed = (long long)np_json_num(p, "seed", 0);
	long long i, unmanaged = (long long)np_json_num(p, "unmanaged-instances", 0);

	if (f == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	f->env = env;
	f->base = env->base;
	TAILQ_INIT(&f->servers);
	TAILQ_INIT(&f->volumes);
	TAILQ_INIT(&f->images);
	TAILQ_INIT(&f->calls);
	TAILQ_INIT(&f->uploads);
	TAILQ_INIT(&f->lists);
	TAILQ_INIT(&f->building);
	f->poll_ev = event_new(env->base, -1, 0, poll_timer_cb, f);
	{
		const char *idir = json_string_value(json_object_get(p, "image-dir"));
		f->image_dir = idir != NULL ? strdup(idir) : NULL;
	}
	f->upload_delay = np_json_num(p, "upload-delay", 0);
	f->upload_failures = (long long)np_json_num(p, "upload-failures", 0);
	/* `rate`: seconds between calls, as OpenStack's (its adapter gives
	 * openstacksdk 1/rate calls per second) */
	f->rl = ratelimit_new(env->base, env->cfg->rate > 0 ? 1.0 / env->cfg->rate : 0, 1);
	{
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		f->wall_off = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 - np_mono_s();
	}
	f->boot_delay = np_json_num(p, "boot-delay", 0);
	f->delete_delay = np_json_num(p, "delete-delay", 0);
	f->api_delay = np_json_num(p, "api-delay", 0);
	f->failure_rate = np_json_num(p, "failure-rate", 0);
	f->never_ready_rate = np_json_num(p, "never-ready-rate", 0);
	f->create_error_rate = np_json_num(p, "create-error-rate", 0);
	f->quota_error_rate = np_json_num(p, "quota-error-rate", 0);
	f->delete_failure_rate = np_json_num(p, "delete-failure-rate", 0);
	f->leak_rate = np_json_num(p, "leak-rate", 0);
	f->volume_leak_rate = np_json_num(p, "volume-leak-rate", 0);
	f->boot_failures = (long long)np_json_num(p, "boot-failures", 0);
	f->quota_errors = (long long)np_json_num(p, "quota-errors", 0);
	f->q_instances = limit(q, "instances");
	f->q_cores = limit(q, "cores");
	f->q_ram = limit(q, "ram");
	f->q_volumes = limit(q, "volumes");
	f->q_volume_gb = limit(q, "volume-gb");
	f->cloud = np_json_str(p, "cloud", "fake");
	{
		const json_t *fl = json_object_get(p, "flavors"), *e;
		size_t k;

		if (fl == NULL) { /* upstream's fake cloud's two flavors */
			f->nflavors = 2;
			f->flavors = calloc(2, sizeof(*f->flavors));
			f->flavors[0] = (struct fflavor){strdup("Fake Flavor"), 4, 8192};
			f->flavors[1] = (struct fflavor){strdup("Unreal Flavor"), 4, 8192};
		} else {
			f->flavors = calloc(json_array_size(fl) + 1, sizeof(*f->flavors));
			json_array_foreach(fl, k, e) f->flavors[f->nflavors++] =
			    (struct fflavor){strdup(np_json_str(e, "name", "")),
					     (long long)np_json_num(e, "cores", 1),
					     (long long)np_json_num(e, "ram", 1024)};
		}
		qsort(f->flavors, f->nflavors, sizeof(*f->flavors), flavor_cmp);
		json_array_foreach(json_object_get(p, "cloud-networks"), k, e)
		    np_strv_push(&f->networks, json_string_value(e));
	}
	f->report_quota = np_json_bool(p, "report-quota", 1);
	f->ssh_port = (int)np_json_num(p, "fake-ssh-port", 0);
	{
		const json_t *z;
		size_t k;
		json_array_foreach(json_object_get(p, "cloud-availability-zones"), k, z)
		    np_strv_push(&f->zones, json_string_value(z));
	}
	f->state_file = sf != NULL ? strdup(sf) : NULL;
	f->dice = seed != 0 ? (uint64_t)seed : ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid();
	if (f->dice == 0)
		f->dice = 1;
	f->seq = (unsigned long long)np_json_num(p, "instance-id-base", 0);
	if (f->state_file != NULL && np_json_bool(p, "persistent", 0) && load_state(f))
		unmanaged = 0; /* they are in the file */
	for (i = 0; i < unmanaged; i++) {
		char name[32];
		struct fserver *s;
		snprintf(name, sizeof(name), "unmanaged-%lld", i + 1);
		s = server_new(f, np_mono_s(), name, NULL, NULL, NULL, NULL);
		s->unmanaged = 1;
		s->status = F_ACTIVE;
	}
	if (f->state_file != NULL) {
		f->flush_ev = event_new(env->base, -1, 0, flush_cb, f);
		f->dirty_ev = event_new(env->base, -1, 0, dirty_cb, f);
		flush_cb(-1, 0, f);
	}
	if (f->rl == NULL) {
		snprintf(err, errlen, "out of memory");
		np_strv_clear(&f->zones);
		np_strv_clear(&f->networks);
		flavors_free(f);
		free(f->state_file);
		free(f->image_dir);
		free(f);
		return NULL;
	}
	return f;
}

static void
fake_adapter_stop(struct sm_adapter *f)
{
	f->stopped = 1;
}

static void
fake_adapter_free(struct sm_adapter *f)
{
	struct fcall *c;
	struct fserver *s;
	struct fvolume *v;
	struct fimage *im;

	if (f == NULL)
		return;
	while (!TAILQ_EMPTY(&f->lists))
		flist_free(TAILQ_FIRST(&f->lists)); /* no answer after the free */
	while ((c = TAILQ_FIRST(&f->calls)) != NULL) {
		if (c->owner != NULL)
			c->owner->call = NULL;
		call_free(c);
	}
	f->poll_call = NULL;
	if (f->poll_ev != NULL)
		event_free(f->poll_ev);
	while (!TAILQ_EMPTY(&f->uploads))
		fupload_free(TAILQ_FIRST(&f->uploads));
	if (f->state_file != NULL)
		flush_state(f); /* the last picture: what the cloud holds at exit */
	while ((s = TAILQ_FIRST(&f->servers)) != NULL) {
		s->volume[0] = '\0';
		server_remove(f, s);
	}
	while ((v = TAILQ_FIRST(&f->volumes)) != NULL)
		volume_remove(f, v);
	while ((im = TAILQ_FIRST(&f->images)) != NULL) {
		TAILQ_REMOVE(&f->images, im, entry);
		free(im->name);
		json_decref(im->metadata);
		free(im);
	}
	if (f->flush_ev != NULL)
		event_free(f->flush_ev);
	if (f->dirty_ev != NULL)
		event_free(f->dirty_ev);
	ratelimit_free(f->rl);
	np_strv_clear(&f->zones);
	np_strv_clear(&f->networks);
	flavors_free(f);
	free(f->state_file);
	free(f->image_dir);
	free(f);
}

/* As upstream's Adapter.getAZs: the cloud's zones. */
static void
fake_azs(struct sm_adapter *f, struct np_strv *out)
{
	size_t i;

	for (i = 0; i < f->zones.n; i++)
		np_strv_push(out, f->zones.v[i]);
}

static const char *
str_or(const char *s, const char *def)
{
	return s != NULL ? s : def;
}

static void
fake_dump(struct sm_adapter *f, struct evbuffer *out)
{
	const struct fserver *s;
	const struct fvolume *v;
	size_t n = 0;

	settle(f);
	TAILQ_FOREACH(s, &f->servers, entry)
	n++;
	evbuffer_add_printf(out,
			    "  fake cloud: %zu servers; creates %llu (errors %llu, quota "
			    "%llu, boot %llu), deletes %llu (errors %llu, leaked %llu), status "
			    "listings %llu, other listings %llu\n",
			    n, f->creates, f->create_errors, f->quota_refusals, f->boot_errors,
			    f->deletes, f->delete_errors, f->leaked_on_delete, f->status_listings,
			    f->listings);
	n = 0;
	TAILQ_FOREACH(s, &f->servers, entry)
	{
		if (++n > 50) {
			evbuffer_add_printf(out, "    ...\n");
			break;
		}
		evbuffer_add_printf(
		    out, "    server %s %s %s node %s label %s\n", s->id, s->name,
		    fstatus_names[s->status],
		    str_or(json_string_value(json_object_get(s->metadata, "nodepool_node_id")),
			   "-"),
		    s->label ? s->label : "-");
	}
	TAILQ_FOREACH(v, &f->volumes, entry)
	if (v->server[0] == '\0')
		evbuffer_add_printf(
		    out, "    volume %s detached (node %s)\n", v->id,
		    str_or(json_string_value(json_object_get(v->metadata, "nodepool_node_id")),
			   "-"));
}

static const struct sm_adapter_ops fake_adapter = {
    .name = "fake",
    .cloud_per_launcher = 1,
    .adapter_new = fake_adapter_new,
    .adapter_stop = fake_adapter_stop,
    .adapter_free = fake_adapter_free,
    .create_machine = fake_create_machine,
    .resume_machine = fake_resume_machine,
    .delete_machine = fake_delete_machine,
    .list_instances = fake_list_instances,
    .list_resources = fake_list_resources,
    .delete_resource = fake_delete_resource,
    .quota_limits = fake_quota_limits,
    .label_quota = fake_label_quota,
    .azs = fake_azs,
    .upload_image = fake_upload_image,
    .delete_image = fake_delete_image,
    .list_images = fake_list_images,
    .images_in_resources = 1,
    .console_log = fake_console_log,
    .dump = fake_dump,
};

static const struct sm_defaults fake_defaults = {
    .boot_timeout = 60,
    .rate = 0,
    .host_key_checking = 0,
};

static struct drv_provider *
fake_provider_new(struct drv_host *lc, char *err, size_t errlen)
{
	return sm_provider_new(&fake_adapter, &fake_defaults, lc, err, errlen);
}

const struct driver drv_fake = {
    .name = "fake",
    .pause_at_quota = 1,
    .reuse_only = 0,
    .provider_new = fake_provider_new,
    SM_DRIVER_SLOTS,
    .image_format = sm_drv_config_image_format,
};
