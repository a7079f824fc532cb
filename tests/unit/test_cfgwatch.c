/*
 * lib/config/cfgwatch: the files read whole with a digest, and the watcher
 * on a real event loop and real inotify, with every way an operator or a
 * tool changes a configuration file: rewrite in place, write-to-temp +
 * rename, a symlink swapped, a Kubernetes ConfigMap's `..data` directory
 * symlink swapped. "Not reported" is checked by the next report being the
 * next real change, never by waiting for silence.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <utime.h>

#include <event2/event.h>

#include "lib/core/clock.h"
#include "lib/config/cfgwatch.h"
#include "lib/config/config.h"

static char tmpdir[PATH_MAX];

static void
mktmp(void)
{
	const char *base = getenv("NP_TEST_TMP");

	snprintf(tmpdir, sizeof(tmpdir), "%s/cfgwatch.XXXXXX", base ? base : "/tmp");
	cr_assert_not_null(mkdtemp(tmpdir));
}

static void
rmtmp(void)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	cr_assert_eq(system(cmd), 0);
}

/* tmpdir/name, valid until the 16th next call */
static char *
at(const char *name)
{
	static char buf[16][PATH_MAX + 64];
	static int i;

	i = (i + 1) % 16;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", tmpdir, name);
	return buf[i];
}

/* tmpdir/name, malloc'd */
static char *
path_of(const char *name)
{
	char *p;

	cr_assert(asprintf(&p, "%s/%s", tmpdir, name) > 0);
	return p;
}

static void
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	fputs(text, f);
	cr_assert_eq(fclose(f), 0);
}

/* What the callback saw. */
struct seen {
	int reports;
	char text[2][256]; /* of each file in the last report */
	int err[2];
};

static void
on_change(const struct cfgwatch_snapshot *snap, void *arg)
{
	struct seen *s = arg;
	size_t i;

	s->reports++;
	for (i = 0; i < snap->n && i < 2; i++) {
		s->err[i] = snap->files[i].err;
		snprintf(s->text[i], sizeof(s->text[i]), "%s",
			 snap->files[i].data ? snap->files[i].data : "");
	}
}

static void
on_deadline(evutil_socket_t fd, short what, void *arg)
{
	*(int *)arg = 1;
}

/* Run the loop until the callback has been called `reports` times
 * (fails after 10 s: a change is reported well within a second). */
static void
wait_reports(struct event_base *base, struct seen *s, int reports)
{
	int expired = 0;
	struct event *t = evtimer_new(base, on_deadline, &expired);
	struct timeval tv = {10, 0};

	evtimer_add(t, &tv);
	while (s->reports < reports && !expired)
		event_base_loop(base, EVLOOP_ONCE);
	event_free(t);
	cr_assert_eq(s->reports, reports, "%d reports, wanted %d", s->reports, reports);
}

/* Run the loop for about `seconds`. */
static void
run_for(struct event_base *base, double seconds)
{
	struct timeval tv = np_tv_of(seconds);

	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
}

Test(cfgwatch, a_file_still_open_for_writing_is_not_read_half_written)
{
	struct event_base *base = event_base_new();
	struct seen s = {0};
	struct cfgwatch *w;
	const char *p[1];
	char err[256];
	FILE *f;

	mktmp();
	p[0] = path_of("np.yaml");
	write_file(p[0], "v: 1\n");
	w = cfgwatch_new(base, p, 1, NULL, on_change, &s, err, sizeof(err));
	cr_assert_not_null(w, "%s", err);
	wait_reports(base, &s, 1);
	/* a slow writer: truncated, half written, quiet for longer than
	 * CFGWATCH_MAX_WAIT, then the rest and the close */
	f = fopen(p[0], "w");
	cr_assert_not_null(f);
	fputs("labels:\n", f);
	cr_assert_eq(fflush(f), 0);
	run_for(base, CFGWATCH_MAX_WAIT + 0.5);
	cr_assert_eq(s.reports, 1, "read while open for writing: \"%s\"", s.text[0]);
	fputs("  - name: small\n", f);
	cr_assert_eq(fclose(f), 0);
	wait_reports(base, &s, 2);
	cr_assert_str_eq(s.text[0], "labels:\n  - name: small\n");
	cfgwatch_free(w);
	free((char *)p[0]);
	event_base_free(base);
	rmtmp();
}

