"""The web status API of a launcher (upstream's webapp.py), fetched over HTTP:
text and JSON by Accept, fields= and node_id=, caching headers, CORS, 404,
/ready, /metrics, and which worker serves it."""
import json
import re
import socket
import time
import urllib.error
import urllib.request

from conftest import free_port, wait_for
from operator_helpers import (AGE, build_record, host, parse_table, ready_nodes,
                              static_config, upload_record, webapp, write_build,
                              write_upload)


def get(port, path, accept=None, method="GET", headers=None):
    """(status, headers, body text); errors are answers too."""
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), method=method)
    if accept:
        req.add_header("Accept", accept)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def wait_ready(port):
    def ready():
        try:
            return get(port, "/ready")[0] == 200
        except OSError:
            return False
    wait_for(ready, what="/ready 200")


def start_web(deployment, zuul, **kw):
    w = webapp()
    cfg = static_config([host("host-a", ["small"], **{"max-parallel-jobs": 2}),
                         host("host-b", ["small", "large"], username="ci")], extra=w, **kw)
    path = deployment.write_config(cfg)
    deployment.start_launcher("static-a", path)
    port = w["webapp"]["port"]
    wait_ready(port)
    nodes = wait_for(lambda: len(ready_nodes(zuul)) == 3 and ready_nodes(zuul),
                     what="3 ready nodes")
    return port, nodes, path


def test_node_list_text_json_fields_node_id(deployment, zuul):
    port, nodes, _ = start_web(deployment, zuul)
    # the cache of the launcher may lag the registration by a moment
    wait_for(lambda: len(json.loads(get(port, "/node-list", "application/json")[2])) == 3,
             what="web sees 3 nodes")
    status, headers, body = get(port, "/node-list")
    assert status == 200
    assert headers["Content-Type"] == "text/plain; charset=UTF-8"
    assert headers["Access-Control-Allow-Origin"] == "*"
    assert headers["Cache-Control"] == "public, max-age=1"
    assert headers["Last-Modified"] and headers["Expires"]
    cols, rows = parse_table(body)
    assert cols[:9] == ["ID", "Provider", "Label", "Server ID", "Public IPv4", "IPv6",
                        "State", "Age", "Locked"] and len(cols) == 21
    assert sorted(r["ID"] for r in rows) == sorted(nodes)
    assert all(r["State"] == "ready" and AGE.match(r["Age"]) for r in rows)

    status, headers, body = get(port, "/node-list", "application/json")
    assert status == 200 and headers["Content-Type"] == "application/json"
    data = json.loads(body)
    assert sorted(d["id"] for d in data) == sorted(nodes)
    b = [d for d in data if d["hostname"] == "host-b"][0]
    assert b["username"] == "ci" and b["connection_port"] == 22
    assert sorted(b["label"]) == ["large", "small"] and isinstance(b["age"], str)

    # fields: text only, in the table's column order
    status, _, body = get(port, "/node-list?fields=state,id")
    cols, rows = parse_table(body)
    assert cols == ["ID", "State"]
    status, _, body = get(port, "/node-list?fields=state,id", "application/json")
    assert len(json.loads(body)[0]) == 21

    one = sorted(nodes)[0]
    status, _, body = get(port, "/node-list?node_id=" + one, "application/json")
    assert [d["id"] for d in json.loads(body)] == [one]
    status, _, body = get(port, "/node-list?node_id=0000099999", "application/json")
    assert status == 200 and json.loads(body) == []
    status, _, body = get(port, "/node-list?node_id=0000099999")
    assert parse_table(body)[1] == []

    # negotiation: */* and browsers get text; a JSON preference gets JSON
    assert get(port, "/node-list", "*/*")[1]["Content-Type"].startswith("text/plain")
    assert get(port, "/node-list", "text/html,application/xhtml+xml,*/*;q=0.8")[1][
        "Content-Type"].startswith("text/plain")
    assert get(port, "/node-list", "text/*;q=0.5, application/json")[1][
        "Content-Type"] == "application/json"


