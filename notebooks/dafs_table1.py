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
# # Federated DAFS Table I: PostMark's files over 2, 4 and 8 servers by the hash
#
# Federated DAFS (section VI-B) places each file at the node that manages its pathname
# (FedFS's hash) and lets the clients apply the same hash, so every request reaches the
# server that holds the file.  How evenly the hash spreads the files bounds how evenly
# the servers are loaded: Table I lists the files per server for PostMark clients of
# 150 files each (6 clients on 2 servers, 10 on 4, 16 on 8).
#
# The `table1` study (`fedsim run configs/fedfs/dafs_table1.yaml`) generates those
# clients' pathnames with the PostMark generator (`fedsim/workloads/postmark.py`, which
# reproduces PostMark 1.5's algorithm and random numbers: its counts equal the real
# binary's, `tests/test_postmark.py`), hashes them with the protocol's own schemes
# (`mod_n`, the papers' hash, and `ring`, consistent hashing with 64 virtual nodes per
# server) and places each at its manager.  It counts the pool (what the paper counts: its
# columns sum to 150 per client) and every file created over the run.  Small by default
# (fewer transactions: the pool does not depend on them); `FULL = True` or `FEDFS_FULL=1`
# runs the paper's 30,000 transactions per client.

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
from experiments.table1 import PAPER
from fedsim.config import load

CONFIG = ROOT / "configs" / "fedfs" / "dafs_table1.yaml"
sets = [] if FULL else ["workload.postmark.transactions=2000", "params.trials=500"]
cfg = load(CONFIG, sets)
result = run_study(cfg, str(CONFIG))
print(result.report)

# %%
val = {(r.case, r.metric): r.value for r in result.rows}
SERVERS = [2, 4, 8]
HASHINGS = ["mod_n", "ring"]


def per_server(n: int, which: str, h: str) -> list[int]:
    return [int(val[(f"servers={n} files={which} hashing={h}", f"server_{s + 1}")]) for s in range(n)]


fig, axes = plt.subplots(1, 3, figsize=(12, 3.6), gridspec_kw={"width_ratios": [2, 4, 8]})
for ax, n in zip(axes, SERVERS, strict=True):
    w = 0.27
    x = range(n)
    ax.bar([i - w for i in x], PAPER[n][1], w, label="paper", color="0.6", hatch="//", edgecolor="white")
    for j, (h, color) in enumerate(zip(HASHINGS, ["tab:blue", "tab:orange"], strict=True)):
        ax.bar([i + j * w for i in x], per_server(n, "pool", h), w, label=h, color=color)
    ax.axhline(sum(PAPER[n][1]) / n, color="k", lw=0.8, ls=":")
    ax.set_xticks(list(x), [str(i + 1) for i in x])
    ax.set_xlabel("server")
    ax.set_title(f"{n} servers, {PAPER[n][0]} clients", fontsize=9)
axes[0].set_ylabel("files (PostMark pool)")
axes[0].legend(fontsize=7)
fig.suptitle("Table I: PostMark's files per server by the pathname hash (dotted: the mean)", fontsize=10)
fig.tight_layout()
fig.savefig(OUT / "dafs_table1.png", dpi=120)

summary = {
    "full": FULL,
    "servers": SERVERS,
    "paper_files": {n: PAPER[n][1] for n in SERVERS},
    "paper_max_over_mean": {n: val[(f"servers={n} paper", "max_over_mean")] for n in SERVERS},
}
for which in ("pool", "created"):
    for h in HASHINGS:
        summary[f"{which}_{h}_files"] = {n: per_server(n, which, h) for n in SERVERS}
        summary[f"{which}_{h}_max_over_mean"] = {
            n: val[(f"servers={n} files={which} hashing={h}", "max_over_mean")] for n in SERVERS}
    summary[f"{which}_random_p95"] = {
        n: val[(f"servers={n} files={which} hashing=mod_n", "random_hash_max_over_mean_p95")] for n in SERVERS}
(OUT / "dafs_table1.json").write_text(json.dumps(summary, indent=2))
print(f"figure -> {OUT / 'dafs_table1.png'}")

# %%
for n in SERVERS:
    print(f"{n} servers: max/mean paper {summary['paper_max_over_mean'][n]:.3f}, "
          + ", ".join(f"{h} {summary[f'pool_{h}_max_over_mean'][n]:.3f}" for h in HASHINGS)
          + f" (a random hash: 95 % of placements below {summary['pool_random_p95'][n]:.3f})")

# %% [markdown]
# ## Where the simulation agrees with the paper, where it differs, and why
#
# **Agrees: the totals and the conclusion.**  The pool of 150 files per client gives the
# paper's totals (900 and 2,400; the paper's 4-server column sums to 1,499, one short of
# 1,500, a slip in the paper or its table), and with the papers' hash (`mod_n`) every
# server gets close to its share: the busiest server holds a few percent more than the
# mean, as in the paper, which is what lets client-side hashing keep all servers busy.
#
# **Differs: the exact counts.**  They cannot match file for file: the paper does not say
# how its clients named their directories or seeded PostMark, nor which hash function
# FedFS used (this framework's is MurmurHash3 of the full pathname).  The comparable
# quantity is the balance.  The paper's max/mean (1.004, 1.027, 1.037) is at or below
# what a perfectly random hash gives on average for the same numbers (the "random hash"
# row); ours with `mod_n` lies within the random spread (below its 95th percentile).  A
# balance better than random is possible for sequential names (PostMark names files 1,
# 2, 3 ...) with a hash that spreads consecutive names evenly; MurmurHash3 behaves like a
# random function.
#
# **Beyond the paper: consistent hashing balances worse.**  `ring` with 64 virtual nodes
# per server gives each server an arc of unequal length, so on 4 and 8 servers its
# max/mean (about 1.1) exceeds a random hash's 95th percentile once the files are many
# (every file created, second table): the price of moving only 1/N of the names when a
# server joins or leaves.  More virtual nodes (`protocol.vnodes`) narrow the gap.
#
# **Beyond the paper: the whole run.**  Counting every file created over the transactions
# (one new file every other transaction at PostMark's default create bias) evens the
# `mod_n` spread further, as more names always do for a random hash.

# %%
