"""What ``fednode testbed rxe`` runs in the Soft-RoCE guest by default.

Four steps, each printed with its outcome; the exit status is non-zero when
any check fails (a missed performance target is reported, not failed: the
guest runs under TCG emulation, whose timings only compare with each other):

1. **tests**: the verbs tests and the conformance suite's verbs cases, which
   run the scenarios on agent processes talking RDMA and compare namespace
   results, protocol messages and local trees with the simulator's (its other
   worlds, TCP included, run on the host: repeating them under TCG emulation
   would only spend the guest's time);
2. **federation**: three agents on ``rxe_v0``/``rxe_v1`` driven by the
   ``fednode fs`` command line and a short mixed workload through the client
   API, then ``fednode status`` (transport and device per node);
3. **bench**: ``fednode bench --transport verbs,tcp``, the two side by side,
   with the issue's target checked (a 1-hop operation over verbs at most 2x
   the raw verbs round trip of the same run);
4. **choices**: the design choices measured in one run: bulk data by RDMA
   WRITE vs RDMA READ (1 MiB reads), and completion events alone vs events
   with the adaptive spin (round trips and 1-hop stats).

``--quick`` runs fewer repetitions (what CI runs); ``--out DIR`` keeps the
tables and profiles (the test bed copies ``/out`` back to the host).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fednode.client import Client
from fednode.cluster import ProcessCluster, write_local
from fednode.config import RdmaSpec
from fednode.tools.bench import median_us
from fedsim.protocol.hashing import names_managed_by
from fedsim.schema import table

DEVICES = ("rxe_v0", "rxe_v1")
FEDNODE = [sys.executable, "-m", "fednode.cli"]
MIB = 1 << 20


def say(msg: str) -> None:
    print(msg, flush=True)


def step(name: str, ok: bool, detail: str = "") -> bool:
    say(f"SUITE {name}: {'ok' if ok else 'FAILED'}{' - ' + detail if detail else ''}")
    return ok


# ---------------------------------------------------------------------------- 1. tests
def tests(extra: list[str]) -> bool:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
           "tests/test_verbs.py", "tests/test_conformance.py", "-k", "verbs", *extra]  # fmt: skip
    say("$ " + " ".join(cmd))
    rc = subprocess.call(cmd)
    return step("tests", rc == 0, f"pytest exit status {rc}")


# ---------------------------------------------------------------------------- 2. federation
def federation(base: Path, ops: int) -> bool:
    path = write_local(base, 3, transport="verbs", devices=DEVICES, protocol={"summary_refresh_s": 0.0})
    ok = True
    with ProcessCluster(path, log_dir=base / "logs") as pc:
        pc.wait_ready()  # each agent says when it is ready: no deadline to miss on a loaded host

        def fs(*args: str, stdin: bytes | None = None) -> str:
            nonlocal ok
            r = subprocess.run([*FEDNODE, "fs", "--cluster", str(path), *args], input=stdin, capture_output=True)
            say(f"$ fednode fs {' '.join(args)}  -> {r.returncode}\n{r.stdout.decode()}{r.stderr.decode()}".rstrip())
            ok &= r.returncode == 0
            return r.stdout.decode()

        fs("mkdir", "/demo")
        (base / "hello.txt").write_bytes(b"hello over RDMA\n")
        fs("put", str(base / "hello.txt"), "/demo/hello.txt")
        listing = fs("ls", "/demo")
        got = fs("--node", "2", "cat", "/demo/hello.txt")
        ok &= "hello.txt" in listing and got == "hello over RDMA\n"
        # a short mixed workload from every node, checked against a model
        rng = random.Random(7)
        clients = [Client(pc.cluster, node=n, timeout=60) for n in range(3)]
        model: dict[str, bytes] = {}
        t0 = time.perf_counter()
        for i in range(ops):
            c = rng.choice(clients)
            kind = rng.random()
            if kind < 0.4 or not model:
                p = f"/demo/w{i}"
                data = rng.randbytes(rng.choice((10, 4000, 70000)))
                c.write_file(p, data)
                model[p] = data
            elif kind < 0.8:
                p = rng.choice(sorted(model))
                ok &= c.read_file(p) == model[p]
            else:
                p = rng.choice(sorted(model))
                c.unlink(p)
                del model[p]
        took = time.perf_counter() - t0
        names = sorted(f"/demo/{n}" for n in clients[1].listdir("/demo") if n != "hello.txt")
        ok &= names == sorted(model)
        homes = [len(list((base / f"n{n}" / "demo").iterdir())) for n in range(3)]
        say(f"workload: {ops} operations in {took:.1f} s, files per node's directory {homes}")
        st = subprocess.run([*FEDNODE, "status", "--cluster", str(path), "--json"], capture_output=True)
        rows = json.loads(st.stdout)
        for r in rows:
            say(f"node {r['node']}: transport {r.get('transport')} device {r.get('device')} "
                f"rdma {r.get('rdma')}")  # fmt: skip
        ok &= all(r.get("transport") == "verbs" and r.get("device") in DEVICES for r in rows)
        for c in clients:
            c.disconnect()
    return step("federation", bool(ok), f"{ops} operations through 3 agents on {', '.join(DEVICES)}")


# ---------------------------------------------------------------------------- 3. bench
def bench(out: Path, repeat: int) -> bool:
    cmd = [*FEDNODE, "bench", "--transport", "verbs,tcp", "--devices", ",".join(DEVICES),
           "--repeat", str(repeat), "--out", str(out)]  # fmt: skip
    say("$ " + " ".join(cmd))
    rc = subprocess.call(cmd)
    if rc:
        return step("bench", False, f"exit status {rc}")
    import csv

    rows = list(csv.DictReader(open(out / "bench-verbs.csv")))
    ratios = [
        float(r["median_us"]) / float(r["paired_rtt_us"]) for r in rows if r["hops"] == "1" and r["paired_rtt_us"]
    ]
    worst = max(ratios) if ratios else float("nan")
    met = bool(ratios) and worst <= 2.0
    say(f"BENCH 1-hop over verbs / paired raw verbs RTT: {', '.join(f'{x:.2f}x' for x in ratios)}; "
        f"target <= 2x {'met' if met else 'MISSED'}")  # fmt: skip
    return step("bench", True, "verbs and TCP side by side (see the table)")


# ---------------------------------------------------------------------------- 4. choices
def _measure(base: Path, rdma: RdmaSpec, repeat: int) -> dict[str, float]:
    """Round trip, 1-hop stat and a 1 MiB read through a non-home agent."""
    path = write_local(base, 2, transport="verbs", devices=DEVICES, protocol={"summary_refresh_s": 0.0}, rdma=rdma)
    with ProcessCluster(path, log_dir=base / "logs") as pc:
        pc.wait_ready()  # each agent says when it is ready: no deadline to miss on a loaded host
        spec = pc.cluster.spec
        r, home = Client(pc.cluster, node=0, timeout=60), Client(pc.cluster, node=1, timeout=60)
        try:
            r.call("ping", 1, 20, 0)
            out = {"rtt": median_us(r.call("ping", 1, repeat, 0))}
            d = names_managed_by(spec.hashing_fn(), 1, "/m", 1)[0]
            r.mkdir(d)
            f = names_managed_by(spec.hashing_fn(), 1, f"{d}/f", 1)[0]
            home.write_file(f, os.urandom(MIB))
            out["stat_1hop"] = median_us(r.call("bench", "fedfs", "stat", [[f]] * repeat)[0])
            fd = r.open(f)
            out["read_1mib"] = median_us(r.call("bench", "fedfs", "read", [[fd, 0, MIB]] * max(5, repeat // 5))[0])
            r.close(fd)
            st = r.status()["rdma"]
            out["rdma_writes"], out["rdma_reads"] = st["rdma_writes"], st["rdma_reads"]
            out["events"], out["spin_hits"] = st["events"], st["spin_hits"]
        finally:
            r.disconnect()
            home.disconnect()
    return out


def choices(base: Path, repeat: int) -> bool:
    variants = {
        "bulk write, adaptive spin": RdmaSpec(bulk="write"),
        "bulk read, adaptive spin": RdmaSpec(bulk="read"),
        "bulk write, events only": RdmaSpec(bulk="write", spin_us=0),
    }
    res = {}
    for i, (name, rdma) in enumerate(variants.items()):
        res[name] = _measure(base / f"v{i}", rdma, repeat)
    body = [[name, f"{m['rtt']:.1f}", f"{m['stat_1hop']:.1f}", f"{m['read_1mib']:.1f}", m["events"], m["spin_hits"]]
            for name, m in res.items()]  # fmt: skip
    for line in table(["variant", "RTT us", "stat 1-hop", "1 MiB read", "events", "spin hits"], body).splitlines():
        say(line)
    w, r, ev = (res[k] for k in variants)
    say(f"CHOICE bulk: RDMA READ / RDMA WRITE time for a 1 MiB read = {r['read_1mib'] / w['read_1mib']:.2f}x")
    say(f"CHOICE completions: events only / adaptive spin, round trip = {ev['rtt'] / w['rtt']:.2f}x, "
        f"1-hop stat = {ev['stat_1hop'] / w['stat_1hop']:.2f}x")  # fmt: skip
    ok = w["rdma_writes"] == 0 and r["rdma_reads"] > 0  # the requester's own counters: it READs only in read mode
    return step("choices", ok, "measured side by side in this run")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fednode.tools.testbed.suite", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--quick", action="store_true", help="fewer repetitions (CI)")
    ap.add_argument("--out", default="/out" if os.environ.get("FEDFS_TESTBED") else "results/testbed")
    ap.add_argument("--only", default="tests,federation,bench,choices", help="comma-separated steps")
    ap.add_argument("pytest_args", nargs="*", help="extra pytest arguments for the tests step")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    only = set(args.only.split(","))
    repeat = 30 if args.quick else 200
    results: list[bool] = []
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fedfs-suite-") as tmp:
        base = Path(tmp)
        if "tests" in only:
            results.append(tests(args.pytest_args))
        if "federation" in only:
            results.append(federation(base / "fed", 60 if args.quick else 300))
        if "bench" in only:
            results.append(bench(out / "bench", repeat))
        if "choices" in only:
            results.append(choices(base / "choices", repeat))
    failed = results.count(False)
    say(f"SUITE done in {time.monotonic() - t0:.0f} s: {len(results) - failed} steps ok, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
