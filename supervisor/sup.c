/*
 * The supervisor as a whole: its signals and its shutdown.
 */
#include "supervisor/sup.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "lib/core/log.h"
#include "lib/ops/statsd.h"

void
sup_check_done(struct sup *sup)
{
	if (sup->stopping && !sup_any_running(sup) && !sup_ctl_replies_pending(sup))
		event_base_loopexit(sup->base, NULL);
}

static void
on_shutdown_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct sup *sup = arg;
	struct sup_child *c;
	static int fired;
	struct timeval tv = {5, 0};

	if (fired++) {
		log_error("children still not reaped: exiting anyway");
		event_base_loopexit(sup->base, NULL);
		return;
	}
	TAILQ_FOREACH(c, &sup->children, entry)
	if (c->pid > 0) {
		log_warn("%s %s: pid %ld still running after %.0f s: SIGKILL", c->role->role_name,
			 c->name, (long)c->pid, SUP_SHUTDOWN_TIMEOUT);
		kill(c->pid, SIGKILL);
	}
	evtimer_add(sup->shutdown_ev, &tv);
}

void
sup_shutdown(struct sup *sup, const char *why)
{
	struct sup_child *c, *next;
	struct timeval tv = {(time_t)SUP_SHUTDOWN_TIMEOUT, 0};

	if (sup->stopping)
		return;
	log_info("%s: stopping every child", why);
	sup->stopping = true;
	evtimer_add(sup->shutdown_ev, &tv);
	for (c = TAILQ_FIRST(&sup->children); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		c->want = SUP_WANT_DOWN;
		sup_child_dispatch(c, SUP_EV_DOWN);
	}
	sup_check_done(sup);
}

void
sup_signal(struct sup *sup, int sig)
{
	struct sup_reload_result res;
	struct sup_child *c;
	struct evbuffer *b;
	size_t len;
	char *text;

	switch (sig) {
	case SIGCHLD:
		sup_reap(sup);
		break;
	case SIGHUP:
		sup_reload_and_log(sup, &res);
		sup_reload_result_clear(&res);
		break;
	case SIGTERM:
	case SIGINT:
		sup_shutdown(sup, sig == SIGTERM ? "SIGTERM" : "SIGINT");
		break;
	case SIGUSR2:
		if ((b = evbuffer_new()) == NULL)
			abort();
		sup_dump(sup, b);
		len = evbuffer_get_length(b);
		if ((text = malloc(len + 1)) == NULL)
			abort();
		evbuffer_remove(b, text, len);
		text[len] = '\0';
		log_info("state dump:\n%s", text);
		free(text);
		evbuffer_free(b);
		TAILQ_FOREACH(c, &sup->children, entry)
		if (c->pid > 0)
			kill(c->pid, SIGUSR2);
		break;
	}
}

static void
on_tick(evutil_socket_t fd, short what, void *arg)
{
	sup_poll_status(arg);
}

/* Upstream's launcher reports its ZooKeeper client's queue per host; here
 * the host's launcher is every worker together. */
static void
on_stats(evutil_socket_t fd, short what, void *arg)
{
	struct sup *sup = arg;
	struct sup_child *c;
	long long queue = 0;

	TAILQ_FOREACH(c, &sup->children, entry)
	if (c->role->kind == IPC_KIND_PROVIDER && c->pid > 0 && c->have_status)
		queue += c->last_status.zk_queue;
	statsd_launcher_stats(sup->statsd, queue);
}

void
sup_timers_new(struct sup *sup)
{
	char err[256];

	/* the ticks are scheduled by sup_apply_config, which knows their periods */
	if ((sup->tick = event_new(sup->base, -1, EV_PERSIST, on_tick, sup)) == NULL ||
	    (sup->shutdown_ev = evtimer_new(sup->base, on_shutdown_deadline, sup)) == NULL ||
	    (sup->stats_ev = event_new(sup->base, -1, EV_PERSIST, on_stats, sup)) == NULL)
		abort();
	sup->statsd = statsd_new_from_env(err, sizeof(err));
	if (sup->statsd == NULL && err[0] != '\0')
		log_warn("statsd disabled: %s", err);
}

void
sup_timers_free(struct sup *sup)
{
	if (sup->tick != NULL)
		event_free(sup->tick);
	if (sup->shutdown_ev != NULL)
		event_free(sup->shutdown_ev);
	if (sup->stats_ev != NULL)
		event_free(sup->stats_ev);
	statsd_free(sup->statsd);
	sup->statsd = NULL;
	sup->tick = sup->shutdown_ev = sup->stats_ev = NULL;
}
