/*
 * nodepoold: the supervisor.
 *
 *   nodepoold [-c CONFIG] [-s SECURE] [-p PIDFILE] [-d] [-f] [-n]
 *             [-u USER] [--web-user USER] [--builder-user USER]
 *             [--no-builder] [--allow-root] [start|stop|status|reload]
 *
 * -n checks the configuration and exits 0/1, every error printed as
 * file:line:col. The verbs are what an init script expects: start
 * detaches and exits 0 once the daemon is up (control socket listening,
 * pid file written) or was already running; stop sends SIGTERM to the pid
 * in the pid file and waits (0 also when not running); status exits 0
 * when running, 3 when not (LSB); reload sends SIGHUP. No verb and no -f
 * means start; -f runs in the foreground, logging to stderr.
 *
 * A change of the configuration files is applied without a signal, as by
 * SIGHUP (reload.c, lib/config/cfgwatch.h; the nodepoold section's
 * reload-on-change: false turns that off).
 *
 * Privileges (lib/core/privsep.h): -u runs the launchers as USER,
 * --web-user the web API, --builder-user the builder (both default to
 * -u's); nodepoold needs root or CAP_SETUID/CAP_SETGID for that. As root
 * with no -u it refuses to start unless --allow-root. --no-builder: the
 * diskimages are built by nodepool-builder's own unit, not from here.
 *
 * Signals: SIGHUP reloads, SIGTERM/SIGINT stop (every child is sent STOP,
 * and SIGKILL after a bound), SIGUSR2 logs the process table and forwards
 * SIGUSR2 to every child (each logs its own state).
 */
#include "supervisor/sup.h"

#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "lib/config/cfgwatch.h"
#include "lib/config/config.h"
#include "lib/ops/daemon_paths.h"
#include "lib/core/log.h"
#include "lib/core/memtrim.h"
#include "lib/core/version.h"

/* How long `nodepoold stop` waits for the daemon to go, seconds. */
#define SUP_STOP_WAIT (SUP_SHUTDOWN_TIMEOUT + 10)
/* LSB status codes. */
#define LSB_RUNNING	0
#define LSB_NOT_RUNNING 3
#define LSB_UNKNOWN	4

static void __attribute__((noreturn)) usage(void)
{
	fprintf(stderr, "usage: nodepoold [-dfn] [-c CONFIG] [-s SECURE] [-p PIDFILE] [-u USER]\n"
			"                 [--web-user USER] [--builder-user USER] [--no-builder]\n"
			"                 [--allow-root] [start|stop|status|reload]\n");
	exit(1);
}

/* path made absolute against the current directory (malloc'd). */
static char *
absolute(const char *path)
{
	char cwd[PATH_MAX], *out;

	if (path[0] == '/' || getcwd(cwd, sizeof(cwd)) == NULL)
		out = strdup(path);
	else if (asprintf(&out, "%s/%s", cwd, path) < 0)
		out = NULL;
	if (out == NULL)
		abort();
	return out;
}

static char *
own_bindir(void)
{
	char exe[PATH_MAX], *d;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0)
		fatal("cannot find nodepoold's own executable (/proc/self/exe)");
	exe[n] = '\0';
	if ((d = strdup(dirname(exe))) == NULL)
		abort();
	return d;
}

/*
 * Whom the children run as: -u for the launchers, --web-user and
 * --builder-user defaulting to it. Refuses root with nothing to drop to
 * (unless --allow-root) and a user nodepoold cannot become. 0, or -1 with
 * the message printed.
 */
