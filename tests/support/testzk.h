/*
 * Helpers for tests that use the private ZooKeeper of tests/run.sh (or of
 * `sh tests/zkfixture.sh start DIR && . DIR/env`), and for tests that run
 * child processes. Linked into every test binary.
 *
 * Environment (see tests/zkfixture.sh): NP_TEST_ZK (plain host:port),
 * NP_TEST_ZK_TLS (TLS host:port), NP_TEST_CERTS (certificate directory),
 * NP_TEST_TMP (scratch directory), NP_BUILD (absolute build directory).
 * A helper that needs a variable that is not set fails the test with a
 * message naming it.
 *
 * Every test works in its own fresh chroot (testzk_chroot), so tests can
 * run in parallel against one server and never see each other's znodes.
 */
#ifndef NP_TESTZK_H
#define NP_TESTZK_H

#include <sys/types.h>

#include "lib/zk/zk.h"

struct event_base;

/* "127.0.0.1:<port>" of the plain (tls 0) or TLS (tls 1) listener. */
const char *testzk_hosts(int tls);
/* Path of a file in NP_TEST_CERTS, e.g. testzk_cert("ca.pem"); the string
 * stays valid for the life of the process. */
const char *testzk_cert(const char *name);
/* A scratch path under NP_TEST_TMP (or /tmp) named after name and the pid;
 * valid for the life of the process. */
const char *testzk_tmpfile(const char *name);

/*
 * Create a fresh, empty, unique chroot (/t-<pid>-<counter>) on the server
 * and return the host string with it for the plain or TLS listener,
 * "127.0.0.1:<port>/t-<pid>-<n>" (valid for the life of the process). Its
 * bare path (without the host) is returned in *path when path is not NULL.
 */
const char *testzk_chroot(int tls, const char **path);

/* Fill opt for hosts; tls 1 sets the CA, client certificate and key. */
void testzk_options(struct zk_options *opt, const char *hosts, int tls);

/*
 * A session on a fresh chroot (plain or TLS), connected (the test fails
 * after 15 s otherwise). session_cb may be NULL. The chroot's host string
 * is returned in *hosts if hosts is not NULL.
 */
struct zk *testzk_connect(struct event_base *base, int tls, zk_session_cb session_cb, void *arg,
			  const char **hosts);

/*
 * A session on base to hosts ("host:port/chroot": another session on an
 * existing chroot, or one through a proxy), plain or TLS, connected (the
 * test fails after 15 s otherwise). session_cb may be NULL.
 */
struct zk *testzk_session(struct event_base *base, const char *hosts, int tls,
			  zk_session_cb session_cb, void *arg);

/*
 * Run the loop until cond(arg) is true (checked after every loop pass) or
 * timeout seconds pass. Returns 1 if the condition was met, 0 on timeout.
 */
int testzk_run_until(struct event_base *base, int (*cond)(void *), void *arg, double timeout);
/* The same for a flag: until *flag != 0. */
int testzk_run_flag(struct event_base *base, const int *flag, double timeout);
/* Run the loop for this many seconds (events are served meanwhile). */
void testzk_run_for(struct event_base *base, double seconds);

/*
 * Make the server end zk's current session: attach a second connection to
 * it (same session id and password, C client, plain port) and close it,
 * until the server reports the session gone. zk then reports SUSPENDED,
 * EXPIRED and, on a new session, CONNECTED (possibly a RECONNECTED and
 * SUSPENDED more before EXPIRED). Returns 0, or -1 on failure.
 */
int testzk_expire(struct zk *zk);

/* ---- child processes ------------------------------------------------------ */

/* A child started by testzk_spawn: stdin and stdout are pipes to us unless
 * stdout went to a file. */
struct testzk_proc {
	pid_t pid;
	int in;	 /* write end of its stdin, -1 if closed */
	int out; /* read end of its stdout, -1 if it goes to a file */
	char buf[8192];
	size_t len;
};

/*
 * fork+exec argv[0] (searched in PATH). outfile: stdout and stderr go to
 * that file; NULL: stdout is a pipe read by testzk_proc_readline and
 * stderr is inherited. Returns NULL if the fork fails.
 */
struct testzk_proc *testzk_spawn(char *const argv[], const char *outfile);
/* One line of its stdout without the newline (static buffer), or NULL on
 * EOF or after timeout seconds. */
const char *testzk_proc_readline(struct testzk_proc *p, double timeout);
/* Write a line (a newline is added). Returns 0 or -1. */
int testzk_proc_writeline(struct testzk_proc *p, const char *line);
/* Wait up to timeout seconds for it to exit; then SIGTERM and SIGKILL it
 * (by pid). Frees p. Returns its exit status as from waitpid, or -1. */
int testzk_proc_wait(struct testzk_proc *p, double timeout);
/* Stop it now: SIGTERM by pid, SIGKILL after 5 s; frees p. */
int testzk_proc_stop(struct testzk_proc *p);

/*
 * A TCP proxy on a free 127.0.0.1 port to target ("host:port"), run by a
 * thread of its own, to cut a client's connections without touching the
 * server: what a network failure looks like to the client.
 */
struct testzk_proxy;
struct testzk_proxy *testzk_proxy_start(const char *target);
int testzk_proxy_port(const struct testzk_proxy *p);
/* "127.0.0.1:<p's port><chroot>": the hosts that reach chroot (a path from
 * testzk_chroot) through p; static, valid until the next call. */
const char *testzk_proxy_hosts(const struct testzk_proxy *p, const char *chroot);
/* Close every proxied connection now. */
void testzk_proxy_drop(struct testzk_proxy *p);
/* While refusing, new connections are closed as soon as accepted. */
void testzk_proxy_refuse(struct testzk_proxy *p, int refuse);
/* While holding, nothing is passed from the server to the client (requests
 * still reach the server): answers are in flight for as long as wanted. */
void testzk_proxy_hold(struct testzk_proxy *p, int hold);
/* While keeping, nothing is passed from the client to the server (answers
 * already due still reach the client): the client's writes fill the
 * socket's buffers and would block. Returns once the proxy keeps (or
 * passes) what arrives next. */
void testzk_proxy_keep_requests(struct testzk_proxy *p, int keep);
void testzk_proxy_stop(struct testzk_proxy *p);

/* A TCP port on 127.0.0.1 free at the time of the call. */
int testzk_free_port(void);
/* Wait until something accepts TCP connections on 127.0.0.1:port. */
int testzk_wait_port(int port, double timeout);
/* Path of a file in tests/support/ (found from NP_BUILD or the current
 * directory), e.g. testzk_support_file("kazoo_helper.py"). */
const char *testzk_support_file(const char *name);
/* Does file contain the string? (binary-safe: any bytes around it). */
int testzk_file_contains(const char *file, const char *needle);

#endif
