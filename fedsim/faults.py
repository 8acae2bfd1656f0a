"""Network faults beyond crash-stop: loss, delay (hence reordering) and partitions.

A ``FaultPlan`` is an explicit, immutable schedule, so that hypothesis can
generate it and shrink a failing one to the few faults that matter, and so
that the same plan gives the same run.  It names messages by their *sequence
number*: the runtime numbers every message it puts on the wire (requests,
one-way messages and replies alike) 0, 1, 2 ... in the order it decides their
fate, counting from the moment the plan is installed.  Partitions are windows
of sequence numbers and/or of the runtime's clock (seconds).

What a fault means is the same in every runtime (``fedsim.runtime``,
``fedsim.direct`` and, through the in-process transport, ``fednode``):

* a lost request or reply surfaces at the caller as ``PeerUnavailable``
  (after the RPC timeout where there is time, at once in the in-memory
  runtime); a lost reply means the handler *did* run;
* a lost one-way message is silently lost;
* a delayed message arrives later, possibly after messages sent after it
  (reordering); a request or reply delayed past the caller's timeout is a
  ``PeerUnavailable`` at the caller, and the late request still runs.

``FaultInjector`` is the per-run state a runtime keeps: the numbering and a
log of what it did, which a failing test prints.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from math import inf

#: The fate of one message: lost, or delivered after this many extra seconds.
LOST = None


@dataclass(frozen=True, slots=True)
class Partition:
    """No message crosses between ``side`` and ``other`` (None: every node not
    in ``side``) while the message's sequence number is in [first, last] and
    the clock in [start, end).  Nodes in neither group reach both."""

    side: frozenset[int]
    first: int = 0
    last: int = sys.maxsize
    start: float = 0.0
    end: float = inf
    other: frozenset[int] | None = None

    def cuts(self, seq: int, src: int, dst: int, now: float) -> bool:
        if not (self.first <= seq <= self.last and self.start <= now < self.end):
            return False
        a, b = src in self.side, dst in self.side
        if self.other is None:
            return a != b
        return (a and dst in self.other) or (b and src in self.other)


@dataclass(frozen=True, slots=True)
class FaultPlan:
    """Which messages are lost (``lose``), which are late and by how many
    seconds (``delay``), and the partitions.  Messages the plan does not
    name are delivered normally, so a plan over the first N messages
    "stops" after them."""

    lose: frozenset[int] = frozenset()
    delay: Mapping[int, float] = field(default_factory=dict)
    partitions: tuple[Partition, ...] = ()

    @classmethod
    def of(
        cls,
        lose: Iterable[int] = (),
        delay: Mapping[int, float] | None = None,
        partitions: Iterable[Partition] = (),
    ) -> FaultPlan:
        """A plan from plain collections (what a test or a strategy writes)."""
        return cls(frozenset(lose), dict(delay or {}), tuple(partitions))

    @classmethod
    def seeded(
        cls, seed: int, messages: int, loss: float = 0.05, late: float = 0.05, max_delay: float = 0.01
    ) -> FaultPlan:
        """A random plan over the first ``messages`` messages: each is lost
        with probability ``loss``, else late by up to ``max_delay`` seconds
        with probability ``late``.  The same seed gives the same plan."""
        rng = random.Random(seed)
        lose, delay = set(), {}
        for seq in range(messages):
            r = rng.random()
            if r < loss:
                lose.add(seq)
            elif r < loss + late:
                delay[seq] = rng.uniform(0.0, max_delay)
        return cls.of(lose, delay)

    def __bool__(self) -> bool:
        return bool(self.lose or self.delay or self.partitions)

    def describe(self) -> str:
        parts = []
        if self.lose:
            parts.append(f"lose {sorted(self.lose)}")
        if self.delay:
            parts.append("delay " + ", ".join(f"#{s} by {d:g} s" for s, d in sorted(self.delay.items())))
        for p in self.partitions:
            rest = "rest" if p.other is None else str(sorted(p.other))
            parts.append(
                f"partition {sorted(p.side)} | {rest} for messages {p.first}..{p.last}, time [{p.start:g}, {p.end:g})"
            )
        return "; ".join(parts) or "no faults"


@dataclass(slots=True)
class FaultInjector:
    """A plan being applied by one runtime: numbers the messages and logs
    every fault it injected as (seq, src, dst, kind, fate)."""

    plan: FaultPlan
    sent: int = 0
    log: list[tuple[int, int, int, str, str]] = field(default_factory=list)

    def fate(self, src: int, dst: int, kind: str, now: float) -> float | None:
        """The next message's fate: ``LOST`` (None), or its extra delay in seconds."""
        seq = self.sent
        self.sent += 1
        plan = self.plan
        if seq in plan.lose:
            self.log.append((seq, src, dst, kind, "lost"))
            return LOST
        for p in plan.partitions:
            if p.cuts(seq, src, dst, now):
                self.log.append((seq, src, dst, kind, "partitioned"))
                return LOST
        d = plan.delay.get(seq)
        if d:
            self.log.append((seq, src, dst, kind, f"late by {d:g} s"))
            return d
        return 0.0

    def describe(self) -> str:
        """The plan and what it did, for a failing test's message."""
        done = "; ".join(f"#{s} {k} {a}->{b} {f}" for s, a, b, k, f in self.log) or "nothing"
        return f"plan: {self.plan.describe()}; {self.sent} messages numbered; injected: {done}"
