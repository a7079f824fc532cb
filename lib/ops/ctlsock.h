/*
 * The control socket between nodepoolctl and nodepoold: a Unix stream socket
 * at a path (nodepoold's -s option / config), mode 0600, and a peer
 * credential check (SO_PEERCRED) on every connection: only root and the
 * daemon's own uid are served, as OpenBSD's relayd/bgpd control sockets.
 * Messages are the IPC catalogue's CTL_* (protocol/ipc_types.h), one request
 * and one reply per connection.
 *
 * Error strings nodepoolctl prints (keep nodepoolctl.8 in step):
 *   nodepoold is not running (no control socket at PATH)
 *   nodepoold is not running (stale control socket at PATH)
 *   permission denied on control socket PATH (run as root or as nodepoold's user)
 *   nodepoold is not answering on PATH (connection queue full)
 *   nodepoold is not answering on PATH (no reply within N.NNN s)
 *   nodepoold closed the connection without replying
 *   control socket path too long (max 107 bytes): PATH
 *   cannot connect to control socket PATH: <strerror>
 *   bad reply from nodepoold: <decoder message>
 *   lost the connection to nodepoold: <strerror>
 * A client refused by the credential check gets a CTL_RESULT with ok false
 * and the message "permission denied: uid U may not use nodepoold's control
 * socket (root or uid D only)".
 */
#ifndef NP_CTLSOCK_H
#define NP_CTLSOCK_H

#include <stddef.h>
#include <sys/socket.h>

#include "protocol/ipc.h"

/* ctlsock_request's timeout when given 0, in milliseconds. */
#define CTLSOCK_TIMEOUT_DEFAULT_MS 10000

/*
 * Listen on path: missing parent directories are created with mode 0700
 * (existing ones are left as they are); the parent must be owned by root or
 * our uid and writable by no one else unless sticky, or it is refused
 * ("control socket directory DIR is owned by uid U, ..." / "... is writable
 * by others (mode M): not used"); the socket is made with mode 0600.
 * A stale socket (nothing accepting on it) is replaced; a live one means
 * another nodepoold runs: error. A non-socket at path is never removed.
 * Returns the listening fd (non-blocking, close-on-exec), or -1 with a
 * message in err. The caller unlinks path when it stops.
 */
int ctlsock_listen(const char *path, char *err, size_t errlen);

/*
 * Accept one connection on a listening fd. Returns the connection's fd
 * (non-blocking, close-on-exec; hand it to chan_new with CHAN_CTL_SERVER)
 * if the peer is root or has the daemon's effective uid; *cred (may be
 * NULL) gets the peer's pid/uid/gid. Otherwise -1 with errno:
 *   EAGAIN  nothing to accept (err untouched)
 *   EPERM   the peer was refused: it was sent a CTL_RESULT saying so (best
 *           effort, never blocking) and closed; err names its pid and uid
 *   other   accept or getsockopt failed; err says which
 */
int ctlsock_accept(int lfd, struct ucred *cred, char *err, size_t errlen);

/*
 * nodepoolctl's side: connect to path. The connected fd (non-blocking,
 * close-on-exec), or -1 with one of the messages listed above in err.
 */
int ctlsock_connect(const char *path, char *err, size_t errlen);

/*
 * One round trip for nodepoolctl, blocking: connect, send *req (a CTL_*
 * request), wait at most timeout_ms (0 = CTLSOCK_TIMEOUT_DEFAULT_MS) for
 * one reply, decode it strictly into *reply (init'd here; the caller clears
 * it), close. A reply that is not a CTL_* reply is an error. 0, or -1 with
 * a message from the list above in err.
 */
int ctlsock_request(const char *path, const struct ipc_msg *req, struct ipc_msg *reply,
		    int timeout_ms, char *err, size_t errlen);

#endif
