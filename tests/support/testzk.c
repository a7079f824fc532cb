/* Helpers for tests against the private ZooKeeper (see testzk.h). */
#include "tests/support/testzk.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <criterion/criterion.h>
#include <event2/event.h>
#include "lib/core/clock.h"

static const char *
env(const char *name)
{
	const char *v = getenv(name);

	if (v == NULL || *v == '\0')
		cr_assert_fail("%s is not set: run the tests with `make check`, or start "
			       "tests/zkfixture.sh and source its env file",
			       name);
	return v;
}

/* Strings that live as long as the process (helpers return them); kept
 * reachable so that LeakSanitizer does not count them. */
static char **kept;
static size_t nkept, capkept;

static const char *
keep(const char *s)
{
	char *d = strdup(s);

	cr_assert_not_null(d);
	if (nkept == capkept) {
		capkept = capkept ? capkept * 2 : 16;
		kept = realloc(kept, capkept * sizeof(*kept));
		cr_assert_not_null(kept);
	}
	kept[nkept++] = d;
	return d;
}

const char *
testzk_hosts(int tls)
{
	return env(tls ? "NP_TEST_ZK_TLS" : "NP_TEST_ZK");
}

const char *
testzk_cert(const char *name)
{
	char buf[4096];

	snprintf(buf, sizeof(buf), "%s/%s", env("NP_TEST_CERTS"), name);
	return keep(buf);
}

const char *
testzk_tmpfile(const char *name)
{
	static int n;
	const char *tmp = getenv("NP_TEST_TMP");
	char buf[4096];

	snprintf(buf, sizeof(buf), "%s/%s.%ld.%d", tmp != NULL && *tmp ? tmp : "/tmp", name,
		 (long)getpid(), ++n);
	return keep(buf);
}

void
testzk_options(struct zk_options *opt, const char *hosts, int tls)
{
	memset(opt, 0, sizeof(*opt));
	opt->hosts = hosts;
	opt->timeout = 10;
	if (tls) {
		opt->tls_ca = testzk_cert("ca.pem");
		opt->tls_cert = testzk_cert("client.pem");
		opt->tls_key = testzk_cert("client.key");
	}
}

const char *
testzk_chroot(int tls, const char **path)
{
	static int counter;
	struct zk_options opt;
	struct event_base *base;
	struct zk *zk;
	char err[256], root[64], hosts[512];
	int rc;

	base = event_base_new();
	cr_assert_not_null(base);
	testzk_options(&opt, testzk_hosts(0), 0);
	zk = zk_new(base, &opt, NULL, NULL, err, sizeof(err));
	cr_assert_not_null(zk, "zk_new: %s", err);
	cr_assert_eq(zk_wait_connected(zk, 15), ZOK, "no session with %s", opt.hosts);
	do { /* a server that outlives many runs sees pids again */
		snprintf(root, sizeof(root), "/t-%ld-%d", (long)getpid(), ++counter);
		rc = zk_sync_create(zk, root, NULL, 0, 0, 0, NULL);
	} while (rc == ZNODEEXISTS);
	cr_assert_eq(rc, ZOK, "create %s: %s", root, zk_strerror(rc));
	zk_free(zk);
	event_base_free(base);
	snprintf(hosts, sizeof(hosts), "%s%s", testzk_hosts(tls), root);
	if (path != NULL)
		*path = keep(root);
	return keep(hosts);
}

struct zk *
testzk_connect(struct event_base *base, int tls, zk_session_cb session_cb, void *arg,
	       const char **hosts)
{
	const char *h = testzk_chroot(tls, NULL);

	if (hosts != NULL)
		*hosts = h;
	return testzk_session(base, h, tls, session_cb, arg);
}

struct zk *
testzk_session(struct event_base *base, const char *hosts, int tls, zk_session_cb session_cb,
	       void *arg)
{
	struct zk_options opt;
	struct zk *zk;
	char err[256];

	testzk_options(&opt, hosts, tls);
	zk = zk_new(base, &opt, session_cb, arg, err, sizeof(err));
	cr_assert_not_null(zk, "zk_new(%s): %s", hosts, err);
	cr_assert_eq(zk_wait_connected(zk, 15), ZOK, "no session with %s", hosts);
	return zk;
}

static void
noop_cb(evutil_socket_t fd, short what, void *arg)
{
}

int
testzk_run_until(struct event_base *base, int (*cond)(void *), void *arg, double timeout)
{
	double deadline = np_mono_s() + timeout, left;
	struct event *t = evtimer_new(base, noop_cb, NULL);
	struct timeval tv;
	int ok;

	while (!(ok = cond(arg)) && (left = deadline - np_mono_s()) > 0) {
		if (left > 0.05)
			left = 0.05; /* also notice conditions changed outside the loop */
		tv = np_tv_of(left);
		evtimer_add(t, &tv);
		event_base_loop(base, EVLOOP_ONCE);
	}
	event_free(t);
	return ok;
}

