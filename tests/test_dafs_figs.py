"""The Federated DAFS figure studies (dafs_fig6, dafs_fig7, dafs_fig8) on tiny
configs, and the client-side routing they rest on (``fedsim.protocol.routing``)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

import experiments.dafs_fig6
import experiments.dafs_fig7
import experiments.dafs_fig8  # noqa: F401  (the imports register the studies)
from experiments.dafs import postmark_run
from fedsim.config import ConfigError, load
from fedsim.protocol.config import FederationSpec
from fedsim.protocol.hashing import make_hashing
from fedsim.protocol.routing import Router
from fedsim.studies import run_study

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "fedfs"
TINY_PM = ["workload.postmark.transactions=60", "workload.postmark.number=30"]


def _rows(name: str, sets: list[str]) -> dict[tuple[str, str], float]:
    cfg = load(CONFIGS / f"{name}.yaml", TINY_PM + sets)
    res = run_study(cfg)
    assert "paper" in res.report
    return {(r.case, r.metric): r.value for r in res.rows}


# ---------------------------------------------------------------------------- routing
def test_hash_route_is_the_federations_manager_and_the_others_ignore_the_file() -> None:
    fed = FederationSpec(range(4), hashing="ring", vnodes=16, seed=3)
    h = make_hashing("ring", list(range(4)), 16)
    names = [f"/pm{i}/s{i % 3}/f{i}" for i in range(200)]
    r = Router("hash", fed)
    assert [r.entry(7, p) for p in names] == [h.manager_of(p) for p in names]
    rr = Router("round_robin", fed)
    assert [rr.entry(2, "/x") for _ in range(6)] == [2, 3, 0, 1, 2, 3]
    assert [Router("fixed", fed).entry(c, p) for c, p in ((5, "/a"), (5, "/b"), (2, "/a"))] == [1, 1, 2]
    a, b = Router("random", fed), Router("random", fed)
    draws = [a.entry(1, p) for p in names]
    assert draws == [b.entry(1, p) for p in names]  # seeded: deterministic runs
    assert min(Counter(draws).values()) > 30  # and spread over every server
    with pytest.raises(ValueError, match="unknown route 'nearest'"):
        Router("nearest", fed)


def test_a_config_route_other_than_the_known_ones_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"workload\.postmark\.route"):
        load(CONFIGS / "dafs_fig7.yaml", ["workload.postmark.route=nearest"])


# ---------------------------------------------------------------------------- the figures
def test_fig7_round_robin_placement_makes_most_accesses_remote_and_matched_none() -> None:
    val = _rows("dafs_fig7", ["params.servers=[4]", "params.clients_per_server=1"])
    assert val[("servers=4 placement=with_manager route=hash", "remote_share")] == 0.0
    for case in ("placement=round_robin route=hash", "placement=with_manager route=round_robin"):
        assert abs(val[(f"servers=4 {case}", "remote_share")] - 0.75) < 0.12, case
    per_server = [val[("servers=4 placement=round_robin route=hash", f"remote_server_{s}")] for s in range(1, 5)]
    assert all(x > 0 for x in per_server)


def test_fig8_the_cache_serves_repeated_reads_and_saves_messages() -> None:
    val = _rows(
        "dafs_fig8",
        [
            "params.servers=2",
            "params.clients_per_server=2",
            "params.cache_blocks=[0,1024]",
            "workload.postmark.transactions=200",
        ],
    )
    off, on = "cache_blocks=0", "cache_blocks=1024"
    assert val[(off, "hit_rate")] == 0.0 < val[(on, "hit_rate")]
    assert val[(on, "messages")] < val[(off, "messages")]
    assert val[(on, "tps")] > val[(off, "tps")]
    assert val[(on, "errors")] == val[(off, "errors")] == 0


def test_fig6_speedup_rows_and_the_scaling_runs() -> None:
    val = _rows(
        "dafs_fig6",
        [
            "params.servers=[1,2]",
            "params.sizes=[4096]",
            "params.clients_per_server=[1,2]",
            "params.scale_servers=[4]",
            "params.scale_clients_per_server=1",
            "params.scale_transactions=20",
        ],
    )
    assert val[("size=4096 servers=1 saturated", "speedup")] == 1.0
    assert 1.0 < val[("size=4096 servers=2 saturated", "speedup")] < 2.0
    assert val[("scale servers=4", "speedup")] > 1.5
    assert val[("size=4096 servers=1 clients=1", "remote_share")] == 0.0  # routed by the hash: all local


def test_the_same_seed_gives_the_same_rows_and_the_cache_off_changes_nothing() -> None:
    cfg = load(CONFIGS / "dafs_fig8.yaml", TINY_PM)
    a = postmark_run(cfg, 2, 2, protocol__block_cache_blocks=64)
    b = postmark_run(cfg, 2, 2, protocol__block_cache_blocks=64)
    assert a == b
    # with the cache off the block size is irrelevant: not a single message differs
    c = postmark_run(cfg, 2, 2, protocol__block_cache_blocks=0, protocol__block_size=512)
    d = postmark_run(cfg, 2, 2, protocol__block_cache_blocks=0)
    assert c == d and c.cache_hits == c.cache_misses == 0


def test_saturation_stops_adding_clients_once_throughput_levels_off() -> None:
    from experiments.dafs import saturate

    cfg = load(CONFIGS / "dafs_fig6.yaml", TINY_PM)
    best, runs = saturate(cfg, 1, [1, 2, 4, 8, 16, 32, 64], 0.05)
    assert 2 <= len(runs) < 7  # stopped before the last level
    assert runs[-1].tps < 1.05 * runs[-2].tps
    assert best.tps == max(r.tps for r in runs)


def test_fig6_migration_rows_move_whole_files_only_under_the_load_policy() -> None:
    """The open question's rows: ``none`` moves nothing; ``load_based`` (its
    threshold low enough for the small imbalance of a tiny run) moves files,
    each copied whole (every file is exactly its size; PostMark writes only a file it creates)."""
    val = _rows(
        "dafs_fig6",
        [
            "params.servers=[1]",
            "params.sizes=[4096]",
            "params.clients_per_server=[1]",
            "params.scale_servers=[]",
            "params.migration_servers=[4]",
            "params.scale_clients_per_server=2",
            "params.scale_transactions=60",
            "protocol.migration_threshold=0.05",
        ],
    )
    off, on = "migration servers=4 policy=none", "migration servers=4 policy=load_based"
    assert val[(off, "files_moved")] == val[(off, "bytes_moved")] == val[(off, "remote_share")] == 0
    assert val[(on, "files_moved")] > 0
    # each copied whole; a file written while it moves (a create's write racing the move) has its dirty
    # range copied again at the freeze, so at most twice
    assert 4096 * val[(on, "files_moved")] <= val[(on, "bytes_moved")] <= 2 * 4096 * val[(on, "files_moved")]
    assert val[(on, "remote_share")] > 0  # a moved file's accesses still go to its manager (route: hash)
    assert val[(off, "errors")] == val[(on, "errors")] == 0
    assert 1 < val[(off, "speedup")] < 4
