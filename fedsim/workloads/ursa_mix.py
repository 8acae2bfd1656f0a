"""Ursa Minor's metadata operation mixes (CMU-PDL-06-105, Table 4) as a workload.

Table 4 counts the metadata operations of three month-long Harvard NFS traces
(EECS03, DEAS03, CAMPUS): lookups, creates, updates (attribute writes),
renames within a directory and renames across directories.  The paper's
Figs. 4 and 5 replay the EECS mix as fast as the servers answer (a closed
loop), Fig. 5 with the share of cross-directory renames raised from the
trace's 0.0012 % to 10 %, and Fig. 6 shows that cross-directory renames come
in bursts (70 % of EECS's, 93 % of DEAS's are followed by another within a
second).

``UrsaMix`` is the SFS97 driver (``sfs97.Sfs97``: the same file set, open and
closed loops, recorder and error handling) with the operations Table 4 adds:

* ``update``: a chmod of a file (``setattr``: the inode's attributes written,
  no data), what the paper's "attribute write" is;
* ``rename_same``: a file renamed within its directory, to a fresh name;
* ``rename_cross``: a file moved to another directory (drawn uniformly from the
  file set's, as the paper's replay spreads directories at random), fresh name;
* with ``burst`` = p, a cross-directory rename is followed, by the same client
  at once (well within the paper's second), by another from the same source
  directory to the same destination with probability p, and so on: a chain of
  mean length 1/(1 - p).  The leaders are drawn less often, so that
  cross-directory renames keep their share of the operations
  (``leader_share``): bursts change when renames come, not how many.

``lookup`` and ``create`` are SFS97's (a stat; a new file in a random directory).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np

from fedsim.protocol.attrs import KEEP, UTIME_OMIT
from fedsim.protocol.names import join, parent
from fedsim.runtime import OpTrace, SimCluster
from fedsim.workloads.sfs97 import FileSet, Sfs97

#: Table 4 of the paper: metadata operations in each month-long trace (counts as printed)
TABLE4: dict[str, dict[str, int]] = {
    "eecs": {"lookup": 165_511_605, "create": 1_241_034, "update": 9_469_619, "rename_same": 96_086,
             "rename_cross": 2_186},
    "deas": {"lookup": 567_130_767, "create": 1_856_980, "update": 8_593_249, "rename_same": 134_680,
             "rename_cross": 36_076},
    "campus": {"lookup": 638_424_369, "create": 1_917_930, "update": 152_288_896, "rename_same": 5_666,
               "rename_cross": 248},
}  # fmt: skip
#: the share (%) of cross-directory renames Table 4 prints for each trace
TABLE4_CROSS_PCT = {"eecs": 0.0012, "deas": 0.006, "campus": 0.0}
#: Fig. 6: the chance that a cross-directory rename is followed by another within a second
FIG6_BURST = {"eecs": 0.70, "deas": 0.93}
OPS = ("lookup", "create", "update", "rename_same", "rename_cross")


def mix(trace: str = "eecs", cross_pct: float | None = None) -> dict[str, float]:
    """The operation weights of ``trace``, summing to 1; with ``cross_pct`` the cross-directory
    renames are that per cent of all operations and the others keep their proportions (the
    paper's Fig. 5: "a workload otherwise identical to the Harvard EECS distribution")."""
    counts = TABLE4[trace]
    total = sum(counts.values())
    w = {op: counts[op] / total for op in OPS}
    if cross_pct is None:
        return w
    if not 0 <= cross_pct < 100:
        raise ValueError(f"cross_pct must be in [0, 100), got {cross_pct}")
    rest = 1.0 - w["rename_cross"]
    out = {op: w[op] / rest * (1 - cross_pct / 100) for op in OPS if op != "rename_cross"}
    out["rename_cross"] = cross_pct / 100
    return out


def leader_share(share: float, burst: float) -> float:
    """The probability of drawing a burst's first cross-directory rename so that, with chains of
    mean length L = 1/(1 - burst) run without drawing, cross-directory renames are ``share`` of
    all operations: s = qL / (1 - q + qL), so q = s / (L(1 - s) + s)."""
    if not 0 <= burst < 1:
        raise ValueError(f"burst must be in [0, 1), got {burst}")
    chain = 1.0 / (1.0 - burst)
    return share / (chain * (1.0 - share) + share)


class UrsaMix(Sfs97):
    """The SFS97 driver with Table 4's updates and renames, and bursts of cross-directory renames."""

    def __init__(
        self, cluster: SimCluster, fileset: FileSet, *, mix: dict[str, float], rng: np.random.Generator,
        burst: float = 0.0,
    ) -> None:  # fmt: skip
        unknown = set(mix) - set(OPS)
        if unknown:
            raise ValueError(f"unknown operations {sorted(unknown)} in the mix; allowed: {', '.join(OPS)}")
        total = sum(mix.values())
        weights = {op: w / total for op, w in mix.items()}
        if burst and weights.get("rename_cross", 0.0):
            share = weights["rename_cross"]
            lead = leader_share(share, burst)
            # the leaders' weight, the others' scaled so that they keep their proportions among
            # the draws and their share of all operations
            scale = (1.0 - lead) / (1.0 - share)
            weights = {op: (lead if op == "rename_cross" else w * scale) for op, w in weights.items()}
        super().__init__(cluster, fileset, mix=weights, rng=rng)
        self.burst = burst
        #: each directory's files that a burst may move (the file set's, then what renames bring in;
        #: a file created during the run joins only once renamed): bursts need a file of the source
        self.by_dir: dict[str, list[str]] = {d: [] for d in fileset.dirs}
        for f in fileset.files:
            self.by_dir[parent(f)].append(f)
        #: where each of those files is in ``self.files`` (which the lookups pick from)
        self.index: dict[str, int] = {f: i for i, f in enumerate(self.files)}
        #: the (source, destination) of each client's burst in progress
        self.bursting: dict[int, tuple[str, str]] = {}
        self.renamed = 0
        self.bursts_followed = 0

    def next_op(self, client: int) -> str:
        """A burst's next rename (drawn: does it go on?) before the mix's next operation."""
        if client in self.bursting:
            # the burst goes on while the draw says so and its source directory has a file left
            if self.rng.random() < self.burst and self.by_dir.get(self.bursting[client][0]):
                return "rename_burst"
            del self.bursting[client]
        return super().next_op(client)

    def other_op(self, op: str, client: int, node: int, trace: OpTrace) -> Generator[Any, Any, None]:
        if op == "update":
            path = self._pick(node)
            yield from self.c.client_op(
                client, node, "setattr", path, 0o644, KEEP, KEEP, UTIME_OMIT, UTIME_OMIT, trace=trace
            )
        elif op in ("rename_same", "rename_cross"):
            i = int(self.rng.integers(0, len(self.files)))
            old = self.files[i]
            d1 = parent(old)
            if op == "rename_same":
                d2 = d1
            else:
                dirs = self.fs.dirs
                d2 = dirs[int(self.rng.integers(0, len(dirs) - 1))] if len(dirs) > 1 else d1
                if d2 == d1:  # one of the others, uniformly: the last one stands in for the source
                    d2 = dirs[-1]
            yield from self._rename(client, node, i, old, d2, trace)
            if op == "rename_cross" and self.burst:
                self.bursting[client] = (d1, d2)
        elif op == "rename_burst":
            d1, d2 = self.bursting[client]
            there = self.by_dir[d1]  # not empty: ``next_op`` checked
            old = there[int(self.rng.integers(0, len(there)))]
            self.bursts_followed += 1
            yield from self._rename(client, node, self.index[old], old, d2, trace)  # (every name in by_dir is)
        else:
            yield from super().other_op(op, client, node, trace)

    def _rename(self, client: int, node: int, i: int, old: str, d2: str, trace: OpTrace) -> Generator[Any, Any, None]:
        """Rename ``old`` (``self.files[i]``) into ``d2`` under a fresh name; on success the
        file set follows it (a failed rename changed nothing, and the error is recorded)."""
        new = join(d2, f"m{node:04d}_{self.renamed:06d}")
        self.renamed += 1
        yield from self.c.client_op(client, node, "rename", old, new, trace=trace)
        # ``old`` was ``files[i]`` and nothing else renames or removes it: a second rename of it would
        # have failed (ENOENT) and changed nothing
        self.files[i] = new
        self.sizes[new] = self.sizes.pop(old, 0)
        self.index.pop(old, None)
        self.index[new] = i
        src = self.by_dir.get(parent(old))
        if src is not None and old in src:
            src.remove(old)
        self.by_dir.setdefault(d2, []).append(new)
