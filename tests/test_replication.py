"""Replication (issue 13, FedFS 3.2): with ``replicas: 2`` every regular file
has a second copy at ``successor(home)``, in the reserved replica space of
that node's local tree; a home that does not answer is read from the copy; a
graceful leave promotes the leaver's copies, so nothing is lost; a join
moves secondaries; a secondary that missed a change gets the file whole.
With ``replicas: 1`` nothing of it exists (no message, no copy)."""

from __future__ import annotations

import errno
import tempfile
from pathlib import Path
from typing import Any

import pytest
import simpy
from hypothesis import event, given, settings
from hypothesis import strategies as st

from fednode.cli import format_status
from fedsim.direct import DirectCluster
from fedsim.faults import FaultPlan, Partition
from fedsim.memfs import MemFS
from fedsim.network import preset
from fedsim.protocol.attrs import KEEP, UTIME_OMIT
from fedsim.protocol.config import ProtocolConfig
from fedsim.protocol.designs import build_node
from fedsim.protocol.fedfs.replication import SYNC_MARK
from fedsim.protocol.messages import PeerUnavailable
from fedsim.protocol.names import REPLICA_ROOT, is_replica
from fedsim.runtime import SimCluster

TWO = ProtocolConfig(replicas=2)


def successor(node: int, members: tuple[int, ...] | list[int]) -> int:
    members = sorted(members)
    return next((m for m in members if m > node), members[0])


def files_of(fs: MemFS) -> dict[str, bytes]:
    """A node's own files (its namespace part)."""
    return {p: v for p, v in fs.tree().items() if v is not None and not is_replica(p)}


def copies_at(fs: MemFS) -> dict[str, bytes]:
    """The copies a node holds as a secondary, by federated path (not the sync mark)."""
    return {
        p[len(REPLICA_ROOT) :]: v for p, v in fs.tree().items() if v is not None and is_replica(p) and p != SYNC_MARK
    }


def assert_replicated(fss: list[MemFS], members: tuple[int, ...] | list[int]) -> None:
    """Every member's files are exactly the copies its successor holds."""
    for h in members:
        s = successor(h, members)
        assert copies_at(fss[s]) == files_of(fss[h]), f"node {s}'s copies of node {h}'s files"


def files(tree: dict[str, Any]) -> dict[str, bytes]:
    return {p: v for p, v in tree.items() if v is not None}


def read_all(c: DirectCluster, node: int, path: str) -> bytes:
    fd = c.op(node, "open", path)
    try:
        return c.op(node, "read", fd, 0, c.op(node, "stat", path)[1])
    finally:
        c.op(node, "close", fd)


def populate(c: DirectCluster | SimCluster, n: int, count: int = 8, data: bytes = b"content %d") -> dict[str, bytes]:
    """``count`` files /d/f<i>, made and written at node i % n (in memory or
    simulated); returns their contents."""
    op = c.run_op if isinstance(c, SimCluster) else c.op
    op(0, "mkdir", "/d")
    ref = {}
    for i in range(count):
        p = f"/d/f{i}"
        op(i % n, "create", p)
        fd = op(i % n, "open", p)
        op(i % n, "write", fd, 0, data % i)
        op(i % n, "close", fd)
        ref[p] = data % i
    return ref


# ---------------------------------------------------------------------------- one copy: nothing changes
def test_with_one_copy_there_is_no_replica_message_and_no_replica_space():
    c = DirectCluster(3)
    populate(c, 3)
    c.op(1, "truncate", "/d/f1", 2)
    c.op(2, "rename", "/d/f2", "/d/g")
    c.op(0, "unlink", "/d/f0")
    assert not [k for _, _, k in c.trace if k.startswith("Replica")]
    assert not any(is_replica(p) for fs in c.fs for p in fs.tree())
    assert c.nodes[0].describe()["replicas"] == 1
    down = next(n for n in range(3) if files_of(c.fs[n]))
    c.down.add(down)
    with pytest.raises(ConnectionError):  # no failover either
        read_all(c, (down + 1) % 3, next(iter(files_of(c.fs[down]))))


# ---------------------------------------------------------------------------- every change reaches the copy
def _changes(op: Any) -> None:
    """create, write, truncate, rename (onto a file on another home too), setattr, unlink."""
    op(0, "mkdir", "/d")
    for i in range(6):
        op(i % 4, "create", f"/d/f{i}")
        fd = op(i % 4, "open", f"/d/f{i}")
        op(i % 4, "write", fd, 0, b"0123456789-%d" % i)
        op(i % 4, "write", fd, 4, b"AB")
        op(i % 4, "close", fd)
    op(1, "truncate", "/d/f1", 3)
    op(2, "truncate", "/d/f2", 20)
    op(3, "rename", "/d/f3", "/d/g3")
    op(0, "rename", "/d/f4", "/d/f5")  # replaces f5, homed elsewhere
    op(2, "setattr", "/d/f0", 0o600, KEEP, KEEP, UTIME_OMIT, UTIME_OMIT)
    op(1, "unlink", "/d/f2")


def test_every_change_of_a_file_reaches_its_secondary_in_memory():
    c = DirectCluster(4, config=TWO)
    _changes(c.op)
    assert_replicated(c.fs, c.members)
    assert set(files(c.namespace())) == {"/d/f0", "/d/f1", "/d/g3", "/d/f5"}
    assert c.namespace()["/d/f5"] == b"0123AB6789-4"
    # the mode went along
    home = c.nodes[0].dt.peek("/d/f0").home
    s = successor(home, c.members)
    assert c.fs[s].getattr(REPLICA_ROOT + "/d/f0")[1] & 0o777 == 0o600
    # the copies are not the namespace: readdir, summaries and the tree helpers leave them out
    assert [n for n, _ in c.op(1, "readdir", "/")] == ["d"]
    assert not any(is_replica(p) for p in c.walk(2))
    for n in c.members:  # a node summarises its namespace directories only
        c.run(n, c.nodes[n].regenerate_summary(push=False))
        mine = c.nodes[n].summaries[n]
        assert mine.may_contain("/d") == ("/d" in c.fs[n].tree())
        assert not mine.may_contain(REPLICA_ROOT) and not mine.may_contain(REPLICA_ROOT + "/d")
    assert c.nodes[0].describe()["replica_files"] == len(copies_at(c.fs[0]))


def test_every_change_of_a_file_reaches_its_secondary_in_the_simulator():
    c = SimCluster(4, network=preset("tcp_loopback"), keep_data=True, protocol=TWO)
    c.preload_summaries()
    _changes(lambda n, name, *args: c.run_op(n, name, *args))
    c.env.run()
    assert_replicated(c.fs, c.live)
    assert c.namespace()["/d/f5"] == b"0123AB6789-4"


def test_clients_cannot_name_the_replica_space():
    c = DirectCluster(3, config=TWO)
    populate(c, 3)
    for op, args in [
        ("stat", (REPLICA_ROOT,)),
        ("stat", (REPLICA_ROOT + "/d/f1",)),
        ("open", (REPLICA_ROOT + "/d/f1",)),
        ("create", (REPLICA_ROOT + "/x",)),
        ("mkdir", (REPLICA_ROOT,)),
        ("readdir", (REPLICA_ROOT + "/",)),
        ("unlink", (REPLICA_ROOT + "//d/f1",)),
    ]:
        mark = len(c.trace)
        with pytest.raises(OSError) as info:
            c.op(1, op, *args)
        assert info.value.errno == errno.EPERM and "reserved" in str(info.value)
        assert c.messages_since(mark) == []  # refused before any message
    assert [n for n, _ in c.op(0, "readdir", "/")] == ["d"]


# ---------------------------------------------------------------------------- a home that does not answer
@pytest.mark.parametrize("n", [2, 3, 5])
def test_every_file_of_a_node_that_is_down_is_read_from_its_secondary(n):
    c = DirectCluster(n, config=TWO)
    ref = populate(c, n, 3 * n)
    c.op(1, "truncate", "/d/f1", 4)
    ref["/d/f1"] = ref["/d/f1"][:4]
    down = n - 1
    c.down.add(down)
    mine = [p for p in ref if p in files_of(c.fs[down])]
    assert mine
    for r in range(n - 1):
        for p in ref:
            assert read_all(c, r, p) == ref[p], (r, p)
            assert c.op(r, "getattr", p)[5] == len(ref[p])
    # a change of a file whose home is down fails (until the view changes)
    with pytest.raises(ConnectionError):
        c.op(0, "truncate", mine[0], 0)
    with pytest.raises(ConnectionError):
        c.op(0, "unlink", mine[0])
    assert read_all(c, 0, mine[0]) == ref[mine[0]]  # nothing changed


