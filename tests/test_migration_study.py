"""The ``migration`` study (experiments/migration.py) on a tiny config: it
runs every policy, its rows are deterministic (same seed, same bytes), and
the policies do what the study reports they do."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import experiments.migration  # noqa: F401  (registers the study even where the entry point is not installed)
from fedsim.config import ConfigError, load
from fedsim.results import to_csv
from fedsim.studies import run_study

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "fedfs" / "migration.yaml"
TINY = [
    "params.nodes=[16]", "params.windows=3", "workload.files=600", "workload.dirs=20", "workload.ops=4500",
    "workload.rate=20000", "protocol.migration_period_s=0.04",
]  # fmt: skip


def _run(sets: list[str]) -> tuple[str, str]:
    cfg = load(CONFIG, sets)
    r = run_study(cfg, str(CONFIG), module="experiments.migration")
    return to_csv("migration", cfg.seed, r.rows), r.report


def test_tiny_config_is_deterministic_and_each_policy_does_its_job():
    csv1, report = _run(TINY)
    csv2, _ = _run(TINY)
    assert csv1 == csv2  # same config and seed: the same bytes
    rows = {}
    for line in csv1.splitlines()[1:]:
        _, case, _, metric, value = line.split(",")
        rows[(case, metric)] = float(value)
    last = {p: {m: rows[(f"nodes=16 policy={p} window=2", m)] for m in ("load_max_over_mean", "remote_share",
            "bytes_moved", "files_moved")} for p in ("none", "load_based", "co_locate")}  # fmt: skip
    assert last["none"]["files_moved"] == 0 == last["none"]["bytes_moved"]
    assert last["load_based"]["files_moved"] > 0 and last["co_locate"]["files_moved"] > 0
    assert last["co_locate"]["remote_share"] < last["none"]["remote_share"]
    assert "load spread in the last window" in report and "MiB" in report
    csv3, _ = _run([*TINY, "seed=2"])
    assert csv3 != csv1


def test_an_unknown_policy_is_refused_before_anything_runs():
    with pytest.raises(ValueError, match="unknown migration policy 'greedy'; allowed: none, load_based, co_locate"):
        _run([*TINY, "params.policies=[none,greedy]"])
    with pytest.raises(ConfigError, match=re.escape("protocol.migration: unknown migration policy 'greedy'")):
        load(CONFIG, [*TINY, "protocol.migration=greedy"])


def test_any_workload_study_runs_the_configured_policy():
    """``protocol.migration`` works in every study that runs the SFS97 workload
    (the simulator spawns each node's periodic work, ``Node.background``)."""
    from experiments.common import run_workload

    sets = ["cluster.nodes=8", "workload.files=300", "workload.dirs=10", "workload.ops=3000", "workload.rate=20000",
            "workload.zipf=1.2", "workload.locality=0.6", "workload.hot_files=4", "protocol.migration=co_locate",
            "protocol.migration_period_s=0.02", "workload.mix={lookup: 1, read: 1}"]  # fmt: skip
    out = run_workload(load(ROOT / "configs" / "fedfs" / "simulate.yaml", sets))
    assert sum(n.migrated_in for n in out.cluster.nodes) > 0
    assert out.metrics["errors"] == 0
