/*
 * The kubernetes, openshift and openshiftpods drivers: one state-machine
 * adapter (drivers/statemachine/adapter.h) in three flavours, following
 * upstream Nodepool's nodepool/driver/kubernetes, openshift and
 * openshiftpods for what is created and what the node carries. Upstream
 * runs each launch as a thread of blocking calls; here each launch is a
 * state machine of non-blocking calls (lib/net/http.h) on the worker's
 * loop, and the framework supplies launch retries, launch-timeout, quota,
 * leak cleanup and node records.
 *
 * What a node of each label type is:
 *   kubernetes `namespace`: a namespace "<pool>-<node id>" labelled
 *     nodepool_node_id / nodepool_provider_name / nodepool_pool_name,
 *     a service account zuul-worker, a RoleBinding to it of upstream's
 *     Role "zuul" rules (the namespace's workload resources), and its
 *     token (see "tokens" and "cluster roles" below). external_id: the
 *     namespace; connection_type "namespace"; connection_port the
 *     credential object Zuul reads: {name, namespace, host, skiptls,
 *     token, user, ca_crt} (ca_crt: the CA's PEM in base64, which Zuul
 *     writes as certificate-authority-data; left out when skiptls, as
 *     upstream).
 *   kubernetes `pod`: the same namespace with upstream's restricted rules
 *     (pods get/list, exec, logs, port-forward), bound to the namespace's
 *     default account (TokenRequest tokens) or zuul-worker, plus a pod
 *     named after the label; the node is ready when the pod is Running.
 *     connection_type "kubectl", interface_ip the pod name,
 *     connection_port the credential with "pod" added; host_id the
 *     Kubernetes node the pod runs on.
 *   kubernetes `pod` with namespace-reuse (nodepoold's own, opt-in): a
 *     pod "<label>-<node id>" in a warm namespace of its label, its token
 *     bound to the pod; external_id "<namespace>/<pod>"; the credential
 *     as above (see "warm namespaces").
 *
 * Tokens: a TokenRequest (POST serviceaccounts/<sa>/token) for
 * token-lifetime seconds, one call; the credential's ca_crt is then the
 * context's CA. Upstream's token secret (kubernetes.io/service-account-
 * token, filled by the token controller, read once the pod runs; never
 * expires) when token-lifetime is 0, the server has no TokenRequest API,
 * grants less than half the lifetime asked for, or the context has no
 * CA. API calls per node (bench/k8s_load.sh): pod 5 (namespace, binding,
 * pod, token, delete), namespace 5 (namespace, account, binding, token,
 * delete); upstream's 8 and more. Fewer would lose what upstream
 * guarantees: the namespace is the unit of confinement, a RoleBinding in
 * it the only grant RBAC confines to it, and the pod and the token are
 * what Zuul uses. A pod label with namespace-reuse keeps the namespace
 * (and its binding) between nodes and binds each token to its node's pod
 * instead: 3 calls (pod, token, pod delete) once its namespaces are warm.
 *   openshift `project` / `pod`: as above with a ProjectRequest instead of
 *     a namespace (connection_type "project" for projects), and a
 *     RoleBinding of the ClusterRole admin instead of a Role. A
 *     ProjectRequest cannot carry labels, so the nodepool_* metadata goes
 *     into its description (the project's openshift.io/description
 *     annotation) as JSON; leak cleanup reads it back (upstream guesses
 *     ownership from the project name).
 *   openshiftpods: a pod "<label>-<node id>" in the existing project named
 *     by the pool, with the nodepool_* labels; the credential is the
 *     provider's own (its kubeconfig token and CA), plus "pod".
 *
 * Pods and namespaces (projects) are followed by list + watch (see
 * "watches" below), not read per node: a launch sleeps until the watch
 * says its pod runs, a delete until it says the object went.
 *
 * A pod that fails (phase Failed, an image that cannot be pulled:
 * ErrImagePull, ImagePullBackOff, InvalidImageName, ErrImageNeverPull) fails
 * its launch attempt at once; a pod still Pending (unschedulable...) after
 * the provider's boot-timeout fails it with the scheduler's reason. The
 * framework then deletes what the attempt created and retries up to
 * launch-retries.
 *
 * Label keys (nodepool-made pods): image, image-pull (IfNotPresent),
 * python-path (auto), shell-type, cpu, memory (MiB), storage (MB), cpu-limit,
 * memory-limit, storage-limit (else the pool's default-label-*-limit, else
 * the request), gpu with gpu-resource, extra-resources, env, node-selector,
 * privileged, scheduler-name, volumes, volume-mounts, labels, dynamic-labels
 * ({request.id}, {request.requestor}, {request.event_id},
 * {request.tenant_name}, {node.id} formatted), annotations,
 * image-pull-secrets. Labels with `spec` use it as the pod spec verbatim.
 * Quota per node: 1 instance, cores = cpu, ram = memory, plus
 * extra-resources (pool default-label-* when the label has none).
 */
#include "drivers/statemachine/statemachine.h"

#include <sys/queue.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "lib/net/http.h"
#include "lib/config/jsonget.h"
#include "drivers/kubernetes/k8s_answer.h"
#include "drivers/kubernetes/kubeconfig.h"
#include "lib/core/log.h"
#include "lib/core/clock.h"
#include "lib/core/privsep.h"
#include "lib/net/urlsafe.h"

/* A name from a node record (external_id) or the cluster as one URL path
 * segment (urlsafe.h): "../../secrets/x" names no other object. "-" (no
 * such object) when too long to be a name. */
#define K8S_SEG_MAX 768
#define SEG(s)	    k8s_seg((s), (char[K8S_SEG_MAX]){0})
static const char *
k8s_seg(const char *s, char *buf)
{
	return url_segment(s != NULL ? s : "", buf, K8S_SEG_MAX) != NULL ? buf : "-";
}

#define K8S_USER "zuul-worker"
/* namespace-reuse: the label naming a warm namespace's node label (the
 * namespace has no nodepool_node_id: it outlives its nodes) */
#define K8S_WARM_LABEL	 "nodepool_warm_label"
#define K8S_WARM_QUOTA	 "nodepool-one-pod"
#define K8S_DEFAULT_SA	 "default" /* the account the controller makes in every namespace */
#define K8S_CALL_TIMEOUT 30.0	   /* s per API call */
#define K8S_POLL_TOKEN	 0.2	   /* s between reads of the token secret */
#define K8S_POLL_POD	 0.5	   /* s between reads of a Pending pod */
#define K8S_POLL_DELETE	 0.5	   /* s between reads of a deleted namespace */
#define K8S_BOOT_TIMEOUT 300	   /* upstream waits a fixed 300 reads, 1 s apart */
#define K8S_MAX_INFLIGHT 32
/* Watches (the API concepts' "efficient detection of changes"): pods and
 * namespaces (projects) are followed by one watch each instead of reads
 * per node. */
#define K8S_WATCH_SECONDS  300	 /* timeoutSeconds asked for; then resumed */
#define K8S_WATCH_FALLBACK 30.0	 /* s: a waiting node reads its object itself this often */
#define K8S_WATCH_BACKOFF  5.0	 /* s: cap on the delay before a failed watch restarts */
#define K8S_GONE_KEEP	   120.0 /* s: deletions remembered for deletes that race the watch */
/* Tokens (TokenRequest): asked for this long by default (token-lifetime);
 * a token dies with its service account, so with the node's namespace,
 * whatever it asks for. */
#define K8S_TOKEN_LIFETIME 31536000LL /* s: 365 days */
#define K8S_TOKEN_MIN	   600	      /* s: the API's minimum */
#define K8S_TOKEN_MAX	   4294967295LL
/* after a ClusterRole could not be made for a reason other than being
 * forbidden, per-namespace Roles for this long before asking again */
#define K8S_CROLE_RETRY 60.0

enum k8s_flavor { K8S_KUBERNETES, K8S_OPENSHIFT, K8S_OPENSHIFTPODS };

struct kop;	 /* a listing or resource delete in flight */
struct kwarm;	 /* a warm namespace made ahead of demand */
struct kwatch;	 /* a list + watch of one collection */
struct kmachine; /* a create or delete */

static int k8s_label_quota_fill(const struct sm_label *l, struct drv_quota *out);
static void warm_ahead(struct sm_adapter *a);

struct sm_adapter {
	const struct sm_env *env;
	enum k8s_flavor flavor;
	struct k8s_conn conn;
	struct http_client *http;
	char auth[8192]; /* "Authorization: ..." or "" */
	int stopped;
	unsigned long long calls, creates, deletes;
	TAILQ_HEAD(, kop) ops;
	/* pods (one per pool project for openshiftpods), then namespaces or
	 * projects (not for openshiftpods) */
	struct kwatch **watches;
	size_t nwatches;
	struct kwatch *ns_watch;
	TAILQ_HEAD(, kmachine) waiters; /* machines asleep until their object changes */
	/* the node's token: asked for with the TokenRequest API for
	 * token_lifetime seconds, or (token_lifetime 0, a server without
	 * it, one that grants less, no CA to hand on) upstream's token
	 * secret; see "tokens" below */
	long long token_lifetime;
	int token_secret; /* 1: the token secret for every node from now on */
	/* kubernetes: the ClusterRoles bound in each node's namespace, made
	 * once (see "cluster roles" below); [0] pod labels, [1] namespace */
	enum { CR_UNKNOWN, CR_ASKING, CR_READY, CR_NONE } crole[2];
	double crole_retry_at[2]; /* monotonic: CR_NONE after a failure lasts until then */
	struct http_req *crole_req[2];
	TAILQ_HEAD(, kmachine) crole_waiters; /* machines waiting for a ClusterRole */
	/* namespace-reuse (see "warm namespaces"): warm namespace -> the pod
	 * name of the node that holds it (launching, ready or deleting), or
	 * "" for one being deleted by us; never handed to another node */
	json_t *claims;
	unsigned long long warm_made, warm_reused, warm_deleted, warm_ahead;
	TAILQ_HEAD(, kwarm) warming; /* warm namespaces being made ahead */
};

static const char *
flavor_name(enum k8s_flavor f)
{
	return f == K8S_KUBERNETES  ? "kubernetes"
	       : f == K8S_OPENSHIFT ? "openshift"
				    : "openshiftpods";
}

/* ---- calls ----------------------------------------------------------------------------------- */

/* The API a path belongs to, for retry logs and counts (lib/net/http.h):
 * "<group>/<version>/<resource>" ("core/v1/pods",
 * "authorization.openshift.io/v1/rolebindings"); "kubernetes" for a path
 * of no API group. */
static void
k8s_api_label(const char *path, char *buf, size_t len)
{
	char seg[6][64];
	const char *s = path, *res;
	int n = 0, g;

	while (*s == '/')
		s++;
	while (n < 6 && *s != '\0' && *s != '?') {
		size_t k = strcspn(s, "/?");
		snprintf(seg[n++], sizeof(seg[0]), "%.*s", (int)(k < 63 ? k : 63), s);
		s += k;
		while (*s == '/')
			s++;
	}
	g = n >= 2 && strcmp(seg[0], "api") == 0    ? 1
	    : n >= 3 && strcmp(seg[0], "apis") == 0 ? 2
						    : 0;
	if (g == 0) {
		snprintf(buf, len, "kubernetes");
		return;
	}
	/* the resource: after namespaces/<ns>/ when namespaced */
	res = n > g + 3 && strcmp(seg[g + 1], "namespaces") == 0 ? seg[g + 3]
	      : n > g + 1					 ? seg[g + 1]
								 : "";
	if (snprintf(buf, len, "%s/%s/%s", g == 1 ? "core" : seg[1], seg[g], res) >= (int)len)
		buf[len - 1] = '\0'; /* a label cut short is still a label */
}

/* Start a call: method on server + path, body (JSON, borrowed) or NULL. */
static struct http_req *
kcall(struct sm_adapter *a, const char *method, const char *path, const json_t *body, http_cb cb,
      void *arg)
{
	struct http_request_params p;
	const char *hdrs[4];
	char url[2048], api[256];
	char *data = NULL;
	struct http_req *r;
	int n = 0;

	snprintf(url, sizeof(url), "%s%s", a->conn.server, path);
	k8s_api_label(path, api, sizeof(api));
	hdrs[n++] = "Accept: application/json";
	if (body != NULL)
		hdrs[n++] = "Content-Type: application/json";
	if (a->auth[0] != '\0')
		hdrs[n++] = a->auth;
	hdrs[n] = NULL;
	memset(&p, 0, sizeof(p));
	p.method = method;
	p.url = url;
	p.headers = hdrs;
	p.api = api;
	if (body != NULL) {
		data = json_dumps(body, JSON_COMPACT);
		p.body = data;
		p.body_len = data != NULL ? strlen(data) : 0;
	}
	a->calls++;
	r = http_request(a->http, &p, cb, arg);
	free(data);
	return r;
}

/* Append a URL-encoded (query value) s to buf. */
static void
urlenc(char *buf, size_t len, const char *s)
{
	size_t n = strlen(buf);
	static const char hex[] = "0123456789ABCDEF";

	for (; *s != '\0' && n + 4 < len; s++) {
		unsigned char c = (unsigned char)*s;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '_' || c == '.' || c == '~')
			buf[n++] = (char)c;
		else {
			buf[n++] = '%';
			buf[n++] = hex[c >> 4];
			buf[n++] = hex[c & 15];
		}
	}
	buf[n] = '\0';
}

/* ---- label settings -----------------------------------------------------------------------------
 */

/* The label's key, else the pool's default-label-<key>, else -1. */
static double
label_num(const struct sm_label *l, const char *key)
{
	char dkey[64];
	const json_t *v = json_object_get(l->raw, key);

	if (json_is_number(v))
		return json_number_value(v);
	snprintf(dkey, sizeof(dkey), "default-label-%s", key);
	v = json_object_get(l->pool->raw, dkey);
	if (json_is_number(v))
		return json_number_value(v);
	return -1;
}

static const char *
label_type(const struct sm_adapter *a, const struct sm_label *l)
{
	const char *t = np_json_str(l->raw, "type", NULL);

	if (a->flavor == K8S_OPENSHIFTPODS)
		return "pod";
	return t != NULL ? t : "pod";
}

static int
is_pod_label(const struct sm_adapter *a, const struct sm_label *l)
{
	return strcmp(label_type(a, l), "pod") == 0;
}

/* A kubernetes pod label with namespace-reuse: true (warm namespaces). */
static int
is_reuse_label(const struct sm_adapter *a, const struct sm_label *l)
{
	return a->flavor == K8S_KUBERNETES && is_pod_label(a, l) &&
	       json_is_true(json_object_get(l->raw, "namespace-reuse"));
}

/* "{request.id}"-style fields of a dynamic label value. */
static void
format_dynamic(const char *fmt, const char *node_id, const struct np_request *req, char *out,
	       size_t outlen)
{
	size_t n = 0;
	const char *p = fmt;

	out[0] = '\0';
	while (*p != '\0' && n + 1 < outlen) {
		const char *end;
		if (*p == '{' && (end = strchr(p, '}')) != NULL) {
			char key[64];
			const char *v = NULL;
			size_t kl = (size_t)(end - p - 1);
			if (kl < sizeof(key)) {
				memcpy(key, p + 1, kl);
				key[kl] = '\0';
				if (strcmp(key, "node.id") == 0)
					v = node_id;
				else if (req != NULL && strcmp(key, "request.id") == 0)
					v = req->id;
				else if (req != NULL && strcmp(key, "request.requestor") == 0)
					v = req->requestor;
				else if (req != NULL && strcmp(key, "request.event_id") == 0)
					v = req->event_id;
				else if (req != NULL && strcmp(key, "request.tenant_name") == 0)
					v = req->tenant_name;
				if (v != NULL || strncmp(key, "request.", 8) == 0 ||
				    strcmp(key, "node.id") == 0) {
					n += (size_t)snprintf(out + n, outlen - n, "%s",
							      v != NULL ? v : "");
					if (n >= outlen)
						n = outlen - 1;
					p = end + 1;
					continue;
				}
			}
		}
		out[n++] = *p++;
		out[n] = '\0';
	}
}

