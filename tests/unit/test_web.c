/*
 * lib/ops/web.c on a real loopback socket: the connection cap, request size
 * limits, dates; and lib/ops/statsd.c and lib/ops/metrics.c: datagrams as the
 * Python statsd client writes them, records, the Prometheus text.
 */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "lib/core/clock.h"
#include "lib/ops/metrics.h"
#include "lib/ops/statsd.h"
#include "lib/ops/web.h"

static void
empty_view(void *arg, struct status_view *v)
{
	memset(v, 0, sizeof(*v));
	v->ready = *(int *)arg;
}

static int
connect_to(int port)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect: %s",
		  strerror(errno));
	fcntl(fd, F_SETFL, O_NONBLOCK);
	return fd;
}

static void
spin(struct event_base *base, double seconds)
{
	struct timeval tv = np_tv_of(seconds);

	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
}

/* Read what the server sent so far (the loop runs meanwhile). */
static size_t
drain(struct event_base *base, int fd, char *buf, size_t size, double seconds)
{
	size_t len = 0;
	int i;

	for (i = 0; i < (int)(seconds * 20); i++) {
		ssize_t n;
		spin(base, 0.05);
		while ((n = read(fd, buf + len, size - len - 1)) > 0)
			len += (size_t)n;
		if (n == 0)
			break;
	}
	buf[len] = '\0';
	return len;
}

Test(web, connection_cap_and_limits)
{
	struct event_base *base = event_base_new();
	struct web_options o = {
	    .listen_address = "127.0.0.1", .port = 0, .max_connections = 2, .timeout = 5};
	char err[256], buf[65536];
	int ready = 1, a, b, c, port;
	struct web *w = web_new(base, &o, empty_view, NULL, &ready, err, sizeof(err));
	static const char get[] = "GET /ready HTTP/1.1\r\nHost: x\r\n\r\n";

	cr_assert_not_null(w, "%s", err);
	port = web_port(w);
	cr_assert(port > 0);
	a = connect_to(port);
	b = connect_to(port);
	c = connect_to(port); /* waits in the backlog */
	spin(base, 0.3);
	cr_assert_eq(web_connections(w), 2);
	/* the third is not served while two are open */
	cr_assert(write(c, get, sizeof(get) - 1) > 0);
	cr_assert_eq(drain(base, c, buf, sizeof(buf), 0.3), 0);
	close(a);
	spin(base, 0.3);
	/* one closed: the third is accepted and answered */
	drain(base, c, buf, sizeof(buf), 2.0);
	cr_assert(strncmp(buf, "HTTP/1.1 200 OK", 15) == 0, "%s", buf);
	cr_assert(strstr(buf, "\r\n\r\nOK") != NULL, "%s", buf);
	cr_assert(web_connections(w) <= 2);
	close(c);
	close(b);
	spin(base, 0.7);
	cr_assert_eq(web_connections(w), 0);

	/* request headers beyond 8 KiB are refused */
	a = connect_to(port);
	{
		char *big = malloc(20000);
		int n = snprintf(big, 20000, "GET /node-list HTTP/1.1\r\nX-Big: ");
		memset(big + n, 'a', 12000);
		memcpy(big + n + 12000, "\r\n\r\n", 4);
		cr_assert(write(a, big, (size_t)n + 12004) > 0);
		free(big);
	}
	drain(base, a, buf, sizeof(buf), 1.0);
	cr_assert(strncmp(buf, "HTTP/1.1 200", 12) != 0, "%s", buf);
	close(a);

	/* a body on a GET beyond 1 KiB is refused too */
	a = connect_to(port);
	{
		char req[4096];
		int n = snprintf(req, sizeof(req),
				 "GET /ready HTTP/1.1\r\nHost: x\r\nContent-Length: 3000\r\n\r\n");
		memset(req + n, 'b', 3000);
		cr_assert(write(a, req, (size_t)n + 3000) > 0);
	}
	drain(base, a, buf, sizeof(buf), 1.0);
	cr_assert(strncmp(buf, "HTTP/1.1 413", 12) == 0, "%s", buf);
	close(a);

	/* not ready: 503 */
	ready = 0;
	a = connect_to(port);
	cr_assert(write(a, get, sizeof(get) - 1) > 0);
	drain(base, a, buf, sizeof(buf), 1.0);
	cr_assert(strncmp(buf, "HTTP/1.1 503", 12) == 0, "%s", buf);
	close(a);
	web_free(w);
	event_base_free(base);
}