def test_headers_caching_methods_and_errors(deployment, zuul):
    port, nodes, _ = start_web(deployment, zuul)
    status, headers, _ = get(port, "/label-list")
    lm = headers["Last-Modified"]
    status, _, body = get(port, "/label-list", headers={"If-Modified-Since": lm})
    assert status == 304 and body == ""
    status, _, body = get(port, "/label-list",
                          headers={"If-Modified-Since": "Mon, 01 Jan 2001 00:00:00 GMT"})
    assert status == 200
    cols, rows = parse_table(body)
    assert cols == ["Label"] and sorted(r["Label"] for r in rows) == ["large", "small"]
    assert json.loads(get(port, "/label-list", "application/json")[2]) == [
        {"label": "large"}, {"label": "small"}]

    status, headers, body = get(port, "/node-list", method="HEAD")
    assert status == 200 and body == "" and int(headers["Content-Length"]) > 0
    assert get(port, "/node-list", method="POST")[0] == 405
    assert get(port, "/node-list", method="DELETE")[0] == 405
    assert get(port, "/nope")[0] == 404
    # `/` is the status page (test_web_statuspage.py), here too
    status, headers, body = get(port, "/")
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    assert '<section id="nodes">' in body
    status, _, body = get(port, "/ready")
    assert status == 200 and body == "OK"

    # oversized request headers are refused, the server stays up
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /node-list HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n")
    s.settimeout(10)
    answer = b""
    try:
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            answer += chunk
    except (ConnectionResetError, socket.timeout):
        pass
    s.close()
    assert not answer.startswith(b"HTTP/1.1 200"), answer[:100]
    assert get(port, "/ready")[0] == 200


def test_request_and_image_lists(deployment, zuul, zk):
    port, nodes, _ = start_web(deployment, zuul)
    pool = wait_for(lambda: zuul.pools(), what="pool component")[0]
    rid = zuul.submit(["huge"], requestor="zuul.example.com")
    zuul.wait_request(rid)

    def request_row():
        data = json.loads(get(port, "/request-list", "application/json")[2])
        return next((d for d in data if d["id"] == rid and d["state"] == "failed"), None)
    row = wait_for(request_row, what="failed request listed")
    assert row["declined_by"] == [pool["id"]] and row["node_types"] == ["huge"]
    cols, _ = parse_table(get(port, "/request-list")[2])
    assert cols == ["Request ID", "Priority", "State", "Requestor", "Node Types", "Nodes",
                    "Declined By", "Event ID"]

    t = time.time() - 90061
    b1 = write_build(zk, "ubuntu", build_record(state_time=t))
    u1 = write_upload(zk, "ubuntu", b1, "static-a", upload_record(state_time=t))
    zk.create("/nodepool/images/ubuntu/request-build", b"")
    time.sleep(1.1)  # past the 1 s answer cache

    data = json.loads(get(port, "/image-list", "application/json")[2])
    assert data == [{"id": b1, "upload_id": u1, "provider": "static-a", "image": "ubuntu",
                     "external_name": "ubuntu-1700000000", "external_id": "img-1",
                     "state": "ready", "age": int(t), "service": "serving"}]
    cols, rows = parse_table(get(port, "/image-list")[2])
    assert rows[0]["Age"].startswith("01:01:01:")
    data = json.loads(get(port, "/dib-image-list", "application/json")[2])
    assert data == [{"id": "ubuntu-" + b1, "image": "ubuntu", "builder": "nb01.example.com",
                     "formats": ["qcow2", "raw"], "state": "ready", "age": int(t)}]
    data = json.loads(get(port, "/image-status", "application/json")[2])
    assert len(data) == 1 and data[0]["image"] == "ubuntu" and data[0]["paused"] is False
    assert data[0]["build_request"] == "pending"
    assert isinstance(data[0]["build_request_age"], int)
    cols, rows = parse_table(get(port, "/image-status?fields=image,paused")[2])
    assert cols == ["Image", "Paused"] and rows == [{"Image": "ubuntu", "Paused": "False"}]


METRIC = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="[^"]*",?)*\})? '
                    r'(-?[0-9.e+]+|\+Inf|NaN)$')


def parse_metrics(text):
    out = {}
    for line in text.splitlines():
        if line.startswith("#"):
            assert line.startswith("# HELP ") or line.startswith("# TYPE "), line
            continue
        m = METRIC.match(line)
        assert m, "not a Prometheus sample: %r" % line
        name_labels, value = line.rsplit(" ", 1)
        out[name_labels] = float(value)
    return out


