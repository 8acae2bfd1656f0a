"""The in-process transport: agents of one event loop, envelopes handed over
by the loop.  Every envelope is still encoded and decoded (the codec and its
limits are exercised), and delivery is asynchronous (``call_soon``) as on a
wire, so the agents' concurrency is the real one; only sockets are missing.

The network can be faulty: ``InprocNetwork.inject`` applies a
``fedsim.faults.FaultPlan`` to every envelope sent from then on (lost, late by
``call_later``, cut by a partition), so the agent's own timeouts, retries and
reconnects are tested against the same schedules as the simulator.  As on a
real network, a partition cuts envelopes, not connections: a connection made
across it stays open, and what is sent on it is lost.  A node's host can
also lose its power (``down``, ``AgentGroup.crash``): everything to or from it
is lost, as when the simulator crashes a node.  On an
event loop with a virtual clock (``tests/virtual_loop.py``) such a test runs
in milliseconds and the same schedule gives the same run.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from fednode import wire
from fedsim.faults import FaultInjector, FaultPlan
from fedsim.protocol.messages import PeerUnavailable, ProtocolError, unpack

if TYPE_CHECKING:
    from fednode.runtime import Agent


class InprocNetwork:
    """The agents that can reach each other: node id -> running agent; and
    the faults being injected (None: a perfect network)."""

    def __init__(self, faults: FaultPlan | None = None) -> None:
        self.agents: dict[int, Agent] = {}
        self.faults: FaultInjector | None = FaultInjector(faults) if faults is not None else None
        #: nodes whose host has lost its power (``AgentGroup.crash``): what is
        #: sent to or from them is lost, and connections to them stay open
        self.down: set[int] = set()

    def inject(self, plan: FaultPlan) -> FaultInjector:
        """Apply ``plan`` to the envelopes sent from now on (numbered from 0)."""
        self.faults = FaultInjector(plan)
        return self.faults

    def heal(self) -> None:
        """No more faults; envelopes already late still arrive late."""
        self.faults = None


class InprocConn:
    def __init__(self, owner: Agent, peer: int, max_size: int, network: InprocNetwork | None = None) -> None:
        self.owner = owner  # the agent that receives what arrives on this end
        self.peer = peer
        self.other: InprocConn
        self.closed = False
        self.max_size = max_size
        self.network = network

    def send(self, payload: bytes) -> None:
        if self.closed:
            raise ConnectionError("connection closed")
        if len(payload) > self.max_size:
            raise ProtocolError(f"message of {len(payload)} bytes exceeds the {self.max_size}-byte limit")
        other = self.other
        if self.network is not None and self.network.down and {self.peer, other.peer} & self.network.down:
            return  # to or from a host without power: lost, and the sender does not know
        loop = asyncio.get_running_loop()
        if self.network is not None and self.network.faults is not None:
            fate = self.network.faults.fate(other.peer, self.peer, _kind(payload), loop.time())
            if fate is None:
                return  # lost on the wire: the sender does not know
            if fate:
                loop.call_later(fate, _arrive, other, payload)
                return
        loop.call_soon(_arrive, other, payload)

    def close(self) -> None:
        for end in (self, self.other):
            if not end.closed:
                end.closed = True
                asyncio.get_running_loop().call_soon(end.owner.on_lost, end, "closed")


def _arrive(conn: InprocConn, payload: bytes) -> None:
    if not conn.closed:
        conn.owner.on_frame(conn, payload)


def _kind(payload: bytes) -> str:
    """What a fault log calls an envelope: the request's kind, else the envelope's."""
    try:
        env = unpack(payload)
        if env[0] in (wire.REQUEST, wire.ONEWAY):
            return str(env[4][0])
        return "reply" if env[0] in (wire.REPLY, wire.ERROR) else wire.KIND_NAMES[env[0]]
    except Exception:
        return "garbled"


class InprocTransport:
    name = "inproc"

    def __init__(self, network: InprocNetwork, node_id: int, max_size: int = 16 << 20) -> None:
        self.network = network
        self.me = node_id
        self.max_size = max_size
        self.agent: Agent
        self.conns: list[InprocConn] = []
        self.refused = 0

    def describe(self) -> dict[str, Any]:
        return {"transport": self.name, "refused_connections": self.refused}

    async def start(self, agent: Agent) -> None:
        self.agent = agent
        self.network.agents[self.me] = agent

    def pair(self, peer: Agent, peer_id: int) -> InprocConn:
        """A connection from this agent to ``peer`` (who sees us as ``self.me``)."""
        mine = InprocConn(self.agent, peer_id, self.max_size, self.network)
        theirs = InprocConn(peer, self.me, self.max_size, self.network)
        mine.other, theirs.other = theirs, mine
        self.conns.append(mine)
        peer.transport.conns.append(theirs)  # type: ignore[attr-defined]
        return mine

    async def connect(self, node: int) -> InprocConn:
        peer = self.network.agents.get(node)
        if peer is None or not peer.running:
            raise PeerUnavailable(node, "not running")
        return self.pair(peer, node)

    async def stop(self) -> None:
        self.network.agents.pop(self.me, None)
        for c in self.conns:
            if not c.closed:
                c.close()
        self.conns.clear()
