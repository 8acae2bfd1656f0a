"""Tests for fedsim.protocol.summary.BloomSummary, the FedFS directory-tree summary."""

from __future__ import annotations

import copy
import math
import os
import pickle
import subprocess
import sys
from pathlib import Path

import mmh3
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedsim.protocol.summary import (
    LAYOUTS,
    BloomSummary,
    expected_collisions,
    expected_fp_rate,
)

ROOT = Path(__file__).resolve().parents[1]

keys_strategy = st.lists(st.text(max_size=24), max_size=60)


@st.composite
def geometries(draw: st.DrawFn) -> tuple[int, int, str]:
    layout = draw(st.sampled_from(LAYOUTS))
    hashes = draw(st.integers(1, 8))
    low = hashes if layout == "partitioned" else 1
    bits = draw(st.integers(low, 2048))
    return bits, hashes, layout


def make(geometry: tuple[int, int, str]) -> BloomSummary:
    bits, hashes, layout = geometry
    return BloomSummary(bits, hashes, layout)


def dir_keys(prefix: str, n: int) -> list[str]:
    """Deterministic distinct directory-like pathnames."""
    return [f"/{prefix}/home/u{i % 97}/proj{i // 97}/src{i}" for i in range(n)]


def set_bit_positions(summary: BloomSummary) -> set[int]:
    payload = summary.to_bytes()[28:-4]
    bits = np.unpackbits(np.frombuffer(payload, dtype=np.uint8), bitorder="little")
    return set(np.flatnonzero(bits).tolist())


def fp_standard_error(p: float, queries: int, summary: BloomSummary, n: int) -> float:
    """Standard error of a measured false-positive rate around its theoretical value.

    Two sources: the binomial spread of the queries, and the spread of the
    filter's own fill (each key set sets random bits), which moves the rate of
    the one filter we measure by ~ k * relative-sd(fill) (conservative).
    """
    size = summary.bits // summary.hashes if summary.layout == "partitioned" else summary.bits
    draws = summary.hashes if summary.layout == "shared" else 1
    fill = 1 - (1 - 1 / size) ** (draws * n)
    rel_fill = math.sqrt((1 - fill) / (fill * size))
    return math.sqrt(p * (1 - p) / queries + (p * summary.hashes * rel_fill) ** 2)


# -- membership -------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(geometry=geometries(), keys=keys_strategy, batched=st.booleans())
def test_inserted_keys_are_never_reported_absent(geometry, keys, batched):
    summary = make(geometry)
    if batched:
        summary.add_many(keys)
    else:
        for key in keys:
            summary.add(key)
    assert all(summary.may_contain(key) for key in keys)
    assert all(key in summary for key in keys)
    assert summary.contains_many(keys).all()
    assert summary.count == len(keys)


@settings(max_examples=150, deadline=None)
@given(
    geometry=geometries(),
    before=keys_strategy,
    keys=st.lists(st.sampled_from(["/a", "/a/b", "/c", "", "/é/ü"]) | st.text(max_size=8)),
)
def test_add_many_returns_and_sets_exactly_what_sequential_add_does(geometry, before, keys):
    one_by_one, batched = make(geometry), make(geometry)
    for key in before:  # start from a non-empty filter so "set before the batch" matters
        one_by_one.add(key)
        batched.add(key)
    expected = [one_by_one.add(key) for key in keys]
    got = batched.add_many(keys)
    assert got.dtype == np.bool_
    assert got.tolist() == expected
    assert batched == one_by_one
    assert batched.contains_many(keys + before).tolist() == [one_by_one.may_contain(k) for k in keys + before]


def test_add_reports_a_repeated_key_as_collision_and_counts_every_call():
    summary = BloomSummary(1 << 12, 3)
    assert summary.add("/usr/lib") is False
    assert summary.add("/usr/lib") is True
    assert summary.add_many(["/usr/bin", "/usr/bin", "/usr/lib"]).tolist() == [
        False,
        True,
        True,
    ]
    assert summary.count == 5


def test_empty_summary_contains_nothing():
    summary = BloomSummary(64, 2, "per_hash")
    assert not summary.may_contain("/")
    assert summary.contains_many([]).shape == (0,)
    assert summary.add_many([]).shape == (0,)
    assert summary.fill_ratio() == 0.0
    assert summary.expected_fp_rate() == 0.0


def test_keys_must_be_strings():
    summary = BloomSummary(64, 2)
    with pytest.raises(TypeError):
        summary.add(b"/usr")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        summary.add_many("/usr")  # a str is not a batch of keys
    with pytest.raises(TypeError):
        summary.contains_many([1, 2])  # type: ignore[list-item]


