"""Join and leave with real agents (issue 13): ``fednode serve --join``,
``fednode leave``, ``fednode status`` at process level (ProcessCluster,
readiness lines, no sleeps), and the errors of bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fednode.client import Client
from fednode.cluster import AgentExited, ProcessCluster, local_spec
from fednode.config import Cluster, write_cluster
from fednode.localfs import LocalFS

CLOSED_WORLD = {"summary_refresh_s": 0.0, "vd_max_age_s": 0.0, "vd_miss_age_s": 0.0}


def _files(base: Path, n: int, **protocol: Any) -> tuple[Path, Path, Cluster]:
    """A federation of ``n`` agents (``base/first.yaml``) and a cluster file
    for the node that joins it (``base/joiner.yaml``: the seeds and itself)."""
    spec = local_spec(base, n + 1, protocol={**CLOSED_WORLD, **protocol})
    first, joiner = base / "first.yaml", base / "joiner.yaml"
    write_cluster(first, spec.model_copy(update={"nodes": spec.nodes[:n]}))
    write_cluster(joiner, spec)
    return first, joiner, Cluster(spec, joiner)


def _fednode(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fednode.cli", *args], capture_output=True, text=True, timeout=120)


def _status(cluster_file: Path) -> dict[int, dict]:
    r = _fednode("status", "--cluster", str(cluster_file), "--json")
    return {row["node"]: row for row in json.loads(r.stdout)}


def _walk_local(base: Path, nodes: tuple[int, ...]) -> dict[str, bytes | None]:
    """The namespace the local trees of ``nodes`` make (their union)."""
    out: dict[str, bytes | None] = {}
    for i in nodes:
        for p, v in LocalFS(base / f"n{i}").tree().items():
            out[p] = v if v is not None else out.get(p)
    return out


def test_an_agent_joins_a_running_federation_and_another_leaves(tmp_path):
    first, joiner, cluster = _files(tmp_path, 3)
    LocalFS(tmp_path / "n0").mkdir("/shared")
    new = LocalFS(tmp_path / "n3")
    new.create("/shared/from_n3")
    new.write("/shared/from_n3", 0, b"joined")
    new.create("/own/file")
    with ProcessCluster(first, log_dir=tmp_path / "logs") as pc:
        pc.wait_ready()
        with Client(cluster, node=1) as c:
            c.create("/shared/before")
            assert [n for n, _ in c.readdir("/shared")] == ["before"]  # a VD cached before the join
        with ProcessCluster(joiner, nodes=[3], log_dir=tmp_path / "logs", join=True) as pj:
            pj.wait_ready()  # fednode-ready: it is a member and holds every summary
            st = _status(joiner)
            assert {n: (r["epoch"], r["members"]) for n, r in st.items()} == {n: (1, [0, 1, 2, 3]) for n in range(4)}
            with Client(cluster, node=2) as c:
                assert sorted(n for n, _ in c.readdir("/shared")) == ["before", "from_n3"]  # merged with n3 only
                assert c.read_file("/shared/from_n3") == b"joined"
                assert ("own", True) in c.readdir("/")
                c.create("/shared/after")
            with Client(cluster, node=3) as c:
                assert sorted(n for n, _ in c.readdir("/shared")) == ["after", "before", "from_n3"]
            r = _fednode("leave", "--cluster", str(joiner), "--node", "1")
            assert r.returncode == 0 and "view 2" in r.stdout, r.stderr
            st = _status(joiner)
            assert st[1]["member"] is False and st[1]["epoch"] == 2
            assert {n: (st[n]["epoch"], st[n]["members"]) for n in (0, 2, 3)} == {n: (2, [0, 2, 3]) for n in (0, 2, 3)}
            text = _fednode("status", "--cluster", str(joiner)).stdout
            assert "view" in text and "0,2,3" in text and "left" in text
            with Client(cluster, node=3) as c:
                # node 1's files left with it (leave_files: unavailable); the rest is whole
                held = {p.rsplit("/", 1)[1] for p in _walk_local(tmp_path, (0, 2, 3)) if p.startswith("/shared/")}
                assert {n for n, _ in c.readdir("/shared")} == held and "from_n3" in held
                assert c.walk("/") == _walk_local(tmp_path, (0, 2, 3))
                c.create("/shared/late")
            with Client(cluster, node=0) as c:
                assert "late" in {n for n, _ in c.readdir("/shared")}


def test_an_agent_that_leaves_with_migrate_moves_its_files_and_the_namespace_stays_whole(tmp_path):
    """``protocol.leave_files: migrate`` with agent processes: ``fednode
    leave`` makes node 1 move its files to nodes 0 and 2 first; every file it
    held reads back its bytes at its pathname, the namespace is what it was,
    and node 1's root holds directories only."""
    first, _, cluster = _files(tmp_path, 3, leave_files="migrate")
    one = LocalFS(tmp_path / "n1")
    one.mkdir("/only1/empty")
    held = {"/only1/big": bytes(range(256)) * 1000, "/shared/from_n1": b"n1's", "/shared/deep/f": b"deep"}
    for path, data in held.items():
        one.create(path)
        one.write(path, 0, data)
    LocalFS(tmp_path / "n0").mkdir("/shared")
    with ProcessCluster(first, log_dir=tmp_path / "logs") as pc:
        pc.wait_ready()
        with Client(cluster, node=2) as c:
            c.write_file("/shared/via_2", b"made through the federation")
            before = c.walk("/")
        held = {p: v for p, v in LocalFS(tmp_path / "n1").tree().items() if v is not None}  # /shared/via_2 too?
        assert set(held) >= {"/only1/big", "/shared/from_n1", "/shared/deep/f"}
        r = _fednode("leave", "--cluster", str(first), "--node", "1")
        assert r.returncode == 0 and "view 1" in r.stdout, r.stderr
        st = _status(first)
        assert {n: (st[n]["epoch"], st[n]["members"]) for n in (0, 2)} == {n: (1, [0, 2]) for n in (0, 2)}
        assert st[0]["migrated_in"] + st[2]["migrated_in"] == len(held)
        with Client(cluster, node=0) as c:
            assert c.walk("/") == before == _walk_local(tmp_path, (0, 2))
            for path, data in held.items():
                assert c.read_file(path) == data
            assert ("empty", True) in c.readdir("/only1")
    assert not [p for p, v in LocalFS(tmp_path / "n1").tree().items() if v is not None]