static int
resolve_users(struct sup *sup, const char *user, const char *web_user, const char *builder_user)
{
	const char *names[IPC_KIND_COUNT] = {0};
	char err[256];
	int k;

	names[IPC_KIND_PROVIDER] = user;
	names[IPC_KIND_WEB] = web_user ? web_user : user;
	names[IPC_KIND_BUILDER] = builder_user ? builder_user : user;
	for (k = 0; k < IPC_KIND_COUNT; k++) {
		if (names[k] == NULL) {
			if (privsep_root_check("nodepoold") < 0)
				return -1;
			continue;
		}
		if (privsep_user_lookup(names[k], &sup->users[k], err, sizeof(err)) < 0) {
			fprintf(stderr, "nodepoold: %s\n", err);
			return -1;
		}
		if (sup->users[k].uid == 0 && privsep_root_check("nodepoold") < 0)
			return -1;
		if (!privsep_can_become(&sup->users[k])) {
			fprintf(stderr,
				"nodepoold: cannot run the %s as %s: nodepoold needs root or "
				"CAP_SETUID and CAP_SETGID\n",
				sup_role(k)->role_name, names[k]);
			return -1;
		}
	}
	return 0;
}

/* ---- the verbs ------------------------------------------------------------- */

static int
verb_status(const char *pidfile)
{
	char err[512];
	pid_t pid = sup_pidfile_read(pidfile, err, sizeof(err));

	if (pid < 0) {
		fprintf(stderr, "nodepoold: %s\n", err);
		return LSB_UNKNOWN;
	}
	if (pid > 0 && sup_pid_alive(pid)) {
		printf("nodepoold is running (pid %ld)\n", (long)pid);
		return LSB_RUNNING;
	}
	printf("nodepoold is not running\n");
	return LSB_NOT_RUNNING;
}

static int
verb_stop(const char *pidfile)
{
	char err[512];
	pid_t pid = sup_pidfile_read(pidfile, err, sizeof(err));
	double deadline;

	if (pid < 0) {
		fprintf(stderr, "nodepoold: %s\n", err);
		return 1;
	}
	if (pid == 0 || !sup_pid_alive(pid)) {
		printf("nodepoold is not running\n");
		return 0;
	}
	if (kill(pid, SIGTERM) < 0) {
		fprintf(stderr, "nodepoold: cannot signal pid %ld: %s\n", (long)pid,
			strerror(errno));
		return 1;
	}
	deadline = sup_now() + SUP_STOP_WAIT;
	while (sup_pid_alive(pid)) {
		if (sup_now() > deadline) {
			fprintf(stderr, "nodepoold: pid %ld still running after %.0f s\n",
				(long)pid, (double)SUP_STOP_WAIT);
			return 1;
		}
		usleep(20000);
	}
	printf("nodepoold stopped (pid %ld)\n", (long)pid);
	return 0;
}

static int
verb_reload(const char *pidfile)
{
	char err[512];
	pid_t pid = sup_pidfile_read(pidfile, err, sizeof(err));

	if (pid < 0) {
		fprintf(stderr, "nodepoold: %s\n", err);
		return 1;
	}
	if (pid == 0 || !sup_pid_alive(pid)) {
		fprintf(stderr, "nodepoold is not running\n");
		return 1;
	}
	if (kill(pid, SIGHUP) < 0) {
		fprintf(stderr, "nodepoold: cannot signal pid %ld: %s\n", (long)pid,
			strerror(errno));
		return 1;
	}
	printf("nodepoold (pid %ld): reload requested\n", (long)pid);
	return 0;
}

/* ---- the daemon ------------------------------------------------------------- */

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	sup_signal(arg, (int)sig);
}

/* Fail at start-up: tell the waiting parent (daemon) or the terminal. */
static void __attribute__((noreturn)) start_failed(const char *msg, bool already)
{
	log_error("%s", msg);
	sup_daemon_failed(msg, already);
	exit(1);
}

