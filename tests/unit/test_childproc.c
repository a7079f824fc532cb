/*
 * lib/core/childproc: what nodepool-web, nodepool-launcher and
 * nodepool-builder share at start-up. The CONFIG ack and READY messages are
 * checked field by field; the signal handlers are driven by real signals
 * raised at this process on a real libevent base.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "childproc.h"
#include "version.h"

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
