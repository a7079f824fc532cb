/*
 * statsd client (the reporter is statsd_reporter.c). See statsd.h.
 */
#include "lib/ops/statsd.h"

#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <event2/event.h>

#include "lib/core/log.h"

#define STATSD_MAX_DATAGRAM 512 /* as the Python client's maxudpsize */

struct statsd {
	int fd;
	struct sockaddr_storage addr;
	socklen_t addrlen;
	char buf[STATSD_MAX_DATAGRAM];
	size_t len;
	unsigned long long sent, dropped;
};

struct statsd *
statsd_new(const char *host, const char *port, char *err, size_t errlen)
{
	struct addrinfo hints, *res = NULL;
	struct statsd *s;
	char *end;
	long p;
	int rc;

	if (host == NULL || *host == '\0')
		host = "localhost";
	if (port == NULL || *port == '\0')
		port = "8125";
	p = strtol(port, &end, 10);
	if (*end != '\0' || p <= 0 || p > 65535) {
		snprintf(err, errlen, "STATSD_PORT %s: not a port number", port);
		return NULL;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_DGRAM;
	if ((rc = getaddrinfo(host, port, &hints, &res)) != 0 || res == NULL) {
		snprintf(err, errlen, "STATSD_HOST %s: %s", host, gai_strerror(rc));
		return NULL;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL)
		abort();
	s->fd = socket(res->ai_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->fd < 0) {
		snprintf(err, errlen, "statsd socket: %s", strerror(errno));
		freeaddrinfo(res);
		free(s);
		return NULL;
	}
	memcpy(&s->addr, res->ai_addr, res->ai_addrlen);
	s->addrlen = res->ai_addrlen;
	freeaddrinfo(res);
	return s;
}

struct statsd *
statsd_new_from_env(char *err, size_t errlen)
{
	const char *host = getenv("STATSD_HOST"), *port = getenv("STATSD_PORT");

	if (errlen > 0)
		err[0] = '\0';
	if ((host == NULL || *host == '\0') && (port == NULL || *port == '\0'))
		return NULL;
	return statsd_new(host, port, err, errlen);
}

void
statsd_flush(struct statsd *s)
{
	if (s == NULL || s->len == 0)
		return;
	if (sendto(s->fd, s->buf, s->len, MSG_DONTWAIT, (struct sockaddr *)&s->addr, s->addrlen) ==
	    (ssize_t)s->len)
		s->sent++;
	else
		s->dropped++; /* full socket buffer or no route: statsd is lossy */
	s->len = 0;
}

void
statsd_free(struct statsd *s)
{
	if (s == NULL)
		return;
	statsd_flush(s);
	close(s->fd);
	free(s);
}

unsigned long long
statsd_sent(const struct statsd *s)
{
	return s ? s->sent : 0;
}

unsigned long long
statsd_dropped(const struct statsd *s)
{
	return s ? s->dropped : 0;
}

char *
statsd_normalize(const char *name, char *buf, size_t size)
{
	size_t i;

	snprintf(buf, size, "%s", name ? name : "");
	for (i = 0; buf[i] != '\0'; i++)
		if (buf[i] == '.' || buf[i] == ':')
			buf[i] = '_';
	return buf;
}

/* Append "name:value" to the batch (value already formatted). */
static void
add_line(struct statsd *s, const char *name, const char *value)
{
	char line[STATSD_MAX_DATAGRAM];
	size_t i, n, nl;
	int w;

	if (s == NULL)
		return;
	w = snprintf(line, sizeof(line), "%s:%s", name, value);
	if (w < 0 || (size_t)w >= sizeof(line))
		return; /* a name this long is not a metric */
	n = (size_t)w;
	/* the name part must not break the line format */
	for (i = 0; i < n - strlen(value) - 1; i++)
		if (line[i] == ':' || line[i] == '|' || line[i] == '@' || line[i] == ' ' ||
		    line[i] == '\n' || line[i] == '\t' || line[i] == '\r')
			line[i] = '_';
	nl = s->len > 0 ? 1 : 0;
	if (s->len + nl + n > sizeof(s->buf)) {
		statsd_flush(s);
		nl = 0;
	}
	if (nl)
		s->buf[s->len++] = '\n';
	memcpy(s->buf + s->len, line, n);
	s->len += n;
}

void
statsd_gauge(struct statsd *s, const char *name, double value)
{
	char v[64];

	if (!isfinite(value))
		return;
	if (value == floor(value) && fabs(value) < 1e15)
		snprintf(v, sizeof(v), "%lld|g", (long long)value);
	else
		snprintf(v, sizeof(v), "%.17g|g", value);
	add_line(s, name, v);
}

void
statsd_incr(struct statsd *s, const char *name, long long count)
{
	char v[64];

	snprintf(v, sizeof(v), "%lld|c", count);
	add_line(s, name, v);
}

void
statsd_timing(struct statsd *s, const char *name, double ms)
{
	char v[64];

	if (!isfinite(ms))
		return;
	snprintf(v, sizeof(v), "%0.6f|ms", ms);
	add_line(s, name, v);
}

void
statsd_launcher_stats(struct statsd *s, long long zk_queue)
{
	static const char *const caches[] = {"node_cache", "request_cache", "image_cache"};
	static const char *const queues[] = {"event_queue", "playback_queue"};
	char host[256], name[512];
	size_t i, j;

	if (s == NULL)
		return;
	if (gethostname(host, sizeof(host)) != 0)
		snprintf(host, sizeof(host), "localhost");
	host[sizeof(host) - 1] = '\0';
	snprintf(name, sizeof(name), "nodepool.launcher.%s.zk.client.connection_queue", host);
	statsd_gauge(s, name, (double)zk_queue);
	for (i = 0; i < 3; i++)
		for (j = 0; j < 2; j++) {
			snprintf(name, sizeof(name), "nodepool.launcher.%s.zk.%s.%s", host,
				 caches[i], queues[j]);
			statsd_gauge(s, name, 0);
		}
	statsd_flush(s);
}
