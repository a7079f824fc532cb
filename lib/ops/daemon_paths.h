/*
 * Where nodepoold keeps its pid file and control socket, for the programs
 * that must find them without running the daemon: nodepoold's verbs (stop,
 * status, reload) and nodepoolctl.
 *
 * They come from the `nodepoold:` section of nodepool.yaml (control-socket,
 * pid-file; see config.h) and default to the paths below. Reading them is
 * lenient on purpose: `nodepoold stop` must work while the file on disk has
 * a mistake in another section, so only the YAML is parsed (with the same
 * NODEPOOL_* substitution as the loader), not validated.
 */
#ifndef NP_DAEMON_PATHS_H
#define NP_DAEMON_PATHS_H

#include <stddef.h>

#define NP_DEFAULT_CONFIG	  "/etc/nodepool/nodepool.yaml"
#define NP_DEFAULT_SECURE	  "/etc/nodepool/secure.conf"
#define NP_DEFAULT_CONTROL_SOCKET "/run/nodepoold/nodepoold.sock"
#define NP_DEFAULT_PID_FILE	  "/run/nodepoold/nodepoold.pid"

/*
 * Read control-socket and pid-file from config's nodepoold: section into
 * malloc'd *control_socket and *pid_file (either pointer may be NULL: not
 * wanted). A file that does not parse as YAML, or has no such keys, gives
 * the defaults. A file that cannot be read gives the defaults when it does
 * not exist and must_exist is 0; otherwise -1 with "cannot read PATH:
 * <strerror>" in err. 0 on success.
 */
int np_daemon_paths(const char *config, int must_exist, char **control_socket, char **pid_file,
		    char *err, size_t errlen);

#endif
