/*
 * Message channels (see chan.h). Raw libevent events rather than a
 * bufferevent: reads go straight into the ipc_reader, so the frame cap is
 * enforced on the header before anything is buffered, and writes use
 * sendmsg(MSG_NOSIGNAL) over the output evbuffer's chunks.
 */
#include "lib/core/chan.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <event2/buffer.h>

/* Bytes read per readable event: a flooding peer yields to others. */
#define CHAN_READ_CHUNK 32768
/* Output chunks handed to one sendmsg. */
#define CHAN_IOV_MAX 16

struct chan {
	struct event_base *base;
	int fd;
	enum chan_role role;
	enum ipc_dir recv_dir, send_dir;
	bool control; /* the peer is an untrusted control client */
	size_t max_frame, out_cap;
	struct ipc_reader *rd;
	struct evbuffer *out;
	struct event *rev, *wev;
	chan_msg_cb *on_msg;
	chan_close_cb *on_close;
	void *arg;
	int in_cb;    /* > 0 while one of our event handlers runs */
	bool dead;    /* close reported (or being reported) */
	bool closing; /* chan_close_after_flush: finish once drained */
	bool freed;   /* chan_free called inside a handler */
	char err[256];
};

static const char *
role_peer(enum chan_role role)
{
	switch (role) {
	case CHAN_SUPERVISOR:
		return "a worker";
	case CHAN_CHILD:
		return "the supervisor";
	case CHAN_CTL_SERVER:
		return "a control client";
	case CHAN_CTL_CLIENT:
		return "nodepoold";
	case CHAN_POOL_PARENT:
		return "a builder worker";
	case CHAN_POOL_CHILD:
		return "the builder";
	}
	return "the peer";
}

static void
set_err(struct chan *ch, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ch->err, sizeof(ch->err), fmt, ap);
	va_end(ap);
}

static void
close_fd(struct chan *ch)
{
	if (ch->rev != NULL)
		event_del(ch->rev);
	if (ch->wev != NULL)
		event_del(ch->wev);
	if (ch->fd >= 0) {
		close(ch->fd);
		ch->fd = -1;
	}
}

static void
destroy(struct chan *ch)
{
	close_fd(ch);
	if (ch->rev != NULL)
		event_free(ch->rev);
	if (ch->wev != NULL)
		event_free(ch->wev);
	if (ch->out != NULL)
		evbuffer_free(ch->out);
	ipc_reader_free(ch->rd);
	free(ch);
}

void
chan_free(struct chan *ch)
{
	if (ch == NULL)
		return;
	if (ch->in_cb > 0) {
		/* Inside our own handler: it frees on its way out. */
		ch->freed = true;
		ch->dead = true;
		close_fd(ch);
		return;
	}
	destroy(ch);
}

/*
 * Report the end of the channel once. Call with in_cb held. The reason is
 * kept in ch->err (copied first: why may point into it).
 */
static void
chan_die(struct chan *ch, enum chan_event ev, const char *why)
{
	if (ch->dead)
		return;
	ch->dead = true;
	if (why != ch->err)
		snprintf(ch->err, sizeof(ch->err), "%s", why);
	event_del(ch->rev);
	event_del(ch->wev);
	evbuffer_drain(ch->out, evbuffer_get_length(ch->out));
	/* An untrusted client is simply disconnected; an internal peer's fd
	 * stays until chan_free, the owner decides what to do about it. */
	if ((ev == CHAN_PROTO_ERROR && ch->control) || ev == CHAN_CLOSED)
		close_fd(ch);
	ch->on_close(ch, ev, ch->err, ch->arg);
}

/* Leave a handler: release the channel if chan_free was called inside.
 * Returns true if it is gone. */
static bool
leave(struct chan *ch)
{
	if (--ch->in_cb == 0 && ch->freed) {
		destroy(ch);
		return true;
	}
	return false;
}

/* Decode and dispatch one complete frame. */
static void
dispatch(struct chan *ch, const unsigned char *body, size_t len)
{
	struct ipc_msg m;
	char err[200];

	if (ipc_msg_decode(body, len, &m, err, sizeof(err)) < 0) {
		set_err(ch, "bad message from %s: %s", role_peer(ch->role), err);
		chan_die(ch, CHAN_PROTO_ERROR, ch->err);
		return;
	}
	if (ipc_type_dir(m.type) != ch->recv_dir) {
		set_err(ch, "%s may not be sent by %s", ipc_type_name(m.type), role_peer(ch->role));
		ipc_msg_clear(&m);
		chan_die(ch, CHAN_PROTO_ERROR, ch->err);
		return;
	}
	ch->on_msg(ch, &m, ch->arg);
	ipc_msg_clear(&m);
}

