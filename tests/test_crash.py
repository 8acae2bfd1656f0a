"""Crash detection, eviction and restart (issue 13, ``fedfs/failure.py``) in
the in-memory runtime and the simulator, without replication (``replicas:
1``): a crashed node is found out by missed heartbeats and evicted by a view
change; its files are unavailable (a clear error naming it) until it
restarts over its old local tree and rejoins, and then they are back.  A
partitioned node is evicted too and, once the partition heals, learns it is
out and comes back with nothing lost.  Bad input (Suspect/Evict of a
non-member, of oneself, under a stale epoch, of the last member) is a clear
error that changes nothing.  A property: random operations interleaved with
crashes and restarts of one node at a time, under message loss, end with the
namespace of the acknowledged operations."""

from __future__ import annotations

import errno
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedsim.direct import DirectCluster
from fedsim.faults import FaultPlan, Partition
from fedsim.network import preset
from fedsim.protocol.config import ProtocolConfig
from fedsim.protocol.fedfs.failure import Evict, Heartbeat, Suspect, predecessor, successor
from fedsim.protocol.messages import PeerUnavailable, Stat
from fedsim.protocol.names import parent
from fedsim.runtime import SimCluster

HB = 0.5  # heartbeat_s (a binary fraction: the in-memory clock's sums stay exact)
MISSES = 3
DETECT = (MISSES + 2) * HB  # detection takes at most this long in the in-memory runtime


def _cluster(n: int = 4, placement: str = "round_robin", **protocol: Any) -> DirectCluster:
    cfg = ProtocolConfig(heartbeat_s=HB, heartbeat_misses=MISSES, **protocol)
    c = DirectCluster(n, placement=placement, config=cfg)
    for i in range(2 * n):
        c.op(i % n, "mkdir", f"/d{i}")
        c.op((i + 1) % n, "create", f"/d{i}/f")
        fd = c.op((i + 2) % n, "open", f"/d{i}/f")
        c.op((i + 2) % n, "write", fd, 0, f"content {i}".encode())
        c.op((i + 2) % n, "close", fd)
    return c


def _files_on(c: DirectCluster, node: int) -> dict[str, bytes]:
    return {p: v for p, v in c.fs[node].tree().items() if v is not None}


def _views(c: DirectCluster) -> list[tuple[int, tuple[int, ...]]]:
    return [(c.nodes[n].epoch, c.nodes[n].members) for n in c.live if n not in c.down]


def test_successor_and_predecessor_wrap_around_the_sorted_members():
    assert [successor((1, 4, 7), n) for n in (1, 4, 7)] == [4, 7, 1]
    assert [predecessor((1, 4, 7), n) for n in (1, 4, 7)] == [7, 1, 4]
    assert successor((3,), 3) == predecessor((3,), 3) == 3
    assert successor((1, 4, 7), 5) == 7 and predecessor((1, 4, 7), 5) == 4  # (a non-member's neighbours)


def test_without_heartbeats_nothing_runs_and_no_message_is_sent():
    c = DirectCluster(3)
    assert c.timers == 0
    mark = len(c.trace)
    c.advance(100.0)
    assert c.messages_since(mark) == []
    c.crash(1)
    c.advance(100.0)
    assert c.members == (0, 1, 2)  # never detected


def test_heartbeats_go_to_the_successor_once_per_period():
    c = _cluster(4)
    mark = len(c.trace)
    c.advance(4 * HB)
    beats = [(s, d) for s, d, k in c.messages_since(mark) if k == "Heartbeat"]
    assert sorted(set(beats)) == [(0, 1), (1, 2), (2, 3), (3, 0)]
    assert len(beats) == 4 * 4
    assert all(k == "Heartbeat" for _, _, k in c.messages_since(mark))  # nothing else while all are alive


