"""Helpers for the operator-interface process tests (the `nodepool` command,
the web API, statsd): running the command, reading its tables, writing image
records as upstream's nodepool-builder writes them (zk/zookeeper.py)."""
import json
import os
import re
import subprocess
import time
import uuid

from conftest import bin_path, free_port

FAST = {"nodepoold": {"cleanup-interval": 1, "delete-interval": 0.5, "stats-interval": 0.5}}


def host(name, labels, **kw):
    h = {"name": name, "labels": labels, "host-key-checking": False}
    h.update(kw)
    return h


def static_config(hosts, provider="static-a", extra=None, diskimages=None):
    labels = sorted({l for h in hosts for l in h["labels"]})
    cfg = {
        "labels": [{"name": l} for l in labels],
        "providers": [{"name": provider, "driver": "static",
                       "pools": [{"name": "main", "nodes": hosts}]}],
    }
    if diskimages is not None:
        cfg["diskimages"] = diskimages
    cfg.update(json.loads(json.dumps(FAST)))
    cfg.update(extra or {})
    return cfg


def nodepool(config, *args, stdin=None, timeout=60):
    """Run `nodepool -c config args...`; returns CompletedProcess (text)."""
    r = subprocess.run([bin_path("nodepool"), "-c", config] + list(args),
                       input=stdin, capture_output=True, text=True, timeout=timeout)
    # the command must never trip a sanitizer (make check SANITIZE=...)
    assert "Sanitizer" not in r.stderr and "runtime error:" not in r.stderr, r.stderr
    return r


TABLE_BORDER = re.compile(r"^\+(-+\+)+$")


def parse_table(text):
    """Rows of a PrettyTable-style table as dicts by header; checks the
    borders and that every line has the border's width."""
    lines = text.rstrip("\n").split("\n")
    assert TABLE_BORDER.match(lines[0]), text
    assert lines[2] == lines[0] and lines[-1] == lines[0], text
    width = len(lines[0])
    for l in lines:
        assert len(l) == width, "ragged table:\n" + text
    cols = [c.strip() for c in lines[1].strip("|").split("|")]
    # left aligned, one space of padding
    for cell in lines[1].strip("|").split("|"):
        assert cell.startswith(" ") and (cell.strip() == "" or cell[1] != " "), text
    rows = []
    for l in lines[3:-1]:
        cells = [c.strip() for c in l.strip("|").split("|")]
        rows.append(dict(zip(cols, cells)))
    return cols, rows


AGE = re.compile(r"^\d{2,}:\d{2}:\d{2}:\d{2}$")


def ready_nodes(zuul):
    return {nid: n for nid, n in zuul.nodes().items() if n["state"] == "ready"}


# ---- image records, as the builder writes them --------------------------------


def build_record(state="ready", builder="nb01.example.com", formats="qcow2,raw",
                 state_time=None):
    return {
        "state": state,
        "state_time": state_time if state_time is not None else time.time(),
        "builder": builder,
        "builder_id": uuid.uuid4().hex,
        "formats": formats,
        "username": "zuul",
        "python_path": "/usr/bin/python3",
        "shell_type": None,
    }


def upload_record(state="ready", external_id="img-1", external_name="ubuntu-1700000000",
                  state_time=None):
    return {
        "state": state,
        "state_time": state_time if state_time is not None else time.time(),
        "external_id": external_id,
        "external_name": external_name,
        "format": "qcow2",
        "username": "zuul",
        "python_path": "/usr/bin/python3",
        "shell_type": None,
    }


def write_build(zk, image, record, build_id=None):
    build_id = build_id or uuid.uuid4().hex
    zk.create("/nodepool/images/%s/builds/%s" % (image, build_id),
              json.dumps(record).encode(), makepath=True)
    return build_id


def write_upload(zk, image, build_id, provider, record):
    path = zk.create("/nodepool/images/%s/builds/%s/providers/%s/images/" % (
        image, build_id, provider), json.dumps(record).encode(), makepath=True,
        sequence=True)
    return path.rsplit("/", 1)[1]


def read_json(zk, path):
    data, _ = zk.get(path)
    return json.loads(data)


def start_launcher(deployment, provider, config, env=None):
    """A launcher with extra environment (statsd)."""
    from conftest import Proc
    log = os.path.join(deployment.dir, "launcher-%s-%d.log" % (provider,
                                                              len(deployment.procs)))
    p = Proc([bin_path("nodepool-launcher"), "-p", provider, "-c", config], log, env=env)
    deployment.procs.append(p)
    return p


def webapp(port=None):
    return {"webapp": {"port": port or free_port(), "listen_address": "127.0.0.1"}}
