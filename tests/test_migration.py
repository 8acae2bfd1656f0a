"""File migration (FedFS 3.2, ``fedsim.protocol.fedfs.migration``) and the
migration policies (``fedsim.protocol.policies.migration``), in the
in-memory runtime and the simulator: a moved file keeps its name and
content, stale DT entries and open descriptors find it, a write during the
copy is not lost (interleavings driven deterministically), a failed move
leaves no trace, and the policies do what they claim on skewed loads."""

from __future__ import annotations

import errno
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedsim.direct import DirectCluster
from fedsim.network import preset
from fedsim.protocol.config import ProtocolConfig
from fedsim.protocol.fedfs.migration import MigrateDone, MigrateRead
from fedsim.protocol.messages import PeerUnavailable
from fedsim.protocol.names import split
from fedsim.protocol.tables import DTEntry
from fedsim.runtime import OpTrace, SimCluster
from tests.test_faults import AGING, fault_plans

CHUNK = 4096
DATA = bytes(range(256)) * 64  # 16 KiB: four chunks


def _cluster(n: int = 4, **protocol: Any) -> DirectCluster:
    return DirectCluster(n, config=ProtocolConfig(migration_chunk=CHUNK, **protocol))


def _make(c: DirectCluster, path: str, data: bytes, at: int = 0) -> int:
    d = split(path)[0]
    if d != "/":
        try:
            c.op(at, "mkdir", d)
        except FileExistsError:
            pass
    home = c.op(at, "create", path)
    fd = c.op(at, "open", path)
    c.op(at, "write", fd, 0, data)
    c.op(at, "close", fd)
    return home


def _read(c: DirectCluster, node: int, path: str) -> bytes:
    fd = c.op(node, "open", path)
    try:
        return c.op(node, "read", fd, 0, 1 << 20)
    finally:
        c.op(node, "close", fd)


def _holders(c: DirectCluster, path: str) -> list[int]:
    return [n for n, fs in enumerate(c.fs) if path in fs.files]


def _state(c: DirectCluster, path: str) -> Any:
    """Everything a move touches: the local trees, the manager's DT entry, the
    parent's cached VD entry, and every node's move bookkeeping."""
    d, name = split(path)
    m, pm = c.nodes[0].manager_of(path), c.nodes[0].manager_of(d)
    vd = c.nodes[pm].vds.peek(d)
    return (
        [fs.tree() for fs in c.fs],
        c.nodes[m].dt.peek(path),
        None if vd is None else vd.entries.get(name),
        [(dict(n.incoming), dict(n.outgoing), set(n.gates), dict(n.renames), +n.opens) for n in c.nodes],
    )


def _other(home: int, n: int = 4) -> int:
    return (home + 1) % n


@contextmanager
def _wrap(c: DirectCluster, node: int, req: type, before: Callable[[Any], None]) -> Iterator[None]:
    """Run ``before(request)`` each time ``node`` serves a ``req``, just
    before its handler: a deterministic interleaving."""
    n = c.nodes[node]
    inner = n._handlers[req]

    def hooked(src: int, r: Any) -> Any:
        before(r)
        return inner(src, r)

    n._handlers[req] = hooked
    try:
        yield
    finally:
        n._handlers[req] = inner


# ---------------------------------------------------------------------------- the mechanism
def test_a_migrated_file_keeps_its_name_and_content_everywhere():
    c = _cluster()
    home = _make(c, "/a/f", DATA)
    to = _other(home)
    before = c.walk(2)
    assert c.op(3, "migrate", "/a/f", to) == 1
    assert _holders(c, "/a/f") == [to]
    for viewer in range(4):
        assert c.walk(viewer) == before
    assert c.op(1, "stat", "/a/f") == (False, len(DATA))
    assert c.nodes[to].migrated_in == 1 and c.nodes[home].migrated_out == 1
    kinds = Counter(k for _, _, k in c.trace)
    assert kinds["MigrateRead"] == len(DATA) // CHUNK  # chunked: one message per chunk
    # nothing of the move stays behind
    assert all(not n.incoming and not n.outgoing and not n.gates and not n.renames for n in c.nodes)