/* The pod body for label l (nodepool-made or the label's spec). */
static json_t *
pod_body(const struct sm_adapter *a, const struct sm_label *l, const char *name, const json_t *meta,
	 const struct np_request *req)
{
	const json_t *raw = l->raw, *spec = json_object_get(raw, "spec"), *v;
	const char *node_id = json_string_value(json_object_get(meta, "nodepool_node_id"));
	json_t *labels = json_object(), *pod, *md, *podspec;
	const char *k;
	char buf[1024];

	if (json_is_object(json_object_get(raw, "labels")))
		json_object_update(labels, json_object_get(raw, "labels"));
	json_object_foreach((json_t *)json_object_get(raw, "dynamic-labels"), k, v)
	{
		if (!json_is_string(v))
			continue;
		format_dynamic(json_string_value(v), node_id ? node_id : "", req, buf, sizeof(buf));
		json_object_set_new(labels, k, json_string(buf));
	}
	json_object_set_new(labels, "nodepool_node_id", json_string(node_id ? node_id : ""));
	json_object_set_new(labels, "nodepool_provider_name", json_string(a->env->provider_name));
	json_object_set_new(labels, "nodepool_pool_name", json_string(l->pool->name));
	json_object_set_new(labels, "nodepool_node_label", json_string(l->name));
	md = json_pack("{s:s, s:o}", "name", name, "labels", labels);
	if (json_is_object(json_object_get(raw, "annotations")))
		json_object_set(md, "annotations", json_object_get(raw, "annotations"));

	if (json_is_object(spec)) {
		podspec = json_deep_copy(spec);
	} else {
		json_t *c = json_object(), *res = json_object(), *rq = json_object(),
		       *lim = json_object();
		double cpu = label_num(l, "cpu"), mem = label_num(l, "memory"),
		       sto = label_num(l, "storage"), cpul = label_num(l, "cpu-limit"),
		       meml = label_num(l, "memory-limit"), stol = label_num(l, "storage-limit"),
		       gpu = label_num(l, "gpu");
		const json_t *extra = json_object_get(raw, "extra-resources");
		char q[64];

		podspec = json_object();
		json_object_set_new(c, "name", json_string(l->name));
		json_object_set_new(c, "image", json_string(np_json_str(raw, "image", "")));
		json_object_set_new(c, "imagePullPolicy",
				    json_string(np_json_str(raw, "image-pull", "IfNotPresent")));
		json_object_set_new(c, "command", json_pack("[s, s]", "/bin/sh", "-c"));
		json_object_set_new(c, "args", json_pack("[s]", "while true; do sleep 30; done;"));
		if (json_is_array(json_object_get(raw, "env")))
			json_object_set(c, "env", json_object_get(raw, "env"));
		if (cpu >= 0)
			json_object_set_new(rq, "cpu", json_integer((json_int_t)cpu));
		if (mem >= 0) {
			snprintf(q, sizeof(q), "%dMi", (int)mem);
			json_object_set_new(rq, "memory", json_string(q));
		}
		if (sto >= 0) {
			snprintf(q, sizeof(q), "%dM", (int)sto);
			json_object_set_new(rq, "ephemeral-storage", json_string(q));
		}
		if (cpul < 0)
			cpul = cpu;
		if (meml < 0)
			meml = mem;
		if (stol < 0)
			stol = sto;
		if (cpul >= 0)
			json_object_set_new(lim, "cpu", json_integer((json_int_t)cpul));
		if (meml >= 0) {
			snprintf(q, sizeof(q), "%dMi", (int)meml);
			json_object_set_new(lim, "memory", json_string(q));
		}
		if (stol >= 0) {
			snprintf(q, sizeof(q), "%dM", (int)stol);
			json_object_set_new(lim, "ephemeral-storage", json_string(q));
		}
		if (gpu > 0) {
			snprintf(q, sizeof(q), "%g", gpu);
			json_object_set_new(lim, np_json_str(raw, "gpu-resource", "nvidia.com/gpu"),
					    json_string(q));
		}
		json_object_foreach((json_t *)extra, k, v)
		{
			json_object_set(rq, k, (json_t *)v);
			json_object_set(lim, k, (json_t *)v);
		}
		if (json_object_size(rq) > 0)
			json_object_set(res, "requests", rq);
		if (json_object_size(lim) > 0)
			json_object_set(res, "limits", lim);
		json_decref(rq);
		json_decref(lim);
		if (json_object_size(res) > 0)
			json_object_set(c, "resources", res);
		json_decref(res);
		if (json_is_boolean(json_object_get(raw, "privileged")))
			json_object_set_new(
			    c, "securityContext",
			    json_pack("{s:O}", "privileged", json_object_get(raw, "privileged")));
		if (json_is_array(json_object_get(raw, "volume-mounts")))
			json_object_set(c, "volumeMounts", json_object_get(raw, "volume-mounts"));
		json_object_set_new(podspec, "containers", json_pack("[o]", c));
		if (json_is_object(json_object_get(raw, "node-selector")))
			json_object_set(podspec, "nodeSelector",
					json_object_get(raw, "node-selector"));
		if (json_is_string(json_object_get(raw, "scheduler-name")))
			json_object_set(podspec, "schedulerName",
					json_object_get(raw, "scheduler-name"));
		if (json_is_array(json_object_get(raw, "volumes")))
			json_object_set(podspec, "volumes", json_object_get(raw, "volumes"));
		if (json_is_array(json_object_get(raw, "image-pull-secrets")))
			json_object_set(podspec, "imagePullSecrets",
					json_object_get(raw, "image-pull-secrets"));
		json_object_set_new(podspec, "restartPolicy", json_string("Never"));
	}
	pod = json_pack("{s:s, s:s, s:o, s:o}", "apiVersion", "v1", "kind", "Pod", "metadata", md,
			"spec", podspec);
	return pod;
}

/* ---- create and delete machines -------------------------------------------------------------- */

enum kstep {
	K_WARM,	   /* namespace-reuse: a free warm namespace, else make one */
	K_NS,	   /* namespace or project request */
	K_OBJECTS, /* at once: service account, role, role binding */
	K_TREQ,	   /* the account's token (TokenRequest) */
	K_SECRET,  /* or upstream's: the account's token secret */
	K_TOKEN,   /* read the secret until the token controller filled it */
	K_POD,	   /* pod (openshiftpods) */
	K_WAIT,	   /* until the pod runs */
	K_DONE,
	/* deletes */
	D_DELETE,
	D_WAIT,
};

static const char *const kstep_names[] = {
    "warm-namespace", "namespace", "objects",  "token-request", "secret", "token", "pod",
    "pod-wait",	      "done",	   "deleting", "delete-wait",
};

/* One of the calls K_OBJECTS makes at once. */
enum kslot_kind { KS_SA, KS_ROLE, KS_BINDING, KS_POD, KS_QUOTA };
struct kslot {
	struct kmachine *k;
	enum kslot_kind kind;
	struct http_req *h;
	int got, status;
	char *err;
	json_t *resp;
	char what[256];
};

struct kmachine {
	struct sm_machine m; /* first */
	struct sm_adapter *a;
	enum kstep step;
	const struct sm_label *label;
	json_t *meta;
	struct np_request *req;
	char node_id[64];
	char *ns, *pod; /* namespace (project); pod name or NULL */
	const char *sa; /* the service account the node's token is of (static string) */
	char *token, *ca_crt, *host_id;
	double pod_created; /* monotonic */
	/* resuming an earlier launcher's launch (k8s_resume_machine): 1 while
	 * what it made is still to be found (a create finding its object
	 * there goes on; the pod is looked for before one is made), 0 after */
	int resume;
	size_t pool_i; /* openshiftpods deletes: the pool project tried */
	/* waiting on a watch: key "ns/name" (pods) or "name" */
	TAILQ_ENTRY(kmachine) wentry;
	struct kwatch *waiting_on;
	char wkey[600];
	TAILQ_ENTRY(kmachine) centry; /* on crole_waiters */
	int crole_waiting;
	int pod_again; /* the pod was refused for want of the default account: again */
	/* namespace-reuse: the node's pod goes into a warm namespace */
	int reuse;
	int claimed;	       /* ns is claimed (a->claims) for this machine's pod */
	int made_ns;	       /* this machine makes the warm namespace */
	int ns_ready;	       /* ... and its binding is made */
	int pod_maybe;	       /* the pod's create was sent and not refused: it may exist */
	char *pod_uid;	       /* the pod's metadata.uid (the token's boundObjectRef) */
	json_t *full;	       /* warm namespaces whose quota refused our pod: not again */
	double next_read;      /* monotonic: when a waiting machine reads by itself */
	double deleted_at;     /* monotonic: the delete call answered */
	struct kslot slots[5]; /* K_OBJECTS' calls (account, role, binding, pod, quota) */
	int nslots, slots_left;
	/* the call in flight or answered */
	struct http_req *req_h;
	int got, status;
	char *err;
	json_t *resp;
	char what[512];
};

static void
m_answer(const struct http_response *res, void *arg)
{
	struct kmachine *k = arg;

	k->req_h = NULL;
	k->got = 1;
	k->status = res->status;
	free(k->err);
	k->err = res->error != NULL ? strdup(res->error) : NULL;
	json_decref(k->resp);
	k->resp = k8s_answer_json(res->body, res->body_len);
	sm_machine_wake(&k->m);
}

/* Start the step's call; SM_AGAIN until it answers. */
static enum sm_status
m_call(struct kmachine *k, const char *method, const char *path, json_t *body)
{
	snprintf(k->what, sizeof(k->what), "%s %s", method, path);
	k->got = 0;
	k->req_h = kcall(k->a, method, path, body, m_answer, k);
	json_decref(body);
	if (k->req_h == NULL) {
		k->m.error = SM_E_FAILED;
		snprintf(k->m.error_msg, sizeof(k->m.error_msg), "%.200s: cannot start the call",
			 k->what);
		return SM_ERROR;
	}
	k->m.retry_in = 3600; /* woken by the answer */
	return SM_AGAIN;
}

/* The answered call failed: SM_ERROR with its description. */
static enum sm_status
m_fail(struct kmachine *k)
{
	k->m.error = k8s_status_is_quota(k->status, k->resp) ? SM_E_QUOTA : SM_E_FAILED;
	k8s_status_describe(k->what, k->status, k->err, k->resp, k->m.error_msg,
			    sizeof(k->m.error_msg));
	return SM_ERROR;
}

static int
ok_status(const struct kmachine *k)
{
	return k->err == NULL && k->status >= 200 && k->status < 300;
}

static void
m_poll(struct kmachine *k, double s)
{
	k->got = 0;
	k->m.retry_in = s;
}

static void
slot_answer(const struct http_response *res, void *arg)
{
	struct kslot *s = arg;

	s->h = NULL;
	s->got = 1;
	s->status = res->status;
	free(s->err);
	s->err = res->error != NULL ? strdup(res->error) : NULL;
	json_decref(s->resp);
	s->resp = k8s_answer_json(res->body, res->body_len);
	if (--s->k->slots_left == 0)
		sm_machine_wake(&s->k->m);
}

static void
slots_clear(struct kmachine *k)
{
	int i;

	for (i = 0; i < k->nslots; i++) {
		struct kslot *s = &k->slots[i];
		http_cancel(s->h);
		free(s->err);
		json_decref(s->resp);
		memset(s, 0, sizeof(*s));
	}
	k->nslots = 0;
	k->slots_left = 0;
}

/* All answered: 0 when each succeeded (409 AlreadyExists is success for
 * all but the pod: a retried call that made it), else -1 with the first
 * failure copied to k for m_fail. The slots are cleared either way. */
static int
slots_failed(struct kmachine *k)
{
	int i;

	for (i = 0; i < k->nslots; i++) {
		struct kslot *s = &k->slots[i];
		int ok = s->err == NULL && ((s->status >= 200 && s->status < 300) ||
					    (s->kind != KS_POD && s->status == 409));
		if (ok)
			continue;
		k->status = s->status;
		free(k->err);
		k->err = s->err;
		s->err = NULL;
		json_decref(k->resp);
		k->resp = s->resp;
		s->resp = NULL;
		snprintf(k->what, sizeof(k->what), "%s", s->what);
		slots_clear(k);
		return -1;
	}
	slots_clear(k);
	return 0;
}

/* A pod refused because the namespace's service account is not made yet
 * (the ServiceAccount admission plugin answers 403 "error looking up
 * service account <ns>/default: serviceaccount \"default\" not found"):
 * worth repeating in a moment. */
static int
k8s_sa_missing(int status, const json_t *resp)
{
	const char *msg = np_json_str(resp, "message", "");

	return status == 403 && strstr(msg, "service account") != NULL &&
	       strstr(msg, "not found") != NULL;
}

/* Start one of K_OBJECTS' calls (body owned). */
static void
slot_start(struct kmachine *k, enum kslot_kind kind, const char *path, json_t *body)
{
	struct kslot *s = &k->slots[k->nslots++];

	s->k = k;
	s->kind = kind;
	snprintf(s->what, sizeof(s->what), "POST %s", path);
	k->slots_left++;
	s->h = kcall(k->a, "POST", path, body, slot_answer, s);
	json_decref(body);
	if (s->h == NULL) {
		s->got = 1;
		s->err = strdup("cannot start the call");
		k->slots_left--;
	}
}

/* ---- watches ------------------------------------------------------------------------------------
 *
 * As client-go's informers, for the launches and deletes of this provider:
 * a list of the collection (resourceVersion R), then a watch from R
 * (allowWatchBookmarks, timeoutSeconds K8S_WATCH_SECONDS) whose events
 * keep a cache of what each object looks like, resumed from the last
 * resourceVersion seen (an event's or a bookmark's) whenever it ends or
 * drops; a 410 Expired (as an ERROR event or an answer) means that version
 * is too old: list again. A machine that waits for a pod to run or an
 * object to go reads the cache and sleeps until an event for its object
 * wakes it; it reads its object itself only every K8S_WATCH_FALLBACK
 * seconds (a watch that silently stalls) and falls back to reads every
 * K8S_POLL_* when the collection cannot be listed (403/404: a user without
 * cluster-wide rights). resourceVersions are compared for equality only,
 * as the API asks: whether a deleted object is gone is told by its
 * DELETED event, or by a list made after the delete answered.
 */
struct kwatch {
	struct sm_adapter *a;
	char path[1024];  /* the collection, with its query so far ("?labelSelector=..." or "?") */
	const char *what; /* "pods", "namespaces", "projects" (for logs) */
	int pods;	  /* key "ns/name" and a pod summary; else key "name" */
	char rv[256];	  /* resourceVersion to resume from; "" lists first */
	struct http_req *req; /* the list or the watch */
	int watching;	      /* req is the watch */
	struct event *retry_ev;
	int started, synced, unsupported;
	unsigned failures;
	double list_started;  /* monotonic: the last list that answered was asked then */
	double watch_started; /* monotonic */
	unsigned long long events_at_start;
	json_t *objs; /* key -> summary (pods: {s: state, r: why, n: node}) */
	json_t *gone; /* key -> monotonic time its deletion was seen */
	unsigned long long lists, watches, events, expired, drops;
};

static void kwatch_list(struct kwatch *w);
static void kwatch_watch(struct kwatch *w);

static struct kwatch *
kwatch_new(struct sm_adapter *a, const char *collection, const char *what, int pods,
	   const char *selector)
{
	struct kwatch *w = calloc(1, sizeof(*w));

	if (w == NULL)
		abort();
	w->a = a;
	w->what = what;
	w->pods = pods;
	snprintf(w->path, sizeof(w->path), "%s?", collection);
	if (selector != NULL) {
		snprintf(w->path + strlen(w->path), sizeof(w->path) - strlen(w->path),
			 "labelSelector=");
		urlenc(w->path, sizeof(w->path), selector);
		snprintf(w->path + strlen(w->path), sizeof(w->path) - strlen(w->path), "&");
	}
	w->objs = json_object();
	w->gone = json_object();
	return w;
}

static void
kwatch_free(struct kwatch *w)
{
	if (w == NULL)
		return;
	http_cancel(w->req);
	if (w->retry_ev != NULL)
		event_free(w->retry_ev);
	json_decref(w->objs);
	json_decref(w->gone);
	free(w);
}

/* Wake the machines waiting on w: those for key, or all (key NULL). */
static void
kwatch_wake(struct kwatch *w, const char *key)
{
	struct kmachine *k, *next;

	for (k = TAILQ_FIRST(&w->a->waiters); k != NULL; k = next) {
		next = TAILQ_NEXT(k, wentry);
		if (k->waiting_on != w || (key != NULL && strcmp(k->wkey, key) != 0))
			continue;
		TAILQ_REMOVE(&w->a->waiters, k, wentry);
		k->waiting_on = NULL;
		sm_machine_wake(&k->m);
	}
}

