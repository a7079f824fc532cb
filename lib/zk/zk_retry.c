/*
 * The retry queue of the ZooKeeper client (zk_set_retry): calls that failed
 * for a lost connection in their session, or were made while disconnected,
 * are parked in submission order and sent again, as first sent, once the
 * connection is back; an expired session (or zk_free) ends them instead.
 * Only calls whose repetition is harmless are retried (zk_retryable()).
 */
#include "lib/zk/zk_private.h"
#include "lib/core/log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include "lib/core/xalloc.h"

/* ---- calls waiting for the connection (zk_set_retry) ---------------------- */

void
zk_park(struct zk *zk, struct zk_call *c)
{
	c->outstanding = 0;
	c->final_rc = 1;
	c->attempts = 0;
	c->pnext = NULL;
	if (zk->ptail != NULL)
		zk->ptail->pnext = c;
	else
		zk->phead = c;
	zk->ptail = c;
}

/* Send a parked call again, as it was first sent. */
static void
resend(struct zk *zk, struct zk_call *c)
{
	c->gen = zk->gen;
	switch (c->kind) {
	case ZK_OP_SET:
		c->resent = 1;
		zk_rq_send(zk, c, NULL, ZK_OP_SET, 0, c->path, c->data, c->len, 0, c->version, NULL,
			   NULL, NULL);
		break;
	case ZK_OP_DELETE:
		c->resent = 1;
		if (c->recursive)
			zk_rdel_start(zk, zk_rdel_new(c, NULL, c->path, c->version));
		else
			zk_rq_send(zk, c, NULL, ZK_OP_DELETE, 0, c->path, NULL, 0, 0, c->version,
				   NULL, NULL, NULL);
		break;
	case ZK_OP_MULTI:
		c->resent = 1;
		zk_multi_send(zk, c, c->mops, c->mcount);
		break;
	default: /* reads without a watch */
		zk_rq_send(zk, c, NULL, c->kind, 0, c->path, NULL, 0, 0, 0, NULL, NULL, NULL);
		break;
	}
}

/* The connection is back: send the parked calls again, in their order. */
void
zk_flush_parked(struct zk *zk)
{
	struct zk_call *c = zk->phead, *next;
	int n = 0;

	zk->phead = zk->ptail = NULL;
	for (; c != NULL; c = next) {
		next = c->pnext;
		c->pnext = NULL;
		if (c->under && c->under_gen != zk->gen) {
			/* its locks went with the session it was made in */
			c->retry = 0;
			log_info("zookeeper: %s under a lock of an ended session not sent again",
				 c->path);
			zk_call_finish_rc(zk, c, ZK_LOCK_LOST);
			continue;
		}
		resend(zk, c);
		n++;
	}
	zk->counters.resent += (unsigned long long)n;
	if (n > 0)
		log_info("zookeeper: %d operation%s interrupted by the lost connection sent again",
			 n, n == 1 ? "" : "s");
}

/* The session is gone (or zk_free): parked calls end with rc. */
void
zk_fail_parked(struct zk *zk, int rc)
{
	struct zk_call *c = zk->phead, *next;

	zk->phead = zk->ptail = NULL;
	for (; c != NULL; c = next) {
		next = c->pnext;
		c->pnext = NULL;
		c->retry = 0;
		zk_call_finish_rc(zk, c, c->under && rc == ZSESSIONEXPIRED ? ZK_LOCK_LOST : rc);
	}
}

/* What zk_set_retry() sends again: writes whose repetition is harmless
 * (set, delete, a multi without creates: its version checks or deletes
 * fail if it landed) and reads without a watch. */
int
zk_retryable(const struct zk_req *req)
{
	int i;

	switch (req->kind) {
	case ZK_OP_SET:
	case ZK_OP_DELETE:
		return 1;
	case ZK_OP_GET:
	case ZK_OP_EXISTS:
	case ZK_OP_CHILDREN:
		return req->watch == NULL;
	case ZK_OP_MULTI:
		for (i = 0; i < req->mcount; i++)
			if (req->mops[i].type == ZK_MULTI_CREATE)
				return 0;
		return 1;
	default:
		return 0;
	}
}

void
zk_set_retry(struct zk *zk, int on)
{
	zk->retry_mode = on;
}
