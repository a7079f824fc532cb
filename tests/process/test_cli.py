"""The `nodepool` command against a running launcher (static provider) and
image records written as upstream's builder writes them: columns, values,
formats and exit codes as upstream's nodepoolcmd.py / status.py."""
import json
import os
import stat
import time

from conftest import wait_for
from operator_helpers import (AGE, build_record, host, nodepool, parse_table, read_json,
                              ready_nodes, static_config, upload_record, write_build,
                              write_upload)

BRIEF = ["ID", "Provider", "Label", "Server ID", "Public IPv4", "IPv6", "State", "Age",
         "Locked"]
DETAIL = BRIEF + ["Pool", "Hostname", "Private IPv4", "AZ", "Username", "Port", "Launcher",
                  "Allocated To", "Hold Job", "Comment", "User Data", "Driver Data"]


def two_host_config(**kw):
    return static_config([host("host-a", ["small"], **{"max-parallel-jobs": 2}),
                          host("host-b", ["small", "large"], username="ci",
                               **{"connection-port": 2222})], **kw)


def test_list_brief_detail_and_json(deployment, zuul):
    cfg = deployment.write_config(two_host_config())
    deployment.start_launcher("static-a", cfg)
    nodes = wait_for(lambda: len(ready_nodes(zuul)) == 3 and ready_nodes(zuul),
                     what="3 ready nodes")
    # Zuul holds one node's lock: the listing says so
    some = sorted(nodes)[0]
    lock = zuul.zk.Lock("/nodepool/nodes/%s/lock" % some)
    assert lock.acquire(timeout=10)
    try:
        r = nodepool(cfg, "list")
        assert r.returncode == 0, r.stderr
        cols, rows = parse_table(r.stdout)
        assert cols == BRIEF
        assert sorted(x["ID"] for x in rows) == sorted(nodes)
        assert [x["ID"] for x in rows] == sorted(x["ID"] for x in rows)
        for row in rows:
            n = nodes[row["ID"]]
            assert row["Provider"] == "static-a"
            assert row["Label"] == ",".join(n["type"])
            assert row["Server ID"] == n["hostname"]
            assert row["Public IPv4"] == "" and row["IPv6"] == ""
            assert row["State"] == "ready"
            assert AGE.match(row["Age"]), row
            assert row["Locked"] == ("locked" if row["ID"] == some else "unlocked")

        r = nodepool(cfg, "list", "--detail")
        assert r.returncode == 0, r.stderr
        cols, rows = parse_table(r.stdout)
        assert cols == DETAIL
        b = [x for x in rows if x["Hostname"] == "host-b"][0]
        assert b["Username"] == "ci" and b["Port"] == "2222" and b["Pool"] == "main"
        assert b["Launcher"] == "static driver" and b["Allocated To"] == ""
        assert sorted(b["Label"].split(",")) == ["large", "small"]

        r = nodepool(cfg, "list", "--json")
        assert r.returncode == 0, r.stderr
        data = json.loads(r.stdout)
        assert [d["id"] for d in data] == sorted(nodes)
        d = [x for x in data if x["hostname"] == "host-b"][0]
        assert list(d.keys()) == [
            "id", "provider", "label", "server_id", "public_ipv4", "ipv6", "state", "age",
            "locked", "pool", "hostname", "private_ipv4", "AZ", "username",
            "connection_port", "launcher", "allocated_to", "hold_job", "comment",
            "user_data", "driver_data"]
        assert d["connection_port"] == 2222 and d["public_ipv4"] is None
        assert sorted(d["label"]) == ["large", "small"] and AGE.match(d["age"])
        # json.dumps' separators, as upstream's output
        assert r.stdout.startswith('[{"id": "')
    finally:
        lock.release()
    # listing never creates lock dirs (upstream's kazoo contenders() does)
    for nid in nodes:
        if nid != some:
            assert zuul.zk.exists("/nodepool/nodes/%s/lock" % nid) is None


