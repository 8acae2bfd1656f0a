"""Studies: each maps a validated config to tidy result rows and a report.

A study module exposes ``Params`` (a pydantic model for the config's
``params:`` block, extra keys forbidden) and ``run(cfg, params) -> StudyResult``.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fedsim.config import Config
    from fedsim.results import StudyResult

STUDIES: dict[str, str] = {
    "simulate": "experiments.simulate",
    "table2": "experiments.table2",
    "bloom_summary": "experiments.bloom_summary",
    "lookup_paths": "experiments.lookup_paths",
    "scale": "experiments.scale",
    "table3": "experiments.table3",
}


def get_study(name: str) -> ModuleType:
    try:
        return importlib.import_module(STUDIES[name])
    except KeyError:
        raise KeyError(f"unknown study {name!r}; allowed: {', '.join(STUDIES)}") from None


def run_study(cfg: Config, source: str = "<config>") -> StudyResult:
    """Run the study ``cfg`` names: validate its ``params`` block against the
    study's own model, then run it.  The one path from a validated config to
    result rows, shared by ``fedsim run`` and every sweep point (so a sweep
    point and a ``fedsim run`` of the same config give the same rows).

    Raises ``ConfigError`` (worded with ``source``) for an unknown study or
    bad params."""
    from fedsim.config import validate_params
    from fedsim.schema import ConfigError

    try:
        study = get_study(cfg.study)
    except KeyError as exc:
        raise ConfigError(f"{source}: study: {exc.args[0]}") from None
    params = validate_params(cfg, study.Params, source)
    return study.run(cfg, params)