static void
on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct chan *ch = arg;
	unsigned char buf[CHAN_READ_CHUNK];
	const unsigned char *p = buf, *body;
	char err[200];
	size_t used, blen;
	ssize_t n;

	n = read(fd, buf, sizeof(buf));
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	ch->in_cb++;
	if (n < 0) {
		set_err(ch, "read from %s: %s", role_peer(ch->role), strerror(errno));
		chan_die(ch, CHAN_IO_ERROR, ch->err);
	} else if (n == 0) {
		if (ipc_reader_pending(ch->rd) > 0)
			set_err(ch, "%s closed the connection in the middle of a frame",
				role_peer(ch->role));
		else
			set_err(ch, "%s closed the connection", role_peer(ch->role));
		chan_die(ch, CHAN_EOF, ch->err);
	}
	/* Once closing (a reply is on its way) further requests are ignored. */
	while (n > 0 && !ch->dead && !ch->closing) {
		enum ipc_read_result rr =
		    ipc_reader_feed(ch->rd, p, (size_t)n, &used, err, sizeof(err));

		p += used;
		n -= (ssize_t)used;
		if (rr == IPC_READ_ERROR) {
			set_err(ch, "bad frame from %s: %s", role_peer(ch->role), err);
			chan_die(ch, CHAN_PROTO_ERROR, ch->err);
		} else if (rr == IPC_READ_FRAME) {
			body = ipc_reader_frame(ch->rd, &blen);
			dispatch(ch, body, blen);
		} else {
			break;
		}
	}
	leave(ch);
}

static void
on_writable(evutil_socket_t fd, short what, void *arg)
{
	struct chan *ch = arg;
	struct evbuffer_iovec ev[CHAN_IOV_MAX];
	struct iovec iov[CHAN_IOV_MAX];
	struct msghdr mh;
	ssize_t w;
	int n;

	ch->in_cb++;
	n = evbuffer_peek(ch->out, -1, NULL, ev, CHAN_IOV_MAX);
	if (n > CHAN_IOV_MAX)
		n = CHAN_IOV_MAX;
	if (n > 0) {
		for (int i = 0; i < n; i++) {
			iov[i].iov_base = ev[i].iov_base;
			iov[i].iov_len = ev[i].iov_len;
		}
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = iov;
		mh.msg_iovlen = (size_t)n;
		w = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
				set_err(ch, "write to %s: %s", role_peer(ch->role),
					strerror(errno));
				chan_die(ch, CHAN_IO_ERROR, ch->err);
			}
			leave(ch);
			return;
		}
		evbuffer_drain(ch->out, (size_t)w);
	}
	if (!ch->dead && evbuffer_get_length(ch->out) == 0) {
		event_del(ch->wev);
		if (ch->closing) {
			set_err(ch, "closed after the last reply");
			chan_die(ch, CHAN_CLOSED, ch->err);
		}
	}
	leave(ch);
}

