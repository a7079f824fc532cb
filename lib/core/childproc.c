/*
 * The plumbing every child process of nodepoold shares (see childproc.h):
 * start-up checks, the channel's child side, signals, the dump.
 */
#include "lib/core/childproc.h"

#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/core/chan.h"
#include "lib/core/clock.h"
#include "lib/core/log.h"
#include "lib/core/memtrim.h"
#include "lib/core/version.h"
#include "lib/core/xalloc.h"

int
childproc_channel_check(const char *prog, int channel_fd)
{
	char cerr[256];

	if (channel_fd != CHAN_CHILD_FD) {
		fprintf(stderr, "%s: --channel: the channel is fd 3\n", prog);
		return -1;
	}
	if (chan_child_fd(cerr, sizeof(cerr)) < 0) {
		fprintf(stderr, "%s: --channel: %s\n", prog, cerr);
		return -1;
	}
	return 0;
}

int
childproc_config(const struct ipc_config *c, const char *what, childproc_apply_fn apply, void *arg,
		 struct ipc_msg *ack, char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *slice = json_loads(c->config, 0, &jerr);

	ipc_msg_init(ack, IPC_CONFIG_ACK);
	ack->u.config_ack.generation = c->generation;
	if (slice == NULL) {
		snprintf(err, errlen, "%s: %s (line %d)", what, jerr.text, jerr.line);
		ipc_strv_push(&ack->u.config_ack.errors, err);
	} else if (apply(arg, slice, err, errlen) != 0) {
		ipc_strv_push(&ack->u.config_ack.errors, err);
	} else {
		ack->u.config_ack.ok = true;
	}
	json_decref(slice);
	return ack->u.config_ack.ok ? 0 : -1;
}

void
childproc_ready(struct ipc_msg *m, const char *name, int64_t zk_session)
{
	ipc_msg_init(m, IPC_READY);
	ipc_set_str(&m->u.ready.provider, name);
	m->u.ready.pid = getpid();
	m->u.ready.zk_session = zk_session;
	ipc_set_str(&m->u.ready.version, NP_VERSION);
}

void
childproc_status_init(struct ipc_msg *m, int64_t seq, int64_t generation, double start)
{
	struct ipc_status *st = &m->u.status;
	struct rusage ru;
	long rss = np_mem_rss_kb();

	ipc_msg_init(m, IPC_STATUS);
	st->seq = seq;
	st->generation = generation;
	if (rss >= 0)
		st->rss_kb = rss;
	st->pss_kb = np_mem_pss_kb();
	if (getrusage(RUSAGE_SELF, &ru) == 0)
		st->cpu_ms = (int64_t)ru.ru_utime.tv_sec * 1000 + ru.ru_utime.tv_usec / 1000 +
			     (int64_t)ru.ru_stime.tv_sec * 1000 + ru.ru_stime.tv_usec / 1000;
	st->uptime_s = (int64_t)(np_mono_s() - start);
}

/* ---- the channel's child side ----------------------------------------------------- */

struct childproc_link {
	struct chan *chan; /* NULL once it closed */
	const struct childproc_ops *ops;
	void *arg;
	int *exit_code;
};

static void
link_dump_reply(struct childproc_link *l)
{
	struct ipc_msg r;

	ipc_msg_init(&r, IPC_DUMP_REPLY);
	r.u.dump_reply.text = childproc_dump_text(l->ops->dump, l->arg);
	if (r.u.dump_reply.text == NULL)
		np_oom();
	childproc_link_send(l, &r);
	ipc_msg_clear(&r);
}

static void
link_on_msg(struct chan *ch, struct ipc_msg *msg, void *arg)
{
	struct childproc_link *l = arg;

	(void)ch;
	switch (msg->type) {
	case IPC_CONFIG:
		l->ops->config(l->arg, &msg->u.config);
		break;
	case IPC_STATUS_REQ:
		l->ops->status(l->arg, msg->u.status_req.seq);
		break;
	case IPC_DUMP_REQ:
		link_dump_reply(l);
		break;
	case IPC_METRICS:
		if (l->ops->metrics != NULL)
			l->ops->metrics(l->arg, &msg->u.metrics);
		break;
	case IPC_STOP:
		log_info("stop requested by nodepoold");
		l->ops->stop(l->arg);
		break;
	default:
		break;
	}
}

