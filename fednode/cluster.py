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
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Coroutine, Iterable, Sequence
from pathlib import Path
from typing import Any

from fednode.config import Cluster, ClusterSpec, NodeSpec, load_cluster, new_secret, write_cluster
from fednode.runtime import Agent
from fednode.transport import make_transport
from fednode.transport.inproc import InprocNetwork, InprocTransport


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
    """An asyncio event loop in a daemon thread, for synchronous callers."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
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

    def __init__(self, cluster: Cluster, nodes: Iterable[int] | None = None, transport: str = "inproc") -> None:
        self.cluster = cluster
        self.lt = LoopThread()
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


class ProcessCluster:
    """One ``fednode serve`` process per node of a cluster file."""

    def __init__(
        self, cluster_file: str | Path, nodes: Iterable[int] | None = None, log_dir: str | Path | None = None
    ) -> None:
        self.file = Path(cluster_file).resolve()
        self.cluster = load_cluster(self.file)
        self.log_dir = Path(log_dir) if log_dir else None
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        for n in nodes if nodes is not None else self.cluster.spec.members:
            self.start_node(n)

    def start_node(self, node: int) -> None:
        cmd = [sys.executable, "-m", "fednode.cli", "serve", "--cluster", str(self.file), "--node", str(node)]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        if self.log_dir is None:
            self.procs[node] = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
            )
            return
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_dir / f"n{node}.log", "ab") as err:  # the child keeps its own copy
            self.procs[node] = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=err, env=env)

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until every running agent answers and holds every member's summary."""
        from fednode.client import Client

        deadline = time.monotonic() + timeout
        members = self.cluster.spec.members
        last = "no agent answered yet"
        for n, p in self.procs.items():
            while True:
                if p.poll() is not None:
                    raise RuntimeError(f"agent {n} exited with status {p.returncode} (see its log)")
                try:
                    with Client(self.cluster, node=n, timeout=5) as c:
                        st = c.status()
                    if st["ready"] or len(self.procs) < len(members):
                        break
                    last = f"node {n} is not ready (start-up exchange incomplete)"
                except ConnectionError as exc:
                    last = str(exc)
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the federation did not come up within {timeout} s: {last}")
                time.sleep(0.05)

    def kill(self, node: int, sig: int = signal.SIGKILL) -> None:
        p = self.procs[node]
        p.send_signal(sig)
        p.wait(10)

    def stop(self, timeout: float = 10.0) -> dict[int, int]:
        """SIGTERM every agent (SIGKILL after ``timeout``); their exit statuses."""
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        out = {}
        for n, p in self.procs.items():
            try:
                out[n] = p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                out[n] = p.wait()
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
