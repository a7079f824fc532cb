/*
 * The builder's worker pools: a fixed number of worker processes, a queue
 * of jobs, and a worker started again when it dies (see builder.h).
 */
#include "builder/builder.h"

#include <sys/queue.h>
#include <sys/wait.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "lib/core/chan.h"
#include "protocol/ipc.h"
#include "lib/core/log.h"

#define RESPAWN_DELAY 1.0 /* seconds before a dead worker is started again */

struct bjob {
	TAILQ_ENTRY(bjob) entry;
	int64_t id;
	char *kind;
	char *spec;
	bpool_done_cb done;
	void *arg;
};

struct bworker {
	struct bpool *pool;
	int idx;
	pid_t pid; /* 0: not running */
	struct chan *ch;
	struct bjob *job; /* running here, or NULL */
	struct event *respawn;
	double started;
};

struct bpool {
	struct event_base *base;
	char *kind, *exe;
	bool debug;
	int size;
	struct bworker *w;
	TAILQ_HEAD(, bjob) queue;
	int nqueued;
	int64_t next_id;
	struct event *kick; /* dispatch on the next loop turn */
};

static double
now_mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
job_free(struct bjob *j)
{
	if (j == NULL)
		return;
	free(j->kind);
	free(j->spec);
	free(j);
}

static void worker_start(struct bworker *w);

static void
kick(struct bpool *p)
{
	event_active(p->kick, EV_TIMEOUT, 0);
}

static void
respawn_cb(evutil_socket_t fd, short what, void *arg)
{
	worker_start(arg);
}

/* The worker is gone (channel closed): fail its job, plan a restart. */
static void
worker_lost(struct bworker *w, const char *why)
{
	struct bjob *j = w->job;
	struct timeval tv = {(time_t)RESPAWN_DELAY, 0};
	char err[512];

	chan_free(w->ch);
	w->ch = NULL;
	w->job = NULL;
	if (w->pid > 0) {
		/* make sure it is gone; bpool_reap collects it */
		kill(w->pid, SIGKILL);
		w->pid = -w->pid; /* waiting to be reaped */
	}
	log_warn("%s worker %d: %s", w->pool->kind, w->idx, why);
	evtimer_add(w->respawn, &tv);
	if (j != NULL) {
		snprintf(err, sizeof(err), "%s worker exited during the job (%s)", w->pool->kind,
			 why);
		j->done(false, NULL, err, j->arg);
		job_free(j);
	}
	kick(w->pool);
}

static void
on_msg(struct chan *ch, struct ipc_msg *m, void *arg)
{
	struct bworker *w = arg;
	struct bjob *j = w->job;
	json_t *res = NULL;

	if (m->type != IPC_JOB_DONE || j == NULL || m->u.job_done.id != j->id) {
		worker_lost(w, "answered a job it was not given");
		return;
	}
	w->job = NULL;
	if (m->u.job_done.result != NULL)
		res = json_loads(m->u.job_done.result, 0, NULL);
	if (res == NULL)
		res = json_object();
	j->done(m->u.job_done.ok, res, m->u.job_done.error, j->arg);
	json_decref(res);
	job_free(j);
	kick(w->pool);
}

static void
on_close(struct chan *ch, enum chan_event ev, const char *why, void *arg)
{
	worker_lost(arg, why);
}

static void
worker_start(struct bworker *w)
{
	struct bpool *p = w->pool;
	int fds[2];
	char err[256];
	pid_t pid;

	if (chan_socketpair(fds) != 0) {
		struct timeval tv = {1, 0};
		log_error("%s worker %d: socketpair: %s", p->kind, w->idx, strerror(errno));
		evtimer_add(w->respawn, &tv);
		return;
	}
	pid = fork();
	if (pid < 0) {
		struct timeval tv = {1, 0};
		log_error("%s worker %d: fork: %s", p->kind, w->idx, strerror(errno));
		close(fds[0]);
		close(fds[1]);
		evtimer_add(w->respawn, &tv);
		return;
	}
	if (pid == 0) {
		char *argv[] = {
		    p->exe, "--worker", p->kind, "--channel", "3", p->debug ? "-d" : NULL, NULL};
		if (chan_child_install(fds[1]) != 0)
			_exit(127);
		execv(p->exe, argv);
		_exit(127);
	}
	close(fds[1]);
	w->ch = chan_new(p->base, fds[0], CHAN_POOL_PARENT, 0, 0, on_msg, on_close, w, err,
			 sizeof(err));
	if (w->ch == NULL)
		fatalx("%s worker channel: %s", p->kind, err);
	w->pid = pid;
	w->started = now_mono();
	log_info("%s worker %d started (pid %d)", p->kind, w->idx, (int)pid);
	kick(p);
}

static void
dispatch(evutil_socket_t fd, short what, void *arg)
{
	struct bpool *p = arg;
	struct ipc_msg m;
	struct bjob *j;
	int i;

	for (i = 0; i < p->size && (j = TAILQ_FIRST(&p->queue)) != NULL; i++) {
		struct bworker *w = &p->w[i];
		if (w->pid <= 0 || w->ch == NULL || w->job != NULL)
			continue;
		TAILQ_REMOVE(&p->queue, j, entry);
		p->nqueued--;
		ipc_msg_init(&m, IPC_JOB);
		m.u.job.id = j->id;
		ipc_set_str(&m.u.job.kind, j->kind);
		ipc_set_str(&m.u.job.spec, j->spec);
		w->job = j;
		if (chan_send(w->ch, &m) != 0) {
			ipc_msg_clear(&m);
			worker_lost(w, chan_last_error(w->ch));
			return; /* worker_lost kicked again */
		}
		ipc_msg_clear(&m);
		log_debug("%s worker %d: job %lld (%s)", p->kind, i, (long long)j->id, j->kind);
	}
}