Test(cfgwatch, snapshot_equal_follows_the_bytes_not_the_path)
{
	struct cfgwatch_snapshot a = {0}, b = {0}, c = {0}, d = {0};
	const char *pa[] = {NULL}, *pm[] = {NULL};

	mktmp();
	write_file(at("a.yaml"), "labels: []\n");
	write_file(at("b.yaml"), "labels: []\n");
	pa[0] = at("a.yaml");
	cr_assert_eq(cfgwatch_snapshot_read(pa, 1, &a), 0);
	cr_assert_eq(a.files[0].len, 11);
	cr_assert_str_eq(a.files[0].data, "labels: []\n");
	pa[0] = at("b.yaml");
	cfgwatch_snapshot_read(pa, 1, &b);
	cr_assert(cfgwatch_snapshot_equal(&a, &b), "same bytes (other path): equal");
	write_file(at("b.yaml"), "labels: [] \n");
	cfgwatch_snapshot_read(pa, 1, &c);
	cr_assert_not(cfgwatch_snapshot_equal(&a, &c), "one byte more: not equal");
	pm[0] = at("missing.yaml");
	cr_assert_eq(cfgwatch_snapshot_read(pm, 1, &d), 1);
	cr_assert_eq(d.files[0].err, ENOENT);
	cr_assert_null(d.files[0].data);
	cr_assert_not(cfgwatch_snapshot_equal(&a, &d), "a readable file and a missing one");
	cr_assert_not(cfgwatch_snapshot_equal(&d, &a));
	cfgwatch_snapshot_clear(&b);
	cfgwatch_snapshot_copy(&b, &a);
	cr_assert(cfgwatch_snapshot_equal(&a, &b), "a copy");
	cr_assert_str_eq(b.files[0].data, "labels: []\n");
	cfgwatch_snapshot_clear(&a);
	cfgwatch_snapshot_clear(&b);
	cfgwatch_snapshot_clear(&c);
	cfgwatch_snapshot_clear(&d);
	rmtmp();
}

Test(cfgwatch, load_config_reports_positions_and_unreadable_files)
{
	struct cfgwatch_snapshot s = {0};
	struct np_config *cfg = NULL;
	struct np_cfg_errors *errs = NULL;
	const char *p[2];
	char *line;

	mktmp();
	write_file(at("np.yaml"), "zookeeper-servers:\n  - host: localhost\nlabels: 3\n");
	p[0] = path_of("np.yaml");
	p[1] = path_of("secure.conf"); /* missing */
	cfgwatch_snapshot_read(p, 2, &s);
	cr_assert_eq(cfgwatch_load_config(&s, &cfg, &errs), -1);
	cr_assert_eq(np_cfg_errors_count(errs), 1);
	line = np_cfg_error_format(&errs->v[0]);
	cr_assert(strstr(line, "secure.conf: cannot open: No such file") != NULL, "%s", line);
	free(line);
	np_cfg_errors_free(errs);
	cfgwatch_snapshot_clear(&s);

	write_file(at("secure.conf"), "zookeeper-servers:\n  - host: zk2\n");
	cfgwatch_snapshot_read(p, 2, &s);
	cr_assert_eq(cfgwatch_load_config(&s, &cfg, &errs), -1);
	line = np_cfg_error_format(&errs->v[0]);
	cr_assert(strncmp(line, at("np.yaml"), strlen(at("np.yaml"))) == 0 &&
		      strstr(line, ".yaml:3:9: labels:") != NULL,
		  "%s", line);
	free(line);
	np_cfg_errors_free(errs);
	cfgwatch_snapshot_clear(&s);

	write_file(at("np.yaml"), "zookeeper-servers:\n  - host: localhost\nlabels: []\n");
	cfgwatch_snapshot_read(p, 2, &s);
	cr_assert_eq(cfgwatch_load_config(&s, &cfg, &errs), 0, "%s",
		     errs ? np_cfg_error_format(&errs->v[0]) : "");
	cr_assert_str_eq(cfg->zk_servers[0].host, "zk2", "secure.conf merged");
	np_cfg_free(cfg);
	cfgwatch_snapshot_clear(&s);
	free((char *)p[0]);
	free((char *)p[1]);
	rmtmp();
}