def test_a_simulated_node_that_fails_is_read_from_its_secondary():
    c = SimCluster(4, network=preset("tcp_loopback"), keep_data=True, protocol=TWO)
    c.preload_summaries()
    ref = populate(c, 4, 8, b"data %d")
    c.fail(2)
    for r in (0, 1, 3):
        for p, data in ref.items():
            fd = c.run_op(r, "open", p)
            assert c.run_op(r, "read", fd, 0, 100) == data
            c.run_op(r, "close", fd)
    c.env.run()


# ---------------------------------------------------------------------------- view changes
@pytest.mark.parametrize("leaver", [0, 2, 3])
def test_a_graceful_leave_with_two_copies_loses_no_file(leaver):
    c = DirectCluster(4, config=TWO)
    ref = populate(c, 4, 12)
    before = c.namespace()
    c.leave(leaver)
    assert c.namespace() == before  # the leaver's files were promoted at its successor
    assert files(c.walk(min(c.live))) == ref
    assert_replicated(c.fs, c.live)
    assert sum(c.nodes[n].promoted for n in c.live) == len(files_of(c.fs[leaver]))
    # the promoted files are ordinary files of their new home: writable, removable, re-replicated
    p = next(iter(files_of(c.fs[leaver])))
    r = c.live[0]
    fd = c.op(r, "open", p)
    c.op(r, "write", fd, 0, b"after")
    c.op(r, "close", fd)
    assert_replicated(c.fs, c.live)
    c.op(r, "unlink", p)
    assert_replicated(c.fs, c.live)


def test_extended_attributes_are_not_replicated_so_a_promoted_file_has_none():
    """The documented limit (``fedsim.protocol.fedfs.extattrs``): a secondary copy
    carries the data, mode and times, not the extended attributes.  A file set
    with one keeps it while its home serves it, and is promoted without it when
    its home leaves; it can be set again on the promoted file."""
    c = DirectCluster(4, config=TWO)
    populate(c, 4, 4)
    c.op(1, "setxattr", "/d/f2", "user.k", b"v", 0)
    assert c.op(3, "getxattr", "/d/f2", "user.k") == b"v"
    assert not [k for _, _, k in c.trace if "Xattr" in k and k.startswith("Replica")]
    home = next(n for n in c.members if "/d/f2" in files_of(c.fs[n]))
    c.leave(home)
    assert read_all(c, c.live[0], "/d/f2") == b"content 2"  # promoted, data whole
    with pytest.raises(OSError) as e:
        c.op(c.live[0], "getxattr", "/d/f2", "user.k")
    assert e.value.errno == errno.ENODATA
    c.op(c.live[0], "setxattr", "/d/f2", "user.k", b"again", 0)
    assert c.op(c.live[-1], "listxattr", "/d/f2") == ["user.k"]


def test_leaves_down_to_one_member_keep_every_file():
    c = DirectCluster(3, config=TWO)
    ref = populate(c, 3, 9)
    c.leave(1)
    c.leave(0)
    assert files(c.namespace()) == ref
    assert files(c.walk(2)) == ref
    assert copies_at(c.fs[2]) == {}


def test_a_join_moves_secondaries():
    c = DirectCluster(3, config=TWO)
    ref = populate(c, 3, 9)
    assert_replicated(c.fs, c.members)
    new = c.join(0, local=MemFS())
    assert new == 3
    assert_replicated(c.fs, c.members)  # node 2's copies moved from node 0 to node 3, node 0 dropped them
    assert copies_at(c.fs[0]) == files_of(c.fs[3]) == {}
    assert copies_at(c.fs[3]) == files_of(c.fs[2])
    c.op(3, "create", "/d/new")
    assert_replicated(c.fs, c.members)
    assert files(c.walk(1)) == {**ref, "/d/new": b""}


def test_a_secondary_that_missed_a_write_gets_the_file_whole_when_it_answers_again():
    c = DirectCluster(3, config=TWO)
    populate(c, 3)
    home = 1
    s = successor(home, c.members)
    p = next(iter(files_of(c.fs[home])))
    c.down.add(s)
    fd = c.op(home, "open", p)
    with pytest.raises(PeerUnavailable) as exc:  # not acknowledged with one copy (issue 13)
        c.op(home, "write", fd, 0, b"while down")
    assert exc.value.node == s  # the error names the secondary, the node that failed
    c.op(home, "close", fd)
    assert files_of(c.fs[home])[p].startswith(b"while down")  # applied: ambiguous, as after a timeout
    assert c.nodes[home].unsynced == {p}
    assert copies_at(c.fs[s])[p] != files_of(c.fs[home])[p]
    c.down.discard(s)
    c.advance(1.0)  # the background repair copies it whole
    assert c.nodes[home].unsynced == set()
    assert_replicated(c.fs, c.members)


def test_a_secondary_that_missed_a_write_gets_the_file_whole_at_the_next_view_change():
    c = DirectCluster(3, config=TWO)
    populate(c, 3)
    home, s = 2, 0
    p = next(iter(files_of(c.fs[home])))
    c.down.add(s)
    with pytest.raises(PeerUnavailable):
        c.op(home, "truncate", p, 1)  # applied here, not acknowledged: the secondary did not take it
    c.down.discard(s)
    assert c.nodes[home].unsynced
    c.join(1, local=MemFS())  # node 2's successor becomes node 3: everything copied there
    assert_replicated(c.fs, c.members)
    assert c.nodes[home].unsynced == set()


def test_a_change_is_acknowledged_only_once_both_copies_hold_it():
    """Issue 13: "a write is acknowledged after both hold it".  With the
    secondary crashed, a write fails (PeerUnavailable naming the secondary:
    the primary alone holds it); once the view without the secondary is
    installed, the same write is acknowledged and the new successor holds
    the file whole: no acknowledged change rests on one copy."""
    c = DirectCluster(4, config=TWO)
    populate(c, 4, 12)
    home = next(n for n in range(4) if files_of(c.fs[n]))
    s = successor(home, c.members)
    p = next(iter(files_of(c.fs[home])))
    c.crash(s)
    for op, args in (("truncate", (p, 0)), ("setattr", (p, 0o600, KEEP, KEEP, UTIME_OMIT, UTIME_OMIT))):
        with pytest.raises(PeerUnavailable) as exc:
            c.op(home, op, *args)
        assert exc.value.node == s
    assert c.nodes[home].unsynced_failures == 2
    other = next(n for n in c.members if n not in (home, s))
    c.run(other, c.nodes[other].call(other, _leave_request(c, s)))  # evicted
    assert s not in c.nodes[home].members
    fd = c.op(home, "open", p)
    assert c.op(home, "write", fd, 0, b"two copies") == 10  # acknowledged: the new successor has it
    c.op(home, "close", fd)
    s2 = successor(home, c.nodes[home].members)
    assert s2 != s and copies_at(c.fs[s2])[p] == b"two copies"
    assert c.nodes[home].unsynced == set()


def test_a_restarted_node_reconciles_stale_files_and_drops_its_replica_space():
    c = DirectCluster(4, config=TWO)
    ref = populate(c, 4, 12)
    victim = next(n for n in range(4) if files_of(c.fs[n]) and copies_at(c.fs[n]))
    old_fs = c.fs[victim]
    stale = files_of(old_fs)
    assert stale and copies_at(old_fs)
    c.down.add(victim)  # it crashes ...
    rest = [m for m in c.members if m != victim]
    c.run(rest[0], c.nodes[rest[0]].call(rest[0], _leave_request(c, victim)))  # ... and is evicted
    assert victim not in c.nodes[rest[0]].members
    assert all(read_all(c, rest[0], p) == v for p, v in ref.items())
    p = next(iter(stale))
    fd = c.op(rest[0], "open", p)
    c.op(rest[0], "write", fd, 0, b"NEW")  # a change of a promoted file
    c.op(rest[0], "close", fd)
    ref[p] = b"NEW" + ref[p][3:]
    # a fresh node object over the old local tree
    node = build_node(c.spec, victim, view=c.nodes[rest[0]].view)
    c.nodes[victim] = node
    c.down.discard(victim)
    removed = c.run(victim, node.reconcile(rest[0]))
    assert removed == len(stale)
    assert files_of(old_fs) == {} and copies_at(old_fs) == {}
    assert not any(is_replica(q) for q in old_fs.tree())
    c.run(victim, node.join(rest[0]))
    assert files(c.namespace()) == ref
    assert files(c.walk(victim)) == ref
    assert_replicated(c.fs, c.members)


def _leave_request(c: DirectCluster, node: int) -> Any:
    from fedsim.protocol.fedfs.membership import Leave

    return Leave(node, c.nodes[0].epoch)


