#!/usr/bin/python3
"""One prefix per layer (issue 19, STYLE.md "Prefixes"): rename the
identifiers a layer declares with a retired prefix to the layer's one.

    python3 mk/rename-prefixes.py [--check] [--root DIR]

  lib/config/   np_cfg_:  np_config_X -> np_cfg_X, cfg_X -> np_cfg_X,
                          sc_schema -> np_cfg_schema, sc_X -> np_cfg_schema_X
  worker/       lc_:      launcher_X -> lc_X, handler_X -> lc_handler_X,
                          worker_X -> lc_worker_X, assign_X -> lc_assign_X,
                          cleanup_X -> lc_cleanup_X, minready_X ->
                          lc_minready_X, delete_pass -> lc_delete_pass

Which identifiers: those the layer's own files (lib/config/*.[ch],
worker/*.[ch]) declare at file scope, as Universal Ctags reports them
(functions, prototypes, variables, struct/union/enum tags, enumerators,
typedefs, macros); never struct members or locals, so a field such as
`pool->launcher_id` keeps its name. Each is renamed as a whole word in
every tracked .c, .h and .md file of the tree, except where it follows
`.` or `->` (a member of the same name).

Safe to run again (after merging branches that still use the old names):
it renames only what is left, and does nothing once everything is renamed.
A leftover use of an old name whose declaration is renamed already (a
call merged from an older branch) is renamed too: a word with a retired
prefix whose new name the layer declares.
Before writing anything it refuses (exit 1) when a new name is already
used in the tree (a collision) or when an identifier to rename is also a
struct member somewhere (renaming it would miss the member's accesses).

--check: write nothing; list the renames still to do and exit 1 if any.
Exit status: 0 done (or nothing to do), 1 refused or --check found work,
2 usage or ctags missing. Needs `ctags` (Universal Ctags, Debian
universal-ctags) and git.
"""
import os
import re
import shutil
import subprocess
import sys

# layer folder -> [(old prefix, new prefix)], longest old prefix first;
# an exact name may precede the prefix rules (sc_schema).
RULES = {
    "lib/config": [
        ("np_config_", "np_cfg_"),
        ("cfg_", "np_cfg_"),
        ("=sc_schema", "np_cfg_schema"),
        ("sc_", "np_cfg_schema_"),
    ],
    "worker": [
        ("launcher_", "lc_"),
        ("handler_", "lc_handler_"),
        ("worker_", "lc_worker_"),
        ("assign_", "lc_assign_"),
        ("cleanup_", "lc_cleanup_"),
        ("minready_", "lc_minready_"),
        ("=delete_pass", "lc_delete_pass"),
    ],
}
# ctags kinds: macro, enumerator, function, enum, prototype, struct,
# typedef, union, variable, extern variable (not member m, local l)
KINDS = "defgpstuvx"
EXTS = (".c", ".h", ".md")


def new_name(name, rules):
    for old, new in rules:
        if old.startswith("="):
            if name == old[1:]:
                return new
        elif name.startswith(old) and len(name) > len(old):
            return new + name[len(old):]
    return None


def ctags(files, kinds):
    out = subprocess.run(
        ["ctags", "-x", "--languages=C", "--language-force=C",
         "--c-kinds=" + kinds, "--_xformat=%N\t%K\t%F"] + files,
        capture_output=True, text=True, check=True).stdout
    return [line.split("\t") for line in out.splitlines() if line.count("\t") == 2]


def main(argv):
    check = "--check" in argv
    root = "."
    if "--root" in argv:
        i = argv.index("--root")
        if i + 1 >= len(argv):
            print("usage: rename-prefixes.py [--check] [--root DIR]", file=sys.stderr)
            return 2
        root = argv[i + 1]
    if shutil.which("ctags") is None:
        print("rename-prefixes: ctags (Universal Ctags) is needed", file=sys.stderr)
        return 2
    os.chdir(root)
    tracked = subprocess.run(["git", "ls-files"], capture_output=True, text=True,
                             check=True).stdout.split()
    tree = [f for f in tracked if f.endswith(EXTS) and os.path.isfile(f)]
    csrc = [f for f in tree if f.endswith((".c", ".h"))]

    texts = {f: open(f, encoding="utf-8", errors="surrogateescape").read() for f in tree}
    words = set()  # in code: the docs may name the new names already
    for f in csrc:
        words.update(re.findall(r"\b\w+\b", texts[f]))

    renames = {}
    declared_all = set()
    for layer, rules in RULES.items():
        own = [f for f in csrc if os.path.dirname(f) == layer]
        declared = set()
        for name, kind, path in ctags(own, KINDS):
            declared.add(name)
            declared_all.add(name)
            nn = new_name(name, rules)
            if nn is not None:
                renames[name] = nn
        # a use left with the old name (code merged from a branch made
        # before the rename) of something now declared with the new one
        for w in words:
            nn = new_name(w, rules)
            if nn is not None and nn in declared:
                renames[w] = nn
    if not renames:
        print("rename-prefixes: nothing to rename")
        return 0
    members = {n for n, k, p in ctags(csrc, "m")}
    bad = []
    targets = {}
    for old, new in sorted(renames.items()):
        if new in words and new not in renames and new not in declared_all:
            bad.append("%s -> %s: %s is already used" % (old, new, new))
        if new in targets:
            bad.append("%s and %s would both become %s" % (targets[new], old, new))
        targets[new] = old
        if old in members:
            bad.append("%s is also a struct member somewhere" % old)
    if bad:
        for b in bad:
            print("rename-prefixes: " + b, file=sys.stderr)
        return 1
    if check:
        for old, new in sorted(renames.items()):
            print("%s -> %s" % (old, new))
        return 1

    # one pass over each file; names sorted longest first so that the
    # alternation prefers whole identifiers (\b makes it exact anyway)
    alt = "|".join(sorted(map(re.escape, renames), key=len, reverse=True))
    pat = re.compile(r"(?<![\w.])(?<!->)(" + alt + r")\b")
    changed = 0
    for f, t in texts.items():
        nt = pat.sub(lambda m: renames[m.group(1)], t)
        if nt != t:
            with open(f, "w", encoding="utf-8", errors="surrogateescape") as fh:
                fh.write(nt)
            changed += 1
    print("rename-prefixes: %d identifiers renamed in %d files" % (len(renames), changed))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
