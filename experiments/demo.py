"""The main job's demo: FedFS Figure 5 in miniature.

Average operation latency against offered load for the SPEC SFS97 mix (FedFS
Table 1), one server (NFS) against a federation of four (DNFS), simulated with
the FedFS prototype's network and ext2 costs.  Each node spends
``frontend_us`` of CPU on every client request (the NFS server's own work), so
the single server saturates as the load grows while four share it.  Writes
``fig5_latency_vs_load.png`` and ``fig5.csv`` into the output directory.

Then it starts a small real federation on this machine (three ``fednode``
agent processes over TCP loopback, roots in a temporary directory), runs one
script of operations through the client API, runs the same script on the
simulator, and writes ``real_federation.png``: the latency each operation
kind took for real, and the protocol messages per operation, real beside
simulated (the same protocol code, so they must agree).

Last, the whole promise in one step: it mounts that kind of federation with
FUSE (``fednode mount``), runs the real, unmodified ``postmark`` binary on the
mount, runs the same PostMark on the simulator (the generator reproduces the
binary's decisions exactly, so both sides do the same operations), and
writes ``postmark_mounted.png``: the counts PostMark reported against the
simulated ones, and the wall time against the simulated time.  The simulator
models the agents' network (TCP loopback) and their file systems, not the
kernel's FUSE round trips or a Python agent's own CPU, so its time is a
lower bound; the figure shows by how much the real run exceeds it.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from experiments.common import run_workload
from fedsim.config import validate
from fedsim.results import Row, write_csv
from fedsim.schema import table

LOADS = (500, 1000, 2000, 3000, 3600, 4500, 6000)


#: where the demo's agents keep their directories, and so where its calibration measures the local file
#: system: tmpfs where there is one (on this project's VMs the root ext4 takes 0.02 to 1 ms per create
#: depending on the moment, which no calibrated cost can predict); else the system's temporary directory
AGENT_DIR = "/dev/shm" if Path("/dev/shm").is_dir() else ""


def demo(out: Path, quick: bool = False) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = 1500 if quick else 6000
    rows: list[Row] = []
    curves: dict[int, list[float]] = {}
    printed = []
    for nodes in (1, 4):
        curves[nodes] = []
        for load in LOADS:
            cfg = validate(
                {
                    "study": "simulate",
                    "seed": 1,
                    "cluster": {"nodes": nodes},
                    "protocol": {"placement": "with_manager"},
                    "network": {"preset": "fedfs_prototype"},
                    "workload": {
                        "files": 3000,
                        "dirs": 100,
                        "ops": ops,
                        "warmup_ops": ops // 5,
                        "rate": load,
                        "frontend_us": 450.0,
                    },
                },
                "demo",
            )
            m = run_workload(cfg).metrics
            lat = m["latency_mean_us"] / 1000.0
            curves[nodes].append(lat)
            case = f"nodes={nodes} load={load}"
            rows += [Row(case, "latency_mean_ms", lat), Row(case, "throughput_ops_s", m["throughput_ops_s"])]
            printed.append([nodes, load, f"{lat:.2f}", f"{m['throughput_ops_s']:.0f}", f"{m['messages_per_op']:.2f}"])
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "fig5.csv", "demo", 1, rows)
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    ax.plot(LOADS, curves[1], "o-", label="NFS: one server")
    ax.plot(LOADS, curves[4], "s-", label="DNFS: FedFS on four servers")
    ax.set_xlabel("offered load (SFS97 ops/s)")
    ax.set_ylabel("average latency (ms)")
    ax.set_title("Simulated FedFS Fig. 5 (fedfs_prototype network)")
    ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    png = out / "fig5_latency_vs_load.png"
    fig.savefig(png, dpi=120)
    plt.close(fig)
    print(table(["nodes", "offered ops/s", "mean latency ms", "throughput ops/s", "msgs/op"], printed))
    print(f"\nfigure -> {png}\ndata   -> {out / 'fig5.csv'}")
    real_federation(out, quick)
    mounted_postmark(out, quick)
    return png


def script(n_files: int) -> list[tuple[int, str, tuple[Any, ...]]]:
    """(requesting node, API operation, arguments): directories, files created
    from every node, lookups from other nodes, listings, removals."""
    ops: list[tuple[int, str, tuple[Any, ...]]] = [(0, "mkdir", ("/demo",))]
    ops += [(d % 3, "mkdir", (f"/demo/d{d}",)) for d in range(4)]
    files = [f"/demo/d{i % 4}/f{i}" for i in range(n_files)]
    ops += [(i % 3, "create", (f,)) for i, f in enumerate(files)]
    ops += [((i + 1) % 3, "stat", (f,)) for i, f in enumerate(files)]
    ops += [(d % 3, "readdir", (f"/demo/d{d}",)) for d in range(4)]
    ops += [((i + 2) % 3, "unlink", (f,)) for i, f in enumerate(files[::2])]
    return ops


def real_federation(out: Path, quick: bool = False) -> Path:
    """Run ``script`` on three real agents and on the simulator; plot both."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from experiments.validation import Params, Sim, profile_for, sim_config, warm_ops, warm_up
    from fednode.client import Client
    from fednode.cluster import ProcessCluster, write_local
    from fedsim.runtime import OpTrace

    profile = profile_for(Params(agent_dir=AGENT_DIR), lambda s: print(s, flush=True))
    ops = script(30 if quick else 120)
    lat: dict[str, list[float]] = defaultdict(list)
    real_msgs: dict[str, list[int]] = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="fedfs-demo-", dir=AGENT_DIR or None) as tmp:
        path = write_local(tmp, 3)
        with ProcessCluster(path, log_dir=Path(tmp) / "logs") as pc:
            pc.wait_ready()
            warm_up(pc.cluster)  # as the calibration's first round: fresh agents run their first requests slower
            clients = {n: Client(pc.cluster, node=n) for n in range(3)}
            try:
                for node, op, args in ops:
                    t0 = time.perf_counter()
                    value, log = clients[node].traced(op, *args)
                    lat[op].append((time.perf_counter() - t0) * 1e6)
                    if isinstance(value, BaseException):
                        raise RuntimeError(f"real federation: {op}{args} at node {node} failed: {value}")
                    real_msgs[op].append(len(log))
            finally:
                for c in clients.values():
                    c.disconnect()
            sim = Sim(sim_config(validate({"study": "validation"}, "demo"), pc.cluster, profile, 3, {}))
            warm_ops(sim, pc.cluster.spec.members)  # what the real agents did before the script, simulated
    sim_msgs: dict[str, list[int]] = defaultdict(list)
    sim_lat: dict[str, list[float]] = defaultdict(list)
    for node, op, args in ops:
        trace = OpTrace(log=[])
        t0 = sim.c.env.now
        p = sim.c.env.process(sim.c.client_op(0, node, op, *args, trace=trace))
        sim.c.env.run(until=p)
        sim_lat[op].append(sim.c.env.now - t0)
        sim_msgs[op].append(trace.messages)
    kinds = list(lat)
    rows = []
    for k in kinds:
        real_us, pred_us = statistics.fmean(lat[k]), statistics.fmean(sim_lat[k])  # means: the costs are CPU totals
        rows.append([k, len(lat[k]), f"{real_us:.0f}", f"{pred_us:.0f}", f"{100 * (pred_us / real_us - 1):+.0f}%",
                     f"{statistics.mean(real_msgs[k]):.2f}", f"{statistics.mean(sim_msgs[k]):.2f}"])  # fmt: skip
    print("\nA real federation on this machine: 3 agents, TCP loopback, operations through the client API,")
    print(f"beside the simulator's prediction from the calibrated profile {profile}")
    print(table(["operation", "count", "mean us", "predicted us", "error", "msgs/op real", "msgs/op sim"], rows))
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.6))
    x = range(len(kinds))
    w = 0.4
    a1.bar([i - w / 2 for i in x], [statistics.fmean(lat[k]) for k in kinds], w, color="tab:green", label="measured")
    a1.bar([i + w / 2 for i in x], [statistics.fmean(sim_lat[k]) for k in kinds], w, color="tab:blue",
           label="predicted (calibrated)")  # fmt: skip
    a1.set_xticks(list(x), kinds)
    a1.set_ylabel("mean latency (us), client to agent included")
    a1.set_title("Real agents on this machine, and the prediction")
    a1.legend()
    w = 0.4
    a2.bar([i - w / 2 for i in x], [statistics.mean(real_msgs[k]) for k in kinds], w, label="real agents")
    a2.bar([i + w / 2 for i in x], [statistics.mean(sim_msgs[k]) for k in kinds], w, label="simulator")
    a2.set_xticks(list(x), kinds)
    a2.set_ylabel("protocol messages per operation")
    a2.set_title("Same protocol code, both worlds")
    a2.legend()
    fig.tight_layout()
    png = out / "real_federation.png"
    fig.savefig(png, dpi=120)
    plt.close(fig)
    print(f"\nfigure -> {png}")
    return png