def test_a_stale_dt_entry_and_an_open_descriptor_reach_the_file_on_their_next_access():
    c = _cluster()
    home = _make(c, "/a/f", DATA)
    to = _other(home)
    reader = next(n for n in range(4) if n not in (home, to, c.nodes[0].manager_of("/a/f")))
    assert c.op(reader, "stat", "/a/f") == (False, len(DATA))  # caches /a/f -> home
    assert c.nodes[reader].dt.peek("/a/f").home == home
    fd = c.op(reader, "open", "/a/f")
    assert c.nodes[home].opens["/a/f"] == 1
    c.op(0, "migrate", "/a/f", to)
    assert c.nodes[to].opens["/a/f"] == 1 and not c.nodes[home].opens  # the pin moved with the file
    retries = c.nodes[reader].stats.stale_retries
    assert c.op(reader, "read", fd, 0, 10) == DATA[:10]  # the descriptor followed the file
    assert c.nodes[reader].fds[fd] == ("/a/f", to)
    assert c.nodes[reader].stats.stale_retries == retries + 1
    assert c.op(reader, "write", fd, 0, b"XY") == 2
    c.op(reader, "close", fd)
    assert not c.nodes[to].opens
    # another node's stale DT entry: ESTALE from the old home, asked again, once
    c2 = c.nodes[2 if reader != 2 else 1]
    c2.dt.put("/a/f", DTEntry(False, home))
    assert c.op(c2.id, "stat", "/a/f") == (False, len(DATA))
    assert c2.dt.peek("/a/f").home == to
    assert _read(c, 0, "/a/f") == b"XY" + DATA[2:]


def test_a_descriptor_closed_after_the_move_releases_the_pin_at_the_new_home():
    c = _cluster()
    home = _make(c, "/a/f", DATA)
    to = _other(home)
    fd = c.op(home, "open", "/a/f")  # opened on the home itself
    c.op(1, "migrate", "/a/f", to)
    c.op(home, "close", fd)
    assert not c.nodes[to].opens and not c.nodes[home].opens


def test_a_write_during_the_copy_is_not_lost():
    c = _cluster()
    home = _make(c, "/a/f", DATA)
    to = _other(home)
    writer = next(n for n in range(4) if n not in (home, to))
    fd = c.op(writer, "open", "/a/f")
    reads: list[int] = []

    def write_into_copied_chunk(r: MigrateRead) -> None:
        reads.append(r.offset)
        if len(reads) == 3:  # chunks 0 and 1 are copied: overwrite inside chunk 0, extend the file
            assert c.op(writer, "write", fd, 100, b"NEW") == 3  # served by the source, as ever
            assert c.op(writer, "write", fd, len(DATA), b"TAIL") == 4

    with _wrap(c, home, MigrateRead, write_into_copied_chunk):
        c.op(0, "migrate", "/a/f", to)
    want = DATA[:100] + b"NEW" + DATA[103:] + b"TAIL"
    assert c.fs[to].files["/a/f"] == want
    assert _read(c, 1, "/a/f") == want
    # the frozen re-copy covered the dirty range only: [100, len + 4) -> chunks from 100
    assert reads[:4] == [0, CHUNK, 2 * CHUNK, 3 * CHUNK] and reads[4] == 100
    c.op(writer, "close", fd)


def test_a_truncate_during_the_copy_is_not_lost():
    c = _cluster()
    home = _make(c, "/a/f", DATA)
    to = _other(home)

    def shrink(r: MigrateRead) -> None:
        if r.offset == CHUNK:
            c.op(2, "truncate", "/a/f", 10)

    with _wrap(c, home, MigrateRead, shrink):
        c.op(0, "migrate", "/a/f", to)
    assert _read(c, 3, "/a/f") == DATA[:10]


