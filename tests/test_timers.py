"""The timer effect and the periodic protocol work it drives (summary re-push
with backoff, refresh, VD ageing), in the in-memory runtime where time moves
only when the test says so, and in the simulator."""

from __future__ import annotations

import itertools

from fedsim.direct import DirectCluster
from fedsim.memfs import MemFS
from fedsim.network import preset
from fedsim.protocol.config import ProtocolConfig
from fedsim.protocol.designs import build_node
from fedsim.protocol.effects import NOW, Sleep, Spawn
from fedsim.runtime import SimCluster


def test_a_member_down_at_start_gets_the_summary_when_it_comes_back():
    fss = [MemFS() for _ in range(3)]
    fss[0].mkdir("/only-on-0")
    c = DirectCluster(3, local=fss, config=ProtocolConfig())
    # everyone is up in the constructor; take node 2 down and restart node 0
    c.down.add(2)
    c.nodes[0] = build_node(c.spec, 0)
    c.run(0, c.nodes[0].start())
    assert c.nodes[0].summary_unacked == {2}
    assert c.timers == 1  # the re-push is parked on its backoff timer
    c.down.discard(2)
    c.advance(0.049)
    assert c.nodes[0].summary_unacked == {2}  # not yet: the first retry is at summary_retry_s
    c.advance(0.002)
    assert c.nodes[0].summary_unacked == set()
    assert c.nodes[2].summaries[0].may_contain("/only-on-0")
    assert c.timers == 0  # nothing left to do without a refresh period


def test_backoff_doubles_up_to_its_cap():
    # binary fractions, so the clock's sums are exact
    c = DirectCluster(2, config=ProtocolConfig(summary_retry_s=0.125, summary_retry_max_s=0.5))
    c.down.add(1)
    c.nodes[0] = build_node(c.spec, 0)
    c.run(0, c.nodes[0].start())
    pushes = []
    t = 0.0
    for _ in range(120):
        mark = len(c.trace)
        c.advance(1 / 64)
        t += 1 / 64
        if any(kind == "SummaryPush" for _, _, kind in c.messages_since(mark)):
            pushes.append(t)
    gaps = [b - a for a, b in itertools.pairwise(pushes)]
    assert pushes[0] == 0.125 and gaps == [0.25, 0.5, 0.5, 0.5], pushes


def test_a_restarted_node_learns_every_summary_in_one_round():
    fss = [MemFS() for _ in range(4)]
    for i, fs in enumerate(fss):
        fs.mkdir(f"/d{i}")
    c = DirectCluster(4, local=fss)
    c.nodes[3] = build_node(c.spec, 3)  # lost all soft state
    assert not c.nodes[3].ready
    mark = len(c.trace)
    c.run(3, c.nodes[3].start())
    assert c.nodes[3].ready
    assert all(c.nodes[3].summaries[i].may_contain(f"/d{i}") for i in range(4))
    assert [k for _, _, k in c.messages_since(mark)] == ["SummaryPush"] * 3  # the replies carried them


def test_refresh_catches_directories_made_outside_and_ages_vds():
    fss = [MemFS() for _ in range(2)]
    fss[1].mkdir("/a")
    cfg = ProtocolConfig(summary_refresh_s=5.0, vd_max_age_s=3.0)
    c = DirectCluster(2, local=fss, config=cfg)
    c.op(0, "readdir", "/a")
    manager = c.nodes[c.nodes[0].manager_of("/a")]
    assert manager.vds.peek("/a") is not None
    fss[1].mkdir("/made-outside")
    assert not c.nodes[0].summaries[1].may_contain("/made-outside")
    c.advance(5.0)
    assert c.nodes[0].summaries[1].may_contain("/made-outside")  # re-summarised and pushed
    assert manager.vds.peek("/a") is None  # older than vd_max_age_s: evicted by the refresh


def test_sleep_is_simulated_time_in_the_simulator():
    c = SimCluster(1, network=preset("tcp_loopback"))
    seen = []

    def sleeper():
        t0 = yield NOW
        yield Sleep(2.5)
        seen.append((yield NOW) - t0)

    def starter():
        yield Spawn(sleeper())

    c.env.run(until=c.spawn(0, starter()))
    c.env.run()
    assert seen == [2.5]