static void
waiter_remove(struct kmachine *k)
{
	if (k->waiting_on == NULL)
		return;
	TAILQ_REMOVE(&k->a->waiters, k, wentry);
	k->waiting_on = NULL;
}

static void
waiter_add(struct kmachine *k, struct kwatch *w, const char *key)
{
	waiter_remove(k);
	snprintf(k->wkey, sizeof(k->wkey), "%s", key);
	k->waiting_on = w;
	TAILQ_INSERT_TAIL(&k->a->waiters, k, wentry);
}

/* The cache key of an object (its namespace and name), in buf. */
static const char *
kwatch_key(const struct kwatch *w, const json_t *obj, char *buf, size_t len)
{
	const json_t *md = json_object_get(obj, "metadata");
	const char *name = np_json_str(md, "name", NULL);

	if (name == NULL)
		return NULL;
	if (w->pods)
		snprintf(buf, len, "%s/%s", np_json_str(md, "namespace", ""), name);
	else
		snprintf(buf, len, "%s", name);
	return buf;
}

static json_t *
kwatch_summary(const struct kwatch *w, const json_t *obj)
{
	char why[512];
	const char *nn = NULL;
	enum k8s_pod_state ps;

	if (!w->pods) {
		/* namespaces: a warm one's label and pool, and whether it goes */
		const json_t *md = json_object_get(obj, "metadata"),
			     *lb = json_object_get(md, "labels");
		json_t *sum = json_object();
		const char *wl = np_json_str(lb, K8S_WARM_LABEL, NULL);
		if (wl != NULL) {
			json_object_set_new(sum, "w", json_string(wl));
			json_object_set_new(sum, "p",
					    json_string(np_json_str(lb, "nodepool_pool_name", "")));
		}
		if (json_object_get(md, "deletionTimestamp") != NULL ||
		    strcmp(np_json_str(json_object_get(obj, "status"), "phase", ""),
			   "Terminating") == 0)
			json_object_set_new(sum, "t", json_true());
		return sum;
	}
	ps = k8s_pod_read(obj, why, sizeof(why), &nn);
	return json_pack("{s:i, s:s, s:s?}", "s", (int)ps, "r", why, "n", nn);
}

static void
kwatch_prune_gone(struct kwatch *w)
{
	const char *key;
	json_t *v;
	void *tmp;
	double now = np_mono_s();

	if (json_object_size(w->gone) < 256)
		return;
	json_object_foreach_safe(w->gone, tmp, key, v)
	{
		if (now - json_real_value(v) > K8S_GONE_KEEP)
			json_object_del(w->gone, key);
	}
}

static void
kwatch_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct kwatch *w = arg;

	(void)fd;
	(void)what;
	if (w->a->stopped)
		return;
	if (w->rv[0] != '\0')
		kwatch_watch(w);
	else
		kwatch_list(w);
}

/* Start again after a failure: at once the first time, then backing off. */
static void
kwatch_restart(struct kwatch *w, int relist)
{
	double d = w->failures == 0
		       ? 0
		       : fmin(0.1 * ldexp(1.0, (int)fmin(w->failures, 10)), K8S_WATCH_BACKOFF);
	struct timeval tv;

	if (relist)
		w->rv[0] = '\0';
	if (w->a->stopped)
		return;
	if (w->retry_ev == NULL) {
		w->retry_ev = evtimer_new(w->a->env->base, kwatch_retry_cb, w);
		if (w->retry_ev == NULL)
			abort();
	}
	tv.tv_sec = (time_t)d;
	tv.tv_usec = (suseconds_t)((d - (double)tv.tv_sec) * 1e6);
	evtimer_add(w->retry_ev, &tv);
}

/* The collection cannot be listed or watched with these credentials:
 * the machines read their objects themselves, as before watches. */
static void
kwatch_unsupported(struct kwatch *w, int status, const char *msg)
{
	if (!w->unsupported)
		log_warn("provider %s: cannot watch %s (%d: %s): reading each node's object "
			 "instead",
			 w->a->env->provider_name, w->what, status, msg);
	w->unsupported = 1;
	kwatch_wake(w, NULL);
}

static void
kwatch_list_answer(const struct http_response *res, void *arg)
{
	struct kwatch *w = arg;
	json_t *body = k8s_answer_json(res->body, res->body_len), *items, *it, *objs;
	const char *rv, *key;
	char kb[600], msg[512];
	json_t *v;
	size_t i;

	w->req = NULL;
	items = json_object_get(body, "items");
	rv = np_json_str(json_object_get(body, "metadata"), "resourceVersion", NULL);
	if (res->error == NULL && (res->status == 403 || res->status == 404 || res->status == 405 ||
				   res->status == 401)) {
		k8s_status_describe("list", res->status, res->error, body, msg, sizeof(msg));
		json_decref(body);
		kwatch_unsupported(w, res->status, msg);
		return;
	}
	if (res->error != NULL || res->status != 200 || !json_is_array(items) || rv == NULL ||
	    strlen(rv) >= sizeof(w->rv)) {
		k8s_status_describe("list", res->status, res->error, body, msg, sizeof(msg));
		log_info("provider %s: listing %s failed: %s", w->a->env->provider_name, w->what,
			 msg);
		json_decref(body);
		w->failures++;
		kwatch_restart(w, 1);
		return;
	}
	objs = json_object();
	json_array_foreach(items, i, it)
	{
		if (kwatch_key(w, it, kb, sizeof(kb)) != NULL)
			json_object_set_new(objs, kb, kwatch_summary(w, it));
	}
	/* what went while no watch ran is gone */
	json_object_foreach(w->objs, key, v)
	{
		if (json_object_get(objs, key) == NULL)
			json_object_set_new(w->gone, key, json_real(np_mono_s()));
	}
	json_decref(w->objs);
	w->objs = objs;
	snprintf(w->rv, sizeof(w->rv), "%s", rv);
	w->synced = 1;
	w->unsupported = 0;
	json_decref(body);
	kwatch_wake(w, NULL);
	kwatch_watch(w);
	if (w == w->a->ns_watch)
		warm_ahead(w->a);
}

static void
kwatch_list(struct kwatch *w)
{
	w->watching = 0;
	w->lists++;
	w->list_started = np_mono_s();
	w->req = kcall(w->a, "GET", w->path, NULL, kwatch_list_answer, w);
	if (w->req == NULL) {
		w->failures++;
		kwatch_restart(w, 1);
	}
}

/* One watch event (a line of the stream). */
static void
kwatch_line(const char *line, size_t len, void *arg)
{
	struct kwatch *w = arg;
	json_error_t jerr;
	json_t *ev, *obj;
	const char *type, *rv, *key;
	char kb[600];

	if (len == 0)
		return;
	ev = json_loadb(line, len, 0, &jerr);
	type = np_json_str(ev, "type", NULL);
	obj = json_object_get(ev, "object");
	if (type == NULL || !json_is_object(obj)) {
		log_info("provider %s: watch of %s: not an event: %.100s", w->a->env->provider_name,
			 w->what, line);
		json_decref(ev);
		return;
	}
	w->events++;
	if (strcmp(type, "ERROR") == 0) {
		/* a Status: 410 Expired is "list again", anything else too */
		long long code = json_integer_value(json_object_get(obj, "code"));
		if (code == 410)
			w->expired++;
		else
			log_info("provider %s: watch of %s: error %lld: %.200s",
				 w->a->env->provider_name, w->what, code,
				 np_json_str(obj, "message", ""));
		json_decref(ev);
		w->rv[0] = '\0';
		/* the server ends the stream after an ERROR; the end lists */
		return;
	}
	rv = np_json_str(json_object_get(obj, "metadata"), "resourceVersion", NULL);
	if (rv != NULL && strlen(rv) < sizeof(w->rv))
		snprintf(w->rv, sizeof(w->rv), "%s", rv);
	if (strcmp(type, "BOOKMARK") == 0) {
		kwatch_prune_gone(w);
		json_decref(ev);
		return;
	}
	key = kwatch_key(w, obj, kb, sizeof(kb));
	if (key == NULL) {
		json_decref(ev);
		return;
	}
	if (strcmp(type, "DELETED") == 0) {
		json_object_del(w->objs, key);
		json_object_set_new(w->gone, key, json_real(np_mono_s()));
		kwatch_prune_gone(w);
	} else {
		json_object_set_new(w->objs, key, kwatch_summary(w, obj));
		json_object_del(w->gone, key);
	}
	json_decref(ev);
	kwatch_wake(w, key);
}

static void
kwatch_end(const struct http_response *res, void *arg)
{
	struct kwatch *w = arg;
	json_t *body;
	char msg[512];

	w->req = NULL;
	w->watching = 0;
	if (res->error == NULL && res->status >= 200 && res->status < 300) {
		/* the server's timeout (or an ERROR event: rv cleared); one that
		 * ends at once with nothing said (a proxy that closes watches)
		 * backs off instead of spinning */
		if (w->events == w->events_at_start && np_mono_s() - w->watch_started < 1.0)
			w->failures++;
		else
			w->failures = 0;
		kwatch_restart(w, w->rv[0] == '\0');
		return;
	}
	body = k8s_answer_json(res->body, res->body_len);
	k8s_status_describe("watch", res->status, res->error, body, msg, sizeof(msg));
	json_decref(body);
	if (res->error == NULL && res->status == 410) {
		w->expired++;
		kwatch_restart(w, 1);
		return;
	}
	if (res->error == NULL && (res->status == 401 || res->status == 403 || res->status == 404 ||
				   res->status == 405)) {
		kwatch_unsupported(w, res->status, msg);
		return;
	}
	/* dropped, or a server error: resume from the last version seen */
	w->drops++;
	w->failures++;
	log_debug("provider %s: watch of %s ended: %s; resuming", w->a->env->provider_name, w->what,
		  msg);
	kwatch_restart(w, 0);
}

static void
kwatch_watch(struct kwatch *w)
{
	struct http_request_params p;
	const char *hdrs[3];
	char url[2048];
	int n = 0;

	snprintf(url, sizeof(url),
		 "%s%swatch=1&allowWatchBookmarks=true&timeoutSeconds=%d&resourceVersion=",
		 w->a->conn.server, w->path, K8S_WATCH_SECONDS);
	urlenc(url, sizeof(url), w->rv);
	hdrs[n++] = "Accept: application/json";
	if (w->a->auth[0] != '\0')
		hdrs[n++] = w->a->auth;
	hdrs[n] = NULL;
	memset(&p, 0, sizeof(p));
	p.method = "GET";
	p.url = url;
	p.headers = hdrs;
	p.timeout = K8S_WATCH_SECONDS + K8S_CALL_TIMEOUT;
	w->a->calls++;
	w->watches++;
	w->watching = 1;
	w->watch_started = np_mono_s();
	w->events_at_start = w->events;
	w->req = http_stream(w->a->http, &p, kwatch_line, kwatch_end, w);
	if (w->req == NULL) {
		w->watching = 0;
		w->failures++;
		kwatch_restart(w, 0);
	}
}

/* w, started if it was not (the first machine that needs it starts it);
 * NULL when w is NULL or cannot be used (the machine reads by itself). */
static struct kwatch *
kwatch_use(struct kwatch *w)
{
	if (w == NULL || w->unsupported)
		return NULL;
	if (!w->started && !w->a->stopped) {
		w->started = 1;
		kwatch_list(w);
	}
	return w;
}

/* The pods watch covering namespace ns. */
static struct kwatch *
pod_watch(struct sm_adapter *a, const char *ns)
{
	size_t i;

	if (a->flavor != K8S_OPENSHIFTPODS)
		return a->nwatches > 0 ? a->watches[0] : NULL;
	if (ns == NULL)
		return NULL;
	for (i = 0; i < a->nwatches; i++) {
		if (a->watches[i]->pods &&
		    strncmp(a->watches[i]->path, "/api/v1/namespaces/", 19) == 0) {
			const char *p = a->watches[i]->path + 19;
			size_t l = strlen(ns);
			if (strncmp(p, ns, l) == 0 && strncmp(p + l, "/pods?", 6) == 0)
				return a->watches[i];
		}
	}
	return NULL;
}

static void
watches_setup(struct sm_adapter *a)
{
	char sel[512], coll[1024];
	size_t i, n = a->flavor == K8S_OPENSHIFTPODS ? a->env->cfg->npools : 1;

	snprintf(sel, sizeof(sel), "nodepool_provider_name=%s", a->env->provider_name);
	a->watches = calloc(n + 1, sizeof(*a->watches));
	if (a->watches == NULL)
		abort();
	if (a->flavor == K8S_OPENSHIFTPODS) {
		/* the provider's token may only see its projects */
		for (i = 0; i < n; i++) {
			snprintf(coll, sizeof(coll), "/api/v1/namespaces/%s/pods",
				 SEG(a->env->cfg->pools[i].name));
			a->watches[a->nwatches++] = kwatch_new(a, coll, "pods", 1, sel);
		}
		return;
	}
	a->watches[a->nwatches++] = kwatch_new(a, "/api/v1/pods", "pods", 1, sel);
	if (a->flavor == K8S_OPENSHIFT)
		/* a ProjectRequest carries no labels: every project */
		a->ns_watch =
		    kwatch_new(a, "/apis/project.openshift.io/v1/projects", "projects", 0, NULL);
	else
		a->ns_watch = kwatch_new(a, "/api/v1/namespaces", "namespaces", 0, sel);
	a->watches[a->nwatches++] = a->ns_watch;
}

static json_t *
namespace_body(struct kmachine *k)
{
	struct sm_adapter *a = k->a;

	if (k->reuse)
		/* a warm namespace: no node id (it outlives its nodes) */
		return json_pack("{s:s, s:s, s:{s:s, s:{s:s, s:s, s:s}}}", "apiVersion", "v1",
				 "kind", "Namespace", "metadata", "name", k->ns, "labels",
				 "nodepool_provider_name", a->env->provider_name,
				 "nodepool_pool_name", k->label->pool->name, K8S_WARM_LABEL,
				 k->label->name);

	if (a->flavor == K8S_OPENSHIFT) {
		char *desc = json_dumps(k->meta, JSON_COMPACT | JSON_SORT_KEYS);
		char buf[1024];
		json_t *b;
		snprintf(buf, sizeof(buf), K8S_DESC_PREFIX "%s", desc ? desc : "{}");
		free(desc);
		b = json_pack("{s:s, s:s, s:{s:s}, s:s, s:s}", "apiVersion",
			      "project.openshift.io/v1", "kind", "ProjectRequest", "metadata",
			      "name", k->ns, "displayName", k->ns, "description", buf);
		return b;
	}
	return json_pack("{s:s, s:s, s:{s:s, s:{s:O?, s:O?, s:O?}}}", "apiVersion", "v1", "kind",
			 "Namespace", "metadata", "name", k->ns, "labels", "nodepool_node_id",
			 json_object_get(k->meta, "nodepool_node_id"), "nodepool_provider_name",
			 json_object_get(k->meta, "nodepool_provider_name"), "nodepool_pool_name",
			 json_object_get(k->meta, "nodepool_pool_name"));
}

/* ---- warm namespaces (namespace-reuse) ----------------------------------------------------------
 *
 * Beyond upstream, opt-in per pod label (namespace-reuse: true): a pod
 * node's pod goes into a namespace kept warm for its label, whose
 * RoleBinding (upstream's restricted rules for the namespace's default
 * account) is already there, instead of a namespace of its own. A node
 * then costs three calls: the pod, a TokenRequest bound to it
 * (boundObjectRef kind Pod, its name and uid: the token is valid only
 * while that pod object exists), and the pod's delete.
 *
 * A warm namespace holds at most one node's pod: it is claimed
 * (a->claims) from the moment a launch picks it until the pods watch says
 * the node's pod is gone (DELETED, or a read answering 404); a namespace
 * in which the pods watch sees any pod of ours is never picked, whatever
 * the claims say (a launcher that restarted has none); and each carries a
 * ResourceQuota of one pod (K8S_WARM_QUOTA), so that two launchers of the
 * provider, whose claims are their own, cannot both put a pod in one: the
 * API refuses the second (403 exceeded quota) and that launch picks
 * another.
 *
 * The restricted rules (role_rules(1)) let a token get and list pods and
 * exec into, read the logs of and port-forward to them (the verbs on the
 * subresources open a connection to an existing pod: none makes,
 * changes or deletes an object), so once its pod is gone the namespace
 * holds what it held before the node.
 *
 * Warm namespaces are made on demand, when a launch finds none free, so
 * their number follows the high-water mark of the label's nodes in use
 * (bounded by max-servers), and ahead of demand up to the label's
 * warm-namespaces; they are labelled K8S_WARM_LABEL (and
 * nodepool_provider_name, nodepool_pool_name), and leak cleanup deletes
 * the free ones of a label that no longer has namespace-reuse and those
 * above the pool's (else the provider's) max-servers.
 */
