"""kubesim: a Kubernetes API server simulator for nodepoold's tests.

One process serves, over HTTPS with client-certificate and bearer-token
authentication, the parts of the Kubernetes API that Nodepool's
kubernetes, openshift and openshiftpods drivers (and kubectl get, describe
and delete) use:

  core v1      namespaces, pods, serviceaccounts, secrets (with the token
               controller filling kubernetes.io/service-account-token
               secrets), events/resourcequotas/limitranges (empty, for
               kubectl describe)
  rbac v1      roles, rolebindings
  OpenShift    project.openshift.io/v1 projects and projectrequests
  discovery    /version, /api, /api/v1, /apis, /apis/<group>/<version>

Pods go Pending -> Running after a delay, or stay Pending with an image
pull error or as unschedulable, as behaviour or per-pod outcomes say.
Errors are Status objects with the reason and code the real server gives
(404 NotFound, 409 AlreadyExists, 401 Unauthorized, 403 Forbidden, 422
Invalid, 429 TooManyRequests, 500 InternalError).

A control API for tests (plain HTTP on its own port) under /_sim/: fault
injection, behaviour, state, call counts: see README.md next to this file.
Stdlib only; judged by python3-kubernetes and kubectl
(tests/process/test_kubernetes_sim.py).
"""
import argparse
import base64
import collections
import datetime
import http.server
import json
import os
import re
import secrets as pysecrets
import socketserver
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid

ADMIN_USER = "kubernetes-admin"
# A boolean query parameter is true as Go's strconv.ParseBool reads it
# (python3-kubernetes sends "True").
QTRUE = ("1", "t", "T", "true", "TRUE", "True")


def rand5():
    """The 5-character suffix the API server's name generator adds."""
    return "".join(pysecrets.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))


def now_iso(t=None):
    d = datetime.datetime.fromtimestamp(t if t is not None else time.time(),
                                        datetime.timezone.utc)
    return d.strftime("%Y-%m-%dT%H:%M:%SZ")


class HTTPError(Exception):
    def __init__(self, status, body, headers=None):
        super().__init__(status)
        self.status = status
        self.body = body
        self.headers = headers or {}


REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
           405: "MethodNotAllowed", 409: "AlreadyExists", 410: "Expired", 415: "UnsupportedMediaType",
           422: "Invalid", 429: "TooManyRequests", 500: "InternalError",
           503: "ServiceUnavailable", 504: "Timeout"}


def status_error(code, message, reason=None, name=None, kind=None, group=None, retry_after=None):
    """A metav1.Status failure, as the API server answers errors."""
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason or REASONS.get(code, ""), "code": code}
    details = {}
    if name is not None:
        details["name"] = name
    if group:
        details["group"] = group
    if kind is not None:
        details["kind"] = kind
    if retry_after is not None:
        details["retryAfterSeconds"] = retry_after
    if details:
        body["details"] = details
    headers = {}
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    return HTTPError(code, body, headers)


def not_found(plural, name, group=""):
    what = "%s.%s" % (plural, group) if group else plural
    return status_error(404, '%s "%s" not found' % (what, name), "NotFound", name, plural, group)


def already_exists(plural, name, group=""):
    what = "%s.%s" % (plural, group) if group else plural
    return status_error(409, '%s "%s" already exists' % (what, name), "AlreadyExists", name,
                        plural, group)


# ---------------------------------------------------------------- resources

# plural -> (group, version, Kind, namespaced, short names, verbs)
ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
RESOURCES = {
    "namespaces": ("", "v1", "Namespace", False, ["ns"]),
    "pods": ("", "v1", "Pod", True, ["po"]),
    "serviceaccounts": ("", "v1", "ServiceAccount", True, ["sa"]),
    "secrets": ("", "v1", "Secret", True, []),
    "events": ("", "v1", "Event", True, ["ev"]),
    "resourcequotas": ("", "v1", "ResourceQuota", True, ["quota"]),
    "limitranges": ("", "v1", "LimitRange", True, ["limits"]),
    "roles": ("rbac.authorization.k8s.io", "v1", "Role", True, []),
    "rolebindings": ("rbac.authorization.k8s.io", "v1", "RoleBinding", True, []),
    "clusterroles": ("rbac.authorization.k8s.io", "v1", "ClusterRole", False, []),
    "projects": ("project.openshift.io", "v1", "Project", False, []),
    "projectrequests": ("project.openshift.io", "v1", "ProjectRequest", False, []),
    # OpenShift's legacy authorization API: a view of the rbac RoleBindings
    # (stored as rbac ones, as OpenShift does), keyed "<plural>.<group>".
    "rolebindings.authorization.openshift.io": ("authorization.openshift.io", "v1",
                                                "RoleBinding", True, []),
}
OS_RB = "rolebindings.authorization.openshift.io"
# Kept (listed, got) but never populated by the simulator.
ALWAYS_EMPTY = ("events", "limitranges")
OPENSHIFT_ONLY = ("projects", "projectrequests", OS_RB)


class Fault:
    FIELDS = ("method", "path", "status", "body", "retry_after", "count", "after", "hang",
              "drop", "delay", "then", "message", "watch")

    def __init__(self, fid, spec):
        self.id = fid
        for k in self.FIELDS:
            setattr(self, k, spec.get(k))
        self.hits = 0
        self.seen = 0
        self.released = threading.Event()
        self.rx = re.compile(self.path) if self.path else None

    def matches(self, method, path, watch=False):
        if self.method and self.method.upper() != method:
            return False
        if self.watch is not None and bool(self.watch) != watch:
            return False
        if self.rx and not self.rx.search(path):
            return False
        return True

    def view(self):
        d = {k: getattr(self, k) for k in self.FIELDS if getattr(self, k) is not None}
        d.update(id=self.id, hits=self.hits)
        return d


def parse_selector(sel):
    """A label selector's simple forms: k=v, k==v, k!=v, k, !k (comma-separated)."""
    out = []
    if not sel:
        return out
    for part in sel.split(","):
        part = part.strip()
        if not part:
            continue
        m = re.match(r"^([^=!]+)\s*(==|=|!=)\s*(.*)$", part)
        if m:
            out.append((m.group(1).strip(), m.group(2), m.group(3).strip()))
        elif part.startswith("!"):
            out.append((part[1:].strip(), "!", None))
        else:
            out.append((part, "exists", None))
    return out


def selector_match(sel, labels):
    labels = labels or {}
    for k, op, v in sel:
        if op in ("=", "=="):
            if labels.get(k) != v:
                return False
        elif op == "!=":
            if labels.get(k) == v:
                return False
        elif op == "!":
            if k in labels:
                return False
        elif k not in labels:
            return False
    return True


def field_match(fsel, obj):
    for part in (fsel or "").split(","):
        if not part:
            continue
        m = re.match(r"^([^=!]+)(==|=|!=)(.*)$", part)
        if not m:
            raise status_error(400, "invalid field selector %r" % part, "BadRequest")
        cur = obj
        for seg in m.group(1).split("."):
            cur = cur.get(seg) if isinstance(cur, dict) else None
        eq = (str(cur) if cur is not None else "") == m.group(3)
        if eq != (m.group(2) != "!="):
            return False
    return True