def test_requests_during_the_switch_are_told_eagain_and_served_after_it():
    """While the source is frozen (between MigrateFreeze and MigrateDone) a
    request for the file is answered EAGAIN and the requester backs off; in
    the in-memory runtime the back-off just moves the clock, so the request
    sees the gate: the move does not leave it failing."""
    c = _cluster()
    home = _make(c, "/a/f", DATA)
    to = _other(home)
    seen: list[Any] = []

    def probe(r: MigrateDone) -> None:
        # frozen at the source, committed at the managers: a direct request to the source is EAGAIN
        from fedsim.protocol.messages import Stat

        try:
            c.run(home, c.nodes[home].handle(1, Stat("/a/f")))
        except OSError as exc:
            seen.append(exc.errno)

    with _wrap(c, home, MigrateDone, probe):
        c.op(0, "migrate", "/a/f", to)
    assert seen == [errno.EAGAIN]


# ---------------------------------------------------------------------------- bad input and failures
def test_migrating_to_the_current_home_a_non_member_or_a_directory_tree():
    c = _cluster()
    home = _make(c, "/t/a", b"a")
    _make(c, "/t/sub/b", b"bb")
    _make(c, "/t/sub/deeper/c", b"ccc")
    assert c.op(0, "migrate", "/t/a", home) == 0  # already there
    with pytest.raises(OSError) as e:
        c.op(0, "migrate", "/t/a", 7)
    assert e.value.errno == errno.EINVAL and "not a member" in str(e.value)
    with pytest.raises(FileNotFoundError):
        c.op(0, "migrate", "/t/none", 1)
    before = c.walk(0)
    files = [p for p, v in before.items() if v is not None]
    moved = sum(1 for p in files if c.nodes[0].manager_of(p) != 3)  # with_manager: each at its manager
    assert c.op(1, "migrate", "/t", 3) == moved
    assert all(_holders(c, p) == [3] for p in files)
    assert c.walk(2) == before
    assert c.op(1, "migrate", "/t", 3) == 0  # the tree is there already


def test_a_target_that_is_down_is_a_clear_error_and_nothing_changes():
    c = _cluster()
    home = _make(c, "/a/f", DATA)
    to = _other(home)
    before = _state(c, "/a/f")
    c.down.add(to)
    with pytest.raises(PeerUnavailable) as e:
        c.op(2, "migrate", "/a/f", to)
    assert e.value.node == to and e.value.errno == errno.EHOSTDOWN
    assert _state(c, "/a/f") == before


def test_a_source_lost_during_the_copy_leaves_no_trace_once_it_is_back():
    c = _cluster()
    home = _make(c, "/a/f", DATA)
    to = _other(home)
    c.op(1, "readdir", "/a")  # the parent's VD cached: part of the state compared
    before = _state(c, "/a/f")

    def crash(r: MigrateRead) -> None:
        if r.offset == CHUNK:
            c.down.add(home)

    with _wrap(c, home, MigrateRead, crash), pytest.raises(PeerUnavailable):
        c.op(2, "migrate", "/a/f", to)
    assert _holders(c, "/a/f") == [home]  # no orphan copy at the target
    assert not c.nodes[to].incoming and not c.nodes[to].gates
    c.down.discard(home)
    c.advance(1.0)  # the abort reaches the source (repair): its note of the move goes
    assert _state(c, "/a/f") == before
    assert _read(c, 3, "/a/f") == DATA


@pytest.mark.parametrize("how", ["unlink", "rename"])
def test_a_name_removed_during_the_copy_leaves_no_trace(how):
    c = _cluster()
    home = _make(c, "/a/f", DATA)
    to = _other(home)

    def remove(r: MigrateRead) -> None:
        if r.offset == CHUNK:
            if how == "unlink":
                c.op(2, "unlink", "/a/f")
            else:
                c.op(2, "rename", "/a/f", "/a/g")

    with _wrap(c, home, MigrateRead, remove), pytest.raises(FileNotFoundError):
        c.op(3, "migrate", "/a/f", to)
    assert _holders(c, "/a/f") == []
    assert all(not n.incoming and not n.outgoing and not n.gates and not n.renames for n in c.nodes)
    if how == "rename":
        assert _holders(c, "/a/g") == [home] and _read(c, 0, "/a/g") == DATA
    assert c.walk(1) == {"/": None, "/a": None, **({"/a/g": DATA} if how == "rename" else {})}


