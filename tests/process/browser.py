"""A headless Chromium driven through chromedriver's WebDriver HTTP API
(W3C WebDriver, https://www.w3.org/TR/webdriver2/), from the standard
library only: Debian's chromium and chromium-driver packages (mk/deps.sh).

    with Browser(out_dir) as b:
        b.get("http://127.0.0.1:8005/")
        b.js("return document.title")
        b.screenshot(path)
        b.console_errors()
"""
import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

from conftest import free_port, wait_for

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")

# what the brief asks of a browser in a test: headless, no sandbox (root in
# a chroot), nothing fetched from the network behind our back, a fresh
# profile
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars"]


def missing():
    """Why no browser test can run here, or None."""
    if CHROMIUM is None:
        return "chromium is not installed (Debian package chromium)"
    if CHROMEDRIVER is None:
        return "chromedriver is not installed (Debian package chromium-driver)"
    return None


class Browser:
    def __init__(self, log_dir, width=1400, height=1800):
        self.log_dir = log_dir
        self.width, self.height = width, height
        self.profile = tempfile.mkdtemp(prefix="chromium-profile.")
        self.port = free_port()
        self.proc = None
        self.sid = None

    def _call(self, method, path, body=None, timeout=60):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path), data=data,
                                     method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return json.loads(r.read().decode() or "{}").get("value")
        except urllib.error.HTTPError as e:
            raise AssertionError("webdriver %s %s: %s" % (method, path, e.read()[:500]))

    def __enter__(self):
        log = open(os.path.join(self.log_dir, "chromedriver.log"), "w")
        self.proc = subprocess.Popen([CHROMEDRIVER, "--port=%d" % self.port],
                                     stdout=log, stderr=subprocess.STDOUT)

        def up():
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/status" % self.port,
                                            timeout=2) as r:
                    return json.loads(r.read())["value"]["ready"]
            except OSError:
                return False
        wait_for(up, timeout=30, what="chromedriver up")
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": FLAGS + ["--user-data-dir=" + self.profile,
                                 "--window-size=%d,%d" % (self.width, self.height)]},
            "goog:loggingPrefs": {"browser": "ALL"}}}}
        self.sid = self._call("POST", "/session", caps)["sessionId"]
        return self

    def __exit__(self, *exc):
        try:
            if self.sid:
                self._call("DELETE", "/session/" + self.sid, timeout=20)
        except Exception:
            pass
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    def get(self, url):
        self._call("POST", "/session/%s/url" % self.sid, {"url": url})

    def js(self, script, *args):
        return self._call("POST", "/session/%s/execute/sync" % self.sid,
                          {"script": script, "args": list(args)})

    def screenshot(self, path):
        """The page as it is drawn, the window resized to the whole page."""
        h = self.js("return Math.ceil(document.documentElement.scrollHeight)") or self.height
        self._call("POST", "/session/%s/window/rect" % self.sid,
                   {"width": self.width, "height": max(int(h) + 20, 400)})
        time.sleep(0.3)
        png = base64.b64decode(self._call("GET", "/session/%s/screenshot" % self.sid))
        with open(path, "wb") as f:
            f.write(png)
        return path

    def console(self):
        """The browser console's entries since the last call."""
        return self._call("POST", "/session/%s/se/log" % self.sid, {"type": "browser"}) or []

    def console_errors(self):
        return [e for e in self.console() if e.get("level") == "SEVERE"]
