"""The main job's demo: FedFS Figure 5 in miniature.

Average operation latency against offered load for the SPEC SFS97 mix (FedFS
Table 1), one server (NFS) against a federation of four (DNFS), simulated with
the FedFS prototype's network and ext2 costs.  Each node spends
``frontend_us`` of CPU on every client request (the NFS server's own work), so
the single server saturates as the load grows while four share it.  Writes
``fig5_latency_vs_load.png`` and ``fig5.csv`` into the output directory.
"""

from __future__ import annotations

from pathlib import Path

from experiments.common import run_workload
from fedsim.config import validate
from fedsim.results import Row, table, write_csv

LOADS = (500, 1000, 2000, 3000, 3600, 4500, 6000)


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
                    "cluster": {"nodes": nodes, "placement": "with_manager"},
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
    return png
