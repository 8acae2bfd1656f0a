"""The validation study (experiments.validation) as CI's regression check, and its parts.

``test_small_validation_predicts_this_machine`` runs the small validation
(configs/validation/small.yaml: real agents on TCP loopback beside the
calibrated simulator), calibrating fresh into the test's directory, and
fails when the simulator's predictions drift far from the measurements.  Its
bounds are much wider than the study's targets (15 % latency, 20 %
throughput): a 2-core machine shared with other work measures that work too,
so the check catches a broken model or a broken calibration, not noise.  The
guest's load average does not show all of that work: this VM's second vCPU
was worth from 0.2 to 1 core of the first's speed over minutes (two CPU-bound
processes side by side), and a run on a busy host over-predicts every
concurrent point.  So the check is tried up to ``ATTEMPTS`` times, a fresh
calibration each, and fails only when every attempt misses; it then prints
each attempt's whole report, load average included.

The other tests need no agents: the summary's arithmetic, and the checks a
calibrated profile goes through when a config loads it.
"""

from __future__ import annotations

import platform
from pathlib import Path

import pytest
import yaml

from experiments import get_study
from experiments.validation import Outcome, Params, Point, cache_path, report, run, run_points, saturated, summarize
from fedsim.calibration import ProfileElsewhere
from fedsim.config import load, validate_params
from fedsim.schema import ConfigError

ROOT = Path(__file__).resolve().parents[1]
SMALL = ROOT / "configs" / "validation" / "small.yaml"

#: the regression bounds: mean absolute relative errors, and any one point's factor
LATENCY_MARE = 0.5
THROUGHPUT_MARE = 0.6
FACTOR = 3.0
#: runs of the whole check (a fresh calibration each): a run may overlap a burst of other work (another test
#: worker, a neighbour on the host) that the calibration or the measurement takes for the agents' cost
ATTEMPTS = 3


def _misses(out: Outcome) -> list[str]:
    """What in ``out`` is past the regression bounds (nothing: it passes)."""
    summary = summarize(out.points)
    misses = []
    if summary.get("latency_mare", 0.0) > LATENCY_MARE:
        misses.append(f"latency MARE {summary['latency_mare']:.2f} > {LATENCY_MARE}")
    if summary.get("throughput_mare", 0.0) > THROUGHPUT_MARE:
        misses.append(f"throughput MARE {summary['throughput_mare']:.2f} > {THROUGHPUT_MARE}")
    for p in out.points:
        factor = max(p.predicted / p.measured, p.measured / p.predicted)
        if factor > FACTOR:
            misses.append(f"{p.workload} {p.agents} agents {p.point}: off by {factor:.1f}x > {FACTOR}x")
    return misses


# ----------------------------------------------------------------------------------------- with agents
@pytest.mark.serial  # alone (./dev.sh test's second phase): another worker's load would be measured too
def test_small_validation_predicts_this_machine(tmp_path):
    cfg = load(SMALL)
    params = validate_params(cfg, Params, str(SMALL))
    assert isinstance(params, Params)
    if params.agent_dir and not Path(params.agent_dir).is_dir():
        params = params.model_copy(update={"agent_dir": ""})  # no /dev/shm: the system's temporary directory
    tried = []
    for attempt in range(1, ATTEMPTS + 1):
        cache = tmp_path / f"calibration{attempt}"
        run_params = params.model_copy(update={"cache": str(cache), "profile": None})
        out = run_points(cfg, run_params, lambda s: None)
        table = report(out, summarize(out.points))
        assert cache_path(run_params).is_relative_to(cache) and cache_path(run_params).exists(), "calibrated elsewhere"
        assert {(p.workload, p.agents) for p in out.points} >= {
            (wl, n) for wl in ("latency", "sfs97", "postmark api") for n in (1, 2)
        }, table
        assert all(p.measured > 0 and p.predicted > 0 for p in out.points), table
        misses = _misses(out)
        if not misses:
            return
        tried.append(f"attempt {attempt}: " + "; ".join(misses) + "\n" + table)
    pytest.fail("the simulator's predictions are past the regression bounds in every attempt\n\n" + "\n\n".join(tried))


