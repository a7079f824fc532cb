/*
 * lib/chan and lib/ctlsock with real processes: a forked child plays a
 * worker on fd 3 (its own libevent loop, made after the fork) or nodepoold's
 * control server; the test process plays the other end.
 *
 * Exit codes of the fake worker (test-only): 0 closed after STOP, 10 saw
 * EOF from the supervisor, 20 protocol error, 30 I/O error, 40 set-up failed.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include "lib/core/chan.h"
#include "lib/ops/ctlsock.h"
#include "tests/support/ipc_samples.h"

#define NOBODY 65534

/* ---- the test process's end ------------------------------------------------ */

struct end {
	struct event_base *base;
	struct chan *ch;
	struct ipc_msg last; /* the last message received, moved out of the channel */
	int nmsgs;
	int nstatus;
	bool closed;
	enum chan_event ev;
	char why[256];
};

static void
end_on_msg(struct chan *ch, struct ipc_msg *m, void *arg)
{
	struct end *e = arg;

	e->nmsgs++;
	if (m->type == IPC_STATUS)
		e->nstatus++;
	ipc_msg_clear(&e->last);
	e->last = *m;
	ipc_msg_init(m, IPC_NONE); /* moved: the channel must not free it */
}

static void
end_on_close(struct chan *ch, enum chan_event ev, const char *why, void *arg)
{
	struct end *e = arg;

	e->closed = true;
	e->ev = ev;
	snprintf(e->why, sizeof(e->why), "%s", why);
}

static void
end_open_max(struct end *e, int fd, enum chan_role role, size_t max_frame, size_t out_cap)
{
	char err[256];

	memset(e, 0, sizeof(*e));
	e->base = event_base_new();
	cr_assert_not_null(e->base);
	e->ch = chan_new(e->base, fd, role, max_frame, out_cap, end_on_msg, end_on_close, e, err,
			 sizeof(err));
	cr_assert_not_null(e->ch, "%s", err);
}

static void
end_open(struct end *e, int fd, enum chan_role role, size_t out_cap)
{
	end_open_max(e, fd, role, 0, out_cap);
}

static void
end_close(struct end *e)
{
	chan_free(e->ch);
	e->ch = NULL;
	ipc_msg_clear(&e->last);
	event_base_free(e->base);
}

/* Run the loop until a message of type t arrives (IPC_NONE: until closed). */
static void
run_until(struct end *e, enum ipc_type t)
{
	while (!e->closed && (t == IPC_NONE || e->last.type != t))
		cr_assert_geq(event_base_loop(e->base, EVLOOP_ONCE), 0);
	if (t != IPC_NONE)
		cr_assert_eq(e->last.type, t, "channel closed waiting for %s: %s", ipc_type_name(t),
			     e->why);
}

static int
wait_exit(pid_t pid)
{
	int st;

	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st), "child died by signal %d", WTERMSIG(st));
	return WEXITSTATUS(st);
}

/* ---- the fake worker (a forked child) ----------------------------------------- */

enum worker_mode {
	W_NORMAL,     /* READY, then answer until STOP or EOF */
	W_EXIT_READY, /* READY, then exit */
	W_GARBAGE,    /* a well-framed body that is not a message */
	W_WRONG_DIR,  /* a control request, which a worker may not send */
	W_OVERSIZE,   /* a header announcing 2 MiB */
	W_HALF_FRAME  /* half a frame, then exit */
};

struct worker {
	struct event_base *base;
	struct chan *ch;
	int requests;
	int code;
};

static void
w_send(struct worker *w, struct ipc_msg *m)
{
	if (chan_send(w->ch, m) < 0)
		_exit(40);
	ipc_msg_clear(m);
}

static void
w_on_msg(struct chan *ch, struct ipc_msg *m, void *arg)
{
	struct worker *w = arg;
	struct ipc_msg r;
	char text[64];

	switch (m->type) {
	case IPC_STATUS_REQ:
		w->requests++;
		ipc_msg_init(&r, IPC_STATUS);
		r.u.status.seq = m->u.status_req.seq;
		r.u.status.state = IPC_WS_RUNNING;
		r.u.status.zk_state = IPC_ZK_CONNECTED;
		r.u.status.accepted = w->requests;
		ipc_counts_add(&r.u.status.nodes, "ready", m->u.status_req.seq);
		ipc_pools_add(&r.u.status.pools, "main")->requests = 1;
		w_send(w, &r);
		break;
	case IPC_DUMP_REQ:
		ipc_msg_init(&r, IPC_DUMP_REPLY);
		snprintf(text, sizeof(text), "requests=%d pid=%ld", w->requests, (long)getpid());
		ipc_set_str(&r.u.dump_reply.text, text);
		w_send(w, &r);
		break;
	case IPC_CONFIG:
		ipc_msg_init(&r, IPC_CONFIG_ACK);
		r.u.config_ack.generation = m->u.config.generation;
		r.u.config_ack.ok = strcmp(m->u.config.config, "{}") == 0;
		if (!r.u.config_ack.ok)
			ipc_strv_push(&r.u.config_ack.errors, "not {}");
		w_send(w, &r);
		break;
	case IPC_STOP:
		/* Last words: how many requests were seen, then close. */
		ipc_msg_init(&r, IPC_STATUS);
		r.u.status.seq = w->requests;
		r.u.status.state = IPC_WS_STOPPING;
		w_send(w, &r);
		chan_close_after_flush(ch);
		break;
	default:
		_exit(41);
	}
}

