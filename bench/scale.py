"""Scale benchmark (issue 13): memory and start-up CPU of nodepoold with
many nodes in ZooKeeper and many providers.

  /usr/bin/python3 bench/scale.py BUILD_DIR N_NODES M_PROVIDERS [H_HOSTS]

Needs NP_TEST_ZK_TLS and NP_TEST_CERTS (tests/zkfixture.sh env; bench/scale.sh
starts and stops a dedicated ZooKeeper). In a private chroot it writes
N_NODES - M*H node records shaped as upstream Nodepool and Zuul write them
(tests/data/golden/node-zuul-*.json: every key of Node.toDict), spread over
five foreign providers (clouds this nodepoold does not run) in the states a
busy fleet has; in-use nodes carry a kazoo lock directory as Zuul leaves it.
Then it starts nodepoold with M static providers of H hosts each (their
nodes, M*H of the N, are registered by the workers themselves), waits until
every worker is running (READY: caches synced, provider started) and every
static node is registered, and prints per-process RSS and user+sys CPU
(from /proc) and the totals. Stops only what it started, by pid.
"""
import datetime
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

from kazoo.client import KazooClient

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "process"))

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "..", "tests", "data", "golden")
CLK = os.sysconf("SC_CLK_TCK")
PSS = {}
PAGE = os.sysconf("SC_PAGE_SIZE")


def client(hosts):
    c = os.environ["NP_TEST_CERTS"]
    k = KazooClient(hosts=hosts, use_ssl=True, verify_certs=True, ca=c + "/ca.pem",
                    certfile=c + "/client.pem", keyfile=c + "/client.key", timeout=30)
    k.start(timeout=30)
    return k


def templates():
    out = {}
    for name in ("in-use", "used", "hold", "released"):
        with open(os.path.join(GOLDEN, "node-zuul-%s.json" % name)) as f:
            out[name] = json.load(f)
    with open(os.path.join(GOLDEN, "node-aws.json")) as f:
        out["ready"] = json.load(f)
    return out