def test_replica_requests_are_refused_with_one_copy_and_checked_with_two():
    from fedsim.protocol.fedfs.replication import ReplicaPut, ReplicaWrite

    one = DirectCluster(2)
    with pytest.raises(OSError) as info:
        one.run(0, one.nodes[0].call(1, ReplicaWrite("/x", 0, b"a")))
    assert info.value.errno == errno.ENOTSUP
    two = DirectCluster(2, config=TWO)
    for bad in (
        ReplicaPut("/x", 5, b"abc", 4, KEEP),
        ReplicaPut("/x", -1, b"", 0, KEEP),
        ReplicaPut("/x", 0, b"", 0, 1 << 20),
    ):
        with pytest.raises(OSError) as info:
            two.run(0, two.nodes[0].call(1, bad))
        assert info.value.errno == errno.EINVAL
    with pytest.raises(OSError) as info:
        two.run(0, two.nodes[0].call(1, ReplicaPut("/", 0, b"", 0, KEEP)))
    assert info.value.errno == errno.EINVAL
    assert copies_at(two.fs[1]) == {}


# ---------------------------------------------------------------------------- the property
NAMES = [f"/{d}/{f}" for d in ("a", "b") for f in ("f0", "f1", "f2", "f3")]
_CHANGES = (
    st.tuples(st.just("create"), st.integers(0, 5), st.sampled_from(NAMES)),
    st.tuples(st.just("write"), st.integers(0, 5), st.sampled_from(NAMES), st.integers(0, 8), st.binary(max_size=12)),
    st.tuples(st.just("truncate"), st.integers(0, 5), st.sampled_from(NAMES), st.integers(0, 16)),
    st.tuples(st.just("unlink"), st.integers(0, 5), st.sampled_from(NAMES)),
    st.tuples(st.just("rename"), st.integers(0, 5), st.sampled_from(NAMES), st.sampled_from(["f0", "f1", "f2", "f3"])),
)
op_st = st.one_of(
    *_CHANGES, st.tuples(st.just("migrate"), st.integers(0, 5), st.sampled_from(NAMES), st.integers(0, 5))
)


def _apply(c: DirectCluster, ref: dict[str, bytes], n: int, step: tuple[Any, ...]) -> None:
    kind, at, path = step[0], step[1] % n, step[2]
    try:
        if kind == "create":
            c.op(at, "create", path)
            ref[path] = b""
        elif kind == "write":
            off, data = step[3], step[4]
            fd = c.op(at, "open", path)
            try:
                c.op(at, "write", fd, off, data)
            finally:
                c.op(at, "close", fd)
            old = ref[path]
            old = old + b"\0" * max(0, off - len(old))
            ref[path] = old[:off] + data + old[off + len(data) :]
        elif kind == "truncate":
            c.op(at, "truncate", path, step[3])
            ref[path] = ref[path][: step[3]] + b"\0" * max(0, step[3] - len(ref[path]))
        elif kind == "unlink":
            c.op(at, "unlink", path)
            del ref[path]
        elif kind == "migrate":
            c.op(at, "migrate", path, step[3] % n)
        else:
            new = path.rsplit("/", 1)[0] + "/" + step[3]
            c.op(at, "rename", path, new)
            if new != path:
                ref[new] = ref.pop(path)
    except OSError as exc:
        assert exc.errno in (errno.ENOENT, errno.EEXIST, errno.EISDIR), exc


@settings(max_examples=60, deadline=None)
@given(
    st.integers(3, 6),
    st.lists(op_st, min_size=4, max_size=30),
    st.integers(0, 5),
    st.booleans(),
    st.sampled_from(["with_manager", "round_robin"]),
)
def test_random_operations_then_a_leave_or_a_node_down_lose_no_acknowledged_file(n, steps, victim, leave, placement):
    c = DirectCluster(n, config=TWO, placement=placement)
    c.op(0, "mkdir", "/a")
    c.op(n - 1, "mkdir", "/b")
    ref: dict[str, bytes] = {}
    for step in steps:
        _apply(c, ref, n, step)
    assert_replicated(c.fs, c.members)
    victim %= n
    if leave:
        c.leave(victim)
        assert files(c.namespace()) == ref
        assert_replicated(c.fs, c.live)
    else:
        c.down.add(victim)
    reader = next(m for m in range(n) if m != victim)
    for path, data in ref.items():
        assert read_all(c, reader, path) == data, path


# ---------------------------------------------------------------------------- the agents
def test_agents_with_two_copies_serve_every_file_of_a_killed_agent():
    """Three agent processes over TCP, replicas 2: files written through every
    agent; one agent is killed (SIGKILL); every file, its own included, is
    read back with the right content through the other two."""
    from fednode.cli import format_status
    from fednode.client import Client
    from fednode.cluster import ProcessCluster, write_local

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        cf = write_local(base, 3, protocol={"replicas": 2})
        with ProcessCluster(cf, log_dir=base / "logs") as pc:
            pc.wait_ready()
            clients = [Client(cf, node=i) for i in range(3)]
            try:
                clients[0].mkdir("/k")
                ref, homes = {}, {}
                for i in range(9):
                    p = f"/k/f{i}"
                    ref[p] = b"agent data %d " % i * (i + 1)
                    homes[p] = clients[i % 3].write_file(p, ref[p])
                victim = 2
                theirs = [p for p, h in homes.items() if h == victim]
                assert theirs
                secondary = successor(victim, [0, 1, 2])
                for p in theirs:  # the copy is in the secondary's replica space on disk
                    assert (base / f"n{secondary}" / REPLICA_ROOT.lstrip("/") / p.lstrip("/")).read_bytes() == ref[p]
                status = clients[secondary].status()
                assert status["replicas"] == 2 and status["replica_files"] == len(theirs)
                assert status["local_files"] == sum(1 for h in homes.values() if h == secondary)  # copies apart
                row = {"node": secondary, "reachable": True, **status}
                assert f"replicas 2: {len(theirs)} copies held for its predecessor, 0 files unsynced" in format_status(
                    [row]
                )
                pc.kill(victim)
                clients[victim].disconnect()
                for c in clients[:2]:
                    for p, data in ref.items():
                        assert c.read_file(p) == data, p
                    assert [n for n, _ in c.readdir("/")] == ["k"]
            finally:
                for c in clients:
                    c.disconnect()


def test_block_cache_stays_coherent_with_two_copies_and_keeps_nothing_read_from_a_copy():
    c = DirectCluster(3, config=ProtocolConfig(replicas=2, block_cache_blocks=8, block_size=4))
    populate(c, 3, 6)
    home = next(n for n in range(3) if files_of(c.fs[n]))
    p = next(iter(files_of(c.fs[home])))
    reader, writer = [n for n in range(3) if n != home]
    fd = c.op(reader, "open", p)
    first = c.op(reader, "read", fd, 0, 8)
    assert c.op(reader, "read", fd, 0, 8) == first and c.nodes[reader].bcache.hits == 1
    wfd = c.op(writer, "open", p)
    c.op(writer, "write", wfd, 0, b"NEW!")  # forwarded to the copy, and the reader's blocks invalidated
    c.op(writer, "close", wfd)
    assert c.op(reader, "read", fd, 0, 8) == b"NEW!" + first[4:]
    assert_replicated(c.fs, c.members)
    c.down.add(home)
    c.nodes[reader].bcache.drop(p)
    assert c.op(reader, "read", fd, 0, 8) == b"NEW!" + first[4:]  # from the copy
    assert c.nodes[reader].bcache.lookup(p, 0, 1, 4) is None  # not kept: no home would invalidate it


def test_a_simulated_secondary_that_missed_writes_is_repaired_in_the_background():
    c = SimCluster(3, network=preset("tcp_loopback"), keep_data=True, protocol=TWO)
    c.preload_summaries()
    c.run_op(0, "mkdir", "/d")
    for i in range(6):
        c.run_op(i % 3, "create", f"/d/f{i}")
    home = next(n for n in range(3) if files_of(c.fs[n]))
    s = successor(home, [0, 1, 2])
    c.fail(s)
    for p in files_of(c.fs[home]):
        fd = c.run_op(home, "open", p)
        with pytest.raises(PeerUnavailable):  # not acknowledged with one copy
            c.run_op(home, "write", fd, 0, b"written while the secondary was down")
        c.run_op(home, "close", fd)
    assert c.nodes[home].unsynced and copies_at(c.fs[s]) != files_of(c.fs[home])
    c.down.discard(s)  # it answers again
    c.env.run()  # the repair's back-off ends; then nothing is left to run
    assert c.nodes[home].unsynced == set()
    assert_replicated(c.fs, [0, 1, 2])


def test_a_rename_of_a_file_whose_copy_lags_sends_the_new_name_whole():
    c = DirectCluster(3, config=TWO)
    c.op(0, "mkdir", "/d")
    home = c.nodes[0].manager_of("/d/a")  # with_manager: the name's manager homes it
    c.op(0, "create", "/d/a")
    s = successor(home, c.members)
    c.down.add(s)
    fd = c.op(home, "open", "/d/a")
    with pytest.raises(PeerUnavailable):
        c.op(home, "write", fd, 0, b"missed by the copy")  # applied here, not acknowledged
    c.op(home, "close", fd)
    c.down.discard(s)
    assert "/d/a" in c.nodes[home].unsynced
    c.op(home, "rename", "/d/a", "/d/b")
    assert c.nodes[home].unsynced == set()
    assert copies_at(c.fs[s]) == {"/d/b": b"missed by the copy"}