static void
w_on_close(struct chan *ch, enum chan_event ev, const char *why, void *arg)
{
	struct worker *w = arg;

	w->code = ev == CHAN_CLOSED ? 0 : ev == CHAN_EOF ? 10 : ev == CHAN_PROTO_ERROR ? 20 : 30;
	event_base_loopbreak(w->base);
}

static void
raw_write(int fd, const void *p, size_t n)
{
	if (write(fd, p, n) != (ssize_t)n)
		_exit(40);
}

/* The child: fd is its end of the pair; never returns. */
static void __attribute__((noreturn)) worker_main(int fd, enum worker_mode mode)
{
	struct worker w = {0};
	struct ipc_msg m;
	char err[256], buf[64];
	unsigned char *f;
	size_t flen;
	int cfd;

	alarm(60); /* a safety net should the test process die */
	if (chan_child_install(fd) < 0 || (cfd = chan_child_fd(err, sizeof(err))) != CHAN_CHILD_FD)
		_exit(40);
	switch (mode) {
	case W_GARBAGE:
		raw_write(cfd, "\x00\x00\x00\x04\x93\x01\x02\x03", 8);
		break;
	case W_WRONG_DIR:
		ipc_msg_init(&m, IPC_CTL_STOP);
		if (ipc_frame_encode(&m, 0, &f, &flen, err, sizeof(err)) < 0)
			_exit(40);
		raw_write(cfd, f, flen);
		free(f);
		break;
	case W_OVERSIZE:
		raw_write(cfd, "\x00\x20\x00\x00", 4);
		break;
	case W_HALF_FRAME:
		ipc_sample(IPC_STATUS, 0, &m);
		if (ipc_frame_encode(&m, 0, &f, &flen, err, sizeof(err)) < 0)
			_exit(40);
		raw_write(cfd, f, flen / 2);
		_exit(0);
	default:
		break;
	}
	if (mode == W_GARBAGE || mode == W_WRONG_DIR || mode == W_OVERSIZE) {
		/* Stay until the supervisor hangs up. */
		while (read(cfd, buf, sizeof(buf)) > 0)
			;
		_exit(10);
	}
	w.base = event_base_new();
	w.ch = chan_new(w.base, cfd, CHAN_CHILD, 0, 0, w_on_msg, w_on_close, &w, err, sizeof(err));
	if (w.base == NULL || w.ch == NULL)
		_exit(40);
	ipc_msg_init(&m, IPC_READY);
	ipc_set_str(&m.u.ready.provider, "rax-dfw");
	m.u.ready.pid = getpid();
	m.u.ready.zk_session = 0x100000abcdefLL;
	ipc_set_str(&m.u.ready.version, "test");
	w_send(&w, &m);
	if (mode == W_EXIT_READY)
		chan_close_after_flush(w.ch);
	event_base_dispatch(w.base);
	_exit(w.code);
}

/* Fork a fake worker; *sup gets the supervisor's end. */
static pid_t
spawn_worker(enum worker_mode mode, int *sup)
{
	int sv[2];
	pid_t pid;

	cr_assert_eq(chan_socketpair(sv), 0);
	cr_assert(fcntl(sv[0], F_GETFD) & FD_CLOEXEC, "close-on-exec until installed");
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		close(sv[0]);
		worker_main(sv[1], mode);
	}
	close(sv[1]);
	*sup = sv[0];
	return pid;
}

/* ---- supervisor <-> worker ------------------------------------------------------ */

