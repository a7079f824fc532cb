"""A build record's `formats` come from ZooKeeper and name files the
builder removes (delete-after-upload, upstream's _pruneLocalBuildFormats):
only format names ([a-z0-9]+) are used; anything else is logged and
skipped, so a record written by whoever can write ZooKeeper cannot make
the builder delete a file outside images-dir (issue 23, finding 4)."""
import os
import time
import uuid

from conftest import wait_for
from builder_helpers import builder_config, start_builder
from operator_helpers import build_record, write_build


def test_formats_that_climb_out_of_images_dir_are_skipped(deployment, zk):
    # no provider uses img: nothing is built, only cleanup runs, and with
    # delete-after-upload no format of a ready build is kept
    cfg = builder_config(deployment, providers=(),
                         diskimage={"img": {"delete-after-upload": True}})
    cfg["labels"] = []
    path = deployment.write_config(cfg)
    images_dir = os.path.join(deployment.dir, "images")
    os.makedirs(images_dir)
    bid = uuid.uuid4().hex
    base = os.path.join(images_dir, "img-" + bid)
    # what a build leaves: the image and diskimage-builder's manifest dir
    os.makedirs(base + ".d")
    victims = []
    for name in ("victim", "victim.md5", "victim.sha256"):
        victims.append(os.path.join(deployment.dir, name))
    inside = os.path.join(base + ".d", "manifest")
    for f in victims + [base + ".qcow2", inside]:
        with open(f, "w") as fh:
            fh.write("keep me\n")
    old = time.time() - 3600  # older than the builder's grace for new files
    os.utime(base + ".qcow2", (old, old))
    write_build(zk, "img", build_record(formats="qcow2,d/../../victim,d/manifest,../x,QCOW2"),
                build_id=bid)
    b = start_builder(deployment, path)
    # the real format is pruned: the builder did look at this build
    wait_for(lambda: not os.path.exists(base + ".qcow2"), 30, what="qcow2 pruned")
    wait_for(lambda: "d/../../victim" in b.output(), 10, what="the skip logged")
    time.sleep(2)  # more cleanup passes (every 0.5 s)
    for v in victims + [inside]:
        assert os.path.exists(v), v + " was removed"
        with open(v) as fh:
            assert fh.read() == "keep me\n"
    out = b.output()
    assert "not a format name" in out, out[-3000:]
    assert b.alive()
