/*
 * An SSH command in a thread (sshcmd.h). The struct is shared by the
 * thread and the loop under a mutex with a reference count of two: the
 * thread drops its reference after writing the outcome to the pipe, the
 * loop after reading it (or on cancel); the last one frees it.
 */
#include "lib/net/sshcmd.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <libssh/libssh.h>

#include "lib/core/dynlib.h"
#include "lib/core/log.h"
#include "lib/core/xalloc.h"

#define SC_SSH_FUNCS(X)                                                                            \
	X(ssh_new)                                                                                 \
	X(ssh_free)                                                                                \
	X(ssh_options_set)                                                                         \
	X(ssh_connect)                                                                             \
	X(ssh_disconnect)                                                                          \
	X(ssh_get_error)                                                                           \
	X(ssh_pki_import_privkey_file)                                                             \
	X(ssh_userauth_publickey)                                                                  \
	X(ssh_key_free)                                                                            \
	X(ssh_channel_new)                                                                         \
	X(ssh_channel_open_session)                                                                \
	X(ssh_channel_request_exec)                                                                \
	X(ssh_channel_read_timeout)                                                                \
	X(ssh_channel_is_eof)                                                                      \
	X(ssh_channel_get_exit_status)                                                             \
	X(ssh_channel_close)                                                                       \
	X(ssh_channel_free)

static struct sc_ssh_api {
	SC_SSH_FUNCS(DYNLIB_FIELD)
} sc_ssh;
#define SC_SSH_SYM(f) DYNLIB_SYM(sc_ssh, f)
static const struct dynlib_sym sc_ssh_syms[] = {SC_SSH_FUNCS(SC_SSH_SYM)};
static struct dynlib sc_ssh_lib = DYNLIB_INIT("libssh.so.4", "libssh", "libssh-4", sc_ssh_syms);

struct sshcmd {
	pthread_mutex_t mu;
	int refs;
	int cancelled;
	int fds[2]; /* the thread writes one byte to fds[1] when done */
	struct event *ev;
	sshcmd_done done;
	void *arg;
	/* parameters, owned */
	char *host, *user, *key, *command;
	int port;
	double timeout;
	/* outcome */
	int status;
	char error[512];
};

