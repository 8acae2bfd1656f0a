"""Transports: how an agent's envelopes reach its peers.

A transport listens for connections and opens them to peers; a connection
(``Conn``) carries whole envelopes (msgpack payloads) in order, and tells the
agent about each one it receives (``Agent.on_frame``) and about its loss
(``Agent.on_lost``).  The agent never sees sockets or queue pairs, so TCP,
the in-process transport of the tests and the RDMA transport plug into the
same seam.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from fednode.config import Cluster
    from fednode.runtime import Agent


class Conn(Protocol):
    peer: int  # the authenticated node id at the other end, or wire.CLIENT_ID
    closed: bool

    def send(self, payload: bytes) -> None:
        """Queue one envelope; never blocks.  Raises ConnectionError when closed."""
        ...

    def close(self) -> None: ...


class Transport(Protocol):
    name: str

    async def start(self, agent: Agent) -> None:
        """Listen for peers and clients; frames go to ``agent``."""
        ...

    async def connect(self, node: int) -> Conn:
        """An authenticated connection to member ``node`` (PeerUnavailable if not)."""
        ...

    async def stop(self) -> None: ...

    def describe(self) -> dict[str, Any]:
        """What ``fednode status`` shows: at least ``transport`` (its name),
        and for RDMA the device and the counters of operations."""
        ...


def make_transport(cluster: Cluster, node: int, kind: str | None = None) -> Transport:
    """The transport the cluster file asks for (``kind`` overrides it): TCP,
    or verbs (``auto``: verbs where this node has a usable RDMA device, TCP
    otherwise).  A ``verbs`` node without a usable device is a ConfigError
    naming what is missing."""
    kind = kind or cluster.spec.transport
    if kind == "tcp":
        from fednode.transport.tcp import TcpTransport

        return TcpTransport(cluster, node)
    if kind in ("verbs", "auto"):
        from fednode.transport.verbs import VerbsTransport

        return VerbsTransport(cluster, node, kind)
    raise ValueError(f"transport must be 'tcp', 'verbs' or 'auto', not {kind!r}")
