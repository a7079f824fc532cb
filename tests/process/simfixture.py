"""What the cloud simulators' process-test fixtures (ossim_fixture,
kubesim_fixture, awssim_fixture) share: start a simulator under
tests/sim/<cloud> on free loopback ports (port 0; the bound ports read back
from its ready-file), drive it through its control API, stop exactly the
process started (by pid).

A subclass names its simulator and may add command-line arguments:

    class FooSim(SimFixture):
        NAME = "foosim"                       # DIR/<NAME>.log, error messages
        SIM_DIR = os.path.join(TOP, "tests", "sim", "foo")
        START_TIMEOUT = 20                    # seconds start() waits by default
        def extra_args(self): return ["--data-dir", ...]

    sim = FooSim(tmp_path, {"config": ...}).start()
    sim.info                                  # the ready-file's JSON
    sim.ctl("GET", "/state", region="x")      # control API, JSON in and out
    sim.stop()
"""
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class SimFixture:
    NAME = None           # the simulator's name: log file and messages
    SIM_DIR = None        # its package directory (run as `python3 SIM_DIR`)
    START_TIMEOUT = 20    # seconds
    LOG_MODE = "wb"       # "ab" keeps the log of earlier starts in the same dir
    CTL_ERROR = AssertionError   # raised for a control API error status
    CTL_PREFIX = "control"       # that error's message prefix

    def __init__(self, workdir, config=None, name=None):
        """The simulator's files go to workdir/name (default NAME):
        config.json (config, a dict), ready.json and NAME.log."""
        self.dir = os.path.join(str(workdir), name or self.NAME)
        os.makedirs(self.dir, exist_ok=True)
        self.config = config or {}
        self.proc = None
        self.info = None

    def extra_args(self):
        """More command-line arguments for the simulator (a list)."""
        return []

    def start(self, timeout=None):
        """Starts the simulator and waits (timeout seconds, default
        START_TIMEOUT) for its ready-file; self.info is that file's JSON.
        Raises RuntimeError with the simulator's output when it exits or
        does not get ready in time (then it is stopped). Returns self."""
        if timeout is None:
            timeout = self.START_TIMEOUT
        cfgp = os.path.join(self.dir, "config.json")
        with open(cfgp, "w") as f:
            json.dump(self.config, f)
        ready = os.path.join(self.dir, "ready.json")
        if os.path.exists(ready):  # a restart in the same dir: not the old one
            os.unlink(ready)
        args = [sys.executable, self.SIM_DIR, "--config", cfgp, "--ready-file", ready]
        args += self.extra_args()
        self.log = open(os.path.join(self.dir, self.NAME + ".log"), self.LOG_MODE)
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + timeout
        while not os.path.exists(ready):
            if self.proc.poll() is not None:
                self.stop()
                raise RuntimeError("%s exited: %s" % (self.NAME, self.output()))
            if time.time() > deadline:
                self.stop()
                raise RuntimeError("%s did not start: %s" % (self.NAME, self.output()))
            time.sleep(0.02)
        with open(ready) as f:
            self.info = json.load(f)
        self.ready_file = ready
        return self

    @property
    def pid(self):
        return self.proc.pid

    def output(self):
        """Everything the simulator wrote to stdout and stderr so far."""
        if not self.log.closed:
            self.log.flush()
        with open(self.log.name, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self):
        """SIGTERM to the process started (SIGKILL after 10 s); idempotent."""
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()  # by pid: the process we started
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc and not self.log.closed:
            self.log.close()

    def ctl(self, method, path, body=None, **query):
        """One control API call: method, path under info["control"], body
        (JSON-encoded when given), query parameters. Returns the decoded
        JSON answer (None when empty); an error status raises CTL_ERROR."""
        url = self.info["control"] + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                raw = r.read()
        except urllib.error.HTTPError as e:
            raise self.CTL_ERROR("%s %s %s: %s %s" % (self.CTL_PREFIX, method, path,
                                                      e.code, e.read()))
        return json.loads(raw) if raw else None

    def fault(self, **spec):
        """Adds a fault (control API POST /faults); returns its id."""
        return self.ctl("POST", "/faults", spec)["id"]

    def clear_fault(self, fid=None):
        """Removes fault fid, or all faults."""
        self.ctl("DELETE", "/faults" if fid is None else "/faults/%d" % fid)
