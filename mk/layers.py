#!/usr/bin/python3
"""The layering check behind `make check`: fails when a file includes across
a forbidden boundary, so the layers README.md and STYLE.md describe stay true.

    python3 mk/layers.py [--root DIR]

Reads every .c and .h below lib/, protocol/, drivers/ and the programs'
folders (supervisor/, worker/, web/, builder/, cli/), resolves each
`#include "..."` as the compiler does (the including file's folder, then the
tree's root, then the legacy per-folder include path), and prints one line
per forbidden include:

    lib/zk/zk.c:12: includes drivers/driver.h: lib/ must not include drivers/

The rules, from the bottom up:
  protocol/   pure encode/decode: includes only protocol/ and lib/core/,
              and not lib/core/log.h (it returns errors; callers log)
  lib/core/   includes only lib/core/ and protocol/
  lib/*/      shared code: nothing from drivers/ or a program
              (supervisor/, worker/, web/, builder/, cli/); only lib/ops/
              (the operator interfaces, on top) includes lib/ops/
  drivers/    nothing from a program (a driver sees its host only through
              drivers/driver.h and host.h)
  programs    drivers/ only through its interface (drivers/*.h), never a
              driver's own folder
  anywhere    a folder's private header (*_private.h, *_int.h) only from
              its own folder
Tests, benchmarks and fuzz targets are not checked: they test the insides.

Known exceptions, each with the issue that removes it, are listed in
EXCEPTIONS below; an exception that no longer occurs is reported too, so the
list shrinks with the code. Exit status: 0 clean, 1 forbidden includes (or a
stale exception), 2 usage. Python 3 standard library only.
"""
import os
import re
import sys

PROGRAMS = ("supervisor", "worker", "web", "builder", "cli")
CHECKED = ("lib", "protocol", "drivers") + PROGRAMS

# (including file, included file): why it is still there.
EXCEPTIONS = {
    ("builder/builder.c", "drivers/openstack/os_cloud.h"):
        "the builder reads clouds.yaml for image uploads; the images issue "
        "moves that behind the driver interface",
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def top(path):
    return path.split("/", 1)[0]


def rule(src, dst):
    """Why src may not include dst, or None when it may."""
    s, d = top(src), top(dst)
    base = os.path.basename(dst)
    if (base.endswith("_private.h") or base.endswith("_int.h")) and \
            os.path.dirname(src) != os.path.dirname(dst):
        return "%s is private to %s/" % (dst, os.path.dirname(dst))
    if s == "protocol":
        if d != "protocol" and not dst.startswith("lib/core/"):
            return "protocol/ includes only protocol/ and lib/core/"
        if dst == "lib/core/log.h":
            return "protocol/ does no logging (return the error; callers log)"
    elif s == "lib":
        if d == "drivers" or d in PROGRAMS:
            return "lib/ must not include %s/" % d
        sub = src.split("/")[1] if src.count("/") > 1 else ""
        if sub == "core" and not (dst.startswith("lib/core/") or d == "protocol"):
            return "lib/core/ includes only lib/core/ and protocol/"
        if sub != "ops" and dst.startswith("lib/ops/"):
            return "lib/%s/ must not include lib/ops/ (the layer above it)" % sub
    elif s == "drivers":
        if d in PROGRAMS:
            return "drivers/ must not include %s/" % d
    elif s in PROGRAMS:
        if d == "drivers" and dst.count("/") > 1:
            return "%s/ uses drivers/ only through drivers/*.h, not a " \
                "driver's own folder" % s
    return None


def legacy_dirs(root):
    """The include path before it was reduced to the root: lib/*/,
    protocol/, drivers/ (bare names such as "zk.h" resolve there)."""
    out = []
    lib = os.path.join(root, "lib")
    if os.path.isdir(lib):
        out += sorted("lib/" + d for d in os.listdir(lib)
                      if os.path.isdir(os.path.join(lib, d)))
    return out + ["protocol", "drivers"]


def resolve(root, src, name, legacy):
    """The included file as a path from the root, or None (not ours)."""
    cands = [os.path.join(os.path.dirname(src), name), name]
    cands += [os.path.join(d, name) for d in legacy]
    for c in cands:
        c = os.path.normpath(c)
        if not c.startswith("..") and os.path.isfile(os.path.join(root, c)):
            return c
    return None


def sources(root):
    for folder in CHECKED:
        base = os.path.join(root, folder)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames.sort()
            for f in sorted(filenames):
                if f.endswith((".c", ".h")):
                    yield os.path.relpath(os.path.join(dirpath, f), root)


def check(root):
    """(violations, stale exceptions): lists of printable lines."""
    legacy = legacy_dirs(root)
    bad, used = [], set()
    for src in sources(root):
        with open(os.path.join(root, src), encoding="utf-8",
                  errors="replace") as f:
            for n, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                dst = resolve(root, src, m.group(1), legacy)
                if dst is None:
                    continue
                why = rule(src, dst)
                if why is None:
                    continue
                if (src, dst) in EXCEPTIONS:
                    used.add((src, dst))
                    continue
                bad.append("%s:%d: includes %s: %s" % (src, n, dst, why))
    stale = ["known exception no longer found: %s includes %s (%s)"
             % (s, d, w) for (s, d), w in sorted(EXCEPTIONS.items())
             if (s, d) not in used
             and os.path.exists(os.path.join(root, s))]
    return bad, stale


def main(argv):
    root = "."
    args = argv[1:]
    while args:
        a = args.pop(0)
        if a == "--root" and args:
            root = args.pop(0)
        else:
            print("usage: layers.py [--root DIR]", file=sys.stderr)
            return 2
    bad, stale = check(root)
    for line in bad + stale:
        print(line)
    if bad or stale:
        print("layers: %d forbidden include(s), %d stale exception(s)"
              % (len(bad), len(stale)))
        return 1
    print("layers: every include keeps to its layer (%d known exception(s))"
          % len(EXCEPTIONS))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