def test_a_crashed_node_is_evicted_its_files_unavailable_then_back_after_restart():
    c = _cluster(4)
    ns = c.namespace()
    on_2 = _files_on(c, 2)
    assert on_2
    c.crash(2)
    some = sorted(on_2)[0]
    with pytest.raises(PeerUnavailable, match="node 2"):  # before detection: the peer is down
        c.op(0, "stat", some)
    mark = len(c.trace)
    c.advance(DETECT)
    kinds = [k for _, _, k in c.messages_since(mark)]
    assert kinds.count("Suspect") == 1 and "ViewChange" in kinds and "HandOff" in kinds
    assert not any(s == 2 for s, _, _ in c.messages_since(mark))  # the crashed node sent nothing
    assert _views(c) == [(1, (0, 1, 3))] * 3
    assert c.nodes[0].evictions == 1 and c.nodes[3].suspicions == 1  # node 3 watches node 2
    # the others' files work, the namespace is theirs; node 2's files: a clear error naming it
    rest = {p: v for p, v in ns.items() if p not in on_2}
    for viewer in (0, 1, 3):
        assert c.walk(viewer) == rest
    with pytest.raises(FileNotFoundError, match="node 2 left the federation in view 1") as ei:
        c.op(1, "stat", some)
    assert ei.value.errno == errno.ENOENT
    c.op(3, "create", "/d0/after")  # the federation goes on
    c.op(0, "mkdir", "/new")
    assert c.restart(2) == 2
    assert _views(c) == [(2, (0, 1, 2, 3))] * 4
    whole = c.namespace()
    assert set(ns) | {"/d0/after", "/new"} == set(whole) and _files_on(c, 2) == on_2
    for viewer in range(4):
        assert c.walk(viewer) == whole
    assert c.nodes[1].describe()["evicted"] is None and "absent" not in c.nodes[1].describe()
    c.advance(10 * HB)  # heartbeats go on, nobody is suspected any more
    assert _views(c) == [(2, (0, 1, 2, 3))] * 4 and c.timers == 4


def test_a_predecessor_never_heard_from_is_suspected_after_the_grace():
    c = _cluster(3)
    c.nodes[2].last_heard.clear()  # as if node 1 had crashed before its first heartbeat
    c.crash(1)
    c.advance(DETECT)
    assert c.members == (0, 2) and c.nodes[2].suspicions == 1


def test_a_restart_before_detection_evicts_the_old_incarnation_itself():
    c = _cluster(3)
    ns = c.namespace()
    c.crash(1)
    mark = len(c.trace)
    assert c.restart(1) == 2  # Evict (view 1 without it), then Join (view 2)
    assert [(s, d, k) for s, d, k in c.messages_since(mark) if k in ("Evict", "Join")] == [
        (1, 0, "Evict"),
        (1, 0, "Join"),
    ]
    assert _views(c) == [(2, (0, 1, 2))] * 3
    for viewer in range(3):
        assert c.walk(viewer) == ns


def test_a_slow_node_that_answers_the_check_is_not_evicted():
    """Its heartbeats are lost (a one-sided cut between it and its
    successor), but it answers the coordinator: suspected, not evicted."""
    c = _cluster(4)
    c.inject(FaultPlan.of(partitions=[Partition(frozenset({2}), other=frozenset({3}))]))
    c.advance(4 * DETECT)
    assert c.nodes[3].suspicions >= 2 and c.nodes[0].evictions == 0
    assert _views(c) == [(0, (0, 1, 2, 3))] * 4


