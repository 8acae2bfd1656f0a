"""The cluster file: which agents form a federation, where they listen, what they serve.

A YAML file, validated as strictly as the simulator's configs (the same
wording of errors, ``fedsim.config.word_errors``)::

    secret: 3f1c...                 # shared secret (hex or any string); or secret_file: PATH
    placement: with_manager         # the simulator's policy names
    hashing: mod_n                  # mod_n | ring
    nodes:
      - {id: 0, host: 127.0.0.1, port: 7400, root: /srv/fedfs/n0}
      - {id: 1, host: 10.0.0.2, port: 7400, root: /srv/fedfs/n1, rdma_device: rxe0}

Every agent and every client reads the same file; the secret authenticates
peers and clients (HMAC challenge on connect).  Policies and protocol
parameters live here, not per node, because every member must hash names and
choose homes the same way.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Literal

import yaml
from pydantic import (
    Field,
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

from fedsim.config import ConfigError, Strict, read_yaml, word_errors
from fedsim.protocol.config import FederationSpec, ProtocolConfig
from fedsim.protocol.designs import design_class
from fedsim.protocol.hashing import ModN, Ring, make_hashing

DEFAULT_PORT = 7400


class NodeSpec(Strict):
    id: int = Field(ge=0)
    host: str = "127.0.0.1"
    port: int = Field(DEFAULT_PORT, ge=1, le=65535)
    root: str
    rdma_device: str | None = None
    gid_index: int | None = Field(None, ge=0)


class ProtocolSpec(Strict):
    """``fedsim.protocol.node.ProtocolConfig``, as the cluster file spells it."""

    dt_entries: PositiveInt = 4096
    vd_entries: PositiveInt = 1024
    summary_bits: PositiveInt = 4096
    summary_hashes: PositiveInt = 4
    summary_layout: Literal["shared", "per_hash", "partitioned"] = "shared"
    async_dir_updates: bool = False
    # Files and directories appear in the local trees outside the federation:
    # VDs age out and a miss re-merges an older VD (see ProtocolConfig).
    vd_max_age_s: NonNegativeFloat = 30.0
    vd_miss_age_s: NonNegativeFloat = 1.0

    def build(self, **more: float) -> ProtocolConfig:
        return ProtocolConfig(**self.model_dump(), **more)


class RdmaSpec(Strict):
    """How the verbs transport uses its queue pairs (``transport: verbs``/``auto``).

    Messages up to ``inline_bytes`` travel by SEND into one of the peer's
    ``recv_depth`` pre-posted receive buffers (the sender holds that many
    credits).  Larger ones move by RDMA: with ``bulk: write`` a request names
    one of the requester's ``reply_slots`` landing regions and the responder
    RDMA-WRITEs the reply there (Federated DAFS V-A); with ``bulk: read`` (and
    for any large request, or a reply bigger than a slot) the sender exposes
    the message in a registered region and the receiver RDMA-READs it.  All of
    it is registered when the connection is made, off the request path; only a
    message bigger than ``slot_bytes`` registers memory of its own.
    ``spin_us`` bounds the adaptive poll after a completion event while a
    reply is expected (0: completion events only).
    """

    bulk: Literal["write", "read"] = "write"
    inline_bytes: int = Field(4096, ge=256, le=1 << 20)
    recv_depth: int = Field(32, ge=4, le=4096)
    slot_bytes: int = Field((1 << 20) + (64 << 10), ge=4096)
    reply_slots: int = Field(2, ge=0, le=255)
    stage_slots: int = Field(2, ge=1, le=255)
    spin_us: NonNegativeFloat = 50.0
    port: int = Field(1, ge=1)


class ClusterSpec(Strict):
    secret: str | None = None
    secret_file: str | None = None
    placement: Literal["with_manager", "round_robin", "random", "with_requester"] = "with_manager"
    hashing: Literal["mod_n", "ring"] = "mod_n"
    architecture: str = "fedfs"  # the design every agent runs (fedsim.protocol.designs)
    vnodes: PositiveInt = 64
    seed: int = 0
    transport: Literal["tcp", "verbs", "auto"] = "tcp"
    workers: PositiveInt = 8  # protocol workers per node and per nesting depth
    rpc_timeout_ms: PositiveFloat = 2000.0
    connect_timeout_ms: PositiveFloat = 1000.0
    max_message_bytes: int = Field(16 << 20, ge=4096)
    summary_refresh_s: NonNegativeFloat = 5.0  # re-summarise the local tree (0 = never)
    protocol: ProtocolSpec = ProtocolSpec()
    rdma: RdmaSpec = RdmaSpec()
    nodes: list[NodeSpec] = Field(min_length=1)

    @field_validator("nodes")
    @classmethod
    def _distinct(cls, v: list[NodeSpec]) -> list[NodeSpec]:
        ids = [n.id for n in v]
        dup = {i for i in ids if ids.count(i) > 1}
        if dup:
            raise ValueError(f"node ids must be distinct; repeated: {sorted(dup)}")
        addrs = [(n.host, n.port) for n in v]
        dup_a = {a for a in addrs if addrs.count(a) > 1}
        if dup_a:
            raise ValueError(f"two nodes listen on the same host:port: {sorted(dup_a)}")
        return sorted(v, key=lambda n: n.id)

    @field_validator("architecture")
    @classmethod
    def _known_design(cls, v: str) -> str:
        design_class(v)  # ValueError naming the registered designs
        return v

    @model_validator(mode="after")
    def _one_secret(self) -> ClusterSpec:
        if (self.secret is None) == (self.secret_file is None):
            raise ValueError("give exactly one of 'secret' and 'secret_file' (the peers' shared secret)")
        if self.secret is not None and len(self.secret) < 16:
            raise ValueError(
                "secret: at least 16 characters (make one: python3 -c 'import secrets; print(secrets.token_hex())')"
            )
        return self

    # ------------------------------------------------------------------ derived
    @property
    def members(self) -> list[int]:
        return [n.id for n in self.nodes]

    def node(self, node_id: int) -> NodeSpec:
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise ConfigError(f"node {node_id} is not in the cluster file; its nodes are {self.members}")

    def federation(self) -> FederationSpec:
        """What every member builds its node from (``designs.build_node``)."""
        return FederationSpec(
            self.members,
            design=self.architecture,
            hashing=self.hashing,
            vnodes=self.vnodes,
            placement=self.placement,
            seed=self.seed,
            protocol=self.protocol.build(summary_refresh_s=self.summary_refresh_s),
        )

    def hashing_fn(self) -> ModN | Ring:
        return make_hashing(self.hashing, self.members, self.vnodes)

    def secret_bytes(self, source: Path | None = None) -> bytes:
        if self.secret is not None:
            return self.secret.encode()
        p = Path(self.secret_file or "")
        if not p.is_absolute() and source is not None:
            p = source.parent / p
        try:
            data = p.read_bytes().strip()
        except OSError as exc:
            raise ConfigError(f"secret_file {p}: cannot read it: {exc.strerror}") from None
        if len(data) < 16:
            raise ConfigError(f"secret_file {p}: the secret must have at least 16 bytes")
        return data


class Cluster:
    """A validated cluster file and where it came from (relative paths resolve against it)."""

    def __init__(self, spec: ClusterSpec, source: Path | None = None) -> None:
        self.spec = spec
        self.source = source
        self.secret = spec.secret_bytes(source)

    def root_of(self, node_id: int) -> Path:
        p = Path(self.spec.node(node_id).root).expanduser()
        if not p.is_absolute() and self.source is not None:
            p = self.source.parent / p
        return p


def parse(raw: dict, source: str = "<cluster>") -> ClusterSpec:
    try:
        return ClusterSpec.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(word_errors(source, exc, ClusterSpec)) from None


def load_cluster(path: str | Path) -> Cluster:
    """Read and validate a cluster file; errors name the file and key."""
    p = Path(path)
    return Cluster(parse(read_yaml(p), str(p)), p.resolve())


def write_cluster(path: str | Path, spec: ClusterSpec) -> None:
    """Write a cluster file readable by its owner only (it holds the secret)."""
    p = Path(path)
    data = spec.model_dump(mode="json", exclude_none=True)
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    p.chmod(0o600)


def new_secret() -> str:
    return secrets.token_hex(24)