Test(cfgwatch, every_way_of_changing_the_file_is_seen_and_unchanged_bytes_are_not)
{
	struct event_base *base = event_base_new();
	struct cfgwatch_snapshot s0 = {0};
	struct seen s = {0};
	struct cfgwatch *w;
	const char *p[1];
	char err[256];

	mktmp();
	p[0] = path_of("np.yaml");
	write_file(p[0], "v: 1\n");
	cfgwatch_snapshot_read(p, 1, &s0);
	w = cfgwatch_new(base, p, 1, &s0, on_change, &s, err, sizeof(err));
	cr_assert_not_null(w, "%s", err);
	/* the contents in force are not reported (the first check runs at once) */
	run_for(base, 0.3);
	cr_assert_eq(s.reports, 0);

	/* in place */
	write_file(p[0], "v: 2\n");
	wait_reports(base, &s, 1);
	cr_assert_str_eq(s.text[0], "v: 2\n");
	/* a touch alone, on its own burst: nothing */
	cr_assert_eq(utime(p[0], NULL), 0);
	run_for(base, CFGWATCH_QUIET + 0.3);
	cr_assert_eq(s.reports, 1);
	/* touch, the same bytes rewritten, another file in the directory:
	 * nothing, so the next report is the rename */
	cr_assert_eq(utime(p[0], NULL), 0);
	write_file(p[0], "v: 2\n");
	write_file(at("other.log"), "noise\n");
	write_file(at("np.yaml.tmp"), "v: 3\n");
	cr_assert_eq(rename(at("np.yaml.tmp"), p[0]), 0);
	wait_reports(base, &s, 2);
	cr_assert_str_eq(s.text[0], "v: 3\n");

	/* deleted: reported once as missing; back: reported */
	cr_assert_eq(unlink(p[0]), 0);
	wait_reports(base, &s, 3);
	cr_assert_eq(s.err[0], ENOENT);
	write_file(p[0], "v: 4\n");
	wait_reports(base, &s, 4);
	cr_assert_eq(s.err[0], 0);
	cr_assert_str_eq(s.text[0], "v: 4\n");

	/* a configuration tool's symlink swap: np.yaml -> v5/np.yaml */
	cr_assert_eq(mkdir(at("v5"), 0755), 0);
	write_file(at("v5/np.yaml"), "v: 5\n");
	cr_assert_eq(symlink("v5/np.yaml", at("np.yaml.new")), 0);
	cr_assert_eq(rename(at("np.yaml.new"), p[0]), 0);
	wait_reports(base, &s, 5);
	cr_assert_str_eq(s.text[0], "v: 5\n");
	/* the link's target edited in place (its directory is watched now) */
	write_file(at("v5/np.yaml"), "v: 6\n");
	wait_reports(base, &s, 6);
	cr_assert_str_eq(s.text[0], "v: 6\n");

	cfgwatch_free(w);
	free((char *)p[0]);
	cfgwatch_snapshot_clear(&s0);
	event_base_free(base);
	rmtmp();
}

Test(cfgwatch, kubernetes_configmap_data_swap_is_seen)
{
	struct event_base *base = event_base_new();
	struct seen s = {0};
	struct cfgwatch *w;
	const char *p[2];
	char err[256];

	/* the layout the kubelet writes: np.yaml -> ..data/np.yaml,
	 * ..data -> ..2024_1; an update writes ..2024_2, points ..data_tmp
	 * at it, renames ..data_tmp over ..data and removes ..2024_1 */
	mktmp();
	cr_assert_eq(mkdir(at("..2024_1"), 0755), 0);
	write_file(at("..2024_1/np.yaml"), "v: 1\n");
	write_file(at("..2024_1/secure.conf"), "s: 1\n");
	cr_assert_eq(symlink("..2024_1", at("..data")), 0);
	cr_assert_eq(symlink("..data/np.yaml", at("np.yaml")), 0);
	cr_assert_eq(symlink("..data/secure.conf", at("secure.conf")), 0);
	p[0] = path_of("np.yaml");
	p[1] = path_of("secure.conf");
	/* no digest in force: the first contents are reported */
	w = cfgwatch_new(base, p, 2, NULL, on_change, &s, err, sizeof(err));
	cr_assert_not_null(w, "%s", err);
	wait_reports(base, &s, 1);
	cr_assert_str_eq(s.text[0], "v: 1\n");
	cr_assert_str_eq(s.text[1], "s: 1\n");

	cr_assert_eq(mkdir(at("..2024_2"), 0755), 0);
	write_file(at("..2024_2/np.yaml"), "v: 1\n");
	write_file(at("..2024_2/secure.conf"), "s: 2\n");
	cr_assert_eq(symlink("..2024_2", at("..data_tmp")), 0);
	cr_assert_eq(rename(at("..data_tmp"), at("..data")), 0);
	cr_assert_eq(unlink(at("..2024_1/np.yaml")), 0);
	cr_assert_eq(unlink(at("..2024_1/secure.conf")), 0);
	cr_assert_eq(rmdir(at("..2024_1")), 0);
	wait_reports(base, &s, 2);
	cr_assert_str_eq(s.text[0], "v: 1\n");
	cr_assert_str_eq(s.text[1], "s: 2\n");

	cfgwatch_free(w);
	free((char *)p[0]);
	free((char *)p[1]);
	event_base_free(base);
	rmtmp();
}