struct chan *
chan_new(struct event_base *base, int fd, enum chan_role role, size_t max_frame, size_t out_cap,
	 chan_msg_cb *on_msg, chan_close_cb *on_close, void *arg, char *err, size_t errlen)
{
	struct chan *ch;
	int fl;

	if (base == NULL || fd < 0 || on_msg == NULL || on_close == NULL) {
		snprintf(err, errlen, "chan_new: bad arguments");
		return NULL;
	}
	if ((fl = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		snprintf(err, errlen, "fd %d: %s", fd, strerror(errno));
		return NULL;
	}
	if ((ch = calloc(1, sizeof(*ch))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	ch->base = base;
	ch->fd = fd;
	ch->role = role;
	switch (role) {
	case CHAN_SUPERVISOR:
		ch->recv_dir = IPC_DIR_CHILD_TO_SUP;
		ch->send_dir = IPC_DIR_SUP_TO_CHILD;
		break;
	case CHAN_CHILD:
		ch->recv_dir = IPC_DIR_SUP_TO_CHILD;
		ch->send_dir = IPC_DIR_CHILD_TO_SUP;
		break;
	case CHAN_CTL_SERVER:
		ch->recv_dir = IPC_DIR_CTL_REQUEST;
		ch->send_dir = IPC_DIR_CTL_REPLY;
		ch->control = true;
		break;
	case CHAN_CTL_CLIENT:
		ch->recv_dir = IPC_DIR_CTL_REPLY;
		ch->send_dir = IPC_DIR_CTL_REQUEST;
		break;
	case CHAN_POOL_PARENT:
		ch->recv_dir = IPC_DIR_POOL_TO_BUILDER;
		ch->send_dir = IPC_DIR_BUILDER_TO_POOL;
		break;
	case CHAN_POOL_CHILD:
		ch->recv_dir = IPC_DIR_BUILDER_TO_POOL;
		ch->send_dir = IPC_DIR_POOL_TO_BUILDER;
		break;
	}
	ch->max_frame = max_frame == 0 ? IPC_FRAME_MAX_DEFAULT : max_frame;
	ch->out_cap = out_cap == 0 ? CHAN_OUT_CAP_DEFAULT : out_cap;
	if (ch->out_cap < ch->max_frame + IPC_FRAME_HDR)
		ch->out_cap = ch->max_frame + IPC_FRAME_HDR;
	ch->on_msg = on_msg;
	ch->on_close = on_close;
	ch->arg = arg;
	ch->rd = ipc_reader_new(ch->max_frame);
	ch->out = evbuffer_new();
	ch->rev = event_new(base, fd, EV_READ | EV_PERSIST, on_readable, ch);
	ch->wev = event_new(base, fd, EV_WRITE | EV_PERSIST, on_writable, ch);
	if (ch->rd == NULL || ch->out == NULL || ch->rev == NULL || ch->wev == NULL ||
	    event_add(ch->rev, NULL) < 0) {
		snprintf(err, errlen, "out of memory");
		ch->fd = -1; /* still the caller's */
		destroy(ch);
		return NULL;
	}
	return ch;
}

static void
free_frame(const void *data, size_t len, void *arg)
{
	free((void *)(uintptr_t)data);
}

int
chan_send(struct chan *ch, const struct ipc_msg *m)
{
	unsigned char *f;
	size_t flen;
	char err[200];

	if (ch->dead || ch->closing) {
		set_err(ch, "channel to %s is closed", role_peer(ch->role));
		errno = EPIPE;
		return -1;
	}
	if (ipc_type_dir(m->type) != ch->send_dir) {
		set_err(ch, "%s may not be sent to %s",
			ipc_type_name(m->type) ? ipc_type_name(m->type) : "an untyped message",
			role_peer(ch->role));
		errno = EINVAL;
		return -1;
	}
	/* Encode with no cap first, to tell "too big" from "invalid". */
	if (ipc_frame_encode(m, SIZE_MAX, &f, &flen, err, sizeof(err)) < 0) {
		set_err(ch, "%s", err);
		errno = EINVAL;
		return -1;
	}
	if (flen - IPC_FRAME_HDR > ch->max_frame) {
		set_err(ch, "%s of %zu bytes exceeds the %zu-byte frame limit",
			ipc_type_name(m->type), flen - IPC_FRAME_HDR, ch->max_frame);
		free(f);
		errno = EMSGSIZE;
		return -1;
	}
	if (evbuffer_get_length(ch->out) + flen > ch->out_cap) {
		set_err(ch, "output queue to %s full (%zu bytes queued, cap %zu)",
			role_peer(ch->role), evbuffer_get_length(ch->out), ch->out_cap);
		free(f);
		errno = ENOBUFS;
		return -1;
	}
	if (evbuffer_add_reference(ch->out, f, flen, free_frame, NULL) < 0) {
		free(f);
		set_err(ch, "out of memory");
		errno = ENOMEM;
		return -1;
	}
	if (event_add(ch->wev, NULL) < 0) {
		set_err(ch, "event_add failed");
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

void
chan_close_after_flush(struct chan *ch)
{
	if (ch->dead || ch->closing)
		return;
	ch->closing = true;
	event_del(ch->rev);
	/* A socket with room is writable at once: on_writable finishes the
	 * close from the loop even when nothing is queued. */
	event_add(ch->wev, NULL);
}

size_t
chan_pending(const struct chan *ch)
{
	return evbuffer_get_length(ch->out);
}

int
chan_fd(const struct chan *ch)
{
	return ch->fd;
}

enum chan_role
chan_role(const struct chan *ch)
{
	return ch->role;
}

const char *
chan_last_error(const struct chan *ch)
{
	return ch->err;
}

int
chan_socketpair(int fds[2])
{
	return socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds);
}

int
chan_child_install(int fd)
{
	int fl;

	if (fd == CHAN_CHILD_FD) {
		if ((fl = fcntl(fd, F_GETFD)) < 0)
			return -1;
		return fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC);
	}
	/* dup2 gives the new fd without FD_CLOEXEC. */
	if (dup2(fd, CHAN_CHILD_FD) < 0)
		return -1;
	close(fd);
	return 0;
}

int
chan_child_fd(char *err, size_t errlen)
{
	struct stat st;
	int type = 0, domain = 0, fl;
	socklen_t sl = sizeof(int), dl = sizeof(int);

	if (fstat(CHAN_CHILD_FD, &st) < 0 || !S_ISSOCK(st.st_mode) ||
	    getsockopt(CHAN_CHILD_FD, SOL_SOCKET, SO_TYPE, &type, &sl) < 0 ||
	    getsockopt(CHAN_CHILD_FD, SOL_SOCKET, SO_DOMAIN, &domain, &dl) < 0 ||
	    type != SOCK_STREAM || domain != AF_UNIX) {
		snprintf(
		    err, errlen,
		    "fd %d is not a channel to nodepoold (this program is started by nodepoold)",
		    CHAN_CHILD_FD);
		return -1;
	}
	if ((fl = fcntl(CHAN_CHILD_FD, F_GETFD)) < 0 ||
	    fcntl(CHAN_CHILD_FD, F_SETFD, fl | FD_CLOEXEC) < 0) {
		snprintf(err, errlen, "fd %d: %s", CHAN_CHILD_FD, strerror(errno));
		return -1;
	}
	return CHAN_CHILD_FD;
}
