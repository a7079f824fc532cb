/*
 * The openstack adapter's asynchronous slots driven directly against the
 * OpenStack simulator (tests/sim/openstack, started here on a loopback
 * port by its shell fixture and stopped by pid): image upload (Glance v2,
 * the file streamed) and delete, the cloud's limits with volume limits,
 * listings with metadata, the console log, a flavor that does not exist.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <event2/event.h>

#include "drivers/openstack/openstack.h"
#include "drivers/statemachine/statemachine.h"

static char dir[64];
static char control[256];
static struct event_base *base;
static json_t *provider;
static struct sm_config *cfg;
static struct sm_env env;
static struct sm_adapter *ad;
static const struct sm_adapter_ops *ops;

/* The simulator's control API: GET path, as JSON. */
static json_t *
ctl(const char *path)
{
	char cmd[600];
	FILE *p;
	json_t *j;

	snprintf(cmd, sizeof(cmd),
		 "/usr/bin/python3 -c \"import urllib.request as u,sys; "
		 "sys.stdout.write(u.urlopen('%s%s').read().decode())\"",
		 control, path);
	p = popen(cmd, "r");
	cr_assert(p != NULL);
	j = json_loadf(p, 0, NULL);
	pclose(p);
	cr_assert(j != NULL, "control %s", path);
	return j;
}

static void
setup(void)
{
	char err[600], path[256];
	FILE *f;
	json_error_t je;

	snprintf(dir, sizeof(dir), "/tmp/osadapter.XXXXXX");
	cr_assert(mkdtemp(dir) != NULL);
	f = fopen(strcat(strcpy(path, dir), "/sim.json"), "w");
	fputs("{\"clouds\": {\"t\": {\"regions\": {\"R1\": {\"boot_delay\": 0.1,"
	      " \"console_output\": \"login: \","
	      " \"flavors\": [{\"name\": \"small\", \"ram\": 2048, \"vcpus\": 2}],"
	      " \"volume_limits\": {\"maxTotalVolumes\": 7, \"maxTotalVolumeGigabytes\": -1},"
	      " \"compute_limits\": {\"maxTotalInstances\": 9, \"maxTotalCores\": -1}}}}}}",
	      f);
	fclose(f);
	snprintf(err, sizeof(err), "sh tests/sim/openstack/ossim.sh start %s/sim --config %s", dir,
		 path);
	cr_assert(system(err) == 0, "%s", err);
	snprintf(path, sizeof(path), "%s/sim/clouds.yaml", dir);
	setenv("OS_CLIENT_CONFIG_FILE", path, 1);
	{
		char envf[256], line[512];
		snprintf(envf, sizeof(envf), "%s/sim/env", dir);
		f = fopen(envf, "r");
		cr_assert(f != NULL);
		while (fgets(line, sizeof(line), f))
			if (strncmp(line, "export OSSIM_CONTROL=", 21) == 0)
				snprintf(control, sizeof(control), "%.*s",
					 (int)strcspn(line + 21, "\n"), line + 21);
		fclose(f);
	}
	provider = json_loads(
	    "{\"name\": \"p\", \"driver\": \"openstack\", \"cloud\": \"t\","
	    " \"region-name\": \"R1\", \"rate\": 0.001,"
	    " \"cloud-images\": [{\"name\": \"cirros\"}],"
	    " \"diskimages\": [{\"name\": \"ubuntu\", \"meta\": {\"os\": \"linux\"}}],"
	    " \"pools\": [{\"name\": \"main\", \"labels\": ["
	    "  {\"name\": \"ok\", \"cloud-image\": \"cirros\", \"flavor-name\": "
	    "\"small\", \"boot-from-volume\": true, \"volume-size\": 30},"
	    "  {\"name\": \"bad\", \"cloud-image\": \"cirros\", \"min-ram\": 999999}]}]}",
	    0, &je);
	cr_assert(provider != NULL, "%s", je.text);
	base = event_base_new();
	{
		static const struct sm_defaults def = {
		    .boot_timeout = 60, .rate = 1, .host_key_checking = 1};
		cfg = sm_config_new(provider, &def, err, sizeof(err));
		cr_assert(cfg != NULL, "%s", err);
	}
	env.base = base;
	env.provider_name = "p";
	env.provider = provider;
	env.cfg = cfg;
	ops = os_adapter_ops();
	ad = ops->adapter_new(&env, err, sizeof(err));
	cr_assert(ad != NULL, "%s", err);
}

