/*
 * A supervised child's lifecycle: the state x event table (see sup.h for
 * the picture), its channel, STATUS polling, reaping.
 *
 * Every change of a child's state goes through sup_child_dispatch(): the
 * table gives the action for (state, event), the action does the work and
 * returns the next state. An empty cell means the event means nothing in
 * that state (a late READY, a timer that raced an exit) and is ignored.
 */
#include "supervisor/sup.h"

#include <errno.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "lib/core/chan.h"
#include "lib/core/log.h"
#include "lib/core/version.h"
#include "lib/core/clock.h"

typedef enum sup_state sup_action(struct sup_child *c);

static const char *const state_names[SUP_STATE_COUNT] = {
    [SUP_DOWN] = "down",	 [SUP_STARTING] = "starting", [SUP_RUNNING] = "running",
    [SUP_STOPPING] = "stopping", [SUP_BACKOFF] = "backoff",   [SUP_DEAD] = "dead",
};

static const char *const event_names[SUP_EVENT_COUNT] = {
    [SUP_EV_UP] = "up",		  [SUP_EV_READY] = "ready", [SUP_EV_EXIT] = "exit",
    [SUP_EV_KILL] = "kill",	  [SUP_EV_LOST] = "lost",   [SUP_EV_DOWN] = "down",
    [SUP_EV_RESTART] = "restart", [SUP_EV_TIMER] = "timer",
};

double
sup_now(void)
{
	return np_mono_s();
}

const char *
sup_state_name(enum sup_state st)
{
	return (int)st >= 0 && st < SUP_STATE_COUNT ? state_names[st] : "?";
}

const char *
sup_event_name(enum sup_event ev)
{
	return (int)ev >= 0 && ev < SUP_EVENT_COUNT ? event_names[ev] : "?";
}

const char *
sup_wstatus_str(int wstatus, char *buf, size_t len)
{
	if (WIFEXITED(wstatus))
		snprintf(buf, len, "exited %d", WEXITSTATUS(wstatus));
	else if (WIFSIGNALED(wstatus))
		snprintf(buf, len, "killed by signal %d (%s)%s", WTERMSIG(wstatus),
			 strsignal(WTERMSIG(wstatus)), WCOREDUMP(wstatus) ? ", core dumped" : "");
	else
		snprintf(buf, len, "wait status 0x%x", (unsigned)wstatus);
	return buf;
}

double
sup_backoff_delay(int n, double max)
{
	double d = 1;

	if (n <= 1)
		return 0;
	for (int i = 2; i < n && d < max; i++)
		d *= 2;
	return d < max ? d : max;
}

double
sup_poll_interval(double status_timeout)
{
	double p = status_timeout / 4;

	if (p > 5)
		p = 5;
	if (p < 0.1)
		p = 0.1;
	return p;
}