# -- hashing ------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_bits_set_follow_mmh3_double_hashing_for_each_layout(layout):
    bits, k, key = 1000, 4, "/home/alice/projects/fedfs"
    h1, h2 = mmh3.hash64(key.encode(), seed=0, x64arch=True, signed=False)
    if layout == "shared":
        expected = {(h1 + i * h2) % bits for i in range(k)}
    elif layout == "per_hash":
        expected = {i * bits + (h1 + i * h2) % bits for i in range(k)}
    else:
        size = bits // k
        expected = {i * size + (h1 + i * h2) % size for i in range(k)}
    summary = BloomSummary(bits, k, layout)
    summary.add(key)
    assert set_bit_positions(summary) == expected


def test_summary_bytes_are_identical_in_another_process_with_another_hash_seed():
    keys = dir_keys("x", 200)
    code = (
        "import sys; from fedsim.protocol.summary import BloomSummary\n"
        "s = BloomSummary(4096, 3, 'per_hash')\n"
        f"s.add_many({keys!r})\n"
        "sys.stdout.write(s.to_bytes().hex())\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    here = BloomSummary(4096, 3, "per_hash")
    here.add_many(keys)
    assert bytes.fromhex(out) == here.to_bytes()


# -- serialisation ------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(geometry=geometries(), keys=keys_strategy)
def test_to_bytes_from_bytes_round_trip_preserves_geometry_bits_and_count(geometry, keys):
    summary = make(geometry)
    summary.add_many(keys)
    data = summary.to_bytes()
    back = BloomSummary.from_bytes(data)
    assert back == summary
    assert (back.bits, back.hashes, back.layout, back.count) == (*geometry, len(keys))
    assert back.to_bytes() == data
    assert BloomSummary.from_bytes(bytearray(data)) == summary
    assert BloomSummary.from_bytes(memoryview(data)) == summary


def test_serialised_size_is_header_plus_packed_bits():
    assert len(BloomSummary(1 << 20, 3).to_bytes()) == 28 + (1 << 17) + 4
    assert len(BloomSummary(1 << 20, 3, "per_hash").to_bytes()) == 28 + 3 * (1 << 17) + 4
    assert len(BloomSummary(13, 2).to_bytes()) == 28 + 2 + 4


def test_every_truncation_is_rejected_with_value_error():
    summary = BloomSummary(100, 3, "partitioned")
    summary.add_many(dir_keys("t", 20))
    data = summary.to_bytes()
    for length in range(len(data)):
        with pytest.raises(ValueError):
            BloomSummary.from_bytes(data[:length])
    with pytest.raises(ValueError, match="truncated"):
        BloomSummary.from_bytes(data[:10])
    with pytest.raises(ValueError, match="wrong length"):
        BloomSummary.from_bytes(data[:-1])


def test_trailing_bytes_are_rejected():
    data = BloomSummary(64, 2).to_bytes()
    with pytest.raises(ValueError, match="trailing"):
        BloomSummary.from_bytes(data + b"\0")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    geometry=geometries(),
    keys=keys_strategy,
    where=st.integers(min_value=0),
    flip=st.integers(1, 255),
)
def test_any_garbled_byte_is_rejected_with_value_error(geometry, keys, where, flip):
    summary = make(geometry)
    summary.add_many(keys)
    data = bytearray(summary.to_bytes())
    data[where % len(data)] ^= flip
    with pytest.raises(ValueError):
        BloomSummary.from_bytes(bytes(data))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "truncated"),
        (b"XXXX" + bytes(40), "magic"),
        (b"FBSM\x09" + bytes(40), "version"),
        (b"FBSM\x01\x07" + bytes(40), "layout code"),
        (b"FBSM\x01\x00\x00\x00" + bytes(28), "bits must be a positive"),
    ],
)
def test_malformed_headers_are_rejected_with_a_message_naming_the_problem(data, message):
    with pytest.raises(ValueError, match=message):
        BloomSummary.from_bytes(data)


def test_corrupted_payload_is_reported_as_checksum_mismatch():
    data = bytearray(BloomSummary(256, 3).to_bytes())
    data[30] ^= 0x10
    with pytest.raises(ValueError, match="checksum"):
        BloomSummary.from_bytes(bytes(data))


def test_from_bytes_rejects_non_bytes():
    with pytest.raises(TypeError):
        BloomSummary.from_bytes("FBSM")  # type: ignore[arg-type]


def test_pickle_and_copy_round_trip():
    summary = BloomSummary(512, 3, "per_hash")
    summary.add_many(dir_keys("p", 50))
    assert pickle.loads(pickle.dumps(summary)) == summary
    assert copy.deepcopy(summary) == summary
    assert copy.copy(summary) == summary


