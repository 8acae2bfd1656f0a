"""Migration in the real agents: ``fednode migrate`` moves a file or a tree
between agent processes over TCP (an open descriptor follows it), bad
targets are clear errors, ``fednode status`` shows the policy and the loads
a node knows, and a policy class runs unchanged on agents (co-locate moves a
file to the agent that asks for it)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fednode.client import Client
from fednode.cluster import ProcessCluster, local_spec
from fednode.config import write_cluster
from fedsim.protocol.messages import PeerUnavailable

FEDNODE = [sys.executable, "-m", "fednode.cli"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*FEDNODE, *args], capture_output=True, text=True, timeout=120)


def _home(base: Path, n: int, path: str) -> list[int]:
    return [i for i in range(n) if (base / f"n{i}{path}").is_file()]


def test_fednode_migrate_moves_a_file_and_a_tree_and_an_open_descriptor_follows(tmp_path):
    spec = local_spec(tmp_path, 3, rpc_timeout_ms=2000.0, protocol={"summary_refresh_s": 0.0})
    cf = tmp_path / "cluster.yaml"
    write_cluster(cf, spec)
    with ProcessCluster(cf, log_dir=tmp_path / "logs") as pc:
        pc.wait_ready()
        c = Client(pc.cluster, node=0, timeout=30)
        c.mkdir("/w")
        c.mkdir("/w/sub")
        data = bytes(range(256)) * 1024  # 256 KiB: several chunks
        home = c.write_file("/w/f", data)
        for i in range(3):
            c.write_file(f"/w/sub/g{i}", f"g{i}".encode())
        to = (home + 1) % 3
        reader = Client(pc.cluster, node=(home + 2) % 3, timeout=30)
        fd = reader.open("/w/f")
        r = _cli("migrate", "--cluster", str(cf), "/w/f", "--to", str(to))
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == f"/w/f: 1 file moved to node {to}"
        assert _home(tmp_path, 3, "/w/f") == [to]
        assert reader.read(fd, 16, 1000) == data[1000:1016]  # the descriptor followed the file
        reader.write(fd, b"Z", 0)
        reader.close(fd)
        assert c.read_file("/w/f") == b"Z" + data[1:]
        before = {p: _home(tmp_path, 3, p) for p in ["/w/f", "/w/sub/g0", "/w/sub/g1", "/w/sub/g2"]}
        r = _cli("migrate", "--cluster", str(cf), "/w", "--to", "2")
        assert r.returncode == 0, r.stderr
        tree_moved = sum(1 for h in before.values() if h != [2])
        assert r.stdout.startswith(f"/w: {tree_moved} file")
        assert all(_home(tmp_path, 3, p) == [2] for p in ["/w/f", "/w/sub/g0", "/w/sub/g1", "/w/sub/g2"])
        assert c.walk("/w")["/w/sub/g1"] == b"g1"
        r = _cli("migrate", "--cluster", str(cf), "/w", "--to", "2")
        assert r.returncode == 0 and "0 files moved to node 2 (already there)" in r.stdout
        r = _cli("migrate", "--cluster", str(cf), "/w/f", "--to", "7")
        assert r.returncode == 1 and "not a member" in r.stderr
        r = _cli("migrate", "--cluster", str(cf), "/w/none", "--to", "1")
        assert r.returncode == 1 and "No such file" in r.stderr
        r = _cli("status", "--cluster", str(cf), "--json")
        rows = json.loads(r.stdout)
        assert [row["migration_policy"] for row in rows] == ["none"] * 3
        assert sum(row["migrated_in"] for row in rows) == 1 + tree_moved and not any(
            row["migrations_in"] for row in rows
        )
        assert all(str(row["node"]) in row["loads"] for row in rows)  # its own load, at least
        text = _cli("status", "--cluster", str(cf)).stdout
        assert "migrating" in text and "loads it knows" in text
        pc.kill(1)
        with pytest.raises(PeerUnavailable) as down:
            c.migrate("/w/f", 1)
        assert down.value.node == 1
        assert c.read_file("/w/f") == b"Z" + data[1:] and _home(tmp_path, 3, "/w/f") == [2]
        c.disconnect()
        reader.disconnect()


def test_a_policy_runs_unchanged_on_agents(tmp_path):
    """co_locate on three agent processes: the file one agent keeps asking
    for ends up on that agent, moved by the policy's timer, not by hand."""
    protocol = {"summary_refresh_s": 0.0, "migration": "co_locate", "migration_period_s": 0.2}
    spec = local_spec(tmp_path, 3, protocol=protocol)
    cf = tmp_path / "cluster.yaml"
    write_cluster(cf, spec)
    with ProcessCluster(cf, log_dir=tmp_path / "logs") as pc:
        pc.wait_ready()
        c = Client(pc.cluster, node=0, timeout=30)
        c.mkdir("/p")
        home = c.write_file("/p/hot", b"hot")
        fan = (home + 1) % 3
        asker = Client(pc.cluster, node=fan, timeout=30)
        deadline = time.monotonic() + 60  # a bound on a condition, not a sleep: normally a few periods
        while not asker.status()["migrated_in"]:
            assert time.monotonic() < deadline, "the policy never moved the file to its requester"
            asker.stat("/p/hot")
        assert _home(tmp_path, 3, "/p/hot") == [fan]
        assert asker.read_file("/p/hot") == b"hot"
        assert asker.status()["migration_policy"] == "co_locate"
        c.disconnect()
        asker.disconnect()