static void set_error(struct sup_child *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
set_error(struct sup_child *c, const char *fmt, ...)
{
	va_list ap;

	free(c->last_error);
	va_start(ap, fmt);
	if (vasprintf(&c->last_error, fmt, ap) < 0)
		abort();
	va_end(ap);
}

static void
arm_timer(struct sup_child *c, double secs)
{
	struct timeval tv = np_tv_of(secs);

	evtimer_add(c->timer, &tv);
}

static void
cancel_timer(struct sup_child *c)
{
	evtimer_del(c->timer);
}

static void
drop_chan(struct sup_child *c)
{
	chan_free(c->chan); /* allowed inside the channel's own callbacks */
	c->chan = NULL;
}

static void
clear_status(struct sup_child *c)
{
	struct ipc_msg m;

	if (c->have_status) {
		ipc_msg_init(&m, IPC_STATUS);
		m.u.status = c->last_status;
		ipc_msg_clear(&m);
	}
	memset(&c->last_status, 0, sizeof(c->last_status));
	c->have_status = false;
	c->status_pending = false;
}

/* ---- the channel ----------------------------------------------------------- */

static void
on_ready(struct sup_child *c, const struct ipc_ready *r)
{
	if (r->provider == NULL || strcmp(r->provider, c->name) != 0 || r->pid != c->pid) {
		snprintf(
		    c->reason, sizeof(c->reason), "READY names %s pid %lld, expected %s pid %ld",
		    r->provider ? r->provider : "(none)", (long long)r->pid, c->name, (long)c->pid);
		sup_child_dispatch(c, SUP_EV_KILL);
		return;
	}
	c->zk_session = r->zk_session;
	if (strcmp(r->version ? r->version : "", NP_VERSION) != 0)
		log_warn("%s %s: runs version %s, nodepoold is %s", c->role->role_name, c->name,
			 r->version ? r->version : "?", NP_VERSION);
	sup_child_dispatch(c, SUP_EV_READY);
}

static void
on_config_ack(struct sup_child *c, const struct ipc_config_ack *a)
{
	size_t i;

	if (a->ok) {
		if (a->generation > c->gen_acked)
			c->gen_acked = a->generation;
		log_debug("%s %s: configuration generation %lld in force", c->role->role_name,
			  c->name, (long long)a->generation);
		return;
	}
	for (i = 0; i < a->errors.n; i++)
		log_error("%s %s: refused configuration generation %lld: %s", c->role->role_name,
			  c->name, (long long)a->generation, a->errors.v[i]);
	set_error(c, "refused configuration generation %lld: %s", (long long)a->generation,
		  a->errors.n > 0 ? a->errors.v[0] : "no reason given");
	/* A worker with no configuration in force exits 100 by itself; one
	 * that still runs the old configuration is restarted on the new one
	 * (and then exits 100 if that cannot run either: no loop). */
	if (c->gen_acked > 0 && a->generation == c->gen_sent &&
	    (c->state == SUP_STARTING || c->state == SUP_RUNNING)) {
		snprintf(c->reason, sizeof(c->reason), "refused its new configuration");
		sup_child_dispatch(c, SUP_EV_RESTART);
	}
}

static void
on_status(struct sup_child *c, struct ipc_msg *msg)
{
	bool pending = c->status_pending;

	if (msg->u.status.seq != 0 && msg->u.status.seq == c->status_seq)
		pending = false; /* the answer to the last STATUS_REQ */
	clear_status(c);
	c->status_pending = pending;
	/* Move the decoded status out of the channel's message. */
	c->last_status = msg->u.status;
	c->have_status = true;
	ipc_msg_init(msg, IPC_NONE);
	if (c->role->kind == IPC_KIND_PROVIDER && c->last_status.metrics != NULL)
		sup_web_metrics(c->sup, c);
	if (!pending)
		sup_ctl_status_arrived(c->sup);
}

/* ---- the metrics of the workers, passed on to nodepool-web -------------------- */

/* Send one provider's record to the web child (running, channel up). */
static void
send_metrics(struct sup_child *web, struct sup_child *from)
{
	struct ipc_msg m;

	if (from->metrics_sent != NULL &&
	    strcmp(from->metrics_sent, from->last_status.metrics) == 0)
		return;
	ipc_msg_init(&m, IPC_METRICS);
	ipc_set_str(&m.u.metrics.provider, from->name);
	ipc_set_str(&m.u.metrics.record, from->last_status.metrics);
	if (chan_send(web->chan, &m) == 0) {
		free(from->metrics_sent);
		from->metrics_sent = strdup(from->last_status.metrics);
	} else {
		log_warn("web: METRICS: %s", chan_last_error(web->chan));
	}
	ipc_msg_clear(&m);
}

static struct sup_child *
web_child(struct sup *sup)
{
	struct sup_child *c;

	TAILQ_FOREACH(c, &sup->children, entry)
	if (c->role->kind == IPC_KIND_WEB)
		return c->state == SUP_RUNNING && c->chan != NULL ? c : NULL;
	return NULL;
}

void
sup_web_metrics(struct sup *sup, struct sup_child *from)
{
	struct sup_child *web = web_child(sup);

	if (web != NULL && from->have_status && from->last_status.metrics != NULL)
		send_metrics(web, from);
}

/* A new web process knows nothing yet: every provider's record goes to it
 * once it is READY. */
static void
web_forget_sent(struct sup *sup)
{
	struct sup_child *c;

	TAILQ_FOREACH(c, &sup->children, entry)
	{
		free(c->metrics_sent);
		c->metrics_sent = NULL;
	}
}

static void
web_ready(struct sup_child *web)
{
	struct sup_child *c;

	web_forget_sent(web->sup);
	TAILQ_FOREACH(c, &web->sup->children, entry)
	if (c->role->kind == IPC_KIND_PROVIDER && c->have_status && c->last_status.metrics != NULL)
		send_metrics(web, c);
}

static void
on_msg(struct chan *ch, struct ipc_msg *msg, void *arg)
{
	struct sup_child *c = arg;

	switch (msg->type) {
	case IPC_READY:
		on_ready(c, &msg->u.ready);
		break;
	case IPC_STATUS:
		on_status(c, msg);
		break;
	case IPC_CONFIG_ACK:
		on_config_ack(c, &msg->u.config_ack);
		break;
	case IPC_DUMP_REPLY:
		log_info("%s %s: state dump:\n%s", c->role->role_name, c->name,
			 msg->u.dump_reply.text);
		break;
	default:
		break; /* chan.c lets through only what a child may send */
	}
}

static void
on_close(struct chan *ch, enum chan_event ev, const char *why, void *arg)
{
	struct sup_child *c = arg;

	snprintf(c->reason, sizeof(c->reason), "%s", why);
	/* A malformed message from an internal process is fatal there
	 * (style rule 6); a closed channel means it is exiting. */
	sup_child_dispatch(c, ev == CHAN_PROTO_ERROR ? SUP_EV_KILL : SUP_EV_LOST);
}

int
sup_child_send_config(struct sup_child *c)
{
	struct ipc_msg m;
	int rc;

	if (c->chan == NULL)
		return -1;
	ipc_msg_init(&m, IPC_CONFIG);
	m.u.config.generation = c->sup->gen;
	ipc_set_str(&m.u.config.provider, c->name);
	m.u.config.config = json_dumps(c->slice, JSON_COMPACT | JSON_SORT_KEYS);
	if (m.u.config.config == NULL)
		abort();
	rc = chan_send(c->chan, &m);
	ipc_msg_clear(&m);
	if (rc < 0) {
		log_error("%s %s: cannot send its configuration: %s", c->role->role_name, c->name,
			  chan_last_error(c->chan));
		return -1;
	}
	c->gen_sent = c->sup->gen;
	return 0;
}

/* ---- actions ---------------------------------------------------------------- */

static enum sup_state act_kill(struct sup_child *c);

/* fork+exec with the child's current slice. */
static enum sup_state
act_spawn(struct sup_child *c)
{
	struct sup *sup = c->sup;
	char err[200], *path;
	int fd;
	pid_t pid;

	cancel_timer(c);
	if (sup->stopping)
		return SUP_DOWN;
	c->want = SUP_WANT_UP;
	if (sup_program_path(c->role, sup->bindir, &path) < 0) {
		set_error(c, "cannot execute %s: %s", path, strerror(errno));
		log_error("%s %s: %s: not started", c->role->role_name, c->name, c->last_error);
		free(path);
		return SUP_DEAD;
	}
	free(path);
	if (c->spawned_at > 0)
		c->restarts++;
	c->spawned_at = sup_now();
	c->ready_at = 0;
	c->gen_acked = 0;
	c->zk_session = 0;
	clear_status(c);
	pid = sup_spawn(c->role, sup->bindir, c->name, sup->debug, &sup->users[c->role->kind], &fd,
			err, sizeof(err));
	if (pid < 0) {
		/* fork or socketpair failed: like a crash, with back-off */
		set_error(c, "cannot start: %s", err);
		log_error("%s %s: %s", c->role->role_name, c->name, err);
		c->exited_at = sup_now();
		c->crashes++;
		arm_timer(c, sup_backoff_delay(c->crashes, sup->backoff_max) + 1);
		return SUP_BACKOFF;
	}
	c->pid = pid;
	c->chan =
	    chan_new(sup->base, fd, CHAN_SUPERVISOR, 0, 0, on_msg, on_close, c, err, sizeof(err));
	if (c->chan == NULL) {
		close(fd);
		snprintf(c->reason, sizeof(c->reason), "channel: %s", err);
		return act_kill(c);
	}
	log_info("%s %s: started, pid %ld", c->role->role_name, c->name, (long)pid);
	if (sup_child_send_config(c) < 0) {
		snprintf(c->reason, sizeof(c->reason), "cannot send its configuration");
		return act_kill(c);
	}
	return SUP_STARTING;
}

/* A start asked for (new child, new config, nodepoolctl restart): the
 * back-off starts afresh. */
static enum sup_state
act_fresh_spawn(struct sup_child *c)
{
	c->crashes = 0;
	return act_spawn(c);
}

static enum sup_state
act_ready(struct sup_child *c)
{
	c->ready_at = sup_now();
	log_info("%s %s: ready: pid %ld, ZooKeeper session 0x%llx, %.3f s after start",
		 c->role->role_name, c->name, (long)c->pid, (unsigned long long)c->zk_session,
		 c->ready_at - c->spawned_at);
	if (c->role->kind == IPC_KIND_WEB) {
		c->state = SUP_RUNNING; /* web_child() looks for a running one */
		web_ready(c);
	}
	return SUP_RUNNING;
}

/* The process is gone: forget everything that belonged to it. */
static void
exited(struct sup_child *c)
{
	char ws[128];

	cancel_timer(c);
	drop_chan(c);
	clear_status(c);
	c->exited_at = sup_now();
	log_info("%s %s: pid %ld %s after %.1f s", c->role->role_name, c->name, (long)c->pid,
		 sup_wstatus_str(c->wstatus, ws, sizeof(ws)), c->exited_at - c->spawned_at);
	c->pid = 0;
}

/* An exit nodepoold did not ask for: the restart policy decides. */
static enum sup_state
after_crash(struct sup_child *c)
{
	struct sup *sup = c->sup;
	int code = WIFEXITED(c->wstatus) ? WEXITSTATUS(c->wstatus) : -1;
	double delay, stable;
	char ws[128];

	if (sup->stopping)
		return SUP_DOWN;
	sup_wstatus_str(c->wstatus, ws, sizeof(ws));
	if (code == SUP_EXIT_PERMANENT) {
		log_error("%s %s: %s (permanent failure): not restarted", c->role->role_name,
			  c->name, ws);
		if (c->last_error == NULL || strstr(c->last_error, "refused") == NULL)
			set_error(c, "%s (permanent failure): not restarted", ws);
		return SUP_DEAD;
	}
	if (c->role->restart == SUP_RESTART_NEVER ||
	    (c->role->restart == SUP_RESTART_ON_FAILURE && code == 0))
		return SUP_DOWN;
	/* A run that stayed up at least as long as the longest back-off was a
	 * good one: the next failure restarts at once again. */
	stable = sup->backoff_max > 1 ? sup->backoff_max : 1;
	if (c->ready_at > 0 && c->exited_at - c->ready_at >= stable)
		c->crashes = 0;
	c->crashes++;
	if (c->reason[0] != '\0')
		set_error(c, "%s (%s)", ws, c->reason);
	else
		set_error(c, "%s", ws);
	c->reason[0] = '\0';
	delay = sup_backoff_delay(c->crashes, sup->backoff_max);
	if (delay <= 0) {
		log_warn("%s %s: restarting now", c->role->role_name, c->name);
		return act_spawn(c);
	}
	log_warn("%s %s: restarting in %.0f s (%d failures in a row)", c->role->role_name, c->name,
		 delay, c->crashes);
	arm_timer(c, delay);
	return SUP_BACKOFF;
}

static enum sup_state
act_died(struct sup_child *c)
{
	exited(c);
	return after_crash(c);
}

static enum sup_state
act_reaped(struct sup_child *c)
{
	exited(c);
	switch (c->want) {
	case SUP_WANT_GONE:
		log_info("%s %s: stopped and removed", c->role->role_name, c->name);
		return SUP_DOWN;
	case SUP_WANT_DOWN:
		return SUP_DOWN;
	case SUP_WANT_RESTART:
		c->reason[0] = '\0';
		return act_spawn(c);
	case SUP_WANT_UP:
		break;
	}
	return after_crash(c); /* killed by us (hung, lost) or died meanwhile */
}

static enum sup_state
act_kill(struct sup_child *c)
{
	log_warn("%s %s: %s: killing pid %ld", c->role->role_name, c->name,
		 c->reason[0] ? c->reason : "killed", (long)c->pid);
	set_error(c, "killed: %s", c->reason[0] ? c->reason : "by nodepoold");
	if (c->pid > 0)
		kill(c->pid, SIGKILL);
	drop_chan(c);
	cancel_timer(c);
	return SUP_STOPPING;
}

static enum sup_state
act_lost(struct sup_child *c)
{
	log_warn("%s %s: %s", c->role->role_name, c->name, c->reason);
	drop_chan(c);
	/* It exits on its own when its channel is gone; a grace covers its
	 * goodbye (and a sanitizer's leak report), then SIGKILL. */
	arm_timer(c, SUP_LOST_GRACE);
	return SUP_STOPPING;
}

static enum sup_state
act_drop(struct sup_child *c)
{
	drop_chan(c);
	return SUP_STOPPING;
}

static enum sup_state
act_stop(struct sup_child *c)
{
	struct ipc_msg m;
	int rc = -1;

	log_info("%s %s: stopping pid %ld", c->role->role_name, c->name, (long)c->pid);
	if (c->chan != NULL) {
		ipc_msg_init(&m, IPC_STOP);
		m.u.stop.graceful = true;
		rc = chan_send(c->chan, &m);
		ipc_msg_clear(&m);
	}
	if (rc < 0 && c->pid > 0)
		kill(c->pid, SIGTERM);
	arm_timer(c, c->role->stop_grace);
	return SUP_STOPPING;
}

static enum sup_state
act_stop_restart(struct sup_child *c)
{
	c->want = SUP_WANT_RESTART;
	return act_stop(c);
}

/* Start it again once the exit we are waiting for has come. */
static enum sup_state
act_want(struct sup_child *c)
{
	if (c->want != SUP_WANT_DOWN && !c->sup->stopping)
		c->want = SUP_WANT_RESTART;
	return SUP_STOPPING;
}

static enum sup_state
act_stop_timeout(struct sup_child *c)
{
	log_warn("%s %s: pid %ld did not exit in time: SIGKILL", c->role->role_name, c->name,
		 (long)c->pid);
	if (c->pid > 0)
		kill(c->pid, SIGKILL);
	return SUP_STOPPING;
}

static enum sup_state
act_cancel(struct sup_child *c)
{
	cancel_timer(c);
	return SUP_DOWN;
}

/* The state x event table (sup.h draws it). */
static sup_action *const sup_table[SUP_STATE_COUNT][SUP_EVENT_COUNT] = {
    [SUP_DOWN] =
	{
	    [SUP_EV_UP] = act_fresh_spawn,
	    [SUP_EV_RESTART] = act_fresh_spawn,
	},
    [SUP_STARTING] =
	{
	    [SUP_EV_READY] = act_ready,
	    [SUP_EV_EXIT] = act_died,
	    [SUP_EV_KILL] = act_kill,
	    [SUP_EV_LOST] = act_lost,
	    [SUP_EV_DOWN] = act_stop,
	    [SUP_EV_RESTART] = act_stop_restart,
	},
    [SUP_RUNNING] =
	{
	    [SUP_EV_EXIT] = act_died,
	    [SUP_EV_KILL] = act_kill,
	    [SUP_EV_LOST] = act_lost,
	    [SUP_EV_DOWN] = act_stop,
	    [SUP_EV_RESTART] = act_stop_restart,
	},
    [SUP_STOPPING] =
	{
	    [SUP_EV_UP] = act_want,
	    [SUP_EV_EXIT] = act_reaped,
	    [SUP_EV_KILL] = act_kill,
	    [SUP_EV_LOST] = act_drop,
	    [SUP_EV_RESTART] = act_want,
	    [SUP_EV_TIMER] = act_stop_timeout,
	},
    [SUP_BACKOFF] =
	{
	    [SUP_EV_DOWN] = act_cancel,
	    [SUP_EV_RESTART] = act_fresh_spawn,
	    [SUP_EV_TIMER] = act_spawn,
	},
    [SUP_DEAD] =
	{
	    [SUP_EV_UP] = act_fresh_spawn,
	    [SUP_EV_DOWN] = act_cancel,
	    [SUP_EV_RESTART] = act_fresh_spawn,
	},
};

void
sup_child_dispatch(struct sup_child *c, enum sup_event ev)
{
	struct sup *sup = c->sup;
	enum sup_state from = c->state;
	sup_action *act = sup_table[from][ev];

	if (act == NULL) {
		log_debug("%s %s: %s ignored while %s", c->role->role_name, c->name,
			  sup_event_name(ev), sup_state_name(from));
		return;
	}
	c->state = act(c);
	if (c->state != from)
		log_debug("%s %s: %s --%s--> %s", c->role->role_name, c->name, sup_state_name(from),
			  sup_event_name(ev), sup_state_name(c->state));
	if (c->want == SUP_WANT_GONE && c->pid == 0 && c->state == SUP_DOWN) {
		TAILQ_REMOVE(&sup->children, c, entry);
		sup_child_free(c);
	}
	/* a status request waiting for this child's answer need not wait for
	 * a process that is gone */
	sup_ctl_status_arrived(sup);
	sup_check_done(sup);
}

static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
	sup_child_dispatch(arg, SUP_EV_TIMER);
}

