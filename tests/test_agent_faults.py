"""The agent's own code (call timeouts, the sweeper, summary re-push with
backoff, reconnecting to a restarted peer) on a deterministic simulated
network: real ``Agent``s over the in-process transport with injected faults
(``fedsim.faults``), on an event loop whose clock is virtual
(``tests/virtual_loop.py``).  Seconds of protocol time pass in milliseconds,
a bug in the agent's timing shows up here rather than on a testbed, and the
same schedule gives the same run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from fednode.cluster import local_spec
from fednode.config import Cluster
from fednode.runtime import Agent
from fednode.transport.inproc import InprocNetwork, InprocTransport
from fedsim.faults import FaultPlan, Partition
from fedsim.protocol.effects import Call
from fedsim.protocol.messages import PeerUnavailable, Stat
from tests.virtual_loop import VirtualClockLoop, VirtualTimeExceeded, run_virtual

RPC_TIMEOUT_S = 2.0
REFRESH_S = 5.0
EVERYONE = 10**9  # a partition window covering every message


class Federation:
    """``n`` agents on one loop over one (faulty) in-process network."""

    def __init__(self, base: Path, n: int) -> None:
        spec = local_spec(base, n, rpc_timeout_ms=RPC_TIMEOUT_S * 1000, protocol={"summary_refresh_s": REFRESH_S})
        self.cluster = Cluster(spec)
        self.network = InprocNetwork()
        self.agents: dict[int, Agent] = {}
        self.events: list[tuple[float, str]] = []  # (virtual time, what happened): compared across runs

    def agent(self, node: int) -> Agent:
        """A new agent for ``node`` (called on the virtual loop)."""
        a = Agent(
            self.cluster,
            node,
            InprocTransport(self.network, node, self.cluster.spec.max_message_bytes),
            clock=asyncio.get_running_loop().time,  # the protocol's clock is the virtual one too
        )
        self.agents[node] = a
        return a

    async def start(self, nodes: list[int] | None = None) -> None:
        for n in nodes if nodes is not None else self.cluster.spec.members:
            await self.agent(n).start()

    async def stop(self) -> None:
        for a in self.agents.values():
            if a.running:
                await a.stop()

    def converged(self) -> bool:
        return all(a.ready for a in self.agents.values() if a.running)

    async def until_converged(self, what: str) -> float:
        """Wait (in virtual time, on the readiness condition) until every
        running agent holds every member's summary; returns when."""
        loop = asyncio.get_running_loop()
        while not self.converged():
            await asyncio.sleep(0.01)
        self.events.append((round(loop.time(), 6), what))
        return loop.time()


def _stat_root_at(node: int) -> Generator[Any, Any, Any]:
    return (yield Call(node, Stat("/")))


def test_a_call_to_a_peer_that_never_answers_is_peer_unavailable_after_the_rpc_timeout(tmp_path: Path) -> None:
    async def scenario() -> tuple[float, PeerUnavailable]:
        fed = Federation(tmp_path, 3)
        await fed.start()
        await fed.until_converged("started")
        fed.network.inject(FaultPlan.of(partitions=[Partition(frozenset({2}), last=EVERYONE)]))
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        with pytest.raises(PeerUnavailable) as ei:
            await fed.agents[0].drive(_stat_root_at(2), 0, None)
        took = loop.time() - t0
        assert await fed.agents[0].drive(_stat_root_at(1), 0, None) == (True, 0)  # the same side still answers
        await fed.stop()
        return took, ei.value

    took, err = run_virtual(scenario())
    assert err.node == 2 and "no reply within 2 s" in str(err)
    tick = min(0.05, RPC_TIMEOUT_S / 4)  # the sweeper's granularity
    assert RPC_TIMEOUT_S <= took <= RPC_TIMEOUT_S + tick + 1e-6


