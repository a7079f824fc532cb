/*
 * nodepool-web: the web API (lib/ops/web.h: /node-list, /request-list,
 * /label-list, /image-list, /dib-image-list, /image-status, /ready,
 * /metrics) as a process of its own.
 *
 * Under nodepoold it is a child in the process table beside the workers
 * (supervisor/proctab.c), restarted with back-off like any of them, so no
 * provider's fate (a driver that is not available and exits 100, a crash
 * loop) takes the API with it. It has its own ZooKeeper session, on which
 * it only reads: caches of /nodepool/nodes (with locks; of each record
 * only what the listings show, nodeview.h), /nodepool/requests and
 * /nodepool/components/pool (created empty when absent, as every
 * launcher's caches do), the image tree and the metric records under
 * /nodepoold/metrics.
 *
 * Asleep while idle (issue 25): the caches of nodes and requests live on a
 * second ZooKeeper session, opened by the first listing that reads them
 * (it waits for their first sync) and closed after webapp
 * view_idle_timeout seconds (60; 0: never) without one, so that while
 * nobody reads the API no watch brings ZooKeeper's churn here (webproc.c
 * says why a session: a persistent watch cannot be removed otherwise).
 *
 * Reading on demand (issue 25): once synced, the caches of nodes and
 * requests (zk.h ZK_CACHE_LAZY) read a changed record only when something
 * reads them: a listing that is not answered from the 1 s answer cache, or
 * the status page's sample (every STATUSPAGE_SAMPLE_INTERVAL). ZooKeeper's
 * churn then costs this process the watch's events (a lock taken or
 * released is counted from them) and one read per record changed between
 * two readers, not a read and a decode per change. Memory stays that of the
 * compact views: a record waiting for a reader keeps its last view.
 *
 * Metrics of the workers: each worker's STATUS reply to the supervisor's
 * poll carries its metrics record, and nodepoold passes it on here as a
 * METRICS message (protocol/ipc_types.h). Those live records replace the
 * stored copies (/nodepoold/metrics/<provider>, written every
 * stats-interval) on /metrics. Why over the supervisor's channels rather
 * than an endpoint in every worker scraped from here: the supervisor polls
 * every worker already, so nothing new listens and no port per provider
 * needs configuring; a hung or dead worker cannot stall /metrics (its last
 * record stays); and the figures arrive at the poll's pace, fresher than
 * the znodes.
 *
 * /ready: 200 once the ZooKeeper session is connected and the caches held
 * have their first listing (the API answers from a complete view; the view
 * asleep, or being woken for a listing that waits, counts as complete),
 * 503 otherwise (before, and while a session is suspended).
 *
 * Configuration: a JSON slice, np_cfg_web_slice() (lib/config/slice.h),
 * from a CONFIG message under nodepoold, or made from nodepool.yaml when
 * standalone. A changed slice is applied in place: the session, the caches
 * and the listener are made anew.
 */
#ifndef NP_WEBPROC_H
#define NP_WEBPROC_H

#include <stddef.h>
#include <jansson.h>

struct event_base;
struct evbuffer;
struct webproc;

/* A web process on base; channel_fd >= 0: under nodepoold (fd 3). */
struct webproc *webproc_new(struct event_base *base, int channel_fd);
/* Apply a slice (not taken): 0, or -1 with a message (bad slice,
 * ZooKeeper options refused). Unchanged: 0. An address that cannot be
 * bound is tried again every 2 s (STATUS shows why meanwhile). */
int webproc_apply(struct webproc *wp, const json_t *slice, char *err, size_t errlen);
/* Load nodepool.yaml (+ secure) and apply its web slice (standalone). */
int webproc_load_file(struct webproc *wp, const char *path, const char *secure, char *err,
		      size_t errlen);
/* Stop serving; the loop exits. */
void webproc_stop(struct webproc *wp);
/* A few lines on the state (SIGUSR2, DUMP_REQ). */
void webproc_dump(struct webproc *wp, struct evbuffer *out);
/* 0 clean stop; 1 error (restart); 100 permanent. */
int webproc_exit_code(const struct webproc *wp);
/* The HTTP port bound (0 before). */
int webproc_port(const struct webproc *wp);
void webproc_free(struct webproc *wp);

#endif
