/*
 * statsd, as upstream Nodepool's stats.py with the Python `statsd` client:
 * switched on by STATSD_HOST and/or STATSD_PORT in the environment
 * (defaults localhost and 8125 for the one not set), no prefix.
 *
 * The client: lines "name:value|type" ("g" gauges, "c" counters, "ms"
 * timers with six decimals, as the Python client writes them) are batched
 * into datagrams of at most 512 bytes, newline-separated (the Python
 * client's pipeline). The socket is UDP and non-blocking: a datagram that
 * cannot be sent at once is dropped, so statsd never stalls the loop. The
 * host is resolved once, when the client is made.
 *
 * Metric name parts that come from configuration or requests are made
 * safe as upstream's normalize_statsd_name (requestor, tenant, limit
 * names: '.' and ':' become '_'); in every name, characters that would
 * break the line format (':', '|', '@', whitespace) become '_'.
 *
 * The reporter (one per launcher process) sends, every stats-interval:
 *   nodepool.provider.<provider>.max_servers        (this worker's provider:
 *       the sum of its pools' finite max-servers; unlimited pools add 0,
 *       where upstream's sum becomes inf)
 *   nodepool.tenant_limits.<tenant>.<limit>         (finite limits only;
 *       upstream sends "inf" for an unset cores/instances/ram)
 * and, only while it holds the stats election (a kazoo Lock on
 * /nodepool/elections/stats, identifier "<hostname>-<pid>", the same
 * election upstream's launchers run, so one emitter per deployment even
 * mixed with upstream launchers):
 *   nodepool.nodes.<state>                          (all 11 states, zero-filled)
 *   nodepool.provider.<provider>.nodes.<state>      (registered providers zero-filled)
 *   nodepool.label.<label>.nodes.<state>            (registered labels zero-filled)
 *   nodepool.provider.<provider>.pool.<pool>.addressable_requests
 * Launch timers and counters (nodepool.launch.*) are sent by lib/ops/metrics.c
 * when a launch ends, from the worker that ran it; leak cleanup counters
 * (nodepool.provider.<provider>.leaked.<type>s) by the state machine
 * framework when it deletes a leaked resource.
 *
 * The launcher's own gauges, as upstream's _localStats / reportStats (every
 * 10 s there; every stats-interval here), statsd_launcher_stats():
 *   nodepool.launcher.<hostname>.zk.client.connection_queue
 *   nodepool.launcher.<hostname>.zk.{node,request,image}_cache.{event,playback}_queue
 * One emitter per host: nodepoold, for its workers together (the sum of
 * their ZooKeeper operations in flight, from their STATUS); a standalone
 * worker (statsd_reporter_set_local) for itself. Our caches apply watch
 * events on the loop as they arrive, so the cache queues, kazoo's backlog
 * of events not yet applied, are always 0.
 */
#ifndef NP_STATSD_H
#define NP_STATSD_H

#include <stddef.h>
#include <jansson.h>

#include "lib/ops/status.h"

struct event_base;
struct statsd;

/*
 * From STATSD_HOST / STATSD_PORT: NULL with err "" when neither is set;
 * NULL with a message when the host does not resolve or the port is bad.
 */
struct statsd *statsd_new_from_env(char *err, size_t errlen);
/* host (NULL: localhost) and port (NULL: 8125). */
struct statsd *statsd_new(const char *host, const char *port, char *err, size_t errlen);
/* Sends what is batched, then frees. NULL is a no-op. */
void statsd_free(struct statsd *s);

/* Batch one line (NULL s is a no-op). name is made safe as described. */
void statsd_gauge(struct statsd *s, const char *name, double value);
void statsd_incr(struct statsd *s, const char *name, long long count);
void statsd_timing(struct statsd *s, const char *name, double ms);
/* Send the batch now. */
void statsd_flush(struct statsd *s);
/* Datagrams sent and dropped (socket full or error), for tests and dumps. */
unsigned long long statsd_sent(const struct statsd *s);
unsigned long long statsd_dropped(const struct statsd *s);

/* The launcher gauges above for this host (gethostname(), as upstream's
 * socket.gethostname()), with zk_queue ZooKeeper operations in flight;
 * sent at once. NULL s is a no-op. */
void statsd_launcher_stats(struct statsd *s, long long zk_queue);

/* As upstream's normalize_statsd_name: '.' and ':' become '_'. Into buf. */
char *statsd_normalize(const char *name, char *buf, size_t size);

/* ---- the reporter ----------------------------------------------------------- */

struct statsd_reporter;
/*
 * slice: the worker's configuration slice (providers[0] is this worker's
 * provider; tenant-resource-limits; nodepoold.stats-interval, default 5 s),
 * copied. view gives the session and caches at each tick. The first report
 * goes out one interval after creation.
 */
struct statsd_reporter *statsd_reporter_new(struct event_base *base, struct statsd *s,
					    const json_t *slice, status_view_fn view, void *arg);
/* The session behind the view is about to go: give up the election (its
 * lock belongs to that session). The next tick starts over. */
void statsd_reporter_reset(struct statsd_reporter *r);
void statsd_reporter_free(struct statsd_reporter *r);
/* A launcher with no nodepoold above it: each tick also sends the
 * launcher gauges (statsd_launcher_stats) of its own session. */
void statsd_reporter_set_local(struct statsd_reporter *r, int local);
/* 1 while this process holds the stats election. */
int statsd_reporter_leader(const struct statsd_reporter *r);
/* Send the gauges now (also called by the timer). */
void statsd_reporter_tick(struct statsd_reporter *r);

#endif