static void warm_ns_delete(struct sm_adapter *a, const char *ns, const char *why);
static int warm_wanted(const struct sm_adapter *a, const json_t *nsitems);
static json_t *warm_cleanup(struct sm_adapter *a, const json_t *nsitems, const json_t *pods);
static long long warm_cap(const struct sm_adapter *a, const struct sm_label *l);

static void
warm_claim(struct sm_adapter *a, const char *ns, const char *pod)
{
	json_object_set_new(a->claims, ns, json_string(pod));
}

/* The claim of pod on ns ends (its pod is gone or was never made). */
static void
warm_release(struct sm_adapter *a, const char *ns, const char *pod)
{
	const char *c = json_string_value(json_object_get(a->claims, ns));

	if (c != NULL && strcmp(c, pod) == 0)
		json_object_del(a->claims, ns);
}

/* The ResourceQuota every warm namespace carries: one pod at a time,
 * whatever the claims of two launchers of the provider say (the API
 * refuses a second pod: 403 exceeded quota). New reference. */
static json_t *
warm_quota_body(void)
{
	return json_pack("{s:s, s:s, s:{s:s}, s:{s:{s:s}}}", "apiVersion", "v1", "kind",
			 "ResourceQuota", "metadata", "name", K8S_WARM_QUOTA, "spec", "hard",
			 "pods", "1");
}

/* The namespaces in which the pods watch (synced) sees a pod: ns -> true. */
static json_t *
warm_occupied(const struct kwatch *pw)
{
	json_t *occ = json_object(), *v;
	const char *key;

	json_object_foreach(pw->objs, key, v)
	{
		char ns[300];
		size_t n = strcspn(key, "/");
		if (n < sizeof(ns)) {
			memcpy(ns, key, n);
			ns[n] = '\0';
			json_object_set_new(occ, ns, json_true());
		}
	}
	return occ;
}

/* A free warm namespace of label l (new string), or NULL. */
static char *
warm_pick(struct sm_adapter *a, const struct kwatch *pw, const struct kwatch *nw,
	  const struct sm_label *l, const json_t *skip)
{
	json_t *occ = warm_occupied(pw), *v;
	const char *name;
	char *out = NULL;

	json_object_foreach(nw->objs, name, v)
	{
		if (strcmp(np_json_str(v, "w", ""), l->name) != 0 ||
		    strcmp(np_json_str(v, "p", ""), l->pool->name) != 0 ||
		    json_object_get(v, "t") != NULL || json_object_get(a->claims, name) != NULL ||
		    json_object_get(occ, name) != NULL || json_object_get(skip, name) != NULL)
			continue;
		out = strdup(name);
		break;
	}
	json_decref(occ);
	return out;
}

/* The rules of the role a node's account gets (upstream's Role "zuul" or,
 * pod set, "zuul-restricted"). New reference. */
static json_t *
role_rules(int pod)
{
	json_t *verbs = json_pack("[s,s,s,s,s,s,s]", "create", "delete", "get", "list", "patch",
				  "update", "watch");
	json_t *rules;

	if (pod)
		/* as upstream's restricted role for pod labels */
		rules = json_pack("[{s:[s], s:[s], s:[s,s]}, {s:[s], s:[s,s,s,s], s:O}]",
				  "apiGroups", "", "resources", "pods", "verbs", "get", "list",
				  "apiGroups", "", "resources", "pods/exec", "pods/log",
				  "pods/logs", "pods/portforward", "verbs", verbs);
	else
		rules = json_pack("[{s:[s], s:[s,s,s,s,s,s,s,s,s,s,s,s], s:O}]", "apiGroups", "",
				  "resources", "pods", "pods/exec", "pods/log", "pods/portforward",
				  "services", "endpoints", "crontabs", "jobs", "deployments",
				  "replicasets", "configmaps", "secrets", "verbs", verbs);
	json_decref(verbs);
	return rules;
}

static json_t *
role_body(struct kmachine *k)
{
	int pod = is_pod_label(k->a, k->label);

	return json_pack("{s:s, s:s, s:{s:s}, s:o}", "apiVersion", "rbac.authorization.k8s.io/v1",
			 "kind", "Role", "metadata", "name", pod ? "zuul-restricted" : "zuul",
			 "rules", role_rules(pod));
}

/* ---- cluster roles ------------------------------------------------------------------------------
 *
 * Upstream makes a Role in each node's namespace and binds it. Here the
 * kubernetes driver makes the same rules once as a ClusterRole
 * (K8S_CROLE_POD for pod labels, K8S_CROLE_NS for namespace labels), the
 * first time a node needs it, and each node's RoleBinding binds it in the
 * node's namespace only: a RoleBinding grants a ClusterRole's rules in its
 * own namespace, so the token is confined as upstream's, one call per
 * node fewer. A ClusterRole that exists (409: made by an earlier run or
 * another launcher) is used as it is. A provider that may not make
 * ClusterRoles (403, or no such API: 404) binds per-namespace Roles as
 * upstream does; any other failure does too, for K8S_CROLE_RETRY seconds.
 */
#define K8S_CROLE_POD "nodepool-zuul-restricted"
#define K8S_CROLE_NS  "nodepool-zuul"

static void
crole_wake(struct sm_adapter *a)
{
	struct kmachine *k;

	while ((k = TAILQ_FIRST(&a->crole_waiters)) != NULL) {
		TAILQ_REMOVE(&a->crole_waiters, k, centry);
		k->crole_waiting = 0;
		sm_machine_wake(&k->m);
	}
}

static void
crole_answer(const struct http_response *res, void *arg, int i)
{
	struct sm_adapter *a = arg;
	json_t *body = k8s_answer_json(res->body, res->body_len);
	char msg[512];

	a->crole_req[i] = NULL;
	if (res->error == NULL &&
	    ((res->status >= 200 && res->status < 300) || res->status == 409)) {
		a->crole[i] = CR_READY;
		log_info("provider %s: ClusterRole %s %s: nodes' RoleBindings bind it",
			 a->env->provider_name, i == 0 ? K8S_CROLE_POD : K8S_CROLE_NS,
			 res->status == 409 ? "exists" : "made");
	} else {
		k8s_status_describe("POST clusterroles", res->status, res->error, body, msg,
				    sizeof(msg));
		a->crole[i] = CR_NONE;
		if (res->error == NULL &&
		    (res->status == 403 || res->status == 404 || res->status == 405)) {
			a->crole_retry_at[i] = 0;
			log_info("provider %s: %s: a Role in each node's namespace instead (one "
				 "more call per node)",
				 a->env->provider_name, msg);
		} else {
			a->crole_retry_at[i] = np_mono_s() + K8S_CROLE_RETRY;
			log_warn("provider %s: %s: a Role in each node's namespace for %.0f s",
				 a->env->provider_name, msg, K8S_CROLE_RETRY);
		}
	}
	json_decref(body);
	crole_wake(a);
	if (i == 0)
		warm_ahead(a);
}

static void
crole_answer_pod(const struct http_response *res, void *arg)
{
	crole_answer(res, arg, 0);
}

static void
crole_answer_ns(const struct http_response *res, void *arg)
{
	crole_answer(res, arg, 1);
}

/* Whether k's binding can name the ClusterRole of its label type: 1 yes,
 * 0 no (a Role of its own), -1 not known yet (k waits on crole_waiters;
 * the first to ask starts the call). */
static int
crole_ready(struct kmachine *k)
{
	struct sm_adapter *a = k->a;
	int i = is_pod_label(a, k->label) ? 0 : 1;
	json_t *body;

	if (a->flavor != K8S_KUBERNETES)
		return 0;
	if (a->crole[i] == CR_NONE && a->crole_retry_at[i] > 0 &&
	    np_mono_s() >= a->crole_retry_at[i])
		a->crole[i] = CR_UNKNOWN;
	if (a->crole[i] == CR_READY || a->crole[i] == CR_NONE)
		return a->crole[i] == CR_READY;
	if (a->crole[i] == CR_UNKNOWN) {
		body = json_pack("{s:s, s:s, s:{s:s}, s:o}", "apiVersion",
				 "rbac.authorization.k8s.io/v1", "kind", "ClusterRole", "metadata",
				 "name", i == 0 ? K8S_CROLE_POD : K8S_CROLE_NS, "rules",
				 role_rules(i == 0));
		a->crole[i] = CR_ASKING;
		a->crole_req[i] =
		    kcall(a, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", body,
			  i == 0 ? crole_answer_pod : crole_answer_ns, a);
		json_decref(body);
		if (a->crole_req[i] == NULL) {
			a->crole[i] = CR_NONE;
			a->crole_retry_at[i] = np_mono_s() + K8S_CROLE_RETRY;
			return 0;
		}
	}
	if (!k->crole_waiting) {
		TAILQ_INSERT_TAIL(&a->crole_waiters, k, centry);
		k->crole_waiting = 1;
	}
	return -1;
}

static void
crole_waiter_remove(struct kmachine *k)
{
	if (!k->crole_waiting)
		return;
	TAILQ_REMOVE(&k->a->crole_waiters, k, centry);
	k->crole_waiting = 0;
}

/* The binding of the account to its role: openshift's ClusterRole admin
 * (as upstream), else the ClusterRole made once (cluster true) or the
 * namespace's own Role. */
static json_t *
binding_body(struct kmachine *k, int cluster)
{
	int os = k->a->flavor == K8S_OPENSHIFT, pod = is_pod_label(k->a, k->label);
	const char *role = os	     ? "admin"
			   : cluster ? (pod ? K8S_CROLE_POD : K8S_CROLE_NS)
			   : pod     ? "zuul-restricted"
				     : "zuul";

	return json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s, s:s}, s:[{s:s, s:s, s:s}]}",
			 "apiVersion", "rbac.authorization.k8s.io/v1", "kind", "RoleBinding",
			 "metadata", "name", "zuul-role", "roleRef", "apiGroup",
			 "rbac.authorization.k8s.io", "kind",
			 os || cluster ? "ClusterRole" : "Role", "name", role, "subjects", "kind",
			 "ServiceAccount", "name", k->sa, "namespace", k->ns);
}

/* An object's metadata.uid (new string), or NULL. */
static char *
k8s_meta_uid(const json_t *obj)
{
	const char *u = np_json_str(json_object_get(obj, "metadata"), "uid", NULL);

	return u != NULL && u[0] != '\0' ? strdup(u) : NULL;
}

/* The credential's ca_crt as upstream hands it: the CA's PEM base64-encoded
 * (upstream passes the token secret's data["ca.crt"] on undecoded, and for
 * openshiftpods encodes the kubeconfig's CA), which Zuul's executor writes
 * into its kubeconfig as certificate-authority-data. pem NULL: "". */
static json_t *
ca_crt_b64(const char *pem)
{
	size_t n = pem != NULL ? strlen(pem) : 0;
	unsigned char *enc;
	json_t *j;

	if (n == 0 || n > 1 << 24)
		return json_string("");
	enc = malloc(4 * ((n + 2) / 3) + 1);
	if (enc == NULL)
		abort();
	EVP_EncodeBlock(enc, (const unsigned char *)pem, (int)n);
	j = json_string((const char *)enc);
	free(enc);
	return j;
}

static struct sm_instance *
make_instance(struct kmachine *k)
{
	struct sm_adapter *a = k->a;
	struct sm_instance *in = sm_instance_new();
	json_t *cred = json_object();
	const char *pp = np_json_str(k->label->raw, "python-path", "auto");

	sm_set_str(&in->external_id, k->reuse			      ? k->m.external_id
				     : a->flavor == K8S_OPENSHIFTPODS ? k->pod
								      : k->ns);
	in->ready = 1;
	json_decref(in->metadata);
	in->metadata = json_deep_copy(k->meta);
	if (a->flavor != K8S_OPENSHIFTPODS)
		json_object_set_new(cred, "name", json_string(k->ns));
	json_object_set_new(cred, "namespace", json_string(k->ns));
	json_object_set_new(cred, "host", json_string(a->conn.server));
	json_object_set_new(cred, "skiptls", json_boolean(a->conn.insecure));
	json_object_set_new(cred, "token", json_string(k->token ? k->token : ""));
	json_object_set_new(cred, "user", json_string(k->sa));
	if (!a->conn.insecure)
		json_object_set_new(cred, "ca_crt", ca_crt_b64(k->ca_crt));
	if (k->pod != NULL)
		json_object_set_new(cred, "pod", json_string(k->pod));
	in->connection_port_obj = cred;
	if (k->pod != NULL) {
		sm_set_str(&in->interface_ip, k->pod);
		sm_set_str(&in->connection_type, "kubectl");
		sm_set_str(&in->host_id, k->host_id);
	} else {
		sm_set_str(&in->connection_type,
			   a->flavor == K8S_OPENSHIFT ? "project" : "namespace");
	}
	sm_set_str(&in->python_path, pp);
	sm_set_str(&in->shell_type, np_json_str(k->label->raw, "shell-type", NULL));
	sm_set_str(&in->cloud, a->conn.context);
	/* what the node uses, as label_quota */
	drv_quota_clear(&in->quota);
	drv_quota_init(&in->quota, 0, 1, 0);
	k8s_label_quota_fill(k->label, &in->quota);
	return in;
}

