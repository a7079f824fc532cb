/*
 * nodepool: the administrative command line (see cli.h).
 *
 *   nodepool [-h] [-c CONFIG] [-s SECURE] [-l LOGCONFIG] [--debug] [--version]
 *            COMMAND [options]
 *
 * Global options come before the command, as upstream's argparse wants
 * them. -l is accepted for compatibility and ignored (our logging goes to
 * stderr; --debug makes it verbose).
 */
#include "cli/nodepool/cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "lib/config/config.h"
#include "lib/core/clock.h"
#include "lib/core/log.h"
#include "lib/ops/status.h"
#include "lib/core/version.h"

static const struct cli_cmd commands[] = {
    {"list", cmd_list, 1, "[--detail] [--json]", "list nodes"},
    {"image-list", cmd_image_list, 1, "[--json]", "list images from providers"},
    {"dib-image-list", cmd_dib_image_list, 1, "[--json]",
     "list images built with diskimage-builder"},
    {"image-status", cmd_image_status, 1, "[--json]", "list image status"},
    {"image-build", cmd_image_build, 1, "image", "build image using diskimage-builder"},
    {"alien-image-list", cmd_alien_image_list, 1, "[--json] [provider]",
     "list images not accounted for by nodepool"},
    {"delete", cmd_delete, 1, "[--now] [--json] id", "place a node in the DELETE state"},
    {"hold", cmd_hold, 1, "[--json] id",
     "place a node in the HOLD state e.g. for running maintenance tasks"},
    {"image-delete", cmd_image_delete, 1,
     "--provider PROVIDER --image IMAGE --upload-id UPLOAD_ID --build-id BUILD_ID",
     "delete an image"},
    {"dib-image-delete", cmd_dib_image_delete, 1, "id",
     "Delete a dib built image from disk along with all cloud uploads of this image"},
    {"config-validate", NULL, 0, "", "Validate configuration file"},
    {"request-list", cmd_request_list, 1, "[--json]", "list the current node requests"},
    {"info", cmd_info, 1, "[--json] PROVIDER", "Show provider data from zookeeper"},
    {"erase", cmd_erase, 1, "[--force] PROVIDER", "Erase provider data from zookeeper"},
    {"image-pause", cmd_image_pause, 1, "image", "pause an image"},
    {"image-unpause", cmd_image_unpause, 1, "image", "unpause an image"},
    {"export-image-data", cmd_export_image_data, 1, "path", "Export image data from ZooKeeper"},
    {"import-image-data", cmd_import_image_data, 1, "path", "Import image data to ZooKeeper"},
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void
print_usage(FILE *f)
{
	fprintf(f, "usage: nodepool [-h] [-c CONFIG] [-s SECURE] [-l LOGCONFIG] [--debug] "
		   "[--version]\n                {");
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(f, "%s%s", i ? "," : "", commands[i].name);
	fprintf(f, "}\n                ...\n");
}

static void
print_help(FILE *f)
{
	size_t i;

	print_usage(f);
	fprintf(f, "\nNode pool.\n\noptions:\n"
		   "  -h, --help            show this help message and exit\n"
		   "  -c CONFIG             path to config file (default: "
		   "/etc/nodepool/nodepool.yaml)\n"
		   "  -s SECURE             path to secure file (default: None)\n"
		   "  -l LOGCONFIG          accepted for compatibility; ignored\n"
		   "  --debug               show DEBUG level logging (default: False)\n"
		   "  --version             show nodepool version and exit\n"
		   "\ncommands:\n");
	for (i = 0; i < NCOMMANDS; i++)
		fprintf(f, "    %-22s%s\n", commands[i].name, commands[i].help);
	fprintf(f, "\nEvery listing takes --json (a JSON list of rows instead of a table).\n");
}

int
cli_error(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("nodepool: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return CLI_ERROR;
}

static const struct cli_cmd *
find_cmd(const char *name)
{
	size_t i;

	for (i = 0; i < NCOMMANDS; i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

static void
cmd_usage(FILE *f, const char *cmd)
{
	const struct cli_cmd *c = find_cmd(cmd);

	fprintf(f, "usage: nodepool %s [-h]%s%s\n", cmd, c && *c->args ? " " : "",
		c ? c->args : "");
}

int
cli_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	cmd_usage(stderr, cmd);
	fprintf(stderr, "nodepool %s: error: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return CLI_USAGE;
}

/* An option name as given ("--det") against the table: a unique prefix
 * matches, as argparse's allow_abbrev. Returns the index or -1/-2
 * (unknown/ambiguous). */
static int
match_option(const char *given, size_t glen, const char *const *names)
{
	int i, found = -1;

	for (i = 0; names[i] != NULL; i++) {
		size_t nlen = strcspn(names[i], "=");
		if (glen == nlen && strncmp(names[i], given, nlen) == 0)
			return i;
		if (glen < nlen && strncmp(names[i], given, glen) == 0)
			found = found == -1 ? i : -2;
	}
	return found;
}

int cli_parse_only;

int
cli_parse(const char *cmd, int argc, char **argv, const char *const *names, int *flags,
	  const char **values, const char **pos, int npos, const char *required, int *npos_out)
{
	int i, n = 0, only_pos = 0;
	char missing[256] = "";

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!only_pos && strcmp(a, "--") == 0) {
			only_pos = 1;
			continue;
		}
		if (!only_pos && (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)) {
			cmd_usage(stdout, cmd);
			exit(CLI_OK);
		}
		if (!only_pos && a[0] == '-' && a[1] != '\0') {
			const char *name = a + 2, *eq;
			size_t len;
			int k;
			if (a[1] != '-')
				return cli_usage_error(cmd, "unrecognized arguments: %s", a);
			eq = strchr(name, '=');
			len = eq ? (size_t)(eq - name) : strlen(name);
			k = match_option(name, len, names);
			if (k == -2)
				return cli_usage_error(cmd, "ambiguous option: %s", a);
			if (k < 0)
				return cli_usage_error(cmd, "unrecognized arguments: %s", a);
			flags[k] = 1;
			if (strchr(names[k], '=') != NULL) {
				if (eq != NULL)
					values[k] = eq + 1;
				else if (i + 1 < argc)
					values[k] = argv[++i];
				else
					return cli_usage_error(
					    cmd, "argument --%.*s: expected one argument",
					    (int)strcspn(names[k], "="), names[k]);
			} else if (eq != NULL) {
				return cli_usage_error(
				    cmd, "argument --%s: ignored explicit argument '%s'", names[k],
				    eq + 1);
			}
			continue;
		}
		if (n >= npos)
			return cli_usage_error(cmd, "unrecognized arguments: %s", a);
		pos[n++] = a;
	}
	*npos_out = n;
	for (i = 0; names[i] != NULL; i++) {
		size_t len = strcspn(names[i], "=");
		if (strstr(names[i], "=!") == NULL || values[i] != NULL)
			continue;
		snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), "%s--%.*s",
			 missing[0] ? ", " : "", (int)len, names[i]);
	}
	if (required != NULL && n < npos)
		snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), "%s%s",
			 missing[0] ? ", " : "", required);
	if (missing[0])
		return cli_usage_error(cmd, "the following arguments are required: %s", missing);
	return cli_parse_only ? CLI_PARSED : 0;
}