def test_a_target_holding_a_local_file_of_that_name_refuses_and_keeps_both():
    c = _cluster()
    home = _make(c, "/a/f", DATA)
    to = _other(home)
    c.fs[to].create("/a/f")
    c.fs[to].write("/a/f", 0, b"mine")
    before = _state(c, "/a/f")
    with pytest.raises(FileExistsError):
        c.op(2, "migrate", "/a/f", to)
    assert _state(c, "/a/f") == before


# ---------------------------------------------------------------------------- the simulator
def test_in_the_simulator_a_write_racing_the_copy_is_not_lost():
    """Concurrency for real: a writer keeps writing through the whole move
    (each write served by whichever home holds the file then); every write
    it was told succeeded is in the moved file."""
    c = SimCluster(4, network=preset("tcp_loopback"), keep_data=True,
                   protocol=ProtocolConfig(migration_chunk=CHUNK))  # fmt: skip
    c.preload_summaries()
    c.run_op(0, "mkdir", "/a")
    home = c.run_op(0, "create", "/a/f")
    fd0 = c.run_op(0, "open", "/a/f")
    c.run_op(0, "write", fd0, 0, DATA * 4)
    to = _other(home)
    writer = next(n for n in range(4) if n not in (home, to))
    fd = c.run_op(writer, "open", "/a/f")
    done: list[tuple[int, bytes]] = []

    def writes() -> Any:
        for i in range(400):
            data = bytes([65 + i % 26]) * 7
            off = (i * 613) % (len(DATA) * 4)
            try:
                yield from c.call_op(writer, "write", fd, off, data)
                done.append((off, data))
            except OSError:
                pass
            yield c.env.timeout(20.0)

    w = c.env.process(writes())
    trace = OpTrace(log=[])
    mv = c.op(1, "migrate", "/a/f", to, trace=trace)
    c.env.run(until=w)
    c.env.run()
    assert mv.value == 1 and _holders_sim(c, "/a/f") == [to]
    chunks = sum(1 for m in trace.log or [] if m[2] == "MigrateRead")
    assert chunks > len(DATA) * 4 // CHUNK  # the writes dirtied the copy: a range was copied again
    assert c.nodes[writer].stats.stale_retries >= 1  # the descriptor followed the file
    want = bytearray(DATA * 4)
    for off, data in done:
        want[off : off + len(data)] = data
    assert len(done) == 400  # served throughout (EAGAIN waited out)
    assert bytes(c.fs[to].files["/a/f"]) == bytes(want)
    assert c.run_op(writer, "read", fd, 0, 1 << 20) == bytes(want)


def _holders_sim(c: SimCluster, path: str) -> list[int]:
    return [n for n, fs in enumerate(c.fs) if path in fs.files]


# ---------------------------------------------------------------------------- the policies
def _skewed(policy: str, periods: int = 30, n: int = 8, files: int = 48, seed: int = 1, **protocol: Any):
    """A Zipf-skewed stat workload from every node, ``periods`` policy
    periods long; returns the per-period load spread (max/mean of the file
    requests each node served) and the moves per file."""
    import random

    c = DirectCluster(n, config=ProtocolConfig(migration=policy, migration_period_s=1.0, **protocol))
    paths = [f"/d{i % 4}/f{i}" for i in range(files)]
    for d in range(4):
        c.op(0, "mkdir", f"/d{d}")
    for p in paths:
        c.op(0, "create", p)
    rng = random.Random(seed)
    weights = [1 / (i + 1) ** 1.1 for i in range(files)]
    spreads = []
    for _ in range(periods):
        before = [nd.served for nd in c.nodes]
        for _ in range(400):
            c.op(rng.randrange(n), "stat", rng.choices(paths, weights)[0])
        served = [nd.served - b for nd, b in zip(c.nodes, before, strict=True)]
        spreads.append(max(served) / (sum(served) / n))
        c.advance(1.0)
    moves: Counter[str] = Counter()
    for nd in c.nodes:
        moves.update(nd.moves)
    namespace = c.walk(0)
    assert sorted(p for p, v in namespace.items() if v is not None) == sorted(paths)  # none lost or duplicated
    assert all(len(_holders(c, p)) == 1 for p in paths)
    return spreads, moves


