"""Tests of experiments.table2, the FedFS Table 2 micro-benchmark study.

They check that each scenario is the one it claims to be (roles, DT state,
message counts, a successful operation) and the study's behaviour, never the
paper's numbers: whether the simulation agrees with the paper is the study's
output, not a test condition."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from experiments import get_study
from experiments.table2 import Params, measure_all, pick_names, run
from fedsim.config import load, validate
from fedsim.protocol.hashing import make_hashing
from fedsim.schema import ConfigError
from fedsim.table2_cells import CELLS

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "fedfs" / "table2.yaml"


@pytest.fixture(scope="module")
def cfg():
    return load(CONFIG)


@pytest.fixture(scope="module")
def meas(cfg):
    return measure_all(cfg, Params(**cfg.params))


@pytest.fixture(scope="module")
def result(cfg):
    return run(cfg, Params(**cfg.params))


def test_study_is_registered_and_the_shipped_config_validates(cfg):
    study = get_study("table2")
    assert study.run is run
    assert cfg.study == "table2" and cfg.cluster.nodes >= 4
    assert cfg.network.preset == "fedfs_prototype" and not cfg.protocol.async_dir_updates
    study.Params(**cfg.params)


def test_unknown_param_and_too_few_nodes_are_rejected(cfg):
    with pytest.raises(ValidationError):
        Params(repeats=3)
    small = cfg.model_copy(update={"cluster": cfg.cluster.model_copy(update={"nodes": 3})})
    with pytest.raises(ConfigError, match="at least 4 nodes"):
        measure_all(small, Params())


def test_same_config_gives_the_same_rows_and_report(cfg, result):
    again = run(cfg, Params(**cfg.params))
    assert again.rows == result.rows
    assert again.report == result.report


def test_one_row_set_per_paper_cell_with_the_required_metrics(result):
    by_case: dict[str, dict[str, float]] = {}
    for r in result.rows:
        by_case.setdefault(r.case, {})[r.metric] = r.value
    assert list(by_case) == [c.case for c in CELLS]
    for cell in CELLS:
        row = by_case[cell.case]
        assert row["paper_us"] == cell.paper_us
        assert row["ratio"] == pytest.approx(row["sim_us"] / cell.paper_us)
        assert row["ok"] == 1.0, f"{cell.case}: the operation did not succeed"
        if cell.roles is not None:
            assert row["paper_hops"] == cell.paper_hops
            assert row["messages"] >= row["requests"]
            assert {"sim_us_oneway_updates", "sim_us_acked_updates"} <= set(row)
            assert row["sim_us"] == row["sim_us_acked_updates"]  # the config asks for acknowledged updates


def test_every_scenario_has_its_intended_roles_and_succeeds(meas):
    for cell in CELLS:
        m = meas[cell.case]
        assert m.ok, cell.case
        assert m.dirmerges == 0, cell.case  # the parent's VD was warm: nothing but the op was timed
        if cell.roles is None:
            continue
        assert (m.manager, m.parent_manager, m.home) == cell.nodes, cell.case
        # R is node 0; "R" in the arrangement means the requester itself.
        for letter, node in zip(cell.roles, (m.manager, m.parent_manager, m.home), strict=True):
            assert (node == 0) == (letter == "R"), cell.case


def test_remote_roles_are_distinct_where_the_arrangement_says_so(meas):
    for case in ("creat 5 hops", "mkdir 6 hops", "unlink 3 hops dt-hit"):
        m = meas[case]
        assert len({0, m.manager, m.parent_manager, m.home}) == 4, case


def test_unlink_dt_state_is_as_labelled(meas):
    for cell in CELLS:
        if cell.op == "unlink" and cell.roles is not None:
            assert meas[cell.case].dt_hit_before is (cell.variant == "dt-hit"), cell.case


def test_zero_hop_cases_send_nothing_and_multi_hop_cases_do(meas):
    for cell in CELLS:
        m = meas[cell.case]
        if cell.paper_hops == 0:
            assert m.messages == 0 and m.log == [], cell.case
        elif cell.paper_hops:
            assert m.messages > 0 and m.requests > 0, cell.case


def test_request_counts_follow_the_arrangement(meas):
    """Our protocol's requests per cell: the paper's hops, except that our
    manager folds the prototype's lookup and create into one HomeInfo."""
    for cell in CELLS:
        if cell.paper_hops is None:
            continue
        assert meas[cell.case].requests == cell.requests, (cell.case, meas[cell.case].request_kinds)
    assert meas["creat 2 hops"].request_kinds == ["HomeInfo", "GetEntry"]
    assert meas["unlink 3 hops dt-hit"].request_kinds == ["Unlink", "DelEntry", "Forget"]


