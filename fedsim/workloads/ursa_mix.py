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
* with ``burst`` = p, each client's cross-directory rename follows that client's
  current burst with probability p (a ``rename_burst``: another file from the
  burst's source directory to its destination) while the burst's last rename
  started within ``window_us`` (the paper's second); otherwise it is drawn as
  without bursts and starts the client's next burst.  A burst is one client's
  (one user's ``mv`` of several files), its renames one after the other, as in
  the traces.  A share p of the cross-directory renames thus follow another
  between the same two directories, and the draws of the mix are unchanged:
  cross-directory renames keep their share exactly, bursts change which
  directories they touch.  (Two designs that were wrong: a burst's renames run
  as a chain in one client without drawing, which in a closed loop fell behind
  the other clients and was cut at the end of a run, so the share measured was
  half the share asked; and one burst for all clients, which at a few per cent
  of renames sent many clients' renames into one directory at once, a contention
  the traces' bursts do not have.)

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


class UrsaMix(Sfs97):
    """The SFS97 driver with Table 4's updates and renames, and bursts of cross-directory renames."""

    def __init__(
        self, cluster: SimCluster, fileset: FileSet, *, mix: dict[str, float], rng: np.random.Generator,
        burst: float = 0.0, window_us: float = 1e6,
    ) -> None:  # fmt: skip
        unknown = set(mix) - set(OPS)
        if unknown:
            raise ValueError(f"unknown operations {sorted(unknown)} in the mix; allowed: {', '.join(OPS)}")
        if not 0 <= burst <= 1:
            raise ValueError(f"burst must be in [0, 1], got {burst}")
        super().__init__(cluster, fileset, mix=mix, rng=rng)
        self.burst = burst
        self.window_us = window_us
        #: each directory's files that a burst may move (the file set's, then what renames bring in;
        #: a file created during the run joins only once renamed): a follower needs a file of the source
        self.by_dir: dict[str, list[str]] = {d: [] for d in fileset.dirs}
        for f in fileset.files:
            self.by_dir[parent(f)].append(f)
        #: where each of those files is in ``self.files`` (which the lookups pick from)
        self.index: dict[str, int] = {f: i for i, f in enumerate(self.files)}
        #: each client's current burst: (source, destination, start of its last rename)
        self.current: dict[int, tuple[str, str, float]] = {}
        #: the (source, destination) of each client's ``rename_burst`` about to run
        self.pairs: dict[int, tuple[str, str]] = {}
        self.renamed = 0

    def next_op(self, client: int) -> str:
        """The mix's next operation; a cross-directory rename that follows the client's current burst
        (drawn w.p. ``burst`` while the burst is within its window and its source has a file left)
        is ``rename_burst``."""
        op = super().next_op(client)
        cur = self.current.get(client)
        if (
            op == "rename_cross"
            and cur is not None
            and self.c.env.now - cur[2] <= self.window_us
            and self.by_dir.get(cur[0])
            and self.rng.random() < self.burst
        ):
            self.pairs[client] = (cur[0], cur[1])
            return "rename_burst"
        return op

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
            if op == "rename_cross" and self.burst:
                self.current[client] = (d1, d2, self.c.env.now)  # the client's next burst
            yield from self._rename(client, node, i, old, d2, trace)
        elif op == "rename_burst":
            d1, d2 = self.pairs.pop(client)
            there = self.by_dir[d1]  # not empty: ``next_op`` checked (the check and this draw: no wait between)
            old = there[int(self.rng.integers(0, len(there)))]
            self.current[client] = (d1, d2, self.c.env.now)
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
