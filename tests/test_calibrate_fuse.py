"""``FEDNODE_MOUNT_STATS`` (``fednode.mount.MountStats``) and ``fednode.tools.calibrate_fuse``.

The counters are unit-tested on a stand-in for ``FedOps`` and a client (no
mount); ``measure_fuse`` runs on a 1-agent federation with a small ``repeat``
and its per-system-call counts are checked (never its times).
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs /dev/fuse and fusermount3 (FUSE 3; ./dev.sh setup installs fuse3)",
)

HANG = 120  # seconds after which a start counts as hung (a failure, never a pass condition)


def test_stats_off_leaves_the_callbacks_unwrapped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fednode import mount
    from fednode.cluster import write_local
    from fednode.config import load_cluster

    monkeypatch.delenv(mount.STATS_ENV, raising=False)
    assert mount.MountStats.from_env() is None  # what ``mount`` passes to FedOps: nothing counted
    cluster = load_cluster(write_local(tmp_path / "fed", 1))  # no agent: the pool connects lazily
    names = mount.FedOps._fuse_callbacks
    assert {"getattr", "create", "open", "read", "write", "flush", "release", "unlink", "mkdir"} <= set(names)
    plain = mount.FedOps(cluster, 0)
    assert not set(names) & set(vars(plain))  # the class's methods, as before: no wrapper, no cost
    monkeypatch.setenv(mount.STATS_ENV, str(tmp_path / "stats.json"))
    stats = mount.MountStats.from_env()
    assert stats is not None
    counted = mount.FedOps(cluster, 0, stats=stats)
    assert set(names) <= set(vars(counted))
    # mfusepy tells create(path, mode) from create(path, mode, flags) by its signature
    assert list(inspect.signature(counted.create).parameters) == ["path", "mode", "flags"]
    assert not (tmp_path / "stats.json").exists()  # written on SIGUSR1 and at exit only


class _Client:
    def _exchange(self, calls: Any, trace: bool) -> list[Any]:
        return [(True, None, []) for _ in calls]


class _Ops:
    """Callbacks as FedOps makes them: client round trips on the callback's thread."""

    _fuse_callbacks = ("getattr", "create")

    def __init__(self, client: _Client) -> None:
        self.c = client

    def getattr(self, path: str, fh: int | None = None) -> None:
        self.c._exchange((("getattr", (path,)),), False)

    def create(self, path: str, mode: int, flags: int = 0) -> None:
        self.c._exchange((("create", (path,)),), False)
        self.c._exchange((("open", (path,)), ("getattr", (path,))), False)  # a pipeline: one round trip
        raise OSError(17, "exists")  # a failed callback counts too


def test_stats_count_calls_round_trips_and_client_calls_per_callback_across_threads(tmp_path: Path) -> None:
    from fednode.mount import MountStats

    stats = MountStats(tmp_path / "stats.json")
    ops = _Ops(stats.watch(_Client()))  # type: ignore[arg-type]
    stats.install(ops)
    per_thread = 200

    def work() -> None:
        for _ in range(per_thread):
            ops.getattr("/f")
            with pytest.raises(OSError):
                ops.create("/f", 0o644)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    n = 4 * per_thread
    stats.write()
    stats.write(final=True)
    snap = json.loads((tmp_path / "stats.json").read_text())
    assert snap["seq"] == 2 and snap["final"] is True and snap["pid"] == os.getpid()
    cb = snap["callbacks"]
    assert {k: cb["getattr"][k] for k in ("calls", "round_trips", "client_calls")} == {
        "calls": n, "round_trips": n, "client_calls": n}  # fmt: skip
    assert {k: cb["create"][k] for k in ("calls", "round_trips", "client_calls")} == {
        "calls": n, "round_trips": 2 * n, "client_calls": 3 * n}  # fmt: skip
    assert cb["getattr"]["cpu_ns"] > 0 and snap["snapshot_cpu_ns"] > 0


@pytest.mark.parametrize("mode", ["sync", "cto"])
def test_measure_fuse_counts_callbacks_per_system_call(tmp_path: Path, mode: str) -> None:
    from fednode.cluster import ProcessCluster, write_local
    from fednode.tools import calibrate_fuse

    repeat = 20
    path = write_local(tmp_path / "fed", 1)
    with ProcessCluster(path, log_dir=tmp_path / "logs", new_session=True) as pc:
        pc.wait_ready(HANG)
        out = calibrate_fuse.measure_fuse(path, 0, tmp_path / "work", repeat=repeat, consistency=mode)
    fuse = out["fuse"]
    assert fuse["consistency"] == mode
    sc = fuse["syscalls"]
    assert list(sc) == list(calibrate_fuse.PHASES)
    assert sc["creat"]["callbacks"]["create"] == 1.0 and sc["creat"]["round_trips"] >= 1
    # create, open and getattr in one round trip and one call (create_open)
    assert fuse["callbacks"]["create"]["round_trips"] == 1.0 and fuse["callbacks"]["create"]["client_calls"] == 1.0
    # the kernel asks for security.capability before each write (file_remove_privs) now that the
    # mount serves extended attributes: answered by the mount (not user.: refused without a call)
    assert sc["write4k"]["callbacks"] in ({"write": 1.0}, {"write": 1.0, "getxattr": 1.0})
    assert sc["write4k"]["callbacks"].get("getxattr", 0.0) == 0.0 or fuse["callbacks"]["getxattr"]["round_trips"] == 0
    # close waits for flush; the release that follows it is counted with it (the phase waits for it)
    assert sc["close_written"]["callbacks"] == {"flush": 1.0, "release": 1.0}
    if mode == "sync":  # each write goes through; the close is one round trip
        assert sc["write4k"]["round_trips"] == 1.0 and sc["close_written"]["round_trips"] == 1.0
    else:  # held until the close, which sends them (one round trip) and closes (another)
        assert sc["write4k"]["round_trips"] == 0.0 and sc["close_written"]["round_trips"] == 2.0
        assert sc["open_cached"]["round_trips"] == 1.0 and sc["open_cached"]["client_calls"] == 2.0
    assert sc["stat_cached"]["callbacks"] == {} and sc["stat_cold"]["callbacks"]["getattr"] >= 1.0
    assert sc["open_cold"]["callbacks"]["open"] == 1.0 and sc["open_cold"]["callbacks"]["getattr"] >= 1.0
    assert 0 < fuse["read_callbacks_per_kib"] < 1 / 4  # readahead: fewer READs than 4 KiB reads
    assert sc["mkdir"]["callbacks"]["mkdir"] == 1.0 and sc["rmdir"]["callbacks"]["rmdir"] == 1.0
    assert set(fuse["callbacks"]) >= {"create", "getattr", "write", "flush", "release", "read", "open", "unlink"}
    # the snapshot the mount wrote as it exited: every create of the warm-up and the run
    final = json.loads((tmp_path / "work" / "mount-stats.json").read_text())
    assert final["final"] is True
    assert final["callbacks"]["create"]["calls"] == repeat + min(repeat, calibrate_fuse.WARMUP_REPEAT)