def test_replica_requests_from_the_wire_carry_canonical_namespace_paths_only():
    from fedsim.protocol.fedfs.replication import ReplicaPut, ReplicaRename, ReplicaWrite
    from fedsim.protocol.messages import ProtocolError, decode_request, encode_request

    ok = ReplicaPut("/d/f", 0, b"abc", 3, 0o644)
    assert decode_request(encode_request(ok)) == ok
    for bad in (
        ["ReplicaWrite", REPLICA_ROOT + "/d/f", 0, b"x"],  # the replica space itself: never named on the wire
        ["ReplicaWrite", "/d/../f", 0, b"x"],
        ["ReplicaRename", "/d/f", "d/g"],
        ["ReplicaPut", "/d/f", 0, "not bytes", 3, 0],
    ):
        with pytest.raises(ProtocolError):
            decode_request(bad)
    assert ReplicaWrite.kind == "ReplicaWrite" and ReplicaRename.reply is None


# ------------------------------------------------------------------ crash, eviction, restart (failure.py)
HB = 0.5  # heartbeat_s (a binary fraction: the in-memory clock's sums stay exact)
CRASHING = ProtocolConfig(replicas=2, heartbeat_s=HB, heartbeat_misses=3)


def _evicted(c: DirectCluster, victim: int) -> None:
    """Advance the clock until every other member's view lacks ``victim``."""
    for _ in range(100):
        if all(victim not in c.nodes[n].members for n in c.live if n != victim and n not in c.down):
            return
        c.advance(HB)
    raise AssertionError(f"node {victim} was not evicted")


def _write(c: DirectCluster, node: int, path: str, data: bytes) -> None:
    fd = c.op(node, "open", path)
    try:
        c.op(node, "write", fd, 0, data)
    finally:
        c.op(node, "close", fd)


def _changed_while_evicted(
    c: DirectCluster, ref: dict[str, bytes], victim: int, mine: list[str]
) -> tuple[list[int], str]:
    """Crash ``victim`` and let the heartbeats evict it; meanwhile the others
    unlink its file ``mine[0]`` and overwrite the start of ``mine[1]``
    (``ref`` follows).  Returns the other nodes and the unlinked path."""
    c.crash(victim)
    _evicted(c, victim)
    rest = [n for n in c.live if n != victim]
    gone, kept = mine[0], mine[1]
    c.op(rest[0], "unlink", gone)
    del ref[gone]
    _write(c, rest[1], kept, b"newer")
    ref[kept] = b"newer" + ref[kept][5:]
    return rest, gone


def test_files_unlinked_while_their_home_was_down_do_not_come_back():
    """The availability study's bug: a restarted node kept its files that
    were unlinked (after their promotion) while it was down, and copied them
    out again.  Reconcile drops every file of a synced tree; an rmdir made
    meanwhile stays made."""
    c = DirectCluster(4, config=CRASHING)
    ref = populate(c, 4, 12)
    victim = 2
    mine = sorted(files_of(c.fs[victim]))
    assert len(mine) >= 2
    c.op(0, "mkdir", "/gone")
    home = c.op(victim, "create", "/gone/x")
    assert home == victim or "/gone/x" in files_of(c.fs[home])
    rest, gone = _changed_while_evicted(c, ref, victim, mine)
    c.op(rest[0], "unlink", "/gone/x")
    c.op(rest[0], "rmdir", "/gone")
    c.restart(victim)
    c.advance(5 * HB)
    assert files(c.namespace()) == ref
    for p, data in ref.items():
        assert read_all(c, victim, p) == data, p
    assert gone not in files(c.walk(rest[0])) and gone not in c.fs[victim].tree()
    assert "/gone" not in c.namespace() and "/gone" not in c.fs[victim].tree()
    assert_replicated(c.fs, c.members)


def test_a_file_that_predates_the_federation_gets_its_copy_at_start_and_survives_a_crash():
    fss = [MemFS() for _ in range(3)]
    fss[1].populate([("/old/a", 5), ("/old/b", 3)], ["/old"])
    c = DirectCluster(3, config=CRASHING, local=fss)
    assert copies_at(c.fs[2]) == files_of(c.fs[1])  # the initial sync, before any change
    assert c.fs[1].tree().get(SYNC_MARK) == b"" and all(n.ready for n in c.nodes)
    before = files(c.namespace())
    c.crash(1)
    _evicted(c, 1)
    assert files(c.namespace()) == before  # promoted at node 2
    c.restart(1)
    assert files(c.namespace()) == before
    assert_replicated(c.fs, c.members)


def test_a_tree_never_synced_keeps_what_no_other_member_holds():
    """A node that crashed before its first full copy ran (no SYNC_MARK):
    its files had no secondary, so nobody can have promoted or removed them;
    they are kept (only names another member holds now are dropped)."""
    c = DirectCluster(3, config=CRASHING)
    populate(c, 3, 6)
    victim = 1
    mine = files_of(c.fs[victim])
    c.crash(victim)
    _evicted(c, victim)
    fs = c.fs[victim]
    fs.unlink(SYNC_MARK)
    fs.create("/d/only-here")
    c.restart(victim)
    assert files_of(fs).keys() == {"/d/only-here"} | set()  # the promoted ones were dropped
    assert "/d/only-here" in files(c.namespace()) and all(p in files(c.namespace()) for p in mine)


class _Interleaved(DirectCluster):
    """Runs ``probe()`` just before each ViewChange reaches a member (in
    memory nothing else interleaves with a view change's multicast): the
    moments when some members have the new view and others not yet."""

    probe: Any = None

    def _deliver(self, src: int, dst: int, req: Any, oneway: bool = False) -> Any:
        if req.kind == "ViewChange" and self.probe is not None and dst not in self.down:
            probe, self.probe = self.probe, None
            try:
                probe(dst)
            finally:
                self.probe = probe
        return super()._deliver(src, dst, req, oneway)


@pytest.mark.parametrize("victim", [0, 1, 3])
def test_no_acknowledged_file_looks_missing_during_or_after_an_eviction_in_memory(victim):
    c = _Interleaved(4, config=CRASHING)
    ref = populate(c, 4, 16)
    seen: list[tuple[int, str, str]] = []

    def stat_all(about_to_install: int) -> None:
        for n in c.live:
            if n in c.down:
                continue
            for p in ref:
                try:
                    c.op(n, "stat", p)
                except FileNotFoundError as exc:
                    seen.append((n, p, f"{exc} (before node {about_to_install} installs)"))
                except OSError:
                    pass  # (a failover that could not be served: not a missing name)

    c.probe = stat_all
    c.crash(victim)
    _evicted(c, victim)
    c.probe = None
    stat_all(-1)
    assert seen == []
    for p, data in ref.items():
        assert read_all(c, min(c.members), p) == data


def _sim_crashing(n: int, placement: str = "with_manager") -> SimCluster:
    c = SimCluster(n, network=preset("tcp_loopback"), keep_data=True, placement=placement, protocol=CRASHING)
    c.preload_summaries()
    for node in c.nodes:  # what start() would run: heartbeats, the initial sync
        for timer in node.background():
            c.spawn(node.id, timer)
    return c


@pytest.mark.parametrize(("victim", "placement"), [(1, "with_manager"), (2, "round_robin"), (3, "with_manager")])
def test_no_acknowledged_file_looks_missing_during_or_after_a_simulated_eviction(victim, placement):
    """A node crashes and is found out; the moment the first member installs
    the view without it (its successor promoting its copies meanwhile),
    every other node stats every file, and again a little later, and once
    the federation settled: never ENOENT (before the fix the name vanished
    from its manager's DT and from the merges until the promotion's
    AddEntry)."""
    c = _sim_crashing(4, placement)
    ref = populate(c, 4, 24, b"data %d")
    assert any(v is not None and not is_replica(p) for p, v in c.fs[victim].tree().items())
    readers = [n for n in range(4) if n != victim]
    epoch = c.nodes[readers[0]].epoch
    missing: list[str] = []

    def stat(node: int, p: str, when: str) -> Any:
        try:
            st_ = yield from c.call_op(node, "stat", p)
            assert st_ == (False, len(ref[p])), (p, st_)
        except FileNotFoundError as exc:
            missing.append(f"{when}: node {node}, {p}: {exc}")
        except PeerUnavailable as exc:  # a route through the crashed node, timed out: not a missing name
            assert exc.node == victim, exc

    def burst(when: str) -> None:
        procs = [c.env.process(stat(n, p, when)) for n in readers for p in ref]
        c.env.run(until=c.env.all_of(procs))

    c.crash(victim)
    end = c.env.now + 60 * 1e6
    while all(c.nodes[n].epoch == epoch for n in readers):  # the first install of the view without it
        assert c.env.now < end, "not evicted in time"
        c.env.run(until=c.env.now + 20)
    burst("as the view changes")
    burst("just after")
    while any(victim in c.nodes[n].members for n in readers) or any(getattr(n, "promoting", ()) for n in c.nodes):
        assert c.env.now < end, "not settled in time"
        c.env.run(until=c.env.now + HB / 8 * 1e6)
    burst("settled")
    assert missing == []
    assert sum(c.nodes[n].promoted for n in readers) >= 1
    for p, data in ref.items():
        fd = c.run_op(readers[0], "open", p)
        assert c.run_op(readers[0], "read", fd, 0, 100) == data
        c.run_op(readers[0], "close", fd)


