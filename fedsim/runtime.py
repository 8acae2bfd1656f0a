"""The SimPy runtime: drives the protocol generators on a ``simpy.Environment``.

Time is in microseconds.  Each node has:

* a NIC whose send side is busy for the LogGP occupancy of each message
  (``fedsim.network``), so fan-outs queue at the sender;
* receive queues drained by bounded pools of protocol workers.  A worker runs a
  request's handler to completion, waiting for the replies of the requests it
  sends, as the Federated DAFS worker threads do (V-A).  Requests are queued by
  nesting depth (a client's request is depth 1, a request a handler sends is
  one deeper): each depth has its own pool, as each stage of a SEDA-style server
  has its own thread pool.  A worker only ever waits on deeper stages, so
  bounded pools cannot deadlock, and queuing delay under load emerges.  The
  one exception, a client's procedure that waits on a lock its node's other
  procedures hold (dNFSp2's tokens): the lock protocol's own requests
  (``Request.callback``, handlers that never wait) have a stage of their
  own (``messages.stage_of``), so the lock's holder gets them through;
* a local file system (``fedsim.memfs``) whose operations are served one at a
  time for the times of ``fedsim.storage`` (the disk is a FIFO queue);
* a CPU (``cores`` servers) for the federal layer's ``Compute`` effects.

Replies do not need a worker: they wake the waiting caller directly, like
Federated DAFS's dispatch of replies by thread id.

Speed: a message costs one SimPy event to arrive (an idle worker takes it in
the arrival's own callback unless other events are due at the same instant)
and one for its reply; the CPU and the disk are "busy until" queues, one
event per job.  On a machine model (``fedsim.machine``) a request costs four
events (its arrival, the end of its receipt and dispatch CPU, its reply, the
end of the reply's receipt) and a client's hop two (three with a client
thread's kernel work before its request or after its reply: a step of the
hop's event, not a resumption of the client), with one resumption of the
worker or the caller per request or call.  The runtime sets the fields of
events it triggers (``_ok``, ``_value``) and schedules on the environment's
queue (``_queue``, ``_eid``, ``_now``) directly: private SimPy attributes,
which is why pyproject.toml pins simpy below its next major version.
"""

from __future__ import annotations

import gc
from collections import deque
from collections.abc import Callable, Generator, Hashable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from heapq import heappush
from typing import Any

import simpy
from simpy.events import NORMAL, PENDING

from fedsim.faults import FaultInjector, FaultPlan
from fedsim.machine import Machine, MachineParams, ProcState, mixed
from fedsim.memfs import MemFS, union_tree
from fedsim.network import LogGP
from fedsim.protocol.config import FederationSpec, ProtocolConfig
from fedsim.protocol.designs import build_node, build_nodes
from fedsim.protocol.effects import (
    WORK,
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
    nested_timeout,
    run_sync,
)
from fedsim.protocol.messages import PeerUnavailable, Request, stage_of, wire_size
from fedsim.protocol.policies.homes import PlacementPolicy
from fedsim.protocol.view import View
from fedsim.storage import StorageModel, StorageParams

#: Bytes of a client request's or reply's envelope beyond its names and data
#: (operation, request id, descriptor, offset, count).
CLIENT_HEADER = 64


@dataclass(slots=True)
class OpTrace:
    """What one client operation caused, across every node it reached."""

    messages: int = 0
    bytes: int = 0
    nodes: set[int] = field(default_factory=set)  # peers reached, dirmerge probes (Request.probe) excluded
    dirmerge_messages: int = 0
    log: list[tuple[int, int, str]] | None = None  # (src, dst, kind); "reply" for replies

    def record(self, src: int, dst: int, kind: str, size: int, dirmerge: bool) -> None:
        """Count one message (a request, or a reply with kind "reply")."""
        self.messages += 1
        self.bytes += size
        if dirmerge:
            self.dirmerge_messages += 1
        if self.log is not None:
            self.log.append((src, dst, kind))


class _Msg:
    __slots__ = ("depth", "reply", "req", "size", "src", "trace")

    def __init__(
        self, src: int, req: Request, reply: simpy.Event | None, trace: OpTrace | None, depth: int, size: int
    ) -> None:
        self.src = src
        self.req = req
        self.reply = reply
        self.trace = trace
        self.depth = depth
        self.size = size  # the request's wire_size (its receiver's CPU on a machine model)


@dataclass(slots=True)
class CpuCosts:
    """Microseconds of federal-layer CPU work.  The FedFS paper (2.2) puts one
    mmh3-class hash of a 40-character path at ~2000 instructions: ~7 us on the
    prototype's 300 MHz Pentium II, ~0.1 us today."""

    hash_us: float = 0.0
    cores: int = 2

    def table(self, summary_hashes: int) -> dict[str, float]:
        """Microseconds per unit of each kind of work: exactly the names of
        ``effects.WORK`` (a Compute naming any other is UnknownWork)."""
        h = self.hash_us
        table = {
            "fedfs_op": 2 * h,  # the DT hash and the manager hash of the path
            "bloom_probe": summary_hashes * h,  # per summary tested
            "bloom_insert": summary_hashes * h,
            "hash": h,
        }
        if set(table) != set(WORK):
            raise AssertionError(f"CpuCosts.table prices {sorted(table)}, effects.WORK names {sorted(WORK)}")
        return table


@contextmanager
def long_run_gc(young: int = 100_000) -> Iterator[None]:
    """Garbage-collector settings for a long simulation, restored afterwards.

    Everything alive on entry (a built cluster, its file set and summaries) is
    frozen out of the cyclic collector (``gc.freeze``), whose full collections
    would otherwise walk it again and again; and the youngest generation is
    collected every ``young`` net allocations instead of 700, so the events,
    generators and messages of the operations in flight die by reference
    count before a collection has to look at them.  Neither changes results:
    the simulation holds no finalizers.  At 1,024 nodes this takes the
    collector from a fifth of the run time to about one per cent."""
    thresholds = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(young, thresholds[1], thresholds[2])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


