/*
 * The control socket (see ctlsock.h).
 */
#include "lib/ops/ctlsock.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include "lib/core/clock.h"

#define CTLSOCK_BACKLOG 16

static int
fill_addr(struct sockaddr_un *sa, const char *path, char *err, size_t errlen)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (path == NULL || *path == '\0' || strlen(path) >= sizeof(sa->sun_path)) {
		snprintf(err, errlen, "control socket path too long (max %zu bytes): %s",
			 sizeof(sa->sun_path) - 1, path != NULL ? path : "(null)");
		return -1;
	}
	memcpy(sa->sun_path, path, strlen(path) + 1);
	return 0;
}

/* mkdir -p of path's parent, new directories mode 0700; then the parent
 * must be ours: owned by root or by us, and writable by nobody else unless
 * sticky (as /tmp, where nobody else can remove or rename our socket).
 * Another user who could write there could replace the socket with one of
 * their own, and nodepoolctl would send them its requests (issue 23). */
static int
make_parents(const char *path, char *err, size_t errlen)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char *slash;
	struct stat st;

	snprintf(dir, sizeof(dir), "%s", path);
	if ((slash = strrchr(dir, '/')) == NULL || slash == dir)
		return 0;
	*slash = '\0';
	for (char *p = dir + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;

		*p = '\0';
		if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
			snprintf(err, errlen, "cannot create %s for the control socket: %s", dir,
				 strerror(errno));
			return -1;
		}
		*p = c;
		if (c == '\0')
			break;
	}
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s is not a directory", dir);
		return -1;
	}
	if (st.st_uid != 0 && st.st_uid != geteuid()) {
		snprintf(err, errlen,
			 "control socket directory %s is owned by uid %u, not root or uid %u: "
			 "not used",
			 dir, (unsigned)st.st_uid, (unsigned)geteuid());
		return -1;
	}
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0) {
		snprintf(err, errlen,
			 "control socket directory %s is writable by others (mode %03o): not used",
			 dir, (unsigned)(st.st_mode & 0777));
		return -1;
	}
	return 0;
}

int
ctlsock_listen(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sa;
	struct stat st;
	mode_t old;
	int fd, probe, rc, e;

	if (fill_addr(&sa, path, err, errlen) < 0 || make_parents(path, err, errlen) < 0)
		return -1;
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "%s exists and is not a socket; not replacing it",
				 path);
			return -1;
		}
		/* Somebody answering means another nodepoold owns it. */
		if ((probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
			snprintf(err, errlen, "socket: %s", strerror(errno));
			return -1;
		}
		rc = connect(probe, (struct sockaddr *)&sa, sizeof(sa));
		e = errno;
		close(probe);
		if (rc == 0) {
			snprintf(err, errlen,
				 "nodepoold is already running (control socket %s answers)", path);
			return -1;
		}
		if (e != ECONNREFUSED) {
			snprintf(err, errlen, "cannot check the existing control socket %s: %s",
				 path, strerror(e));
			return -1;
		}
		if (unlink(path) < 0 && errno != ENOENT) {
			snprintf(err, errlen, "cannot remove the stale control socket %s: %s", path,
				 strerror(errno));
			return -1;
		}
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	/* The umask makes the socket 0600 from its first moment (no window for
	 * a connect before the chmod); the process is single-threaded here. */
	old = umask(0177);
	rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	e = errno;
	umask(old);
	if (rc < 0) {
		snprintf(err, errlen, "cannot bind the control socket %s: %s", path, strerror(e));
		close(fd);
		return -1;
	}
	if (chmod(path, 0600) < 0 || listen(fd, CTLSOCK_BACKLOG) < 0) {
		snprintf(err, errlen, "control socket %s: %s", path, strerror(errno));
		close(fd);
		unlink(path);
		return -1;
	}
	return fd;
}

/* Tell a refused client why, without ever blocking the daemon on it. */
static void
send_refusal(int fd, uid_t uid)
{
	struct ipc_msg m;
	unsigned char *f;
	size_t flen;
	char msg[160];

	snprintf(msg, sizeof(msg),
		 "permission denied: uid %u may not use nodepoold's control socket (root or uid %u "
		 "only)",
		 (unsigned)uid, (unsigned)geteuid());
	ipc_msg_init(&m, IPC_CTL_RESULT);
	m.u.ctl_result.message = msg;
	if (ipc_frame_encode(&m, 0, &f, &flen, NULL, 0) == 0) {
		if (send(fd, f, flen, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
			/* The client will see the connection closed instead. */
		}
		free(f);
	}
}

int
ctlsock_accept(int lfd, struct ucred *cred, char *err, size_t errlen)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);
	int fd, e;

	if ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) < 0) {
		e = errno;
		if (e != EAGAIN && e != EWOULDBLOCK && e != EINTR)
			snprintf(err, errlen, "accept on the control socket: %s", strerror(e));
		errno = e == EWOULDBLOCK || e == EINTR ? EAGAIN : e;
		return -1;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0) {
		e = errno;
		snprintf(err, errlen, "control client credentials: %s", strerror(e));
		close(fd);
		errno = e;
		return -1;
	}
	if (cred != NULL)
		*cred = uc;
	if (uc.uid != 0 && uc.uid != geteuid()) {
		snprintf(err, errlen, "refused control client pid %ld uid %u (root or uid %u only)",
			 (long)uc.pid, (unsigned)uc.uid, (unsigned)geteuid());
		send_refusal(fd, uc.uid);
		close(fd);
		errno = EPERM;
		return -1;
	}
	return fd;
}

