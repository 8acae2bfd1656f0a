"""``fednode calibrate``: measure what the simulator's machine model needs, on this machine.

    fednode calibrate [--cluster FILE] [--transport tcp|verbs] [--repeat N] [--out DIR]

The simulator predicts real agents only if it knows what they cost here
(``fedsim.machine``).  This command measures each cost with microbenchmarks
of its own -- never with the workloads a validation then compares against --
on a federation of six agents (R, whose client this process is, A, and more
for the contention and chain microbenchmarks), or
the running federation a cluster file names:

* **the transport, as LogGP**: raw round trips (PING/PONG) from R to A over
  a range of sizes, with the CPU time both agents spent on them.  Each end of
  a message costs ``o + size * byte_us`` of CPU (fitted over the sizes); what
  the round trip takes beyond the four ends' CPU is the flight, ``2 (L + size
  * G)``.  Both fits print their residuals per size; a poor fit says so;
* **the agents' CPU per request**: batches of client calls of each operation
  on names R manages and holds (``local``: every request the call makes is
  R's own, no message) and on names A manages and holds (``remote``: every
  request goes to A).  Each agent reports its process CPU time, the local
  operations it ran with their time, the requests it served by kind and the
  client calls by operation (the ``profile`` admin call).  Then ``api_us[op]``
  is R's CPU per call in ``local`` less its two client messages and its local
  operations, and ``dispatch_us[kind]`` is A's CPU per request in ``remote``
  less the request's two messages and its local operations (least squares
  over the batches, residuals printed).  A third set of batches (``directory``:
  names R manages and holds, in a directory A manages) has A serve only the
  upkeep of a directory (GetEntry, AddEntry, DelEntry, SummaryAdd), which every
  name operation under a directory managed elsewhere sends;
* **the client's CPU per call** (this process's thread time), by operation,
  and its user share (the interpreter's, under the GIL; the rest is the
  kernel's, which threads of one program do side by side);
* **the local file system**, per operation: the time of each local operation
  the agents ran in those batches (warm: on the page cache);
* **the host**: its name and cores, and what they are worth side by side
  (``parallel_capacity``: a VM's vCPUs need not be whole cores); which agents share it (a local
  federation: all of them, ``machine.hosts: 1``); and what oversubscribing
  its cores costs: 1 to 4 client threads calling 4 agents at once, the CPU
  per call over every process and the calls per second (the simulator fits
  ``oversub_share`` to the first and the cores' worth, ``capacity``, to the
  second, ``fedsim.machine.fit_contention``); and what more processes than
  cores taking turns cost: one client thread calling 1 to 6 agents in turn,
  the CPU per call over every process (each wakes to caches the others
  filled: the simulator fits ``cold_us`` and ``cold_cap_us`` to its growth,
  ``fedsim.machine.fit_cold``); and what a busy process saves: 1 to 8 client
  threads calling one agent, the CPU per call over every process (a request
  that finds the agent busy is read without a wake, and a process idle only
  briefly on its own core is woken without a halted vCPU's exit: ``wake_us``
  and ``poll_us``, ``fedsim.machine.fit_poll``);
* **the mount** (``--mount``, where FUSE works): the FUSE layer's costs and
  the kernel requests each system call becomes (``fednode.tools.calibrate_fuse``).

A first round warms the agents up and is discarded.  The whole set of
batches is repeated until every cost's spread over the repeats is within
``--spread`` (or ``--max-rounds`` is reached, which the profile and the
report then say), and the load of the machine before and
after is recorded: a machine too busy to measure is reported, not hidden.

Writes ``OUT/profile.yaml`` (``calibration: OUT/profile.yaml`` in a fedsim
config) and ``OUT/calibration.txt``.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from fednode.client import Client
from fednode.config import Cluster
from fednode.tools.bench import federation
from fedsim.calibration import this_machine
from fedsim.protocol.hashing import names_managed_by
from fedsim.schema import table

#: payload sizes of the round trips the LogGP fit is made over
SIZES = (0, 1024, 4096, 16384, 65536)
#: a client call's envelope beyond its names and data, as the simulator counts it (``runtime.CLIENT_HEADER``)
IO = 4096
#: the operations calibrated, in the order a batch runs them
OPS = ("mkdir", "rmdir", "create", "stat", "getattr", "open", "write", "read", "close", "unlink")
#: a spread (max - min over median) above which a round is repeated
SPREAD = 0.10
#: agents of a local calibration federation: R, A, B, and up to 6 taking turns in the chain microbenchmark
#: (on a 2-core machine the CPU per call grows from 3 agents on and stops growing by about 5)
CHAIN_AGENTS = 6


@dataclass
class Batch:
    """One batch of ``n`` calls of ``op`` in one arrangement, as the agents and the client saw it."""

    op: str
    where: str  # local | remote | lookup | directory
    n: int
    client_cpu_ns: int
    wall_ns: list[int]
    agents: dict[int, dict[str, Any]]  # node -> profile deltas (cpu_ns, local, served, calls)


@dataclass
class Round:
    pings: dict[int, dict[str, float]] = field(default_factory=dict)  # size -> rtt_us, cpu_r_us, cpu_a_us
    batches: list[Batch] = field(default_factory=list)
    local: dict[str, float] = field(default_factory=dict)  # local op -> us, timed on R's directory (``local_ops``)


#: directory sizes the local listdir is timed at (its cost is a fixed part and one per entry)
LISTDIR_SIZES = (0, 32, 128, 512)


def _delta(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"cpu_ns": after["cpu_ns"] - before["cpu_ns"], "local": {}, "served": {}, "calls": {},
                           "sent": {}, "waited": after.get("waited", 0) - before.get("waited", 0)}  # fmt: skip
    for op, (n, ns) in after["local"].items():
        b = before["local"].get(op, [0, 0])
        if n - b[0]:
            out["local"][op] = [n - b[0], ns - b[1]]
    for key in ("served", "calls", "sent"):
        for k, n in after.get(key, {}).items():
            if n - before[key].get(k, 0):
                out[key][k] = n - before[key].get(k, 0)
    return out


class Calibration:
    """The microbenchmarks on a running federation: R (this process's agent) and A."""

    def __init__(self, cluster: Cluster, repeat: int) -> None:
        members = cluster.spec.members
        if len(members) < 2:
            raise ValueError("calibration needs a federation of at least two agents (R and A)")
        self.cluster = cluster
        self.R, self.A = members[0], members[1]
        self.B = members[2] if len(members) > 2 else None  # the parent's manager of the nested batches
        self.repeat = repeat
        self.hashing = cluster.spec.hashing_fn()
        self.clients = {n: Client(cluster, node=n) for n in (self.R, self.A)}
        self.top = f"/fednode-calibrate-{int(time.time() * 1000) % 10**8}"
        self.rounds = 0
        # a client reaches its agent over TCP: with agents on another transport its messages are not the pings'
        self.fold_client = self.clients[self.R].status()["transport"] != "tcp"
        self.contended: dict[int, dict[str, float]] = {}
        self.chained: dict[int, dict[str, float]] = {}
        self.fanned: dict[int, dict[str, float]] = {}
        #: the local agents' process ids (``placement`` pins R's; none for a cluster file's)
        self.pids: dict[int, int] = {}
        self.placed: dict[str, dict[str, float]] = {}
        self.user = 1.0

    def close(self) -> None:
        for c in self.clients.values():
            c.disconnect()

    @contextlib.contextmanager
    def profiled(self) -> Iterator[dict[int, dict[str, Any]]]:
        """The agents' profile deltas over the block (filled in on exit)."""
        out: dict[int, dict[str, Any]] = {}
        before = {n: c.call("profile", "snapshot") for n, c in self.clients.items()}
        yield out
        for n, c in self.clients.items():
            out[n] = _delta(c.call("profile", "snapshot"), before[n])

    def pings(self, rnd: Round) -> None:
        R = self.clients[self.R]
        R.call("ping", self.A, 20, 0)  # connection up, caches warm
        count = max(20, self.repeat)
        for size in SIZES:
            with self.profiled() as prof:
                rtts = R.call("ping", self.A, count, size)
            rnd.pings[size] = {
                "rtt_us": statistics.median(rtts) / 1000,
                "cpu_r_us": prof[self.R]["cpu_ns"] / count / 1000,
                "cpu_a_us": prof[self.A]["cpu_ns"] / count / 1000,
            }

    def batches(self, rnd: Round, where: str) -> None:
        """Every operation of ``OPS``, ``repeat`` calls each, on names managed and held by R or by A."""
        node = self.R if where == "local" else self.A
        R = self.clients[self.R]
        at = self.clients[node]
        n = self.repeat
        self.rounds += 1
        parent = names_managed_by(self.hashing, node, f"{self.top}/{where}{self.rounds}_")[0]
        at.call("pin", parent, node)
        R.mkdir(parent)
        files = names_managed_by(self.hashing, node, f"{parent}/f", n)
        dirs = names_managed_by(self.hashing, node, f"{parent}/d", n)
        for p in files + dirs:
            at.call("pin", p, node)
        fds: list[int] = []

        def calls(op: str) -> list[tuple[Any, ...]]:
            if op in ("mkdir", "rmdir"):
                return [(d,) for d in dirs]
            if op in ("create", "stat", "getattr", "open", "unlink"):
                return [(f,) for f in files]
            if op == "write":
                return [(fds[0], bytes(IO), 0)] * n
            if op == "read":
                return [(fds[0], IO, 0)] * n
            return [(fd,) for fd in fds]  # close

        for op in OPS:
            self.timed(rnd, op, where, calls(op), fds)
        if where == "remote":
            # names R's DT does not know (another client made them): a lookup at their manager first
            # (HomeInfo, then the Stat at the home), which tells HomeInfo's cost from the others'
            for f in files:
                at.create(f)
            self.timed(rnd, "stat", "lookup", [(f,) for f in files], fds)
            for f in files:
                at.unlink(f)
        self.cycle(rnd, where, node, parent)
        R.rmdir(parent)

    def name_batches(self, rnd: Round, where: str, parent_manager: int, manager: int) -> None:
        """Creates, mkdirs, rmdirs and unlinks at R of names ``manager`` manages and holds,
        in a directory ``parent_manager`` manages:

        * ``directory`` (names R's, the directory A's): A serves only the directory's
          upkeep (GetEntry, AddEntry, DelEntry, SummaryAdd), the requests a name
          operation sends its parent's manager; without them those kinds would be
          priced as any request (``dispatch_us['*']``);
        * ``nested`` (names A's, the directory B's): A's handlers wait for B, as a name's
          manager or home does whenever its parent is managed elsewhere.  A handler that
          waits continues on a worker task, which one that answers at once does not
          need (``machine.wait_us``, beyond the calls' own costs)."""
        R = self.clients[self.R]
        n = self.repeat
        self.rounds += 1
        parent = names_managed_by(self.hashing, parent_manager, f"{self.top}/{where}{self.rounds}_")[0]
        files = names_managed_by(self.hashing, manager, f"{parent}/f", n)
        dirs = names_managed_by(self.hashing, manager, f"{parent}/d", n)
        with Client(self.cluster, node=parent_manager) as pm, Client(self.cluster, node=manager) as m:
            pm.call("pin", parent, parent_manager)
            R.mkdir(parent)
            for p in files + dirs:
                m.call("pin", p, manager)
        for op, names in (("mkdir", dirs), ("rmdir", dirs), ("create", files), ("unlink", files)):
            self.timed(rnd, op, where, [(p,) for p in names], [])
        R.rmdir(parent)

    def local_ops(self, rnd: Round) -> None:
        """The local operations the batches do not run, timed inside R on its own directory
        through the confined local layer (the ``bench`` admin call, no federation):
        listdir by the directory's size (``listdir`` + ``listdir_entry`` per entry),
        rename, truncate, fsync and statfs.  Without them the simulator would price
        them by the storage model's assumptions for a 1999 disk (an fsync of 8 ms)."""
        R = self.clients[self.R]
        n = self.repeat
        self.rounds += 1
        d = f"{self.top}-local{self.rounds}"  # beside the federation's tree, never in it

        def median_us(op: str, calls: list[tuple[Any, ...]]) -> float:  # (``timed`` is the federated batches')
            return statistics.median(R.call("bench", "local", op, calls)[0]) / 1000 if calls else 0.0

        R.call("bench", "local", "mkdir", [(d,)])
        made: list[str] = []
        per_size = []
        try:
            for k in LISTDIR_SIZES:
                more = [f"{d}/e{i}" for i in range(len(made), k)]
                R.call("bench", "local", "create", [(p,) for p in more])
                made += more
                per_size.append(median_us("listdir", [(d,)] * n))
            (fixed, entry), _ = _lstsq(np.column_stack([np.ones(len(per_size)), LISTDIR_SIZES]), np.array(per_size))
            rnd.local.update(listdir=max(float(fixed), 0.0), listdir_entry=max(float(entry), 0.0))
            files = made[:n]
            rnd.local["truncate"] = median_us("truncate", [(p, 0) for p in files])
            rnd.local["fsync"] = median_us("fsync", [(p,) for p in files])
            rnd.local["statfs"] = median_us("statfs", [(d,)] * n)
            renamed = [f"{p}r" for p in files]
            rnd.local["rename"] = median_us("rename", [(p, q) for p, q in zip(files, renamed, strict=True)])
            made = renamed + made[n:]
        finally:
            R.call("bench", "local", "unlink", [(p,) for p in made])
            R.call("bench", "local", "rmdir", [(d,)])
            R.call("bench", "cleanup", "", [])

    def cycle(self, rnd: Round, where: str, node: int, parent: str) -> None:
        """Every operation in turn on each of ``repeat`` fresh names (mkdir, create, stat, getattr,
        open, write, read, close, unlink, rmdir): no call follows one of its own kind, which is
        what a mix costs beyond the batches (``mix_agent``, ``mix_client``)."""
        R, at = self.clients[self.R], self.clients[node]
        files = names_managed_by(self.hashing, node, f"{parent}/c", self.repeat)
        dirs = names_managed_by(self.hashing, node, f"{parent}/e", self.repeat)
        for p in files + dirs:
            at.call("pin", p, node)
        with self.profiled() as prof:
            t0 = time.thread_time_ns()
            for f, d in zip(files, dirs, strict=True):
                R.mkdir(d)
                R.create(f)
                R.stat(f)
                R.getattr(f)
                fd = R.open(f)
                R.write(fd, bytes(IO), 0)
                R.read(fd, IO, 0)
                R.close(fd)
                R.unlink(f)
                R.rmdir(d)
            cpu = time.thread_time_ns() - t0
        rnd.batches.append(Batch("cycle", where, len(files), cpu, [], prof))

    def timed(self, rnd: Round, op: str, where: str, args: list[tuple[Any, ...]], fds: list[int]) -> None:
        R = self.clients[self.R]
        wall = []
        with self.profiled() as prof:
            t0 = time.thread_time_ns()
            for a in args:
                w0 = time.perf_counter_ns()
                value = getattr(R, op)(*a)
                wall.append(time.perf_counter_ns() - w0)
                if op == "open":
                    fds.append(value)
            cpu = time.thread_time_ns() - t0
        rnd.batches.append(Batch(op, where, len(args), cpu, wall, prof))

    def _lay(self, pinner: Client, maker: Client, node: int, d: str) -> list[str]:
        """Directory ``d`` and 20 files in it, all managed by ``node`` and pinned to it (``pinner``
        pins, ``maker`` makes them): the names a microbenchmark's calls at ``node`` touch."""
        pinner.call("pin", d, node)
        maker.mkdir(d)
        files = names_managed_by(self.hashing, node, f"{d}/f", 20)
        for f in files:
            pinner.call("pin", f, node)
            maker.create(f)
        return files

    @staticmethod
    def _clear(maker: Client, d: str, files: list[str]) -> None:
        """Remove what ``_lay`` made."""
        for f in files:
            maker.unlink(f)
        maker.rmdir(d)

    def contention(self, calls: int) -> dict[int, dict[str, float]]:
        """k = 1 to 4 client threads of this program at once, thread i's call j a ``stat`` at
        agent (i + j) mod k on a name it manages and holds: the CPU per call over every
        process (agents and this one) and the calls per second, as the cores fill up and
        then are oversubscribed (``machine.oversub_share``, fitted by the simulator).
        The threads take the agents in turn: a thread that kept to one agent would let
        each pair settle on a core of its own, which no workload does (two such pairs
        spent a third less CPU per call than one thread alone)."""
        members = self.cluster.spec.members
        ks = [k for k in (1, 2, 3, 4) if k <= len(members)]
        clients = {n: Client(self.cluster, node=n) for n in members[: max(ks)]}
        admin = {n: Client(self.cluster, node=n) for n in members}
        # each thread its own connection to each agent (a Client is one connection, one caller at a time)
        conns = [[Client(self.cluster, node=n) for n in members[: max(ks)]] for _ in range(max(ks))]
        try:
            files = {i: self._lay(admin[n], clients[n], n, f"{self.top}/contention{n}") for i, n in enumerate(clients)}
            out: dict[int, dict[str, float]] = {}
            for k in ks:
                cpu: dict[int, int] = {}
                nodes = list(clients)[:k]

                def one(i: int, node: int, cpu: dict[int, int] = cpu, k: int = k) -> None:
                    # call j goes to agent (i + j) mod k, through this thread's connection to it: no
                    # thread keeps to one agent, so no pair of them settles on a core of its own
                    t0 = time.thread_time_ns()
                    mine = conns[i]
                    for j in range(calls):
                        a = (i + j) % k
                        mine[a].stat(files[a][j % 20])
                    cpu[i] = time.thread_time_ns() - t0

                before = {n: a.call("profile", "snapshot")["cpu_ns"] for n, a in admin.items()}
                wall = _threads_wall([threading.Thread(target=one, args=(i, n)) for i, n in enumerate(nodes)])
                agents = sum(a.call("profile", "snapshot")["cpu_ns"] - before[n] for n, a in admin.items())
                out[k] = _per_call(agents, sum(cpu.values()), k * calls, wall, client=True)
            for i, n in enumerate(clients):
                self._clear(clients[n], f"{self.top}/contention{n}", files[i])
            return out
        finally:
            for c in [*clients.values(), *admin.values(), *(c for row in conns for c in row)]:
                c.disconnect()

    def fan_in(self, calls: int) -> dict[int, dict[str, float]]:
        """k = 1, 2, 4, 8 client threads of this program all calling R (a ``stat`` of a name it
        manages and holds), each on its own connection: as R fills up, a request finds it still
        busy with another and is read without a wake, so the CPU per call over every process
        falls (``machine.wake_us`` and ``poll_us``, fitted by the simulator, ``fedsim.machine.fit_poll``)."""
        ks = (1, 2, 4, 8)
        conns = [Client(self.cluster, node=self.R) for _ in range(max(ks))]
        R = self.clients[self.R]
        d = f"{self.top}/fan_in"
        try:
            files = self._lay(R, R, self.R, d)
            out: dict[int, dict[str, float]] = {}
            for k in ks:
                cpu: dict[int, int] = {}

                def one(i: int, cpu: dict[int, int] = cpu) -> None:
                    c = conns[i]
                    for j in range(20):  # connected and warm before the clock
                        c.stat(files[j])
                    t0 = time.thread_time_ns()
                    for j in range(calls):
                        c.stat(files[(i + j) % 20])
                    cpu[i] = time.thread_time_ns() - t0

                before = R.call("profile", "snapshot")["cpu_ns"]
                wall = _threads_wall([threading.Thread(target=one, args=(i,)) for i in range(k)])
                agent = R.call("profile", "snapshot")["cpu_ns"] - before
                out[k] = _per_call(agent, sum(cpu.values()), k * calls, wall, client=True)
            self._clear(R, d, files)
            return out
        finally:
            for c in conns:
                c.disconnect()

    def chain(self, calls: int) -> dict[int, dict[str, float]]:
        """One client thread of this program calling 1, 2, ... agents in turn (call j a ``stat`` at
        agent j mod k on a name it manages and holds): one process runs at a time, yet the CPU per
        call over every process grows with k once more processes than cores take turns, since each
        wakes to caches the others filled (``machine.cold_us`` and ``cold_cap_us``, fitted by the
        simulator, ``fedsim.machine.fit_cold``).  Each k after a warm-up of its own."""
        members = self.cluster.spec.members
        conns = {n: Client(self.cluster, node=n) for n in members}
        try:
            files = {n: self._lay(c, c, n, f"{self.top}/chain{n}") for n, c in conns.items()}
            out: dict[int, dict[str, float]] = {}
            for k in range(1, len(members) + 1):
                nodes = members[:k]
                for j in range(max(200, calls // 4)):  # the turn settled: every process has run in it
                    a = nodes[j % k]
                    conns[a].stat(files[a][j % 20])
                before = {n: c.call("profile", "snapshot")["cpu_ns"] for n, c in conns.items()}
                t0 = time.thread_time_ns()
                w0 = time.perf_counter()
                for j in range(calls):
                    a = nodes[j % k]
                    conns[a].stat(files[a][j % 20])
                wall = time.perf_counter() - w0
                mine = time.thread_time_ns() - t0
                agents = sum(c.call("profile", "snapshot")["cpu_ns"] - before[n] for n, c in conns.items())
                out[k] = _per_call(agents, mine, calls, wall, client=True)
            for n, c in conns.items():
                self._clear(c, f"{self.top}/chain{n}", files[n])
            return out
        finally:
            for c in conns.values():
                c.disconnect()

    def placement(self, calls: int, pid: int) -> dict[str, dict[str, float]]:
        """One client thread calling R (a ``stat`` of a name it manages and holds, R's process
        ``pid``, local) with the two pinned to one core, to two cores, and left to the
        scheduler: the CPU per call over both and the wall time per call.  Why: on a VM a hand-off
        to a process on another core wakes that core (an interprocessor interrupt, a halted vCPU),
        and the scheduler either keeps a client and its agent on one core or spreads them, a
        choice that sticks for minutes; the free row says which the machine made while the other
        microbenchmarks ran, and the pinned rows how much that choice is worth."""
        cores = sorted(os.sched_getaffinity(0))
        R = self.clients[self.R]
        d = f"{self.top}/placement"
        files = self._lay(R, R, self.R, d)
        try:
            tasks = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            tasks = []
        out: dict[str, dict[str, float]] = {}
        try:
            # free first: the placement the scheduler had chosen, before a pinning moves either
            for label, mine, theirs in (("free", cores, cores), ("same core", cores[:1], cores[:1]),
                                        ("two cores", cores[:1], cores[1:2])):  # fmt: skip
                if not theirs or not tasks:
                    continue
                os.sched_setaffinity(0, mine)
                for t in tasks:
                    with contextlib.suppress(OSError):  # a thread that ended
                        os.sched_setaffinity(t, theirs)
                for j in range(min(200, calls)):  # settled on the cores
                    R.stat(files[j % 20])
                before = R.call("profile", "snapshot")["cpu_ns"]
                t0 = time.thread_time_ns()
                w0 = time.perf_counter()
                for j in range(calls):
                    R.stat(files[j % 20])
                wall = time.perf_counter() - w0
                mine_ns = time.thread_time_ns() - t0
                agent = R.call("profile", "snapshot")["cpu_ns"] - before
                row = _per_call(agent, mine_ns, calls, wall)
                out[label] = {**row, "wall_per_call_us": round(wall / calls * 1e6, 3)}
        finally:
            os.sched_setaffinity(0, cores)
            for t in tasks:
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(t, cores)
            self._clear(R, d, files)
        return out

    def round(self) -> Round:
        rnd = Round()
        self.pings(rnd)
        for where in ("local", "remote"):
            self.batches(rnd, where)
        self.name_batches(rnd, "directory", self.A, self.R)
        if self.B is not None:
            self.name_batches(rnd, "nested", self.B, self.A)
        self.local_ops(rnd)
        return rnd

    def user_share(self, calls: int) -> float:
        """Of this thread's CPU per client call, the share in user mode (the
        interpreter, holding the GIL) rather than the kernel's (its socket calls,
        without it): ``machine.client_user_share``.  Taken over many calls, as the
        kernel splits a thread's time between the two by sampling its ticks."""
        R = self.clients[self.R]
        R.mkdir(f"{self.top}/user")
        t0 = resource.getrusage(resource.RUSAGE_THREAD)
        for _ in range(calls):
            R.stat(f"{self.top}/user")
        t1 = resource.getrusage(resource.RUSAGE_THREAD)
        R.rmdir(f"{self.top}/user")
        user, system = t1.ru_utime - t0.ru_utime, t1.ru_stime - t0.ru_stime
        return user / (user + system) if user + system > 0 else 1.0

    def run(self, max_rounds: int, spread: float) -> list[dict[str, Any]]:
        """The rounds' fitted costs (``fit``), one per round, until their spread is within ``spread``."""
        for n in self.cluster.spec.members:
            with Client(self.cluster, node=n) as c:
                c.call("profile", "start")
        R = self.clients[self.R]
        R.mkdir(self.top)
        fits: list[dict[str, Any]] = []
        try:
            self.round()  # warm-up, discarded: fresh agents run their first requests slower
            while True:
                fits.append(fit(self.round(), self.fold_client))
                if (len(fits) >= 3 and spread_of(fits)[1] <= spread) or len(fits) >= max_rounds:
                    break
            self.user = self.user_share(max(2000, self.repeat * 20))
            runs = [self.contention(self.repeat * 4) for _ in range(3)]
            self.contended = _median_runs(runs)
            self.chained = _median_runs([self.chain(self.repeat * 8) for _ in range(3)])
            self.fanned = _median_runs([self.fan_in(self.repeat * 4) for _ in range(3)])
            pid = self.pids.get(self.R)
            if pid is not None and len(os.sched_getaffinity(0)) >= 2:
                self.placed = _median_runs([self.placement(self.repeat * 10, pid) for _ in range(3)])
        finally:
            for n in self.cluster.spec.members:
                with Client(self.cluster, node=n) as c:
                    c.call("profile", "stop")
            with contextlib.suppress(OSError):
                R.rmdir(self.top)
        return fits


def _threads_wall(threads: list[threading.Thread]) -> float:
    """Start ``threads`` together and wait for them all: the wall time they took (s)."""
    w0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - w0


def _per_call(agents_ns: int, client_ns: int, calls: int, wall: float, client: bool = False) -> dict[str, float]:
    """A microbenchmark's row: CPU per call over every process (the agents' and this program's
    threads'; with ``client``, this program's apart too) and calls per second."""
    row = {"cpu_per_call_us": round((agents_ns + client_ns) / calls / 1000, 3)}
    if client:
        row["client_cpu_per_call_us"] = round(client_ns / calls / 1000, 3)
    row["calls_per_s"] = round(calls / wall, 1)
    return row


def _median_runs(runs: list[dict[int, dict[str, float]]]) -> dict[int, dict[str, float]]:
    """A microbenchmark's runs (count -> measure -> value), each value their median."""
    return {k: {key: statistics.median(r[k][key] for r in runs) for key in runs[0][k]} for k in runs[0]}


_SPIN = "import time\nt = time.perf_counter()\nx = 0\nfor i in range({n}):\n    x += i\nprint(time.perf_counter() - t)"


def parallel_capacity(n: int = 1_500_000) -> float:
    """How many cores' worth of work this machine runs at once now: as many CPU-bound Python
    processes as it has cores, side by side, each one's speed relative to one alone, summed.

    A VM's vCPUs need not be whole cores: another guest on the host (invisible in this guest's
    load average and barely in its steal time) can leave two vCPUs worth little more than one,
    and then every point that runs processes side by side is slower than whole cores would be
    (``measured_on.parallel_capacity``: how loaded the machine is; the model's ``capacity`` is fitted
    to the contention microbenchmark, ``fedsim.machine.fit_contention``)."""

    def spin(k: int) -> list[float]:
        procs = [subprocess.Popen([sys.executable, "-c", _SPIN.format(n=n)], stdout=subprocess.PIPE, text=True)
                 for _ in range(k)]  # fmt: skip
        return [float(p.communicate()[0]) for p in procs]

    alone = min(spin(1)[0] for _ in range(2))
    return sum(alone / t for t in spin(os.cpu_count() or 1))


# ---------------------------------------------------------------------------------------- fitting
def _lstsq(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    return coef, y - x @ coef


def fit(rnd: Round, fold_client: bool = False) -> dict[str, Any]:
    """The machine model's parameters from one round's measurements.  ``fold_client``: the
    agents' transport is not the clients' (verbs; a client reaches its agent over TCP), so a
    client call's two messages are not priced at the ping's ``o`` but folded into ``api_us``
    (``client_o_us`` 0)."""
    sizes = np.array(sorted(rnd.pings), float)
    rtt = np.array([rnd.pings[int(s)]["rtt_us"] for s in sizes])
    # each ping is four message ends (R sends, A receives, A answers, R receives), each of ``size`` bytes
    end = np.array([(rnd.pings[int(s)]["cpu_r_us"] + rnd.pings[int(s)]["cpu_a_us"]) / 4 for s in sizes])
    x = np.column_stack([np.ones_like(sizes), sizes])
    (o, byte_us), end_res = _lstsq(x, end)
    (a, b), rtt_res = _lstsq(x, rtt)
    o, byte_us = max(o, 0.0), max(byte_us, 0.0)
    L = max((a - 4 * o) / 2, 0.0)
    G = max((b - 4 * byte_us) / 2, 0.0)
    out: dict[str, Any] = {
        "o_us": o, "byte_us": byte_us, "L_us": L, "G_us_per_byte": G,
        "ping": {int(s): {"rtt_us": float(r), "fit_us": float(r - e), "cpu_end_us": float(c),
                          "cpu_fit_us": float(c - ce)}
                 for s, r, e, c, ce in zip(sizes, rtt, rtt_res, end, end_res, strict=True)},
    }  # fmt: skip
    msg = 2 * o  # a request's and its reply's ends (small: their bytes are left to byte_us)
    cmsg = 0.0 if fold_client else msg  # a client call's request and reply at the agent
    api: dict[str, float] = {}
    client: dict[str, float] = {}
    local: dict[str, list[int]] = {}
    latency: dict[str, dict[str, float]] = {}
    rows, ys, kinds_seen = [], [], []
    for b in rnd.batches:
        if b.wall_ns:
            latency.setdefault(b.where, {})[b.op] = statistics.median(b.wall_ns) / 1000
        for agent in b.agents.values():
            for op, (n, ns) in agent["local"].items():
                acc = local.setdefault(op, [0, 0])
                acc[0] += n
                acc[1] += ns
    local_us = {op: ns / n / 1000 for op, (n, ns) in local.items() if n}

    def local_cpu(agent: dict[str, Any]) -> float:
        return sum(n * local_us[op] for op, (n, _) in agent["local"].items())

    R = min(rnd.batches[0].agents)
    A = max(rnd.batches[0].agents)
    # A local call's mean latency beyond the client's and the agent's CPU for it: positive, the
    # client link's two flights (a client reaches its agent over TCP whatever the agents'
    # transport, so over verbs this is not the ping's L); negative, CPU of the agent's that the
    # client did not wait for (``api_tail_us``: its bookkeeping after the reply has left).
    beyond = [
        (statistics.fmean(b.wall_ns) - b.client_cpu_ns / b.n - b.agents[R]["cpu_ns"] / b.n) / 1000
        for b in rnd.batches
        if b.where == "local" and b.op != "cycle" and b.wall_ns
    ]
    d = float(statistics.median(beyond)) if beyond else 0.0
    client_L = max(d, 0.0) / 2 if beyond else None
    tail = max(-d, 0.0)
    for b in rnd.batches:
        if b.op == "cycle":
            continue
        if b.where == "local":
            r = b.agents[R]
            api[b.op] = max((r["cpu_ns"] / 1000 - local_cpu(r)) / b.n - cmsg - tail, 0.0)
            client[b.op] = b.client_cpu_ns / b.n / 1000
        elif b.where != "nested":  # (a nested batch's A also waits for B: ``wait_us`` below)
            a = b.agents[A]
            served = a["served"]
            if not served:
                continue
            for k in served:
                if k not in kinds_seen:
                    kinds_seen.append(k)
            rows.append(served)
            ys.append(a["cpu_ns"] / 1000 - local_cpu(a) - msg * sum(served.values()))
    dispatch: dict[str, float] = {}
    dispatch_res: list[float] = []
    if rows:
        x = np.array([[r.get(k, 0) for k in kinds_seen] for r in rows], float)
        coef, res = _lstsq(x, np.array(ys))
        dispatch = {k: max(float(c), 0.0) for k, c in zip(kinds_seen, coef, strict=True)}
        totals = x.sum(axis=1)
        dispatch_res = [float(r / t) for r, t in zip(res, totals, strict=True)]
        dispatch["*"] = float(statistics.median(dispatch.values()))
    # The requester's CPU for each request it sends and waits for, beyond the request's and the
    # reply's ends: the task and the future the wait takes (a call that never waits runs to its
    # reply inside the frame's callback, as ``api_us`` measured).
    per_call = []
    for b in rnd.batches:
        if b.where != "remote" or b.op not in api or b.op == "cycle":
            continue
        sent = sum(b.agents[A]["served"].values())
        if sent:
            r = b.agents[R]
            extra = (r["cpu_ns"] / 1000 - local_cpu(r)) - b.n * (cmsg + api[b.op] + tail)
            per_call.append(extra / sent - msg)
    call_us = max(float(statistics.median(per_call)), 0.0) if per_call else 0.0
    # A handler that waits for the network: A's CPU in the nested batches beyond the requests it
    # served (their dispatch) and the ones it sent (their two ends and the wait, as R's), per
    # handler that waited.
    per_wait = []
    for b in rnd.batches:
        a = b.agents.get(A)
        if b.where != "nested" or a is None or not a.get("waited"):
            continue
        served = a["served"]
        sent = sum(a["sent"].values())
        known = sum(n * (msg + dispatch.get(k, dispatch.get("*", 0.0))) for k, n in served.items())
        beyond = a["cpu_ns"] / 1000 - local_cpu(a) - known - sent * (msg + call_us)
        per_wait.append(beyond / a["waited"])
    wait_us = max(float(statistics.median(per_wait)), 0.0) if per_wait else 0.0
    # The interleaved cycles: what the same calls cost when no call follows one of its kind.
    num = den = cnum = cden = 0.0
    for b in rnd.batches:
        if b.op != "cycle":
            continue
        calls = b.agents[R]["calls"]
        warm_client = sum(n * client.get(op, 0.0) for op, n in calls.items())
        cnum += b.client_cpu_ns / 1000 - warm_client
        cden += warm_client
        if b.where == "local":
            r = b.agents[R]
            warm = sum(n * api.get(op, 0.0) for op, n in calls.items())
            num += r["cpu_ns"] / 1000 - local_cpu(r) - sum(calls.values()) * (cmsg + tail) - warm
            den += warm
        else:
            a = b.agents[A]
            warm = sum(n * dispatch.get(k, 0.0) for k, n in a["served"].items())
            num += a["cpu_ns"] / 1000 - local_cpu(a) - sum(a["served"].values()) * msg - warm
            den += warm
    mix_agent = max(num / den, 0.0) if den else 0.0
    mix_client = max(cnum / cden, 0.0) if cden else 0.0
    api["*"] = float(statistics.median(api.values())) if api else 0.0
    client["*"] = float(statistics.median(client.values())) if client else 0.0
    out.update(mix_agent=mix_agent, mix_client=mix_client)
    out.update(api_us=api, client_us=client, dispatch_us=dispatch, call_us=call_us, call_samples_us=per_call,
               wait_us=wait_us, wait_samples_us=per_wait, dispatch_residual_us=dispatch_res, client_L_us=client_L,
               client_o_us=0.0 if fold_client else None, api_tail_us=tail,
               local_us={**local_us, **rnd.local}, latency_us=latency)  # fmt: skip
    return out


def _flat(f: dict[str, Any]) -> dict[str, float]:
    """The fitted costs of one round as one flat mapping (for the spread)."""
    flat = {k: f[k] for k in ("o_us", "L_us", "call_us", "wait_us", "mix_agent", "mix_client")}
    for key in ("api_us", "client_us", "dispatch_us", "local_us"):
        flat.update({f"{key}.{k}": v for k, v in f[key].items()})
    return flat


def spread_of(fits: list[dict[str, Any]]) -> tuple[str, float]:
    """The cost whose medians over the rounds vary most, and by how much
    ((max - min) / median of the per-round values; costs under 2 us, whose
    spread is noise of the clock, are left out)."""
    if len(fits) < 2:
        return "", float("inf")
    flats = [_flat(f) for f in fits]
    worst = ("", 0.0)
    for k in flats[0]:
        vals = [fl[k] for fl in flats if k in fl]
        med = statistics.median(vals)
        if med < 2.0:
            continue
        s = (max(vals) - min(vals)) / med
        if s > worst[1]:
            worst = (k, s)
    return worst


def combine(fits: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of each cost over the rounds (a cost seen in only some rounds: over those)."""
    out = dict(fits[-1])
    for key in ("o_us", "L_us", "byte_us", "G_us_per_byte", "call_us", "wait_us", "api_tail_us", "mix_agent",
                "mix_client"):
        out[key] = statistics.median(f[key] for f in fits)
    lc = [f["client_L_us"] for f in fits if f.get("client_L_us") is not None]
    out["client_L_us"] = statistics.median(lc) if lc else None
    out["client_o_us"] = fits[-1].get("client_o_us")
    for key in ("api_us", "client_us", "dispatch_us", "local_us"):
        names = {k for f in fits for k in f[key]}
        out[key] = {k: statistics.median(f[key][k] for f in fits if k in f[key]) for k in sorted(names)}
    return out


# ---------------------------------------------------------------------------------------- the profile
STORAGE_OF_LOCAL = {"read": ("read_hit", "read_miss"), "write": ("write",)}


def profile_of(fitted: dict[str, Any], rounds: int, spread: tuple[str, float], load: tuple[float, float],
               transport: str, hosts: int, capacity: float = 0.0) -> dict[str, Any]:  # fmt: skip
    """The profile a fedsim config loads (``calibration:``)."""
    r3 = lambda v: round(float(v), 3)  # noqa: E731
    costs: dict[str, float] = {}
    for op, us in fitted["local_us"].items():
        for key in STORAGE_OF_LOCAL.get(op, (op,)):
            costs[key] = r3(us)
    o, L = fitted["o_us"], fitted["L_us"]
    return {
        "measured_by": "fednode calibrate",
        "transport": transport,
        "python": platform.python_version(),
        "network": {  # plain LogGP (the papers' model): o as a delay, the bytes as G
            "L_us": r3(L), "o_us": r3(o), "g_us": r3(o),
            "G_us_per_byte": round(float(fitted["G_us_per_byte"] + 2 * fitted["byte_us"]), 6),
        },
        "storage": {"costs_us": costs},
        "machine": {
            "hosts": hosts,
            "cores": this_machine()["cores"],
            "o_us": r3(o),
            "L_us": r3(L),
            "byte_us": round(float(fitted["byte_us"]), 6),
            "G_us_per_byte": round(float(fitted["G_us_per_byte"]), 6),
            "call_us": r3(fitted["call_us"]),
            "wait_us": r3(fitted["wait_us"]),
            "api_tail_us": r3(fitted["api_tail_us"]),
            **{k: r3(fitted[k]) for k in ("client_L_us", "client_o_us") if fitted.get(k) is not None},
            "mix_agent": r3(fitted["mix_agent"]),
            "mix_client": r3(fitted["mix_client"]),
            "dispatch_us": {k: r3(v) for k, v in fitted["dispatch_us"].items()},
            "api_us": {k: r3(v) for k, v in fitted["api_us"].items()},
            "client_us": {k: r3(v) for k, v in fitted["client_us"].items()},
            "measured_on": {
                **this_machine(),
                # CPU-bound processes side by side (the model's ``capacity`` is fitted to the contention
                # microbenchmark instead: processes that wake each other get less)
                "parallel_capacity": round(capacity, 2),
                "date": datetime.date.today().isoformat(),
                "at": int(time.time()),  # when, for a reader that reuses only a recent profile
                "load_before": r3(load[0]),
                "load_after": r3(load[1]),
                "rounds": rounds,
                "worst_spread": r3(spread[1]) if spread[1] != float("inf") else None,
                "worst_spread_cost": spread[0],
                "idle": idle_policy(),
            },
        },
    }  # fmt: skip


def idle_policy() -> str:
    """How this machine's idle CPUs wait ('' where Linux does not say): the cpuidle driver and
    governor, and a VM's halt polling.  Recorded because a message to an idle process waits
    for its CPU to wake, which is what differs most between otherwise equal machines (here a
    0-hop call ran in 79 us with one agent and in 38 with four); a calibration taken under
    another setting may describe another machine.  (Letting this VM's idle vCPUs poll for
    200 us, ``guest_halt_poll_ns``, changed nothing measurable.)"""
    base = Path("/sys/devices/system/cpu/cpuidle")
    parts = []
    for name in ("current_driver", "current_governor_ro", "current_governor"):
        with contextlib.suppress(OSError):
            parts.append((base / name).read_text().strip())
    with contextlib.suppress(OSError):
        poll = Path("/sys/module/haltpoll/parameters/guest_halt_poll_ns").read_text().strip()
        parts.append(f"guest_halt_poll_ns {poll}")
    return ", ".join(dict.fromkeys(p for p in parts if p))


def report(fitted: dict[str, Any], prof: dict[str, Any], spread_target: float) -> str:
    lines = []
    rows = []
    worst = 0.0
    for s, p in fitted["ping"].items():
        err = (p["rtt_us"] - p["fit_us"]) / p["rtt_us"]
        worst = max(worst, abs(err))
        rows.append([s, f"{p['rtt_us']:.1f}", f"{p['fit_us']:.1f}", f"{100 * err:+.1f}%", f"{p['cpu_end_us']:.2f}",
                     f"{p['cpu_fit_us']:.2f}"])  # fmt: skip
    lines.append("LogGP from raw round trips (PING/PONG, R -> A), fitted over the sizes:")
    lines.append(table(["bytes", "RTT us", "fit us", "residual", "CPU per end us", "fit us"], rows))
    m = prof["machine"]
    lines.append(
        f"o = {m['o_us']:.2f} us CPU per message end (+{m['byte_us'] * 1024:.3f} us per KiB), "
        f"L = {m['L_us']:.2f} us flight (+{m['G_us_per_byte'] * 1024:.3f} us per KiB)"
        + (f"; a client's flight to its agent {m['client_L_us']:.2f} us" if "client_L_us" in m else "")
        + (f"; an agent's CPU after a call's reply {m['api_tail_us']:.2f} us" if m.get("api_tail_us") else "")
        + ("" if worst <= 0.10 else f"  -- POOR FIT: a residual of {100 * worst:.0f}% (the model is linear in size)")
    )
    rows = []
    for op in OPS:
        lat = fitted["latency_us"]
        rows.append([op, f"{fitted['client_us'].get(op, 0):.1f}", f"{fitted['api_us'].get(op, 0):.1f}",
                     f"{lat.get('local', {}).get(op, 0):.1f}", f"{lat.get('remote', {}).get(op, 0):.1f}"])  # fmt: skip
    lines.append("\nCPU per client call (us): the client program; the agent beyond its two messages and local ops")
    lines.append(table(["op", "client", "agent (api)", "latency local", "latency remote"], rows))
    rows = [[k, f"{v:.1f}"] for k, v in fitted["dispatch_us"].items()]
    lines.append("\nCPU to serve a request beyond its two messages and local ops (us), least squares over batches:")
    lines.append(table(["request", "dispatch us"], rows))
    if fitted["dispatch_residual_us"]:
        lines.append("residuals per request (us): " + ", ".join(f"{r:+.1f}" for r in fitted["dispatch_residual_us"]))
    lines.append(
        f"a request sent and waited for costs its sender {m['call_us']:.1f} us beyond its two message ends "
        "(per operation: " + ", ".join(f"{v:.1f}" for v in fitted["call_samples_us"]) + ")"
    )
    if fitted["wait_samples_us"]:
        lines.append(
            f"a request whose handler waits for the network costs its server {m['wait_us']:.1f} us more "
            "(the worker task it continues on; per operation: "
            + ", ".join(f"{v:.1f}" for v in fitted["wait_samples_us"]) + ")"
        )
    lines.append(
        f"in an interleaved cycle (no call after one of its kind) the agents' request CPU is {m['mix_agent']:.0%} "
        f"and the client's {m['mix_client']:.0%} above the batches' (mix_agent, mix_client)"
    )
    rows = [[k, f"{v:.2f}"] for k, v in sorted(fitted["local_us"].items())]
    lines.append("\nlocal file system (us per operation, warm, as the agents ran them):")
    lines.append(table(["op", "us"], rows))
    if m.get("contention"):
        lines.append("\ncontention: client threads calling agents at once (stat, 0 hop), all processes' CPU per call:")
        lines.append(_bench_table(m["contention"], "threads"))
    if m.get("fan_in"):
        lines.append("\nfan-in: client threads calling one agent at once (stat, 0 hop), all processes' CPU per call:")
        lines.append(_bench_table(m["fan_in"], "threads"))
    if m.get("chain"):
        lines.append("\nchain: one client thread calling agents in turn (stat, 0 hop), all processes' CPU per call:")
        lines.append(_bench_table(m["chain"], "agents"))
    if m.get("placement"):
        rows = [[k, f"{v['cpu_per_call_us']:.1f}", f"{v['wall_per_call_us']:.1f}"] for k, v in m["placement"].items()]
        lines.append("\nplacement: one client thread calling its agent (stat, 0 hop), the two pinned or free:")
        lines.append(table(["cores", "CPU us per call", "wall us per call"], rows))
        lines.append(placement_mode(m["placement"]))
    on = m["measured_on"]
    noisy = on["worst_spread"] is None or on["worst_spread"] > spread_target
    crowded = on.get("parallel_capacity", on["cores"]) < 0.75 * on["cores"]
    lines.append(
        f"\nhost {on['host']}, {on['cores']} cores worth {on['parallel_capacity']:.2f} side by side (CPU-bound), "
        f"load {on['load_before']:.2f} before and {on['load_after']:.2f} "
        f"after; {on['rounds']} rounds, worst spread {on['worst_spread']} ({on['worst_spread_cost']})"
        + (f"; idle CPUs: {on['idle']}" if on.get("idle") else "")
        + (f"  -- NOISY: above the {spread_target:.0%} target; the machine was busy or too small" if noisy else "")
        + (f"  -- CROWDED: CPU-bound processes side by side got {on['parallel_capacity']:.2f} of {on['cores']} cores: "
           "other work held them; calibrate again when the machine is idle" if crowded else "")
    )
    return "\n".join(lines)


def _bench_table(rows: dict[Any, dict[str, float]], count: str) -> str:
    """A microbenchmark's table: per count, the CPU per call over every process, the client program's
    part of it (where recorded) and the calls per second."""
    def client(v: dict[str, float]) -> str:
        return f"{v['client_cpu_per_call_us']:.1f}" if "client_cpu_per_call_us" in v else ""

    return table([count, "CPU us per call", "client's", "calls/s"],
                 [[k, f"{v['cpu_per_call_us']:.1f}", client(v), f"{v['calls_per_s']:,.0f}"] for k, v in rows.items()])


def nearer_placement(placed: dict[str, dict[str, float]], value: float, key: str = "cpu_per_call_us") -> str:
    """"one core" or "two cores": the pinned row of the placement microbenchmark whose ``key`` is
    nearer ``value`` (the free row's, or a probe's)."""
    same, two = placed["same core"][key], placed["two cores"][key]
    return "one core" if abs(value - same) <= abs(value - two) else "two cores"


def placement_mode(placed: dict[str, dict[str, float]]) -> str:
    """Which placement the scheduler chose while the microbenchmarks ran: the free row's CPU per call
    beside the pinned rows' (the nearer one), in a sentence for the report."""
    try:
        free, same, two = (placed[k]["cpu_per_call_us"] for k in ("free", "same core", "two cores"))
    except KeyError:
        return "placement: not measured in both pinnings"
    mode = nearer_placement(placed, free)
    return (
        f"the scheduler kept the client and its agent on {mode} while this ran ({free:.1f} us per call free, "
        f"{same:.1f} on one core, {two:.1f} on two): the per-call costs above are that placement's; a machine "
        f"that changes its choice later runs {two / same:.2f}x apart between the two"
    )


def busy(load: float, cores: int) -> str:
    """Why this machine is too busy to measure ('' if it is not)."""
    if load <= 0.5 * cores:
        return ""
    return (
        f"this machine is busy: load average {load:.2f} on {cores} cores (calibration wants under {0.5 * cores:.1f}):"
        " its costs would include others' work; stop what runs here, or use the profile with care"
    )


def calibrate(
    cluster_file: str | None,
    out: Path,
    repeat: int = 100,
    transport: str = "tcp",
    devices: tuple[str, ...] = (),
    max_rounds: int = 5,
    spread: float = SPREAD,
    mount: bool = False,
    quiet: bool = False,
    base: str | Path | None = None,
) -> dict[str, Any]:
    """Measure, write ``OUT/profile.yaml`` and ``OUT/calibration.txt``; return the profile.
    Local agents keep their directories under ``base`` (default: the system's temporary
    directory): the local file system's costs are those of the file system there."""
    cores = this_machine()["cores"]
    load0 = os.getloadavg()[0]
    capacity = parallel_capacity()
    warn = busy(load0, cores)
    if warn and not quiet:
        print(f"warning: {warn}", flush=True)
    pids: dict[int, int] = {}
    with federation(cluster_file, nodes=CHAIN_AGENTS, transport=transport, devices=devices, base=base,
                    pids=pids) as cluster:  # fmt: skip
        cal = Calibration(cluster, repeat)
        cal.pids = pids
        try:
            label = cal.clients[cal.R].status()["transport"]
            fits = cal.run(max_rounds, spread)
        finally:
            cal.close()
        hosts = len({cluster.spec.node(n).host for n in cluster.spec.members})
        fuse = None
        if mount:
            from fednode.tools.calibrate_fuse import measure_fuse

            assert cluster.source is not None
            with tempfile.TemporaryDirectory(prefix="fednode-calibrate-fuse-", dir=base) as work:
                fuse = measure_fuse(cluster.source, cal.R, Path(work), repeat=repeat)["fuse"]
    fitted = combine(fits)
    worst = spread_of(fits)
    capacity = (capacity + parallel_capacity()) / 2
    prof = profile_of(fitted, len(fits), worst, (load0, os.getloadavg()[0]), label, hosts, capacity)
    prof["machine"]["contention"] = cal.contended
    prof["machine"]["chain"] = cal.chained
    prof["machine"]["fan_in"] = cal.fanned
    if cal.placed:
        prof["machine"]["placement"] = cal.placed
    prof["machine"]["client_user_share"] = round(cal.user, 3)
    if fuse is not None:
        prof["machine"]["fuse"] = fuse
    text = report(fitted, prof, spread)
    out.mkdir(parents=True, exist_ok=True)
    (out / "profile.yaml").write_text(yaml.safe_dump(prof, sort_keys=False))
    (out / "calibration.txt").write_text(text + "\n")
    if not quiet:
        print(text)
        print(f"\n-> {out / 'profile.yaml'}, {out / 'calibration.txt'} (in a fedsim config: calibration: PROFILE)")
    return prof
