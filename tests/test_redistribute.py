"""``rename: redistribute`` (issue 24, Ursa Minor 4.2.2): the delegation
overlay (``fedfs/delegation.py``), its bound, its hold, and how it settles
with view changes, in the in-memory runtime (the conformance scenario, the
simulator's linearisability races and the dynamics property cover the rest)."""

from __future__ import annotations

import errno

import pytest

from fedsim.direct import DirectCluster
from fedsim.protocol.config import ProtocolConfig
from fedsim.protocol.messages import Redirected, decode_error, encode_error


def _cluster(n: int = 5, **protocol) -> tuple[DirectCluster, str, str]:
    """A federation with files /s/f0../s/f3 and a directory /t whose manager differs from /s's."""
    c = DirectCluster(n, config=ProtocolConfig(rename="redistribute", **protocol))
    c.op(0, "mkdir", "/s")
    pm_s = c.nodes[0].manager_of("/s")
    t = next(p for i in range(100) if c.nodes[0].manager_of(p := f"/t{i}") != pm_s)
    c.op(1, "mkdir", t)
    for k in range(4):
        c.op(k % n, "create", f"/s/f{k}")
    return c, "/s", t


def _total(c: DirectCluster, name: str) -> float:
    return sum(node.counters()[name] for node in c.nodes)


def _one_manager(c: DirectCluster, *dirs: str) -> None:
    """Exactly one member serves each of ``dirs`` as its manager (a requester's hint may be
    stale: the node it names redirects it)."""
    for d in dirs:
        managers = [node.id for node in c.nodes if node.id in c.members and node.manager_of(d) == node.id]
        assert len(managers) == 1, (d, managers)


def test_a_redirect_naming_the_manager_crosses_the_wire():
    exc = decode_error(encode_error(Redirected(3, "/s", "node 1 does not manage this name; node 3 does")))
    assert isinstance(exc, Redirected) and (exc.errno, exc.node, exc.filename) == (errno.EREMCHG, 3, "/s")
    assert type(decode_error(encode_error(OSError(errno.EREMCHG, "fetch the view", "/s")))) is OSError


def test_a_rename_across_directories_borrows_the_source_table_and_gives_it_back():
    c, s, t = _cluster()
    lender, coordinator = c.nodes[0].manager_of(s), c.nodes[0].manager_of(t)
    mark = len(c.trace)
    c.op(2, "rename", f"{s}/f0", f"{t}/g")
    kinds = [k for _, _, k in c.messages_since(mark)]
    assert kinds.index("Lend") < kinds.index("RenamePrepare") < kinds.index("GiveBack")
    assert (coordinator, lender, "Lend") in c.messages_since(mark)
    assert _total(c, "redistributions") == 1 and _total(c, "hold_hits") == 0
    assert not any(node.lent or node.borrowed for node in c.nodes)
    assert [n for n, _ in c.op(3, "readdir", s)] == ["f1", "f2", "f3"]
    assert [n for n, _ in c.op(4, "readdir", t)] == ["g"]
    _one_manager(c, s, t)


def test_a_held_table_serves_a_burst_of_renames_and_goes_back_after_the_hold():
    c, s, t = _cluster(redistribute_hold=1.0)
    for k in range(3):
        c.op(k, "rename", f"{s}/f{k}", f"{t}/g{k}")
    assert (_total(c, "redistributions"), _total(c, "hold_hits")) == (1, 2)
    coordinator = c.nodes[0].manager_of(t)
    assert list(c.nodes[coordinator].borrowed) == [s]
    assert c.nodes[c.nodes[0].view.manager_of(s)].lent == {s: coordinator}
    # Meanwhile the borrower manages /s: a create in it, from a node that asks the lender, is
    # redirected (and the redirect cached), and every listing agrees.
    asker = next(n for n in range(5) if n not in (coordinator, c.nodes[0].view.manager_of(s)))
    c.op(asker, "create", f"{s}/new")
    assert [n for n, _ in c.op(asker, "readdir", s)] == ["f3", "new"]
    c.advance(2.0)
    assert not any(node.lent or node.borrowed for node in c.nodes)
    # A stale hint recovers: asked, the former borrower names the lender, and the hint goes.
    assert [n for n, _ in c.op(asker, "readdir", s)] == ["f3", "new"]
    assert s not in c.nodes[asker].hints
    _one_manager(c, s, t)


