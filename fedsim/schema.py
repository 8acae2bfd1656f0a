"""What the simulator and the agent share without loading the simulator: the
protocol's schema, config errors, YAML reading, and the one table printer.

``fedsim.config`` (the simulator's config) and ``fednode.config`` (the agent's
cluster file) both put ``ProtocolSpec`` under a ``protocol:`` key, so every
protocol knob is spelled the same in both files and a configuration an agent
is deployed with can be simulated as it is.  Only the defaults differ: the
simulator keeps the papers' closed world (no VD ageing, no periodic refresh),
the agent an open one (``fednode.config.AgentProtocolSpec``).

This module imports pydantic, yaml and ``fedsim.protocol`` and nothing else of
fedsim: the agent imports it, and must not load SimPy or the simulator's
network and disk models.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from fedsim.protocol.config import MAX_BLOCK_SIZE, FederationSpec, ProtocolConfig
from fedsim.protocol.designs import design_class
from fedsim.protocol.hashing import HASHINGS
from fedsim.protocol.policies.coherence import DT_COHERENCES
from fedsim.protocol.policies.homes import HOMES
from fedsim.protocol.policies.migration import MIGRATIONS
from fedsim.protocol.summary import LAYOUTS, MAX_HASHES


class ConfigError(ValueError):
    """A configuration problem, already worded for the user."""


class Strict(BaseModel):
    """A config section: unknown keys are errors (a typo must not pass as a default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# ---------------------------------------------------------------------------- the protocol's schema
_P = ProtocolConfig()
_F = FederationSpec((0,))


def _known_layout(name: str) -> str:
    """Summary layouts are a closed list (each has a code in the summary's wire
    format), checked with the registries' wording."""
    if name not in LAYOUTS:
        near = difflib.get_close_matches(name, LAYOUTS, n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise ValueError(f"unknown summary layout {name!r}; allowed: {', '.join(LAYOUTS)}{hint}")
    return name


#: How each named key of ``protocol:`` is checked: the registry's lookup, which
#: raises ValueError listing the names registered at that moment.
NAME_CHECKS: dict[str, Callable[[str], object]] = {
    "architecture": design_class,
    "hashing": HASHINGS.get,
    "placement": HOMES.get,
    "summary_layout": _known_layout,
    "migration": MIGRATIONS.get,
    "dt_coherence": DT_COHERENCES.get,
}


class ProtocolSpec(Strict):
    """The ``protocol:`` section of a simulator config and of a cluster file.

    Its keys are ``ProtocolConfig``'s fields, plus the federation's shape
    (``architecture``, ``hashing``, ``vnodes``, ``placement``); the defaults
    are ``ProtocolConfig``'s and ``FederationSpec``'s, the papers' closed world.
    Names are checked against the protocol's registries when a file is read,
    so a placement or design registered by a plugin is accepted here with no
    edit, and the error lists what is registered at that moment."""

    architecture: str = _F.design
    hashing: str = _F.hashing
    vnodes: PositiveInt = _F.vnodes
    placement: str = _F.placement
    dt_entries: PositiveInt = _P.dt_entries
    dt_coherence: str = _P.dt_coherence
    vd_entries: PositiveInt = _P.vd_entries
    summary_bits: PositiveInt = _P.summary_bits
    summary_hashes: int = Field(_P.summary_hashes, ge=1, le=MAX_HASHES)
    summary_layout: str = _P.summary_layout
    async_dir_updates: bool = _P.async_dir_updates
    vd_max_age_s: NonNegativeFloat = _P.vd_max_age_s
    vd_miss_age_s: NonNegativeFloat = _P.vd_miss_age_s
    summary_refresh_s: NonNegativeFloat = _P.summary_refresh_s
    summary_retry_s: PositiveFloat = _P.summary_retry_s
    summary_retry_max_s: PositiveFloat = _P.summary_retry_max_s
    block_cache_blocks: NonNegativeInt = _P.block_cache_blocks
    block_size: int = Field(_P.block_size, ge=1, le=MAX_BLOCK_SIZE)
    migration: str = _P.migration
    migration_period_s: PositiveFloat = _P.migration_period_s
    migration_decay: float = Field(_P.migration_decay, gt=0, le=1)
    migration_fanout: PositiveInt = _P.migration_fanout
    migration_threshold: NonNegativeFloat = _P.migration_threshold
    migration_hysteresis: NonNegativeInt = _P.migration_hysteresis
    migration_share: float = Field(_P.migration_share, gt=0, le=1)
    migration_min_hits: NonNegativeFloat = _P.migration_min_hits
    migration_batch: PositiveInt = _P.migration_batch
    migration_chunk: PositiveInt = _P.migration_chunk
    leave_files: Literal["unavailable", "migrate"] = _P.leave_files  # config.LEAVE_FILES
    replicas: Literal[1, 2] = _P.replicas
    rename: Literal["local", "2pc", "redistribute"] = _P.rename  # config.RENAMES
    redistribute_limit: NonNegativeInt = _P.redistribute_limit
    redistribute_hold: NonNegativeFloat = _P.redistribute_hold
    heartbeat_s: NonNegativeFloat = _P.heartbeat_s
    heartbeat_misses: PositiveInt = _P.heartbeat_misses
    devices: bool = _P.devices
    security_xattrs: bool = _P.security_xattrs

    @field_validator(*NAME_CHECKS)
    @classmethod
    def _registered(cls, v: str, info: ValidationInfo) -> str:
        NAME_CHECKS[info.field_name or ""](v)  # ValueError naming what is registered
        return v

    def config(self) -> ProtocolConfig:
        """The protocol's knobs, as every node of the federation gets them."""
        return ProtocolConfig(**{k: getattr(self, k) for k in PROTOCOL_KEYS})

    def federation(self, members: Sequence[int], seed: int = 0) -> FederationSpec:
        """What every member builds its node from (``designs.build_node``)."""
        return FederationSpec(
            members,
            design=self.architecture,
            hashing=self.hashing,
            vnodes=self.vnodes,
            placement=self.placement,
            seed=seed,
            protocol=self.config(),
        )


#: The keys of ``protocol:`` that are ``ProtocolConfig`` fields (the rest shape the federation).
PROTOCOL_KEYS: tuple[str, ...] = tuple(ProtocolConfig.__dataclass_fields__)
#: The keys of ``protocol:`` that shape the federation (``FederationSpec``).
SHAPE_KEYS: tuple[str, ...] = ("architecture", "hashing", "vnodes", "placement")


def moved_keys(section: str, keys: Sequence[str]) -> dict[str, str]:
    """``{old dotted key: new dotted key}`` for protocol keys that used to live
    in ``section`` (``""`` for the top level) under the same name."""
    return {(f"{section}.{k}" if section else k): f"protocol.{k}" for k in keys}


# ---------------------------------------------------------------------------- wording of errors
def as_model(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model an annotation names (``X`` or ``X | None``), else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    models = [a for a in get_args(annotation) if isinstance(a, type) and issubclass(a, BaseModel)]
    return models[0] if len(models) == 1 and get_origin(annotation) is not dict else None


def dict_values(annotation: Any) -> Any:
    """For ``dict[K, V]`` (or ``dict[K, V] | None``), V; else None."""
    for a in (annotation, *get_args(annotation)):
        if get_origin(a) is dict:
            return get_args(a)[1] if get_args(a) else Any
    return None


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The pydantic model that owns the key at ``loc`` (for 'allowed keys').
    A mapping of models (``dict[str, Model]``) consumes one free key."""
    cur: Any = model
    parts = list(loc[:-1])
    while parts:
        part = parts.pop(0)
        m = as_model(cur)
        if m is None:
            return None
        f = m.model_fields.get(str(part))
        if f is None:
            return None
        cur = f.annotation
        if as_model(cur) is None and as_model(dict_values(cur)) is not None and parts:
            parts.pop(0)
            cur = dict_values(cur)
    return as_model(cur)


def moved_message(key: str, moved: dict[str, str]) -> str | None:
    """Where a key that moved lives now (``key`` or a section above it), else None."""
    if key in moved:
        return f"moved to {moved[key]}; the protocol's keys live under protocol:, alike in configs and cluster files"
    below = [f"{old} -> {new}" for old, new in moved.items() if old.startswith(key + ".")]
    if below:
        return "this section moved: " + ", ".join(below)
    return None


def word_errors(
    source: str, err: ValidationError, model: type[BaseModel], prefix: str = "", moved: dict[str, str] | None = None
) -> str:
    """pydantic's errors as lines a researcher editing YAML can act on:
    ``FILE: dotted.key: what is wrong``, the allowed keys and the nearest one
    for an unknown key, and the new place of a key that ``moved``."""
    lines = []
    for e in err.errors():
        loc = tuple(e["loc"])
        is_key = bool(loc) and loc[-1] == "[key]"  # a mapping key (e.g. an op in workload.mix) is wrong
        if is_key:
            loc = loc[:-1]
        key = prefix + ".".join(str(p) for p in loc)
        if e["type"] == "extra_forbidden":
            relocated = moved_message(key, moved or {})
            if relocated:
                lines.append(f"{source}: {key}: {relocated}")
                continue
            owner = _model_at(model, loc)
            allowed = list(owner.model_fields) if owner else []
            hint = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
            msg = "unknown key"
            if allowed:
                msg += f"; allowed keys: {', '.join(allowed)}"
            if hint:
                msg += f"; did you mean {hint[0]!r}?"
            lines.append(f"{source}: {key}: {msg}")
        else:
            got = e.get("input")
            said = isinstance(got, str) and repr(got) in e["msg"]  # the registry's text already quotes it
            shown = "" if isinstance(got, dict) or said else f" (got {got!r})"
            what = "not an allowed key: " if is_key else ""
            msg = e["msg"].removeprefix("Value error, ")
            lines.append(f"{source}: {key}: {what}{msg}{shown}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- reading
def read_yaml(path: str | Path) -> dict[str, Any]:
    """A YAML file's top-level mapping; ConfigError naming the file otherwise."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read the config: {exc.strerror}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: not valid YAML: {exc}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{p}: the top level must be a mapping of keys, not {type(raw).__name__}")
    return raw


# ---------------------------------------------------------------------------- text tables
def table(headers: Sequence[str], rows: Sequence[Sequence[object]], left: int = 1) -> str:
    """A plain-text table: the first ``left`` columns left-aligned (labels),
    the rest right-aligned (numbers), a dashed rule under the header.  The one
    printer for study reports, benchmarks and the agent's CLI, so every table
    the project prints reads the same way."""
    cells = [[str(h) for h in headers]] + [[("" if c is None else str(c)) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    out = []
    for j, row in enumerate(cells):
        cols = enumerate(zip(row, widths, strict=True))
        out.append("  ".join(c.rjust(w) if j and i >= left else c.ljust(w) for i, (c, w) in cols))
        if j == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)
