/*
 * A build worker: runs dib-cmd for one build at a time, as upstream's
 * BuildWorker._buildImage: the command's stdout and stderr go to the build
 * log, followed by "Exit code: N"; after build-timeout seconds the
 * command's process group is killed and the build fails. The builder
 * composed argv and the environment (build_sched.c); this process only runs
 * them, so a crash here costs one build.
 */
#include "builder/builder.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "lib/core/chan.h"
#include "protocol/ipc.h"
#include "lib/core/log.h"

struct dib {
	struct event_base *base;
	struct chan *ch;
	int64_t job;
	pid_t pid; /* the running command, 0 if none */
	int logfd;
	double start;
	int timed_out;
	struct event *timeout_ev, *sigchld_ev;
};

static double
now_mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
reply(struct dib *d, int64_t id, bool ok, json_t *result, const char *error)
{
	struct ipc_msg m;

	ipc_msg_init(&m, IPC_JOB_DONE);
	m.u.job_done.id = id;
	m.u.job_done.ok = ok;
	if (result != NULL)
		m.u.job_done.result = json_dumps(result, JSON_COMPACT);
	ipc_set_str(&m.u.job_done.error, error);
	if (chan_send(d->ch, &m) != 0)
		log_warn("build worker: %s", chan_last_error(d->ch));
	ipc_msg_clear(&m);
	json_decref(result);
}

static void
on_sigchld(evutil_socket_t fd, short what, void *arg)
{
	struct dib *d = arg;
	int status, rc;
	pid_t pid;
	char line[64];

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (pid != d->pid)
			continue;
		rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		if (d->timed_out)
			rc = 1;
		else {
			int n = snprintf(line, sizeof(line), "Exit code: %d\n", rc);
			if (write(d->logfd, line, (size_t)n) < 0)
				log_warn("build log: %s", strerror(errno));
		}
		close(d->logfd);
		d->logfd = -1;
		d->pid = 0;
		evtimer_del(d->timeout_ev);
		reply(d, d->job, true,
		      json_pack("{s:i, s:f, s:b}", "rc", rc, "duration", now_mono() - d->start,
				"timed_out", d->timed_out),
		      NULL);
	}
}

static void
on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct dib *d = arg;

	if (d->pid <= 0)
		return;
	log_error("build timeout: killing the dib-cmd (pid %d)", (int)d->pid);
	d->timed_out = 1;
	kill(-d->pid, SIGKILL);
	kill(d->pid, SIGKILL);
}

static void
run_build(struct dib *d, int64_t id, const json_t *spec)
{
	const json_t *argv_j = json_object_get(spec, "argv"), *env = json_object_get(spec, "env"),
		     *v;
	const char *logpath = json_string_value(json_object_get(spec, "log")), *k;
	double timeout = json_number_value(json_object_get(spec, "timeout"));
	size_t i, n = json_array_size(argv_j);
	char **argv;
	char err[512];

	if (d->pid != 0) {
		reply(d, id, false, NULL, "a build is already running in this worker");
		return;
	}
	if (n == 0 || logpath == NULL) {
		reply(d, id, false, NULL, "bad build job: argv and log are required");
		return;
	}
	d->logfd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (d->logfd < 0) {
		snprintf(err, sizeof(err), "cannot open the build log %s: %s", logpath,
			 strerror(errno));
		reply(d, id, false, NULL, err);
		return;
	}
	argv = calloc(n + 1, sizeof(*argv));
	if (argv == NULL)
		abort();
	for (i = 0; i < n; i++)
		argv[i] = (char *)json_string_value(json_array_get(argv_j, i));
	d->job = id;
	d->timed_out = 0;
	d->start = now_mono();
	d->pid = fork();
	if (d->pid == 0) {
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(d->logfd, 1);
		dup2(d->logfd, 2);
		json_object_foreach((json_t *)env, k, v) setenv(k, json_string_value(v), 1);
		execvp(argv[0], argv);
		dprintf(2, "Failed to exec '%s'. Error: '%s'\n", argv[0], strerror(errno));
		_exit(127);
	}
	free(argv);
	if (d->pid < 0) {
		snprintf(err, sizeof(err), "fork: %s", strerror(errno));
		d->pid = 0;
		close(d->logfd);
		d->logfd = -1;
		reply(d, id, false, NULL, err);
		return;
	}
	setpgid(d->pid, d->pid);
	if (timeout > 0) {
		struct timeval tv = {(time_t)timeout,
				     (suseconds_t)((timeout - (double)(time_t)timeout) * 1e6)};
		evtimer_add(d->timeout_ev, &tv);
	}
}

static void
on_msg(struct chan *ch, struct ipc_msg *m, void *arg)
{
	struct dib *d = arg;
	json_t *spec;

	if (m->type != IPC_JOB)
		return;
	spec = json_loads(m->u.job.spec, 0, NULL);
	if (strcmp(m->u.job.kind, "build") != 0 || !json_is_object(spec))
		reply(d, m->u.job.id, false, NULL, "a build worker runs build jobs only");
	else
		run_build(d, m->u.job.id, spec);
	json_decref(spec);
}

static void
on_close(struct chan *ch, enum chan_event ev, const char *why, void *arg)
{
	struct dib *d = arg;

	/* the builder is gone: so is the build */
	if (d->pid > 0) {
		kill(-d->pid, SIGKILL);
		kill(d->pid, SIGKILL);
	}
	event_base_loopbreak(d->base);
}

int
dib_worker_main(struct event_base *base)
{
	struct dib d;
	char err[256];

	memset(&d, 0, sizeof(d));
	d.base = base;
	d.logfd = -1;
	d.timeout_ev = evtimer_new(base, on_timeout, &d);
	d.sigchld_ev = evsignal_new(base, SIGCHLD, on_sigchld, &d);
	event_add(d.sigchld_ev, NULL);
	d.ch = chan_new(base, CHAN_CHILD_FD, CHAN_POOL_CHILD, 0, 0, on_msg, on_close, &d, err,
			sizeof(err));
	if (d.ch == NULL) {
		log_error("build worker: %s", err);
		return 1;
	}
	event_base_dispatch(base);
	chan_free(d.ch);
	event_free(d.timeout_ev);
	event_free(d.sigchld_ev);
	return 0;
}
