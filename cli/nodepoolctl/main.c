/*
 * nodepoolctl: talk to a running nodepoold over its control socket.
 *
 *   nodepoolctl [-s SOCKET] [-c CONFIG] status [--json] | restart PROVIDER |
 *               reload | stop
 *
 * One request, one reply (lib/ops/ctlsock.h), the same message catalogue as
 * the daemon (protocol/ipc_types.h). The socket is -s, else the
 * control-socket setting of CONFIG's nodepoold: section (-c, default
 * /etc/nodepool/nodepool.yaml), else /run/nodepoold/nodepoold.sock.
 * Exit 0 when the command succeeded, 1 otherwise, with the reason on
 * stderr (ctlsock.h lists the connection errors; nodepoolctl.8 all of them).
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "lib/ops/ctlsock.h"
#include "lib/ops/daemon_paths.h"
#include "protocol/ipc.h"
#include "lib/core/version.h"

#define USAGE                                                                                      \
	"usage: nodepoolctl [-s SOCKET] [-c CONFIG] status [--json] | "                            \
	"restart PROVIDER | reload | stop"

/* Reply timeout, ms: a reload parses the whole configuration first. */
#define CTL_TIMEOUT_MS 30000

struct ctl_cmd {
	const char *name;
	int min_args, max_args; /* arguments after the command name */
	enum ipc_type request;
	/* Fill the request from the arguments; -1 = usage error. */
	int (*prepare)(struct ipc_msg *req, int argc, char **argv);
	/* Print the reply; returns the exit code. */
	int (*show)(const struct ipc_msg *req, const struct ipc_msg *reply);
};

/* ---- status ------------------------------------------------------------------ */

static int
prepare_status(struct ipc_msg *req, int argc, char **argv)
{
	if (argc == 1) {
		if (strcmp(argv[0], "--json") != 0)
			return -1;
		req->u.ctl_status.json = true;
	}
	return 0;
}

/* "1d02:03:04" / "2:03:04" */
static void
fmt_uptime(int64_t s, char *buf, size_t len)
{
	int64_t d = s / 86400, h = s / 3600 % 24, m = s / 60 % 60, sec = s % 60;

	if (d > 0)
		snprintf(buf, len, "%lldd%02lld:%02lld:%02lld", (long long)d, (long long)h,
			 (long long)m, (long long)sec);
	else
		snprintf(buf, len, "%lld:%02lld:%02lld", (long long)h, (long long)m,
			 (long long)sec);
}

/* KiB as "12.3M" (MiB, one decimal); "-" when unknown (0). */
static void
fmt_mib(int64_t kb, char *buf, size_t len)
{
	if (kb <= 0)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.1fM", (double)kb / 1024.0);
}

enum {
	COL_NAME,
	COL_KIND,
	COL_PID,
	COL_STATE,
	COL_UPTIME,
	COL_RESTARTS,
	COL_ZK,
	COL_ACCEPTED,
	COL_FULFILLED,
	COL_DECLINED,
	COL_FAILED,
	COL_NODES,
	COL_RSS,
	COL_PSS,
	COL_ERROR,
	NCOLS
};

static const char *const col_titles[NCOLS] = {
    "NAME",	 "KIND",     "PID",    "STATE", "UPTIME", "RESTARTS", "ZK",   "ACCEPTED",
    "FULFILLED", "DECLINED", "FAILED", "NODES", "RSS",	  "PSS",      "ERROR"};

static void
row_cells(const struct ipc_worker_info *w, char cells[NCOLS][512])
{
	size_t i, off = 0;

	snprintf(cells[COL_NAME], 512, "%s", w->name);
	snprintf(cells[COL_KIND], 512, "%s", ipc_child_kind_name(w->kind));
	snprintf(cells[COL_PID], 512, "%lld", (long long)w->pid);
	snprintf(cells[COL_STATE], 512, "%s", w->state);
	fmt_uptime(w->uptime_s, cells[COL_UPTIME], 512);
	snprintf(cells[COL_RESTARTS], 512, "%lld", (long long)w->restarts);
	snprintf(cells[COL_ZK], 512, "%s", ipc_zk_state_name(w->zk_state));
	snprintf(cells[COL_ACCEPTED], 512, "%lld", (long long)w->accepted);
	snprintf(cells[COL_FULFILLED], 512, "%lld", (long long)w->fulfilled);
	snprintf(cells[COL_DECLINED], 512, "%lld", (long long)w->declined);
	snprintf(cells[COL_FAILED], 512, "%lld", (long long)w->failed);
	cells[COL_NODES][0] = '\0';
	for (i = 0; i < w->nodes.n && off < 500; i++) {
		int n = snprintf(cells[COL_NODES] + off, 512 - off, "%s%s:%lld", i ? "," : "",
				 w->nodes.v[i].name, (long long)w->nodes.v[i].n);
		if (n < 0)
			break;
		off += (size_t)n;
	}
	if (w->nodes.n == 0)
		snprintf(cells[COL_NODES], 512, "-");
	fmt_mib(w->rss_kb, cells[COL_RSS], 512);
	fmt_mib(w->pss_kb, cells[COL_PSS], 512);
	snprintf(cells[COL_ERROR], 512, "%s", w->last_error ? w->last_error : "-");
}

/* Columns padded to width, the last one (the error) as it is. */
static void
print_row(const char *const *cells, const size_t *width)
{
	int k;

	for (k = 0; k < NCOLS - 1; k++)
		printf("%-*s  ", (int)width[k], cells[k]);
	printf("%s\n", cells[NCOLS - 1]);
}