def test_a_partitioned_node_is_evicted_and_after_the_heal_learns_it_and_comes_back_whole():
    c = _cluster(4, **{"vd_max_age_s": 1.0, "summary_refresh_s": 2.0})
    ns = c.namespace()
    on_1 = _files_on(c, 1)
    c.inject(FaultPlan.of(partitions=[Partition(frozenset({1}))]))
    c.advance(2 * DETECT)
    assert [c.nodes[n].members for n in (0, 2, 3)] == [(0, 2, 3)] * 3
    assert c.nodes[1].members == (0, 1, 2, 3) and c.nodes[1].member  # it does not know yet
    during = next(p for p, v in sorted(c.walk(2).items()) if v is None and p != "/") + "/during"
    c.op(2, "create", during)
    c.heal()
    assert c.evicted == []
    c.advance(2 * HB)  # its heartbeat under the old view is answered with the new one
    assert c.evicted == [1] and c.nodes[1].evicted == 1 and not c.nodes[1].member
    assert len(c.nodes[1].dt) == 0  # dropped, not handed off
    with pytest.raises(PeerUnavailable, match="node 1 unavailable: evicted from the federation in view 1") as ei:
        c.run(0, c.nodes[0].call(1, Stat("/")))
    assert ei.value.errno == errno.EHOSTDOWN and ei.value.node == 1
    assert c.restart(1) == 2
    assert c.evicted == [] and _views(c) == [(2, (0, 1, 2, 3))] * 4
    assert _files_on(c, 1) == on_1  # nothing lost
    c.advance(3.0)  # VDs age out, summaries are refreshed
    whole = c.namespace()
    assert set(whole) == set(ns) | {during}
    for viewer in range(4):
        assert c.walk(viewer) == whole


# ---------------------------------------------------------------------------- bad input
def test_suspect_and_evict_bad_input_are_clear_errors_that_change_nothing():
    c = _cluster(3)
    c.crash(2)
    c.advance(DETECT)  # view 1: (0, 1)
    views = _views(c)
    ns = c.walk(0)
    cases = [
        (Suspect(7, 1), errno.ENOENT, "node 7 is not a member"),
        (Suspect(2, 1), errno.ENOENT, "node 2 is not a member"),
        (Suspect(1, 1), errno.EINVAL, "cannot suspect itself"),  # sent by node 1 itself
        (Suspect(0, 1), errno.EINVAL, "answering this very request"),  # at node 0 itself
        (Suspect(0, 0), errno.EINVAL, "answering this very request"),
        (Evict(9, 1), errno.ENOENT, "node 9 is not a member"),
        (Evict(0, 0), errno.ESTALE, "made under view 0, the federation is at view 1"),
    ]
    for req, code, text in cases:
        with pytest.raises(OSError, match=text) as ei:
            c.run(1, c.nodes[1].call(0, req))
        assert ei.value.errno == code, req
    c.crash(1)  # two members cut in two: the survivor reaches one of one, and evicts
    c.advance(DETECT)
    assert c.members == (0,)
    with pytest.raises(OSError, match="node 0 is the last member") as ei:  # from a stray peer
        c.run(0, c.nodes[0].handle(5, Evict(0, 2)))
    assert ei.value.errno == errno.EINVAL
    with pytest.raises(OSError, match="cannot evict itself"):
        c.run(0, c.nodes[0].evict(0))
    assert views == [(1, (0, 1))] * 2 and _views(c) == [(2, (0,))]
    assert {p for p in c.walk(0)} <= set(ns) | set(c.namespace())


def test_a_stale_suspect_is_refused_and_the_suspecter_learns_the_view():
    c = _cluster(4)
    c.crash(3)
    c.advance(DETECT)
    views = _views(c)
    with pytest.raises(OSError, match="made under view 0") as ei:
        c.run(1, c.nodes[1].call(0, Suspect(2, 0)))
    assert ei.value.errno == errno.ESTALE and _views(c) == views == [(1, (0, 1, 2))] * 3


def test_a_heartbeat_from_a_newer_view_makes_the_receiver_fetch_it():
    c = _cluster(4)
    c.down.add(3)  # misses the view change of an eviction it takes no part in
    c.run(0, c.nodes[0].evict(1))  # (0 and 2 are a majority of the other three)
    c.down.discard(3)
    assert c.nodes[3].epoch == 0
    c.run(0, c.nodes[0].call(3, Heartbeat(1)))
    assert c.nodes[3].epoch == 1 and c.nodes[3].members == (0, 2, 3)
    with pytest.raises(OSError, match="node 0 reaches 1 of the 2 other members: a minority evicts nobody"):
        c.down.add(3)  # a minority (0 alone of 0, 2, 3 without 2) evicts nobody
        c.run(0, c.nodes[0].evict(2))
    assert c.nodes[0].members == (0, 2, 3)


