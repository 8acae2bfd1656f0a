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
# # Every design side by side, 1 to 64 servers (and to 1,024)
#
# Issue 25's last study, the figure a researcher would put in a related-work section: FedFS,
# Ursa Minor (FedFS with `rename: redistribute`), NFS, NFSp, dNFSp1, dNFSp2 and mNFS, each its
# protocol package under the same network, CPU and disk models, on the SPEC SFS97 mix, on
# PostMark and on the Harvard EECS mix (Ursa Minor's Table 4), as the cluster grows; throughput at
# saturation (clients per server added until it grows by less than 5 %, the papers' method),
# latency below saturation, messages between nodes per operation; under the VIA preset, the
# InfiniBand preset and this machine's calibrated profile (`fednode calibrate`'s, where
# `experiments.validation` keeps it; skipped, and the report says so, where none was taken).
#
# Small by default (1, 2 and 4 servers, 1, 2 and 4 clients per server, small workloads:
# seconds); `FULL = True` or `FEDFS_FULL=1` runs the shipped config (1 to 64 servers);
# `configs/fedfs/designs_scale_large.yaml` takes FedFS, Ursa Minor and dNFSp2 to 1,024 (not run here).
#
# **No paper measured these designs on one workload**: every curve is simulated, measured by
# this study.  The papers' own numbers (Federated DAFS Fig. 6's FedFS speedups, mNFS Table 3
# and its abstract) are printed beside ours in the report, labelled as the paper's: they are
# other workloads on other hardware, so the direction is what compares.

# %% tags=["parameters"]
FULL = False

# %%
import json

import matplotlib

from experiments.notebook import notebook_setup

matplotlib.use("Agg")
import matplotlib.pyplot as plt

FULL, ROOT, OUT = notebook_setup(FULL)

import experiments.designs_scale  # noqa: F401  (registers the study without an installed entry point)
from experiments import run_study
from fedsim.config import load
from fedsim.plot import read_rows, summarize
from fedsim.results import write_csv

CONFIG = ROOT / "configs" / "fedfs" / "designs_scale.yaml"
SMALL = ["workload.files=150", "workload.dirs=8", "params.ops_per_client=20", "workload.postmark.number=15",
         "workload.postmark.transactions=30", "params.servers=[1,2,4]", "params.clients_per_server=[1,2,4]"]
cfg = load(CONFIG, [] if FULL else SMALL)
result = run_study(cfg, str(CONFIG))
print(result.report)

# %%
write_csv(OUT / "designs_scale.csv", "designs_scale", cfg.seed, result.rows)
rows = read_rows(OUT / "designs_scale.csv")  # the case's key=value words as columns
WORKLOADS = list(cfg.params["workloads"])
DESIGNS = list(cfg.params["designs"])
PROFILES = [p for p in cfg.params["profiles"] if any(r.get("profile") == p and r.get("design") for r in rows)]
METRICS = [("tps", "throughput at saturation"), ("latency_us", "latency below saturation (us)"),
           ("messages_per_op", "messages per operation")]
cols = [(w, p) for w in WORKLOADS for p in PROFILES]
fig, axes = plt.subplots(len(METRICS), len(cols), figsize=(3.6 * len(cols), 3.0 * len(METRICS)), squeeze=False)
data: dict = {}
for j, (w, p) in enumerate(cols):
    for i, (metric, label) in enumerate(METRICS):
        ax = axes[i][j]
        stats = summarize(rows, "servers", metric, hue="design", where={"workload": w, "profile": p})
        for d in DESIGNS:
            ss = stats.get(d, [])
            ax.plot([s.x for s in ss], [s.mean for s in ss], "o-", label=d, ms=3)
            data.setdefault(w, {}).setdefault(p, {}).setdefault(d, {})[metric] = [s.mean for s in ss]
            data[w][p][d]["servers"] = [s.x for s in ss]
        ax.set_xscale("log", base=2)
        if metric == "tps":
            ax.set_yscale("log")
            ax.set_title(f"{w}, {p}", fontsize=9)
        ax.set_xlabel("servers")
        ax.set_ylabel(label, fontsize=8)
        ax.grid(True, alpha=0.3)
axes[0][0].legend(fontsize=7)
fig.suptitle("Every design side by side (simulated; no paper reports these together)", fontsize=10)
fig.tight_layout()
fig.savefig(OUT / "designs_scale.png", dpi=110)
errors = {w: {p: {d: sum(float(r["value"]) for r in rows if r["metric"] == "errors" and r.get("workload") == w
                         and r.get("profile") == p and r.get("design") == d) for d in DESIGNS} for p in PROFILES}
          for w in WORKLOADS}  # fmt: skip