static int
flag_set(void *arg)
{
	return *(const int *)arg != 0;
}

int
testzk_run_flag(struct event_base *base, const int *flag, double timeout)
{
	return testzk_run_until(base, flag_set, (void *)(uintptr_t)flag, timeout);
}

static int
never(void *arg)
{
	return 0;
}

void
testzk_run_for(struct event_base *base, double seconds)
{
	testzk_run_until(base, never, NULL, seconds);
}

int
testzk_expire(struct zk *zk)
{
	const clientid_t *cur = zk_client_id(zk);
	clientid_t cid;
	zhandle_t *zh;
	double deadline;
	int attempt, st;

	if (cur == NULL)
		return -1;
	cid = *cur;
	/*
	 * Attach to the session and close it. zk's client reconnects when we
	 * take its session over, and may take it back before our close is
	 * sent; so attach again until the server says the session is gone.
	 */
	for (attempt = 0; attempt < 20; attempt++) {
		zh = zookeeper_init(testzk_hosts(0), NULL, 10000, &cid, NULL, ZOO_NO_LOG_CLIENTENV);
		if (zh == NULL)
			return -1;
		deadline = np_mono_s() + 10;
		while ((st = zoo_state(zh)) != ZOO_CONNECTED_STATE &&
		       st != ZOO_EXPIRED_SESSION_STATE && np_mono_s() < deadline)
			usleep(2000);
		zookeeper_close(zh); /* closes the session if attached */
		if (st == ZOO_EXPIRED_SESSION_STATE)
			return 0;
	}
	return -1;
}

/* ---- child processes ------------------------------------------------------ */

struct testzk_proc *
testzk_spawn(char *const argv[], const char *outfile)
{
	struct testzk_proc *p = calloc(1, sizeof(*p));
	int in[2], out[2] = {-1, -1}, fd;

	cr_assert_not_null(p);
	cr_assert_eq(pipe2(in, O_CLOEXEC), 0);
	if (outfile == NULL)
		cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
	p->pid = fork();
	cr_assert_neq(p->pid, -1, "fork: %s", strerror(errno));
	if (p->pid == 0) {
		dup2(in[0], 0);
		if (outfile != NULL) {
			fd = open(outfile, O_WRONLY | O_CREAT | O_TRUNC, 0644);
			if (fd < 0)
				_exit(126);
			dup2(fd, 1);
			dup2(fd, 2);
		} else {
			dup2(out[1], 1);
		}
		execvp(argv[0], argv);
		_exit(127);
	}
	close(in[0]);
	p->in = in[1];
	if (outfile == NULL) {
		close(out[1]);
		p->out = out[0];
	} else {
		p->out = -1;
	}
	return p;
}

const char *
testzk_proc_readline(struct testzk_proc *p, double timeout)
{
	static char line[8192];
	double deadline = np_mono_s() + timeout;
	struct pollfd pfd;
	char *nl;
	ssize_t r;
	int ms;

	if (p->out < 0)
		return NULL;
	for (;;) {
		nl = memchr(p->buf, '\n', p->len);
		if (nl != NULL) {
			size_t n = (size_t)(nl - p->buf);

			memcpy(line, p->buf, n);
			line[n] = '\0';
			memmove(p->buf, nl + 1, p->len - n - 1);
			p->len -= n + 1;
			return line;
		}
		if (p->len == sizeof(p->buf))
			p->len = 0; /* an absurdly long line: drop it */
		ms = (int)((deadline - np_mono_s()) * 1000);
		if (ms <= 0)
			return NULL;
		pfd.fd = p->out;
		pfd.events = POLLIN;
		if (poll(&pfd, 1, ms) <= 0)
			continue;
		r = read(p->out, p->buf + p->len, sizeof(p->buf) - p->len);
		if (r <= 0)
			return NULL;
		p->len += (size_t)r;
	}
}

int
testzk_proc_writeline(struct testzk_proc *p, const char *line)
{
	size_t n = strlen(line);

	if (p->in < 0)
		return -1;
	if (write(p->in, line, n) != (ssize_t)n || write(p->in, "\n", 1) != 1)
		return -1;
	return 0;
}

static void
proc_free(struct testzk_proc *p)
{
	if (p->in >= 0)
		close(p->in);
	if (p->out >= 0)
		close(p->out);
	free(p);
}

