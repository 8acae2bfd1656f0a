"""The ``availability`` study (experiments/availability.py) on a tiny config:
its rows are deterministic (same seed, same bytes), and crashes cost what the
design promises: with two copies and one failure at a time nothing
acknowledged is lost and every failed operation is an availability error;
with one copy, a lost disk loses exactly the files its node held."""

from __future__ import annotations

from pathlib import Path

import pytest

import experiments.availability  # noqa: F401  (registers the study even where the entry point is not installed)
from fedsim.config import load
from fedsim.results import to_csv
from fedsim.studies import run_study

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "fedfs" / "availability.yaml"
TINY = ["params.nodes=[6]", "params.duration_s=2.5", "params.settle_s=0.4", "workload.think_ms=15"]
ONE_AT_A_TIME = (
    "params.schedules=[{name: transient, mean_gap_s: 0.25, mean_down_s: 0.3},"
    " {name: disk_loss, mean_gap_s: 0.25, mean_down_s: 0.3, disk_loss: 1.0}]"
)


def _run(sets: list[str]) -> tuple[str, dict[tuple[str, str], float], str]:
    cfg = load(CONFIG, sets)
    r = run_study(cfg, str(CONFIG), module="experiments.availability")
    csv = to_csv("availability", cfg.seed, r.rows)
    rows = {}
    for line in csv.splitlines()[1:]:
        _, case, _, metric, value = line.split(",")
        rows[(case, metric)] = float(value)
    return csv, rows, r.report


def test_two_copies_lose_nothing_one_copy_loses_the_lost_disk_and_runs_repeat_to_the_byte():
    csv1, rows, report = _run([*TINY, ONE_AT_A_TIME, "params.replicas=[1,2]"])
    for schedule in ("transient", "disk_loss"):
        two = {m: rows[(f"nodes=6 replicas=2 schedule={schedule}", m)] for m in
               ("crashes", "detected", "files_acked", "files_lost", "files_resurrected", "failed_other",
                "failed_unavailable", "recovery_errors", "ops_hung")}  # fmt: skip
        assert two["crashes"] >= 2 and two["detected"] >= 1, (schedule, two)  # the schedule did crash nodes
        assert two["files_acked"] > 30, (schedule, two)
        # the promise: one failure at a time, two copies -> nothing acknowledged is lost ...
        assert two["files_lost"] == 0, (schedule, two, report)
        # ... and the only failures are a peer not answering
        assert two["failed_other"] == 0 == two["recovery_errors"] == two["ops_hung"], (schedule, two, report)
    one = {m: rows[("nodes=6 replicas=1 schedule=disk_loss", m)] for m in
           ("permanent", "files_lost", "theory_files_lost", "failed_other", "failed_unavailable")}  # fmt: skip
    assert one["permanent"] >= 1
    # one copy: the lost disks take exactly the acknowledged files they held
    assert one["files_lost"] == one["theory_files_lost"] > 0, (one, report)
    assert one["failed_unavailable"] > 0 and one["failed_other"] == 0, (one, report)
    # a transient crash with one copy loses nothing: the node comes back with its disk
    assert rows[("nodes=6 replicas=1 schedule=transient", "files_lost")] == 0
    assert "theory" in report and "files lost" in report
    csv2, _, _ = _run([*TINY, ONE_AT_A_TIME, "params.replicas=[1,2]"])
    assert csv1 == csv2  # same config and seed: the same bytes
    csv3, _, _ = _run([*TINY, ONE_AT_A_TIME, "params.replicas=[1,2]", "seed=2"])
    assert csv3 != csv1


def test_crashes_need_heartbeats_and_replicas_are_one_or_two():
    with pytest.raises(ValueError, match="heartbeat_s must be positive"):
        _run([*TINY, "protocol.heartbeat_s=0"])
    with pytest.raises(ValueError, match="replicas: 3"):
        _run([*TINY, "params.replicas=[3]"])


def test_an_acknowledged_unlink_stays_done_across_a_restart():
    _, rows, report = _run([*TINY, ONE_AT_A_TIME, "params.replicas=[2]"])
    for schedule in ("transient", "disk_loss"):
        assert rows[(f"nodes=6 replicas=2 schedule={schedule}", "files_resurrected")] == 0, (schedule, report)