struct bpool *
bpool_new(struct event_base *base, const char *kind, int size, const char *exe, bool debug)
{
	struct bpool *p = calloc(1, sizeof(*p));
	int i;

	if (p == NULL || size < 1)
		abort();
	p->base = base;
	p->kind = strdup(kind);
	p->exe = strdup(exe);
	p->debug = debug;
	p->size = size;
	p->next_id = 1;
	TAILQ_INIT(&p->queue);
	p->kick = event_new(base, -1, 0, dispatch, p);
	p->w = calloc((size_t)size, sizeof(*p->w));
	if (p->w == NULL || p->kick == NULL)
		abort();
	for (i = 0; i < size; i++) {
		p->w[i].pool = p;
		p->w[i].idx = i;
		p->w[i].respawn = evtimer_new(base, respawn_cb, &p->w[i]);
		worker_start(&p->w[i]);
	}
	return p;
}

void
bpool_reap(struct bpool *p, pid_t pid, int status)
{
	int i;

	for (i = 0; i < p->size; i++) {
		struct bworker *w = &p->w[i];
		if (w->pid == pid || w->pid == -pid) {
			if (WIFSIGNALED(status))
				log_warn("%s worker %d (pid %d) killed by signal %d", p->kind, i,
					 (int)pid, WTERMSIG(status));
			else if (w->pid > 0)
				log_warn("%s worker %d (pid %d) exited with %d", p->kind, i,
					 (int)pid, WEXITSTATUS(status));
			if (w->pid > 0)
				w->pid = -w->pid; /* the channel's close does the rest */
			if (w->ch == NULL)
				w->pid = 0;
		}
	}
}

void
bpool_free(struct bpool *p, double grace)
{
	struct bjob *j;
	double until = now_mono() + grace;
	int i, left;

	if (p == NULL)
		return;
	for (i = 0; i < p->size; i++) {
		struct bworker *w = &p->w[i];
		chan_free(w->ch); /* the worker sees EOF and exits */
		w->ch = NULL;
		if (w->pid != 0)
			kill(w->pid > 0 ? w->pid : -w->pid, SIGTERM);
	}
	do {
		left = 0;
		for (i = 0; i < p->size; i++) {
			struct bworker *w = &p->w[i];
			pid_t pid = w->pid > 0 ? w->pid : -w->pid;
			if (pid == 0)
				continue;
			if (waitpid(pid, NULL, WNOHANG) != 0)
				w->pid = 0;
			else
				left++;
		}
		if (left > 0)
			usleep(20000);
	} while (left > 0 && now_mono() < until);
	for (i = 0; i < p->size; i++) {
		struct bworker *w = &p->w[i];
		pid_t pid = w->pid > 0 ? w->pid : -w->pid;
		if (pid != 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		}
		job_free(w->job);
		event_free(w->respawn);
	}
	while ((j = TAILQ_FIRST(&p->queue)) != NULL) {
		TAILQ_REMOVE(&p->queue, j, entry);
		job_free(j);
	}
	event_free(p->kick);
	free(p->w);
	free(p->kind);
	free(p->exe);
	free(p);
}

int64_t
bpool_submit(struct bpool *p, const char *kind, const json_t *spec, bpool_done_cb done, void *arg)
{
	struct bjob *j = calloc(1, sizeof(*j));

	if (j == NULL)
		abort();
	j->id = p->next_id++;
	j->kind = strdup(kind);
	j->spec = json_dumps(spec, JSON_COMPACT);
	j->done = done;
	j->arg = arg;
	if (j->kind == NULL || j->spec == NULL)
		abort();
	TAILQ_INSERT_TAIL(&p->queue, j, entry);
	p->nqueued++;
	kick(p);
	return j->id;
}

int
bpool_busy(const struct bpool *p)
{
	int i, n = p->nqueued;

	for (i = 0; i < p->size; i++)
		if (p->w[i].job != NULL)
			n++;
	return n;
}

int
bpool_free_slots(const struct bpool *p)
{
	return p->size - bpool_busy(p);
}

void
bpool_dump(const struct bpool *p, struct evbuffer *out)
{
	int i;

	evbuffer_add_printf(out, "%s workers: %d, queued jobs: %d\n", p->kind, p->size, p->nqueued);
	for (i = 0; i < p->size; i++) {
		const struct bworker *w = &p->w[i];
		evbuffer_add_printf(out, "  %s worker %d: pid %d, %s", p->kind, i,
				    (int)(w->pid > 0 ? w->pid : 0),
				    w->ch == NULL ? "restarting"
				    : w->job	  ? "busy"
						  : "idle");
		if (w->job != NULL)
			evbuffer_add_printf(out, " (job %lld %s)", (long long)w->job->id,
					    w->job->kind);
		evbuffer_add_printf(out, "\n");
	}
}
