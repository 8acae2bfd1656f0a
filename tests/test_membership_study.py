"""The ``membership`` study (experiments.membership): measured movement of
manager state on a join and a leave beside the theory, deterministic."""

from __future__ import annotations

import pytest

import experiments.membership  # noqa: F401  (registers the study whatever the installed metadata)
from experiments.membership import theory
from fedsim.config import ConfigError, load
from fedsim.results import to_csv
from fedsim.studies import run_study

CONFIG = "configs/fedfs/membership.yaml"
SMALL = ["params.nodes=[8,24]", "params.names_per_node=8"]


def _values(result):
    return {(r.case, r.metric): r.value for r in result.rows}


def test_the_study_measures_the_theory_and_is_deterministic():
    cfg = load(CONFIG, SMALL)
    a = run_study(cfg, CONFIG)
    b = run_study(cfg, CONFIG)
    assert to_csv("membership", cfg.seed, a.rows) == to_csv("membership", cfg.seed, b.rows)
    assert a.report == b.report and "theory" in a.report
    v = _values(a)
    for h in ("mod_n", "ring"):
        for n in (8, 24):
            for e in ("join", "leave"):
                case = f"hashing={h} nodes={n} event={e}"
                assert v[(case, "theory_share")] == theory(h, n)
                assert abs(v[(case, "dt_moved_share")] - theory(h, n)) < 0.1, case
                assert v[(case, "dt_entries")] == n * 8
            join = f"hashing={h} nodes={n} event=join"
            assert v[(join, "dt_handed_off")] == v[(join, "dt_moved")]  # exactly what the hashing moved
    # mod-N moves nearly all, the ring one member's share; messages follow
    assert v[("hashing=mod_n nodes=24 event=join", "vds_dropped_share")] > 0.8
    assert v[("hashing=ring nodes=24 event=join", "vds_dropped_share")] < 0.2
    mod_n, ring = (v[(f"hashing={h} nodes=24 event=join", "messages")] for h in ("mod_n", "ring"))
    assert mod_n > 3 * ring
    other_seed = run_study(load(CONFIG, [*SMALL, "seed=2"]), CONFIG)
    assert other_seed.rows != a.rows


def test_bad_params_are_config_errors():
    with pytest.raises(ConfigError, match=r"params\.names_per_node"):
        run_study(load(CONFIG, ["params.names_per_node=0"]), CONFIG)
    with pytest.raises(ValueError, match="unknown hashing 'md5'"):
        run_study(load(CONFIG, ["params.hashings=[md5]"]), CONFIG)