static void
unref(struct sshcmd *c)
{
	int last;

	pthread_mutex_lock(&c->mu);
	last = --c->refs == 0;
	pthread_mutex_unlock(&c->mu);
	if (!last)
		return;
	close(c->fds[0]);
	close(c->fds[1]);
	free(c->host);
	free(c->user);
	free(c->key);
	free(c->command);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

static double
mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The blocking run; fills c->status / c->error. */
static void
run(struct sshcmd *c)
{
	double deadline = mono() + c->timeout;
	ssh_session s = NULL;
	ssh_channel ch = NULL;
	ssh_key key = NULL;
	long tmo = (long)c->timeout + 1, verbosity = 0;
	int process_config = 0, n;
	char buf[4096];

	c->status = -1;
	if (dynlib_load(&sc_ssh_lib, "validation commands", c->error, sizeof(c->error)) != 0)
		return;
	if ((s = sc_ssh.ssh_new()) == NULL) {
		snprintf(c->error, sizeof(c->error), "ssh: out of memory");
		return;
	}
	sc_ssh.ssh_options_set(s, SSH_OPTIONS_HOST, c->host);
	sc_ssh.ssh_options_set(s, SSH_OPTIONS_PORT, &c->port);
	sc_ssh.ssh_options_set(s, SSH_OPTIONS_USER, c->user);
	sc_ssh.ssh_options_set(s, SSH_OPTIONS_TIMEOUT, &tmo);
	sc_ssh.ssh_options_set(s, SSH_OPTIONS_LOG_VERBOSITY, &verbosity);
	sc_ssh.ssh_options_set(s, SSH_OPTIONS_PROCESS_CONFIG, &process_config);
	if (sc_ssh.ssh_connect(s) != SSH_OK) {
		snprintf(c->error, sizeof(c->error), "ssh %s:%d: %s", c->host, c->port,
			 sc_ssh.ssh_get_error(s));
		goto out;
	}
	if (sc_ssh.ssh_pki_import_privkey_file(c->key, NULL, NULL, NULL, &key) != SSH_OK) {
		snprintf(c->error, sizeof(c->error), "ssh: cannot read the private key %s", c->key);
		goto out;
	}
	if (sc_ssh.ssh_userauth_publickey(s, NULL, key) != SSH_AUTH_SUCCESS) {
		snprintf(c->error, sizeof(c->error), "ssh %s@%s:%d: authentication failed: %s",
			 c->user, c->host, c->port, sc_ssh.ssh_get_error(s));
		goto out;
	}
	if ((ch = sc_ssh.ssh_channel_new(s)) == NULL ||
	    sc_ssh.ssh_channel_open_session(ch) != SSH_OK ||
	    sc_ssh.ssh_channel_request_exec(ch, c->command) != SSH_OK) {
		snprintf(c->error, sizeof(c->error), "ssh %s:%d: running the command: %s", c->host,
			 c->port, sc_ssh.ssh_get_error(s));
		goto out;
	}
	/* drain the output until end of file, within the deadline */
	while (!sc_ssh.ssh_channel_is_eof(ch)) {
		int left = (int)((deadline - mono()) * 1000);
		if (left <= 0) {
			snprintf(c->error, sizeof(c->error),
				 "validation command timed out after %.0f s", c->timeout);
			goto out;
		}
		n = sc_ssh.ssh_channel_read_timeout(ch, buf, sizeof(buf), 0,
						    left < 1000 ? left : 1000);
		if (n < 0) {
			snprintf(c->error, sizeof(c->error), "ssh %s:%d: %s", c->host, c->port,
				 sc_ssh.ssh_get_error(s));
			goto out;
		}
		/* stderr too, so that a chatty command cannot fill its window */
		(void)sc_ssh.ssh_channel_read_timeout(ch, buf, sizeof(buf), 1, 0);
	}
	c->status = sc_ssh.ssh_channel_get_exit_status(ch);
	if (c->status < 0)
		snprintf(c->error, sizeof(c->error), "ssh: the command's exit status is unknown");
out:
	if (ch != NULL) {
		sc_ssh.ssh_channel_close(ch);
		sc_ssh.ssh_channel_free(ch);
	}
	if (key != NULL)
		sc_ssh.ssh_key_free(key);
	sc_ssh.ssh_disconnect(s);
	sc_ssh.ssh_free(s);
}

static void *
thread_main(void *arg)
{
	struct sshcmd *c = arg;
	char one = 1;
	ssize_t w;

	run(c);
	do
		w = write(c->fds[1], &one, 1);
	while (w < 0 && errno == EINTR);
	unref(c);
	return NULL;
}

static void
answered(evutil_socket_t fd, short what, void *arg)
{
	struct sshcmd *c = arg;
	char one;

	(void)what;
	/* the byte only wakes the loop: its value, or a failed read, changes
	 * nothing (the thread's result is in c) */
	if (read(fd, &one, 1) < 0)
		log_debug("ssh command: reading its wake-up byte: %s", strerror(errno));
	event_free(c->ev);
	c->ev = NULL;
	c->done(c->status, c->status < 0 ? c->error : NULL, c->arg);
	unref(c);
}

struct sshcmd *
sshcmd_start(struct event_base *base, const struct sshcmd_params *p, sshcmd_done done, void *arg)
{
	struct sshcmd *c = calloc(1, sizeof(*c));
	pthread_attr_t at;
	pthread_t th;

	if (c == NULL)
		return NULL;
	if (pipe2(c->fds, O_CLOEXEC) != 0) {
		free(c);
		return NULL;
	}
	pthread_mutex_init(&c->mu, NULL);
	c->refs = 2;
	c->done = done;
	c->arg = arg;
	c->host = np_strdupz(p->host);
	c->user = np_strdupz(p->user);
	c->key = np_strdupz(p->key);
	c->command = np_strdupz(p->command);
	c->port = p->port > 0 ? p->port : 22;
	c->timeout = p->timeout > 0 ? p->timeout : 60;
	c->ev = event_new(base, c->fds[0], EV_READ, answered, c);
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (c->ev == NULL || event_add(c->ev, NULL) != 0 ||
	    pthread_create(&th, &at, thread_main, c) != 0) {
		pthread_attr_destroy(&at);
		if (c->ev != NULL)
			event_free(c->ev);
		c->refs = 1;
		unref(c);
		return NULL;
	}
	pthread_attr_destroy(&at);
	return c;
}

void
sshcmd_cancel(struct sshcmd *c)
{
	if (c == NULL)
		return;
	if (c->ev != NULL) {
		event_free(c->ev);
		c->ev = NULL;
	}
	unref(c);
}
