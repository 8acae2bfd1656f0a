"""The cluster file: which agents form a federation, where they listen, what they serve.

A YAML file, validated as strictly as the simulator's configs (the same
wording of errors, ``fedsim.schema.word_errors``)::

    secret: 3f1c...                 # shared secret (hex or any string); or secret_file: PATH
    protocol:                       # the same section, key for key, as a simulator config's
      placement: with_manager       # any registered placement policy
      hashing: mod_n                # mod_n | ring | any registered hashing
      summary_refresh_s: 5          # re-summarise the local tree every 5 s (0 = never)
    nodes:
      - {id: 0, host: 127.0.0.1, port: 7400, root: /srv/fedfs/n0}
      - {id: 1, host: 10.0.0.2, port: 7400, root: /srv/fedfs/n1, rdma_device: rxe0}

Every agent and every client reads the same file; the secret authenticates
peers and clients (HMAC challenge on connect).  Policies and protocol
parameters live here, not per node, because every member must hash names and
choose homes the same way.  ``protocol:`` is ``fedsim.schema.ProtocolSpec``
with the agent's defaults (``AgentProtocolSpec``), so the configuration an
agent is deployed with can be pasted into a simulator config as it is.
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

from fedsim.protocol.config import FederationSpec
from fedsim.protocol.hashing import ModN, Ring, make_hashing
from fedsim.schema import SHAPE_KEYS, ConfigError, ProtocolSpec, Strict, moved_keys, read_yaml, word_errors

DEFAULT_PORT = 7400


class NodeSpec(Strict):
    id: int = Field(ge=0)
    host: str = "127.0.0.1"
    port: int = Field(DEFAULT_PORT, ge=1, le=65535)
    root: str
    rdma_device: str | None = None
    gid_index: int | None = Field(None, ge=0)


class AgentProtocolSpec(ProtocolSpec):
    """The shared ``protocol:`` schema with the agent's defaults: the same
    keys, types and checks, only an open world.  Files and directories appear
    in the local trees outside the federation, so VDs age out, a miss
    re-merges an older VD (see ``ProtocolConfig``), and each agent
    re-summarises its tree every few seconds."""

    vd_max_age_s: NonNegativeFloat = 30.0
    vd_miss_age_s: NonNegativeFloat = 1.0
    summary_refresh_s: NonNegativeFloat = 5.0


#: Keys that cluster files written before the shared schema held at the top
#: level; reading one is an error that names its place under ``protocol:``.
MOVED: dict[str, str] = moved_keys("", (*SHAPE_KEYS, "summary_refresh_s"))


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
    seed: int = 0  # of the per-node policy state (e.g. placement: random)
    transport: Literal["tcp", "verbs", "auto"] = "tcp"
    workers: PositiveInt = 8  # protocol workers per node and per nesting depth
    rpc_timeout_ms: PositiveFloat = 2000.0
    connect_timeout_ms: PositiveFloat = 1000.0
    max_message_bytes: int = Field(16 << 20, ge=4096)
    protocol: AgentProtocolSpec = AgentProtocolSpec()
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
        return self.protocol.federation(self.members, self.seed)

    def hashing_fn(self) -> ModN | Ring:
        return make_hashing(self.protocol.hashing, self.members, self.protocol.vnodes)

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
        raise ConfigError(word_errors(source, exc, ClusterSpec, moved=MOVED)) from None


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
