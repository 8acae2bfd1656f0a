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
# # dNFSp Fig. 3: the same data in 1 to 128 files, NFS, dNFSp1 and dNFSp2
#
# Issue 25: dNFSp's two metadata coherence schemes are protocols on the same effects as
# FedFS (`fedsim/protocol/dnfsp/`), so the simulator prices them with the same network,
# CPU and disk models as NFS (`fedsim/protocol/nfs/`).  The `dnfsp_fig3` study
# (`configs/fedfs/dnfsp_fig3.yaml`) runs the paper's set-up (section 4.1): 4 meta-servers,
# 4 I/O daemons, 4 clients, each writing 50 MB split into 1 to 128 files, and times each step.
#
# **The paper's figure did not survive the text conversion**: its numbers are lost, and
# only its text's claims are quoted beside the simulated times (dNFSp2 "almost the same
# transfer time for all the given sizes", dNFSp1 "a significant performance degradation as
# the number of files grow", NFS "stable").  Every number here is simulated.
#
# Small by default (4 MB per client, 1 to 32 files; seconds); `FULL = True` or
# `FEDFS_FULL=1` runs the shipped config (50 MB per client, 1 to 128 files).

# %% tags=["parameters"]
FULL = False

# %%
import json

import matplotlib

from experiments.notebook import notebook_setup

matplotlib.use("Agg")
import matplotlib.pyplot as plt

FULL, ROOT, OUT = notebook_setup(FULL)

import experiments.dnfsp_fig3  # noqa: F401  (registers the study without an installed entry point)
from experiments import run_study
from fedsim.config import load

CONFIG = ROOT / "configs" / "fedfs" / "dnfsp_fig3.yaml"
SMALL = ["params.mb_per_client=4", "params.files=[1,4,16,32]"]
cfg = load(CONFIG, [] if FULL else SMALL)
result = run_study(cfg, str(CONFIG))
print(result.report)

# %%
val = {(r.case, r.metric): r.value for r in result.rows}
DESIGNS = list(cfg.params["designs"])
FILES = sorted(cfg.params["files"])
time_s = {d: [val[(f"design={d} files={n}", "time_s")] for n in FILES] for d in DESIGNS}
msgs = {d: [val[(f"design={d} files={n}", "messages")] for n in FILES] for d in DESIGNS}

fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
for d in DESIGNS:
    a1.plot(FILES, time_s[d], "o-", label=f"{d} (simulated)")
    a2.plot(FILES, msgs[d], "o-", label=d)
for ax in (a1, a2):
    ax.set_xscale("log", base=2)
    ax.set_xticks(FILES, [str(n) for n in FILES])
    ax.set_xlabel("files per client (same data)")
    ax.legend(fontsize=8)
a1.set_ylabel("execution time (s)")
a2.set_ylabel("messages between nodes")
fig.suptitle(f"dNFSp Fig. 3: {cfg.params['mb_per_client']} MB per client in x files (simulated; the paper's "
             "numbers are lost, its claims are in the report)", fontsize=10)
fig.tight_layout()
fig.savefig(OUT / "dnfsp_fig3.png", dpi=120)
summary = {"full": FULL, "files": FILES, "designs": DESIGNS, "time_s": time_s, "messages": msgs,
           "growth": {d: time_s[d][-1] / time_s[d][0] for d in DESIGNS}}
(OUT / "dnfsp_fig3.json").write_text(json.dumps(summary, indent=2))
print(f"figure -> {OUT / 'dnfsp_fig3.png'}")

# %% [markdown]
# ## What the simulation shows, and where it differs from the paper
#
# **NFS and dNFSp2 stay flat, as the paper says**: the same data in more files costs
# each design the per-file create, open and close, a few per cent of the time.
#
# **dNFSp1's O(n) search shows in the messages, hardly in the time.**  Every file a
# client creates is a miss at its meta-server, which asks the 3 others (the second
# panel: dNFSp1's messages grow about three times as fast as dNFSp2's, whose new names
# cost one token request each).  But the search is one concurrent `Multicast`, one
# round trip like dNFSp2's token request, and answering it costs each meta-server a
# stat; the network model (LogGP) charges a sender its gap per message and no CPU per
# message at a receiver.  The paper's degradation is the cost of those messages at
# user-level meta-servers over UDP, which this model does not charge, so dNFSp1 is
# within a per cent of dNFSp2 here.  The report prints the measured numbers.  Charging CPU
# per message end (the calibrated machine model with a user-level daemon's cost, `--set
# machine.model=calibrated --set machine.o_us=40 --set machine.L_us=30 --set
# machine.G_us_per_byte=0.008`) widens the gap only a little at the paper's size: 50 MB a
# client in 128 files took dNFSp1 9 % longer than in one file, dNFSp2 8 % (simulated here,
# 2.383 -> 2.606 s and 2.369 -> 2.558 s): 50 MB of data per client outweighs 3 messages per file.
#
# **NFS is faster than dNFSp here**, the reverse of the paper's "higher transfer rate"
# for dNFSp2: in this network model a receiving NIC is never the bottleneck, so the one
# NFS server takes the four clients' data at four links' speed, while each dNFSp write
# crosses the network twice (client -> meta-server -> I/O daemon, NFSp's forwarding).