def fill(k, n, foreign):
    """n node records over the foreign providers: 60% in-use, 20% ready,
    10% used, 5% hold, 5% building (the in-use template, state changed)."""
    t = templates()
    k.ensure_path("/nodepool/nodes")
    k.ensure_path("/nodepool/requests")
    now = time.time()
    pending = []
    for i in range(n):
        r = i % 20
        if r < 12:
            d, lock = dict(t["in-use"]), True
        elif r < 16:
            d, lock = dict(t["ready"]), False
        elif r < 18:
            d, lock = dict(t["used"]), False
        elif r < 19:
            d, lock = dict(t["hold"]), False
        else:
            d, lock = dict(t["in-use"]), False
            d["state"] = "building"
            d["allocated_to"] = None
        prov = foreign[i % len(foreign)]
        d["provider"] = prov
        d["pool"] = "main"
        d["type"] = ["label-%d" % (i % 7)]
        d["state_time"] = now - (i % 3600)
        d["created_time"] = now - 3600 - (i % 3600)
        d["hostname"] = "np%010d" % i
        d["public_ipv4"] = "10.%d.%d.%d" % (i >> 16 & 255, i >> 8 & 255, i & 255)
        d["interface_ip"] = d["public_ipv4"]
        d["external_id"] = str(uuid.UUID(int=i + 1))
        d["launcher"] = "nl0%d.example.com-PoolWorker.%s-main-%s" % (
            i % 3, prov, "5c1e0b4a9f8d4e2a8b7c6d5e4f3a2b1c")
        if d.get("allocated_to") is not None:
            d["allocated_to"] = "200-%010d" % (i // 2)
        path = "/nodepool/nodes/%010d" % (1000000 + i)
        pending.append(k.create_async(path, json.dumps(d).encode()))
        if lock:
            pending.append(k.create_async(path + "/lock"))
        if len(pending) >= 2000:
            for p in pending:
                p.get(timeout=60)
            pending = []
    for p in pending:
        p.get(timeout=60)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def procs_of(root):
    """root and its descendants: {pid: comm}."""
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        comm = st[st.index("(") + 1:st.rindex(")")]
        ppid = int(st[st.rindex(")") + 2:].split()[1])
        kids.setdefault(ppid, []).append((int(d), comm))
    out, todo = {root: "nodepoold"}, [root]
    while todo:
        p = todo.pop()
        for c, comm in kids.get(p, []):
            out[c] = comm
            todo.append(c)
    return out


def smaps(pid):
    """(anonymous, file-backed) kB of the resident set."""
    anon = filek = 0
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith("Anonymous:"):
                    anon = int(line.split()[1])
                elif line.startswith("Rss:"):
                    filek = int(line.split()[1])
                elif line.startswith("Pss:"):
                    PSS[pid] = int(line.split()[1])
    except OSError:
        pass
    return anon, filek - anon


def sample(pid):
    with open("/proc/%d/stat" % pid) as f:
        st = f.read()
    f2 = st[st.rindex(")") + 2:].split()
    cpu = (int(f2[11]) + int(f2[12])) / CLK
    rss = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        args = f.read().split(b"\0")
    name = os.path.basename(args[0].decode())
    if b"-p" in args:
        name += " " + args[args.index(b"-p") + 1].decode()
    anon, filek = smaps(pid)
    return name, rss, cpu, anon, filek


def table(proc, title):
    """Prints per-process RSS (anonymous, file-backed), PSS, CPU, and the
    totals. RSS counts a shared page in every process that maps it; PSS
    shares it out, so the PSS total is what the processes use together."""
    PSS.clear()
    rows = []
    for pid, comm in sorted(procs_of(proc.pid).items()):
        try:
            rows.append((pid,) + sample(pid))
        except OSError:
            pass
    print(title)
    print("%8s  %-28s %9s %9s %9s %9s %8s" % ("pid", "process", "RSS MiB", "(anon", "file)",
                                               "PSS MiB", "CPU s"))
    for pid, name, rss, cpu, anon, filek in rows:
        print("%8d  %-28s %9.1f %9.1f %9.1f %9.1f %8.2f" % (
            pid, name, rss / 1024.0, anon / 1024.0, filek / 1024.0,
            PSS.get(pid, 0) / 1024.0, cpu))
    print("%8s  %-28s %9.1f %9.1f %9.1f %9.1f %8.2f" % (
        "", "TOTAL", sum(r[2] for r in rows) / 1024.0, sum(r[4] for r in rows) / 1024.0,
        sum(r[5] for r in rows) / 1024.0, sum(PSS.values()) / 1024.0,
        sum(r[3] for r in rows)))
    print("total PSS (shared pages counted once) %.1f MiB" % (sum(PSS.values()) / 1024.0),
          flush=True)


def serve(k, m, rounds):
    """Zuul's side under load, step by step as Zuul's code (the Zuul class of
    tests/process/conftest.py: zuul/nodepool.py Nodepool.requestNodes,
    acceptNodes, useNodeSet, returnNodeSet): `rounds` rounds of 2*M node
    requests of one "small" node each, submitted together, so that every
    worker competes for them; each fulfilled request is accepted (nodes
    locked, in-use) and its nodes returned (used, unlocked). Returns the
    number served, once every returned static node has been deleted (the
    static driver registers its slot anew)."""
    from conftest import Zuul, wait_for
    z = Zuul(k)
    served = 0
    for _ in range(rounds):
        rids = [z.submit(["small"]) for _ in range(2 * m)]
        held = []
        for rid in rids:
            req = z.wait_request(rid, timeout=120)
            if req["state"] != "fulfilled":
                sys.exit("request %s %s" % (rid, req["state"]))
            held.append(z.accept(rid))
        for h in held:
            z.finish(h)
        ids = [x[0] for h in held for x in h]
        wait_for(lambda: all(not k.exists("/nodepool/nodes/" + i) for i in ids), 120,
                 what="returned nodes deleted")
        served += len(rids)
    return served


def restart(server, proc, logpath, m):
    """BENCH_RESTART: restart ZooKeeper (1 s down, same data and ports) and
    print, per worker, when it reconnected and when its view was re-synced
    (its caches re-listed and every record's stat re-read), in ms after the
    server served again, and the CPU the processes spent on it."""
    before = {pid: sample(pid)[2] for pid in procs_of(proc.pid)}
    t_down, t_back = server.restart(down=1.0)
    deadline = time.time() + 120
    pat_c = re.compile(r"^(\S+ \S+) INFO worker\[([^\]]+)\]: zookeeper: (?:re)?connected, session",
                       re.M)
    pat_r = re.compile(r"^(\S+ \S+) INFO worker\[([^\]]+)\]: ZooKeeper view re-synced", re.M)

    def lags(pat, text):
        out = {}
        for mm in pat.finditer(text):
            t = datetime.datetime.strptime(mm.group(1), "%Y-%m-%d %H:%M:%S.%f").timestamp()
            if t >= t_down and mm.group(2) not in out:
                out[mm.group(2)] = (t - t_back) * 1000
        return out
    while True:
        with open(logpath, errors="replace") as f:
            text = f.read()
        conn, res = lags(pat_c, text), lags(pat_r, text)
        if len(res) >= m or time.time() > deadline:
            break
        time.sleep(0.2)
    time.sleep(2)
    cpu = sum(sample(pid)[2] - c for pid, c in before.items() if os.path.exists("/proc/%d" % pid))
    print("ZooKeeper restarted (down %.1f s): per worker, ms after it served again:" %
          (t_back - t_down))
    for w in sorted(res):
        print("  %-12s reconnected %6.0f  re-synced %6.0f" % (w, conn.get(w, float("nan")), res[w]))
    if len(res) < m:
        print("  only %d of %d workers re-synced within 120 s" % (len(res), m))
    print("CPU spent by nodepoold's processes meanwhile: %.2f s" % cpu)


def main():
    build, n, m = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    h = int(sys.argv[4]) if len(sys.argv) > 4 else 20
    zk = os.environ["NP_TEST_ZK_TLS"]
    server = None
    if os.environ.get("BENCH_RESTART"):
        # a server of our own that we can restart on the same data and ports
        from zkservers import Standalone
        server = Standalone(tempfile.mkdtemp(prefix="npscale-zk.", dir="/tmp"),
                            os.environ["NP_TEST_CERTS"])
        server.start()
        zk = server.server.hostport()
    port = zk.rsplit(":", 1)[1]
    chroot = "/scale-%d-%d" % (os.getpid(), int(time.time()))
    foreign = ["cloud-%c" % c for c in "abcde"]
    nfill = max(0, n - m * h)
    k = client(zk)
    k.ensure_path(chroot)
    k.stop()
    k = client(zk + chroot)
    t0 = time.time()
    fill(k, nfill, foreign)
    print("filled %d node records in %.1fs (+%d static nodes to register)" %
          (nfill, time.time() - t0, m * h), flush=True)
    tmp = tempfile.mkdtemp(prefix="npscale.", dir="/tmp")
    certs = os.environ["NP_TEST_CERTS"]
    provs = []
    for p in range(m):
        hosts = [{"name": "h%d.p%d.example" % (i, p), "labels": ["small"],
                  "host-key-checking": False} for i in range(h)]
        provs.append({"name": "static-%d" % p, "driver": "static",
                      "pools": [{"name": "main", "nodes": hosts}]})
    cfg = {
        "zookeeper-servers": [{"host": "127.0.0.1", "port": int(port), "chroot": chroot}],
        "zookeeper-tls": {"ca": certs + "/ca.pem", "cert": certs + "/client.pem",
                          "key": certs + "/client.key"},
        "zookeeper-timeout": 30,
        "webapp": {"port": free_port(), "listen_address": "127.0.0.1"},
        "labels": [{"name": "small"}],
        "providers": provs,
        "nodepoold": {"control-socket": tmp + "/ctl.sock", "pid-file": tmp + "/npd.pid"},
    }
    with open(tmp + "/nodepool.yaml", "w") as f:
        json.dump(cfg, f)
    log = open(tmp + "/npd.log", "wb")
    env = dict(os.environ)
    t0 = time.time()
    proc = subprocess.Popen([os.path.join(build, "bin", "nodepoold"), "-f", "-c",
                             tmp + "/nodepool.yaml"], stdout=log, stderr=log, env=env)
    try:
        ok = False
        while time.time() - t0 < 600:
            if proc.poll() is not None:
                break
            r = subprocess.run([os.path.join(build, "bin", "nodepoolctl"), "-s",
                                tmp + "/ctl.sock", "status", "--json"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            if r.returncode == 0:
                ws = json.loads(r.stdout)["workers"]
                provw = [w for w in ws if w["name"].startswith("static-")]
                if (len(provw) == m and
                        all(w["state"] == "running" and w["zk"] == "connected"
                            for w in provw)):
                    ok = True
                    break
            time.sleep(0.2)
        if not ok:
            sys.exit("nodepoold did not get every worker running; log in " + tmp)
        # every static node registered: the workers' start-up is done
        while time.time() - t0 < 600:
            kids = k.get_children("/nodepool/nodes")
            if len(kids) >= nfill + m * h:
                break
            time.sleep(0.2)
        ready = time.time() - t0
        time.sleep(3)  # let the last events settle
        table(proc, "nodes %d (%d foreign, %d static), providers %d: all workers running "
              "after %.1fs" % (nfill + m * h, nfill, m * h, m, ready))
        if server is not None:
            # before the load: the serving state measured below is the one
            # after a reconnection and its re-sync
            restart(server, proc, tmp + "/npd.log", m)
            t2 = time.time()
            while k.state != "CONNECTED" and time.time() - t2 < 60:
                time.sleep(0.1)  # kazoo's own reconnection, session kept
        rounds = int(os.environ.get("BENCH_ROUNDS", "3"))
        if rounds > 0:
            t1 = time.time()
            served = serve(k, m, rounds)
            time.sleep(5)  # the last events settle
            table(proc, "after %sserving %d node requests as Zuul does (%.1fs), 5 s later:"
                  % ("the restart, then " if server is not None else "", served,
                     time.time() - t1))
        if os.environ.get("BENCH_WEB_READ"):
            # a reader at last: nodepool-web reads its view of nodes and
            # requests (asleep until asked, issue 25) for this listing
            import urllib.request
            t1 = time.time()
            req = urllib.request.Request(
                "http://127.0.0.1:%d/node-list" % cfg["webapp"]["port"],
                headers={"Accept": "application/json"})
            with urllib.request.urlopen(req, timeout=60) as r:
                listed = len(json.loads(r.read()))
            took = time.time() - t1
            time.sleep(5)
            table(proc, "after one /node-list (%d nodes, answered in %.2fs), 5 s later:"
                  % (listed, took))
        if os.environ.get("BENCH_HOLD"):  # time to inspect /proc by hand
            print("holding %s s; pids above" % os.environ["BENCH_HOLD"], flush=True)
            time.sleep(float(os.environ["BENCH_HOLD"]))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        try:
            k.delete(chroot, recursive=True)
        except Exception:
            pass
        k.stop()
        if server is not None:
            server.stop()
            subprocess.run(["rm", "-rf", os.path.dirname(server.server.dir)])
        if os.environ.get("BENCH_KEEP_LOG"):
            print("log: " + tmp + "/npd.log")
        else:
            subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
