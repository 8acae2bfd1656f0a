"""TCP transport on asyncio: length-prefixed msgpack frames, HMAC handshake, optional TLS.

asyncio's ``Protocol`` callbacks (not streams) keep the per-frame cost to one
``data_received`` and a slice: the raw round trip this gives is what
``fednode bench`` reports as the transport's cost, and what FedFS operations
are compared with.  Nagle is off (asyncio sets TCP_NODELAY on its sockets).

A connection is refused, with a reason sent before it is closed, when the
peer fails the handshake (a node that proves the peer key may connect
whether or not the view names it yet: a node joining asks a member for the
view and to be let in; the view, not the transport, decides membership), sends a frame
larger than ``max_message_bytes`` (the stream cannot be trusted after that),
says nothing for ``connect_timeout_ms`` (the handshake timeout), or comes from
an address that already holds ``limits.max_connections_per_source``
authenticated connections.  At ``limits.max_handshakes_per_source``
unauthenticated connections from one address, the oldest is closed to make
room: sockets held open without a handshake cost a slot each, never a
legitimate client's connect (from that address or any other).  A garbled frame of the right
length is the agent's business: the stream is still in step, so the agent
answers with an error and goes on.

Events an outsider can cause at will (refusals, handshake timeouts, capped
connects) are logged once per source address and kind per minute and
counted in ``describe()`` (``fednode status``): a flood costs counters, not a
log line or a traceback each.

Back-pressure, for client connections (``limits:``): the agent holds a
connection's reading while it has ``max_inflight_requests`` requests in
flight or reads in flight that may bring ``max_buffered_bytes`` of replies
(``hold``/``release``), and while more than ``max_buffered_bytes`` of
replies wait for a reader that does not drain (asyncio's write-buffer
high-water mark: ``pause_writing``).  Frames already received wait in the
connection's buffer and are parsed when it resumes.  Peer connections are
never held: a peer's replies to our own calls travel on the same connection,
and holding it could deadlock the handlers that wait for them.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections import Counter
from typing import TYPE_CHECKING, Any

from fednode import wire
from fedsim.protocol.messages import PeerUnavailable
from fedsim.schema import ConfigError

if TYPE_CHECKING:
    from fednode.config import Cluster
    from fednode.runtime import Agent

log = logging.getLogger("fednode.tcp")

QUIET_S = 60.0  # an outsider-caused event is logged at most once per source, kind and this many seconds
BACKLOG = 1024  # pending connects the kernel queues for accept: a burst is absorbed, not refused


def tls_contexts(cluster: Cluster, server: bool) -> ssl.SSLContext | None:
    """The ``ssl`` context the cluster file's ``tls:`` asks for (None: plain TCP).

    ``server``: an agent's listening side (its certificate and key); else the
    connecting side (peers and clients), which verifies the agent's
    certificate against ``tls.ca`` and that it names the host it dialled."""
    tls = cluster.spec.tls
    if tls is None:
        return None
    try:
        if server:
            if tls.cert is None or tls.key is None:
                raise ConfigError(
                    "tls: an agent needs 'cert' and 'key' (its certificate and private key); this file has only 'ca'"
                )
            ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ctx.load_cert_chain(cluster.path(tls.cert), cluster.path(tls.key))
        else:
            ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(cluster.path(tls.ca)))
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"tls: cannot load {'cert/key' if server else 'ca'}: {exc}") from None
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


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
        # Only the connecting side awaits ``ready``; a server-side future would
        # hold the refusal's exception with nobody to retrieve it ("Future
        # exception was never retrieved" for every refused connection).
        self.ready: asyncio.Future[None] | None = asyncio.get_running_loop().create_future() if not server else None
        self.source = ""  # the other side's IP address (server side: the per-source caps)
        self.counted = False  # in tcp.sources / tcp.handshaking
        self._challenge = b""
        self._mine = b""
        self._timer: asyncio.TimerHandle | None = None
        self._holds: set[str] = set()  # why reading is paused: "requests", "writes"
        self._last_rx = 0.0

    # -- asyncio.Protocol ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        loop = asyncio.get_running_loop()
        if self.server:
            peer = transport.get_extra_info("peername")
            self.source = str(peer[0]) if isinstance(peer, tuple) else str(peer)
            why = self.tcp.admit(self)
            if why is not None:
                self.refuse(why)
                return
            transport.set_write_buffer_limits(high=self.tcp.max_buffered)  # type: ignore[attr-defined]
        self._timer = loop.call_later(self.tcp.connect_timeout, self._handshake_timeout)
        if self.server:
            self._challenge = wire.nonce()
            transport.write(wire.frame(self._challenge))  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self._last_rx = asyncio.get_running_loop().time()
        self._parse()

    def _parse(self) -> None:
        """Hand over every whole frame in the buffer, unless reading is held."""
        buf = self.buf
        while len(buf) >= 4 and not self._holds and not self.closed:
            n = wire.HEADER.unpack_from(buf)[0]
            limit = self.tcp.max_size if self.open else wire.HANDSHAKE_MAX
            if n > limit:
                self._refuse(f"frame of {n} bytes exceeds the {limit}-byte limit", "oversized frame")
                return
            if len(buf) < 4 + n:
                return
            payload = bytes(buf[4 : 4 + n])
            del buf[: 4 + n]
            if self.open:
                self.tcp.deliver(self, payload)
            else:
                self._handshake(payload)

    def connection_lost(self, exc: Exception | None) -> None:
        was_open = self.open
        self.closed = True
        self.open = False
        if self._timer:
            self._timer.cancel()
        self.tcp.uncount(self)
        reason = str(exc) if exc else "closed by the other side"
        if self.ready is not None and not self.ready.done():
            self.ready.set_exception(PeerUnavailable(self.peer, reason))
        if was_open:
            self.tcp.lost(self, reason)

    def pause_writing(self) -> None:
        """More than ``max_buffered_bytes`` of replies wait: stop reading a client until they drain."""
        if self.server and self.peer == wire.CLIENT_ID:
            self.tcp.paused += 1
            self.hold("writes")

    def resume_writing(self) -> None:
        self.release("writes")

    # -- flow control (the agent's side) -----------------------------------------------
    def hold(self, reason: str) -> None:
        """Stop reading from this connection until ``release(reason)``."""
        if not self._holds and self.transport is not None and not self.closed:
            self.transport.pause_reading()
        self._holds.add(reason)

    def release(self, reason: str) -> None:
        if reason not in self._holds:
            return
        self._holds.discard(reason)
        if not self._holds and self.transport is not None and not self.closed:
            self.transport.resume_reading()
            asyncio.get_running_loop().call_soon(self._parse)  # frames that arrived before the hold

    @property
    def held(self) -> bool:
        return bool(self._holds)

    def buffered(self) -> int:
        """Reply bytes queued for the other side and not yet taken by the kernel."""
        t = self.transport
        return t.get_write_buffer_size() if t is not None and not self.closed else 0

    # -- handshake -------------------------------------------------------------------
    def _handshake(self, payload: bytes) -> None:
        cluster = self.tcp.cluster
        try:
            if self.server:
                who, welcome = wire.check_hello(cluster.key_for, self._challenge, payload)
                if who < wire.CLIENT_ID:
                    raise wire.AuthError(f"node id {who} is not a node id")
                self.peer = who
                assert self.transport is not None
                self.transport.write(welcome)
            elif not self._mine:
                hello, self._mine = wire.hello(cluster.key_for(self.tcp.me), payload, self.tcp.me)
                assert self.transport is not None
                self.transport.write(hello)
                return
            else:
                wire.check_welcome(cluster.key_for(self.tcp.me), self._mine, payload, self.tcp.me)
        except wire.AuthError as exc:
            self.tcp.refused += 1
            if self.server:
                self._refuse(str(exc), "failed handshake")
            else:
                log.warning("node %d: %s refused us: %s", self.tcp.me, self._addr(), exc)
                self._fail(exc)
            return
        if self._timer:
            self._timer.cancel()
            self._timer = None
        self.open = True
        if self.server:
            self.tcp.authenticated(self)
            if self.peer == wire.CLIENT_ID and self.tcp.idle_timeout:
                self._last_rx = asyncio.get_running_loop().time()
                self._timer = asyncio.get_running_loop().call_later(self.tcp.idle_timeout, self._idle_check)
        if self.ready is not None and not self.ready.done():
            self.ready.set_result(None)

    def _handshake_timeout(self) -> None:
        if not self.open and not self.closed:
            self.tcp.handshake_timeouts += 1
            self._refuse("no handshake within the connect timeout", "handshake timeout")

    def _idle_check(self) -> None:
        """Close a client connection that sent nothing for ``idle_timeout_s``
        and waits for nothing (a held connection is the reader's fault, not idleness)."""
        if self.closed:
            return
        loop = asyncio.get_running_loop()
        left = self._last_rx + self.tcp.idle_timeout - loop.time()
        if left <= 0 and not self._holds and not self.tcp.agent.busy(self):
            self.tcp.idle_closed += 1
            log.debug("closing idle client connection from %s", self._addr())
            self.close()
            return
        self._timer = loop.call_later(max(left, self.tcp.idle_timeout / 4), self._idle_check)

    def refuse(self, reason: str) -> None:
        """Send the refusal and close (the transport's eviction; it logs once for all)."""
        if self.transport is not None and not self.closed and not self.open:
            self.transport.write(wire.refusal(reason))
        self._fail(ConnectionError(reason))

    def _refuse(self, reason: str, kind: str) -> None:
        if self.transport is not None and not self.closed:
            if self.server and not self.open:
                self.transport.write(wire.refusal(reason))
            src = self.source or str(self._addr())
            self.tcp.note(src, kind, "closing connection from %s: %s", self._addr(), reason)
        self._fail(ConnectionError(reason))

    def _fail(self, exc: Exception) -> None:
        if self.ready is not None and not self.ready.done():
            self.ready.set_exception(exc)
        self.close()

    def _addr(self) -> Any:
        return self.transport.get_extra_info("peername") if self.transport else "?"

    # -- Conn --------------------------------------------------------------------------
    def send(self, payload: bytes) -> None:
        t = self.transport
        if self.closed or t is None:
            raise ConnectionError("connection closed")
        t.writelines((wire.HEADER.pack(len(payload)), payload))
        n = t.get_write_buffer_size()
        if n > self.tcp.peak_buffered:
            self.tcp.peak_buffered = n

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()
        self.closed = True


class TcpTransport:
    name = "tcp"

    def __init__(self, cluster: Cluster, node_id: int) -> None:
        spec = cluster.spec
        if cluster.peer_key is None:
            cluster.key_for(node_id)  # raises the ConfigError that says a client file cannot run an agent
        self.cluster = cluster
        self.me = node_id
        self.max_size = spec.max_message_bytes
        self.connect_timeout = spec.connect_timeout_ms / 1000.0
        limits = spec.limits
        self.max_buffered = limits.max_buffered_bytes
        self.idle_timeout = limits.idle_timeout_s
        self.max_per_source = limits.max_connections_per_source
        self.max_handshakes = limits.max_handshakes_per_source
        self.server_ssl = tls_contexts(cluster, server=True)
        self.client_ssl = tls_contexts(cluster, server=False)
        self.server: asyncio.base_events.Server | None = None
        self.agent: Agent
        self.accepted: set[TcpConn] = set()  # authenticated server-side connections
        self.sources: Counter[str] = Counter()  # open server-side connections per source address
        # of which still in the handshake, oldest first (a dict as an ordered set)
        self.handshaking: dict[str, dict[TcpConn, None]] = {}
        self._quiet: dict[tuple[str, str], float] = {}  # (source, kind) -> logged until
        self.contacts: dict[int, tuple[str, int]] = {}  # addresses learned from views (``address``)
        self.refused = 0  # failed handshakes
        self.capped = 0  # connects refused by the per-source cap
        self.evicted = 0  # unauthenticated connections closed to make room for new ones from the same address
        self.handshake_timeouts = 0
        self.idle_closed = 0
        self.paused = 0  # times a client's reading was held because it did not drain
        self.peak_buffered = 0  # the most reply bytes one connection has had waiting

    # -- what the connections report -----------------------------------------------
    def admit(self, conn: TcpConn) -> str | None:
        """Count a new server-side connection, or the reason to refuse it.

        At ``max_handshakes_per_source`` the oldest connection from that
        address still in the handshake makes room (it is refused and closed):
        idle unauthenticated sockets cannot lock out a client that answers the
        challenge at once, even from the same address.  At
        ``max_connections_per_source`` the same eviction is tried; when every
        connection from there is authenticated, the new one is refused."""
        src = conn.source
        waiting = self.handshaking.get(src)
        full = self.sources[src] >= self.max_per_source
        if full or (waiting is not None and len(waiting) >= self.max_handshakes):
            if waiting:
                oldest = next(iter(waiting))
                self.evicted += 1
                key = "max_connections_per_source" if full else "max_handshakes_per_source"
                why = f"evicted: {src} has too many connections in the handshake (limits.{key} raises the limit)"
                self.note(src, "evicted", "%s; the oldest make room for new ones, further evictions are counted",
                          why)  # fmt: skip
                self.uncount(oldest)
                oldest.refuse(why)
            else:
                self.capped += 1
                why = (f"{src} already holds {self.sources[src]} connections "
                       "(limits.max_connections_per_source in the cluster file raises the limit)")  # fmt: skip
                self.note(src, "capped", "refusing connections: %s; further refusals are counted", why)
                return why
        self.sources[src] += 1
        self.handshaking.setdefault(src, {})[conn] = None
        conn.counted = True
        return None

    def authenticated(self, conn: TcpConn) -> None:
        waiting = self.handshaking.get(conn.source)
        if waiting is not None and waiting.pop(conn, 0) is None and not waiting:
            del self.handshaking[conn.source]
        self.accepted.add(conn)

    def uncount(self, conn: TcpConn) -> None:
        """Take a counted server-side connection out of the per-source counts (closing, or evicted)."""
        if not conn.counted:
            return
        conn.counted = False
        src = conn.source
        self.sources[src] -= 1
        if self.sources[src] <= 0:
            del self.sources[src]
        waiting = self.handshaking.get(src)
        if waiting is not None and waiting.pop(conn, 0) is None and not waiting:
            del self.handshaking[src]
        self.accepted.discard(conn)

    def note(self, source: str, kind: str, msg: str, *args: Any) -> None:
        """Log an event an outsider can cause at will once per (source, kind) per QUIET_S."""
        now = asyncio.get_running_loop().time()
        key = (source, kind)
        if self._quiet.get(key, 0.0) > now:
            return
        if len(self._quiet) > 4096:  # addresses sprayed: keep the memory bounded
            self._quiet = {k: t for k, t in self._quiet.items() if t > now}
        self._quiet[key] = now + QUIET_S
        log.warning("node %d: " + msg + " (more of these from %s within %g s: counted, not logged)",
                    self.me, *args, source, QUIET_S)  # fmt: skip

    def deliver(self, conn: TcpConn, payload: bytes) -> None:
        """An authenticated connection's frame (the verbs transport intercepts
        its set-up frames here)."""
        self.agent.on_frame(conn, payload)

    def lost(self, conn: TcpConn, reason: str) -> None:
        self.agent.on_lost(conn, reason)

    def describe(self) -> dict[str, Any]:
        """What ``fednode status`` shows about the transport and its connections."""
        buffered = [c.buffered() for c in self.accepted]
        return {
            "transport": self.name,
            "tls": self.server_ssl is not None,
            "refused_connections": self.refused,
            "capped_connections": self.capped,
            "evicted_handshakes": self.evicted,
            "handshake_timeouts": self.handshake_timeouts,
            "idle_closed": self.idle_closed,
            "connections": len(self.accepted),
            "held_connections": sum(1 for c in self.accepted if c.held),
            "paused_for_writes": self.paused,
            "buffered_reply_bytes": sum(buffered),
            "peak_buffered_reply_bytes": self.peak_buffered,
        }

    # -- life cycle ----------------------------------------------------------------
    async def start(self, agent: Agent) -> None:
        self.agent = agent
        me = self.cluster.spec.node(self.me)
        loop = asyncio.get_running_loop()
        tls: dict[str, Any] = {}
        if self.server_ssl is not None:
            tls = {"ssl": self.server_ssl, "ssl_handshake_timeout": self.connect_timeout}
        try:
            self.server = await loop.create_server(
                lambda: TcpConn(self, server=True), me.host, me.port, reuse_address=True, backlog=BACKLOG, **tls
            )
        except OSError as exc:
            raise OSError(exc.errno, f"node {self.me} cannot listen on {me.host}:{me.port}: {exc.strerror}") from None

    def address(self, node: int) -> tuple[str, int]:
        """Where ``node`` listens: the cluster file, or else the contact it
        joined with (``View.contacts``: a node that joined a running
        federation is in its own cluster file, not in the others')."""
        for n in self.cluster.spec.nodes:
            if n.id == node:
                return n.host, n.port
        contact = self.agent.node.view.contact(node)
        if contact is None:
            known = self.contacts.get(node)
            if known is None:
                raise PeerUnavailable(node, "no address: not in the cluster file, and the view names none")
            return known
        host, _, port = contact.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise PeerUnavailable(node, f"the view's address of node {node} is not HOST:PORT: {contact!r}")
        self.contacts[node] = host, int(port)  # still reachable once a later view drops it (a leaver)
        return host, int(port)

    async def connect(self, node: int) -> TcpConn:
        host, port = self.address(node)
        loop = asyncio.get_running_loop()
        tls: dict[str, Any] = {}
        if self.client_ssl is not None:
            tls = {"ssl": self.client_ssl, "server_hostname": host, "ssl_handshake_timeout": self.connect_timeout}
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(lambda: TcpConn(self, server=False, peer=node), host, port, **tls),
                self.connect_timeout,
            )
            assert conn.ready is not None
            await asyncio.wait_for(conn.ready, self.connect_timeout)
        except TimeoutError:
            raise PeerUnavailable(node, f"no connection to {host}:{port} within the timeout") from None
        except wire.AuthError as exc:
            raise PeerUnavailable(node, str(exc)) from None
        except ssl.SSLError as exc:
            raise PeerUnavailable(node, f"TLS with {host}:{port} failed: {exc}") from None
        except OSError as exc:
            raise PeerUnavailable(node, f"cannot connect to {host}:{port}: {exc.strerror or exc}") from None
        return conn

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            for c in list(self.accepted):
                c.close()
            await self.server.wait_closed()
