"""Tidy results: one row per run x metric, written as CSV.

Columns: study, case, seed, metric, value.  ``case`` names the variant inside
a study (e.g. "k=3 layout=per_hash", "dt_entries=64 locality=0.9").  Values are
written with a fixed 10 significant digits so that the same config and seed
give byte-identical files.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

COLUMNS = ("study", "case", "seed", "metric", "value")


@dataclass(slots=True, frozen=True)
class Row:
    case: str
    metric: str
    value: float


@dataclass(slots=True)
class StudyResult:
    rows: list[Row] = field(default_factory=list)
    report: str = ""

    def add(self, case: str, metric: str, value: float) -> None:
        self.rows.append(Row(case, metric, float(value)))

    def extend(self, case: str, metrics: dict[str, float]) -> None:
        for k, v in metrics.items():
            self.add(case, k, v)


def fmt(value: float) -> str:
    return format(value, ".10g")


def to_csv(study: str, seed: int, rows: Iterable[Row]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rows:
        w.writerow((study, r.case, seed, r.metric, fmt(r.value)))
    return buf.getvalue()


def write_csv(path: Path, study: str, seed: int, rows: Iterable[Row]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_csv(study, seed, rows))
