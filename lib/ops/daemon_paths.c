#include "lib/ops/daemon_paths.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/config/config.h"
#include "lib/core/xalloc.h"

/* The same cap as the loader's. */
#define NP_DAEMON_PATHS_MAX_FILE (16 * 1024 * 1024)

static int
read_file(const char *path, char **buf, size_t *len)
{
	FILE *f = fopen(path, "re");
	size_t cap = 65536, n = 0, r;
	char *b;

	if (f == NULL)
		return -1;
	if ((b = malloc(cap)) == NULL)
		abort();
	while ((r = fread(b + n, 1, cap - n, f)) > 0) {
		n += r;
		if (n == cap) {
			if (cap >= NP_DAEMON_PATHS_MAX_FILE)
				break;
			cap *= 2;
			if ((b = realloc(b, cap)) == NULL)
				abort();
		}
	}
	if (ferror(f)) {
		int e = errno;
		fclose(f);
		free(b);
		errno = e;
		return -1;
	}
	fclose(f);
	*buf = b;
	*len = n;
	return 0;
}

int
np_daemon_paths(const char *config, int must_exist, char **control_socket, char **pid_file,
		char *err, size_t errlen)
{
	const char *sock = NP_DEFAULT_CONTROL_SOCKET, *pid = NP_DEFAULT_PID_FILE;
	struct np_cfg_errors *errs = np_cfg_errors_new();
	struct np_cfg_doc *doc = NULL;
	const struct np_cfg_node *sec;
	char *buf = NULL;
	size_t len = 0;

	if (read_file(config, &buf, &len) < 0) {
		if (errno != ENOENT || must_exist) {
			snprintf(err, errlen, "cannot read %s: %s", config, strerror(errno));
			np_cfg_errors_free(errs);
			return -1;
		}
	} else if ((doc = np_cfg_parse(config, buf, len, errs)) != NULL) {
		sec = np_cfg_get(np_cfg_doc_root(doc), "nodepoold");
		sock = np_cfg_str(sec, "control-socket", sock);
		pid = np_cfg_str(sec, "pid-file", pid);
	}
	if (control_socket != NULL)
		*control_socket = xstrdup(sock);
	if (pid_file != NULL)
		*pid_file = xstrdup(pid);
	np_cfg_doc_free(doc);
	np_cfg_errors_free(errs);
	free(buf);
	return 0;
}
