#!/usr/bin/python3
"""One prefix per layer (issue 19, STYLE.md "Prefixes"): rename the
identifiers a layer declares with a retired prefix to the layer's one.

    python3 mk/rename-prefixes.py [--check] [--drivers] [--root DIR]

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

--drivers: instead, give the names a split driver's files share through
its private header the driver's prefix: every function and variable
declared in drivers/aws/aws_int.h without `aws_` gets it (lraw ->
aws_lraw), likewise `os_` for drivers/openstack/os_int.h (call_new ->
os_call_new). The splits of issue 19 kept the names aws.c and
openstack.c had as statics, so that other branches' hunks could be
ported onto the new files; run this once they are, since those names are
global in libdrivers.a now. Only the driver's own folder is rewritten (a
private header is included from there only: mk/layers.py).

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
# --drivers: folder -> (prefix, private header)
DRIVERS = {
    "drivers/aws": ("aws_", "drivers/aws/aws_int.h", {}),
    # os_server_addresses is os_answer.h's decoder, which this wraps
    "drivers/openstack": ("os_", "drivers/openstack/os_int.h",
                          {"server_addresses": "os_adapter_server_addresses"}),
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

    if "--drivers" in argv:
        jobs = driver_jobs(csrc, texts)
    else:
        jobs = [(tree, layer_renames(csrc, texts, words), set(csrc), set())]
    bad = []
    for files, (renames, declared_all), memfiles, calls in jobs:
        bad += refusals(renames, declared_all, words, memfiles, calls)
    if bad:
        for b in bad:
            print("rename-prefixes: " + b, file=sys.stderr)
        return 1
    if not any(r for _, (r, _), _, _ in jobs):
        print("rename-prefixes: nothing to rename")
        return 0
    if check:
        for _, (renames, _), _, _ in jobs:
            for old, new in sorted(renames.items()):
                print("%s -> %s" % (old, new))
        return 1
    n = changed = 0
    for files, (renames, _), _, calls in jobs:
        n += len(renames)
        changed += apply(files, texts, renames, calls)
    print("rename-prefixes: %d identifiers renamed in %d files" % (n, changed))
    return 0


def layer_renames(csrc, texts, words):
    """The layers' retired prefixes: {old: new}, and every name declared."""
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
    return renames, declared_all


def driver_jobs(csrc, texts):
    """--drivers: per folder, (its files, ({old: new}, declared), its C
    files, the names renamed only where called: a function that a struct
    member of the folder is also named after, as aws's image_key)."""
    jobs = []
    members = None
    for folder, (prefix, header, special) in DRIVERS.items():
        own = [f for f in csrc if os.path.dirname(f) == folder]
        if header not in own:
            continue
        shared = {n for n, k, p in ctags([header], "px")}
        if members is None:  # anyone's: the adapter's ops slots too
            members = {n for n, k, p in ctags(csrc, "m")}
        renames = {n: special.get(n, prefix + n) for n in shared
                   if not n.startswith(prefix) and not n.isupper()}
        calls = {n for n in renames if n in members}
        # a use left with the old name of a shared name renamed already
        # (a member named so is not one: the adapter's azs and os_azs, the
        # adapter slot create_machine and aws_create_machine)
        fw = set()
        for f in own:
            fw.update(re.findall(r"\b\w+\b", texts[f]))
        for w in fw:
            if not w.startswith(prefix) and prefix + w in shared and w not in members:
                renames[w] = prefix + w
            elif special.get(w) in shared:
                renames[w] = special[w]
        # a new name may be in use already only as the header's (a re-run)
        jobs.append((own, (renames, shared), set(own), calls))
    return jobs


def refusals(renames, declared_all, words, memfiles, calls):
    """Why renames may not be made: collisions, struct members."""
    members = {n for n, k, p in ctags(sorted(memfiles), "m")} if renames else set()
    bad = []
    targets = {}
    for old, new in sorted(renames.items()):
        if new in words and new not in renames and new not in declared_all:
            bad.append("%s -> %s: %s is already used" % (old, new, new))
        if new in targets:
            bad.append("%s and %s would both become %s" % (targets[new], old, new))
        targets[new] = old
        if old in members and old not in calls:
            bad.append("%s is also a struct member somewhere" % old)
    return bad


def apply(files, texts, renames, calls):
    """Rename in files (whole words, not after . or ->; those in calls only
    before a '('); the number of files changed."""
    if not renames:
        return 0
    pats = []
    # names sorted longest first so that the alternation prefers whole
    # identifiers (\b makes it exact anyway)
    for names, tail in ((set(renames) - calls, r"\b"), (calls, r"\b(?=\s*\()")):
        if names:
            alt = "|".join(sorted(map(re.escape, names), key=len, reverse=True))
            pats.append(re.compile(r"(?<![\w.])(?<!->)(" + alt + r")" + tail))
    changed = 0
    for f in files:
        t = nt = texts[f]
        for pat in pats:
            nt = pat.sub(lambda m: renames[m.group(1)], nt)
        if nt != t:
            with open(f, "w", encoding="utf-8", errors="surrogateescape") as fh:
                fh.write(nt)
            changed += 1
    return changed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