Test(chan, worker_answers_status_requests)
{
	struct end e;
	struct ipc_msg m;
	int fd;
	pid_t pid = spawn_worker(W_NORMAL, &fd);

	end_open(&e, fd, CHAN_SUPERVISOR, 0);
	run_until(&e, IPC_READY);
	cr_assert_str_eq(e.last.u.ready.provider, "rax-dfw");
	cr_assert_eq(e.last.u.ready.pid, pid, "READY carries the child's pid");
	cr_assert_eq(e.last.u.ready.zk_session, 0x100000abcdefLL);

	for (int seq = 1; seq <= 5; seq++) {
		ipc_msg_init(&m, IPC_STATUS_REQ);
		m.u.status_req.seq = seq;
		cr_assert_eq(chan_send(e.ch, &m), 0, "%s", chan_last_error(e.ch));
		run_until(&e, IPC_STATUS);
		cr_assert_eq(e.last.u.status.seq, seq, "STATUS echoes the request's seq");
		cr_assert_eq(e.last.u.status.accepted, seq);
		cr_assert_eq(e.last.u.status.zk_state, IPC_ZK_CONNECTED);
		cr_assert_eq(e.last.u.status.nodes.n, 1);
		cr_assert_str_eq(e.last.u.status.nodes.v[0].name, "ready");
		cr_assert_eq(e.last.u.status.nodes.v[0].n, seq);
		cr_assert_str_eq(e.last.u.status.pools.v[0].name, "main");
		ipc_msg_clear(&e.last);
	}

	ipc_msg_init(&m, IPC_CONFIG);
	m.u.config.generation = 2;
	ipc_set_str(&m.u.config.provider, "rax-dfw");
	ipc_set_str(&m.u.config.config, "{}");
	cr_assert_eq(chan_send(e.ch, &m), 0);
	ipc_msg_clear(&m);
	run_until(&e, IPC_CONFIG_ACK);
	cr_assert(e.last.u.config_ack.ok);
	cr_assert_eq(e.last.u.config_ack.generation, 2);

	ipc_msg_init(&m, IPC_DUMP_REQ);
	cr_assert_eq(chan_send(e.ch, &m), 0);
	run_until(&e, IPC_DUMP_REPLY);
	cr_assert(strncmp(e.last.u.dump_reply.text, "requests=5 ", 11) == 0, "%s",
		  e.last.u.dump_reply.text);

	ipc_msg_init(&m, IPC_STOP);
	m.u.stop.graceful = true;
	cr_assert_eq(chan_send(e.ch, &m), 0);
	ipc_msg_clear(&e.last);
	run_until(&e, IPC_STATUS);
	cr_assert_eq(e.last.u.status.state, IPC_WS_STOPPING);
	run_until(&e, IPC_NONE);
	cr_assert_eq(e.ev, CHAN_EOF, "%s", e.why);
	cr_assert_str_eq(e.why, "a worker closed the connection");
	cr_assert_eq(wait_exit(pid), 0, "the worker closed after STOP");
	end_close(&e);
}

Test(chan, eof_when_the_worker_exits)
{
	struct end e;
	int fd;
	pid_t pid = spawn_worker(W_EXIT_READY, &fd);

	end_open(&e, fd, CHAN_SUPERVISOR, 0);
	run_until(&e, IPC_READY);
	run_until(&e, IPC_NONE);
	cr_assert_eq(e.ev, CHAN_EOF);
	cr_assert_eq(wait_exit(pid), 0);
	/* A dead channel refuses to send. */
	{
		struct ipc_msg m;

		ipc_msg_init(&m, IPC_STATUS_REQ);
		errno = 0;
		cr_assert_eq(chan_send(e.ch, &m), -1);
		cr_assert_eq(errno, EPIPE);
	}
	end_close(&e);
}

Test(chan, eof_in_the_middle_of_a_frame)
{
	struct end e;
	int fd;
	pid_t pid = spawn_worker(W_HALF_FRAME, &fd);

	end_open(&e, fd, CHAN_SUPERVISOR, 0);
	run_until(&e, IPC_NONE);
	cr_assert_eq(e.ev, CHAN_EOF);
	cr_assert_str_eq(e.why, "a worker closed the connection in the middle of a frame");
	cr_assert_eq(e.nmsgs, 0);
	cr_assert_eq(wait_exit(pid), 0);
	end_close(&e);
}

Test(chan, worker_exits_when_the_supervisor_closes)
{
	struct end e;
	int fd;
	pid_t pid = spawn_worker(W_NORMAL, &fd);

	end_open(&e, fd, CHAN_SUPERVISOR, 0);
	run_until(&e, IPC_READY);
	chan_free(e.ch); /* the supervisor goes away */
	e.ch = NULL;
	cr_assert_eq(wait_exit(pid), 10, "the worker saw EOF and exited");
	end_close(&e);
}

