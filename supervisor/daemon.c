/*
 * What an init script needs: a pid file, detaching with a readiness
 * handshake, and telling whether a pid is a live nodepoold.
 */
#include "supervisor/sup.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The write end of the readiness pipe in a daemon still starting. */
static int sup_ready_fd = -1;

/* Readiness messages: one byte, then text for the parent to print. */
#define READY_OK      'R'
#define READY_ALREADY 'A'
#define READY_FAIL    'E'

pid_t
sup_pidfile_parse(const char *text, size_t len)
{
	long long v = 0;
	size_t i = 0;

	if (len == 0 || text[0] < '1' || text[0] > '9')
		return -1;
	for (; i < len && text[i] >= '0' && text[i] <= '9'; i++) {
		v = v * 10 + (text[i] - '0');
		if (v > INT_MAX)
			return -1;
	}
	if (i < len && text[i] == '\n')
		i++;
	return i == len ? (pid_t)v : -1;
}

pid_t
sup_pidfile_read(const char *path, char *err, size_t errlen)
{
	char buf[32];
	ssize_t n;
	int fd;
	pid_t pid;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errlen, "cannot read the pid file %s: %s", path, strerror(errno));
		return -1;
	}
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < 0) {
		snprintf(err, errlen, "cannot read the pid file %s: %s", path, strerror(errno));
		return -1;
	}
	if (n == 0)
		return 0; /* being written (or left empty by a crash): no pid */
	if ((pid = sup_pidfile_parse(buf, (size_t)n)) < 0) {
		snprintf(err, errlen, "the pid file %s does not hold a pid", path);
		return -1;
	}
	return pid;
}

static int
make_dirs(const char *path, mode_t mode)
{
	char dir[PATH_MAX], *p;

	if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if ((p = strrchr(dir, '/')) == NULL || p == dir)
		return 0;
	*p = '\0';
	for (p = dir + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(dir, mode) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(dir, mode) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

int
sup_pidfile_write(const char *path, pid_t pid, char *err, size_t errlen)
{
	char tmp[PATH_MAX], buf[32];
	int fd, n;

	if (make_dirs(path, 0755) < 0) {
		snprintf(err, errlen, "cannot create the directory of the pid file %s: %s", path,
			 strerror(errno));
		return -1;
	}
	if (snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", path, (long)pid) >= (int)sizeof(tmp)) {
		snprintf(err, errlen, "pid file path too long: %s", path);
		return -1;
	}
	n = snprintf(buf, sizeof(buf), "%ld\n", (long)pid);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
		snprintf(err, errlen, "cannot write the pid file %s: %s", tmp, strerror(errno));
		return -1;
	}
	if (write(fd, buf, (size_t)n) != n || fsync(fd) < 0 || close(fd) < 0) {
		snprintf(err, errlen, "cannot write the pid file %s: %s", tmp, strerror(errno));
		close(fd);
		unlink(tmp);
		return -1;
	}
	if (rename(tmp, path) < 0) {
		snprintf(err, errlen, "cannot write the pid file %s: %s", path, strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}

void
sup_pidfile_remove(const char *path, pid_t pid)
{
	char err[256];

	if (sup_pidfile_read(path, err, sizeof(err)) == pid)
		unlink(path);
}

bool
sup_pid_alive(pid_t pid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	if (pid <= 0 || (kill(pid, 0) < 0 && errno != EPERM))
		return false;
	/* A zombie is gone for our purposes: whoever reaps it may never do
	 * (a container's pid 1). */
	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n > 0) {
			buf[n] = '\0';
			if ((p = strrchr(buf, ')')) != NULL && p[1] == ' ' &&
			    (p[2] == 'Z' || p[2] == 'X'))
				return false;
		}
	}
	/* A pid reused by another program after a crash. */
	snprintf(path, sizeof(path), "/proc/%ld/comm", (long)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n > 0) {
			buf[n] = '\0';
			buf[strcspn(buf, "\n")] = '\0';
			if (strcmp(buf, "nodepoold") != 0)
				return false;
		}
	}
	return true;
}

void
sup_daemonize(void)
{
	char buf[4096];
	size_t got = 0;
	ssize_t n;
	int p[2], st;
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	if (pipe2(p, O_CLOEXEC) < 0) {
		fprintf(stderr, "nodepoold: pipe: %s\n", strerror(errno));
		exit(1);
	}
	if ((pid = fork()) < 0) {
		fprintf(stderr, "nodepoold: fork: %s\n", strerror(errno));
		exit(1);
	}
	if (pid > 0) {
		/* The caller (an init script): wait for the verdict. */
		close(p[1]);
		while (got < sizeof(buf) - 1) {
			n = read(p[0], buf + got, sizeof(buf) - 1 - got);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			got += (size_t)n;
		}
		buf[got] = '\0';
		waitpid(pid, &st, 0);
		if (got > 0 && buf[0] == READY_OK)
			exit(0);
		if (got > 0 && buf[0] == READY_ALREADY) {
			printf("%s\n", buf + 1);
			exit(0);
		}
		if (got > 0 && buf[0] == READY_FAIL)
			fprintf(stderr, "nodepoold: %s\n", buf + 1);
		else
			fprintf(stderr, "nodepoold: exited while starting (see its log)\n");
		exit(1);
	}
	close(p[0]);
	if (setsid() < 0)
		_exit(1);
	if ((pid = fork()) < 0)
		_exit(1);
	if (pid > 0)
		_exit(0); /* the session leader goes: the daemon can never get a tty */
	if (chdir("/") < 0)
		_exit(1);
	sup_ready_fd = p[1];
}

static void
notify(char kind, const char *msg)
{
	char buf[4096];
	int n;

	if (sup_ready_fd < 0)
		return;
	n = snprintf(buf, sizeof(buf), "%c%s", kind, msg ? msg : "");
	if (n >= (int)sizeof(buf))
		n = sizeof(buf) - 1;
	if (write(sup_ready_fd, buf, (size_t)n) < 0) {
		/* the parent is gone: nobody to tell */
	}
	close(sup_ready_fd);
	sup_ready_fd = -1;
}

void
sup_daemon_ready(void)
{
	struct stat st;
	int fd;

	if (sup_ready_fd < 0)
		return;
	if ((fd = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0) {
		dup2(fd, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO);
		/* An init script appends stderr to a log file: keep that. A
		 * terminal or a pipe would hold the caller; let go of them. */
		if (fstat(STDERR_FILENO, &st) < 0 || !S_ISREG(st.st_mode))
			dup2(fd, STDERR_FILENO);
		if (fd > STDERR_FILENO)
			close(fd);
	}
	notify(READY_OK, NULL);
}

void
sup_daemon_failed(const char *msg, bool already_running)
{
	notify(already_running ? READY_ALREADY : READY_FAIL, msg);
}