@pytest.mark.parametrize("victim", [1, 2])  # (its successor is not the coordinator, which must be reachable)
def test_a_departed_homes_files_are_found_while_its_successor_has_not_learnt_the_view(victim):
    """The successor promoting the copies misses the view change (a
    transient cut): lookups of the departed home's files are answered from
    it all the same (the manager's re-pointed entry, or the parent's
    manager's miss that asks it), and it learns the view from them."""
    c = DirectCluster(4, config=TWO)  # no heartbeats: nothing else tells the successor
    ref = populate(c, 4, 16)
    mine = files_of(c.fs[victim])
    succ = successor(victim, c.members)
    c.crash(victim)
    coordinator = min(n for n in c.members if n != victim)
    c.down.add(succ)  # every message of the view change to it is lost
    c.run(coordinator, c.nodes[coordinator].evict(victim))
    c.down.discard(succ)
    assert victim in c.nodes[succ].members
    reader = next(n for n in c.live if n not in (victim, succ))
    for p in sorted(mine):
        assert c.op(reader, "stat", p) == (False, len(ref[p])), p
        assert read_all(c, reader, p) == ref[p]
    assert victim not in c.nodes[succ].members  # it learnt the view from the requests themselves


_THEIRS = st.tuples(st.sampled_from(["theirs:unlink", "theirs:write"]), st.integers(0, 5), st.integers(0, 7))
#: one round: changes, a crash (of node k), changes while it is down (of its files too), its restart
crash_round_st = st.tuples(
    st.lists(st.one_of(*_CHANGES), max_size=12),
    st.integers(0, 5),
    st.lists(st.one_of(*_CHANGES, _THEIRS, _THEIRS), max_size=8),
)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(3, 6),
    st.lists(crash_round_st, min_size=1, max_size=3),
    st.sampled_from(["with_manager", "round_robin"]),
)
def test_random_operations_with_crashes_and_restarts_lose_nothing_and_bring_nothing_back(n, rounds, placement):
    """Replicas 2, heartbeats on, one node down at a time: random changes at
    every live node; a node crashes and is evicted by the heartbeats (its
    copies promoted at its successor); changes go on (its files unlinked,
    written, renamed); it restarts and rejoins (``recover``: reconcile,
    join).  Settled, the namespace is the reference tree (what was
    acknowledged), every file has its copy at its successor, and nothing a
    change removed while a node was down came back with it."""
    c = DirectCluster(n, config=CRASHING, placement=placement)
    c.op(0, "mkdir", "/a")
    c.op(n - 1, "mkdir", "/b")
    ref: dict[str, bytes] = {}
    for i, name in enumerate(NAMES):  # every name exists to begin with, made through every node
        _apply(c, ref, n, ("create", i % n, name))
        _apply(c, ref, n, ("write", (i + 1) % n, name, 0, name.encode()))
    changed = 0
    for before, victim, during in rounds:
        for step in before:
            _apply(c, ref, n, step)
        down = victim % n
        theirs = sorted(files_of(c.fs[down]))  # the crashed node's files as it crashes
        c.crash(down)
        _evicted(c, down)
        live = [m for m in range(n) if m != down]
        for step in during:
            at = live[step[1] % len(live)]
            if not step[0].startswith("theirs:"):
                _apply(c, ref, n, (step[0], at, *step[2:]))
                continue
            left = [p for p in theirs if p in ref]
            if not left:
                continue
            path = left[step[2] % len(left)]
            if step[0] == "theirs:unlink":
                _apply(c, ref, n, ("unlink", at, path))
                assert path not in ref
            else:
                _apply(c, ref, n, ("write", at, path, 1, b"while down"))
                assert ref[path][1:11] == b"while down"
            changed += 1
        c.restart(down)
        c.advance(2 * HB)
        assert c.members == tuple(range(n)) and not c.down and not c.evicted
        assert files(c.namespace()) == ref
    event(f"changes of a crashed node's files: {min(changed, 3)}")
    c.advance(4 * HB)
    whole = c.namespace()
    assert files(whole) == ref
    assert {p for p, v in whole.items() if v is None} <= {"/", "/a", "/b"}  # (an empty one may go with its node)
    for viewer in range(n):
        assert c.walk(viewer) == whole, viewer
    assert_replicated(c.fs, c.members)


def test_the_initial_sync_waits_for_a_successor_that_is_not_listening_yet():
    """Agents start one by one: a node's successor may not answer its
    initial sync yet.  The files it missed are copied again (backing off)
    before the node is ready, and the tree is marked only once each arrived."""
    c = SimCluster(3, network=preset("tcp_loopback"), keep_data=True, protocol=TWO)
    c.populate(1, [("/old/a", 7), ("/old/b", 3)], ["/old"])
    c.preload_summaries()
    c.down.add(2)  # node 1's successor does not answer yet
    for node in c.nodes:
        for timer in node.background():
            c.spawn(node.id, timer)
    c.env.run(until=c.env.now + 10e6)  # (each copy waits out the rpc timeout)
    assert not c.nodes[1].ready and c.nodes[1].unsynced
    assert SYNC_MARK not in c.fs[1].tree()
    c.down.discard(2)
    c.env.run()
    assert c.nodes[1].ready and c.nodes[1].unsynced == set()
    assert copies_at(c.fs[2]) == files_of(c.fs[1]) and SYNC_MARK in c.fs[1].tree()


class _Refusing(DirectCluster):
    """Node ``refuser`` answers every AddEntry and SummaryAdd with a plain
    OSError (as an evicted member does: EHOSTDOWN naming itself)."""

    refuser: int | None = None

    def _deliver(self, src: int, dst: int, req: Any, oneway: bool = False) -> Any:
        if dst == self.refuser and req.kind in ("AddEntry", "SummaryAdd"):
            self.trace.append((src, dst, req.kind))
            raise OSError(errno.EHOSTDOWN, f"node {dst} refuses")
        return super()._deliver(src, dst, req, oneway)


def test_a_promotion_goes_on_when_a_manager_refuses_its_updates():
    """Every copy of a departed home is promoted even when the managers it
    must tell refuse (before: the first refusal aborted the install, the
    other copies stayed in the replica space, and the home's restart then
    dropped its own: files lost)."""
    c = _Refusing(5, config=TWO)
    ref = populate(c, 5, 20)
    victim = next(n for n in range(5) if len(files_of(c.fs[n])) >= 2)
    succ = successor(victim, c.members)
    c.refuser = next(n for n in range(5) if n not in (victim, succ))
    c.crash(victim)
    coordinator = min(n for n in c.members if n != victim)
    c.run(coordinator, c.nodes[coordinator].evict(victim))
    assert copies_at(c.fs[succ]).keys().isdisjoint(files_of(c.fs[victim]))  # every copy promoted
    assert set(files_of(c.fs[victim])) <= set(files_of(c.fs[succ]))
    c.refuser = None
    c.restart(victim)
    assert files(c.namespace()) == ref
    for p, data in ref.items():
        assert read_all(c, victim, p) == data


def test_a_restarting_node_serves_no_file_request_before_it_has_joined():
    """A requester under an older view may name a restarting node a home;
    what it made there before ``reconcile`` would be dropped after its
    acknowledgement, so it refuses (EHOSTDOWN) until it is a member."""
    from fedsim.protocol.messages import Create, Stat

    c = DirectCluster(3, config=TWO)
    populate(c, 3, 6)
    c.crash(2)
    c.run(0, c.nodes[0].evict(2))
    node = build_node(c.spec, 2, view=c.nodes[0].view)
    c.nodes[2] = node
    c.down.discard(2)
    for req in (Create("/d/late"), Stat("/d/f2")):
        with pytest.raises(OSError) as info:
            c.run(0, c.nodes[0].call(2, req))
        assert info.value.errno == errno.EHOSTDOWN and "not a member" in str(info.value)
    assert "/d/late" not in c.fs[2].tree()
    c.run(2, node.recover(0))
    assert node.member and c.op(0, "stat", "/d/f2")[0] is False