def test_joining_with_a_wrong_secret_fails_clearly_and_changes_nothing(tmp_path):
    first, _, cluster = _files(tmp_path, 2)
    bad = cluster.spec.model_copy(update={"secret": "not-the-federation-secret-at-all"})
    write_cluster(tmp_path / "bad.yaml", bad)
    with ProcessCluster(first, log_dir=tmp_path / "logs") as pc:
        pc.wait_ready()
        with ProcessCluster(tmp_path / "bad.yaml", nodes=[2], log_dir=tmp_path / "logs", join=True) as pj:
            with pytest.raises(AgentExited, match="could not join the federation") as ei:
                pj.wait_ready()
            assert "wrong key" in str(ei.value) or "refused" in str(ei.value)
        st = _status(first)
        assert {n: (r["epoch"], r["members"]) for n, r in st.items()} == {0: (0, [0, 1]), 1: (0, [0, 1])}


def test_leaving_a_node_the_cluster_file_does_not_name_is_a_usage_error(tmp_path):
    first, _, _ = _files(tmp_path, 2)
    r = _fednode("leave", "--cluster", str(first), "--node", "7")
    assert r.returncode == 2 and "node 7 is not in the cluster file" in r.stderr


def test_only_the_secret_makes_a_node_leave(tmp_path):
    """``leave`` needs a proof derived from the federation's secret: a client
    (client key only) is refused, and a client file cannot compute the proof."""
    from fednode.cluster import AgentGroup
    from fednode.config import client_file_spec
    from fedsim.schema import ConfigError

    first, _, _ = _files(tmp_path, 2)
    from fednode.config import load_cluster

    cluster = load_cluster(first)
    with AgentGroup(cluster, transport="inproc") as g:
        with pytest.raises(PermissionError, match="the proof is not node 1's"):
            g.op(1, "leave", bytes(32))
        with pytest.raises(PermissionError):
            g.op(1, "leave", cluster.leave_proof(0))  # another node's proof
        assert [a.node.epoch for a in g.agents.values()] == [0, 0]
        with pytest.raises(ConfigError, match="client file"):
            Cluster(client_file_spec(cluster)).leave_proof(1)
        assert g.leave(1) == 1 and g.agents[0].node.members == (0,)