/* ---- children -------------------------------------------------------------- */

struct sup_child *
sup_child_new(struct sup *sup, const struct sup_role *role, const char *name)
{
	struct sup_child *c = calloc(1, sizeof(*c));

	if (c == NULL || (c->name = strdup(name)) == NULL)
		abort();
	c->sup = sup;
	c->role = role;
	c->state = SUP_DOWN;
	c->want = SUP_WANT_UP;
	if ((c->timer = evtimer_new(sup->base, on_timer, c)) == NULL)
		abort();
	return c;
}

void
sup_child_free(struct sup_child *c)
{
	if (c == NULL)
		return;
	drop_chan(c);
	clear_status(c);
	event_free(c->timer);
	json_decref(c->slice);
	free(c->last_error);
	free(c->metrics_sent);
	free(c->name);
	free(c);
}

struct sup_child *
sup_child_find(struct sup *sup, enum ipc_child_kind kind, const char *name)
{
	struct sup_child *c;

	TAILQ_FOREACH(c, &sup->children, entry)
	if (c->role->kind == kind && strcmp(c->name, name) == 0)
		return c;
	return NULL;
}

bool
sup_any_running(const struct sup *sup)
{
	const struct sup_child *c;

	TAILQ_FOREACH(c, &sup->children, entry)
	if (c->pid > 0)
		return true;
	return false;
}