# ---------------------------------------------------------------------------- the simulator
def _sim(n: int, **protocol: Any) -> SimCluster:
    cfg = ProtocolConfig(heartbeat_s=HB, heartbeat_misses=MISSES, **protocol)
    c = SimCluster(n, network=preset("tcp_loopback"), keep_data=True, placement="round_robin", protocol=cfg)
    c.preload_summaries()
    for node in c.nodes:
        for timer in node.background():
            c.spawn(node.id, timer)
    return c


def _run_until(c: SimCluster, done: Any, limit_s: float = 60.0) -> None:
    """Run the simulation a heartbeat at a time until ``done()`` (the timers never end)."""
    end = c.env.now + limit_s * 1e6
    while not done():
        assert c.env.now < end, "not settled in time"
        c.env.run(until=c.env.now + HB * 1e6)


def _guarded(c: SimCluster, node: int, name: str, *args: Any) -> Any:
    """An operation as a process whose failure is its value (nobody waits on it)."""

    def run() -> Any:
        try:
            return (yield from c.call_op(node, name, *args))
        except OSError as exc:
            return exc

    return c.env.process(run())


def test_simulated_crash_detection_eviction_and_restart():
    c = _sim(4)
    for i in range(8):
        c.run_op(i % 4, "mkdir", f"/d{i}")
        c.run_op((i + 1) % 4, "create", f"/d{i}/f")
    on_3 = sorted(p for p, v in c.fs[3].tree().items() if v is not None)
    ns = c.namespace()
    pending = [_guarded(c, 0, "stat", p) for p in on_3]  # in flight when it crashes
    c.crash(3)
    sent = c.messages
    _run_until(c, lambda: all(c.nodes[n].members == (0, 1, 2) for n in (0, 1, 2)))
    for p in pending:  # each timed out, naming the crashed node: nothing hangs
        assert p.triggered and isinstance(p.value, PeerUnavailable) and p.value.node == 3
    took = c.env.now
    assert c.nodes[0].evictions == 1 and c.messages > sent
    with pytest.raises(FileNotFoundError, match="node 3 left the federation"):
        c.run_op(1, "stat", on_3[0])
    p = c.restart(3)
    c.env.run(until=p)
    assert p.value == 2 and all(x.members == (0, 1, 2, 3) for x in c.nodes)
    assert c.run_op(0, "stat", on_3[0]) == (False, 0)
    c.env.run(until=c.env.now + 4 * DETECT * 1e6)  # no false suspicion afterwards
    assert all(x.epoch == 2 for x in c.nodes) and c.namespace() == ns and took > 0


def test_simulated_crashed_node_does_no_more_work():
    c = _sim(3)
    c.env.run(until=3 * HB * 1e6)
    c.crash(1)
    served = c.nodes[1].stats.requests_served
    c.env.run(until=c.env.now + 20 * HB * 1e6)
    assert c.nodes[1].stats.requests_served == served  # nothing reached it
    assert c.nodes[1].epoch == 0 and c.nodes[1].suspicions == 0  # its timer stopped: it suspected nobody
    assert c.nodes[0].members == (0, 2)


# ---------------------------------------------------------------------------- properties
NAMES = [f"n{i}" for i in range(6)]
op_steps = st.tuples(
    st.integers(0, 9), st.sampled_from(["mkdir", "create", "create", "write", "unlink"]), st.integers(0, 99)
)
steps = st.lists(
    st.one_of(op_steps, op_steps, op_steps, st.tuples(st.integers(0, 9), st.just("crash"), st.just(0)),
              st.tuples(st.just(0), st.sampled_from(["restart", "wait"]), st.just(0))),
    min_size=8, max_size=30,
)  # fmt: skip
losses = st.sets(st.integers(0, 150), max_size=4)
AGING = {"vd_max_age_s": 1.0, "vd_miss_age_s": 0.5, "summary_refresh_s": 2.0}


