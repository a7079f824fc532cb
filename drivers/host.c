/*
 * The drv_* host services of driver.h, dispatched to the ops the host
 * program registered (host.h); a NULL slot gives the answer host.h
 * documents for it.
 */
#include <errno.h>

#include "drivers/host.h"

static const struct drv_host_ops no_host; /* every slot NULL */
static const struct drv_host_ops *host = &no_host;

void
drv_host_register(const struct drv_host_ops *ops)
{
	host = ops != NULL ? ops : &no_host;
}

struct event_base *
drv_event_base(struct drv_host *lc)
{
	return host->event_base != NULL ? host->event_base(lc) : NULL;
}

struct zk *
drv_zk(struct drv_host *lc)
{
	return host->zk != NULL ? host->zk(lc) : NULL;
}

const char *
drv_provider_name(struct drv_host *lc)
{
	return host->provider_name != NULL ? host->provider_name(lc) : "";
}

const json_t *
drv_provider_config(struct drv_host *lc)
{
	return host->provider_config != NULL ? host->provider_config(lc) : NULL;
}

size_t
drv_provider_nodes(struct drv_host *lc, const struct np_node ***out)
{
	if (host->provider_nodes != NULL)
		return host->provider_nodes(lc, out);
	*out = NULL;
	return 0;
}

const struct np_node *
drv_node_get(struct drv_host *lc, const char *node_id)
{
	return host->node_get != NULL ? host->node_get(lc, node_id) : NULL;
}

size_t
drv_all_nodes(struct drv_host *lc, const struct np_node ***out)
{
	if (host->all_nodes != NULL)
		return host->all_nodes(lc, out);
	*out = NULL;
	return 0;
}

const struct np_request *
drv_request_get(struct drv_host *lc, const char *request_id)
{
	return host->request_get != NULL ? host->request_get(lc, request_id) : NULL;
}

int
drv_node_unreadable(struct drv_host *lc, const char *id)
{
	return host->node_unreadable != NULL ? host->node_unreadable(lc, id) : 0;
}

size_t
drv_provider_peers(struct drv_host *lc, char *who, size_t wholen)
{
	return host->provider_peers != NULL ? host->provider_peers(lc, who, wholen) : 0;
}

int
drv_registration_round(struct drv_host *lc)
{
	return host->registration_round != NULL ? host->registration_round(lc) : 1;
}

int
drv_duty_mine(struct drv_host *lc, const char *key)
{
	return host->duty_mine != NULL ? host->duty_mine(lc, key) : 1;
}

int
drv_node_locked(struct drv_host *lc, const char *node_id)
{
	return host->node_locked != NULL ? host->node_locked(lc, node_id) : 0;
}

int
drv_store_node(struct drv_host *lc, const struct drv_launch *l)
{
	if (host->store_node != NULL)
		return host->store_node(lc, l);
	errno = EINVAL;
	return -1;
}

void
drv_register_node(struct drv_host *lc, struct np_node *n,
		  void (*done)(const char *node_id, int unknown, void *arg), void *arg)
{
	if (host->register_node != NULL) {
		host->register_node(lc, n, done, arg);
		return;
	}
	np_node_free(n);
	if (done != NULL)
		done(NULL, 0, arg);
}

int
drv_in_sync(struct drv_host *lc)
{
	return host->in_sync != NULL ? host->in_sync(lc) : 1;
}

unsigned
drv_sync_epoch(struct drv_host *lc)
{
	return host->sync_epoch != NULL ? host->sync_epoch(lc) : 0;
}

void
drv_update_node(struct drv_host *lc, struct np_node *n)
{
	if (host->update_node != NULL)
		host->update_node(lc, n);
	else
		np_node_free(n);
}

void
drv_deregister_node(struct drv_host *lc, const char *node_id)
{
	if (host->deregister_node != NULL)
		host->deregister_node(lc, node_id);
}

void
drv_launch_done(struct drv_launch *l, enum drv_launch_result result, const char *error)
{
	if (host->launch_done != NULL)
		host->launch_done(l, result, error);
}

void
drv_delete_done(struct drv_delete *d, int ok, const char *error)
{
	if (host->delete_done != NULL)
		host->delete_done(d, ok, error);
}
