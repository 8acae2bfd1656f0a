"""The simulator-throughput benchmark's machinery, at a tiny size (no timing assertions)."""

from __future__ import annotations

from fedsim.bench import OP_MIX, BareModel, Size, compare, format_machine, format_table, run_bare
from fedsim.network import preset

TINY = Size(8, groups=2, dirs_per_group=3, files=40, clients=6, ops=60, warmup_ops=20, workers=2)


def test_compare_runs_both_models_and_counts_messages() -> None:
    row = compare(TINY, preset("via_clan"), seed=3)
    fw, on, bare = row.off, row.on, row.bare

    # The framework ran real protocol operations and they reached other nodes.
    assert fw.model == "framework" and fw.nodes == TINY.nodes
    assert fw.ops >= TINY.ops  # every session is at least one API call
    assert fw.failed_ops == 0
    assert fw.messages > 0 and fw.bytes > 0 and fw.events > 0
    assert fw.sim_us > 0 and fw.wall_s > 0

    # The bare model carried about as many messages, request + reply per pair.
    assert bare.model == "bare" and bare.nodes == TINY.nodes
    assert bare.messages == 2 * bare.ops == 2 * (fw.messages // 2)
    assert bare.events > 0 and bare.sim_us > 0

    # The machine model ran the same workload: every session, on machine time
    # (CPU for each message end and call makes it slower in simulated time),
    # with about as many federation messages and several more events per message.
    assert on.model == "machine" and on.nodes == TINY.nodes
    assert on.ops == fw.ops and on.failed_ops == 0
    assert on.messages > 0 and on.sim_us > fw.sim_us
    assert on.events_per_msg > fw.events_per_msg
    assert row.on_off == on.msgs_per_s / fw.msgs_per_s and row.ratio == fw.msgs_per_s / bare.msgs_per_s

    table = format_table([row])
    assert "framework" in table and "machine" in table and "bare" in table and "ratio" in table
    assert "on/off" in format_machine([row])
    assert {k for k, _ in OP_MIX} == {"stat", "read", "write", "open", "create"}


def test_bare_model_round_trip_takes_two_one_way_delays_plus_service() -> None:
    net = preset("via_clan")
    m = BareModel(2, net, workers=1, request_bytes=100, reply_bytes=100, service_us=10.0)
    m.run([1], clients=1)
    assert m.messages == 2 and m.pairs == 1
    assert abs(m.env.now - (2 * net.one_way(100) + 10.0)) < 1e-9
    r = run_bare(4, pairs=10, clients=3, network=net, workers=1)
    assert r.messages == 20 and r.ops == 10
