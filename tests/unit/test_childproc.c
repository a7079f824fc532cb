/*
 * lib/core/childproc: what nodepool-web, nodepool-launcher and
 * nodepool-builder share at start-up and on their channel to nodepoold.
 * The CONFIG ack and READY messages are checked field by field; the signal
 * handlers are driven by real signals raised at this process on a real
 * libevent base; the channel's child side by real messages over a real
 * socketpair, with this test playing nodepoold.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "lib/core/chan.h"
#include "lib/core/childproc.h"
#include "lib/core/clock.h"
#include "lib/core/version.h"

/* ---- CONFIG -------------------------------------------------------------- */

struct applied {
	int calls;
	int fail;
	json_t *seen;
};

static int
apply(void *arg, const json_t *slice, char *err, size_t errlen)
{
	struct applied *a = arg;

	a->calls++;
	json_decref(a->seen);
	a->seen = json_deep_copy(slice);
	if (a->fail) {
		snprintf(err, errlen, "provider p: no such driver");
		return -1;
	}
	return 0;
}

Test(childproc, config_applied_acks_ok)
{
	struct ipc_config c = {.generation = 7, .config = "{\"name\": \"p\"}"};
	struct applied a = {0};
	struct ipc_msg ack;
	char err[256];

	cr_assert_eq(childproc_config(&c, "config slice", apply, &a, &ack, err, sizeof(err)), 0);
	cr_assert_eq(a.calls, 1);
	cr_assert_str_eq(json_string_value(json_object_get(a.seen, "name")), "p");
	cr_assert_eq(ack.type, IPC_CONFIG_ACK);
	cr_assert_eq(ack.u.config_ack.generation, 7);
	cr_assert(ack.u.config_ack.ok);
	cr_assert_eq(ack.u.config_ack.errors.n, 0);
	ipc_msg_clear(&ack);
	json_decref(a.seen);
}

Test(childproc, config_not_json_names_the_slice)
{
	struct ipc_config c = {.generation = 3, .config = "{\"name\": "};
	struct applied a = {0};
	struct ipc_msg ack;
	char err[256];

	cr_assert_eq(childproc_config(&c, "web slice", apply, &a, &ack, err, sizeof(err)), -1);
	cr_assert_eq(a.calls, 0, "nothing applied from text that does not parse");
	cr_assert_eq(ack.u.config_ack.generation, 3);
	cr_assert_not(ack.u.config_ack.ok);
	cr_assert_eq(ack.u.config_ack.errors.n, 1);
	cr_assert_str_eq(ack.u.config_ack.errors.v[0], err);
	cr_assert(strncmp(err, "web slice: ", 11) == 0, "%s", err);
	cr_assert(strstr(err, "(line 1)") != NULL, "%s", err);
	ipc_msg_clear(&ack);
}

Test(childproc, config_refused_carries_the_reason)
{
	struct ipc_config c = {.generation = 9, .config = "{}"};
	struct applied a = {.fail = 1};
	struct ipc_msg ack;
	char err[256];

	cr_assert_eq(childproc_config(&c, "config slice", apply, &a, &ack, err, sizeof(err)), -1);
	cr_assert_eq(a.calls, 1);
	cr_assert_not(ack.u.config_ack.ok);
	cr_assert_eq(ack.u.config_ack.errors.n, 1);
	cr_assert_str_eq(ack.u.config_ack.errors.v[0], "provider p: no such driver");
	cr_assert_str_eq(err, "provider p: no such driver");
	ipc_msg_clear(&ack);
	json_decref(a.seen);
}

/* ---- READY --------------------------------------------------------------- */

Test(childproc, ready_fields)
{
	struct ipc_msg m;

	childproc_ready(&m, "fake-provider", 0x1000058ee180040LL);
	cr_assert_eq(m.type, IPC_READY);
	cr_assert_str_eq(m.u.ready.provider, "fake-provider");
	cr_assert_eq(m.u.ready.pid, getpid());
	cr_assert_eq(m.u.ready.zk_session, 0x1000058ee180040LL);
	cr_assert_str_eq(m.u.ready.version, NP_VERSION);
	ipc_msg_clear(&m);
}

/* ---- --channel ----------------------------------------------------------- */

Test(childproc, channel_must_be_fd_3)
{
	cr_assert_eq(childproc_channel_check("nodepool-web", 5), -1);
}

/* ---- dump and signals ---------------------------------------------------- */

struct proc {
	int stops, dumps;
	struct event_base *base;
};