def test_the_study_is_registered_and_both_configs_validate():
    assert get_study("validation").run is run
    for name in ("small.yaml", "tcp.yaml"):
        path = ROOT / "configs" / "validation" / name
        cfg = load(path)
        assert cfg.study == "validation"
        validate_params(cfg, Params, str(path))


# ----------------------------------------------------------------------------------------- the summary
def _p(workload: str, agents: int, measured: float, predicted: float, point: str = "x", sat: bool = False) -> Point:
    return Point(workload, agents, point, measured, predicted, "us" if workload == "latency" else "ops/s", sat)


def test_an_exact_prediction_has_no_error():
    pts = [_p("latency", 1, 120.0, 120.0), _p("postmark api", 1, 900.0, 900.0)]
    assert pts[0].error == 0.0
    m = summarize(pts)
    assert m["latency_mare"] == 0.0 and m["throughput_mare"] == 0.0


def test_errors_are_relative_and_their_mean_absolute():
    pts = [_p("latency", 1, 100.0, 110.0), _p("latency", 2, 200.0, 150.0)]
    assert pts[0].error == pytest.approx(0.10) and pts[1].error == pytest.approx(-0.25)
    assert summarize(pts)["latency_mare"] == pytest.approx(0.175)
    assert "throughput_mare" not in summarize(pts)


def test_saturated_points_leave_the_throughput_error_but_set_the_saturation_error():
    pts = [
        _p("sfs97", 1, 1000.0, 1100.0, "1 clients"),
        _p("sfs97", 1, 2000.0, 3000.0, "2 clients", sat=True),
        _p("sfs97", 1, 1900.0, 2500.0, "4 clients", sat=True),
    ]
    m = summarize(pts)
    assert m["throughput_mare"] == pytest.approx(0.10)  # the one point below saturation
    assert m["sfs97_saturation_error.1"] == pytest.approx(3000.0 / 2000.0 - 1)  # best predicted / best measured


def test_saturation_starts_at_the_first_rate_near_the_best_and_stays():
    assert saturated([]) == [] and saturated([5000.0]) == [False]
    assert saturated([1000.0, 1500.0, 2000.0, 2050.0]) == [False, False, True, True]
    # past the peak a rate that falls below 90 % of the best is still beyond saturation
    assert saturated([9000.0, 20000.0, 13000.0]) == [False, True, True]
    assert saturated([12000.0, 9000.0, 8000.0]) == [False, True, True]  # one client was the most
    assert saturated([12000.0, 12500.0]) == [False, True]


def test_scaling_error_says_which_way_the_model_scales_wrong():
    over = [_p("postmark api", 1, 100.0, 100.0), _p("postmark api", 2, 150.0, 200.0)]
    under = [_p("postmark api", 1, 100.0, 100.0), _p("postmark api", 2, 200.0, 150.0)]
    exact = [_p("postmark api", 1, 100.0, 80.0), _p("postmark api", 2, 180.0, 144.0)]
    high, low = summarize(over)["scaling_error.postmark api.2"], summarize(under)["scaling_error.postmark api.2"]
    assert high > 0 and high == pytest.approx(2.0 / 1.5 - 1)  # the model scales better than the agents
    assert low < 0 and low == pytest.approx(1.5 / 2.0 - 1)  # worse
    # a prediction 20 % low at every size scales exactly
    assert summarize(exact)["scaling_error.postmark api.2"] == pytest.approx(0.0)
    assert "scaling_error.postmark api.1" not in summarize(over)