def _settle(c: DirectCluster) -> None:
    """Heal, restart every node that is down or evicted, and let the timers
    (heartbeats, summary refresh, VD ageing) run until nothing changes."""
    c.heal()
    for _ in range(6):
        for n in sorted({*c.down, *c.evicted} - c.left):
            c.restart(n)
        c.advance(DETECT + 3.0)
        if not c.down and not c.evicted and len({x.epoch for x in c.nodes}) == 1:
            return
    raise AssertionError(f"not settled: down {c.down}, evicted {c.evicted}, {_views(c)}")


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 4), st.sampled_from(["with_manager", "round_robin"]), steps, losses)
def test_in_memory_crashes_and_restarts_under_loss_keep_every_acknowledged_file(n, placement, steps, lose):
    """Replicas 1: after everything restarts and settles, the namespace is
    what the acknowledged operations made; an operation that failed with
    EHOSTDOWN (a peer down or a message lost) may or may not have happened,
    so its path may hold either outcome.  Names are fresh (never reused), so
    a name made while its namesake's node was down cannot collide."""
    cfg = ProtocolConfig(heartbeat_s=HB, heartbeat_misses=MISSES, summary_bits=256, summary_hashes=2,
                         dt_entries=8, **AGING)  # fmt: skip
    c = DirectCluster(n, placement=placement, config=cfg)
    inj = c.inject(FaultPlan.of(lose=lose))
    ref: dict[str, bytes | None] = {"/": None}
    ambiguous: set[str] = set()
    dirs = ["/"]
    made = 0
    log = []
    for who, what, k in steps:
        if what == "crash":
            if not c.down and not c.evicted:
                c.crash(who % n)
            log.append(("crash", sorted(c.down)))
            continue
        if what in ("restart", "wait"):
            if what == "restart":
                for d in sorted({*c.down, *c.evicted}):
                    try:
                        c.restart(d)
                    except OSError as e:
                        log.append(("restart failed", d, e.errno))
            c.advance(DETECT)
            continue
        live = [x for x in range(n) if x not in c.down]
        at = live[who % len(live)]
        files = sorted(p for p, v in ref.items() if v is not None)
        if what == "mkdir":
            made += 1
            path = f"{dirs[k % len(dirs)].rstrip('/')}/m{made}"
        elif what == "create":
            made += 1
            path = f"{dirs[k % len(dirs)].rstrip('/')}/f{made}"
        elif not files:
            continue
        else:
            path = files[k % len(files)]
        try:
            if what == "write":
                fd = c.op(at, "open", path)
                c.op(at, "write", fd, 0, f"w{k}".encode())
                c.op(at, "close", fd)  # (a failed close after a write that took is ambiguous too)
            else:
                c.op(at, what, path)
        except OSError as e:
            log.append((what, path, at, errno.errorcode.get(e.errno or 0)))
            if e.errno == errno.EHOSTDOWN:
                ambiguous.add(path)
            continue
        log.append((what, path, at, "ok"))
        if what == "mkdir":
            ref[path] = None
            dirs.append(path)
        elif what == "create":
            ref[path] = b""
        elif what == "write":  # at offset 0, over what was there
            data, old = f"w{k}".encode(), ref[path] or b""
            ref[path] = data + old[len(data) :]
        else:
            del ref[path]
    _settle(c)
    why = f"log {log}; {inj.describe()}"
    got = c.namespace()
    for p in ambiguous:
        got.pop(p, None)
        ref.pop(p, None)
    # a parent made only implicitly (by a create under an ambiguous mkdir) is in the trees, not the reference
    for p in list(got):
        if (got[p] is None and p not in ref and any(q.startswith(p + "/") for q in ref)) or p in ambiguous:
            got.pop(p)
    for p in list(got):
        if any(p.startswith(a + "/") for a in ambiguous) and p not in ref:
            got.pop(p)
    for p in list(ref):
        if any(p.startswith(a + "/") for a in ambiguous) and p not in got:
            ref.pop(p)
    assert got == ref, why
    whole = c.namespace()
    for viewer in range(n):
        assert c.walk(viewer) == whole, f"node {viewer}; {why}"
    assert all(parent(p) in whole for p in whole if p != "/")


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000), st.integers(0, 3), st.integers(0, 3000), st.sampled_from(["mod_n", "ring"]))
def test_simulated_operations_in_flight_across_a_crash_and_restart_end_and_lose_nothing(seed, victim, at_us, hashing):
    """Creates and stats race a crash, its detection and the restart: every
    operation ends (a value or an OSError: none hangs), every create
    acknowledged is in the namespace once the node is back (replicas 1: the
    crashed node's own files came back with it), and every member then sees
    the namespace the local trees make."""
    cfg = ProtocolConfig(heartbeat_s=HB, heartbeat_misses=MISSES)
    c = SimCluster(4, network=preset("tcp_loopback"), hashing=hashing, keep_data=True, seed=seed, protocol=cfg,
                   placement="round_robin")  # fmt: skip
    for i in range(8):
        c.populate(i % 4, [], [f"/d{i}"])
    c.preload_summaries()
    for node in c.nodes:
        for timer in node.background():
            c.spawn(node.id, timer)
    ops = [(f"/d{i % 8}/f{i}", _guarded(c, (i * 7 + seed) % 4, "create", f"/d{i % 8}/f{i}")) for i in range(30)]
    if at_us:
        c.env.run(until=c.env.now + at_us)
    c.crash(victim)
    ops += [(f"/d{i % 8}/g{i}", _guarded(c, (victim + 1 + i % 3) % 4, "create", f"/d{i % 8}/g{i}")) for i in range(10)]
    _run_until(c, lambda: all(victim not in c.nodes[n].members for n in range(4) if n != victim))
    p = c.restart(victim)
    _run_until(c, lambda: p.triggered and all(x.members == (0, 1, 2, 3) for x in c.nodes))
    _run_until(c, lambda: all(q.triggered for _, q in ops))  # (a limit turns a hang into a failure)
    ns = c.namespace()
    done = [path for path, q in ops if isinstance(q.value, int)]
    assert all(path in ns for path in done), [path for path in done if path not in ns]
    for m in range(4):
        assert _sim_walk(c, m) == ns


