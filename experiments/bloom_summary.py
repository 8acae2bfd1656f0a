"""FedFS section 2.2: how good is a Bloom summary of a directory tree?

The paper summarises a node's directories in "2^20 bits (128KB)" and reports,
for 185060 valid keys (directory pathnames inserted) and 109526 invalid keys
(pathnames not inserted):

* k=3 hash functions: 208/185060 collisions and 477/109526 false positives;
* k=5 hash functions: 1/185060 collisions and 8/109526 false positives.

It does not say how the bits are laid out, and the layout decides the error:
one shared 2^20-bit array at k=3 holding 185060 keys is ~41% full and answers
"maybe" for ~7% of the invalid keys, fifteen times the paper's 0.44%.  This
experiment rebuilds the measurement for each layout of
:class:`fedsim.protocol.summary.BloomSummary` on a synthetic directory tree,
prints it beside the theory and the paper's figures, and decides from the
numbers which layout the paper's figures fit: for each layout, a Pearson
chi-square distance between the paper's four counts and the theory's
expectation at the paper's geometry.

The paper's pathnames are not available.  The keys are synthetic directory
pathnames drawn from ``numpy.random.default_rng(seed)`` and shaped like a real
tree (a few top-level directories, a skewed fan-out, names of varying length,
pathnames averaging ~40 characters as the paper states).  The invalid keys are
siblings that do not exist: a real parent directory with a new name.  With a
good hash the structure of the keys does not change the rates; it is there so
the keys look like what a FedFS node would summarise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    field_validator,
    model_validator,
)

from fedsim.config import Config
from fedsim.protocol.summary import LAYOUTS, BloomSummary, expected_collisions, expected_fp_rate
from fedsim.results import StudyResult
from fedsim.schema import table as format_table
from fedsim.studies import register_study

LayoutName = Literal[LAYOUTS]  # type: ignore[valid-type]  # the summary's own list, not a copy
Row = tuple[str, str, float]

#: The paper's geometry and figures (FedFS, section 2.2).
PAPER_BITS = 2**20
PAPER_VALID = 185060
PAPER_INVALID = 109526
#: k -> (collisions among the valid keys, false positives among the invalid keys)
PAPER_COUNTS: dict[int, tuple[int, int]] = {3: (208, 477), 5: (1, 8)}

# Characters of synthetic names: mostly lower-case letters, some digits, '_' and '-'.
# No '.' (so no "." or ".." components) and no '/'.
_ALPHABET = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789_-", dtype=np.uint8)
_ALPHABET_P = np.r_[np.full(26, 0.9 / 26), np.full(10, 0.08 / 10), [0.01, 0.01]]


class Params(BaseModel):
    """Geometry, key counts and the shape of the synthetic directory tree."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    bits: PositiveInt = PAPER_BITS
    """Bits per array (shared, per_hash) or in all (partitioned), as BloomSummary."""
    valid: PositiveInt = PAPER_VALID
    """Directories inserted into the summary."""
    invalid: PositiveInt = PAPER_INVALID
    """Non-existent directories queried (false-positive probes)."""
    hashes: list[PositiveInt] = Field(default_factory=lambda: [3, 5], min_length=1)
    layouts: list[LayoutName] = Field(default_factory=lambda: ["shared", "per_hash", "partitioned"], min_length=1)
    top_dirs: PositiveInt = 20
    """Directories directly under "/" (depth 1)."""
    mean_depth: float = Field(default=5.0, ge=2.0, le=64.0)
    """Mean depth of the directories below depth 1 ("/a/b" has depth 2)."""
    max_depth: int = Field(default=24, ge=2, le=256)
    """Deepest directory generated."""
    fanout_skew: float = Field(default=1.5, ge=0.0, le=5.0)
    """Sigma of the log-normal weight of a directory as a parent; 0 = uniform fan-out,
    larger = a few huge directories (like /usr/share or /home) and many leaves."""
    mean_name_length: float = Field(default=7.0, ge=1.0, le=200.0)
    """Mean characters per path component (1 + Poisson)."""

    @field_validator("hashes", "layouts")
    @classmethod
    def _distinct(cls, value: list) -> list:
        if len(set(value)) != len(value):
            raise ValueError(f"entries must be distinct, got {value}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Params:
        if self.top_dirs > self.valid:
            raise ValueError(f"top_dirs ({self.top_dirs}) cannot exceed valid ({self.valid})")
        for k in self.hashes:
            for layout in self.layouts:
                expected_fp_rate(0, self.bits, k, layout)  # raises ValueError on bad geometry
        return self


# -- synthetic directory tree -------------------------------------------------------


def _names(rng: np.random.Generator, count: int, mean_length: float) -> list[str]:
    lengths = 1 + rng.poisson(mean_length - 1.0, size=count)
    chars = rng.choice(_ALPHABET, size=int(lengths.sum()), p=_ALPHABET_P)
    text = chars.tobytes().decode("ascii")
    ends = np.cumsum(lengths).tolist()
    starts = [0, *ends[:-1]]
    return [text[s:e] for s, e in zip(starts, ends, strict=True)]


def _level_sizes(params: Params, rng: np.random.Generator) -> list[int]:
    """Directories per depth 1..max_depth: top_dirs at depth 1, the rest Poisson-shaped.

    A level may only be populated if the one above it is, so a gap folds all deeper
    directories into the last populated level.
    """
    lam = params.mean_depth - 2.0  # depth - 2 ~ Poisson(lam), truncated at max_depth
    weights = np.array(
        [
            math.exp(j * math.log(lam) - lam - math.lgamma(j + 1)) if lam > 0 else float(j == 0)
            for j in range(params.max_depth - 1)
        ]
    )
    counts = rng.multinomial(params.valid - params.top_dirs, weights / weights.sum())
    sizes = [params.top_dirs, *counts.tolist()]
    for d in range(1, len(sizes)):
        if sizes[d] == 0:
            sizes[d - 1] += sum(sizes[d:])
            del sizes[d:]
            break
    return sizes


def _unique_paths(parents: Sequence[str], names: list[str], taken: set[str]) -> list[str]:
    """parent + "/" + name for each pair, renaming (name-2, name-3, ...) on clashes."""
    out = []
    for parent, name in zip(parents, names, strict=True):
        base = f"{parent}/{name}" if parent != "/" else f"/{name}"
        path, n = base, 1
        while path in taken:
            n += 1
            path = f"{base}-{n}"
        taken.add(path)
        out.append(path)
    return out


def make_keys(params: Params, seed: int) -> tuple[list[str], list[str], list[int]]:
    """Deterministic synthetic keys: (valid pathnames, invalid pathnames, valid depths).

    Valid keys are the directories of one random tree, all distinct.  Invalid keys
    are non-existent children of random existing directories (or of "/"), distinct
    from each other and from every valid key.
    """
    rng = np.random.default_rng(seed)
    sizes = _level_sizes(params, rng)
    valid: list[str] = []
    depths: list[int] = []
    taken: set[str] = set()
    level = ["/"]
    for depth, size in enumerate(sizes, start=1):
        weights = rng.lognormal(0.0, params.fanout_skew, size=len(level))
        parent_idx = np.sort(rng.choice(len(level), size=size, p=weights / weights.sum()))
        parents = [level[i] for i in parent_idx.tolist()]
        level = _unique_paths(parents, _names(rng, size, params.mean_name_length), taken)
        valid.extend(level)
        depths.extend([depth] * size)
    # invalid: a new name under an existing directory ("/" included), uniformly chosen
    candidates = ["/", *valid]
    parent_idx = rng.integers(0, len(candidates), size=params.invalid)
    parents = [candidates[i] for i in parent_idx.tolist()]
    invalid = _unique_paths(parents, _names(rng, params.invalid, params.mean_name_length), taken)
    return valid, invalid, depths


# -- statistics ---------------------------------------------------------------------


def chi2_sf(x: float, dof: int) -> float:
    """P(chi-square with ``dof`` degrees of freedom >= x), for even dof."""
    if dof <= 0 or dof % 2:
        raise ValueError(f"dof must be a positive even number, got {dof}")
    half = x / 2.0
    term, total = 1.0, 1.0
    for j in range(1, dof // 2):
        term *= half / j
        total += term
    return min(1.0, math.exp(-half) * total)


def _pearson(observed: Sequence[float], expected: Sequence[float]) -> float:
    return sum((o - e) ** 2 / e for o, e in zip(observed, expected, strict=True))


def _two_sample(a: Sequence[float], b: Sequence[float]) -> float:
    """Sum of (a-b)^2/(a+b): chi-square-like distance between two Poisson counts."""
    return sum((x - y) ** 2 / (x + y) for x, y in zip(a, b, strict=True) if x + y > 0)


def _fmt_p(p: float) -> str:
    return "<1e-300" if p == 0.0 else f"{p:.3g}"


def _kib(bits: int) -> str:
    return f"{bits / 8192:g}KiB"


# -- the experiment -------------------------------------------------------------------


def measure(params: Params, seed: int) -> tuple[list[Row], str]:
    """Measure collisions and false positives per (k, layout); compare with theory and paper.

    Returns tidy rows (case, metric, value) and a printable report.  Same seed,
    same params -> identical rows and report.
    """
    valid, invalid, depths = make_keys(params, seed)
    lengths = np.fromiter((len(p) for p in valid), dtype=np.int64, count=len(valid))
    rows: list[Row] = [
        ("keys", "valid", float(len(valid))),
        ("keys", "invalid", float(len(invalid))),
        ("keys", "mean_path_length", float(lengths.mean())),
        ("keys", "mean_depth", float(np.mean(depths))),
        ("keys", "max_depth", float(max(depths))),
    ]
    same_geometry = (params.bits, params.valid, params.invalid) == (
        PAPER_BITS,
        PAPER_VALID,
        PAPER_INVALID,
    )

    measured: dict[tuple[int, str], tuple[int, int]] = {}
    table = []
    for k in params.hashes:
        for layout in params.layouts:
            summary = BloomSummary(params.bits, k, layout)
            collisions = int(summary.add_many(valid).sum())
            false_pos = int(summary.contains_many(invalid).sum())
            measured[k, layout] = (collisions, false_pos)
            th_coll = expected_collisions(len(valid), params.bits, k, layout)
            th_fp = len(invalid) * summary.expected_fp_rate()
            case = f"k={k} layout={layout}"
            rows += [
                (case, "memory_bits", float(summary.total_bits)),
                (case, "fill_ratio", summary.fill_ratio()),
                (case, "collisions", float(collisions)),
                (case, "false_positives", float(false_pos)),
                (case, "theory_collisions", th_coll),
                (case, "theory_false_positives", th_fp),
            ]
            paper = PAPER_COUNTS.get(k)
            ratio = ("", "")
            if paper is not None:
                # ratios of rates, so they stay meaningful for other key counts
                r_coll = (collisions / len(valid)) / (paper[0] / PAPER_VALID)
                r_fp = (false_pos / len(invalid)) / (paper[1] / PAPER_INVALID)
                rows += [
                    (case, "paper_collisions", float(paper[0])),
                    (case, "paper_false_positives", float(paper[1])),
                    (case, "collision_rate_over_paper", r_coll),
                    (case, "false_positive_rate_over_paper", r_fp),
                ]
                ratio = (f"{r_coll:.2f}", f"{r_fp:.2f}")
            table.append(
                (
                    str(k),
                    layout,
                    _kib(summary.total_bits),
                    f"{summary.fill_ratio():.3f}",
                    str(collisions),
                    f"{th_coll:.1f}",
                    f"{paper[0]}" if paper else "-",
                    str(false_pos),
                    f"{th_fp:.1f}",
                    f"{paper[1]}" if paper else "-",
                    *ratio,
                )
            )

    lines = [
        f"FedFS section 2.2 -- Bloom directory-tree summary (seed {seed})",
        (
            f"keys: {len(valid)} valid directories (mean pathname {lengths.mean():.1f} "
            f"chars, depth 1..{max(depths)}, mean {np.mean(depths):.2f}); "
            f"{len(invalid)} invalid (non-existent siblings of real directories)"
        ),
        (
            f"bits={params.bits} (2^{math.log2(params.bits):.4g}): the one array (shared), "
            "each hash's own array (per_hash), or cut into k slices (partitioned)"
        ),
        "coll = valid keys whose k bits were all set before insertion; " + "fp = invalid keys reported present",
        "",
    ]
    header = (
        "k",
        "layout",
        "memory",
        "fill",
        "coll",
        "coll theory",
        "coll paper",
        "fp",
        "fp theory",
        "fp paper",
        "coll/paper",
        "fp/paper",
    )
    lines += format_table(header, table, left=2).splitlines()
    lines.append("(memory: bits of the whole summary; x/paper: measured rate / paper's rate)")
    lines.append("")
    fit_rows, fit_lines = _fit(params, measured, same_geometry)
    rows += fit_rows
    lines += fit_lines
    return rows, "\n".join(lines)


def _fit(
    params: Params,
    measured: dict[tuple[int, str], tuple[int, int]],
    same_geometry: bool,
) -> tuple[list[Row], list[str]]:
    """Which layout's theory reproduces the paper's four counts?"""
    ks = [k for k in params.hashes if k in PAPER_COUNTS]
    if not ks:
        return [], [
            (
                f"fit: none of the requested k ({params.hashes}) has paper figures "
                f"(the paper gives k in {sorted(PAPER_COUNTS)}); nothing to compare"
            )
        ]
    paper = [c for k in ks for c in PAPER_COUNTS[k]]
    dof = len(paper)
    lines = [
        (
            "Which layout did the paper use?  Theory at the paper's geometry (2^20 bits, "
            f"{PAPER_VALID} valid, {PAPER_INVALID} invalid) against the paper's counts "
            f"for k in {ks}:"
        ),
        (
            "  X^2 = sum (paper - expected)^2 / expected over collisions and false "
            f"positives ({dof} dof), p = P(chi2_{dof} >= X^2)"
        ),
    ]
    if same_geometry:
        lines.append("  measured X^2 = sum (measured - paper)^2 / (measured + paper), this run's counts")
    rows: list[Row] = []
    table = []
    scores: dict[str, float] = {}
    for layout in params.layouts:
        expected = []
        for k in ks:
            expected.append(expected_collisions(PAPER_VALID, PAPER_BITS, k, layout))
            expected.append(PAPER_INVALID * expected_fp_rate(PAPER_VALID, PAPER_BITS, k, layout))
        x2 = _pearson(paper, expected)
        p = chi2_sf(x2, dof)
        scores[layout] = x2
        case = f"fit layout={layout}"
        rows += [(case, "chi2_theory_vs_paper", x2), (case, "p_theory_vs_paper", p)]
        cells = [layout, f"{x2:.4g}", _fmt_p(p)]
        cells.append(" ".join(f"{e:.1f}" for e in expected))
        if same_geometry:
            counts = [c for k in ks for c in measured[k, layout]]
            mx2 = _two_sample(counts, paper)
            rows.append((case, "chi2_measured_vs_paper", mx2))
            cells.append(f"{mx2:.4g}")
        table.append(cells)
    best = min(scores, key=scores.__getitem__)
    for layout in params.layouts:
        rows.append((f"fit layout={layout}", "best_fit", float(layout == best)))
    header = [
        "layout",
        "X^2",
        "p",
        "expected (" + ", ".join(f"k={k} coll, fp" for k in ks) + ")",
    ]
    if same_geometry:
        header.append("measured X^2")
    lines += ["  " + line for line in format_table(header, table, left=2).splitlines()]
    lines.append(
        "  paper: "
        + ", ".join(f"k={k} {c}/{PAPER_VALID} coll, {f}/{PAPER_INVALID} fp" for k in ks for c, f in [PAPER_COUNTS[k]])
    )

    p_best = chi2_sf(scores[best], dof)
    others = [lay for lay in params.layouts if lay != best]
    verdict = "consistent with" if p_best >= 0.01 else "NOT consistent with"
    lines.append(
        f"best fit: {best} (X^2 = {scores[best]:.3g}, p = {_fmt_p(p_best)}; {verdict} the paper at the 1% level)"
    )
    if others:
        worst_p = max(chi2_sf(scores[lay], dof) for lay in others)
        bound = "p < 1e-300" if worst_p == 0.0 else f"p <= {worst_p:.3g}"
        lines.append(
            f"  the other layouts ({', '.join(others)}) have X^2 >= {min(scores[lay] for lay in others):.4g} ({bound})"
        )
    if best == "per_hash":
        mem = ", ".join(f"k={k}: {_kib(k * PAPER_BITS)}" for k in ks)
        lines.append(
            "  per_hash gives every hash function its own 2^20-bit array, i.e. "
            f"{mem} in all: the paper's '2^20 bits (128KB)' fits as the size of one "
            "hash function's array, not of the whole summary (a single shared array of "
            "k*2^20 bits has the same theory)"
        )
    else:
        lines.append(
            f"  {best} keeps all k hashes in one 2^20-bit (128KiB) array, as the paper's "
            "'summary size of 2^20 bits' reads literally"
        )
    return rows, lines


def run(cfg: Config, params: Params) -> StudyResult:
    """The study interface (``fedsim run configs/fedfs/bloom_summary.yaml``)."""
    rows, report = measure(params, cfg.seed)
    res = StudyResult(report=report)
    for case, metric, value in rows:
        res.add(case, metric, value)
    return res


register_study("bloom_summary", Params, run)