def test_the_report_names_the_suspect_of_a_miss_and_the_load():
    from experiments.validation import SUSPECTS

    out = Outcome([_p("latency", 1, 100.0, 100.0), _p("sfs97", 1, 1000.0, 2000.0)], load=[0.5, 1.25],
                  capacity=[1.9, 1.2])  # fmt: skip
    text = report(out, summarize(out.points))
    assert SUSPECTS["sfs97"] in text and SUSPECTS["latency"] not in text
    assert "load average 0.50 before and 1.25 after" in text
    assert "parallel capacity: 1.90 cores' worth before and 1.20 after" in text
    assert "MISSED" in text


def test_parallel_capacity_is_at_most_the_cores():
    import os

    from experiments.validation import parallel_capacity

    cap = parallel_capacity(200_000)
    assert 0.3 < cap < (os.cpu_count() or 1) * 1.3


# ----------------------------------------------------------------------------------------- the profile
def test_the_calibration_prices_every_request_and_local_operation_a_name_operation_uses(calibrated_profile):
    """Beyond the requests a client's call sends, the profile prices a directory's
    upkeep (the requests to a parent's manager), a handler that waits for the
    network, and the local operations the batches do not run (listdir by its
    size, rename, truncate, fsync, statfs): none is left to an assumption."""
    prof = yaml.safe_load(calibrated_profile.read_text())
    m, costs = prof["machine"], prof["storage"]["costs_us"]
    assert {"GetEntry", "AddEntry", "DelEntry"} <= set(m["dispatch_us"])
    assert m["wait_us"] >= 0.0
    assert {"listdir", "listdir_entry", "rename", "truncate", "fsync", "statfs"} <= set(costs)
    assert all(v >= 0.0 for v in costs.values())


def test_the_calibration_says_where_the_scheduler_placed_a_client_and_its_agent(calibrated_profile):
    """The placement microbenchmark pins a client and its agent to one core and to two, and leaves
    them free: the report names the placement the free run was nearer to, with both pinned costs."""
    import os

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one core: nothing to place")
    m = yaml.safe_load(calibrated_profile.read_text())["machine"]
    placed = m["placement"]
    assert set(placed) == {"free", "same core", "two cores"}
    assert all(v["cpu_per_call_us"] > 0 and v["wall_per_call_us"] > 0 for v in placed.values())
    text = (calibrated_profile.parent / "calibration.txt").read_text()
    assert "placement: one client thread calling its agent" in text
    assert "the scheduler kept the client and its agent on" in text
    assert len(os.sched_getaffinity(0)) >= 2  # this process (which calibrated) is not left pinned to one core


def test_the_placement_sentence_names_the_nearer_pinning():
    from fednode.tools.calibrate import placement_mode

    rows = {"same core": {"cpu_per_call_us": 44.0}, "two cores": {"cpu_per_call_us": 80.0}}
    assert "on one core while" in placement_mode({**rows, "free": {"cpu_per_call_us": 50.0}})
    assert "on two cores while" in placement_mode({**rows, "free": {"cpu_per_call_us": 75.0}})
    assert "1.82x apart" in placement_mode({**rows, "free": {"cpu_per_call_us": 75.0}})
    assert "not measured" in placement_mode(rows)


def _config(tmp_path: Path, machine: dict) -> Path:
    (tmp_path / "profile.yaml").write_text(yaml.safe_dump({"network": {"L_us": 2.0, "o_us": 10.0}, "machine": machine}))
    path = tmp_path / "sim.yaml"
    path.write_text(yaml.safe_dump({"study": "simulate", "calibration": "profile.yaml"}))
    return path


def test_a_profile_from_another_host_is_used_with_a_warning_naming_both(tmp_path):
    path = _config(tmp_path, {"o_us": 10.0, "L_us": 2.0, "measured_on": {"host": "other", "cores": 64}})
    with pytest.warns(ProfileElsewhere) as rec:
        cfg = load(path)
    text = str(rec[0].message)
    assert "host other" in text and "cores 64" in text  # theirs
    assert f"host {platform.node()}" in text  # ours
    assert "fednode calibrate" in text
    assert cfg.machine.model == "calibrated" and cfg.machine.o_us == 10.0