def test_load_based_reduces_the_load_spread_of_a_skewed_workload_without_ping_pong():
    none, no_moves = _skewed("none")
    based, moves = _skewed("load_based")
    assert not no_moves
    tail = slice(-10, None)
    assert sum(based[tail]) / 10 < 0.8 * sum(none[tail]) / 10, (none, based)
    assert moves and max(moves.values()) <= 2  # hysteresis: no file goes back and forth
    # without hysteresis and threshold the same policy moves files back and forth more
    _, eager = _skewed("load_based", migration_hysteresis=0, migration_threshold=0.0)
    assert sum(eager.values()) > sum(moves.values()) and max(eager.values()) > max(moves.values())


def test_co_locate_moves_a_file_to_the_node_that_requests_it_most():
    c = DirectCluster(4, config=ProtocolConfig(migration="co_locate", migration_period_s=1.0))
    c.op(0, "mkdir", "/d")
    homes = {p: c.op(0, "create", p) for p in ("/d/mine", "/d/shared")}
    fan = next(n for n in range(4) if n != homes["/d/mine"])
    for i in range(40):
        c.op(fan, "stat", "/d/mine")  # one node asks for it: move it there
        c.op(i % 4, "stat", "/d/shared")  # everyone asks: stays
    c.advance(1.0)
    assert _holders(c, "/d/mine") == [fan]
    assert _holders(c, "/d/shared") == [homes["/d/shared"]]
    c.advance(5.0)  # nothing more to do
    assert sum(sum(n.moves.values()) for n in c.nodes) == 1


def test_a_node_knows_only_the_loads_gossiped_to_it():
    c = DirectCluster(16, config=ProtocolConfig(migration="load_based", migration_fanout=1))
    c.advance(1.0)
    known = [len(n.loads) for n in c.nodes]
    assert all(k >= 1 for k in known) and max(known) < 16  # one round: itself and a gossip or two
    c.advance(20.0)
    assert all(len(n.loads) == 16 for n in c.nodes)  # epidemic: everyone, after a few rounds


def test_a_malformed_load_gossip_is_refused():
    import struct

    from fedsim.protocol.fedfs.migration import LoadGossip

    c = DirectCluster(2)
    for bad in (b"\x00" * 13, b"\x00" * 12 * 65):  # not whole entries; more than a gossip carries
        with pytest.raises(OSError) as e:
            c.run(0, c.nodes[0].handle(1, LoadGossip(1, bad)))
        assert e.value.errno == errno.EINVAL
    entries = [(1, 5, 2.0), (99, 9, 1.0), (0, 9, 7.0), (1, 4, 3.0), (1, 6, float("nan"))]
    c.run(0, c.nodes[0].handle(1, LoadGossip(1, b"".join(struct.pack("<IIf", *e) for e in entries))))
    # a non-member, this node's own load, an older round and NaN are ignored
    assert c.nodes[0].loads == {1: (5, 2.0)}