class SimCluster:
    """A simulated federation: FedNodes + network + storage on one SimPy environment."""

    def __init__(
        self,
        n_nodes: int,
        *,
        network: LogGP,
        storage: StorageParams | None = None,
        protocol: ProtocolConfig | None = None,
        hashing: str = "mod_n",
        vnodes: int = 64,
        placement: str | list[PlacementPolicy] = "with_manager",
        design: str = "fedfs",
        workers: int = 4,
        cpu: CpuCosts | None = None,
        seed: int = 0,
        keep_data: bool = False,
        rpc_timeout_us: float = 1_000_000.0,
        record_messages: bool = False,
        env: simpy.Environment | None = None,
        faults: FaultPlan | None = None,
        machine: MachineParams | None = None,
    ) -> None:
        if n_nodes <= 0:
            raise ValueError(f"n_nodes must be positive, got {n_nodes}")
        if workers <= 0:
            raise ValueError(f"workers must be positive, got {workers}")
        self.env = env or simpy.Environment()
        self.net = network
        self.protocol = protocol or ProtocolConfig()
        cpu = cpu or CpuCosts()
        self.cpu_costs = cpu.table(self.protocol.summary_hashes)
        members = list(range(n_nodes))
        self.spec = FederationSpec(
            members,
            design=design,
            hashing=hashing,
            vnodes=vnodes,
            placement=placement if isinstance(placement, str) else "with_manager",
            seed=seed,
            protocol=self.protocol,
        )
        self.nodes = build_nodes(self.spec, placements=placement if isinstance(placement, list) else None)
        if cpu.cores <= 0:
            raise ValueError(f"cores must be positive, got {cpu.cores}")
        self.keep_data = keep_data
        self.storage_params = storage or StorageParams()
        self.cores = cpu.cores
        # Per-node state, one entry per node ever built (``_add_state``): a
        # node that joins during a run appends its own (``join``).
        self.fs: list[MemFS] = []
        self.storage: list[StorageModel] = []
        self.disk_free: list[float] = []  # when each node's disk finishes its queued work
        self.cpu_free: list[list[float]] = []  # when each core of each node finishes its queued work (see cpu_work)
        self.tx_free: list[float] = []
        self._queues: list[dict[int, _RecvQueue]] = []
        self._waits: list[dict[Any, simpy.Event]] = []
        self.client_ops: list[int] = []
        #: bumped when a node crashes: work of an older incarnation stops (``_drive``)
        self.incarnation: list[int] = []
        for _ in members:
            self._add_state()
        self.workers = workers
        self.down: set[int] = set()
        self.left: set[int] = set()  # nodes that left the federation (``leave``)
        self.crashed: set[int] = set()  # nodes down by ``crash`` (not yet restarted)
        self.rpc_timeout_us = rpc_timeout_us
        self.record_messages = record_messages
        self.messages = 0
        self.message_bytes = 0
        #: network faults being injected (``inject``); None: a perfect network, and no cost for checking
        self.faults: FaultInjector | None = FaultInjector(faults) if faults is not None else None
        #: the calibrated machine (``fedsim.machine``): CPU for messages, handlers, local operations and
        #: clients, on processes sharing hosts' cores; None: the papers' model, and no cost for checking
        self.machine: Machine | None = Machine(machine, n_nodes) if machine is not None else None
        # the callbacks a machine's messages run on arrival, bound once (not once per message)
        self._on_reply: Callable[[_Reply], None] = self._received
        self._on_hop: Callable[[_Hop], None] = self._hop_arrived
        self._on_sent: Callable[[_Hop], None] = self._hop_sent
        self._on_then: Callable[[_Hop], None] = self._hop_then

    def _clock_ns(self) -> int:
        return round(self.env.now * 1000)

    # ------------------------------------------------------------------ setup
    def populate(self, node: int, files: Iterable[tuple[str, int]], dirs: Iterable[str] = ()) -> None:
        """Local data present before the federation starts."""
        self.fs[node].populate(files, dirs)

    def preload_summaries(self) -> None:
        """Warm the federation up outside simulated time: each node does the
        local part of its start (FedFS: summarises its tree) and every node
        adopts what the others would have sent (FedFS 2.2's start-up exchange
        is assumed done before measurement; ``exchange_summaries`` simulates
        it)."""
        for node in self.nodes:
            fs = self.fs[node.id]
            run_sync(
                node.prepare(),
                lambda eff, fs=fs: fs.apply(eff.op, eff.path, eff.args) if type(eff) is Local else None,
            )
        for node in self.nodes:
            for other in self.nodes:
                if other is not node:
                    other.adopt(node)
            node.prepared()

    def exchange_summaries(self) -> simpy.Process:
        """Run every node's ``start()`` (summary push to all) in simulated time."""
        procs = [self.spawn(n.id, n.start()) for n in self.nodes]
        return self.env.process(self._all(procs))

    @staticmethod
    def _all(procs: list[simpy.Process]) -> Generator[Any, Any, None]:
        yield from procs

    def _add_state(self) -> None:
        """The runtime's state of one more node (its local file system, disk,
        CPU, NIC, receive queues)."""
        # file times are simulated time (integer ns; the environment counts microseconds)
        self.fs.append(MemFS(keep_data=self.keep_data, clock=self._clock_ns))
        self.storage.append(StorageModel(self.storage_params))
        self.disk_free.append(0.0)
        self.cpu_free.append([0.0] * self.cores)
        self.tx_free.append(0.0)
        self._queues.append({})
        self._waits.append({})
        self.client_ops.append(0)
        self.incarnation.append(0)

    # ------------------------------------------------------------------ membership (FedFS 3.3)
    @property
    def live(self) -> list[int]:
        """Nodes that have not left (the federation's members, when settled)."""
        return [n.id for n in self.nodes if n.id not in self.left]

    def add_node(self, files: Iterable[tuple[str, int]] = (), dirs: Iterable[str] = (), seed: int | None = None) -> int:
        """Build a new node (the next id) over a local tree of ``files`` and
        ``dirs``, not yet a member: ``join`` lets it in.  Returns its id."""
        seed = min(self.live) if seed is None else seed
        nid = len(self.nodes)
        self.nodes.append(build_node(self.spec, nid, view=self.nodes[seed].view))
        self._add_state()
        if self.machine is not None:
            self.machine.node(nid)  # its process, on its host
        self.fs[nid].populate(files, dirs)
        return nid

    def join(self, node_id: int, seed: int | None = None, trace: OpTrace | None = None) -> simpy.Process:
        """Node ``node_id`` (from ``add_node``) joins through member ``seed``
        (default: the lowest), in simulated time; the process's value is the
        new view's epoch."""
        seed = min(m for m in self.live if m != node_id) if seed is None else seed
        return self.spawn(node_id, self.nodes[node_id].join(seed), trace)

    def leave(self, node_id: int, trace: OpTrace | None = None) -> simpy.Process:
        """Node ``node_id`` leaves gracefully, in simulated time; once done it
        answers nothing more (it is gone).  The process's value is the new epoch."""
        if not 0 <= node_id < len(self.nodes):
            raise ValueError(f"node {node_id} does not exist; members: {self.live}")
        return self.env.process(self._leaving(node_id, trace))

    def _leaving(self, node_id: int, trace: OpTrace | None) -> Generator[Any, Any, Any]:
        epoch = yield self.spawn(node_id, self.nodes[node_id].leave(), trace)
        self.left.add(node_id)
        self.down.add(node_id)
        return epoch

    def namespace(self) -> dict[str, Any]:
        """The federated namespace as the members' local trees make it (the
        union of their paths; a node that left took its files with it)."""
        return union_tree(fs.tree() for i, fs in enumerate(self.fs) if i not in self.left)

    # ------------------------------------------------------------------ client side
    def spawn(self, node_id: int, gen: Generator[Any, Any, Any], trace: OpTrace | None = None) -> simpy.Process:
        """Run a protocol generator (an API operation) on ``node_id`` as a SimPy process."""
        return self.env.process(self._drive(node_id, gen, trace, 0))

    def op(self, node_id: int, name: str, *args: Any, trace: OpTrace | None = None) -> simpy.Process:
        """Start API operation ``name`` (create, stat, read ...) at ``node_id``."""
        self.client_ops[node_id] += 1
        return self.spawn(node_id, getattr(self.nodes[node_id], name)(*args), trace)

    def call_op(self, node_id: int, name: str, *args: Any, trace: OpTrace | None = None) -> Generator[Any, Any, Any]:
        """API operation ``name`` as a generator a client process can ``yield from``
        (no SimPy process of its own: cheaper than ``op`` for workload drivers).
        The operation counts as issued when this is called."""
        self.client_ops[node_id] += 1
        return self._drive(node_id, getattr(self.nodes[node_id], name)(*args), trace, 0)

    def run_op(self, node_id: int, name: str, *args: Any, trace: OpTrace | None = None) -> Any:
        """Run one operation to completion (for tests and micro-benchmarks)."""
        p = self.op(node_id, name, *args, trace=trace)
        self.env.run(until=p)
        return p.value

    def cpu_work(self, node_id: int, us: float) -> simpy.Event:
        """An event that fires when ``us`` microseconds of CPU work, submitted
        now at ``node_id``, are done: the node's cores serve work first come
        first served, each job on the core that frees first.

        This is what a ``simpy.Resource(cores)`` held for ``us`` gives (the
        same start and end times, to the bit: the end is scheduled at the
        absolute time start + us), with one event per job instead of a
        request, a timeout and a release."""
        env = self.env
        free = self.cpu_free[node_id]
        core = 0
        start = free[0]
        for i in range(1, len(free)):
            if free[i] < start:
                core, start = i, free[i]
        now = env._now
        if start < now:
            start = now
        free[core] = done = start + us
        ev = simpy.Event(env)
        ev._ok = True
        ev._value = None
        heappush(env._queue, (done, NORMAL, next(env._eid), ev))
        return ev

    def cpu_at(self, proc: Any, us: float) -> simpy.Event:
        """An event that fires when ``us`` of CPU, submitted now by process
        ``proc`` (a node id, or a client's or mount's key), is done on the
        machine model (``fedsim.machine``)."""
        env = self.env
        return _Done(env, self.machine.run(proc, env._now, us))  # type: ignore[union-attr]

    # A step of a client call or a federation call on a machine (the CPU to
    # send, the flight, the CPU to receive) is a callback of the event that
    # ends the step before it, not a resumption of the calling process: the
    # same work at the same instant, in the same order of events (every event
    # is still scheduled when the process would have scheduled it), with one
    # process resumption per message instead of two or three.  The event the
    # caller waits on is the message's own (``_Hop``, ``_Reply``): on its
    # arrival its callback books the receiver's CPU and schedules the event
    # again for when that is done, with the caller's resumption held back
    # until then (``_rearm``), so a message is one event object, not two.
    def _hop(self, src: ProcState | None, src_us: float, size: int, dst: ProcState | None, dst_us: float,
             calls: list[tuple[str, tuple[Any, ...]]] | None = None, before: ProcState | None = None,
             before_us: float = 0.0) -> _Hop:  # fmt: skip
        """A message of ``size`` bytes between a client program (or a mount)
        and its agent, no federation message (not counted): ``src_us`` of CPU
        at the process of state ``src`` now (``src`` None: none), the flight, then
        ``dst_us`` at ``dst``'s (None: none), and with ``calls`` the agent's CPU
        for each (priced on arrival: ``mixed`` follows the agent's last work).
        With ``before``, ``before_us`` of that process's CPU first (a client
        thread's kernel work), and ``src``'s when it is done (``_hop_sent``).
        The event fires when ``dst`` has received it (and ``then``'s work after it is done)."""
        env = self.env
        mach = self.machine
        assert mach is not None
        hop = _Hop(env, self, dst, dst_us, calls)
        if before is not None:
            hop.src = src
            hop.src_us = src_us
            hop.by = before
            hop.flight = mach.client_flight_us(size)
            hop.callbacks = hop.held = [self._on_sent]
            heappush(env._queue, (mach.book(before, env._now, before_us), NORMAL, next(env._eid), hop))
            return hop
        # the source's CPU is booked now and the message flies when it is done: one event, its arrival
        leaves = env._now if src is None else mach.book(src, env._now, src_us)
        heappush(env._queue, (leaves + mach.client_flight_us(size), NORMAL, next(env._eid), hop))
        return hop

    def _hop_sent(self, hop: _Hop) -> None:
        """A ``_Hop``'s ``before`` work is done: its source's CPU is booked now, and it flies when that is done."""
        mach = self.machine
        assert mach is not None
        now = hop.env._now
        us = hop.src_us
        if mach.gil:  # the program's interpreter changes turns from another thread to this one (the GIL)
            us += mach.handover(hop.src, hop.by)
        _rearm(hop, mach.book(hop.src, now, us) + hop.flight, self._on_hop)

    def _hop_arrived(self, hop: _Hop) -> None:
        """A ``_Hop`` reached its receiver: its CPU is booked now and the event fires again when it is
        done (or, with ``then``, ``then``'s work is booked then: ``_hop_then``)."""
        mach = self.machine
        assert mach is not None
        st = hop.dst
        now = hop.env._now
        if st.free > now or st.waiting:  # its process is busy: read when the work in hand is done (``_wait``)
            held = hop.held
            hop.callbacks = held[1:]  # (its waiters, resumed when it has been read: ``_hop_read``)
            del held[1:]
            self._wait(st, self._hop_read, hop)
            return
        self._hop_book(hop, now, False)

    def _hop_read(self, hop: _Hop) -> None:
        """A ``_Hop`` that found its receiver busy (``_hop_arrived``), read now: booked, without a wake."""
        hop.held = [None, *hop.callbacks]  # (as ``_rearm`` finds it: this step first, then the waiters)
        self._hop_book(hop, hop.env._now, True)

    def _hop_book(self, hop: _Hop, now: float, waited: bool) -> None:
        """Book a ``_Hop``'s receipt at its receiver now (``waited``: read by a loop that never slept)."""
        mach = self.machine
        assert mach is not None
        st = hop.dst
        us = hop.us
        calls = hop.calls
        if calls is not None:
            mix, api = mach.mix_agent, mach.api
            if len(calls) == 1:
                us += mixed(st, calls[0][0], api(calls[0][0]), mix)  # (the sum below, to the bit)
            else:
                us += sum(mixed(st, name, api(name), mix) for name, _ in calls)
        elif hop.then is not None and mach.gil:  # a reply to a thread of a program (``Machine.handover``)
            us += mach.handover(st, hop.then)
        awake = waited or bool(mach.poll and mach.awake(st, now))  # read by a process that did not sleep: no wake
        if awake and hop.then is not None and us < mach.wake:
            # (a client program's part is small: its thread's kernel work after it saves the rest)
            rest = mach.wake - us
            hop.then_us = hop.then_us - rest if hop.then_us > rest else 0.0
        _rearm(hop, mach.book(st, now, us, True, awake), None if hop.then is None else self._on_then)

    def _hop_then(self, hop: _Hop) -> None:
        """A ``_Hop``'s receipt is done: ``then``'s work (a client thread's kernel work after a reply)
        is booked now, and the event fires when it is done."""
        mach = self.machine
        assert mach is not None
        _rearm(hop, mach.book(hop.then, hop.env._now, hop.then_us))

    def _machine_call(
        self, node_id: int, dst: int, req: Request, trace: OpTrace | None, depth: int, extra: float
    ) -> simpy.Event:
        """A ``Call`` on a machine: the caller's CPU to send (``o``, its bytes,
        ``call_us``, and ``extra``), the request, and on its reply the caller's
        CPU to receive it.  The event fires with the reply, (ok, value), once received."""
        env = self.env
        mach = self.machine
        assert mach is not None
        size = wire_size(req)
        # The send's CPU is booked now and the request leaves when it is done: its arrival is
        # the one event of the step (nobody waits for the send itself; the caller waits for the reply).
        now = env._now
        st = mach.nodes[node_id]
        sent = mach.book(st, now, mach.message_us(size) + mach.call_us + extra)
        reply = self._request(node_id, dst, req, trace, depth, True, size, after=sent - now)
        assert reply is not None
        reply.caller = st
        reply.held = reply.callbacks  # type: ignore[attr-defined]  # (``_rearm``)
        reply.callbacks.append(self._on_reply)
        return reply

    def _received(self, reply: _Reply) -> None:
        """A reply reached its caller (``_machine_call``): the caller's CPU to receive it, then it fires again."""
        mach = self.machine
        assert mach is not None
        size = reply.size
        if size < 0:  # not a handler's reply (a timeout's, a late one under faults)
            size = wire_size(reply._value[1])
        _rearm(reply, mach.book(reply.caller, reply.env._now, mach.message_us(size), True))  # type: ignore[arg-type]

    def client_op(
        self, client: int, node_id: int, name: str, *args: Any, trace: OpTrace | None = None
    ) -> Generator[Any, Any, Any]:
        """API operation ``name`` called by client program ``client`` at
        ``node_id``: ``call_op`` in the papers' model; on a machine, the
        client's CPU, its request's and reply's messages to the agent (not
        federation messages: not counted) and the agent's CPU for the call.

        The client's CPU for the call is priced when it is called (``mixed``
        follows the client's last call); it runs when the generator is run."""
        mach = self.machine
        if mach is None:
            return self.call_op(node_id, name, *args, trace=trace)
        proc = mach.client_state(client, node_id)
        half = mixed(proc, name, mach.client(name), mach.mix_client) / 2  # its request, then its reply
        if mach.kernel_share:
            # Threads of one program (``clients: shared``): the interpreter's part of a call holds the
            # GIL (the program's one process); the kernel's part (its socket calls) runs on the calling
            # thread alone, in parallel, before the request and after the reply.
            return self._agent_call(node_id, [(name, args)], trace, proc, half * mach.p.client_user_share, client,
                                    half * mach.kernel_share)  # fmt: skip
        # the client's CPU is all the program's: the round trip is the call (no generator of its own)
        return self._agent_call(node_id, [(name, args)], trace, proc, half)

    def agent_call(
        self,
        node_id: int,
        calls: list[tuple[str, tuple[Any, ...]]],
        trace: OpTrace | None,
        client: Hashable | None = None,
        client_us: float = 0.0,
    ) -> Generator[Any, Any, Any]:
        """One round trip of a client program to agent ``node_id`` on the
        machine model, carrying ``calls`` (API operations run one after the
        other, as ``Client.pipeline`` does): the request's flight, the agent's
        receipt and its CPU per call, the protocol running each call, the
        reply's CPU and flight.  The client's own CPU is the caller's, or with
        ``client`` (a process) ``client_us`` of it before the request and as
        much after the reply.  The value (or error) is the first call's; a
        later call's error is dropped (a pipelined getattr after an open,
        which only warms a cache)."""
        mach = self.machine
        assert mach is not None
        return self._agent_call(node_id, calls, trace, None if client is None else mach.state(client), client_us)

    def _agent_call(
        self,
        node_id: int,
        calls: list[tuple[str, tuple[Any, ...]]],
        trace: OpTrace | None,
        client: ProcState | None,
        client_us: float,
        thread_of: int | None = None,
        kernel_us: float = 0.0,
    ) -> Generator[Any, Any, Any]:
        """``agent_call`` with the client's process's state; with ``thread_of``, by that client's thread
        of the program (``client_op``), whose own process spends ``kernel_us`` before the request (the
        request leaves when it is done) and as much after the reply (the call returns when it is done)."""
        mach = self.machine
        assert mach is not None
        agent = mach.nodes[node_id]
        size = CLIENT_HEADER
        for _, args in calls:
            for a in args:
                if isinstance(a, (bytes, str)):
                    size += len(a)
        if thread_of is None:
            yield self._hop(client, client_us, size, agent, mach.client_message_us(size), calls)
            thread = None
        else:
            thread = mach.thread_state(thread_of, node_id)
            yield self._hop(client, client_us, size, agent, mach.client_message_us(size), calls, thread, kernel_us)
        err: BaseException | None = None
        value: Any = None
        try:
            for i, (name, args) in enumerate(calls):
                self.client_ops[node_id] += 1
                try:
                    v = yield from self._drive(node_id, getattr(self.nodes[node_id], name)(*args), trace, 0)
                except OSError as e:
                    if i == 0:
                        err = e
                    continue
                if i == 0:
                    value = v
        except BaseException:
            if client is not None:  # the client's CPU after the call, as when it returns
                env = self.env
                yield _Done(env, mach.book(client, env._now, client_us))
            raise
        back = CLIENT_HEADER + (len(value) if isinstance(value, bytes) else 0)
        reply = self._hop(agent, mach.client_message_us(back), back, client, client_us)
        if thread is not None and err is None:  # (a call that fails raises when its reply is received)
            reply.then = thread
            reply.then_us = kernel_us
        tail = mach.p.api_tail_us
        if tail:  # the agent's CPU after the reply has left, which nobody waits for (its process does)
            mach.book(agent, self.env._now, tail * len(calls))
        yield reply
        if err is not None:
            raise err
        return value

    def fail(self, node: int) -> None:
        """The node stops answering: requests to it time out as PeerUnavailable."""
        self.down.add(node)

    def crash(self, node: int) -> None:
        """The node crashes: it answers nothing (requests to it time out as
        PeerUnavailable), the requests queued for it are lost, and its work in
        flight (handlers, client operations, timers) stops at its next step,
        with no reply.  Its local file system survives (``restart``)."""
        if not 0 <= node < len(self.nodes) or node in self.left:
            raise ValueError(f"node {node} does not exist; members: {self.live}")
        self.down.add(node)
        self.crashed.add(node)
        self.incarnation[node] += 1
        for q in self._queues[node].values():
            for msg in q.pending:
                self._lost(node, msg)
            q.pending.clear()
        waits, self._waits[node] = self._waits[node], {}
        for ev in waits.values():  # its waiters resume, see the crash and stop
            ev.succeed(PeerUnavailable(node, "crashed"))

    def restart(self, node: int, seed: int | None = None, trace: OpTrace | None = None) -> simpy.Process:
        """Node ``node`` (crashed, or evicted while alive: it is crashed
        first) comes back as a fresh object over the same local file system
        and rejoins through member ``seed`` (default: the lowest live one) by
        the protocol's ``recover``, in simulated time; the process's value is
        the new view's epoch."""
        if node not in self.down:
            self.crash(node)
        if seed is None:
            seed = min(n for n in self.live if n != node and n not in self.down and self.nodes[n].member)
        old, spec = self.nodes[node], self.spec
        self.nodes[node] = build_node(
            spec, node, placement=old.placement, view=View(0, (seed,), spec.hashing, spec.vnodes)
        )
        self.down.discard(node)
        self.crashed.discard(node)
        return self.spawn(node, self.nodes[node].recover(seed), trace)  # type: ignore[attr-defined]

    @property
    def evicted(self) -> list[int]:
        """Nodes that are up, have not left, and are no member of their own
        view: evicted while alive (a partition), waiting for ``restart``."""
        return [n.id for n in self.nodes if n.id not in self.left and n.id not in self.down and not n.member]

    def inject(self, plan: FaultPlan) -> FaultInjector:
        """Apply ``plan`` to the messages sent from now on (numbered from 0).
        Under a plan every call has a timeout (``rpc_timeout_us``), as a lost
        reply must not leave its caller waiting forever."""
        self.faults = FaultInjector(plan)
        return self.faults

    def heal(self) -> None:
        """No more faults; messages already late still arrive late."""
        self.faults = None

    # ------------------------------------------------------------------ the effect driver
    def _drive(
        self, node_id: int, gen: Generator[Any, Any, Any], trace: OpTrace | None, depth: int
    ) -> Generator[Any, Any, Any]:
        """The process body driving ``gen`` on ``node_id``, bound to the node's
        incarnation now (a process starts later: one started before a crash
        must stop, not run on as if it belonged to the next incarnation)."""
        return self._run(node_id, gen, trace, depth, self.incarnation[node_id])

    def _run(
        self, node_id: int, gen: Generator[Any, Any, Any], trace: OpTrace | None, depth: int, inc: int
    ) -> Generator[Any, Any, Any]:
        # Effects are tested in the order of their frequency (Call, Local and
        # Compute are nine in ten); the cluster's methods are bound once per drive.
        env = self.env
        request = self._request
        incarnation = self.incarnation
        mach = self.machine
        # a handler's first wait for the network moves it onto a worker task (``wait_us``, once)
        wait = 0.0 if mach is None or depth == 0 else mach.p.wait_us
        value: Any = None
        exc: BaseException | None = None
        while True:
            if incarnation[node_id] != inc:  # the node crashed meanwhile: its work stops here
                gen.close()
                return None
            try:
                eff = gen.throw(exc) if exc is not None else gen.send(value)
            except StopIteration as stop:
                return stop.value
            value, exc = None, None
            t = type(eff)
            try:
                if t is Call:
                    if mach is None:
                        ok, value = yield request(node_id, eff.node, eff.request, trace, depth, True)
                    else:
                        ok, value = yield self._machine_call(node_id, eff.node, eff.request, trace, depth, wait)
                        wait = 0.0
                    if not ok:
                        exc, value = value, None
                elif t is Local:
                    delay, value, err = self._local(node_id, eff)
                    if delay > 0:
                        if mach is None:
                            yield env.timeout(delay)
                        else:  # CPU of the node's process (``cpu_at``)
                            yield _Done(env, mach.book(mach.nodes[node_id], env._now, delay))
                    if err is not None:
                        raise err
                elif t is Compute:
                    cost = self.cpu_costs.get(eff.work)
                    if cost is None:
                        raise UnknownWork(eff.work)
                    cost *= eff.units
                    if cost > 0 and mach is None:  # on a machine, inside the measured handler costs
                        yield self.cpu_work(node_id, cost)
                elif t is Multicast:
                    reqs = eff.requests()
                    if mach is None:
                        nodes = eff.nodes
                        events = [request(node_id, n, r, trace, depth, True) for n, r in zip(nodes, reqs, strict=True)]
                    else:
                        sizes = [wire_size(r) for r in reqs]
                        cost = sum(mach.message_us(s) for s in sizes) + len(reqs) * mach.p.call_us
                        yield self.cpu_at(node_id, cost + wait)
                        wait = 0.0
                        events = [
                            request(node_id, n, r, trace, depth, True, s)
                            for n, r, s in zip(eff.nodes, reqs, sizes, strict=True)
                        ]
                    value = []
                    for ev in events:
                        ok, v = yield ev
                        value.append(v)
                    if mach is not None:
                        sizes = [ev.size if ev.size >= 0 else wire_size(v) for ev, v in zip(events, value, strict=True)]
                        yield self.cpu_at(node_id, sum(mach.message_us(n) for n in sizes))
                elif t is Send:
                    if mach is None:
                        request(node_id, eff.node, eff.request, trace, depth, False)
                    else:
                        size = wire_size(eff.request)
                        now = env._now
                        sent = mach.run(node_id, now, mach.message_us(size))
                        request(node_id, eff.node, eff.request, trace, depth, False, size, sent - now)
                elif t is Spawn:
                    env.process(self._drive(node_id, eff.gen, trace, depth))
                elif t is Await:
                    ev = self._waits[node_id].get(eff.key)
                    if ev is None:
                        ev = self._waits[node_id][eff.key] = env.event()
                    value = yield ev
                    if isinstance(value, BaseException):
                        exc, value = value, None
                elif t is Wake:
                    ev = self._waits[node_id].pop(eff.key, None)
                    if ev is not None:
                        ev.succeed(eff.value)
                elif t is Now:
                    value = env.now * 1e-6
                elif t is Sleep:
                    yield env.timeout(eff.seconds * 1e6)
                else:
                    raise TypeError(f"not an effect: {eff!r}")
            except Exception as e:  # delivered into the protocol generator
                exc = e

    def _local(self, node_id: int, eff: Local) -> tuple[float, Any, OSError | None]:
        """A local operation on the node's disk, served first come first served:
        (how long the caller waits, the result, the error to raise after the wait).

        The disk is modelled as "busy until": the operation takes effect in
        arrival order and the caller waits for its queueing plus service time.
        Because every local operation of a node goes through this one queue,
        applying it at arrival gives the same results as applying it when its
        service starts, with one event instead of a resource request."""
        storage = self.storage[node_id]
        try:
            result = self.fs[node_id].apply(eff.op, eff.path, eff.args)
            err = None
            cost = storage.cost(eff.op, eff.path, eff.args, result)
        except OSError as e:
            result, err, cost = None, e, storage.error_cost
        if self.machine is not None:
            return cost, result, err  # CPU of the node's process (the caller books it)
        now = self.env._now
        start = self.disk_free[node_id]
        if start < now:
            start = now
        done = start + cost
        self.disk_free[node_id] = done
        return done - now, result, err

    # ------------------------------------------------------------------ network
    def _transmit(self, src: int, dst: int, size: int) -> float:
        """Delay until a message sent now from src arrives at dst (LogGP, NIC busy)."""
        if self.machine is not None:
            self.messages += 1
            self.message_bytes += size
            return self.machine.flight_us(size)
        now = self.env._now
        start = self.tx_free[src]
        if start < now:
            start = now
        net = self.net
        wire = (size - 1) * net.G
        self.tx_free[src] = start + (wire if wire > net.g else net.g)
        self.messages += 1
        self.message_bytes += size
        return start - now + 2 * net.o + wire + net.L

    def to_client(self, node: int, size: int) -> float:
        """A reply of ``size`` bytes from ``node`` to a client outside the
        federation (a DAFS client, Federated DAFS Fig. 5): it occupies the
        node's NIC like any message (file data to clients is what saturates a
        server's link for large files) but is no federation message, so it is
        not counted in ``messages``.  The delay until the client has it."""
        delay = self._transmit(node, node, size)
        self.messages -= 1  # (``_transmit`` stays the one model of the NIC; only its count is undone)
        self.message_bytes -= size
        return delay

    def _send(self, src: int, dst: int, req: Request, trace: OpTrace | None, size: int) -> float:
        """Put ``req`` (``size`` bytes on the wire) on the wire (the sender's
        NIC) and in the operation's trace; the delay until it arrives."""
        delay = self._transmit(src, dst, size)
        if trace is not None:
            probe = req.probe
            trace.record(src, dst, req.kind, size, probe)
            if not probe:
                trace.nodes.add(dst)
        return delay

    def _request(
        self,
        src: int,
        dst: int,
        req: Request,
        trace: OpTrace | None,
        depth: int,
        want_reply: bool,
        size: int = -1,
        after: float = 0.0,
    ) -> simpy.Event | None:
        """Send ``req`` (``size``: its ``wire_size``, if the caller has it) once
        ``after`` more microseconds have passed (the sender's CPU to send it, on a
        machine); the event its reply triggers, if ``want_reply``."""
        if size < 0:
            size = wire_size(req)
        delay = self._send(src, dst, req, trace, size) + after
        if self.faults is not None:
            return self._request_under_faults(src, dst, req, trace, depth, want_reply, size, delay)
        reply = _Reply(self.env) if want_reply else None
        if dst in self.down:
            if reply is not None:
                t = self.env.timeout(nested_timeout(self.rpc_timeout_us, depth))
                t.callbacks.append(
                    lambda _e: reply.succeed((False, PeerUnavailable(dst, "no reply within the timeout")))
                )
            return reply
        msg = _Msg(src, req, reply, trace, depth + 1, size)
        stage = stage_of(req, depth + 1)
        queue = self._queues[dst].get(stage) or self._queue(dst, stage)
        self.env.schedule(_Arrival(self.env, queue, msg), delay=delay)
        return reply

    def _request_under_faults(
        self, src: int, dst: int, req: Request, trace: OpTrace | None, depth: int, want_reply: bool, size: int,
        delay: float,
    ) -> simpy.Event | None:  # fmt: skip
        """``_request`` with the fault plan applied, for a request already on
        the wire (``delay``: until it would arrive) (kept apart so that a run
        without faults pays nothing for them).  The caller waits on ``reply``,
        which the first of three things triggers: the timeout, or the handler's
        reply if the plan lets it through (``_reply_under_faults``, which
        numbers the reply when it reaches the caller)."""
        env = self.env
        reply = _Reply(env) if want_reply else None
        if reply is not None:
            late = (False, PeerUnavailable(dst, "no reply within the timeout"))
            timer = env.timeout(nested_timeout(self.rpc_timeout_us, depth))
            timer.callbacks.append(lambda _e: reply.triggered or reply.succeed(late))
        if dst in self.down:
            return reply
        assert self.faults is not None
        fate = self.faults.fate(src, dst, req.kind, env.now * 1e-6)
        if fate is None:
            return reply  # lost: the timeout answers the caller
        inner = None
        if reply is not None:
            inner = env.event()
            inner.callbacks.append(lambda ev: self._reply_under_faults(ev, reply, dst, src))
        msg = _Msg(src, req, inner, trace, depth + 1, size)
        env.schedule(_Arrival(env, self._queue(dst, stage_of(req, depth + 1)), msg), delay=delay + fate * 1e6)
        return reply

    def _reply_under_faults(self, inner: simpy.Event, reply: simpy.Event, src: int, dst: int) -> None:
        """A reply from ``src`` reached ``dst``, where the caller waits on ``reply``."""
        if reply.triggered:
            return  # the caller timed out: nobody reads it, so it is not numbered
        fate = 0.0 if self.faults is None else self.faults.fate(src, dst, "reply", self.env.now * 1e-6)
        if fate is None:
            return
        if fate == 0.0:
            reply.succeed(inner.value)
        else:
            late = self.env.timeout(fate * 1e6)
            late.callbacks.append(lambda _e: reply.triggered or reply.succeed(inner.value))

    def _lost(self, node_id: int, msg: _Msg) -> None:
        """A request a crashed node will never answer: its caller gets
        PeerUnavailable after its timeout (counted from now, a little late)."""
        reply = msg.reply
        if reply is None or reply.triggered:
            return
        late = (False, PeerUnavailable(node_id, "no reply within the timeout"))
        t = self.env.timeout(nested_timeout(self.rpc_timeout_us, msg.depth - 1))
        t.callbacks.append(lambda _e: reply.triggered or reply.succeed(late))

    def _queue(self, node_id: int, depth: int) -> _RecvQueue:
        q = self._queues[node_id].get(depth)
        if q is None:
            if self.machine is None:
                q = self._queues[node_id][depth] = _RecvQueue()
                worker = self._worker
            else:
                q = self._queues[node_id][depth] = _RecvQueue(node_id, self._take)
                worker = self._machine_worker
            for _ in range(self.workers):
                self.env.process(worker(node_id, q))
        return q

    def _take(self, node_id: int, msg: _Msg, wake: simpy.Event) -> bool:
        """A worker of ``node_id`` on a machine takes request ``msg`` now: its
        receipt and dispatch are booked on the node's CPU and ``wake`` fires
        with (msg, node, incarnation) when they are done (the worker's state
        when it took it).  False: the node crashed, the request is lost."""
        if node_id in self.crashed:
            self._lost(node_id, msg)  # arrived at a crashed node: the caller times out
            return False
        node = self.nodes[node_id]
        node.stats.requests_served += 1
        mach = self.machine
        assert mach is not None
        st = mach.nodes[node_id]
        env = self.env
        if st.free > env._now or st.waiting:
            # Its event loop is busy: the request waits in its socket until the work in hand is done.
            # An agent answers a request that needs no other node in the callback that read it, to
            # the reply; booked now, this receipt would go between another request's receipt and its
            # reply, and hold back both (two clients' calls would leave the agent in step, and wait
            # for each other).  Read when the loop is free, it is read without a wake (``_retake``).
            self._wait(st, self._take_read, (node_id, msg, wake, self.incarnation[node_id]))
            return True
        kind = msg.req.kind
        cost = mach.message_us(msg.size) + mixed(st, kind, mach.dispatch(kind), mach.mix_agent)
        done = mach.book(st, env._now, cost, True)  # (``book_receipt``)
        wake._ok = True
        wake._value = (msg, node, self.incarnation[node_id])
        heappush(env._queue, (done, NORMAL, next(env._eid), wake))
        return True

    def _wait(self, st: ProcState, read: Callable[[Any], None], item: Any) -> None:
        """``item`` reached the process of state ``st`` while it was busy: it waits, first come first
        served, and ``read(item)`` books it once the work in hand is done (one event per wait, at
        the process's ``free``, checked again there: a request's next step may have been booked)."""
        waiting = st.waiting
        if waiting is None:
            waiting = st.waiting = deque()
        waiting.append((read, item))
        if len(waiting) == 1:
            _Drain(self.env, st.free, self, st)

    def _drain(self, ev: _Drain) -> None:
        """The process of ``ev.st`` may be free: read what waits for it, while it is (``_wait``)."""
        st = ev.st
        env = self.env
        waiting = st.waiting
        assert waiting is not None
        while waiting and st.free <= env._now:
            read, item = waiting.popleft()
            read(item)
        if waiting:
            _Drain(env, st.free, self, st)

    def _take_read(self, item: tuple[int, _Msg, simpy.Event, int]) -> None:
        """A request that found its node's event loop busy (``_take``), read now, without a wake (the
        loop never slept); at a node that crashed meanwhile it is lost, and its worker takes the next."""
        node_id, msg, wake, inc = item
        env = self.env
        if node_id in self.crashed or self.incarnation[node_id] != inc:
            self._lost(node_id, msg)
            wake._ok = True
            wake._value = None  # (the worker takes its next request)
            heappush(env._queue, (env._now, NORMAL, next(env._eid), wake))
            return
        mach = self.machine
        assert mach is not None
        st = mach.nodes[node_id]
        kind = msg.req.kind
        cost = mach.message_us(msg.size) + mixed(st, kind, mach.dispatch(kind), mach.mix_agent)
        done = mach.book(st, env._now, cost, True, True)  # (read by a loop that never slept)
        wake._ok = True
        wake._value = (msg, self.nodes[node_id], inc)
        heappush(env._queue, (done, NORMAL, next(env._eid), wake))

    def _worker(self, node_id: int, queue: _RecvQueue) -> Generator[Any, Any, None]:
        # the node object is looked up per message: a restart replaces it
        env = self.env
        nodes, crashed, incarnation = self.nodes, self.crashed, self.incarnation
        pending, idle = queue.pending, queue.idle
        wake = simpy.Event(env)  # reused: triggered only by _RecvQueue.put, never twice per wait
        while True:
            if pending:
                msg = pending.popleft()
            else:
                wake.callbacks = []
                wake._value = PENDING
                idle.append(wake)
                msg = yield wake
            if node_id in crashed:
                self._lost(node_id, msg)  # arrived at a crashed node: the caller times out
                continue
            node = nodes[node_id]
            inc = incarnation[node_id]
            node.stats.requests_served += 1
            try:
                value = yield from self._drive(node_id, node.handle(msg.src, msg.req), msg.trace, msg.depth)
                ok = True
            except Exception as e:
                value, ok = e, False
            if msg.reply is None:
                continue
            if incarnation[node_id] != inc:
                self._lost(node_id, msg)  # the node crashed while serving it: no reply
                continue
            # A reply's payload is charged at its size: a bulk reply (file data,
            # ``Request.bulk_reply``: Federated DAFS V-A's RDMA into the slot the
            # request named) costs its bytes' transfer time on this NIC and the
            # link, like any message: LogGP has no per-byte cost at the receiver,
            # so an RDMA WRITE and a SEND of the same bytes cost the same here.
            size = wire_size(value)
            delay = self._transmit(node_id, msg.src, size)
            if msg.trace is not None:
                msg.trace.record(node_id, msg.src, "reply", size, msg.req.probe)
            # Trigger the caller's event when the reply arrives: the event is
            # given its value now and scheduled after the delay (what
            # simpy.Timeout does), saving a timeout and a callback per reply.
            reply = msg.reply
            reply._ok = True
            reply._value = (ok, value)
            heappush(env._queue, (env._now + delay, NORMAL, next(env._eid), reply))  # env.schedule, inlined

    def _machine_worker(self, node_id: int, queue: _RecvQueue) -> Generator[Any, Any, None]:
        """``_worker`` on a machine: a request's receipt and dispatch are CPU of the
        node's process (``_take``), and so is its reply, booked when it is sent.

        A worker that takes a request from its queue books the CPU and waits
        for it; an idle worker is handed it by the queue, which books the CPU
        in the arrival's callback, where the worker would have booked it, so
        that the worker wakes once, when the CPU is done, not twice."""
        env = self.env
        incarnation = self.incarnation
        pending, idle = queue.pending, queue.idle
        mach = self.machine
        assert mach is not None
        take = self._take
        st = mach.nodes[node_id]
        wake = simpy.Event(env)  # reused: booked by ``_take`` once per request
        while True:
            if pending:
                msg = pending.popleft()
                wake.callbacks = []
                if not take(node_id, msg, wake):
                    continue
                got = yield wake
                if got is None:  # lost at a node that crashed while it waited for the event loop
                    continue
                msg, node, inc = got
            else:
                wake.callbacks = []
                wake._value = PENDING
                idle.append(wake)
                got = yield wake
                if type(got) is _Msg:  # handed over behind other events due now: taken here
                    wake.callbacks = []
                    if not take(node_id, got, wake):
                        continue
                    got = yield wake
                if got is None:  # lost at a node that crashed while it waited for the event loop
                    continue
                msg, node, inc = got
            try:
                value = yield from self._drive(node_id, node.handle(msg.src, msg.req), msg.trace, msg.depth)
                ok = True
            except Exception as e:
                value, ok = e, False
            reply = msg.reply
            if reply is None:
                continue
            if incarnation[node_id] != inc:
                self._lost(node_id, msg)  # the node crashed while serving it: no reply
                continue
            size = wire_size(value)  # (see ``_worker``)
            reply.size = size  # for its receiver's CPU (``_machine_call``)
            now = env._now
            # the reply's CPU, booked now: the reply leaves when it is done
            sent = mach.book(st, now, mach.message_us(size))
            delay = sent - now + self._transmit(node_id, msg.src, size)
            if msg.trace is not None:
                msg.trace.record(node_id, msg.src, "reply", size, msg.req.probe)
            reply._ok = True
            reply._value = (ok, value)
            heappush(env._queue, (now + delay, NORMAL, next(env._eid), reply))


