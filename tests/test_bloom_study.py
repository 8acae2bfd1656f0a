"""Tests for experiments.bloom_summary, the FedFS section 2.2 Bloom summary study."""

from __future__ import annotations

import math
import re

import pytest
from pydantic import ValidationError

from experiments.bloom_summary import (
    PAPER_BITS,
    PAPER_COUNTS,
    PAPER_INVALID,
    PAPER_VALID,
    Params,
    chi2_sf,
    make_keys,
    measure,
)
from fedsim.protocol.summary import expected_fp_rate

SMALL = Params(bits=1 << 14, valid=3000, invalid=2000)
# The paper's load (keys per bit) at 1/16 of its size: rates stay, counts shrink 16x.
SCALE = 16
SCALED = Params(bits=PAPER_BITS // SCALE, valid=PAPER_VALID // SCALE, invalid=PAPER_INVALID // SCALE)


def as_dict(rows):
    return {(case, metric): value for case, metric, value in rows}


def test_same_seed_gives_identical_rows_and_report():
    rows_a, text_a = measure(SMALL, seed=7)
    rows_b, text_b = measure(SMALL, seed=7)
    assert rows_a == rows_b
    assert text_a == text_b
    rows_c, _ = measure(SMALL, seed=8)
    assert rows_c != rows_a


def test_rows_are_tidy_and_cover_every_k_and_layout():
    rows, _ = measure(SMALL, seed=1)
    assert all(isinstance(c, str) and isinstance(m, str) and isinstance(v, float) for c, m, v in rows)
    values = as_dict(rows)
    for k in SMALL.hashes:
        for layout in SMALL.layouts:
            case = f"k={k} layout={layout}"
            for metric in (
                "collisions",
                "false_positives",
                "theory_collisions",
                "theory_false_positives",
                "paper_collisions",
                "paper_false_positives",
            ):
                assert (case, metric) in values
            assert values[case, "paper_collisions"] == PAPER_COUNTS[k][0]
            assert values[case, "paper_false_positives"] == PAPER_COUNTS[k][1]
    assert values["keys", "valid"] == SMALL.valid
    assert values["keys", "invalid"] == SMALL.invalid


def test_report_names_the_layout_whose_theory_fits_the_paper():
    rows, text = measure(SMALL, seed=1)
    match = re.search(r"best fit: (shared|per_hash|partitioned)\b", text)
    assert match, text
    best = match.group(1)
    values = as_dict(rows)
    flagged = [lay for lay in SMALL.layouts if values[f"fit layout={lay}", "best_fit"] == 1.0]
    assert flagged == [best]
    scores = {lay: values[f"fit layout={lay}", "chi2_theory_vs_paper"] for lay in SMALL.layouts}
    assert best == min(scores, key=scores.__getitem__)
    # The numbers single out one array per hash function: shared/partitioned predict ~7%.
    assert best == "per_hash"
    assert values["fit layout=per_hash", "p_theory_vs_paper"] > 0.05
    assert values["fit layout=shared", "p_theory_vs_paper"] < 1e-6
    for k in SMALL.hashes:
        assert f"{k}  per_hash" in text and f"{k}  shared" in text


def test_report_only_considers_the_requested_layouts():
    _, text = measure(Params(bits=1 << 12, valid=500, invalid=300, layouts=["shared"]), seed=3)
    assert "best fit: shared" in text
    assert "NOT consistent" in text  # the only candidate does not fit the paper


def test_without_paper_figures_for_k_nothing_is_fitted():
    rows, text = measure(Params(bits=1 << 12, valid=500, invalid=300, hashes=[4]), seed=3)
    assert "nothing to compare" in text
    assert not any(case.startswith("fit") for case, _, _ in rows)
    assert not any(metric.startswith("paper") for _, metric, _ in rows)


def test_scaled_down_paper_load_reproduces_the_paper_only_with_per_hash():
    rows, _ = measure(SCALED, seed=2)
    values = as_dict(rows)
    n, q = SCALED.valid, SCALED.invalid
    # shared: ~7% false positives, far above the paper's 0.44%
    shared_rate = values["k=3 layout=shared", "false_positives"] / q
    theory = expected_fp_rate(n, SCALED.bits, 3, "shared")
    assert theory == pytest.approx(0.0695, abs=0.002)
    assert abs(shared_rate - theory) < 5 * math.sqrt(theory / q) + 0.01
    # per_hash: the paper's rates, scaled to this many keys, within Poisson error
    for k, (paper_coll, paper_fp) in PAPER_COUNTS.items():
        fp = values[f"k={k} layout=per_hash", "false_positives"]
        expected_fp = paper_fp * q / PAPER_INVALID
        assert abs(fp - expected_fp) < 5 * math.sqrt(expected_fp) + 2
        coll = values[f"k={k} layout=per_hash", "collisions"]
        theory_coll = values[f"k={k} layout=per_hash", "theory_collisions"]
        assert abs(coll - theory_coll) < 5 * math.sqrt(theory_coll) + 2
        assert theory_coll == pytest.approx(paper_coll / SCALE, rel=0.5, abs=1)
        assert values[f"k={k} layout=shared", "false_positives"] > 10 * expected_fp


def test_full_size_default_run_matches_the_paper_for_per_hash():
    rows, text = measure(Params(), seed=1)
    values = as_dict(rows)
    assert values["keys", "valid"] == PAPER_VALID
    assert values["keys", "invalid"] == PAPER_INVALID
    assert 35 <= values["keys", "mean_path_length"] <= 45  # the paper's ~40 characters
    coll3 = values["k=3 layout=per_hash", "collisions"]
    fp3 = values["k=3 layout=per_hash", "false_positives"]
    assert abs(coll3 - 208) < 5 * math.sqrt(208)
    assert abs(fp3 - 477) < 5 * math.sqrt(477)
    assert values["k=5 layout=per_hash", "false_positives"] < 40
    assert values["k=3 layout=shared", "false_positives"] > 10 * 477
    assert "measured X^2" in text
    assert values["fit layout=per_hash", "chi2_measured_vs_paper"] < 20


def test_synthetic_keys_form_a_directory_tree_with_distinct_valid_and_invalid_names():
    params = Params(valid=20_000, invalid=10_000)
    valid, invalid, depths = make_keys(params, seed=5)
    assert len(valid) == 20_000 and len(set(valid)) == 20_000
    assert len(invalid) == 10_000 and len(set(invalid)) == 10_000
    existing = set(valid)
    assert existing.isdisjoint(invalid)
    for path in valid + invalid:
        assert path.startswith("/") and "//" not in path and not path.endswith("/")
    # every directory's parent exists (or is "/"); invalid keys are siblings of real dirs
    for path in valid + invalid:
        parent = path.rsplit("/", 1)[0]
        assert parent == "" or parent in existing
    assert [p.count("/") for p in valid] == depths
    assert sum(depths[: params.top_dirs]) == params.top_dirs  # the top-level directories
    lengths = [len(p) for p in valid]
    assert 35 <= sum(lengths) / len(lengths) <= 45
    assert len({len(p.rsplit("/", 1)[1]) for p in valid}) > 5  # names of varying length
    assert make_keys(params, seed=5) == (valid, invalid, depths)
    assert make_keys(params, seed=6)[0] != valid


@pytest.mark.parametrize(
    "bad",
    [
        {"bits": 0},
        {"valid": -1},
        {"invalid": 0},
        {"hashes": []},
        {"hashes": [0]},
        {"hashes": [3, 3]},
        {"layouts": ["bogus"]},
        {"layouts": []},
        {"bits": 2, "hashes": [3], "layouts": ["partitioned"]},
        {"colour": "blue"},
        {"valid": 10, "top_dirs": 11},
        {"mean_depth": 1.0},
    ],
)
def test_params_reject_invalid_values(bad):
    with pytest.raises(ValidationError):
        Params(**bad)


def test_chi2_survival_function_matches_known_values():
    assert chi2_sf(0.0, 4) == 1.0
    assert chi2_sf(9.4877, 4) == pytest.approx(0.05, abs=1e-4)
    assert chi2_sf(5.9915, 2) == pytest.approx(0.05, abs=1e-4)
    assert chi2_sf(1e5, 4) == 0.0
    with pytest.raises(ValueError):
        chi2_sf(1.0, 3)