def test_a_policy_a_researcher_writes_runs_unchanged():
    """One class, registered by name, selected by the config: here every
    node moves its files to node 0 (a policy no one would ship)."""
    from fedsim.protocol.policies.migration import MIGRATIONS

    @MIGRATIONS.register("to_zero")
    class ToZero:
        name = "to_zero"

        def __init__(self, node_id: int, config: ProtocolConfig, seed: int) -> None:
            pass

        def decide(self, view: Any) -> list[tuple[str, int]]:
            return [(p, 0) for p in sorted(view.files) if view.node != 0]

    try:
        c = DirectCluster(4, config=ProtocolConfig(migration="to_zero"))
        c.op(0, "mkdir", "/d")
        paths = [f"/d/f{i}" for i in range(8)]
        for p in paths:
            c.op(1, "create", p)
            c.op(2, "stat", p)
        c.advance(1.0)
        assert all(_holders(c, p) == [0] for p in paths)
    finally:
        MIGRATIONS.remove("to_zero")


# ---------------------------------------------------------------------------- properties
FILES = ["/d/a", "/d/b", "/e/c"]
nodes4 = st.integers(0, 3)
data = st.binary(min_size=1, max_size=6)
migration_ops = st.lists(
    st.one_of(
        st.tuples(st.just("create"), nodes4, st.sampled_from(FILES)),
        st.tuples(st.just("write"), nodes4, st.sampled_from(FILES), st.integers(0, 8), data),
        st.tuples(st.just("unlink"), nodes4, st.sampled_from(FILES)),
        st.tuples(st.just("rename"), nodes4, st.sampled_from(["/d/a", "/d/b"]), st.sampled_from(["/d/a", "/d/b"])),
        st.tuples(st.just("migrate"), nodes4, st.sampled_from([*FILES, "/d", "/"]), nodes4),
        st.tuples(st.just("open"), nodes4, st.sampled_from(FILES)),
        st.tuples(st.just("fdwrite"), nodes4, st.integers(0, 8), data),
        st.tuples(st.just("close"), nodes4),
    ),
    min_size=1,
    max_size=25,
)


def _put(buf: bytearray, off: int, chunk: bytes) -> None:
    if len(buf) < off:
        buf.extend(bytes(off - len(buf)))
    buf[off : off + len(chunk)] = chunk


def _residue(c: DirectCluster) -> list[Any]:
    """Move state left anywhere (none once every move and repair is done)."""
    return [
        (n.id, n.incoming, n.outgoing, n.gates, n.renames, n.switches, n.repairs_pending)
        for n in c.nodes
        if n.incoming or n.outgoing or n.gates or n.renames or n.switches or n.repairs_pending
    ]


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 4), st.sampled_from(["with_manager", "round_robin"]), migration_ops)
def test_random_operations_interleaved_with_migrations_match_the_reference(n, placement, ops):
    """Every operation gives what a plain file system would (migrations
    change nothing a client can see), descriptors included; afterwards the
    namespace equals the reference, seen from every node, and every file is
    in exactly one local tree."""
    c = DirectCluster(n, placement=placement, config=ProtocolConfig(migration_chunk=4, dt_entries=4))
    c.op(0, "mkdir", "/d")
    c.op(0, "mkdir", "/e")
    ref: dict[str, bytearray] = {}
    fds: dict[int, tuple[int, str]] = {}  # node -> (fd, path)
    for op, who, *args in ops:
        node = who % n
        opened = {p for _, p in fds.values()}
        want: Any = None  # the errno expected, None: success
        if op == "create":
            (p,) = args
            want = errno.EEXIST if p in ref else None
            got = _try(c, node, "create", p)[1]
            if want is None:
                ref[p] = bytearray()
        elif op == "write":
            p, off, chunk = args
            want = None if p in ref else errno.ENOENT
            fd, got = _try(c, node, "open", p)
            if got is None:
                got = _try(c, node, "write", fd, off, chunk)[1] or _try(c, node, "close", fd)[1]
            if want is None:
                _put(ref[p], off, chunk)
        elif op == "unlink":
            (p,) = args
            if p in opened:
                continue  # (an unlinked open file is another story)
            want = None if p in ref else errno.ENOENT
            got = _try(c, node, "unlink", p)[1]
            ref.pop(p, None)
        elif op == "rename":
            p, q = args
            if p == q or q in opened:
                continue  # (a target open is replaced and stays open: the story of an unlinked open file)
            want = errno.ENOENT if p not in ref else errno.EBUSY if p in opened else None
            got = _try(c, node, "rename", p, q)[1]
            if want is None:
                ref[q] = ref.pop(p)
        elif op == "migrate":
            p, to = args
            to %= n
            want = None if p in ("/d", "/") or p in ref else errno.ENOENT
            got = _try(c, node, "migrate", p, to)[1]
        elif op == "open":
            (p,) = args
            if node in fds:
                continue
            want = None if p in ref else errno.ENOENT
            fd, got = _try(c, node, "open", p)
            if got is None:
                fds[node] = (fd, p)
        elif op == "fdwrite":
            if node not in fds:
                continue
            off, chunk = args
            fd, p = fds[node]
            got = _try(c, node, "write", fd, off, chunk)[1]
            _put(ref[p], off, chunk)
        else:  # close
            if node not in fds:
                continue
            got = _try(c, node, "close", fds.pop(node)[0])[1]
        assert got == want, f"{op}{tuple(args)} at node {node}: {got} != {want}"
        c.advance(0.001)
    for node, (fd, _) in sorted(fds.items()):
        c.op(node, "close", fd)
    expect = {"/": None, "/d": None, "/e": None, **{p: bytes(v) for p, v in ref.items()}}
    assert c.namespace() == expect
    for viewer in range(n):
        assert c.walk(viewer) == expect
    for p in ref:
        assert len(_holders(c, p)) == 1, p
    assert not _residue(c) and not any(nd.opens for nd in c.nodes)


