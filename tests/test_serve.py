"""``fednode serve --mount`` (issue 23): an agent and its mount in one process.

The in-process client (``fednode.serve.LocalClient``) first, on agents of an
``AgentGroup`` (no FUSE): it meets the checks a socket client meets
(argument types, the descriptor's owner per connection, the envelope's
shape), and giving it up closes its files.  Then the command itself, in a
2-node federation whose other agent is a ``fednode serve`` process: the
mount works (create, write, read, ls, rm through it) and the other agent
sees what it made; SIGTERM unmounts and exits 0; a bad mount point is a
one-line error before any agent starts.  Waiting is on readiness lines and
process exits, never on sleeps.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from fednode import cluster as cluster_module
from fednode.client import Client
from fednode.cluster import AgentGroup, LoopThread, ProcessCluster, local_spec, write_local
from fednode.config import Cluster, load_cluster
from tests.test_mount import HANG, pytestmark, sh  # noqa: F401  (pytestmark: FUSE or skip, as test_mount)


# ---------------------------------------------------------------------------- the in-process client
class _SharedLoopThread(LoopThread):
    """``AgentGroup``'s loop thread on a ``SharedLoop``, as ``fednode serve --mount`` runs it."""

    def __init__(self, loop: str | None = None) -> None:
        from fednode.serve import SharedLoop

        self.which = "shared"
        self.loop = SharedLoop()
        self.thread = threading.Thread(target=self.loop.run_locked, name="fednode-loop", daemon=True)
        self.thread.start()


