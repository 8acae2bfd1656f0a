# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # FedFS Fig. 5: average latency against offered load, NFS on one node vs DNFS on four
#
# FedFS section 4.2 drives the SPEC SFS97 mix (Table 1) against one regular NFS server,
# then against DNFS (the NFS server linked with FedFS) on four nodes serving the same
# file set, and plots average operation latency against the load the clients offer.
# The figure's data points did not survive in the paper's text; its caption and prose
# do: "as expected, DNFS scales better than regular NFS, since the same load is now
# spread across multiple servers".  So the paper's claim we can check is a *shape*.
#
# This notebook runs the sweep `configs/sweeps/fedfs_fig5.yaml` (cluster.nodes 1 vs 4 x
# eight offered loads x seeds) through the public API, the same as
# `fedsim sweep configs/sweeps/fedfs_fig5.yaml`.  It runs a small version by default
# (fewer operations and seeds, for CI); set `FULL = True` below, or `FEDFS_FULL=1` in the
# environment, for the shipped size.  Figures and numbers go to `results/notebooks/`
# (or `$FEDFS_NOTEBOOK_OUT`).

# %% tags=["parameters"]
FULL = False

# %%
import json

import matplotlib

from experiments.notebook import notebook_setup

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from fedsim.schema import read_yaml, table
from fedsim.plot import read_rows, summarize
from fedsim.sweep import parse_sweep, run_sweep

FULL, ROOT, OUT = notebook_setup(FULL)

SWEEP = ROOT / "configs" / "sweeps" / "fedfs_fig5.yaml"
raw = read_yaml(SWEEP)
sets = []
if not FULL:
    raw["seeds"] = 2
    sets = ["workload.ops=1000", "workload.warmup_ops=200"]
sweep = parse_sweep(raw, str(SWEEP), SWEEP.parent, sets)
outcome = run_sweep(sweep, OUT / ("fig5_sweep_full" if FULL else "fig5_sweep_small"), progress=False)
print(f"{len(sweep.points)} points: {outcome.ok} run, {outcome.skipped} already done, {outcome.failed} failed")

# %%
rows = read_rows(outcome.out)
lat = summarize(rows, "workload.rate", "latency_mean_us", hue="cluster.nodes")
thr = summarize(rows, "workload.rate", "throughput_ops_s", hue="cluster.nodes")
nfs, dnfs = lat[1], lat[4]
loads = [s.x for s in nfs]
print(table(["offered ops/s", "NFS ms", "DNFS ms", "NFS done ops/s", "DNFS done ops/s"],
            [[a.x, f"{a.mean / 1000:.2f}", f"{b.mean / 1000:.2f}", f"{ta.mean:.0f}", f"{tb.mean:.0f}"]
             for a, b, ta, tb in zip(nfs, dnfs, thr[1], thr[4], strict=True)], left=0))

# %%
# The paper's only numbers at a comparable setting: Table 3's average latency at 500 ops/s
# (one server, ONE client, client/server UDP path included).  Shown for scale, not as Fig. 5 data.
PAPER_TABLE3_AVG_MS = {"NFS": 1.03, "DNFS": 1.08}

fig, ax = plt.subplots(figsize=(6.5, 4.2))
for label, stats, marker in (("NFS: one server (simulated)", nfs, "o"),
                             ("DNFS: FedFS on four servers (simulated)", dnfs, "s")):
    xs = [s.x for s in stats]
    (line,) = ax.plot(xs, [s.mean / 1000 for s in stats], marker + "-", label=label)
    ax.fill_between(xs, [s.lo / 1000 for s in stats], [s.hi / 1000 for s in stats],
                    color=line.get_color(), alpha=0.2, lw=0)