static enum sm_status
create_advance(struct sm_machine *m, struct sm_instance **out)
{
	struct kmachine *k = (struct kmachine *)m;
	struct sm_adapter *a = k->a;
	char path[1024], buf[512];

	if (k->req_h != NULL || k->slots_left > 0) {
		m->retry_in = 3600;
		return SM_AGAIN;
	}
	for (;;) {
		m->state = kstep_names[k->step];
		switch (k->step) {
		case K_WARM: {
			/* namespace-reuse: a free warm namespace (both watches
			 * synced: a pod of ours in it is seen), else a new one */
			struct kwatch *pw = kwatch_use(pod_watch(a, NULL)),
				      *nw = kwatch_use(a->ns_watch);
			char *ns;
			if (pw == NULL || nw == NULL) {
				m->error = SM_E_FAILED;
				snprintf(m->error_msg, sizeof(m->error_msg),
					 "namespace-reuse needs to list and watch pods and "
					 "namespaces, which the provider's credentials may not");
				return SM_ERROR;
			}
			if (!pw->synced || !nw->synced) {
				waiter_add(k, !pw->synced ? pw : nw, ""); /* the list wakes all */
				m->retry_in = K8S_WATCH_FALLBACK;
				return SM_AGAIN;
			}
			waiter_remove(k);
			ns = warm_pick(a, pw, nw, k->label, k->full);
			if (ns != NULL) {
				free(k->ns);
				k->ns = ns;
				a->warm_reused++;
				k->step = K_POD;
			} else {
				unsigned char rb[3] = {0, 0, 0};
				char name[300];
				if (RAND_bytes(rb, sizeof(rb)) != 1)
					rb[0] = (unsigned char)(np_mono_s() * 1000);
				snprintf(name, sizeof(name), "%.200s-reuse-%.40s-%02x%02x%02x",
					 k->label->pool->name, k->node_id, rb[0], rb[1], rb[2]);
				free(k->ns);
				k->ns = strdup(name);
				k->made_ns = 1;
				a->warm_made++;
				k->step = K_NS;
			}
			warm_claim(a, k->ns, k->pod);
			k->claimed = 1;
			snprintf(path, sizeof(path), "%s/%s", k->ns, k->pod);
			sm_set_str(&m->external_id, path);
			continue;
		}
		case K_NS:
			if (!k->got) {
				/* named at once: an abandoned attempt is cleaned up */
				if (!k->reuse)
					sm_set_str(&m->external_id,
						   a->flavor == K8S_OPENSHIFTPODS ? k->pod : k->ns);
				if (a->flavor == K8S_OPENSHIFTPODS) {
					k->step = K_POD;
					continue;
				}
				return m_call(k, "POST",
					      a->flavor == K8S_OPENSHIFT
						  ? "/apis/project.openshift.io/v1/projectrequests"
						  : "/api/v1/namespaces",
					      namespace_body(k));
			}
			if (!(ok_status(k) || (k->resume && k->err == NULL && k->status == 409)))
				return m_fail(k);
			k->got = 0;
			k->step = K_OBJECTS;
			continue;
		case K_OBJECTS: {
			/* The namespace's objects at once: none needs another
			 * (a binding may name an account or role still to come;
			 * the pod runs as the namespace's default account). */
			if (k->nslots == 0) {
				int cluster = crole_ready(k);
				if (cluster < 0) {
					m->retry_in = 3600; /* woken by crole_answer */
					return SM_AGAIN;
				}
				snprintf(path, sizeof(path),
					 "/api/v1/namespaces/%s/serviceaccounts", k->ns);
				if (strcmp(k->sa, K8S_DEFAULT_SA) != 0)
					slot_start(k, KS_SA, path,
						   json_pack("{s:s, s:s, s:{s:s}}", "apiVersion",
							     "v1", "kind", "ServiceAccount",
							     "metadata", "name", k->sa));
				if (a->flavor != K8S_OPENSHIFT && !cluster) {
					snprintf(path, sizeof(path),
						 "/apis/rbac.authorization.k8s.io/v1/namespaces/"
						 "%s/roles",
						 k->ns);
					slot_start(k, KS_ROLE, path, role_body(k));
				}
				snprintf(path, sizeof(path),
					 "/apis/rbac.authorization.k8s.io/v1/namespaces/%s/"
					 "rolebindings",
					 k->ns);
				slot_start(k, KS_BINDING, path, binding_body(k, cluster));
				if (k->reuse) {
					snprintf(path, sizeof(path),
						 "/api/v1/namespaces/%s/resourcequotas", k->ns);
					slot_start(k, KS_QUOTA, path, warm_quota_body());
				}
				if (k->pod != NULL && !k->resume) {
					/* (namespace-reuse: a warm namespace this launch
					 * makes; its uid is read from the answer) */
					snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods",
						 k->ns);
					slot_start(k, KS_POD, path,
						   pod_body(a, k->label, k->pod, k->meta, k->req));
					k->pod_created = np_mono_s();
					k->pod_maybe = 1;
				}
				if (k->slots_left > 0) {
					m->retry_in = 3600; /* woken by the last answer */
					return SM_AGAIN;
				}
			}
			for (int i = 0; i < k->nslots; i++) {
				struct kslot *sl = &k->slots[i];
				if (sl->kind == KS_POD && sl->err == NULL &&
				    k8s_sa_missing(sl->status, sl->resp)) {
					/* the default account is not made yet: the pod
					 * again once the token is asked for */
					sl->status = 201;
					k->pod_again = 1;
				} else if (sl->kind == KS_POD && sl->err == NULL &&
					   sl->status >= 200 && sl->status < 300) {
					free(k->pod_uid);
					k->pod_uid = k8s_meta_uid(sl->resp);
				}
			}
			if (slots_failed(k))
				return m_fail(k);
			k->got = 0;
			k->ns_ready = 1;
			if (k->reuse) {
				/* the token once the pod is there (bound to it) */
				k->step = k->pod_again || k->pod_uid == NULL ? K_POD : K_TREQ;
				k->pod_again = 0;
				continue;
			}
			k->step = a->token_secret ? K_SECRET : K_TREQ;
			continue;
		}
		case K_TREQ: {
			/* the account's token, one call (TokenRequest) */
			double exp = 0, now = (double)time(NULL), granted;
			char *tok = NULL;
			json_t *body;
			if (!k->got) {
				snprintf(path, sizeof(path),
					 "/api/v1/namespaces/%s/serviceaccounts/%s/token", k->ns,
					 k->sa);
				body = json_pack("{s:s, s:s, s:{s:I}}", "apiVersion",
						 "authentication.k8s.io/v1", "kind", "TokenRequest",
						 "spec", "expirationSeconds",
						 (json_int_t)a->token_lifetime);
				if (k->reuse)
					/* the token dies with the pod object */
					json_object_set_new(
					    json_object_get(body, "spec"), "boundObjectRef",
					    json_pack("{s:s, s:s, s:s, s:s}", "apiVersion", "v1",
						      "kind", "Pod", "name", k->pod, "uid",
						      k->pod_uid ? k->pod_uid : ""));
				return m_call(k, "POST", path, body);
			}
			if (k->reuse && !ok_status(k)) {
				/* no fallback: an unbound token would outlive the pod */
				if (k->err == NULL && (k->status == 404 || k->status == 405) &&
				    np_json_str(json_object_get(k->resp, "details"), "name",
						NULL) == NULL) {
					m->error = SM_E_FAILED;
					snprintf(m->error_msg, sizeof(m->error_msg),
						 "namespace-reuse needs the TokenRequest API "
						 "(Kubernetes 1.20 and later): %d",
						 k->status);
					return SM_ERROR;
				}
				return m_fail(k);
			}
			if (k->err == NULL && k->status == 404 &&
			    strcmp(np_json_str(json_object_get(k->resp, "details"), "name", ""),
				   k->sa) == 0 &&
			    strcmp(k->sa, K8S_DEFAULT_SA) == 0) {
				/* the controller has not made the namespace's
				 * default account yet; launch-timeout bounds it */
				m_poll(k, K8S_POLL_TOKEN);
				return SM_AGAIN;
			}
			if (k->err == NULL && (k->status == 404 || k->status == 405) &&
			    np_json_str(json_object_get(k->resp, "details"), "name", NULL) ==
				NULL) {
				/* no TokenRequest API (before 1.20, or turned off):
				 * a 404 that names no object */
				if (!a->token_secret)
					log_info("provider %s: no TokenRequest API (%d): token "
						 "secrets, as upstream (one more call per node)",
						 a->env->provider_name, k->status);
				a->token_secret = 1;
				k->got = 0;
				k->step = K_SECRET;
				continue;
			}
			if (!ok_status(k))
				return m_fail(k);
			if (k8s_token_request_read(k->resp, &tok, &exp) != 0) {
				m->error = SM_E_FAILED;
				snprintf(m->error_msg, sizeof(m->error_msg),
					 "%.200s: the answer has no status.token", k->what);
				return SM_ERROR;
			}
			/* what was granted: spec.expirationSeconds, which the
			 * server shortens to its maximum, else the expiry */
			granted = np_json_num(json_object_get(k->resp, "spec"), "expirationSeconds",
					      exp > 0 ? exp - now : -1);
			if (granted >= 0 && granted < (double)a->token_lifetime / 2 && k->reuse)
				log_warn("provider %s: node %s: the API server grants its token "
					 "for %.0f s, not the %lld s of token-lifetime",
					 a->env->provider_name, k->node_id, granted,
					 a->token_lifetime);
			else if (granted >= 0 && granted < (double)a->token_lifetime / 2) {
				/* the server grants much less than asked (its
				 * --service-account-max-token-expiration): a ready
				 * node could outlive its token; upstream's token
				 * secret never expires */
				privsep_free_secret_str(tok);
				if (!a->token_secret)
					log_warn("provider %s: the API server grants tokens for "
						 "%.0f s, not the %lld s of token-lifetime: token "
						 "secrets, as upstream (one more call per node)",
						 a->env->provider_name, granted, a->token_lifetime);
				a->token_secret = 1;
				k->got = 0;
				k->step = K_SECRET;
				continue;
			}
			privsep_free_secret_str(k->token);
			k->token = tok;
			free(k->ca_crt);
			/* no ca.crt comes with it: the cluster's CA the provider
			 * trusts (adapter_new asks for the secret without one) */
			k->ca_crt = a->conn.ca_pem != NULL ? strdup(a->conn.ca_pem) : NULL;
			k->got = 0;
			k->step = k->pod == NULL	      ? K_DONE
				  : k->reuse		      ? K_WAIT
				  : k->pod_again || k->resume ? K_POD
							      : K_WAIT;
			if (k->pod_again && !k->resume) {
				k->pod_again = 0;
				m->retry_in = 0;
				return SM_AGAIN;
			}
			continue;
		}
		case K_SECRET: {
			/* upstream's token secret, filled by the token controller
			 * while the pod starts; read once the pod runs */
			if (!k->got) {
				snprintf(path, sizeof(path), "/api/v1/namespaces/%s/secrets",
					 k->ns);
				return m_call(
				    k, "POST", path,
				    json_pack("{s:s, s:s, s:s, s:{s:s, s:{s:s}}}", "apiVersion",
					      "v1", "kind", "Secret", "type",
					      "kubernetes.io/service-account-token", "metadata",
					      "name", K8S_USER, "annotations",
					      "kubernetes.io/service-account.name", k->sa));
			}
			if (!(ok_status(k) || (k->err == NULL && k->status == 409)))
				return m_fail(k);
			k->got = 0;
			if (k->pod == NULL) {
				k->step = K_TOKEN;
				continue;
			}
			k->step = k->pod_again || k->resume ? K_POD : K_WAIT;
			if (k->pod_again && !k->resume) {
				k->pod_again = 0;
				m->retry_in = K8S_POLL_TOKEN;
				return SM_AGAIN;
			}
			continue;
		}
		case K_TOKEN: {
			int r;
			if (!k->got) {
				snprintf(path, sizeof(path), "/api/v1/namespaces/%s/secrets/%s",
					 k->ns, K8S_USER);
				return m_call(k, "GET", path, NULL);
			}
			if (!ok_status(k))
				return m_fail(k);
			privsep_free_secret_str(k->token);
			free(k->ca_crt);
			r = k8s_secret_token(k->resp, !a->conn.insecure, &k->token, &k->ca_crt);
			if (r > 0) {
				/* the token controller has not filled it yet; the
				 * framework's launch-timeout bounds the wait */
				m_poll(k, K8S_POLL_TOKEN);
				return SM_AGAIN;
			}
			if (r < 0) {
				m->error = SM_E_FAILED;
				snprintf(m->error_msg, sizeof(m->error_msg),
					 "%.200s: the token is not base64", k->what);
				return SM_ERROR;
			}
			k->got = 0;
			k->step = K_DONE;
			continue;
		}
		case K_POD:
			if (k->resume) {
				/* the earlier launcher's pod, if it made it */
				if (!k->got) {
					snprintf(path, sizeof(path),
						 "/api/v1/namespaces/%s/pods/%s", k->ns, k->pod);
					return m_call(k, "GET", path, NULL);
				}
				if (k->err != NULL || (k->status != 404 && !ok_status(k)))
					return m_fail(k);
				k->resume = 0;
				k->got = 0;
				if (k->status == 404)
					continue; /* not made yet: make it */
				k->pod_created = np_mono_s();
				k->pod_maybe = 1;
				free(k->pod_uid);
				k->pod_uid = k8s_meta_uid(k->resp);
				k->step = k->reuse && k->token == NULL ? K_TREQ : K_WAIT;
				continue;
			}
			if (!k->got) {
				snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods", k->ns);
				k->pod_maybe = 1;
				return m_call(k, "POST", path,
					      pod_body(a, k->label, k->pod, k->meta, k->req));
			}
			if (k->err == NULL && k->status >= 400 && k->status != 409)
				k->pod_maybe = 0; /* refused: not made */
			if (k->reuse && k->err == NULL && k8s_status_is_quota(k->status, k->resp)) {
				/* another's pod in the warm namespace (another
				 * launcher of the provider took it): another one */
				log_info(
				    "provider %s: node %s: warm namespace %s is taken (%.200s): "
				    "another",
				    a->env->provider_name, k->node_id, k->ns,
				    np_json_str(k->resp, "message", ""));
				json_object_set_new(k->full, k->ns, json_true());
				warm_release(a, k->ns, k->pod);
				k->claimed = 0;
				k->got = 0;
				k->step = K_WARM;
				continue;
			}
			if (k->err == NULL && k8s_sa_missing(k->status, k->resp) &&
			    a->flavor != K8S_OPENSHIFTPODS) {
				m_poll(k, K8S_POLL_TOKEN); /* launch-timeout bounds it */
				return SM_AGAIN;
			}
			if (!ok_status(k))
				return m_fail(k);
			k->pod_created = np_mono_s();
			k->got = 0;
			free(k->pod_uid);
			k->pod_uid = k8s_meta_uid(k->resp);
			if (k->reuse) {
				if (k->pod_uid == NULL) {
					m->error = SM_E_FAILED;
					snprintf(m->error_msg, sizeof(m->error_msg),
						 "%.200s: the answer has no metadata.uid", k->what);
					return SM_ERROR;
				}
				k->step = K_TREQ;
				continue;
			}
			k->step = K_WAIT;
			continue;
		case K_WAIT: {
			enum k8s_pod_state ps = K8S_POD_PENDING;
			const char *nn = NULL;
			double boot = a->env->cfg->boot_timeout, now = np_mono_s(), wait;
			struct kwatch *w = kwatch_use(pod_watch(a, k->ns));
			int known = 0;
			snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", k->ns,
				 k->pod);
			if (k->got) {
				/* a read of our own (no watch, or its fallback) */
				if (!ok_status(k))
					return m_fail(k);
				ps = k8s_pod_read(k->resp, buf, sizeof(buf), &nn);
				known = 1;
				k->got = 0;
			} else if (w != NULL) {
				char key[600];
				const json_t *sum;
				snprintf(key, sizeof(key), "%s/%s", k->ns, k->pod);
				sum = json_object_get(w->objs, key);
				if (sum != NULL) {
					ps = (enum k8s_pod_state)json_integer_value(
					    json_object_get(sum, "s"));
					snprintf(buf, sizeof(buf), "%s", np_json_str(sum, "r", ""));
					nn = np_json_str(sum, "n", NULL);
					known = 1;
				}
			} else {
				return m_call(k, "GET", path, NULL);
			}
			if (!known)
				buf[0] = '\0';
			if (ps == K8S_POD_RUNNING) {
				waiter_remove(k);
				free(k->host_id);
				k->host_id = nn ? strdup(nn) : NULL;
				/* the token: asked for already (TokenRequest,
				 * openshiftpods' own), else read from its secret */
				k->step = k->token != NULL ? K_DONE : K_TOKEN;
				continue;
			}
			if (ps == K8S_POD_FAILED || (boot > 0 && now - k->pod_created > boot)) {
				waiter_remove(k);
				m->error = SM_E_FAILED;
				if (ps == K8S_POD_FAILED)
					snprintf(m->error_msg, sizeof(m->error_msg),
						 "%.60s/%.60s: %.120s", k->ns, k->pod, buf);
				else
					snprintf(m->error_msg, sizeof(m->error_msg),
						 "%.50s/%.50s: not running after %.0f s "
						 "(boot-timeout): %.90s",
						 k->ns, k->pod, boot, buf);
				return SM_ERROR;
			}
			if (w == NULL || kwatch_use(pod_watch(a, k->ns)) == NULL) {
				waiter_remove(k);
				m_poll(k, K8S_POLL_POD);
				return SM_AGAIN;
			}
			{
				char key[600];
				snprintf(key, sizeof(key), "%s/%s", k->ns, k->pod);
				waiter_add(k, w, key);
			}
			if (k->next_read == 0)
				k->next_read = now + K8S_WATCH_FALLBACK;
			if (now >= k->next_read) {
				/* the watch has said nothing for long: look */
				waiter_remove(k);
				k->next_read = now + K8S_WATCH_FALLBACK;
				return m_call(k, "GET", path, NULL);
			}
			wait = k->next_read - now;
			if (boot > 0 && k->pod_created + boot - now + 0.01 < wait)
				wait = k->pod_created + boot - now + 0.01;
			k->got = 0;
			m->retry_in = wait;
			return SM_AGAIN;
		}
		case K_DONE:
			*out = make_instance(k);
			return SM_DONE;
		default:
			m->error = SM_E_FAILED;
			snprintf(m->error_msg, sizeof(m->error_msg), "bad state");
			return SM_ERROR;
		}
	}
}

static const char *
pods_project(const struct sm_adapter *a, size_t i)
{
	if (i >= a->env->cfg->npools)
		return NULL;
	return a->env->cfg->pools[i].name;
}

/*
 * A delete's D_WAIT step: SM_DONE once the object at path (key in watch w's
 * records, "<namespace>/<name>" or a namespace's name) is gone, as the
 * watch tells (or a read's 404 when there is no watch, and every
 * K8S_WATCH_FALLBACK seconds with one); SM_AGAIN until then, SM_ERROR
 * when a read fails. Upstream's waitForNodeCleanup reads until 404.
 */