def _sim_walk(c: SimCluster, node: int) -> dict[str, Any]:
    out: dict[str, Any] = {"/": None}
    stack = ["/"]
    while stack:
        d = stack.pop()
        for name, is_dir in c.run_op(node, "readdir", d):
            p = d + name if d == "/" else f"{d}/{name}"
            if is_dir:
                out[p] = None
                stack.append(p)
            else:
                fd = c.run_op(node, "open", p)
                out[p] = c.run_op(node, "read", fd, 0, 100)
                c.run_op(node, "close", fd)
    return out


# ---------------------------------------------------------------------------- a restart meeting the old view
def _fresh(c: DirectCluster, node: int, seed: int) -> Any:
    """What ``restart`` does before ``recover``: a fresh object over the old
    local tree, up, with a view that does not name it (recover not run yet)."""
    from fedsim.protocol.designs import build_node
    from fedsim.protocol.view import View

    spec = c.spec
    c.nodes[node] = build_node(spec, node, view=View(0, (seed,), spec.hashing, spec.vnodes))
    c.down.discard(node)
    return c.nodes[node]


def test_a_restarting_node_does_not_adopt_its_old_incarnations_view_from_a_heartbeat():
    """A heartbeat (or any request) under a newer epoch reaching a restarted
    node before its join made it fetch the old incarnation's view, which
    lists it: it counted itself a member, the eviction of its old incarnation
    then marked it ``evicted``, and that was never cleared: a member that
    refused everything (the availability study's lost files).  It learns only
    views that do not list it until its own join."""
    c = _cluster(4)
    c.crash(3)
    c.advance(DETECT)
    assert c.restart(3) == 2  # the federation is at view 2, listing every node
    ns = c.namespace()
    on_2 = _files_on(c, 2)
    c.crash(2)
    node = _fresh(c, 2, seed=0)
    c.run(1, c.nodes[1].call(2, Heartbeat(2)))  # node 2's predecessor, under view 2 (which lists 2)
    assert not node.member and node.evicted is None
    assert node.epoch == 0  # the old incarnation's view is not its own
    c.run(0, c.nodes[0].evict(2))  # the old incarnation goes (view 3); the ViewChange reaches the new one
    assert not node.member and node.evicted is None
    assert c.run(2, node.recover(0)) == 4
    assert node.member and node.evicted is None
    assert _views(c) == [(4, (0, 1, 2, 3))] * 4
    some = sorted(on_2)[0]
    assert c.op(0, "stat", some) == (False, len(on_2[some]))  # served: it refuses nothing
    for viewer in range(4):
        assert c.walk(viewer) == ns


