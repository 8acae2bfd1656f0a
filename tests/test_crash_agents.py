"""Crash and restart with real agent processes (issue 13, ``fedfs/failure.py``):
an agent killed with SIGKILL is found out by its successor's missed
heartbeats and evicted; the others' files keep working and its own give a
clear error naming it; started again with ``fednode serve --join`` it
recovers (the federation still lists it: its old incarnation is evicted
first) and rejoins, its files back with their content (``replicas: 1``: its
local tree kept them).  Waits are on readiness lines and on ``status``
answers, never on fixed sleeps."""

from __future__ import annotations

import errno
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from fednode.client import Client
from fednode.cluster import ProcessCluster, local_spec
from fednode.config import Cluster, write_cluster
from tests.conformance import until

CLOSED_WORLD = {"summary_refresh_s": 0.0, "vd_max_age_s": 0.0, "vd_miss_age_s": 0.0, "placement": "round_robin"}


def _fednode(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fednode.cli", *args], capture_output=True, text=True, timeout=120)


def _status(cluster_file: Path) -> dict[int, dict]:
    r = _fednode("status", "--cluster", str(cluster_file), "--json")
    return {row["node"]: row for row in json.loads(r.stdout)}


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
        until("the others' views exclude node 2", lambda: _views(path, (0, 1, 3)) == {
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


class _Worker:
    """One client at one agent, running creates, overwrites, reads and
    unlinks of its own files until told to stop, and keeping, per path, every
    content the path may have: one after an acknowledged operation, several
    after a failed one (a create, overwrite or unlink that failed may have
    happened or not, or an overwrite stopped between its truncate and its
    write).  ``errors`` keeps each failure's errno and text."""

    def __init__(self, cluster: Cluster, node: int) -> None:
        self.cluster, self.node = cluster, node
        self.may: dict[str, set[bytes | None]] = {}
        self.errors: list[tuple[int | None, str]] = []
        self.acked = 0
        self.stop = False
        self.died: BaseException | None = None

    def main(self) -> None:
        try:
            self.run()
        except BaseException as exc:  # reported by the test, which stops waiting for this worker
            self.died = exc

    def run(self) -> None:
        import random

        rng = random.Random(self.node)
        with Client(self.cluster, node=self.node) as c:
            c.mkdir(f"/w/n{self.node}")
            i = 0
            while not self.stop:
                i += 1
                live = [p for p, may in self.may.items() if None not in may]  # known to exist
                r = rng.random()
                if r < 0.4 or not live:
                    kind, path, data = "create", f"/w/n{self.node}/f{i}", b"new %d at %d" % (i, self.node)
                else:
                    kind = "overwrite" if r < 0.7 else "read" if r < 0.9 else "unlink"
                    path, data = rng.choice(live), b"rewritten %d at %d" % (i, self.node)
                old = self.may.get(path, {None})
                try:
                    self._do(c, kind, path, data)
                except AssertionError as exc:  # a read of content no operation wrote
                    self.errors.append((None, str(exc)))
                    continue
                except OSError as exc:
                    self.errors.append((exc.errno, str(exc)))
                    # a failed change may have happened, or not, or stopped between its steps
                    self.may[path] = old | {"create": {None, b"", data}, "overwrite": {b"", data},
                                            "unlink": {None}}.get(kind, set())  # fmt: skip
                    continue
                if kind != "read":
                    self.may[path] = {None} if kind == "unlink" else {data}
                self.acked += 1

    def _do(self, c: Client, kind: str, path: str, data: bytes) -> None:
        if kind == "create":
            c.write_file(path, data)
        elif kind == "overwrite":
            c.write_file(path, data, overwrite=True)
        elif kind == "unlink":
            c.unlink(path)
        else:
            got = c.read_file(path)
            assert got in self.may[path], (path, got, self.may[path])


def test_with_replication_a_killed_agent_under_load_loses_no_acknowledged_file(tmp_path):
    """The issue's agent test: 4 agents, ``replicas: 2``, heartbeats; clients
    at three of them write, overwrite, read and unlink all along; node 2 is
    killed with SIGKILL, evicted by the heartbeats (its files promoted at its
    successor), then started again (recover: evicted incarnation, reconcile,
    join).  Every acknowledged file reads back with its content at every
    agent, an acknowledged unlink stays done, and every failed operation is
    the timeout's EHOSTDOWN (a call that reached node 2 before the eviction)."""
    import threading

    path, cluster, files = _federation(tmp_path, heartbeat_s=0.2, heartbeat_misses=3, replicas=2)
    with ProcessCluster(path, log_dir=tmp_path / "logs") as pc:
        pc.wait_ready()
        _populate(cluster, files)
        workers = [_Worker(cluster, n) for n in (0, 1, 3)]
        threads = [threading.Thread(target=w.main, daemon=True) for w in workers]
        for t in threads:
            t.start()
        try:

            def progress(k: int) -> Callable[[], bool]:
                marks = [w.acked + k for w in workers]
                return lambda: (
                    any(w.died for w in workers) or all(w.acked >= m for w, m in zip(workers, marks, strict=True))
                )

            until("the workload runs", progress(20))
            pc.kill(2)
            until("the others' views exclude node 2", lambda: _views(path, (0, 1, 3)) == {
                n: (1, [0, 1, 3]) for n in (0, 1, 3)})  # fmt: skip
            until("the workload goes on without node 2", progress(20))
            with ProcessCluster(path, nodes=[2], log_dir=tmp_path / "logs", join=True) as back:
                back.wait_ready()
                assert _views(path, (0, 1, 2, 3)) == {n: (2, [0, 1, 2, 3]) for n in range(4)}
                until("the workload goes on with node 2 back", progress(20))
                for w in workers:
                    w.stop = True
                for t in threads:
                    t.join(timeout=120)
                assert not any(t.is_alive() for t in threads)
                assert not [w.died for w in workers if w.died], [repr(w.died) for w in workers]
                bad = [(w.node, e) for w in workers for e in w.errors if e[0] != errno.EHOSTDOWN]
                assert not bad, bad
                for n in range(4):
                    with Client(cluster, node=n) as c:
                        for p, data in files.items():
                            assert c.read_file(p) == data, (n, p)
                        for w in workers:
                            for p, may in w.may.items():
                                got = c.read_file(p) if c.exists(p) else None
                                assert got in may, (n, p, got, may)
                st = _status(path)
                assert all(st[n]["reachable"] for n in range(4))
        finally:
            for w in workers:
                w.stop = True
