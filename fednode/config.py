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

Every agent reads the same file.  Two keys are derived from the secret, one
per role (``role_key``): agents prove the peer key, client programs the client
key (HMAC challenge on connect).  A client needs only a *client file*
(``client_file_spec``, ``fednode client-file``): the same file with
``client_key:`` instead of the secret, which cannot speak the peer protocol.
Policies and protocol parameters live here, not per node, because every member
must hash names and choose homes the same way.  ``protocol:`` is ``fedsim.schema.ProtocolSpec``
with the agent's defaults (``AgentProtocolSpec``), so the configuration an
agent is deployed with can be pasted into a simulator config as it is.
``limits:`` bounds what one connection may make an agent hold, and ``tls:``
encrypts the TCP transport.
"""

from __future__ import annotations

import hashlib
import hmac
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

from fedsim.protocol.config import MAX_BLOCK_FETCH, FederationSpec
from fedsim.protocol.hashing import ModN, Ring, make_hashing
from fedsim.schema import SHAPE_KEYS, ConfigError, ProtocolSpec, Strict, moved_keys, read_yaml, word_errors

DEFAULT_PORT = 7400
#: Bytes of a message that are not read/write payload (the envelope, the
#: request id, the path ...): a payload chunk is ``max_message_bytes`` minus this.
ENVELOPE_HEADROOM = 4096
#: The smallest read/write payload per message that still makes progress.
MIN_CHUNK = 4096
MIN_MESSAGE_BYTES = ENVELOPE_HEADROOM + MIN_CHUNK
CLIENT_ROLE, PEER_ROLE = "client", "peer"


def role_key(secret: bytes, role: str) -> bytes:
    """The key a role proves in the handshake: HMAC-SHA256(secret, "fedfs role key: " + role).

    Derived, so one secret in the cluster file still configures everything,
    but a client given only its key (a client file) cannot compute the peer
    key, and so cannot authenticate as a member and speak the peer protocol."""
    return hmac.new(secret, b"fedfs role key: " + role.encode(), hashlib.sha256).digest()


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


class LimitsSpec(Strict):
    """What one connection may make an agent hold (``limits:`` in the cluster file).

    Every size and count a request carries is checked against these before any
    work starts; a request beyond one is refused with EINVAL naming the key
    that raises it.  The defaults suit a shared test bed: far above what
    ``fednode bench`` and the client library use, far below what hurts."""

    max_inflight_requests: int = Field(32, ge=1, le=1 << 16)  # per client connection; reading pauses at the limit
    max_buffered_bytes: int = Field(4 << 20, ge=64 << 10)  # unread reply bytes per connection before reading pauses
    idle_timeout_s: NonNegativeFloat = 600.0  # close a silent client connection with nothing in flight (0: never)
    max_connections_per_source: PositiveInt = 256  # open connections from one IP address, authenticated or not
    max_handshakes_per_source: PositiveInt = 64  # connections from one IP address still in the handshake
    max_ping_count: PositiveInt = 100_000  # round trips per ping request
    max_ping_bytes: int = Field(1 << 20, ge=0)  # payload per round trip (also at most max_message_bytes - 4096)
    max_bench_calls: PositiveInt = 100_000  # timed calls per bench request
    max_pins: PositiveInt = 100_000  # forced placements (pin) an agent keeps


class TlsSpec(Strict):
    """TLS for the TCP transport (the standard library's ``ssl``).

    Agents present ``cert``/``key`` (PEM; the certificate must name the host
    the cluster file gives for the node, as a DNS name or IP address); peers
    and clients verify it against ``ca``.  A client needs only ``ca``.
    Relative paths resolve against the cluster file.  The HMAC handshake still
    runs inside TLS: TLS hides and protects the traffic and proves which host
    answers, the handshake proves the role."""

    ca: str
    cert: str | None = None
    key: str | None = None

    @model_validator(mode="after")
    def _pair(self) -> TlsSpec:
        if (self.cert is None) != (self.key is None):
            raise ValueError("give both 'cert' and 'key' (an agent's certificate and its private key), or neither")
        return self


class ClusterSpec(Strict):
    secret: str | None = None
    secret_file: str | None = None
    client_key: str | None = None  # a client file: the client role's key (hex), instead of the secret
    seed: int = 0  # of the per-node policy state (e.g. placement: random)
    transport: Literal["tcp", "verbs", "auto"] = "tcp"
    workers: PositiveInt = 8  # protocol workers per node and per nesting depth
    rpc_timeout_ms: PositiveFloat = 2000.0
    connect_timeout_ms: PositiveFloat = 1000.0
    max_message_bytes: int = 16 << 20
    protocol: AgentProtocolSpec = AgentProtocolSpec()
    rdma: RdmaSpec = RdmaSpec()
    limits: LimitsSpec = LimitsSpec()
    tls: TlsSpec | None = None
    nodes: list[NodeSpec] = Field(min_length=1)

    @field_validator("max_message_bytes")
    @classmethod
    def _usable_messages(cls, v: int) -> int:
        if v < MIN_MESSAGE_BYTES:
            raise ValueError(
                f"must be at least {MIN_MESSAGE_BYTES}: a message keeps {ENVELOPE_HEADROOM} bytes for its envelope "
                f"and must still carry a {MIN_CHUNK}-byte read/write chunk (with less, reads return nothing and "
                "writes never finish)"
            )
        return v

    @model_validator(mode="after")
    def _cache_fits_messages(self) -> ClusterSpec:
        if self.protocol.block_cache_blocks and self.max_io < MAX_BLOCK_FETCH:
            raise ValueError(
                f"protocol.block_cache_blocks needs max_message_bytes of at least "
                f"{MAX_BLOCK_FETCH + ENVELOPE_HEADROOM}: a cache miss fetches up to {MAX_BLOCK_FETCH} bytes "
                "in one reply"
            )
        return self

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
        given = [k for k in ("secret", "secret_file", "client_key") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of 'secret' and 'secret_file' (the federation's shared secret), or 'client_key' "
                f"(a client file, from `fednode client-file`); got {', '.join(given) or 'none'}"
            )
        if self.client_key is not None:
            try:
                ok = len(bytes.fromhex(self.client_key)) == 32
            except ValueError:
                ok = False
            if not ok:
                raise ValueError("client_key: 64 hex digits, as `fednode client-file` writes it")
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

    @property
    def max_io(self) -> int:
        """The largest read/write payload of one message (a client's chunk, an agent's read clamp)."""
        return self.max_message_bytes - ENVELOPE_HEADROOM

    def secret_bytes(self, source: Path | None = None) -> bytes | None:
        """The shared secret, or None for a client file (it holds only the client key)."""
        if self.client_key is not None:
            return None
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
        if self.secret is None:
            assert spec.client_key is not None
            self.client_key = bytes.fromhex(spec.client_key)
            self.peer_key: bytes | None = None
        else:
            self.client_key = role_key(self.secret, CLIENT_ROLE)
            self.peer_key = role_key(self.secret, PEER_ROLE)

    def key_for(self, who: int) -> bytes:
        """The key that ``who`` (a node id, or -1 for a client program) proves in the handshake."""
        if who < 0:
            return self.client_key
        if self.peer_key is None:
            raise ConfigError(
                "this is a client file (it holds only client_key): it can connect client programs, not run or "
                "impersonate an agent; agents need the cluster file with the secret"
            )
        return self.peer_key

    def leave_proof(self, node_id: int) -> bytes:
        """What ``fednode leave`` shows agent ``node_id`` to make it leave:
        HMAC-SHA256(secret, "fedfs leave: " + id).  Derived from the secret,
        so a client file (client key only) cannot shrink the federation."""
        if self.secret is None:
            raise ConfigError(
                "this is a client file (it holds only client_key): making a node leave needs the cluster file "
                "with the secret"
            )
        return hmac.new(self.secret, f"fedfs leave: {node_id}".encode(), hashlib.sha256).digest()

    def path(self, name: str) -> Path:
        """A file the cluster file names (TLS files): relative to the cluster file."""
        p = Path(name).expanduser()
        if not p.is_absolute() and self.source is not None:
            p = self.source.parent / p
        return p

    def root_of(self, node_id: int) -> Path:
        return self.path(self.spec.node(node_id).root)


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


def client_file_spec(cluster: Cluster) -> ClusterSpec:
    """The cluster file a client program needs: everything but the secret,
    which is replaced by the client role's key (see ``role_key``)."""
    spec = cluster.spec
    return spec.model_copy(update={"secret": None, "secret_file": None, "client_key": cluster.client_key.hex()})


def new_secret() -> str:
    return secrets.token_hex(24)
