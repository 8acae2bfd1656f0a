"""dNFSp's two coherence schemes (issue 25): what each promises about its
messages between meta-servers, and the coherence each gives.  That every
runtime gives the same outcomes, messages and trees is the conformance
suite's (``tests/conformance.py``: the "dnfsp1:" and "dnfsp2:" scenarios)."""

from __future__ import annotations

import errno

import pytest

from fedsim.direct import DirectCluster
from fedsim.protocol.designs import design_class
from fedsim.protocol.dnfsp import Dnfsp1Node, Dnfsp2Node
from fedsim.protocol.dnfsp.messages import DnfspGive, DnfspHandOver, DnfspToken
from fedsim.protocol.messages import ProtocolError
from tests.conformance import FD, SCENARIOS, Scenario, run_sim

META = ("DnfspFetch", "DnfspToken", "DnfspHandOver")


def test_registered():
    assert design_class("dnfsp1") is Dnfsp1Node and design_class("dnfsp2") is Dnfsp2Node


def test_dnfsp1_a_miss_asks_every_other_meta_server_and_a_hit_asks_none():
    # 6 nodes: meta-servers 0, 1, 2; node 3's clients at 0, node 4's at 1
    sc = Scenario("dnfsp1 miss", 6, architecture="dnfsp1",
                  ops=[(4, "mkdir", ("/d",)), (3, "stat", ("/d",)), (3, "stat", ("/d",))])  # fmt: skip
    out = run_sim(sc)
    assert out.results[1] == (True, 0)
    fetched = sorted(dst for src, dst, kind in out.requests(1) if kind == "DnfspFetch")
    assert fetched == [1, 2] and all(src == 0 for src, _, k in out.requests(1) if k == "DnfspFetch")
    assert [k for _, _, k in out.requests(2) if k in META] == []  # copied once: no further synchronisation


def test_dnfsp2_the_token_holder_answers_without_a_message():
    ops = [(4, "mkdir", ("/d",)), (3, "stat", ("/d",)), (3, "stat", ("/d",)), (4, "stat", ("/d",))]
    sc = Scenario("dnfsp2 token", 6, architecture="dnfsp2", ops=ops)
    out = run_sim(sc)
    assert [k for _, _, k in out.requests(1) if k in META]  # meta-server 0 had to get the token
    assert [k for _, _, k in out.requests(2) if k in META] == []  # then holds it: no message at all
    assert [k for _, _, k in out.requests(3) if k in META]  # meta-server 1 takes it back via the hash server


@pytest.mark.parametrize(("design", "size"), [("dnfsp1", 5), ("dnfsp2", 11)])
def test_a_file_grown_at_another_meta_server_dnfsp1_stale_dnfsp2_current(design, size):
    c = DirectCluster(4, design=design)
    c.op(3, "create", "/f")
    fd = c.op(3, "open", "/f")
    c.op(3, "write", fd, 0, b"hello")
    assert c.op(2, "stat", "/f") == (False, 5)
    c.op(3, "write", fd, 5, b" world")
    assert c.op(2, "stat", "/f") == (False, size)  # dNFSp1's weaker coherence: the first copy stays
    fd2 = c.op(2, "open", "/f")
    assert c.op(2, "read", fd2, 0, 100) == b"hello world"  # the data is shared at the daemons either way


def test_token_requests_from_a_non_meta_server_or_to_the_wrong_hash_server_are_refused():
    c = DirectCluster(4, design="dnfsp2")
    with pytest.raises(OSError) as e1:
        c.run(0, c.nodes[0].handle(2, DnfspToken("/x")))  # node 2 is an I/O daemon
    assert e1.value.errno == errno.EINVAL
    wrong = 1 - c.nodes[0].hash_of("/x")
    with pytest.raises(OSError) as e2:
        c.run(wrong, c.nodes[wrong].handle(1 - wrong, DnfspToken("/x")))
    assert e2.value.errno == errno.EINVAL
    with pytest.raises(OSError):
        c.run(0, c.nodes[0].handle(3, DnfspHandOver("/x")))


def test_the_conformance_scenarios_exist():
    assert {sc.name.split(":")[0] for sc in SCENARIOS} >= {"dnfsp1", "dnfsp2"}
    assert FD is not None


