"""Sweep speed-up: the same 16-point sweep run serially and on a process pool.

Run ``python -m fedsim.sweep_bench`` (about a minute on a 2-core machine) or
``python -m fedsim.sweep_bench --quick`` (a few seconds; the ratio then mostly
measures pool start-up).

The sweep is FedFS Fig. 5 (``configs/sweeps/fedfs_fig5.yaml``: 2 node counts x
8 offered loads) with one seed, so 16 points, and ``workload.ops`` raised so a
point takes a second or two: long enough that starting the pool does not
dominate, as in a real sweep.  Both runs go through :func:`fedsim.sweep.run_sweep`
into fresh directories; serial is ``workers=1`` (every point in this process,
no pool), parallel is ``--workers`` processes.  The benchmark checks that both
wrote byte-identical ``results.csv`` files and prints the speed-up it measured.
The target on 2 cores is at least 1.7x; it is reported, not asserted (tests
assert behaviour, never wall-clock time).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from fedsim.schema import read_yaml
from fedsim.sweep import Sweep, parse_sweep, run_sweep

SWEEP = Path(__file__).resolve().parents[1] / "configs" / "sweeps" / "fedfs_fig5.yaml"


@dataclass(frozen=True, slots=True)
class BenchResult:
    points: int
    serial_s: float
    parallel_s: float
    workers: int
    identical: bool

    @property
    def speedup(self) -> float:
        return self.serial_s / self.parallel_s if self.parallel_s > 0 else float("nan")


def bench_sweep(ops: int) -> Sweep:
    """The Fig. 5 sweep, one seed, ``ops`` measured operations per point."""
    raw = read_yaml(SWEEP)
    raw["seeds"] = [1]
    return parse_sweep(raw, str(SWEEP), SWEEP.parent, [f"workload.ops={ops}", f"workload.warmup_ops={ops // 10}"])


def measure(ops: int, workers: int) -> BenchResult:
    sweep = bench_sweep(ops)
    with tempfile.TemporaryDirectory(prefix="fedsim-sweep-bench-") as tmp:
        serial = run_sweep(sweep, Path(tmp) / "serial", workers=1, progress=False)
        parallel = run_sweep(sweep, Path(tmp) / "parallel", workers=workers, progress=False)
        same = serial.results.read_bytes() == parallel.results.read_bytes()
        failed = serial.failed + parallel.failed
    if failed:
        raise RuntimeError(f"{failed} points failed; see the sweep ledger")
    return BenchResult(len(sweep.points), serial.elapsed_s, parallel.elapsed_s, workers, same)


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = print) -> BenchResult:
    ap = argparse.ArgumentParser(
        prog="python -m fedsim.sweep_bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--workers", type=int, default=2, help="processes of the parallel run (default 2)")
    ap.add_argument("--ops", type=int, default=18000, help="measured SFS97 operations per point")
    ap.add_argument("--quick", action="store_true", help="300 operations per point: checks the machinery only")
    args = ap.parse_args(argv)
    ops = 300 if args.quick else args.ops
    r = measure(ops, args.workers)
    out(f"sweep: {SWEEP.name}, {r.points} points, {ops} operations per point")
    out(f"serial (1 process):       {r.serial_s:7.2f} s  ({r.serial_s / r.points:.2f} s per point)")
    out(f"parallel ({r.workers} workers):     {r.parallel_s:7.2f} s")
    out(
        f"speed-up: {r.speedup:.2f}x on {r.workers} workers (target >= 1.7x on 2 cores); "
        f"results.csv {'identical' if r.identical else 'DIFFERENT'}"
    )
    return r


if __name__ == "__main__":
    main()
    sys.exit(0)
