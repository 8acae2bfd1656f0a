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
# # Lookup paths: which of FedFS's four lookup paths serve lookups?
#
# FedFS section 3.1 resolves a pathname to its home through (1) the requester's own
# directory table (DT), (2) the file manager's DT, (3) the parent manager's cached virtual
# directory, or (4) a dirmerge.  The paper argues that the costly paths are "one time
# costs, easily amortized", but gives no numbers.  This notebook runs the sweep
# `configs/sweeps/lookup_paths.yaml` (the `lookup_paths` study at each locality, for DT
# sizes 16 to 65,536, over seeds) and plots how quickly lookups move to path 1 as the DT
# grows and the workload gets more local.
#
# Small by default (600 files, 400 operations, two DT sizes, two seeds); `FULL = True` or
# `FEDFS_FULL=1` runs the shipped sweep (19,500 files, 8,000 operations per point, three
# seeds; about a minute on two cores).

# %% tags=["parameters"]
FULL = False

# %%
import json

import matplotlib

from experiments.notebook import notebook_setup

matplotlib.use("Agg")
import matplotlib.pyplot as plt

FULL, ROOT, OUT = notebook_setup(FULL)

from fedsim.schema import read_yaml
from fedsim.plot import read_rows, summarize
from fedsim.sweep import parse_sweep, run_sweep

SWEEP = ROOT / "configs" / "sweeps" / "lookup_paths.yaml"
raw = read_yaml(SWEEP)
sets = []
if not FULL:
    raw["seeds"] = 2
    raw["grid"] = {"params.locality": [[0.0], [0.9]]}
    sets = ["workload.files=600", "workload.dirs=30", "workload.ops=400", "params.dt_entries=[16,1024]"]
sweep = parse_sweep(raw, str(SWEEP), SWEEP.parent, sets)
outcome = run_sweep(sweep, OUT / ("lookup_paths_sweep_full" if FULL else "lookup_paths_sweep_small"), progress=False)
print(f"{len(sweep.points)} points: {outcome.ok} run, {outcome.skipped} already done, {outcome.failed} failed")

# %%
rows = read_rows(outcome.out)  # the case "dt_entries=16 locality=0.9" gives columns dt_entries and locality
shares = {i: summarize(rows, "dt_entries", f"lookup_path_share_{i}", hue="locality") for i in range(1, 5)}
msgs = summarize(rows, "dt_entries", "messages_per_op.lookup", hue="locality")

fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
for loc, stats in shares[1].items():
    xs = [s.x for s in stats]
    (line,) = ax.plot(xs, [s.mean for s in stats], "o-", label=f"locality {loc}")
    ax.fill_between(xs, [s.lo for s in stats], [s.hi for s in stats], color=line.get_color(), alpha=0.2, lw=0)
    ax2.plot(xs, [s.mean for s in msgs[loc]], "o-", color=line.get_color(), label=f"locality {loc}")
for a in (ax, ax2):
    a.set_xscale("log")
    a.set_xlabel("directory-table entries per node")
    a.grid(True, alpha=0.3)
    a.legend(fontsize=8)
ax.set_ylabel("share of lookups served by path 1 (own DT)")
ax.set_title("path 1 share (mean, 95% CI over seeds); the paper gives no numbers", fontsize=9)
ax2.set_ylabel("messages per lookup operation")
ax2.set_title("messages per lookup (stat) operation", fontsize=9)
fig.tight_layout()
fig.savefig(OUT / "lookup_paths.png", dpi=120)
summary = {
    "full": FULL,
    "path_share": {str(i): {str(loc): {str(s.x): s.mean for s in st} for loc, st in shares[i].items()}
                   for i in shares},
    "messages_per_lookup": {str(loc): {str(s.x): s.mean for s in st} for loc, st in msgs.items()},
}
(OUT / "lookup_paths.json").write_text(json.dumps(summary, indent=2))
print(f"figure -> {OUT / 'lookup_paths.png'}")
for loc, stats in shares[1].items():
    print(f"locality {loc}: path-1 share " + ", ".join(f"DT {s.x}: {s.mean:.1%}" for s in stats))

# %% [markdown]
# ## What the simulation shows, and how it relates to the paper
#
# The paper states no numbers for lookup paths, so there is nothing to agree or disagree
# with numerically; the claim to check is that the expensive paths are amortized.
#
# **Locality decides.**  With a uniform workload (locality 0) over 19,500 files, even a
# 65,536-entry DT serves only a few percent of lookups from path 1: a node sees each file
# rarely, and most lookups go to the parent manager's virtual directory (path 3, one
# exchange).  With 90 % of picks from a hot set, path 1 serves about 70 % of lookups
# once the DT holds the hot set (256 entries suffice), and messages per lookup fall from
# about 6 to about 3.
#
# **Dirmerge is amortized.**  Path 4 (dirmerge) stays near 8-12 % whatever the DT size:
# it is the first lookup in each directory (650 directories), paid once per directory as
# the paper says, not per lookup; a longer run lowers its share.
#
# **Why path 1 saturates.**  Beyond the working set, a larger DT changes nothing (4,096
# and 65,536 entries give the same shares): the DT is an LRU of pathnames, so its size
# only matters up to the number of distinct files a node touches.

# %%