def test_evicted_is_cleared_when_the_node_joins_again():
    """A node marked ``evicted`` that joins (its own join installs a view
    listing it) serves again: the mark belongs to the view that dropped it."""
    c = _cluster(3)
    node = c.nodes[2]
    c.crash(2)  # cut off, not restarted: the same object comes back
    c.run(0, c.nodes[0].evict(2))
    c.down.discard(2)
    c.run(2, node.fetch_view(0))  # it learns the view that dropped it
    assert not node.member and node.evicted == 1
    c.run(2, node.join(0))
    assert node.member and node.evicted is None
    c.op(0, "mkdir", "/after")
    assert c.run(0, c.nodes[0].call(2, Stat("/"))) is not None  # served, not refused


def test_an_evicted_nodes_refusal_is_recognised_as_a_peer_that_is_down():
    """An evicted node refuses with a PeerUnavailable naming itself, so the
    handlers that deal with a down peer (``summary_add``'s retry, the reads'
    failover, a replica's resync) treat it as one: a plain OSError made
    ``summary_add`` fail instead of retrying at the name's next manager."""
    c = _cluster(4)
    c.down.update({1, 3})
    c.run(0, c.nodes[0].evict(1))  # view 1: (0, 2, 3); nodes 1 and 3 miss it
    c.down.difference_update({1, 3})
    c.run(1, c.nodes[1].fetch_view(0))
    assert c.nodes[1].evicted == 1
    with pytest.raises(PeerUnavailable, match="node 1 unavailable: evicted from the federation in view 1") as ei:
        c.run(0, c.nodes[0].call(1, Stat("/")))
    assert ei.value.node == 1 and ei.value.errno == errno.EHOSTDOWN
    # node 3 still routes by view 0, where node 1 manages this directory
    d = next(f"/x{i}" for i in range(1000) if c.nodes[3].manager_of(f"/x{i}") == 1)
    c.run(3, c.nodes[3].summary_add(d, new_dir=False))  # refused: retried later, not an error
    c.advance(4 * HB)  # node 3 learns view 1 (its heartbeat under view 0 is answered), then retries
    assert c.nodes[3].epoch == 1
    m = c.nodes[0].manager_of(d)
    assert m != 1 and c.nodes[m].summaries[3].may_contain(d)


def test_a_restarting_node_is_down_to_its_peers_until_it_has_joined():
    """Between its restart and its join a node holds no view of its own (the
    members may still list its old incarnation): it answered a routed
    request with a redirect under its placeholder view 0, which the sender
    could not follow (EREMCHG after the redirects: the availability study's
    'other' failures), and served its un-reconciled tree.  It is down to
    its peers (a PeerUnavailable naming it) but for the view's requests."""
    from fedsim.protocol.messages import HomeInfo

    c = _cluster(4)
    c.crash(3)
    c.advance(DETECT)
    assert c.restart(3) == 2
    c.crash(2)
    node = _fresh(c, 2, seed=0)
    name = next(f"/d{i}" for i in range(8) if c.nodes[0].manager_of(f"/d{i}") == 2)
    for req in (HomeInfo(name, epoch=2), Stat("/")):
        with pytest.raises(PeerUnavailable, match="node 2 unavailable: not a member") as ei:
            c.run(0, c.nodes[0].call(2, req))
        assert ei.value.node == 2, req
    assert c.run(0, c.nodes[0].call(2, Heartbeat(2))) is None  # the view's requests it serves
    assert c.run(2, node.recover(0)) == 4
    assert c.run(0, c.nodes[0].call(2, HomeInfo(name, epoch=4)))[0] is True  # a member: served
