#!/usr/bin/python3
"""Play the other side of an interoperability test with Debian's kazoo.

Usage: kazoo_helper.py HOSTS   (e.g. 127.0.0.1:2181/t-123-1)

Reads one JSON array per line on stdin, answers one JSON object per line on
stdout ({"ok": true, ...} or {"ok": false, "error": "..."}):

  ["lock", path, identifier, blocking, timeout]  kazoo Lock.acquire()
        -> {"ok": true, "acquired": bool}  (timeout null: wait forever)
  ["release", path]                             Lock.release()
  ["contenders", path]                          Lock.contenders()
        -> {"ok": true, "contenders": [str, ...]}
  ["write", path, hexbytes]                     create (makepath) or set
  ["read", path]                                -> {"ok": true, "hex": hexbytes}
  ["quit"]

Bytes travel hex-encoded so that any byte survives the pipe.
Only for tests/unit/test_zk_kazoo.c; run with /usr/bin/python3.
"""
import json
import logging
import sys

from kazoo.client import KazooClient
from kazoo.exceptions import LockTimeout, NodeExistsError


def main():
    logging.basicConfig(level=logging.ERROR)
    zk = KazooClient(hosts=sys.argv[1], timeout=10)
    zk.start(timeout=15)
    locks = {}
    print(json.dumps({"ok": True, "ready": True}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        try:
            out = {"ok": True}
            if cmd[0] == "lock":
                _, path, ident, blocking, timeout = cmd
                lock = locks.get(path) or zk.Lock(path, ident)
                locks[path] = lock
                try:
                    out["acquired"] = lock.acquire(blocking=blocking, timeout=timeout)
                except LockTimeout:
                    out["acquired"] = False
            elif cmd[0] == "release":
                out["released"] = locks[cmd[1]].release()
            elif cmd[0] == "contenders":
                out["contenders"] = zk.Lock(cmd[1]).contenders()
            elif cmd[0] == "write":
                data = bytes.fromhex(cmd[2])
                try:
                    zk.create(cmd[1], data, makepath=True)
                except NodeExistsError:
                    zk.set(cmd[1], data)
            elif cmd[0] == "read":
                data, _ = zk.get(cmd[1])
                out["hex"] = data.hex()
            elif cmd[0] == "quit":
                break
            else:
                out = {"ok": False, "error": "unknown command %r" % cmd[0]}
        except Exception as e:  # report, keep serving
            out = {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
        print(json.dumps(out), flush=True)
    zk.stop()
    zk.close()


if __name__ == "__main__":
    main()