void
cli_print_table(const struct status_table *t, int json, const char *const *fields, size_t nfields)
{
	char *s = json ? status_json(t) : status_text(t, fields, nfields, cli_now());

	fputs(s, stdout);
	fputc('\n', stdout);
	free(s);
}

double
cli_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

const char *
cli_zk_error(int rc)
{
	return zk_strerror(rc);
}

/* ---- loop helpers ------------------------------------------------------------ */

static void
until_timer(evutil_socket_t fd, short what, void *arg)
{
	*(int *)arg = 1;
}

int
cli_run_until(struct cli *c, const int *flag, double timeout)
{
	int expired = 0;
	struct event *t = evtimer_new(c->base, until_timer, &expired);
	struct timeval tv;

	if (t == NULL)
		abort();
	tv = np_tv_of(timeout);
	evtimer_add(t, &tv);
	while (!*flag && !expired)
		if (event_base_loop(c->base, EVLOOP_ONCE) < 0)
			break;
	event_free(t);
	return *flag ? 0 : -1;
}

struct read_all {
	size_t left;
	int all_done;
};

struct read_ctx {
	struct read_all *ra;
	struct cli_read *r;
};

static void
read_one_done(struct read_ctx *x)
{
	x->r->done = 1;
	if (--x->ra->left == 0)
		x->ra->all_done = 1;
	free(x);
}

