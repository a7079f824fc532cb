/*
 * libFuzzer target: statsd keys carry names from outside (providers,
 * labels, tenants, AZs from node records in ZooKeeper, cloud-reported
 * AZs), normalized by statsd_normalize as upstream's normalize_statsd_name
 * and sent by the statsd client. The input is a name. Properties: no crash;
 * the normalized name fits its buffer, holds no '.' or ':' and is the input
 * otherwise; every datagram the client sends (read back from a loopback
 * socket) is lines of exactly "name:value|type", whatever the name held:
 * no name can add a metric or change a value.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/ops/statsd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int rx = -1;
static struct statsd *sd;

static void
setup(void)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	char port[16], err[256];

	rx = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (rx < 0 || bind(rx, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockname(rx, (struct sockaddr *)&sa, &sl) < 0)
		abort();
	snprintf(port, sizeof(port), "%d", ntohs(sa.sin_port));
	sd = statsd_new("127.0.0.1", port, err, sizeof(err));
	if (sd == NULL)
		abort();
}

/* "name:value|type", the name free of the format's characters. */
static void
check_line(const char *l, size_t n)
{
	size_t name = strcspn(l, ":|@ \t\r\n");
	const char *v, *bar;

	if (name == 0 || name >= n || l[name] != ':')
		abort();
	v = l + name + 1;
	bar = memchr(v, '|', n - name - 1);
	if (bar == NULL || bar == v || strspn(v, "-+0123456789.e") != (size_t)(bar - v))
		abort();
	if (!((l + n - bar == 2 && (bar[1] == 'g' || bar[1] == 'c')) ||
	      (l + n - bar == 3 && bar[1] == 'm' && bar[2] == 's')))
		abort();
}

static void
check_datagrams(void)
{
	char buf[2048];
	ssize_t r;

	while ((r = recv(rx, buf, sizeof(buf) - 1, 0)) > 0) {
		const char *p = buf, *end = buf + r, *nl;
		buf[r] = '\0';
		while (p < end) {
			nl = memchr(p, '\n', (size_t)(end - p));
			check_line(p, nl ? (size_t)(nl - p) : (size_t)(end - p));
			if (nl == NULL)
				break;
			p = nl + 1;
		}
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *name, buf[64], *out, key[200];
	size_t i, n;

	if (sd == NULL)
		setup();
	if ((name = malloc(size + 1)) == NULL)
		return 0;
	memcpy(name, data, size);
	name[size] = '\0';
	n = strlen(name);
	memset(buf, 'Z', sizeof(buf));
	out = statsd_normalize(name, buf, sizeof(buf));
	if (out == NULL || memchr(buf, '\0', sizeof(buf)) == NULL)
		abort();
	if (strchr(out, '.') != NULL || strchr(out, ':') != NULL)
		abort();
	for (i = 0; i < n && out[i] != '\0'; i++)
		if (out[i] != name[i] && !(out[i] == '_' && (name[i] == '.' || name[i] == ':')))
			abort();
	snprintf(key, sizeof(key), "nodepool.label.%s.nodes.ready", out);
	statsd_gauge(sd, key, 1);
	if (n > 0) { /* the client is never asked for an empty key */
		statsd_incr(sd, name, 1);
		statsd_timing(sd, name, 2.5);
	}
	statsd_flush(sd);
	check_datagrams();
	free(name);
	return 0;
}
