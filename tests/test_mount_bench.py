"""``fednode.tools.mount_bench``'s own logic, without GlusterFS, FUSE or the benchmarks.

The GlusterFS case needs root, glusterd and a mount; what can go wrong
without them is checked here: the skip when a program is missing (the rest of
the table must still run), the command lines that make and remove the volume,
the bounded readiness wait, and the table's ratio rows (``x gl``, ``x pt``:
above 1 is slower, for rates and for times).  ``tests/test_mount.py`` runs the
script itself on the passthrough and one agent.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fednode.tools import mount_bench as mb
from fednode.tools.mount_bench import Figure


def _no(*programs: str):
    real = shutil.which

    def which(cmd: str, mode: int = 0, path: str | None = None) -> str | None:
        return None if cmd in programs else real(cmd, path=path) or f"/usr/sbin/{cmd}"

    return which


def test_gluster_case_is_skipped_with_the_packages_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", _no("glusterd", "gluster", "mount.glusterfs"))
    why = mb.skip_reason(mb.GLUSTER)
    assert why is not None and "\n" not in why
    assert why.startswith("gluster4 skipped") and "apt-get install glusterfs-server glusterfs-client" in why
    # only the client missing: only its package named
    monkeypatch.setattr(shutil, "which", _no("mount.glusterfs"))
    why = mb.skip_reason(mb.GLUSTER)
    assert why is not None and "glusterfs-client" in why and "glusterfs-server" not in why
    # the other cases have no prerequisites of their own
    assert all(mb.skip_reason(c) is None for c in mb.CASES if c != mb.GLUSTER)


def test_gluster_case_needs_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", _no())
    monkeypatch.setattr(mb.os, "geteuid", lambda: 1000)
    assert "root" in (mb.skip_reason(mb.GLUSTER) or "")
    monkeypatch.setattr(mb.os, "geteuid", lambda: 0)
    assert mb.skip_reason(mb.GLUSTER) is None


def test_a_skipped_case_leaves_the_rest_of_the_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(shutil, "which", _no("glusterd"))
    monkeypatch.setattr(mb, "WORKLOADS", {"fake": lambda d, quick: [Figure("fake", "ops/s", 10.0, True)]})
    results = mb.run(["local", mb.GLUSTER], ["fake"], True, tmp_path)
    assert list(results) == ["local"] and results["local"]["fake"].value == 10.0
    assert "gluster4 skipped: no glusterd (apt-get install glusterfs-server)" in capsys.readouterr().err
    assert not (tmp_path / mb.GLUSTER).exists()  # nothing was set up for it


def test_gluster_volume_command_lines(tmp_path: Path) -> None:
    vol = mb.GlusterVolume.under(tmp_path)
    assert len(vol.bricks) == 4 and len(set(vol.bricks)) == 4
    assert all(b.parent == tmp_path for b in vol.bricks)
    assert vol.host not in ("localhost", "127.0.0.1")  # glusterd refuses loopback names for a brick
    create = vol.create()
    assert create[:5] == ["gluster", "--mode=script", "volume", "create", vol.name]
    assert create[5:7] == ["transport", "tcp"] and create[-1] == "force"  # one host, maybe the root fs
    assert create[7:-1] == [f"{vol.host}:{b}" for b in vol.bricks]
    assert vol.start() == ["gluster", "--mode=script", "volume", "start", vol.name]
    assert vol.stop() == ["gluster", "--mode=script", "volume", "stop", vol.name, "force"]
    assert vol.delete() == ["gluster", "--mode=script", "volume", "delete", vol.name]
    mnt, log = tmp_path / "mnt", tmp_path / "mount.log"
    source = f"{vol.host}:/{vol.name}"
    assert vol.mount(mnt, log) == ["mount", "-t", "glusterfs", "-o", f"log-file={log}", source, str(mnt)]


def test_wait_until_is_bounded() -> None:
    calls = []
    with pytest.raises(RuntimeError, match=r"the thing: not ready after 3 checks"):
        mb.wait_until(lambda: calls.append(1) is not None, "the thing", tries=3, interval=0)
    assert len(calls) == 3
    n = iter(range(10))
    mb.wait_until(lambda: next(n) == 2, "the thing", tries=5, interval=0)


def _rows(text: str) -> list[list[str]]:
    return [ln.split() for ln in text.splitlines()[2:]]


def test_table_rows_of_ratios_to_gluster_and_passthrough() -> None:
    def figs(rate: float, wall: float) -> dict[str, Figure]:
        return {"rate": Figure("rate", "files/s", rate, True), "wall": Figure("wall", "s", wall, False)}

    results = {"passthrough": figs(2000.0, 2.0), mb.GLUSTER: figs(1000.0, 4.0), "fed4-manager": figs(250.0, 16.0)}
    rows = _rows(mb.table(results))
    assert rows[0] == ["rate", "files/s", "2,000", "1,000", "250"]
    assert rows[1] == ["x", "gl", "0.50", "1.00", "4.00"]  # a quarter of GlusterFS's rate: 4x slower
    assert rows[2] == ["x", "pt", "1.00", "2.00", "8.00"]
    assert rows[3] == ["wall", "s", "2", "4", "16"]
    assert rows[4] == ["x", "gl", "0.50", "1.00", "4.00"]  # four times GlusterFS's time: 4x slower
    assert rows[5] == ["x", "pt", "1.00", "2.00", "8.00"]


def test_table_leaves_out_a_baseline_that_did_not_run() -> None:
    results = {
        "passthrough": {"rate": Figure("rate", "files/s", 100.0, True)},
        "fed1": {"rate": Figure("rate", "files/s", 50.0, True), "more": Figure("more", "MB/s", 0.0, True)},
    }
    text = mb.table(results)
    assert "x gl" not in text
    rows = _rows(text)
    assert rows == [
        ["rate", "files/s", "100", "50"],
        ["x", "pt", "1.00", "2.00"],
        ["more", "MB/s", "-", "0"],
        ["x", "pt", "-", "-"],  # no figure, or a zero one: no ratio
    ]


def test_consistency_modes_make_a_federation_case_per_mode() -> None:
    """``--consistency sync,cto``: each federation case once per mode, side by side; the baselines once."""
    from fednode.tools.mount_bench import with_modes

    assert with_modes(["passthrough", "fed1", "fed4-rr"], ["sync", "cto"]) == [
        "passthrough", "fed1:sync", "fed1:cto", "fed4-rr:sync", "fed4-rr:cto"]  # fmt: skip
    assert with_modes(["fed1", "fed1:sync"], ["cto"]) == ["fed1:cto", "fed1:sync"]
    assert with_modes(["local", "fed1"], []) == ["local", "fed1"]
