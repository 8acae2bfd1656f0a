"""The trivial runtime: every node in one thread, in memory, no time.

A Call runs the peer's handler to completion before the caller resumes, a
Send runs it at once, a Multicast runs the handlers in order.  Because the
protocol is pure, this is the same protocol as in the simulator, minus time
and concurrency, and it is fast enough for property-based tests over
thousands of random operation sequences.  Every message is recorded
(``trace``) so tests can check which nodes an operation involved.
"""

from __future__ import annotations

import heapq
from collections.abc import Generator, Sequence
from typing import Any

from fedsim.faults import FaultInjector, FaultPlan
from fedsim.memfs import MemFS, union_tree
from fedsim.protocol.config import FederationSpec, ProtocolConfig
from fedsim.protocol.designs import build_node, build_nodes
from fedsim.protocol.effects import Await, Call, Compute, Local, Multicast, Now, Send, Sleep, Spawn, Wake, check_work
from fedsim.protocol.messages import PeerUnavailable, Request, check_reply
from fedsim.protocol.view import View

Gen = Generator[Any, Any, Any]


class DirectCluster:
    """A federation of nodes of one design over ``MemFS`` local file systems.

    Timers: a generator started by ``Spawn`` that yields ``Sleep`` parks
    until ``advance`` moves the clock past its wake-up time (the periodic
    protocol work: summary re-pushes and refreshes); a client operation that
    sleeps just moves the clock on."""

    def __init__(
        self,
        n_nodes: int,
        *,
        hashing: str = "mod_n",
        placement: str = "with_manager",
        config: ProtocolConfig | None = None,
        seed: int = 0,
        local: Sequence[MemFS] | None = None,
        design: str = "fedfs",
        vnodes: int = 64,
        faults: FaultPlan | None = None,
        rpc_timeout: float = 1.0,
    ) -> None:
        members = list(range(n_nodes))
        self.config = config or ProtocolConfig()
        self.spec = FederationSpec(
            members, design=design, hashing=hashing, vnodes=vnodes, placement=placement, seed=seed, protocol=self.config
        )
        self.nodes = build_nodes(self.spec)
        self.fs = list(local) if local is not None else [MemFS() for _ in members]
        self.down: set[int] = set()
        self.left: set[int] = set()  # nodes that left the federation (``leave``), or were refused joining
        self.clock = 0.0  # seconds, what ``Now`` returns; tests advance it by hand or with ``advance``
        for fs in self.fs:  # file times are this clock's (integer ns), never the wall clock's
            fs.clock = self._clock_ns
        self.trace: list[tuple[int, int, str]] = []  # (src, dst, request kind)
        self._timers: list[tuple[float, int, int, Gen]] = []  # (wake-up time, seq, node, parked generator)
        self._seq = 0
        #: network faults being injected (``inject``); None: a perfect network
        self.faults: FaultInjector | None = FaultInjector(faults) if faults is not None else None
        #: seconds: a request or reply the plan delays this long is a PeerUnavailable at the caller
        self.rpc_timeout = rpc_timeout
        for node in self.nodes:
            self.run(node.id, node.start())

    def _clock_ns(self) -> int:
        return round(self.clock * 1e9)

    # -- driving ------------------------------------------------------------------------
    def run(self, node_id: int, gen: Gen) -> Any:
        """Drive one protocol generator on ``node_id`` to completion."""
        return self._drive(node_id, gen, None, background=False)

    def _drive(self, node_id: int, gen: Gen, value: Any, background: bool, exc: BaseException | None = None) -> Any:
        """Run ``gen`` until it returns, performing its effects; a background
        generator that sleeps is parked on the timer heap instead."""
        while True:
            try:
                eff = gen.throw(exc) if exc is not None else gen.send(value)
            except StopIteration as stop:
                return stop.value
            value, exc = None, None
            if type(eff) is Sleep:
                if background:
                    self._seq += 1
                    heapq.heappush(self._timers, (self.clock + eff.seconds, self._seq, node_id, gen))
                    return None
                self.clock += eff.seconds
                continue
            try:
                value = self._perform(node_id, eff)
            except Exception as e:  # delivered into the protocol generator
                exc = e

    def advance(self, seconds: float) -> None:
        """Move the clock on by ``seconds``, resuming every parked generator
        whose wake-up time comes, in time order."""
        until = self.clock + seconds
        while self._timers and self._timers[0][0] <= until:
            when, _, node_id, gen = heapq.heappop(self._timers)
            self.clock = max(self.clock, when)
            self._drive(node_id, gen, None, background=True)
        self.clock = until

    @property
    def timers(self) -> int:
        """How many background generators are parked on a timer."""
        return len(self._timers)

    def inject(self, plan: FaultPlan) -> FaultInjector:
        """Apply ``plan`` to the messages sent from now on (numbered from 0)."""
        self.faults = FaultInjector(plan)
        return self.faults

    def heal(self) -> None:
        """No more faults; late messages still wait for ``advance``."""
        self.faults = None

    def _deliver(self, src: int, dst: int, req: Request, oneway: bool = False) -> Any:
        self.trace.append((src, dst, req.kind))
        if dst in self.down:
            raise PeerUnavailable(dst, "node is down")
        if self.faults is not None:
            return self._deliver_under_faults(src, dst, req, oneway)
        return self._serve(src, dst, req)

    def _serve(self, src: int, dst: int, req: Request) -> Any:
        node = self.nodes[dst]
        node.stats.requests_served += 1
        value = self.run(dst, node.handle(src, req))
        check_reply(req, value)  # a handler whose value breaks its declared reply type fails the property tests
        return value

    def _deliver_under_faults(self, src: int, dst: int, req: Request, oneway: bool) -> Any:
        """Without time, a fault means: a lost request or reply is
        PeerUnavailable at once (a lost reply after the handler ran); a late
        one-way message, or a request late by ``rpc_timeout`` or more, is
        parked on the timer heap and delivered when ``advance`` reaches it (so
        it is overtaken by what is sent meanwhile); a shorter delay of a
        request or reply changes nothing, as the caller waits anyway."""
        faults = self.faults
        assert faults is not None
        fate = faults.fate(src, dst, req.kind, self.clock)
        if fate is None:
            if oneway:
                return None
            raise PeerUnavailable(dst, "request lost")
        if fate and (oneway or fate >= self.rpc_timeout):
            self._seq += 1
            heapq.heappush(self._timers, (self.clock + fate, self._seq, dst, self._late(src, dst, req)))
            if oneway:
                return None
            raise PeerUnavailable(dst, f"no reply within {self.rpc_timeout:g} s")
        try:
            value, err = self._serve(src, dst, req), None
        except Exception as e:  # an error reply: subject to the plan like any reply
            value, err = None, e
        if not oneway:
            fate = faults.fate(dst, src, "reply", self.clock) if self.faults is faults else 0.0
            if fate is None:
                raise PeerUnavailable(dst, "reply lost")
            if fate >= self.rpc_timeout:
                raise PeerUnavailable(dst, f"no reply within {self.rpc_timeout:g} s")
        if err is not None:
            raise err
        return value

    def _late(self, src: int, dst: int, req: Request) -> Gen:
        """A late message, delivered from the timer heap; nobody waits for its reply."""
        if dst not in self.down:
            try:
                self._serve(src, dst, req)
            except Exception:
                pass  # its sender gave up long ago
        return
        yield

    def _perform(self, node_id: int, eff: Any) -> Any:
        t = type(eff)
        if t is Call:
            return self._deliver(node_id, eff.node, eff.request)
        if t is Local:
            return self.fs[node_id].apply(eff.op, eff.path, eff.args)
        if t is Compute:
            check_work(eff)
            return None
        if t is Send:
            try:
                self._deliver(node_id, eff.node, eff.request, oneway=True)
            except Exception:
                pass  # one-way: the sender never hears of a failure
            return None
        if t is Multicast:
            out: list[Any] = []
            for n, req in zip(eff.nodes, eff.requests(), strict=True):
                try:
                    out.append(self._deliver(node_id, n, req))
                except Exception as e:
                    out.append(e)
            return out
        if t is Spawn:
            self._drive(node_id, eff.gen, None, background=True)
            return None
        if t is Wake:
            return None  # nothing runs concurrently here, so nobody waits
        if t is Now:
            return self.clock
        if t is Await:
            raise RuntimeError(f"Await({eff.key!r}) in a sequential runtime would wait forever")
        raise TypeError(f"not an effect: {eff!r}")

    # -- membership (FedFS 3.3) -----------------------------------------------------------
    @property
    def members(self) -> tuple[int, ...]:
        """The members as the nodes still in the federation see them."""
        return self.nodes[min(self.live)].members

    @property
    def live(self) -> list[int]:
        """Nodes that have not left (the federation's members, when settled)."""
        return [n.id for n in self.nodes if n.id not in self.left]

    def join(self, seed: int | None = None, local: MemFS | None = None) -> int:
        """A new node (the next id, over ``local`` or an empty MemFS) joins
        the running federation through member ``seed`` (default: the lowest);
        returns its id once it is a member and has sent its summary to all."""
        seed = min(self.live) if seed is None else seed
        nid = len(self.nodes)
        node = build_node(self.spec, nid, view=self.nodes[seed].view)
        self.nodes.append(node)
        self.fs.append(local if local is not None else MemFS())
        try:
            self.run(nid, node.join(seed))
        except BaseException:
            self.left.add(nid)  # refused: it never was a member, and takes no part from now on
            self.down.add(nid)
            raise
        return nid

    def leave(self, node_id: int) -> int:
        """Node ``node_id`` leaves gracefully (its managed names handed off,
        its files as ``protocol.leave_files`` says); then it is gone.  Returns
        the new view's epoch.  A node that is not a member is the protocol's
        ENOENT; an id this cluster never had, a ValueError naming the members."""
        if not 0 <= node_id < len(self.nodes):
            raise ValueError(f"node {node_id} does not exist; members: {list(self.live)}")
        epoch = self.run(node_id, self.nodes[node_id].leave())
        self.left.add(node_id)
        self.down.add(node_id)
        return epoch

    # -- crash and restart (issue 13) ---------------------------------------------------
    def crash(self, node_id: int) -> None:
        """Node ``node_id`` crashes: it answers nothing (PeerUnavailable at
        once), its parked timers and the messages late on their way to it
        are gone.  Its local file system survives (``restart``)."""
        self._check_id(node_id)
        self.down.add(node_id)
        kept = [t for t in self._timers if t[2] != node_id]
        for t in self._timers:
            if t[2] == node_id:
                t[3].close()
        self._timers = kept
        heapq.heapify(self._timers)

    def restart(self, node_id: int, seed: int | None = None) -> int:
        """Node ``node_id`` (crashed, or evicted while alive: it is crashed
        first) comes back as a fresh object over the same local file system
        and rejoins through member ``seed`` (default: the lowest live one)
        by the protocol's ``recover``.  Returns the new view's epoch."""
        self._check_id(node_id)
        if node_id not in self.down:
            self.crash(node_id)
        if seed is None:
            seed = min(n for n in self.live if n != node_id and n not in self.down and self.nodes[n].member)
        spec = self.spec
        node = build_node(spec, node_id, view=View(0, (seed,), spec.hashing, spec.vnodes))
        self.nodes[node_id] = node
        self.down.discard(node_id)
        try:
            return self.run(node_id, node.recover(seed))  # type: ignore[attr-defined]
        except BaseException:
            self.crash(node_id)  # not back: down as before
            raise

    @property
    def evicted(self) -> list[int]:
        """Nodes that are up, have not left, and are no member of their own
        view: evicted while alive (a partition), waiting for ``restart``."""
        return [n.id for n in self.nodes if n.id not in self.left and n.id not in self.down and not n.member]

    def _check_id(self, node_id: int) -> None:
        if not 0 <= node_id < len(self.nodes) or node_id in self.left:
            raise ValueError(f"node {node_id} does not exist; members: {list(self.live)}")

    # -- conveniences for tests ---------------------------------------------------------
    def op(self, node_id: int, name: str, *args: Any) -> Any:
        """Run API operation ``name`` (create, mkdir, stat, ...) at ``node_id``."""
        return self.run(node_id, getattr(self.nodes[node_id], name)(*args))

    def namespace(self) -> dict[str, Any]:
        """The federated namespace as seen from the local trees: union of the
        members' paths (None for directories, content for files)."""
        # a node that left took its files with it (leave_files: unavailable)
        return union_tree(fs.tree() for i, fs in enumerate(self.fs) if i not in self.left)

    def walk(self, node_id: int, root: str = "/") -> dict[str, Any]:
        """The namespace as the protocol shows it to ``node_id`` (readdir + read)."""
        out: dict[str, Any] = {root: None}
        stack = [root]
        node = self.nodes[node_id]
        while stack:
            d = stack.pop()
            for name, is_dir in self.run(node_id, node.readdir(d)):
                p = d + name if d == "/" else f"{d}/{name}"
                if is_dir:
                    out[p] = None
                    stack.append(p)
                else:
                    fd = self.run(node_id, node.open(p))
                    size = self.run(node_id, node.stat(p))[1]
                    out[p] = self.run(node_id, node.read(fd, 0, size))
                    self.run(node_id, node.close(fd))
        return out

    def messages_since(self, mark: int) -> list[tuple[int, int, str]]:
        return self.trace[mark:]
