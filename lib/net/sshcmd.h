/*
 * One command run over SSH on a node, for validation before service
 * (drivers/statemachine: nodepool.yaml(5) `validate-command`): connect,
 * authenticate with a private key file, run the command, wait for its exit
 * status, all within a timeout. No upstream counterpart (Zuul's launcher
 * validates images; Nodepool never did).
 *
 * libssh's blocking API runs in a detached thread of its own, so the
 * event loop never waits; the outcome comes back to the loop through a
 * pipe. libssh is loaded on first use (lib/core/dynlib.h), as nodescan's.
 * The host key is not checked (a node just booted from the image under
 * test, whose keys the keyscan before this has just learnt).
 */
#ifndef NP_SSHCMD_H
#define NP_SSHCMD_H

struct event_base;
struct sshcmd;

struct sshcmd_params {
	const char *host; /* address; required */
	int port;	  /* <= 0: 22 */
	const char *user; /* required */
	const char *key;  /* private key file (OpenSSH or PEM); required */
	const char *command;
	double timeout; /* seconds for everything; <= 0: 60 */
};

/*
 * done(exit_status, error, arg), once, on base's loop: exit_status the
 * command's (0 success), error NULL; or exit_status -1 and a one-line
 * error (connection, authentication, timeout, libssh missing). Strings
 * are copied. NULL only on allocation failure.
 */
typedef void (*sshcmd_done)(int exit_status, const char *error, void *arg);
struct sshcmd *sshcmd_start(struct event_base *base, const struct sshcmd_params *p,
			    sshcmd_done done, void *arg);
/* No callback follows; the thread finishes on its own (within the
 * timeout) and frees what it holds. NULL is a no-op. */
void sshcmd_cancel(struct sshcmd *c);

#endif