def test_a_profile_of_this_host_loads_without_a_warning(tmp_path, recwarn):
    from fedsim.calibration import this_machine

    cfg = load(_config(tmp_path, {"o_us": 10.0, "L_us": 2.0, "measured_on": this_machine()}))
    assert cfg.machine.model == "calibrated"
    assert not [w for w in recwarn if issubclass(w.category, ProfileElsewhere)]


def test_a_calibrated_machine_without_o_us_asks_for_fednode_calibrate(tmp_path):
    path = _config(tmp_path, {"model": "calibrated", "L_us": 2.0, "cores": 2})
    with pytest.raises(ConfigError, match="fednode calibrate") as ei:
        load(path)
    assert "o_us" in str(ei.value)


# ----------------------------------------------------------------------------------------- over verbs
VERBS = ROOT / "configs" / "validation" / "verbs.yaml"
GUEST_SCRIPT = """
import json
from experiments.validation import Params, report, run_points, summarize
from fedsim.config import load, validate_params
cfg = load("configs/validation/verbs.yaml")
out = run_points(cfg, validate_params(cfg, Params, "verbs.yaml"), lambda s: print(s, flush=True))
text = report(out, summarize(out.points))
print(text)
open("/out/verbs.txt", "w").write(text + "\\n")
json.dump([[p.workload, p.agents, p.point, p.measured, p.predicted] for p in out.points], open("/out/points.json", "w"))
"""


@pytest.mark.serial  # a QEMU guest under TCG takes both cores for a minute or two
def test_the_latency_table_over_verbs_in_the_soft_roce_guest(tmp_path):
    """The same table over RDMA verbs (rxe0 in the Soft-RoCE guest): the guest calibrates
    ``fednode calibrate --transport verbs`` itself and times Table 2's cells on 1 and 2 agents
    beside the prediction from that profile.  Under emulation everything is about 100x slower
    and noisier than native, so the bound is only the gross one of the TCP check."""
    import json

    from fednode.tools.testbed import rxe
    from tests.test_testbed import _require_testbed

    _require_testbed()
    log, out = tmp_path / "guest.log", tmp_path / "out"
    rc = rxe.run(["python3", "-c", GUEST_SCRIPT], log=log, out=out, timeout=2400)
    text = log.read_text()
    assert rc == 0, f"the guest's validation failed (exit status {rc}); see {log}:\n" + text[-4000:]
    table = (out / "verbs.txt").read_text()
    points = [Point(w, n, pt, m, p, "us") for w, n, pt, m, p in json.loads((out / "points.json").read_text())]
    assert {p.agents for p in points} == {1, 2} and all(p.workload == "latency" for p in points), table
    assert all(p.measured > 0 and p.predicted > 0 for p in points), table
    outcome = Outcome(points=points)
    misses = [m for m in _misses(outcome) if not m.startswith("throughput")]
    assert not misses, "over verbs, past the regression bounds: " + "; ".join(misses) + "\n" + table


def test_the_report_puts_a_repeated_points_spread_beside_its_error():
    inside = Point("sfs97", 1, "2 clients", 100.0, 105.0, "ops/s", runs=(90.0, 100.0, 110.0))
    outside = Point("sfs97", 1, "4 clients", 100.0, 150.0, "ops/s", runs=(95.0, 100.0, 104.5))
    assert inside.spread == pytest.approx(110.0 / 90.0 - 1) and _p("latency", 1, 1.0, 1.0).spread is None
    text = report(Outcome([inside, outside], load=[0.1, 0.1]), summarize([inside, outside]))
    assert "22% (in)" in text and "10%" in text and "10% (in)" not in text
    assert "1 of 2 predicted within the range the machine gave across repeats" in text


PLACED = {"free": {"cpu_per_call_us": 76.0, "wall_per_call_us": 84.0},
          "same core": {"cpu_per_call_us": 45.0, "wall_per_call_us": 45.0},
          "two cores": {"cpu_per_call_us": 79.0, "wall_per_call_us": 85.0}}  # fmt: skip