class _Reply(simpy.Event):
    """The event a request's reply triggers.  On a machine model the worker
    that sends the reply sets its wire size, so that its receiver does not
    size it again; -1: not known (a timeout's answer, a reply under faults).
    Its caller (``_machine_call``) waits on it until it has received it
    (``SimCluster._received``, ``_rearm``)."""

    size: int = -1
    caller: Any = None  # the state (``fedsim.machine.ProcState``) of the node that called, on a machine


class _Hop(simpy.Event):
    """A client's (or a mount's) message to its agent, or the reply back
    (``SimCluster._hop``), scheduled for its arrival: its receiver ``dst``
    (a process's state; None: none) then gets ``us`` of CPU, and with ``calls`` the agent's CPU
    for each (``SimCluster._hop_arrived``), and the event fires again when
    that is done (``_rearm``)."""

    def __init__(
        self, env: simpy.Environment, cluster: SimCluster, dst: Any, us: float,
        calls: list[tuple[str, tuple[Any, ...]]] | None,
    ) -> None:  # fmt: skip
        # what simpy.Event.__init__ sets, then triggered: scheduled by the sender
        self.env = env
        self.callbacks = self.held = [cluster._on_hop] if dst is not None else []
        self._ok = True
        self._value = None
        self.dst = dst
        self.us = us
        self.calls = calls

    # set by the sender when it has work before (``SimCluster._hop_sent``) or after (``_hop_then``)
    src: Any = None
    src_us: float = 0.0
    by: Any = None  # the client thread whose work ``src``'s is (``Machine.handover``)
    flight: float = 0.0
    then: Any = None
    then_us: float = 0.0


