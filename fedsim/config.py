"""YAML -> validated configuration objects.

Every error names the file, the key (dotted path) and what is allowed, e.g.::

    configs/x.yaml: cluster.placement: Input should be 'with_manager', ... (got 'nearest')
    configs/x.yaml: cluster.nodez: unknown key; allowed keys: nodes, hashing, ...; did you mean 'nodes'?

pydantic does the type checking; this module only words its errors for a
researcher editing a YAML file, applies ``--set key=value`` overrides, and
hands the study-specific ``params`` block to the study's own model.
"""

from __future__ import annotations

import difflib
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
    field_validator,
)

from fedsim.calibration import CalibrationError, apply_calibration
from fedsim.network import PRESETS
from fedsim.storage import EXT2_PAPER


class ConfigError(ValueError):
    """A configuration problem, already worded for the user."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ClusterConfig(Strict):
    nodes: PositiveInt = 4
    hashing: Literal["mod_n", "ring"] = "mod_n"
    vnodes: PositiveInt = 64
    placement: Literal["with_manager", "round_robin", "random", "with_requester"] = "with_manager"
    workers: PositiveInt = 4  # protocol workers per node and per stage
    cores: PositiveInt = 2
    dt_entries: PositiveInt = 4096
    vd_entries: PositiveInt = 1024
    async_dir_updates: bool = False
    rpc_timeout_ms: PositiveFloat = 1000.0
    bootstrap: Literal["preload", "exchange"] = "preload"


class SummaryConfig(Strict):
    bits: PositiveInt = 4096
    hashes: PositiveInt = 4
    layout: Literal["shared", "per_hash", "partitioned"] = "shared"


NetworkPreset = Literal[tuple(PRESETS)]  # type: ignore[valid-type]


class NetworkConfig(Strict):
    preset: NetworkPreset = "fedfs_prototype"
    # overrides of the preset's LogGP parameters
    L_us: NonNegativeFloat | None = None
    o_us: NonNegativeFloat | None = None
    g_us: NonNegativeFloat | None = None
    G_us_per_byte: NonNegativeFloat | None = None


class StorageConfig(Strict):
    costs_us: dict[str, NonNegativeFloat] = Field(default_factory=dict)
    block_size: PositiveInt = 8192
    cache_mb: NonNegativeFloat = 128.0

    @field_validator("costs_us")
    @classmethod
    def _known_ops(cls, v: dict[str, float]) -> dict[str, float]:
        for k in v:
            if k not in EXT2_PAPER:
                raise ValueError(f"unknown operation {k!r}; allowed: {', '.join(EXT2_PAPER)}")
        return v


class CpuConfig(Strict):
    hash_us: NonNegativeFloat = 6.7  # ~2000 instructions on the prototype's 300 MHz PII


MixOp = Literal["lookup", "read", "write", "create", "remove"]
SFS97_MIX: dict[str, float] = {"lookup": 46, "read": 34, "write": 17, "create": 2, "remove": 1}


class WorkloadConfig(Strict):
    kind: Literal["sfs97"] = "sfs97"
    files: PositiveInt = 19500
    dirs: PositiveInt = 650
    mix: dict[MixOp, NonNegativeFloat] = Field(default_factory=lambda: dict(SFS97_MIX))
    arrivals: Literal["open", "closed"] = "open"
    rate: PositiveFloat = 500.0  # offered load, operations per second (open loop)
    clients: PositiveInt = 4  # closed-loop clients
    think_ms: NonNegativeFloat = 0.0
    ops: PositiveInt = 15000
    warmup_ops: NonNegativeInt = 0
    io_size: PositiveInt = 8192
    locality: float = Field(0.0, ge=0.0, le=1.0)  # share of picks from the client's hot set
    # CPU time a node spends on each client request before FedFS sees it (the NFS
    # server's RPC/XDR processing in the papers' DNFS); 0 = FedFS alone.
    frontend_us: NonNegativeFloat = 0.0
    hot_files: PositiveInt = 64

    @field_validator("mix")
    @classmethod
    def _some_ops(cls, v: dict[str, float]) -> dict[str, float]:
        if sum(v.values()) <= 0:
            raise ValueError("the mix needs at least one operation with a positive weight")
        return v


class Config(Strict):
    study: str
    seed: int = 1
    cluster: ClusterConfig = ClusterConfig()
    summary: SummaryConfig = SummaryConfig()
    network: NetworkConfig = NetworkConfig()
    storage: StorageConfig = StorageConfig()
    cpu: CpuConfig = CpuConfig()
    workload: WorkloadConfig = WorkloadConfig()
    params: dict[str, Any] = Field(default_factory=dict)


# ---------------------------------------------------------------------------- wording of errors
def _as_model(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model an annotation names (``X`` or ``X | None``), else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    models = [a for a in get_args(annotation) if isinstance(a, type) and issubclass(a, BaseModel)]
    return models[0] if len(models) == 1 and get_origin(annotation) is not dict else None


def _dict_values(annotation: Any) -> Any:
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
        m = _as_model(cur)
        if m is None:
            return None
        f = m.model_fields.get(str(part))
        if f is None:
            return None
        cur = f.annotation
        if _as_model(cur) is None and _as_model(_dict_values(cur)) is not None and parts:
            parts.pop(0)
            cur = _dict_values(cur)
    return _as_model(cur)


def word_errors(source: str, err: ValidationError, model: type[BaseModel], prefix: str = "") -> str:
    lines = []
    for e in err.errors():
        loc = tuple(e["loc"])
        is_key = bool(loc) and loc[-1] == "[key]"  # a mapping key (e.g. an op in workload.mix) is wrong
        if is_key:
            loc = loc[:-1]
        key = prefix + ".".join(str(p) for p in loc)
        if e["type"] == "extra_forbidden":
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
            shown = "" if isinstance(got, dict) else f" (got {got!r})"
            what = "not an allowed key: " if is_key else ""
            lines.append(f"{source}: {key}: {what}{e['msg']}{shown}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- loading
def parse_set(items: list[str] | None) -> list[tuple[list[str], Any]]:
    """``--set cluster.nodes=8`` -> [(["cluster", "nodes"], 8)] (values parsed as YAML)."""
    out = []
    for item in items or []:
        if "=" not in item:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. cluster.nodes=8")
        key, raw = item.split("=", 1)
        parts = [p for p in key.strip().split(".") if p]
        if not parts:
            raise ConfigError(f"--set {item!r}: empty key")
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise ConfigError(f"--set {item!r}: value is not valid YAML: {exc}") from None
        out.append((parts, value))
    return out


def apply_overrides(raw: dict[str, Any], overrides: list[tuple[list[str], Any]]) -> dict[str, Any]:
    for parts, value in overrides:
        cur = raw
        for p in parts[:-1]:
            nxt = cur.setdefault(p, {})
            if not isinstance(nxt, dict):
                raise ConfigError(f"--set {'.'.join(parts)}: {p!r} is not a section")
            cur = nxt
        cur[parts[-1]] = value
    return raw


def read_yaml(path: str | Path) -> dict[str, Any]:
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


def validate(raw: dict[str, Any], source: str = "<config>") -> Config:
    try:
        return Config.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(word_errors(source, exc, Config)) from None


def load(path: str | Path, overrides: list[str] | None = None, seed: int | None = None) -> Config:
    """Read, override and validate a config file; the study's params are
    checked by ``experiments.load_params``."""
    raw = apply_overrides(read_yaml(path), parse_set(overrides))
    if seed is not None:
        raw["seed"] = seed
    try:
        apply_calibration(raw, path)  # a fednode bench profile: measured network and local costs
    except CalibrationError as exc:
        raise ConfigError(str(exc)) from None
    return validate(raw, str(path))


def validate_params(cfg: Config, model: type[BaseModel], source: str) -> BaseModel:
    try:
        return model.model_validate(cfg.params)
    except ValidationError as exc:
        raise ConfigError(word_errors(source, exc, model, prefix="params.")) from None


# ---------------------------------------------------------------------------- dotted keys
def key_paths(model: type[BaseModel], prefix: str = "") -> tuple[list[str], list[str]]:
    """Every dotted key of ``model``: (keys, open mappings).  Sections count as
    keys too (``cluster`` as well as ``cluster.nodes``); an open mapping is a
    field whose own keys are free (``workload.mix``, ``storage.costs_us``):
    any key below it is accepted here and checked when the value is validated."""
    keys: list[str] = []
    open_maps: list[str] = []
    for name, f in model.model_fields.items():
        path = prefix + name
        keys.append(path)
        sub = _as_model(f.annotation)
        if sub is not None:
            k, o = key_paths(sub, path + ".")
            keys += k
            open_maps += o
        elif _dict_values(f.annotation) is not None:
            open_maps.append(path)
    return keys, open_maps


def check_key(key: str, source: str, params_model: type[BaseModel] | None = None) -> None:
    """Raise ConfigError unless ``key`` (dotted, e.g. ``cluster.nodes`` or
    ``params.dt_entries``) names a config key; the message names the nearest
    valid key.  ``params.*`` is checked against the study's ``params_model``."""
    keys, open_maps = key_paths(Config)
    keys.remove("params")
    open_maps.remove("params")
    keys.append("params")
    if params_model is not None:
        k, o = key_paths(params_model, "params.")
        keys += k
        open_maps += o
    else:
        open_maps.append("params")  # no study model to check against
    if key in ("seed", "study"):
        raise ConfigError(f"{source}: {key}: not a parameter to vary (seeds have their own list)")
    if key in keys or any(key.startswith(m + ".") for m in open_maps):
        return
    hint = difflib.get_close_matches(key, keys, n=1, cutoff=0.5)
    msg = f"{source}: {key}: unknown parameter"
    msg += f"; did you mean {hint[0]!r}?" if hint else "; parameters are dotted config keys, e.g. cluster.nodes"
    raise ConfigError(msg)
