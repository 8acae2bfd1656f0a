"""Shared plumbing of the Federated DAFS figure studies (``dafs_fig6``,
``dafs_fig7``, ``dafs_fig8``): one PostMark run on a simulated federation,
varied from the study's config by dotted keys, and the per-server numbers
the figures plot."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from experiments.common import climb, run_postmark
from fedsim.config import Config, apply_overrides, validate


def variant(cfg: Config, **dotted: Any) -> Config:
    """``cfg`` with keys replaced, written ``section__key=value``
    (``cluster__nodes=4``, ``workload__postmark__size_low=2048``), validated
    like a config file (a bad key is the same worded error)."""
    raw = cfg.model_dump()
    return validate(apply_overrides(raw, [(k.split("__"), v) for k, v in dotted.items()]), "<study variant>")


@dataclass(frozen=True)
class PostMarkRun:
    """What one run gives the figures."""

    servers: int
    clients: int
    tps: float  # PostMark transactions per second, all clients together
    file_requests: list[int]  # client file requests (open/read/write/close) per server
    remote_file_requests: list[int]  # ... for files homed on another server
    cache_hits: int
    cache_misses: int
    messages: int  # federation messages (client traffic not included)
    errors: int
    files_moved: int = 0  # files migrated (``protocol.migration``)
    bytes_moved: int = 0  # ... and the bytes their copies carried

    @property
    def remote_share(self) -> float:
        total = sum(self.file_requests)
        return sum(self.remote_file_requests) / total if total else 0.0


def postmark_run(cfg: Config, servers: int, clients: int, **dotted: Any) -> PostMarkRun:
    """PostMark with ``clients`` clients on ``servers`` servers (and ``dotted``
    overrides), simulated; every number a figure needs."""
    v = variant(cfg, cluster__nodes=servers, workload__clients=clients, **dotted)
    out = run_postmark(v)
    nodes = out.cluster.nodes
    return PostMarkRun(
        servers=servers,
        clients=clients,
        tps=out.metrics["postmark_tps"],
        file_requests=[n.stats.client_file_requests for n in nodes],
        remote_file_requests=[n.stats.remote_file_requests for n in nodes],
        cache_hits=sum(n.stats.block_cache_hits for n in nodes),
        cache_misses=sum(n.stats.block_cache_misses for n in nodes),
        messages=out.cluster.messages,
        errors=int(out.metrics["errors"]),
        files_moved=sum(getattr(n, "migrated_in", 0) for n in nodes),
        bytes_moved=sum(getattr(n, "migration_bytes", 0) for n in nodes),
    )


def saturate(
    cfg: Config, servers: int, per_server: list[int], gain: float, **dotted: Any
) -> tuple[PostMarkRun, list[PostMarkRun]]:
    """The paper's method: add clients (``per_server`` clients per server, in
    turn) until throughput grows by less than ``gain`` (relative); the best
    run and every run made."""
    return climb(per_server, lambda k: postmark_run(cfg, servers, k * servers, **dotted), lambda r: r.tps, gain)
