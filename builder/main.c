/*
 * nodepool-builder: diskimage builds and uploads (builder.h).
 *
 *   nodepool-builder -c nodepool.yaml [-s secure.conf] [-f] [-d]
 *       [--build-workers N] [--upload-workers N] [--allow-root]
 *       on its own (upstream deployments put builders on their own hosts).
 *   nodepool-builder --channel 3 [-d]
 *       under nodepoold: the configuration arrives as a CONFIG message.
 *   nodepool-builder --worker build|upload --channel 3 [-d]
 *       one of the builder's own workers (builder/pool.c starts them).
 *
 * Exit codes as a provider's worker: 0 clean stop; 1 error (restart); 100
 * permanent (bad configuration: no images-dir, no ZooKeeper servers).
 *
 * The driver host services are registered here, at start, in every mode
 * (bld_host_ops, builder/upload.c; drivers/host.h).
 */
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "builder/builder.h"
#include "lib/core/childproc.h"
#include "drivers/driver.h"
#include "drivers/host.h"
#include "lib/core/log.h"
#include "lib/core/privsep.h"
#include "lib/core/version.h"

#define EXIT_PERMANENT 100

/* ---- the program -------------------------------------------------------------- */

static void
usage(void)
{
	fprintf(stderr, "usage: nodepool-builder (-c CONFIG [-s SECURE] | --channel FD) [-f] [-d]\n"
			"           [--build-workers N] [--upload-workers N] [--allow-root]\n");
	exit(2);
}

static void
stop_builder(void *arg)
{
	builder_stop(arg);
}

static void
dump_builder(void *arg, struct evbuffer *out)
{
	builder_dump(arg, out);
}

static void
sig_chld(evutil_socket_t sig, short what, void *arg)
{
	builder_sigchld(arg);
}

static double
num_arg(const char *opt, const char *v, double min)
{
	char *end;
	double d = strtod(v, &end);

	if (*v == '\0' || *end != '\0' || d < min) {
		fprintf(stderr, "nodepool-builder: %s: bad value %s\n", opt, v);
		exit(2);
	}
	return d;
}

int
main(int argc, char **argv)
{
	struct builder_options o;
	const char *worker = NULL;
	char exe[PATH_MAX], err[1024];
	struct event_base *base;
	struct childproc_signals sigs;
	struct event *ev_chld;
	struct builder *b;
	ssize_t n;
	int c, rc;
	static const struct option longopts[] = {
	    {"channel", required_argument, NULL, 'C'},
	    {"build-workers", required_argument, NULL, 'B'},
	    {"upload-workers", required_argument, NULL, 'U'},
	    {"interval", required_argument, NULL, 'I'},
	    {"cleanup-interval", required_argument, NULL, 'K'},
	    {"upload-retry-delay", required_argument, NULL, 'R'},
	    {"worker", required_argument, NULL, 'W'},
	    {"allow-root", no_argument, NULL, 'A'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};

	memset(&o, 0, sizeof(o));
	o.channel_fd = -1;
	o.build_workers = 1;
	o.upload_workers = 4;
	o.interval = 10;
	o.cleanup_interval = 60;
	o.upload_retry_delay = 10;
	while ((c = getopt_long(argc, argv, "c:s:dfp:l:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			o.config = optarg;
			break;
		case 's':
			o.secure = optarg;
			break;
		case 'd':
			o.debug = true;
			break;
		case 'f':
		case 'p':
		case 'l':
			break; /* always in the foreground; logs go to stderr */
		case 'C':
			o.channel_fd = atoi(optarg);
			break;
		case 'B':
			o.build_workers = (int)num_arg("--build-workers", optarg, 1);
			break;
		case 'U':
			o.upload_workers = (int)num_arg("--upload-workers", optarg, 1);
			break;
		case 'I':
			o.interval = num_arg("--interval", optarg, 0.05);
			break;
		case 'K':
			o.cleanup_interval = num_arg("--cleanup-interval", optarg, 0.05);
			break;
		case 'R':
			o.upload_retry_delay = num_arg("--upload-retry-delay", optarg, 0);
			break;
		case 'W':
			worker = optarg;
			break;
		case 'A':
			privsep_allow_root(); /* its workers inherit it */
			break;
		case 'V':
			printf("nodepool-builder %s\n", NP_VERSION);
			return 0;
		default:
			usage();
		}
	}
	if (optind != argc || (o.config == NULL && o.channel_fd < 0))
		usage();
	if (o.channel_fd >= 0 && childproc_channel_check("nodepool-builder", o.channel_fd) != 0)
		return EXIT_PERMANENT;
	/* Not dumpable, no core; no_new_privs only in the upload workers:
	 * the builder and its build workers start diskimage-builder, which
	 * runs sudo. */
	if (privsep_start("nodepool-builder", worker != NULL && strcmp(worker, "upload") == 0) != 0)
		return EXIT_PERMANENT;
	signal(SIGPIPE, SIG_IGN);
	drv_host_register(&bld_host_ops);
	base = event_base_new();
	if (base == NULL)
		fatalx("event_base_new failed");
	if (worker != NULL) {
		char tag[64];
		if (o.channel_fd < 0)
			usage();
		snprintf(tag, sizeof(tag), "builder[%s-worker]", worker);
		log_init(tag, o.debug ? LOG_LVL_DEBUG : LOG_LVL_INFO);
		/* the builder stops its workers; a terminal's ^C goes to it */
		signal(SIGINT, SIG_IGN);
		if (strcmp(worker, "build") == 0)
			rc = dib_worker_main(base);
		else if (strcmp(worker, "upload") == 0)
			rc = upload_worker_main(base);
		else
			usage();
		event_base_free(base);
		return rc;
	}
	log_init("builder", o.debug ? LOG_LVL_DEBUG : LOG_LVL_INFO);
	if (driver_registry_check() != 0)
		fatalx("two drivers share a name");
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		fatal("readlink /proc/self/exe");
	exe[n] = '\0';
	o.exe = exe;

	b = builder_new(base, &o, err, sizeof(err));
	if (b == NULL) {
		log_error("%s", err);
		event_base_free(base);
		return EXIT_PERMANENT;
	}
	if (childproc_signals_init(&sigs, base, stop_builder, dump_builder, b) != 0)
		fatalx("signal events failed");
	ev_chld = evsignal_new(base, SIGCHLD, sig_chld, b);
	event_add(ev_chld, NULL);

	event_base_dispatch(base);

	rc = builder_exit_code(b);
	builder_free(b);
	childproc_signals_clear(&sigs);
	event_free(ev_chld);
	event_base_free(base);
	return rc;
}