Test(web, bind_failure_is_an_error)
{
	struct event_base *base = event_base_new();
	struct web_options o = {
	    .listen_address = "127.0.0.1", .port = 0, .max_connections = 0, .timeout = 0};
	char err[256];
	int ready = 1;
	struct web *w = web_new(base, &o, empty_view, NULL, &ready, err, sizeof(err)), *w2;

	cr_assert_not_null(w);
	o.port = web_port(w);
	w2 = web_new(base, &o, empty_view, NULL, &ready, err, sizeof(err));
	cr_assert_null(w2);
	cr_assert(strstr(err, "cannot listen") != NULL, "%s", err);
	o.listen_address = "no-such-host.invalid";
	cr_assert_null(web_new(base, &o, empty_view, NULL, &ready, err, sizeof(err)));
	web_free(w);
	web_free(NULL);
	event_base_free(base);
}

Test(web, http_dates)
{
	cr_assert_eq(web_parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), 784111777);
	cr_assert_eq(web_parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), 784111777);
	cr_assert_eq(web_parse_http_date("Sun Nov  6 08:49:37 1994"), 784111777);
	cr_assert_eq(web_parse_http_date("yesterday"), -1);
	cr_assert_eq(web_parse_http_date(NULL), -1);
}

/* ---- statsd ------------------------------------------------------------------- */

static int
udp_listener(int *port)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	getsockname(fd, (struct sockaddr *)&sa, &sl);
	*port = ntohs(sa.sin_port);
	return fd;
}

/* Every datagram received within a short wait, joined with '\n'. */
static char *
receive_all(int fd)
{
	static char out[65536];
	size_t len = 0;
	struct pollfd p = {fd, POLLIN, 0};

	out[0] = '\0';
	while (poll(&p, 1, 300) > 0) {
		char d[2048];
		ssize_t n = recv(fd, d, sizeof(d), 0);
		if (n <= 0)
			break;
		cr_assert(n <= 512, "datagram of %zd bytes", n);
		if (len)
			out[len++] = '\n';
		memcpy(out + len, d, (size_t)n);
		len += (size_t)n;
		out[len] = '\0';
	}
	return out;
}

Test(statsd, lines_batching_and_names)
{
	int port, fd = udp_listener(&port), i;
	char ports[16], err[256], *got;
	struct statsd *s;

	snprintf(ports, sizeof(ports), "%d", port);
	s = statsd_new("127.0.0.1", ports, err, sizeof(err));
	cr_assert_not_null(s, "%s", err);
	statsd_gauge(s, "nodepool.nodes.ready", 3);
	statsd_gauge(s, "nodepool.x", 2.5);
	statsd_incr(s, "nodepool.launch.ready", 1);
	statsd_timing(s, "nodepool.launch.ready", 1234);
	statsd_gauge(s, "bad:name|with spaces", 1);
	statsd_flush(s);
	got = receive_all(fd);
	cr_assert_str_eq(got, "nodepool.nodes.ready:3|g\nnodepool.x:2.5|g\n"
			      "nodepool.launch.ready:1|c\nnodepool.launch.ready:1234.000000|ms\n"
			      "bad_name_with_spaces:1|g");
	/* many lines: several datagrams of at most 512 bytes, none lost */
	for (i = 0; i < 100; i++) {
		char name[64];
		snprintf(name, sizeof(name), "nodepool.label.l%03d.nodes.ready", i);
		statsd_gauge(s, name, i);
	}
	statsd_flush(s);
	got = receive_all(fd);
	cr_assert(strstr(got, "nodepool.label.l000.nodes.ready:0|g") != NULL);
	cr_assert(strstr(got, "nodepool.label.l099.nodes.ready:99|g") != NULL);
	cr_assert(statsd_sent(s) >= 9);
	statsd_free(s);
	close(fd);
}

Test(statsd, environment_and_errors)
{
	char err[256], buf[64];

	unsetenv("STATSD_HOST");
	unsetenv("STATSD_PORT");
	cr_assert_null(statsd_new_from_env(err, sizeof(err)));
	cr_assert_str_eq(err, "");
	setenv("STATSD_PORT", "notaport", 1);
	cr_assert_null(statsd_new_from_env(err, sizeof(err)));
	cr_assert(strstr(err, "STATSD_PORT") != NULL);
	setenv("STATSD_PORT", "8125", 1);
	setenv("STATSD_HOST", "no-such-host.invalid", 1);
	cr_assert_null(statsd_new_from_env(err, sizeof(err)));
	cr_assert(strstr(err, "STATSD_HOST") != NULL);
	unsetenv("STATSD_HOST");
	unsetenv("STATSD_PORT");
	cr_assert_str_eq(statsd_normalize("zuul.example.com:1", buf, sizeof(buf)),
			 "zuul_example_com_1");
}