static enum sm_status
wait_gone(struct kmachine *k, struct kwatch *w, const char *path, const char *key, double now)
{
	struct sm_machine *m = &k->m;

	if (k->got) {
		if (k->err == NULL && k->status == 404) {
			waiter_remove(k);
			return SM_DONE;
		}
		if (!ok_status(k))
			return m_fail(k);
		k->got = 0;
		if (w == NULL) {
			m_poll(k, K8S_POLL_DELETE);
			return SM_AGAIN;
		}
	}
	if (w == NULL)
		return m_call(k, "GET", path, NULL);
	if (json_object_get(w->gone, key) != NULL ||
	    (w->synced && w->list_started >= k->deleted_at &&
	     json_object_get(w->objs, key) == NULL)) {
		waiter_remove(k);
		return SM_DONE;
	}
	waiter_add(k, w, key);
	if (k->next_read == 0)
		k->next_read = now + K8S_WATCH_FALLBACK;
	if (now >= k->next_read) {
		waiter_remove(k);
		k->next_read = now + K8S_WATCH_FALLBACK;
		return m_call(k, "GET", path, NULL);
	}
	m->retry_in = k->next_read - now;
	return SM_AGAIN;
}

/* The delete of a namespace-reuse node: its pod (k->ns, k->pod), then
 * until the pods watch (or a read) says it is gone. */
static enum sm_status
delete_pod_advance(struct kmachine *k)
{
	struct sm_adapter *a = k->a;
	struct sm_machine *m = &k->m;
	struct kwatch *w;
	double now = np_mono_s();
	char path[1024], key[600];

	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", SEG(k->ns), SEG(k->pod));
	m->state = kstep_names[k->step];
	if (k->step == D_DELETE) {
		if (!k->got)
			return m_call(k, "DELETE", path,
				      json_pack("{s:s, s:s, s:s}", "apiVersion", "v1", "kind",
						"DeleteOptions", "propagationPolicy",
						"Background"));
		if (k->err == NULL && k->status == 404) {
			m->error = SM_E_NOTFOUND;
			snprintf(m->error_msg, sizeof(m->error_msg), "pod %.200s not found",
				 m->external_id);
			return SM_ERROR;
		}
		if (!ok_status(k))
			return m_fail(k);
		k->got = 0;
		k->step = D_WAIT;
		k->deleted_at = now;
	}
	w = kwatch_use(pod_watch(a, k->ns));
	snprintf(key, sizeof(key), "%s/%s", k->ns, k->pod);
	return wait_gone(k, w, path, key, now);
}

static enum sm_status
delete_advance(struct sm_machine *m, struct sm_instance **out)
{
	struct kmachine *k = (struct kmachine *)m;
	struct sm_adapter *a = k->a;
	char path[1024];
	enum sm_status st;

	(void)out;
	if (k->req_h != NULL) {
		m->retry_in = 3600;
		return SM_AGAIN;
	}
	if (k->reuse) {
		/* a pod in a warm namespace: its namespace is free again once
		 * the pod is seen gone */
		st = delete_pod_advance(k);
		if (st != SM_AGAIN)
			warm_release(a, k->ns, k->pod);
		return st;
	}
	if (a->flavor == K8S_OPENSHIFTPODS) {
		const char *proj = pods_project(a, k->pool_i);
		if (proj == NULL) {
			m->error = SM_E_NOTFOUND;
			snprintf(m->error_msg, sizeof(m->error_msg), "pod %s not found",
				 m->external_id);
			return SM_ERROR;
		}
		snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", proj,
			 SEG(m->external_id));
	} else if (a->flavor == K8S_OPENSHIFT)
		snprintf(path, sizeof(path), "/apis/project.openshift.io/v1/projects/%s",
			 SEG(m->external_id));
	else
		snprintf(path, sizeof(path), "/api/v1/namespaces/%s", SEG(m->external_id));
	m->state = kstep_names[k->step];
	if (k->step == D_DELETE) {
		if (!k->got)
			return m_call(k, "DELETE", path,
				      json_pack("{s:s, s:s, s:s}", "apiVersion", "v1", "kind",
						"DeleteOptions", "propagationPolicy",
						"Background"));
		if (k->err == NULL && k->status == 404) {
			if (a->flavor == K8S_OPENSHIFTPODS) {
				k->pool_i++;
				k->got = 0;
				m->retry_in = 0;
				return SM_AGAIN;
			}
			m->error = SM_E_NOTFOUND;
			snprintf(m->error_msg, sizeof(m->error_msg), "%s not found",
				 m->external_id);
			return SM_ERROR;
		}
		if (!ok_status(k))
			return m_fail(k);
		k->got = 0;
		k->step = D_WAIT;
		k->deleted_at = np_mono_s();
		m->retry_in = 0;
		return SM_AGAIN;
	}
	/* D_WAIT: until gone (upstream's waitForNodeCleanup reads it until
	 * 404): told by the watch, else by reading */
	{
		struct kwatch *w = kwatch_use(a->flavor == K8S_OPENSHIFTPODS
						  ? pod_watch(a, pods_project(a, k->pool_i))
						  : a->ns_watch);
		double now = np_mono_s();
		char key[600];

		if (a->flavor == K8S_OPENSHIFTPODS)
			snprintf(key, sizeof(key), "%s/%s", pods_project(a, k->pool_i),
				 m->external_id);
		else
			snprintf(key, sizeof(key), "%s", m->external_id);
		return wait_gone(k, w, path, key, now);
	}
}

static const struct sm_machine_ops create_ops;

static void
machine_free(struct sm_machine *m)
{
	struct kmachine *k = (struct kmachine *)m;

	if (k->m.ops == &create_ops && k->claimed) {
		if (k->made_ns && !k->ns_ready)
			/* no binding yet: not fit to be a warm namespace */
			warm_ns_delete(k->a, k->ns,
				       "its launch failed before its binding was made");
		else if (!k->pod_maybe)
			warm_release(k->a, k->ns, k->pod);
		/* else the node's delete (of external_id) ends the claim */
	}
	waiter_remove(k);
	crole_waiter_remove(k);
	http_cancel(k->req_h);
	slots_clear(k);
	json_decref(k->meta);
	json_decref(k->resp);
	np_request_free(k->req);
	free(k->ns);
	free(k->pod);
	privsep_free_secret_str(k->token);
	free(k->ca_crt);
	free(k->host_id);
	free(k->pod_uid);
	json_decref(k->full);
	free(k->err);
	free(m->external_id);
	free(k);
}

static const struct sm_machine_ops create_ops = {.advance = create_advance, .free = machine_free};
static const struct sm_machine_ops delete_ops = {.advance = delete_advance, .free = machine_free};

static struct sm_machine *
k8s_create_machine(struct sm_adapter *a, const struct sm_create_args *args)
{
	struct kmachine *k = calloc(1, sizeof(*k));
	const char *nid = json_string_value(json_object_get(args->metadata, "nodepool_node_id"));
	char name[512];

	if (k == NULL)
		abort();
	k->m.ops = &create_ops;
	k->m.state = "start";
	k->m.retry_in = 0;
	k->a = a;
	k->label = args->label;
	k->meta = json_deep_copy(args->metadata);
	json_object_del(k->meta, "groups"); /* not a valid label value */
	k->req = args->request != NULL ? np_request_dup(args->request) : NULL;
	snprintf(k->node_id, sizeof(k->node_id), "%s", nid ? nid : "0");
	if (a->flavor == K8S_OPENSHIFTPODS) {
		/* upstream: pods named <label>-<node id> in the pool's project */
		k->ns = strdup(args->label->pool->name);
		snprintf(name, sizeof(name), "%s-%s", args->label->name, k->node_id);
		k->pod = strdup(name);
		k->token = a->conn.token ? strdup(a->conn.token) : NULL;
		k->ca_crt = a->conn.ca_pem ? strdup(a->conn.ca_pem) : NULL;
	} else {
		snprintf(name, sizeof(name), "%s-%s", args->label->pool->name, k->node_id);
		k->ns = strdup(name);
		if (is_reuse_label(a, args->label)) {
			/* a warm namespace holds pods of successive nodes */
			snprintf(name, sizeof(name), "%s-%s", args->label->name, k->node_id);
			k->pod = strdup(name);
			k->reuse = 1;
			k->full = json_object();
		} else if (is_pod_label(a, args->label))
			k->pod = strdup(args->label->name);
	}
	/* A pod node's token may exec into, read the logs of and forward
	 * ports to the pods of its namespace: its one pod, which runs as the
	 * namespace's default account. That account, made by the cluster,
	 * is the node's (one call fewer) on kubernetes when its token comes
	 * from a TokenRequest: its pod's own mounted token then gets rights
	 * over the pod itself only, which its processes have already.
	 * Namespace nodes (whose token may make workloads there, which would
	 * run with it) and openshift (which binds admin) keep upstream's
	 * zuul-worker. */
	k->sa = a->flavor == K8S_KUBERNETES && k->pod != NULL && (!a->token_secret || k->reuse)
		    ? K8S_DEFAULT_SA
		    : K8S_USER;
	k->step = k->reuse ? K_WARM : K_NS;
	a->creates++;
	return &k->m;
}

/*
 * The resume_machine slot (launches survive their launcher): the launch
 * an earlier launcher began for the node goes on from what the cluster
 * holds. Every name derives from the node id, so external_id (the
 * namespace or project, or the openshiftpods pod) is what a create for
 * the node names; the steps run again, each finding its object there
 * (409) instead of failing, and the pod is looked up before one is
 * created: a pod that exists is waited for, never made twice. No
 * upstream counterpart (upstream deletes the namespace).
 */
static struct sm_machine *
k8s_resume_machine(struct sm_adapter *a, const struct sm_create_args *args, const char *external_id)
{
	struct kmachine *k = (struct kmachine *)k8s_create_machine(a, args);

	a->creates--; /* not a create */
	k->resume = 1;
	if (k->reuse && strchr(external_id, '/') == NULL) {
		/* begun before the label had namespace-reuse: as it was begun */
		k->reuse = 0;
		free(k->pod);
		k->pod = strdup(args->label->name);
		k->step = K_NS;
	} else if (!k->reuse && a->flavor == K8S_KUBERNETES && k->pod != NULL &&
		   strchr(external_id, '/') != NULL) {
		/* begun while the label had namespace-reuse */
		k->reuse = 1;
		k->full = json_object();
		k->sa = K8S_DEFAULT_SA;
	}
	if (k->reuse) {
		/* "<warm namespace>/<pod>": made again where missing (409
		 * otherwise), the pod looked for first */
		const char *sl = strchr(external_id, '/');
		if (sl == NULL || strcmp(sl + 1, k->pod) != 0)
			log_warn("kubernetes: resuming %s, whose pod the node's id names %s",
				 external_id, k->pod);
		free(k->ns);
		k->ns = strndup(external_id, sl != NULL ? (size_t)(sl - external_id) : 0);
		if (sl != NULL) {
			free(k->pod);
			k->pod = strdup(sl + 1);
		}
		warm_claim(a, k->ns, k->pod);
		k->claimed = 1;
		k->ns_ready = 1; /* never deleted for a failure here: it may be another's */
		k->step = K_NS;
		sm_set_str(&k->m.external_id, external_id);
		return &k->m;
	}
	if (strcmp(external_id, a->flavor == K8S_OPENSHIFTPODS ? k->pod : k->ns) != 0)
		log_warn("kubernetes: resuming %s, which the node's id names %s", external_id,
			 a->flavor == K8S_OPENSHIFTPODS ? k->pod : k->ns);
	sm_set_str(&k->m.external_id, external_id);
	return &k->m;
}

static struct sm_machine *
k8s_delete_machine(struct sm_adapter *a, const char *external_id)
{
	struct kmachine *k = calloc(1, sizeof(*k));

	if (k == NULL)
		abort();
	k->m.ops = &delete_ops;
	k->m.state = "start";
	k->m.external_id = strdup(external_id);
	k->a = a;
	k->step = D_DELETE;
	if (a->flavor == K8S_KUBERNETES && strchr(external_id, '/') != NULL) {
		/* "<warm namespace>/<pod>": a namespace-reuse node */
		const char *sl = strchr(external_id, '/');
		k->reuse = 1;
		k->ns = strndup(external_id, (size_t)(sl - external_id));
		k->pod = strdup(sl + 1);
	}
	a->deletes++;
	return &k->m;
}

/* ---- listings (leak cleanup) --------------------------------------------------------------------
 */

struct kop {
	TAILQ_ENTRY(kop) entry;
	struct sm_adapter *a;
	struct http_req *req;
	sm_resources_cb rcb;
	sm_done_cb dcb;
	void *arg;
	size_t pool_i; /* openshiftpods listings: the pool project next */
	json_t *items; /* collected (openshiftpods; kubernetes: namespaces) */
	json_t *pods;  /* kubernetes with warm namespaces: the provider's pods */
	int stage;     /* kubernetes: 0 namespaces, 1 pods */
	char *id;      /* deletes */
	char type[16];
};

static void
kop_free(struct kop *o)
{
	TAILQ_REMOVE(&o->a->ops, o, entry);
	json_decref(o->items);
	json_decref(o->pods);
	free(o->id);
	free(o);
}

static void list_next(struct kop *o);

static void
list_answer(const struct http_response *res, void *arg)
{
	struct kop *o = arg;
	struct sm_adapter *a = o->a;
	json_t *body, *it;
	size_t i, n = 0;
	struct sm_resource *v;
	json_t *owned;
	char msg[512];

	o->req = NULL;
	body = k8s_answer_json(res->body, res->body_len);
	if (res->error != NULL || res->status != 200 ||
	    !json_is_array(json_object_get(body, "items"))) {
		k8s_status_describe("list", res->status, res->error, body, msg, sizeof(msg));
		json_decref(body);
		o->rcb(NULL, 0, msg, o->arg);
		kop_free(o);
		return;
	}
	if (o->stage == 1) {
		json_decref(o->pods);
		o->pods = json_incref(json_object_get(body, "items"));
	} else
		json_array_extend(o->items, json_object_get(body, "items"));
	json_decref(body);
	if (a->flavor == K8S_OPENSHIFTPODS && pods_project(a, o->pool_i) != NULL) {
		list_next(o);
		return;
	}
	if (a->flavor == K8S_KUBERNETES && o->stage == 0 && warm_wanted(a, o->items)) {
		/* warm namespaces: their pods are the nodes' */
		o->stage = 1;
		list_next(o);
		return;
	}
	owned = k8s_list_owned(o->items, a->flavor == K8S_OPENSHIFT, a->env->provider_name);
	if (o->pods != NULL) {
		json_t *wp = warm_cleanup(a, o->items, o->pods);
		json_array_extend(owned, wp);
		json_decref(wp);
	}
	v = calloc(json_array_size(owned) + 1, sizeof(*v));
	if (v == NULL)
		abort();
	json_array_foreach(owned, i, it)
	{
		v[n].type =
		    json_object_get(it, "type") != NULL ? np_json_str(it, "type", "") : o->type;
		v[n].id = json_string_value(json_object_get(it, "name"));
		v[n].metadata = json_object_get(it, "metadata");
		n++;
	}
	o->rcb(v, n, NULL, o->arg);
	free(v);
	json_decref(owned);
	kop_free(o);
}

static void
list_next(struct kop *o)
{
	struct sm_adapter *a = o->a;
	char path[1024] = "";

	if (a->flavor == K8S_OPENSHIFTPODS && pods_project(a, o->pool_i) != NULL) {
		snprintf(path, sizeof(path),
			 "/api/v1/namespaces/%s/pods?labelSelector=", pods_project(a, o->pool_i));
		o->pool_i++;
	} else if (o->stage == 1)
		snprintf(path, sizeof(path), "/api/v1/pods?labelSelector=");
	else if (a->flavor == K8S_OPENSHIFTPODS) {
		/* no pools: whatever pods of the provider the account can see */
		snprintf(path, sizeof(path), "/api/v1/pods?labelSelector=");
	} else if (a->flavor == K8S_OPENSHIFT)
		snprintf(path, sizeof(path), "/apis/project.openshift.io/v1/projects");
	else
		snprintf(path, sizeof(path), "/api/v1/namespaces?labelSelector=");
	if (a->flavor != K8S_OPENSHIFT) {
		char sel[512];
		snprintf(sel, sizeof(sel), "nodepool_provider_name=%s", a->env->provider_name);
		urlenc(path, sizeof(path), sel);
	}
	o->req = kcall(a, "GET", path, NULL, list_answer, o);
}

