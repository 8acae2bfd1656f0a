"""fedfs's own studies: each module maps a validated config to tidy result rows and a report.

A study module defines ``Params`` (a pydantic model for the config's ``params:``
block, extra keys forbidden) and ``run(cfg, params) -> StudyResult``, and ends
with ``register_study(name, Params, run)``.  ``fedsim`` finds it through the
``fedsim.studies`` entry point that pyproject.toml declares for it, so this
package is not a list of studies and ``fedsim`` never imports it (the registry
and ``run_study`` live in :mod:`fedsim.studies`).

The names below are kept for the notebooks and scripts that import them from
here; new code can import them from :mod:`fedsim.studies`.
"""

from __future__ import annotations

from fedsim.studies import Study, get_study, register_study, run_study, study_names

__all__ = ["Study", "get_study", "register_study", "run_study", "study_names"]