/* ---- metrics ------------------------------------------------------------------- */

Test(metrics, launch_end_goes_to_statsd_as_upstream)
{
	int port, fd = udp_listener(&port);
	char ports[16], err[256], *got;
	struct statsd *s;

	snprintf(ports, sizeof(ports), "%d", port);
	s = statsd_new("127.0.0.1", ports, err, sizeof(err));
	cr_assert_not_null(s, "%s", err);
	metrics_clear();
	metrics_set_statsd(s);
	metrics_launch_result("rax", "az1", "zuul.example.com", "ready", 12.3456);
	got = receive_all(fd);
	cr_assert_str_eq(got, "nodepool.launch.provider.rax.ready:12345.000000|ms\n"
			      "nodepool.launch.provider.rax.ready:1|c\n"
			      "nodepool.launch.ready:12345.000000|ms\n"
			      "nodepool.launch.ready:1|c\n"
			      "nodepool.launch.provider.rax.az1.ready:12345.000000|ms\n"
			      "nodepool.launch.provider.rax.az1.ready:1|c\n"
			      "nodepool.launch.requestor.zuul_example_com.ready:12345.000000|ms\n"
			      "nodepool.launch.requestor.zuul_example_com.ready:1|c");
	metrics_launch_result("rax", NULL, NULL, "error.quota", 1);
	got = receive_all(fd);
	cr_assert_str_eq(got, "nodepool.launch.provider.rax.error.quota:1000.000000|ms\n"
			      "nodepool.launch.provider.rax.error.quota:1|c\n"
			      "nodepool.launch.error.quota:1000.000000|ms\n"
			      "nodepool.launch.error.quota:1|c");
	metrics_launch_result("rax", NULL, NULL, "error.unknown", 0.5);
	cr_assert(strstr(receive_all(fd), "nodepool.launch.error.unknown:1|c") != NULL);
	metrics_set_statsd(NULL);
	metrics_clear();
	statsd_free(s);
	close(fd);
}

Test(metrics, records_add_up_and_render)
{
	json_t *base, *rec, *recs;
	struct status_view v;
	char *text;

	metrics_clear();
	metrics_launch_phase("rax", METRICS_PHASE_QUOTA_WAIT, 0.05);
	metrics_launch_phase("rax", METRICS_PHASE_BOOT, 42);
	metrics_launch_result("rax", NULL, NULL, "ready", 0.3);
	metrics_launch_result("rax", NULL, NULL, "ready", 7);
	metrics_launch_result("rax", NULL, NULL, "error.keyscan", 4000);
	metrics_set_requests("rax", 5, 4, 1, 0);
	base = json_loads("{\"provider\": \"rax\", \"starts\": 3, \"launches\": {\"ready\": 10},"
			  " \"requests\": {\"fulfilled\": 6}}",
			  0, NULL);
	rec = metrics_record("rax", base);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(rec, "launches"), "ready")),
		     12);
	cr_assert_eq(
	    json_integer_value(json_object_get(json_object_get(rec, "requests"), "fulfilled")), 10);
	cr_assert_eq(json_integer_value(json_object_get(rec, "starts")), 3);
	json_object_set_new(rec, "provider", json_string("ra\"x"));
	recs = json_pack("[O]", rec);
	memset(&v, 0, sizeof(v));
	v.ready = 1;
	text = metrics_render(&v, recs, NULL);
	cr_assert(
	    strstr(text, "nodepool_launches_total{provider=\"ra\\\"x\",result=\"ready\"} 12\n"),
	    "%s", text);
	cr_assert(strstr(text, "nodepool_launches_total{provider=\"ra\\\"x\",result="
			       "\"error.keyscan\"} 1\n"));
	/* cumulative buckets: 0.3 <= 0.5, 7 <= 10, 4000 only in +Inf */
	cr_assert(strstr(text, "phase=\"total\",le=\"0.1\"} 0\n"), "%s", text);
	cr_assert(strstr(text, "phase=\"total\",le=\"0.5\"} 1\n"));
	cr_assert(strstr(text, "phase=\"total\",le=\"10\"} 2\n"));
	cr_assert(strstr(text, "phase=\"total\",le=\"3600\"} 2\n"));
	cr_assert(strstr(text, "phase=\"total\",le=\"+Inf\"} 3\n"));
	cr_assert(strstr(text, "nodepool_launch_duration_seconds_count{provider=\"ra\\\"x\","
			       "phase=\"total\"} 3\n"));
	cr_assert(strstr(text, "phase=\"boot\",le=\"60\"} 1\n"));
	cr_assert(strstr(text, "phase=\"quota_wait\",le=\"0.1\"} 1\n"));
	cr_assert(strstr(text, "phase=\"create\"") == NULL); /* never reported */
	cr_assert(strstr(text, "nodepool_worker_restarts_total{provider=\"ra\\\"x\"} 2\n"));
	cr_assert(strstr(text, "nodepool_requests{state=\"requested\"} 0\n"));
	cr_assert(strstr(text, "nodepool_launcher_ready 1\n"));
	free(text);
	json_decref(recs);
	json_decref(rec);
	json_decref(base);
	metrics_clear();
}

