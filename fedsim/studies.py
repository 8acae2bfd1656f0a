"""The study registry: the names a config's ``study:`` may give, and ``run_study``.

A study maps a validated config to tidy result rows and a report.  It is a name,
a pydantic model for the config's ``params:`` block (extra keys forbidden) and a
``run(cfg, params) -> StudyResult`` function, registered with
:func:`register_study`.

Why plugins: studies are built *on* the simulator (``experiments/`` here, or a
researcher's own package), so ``fedsim`` must not import them: the import
direction is protocol <- runtimes <- experiments <- notebooks
(``tests/test_boundaries.py`` guards it).  Yet ``fedsim run``, every sweep point
and every Dask worker must find a study from the name alone.  Python's standard
plugin mechanism does exactly that: a distribution declares an entry point in
the ``fedsim.studies`` group, named after the study and naming the module that
registers it::

    [project.entry-points."fedsim.studies"]
    my_study = "my_package.my_study"      # the module calls register_study("my_study", Params, run)

The entry points are read from installed metadata, so any process that has the
package installed (a pool worker, a Dask worker on another machine) finds the
same studies with no configuration.  A study module is imported only when its
name is asked for: ``fedsim run`` of one study does not import the others, and a
broken plugin breaks only its own study.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from difflib import get_close_matches
from importlib import metadata
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

if TYPE_CHECKING:
    from fedsim.config import Config
    from fedsim.results import StudyResult

ENTRY_POINT_GROUP = "fedsim.studies"

#: a study name as a config spells it (a YAML word: no spaces, no dotted paths)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")


@dataclass(frozen=True, slots=True)
class Study:
    """One registered study.  ``Params`` and ``run`` keep the names a study
    module defines, so code written against a study module reads the same."""

    name: str
    Params: type[BaseModel]
    run: Callable[[Config, Any], StudyResult]

    @property
    def module(self) -> str:
        """The module that defines ``run``: a worker process imports it to
        register the study when no entry point names it (see ``get_study``)."""
        return self.run.__module__


class UnknownStudyError(KeyError):
    """A study name nobody registered.  A KeyError (as ``get_study`` raised
    before the registry moved here), whose message lists the known names."""

    def __str__(self) -> str:
        return str(self.args[0])


#: A plain dict, not ``fedsim.protocol.registry.Registry``: the names a config
#: may give include the entry points not yet imported, an unknown one is a
#: KeyError the config layer words, and a re-registration is recognised by the
#: run function's and model's names (a ``Study`` is a fresh record every time).
_REGISTRY: dict[str, Study] = {}


def register_study(name: str, params: type[BaseModel], run: Callable[[Config, Any], StudyResult]) -> Study:
    """Register a study under ``name``: what a study module calls when it is
    imported.  Registering the same function again (a module re-imported, a
    notebook cell run twice) is harmless; registering a *different* study
    under a taken name is an error, so two plugins cannot silently shadow
    each other and a config always means one thing."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"study name {name!r}: use letters, digits, '_' or '-', starting with a letter or '_'")
    if not (isinstance(params, type) and issubclass(params, BaseModel)):
        raise TypeError(f"study {name!r}: Params must be a pydantic BaseModel subclass, not {params!r}")
    if not callable(run):
        raise TypeError(f"study {name!r}: run must be callable, not {run!r}")
    study = Study(name, params, run)
    old = _REGISTRY.get(name)
    if old is not None and _identity(old) != _identity(study):
        raise ValueError(
            f"study {name!r} is already registered by {old.module}.{old.run.__qualname__}; "
            f"{study.module}.{run.__qualname__} cannot take the name (pick another)"
        )
    _REGISTRY[name] = study
    return study


def _identity(s: Study) -> tuple[str, str, str, str]:
    return (s.module, s.run.__qualname__, s.Params.__module__, s.Params.__qualname__)


def _entry_points(name: str | None = None) -> list[metadata.EntryPoint]:
    eps = metadata.entry_points(group=ENTRY_POINT_GROUP)
    return list(eps if name is None else eps.select(name=name))


def study_names() -> list[str]:
    """Every study a config may name: the registered ones and those that
    installed entry points declare (not imported until asked for)."""
    return sorted(set(_REGISTRY) | {ep.name for ep in _entry_points()})


def _load_entry_point(name: str) -> None:
    """Import the module the entry point ``name`` names; it registers the study."""
    eps = {ep.value: ep for ep in _entry_points(name)}  # one distribution can be seen twice on sys.path
    if len(eps) > 1:
        where = "; ".join(f"{ep.value} (from {_dist(ep)})" for ep in eps.values())
        raise ValueError(f"study {name!r} is declared by more than one '{ENTRY_POINT_GROUP}' entry point: {where}")
    for ep in eps.values():
        try:
            ep.load()
        except Exception as exc:
            exc.add_note(f"while loading study {name!r} from entry point {ep.value} ({_dist(ep)})")
            raise
        if name not in _REGISTRY:
            raise ValueError(
                f"entry point {name} = {ep.value} ({_dist(ep)}) was imported but registered no study {name!r}; "
                f"the module must call fedsim.studies.register_study({name!r}, Params, run)"
            )


def _dist(ep: metadata.EntryPoint) -> str:
    return ep.dist.name if ep.dist is not None else "unknown distribution"


def get_study(name: str, module: str | None = None) -> Study:
    """The study registered as ``name``, importing its entry point's module
    on first use.  ``module`` is a fallback for a study registered by a module
    no entry point names (a test, a notebook's helper module): a worker
    process that starts fresh imports it to get the registration.

    Raises UnknownStudyError naming the known studies, with a hint when
    none are installed at all (an environment that lacks fedfs's metadata)."""
    if name not in _REGISTRY:
        _load_entry_point(name)
    if name not in _REGISTRY and module and module != "__main__":
        importlib.import_module(module)
    if name in _REGISTRY:
        return _REGISTRY[name]
    known = study_names()
    if not known:
        raise UnknownStudyError(
            f"unknown study {name!r}: no studies are registered; they are found through the "
            f"'{ENTRY_POINT_GROUP}' entry points, so install the package that declares them "
            "(for fedfs: pip install -e . in the repository, or ./dev.sh setup)"
        )
    close = get_close_matches(name, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise UnknownStudyError(f"unknown study {name!r}; allowed: {', '.join(known)}{hint}")


def run_study(cfg: Config, source: str = "<config>", module: str | None = None) -> StudyResult:
    """Run the study ``cfg`` names: validate its ``params`` block against the
    study's own model, then run it.  The one path from a validated config to
    result rows, shared by ``fedsim run`` and every sweep point (so a sweep
    point and a ``fedsim run`` of the same config give the same rows).

    Raises ``ConfigError`` (worded with ``source``) for an unknown study or
    bad params.  ``module``: see :func:`get_study`."""
    from fedsim.config import ConfigError, validate_params

    try:
        study = get_study(cfg.study, module)
    except UnknownStudyError as exc:
        raise ConfigError(f"{source}: study: {exc}") from None
    params = validate_params(cfg, study.Params, source)
    return study.run(cfg, params)
