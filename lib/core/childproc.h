/*
 * Start-up and signal plumbing shared by the processes nodepoold forks
 * (nodepool-launcher, nodepool-web, nodepool-builder): the check of the
 * channel on the fixed fd, the SIGTERM/SIGINT/SIGUSR2 handlers, and the
 * text of a state dump (SIGUSR2 or a DUMP_REQ message).
 */
#ifndef NP_CHILDPROC_H
#define NP_CHILDPROC_H

#include <event2/buffer.h>
#include <event2/event.h>
#include <jansson.h>

#include "ipc.h"

/* Appends a process's state dump, as text, to the buffer. */
typedef void (*childproc_dump_fn)(void *arg, struct evbuffer *out);

/*
 * For "--channel FD": 0 when channel_fd is CHAN_CHILD_FD and a connected
 * socket is there (chan_child_fd); otherwise writes "PROG: --channel: why"
 * to stderr and returns -1 (the caller exits with its permanent code).
 */
int childproc_channel_check(const char *prog, int channel_fd);

/* Applies a config slice (JSON, borrowed): 0, or -1 with err set. */
typedef int (*childproc_apply_fn)(void *arg, const json_t *slice, char *err, size_t errlen);

/*
 * A CONFIG message: parses c->config as JSON ("WHAT: text (line N)" when it
 * is not) and applies it with apply(arg, ...). Fills ack (initialised here
 * as the CONFIG_ACK of c's generation: ok, or the one error) for the caller
 * to send and then ipc_msg_clear. Returns 0 when applied; -1 with the error
 * in err otherwise.
 */
int childproc_config(const struct ipc_config *c, const char *what, childproc_apply_fn apply,
		     void *arg, struct ipc_msg *ack, char *err, size_t errlen);

/*
 * A READY message for the process "name" ("web", "builder", or the
 * worker's provider): our pid and version, the ZooKeeper session id (0
 * when there is none). The caller sends it and then ipc_msg_clear.
 */
void childproc_ready(struct ipc_msg *m, const char *name, int64_t zk_session);

/*
 * The dump as one NUL-terminated string: malloc'd, the caller frees it;
 * NULL when memory runs out.
 */
char *childproc_dump_text(childproc_dump_fn dump, void *arg);

/*
 * Signal events on a process's base: SIGTERM and SIGINT log
 * "signal N: stopping" and call stop(arg); SIGUSR2 logs "state dump:\n"
 * and the dump's text. The struct is the caller's (e.g. on main's stack)
 * and must outlive the events; childproc_signals_clear frees them.
 */
struct childproc_signals {
	struct event *ev[3];
	void (*stop)(void *arg);
	childproc_dump_fn dump;
	void *arg;
};

/* Makes and adds the three events; 0, or -1 when libevent fails (nothing
 * is left added then). */
int childproc_signals_init(struct childproc_signals *s, struct event_base *base,
			   void (*stop)(void *arg), childproc_dump_fn dump, void *arg);

/* Frees the events (before the base goes); a zeroed struct is fine. */
void childproc_signals_clear(struct childproc_signals *s);

/*
 * The host's FQDN, as upstream's socket.getfqdn(): the canonical name of
 * gethostname(), or the plain name when it does not resolve ("localhost"
 * when there is none). Malloc'd, the caller frees it; aborts on no memory.
 */
char *childproc_fqdn(void);

#endif
