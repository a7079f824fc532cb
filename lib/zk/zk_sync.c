/*
 * The synchronous ZooKeeper calls (zk.h, "synchronous forms"), used only by
 * the command-line tools (cli/): each submits the asynchronous call and
 * runs a nested event loop until it completes or twice the session timeout
 * passes.
 */
#include "lib/zk/zk_private.h"
#include "lib/core/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <poll.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include "lib/core/xalloc.h"
#include "lib/core/clock.h"

/* ---- synchronous forms ------------------------------------------------------- */

struct zk_sync {
	int done, abandoned, rc;
	char *value;
	int len;
	int has_stat;
	struct zk_stat st;
	int count;
	char **names;
};

static void
sync_cb(const struct zk_result *r, void *arg)
{
	struct zk_sync *s = arg;
	int i;

	if (s->abandoned) {
		free(s);
		return;
	}
	s->rc = r->rc;
	if (r->value != NULL) {
		s->value = xmalloc((size_t)r->len + strlen(r->value) + 1);
		/* get: len bytes plus NUL; create: the path (len 0) */
		if (r->len > 0) {
			memcpy(s->value, r->value, (size_t)r->len);
			s->value[r->len] = '\0';
		} else {
			strcpy(s->value, r->value);
		}
		s->len = r->len;
	}
	if (r->stat != NULL) {
		s->st = *r->stat;
		s->has_stat = 1;
	}
	if (r->count > 0) {
		s->names = xcalloc((size_t)r->count, sizeof(char *));
		for (i = 0; i < r->count; i++)
			s->names[i] = xstrdup(r->names[i]);
		s->count = r->count;
	}
	s->done = 1;
}

static void
sync_timer_cb(evutil_socket_t fd, short what, void *arg)
{
}

/* Run the loop until *flag or the deadline: 0, or -1 on timeout. */
static int
run_until(struct event_base *base, const int *flag, double timeout)
{
	double deadline = zk_now() + timeout, left;
	struct event *t = evtimer_new(base, sync_timer_cb, NULL);
	struct timeval tv;

	while (!*flag && (left = deadline - zk_now()) > 0) {
		tv = np_tv_of(left);
		evtimer_add(t, &tv);
		if (event_base_loop(base, EVLOOP_ONCE) < 0)
			break;
	}
	event_free(t);
	return *flag ? 0 : -1;
}

/* Sync operations wait twice the session timeout: long enough to ride out a
 * reconnection, short enough for a tool to report a dead server. */
static double
sync_timeout(const struct zk *zk)
{
	return 2 * zk_session_timeout(zk);
}

static struct zk_sync *
sync_run(struct zk *zk, struct zk_req *req)
{
	struct zk_sync *s = xcalloc(1, sizeof(*s));

	req->cb = sync_cb;
	req->arg = s;
	req->owner = NULL;
	req->always = 1;
	zk_submit(zk, req);
	if (run_until(zk_loop_base(zk), &s->done, sync_timeout(zk)) != 0) {
		s->abandoned = 1; /* sync_cb frees it */
		return NULL;
	}
	return s;
}

static int
sync_end(struct zk_sync *s)
{
	int rc, i;

	if (s == NULL)
		return ZOPERATIONTIMEOUT;
	rc = s->rc;
	free(s->value);
	for (i = 0; i < s->count; i++)
		free(s->names[i]);
	free(s->names);
	free(s);
	return rc;
}

int
zk_wait_connected(struct zk *zk, double timeout)
{
	return run_until(zk_loop_base(zk), zk_connected_flag(zk), timeout) == 0 ? ZOK
										: ZOPERATIONTIMEOUT;
}

int
zk_sync_create(struct zk *zk, const char *path, const void *data, int len, int flags, int makepath,
	       char **created_path)
{
	struct zk_req req = {.kind = ZK_OP_CREATE,
			     .path = path,
			     .data = data,
			     .len = len,
			     .flags = flags,
			     .makepath = makepath};
	struct zk_sync *s = sync_run(zk, &req);

	if (created_path != NULL) {
		*created_path = NULL;
		if (s != NULL && s->rc == ZOK) {
			*created_path = s->value;
			s->value = NULL;
		}
	}
	return sync_end(s);
}

int
zk_sync_get(struct zk *zk, const char *path, char **data, int *len, struct zk_stat *st)
{
	struct zk_req req = {.kind = ZK_OP_GET, .path = path};
	struct zk_sync *s = sync_run(zk, &req);

	if (data != NULL)
		*data = NULL;
	if (len != NULL)
		*len = 0;
	if (s != NULL && s->rc == ZOK) {
		if (data != NULL) {
			*data = s->value;
			s->value = NULL;
		}
		if (len != NULL)
			*len = s->len;
		if (st != NULL)
			*st = s->st;
	}
	return sync_end(s);
}

int
zk_sync_set(struct zk *zk, const char *path, const void *data, int len, int version,
	    struct zk_stat *st)
{
	struct zk_req req = {
	    .kind = ZK_OP_SET, .path = path, .data = data, .len = len, .version = version};
	struct zk_sync *s = sync_run(zk, &req);

	if (s != NULL && s->rc == ZOK && st != NULL)
		*st = s->st;
	return sync_end(s);
}

int
zk_sync_delete(struct zk *zk, const char *path, int version, int recursive)
{
	struct zk_req req = {
	    .kind = ZK_OP_DELETE, .path = path, .version = version, .recursive = recursive};

	return sync_end(sync_run(zk, &req));
}

int
zk_sync_exists(struct zk *zk, const char *path, struct zk_stat *st)
{
	struct zk_req req = {.kind = ZK_OP_EXISTS, .path = path};
	struct zk_sync *s = sync_run(zk, &req);

	if (s != NULL && s->rc == ZOK && st != NULL)
		*st = s->st;
	return sync_end(s);
}

int
zk_sync_children(struct zk *zk, const char *path, int *count, char ***names)
{
	struct zk_req req = {.kind = ZK_OP_CHILDREN, .path = path};
	struct zk_sync *s = sync_run(zk, &req);

	*count = 0;
	*names = NULL;
	if (s != NULL && s->rc == ZOK) {
		*count = s->count;
		*names = s->names;
		s->names = NULL;
		s->count = 0;
	}
	return sync_end(s);
}

void
zk_strings_free(int count, char **names)
{
	int i;

	if (names == NULL)
		return;
	for (i = 0; i < count; i++)
		free(names[i]);
	free(names);
}
