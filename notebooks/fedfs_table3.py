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
# # FedFS Table 3: per-operation latency, one server and one client, NFS vs DNFS
#
# FedFS section 4.1 runs SPEC SFS97 against a single server at 500 ops/s (15,000
# operations over about 19,500 files in 650 directories) and compares a regular
# user-level NFS server with DNFS, the same server linked with FedFS, on **one** node.
# The paper: "after discounting the client/server communication latency (which uses UDP
# over the Ethernet), the latency is only marginally higher on DNFS compared to NFS".
#
# The `table3` study (`fedsim run configs/fedfs/table3.yaml`) simulates both: DNFS is the
# config as given, NFS the same without the federal layer's path hashing
# (`cpu.hash_us: 0`); on one node every FedFS lookup path is local, so hashing is all
# the layer costs in the model.  Small by default; `FULL = True` or `FEDFS_FULL=1` runs
# the paper's size.

# %% tags=["parameters"]
FULL = False

# %%
import json

import matplotlib

from experiments.notebook import notebook_setup

matplotlib.use("Agg")
import matplotlib.pyplot as plt

FULL, ROOT, OUT = notebook_setup(FULL)

from experiments import run_study
from fedsim.config import load

CONFIG = ROOT / "configs" / "fedfs" / "table3.yaml"
sets = [] if FULL else ["workload.files=2000", "workload.dirs=70", "workload.ops=2000", "workload.warmup_ops=200"]
cfg = load(CONFIG, sets)
result = run_study(cfg, str(CONFIG))
print(result.report)

# %%
OPS = ["lookup", "read", "write", "create", "remove", "average"]
val = {(r.case, r.metric): r.value for r in result.rows}
cols = {k: [val[(op, k)] for op in OPS] for k in ("paper_nfs_ms", "paper_dnfs_ms", "sim_nfs_ms", "sim_dnfs_ms")}

fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.8), gridspec_kw={"width_ratios": [3, 2]})
w = 0.2
styles = [("paper_nfs_ms", "paper: NFS", "0.55", None), ("paper_dnfs_ms", "paper: DNFS", "0.8", None),
          ("sim_nfs_ms", "simulated: NFS", "tab:blue", None), ("sim_dnfs_ms", "simulated: DNFS", "tab:orange", None)]
for i, (key, label, color, _) in enumerate(styles):
    ax.bar([j + (i - 1.5) * w for j in range(len(OPS))], cols[key], w, label=label, color=color,
           hatch="//" if key.startswith("paper") else None, edgecolor="white")
ax.set_xticks(range(len(OPS)), OPS)
ax.set_ylabel("latency (ms)")
ax.set_title("Table 3: latency per operation (paper includes the client's UDP path)", fontsize=9)
ax.legend(fontsize=7)
over_paper = [val[(op, "paper_overhead_ms")] * 1000 for op in OPS]
over_sim = [val[(op, "sim_overhead_ms")] * 1000 for op in OPS]
ax2.bar([j - 0.2 for j in range(len(OPS))], over_paper, 0.4, label="paper: DNFS - NFS", color="0.6", hatch="//",
        edgecolor="white")
ax2.bar([j + 0.2 for j in range(len(OPS))], over_sim, 0.4, label="simulated: DNFS - NFS", color="tab:orange")
ax2.set_xticks(range(len(OPS)), OPS, rotation=30)
ax2.set_ylabel("FedFS overhead (us)")
ax2.set_title("the comparable quantity: FedFS's overhead", fontsize=9)
ax2.legend(fontsize=7)
fig.tight_layout()
fig.savefig(OUT / "fedfs_table3.png", dpi=120)
(OUT / "fedfs_table3.json").write_text(json.dumps({
    "full": FULL, "ops": OPS, **cols,
    "paper_overhead_us": dict(zip(OPS, over_paper, strict=True)),
    "sim_overhead_us": dict(zip(OPS, over_sim, strict=True)),
}, indent=2))
print(f"figure -> {OUT / 'fedfs_table3.png'}")

# %%
for op, p, s in zip(OPS, over_paper, over_sim, strict=True):
    print(f"{op:8s} overhead: paper {p:5.0f} us, simulated {s:5.1f} us")

# %% [markdown]
# ## Where the simulation agrees with the paper, where it differs, and why
#
# **Agrees: the conclusion.**  On one node DNFS is only marginally slower than NFS, in the
# paper (about 50 us, 5 %, on average) and here (a few tens of us): with a single node
# every FedFS lookup path is served from the local directory table, no message is sent,
# and the federal layer costs the hashing of pathnames.
#
# **Agrees: lookup.**  The paper's lookup overhead (20 us) is close to the simulated one
# (hashing the path for the manager, the directory table and the Bloom summary).
#
# **Differs: absolute latencies.**  The paper's numbers include the client/server path
# (UDP over 100 Mb/s Ethernet, the client's RPC stack).  The simulator models the server
# side only (`workload.frontend_us`, the NFS server's own work per request, plus the ext2
# costs of Table 2), so its bars sit below the paper's, most for read and write, whose
# 8 KB block alone takes about 0.7 ms on 100 Mb/s Ethernet.
#
# **Differs: write, create, remove overheads.**  The paper measures 70-230 us of FedFS
# overhead on these, the simulation a few tens.  Table 2 shows the same gap at 0 hops:
# the prototype's FedFS library adds 50-60 us to a write or unlink over ext2 where the
# model charges only the path hashing (see the Table 2 notebook); the paper also names
# "double buffering" (file data cached both in FedFS and in the kernel) as a cost of its
# prototype, which the model does not have.  For read the paper measures no overhead at
# all while the model charges its hashing: the paper's read difference is below its
# two-decimal resolution.

# %%