def _try(c: DirectCluster, node: int, op: str, *args: Any) -> tuple[Any, int | None]:
    """(value, None) or (None, the errno it failed with)."""
    try:
        return c.op(node, op, *args), None
    except OSError as e:
        return None, e.errno


fault_migrations = st.lists(
    st.tuples(st.sampled_from(["migrate", "migrate", "stat", "readdir"]), nodes4, st.sampled_from([*FILES, "/d"]),
              nodes4),
    min_size=1,
    max_size=10,
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 4), fault_migrations, fault_plans(80, 4, [0.001, 5.0]))
def test_migrations_under_message_loss_lose_and_duplicate_no_file(n, script, plan):
    """Lost, late and partitioned messages during migrations: each one
    completes or fails, and once the faults stop and the repairs have run,
    the namespace is what it was (migrations never change it), every file in
    exactly one local tree, seen alike from every node, no move state left."""
    c = DirectCluster(n, config=ProtocolConfig(migration_chunk=4, dt_entries=4, **AGING))
    c.op(0, "mkdir", "/d")
    c.op(0, "mkdir", "/e")
    contents = {p: p.encode() * 3 for p in FILES}
    for p, v in contents.items():
        c.op(1 % n, "create", p)
        fd = c.op(1 % n, "open", p)
        c.op(1 % n, "write", fd, 0, v)
        c.op(1 % n, "close", fd)
    expect = c.namespace()
    injector = c.inject(plan)
    for op, who, p, to in script:
        try:
            if op == "migrate":
                c.op(who % n, "migrate", p, to % n)
            else:
                c.op(who % n, op, p)
        except OSError:
            pass
    c.heal()
    c.advance(30.0)  # late messages arrive, repairs get through, cached VDs age out
    why = injector.describe()
    assert c.namespace() == expect, why
    for p in FILES:
        assert len(_holders(c, p)) == 1, f"{p} in {_holders(c, p)}; {why}"
    assert not _residue(c), f"{_residue(c)}; {why}"
    for viewer in range(n):
        assert c.walk(viewer) == expect, why


