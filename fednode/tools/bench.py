"""``fednode bench``: what a FedFS operation costs on real agents, side by side
with the transport's raw round trip and with the same operation done directly
on the local file system, all measured in one run.

Every timing is taken inside the requester's agent (the ``ping`` and ``bench``
admin calls), so no client-to-agent hop is counted: a 0-hop operation is the
federal layer plus the local operation, as in FedFS Table 2.  The cells are
Table 2's own (``fedsim.table2_cells``, the list the simulated study runs):
each forces its role arrangement (the file's manager M, its parent's manager
PM and its home H, as letters: R the requester, A, B, C other nodes) by
picking names that hash to M and PM and pinning the home at H, then checks the
requests it really made with a traced call (requests on the critical path,
dirmerge ReadDirs excluded) against those the arrangement should make.

Local agents run on the default event loop (uvloop where installed, see
``fednode.eventloop``); ``--loop asyncio,uvloop`` starts one federation per
loop and prints them side by side, as ``--transport verbs,tcp`` does for
transports.

The run writes ``OUT/bench.txt`` (the table), ``OUT/bench.csv`` (tidy rows)
and ``OUT/profile.yaml``: the measured round trip as LogGP parameters and the
local operation costs, which a ``fedsim`` config loads with
``calibration: OUT/profile.yaml``.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import platform
import statistics
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from fednode import eventloop
from fednode.client import Client
from fednode.cluster import ProcessCluster, write_local
from fednode.config import Cluster, load_cluster
from fedsim.protocol.hashing import names_managed_by
from fedsim.schema import table
from fedsim.table2_cells import API, CELLS, COLUMNS, OPS, Cell

IO = 4096
BIG = 65536
#: The Table 2 cells a bench can arrange on real agents.  Reads and writes
#: repeat on one block, so every one it times is warm: the cache-hit variants
#: would time the same thing again.  A DT miss needs a creator other than R,
#: which an all-R arrangement does not have.
BENCH_CELLS: tuple[Cell, ...] = tuple(
    c
    for c in CELLS
    if c.roles is not None and c.variant != "cache-hit" and (c.dt_hit or c.op != "unlink" or set(c.roles) != {"R"})
)


@contextlib.contextmanager
def federation(
    cluster_file: str | None,
    nodes: int = 4,
    transport: str = "tcp",
    devices: Sequence[str] = (),
    loop: str | None = None,
    base: str | Path | None = None,
    pids: dict[int, int] | None = None,
) -> Iterator[Cluster]:
    """The cluster file's running federation, or ``nodes`` local agents
    started for the run on ``transport`` (with ``devices``: node i's RDMA
    device is ``devices[i % len(devices)]``) and event ``loop``, their
    directories under ``base`` (default: the system's temporary directory).
    ``pids`` gets each local agent's process id (node -> pid; none for a
    cluster file's agents, which may run anywhere)."""
    if cluster_file is not None:
        yield load_cluster(cluster_file)
        return
    with tempfile.TemporaryDirectory(prefix="fednode-bench-", dir=base) as tmp:
        path = write_local(tmp, nodes, transport=transport, devices=devices)
        with ProcessCluster(path, log_dir=Path(tmp) / "logs", loop=loop) as pc:
            pc.wait_ready()
            if pids is not None:
                pids.update({n: p.pid for n, p in pc.procs.items()})
            yield pc.cluster


def loop_label(choice: str | None) -> str:
    """The loop that local agents started with ``--loop choice`` run (they use this interpreter)."""
    factory, _ = eventloop.choose(choice)
    return "asyncio" if factory is asyncio.new_event_loop else "uvloop"


def median_us(ns: list[int]) -> float:
    return statistics.median(ns) / 1000.0


class Bench:
    def __init__(self, cluster: Cluster, requester: int | None, repeat: int) -> None:
        self.cluster = cluster
        members = cluster.spec.members
        self.R = members[0] if requester is None else requester
        others = [m for m in members if m != self.R]
        self.role = {"R": self.R, **{x: others[i] if len(others) > i else None for i, x in enumerate("ABC")}}
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
        assert cell.roles is not None
        m, pm, _ = (self.role[x] for x in cell.roles)
        tag = cell.case.replace(" ", "_")
        parent = names_managed_by(self.hashing, pm, f"{self.top}/{tag}_")[0]
        return parent, names_managed_by(self.hashing, m, f"{parent}/n", count)

    def setup(self, cell: Cell, count: int) -> tuple[list[list[Any]], str]:
        """Create what the cell's timed calls need; returns their argument lists."""
        assert cell.roles is not None
        m, pm, h = (self.role[x] for x in cell.roles)
        R = self.at(self.R)
        parent, paths = self.names(cell, count)
        self.at(pm).call("pin", parent, h)  # the parent lives at H: no directory made implicitly there
        R.mkdir(parent)
        for p in paths:
            self.at(m).call("pin", p, h)
        if cell.api in ("create", "mkdir"):
            return [[p] for p in paths], parent
        # R's DT knows a name R created; for a DT miss another role creates it.
        maker = R if cell.dt_hit else self.at(next((n for n in (m, pm, h) if n != self.R), self.R))
        if cell.api in ("read", "write"):
            maker.write_file(paths[0], bytes(range(256)) * (IO // 256))
            fd = R.open(paths[0])
            args = [fd, 0, IO] if cell.api == "read" else [fd, 0, bytes(IO)]
            return [args] * count, parent
        for p in paths:
            maker.create(p)
        return [[p] for p in paths], parent

    def hops(self, cell: Cell, args: list[Any]) -> int:
        """Requests on the critical path of one traced call (ReadDirs of a VD
        refresh excluded: they are the cache's cost, not the arrangement's)."""
        value, log = self.at(self.R).traced(cell.api, *args)
        if isinstance(value, BaseException):
            raise RuntimeError(f"{cell.case} {cell.roles}: the traced call failed: {value}")
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
        for cell in BENCH_CELLS:
            assert cell.roles is not None
            if any(self.role[x] is None for x in cell.roles):
                continue
            calls, _ = self.setup(cell, self.repeat + 1)
            measured = self.hops(cell, calls[0])
            # A cell compared with the raw round trip has one timed just before each call (same load, same
            # moment).  A 0-hop cell is compared with the local column, which is timed without them, so it
            # is too: a round trip between calls (two agents waking on shared cores) doubled a 0-hop
            # cell's time, an artefact the local column never paid.
            ping = A if A is not None and cell.paper_hops else -1
            ns, rtts = R.call("bench", "fedfs", cell.api, calls[1:], ping)
            rtt = median_us(rtts) if rtts else None
            out["cells"][cell.case] = (median_us(ns), measured, cell, rtt)
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


#: Columns of ``bench.csv``: one row per cell; ``hops`` is the paper's column,
#: ``requests`` what the arrangement should send, ``measured_hops`` what it sent.
TIDY_COLUMNS = ("case", "op", "hops", "requests", "measured_hops", "roles", "dt", "median_us", "paired_rtt_us")


def report(res: dict[str, Any]) -> tuple[str, list[list[Any]], dict[str, Any]]:
    """The Table 2-style table (the paper's rows and columns), tidy rows and
    the calibration profile."""
    cells, local = res["cells"], res["local"]
    rtt = res.get("rtt_us")
    rows, tidy = [], []
    for op in OPS:
        api = API[op]
        row: list[Any] = [op, f"{local[api]:.1f}" if api in local else "-"]
        first: dict[str, Any] = {}
        for column in COLUMNS[1:]:
            parts = []
            for case, (us, measured, cell, paired) in cells.items():
                if cell.op != op or cell.column != column:
                    continue
                first.setdefault(column, (us, paired))
                tag = "DT hit " if cell.dt_hit else ""
                parts.append(f"{tag}{us:.1f}" + ("" if measured == cell.requests else f" ({measured} requests)"))
                dt = "dt hit" if cell.dt_hit else "dt miss"
                paired_us = round(paired, 3) if paired else ""
                tidy.append([case, cell.api, cell.paper_hops, cell.requests, measured, "".join(cell.roles), dt,
                             round(us, 3), paired_us])  # fmt: skip
            row.append("; ".join(parts) or "-")
        zero, one = first.get("0 hop"), first.get("1 hop")
        row.append(f"{zero[0] / local[api]:.2f}x" if zero and api in local else "-")
        row.append(f"{one[0] / one[1]:.2f}x" if one and one[1] else "-")
        rows.append(row)
    text = table(["call (us)", *COLUMNS, "0 hop / local", "1 hop / raw RTT"], rows)
    if rtt:
        big = res["rtt_big_us"]
        text += f"\nraw round trip (PING/PONG, same transport): {rtt:.1f} us empty, {big:.1f} us with 64 KiB"
    text += (
        "\ncells are medians, in FedFS Table 2's rows and columns (fedsim.table2_cells: the simulated study's"
        "\narrangements); 'local' is the operation on the requester's own directory through its"
        "\nconfined local layer (LocalFS, no federation); reads and writes are warm;"
        "\na cell whose traced call sent other than its arrangement's requests says how many it sent;"
        "\n'1 hop / raw RTT' divides by the round trips timed alternately with that cell's calls (same load,"
        "\nsame moment); 0-hop cells, like 'local', are timed back to back, without round trips between the calls"
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
    head = ["cell", "local"]
    for t in names:
        head += [f"{t} us", f"{t} / RTT"]
    if len(names) > 1:
        head.append(f"{names[1]} / {names[0]}")
    rows: list[list[Any]] = []
    for cell in BENCH_CELLS:
        if not any(cell.case in r["cells"] for r in results.values()):
            continue
        row: list[Any] = [cell.case, f"{first['local'][cell.api]:.1f}" if cell.api in first["local"] else "-"]
        us = []
        for t in names:
            c = results[t]["cells"].get(cell.case)
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
        row = [label, "-"]
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
    loops: Sequence[str | None] = (None,),
) -> int:
    """Measure each running federation of ``cluster_files``, or else a local
    4-agent federation per transport of ``transports`` and event loop of
    ``loops`` (``fednode.eventloop`` choices; None: the agents' default);
    one column each."""
    if repeat < 5:
        raise ValueError(f"--repeat must be at least 5, not {repeat}")
    runs: list[tuple[str | None, str, str | None]] = (
        [(f, "", None) for f in cluster_files] if cluster_files else [(None, t, lp) for t in transports for lp in loops]
    )
    results: dict[str, dict[str, Any]] = {}
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for cluster_file, transport, loop in runs:
        with federation(cluster_file, transport=transport or "tcp", devices=devices, loop=loop) as cluster:
            b = Bench(cluster, requester, repeat)
            try:
                label = b.at(b.R).status()["transport"]
                if len(loops) > 1 and not cluster_files:
                    label += f"-{loop_label(loop)}"
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
            w.writerow(TIDY_COLUMNS)
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
