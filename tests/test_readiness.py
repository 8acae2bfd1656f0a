"""Agents say when they are ready; launchers wait for that, not for a deadline.

``fednode serve`` prints a line on stdout when it listens and another when it
holds every member's summary; ``ProcessCluster.wait_ready`` (hence ``fednode
local``, the bench, the conformance suite and the RDMA guest suite) reads
those lines, so a slow machine is slow, not red, and an agent that exits
before it is ready is reported with its exit status and stderr at once.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from fednode.client import Client
from fednode.cluster import READY_COMPLETE, READY_LISTENING, AgentExited, ProcessCluster, local_spec, write_local
from fednode.config import load_cluster, write_cluster

FEDNODE = [sys.executable, "-m", "fednode.cli"]


def test_fednode_serve_announces_listening_then_ready_on_stdout(tmp_path: Path) -> None:
    path = write_local(tmp_path, 1)
    p = subprocess.Popen([*FEDNODE, "serve", "--cluster", str(path), "--node", "0"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)  # fmt: skip
    try:
        assert p.stdout is not None
        listening = p.stdout.readline().decode().split()
        ready = p.stdout.readline().decode().split()
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait()
    me = load_cluster(path).spec.node(0)
    assert listening == [READY_LISTENING, f"{me.host}:{me.port}", "tcp"]
    assert ready == [READY_COMPLETE]


def test_process_cluster_waits_for_every_agent_to_be_ready(tmp_path: Path) -> None:
    path = write_local(tmp_path, 3)
    with ProcessCluster(path, log_dir=tmp_path / "logs") as pc:
        pc.wait_ready()
        spec = pc.cluster.spec
        assert pc.state == {n: READY_COMPLETE for n in spec.members}
        assert pc.address == {n.id: f"{n.host}:{n.port}" for n in spec.nodes}
        with Client(pc.cluster, node=2, timeout=30) as c:
            assert c.status()["ready"]  # FedFS: every summary is held


def test_some_members_only_are_ready_when_they_listen(tmp_path: Path) -> None:
    path = write_local(tmp_path, 2)
    with ProcessCluster(path, nodes=[1]) as pc:
        pc.wait_ready()
        assert pc.state == {1: READY_LISTENING}


def test_an_agent_that_exits_before_it_is_ready_gives_its_status_and_stderr(tmp_path: Path) -> None:
    spec = local_spec(tmp_path, 2)
    write_cluster(tmp_path / "cluster.yaml", spec)
    taken = spec.nodes[1]
    with socket.socket() as squatter:  # node 1's port is taken: it cannot listen
        squatter.bind((taken.host, taken.port))
        squatter.listen()
        with ProcessCluster(tmp_path / "cluster.yaml") as pc:
            with pytest.raises(AgentExited) as ei:
                pc.wait_ready()
    msg = str(ei.value)
    assert "agent 1 exited with status 1 before it was ready" in msg
    assert f"cannot listen on {taken.host}:{taken.port}" in msg


def test_freezing_an_agent_that_has_exited_says_so_with_its_status(tmp_path: Path) -> None:
    """``freeze`` waits for the stop; an agent that exited instead is reaped
    there, so its status is kept for ``Popen`` and reported, not lost."""
    path = write_local(tmp_path, 1)
    with ProcessCluster(path) as pc:
        pc.wait_ready()
        pc.freeze(0)
        pc.kill(0)  # SIGKILL reaches the stopped agent
        with pytest.raises(AgentExited, match="before it could be frozen"):
            pc.freeze(0)
        assert pc.procs[0].poll() == -signal.SIGKILL
