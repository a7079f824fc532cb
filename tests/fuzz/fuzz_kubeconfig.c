/*
 * Fuzz the kubernetes drivers' kubeconfig reader (drivers/kubernetes/
 * kubeconfig.c): the input is a kubeconfig file (KUBECONFIG names it),
 * resolved for the current context and for a fixed context name, and fed
 * to the base64 decoder as is. Any input must give a connection or a
 * one-line error, never a crash. Relative file names in the input are
 * resolved under /nonexistent, so nothing outside is read.
 * Seeds: tests/fuzz/corpus/kubeconfig/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "drivers/kubernetes/kubeconfig.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static char path[64];
	struct k8s_conn c;
	char err[512], *s, *d;

	if (fd < 0) {
		fd = memfd_create("kubeconfig", 0);
		if (fd < 0)
			abort();
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		setenv("KUBECONFIG", path, 1);
		setenv("HOME", "/nonexistent", 1);
		unsetenv("KUBERNETES_SERVICE_HOST");
		setenv("NODEPOOLD_K8S_SA_DIR", "/nonexistent", 1);
	}
	if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
		abort();
	if (k8s_conn_load(NULL, &c, err, sizeof(err)) == 0) {
		if (c.server == NULL || c.context == NULL)
			abort();
		k8s_conn_clear(&c);
	}
	if (k8s_conn_load("sim", &c, err, sizeof(err)) == 0)
		k8s_conn_clear(&c);
	s = malloc(size + 1);
	if (s == NULL)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	d = k8s_b64decode(s, NULL);
	free(d);
	free(s);
	return 0;
}