class Sim:
    def __init__(self, cfg):
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self.openshift = cfg.get("openshift", True)
        self.pod_delay = float(cfg.get("pod_delay", 0.5))
        self.pod_outcome = cfg.get("pod_outcome", "running")
        self.token_delay = float(cfg.get("token_delay", 0.1))
        self.ns_delete_delay = float(cfg.get("namespace_delete_delay", 0.2))
        # seconds before the service account controller makes a new
        # namespace's "default" account (pods are refused until then)
        self.default_sa_delay = float(cfg.get("default_sa_delay", 0))
        self.pending_sa = []  # (due time, namespace)
        self.image_outcomes = dict(cfg.get("image_outcomes", {}))  # image regex -> outcome
        self.outcomes = collections.deque()
        self.node_name = cfg.get("node_name", "sim-node-1")
        # "1.23": Kubernetes before 1.24 (and OpenShift up to 4.15): the
        # token controller makes a token secret for every service account
        # and lists it under the account's `secrets`; "1.24" and later do not.
        self.version = str(cfg.get("kubernetes_version", "1.28"))
        m = re.match(r"^v?(\d+)\.(\d+)", self.version)
        if not m:
            raise SystemExit("kubesim: kubernetes_version %r is not MAJOR.MINOR" % self.version)
        self.major, self.minor = int(m.group(1)), int(m.group(2))
        self.legacy_tokens = (self.major, self.minor) < (1, 24)
        # TokenRequest (serviceaccounts/<sa>/token, authentication.k8s.io/v1)
        # is served from 1.20 on, when it went GA; before that it needed
        # API server flags: modelled as absent (404).
        self.token_request = (self.major, self.minor) >= (1, 20)
        # --service-account-max-token-expiration: longer requests are cut
        # to it (0: no cap)
        self.max_token_expiration = int(cfg.get("max_token_expiration", 0))
        self.bookmark_interval = float(cfg.get("bookmark_interval", 5.0))
        self.rv = 1000
        # Watch history: (rv, type, key, ns, object); a watch from a
        # resourceVersion older than `compacted` is answered 410 Expired.
        self.events = collections.deque()
        self.max_events = int(cfg.get("watch_history", 5000))
        self.compacted = self.rv
        self.watch_gen = 0  # bumped to close every open watch
        self.open_watches = 0
        self.namespaces = {}  # name -> object
        self.objs = {}  # (plural, ns, name) -> object
        self.pod_state = {}  # (ns, name) -> dict(outcome, ready_at)
        self.tokens = {}  # token -> {"user":..., "namespace":..., "sa":...}
        self.admin_token = cfg.get("admin_token") or "kubesim-admin-" + pysecrets.token_hex(8)
        self.tokens[self.admin_token] = {"user": ADMIN_USER, "groups": ["system:masters"]}
        self.admin_cn = cfg.get("admin_cn", ADMIN_USER)
        self.faults = {}
        self.fault_seq = 0
        self.calls = collections.Counter()
        self.call_log = collections.deque(maxlen=20000)
        self.ca_pem = ""
        with self.lock:
            for name in cfg.get("namespaces", ["default", "kube-system"]):
                self._create_namespace(name, {}, {})

    # ---- helpers

    def next_rv(self):
        self.rv += 1
        return str(self.rv)

    def new_meta(self, meta, ns=None):
        m = dict(meta or {})
        m["uid"] = str(uuid.uuid4())
        m["resourceVersion"] = self.next_rv()
        m["creationTimestamp"] = now_iso()
        if ns is not None:
            m["namespace"] = ns
        return m

    def emit(self, etype, plural, obj):
        """Record a change for watchers: obj as it is now (its
        resourceVersion is the event's)."""
        rv = int(obj["metadata"]["resourceVersion"])
        self.events.append((rv, etype, plural, obj["metadata"].get("namespace"), clean(obj)))
        while len(self.events) > self.max_events:
            self.compacted = self.events.popleft()[0]
        self.cond.notify_all()

    def events_after(self, pos):
        """The recorded changes after resourceVersion pos, oldest first
        (read from the newest end: watchers are usually near it)."""
        out = []
        for e in reversed(self.events):
            if e[0] <= pos:
                break
            out.append(e)
        out.reverse()
        return out

    def _service_account(self, ns, name, body=None):
        """A service account as the API server and its controllers make it:
        before 1.24 a token secret "<sa>-token-xxxxx" (and on OpenShift a
        pull secret "<sa>-dockercfg-xxxxx" first) listed under `secrets`."""
        sa = json.loads(json.dumps(body)) if body else {}
        sa["kind"] = "ServiceAccount"
        sa["apiVersion"] = "v1"
        sa["metadata"] = self.new_meta(dict((body or {}).get("metadata") or {}, name=name), ns)
        self.objs[("serviceaccounts", ns, name)] = sa
        self.emit("ADDED", "serviceaccounts", sa)
        if not self.legacy_tokens:
            return sa
        refs = []
        if self.openshift:
            dname = "%s-dockercfg-%s" % (name, rand5())
            dsec = {"kind": "Secret", "apiVersion": "v1", "type": "kubernetes.io/dockercfg",
                    "metadata": self.new_meta({"name": dname, "annotations": {
                        "kubernetes.io/service-account.name": name,
                        "kubernetes.io/service-account.uid": sa["metadata"]["uid"],
                        "openshift.io/token-secret.name": "%s-token-%s" % (name, rand5())}},
                        ns),
                    "data": {".dockercfg": base64.b64encode(b"{}").decode()}}
            self.objs[("secrets", ns, dname)] = dsec
            self.emit("ADDED", "secrets", dsec)
            refs.append({"name": dname})
            sa["imagePullSecrets"] = [{"name": dname}]
        tname = "%s-token-%s" % (name, rand5())
        tsec = {"kind": "Secret", "apiVersion": "v1", "type": "kubernetes.io/service-account-token",
                "metadata": self.new_meta({"name": tname, "annotations": {
                    "kubernetes.io/service-account.name": name}}, ns),
                "_token_at": time.time() + self.token_delay}
        self.objs[("secrets", ns, tname)] = tsec
        self.emit("ADDED", "secrets", tsec)
        refs.append({"name": tname})
        sa["secrets"] = refs
        sa["metadata"]["resourceVersion"] = self.next_rv()
        self.emit("MODIFIED", "serviceaccounts", sa)
        return sa

    def _create_namespace(self, name, labels, annotations):
        obj = {"kind": "Namespace", "apiVersion": "v1",
               "metadata": self.new_meta({"name": name, "labels": dict(labels or {},
                                          **{"kubernetes.io/metadata.name": name})}),
               "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}
        if annotations:
            obj["metadata"]["annotations"] = dict(annotations)
        self.namespaces[name] = obj
        self.emit("ADDED", "namespaces", obj)
        # The service account controller makes "default" in every namespace.
        if self.default_sa_delay > 0:
            self.pending_sa.append((time.time() + self.default_sa_delay, name))
        else:
            self._service_account(name, "default")
        return obj

    def advance(self):
        """Time-driven transitions: pods start, tokens appear, namespaces go."""
        now = time.time()
        changed = False
        for due, ns in [p for p in self.pending_sa if p[0] <= now]:
            self.pending_sa.remove((due, ns))
            if ns in self.namespaces and ("serviceaccounts", ns, "default") not in self.objs:
                self._service_account(ns, "default")
                changed = True
        for (ns, name), st in list(self.pod_state.items()):
            pod = self.objs.get(("pods", ns, name))
            if pod is None:
                del self.pod_state[(ns, name)]
                continue
            if st.get("done") or now < st["ready_at"]:
                continue
            st["done"] = True
            changed = True
            self._pod_outcome(pod, st["outcome"], now)
            self.emit("MODIFIED", "pods", pod)
        for key, obj in list(self.objs.items()):
            if key[0] != "secrets" or obj.get("type") != "kubernetes.io/service-account-token":
                continue
            if obj.get("data", {}).get("token") or now < obj.get("_token_at", 0):
                continue
            self._fill_token(obj)
            self.emit("MODIFIED", "secrets", obj)
            changed = True
        for name, obj in list(self.namespaces.items()):
            if obj["status"]["phase"] == "Terminating" and now >= obj.get("_gone_at", 0):
                for key in [k for k in self.objs if k[1] == name]:
                    o = self.objs.pop(key)
                    self.pod_state.pop((name, key[2]), None) if key[0] == "pods" else None
                    o["metadata"]["resourceVersion"] = self.next_rv()
                    self.emit("DELETED", key[0], o)
                for t in [t for t, v in self.tokens.items() if v.get("namespace") == name]:
                    del self.tokens[t]
                del self.namespaces[name]
                obj["metadata"]["resourceVersion"] = self.next_rv()
                self.emit("DELETED", "namespaces", obj)
                changed = True
        if changed:
            self.cond.notify_all()

    def next_due(self):
        """Seconds until the next time-driven transition (None: none due)."""
        due = [st["ready_at"] for st in self.pod_state.values() if not st.get("done")]
        due += [o["_token_at"] for k, o in self.objs.items()
                if k[0] == "secrets" and "_token_at" in o and not o.get("data", {}).get("token")]
        due += [p[0] for p in self.pending_sa]
        due += [o.get("_gone_at", 0) for o in self.namespaces.values()
                if o["status"]["phase"] == "Terminating"]
        return max(0.0, min(due) - time.time()) if due else None

    def _pod_outcome(self, pod, outcome, now):
        spec = pod["spec"]
        st = pod["status"]
        cname = spec["containers"][0]["name"] if spec.get("containers") else "main"
        image = spec["containers"][0].get("image", "") if spec.get("containers") else ""
        pod["metadata"]["resourceVersion"] = self.next_rv()
        if outcome == "running":
            spec["nodeName"] = self.node_name
            ip = "10.244.0.%d" % (self.rv % 250 + 2)
            st.update(phase="Running", hostIP="10.0.0.10", hostIPs=[{"ip": "10.0.0.10"}],
                      podIP=ip, podIPs=[{"ip": ip}], startTime=now_iso(now))
            st["conditions"] = [{"type": t, "status": "True", "lastProbeTime": None,
                                 "lastTransitionTime": now_iso(now)}
                                for t in ("Initialized", "Ready", "ContainersReady",
                                          "PodScheduled")]
            st["containerStatuses"] = [{
                "name": c["name"], "image": c.get("image", ""),
                "imageID": image_id(c.get("image", "")),
                "ready": True, "restartCount": 0, "started": True,
                "state": {"running": {"startedAt": now_iso(now)}},
                "lastState": {}, "containerID": "containerd://" + uuid.uuid4().hex}
                for c in spec.get("containers", [])]
        elif outcome in ("image_pull", "ErrImagePull", "ImagePullBackOff"):
            spec["nodeName"] = self.node_name
            reason = "ErrImagePull" if outcome == "ErrImagePull" else "ImagePullBackOff"
            st["conditions"] = [{"type": "PodScheduled", "status": "True",
                                 "lastProbeTime": None, "lastTransitionTime": now_iso(now)}]
            st["containerStatuses"] = [{
                "name": cname, "image": image, "imageID": "", "ready": False,
                "restartCount": 0, "started": False, "lastState": {},
                "state": {"waiting": {"reason": reason,
                                      "message": 'Back-off pulling image "%s"' % image}}}]
        elif outcome == "unschedulable":
            st["conditions"] = [{"type": "PodScheduled", "status": "False",
                                 "lastProbeTime": None, "lastTransitionTime": now_iso(now),
                                 "reason": "Unschedulable",
                                 "message": "0/1 nodes are available: 1 Insufficient cpu. "
                                            "preemption: 0/1 nodes are available: 1 No "
                                            "preemption victims found for incoming pod."}]
        elif outcome == "failed":
            spec["nodeName"] = self.node_name
            st.update(phase="Failed", reason="Error", message="the container exited")
        # "pending": stays Pending, nothing scheduled

    def _fill_token(self, obj):
        ns = obj["metadata"]["namespace"]
        sa = obj["metadata"].get("annotations", {}).get("kubernetes.io/service-account.name")
        tok = "kubesim-sa-" + pysecrets.token_hex(16)
        self.tokens[tok] = {"user": "system:serviceaccount:%s:%s" % (ns, sa), "namespace": ns,
                            "sa": sa}
        b64 = lambda s: base64.b64encode(s.encode()).decode()
        obj["data"] = {"token": b64(tok), "ca.crt": b64(self.ca_pem), "namespace": b64(ns)}
        if self.openshift:
            # OpenShift's token secrets also carry the service CA bundle
            obj["data"]["service-ca.crt"] = b64(self.ca_pem)
        obj["metadata"]["resourceVersion"] = self.next_rv()
        annotations = obj["metadata"].setdefault("annotations", {})
        saobj = self.objs.get(("serviceaccounts", ns, sa))
        if saobj is not None:
            annotations["kubernetes.io/service-account.uid"] = saobj["metadata"]["uid"]

    # ---- authorization

    def authorize(self, who, verb, plural, ns):
        """Admin may do anything; a service account token may act in its own
        namespace when a role binding names it and its role allows it."""
        if who.get("user") == ADMIN_USER or "system:masters" in who.get("groups", []):
            return
        sa_ns = who.get("namespace")
        if sa_ns is not None and ns == sa_ns:
            for (p, n, _), rb in self.objs.items():
                if p != "rolebindings" or n != ns:
                    continue
                if not any(s.get("kind") == "ServiceAccount" and s.get("name") == who["sa"]
                           for s in rb.get("subjects") or []):
                    continue
                ref = rb.get("roleRef", {})
                if ref.get("kind") == "ClusterRole" and ref.get("name") in ("admin", "edit"):
                    return  # the default cluster roles cover the namespace's resources
                role = (self.objs.get(("clusterroles", None, ref.get("name")))
                        if ref.get("kind") == "ClusterRole"
                        else self.objs.get(("roles", ns, ref.get("name"))))
                for rule in (role or {}).get("rules") or []:
                    if plural in rule.get("resources", []) and (
                            verb in rule.get("verbs", []) or "*" in rule.get("verbs", [])):
                        return
        group = RESOURCES.get(plural, ("",))[0]
        what = "%s.%s" % (plural, group) if group else plural
        msg = '%s is forbidden: User "%s" cannot %s resource "%s" in API group "%s"' % (
            what, who.get("user"), verb, plural, group)
        msg += ' in the namespace "%s"' % ns if ns else " at the cluster scope"
        raise status_error(403, msg, "Forbidden", None, plural, group)

    # ---- the API

    def list(self, plural, ns, query):
        self.advance()
        sel = parse_selector(query.get("labelSelector"))
        fsel = query.get("fieldSelector")
        if plural == "namespaces":
            items = list(self.namespaces.values())
        elif plural == "projects":
            items = [self.project_view(o) for o in self.namespaces.values()]
        elif plural in ALWAYS_EMPTY:
            items = []
        else:
            items = [o for (p, n, _), o in self.objs.items()
                     if p == plural and (ns is None or n == ns)]
        items = [o for o in items
                 if selector_match(sel, o["metadata"].get("labels")) and field_match(fsel, o)]
        items.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
        if plural == "resourcequotas":
            items = [self.quota_view(o) for o in items]
        g, v, kind = RESOURCES[plural][:3]
        return {"kind": kind + "List", "apiVersion": ("%s/%s" % (g, v)) if g else v,
                "metadata": {"resourceVersion": str(self.rv)},
                "items": [clean(o) for o in items]}

    def project_view(self, nsobj):
        p = json.loads(json.dumps(nsobj))
        p["kind"] = "Project"
        p["apiVersion"] = "project.openshift.io/v1"
        return p

    def get(self, plural, ns, name):
        self.advance()
        if plural == "namespaces":
            o = self.namespaces.get(name)
        elif plural == "projects":
            o = self.namespaces.get(name)
            o = self.project_view(o) if o is not None else None
        else:
            o = self.objs.get((plural, ns, name))
        if o is None:
            raise not_found(plural, name, RESOURCES[plural][0])
        return clean(self.quota_view(o) if plural == "resourcequotas" else o)

    def pods_counted(self, ns):
        """The namespace's pods a pods quota counts (not Succeeded or Failed)."""
        return sum(1 for (p, n, _), o in self.objs.items()
                   if p == "pods" and n == ns and
                   (o.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))

    def quota_view(self, o):
        """A ResourceQuota as read: status.hard (spec.hard) and status.used,
        which the quota controller keeps (v1 ResourceQuotaStatus); pods is
        the one resource counted here, others show 0."""
        o = json.loads(json.dumps(o))
        hard = dict((o.get("spec") or {}).get("hard") or {})
        ns = o["metadata"].get("namespace")
        o["status"] = {"hard": hard,
                       "used": {k: str(self.pods_counted(ns)) if k in ("pods", "count/pods")
                                else "0" for k in hard}}
        return o

    def create(self, plural, ns, body, who):
        self.advance()
        group, version, kind = RESOURCES[plural][:3]
        if not isinstance(body, dict):
            raise status_error(400, "the body of the request was in an unknown format",
                               "BadRequest")
        meta = body.get("metadata") or {}
        name = meta.get("name")
        if not name and meta.get("generateName"):
            name = meta["generateName"] + pysecrets.token_hex(3)[:5]
        if plural == "projectrequests":
            name = meta.get("name")
        if not name or not re.match(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", name) or len(name) > 253:
            raise status_error(422, '%s "%s" is invalid: metadata.name: Invalid value: "%s": a '
                               "lowercase RFC 1123 subdomain must consist of lower case "
                               "alphanumeric characters, '-' or '.'" % (kind, name, name),
                               "Invalid", name, plural, group)
        if plural in ("namespaces", "projectrequests"):
            if len(name) > 63:
                raise status_error(422, 'Namespace "%s" is invalid: metadata.name: must be no '
                                   "more than 63 characters" % name, "Invalid", name, plural)
            if name in self.namespaces:
                raise already_exists("projects" if plural == "projectrequests" else plural,
                                     name, "project.openshift.io" if plural == "projectrequests"
                                     else "")
            ann = dict(meta.get("annotations") or {})
            if plural == "projectrequests":
                ann["openshift.io/requester"] = who.get("user", "")
                if body.get("displayName"):
                    ann["openshift.io/display-name"] = body["displayName"]
                if body.get("description"):
                    ann["openshift.io/description"] = body["description"]
            # OpenShift makes the project from the request's name,
            # displayName and description; labels on a request are dropped.
            obj = self._create_namespace(
                name, None if plural == "projectrequests" else meta.get("labels"), ann)
            self.cond.notify_all()
            if plural == "projectrequests":
                return 201, clean(self.project_view(obj))
            return 201, clean(obj)
        if RESOURCES[plural][3] and ns not in self.namespaces:
            raise not_found("namespaces", ns)
        if RESOURCES[plural][3] and self.namespaces[ns]["status"]["phase"] == "Terminating":
            raise status_error(403, '%s "%s" is forbidden: unable to create new content in '
                               'namespace %s because it is being terminated' % (plural, name, ns),
                               "Forbidden", name, plural, group)
        if (plural, ns, name) in self.objs:
            raise already_exists(plural, name, group)
        if plural == OS_RB:
            body = os_rb_to_rbac(body, ns)
            plural, group, kind = "rolebindings", "rbac.authorization.k8s.io", "RoleBinding"
            if ("rolebindings", ns, name) in self.objs:
                raise already_exists("rolebindings", name, "authorization.openshift.io")
        if plural == "serviceaccounts":
            sa = self._service_account(ns, name, body)
            return 201, clean(sa)
        obj = json.loads(json.dumps(body))
        obj["kind"] = kind
        obj["apiVersion"] = ("%s/%s" % (group, version)) if group else version
        obj["metadata"] = self.new_meta(dict(meta, name=name), ns)
        obj["metadata"].pop("generateName", None) if meta.get("name") else None
        if plural == "pods":
            spec = obj.setdefault("spec", {})
            if not spec.get("containers"):
                raise status_error(422, 'Pod "%s" is invalid: spec.containers: Required value'
                                   % name, "Invalid", name, plural)
            for c in spec["containers"]:
                if not c.get("image"):
                    raise status_error(422, 'Pod "%s" is invalid: spec.containers[0].image: '
                                       "Required value" % name, "Invalid", name, plural)
            sa = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
            if ("serviceaccounts", ns, sa) not in self.objs:
                # the ServiceAccount admission plugin
                raise status_error(403, 'pods "%s" is forbidden: error looking up service '
                                   'account %s/%s: serviceaccount "%s" not found'
                                   % (name, ns, sa, sa), "Forbidden", name, "pods")
            self._pod_quota(ns, name)
            pod_defaults(obj)
            outcome = self.pick_outcome(spec)
            self.pod_state[(ns, name)] = {"outcome": outcome["outcome"],
                                          "ready_at": time.time() + outcome["delay"]}
        elif plural == "secrets":
            obj.setdefault("type", "Opaque")
            if obj["type"] == "kubernetes.io/service-account-token":
                sa = (meta.get("annotations") or {}).get("kubernetes.io/service-account.name")
                if not sa:
                    raise status_error(422, 'Secret "%s" is invalid: metadata.annotations['
                                       'kubernetes.io/service-account.name]: Required value'
                                       % name, "Invalid", name, plural)
                obj["_token_at"] = time.time() + self.token_delay
                obj.pop("data", None)
        elif plural == "rolebindings":
            if not obj.get("roleRef"):
                raise status_error(422, 'RoleBinding "%s" is invalid: roleRef.name: Required '
                                   "value" % name, "Invalid", name, plural, group)
        self.objs[(plural, ns, name)] = obj
        self.emit("ADDED", plural, obj)
        self.advance()
        if kind == "RoleBinding" and group == "rbac.authorization.k8s.io" and \
                RESOURCES[OS_RB][0] in (body.get("apiVersion") or ""):
            return 201, rbac_to_os_rb(clean(obj))
        return 201, clean(obj)

    def _pod_quota(self, ns, name):
        """The ResourceQuota admission plugin for a new pod (policy/
        resource-quota-v1, "Resource Quotas"): a quota of the namespace
        whose spec.hard.pods the namespace's pods not Succeeded or Failed
        already reach refuses it, 403 "exceeded quota"."""
        used = self.pods_counted(ns)
        for (p, n, qname), q in sorted(self.objs.items(), key=lambda kv: kv[0][2]):
            if p != "resourcequotas" or n != ns:
                continue
            hard = ((q.get("spec") or {}).get("hard") or {}).get("pods")
            if hard is not None and used + 1 > int(hard):
                raise status_error(403, 'pods "%s" is forbidden: exceeded quota: %s, requested: '
                                   "pods=1, used: pods=%d, limited: pods=%s"
                                   % (name, qname, used, hard), "Forbidden", name, "pods")

    def create_token(self, ns, name, body):
        """POST serviceaccounts/<name>/token (authentication-resources/
        token-request-v1): a token for the account, valid for
        spec.expirationSeconds (default 3600, at least 600; cut to
        max_token_expiration when set), answered as the TokenRequest with
        status.token and status.expirationTimestamp. The token stops
        authenticating when it expires or its account (or namespace) goes."""
        self.advance()
        if not isinstance(body, dict):
            raise status_error(400, "the body of the request was in an unknown format",
                               "BadRequest")
        if ns not in self.namespaces:
            raise not_found("namespaces", ns)
        if ("serviceaccounts", ns, name) not in self.objs:
            raise not_found("serviceaccounts", name)
        spec = body.get("spec") or {}
        secs = spec.get("expirationSeconds")
        secs = 3600 if secs is None else secs
        if not isinstance(secs, int) or isinstance(secs, bool):
            raise status_error(400, "TokenRequest in version \"v1\" cannot be handled as a "
                               "TokenRequest: spec.expirationSeconds: an integer", "BadRequest")
        if secs < 600:
            raise status_error(422, 'TokenRequest.authentication.k8s.io "%s" is invalid: '
                               "spec.expirationSeconds: Invalid value: %d: may not specify a "
                               "duration less than 10 minutes" % (name, secs), "Invalid", name,
                               "serviceaccounts", "authentication.k8s.io")
        if secs > 2 ** 32:
            raise status_error(422, 'TokenRequest.authentication.k8s.io "%s" is invalid: '
                               "spec.expirationSeconds: Invalid value: %d: may not specify a "
                               "duration larger than 2^32 seconds" % (name, secs), "Invalid",
                               name, "serviceaccounts", "authentication.k8s.io")
        if self.max_token_expiration and secs > self.max_token_expiration:
            secs = self.max_token_expiration
        bound = self._bound_object(ns, name, spec.get("boundObjectRef"))
        now = time.time()
        tok = "kubesim-tr-" + pysecrets.token_hex(16)
        self.tokens[tok] = {"user": "system:serviceaccount:%s:%s" % (ns, name),
                            "namespace": ns, "sa": name, "exp": now + secs}
        if bound is not None:
            self.tokens[tok]["bound"] = bound
        return 201, {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
                     "metadata": {"name": name, "namespace": ns,
                                  "creationTimestamp": None},
                     "spec": {"audiences": spec.get("audiences") or ["https://kubernetes.default.svc"],
                              "expirationSeconds": secs,
                              "boundObjectRef": spec.get("boundObjectRef")},
                     "status": {"token": tok, "expirationTimestamp": now_iso(now + secs)}}

    def _bound_object(self, ns, sa, ref):
        """spec.boundObjectRef of a TokenRequest (token-request-v1
        BoundObjectReference: kind Pod or Secret, apiVersion v1, name, uid),
        checked as the API server does: the object must exist in the
        account's namespace (else 404), a pod must run as the account (else
        400), and a uid given must be the object's (else 409 Conflict: the
        object was deleted and made again). The key the token's validity
        then follows: (plural, ns, name, uid); None when unbound."""
        if ref is None:
            return None
        if not isinstance(ref, dict):
            raise status_error(400, "TokenRequest in version \"v1\" cannot be handled as a "
                               "TokenRequest: spec.boundObjectRef: an object", "BadRequest")
        kind, api = ref.get("kind"), ref.get("apiVersion") or "v1"
        plural = {"Pod": "pods", "Secret": "secrets"}.get(kind)
        if plural is None or api != "v1":
            raise status_error(400, 'cannot bind token to object of type %s' % (
                "%s, Kind=%s" % (api, kind)), "BadRequest")
        oname = ref.get("name") or ""
        obj = self.objs.get((plural, ns, oname))
        if obj is None:
            raise not_found(plural, oname)
        if plural == "pods" and obj["spec"].get("serviceAccountName") != sa:
            raise status_error(400, 'cannot bind token for serviceaccount "%s" to pod running '
                               'with different serviceaccount name.' % sa, "BadRequest")
        uid = obj["metadata"]["uid"]
        if ref.get("uid") and ref["uid"] != uid:
            raise status_error(409, 'Operation cannot be fulfilled on %s "%s": the UID in the '
                               "bound object reference (%s) does not match the UID in record. "
                               "The object might have been deleted and then recreated" % (
                                   kind, oname, ref["uid"]), "Conflict", oname, kind)
        return (plural, ns, oname, uid)

    def token_valid(self, who):
        """Whether an authenticating token still holds: not expired and, if
        bound (boundObjectRef), its object still there with the same uid
        ("only valid for as long as that object exists")."""
        if who.get("exp", float("inf")) <= time.time():
            return False
        b = who.get("bound")
        if b is None:
            return True
        obj = self.objs.get(b[:3])
        return obj is not None and obj["metadata"]["uid"] == b[3]

    def pick_outcome(self, spec):
        delay = self.pod_delay
        if self.outcomes:
            o = self.outcomes.popleft()
            return {"outcome": o.get("outcome", "running"), "delay": o.get("delay", delay)}
        image = spec["containers"][0].get("image", "")
        for rx, outcome in self.image_outcomes.items():
            if re.search(rx, image):
                return {"outcome": outcome, "delay": delay}
        return {"outcome": self.pod_outcome, "delay": delay}

    def delete(self, plural, ns, name):
        self.advance()
        if plural in ("namespaces", "projects"):
            o = self.namespaces.get(name)
            if o is None:
                raise not_found(plural, name, RESOURCES[plural][0])
            if o["status"]["phase"] != "Terminating":
                o["status"]["phase"] = "Terminating"
                o["metadata"]["deletionTimestamp"] = now_iso()
                o["metadata"]["resourceVersion"] = self.next_rv()
                o["_gone_at"] = time.time() + self.ns_delete_delay
                self.emit("MODIFIED", "namespaces", o)
            self.cond.notify_all()
            if plural == "projects":
                return {"kind": "Status", "apiVersion": "v1", "metadata": {},
                        "status": "Success", "details": {"name": name, "group":
                                                         "project.openshift.io",
                                                         "kind": "projects"}}
            return clean(o)
        o = self.objs.pop((plural, ns, name), None)
        if o is None:
            raise not_found(plural, name, RESOURCES[plural][0])
        self.pod_state.pop((ns, name), None) if plural == "pods" else None
        if plural == "serviceaccounts":
            # tokens of a deleted account no longer authenticate
            for t in [t for t, v in self.tokens.items()
                      if v.get("namespace") == ns and v.get("sa") == name]:
                del self.tokens[t]
        if plural == "secrets":
            for t in [t for t, v in self.tokens.items()
                      if v.get("namespace") == ns and o.get("data", {}).get("token") ==
                      base64.b64encode(t.encode()).decode()]:
                del self.tokens[t]
        o["metadata"]["deletionTimestamp"] = now_iso()
        o["metadata"]["resourceVersion"] = self.next_rv()
        self.emit("DELETED", plural, o)
        return clean(o)

    def state(self):
        self.advance()
        return {"namespaces": [clean(o) for o in self.namespaces.values()],
                "objects": {"%s/%s/%s" % k: clean(o) for k, o in self.objs.items()}}


def image_id(image):
    """The imageID a container runtime reports: the normalized repository
    and a digest (stable per image name)."""
    import hashlib
    repo = image.split("@")[0]
    last = repo.rsplit("/", 1)[-1]
    if ":" in last:
        repo = repo[:len(repo) - len(last)] + last.split(":")[0]
    parts = repo.split("/")
    if len(parts) == 1 or not ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = ["docker.io"] + parts
    if parts[0] == "docker.io" and len(parts) == 2:
        parts.insert(1, "library")
    return "%s@sha256:%s" % ("/".join(parts), hashlib.sha256(image.encode()).hexdigest())


def pod_defaults(pod):
    """What the API server's defaulting and admission (ServiceAccount,
    DefaultTolerationSeconds) fill in a new pod, as the Pod reference
    documents the defaults; status starts Pending with its QoS class."""
    spec = pod["spec"]
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("serviceAccountName", "default")
    spec["serviceAccount"] = spec["serviceAccountName"]
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault("priority", 0)
    spec.setdefault("securityContext", {})
    spec.setdefault("terminationGracePeriodSeconds", 30)
    tol = spec.setdefault("tolerations", [])
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if not any(t.get("key") == key for t in tol):
            tol.append({"key": key, "operator": "Exists", "effect": "NoExecute",
                        "tolerationSeconds": 300})
    vol = "kube-api-access-" + rand5()
    if spec.get("automountServiceAccountToken", True):
        spec.setdefault("volumes", []).append({"name": vol, "projected": {
            "defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt",
                               "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
                    "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}})
    qos = "BestEffort"
    guaranteed = True
    for c in spec["containers"]:
        image = c.get("image", "")
        tag = image.rsplit("/", 1)[-1]
        latest = "@" not in tag and (":" not in tag or tag.endswith(":latest"))
        c.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
        c.setdefault("terminationMessagePath", "/dev/termination-log")
        c.setdefault("terminationMessagePolicy", "File")
        res = c.setdefault("resources", {})
        lim, req = res.get("limits") or {}, res.get("requests")
        if lim and req is None:
            res["requests"] = req = dict(lim)  # requests default to limits
        req = req or {}
        if lim or req:
            qos = "Burstable"
        if not all(str(lim.get(r, "")) == str(req.get(r, "-")) and lim.get(r) is not None
                   for r in ("cpu", "memory")):
            guaranteed = False
        if spec.get("automountServiceAccountToken", True):
            c.setdefault("volumeMounts", []).append({
                "name": vol, "readOnly": True,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"})
    if guaranteed and qos == "Burstable":
        qos = "Guaranteed"
    pod["status"] = {"phase": "Pending", "qosClass": qos}


def os_rb_to_rbac(body, ns):
    """An authorization.openshift.io/v1 RoleBinding as the rbac one
    OpenShift stores: roleRef {name, namespace?} is a ClusterRole unless it
    names a namespace; userNames/groupNames become User/Group subjects."""
    body = json.loads(json.dumps(body or {}))
    ref = body.get("roleRef") or {}
    if not ref.get("name"):
        raise status_error(422, 'RoleBinding "%s" is invalid: roleRef.name: Required value'
                           % (body.get("metadata") or {}).get("name"), "Invalid",
                           (body.get("metadata") or {}).get("name"), "rolebindings",
                           "authorization.openshift.io")
    subjects = []
    for sj in body.get("subjects") or []:
        d = {"kind": sj.get("kind", "User"), "name": sj.get("name")}
        if d["kind"] == "ServiceAccount":
            d["namespace"] = sj.get("namespace") or ns
        else:
            d["apiGroup"] = "rbac.authorization.k8s.io"
        subjects.append(d)
    for u in body.get("userNames") or []:
        m = re.match(r"^system:serviceaccount:([^:]+):([^:]+)$", u)
        d = ({"kind": "ServiceAccount", "namespace": m.group(1), "name": m.group(2)} if m else
             {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": u})
        if d not in subjects:
            subjects.append(d)
    for g in body.get("groupNames") or []:
        subjects.append({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": g})
    return {"apiVersion": "authorization.openshift.io/v1", "kind": "RoleBinding",
            "metadata": body.get("metadata") or {},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                        "kind": "Role" if ref.get("namespace") else "ClusterRole",
                        "name": ref["name"]},
            "subjects": subjects}


def rbac_to_os_rb(o):
    """The authorization.openshift.io/v1 view of a stored rbac RoleBinding:
    roleRef {name, namespace for a Role}, subjects, userNames, groupNames
    (null when empty, as OpenShift answers)."""
    ref = o.get("roleRef") or {}
    users, groups, subjects = [], [], []
    for sj in o.get("subjects") or []:
        if sj.get("kind") == "ServiceAccount":
            users.append("system:serviceaccount:%s:%s" % (sj.get("namespace"), sj.get("name")))
            subjects.append({"kind": "ServiceAccount", "name": sj.get("name"),
                             "namespace": sj.get("namespace")})
        elif sj.get("kind") == "Group":
            groups.append(sj.get("name"))
            subjects.append({"kind": "Group", "name": sj.get("name")})
        else:
            users.append(sj.get("name"))
            subjects.append({"kind": "User", "name": sj.get("name")})
    rr = {"name": ref.get("name")}
    if ref.get("kind") == "Role":
        rr["namespace"] = o["metadata"].get("namespace")
    return {"kind": "RoleBinding", "apiVersion": "authorization.openshift.io/v1",
            "metadata": o["metadata"], "roleRef": rr, "subjects": subjects,
            "userNames": users or None, "groupNames": groups or None}


def clean(o):
    """A copy without the simulator's private (_-prefixed) keys."""
    o = json.loads(json.dumps(o))
    for k in [k for k in o if k.startswith("_")]:
        del o[k]
    return o


# ---------------------------------------------------------------- discovery


def api_resource_list(gv, openshift, token_request=False):
    res = []
    for key, (g, v, kind, namespaced, short) in sorted(RESOURCES.items()):
        if ("%s/%s" % (g, v) if g else v) != gv:
            continue
        if key in OPENSHIFT_ONLY and not openshift:
            continue
        plural = key.split(".")[0]
        verbs = ["create"] if plural == "projectrequests" else list(ALL_VERBS)
        if plural == "projects":
            verbs = ["create", "delete", "get", "list", "patch", "update", "watch"]
        d = {"name": plural, "singularName": kind.lower(), "namespaced": namespaced,
             "kind": kind, "verbs": verbs}
        if short:
            d["shortNames"] = short
        if plural == "pods":
            d["categories"] = ["all"]
        res.append(d)
        if plural == "serviceaccounts" and token_request:
            res.append({"name": "serviceaccounts/token", "singularName": "", "namespaced": True,
                        "group": "authentication.k8s.io", "version": "v1",
                        "kind": "TokenRequest", "verbs": ["create"]})
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
            "resources": res}


def api_groups(openshift):
    groups = [("rbac.authorization.k8s.io", "v1")]
    if openshift:
        groups.append(("authorization.openshift.io", "v1"))
        groups.append(("project.openshift.io", "v1"))
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
        {"name": g, "versions": [{"groupVersion": "%s/%s" % (g, v), "version": v}],
         "preferredVersion": {"groupVersion": "%s/%s" % (g, v), "version": v}}
        for g, v in groups]}


def age(ts):
    try:
        t = datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=datetime.timezone.utc).timestamp()
    except (TypeError, ValueError):
        return "<unknown>"
    s = int(max(0, time.time() - t))
    if s < 120:
        return "%ds" % s
    if s < 7200:
        return "%dm" % (s // 60)
    return "%dh" % (s // 3600)


def as_table(plural, obj, include):
    """The server-side printing kubectl get asks for (Accept: as=Table)."""
    items = obj["items"] if "items" in obj else [obj]
    cols = [("Name", "string", "name")]
    if plural == "pods":
        cols += [("Ready", "string", ""), ("Status", "string", ""),
                 ("Restarts", "string", ""), ("Age", "string", "")]
    elif plural in ("namespaces", "projects"):
        cols += [("Status", "string", ""), ("Age", "string", "")]
    else:
        cols += [("Age", "string", "")]
    rows = []
    for it in items:
        m = it["metadata"]
        if plural == "pods":
            cs = it.get("status", {}).get("containerStatuses") or []
            n = len(it.get("spec", {}).get("containers") or [])
            ready = sum(1 for c in cs if c.get("ready"))
            phase = it.get("status", {}).get("phase", "")
            for c in cs:
                w = c.get("state", {}).get("waiting")
                if w:
                    phase = w.get("reason", phase)
            if m.get("deletionTimestamp"):
                phase = "Terminating"
            cells = [m["name"], "%d/%d" % (ready, n), phase, "0", age(m.get("creationTimestamp"))]
        elif plural in ("namespaces", "projects"):
            cells = [m["name"], it.get("status", {}).get("phase", ""),
                     age(m.get("creationTimestamp"))]
        else:
            cells = [m["name"], age(m.get("creationTimestamp"))]
        row = {"cells": cells}
        if include == "Object":
            row["object"] = it
        elif include != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": m}
        rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": obj.get("metadata", {}).get("resourceVersion", "")},
            "columnDefinitions": [{"name": n, "type": t, "format": f, "description": n,
                                   "priority": 0} for n, t, f in cols],
            "rows": rows}


# ---------------------------------------------------------------- HTTP

ROUTE = re.compile(r"^/(?:api/v1|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
                   r"(?:/namespaces/(?P<ns>[^/]+)(?=/))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?"
                   r"(?:/(?P<sub>[^/]+))?$")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    sim = None
    control_only = False

    def log_message(self, fmt, *args):
        if os.environ.get("KUBESIM_DEBUG"):
            sys.stderr.write("kubesim: " + (fmt % args) + "\n")

    def do_GET(self):
        self.dispatch("GET")

    def do_POST(self):
        self.dispatch("POST")

    def do_PUT(self):
        self.dispatch("PUT")

    def do_PATCH(self):
        self.dispatch("PATCH")

    def do_DELETE(self):
        self.dispatch("DELETE")

    def send(self, status, body, headers=None):
        if isinstance(body, (dict, list)):
            data = json.dumps(body).encode()
            ctype = "application/json"
        else:
            data = body if isinstance(body, bytes) else str(body).encode()
            ctype = "text/plain; charset=utf-8"
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Audit-Id", str(uuid.uuid4()))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise status_error(400, "the body of the request was in an unknown format - "
                               "accepted media types include: application/json", "BadRequest")

    def dispatch(self, method):
        u = urllib.parse.urlsplit(self.path)
        path = u.path.rstrip("/") or "/"
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(u.query).items()}
        try:
            if path.startswith("/_sim"):
                code, body = control(self.sim, method, path[len("/_sim"):] or "/", query,
                                     self.read_body())
                return self.send(code, body)
            if self.control_only:
                raise status_error(404, "the server could not find the requested resource",
                                   "NotFound")
            body = self.read_body()
            entry = {"t": time.time(), "method": method, "path": path, "user": None}
            with self.sim.lock:  # every call that reached the server, faulted or not
                self.sim.calls[(("WATCH" if method == "GET" and query.get("watch") in
                                 QTRUE else method), route_of(path))] += 1
                self.sim.call_log.append(entry)
            is_watch = method == "GET" and query.get("watch") in QTRUE
            self.apply_faults(method, path, is_watch)
            who = self.authenticate()
            entry["user"] = who.get("user")
            if is_watch:
                return self.watch(path, query, who)
            code, out = self.api(method, path, query, body, who)
            accept = self.headers.get("Accept") or ""
            if code == 200 and method == "GET" and "as=Table" in accept:
                m = ROUTE.match(path)
                if m:
                    out = as_table(m.group("plural"), out, query.get("includeObject"))
            self.send(code, out)
        except HTTPError as e:
            if e.status == 0:
                self.close_connection = True
                return
            self.send(e.status, e.body, e.headers)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def apply_faults(self, method, path, watch=False):
        sim = self.sim
        hit = None
        with sim.lock:
            for f in list(sim.faults.values()):
                if not f.matches(method, path, watch):
                    continue
                f.seen += 1
                if f.after and f.seen <= f.after:
                    continue
                if f.count is not None and f.hits >= f.count:
                    continue
                f.hits += 1
                hit = f
                break
        if hit is None:
            return
        if hit.delay:
            time.sleep(float(hit.delay))
        if hit.hang:
            hit.released.wait()
            if hit.then == "proceed":
                return
            raise HTTPError(0, None)
        if hit.drop:
            raise HTTPError(0, None)
        if hit.status:
            st = int(hit.status)
            if hit.body is not None:
                raise HTTPError(st, hit.body)
            msg = hit.message or {429: "Too many requests, please try again later.",
                                  500: "Internal error occurred: injected fault",
                                  503: "the server is currently unable to handle the request",
                                  }.get(st, "injected fault")
            raise status_error(st, msg, retry_after=hit.retry_after)

    def authenticate(self):
        auth = self.headers.get("Authorization") or ""
        if auth.startswith("Bearer "):
            with self.sim.lock:
                who = self.sim.tokens.get(auth[7:].strip())
                ok = who is not None and self.sim.token_valid(who)
            if ok:
                return who
            raise status_error(401, "Unauthorized", "Unauthorized")
        try:
            cert = self.connection.getpeercert()
        except (AttributeError, ValueError):
            cert = None
        if cert:
            cn = None
            for rdn in cert.get("subject", ()):
                for k, v in rdn:
                    if k == "commonName":
                        cn = v
            groups = [v for rdn in cert.get("subject", ()) for k, v in rdn
                      if k == "organizationName"]
            return {"user": cn, "groups": groups}
        raise status_error(401, "Unauthorized", "Unauthorized")

    def api(self, method, path, query, body, who):
        sim = self.sim
        if path == "/version" and method == "GET":
            return 200, {"major": str(sim.major), "minor": str(sim.minor),
                         "gitVersion": "v%d.%d.0" % (sim.major, sim.minor),
                         "gitCommit": "0" * 40, "gitTreeState": "clean",
                         "buildDate": "2024-01-01T00:00:00Z", "goVersion": "go1.20",
                         "compiler": "gc", "platform": "linux/amd64"}
        if path == "/api" and method == "GET":
            return 200, {"kind": "APIVersions", "versions": ["v1"],
                         "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                                         "serverAddress": "127.0.0.1"}]}
        if path == "/api/v1" and method == "GET":
            return 200, api_resource_list("v1", sim.openshift, sim.token_request)
        if path == "/apis" and method == "GET":
            return 200, api_groups(sim.openshift)
        m = re.match(r"^/apis/([^/]+)/([^/]+)$", path)
        if m and method == "GET":
            gv = "%s/%s" % m.groups()
            r = api_resource_list(gv, sim.openshift)
            if not r["resources"]:
                raise status_error(404, "the server could not find the requested resource",
                                   "NotFound")
            return 200, r
        m = ROUTE.match(path)
        if not m:
            raise status_error(404, "the server could not find the requested resource",
                               "NotFound")
        plural, name, ns, sub = m.group("plural"), m.group("name"), m.group("ns"), m.group("sub")
        group = m.group("group") or ""
        plural = resource_key(plural, group)
        spec = RESOURCES.get(plural)
        if (plural == "serviceaccounts" and group == "" and sub == "token" and ns is not None
                and name is not None and sim.token_request):
            if method != "POST":
                raise status_error(405, "the server does not allow this method on the "
                                   "requested resource", "MethodNotAllowed")
            with sim.lock:
                sim.authorize(who, "create", "serviceaccounts/token", ns)
                return sim.create_token(ns, name, body)
        if (spec is None or spec[0] != group or (plural in OPENSHIFT_ONLY and not sim.openshift)
                or sub is not None or (spec[3] and ns is None and name is not None)
                or (not spec[3] and ns is not None)):
            raise status_error(404, "the server could not find the requested resource",
                               "NotFound")
        verb = {"GET": "get" if name else "list", "POST": "create", "DELETE": "delete",
                "PUT": "update", "PATCH": "patch"}[method]
        with sim.lock:
            if plural == OS_RB:
                sim.authorize(who, verb, "rolebindings", ns)
                if method == "GET" and name:
                    return 200, rbac_to_os_rb(sim.get("rolebindings", ns, name))
                if method == "GET":
                    out = sim.list("rolebindings", ns, query)
                    out.update(kind="RoleBindingList", apiVersion="authorization.openshift.io/v1",
                               items=[rbac_to_os_rb(o) for o in out["items"]])
                    return 200, out
                if method == "DELETE" and name:
                    sim.delete("rolebindings", ns, name)
                    return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                 "status": "Success", "details": {
                                     "name": name, "group": "authorization.openshift.io",
                                     "kind": "rolebindings"}}
            sim.authorize(who, verb, plural, ns)
            if method == "GET":
                if name:
                    return 200, sim.get(plural, ns, name)
                return 200, sim.list(plural, ns, query)
            if method == "POST" and not name:
                if ns is not None and body and (body.get("metadata") or {}).get(
                        "namespace") not in (None, ns):
                    raise status_error(400, "the namespace of the provided object does not "
                                       "match the namespace sent on the request", "BadRequest")
                return sim.create(plural, ns, body, who)
            if method == "DELETE" and name:
                return 200, sim.delete(plural, ns, name)
        raise status_error(405, "the server does not allow this method on the requested "
                           "resource", "MethodNotAllowed")

    def watch(self, path, query, who):
        """A watch as the API server serves one (API concepts, "Efficient
        detection of changes"): 200 and newline-delimited JSON events
        {type: ADDED|MODIFIED|DELETED|BOOKMARK|ERROR, object}, chunked, until
        timeoutSeconds (default 1800) pass. Without resourceVersion (or "0")
        it starts with an ADDED event per current object; with one, it
        replays every change after it; one older than the history kept
        is answered with an ERROR event carrying a 410 Expired Status. With
        allowWatchBookmarks, BOOKMARK events (the kind with only
        metadata.resourceVersion) come every bookmark_interval seconds and
        before the server closes the watch."""
        m = ROUTE.match(path)
        if not m or m.group("name"):
            raise status_error(404, "the server could not find the requested resource",
                               "NotFound")
        plural, ns = resource_key(m.group("plural"), m.group("group") or ""), m.group("ns")
        sim = self.sim
        if plural not in RESOURCES or plural == "projectrequests" or (
                plural in OPENSHIFT_ONLY and not sim.openshift):
            raise status_error(404, "the server could not find the requested resource",
                               "NotFound")
        src = {"projects": "namespaces", OS_RB: "rolebindings"}.get(plural, plural)
        view = {"projects": sim.project_view, OS_RB: rbac_to_os_rb}.get(plural, lambda o: o)
        sel = parse_selector(query.get("labelSelector"))
        fsel = query.get("fieldSelector")
        bookmarks = query.get("allowWatchBookmarks") in QTRUE
        table = "as=Table" in (self.headers.get("Accept") or "")
        g, v, kind = RESOURCES[plural][:3]
        api_version = ("%s/%s" % (g, v)) if g else v
        rv = query.get("resourceVersion") or "0"
        initial = []
        expired = None
        with sim.lock:
            sim.authorize(who, "watch", src, ns)
            sim.advance()
            if rv == "0":
                initial = [view(o) if plural == OS_RB else o for o in
                           sim.list(src if plural == OS_RB else plural, ns, query)["items"]]
                pos = sim.rv
            else:
                try:
                    pos = int(rv)
                except ValueError:
                    raise status_error(400, 'invalid resource version "%s"' % rv, "BadRequest")
                if pos < sim.compacted:
                    expired = ("too old resource version: %s (%d)" % (rv, sim.compacted))
            gen = sim.watch_gen
            sim.open_watches += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Audit-Id", str(uuid.uuid4()))
        self.end_headers()

        def chunk(ev):
            data = (json.dumps(ev) + "\n").encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        def bookmark(at):
            chunk({"type": "BOOKMARK", "object": {"kind": kind, "apiVersion": api_version,
                                                  "metadata": {"resourceVersion": str(at)}}})

        timeout = float(query.get("timeoutSeconds") or 1800)
        deadline = time.time() + timeout
        next_bm = time.time() + sim.bookmark_interval
        try:
            if expired is not None:
                chunk({"type": "ERROR", "object": {
                    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": expired, "reason": "Expired", "code": 410}})
                self.wfile.write(b"0\r\n\r\n")
                return
            for o in initial:
                if table:
                    o = as_table(m.group("plural"), o, query.get("includeObject"))
                chunk({"type": "ADDED", "object": o})
            while not sim.stopping:
                with sim.lock:
                    if sim.watch_gen != gen:
                        raise ConnectionResetError("dropped by the control API")
                    if pos < sim.compacted:
                        # fell out of the history window while connected
                        break
                    evs = sim.events_after(pos)
                    if not evs:
                        # time-driven changes are the main loop's
                        now = time.time()
                        if now >= deadline:
                            break
                        wait = min(deadline, next_bm if bookmarks else deadline) - now
                        sim.cond.wait(max(0.0, min(wait, 1.0)))
                        evs = sim.events_after(pos)
                for erv, etype, eplural, ens, obj in evs:
                    pos = erv
                    if eplural != src or (ns is not None and ens != ns):
                        continue
                    if not selector_match(sel, obj["metadata"].get("labels")):
                        continue
                    if fsel and not field_match(fsel, obj):
                        continue
                    out = view(obj)
                    if table:
                        out = as_table(m.group("plural"), out, query.get("includeObject"))
                    chunk({"type": etype, "object": out})
                if bookmarks and time.time() >= next_bm:
                    bookmark(pos)
                    next_bm = time.time() + sim.bookmark_interval
            if bookmarks:
                bookmark(pos)
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass
        finally:
            with sim.lock:
                sim.open_watches -= 1
            self.close_connection = True


def resource_key(plural, group):
    """RESOURCES' key for a URL's plural and group."""
    spec = RESOURCES.get(plural)
    if spec is not None and spec[0] == group:
        return plural
    return "%s.%s" % (plural, group)


def route_of(path):
    m = ROUTE.match(path)
    if not m:
        return path
    r = path[:m.start("plural")] if m.group("ns") is None else path[:m.start("ns")] + "{ns}/"
    r = r if r.endswith("/") else r + "/"
    r += m.group("plural")
    if m.group("name"):
        r += "/{name}"
    if m.group("sub"):
        r += "/" + m.group("sub")
    return r


def control(sim, method, path, query, body):
    body = body or {}
    with sim.lock:
        if path == "/ping":
            return 200, {"ok": True, "pid": os.getpid()}
        if path == "/faults" and method == "POST":
            sim.fault_seq += 1
            f = Fault(sim.fault_seq, body)
            sim.faults[f.id] = f
            return 200, f.view()
        if path == "/faults" and method == "GET":
            return 200, [f.view() for f in sim.faults.values()]
        if path == "/faults" and method == "DELETE":
            for f in sim.faults.values():
                f.released.set()
            sim.faults.clear()
            return 200, {"ok": True}
        m = re.match(r"^/faults/(\d+)$", path)
        if m:
            f = sim.faults.get(int(m.group(1)))
            if f is None:
                return 404, {"error": "no such fault"}
            if method == "DELETE":
                f.released.set()
                del sim.faults[f.id]
            return 200, f.view()
        if path == "/behavior" and method == "POST":
            for k, attr in (("pod_delay", "pod_delay"), ("token_delay", "token_delay"),
                            ("default_sa_delay", "default_sa_delay"),
                            ("namespace_delete_delay", "ns_delete_delay")):
                if k in body:
                    setattr(sim, attr, float(body[k]))
            if "pod_outcome" in body:
                sim.pod_outcome = body["pod_outcome"]
            if "image_outcomes" in body:
                sim.image_outcomes = dict(body["image_outcomes"])
            return 200, {"pod_delay": sim.pod_delay, "pod_outcome": sim.pod_outcome,
                         "token_delay": sim.token_delay,
                         "namespace_delete_delay": sim.ns_delete_delay,
                         "image_outcomes": sim.image_outcomes}
        if path == "/watches" and method == "GET":
            return 200, {"open": sim.open_watches, "compacted": str(sim.compacted),
                         "resourceVersion": str(sim.rv)}
        if path == "/watches/drop" and method == "POST":
            # every open watch connection is closed unanswered (no final
            # chunk), as a load balancer or a restarting API server does
            sim.watch_gen += 1
            sim.cond.notify_all()
            return 200, {"open": sim.open_watches}
        if path == "/watches/expire" and method == "POST":
            # the history is compacted: a watch from any resourceVersion
            # older than now gets 410 Expired (open ones are closed first)
            sim.next_rv()
            sim.compacted = sim.rv
            sim.events.clear()
            sim.watch_gen += 1
            sim.cond.notify_all()
            return 200, {"compacted": str(sim.compacted)}
        if path == "/outcomes" and method == "POST":
            sim.outcomes.extend(body.get("outcomes", []))
            return 200, {"queued": len(sim.outcomes)}
        if path == "/state":
            return 200, sim.state()
        if path == "/namespaces":
            sim.advance()
            return 200, [clean(o) for o in sim.namespaces.values()]
        if path == "/pods":
            sim.advance()
            return 200, [clean(o) for (p, _, _), o in sim.objs.items() if p == "pods"]
        if path == "/tokens":
            return 200, [dict(v, token=t) for t, v in sim.tokens.items()]
        if path == "/calls" and method == "GET":
            calls = [{"method": m_, "route": r, "count": c} for (m_, r), c in sim.calls.items()]
            return 200, {"total": sum(sim.calls.values()), "calls": calls}
        if path == "/calls/log":
            return 200, list(sim.call_log)
        if path == "/calls" and method == "DELETE":
            sim.calls.clear()
            sim.call_log.clear()
            return 200, {"ok": True}
    return 404, {"error": "no control endpoint %s %s" % (method, path)}


# ---------------------------------------------------------------- TLS


def make_tls(d, host):
    """A CA, a server certificate for host and an admin client certificate
    (CN kubernetes-admin, O system:masters), made with the openssl command
    in directory d; reused when present."""
    os.makedirs(d, exist_ok=True)
    p = lambda n: os.path.join(d, n)
    names = ("ca.pem", "ca.key", "server.pem", "server.key", "client.pem", "client.key")
    if all(os.path.exists(p(n)) for n in names):
        return {n.replace(".", "_"): p(n) for n in names}
    run = lambda *a: subprocess.run(a, check=True, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
        "ec_paramgen_curve:prime256v1", "-nodes", "-days", "30", "-subj", "/CN=kubesim-ca", "-keyout", p("ca.key"), "-out", p("ca.pem"))
    for name, subj, ext in (
            ("server", "/CN=kube-apiserver",
             "subjectAltName=IP:%s,DNS:localhost,IP:127.0.0.1,DNS:kubernetes\n"
             "extendedKeyUsage=serverAuth\n" % host if re.match(r"^[\d.]+$", host) else
             "subjectAltName=DNS:%s,DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
             % host),
            ("client", "/O=system:masters/CN=%s" % ADMIN_USER, "extendedKeyUsage=clientAuth\n")):
        run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-subj", subj,
            "-keyout", p(name + ".key"), "-out", p(name + ".csr"))
        with open(p(name + ".ext"), "w") as f:
            f.write("basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
                    + ext)
        run("openssl", "x509", "-req", "-in", p(name + ".csr"), "-CA", p("ca.pem"),
            "-CAkey", p("ca.key"), "-CAcreateserial", "-days", "30",
            "-extfile", p(name + ".ext"), "-out", p(name + ".pem"))
    return {n.replace(".", "_"): p(n) for n in names}


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, addr, handler, tls_ctx=None):
        self.tls_ctx = tls_ctx
        super().__init__(addr, handler)

    def get_request(self):
        sock, addr = self.socket.accept()
        if self.tls_ctx is not None:
            sock = self.tls_ctx.wrap_socket(sock, server_side=True,
                                            do_handshake_on_connect=False)
        return sock, addr

    def handle_error(self, request, client_address):
        if os.environ.get("KUBESIM_DEBUG"):
            super().handle_error(request, client_address)


def write_kubeconfig(path, info):
    """A kubeconfig (JSON is YAML) with contexts for both kinds of user:
    "kubesim" (bearer token, current) and "kubesim-cert" (client
    certificate), both trusting the simulator's CA by file."""
    cfg = {"apiVersion": "v1", "kind": "Config", "preferences": {},
           "clusters": [{"name": "kubesim", "cluster": {
               "server": info["server"], "certificate-authority": info["ca"]}}],
           "users": [{"name": "kubesim-token", "user": {"token": info["token"]}},
                     {"name": "kubesim-cert", "user": {
                         "client-certificate": info["client_cert"],
                         "client-key": info["client_key"]}}],
           "contexts": [{"name": "kubesim", "context": {"cluster": "kubesim",
                                                          "user": "kubesim-token",
                                                          "namespace": "default"}},
                        {"name": "kubesim-cert", "context": {"cluster": "kubesim",
                                                               "user": "kubesim-cert"}}],
           "current-context": "kubesim"}
    with open(path + ".tmp", "w") as f:
        json.dump(cfg, f, indent=1)
    os.rename(path + ".tmp", path)


def serve(cfg, host="127.0.0.1", port=0, tls_dir=None, control_port=0, ready_file=None):
    sim = Sim(cfg)
    sim.stopping = False
    tls = make_tls(tls_dir, host)
    with open(tls["ca_pem"]) as f:
        sim.ca_pem = f.read()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tls["server_pem"], tls["server_key"])
    ctx.load_verify_locations(tls["ca_pem"])
    ctx.verify_mode = ssl.CERT_OPTIONAL
    H = type("H", (Handler,), {"sim": sim})
    srv = Server((host, port), H, ctx)
    HC = type("HC", (Handler,), {"sim": sim, "control_only": True})
    csrv = Server((host, control_port or 0), HC)
    info = {"pid": os.getpid(), "port": srv.server_address[1],
            "server": "https://%s:%d" % (host, srv.server_address[1]),
            "ca": tls["ca_pem"], "token": sim.admin_token,
            "client_cert": tls["client_pem"], "client_key": tls["client_key"],
            "control_port": csrv.server_address[1],
            "control": "http://%s:%d/_sim" % (host, csrv.server_address[1]),
            "openshift": sim.openshift}
    if ready_file:
        info["kubeconfig"] = os.path.join(os.path.dirname(os.path.abspath(ready_file)),
                                          "kubeconfig")
        write_kubeconfig(info["kubeconfig"], info)
    for s in (srv, csrv):
        threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
    sim.info = info
    if ready_file:
        with open(ready_file + ".tmp", "w") as f:
            json.dump(info, f, indent=1)
        os.rename(ready_file + ".tmp", ready_file)
    return sim, [srv, csrv]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="kubesim", description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0: a free port (see --ready-file)")
    ap.add_argument("--control-port", type=int, default=0)
    ap.add_argument("--config", help="JSON simulator configuration file")
    ap.add_argument("--ready-file", help="written (atomically) once listening")
    ap.add_argument("--tls-dir", help="CA and certificates (made here, or reused); "
                    "default: next to the ready-file")
    ap.add_argument("--pod-delay", type=float, help="seconds a pod stays Pending")
    ap.add_argument("--no-openshift", action="store_true",
                    help="do not serve project.openshift.io")
    a = ap.parse_args(argv)
    cfg = {}
    if a.config:
        with open(a.config) as f:
            cfg = json.load(f)
    if a.pod_delay is not None:
        cfg["pod_delay"] = a.pod_delay
    if a.no_openshift:
        cfg["openshift"] = False
    tls_dir = a.tls_dir or os.path.join(
        os.path.dirname(os.path.abspath(a.ready_file)) if a.ready_file else ".", "tls")
    sim, servers = serve(cfg, a.host, a.port, tls_dir, a.control_port, a.ready_file)
    stop = threading.Event()
    import signal
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    while not stop.is_set():
        with sim.lock:
            sim.advance()
            due = sim.next_due()
            sim.cond.wait(0.2 if due is None else min(0.2, due + 0.001))
    sim.stopping = True
    with sim.lock:
        for f in sim.faults.values():
            f.released.set()
    for s in servers:
        s.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
