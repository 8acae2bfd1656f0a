"""mNFS Table 3 (issue 25): sequential and random write and read throughput
of a 3-node mNFS cluster relative to one NFS server with 3 disks, in the
simulator, each design the protocol code the agents run
(``fedsim.protocol.mnfs``, ``.nfs``) under the same network and disk models.

The paper's set-up (mNFS paper, section 3): one client, IOzone, a data set
three times the systems' total memory; mNFS with one disk per node, Linux
NFS with a RAID-0 of as many disks.  Here:

* **NFS** is a federation of two members: the server (member 0) and the
  client's entry (member 1), so every request crosses the network.  Its
  RAID-0 of ``disks`` disks is its disk model with each block's cost divided
  by ``disks`` (the blocks of a request spread over the disks, served in
  parallel);
* **mNFS** is ``servers`` members, every one a server; the client calls the
  entry at member 0, itself a server (mNFS's servers are every member), so
  the chunks it owns cost no message: stated, not hidden, in the report;
* each writes one file of ``3 x`` its total cache (``storage.cache_mb`` per
  node) in ``record_kb`` records, sequentially or in a random order (seeded),
  then reads it back in the same order; throughput = bytes / simulated time.

The paper's numbers are quoted, never computed: ``PAPER``.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveInt

from experiments.common import build_cluster
from experiments.dafs import variant
from fedsim.config import Config
from fedsim.results import StudyResult
from fedsim.runtime import SimCluster
from fedsim.schema import table
from fedsim.storage import EXT2_PAPER
from fedsim.studies import register_study

#: mNFS paper, Table 3: MB/s of Linux NFS (3-disk RAID-0) and of 3-node mNFS, and mNFS / NFS
PAPER: dict[str, tuple[float, float, float]] = {
    "sequential write": (48.264, 39.478, 0.82),
    "sequential read": (42.567, 69.648, 1.64),
    "random write": (13.132, 18.669, 1.42),
    "random read": (2.11, 2.557, 1.21),
}
CELLS = tuple(PAPER)
HEADERS = ["cell", "NFS sim", "mNFS sim", "mNFS/NFS sim", "NFS paper", "mNFS paper", "ratio paper", "same direction"]

#: the disk operations a RAID-0 of several disks serves in parallel (per block)
DISK_OPS = ("read_miss", "read_hit", "write")


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")

    servers: PositiveInt = 3
    disks: PositiveInt = 3
    record_kb: PositiveInt = 32
    data_per_memory: float = Field(3.0, gt=0)
    #: records in flight at once: the kernel NFS client's read-ahead and write-behind (IOzone itself waits
    #: for each call, but Linux's client keeps several RPCs outstanding); 1: every record waits for the last
    outstanding: PositiveInt = 4


def phase(c: SimCluster, node: int, work: list[tuple[str, tuple[Any, ...]]], outstanding: int) -> Generator:
    """The calls of ``work`` in order, at most ``outstanding`` in flight (each stream takes the next call as it
    finishes one, as the client's read-ahead and write-behind do): the simulated time they took."""
    todo = iter(work)
    t0 = c.env.now

    def stream() -> Generator:
        for name, args in todo:
            yield from c.client_op(0, node, name, *args)

    yield c.env.all_of([c.env.process(stream()) for _ in range(outstanding)])
    return c.env.now - t0


def io(c: SimCluster, node: int, offsets: list[int], record: int, outstanding: int, out: dict[str, float]) -> Generator:
    """Write a file at ``offsets`` (``record`` bytes each), then read it back in the same order: each phase's time."""
    fd, _ = yield from c.client_op(0, node, "create_open", "/iozone.tmp")
    block = bytes(record)
    out["write"] = yield from phase(c, node, [("write", (fd, off, block)) for off in offsets], outstanding)
    out["read"] = yield from phase(c, node, [("read", (fd, off, record)) for off in offsets], outstanding)
    yield from c.client_op(0, node, "close", fd)


def run_system(cfg: Config, params: Params, design: str, order: str) -> dict[str, float]:
    """MB/s of one system's write and read phase, ``order`` sequential or random."""
    if design == "nfs":
        costs = {**EXT2_PAPER, **cfg.storage.costs_us}
        raid = {op: costs[op] / params.disks for op in DISK_OPS}
        v = variant(
            cfg, cluster__nodes=2, protocol__architecture="nfs", storage__costs_us={**cfg.storage.costs_us, **raid}
        )
        entry, nodes = 1, 1
    else:
        v = variant(cfg, cluster__nodes=params.servers, protocol__architecture=design)
        entry, nodes = 0, params.servers
    c = build_cluster(v)
    c.preload_summaries()
    record = params.record_kb * 1024
    records = max(1, int(params.data_per_memory * nodes * cfg.storage.cache_mb * 2**20) // record)
    offsets = [i * record for i in range(records)]
    if order == "random":
        offsets = [offsets[i] for i in np.random.default_rng(cfg.seed).permutation(records)]
    out: dict[str, float] = {}
    c.env.run(until=c.env.process(io(c, entry, offsets, record, params.outstanding, out)))
    mb = records * record / 2**20
    return {"write": mb / (out["write"] * 1e-6), "read": mb / (out["read"] * 1e-6), "mb": mb}


def run(cfg: Config, params: Params) -> StudyResult:
    res = StudyResult()
    mbs: dict[tuple[str, str], float] = {}
    for order in ("sequential", "random"):
        for design in ("nfs", "mnfs"):
            m = run_system(cfg, params, design, order)
            for phase in ("write", "read"):
                mbs[(design, f"{order} {phase}")] = m[phase]
            res.extend(f"design={design} order={order}", {"write_mb_s": m["write"], "read_mb_s": m["read"],
                                                           "data_mb": m["mb"]})  # fmt: skip
    rows = []
    for cell in CELLS:
        nfs, mnfs = mbs[("nfs", cell)], mbs[("mnfs", cell)]
        ratio = mnfs / nfs
        p_nfs, p_mnfs, p_ratio = PAPER[cell]
        same = (ratio > 1) == (p_ratio > 1)
        res.extend(f"cell={cell}", {"ratio": ratio, "paper_ratio": p_ratio, "same_direction": float(same)})
        rows.append([cell, f"{nfs:.1f}", f"{mnfs:.1f}", f"{ratio:.2f}", f"{p_nfs:g}", f"{p_mnfs:g}", f"{p_ratio:.2f}",
                     "yes" if same else "NO"])  # fmt: skip
    res.report = "\n".join(
        [
            f"mNFS Table 3: {params.servers}-node mNFS vs one NFS server with {params.disks} disks (RAID-0), one "
            f"client, {params.record_kb} KB records, {params.outstanding} in flight, "
            f"data = {params.data_per_memory:g} x total cache "
            f"({cfg.storage.cache_mb:g} MB a node), {cfg.network.preset} network; MB/s simulated beside the paper's",
            table(
                HEADERS,
                rows,
            ),
            "",
            "Where the simulation differs from the paper, and why:",
            "- Sequential write: the paper's mNFS is slower than NFS (0.82; its text says 'better by 18%', which the "
            "table contradicts); it blames multicast writes delivered out of order, so the I/O nodes' disks do not "
            "write sequentially.  The simulated network delivers each link's messages in order and the disk model "
            "has no seek, so mNFS gains on writes as on the rest: the one cell whose direction differs.",
            "- The disk model costs a block the same wherever it lies (no seek): random and sequential differ here "
            "only by the block cache, so the absolute MB/s of the random cells are far above the paper's (disk "
            "seeks); the ratios are the comparison.",
            f"- mNFS's servers are every member, so the client's entry is one of them: its chunks (1 in "
            f"{params.servers}) cost no message, which the paper's separate client host did not have.",
            f"- {params.outstanding} records in flight model the NFS client's read-ahead and write-behind; with one "
            "(`params.outstanding=1`) each mNFS record is rounds of one chunk per server, waited for in turn, and "
            "NFS wins every cell.",
        ]
    )
    return res


register_study("mnfs_table3", Params, run)
