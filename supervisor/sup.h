/*
 * nodepoold, the supervisor (supervisor/): its one private header.
 *
 * nodepoold parses nodepool.yaml, then runs one child per provider
 * (nodepool-launcher), one nodepool-web (the web API) and, when diskimages
 * are configured, one nodepool-builder. It never calls a cloud and never talks to ZooKeeper:
 * each child has its own session. Everything it knows about a child comes
 * over the child's channel (fd 3 in the child, lib/core/chan.h) or from
 * waitpid().
 *
 * Files:
 *   proctab.c  the process table: the roles a child can have (program,
 *              argv, restart policy) and sup_spawn(), the only fork+exec
 *   child.c    a child's lifecycle: the state x event table, restart
 *              back-off, the channel (READY, STATUS, CONFIG_ACK), STATUS
 *              polling and the hung-worker check, reaping on SIGCHLD
 *   reload.c   config load, per-child slices, the reload transaction, and
 *              reload on change (lib/config/cfgwatch.h)
 *   control.c  the control socket: nodepoolctl's requests, a command table
 *   daemon.c   pid file, daemonizing, what the init-script verbs need
 *   sup.c      signals and shutdown of the supervisor as a whole
 *   main.c     options, the verbs, start-up, the event loop
 *
 * Lifecycle of a child (struct sup_child, state x event in child.c):
 *
 *   state \ event  UP      READY    EXIT      KILL     LOST     DOWN     RESTART  TIMER
 *   down           spawn   .        .         .        .        .        spawn    .
 *   starting       .       ready    died      kill     lost     stop     stop     .
 *   running        .       .        died      kill     lost     stop     stop     .
 *   stopping       want    .        reaped    kill     drop     .        want     kill
 *   backoff        .       .        .         .        .        cancel   spawn    spawn
 *   dead           spawn   .        .         .        .        cancel   spawn    .
 *
 *   spawn   fork+exec, send CONFIG                         -> starting
 *   ready   READY received (pid and name checked)          -> running
 *   died    unasked exit: 100 -> dead; otherwise restart after back-off
 *           (0 s, then 1, 2, 4 ... restart-backoff-max) -> starting/backoff
 *   kill    SIGKILL now (no STATUS in time, bad message)   -> stopping
 *   lost    channel closed: SIGKILL unless it exits within a grace
 *   stop    STOP sent, SIGKILL after the role's stop grace -> stopping
 *   reaped  exit of a child we stopped: per c->want, down, freed (removed
 *           provider), or started again (restart asked for)
 *   want    remember to start it again once it has exited
 *   cancel  forget the pending restart                     -> down
 */
#ifndef NP_SUP_H
#define NP_SUP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include <jansson.h>

#include "lib/config/cfgwatch.h"
#include "protocol/ipc.h"
#include "lib/core/privsep.h"

struct event;
struct event_base;
struct evbuffer;
struct chan;
struct np_config;
struct np_cfg_errors;
struct statsd;
struct cfgwatch;
struct cfgwatch_snapshot;

/* Exit code contract of every child (style: processes, rule 3). */
#define SUP_EXIT_OK	   0
#define SUP_EXIT_PERMANENT 100 /* do not restart */
#define SUP_EXIT_TEMPORARY 111

/* Seconds a child whose channel closed gets to exit before SIGKILL. */
#define SUP_LOST_GRACE 5.0
/* Seconds the whole shutdown may take before every child gets SIGKILL. */
#define SUP_SHUTDOWN_TIMEOUT 20.0
/* Cap on control connections served at once; more are refused. */
#define SUP_CTL_MAX 32
/* Seconds a control client may take to send its request. */
#define SUP_CTL_IDLE 10.0
/* Seconds nodepoolctl status waits for fresh STATUS answers (a worker that
 * does not answer in time is shown with its last one). */
#define SUP_CTL_STATUS_WAIT 1.0

/* ---- proctab.c: the process table --------------------------------------- */

enum sup_restart {
	SUP_RESTART_ALWAYS,	/* any exit we did not ask for restarts, except 100 */
	SUP_RESTART_ON_FAILURE, /* as ALWAYS, but exit 0 is a clean stop */
	SUP_RESTART_NEVER,
};

/*
 * A role: one row of the process table. Nothing forks a process that is not
 * described here (style: processes, rule 1).
 */
struct sup_role {
	enum ipc_child_kind kind;
	const char *role_name; /* "provider", "builder", "web" (logs) */
	const char *program;   /* file name, looked up in nodepoold's own bindir */
	bool optional;	       /* an absent binary means: not started, logged */
	enum sup_restart restart;
	double stop_grace; /* seconds from STOP to SIGKILL */
};

/* The role of a kind; NULL if out of range. */
const struct sup_role *sup_role(enum ipc_child_kind kind);

