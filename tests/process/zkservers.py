"""Dedicated ZooKeeper servers for tests that stop, restart or kill them
(the session-wide one of tests/zkfixture.sh must stay up for the others):
one standalone server, or a three-server ensemble on loopback. Debian's
zookeeper package, run as tests/zkfixture.sh runs it: a plain client port
for the four-letter words and a TLS client port (the fixture's server
certificate and CA) for nodepoold and kazoo. Each server is stopped by the
pid we started."""
import os
import signal
import socket
import subprocess
import time

from conftest import free_port, wait_for

CLASSPATH = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar:/usr/share/java/netty-codec.jar"


def four_letters(port, cmd, timeout=1.0):
    """The server's answer to a four-letter word on its plain port, or ''."""
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout)
    except OSError:
        return ""
    try:
        s.settimeout(timeout)
        s.sendall(cmd.encode())
        out = b""
        while True:
            d = s.recv(4096)
            if not d:
                break
            out += d
        return out.decode("utf-8", "replace")
    except OSError:
        return ""
    finally:
        s.close()


class ZkServer:
    """One server: standalone, or member myid of an ensemble (peers: the
    "server.N=..." lines). Data survives restarts (same dataDir)."""

    def __init__(self, root, certs, myid=None, peers=None):
        self.dir = os.path.join(root, "zk%s" % (myid or ""))
        self.data = os.path.join(self.dir, "data")
        os.makedirs(self.data, exist_ok=True)
        self.plain = free_port()
        self.tls = free_port()
        self.myid = myid
        self.peers = peers or []
        self.certs = certs
        self.proc = None
        self.log = None

    def write(self):
        c = self.certs
        lines = [
            "tickTime=500", "initLimit=10", "syncLimit=5",
            "minSessionTimeout=1000", "maxSessionTimeout=60000",
            "dataDir=%s" % self.data,
            "clientPortAddress=127.0.0.1", "clientPort=%d" % self.plain,
            "secureClientPortAddress=127.0.0.1", "secureClientPort=%d" % self.tls,
            "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
            "ssl.keyStore.location=%s" % os.path.join(c, "server-bundle.pem"),
            "ssl.keyStore.type=PEM",
            "ssl.trustStore.location=%s" % os.path.join(c, "ca.pem"),
            "ssl.trustStore.type=PEM",
            "admin.enableServer=false", "4lw.commands.whitelist=*",
        ] + self.peers
        with open(os.path.join(self.dir, "zoo.cfg"), "w") as f:
            f.write("\n".join(lines) + "\n")
        with open(os.path.join(self.dir, "log4j.properties"), "w") as f:
            f.write("log4j.rootLogger=WARN, F\n"
                    "log4j.appender.F=org.apache.log4j.FileAppender\n"
                    "log4j.appender.F.File=%s/zookeeper.log\n"
                    "log4j.appender.F.layout=org.apache.log4j.PatternLayout\n"
                    "log4j.appender.F.layout.ConversionPattern=%%d %%p %%c{1}: %%m%%n\n"
                    % self.dir)
        if self.myid is not None:
            with open(os.path.join(self.data, "myid"), "w") as f:
                f.write("%d\n" % self.myid)

    def start(self):
        main = ("org.apache.zookeeper.server.quorum.QuorumPeerMain" if self.myid
                else "org.apache.zookeeper.server.ZooKeeperServerMain")
        self.log = open(os.path.join(self.dir, "zookeeper.out"), "ab")
        self.proc = subprocess.Popen(
            ["java", "-Xmx192m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             "-cp", CLASSPATH,
             "-Dzookeeper.log.dir=%s" % self.dir,
             "-Dlog4j.configuration=file:%s/log4j.properties" % self.dir,
             "-Dlogback.configurationFile=/nonexistent",
             main, os.path.join(self.dir, "zoo.cfg")],
            stdout=self.log, stderr=subprocess.STDOUT)

    def listening(self):
        """Whether the TLS client port is in LISTEN state, read from
        /proc/net/tcp rather than by connecting: a probe's connection (let
        alone a TLS handshake) would warm the starting JVM up and hide what
        the first real client pays."""
        want = ":%04X" % self.tls
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):  # the JVM listens on tcp6
            try:
                with open(table) as f:
                    for line in f:
                        cols = line.split()
                        if len(cols) > 3 and cols[1].endswith(want) and cols[3] == "0A":
                            return True
            except OSError:
                pass
        return False

    def mode(self):
        """'standalone', 'leader', 'follower', or None while not serving."""
        out = four_letters(self.plain, "srvr")
        for line in out.splitlines():
            if line.startswith("Mode: "):
                return line[6:].strip()
        return None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM):
        if self.alive():
            self.proc.send_signal(sig)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.log is not None:
            self.log.close()
            self.log = None

    def kill(self):
        self.stop(signal.SIGKILL)

    def hostport(self):
        return "127.0.0.1:%d" % self.tls


class Standalone:
    """One standalone server. After start(): t_listen, when its TLS port
    began to listen (sampled every 5 ms), and t_serving, when srvr on its
    plain port first said standalone (sampled every 20 ms)."""

    def __init__(self, root, certs):
        self.server = ZkServer(root, certs)
        self.server.write()
        self.t_listen = self.t_serving = None

    def start(self, timeout=60):
        self.t_listen = self.t_serving = None
        self.server.start()
        deadline = time.time() + timeout
        n = 0
        while self.t_serving is None:
            if time.time() > deadline:
                raise AssertionError("timed out waiting for standalone ZooKeeper serving")
            if self.t_listen is None and self.server.listening():
                self.t_listen = time.time()
            if n % 4 == 0 and self.server.mode() == "standalone":
                self.t_serving = time.time()
                if self.t_listen is None:
                    self.t_listen = self.t_serving
            n += 1
            time.sleep(0.005)

    def restart(self, down=0.0, timeout=60):
        """Stop the server (SIGTERM), stay down `down` seconds, start it
        again on the same data directory and ports. Returns (time it went
        down, time it serves again)."""
        self.server.stop()
        t_down = time.time()
        time.sleep(down)
        self.start(timeout)
        return t_down, self.t_serving

    def servers(self):
        return [self.server]

    def stop(self):
        self.server.stop()


class Ensemble:
    def __init__(self, root, certs, n=3):
        qports = [(free_port(), free_port()) for _ in range(n)]
        peers = ["server.%d=127.0.0.1:%d:%d" % (i + 1, q, e) for i, (q, e) in enumerate(qports)]
        self.members = [ZkServer(root, certs, myid=i + 1, peers=peers) for i in range(n)]
        for m in self.members:
            m.write()

    def start(self, timeout=90):
        for m in self.members:
            m.start()
        self.wait_quorum(timeout)

    def wait_quorum(self, timeout=60, members=None):
        members = members or [m for m in self.members if m.alive()]

        def ok():
            modes = [m.mode() for m in members]
            return modes.count("leader") == 1 and modes.count("follower") == len(modes) - 1
        wait_for(ok, timeout, interval=0.05, what="ensemble quorum")

    def leader(self):
        for m in self.members:
            if m.alive() and m.mode() == "leader":
                return m
        return None

    def servers(self):
        return self.members

    def stop(self):
        for m in self.members:
            m.stop()
