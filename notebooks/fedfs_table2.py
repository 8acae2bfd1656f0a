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
# # FedFS Table 2: latency of single operations by the number of hops
#
# FedFS section 4.1 times creat, mkdir, read, write and unlink on bare ext2 ("Local")
# and through FedFS with 0 to 6 "hops" on the 8-node Pentium II / Giganet VIA prototype.
# The `table2` study (`fedsim run configs/fedfs/table2.yaml`) rebuilds every cell as a
# scenario on a fresh simulated federation (the docstring of `experiments/table2.py`
# explains the role arrangement of each column and why a paper "hop" is one
# request/reply exchange).  The study is small already; `FULL` only adds the comparison
# of acknowledged and one-way directory updates.

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
from fedsim.table2_cells import CELLS
from fedsim.config import load

CONFIG = ROOT / "configs" / "fedfs" / "table2.yaml"
cfg = load(CONFIG, [] if FULL else ["params.compare_updates=false"])
result = run_study(cfg, str(CONFIG))
print(result.report)

# %%
val = {(r.case, r.metric): r.value for r in result.rows}


def hops(cell):
    return 0 if cell.column == "0 hop" else (-1 if cell.column == "local" else cell.paper_hops)


OPS = ["creat", "mkdir", "read", "write", "unlink"]
data = {}
for op in OPS:
    cells = sorted((c for c in CELLS if c.op == op and c.variant == ""), key=hops)
    data[op] = {
        "cases": [c.case for c in cells],
        "hops": [hops(c) for c in cells],
        "sim_us": [val[(c.case, "sim_us")] for c in cells],
        "paper_us": [c.paper_us for c in cells],
    }

fig, ax = plt.subplots(figsize=(7, 4.3))
for i, op in enumerate(OPS):
    d = data[op]
    color = f"C{i}"
    ax.plot(d["hops"], d["sim_us"], "o-", color=color, label=f"{op}: simulated")
    ax.plot(d["hops"], d["paper_us"], "s", color=color, mfc="none", ms=9, label=f"{op}: paper")
ax.set_xticks([-1, 0, 1, 2, 3, 5, 6], ["local", "0", "1", "2", "3", "5", "6"])
ax.set_xlabel("hops (paper's column)")
ax.set_ylabel("latency (us)")
fed = [c for c in CELLS if c.roles is not None]
within = sum(abs(val[(c.case, "ratio")] - 1) <= 0.25 for c in fed)
ax.set_title(f"FedFS Table 2: simulated (filled) vs paper (open); {within} of {len(fed)} FedFS cells within 25%",
             fontsize=9)
ax.grid(True, alpha=0.3)
ax.legend(fontsize=7, ncol=2)
fig.tight_layout()
fig.savefig(OUT / "fedfs_table2.png", dpi=120)
(OUT / "fedfs_table2.json").write_text(json.dumps({"full": FULL, "ops": data, "within_25pct": within,
                                                    "federated_cells": len(fed)}, indent=2))
print(f"figure -> {OUT / 'fedfs_table2.png'}")

# %% [markdown]
# ## Where the simulation agrees with the paper, where it differs, and why
#
# **Agrees: the cost of a hop.**  Latency grows by roughly 200 us for every hop, in the
# paper and in the simulation: with the prototype's network model
# (`network.preset: fedfs_prototype`) one request/reply exchange costs about 200 us, the
# paper's own "network and queuing delay for a message exchange".  creat 2 hops, mkdir 3
# and 6 hops, read and write 1 hop and unlink 3 hops (with a DT hit) agree within about
# 20 %; the curves rise with the hop count at the paper's slope.
#
# **Differs: the simulation is lower at most multi-hop cells (0.7-0.9x).**  The model
# charges a remote operation its exchanges and the remote ext2 cost; the prototype also
# pays its FedFS library on each node an exchange touches (the same overhead as at 0
# hops, below), so its gap grows with the hops.
#
# **Differs: 0 hops.**  The prototype's FedFS layer adds up to 65 us over ext2 at 0 hops
# (its library and NFS glue); the model charges only the federal layer's path hashing,
# so some 0-hop cells are low.  Where the paper's 0-hop time is at or below its Local time
# (read), any modelled overhead overshoots a cell that small.
#
# **Differs: request counts.**  Our creat 5 hops and mkdir 6 hops send one request fewer
# than the paper's hop label (4 and 5), which is most of their 0.77x and 0.83x: our manager checks a new name with the parent's manager and picks
# the home in one HomeInfo request, where the prototype looks the name up first and then
# creates.  The study's report (printed above) gives every cell's requests and roles.

# %%