static int
show_status_text(const struct ipc_ctl_status_reply *r)
{
	char(*cells)[NCOLS][512];
	size_t width[NCOLS], i;
	int k;

	if (r->workers.n == 0) {
		printf("no providers configured\n");
		return 0;
	}
	if ((cells = calloc(r->workers.n, sizeof(*cells))) == NULL)
		abort();
	for (k = 0; k < NCOLS; k++)
		width[k] = strlen(col_titles[k]);
	for (i = 0; i < r->workers.n; i++) {
		row_cells(&r->workers.v[i], cells[i]);
		for (k = 0; k < NCOLS; k++)
			if (strlen(cells[i][k]) > width[k])
				width[k] = strlen(cells[i][k]);
	}
	print_row(col_titles, width);
	for (i = 0; i < r->workers.n; i++) {
		const char *row[NCOLS];
		for (k = 0; k < NCOLS; k++)
			row[k] = cells[i][k];
		print_row(row, width);
	}
	/* launchers on other hosts serving the same providers (HA) */
	for (i = 0; i < r->workers.n; i++) {
		const struct ipc_worker_info *w = &r->workers.v[i];
		size_t p;
		for (p = 0; p < w->peers.n; p++)
			printf("%s peer launcher: %s\n", w->name, w->peers.v[p]);
	}
	free(cells);
	return 0;
}

static int
show_result(const struct ipc_msg *req, const struct ipc_msg *reply)
{
	const struct ipc_ctl_result *r = &reply->u.ctl_result;
	size_t i;

	if (reply->type != IPC_CTL_RESULT) {
		fprintf(stderr, "bad reply from nodepoold: %s to %s\n", ipc_type_name(reply->type),
			ipc_type_name(req->type));
		return 1;
	}
	if (r->ok) {
		printf("%s\n", r->message);
		for (i = 0; i < r->errors.n; i++)
			printf("%s\n", r->errors.v[i]);
		return 0;
	}
	fprintf(stderr, "%s\n", r->message);
	for (i = 0; i < r->errors.n; i++)
		fprintf(stderr, "%s\n", r->errors.v[i]);
	return 1;
}

static int
show_status(const struct ipc_msg *req, const struct ipc_msg *reply)
{
	json_t *j;

	if (reply->type != IPC_CTL_STATUS_REPLY)
		return show_result(req, reply); /* a refusal */
	if (!req->u.ctl_status.json)
		return show_status_text(&reply->u.ctl_status_reply);
	if ((j = ipc_msg_to_json(reply)) == NULL) {
		fprintf(stderr, "bad reply from nodepoold: cannot render it as JSON\n");
		return 1;
	}
	json_object_del(j, "t");
	json_object_del(j, "v");
	json_dumpf(j, stdout, JSON_INDENT(2));
	printf("\n");
	json_decref(j);
	return 0;
}

/* ---- restart, reload, stop ------------------------------------------------------ */

static int
prepare_restart(struct ipc_msg *req, int argc, char **argv)
{
	return ipc_set_str(&req->u.ctl_restart.provider, argv[0]);
}

static int
prepare_none(struct ipc_msg *req, int argc, char **argv)
{
	return 0;
}

static const struct ctl_cmd ctl_cmds[] = {
    {"status", 0, 1, IPC_CTL_STATUS, prepare_status, show_status},
    {"restart", 1, 1, IPC_CTL_RESTART, prepare_restart, show_result},
    {"reload", 0, 0, IPC_CTL_RELOAD, prepare_none, show_result},
    {"stop", 0, 0, IPC_CTL_STOP, prepare_none, show_result},
};

static void __attribute__((noreturn)) usage(void)
{
	fprintf(stderr, "%s\n", USAGE);
	exit(1);
}

int
main(int argc, char **argv)
{
	const char *sock = NULL, *config = NULL;
	const struct ctl_cmd *cmd = NULL;
	struct ipc_msg req, reply;
	char *sock_path = NULL, err[1024];
	size_t i;
	int c, nargs, rc;
	static const struct option longopts[] = {
	    {"version", no_argument, NULL, 'V'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};

	/* "+": options stop at the command, so "status --json" reaches it */
	while ((c = getopt_long(argc, argv, "+s:c:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			sock = optarg;
			break;
		case 'c':
			config = optarg;
			break;
		case 'V':
			printf("nodepoolctl %s\n", NP_VERSION);
			return 0;
		default:
			usage();
		}
	}
	if (optind >= argc)
		usage();
	for (i = 0; i < sizeof(ctl_cmds) / sizeof(ctl_cmds[0]); i++)
		if (strcmp(ctl_cmds[i].name, argv[optind]) == 0)
			cmd = &ctl_cmds[i];
	nargs = argc - optind - 1;
	if (cmd == NULL || nargs < cmd->min_args || nargs > cmd->max_args)
		usage();
	ipc_msg_init(&req, cmd->request);
	if (cmd->prepare(&req, nargs, argv + optind + 1) < 0)
		usage();
	if (sock == NULL) {
		/* -c names a file that must be there; the default one may not be */
		if (np_daemon_paths(config ? config : NP_DEFAULT_CONFIG, config != NULL, &sock_path,
				    NULL, err, sizeof(err)) < 0) {
			fprintf(stderr, "%s\n", err);
			ipc_msg_clear(&req);
			return 1;
		}
		sock = sock_path;
	}
	if (ctlsock_request(sock, &req, &reply, CTL_TIMEOUT_MS, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		rc = 1;
	} else {
		rc = cmd->show(&req, &reply);
		ipc_msg_clear(&reply);
	}
	ipc_msg_clear(&req);
	free(sock_path);
	return rc;
}