# -- geometry -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bits", "hashes", "layout", "message"),
    [
        (0, 3, "shared", "bits must be a positive"),
        (-8, 3, "per_hash", "bits must be a positive"),
        (1024, 0, "shared", "hashes must be a positive"),
        (1024, -1, "partitioned", "hashes must be a positive"),
        (1024, 3, "bogus", "allowed layouts are shared, per_hash, partitioned"),
        (1024, 3, "Shared", "unknown layout"),
        (2, 3, "partitioned", "needs bits >= hashes"),
        (1024, 10_000, "shared", "at most"),
        (1 << 47, 8, "per_hash", "at most"),
    ],
)
def test_bad_geometry_is_rejected_with_value_error_saying_what_is_allowed(bits, hashes, layout, message):
    with pytest.raises(ValueError, match=message):
        BloomSummary(bits, hashes, layout)


@pytest.mark.parametrize(("bits", "hashes"), [(1.5, 3), (1024, "3"), (True, 3), (1024, None)])
def test_non_integer_geometry_is_a_type_error(bits, hashes):
    with pytest.raises(TypeError):
        BloomSummary(bits, hashes)


def test_geometry_properties_and_memory_per_layout():
    assert BloomSummary(1000, 4).total_bits == 1000
    assert BloomSummary(1000, 4, "per_hash").total_bits == 4000
    partitioned = BloomSummary(10, 3, "partitioned")
    assert partitioned.total_bits == 10
    partitioned.add_many(dir_keys("f", 500))
    assert partitioned.fill_ratio() == 1.0  # 9 reachable bits all set; bit 9 never counts


# -- union, copy, equality -------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_union_holds_the_keys_of_both_and_leaves_operands_alone(layout):
    a, b = BloomSummary(2048, 3, layout), BloomSummary(2048, 3, layout)
    a.add_many(dir_keys("a", 100))
    b.add_many(dir_keys("b", 100))
    a_before = a.copy()
    both = a.union(b)
    assert both.contains_many(dir_keys("a", 100) + dir_keys("b", 100)).all()
    assert a == a_before
    assert both.count == 200
    assert (a | b) == both
    a |= b
    assert a == both
    direct = BloomSummary(2048, 3, layout)
    direct.add_many(dir_keys("a", 100) + dir_keys("b", 100))
    assert direct == both


def test_union_of_different_geometries_is_rejected():
    base = BloomSummary(1024, 3, "shared")
    for other in (
        BloomSummary(2048, 3),
        BloomSummary(1024, 4),
        BloomSummary(1024, 3, "per_hash"),
    ):
        with pytest.raises(ValueError, match="same geometry"):
            base.union(other)
        with pytest.raises(ValueError, match="same geometry"):
            base |= other
    with pytest.raises(TypeError):
        base.union({"/a"})  # type: ignore[arg-type]


def test_copy_is_independent_and_equality_needs_same_bits_count_and_geometry():
    a = BloomSummary(256, 2)
    a.add("/x")
    b = a.copy()
    assert a == b
    b.add("/y")
    assert a != b
    assert a.count == 1 and b.count == 2
    same_bits_other_count = a.copy()
    same_bits_other_count.add("/x")  # sets no new bit, but is one more insertion
    assert same_bits_other_count != a
    assert BloomSummary(256, 2) != BloomSummary(256, 2, "per_hash")
    assert BloomSummary(256, 2) != "not a summary"
    with pytest.raises(TypeError):
        hash(a)


# -- theory -----------------------------------------------------------------------------


