"""bench/statuspage.sh's Python half: fill, serve, measure in Chromium.
Arguments: BUILD_DIR N LOADS."""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "process"))
sys.path.insert(0, HERE)

import browser  # noqa: E402
from scale import client, fill, free_port  # noqa: E402

PROVIDERS = ["cloud-%c" % c for c in "abcde"]
NAV = ("var n = performance.getEntriesByType('navigation')[0];"
       "return {server: n.responseStart - n.requestStart,"
       " transfer: n.responseEnd - n.responseStart,"
       " render: n.domContentLoadedEventEnd - n.responseStart,"
       " draw: window.npRenderMs, bytes: n.transferSize || n.encodedBodySize};")


def main():
    build, n, loads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    why = browser.missing()
    if why:
        sys.exit("statuspage bench: " + why)
    zk = os.environ["NP_TEST_ZK_TLS"]
    certs = os.environ["NP_TEST_CERTS"]
    port = zk.rsplit(":", 1)[1]
    chroot = "/pagebench-%d-%d" % (os.getpid(), int(time.time()))
    k = client(zk)
    k.ensure_path(chroot)
    k.stop()
    k = client(zk + chroot)
    t0 = time.time()
    fill(k, n, PROVIDERS)
    print("filled %d node records in %.1fs" % (n, time.time() - t0), flush=True)
    k.stop()
    tmp = tempfile.mkdtemp(prefix="pagebench.", dir="/tmp")
    web_port = free_port()
    cfg = {
        "zookeeper-servers": [{"host": "127.0.0.1", "port": int(port), "chroot": chroot}],
        "zookeeper-tls": {"ca": certs + "/ca.pem", "cert": certs + "/client.pem",
                          "key": certs + "/client.key"},
        "zookeeper-timeout": 30,
        "webapp": {"port": web_port, "listen_address": "127.0.0.1"},
        "labels": [{"name": "label-%d" % i} for i in range(7)],
        "providers": [{"name": p, "driver": "static", "pools": [
            {"name": "main", "max-servers": n // 4,
             "nodes": [{"name": "h.%s.example" % p, "labels": ["label-0"],
                        "host-key-checking": False}]}]} for p in PROVIDERS],
    }
    with open(tmp + "/nodepool.yaml", "w") as f:
        json.dump(cfg, f)
    log = open(tmp + "/web.log", "wb")
    web = subprocess.Popen([os.path.join(build, "bin", "nodepool-web"), "-c",
                            tmp + "/nodepool.yaml"], stdout=log, stderr=log)
    base = "http://127.0.0.1:%d" % web_port
    try:
        deadline = time.time() + 300
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(base + "/ready", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            time.sleep(0.2)
        else:
            sys.exit("nodepool-web not ready; log in " + tmp)
        with urllib.request.urlopen(base + "/status-summary", timeout=30) as r:
            s = json.loads(r.read())
        print("nodepool-web ready: the summary counts %d nodes" % s["nodes"]["total"])
        rows = []
        with browser.Browser(tmp) as b:
            for i in range(loads):
                # a fresh answer each time (the server keeps one a second)
                time.sleep(1.1)
                b.get(base + "/")
                rows.append(b.js(NAV))
                errors = b.console_errors()
                if errors:
                    print("console errors:", errors)
            # the script's redraw from /status-summary (every 5 s)
            g = b.js("return document.body.getAttribute('data-generated')")
            deadline = time.time() + 30
            while time.time() < deadline and \
                    b.js("return document.body.getAttribute('data-generated')") == g:
                time.sleep(0.2)
            redraw = b.js("return window.npRenderMs")
        for r in rows:
            print("  server %6.1f ms  transfer %5.1f ms  render %6.1f ms  (script draw %5.1f ms)"
                  "  %d bytes" % (r["server"], r["transfer"], r["render"], r["draw"],
                                  r["bytes"] or 0))
        med = {k: statistics.median(r[k] for r in rows)
               for k in ("server", "transfer", "render", "draw")}
        print("median of %d loads, %d nodes: server %.1f ms, render %.1f ms (target < 200), "
              "script draw %.1f ms; redraw from /status-summary %.1f ms"
              % (loads, n, med["server"], med["render"], med["draw"], redraw))
    finally:
        web.terminate()
        web.wait(10)


if __name__ == "__main__":
    main()
