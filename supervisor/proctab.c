/*
 * The process table: every kind of process nodepoold runs, and the one
 * place that forks (sup_spawn).
 */
#include "supervisor/sup.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/core/chan.h"

/*
 * Providers and the builder restart on any exit nodepoold did not ask for
 * (a worker only exits by itself when something is wrong: its channel
 * broke, a fatal error, a crash), except 100, which says a restart cannot
 * help. The builder gets longer to stop: an upload in flight is worth
 * finishing. The web API (nodepool-web) is a child like them: restarted on
 * any exit but 100, with its own ZooKeeper session, so that no provider's
 * worker (an unavailable driver, a crash loop) takes /node-list, /ready or
 * /metrics with it.
 */
static const struct sup_role sup_roles[IPC_KIND_COUNT] = {
    [IPC_KIND_PROVIDER] =
	{
	    .kind = IPC_KIND_PROVIDER,
	    .role_name = "provider",
	    .program = "nodepool-launcher",
	    .optional = false,
	    .restart = SUP_RESTART_ALWAYS,
	    .stop_grace = 10.0,
	},
    [IPC_KIND_BUILDER] =
	{
	    .kind = IPC_KIND_BUILDER,
	    .role_name = "builder",
	    .program = "nodepool-builder",
	    .optional = true,
	    .restart = SUP_RESTART_ALWAYS,
	    .stop_grace = 30.0,
	},
    [IPC_KIND_WEB] =
	{
	    .kind = IPC_KIND_WEB,
	    .role_name = "web",
	    .program = "nodepool-web",
	    .optional = false,
	    .restart = SUP_RESTART_ALWAYS,
	    .stop_grace = 5.0,
	},
};

const struct sup_role *
sup_role(enum ipc_child_kind kind)
{
	if ((int)kind < 0 || kind >= IPC_KIND_COUNT)
		return NULL;
	return &sup_roles[kind];
}

int
sup_program_path(const struct sup_role *role, const char *bindir, char **path)
{
	if (asprintf(path, "%s/%s", bindir, role->program) < 0)
		abort();
	return access(*path, X_OK);
}

/* argv of a child; the strings are static or owned by the caller. */
static void
build_argv(const struct sup_role *role, char *path, const char *name, bool debug, char **argv)
{
	int n = 0;

	argv[n++] = path;
	if (role->kind == IPC_KIND_PROVIDER) {
		argv[n++] = "-p";
		argv[n++] = (char *)name;
	}
	argv[n++] = "--channel";
	argv[n++] = "3";
	if (debug)
		argv[n++] = "-d";
	argv[n] = NULL;
}

/* In the child, between fork and exec: only async-signal-safe calls. */
static void __attribute__((noreturn))
child_exec(char **argv, int fd, const struct privsep_user *user, bool no_new_privs)
{
	struct sigaction sa;
	sigset_t none;
	int sig, devnull;
	static const char msg[] = "nodepoold: exec of a child failed\n";
	static const char msg_user[] = "nodepoold: cannot drop a child's privileges\n";

	/* Default dispositions (SIGPIPE was ignored, libevent caught others)
	 * and an empty mask: a child starts as from a shell. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	for (sig = 1; sig < NSIG; sig++)
		sigaction(sig, &sa, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (chan_child_install(fd) < 0)
		_exit(127);
	if ((devnull = open("/dev/null", O_RDONLY)) >= 0) {
		dup2(devnull, STDIN_FILENO);
		if (devnull != STDIN_FILENO && devnull != CHAN_CHILD_FD)
			close(devnull);
	}
	/* Nothing else of nodepoold's leaks into a child (everything is
	 * close-on-exec already; this is the belt to those braces). */
	close_range(CHAN_CHILD_FD + 1, ~0U, 0);
	if (privsep_child_drop(user, no_new_privs) < 0) {
		if (write(STDERR_FILENO, msg_user, sizeof(msg_user) - 1) < 0) {
			/* nothing to do */
		}
		_exit(100);
	}
	execv(argv[0], argv);
	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0) {
		/* nothing to do */
	}
	_exit(127);
}

pid_t
sup_spawn(const struct sup_role *role, const char *bindir, const char *name, bool debug,
	  const struct privsep_user *user, int *chan_fd, char *err, size_t errlen)
{
	char *path, *argv[8];
	int fds[2], e;
	sigset_t all, old;
	pid_t pid;

	if (sup_program_path(role, bindir, &path) < 0) {
		snprintf(err, errlen, "cannot execute %s: %s", path, strerror(errno));
		free(path);
		return -1;
	}
	if (chan_socketpair(fds) < 0) {
		snprintf(err, errlen, "socketpair: %s", strerror(errno));
		free(path);
		return -1;
	}
	build_argv(role, path, name, debug, argv);
	/* With every signal blocked, no handler of nodepoold's (libevent's,
	 * writing to its own socketpair) can run in the child before exec. */
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &old);
	pid = fork();
	if (pid == 0)
		child_exec(argv, fds[1], user, role->kind != IPC_KIND_BUILDER);
	e = errno;
	sigprocmask(SIG_SETMASK, &old, NULL);
	free(path);
	close(fds[1]);
	if (pid < 0) {
		close(fds[0]);
		snprintf(err, errlen, "fork: %s", strerror(e));
		return -1;
	}
	*chan_fd = fds[0];
	return pid;
}
