"""Migration policies at scale: does moving files even out a skewed load, and
what does it cost?

FedFS 3.2 describes a migration mechanism and leaves the policy open (its
prototype had "a migration mechanism but no policy"); Federated DAFS VI-D
argues for matching placement to the request distribution.  Neither paper
measures a policy.  This study runs a Zipf-skewed SFS97-like workload (a few
files take most requests, and each node also has a small set of files of its
own that it asks for often: ``workload.locality``) on 64 to 1,024 simulated
nodes, once per migration policy (``protocol.migration``: none, load_based,
co_locate, or any registered one), and reports per time window

* the load spread: max/mean over the nodes of the requests each served as a
  file's home (1 = perfectly even);
* the mean operation latency, and the share of operations that reached
  another node;
* the files moved and the bytes copied so far.

The policies see only what a node can know (its own counters and gossiped
loads); the same classes run on real agents (``fednode``).
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from experiments.common import build_cluster, driver
from fedsim.config import Config
from fedsim.protocol.policies.migration import MIGRATIONS
from fedsim.results import StudyResult
from fedsim.runtime import long_run_gc
from fedsim.schema import table
from fedsim.studies import register_study
from fedsim.workloads.sfs97 import make_fileset, place


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")
    nodes: list[int] = Field(default_factory=lambda: [64, 256, 1024], min_length=1)
    policies: list[str] = Field(default_factory=lambda: ["none", "load_based", "co_locate"], min_length=1)
    windows: int = Field(5, ge=1, le=100)


def run_one(cfg: Config, nodes: int, policy: str, windows: int) -> list[dict[str, float]]:
    """One federation, one policy: the metrics of each time window."""
    cfg = cfg.model_copy(
        update={
            "cluster": cfg.cluster.model_copy(update={"nodes": nodes}),
            "protocol": cfg.protocol.model_copy(update={"migration": policy}),
        }
    )
    w = cfg.workload
    rng = np.random.default_rng(cfg.seed)
    c = build_cluster(cfg)
    fs = make_fileset(w.files, w.dirs, rng)
    place(c, fs, cfg.protocol.placement, rng)
    c.preload_summaries()
    for node in c.nodes:  # the periodic work start() would go on with: summaries, the policy
        for timer in node.background():
            c.spawn(node.id, timer)
    drv = driver(c, fs, cfg, rng)
    per = max(1, w.ops // windows)
    out = []
    with long_run_gc():
        for _ in range(windows):
            served0 = np.array([n.stats.file_requests for n in c.nodes], float)
            lat0 = {op: len(v) for op, v in drv.rec.latency.items()}
            t0 = c.env.now
            c.env.run(until=c.env.process(drv.open_loop(w.rate, per)))
            load = np.array([n.stats.file_requests for n in c.nodes], float) - served0
            lat = [x for op, v in drv.rec.latency.items() for x in v[lat0.get(op, 0) :]]
            reach = [x for op, v in drv.rec.nodes.items() for x in v[lat0.get(op, 0) :]]
            out.append(
                {
                    "end_s": c.env.now / 1e6,
                    "window_s": (c.env.now - t0) / 1e6,
                    "load_max_over_mean": float(load.max() / load.mean()) if load.mean() > 0 else float("nan"),
                    "latency_mean_us": float(np.mean(lat)) if lat else float("nan"),
                    "remote_share": float(np.mean([r > 0 for r in reach])) if reach else float("nan"),
                    "files_moved": float(sum(n.migrated_in for n in c.nodes)),  # type: ignore[attr-defined]
                    "bytes_moved": float(sum(n.migration_bytes for n in c.nodes)),  # type: ignore[attr-defined]
                    "max_moves_per_file": float(max((max(n.moves.values(), default=0) for n in c.nodes), default=0)),  # type: ignore[attr-defined]
                    "errors": float(sum(drv.rec.errors.values())),
                }
            )
    return out


def spread_floor(cfg: Config, nodes: int) -> float:
    """Theory's floor for the load spread (max/mean): the node holding the
    hottest file serves at least that file's share of the requests, which
    is about (1 - locality) / H(files, zipf) of them (the Zipf head; the hot
    sets are spread at random), against a mean of 1/nodes.  No policy that
    moves whole files can go below it; 1 if the workload is not skewed."""
    w = cfg.workload
    if w.zipf <= 0:
        return 1.0
    harmonic = float(np.sum(1.0 / np.arange(1, w.files + 1, dtype=float) ** w.zipf))
    return max(1.0, nodes * (1 - w.locality) / harmonic)


def run(cfg: Config, params: Params) -> StudyResult:
    for p in params.policies:
        MIGRATIONS.get(p)  # an unknown name fails before anything runs, naming the registered ones
    res = StudyResult()
    printed = []
    verdicts = []
    for n in params.nodes:
        if n < 2:
            raise ValueError(f"params.nodes: {n}: migration needs at least two nodes")
        last: dict[str, dict[str, float]] = {}
        floor = spread_floor(cfg, n)
        res.add(f"nodes={n}", "theory_spread_floor", floor)
        for policy in params.policies:
            rows = run_one(cfg, n, policy, params.windows)
            for k, m in enumerate(rows):
                res.extend(f"nodes={n} policy={policy} window={k}", m)
                printed.append(
                    [n, policy, k, f"{m['end_s']:.3f}", f"{m['load_max_over_mean']:.2f}",
                     f"{m['latency_mean_us']:.0f}", f"{m['remote_share']:.2f}", int(m["files_moved"]),
                     f"{m['bytes_moved'] / 2**20:.1f}", int(m["max_moves_per_file"])]
                )  # fmt: skip
            last[policy] = rows[-1]
        if "none" in last:
            base = last["none"]
            verdicts.append(f"{n} nodes: theory's floor for the spread (the hottest file alone) {floor:.2f}")
            for policy, m in last.items():
                if policy == "none":
                    continue
                verdicts.append(
                    f"{n} nodes, {policy}: load spread in the last window {m['load_max_over_mean']:.2f} against "
                    f"{base['load_max_over_mean']:.2f} without migration, mean latency "
                    f"{m['latency_mean_us']:.0f} us against {base['latency_mean_us']:.0f} us, remote share "
                    f"{m['remote_share']:.2f} against {base['remote_share']:.2f}; {int(m['files_moved'])} files "
                    f"moved ({m['bytes_moved'] / 2**20:.1f} MiB), at most {int(m['max_moves_per_file'])} move(s) "
                    "of one file"
                )
    w = cfg.workload
    res.report = "\n".join(
        [
            f"Migration: {w.files} files, {w.ops} operations at {w.rate:g}/s, Zipf s={w.zipf:g}, locality "
            f"{w.locality:g} (hot sets of {w.hot_files}), placement {cfg.protocol.placement}, policy period "
            f"{cfg.protocol.migration_period_s:g} s",
            table(
                [
                    "nodes",
                    "policy",
                    "window",
                    "ends at s",
                    "load max/mean",
                    "latency us",
                    "remote share",
                    "files moved",
                    "MiB moved",
                    "max moves/file",
                ],
                printed,
            ),
            *verdicts,
            "Neither paper measured a policy; theory bounds the spread from below: a node holding the hottest "
            "file serves at least its share of all requests, N times that over the mean (the floor above).",
        ]
    )
    return res


register_study("migration", Params, run)
