"""``fednode bench``: what a FedFS operation costs on real agents, side by side
with the transport's raw round trip and with the same operation done directly
on the local file system, all measured in one run.

Every timing is taken inside the requester's agent (the ``ping`` and ``bench``
admin calls), so no client-to-agent hop is counted: a 0-hop operation is the
federal layer plus the local operation, as in FedFS Table 2.  Each cell
forces a role arrangement (the file's manager M, its parent's manager PM and
its home H, as letters: R the requester, A and B two other nodes) by picking
names that hash to M and PM and pinning the home at M, then checks the hops it
really made with a traced call (requests on the critical path, dirmerge
ReadDirs excluded).

The run writes ``OUT/bench.txt`` (the table), ``OUT/bench.csv`` (tidy rows)
and ``OUT/profile.yaml``: the measured round trip as LogGP parameters and the
local operation costs, which a ``fedsim`` config loads with
``calibration: OUT/profile.yaml``.
"""

from __future__ import annotations

import contextlib
import csv
import platform
import statistics
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fednode.client import Client
from fednode.cluster import ProcessCluster, write_local
from fednode.config import Cluster, load_cluster
from fedsim.protocol.hashing import names_managed_by
from fedsim.results import table

IO = 4096
BIG = 65536


@dataclass(frozen=True)
class Cell:
    op: str
    hops: int
    roles: str  # M, PM, H as letters
    dt_hit: bool = True  # the requester's DT knows the name (it created it)


CELLS = (
    Cell("stat", 0, "RRR"),
    Cell("stat", 1, "AAA"),
    Cell("stat", 2, "AAA", dt_hit=False),
    Cell("read", 0, "RRR"),
    Cell("read", 1, "AAA"),
    Cell("write", 0, "RRR"),
    Cell("write", 1, "AAA"),
    Cell("create", 0, "RRR"),
    Cell("create", 2, "AAA"),
    Cell("create", 3, "ABR"),
    Cell("mkdir", 0, "RRR"),
    Cell("mkdir", 2, "AAA"),
    Cell("mkdir", 3, "ARR"),
    Cell("unlink", 0, "RRR"),
    Cell("unlink", 1, "AAA"),
    Cell("unlink", 2, "AAA", dt_hit=False),
    Cell("unlink", 3, "ABA", dt_hit=False),
)
OPS = ("stat", "read", "write", "create", "mkdir", "unlink")


@contextlib.contextmanager
def federation(
    cluster_file: str | None, nodes: int = 4, transport: str = "tcp", devices: Sequence[str] = ()
) -> Iterator[Cluster]:
    """The cluster file's running federation, or ``nodes`` local agents
    started for the run on ``transport`` (with ``devices``: node i's RDMA
    device is ``devices[i % len(devices)]``)."""
    if cluster_file is not None:
        yield load_cluster(cluster_file)
        return
    with tempfile.TemporaryDirectory(prefix="fednode-bench-") as tmp:
        path = write_local(tmp, nodes, transport=transport, devices=devices)
        with ProcessCluster(path, log_dir=Path(tmp) / "logs") as pc:
            pc.wait_ready()
            yield pc.cluster


def median_us(ns: list[int]) -> float:
    return statistics.median(ns) / 1000.0


