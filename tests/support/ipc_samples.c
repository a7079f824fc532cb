#include "tests/support/ipc_samples.h"

#include <stdlib.h>

static void
must(int rc)
{
	if (rc != 0)
		abort();
}

static void
sample_status(struct ipc_status *s, int variant)
{
	struct ipc_pool *p;

	if (variant == 1) {
		s->seq = 0;
		s->generation = 0;
		s->state = IPC_WS_STOPPING;
		s->zk_state = IPC_ZK_EXPIRED;
		return;
	}
	s->seq = 42;
	s->generation = 7;
	s->state = IPC_WS_RUNNING;
	s->zk_state = IPC_ZK_CONNECTED;
	s->accepted = 1000;
	s->fulfilled = 990;
	s->declined = 3;
	s->failed = 7;
	s->launching = 12;
	must(ipc_counts_add(&s->nodes, "ready", 5));
	must(ipc_counts_add(&s->nodes, "building", 12));
	must(ipc_counts_add(&s->nodes, "in-use", 70000));
	p = ipc_pools_add(&s->pools, "main");
	p->requests = 4;
	p = ipc_pools_add(&s->pools, "gpu");
	p->paused = true;
	p->requests = 1;
	must(ipc_set_str(&s->last_error, "quota exceeded: instances (ünïcode)"));
	s->rss_kb = 20480;
	s->cpu_ms = 123456789012LL;
	s->uptime_s = 86400;
	must(ipc_set_str(&s->metrics, "{\"provider\":\"rax-dfw\",\"starts\":1}"));
	s->zk_queue = 3;
	must(ipc_strv_push(&s->peers, "nl02.example.org main nl02-PoolWorker.rax-dfw-main-0f"));
	s->lock_attempts = 1001;
	s->lock_lost = 1;
	s->pss_kb = 10240;
}

static void
sample_workers(struct ipc_workers *w, int variant)
{
	struct ipc_worker_info *i;

	if (variant == 1)
		return;
	i = ipc_workers_add(w, "rax-dfw");
	i->kind = IPC_KIND_PROVIDER;
	i->pid = 4242;
	must(ipc_set_str(&i->state, "running"));
	i->uptime_s = 3600;
	i->restarts = 2;
	i->zk_state = IPC_ZK_CONNECTED;
	i->accepted = 10;
	i->fulfilled = 9;
	i->declined = 1;
	i->failed = 0;
	must(ipc_counts_add(&i->nodes, "ready", 3));
	must(ipc_set_str(&i->last_error, "boom"));
	must(ipc_strv_push(&i->peers, "nl02.example.org main nl02-PoolWorker.rax-dfw-main-0f"));
	i->lock_attempts = 11;
	i->lock_lost = 1;
	i->rss_kb = 9216;
	i->pss_kb = 4608;
	i = ipc_workers_add(w, "builder");
	i->kind = IPC_KIND_BUILDER;
	i->pid = 0;
	must(ipc_set_str(&i->state, "backoff"));
	i->zk_state = IPC_ZK_UNKNOWN;
}

void
ipc_sample(enum ipc_type type, int variant, struct ipc_msg *m)
{
	ipc_msg_init(m, type);
	switch (type) {
	case IPC_READY:
		must(ipc_set_str(&m->u.ready.provider, variant ? "builder" : "rax-dfw"));
		m->u.ready.pid = variant ? 1 : 31337;
		m->u.ready.zk_session = variant ? 0 : -72057594037927935LL;
		must(ipc_set_str(&m->u.ready.version, variant ? "" : "0.1.0+c"));
		break;
	case IPC_STATUS:
		sample_status(&m->u.status, variant);
		break;
	case IPC_CONFIG_ACK:
		m->u.config_ack.generation = variant ? 0 : 3;
		m->u.config_ack.ok = variant;
		if (!variant) {
			must(ipc_strv_push(&m->u.config_ack.errors,
					   "nodepool.yaml:12:5: unknown label \"xenial\""));
			must(ipc_strv_push(&m->u.config_ack.errors,
					   "nodepool.yaml:20:1: max-servers"));
		}
		break;
	case IPC_DUMP_REPLY:
		must(ipc_set_str(&m->u.dump_reply.text,
				 variant ? "" : "requests:\n  100-0000000001 pending\n"));
		break;
	case IPC_CONFIG:
		m->u.config.generation = variant ? 0 : 9000000000LL;
		must(ipc_set_str(&m->u.config.provider, "rax-dfw"));
		must(ipc_set_str(
		    &m->u.config.config,
		    variant ? "{}"
			    : "{\"name\":\"rax-dfw\",\"driver\":\"openstack\",\"pools\":[]}"));
		break;
	case IPC_STATUS_REQ:
		m->u.status_req.seq = variant ? 0 : 65536;
		break;
	case IPC_STOP:
		m->u.stop.graceful = !variant;
		break;
	case IPC_METRICS:
		must(ipc_set_str(&m->u.metrics.provider, variant ? "p" : "rax-dfw"));
		must(ipc_set_str(&m->u.metrics.record,
				 variant ? "{}" : "{\"provider\":\"rax-dfw\",\"starts\":3}"));
		break;
	case IPC_CTL_STATUS:
		m->u.ctl_status.json = !variant;
		break;
	case IPC_CTL_RESTART:
		must(ipc_set_str(&m->u.ctl_restart.provider, variant ? "builder" : "rax-dfw"));
		break;
	case IPC_CTL_STATUS_REPLY:
		sample_workers(&m->u.ctl_status_reply.workers, variant);
		break;
	case IPC_CTL_RESULT:
		m->u.ctl_result.ok = variant;
		must(
		    ipc_set_str(&m->u.ctl_result.message, variant ? "reloaded" : "config refused"));
		if (!variant)
			must(ipc_strv_push(&m->u.ctl_result.errors, "nodepool.yaml:3:1: bad"));
		break;
	case IPC_JOB:
		m->u.job.id = variant ? 0 : 42;
		must(ipc_set_str(&m->u.job.kind, variant ? "upload" : "build"));
		must(ipc_set_str(&m->u.job.spec,
				 variant ? "{}" : "{\"argv\":[\"disk-image-create\",\"-x\"]}"));
		break;
	case IPC_JOB_DONE:
		m->u.job_done.id = variant ? 0 : 42;
		m->u.job_done.ok = !variant;
		if (variant)
			must(ipc_set_str(&m->u.job_done.error, "upload failed: 503"));
		else
			must(ipc_set_str(&m->u.job_done.result, "{\"external_id\":\"img-1\"}"));
		break;
	default:
		break;
	}
}
