"""Libraries a process does not need are not mapped (issue 13: every MiB
per process counts once per provider): libcurl, libxml2 and libssh, with
what they pull in, are loaded by the drivers that use them, on first use;
nodepoold maps no OpenSSL. And without libcurl an openstack provider fails
with a clear message while a static provider beside it serves on."""
import os
import shutil
import subprocess

import pytest

from conftest import wait_for
from npd import Supervisor, host, static_provider

OPTIONAL = ("libcurl.so.4", "libxml2.so.2", "libssh.so.4")


def closure(path):
    """Real paths of the libraries the dynamic loader maps for path (ldd)."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
    libs = set()
    for line in out.splitlines():
        if "=>" in line:
            target = line.split("=>")[1].split("(")[0].strip()
            if target.startswith("/"):
                libs.add(os.path.realpath(target))
    return libs


def library_file(soname):
    """The file the dynamic loader opens for soname (ldconfig's cache)."""
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.strip().startswith(soname + " ") and "x86-64" in line:
            return os.path.realpath(line.split("=>")[-1].strip())
    return None


def only_optional(binary):
    """Basenames of libcurl, libxml2, libssh and of what they pull in that
    the binary itself does not need (gnutls, krb5, ldap, icu, ...)."""
    libs = set()
    for so in OPTIONAL:
        path = library_file(so)
        if path is not None:
            libs |= {path} | closure(path)
    return {os.path.basename(p) for p in libs - closure(binary)}


def mapped(pid):
    """Basenames of the files a process maps."""
    out = set()
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5].startswith("/"):
                out.add(os.path.basename(parts[5]))
    return out


def with_lib(names, prefix):
    return sorted(n for n in names if n.startswith(prefix))


@pytest.fixture
def sup(deployment):
    s = Supervisor(deployment)
    yield s
    s.stop()


def test_static_worker_and_supervisor_map_only_what_they_use(sup, zuul):
    sup.write({"labels": [{"name": "small"}],
               "providers": [static_provider("st", [host("h1", ["small"])])]})
    sup.start_fg()
    st = sup.wait_running(["st"])
    req = zuul.submit(["small"])
    assert zuul.wait_request(req)["state"] == "fulfilled"
    worker = mapped(st["st"]["pid"])
    assert "libssl.so.3" in worker  # TLS to ZooKeeper: the floor
    unwanted = only_optional(sup.exe("nodepool-launcher"))
    assert with_lib(unwanted, "libcurl") and with_lib(unwanted, "libgnutls"), unwanted
    assert sorted(worker & unwanted) == [], sorted(worker)
    # the supervisor never talks to ZooKeeper or a cloud
    supervisor = mapped(sup.proc.pid)
    assert sorted(supervisor & unwanted) == [], sorted(supervisor)
    for lib in ("libssl", "libcrypto", "libz."):
        assert with_lib(supervisor, lib) == [], (lib, sorted(supervisor))


def test_without_libcurl_openstack_fails_and_static_serves(sup, zuul):
    lib = library_file("libcurl.so.4")
    if os.getuid() != 0 or lib is None or shutil.which("unshare") is None:
        pytest.skip("needs root, unshare and libcurl.so.4 to hide it")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("no mount namespace here: %s" % probe.stderr.decode().strip())
    sup.write({
        "labels": [{"name": "small"}, {"name": "cloud"}],
        "providers": [
            static_provider("st", [host("h1", ["small"])]),
            {"name": "os", "driver": "openstack", "cloud": "nowhere",
             "cloud-images": [{"name": "img"}],
             "pools": [{"name": "main", "max-servers": 1,
                        "labels": [{"name": "cloud", "cloud-image": "img",
                                    "min-ram": 512}]}]},
        ]})
    # libcurl hidden from nodepoold and its children only: /dev/null bound
    # over the library's file inside a private mount namespace
    hide = 'mount --bind /dev/null "$0" && exec "$@"'
    sup.proc = sup.d.start(["unshare", "-m", "sh", "-c", hide, lib,
                            sup.exe("nodepoold"), "-f", "-c", sup.config], sup.name)
    sup.log_path = sup.proc.log_path
    wait_for(lambda: os.path.exists(sup.pidfile), what="nodepoold pid file")
    want = "provider os: driver openstack needs libcurl (Debian package libcurl4): "
    wait_for(lambda: want in sup.log(), 30, what="the missing libcurl reported")
    req = zuul.submit(["small"])
    assert zuul.wait_request(req)["state"] == "fulfilled"
    st = sup.status()
    assert st["st"]["state"] == "running"
    assert all(with_lib(mapped(w["pid"]), "libcurl") == [] for w in st.values() if w["pid"] > 0)