def test_latency_grows_with_hops(meas):
    lat = {k: m.latency_us for k, m in meas.items()}
    assert lat["creat local"] < lat["creat 0 hop"] < lat["creat 2 hops"] < lat["creat 5 hops"]
    assert lat["mkdir local"] < lat["mkdir 0 hop"] < lat["mkdir 3 hops"] < lat["mkdir 6 hops"]
    assert lat["read 0 hop"] < lat["read 1 hop"] and lat["write 0 hop"] < lat["write 1 hop"]
    assert lat["unlink 0 hop"] < lat["unlink 1 hop dt-hit"] < lat["unlink 2 hops"]


def test_cache_hits_are_cheaper_than_misses_for_reads(meas):
    assert meas["read local cache-hit"].latency_us < meas["read local"].latency_us
    assert meas["read 0 hop cache-hit"].latency_us < meas["read 0 hop"].latency_us


def test_acknowledged_updates_put_them_on_the_critical_path(cfg):
    oneway = cfg.model_copy(update={"protocol": cfg.protocol.model_copy(update={"async_dir_updates": True})})
    acked = cfg.model_copy(update={"protocol": cfg.protocol.model_copy(update={"async_dir_updates": False})})
    one_way, ack = measure_all(oneway, Params()), measure_all(acked, Params())
    for case in ("creat 5 hops", "mkdir 6 hops", "unlink 3 hops dt-hit"):
        assert ack[case].latency_us > one_way[case].latency_us
        assert ack[case].requests == one_way[case].requests
        assert ack[case].exchanges == ack[case].requests > one_way[case].exchanges
    for case in ("creat 2 hops", "read 1 hop", "unlink 2 hops"):  # no update leaves R's critical path
        assert ack[case].latency_us == pytest.approx(one_way[case].latency_us)


def test_report_shows_the_grid_and_computed_comparisons(result):
    text = result.report
    for op in ("creat", "mkdir", "read", "write", "unlink"):
        assert f"\n{op} " in text
    for cell in CELLS:  # every paper value is printed beside its simulated one
        assert f"({cell.paper_us:.0f})" in text, cell.case
    assert "Agreement within" in text and "Per hop" in text and "Updates:" in text


def test_name_search_hits_the_requested_managers():
    h = make_hashing("ring", range(5), 16)
    for pm in range(5):
        for m in range(5):
            parent, path = pick_names(h, pm, m)
            assert h.manager_of(parent) == pm and h.manager_of(path) == m
            assert path.startswith(parent + "/")


def test_ring_hashing_and_more_nodes_keep_the_arrangements():
    cfg = validate(
        {"study": "table2", "cluster": {"nodes": 6}, "protocol": {"hashing": "ring", "async_dir_updates": True}}
    )
    out = measure_all(cfg, Params(compare_updates=False))
    assert all(m.ok and m.roles_ok() for m in out.values())


def test_fednode_bench_times_the_studys_own_cells():
    """One scenario list: the agent's bench runs Table 2's cells, all but the
    ones a warm, repeated real call cannot arrange, and reports them under the
    paper's columns with the requests each arrangement should send."""
    from fednode.tools.bench import BENCH_CELLS, TIDY_COLUMNS, report

    fed = {c.case for c in CELLS if c.roles is not None and c.variant != "cache-hit"}
    assert set(BENCH_CELLS) <= set(CELLS)
    assert fed - {c.case for c in BENCH_CELLS} == {"unlink 0 hop"}  # R's DT always knows what R manages and holds
    local = {"create": 7.0, "mkdir": 9.0, "rmdir": 8.0, "stat": 2.0, "read": 1.5, "write": 1.8, "unlink": 6.0}
    cells = {c.case: (100.0, c.requests, c, 50.0) for c in BENCH_CELLS}
    text, tidy, _ = report({"rtt_us": 40.0, "rtt_big_us": 90.0, "local": local, "cells": cells})
    assert [r[0] for r in tidy] == [c.case for c in BENCH_CELLS]
    assert all(len(r) == len(TIDY_COLUMNS) for r in tidy)
    assert {(r[2], r[3]) for r in tidy} == {(c.paper_hops, c.requests) for c in BENCH_CELLS}
    assert "5 hops" in text and "requests)" not in text  # every traced call sent what its arrangement should