static void
read_data_cb(int rc, const char *data, int len, const struct zk_stat *st, void *arg)
{
	struct read_ctx *x = arg;

	x->r->rc = rc;
	if (rc == ZOK) {
		x->r->data = malloc((size_t)len + 1);
		if (x->r->data == NULL)
			abort();
		memcpy(x->r->data, data, (size_t)len);
		x->r->data[len] = '\0';
		x->r->len = len;
		x->r->st = *st;
	}
	read_one_done(x);
}

static void
read_contenders_cb(int rc, int count, char *const *names, void *arg)
{
	struct read_ctx *x = arg;

	x->r->rc = rc;
	x->r->ncontenders = rc == ZOK ? count : 0;
	read_one_done(x);
}

int
cli_read_all(struct cli *c, struct cli_read *r, size_t n)
{
	struct read_all ra = {n, n == 0};
	size_t i;

	for (i = 0; i < n; i++) {
		struct read_ctx *x = calloc(1, sizeof(*x));
		if (x == NULL)
			abort();
		x->ra = &ra;
		x->r = &r[i];
		r[i].done = 0;
		if (r[i].contenders)
			zk_lock_contenders(c->zk, r[i].path, read_contenders_cb, x);
		else
			zk_get(c->zk, r[i].path, NULL, NULL, read_data_cb, x);
	}
	if (cli_run_until(c, &ra.all_done, c->op_timeout) != 0) {
		/* Nothing may point at ra once we return: the reads still in
		 * flight belong to a process about to exit with an error. */
		cli_error("ZooKeeper did not answer within %g s", c->op_timeout);
		exit(CLI_ERROR);
	}
	return ZOK;
}

void
cli_read_clear(struct cli_read *r, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(r[i].path);
		free(r[i].data);
		r[i].path = NULL;
		r[i].data = NULL;
	}
}

/* ---- config-validate ------------------------------------------------------- */

static int
cmd_config_validate(struct cli *c, int argc, char **argv)
{
	static const char *const names[] = {NULL};
	struct np_config *cfg = NULL;
	struct np_cfg_errors *errs = NULL;
	int flags[1], npos, rc;
	const char *values[1];

	if ((rc = cli_parse("config-validate", argc, argv, names, flags, values, NULL, 0, NULL,
			    &npos)))
		return rc;
	fprintf(stderr, "validating %s\n", c->config_path);
	if (np_cfg_load(c->config_path, c->secure_path, &cfg, &errs) != 0) {
		size_t n = np_cfg_errors_print(errs, stderr);
		fprintf(stderr, "%s: %zu error%s\n", c->config_path, n, n == 1 ? "" : "s");
		np_cfg_errors_free(errs);
		return CLI_ERROR;
	}
	np_cfg_free(cfg);
	return CLI_OK;
}

/* ---- ZooKeeper --------------------------------------------------------------- */

static int
connect_zk(struct cli *c)
{
	struct zk_options opt;
	char err[512];
	int rc;

	if (c->cfg->zk_hosts == NULL)
		return cli_error("%s: no zookeeper-servers configured", c->config_path);
	memset(&opt, 0, sizeof(opt));
	opt.hosts = c->cfg->zk_hosts;
	opt.timeout = c->cfg->zk_timeout;
	opt.tls_ca = c->cfg->zk_tls_ca;
	opt.tls_cert = c->cfg->zk_tls_cert;
	opt.tls_key = c->cfg->zk_tls_key;
	c->zk = zk_new(c->base, &opt, NULL, NULL, err, sizeof(err));
	if (c->zk == NULL)
		return cli_error("ZooKeeper %s: %s", c->cfg->zk_hosts, err);
	/* A session is established within the session timeout or not at all
	 * (unreachable, refused, TLS mismatch): bounded, never a hang. */
	rc = zk_wait_connected(c->zk, c->cfg->zk_timeout > 0 ? c->cfg->zk_timeout : 10.0);
	if (rc != ZOK)
		return cli_error("unable to connect to ZooKeeper at %s%s within %g s",
				 c->cfg->zk_hosts, opt.tls_ca ? " (TLS)" : "",
				 c->cfg->zk_timeout > 0 ? c->cfg->zk_timeout : 10.0);
	c->op_timeout = 2 * (c->cfg->zk_timeout > 0 ? c->cfg->zk_timeout : 10.0);
	return CLI_OK;
}

