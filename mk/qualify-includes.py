#!/usr/bin/python3
"""Rewrites the tree's own includes to the path from the tree's root.

    python3 mk/qualify-includes.py [--root DIR] [--check]

Every `#include "NAME"` in a .c or .h file of the tree (lib/, protocol/,
drivers/, the programs, tests/ with the fuzz targets and tests/support,
bench/) that names a file of the tree becomes `#include "PATH"`, PATH being
that file's path from the root: "zk.h" -> "lib/zk/zk.h", "driver.h" ->
"drivers/driver.h", "../../drivers/aws/aws_api.c" (a fuzz target that
compiles a driver's source into itself) -> "drivers/aws/aws_api.c". NAME is
resolved as the compiler resolved it before: the including file's folder,
then the root, then the folders that were on the include path (lib/*/,
protocol/, drivers/, and tests/support/ for tests). An include that names no
file of the tree (the ZooKeeper client's, a system header in quotes) is left
as it is. The Makefile's include path is reduced to match: the root and the
ZooKeeper client only (the INCLUDES line).

Idempotent: a path from the root resolves to itself, so a second run changes
nothing. It touches nothing but those include lines and that Makefile line,
so its result can be dropped and the script run again on a merged tree.
--check changes nothing and exits 1 when something would change (listing
the files). Python 3 standard library only.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^(\s*#\s*include\s+)"([^"]+)"(.*)$')
SKIP_DIRS = {".git", "node_modules"}

OLD_MAKE = re.compile(
    r"# lib/ has one folder per subsystem; each is on the include path, so a\n"
    r"# header is included by its name alone \(\"zk\.h\", \"config\.h\"\)\.\n"
    r"LIB_DIRS := \$\(sort \$\(dir \$\(wildcard lib/\*/\*\.h\)\)\)\n"
    r"INCLUDES := -I\. \$\(addprefix -I,\$\(LIB_DIRS\)\) -Iprotocol -Idrivers "
    r"-I\$\(ZKC\)/include\n")
NEW_MAKE = (
    "# The include path is the tree's root (and the ZooKeeper client): an\n"
    "# include names its header from the root (\"lib/zk/zk.h\",\n"
    "# \"drivers/driver.h\"), so the layer it comes from shows; mk/layers.py\n"
    "# checks the layers, mk/qualify-includes.py writes such includes.\n"
    "INCLUDES := -I. -I$(ZKC)/include\n")


def sources(root):
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        dirnames[:] = sorted(
            d for d in dirnames
            if d not in SKIP_DIRS
            and not (rel == "." and (d == "build" or d.startswith("build-"))))
        for f in sorted(filenames):
            if f.endswith((".c", ".h")):
                yield os.path.normpath(os.path.join(rel, f))


def search_dirs(root):
    """The folders that were on the include path, after the file's own
    folder and the root."""
    out = []
    lib = os.path.join(root, "lib")
    if os.path.isdir(lib):
        out += sorted("lib/" + d for d in os.listdir(lib)
                      if os.path.isdir(os.path.join(lib, d)))
    return out + ["protocol", "drivers", "tests/support"]


def resolve(root, src, name, dirs):
    for c in [os.path.join(os.path.dirname(src), name), name] + \
            [os.path.join(d, name) for d in dirs]:
        c = os.path.normpath(c)
        if not c.startswith("..") and os.path.isfile(os.path.join(root, c)):
            return c
    return None


def qualify_file(root, src, dirs):
    """The file's new text, or None when nothing changes."""
    path = os.path.join(root, src)
    with open(path, encoding="utf-8", newline="") as f:
        text = f.read()
    out, changed = [], False
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        m = INCLUDE.match(body)
        if m:
            dst = resolve(root, src, m.group(2), dirs)
            if dst is not None and dst != m.group(2):
                line = '%s"%s"%s%s' % (m.group(1), dst, m.group(3), line[len(body):])
                changed = True
        out.append(line)
    return "".join(out) if changed else None


def qualify_makefile(root):
    path = os.path.join(root, "Makefile")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        text = f.read()
    new = OLD_MAKE.sub(lambda m: NEW_MAKE, text)
    return new if new != text else None


def main(argv):
    root, check = ".", False
    args = argv[1:]
    while args:
        a = args.pop(0)
        if a == "--root" and args:
            root = args.pop(0)
        elif a == "--check":
            check = True
        else:
            print("usage: qualify-includes.py [--root DIR] [--check]", file=sys.stderr)
            return 2
    dirs = search_dirs(root)
    changes = {}
    for src in sources(root):
        new = qualify_file(root, src, dirs)
        if new is not None:
            changes[src] = new
    mk = qualify_makefile(root)
    if mk is not None:
        changes["Makefile"] = mk
    if check:
        for src in sorted(changes):
            print("not path-qualified: %s" % src)
        return 1 if changes else 0
    for src, new in sorted(changes.items()):
        with open(os.path.join(root, src), "w", encoding="utf-8", newline="") as f:
            f.write(new)
    print("qualify-includes: %d file(s) rewritten" % len(changes))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