static int
run(struct sup *sup, struct np_config *cfg, bool daemonize)
{
	static const int sigs[] = {SIGCHLD, SIGHUP, SIGTERM, SIGINT, SIGUSR2};
	struct event *sev[sizeof(sigs) / sizeof(sigs[0])];
	struct sup_reload_result res;
	struct sup_child *c;
	char err[512];
	size_t i;

	if (daemonize)
		sup_daemonize();
	sup->started_at = sup_now();
	signal(SIGPIPE, SIG_IGN);
	if ((sup->base = event_base_new()) == NULL)
		start_failed("event_base_new failed", false);
	/* Signals first: a SIGTERM from now on is an orderly stop (delivered
	 * once the loop runs), never a death that leaves the socket behind. */
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		sev[i] = evsignal_new(sup->base, sigs[i], on_signal, sup);
		if (sev[i] == NULL || event_add(sev[i], NULL) < 0)
			start_failed("cannot watch signals", false);
	}
	if (sup_ctl_start(sup, err, sizeof(err)) < 0)
		start_failed(err, strstr(err, "already running") != NULL && daemonize);
	/* The pid file is written once the control socket is up: a pid file
	 * means nodepoolctl can reach the daemon. */
	if (sup_pidfile_write(sup->pid_file, getpid(), err, sizeof(err)) < 0) {
		sup_ctl_stop(sup);
		start_failed(err, false);
	}
	log_info("nodepoold %s started: pid %ld, config %s, control socket %s, pid file %s",
		 NP_VERSION, (long)getpid(), sup->config_path, sup->ctl_path, sup->pid_file);
	sup_daemon_ready();

	sup_timers_new(sup);
	/* Children are started only now: SIGCHLD is watched. */
	sup_apply_config(sup, cfg, &res);
	log_info("configuration generation %lld: %zu children", (long long)sup->gen, res.added);
	sup_reload_result_clear(&res);
	sup_watch_update(sup);
	np_mem_trim_startup("children started");
	/* A SIGTERM that came while starting is delivered now. */
	event_base_dispatch(sup->base);

	log_info("stopped");
	sup_ctl_stop(sup);
	sup_pidfile_remove(sup->pid_file, getpid());
	while ((c = TAILQ_FIRST(&sup->children)) != NULL) {
		TAILQ_REMOVE(&sup->children, c, entry);
		sup_child_free(c);
	}
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		event_free(sev[i]);
	sup_timers_free(sup);
	cfgwatch_free(sup->watch);
	sup->watch = NULL;
	np_cfg_free(sup->cfg);
	event_base_free(sup->base);
	return 0;
}