int
ctlsock_connect(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sa;
	int fd, e;

	if (fill_addr(&sa, path, err, errlen) < 0)
		return -1;
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	/* Non-blocking: a daemon that stopped accepting fills its queue, and
	 * then connect fails with EAGAIN instead of hanging. */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return fd;
	e = errno;
	close(fd);
	switch (e) {
	case ENOENT:
	case ENOTDIR:
		snprintf(err, errlen, "nodepoold is not running (no control socket at %s)", path);
		break;
	case ECONNREFUSED:
		snprintf(err, errlen, "nodepoold is not running (stale control socket at %s)",
			 path);
		break;
	case EACCES:
	case EPERM:
		snprintf(
		    err, errlen,
		    "permission denied on control socket %s (run as root or as nodepoold's user)",
		    path);
		break;
	case EAGAIN:
		snprintf(err, errlen, "nodepoold is not answering on %s (connection queue full)",
			 path);
		break;
	default:
		snprintf(err, errlen, "cannot connect to control socket %s: %s", path, strerror(e));
		break;
	}
	errno = e;
	return -1;
}

/* Wait for events on fd until the deadline: 1 ready, 0 timed out, -1 error. */
static int
wait_fd(int fd, short events, long long deadline)
{
	struct pollfd pfd = {.fd = fd, .events = events};
	long long left;
	int r;

	for (;;) {
		left = deadline - np_mono_ms();
		if (left <= 0)
			return 0;
		r = poll(&pfd, 1, left > 60000 ? 60000 : (int)left);
		if (r > 0)
			return 1;
		if (r < 0 && errno != EINTR)
			return -1;
	}
}

int
ctlsock_request(const char *path, const struct ipc_msg *req, struct ipc_msg *reply, int timeout_ms,
		char *err, size_t errlen)
{
	struct ipc_reader *rd = NULL;
	unsigned char *f = NULL, buf[16384];
	const unsigned char *p, *body;
	size_t flen, off = 0, used, blen;
	long long deadline;
	char derr[200];
	ssize_t n;
	int fd, rc = -1, w = 0;

	ipc_msg_init(reply, IPC_NONE);
	if (timeout_ms <= 0)
		timeout_ms = CTLSOCK_TIMEOUT_DEFAULT_MS;
	if (ipc_type_dir(req->type) != IPC_DIR_CTL_REQUEST) {
		snprintf(err, errlen, "%s is not a control request",
			 ipc_type_name(req->type) ? ipc_type_name(req->type) : "message");
		return -1;
	}
	if (ipc_frame_encode(req, 0, &f, &flen, err, errlen) < 0)
		return -1;
	if ((fd = ctlsock_connect(path, err, errlen)) < 0) {
		free(f);
		return -1;
	}
	deadline = np_mono_ms() + timeout_ms;
	if ((rd = ipc_reader_new(0)) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	while (off < flen) {
		n = send(fd, f + off, flen - off, MSG_NOSIGNAL);
		if (n >= 0) {
			off += (size_t)n;
			continue;
		}
		/* A refused client's request may meet a closed socket, with the
		 * refusal already waiting to be read: read it. */
		if (errno == EPIPE || errno == ECONNRESET)
			break;
		if (errno != EAGAIN && errno != EINTR) {
			snprintf(err, errlen, "lost the connection to nodepoold: %s",
				 strerror(errno));
			goto out;
		}
		if ((w = wait_fd(fd, POLLOUT, deadline)) <= 0)
			goto timeout;
	}
	for (;;) {
		n = read(fd, buf, sizeof(buf));
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			if ((w = wait_fd(fd, POLLIN, deadline)) <= 0)
				goto timeout;
			continue;
		}
		if (n < 0) {
			snprintf(err, errlen, "lost the connection to nodepoold: %s",
				 strerror(errno));
			goto out;
		}
		if (n == 0) {
			snprintf(err, errlen, "nodepoold closed the connection without replying");
			goto out;
		}
		p = buf;
		while (n > 0) {
			enum ipc_read_result rr =
			    ipc_reader_feed(rd, p, (size_t)n, &used, derr, sizeof(derr));

			p += used;
			n -= (ssize_t)used;
			if (rr == IPC_READ_ERROR) {
				snprintf(err, errlen, "bad reply from nodepoold: %s", derr);
				goto out;
			}
			if (rr == IPC_READ_MORE)
				break;
			body = ipc_reader_frame(rd, &blen);
			if (ipc_msg_decode(body, blen, reply, derr, sizeof(derr)) < 0) {
				snprintf(err, errlen, "bad reply from nodepoold: %s", derr);
				goto out;
			}
			if (ipc_type_dir(reply->type) != IPC_DIR_CTL_REPLY) {
				snprintf(err, errlen, "bad reply from nodepoold: %s is not a reply",
					 ipc_type_name(reply->type));
				ipc_msg_clear(reply);
				goto out;
			}
			rc = 0;
			goto out;
		}
	}
timeout:
	if (w < 0)
		snprintf(err, errlen, "poll: %s", strerror(errno));
	else
		snprintf(err, errlen,
			 "nodepoold is not answering on %s (no reply within %d.%03d s)", path,
			 timeout_ms / 1000, timeout_ms % 1000);
out:
	ipc_reader_free(rd);
	free(f);
	close(fd);
	return rc;
}