def _probe_installs(c: DirectCluster, probe: Any) -> None:
    """Run ``probe(node)`` just before each node starts installing a newer
    view (in memory a view change runs nested: the coordinator's HandOffs
    make the members fetch and install it at once, before its ViewChange).
    The moment an agent meets when its peers install concurrently: some
    members route by the new view, others not yet."""
    busy = [False]
    for node in c.nodes:
        install = node.install_view

        def probed(view: Any, install: Any = install, node: Any = node) -> Any:
            if view.epoch > node.epoch and not busy[0]:
                busy[0] = True
                try:
                    probe(node.id)
                finally:
                    busy[0] = False
            return (yield from install(view))

        node.install_view = probed


@pytest.mark.parametrize("placement", ["with_manager", "round_robin"])
@pytest.mark.parametrize("victim", [1, 2, 3])
def test_no_create_of_an_existing_name_succeeds_while_an_eviction_is_installed(victim, placement):
    """The agent test's duplicates (``/w/n0/f78`` on nodes 0 and 1): as the
    eviction's view is installed member by member, a directory's new
    manager (mod-N moves nearly all) merged it from the summaries it holds,
    and a member's directory made since its last full push reached only the
    old manager's copy of its summary (``summary_add``); until that member
    installs the view and pushes it, the merge missed the member's files,
    and a create (the client's overwrite: create, EEXIST, truncate, write)
    of an existing name made a second file of that name.  Every create of
    an existing name, at every moment, must be refused, and every lookup
    must find it."""
    c = DirectCluster(4, config=CRASHING, placement=placement)
    c.op(0, "mkdir", "/w")
    ref = {}
    for d in range(3):  # directories made after the start's summary push, and by files at every home
        c.op(d, "mkdir", f"/w/n{d}")
        for i in range(24):
            p = f"/w/n{d}/f{i}"
            c.op(i % 4, "create", p)
            ref[p] = b""
    wrong: list[str] = []

    def create_all(about_to_install: int) -> None:
        for n in c.live:
            if n in c.down:
                continue
            for p in ref:
                try:
                    c.op(n, "stat", p)
                    c.op(n, "create", p)
                except OSError as exc:
                    if exc.errno in (errno.EEXIST, errno.EAGAIN, errno.EHOSTDOWN):
                        continue
                    wrong.append(f"{p} at node {n}: {exc!r} (before node {about_to_install} installs)")
                    continue
                wrong.append(f"{p} made again at node {n} (before node {about_to_install} installs)")

    _probe_installs(c, create_all)
    c.crash(victim)
    _evicted(c, victim)
    create_all(-1)
    assert wrong == []
    assert not any(node.collisions for node in c.nodes if node.id != victim)


def _rejoin(c: DirectCluster, node_id: int, seed: int) -> int:
    """What the agent does for ``fednode serve --join`` over a killed node's
    tree: a fresh node object over the same local file system runs
    ``rejoin`` (not ``recover``: the agent cannot tell a restart from a
    first join; ``rejoin`` must)."""
    from fedsim.protocol.view import View

    spec = c.spec
    node = build_node(spec, node_id, view=View(0, (seed,), spec.hashing, spec.vnodes))
    c.nodes[node_id] = node
    c.down.discard(node_id)
    return c.run(node_id, node.rejoin(seed))


def test_an_agent_restarted_after_its_eviction_reconciles_before_it_joins():
    """The agent test's stale files (``/w/n3/f11`` back at node 2 with an
    old content beside its promoted copy at node 3): a killed agent that
    restarts once the heartbeats have evicted it finds itself no longer
    listed, and ``rejoin`` used to ``join`` without ``reconcile``: its old
    files came back (an unlinked one too), colliding with the promoted
    ones.  A node whose tree shows it was a member (its replica space)
    recovers: reconcile, then join."""
    c = DirectCluster(4, config=CRASHING)
    ref = populate(c, 4, 12)
    victim = 2
    mine = sorted(files_of(c.fs[victim]))
    assert len(mine) >= 2
    rest, gone = _changed_while_evicted(c, ref, victim, mine)
    _rejoin(c, victim, rest[0])
    c.advance(5 * HB)
    assert c.members == (0, 1, 2, 3)
    assert files(c.namespace()) == ref
    for n in c.members:
        assert not c.nodes[n].collisions, n
        for p, data in ref.items():
            assert read_all(c, n, p) == data, (n, p)
    assert gone not in c.fs[victim].tree()
    assert_replicated(c.fs, c.members)


def test_a_fresh_node_joining_with_rejoin_keeps_its_own_tree():
    """``rejoin`` of a node that never was a member (no replica space) is a
    plain join: its files and its empty directories stay, as autonomy says."""
    c = DirectCluster(3, config=CRASHING)
    ref = populate(c, 3, 6)
    fs = MemFS()
    fs.populate([("/own/a", 4)], ["/own", "/own/empty"])
    c.nodes.append(build_node(c.spec, 3, view=c.nodes[0].view))
    c.fs.append(fs)
    c.run(3, c.nodes[3].rejoin(0))
    assert c.members == (0, 1, 2, 3)
    assert "/own/empty" in c.namespace() and "/own/a" in files(c.namespace())
    assert {p: v for p, v in files(c.namespace()).items() if p in ref} == ref


class _SlowSummaries(SimCluster):
    """The view change's messages from node ``slow`` (its HandOffs and its
    SummaryPushes) arrive ``lag_s`` late."""

    slow: int | None = None
    lag_s = 1.5  # (beyond the rpc timeout the ViewChange to the crashed node waits out)

    def _request(self, src: int, dst: int, req: Any, trace: Any, depth: int, want_reply: bool) -> Any:
        if src != self.slow or req.kind not in ("HandOff", "SummaryPush"):
            return super()._request(src, dst, req, trace, depth, want_reply)
        reply = self.env.event() if want_reply else None

        def later() -> Any:
            yield self.env.timeout(self.lag_s * 1e6)
            inner = super(_SlowSummaries, self)._request(src, dst, req, trace, depth, want_reply)
            if inner is not None:
                reply.succeed((yield inner))

        self.env.process(later())
        return reply


def test_a_view_settles_only_once_each_member_has_pushed_its_summary():
    """A member that began installing the view from another request (a
    heartbeat or a client's call under the new epoch) answered the
    coordinator's HandOff and ViewChange at once, while its own summary push
    to the new managers was still on its way: the view settled, and the
    directory's new manager merged from its summaries again, missing that
    member's files (a create of an existing name made a second file).  The
    ViewChange's answer waits for the member's push."""
    c = _SlowSummaries(4, network=preset("tcp_loopback"), keep_data=True, protocol=TWO, placement="round_robin")
    c.preload_summaries()
    c.run_op(0, "mkdir", "/w")
    ref = []
    for d in range(3):
        c.run_op(d, "mkdir", f"/w/n{d}")
        for i in range(24):
            c.run_op(i % 4, "create", f"/w/n{d}/f{i}")
            ref.append(f"/w/n{d}/f{i}")
    victim, slow = 2, 1
    coordinator = c.nodes[0]
    install = coordinator.install_view

    def installing(view: Any) -> Any:
        if view.epoch > coordinator.epoch:
            c.spawn(slow, c.nodes[slow].install_view(view))  # as a heartbeat under the new epoch does
        return (yield from install(view))

    coordinator.install_view = installing
    c.slow = slow
    c.crash(victim)
    c.env.run(until=c.spawn(0, coordinator.evict(victim)))
    assert coordinator._prev_view is None  # settled
    made = []
    for p in ref:
        try:
            c.run_op(0, "create", p)
        except FileExistsError:
            continue
        made.append(p)
    assert made == []


def test_a_whole_copy_overtaken_by_every_round_is_repaired_once_the_writes_stop():
    """A whole copy (a view change's, a repair's) that a write overtakes in
    each of its ``COPY_ROUNDS`` leaves the file unsynced; it used to wait
    for the file's next change or the next view change (none may come: the
    copy stayed stale, and a crash of the home then promoted the old
    content).  The background repair copies it again once the writes stop.
    (In memory a write cannot run during a copy: each round here is
    overtaken by hand, as a write's forward marks it.)"""
    c = DirectCluster(3, config=TWO)
    c.op(0, "mkdir", "/d")
    home = c.op(0, "create", "/d/f")
    node = c.nodes[home]
    copy_whole = node._copy_whole
    rounds = 0

    def overtaken(path: str, to: int) -> Any:
        nonlocal rounds
        yield from copy_whole(path, to)
        rounds += 1
        c.fs[home].apply("write", path, (0, b"write %d" % rounds))  # a client's write as the round ends
        node.copying[path] = True  # ... whose forward found the copy in flight

    node._copy_whole = overtaken
    c.run(home, node.replicate("/d/f"))
    node._copy_whole = copy_whole
    assert "/d/f" in node.unsynced and copies_at(c.fs[successor(home, c.members)]) != files_of(c.fs[home])
    c.advance(60.0)  # the repair's back-off
    assert node.unsynced == set()
    assert_replicated(c.fs, c.members)


# ------------------------------------------------------------------ the steps of a commit (ack-both)
def _homed_at(c: DirectCluster, home: int, count: int) -> list[str]:
    """``count`` names in /d (a name's manager homes it: with_manager) homed at ``home``."""
    return [p for p in (f"/d/n{i}" for i in range(1000)) if c.nodes[0].manager_of(p) == home][:count]


