"""Upstream Nodepool's own test-suite configs (tests/data/upstream-fixtures,
see its README): `nodepoold -n` reaches upstream config-validate's verdict on
each, as recorded in verdicts.tsv, and names the problem when it rejects one.

The fixtures are filled in as upstream's tests fill them (str.format with the
ZooKeeper connection, images_dir, build_log_dir, ...; the config_validate/
files upstream validates as they are, and NODEPOOL_PORT=8005 set as its
test_good_config does). No ZooKeeper: `-n` only loads and validates.
"""
import os
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import bin_path

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(TOP, "tests", "data", "upstream-fixtures")
NODEPOOLD = bin_path("nodepoold")

# What upstream's setup_config/setup_secure put in place of {placeholders}
# (and the per-driver tests their extra keywords: context_name for openshift,
# auth_path for azure, subnet_id/security_group_id/instance_profile_arn for aws).
PLACEHOLDERS = dict(
    zookeeper_host="zk01.example.org",
    zookeeper_port=2281,
    zookeeper_chroot="/nodepool_test/fixture",
    zookeeper_ca="/etc/nodepool/zk-ca.pem",
    zookeeper_cert="/etc/nodepool/zk-client.pem",
    zookeeper_key="/etc/nodepool/zk-client.key",
    images_dir="/var/lib/nodepool/images",
    build_log_dir="/var/log/nodepool/builds",
    context_name="fixture-context",
    auth_path="/etc/nodepool/azure-auth.json",
    subnet_id="subnet-0123456789abcdef0",
    security_group_id="sg-0123456789abcdef0",
    instance_profile_arn="arn:aws:iam::123456789012:instance-profile/fixture",
)

# Read by upstream's test_config_validator.py straight from the tree, without
# str.format (the others in config_validate/ go through setup_config).
UNFORMATTED = {
    "config_validate/aws-fleet-allocation-strategy-error.yaml",
    "config_validate/aws-fleet-exclusive-error.yaml",
    "config_validate/aws-fleet-good.yaml",
    "config_validate/duplicate_diskimage_name.yaml",
    "config_validate/good.yaml",
    "config_validate/k8s_spec_duplicate.yaml",
    "config_validate/missing_diskimage_provider.yaml",
    "config_validate/missing_parent_diskimage.yaml",
    "config_validate/missing_top_label.yaml",
    "config_validate/no_diskimage_name.yaml",
    "config_validate/schema_error.yaml",
    "config_validate/static_error.yaml",
    "config_validate/yaml_error.yaml",
}


def verdicts():
    rows = []
    with open(os.path.join(DATA, "verdicts.tsv"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            path, upstream, ours, expect, why = line.rstrip("\n").split("\t")
            rows.append(dict(path=path, upstream=upstream, ours=ours, expect=expect, why=why))
    return rows


def validate(row, tmp):
    """Run `nodepoold -n -c` on the filled-in fixture: (exit status, output)."""
    src = os.path.join(DATA, row["path"])
    with open(src, encoding="utf-8") as f:
        text = f.read()
    if row["path"] not in UNFORMATTED:
        text = text.format(**PLACEHOLDERS)
    dst = os.path.join(tmp, row["path"].replace("/", "__"))
    with open(dst, "w", encoding="utf-8") as f:
        f.write(text)
    env = dict(os.environ, NODEPOOL_PORT="8005")
    p = subprocess.run([NODEPOOLD, "-n", "-c", dst], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, env=env, timeout=60)
    return p.returncode, p.stdout.decode("utf-8", "replace")


def test_every_fixture_is_listed():
    """verdicts.tsv covers every YAML file copied from upstream, once."""
    listed = [r["path"] for r in verdicts()]
    present = sorted(
        os.path.relpath(os.path.join(d, n), DATA)
        for d, _, names in os.walk(DATA) for n in names if n.endswith(".yaml"))
    assert sorted(listed) == present
    assert len(present) == 185


def test_verdicts_match_upstream():
    """nodepoold -n gives each fixture its recorded verdict; a rejected one
    names the key or problem upstream's validator names; the fixtures where
    nodepoold deliberately differs are exactly the recorded exceptions."""
    rows = verdicts()
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(max_workers=2) as ex:
        results = list(ex.map(lambda r: validate(r, tmp), rows))
    wrong = []
    for row, (rc, out) in zip(rows, results):
        if row["ours"] == "valid":
            if rc != 0:
                wrong.append("%s: should be valid, got:\n%s" % (row["path"], out))
        elif rc == 0:
            wrong.append("%s: should be invalid (%s)" % (row["path"], row["expect"]))
        elif row["expect"] not in out:
            wrong.append("%s: expected %r in:\n%s" % (row["path"], row["expect"], out))
        if rc not in (0, 1):
            wrong.append("%s: exit status %d:\n%s" % (row["path"], rc, out))
    assert not wrong, "\n".join(wrong)
    agree = [r for r in rows if r["ours"] == r["upstream"]]
    exceptions = sorted(r["path"] for r in rows if r["ours"] != r["upstream"])
    assert len(agree) == 180
    assert exceptions == [
        "config_validate/good.yaml",  # top-level labels of gce/metastatic
        "config_validate/metastatic_error.yaml",  # upstream: at launcher load
        "external_driver.yaml",  # upstream's test-only `driver: test`
        "multi_drivers.yaml",  # the same
        "secure_file_config.yaml",  # chroot must start with '/'
    ]


@pytest.mark.parametrize("path", ["node.yaml", "node_boot_from_volume.yaml",
                                  "cleanup-port.yaml", "node_net_name.yaml"])
def test_fake_provider_with_openstack_keys_is_valid(path, tmp_path):
    """The fake driver takes OpenStack's keys, as upstream's (an OpenStack
    driver against an in-process cloud) does: cloud, region-name, networks,
    boot-from-volume, port-cleanup-interval, dynamic-instance-properties."""
    rc, out = validate(dict(path=path), str(tmp_path))
    assert rc == 0, out