@pytest.mark.parametrize("limit", [1, 2])
def test_the_bound_refuses_one_more_borrowed_table_and_a_hold_hit_needs_no_slot(limit):
    c, s, t = _cluster(redistribute_limit=limit, redistribute_hold=5.0)
    coordinator = c.nodes[0].manager_of(t)
    others = [p for i in range(200) if c.nodes[0].view.manager_of(p := f"/u{i}") != coordinator][:limit]
    for p in others:
        c.op(0, "mkdir", p)
    node = c.nodes[coordinator]
    for p in [s, *others[:-1]]:
        c.run(coordinator, node.borrow(p))
    with pytest.raises(BlockingIOError):
        c.run(coordinator, node.borrow(others[-1]))
    c.run(coordinator, node.borrow(s))  # a hold hit
    assert (node.stats.redistributions, node.stats.hold_hits) == (limit, 1)
    for p in [s, s, *others[:-1]]:
        c.run(coordinator, node.release(p))
    c.advance(6.0)
    assert not node.borrowed and not any(n.lent for n in c.nodes)
    c.run(coordinator, node.borrow(others[-1]))  # the slot is free again
    assert list(node.borrowed) == [others[-1]]


def test_a_view_change_voids_every_delegation_and_leaves_one_manager_per_name():
    c, s, t = _cluster(redistribute_hold=10.0)
    c.op(0, "rename", f"{s}/f0", f"{t}/g")
    assert any(node.borrowed for node in c.nodes)
    c.join()
    assert not any(node.lent or node.borrowed or len(node.hints) for node in c.nodes)
    _one_manager(c, s, t)
    c.op(5, "rename", f"{s}/f1", f"{t}/h")  # and renames go on under the new view
    assert sorted(n for n, _ in c.op(2, "readdir", t)) == ["g", "h"]
    assert sorted(n for n, _ in c.op(3, "readdir", s)) == ["f2", "f3"]
    c.advance(11.0)
    assert not any(node.lent or node.borrowed for node in c.nodes)


def test_a_crashed_borrower_is_evicted_and_its_lender_manages_the_table_again():
    c, s, t = _cluster(redistribute_hold=10.0, heartbeat_s=0.5)
    coordinator = c.nodes[0].manager_of(t)
    lender = c.nodes[0].view.manager_of(s)
    c.op(0, "rename", f"{s}/f0", f"{t}/g")
    assert c.nodes[lender].lent == {s: coordinator}
    c.crash(coordinator)
    for _ in range(40):
        c.advance(0.5)
        if coordinator not in c.nodes[lender].members:
            break
    assert coordinator not in c.nodes[lender].members
    assert not c.nodes[lender].lent
    live = next(n for n in c.members if n != lender)
    assert sorted(n for n, _ in c.op(live, "readdir", s)) == ["f1", "f2", "f3"]


def test_errors_leave_no_trace_and_no_table_borrowed():
    c, s, t = _cluster()
    c.op(0, "mkdir", f"{t}/sub")
    before = c.namespace()
    for old, new, code in [
        (f"{s}/none", f"{t}/x", errno.ENOENT),
        (f"{s}/f0", f"{t}/sub", errno.EISDIR),
        (f"{s}/f0", "/nowhere/x", errno.ENOENT),
        (f"{s}/f0", f"{s}/f1/x", errno.ENOTDIR),
        (t, f"{t}/sub/y", errno.EINVAL),
    ]:
        with pytest.raises(OSError) as e:
            c.op(1, "rename", old, new)
        assert e.value.errno == code, (old, new)
    fd = c.op(2, "open", f"{s}/f1")
    with pytest.raises(OSError) as e:
        c.op(3, "rename", f"{s}/f1", f"{t}/y")
    assert e.value.errno == errno.EBUSY
    c.op(2, "close", fd)
    assert c.namespace() == before
    assert not any(node.lent or node.borrowed or node.gates or node.rename_marks for node in c.nodes)
