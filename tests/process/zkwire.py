"""A ZooKeeper-aware test proxy (issue 27): a conftest.TcpProxy that reads
the client's requests as they pass, so a fault can be aimed at one request
instead of at a moment: the connection is cut just before a given request
reaches the server (the request is lost with the connection), or just
after it did (the server applies it, its reply is lost).

It works on ZooKeeper's plain client port: the framing is the jute wire
format of ZooKeeper's client protocol (a 4-byte big-endian length, then
the record; the first record of a connection is the ConnectRequest, every
later one a RequestHeader {xid, type} and the request's body; replies a
ReplyHeader {xid, zxid, err} and the reply's body). TLS would hide it, so
nodepoold is configured without zookeeper-tls behind this proxy."""
import contextlib
import os
import socket
import struct
import threading
import time

from conftest import TcpProxy

OP_CREATE, OP_DELETE, OP_SETDATA, OP_CHECK, OP_MULTI, OP_CREATE2 = 1, 2, 5, 13, 14, 15
CREATES = (OP_CREATE, OP_CREATE2, 19, 21)


def _string(buf, off):
    """A jute ustring/buffer at off: (bytes or None, next offset)."""
    (n,) = struct.unpack_from(">i", buf, off)
    off += 4
    if n < 0:
        return None, off
    return bytes(buf[off:off + n]), off + n


class Request:
    """One client request as it passed: xid, type, path and data (create
    and setData; None otherwise); a multi's ops (each a Request with the
    multi's xid: create, setData, delete, check) in ops, else []."""

    def __init__(self, xid, op, path, data, ops=()):
        self.xid, self.op, self.path, self.data = xid, op, path, data
        self.ops = list(ops)

    def __repr__(self):
        return "Request(xid=%d op=%d path=%r ops=%r)" % (self.xid, self.op, self.path, self.ops)


def _op_body(xid, op, buf, off):
    """The body of a request of type op at off (jute: CreateRequest,
    SetDataRequest, DeleteRequest, CheckVersionRequest): (Request, next
    offset), or (None, None) for a type not read here."""
    if op in CREATES:
        p, off = _string(buf, off)
        data, off = _string(buf, off)
        (n,) = struct.unpack_from(">i", buf, off)  # the ACL vector
        off += 4
        for _ in range(max(n, 0)):
            off += 4  # perms
            _, off = _string(buf, off)  # scheme
            _, off = _string(buf, off)  # id
        off += 4  # flags
        if op == 21:
            off += 8  # ttl
    elif op == OP_SETDATA:
        p, off = _string(buf, off)
        data, off = _string(buf, off)
        off += 4  # version
    elif op in (OP_DELETE, OP_CHECK):
        p, off = _string(buf, off)
        data = None
        off += 4  # version
    else:
        return None, None
    path = p.decode("utf-8", "replace") if p is not None else None
    return Request(xid, op, path, data), off


def parse_request(frame):
    """A request frame (after the length) as a Request; a multi's ops are
    read as far as their types are known here (MultiTransactionRecord:
    each op a MultiHeader {type, done, err} and its body, ended by a
    header with done set)."""
    xid, op = struct.unpack_from(">ii", frame, 0)
    if op == OP_MULTI:
        ops, off = [], 8
        try:
            while off + 9 <= len(frame):
                t, done, _err = struct.unpack_from(">i?i", frame, off)
                off += 9
                if done:
                    break
                sub, off = _op_body(xid, t, frame, off)
                if sub is None:
                    break
                ops.append(sub)
        except struct.error:
            pass
        return Request(xid, op, None, None, ops)
    if op in CREATES or op == OP_SETDATA:
        req, _ = _op_body(xid, op, frame, 8)
        return req
    return Request(xid, op, None, None)


STAT_LEN = 68  # jute Stat: czxid mzxid ctime mtime version cversion aversion owner len children pzxid


def parse_multi_reply(frame, off):
    """The paths a MultiResponse (after its ReplyHeader, at off) names
    for its creates: each result a MultiHeader {type, done, err} and its
    body (create: the path; create2: the path and a Stat; setData: a Stat;
    delete, check: nothing; error: an int), ended by a header with done
    set."""
    paths = []
    try:
        while off + 9 <= len(frame):
            t, done, _err = struct.unpack_from(">i?i", frame, off)
            off += 9
            if done:
                break
            if t in (OP_CREATE, 19):
                p, off = _string(frame, off)
                paths.append(p.decode() if p is not None else None)
            elif t in (OP_CREATE2, 21):
                p, off = _string(frame, off)
                paths.append(p.decode() if p is not None else None)
                off += STAT_LEN
            elif t == OP_SETDATA:
                off += STAT_LEN
            elif t == -1:
                off += 4
    except struct.error:
        pass
    return paths