static void
teardown(void)
{
	char cmd[300];

	if (ad != NULL)
		ops->adapter_free(ad);
	sm_config_free(cfg);
	json_decref(provider);
	event_base_free(base);
	snprintf(cmd, sizeof(cmd), "sh tests/sim/openstack/ossim.sh stop %s/sim; rm -rf %s", dir,
		 dir);
	cr_assert(system(cmd) == 0);
}

TestSuite(openstack_adapter, .init = setup, .fini = teardown, .timeout = 60);

/* Run the loop until *flag is set. */
static void
run_until(const int *flag)
{
	while (!*flag)
		event_base_loop(base, EVLOOP_ONCE);
}

struct answer {
	int done, ok;
	char id[128], err[300];
	struct drv_quota q;
	int has_extra;
	double volumes;
	char text[256];
	size_t n;
};

static void
upload_cb(const char *id, const char *error, void *arg)
{
	struct answer *a = arg;

	a->done = 1;
	a->ok = id != NULL;
	snprintf(a->id, sizeof(a->id), "%s", id ? id : "");
	snprintf(a->err, sizeof(a->err), "%s", error ? error : "");
}

static void
done_cb(int ok, const char *error, void *arg)
{
	struct answer *a = arg;

	a->done = 1;
	a->ok = ok;
	snprintf(a->err, sizeof(a->err), "%s", error ? error : "");
}

Test(openstack_adapter, image_upload_streams_the_file_and_delete_removes_it)
{
	struct answer a = {0};
	struct sm_upload_args u = {0};
	char file[128], want[128];
	json_t *meta = json_pack("{s:s, s:s}", "nodepool_build_id", "b1", "nodepool_upload_id",
				 "0000000001"),
	       *imgs, *im;
	FILE *f;
	size_t i;

	snprintf(file, sizeof(file), "%s/ubuntu.qcow2", dir);
	f = fopen(file, "w");
	for (i = 0; i < 3 * 1024 * 1024; i++)
		fputc((int)(i % 251), f);
	fclose(f);
	u.image = &cfg->diskimages[0];
	u.image_name = "ubuntu-1700000000";
	u.filename = file;
	u.format = "qcow2";
	u.metadata = meta;
	u.md5 = "d41d8cd98f00b204e9800998ecf8427e";
	ops->upload_image(ad, &u, upload_cb, &a);
	run_until(&a.done);
	cr_assert(a.ok, "upload failed: %s", a.err);
	imgs = ctl("/images");
	im = NULL;
	json_array_foreach(json_object_get(imgs, "images"), i,
			   im) if (strcmp(json_string_value(json_object_get(im, "id")), a.id) ==
				   0) break;
	cr_assert(im != NULL && i < json_array_size(json_object_get(imgs, "images")),
		  "image %s not in the cloud", a.id);
	cr_assert_str_eq(json_string_value(json_object_get(im, "name")), "ubuntu-1700000000");
	cr_assert_str_eq(json_string_value(json_object_get(im, "status")), "active");
	cr_assert_str_eq(json_string_value(json_object_get(im, "disk_format")), "qcow2");
	cr_assert_str_eq(json_string_value(json_object_get(im, "visibility")), "private");
	cr_assert_eq(json_integer_value(json_object_get(im, "size")), 3 * 1024 * 1024);
	cr_assert_str_eq(json_string_value(json_object_get(im, "os")), "linux");
	cr_assert_str_eq(json_string_value(json_object_get(im, "nodepool_upload_id")),
			 "0000000001");
	snprintf(want, sizeof(want), "%s", a.id);
	json_decref(imgs);

	memset(&a, 0, sizeof(a));
	ops->delete_image(ad, want, done_cb, &a);
	run_until(&a.done);
	cr_assert(a.ok, "%s", a.err);
	imgs = ctl("/images");
	json_array_foreach(json_object_get(imgs, "images"), i, im) cr_assert(
	    strcmp(json_string_value(json_object_get(im, "id")), want) != 0, "image still there");
	json_decref(imgs);
	json_decref(meta);
}