static void
dump(void *arg, struct evbuffer *out)
{
	evbuffer_add_printf(out, "requests: %d\nnodes: none", 2);
}

static void
dump_counted(void *arg, struct evbuffer *out)
{
	struct proc *p = arg;

	p->dumps++;
	dump(NULL, out);
}

static void
stop(void *arg)
{
	struct proc *p = arg;

	p->stops++;
	event_base_loopexit(p->base, NULL);
}

Test(childproc, dump_text_is_the_whole_buffer)
{
	char *text = childproc_dump_text(dump, NULL);

	cr_assert_str_eq(text, "requests: 2\nnodes: none");
	free(text);
}

static void
raise_later(evutil_socket_t fd, short what, void *arg)
{
	raise(*(int *)arg);
}

/* Raise sig from inside the loop and run the loop until stop() ends it
 * (a timeout ends it too, leaving stops as it is). */
static void
run_with(struct proc *p, int sig, int then_term)
{
	static int sigs[2];
	struct timeval soon = {0, 10000}, later = {0, 50000}, limit = {10, 0};
	struct event *e1, *e2 = NULL;

	sigs[0] = sig;
	sigs[1] = SIGTERM;
	e1 = evtimer_new(p->base, raise_later, &sigs[0]);
	evtimer_add(e1, &soon);
	if (then_term) {
		e2 = evtimer_new(p->base, raise_later, &sigs[1]);
		evtimer_add(e2, &later);
	}
	event_base_loopexit(p->base, &limit);
	event_base_dispatch(p->base);
	event_free(e1);
	if (e2 != NULL)
		event_free(e2);
}

Test(childproc, sigterm_and_sigint_stop)
{
	struct proc p = {0};
	struct childproc_signals s;

	p.base = event_base_new();
	cr_assert_eq(childproc_signals_init(&s, p.base, stop, dump_counted, &p), 0);
	run_with(&p, SIGTERM, 0);
	cr_assert_eq(p.stops, 1);
	run_with(&p, SIGINT, 0);
	cr_assert_eq(p.stops, 2);
	cr_assert_eq(p.dumps, 0);
	childproc_signals_clear(&s);
	childproc_signals_clear(&s); /* twice is fine */
	event_base_free(p.base);
}

Test(childproc, sigusr2_dumps_without_stopping)
{
	struct proc p = {0};
	struct childproc_signals s;

	p.base = event_base_new();
	cr_assert_eq(childproc_signals_init(&s, p.base, stop, dump_counted, &p), 0);
	/* USR2 first: the loop goes on (no stop) until the TERM after it */
	run_with(&p, SIGUSR2, 1);
	cr_assert_eq(p.dumps, 1);
	cr_assert_eq(p.stops, 1);
	childproc_signals_clear(&s);
	event_base_free(p.base);
}

Test(childproc, fqdn_is_a_name)
{
	char *n = childproc_fqdn();

	cr_assert_not_null(n);
	cr_assert_gt(strlen(n), 0);
	free(n);
}

/* ---- the channel's child side (childproc_link) ----------------------------- */

/*
 * A real socketpair: nodepoold's end is a CHAN_SUPERVISOR channel, the
 * process's end a childproc_link; both run on one base, and the test plays
 * nodepoold by sending what it sends and reading what comes back.
 */
struct linked {
	struct event_base *base;
	struct chan *sup;	     /* nodepoold's end */
	struct childproc_link *link; /* the process's end */
	int sup_fd;		     /* nodepoold's fd, for raw bytes */
	struct ipc_msg got[8];	     /* what nodepoold received, in order */
	int ngot;
	int sup_closed;
	/* what the process saw */
	int configs, statuses, metrics, stops, exit_code;
	int64_t last_generation, last_seq;
	char last_provider[64];
};

static void
sup_on_msg(struct chan *ch, struct ipc_msg *msg, void *arg)
{
	struct linked *t = arg;

	if (t->ngot < 8) {
		t->got[t->ngot++] = *msg;
		ipc_msg_init(msg, IPC_NONE); /* moved out */
	}
}

static void
sup_on_close(struct chan *ch, enum chan_event ev, const char *why, void *arg)
{
	struct linked *t = arg;

	t->sup_closed = 1;
}

static void
proc_config(void *arg, const struct ipc_config *c)
{
	struct linked *t = arg;
	struct ipc_msg ack;

	t->configs++;
	t->last_generation = c->generation;
	ipc_msg_init(&ack, IPC_CONFIG_ACK);
	ack.u.config_ack.generation = c->generation;
	ack.u.config_ack.ok = true;
	childproc_link_send(t->link, &ack);
	ipc_msg_clear(&ack);
}