summary = {"full": FULL, "workloads": WORKLOADS, "profiles": PROFILES, "designs": DESIGNS, "data": data,
           "errors": errors}
(OUT / "designs_scale.json").write_text(json.dumps(summary, indent=2))
print(f"figure -> {OUT / 'designs_scale.png'}")

# %% [markdown]
# ## What the simulation shows, and why
#
# **FedFS grows with its servers; NFS does not.**  FedFS's names and files are spread over the
# servers by the hash (its clients send each PostMark call to the name's manager), so each
# server added adds its CPU and disk.  NFS's one server serves every operation: from two
# servers on, a client at another node pays a round trip per call, and PostMark's throughput
# falls below the one-server point; SFS97's rises a little on the way (the client side of each
# call leaves the server's node), then stays flat.
#
# The shipped config's run under the VIA preset (`--set 'params.profiles={via: {network:
# {preset: via_clan}}}'`, about 40 min on a shared two-core machine) gives, from 1 to 64
# servers, throughput at saturation: SFS97 FedFS 24,691 -> 969,967 ops/s (39x), NFS
# 26,693 -> 52,263 (2.0x, flat from 8 servers on at about 40-50k), mNFS 23,442 -> 169,878
# (7.3x, flattening), dNFSp2 26,720 -> 179,842 (with failed operations, below); PostMark FedFS
# 7,620 -> 102,432 tx/s (13x), NFS 8,208 -> 4,214 (0.51x), NFSp 7,878 -> 2,826 (0.36x), mNFS
# 6,489 -> 6,203 (flat), dNFSp1 -> 56,222 and dNFSp2 -> 70,811.  Messages per PostMark
# operation on 64 servers: FedFS 6.0, NFS 5.6, NFSp 9.3, dNFSp2 7.2, dNFSp1 27.8, mNFS 224.5.
#
# **NFSp and dNFSp between them.**  NFSp moves the data to I/O daemons, which helps SFS97's
# reads and writes, but every operation still passes its one meta-server, and PostMark's small
# files pay the second hop.  dNFSp spreads the meta-servers (the lower half of the nodes):
# dNFSp1 asks every other meta-server on each miss (its messages per operation grow with the
# meta-servers), dNFSp2 asks one hash server per name.
#
# **mNFS's messages grow with every server.**  Each request is multicast to all servers (the
# paper: "the number of cluster nodes does not affect the time of NFS request transmission" on
# IP multicast; here each copy is a message the sender's NIC spaces by LogGP's gap), so its
# messages per operation grow linearly, and metadata writes are applied by every server.
# Striped data helps SFS97's reads and writes; PostMark's creates and deletes, applied
# everywhere, do not grow.
#
# **Profiles.**  InfiniBand's smaller overheads make every remote call cheaper, so the designs
# that send more messages per operation gain most.  The calibrated profile runs each server on
# a host like this machine (2 cores, its Python agents' measured CPU per message, request and
# call), the clients as processes on their server's host: every message costs CPU at both ends,
# so throughput is an order of magnitude below the presets' and latency higher.  There the
# one-server point has every client's CPU on the server's own host: as the clients spread over
# more hosts, even NFS's one server gets more of its cores, so NFS grows too (less than FedFS).
#
# **Known failure, reported not hidden: dNFSp2 under concurrent clients.**  With several
# clients on several meta-servers, dNFSp2 fails some stat/open calls with ENOENT on files that
# exist (it happens with SFS97's remove share set to 0 too: 206 of 1,920 operations on 16
# servers, 64 clients).  The token's transfer is not serialised: the hash server records the
# new holder A at once, before the token reaches A; C, told to ask A, gets A's empty answer
# (A has no copy yet) and installs "no such name".  The report's last lines count the failed
# operations per design; they are not in the throughput, so dNFSp2's curve is optimistic
# where they appear.  Two quick fixes were tried and do not work in the runtime's model:
# making askers wait (`Await`) for the token deadlocks the bounded per-depth worker pools
# (a meta-server serves its own clients' procedures one stage shallower than forwarded ones,
# so a waiter can hold the very pool the transfer needs), and answering "not yet" with the
# asker polling livelocks (55 ops/s, 196 messages per operation on 16 servers).  The fix
# belongs in `fedsim/protocol/dnfsp/meta.py`: a hash server that queues a name's transfers and
# names the next holder only once the previous one has its token.  dNFSp1's few failures are
# its promised weaker coherence (a copy fetched once is never updated: a file removed at
# another meta-server is still listed here).
