"""Availability under crashes (FedFS 3.2-3.3, issue 13): random crash and
recovery schedules, and what they cost a running workload, without and with
replication.

A simulated federation (``params.nodes``, e.g. 8 and 16 members) runs with
heartbeats on (``protocol.heartbeat_s``): a member that stops answering is
suspected by its successor and evicted by the coordinator (a view change).
Every member runs a client that, for ``params.duration_s`` of simulated
time, creates, overwrites (distinct content each time), reads, stats and
unlinks files of its own in a few shared directories (``workload.dirs``,
``workload.mix``, ``workload.think_ms``, ``workload.io_size`` bytes per
file).  Each operation's outcome is recorded, and for every acknowledged
create, write and unlink the reference content of its path.

Meanwhile a seeded random schedule (``params.schedules``) crashes members:
exponential gaps between crashes (``mean_gap_s``); each crash is transient
(the node restarts with its disk after an exponential downtime,
``mean_down_s``: ``SimCluster.restart``, which runs the protocol's
``recover``) or, with probability ``disk_loss``, permanent (the node never
comes back; once it is evicted a fresh, empty node joins instead).  A
schedule keeps at most one node down at a time (the issue's promise: the
next crash comes only once the last one is repaired and ``settle_s`` has
passed) unless ``overlap`` is set, which lets crashes pile up, to show what
breaks outside the promise.

Measured per (nodes, replicas, schedule):

* failed operations: their share, split by cause: *unavailable* (a peer did
  not answer: PeerUnavailable / EHOSTDOWN / ETIMEDOUT, or ENOENT for a file
  whose only holder is down: with one copy its name leaves the namespace
  with its evicted home), *client crashed* (the client's own node crashed
  under it: not the federation's fault) and *other*: anything else, and a
  read that returns other bytes than the last acknowledged write, is a bug;
* files lost: reference files whose acknowledged content cannot be read
  back once everything has settled (every down node restarted or replaced,
  then ``settle_s``), and unlinked files that came back;
* time to detect: simulated seconds from a crash to its eviction (for the
  crashes evicted before their restart);
* unavailable file-seconds: the integral over time of the reference files
  whose home (the node holding them in its namespace) is down (they cannot
  be changed), and of those no live node holds any copy of (they cannot
  be read either: with replication the secondary serves reads).

Theory, printed beside: with one copy, the files lost are exactly those
homed on the permanently lost nodes (their local trees when they crashed),
and the operations that fail are those that need a down node: aimed at a
file whose home is down, or creating a name whose manager is down (counted
as each operation is issued, from the local trees); with two copies, reads
and stats of a file whose home is down are served by its secondary, so only
the changes need the home, and they need its secondary too (a change is
acknowledged only once both copies hold it: a crashed secondary fails its
primary's changes until its eviction, about ``heartbeat_misses *
heartbeat_s`` plus the check, after which the primary copies to its new
successor); with one failure at a time nothing acknowledged is lost.
"""

from __future__ import annotations

import errno
import random
from collections import Counter
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import simpy
from pydantic import BaseModel, ConfigDict, Field

from experiments.common import build_cluster
from fedsim.config import Config
from fedsim.protocol.messages import PeerUnavailable
from fedsim.protocol.names import REPLICA_ROOT, is_replica, split
from fedsim.results import StudyResult
from fedsim.runtime import SimCluster
from fedsim.schema import table
from fedsim.studies import register_study

#: errnos that mean "a peer did not answer" (PeerUnavailable carries EHOSTDOWN)
UNAVAILABLE = frozenset({errno.EHOSTDOWN, errno.ETIMEDOUT, errno.EHOSTUNREACH})