def test_expected_fp_rate_matches_the_closed_forms():
    m, k, n = 1 << 20, 3, 185_060
    shared = expected_fp_rate(n, m, k, "shared")
    assert shared == pytest.approx((1 - math.exp(-k * n / m)) ** k, rel=1e-5)
    assert shared == pytest.approx(0.0695, abs=5e-4)  # the ~7% that rules out "shared"
    assert expected_fp_rate(n, m, k, "per_hash") == pytest.approx((1 - (1 - 1 / m) ** n) ** k, rel=1e-9)
    assert expected_fp_rate(n, m, k, "partitioned") == pytest.approx((1 - (1 - 1 / (m // k)) ** n) ** k, rel=1e-9)
    assert expected_fp_rate(0, m, k, "shared") == 0.0
    assert expected_fp_rate(5, 1, 1, "shared") == 1.0


def test_expected_collisions_is_the_sum_of_fp_rates_before_each_insertion():
    for layout in LAYOUTS:
        direct = sum(expected_fp_rate(i, 300, 3, layout) for i in range(120))
        assert expected_collisions(120, 300, 3, layout) == pytest.approx(direct, rel=1e-12)
    assert expected_collisions(0, 300, 3) == 0.0
    with pytest.raises(ValueError):
        expected_collisions(-1, 300, 3)
    with pytest.raises(ValueError):
        expected_collisions(10, 300, 3, "bogus")


def test_method_expected_fp_rate_defaults_to_inserted_count():
    summary = BloomSummary(4096, 3, "per_hash")
    summary.add_many(dir_keys("c", 700))
    assert summary.expected_fp_rate() == expected_fp_rate(700, 4096, 3, "per_hash")
    assert summary.expected_fp_rate(10) == expected_fp_rate(10, 4096, 3, "per_hash")


@pytest.mark.parametrize(("layout", "n"), [("shared", 8000), ("partitioned", 8000), ("per_hash", 32000)])
def test_measured_false_positive_rate_and_collisions_agree_with_theory(layout, n):
    # n is chosen so every layout sits at ~2.2% false positives (per_hash has k times
    # the memory, so it needs k times the keys to get there).
    bits, k, queries = 1 << 16, 4, 100_000
    summary = BloomSummary(bits, k, layout)
    collisions = int(summary.add_many(dir_keys("valid", n)).sum())
    measured = float(summary.contains_many(dir_keys("invalid", queries)).mean())
    theory = summary.expected_fp_rate()
    assert 0.01 < theory < 0.05
    assert abs(measured - theory) < 4 * fp_standard_error(theory, queries, summary, n)
    expected = expected_collisions(n, bits, k, layout)
    # Poisson spread plus the same fill-state correlation: 5 standard errors.
    assert abs(collisions - expected) < 5 * math.sqrt(expected)
    assert summary.fill_ratio() == pytest.approx(theory ** (1 / k), rel=0.02)


def test_false_positive_rate_matches_pybloom_live_at_the_same_partitioned_geometry():
    pybloom_live = pytest.importorskip("pybloom_live")
    theirs = pybloom_live.BloomFilter(capacity=20_000, error_rate=0.05)
    k, slice_bits = theirs.num_slices, theirs.bits_per_slice
    ours = BloomSummary(k * slice_bits, k, "partitioned")
    valid, invalid = dir_keys("valid", 20_000), dir_keys("invalid", 40_000)

    their_collisions = sum(bool(theirs.add(key)) for key in valid)
    our_collisions = int(ours.add_many(valid).sum())
    their_fp = sum(key in theirs for key in invalid) / len(invalid)
    our_fp = float(ours.contains_many(invalid).mean())

    assert ours.fill_ratio() == pytest.approx(theirs.bitarray.count() / theirs.num_bits, rel=0.01)
    se = fp_standard_error(ours.expected_fp_rate(), len(invalid), ours, len(valid))
    assert abs(our_fp - their_fp) < 4 * math.sqrt(2) * se
    assert abs(our_fp - ours.expected_fp_rate()) < 4 * se
    expected = expected_collisions(len(valid), ours.bits, k, "partitioned")
    assert abs(our_collisions - their_collisions) < 5 * math.sqrt(2 * expected)


def test_add_many_at_a_whole_trees_scale_matches_theory_and_is_split_invariant():
    """300,000 keys (the paper's tree) in one batch: every key is found, the
    count, fill and collisions are what theory says, and the bits equal those
    of the same keys added in three batches.  How fast it is is measured by
    ``python -m fedsim.summary_bench`` beside the per-key loop, not here."""
    keys = dir_keys("speed", 300_000)
    summary = BloomSummary(1 << 20, 5, "per_hash")
    collisions = int(summary.add_many(keys).sum())
    assert summary.contains_many(keys[:100_000]).all() and summary.contains_many(keys[-1000:]).all()
    assert summary.count == 300_000
    expected = expected_collisions(300_000, 1 << 20, 5, "per_hash")
    assert abs(collisions - expected) < 5 * math.sqrt(expected)
    assert summary.fill_ratio() == pytest.approx(summary.expected_fp_rate() ** (1 / 5), rel=0.02)
    split = BloomSummary(1 << 20, 5, "per_hash")
    split_collisions = sum(int(split.add_many(keys[i : i + 100_000]).sum()) for i in range(0, 300_000, 100_000))
    assert split == summary and split_collisions == collisions


def test_summary_benchmark_measures_both_ways_side_by_side_and_they_agree():
    from fedsim.summary_bench import main as bench

    lines: list[str] = []
    results = bench(["--keys", "3000", "--queries", "1000", "--repeats", "1"], out=lines.append)
    assert [r.layout for r in results] == list(LAYOUTS)
    assert all(r.identical and r.per_key_s > 0 and r.batched_s > 0 for r in results)
    assert lines[-1].startswith("speed-up of the batched calls over the per-key loop: ")
