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
# # mNFS Table 3: 3-node mNFS against one NFS server with 3 disks
#
# Issue 25: mNFS (`fedsim/protocol/mnfs/`) is a protocol on the same effects as FedFS and
# NFS (`fedsim/protocol/nfs/`), so the simulator prices both with the same network and
# disk models.  The `mnfs_table3` study (`configs/fedfs/mnfs_table3.yaml`) runs the
# paper's set-up (section 3): one client writing then reading a file three times the
# systems' total memory, sequentially and in a random order, on 3-node mNFS (a disk per
# node) and on one NFS server whose RAID-0 of 3 disks serves a block in a third of the
# time.  The paper's Table 3 is quoted beside the simulated MB/s, never computed.
#
# Small by default (0.5 MB of cache a node; seconds); `FULL = True` or `FEDFS_FULL=1`
# runs the shipped config (4 MB a node).

# %% tags=["parameters"]
FULL = False

# %%
import json

import matplotlib

from experiments.notebook import notebook_setup

matplotlib.use("Agg")
import matplotlib.pyplot as plt

FULL, ROOT, OUT = notebook_setup(FULL)

import experiments.mnfs_table3 as study
from experiments import run_study
from fedsim.config import load

CONFIG = ROOT / "configs" / "fedfs" / "mnfs_table3.yaml"
SMALL = ["storage.cache_mb=0.5"]
cfg = load(CONFIG, [] if FULL else SMALL)
result = run_study(cfg, str(CONFIG))
print(result.report)

# %%
val = {(r.case, r.metric): r.value for r in result.rows}
CELLS = list(study.CELLS)
sim = [val[(f"cell={c}", "ratio")] for c in CELLS]
paper = [study.PAPER[c][2] for c in CELLS]

fig, ax = plt.subplots(figsize=(8, 4))
x = range(len(CELLS))
ax.bar([i - 0.2 for i in x], sim, 0.4, label="simulated")
ax.bar([i + 0.2 for i in x], paper, 0.4, label="paper (Table 3)")
ax.axhline(1.0, color="k", lw=0.8)
ax.set_xticks(list(x), CELLS)
ax.set_ylabel("mNFS / NFS throughput")
ax.legend(fontsize=8)
fig.suptitle("mNFS Table 3: 3-node mNFS relative to one NFS server with 3 disks", fontsize=10)
fig.tight_layout()
fig.savefig(OUT / "mnfs_table3.png", dpi=120)
summary = {"full": FULL, "cells": CELLS, "ratio": dict(zip(CELLS, sim, strict=True)),
           "paper_ratio": dict(zip(CELLS, paper, strict=True)),
           "same_direction": {c: bool(val[(f"cell={c}", "same_direction")]) for c in CELLS}}
(OUT / "mnfs_table3.json").write_text(json.dumps(summary, indent=2))
print(f"figure -> {OUT / 'mnfs_table3.png'}")

# %% [markdown]
# ## What the simulation shows, and where it differs from the paper
#
# **Reads and random writes: mNFS ahead, as in the paper.**  With the NFS client's
# read-ahead and write-behind (`params.outstanding`, 4 records in flight), mNFS's three
# servers read and write their chunks on three disks and send from three links at once,
# where the one NFS server's link carries everything.
#
# **Sequential write: the one cell whose direction differs.**  The paper's mNFS is
# slower (0.82; its text says "better by 18 %", which its table contradicts) and the
# paper blames multicast writes delivered out of order, so that the I/O nodes' disks no
# longer write sequentially.  The simulated network delivers each link's messages in
# order and the disk model has no seek, so nothing here can make an out-of-order write
# cost more: mNFS gains on sequential writes as on random ones.
#
# **Random and sequential are alike here** (the disk model costs a block the same
# wherever it lies; only the block cache tells them apart), so the random cells' MB/s are
# far above the paper's, whose disks seek; the ratios are the comparison.  mNFS's client
# calls an entry that is itself one of the servers, so a third of its chunks cost no
# message, which the paper's separate client host did not have.