def test_metrics(deployment, zuul):
    port, nodes, _ = start_web(deployment, zuul)
    rid = zuul.submit(["small"])
    zuul.wait_request(rid)

    def scrape():
        status, headers, body = get(port, "/metrics")
        assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return parse_metrics(body)
    m = wait_for(lambda: (lambda m: m.get('nodepool_requests_handled_total{provider='
                                          '"static-a",outcome="fulfilled"}') == 1 and m)(
        scrape()), timeout=20, what="fulfilled request in /metrics")
    assert m['nodepool_nodes{provider="static-a",state="ready"}'] == 3
    assert m['nodepool_nodes{provider="static-a",state="deleting"}'] == 0
    assert m['nodepool_label_nodes{label="large",state="ready"}'] == 1
    assert m['nodepool_label_nodes{label="small",state="ready"}'] == 3
    assert m['nodepool_requests{state="fulfilled"}'] == 1
    assert m['nodepool_launcher_ready'] == 1
    assert m['nodepool_requests_handled_total{provider="static-a",outcome="accepted"}'] == 1
    assert m['nodepool_worker_starts_total{provider="static-a"}'] == 1
    assert m['nodepool_worker_restarts_total{provider="static-a"}'] == 0
    assert m['nodepool_launch_duration_seconds_count{provider="static-a",phase="total"}'] == 0
    assert m['nodepool_launch_duration_seconds_bucket{provider="static-a",phase="total",'
             'le="+Inf"}'] == 0

    # a restarted worker continues its counters and counts the start
    deployment.stop_all()
    deployment.start_launcher("static-a", deployment.procs[0].p.args[-1])
    wait_ready(port)
    m = wait_for(lambda: (lambda m: m.get('nodepool_worker_starts_total{provider='
                                          '"static-a"}') == 2 and m)(scrape()),
                 what="second start recorded")
    assert m['nodepool_worker_restarts_total{provider="static-a"}'] == 1
    assert m['nodepool_requests_handled_total{provider="static-a",outcome="fulfilled"}'] == 1


def test_ready_503_until_first_pass(deployment):
    w = webapp()
    cfg = static_config([host("host-a", ["small"])], extra=w)
    dead = free_port()
    path = deployment.write_config(cfg)
    full = json.load(open(path))
    full["zookeeper-servers"][0]["port"] = dead  # nothing listens: never connects
    with open(path, "w") as f:
        json.dump(full, f)
    deployment.start_launcher("static-a", path)
    port = w["webapp"]["port"]

    def up():
        try:
            return get(port, "/ready")
        except OSError:
            return None
    status, _, _ = wait_for(up, what="web API listening")
    assert status == 503
    status, _, body = get(port, "/node-list", "application/json")
    assert status == 200 and json.loads(body) == []
    assert get(port, "/image-list")[0] == 503  # no session to read images with
    assert get(port, "/metrics")[0] == 503


def test_only_first_provider_serves(deployment, zuul):
    w = webapp()
    cfg = {
        "labels": [{"name": "small"}],
        "providers": [
            {"name": "static-a", "driver": "static",
             "pools": [{"name": "main", "nodes": [host("a1", ["small"])]}]},
            {"name": "static-b", "driver": "static",
             "pools": [{"name": "main", "nodes": [host("b1", ["small"])]}]},
        ],
    }
    cfg.update(w)
    path = deployment.write_config(cfg)
    port = w["webapp"]["port"]
    deployment.start_launcher("static-b", path)
    wait_for(lambda: len(zuul.pools()) == 1, what="static-b registered")
    time.sleep(0.5)
    try:
        get(port, "/ready")
        raise AssertionError("static-b's worker serves the web API")
    except urllib.error.URLError:
        pass
    deployment.start_launcher("static-a", path)
    wait_ready(port)
    data = wait_for(lambda: (lambda d: len(d) == 2 and d)(
        json.loads(get(port, "/node-list", "application/json")[2])), what="both nodes")
    assert sorted(d["provider"] for d in data) == ["static-a", "static-b"]