/*
 * The only fork+exec of nodepoold: start role's program from bindir for
 * child name, with its end of a fresh channel on fd 3 (CHAN_CHILD_FD), stdin
 * on /dev/null, stdout/stderr shared with nodepoold (the log), every other
 * fd closed, signal dispositions and mask reset. debug adds -d. Returns the
 * pid with *chan_fd = nodepoold's end (close-on-exec, the caller owns it),
 * or -1 with a message in err (nothing left open). A missing program is
 * reported before forking (errno ENOENT/EACCES); a failed exec shows up as
 * exit status 127. The child runs as user (NULL or unset: as nodepoold)
 * with no capabilities, and with PR_SET_NO_NEW_PRIVS except the builder's
 * (diskimage-builder runs sudo) (lib/core/privsep.h); a failure to become
 * user is exit status 100 (permanent: not restarted).
 */
pid_t sup_spawn(const struct sup_role *role, const char *bindir, const char *name, bool debug,
		const struct privsep_user *user, int *chan_fd, char *err, size_t errlen);

/* bindir/program malloc'd; 0 if it exists and is executable, else -1 and
 * errno. *path is set in both cases (caller frees). */
int sup_program_path(const struct sup_role *role, const char *bindir, char **path);

/* ---- child.c: one supervised child -------------------------------------- */

enum sup_state {
	SUP_DOWN = 0, /* not running, not to be started (initial, or stopped) */
	SUP_STARTING, /* forked, CONFIG sent, waiting for READY */
	SUP_RUNNING,  /* READY received */
	SUP_STOPPING, /* STOP sent or killed, waiting for the exit */
	SUP_BACKOFF,  /* exited unasked, waiting to be started again */
	SUP_DEAD,     /* exited 100 (permanent) or cannot be executed */
	SUP_STATE_COUNT
};

enum sup_event {
	SUP_EV_UP,	/* it should run (new child, or new config for a dead one) */
	SUP_EV_READY,	/* READY from the child */
	SUP_EV_EXIT,	/* waitpid reported it (c->wstatus) */
	SUP_EV_KILL,	/* SIGKILL now (c->reason says why) */
	SUP_EV_LOST,	/* its channel closed or failed */
	SUP_EV_DOWN,	/* stop it (c->want says what comes after) */
	SUP_EV_RESTART, /* stop it, then start it again at once */
	SUP_EV_TIMER,	/* its timer fired: back-off over, or stop grace over */
	SUP_EVENT_COUNT
};

/* What should happen to a child once it is not running. */
enum sup_want {
	SUP_WANT_UP,	  /* keep it running (restart with back-off if it dies) */
	SUP_WANT_RESTART, /* start it again as soon as it exits, no back-off */
	SUP_WANT_DOWN,	  /* leave it down (nodepoold is stopping) */
	SUP_WANT_GONE,	  /* free it once it exited (removed from the config) */
};

struct sup;

struct sup_child {
	TAILQ_ENTRY(sup_child) entry;
	struct sup *sup;
	const struct sup_role *role;
	char *name; /* provider name, or "builder", or "web" */
	enum sup_state state;
	enum sup_want want;
	pid_t pid;	     /* 0 when not running (reaped) */
	struct chan *chan;   /* NULL when not running or lost */
	struct event *timer; /* back-off, stop grace or lost grace */

	json_t *slice;	      /* the config it runs (or will get): owned */
	char fingerprint[17]; /* of its provider, for logs ("" for the builder) */
	int64_t gen_sent;     /* generation of the last CONFIG sent */
	int64_t gen_acked;    /* last CONFIG it accepted; 0 = none yet */

	int64_t restarts;  /* starts after the first one */
	int crashes;	   /* unasked exits in a row, for the back-off */
	double spawned_at; /* monotonic seconds */
	double ready_at;   /* monotonic seconds, 0 until READY */
	double exited_at;
	int wstatus;	    /* last waitpid status */
	int64_t zk_session; /* from READY */

	/* STATUS polling */
	int64_t status_seq;  /* seq of the last STATUS_REQ */
	bool status_pending; /* waiting for the answer to it */
	double status_sent_at;
	bool have_status;
	struct ipc_status last_status; /* owned; valid when have_status */

	char *metrics_sent; /* provider: the metrics record last passed to the
			       running nodepool-web, or NULL (sup_web_metrics) */

	char reason[256]; /* why the last KILL/LOST/refusal (for logs) */
	char *last_error; /* the supervisor's last note on it, or NULL */
	bool freed;	  /* SUP_WANT_GONE and reaped: to be freed */
};

struct sup_child *sup_child_new(struct sup *sup, const struct sup_role *role, const char *name);
/* Free a child that has no process (pid 0). NULL is a no-op. */
void sup_child_free(struct sup_child *c);