/* A bad message from an internal peer is reported; the owner decides. */
static void
expect_proto_error(enum worker_mode mode, const char *why)
{
	struct end e;
	struct ipc_msg m;
	int fd;
	pid_t pid = spawn_worker(mode, &fd);

	end_open(&e, fd, CHAN_SUPERVISOR, 0);
	run_until(&e, IPC_NONE);
	cr_assert_eq(e.ev, CHAN_PROTO_ERROR, "%s", e.why);
	cr_assert_str_eq(e.why, why);
	cr_assert_str_eq(chan_last_error(e.ch), why);
	cr_assert_eq(e.nmsgs, 0);
	cr_assert_geq(chan_fd(e.ch), 0, "an internal peer's fd stays until chan_free");
	ipc_msg_init(&m, IPC_STATUS_REQ);
	cr_assert_eq(chan_send(e.ch, &m), -1);
	cr_assert_eq(errno, EPIPE);
	end_close(&e);
	cr_assert_eq(wait_exit(pid), 10);
}

Test(chan, malformed_message_from_a_worker)
{
	expect_proto_error(W_GARBAGE,
			   "bad message from a worker: message is a msgpack array, not a map");
}

Test(chan, message_in_the_wrong_direction)
{
	expect_proto_error(W_WRONG_DIR, "CTL_STOP may not be sent by a worker");
}

Test(chan, oversize_frame_from_a_worker)
{
	expect_proto_error(
	    W_OVERSIZE,
	    "bad frame from a worker: frame of 2097152 bytes exceeds the 1048576-byte limit");
}

Test(chan, output_queue_is_capped)
{
	struct end e;
	struct ipc_msg m;
	size_t cap = 64 * 1024, before;
	int fd, accepted = 0;
	pid_t pid = spawn_worker(W_NORMAL, &fd);

	/* The cap must hold one maximum frame: a small one here. */
	end_open_max(&e, fd, CHAN_SUPERVISOR, 16 * 1024, cap);
	run_until(&e, IPC_READY);
	/* The loop does not run, so nothing is written: the queue must fill. */
	for (;;) {
		ipc_msg_init(&m, IPC_STATUS_REQ);
		m.u.status_req.seq = accepted + 1;
		before = chan_pending(e.ch);
		if (chan_send(e.ch, &m) < 0)
			break;
		accepted++;
		cr_assert_leq(chan_pending(e.ch), cap);
	}
	cr_assert_eq(errno, ENOBUFS);
	cr_assert_eq(chan_pending(e.ch), before, "a refused message is not queued");
	cr_assert_gt(accepted, 1000);
	cr_assert(strstr(chan_last_error(e.ch), "output queue to a worker full") != NULL, "%s",
		  chan_last_error(e.ch));
	/* Let it drain, then ask how many arrived. */
	while (chan_pending(e.ch) > 0 && !e.closed)
		event_base_loop(e.base, EVLOOP_ONCE);
	ipc_msg_init(&m, IPC_STOP);
	cr_assert_eq(chan_send(e.ch, &m), 0);
	while (!e.closed &&
	       !(e.last.type == IPC_STATUS && e.last.u.status.state == IPC_WS_STOPPING))
		event_base_loop(e.base, EVLOOP_ONCE);
	cr_assert_eq(e.last.u.status.seq, accepted, "the worker got every queued request");
	cr_assert_eq(e.nstatus, accepted + 1, "and answered each");
	run_until(&e, IPC_NONE);
	end_close(&e);
	cr_assert_eq(wait_exit(pid), 0);
}

Test(chan, send_checks_direction_and_size)
{
	struct end e;
	struct ipc_msg m;
	int sv[2];

	cr_assert_eq(chan_socketpair(sv), 0);
	end_open(&e, sv[0], CHAN_SUPERVISOR, 0);
	ipc_sample(IPC_STATUS, 0, &m);
	cr_assert_eq(chan_send(e.ch, &m), -1, "the supervisor does not send STATUS");
	cr_assert_eq(errno, EINVAL);
	cr_assert_str_eq(chan_last_error(e.ch), "STATUS may not be sent to a worker");
	ipc_msg_clear(&m);

	ipc_msg_init(&m, IPC_CONFIG);
	ipc_set_str(&m.u.config.provider, "p");
	cr_assert_eq(chan_send(e.ch, &m), -1, "NULL config does not encode");
	cr_assert_eq(errno, EINVAL);
	cr_assert_str_eq(chan_last_error(e.ch), "CONFIG: key \"config\": required string is NULL");
	m.u.config.config = calloc(1, 1100 * 1024);
	memset(m.u.config.config, 'x', 1100 * 1024 - 1);
	cr_assert_eq(chan_send(e.ch, &m), -1);
	cr_assert_eq(errno, EMSGSIZE);
	cr_assert_eq(chan_pending(e.ch), 0);
	ipc_msg_clear(&m);
	cr_assert_eq(chan_role(e.ch), CHAN_SUPERVISOR);
	end_close(&e);
	close(sv[1]);
}

