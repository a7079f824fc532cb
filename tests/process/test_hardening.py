"""Build hardening (Makefile HARDEN_*, mk/zkclient.sh), as a distribution's
hardening check reads it with readelf: every program and the ZooKeeper
client's objects call the stack protector's __stack_chk_fail and the
fortified libc entry points (__*_chk) that -D_FORTIFY_SOURCE=2 compiles
in. A sanitizer build leaves FORTIFY out on purpose (ASan checks the same
calls): there only the stack protector is required."""
import os
import re
import subprocess

import pytest

from conftest import _build

PROGRAMS = ["nodepoold", "nodepool-launcher", "nodepool-web", "nodepool-builder",
            "nodepoolctl", "nodepool"]


def symbols(path):
    r = subprocess.run(["readelf", "-W", "-s", path], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, check=True)
    return r.stdout.decode()


def sanitized(syms):
    return "__asan_init" in syms or "__ubsan_handle" in syms


def fortified(syms):
    return sorted(set(re.findall(r"\b(__[a-z0-9_]+_chk)\b", syms)) - {"__stack_chk_fail"})


@pytest.mark.parametrize("prog", PROGRAMS)
def test_program_has_stack_protector_and_fortify(prog):
    path = os.path.join(_build(), "bin", prog)
    syms = symbols(path)
    assert "__stack_chk_fail" in syms, "%s: no stack protector" % prog
    if not sanitized(syms):
        assert fortified(syms), "%s: no fortified call (__*_chk)" % prog


def test_zookeeper_client_objects_are_hardened():
    lib = os.path.join(_build(), "zkclient", "lib", "libzookeeper.a")
    syms = symbols(lib)
    # readelf prints one symbol table per member: "File: lib.a(zookeeper.c.o)"
    members = [m for m in re.split(r"\nFile: ", "\n" + syms) if m.strip()]
    assert len(members) >= 5, syms[:2000]
    # every object, the protocol (zookeeper.c) and the deserializer of what
    # the server sends (recordio.c, zookeeper.jute.c) among them
    for m in members:
        assert "__stack_chk_fail" in m, "no stack protector in " + m.split("\n", 1)[0]
    assert fortified(syms), "libzookeeper.a: no fortified call (__*_chk)"
