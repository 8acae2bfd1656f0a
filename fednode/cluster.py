"""Running federations on one machine: agents in this process, or one process per agent.

* ``AgentGroup``: the agents of a cluster file on one event loop in a
  background thread, with the in-process transport (tests, the conformance
  suite) or TCP.  Synchronous callers use ``op`` / ``traced``.
* ``ProcessCluster``: one ``fednode serve`` process per node, as a user runs
  them (``fednode local``, the TCP conformance and fault tests, the bench).
* ``local_spec``: a cluster file for N agents on this machine (free ports,
  roots ``BASE/n0 ...``, a fresh secret).
"""

from __future__ import annotations

import asyncio
import logging
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Coroutine, Iterable, Sequence
from pathlib import Path
from typing import IO, Any

from fednode import eventloop
from fednode.config import Cluster, ClusterSpec, NodeSpec, load_cluster, new_secret, write_cluster
from fednode.runtime import Agent
from fednode.transport import make_transport
from fednode.transport.inproc import InprocNetwork, InprocTransport

log = logging.getLogger("fednode")


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct ports free right now on ``host``."""
    socks, ports = [], []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind((host, 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def local_spec(base: Path, n: int, host: str = "127.0.0.1", devices: Sequence[str] = (), **options: Any) -> ClusterSpec:
    """A cluster of ``n`` agents on this machine, roots ``base/n{i}`` (created);
    with ``devices``, node i uses RDMA device ``devices[i % len(devices)]``."""
    if n <= 0:
        raise ValueError(f"a federation needs at least one node, not {n}")
    base = Path(base).resolve()
    nodes = []
    for i, port in enumerate(free_ports(n, host)):
        root = base / f"n{i}"
        root.mkdir(parents=True, exist_ok=True)
        dev = devices[i % len(devices)] if devices else None
        nodes.append(NodeSpec(id=i, host=host, port=port, root=str(root), rdma_device=dev))
    return ClusterSpec(secret=new_secret(), nodes=nodes, **options)


class LoopThread:
    """An event loop in a daemon thread, for synchronous callers: uvloop where
    installed, unless ``loop`` (or ``$FEDNODE_LOOP``) says otherwise (see
    ``fednode.eventloop``)."""

    def __init__(self, loop: str | None = None) -> None:
        factory, self.which = eventloop.choose(loop)
        log.info("agent group: event loop: %s", self.which)
        self.loop = factory()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fednode-loop", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float | None = 60.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


class AgentGroup:
    """Agents of one cluster running in this process, on one event loop."""

    def __init__(
        self, cluster: Cluster, nodes: Iterable[int] | None = None, transport: str = "inproc", loop: str | None = None
    ) -> None:
        self.cluster = cluster
        self.transport = transport
        self.lt = LoopThread(loop)
        self.network = InprocNetwork()
        self.agents: dict[int, Agent] = {}
        ids = list(nodes) if nodes is not None else cluster.spec.members
        for n in ids:
            if transport == "inproc":
                t: Any = InprocTransport(self.network, n, cluster.spec.max_message_bytes)
            else:
                t = make_transport(cluster, n, transport)
            self.agents[n] = Agent(cluster, n, t)
        try:
            self.lt.run(self._start())
            self.wait_ready()
        except BaseException:
            self.stop()
            raise

    async def _start(self) -> None:
        for a in self.agents.values():
            await a.start()

    def wait_ready(self, timeout: float = 20.0) -> None:
        """Until every agent's node is ready (FedFS: holds every member's summary)."""
        deadline = time.monotonic() + timeout
        while not all(a.ready for a in self.agents.values()):
            if time.monotonic() > deadline:
                waiting = sorted(i for i, a in self.agents.items() if not a.ready)
                raise TimeoutError(f"agents {waiting} not ready after {timeout} s (start-up exchange incomplete)")
            time.sleep(0.01)

    def op(self, node: int, name: str, *args: Any) -> Any:
        """API operation ``name`` with ``node`` as the requester; errors raise."""
        return self.lt.run(self.agents[node].api(name, args))

    def traced(self, node: int, name: str, *args: Any) -> tuple[Any, list[tuple[int, int, str]]]:
        """(value or exception, messages) of one operation."""

        async def go() -> tuple[Any, list[tuple[int, int, str]]]:
            log: list[tuple[int, int, str]] = []
            try:
                return await self.agents[node].api(name, args, log), log
            except Exception as exc:
                return exc, log

        return self.lt.run(go())

    def join(self, cluster: Cluster, node: int, transport: str = "inproc") -> Agent:
        """Start agent ``node`` of ``cluster`` (a cluster file that names it
        and seeds of this group's federation) joining the running federation;
        returns once it is a member and ready."""
        t: Any = (
            InprocTransport(self.network, node, cluster.spec.max_message_bytes)
            if transport == "inproc"
            else make_transport(cluster, node, transport)
        )
        agent = self.agents[node] = Agent(cluster, node, t, join=True)

        async def go() -> None:
            await agent.start()
            assert agent.joined is not None
            await agent.joined

        self.lt.run(go())
        self.wait_ready()
        return agent

    def leave(self, node: int) -> int:
        """Agent ``node`` leaves the federation gracefully and stops; the new epoch."""
        epoch = self.op(node, "leave", self.agents[node].cluster.leave_proof(node))
        self.stop_agent(node)
        del self.agents[node]
        return epoch

    def crash(self, node: int) -> None:
        """Agent ``node``'s host loses its power: the agent stops at once, what
        is sent to or from it is lost and its connections stay open, so its
        peers find out by their timeouts and heartbeats (as the simulator's
        ``crash``, and as ``ProcessCluster.freeze`` for processes)."""
        if self.transport != "inproc":
            raise ValueError(f"only in-process agents can lose their power here, not {self.transport} ones")
        self.network.down.add(node)
        self.lt.run(self.agents[node].halt())

    def restart(self, node: int) -> Agent:
        """Agent ``node``, crashed, starts again over its old directory as
        ``fednode serve --join`` does (``rejoin``: the protocol's recovery);
        its old connections close first, as a killed process's do.  Returns
        once it is a member again and ready."""
        self.lt.run(self.agents[node].stop())
        self.network.down.discard(node)
        return self.join(self.cluster, node, self.transport)

    def stop_agent(self, node: int) -> None:
        self.lt.run(self.agents[node].stop())

    def stop(self) -> None:
        async def all_stop() -> None:
            for a in self.agents.values():
                if a.running:
                    await a.stop()

        try:
            self.lt.run(all_stop(), timeout=10)
        finally:
            self.lt.close()

    def __enter__(self) -> AgentGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# The readiness lines ``fednode serve`` prints on stdout (its logging goes to
# stderr).  A launcher reads them instead of polling the agents against a
# fixed deadline: a slow machine is then slow, not a failure, and an agent
# that dies first is seen at once, by the end of its stdout.  The first line
# says the agent listens ("fednode-listening HOST:PORT TRANSPORT"), the second
# ("fednode-ready") that its node is ready (``Node.ready``; FedFS: it holds
# every member's summary), so that client operations see the whole federation.
READY_LISTENING = "fednode-listening"
READY_COMPLETE = "fednode-ready"
#: and, from ``fednode serve --mount``, a third once its mount is live (``fednode.mount.READY_MOUNTED``,
#: the same line ``fednode mount`` prints; spelled here so launchers need not import the FUSE library)
READY_MOUNTED = "fednode-mounted"


class AgentExited(RuntimeError):
    """An agent process ended before it was ready: its status and the tail of its stderr."""


class ProcessCluster:
    """One ``fednode serve`` process per node of a cluster file (``loop``: each
    agent's event loop, ``fednode serve --loop``; default ``$FEDNODE_LOOP`` or auto)."""

    def __init__(
        self,
        cluster_file: str | Path,
        nodes: Iterable[int] | None = None,
        log_dir: str | Path | None = None,
        loop: str | None = None,
        new_session: bool = False,
        join: bool = False,
        mount: tuple[int, str | Path] | None = None,
    ) -> None:
        """``mount``: (node, mount point): that agent runs with ``--mount``, the
        federation mounted in its process, and ``wait_ready`` waits for the mount too."""
        self.file = Path(cluster_file).resolve()
        self.mount = None if mount is None else (mount[0], Path(mount[1]).resolve())
        self.new_session = new_session  # agents in their own sessions: a terminal's Ctrl-C reaches the launcher only
        self.join = join  # ``fednode serve --join``: each agent joins a running federation (the file's seeds)
        self.cluster = load_cluster(self.file)
        self.log_dir = Path(log_dir) if log_dir else None
        self.loop = loop
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.state: dict[int, str] = {}  # node -> "started", READY_LISTENING or READY_COMPLETE
        self.address: dict[int, str] = {}  # node -> "host:port", as the agent announced it
        self._stderr: dict[int, IO[bytes]] = {}  # where each agent's stderr goes (its tail explains an exit)
        self._partial: dict[int, bytes] = {}
        for n in nodes if nodes is not None else self.cluster.spec.members:
            self.start_node(n)

    def start_node(self, node: int) -> None:
        cmd = [sys.executable, "-m", "fednode.cli", "serve", "--cluster", str(self.file), "--node", str(node)]
        if self.loop:
            cmd += ["--loop", self.loop]
        if self.join:
            cmd.append("--join")
        if self.mount is not None and self.mount[0] == node:
            cmd += ["--mount", str(self.mount[1])]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        old = self._stderr.pop(node, None)
        if old is not None:
            old.close()
        if self.log_dir is None:
            err: IO[bytes] = tempfile.TemporaryFile()
        else:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            err = open(self.log_dir / f"n{node}.log", "ab+")
        self._stderr[node] = err
        # stdout: the readiness lines, unbuffered so select() sees every byte
        self.procs[node] = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, env=env, bufsize=0,
            start_new_session=self.new_session,
        )  # fmt: skip
        self.state[node] = "started"
        self._partial[node] = b""

    def wait_ready(self, timeout: float | None = None) -> None:
        """Until every agent announces it is ready (its node's start-up
        exchange is done), or, when only some of the members run, listens.  No deadline
        unless ``timeout`` (seconds) is given; an agent that exits first is an
        ``AgentExited`` with its status and stderr tail."""
        whole = self.join or len(self.procs) == len(self.cluster.spec.members)  # a joiner is ready once a member
        wants = {n: READY_COMPLETE if whole else READY_LISTENING for n in self.procs}
        if self.mount is not None and self.mount[0] in wants:
            wants[self.mount[0]] = READY_MOUNTED  # printed after READY_COMPLETE, once the kernel talks to it
        order = ("started", READY_LISTENING, READY_COMPLETE, READY_MOUNTED)
        waiting = {n for n in self.procs if order.index(self.state[n]) < order.index(wants[n])}
        deadline = None if timeout is None else time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            for n in waiting:
                sel.register(self.procs[n].stdout, selectors.EVENT_READ, n)  # type: ignore[arg-type]
            while waiting:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    states = {n: self.state[n] for n in sorted(waiting)}
                    raise TimeoutError(f"agents not ready within {timeout} s: {states}")
                for key, _ in sel.select(left):
                    n = key.data
                    if not self._read_lines(n):
                        raise self._exited(n)
                    if order.index(self.state[n]) >= order.index(wants[n]):
                        waiting.discard(n)
                        sel.unregister(key.fileobj)

    def _read_lines(self, node: int) -> bool:
        """Take what agent ``node`` printed; False at the end of its stdout (it exited)."""
        out = self.procs[node].stdout
        assert out is not None
        data = os.read(out.fileno(), 4096)
        if not data:
            return False
        *lines, self._partial[node] = (self._partial[node] + data).split(b"\n")
        for raw in lines:
            word, _, rest = raw.decode(errors="replace").partition(" ")
            if word == READY_LISTENING:
                self.state[node] = READY_LISTENING
                self.address[node] = rest.split(" ")[0]
            elif word == READY_COMPLETE:
                self.state[node] = READY_COMPLETE
            elif word == READY_MOUNTED:
                self.state[node] = READY_MOUNTED
        return True

    def stderr_tail(self, node: int, lines: int = 20) -> str:
        """The last ``lines`` lines agent ``node`` wrote to stderr."""
        err = self._stderr[node]
        err.flush()
        err.seek(0)
        return b"\n".join(err.read().splitlines()[-lines:]).decode(errors="replace")

    def _exited(self, node: int) -> AgentExited:
        rc = self.procs[node].wait()  # its stdout is closed: it is exiting
        return AgentExited(
            f"agent {node} exited with status {rc} before it was ready; the end of its stderr:\n"
            + self.stderr_tail(node)
        )

    def freeze(self, node: int) -> None:
        """SIGSTOP agent ``node``: it computes nothing more, and its kernel
        keeps its sockets open without resetting them, so to its peers it is
        a host that lost its power (their requests time out, as when the
        simulator crashes a node; a SIGKILL would refuse them at once).
        ``kill`` ends it for good (SIGKILL reaches a stopped process)."""
        p = self.procs[node]
        if p.poll() is None:
            p.send_signal(signal.SIGSTOP)
            _, status = os.waitpid(p.pid, os.WUNTRACED)  # until it has stopped (a stop is reported, nothing reaped)
            if os.WIFSTOPPED(status):
                return
            p.returncode = os.waitstatus_to_exitcode(status)  # it exited, reaped here: Popen learns its status from us
        raise AgentExited(
            f"agent {node} exited with status {p.returncode} before it could be frozen; the end of its stderr:\n"
            + self.stderr_tail(node)
        )

    def kill(self, node: int, sig: int = signal.SIGKILL) -> None:
        p = self.procs[node]
        p.send_signal(sig)
        p.wait(10)

    def stop(self, timeout: float = 10.0) -> dict[int, int]:
        """SIGTERM every agent (SIGKILL after ``timeout``); their exit statuses.
        An agent with a mount is stopped first (it unmounts, then stops), so no
        call of its mount finds another agent gone; a mount it left behind
        (it was killed) is unmounted."""
        if self.mount is not None and self.mount[0] in self.procs:
            p = self.procs[self.mount[0]]
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.send_signal(signal.SIGCONT)
                try:
                    p.wait(timeout)
                except subprocess.TimeoutExpired:
                    p.kill()
            from fednode.mount import is_mounted, unmount

            if is_mounted(self.mount[1]):
                unmount(self.mount[1])
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.send_signal(signal.SIGCONT)  # a frozen agent, too, ends now
        out = {}
        for n, p in self.procs.items():
            try:
                out[n] = p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                out[n] = p.wait()
            if p.stdout is not None:
                p.stdout.close()
        for err in self._stderr.values():
            err.close()
        self._stderr.clear()
        return out

    def __enter__(self) -> ProcessCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def write_local(base: str | Path, n: int, **options: Any) -> Path:
    """Write ``base/cluster.yaml`` for ``n`` local agents; returns its path."""
    base = Path(base)
    base.mkdir(parents=True, exist_ok=True)
    path = base / "cluster.yaml"
    write_cluster(path, local_spec(base, n, **options))
    return path