def test_hold_and_delete(deployment, zuul):
    cfg = deployment.write_config(two_host_config())
    deployment.start_launcher("static-a", cfg)
    nodes = wait_for(lambda: len(ready_nodes(zuul)) == 3 and ready_nodes(zuul),
                     what="3 ready nodes")
    first, second, third = sorted(nodes)

    r = nodepool(cfg, "hold", first)
    assert r.returncode == 0, r.stderr
    cols, rows = parse_table(r.stdout)
    assert cols == BRIEF and len(rows) == 1
    assert rows[0]["ID"] == first and rows[0]["State"] == "hold"
    assert rows[0]["Locked"] == "unlocked"  # our lock is released again
    assert zuul.node(first)["state"] == "hold"

    r = nodepool(cfg, "hold", "0000099999")
    assert r.returncode == 0 and r.stdout == "Node id 0000099999 not found\n"
    r = nodepool(cfg, "delete", "bogus/../id")
    assert r.returncode == 0 and r.stdout == "Node id bogus/../id not found\n"

    # delete: marked deleting, the launcher removes it
    r = nodepool(cfg, "delete", second)
    assert r.returncode == 0, r.stderr
    cols, rows = parse_table(r.stdout)
    assert rows[0]["ID"] == second and rows[0]["State"] == "deleting"
    wait_for(lambda: zuul.node(second) is None, what="deleted node removed")

    # delete --now waits until the launcher removed the record
    r = nodepool(cfg, "delete", "--now", third)
    assert r.returncode == 0, r.stderr
    assert zuul.node(third) is None
    cols, rows = parse_table(r.stdout)
    assert rows == []

    # a node Zuul holds locked: 5 s, then an error (upstream raises)
    busy = wait_for(lambda: sorted(n for n in ready_nodes(zuul) if n != first),
                    what="re-registered nodes")[0]
    lock = zuul.zk.Lock("/nodepool/nodes/%s/lock" % busy)
    assert lock.acquire(timeout=10)
    try:
        t0 = time.time()
        r = nodepool(cfg, "delete", busy)
        took = time.time() - t0
        assert r.returncode == 1
        assert "Timeout trying to acquire lock /nodepool/nodes/%s/lock" % busy in r.stderr
        assert took >= 5
        assert zuul.node(busy)["state"] == "ready"
    finally:
        lock.release()


def test_delete_now_provider_not_configured(deployment, zuul, zk):
    cfg = deployment.write_config(static_config([host("host-a", ["small"])]))
    zk.create("/nodepool/nodes/0000000123",
              json.dumps({"state": "ready", "provider": "elsewhere", "type": ["x"]}).encode(),
              makepath=True)
    r = nodepool(cfg, "delete", "--now", "0000000123")
    assert r.returncode == 0
    assert r.stdout == "Provider elsewhere for node 0000000123 not defined on this launcher\n"
    assert json.loads(zk.get("/nodepool/nodes/0000000123")[0])["state"] == "ready"


def test_request_list(deployment, zuul):
    cfg = deployment.write_config(static_config([host("host-a", ["small"])]))
    deployment.start_launcher("static-a", cfg)
    pool = wait_for(lambda: zuul.pools(), what="pool component")[0]
    # nobody offers "huge": declined by every pool, failed
    rid = zuul.submit(["huge", "small"], requestor="zuul.example.com", relative_priority=3)
    req = zuul.wait_request(rid)
    assert req["state"] == "failed"
    r = nodepool(cfg, "request-list")
    assert r.returncode == 0, r.stderr
    cols, rows = parse_table(r.stdout)
    assert cols == ["Request ID", "Priority", "State", "Requestor", "Node Types", "Nodes",
                    "Declined By", "Event ID"]
    row = [x for x in rows if x["Request ID"] == rid][0]
    assert row == {"Request ID": rid, "Priority": "3", "State": "failed",
                   "Requestor": "zuul.example.com", "Node Types": "huge,small",
                   "Nodes": "", "Declined By": pool["id"], "Event ID": req["event_id"]}
    r = nodepool(cfg, "request-list", "--json")
    data = [d for d in json.loads(r.stdout) if d["id"] == rid][0]
    assert data == {"id": rid, "relative_priority": 3, "state": "failed",
                    "requestor": "zuul.example.com", "node_types": ["huge", "small"],
                    "nodes": [], "declined_by": [pool["id"]], "event_id": req["event_id"]}


def images_fixture(zk):
    """Two images as a builder leaves them; returns the ids."""
    t = time.time() - 3 * 86400 - 3600
    b1 = write_build(zk, "ubuntu", build_record(state_time=t))
    b2 = write_build(zk, "ubuntu", build_record(state="building", formats="raw"))
    b3 = write_build(zk, "debian", build_record())
    u1 = write_upload(zk, "ubuntu", b1, "static-a", upload_record(state_time=t))
    u2 = write_upload(zk, "ubuntu", b1, "static-a",
                      upload_record(state="uploading", external_id=None,
                                    external_name=None))
    u3 = write_upload(zk, "debian", b3, "other", upload_record(external_id="img-9"))
    return b1, b2, b3, u1, u2, u3


