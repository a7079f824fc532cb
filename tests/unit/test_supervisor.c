/*
 * The supervisor's pure parts: restart back-off, STATUS poll period, the
 * pid file, wait statuses, the process table, the slices children get,
 * and lib/daemon_paths (how the verbs and nodepoolctl find the pid file
 * and control socket). The lifecycle itself runs with real processes in
 * tests/process/test_supervisor*.py.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/config/config.h"
#include "lib/ops/daemon_paths.h"
#include "supervisor/sup.h"

static char tmpdir[PATH_MAX];

static void
mktmp(void)
{
	const char *base = getenv("NP_TEST_TMP");

	snprintf(tmpdir, sizeof(tmpdir), "%s/sup-unit.XXXXXX", base ? base : "/tmp");
	cr_assert_not_null(mkdtemp(tmpdir));
}

static void
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

Test(backoff, first_failure_restarts_at_once_then_doubles_to_the_cap)
{
	cr_assert_eq(sup_backoff_delay(1, 60), 0);
	cr_assert_eq(sup_backoff_delay(2, 60), 1);
	cr_assert_eq(sup_backoff_delay(3, 60), 2);
	cr_assert_eq(sup_backoff_delay(4, 60), 4);
	cr_assert_eq(sup_backoff_delay(7, 60), 32);
	cr_assert_eq(sup_backoff_delay(8, 60), 60);
	cr_assert_eq(sup_backoff_delay(1000, 60), 60);
	cr_assert_eq(sup_backoff_delay(2, 0.5), 0.5);
	cr_assert_eq(sup_backoff_delay(INT_MAX, 5), 5);
}

Test(backoff, status_poll_period_follows_the_timeout)
{
	cr_assert_eq(sup_poll_interval(30), 5);	 /* the default: every 5 s */
	cr_assert_eq(sup_poll_interval(2), 0.5); /* four polls per timeout */
	cr_assert_eq(sup_poll_interval(0.01), 0.1);
}

Test(pidfile, parse_is_strict)
{
	cr_assert_eq(sup_pidfile_parse("123\n", 4), 123);
	cr_assert_eq(sup_pidfile_parse("123", 3), 123);
	cr_assert_eq(sup_pidfile_parse("2147483647\n", 11), 2147483647);
	cr_assert_eq(sup_pidfile_parse("", 0), -1);
	cr_assert_eq(sup_pidfile_parse("0\n", 2), -1);
	cr_assert_eq(sup_pidfile_parse("-5\n", 3), -1);
	cr_assert_eq(sup_pidfile_parse("012\n", 4), -1);
	cr_assert_eq(sup_pidfile_parse("12a\n", 4), -1);
	cr_assert_eq(sup_pidfile_parse("12\n\n", 4), -1);
	cr_assert_eq(sup_pidfile_parse(" 12\n", 4), -1);
	cr_assert_eq(sup_pidfile_parse("2147483648\n", 11), -1);
	cr_assert_eq(sup_pidfile_parse("99999999999999999999", 20), -1);
}