/* In a forked child: fd 3 of the test process belongs to criterion. */
static int
child_fd_checks(void)
{
	char err[256];
	int sv[2], devnull;

	/* Not a socket on fd 3: refused with a clear message. */
	devnull = open("/dev/null", O_RDONLY);
	if (dup2(devnull, CHAN_CHILD_FD) != CHAN_CHILD_FD)
		return 1;
	close(devnull);
	if (chan_child_fd(err, sizeof(err)) != -1 ||
	    strcmp(err,
		   "fd 3 is not a channel to nodepoold (this program is started by nodepoold)") !=
		0)
		return 2;
	/* A socketpair end installed there: accepted, and close-on-exec again
	 * so programs the worker runs do not inherit it. */
	if (chan_socketpair(sv) < 0 || chan_child_install(sv[1]) < 0)
		return 3;
	if (fcntl(CHAN_CHILD_FD, F_GETFD) & FD_CLOEXEC)
		return 4; /* must survive exec */
	if (chan_child_fd(err, sizeof(err)) != CHAN_CHILD_FD)
		return 5;
	if (!(fcntl(CHAN_CHILD_FD, F_GETFD) & FD_CLOEXEC))
		return 6;
	/* An end already on fd 3 stays there and loses close-on-exec. */
	if (chan_child_install(CHAN_CHILD_FD) < 0 || (fcntl(CHAN_CHILD_FD, F_GETFD) & FD_CLOEXEC))
		return 7;
	return 0;
}

Test(chan, child_fd_is_checked)
{
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(child_fd_checks());
	int code = wait_exit(pid);

	cr_assert_eq(code, 0, "check %d of child_fd_checks failed", code);
}

/* ---- control socket --------------------------------------------------------------- */

/* A fresh directory under NP_TEST_TMP (or /tmp if public: other users must
 * be able to reach it). */
static char *
tmpdir_in(bool public)
{
	const char *base = public ? NULL : getenv("NP_TEST_TMP");
	char tmpl[256];

	snprintf(tmpl, sizeof(tmpl), "%s/ctl-XXXXXX", base != NULL ? base : "/tmp");
	cr_assert_not_null(mkdtemp(tmpl), "mkdtemp %s: %s", tmpl, strerror(errno));
	return strdup(tmpl);
}

static char *
tmpdir(void)
{
	return tmpdir_in(false);
}

static void
rm_rf(const char *dir)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

Test(ctlsock, socket_is_0600_in_new_0700_dirs)
{
	char *dir = tmpdir(), path[300], file[300], err[256];
	struct stat st;
	int fd, fd2;

	snprintf(path, sizeof(path), "%s/run/nodepool/ctl.sock", dir);
	fd = ctlsock_listen(path, err, sizeof(err));
	cr_assert_geq(fd, 0, "%s", err);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert(S_ISSOCK(st.st_mode));
	cr_assert_eq(st.st_mode & 07777, 0600, "mode %o", st.st_mode & 07777);
	cr_assert_eq(st.st_uid, geteuid());
	snprintf(file, sizeof(file), "%s/run/nodepool", dir);
	cr_assert_eq(stat(file, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0700, "created directories are private");
	cr_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);

	/* A second daemon on the same socket is refused... */
	cr_assert_eq(ctlsock_listen(path, err, sizeof(err)), -1);
	cr_assert(strstr(err, "nodepoold is already running") != NULL, "%s", err);
	/* ...a stale socket (the daemon died) is replaced. */
	close(fd);
	fd2 = ctlsock_listen(path, err, sizeof(err));
	cr_assert_geq(fd2, 0, "%s", err);
	close(fd2);
	/* A file that is not a socket is never removed. */
	snprintf(file, sizeof(file), "%s/not-a-socket", dir);
	close(open(file, O_CREAT | O_WRONLY, 0600));
	cr_assert_eq(ctlsock_listen(file, err, sizeof(err)), -1);
	cr_assert(strstr(err, "exists and is not a socket") != NULL, "%s", err);
	cr_assert_eq(stat(file, &st), 0);
	rm_rf(dir);
	free(dir);
}

/* The socket's directory must be ours (issue 23): not another user's, not
 * writable by others unless sticky. */
