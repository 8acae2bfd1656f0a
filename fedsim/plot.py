"""Quick figures from tidy results: ``fedsim plot RESULTS --x PARAM --y METRIC [--hue PARAM]``.

RESULTS is a sweep's output directory, its ``results.csv``, or the
``results.csv`` of ``fedsim run``.  A ``case`` cell made of ``key=value``
words (``dt_entries=16 locality=0.9``, as the studies write them) also gives
columns named after its keys, so a single study run can be plotted the same way.

Each (x, hue) group is averaged over seeds and drawn with a 95 % confidence
interval from Student's t distribution (none for a single seed).  The same
functions serve the notebooks: :func:`read_rows`, :func:`summarize`.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedsim.schema import ConfigError

# Student's t, 97.5 % quantile, by degrees of freedom (two-sided 95 % interval).
_T975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)


def t975(dof: int) -> float:
    """97.5 % quantile of Student's t with ``dof`` degrees of freedom (table to
    30, then the 1/dof expansion toward 1.96, within 0.1 % of the exact value)."""
    if dof < 1:
        raise ValueError("dof must be >= 1")
    if dof <= len(_T975):
        return _T975[dof - 1]
    return 1.959964 + 2.37 / dof + 2.8 / dof**2


@dataclass(frozen=True, slots=True)
class Stat:
    """One plotted point: the mean over ``n`` seeds and its 95 % interval."""

    x: Any
    mean: float
    lo: float
    hi: float
    n: int


def _num(s: str) -> Any:
    try:
        v = float(s)
    except ValueError:
        return s
    return int(v) if v.is_integer() and "." not in s and "e" not in s.lower() else v


def read_rows(path: str | Path) -> list[dict[str, str]]:
    """Rows of a results.csv (or of a directory holding one), with the
    ``key=value`` words of ``case`` as extra columns."""
    p = Path(path)
    if p.is_dir():
        p = p / "results.csv"
    try:
        with p.open(newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read results: {exc.strerror}") from None
    if rows and not {"metric", "value"} <= set(rows[0]):
        raise ConfigError(f"{p}: not a results file (no metric/value columns)")
    for r in rows:
        for word in r.get("case", "").split():
            k, eq, v = word.partition("=")
            if eq and k and k not in r:
                r[k] = v
    return rows


def _order(values: list[Any]) -> list[Any]:
    uniq = list(dict.fromkeys(values))
    if all(isinstance(v, int | float) for v in uniq):
        return sorted(uniq)
    return uniq


def summarize(
    rows: list[dict[str, str]], x: str, y: str, hue: str | None = None, where: dict[str, str] | None = None
) -> dict[Any, list[Stat]]:
    """hue value (None without --hue) -> one Stat per x value, over seeds.

    Raises ConfigError when a column is unknown, the metric is absent, or the
    rows of one (x, hue, seed) still differ in another column (the figure would
    silently average unlike things)."""
    if not rows:
        raise ConfigError("no result rows to plot")
    cols = [c for c in rows[0] if c not in ("value",)]
    for name, col in (("--x", x), ("--hue", hue), *((f"--where {k}", k) for k in (where or {}))):
        if col is not None and not any(col in r for r in rows):
            raise ConfigError(f"{name} {col}: no such column; columns: {', '.join(cols)}")
    sel = [r for r in rows if r["metric"] == y and all(r.get(k) == v for k, v in (where or {}).items())]
    if not sel:
        metrics = sorted({r["metric"] for r in rows})
        shown = ", ".join(metrics[:30]) + (" ..." if len(metrics) > 30 else "")
        raise ConfigError(f"--y {y}: no rows with this metric{' (after --where)' if where else ''}; metrics: {shown}")
    groups: dict[tuple[Any, Any, str], list[dict[str, str]]] = defaultdict(list)
    for r in sel:
        groups[(_num(r.get(x, "")), _num(r[hue]) if hue else None, r.get("seed", ""))].append(r)
    for key, members in groups.items():
        if len(members) > 1:
            varying = [c for c in members[0] if c not in ("value", "point") and len({m.get(c) for m in members}) > 1]
            detail = "; ".join(f"{c}: {', '.join(sorted({m.get(c, '') for m in members}))}" for c in varying[:3])
            raise ConfigError(
                f"{len(members)} rows for {x}={key[0]}{f', {hue}={key[1]}' if hue else ''}, seed {key[2]}: they "
                f"differ in {detail}; pick one with --where COLUMN=VALUE or split them with --hue COLUMN"
            )
    out: dict[Any, list[Stat]] = {}
    hues = _order([k[1] for k in groups])
    xs = _order([k[0] for k in groups])
    for h in hues:
        stats = []
        for xv in xs:
            vals = [float(m[0]["value"]) for k, m in groups.items() if k[0] == xv and k[1] == h]
            vals = [v for v in vals if not math.isnan(v)]
            if not vals:
                continue
            n = len(vals)
            mean = sum(vals) / n
            if n > 1:
                sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (n - 1))
                half = t975(n - 1) * sd / math.sqrt(n)
            else:
                half = 0.0
            stats.append(Stat(xv, mean, mean - half, mean + half, n))
        out[h] = stats
    return out


def plot(
    results: str | Path,
    x: str,
    y: str,
    hue: str | None = None,
    out: str | Path | None = None,
    where: list[str] | None = None,
    logx: bool = False,
    logy: bool = False,
    title: str | None = None,
) -> Path:
    """Draw ``y`` against ``x`` (one line per ``hue``), mean and 95 % CI over
    seeds; write PNG or PDF (by ``out``'s suffix; default a PNG beside the results)."""
    cond: dict[str, str] = {}
    for w in where or []:
        k, eq, v = w.partition("=")
        if not eq or not k:
            raise ConfigError(f"--where {w!r}: expected COLUMN=VALUE")
        cond[k] = v
    stats = summarize(read_rows(results), x, y, hue, cond)
    res = Path(results)
    base = res if res.is_dir() else res.parent
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in f"{y}_vs_{x}" + (f"_by_{hue}" if hue else ""))
    target = Path(out) if out is not None else base / f"plot_{safe}.png"
    if target.suffix.lower() not in (".png", ".pdf", ".svg"):
        raise ConfigError(f"--out {target}: the figure must be .png, .pdf or .svg")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    categorical = any(not isinstance(s.x, int | float) for ss in stats.values() for s in ss)
    labels = list(dict.fromkeys(s.x for ss in stats.values() for s in ss)) if categorical else []
    for h, ss in stats.items():
        xs = [labels.index(s.x) if categorical else s.x for s in ss]
        means = [s.mean for s in ss]
        label = f"{hue}={h}" if hue else None
        (line,) = ax.plot(xs, means, "o-", label=label)
        if any(s.n > 1 for s in ss):
            ax.fill_between(xs, [s.lo for s in ss], [s.hi for s in ss], color=line.get_color(), alpha=0.2, lw=0)
    if categorical:
        ax.set_xticks(range(len(labels)), [str(v) for v in labels], rotation=30, ha="right")
    n_seeds = max((s.n for ss in stats.values() for s in ss), default=1)
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(title or (f"{y} (mean, 95% CI over {n_seeds} seeds)" if n_seeds > 1 else y), fontsize=10)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
        means = [s.mean for ss in stats.values() for s in ss if s.mean > 0]
        if means:  # a wide interval over few seeds reaches below zero: keep the axis on the data
            ax.set_ylim(bottom=min(means) / 2)
    ax.grid(True, alpha=0.3)
    if hue:
        ax.legend(fontsize=8)
    fig.tight_layout()
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(target, dpi=120)
    plt.close(fig)
    return target
