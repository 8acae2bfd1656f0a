"""The real runtime: drives ``fedsim.protocol`` with a transport and a local directory.

One ``Agent`` is one federation member.  It runs on an asyncio event loop:

* the transport hands it every envelope it receives (``on_frame``);
* a request is served by a protocol worker: requests are grouped by nesting
  depth and each depth has ``workers`` slots, so a handler waiting on a
  deeper request can never starve that request of a worker (the simulator's
  per-stage pools, Federated DAFS V's worker threads); a ``Request.callback``
  has a stage of its own (``stage_of``), as in the simulator;
* replies wake the waiting caller directly, matched by request id;
* ``Local`` effects run on ``fednode.localfs.LocalFS`` in the loop's thread
  (local operations take microseconds; a thread hand-off would cost more);
* ``Call`` timeouts and lost connections surface in protocol code as
  ``PeerUnavailable``, exactly where the simulator raises it.

The protocol objects (``FedNode``, the placement and hashing policies) are the
simulator's, imported unchanged; this module only gives each effect its real
meaning.
"""

from __future__ import annotations

import asyncio
import errno
import hmac
import itertools
import logging
import queue
import time
from collections.abc import Callable, Generator
from typing import Any

from fednode import wire
from fednode.bench_ops import LocalBench
from fednode.config import Cluster
from fednode.localfs import ROOT_LOST_ERRNO, LocalFS
from fednode.transport import Conn, Transport
from fednode.wire import check_args, over_limit
from fedsim.protocol.designs import build_node
from fedsim.protocol.effects import (
    Await,
    Call,
    Compute,
    Local,
    Multicast,
    Now,
    Send,
    Sleep,
    Spawn,
    UnknownWork,
    Wake,
    known_work,
    nested_timeout,
)
from fedsim.protocol.messages import (
    PeerUnavailable,
    ProtocolError,
    Request,
    check_reply,
    decode_error,
    decode_request,
    encode_error,
    encode_request,
    pack,
    stage_of,
)
from fedsim.protocol.names import is_reserved, normalize
from fedsim.protocol.policies.homes import Pinned
from fedsim.protocol.view import View
from fedsim.schema import ConfigError

log = logging.getLogger("fednode")

Log = list[tuple[int, int, str]] | None

#: how often (seconds) an agent checks that its root path still names the directory it serves
ROOT_CHECK_S = 1.0


class _ClientState:
    """What one client connection holds at this agent: its descriptors (no
    other connection may use them), its requests in flight and the reply
    bytes they may bring (``reserved``: a read's size, clamped as the read is)."""

    __slots__ = ("fds", "inflight", "reserved")

    def __init__(self) -> None:
        self.fds: set[int] = set()
        self.inflight = 0
        self.reserved = 0


class LocalClientConn:
    """A client connection inside the agent's process (``fednode serve
    --mount``): the calls of ``fednode.serve.LocalClient`` arrive as decoded
    envelopes (``Agent.on_local``) and the replies leave as the tuples the
    agent built, through ``replies``, a queue the client's thread waits on.
    It is a connection like a socket's for everything the agent decides:
    its own descriptors (one ``LocalClientConn`` per client, so no client of
    the process uses another's), its own requests in flight and limits.  It
    has no ``hold``: at ``limits.max_inflight_requests`` a call is refused
    with EAGAIN rather than read later."""

    __slots__ = ("closed", "peer", "replies")

    def __init__(self) -> None:
        self.peer = wire.CLIENT_ID
        self.closed = False
        self.replies: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()

    def deliver(self, out: tuple[Any, ...]) -> None:
        """A reply envelope (REPLY or ERROR, with its request id) for the waiting client."""
        self.replies.put(out)

    def send(self, payload: bytes) -> None:
        """A packed envelope (what a path of the agent that packs sends): decoded and delivered."""
        if self.closed:
            raise ConnectionError("the in-process client disconnected")
        self.deliver(wire.decode(payload, len(payload)))

    def close(self) -> None:
        self.closed = True


class Profile:
    """What ``fednode calibrate`` reads off a running agent (the ``profile``
    admin call): the local operations it ran and their time, the requests it
    served by kind and the client calls by operation, beside the process's
    CPU time.  Off (None on the agent) unless a calibration asked: then the
    hot path pays one test per local operation and per request."""

    __slots__ = ("calls", "local", "sent", "served", "waited")

    def __init__(self) -> None:
        self.local: dict[str, list[int]] = {}  # op -> [count, ns]
        self.served: dict[str, int] = {}  # request kind -> count (requests from peers)
        self.calls: dict[str, int] = {}  # client operation -> count
        self.sent: dict[str, int] = {}  # request kind -> count (requests this agent sent and waited for)
        self.waited = 0  # requests served whose handler waited for the network (on a worker task)

    def timed_local(self, apply: Callable[..., Any], eff: Local) -> Any:
        t0 = time.perf_counter_ns()
        try:
            return apply(eff.op, eff.path, eff.args)
        finally:
            entry = self.local.get(eff.op)
            if entry is None:
                entry = self.local[eff.op] = [0, 0]
            entry[0] += 1
            entry[1] += time.perf_counter_ns() - t0

    def snapshot(self) -> dict[str, Any]:
        return {
            "cpu_ns": time.process_time_ns(),
            "local": {k: list(v) for k, v in self.local.items()},
            "served": dict(self.served),
            "calls": dict(self.calls),
            "sent": dict(self.sent),
            "waited": self.waited,
        }