Test(openstack_adapter, upload_of_a_missing_file_fails_cleanly)
{
	struct answer a = {0};
	struct sm_upload_args u = {0};
	json_t *imgs, *im;
	size_t i;
	int ours = 0;

	u.image = &cfg->diskimages[0];
	u.image_name = "ghost";
	u.filename = "/nonexistent/file.qcow2";
	u.format = "qcow2";
	u.metadata = NULL;
	ops->upload_image(ad, &u, upload_cb, &a);
	run_until(&a.done);
	cr_assert(!a.ok);
	cr_assert(strstr(a.err, "cannot open") != NULL, "%s", a.err);
	/* the half-made image record is deleted */
	for (i = 0; i < 50; i++)
		event_base_loop(base, EVLOOP_NONBLOCK), usleep(10000);
	imgs = ctl("/images");
	json_array_foreach(
	    json_object_get(imgs, "images"), i,
	    im) if (strcmp(json_string_value(json_object_get(im, "name")), "ghost") == 0) ours++;
	cr_assert_eq(ours, 0);
	json_decref(imgs);
}

static void
quota_cb(const struct drv_quota *q, const char *error, void *arg)
{
	struct answer *a = arg;

	a->done = 1;
	a->ok = q != NULL;
	if (q != NULL) {
		a->q = *q;
		a->has_extra = q->extra != NULL;
		a->volumes = json_number_value(json_object_get(q->extra, "volumes"));
		a->n = json_object_size(q->extra);
		a->q.extra = NULL;
	}
	snprintf(a->err, sizeof(a->err), "%s", error ? error : "");
}

Test(openstack_adapter, limits_from_compute_and_volume)
{
	struct answer a = {0};

	ops->quota_limits(ad, quota_cb, &a);
	run_until(&a.done);
	cr_assert(a.ok, "%s", a.err);
	cr_assert_eq(a.q.instances, 9);
	cr_assert(isinf(a.q.cores), "-1 is unlimited");
	cr_assert(a.has_extra);
	cr_assert_eq(a.volumes, 7);
	cr_assert_eq(a.n, 1, "unlimited volume-gb left out");
}

Test(openstack_adapter, label_quota_from_the_flavor_and_a_missing_flavor)
{
	struct drv_quota q = {0};
	char err[200] = "";
	int i;
	const struct sm_label *ok = sm_config_label(cfg, "main", "ok"),
			      *bad = sm_config_label(cfg, "main", "bad");

	/* before the flavors are read: defaults, not an error */
	q.instances = 1;
	for (i = 0; i < 200; i++) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		usleep(5000);
	}
	cr_assert_eq(ops->label_quota(ad, ok, &q, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(q.cores, 2);
	cr_assert_eq(q.ram, 2048);
	cr_assert_eq(json_number_value(json_object_get(q.extra, "volume-gb")), 30);
	json_decref(q.extra);
	memset(&q, 0, sizeof(q));
	cr_assert_eq(ops->label_quota(ad, bad, &q, err, sizeof(err)), -1);
	cr_assert(strstr(err, "Unable to find flavor with min ram: 999999") != NULL, "%s", err);
	cr_assert(ops->label_ready(ad, ok));
}