void
sup_reap(struct sup *sup)
{
	struct sup_child *c;
	int st;
	pid_t pid;

	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		TAILQ_FOREACH(c, &sup->children, entry)
		if (c->pid == pid)
			break;
		if (c == NULL) {
			log_debug("reaped pid %ld, not a child of the table", (long)pid);
			continue;
		}
		c->wstatus = st;
		sup_child_dispatch(c, SUP_EV_EXIT);
	}
}

/* Is c a child that answers STATUS_REQ (its process runs, its channel is up)? */
static bool
polled(const struct sup_child *c)
{
	return (c->state == SUP_STARTING || c->state == SUP_RUNNING) && c->chan != NULL;
}

/* Send c a STATUS_REQ unless one is already unanswered. */
static void
ask_status(struct sup_child *c, double now)
{
	struct ipc_msg m;

	if (c->status_pending)
		return;
	ipc_msg_init(&m, IPC_STATUS_REQ);
	m.u.status_req.seq = ++c->status_seq;
	if (chan_send(c->chan, &m) == 0) {
		c->status_pending = true;
		c->status_sent_at = now;
	} else {
		log_warn("%s %s: STATUS_REQ: %s", c->role->role_name, c->name,
			 chan_last_error(c->chan));
	}
}

void
sup_poll_status(struct sup *sup)
{
	struct sup_child *c, *next;
	double now = sup_now();

	for (c = TAILQ_FIRST(&sup->children); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		if (!polled(c))
			continue;
		if (c->status_pending && now - c->status_sent_at >= sup->status_timeout) {
			snprintf(c->reason, sizeof(c->reason),
				 "no STATUS reply within %g s (worker-status-timeout)",
				 sup->status_timeout);
			sup_child_dispatch(c, SUP_EV_KILL);
			continue;
		}
		ask_status(c, now);
	}
}