def test_image_listings(deployment, zk):
    cfg = deployment.write_config(static_config(
        [host("host-a", ["small"])], diskimages=[{"name": "ubuntu"}, {"name": "debian"},
                                                  {"name": "held", "pause": True}]))
    deployment.start_launcher("static-a", cfg)
    b1, b2, b3, u1, u2, u3 = images_fixture(zk)

    r = nodepool(cfg, "image-list")
    assert r.returncode == 0, r.stderr
    cols, rows = parse_table(r.stdout)
    assert cols == ["Build ID", "Upload ID", "Provider", "Image", "Provider Image Name",
                    "Provider Image ID", "State", "Age", "Service"]
    by = {(x["Build ID"], x["Upload ID"]): x for x in rows}
    assert set(by) == {(b1, u1), (b1, u2), (b3, u3)}
    assert by[(b1, u1)]["Provider"] == "static-a" and by[(b1, u1)]["Image"] == "ubuntu"
    assert by[(b1, u1)]["Provider Image ID"] == "img-1"
    assert by[(b1, u1)]["State"] == "ready"
    assert by[(b1, u1)]["Age"].startswith("03:01:00:")
    assert by[(b1, u2)]["Provider Image ID"] == "" and by[(b1, u2)]["State"] == "uploading"

    r = nodepool(cfg, "image-list", "--json")
    d = [x for x in json.loads(r.stdout) if x["upload_id"] == u3][0]
    assert d["id"] == b3 and d["provider"] == "other" and isinstance(d["age"], int)

    r = nodepool(cfg, "dib-image-list")
    cols, rows = parse_table(r.stdout)
    assert cols == ["ID", "Image", "Builder", "Formats", "State", "Age"]
    by = {x["ID"]: x for x in rows}
    assert by["ubuntu-" + b1]["Formats"] == "qcow2,raw"
    assert by["ubuntu-" + b2]["State"] == "building"
    assert by["debian-" + b3]["Builder"] == "nb01.example.com"

    # pause: builds show "paused"; image-status says so
    assert nodepool(cfg, "image-pause", "ubuntu").returncode == 0
    assert zk.exists("/nodepool/images/ubuntu/pause") is not None
    assert nodepool(cfg, "image-pause", "ubuntu").returncode == 0  # idempotent
    cols, rows = parse_table(nodepool(cfg, "dib-image-list").stdout)
    assert {x["State"] for x in rows if x["Image"] == "ubuntu"} == {"paused"}

    # build requests
    assert nodepool(cfg, "image-build", "debian").returncode == 0
    assert zk.exists("/nodepool/images/debian/request-build") is not None
    r = nodepool(cfg, "image-build", "nosuch")
    assert r.returncode == 1
    assert "Trying to build a non disk-image-builder image: nosuch" in r.stderr
    r = nodepool(cfg, "image-build", "held")
    assert r.returncode == 1 and "Skipping build request for image held; paused" in r.stderr

    r = nodepool(cfg, "image-status")
    cols, rows = parse_table(r.stdout)
    assert cols == ["Image", "Paused", "Build Request", "Build Request Age"]
    by = {x["Image"]: x for x in rows}
    assert by["ubuntu"]["Paused"] == "True" and by["ubuntu"]["Build Request"] == ""
    assert by["debian"]["Paused"] == "False" and by["debian"]["Build Request"] == "pending"
    assert AGE.match(by["debian"]["Build Request Age"])
    # a builder takes the image's build lock: "building"
    lock = zk.Lock("/nodepool/images/debian/builds/lock")
    assert lock.acquire(timeout=10)
    try:
        write_build(zk, "debian", build_record(state="building"))
        by = {x["image"]: x for x in json.loads(nodepool(cfg, "image-status",
                                                         "--json").stdout)}
        assert by["debian"]["build_request"] == "building"
        assert isinstance(by["debian"]["build_request_age"], int)
        assert by["ubuntu"]["paused"] is True and by["ubuntu"]["build_request"] is None
    finally:
        lock.release()

    assert nodepool(cfg, "image-unpause", "ubuntu").returncode == 0
    assert zk.exists("/nodepool/images/ubuntu/pause") is None
    assert nodepool(cfg, "image-unpause", "ubuntu").returncode == 0

    r = nodepool(cfg, "alien-image-list")
    assert r.returncode == 0
    cols, rows = parse_table(r.stdout)
    assert cols == ["Provider", "Name", "Image ID"] and rows == []


