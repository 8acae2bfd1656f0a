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
# # FedFS section 2.2: how good is a Bloom summary of a directory tree?
#
# The paper summarises each node's directories in "2^20 bits (128KB)" and reports, for
# 185,060 directory pathnames inserted and 109,526 not inserted, 208 collisions and 477
# false positives with k=3 hash functions, and 1 and 8 with k=5.  It does not say how the
# bits are laid out.  The `bloom_summary` study (`fedsim run
# configs/fedfs/bloom_summary.yaml`) measures each layout on a synthetic directory tree
# and fits the paper's four counts to the theory of each layout.
#
# Small by default (16 Kibit summaries, 3,000 + 2,000 keys: the measured rates then belong
# to that geometry, while the fit to the paper always uses the paper's geometry);
# `FULL = True` or `FEDFS_FULL=1` runs the paper's size (a few seconds).

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
from experiments.bloom_summary import PAPER_COUNTS, PAPER_INVALID, PAPER_VALID
from fedsim.config import load

CONFIG = ROOT / "configs" / "fedfs" / "bloom_summary.yaml"
sets = [] if FULL else ["params.bits=16384", "params.valid=3000", "params.invalid=2000"]
cfg = load(CONFIG, sets)
result = run_study(cfg, str(CONFIG))
print(result.report)

# %%
val = {(r.case, r.metric): r.value for r in result.rows}
LAYOUTS = ["shared", "per_hash", "partitioned"]
KS = [3, 5]
n_valid, n_invalid = val[("keys", "valid")], val[("keys", "invalid")]
fp_rate = {f"k={k} {lay}": val[(f"k={k} layout={lay}", "false_positives")] / n_invalid for k in KS for lay in LAYOUTS}
theory_rate = {f"k={k} {lay}": val[(f"k={k} layout={lay}", "theory_false_positives")] / n_invalid
               for k in KS for lay in LAYOUTS}
chi2 = {lay: val[(f"fit layout={lay}", "chi2_theory_vs_paper")] for lay in LAYOUTS}
best = next(lay for lay in LAYOUTS if val[(f"fit layout={lay}", "best_fit")] == 1.0)

fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
names = list(fp_rate)
ax.bar(range(len(names)), [fp_rate[n] for n in names], color=["C0", "C1", "C2"] * 2, label="measured")
ax.plot(range(len(names)), [theory_rate[n] for n in names], "k_", ms=18, mew=2, label="theory")
for k, xs in ((3, (-0.4, 2.4)), (5, (2.6, 5.4))):
    ax.hlines(PAPER_COUNTS[k][1] / PAPER_INVALID, *xs, colors="red", linestyles="--",
              label="paper (its geometry)" if k == 3 else None)
ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
ax.set_yscale("log")
ax.set_ylabel("false-positive rate")
ax.set_title(f"measured at {cfg.params['bits']} bits, {int(n_valid)} keys", fontsize=9)
ax.legend(fontsize=7)
ax2.bar(LAYOUTS, [chi2[lay] for lay in LAYOUTS], color=["C0", "C1", "C2"])
ax2.axhline(13.28, color="red", ls="--", lw=1, label="1% critical value (4 dof)")
ax2.set_yscale("log")
ax2.set_ylabel("X^2, theory vs the paper's 4 counts")
ax2.set_title(f"which layout fits the paper? best: {best}", fontsize=9)
ax2.legend(fontsize=7)
fig.tight_layout()
fig.savefig(OUT / "bloom_summary.png", dpi=120)
(OUT / "bloom_summary.json").write_text(json.dumps({
    "full": FULL, "chi2_theory_vs_paper": chi2, "best_fit": best, "measured_fp_rate": fp_rate,
    "theory_fp_rate": theory_rate,
    "paper_fp_rate": {f"k={k}": PAPER_COUNTS[k][1] / PAPER_INVALID for k in KS},
    "paper_collision_rate": {f"k={k}": PAPER_COUNTS[k][0] / PAPER_VALID for k in KS},
}, indent=2))
print(f"figure -> {OUT / 'bloom_summary.png'}")

# %% [markdown]
# ## Where the simulation agrees with the paper, where it differs, and why
#
# **Agrees, with one layout.**  The paper's counts fit a summary in which *each hash
# function has its own 2^20-bit array* (`per_hash`): its theory predicts 206 collisions
# and 464 false positives at k=3 (paper: 208 and 477) and 3.6 and 12 at k=5 (paper: 1 and
# 8), a chi-square fit with p around 0.45; the full-size run measures 219/447 and 5/18.
#
# **Differs, for the literal reading.**  One shared 2^20-bit array holding 185,060 keys
# with k=3 is 41 % full and answers "maybe" for about 7 % of absent directories, fifteen
# times the paper's 0.44 %; a partitioned array behaves the same.  Both are rejected with
# p < 1e-300.  So the paper's "2^20 bits (128KB)" is best read as the size of one hash
# function's array; the whole summary is then k x 128 KB.
#
# **Why measured and theory agree so closely.**  The keys are synthetic directory
# pathnames (the paper's are not available) and the hashes are good, so the structure of
# the keys does not change the rates: measurement and theory differ by sampling noise.

# %%
