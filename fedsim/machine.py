"""The machine a federation runs on: hosts, their cores, and the processes sharing them.

The papers' model (``fedsim.runtime`` without a machine) gives every node its
own CPU, prices a message by LogGP's delays alone, and puts the clients on
the nodes for free.  That predicts the hardware of the papers, where a node
was a host and the messaging was a NIC's.  It does not predict agents written
in Python sharing a 2-core machine with their clients: there a message costs
CPU at both ends, a request costs its handler's CPU, a client costs CPU per
call, one agent runs one request at a time (one thread: the GIL), and every
process competes for the host's cores.  ``fedsim.runtime`` asks this module
for each of those costs when a config's ``machine:`` section (usually filled
from a ``fednode calibrate`` profile) turns the model on:

* **processes**: each node is one process, as an agent is; so is each client
  program (``clients: shared`` puts every client in one process, as threads of
  one Python program share a GIL; ``own``, one process each), and each mount.
  A process runs one CPU job at a time;
* **hosts**: ``hosts`` hosts of ``cores`` cores each; node i on host
  ``i % hosts`` (``hosts: 0``: a host per node, the papers' cluster), clients
  on the host of the node they are attached to unless there is one host;
* **messages**: LogGP's overhead ``o`` (and ``byte_us`` per byte) is CPU at
  the sender's and the receiver's process; the flight is ``L`` plus the wire
  (``G`` per byte), or between a client program and its agent ``client_L_us``
  (a client reaches its agent over TCP whatever the agents' transport is: over
  verbs in the Soft-RoCE guest the two differ several times), and an agent's
  CPU per message end with a client ``client_o_us`` (0 where the calibration
  folds it into ``api_us``, as it does when the agents' transport is not TCP);
  ``api_tail_us`` of a client call's CPU the agent spends after its reply has
  left: its process's, on nobody's path (the calibration finds it where a
  call's latency is less than the client's and the agent's CPU for it);
* **requests**: ``call_us`` of CPU at the caller for each request it waits
  for (an agent's task and future), ``dispatch_us[kind]`` of CPU to serve a request beyond its
  messages and its local operations (``*``: any kind not listed), and
  ``api_us[op]`` at the requester for a client's call;
* **waits**: a request whose handler waits for the network (a call of its
  own) costs its server ``wait_us`` more, once: an agent answers a request
  at once in the callback that read it, and moves one that must wait onto a
  worker task (``fednode calibrate``'s nested batches measure it);
* **mixes**: the api, dispatch and client costs are measured in batches of
  one kind of call; a job of another kind than its process's last costs
  ``mix_agent`` (``mix_client`` at a client) more, measured on an interleaved
  cycle of every call;
* **oversubscribed cores**: a job started while more of its host's
  processes are runnable (have CPU work booked; a client program's threads
  are the program: their kernel work is a few microseconds between sleeps,
  and the census sees no preemption of them) than the host has cores costs
  ``oversub_share`` more: the context switch and the caches it finds cold,
  which a contention microbenchmark of ``fednode calibrate`` measures
  (``fit_contention``).  Once, however many processes wait: a cache gone cold
  is cold, and a job is switched in once (priced per process beyond the
  cores, the share fitted on 5 processes made 12, four agents with their
  mounts and programs, 1.7 times dearer than they measured, census);
* **receipts without a wake**: a message that arrives while its process
  still has work booked is read by an event loop that never slept: its
  receipt costs ``wake_us`` less (the LogGP ``o`` of the calibration's
  round trips is a sleeping process's).  On this VM one agent called by 1, 2,
  4 and 8 client threads at once spends 70, 56, 59 and 58 us of CPU per call
  over every process (``fednode calibrate``'s fan-in microbenchmark, which
  ``fit_wake`` fits: about 12 us): SFS97 on one agent saturates at twice its
  one-client rate, which a model pricing every receipt as a wake could not
  reach;
* **run to completion**: an agent answers a request that needs no other node
  in the event loop's callback that read it, to the reply; a message that
  reaches a busy process waits for the work in hand (``fedsim.runtime``
  books its receipt when the process is free, without a wake), instead of
  going between another request's receipt and its reply.  Booked on arrival,
  two client threads' calls to one agent held each other's replies back and
  ran in step: the model gave 20k calls/s where the machine gives 31k;
* **brief idles**: a process idle for less than ``poll_us``, on a core that
  ran nothing else since (a process goes back to its last core when that is
  free), is woken on a vCPU that still polls (the guest's haltpoll idles before
  it halts): its receipt pays ``wake_us`` less, as a busy one's does, and its
  job is not a woken one's (``capacity``).  A client program counts as awake
  while one of its threads runs.  Two client threads calling one agent spend
  47 us of CPU per call over every process, against 76 for one thread: the
  client's part falls from 28 to 17 us though the program is idle at most of
  its replies, for about 15 us at a time; one thread leaves each process idle
  for a whole hop of the other.  ``fit_poll`` fits the span (on a grid) with
  ``wake_us`` to the fan-in microbenchmark's CPU per call and calls per second;
* **placement**: on a VM a hand-off to a process on another core wakes that core (an
  interprocessor interrupt and a halted vCPU's exit); whether the scheduler keeps a client
  and its agent on one core or spreads them is its choice, kept for minutes, and one round
  trip costs 1.7 times as much spread (``fednode calibrate``'s placement microbenchmark).
  The costs above are those of the placement the calibration ran in; ``handoff_us`` adds
  to (or, negative, takes from) every receipt that wakes its process the difference to the
  placement a prediction is for (``experiments.validation`` probes the placement beside
  each measurement: one core's wake and two cores' differ by half a round trip's gap);
* **cold caches**: a process that wakes after other processes of its host
  ran finds its cores' caches filled with theirs; beyond as many of them as
  the host has cores (each could keep a core warm) each costs the job
  ``cold_us`` more, up to ``cold_cap_us`` (its working set refilled whole).
  Threads of one client program share its memory: they count as it.  On this
  2-core VM one client thread calling 1, 2 ... 6 agents in turn (one process
  running at a time) spends 73, 76, 91, 102, 112 and 104 us of CPU per call
  over every process (``fednode calibrate``'s chain microbenchmark, which
  ``fit_cold`` fits): four agents and their clients, where every hop wakes a
  process the others evicted, cost 1.4 to 1.7 times the model without it
  (``experiments.validation``'s SFS97 at 4 agents, census);
* **cores worth less than whole**: a job that wakes its process (submitted
  while the process had nothing booked) while other cores of its host are
  busy runs ``in_use / capacity`` slower when ``capacity`` (cores' worth side
  by side) is below the cores in use; a job of a process that never slept
  keeps its core (a saturated agent's CPU per operation falls, census).  Processes that hand work
  to each other by messages do not keep a VM's cores busy as CPU-bound ones
  do: on this 2-vCPU VM, 2 to 4 client threads calling agents keep 1.45 to
  1.7 cores busy with processes waiting to run (``fednode.tools.census``),
  while two spinning processes get 1.9 cores' worth.  The wake-ups, the
  scheduler's placement of a woken process and the vCPUs' halts are not
  modelled one by one; their sum is: ``capacity`` is fitted by simulating
  the contention and fan-in microbenchmarks of ``fednode calibrate`` until
  their calls per second are the measured ones (``fit_contention``), and the model spends it
  as slower CPU (its CPU per call is then above the processes' measured CPU:
  the difference is core time nobody ran on);
* **the GIL's hand-off**: a client program's job for another thread than its
  last job's costs ``gil_us`` more: the program's threads take turns holding
  its interpreter, and each change of turn switches a core to a thread whose
  state the other's turn left cold (``Machine.handover``).  One thread never
  changes; threads calling agents at once change at nearly every job, and
  their program's CPU per call grows with them where the model without it
  fell (``fit_gil`` fits it to the contention and fan-in microbenchmarks'
  client columns);
* **local file system**: the storage model's cost of a ``Local`` operation is
  CPU of the node's process (a local file system on a warm page cache is the
  kernel's CPU, not a disk's queue);
* **clients**: ``client_us[op]`` of CPU per call at the client's process
  (``*``: any call not listed), half before the request and half after the
  reply, and a message each way to the agent.  Threads of one client program
  (``clients: shared``) share its interpreter: the ``client_user_share`` of a
  call's CPU (user time, measured) runs on the program's one process, the
  rest (the kernel's socket work, done without the GIL) on the thread's own.

CPU jobs are served first come first served: a job starts when its process
and a core of its host are both free (the core that frees first).  Every
cost is a plain number from the profile; nothing here is fitted.  A job is
submitted when its work exists: a receipt when its message arrives, not when
it was sent (booked at the send, it would hold a core idle until the arrival
and go before the jobs submitted during the flight); ``fedsim.runtime`` pays
an event per such job for it.  The event itself is not most of the model's
price in simulator speed (``fedsim.bench``): a SimPy event and its callback
cost about 0.4 us of the 1.5-2 us the model adds per CPU job; the rest is the
Python work of each step (booking the job, the message's event, resuming the
process that waited), which is why the runtime books on a process's state
(``ProcState``, ``Machine.book``) that it holds, not on its key, and why a
process's place on its host's recency list (``cold_us``) is a flag on it
(``ProcState.held``): looked for on a list it had left, it cost a job a
raised and caught ``ValueError`` (its message formats the state), about a
tenth of a run on the model (``fedsim.bench``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, NamedTuple

#: processes of the clients: all in one program (threads), or one program each
ClientProcs = Literal["shared", "own"]


@dataclass(slots=True)
class MachineParams:
    """What a calibrated profile says the machine costs (microseconds)."""

    hosts: int = 0  # 0: one host per node
    cores: int = 2  # per host
    o_us: float = 0.0  # CPU per message at each end
    L_us: float = 0.0  # a message's flight beyond CPU (wake-ups, the loopback's softirq)
    client_L_us: float | None = None  # the same between a client program and its agent (None: L_us)
    client_o_us: float | None = None  # an agent's CPU per message end with a client program (None: o_us)
    api_tail_us: float = 0.0  # an agent's CPU per client call after its reply has left (nobody waits for it)
    byte_us: float = 0.0  # CPU per byte at each end
    G_us_per_byte: float = 0.0  # the wire per byte
    call_us: float = 0.0  # CPU at a caller per request it waits for, beyond the messages
    wait_us: float = 0.0  # CPU at a server for a request whose handler waits for the network (once)
    dispatch_us: dict[str, float] = field(default_factory=dict)
    api_us: dict[str, float] = field(default_factory=dict)
    client_us: dict[str, float] = field(default_factory=dict)
    clients: ClientProcs = "shared"
    mix_agent: float = 0.0  # extra share of api/dispatch CPU for work of another kind than the process's last
    mix_client: float = 0.0  # the same for a client's calls
    oversub_share: float = 0.0  # extra share of a job started while more processes are runnable than cores
    capacity: float = 0.0  # cores' worth the host's cores give side by side (0: whole cores)
    client_user_share: float = 1.0  # of a client call's CPU, the interpreter's (the GIL's); the rest the kernel's
    cold_us: float = 0.0  # a job's CPU per other process beyond the cores that ran on its host since its last
    cold_cap_us: float = 0.0  # the most that costs a job: its whole working set refilled (0: no bound)
    wake_us: float = 0.0  # of a message's receipt, the CPU a process busy when it arrives does not pay (no wake)
    handoff_us: float = 0.0  # CPU added to a receipt that wakes its process (negative: less): placement's correction
    poll_us: float = 0.0  # a receipt at a process idle for less than this pays no wake either (``wake_us`` less)
    gil_us: float = 0.0  # a client program's job for another thread than its last job's (the GIL's hand-off)

    @classmethod
    def of(cls, section: Mapping[str, Any]) -> MachineParams:
        """From a ``machine:`` section or a profile's (its other keys, such as
        ``model``, ``measured_on`` or ``fuse``, are not prices and are left out)."""
        return cls(**{k: v for k, v in section.items() if k in cls.__dataclass_fields__})


class ProcState:
    """A process's state: its host's cores (the host's list, shared), its
    host's processes' states (the host's list, shared: ``oversub_share``),
    when its thread is free, the CPU booked for it (``Machine.busy``) and the
    kind of its last work (``Machine.mixed``).  The runtime holds these for
    the processes it books on (``Machine.node``, ``Machine.state``) and books
    on them directly (``Machine.book``): one look-up per process, not one per job."""

    __slots__ = ("active", "busy", "core", "cores", "free", "held", "key", "kids", "last", "listed", "owner", "peers",
                 "ran", "recent", "space", "waiting")  # fmt: skip

    def __init__(
        self,
        key: Hashable,
        cores: list[float],
        peers: list[ProcState],
        recent: list[ProcState],
        active: list[ProcState],
        space: ProcState | None = None,
    ) -> None:
        self.key = key
        #: whose caches its jobs use: its own, or for a thread of a client program the program's (``cold_us``)
        self.space = self if space is None else space
        self.cores = cores
        self.core = -1  # the core its last job ran on (its next goes back to it when that is free)
        #: a client program's threads (``thread_state``): while one runs, the program is awake
        self.kids: list[ProcState] = []
        #: for a client program, the thread its last job ran for (``Machine.handover``)
        self.owner: ProcState | None = None
        #: what reached it while it was busy, to read when it is free (``fedsim.runtime``), or None
        self.waiting: deque[tuple[Any, Any]] | None = None
        self.peers = peers
        self.free = 0.0
        self.busy = 0.0
        self.ran = False  # in ``Machine.ran`` (a job booked since the last ``clear_busy``)
        self.last: str | None = None  # the kind of its last api, dispatch or client work (``mixed``)
        #: the host's processes (spaces) by their last job's start, latest first (the host's list,
        #: shared; ``cold_us``): those before this one's ran since it last did
        self.recent = recent
        self.held = False  # in ``recent`` (a space's)
        #: the host's processes (spaces) booked since a job last found them idle (the host's list,
        #: shared; ``oversub_share``): the runnable ones are among them
        self.active = active
        self.listed = False  # in ``active``


class Machine:
    """The hosts' cores and the processes' threads, as "busy until" times.

    ``run(proc, us)`` books ``us`` of CPU for process ``proc`` submitted now
    and returns when it ends.  A job waits for its process (one thread) and
    then for its host's earliest-free core; both are then busy until it ends.
    Booking at submission keeps it one heap entry per job, as the runtime's
    other queues do.  ``book(state, ...)`` is the same on a process's state
    (``node``, ``state``), which the runtime's hot paths hold."""

    __slots__ = ("_G", "_L", "_Lc", "_any_api", "_any_client", "_any_dispatch", "_api", "_byte", "_client",
                 "_client_states", "_clients", "_dispatch", "_o", "_oc", "_threads", "_two", "call_us", "cap",
                 "cold", "cold_cap", "core_free", "depth", "gil", "handoff", "host_active", "host_procs",
                 "host_recent", "host_states", "kernel_share", "mix_agent", "mix_client", "n", "n_nodes", "nodes",
                 "p", "poll", "proc_host", "procs", "pruned", "ran", "share", "wake")  # fmt: skip

    def __init__(self, params: MachineParams, n_nodes: int) -> None:
        if params.cores <= 0:
            raise ValueError(f"machine.cores must be positive, got {params.cores}")
        if params.hosts < 0:
            raise ValueError(f"machine.hosts must be 0 (a host per node) or positive, got {params.hosts}")
        self.p = params
        self.n_nodes = n_nodes
        self.core_free: dict[int, list[float]] = {}
        self.proc_host: dict[Hashable, int] = {}
        #: each process's state (``ProcState``): one look-up per job
        self.procs: dict[Hashable, ProcState] = {}
        #: the processes that ran a job, in the order of their first (``busy``)
        self.ran: list[ProcState] = []
        # the prices read for every job or message (the params are not changed once the machine is built)
        self.share = params.oversub_share
        self._two = params.cores == 2  # (``book``'s unrolled case)
        self.cap = params.capacity
        self.cold, self.cold_cap = params.cold_us, params.cold_cap_us
        # how many processes the recency lists keep: those a refill counts, up to its cap (0: all of them)
        cap_n = -(-params.cold_cap_us // params.cold_us) if params.cold_us and params.cold_cap_us else 0
        self.depth = int(params.cores + cap_n + 1) if cap_n else -1  # (-1: all of them)
        self.n = params.cores
        self.host_recent: dict[int, list[ProcState]] = {}
        self.host_active: dict[int, list[ProcState]] = {}
        self.pruned = 0.0  # the latest time the ``active`` lists were pruned at (``book``)
        self.wake = params.wake_us
        self.poll = params.poll_us
        self.handoff = params.handoff_us
        self.gil = params.gil_us
        self.call_us = params.call_us
        #: of a client call's CPU, the share its thread of a shared program spends apart (0: none)
        shared = params.clients == "shared" and params.client_user_share < 1.0
        self.kernel_share = 1.0 - params.client_user_share if shared else 0.0
        self.mix_agent, self.mix_client = params.mix_agent, params.mix_client
        self._o, self._byte = params.o_us, params.byte_us
        self._L, self._G = params.L_us, params.G_us_per_byte
        self._Lc = params.L_us if params.client_L_us is None else params.client_L_us
        self._oc = params.o_us if params.client_o_us is None else params.client_o_us
        # the cost tables and their ``*`` (any other key), read once per request or call
        self._dispatch, self._any_dispatch = params.dispatch_us, params.dispatch_us.get("*", 0.0)
        self._api, self._any_api = params.api_us, params.api_us.get("*", 0.0)
        self._client, self._any_client = params.client_us, params.client_us.get("*", 0.0)
        #: each client's process (``client_proc``)
        self._clients: dict[int, Hashable] = {}
        self._client_states: dict[int, ProcState] = {}
        self._threads: dict[int, ProcState] = {}
        #: the processes of each host (``oversub_share`` counts the runnable ones), and their states
        self.host_procs: dict[int, list[Hashable]] = {}
        self.host_states: dict[int, list[ProcState]] = {}
        #: node i's process's state, for the runtime's hot paths (placing a process changes no
        #: booking: a host's cores and its processes' states are only read when a job is booked)
        self.nodes: list[ProcState] = []
        for node in range(n_nodes):
            self.node(node)

    def host_of_node(self, node: int) -> int:
        hosts = self.p.hosts
        return node % hosts if hosts else node

    def node(self, node: int) -> ProcState:
        """Node ``node``'s process's state (placed on its host the first time: a node that joined later)."""
        nodes = self.nodes
        while len(nodes) <= node:
            nodes.append(self.state(len(nodes)))
        return nodes[node]

    def state(self, proc: Hashable) -> ProcState:
        """The state of process ``proc``; a node's (an int) is placed on its host the first time."""
        st = self.procs.get(proc)
        if st is None:
            self.add_proc(proc, self.host_of_node(proc))  # type: ignore[arg-type]
            st = self.procs[proc]
        return st

    def client_proc(self, client: int, node: int) -> Hashable:
        """The process of client ``client`` (attached to ``node``), placed on its host."""
        proc = self._clients.get(client)
        if proc is None:
            proc = self._clients[client] = ("client", 0 if self.p.clients == "shared" else client)
            if proc not in self.proc_host:
                self.add_proc(proc, 0 if self.p.hosts == 1 else self.host_of_node(node))
        return proc

    def client_state(self, client: int, node: int) -> ProcState:
        """The state of client ``client``'s process (``client_proc``)."""
        st = self._client_states.get(client)
        if st is None:
            st = self._client_states[client] = self.procs[self.client_proc(client, node)]
        return st

    def thread_state(self, client: int, node: int) -> ProcState:
        """The state of client ``client``'s thread of the client program (``clients: shared``): the
        process its kernel work runs on (``client_user_share``), in the program's memory (``cold_us``)."""
        st = self._threads.get(client)
        if st is None:
            program = self.client_state(client, node).key
            thread = self.add_proc(("client-thread", client), self.proc_host[program], program)
            st = self._threads[client] = self.procs[thread]
            self.procs[program].kids.append(st)
        return st

    def add_proc(self, proc: Hashable, host: int, space: Hashable | None = None) -> Hashable:
        """Place ``proc`` on ``host``; ``space``: the process whose memory it runs in (a thread's program)."""
        if proc not in self.proc_host:
            self.proc_host[proc] = host
            self.host_procs.setdefault(host, []).append(proc)
            cores = self.core_free.get(host)
            if cores is None:
                cores = self.core_free[host] = [0.0] * self.p.cores
            peers = self.host_states.setdefault(host, [])
            recent = self.host_recent.setdefault(host, [])
            active = self.host_active.setdefault(host, [])
            st = self.procs[proc] = ProcState(
                proc, cores, peers, recent, active, None if space is None else self.procs[space]
            )
            peers.append(st)
        return proc

    @property
    def busy(self) -> dict[Hashable, float]:
        """CPU booked per process so far (us): utilisations, for naming the bottleneck."""
        return {st.key: st.busy for st in self.ran}

    def clear_busy(self) -> None:
        """Start ``busy`` over (a measurement after a warm-up)."""
        for st in self.ran:
            st.busy = 0.0
            st.ran = False
        self.ran.clear()

    def run(self, proc: Hashable, now: float, us: float) -> float:
        """When ``us`` of CPU submitted now by ``proc`` ends."""
        return self.book(self.state(proc), now, us)

    def book(self, st: ProcState, now: float, us: float, receipt: bool = False, awake: bool = False) -> float:
        """When ``us`` of CPU submitted now by the process of state ``st`` ends; with ``receipt``, a
        message's receipt (``book_receipt``: ``wake_us`` less if its process is awake, else
        ``handoff_us`` more); ``awake``: its process did not sleep for it (a receipt that waited for
        the work in hand: ``SimCluster._wait``), whatever ``awake`` would find now.
        (Called for every CPU job of a simulation: written for speed, two cores unrolled.)"""
        start = st.free
        if receipt:
            if awake or start > now or (self.poll and self.awake(st, now)):  # read without a wake
                awake = True
                if self.wake:
                    us = us - self.wake if us > self.wake else 0.0
            elif self.handoff:  # it wakes (free just now too): the placement's correction
                us = us + self.handoff if us + self.handoff > 0.0 else 0.0
        woken = start < now and not awake  # its process slept: the scheduler wakes it and places it on a core
        if start < now:
            start = now
        cores = st.cores
        if self.cold:
            # Cold caches: the other processes of the host that ran since this one's last job filled
            # its cores' caches; beyond as many as there are cores, each costs a woken job a refill,
            # up to all of it.  A job of a process that never slept runs on the core it kept, warm.
            # (Whether a space is on its host's list is its flag, ``held``: one not on it is not
            # looked for, which was most of a job's price on a host of many processes.)
            space = st.space
            recent = st.recent
            if space.held:
                if recent[0] is not space:  # (first: none ran since, the job of a process that kept working)
                    since = recent.index(space)  # the processes that ran since its last job
                    del recent[since]  # to the front
                    recent.insert(0, space)
                    if woken and since > self.n:
                        us += self.cold_cost(since - self.n)
            else:
                since = len(recent)  # never ran (or more ran since than a refill counts)
                recent.insert(0, space)
                space.held = True
                if since == self.depth:  # more than a refill counts: the last leaves the list
                    recent.pop().held = False
                if woken and since > self.n:
                    us += self.cold_cost(since - self.n)
        if self.share:
            # Oversubscribed cores: the other processes of the host with work booked beyond now are
            # runnable; more of them than cores make this job dearer (a switch, cold caches).
            # They are counted on the host's list of spaces booked since they were last seen idle, not
            # on all its processes (a host of 1024 nodes has a few of them booked at a time), and only
            # until there are more than cores (a saturated host has many): one seen idle at the
            # latest time is idle at any later one until it is booked again, so it leaves the list.
            # A time before the latest (a caller of ``run`` out of order) counts them all.
            if now >= self.pruned:
                self.pruned = now
                active = st.active
                n = self.n
                runnable = 1
                kept = i = 0
                for q in active:
                    i += 1
                    if q.free > now:
                        active[kept] = q
                        kept += 1
                        if q is not st:
                            runnable += 1
                            if runnable > n:
                                break
                    else:
                        q.listed = False
                if kept < i:
                    del active[kept:i]  # those seen idle (and the places of those moved up)
            else:
                runnable = 1 + sum(1 for q in st.peers if q is not st and q.space is q and q.free > now)
            if runnable > self.n:
                us *= 1.0 + self.share
        # its last core if that is free when the job can start (a running process keeps its core; a
        # woken one goes back to it), else the core that frees first (the lowest on a tie)
        i = st.core
        if i >= 0 and cores[i] <= start:
            free = cores[i]
        elif self._two:
            free = cores[0]
            i = 0
            if cores[1] < free:
                free = cores[1]
                i = 1
        else:
            free = min(cores)
            i = cores.index(free)
        if free > start:
            start = free
        if self.cap and woken:
            # Cores that are not whole: with k of them busy at once the host does cap's worth of
            # work, not k; a job that wakes its process beside busy cores runs that much slower
            # (one of a process that never slept keeps its core: a saturated agent).
            if self._two:
                in_use = 1 + (cores[0] > start) + (cores[1] > start)
            else:
                in_use = 1 + sum(1 for c in cores if c > start)
            if in_use > self.cap:
                us *= in_use / self.cap
        cores[i] = done = start + us
        st.core = i
        st.free = done
        if not st.listed and st.space is st:  # (``oversub_share``'s runnable processes)
            st.listed = True
            st.active.append(st)
        st.busy += us
        if not st.ran:
            st.ran = True
            self.ran.append(st)
        return done

    def awake(self, st: ProcState, now: float) -> bool:
        """Whether a message that reaches the process of state ``st`` now finds it awake: busy (it or,
        for a client program, one of its threads), or idle for less than ``poll_us`` on a core that
        ran nothing else since (its vCPU still polls; another process's work would have put it to
        sleep and taken its caches)."""
        core = st.core
        last = mine = st.free  # its (or its threads') last job's end; ``mine``: the last on its core
        for k in st.kids:
            if k.free > last:
                last = k.free
            if k.core == core and k.free > mine:
                mine = k.free
        if last > now:
            return True
        return now - last < self.poll and core >= 0 and st.cores[core] <= mine

    def handover(self, program: ProcState, thread: ProcState) -> float:
        """The CPU a job of client program ``program`` for its thread ``thread`` costs more because its
        last job ran for another thread (``gil_us``, or 0); it notes ``thread`` as the last.

        Why: threads of one Python program take turns holding its interpreter (the GIL), and a
        turn's change is a switch of the core between the program's threads (often from the
        kernel's work of one to the interpreter's of the other, ``client_user_share``) onto a
        thread whose interpreter state, stack and socket the other's turn left cold; a thread
        that finds the lock held sleeps until the holder signals it (CPython's ``take_gil``).
        One thread never changes turns; threads calling agents at once change at nearly every
        job.  On this VM the contention microbenchmark's client program spent 53, 66, 55 and 72 us
        per call at 1 to 4 threads where the model without it gave 45, 38, 55 and 35 (``fit_gil``
        fits it to that column and the fan-in one's).  Priced on every change, not only on a
        wait: the simulated threads keep a fixed phase, so a price on waits alone came and went
        with it (three threads' calls cost 4 us more with ``gil_us`` 4 and none with 6), which no
        fit can follow."""
        last = program.owner
        program.owner = thread
        return self.gil if last is not None and last is not thread else 0.0

    def receive(self, proc: Hashable, now: float, us: float) -> float:
        """``run`` for the receipt of a message (``us``: its CPU, and any work booked with it): a
        process that still has work booked when the message arrives reads it without waking
        (its event loop finds it ready), ``wake_us`` less than one that slept for it."""
        return self.book_receipt(self.state(proc), now, us)

    def book_receipt(self, st: ProcState, now: float, us: float) -> float:
        """``receive`` on a process's state (``book`` for a receipt: the runtime's hot paths).  A
        receipt that wakes its process costs ``handoff_us`` more (or less: the placement correction)."""
        return self.book(st, now, us, True)

    def cold_cost(self, others: int) -> float:
        """A job's refill of caches that ``others`` processes beyond the host's cores filled since its
        process last ran: ``cold_us`` each, at most ``cold_cap_us`` (the whole working set)."""
        extra = self.cold * others
        return extra if not self.cold_cap or extra < self.cold_cap else self.cold_cap

    def mixed(self, proc: Hashable, label: str, us: float, share: float) -> float:
        """``us`` of work of kind ``label`` at ``proc``, ``share`` dearer when the
        process's last work was of another kind: a batch of one kind of call
        runs on warm caches and an interpreter specialised for it, a mix does not."""
        return mixed(self.state(proc), label, us, share)

    # -------------------------------------------------------------- prices
    def message_us(self, size: int) -> float:
        """CPU at one end of a message of ``size`` bytes."""
        return self._o + size * self._byte

    def flight_us(self, size: int) -> float:
        return self._L + (size - 1 if size > 1 else 0) * self._G

    def client_message_us(self, size: int) -> float:
        """CPU at an agent's end of a message to or from a client program: ``client_o_us``
        (the agents' ``o`` where not measured apart) and ``byte_us`` per byte."""
        return self._oc + size * self._byte

    def client_flight_us(self, size: int) -> float:
        """A message's flight between a client program (or a mount) and its agent: the
        client link's ``client_L_us`` (the agents' ``L`` where not measured)."""
        return self._Lc + (size - 1 if size > 1 else 0) * self._G

    # ``table``'s cost of ``key``, or its ``*`` (any other), or nothing (once per request or call)
    def dispatch(self, kind: str) -> float:
        return self._dispatch.get(kind, self._any_dispatch)

    def api(self, op: str) -> float:
        return self._api.get(op, self._any_api)

    def client(self, op: str) -> float:
        return self._client.get(op, self._any_client)


def mixed(st: ProcState, label: str, us: float, share: float) -> float:
    """``Machine.mixed`` on a process's state."""
    last = st.last
    st.last = label
    return us if last == label else us * (1.0 + share)


# ---------------------------------------------------------------------------------------------- calibration
class BenchRun(NamedTuple):
    """A simulated microbenchmark's measures, as ``fednode calibrate`` records them: CPU per call over
    every process, calls per second, and of that CPU the client program's (its threads' included)."""

    cpu: float
    rate: float
    client: float


def _bench_run(machine: Machine, calls: int, span: float) -> BenchRun:
    busy = machine.busy
    client = sum(v for k, v in busy.items() if isinstance(k, tuple) and str(k[0]).startswith("client"))
    return BenchRun(sum(busy.values()) / calls, calls / span * 1e6, client / calls)


def _bench_cluster(
    params: MachineParams, nodes: int, dirs: dict[int, str], machine: Machine | None = None
) -> tuple[Any, dict[int, list[str]]]:
    """The federation a simulated microbenchmark of ``fednode calibrate`` runs on: ``nodes`` nodes on
    ``params``' machine (``machine``: another one, put in place before anything runs), a free network
    (the calibration's costs are the machine's), and for each node of ``dirs`` its directory made
    there with 20 files the node manages and holds in it (by name: node -> its files)."""
    from fedsim.network import LogGP
    from fedsim.protocol.config import ProtocolConfig
    from fedsim.protocol.hashing import names_managed_by
    from fedsim.runtime import SimCluster

    c = SimCluster(nodes, network=LogGP(0, 0, 0, 0), protocol=ProtocolConfig(), machine=params)
    if machine is not None:
        c.machine = machine
    c.preload_summaries()
    files = {}
    for a, d in dirs.items():
        files[a] = names_managed_by(c.nodes[a].view.hashing, a, f"{d}/f", 20)
        c.env.run(until=c.env.process(c.client_op(0, a, "mkdir", d)))
        for f in files[a]:
            c.env.run(until=c.env.process(c.client_op(0, a, "create", f)))
    return c, files


def contention_bench(params: MachineParams, threads: int, calls: int = 300) -> BenchRun:
    """The contention microbenchmark of ``fednode calibrate``, simulated: ``threads``
    client threads of one program, thread i's call j a ``stat`` at node (i + j) mod
    ``threads`` on a file it manages and holds, all on one host.  (CPU per call over
    all processes, calls per s, the client program's CPU per call: ``BenchRun``.)"""
    c, files = _bench_cluster(replace(params, hosts=1), max(threads, 2), {i: f"/c{i}" for i in range(threads)})
    assert c.machine is not None
    c.machine.clear_busy()
    t0 = c.env.now

    def client(i: int):
        for j in range(calls):
            a = (i + j) % threads
            yield from c.client_op(i, a, "stat", files[a][j % 20])

    procs = [c.env.process(client(i)) for i in range(threads)]
    c.env.run(until=c.env.all_of(procs))
    span = c.env.now - t0
    total = threads * calls
    return _bench_run(c.machine, total, span)


class _Refills(Machine):
    """A machine that counts the refills ``cold_cost`` would price instead of pricing them: how many
    jobs found how many processes beyond the cores since their last (``chain_bench``)."""

    __slots__ = ("refills",)

    def __init__(self, params: MachineParams, n_nodes: int) -> None:
        super().__init__(replace(params, cold_us=1.0, cold_cap_us=0.0), n_nodes)
        self.refills: dict[int, int] = {}

    def cold_cost(self, others: int) -> float:
        self.refills[others] = self.refills.get(others, 0) + 1
        return 0.0


def chain_run(
    params: MachineParams, agents: int, calls: int = 200, machine: Machine | None = None
) -> BenchRun:
    """The chain microbenchmark of ``fednode calibrate``, simulated on ``params``' machine (``machine``:
    another one, as ``_bench_cluster`` takes it): one client thread, call j a ``stat`` at node j mod
    ``agents`` on a file it manages and holds, all on one host, after a round of every node so that
    every process has run.  (``BenchRun``: CPU per call over all processes, calls per s, the client's part.)"""
    n = max(agents, 2)
    p = replace(params, hosts=1)
    c, files = _bench_cluster(p, n, {a: f"/c{a}" for a in range(agents)}, machine)
    m = c.machine
    assert m is not None

    def client(rounds: int):
        for j in range(rounds):
            yield from c.client_op(0, j % agents, "stat", files[j % agents][j % 20])

    c.env.run(until=c.env.process(client(2 * agents)))  # every process has run: the steady state's turn
    m.clear_busy()
    if isinstance(m, _Refills):
        m.refills.clear()
    t0 = c.env.now
    c.env.run(until=c.env.process(client(calls)))
    return _bench_run(m, calls, c.env.now - t0)


def chain_bench(params: MachineParams, agents: int, calls: int = 200) -> tuple[float, dict[int, float]]:
    """``chain_run`` without refills: (CPU per call over all processes, and per call how many jobs
    found k processes beyond the cores since their last: ``{k: jobs per call}``, what ``cold_us`` and
    ``cold_cap_us`` price).

    Priced without refills, a serial chain runs its jobs in the same order whatever they cost, so
    one run gives what any ``cold_us`` and ``cold_cap_us`` add (``fit_cold``)."""
    p = replace(params, hosts=1, cold_us=0.0, cold_cap_us=0.0)
    counting = _Refills(p, max(agents, 2))
    cpu = chain_run(p, agents, calls, counting).cpu
    return cpu, {k: v / calls for k, v in sorted(counting.refills.items())}


def fit_cold(params: MachineParams, measured: dict[int, float]) -> tuple[float, float]:
    """``(cold_us, cold_cap_us)`` from the chain microbenchmark: one client thread calling 1, 2, ...
    agents in turn (``measured``: agents -> CPU per call over all processes, us).  A serial chain
    through more processes than cores finds each one's caches filled by the others: its CPU per call
    grows with the agents, then stops growing once a wake refills everything.  Both fitted to that
    growth relative to one agent's (the level is the other microbenchmarks'), by least squared
    relative error (``cold_us`` on a grid of 0.25 us to 100; for each, ``cold_cap_us`` by golden-section
    search between one refill and the most the benchmark saw, or none); (0, 0) when no refills fit better."""
    ns = sorted(k for k in measured if k >= 2)
    if 1 not in measured or not ns:
        return 0.0, 0.0
    base = {k: chain_bench(params, k) for k in [1, *ns]}
    level = measured[1] / base[1][0]

    def error(cold: float, cap: float) -> float:
        total = 0.0
        for k in ns:
            cpu, refills = base[k]
            extra = sum(jobs * (cold * o if not cap or cold * o < cap else cap) for o, jobs in refills.items())
            total += ((cpu + extra) * level / measured[k] - 1.0) ** 2
        return total

    most = max((o for k in ns for o in base[k][1]), default=0)
    best = (error(0.0, 0.0), 0.0, 0.0)
    for i in range(1, 401):
        cold = i * 0.25
        cap = _golden(lambda c, cold=cold: error(cold, c), cold, cold * most) if most > 1 else 0.0
        for c in (0.0, cap):  # none, or the best cap (at or above the most refills: none)
            e = error(cold, c)
            if e < best[0] - 1e-12:
                best = (e, cold, c)
    cold, cap = best[1], best[2]
    return cold, (0.0 if not cap or cap >= cold * most - 1e-6 else round(cap, 2))


def fan_in_bench(params: MachineParams, threads: int, calls: int = 200) -> BenchRun:
    """The fan-in microbenchmark of ``fednode calibrate``, simulated: ``threads`` client threads of
    one program all calling node 0 (a ``stat`` of a file it manages and holds), all on one host.
    (``BenchRun``: CPU per call over all processes, calls per s, the client's part.)  As the agent
    fills up, its requests find it busy and its receipts stop paying for a wake (``wake_us``)."""
    c, made = _bench_cluster(replace(params, hosts=1), 2, {0: "/f"})
    files = made[0]

    def client(i: int, rounds: int):
        for j in range(rounds):
            yield from c.client_op(i, 0, "stat", files[(i + j) % 20])

    c.env.run(until=c.env.all_of([c.env.process(client(i, 10)) for i in range(threads)]))
    assert c.machine is not None
    c.machine.clear_busy()
    t0 = c.env.now
    c.env.run(until=c.env.all_of([c.env.process(client(i, calls)) for i in range(threads)]))
    total = threads * calls
    return _bench_run(c.machine, total, c.env.now - t0)


def fit_wake(params: MachineParams, measured: dict[int, float]) -> float:
    """``wake_us`` from the fan-in microbenchmark (``measured``: threads -> CPU per call over all
    processes, us): the value for which the simulated benchmark's CPU per call falls from one
    thread's as the measured one does (relative to one thread: the level is the other
    microbenchmarks'), by golden-section search on [0, o_us] (a receipt read without a wake still
    reads the message); 0 when no discount fits better."""
    ks = sorted(k for k in measured if k >= 2)
    if 1 not in measured or not ks or params.o_us <= 0:
        return 0.0
    whole = replace(params, capacity=0.0)  # processes' CPU, as measured: no lost core time in it
    level = measured[1] / fan_in_bench(whole, 1)[0]

    def error(wake: float) -> float:
        p = replace(whole, wake_us=wake)
        return sum((fan_in_bench(p, k)[0] * level / measured[k] - 1.0) ** 2 for k in ks)

    best = _golden(error, 0.0, params.o_us)
    return 0.0 if error(0.0) <= error(best) else round(best, 3)


#: the idle spans ``fit_poll`` tries (us): none, then up to a few agent jobs' length
POLL_GRID = (0.0, 10.0, 20.0, 30.0)


def fit_poll(params: MachineParams, measured: dict[int, float], rates: dict[int, float] | None = None
             ) -> tuple[float, float]:  # fmt: skip
    """``(poll_us, wake_us)`` from the fan-in microbenchmark (``measured``: threads -> CPU per call
    over all processes, us; ``rates``: threads -> calls/s): for each idle span of ``POLL_GRID``,
    ``wake_us`` by ``fit_wake``, and the pair whose simulated benchmark follows the measured one's
    CPU per call and calls per second best, relative to one thread's (least squared relative error).

    Why both: one agent called by two client threads spends two thirds of one thread's CPU per
    call, the client program included, though neither process is busy at every receipt; a
    process that slept only briefly, on a core nobody else took, is woken without a halted vCPU's
    exit (the guest polls before it halts) and pays no more than a busy one.  One thread's calls
    leave each process idle for a whole hop of the other, longer than that."""
    ks = sorted(k for k in measured if k >= 2)
    if 1 not in measured or not ks or params.o_us <= 0:
        return 0.0, 0.0
    whole = replace(params, capacity=0.0)
    best: tuple[float, float, float] | None = None
    for poll in POLL_GRID:
        p = replace(whole, poll_us=poll)
        wake = fit_wake(p, measured)
        q = replace(p, wake_us=wake)
        one = fan_in_bench(q, 1)
        cpu1, rate1 = measured[1] / one.cpu, (rates[1] / one.rate if rates and 1 in rates else 0.0)
        err = 0.0
        for k in ks:
            run = fan_in_bench(q, k)
            err += (run.cpu * cpu1 / measured[k] - 1.0) ** 2
            if rate1 and rates and k in rates:
                err += (run.rate * rate1 / rates[k] - 1.0) ** 2
        if best is None or err < best[0] - 1e-12:
            best = (err, poll, wake)
    assert best is not None
    return best[1], best[2]


def fit_gil(params: MachineParams, contention: dict[int, float], fan_in: dict[int, float] | None = None) -> float:
    """``gil_us`` from the client program's CPU per call in the contention microbenchmark
    (``contention``: threads -> its CPU per call, us) and the fan-in one (``fan_in``), simulated:
    the value for which the simulated program's CPU per call follows the measured one's from one
    thread's (relative to it: one thread never changes turns, so the level is the other
    microbenchmarks'), by least squared relative error over every count of two threads or more
    and both benchmarks, by golden-section search on [0, 2 o_us] (a hand-off is a wake and a
    switch, of the order of a message's receipt); 0 when no price fits better.  Fitted on whole
    cores and before ``fit_contention``, which then fits what is left of the benchmarks' CPU."""
    whole = replace(params, capacity=0.0, gil_us=0.0)
    benches = [(contention_bench, contention), (fan_in_bench, fan_in or {})]
    cols = []
    for bench, measured in benches:
        ks = [k for k in sorted(measured) if k >= 2]
        if 1 in measured and ks and measured[1] > 0:
            cols.append((bench, measured, ks, measured[1] / bench(whole, 1).client))
    if not cols or params.o_us <= 0:
        return 0.0

    def error(gil: float) -> float:
        p = replace(whole, gil_us=gil)
        return sum((bench(p, k).client * level / measured[k] - 1.0) ** 2
                   for bench, measured, ks, level in cols for k in ks)  # fmt: skip

    best = _golden(error, 0.0, 2.0 * params.o_us)
    return 0.0 if error(0.0) <= error(best) else round(best, 3)


def fit_contention(
    params: MachineParams,
    measured: dict[int, float],
    rates: dict[int, float] | None = None,
    fan_rates: dict[int, float] | None = None,
) -> tuple[float, float]:
    """``(oversub_share, capacity)`` from the contention microbenchmark, simulated.

    ``oversub_share``: the value for which the simulated microbenchmark spends the
    CPU per call the real one did (``measured``: threads -> CPU per call over all
    processes, us) on whole cores, over every thread count that can oversubscribe:
    the least squared relative error, by golden-section search on [0, 4] (one
    count alone, the largest, would let its noise set the share for all).

    ``capacity``: then, the cores' worth for which it makes the calls per second
    the real one made (``rates``: threads -> calls/s) at every count of two
    threads or more, and the fan-in microbenchmark's (``fan_rates``: threads
    calling one agent, whose one process never sleeps once it is full), on
    [1, cores]; 0 (whole cores) when whole cores fit as well, or without
    ``rates``.  All relative to one thread's."""
    ks = [k for k in sorted(measured) if k >= 2]
    if not ks:
        return 0.0, 0.0
    whole = replace(params, capacity=0.0)
    # Relative to one thread, the model's and the microbenchmark's: what contention adds, not the
    # level (the per-call costs are the other microbenchmarks'; a level they miss by 10 % would
    # otherwise be made up by contention that is not there)
    base = contention_bench(whole, 1)
    cpu1 = measured[1] / base[0] if 1 in measured else 1.0  # the machine's level over the model's
    rate1 = rates[1] / base[1] if rates and 1 in rates else 1.0

    def error(share: float) -> float:
        p = replace(whole, oversub_share=share)
        return sum((contention_bench(p, k)[0] * cpu1 / measured[k] - 1.0) ** 2 for k in ks)

    best = _golden(error, 0.0, 4.0)
    share = 0.0 if error(0.0) <= error(best) else round(best, 4)
    rk = [k for k in ks if rates and k in rates]
    if not rk:
        return share, 0.0
    assert rates is not None
    shared = replace(whole, oversub_share=share)

    fk = [k for k in sorted(fan_rates or {}) if k >= 2]
    fan1 = fan_rates[1] / fan_in_bench(shared, 1)[1] if fan_rates and 1 in fan_rates else 1.0

    def rate_error(cap: float) -> float:
        p = replace(shared, capacity=cap)
        e = sum((contention_bench(p, k)[1] * rate1 / rates[k] - 1.0) ** 2 for k in rk)
        if fan_rates and 1 in fan_rates:
            e += sum((fan_in_bench(p, k)[1] * fan1 / fan_rates[k] - 1.0) ** 2 for k in fk)
        return e

    cap = _golden(rate_error, 1.0, float(params.cores))
    return share, (0.0 if rate_error(0.0) <= rate_error(cap) else round(cap, 3))


def _golden(f: Callable[[float], float], lo: float, hi: float, steps: int = 16) -> float:
    """The minimum of ``f`` on [lo, hi] (taken as unimodal), by golden-section search."""
    ratio = (5**0.5 - 1) / 2
    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    fa, fb = f(a), f(b)
    for _ in range(steps):
        if fa <= fb:
            hi, b, fb = b, a, fa
            a = hi - ratio * (hi - lo)
            fa = f(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + ratio * (hi - lo)
            fb = f(b)
    return (lo + hi) / 2