def test_image_deletes(deployment, zk):
    cfg = deployment.write_config(static_config([host("host-a", ["small"])],
                                                diskimages=[{"name": "ubuntu"}]))
    b1, b2, b3, u1, u2, u3 = images_fixture(zk)
    r = nodepool(cfg, "dib-image-delete", "ubuntu-" + b2)
    assert r.returncode == 0 and r.stdout == "Cannot delete a build in progress\n"
    r = nodepool(cfg, "dib-image-delete", "ubuntu-" + b1)
    assert r.returncode == 0 and r.stdout == ""
    rec = read_json(zk, "/nodepool/images/ubuntu/builds/" + b1)
    assert rec["state"] == "deleting" and rec["builder_id"]
    assert rec["formats"] == "qcow2,raw"
    r = nodepool(cfg, "dib-image-delete", "ubuntu-" + "0" * 32)
    assert r.stdout == "Build ubuntu-%s not found\n" % ("0" * 32) and r.returncode == 0
    r = nodepool(cfg, "dib-image-delete", "nodash")
    assert r.returncode == 1

    base = ["image-delete", "--provider", "static-a", "--image", "ubuntu", "--build-id", b1]
    r = nodepool(cfg, *(base + ["--upload-id", u2]))
    assert r.stdout == "Cannot delete because image upload in progress\n"
    r = nodepool(cfg, *(base + ["--upload-id", u1]))
    assert r.returncode == 0 and r.stdout == ""
    path = "/nodepool/images/ubuntu/builds/%s/providers/static-a/images/%s" % (b1, u1)
    assert read_json(zk, path)["state"] == "deleting"
    r = nodepool(cfg, *(base + ["--upload-id", "0000000077"]))
    assert r.returncode == 0 and r.stdout == "Image upload not found\n"
    r = nodepool(cfg, "image-delete", "--provider", "static-a")
    assert r.returncode == 2
    assert "the following arguments are required: --image, --upload-id, --build-id" \
        in r.stderr


def test_info_and_erase(deployment, zuul, zk):
    cfg = deployment.write_config(two_host_config())
    deployment.start_launcher("static-a", cfg)
    nodes = wait_for(lambda: len(ready_nodes(zuul)) == 3 and ready_nodes(zuul),
                     what="3 ready nodes")
    b1, b2, b3, u1, u2, u3 = images_fixture(zk)
    r = nodepool(cfg, "info", "static-a")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith("ZooKeeper data for provider static-a\n\nImage data:\n")
    images_part, nodes_part = out.split("\n\nNodes:\n")
    cols, rows = parse_table(images_part.split("Image data:\n")[1])
    assert cols == ["Image Name", "Build ID", "Upload IDs"]
    assert rows == [{"Image Name": "ubuntu", "Build ID": b1,
                     "Upload IDs": ",".join(sorted([u1, u2]))}]
    cols, rows = parse_table(nodes_part)
    assert cols == ["ID", "Server ID"]
    assert sorted(x["ID"] for x in rows) == sorted(nodes)

    # without --force: asks, and "n" erases nothing
    r = nodepool(cfg, "erase", "static-a", stdin="n\n")
    assert r.returncode == 0
    assert "WARNING! This action is not reversible!" in r.stdout
    assert "Erase ZooKeeper data for provider static-a? [N/y] " in r.stdout
    assert r.stdout.endswith("Aborting. No data erased.\n")
    assert zk.exists("/nodepool/images/ubuntu/builds/%s/providers/static-a" % b1)

    deployment.stop_all()  # a quiet provider, as an operator would erase it
    r = nodepool(cfg, "erase", "--force", "static-a")
    assert r.returncode == 0, r.stderr
    assert r.stdout == ("Erasing build data for static-a...\n"
                        "Erasing node data for static-a...\n")
    assert zk.exists("/nodepool/images/ubuntu/builds/%s/providers/static-a" % b1) is None
    assert zk.exists("/nodepool/images/ubuntu/builds/%s" % b1) is not None
    assert zk.exists("/nodepool/images/debian/builds/%s/providers/other" % b3) is not None
    assert [n for n in zuul.nodes().values() if n.get("provider") == "static-a"] == []


