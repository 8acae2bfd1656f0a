"""Studies: each maps a validated config to tidy result rows and a report.

A study module exposes ``Params`` (a pydantic model for the config's
``params:`` block, extra keys forbidden) and ``run(cfg, params) -> StudyResult``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

STUDIES: dict[str, str] = {
    "simulate": "experiments.simulate",
    "table2": "experiments.table2",
    "bloom_summary": "experiments.bloom_summary",
    "lookup_paths": "experiments.lookup_paths",
    "scale": "experiments.scale",
}


def get_study(name: str) -> ModuleType:
    try:
        return importlib.import_module(STUDIES[name])
    except KeyError:
        raise KeyError(f"unknown study {name!r}; allowed: {', '.join(STUDIES)}") from None