Test(pidfile, write_read_remove)
{
	char path[PATH_MAX + 32], err[256];
	struct stat st;

	mktmp();
	snprintf(path, sizeof(path), "%s/run/nodepoold/npd.pid", tmpdir);
	cr_assert_eq(sup_pidfile_read(path, err, sizeof(err)), 0); /* none yet */
	cr_assert_eq(sup_pidfile_write(path, 4242, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0644);
	cr_assert_eq(sup_pidfile_read(path, err, sizeof(err)), 4242);
	sup_pidfile_remove(path, 4243); /* not ours: stays */
	cr_assert_eq(sup_pidfile_read(path, err, sizeof(err)), 4242);
	sup_pidfile_remove(path, 4242);
	cr_assert_eq(access(path, F_OK), -1);
	write_file(path, "nodepoold\n");
	cr_assert_eq(sup_pidfile_read(path, err, sizeof(err)), -1);
	cr_assert(strstr(err, "does not hold a pid") != NULL, "%s", err);
}

Test(pidfile, alive_means_a_live_nodepoold)
{
	pid_t pid;
	int st;

	/* this process is alive but is not nodepoold (/proc/self/comm) */
	cr_assert(!sup_pid_alive(getpid()));
	cr_assert(!sup_pid_alive(0));
	cr_assert(!sup_pid_alive(-1));
	/* a zombie is gone */
	pid = fork();
	if (pid == 0)
		_exit(0);
	for (int i = 0; i < 200; i++) {
		char path[64], buf[256];
		FILE *f;
		snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
		if ((f = fopen(path, "r")) == NULL)
			break;
		if (fgets(buf, sizeof(buf), f) && strstr(buf, ") Z ")) {
			fclose(f);
			break;
		}
		fclose(f);
		usleep(10000);
	}
	cr_assert(!sup_pid_alive(pid));
	waitpid(pid, &st, 0);
	cr_assert(!sup_pid_alive(pid));
}

Test(wstatus, names_exits_and_signals)
{
	char buf[128];
	pid_t pid;
	int st;

	pid = fork();
	if (pid == 0)
		_exit(100);
	waitpid(pid, &st, 0);
	cr_assert_str_eq(sup_wstatus_str(st, buf, sizeof(buf)), "exited 100");
	pid = fork();
	if (pid == 0) {
		pause();
		_exit(0);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	cr_assert_str_eq(sup_wstatus_str(st, buf, sizeof(buf)), "killed by signal 9 (Killed)");
}

Test(proctab, roles)
{
	const struct sup_role *p = sup_role(IPC_KIND_PROVIDER), *b = sup_role(IPC_KIND_BUILDER);

	cr_assert_str_eq(p->program, "nodepool-launcher");
	cr_assert(!p->optional);
	cr_assert_eq(p->restart, SUP_RESTART_ALWAYS);
	cr_assert_str_eq(b->program, "nodepool-builder");
	cr_assert(b->optional);
	cr_assert_str_eq(sup_role(IPC_KIND_WEB)->program, "nodepool-web");
	cr_assert_str_eq(sup_role(IPC_KIND_WEB)->role_name, "web");
	cr_assert(!sup_role(IPC_KIND_WEB)->optional);
	cr_assert_eq(sup_role(IPC_KIND_WEB)->restart, SUP_RESTART_ALWAYS);
	cr_assert_null(sup_role(IPC_KIND_COUNT));
	cr_assert_null(sup_role((enum ipc_child_kind) - 1));
	cr_assert_str_eq(sup_state_name(SUP_BACKOFF), "backoff");
	cr_assert_str_eq(sup_event_name(SUP_EV_TIMER), "timer");
}

Test(proctab, spawn_of_a_missing_program_fails_before_forking)
{
	char err[256];
	int fd = -1;

	mktmp();
	cr_assert_eq(
	    sup_spawn(sup_role(IPC_KIND_PROVIDER), tmpdir, "p", false, NULL, &fd, err, sizeof(err)),
	    -1);
	cr_assert(strstr(err, "cannot execute") != NULL && strstr(err, "nodepool-launcher"), "%s",
		  err);
	cr_assert_eq(fd, -1);
}

static const char slice_yaml[] = "zookeeper-servers:\n"
				 "  - host: zk.example.org\n"
				 "    port: 2281\n"
				 "labels:\n"
				 "  - name: small\n"
				 "    min-ready: 2\n"
				 "providers:\n"
				 "  - name: a\n"
				 "    driver: static\n"
				 "    pools:\n"
				 "      - name: main\n"
				 "        nodes:\n"
				 "          - name: h1\n"
				 "            labels: [small]\n"
				 "  - name: b\n"
				 "    driver: static\n"
				 "    pools:\n"
				 "      - name: main\n"
				 "        nodes:\n"
				 "          - name: h2\n"
				 "            labels: [small]\n"
				 "nodepoold:\n"
				 "  worker-status-timeout: 3\n"
				 "  restart-backoff-max: 7\n"
				 "  control-socket: /tmp/x.sock\n"
				 "  cleanup-interval: 9\n"
				 "  request-lock-cleanup-age: 5\n"
				 "  peer-takeover-delay: 0.5\n";

Test(slices, worker_slice_leaves_out_what_only_nodepoold_reads)
{
	struct np_config *cfg = NULL;
	struct np_cfg_errors *errs = NULL;
	json_t *a, *b, *np;

	cr_assert_eq(np_cfg_load_buffer("nodepool.yaml", slice_yaml, strlen(slice_yaml), NULL, NULL,
					0, &cfg, &errs),
		     0);
	a = sup_worker_slice(cfg, "a");
	b = sup_worker_slice(cfg, "b");
	cr_assert_not_null(a);
	cr_assert_null(sup_worker_slice(cfg, "nope"));
	np = json_object_get(a, "nodepoold");
	cr_assert_eq(json_number_value(json_object_get(np, "cleanup-interval")), 9);
	cr_assert_eq(json_number_value(json_object_get(np, "request-lock-cleanup-age")), 5,
		     "the workers run the request-lock GC");
	cr_assert_eq(json_number_value(json_object_get(np, "peer-takeover-delay")), 0.5,
		     "the workers rank requests among their peers");
	cr_assert_null(json_object_get(np, "worker-status-timeout"));
	cr_assert_null(json_object_get(np, "restart-backoff-max"));
	cr_assert_null(json_object_get(np, "control-socket"));
	cr_assert_null(json_object_get(np, "pid-file"));
	/* no worker serves the web API under nodepoold: nodepool-web does */
	cr_assert_null(json_object_get(a, "webapp"));
	cr_assert_null(json_object_get(b, "webapp"));
	/* min-ready belongs to the first provider offering the label */
	cr_assert_eq(json_integer_value(json_object_get(
			 json_array_get(json_object_get(a, "labels"), 0), "min-ready")),
		     2);
	cr_assert_eq(json_integer_value(json_object_get(
			 json_array_get(json_object_get(b, "labels"), 0), "min-ready")),
		     0);
	json_decref(a);
	json_decref(b);
	np_cfg_free(cfg);
}

Test(slices, builder_gets_the_whole_configuration)
{
	struct np_config *cfg = NULL, *again = NULL;
	struct np_cfg_errors *errs = NULL;
	json_t *s;
	char *text;

	cr_assert_eq(np_cfg_load_buffer("nodepool.yaml", slice_yaml, strlen(slice_yaml), NULL, NULL,
					0, &cfg, &errs),
		     0);
	s = sup_builder_slice(cfg);
	cr_assert(json_is_null(json_object_get(s, "secure")));
	text = json_dumps(json_object_get(s, "config"), JSON_COMPACT);
	/* what the builder does with it: load it as a configuration */
	cr_assert_eq(
	    np_cfg_load_buffer("builder", text, strlen(text), NULL, NULL, 0, &again, &errs), 0);
	cr_assert_eq(again->nproviders, 2);
	cr_assert_str_eq(again->zk_hosts, cfg->zk_hosts);
	free(text);
	json_decref(s);
	np_cfg_free(cfg);
	np_cfg_free(again);
}

Test(daemon_paths, from_the_nodepoold_section_or_defaults)
{
	char path[PATH_MAX + 32], err[256], *sock = NULL, *pid = NULL;

	mktmp();
	snprintf(path, sizeof(path), "%s/nodepool.yaml", tmpdir);
	/* no file: defaults, unless it must exist */
	cr_assert_eq(np_daemon_paths(path, 0, &sock, &pid, err, sizeof(err)), 0);
	cr_assert_str_eq(sock, NP_DEFAULT_CONTROL_SOCKET);
	cr_assert_str_eq(pid, NP_DEFAULT_PID_FILE);
	free(sock);
	free(pid);
	cr_assert_eq(np_daemon_paths(path, 1, &sock, &pid, err, sizeof(err)), -1);
	cr_assert(strstr(err, "cannot read") && strstr(err, "No such file"), "%s", err);
	/* set, in a file with an error elsewhere (not validated) and NODEPOOL_ vars */
	setenv("NODEPOOL_RUN", "/srv/np", 1);
	write_file(path, "labels: 3\nnodepoold:\n  control-socket: \"%(NODEPOOL_RUN)/c.sock\"\n"
			 "  pid-file: /srv/np/p.pid\n");
	cr_assert_eq(np_daemon_paths(path, 1, &sock, NULL, err, sizeof(err)), 0);
	cr_assert_str_eq(sock, "/srv/np/c.sock");
	free(sock);
	cr_assert_eq(np_daemon_paths(path, 1, NULL, &pid, err, sizeof(err)), 0);
	cr_assert_str_eq(pid, "/srv/np/p.pid");
	free(pid);
	/* not YAML at all: defaults */
	write_file(path, "nodepoold: [\n");
	cr_assert_eq(np_daemon_paths(path, 1, &sock, &pid, err, sizeof(err)), 0);
	cr_assert_str_eq(sock, NP_DEFAULT_CONTROL_SOCKET);
	free(sock);
	free(pid);
}

Test(slices, web_gets_zookeeper_and_webapp)
{
	struct np_config *cfg = NULL;
	struct np_cfg_errors *errs = NULL;
	json_t *w;

	cr_assert_eq(np_cfg_load_buffer("nodepool.yaml", slice_yaml, strlen(slice_yaml), NULL, NULL,
					0, &cfg, &errs),
		     0);
	w = sup_web_slice(cfg);
	cr_assert_str_eq(
	    json_string_value(json_object_get(json_object_get(w, "zookeeper"), "hosts")),
	    cfg->zk_hosts);
	cr_assert(json_is_null(json_object_get(json_object_get(w, "zookeeper"), "tls")));
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(w, "webapp"), "port")),
		     8005);
	cr_assert_str_eq(
	    json_string_value(json_object_get(json_object_get(w, "webapp"), "listen_address")),
	    "0.0.0.0");
	cr_assert_null(json_object_get(w, "providers"), "the web process needs no provider");
	json_decref(w);
	np_cfg_free(cfg);
}