def _settled(c: DirectCluster) -> None:
    """The cut-off node answers again; the repair's back-off runs out."""
    c.heal()
    c.down.clear()
    c.advance(60.0)
    assert all(not c.nodes[n].unsynced for n in c.members)


def test_an_unlink_is_acknowledged_only_once_the_secondary_dropped_its_copy():
    """(A regression guard: an unlink follows ``_mutated``'s rule since the
    write path did.)  Secondary cut off: EHOSTDOWN naming it, the file gone
    at its home (ambiguous); once it answers, the copy goes too."""
    c = DirectCluster(3, config=TWO)
    populate(c, 3)
    home = 1
    s = successor(home, c.members)
    p = sorted(files_of(c.fs[home]))[0]
    c.down.add(s)
    with pytest.raises(PeerUnavailable) as exc:
        c.op(0 if s else 2, "unlink", p)
    assert exc.value.errno == errno.EHOSTDOWN and exc.value.node == s
    assert p not in files_of(c.fs[home]) and p in copies_at(c.fs[s])
    _settled(c)
    assert p not in copies_at(c.fs[s])
    assert_replicated(c.fs, c.members)


@pytest.mark.parametrize("target", ["none", "same_home", "other_home"])
def test_a_rename_is_acknowledged_only_once_every_home_s_secondary_holds_its_step(target):
    """A rename's commit steps at the homes (H_a renames, H_b drops the
    replaced target) reach their secondaries before the client's reply.
    The secondary of the home whose step it is cut off: the rename is
    committed and visible, the client is told EHOSTDOWN naming that
    secondary (ambiguous, as a timeout); once it answers, the copies agree
    (the copy of the old name gone: not only the new one sent)."""
    c = DirectCluster(4, config=TWO)
    c.op(0, "mkdir", "/d")
    h_a = c.nodes[0].manager_of("/d")
    old, same = _homed_at(c, h_a, 2)
    h_b = successor(h_a, c.members)
    new = {"none": same, "same_home": same, "other_home": _homed_at(c, h_b, 1)[0]}[target]
    for p, data in ((old, b"renamed"), (new, b"replaced")):
        if target != "none" or p == old:
            c.op(0, "create", p)
            _write(c, 0, p, data)
    assert_replicated(c.fs, c.members)
    silent = successor(h_b if target == "other_home" else h_a, c.members)
    client = next(n for n in c.members if n not in (silent, h_a, h_b))
    c.down.add(silent)
    with pytest.raises(PeerUnavailable) as exc:
        c.op(client, "rename", old, new)
    assert exc.value.errno == errno.EHOSTDOWN and exc.value.node == silent
    assert files_of(c.fs[h_a]).get(new) == b"renamed"  # committed: the homes did their steps
    assert not any(old in files_of(fs) or (new in files_of(fs) and i != h_a) for i, fs in enumerate(c.fs))
    _settled(c)
    assert_replicated(c.fs, c.members)
    assert files(c.namespace()) == {new: b"renamed"}


@pytest.mark.parametrize("silent", ["source", "target"])
def test_a_migration_is_acknowledged_only_once_both_copies_hold_it(silent):
    """The source's secondary cut off: the move is committed (the file at
    the target, copied on to the target's successor), the source's drop
    did not reach its secondary: EHOSTDOWN naming it; once it answers the
    stale copy goes.  The target's successor cut off: the move fails before
    its commit point, naming it, and leaves no trace (the file whole at the
    source, its copy where it was, nothing at the target or for it)."""
    c = DirectCluster(4, config=TWO)
    ref = populate(c, 4, 12)
    pm = c.nodes[0].manager_of("/d")
    src, to, cut = next(
        (src, to, cut)
        for src in c.members
        for to in c.members
        if files_of(c.fs[src]) and to != src
        and (cut := successor(src if silent == "source" else to, c.members)) not in (src, to, pm)
    )  # fmt: skip
    p = sorted(files_of(c.fs[src]))[0]
    before = [dict(fs.tree()) for fs in c.fs]
    client = next(n for n in c.members if n not in (cut, src, to))
    c.down.add(cut)
    with pytest.raises(PeerUnavailable) as exc:
        c.op(client, "migrate", p, to)
    assert exc.value.errno == errno.EHOSTDOWN and exc.value.node == cut
    if silent == "source":
        assert files_of(c.fs[to])[p] == ref[p] and p not in files_of(c.fs[src])
        assert copies_at(c.fs[successor(to, c.members)])[p] == ref[p]
        assert p in copies_at(c.fs[cut])  # stale until the source's repair
    else:
        assert [dict(fs.tree()) for fs in c.fs] == before  # no trace
    _settled(c)
    assert_replicated(c.fs, c.members)
    assert files(c.namespace()) == ref


@pytest.mark.parametrize("fault", ["home_cut_off", "secondary_silent_then_home_crashes"])
@pytest.mark.parametrize("op", ["unlink", "rename_over"])
def test_a_removal_acknowledged_with_two_copies_does_not_come_back_after_its_home_is_evicted(op, fault):
    """The case that kept the in-memory property's clients off a cut-off
    node.  A client removes file b, homed at H (an unlink, or a rename of
    a over it, every participant H itself), while H cannot reach its
    secondary S: H is cut off (its own client), or S is silent, answers
    again, and H crashes before its repair ran.  Then H is evicted: S
    promotes its copies, H's restart drops its own tree.  Before, the
    rename was acknowledged with H's copy alone and then undone: the
    removed file came back.  Now the removal is acknowledged only once S
    holds it: it fails (EHOSTDOWN naming S), and after the eviction the
    namespace is the state before it (nothing changed), with two copies.
    (The plain unlink kept this rule already: a regression guard.)"""
    c = DirectCluster(4, config=CRASHING)
    c.op(0, "mkdir", "/d")
    h = c.nodes[0].manager_of("/d")
    a, b = _homed_at(c, h, 2)
    for p in (a, b):
        c.op(0, "create", p)
        _write(c, 0, p, p.encode())
    before = files(c.namespace())
    s = successor(h, c.members)
    if fault == "home_cut_off":
        c.inject(FaultPlan.of(partitions=[Partition(frozenset({h}))]))
        client = h
    else:
        c.down.add(s)
        client = next(n for n in c.members if n not in (h, s))
    try:
        if op == "unlink":
            c.op(client, "unlink", b)
        else:
            c.op(client, "rename", a, b)
        acknowledged = True
    except PeerUnavailable as exc:
        assert exc.errno == errno.EHOSTDOWN and exc.node == s
        acknowledged = False
    if fault == "home_cut_off":
        _evicted(c, h)
        c.heal()
    else:
        c.down.discard(s)
        c.crash(h)  # before the repair's first round
        _evicted(c, h)
    after = files(c.namespace())
    if acknowledged:
        assert after.get(b) == (a.encode() if op == "rename_over" else None), "an acknowledged removal came back"
    assert not acknowledged and after == before  # not acknowledged; and nothing changed
    c.restart(h)
    c.advance(5 * HB)
    assert files(c.namespace()) == before
    assert_replicated(c.fs, c.members)


def _own_file(c: DirectCluster, node: int, data: bytes) -> str:
    """A file in a new directory /d, homed at ``node`` and written there by its own client."""
    c.op(node, "mkdir", "/d")
    p = _homed_at(c, node, 1)[0]
    c.op(node, "create", p)
    _write(c, node, p, data)
    return p


def test_a_cut_off_node_that_was_evicted_serves_no_stale_read():
    """Found by the in-memory dynamics property with clients at a cut-off
    node (3 nodes): node 0 is cut off and evicted; a client elsewhere
    overwrites a file node 0 homed (its promoted copy, acknowledged by both
    copies); node 0's own client then read the old content from node 0's
    tree (it never heard of its eviction).  Ack-both keeps such a node from
    acknowledging changes, not from serving reads: its read lease
    (``FailureDetection``) ends before the others can evict it, and from
    then on it refuses its own clients (EHOSTDOWN naming itself)."""
    c = DirectCluster(3, config=CRASHING)
    p = _own_file(c, 0, b"old")
    c.inject(FaultPlan.of(partitions=[Partition(frozenset({0}))]))
    refused = evicted = None
    for step in range(40):  # a quarter period at a time: node 0's client reads, the others may evict it
        try:
            assert read_all(c, 0, p) == b"old"  # (nobody could have changed it yet)
        except PeerUnavailable as exc:
            assert exc.node == 0 and "read lease" in str(exc), exc
            refused = step if refused is None else refused
        if evicted is None and all(0 not in c.nodes[n].members for n in (1, 2)):
            evicted = step
            break
        c.advance(HB / 4)
    assert refused is not None and evicted is not None and refused < evicted, (refused, evicted)
    _write(c, 1, p, b"new")  # acknowledged: the promoted copy and its secondary hold it
    assert read_all(c, 1, p) == b"new"
    with pytest.raises(PeerUnavailable, match="read lease"):
        read_all(c, 0, p)  # no stale read at the evicted node
    lease = c.nodes[0].describe()["heartbeat"]["lease"]
    assert lease["left_s"] == 0 and lease["refused"] >= 2, lease
    row = {"node": 0, "reachable": True, "uptime_s": 1.0, "members": [0, 1, 2], "transport": "mem", "local_files": 1,
           "managed_names": 0, "dt_entries": 0, "vd_entries": 0, "collisions": [], **c.nodes[0].describe()}  # fmt: skip
    assert f"node 0: read lease LAPSED ({lease['pings']} pings, {lease['refused']} client requests refused)" in (
        format_status([row])
    )
    c.heal()
    _evicted(c, 0)
    c.restart(0)
    assert read_all(c, 0, p) == b"new"