static void
k8s_list_resources(struct sm_adapter *a, sm_resources_cb cb, void *arg)
{
	struct kop *o = calloc(1, sizeof(*o));

	if (o == NULL)
		abort();
	o->a = a;
	o->rcb = cb;
	o->arg = arg;
	o->items = json_array();
	snprintf(o->type, sizeof(o->type), "%s",
		 a->flavor == K8S_OPENSHIFTPODS ? "pod"
		 : a->flavor == K8S_OPENSHIFT	? "project"
						: "namespace");
	TAILQ_INSERT_TAIL(&a->ops, o, entry);
	list_next(o);
}

static void
delete_answer(const struct http_response *res, void *arg)
{
	struct kop *o = arg;
	json_t *body = k8s_answer_json(res->body, res->body_len);
	char msg[512];

	o->req = NULL;
	if (res->error == NULL && (res->status == 404 || (res->status >= 200 && res->status < 300)))
		o->dcb(1, NULL, o->arg);
	else {
		k8s_status_describe("delete", res->status, res->error, body, msg, sizeof(msg));
		o->dcb(0, msg, o->arg);
	}
	json_decref(body);
	kop_free(o);
}

static void
k8s_delete_resource(struct sm_adapter *a, const struct sm_resource *r, sm_done_cb cb, void *arg)
{
	struct kop *o = calloc(1, sizeof(*o));
	char path[1024];
	json_t *body;

	if (o == NULL)
		abort();
	o->a = a;
	o->dcb = cb;
	o->arg = arg;
	TAILQ_INSERT_TAIL(&a->ops, o, entry);
	if (a->flavor == K8S_OPENSHIFTPODS)
		snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s",
			 SEG(np_json_str(r->metadata, "nodepool_pool_name", "")), SEG(r->id));
	else if (strcmp(r->type, "pod") == 0 && strchr(r->id, '/') != NULL) {
		/* a leaked pod in a warm namespace ("<namespace>/<pod>"); its
		 * namespace is free once the pods watch sees no pod in it (a
		 * claim this launcher holds on it stays: the namespace then
		 * waits for the next start) */
		char ns[300];
		const char *sl = strchr(r->id, '/');
		snprintf(ns, sizeof(ns), "%.*s", (int)(sl - r->id), r->id);
		snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", SEG(ns), SEG(sl + 1));
	} else if (a->flavor == K8S_OPENSHIFT)
		snprintf(path, sizeof(path), "/apis/project.openshift.io/v1/projects/%s",
			 SEG(r->id));
	else
		snprintf(path, sizeof(path), "/api/v1/namespaces/%s", SEG(r->id));
	body = json_pack("{s:s, s:s, s:s}", "apiVersion", "v1", "kind", "DeleteOptions",
			 "propagationPolicy", "Background");
	o->req = kcall(a, "DELETE", path, body, delete_answer, o);
	json_decref(body);
}

/* ---- warm namespaces made ahead of demand -------------------------------------------------------
 *
 * A label's warm-namespaces: N (with namespace-reuse) has leak cleanup
 * keep at least N warm namespaces of the label (at most its max-servers),
 * made before any launch needs them, as min-ready keeps nodes: the
 * namespace, then its binding (and a Role when ClusterRoles cannot be
 * made); claimed ("") until the binding is made, deleted if it cannot be.
 * Launches still make one when they find none free, so the count also
 * follows the high-water mark of nodes in use.
 */
struct kwarm;

/* One of a warm namespace's calls in flight (its answer's arg). */
struct kwarm_call {
	struct kwarm *w;
	struct http_req *req; /* NULL once answered */
};

struct kwarm {
	TAILQ_ENTRY(kwarm) entry;
	struct sm_adapter *a;
	char ns[300];
	const struct sm_label *label;
	struct kwarm_call call[3];
	int left, failed, conflict, stage; /* stage 0: namespace; 1: binding, quota (and role) */
};

static void warm_ahead_answered(const struct http_response *res, void *arg);

static void
kwarm_free(struct kwarm *w)
{
	TAILQ_REMOVE(&w->a->warming, w, entry);
	http_cancel(w->call[0].req);
	http_cancel(w->call[1].req);
	http_cancel(w->call[2].req);
	free(w);
}

static void
kwarm_call(struct kwarm *w, int i, const char *path, json_t *body)
{
	w->left++;
	w->call[i].w = w;
	w->call[i].req = kcall(w->a, "POST", path, body, warm_ahead_answered, &w->call[i]);
	json_decref(body);
	if (w->call[i].req == NULL) {
		w->left--;
		w->failed = 1;
	}
}

/* Start the namespace's binding (and Role): cluster as crole_ready. */
static void
kwarm_objects(struct kwarm *w)
{
	struct sm_adapter *a = w->a;
	int cluster = a->crole[0] == CR_READY;
	char path[1024];

	w->stage = 1;
	if (!cluster) {
		snprintf(path, sizeof(path),
			 "/apis/rbac.authorization.k8s.io/v1/namespaces/%s/roles", w->ns);
		kwarm_call(w, 0, path,
			   json_pack("{s:s, s:s, s:{s:s}, s:o}", "apiVersion",
				     "rbac.authorization.k8s.io/v1", "kind", "Role", "metadata",
				     "name", "zuul-restricted", "rules", role_rules(1)));
	}
	snprintf(path, sizeof(path),
		 "/apis/rbac.authorization.k8s.io/v1/namespaces/%s/rolebindings", w->ns);
	kwarm_call(w, 1, path,
		   json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s, s:s}, s:[{s:s, s:s, s:s}]}",
			     "apiVersion", "rbac.authorization.k8s.io/v1", "kind", "RoleBinding",
			     "metadata", "name", "zuul-role", "roleRef", "apiGroup",
			     "rbac.authorization.k8s.io", "kind", cluster ? "ClusterRole" : "Role",
			     "name", cluster ? K8S_CROLE_POD : "zuul-restricted", "subjects",
			     "kind", "ServiceAccount", "name", K8S_DEFAULT_SA, "namespace", w->ns));
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/resourcequotas", w->ns);
	kwarm_call(w, 2, path, warm_quota_body());
}

static void
warm_ahead_answer(const struct http_response *res, struct kwarm *w)
{
	struct sm_adapter *a = w->a;
	json_t *body = k8s_answer_json(res->body, res->body_len);
	char msg[512];

	w->left--;
	if (res->error != NULL || res->status < 200 || res->status >= 300) {
		k8s_status_describe(w->stage == 0 ? "POST namespaces" : "POST rolebindings",
				    res->status, res->error, body, msg, sizeof(msg));
		log_warn("provider %s: warm namespace %s: %s", a->env->provider_name, w->ns, msg);
		w->failed = 1;
		w->conflict = w->stage == 0 && res->error == NULL && res->status == 409;
	}
	json_decref(body);
	if (w->left > 0)
		return;
	if (w->failed) {
		if (w->conflict)
			json_object_del(a->claims, w->ns); /* not ours: leave it */
		else
			warm_ns_delete(a, w->ns, "its binding could not be made");
		kwarm_free(w);
		return;
	}
	if (w->stage == 0) {
		kwarm_objects(w);
		if (w->left == 0) {
			warm_ns_delete(a, w->ns, "its binding could not be made");
			kwarm_free(w);
		}
		return;
	}
	json_object_del(a->claims, w->ns); /* ready: free */
	a->warm_ahead++;
	log_info("provider %s: warm namespace %s made ahead for label %s", a->env->provider_name,
		 w->ns, w->label->name);
	kwarm_free(w);
}

/* The answer of one of w's calls (arg: its kwarm_call). */
static void
warm_ahead_answered(const struct http_response *res, void *arg)
{
	struct kwarm_call *c = arg;

	c->req = NULL;
	warm_ahead_answer(res, c->w);
}

/* Start one warm namespace of label l ahead of demand. */
static void
warm_ahead_one(struct sm_adapter *a, const struct sm_label *l)
{
	struct kwarm *w = calloc(1, sizeof(*w));
	unsigned char rb[4] = {0, 0, 0, 0};
	json_t *body;

	if (w == NULL)
		abort();
	w->a = a;
	w->label = l;
	if (RAND_bytes(rb, sizeof(rb)) != 1)
		rb[0] = (unsigned char)(np_mono_s() * 1000);
	snprintf(w->ns, sizeof(w->ns), "%.200s-reuse-%02x%02x%02x%02x", l->pool->name, rb[0], rb[1],
		 rb[2], rb[3]);
	TAILQ_INSERT_TAIL(&a->warming, w, entry);
	json_object_set_new(a->claims, w->ns, json_string("")); /* not before its binding */
	body = json_pack("{s:s, s:s, s:{s:s, s:{s:s, s:s, s:s}}}", "apiVersion", "v1", "kind",
			 "Namespace", "metadata", "name", w->ns, "labels", "nodepool_provider_name",
			 a->env->provider_name, "nodepool_pool_name", l->pool->name, K8S_WARM_LABEL,
			 l->name);
	kwarm_call(w, 0, "/api/v1/namespaces", body);
	if (w->left == 0) {
		json_object_del(a->claims, w->ns);
		kwarm_free(w);
	}
}

/* Whether a label of the provider asks for warm namespaces ahead. */
static int
warm_ahead_wanted(const struct sm_adapter *a)
{
	size_t i, j;

	for (i = 0; i < a->env->cfg->npools; i++)
		for (j = 0; j < a->env->cfg->pools[i].nlabels; j++) {
			const struct sm_label *l = &a->env->cfg->pools[i].labels[j];
			if (is_reuse_label(a, l) &&
			    json_integer_value(json_object_get(l->raw, "warm-namespaces")) > 0)
				return 1;
		}
	return 0;
}

/* Top each label's warm namespaces up to its warm-namespaces, counting
 * those the namespaces watch sees (not going) and those being made. Runs
 * at start, when the watch has listed, when the ClusterRole question is
 * settled (asked here when no launch has asked it yet) and on every leak
 * cleanup pass; each waits for what it needs. */
static void
warm_ahead(struct sm_adapter *a)
{
	size_t i, j;
	struct kwarm *w;
	struct kwatch *nw;
	json_t *total, *v;
	const char *name;
	char key[600];

	if (a->stopped || a->flavor != K8S_KUBERNETES || !warm_ahead_wanted(a) ||
	    a->crole[0] == CR_ASKING)
		return;
	if (a->crole[0] == CR_UNKNOWN) {
		json_t *body = json_pack("{s:s, s:s, s:{s:s}, s:o}", "apiVersion",
					 "rbac.authorization.k8s.io/v1", "kind", "ClusterRole",
					 "metadata", "name", K8S_CROLE_POD, "rules", role_rules(1));
		a->crole[0] = CR_ASKING;
		a->crole_req[0] =
		    kcall(a, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", body,
			  crole_answer_pod, a);
		json_decref(body);
		if (a->crole_req[0] == NULL)
			a->crole[0] = CR_UNKNOWN;
		return; /* crole_answer calls again */
	}
	nw = kwatch_use(a->ns_watch);
	if (nw == NULL || !nw->synced)
		return; /* its list calls again */
	total = json_object();
	json_object_foreach(nw->objs, name, v)
	{
		if (json_object_get(v, "w") == NULL || json_object_get(v, "t") != NULL)
			continue;
		snprintf(key, sizeof(key), "%s\n%s", np_json_str(v, "p", ""),
			 np_json_str(v, "w", ""));
		json_object_set_new(
		    total, key, json_integer(json_integer_value(json_object_get(total, key)) + 1));
	}
	for (i = 0; i < a->env->cfg->npools; i++)
		for (j = 0; j < a->env->cfg->pools[i].nlabels; j++) {
			const struct sm_label *l = &a->env->cfg->pools[i].labels[j];
			long long want = (long long)json_integer_value(
				      json_object_get(l->raw, "warm-namespaces")),
				  cap = warm_cap(a, l), have;
			if (!is_reuse_label(a, l) || want <= 0)
				continue;
			if (cap >= 0 && want > cap)
				want = cap;
			snprintf(key, sizeof(key), "%s\n%s", l->pool->name, l->name);
			have = (long long)json_integer_value(json_object_get(total, key));
			TAILQ_FOREACH(w, &a->warming, entry)
			{
				if (w->label == l)
					have++;
			}
			for (; have < want; have++)
				warm_ahead_one(a, l);
		}
	json_decref(total);
}

/* ---- warm namespaces' cleanup ------------------------------------------------------------------
 */

static void
warm_deleted(int ok, const char *error, void *arg)
{
	char *ns = arg;

	if (!ok)
		log_warn("warm namespace %s: delete failed: %s", ns, error);
	free(ns);
}

/* Delete warm namespace ns (never handed out again: claimed by nobody). */
static void
warm_ns_delete(struct sm_adapter *a, const char *ns, const char *why)
{
	struct sm_resource r = {.type = "namespace", .id = ns, .metadata = NULL};

	if (a->stopped)
		return;
	log_info("provider %s: deleting warm namespace %s: %s", a->env->provider_name, ns, why);
	json_object_set_new(a->claims, ns, json_string(""));
	a->warm_deleted++;
	k8s_delete_resource(a, &r, warm_deleted, strdup(ns));
}

/* Whether the provider has warm namespaces to look after: a label with
 * namespace-reuse, or one listed in nsitems. */
static int
warm_wanted(const struct sm_adapter *a, const json_t *nsitems)
{
	const json_t *it;
	size_t i, j;

	for (i = 0; i < a->env->cfg->npools; i++)
		for (j = 0; j < a->env->cfg->pools[i].nlabels; j++)
			if (is_reuse_label(a, &a->env->cfg->pools[i].labels[j]))
				return 1;
	json_array_foreach(nsitems, i, it)
	{
		if (json_object_get(json_object_get(json_object_get(it, "metadata"), "labels"),
				    K8S_WARM_LABEL) != NULL)
			return 1;
	}
	return 0;
}

/* The most warm namespaces a label keeps: the pool's max-servers, else
 * the provider's, else no bound (-1). */