class Bench:
    def __init__(self, cluster: Cluster, requester: int | None, repeat: int) -> None:
        self.cluster = cluster
        members = cluster.spec.members
        self.R = members[0] if requester is None else requester
        others = [m for m in members if m != self.R]
        self.role = {"R": self.R, "A": others[0] if others else None, "B": others[1] if len(others) > 1 else None}
        self.repeat = repeat
        self.hashing = cluster.spec.hashing_fn()
        self.clients = {n: Client(cluster, node=n) for n in members}
        self.run_id = f"{int(time.time() * 1000) % 10**8}"
        self.top = f"/fednode-bench-{self.run_id}"

    def close(self) -> None:
        for c in self.clients.values():
            c.disconnect()

    # -------------------------------------------------------------- helpers
    def at(self, node: int | None) -> Client:
        assert node is not None
        return self.clients[node]

    def names(self, cell: Cell, count: int) -> tuple[str, list[str]]:
        m, pm, _ = (self.role[x] for x in cell.roles)
        tag = f"{cell.op}{cell.hops}"
        parent = names_managed_by(self.hashing, pm, f"{self.top}/{tag}_")[0]
        return parent, names_managed_by(self.hashing, m, f"{parent}/n", count)

    def setup(self, cell: Cell, count: int) -> tuple[list[list[Any]], str]:
        """Create what the cell's timed calls need; returns their argument lists."""
        m, pm, h = (self.role[x] for x in cell.roles)
        R = self.at(self.R)
        parent, paths = self.names(cell, count)
        self.at(pm).call("pin", parent, h)  # the parent lives at H: no directory made implicitly there
        R.mkdir(parent)
        for p in paths:
            self.at(m).call("pin", p, h)
        if cell.op in ("create", "mkdir"):
            return [[p] for p in paths], parent
        maker = R if cell.dt_hit else self.at(m if m != self.R else h)
        if cell.op in ("read", "write"):
            maker.write_file(paths[0], bytes(range(256)) * (IO // 256))
            fd = R.open(paths[0])
            args = [fd, 0, IO] if cell.op == "read" else [fd, 0, bytes(IO)]
            return [args] * count, parent
        for p in paths:
            maker.create(p)
        return [[p] for p in paths], parent

    def hops(self, cell: Cell, args: list[Any]) -> int:
        """Requests on the critical path of one traced call (ReadDirs of a VD
        refresh excluded: they are the cache's cost, not the arrangement's)."""
        value, log = self.at(self.R).traced(cell.op, *args)
        if isinstance(value, BaseException):
            raise RuntimeError(f"{cell.op} {cell.roles}: the traced call failed: {value}")
        return sum(1 for _, _, kind in log if kind not in ("reply", "ReadDir"))

    # -------------------------------------------------------------- the run
    def run(self) -> dict[str, Any]:
        R = self.at(self.R)
        A = self.role["A"]
        out: dict[str, Any] = {"cells": {}, "local": {}}
        if A is not None:
            R.call("ping", A, 20, 0)  # connection set up, caches warm
            out["rtt_us"] = median_us(R.call("ping", A, self.repeat, 0))
            out["rtt_big_us"] = median_us(R.call("ping", A, max(20, self.repeat // 4), BIG))
        R.mkdir(self.top)
        for cell in CELLS:
            if any(self.role[x] is None for x in cell.roles):
                continue
            calls, _ = self.setup(cell, self.repeat + 1)
            measured = self.hops(cell, calls[0])
            ns, rtts = R.call("bench", "fedfs", cell.op, calls[1:], A if A is not None else -1)
            rtt = median_us(rtts) if rtts else None
            out["cells"][(cell.op, cell.hops)] = (median_us(ns), measured, cell, rtt)
        out["local"] = self.local()
        self.cleanup()
        return out

    def local_us(self, op: str, calls: list[list[Any]]) -> float:
        return median_us(self.at(self.R).call("bench", "local", op, calls)[0])

    def local(self) -> dict[str, float]:
        """The same operations on the requester's directory without the
        federation (through its confined local layer, LocalFS: the paths travel
        over the wire, so no request may name a host path)."""
        R = self.at(self.R)
        d = f"/.fednode-bench-local-{self.run_id}"
        n = self.repeat
        res: dict[str, float] = {}
        R.call("bench", "local", "mkdir", [[d]])
        res["create"] = self.local_us("create", [[f"{d}/f{i}"] for i in range(n)])
        res["stat"] = self.local_us("stat", [[f"{d}/f{i}"] for i in range(n)])
        R.call("bench", "local", "write", [[f"{d}/f0", 0, bytes(IO)]])
        res["read"] = self.local_us("read", [[f"{d}/f0", 0, IO]] * n)
        res["write"] = self.local_us("write", [[f"{d}/f0", 0, bytes(IO)]] * n)
        res["unlink"] = self.local_us("unlink", [[f"{d}/f{i}"] for i in range(n)])
        res["mkdir"] = self.local_us("mkdir", [[f"{d}/d{i}"] for i in range(n)])
        res["rmdir"] = self.local_us("rmdir", [[f"{d}/d{i}"] for i in range(n)])
        R.call("bench", "local", "rmdir", [[d]])
        R.call("bench", "cleanup", "", [])
        return res

    def cleanup(self) -> None:
        """Remove everything the run created through the federation."""
        R = self.at(self.R)
        stack = [self.top]
        order = []
        while stack:
            d = stack.pop()
            order.append(d)
            for name, is_dir in R.readdir(d):
                p = f"{d}/{name}"
                if is_dir:
                    stack.append(p)
                else:
                    R.unlink(p)
        for d in reversed(order):
            R.rmdir(d)


def report(res: dict[str, Any]) -> tuple[str, list[list[Any]], dict[str, Any]]:
    """The Table 2-style table, tidy rows and the calibration profile."""
    cells, local = res["cells"], res["local"]
    rtt = res.get("rtt_us")
    rows, tidy = [], []
    for op in OPS:
        row: list[Any] = [op, f"{local[op]:.1f}" if op in local else "-"]
        for hops in range(4):
            c = cells.get((op, hops))
            if c is None:
                row.append("-")
                continue
            us, measured, cell, paired = c
            row.append(f"{us:.1f}" + ("" if measured == hops else f" ({measured} hops)"))
            tidy.append(
                [
                    op,
                    hops,
                    measured,
                    cell.roles,
                    "dt hit" if cell.dt_hit else "dt miss",
                    round(us, 3),
                    round(paired, 3) if paired else "",
                ]
            )
        zero = cells.get((op, 0))
        one = cells.get((op, 1))
        row.append(f"{zero[0] / local[op]:.2f}x" if zero and op in local else "-")
        row.append(f"{one[0] / one[3]:.2f}x" if one and one[3] else "-")
        rows.append(row)
    text = table(["op (us)", "local", "0 hop", "1 hop", "2 hops", "3 hops", "0 hop / local", "1 hop / raw RTT"], rows)
    if rtt:
        big = res["rtt_big_us"]
        text += f"\nraw round trip (PING/PONG, same transport): {rtt:.1f} us empty, {big:.1f} us with 64 KiB"
    text += (
        "\ncells are medians; 'local' is the operation on the requester's own directory through its confined"
        "\nlocal layer (LocalFS, no federation); a cell whose traced call"
        "\nmade other than its column's hops says how many it made; '1 hop / raw RTT' divides by the round trips"
        "\ntimed alternately with that cell's calls (same load, same moment)"
    )
    profile: dict[str, Any] = {
        "measured_by": "fednode bench",
        "host": platform.node(),
        "python": platform.python_version(),
        "storage": {
            "costs_us": {
                "create": round(local["create"], 2),
                "mkdir": round(local["mkdir"], 2),
                "rmdir": round(local["rmdir"], 2),
                "stat": round(local["stat"], 2),
                "open": round(local["stat"], 2),
                "read_hit": round(local["read"], 2),
                "write": round(local["write"], 2),
                "unlink": round(local["unlink"], 2),
            }
        },
    }
    if rtt:
        # A round trip is two one-way messages of 2o + L each; on one host the
        # wire is memory, so the cost is all overhead (L = 0).  The 64 KiB
        # payload travels both ways (PONG echoes it): G from the difference.
        o = rtt / 4
        G = max(0.0, (res["rtt_big_us"] - rtt) / (2 * BIG))
        profile["network"] = {"L_us": 0.0, "o_us": round(o, 3), "g_us": round(o, 3), "G_us_per_byte": round(G, 6)}
    return text, tidy, profile


def compare(results: dict[str, dict[str, Any]]) -> str:
    """Transports side by side: every cell's median, the same cell in raw
    round trips of its own transport (paired ones for 1-hop cells, else the
    run's median), and the second transport's time over the first's."""
    names = list(results)
    first = results[names[0]]
    head = ["op", "hops", "local"]
    for t in names:
        head += [f"{t} us", f"{t} / RTT"]
    if len(names) > 1:
        head.append(f"{names[1]} / {names[0]}")
    rows: list[list[Any]] = []
    keys = [k for k in ((c.op, c.hops) for c in CELLS) if any(k in r["cells"] for r in results.values())]
    for op, hops in keys:
        row: list[Any] = [op, hops, f"{first['local'].get(op, 0):.1f}" if op in first["local"] else "-"]
        us = []
        for t in names:
            c = results[t]["cells"].get((op, hops))
            rtt = results[t].get("rtt_us")
            if c is None:
                row += ["-", "-"]
                us.append(None)
                continue
            base = c[3] if c[3] else rtt
            row += [f"{c[0]:.1f}", f"{c[0] / base:.2f}x" if base else "-"]
            us.append(c[0])
        if len(names) > 1:
            row.append(f"{us[1] / us[0]:.2f}x" if us[0] and us[1] else "-")
        rows.append(row)
    for label, key in (("raw RTT", "rtt_us"), ("raw RTT 64K", "rtt_big_us")):
        row = [label, "-", "-"]
        vals = []
        for t in names:
            v = results[t].get(key)
            row += [f"{v:.1f}" if v else "-", "1.00x" if v and key == "rtt_us" else "-"]
            vals.append(v)
        if len(names) > 1:
            row.append(f"{vals[1] / vals[0]:.2f}x" if vals[0] and vals[1] else "-")
        rows.append(row)
    text = table(head, rows)
    return text + (
        "\nmedians in us, every transport measured in this run; 't / RTT' is the cell over that transport's raw"
        "\nround trip (for 1-hop cells the round trips timed alternately with the cell's calls)"
    )


def bench(
    cluster_files: Sequence[str] | None,
    requester: int | None,
    repeat: int,
    out: Path,
    transports: Sequence[str] = ("tcp",),
    devices: Sequence[str] = (),
) -> int:
    """Measure each running federation of ``cluster_files``, or else a local
    4-agent federation per transport of ``transports``; one column each."""
    if repeat < 5:
        raise ValueError(f"--repeat must be at least 5, not {repeat}")
    runs: list[tuple[str | None, str]] = (
        [(f, "") for f in cluster_files] if cluster_files else [(None, t) for t in transports]
    )
    results: dict[str, dict[str, Any]] = {}
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for cluster_file, transport in runs:
        with federation(cluster_file, transport=transport or "tcp", devices=devices) as cluster:
            b = Bench(cluster, requester, repeat)
            try:
                label = b.at(b.R).status()["transport"]
                res = b.run()
            finally:
                b.close()
        while label in results:
            label += "+"
        results[label] = res
        text, tidy, profile = report(res)
        suffix = "" if len(runs) == 1 else f"-{label}"
        (out / f"bench{suffix}.txt").write_text(text + "\n")
        with open(out / f"bench{suffix}.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["op", "hops", "measured_hops", "roles", "dt", "median_us", "paired_rtt_us"])
            w.writerows(tidy)
        prof = out / f"profile{suffix}.yaml"
        prof.write_text(yaml.safe_dump({**profile, "transport": label}, sort_keys=False))
        written += [out / f"bench{suffix}.txt", prof]
        print(f"== {label}\n{text}\n", flush=True)
    if len(runs) > 1:
        text = compare(results)
        (out / "bench.txt").write_text(text + "\n")
        written.insert(0, out / "bench.txt")
        print(f"== side by side\n{text}")
    print(f"\n-> {', '.join(map(str, written))} (in a fedsim config: calibration: PROFILE)")
    return 0