Test(ctlsock, parent_directory_must_be_ours)
{
	char *dir = tmpdir(), sub[300], path[400], err[300], want[400];
	int fd;

	snprintf(sub, sizeof(sub), "%s/shared", dir);
	cr_assert_eq(mkdir(sub, 0700), 0);
	cr_assert_eq(chmod(sub, 0777), 0);
	snprintf(path, sizeof(path), "%s/ctl.sock", sub);
	cr_assert_eq(ctlsock_listen(path, err, sizeof(err)), -1);
	snprintf(want, sizeof(want),
		 "control socket directory %s is writable by others (mode 777): not used", sub);
	cr_assert_str_eq(err, want);
	/* sticky, as /tmp: nobody else can remove or rename the socket */
	cr_assert_eq(chmod(sub, 01777), 0);
	fd = ctlsock_listen(path, err, sizeof(err));
	cr_assert_geq(fd, 0, "%s", err);
	close(fd);
	unlink(path);
	if (geteuid() == 0) {
		cr_assert_eq(chmod(sub, 0755), 0);
		cr_assert_eq(chown(sub, 65534, 65534), 0);
		cr_assert_eq(ctlsock_listen(path, err, sizeof(err)), -1);
		snprintf(want, sizeof(want),
			 "control socket directory %s is owned by uid 65534, not root or uid 0: "
			 "not used",
			 sub);
		cr_assert_str_eq(err, want);
		cr_assert_neq(access(path, F_OK), 0, "nothing was created there");
	}
	rm_rf(dir);
	free(dir);
}