static void
link_on_close(struct chan *ch, enum chan_event ev, const char *why, void *arg)
{
	struct childproc_link *l = arg;

	(void)ch;
	log_warn("channel to nodepoold closed (%s): stopping", why);
	chan_free(l->chan);
	l->chan = NULL;
	if (ev == CHAN_PROTO_ERROR && *l->exit_code == 0)
		*l->exit_code = 1;
	l->ops->stop(l->arg);
}

struct childproc_link *
childproc_link_new(struct event_base *base, int fd, const struct childproc_ops *ops, void *arg,
		   int *exit_code, char *err, size_t errlen)
{
	struct childproc_link *l = xcalloc(1, sizeof(*l));

	l->ops = ops;
	l->arg = arg;
	l->exit_code = exit_code;
	l->chan = chan_new(base, fd, CHAN_CHILD, 0, 0, link_on_msg, link_on_close, l, err, errlen);
	if (l->chan == NULL) {
		free(l);
		return NULL;
	}
	return l;
}

void
childproc_link_send(struct childproc_link *l, const struct ipc_msg *m)
{
	if (l != NULL && l->chan != NULL && chan_send(l->chan, m) != 0)
		log_warn("channel: %s", chan_last_error(l->chan));
}

int
childproc_link_up(const struct childproc_link *l)
{
	return l != NULL && l->chan != NULL;
}

void
childproc_link_free(struct childproc_link *l)
{
	if (l == NULL)
		return;
	chan_free(l->chan);
	free(l);
}

/* ---- dump, signals, host name ----------------------------------------------------- */

char *
childproc_dump_text(childproc_dump_fn dump, void *arg)
{
	struct evbuffer *b = evbuffer_new();
	size_t len;
	char *text;

	if (b == NULL)
		return NULL;
	dump(arg, b);
	len = evbuffer_get_length(b);
	if ((text = malloc(len + 1)) != NULL) {
		evbuffer_remove(b, text, len);
		text[len] = '\0';
	}
	evbuffer_free(b);
	return text;
}

static void
on_stop(evutil_socket_t sig, short what, void *arg)
{
	struct childproc_signals *s = arg;

	(void)what;
	log_info("signal %d: stopping", (int)sig);
	s->stop(s->arg);
}

static void
on_dump(evutil_socket_t sig, short what, void *arg)
{
	struct childproc_signals *s = arg;
	char *text = childproc_dump_text(s->dump, s->arg);

	(void)sig;
	(void)what;
	if (text != NULL)
		log_info("state dump:\n%s", text);
	free(text);
}

int
childproc_signals_init(struct childproc_signals *s, struct event_base *base,
		       void (*stop)(void *arg), childproc_dump_fn dump, void *arg)
{
	static const int sigs[3] = {SIGTERM, SIGINT, SIGUSR2};
	int i;

	memset(s, 0, sizeof(*s));
	s->stop = stop;
	s->dump = dump;
	s->arg = arg;
	for (i = 0; i < 3; i++) {
		s->ev[i] = evsignal_new(base, sigs[i], sigs[i] == SIGUSR2 ? on_dump : on_stop, s);
		if (s->ev[i] == NULL || event_add(s->ev[i], NULL) != 0) {
			childproc_signals_clear(s);
			return -1;
		}
	}
	return 0;
}

void
childproc_signals_clear(struct childproc_signals *s)
{
	int i;

	for (i = 0; i < 3; i++) {
		if (s->ev[i] != NULL)
			event_free(s->ev[i]);
		s->ev[i] = NULL;
	}
}

char *
childproc_fqdn(void)
{
	char host[256];
	struct addrinfo hints, *res = NULL;
	char *out;

	if (gethostname(host, sizeof(host)) != 0)
		snprintf(host, sizeof(host), "localhost");
	host[sizeof(host) - 1] = '\0';
	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = AI_CANONNAME;
	if (getaddrinfo(host, NULL, &hints, &res) == 0 && res != NULL && res->ai_canonname != NULL)
		out = strdup(res->ai_canonname);
	else
		out = strdup(host);
	if (res != NULL)
		freeaddrinfo(res);
	if (out == NULL)
		abort();
	return out;
}