/* Feed one event to the child's state table. Frees c (and unlinks it) when
 * it is removed: do not touch c after the call when want was GONE. */
void sup_child_dispatch(struct sup_child *c, enum sup_event ev);

/* Send c a CONFIG with its current slice and generation sup->gen. */
int sup_child_send_config(struct sup_child *c);
/* Reaped: the SIGCHLD handler found pid with wstatus. */
void sup_reap(struct sup *sup);
/* The STATUS poll tick: ask idle children, kill the ones that did not
 * answer within worker-status-timeout. */
void sup_poll_status(struct sup *sup);
/* Ask every running child for a fresh STATUS (those not already asked);
 * true while any answer is outstanding. */
bool sup_refresh_status(struct sup *sup);
/* True while a running child has not answered its last STATUS_REQ. */
bool sup_status_pending(const struct sup *sup);
/* Seconds between two STATUS_REQ to one child, from the timeout. */
double sup_poll_interval(double status_timeout);
/* The back-off before the n-th unasked restart in a row (n >= 1):
 * 0, 1, 2, 4 ... capped at max seconds. */
double sup_backoff_delay(int n, double max);
const char *sup_state_name(enum sup_state st);
const char *sup_event_name(enum sup_event ev);
/* "exited 1", "killed by signal 9", ... into buf. */
const char *sup_wstatus_str(int wstatus, char *buf, size_t len);
/* Find a child by kind and name; NULL if none. */
struct sup_child *sup_child_find(struct sup *sup, enum ipc_child_kind kind, const char *name);
/* One line per child into out (SIGUSR2 dump). */
void sup_dump(struct sup *sup, struct evbuffer *out);
/* A child's row for nodepoolctl status. */
void sup_child_info(const struct sup_child *c, struct ipc_worker_info *wi, double now);
/* True while any child has a process. */
bool sup_any_running(const struct sup *sup);

/* ---- reload.c -------------------------------------------------------------- */

/* The outcome of a reload, for the log and CTL_RESULT. */
struct sup_reload_result {
	int ok;
	size_t unchanged, changed, added, removed;
	struct np_cfg_errors *errs; /* owned, when !ok */
};

/*
 * Load sup->config_path (+ secure), and on success make it the config in
 * force: unchanged children are left alone, changed ones get a new CONFIG
 * (or start, when they are not running), removed ones are stopped and
 * freed, new ones started. On failure nothing changes. Frees nothing of
 * *res on entry; the caller calls sup_reload_result_clear. SIGHUP,
 * `nodepoolctl reload` and a change seen by the watcher all come here.
 */
int sup_reload(struct sup *sup, struct sup_reload_result *res);
/* The same for contents already read (lib/config/cfgwatch.h): files[0]
 * nodepool.yaml, files[1] secure.conf. They become the contents the
 * watcher compares with, whether they load or not. */
int sup_reload_snapshot(struct sup *sup, const struct cfgwatch_snapshot *snap,
			struct sup_reload_result *res);
/* Start or stop watching the files (cfgwatch) as the nodepoold section's
 * reload-on-change says; a change found is applied as by SIGHUP and
 * logged. Called after every successful load. */
void sup_watch_update(struct sup *sup);
/* The second half of sup_reload, for a config already loaded (the first
 * one, checked before daemonizing): takes cfg over. The first one also
 * fixes the web API's address (webapp: port, listen_address) for the life
 * of nodepoold, as upstream reads it once at start; a later change is
 * logged and not applied. */
void sup_apply_config(struct sup *sup, struct np_config *cfg, struct sup_reload_result *res);
void sup_reload_result_clear(struct sup_reload_result *res);
/* The JSON a provider's worker gets (np_cfg_worker_slice without the
 * settings only nodepoold reads). New reference, NULL if no such provider. */
json_t *sup_worker_slice(const struct np_config *cfg, const char *provider);
/* The JSON the builder gets (see reload.c). New reference. */
json_t *sup_builder_slice(const struct np_config *cfg);
/* The JSON nodepool-web gets: np_cfg_web_slice (lib/config/slice.h).
 * New reference. */
json_t *sup_web_slice(const struct np_config *cfg);
/* A provider's worker reported a metrics record (its STATUS "metrics",
 * JSON text): pass it on to nodepool-web when it changed (child.c). */
void sup_web_metrics(struct sup *sup, struct sup_child *from);

/* ---- control.c ------------------------------------------------------------- */

/* Listen on sup->ctl_path; 0 or -1 with err. */
int sup_ctl_start(struct sup *sup, char *err, size_t errlen);
/* Close the listener and every client, unlink the socket. */
void sup_ctl_stop(struct sup *sup);
/* True while a client that got its reply has not been written to yet. */
bool sup_ctl_replies_pending(const struct sup *sup);
/* A child answered a STATUS_REQ: status requests waiting for fresh
 * answers are replied to once none is outstanding. */