class Schedule(BaseModel):
    """A random crash schedule."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z0-9_-]+$")
    mean_gap_s: float = Field(gt=0)  # mean time between crashes (exponential)
    mean_down_s: float = Field(gt=0)  # mean downtime of a transient crash (exponential)
    disk_loss: float = Field(0.0, ge=0, le=1)  # probability that a crash is permanent
    overlap: bool = False  # crashes may come while another node is down


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")
    nodes: list[int] = Field(default_factory=lambda: [8, 16], min_length=1)
    replicas: list[int] = Field(default_factory=lambda: [1, 2], min_length=1)
    schedules: list[Schedule] = Field(min_length=1)
    duration_s: float = Field(2.0, gt=0)  # simulated seconds of workload
    settle_s: float = Field(0.5, ge=0)  # quiet time after each repair and before the final read-back
    sample_s: float = Field(0.01, gt=0)  # period of the unavailability sampler
    min_up: int = Field(2, ge=1)  # an overlapping schedule never takes the up members below this
    repair_timeout_s: float = Field(5.0, gt=0)  # a restart, eviction or join not done by then is a failed repair


# ---------------------------------------------------------------------------------------------
# Crash and restart: the runtime's calls, kept in one place


def crash(c: SimCluster, node: int) -> None:
    """Crash ``node``: it stops answering and its timers stop; its disk stays."""
    c.crash(node)


def restart(c: SimCluster, node: int, seed: int) -> simpy.Process:
    """Restart ``node`` over its old disk; it recovers through member ``seed``
    (``recover`` ends in ``join``, whose ``start`` restarts the node's timers)."""
    return c.restart(node, seed=seed)


#: how many times a replacement asks to join while a view change is in flight (EAGAIN)
JOIN_TRIES = 6


def replace(c: SimCluster, seed: int) -> tuple[int, simpy.Process]:
    """A fresh, empty node joins through member ``seed``: (its id, the process).
    The coordinator answers EAGAIN while it is installing a view (the lost
    node's eviction, still reaching the members): the join is asked again
    after a back-off, as an operator would."""
    new = c.add_node(seed=seed)
    return new, c.env.process(_join(c, new, seed))


def _join(c: SimCluster, node: int, seed: int) -> Generator[Any, Any, Any]:
    wait = max(c.protocol.heartbeat_s, 0.001)
    for attempt in range(JOIN_TRIES):
        try:
            return (yield c.join(node, seed=seed))
        except OSError as exc:
            if exc.errno != errno.EAGAIN or attempt == JOIN_TRIES - 1:
                raise
        yield c.env.timeout(wait * 1e6)
        wait *= 2
    raise AssertionError("unreachable")


# ---------------------------------------------------------------------------------------------
# One run


@dataclass
class CrashRecord:
    node: int
    at: float  # simulated seconds
    permanent: bool
    evicted_at: float | None = None
    restart_at: float | None = None  # the restart began (its recover evicts the old incarnation itself)
    back_at: float | None = None  # restart done, or the replacement joined
    recovery_error: str | None = None
    evicted_alive: bool = False  # not a crash of the schedule: the node was evicted while up
    homed: frozenset[str] = frozenset()  # files in its namespace when it crashed


@dataclass
class Run:
    """One federation under one schedule: the workload, the schedule, the
    oracle and the tallies."""

    c: SimCluster
    rng: random.Random
    params: Params
    schedule: Schedule
    mix: list[tuple[str, float]]
    dirs: int
    size: int
    think_s: float
    end_s: float = 0.0
    ref: dict[str, bytes] = field(default_factory=dict)  # acknowledged content per path
    owned: dict[int, list[str]] = field(default_factory=dict)  # each client's definite files
    gone: set[str] = field(default_factory=set)  # acknowledged unlinks
    uncertain: set[str] = field(default_factory=set)  # a mutation failed: either outcome is right
    inflight: dict[str, tuple[int, str, float]] = field(default_factory=dict)  # path -> (client, op, since)
    outcomes: Counter[tuple[str, str]] = field(default_factory=Counter)  # (op, class)
    other: Counter[str] = field(default_factory=Counter)  # the "other" failures, by kind
    aimed_down: int = 0  # operations issued at a file (or name) whose holder was down
    down: set[int] = field(default_factory=set)
    gone_nodes: set[int] = field(default_factory=set)  # permanently lost
    incarnation: dict[int, int] = field(default_factory=dict)
    crashes: list[CrashRecord] = field(default_factory=list)
    pending: list[simpy.Process] = field(default_factory=list)  # recoveries in flight
    unwritable_fs: float = 0.0
    unreadable_fs: float = 0.0
    down_node_s: float = 0.0
    seq: int = 0

    @property
    def env(self) -> simpy.Environment:
        return self.c.env

    @property
    def now(self) -> float:
        return self.c.env.now * 1e-6

    def up(self) -> list[int]:
        return [n for n in self.c.live if n not in self.down and n not in self.gone_nodes]

    def holder(self, path: str) -> int | None:
        """The node whose namespace holds ``path`` (the oracle: local trees):
        an up node if one does (a crashed node's disk keeps its old copy of a
        file promoted meanwhile at the secondary), else a down one, else None."""
        down = None
        for n in self.c.live:
            if n not in self.gone_nodes and path in self.c.fs[n].files:
                if n not in self.down:
                    return n
                down = n if down is None else down
        return down

    def content(self, path: str) -> bytes:
        self.seq += 1
        head = f"{path}#{self.seq}:".encode()
        return (head * (self.size // len(head) + 1))[: self.size]

    # -- the client ------------------------------------------------------------------------
    def client(self, n: int) -> Generator[Any, Any, None]:
        """Member ``n``'s client: operations until the end or until ``n`` crashes."""
        inc = self.incarnation.get(n, 0)
        mine = self.owned.setdefault(n, [])
        ops, weights = zip(*self.mix, strict=True)
        while True:
            yield self.env.timeout(self.rng.expovariate(1 / self.think_s) * 1e6)
            if self.now >= self.end_s or self.incarnation.get(n, 0) != inc or n in self.down:
                return
            op = self.rng.choices(ops, weights)[0]
            if op != "create" and not mine:
                op = "create"
            if op == "create":
                self.seq += 1
                path = f"/d{self.rng.randrange(self.dirs)}/n{n}-{self.seq}"
            else:
                path = mine[self.rng.randrange(len(mine))]
            self._aim(n, op, path)
            self.inflight[path] = (n, op, self.now)
            try:
                yield from self._op(n, op, path)
                ok, cls = True, "ok"
            except _ClientCrashed:
                ok, cls = False, "client_crashed"
            except (PeerUnavailable, OSError, _Wrong) as exc:
                ok, cls = False, self._classify(exc, path)
            except Exception as exc:  # a bug in the protocol: counted, reported, not hidden
                ok, cls = False, "other"
                self.other[f"{type(exc).__name__}: {exc}"[:120]] += 1
            del self.inflight[path]
            if self.incarnation.get(n, 0) != inc:
                ok, cls = False, "client_crashed"  # its outcome is unknown: the client died with it
            self.outcomes[(op, cls)] += 1
            if not ok and op in ("create", "write", "remove"):
                self.uncertain.add(path)
                self.ref.pop(path, None)
                if path in mine:
                    mine.remove(path)
            if cls == "client_crashed":
                return

    def _aim(self, n: int, op: str, path: str) -> None:
        """Count an operation that needs a down node, theory's "would fail",
        from the local trees and the client's view: a file's home for every
        operation on it (with two copies only for a change: the secondary
        serves reads); the name's manager for a create (which places the file
        there: ``with_manager``) and an unlink (told to forget it); the
        parent directory's manager for both (its entry changes); with two
        copies, for every change, the home's secondary (a change is
        acknowledged only once both copies hold it)."""
        node = self.c.nodes[n]
        needs: set[int | None] = set()
        two = self.c.protocol.replicas == 2
        if op != "create" and not (op in ("read", "stat") and two):
            needs.add(self.holder(path))
        if op in ("create", "remove"):
            needs.add(node.manager_of(path))
            needs.add(node.manager_of(split(path)[0]))
        if two and op in ("create", "write", "remove"):
            # acknowledged only once both copies hold it: the home's secondary too
            home = node.manager_of(path) if op == "create" else self.holder(path)
            if home is not None:
                needs.add(node.successor(home))
        if None in needs or needs & (self.down | self.gone_nodes):
            self.aimed_down += 1

    def _op(self, n: int, op: str, path: str) -> Generator[Any, Any, None]:
        inc = self.incarnation.get(n, 0)

        def call(node: int, name: str, *args: Any) -> Generator[Any, Any, Any]:
            """One step of the operation; a crash of the client's node ends it
            (the runtime stops the node's work: the step returns nothing)."""
            value = yield from self.c.call_op(node, name, *args)
            if self.incarnation.get(n, 0) != inc:
                raise _ClientCrashed(n)
            return value

        if op == "stat":
            _, size = yield from call(n, "stat", path)
            if size != len(self.ref[path]):
                raise _Wrong(f"stat size {size}, acknowledged {len(self.ref[path])}")
            return
        if op == "remove":
            yield from call(n, "unlink", path)
            self.ref.pop(path)
            self.owned[n].remove(path)
            self.gone.add(path)
            return
        if op == "create":
            yield from call(n, "create", path)
        data = self.content(path) if op in ("create", "write") else b""
        fd = yield from call(n, "open", path)
        try:
            if op == "read":
                got = yield from call(n, "read", fd, 0, self.size)
                if bytes(got) != self.ref[path]:
                    raise _Wrong("read other bytes than the last acknowledged write")
            else:
                yield from call(n, "write", fd, 0, data)
        except (PeerUnavailable, OSError, _Wrong):
            yield from self._close(call, n, fd)
            raise
        yield from self._close(call, n, fd)
        if op != "read":
            self.ref[path] = data
            if op == "create":
                self.owned[n].append(path)

    @staticmethod
    def _close(call: Any, n: int, fd: int) -> Generator[Any, Any, None]:
        """Close ``fd``; an error is not the operation's (the descriptor dies
        with its home; a write's outcome is what counts)."""
        try:
            yield from call(n, "close", fd)
        except (PeerUnavailable, OSError):
            pass

    def _classify(self, exc: BaseException, path: str) -> str:
        if isinstance(exc, _Wrong):
            self.other[f"wrong result: {exc}"] += 1
            return "other"
        code = getattr(exc, "errno", None)
        if isinstance(exc, PeerUnavailable) or code in UNAVAILABLE:
            return "unavailable"
        if code == errno.ENOENT and path in self.ref:
            h = self.holder(path)
            if h is None or h in self.down:
                return "unavailable"  # its only holder is down: with one copy the name left with it
        self.other[f"{errno.errorcode.get(code or 0, type(exc).__name__)}: {exc}"[:120]] += 1
        return "other"

    # -- the schedule ------------------------------------------------------------------------
    def crasher(self) -> Generator[Any, Any, None]:
        s = self.schedule
        while True:
            yield self.env.timeout(self.rng.expovariate(1 / s.mean_gap_s) * 1e6)
            if self.now >= self.end_s:
                return
            up = self.up()
            if len(up) <= max(self.params.min_up, 1):
                continue
            victim = up[self.rng.randrange(len(up))]
            permanent = self.rng.random() < s.disk_loss
            down_s = self.rng.expovariate(1 / s.mean_down_s)
            proc = self.env.process(self.one_crash(victim, permanent, down_s))
            if s.overlap:
                self.pending.append(proc)
            else:
                yield proc
                yield self.env.timeout(self.params.settle_s * 1e6)

    def supervisor(self) -> Generator[Any, Any, None]:
        """What an operator does for a node evicted while it was up (the
        protocol evicted a live member: a false suspicion, or a late eviction
        of an old incarnation): it serves nothing until it is restarted, so
        restart it (``SimCluster.evicted``; ``one_crash`` with no downtime).
        Counted apart from the schedule's crashes: each one is a bug or a
        limit of the failure detector."""
        while True:
            yield self.env.timeout(self.params.sample_s * 1e6)
            for n in self.c.evicted:
                if n not in self.down and n not in self.gone_nodes:
                    self.env.process(self.one_crash(n, False, 0.0, evicted_alive=True))

    def one_crash(
        self, victim: int, permanent: bool, down_s: float, evicted_alive: bool = False
    ) -> Generator[Any, Any, None]:
        """Crash ``victim``; bring it back (or a replacement) and record the times."""
        homed = frozenset(p for p in self.c.fs[victim].files if not is_replica(p))
        rec = CrashRecord(victim, self.now, permanent, homed=homed, evicted_alive=evicted_alive)
        self.crashes.append(rec)
        self.down.add(victim)
        self.incarnation[victim] = self.incarnation.get(victim, 0) + 1
        crash(self.c, victim)
        watch = self.env.process(self.watch_eviction(rec))
        if permanent:
            # the replacement joins once the lost node is out of the view
            if not (yield from self._within(watch)):
                rec.recovery_error = f"not evicted within {self.params.repair_timeout_s:g} s"
            self.gone_nodes.add(victim)
            self.down.discard(victim)
            if rec.recovery_error is None:
                new, join = replace(self.c, min(self.up()))
                self.down.add(new)  # a member only once its join is done
                if (yield from self._within(join, rec)):
                    self.down.discard(new)
                    self.env.process(self.client(new))
        else:
            yield self.env.timeout(down_s * 1e6)
            rec.restart_at = self.now
            back = restart(self.c, victim, min(self.up()))
            if (yield from self._within(back, rec)):
                self.down.discard(victim)
                self.env.process(self.client(victim))
        rec.back_at = self.now

    def _within(self, proc: simpy.Process, rec: CrashRecord | None = None) -> Generator[Any, Any, bool]:
        """Wait for ``proc`` at most ``repair_timeout_s``: whether it finished
        (a repair that fails or hangs is recorded in ``rec``, and the run goes on)."""
        limit = self.params.repair_timeout_s
        try:
            yield self.env.any_of([proc, self.env.timeout(limit * 1e6)])
        except Exception as exc:  # the repair failed (the condition defused its error)
            # SimPy hands each waiting process a copy, type(e)(*e.args), caused by the original
            while type(exc.__cause__) is type(exc):
                exc = exc.__cause__  # type: ignore[assignment]
            if rec is not None:
                rec.recovery_error = f"{type(exc).__name__}: {exc}"
            return False
        if not proc.triggered:
            proc.defused = True  # should it fail later, nobody waits for it any more
            if rec is not None:
                rec.recovery_error = f"not done within {limit:g} s"
            return False
        return True

    def watch_eviction(self, rec: CrashRecord) -> Generator[Any, Any, None]:
        """Poll the live members' views until one no longer lists the crashed
        node (its eviction by the heartbeats), or until its restart begins
        (then ``recover`` has the old incarnation evicted: not a detection)."""
        hb = self.c.protocol.heartbeat_s
        poll = (hb / 10 if hb > 0 else self.params.sample_s) * 1e6
        while rec.restart_at is None:
            if any(rec.node not in self.c.nodes[m].view.members for m in self.up()):
                rec.evicted_at = self.now
                return
            yield self.env.timeout(poll)

    def sampler(self) -> Generator[Any, Any, None]:
        """Integrate the unavailable file-seconds and the node-seconds down."""
        dt = self.params.sample_s
        while self.now < self.end_s:
            yield self.env.timeout(dt * 1e6)
            up = self.up()
            names: set[str] = set()
            copies: set[str] = set()
            for n in up:
                for p in self.c.fs[n].files:
                    if is_replica(p):
                        copies.add(p[len(REPLICA_ROOT) :])
                    else:
                        names.add(p)
            for p in self.ref:
                if p not in names:
                    self.unwritable_fs += dt
                    if p not in copies:
                        self.unreadable_fs += dt
            self.down_node_s += dt * (len(self.down) + len(self.gone_nodes))

    # -- the end ------------------------------------------------------------------------------
    def read_back(self) -> Generator[Any, Any, dict[str, float]]:
        """Read every reference file back, check every unlinked one is gone.
        An operation still in flight now, long after every timeout, hangs (a
        bug, counted): its file's outcome is unknown."""
        for path, (n, op, since) in sorted(self.inflight.items()):
            self.other[f"hung: {op} {path} by node {n}'s client since {since:.3f} s"] += 1
            self.uncertain.add(path)
            self.ref.pop(path, None)
        up = self.up()
        lost = wrong = resurrected = 0
        call = self.c.call_op
        for i, path in enumerate(sorted(self.ref)):
            n = up[i % len(up)]
            try:
                fd = yield from call(n, "open", path)
                got = yield from call(n, "read", fd, 0, self.size + 1)
                yield from call(n, "close", fd)
                if bytes(got) != self.ref[path]:
                    wrong += 1
            except (PeerUnavailable, OSError):
                lost += 1
        for i, path in enumerate(sorted(self.gone - self.uncertain)):
            n = up[i % len(up)]
            try:
                yield from call(n, "stat", path)
                resurrected += 1
            except OSError as exc:
                if exc.errno != errno.ENOENT:
                    resurrected += 1
        return {
            "ops_hung": float(len(self.inflight)),
            "files_lost": float(lost + wrong),
            "files_wrong": float(wrong),
            "files_resurrected": float(resurrected),
        }


class _Wrong(Exception):
    """An operation answered, but not what the reference says it must."""


class _ClientCrashed(Exception):
    """The client's own node crashed during the operation (its outcome is unknown)."""


def run_one(
    cfg: Config, nodes: int, replicas: int, schedule: Schedule, params: Params
) -> tuple[dict[str, float], list[str]]:
    """One federation, one replication factor, one schedule: its metrics, and
    a line for each kind of failure that is not an availability error (and
    each recovery that failed): the bugs it found."""
    protocol = cfg.protocol.model_copy(update={"replicas": replicas})
    cfg = cfg.model_copy(update={"protocol": protocol})
    c = build_cluster(cfg, n_nodes=nodes, keep_data=True)
    w = cfg.workload
    mix = {"lookup": "stat", "read": "read", "write": "write", "create": "create", "remove": "remove"}
    run = Run(
        c=c,
        rng=random.Random(f"{cfg.seed}-{nodes}-{replicas}-{schedule.name}"),
        params=params,
        schedule=schedule,
        mix=[(mix[k], v) for k, v in w.mix.items() if v > 0],
        dirs=w.dirs,
        size=w.io_size,
        think_s=w.think_ms / 1e3,
        end_s=params.duration_s,
    )
    for n in range(nodes):
        c.populate(n, [], [f"/d{i}" for i in range(w.dirs)])
    c.preload_summaries()
    for node in c.nodes:
        for timer in node.background():
            c.spawn(node.id, timer)
    for n in range(nodes):
        c.env.process(run.client(n))
    c.env.process(run.sampler())
    c.env.process(run.supervisor())
    c.env.run(until=c.env.process(run.crasher()))  # the last crash's repair included
    if c.env.now < params.duration_s * 1e6:
        c.env.run(until=params.duration_s * 1e6)
    for p in run.pending:  # overlapping schedules: repairs still in flight
        if not p.triggered:
            c.env.run(until=p)
    c.env.run(until=c.env.now + params.settle_s * 1e6)
    end = run.read_back()
    out = c.env.run(until=c.env.process(end))
    found = [f"{k} x{v}" for k, v in sorted(run.other.items())]
    found += [f"recovery of node {r.node} (crashed at {r.at:.3f} s): {r.recovery_error}" for r in run.crashes
              if r.recovery_error is not None]  # fmt: skip
    return metrics(run, nodes, replicas, out), found


def metrics(run: Run, nodes: int, replicas: int, end: dict[str, float]) -> dict[str, float]:
    total = sum(run.outcomes.values())
    by = Counter[str]()
    for (_, cls), k in run.outcomes.items():
        by[cls] += k
    failed = total - by["ok"]
    lost_nodes = [r for r in run.crashes if r.permanent]
    homed_lost: set[str] = set()
    for r in lost_nodes:
        homed_lost |= r.homed
    detect = [r.evicted_at - r.at for r in run.crashes if r.evicted_at is not None and not r.evicted_alive]
    one_at_a_time = not run.schedule.overlap
    m = {
        "ops": float(total),
        "failed": float(failed),
        "failed_share": failed / total if total else 0.0,
        "failed_unavailable": float(by["unavailable"]),
        "failed_client_crashed": float(by["client_crashed"]),
        "failed_other": float(by["other"]),
        "theory_failed_share": run.aimed_down / total if total else 0.0,
        "crashes": float(sum(not r.evicted_alive for r in run.crashes)),
        "evicted_alive": float(sum(r.evicted_alive for r in run.crashes)),
        "permanent": float(len(lost_nodes)),
        "recovery_errors": float(sum(r.recovery_error is not None for r in run.crashes)),
        "detected": float(len(detect)),
        "detect_mean_s": sum(detect) / len(detect) if detect else float("nan"),
        "detect_max_s": max(detect, default=float("nan")),
        "files_acked": float(len(run.ref)),
        "files_uncertain": float(len(run.uncertain)),
        **end,
        "theory_files_lost": (
            float(len(homed_lost & set(run.ref))) if replicas == 1 else 0.0 if one_at_a_time else float("nan")
        ),
        "unwritable_file_s": run.unwritable_fs,
        "unreadable_file_s": run.unreadable_fs,
        "down_node_s": run.down_node_s,
    }
    return m


def run(cfg: Config, params: Params) -> StudyResult:
    for r in params.replicas:
        if r not in (1, 2):
            raise ValueError(f"params.replicas: {r}: 1 (no replication) or 2 (primary and secondary)")
    if cfg.protocol.heartbeat_s <= 0:
        raise ValueError("protocol.heartbeat_s must be positive: crashes are detected by heartbeats")
    res = StudyResult()
    printed = []
    notes: list[str] = []
    for n in params.nodes:
        if n < 3:
            raise ValueError(f"params.nodes: {n}: a crash study needs at least three nodes")
        for s in params.schedules:
            for r in params.replicas:
                m, found = run_one(cfg, n, r, s, params)
                case = f"nodes={n} replicas={r} schedule={s.name}"
                notes += [f"{case}: {line}" for line in found]
                res.extend(case, m)
                printed.append(
                    [n, r, s.name, int(m["crashes"]), int(m["permanent"]), int(m["evicted_alive"]), int(m["ops"]),
                     f"{m['failed_share']:.4f}", f"{m['theory_failed_share']:.4f}",
                     int(m["failed_unavailable"]), int(m["failed_client_crashed"]), int(m["failed_other"]),
                     int(m["ops_hung"]), int(m["files_acked"]), int(m["files_lost"]), _num(m["theory_files_lost"]),
                     int(m["files_resurrected"]),
                     f"{m['detect_mean_s']:.3f}", f"{m['unwritable_file_s']:.1f}", f"{m['unreadable_file_s']:.1f}"]
                )  # fmt: skip
    w = cfg.workload
    p = cfg.protocol
    res.report = "\n".join(
        [
            f"Availability: {params.duration_s:g} s of workload per run (each member's client: think "
            f"{w.think_ms:g} ms, mix {dict(w.mix)}, {w.io_size} B files in {w.dirs} dirs), heartbeats every "
            f"{p.heartbeat_s:g} s, eviction after {p.heartbeat_misses} misses, rpc timeout "
            f"{cfg.cluster.rpc_timeout_ms:g} ms; schedules: "
            + "; ".join(
                f"{s.name} (gap {s.mean_gap_s:g} s, down {s.mean_down_s:g} s, disk loss {s.disk_loss:g}"
                f"{', overlapping' if s.overlap else ', one at a time'})"
                for s in params.schedules
            ),
            table(HEADER, printed),
            *notes,
            "Theory: with one copy the files lost are those homed on the lost nodes, and an operation fails if "
            "it needs a down node (a file homed there, a name it manages); with two copies only the changes "
            "need the home (the secondary serves reads), and its secondary (a change is acknowledged only once "
            "both copies hold it: a down secondary fails them until its eviction), and with one failure at a "
            "time none is lost. 'other' "
            "failures are bugs (listed above, per run, when there are any).",
        ]
    )
    return res


HEADER = ["nodes", "replicas", "schedule", "crashes", "lost nodes", "evicted up", "ops", "failed share", "theory",
          "unavailable", "client crashed", "other", "hung", "files acked", "files lost", "theory lost", "back",
          "detect s", "unwritable file-s", "unreadable file-s"]  # fmt: skip


def _num(x: float) -> str:
    return "-" if x != x else str(int(x))


register_study("availability", Params, run)
