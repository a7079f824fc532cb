/*
 * The control socket: one request and one reply per connection
 * (lib/ops/ctlsock.h), the requests as a command table.
 *
 * Clients are untrusted (style rule 6): ctlsock_accept checks their
 * credentials, the channel disconnects one that sends anything malformed,
 * at most SUP_CTL_MAX are served at once, and one that sends nothing for
 * SUP_CTL_IDLE seconds is dropped.
 *
 * A status request first asks every running child for a STATUS and answers
 * once all have replied (at most SUP_CTL_STATUS_WAIT seconds; a child that
 * did not answer is shown with its last STATUS): counters as of the
 * request, not of the last periodic poll.
 */
#include "supervisor/sup.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "lib/core/chan.h"
#include "lib/config/config.h"
#include "lib/ops/ctlsock.h"
#include "lib/core/clock.h"
#include "lib/core/log.h"

struct sup_ctl {
	TAILQ_ENTRY(sup_ctl) entry;
	struct sup *sup;
	struct chan *ch;
	struct event *idle;
	pid_t peer_pid;
	uid_t peer_uid;
	bool replied;
	bool waiting; /* a status request waiting for fresh STATUS answers */
};

/* A command: runs with the request, fills the reply (init'd by the
 * caller to the command's reply type). */
typedef void sup_ctl_fn(struct sup *sup, const struct ipc_msg *req, struct ipc_msg *reply);

struct sup_ctl_cmd {
	enum ipc_type request;
	enum ipc_type reply;
	const char *name;
	sup_ctl_fn *run;
};

