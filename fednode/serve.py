"""An agent and a FUSE mount of its federation in one process (issue 23).

    fednode serve --cluster FILE --node ID --mount MOUNTPOINT

``fednode mount`` is a client program: each FUSE request it serves crosses a
loopback TCP connection to its agent, framed, packed, authenticated at
connect and unpacked twice, in two processes.  Here the mount's calls to its
own agent never leave the process: ``LocalClient`` has ``Client``'s API and
hands each call to the agent's event loop as the envelope a socket would have
carried, already decoded (``Agent.on_local``), and the reply comes back as the
tuple the agent built.  What the socket path checks still applies, because it
is the same path after the decoding: the envelope's shape, the arguments'
exact types, the descriptor's owner (each ``LocalClient`` is a connection of
its own, ``runtime.LocalClientConn``), the per-connection limits.  Left out
are only what protects a socket: framing, the codec, the HMAC handshake
(nothing outside the process can reach the in-process connection), the
per-source connection limits and the idle timeout, and the reply's frame size
bound (nothing is framed; a read is still cut to ``max_message_bytes``).

Threads.  The agent's event loop runs in a thread of its own (uvloop runs in
any thread; the agent needs no signal handlers of its loop here); libfuse
runs in another (``mount.serve_fuse``, as for ``fednode mount``: its own
callbacks on its own threads); the main thread waits for signals, so
SIGINT/SIGTERM/SIGHUP unmount as they do a ``fednode mount``, and the agent
stops after the mount has ended, so no call of the mount finds its agent
gone.  A FUSE callback that calls the agent posts the envelope with
``loop.call_soon_threadsafe`` (one write to the loop's wake-up descriptor)
and waits on a ``queue.SimpleQueue`` with the GIL released; the loop runs
the call (to its reply, for an operation that is local: no task, no extra
turn) and puts the reply on that queue.  So the mount and the agent share one
GIL: the Python work of a call is the agent's alone, no longer split over
two processes, and the 2 cores the socket mount could use for a single
stream of requests are one.

Start-up order: the mount point is checked before anything starts (a clear
error and exit status 2, no agent left listening); then the agent starts and
prints ``fednode-listening``, becomes ready (``fednode-ready``: it has every
member's summary), and only then is the directory mounted (``fednode-mounted
MOUNTPOINT``, the line ``fednode mount`` prints).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import logging
import os
import queue
import selectors
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from fednode import eventloop, wire
from fednode.client import Client
from fednode.config import Cluster
from fednode.localfs import LocalFS
from fednode.runtime import Agent, LocalClientConn
from fednode.transport import make_transport
from fedsim.protocol.messages import PeerUnavailable

log = logging.getLogger("fednode")

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _UnlockedEpoll:
    """An epoll object whose ``poll`` releases the agent's lock while it
    blocks, and takes it back before the loop looks at what it returned."""

    __slots__ = ("_ep", "_lock")

    def __init__(self, ep: Any, lock: threading.Lock) -> None:
        self._ep = ep
        self._lock = lock

    def poll(self, timeout: float = -1, maxevents: int = -1) -> list[tuple[int, int]]:
        self._lock.release()
        try:
            return self._ep.poll(timeout, maxevents)
        finally:
            self._lock.acquire()

    def __getattr__(self, name: str) -> Any:  # register, modify, unregister, fileno, close
        return getattr(self._ep, name)


class SharedLoop(asyncio.SelectorEventLoop):
    """The agent's event loop, shared with the mount's threads: its thread
    holds ``agent_lock`` whenever it runs anything, and lets go of it only
    while it waits for events (inside epoll_wait).  A FUSE thread that takes
    the lock is then exactly as if it were the loop's thread between two
    callbacks, and runs a call to the agent itself (``LocalClient``): an
    operation the agent answers without the network (every one in a 1-agent
    federation) costs no thread hand-over at all, where posting it to the
    loop costs two wake-ups (the loop's, then the caller's), which the
    profile showed to be as dear as the call.  A call that must wait for the
    network starts as on the loop (a task, scheduled by ``call_soon``) and
    ``leave`` wakes the loop to run it.

    asyncio's own selector loop, not uvloop: uvloop waits inside libuv, with
    no place to let go of a lock.  (It relies on two internals of
    ``selectors.EpollSelector`` and ``BaseEventLoop``, ``_selector`` and
    ``_ready``/``_scheduled``/``_write_to_self``; ``tests/test_serve.py`` runs
    this path.)"""

    def __init__(self) -> None:
        self.agent_lock = threading.Lock()
        selector = selectors.EpollSelector()
        selector._selector = _UnlockedEpoll(selector._selector, self.agent_lock)  # type: ignore[attr-defined]
        super().__init__(selector)

    def run_locked(self) -> None:
        """``run_forever`` holding the lock (the thread's target)."""
        with self.agent_lock:
            self.run_forever()

    def enter(self) -> int:
        """Take the lock (the loop is waiting for events, or another caller
        is in); returns what ``leave`` needs to know whether to wake the loop."""
        self.agent_lock.acquire()
        return len(self._scheduled)  # type: ignore[attr-defined]

    def leave(self, timers: int) -> None:
        """Let go of the lock, waking the loop if the call left it work: a
        callback (a task's first step, a future's waiters) or a new timer,
        which its epoll_wait would otherwise not see until its next event."""
        try:
            if self._ready or len(self._scheduled) != timers:  # type: ignore[attr-defined]
                self._write_to_self()  # type: ignore[attr-defined]
        finally:
            self.agent_lock.release()


class LocalClient(Client):
    """A client of an agent in this process: ``Client``'s API (so ``FedOps``,
    ``MountStats`` and every convenience work unchanged), each round trip a
    hand-over to the agent's loop instead of a socket.  As a ``Client``, it
    serialises its calls (one lock), and a call whose reply does not come
    within the timeout gives the connection up: the next call gets a new one,
    and the descriptors of the old are EBADF (they carry their connection)."""

    def __init__(self, agent: Agent, loop: asyncio.AbstractEventLoop, timeout: float | None = None) -> None:
        self._setup(agent.cluster, timeout)
        self.agent = agent
        self.loop = loop
        self.node = agent.id
        self.conn: LocalClientConn | None = LocalClientConn()
        self._gen = 0

    def _connection(self) -> LocalClientConn:
        conn = self.conn
        if conn is not None:
            return conn
        if self._closed:
            raise OSError(errno.EBADF, "this Client was disconnected (make a new one)")
        conn = self.conn = LocalClientConn()
        self._gen += 1
        return conn

    def _exchange(
        self, calls: tuple[tuple[str, tuple[Any, ...]], ...], trace: bool
    ) -> list[tuple[bool, Any, list[tuple[int, int, str]]]]:
        """Post ``calls`` to the agent's loop in one hand-over and wait for
        every reply: what ``Client._exchange`` does over its socket."""
        with self._lock:
            conn = self._connection()
            gen = self._gen
            rids: dict[int, int] = {}
            envs = []
            for i, (op, args) in enumerate(calls):
                rid = next(self._rid)
                rids[rid] = i
                if type(args) is list:  # an array, as a frame would decode it
                    args = tuple(args)
                envs.append((wire.CLIENT, rid, op, self._translate(op, args), bool(trace)))
            loop = self.loop
            if isinstance(loop, SharedLoop):  # run here, as the loop would (see SharedLoop)
                if loop.is_closed():
                    self._drop()
                    raise PeerUnavailable(self.node, "the agent has stopped")
                timers = loop.enter()
                try:
                    self.agent.on_local(conn, envs)
                finally:
                    loop.leave(timers)
            else:
                try:
                    loop.call_soon_threadsafe(self.agent.on_local, conn, envs)
                except RuntimeError:  # the loop is closed: the agent has stopped
                    self._drop()
                    raise PeerUnavailable(self.node, "the agent has stopped") from None
            got: dict[int, tuple[Any, ...]] = {}
            while len(got) < len(calls):
                try:
                    out = conn.replies.get(timeout=self.timeout)
                except queue.Empty:
                    self._drop()  # the calls may still run: never sent again, the next call gets a new connection
                    raise PeerUnavailable(self.node, "the agent did not answer within the timeout") from None
                i = rids.get(out[1])
                if i is not None:
                    got[i] = out
                elif out[1] == 0:  # the agent could not read an envelope: every call still out failed
                    for j in range(len(calls)):
                        got.setdefault(j, out)
        return self._outcomes(calls, got, gen)

    def _drop(self) -> None:
        """Give the connection up: the agent closes its descriptors (``on_lost``), in its loop."""
        conn, self.conn = self.conn, None
        if conn is not None:
            with contextlib.suppress(RuntimeError):  # a closed loop: the agent, and its descriptors, are gone
                self.loop.call_soon_threadsafe(self._lose, conn)

    def _lose(self, conn: LocalClientConn) -> None:
        conn.close()
        self.agent.on_lost(conn, "the in-process client disconnected")

    def disconnect(self) -> None:
        self._closed = True
        self._drop()


def mountpoint_error(mountpoint: str | Path) -> str | None:
    """Why ``mountpoint`` cannot be mounted on, in one line with the fix, or
    None: checked before the agent starts, so a typo costs no half-started agent."""
    from fednode.mount import is_mounted

    mp = Path(mountpoint)
    if not mp.exists():
        if os.path.lexists(mp):
            return f"mount point {mp} is a dangling symbolic link"
        return f"mount point {mp} does not exist (mkdir -p {mp})"
    if is_mounted(mp):
        return f"{mp} is already a mount (a crashed mount's? fednode umount {mp})"
    try:
        if not mp.is_dir():
            return f"mount point {mp} is not a directory"
    except OSError as exc:  # a dead FUSE mount under another name: ENOTCONN
        return f"mount point {mp}: {exc.strerror or exc} (fednode umount {mp}?)"
    if not os.access(mp, os.R_OK | os.W_OK | os.X_OK):
        return f"mount point {mp}: no permission to mount on it"
    return None


class _Signalled(Exception):
    """SIGINT/SIGTERM/SIGHUP before the mount runs (``serve_fuse`` handles them after)."""


def serve_mounted(
    cluster: Cluster, cluster_file: str, node: int, fs: LocalFS, loop_choice: str | None, mountpoint: str,
    join: bool = False,
) -> int:  # fmt: skip
    """``fednode serve --mount``: the agent of ``node`` and a mount of the
    federation entered at it, until a signal or an unmount; 0 when it ended
    cleanly, 1 if the agent could not join or the mount failed (the agent
    stopped either way).  The agent's loop is a ``SharedLoop`` unless uvloop
    is asked for by name (``--loop uvloop`` or ``FEDNODE_LOOP=uvloop``): then
    every call of the mount is posted to it (two wake-ups a call)."""
    from fednode.cli import _announce_ready
    from fednode.cluster import READY_LISTENING
    from fednode.mount import FedOps, MountStats, serve_fuse

    mp = str(Path(mountpoint).resolve())
    if (loop_choice or os.environ.get(eventloop.ENV)) == "uvloop":
        factory, which = eventloop.choose("uvloop")
        loop = factory()
        target = loop.run_forever
        log.info("node %d: event loop: %s; the mount's calls are posted to it", node, which)
    else:
        loop = SharedLoop()
        target = loop.run_locked
        log.info("node %d: event loop: asyncio, shared: the mount's calls run in its threads, under a lock", node)
    thread = threading.Thread(target=target, name="fednode-agent", daemon=True)
    agent = Agent(cluster, node, make_transport(cluster, node), fs=fs, join=join)
    stopping = False

    def on_signal(signum: int, frame: Any) -> None:
        if not stopping:
            raise _Signalled(signum)

    def run(coro: Any) -> Any:
        fut = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return fut.result()
        except _Signalled:
            fut.cancel()  # the loop stops the coroutine where it waits; the agent's stop follows it
            raise

    def client(n: int) -> Client:
        return LocalClient(agent, loop) if n == node else Client(cluster, node=n)

    old = {sig: signal.signal(sig, on_signal) for sig in _STOP_SIGNALS}
    thread.start()
    rc = 0
    try:
        run(agent.start())
        me = cluster.spec.node(node)
        print(f"{READY_LISTENING} {me.host}:{me.port} {agent.transport.name}", flush=True)
        if agent.joined is not None:
            try:
                run(_joined(agent))
            except _Signalled:
                raise
            except Exception as exc:
                print(f"fednode serve: node {node} could not join the federation: {exc}", file=sys.stderr)
                return 1
        run(_announce_ready(agent))  # prints fednode-ready
        stats = MountStats.from_env()
        rc = serve_fuse(lambda ready: FedOps(cluster, node, on_ready=ready, stats=stats, client_factory=client),
                        mp, fsname=f"fedfs:{Path(cluster_file).resolve()}#{node}",
                        snapshot=None if stats is None else stats.write)  # fmt: skip
    except _Signalled as sig:
        log.info("signal %s before the mount: stopping node %d", sig, node)
    finally:
        stopping = True
        log.info("node %d stopping", node)
        try:
            asyncio.run_coroutine_threadsafe(agent.stop(), loop).result(30)
        except (Exception, concurrent.futures.CancelledError) as exc:
            log.error("node %d: stopping the agent failed: %r", node, exc)
            rc = rc or 1
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        if not thread.is_alive():
            loop.close()
        for sig, handler in old.items():
            signal.signal(sig, handler)
    return rc


async def _joined(agent: Agent) -> int:
    assert agent.joined is not None
    return await agent.joined
