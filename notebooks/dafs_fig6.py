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
# # Federated DAFS Fig. 6: PostMark throughput and speedup on 1-8 servers (and beyond)
#
# The paper drives Federated DAFS with PostMark clients ("a create/delete coupled with a
# file read operation (no writes)"), files of one size from 2 KB to 16 KB, on 1, 2, 4 and
# 8 servers, "increasing the number of clients until the server CPUs reached saturation",
# and reports speedups of **2.6 on four** and **4.5 on eight** servers.  Files live at
# their manager and clients route each request by the same hash, so no file access is
# remote (section VI-B).
#
# The `dafs_fig6` study (`fedsim run configs/fedfs/dafs_fig6.yaml`) does the same on the
# simulator: the PostMark generator (exact against the real binary), clients routed by
# `fedsim.protocol.routing` (`route: hash`), clients across a cLAN-like link
# (`client_link`, preset `via_clan`), clients per server raised until throughput gains
# less than 5 %.  Then 16, 64 and 256 servers at a fixed load per server.  Small by
# default (fewer servers, sizes and transactions); `FULL = True` or `FEDFS_FULL=1` runs the
# config as it is.

# %% tags=["parameters"]
FULL = False

# %%
import json

import matplotlib

from experiments.notebook import notebook_setup

matplotlib.use("Agg")
import matplotlib.pyplot as plt

FULL, ROOT, OUT = notebook_setup(FULL)

import experiments.dafs_fig6  # noqa: F401  (registers the study without an installed entry point)
from experiments import run_study
from experiments.dafs_fig6 import PAPER_SPEEDUP
from fedsim.config import load

CONFIG = ROOT / "configs" / "fedfs" / "dafs_fig6.yaml"
SMALL = ["workload.postmark.transactions=100", "workload.postmark.number=60", "params.servers=[1,2,4]",
         "params.sizes=[2048,16384]", "params.clients_per_server=[1,2,4]", "params.scale_servers=[16]",
         "params.scale_clients_per_server=2", "params.scale_transactions=40"]
cfg = load(CONFIG, [] if FULL else SMALL)
result = run_study(cfg, str(CONFIG))
print(result.report)

# %%
val = {(r.case, r.metric): r.value for r in result.rows}
p = cfg.params
SERVERS, SIZES = p["servers"], p["sizes"]
tps = {s: [val[(f"size={s} servers={n} saturated", "tps")] for n in SERVERS] for s in SIZES}
speedup = {s: [val[(f"size={s} servers={n} saturated", "speedup")] for n in SERVERS] for s in SIZES}
scale_n = [1, *p["scale_servers"]]
scale_speedup = [val[(f"scale servers={n}", "speedup")] for n in scale_n]

fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
w = 0.8 / len(SERVERS)
for j, n in enumerate(SERVERS):
    a1.bar([i + j * w for i in range(len(SIZES))], [tps[s][j] for s in SIZES], w, label=f"{n} server(s)")
a1.set_xticks([i + 0.4 - w / 2 for i in range(len(SIZES))], [f"{s // 1024} KB" for s in SIZES])
a1.set_ylabel("PostMark transactions/s (saturated)")
a1.legend(fontsize=8)
for s in SIZES:
    a2.plot(SERVERS, speedup[s], "o-", label=f"{s // 1024} KB")
a2.plot(list(PAPER_SPEEDUP), list(PAPER_SPEEDUP.values()), "ks", ms=9, label="paper")
a2.plot(SERVERS, SERVERS, "k:", lw=0.8, label="linear")
a2.set_xlabel("servers")
a2.set_ylabel("speedup over one server")
a2.legend(fontsize=8)
fig.suptitle("Fig. 6: PostMark throughput and speedup (simulated)", fontsize=10)
fig.tight_layout()
fig.savefig(OUT / "dafs_fig6.png", dpi=120)

summary = {"full": FULL, "servers": SERVERS, "sizes": SIZES, "tps": tps, "speedup": speedup,
           "paper_speedup": PAPER_SPEEDUP, "scale_servers": scale_n, "scale_speedup": scale_speedup}
(OUT / "dafs_fig6.json").write_text(json.dumps(summary, indent=2))
print(f"figure -> {OUT / 'dafs_fig6.png'}")

# %% [markdown]
# ## Where the simulation agrees with the paper, where it differs, and why
#
# **Why the speedup is not linear although no file access is remote.**  Routing by the
# hash makes every *file* access local, but PostMark's creates and deletes also change
# their parent directory, whose virtual directory lives at the parent's manager: with one
# server that is the same node, with N servers it is another node with probability
# (N-1)/N, so each create and delete costs an `AddEntry`/`DelEntry` round trip and the
# handler's CPU at a second server.  The one-server baseline pays none of that, so the
# speedup falls short of N, more so as N grows (the full run, 8 KB files: about 2.9 on 4
# and 5.1 on 8 servers, within 20 % of the paper's 2.6 and 4.5).
#
# **File size.**  Larger files lower throughput, as in the paper ("the latency from
# client-server data transfers dominates"): with `client_link` a reply carrying file data
# occupies the server's link for its bytes (105 MB/s: 156 us for 16 KB), which is a
# resource every client of that server shares.  Without it (clients on the servers) the
# size effect would nearly vanish.  The link also makes the speedup grow with the file
# size: a one-server federation is limited by its one link, N servers have N.  The paper
# reports a single pair of speedups; we print them per size and compare their mean.
#
# **What is not modelled.**  The paper's server CPUs saturate on DAFS request processing
# and VIA interrupts; here a server's cost is the calibrated per-operation CPU and disk
# costs (`fedsim/calibration.py`, the ext2 storage model) and LogGP messages.  The
# constants were not tuned to these speedups: where they match, it is the namespace
# traffic and the link, not a fitted constant.
#
# **Beyond the paper.**  At a fixed load per server, throughput keeps growing to 256
# servers: a create's directory update reaches one other server whatever N, and nothing
# in the protocol's fast path is global.