static void result(struct ipc_msg *reply, bool ok, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
result(struct ipc_msg *reply, bool ok, const char *fmt, ...)
{
	va_list ap;

	reply->u.ctl_result.ok = ok;
	free(reply->u.ctl_result.message);
	va_start(ap, fmt);
	if (vasprintf(&reply->u.ctl_result.message, fmt, ap) < 0)
		abort();
	va_end(ap);
}

static void
ctl_status(struct sup *sup, const struct ipc_msg *req, struct ipc_msg *reply)
{
	struct sup_child *c;
	double now = sup_now();

	TAILQ_FOREACH(c, &sup->children, entry)
	{
		struct ipc_worker_info *wi =
		    ipc_workers_add(&reply->u.ctl_status_reply.workers, c->name);
		if (wi == NULL)
			abort();
		sup_child_info(c, wi, now);
	}
}

static void
ctl_restart(struct sup *sup, const struct ipc_msg *req, struct ipc_msg *reply)
{
	const char *name = req->u.ctl_restart.provider;
	struct sup_child *c = sup_child_find(sup, IPC_KIND_PROVIDER, name);
	pid_t old;

	if (c == NULL && strcmp(name, "builder") == 0)
		c = sup_child_find(sup, IPC_KIND_BUILDER, name);
	if (c == NULL && strcmp(name, "web") == 0)
		c = sup_child_find(sup, IPC_KIND_WEB, name);
	if (c == NULL || c->want == SUP_WANT_GONE) {
		result(reply, false, "no such provider: %s", name);
		return;
	}
	if (sup->stopping) {
		result(reply, false, "nodepoold is stopping");
		return;
	}
	old = c->pid;
	log_info("%s %s: restart requested by nodepoolctl", c->role->role_name, c->name);
	snprintf(c->reason, sizeof(c->reason), "restarted by nodepoolctl");
	sup_child_dispatch(c, SUP_EV_RESTART);
	if (old > 0)
		result(reply, true, "restarting %s (pid %ld)", name, (long)old);
	else
		result(reply, true, "starting %s (pid %ld)", name, (long)c->pid);
}

static void
ctl_reload(struct sup *sup, const struct ipc_msg *req, struct ipc_msg *reply)
{
	struct sup_reload_result res;
	size_t i;

	if (sup->stopping) {
		result(reply, false, "nodepoold is stopping");
		return;
	}
	sup_reload_and_log(sup, &res);
	if (res.ok) {
		result(reply, true,
		       "reloaded: configuration generation %lld, %zu unchanged, "
		       "%zu changed, %zu added, %zu removed",
		       (long long)sup->gen, res.unchanged, res.changed, res.added, res.removed);
	} else {
		result(reply, false, "reload failed: %zu configuration error(s)",
		       np_cfg_errors_count(res.errs));
		for (i = 0; i < res.errs->n; i++) {
			char *line = np_cfg_error_format(&res.errs->v[i]);
			ipc_strv_push(&reply->u.ctl_result.errors, line);
			free(line);
		}
		if (res.errs->dropped > 0) {
			char more[64];
			snprintf(more, sizeof(more), "... and %zu more errors", res.errs->dropped);
			ipc_strv_push(&reply->u.ctl_result.errors, more);
		}
	}
	sup_reload_result_clear(&res);
}

static void
ctl_stop(struct sup *sup, const struct ipc_msg *req, struct ipc_msg *reply)
{
	result(reply, true, "stopping nodepoold (pid %ld)", (long)getpid());
	/* The reply is queued before the children are told; the loop keeps
	 * running until it is written (sup_check_done waits for it). */
	sup_shutdown(sup, "stop requested by nodepoolctl");
}

static const struct sup_ctl_cmd sup_ctl_cmds[] = {
    {IPC_CTL_STATUS, IPC_CTL_STATUS_REPLY, "status", ctl_status},
    {IPC_CTL_RESTART, IPC_CTL_RESULT, "restart", ctl_restart},
    {IPC_CTL_RELOAD, IPC_CTL_RESULT, "reload", ctl_reload},
    {IPC_CTL_STOP, IPC_CTL_RESULT, "stop", ctl_stop},
};

static void
ctl_free(struct sup_ctl *x)
{
	struct sup *sup = x->sup;

	TAILQ_REMOVE(&sup->ctls, x, entry);
	sup->nctls--;
	chan_free(x->ch);
	event_free(x->idle);
	free(x);
}

static void
send_reply(struct sup_ctl *x, struct ipc_msg *reply)
{
	x->replied = true;
	x->waiting = false;
	evtimer_del(x->idle);
	if (chan_send(x->ch, reply) < 0)
		log_warn("control: reply to pid %ld: %s", (long)x->peer_pid,
			 chan_last_error(x->ch));
	ipc_msg_clear(reply);
	chan_close_after_flush(x->ch);
}

static void
reply_status(struct sup_ctl *x)
{
	struct ipc_msg reply;

	ipc_msg_init(&reply, IPC_CTL_STATUS_REPLY);
	ctl_status(x->sup, NULL, &reply);
	send_reply(x, &reply);
}

void
sup_ctl_status_arrived(struct sup *sup)
{
	struct sup_ctl *x, *next;

	if (sup_status_pending(sup))
		return;
	for (x = TAILQ_FIRST(&sup->ctls); x != NULL; x = next) {
		next = TAILQ_NEXT(x, entry);
		if (x->waiting)
			reply_status(x);
	}
}

static void
ctl_on_msg(struct chan *ch, struct ipc_msg *msg, void *arg)
{
	struct sup_ctl *x = arg;
	const struct sup_ctl_cmd *cmd = NULL;
	struct ipc_msg reply;
	struct timeval tv = np_tv_of(SUP_CTL_STATUS_WAIT);
	size_t i;

	for (i = 0; i < sizeof(sup_ctl_cmds) / sizeof(sup_ctl_cmds[0]); i++)
		if (sup_ctl_cmds[i].request == msg->type)
			cmd = &sup_ctl_cmds[i];
	if (cmd == NULL) {
		/* every request of the catalogue has a row: this is unreachable
		 * unless the catalogue grew without this table */
		ipc_msg_init(&reply, IPC_CTL_RESULT);
		result(&reply, false, "unsupported request %s", ipc_type_name(msg->type));
		send_reply(x, &reply);
		return;
	}
	log_debug("control: %s from pid %ld uid %u", cmd->name, (long)x->peer_pid,
		  (unsigned)x->peer_uid);
	if (msg->type == IPC_CTL_STATUS && sup_refresh_status(x->sup)) {
		/* counters as of now, not as of the last poll: the reply goes
		 * once every worker answered, or after SUP_CTL_STATUS_WAIT */
		x->waiting = true;
		evtimer_del(x->idle);
		evtimer_add(x->idle, &tv);
		return;
	}
	ipc_msg_init(&reply, cmd->reply);
	cmd->run(x->sup, msg, &reply);
	send_reply(x, &reply);
}

static void
ctl_on_close(struct chan *ch, enum chan_event ev, const char *why, void *arg)
{
	struct sup_ctl *x = arg;
	struct sup *sup = x->sup;

	if (ev != CHAN_CLOSED && ev != CHAN_EOF)
		log_warn("control: client pid %ld: %s", (long)x->peer_pid, why);
	ctl_free(x);
	sup_check_done(sup);
}

static void
ctl_on_idle(evutil_socket_t fd, short what, void *arg)
{
	struct sup_ctl *x = arg;
	struct sup *sup = x->sup;

	if (x->waiting) {
		reply_status(x); /* with the answers that came */
		return;
	}
	log_warn("control: client pid %ld sent nothing for %.0f s: disconnected", (long)x->peer_pid,
		 SUP_CTL_IDLE);
	ctl_free(x);
	sup_check_done(sup);
}

static void
ctl_on_accept(evutil_socket_t lfd, short what, void *arg)
{
	struct sup *sup = arg;
	struct ucred cred;
	struct sup_ctl *x;
	struct timeval tv = {(time_t)SUP_CTL_IDLE, 0};
	char err[256];
	int fd;

	for (;;) {
		if ((fd = ctlsock_accept(lfd, &cred, err, sizeof(err))) < 0) {
			if (errno == EAGAIN)
				return;
			log_warn("control: %s", err);
			if (errno == EPERM)
				continue;
			return;
		}
		if (sup->nctls >= SUP_CTL_MAX) {
			log_warn("control: %d clients already: refused pid %ld", sup->nctls,
				 (long)cred.pid);
			close(fd);
			continue;
		}
		if ((x = calloc(1, sizeof(*x))) == NULL)
			abort();
		x->sup = sup;
		x->peer_pid = cred.pid;
		x->peer_uid = cred.uid;
		x->ch = chan_new(sup->base, fd, CHAN_CTL_SERVER, 0, 0, ctl_on_msg, ctl_on_close, x,
				 err, sizeof(err));
		if (x->ch == NULL) {
			log_warn("control: %s", err);
			close(fd);
			free(x);
			continue;
		}
		if ((x->idle = evtimer_new(sup->base, ctl_on_idle, x)) == NULL)
			abort();
		evtimer_add(x->idle, &tv);
		TAILQ_INSERT_TAIL(&sup->ctls, x, entry);
		sup->nctls++;
	}
}

int
sup_ctl_start(struct sup *sup, char *err, size_t errlen)
{
	sup->ctl_fd = ctlsock_listen(sup->ctl_path, err, errlen);
	if (sup->ctl_fd < 0)
		return -1;
	sup->ctl_ev = event_new(sup->base, sup->ctl_fd, EV_READ | EV_PERSIST, ctl_on_accept, sup);
	if (sup->ctl_ev == NULL || event_add(sup->ctl_ev, NULL) < 0) {
		snprintf(err, errlen, "control socket: cannot watch it");
		return -1;
	}
	return 0;
}

void
sup_ctl_stop(struct sup *sup)
{
	while (!TAILQ_EMPTY(&sup->ctls))
		ctl_free(TAILQ_FIRST(&sup->ctls));
	if (sup->ctl_ev != NULL) {
		event_free(sup->ctl_ev);
		sup->ctl_ev = NULL;
	}
	if (sup->ctl_fd >= 0) {
		close(sup->ctl_fd);
		sup->ctl_fd = -1;
		unlink(sup->ctl_path);
	}
}

/* A client that got its reply but has not been written to yet. */
bool
sup_ctl_replies_pending(const struct sup *sup)
{
	const struct sup_ctl *x;

	TAILQ_FOREACH(x, &sup->ctls, entry)
	if (x->replied)
		return true;
	return false;
}
