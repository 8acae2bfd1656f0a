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
# # Availability under crashes: failed operations and files lost, with and without replication
#
# FedFS section 3.2 proposes primary/secondary replication ("the manager gives out the
# primary, and the secondary when the primary is down") and section 3.3 crash handling by
# soft state; the prototype measured neither.  This notebook runs the `availability` study
# (`configs/fedfs/availability.yaml`): every member runs a client (creates, overwrites,
# reads, stats, unlinks) while a seeded random schedule crashes members: most restart with
# their disk, some (`disk_loss`) are gone for good and a fresh node joins instead.  Crashes
# are detected by heartbeats and the crashed node evicted (a view change).  Each schedule
# runs with one copy of each file (`replicas: 1`) and with two (`replicas: 2`).  At the end,
# every file whose content was acknowledged is read back.
#
# Small by default (8 nodes, 4 s of workload per run); `FULL = True` or `FEDFS_FULL=1`
# runs the shipped config (8 and 16 nodes, 6 s per run).

# %% tags=["parameters"]
FULL = False

# %%
import json

import matplotlib

from experiments.notebook import notebook_setup

matplotlib.use("Agg")
import matplotlib.pyplot as plt

FULL, ROOT, OUT = notebook_setup(FULL)

from fedsim.config import load
from fedsim.studies import run_study

CONFIG = ROOT / "configs" / "fedfs" / "availability.yaml"
sets = [] if FULL else ["params.nodes=[8]", "params.duration_s=4.0"]
cfg = load(CONFIG, sets)
result = run_study(cfg, str(CONFIG), module="experiments.availability")
print(result.report)

# %%
rows: dict[tuple[int, int, str], dict[str, float]] = {}
for r in result.rows:
    f = dict(kv.split("=") for kv in r.case.split())
    rows.setdefault((int(f["nodes"]), int(f["replicas"]), f["schedule"]), {})[r.metric] = r.value
sizes = sorted({n for n, _, _ in rows})
schedules = list(dict.fromkeys(s for _, _, s in rows))
replicas = sorted({k for _, k, _ in rows})

fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
width = 0.8 / (len(replicas) * len(sizes))
panels = [("failed_share", "theory_failed_share", "share of operations that failed"),
          ("files_lost", "theory_files_lost", "acknowledged files lost"),
          ("unreadable_file_s", None, "unreadable file-seconds")]
for ax, (metric, theory, label) in zip(axes, panels, strict=True):
    k = 0
    for n in sizes:
        for rep in replicas:
            xs = [i + k * width for i in range(len(schedules))]
            ys = [rows[(n, rep, s)][metric] for s in schedules]
            ax.bar(xs, ys, width, label=f"replicas {rep}, {n} nodes")
            if theory:
                th = [rows[(n, rep, s)][theory] for s in schedules]
                ax.plot(xs, th, "k_", ms=14, mew=2)
            k += 1
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(schedules))], schedules)
    ax.set_ylabel(label)
    ax.grid(True, axis="y", alpha=0.3)
axes[0].legend(fontsize=7)
axes[0].text(0.01, 0.97, "black ticks: theory", transform=axes[0].transAxes, fontsize=7, va="top")
fig.suptitle(f"Random crash schedules, simulated{'' if FULL else ' (small)'}", fontsize=10)
fig.tight_layout()
fig.savefig(OUT / "availability.png", dpi=120)
KEEP = ("crashes", "permanent", "ops", "failed_share", "theory_failed_share", "failed_unavailable",
        "failed_client_crashed", "failed_other", "ops_hung", "files_acked", "files_lost", "theory_files_lost",
        "files_resurrected", "recovery_errors", "detected", "detect_mean_s", "detect_max_s",
        "unwritable_file_s", "unreadable_file_s")