/* The ZooKeeper connection counters of a worker (issue 27): added to the
 * record read back, and on /metrics by event. */
Test(metrics, zookeeper_counters_add_up_and_render)
{
	const unsigned long long counts[METRICS_ZK_COUNT] = {3, 1, 120, 7, 2};
	json_t *base, *rec, *recs, *z;
	struct status_view v;
	char *text;

	metrics_clear();
	metrics_set_zookeeper("rax", counts);
	base = json_loads("{\"provider\": \"rax\", \"zookeeper\": {\"connection_losses\": 2}}", 0,
			  NULL);
	rec = metrics_record("rax", base);
	z = json_object_get(rec, "zookeeper");
	cr_assert_eq(json_integer_value(json_object_get(z, "connection_losses")), 5);
	cr_assert_eq(json_integer_value(json_object_get(z, "expirations")), 1);
	cr_assert_eq(json_integer_value(json_object_get(z, "connect_errors")), 120);
	cr_assert_eq(json_integer_value(json_object_get(z, "resent")), 7);
	cr_assert_eq(json_integer_value(json_object_get(z, "lock_lost")), 2);
	recs = json_pack("[O]", rec);
	memset(&v, 0, sizeof(v));
	text = metrics_render(&v, recs, NULL);
	cr_assert(strstr(text, "# TYPE nodepool_zookeeper_events_total counter\n"), "%s", text);
	cr_assert(strstr(text, "nodepool_zookeeper_events_total{provider=\"rax\","
			       "event=\"connection_losses\"} 5\n"),
		  "%s", text);
	cr_assert(strstr(text, "nodepool_zookeeper_events_total{provider=\"rax\","
			       "event=\"lock_lost\"} 2\n"));
	free(text);
	json_decref(recs);
	json_decref(rec);
	json_decref(base);
	metrics_clear();
}

/* Cloud API retries (issue 24): counted per provider and API, added to
 * the record read back (a restarted worker continues), on /metrics. */
Test(metrics, api_retries_add_up_and_render)
{
	json_t *base, *rec, *recs, *r;
	struct status_view v;
	char *text;

	metrics_clear();
	metrics_api_retry("rax", "compute");
	metrics_api_retry("rax", "compute");
	metrics_api_retry("rax", "ec2:RunInstances");
	metrics_api_retry("rax", NULL);
	base = json_loads("{\"provider\": \"rax\", \"api_retries\": {\"compute\": 4}}", 0, NULL);
	rec = metrics_record("rax", base);
	r = json_object_get(rec, "api_retries");
	cr_assert_eq(json_integer_value(json_object_get(r, "compute")), 6);
	cr_assert_eq(json_integer_value(json_object_get(r, "ec2:RunInstances")), 1);
	cr_assert_eq(json_integer_value(json_object_get(r, "unknown")), 1);
	recs = json_pack("[O]", rec);
	memset(&v, 0, sizeof(v));
	text = metrics_render(&v, recs, NULL);
	cr_assert(strstr(text, "# TYPE nodepool_api_retries_total counter\n"), "%s", text);
	cr_assert(strstr(text, "nodepool_api_retries_total{provider=\"rax\",api=\"compute\"} 6\n"),
		  "%s", text);
	cr_assert(strstr(text, "nodepool_api_retries_total{provider=\"rax\","
			       "api=\"ec2:RunInstances\"} 1\n"),
		  "%s", text);
	free(text);
	json_decref(recs);
	json_decref(rec);
	json_decref(base);
	metrics_clear();
}