int
main(int argc, char **argv)
{
	struct cli c;
	const struct cli_cmd *cmd;
	struct np_cfg_errors *errs = NULL;
	int i, rc;

	memset(&c, 0, sizeof(c));
	c.config_path = "/etc/nodepool/nodepool.yaml";
	for (i = 1; i < argc && argv[i][0] == '-' && argv[i][1] != '\0'; i++) {
		const char *a = argv[i];
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			print_help(stdout);
			return CLI_OK;
		} else if (strcmp(a, "--version") == 0) {
			printf("Nodepool version: %s (nodepoold)\n", NP_VERSION);
			return CLI_OK;
		} else if (strcmp(a, "--debug") == 0) {
			c.debug = 1;
		} else if (strcmp(a, "-c") == 0 || strcmp(a, "-s") == 0 || strcmp(a, "-l") == 0) {
			if (i + 1 >= argc) {
				print_usage(stderr);
				fprintf(stderr,
					"nodepool: error: argument %s: expected one argument\n", a);
				return CLI_USAGE;
			}
			if (a[1] == 'c')
				c.config_path = argv[i + 1];
			else if (a[1] == 's')
				c.secure_path = argv[i + 1];
			i++;
		} else if (strncmp(a, "-c", 2) == 0) {
			c.config_path = a + 2;
		} else if (strncmp(a, "-s", 2) == 0) {
			c.secure_path = a + 2;
		} else if (strncmp(a, "-l", 2) == 0) {
			/* ignored */
		} else if (strcmp(a, "--") == 0) {
			i++;
			break;
		} else {
			print_usage(stderr);
			fprintf(stderr, "nodepool: error: unrecognized arguments: %s\n", a);
			return CLI_USAGE;
		}
	}
	if (i >= argc) {
		/* no command: help, and failure (as upstream) */
		print_help(stdout);
		return CLI_ERROR;
	}
	cmd = find_cmd(argv[i]);
	if (cmd == NULL) {
		print_usage(stderr);
		fprintf(stderr, "nodepool: error: argument command: invalid choice: '%s'\n",
			argv[i]);
		return CLI_USAGE;
	}
	log_init("nodepool", c.debug ? LOG_LVL_DEBUG : LOG_LVL_ERROR);
	if (cmd->run == NULL)
		return cmd_config_validate(&c, argc - i, argv + i);
	/* the command line first (usage errors exit 2 before anything is
	 * read), as argparse does */
	cli_parse_only = 1;
	rc = cmd->run(&c, argc - i, argv + i);
	cli_parse_only = 0;
	if (rc != CLI_PARSED)
		return rc;

	if (np_cfg_load(c.config_path, c.secure_path, &c.cfg, &errs) != 0) {
		np_cfg_errors_print(errs, stderr);
		np_cfg_errors_free(errs);
		return cli_error("%s: invalid configuration (see `nodepool config-validate`)",
				 c.config_path);
	}
	c.base = event_base_new();
	if (c.base == NULL)
		return cli_error("event_base_new failed");
	rc = CLI_OK;
	if (cmd->needs_zk)
		rc = connect_zk(&c);
	if (rc == CLI_OK)
		rc = cmd->run(&c, argc - i, argv + i);
	fflush(stdout);
	zk_free(c.zk);
	event_base_free(c.base);
	np_cfg_free(c.cfg);
	return rc;
}