static void
proc_status(void *arg, int64_t seq)
{
	struct linked *t = arg;
	struct ipc_msg m;

	t->statuses++;
	t->last_seq = seq;
	/* started an hour ago, config generation 5 in force */
	childproc_status_init(&m, seq, 5, np_mono_s() - 3600);
	m.u.status.state = IPC_WS_RUNNING;
	childproc_link_send(t->link, &m);
	ipc_msg_clear(&m);
}

static void
proc_metrics(void *arg, const struct ipc_metrics *m)
{
	struct linked *t = arg;

	t->metrics++;
	snprintf(t->last_provider, sizeof(t->last_provider), "%s", m->provider);
}

static void
proc_stop(void *arg)
{
	struct linked *t = arg;

	t->stops++;
}

static const struct childproc_ops proc_ops = {
    .config = proc_config,
    .status = proc_status,
    .metrics = proc_metrics,
    .dump = dump,
    .stop = proc_stop,
};

static const struct childproc_ops proc_ops_no_metrics = {
    .config = proc_config,
    .status = proc_status,
    .dump = dump,
    .stop = proc_stop,
};

static void
linked_open(struct linked *t, const struct childproc_ops *ops)
{
	int fds[2];
	char err[256];

	memset(t, 0, sizeof(*t));
	t->base = event_base_new();
	cr_assert_not_null(t->base);
	cr_assert_eq(chan_socketpair(fds), 0);
	t->sup_fd = fds[0];
	t->sup = chan_new(t->base, fds[0], CHAN_SUPERVISOR, 0, 0, sup_on_msg, sup_on_close, t, err,
			  sizeof(err));
	cr_assert_not_null(t->sup, "%s", err);
	t->link = childproc_link_new(t->base, fds[1], ops, t, &t->exit_code, err, sizeof(err));
	cr_assert_not_null(t->link, "%s", err);
	cr_assert(childproc_link_up(t->link));
}

static void
linked_close(struct linked *t)
{
	int i;

	for (i = 0; i < t->ngot; i++)
		ipc_msg_clear(&t->got[i]);
	childproc_link_free(t->link);
	chan_free(t->sup);
	event_base_free(t->base);
}

/* Runs the loop until *flag reaches want (a stuck test fails after 10 s
 * of nothing, it does not time anything). */
static void
run_until(struct linked *t, const int *flag, int want)
{
	int turns = 0;

	while (*flag < want && turns++ < 1000) {
		struct timeval tick = {0, 10000};
		event_base_loopexit(t->base, &tick);
		event_base_dispatch(t->base);
	}
	cr_assert_geq(*flag, want, "the message never arrived");
}

static void
sup_send(struct linked *t, struct ipc_msg *m)
{
	cr_assert_eq(chan_send(t->sup, m), 0, "%s", chan_last_error(t->sup));
	ipc_msg_clear(m);
}

Test(childproc, link_answers_dump_req_with_the_dump)
{
	struct linked t;
	struct ipc_msg m;

	linked_open(&t, &proc_ops);
	ipc_msg_init(&m, IPC_DUMP_REQ);
	sup_send(&t, &m);
	run_until(&t, &t.ngot, 1);
	cr_assert_eq(t.got[0].type, IPC_DUMP_REPLY);
	cr_assert_str_eq(t.got[0].u.dump_reply.text, "requests: 2\nnodes: none");
	cr_assert_eq(t.stops, 0);
	linked_close(&t);
}

Test(childproc, link_status_req_gets_the_common_figures)
{
	struct linked t;
	struct ipc_msg m;

	linked_open(&t, &proc_ops);
	ipc_msg_init(&m, IPC_STATUS_REQ);
	m.u.status_req.seq = 42;
	sup_send(&t, &m);
	run_until(&t, &t.ngot, 1);
	cr_assert_eq(t.statuses, 1);
	cr_assert_eq(t.got[0].type, IPC_STATUS);
	cr_assert_eq(t.got[0].u.status.seq, 42, "the reply answers the request it was asked by");
	cr_assert_eq(t.got[0].u.status.generation, 5);
	cr_assert_eq(t.got[0].u.status.state, IPC_WS_RUNNING);
	cr_assert_gt(t.got[0].u.status.rss_kb, 0, "a live process has a resident set");
	cr_assert_geq(t.got[0].u.status.uptime_s, 3600);
	linked_close(&t);
}