class _Drain(simpy.Event):
    """When a busy process may be free to read what waits for it (``SimCluster._wait``)."""

    __slots__ = ("st",)

    def __init__(self, env: simpy.Environment, at: float, cluster: SimCluster, st: ProcState) -> None:
        self.env = env
        self.callbacks = [cluster._drain]
        self._ok = True
        self._value = None
        self.st = st
        heappush(env._queue, (at, NORMAL, next(env._eid), self))


class _Done(simpy.Event):
    """The end of a CPU job on the machine model (``SimCluster.cpu_at``):
    triggered when it is made and scheduled for ``at``, when the job is done."""

    def __init__(self, env: simpy.Environment, at: float) -> None:
        # what simpy.Event.__init__ sets, then triggered (what ``succeed`` does, for a later time)
        self.env = env
        self.callbacks = []
        self._ok = True
        self._value = None
        heappush(env._queue, (at, NORMAL, next(env._eid), self))


def _rearm(ev: simpy.Event, at: float, then: Callable[[Any], None] | None = None) -> None:
    """Schedule ``ev``, being processed now and this its first callback, again
    for ``at``: its other callbacks (the waiting process's resumption) are
    held back until then, after ``then`` (a next step, which rearms it again).
    (``Environment.step`` calls the callbacks of the list it took from the
    event: emptied past this one, it calls no more.)"""
    held = ev.held  # type: ignore[attr-defined]
    if then is None:
        ev.callbacks = held[1:]
    else:
        ev.callbacks = ev.held = [then, *held[1:]]  # type: ignore[attr-defined]
    del held[1:]
    env = ev.env
    heappush(env._queue, (at, NORMAL, next(env._eid), ev))