class ZkWireProxy(TcpProxy):
    """TcpProxy plus aim(pred, lose): the first client request for which
    pred(Request) is true (for the request, or for one of a multi's ops)
    triggers a partition (or, lose="hook", a call of hook(Request) in the
    proxy's thread before the request is passed on, nothing cut: a peer's
    write made just before it reaches the server). lose="request": the
    request is not passed on, every connection is closed and new ones are
    refused (as cut()). lose="reply": the request is passed on, nothing
    more goes either way, and the connections are closed once the server
    has had time to apply it (settle seconds), new ones refused. restore()
    ends the partition as for cut(). fired (an Event) is set when it
    happened, hit holds the request, created the path a create's reply
    named (lose="reply": read from the reply the client never got; for a
    multi, created_all the paths of its creates)."""

    def __init__(self, target_host, target_port):
        super().__init__(target_host, target_port)
        self.pred = None
        self.lose = None
        self.settle = 0.5
        self.fired = threading.Event()
        self.hit = None
        self.created = None
        self.created_all = []
        self.hook = None
        self.mute = False  # nothing passes either way (the reply is being lost)

    def aim(self, pred, lose="request", settle=0.5, hook=None):
        self.fired.clear()
        self.hit = self.created = None
        self.created_all = []
        self.lose = lose
        self.settle = settle
        self.hook = hook
        self.pred = pred

    def _accept(self):
        while not self.stopped:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            if self.cut_now or self.mute:
                c.close()
                continue
            try:
                u = socket.create_connection(self.target, 5)
            except OSError:
                c.close()
                continue
            for s in (c, u):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                self.conns += [c, u]
            threading.Thread(target=self._requests, args=(c, u), daemon=True).start()
            threading.Thread(target=self._replies, args=(u, c), daemon=True).start()

    @staticmethod
    def _frames(buf):
        """Complete frames at the start of buf: (list, bytes used)."""
        out, off = [], 0
        while len(buf) - off >= 4:
            (n,) = struct.unpack_from(">i", buf, off)
            if n < 0 or len(buf) - off - 4 < n:
                break
            out.append((off, bytes(buf[off + 4:off + 4 + n])))
            off += 4 + n
        return out, off

    def _close(self, *socks):
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass

    def _requests(self, a, b):
        """Client -> server, frame by frame, watching for the aimed one."""
        buf = bytearray()
        first = True
        keep = False  # a reply being lost: the sockets stay until _lose_reply
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                if self.mute:
                    return
                buf += d
                frames, used = self._frames(buf)
                for off, frame in frames:
                    if first:
                        first = False  # the ConnectRequest
                        b.sendall(struct.pack(">i", len(frame)) + frame)
                        continue
                    pred = self.pred
                    req = parse_request(frame) if pred is not None and len(frame) >= 8 else None
                    if req is not None and (pred(req) or any(pred(o) for o in req.ops)):
                        self.pred = None
                        self.hit = req
                        if self.lose == "hook":
                            self.hook(req)
                            self.fired.set()
                            b.sendall(struct.pack(">i", len(frame)) + frame)
                            continue
                        if self.lose == "request":
                            self.cut()
                            self.fired.set()
                            return
                        self.mute = True
                        b.sendall(struct.pack(">i", len(frame)) + frame)
                        keep = True
                        threading.Thread(target=self._lose_reply, daemon=True).start()
                        return
                    b.sendall(struct.pack(">i", len(frame)) + frame)
                del buf[:used]
        except OSError:
            pass
        finally:
            if not keep:
                self._close(a, b)

    def _replies(self, a, b):
        """Server -> client, frame by frame; while muted, replies are read
        (for the path a lost create named) and dropped."""
        buf = bytearray()
        first = True
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                buf += d
                frames, used = self._frames(buf)
                del buf[:used]
                for _, frame in frames:
                    if first:
                        first = False  # the ConnectResponse
                    elif self.mute:
                        hit = self.hit
                        if hit is None or len(frame) < 16:
                            continue
                        xid, _zxid, err = struct.unpack_from(">iqi", frame, 0)
                        if xid == hit.xid and err == 0 and hit.op in CREATES:
                            p, _ = _string(frame, 16)
                            self.created = p.decode() if p is not None else None
                        elif xid == hit.xid and err == 0 and hit.op == OP_MULTI:
                            self.created_all = parse_multi_reply(frame, 16)
                        continue
                    b.sendall(struct.pack(">i", len(frame)) + frame)
        except OSError:
            pass
        finally:
            self._close(a, b)

    def _lose_reply(self):
        time.sleep(self.settle)
        self.cut()
        self.mute = False
        self.fired.set()

    def restore(self):
        self.mute = False
        super().restore()


@contextlib.contextmanager
def wire_proxy():
    """A ZkWireProxy in front of the test ZooKeeper's plain port
    (NP_TEST_ZK, set by conftest's zk_server), closed at the end."""
    hp = os.environ.get("NP_TEST_ZK")
    assert hp, "NP_TEST_ZK (the test ZooKeeper's plain port) is not set"
    host, port = hp.rsplit(":", 1)
    p = ZkWireProxy(host, int(port))
    try:
        yield p
    finally:
        p.close()
