"""Migration policies: which of its files a node moves, and where (FedFS 3.2:
"whenever the migration policy decides to move a file ...").

A policy is one object per node, named by the configuration
(``protocol: migration:``) and called the same way in the simulator and in
the real agent, from the node's periodic migration timer
(``fedsim.protocol.fedfs.migration``).  It sees only what that node can
know, gathered in a ``LoadView``: its own decayed request counters, per file
it holds (and per requester of each file), and the loads other members
gossiped (possibly old, possibly missing some members).  It never sees a
global oracle.  It returns the moves it wants; the mechanism performs them
(or not: a move that fails leaves no trace and the policy sees the same file
again next period).

Writing a policy: a class with ``name``, ``decide(view) -> [(path, to)]``
(at the node holding the files) and ``accept(view, load) -> bool`` (at a
target, for the moves other nodes' policies ask of it; optional: without
it every move is taken),
registered with ``@MIGRATIONS.register("my_policy")``; its constructor takes
``(node_id, config, seed)``.  The same class then runs on 1,024 simulated
nodes and on real agents.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from fedsim.protocol.config import ProtocolConfig
from fedsim.protocol.registry import Registry


@dataclass(slots=True)
class FileLoad:
    """Decayed requests served for one local file, in all and per requester node."""

    hits: float = 0.0
    by: dict[int, float] = field(default_factory=dict)


@dataclass(slots=True)
class LoadView:
    """What one node knows when its policy runs."""

    node: int
    members: tuple[int, ...]
    load: float  # this node's decayed load (file requests served per period)
    loads: dict[int, float]  # every load this node knows (gossiped), its own included
    files: dict[str, FileLoad]  # the local files that served requests lately
    movable: Callable[[str], bool]  # False for a file that arrived here too recently (hysteresis)

    def mean(self) -> float:
        return sum(self.loads.values()) / len(self.loads) if self.loads else 0.0


Move = tuple[str, int]


class MigrationPolicy(Protocol):
    name: str

    def decide(self, view: LoadView) -> list[Move]:
        """The moves this node asks for now: (path of a local file, target node)."""
        ...

    def accept(self, view: LoadView, load: float) -> bool:
        """At the target of a move another node's policy asked for: take on
        ``load`` more (the file's recent requests, plus what this node took
        on since its last period)?  A refusal leaves no trace; moves asked
        by hand (``fednode migrate``) are always taken."""
        ...


#: Migration policies by the name a config uses: ``factory(node_id, config, seed)``.
MIGRATIONS: Registry[Callable[[int, ProtocolConfig, int], MigrationPolicy]] = Registry("migration policy")


@MIGRATIONS.register("none")
class NoMigration:
    """The FedFS prototype's: "a migration mechanism but no policy" (files
    move only when asked to, ``fednode migrate``)."""

    name = "none"

    def __init__(self, node_id: int, config: ProtocolConfig, seed: int) -> None:
        pass

    def decide(self, view: LoadView) -> list[Move]:
        return []

    def accept(self, view: LoadView, load: float) -> bool:
        return True


def _hottest(view: LoadView) -> list[tuple[float, str]]:
    """Movable local files, hottest first (ties by name: deterministic)."""
    return sorted(((-f.hits, p) for p, f in view.files.items() if f.hits > 0 and view.movable(p)))


@MIGRATIONS.register("load_based")
class LoadBased:
    """Move hot files off a node whose load exceeds the mean of the loads it
    knows by more than ``migration_threshold`` (a fraction of the mean), to
    one of the least loaded nodes it knows below the mean.

    Every overloaded node decides alone, from similar gossip: sent to the
    single least loaded node, their files would make it the new hot spot (a
    herd).  So a node picks its target at random among the ``CANDIDATES``
    least loaded, and moves at most its share of that target's deficit (the
    deficit of the candidates, split among the overloaded nodes it knows),
    and never more than its own excess; a file hotter than that stays.  At
    most ``migration_batch`` files per period.  Hysteresis: a file that
    arrived by migration stays ``migration_hysteresis`` periods
    (``LoadView.movable``), so two nodes do not pass a hot file back and
    forth; and a node moves nothing while it is within the threshold."""

    name = "load_based"
    CANDIDATES = 4

    def __init__(self, node_id: int, config: ProtocolConfig, seed: int) -> None:
        self.threshold = config.migration_threshold
        self.batch = config.migration_batch
        self._rng = random.Random(seed * 7919 + node_id)

    def decide(self, view: LoadView) -> list[Move]:
        others = {n: v for n, v in view.loads.items() if n != view.node}
        mean = view.mean()
        high = mean * (1 + self.threshold)
        if not others or mean <= 0 or view.load <= high:
            return []
        cands = sorted((v, n) for n, v in others.items() if v < mean)[: self.CANDIDATES]
        if not cands:
            return []
        over = sum(1 for v in view.loads.values() if v > high)
        target_load, target = cands[self._rng.randrange(len(cands))]
        budget = min(view.load - mean, (mean - target_load) * len(cands) / max(1, over))
        moves: list[Move] = []
        moved = 0.0
        for neg, path in _hottest(view):
            hits = -neg
            if len(moves) >= self.batch or moved >= budget:
                break
            if moved + hits > budget:
                continue  # too hot for what is left: moving it would just shift the hot spot
            moves.append((path, target))
            moved += hits
        return moves

    def accept(self, view: LoadView, load: float) -> bool:
        """The target's own check, with its own fresh load: several
        overloaded nodes may pick the same target from similar gossip; it
        takes on no more than brings it to the mean."""
        return view.load + load <= view.mean()


@MIGRATIONS.register("co_locate")
class CoLocate:
    """Match placement to the request distribution (Federated DAFS VI-D):
    move a file to the node that requests it most when that node's share of
    its recent requests reaches ``migration_share`` (and the file saw at
    least ``migration_min_hits`` of them), so the requester's accesses become
    local.  At most ``migration_batch`` files per period."""

    name = "co_locate"

    def __init__(self, node_id: int, config: ProtocolConfig, seed: int) -> None:
        self.share = config.migration_share
        self.min_hits = config.migration_min_hits
        self.batch = config.migration_batch

    def decide(self, view: LoadView) -> list[Move]:
        moves: list[Move] = []
        for neg, path in _hottest(view):
            if len(moves) >= self.batch or -neg < self.min_hits:
                break
            f = view.files[path]
            top = min(f.by, key=lambda n: (-f.by[n], n))
            if top != view.node and top in view.members and f.by[top] >= self.share * f.hits:
                moves.append((path, top))
        return moves

    def accept(self, view: LoadView, load: float) -> bool:
        return True


def make_migration_policy(name: str, node_id: int, config: ProtocolConfig, seed: int = 0) -> MigrationPolicy:
    """The policy object a config names, for node ``node_id``."""
    return MIGRATIONS.get(name)(node_id, config, seed)


__all__ = ["MIGRATIONS", "CoLocate", "FileLoad", "LoadBased", "LoadView", "MigrationPolicy", "NoMigration",
           "make_migration_policy"]  # fmt: skip
