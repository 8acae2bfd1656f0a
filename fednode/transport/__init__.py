"""Transports: how an agent's envelopes reach its peers.

A transport listens for connections and opens them to peers; a connection
(``Conn``) carries whole envelopes (msgpack payloads) in order, and tells the
agent about each one it receives (``Agent.on_frame``) and about its loss
(``Agent.on_lost``).  The agent never sees sockets or queue pairs, so TCP,
the in-process transport of the tests and the RDMA transport plug into the
same seam.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
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