class Agent:
    """One federation member: a node of the cluster file's design, its local
    directory and a transport."""

    def __init__(
        self,
        cluster: Cluster,
        node_id: int,
        transport: Transport,
        fs: LocalFS | None = None,
        clock: Callable[[], float] | None = None,
        join: bool = False,
    ) -> None:
        spec = cluster.spec
        self.cluster = cluster
        self.id = node_id
        self.spec = spec.node(node_id)
        fed = spec.federation()
        #: with ``join``, the cluster file's other nodes are seeds of a running
        #: federation that this agent joins when it starts (FedFS 3.3)
        self.seeds = [m for m in spec.members if m != node_id] if join else []
        if join and not self.seeds:
            raise ConfigError(f"node {node_id} cannot join: the cluster file names no other node to contact")
        view = View(0, tuple(self.seeds), fed.hashing, fed.vnodes) if join else None
        self.node = build_node(fed, node_id, view=view)
        self.join_error: BaseException | None = None  # why the join failed (``serve --join`` exits with it)
        self.joined: asyncio.Future[int] | None = None
        #: the protocol's clock (``Now``): ``time.monotonic`` (uvloop's own
        #: ``loop.time()`` ticks in milliseconds, too coarse for VD ages);
        #: a test on a virtual-clock loop passes that loop's ``time``
        self.clock: Callable[[], float] = clock or time.monotonic
        #: the operations a client may call, with their argument types: the
        #: node's own interface (its ``@api`` methods), whatever its design
        self.api_ops: dict[str, tuple[type, ...]] = type(self.node).API
        #: and what serving them needs beyond types: which take, return or
        #: release a descriptor, which argument bounds the reply's size
        self.api_meta = type(self.node).API_META
        self._closer = next((n for n, m in self.api_meta.items() if m.fd == "closes"), None)
        self.fs = fs if fs is not None else LocalFS(cluster.root_of(node_id))
        self.transport = transport
        self.timeout = spec.rpc_timeout_ms / 1000.0
        self.max_size = spec.max_message_bytes
        self.max_io = max(4096, spec.max_message_bytes - 4096)  # largest read/write payload per message
        self.workers = spec.workers
        self.running = False
        self.started = 0.0
        # rid -> (future, conn, deadline, sent at)
        self.pending: dict[int, tuple[asyncio.Future[Any], Conn, float, float]] = {}
        self.peers: dict[int, Conn] = {}
        self._connecting: dict[int, asyncio.Future[Conn]] = {}
        self._rid = itertools.count(1)
        self._sems: dict[int, asyncio.Semaphore] = {}
        self._waits: dict[Any, asyncio.Future[Any]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._clients: dict[Conn, _ClientState] = {}
        self._reported: set[str] = set()
        self.bad_frames = 0
        self.prof: Profile | None = None  # ``admin_profile``: counters for a calibration
        self._said_evicted = False
        self.loop: asyncio.AbstractEventLoop

    # ------------------------------------------------------------------ life cycle
    async def start(self) -> None:
        """Listen, then run the node's own start (FedFS: summarise the local
        tree, push the summary to the members, and keep it current on the
        protocol's timers)."""
        self.loop = asyncio.get_running_loop()
        self.started = time.monotonic()
        await self.transport.start(self)
        self.running = True
        if self.seeds:
            self.joined = self.loop.create_future()
            self._spawn(self._join())
        else:
            self._spawn(self.drive(self.node.start(), 0, None))
        self._spawn(self._sweep())
        log.info(
            "node %d serving %s on %s (%s transport, %d members)",
            self.id,
            self.fs.root,
            f"{self.spec.host}:{self.spec.port}",
            self.transport.name,
            len(self.node.members),
        )

    async def _join(self) -> None:
        """Join through the first seed that answers (``Membership.join``,
        which then runs the node's start); the outcome resolves ``joined``."""
        assert self.joined is not None
        contact = f"{self.spec.host}:{self.spec.port}"
        err: BaseException = PeerUnavailable(self.seeds[0], "no seed answered")
        # a design that can tell a restart from a first join (FedFS: ``rejoin``, which
        # recovers when the federation still lists this node or its tree shows it was
        # a member) does; else it joins
        join = getattr(self.node, "rejoin", None) or self.node.join
        for seed in self.seeds:
            try:
                epoch = await self.drive(join(seed, contact), 0, None)
            except PeerUnavailable as exc:
                err = exc
                continue  # try the next seed
            except Exception as exc:  # refused (already a member, a stale epoch ...): the protocol says why
                err = exc
                break
            log.info("node %d joined the federation: view %d, members %s", self.id, epoch, list(self.node.members))
            self.joined.set_result(epoch)
            return
        self.join_error = err
        log.error("node %d could not join: %s", self.id, err)
        self.joined.set_exception(err)
        self.joined.exception()  # retrieved: serve reports it

    async def halt(self) -> None:
        """Stop computing at once, as a host that loses its power: every task
        (handlers, client operations, timers) is cancelled, and nothing is
        sent, answered or closed; peers find out only by their timeouts.
        ``stop`` goes on to close what a killed process's kernel closes."""
        self.running = False
        tasks = [t for t in self._tasks if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def stop(self) -> None:
        await self.halt()
        await self.transport.stop()
        for c in list(self.peers.values()):
            c.close()
        for fut, *_ in list(self.pending.values()):
            if not fut.done():
                fut.set_exception(PeerUnavailable(self.id, "agent stopping"))
        self.fs.close_all()

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = self.loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            if isinstance(exc, OSError) and exc.errno == ROOT_LOST_ERRNO and self.fs.lost is not None:
                return  # a timer that ran into the lost root: LocalFS has said so, once
            log.error("node %d: background task failed: %r", self.id, exc)

    @property
    def ready(self) -> bool:
        """The node's start-up exchange is done (FedFS: every summary is here)."""
        return self.node.ready

    # ------------------------------------------------------------------ the effect driver
    def _run_sync(
        self, gen: Generator[Any, Any, Any], value: Any, exc: BaseException | None, depth: int, trace: Log
    ) -> tuple[bool, Any]:
        """Advance ``gen``, performing the effects that need no waiting (Local,
        Compute, Now, Wake, Spawn) in place.  Returns (True, its return value)
        when it finishes, or (False, effect) at the first effect that must wait
        for the network (Call, Multicast, Send, Sleep) or another generator
        (Await: its future, registered at once).  The generator's own
        exception propagates.

        A handler whose effects are all local (Stat, Read, Write, ReadDir, a
        cached GetEntry ...) thus runs to its reply inside ``on_frame``, with no
        task and no extra turn of the event loop: most of the gap between a
        1-hop operation and the raw round trip."""
        apply = self.fs.apply
        while True:
            try:
                eff = gen.throw(exc) if exc is not None else gen.send(value)
            except StopIteration as stop:
                return True, stop.value
            value, exc = None, None
            t = type(eff)
            if t is Local:
                try:
                    value = (
                        apply(eff.op, eff.path, eff.args) if self.prof is None else self.prof.timed_local(apply, eff)
                    )
                except Exception as e:  # delivered into the protocol generator
                    exc = e
            elif t is Compute:
                if eff.work not in known_work:  # the real CPU is spent anyway; only the name is checked
                    exc = UnknownWork(eff.work)
            elif t is Now:
                value = self.clock()
            elif t is Wake:
                fut = self._waits.pop(eff.key, None)
                if fut is not None and not fut.done():
                    fut.set_result(eff.value)
            elif t is Spawn:
                self._spawn(self.drive(eff.gen, depth, trace))
            elif t is Await:
                # its future registered now, and handed on instead of the effect: ``drive`` may
                # get to it a task later (the fast path), and a Wake in between must find it
                fut = self._waits.get(eff.key)
                if fut is None:
                    fut = self._waits[eff.key] = self.loop.create_future()
                return False, fut
            elif t is Call or t is Multicast or t is Send or t is Sleep:
                return False, eff
            else:
                exc = TypeError(f"not an effect: {eff!r}")

    async def drive(
        self, gen: Generator[Any, Any, Any], depth: int, trace: Log, pending: Any = None,
        slot: asyncio.Semaphore | None = None,
    ) -> Any:  # fmt: skip
        """Run one protocol generator to completion, performing its effects
        (``pending``: an effect it already yielded, to perform first).  ``slot``:
        the stage's worker slot it holds, given back while it waits on ``Await``
        (for another generator of this node, such as a lock's holder, which may
        itself be waiting for a slot of the stage: a slot bounds work, not
        waiting) and taken again before it goes on."""
        value: Any = None
        exc: BaseException | None = None
        while True:
            if pending is None:
                done, eff = self._run_sync(gen, value, exc, depth, trace)
                if done:
                    return eff
            else:
                eff, pending = pending, None
            value, exc = None, None
            try:
                t = type(eff)
                if t is Call:
                    value = await self.call(eff.node, eff.request, depth, trace)
                elif t is Multicast:
                    value = await self._multicast(eff.nodes, eff.requests(), depth, trace)
                elif t is Send:
                    await self._send_oneway(eff.node, eff.request, depth, trace)
                elif t is Sleep:
                    # At least ``seconds`` on the protocol's clock (``Now``): the
                    # loop may wake a timer up to its clock resolution early.
                    end = self.clock() + eff.seconds
                    while (left := end - self.clock()) > 0:
                        await asyncio.sleep(left)
                else:  # Await: the future ``_run_sync`` registered for it
                    if slot is None:
                        value = await asyncio.shield(eff)
                    else:
                        slot.release()
                        try:
                            value = await asyncio.shield(eff)
                        finally:
                            await slot.acquire()
                    if isinstance(value, BaseException):
                        raise value
            except Exception as e:  # delivered into the protocol generator
                exc, value = e, None

    # ------------------------------------------------------------------ sending
    async def _conn(self, node: int) -> Conn:
        conn = self.peers.get(node)
        if conn is not None and not conn.closed:
            return conn
        # Not only members: a view change also reaches the node leaving it; a
        # node the transport cannot place (no address) is refused there.
        waiting = self._connecting.get(node)
        if waiting is not None:
            return await asyncio.shield(waiting)
        fut: asyncio.Future[Conn] = self.loop.create_future()
        self._connecting[node] = fut
        try:
            conn = await self.transport.connect(node)
        except BaseException as exc:
            if isinstance(exc, Exception):
                fut.set_exception(exc)
                fut.exception()  # retrieved: no "never retrieved" warning when nobody else waited
            else:
                fut.cancel()
            raise
        finally:
            del self._connecting[node]
        self.peers[node] = conn
        fut.set_result(conn)
        return conn

    def _expect_reply(self, conn: Conn, timeout: float) -> tuple[int, asyncio.Future[Any]]:
        """A new request id on ``conn`` and the future its reply (or the
        sweeper, after ``timeout`` on the loop's clock) resolves."""
        rid = next(self._rid)
        fut = self.loop.create_future()
        now = self.loop.time()
        self.pending[rid] = (fut, conn, now + timeout, now)
        return rid, fut

    async def call(self, dst: int, req: Request, depth: int, trace: Log) -> Any:
        """Request/reply to ``dst``: its handler's value, or its error raised here."""
        conn = await self._conn(dst)
        if self.prof is not None:
            self.prof.sent[req.kind] = self.prof.sent.get(req.kind, 0) + 1
        # nested calls give up first: errors name the failed node
        rid, fut = self._expect_reply(conn, nested_timeout(self.timeout, depth))
        try:
            conn.send(pack((wire.REQUEST, rid, depth + 1, trace is not None, encode_request(req))))
        except (ConnectionError, ProtocolError) as exc:
            del self.pending[rid]
            raise PeerUnavailable(dst, f"send failed: {exc}") from None
        if trace is not None:
            trace.append((self.id, dst, req.kind))
        try:
            ok, value, sublog = await fut
        finally:
            self.pending.pop(rid, None)
        if trace is not None:
            if sublog:
                trace.extend(sublog)
            trace.append((dst, self.id, "reply"))
        if ok:
            try:
                check_reply(req, value)
            except ProtocolError as exc:  # a peer's reply is as untrusted as its request
                raise OSError(errno.EBADMSG, f"node {dst} sent a bad reply: {exc}") from None
            return value
        raise decode_error(value)

    async def _sweep(self) -> None:
        """Fail the calls whose reply is overdue.  One sweeper instead of a
        timer per call: a call then costs no timer-heap work, and a timeout
        fires at most a tick late."""
        tick = min(0.05, self.timeout / 4)
        next_root_check = self.loop.time() + ROOT_CHECK_S
        while self.running:
            await asyncio.sleep(tick)
            now = self.loop.time()  # the loop's clock, as the sleep's: virtual in the fault tests
            if now >= next_root_check:
                # A root moved away while nothing fails or changes the namespace (reads of open files
                # go on working in the old tree) is noticed within ROOT_CHECK_S: one stat.
                next_root_check = now + ROOT_CHECK_S
                self.fs.check_root()
            self._evicted()
            for rid, (fut, conn, deadline, started) in list(self.pending.items()):
                if deadline <= now:
                    del self.pending[rid]
                    if not fut.done():
                        fut.set_exception(PeerUnavailable(conn.peer, f"no reply within {deadline - started:g} s"))

    def _evicted(self) -> None:
        """Say once, loudly, that the federation dropped this node while it
        ran (its peers found it unreachable: a partition, a long stall): it
        serves nothing more, and only a restart with ``--join`` brings it back."""
        evicted = getattr(self.node, "evicted", None)
        if evicted is not None and not self._said_evicted:
            self._said_evicted = True
            log.error(
                "node %d was evicted from the federation in view %d (its peers found it unreachable); it serves "
                "its peers nothing now: restart it with fednode serve --join to rejoin",
                self.id,
                evicted,
            )

    async def _multicast(self, nodes: tuple[int, ...], reqs: tuple[Request, ...], depth: int, trace: Log) -> list[Any]:
        """One call per node (``reqs[i]`` to ``nodes[i]``), concurrently; exceptions are returned in place.
        Traced, the log lists every request first (in ``nodes`` order, as they
        were sent), then each peer's nested messages and reply in that order."""
        subs: list[Log] = [[] if trace is not None else None for _ in nodes]
        results = await asyncio.gather(
            *(self.call(n, r, depth, s) for n, r, s in zip(nodes, reqs, subs, strict=True)), return_exceptions=True
        )
        if trace is not None:
            trace.extend(s[0] for s in subs if s)
            for s in subs:
                trace.extend(s[1:] if s else ())
        return list(results)

    async def _send_oneway(self, dst: int, req: Request, depth: int, trace: Log) -> None:
        if trace is not None:
            trace.append((self.id, dst, req.kind))
        try:
            conn = await self._conn(dst)
            conn.send(pack((wire.ONEWAY, 0, depth + 1, False, encode_request(req))))
        except (ConnectionError, ProtocolError) as exc:
            log.warning("node %d: one-way %s to node %d lost: %s", self.id, req.kind, dst, exc)

    # ------------------------------------------------------------------ receiving
    def on_frame(self, conn: Conn, payload: bytes) -> None:
        """Every envelope the transport receives (called in the loop's thread)."""
        try:
            env = wire.decode(payload, self.max_size)
        except ProtocolError as exc:
            self._bad(conn, 0, f"garbled frame: {exc}")
            return
        self.on_envelope(conn, env)

    def on_local(self, conn: LocalClientConn, envs: list[tuple[Any, ...]]) -> None:
        """Envelopes of an in-process client (``fednode.serve.LocalClient``),
        called in the loop's thread: each takes the path a decoded frame
        takes (``on_envelope``), so every check a socket client's call meets
        (the envelope's shape, argument types, descriptor ownership per
        connection, the limits) applies; only the framing, the codec and the
        handshake, which protect the socket, are left out."""
        if not self.running:  # stopping (a socket's connection would be closed): nothing runs
            err = encode_error(PeerUnavailable(self.id, "the agent is stopping"))
            for env in envs:
                self._reply(conn, (wire.ERROR, env[1] if len(env) > 1 and type(env[1]) is int else 0, err, None))
            return
        for env in envs:
            self.on_envelope(conn, env)

    def on_envelope(self, conn: Conn, env: tuple[Any, ...]) -> None:
        """One decoded envelope (a tuple whose first item is a known kind)."""
        kind = env[0]
        try:
            if kind == wire.REPLY or kind == wire.ERROR or kind == wire.PONG:
                self._on_reply(conn, env)
            elif kind == wire.REQUEST or kind == wire.ONEWAY:
                self._on_request(conn, env)
            elif kind == wire.CLIENT:
                self._on_client(conn, env)
            elif kind == wire.PING:
                conn.send(pack((wire.PONG, env[1], env[2])))
            else:
                raise ProtocolError(f"unexpected {wire.KIND_NAMES[kind]} envelope")
        except (ProtocolError, ValueError, IndexError, TypeError) as exc:
            rid = env[1] if len(env) > 1 and type(env[1]) is int else 0
            self._bad(conn, rid, f"bad {wire.KIND_NAMES[kind]} envelope: {exc}")
        except ConnectionError:
            pass  # the other side went away meanwhile

    def _bad(self, conn: Conn, rid: int, reason: str) -> None:
        """A frame we cannot serve: answer with EBADMSG and keep serving."""
        self.bad_frames += 1
        log.warning("node %d: from %s: %s", self.id, _who(conn.peer), reason)
        self._reply(conn, (wire.ERROR, rid, encode_error(OSError(errno.EBADMSG, reason)), None))

    def _on_reply(self, conn: Conn, env: tuple[Any, ...]) -> None:
        if env[0] == wire.PONG:
            _, rid, payload = env
            value: tuple[Any, ...] = (True, payload, None)
        else:
            _, rid, body, sublog = env
            value = (env[0] == wire.REPLY, body, sublog)
        entry = self.pending.pop(rid, None)
        if entry is None:
            return  # timed out already, or never ours
        fut, c = entry[:2]
        if c is not conn:
            self.pending[rid] = entry
            raise ProtocolError(f"reply {rid} on the wrong connection")
        if not fut.done():
            fut.set_result(value)

    def _on_request(self, conn: Conn, env: tuple[Any, ...]) -> None:
        kind, rid, depth, trace, body = env
        if conn.peer == wire.CLIENT_ID:
            raise ProtocolError("client programs may not send protocol requests (use CLIENT envelopes)")
        if type(rid) is not int or type(depth) is not int or not 0 < depth <= wire.MAX_DEPTH:
            raise ProtocolError(f"bad request id {rid!r} or depth {depth!r}")
        req = decode_request(body)
        bound = type(req).size_field
        if bound is not None and not 0 <= getattr(req, bound) <= self.max_io:
            raise ProtocolError(f"{req.kind}.{bound} {getattr(req, bound)} outside 0..{self.max_io}")
        oneway = kind == wire.ONEWAY
        log: Log = [] if trace else None
        if self.prof is not None:
            self.prof.served[req.kind] = self.prof.served.get(req.kind, 0) + 1
        if self._sem(stage_of(req, depth)).locked():  # every worker of this stage busy: queue for one
            self._spawn(self._serve(conn, rid, depth, log, req, oneway, None, None))
            return
        self.node.stats.requests_served += 1
        gen = self.node.handle(conn.peer, req)
        try:
            done, r = self._run_sync(gen, None, None, depth, log)
        except Exception as exc:
            self._finish(conn, req, oneway, (wire.ERROR, rid, encode_error(exc), log))
            return
        if done:
            self._finish(conn, req, oneway, (wire.REPLY, rid, r, log))
        else:  # it must wait for the network: continue on a worker
            if self.prof is not None:
                self.prof.waited += 1
            self._spawn(self._serve(conn, rid, depth, log, req, oneway, gen, r))

    def _sem(self, depth: int) -> asyncio.Semaphore:
        sem = self._sems.get(depth)
        if sem is None:
            sem = self._sems[depth] = asyncio.Semaphore(self.workers)
        return sem

    async def _serve(
        self, conn: Conn, rid: int, depth: int, trace: Log, req: Request, oneway: bool, gen: Any, pending: Any
    ) -> None:
        """Serve a request on one of its stage's workers (``gen``: a handler
        already started by the fast path, ``pending`` the effect it waits on)."""
        slot = self._sem(stage_of(req, depth))
        async with slot:
            if gen is None:
                self.node.stats.requests_served += 1
                gen = self.node.handle(conn.peer, req)
            try:
                value = await self.drive(gen, depth, trace, pending, slot)
                out: tuple[Any, ...] = (wire.REPLY, rid, value, trace)
            except Exception as exc:
                out = (wire.ERROR, rid, encode_error(exc), trace)
        self._finish(conn, req, oneway, out)

    def _finish(self, conn: Conn, req: Request, oneway: bool, out: tuple[Any, ...]) -> None:
        if len(self.node.collisions_seen()) != len(self._reported):
            self._report_collisions()
        if not oneway:
            self._reply(conn, out)

    def _reply(self, conn: Conn, out: tuple[Any, ...]) -> None:
        if type(conn) is LocalClientConn:  # an in-process client: the reply as built, no frame to bound
            conn.deliver(out)
            return
        data = pack(out)
        if len(data) > self.max_size:
            err = OSError(errno.EMSGSIZE, f"reply of {len(data)} bytes exceeds the {self.max_size}-byte limit")
            data = pack((wire.ERROR, out[1], encode_error(err), None))
        try:
            conn.send(data)
        except ConnectionError:
            pass  # the caller went away; it has its PeerUnavailable

    def on_lost(self, conn: Conn, reason: str) -> None:
        """A connection closed: its callers get PeerUnavailable now, not at the
        timeout; a client's open files are closed, and its admin loops (ping,
        bench) see ``conn.closed`` and stop at their next step."""
        if self.peers.get(conn.peer) is conn:
            del self.peers[conn.peer]
        for rid, (fut, c, *_) in list(self.pending.items()):
            if c is conn:
                del self.pending[rid]
                if not fut.done():
                    fut.set_exception(PeerUnavailable(conn.peer, f"connection lost: {reason}"))
        state = self._clients.pop(conn, None)
        if state is not None and state.fds and self.running:
            for fd in state.fds:  # a client that vanished leaves no open file behind
                self._spawn(self._close_fd(fd))

    def _close_fd(self, fd: int) -> Any:
        """Release a descriptor nobody will close: the design's own closing operation."""
        assert self._closer is not None  # a design that opens descriptors has one (Node checks)
        return self.drive(getattr(self.node, self._closer)(fd), 0, None)

    def busy(self, conn: Conn) -> bool:
        """Whether a client connection has requests in flight (it is waiting, not idle)."""
        state = self._clients.get(conn)
        return state is not None and state.inflight > 0

    def _report_collisions(self) -> None:
        for path, (winner, homes) in self.node.collisions_seen().items():
            if path not in self._reported:
                shadowed = [h for h in homes if h != winner]
                log.warning(
                    "node %d: name collision: %s exists on nodes %s; it resolves to %s, the copies on %s are hidden",
                    self.id,
                    path,
                    sorted(homes),
                    "the directory" if winner is None else f"node {winner}",
                    shadowed,
                )
        self._reported = set(self.node.collisions_seen())

    # ------------------------------------------------------------------ clients
    def _on_client(self, conn: Conn, env: tuple[Any, ...]) -> None:
        """A client's call: served on a task of its own.  Per connection, at
        most ``limits.max_inflight_requests`` run at once, and reads in flight
        may bring at most about ``limits.max_buffered_bytes`` of replies: at
        either limit the transport stops reading from the connection until a
        request finishes (a count alone would let 32 pipelined reads of 16 MiB
        hold 512 MiB)."""
        _, rid, op, args, trace = env
        if type(rid) is not int or not isinstance(op, str) or not isinstance(args, tuple):
            raise ProtocolError("a client call is [6, rid, op, args, trace]")
        if conn.peer != wire.CLIENT_ID:
            raise ProtocolError("CLIENT envelopes come from client programs, not from members")
        state = self._clients.get(conn)
        if state is None:
            state = self._clients[conn] = _ClientState()
        limits = self.cluster.spec.limits
        if state.inflight >= limits.max_inflight_requests:  # a transport that cannot hold its reading: refuse
            err = over_limit("requests in flight", state.inflight + 1, limits.max_inflight_requests,
                             "limits.max_inflight_requests")  # fmt: skip
            self._reply(conn, (wire.ERROR, rid, encode_error(OSError(errno.EAGAIN, err.strerror)), None))
            return
        meta = self.api_meta.get(op)
        if self.prof is not None and meta is not None:
            self.prof.calls[op] = self.prof.calls.get(op, 0) + 1
        started = None
        if meta is not None and not self._sem(0).locked():  # as _on_request: run it here until it must wait
            log: Log = [] if trace else None
            try:
                args = self._api_args(op, args, conn)
                gen = getattr(self.node, op)(*args)
                done, r = self._run_sync(gen, None, None, 0, log)
            except Exception as exc:
                self._reply(conn, (wire.ERROR, rid, encode_error(exc), log))
                return
            if done:
                self._reply(conn, (wire.REPLY, rid, self._api_done(op, args, conn, r), log))
                return
            started = (args, gen, r, log)
        k = meta.size_arg if meta is not None else None
        size = min(max(args[k], 0), self.max_io) if k is not None and len(args) > k and type(args[k]) is int else 0
        state.inflight += 1
        state.reserved += size
        if state.inflight >= limits.max_inflight_requests or state.reserved >= limits.max_buffered_bytes:
            _hold(conn, "requests", True)
        self._spawn(self._serve_client(conn, state, rid, op, args, bool(trace), size, started))

    async def _serve_client(
        self, conn: Conn, state: _ClientState, rid: int, op: str, args: tuple[Any, ...], traced: bool, size: int,
        started: tuple[tuple[Any, ...], Any, Any, Log] | None = None,
    ) -> None:  # fmt: skip
        """A client call on a task of its own (``started``: the arguments, the
        generator, the effect it waits on and its log, from ``_on_client``'s fast path)."""
        trace: Log = [] if traced else None
        try:
            if started is None:
                value = await self.api(op, args, trace, conn)
            else:
                args, gen, pending, trace = started
                slot = self._sem(0)
                async with slot:
                    value = self._api_done(op, args, conn, await self.drive(gen, 0, trace, pending, slot))
            out: tuple[Any, ...] = (wire.REPLY, rid, value, trace)
        except Exception as exc:
            out = (wire.ERROR, rid, encode_error(exc), trace)
        finally:
            state.inflight -= 1
            state.reserved -= size
            limits = self.cluster.spec.limits
            if state.inflight < limits.max_inflight_requests and state.reserved < limits.max_buffered_bytes:
                _hold(conn, "requests", False)
        self._reply(conn, out)

    async def api(self, op: str, args: tuple[Any, ...], trace: Log = None, conn: Conn | None = None) -> Any:
        """Run a client's call at this agent: an API operation as the requester,
        or an administrative one (``ADMIN``: status, pin, ping, bench, refresh).
        ``conn`` is the client's connection (None: a caller in this process);
        descriptors belong to the connection that opened them."""
        want = self.api_ops.get(op)
        if want is None:
            admin = ADMIN.get(op)
            if admin is None:
                raise OSError(errno.EINVAL, f"unknown operation {op!r}; allowed: {', '.join([*self.api_ops, *ADMIN])}")
            handler, types, optional = admin
            check_args(op, types, args, optional)
            return await handler(self, conn, *args)
        args = self._api_args(op, args, conn)
        slot = self._sem(0)
        async with slot:
            value = await self.drive(getattr(self.node, op)(*args), 0, trace, slot=slot)
        return self._api_done(op, args, conn, value)

    def _api_args(self, op: str, args: tuple[Any, ...], conn: Conn | None) -> tuple[Any, ...]:
        """An API call's arguments, checked (types, the descriptor's owner) and
        with a size beyond ``max_io`` cut to it."""
        meta = self.api_meta[op]
        check_args(op, self.api_ops[op], args, meta.optional)
        if conn is not None and meta.fd in ("uses", "closes"):
            self._own_fd(conn, args[0])
        k = meta.size_arg
        if k is not None and args[k] > self.max_io:  # a short read, as POSIX allows
            args = (*args[:k], self.max_io, *args[k + 1 :])
        return args

    def _api_done(self, op: str, args: tuple[Any, ...], conn: Conn | None, value: Any) -> Any:
        """After an API call succeeded: the descriptors its connection owns."""
        meta = self.api_meta[op]
        if conn is not None and meta.fd in ("opens", "closes"):
            fd = value[0] if type(value) is tuple else value  # an "opens" call's value, or its first item
            if conn.closed:  # it left while the call ran (on_lost has closed the rest): nobody will close this one
                if meta.fd == "opens":
                    self._spawn(self._close_fd(fd))
            elif meta.fd == "opens":
                self._clients.setdefault(conn, _ClientState()).fds.add(fd)
            else:
                self._clients[conn].fds.discard(args[0])
        return value

    def _own_fd(self, conn: Conn, fd: int) -> None:
        """EBADF unless ``fd`` was opened on ``conn``: no client reads, writes or closes another's file."""
        state = self._clients.get(conn)
        if state is None or fd not in state.fds:
            raise OSError(errno.EBADF, f"descriptor {fd} was not opened on this connection (open the file first)")

    # ------------------------------------------------------------------ administration
    # Each takes the client's connection first (None: a caller in this
    # process); ``ADMIN`` below maps the wire names to them, with their types.
    async def admin_status(self, conn: Conn | None) -> dict[str, Any]:
        """What ``fednode status`` shows for this node."""
        node = self.node
        files = dirs = 0
        served = self.fs.check_root()  # else the root was deleted or moved away: nothing to count
        if served:
            for d in self.fs.list_dirs("/"):
                if is_reserved(d):
                    continue  # the copies held for a predecessor, the orphans (``describe``: replica_files)
                dirs += 1
                files += sum(1 for _, is_dir in self.fs.listdir(d) if not is_dir)
        return {
            "node": self.id,
            **self.transport.describe(),
            "address": f"{self.spec.host}:{self.spec.port}",
            "root": str(self.fs.root),
            "root_lost": self.fs.lost,  # None, or what happened to the root and what to do
            "uptime_s": round(time.monotonic() - self.started, 3),
            "architecture": self.cluster.spec.protocol.architecture,
            "ready": node.ready,
            "epoch": node.epoch,
            "member": node.member,
            "members": list(node.members),
            "local_files": files if served else None,
            "local_dirs": dirs if served else None,
            "requests_served": node.stats.requests_served,
            "counters": node.counters(),  # what the design counts (``Node.counters``: FedFS's lookups, dNFSp's fetches)
            **node.describe(),
            "bad_frames": self.bad_frames,
            "client_connections": len(self._clients),
            # the other clients' (this status request is in flight too)
            "client_requests_in_flight": sum(c.inflight for k, c in self._clients.items() if k is not conn),
        }

    async def admin_pin(self, conn: Conn | None, path: str, home: int) -> None:
        """Force the home of a name this node manages (benchmarks' forced placements)."""
        path = normalize(path)
        if home not in self.node.members:
            raise OSError(errno.EINVAL, f"node {home} is not a member")
        if not isinstance(self.node.placement, Pinned):
            self.node.placement = Pinned({}, self.node.placement)
        homes = self.node.placement.homes
        limit = self.cluster.spec.limits.max_pins
        if path not in homes and len(homes) >= limit:
            raise over_limit("forced placements", len(homes) + 1, limit, "limits.max_pins")
        homes[path] = home

    async def admin_leave(self, conn: Conn | None, proof: bytes) -> int:
        """Leave the federation gracefully (``Membership.leave``): this
        node's managed names are handed off, its files follow the cluster
        file's ``protocol.leave_files``.  ``proof``: ``Cluster.leave_proof``
        of this node (EACCES otherwise: a client key alone cannot make a node
        leave).  Returns the new view's epoch; the agent goes on answering
        (as no member) until it is stopped."""
        if self.cluster.secret is None or not hmac.compare_digest(proof, self.cluster.leave_proof(self.id)):
            raise OSError(errno.EACCES, f"leave: the proof is not node {self.id}'s (fednode leave computes it "
                          "from the cluster file's secret)")  # fmt: skip
        leave = getattr(self.node, "leave", None)
        if leave is None:
            raise OSError(errno.ENOTSUP, f"the {self.cluster.spec.protocol.architecture} design cannot leave")
        epoch = await self.drive(leave(), 0, None)
        log.info("node %d left the federation: view %d, members %s", self.id, epoch, list(self.node.members))
        return epoch

    async def admin_refresh(self, conn: Conn | None) -> None:
        """Re-summarise the local tree now and push the summary to every member
        (the protocol's own ``regenerate_summary``; no retries, unlike the
        start-up loop, since the caller sees any failure in ``status``)."""
        await self.drive(self.node.regenerate_summary(push=True), 0, None)

    async def ping(self, dst: int, payload: bytes = b"") -> None:
        """One raw round trip to ``dst``: PING answered by its receive path, no protocol."""
        conn = await self._conn(dst)
        rid, fut = self._expect_reply(conn, self.timeout)
        try:
            conn.send(pack((wire.PING, rid, payload)))
            await fut
        finally:
            self.pending.pop(rid, None)

    def _member(self, what: str, node: int) -> int:
        if node not in self.node.members:
            raise OSError(errno.EINVAL, f"{what}: node {node} is not a member (members: {list(self.node.members)})")
        return node

    @staticmethod
    def _still_wanted(conn: Conn | None) -> None:
        """Stop an admin loop whose client has gone: nobody reads its result."""
        if conn is not None and conn.closed:
            raise ConnectionError("the client left; the rest of its request is not run")

    async def admin_ping(self, conn: Conn | None, dst: int, count: int, size: int) -> list[int]:
        """``count`` timed round trips of ``size`` payload bytes to ``dst`` (ns each)."""
        limits = self.cluster.spec.limits
        self._member("ping", dst)
        if not 0 <= count <= limits.max_ping_count:
            raise over_limit("ping count", count, limits.max_ping_count, "limits.max_ping_count")
        most = min(limits.max_ping_bytes, self.max_io)
        if not 0 <= size <= most:
            key = "limits.max_ping_bytes"
            if most < limits.max_ping_bytes:
                key += " and max_message_bytes"
            raise over_limit("ping size", size, most, key)
        payload = bytes(size)
        out = []
        for _ in range(count):
            self._still_wanted(conn)
            t0 = time.perf_counter_ns()
            await self.ping(dst, payload)
            out.append(time.perf_counter_ns() - t0)
        return out

    async def admin_profile(self, conn: Conn | None, action: str) -> dict[str, Any]:
        """``start``: count from zero (``Profile``); ``snapshot``: the counts so
        far and the process's CPU time; ``stop``: the counts, and counting ends."""
        if action not in ("start", "snapshot", "stop"):
            raise OSError(errno.EINVAL, f"profile: action must be start, snapshot or stop, not {action!r}")
        if action == "start":
            self.prof = Profile()
        prof = self.prof or Profile()
        if action == "stop":
            self.prof = None
        return prof.snapshot()

    async def admin_bench(
        self, conn: Conn | None, kind: str, op: str, calls: tuple[Any, ...], ping: int = -1
    ) -> list[list[int]]:
        """Time each call (ns): ``kind`` "fedfs" runs the API operation here,
        "local" the same operation on the local directory through the confined
        local layer (no federation).  With ``ping`` (a node id) each call is
        preceded by a timed raw round trip to that node, so the operation and
        the transport it is compared with are measured side by side, under the
        same load.  Returns [call times, round-trip times].  Every call is
        checked before the first runs: op from a closed table, typed
        arguments, sizes within ``max_message_bytes``, descriptors of this
        connection's."""
        limits = self.cluster.spec.limits
        if kind == "cleanup":
            self._local_bench().close_all()
            return [[], []]
        if len(calls) > limits.max_bench_calls:
            raise over_limit("bench calls", len(calls), limits.max_bench_calls, "limits.max_bench_calls")
        if ping != -1:
            self._member("bench ping", ping)
        perf = time.perf_counter_ns
        if kind == "fedfs":
            # the node's own operations, but none that opens or releases a
            # descriptor: a benchmark must not leave files open behind it
            allowed = [o for o, m in self.api_meta.items() if m.fd not in ("opens", "closes")]
            if op not in allowed:
                raise OSError(errno.EINVAL, f"bench fedfs: op must be one of {', '.join(allowed)}, not {op!r}")
            method = getattr(self.node, op)  # op is one of the closed set above, and of the node's interface
            for args in calls:
                meta = self.api_meta[op]
                check_args(f"bench fedfs {op}", self.api_ops[op], args, meta.optional)
                if meta.size_arg is not None and not 0 <= args[meta.size_arg] <= self.max_io:
                    raise over_limit("read size", args[meta.size_arg], self.max_io, "max_message_bytes")
                if conn is not None and meta.fd in ("uses", "closes"):
                    self._own_fd(conn, args[0])

            def run(args: tuple[Any, ...]) -> Any:
                return self.drive(method(*args), 0, None)

        elif kind == "local":
            local = self._local_bench()
            local.check(op, calls, self.max_io)

            async def run(args: tuple[Any, ...]) -> Any:
                return local.run(op, args)

        else:
            raise OSError(errno.EINVAL, f"bench kind must be 'fedfs', 'local' or 'cleanup', not {kind!r}")
        times, rtts = [], []
        for args in calls:
            self._still_wanted(conn)
            if ping >= 0:
                t0 = perf()
                await self.ping(ping)
                rtts.append(perf() - t0)
            t0 = perf()
            await run(args)
            times.append(perf() - t0)
        return [times, rtts]

    _lb: LocalBench | None = None  # made on the first bench "local" request

    def _local_bench(self) -> LocalBench:
        if self._lb is None:
            self._lb = LocalBench(self.fs)
        return self._lb


#: The administrative requests: wire name -> (handler, argument types, how many
#: of the last are optional).  A closed table: a name from the wire selects one
#: of these or is refused; it never reaches getattr.  ``tuple`` means an array.
ADMIN: dict[str, tuple[Callable[..., Any], tuple[type, ...], int]] = {
    "status": (Agent.admin_status, (), 0),
    "pin": (Agent.admin_pin, (str, int), 0),
    "ping": (Agent.admin_ping, (int, int, int), 0),
    "bench": (Agent.admin_bench, (str, str, tuple, int), 1),
    "refresh": (Agent.admin_refresh, (), 0),
    "profile": (Agent.admin_profile, (str,), 0),
    "leave": (Agent.admin_leave, (bytes,), 0),
}
ADMIN_OPS = tuple(ADMIN)


def _hold(conn: Conn, reason: str, on: bool) -> None:
    """Hold or release a connection's reading, if its transport can (TCP can;
    the in-process transport carries no client connections)."""
    method = getattr(conn, "hold" if on else "release", None)
    if method is not None:
        method(reason)


def _who(peer: int) -> str:
    return "a client" if peer == wire.CLIENT_ID else f"node {peer}"
