/*
 * A message channel: one connected Unix stream socket on a libevent base,
 * carrying IPC frames (protocol/ipc.h) both ways.
 *
 * Incoming bytes go through an ipc_reader; each complete frame is decoded
 * strictly and handed to the message callback, in order. A message the peer
 * may not send (by role: a worker never sends CONFIG, a control client never
 * sends STATUS) is a protocol error like a malformed one. Outgoing messages
 * are encoded into a bounded output queue (chan_send fails with ENOBUFS when
 * it is full, it never grows without limit) and written when the socket is
 * writable, with MSG_NOSIGNAL (no SIGPIPE).
 *
 * Trust follows the role (style rule 6):
 * - internal peers (supervisor <-> worker/builder): a malformed message is
 *   reported to the close callback as CHAN_PROTO_ERROR; the owner decides
 *   (a worker exits, the supervisor kills and restarts the child);
 * - control clients (nodepoolctl, as seen by the supervisor): the socket is
 *   closed at once, then the close callback hears CHAN_PROTO_ERROR so the
 *   owner can free the channel and log.
 *
 * After the close callback a channel is dead: no more reads or callbacks,
 * chan_send fails with EPIPE, queued output is dropped. The owner frees it
 * with chan_free(), which is allowed inside either callback.
 *
 * Process wiring (style rule 1): the supervisor makes the pair with
 * chan_socketpair(); the child, between fork and exec, moves its end to
 * CHAN_CHILD_FD with chan_child_install(); after exec it checks it with
 * chan_child_fd(). No libevent state crosses the fork: each side makes its
 * own event base and channel.
 */
#ifndef NP_CHAN_H
#define NP_CHAN_H

#include <stddef.h>
#include <event2/event.h>

#include "protocol/ipc.h"

/* The fd a worker or builder finds its channel to the supervisor on. */
#define CHAN_CHILD_FD 3
/* Default output queue cap in bytes: room for a few maximum frames. */
#define CHAN_OUT_CAP_DEFAULT (4 * (IPC_FRAME_MAX_DEFAULT + IPC_FRAME_HDR))

struct chan;

enum chan_role {
	CHAN_SUPERVISOR,  /* supervisor's end of a child link: receives worker->supervisor */
	CHAN_CHILD,	  /* a worker's or builder's end (fd 3): receives supervisor->child */
	CHAN_CTL_SERVER,  /* supervisor's end of a control connection (untrusted peer) */
	CHAN_CTL_CLIENT,  /* nodepoolctl's end */
	CHAN_POOL_PARENT, /* nodepool-builder's end of a link to one of its
			     build/upload workers: receives JOB_DONE */
	CHAN_POOL_CHILD	  /* a build/upload worker's end (fd 3): receives JOB */
};

enum chan_event {
	CHAN_EOF,	  /* the peer closed (also in the middle of a frame: why says so) */
	CHAN_IO_ERROR,	  /* read or write failed (ECONNRESET, EPIPE, ...) */
	CHAN_PROTO_ERROR, /* malformed frame or message, or one the peer may not send */
	CHAN_CLOSED	  /* closed by chan_close_after_flush() once the output drained */
};

/*
 * A decoded message. It belongs to the channel and is cleared after the
 * callback returns; to keep it, move it out (copy the struct, then
 * ipc_msg_init(msg, IPC_NONE)). The callback may chan_send and chan_free.
 */
typedef void chan_msg_cb(struct chan *ch, struct ipc_msg *msg, void *arg);
/* The channel died; why is a one-line reason (valid during the call). */
typedef void chan_close_cb(struct chan *ch, enum chan_event ev, const char *why, void *arg);

/*
 * A channel on fd, which it takes over (made non-blocking; closed by
 * chan_free, or at once on a control client's protocol error).
 * max_frame caps a frame body both ways (0 = IPC_FRAME_MAX_DEFAULT); out_cap
 * caps queued output bytes (0 = CHAN_OUT_CAP_DEFAULT; raised to hold at
 * least one maximum frame). Both callbacks are required. NULL with a
 * message in err on failure (fd is then left open, still the caller's).
 */
struct chan *chan_new(struct event_base *base, int fd, enum chan_role role, size_t max_frame,
		      size_t out_cap, chan_msg_cb *on_msg, chan_close_cb *on_close, void *arg,
		      char *err, size_t errlen);
/* Close the fd, drop queued output, free. NULL is a no-op. Safe inside the
 * channel's callbacks (the memory is released when the callback returns). */
void chan_free(struct chan *ch);

/*
 * Queue *m for sending. 0, or -1 with errno and chan_last_error() set:
 * EINVAL   m's type is not one this end may send, or it does not encode
 * EMSGSIZE its encoding is over the frame cap
 * ENOBUFS  the output queue would exceed its cap (nothing queued)
 * EPIPE    the channel is dead or closing
 */
int chan_send(struct chan *ch, const struct ipc_msg *m);

/* Stop reading, send what is queued, then close the fd and report
 * CHAN_CLOSED (from the event loop, never from inside this call). */
void chan_close_after_flush(struct chan *ch);

/* Bytes queued and not yet written. */
size_t chan_pending(const struct chan *ch);
/* The channel's fd, -1 once closed. */
int chan_fd(const struct chan *ch);
/* The role given to chan_new. */
enum chan_role chan_role(const struct chan *ch);
/* The last error text (chan_send's, or the close reason); "" if none. */
const char *chan_last_error(const struct chan *ch);

/* A connected AF_UNIX stream socketpair, both ends close-on-exec. 0/-1 errno. */
int chan_socketpair(int fds[2]);
/*
 * In the child between fork and exec: put fd on CHAN_CHILD_FD, without
 * close-on-exec, and close the original. Only async-signal-safe calls.
 * 0/-1 errno.
 */
int chan_child_install(int fd);
/*
 * After exec, in a worker or builder: CHAN_CHILD_FD if it is a connected
 * AF_UNIX stream socket (then made close-on-exec, so programs the child runs
 * do not inherit it), else -1 with a message saying the program must be
 * started by nodepoold.
 */
int chan_child_fd(char *err, size_t errlen);

#endif