class _RecvQueue:
    """A node's receive queue for one stage: messages waiting for a worker,
    and idle workers waiting for a message (lighter than simpy.Store)."""

    __slots__ = ("idle", "node", "pending", "take")

    def __init__(self, node: int = -1, take: Callable[[int, _Msg, simpy.Event], bool] | None = None) -> None:
        self.pending: deque[_Msg] = deque()
        self.idle: deque[simpy.Event] = deque()
        #: on a machine, what a worker of ``node`` does when it takes a message (``SimCluster._take``)
        self.node = node
        self.take = take

    def put(self, msg: _Msg) -> None:
        idle = self.idle
        if idle:
            # The worker that has waited longest takes the message: its wake
            # event succeeds with it.  When no other event is due at this
            # instant, the wake event would be the very next one processed, so
            # it is processed here and now (what Environment.step does with an
            # event): the same order of events, one event fewer per request.
            # Otherwise it is scheduled, behind the events already due.
            # Called only from an arrival's callback, so the worker never runs
            # inside another process.
            # On a machine the worker would book the request's CPU and wait for
            # it (``take``): booked here, the worker wakes once, when it is done.
            wake = idle.popleft()
            env = wake.env
            heap = env._queue
            if heap and heap[0][0] <= env._now:
                wake._ok = True
                wake._value = msg
                env.schedule(wake)
            elif self.take is not None:
                if not self.take(self.node, msg, wake):
                    idle.append(wake)  # lost: the worker waits on, behind the others (as it would have)
            else:
                wake._ok = True
                wake._value = msg
                callbacks, wake.callbacks = wake.callbacks, None
                for callback in callbacks:
                    callback(wake)
        else:
            self.pending.append(msg)


class _Arrival(simpy.Event):
    """A message reaching its destination's receive queue."""

    __slots__ = ("msg", "queue")

    def __init__(self, env: simpy.Environment, queue: _RecvQueue, msg: _Msg) -> None:
        # what simpy.Event.__init__ sets, then triggered: scheduled by the sender
        self.env = env
        self.callbacks = [_deliver]
        self._ok = True
        self._value = None
        self.queue = queue
        self.msg = msg


def _deliver(ev: _Arrival) -> None:
    ev.queue.put(ev.msg)
