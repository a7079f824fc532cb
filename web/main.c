/*
 * nodepool-web: the web API's own process (webproc.h).
 *
 *   nodepool-web -c nodepool.yaml [-s secure.conf] [-d]
 *       standalone: serve the API of the deployment nodepool.yaml names
 *       (webapp: listen_address, port), with no provider's metrics but
 *       those stored in ZooKeeper.
 *   nodepool-web --channel FD [-d]
 *       under nodepoold: the slice arrives as a CONFIG message; READY,
 *       STATUS and CONFIG_ACK go back; METRICS messages bring every
 *       worker's figures; it exits when the channel closes.
 *
 * Exit codes (the supervisor's contract): 0 clean stop; 1 error (restart
 * with back-off: a ZooKeeper option refused); 100 permanent (no ZooKeeper
 * servers configured, bad usage).
 *
 * Signals: SIGTERM/SIGINT stop; SIGUSR2 logs a short state dump.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "lib/core/childproc.h"
#include "lib/core/log.h"
#include "lib/core/privsep.h"
#include "lib/core/version.h"
#include "web/webproc.h"

#define EXIT_PERMANENT 100

static void
usage(void)
{
	fprintf(stderr, "usage: nodepool-web (-c CONFIG [-s SECURE] | --channel FD) [-d]\n");
	exit(2);
}

static void
stop_web(void *arg)
{
	webproc_stop(arg);
}

static void
dump_web(void *arg, struct evbuffer *out)
{
	webproc_dump(arg, out);
}

int
main(int argc, char **argv)
{
	const char *config = NULL, *secure = NULL;
	int channel_fd = -1, debug = 0, c, rc;
	struct event_base *base;
	struct childproc_signals sigs;
	struct webproc *wp;
	char err[1024];
	static const struct option longopts[] = {
	    {"channel", required_argument, NULL, 'C'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};

	while ((c = getopt_long(argc, argv, "c:s:dfh", longopts, NULL)) != -1) {
		switch (c) {
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
			printf("nodepool-web %s\n", NP_VERSION);
			return 0;
		default:
			usage();
		}
	}
	if ((config == NULL) == (channel_fd < 0))
		usage();
	if (channel_fd >= 0 && childproc_channel_check("nodepool-web", channel_fd) != 0)
		return EXIT_PERMANENT;
	if (privsep_start("nodepool-web", true) != 0)
		return EXIT_PERMANENT;
	log_init("web", debug ? LOG_LVL_DEBUG : LOG_LVL_INFO);
	signal(SIGPIPE, SIG_IGN);

	base = event_base_new();
	if (base == NULL)
		fatalx("event_base_new failed");
	wp = webproc_new(base, channel_fd);
	if (config != NULL && webproc_load_file(wp, config, secure, err, sizeof(err)) != 0) {
		log_error("%s", err);
		rc = webproc_exit_code(wp) ? webproc_exit_code(wp) : 1;
		webproc_free(wp);
		event_base_free(base);
		return rc;
	}
	if (childproc_signals_init(&sigs, base, stop_web, dump_web, wp) != 0)
		fatalx("signal events failed");

	event_base_dispatch(base);

	rc = webproc_exit_code(wp);
	webproc_free(wp);
	childproc_signals_clear(&sigs);
	event_base_free(base);
	return rc;
}