@pytest.mark.parametrize("workers", [1, 2])
def test_dnfsp2_many_clients_on_one_directory_end_with_every_file_and_no_deadlock(workers):
    """Two clients at each member create files in one directory at once, in the simulator with
    ``workers`` workers per stage: procedures at every meta-server wait on the directory's lock
    in every worker while its token moves; the transfers (``Request.callback``) still get through,
    so every client ends (the simulation would run out of events first) and every file is there."""
    from fedsim.network import preset
    from fedsim.runtime import SimCluster

    n = 6
    c = SimCluster(n, network=preset("tcp_loopback"), keep_data=True, design="dnfsp2", workers=workers)
    c.preload_summaries()
    c.env.run(until=c.env.process(c.call_op(0, "mkdir", "/d")))

    def client(node: int, k: int):
        for i in range(4):
            yield from c.call_op(node, "create", f"/d/f{node}-{k}-{i}")

    c.env.run(until=c.env.all_of([c.env.process(client(node, k)) for node in range(n) for k in range(2)]))
    names = {f"/d/f{node}-{k}-{i}" for node in range(n) for k in range(2) for i in range(4)}
    for viewer in range(n):
        for name in names:
            assert tuple(c.env.run(until=c.env.process(c.call_op(viewer, "stat", name)))) == (False, 0)
    assert not any(nd.given or nd.awaiting or nd.locks.held for nd in c.nodes)  # every "later" had its DnfspGive
    assert sum(nd.token_requests for nd in c.nodes) > n  # the directory's token did move between meta-servers


def test_dnfsp2_a_holder_that_crashes_after_its_later_does_not_leave_the_waiter_waiting():
    """Meta-server 1 holds /f's token in a long procedure (a 64 KiB write) when meta-server 0 (the
    name's hash server) needs it: 1 answers "later" and crashes before its DnfspGive.  The waiting
    procedure's watchdog (``meta.GIVE_CHECK_S``) finds 1 down and ends the wait with
    PeerUnavailable, which releases /f's lock at 0; before, the wait (and every later procedure on
    /f at 0) never ended: the simulation ran out of events first."""
    from fedsim.network import preset
    from fedsim.protocol.messages import PeerUnavailable
    from fedsim.runtime import SimCluster

    c = SimCluster(4, network=preset("tcp_loopback"), keep_data=True, design="dnfsp2", workers=2)
    c.preload_summaries()
    env, meta0 = c.env, c.nodes[0]
    assert meta0.metas == (0, 1) and meta0.hash_of("/f") == 0

    def quiet(gen):
        try:
            return (yield from gen)
        except OSError as exc:
            return exc

    env.run(until=env.process(c.call_op(3, "create", "/f")))  # node 3's clients at meta-server 1: its token
    fd = env.run(until=env.process(c.call_op(3, "open", "/f")))
    env.process(quiet(c.call_op(3, "write", fd, 0, bytes(1 << 16))))
    while not c.nodes[1].locks.busy("/f"):
        env.step()
    stat = env.process(quiet(c.call_op(2, "stat", "/f")))  # node 2's clients at meta-server 0
    while not meta0.awaiting:  # the "later": 1 is in its write's procedure on /f
        assert c.nodes[1].locks.busy("/f") and not stat.triggered
        env.step()
    c.crash(1)
    assert isinstance(env.run(until=stat), PeerUnavailable)
    assert not meta0.awaiting and not meta0.waits and not meta0.locks.busy("/f")
    again = env.run(until=env.process(quiet(c.call_op(2, "stat", "/f"))))  # ends (1's metadata went with it)
    assert again == (False, 0) or isinstance(again, OSError)


def test_dnfsp2_a_give_nobody_waits_for_is_refused():
    c = DirectCluster(4, design="dnfsp2")
    with pytest.raises(ProtocolError):
        c.run(0, c.nodes[0].handle(1, DnfspGive("/x", True, 0o100644, 0, "")))
    assert c.nodes[0].given == {}


@pytest.mark.parametrize("design", ["dnfsp2", "mnfs"])
def test_concurrent_creates_on_in_process_agents_one_wins_and_all_agree(design, tmp_path):
    """The same races on real agents (one event loop, in-process transport, one worker per stage):
    a client at each member creates the same names and its own names in one directory at once.
    Each shared name is created exactly once, every create of its own name succeeds, and every
    member then sees every name (the agent's Await/Wake and its stage for ``Request.callback``
    requests; the simulator's are ``test_designs_properties``')."""
    import asyncio

    from fednode.cluster import AgentGroup, local_spec
    from fednode.config import Cluster

    n = 6
    spec = local_spec(tmp_path, n, protocol={"architecture": design, "summary_refresh_s": 0.0}, workers=1)
    with AgentGroup(Cluster(spec), transport="inproc") as g:
        g.op(0, "mkdir", "/d")

        async def client(node: int) -> list:
            out = []
            for name in ("/d/x", "/d/y", f"/d/own{node}", "/d/z"):
                try:
                    await g.agents[node].api("create", (name,))
                    out.append(name)
                except FileExistsError:
                    pass
            return out

        async def everyone() -> list:
            return await asyncio.gather(*(client(node) for node in range(n)))

        won = g.lt.run(everyone())
        created = [name for out in won for name in out]
        assert sorted(created) == sorted(["/d/x", "/d/y", "/d/z", *(f"/d/own{k}" for k in range(n))]), won
        for viewer in range(n):
            for name in created:
                assert tuple(g.op(viewer, "stat", name)) == (False, 0), (viewer, name)
