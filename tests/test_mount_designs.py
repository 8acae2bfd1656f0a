"""Issue 25: ``fednode local --architecture NAME --mount DIR`` for every design other
than FedFS (whose mount ``tests.test_mount`` covers at length), and the mount tests'
real programs on it: ``cp -r`` and ``diff -r``, ``tar`` out of the mount and back,
``git`` (init, commit, status, fsck) and the ``postmark`` binary.

One ``fednode local`` per design, started as a user starts it (the CLI, agents and
mount in their own sessions), waited for by its readiness line and stopped by
SIGTERM, which must unmount and exit 0.  The trees are small (``fednode/transport``,
a few files; ``test_git`` and ``test_postmark`` are ``tests.test_mount``'s own, collected
here on this module's fixtures) so the five designs take about a minute:
what is checked is that each design's protocol answers what the kernel and these
programs ask, not its speed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.test_mount import HANG, REPO, fednode_local, sh
from tests.test_mount import test_git as test_git  # collected here: git init, commit, status, fsck on each design
from tests.test_mount import test_postmark as test_postmark  # the postmark binary on each design

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs /dev/fuse and fusermount3 (FUSE 3; ./dev.sh setup installs fuse3)",
)

#: every registered design but FedFS (tests.test_mount's); checked against the registry below
DESIGNS = ("nfs", "nfsp", "dnfsp1", "dnfsp2", "mnfs")

#: a counter each design reports through ``Node.counters`` (``fednode status``), which the writes here raise
COUNTED = {"nfs": "server_requests", "nfsp": "iod_requests", "dnfsp1": "meta_fetches", "dnfsp2": "token_requests",
           "mnfs": "stripe_writes"}  # fmt: skip


def test_every_registered_design_is_mounted_here() -> None:
    """A design registered later must be added here (or it would go unmounted silently)."""
    from fedsim.protocol.designs import DESIGNS as REGISTRY
    from fedsim.protocol.designs import design_class

    design_class("fedfs")  # loads the built-in designs
    assert set(REGISTRY.names()) == {"fedfs", *DESIGNS}


#: designs whose attributes are the answering server's, so two stats of an unchanged file may differ in their
#: times: mNFS answers each metadata read at the next server round-robin, and each server stamps its own clock
#: on the writes it applies (``fedsim.protocol.mnfs.node``), so tar, which compares a file's ctime before and
#: after reading it, says "file changed as we read it" and exits 1, though its archive is whole
TIMES_PER_SERVER = {"mnfs"}


@pytest.fixture(scope="module", params=DESIGNS)
def design_mount(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """``fednode local --nodes 4 --architecture NAME --mount DIR``, mounted (its readiness
    line read), then SIGTERMed: it must exit 0 with the mount gone."""
    base = tmp_path_factory.mktemp(f"design-{request.param}")
    mnt = base / "m"
    mnt.mkdir()
    with fednode_local(base / "b", mnt, 4, "--architecture", request.param):
        yield mnt


@pytest.fixture
def design(design_mount: Path, request: pytest.FixtureRequest) -> str:
    """The design the module's mount runs."""
    return str(request.node.callspec.params["design_mount"])


@pytest.fixture
def mnt(design_mount: Path, request: pytest.FixtureRequest) -> Path:
    d = design_mount / request.node.originalname
    d.mkdir()
    return d


def test_cp_diff_tar(design: str, mnt: Path, tmp_path: Path) -> None:
    src = REPO / "fednode" / "transport"
    sh(["cp", "-r", str(src), str(mnt / "t")])
    sh(["diff", "-r", str(src), str(mnt / "t")])
    want = sorted(os.path.relpath(os.path.join(d, n), src) for d, dirs, files in os.walk(src) for n in dirs + files)
    got = sorted(os.path.relpath(os.path.join(d, n), mnt / "t") for d, dirs, files in os.walk(mnt / "t")
                 for n in dirs + files)  # fmt: skip
    assert got == want
    tar = ["tar", "cf", str(tmp_path / "t.tar"), "-C", str(mnt), "t"]
    if design in TIMES_PER_SERVER:
        r = subprocess.run(tar, capture_output=True, text=True, timeout=HANG)
        assert r.returncode in (0, 1), r.stderr
        assert all(line.endswith("file changed as we read it") for line in r.stderr.splitlines()), r.stderr
    else:
        sh(tar)
    (tmp_path / "x").mkdir()
    sh(["tar", "xf", str(tmp_path / "t.tar"), "-C", str(tmp_path / "x")])
    sh(["diff", "-r", str(src), str(tmp_path / "x" / "t")])
    sh(["tar", "xf", str(tmp_path / "t.tar"), "-C", str(mnt), "--transform", "s,^t,t2,"])  # and into the mount
    sh(["diff", "-r", str(src), str(mnt / "t2")])


def test_fednode_fs_and_status_on_the_same_federation(design: str, design_mount: Path, mnt: Path,
                                                       tmp_path: Path) -> None:  # fmt: skip
    """``fednode fs`` (a client of the mount's agent) and the mount see each other's files;
    ``fednode status`` reports the design's own counters."""
    cluster = design_mount.parent / "b" / "cluster.yaml"
    rel = "/" + mnt.name

    def fs(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([sys.executable, "-m", "fednode.cli", "fs", "--cluster", str(cluster), "--node", "0",
                               *args], capture_output=True, timeout=HANG)  # fmt: skip

    (mnt / "via-mount").write_bytes(b"written through the mount")
    assert fs("cat", f"{rel}/via-mount").stdout == b"written through the mount"
    src = tmp_path / "p"
    src.write_bytes(b"put by fednode fs " * 1000)  # 18 KB: more than one mNFS stripe unit
    r = fs("put", str(src), f"{rel}/via-fs")
    assert r.returncode == 0, r.stderr
    assert (mnt / "via-fs").read_bytes() == src.read_bytes()
    assert sorted(fs("ls", rel).stdout.decode().split()) == ["via-fs", "via-mount"]
    r = subprocess.run([sys.executable, "-m", "fednode.cli", "status", "--cluster", str(cluster), "--json"],
                       capture_output=True, timeout=HANG)  # fmt: skip
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert all(row["architecture"] == design for row in rows)
    assert sum(row["counters"][COUNTED[design]] for row in rows) > 0
    r = subprocess.run([sys.executable, "-m", "fednode.cli", "status", "--cluster", str(cluster)],
                       capture_output=True, text=True, timeout=HANG)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert f"node 0: {design}: " in r.stdout and COUNTED[design] in r.stdout  # the table, and the design's counts
