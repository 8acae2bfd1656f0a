"""Membership changes (FedFS 3.3, issue 13): how much manager state moves
when a node joins or leaves, with the papers' mod-N hashing against a
consistent-hash ring, measured in the simulator beside the theory.

For each size N and each hashing, a federation of N nodes is populated (the
directories in the local trees before it starts, then ``names_per_node``
files per node created through the federation, so that every name's manager
holds its exact DT entry and every directory's manager has its VD cached).
Then, in simulated time, a new node joins (the protocol's ``join``: view
change, hand-off, summary to all); every directory is read once (its VD
rebuilt by dirmerge where the join dropped it), and then one of the
original nodes (chosen by the seed) leaves gracefully.  Measured at each change:

* the share of the managers' exact DT entries that changed manager, and of
  those the entries actually handed off (``NodeStats.handed_off``; on a
  leave, the names homed on the leaver become unavailable instead);
* the share of cached VDs dropped because their directory's manager changed
  (``NodeStats.vds_dropped``; soft state, rebuilt by dirmerge on use);
* the messages and simulated time the change took.

Theory for a change between N and N+1 members: with the ring, the names of
one member's share move, 1/(N+1); with mod-N, a name stays only if its hash
gives the same member under both moduli, so about N/(N+1) move.
"""

from __future__ import annotations

import random

from pydantic import BaseModel, ConfigDict, Field

from experiments.common import build_cluster
from fedsim.config import Config
from fedsim.direct import DirectCluster
from fedsim.results import StudyResult
from fedsim.runtime import SimCluster
from fedsim.schema import table
from fedsim.studies import register_study


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")
    nodes: list[int] = Field(default_factory=lambda: [8, 16, 32, 64, 128, 256, 512, 1024], min_length=1)
    hashings: list[str] = Field(default_factory=lambda: ["mod_n", "ring"], min_length=1)
    names_per_node: int = Field(16, ge=1)  # files created through the federation, per node
    dirs_per_node: int = Field(2, ge=1)  # directories (their VDs get cached at their managers)


def theory(hashing: str, n: int) -> float:
    """The expected share of names whose manager changes between n and n+1 members."""
    return 1 / (n + 1) if hashing == "ring" else n / (n + 1)


def managed_entries(c: SimCluster | DirectCluster) -> dict[str, int]:
    """Every exact DT entry a member holds as its name's manager: path -> manager
    (either runtime: the membership tests count hand-offs with it too)."""
    out: dict[str, int] = {}
    for n in c.live:
        node = c.nodes[n]
        for p in node.dt.keys():
            if node.manager_of(p) == n:
                out[p] = n
    return out


def _totals(c: SimCluster) -> tuple[int, int, int]:
    st = [x.stats for x in c.nodes]
    return sum(s.handed_off for s in st), sum(s.vds_dropped for s in st), c.messages


def _change(c: SimCluster, start: object) -> dict[str, float]:
    """Run a view change (``start()`` returns its process) and measure it."""
    before = managed_entries(c)
    vds = sum(len(c.nodes[n].vds) for n in c.live)
    h0, v0, m0 = _totals(c)
    t0 = c.env.now
    proc = start()  # type: ignore[operator]
    c.env.run(until=proc)
    took = c.env.now - t0
    c.env.run()  # and what it set going (summary re-pushes)
    h1, v1, m1 = _totals(c)
    hashing = c.nodes[c.live[0]].hashing
    moved = sum(1 for p, m in before.items() if hashing.manager_of(p) != m)
    return {
        "dt_entries": len(before),
        "dt_moved": moved,
        "dt_moved_share": moved / len(before),
        "dt_handed_off": h1 - h0,
        "dt_handed_off_share": (h1 - h0) / len(before),
        "vds_cached": vds,
        "vds_dropped": v1 - v0,
        "vds_dropped_share": (v1 - v0) / vds if vds else 0.0,
        "messages": m1 - m0,
        "sim_us": took,
    }


def measure(cfg: Config, hashing: str, n: int, params: Params) -> dict[str, dict[str, float]]:
    """One federation of ``n`` nodes: a join, then a leave; their measurements."""
    c = build_cluster(cfg, n_nodes=n, hashing=hashing)
    rng = random.Random(f"{cfg.seed}-{hashing}-{n}")
    ndirs = n * params.dirs_per_node
    for i in range(ndirs):
        c.populate(i % n, [], [f"/d{i}"])
    c.preload_summaries()
    for i in range(n * params.names_per_node):
        c.op(rng.randrange(n), "create", f"/d{i % ndirs}/f{i}")
    c.env.run()
    out = {}
    new = c.add_node()
    out["join"] = _change(c, lambda: c.join(new))
    for i in range(ndirs):  # the VDs the join dropped are rebuilt by dirmerge on first use
        c.op(rng.randrange(n + 1), "readdir", f"/d{i}")
    c.env.run()
    leaver = rng.randrange(n)
    out["leave"] = _change(c, lambda: c.leave(leaver))
    for m in out.values():
        m["theory_share"] = theory(hashing, n)
    out["leave"]["leaver"] = leaver
    return out


def run(cfg: Config, params: Params) -> StudyResult:
    from fedsim.protocol.hashing import HASHINGS

    for h in params.hashings:
        HASHINGS.get(h)  # ValueError naming the registered ones
    for n in params.nodes:
        if n < 1:
            raise ValueError(f"params.nodes: {n} must be positive")
    res = StudyResult()
    printed = []
    for hashing in params.hashings:
        for n in params.nodes:
            for event, m in measure(cfg, hashing, n, params).items():
                res.extend(f"hashing={hashing} nodes={n} event={event}", m)
                printed.append(
                    [hashing, n, event, int(m["dt_entries"]), f"{m['dt_moved_share']:.3f}",
                     f"{m['dt_handed_off_share']:.3f}", f"{m['theory_share']:.3f}", int(m["vds_cached"]),
                     f"{m['vds_dropped_share']:.3f}", int(m["messages"]), f"{m['sim_us']:.0f}"]
                )  # fmt: skip
    res.report = "\n".join(
        [
            f"Membership changes (FedFS 3.3): a join to N+1 nodes, then a leave back to N; "
            f"{params.names_per_node} files and {params.dirs_per_node} directories per node, "
            f"placement {cfg.protocol.placement}, {cfg.protocol.vnodes} vnodes per ring member.",
            table(
                [
                    "hashing",
                    "N",
                    "event",
                    "DT entries",
                    "moved",
                    "handed off",
                    "theory",
                    "VDs cached",
                    "VDs moved",
                    "messages",
                    "sim us",
                ],
                printed,
            ),
            "moved = share of the managers' exact DT entries whose manager changed; handed off = share sent "
            "to the new manager (on a leave, names homed on the leaver become unavailable instead); "
            "VDs moved = share of cached virtual directories dropped because their manager changed; "
            "theory = 1/(N+1) for the ring, N/(N+1) for mod-N.",
        ]
    )
    return res


register_study("membership", Params, run)