def test_status_shows_a_move_in_flight_at_both_ends():
    c = _cluster()
    home = _make(c, "/a/f", DATA)
    to = _other(home)
    seen: list[tuple[Any, Any]] = []

    def look(r: MigrateRead) -> None:
        if r.offset == 0:
            seen.append((c.nodes[to].describe()["migrations_in"], c.nodes[home].describe()["migrations_out"]))

    with _wrap(c, home, MigrateRead, look):
        c.op(2, "migrate", "/a/f", to)
    assert seen == [([["/a/f", home]], [["/a/f", to]])]
    st = c.nodes[to].describe()
    assert st["migrations_in"] == [] and st["migrated_in"] == 1 and st["migration_policy"] == "none"


def test_a_migrated_file_keeps_its_permissions_and_times_even_when_changed_during_the_copy():
    """The target sets the attributes the source had once gated: a chmod or
    utimens made while the copy ran moves with the file, and the copy's own
    writes do not stamp a new mtime on it."""
    from fedsim.protocol.attrs import KEEP, UTIME_OMIT, Attr

    c = _cluster()
    home = _make(c, "/a/f", b"x" * (5 * CHUNK))
    c.op(1, "setattr", "/a/f", 0o640, KEEP, KEEP, 10**18, 2 * 10**18)
    to = _other(home)
    changed = []

    def chmod_once(r: Any) -> None:
        if not changed:  # between two chunks of the copy
            changed.append(True)
            c.op(2, "setattr", "/a/f", 0o600, KEEP, KEEP, UTIME_OMIT, 3 * 10**18)

    with _wrap(c, home, MigrateRead, chmod_once):
        c.op(0, "migrate", "/a/f", to)
    assert changed and _holders(c, "/a/f") == [to]
    a = Attr(*c.op(3, "getattr", "/a/f"))
    assert (a.mode & 0o7777, a.atime_ns, a.mtime_ns) == (0o600, 10**18, 3 * 10**18)
    assert _read(c, 1, "/a/f") == b"x" * (5 * CHUNK)


def test_a_move_to_the_parents_manager_whose_vd_is_not_cached_commits():
    """The target also manages the file's directory and has no VD of it
    cached: its switch merges the directory and must not see its own copy,
    still arriving, as an entry (it did: a collision the target won by its
    lower id, and the switch answered ENOENT, "no file of that name")."""
    c = _cluster()
    d = next(f"/d{i}" for i in range(64) if c.nodes[0].manager_of(f"/d{i}") == 0)
    path = next(f"{d}/f{i}" for i in range(64) if c.nodes[0].manager_of(f"{d}/f{i}") == 3)
    assert _make(c, path, DATA, at=3) == 3  # with_manager: homed at node 3, its directory managed by node 0
    c.nodes[0].vds.pop(d)
    assert c.op(1, "migrate", path, 0) == 1
    assert _holders(c, path) == [0] and _read(c, 2, path) == DATA
    assert c.walk(1) == c.namespace()


def test_migrating_a_removed_file_to_the_home_a_stale_entry_names_is_enoent():
    """Found by the random property above (pinned): node 1's DT still names node 0 as
    the home of /d/b after node 0 unlinked it; a migration to node 0 answered "already
    there" (0 files moved) for a file that no longer exists.  It asks the home first."""
    c = DirectCluster(2, placement="with_manager", config=ProtocolConfig(migration_chunk=4, dt_entries=4))
    c.op(0, "mkdir", "/d")
    assert _try(c, 0, "create", "/d/b")[1] is None
    fd, err = _try(c, 1, "open", "/d/b")  # node 1 caches /d/b -> node 0
    assert err is None and _try(c, 1, "close", fd)[1] is None
    assert _try(c, 0, "unlink", "/d/b")[1] is None
    assert _try(c, 1, "migrate", "/d/b", 0)[1] == errno.ENOENT
    assert _try(c, 1, "stat", "/d/b")[1] == errno.ENOENT
    # a file that is there is still "already there": nothing moves
    assert _try(c, 0, "create", "/d/c")[1] is None
    assert _try(c, 1, "stat", "/d/c")[1] is None
    assert _try(c, 1, "migrate", "/d/c", 0) == (0, None)