def _partition_then_heal(base: Path) -> list[tuple[float, str]]:
    """Node 2 starts cut off from the others; its summary pushes and theirs
    time out and are retried with backoff; 30 virtual seconds later the
    partition heals and the retries make every summary known everywhere."""

    async def scenario() -> list[tuple[float, str]]:
        fed = Federation(base, 3)
        injector = fed.network.inject(FaultPlan.of(partitions=[Partition(frozenset({2}), last=EVERYONE)]))
        await fed.start()
        loop = asyncio.get_running_loop()
        await asyncio.sleep(30.0)
        assert not fed.converged(), "the partition must keep node 2's summary out"
        assert fed.agents[0].ready is False and 2 not in fed.agents[0].node.summaries
        fed.events.append((loop.time(), f"partitioned: {len(injector.log)} envelopes cut"))
        fed.network.heal()
        healed = loop.time()
        done = await fed.until_converged("healed")
        # the longest wait: one backoff step at its cap, plus a push timing out
        assert done - healed <= fed.cluster.spec.federation().protocol.summary_retry_max_s + RPC_TIMEOUT_S + 0.1
        await fed.stop()
        return fed.events

    return run_virtual(scenario())


def test_summaries_converge_after_a_partition_heals_and_the_run_is_deterministic(tmp_path: Path) -> None:
    first = _partition_then_heal(tmp_path / "one")
    second = _partition_then_heal(tmp_path / "two")
    assert first == second, (first, second)


def test_a_restarted_peer_is_reconnected_and_learns_every_summary(tmp_path: Path) -> None:
    """Agent 2 stops: calls to it fail at once (its connections are gone, not
    at the timeout); a new agent 2 starts on the same directory: the others
    reconnect on their next call and its fresh push gets every summary back."""

    async def scenario() -> None:
        fed = Federation(tmp_path, 3)
        await fed.start()
        await fed.until_converged("started")
        loop = asyncio.get_running_loop()
        await fed.agents[2].stop()
        t0 = loop.time()
        with pytest.raises(PeerUnavailable) as ei:
            await fed.agents[0].drive(_stat_root_at(2), 0, None)
        assert ei.value.node == 2 and loop.time() - t0 < RPC_TIMEOUT_S
        await fed.start([2])
        await fed.until_converged("restarted")
        assert await fed.agents[0].drive(_stat_root_at(2), 0, None) == (True, 0)
        await fed.stop()

    run_virtual(scenario())


def test_the_virtual_loop_reports_a_wait_that_never_ends() -> None:
    async def forever() -> None:
        while True:
            await asyncio.sleep(1.0)

    loop = VirtualClockLoop(limit=100.0)
    try:
        with pytest.raises(VirtualTimeExceeded):
            loop.run_until_complete(forever())
    finally:
        loop.close()


# ---------------------------------------------------------------------------- a hung peer (issue 12)
def _names(node: Any, prefix: str, want: Any, count: int) -> list[str]:
    """``count`` names ``prefix + str(i)`` whose manager satisfies ``want``."""
    out, i = [], 0
    while len(out) < count:
        p = f"{prefix}{i}"
        if want(node.manager_of(p)):
            out.append(p)
        i += 1
    return out