int
testzk_proc_wait(struct testzk_proc *p, double timeout)
{
	double deadline = np_mono_s() + timeout;
	int status = -1, sig = 0;
	pid_t r;

	if (p->in >= 0) {
		close(p->in);
		p->in = -1;
	}
	for (;;) {
		r = waitpid(p->pid, &status, WNOHANG);
		if (r == p->pid || (r < 0 && errno != EINTR))
			break;
		if (np_mono_s() > deadline) {
			if (sig == SIGKILL)
				break;
			sig = sig == 0 ? SIGTERM : SIGKILL;
			kill(p->pid, sig);
			deadline = np_mono_s() + 5;
		}
		usleep(10000);
	}
	proc_free(p);
	return r > 0 ? status : -1;
}

int
testzk_proc_stop(struct testzk_proc *p)
{
	kill(p->pid, SIGTERM);
	return testzk_proc_wait(p, 5);
}

int
testzk_free_port(void)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	int s = socket(AF_INET, SOCK_STREAM, 0), port;

	cr_assert_geq(s, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(getsockname(s, (struct sockaddr *)&sa, &sl), 0);
	port = ntohs(sa.sin_port);
	close(s);
	return port;
}

int
testzk_wait_port(int port, double timeout)
{
	double deadline = np_mono_s() + timeout;
	struct sockaddr_in sa;
	int s, ok = 0;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)port);
	while (!ok && np_mono_s() < deadline) {
		s = socket(AF_INET, SOCK_STREAM, 0);
		if (s < 0)
			return 0;
		ok = connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0;
		close(s);
		if (!ok)
			usleep(20000);
	}
	return ok;
}

const char *
testzk_support_file(const char *name)
{
	const char *b = getenv("NP_BUILD");
	char buf[4096], *slash;

	if (b != NULL && *b != '\0') {
		snprintf(buf, sizeof(buf), "%s", b);
		slash = strrchr(buf, '/');
		if (slash != NULL) {
			snprintf(slash, sizeof(buf) - (size_t)(slash - buf), "/tests/support/%s",
				 name);
			if (access(buf, R_OK) == 0)
				return keep(buf);
		}
	}
	snprintf(buf, sizeof(buf), "tests/support/%s", name);
	return keep(buf);
}

int
testzk_file_contains(const char *file, const char *needle)
{
	FILE *f = fopen(file, "rb");
	size_t n = strlen(needle), len = 0, cap = 0;
	char *buf = NULL;
	size_t r;
	int found = 0;

	if (f == NULL)
		return 0;
	for (;;) {
		if (len == cap) {
			cap = cap ? cap * 2 : 65536;
			buf = realloc(buf, cap);
			cr_assert_not_null(buf);
		}
		r = fread(buf + len, 1, cap - len, f);
		if (r == 0)
			break;
		len += r;
	}
	fclose(f);
	if (n <= len)
		found = memmem(buf, len, needle, n) != NULL;
	free(buf);
	return found;
}

/* ---- TCP proxy ---------------------------------------------------------------- */

#define PROXY_MAX 64

struct testzk_proxy {
	pthread_t thread;
	int lfd;    /* listening socket */
	int ctl[2]; /* commands to the thread: 'd'rop, 'r'efuse, 'a'ccept,
		       'h'old, 'u'nhold, 'k'eep requests, 'p'ass them, 'q'uit */
	int port;
	struct sockaddr_in target;
	int pairs[PROXY_MAX][2]; /* client fd, server fd; -1 when unused */
	int refuse;
	int hold;
	int keep;	    /* requests (client to server) not passed on */
	atomic_int keeping; /* keep, as the thread last applied it */
};

static void
proxy_close_pair(struct testzk_proxy *p, int i)
{
	close(p->pairs[i][0]);
	close(p->pairs[i][1]);
	p->pairs[i][0] = p->pairs[i][1] = -1;
}