bool
sup_refresh_status(struct sup *sup)
{
	struct sup_child *c;
	double now = sup_now();

	TAILQ_FOREACH(c, &sup->children, entry)
	if (polled(c))
		ask_status(c, now);
	return sup_status_pending(sup);
}

bool
sup_status_pending(const struct sup *sup)
{
	const struct sup_child *c;

	TAILQ_FOREACH(c, &sup->children, entry)
	if (polled(c) && c->status_pending)
		return true;
	return false;
}

/* ---- views ----------------------------------------------------------------- */

void
sup_child_info(const struct sup_child *c, struct ipc_worker_info *wi, double now)
{
	const struct ipc_status *st = &c->last_status;
	size_t i;

	wi->kind = c->role->kind;
	wi->pid = c->pid;
	ipc_set_str(&wi->state, sup_state_name(c->state));
	wi->uptime_s = c->pid > 0 ? (int64_t)(now - c->spawned_at) : 0;
	wi->restarts = c->restarts;
	wi->zk_state = IPC_ZK_UNKNOWN;
	if (c->have_status) {
		wi->zk_state = st->zk_state;
		wi->accepted = st->accepted;
		wi->fulfilled = st->fulfilled;
		wi->declined = st->declined;
		wi->failed = st->failed;
		for (i = 0; i < st->nodes.n; i++)
			ipc_counts_add(&wi->nodes, st->nodes.v[i].name, st->nodes.v[i].n);
		for (i = 0; i < st->peers.n; i++)
			ipc_strv_push(&wi->peers, st->peers.v[i]);
		wi->lock_attempts = st->lock_attempts;
		wi->lock_lost = st->lock_lost;
		wi->rss_kb = st->rss_kb;
		wi->pss_kb = st->pss_kb;
	}
	if (c->have_status && st->last_error != NULL)
		ipc_set_str(&wi->last_error, st->last_error);
	else
		ipc_set_str(&wi->last_error, c->last_error);
}

void
sup_dump(struct sup *sup, struct evbuffer *out)
{
	struct sup_child *c;
	double now = sup_now();

	evbuffer_add_printf(out, "nodepoold pid %ld, up %.0f s, config generation %lld%s\n",
			    (long)getpid(), now - sup->started_at, (long long)sup->gen,
			    sup->stopping ? ", stopping" : "");
	TAILQ_FOREACH(c, &sup->children, entry)
	{
		evbuffer_add_printf(
		    out,
		    "  %s %s: %s, pid %ld, up %.0f s, restarts %lld, failures in a row %d, "
		    "config %lld/%lld, zk session 0x%llx, status %s%s%s\n",
		    c->role->role_name, c->name, sup_state_name(c->state), (long)c->pid,
		    c->pid > 0 ? now - c->spawned_at : 0.0, (long long)c->restarts, c->crashes,
		    (long long)c->gen_acked, (long long)c->gen_sent,
		    (unsigned long long)c->zk_session,
		    c->status_pending ? "pending"
		    : c->have_status  ? "fresh"
				      : "none",
		    c->last_error ? ", last error: " : "", c->last_error ? c->last_error : "");
	}
}
