/*
 * What the processes nodepoold forks (nodepool-launcher, nodepool-web,
 * nodepool-builder) share: the check of the channel on the fixed fd, the
 * child's side of that channel (childproc_link: one dispatcher for
 * nodepoold's messages), the CONFIG_ACK, READY and STATUS messages they
 * send, the SIGTERM/SIGINT/SIGUSR2 handlers, and the text of a state dump
 * (SIGUSR2 or a DUMP_REQ message).
 */
#ifndef NP_CHILDPROC_H
#define NP_CHILDPROC_H

#include <event2/buffer.h>
#include <event2/event.h>
#include <jansson.h>

#include "protocol/ipc.h"

struct chan;

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
 * A STATUS message's common part, for the reply to STATUS_REQ seq: the
 * seq, the generation of the config in force, the resident set
 * (np_mem_rss_kb) and proportional set (np_mem_pss_kb), the CPU time used and the seconds since
 * start (a np_mono_s() reading). The caller sets state, zk_state and its own counters, sends it and
 * then ipc_msg_clear.
 */
void childproc_status_init(struct ipc_msg *m, int64_t seq, int64_t generation, double start);

/* ---- the child's side of the channel to nodepoold --------------------------------- */

/*
 * What a process does with nodepoold's messages; arg is the process's own
 * struct. The contract, the same for every process:
 * - CONFIG: config(arg, c). The callee applies it and sends CONFIG_ACK
 *   (childproc_config helps) with childproc_link_send.
 * - STATUS_REQ: status(arg, seq). The callee sends a STATUS
 *   (childproc_status_init fills the common part).
 * - DUMP_REQ: answered here, DUMP_REPLY with dump(arg, ...)'s text.
 * - METRICS (only nodepool-web is sent them): metrics(arg, m) when it is
 *   set; ignored otherwise.
 * - STOP: logs "stop requested by nodepoold", then stop(arg).
 * - any other message (one a newer nodepoold sends): ignored.
 * - the channel dies (nodepoold went, an I/O error, or a malformed or
 *   forbidden message: CHAN_PROTO_ERROR): logs "channel to nodepoold
 *   closed (why): stopping", frees the channel (later sends are no-ops),
 *   sets *exit_code to 1 after a protocol error when it is still 0 (the
 *   process had no reason of its own), then stop(arg) (style rule 3: a
 *   child exits when its supervisor goes).
 * The callbacks may call childproc_link_send; none may free the link.
 */
struct childproc_ops {
	void (*config)(void *arg, const struct ipc_config *c);
	void (*status)(void *arg, int64_t seq);
	void (*metrics)(void *arg, const struct ipc_metrics *m); /* or NULL */
	childproc_dump_fn dump;
	void (*stop)(void *arg);
};

struct childproc_link;

/*
 * The link on fd (CHAN_CHILD_FD, checked by childproc_channel_check), which
 * it takes over: a CHAN_CHILD channel on base. ops is borrowed (a static
 * const table) and must have every slot but metrics; exit_code is the
 * process's exit code (borrowed, outlives the link). NULL with a message in
 * err when the channel cannot be made (the fd is then still the caller's).
 */
struct childproc_link *childproc_link_new(struct event_base *base, int fd,
					  const struct childproc_ops *ops, void *arg,
					  int *exit_code, char *err, size_t errlen);

/*
 * Sends m to nodepoold: a failure (a full queue, a dead channel) is logged
 * as "channel: why", since the process carries on and nodepoold sees the
 * silence. A NULL link (a process started on its own) or a closed one: a
 * no-op. m stays the caller's.
 */
void childproc_link_send(struct childproc_link *l, const struct ipc_msg *m);

/* 1 while the channel is up (a READY is worth sending), 0 once it closed
 * or for a NULL link. */
int childproc_link_up(const struct childproc_link *l);

/* Closes the channel (if still open) and frees. NULL is a no-op. */
void childproc_link_free(struct childproc_link *l);

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
