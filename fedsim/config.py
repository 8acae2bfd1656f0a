"""YAML -> validated simulator configuration objects.

Every error names the file, the key (dotted path) and what is allowed, e.g.::

    configs/x.yaml: protocol.placement: unknown placement policy 'nearest'; allowed: with_manager, ...
    configs/x.yaml: cluster.nodez: unknown key; allowed keys: nodes, workers, ...; did you mean 'nodes'?

pydantic does the type checking; ``fedsim.schema`` words its errors for a
researcher editing a YAML file and holds the ``protocol:`` section, which the
agent's cluster file shares key for key.  This module adds the simulator's
own sections (cluster size and workers, network, storage, cpu, workload),
applies ``--set key=value`` overrides, and hands the study-specific
``params`` block to the study's own model.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

from fedsim.calibration import CalibrationError, apply_calibration
from fedsim.network import PRESETS
from fedsim.protocol.routing import Route
from fedsim.schema import (
    SHAPE_KEYS,
    ConfigError,
    ProtocolSpec,
    Strict,
    as_model,
    dict_values,
    moved_keys,
    moved_message,
    read_yaml,
    word_errors,
)
from fedsim.storage import EXT2_PAPER
from fedsim.workloads.postmark import PostMarkParams


class ClusterConfig(Strict):
    """The simulated machines; what the protocol does on them is ``protocol:``."""

    nodes: PositiveInt = 4
    workers: PositiveInt = 4  # protocol workers per node and per stage
    cores: PositiveInt = 2
    rpc_timeout_ms: PositiveFloat = 1000.0
    bootstrap: Literal["preload", "exchange"] = "preload"


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


class MachineConfig(Strict):
    """The machine the federation runs on (``fedsim.machine``): ``model:
    none`` is the papers' model (a host per node, messages priced by the
    network's delays alone); ``calibrated`` charges CPU for messages,
    requests, local operations and clients on hosts' cores, with the costs a
    ``fednode calibrate`` profile measured (``calibration:`` fills this section)."""

    model: Literal["none", "calibrated"] = "none"
    hosts: NonNegativeInt = 0  # 0: one host per node; k: node i on host i % k
    cores: PositiveInt = 2  # per host
    clients: Literal["shared", "own"] = "shared"  # the client programs: one process (threads), or one each
    o_us: NonNegativeFloat | None = None  # CPU per message at each end
    L_us: NonNegativeFloat | None = None  # a message's flight beyond the CPU
    client_L_us: NonNegativeFloat | None = None  # the same between a client program and its agent (None: L_us)
    client_o_us: NonNegativeFloat | None = None  # an agent's CPU per message end with a client (None: o_us)
    api_tail_us: NonNegativeFloat = 0.0  # an agent's CPU per client call after its reply has left
    byte_us: NonNegativeFloat = 0.0  # CPU per message byte at each end
    G_us_per_byte: NonNegativeFloat = 0.0  # the wire per byte
    call_us: NonNegativeFloat = 0.0  # CPU at a caller per request it waits for, beyond the messages
    wait_us: NonNegativeFloat = 0.0  # CPU at a server for a request whose handler waits for the network
    dispatch_us: dict[str, NonNegativeFloat] = Field(default_factory=dict)  # per request kind ("*": others)
    api_us: dict[str, NonNegativeFloat] = Field(default_factory=dict)  # per client call at the agent
    client_us: dict[str, NonNegativeFloat] = Field(default_factory=dict)  # per call at the client program
    mix_agent: NonNegativeFloat = 0.0  # api/dispatch CPU's extra share for work of a kind unlike the last
    mix_client: NonNegativeFloat = 0.0  # the same at a client program
    oversub_share: NonNegativeFloat = 0.0  # a job's extra share per runnable process beyond the host's cores
    capacity: NonNegativeFloat = 0.0  # cores' worth the cores give side by side (0: whole cores)
    client_user_share: float = Field(1.0, ge=0.0, le=1.0)  # of a client call's CPU, the GIL's (user time)
    cold_us: NonNegativeFloat = 0.0  # a job's CPU per other process beyond the cores run since its last (caches)
    cold_cap_us: NonNegativeFloat = 0.0  # the most that adds to a job (0: no bound)
    wake_us: NonNegativeFloat = 0.0  # of a receipt's CPU, what a process busy when it arrives does not pay
    handoff_us: float = 0.0  # added to a receipt that wakes its process: the placement correction (may be negative)
    poll_us: NonNegativeFloat = 0.0  # a receipt at a process idle less than this on its own core pays no wake either
    gil_us: NonNegativeFloat = 0.0  # a client program's job for another thread than its last's (the GIL)
    fan_in: dict[int, dict[str, float]] = Field(default_factory=dict)  # the microbenchmark wake_us is fitted to
    contention: dict[int, dict[str, float]] = Field(default_factory=dict)  # the microbenchmark it is fitted to
    chain: dict[int, dict[str, float]] = Field(default_factory=dict)  # the one cold_us, cold_cap_us are fitted to
    # the client-and-agent placement microbenchmark (one core, two, free): reported, not priced yet
    placement: dict[str, dict[str, float]] = Field(default_factory=dict)
    fuse: dict[str, Any] = Field(default_factory=dict)  # the mount's costs (``fedsim.workloads.fuse_sim``)
    measured_on: dict[str, Any] = Field(default_factory=dict)  # host, cores, when: for the warning on reuse

    @model_validator(mode="after")
    def _measured(self) -> MachineConfig:
        if self.model == "calibrated":
            missing = [k for k in ("o_us", "L_us") if getattr(self, k) is None]
            if missing:
                raise ValueError(
                    f"model: calibrated needs {', '.join(missing)}, which a profile measures: run "
                    "`fednode calibrate --out DIR` and name DIR/profile.yaml under calibration:"
                )
        return self


MixOp = Literal["lookup", "read", "write", "create", "remove"]
SFS97_MIX: dict[str, float] = {"lookup": 46, "read": 34, "write": 17, "create": 2, "remove": 1}


class PostMarkConfig(PostMarkParams):
    """``workload.postmark``: PostMark's parameters (its own names and defaults),
    and how its clients are seeded and routed.  ``workload.clients`` clients
    each run one PostMark in its own directory ``/pm<i>``."""

    seed_step: NonNegativeInt = 1  # client i uses seed + i * seed_step
    # where a client sends each file operation (``fedsim.protocol.routing``): its own
    # server (fixed: client i -> node i mod N), the manager of the operation's path
    # (hash: the federation's hash, applied by the client), or spread regardless of
    # the file (round_robin, random)
    route: Route = "fixed"
    # clients across a network from the servers (the paper's DAFS clients): each
    # call's request and reply cross it, replies occupying the server's NIC
    client_link: bool = False
    # each client is the PostMark binary on a FUSE mount of node i mod N: its system calls go
    # through the FUSE model (``fedsim.fuse``, costs from ``machine.fuse``), and each call to
    # the file's home or the name's manager (mount_route home, ``fednode mount``'s default)
    # or to node i mod N, which relays (entry); ``route`` is then not used
    mount: bool = False
    mount_route: Literal["home", "entry"] = "home"


class WorkloadConfig(Strict):
    # sfs97: the SFS97 mix over a preexisting file set (the keys below up to
    # hot_files); postmark: PostMark clients (``clients`` and ``postmark``)
    kind: Literal["sfs97", "postmark"] = "sfs97"
    postmark: PostMarkConfig = PostMarkConfig()
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
    # Skew: 0 picks files uniformly; s > 0 picks the initial files by a Zipf
    # law of exponent s over a random ranking (the k-th hottest with weight
    # 1/k^s), for the picks the hot sets (``locality``) leave.
    zipf: NonNegativeFloat = 0.0

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
    protocol: ProtocolSpec = ProtocolSpec()  # the same section, key for key, as in a cluster file
    network: NetworkConfig = NetworkConfig()
    storage: StorageConfig = StorageConfig()
    cpu: CpuConfig = CpuConfig()
    machine: MachineConfig = MachineConfig()
    workload: WorkloadConfig = WorkloadConfig()
    params: dict[str, Any] = Field(default_factory=dict)


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


#: Keys of earlier configs that now live under ``protocol:`` (one spelling
#: with the cluster file); reading one is an error that names the new place.
MOVED: dict[str, str] = {
    **moved_keys("cluster", (*SHAPE_KEYS, "dt_entries", "vd_entries", "async_dir_updates")),
    **{f"summary.{k}": f"protocol.summary_{k}" for k in ("bits", "hashes", "layout")},
}


def validate(raw: dict[str, Any], source: str = "<config>") -> Config:
    try:
        return Config.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(word_errors(source, exc, Config, moved=MOVED)) from None


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
        sub = as_model(f.annotation)
        if sub is not None:
            k, o = key_paths(sub, path + ".")
            keys += k
            open_maps += o
        elif dict_values(f.annotation) is not None:
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
    relocated = moved_message(key, MOVED)
    if relocated:
        raise ConfigError(f"{source}: {key}: {relocated}")
    hint = difflib.get_close_matches(key, keys, n=1, cutoff=0.5)
    msg = f"{source}: {key}: unknown parameter"
    msg += f"; did you mean {hint[0]!r}?" if hint else "; parameters are dotted config keys, e.g. cluster.nodes"
    raise ConfigError(msg)