void sup_ctl_status_arrived(struct sup *sup);

/* ---- daemon.c ------------------------------------------------------------ */

/* Write "pid\n" to path atomically (temp file + rename), mode 0644,
 * creating missing parent directories (0755). 0 or -1 with err. */
int sup_pidfile_write(const char *path, pid_t pid, char *err, size_t errlen);
/* The pid in path: > 0, 0 if the file does not exist, -1 with err if it
 * cannot be read or does not hold a pid. */
pid_t sup_pidfile_read(const char *path, char *err, size_t errlen);
/* Parse a pid file's text: the pid, or -1 if it is not one positive
 * decimal integer optionally followed by a newline. */
pid_t sup_pidfile_parse(const char *text, size_t len);
/* Remove path if it holds pid. */
void sup_pidfile_remove(const char *path, pid_t pid);
/* Is pid a live nodepoold (not a zombie, /proc/PID/comm "nodepoold"
 * where /proc says so)? */
bool sup_pid_alive(pid_t pid);

/*
 * Detach as an init script expects: fork, setsid, fork again; the original
 * process waits on a pipe until the daemon calls sup_daemon_ready() (exit
 * 0) or sup_daemon_failed() (prints the message, exit 1), or the daemon
 * dies (exit 1). Returns in the daemon only. The daemon's cwd becomes /.
 */
void sup_daemonize(void);
/* The daemon is up (control socket, pid file): release the parent; then
 * stdin/stdout go to /dev/null, and stderr too unless it is a regular file
 * (the init script's log). No-op when not daemonized. */
void sup_daemon_ready(void);
/* Startup failed: hand msg to the waiting parent, which prints it and exits
 * 1, or 0 when already_running (another nodepoold owns the socket). */
void sup_daemon_failed(const char *msg, bool already_running);

/* ---- the supervisor -------------------------------------------------------- */

struct sup_ctl;

struct sup {
	struct event_base *base;
	char *bindir;	   /* directory of nodepoold's own executable */
	char *config_path; /* absolute */
	char *secure_path; /* absolute, NULL if none */
	char *pid_file;	   /* fixed at start */
	char *ctl_path;	   /* fixed at start */
	bool debug;

	struct np_config *cfg; /* in force; NULL before the first load */
	int64_t gen;	       /* generation of cfg (1 for the first) */
	double status_timeout; /* worker-status-timeout, seconds */
	double backoff_max;    /* restart-backoff-max, seconds */

	TAILQ_HEAD(, sup_child) children; /* config order */
	bool builder_absent_logged;
	/* whom each role's processes run as (-u, --web-user, --builder-user;
	 * unset: as nodepoold); --no-builder: diskimages are built by a
	 * nodepool-builder of their own (its unit), none is started here */
	struct privsep_user users[IPC_KIND_COUNT];
	bool no_builder;

	/* reload on change: the watcher (NULL when off or unavailable) and
	 * the contents last loaded (or rejected), owned */
	struct cfgwatch *watch;
	struct cfgwatch_snapshot seen;
	/* the web API's address, fixed by the first configuration */
	int webapp_port;
	char *webapp_listen_address;

	int ctl_fd;
	struct event *ctl_ev;
	TAILQ_HEAD(, sup_ctl) ctls;
	int nctls;

	struct event *tick;	   /* STATUS poll */
	struct statsd *statsd;	   /* STATSD_HOST/STATSD_PORT, or NULL */
	struct event *stats_ev;	   /* the launcher gauges, every stats-interval */
	struct event *shutdown_ev; /* hard deadline of a shutdown */
	bool stopping;
	double started_at;
};

/* Begin the shutdown: STOP every child; the loop exits once all are gone
 * (or after SUP_SHUTDOWN_TIMEOUT, with SIGKILL). */
void sup_shutdown(struct sup *sup, const char *why);
/* Called when a child's process is gone: ends the loop when stopping and
 * nothing is left. */
void sup_check_done(struct sup *sup);
/* The STATUS poll tick, the shutdown deadline timer and, with statsd in
 * the environment, the host's launcher gauges (lib/ops/statsd.h:
 * nodepool.launcher.<hostname>.*, the workers' ZooKeeper operations in
 * flight summed from their STATUS) every stats-interval (sup->base set). */
void sup_timers_new(struct sup *sup);
void sup_timers_free(struct sup *sup);
/* Act on a signal nodepoold watches: SIGCHLD reaps, SIGHUP reloads,
 * SIGTERM/SIGINT shut down, SIGUSR2 dumps and is forwarded to children. */
void sup_signal(struct sup *sup, int sig);
/* Reload and log the outcome (SIGHUP). */
void sup_reload_and_log(struct sup *sup, struct sup_reload_result *res);
double sup_now(void); /* monotonic seconds */

#endif
