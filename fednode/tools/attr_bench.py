"""Micro-benchmark: ``getattr`` against ``stat``, side by side in one run, on
real agents over TCP (what a FUSE mount's most frequent call costs against
the Table 2 study's ``stat``).

    python -m fednode.tools.attr_bench [--nodes 2] [--n 500] [--rounds 5]

A federation of ``--nodes`` agent processes on this machine; a client at
node 0 times batches of ``n`` calls of each operation on four kinds of name
(a file at node 0, a file on another node, a directory managed elsewhere,
the root), alternating the two operations round by round so that drift in
the machine hits both alike, and prints the median per-call time over
rounds, the ratio, and the protocol messages one call causes (``getattr`` of
a directory or the root asks its manager, which answers from a holder's
local file system; ``stat`` of a directory needs only the lookup, and of the
root nothing).  It also times ``statfs`` (one multicast to every member).

This is a measurement, not a test: nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from fednode.client import Client
from fednode.cluster import ProcessCluster, write_local
from fedsim.protocol.hashing import make_hashing


def _per_call_us(fn, arg: str | None, n: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(n):
        fn(arg) if arg is not None else fn()
    return (time.perf_counter_ns() - t0) / n / 1000


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--n", type=int, default=500, help="calls per batch")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    members = list(range(args.nodes))
    hashing = make_hashing("mod_n", members, 64)
    with tempfile.TemporaryDirectory() as tmp:
        cf = write_local(tmp, args.nodes)
        with ProcessCluster(cf, log_dir=Path(tmp) / "logs") as pc:
            pc.wait_ready()
            c = Client(cf, node=0)
            try:
                c.mkdir("/b")
                names: dict[str, str] = {}
                i = 0
                while len(names) < 2:  # a file at node 0 and one elsewhere
                    home = c.write_file(f"/b/f{i}", b"x")
                    names.setdefault("local file" if home == 0 else "remote file", f"/b/f{i}")
                    i += 1
                d = next(f"/d{k}" for k in range(100) if hashing.manager_of(f"/d{k}") != 0)
                c.mkdir(d)
                names["directory"] = d
                names["root"] = "/"
                print(f"{args.nodes} agents over TCP, client at node 0; median of {args.rounds} rounds "
                      f"of {args.n} calls, microseconds per call")  # fmt: skip
                print(f"{'name':12s} {'stat':>8s} {'getattr':>8s} {'ratio':>6s}  messages of one getattr")
                for label, path in names.items():
                    times: dict[str, list[float]] = {"stat": [], "getattr": []}
                    for _ in range(args.rounds):
                        for op in times:
                            times[op].append(_per_call_us(getattr(c, op), path, args.n))
                    s, g = statistics.median(times["stat"]), statistics.median(times["getattr"])
                    msgs = [k for _, _, k in c.traced("getattr", path)[1] if k != "reply"]
                    print(f"{label:12s} {s:8.1f} {g:8.1f} {g / s:6.2f}  {msgs}")
                fs = statistics.median(_per_call_us(c.statfs, None, args.n) for _ in range(args.rounds))
                print(f"statfs: {fs:.1f} us per call ({args.nodes} members)")
            finally:
                c.disconnect()


if __name__ == "__main__":
    main()