summary = {"full": FULL, "nodes": sizes, "replicas": replicas, "schedules": schedules,
           "overlap": {s["name"]: bool(s.get("overlap", False)) for s in cfg.params["schedules"]},
           "heartbeat_s": cfg.protocol.heartbeat_s, "heartbeat_misses": cfg.protocol.heartbeat_misses,
           "runs": {f"{n} {rep} {s}": {m: rows[(n, rep, s)][m] for m in KEEP}
                    for n in sizes for rep in replicas for s in schedules}}
(OUT / "availability.json").write_text(json.dumps(summary, indent=2))
print(json.dumps(summary, indent=1))

# %% [markdown]
# ## What the simulation shows, and why
#
# No paper number to compare: the FedFS prototype had no replication and no crash
# handling.  Theory is printed beside each row instead, and the black ticks above:
#
# * **Failed operations.**  An operation fails when it needs a down node: the home of the
#   file it touches, the manager of the name it creates or unlinks, the manager of the
#   parent directory whose entry changes.  The study counts those operations as they are
#   issued, from the local trees (its "theory" column); with one copy the measured share
#   equals it to the operation in every one-at-a-time run whose restarts worked.  With two
#   copies, reads and stats of a file whose home is down are served by the secondary, so
#   only the changes need the home; but a change is acknowledged only once both copies
#   hold it, so a change also needs the home's secondary: a crash fails the changes of its
#   own files and of its predecessor's, until its eviction (about `heartbeat_misses *
#   heartbeat_s` plus the check), when the predecessor copies to its new successor.  The
#   failed share with two copies is then about that of one copy (8 nodes: 0.0183 against
#   0.0190 with restarts, 0.0120 against 0.0133 with lost disks; 16 nodes: 0.0053 against
#   0.0074, 0.0100 against 0.0141), twice what it was while a primary acknowledged with
#   one copy (0.0075, 0.0064, 0.0026, 0.0037), the price of never losing an acknowledged
#   change with a primary cut off; the unreadable file-seconds stay near nothing (the
#   primary's files are readable from the secondary from the first timeout on).
# * **Time to detect.**  Heartbeats every 50 ms, suspicion after 3 silent periods, then
#   the coordinator's check (one RPC timeout, 20 ms): 0.17 to 0.21 s from crash to
#   eviction.  A node restarted before that is evicted by its own `recover`.
# * **Files lost.**  With one copy, a transient crash loses nothing (the node comes back
#   with its disk); a lost disk loses exactly the acknowledged files it held (the
#   "theory lost" column, taken from its local tree when it crashed).  With two copies and
#   one failure at a time, nothing acknowledged may be lost.
# * **Overlapping failures** (the last row of each size) leave the promise: two adjacent
#   members down lose both copies of a file; a coordinator or a watcher that is down
#   leaves a crash unnoticed ("not evicted within 5 s"); restarts fail while their seed is
#   down.  These rows show what breaks; they are not checked.
#
# The full run (`FULL = True`: 8 and 16 nodes, 6 s each, merged crash f964c3b and
# replication 6071063) met the theory in every one-at-a-time row whose restarts worked;
# three rows did not (8 nodes two copies transient, 16 nodes one copy transient, 16 nodes
# two copies disk loss), and files came back after an unlink in three, each for a bug the
# study found (listed under the table with its run):
#
# * a node restarted *before* its crash was detected can take the eviction of its old
#   incarnation for its own: its fresh object first installs the old view that still
#   lists it, then the view without it, marks itself evicted, and keeps refusing every
#   request even once it has joined again (8 nodes, two copies: recover fails; 16 nodes,
#   one copy: node 11 a member of the last view, evicted, 24 files unreadable);
# * a restarting node serves reads and writes from its old local tree before it has
#   rejoined (and before reconcile): a write acknowledged there is undone by reconcile (a
#   read of other bytes than the last acknowledged write; seen at 16 nodes, two copies,
#   before the crash branch's last commit);
# * with two copies, files unlinked while their home was down come back with it (the
#   "back" column: reconcile keeps a local file that no other member holds);
# * a request in flight at a node when it crashes is never answered and its caller waits
#   for ever ("hung": the simulator arms the RPC timeout only for a destination that is
#   already down when the request leaves).
