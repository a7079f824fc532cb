/*
 * nodepool: the administrative command line, as upstream Nodepool's
 * `nodepool` (cmd/nodepoolcmd.py). Private header of cli/nodepool/.
 *
 * main.c parses the global options, loads the configuration, connects to
 * ZooKeeper (for every command but config-validate) and runs one command
 * from the table; nodes.c has the node and request commands, images.c the
 * image commands.
 *
 * Exit status, as upstream (where Python's uncaught exceptions exit 1 and
 * argparse's usage errors exit 2): 0 on success and for "not found"
 * messages; 1 for errors (unreachable ZooKeeper, a node lock not acquired
 * in 5 s, an invalid configuration, an image that cannot be built, ...);
 * 2 for a usage error; no command prints the help and exits 1.
 */
#ifndef NP_CLI_NODEPOOL_H
#define NP_CLI_NODEPOOL_H

#include <stddef.h>
#include <jansson.h>

#include "lib/zk/zk.h"

struct event_base;
struct np_config;
struct status_table;

/* Exit codes (see above). */
#define CLI_OK	  0
#define CLI_ERROR 1
#define CLI_USAGE 2

/* How long hold and delete wait for a node lock, as upstream (seconds). */
#define CLI_LOCK_TIMEOUT 5.0
/* How long `delete --now` waits for the launcher to remove the node. */
#define CLI_DELETE_NOW_TIMEOUT 60.0

/* The state of one invocation. */
struct cli {
	const char *config_path; /* -c */
	const char *secure_path; /* -s, NULL if not given */
	int debug;		 /* --debug */
	struct np_config *cfg;	 /* loaded for every command but config-validate */
	struct event_base *base;
	struct zk *zk;	   /* connected, for commands that need it */
	double op_timeout; /* seconds a ZooKeeper read may take */
};

/* One subcommand: argv[0] is its name; returns the exit code. */
struct cli_cmd {
	const char *name;
	int (*run)(struct cli *c, int argc, char **argv);
	int needs_zk;
	const char *args; /* usage after the name, e.g. "[--detail] [--json]" */
	const char *help;
};

/* main.c */
/* Print "nodepool: <msg>" to stderr; returns CLI_ERROR. */
int cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Usage error of a command: the command's usage and "nodepool <cmd>:
 * error: <msg>" on stderr; returns CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * Parse a command's options, as argparse would: long-only options named in
 * `names` (e.g. {"detail", "json", NULL}; unique prefixes accepted);
 * flags[i] is set for each present. Options taking a value end in '='
 * ("provider="), required ones in "=!"; their values go to values[i].
 * Positional arguments go to pos (at most npos); when required names them
 * (e.g. "id"), exactly npos must be given. *npos_out gets their count.
 * Returns 0, a usage error code (already printed), or, while main checks
 * the command line before loading the configuration, CLI_PARSED.
 */
#define CLI_PARSED (-1)
extern int cli_parse_only;
int cli_parse(const char *cmd, int argc, char **argv, const char *const *names, int *flags,
	      const char **values, const char **pos, int npos, const char *required, int *npos_out);
/* Print a table as text (fields as status_text; NULL = every column) or as
 * JSON, each followed by a newline. */
void cli_print_table(const struct status_table *t, int json, const char *const *fields,
		     size_t nfields);
/* Wall clock, epoch seconds. */
double cli_now(void);
/* A ZooKeeper error as text for messages. */
const char *cli_zk_error(int rc);

/*
 * Read many znodes at once (the reads are issued together): for each item,
 * path in, rc/data/len/stat out (data malloc'd, NUL-terminated, NULL unless
 * rc is ZOK); with contenders set, the lock contender count of the lock dir
 * at path instead (ZOK and 0 for a missing dir; nothing is created).
 * Returns ZOK, or ZOPERATIONTIMEOUT when not all completed in time.
 */
struct cli_read {
	char *path;
	int contenders;
	int rc;
	char *data;
	int len;
	struct zk_stat st;
	int ncontenders;
	int done;
};
int cli_read_all(struct cli *c, struct cli_read *r, size_t n);
void cli_read_clear(struct cli_read *r, size_t n);
/* Run the loop until *flag is set or timeout seconds pass; 0 if set. */
int cli_run_until(struct cli *c, const int *flag, double timeout);

/* nodes.c */
int cmd_list(struct cli *c, int argc, char **argv);
int cmd_delete(struct cli *c, int argc, char **argv);
int cmd_hold(struct cli *c, int argc, char **argv);
int cmd_request_list(struct cli *c, int argc, char **argv);
int cmd_info(struct cli *c, int argc, char **argv);
int cmd_erase(struct cli *c, int argc, char **argv);

/* images.c */
int cmd_image_list(struct cli *c, int argc, char **argv);
int cmd_dib_image_list(struct cli *c, int argc, char **argv);
int cmd_image_status(struct cli *c, int argc, char **argv);
int cmd_image_build(struct cli *c, int argc, char **argv);
int cmd_image_delete(struct cli *c, int argc, char **argv);
int cmd_dib_image_delete(struct cli *c, int argc, char **argv);
int cmd_image_pause(struct cli *c, int argc, char **argv);
int cmd_image_unpause(struct cli *c, int argc, char **argv);
int cmd_alien_image_list(struct cli *c, int argc, char **argv);
int cmd_export_image_data(struct cli *c, int argc, char **argv);
int cmd_import_image_data(struct cli *c, int argc, char **argv);

#endif
