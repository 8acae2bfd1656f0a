"""Bloom summary speed: the batched calls against the same work key by key.

Run ``python -m fedsim.summary_bench`` (a few seconds) or with ``--quick``
(a fraction of a second; checks the machinery, the ratio is then noise).

A node builds its summary from its whole local tree (FedFS section 2.2: about
300,000 directories in the paper's traces), so ``BloomSummary.add_many`` and
``contains_many`` hash and set bits for a whole batch in numpy instead of one
key at a time.  This benchmark measures, side by side in one run and on the
same keys and geometry (2^20 bits, 5 hashes by default, each layout), the
batched calls and the per-key loop (``add`` / ``in``), takes the best of
``--repeats`` runs of each, checks that both left identical bits and reported
the same collisions, and prints the speed-up.  It replaces a wall-clock
assertion that used to sit in ``tests/test_bloom_summary.py``: a timing bound
in a test either flakes on a loaded machine or is too loose to catch anything;
a ratio measured in one run is what says whether batching still pays.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from fedsim.protocol.summary import LAYOUTS, BloomSummary


@dataclass(frozen=True, slots=True)
class LayoutResult:
    layout: str
    keys: int
    queries: int
    per_key_s: float
    batched_s: float
    identical: bool

    @property
    def speedup(self) -> float:
        return self.per_key_s / self.batched_s if self.batched_s > 0 else float("nan")


def directory_keys(n: int) -> list[str]:
    """Distinct directory-like pathnames, as a node's tree gives them."""
    return [f"/bench/home/u{i % 97}/proj{i // 97}/src{i}" for i in range(n)]


def _per_key(summary: BloomSummary, keys: Sequence[str], queries: Sequence[str]) -> tuple[list[bool], list[bool]]:
    added = [summary.add(k) for k in keys]
    found = [q in summary for q in queries]
    return added, found


def _batched(summary: BloomSummary, keys: Sequence[str], queries: Sequence[str]) -> tuple[list[bool], list[bool]]:
    return summary.add_many(keys).tolist(), summary.contains_many(queries).tolist()


def measure(layout: str, n_keys: int, n_queries: int, bits: int, hashes: int, repeats: int) -> LayoutResult:
    """Best-of-``repeats`` seconds for each way, interleaved so that a burst
    of load on the machine hits both alike."""
    keys = directory_keys(n_keys)
    queries = keys[:n_queries]
    best = {"per_key": float("inf"), "batched": float("inf")}
    outputs: dict[str, tuple[bytes, list[bool], list[bool]]] = {}
    for _ in range(repeats):
        for name, fn in (("per_key", _per_key), ("batched", _batched)):
            summary = BloomSummary(bits, hashes, layout)
            t0 = time.perf_counter()
            added, found = fn(summary, keys, queries)
            best[name] = min(best[name], time.perf_counter() - t0)
            outputs[name] = (summary.to_bytes(), added, found)
    identical = outputs["per_key"] == outputs["batched"] and all(outputs["batched"][2])
    return LayoutResult(layout, n_keys, n_queries, best["per_key"], best["batched"], identical)


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = print) -> list[LayoutResult]:
    ap = argparse.ArgumentParser(
        prog="python -m fedsim.summary_bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--keys", type=int, default=300_000, help="keys inserted (default 300,000: the paper's tree)")
    ap.add_argument("--queries", type=int, default=100_000, help="membership queries (default 100,000)")
    ap.add_argument("--bits", type=int, default=1 << 20, help="summary bits (default 2^20)")
    ap.add_argument("--hashes", type=int, default=5, help="hash functions (default 5)")
    ap.add_argument("--layout", choices=(*LAYOUTS, "all"), default="all")
    ap.add_argument("--repeats", type=int, default=3, help="runs of each way; the best counts (default 3)")
    ap.add_argument("--quick", action="store_true", help="20,000 keys, one run: checks the machinery only")
    args = ap.parse_args(argv)
    if args.quick:
        args.keys, args.queries, args.repeats = 20_000, 10_000, 1
    layouts = LAYOUTS if args.layout == "all" else (args.layout,)
    out(
        f"Bloom summary, {args.bits} bits, {args.hashes} hashes: add {args.keys} keys, then query "
        f"{min(args.queries, args.keys)} of them; best of {args.repeats}"
    )
    out(f"{'layout':<12} {'per key s':>10} {'batched s':>10} {'keys/s batched':>15} {'speed-up':>9}  same result")
    results = []
    for layout in layouts:
        r = measure(layout, args.keys, min(args.queries, args.keys), args.bits, args.hashes, args.repeats)
        results.append(r)
        rate = (r.keys + r.queries) / r.batched_s if r.batched_s > 0 else float("nan")
        out(
            f"{layout:<12} {r.per_key_s:10.3f} {r.batched_s:10.3f} {rate:15,.0f} {r.speedup:8.1f}x  "
            f"{'yes' if r.identical else 'NO'}"
        )
    ratios = np.array([r.speedup for r in results])
    out(f"speed-up of the batched calls over the per-key loop: {ratios.min():.1f}x-{ratios.max():.1f}x")
    return results


if __name__ == "__main__":
    results = main()
    sys.exit(0 if all(r.identical for r in results) else 1)