Test(ctlsock, client_errors_are_clear)
{
	char *dir = tmpdir(), path[300], err[256], want[400], longp[200];
	struct ipc_msg req, rep;
	int fd;

	snprintf(path, sizeof(path), "%s/ctl.sock", dir);
	ipc_msg_init(&req, IPC_CTL_STATUS);
	cr_assert_eq(ctlsock_request(path, &req, &rep, 0, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "nodepoold is not running (no control socket at %s)", path);
	cr_assert_str_eq(err, want);

	/* Listening but never accepting: the daemon is hung. */
	fd = ctlsock_listen(path, err, sizeof(err));
	cr_assert_geq(fd, 0, "%s", err);
	cr_assert_eq(ctlsock_request(path, &req, &rep, 200, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "nodepoold is not answering on %s (no reply within 0.200 s)",
		 path);
	cr_assert_str_eq(err, want);

	/* The daemon died and left its socket. */
	close(fd);
	cr_assert_eq(ctlsock_connect(path, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "nodepoold is not running (stale control socket at %s)", path);
	cr_assert_str_eq(err, want);

	memset(longp, 'x', sizeof(longp) - 1);
	longp[0] = '/';
	longp[sizeof(longp) - 1] = '\0';
	cr_assert_eq(ctlsock_connect(longp, err, sizeof(err)), -1);
	cr_assert(strncmp(err, "control socket path too long (max 107 bytes): /xxx",
			  strlen("control socket path too long (max 107 bytes): /xxx")) == 0,
		  "%s", err);

	ipc_msg_init(&req, IPC_STATUS_REQ);
	cr_assert_eq(ctlsock_request(path, &req, &rep, 0, err, sizeof(err)), -1);
	cr_assert_str_eq(err, "STATUS_REQ is not a control request");
	rm_rf(dir);
	free(dir);
}

/* ---- a control server in a child, as nodepoold runs it ---------------------------- */

struct server {
	struct event_base *base;
	int lfd;
	int served;
	bool stop;
};

static void
srv_on_msg(struct chan *ch, struct ipc_msg *m, void *arg)
{
	struct server *s = arg;
	struct ipc_msg r;
	char text[128];

	s->served++;
	switch (m->type) {
	case IPC_CTL_STATUS:
		ipc_sample(IPC_CTL_STATUS_REPLY, 0, &r);
		break;
	case IPC_CTL_RESTART:
		ipc_msg_init(&r, IPC_CTL_RESULT);
		r.u.ctl_result.ok = true;
		snprintf(text, sizeof(text), "restarting %s", m->u.ctl_restart.provider);
		ipc_set_str(&r.u.ctl_result.message, text);
		break;
	case IPC_CTL_RELOAD:
		ipc_sample(IPC_CTL_RESULT, 0, &r);
		break;
	case IPC_CTL_STOP:
		ipc_msg_init(&r, IPC_CTL_RESULT);
		r.u.ctl_result.ok = true;
		ipc_set_str(&r.u.ctl_result.message, "stopping");
		s->stop = true;
		break;
	default:
		_exit(41);
	}
	if (chan_send(ch, &r) < 0)
		_exit(42);
	ipc_msg_clear(&r);
	chan_close_after_flush(ch);
}

static void
srv_on_close(struct chan *ch, enum chan_event ev, const char *why, void *arg)
{
	struct server *s = arg;

	/* A bad client is already disconnected; a served one closed after its
	 * reply. Either way the server carries on, until CTL_STOP. */
	chan_free(ch);
	if (s->stop)
		event_base_loopbreak(s->base);
}

static void
srv_on_accept(evutil_socket_t lfd, short what, void *arg)
{
	struct server *s = arg;
	char err[256];
	int fd;

	if ((fd = ctlsock_accept(lfd, NULL, err, sizeof(err))) < 0)
		return;
	if (chan_new(s->base, fd, CHAN_CTL_SERVER, 64 * 1024, 0, srv_on_msg, srv_on_close, s, err,
		     sizeof(err)) == NULL)
		_exit(43);
}

static pid_t
spawn_server(int lfd)
{
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct server s = {0};
		struct event *ev;

		alarm(60);
		s.base = event_base_new();
		s.lfd = lfd;
		ev = event_new(s.base, lfd, EV_READ | EV_PERSIST, srv_on_accept, &s);
		if (s.base == NULL || ev == NULL || event_add(ev, NULL) < 0)
			_exit(40);
		event_base_dispatch(s.base);
		_exit(s.stop ? 0 : 44);
	}
	close(lfd);
	return pid;
}

/* Connect raw, send bytes, expect the server to hang up. */
static void
expect_disconnect(const char *path, const void *bytes, size_t n)
{
	char err[256], buf[64];
	struct pollfd pfd;
	int fd = ctlsock_connect(path, err, sizeof(err));
	ssize_t r;

	cr_assert_geq(fd, 0, "%s", err);
	cr_assert_eq(send(fd, bytes, n, MSG_NOSIGNAL), (ssize_t)n);
	pfd.fd = fd;
	pfd.events = POLLIN;
	cr_assert_eq(poll(&pfd, 1, 30000), 1);
	r = read(fd, buf, sizeof(buf));
	cr_assert(r == 0 || (r < 0 && errno == ECONNRESET), "read %zd: nothing must be answered",
		  r);
	close(fd);
}

Test(ctlsock, round_trips_through_a_control_server)
{
	char *dir = tmpdir(), path[300], err[256];
	struct ipc_msg req, rep, want;
	unsigned char *f;
	size_t flen;
	int lfd;
	pid_t pid;

	snprintf(path, sizeof(path), "%s/ctl.sock", dir);
	lfd = ctlsock_listen(path, err, sizeof(err));
	cr_assert_geq(lfd, 0, "%s", err);
	pid = spawn_server(lfd);

	ipc_msg_init(&req, IPC_CTL_STATUS);
	req.u.ctl_status.json = true;
	cr_assert_eq(ctlsock_request(path, &req, &rep, 0, err, sizeof(err)), 0, "%s", err);
	ipc_sample(IPC_CTL_STATUS_REPLY, 0, &want);
	cr_assert(ipc_msg_equal(&rep, &want), "the status reply arrives intact");
	cr_assert_eq(rep.u.ctl_status_reply.workers.n, 2);
	cr_assert_str_eq(rep.u.ctl_status_reply.workers.v[0].name, "rax-dfw");
	ipc_msg_clear(&want);
	ipc_msg_clear(&rep);

	/* A client that sends garbage, or a message only workers send, is cut
	 * off without an answer; the server keeps serving others. */
	expect_disconnect(path, "\x00\x00\x00\x02\xc1\xc1", 6);
	ipc_sample(IPC_STATUS, 0, &req);
	cr_assert_eq(ipc_frame_encode(&req, 0, &f, &flen, err, sizeof(err)), 0);
	expect_disconnect(path, f, flen);
	free(f);
	ipc_msg_clear(&req);
	expect_disconnect(path, "\x00\x10\x00\x00", 4); /* 1 MiB: over this server's 64 KiB cap */

	ipc_msg_init(&req, IPC_CTL_RESTART);
	ipc_set_str(&req.u.ctl_restart.provider, "rax-dfw");
	cr_assert_eq(ctlsock_request(path, &req, &rep, 0, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rep.type, IPC_CTL_RESULT);
	cr_assert(rep.u.ctl_result.ok);
	cr_assert_str_eq(rep.u.ctl_result.message, "restarting rax-dfw");
	ipc_msg_clear(&req);
	ipc_msg_clear(&rep);

	ipc_msg_init(&req, IPC_CTL_RELOAD);
	cr_assert_eq(ctlsock_request(path, &req, &rep, 0, err, sizeof(err)), 0, "%s", err);
	cr_assert_not(rep.u.ctl_result.ok);
	cr_assert_eq(rep.u.ctl_result.errors.n, 1);
	cr_assert_str_eq(rep.u.ctl_result.errors.v[0], "nodepool.yaml:3:1: bad");
	ipc_msg_clear(&rep);

	ipc_msg_init(&req, IPC_CTL_STOP);
	cr_assert_eq(ctlsock_request(path, &req, &rep, 0, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(rep.u.ctl_result.message, "stopping");
	ipc_msg_clear(&rep);
	cr_assert_eq(wait_exit(pid), 0, "the server stopped on CTL_STOP");
	rm_rf(dir);
	free(dir);
}

/* In a child: become nobody, make a request, exit 0 if err / the reply is
 * what want says. */
static pid_t
spawn_nobody_client(const char *path, const char *want_err, const char *want_msg)
{
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct ipc_msg req, rep;
		char err[256] = "";
		int rc;

		alarm(60);
		if (setgroups(0, NULL) < 0 || setgid(NOBODY) < 0 || setuid(NOBODY) < 0)
			_exit(40);
		ipc_msg_init(&req, IPC_CTL_STATUS);
		rc = ctlsock_request(path, &req, &rep, 0, err, sizeof(err));
		if (want_err != NULL)
			_exit(rc == -1 && strcmp(err, want_err) == 0 ? 0 : 1);
		if (rc != 0 || rep.type != IPC_CTL_RESULT || rep.u.ctl_result.ok ||
		    strcmp(rep.u.ctl_result.message, want_msg) != 0) {
			fprintf(stderr, "client got rc %d err \"%s\" message \"%s\"\n", rc, err,
				rc == 0 && rep.type == IPC_CTL_RESULT ? rep.u.ctl_result.message
								      : "");
			_exit(2);
		}
		_exit(0);
	}
	return pid;
}

Test(ctlsock, only_root_and_the_daemon_uid_get_in)
{
	char *dir, path[300], err[256], want[400];
	struct ucred uc;
	struct pollfd pfd;
	int lfd;
	pid_t pid;

	if (geteuid() != 0)
		cr_skip_test("needs root to play another uid");
	dir = tmpdir_in(true);
	snprintf(path, sizeof(path), "%s/ctl.sock", dir);
	lfd = ctlsock_listen(path, err, sizeof(err));
	cr_assert_geq(lfd, 0, "%s", err);

	/* The file mode keeps other users out before any credential check. */
	cr_assert_eq(chmod(dir, 0755), 0);
	snprintf(want, sizeof(want),
		 "permission denied on control socket %s (run as root or as nodepoold's user)",
		 path);
	pid = spawn_nobody_client(path, want, NULL);
	cr_assert_eq(wait_exit(pid), 0, "nobody is refused by the 0600 mode");

	/* With the mode opened up, SO_PEERCRED still refuses them. */
	cr_assert_eq(chmod(path, 0666), 0);
	pid = spawn_nobody_client(path, NULL,
				  "permission denied: uid 65534 may not use nodepoold's control "
				  "socket (root or uid 0 only)");
	pfd.fd = lfd;
	pfd.events = POLLIN;
	cr_assert_eq(poll(&pfd, 1, 30000), 1);
	cr_assert_eq(ctlsock_accept(lfd, &uc, err, sizeof(err)), -1);
	cr_assert_eq(errno, EPERM);
	cr_assert_eq(uc.uid, NOBODY);
	cr_assert(strstr(err, "uid 65534 (root or uid 0 only)") != NULL, "%s", err);
	cr_assert_eq(wait_exit(pid), 0, "the refused client was told why");
	/* Nothing else pending. */
	cr_assert_eq(ctlsock_accept(lfd, NULL, err, sizeof(err)), -1);
	cr_assert_eq(errno, EAGAIN);
	close(lfd);
	rm_rf(dir);
	free(dir);
}

Test(ctlsock, same_uid_is_accepted)
{
	char *dir = tmpdir(), path[300], err[256];
	struct ucred uc;
	struct pollfd pfd;
	int lfd, cfd, sfd;

	snprintf(path, sizeof(path), "%s/ctl.sock", dir);
	lfd = ctlsock_listen(path, err, sizeof(err));
	cr_assert_geq(lfd, 0, "%s", err);
	cfd = ctlsock_connect(path, err, sizeof(err));
	cr_assert_geq(cfd, 0, "%s", err);
	pfd.fd = lfd;
	pfd.events = POLLIN;
	cr_assert_eq(poll(&pfd, 1, 30000), 1);
	sfd = ctlsock_accept(lfd, &uc, err, sizeof(err));
	cr_assert_geq(sfd, 0, "%s", err);
	cr_assert_eq(uc.uid, geteuid());
	cr_assert_eq(uc.pid, getpid());
	cr_assert(fcntl(sfd, F_GETFL) & O_NONBLOCK);
	close(sfd);
	close(cfd);
	close(lfd);
	rm_rf(dir);
	free(dir);
}
