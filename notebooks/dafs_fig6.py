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
         "params.scale_clients_per_server=2", "params.scale_transactions=40", "params.migration_servers=[8]"]
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

MIGR_N, POLICIES = p["migration_servers"], p["migration_policies"]
MIGR_METRICS = ("tps", "speedup", "files_moved", "bytes_moved")
migration = {
    str(n): {pol: {m: val[(f"migration servers={n} policy={pol}", m)] for m in MIGR_METRICS} for pol in POLICIES}
    for n in MIGR_N
}

summary = {"migration": migration, "full": FULL, "servers": SERVERS, "sizes": SIZES, "tps": tps, "speedup": speedup,
           "paper_speedup": PAPER_SPEEDUP, "scale_servers": scale_n, "scale_speedup": scale_speedup}
(OUT / "dafs_fig6.json").write_text(json.dumps(summary, indent=2))
print(f"figure -> {OUT / 'dafs_fig6.png'}")

# %% [markdown]
# ## Where the simulation agrees with the paper, where it differs, and why
#
# The full run (`fedsim run configs/fedfs/dafs_fig6.yaml`, 300 transactions per client,
# 1-16 clients per server until the gain drops below 5 %):
#
# | file size | 2 servers | 4 servers | 8 servers |
# | --- | --- | --- | --- |
# | 2 KB | 1.62 | 2.81 | 5.08 |
# | 4 KB | 1.59 | 2.90 | 4.99 |
# | 8 KB | 1.60 | 2.89 | 5.15 |
# | 16 KB | 1.78 | 3.24 | 6.17 |
# | paper | - | 2.6 | 4.5 |
#
# Mean over the sizes: **2.96 on 4 (+14 %) and 5.35 on 8 (+19 %)**, inside the 20 % target,
# 2-8 KB files each within it; 16 KB files scale better than the paper (+25 %, +37 %).
#
# **Why the speedup is not linear although no file access is remote.**  Routing by the
# hash makes every *file* access local, but PostMark's creates and deletes also change
# their parent directory, whose virtual directory lives at the parent's manager: with one
# server that is the same node, with N servers it is another node with probability
# (N-1)/N, so each create and delete costs an `AddEntry`/`DelEntry` round trip and the
# handler's CPU at a second server.  The one-server baseline pays none of that, so the
# speedup falls short of N, more so as N grows.
#
# **File size.**  Larger files lower throughput, as in the paper ("the latency from
# client-server data transfers dominates"): with `client_link` a reply carrying file data
# occupies the server's link for its bytes (105 MB/s: 156 us for 16 KB), a resource every
# client of that server shares; 16 KB files run at half the rate of 2 KB ones on one
# server.  The same link makes the speedup grow with the file size: one server is
# limited by its one link, N servers have N, and the namespace overhead weighs less
# against a longer data transfer.  That is where we exceed the paper: its servers'
# speedup, it says, was limited by CPU saturation, which for large files the simulator
# does not reach before the link does.
#
# **What is not modelled.**  The paper's server CPUs saturate on DAFS request processing
# and VIA interrupts; here a server's cost is the calibrated per-operation CPU and disk
# costs (`fedsim/calibration.py`, the ext2 storage model) and LogGP messages.  The
# constants were not tuned to these speedups: where they match, it is the namespace
# traffic and the link, not a fitted constant.
#
# **Beyond the paper (16-256 servers, 4 clients per server, 100 transactions each).**
# Throughput keeps growing (speedups 7.7, 20.8 and 49.1 on 16, 64 and 256 servers), but
# per-server throughput falls (7,440 on one server, 3,567 on 16, 1,426 on 256).  Part of
# that is how PostMark's throughput is measured: from the first client's first
# transaction to the last client's last, so with 1,024 short clients the start skew of
# the pool phase and the most loaded server (the hash's max/mean grows with N at a fixed
# number of files per server, Table I) set the span.  Whether longer runs close the gap
# is not settled here: the full-length run at 256 servers takes hours on this machine.

# %% [markdown]
# ## The paper's open question: does load-based migration give better speedups?
#
# Section VI-C ends: "file migration to relocate files based on load information ...
# will help us achieve better speedups".  The study reruns the scaling configuration
# (4 KB files, 4 clients per server, 100 transactions each) at 8 and 64 servers with the
# dynamics issue's `load_based` policy off and on (`params.migration_*`; the policy's
# period shortened to 10 ms so a run of a tenth of a simulated second sees several
# rounds), and counts the files and bytes moved.
#
# The full run (`fedsim run configs/fedfs/dafs_fig6.yaml`, default policy knobs: threshold
# 25 % over the mean a node knows):
#
# | servers | migration | tx/s | speedup | vs off | files moved | KiB moved | remote share |
# | --- | --- | --- | --- | --- | --- | --- | --- |
# | 8 | none | 35,427 | 4.76 | | 0 | 0 | 0.000 |
# | 8 | load_based | 34,094 | 4.58 | -3.8 % | 0 | 0 | 0.000 |
# | 64 | none | 154,964 | 20.83 | | 0 | 0 | 0.000 |
# | 64 | load_based | 136,829 | 18.39 | -11.7 % | 130 | 520 | 0.001 |
#
# **The answer here is no, and the reason is the workload.**  PostMark's accesses are
# uniform over a client's files, files are short-lived, and with placement at the
# manager and clients routing by the hash every access is already local; the load left
# to balance is the hash's own imbalance (Table I) and the noise of short runs: at 8
# servers no node sees itself 25 % above the mean it knows, at 64 (more nodes, each
# knowing the others' loads only through gossip) some do.  At 8 servers no node passes the threshold and nothing
# moves, yet throughput drops 3.8 %: the policy's load gossip and its periodic work cost
# server CPU and messages for nothing.  At 64 servers 130 files (520 KiB) move and
# throughput drops 11.7 %: the same periodic work, now at 64 nodes, and copies that
# do not pay back (about a third of PostMark's files are deleted within the run, and a
# moved file's requests still reach its manager, since clients route by the hash, not
# by the home, and the manager forwards them).  The period is short on purpose (10 ms,
# so that a 0.1 s run sees the policy act); a longer period costs less and does less.
#
# With the threshold at 5 % (`--set protocol.migration_threshold=0.05`) the policy acts
# at both sizes: at 8 servers 121 files (484 KiB) move and throughput is **+2.5 %**
# over no migration (4.88 against 4.76, the paper 4.5), the one gain measured; at 64
# servers 1,035 files (4.0 MiB) move and throughput is -4.9 %.  One seed each, so
# differences of a few per cent are not settled.  Migration pays where load is skewed and persistent (the
# `migration` study's Zipf workload); for PostMark the paper's hope would need clients
# that route to a file's current home, not its manager, and files that live long
# enough for a move to be repaid.  A skewed PostMark (some clients far busier than
# others) is not run here.