static long long
warm_cap(const struct sm_adapter *a, const struct sm_label *l)
{
	const json_t *v = json_object_get(l->pool->raw, "max-servers");

	if (!json_is_integer(v))
		v = json_object_get(a->env->provider, "max-servers");
	return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

/*
 * Leak cleanup's part for warm namespaces, given the provider's namespaces
 * and pods as listed: deletes the free warm namespaces (no pod of ours in
 * them, not claimed) of a label that no longer has namespace-reuse (or no
 * longer exists) and those beyond warm_cap; returns the pods in warm
 * namespaces as resources for the framework's leak check ({name
 * "<namespace>/<pod>", type "pod", metadata: the pod's labels}).
 */
static json_t *
warm_cleanup(struct sm_adapter *a, const json_t *nsitems, const json_t *pods)
{
	json_t *out = json_array(), *occ = json_object(), *total = json_object(),
	       *warm = json_object();
	const json_t *it, *md, *lb;
	size_t i;
	char key[600];

	json_array_foreach(nsitems, i, it)
	{
		md = json_object_get(it, "metadata");
		lb = json_object_get(md, "labels");
		if (np_json_str(lb, K8S_WARM_LABEL, NULL) == NULL ||
		    strcmp(np_json_str(lb, "nodepool_provider_name", ""), a->env->provider_name) !=
			0 ||
		    np_json_str(md, "name", NULL) == NULL)
			continue;
		json_object_set(warm, np_json_str(md, "name", ""), (json_t *)it);
	}
	json_array_foreach(pods, i, it)
	{
		const char *ns, *name;
		md = json_object_get(it, "metadata");
		ns = np_json_str(md, "namespace", "");
		name = np_json_str(md, "name", NULL);
		if (name == NULL || json_object_get(warm, ns) == NULL)
			continue;
		json_object_set_new(occ, ns, json_true());
		snprintf(key, sizeof(key), "%s/%s", ns, name);
		json_array_append_new(out, json_pack("{s:s, s:s, s:O}", "name", key, "type", "pod",
						     "metadata",
						     json_is_object(json_object_get(md, "labels"))
							 ? json_object_get(md, "labels")
							 : json_object()));
	}
	{
		const char *name;
		json_t *v;
		json_object_foreach(warm, name, v)
		{
			lb = json_object_get(json_object_get(v, "metadata"), "labels");
			snprintf(key, sizeof(key), "%s\n%s",
				 np_json_str(lb, "nodepool_pool_name", ""),
				 np_json_str(lb, K8S_WARM_LABEL, ""));
			json_object_set_new(
			    total, key,
			    json_integer(json_integer_value(json_object_get(total, key)) + 1));
		}
		json_object_foreach(warm, name, v)
		{
			const struct sm_label *l;
			const char *pool, *label;
			long long cap, n;
			md = json_object_get(v, "metadata");
			lb = json_object_get(md, "labels");
			pool = np_json_str(lb, "nodepool_pool_name", "");
			label = np_json_str(lb, K8S_WARM_LABEL, "");
			snprintf(key, sizeof(key), "%s\n%s", pool, label);
			n = (long long)json_integer_value(json_object_get(total, key));
			if (json_object_get(md, "deletionTimestamp") != NULL ||
			    json_object_get(occ, name) != NULL ||
			    json_object_get(a->claims, name) != NULL)
				continue;
			l = sm_config_label(a->env->cfg, pool, label);
			if (l == NULL || !is_reuse_label(a, l)) {
				warm_ns_delete(a, name,
					       l == NULL
						   ? "its label is no longer in the pool"
						   : "its label no longer has namespace-reuse");
				continue;
			}
			cap = warm_cap(a, l);
			if (cap >= 0 && n > cap) {
				warm_ns_delete(a, name, "more than max-servers of its label");
				json_object_set_new(total, key, json_integer(n - 1));
			}
		}
	}
	warm_ahead(a);
	json_decref(occ);
	json_decref(total);
	json_decref(warm);
	return out;
}

/* ---- quota
 * --------------------------------------------------------------------------------------- */

/* What one node of label l uses (upstream's quotaNeededByLabel): cores =
 * cpu, ram = memory (or the pool's default-label-*), extra-resources. */
static int
k8s_label_quota_fill(const struct sm_label *l, struct drv_quota *out)
{
	double cpu = label_num(l, "cpu"), mem = label_num(l, "memory");
	const json_t *extra = json_object_get(l->raw, "extra-resources"), *v;
	const char *k;

	if (json_object_get(l->raw, "spec") != NULL) {
		cpu = -1;
		mem = -1;
	}
	if (extra == NULL)
		extra = json_object_get(l->pool->raw, "default-label-extra-resources");
	out->instances = 1;
	if (cpu > 0)
		out->cores = cpu;
	if (mem > 0)
		out->ram = mem;
	json_object_foreach((json_t *)extra, k, v)
	{
		if (!json_is_number(v))
			continue;
		if (out->extra == NULL)
			out->extra = json_object();
		json_object_set_new(out->extra, k, json_real(json_number_value(v)));
	}
	return 0;
}

static int
k8s_label_quota(struct sm_adapter *a, const struct sm_label *label, struct drv_quota *out,
		char *err, size_t errlen)
{
	(void)a;
	(void)err;
	(void)errlen;
	return k8s_label_quota_fill(label, out);
}

/* ---- the adapter -------------------------------------------------------------------------------
 */

/* namespace-reuse is for kubernetes pod labels with TokenRequest tokens
 * (a token bound to the pod): 0, or -1 with err. */
static int
reuse_check(const struct sm_env *env, enum k8s_flavor flavor, long long token_lifetime, char *err,
	    size_t errlen)
{
	size_t i, j;

	for (i = 0; i < env->cfg->npools; i++)
		for (j = 0; j < env->cfg->pools[i].nlabels; j++) {
			const struct sm_label *l = &env->cfg->pools[i].labels[j];
			const json_t *v = json_object_get(l->raw, "namespace-reuse");
			const char *t = np_json_str(l->raw, "type", "pod");
			json_int_t ahead =
			    json_integer_value(json_object_get(l->raw, "warm-namespaces"));
			if (!json_is_true(v) &&
			    json_object_get(l->raw, "warm-namespaces") != NULL) {
				snprintf(err, errlen,
					 "pool %s label %s: warm-namespaces needs namespace-reuse: "
					 "true",
					 env->cfg->pools[i].name, l->name);
				return -1;
			}
			if (ahead < 0) {
				snprintf(err, errlen,
					 "pool %s label %s: warm-namespaces %lld: 0 or more",
					 env->cfg->pools[i].name, l->name, (long long)ahead);
				return -1;
			}
			if (!json_is_true(v))
				continue;
			if (flavor != K8S_KUBERNETES || strcmp(t, "pod") != 0) {
				snprintf(err, errlen,
					 "pool %s label %s: namespace-reuse is for kubernetes "
					 "labels of type pod",
					 env->cfg->pools[i].name, l->name);
				return -1;
			}
			if (token_lifetime == 0) {
				snprintf(err, errlen,
					 "pool %s label %s: namespace-reuse needs TokenRequest "
					 "tokens (bound to the pod): token-lifetime 0 asks for "
					 "token secrets",
					 env->cfg->pools[i].name, l->name);
				return -1;
			}
		}
	return 0;
}

static struct sm_adapter *
adapter_new(const struct sm_env *env, enum k8s_flavor flavor, char *err, size_t errlen)
{
	struct sm_adapter *a = calloc(1, sizeof(*a));
	struct http_client_options ho;
	const char *ctx = np_json_str(env->provider, "context", NULL);
	char e2[512];

	if (a == NULL)
		abort();
	/* first: without libcurl nothing below matters */
	snprintf(e2, sizeof(e2), "driver %s", flavor_name(flavor));
	if (http_load(e2, err, errlen) != 0) {
		free(a);
		return NULL;
	}
	a->env = env;
	a->flavor = flavor;
	TAILQ_INIT(&a->ops);
	TAILQ_INIT(&a->waiters);
	TAILQ_INIT(&a->crole_waiters);
	TAILQ_INIT(&a->warming);
	a->token_lifetime = K8S_TOKEN_LIFETIME;
	if (json_object_get(env->provider, "token-lifetime") != NULL) {
		a->token_lifetime =
		    (long long)json_integer_value(json_object_get(env->provider, "token-lifetime"));
		if (a->token_lifetime != 0 &&
		    (a->token_lifetime < K8S_TOKEN_MIN || a->token_lifetime > K8S_TOKEN_MAX)) {
			snprintf(err, errlen,
				 "token-lifetime %lld: 0 (token secrets, as upstream) or %d to "
				 "%lld seconds",
				 a->token_lifetime, K8S_TOKEN_MIN, K8S_TOKEN_MAX);
			free(a);
			return NULL;
		}
	}
	a->token_secret = a->token_lifetime == 0;
	if (reuse_check(env, flavor, a->token_lifetime, err, errlen) != 0) {
		free(a);
		return NULL;
	}
	if (k8s_conn_load(ctx, &a->conn, e2, sizeof(e2)) != 0) {
		snprintf(err, errlen, "%s", e2);
		free(a);
		return NULL;
	}
	if (flavor == K8S_OPENSHIFTPODS && a->conn.token == NULL) {
		snprintf(err, errlen,
			 "context %s has no token: openshiftpods hands the provider's own "
			 "token to Zuul",
			 a->conn.context);
		k8s_conn_clear(&a->conn);
		free(a);
		return NULL;
	}
	if (!a->token_secret && !a->conn.insecure && a->conn.ca_pem == NULL &&
	    flavor != K8S_OPENSHIFTPODS && warm_wanted(a, NULL)) {
		snprintf(err, errlen,
			 "context %s names no CA: namespace-reuse hands nodes TokenRequest "
			 "tokens, which carry none",
			 a->conn.context);
		k8s_conn_clear(&a->conn);
		free(a);
		return NULL;
	}
	if (!a->token_secret && !a->conn.insecure && a->conn.ca_pem == NULL &&
	    flavor != K8S_OPENSHIFTPODS) {
		/* a TokenRequest gives no ca.crt: the token secret's is the
		 * one to hand on */
		log_info("provider %s: context %s names no CA: token secrets, which carry "
			 "the cluster's",
			 env->provider_name, a->conn.context);
		a->token_secret = 1;
	}
	if (a->conn.token != NULL)
		snprintf(a->auth, sizeof(a->auth), "Authorization: Bearer %s", a->conn.token);
	else if (a->conn.basic != NULL) {
		unsigned char enc[4096];
		size_t n = strlen(a->conn.basic);
		if (n < 3000) {
			EVP_EncodeBlock(enc, (const unsigned char *)a->conn.basic, (int)n);
			snprintf(a->auth, sizeof(a->auth), "Authorization: Basic %s", enc);
		}
	}
	memset(&ho, 0, sizeof(ho));
	ho.rate = env->cfg->rate;
	ho.max_concurrency = K8S_MAX_INFLIGHT;
	ho.timeout = K8S_CALL_TIMEOUT;
	ho.ca_pem = a->conn.ca_pem;
	ho.cert_pem = a->conn.cert_pem;
	ho.key_pem = a->conn.key_pem;
	ho.insecure = a->conn.insecure;
	ho.user_agent = "nodepoold";
	a->http = http_client_new(env->base, &ho, e2, sizeof(e2));
	if (a->http == NULL) {
		snprintf(err, errlen, "%s", e2);
		k8s_conn_clear(&a->conn);
		free(a);
		return NULL;
	}
	a->claims = json_object();
	watches_setup(a);
	warm_ahead(a); /* warm-namespaces: from the start */
	log_info("provider %s: %s API at %s (context %s, %s)", env->provider_name,
		 flavor_name(flavor), a->conn.server, a->conn.context,
		 a->conn.token	    ? "token"
		 : a->conn.cert_pem ? "client certificate"
				    : "no credentials");
	if (a->conn.insecure)
		log_warn("provider %s: context %s has insecure-skip-tls-verify: the API "
			 "server's certificate and name are not checked, and its credentials go "
			 "to whoever answers",
			 env->provider_name, a->conn.context);
	return a;
}

static struct sm_adapter *
kubernetes_adapter_new(const struct sm_env *env, char *err, size_t errlen)
{
	return adapter_new(env, K8S_KUBERNETES, err, errlen);
}

static struct sm_adapter *
openshift_adapter_new(const struct sm_env *env, char *err, size_t errlen)
{
	return adapter_new(env, K8S_OPENSHIFT, err, errlen);
}

static struct sm_adapter *
openshiftpods_adapter_new(const struct sm_env *env, char *err, size_t errlen)
{
	return adapter_new(env, K8S_OPENSHIFTPODS, err, errlen);
}

static void
k8s_adapter_stop(struct sm_adapter *a)
{
	size_t i;

	a->stopped = 1;
	for (i = 0; i < 2; i++) {
		http_cancel(a->crole_req[i]);
		a->crole_req[i] = NULL;
	}
	for (i = 0; i < a->nwatches; i++) {
		http_cancel(a->watches[i]->req);
		a->watches[i]->req = NULL;
		if (a->watches[i]->retry_ev != NULL)
			evtimer_del(a->watches[i]->retry_ev);
	}
}

static void
k8s_adapter_free(struct sm_adapter *a)
{
	struct kop *o;

	if (a == NULL)
		return;
	while ((o = TAILQ_FIRST(&a->ops)) != NULL) {
		http_cancel(o->req);
		kop_free(o);
	}
	while (!TAILQ_EMPTY(&a->warming))
		kwarm_free(TAILQ_FIRST(&a->warming));
	http_cancel(a->crole_req[0]);
	http_cancel(a->crole_req[1]);
	while (a->nwatches > 0)
		kwatch_free(a->watches[--a->nwatches]);
	free(a->watches);
	json_decref(a->claims);
	http_client_free(a->http);
	k8s_conn_clear(&a->conn);
	free(a);
}

static void
k8s_dump(struct sm_adapter *a, struct evbuffer *out)
{
	struct http_stats st;
	size_t i;

	http_get_stats(a->http, &st);
	evbuffer_add_printf(out,
			    "  %s API %s (context %s): calls %llu (in flight %u, queued %u, "
			    "errors %llu, throttled %llu), creates %llu, deletes %llu\n",
			    flavor_name(a->flavor), a->conn.server, a->conn.context, a->calls,
			    st.inflight, st.queued, (unsigned long long)st.errors,
			    (unsigned long long)st.throttled, a->creates, a->deletes);
	if (a->flavor != K8S_OPENSHIFTPODS)
		evbuffer_add_printf(out, "    node tokens: %s; roles: %s\n",
				    a->token_secret ? "token secrets" : "TokenRequest",
				    a->flavor == K8S_OPENSHIFT ? "ClusterRole admin"
				    : a->crole[0] == CR_READY || a->crole[1] == CR_READY
					? "ClusterRoles bound per namespace"
					: "a Role per namespace");
	if (a->warm_made + a->warm_reused + a->warm_deleted + a->warm_ahead > 0 ||
	    json_object_size(a->claims) > 0)
		evbuffer_add_printf(out,
				    "    warm namespaces: made by launches %llu, made ahead %llu, "
				    "reused %llu, deleted %llu, claimed now %zu\n",
				    a->warm_made, a->warm_ahead, a->warm_reused, a->warm_deleted,
				    json_object_size(a->claims));
	for (i = 0; i < a->nwatches; i++) {
		const struct kwatch *w = a->watches[i];
		if (!w->started)
			continue;
		evbuffer_add_printf(
		    out,
		    "    watch %s (%.60s): %s, %zu objects, lists %llu, watches %llu, "
		    "events %llu, expired %llu, dropped %llu\n",
		    w->what, w->path,
		    w->unsupported ? "unsupported (reading instead)"
		    : w->watching  ? "watching"
				   : "listing or restarting",
		    json_object_size(w->objs), w->lists, w->watches, w->events, w->expired,
		    w->drops);
	}
}

#define K8S_ADAPTER_SLOTS                                                                          \
	.adapter_stop = k8s_adapter_stop, .adapter_free = k8s_adapter_free,                        \
	.create_machine = k8s_create_machine, .resume_machine = k8s_resume_machine,                \
	.delete_machine = k8s_delete_machine, .list_resources = k8s_list_resources,                \
	.delete_resource = k8s_delete_resource, .label_quota = k8s_label_quota, .dump = k8s_dump

static const struct sm_adapter_ops kubernetes_adapter = {
    .name = "kubernetes",
    .adapter_new = kubernetes_adapter_new,
    K8S_ADAPTER_SLOTS,
};
static const struct sm_adapter_ops openshift_adapter = {
    .name = "openshift",
    .adapter_new = openshift_adapter_new,
    K8S_ADAPTER_SLOTS,
};
static const struct sm_adapter_ops openshiftpods_adapter = {
    .name = "openshiftpods",
    .adapter_new = openshiftpods_adapter_new,
    K8S_ADAPTER_SLOTS,
};

/* No nodescan (containers have no sshd to scan), no rate limit, upstream's
 * boot-timeout default. */
static const struct sm_defaults k8s_defaults = {
    .boot_timeout = K8S_BOOT_TIMEOUT,
    .rate = 0,
    .host_key_checking = 0,
};

static struct drv_provider *
kubernetes_provider_new(struct drv_host *lc, char *err, size_t errlen)
{
	return sm_provider_new(&kubernetes_adapter, &k8s_defaults, lc, err, errlen);
}

static struct drv_provider *
openshift_provider_new(struct drv_host *lc, char *err, size_t errlen)
{
	return sm_provider_new(&openshift_adapter, &k8s_defaults, lc, err, errlen);
}

static struct drv_provider *
openshiftpods_provider_new(struct drv_host *lc, char *err, size_t errlen)
{
	return sm_provider_new(&openshiftpods_adapter, &k8s_defaults, lc, err, errlen);
}

const struct driver drv_kubernetes = {
    .name = "kubernetes",
    .pause_at_quota = 1,
    .delete_at_once = 1,
    .provider_new = kubernetes_provider_new,
    SM_DRIVER_SLOTS,
};

const struct driver drv_openshift = {
    .name = "openshift",
    .pause_at_quota = 1,
    .delete_at_once = 1,
    .provider_new = openshift_provider_new,
    SM_DRIVER_SLOTS,
};

const struct driver drv_openshiftpods = {
    .name = "openshiftpods",
    .pause_at_quota = 1,
    .delete_at_once = 1,
    .provider_new = openshiftpods_provider_new,
    SM_DRIVER_SLOTS,
};
