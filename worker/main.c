/*
 * nodepool-launcher: one provider's worker process.
 *
 *   nodepool-launcher -p PROVIDER -c nodepool.yaml [-s secure.conf] [-d]
 *       standalone: load and validate the config, serve PROVIDER.
 *   nodepool-launcher -p PROVIDER --channel FD
 *       under nodepoold: the config slice arrives as a CONFIG message on
 *       the channel; READY and STATUS go back on it; the worker exits when
 *       the channel closes (the supervisor is gone).
 *
 * Exit codes (the supervisor's contract): 0 clean stop; 1 error (restart);
 * 100 permanent, do not restart (bad config for this provider, unknown
 * driver, bad credentials).
 *
 * Signals: SIGTERM/SIGINT stop gracefully (components unregistered, request
 * locks released); SIGUSR2 logs a dump of the worker's state (requests in
 * hand, nodes being worked on, timers), as the seeds' "Operation" section
 * describes for Nodepool.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "lib/core/childproc.h"
#include "lib/config/config.h"
#include "worker/launcher.h"
#include "lib/core/log.h"
#include "lib/core/privsep.h"
#include "lib/core/version.h"

#define EXIT_PERMANENT 100

static void
usage(void)
{
	fprintf(stderr,
		"usage: nodepool-launcher -p PROVIDER (-c CONFIG [-s SECURE] | --channel FD)"
		" [-d]\n");
	exit(2);
}

static void
stop_worker(void *arg)
{
	lc_worker_stop(arg);
}

static void
dump_worker(void *arg, struct evbuffer *out)
{
	lc_worker_dump(arg, out);
}

int
main(int argc, char **argv)
{
	const char *provider = NULL, *config = NULL, *secure = NULL;
	int channel_fd = -1, debug = 0, c, rc;
	struct event_base *base;
	struct childproc_signals sigs;
	struct worker *w;
	char tag[128], err[1024];
	static const struct option longopts[] = {
	    {"channel", required_argument, NULL, 'C'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};

	while ((c = getopt_long(argc, argv, "p:c:s:dfh", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			provider = optarg;
			break;
		case 'c':
			config = optarg;
			break;
		case 's':
			secure = optarg;
			break;
		case 'd':
			debug = 1;
			break;
		case 'f':
			break; /* always in the foreground */
		case 'C':
			channel_fd = atoi(optarg);
			break;
		case 'V':
			printf("nodepool-launcher %s\n", NP_VERSION);
			return 0;
		default:
			usage();
		}
	}
	if (provider == NULL || (config == NULL && channel_fd < 0))
		usage();
	if (channel_fd >= 0 && childproc_channel_check("nodepool-launcher", channel_fd) != 0)
		return EXIT_PERMANENT;
	if (privsep_start("nodepool-launcher", true) != 0)
		return EXIT_PERMANENT;
	snprintf(tag, sizeof(tag), "worker[%s]", provider);
	log_init(tag, debug ? LOG_LVL_DEBUG : LOG_LVL_INFO);
	signal(SIGPIPE, SIG_IGN);
	if (driver_registry_check() != 0)
		fatalx("two drivers share a name");
	drv_host_register(&lc_host_ops);

	base = event_base_new();
	if (base == NULL)
		fatalx("event_base_new failed");
	w = lc_worker_new(base, provider, channel_fd);
	if (config != NULL) {
		if (lc_worker_load_file(w, config, secure, err, sizeof(err)) != 0) {
			log_error("%s", err);
			return EXIT_PERMANENT;
		}
	}
	if (childproc_signals_init(&sigs, base, stop_worker, dump_worker, w) != 0)
		fatalx("signal events failed");

	event_base_dispatch(base);
	lc_worker_drain(w, 2.0);

	rc = lc_worker_exit_code(w);
	lc_worker_free(w);
	childproc_signals_clear(&sigs);
	event_base_free(base);
	return rc;
}