def mounted_postmark(out: Path, quick: bool = False) -> Path | None:
    """PostMark on a FUSE mount of three real agents, beside the same PostMark
    simulated; None (and why, printed) where this machine cannot mount."""
    import shutil

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from experiments.common import run_postmark
    from fednode.cluster import ProcessCluster, write_local
    from fednode.mount import MountProcess
    from fedsim.workloads.postmark import PostMarkParams, parse_report, run_binary

    missing = [t for t in ("postmark", "fusermount3") if shutil.which(t) is None]
    if missing or not Path("/dev/fuse").exists():
        what = ", ".join(missing) or "/dev/fuse"
        print(f"\nPostMark on a mount: skipped, {what} missing (./dev.sh setup installs them)")
        return None
    from experiments.validation import Params, profile_for, sim_config, warm_up

    profile = profile_for(Params(mount=True, agent_dir=AGENT_DIR), lambda s: print(s, flush=True))
    nodes = 3
    params = PostMarkParams(
        number=60 if quick else 200, transactions=200 if quick else 1000, size_low=500, size_high=10000,
        subdirectories=5, seed=42,
    )  # fmt: skip
    with tempfile.TemporaryDirectory(
        prefix="fd", dir=AGENT_DIR or "/tmp"
    ) as tmp:  # short: PostMark keeps 81-byte paths
        path = write_local(tmp, nodes)
        mnt = Path(tmp) / "m"
        mnt.mkdir()
        with ProcessCluster(path, log_dir=Path(tmp) / "logs") as pc:
            pc.wait_ready()
            warm_up(pc.cluster)
            log = open(Path(tmp) / "logs" / "mount.log", "wb")  # libfuse's own chatter goes there
            mount = MountProcess.federation(path, 0, mnt, stderr=log)
            try:
                mount.wait_ready()
                t0 = time.perf_counter()
                report = parse_report(run_binary(params, mnt))
                wall_s = time.perf_counter() - t0
            finally:
                mount.stop()
                log.close()
            cfg = sim_config(validate({"study": "validation"}, "demo"), pc.cluster, profile, nodes, {
                "kind": "postmark", "clients": 1, "postmark": {**params.model_dump(), "route": "fixed", "mount": True},
            })  # fmt: skip
    m = run_postmark(cfg).metrics
    keys = ("created", "read", "appended", "deleted_alone", "deleted_mixed")
    rows = [[k, report[k], int(m[f"postmark.{k}"])] for k in keys]
    predicted_s = m["postmark_span_s"]
    rows.append(["seconds", f"{wall_s:.2f}", f"{predicted_s:.2f}"])
    print(f"\nPostMark ({params.number} files, {params.transactions} transactions) on a FUSE mount of {nodes} agents,")
    print(f"the real binary beside the simulated run of the same operations on the mount (FUSE model, {profile})")
    print(table(["", "measured on the mount", "predicted"], rows))
    print(
        f"predicted / measured time: {predicted_s / wall_s:.2f} (the calibrated machine: CPU per message, request "
        "and call, the cores the agents, the mount and postmark share, the FUSE layer's callbacks)"
    )
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.6))
    x = range(len(keys))
    w = 0.4
    a1.bar([i - w / 2 for i in x], [report[k] for k in keys], w, label="postmark on the mount")
    a1.bar([i + w / 2 for i in x], [m[f"postmark.{k}"] for k in keys], w, label="simulated")  # equal
    a1.set_xticks(list(x), [k.replace("_", "\n") for k in keys])
    a1.set_ylabel("files")
    a1.set_title("What PostMark did")
    a1.legend()
    a2.bar([0, 1], [wall_s, predicted_s], color=["tab:green", "tab:blue"])
    a2.set_xticks([0, 1], ["measured (mount)", "predicted"])
    a2.set_ylabel("seconds")
    a2.set_yscale("log")
    a2.set_title("How long it took")
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    png = out / "postmark_mounted.png"
    fig.savefig(png, dpi=120)
    plt.close(fig)
    print(f"\nfigure -> {png}")
    return png