def test_the_report_says_which_placement_each_point_was_measured_in():
    out = Outcome([_p("latency", 1, 1.0, 1.0)], load=[0.1, 0.1], placed=PLACED)
    out.points[0].placed = "one core"
    text = report(out, summarize(out.points))
    assert "calibration: the scheduler kept the client and its agent on two cores" in text
    assert "one core" in text.splitlines()[3] and "placed" in text.splitlines()[1]


def test_a_point_placed_otherwise_than_the_calibration_moves_each_waking_receipt_by_half_the_gap():
    from experiments.validation import placement_correction

    # calibrated on two cores (free 76 us is nearer 79 than 45): a probe on one core takes (79 - 45) / 2 off
    assert placement_correction(PLACED, 47.0) == ("one core", pytest.approx(-17.0))
    assert placement_correction(PLACED, 80.0) == ("two cores", 0.0)
    on_one = {**PLACED, "free": {"cpu_per_call_us": 46.0, "wall_per_call_us": 46.0}}
    assert placement_correction(on_one, 80.0) == ("two cores", pytest.approx(17.0))
    assert placement_correction(on_one, 44.0) == ("one core", 0.0)
    assert placement_correction({"free": PLACED["free"]}, 47.0) == ("", 0.0)


def test_handoff_us_prices_only_receipts_that_wake_their_process():
    from fedsim.machine import Machine, MachineParams

    m = Machine(MachineParams(cores=2, handoff_us=-5.0, wake_us=2.0), 2)
    st = m.node(0)
    assert m.book_receipt(st, 0.0, 8.0) == pytest.approx(3.0)  # woken: 8 - 5
    assert m.book_receipt(st, 1.0, 8.0) == pytest.approx(9.0)  # busy until 3: 8 - 2, from 3
    assert m.book_receipt(st, 100.0, 4.0) == pytest.approx(100.0)  # never below nothing
    plus = Machine(MachineParams(cores=2, handoff_us=5.0), 2)
    assert plus.book_receipt(plus.node(0), 0.0, 8.0) == pytest.approx(13.0)


def test_the_microbenchmark_check_simulates_each_bench_with_the_profiles_fitted_model():
    from fedsim.calibration import microbench_check
    from fedsim.machine import MachineParams, chain_run, contention_bench, fan_in_bench

    mach = {"o_us": 6.0, "call_us": 20.0, "dispatch_us": {"*": 20.0}, "api_us": {"*": 8.0},
            "client_us": {"*": 18.0}, "cores": 2, "cold_us": 9.0, "wake_us": 3.0, "capacity": 1.6}  # fmt: skip
    p = MachineParams.of(mach)

    def row(run: tuple[float, float, float]) -> dict[str, float]:
        return {"cpu_per_call_us": run[0], "calls_per_s": run[1], "client_cpu_per_call_us": run[2]}

    # "measured" here is what the model itself gives: every row must then agree exactly
    mach["contention"] = {k: row(contention_bench(p, k)) for k in (1, 3)}
    mach["fan_in"] = {2: row(fan_in_bench(p, 2))}
    mach["chain"] = {k: row(chain_run(p, k)) for k in (1, 4)}
    rows = microbench_check(mach)
    assert [(b, k) for b, k, *_ in rows] == [("contention", 1), ("contention", 3), ("fan_in", 2), ("chain", 1),
                                             ("chain", 4)]  # fmt: skip
    for _b, _k, mc, pc, mr, pr, ml, pl in rows:
        assert pc == pytest.approx(mc) and pr == pytest.approx(mr) and pl == pytest.approx(ml) and 0 < pl < pc
    # and the refills are priced: four agents in turn on two cores cost more per call than one
    chain = {k: pc for b, k, _mc, pc, *_ in rows if b == "chain"}
    assert chain[4] > chain[1]
    text = report(Outcome([_p("latency", 1, 1.0, 1.0)], load=[0.1, 0.1], bench=rows), {})
    assert "fitted on" in text and "chain" in text
