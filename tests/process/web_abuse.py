"""The clients of test_web_limits.py, each run as a process of its own, so
that neither the abusers nor the test's own threads hold up the operator's
probe (one Python interpreter would share one lock between all of them):

  web_abuse.py probe PORT COUNT TIMEOUT
      COUNT GETs of /ready, half a second apart, each with a TIMEOUT s client
      timeout; prints the outcomes as a JSON list of [status (or the
      error's repr), the wall-clock time of the answer].
  web_abuse.py held-probe PORT SECONDS HOLD TIMEOUT
      Rounds for SECONDS: HOLD slow connections from 127.0.0.3 (a request
      line and one header line, never the end of the head), then GET /ready
      every half second with a TIMEOUT s client timeout while all HOLD are
      still open, each answer followed by a look at which of them are still
      open (nothing to read, no end of stream); then a wait (up to 60 s
      each) for the server to close the held ones itself, its
      request_timeout, which shows it had them, not the kernel's backlog.
      Prints {"probes": [[status, open after the answer], ...], "rounds":
      [[open after the round's last answer, closed by the server], ...]}.
  web_abuse.py slowloris PORT CONNECTIONS EVERY SECONDS
      CONNECTIONS connections from 127.0.0.2, each sending a request line
      and then one header line every EVERY seconds, reconnecting (after
      EVERY seconds) when the server closes it; prints how many times the
      server closed one.
  web_abuse.py hammer PORT CLIENTS SECONDS
      CLIENTS clients asking for /node-list?x=N with a new N each time, for
      SECONDS or until standard input ends, whichever is first; prints
      "answered" on a line of its own after its first answer, then at the
      end {"sizes": [...], "errors": [...], "first": <first body>, "last":
      <wall-clock time of the last answer>}.
"""
import json
import select
import socket
import sys
import threading
import time
import urllib.error
import urllib.request

ATTACKER = "127.0.0.2"
HOLDER = "127.0.0.3"  # the held-probe's slow connections: a client of its own


def get_ready(port, timeout):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/ready" % port, timeout=timeout) as r:
            r.read()
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError as e:
        return repr(e)


def probe(port, count, timeout):
    out = []
    for _ in range(count):
        out.append([get_ready(port, timeout), time.time()])
        time.sleep(0.5)
    print(json.dumps(out))


def still_open(s):
    """Nothing to read and no end of stream: the server still holds it (a
    slow connection gets no answer before its head is whole)."""
    p = select.poll()
    p.register(s, select.POLLIN | select.POLLERR | select.POLLHUP)
    return not p.poll(0)


def held_probe(port, seconds, hold, timeout):
    probes, rounds = [], []
    end = time.time() + seconds
    while time.time() < end:
        held = []
        for _ in range(hold):
            s = socket.socket()
            s.bind((HOLDER, 0))
            s.connect(("127.0.0.1", port))
            s.sendall(b"GET /node-list HTTP/1.1\r\nHost: x\r\n")
            held.append(s)
        live = held
        while len(live) == hold and time.time() < end:
            status = get_ready(port, timeout)
            live = [s for s in held if still_open(s)]
            probes.append([status, len(live)])
            time.sleep(0.5)
        by_server = 0
        for s in held:
            s.settimeout(60)
            try:
                if not s.recv(4096):
                    by_server += 1
            except socket.timeout:
                pass
            except OSError:
                by_server += 1  # reset by the server
            s.close()
        rounds.append([len(live), by_server])
    print(json.dumps({"probes": probes, "rounds": rounds}))


def slowloris(port, n, every, seconds):
    stop = threading.Event()
    closed = [0]
    lock = threading.Lock()

    def one():
        while not stop.is_set():
            s = socket.socket()
            try:
                s.bind((ATTACKER, 0))
                s.settimeout(2)
                s.connect(("127.0.0.1", port))
                s.sendall(b"GET /node-list HTTP/1.1\r\nHost: x\r\n")
                k = 0
                s.settimeout(every)
                while not stop.is_set():
                    try:
                        if not s.recv(4096):
                            raise ConnectionResetError("closed by the server")
                    except socket.timeout:
                        s.sendall(b"X-Slow-%d: %d\r\n" % (k, k))
                        k += 1
            except OSError:
                with lock:
                    closed[0] += 1
                stop.wait(every)
            finally:
                s.close()
    threads = [threading.Thread(target=one, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join(every + 5)
    print(json.dumps(closed[0]))


def hammer(port, clients, seconds):
    stop = threading.Event()
    sizes, errors, first, last = [], [], [], [0.0]
    lock = threading.Lock()

    def one(k):
        i = 0
        while not stop.is_set():
            i += 1
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/node-list?x=%d-%d" %
                                            (port, k, i), timeout=60) as r:
                    body = r.read()
                with lock:
                    sizes.append(len(body))
                    last[0] = time.time()
                    if not first:
                        first.append(body.decode())
                        print("answered", flush=True)
            except (OSError, urllib.error.HTTPError) as e:
                errors.append(repr(e))
    threads = [threading.Thread(target=one, args=(k,), daemon=True) for k in range(clients)]
    for t in threads:
        t.start()

    def until_eof():
        sys.stdin.read()
        stop.set()
    threading.Thread(target=until_eof, daemon=True).start()
    stop.wait(seconds)
    stop.set()
    for t in threads:
        t.join(60)
    with lock:
        print(json.dumps({"sizes": sizes, "errors": errors, "first": first[0] if first else "",
                          "last": last[0]}))


if __name__ == "__main__":
    what, args = sys.argv[1], [float(a) if "." in a else int(a) for a in sys.argv[2:]]
    {"probe": probe, "held-probe": held_probe, "slowloris": slowloris,
     "hammer": hammer}[what](*args)