static void *
proxy_main(void *arg)
{
	struct testzk_proxy *p = arg;
	struct pollfd pfd[2 + 2 * PROXY_MAX];
	int idx[2 + 2 * PROXY_MAX];
	char buf[65536], cmd;
	int n, i, k, c, s, quit = 0;
	ssize_t r;

	while (!quit) {
		n = 0;
		pfd[n].fd = p->ctl[0];
		pfd[n++].events = POLLIN;
		pfd[n].fd = p->lfd;
		pfd[n++].events = POLLIN;
		for (i = 0; i < PROXY_MAX; i++) {
			if (p->pairs[i][0] < 0)
				continue;
			for (k = 0; k < 2; k++) {
				if ((k == 1 && p->hold) || (k == 0 && p->keep))
					continue;
				idx[n] = i * 2 + k;
				pfd[n].fd = p->pairs[i][k];
				pfd[n++].events = POLLIN;
			}
		}
		if (poll(pfd, (nfds_t)n, -1) < 0)
			continue;
		if (pfd[0].revents & POLLIN) {
			if (read(p->ctl[0], &cmd, 1) == 1) {
				if (cmd == 'q')
					quit = 1;
				if (cmd == 'd' || cmd == 'q') {
					for (i = 0; i < PROXY_MAX; i++)
						if (p->pairs[i][0] >= 0)
							proxy_close_pair(p, i);
				}
				if (cmd == 'r')
					p->refuse = 1;
				if (cmd == 'a')
					p->refuse = 0;
				if (cmd == 'h' || cmd == 'u')
					p->hold = cmd == 'h';
				if (cmd == 'k' || cmd == 'p') {
					p->keep = cmd == 'k';
					atomic_store(&p->keeping, p->keep);
				}
			}
			continue; /* the pair set may have changed */
		}
		if (pfd[1].revents & POLLIN) {
			c = accept4(p->lfd, NULL, NULL, SOCK_CLOEXEC);
			if (c >= 0) {
				s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
				for (i = 0; i < PROXY_MAX && p->pairs[i][0] >= 0; i++)
					;
				if (p->refuse || s < 0 || i == PROXY_MAX ||
				    connect(s, (struct sockaddr *)&p->target, sizeof(p->target)) !=
					0) {
					close(c);
					if (s >= 0)
						close(s);
				} else {
					p->pairs[i][0] = c;
					p->pairs[i][1] = s;
				}
			}
			continue;
		}
		for (k = 2; k < n; k++) {
			if (!(pfd[k].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			i = idx[k] / 2;
			if (p->pairs[i][0] < 0)
				continue;
			r = read(p->pairs[i][idx[k] % 2], buf, sizeof(buf));
			if (r <= 0 || write(p->pairs[i][1 - idx[k] % 2], buf, (size_t)r) != r)
				proxy_close_pair(p, i);
		}
	}
	return NULL;
}

struct testzk_proxy *
testzk_proxy_start(const char *target)
{
	struct testzk_proxy *p = calloc(1, sizeof(*p));
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	char host[64];
	const char *colon = strrchr(target, ':');
	int i, one = 1, rcvbuf = 64 * 1024;

	cr_assert_not_null(p);
	cr_assert_not_null(colon, "target %s", target);
	snprintf(host, sizeof(host), "%.*s", (int)(colon - target), target);
	memset(&p->target, 0, sizeof(p->target));
	p->target.sin_family = AF_INET;
	p->target.sin_port = htons((uint16_t)atoi(colon + 1));
	cr_assert_eq(inet_pton(AF_INET, host, &p->target.sin_addr), 1, "target %s", target);
	for (i = 0; i < PROXY_MAX; i++)
		p->pairs[i][0] = p->pairs[i][1] = -1;
	p->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(p->lfd, 0);
	setsockopt(p->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* a receive buffer of a fixed, modest size (inherited by the accepted
	 * sockets): while requests are kept, a client fills it and its own
	 * send buffer with a few megabytes, and then its writes would block */
	setsockopt(p->lfd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(p->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(p->lfd, 16), 0);
	cr_assert_eq(getsockname(p->lfd, (struct sockaddr *)&sa, &sl), 0);
	p->port = ntohs(sa.sin_port);
	cr_assert_eq(pipe2(p->ctl, O_CLOEXEC), 0);
	cr_assert_eq(pthread_create(&p->thread, NULL, proxy_main, p), 0);
	return p;
}

int
testzk_proxy_port(const struct testzk_proxy *p)
{
	return p->port;
}

const char *
testzk_proxy_hosts(const struct testzk_proxy *p, const char *chroot)
{
	static char hosts[512];

	snprintf(hosts, sizeof(hosts), "127.0.0.1:%d%s", p->port, chroot);
	return hosts;
}

static void
proxy_cmd(struct testzk_proxy *p, char c)
{
	cr_assert_eq(write(p->ctl[1], &c, 1), 1);
}

void
testzk_proxy_drop(struct testzk_proxy *p)
{
	proxy_cmd(p, 'd');
}

void
testzk_proxy_refuse(struct testzk_proxy *p, int refuse)
{
	proxy_cmd(p, refuse ? 'r' : 'a');
}

void
testzk_proxy_hold(struct testzk_proxy *p, int hold)
{
	proxy_cmd(p, hold ? 'h' : 'u');
}

void
testzk_proxy_keep_requests(struct testzk_proxy *p, int keep)
{
	struct timespec ms = {0, 1000000};

	proxy_cmd(p, keep ? 'k' : 'p');
	while (atomic_load(&p->keeping) != keep)
		nanosleep(&ms, NULL);
}

void
testzk_proxy_stop(struct testzk_proxy *p)
{
	if (p == NULL)
		return;
	proxy_cmd(p, 'q');
	pthread_join(p->thread, NULL);
	close(p->lfd);
	close(p->ctl[0]);
	close(p->ctl[1]);
	free(p);
}