Test(childproc, link_config_reaches_the_process_and_is_acked)
{
	struct linked t;
	struct ipc_msg m;

	linked_open(&t, &proc_ops);
	ipc_msg_init(&m, IPC_CONFIG);
	m.u.config.generation = 12;
	ipc_set_str(&m.u.config.provider, "rax-dfw");
	ipc_set_str(&m.u.config.config, "{}");
	sup_send(&t, &m);
	run_until(&t, &t.ngot, 1);
	cr_assert_eq(t.configs, 1);
	cr_assert_eq(t.last_generation, 12);
	cr_assert_eq(t.got[0].type, IPC_CONFIG_ACK);
	cr_assert_eq(t.got[0].u.config_ack.generation, 12);
	linked_close(&t);
}

Test(childproc, link_metrics_go_to_the_slot_or_nowhere)
{
	struct linked t;
	struct ipc_msg m;

	linked_open(&t, &proc_ops);
	ipc_msg_init(&m, IPC_METRICS);
	ipc_set_str(&m.u.metrics.provider, "rax-dfw");
	ipc_set_str(&m.u.metrics.record, "{}");
	sup_send(&t, &m);
	run_until(&t, &t.metrics, 1);
	cr_assert_str_eq(t.last_provider, "rax-dfw");
	linked_close(&t);

	/* a process without the slot ignores them and carries on: a later
	 * STATUS_REQ is still answered */
	linked_open(&t, &proc_ops_no_metrics);
	ipc_msg_init(&m, IPC_METRICS);
	ipc_set_str(&m.u.metrics.provider, "rax-dfw");
	ipc_set_str(&m.u.metrics.record, "{}");
	sup_send(&t, &m);
	ipc_msg_init(&m, IPC_STATUS_REQ);
	m.u.status_req.seq = 1;
	sup_send(&t, &m);
	run_until(&t, &t.ngot, 1);
	cr_assert_eq(t.got[0].type, IPC_STATUS);
	cr_assert_eq(t.stops, 0);
	linked_close(&t);
}

Test(childproc, link_stop_stops_with_code_0)
{
	struct linked t;
	struct ipc_msg m;

	linked_open(&t, &proc_ops);
	ipc_msg_init(&m, IPC_STOP);
	sup_send(&t, &m);
	run_until(&t, &t.stops, 1);
	cr_assert_eq(t.exit_code, 0);
	cr_assert(childproc_link_up(t.link), "STOP does not close the channel");
	linked_close(&t);
}

Test(childproc, link_nodepoold_gone_stops_with_code_0)
{
	struct linked t;
	struct ipc_msg m;

	linked_open(&t, &proc_ops);
	chan_free(t.sup);
	t.sup = NULL;
	run_until(&t, &t.stops, 1);
	cr_assert_eq(t.exit_code, 0);
	cr_assert_not(childproc_link_up(t.link));
	/* a send after the close is a no-op, not a crash */
	childproc_ready(&m, "web", 0);
	childproc_link_send(t.link, &m);
	ipc_msg_clear(&m);
	linked_close(&t);
}

Test(childproc, link_malformed_frame_stops_with_code_1)
{
	struct linked t;
	/* a 1-byte body holding 0xc1, the one byte msgpack never uses */
	static const unsigned char bad[] = {0, 0, 0, 1, 0xc1};

	linked_open(&t, &proc_ops);
	cr_assert_eq(write(t.sup_fd, bad, sizeof(bad)), (ssize_t)sizeof(bad));
	run_until(&t, &t.stops, 1);
	cr_assert_eq(t.exit_code, 1, "a malformed message from nodepoold is fatal (style rule 6)");
	cr_assert_not(childproc_link_up(t.link));
	linked_close(&t);
}

Test(childproc, link_malformed_frame_keeps_an_exit_code_already_set)
{
	struct linked t;
	static const unsigned char bad[] = {0, 0, 0, 1, 0xc1};

	linked_open(&t, &proc_ops);
	t.exit_code = 100; /* the process had decided: a config that cannot run */
	cr_assert_eq(write(t.sup_fd, bad, sizeof(bad)), (ssize_t)sizeof(bad));
	run_until(&t, &t.stops, 1);
	cr_assert_eq(t.exit_code, 100);
	linked_close(&t);
}

Test(childproc, link_null_is_standalone)
{
	struct ipc_msg m;

	cr_assert_not(childproc_link_up(NULL));
	childproc_ready(&m, "builder", 0);
	childproc_link_send(NULL, &m); /* a process started on its own: nothing to send to */
	ipc_msg_clear(&m);
	childproc_link_free(NULL);
}