int
main(int argc, char **argv)
{
	const char *config = NP_DEFAULT_CONFIG, *secure = NULL, *pidfile = NULL, *verb = NULL;
	const char *user = NULL, *web_user = NULL, *builder_user = NULL;
	bool debug = false, foreground = false, check = false, no_builder = false;
	struct np_config *cfg = NULL;
	struct np_cfg_errors *errs = NULL;
	struct sup sup;
	struct cfgwatch_snapshot snap = {0};
	const char *paths[2];
	char *pid_path = NULL, err[512];
	pid_t pid;
	int c, rc;
	static const struct option longopts[] = {
	    {"version", no_argument, NULL, 'V'},
	    {"help", no_argument, NULL, 'h'},
	    {"web-user", required_argument, NULL, 'W'},
	    {"builder-user", required_argument, NULL, 'B'},
	    {"no-builder", no_argument, NULL, 'N'},
	    {"allow-root", no_argument, NULL, 'R'},
	    {NULL, 0, NULL, 0},
	};

	while ((c = getopt_long(argc, argv, "c:s:p:u:dfnhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'u':
			user = optarg;
			break;
		case 'W':
			web_user = optarg;
			break;
		case 'B':
			builder_user = optarg;
			break;
		case 'N':
			no_builder = true;
			break;
		case 'R':
			privsep_allow_root(); /* the children inherit it */
			break;
		case 'c':
			config = optarg;
			break;
		case 's':
			secure = optarg;
			break;
		case 'p':
			pidfile = optarg;
			break;
		case 'd':
			debug = true;
			break;
		case 'f':
			foreground = true;
			break;
		case 'n':
			check = true;
			break;
		case 'V':
			printf("nodepoold %s\n", NP_VERSION);
			return 0;
		default:
			usage();
		}
	}
	if (optind < argc)
		verb = argv[optind++];
	if (optind < argc)
		usage();
	if (verb != NULL && strcmp(verb, "start") != 0 && strcmp(verb, "stop") != 0 &&
	    strcmp(verb, "status") != 0 && strcmp(verb, "reload") != 0)
		usage();
	/* secure.conf is optional: the default one only when it exists. */
	if (secure == NULL && access(NP_DEFAULT_SECURE, F_OK) == 0)
		secure = NP_DEFAULT_SECURE;
	log_init("nodepoold", debug ? LOG_LVL_DEBUG : LOG_LVL_INFO);

	if (check) {
		if (np_cfg_load(config, secure, &cfg, &errs) != 0) {
			np_cfg_errors_print(errs, stderr);
			np_cfg_errors_free(errs);
			return 1;
		}
		np_cfg_free(cfg);
		return 0;
	}
	if (verb != NULL && strcmp(verb, "start") != 0) {
		if (pidfile == NULL) {
			if (np_daemon_paths(config, 0, NULL, &pid_path, err, sizeof(err)) < 0) {
				fprintf(stderr, "nodepoold: %s\n", err);
				return strcmp(verb, "status") == 0 ? LSB_UNKNOWN : 1;
			}
			pidfile = pid_path;
		}
		if (strcmp(verb, "stop") == 0)
			rc = verb_stop(pidfile);
		else if (strcmp(verb, "status") == 0)
			rc = verb_status(pidfile);
		else
			rc = verb_reload(pidfile);
		free(pid_path);
		return rc;
	}

	/* start: check everything before detaching, so that errors reach the
	 * terminal (or the init script's log) and the exit status. The bytes
	 * loaded are the ones the watcher compares with. */
	paths[0] = config;
	paths[1] = secure;
	cfgwatch_snapshot_read(paths, secure != NULL ? 2 : 1, &snap);
	rc = cfgwatch_load_config(&snap, &cfg, &errs);
	memset(&sup, 0, sizeof(sup));
	sup.seen = snap; /* taken */
	if (rc != 0) {
		fprintf(stderr, "nodepoold: %s: %zu configuration error(s); not started\n", config,
			np_cfg_errors_count(errs));
		np_cfg_errors_print(errs, stderr);
		np_cfg_errors_free(errs);
		cfgwatch_snapshot_clear(&sup.seen);
		return 1;
	}
	if (resolve_users(&sup, user, web_user, builder_user) < 0) {
		np_cfg_free(cfg);
		cfgwatch_snapshot_clear(&sup.seen);
		return 1;
	}
	/* No core file nor ptrace by our own user: the secrets are loaded. */
	privsep_harden(false);
	sup.no_builder = no_builder;
	if (no_builder && cfg->ndiskimages > 0)
		log_info(
		    "diskimages are configured; --no-builder: nodepool-builder runs on its own");
	TAILQ_INIT(&sup.children);
	TAILQ_INIT(&sup.ctls);
	sup.ctl_fd = -1;
	sup.debug = debug;
	sup.bindir = own_bindir();
	sup.config_path = absolute(config);
	sup.secure_path = secure ? absolute(secure) : NULL;
	sup.pid_file = absolute(pidfile ? pidfile : cfg->nodepoold.pid_file);
	sup.ctl_path = absolute(cfg->nodepoold.control_socket);
	if (!foreground && (pid = sup_pidfile_read(sup.pid_file, err, sizeof(err))) > 0 &&
	    sup_pid_alive(pid)) {
		printf("nodepoold is already running (pid %ld)\n", (long)pid);
		np_cfg_free(cfg);
		rc = 0;
	} else {
		rc = run(&sup, cfg, !foreground);
	}
	free(sup.bindir);
	free(sup.config_path);
	free(sup.secure_path);
	free(sup.pid_file);
	free(sup.ctl_path);
	free(sup.webapp_listen_address);
	cfgwatch_snapshot_clear(&sup.seen);
	return rc;
}
