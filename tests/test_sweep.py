"""Parameter sweeps: expansion, strict validation, resume, failures, executors, plots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import fedsim.sweep as sw
from fedsim.cli import main
from fedsim.plot import read_rows, summarize, t975
from fedsim.schema import ConfigError
from fedsim.sweep import load_sweep, point_id, read_ledger, run_sweep

ROOT = Path(__file__).resolve().parents[1]
SWEEPS = sorted((ROOT / "configs" / "sweeps").glob("*.yaml"))
TINY_WORKLOAD = {"files": 200, "dirs": 10, "ops": 120, "rate": 500}


def _base(tmp_path: Path, study: str = "simulate", **extra: object) -> Path:
    p = tmp_path / f"base_{study}.yaml"
    p.write_text(yaml.safe_dump({"study": study, "seed": 1, "workload": dict(TINY_WORKLOAD), **extra}))
    return p


def _sweep(tmp_path: Path, body: dict, name: str = "s.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(body, sort_keys=False))
    return p


def _parse(tmp_path: Path, body: dict) -> sw.Sweep:
    return load_sweep(_sweep(tmp_path, {"base": str(_base(tmp_path)), **body}))


# ---------------------------------------------------------------------------- expansion
def test_grid_zip_random_and_seeds_multiply_in_a_stable_order(tmp_path):
    s = _parse(
        tmp_path,
        {
            "grid": {"cluster.nodes": [1, 2], "workload.rate": [100, 200, 300]},
            "zip": {"workload.files": [100, 150], "workload.dirs": [5, 6]},
            "random": {
                "samples": 3,
                "seed": 7,
                "params": {"workload.locality": {"uniform": [0.1, 0.9]}, "protocol.dt_entries": {"integers": [16, 64]}},
            },
            "seeds": 2,
        },
    )
    assert len(s.points) == 2 * 3 * 2 * 3 * 2
    assert s.keys == (
        "cluster.nodes",
        "workload.rate",
        "workload.files",
        "workload.dirs",
        "workload.locality",
        "protocol.dt_entries",
    )
    # zipped keys move together; seeds are innermost; the last grid key varies fastest
    assert all((p.params["workload.files"], p.params["workload.dirs"]) in {(100, 5), (150, 6)} for p in s.points)
    assert [p.seed for p in s.points[:4]] == [1, 2, 1, 2]
    assert [p.params["workload.rate"] for p in s.points[:: 2 * 3 * 2][:3]] == [100, 200, 300]
    # random samples are reproducible, in bounds, and the same across the grid
    draws = {(p.params["workload.locality"], p.params["protocol.dt_entries"]) for p in s.points}
    assert len(draws) == 3
    assert all(0.1 <= loc <= 0.9 and 16 <= dt <= 64 and isinstance(dt, int) for loc, dt in draws)
    assert draws == {
        (p.params["workload.locality"], p.params["protocol.dt_entries"])
        for p in _parse(
            tmp_path,
            {
                "random": {
                    "samples": 3,
                    "seed": 7,
                    "params": {
                        "workload.locality": {"uniform": [0.1, 0.9]},
                        "protocol.dt_entries": {"integers": [16, 64]},
                    },
                }
            },
        ).points
    }
    # each point's config carries its values
    p = s.points[5]
    assert p.config["cluster"]["nodes"] == p.params["cluster.nodes"] and p.config["seed"] == p.seed
    assert len({p.id for p in s.points}) == len(s.points)


def test_point_ids_depend_on_values_and_seed_not_position(tmp_path):
    small = _parse(tmp_path, {"grid": {"workload.rate": [100, 200]}, "seeds": [3]})
    bigger = _parse(tmp_path, {"grid": {"workload.rate": [50, 200, 100]}, "seeds": [3]})
    assert {p.id for p in small.points} < {p.id for p in bigger.points}
    assert point_id({"workload.rate": 100}, 3) != point_id({"workload.rate": 100}, 4)


def test_set_and_cli_overrides_apply_to_every_point(tmp_path):
    s = load_sweep(
        _sweep(
            tmp_path, {"base": str(_base(tmp_path)), "set": {"cluster.nodes": 3}, "grid": {"workload.rate": [100, 200]}}
        ),
        ["workload.ops=77"],
    )
    assert {(p.config["cluster"]["nodes"], p.config["workload"]["ops"]) for p in s.points} == {(3, 77)}


# ---------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("body", "words"),
    [
        (
            {"grid": {"cluster.nodez": [1, 2]}},
            ["grid: cluster.nodez: unknown parameter", "did you mean 'cluster.nodes'"],
        ),
        ({"zip": {"workload.rat": [1]}}, ["zip: workload.rat: unknown parameter", "did you mean 'workload.rate'"]),
        ({"grid": {"cluster.placement": ["random"]}}, ["grid: cluster.placement: moved to protocol.placement"]),
        ({"grid": {"protocol.placement": ["nearest"]}}, ["protocol.placement", "allowed: with_manager"]),
        ({"gird": {"cluster.nodes": [1]}}, ["gird: unknown key", "did you mean 'grid'"]),
        ({"grid": {"cluster.nodes": [0, 2]}}, ["point 0 (cluster.nodes=0 seed=1)", "cluster.nodes", "greater than 0"]),
        ({"zip": {"workload.rate": [1, 2], "workload.ops": [5]}}, ["same length", "workload.ops: 1"]),
        (
            {"random": {"samples": 2, "params": {"workload.rate": {"unifrom": [1, 2]}}}},
            ["unifrom: unknown key", "did you mean 'uniform'"],
        ),
        ({"random": {"samples": 2, "params": {"workload.rate": {"uniform": [5, 1]}}}}, ["low bound 5"]),
        ({"grid": {"seed": [1, 2]}}, ["seed: not a parameter to vary"]),
        ({"grid": {"workload.rate": [1]}, "zip": {"workload.rate": [2]}}, ["already given in grid"]),
        ({"grid": {"workload.rate": []}}, ["workload.rate: needs at least one value"]),
        ({"seeds": [1, 1]}, ["seeds must be distinct"]),
        ({"base": "missing.yaml"}, ["missing.yaml: cannot read the config"]),
    ],
)
def test_bad_sweep_is_rejected_before_running_naming_the_key(tmp_path, body, words):
    p = _sweep(tmp_path, {"base": str(_base(tmp_path)), **body})
    with pytest.raises(ConfigError) as ei:
        load_sweep(p)
    msg = str(ei.value)
    assert str(p) in msg and all(w in msg for w in words), msg


def test_study_params_are_checked_against_the_study_model(tmp_path):
    base = _base(tmp_path, "lookup_paths")
    with pytest.raises(ConfigError, match=r"params\.dt_entrie: unknown parameter; did you mean 'params\.dt_entries'"):
        load_sweep(_sweep(tmp_path, {"base": str(base), "grid": {"params.dt_entrie": [[16]]}}))
    with pytest.raises(ConfigError, match=r"point 0 .*params\.locality"):
        load_sweep(_sweep(tmp_path, {"base": str(base), "grid": {"params.locality": ["lots"]}}))


def test_cli_bad_input_exits_2_with_a_message_and_no_traceback(tmp_path, capsys):
    bad = _sweep(tmp_path, {"base": str(_base(tmp_path)), "grid": {"cluster.nodez": [1]}})
    assert main(["sweep", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'cluster.nodes'" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()
    good = _sweep(tmp_path, {"base": str(_base(tmp_path)), "grid": {"workload.rate": [100]}}, "g.yaml")
    assert main(["sweep", str(good), "--scheduler", "tcp://127.0.0.1:9"]) == 2
    assert "use it with --executor dask" in capsys.readouterr().err
    with pytest.raises(SystemExit) as ei:
        main(["sweep", str(good), "--executor", "spark"])
    assert ei.value.code == 2
    (tmp_path / "y.yaml").write_text("grid: [unclosed\n")
    assert main(["sweep", str(tmp_path / "y.yaml")]) == 2
    assert "not valid YAML" in capsys.readouterr().err


def test_unreachable_dask_scheduler_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(sw, "DASK_CONNECT_TIMEOUT", "1s")
    s = _parse(tmp_path, {"grid": {"workload.rate": [100]}})
    with pytest.raises(ConfigError, match="cannot reach a Dask scheduler"):
        run_sweep(s, tmp_path / "o", executor="dask", scheduler="tcp://127.0.0.1:9", progress=False)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.stem)
def test_every_shipped_sweep_validates_and_expands(path):
    s = load_sweep(path)
    assert len(s.points) >= 4 and s.keys


# ---------------------------------------------------------------------------- running, resume, failures
def test_resume_runs_only_the_missing_points_and_gives_the_same_rows(tmp_path, monkeypatch):
    s = _parse(
        tmp_path, {"grid": {"workload.rate": [100, 300, 900]}, "seeds": 2, "metrics": ["latency_mean_us", "ops_done"]}
    )
    full = run_sweep(s, tmp_path / "full", workers=1, progress=False)
    assert (full.ok, full.failed, full.skipped) == (6, 0, 0)
    expected = full.results.read_bytes()
    assert expected.count(b"\n") == 1 + 6 * 2  # header + 2 metrics per point

    # Ctrl-C after two points: what finished is recorded, the rest is not
    real = sw.run_point
    calls = []

    def interrupted(task):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(task.id)
        return real(task)

    monkeypatch.setattr(sw, "run_point", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(s, tmp_path / "part", workers=1, progress=False)
    monkeypatch.setattr(sw, "run_point", real)
    assert set(read_ledger(tmp_path / "part")) == set(calls)
    # a crash mid-write leaves a torn ledger line and stray result rows: both are dropped
    with (tmp_path / "part" / "points.jsonl").open("a") as f:
        f.write('{"id": "torn')
    with (tmp_path / "part" / "results.csv").open("a") as f:
        f.write("stray,row\n")

    ran = []
    monkeypatch.setattr(sw, "run_point", lambda t: ran.append(t.id) or real(t))
    again = run_sweep(s, tmp_path / "part", workers=1, progress=False)
    assert (again.ok, again.skipped) == (4, 2)
    assert set(ran) == {p.id for p in s.points} - set(calls)
    assert again.results.read_bytes() == expected
    assert run_sweep(s, tmp_path / "part", workers=1, progress=False).ok == 0  # nothing left to do


def test_a_failed_point_is_recorded_and_the_sweep_goes_on(tmp_path, capsys):
    base = _base(tmp_path, "lookup_paths")
    p = _sweep(
        tmp_path,
        {
            "base": str(base),
            "grid": {"params.dt_entries": [[16], [-1], [64]]},
            "set": {"params.locality": [0.0]},
            "metrics": ["lookup_path_share_1"],
        },
    )
    out = tmp_path / "o"
    assert main(["sweep", str(p), "--out", str(out), "--workers", "2", "--no-progress"]) == 1
    msg = capsys.readouterr().out
    assert "2 run ok, 1 failed" in msg and "dt_entries: -1 must be positive" in msg
    ledger = read_ledger(out)
    failed = [r for r in ledger.values() if r["status"] == "failed"]
    assert (
        len(failed) == 1 and "ValueError" in failed[0]["error"] and failed[0]["params"] == {"params.dt_entries": [-1]}
    )
    rows = read_rows(out)
    assert {r["params.dt_entries"] for r in rows} == {"[16]", "[64]"}
    # running again retries only the failed point
    assert main(["sweep", str(p), "--out", str(out), "--no-progress"]) == 1
    assert "0 run ok, 1 failed, 2 already done" in capsys.readouterr().out


def test_an_output_directory_of_another_base_config_is_refused(tmp_path):
    s = _parse(tmp_path, {"grid": {"workload.rate": [100]}})
    run_sweep(s, tmp_path / "o", workers=1, progress=False)
    other = load_sweep(
        _sweep(tmp_path, {"base": str(_base(tmp_path)), "grid": {"workload.rate": [100]}}), ["workload.ops=50"]
    )
    with pytest.raises(ConfigError, match=r"another base config \(workload\.ops: 120 there, 50 now\)"):
        run_sweep(other, tmp_path / "o", workers=1, progress=False)


def test_local_pool_and_dask_give_identical_rows_for_the_same_seeds(tmp_path):
    s = _parse(
        tmp_path,
        {
            "grid": {"cluster.nodes": [1, 3], "workload.rate": [200, 2000]},
            "seeds": 2,
            "metrics": ["latency_mean_us*", "messages_per_op"],
        },
    )
    serial = run_sweep(s, tmp_path / "serial", workers=1, progress=False)
    pool = run_sweep(s, tmp_path / "pool", workers=2, progress=False)
    dask = run_sweep(s, tmp_path / "dask", executor="dask", workers=2, processes=False, progress=False)
    assert serial.ok == pool.ok == dask.ok == 8
    assert serial.results.read_bytes() == pool.results.read_bytes() == dask.results.read_bytes()
    # and one point equals `fedsim run` of the same config
    p = s.points[3]
    cfg = tmp_path / "point.yaml"
    cfg.write_text(yaml.safe_dump(p.config))
    assert main(["run", str(cfg), "--out", str(tmp_path / "run")]) == 0
    run_rows = {(r["metric"], r["value"]) for r in read_rows(tmp_path / "run") if r["metric"] == "latency_mean_us"}
    sweep_rows = {
        (r["metric"], r["value"])
        for r in read_rows(serial.out)
        if r["point"] == p.id and r["metric"] == "latency_mean_us"
    }
    assert run_rows == sweep_rows and len(run_rows) == 1
    assert json.loads((serial.out / "versions.json").read_text())["simpy"]


# ---------------------------------------------------------------------------- plot
def test_summary_gives_mean_and_t_interval_over_seeds():
    rows = [
        {"x": str(x), "seed": str(s), "metric": "m", "value": str(v), "case": ""}
        for x, vals in ((1, [1.0, 2.0, 3.0]), (2, [5.0, 5.0, 5.0]))
        for s, v in enumerate(vals)
    ]
    (stats,) = summarize(rows, "x", "m").values()
    a, b = stats
    assert a.x == 1 and a.mean == 2.0 and a.n == 3
    assert a.hi - a.mean == pytest.approx(t975(2) * 1.0 / 3**0.5)
    assert b.lo == b.hi == 5.0
    assert t975(1) == 12.706 and 1.96 < t975(1000) < 1.965
    with pytest.raises(ConfigError, match="no such column"):
        summarize(rows, "nope", "m")
    with pytest.raises(ConfigError, match="no rows with this metric"):
        summarize(rows, "x", "zz")


def test_plot_writes_a_figure_from_a_sweep_and_from_a_run(tmp_path, capsys):
    s = _parse(
        tmp_path,
        {"grid": {"cluster.nodes": [1, 2], "workload.rate": [100, 400]}, "seeds": 2, "metrics": ["latency_mean_us"]},
    )
    run_sweep(s, tmp_path / "o", workers=1, progress=False)
    assert (
        main(
            [
                "plot",
                str(tmp_path / "o"),
                "--x",
                "workload.rate",
                "--y",
                "latency_mean_us",
                "--hue",
                "cluster.nodes",
                "--out",
                str(tmp_path / "f.png"),
            ]
        )
        == 0
    )
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"
    # rows that differ in an unplotted parameter are not averaged silently
    assert main(["plot", str(tmp_path / "o"), "--x", "workload.rate", "--y", "latency_mean_us"]) == 2
    assert "differ in cluster.nodes" in capsys.readouterr().err
    assert (
        main(
            [
                "plot",
                str(tmp_path / "o" / "results.csv"),
                "--x",
                "workload.rate",
                "--y",
                "latency_mean_us",
                "--where",
                "cluster.nodes=2",
                "--out",
                str(tmp_path / "f.pdf"),
            ]
        )
        == 0
    )
    assert (tmp_path / "f.pdf").read_bytes()[:4] == b"%PDF"
    # a `fedsim run` results.csv: the case's key=value words are columns
    cfg = _base(tmp_path, "lookup_paths", params={"dt_entries": [16, 256], "locality": [0.0, 0.9]})
    assert main(["run", str(cfg), "--out", str(tmp_path / "lp")]) == 0
    assert (
        main(
            [
                "plot",
                str(tmp_path / "lp" / "results.csv"),
                "--x",
                "dt_entries",
                "--y",
                "lookup_path_share_1",
                "--hue",
                "locality",
            ]
        )
        == 0
    )
    assert list((tmp_path / "lp").glob("plot_*.png"))


def test_sweep_benchmark_prints_a_speedup_ratio():
    from fedsim.sweep_bench import main as bench

    lines: list[str] = []
    r = bench(["--quick"], out=lines.append)
    assert r.points == 16 and r.identical
    assert any("speed-up:" in line and "x on 2 workers" in line for line in lines)