ax.plot([500], [PAPER_TABLE3_AVG_MS["NFS"]], "kx", ms=9, label="paper Table 3 avg, NFS (1 client, incl. network)")
ax.plot([500], [PAPER_TABLE3_AVG_MS["DNFS"]], "k+", ms=11, label="paper Table 3 avg, DNFS on one node")
ax.set_yscale("log")
ax.set_ylim(min(s.mean for s in nfs + dnfs) / 2000, max(s.hi for s in nfs + dnfs) * 2 / 1000)
ax.set_xlabel("offered load (SFS97 operations/s)")
ax.set_ylabel("average latency (ms)")
n_seeds = max(s.n for s in nfs)
ax.set_title(f"FedFS Fig. 5 (simulated{'' if FULL else ', small'}): mean and 95% CI over {n_seeds} seeds",
             fontsize=10)
ax.text(0.99, 0.02, "paper (text): 'DNFS scales better than regular NFS'\n(the figure's points are not in the text)",
        transform=ax.transAxes, va="bottom", ha="right", fontsize=8, color="0.3")
ax.grid(True, alpha=0.3)
ax.legend(fontsize=7, loc="upper left")
fig.tight_layout()
fig.savefig(OUT / "fedfs_fig5.png", dpi=120)

crossover = next((s.x for s, t in zip(nfs, dnfs, strict=True) if t.mean < s.mean), None)
summary = {
    "full": FULL,
    "loads": loads,
    "nfs_latency_ms": [s.mean / 1000 for s in nfs],
    "dnfs_latency_ms": [s.mean / 1000 for s in dnfs],
    "nfs_throughput": [s.mean for s in thr[1]],
    "dnfs_throughput": [s.mean for s in thr[4]],
    "crossover_load": crossover,
    "paper_table3_avg_ms": PAPER_TABLE3_AVG_MS,
}
(OUT / "fedfs_fig5.json").write_text(json.dumps(summary, indent=2))
print(f"figure -> {OUT / 'fedfs_fig5.png'}")

# %%
hi = -1
print(
    f"At the highest offered load ({loads[hi]} ops/s) NFS averages {nfs[hi].mean / 1000:.1f} ms and completes "
    f"{thr[1][hi].mean:.0f} ops/s; DNFS averages {dnfs[hi].mean / 1000:.2f} ms and keeps up "
    f"({thr[4][hi].mean:.0f} ops/s).  DNFS is faster from {crossover} ops/s on; below that the single server is "
    f"faster by {(dnfs[0].mean - nfs[0].mean) / 1000:.2f} ms at {loads[0]} ops/s."
)

# %% [markdown]
# ## Where the simulation agrees with the paper, where it differs, and why
#
# **Agrees: the shape.**  One server saturates: each request costs it `frontend_us`
# (450 us, the NFS server's own RPC/XDR work) on one of its 2 CPUs plus the ext2 work, so
# it can serve about 4,000 SFS97 ops/s; past that the open-loop queue grows without bound
# and the latency climbs by orders of magnitude.  Four DNFS servers share the same load
# and stay flat across the whole range, which is the paper's "DNFS scales better than
# regular NFS".
#
# **Differs: light load.**  Below the crossover (about 3,000 ops/s here) the single server
# is *faster*: with four servers, three quarters of the requests reach a node that is not
# the file's home and pay FedFS messages (about 200 us per request/reply exchange on the
# prototype's VIA layer, `network.preset: fedfs_prototype`), while one NFS server answers
# every request locally.  The paper's text neither confirms nor rules out this crossover
# (the curves are lost); its Table 3 shows FedFS adding little on *one* node, where no
# message is sent — see the Table 3 notebook.  The paper's Table 3 averages (crosses) sit
# above both simulated curves at 500 ops/s because they include the client/server UDP path
# over Ethernet, which the simulator does not model.
#
# **Why the DNFS curve stays flat.**  Each node has 4 protocol workers per stage and 2 CPUs;
# at 6,000 ops/s a node serves about 1,500 client requests/s plus its share of peer
# requests, well below its capacity, so queueing stays small.

# %%
