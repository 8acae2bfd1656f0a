"""TCP transport on asyncio: length-prefixed msgpack frames, HMAC handshake.

asyncio's ``Protocol`` callbacks (not streams) keep the per-frame cost to one
``data_received`` and a slice: the raw round trip this gives is what
``fednode bench`` reports as the transport's cost, and what FedFS operations
are compared with.  Nagle is off (asyncio sets TCP_NODELAY on its sockets).

A connection is refused, with a reason sent before it is closed, when the
peer fails the handshake, names a node that is not a member, sends a frame
larger than ``max_message_bytes`` (the stream cannot be trusted after that),
or says nothing for ``connect_timeout_ms``.  A garbled frame of the right
length is the agent's business: the stream is still in step, so the agent
answers with an error and goes on.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from fednode import wire
from fedsim.protocol.messages import PeerUnavailable

if TYPE_CHECKING:
    from fednode.config import Cluster
    from fednode.runtime import Agent

log = logging.getLogger("fednode.tcp")


class TcpConn(asyncio.Protocol):
    """One TCP connection, either side; it is the agent's ``Conn`` once open."""

    def __init__(self, tcp: TcpTransport, server: bool, peer: int = wire.CLIENT_ID) -> None:
        self.tcp = tcp
        self.server = server
        self.peer = peer
        self.closed = False
        self.open = False
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._challenge = b""
        self._mine = b""
        self._timer: asyncio.TimerHandle | None = None

    # -- asyncio.Protocol ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self.tcp.connect_timeout, self._handshake_timeout)
        if self.server:
            self._challenge = wire.nonce()
            transport.write(wire.frame(self._challenge))  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        while len(buf) >= 4:
            n = wire.HEADER.unpack_from(buf)[0]
            limit = self.tcp.max_size if self.open else wire.HANDSHAKE_MAX
            if n > limit:
                self._refuse(f"frame of {n} bytes exceeds the {limit}-byte limit")
                return
            if len(buf) < 4 + n:
                return
            payload = bytes(buf[4 : 4 + n])
            del buf[: 4 + n]
            if self.open:
                self.tcp.deliver(self, payload)
            else:
                self._handshake(payload)
            if self.closed:
                return

    def connection_lost(self, exc: Exception | None) -> None:
        was_open = self.open
        self.closed = True
        self.open = False
        if self._timer:
            self._timer.cancel()
        reason = str(exc) if exc else "closed by the other side"
        if not self.ready.done():
            self.ready.set_exception(PeerUnavailable(self.peer, reason))
        if was_open:
            self.tcp.lost(self, reason)

    # -- handshake -------------------------------------------------------------------
    def _handshake(self, payload: bytes) -> None:
        secret = self.tcp.secret
        try:
            if self.server:
                who, welcome = wire.check_hello(secret, self._challenge, payload)
                if who != wire.CLIENT_ID and who not in self.tcp.members:
                    raise wire.AuthError(f"node {who} is not a member of this federation")
                self.peer = who
                assert self.transport is not None
                self.transport.write(welcome)
            elif not self._mine:
                hello, self._mine = wire.hello(secret, payload, self.tcp.me)
                assert self.transport is not None
                self.transport.write(hello)
                return
            else:
                wire.check_welcome(secret, self._mine, payload)
        except wire.AuthError as exc:
            self.tcp.refused += 1
            log.warning("refused a connection from %s: %s", self._addr(), exc)
            if self.server:
                self._refuse(str(exc))
            else:
                self._fail(exc)
            return
        if self._timer:
            self._timer.cancel()
        self.open = True
        if not self.ready.done():
            self.ready.set_result(None)

    def _handshake_timeout(self) -> None:
        if not self.open and not self.closed:
            self._refuse("no handshake within the connect timeout")

    def _refuse(self, reason: str) -> None:
        if self.transport is not None and not self.closed:
            if self.server and not self.open:
                self.transport.write(wire.refusal(reason))
            log.warning("closing connection from %s: %s", self._addr(), reason)
        self._fail(ConnectionError(reason))

    def _fail(self, exc: Exception) -> None:
        if not self.ready.done():
            self.ready.set_exception(exc)
        self.close()

    def _addr(self) -> Any:
        return self.transport.get_extra_info("peername") if self.transport else "?"

    # -- Conn --------------------------------------------------------------------------
    def send(self, payload: bytes) -> None:
        if self.closed or self.transport is None:
            raise ConnectionError("connection closed")
        self.transport.writelines((wire.HEADER.pack(len(payload)), payload))

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()
        self.closed = True


class TcpTransport:
    name = "tcp"

    def __init__(self, cluster: Cluster, node_id: int) -> None:
        spec = cluster.spec
        self.cluster = cluster
        self.me = node_id
        self.members = set(spec.members)
        self.secret = cluster.secret
        self.max_size = spec.max_message_bytes
        self.connect_timeout = spec.connect_timeout_ms / 1000.0
        self.server: asyncio.base_events.Server | None = None
        self.agent: Agent
        self.refused = 0

    def deliver(self, conn: TcpConn, payload: bytes) -> None:
        """An authenticated connection's frame (the verbs transport intercepts
        its set-up frames here)."""
        self.agent.on_frame(conn, payload)

    def lost(self, conn: TcpConn, reason: str) -> None:
        self.agent.on_lost(conn, reason)

    def describe(self) -> dict[str, Any]:
        """What ``fednode status`` shows about the transport."""
        return {"transport": self.name, "refused_connections": self.refused}

    async def start(self, agent: Agent) -> None:
        self.agent = agent
        me = self.cluster.spec.node(self.me)
        loop = asyncio.get_running_loop()
        try:
            self.server = await loop.create_server(
                lambda: TcpConn(self, server=True), me.host, me.port, reuse_address=True
            )
        except OSError as exc:
            raise OSError(exc.errno, f"node {self.me} cannot listen on {me.host}:{me.port}: {exc.strerror}") from None

    async def connect(self, node: int) -> TcpConn:
        spec = self.cluster.spec.node(node)
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(lambda: TcpConn(self, server=False, peer=node), spec.host, spec.port),
                self.connect_timeout,
            )
            await asyncio.wait_for(conn.ready, self.connect_timeout)
        except TimeoutError:
            raise PeerUnavailable(node, f"no connection to {spec.host}:{spec.port} within the timeout") from None
        except wire.AuthError as exc:
            raise PeerUnavailable(node, str(exc)) from None
        except OSError as exc:
            raise PeerUnavailable(node, f"cannot connect to {spec.host}:{spec.port}: {exc.strerror or exc}") from None
        return conn

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