def test_a_node_whose_predecessor_crashed_keeps_serving_its_clients():
    """Node 1's predecessor, node 0, crashes: no heartbeat reaches node 1
    until node 0 is evicted, and its pings to its successor keep its lease:
    its clients are served all along, and only node 1 pinged."""
    c = DirectCluster(4, config=CRASHING)
    p = _own_file(c, 1, b"mine")
    c.crash(0)
    for _ in range(4 * (CRASHING.heartbeat_misses + 3)):  # past the eviction, a quarter period at a time
        assert read_all(c, 1, p) == b"mine"
        c.advance(HB / 4)
    assert all(0 not in c.nodes[n].members for n in (1, 2, 3))
    assert read_all(c, 1, p) == b"mine"
    leases = {n: c.nodes[n].describe()["heartbeat"]["lease"] for n in (1, 2, 3)}
    assert leases[1]["pings"] > 0 and leases[1]["refused"] == 0, leases
    assert leases[2]["pings"] == leases[3]["pings"] == 0, leases  # (heartbeats reach them: no ping)


def test_the_survivor_of_two_serves_again_once_it_evicted_the_other():
    """Two members: when node 1 crashes, node 0 hears from nobody (its ping
    goes to node 1 too) and cannot tell a crash from being cut off, so its
    lease lapses; it still evicts node 1 (the membership requests it makes
    of itself are free of the lease) and, alone, serves its clients again."""
    c = DirectCluster(2, config=CRASHING)
    p = _own_file(c, 0, b"mine")
    c.crash(1)
    c.advance(CRASHING.heartbeat_misses * HB)
    with pytest.raises(PeerUnavailable, match="read lease"):
        read_all(c, 0, p)
    _evicted(c, 1)
    assert c.nodes[0].members == (0,)
    assert read_all(c, 0, p) == b"mine"


def test_without_a_second_copy_there_is_no_read_lease():
    """With ``replicas: 1`` nothing is promoted: a cut-off node's files are
    its own, and it serves its clients as before (no lease, no ping)."""
    c = DirectCluster(3, config=ProtocolConfig(heartbeat_s=HB, heartbeat_misses=3))
    p = _own_file(c, 0, b"old")
    c.inject(FaultPlan.of(partitions=[Partition(frozenset({0}))]))
    for _ in range(4 * (CRASHING.heartbeat_misses + 3)):
        assert read_all(c, 0, p) == b"old"
        c.advance(HB / 4)
    assert "lease" not in c.nodes[0].describe()["heartbeat"]
    assert c.nodes[0].pings == 0 and c.nodes[0].refused == 0


def _sim_read(c: SimCluster, node: int, path: str) -> Any:
    """A client's open, read, close at ``node`` (a generator for a process)."""
    fd = yield from c.call_op(node, "open", path)
    try:
        return (yield from c.call_op(node, "read", fd, 0, 64))
    finally:
        yield from c.call_op(node, "close", fd)


def test_a_simulated_cut_off_node_refuses_its_clients_before_it_is_evicted():
    """In simulated time, with heartbeats and a network: node 0 is cut off;
    its client reads every 10 ms.  Its first refused read (begun past its
    read lease) comes before the first view without node 0 is installed
    anywhere (the eviction, then the promotion of its files), and every
    read after it is refused; node 1, whose predecessor it was, serves its
    clients all along (it pings node 2)."""
    c = SimCluster(3, network=preset("tcp_loopback"), keep_data=True, protocol=CRASHING)
    c.preload_summaries()
    for node in c.nodes:  # what start() runs: heartbeats, the initial sync
        for timer in node.background():
            c.spawn(node.id, timer)
    c.run_op(0, "mkdir", "/d")
    p = next(f"/d/f{i}" for i in range(64) if c.nodes[0].manager_of(f"/d/f{i}") == 0)
    q = next(f"/d/g{i}" for i in range(64) if c.nodes[0].manager_of(f"/d/g{i}") == 1)
    for path, at in ((p, 0), (q, 1)):
        c.run_op(at, "create", path)
        fd = c.run_op(at, "open", path)
        c.run_op(at, "write", fd, 0, b"old")
        c.run_op(at, "close", fd)
    c.env.run(until=c.env.now + 2 * HB * 1e6)  # (the initial sync done)
    c.inject(FaultPlan.of(partitions=[Partition(frozenset({0}))]))
    cut = c.env.now
    reads: dict[int, list[tuple[float, Any]]] = {0: [], 1: []}
    evicted_at: list[float] = []

    def client(node: int, path: str) -> Any:
        while c.env.now < cut + 8 * HB * 1e6:
            start = c.env.now
            try:
                got = yield from _sim_read(c, node, path)
            except PeerUnavailable as exc:
                got = exc  # (after the failover to node 0's secondary, which waits out a timeout)
            reads[node].append((start, got))
            yield c.env.timeout(10_000)

    def watch() -> Any:
        while not any(0 not in c.nodes[n].members for n in (1, 2)):
            yield c.env.timeout(1_000)
        evicted_at.append(c.env.now)

    procs = [c.env.process(client(0, p)), c.env.process(client(1, q)), c.env.process(watch())]
    c.env.run(until=simpy.AllOf(c.env, procs))
    first = next(i for i, (_, got) in enumerate(reads[0]) if isinstance(got, PeerUnavailable))
    assert all(got == b"old" for _, got in reads[0][:first])
    assert all(isinstance(got, PeerUnavailable) and got.node == 0 for _, got in reads[0][first:])
    assert reads[0][first][0] < evicted_at[0], (reads[0][first][0] - cut, evicted_at[0] - cut)
    lease = CRASHING.heartbeat_s * (CRASHING.heartbeat_misses - 1) * 1e6
    assert reads[0][first][0] - cut <= lease + 20_000  # (one read's period, one read's time)
    assert all(got == b"old" for _, got in reads[1]), reads[1]
    assert c.nodes[1].pings > 0 and c.nodes[1].refused == 0


def test_a_simulated_rename_and_migration_are_acknowledged_only_once_both_copies_hold_them():
    """In the simulator the silent secondary is a timeout two hops down
    (PM -> H_a -> secondary; target -> source -> secondary): the nested
    timeouts let the home's answer naming its secondary reach the
    coordinator first, so the rename is not rolled back over a local rename
    already done, and the migration is not retried at the source."""
    c = SimCluster(4, network=preset("tcp_loopback"), keep_data=True, protocol=TWO)
    c.preload_summaries()
    c.run_op(0, "mkdir", "/d")
    names = [f"/d/n{i}" for i in range(40)]
    h = c.nodes[0].manager_of("/d")
    a, b = [p for p in names if c.nodes[0].manager_of(p) == h][:2]
    ring = [0, 1, 2, 3]
    m = next(p for p in names if h not in (c.nodes[0].manager_of(p), successor(c.nodes[0].manager_of(p), ring)))
    for p in (a, m):
        c.run_op(0, "create", p)
    src = c.nodes[0].manager_of(m)
    s, s_src = successor(h, ring), successor(src, ring)
    client = next(n for n in range(4) if n not in (h, s))
    c.fail(s)
    with pytest.raises(PeerUnavailable) as exc:
        c.run_op(client, "rename", a, b)
    assert exc.value.node == s
    assert b in files_of(c.fs[h]) and a not in files_of(c.fs[h])  # committed, not rolled back
    c.down.discard(s)
    to = next(n for n in ring if n not in (src, s_src))
    c.fail(s_src)
    with pytest.raises(PeerUnavailable) as exc:
        c.run_op(next(n for n in ring if n not in (s_src, src, to)), "migrate", m, to)
    assert exc.value.node == s_src
    assert m in files_of(c.fs[to]) and m not in files_of(c.fs[src])
    c.down.discard(s_src)
    c.env.run()  # the repairs' back-off ends; then nothing is left to run
    assert all(not node.unsynced for node in c.nodes)
    assert_replicated(c.fs, ring)
    assert files(c.namespace()) == {b: b"", m: b""}