def test_a_hung_peer_costs_nothing_to_operations_that_do_not_need_it_and_errors_name_it(tmp_path: Path) -> None:
    """Node 3 is hung (every message to or from it lost, as under SIGSTOP:
    no connection closes).  Creates, stats and writes of names neither it nor
    their directory's manager manages take no rpc_timeout; a readdir of a
    directory it holds pays one (dirmerge), the next ones none (the merge
    no longer waits for a peer that just did not answer); and an operation
    that needs it fails naming node 3, also when a live node asked it on the
    requester's behalf (the nested call gives up first)."""
    hung = 3
    for n in (1, hung):  # /s is held by node 3 and node 1
        (tmp_path / f"n{n}" / "s").mkdir(parents=True)
        (tmp_path / f"n{n}" / "s" / f"f{n}").write_bytes(b"x")

    async def scenario() -> None:
        fed = Federation(tmp_path, 4)
        await fed.start()
        await fed.until_converged("started")
        a0 = fed.agents[0]
        node = a0.node
        loop = asyncio.get_running_loop()

        async def op(name: str, *args: Any) -> tuple[float, Any]:
            t0 = loop.time()
            try:
                r = await a0.drive(getattr(node, name)(*args), 0, None)
            except OSError as e:
                r = e
            return loop.time() - t0, r

        d = _names(node, "/d", lambda m: m != hung, 1)[0]
        assert not isinstance((await op("mkdir", d))[1], OSError)
        assert node.manager_of("/s") != hung
        fed.network.inject(FaultPlan.of(partitions=[Partition(frozenset({hung}), last=EVERYONE)]))

        for p in _names(node, d + "/f", lambda m: m != hung, 20):
            for name, args in [("create", (p,)), ("stat", (p,)), ("truncate", (p, 3)), ("stat", (p,))]:
                took, r = await op(name, *args)
                assert not isinstance(r, OSError), (name, p, r)
                assert took < 0.1, (name, p, took)

        # the merge asks node 3 once; a concurrent reader backs off (EAGAIN) meanwhile, then reads too
        (took, r), (_, r2) = await asyncio.gather(op("readdir", "/s"), op("readdir", "/s"))
        assert list(r) == list(r2) == [("f1", False)] and took >= 0.5 * RPC_TIMEOUT_S, (r, r2)
        took, r = await op("readdir", "/s")
        assert list(r) == [("f1", False)] and took < 0.1, took

        p = _names(node, d + "/h", lambda m: m == hung, 1)[0]
        took, r = await op("create", p)  # its manager is the hung node
        assert isinstance(r, PeerUnavailable) and r.node == hung, r
        # a live manager whose parent's manager is the hung node: the error names node 3, not the live one
        e = _names(node, "/e", lambda m: m == hung, 1)[0]
        p = _names(node, e + "/x", lambda m: m not in (hung, 0), 1)[0]
        took, r = await op("create", p)
        assert isinstance(r, PeerUnavailable) and r.node == hung, r
        assert took < RPC_TIMEOUT_S
        await fed.stop()

    run_virtual(scenario())


def test_a_path_under_forty_missing_ancestors_is_enoent_on_agents(tmp_path: Path) -> None:
    deep = "/" + "/".join(f"m{i}" for i in range(40)) + "/leaf"

    async def scenario() -> None:
        fed = Federation(tmp_path, 3)
        await fed.start()
        await fed.until_converged("started")
        for name in ("stat", "create", "mkdir", "readdir"):
            for n in range(3):
                a = fed.agents[n]
                with pytest.raises(FileNotFoundError):
                    await a.drive(getattr(a.node, name)(deep), 0, None)
        await fed.stop()

    run_virtual(scenario())


@pytest.mark.parametrize("late", ["request", "reply"])
def test_a_create_whose_manager_stalls_past_the_timeout_leaves_the_name_free_on_agents(tmp_path: Path, late: str):
    """The manager gets the reservation (or answers it) 5 s late, after the
    requester's 2 s timeout: the create fails naming the manager, and once
    the late message has arrived and the requester's settle got through, the
    name is not dead: stat says ENOENT and a create of it succeeds."""

    async def scenario() -> None:
        fed = Federation(tmp_path, 3)
        await fed.start()
        await fed.until_converged("started")
        a0 = fed.agents[0]
        path = _names(a0.node, "/a", lambda m: m != 0, 1)[0]
        m = a0.node.manager_of(path)
        await a0.drive(a0.node.readdir("/"), 0, None)  # /'s VD cached: the create merges nothing
        # #0: HomeInfo 0 -> m; then m's check at the parent's manager (if remote) and its reply; then the reply
        seq = 0 if late == "request" else (3 if a0.node.manager_of("/") != m else 1)
        inj = fed.network.inject(FaultPlan.of(delay={seq: 5.0}))
        with pytest.raises(PeerUnavailable) as ei:
            await a0.drive(a0.node.create(path), 0, None)
        assert ei.value.node == m, (ei.value, inj.describe())
        await asyncio.sleep(10.0)  # the late message arrives; the settle is retried until it gets through
        fed.network.heal()
        await asyncio.sleep(1.0)
        with pytest.raises(FileNotFoundError):
            await a0.drive(a0.node.stat(path), 0, None)
        assert await a0.drive(a0.node.create(path), 0, None) in range(3), inj.describe()
        assert a0.node.repairs_pending == 0
        await fed.stop()

    run_virtual(scenario())
