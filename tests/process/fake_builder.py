#!/usr/bin/python3
"""A stand-in nodepool-builder for process tests of nodepoold's process
table: it speaks the child side of the IPC protocol on fd 3 (frames: a
4-byte big-endian length, then one msgpack map, protocol/ipc.h) with just
enough msgpack, written here because Debian's python3 has no msgpack
module in this image.

    fake_builder.py OUTDIR --channel 3 [-d]

Writes OUTDIR/argv.json and OUTDIR/config-<gen>.json (the CONFIG it got),
answers CONFIG (CONFIG_ACK), sends READY, answers STATUS_REQ and DUMP_REQ,
exits 0 on STOP or when the channel closes."""
import json
import os
import struct
import sys

FD = 3


def pack(o):
    if o is None:
        return b"\xc0"
    if o is True:
        return b"\xc3"
    if o is False:
        return b"\xc2"
    if isinstance(o, int):
        return b"\xd3" + struct.pack(">q", o)
    if isinstance(o, str):
        b = o.encode()
        return b"\xdb" + struct.pack(">I", len(b)) + b
    if isinstance(o, (list, tuple)):
        return b"\xdd" + struct.pack(">I", len(o)) + b"".join(pack(x) for x in o)
    if isinstance(o, dict):
        return b"\xdf" + struct.pack(">I", len(o)) + b"".join(
            pack(k) + pack(v) for k, v in o.items())
    raise TypeError(type(o))


def unpack(b, i=0):
    """(value, next index)"""
    c = b[i]
    i += 1
    if c <= 0x7f:
        return c, i
    if c >= 0xe0:
        return c - 0x100, i
    if 0x80 <= c <= 0x8f:
        return unpack_map(b, i, c & 0x0f)
    if 0x90 <= c <= 0x9f:
        return unpack_array(b, i, c & 0x0f)
    if 0xa0 <= c <= 0xbf:
        n = c & 0x1f
        return b[i:i + n].decode(), i + n
    if c == 0xc0:
        return None, i
    if c in (0xc2, 0xc3):
        return c == 0xc3, i
    ints = {0xcc: ">B", 0xcd: ">H", 0xce: ">I", 0xcf: ">Q",
            0xd0: ">b", 0xd1: ">h", 0xd2: ">i", 0xd3: ">q", 0xca: ">f", 0xcb: ">d"}
    if c in ints:
        f = ints[c]
        n = struct.calcsize(f)
        return struct.unpack(f, b[i:i + n])[0], i + n
    lens = {0xd9: ">B", 0xda: ">H", 0xdb: ">I", 0xc4: ">B", 0xc5: ">H", 0xc6: ">I"}
    if c in lens:
        f = lens[c]
        h = struct.calcsize(f)
        n = struct.unpack(f, b[i:i + h])[0]
        raw = b[i + h:i + h + n]
        return (raw if c in (0xc4, 0xc5, 0xc6) else raw.decode()), i + h + n
    if c in (0xdc, 0xdd, 0xde, 0xdf):
        f = ">H" if c in (0xdc, 0xde) else ">I"
        h = struct.calcsize(f)
        n = struct.unpack(f, b[i:i + h])[0]
        if c in (0xdc, 0xdd):
            return unpack_array(b, i + h, n)
        return unpack_map(b, i + h, n)
    raise ValueError("msgpack type 0x%02x" % c)


def unpack_array(b, i, n):
    out = []
    for _ in range(n):
        v, i = unpack(b, i)
        out.append(v)
    return out, i


def unpack_map(b, i, n):
    out = {}
    for _ in range(n):
        k, i = unpack(b, i)
        v, i = unpack(b, i)
        out[k] = v
    return out, i


def read_exact(n):
    buf = b""
    while len(buf) < n:
        chunk = os.read(FD, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def send(t, **fields):
    m = {"t": t, "v": 1}
    m.update(fields)
    body = pack(m)
    os.write(FD, struct.pack(">I", len(body)) + body)


def main():
    out = sys.argv[1]
    with open(os.path.join(out, "argv.json"), "w") as f:
        json.dump(sys.argv[2:], f)
    ready = False
    while True:
        hdr = read_exact(4)
        if hdr is None:
            return 0
        body = read_exact(struct.unpack(">I", hdr)[0])
        if body is None:
            return 0
        m, _ = unpack(body)
        t = m["t"]
        if t == "CONFIG":
            with open(os.path.join(out, "config-%d.json" % m["gen"]), "w") as f:
                f.write(m["config"])
            send("CONFIG_ACK", gen=m["gen"], ok=True, errors=[])
            if not ready:
                send("READY", provider="builder", pid=os.getpid(), zk_session=0,
                     version="fake")
                ready = True
        elif t == "STATUS_REQ":
            send("STATUS", seq=m["seq"], gen=0, state="running", zk="connected",
                 accepted=0, fulfilled=0, declined=0, failed=0, launching=0, nodes={},
                 pools=[], error=None, rss_kb=0, cpu_ms=0, uptime_s=0)
        elif t == "DUMP_REQ":
            send("DUMP_REPLY", text="fake builder")
        elif t == "STOP":
            return 0


if __name__ == "__main__":
    sys.exit(main())