@pytest.fixture(params=["posted", "shared"])
def group(tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[AgentGroup]:
    """Two agents on one loop: calls posted to its thread (uvloop, if installed),
    or run by the caller's thread under the loop's lock (``SharedLoop``)."""
    if request.param == "shared":
        monkeypatch.setattr(cluster_module, "LoopThread", _SharedLoopThread)
    g = AgentGroup(Cluster(local_spec(tmp_path, 2)), transport="inproc")
    try:
        yield g
    finally:
        g.stop()


def _local(group: AgentGroup, node: int = 0) -> Client:
    from fednode.serve import LocalClient

    return LocalClient(group.agents[node], group.lt.loop)


def test_local_client_is_a_client(group: AgentGroup) -> None:
    """Through either path, and for calls that wait on the other agent (a
    manager or home there: a task, which the shared loop must be woken for)."""
    from fedsim.protocol.hashing import names_managed_by

    c = _local(group)
    h = group.cluster.spec.hashing_fn()
    for name in names_managed_by(h, 1, "/r", 3):  # managed by the other agent
        c.write_file(name, b"remote")
        assert c.read_file(name) == b"remote" and c.getattr(name).size == 6
        c.unlink(name)
    c.mkdir("/d")
    assert c.write_file("/d/f", b"hello") in (0, 1)
    assert c.read_file("/d/f") == b"hello"
    assert c.readdir("/d") == [("f", False)]
    fd, attr = c.create_open("/d/g")
    assert attr is not None and attr.size == 0
    c.write(fd, b"xyz", 0)
    c.close(fd)
    assert group.op(1, "stat", "/d/g") == (False, 3)  # the other agent sees it
    fd_err, st = c.pipeline(("open", ("/d/none",)), ("stat", ["/d/f"]))  # an array as args, as a frame decodes it
    assert isinstance(fd_err, FileNotFoundError) and tuple(st) == (False, 5)
    with pytest.raises(FileNotFoundError):
        c.unlink("/d/none")
    c.unlink("/d/f")
    c.unlink("/d/g")
    c.rmdir("/d")
    c.disconnect()


def test_local_client_meets_the_socket_paths_checks(group: AgentGroup) -> None:
    """Every request is untrusted: types, the descriptor's owner, the envelope's shape."""
    a, b = _local(group), _local(group)
    a.write_file("/f", b"data")
    fd = a.open("/f")
    with pytest.raises(OSError) as e:  # another in-process client's descriptor: its own connection
        b.read(fd, 4)
    assert e.value.errno == errno.EBADF
    for op, args in (("read", ("/f", 0, 4)), ("stat", (b"/f",)), ("create", ()), ("no_such_op", ())):
        with pytest.raises(OSError) as e:
            a.call(op, *args)
        assert e.value.errno == errno.EINVAL, (op, e.value)
    ok, err, _ = a._exchange((("stat", "/f"),), False)[0]  # not an array of arguments: a garbled envelope
    assert not ok and err.errno == errno.EBADMSG
    assert a.read(fd, 4) == b"data"
    agent = group.agents[0]
    conn = a.conn
    assert agent._clients[conn].fds  # a's connection holds the descriptor
    a.disconnect()  # the agent closes what a left open

    async def settled() -> bool:
        return conn in agent._clients

    assert group.lt.run(settled()) is False
    with pytest.raises(OSError) as e:
        a.stat("/f")
    assert e.value.errno == errno.EBADF  # a disconnected client stays disconnected
    group.op(0, "unlink", "/f")  # not pinned by a's descriptor any more


# ---------------------------------------------------------------------------- fednode serve --mount
def _serve_cmd(path: Path, node: int, mnt: Path) -> list[str]:
    return [sys.executable, "-m", "fednode.cli", "serve", "--cluster", str(path), "--node", str(node), "--mount",
            str(mnt)]  # fmt: skip


def _listening(host: str, port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex((host, port)) == 0


def test_serve_mount_in_a_two_node_federation(tmp_path: Path) -> None:
    from fednode.mount import READY_MOUNTED, MountProcess, is_mounted

    path = write_local(tmp_path / "fed", 2)
    pc = ProcessCluster(path, nodes=[1], log_dir=tmp_path / "logs", new_session=True)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    mp = None
    try:
        pc.wait_ready()  # node 1 listens; it is ready once node 0 is up too
        with open(tmp_path / "serve.log", "ab") as log:
            mp = MountProcess(_serve_cmd(path, 0, mnt), mnt, stderr=log)
        assert mp.wait_ready() == f"{READY_MOUNTED} {mnt.resolve()}"
        assert is_mounted(mnt)
        (mnt / "d").mkdir()
        (mnt / "d" / "a").write_bytes(b"A" * 5000)
        sh(["cp", "-r", str(Path(__file__).parent.parent / "fednode" / "transport"), str(mnt / "d" / "t")])
        sh(["diff", "-r", str(Path(__file__).parent.parent / "fednode" / "transport"), str(mnt / "d" / "t")])
        assert (mnt / "d" / "a").read_bytes() == b"A" * 5000
        assert sorted(os.listdir(mnt / "d")) == ["a", "t"]
        with Client(load_cluster(path), node=1) as other:  # the other agent sees the mount's files ...
            assert other.read_file("/d/a") == b"A" * 5000
            assert sorted(other.listdir("/d")) == ["a", "t"]
            other.write_file("/d/from1", b"one")  # ... and the mount sees the other agent's
        assert (mnt / "d" / "from1").read_bytes() == b"one"
        sh(["rm", "-r", str(mnt / "d")])
        assert os.listdir(mnt) == []
        me = load_cluster(path).spec.node(0)
        assert _listening(me.host, me.port)
        mp.proc.send_signal(signal.SIGTERM)
        assert mp.proc.wait(HANG) == 0
        assert not is_mounted(mnt)
        assert not _listening(me.host, me.port)  # the agent stopped with the mount
    finally:
        if mp is not None:
            mp.stop()
        pc.stop()


def test_serve_mount_sigterm_before_the_agent_is_ready(tmp_path: Path) -> None:
    """Node 1 never starts, so node 0 listens but is never ready and never mounts:
    SIGTERM then stops the agent (exit 0, its port closed) and nothing is mounted."""
    from fednode.mount import is_mounted

    path = write_local(tmp_path / "fed", 2)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with open(tmp_path / "serve.log", "ab") as log:
        p = subprocess.Popen(_serve_cmd(path, 0, mnt), stdout=subprocess.PIPE, stderr=log, text=True,
                             start_new_session=True)  # fmt: skip
    try:
        assert p.stdout is not None
        assert p.stdout.readline().startswith("fednode-listening ")
        me = load_cluster(path).spec.node(0)
        assert _listening(me.host, me.port)
        p.send_signal(signal.SIGTERM)
        assert p.wait(HANG) == 0, (tmp_path / "serve.log").read_text()
        assert p.stdout.read() == ""  # neither ready nor mounted
        assert not is_mounted(mnt) and not _listening(me.host, me.port)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_serve_bad_mountpoint_is_a_clear_error_before_the_agent_starts(tmp_path: Path, kind: str) -> None:
    path = write_local(tmp_path / "fed", 1)
    mnt = tmp_path / "mnt"
    if kind == "file":
        mnt.write_text("not a directory")
    r = subprocess.run(_serve_cmd(path, 0, mnt), capture_output=True, text=True, timeout=HANG)
    assert r.returncode == 2
    assert r.stdout == ""  # not even fednode-listening: no agent was started
    assert r.stderr.startswith("fednode serve: ") and str(mnt) in r.stderr, r.stderr
    assert ("mkdir -p" in r.stderr) if kind == "missing" else ("not a directory" in r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_launchers_know_the_mounted_line() -> None:
    """``fednode.cluster`` spells it again so that launchers need not import libfuse."""
    from fednode import mount
    from fednode.cluster import READY_MOUNTED

    assert READY_MOUNTED == mount.READY_MOUNTED


@pytest.mark.skipif(shutil.which("postmark") is None, reason="needs postmark (./dev.sh setup installs it)")
def test_mount_bench_has_the_inproc_case(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "fednode.tools.mount_bench", "--quick", "--only", "fed1-inproc",
         "--workloads", "postmark", "--work", str(tmp_path / "w")],
        capture_output=True, text=True, timeout=HANG,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    head = r.stdout.splitlines()[0].split()
    assert head[-1] == "fed1-inproc" and any(ln.startswith("postmark") for ln in r.stdout.splitlines()), r.stdout
