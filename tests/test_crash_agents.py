"""Crash and restart with real agent processes (issue 13, ``fedfs/failure.py``):
an agent killed with SIGKILL is found out by its successor's missed
heartbeats and evicted; the others' files keep working and its own give a
clear error naming it; started again with ``fednode serve --join`` it
recovers (the federation still lists it: its old incarnation is evicted
first) and rejoins, its files back with their content (``replicas: 1``: its
local tree kept them).  Waits are on readiness lines and on ``status``
answers, never on fixed sleeps."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from fednode.client import Client
from fednode.cluster import ProcessCluster, local_spec
from fednode.config import Cluster, write_cluster

CLOSED_WORLD = {"summary_refresh_s": 0.0, "vd_max_age_s": 0.0, "vd_miss_age_s": 0.0, "placement": "round_robin"}


def _fednode(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fednode.cli", *args], capture_output=True, text=True, timeout=120)


def _status(cluster_file: Path) -> dict[int, dict]:
    r = _fednode("status", "--cluster", str(cluster_file), "--json")
    return {row["node"]: row for row in json.loads(r.stdout)}


def _until(what: str, cond: Callable[[], bool], limit_s: float = 120.0) -> None:
    """Poll ``cond`` (a question to the agents) until it holds; the limit only
    turns a hang into a failure."""
    end = time.monotonic() + limit_s
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"not within {limit_s} s: {what}")
        time.sleep(0.05)


def _views(cluster_file: Path, nodes: tuple[int, ...]) -> dict[int, tuple[int, list[int]]]:
    st = _status(cluster_file)
    return {n: (st[n]["epoch"], st[n]["members"]) for n in nodes if st[n]["reachable"]}


def _federation(base: Path, **protocol: float) -> tuple[Path, Cluster, dict[str, bytes]]:
    spec = local_spec(base, 4, protocol={**CLOSED_WORLD, **protocol})
    path = base / "cluster.yaml"
    write_cluster(path, spec)
    return path, Cluster(spec, path), {f"/w/f{i}": f"content of f{i}".encode() * (i + 1) for i in range(8)}


def _populate(cluster: Cluster, files: dict[str, bytes]) -> None:
    with Client(cluster, node=0) as c:
        c.mkdir("/w")
    for i, (path, data) in enumerate(files.items()):
        with Client(cluster, node=i % 4) as c:
            c.write_file(path, data)


def _homes(base: Path, node: int, files: dict[str, bytes]) -> list[str]:
    from fednode.localfs import LocalFS

    tree = LocalFS(base / f"n{node}").tree()
    return sorted(p for p in files if tree.get(p) is not None)


def test_a_killed_agent_is_evicted_by_heartbeats_and_rejoins_with_its_files(tmp_path):
    path, cluster, files = _federation(tmp_path, heartbeat_s=0.2, heartbeat_misses=3)
    with ProcessCluster(path, log_dir=tmp_path / "logs") as pc:
        pc.wait_ready()
        _populate(cluster, files)
        on_2 = _homes(tmp_path, 2, files)
        assert on_2
        text = _fednode("status", "--cluster", str(path)).stdout
        assert "heard its predecessor node 1" in text
        pc.kill(2)
        _until("the others' views exclude node 2", lambda: _views(path, (0, 1, 3)) == {
            n: (1, [0, 1, 3]) for n in (0, 1, 3)})  # fmt: skip
        with Client(cluster, node=1) as c:
            for p, data in files.items():
                if p not in on_2:
                    assert c.read_file(p) == data
            with pytest.raises(FileNotFoundError, match="node 2 left the federation in view 1"):
                c.read_file(on_2[0])
            c.write_file("/w/during", b"written while node 2 was out")
        text = _fednode("status", "--cluster", str(path)).stdout
        assert "node 2 left the federation in view 1" in text and "UNREACHABLE" in text
        with ProcessCluster(path, nodes=[2], log_dir=tmp_path / "logs", join=True) as back:
            back.wait_ready()  # a member again, holding every summary
            assert _views(path, (0, 1, 2, 3)) == {n: (2, [0, 1, 2, 3]) for n in range(4)}
            for n in (3, 2):
                with Client(cluster, node=n) as c:
                    for p, data in files.items():
                        assert c.read_file(p) == data
                    assert c.read_file("/w/during") == b"written while node 2 was out"


def test_an_agent_killed_and_restarted_before_detection_evicts_its_old_incarnation(tmp_path):
    """No heartbeats: nobody notices the kill; the restarted agent finds
    itself still listed, has its old incarnation evicted, and joins."""
    path, cluster, files = _federation(tmp_path)
    with ProcessCluster(path, log_dir=tmp_path / "logs") as pc:
        pc.wait_ready()
        _populate(cluster, files)
        on_1 = _homes(tmp_path, 1, files)
        pc.kill(1)
        assert _views(path, (0, 2, 3)) == {n: (0, [0, 1, 2, 3]) for n in (0, 2, 3)}
        with ProcessCluster(path, nodes=[1], log_dir=tmp_path / "logs", join=True) as back:
            back.wait_ready()
            assert _views(path, (0, 1, 2, 3)) == {n: (2, [0, 1, 2, 3]) for n in range(4)}  # evicted (1), joined (2)
            with Client(cluster, node=0) as c:
                assert {p: c.read_file(p) for p in files} == files and on_1