def test_export_import_round_trip(deployment, zk, zk_server, tmp_path):
    from conftest import kazoo_client
    cfg = deployment.write_config(static_config([host("host-a", ["small"])]))
    b1, b2, b3, u1, u2, u3 = images_fixture(zk)
    for _ in range(5):  # push the upload sequence up: import must continue above it
        write_upload(zk, "debian", b3, "other", upload_record())
    u_high = write_upload(zk, "debian", b3, "other", upload_record(external_id="img-hi"))
    zk.create("/nodepool/images/ubuntu/pause", b"")
    out = str(tmp_path / "images.json")
    r = nodepool(cfg, "export-image-data", out)
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    data = json.load(open(out))
    assert "/nodepool/images/ubuntu/pause" in data
    assert json.loads(data["/nodepool/images/ubuntu/builds/" + b1])["state"] == "ready"
    up = "/nodepool/images/debian/builds/%s/providers/other/images/%s" % (b3, u_high)
    assert json.loads(data[up])["external_id"] == "img-hi"
    assert not any(k.endswith("/lock") or k.endswith("request-build") for k in data)

    # into a fresh chroot
    chroot2 = deployment.chroot + "-import"
    admin = kazoo_client(zk_server)
    admin.ensure_path(chroot2)
    admin.stop()
    admin.close()
    cfg2 = dict(static_config([host("host-a", ["small"])]))
    full = deployment.zk_config()
    full["zookeeper-servers"][0]["chroot"] = chroot2
    cfg2.update(full)
    path2 = os.path.join(deployment.dir, "import.yaml")
    with open(path2, "w") as f:
        json.dump(cfg2, f)
    r = nodepool(path2, "import-image-data", out)
    assert r.returncode == 0, r.stderr
    r = nodepool(path2, "export-image-data", str(tmp_path / "again.json"))
    assert json.load(open(str(tmp_path / "again.json"))) == data
    zk2 = kazoo_client(zk_server, chroot2)
    try:
        nxt = write_upload(zk2, "debian", b3, "other", upload_record())
        assert int(nxt) > int(u_high)
    finally:
        zk2.stop()
        zk2.close()

    bad = str(tmp_path / "bad.json")
    with open(bad, "w") as f:
        json.dump({"/nodepool/nodes/0000000001": "{}"}, f)
    r = nodepool(path2, "import-image-data", bad)
    assert r.returncode == 1 and "not an image pause flag, build or upload path" in r.stderr


def test_config_validate(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("labels:\n  - name: small\nproviders:\n  - name: s\n    driver: static\n"
                    "    pools:\n      - name: main\n        nodes:\n"
                    "          - name: h\n            labels: [small]\n")
    r = nodepool(str(good), "config-validate")
    assert r.returncode == 0, r.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("labels:\n  - name: small\n    min-ready: lots\nproviders:\n"
                   "  - name: s\n    driver: nosuch\n    bogus: 1\n")
    r = nodepool(str(bad), "config-validate")
    assert r.returncode == 1
    errs = [l for l in r.stderr.splitlines() if l.startswith(str(bad) + ":")]
    assert any(l.startswith("%s:3:16: " % bad) and "min-ready" in l for l in errs), r.stderr
    assert any(":6:13: " in l and "nosuch" in l for l in errs), r.stderr
    # no ZooKeeper needed: the configs name none
    r = nodepool(str(tmp_path / "missing.yaml"), "config-validate")
    assert r.returncode == 1


def test_usage_and_unreachable_zookeeper(tmp_path):
    from conftest import free_port
    r = nodepool("/nonexistent.yaml")
    assert r.returncode == 1 and "usage: nodepool" in r.stdout
    r = nodepool("/nonexistent.yaml", "frobnicate")
    assert r.returncode == 2 and "invalid choice" in r.stderr
    r = nodepool("/nonexistent.yaml", "list", "--bogus")
    assert r.returncode == 2 and "unrecognized arguments: --bogus" in r.stderr
    r = nodepool("/nonexistent.yaml", "list")
    assert r.returncode == 1 and "/nonexistent.yaml" in r.stderr
    port = free_port()
    cfg = tmp_path / "dead.yaml"
    cfg.write_text(json.dumps({"zookeeper-servers": [{"host": "127.0.0.1", "port": port}],
                               "zookeeper-timeout": 2, "labels": [], "providers": []}))
    t0 = time.time()
    r = nodepool(str(cfg), "list", timeout=30)
    assert r.returncode == 1
    assert "unable to connect to ZooKeeper at 127.0.0.1:%d" % port in r.stderr
    assert time.time() - t0 < 15
    r = nodepool(str(cfg), "--version")
    assert r.returncode == 0 and r.stdout.startswith("Nodepool version: ")
