"""Federated DAFS Fig. 8: the remote data-block cache under read-only
PostMark with round-robin placement, with and without the cache, and a sweep
of its size.

"Using the round-robin policy for file placement and a modified postmark
benchmark ... in which all files are created before running the
transactions, and each transaction performs only a read operation ... the
caching layer in FedFS helps improve the throughput by about 35 %"
(section VI-D).  Read-only PostMark is ``bias_create: -1`` (no creates or
deletes) and ``bias_read: 10`` (reads only).  Clients route by the hash, so
a file is always read through the same server (its manager) while its home
is dealt out round-robin: about (N-1)/N of the reads are remote, and the
manager's cache (``protocol.block_cache_blocks`` blocks of
``protocol.block_size``) keeps their blocks after the first read.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveInt

from experiments.dafs import PostMarkRun, postmark_run
from fedsim.config import Config
from fedsim.results import StudyResult
from fedsim.schema import table
from fedsim.studies import register_study

PAPER_GAIN = 0.35  # "helps improve the throughput by about 35%"


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")

    servers: PositiveInt = 4
    clients_per_server: PositiveInt = 4
    cache_blocks: list[NonNegativeInt] = Field(default_factory=lambda: [0, 64, 256, 1024, 4096])


def run(cfg: Config, params: Params) -> StudyResult:
    res = StudyResult()
    runs: dict[int, PostMarkRun] = {}
    n = params.servers
    sizes = sorted(set([0, *params.cache_blocks]))
    for blocks in sizes:
        r = postmark_run(cfg, n, params.clients_per_server * n, protocol__block_cache_blocks=blocks)
        runs[blocks] = r
        lookups = r.cache_hits + r.cache_misses
        res.extend(
            f"cache_blocks={blocks}",
            {
                "tps": r.tps,
                "gain": r.tps / runs[0].tps - 1,
                "paper_gain": PAPER_GAIN,
                "hit_rate": r.cache_hits / lookups if lookups else 0.0,
                "remote_share": r.remote_share,
                "messages": r.messages,
                "errors": r.errors,
            },
        )
    res.report = _report(cfg, params, runs)
    return res


def _report(cfg: Config, params: Params, runs: dict[int, PostMarkRun]) -> str:
    pm = cfg.workload.postmark
    base = runs[0]
    rows = []
    for blocks, r in runs.items():
        lookups = r.cache_hits + r.cache_misses
        kib = blocks * cfg.protocol.block_size // 1024
        rows.append(
            [
                blocks,
                f"{kib} KiB",
                f"{r.tps:.0f}",
                f"{r.tps / base.tps - 1:+.1%}",
                f"{r.cache_hits / lookups:.1%}" if lookups else "-",
                f"{r.messages / max(base.messages, 1):.2f}",
            ]
        )
    best = max(runs.values(), key=lambda r: r.tps)
    return "\n".join(
        [
            f"Federated DAFS Fig. 8: read-only PostMark, {cfg.protocol.placement} placement, route {pm.route}, "
            f"{params.servers} servers, {params.clients_per_server * params.servers} clients of {pm.number} files "
            f"({pm.size_low}-{pm.size_high} B), {pm.transactions} reads each; remote share {base.remote_share:.0%}",
            table(["cache blocks", "per server", "tx/s", "gain", "hit rate", "messages vs no cache"], rows),
            f"best gain {best.tps / base.tps - 1:+.1%} (the paper: about +{PAPER_GAIN:.0%}; target within 10 points)",
        ]
    )


register_study("dafs_fig8", Params, run)
