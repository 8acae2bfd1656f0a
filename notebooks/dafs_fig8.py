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
# # Federated DAFS Fig. 8: the remote data-block cache
#
# "Using the round-robin policy for file placement and a modified postmark benchmark ...
# in which all files are created before running the transactions, and each transaction
# performs only a read operation ... the caching layer in FedFS helps improve the
# throughput by about 35%" (section VI-D).  The `dafs_fig8` study runs read-only PostMark
# (`bias_create: -1`, `bias_read: 10`) with round-robin placement and clients routing by
# the hash, so about (N-1)/N of the reads reach a server that is not the file's home,
# without the cache and with `protocol.block_cache_blocks` blocks of 4 KiB per server
# (`fedsim/protocol/fedfs/blockcache.py`: LRU, write-through, invalidated by the home).

# %% tags=["parameters"]
FULL = False

# %%
import json

import matplotlib

from experiments.notebook import notebook_setup

matplotlib.use("Agg")
import matplotlib.pyplot as plt

FULL, ROOT, OUT = notebook_setup(FULL)

import experiments.dafs_fig8  # noqa: F401  (registers the study without an installed entry point)
from experiments import run_study
from experiments.dafs_fig8 import PAPER_GAIN
from fedsim.config import load

CONFIG = ROOT / "configs" / "fedfs" / "dafs_fig8.yaml"
SMALL = ["workload.postmark.transactions=300", "workload.postmark.number=40", "params.servers=2",
         "params.clients_per_server=2", "params.cache_blocks=[0,16,1024]"]
cfg = load(CONFIG, [] if FULL else SMALL)
result = run_study(cfg, str(CONFIG))
print(result.report)

# %%
val = {(r.case, r.metric): r.value for r in result.rows}
BLOCKS = sorted({0, *cfg.params["cache_blocks"]})
tps = [val[(f"cache_blocks={b}", "tps")] for b in BLOCKS]
gain = [val[(f"cache_blocks={b}", "gain")] for b in BLOCKS]
hit = [val[(f"cache_blocks={b}", "hit_rate")] for b in BLOCKS]

fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
labels = ["off" if b == 0 else str(b) for b in BLOCKS]
a1.bar(labels, tps, color=["0.6", *["tab:blue"] * (len(BLOCKS) - 1)])
a1.axhline(tps[0] * (1 + PAPER_GAIN), color="k", ls=":", label="paper: no cache +35 %")
a1.set_xlabel("cache blocks per server (4 KiB)")
a1.set_ylabel("read-only PostMark transactions/s")
a1.legend(fontsize=8)
a2.plot(labels, [100 * h for h in hit], "o-")
a2.set_xlabel("cache blocks per server")
a2.set_ylabel("block cache hit rate (%)")
fig.suptitle("Fig. 8: impact of data block caching (round-robin placement)", fontsize=10)
fig.tight_layout()
fig.savefig(OUT / "dafs_fig8.png", dpi=120)
summary = {"full": FULL, "cache_blocks": BLOCKS, "tps": tps, "gain": gain, "hit_rate": hit,
           "paper_gain": PAPER_GAIN}
(OUT / "dafs_fig8.json").write_text(json.dumps(summary, indent=2))
print(f"figure -> {OUT / 'dafs_fig8.png'}")

# %% [markdown]
# ## Where the simulation agrees with the paper, where it differs, and why
#
# **Agrees: the cache pays once it holds the working set.**  The full run
# (`fedsim run configs/fedfs/dafs_fig8.yaml`: 4 servers, 16 clients, 2,000 reads each,
# 75 % of them remote) gives +3 % with 64 blocks (256 KiB) per server, +9 % with 256
# (1 MiB), **+43 % with 1,024 (4 MiB; 80 % hits)** and +56 % with 4,096 (16 MiB, every
# remote block fits; 92 % hits).  A cache smaller than a server's share of the remote files (about
# 4 MiB here) gains little: PostMark reads its files uniformly at random, so LRU evicts
# blocks before their reuse.  The paper's "about 35 %" lies between our 1 MiB and 4 MiB
# points; it does not give its cache size, so the comparable claim is the shape: a few
# tens of percent once the cache is big enough.
#
# **Why the gain can exceed the paper's.**  What the cache saves here is mostly link
# time: without it a remote read's data crosses two links (home -> accessing server ->
# client), each at 105 MB/s, 20-156 us for 2-16 KB; with it, one.  The messages saved
# are few (each read is still an `open` and a `close` at the file's home, which pins an
# open file: four messages become two, not none).  The paper's servers also paid CPU for
# the cache's own bookkeeping and copies, which the simulator does not charge (its cache
# lookup costs one `fedfs_op`, as any request), so it sits above the paper once the
# cache holds everything.  The constants are the calibration's, not fitted to 35 %.
#
# **Run length.**  The gain depends on how often a block is read again: with the paper's
# 30,000 transactions per client over 150 files every file is read about 200 times; the
# study's 2,000 reads give about 13 and the small CI run about 7, so the hit rate (and
# the gain) there is a lower bound of the long run's.
