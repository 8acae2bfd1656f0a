"""Property-based tests of the protocol on the in-memory runtime.

Random operation sequences, from random nodes of random-sized federations
with random hashing and placement, are run both on the federation and on a
single reference tree with POSIX semantics.  Every operation must give the same
result or the same errno, and at the end the namespace seen through the
federation from any node must equal the reference tree.
"""

from __future__ import annotations

import errno

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedsim.direct import DirectCluster
from fedsim.memfs import MemFS
from fedsim.protocol.config import ProtocolConfig
from fedsim.protocol.fedfs.rename import Rename
from fedsim.protocol.messages import HomeInfo

NAMES = ["a", "b", "c"]
# Creations are weighted up so that sequences build trees worth operating on.
OPS = ["mkdir", "mkdir", "mkdir", "create", "create", "create", "unlink", "rmdir", "readdir", "stat"]


class Reference:
    """One POSIX-like tree: path -> None (directory) or bytes (file)."""

    def __init__(self) -> None:
        self.t: dict[str, bytes | None] = {"/": None}

    def _parent_ok(self, path: str) -> None:
        parent = path.rsplit("/", 1)[0] or "/"
        # the first missing or non-directory ancestor decides, as in POSIX
        parts = [p for p in parent.split("/") if p]
        cur = ""
        for part in parts:
            cur += "/" + part
            if cur not in self.t:
                raise OSError(errno.ENOENT, cur)
            if self.t[cur] is not None:
                raise OSError(errno.ENOTDIR, cur)

    def create(self, path: str) -> None:
        self._parent_ok(path)
        if path in self.t:
            raise OSError(errno.EEXIST, path)
        self.t[path] = b""

    def mkdir(self, path: str) -> None:
        self._parent_ok(path)
        if path in self.t:
            raise OSError(errno.EEXIST, path)
        self.t[path] = None

    def _get(self, path: str) -> bytes | None:
        self._parent_ok(path)
        if path not in self.t:
            raise OSError(errno.ENOENT, path)
        return self.t[path]

    def unlink(self, path: str) -> None:
        if self._get(path) is None:
            raise OSError(errno.EISDIR, path)
        del self.t[path]

    def rmdir(self, path: str) -> None:
        if path == "/":
            raise OSError(errno.EBUSY, path)
        if self._get(path) is not None:
            raise OSError(errno.ENOTDIR, path)
        if any(p.startswith(path + "/") for p in self.t):
            raise OSError(errno.ENOTEMPTY, path)
        del self.t[path]

    def readdir(self, path: str) -> list[tuple[str, bool]]:
        if self._get(path) is not None:
            raise OSError(errno.ENOTDIR, path)
        prefix = path if path == "/" else path + "/"
        return sorted(
            (p[len(prefix) :], v is None)
            for p, v in self.t.items()
            if p != path and p.startswith(prefix) and "/" not in p[len(prefix) :]
        )

    def stat(self, path: str) -> tuple[bool, int]:
        v = self._get(path)
        return (True, 0) if v is None else (False, len(v))

    def write(self, path: str, offset: int, data: bytes) -> int:
        v = self._get(path)
        if v is None:
            raise OSError(errno.EISDIR, path)
        buf = bytearray(v)
        if offset > len(buf):
            buf.extend(bytes(offset - len(buf)))
        buf[offset : offset + len(data)] = data
        self.t[path] = bytes(buf)
        return len(data)

    def read(self, path: str, offset: int, size: int) -> bytes:
        v = self._get(path)
        if v is None:
            raise OSError(errno.EISDIR, path)
        return v[offset : offset + size]

    def truncate(self, path: str, size: int) -> None:
        v = self._get(path)
        if v is None:
            raise OSError(errno.EISDIR, path)
        self.t[path] = v[:size] + bytes(max(0, size - len(v)))

    def rename(self, old: str, new: str) -> None:
        """The federation's rename (``rename: 2pc``): POSIX within one directory
        and across directories, of files and of directories; the source is
        checked first (ENOENT, ENOTDIR), then the target's directory (ENOENT,
        ENOTDIR), then the target (onto an ancestor of the source ENOTEMPTY,
        as Linux's VFS answers before any other check; a file onto a directory
        EISDIR; a directory into its own subtree EINVAL, onto a file ENOTDIR,
        onto a non-empty directory ENOTEMPTY)."""
        if "/" in (old, new):
            raise OSError(errno.EBUSY, "/")
        src = self._get(old)
        if old == new:
            return
        if old.startswith(new + "/"):
            raise OSError(errno.ENOTEMPTY, new)
        self._parent_ok(new)
        if src is not None:
            if new in self.t and self.t[new] is None:
                raise OSError(errno.EISDIR, new)
            del self.t[old]
            self.t[new] = src
            return
        if new.startswith(old + "/"):
            raise OSError(errno.EINVAL, new)
        if new in self.t:
            if self.t[new] is not None:
                raise OSError(errno.ENOTDIR, new)
            if any(p.startswith(new + "/") for p in self.t):
                raise OSError(errno.ENOTEMPTY, new)
        moved = {p: v for p, v in self.t.items() if p == old or p.startswith(old + "/")}
        for p in moved:
            del self.t[p]
        self.t.update({new + p[len(old) :]: v for p, v in moved.items()})


def fed_write(c: DirectCluster, node: int, path: str, offset: int, data: bytes) -> int:
    fd = c.op(node, "open", path)
    try:
        return c.op(node, "write", fd, offset, data)
    finally:
        c.op(node, "close", fd)


def fed_read(c: DirectCluster, node: int, path: str, offset: int, size: int) -> bytes:
    fd = c.op(node, "open", path)
    try:
        return c.op(node, "read", fd, offset, size)
    finally:
        c.op(node, "close", fd)


paths = st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=False).map(lambda p: "/" + "/".join(p))
op_strategy = st.one_of(
    st.tuples(st.sampled_from(OPS), paths),
    st.tuples(st.just("write"), paths, st.integers(0, 8), st.binary(min_size=1, max_size=8)),
    st.tuples(st.just("read"), paths, st.integers(0, 8), st.integers(0, 16)),
)
cluster_params = st.fixed_dictionaries(
    {
        "n": st.integers(1, 7),
        "hashing": st.sampled_from(["mod_n", "ring"]),
        "placement": st.sampled_from(["with_manager", "round_robin", "random", "with_requester"]),
        "dt": st.sampled_from([1, 2, 64]),
        "vd": st.sampled_from([1, 2, 64]),
        "bits": st.sampled_from([8, 64, 4096]),
        "seed": st.integers(0, 3),
    }
)
# Pre-existing local data: (node index, path, content) spread over nodes before start.
preexisting = st.lists(st.tuples(st.integers(0, 6), paths, st.binary(max_size=4)), max_size=6)


def build(params: dict, pre: list) -> tuple[DirectCluster, Reference]:
    n = params["n"]
    fss = [MemFS() for _ in range(n)]
    ref = Reference()
    for node, path, content in pre:
        # keep the initial union collision-free and well-formed
        if any(path == q or path.startswith(q + "/") for q, v in ref.t.items() if v is not None):
            continue
        if any(q.startswith(path + "/") for q in ref.t) or path in ref.t:
            continue
        fs = fss[node % n]
        fs.create(path)
        fs.write(path, 0, content)
        parts = [p for p in path.split("/") if p]
        for i in range(1, len(parts)):
            ref.t["/" + "/".join(parts[:i])] = None
        ref.t[path] = content
    cfg = ProtocolConfig(
        dt_entries=params["dt"], vd_entries=params["vd"], summary_bits=params["bits"], summary_hashes=2
    )
    c = DirectCluster(
        n, hashing=params["hashing"], placement=params["placement"], config=cfg, seed=params["seed"], local=fss
    )
    return c, ref


def outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except OSError as e:
        return ("err", e.errno)


@settings(max_examples=400, deadline=None)
@given(cluster_params, preexisting, st.lists(st.tuples(st.integers(0, 6), op_strategy), min_size=5, max_size=60))
def test_federated_namespace_equals_a_single_reference_tree(params, pre, ops):
    c, ref = build(params, pre)
    n = params["n"]
    for who, op in ops:
        node = who % n
        name, path, *rest = op
        if name == "write":
            got = outcome(fed_write, c, node, path, *rest)
            want = outcome(ref.write, path, *rest)
        elif name == "read":
            got = outcome(fed_read, c, node, path, *rest)
            want = outcome(ref.read, path, *rest)
        else:
            got = outcome(c.op, node, name, path)
            if name in ("stat",) and got[0] == "ok":
                got = ("ok", tuple(got[1]))
            want = outcome(getattr(ref, name), path)
            if name in ("create", "mkdir") and want[0] == "ok":
                got = ("ok", None) if got[0] == "ok" else got
        assert got == want, f"{name} {path} {rest} at node {node}: federation {got}, reference {want}"
    for viewer in range(n):
        assert c.walk(viewer) == ref.t
    # the local trees hold exactly the namespace (no federation metadata, nothing lost)
    assert c.namespace() == ref.t


LOOKUP_OPS = ("stat", "unlink")


@settings(max_examples=200, deadline=None)
@given(cluster_params, st.lists(st.tuples(st.integers(0, 6), op_strategy), max_size=40))
def test_every_lookup_outside_dirmerge_involves_at_most_three_other_nodes(params, ops):
    """FedFS's claim (Federated DAFS IV-A): the file's manager, the home and
    the parent's manager, whatever the cluster size (for lookups that find the
    file; telling ENOENT from ENOTDIR for a deep missing path asks ancestors).  A stale entry in the
    requester's own DT (FedFS 3.2's lazy invalidation) adds the old home."""
    c, _ = build(params, [])
    n = params["n"]
    for who, op in ops:
        node = who % n
        name, path = op[0], op[1]
        if name in ("create", "mkdir"):
            outcome(c.op, node, name, path)
            continue
        if name not in LOOKUP_OPS:
            continue
        mark = len(c.trace)
        stale_before = c.nodes[node].stats.stale_retries
        if outcome(c.op, node, name, path)[0] != "ok":
            continue  # a missing ancestor is found by walking up the managers: not a lookup
        others = {dst for src, dst, kind in c.messages_since(mark) if kind != "ReadDir" and dst != node}
        stale = c.nodes[node].stats.stale_retries - stale_before
        assert len(others) <= 3 + stale, (name, path, c.messages_since(mark))


def test_dirmerge_asks_only_nodes_whose_summary_may_hold_the_directory():
    fss = [MemFS() for _ in range(8)]
    fss[2].mkdir("/shared/x")
    fss[5].mkdir("/shared/y")
    fss[5].create("/shared/y/f")
    c = DirectCluster(8, local=fss, config=ProtocolConfig(summary_bits=1 << 16, summary_hashes=4))
    mark = len(c.trace)
    assert c.op(0, "readdir", "/shared") == [("x", True), ("y", True)]
    asked = {dst for _, dst, kind in c.messages_since(mark) if kind == "ReadDir"}
    m = c.nodes[0].manager_of("/shared")
    assert asked == {2, 5} - {m}
    # merged once: the second readdir is served from the cached VD
    mark = len(c.trace)
    c.op(3, "readdir", "/shared")
    assert not [k for _, _, k in c.messages_since(mark) if k == "ReadDir"]


def test_a_name_on_two_nodes_resolves_to_the_lowest_node_and_is_reported():
    fss = [MemFS() for _ in range(3)]
    fss[2].create("/dup")
    fss[2].write("/dup", 0, b"two")
    fss[1].create("/dup")
    fss[1].write("/dup", 0, b"one")
    c = DirectCluster(3, local=fss)
    assert fed_read(c, 0, "/dup", 0, 10) == b"one"
    m = c.nodes[0].manager_of("/")
    assert c.nodes[m].vds.peek("/").collisions == {"dup": [1, 2]}


def test_stale_directory_table_entry_is_dropped_and_the_manager_asked_again():
    c = DirectCluster(4, placement="round_robin")
    c.op(0, "create", "/f")
    fed_write(c, 0, "/f", 0, b"old")
    manager = c.nodes[0].manager_of("/f")
    old_home = c.nodes[manager].dt.peek("/f").home
    reader = next(n for n in range(4) if n not in (manager, old_home))
    assert c.op(reader, "stat", "/f") == (False, 3)  # the reader now caches /f's home
    writer = next(n for n in range(4) if n not in (reader,))
    c.op(writer, "unlink", "/f")
    c.op(writer, "create", "/f")  # round robin at the manager: a different home
    assert c.nodes[manager].dt.peek("/f").home != old_home
    fed_write(c, writer, "/f", 0, b"newer")
    before = c.nodes[reader].stats.stale_retries
    assert tuple(c.op(reader, "stat", "/f")) == (False, 5)
    assert c.nodes[reader].stats.stale_retries == before + 1


# Renames within a directory (a sibling name: the common case) and between any two paths
# (across directories, by two-phase commit), among creations, writes, unlinks and truncations.
rename_strategy = st.one_of(
    st.tuples(st.just("rename"), paths, st.sampled_from(NAMES)).map(
        lambda t: ("rename", t[1], (t[1].rsplit("/", 1)[0] or "") + "/" + t[2])
    ),
    st.tuples(st.just("rename"), paths, paths),
    st.tuples(st.just("truncate"), paths, st.integers(0, 6)),
)
RENAME_MIX = st.one_of(op_strategy, rename_strategy, rename_strategy)


def check_no_trace_and_exact_tables(c: DirectCluster, ref: Reference) -> None:
    """No rename left a mark, gate or flight behind, and every manager's DT
    entry for a name it manages is exact (a file's entry names a node holding it)."""
    for node in c.nodes:
        assert not node.rename_marks and not node.gates and not node.renames and not node.dir_freezes, node.id
        for p in node.dt.keys():
            if node.manager_of(p) != node.id:
                continue  # a requester's cache: may be stale by design
            e = node.dt.peek(p)
            assert p in ref.t, (node.id, p, e)
            assert e.is_dir == (ref.t[p] is None), (node.id, p, e)
            if not e.is_dir:
                assert c.fs[e.home].tree().get(p) == ref.t[p], (node.id, p, e)


@settings(max_examples=300, deadline=None)
@given(cluster_params, preexisting, st.lists(st.tuples(st.integers(0, 6), RENAME_MIX), min_size=5, max_size=60))
def test_renames_keep_the_namespace_exact(params, pre, ops):
    """Random sequences with renames (targets existing on the source's home,
    on another node, absent; errors) match the reference step by step; at the
    end every view, the local trees and the managers' tables agree with it."""
    c, ref = build(params, pre)
    n = params["n"]
    for who, op in ops:
        node = who % n
        name, path, *rest = op
        if name == "write":
            got = outcome(fed_write, c, node, path, *rest)
            want = outcome(ref.write, path, *rest)
        elif name == "read":
            got = outcome(fed_read, c, node, path, *rest)
            want = outcome(ref.read, path, *rest)
        else:
            got = outcome(c.op, node, name, path, *rest)
            if got[0] == "ok":
                got = ("ok", tuple(got[1]) if name in ("stat", "readdir") else None)
            want = outcome(getattr(ref, name), path, *rest)
            if want[0] == "ok":
                want = ("ok", tuple(want[1]) if name in ("stat", "readdir") else None)
        assert got == want, f"{name} {path} {rest} at node {node}: federation {got}, reference {want}"
    for viewer in range(n):
        assert c.walk(viewer) == ref.t
    assert c.namespace() == ref.t
    check_no_trace_and_exact_tables(c, ref)


def test_a_rename_that_fails_before_its_commit_point_leaves_no_trace():
    """An open source (EBUSY at its home) and an unreachable target home
    (PeerUnavailable) abort after the target's manager marked it: the mark and
    the gates are rolled back, both files are intact, and the next rename works."""
    c = DirectCluster(5, placement="round_robin")
    c.op(0, "mkdir", "/d")
    for i in range(5):
        c.op(i, "create", f"/d/f{i}")
        fed_write(c, i, f"/d/f{i}", 0, f"file {i}".encode())
    homes = {f: c.nodes[c.nodes[0].manager_of(f)].dt.peek(f).home for f in ("/d/f0", "/d/f1")}
    assert homes["/d/f0"] != homes["/d/f1"]
    fd = c.op(3, "open", "/d/f0")
    mark = len(c.trace)
    assert outcome(c.op, 2, "rename", "/d/f0", "/d/f1") == ("err", errno.EBUSY)
    assert "RenameUncheck" in [k for _, _, k in c.messages_since(mark)]
    c.op(3, "close", fd)
    c.down.add(homes["/d/f1"])
    assert outcome(c.op, 2, "rename", "/d/f0", "/d/f1") == ("err", errno.EHOSTDOWN)
    c.down.clear()
    # The unanswered step may have marked or gated the target (its reply
    # lost): its rollback is retried in the background, the directory's
    # rename in flight at its manager until it got through (``Renaming._tell``).
    assert c.nodes[c.nodes[0].manager_of("/d")].renames
    mark = len(c.trace)
    c.advance(1.0)
    retried = [kind for _, dst, kind in c.messages_since(mark) if dst == homes["/d/f1"]]
    assert retried in (["RenameUncheck"], ["RenameDrop"])
    for node in c.nodes:
        assert not node.rename_marks and not node.gates and not node.renames
    assert fed_read(c, 4, "/d/f0", 0, 10) == b"file 0"
    assert fed_read(c, 4, "/d/f1", 0, 10) == b"file 1"
    c.op(1, "rename", "/d/f0", "/d/f1")
    assert fed_read(c, 4, "/d/f1", 0, 10) == b"file 0"
    assert [name for name, _ in c.op(0, "readdir", "/d")] == ["f1", "f2", "f3", "f4"]
    assert c.namespace()["/d/f1"] == b"file 0" and "/d/f0" not in c.namespace()



def test_a_directory_rename_that_fails_before_its_commit_point_leaves_no_trace():
    """A directory rename freezes both subtrees at every member (issue 24):
    an open file under it (EBUSY) and a member that does not answer its
    prepare (EHOSTDOWN) undo every freeze, the unanswered one retried in
    the background; nothing moved; then the rename goes through, no file
    changes home, and every name under the old path is gone everywhere."""
    c = DirectCluster(5)
    c.op(0, "mkdir", "/d")
    c.op(1, "mkdir", "/d/s")
    c.op(2, "mkdir", "/e")
    for i in range(5):
        c.op(i, "create", f"/d/s/f{i}")
        fed_write(c, i, f"/d/s/f{i}", 0, f"file {i}".encode())
    before = {p: v for p, v in c.namespace().items() if p.startswith("/d/")}
    homes = {i: [n for n in range(5) if f"/d/s/f{i}" in c.fs[n].tree()] for i in range(5)}
    fd = c.op(3, "open", "/d/s/f1")
    assert outcome(c.op, 2, "rename", "/d", "/e/d") == ("err", errno.EBUSY)
    c.op(3, "close", fd)
    c.down.add(4)
    assert outcome(c.op, 2, "rename", "/d", "/e/d") == ("err", errno.EHOSTDOWN)
    c.down.clear()
    c.advance(1.0)  # (the unanswered prepare's rollback, retried)
    for node in c.nodes:
        assert not node.dir_freezes and not node.renames, node.id
    assert {p: v for p, v in c.namespace().items() if p.startswith("/d/")} == before
    c.op(1, "rename", "/d", "/e/d")
    ns = c.namespace()
    assert not [p for p in ns if p.startswith("/d")]
    assert {p[len("/e") :]: v for p, v in ns.items() if p.startswith("/e/d/")} == before
    assert {i: [n for n in range(5) if f"/e/d/s/f{i}" in c.fs[n].tree()] for i in range(5)} == homes
    for viewer in range(5):
        assert outcome(c.op, viewer, "stat", "/d/s/f0") == ("err", errno.ENOENT)
        assert fed_read(c, viewer, "/e/d/s/f3", 0, 10) == b"file 3"
        assert c.op(viewer, "readdir", "/e") == [("d", True)]
    assert c.walk(0) == ns


def test_a_directory_rename_whose_coordinator_leaves_is_run_on_by_it():
    """Recovery as for a file rename: a coordinator that leaves the view
    between the phases releases its freezes at every member
    (``renames_orphaned``), and as a graceful leaver runs its rename on:
    the finishes it sends still rename (``dir_released``)."""
    c = DirectCluster(5)
    c.op(0, "mkdir", "/d")
    for i in range(5):
        c.op(i, "create", f"/d/f{i}")
    coordinator = c.nodes[0].manager_of("/")
    rename = c.nodes[coordinator].on_rename(coordinator, Rename("/d", "/g"))
    state, step = _step(c, coordinator, rename, stop=lambda e: "DirRenameFinish" in repr(e))
    assert state == "paused"  # committed, no finish sent to another member yet: they are frozen
    assert all(node.dir_freezes for node in c.nodes if node.id != coordinator)
    for node in c.nodes:
        if node.id != coordinator:
            list(node.renames_orphaned({coordinator}))  # (a generator: nothing to spawn without copies)
            assert not node.dir_freezes and node.dir_released
    assert _step(c, coordinator, rename, c._perform(coordinator, step))[0] == "done"
    ns = c.namespace()
    assert sorted(p for p in ns if p.startswith("/g/")) == [f"/g/f{i}" for i in range(5)]
    assert not [p for p in ns if p.startswith("/d")]
    assert not any(node.dir_released for node in c.nodes)

def _rename_roles(n: int = 5) -> tuple[str, str, int, int, int, int]:
    """(source, target, PM, M_b, H_a, H_b): names in /d whose directory's and
    target's managers differ, and two homes that are neither."""
    c = DirectCluster(n)
    pm = c.nodes[0].manager_of("/d")
    candidates = [*NAMES, "x", "y", "z", "u", "v", "w"]
    for a in candidates:
        for b in candidates:
            m_b = c.nodes[0].manager_of(f"/d/{b}")
            if a != b and m_b != pm:
                h_a, h_b = [h for h in range(n) if h not in (pm, m_b)][:2]
                return f"/d/{a}", f"/d/{b}", pm, m_b, h_a, h_b
    raise AssertionError("no such names")


def _step(c: DirectCluster, node: int, gen, value=None, stop=lambda eff: False):
    """Drive a protocol generator on ``node`` until it yields an effect ``stop``
    accepts (returned unperformed, with the generator) or returns (its value)."""
    exc = None
    while True:
        try:
            eff = gen.throw(exc) if exc is not None else gen.send(value)
        except StopIteration as s:
            return ("done", s.value)
        if stop(eff):
            return ("paused", eff)
        value, exc = None, None
        try:
            value = c._perform(node, eff)
        except Exception as e:
            exc = e


def test_a_lookup_answered_before_a_rename_does_not_overwrite_what_the_rename_set():
    """The target's manager asks the parent's manager (its DT entry was
    evicted); the answer, the old target's home, travels while the rename
    commits.  It is returned (the lookup is linearised before the rename) but
    not cached: the manager's DT keeps the rename's entry (``dt_epoch``)."""
    src, dst, pm, m_b, h_a, h_b = _rename_roles()
    fss = [MemFS() for _ in range(5)]
    fss[h_a].create(src)
    fss[h_a].write(src, 0, b"moved")
    fss[h_b].create(dst)
    c = DirectCluster(5, local=fss)
    assert c.op(m_b, "stat", dst) == (False, 0)
    c.nodes[m_b].dt.pop(dst)  # evicted
    lookup = c.nodes[m_b].resolve(dst, check_dt=True)
    state, eff = _step(c, m_b, lookup, stop=lambda e: type(e).__name__ == "Call")
    assert state == "paused" and eff.node == pm and eff.request.kind == "GetEntry"
    answer = c._perform(m_b, eff)  # answered now, delivered after the rename
    c.op(h_b, "rename", src, dst)
    assert c.nodes[m_b].dt.peek(dst).home == h_a
    assert _step(c, m_b, lookup, answer) == ("done", (False, h_b, 3))
    assert c.nodes[m_b].dt.peek(dst).home == h_a  # not overwritten by the older answer
    assert fed_read(c, 0, dst, 0, 10) == b"moved"


def test_a_create_of_the_target_racing_a_rename_is_told_to_try_again():
    """A create of the (absent) target asked the parent's manager before the
    rename marked the name, and resumes while the rename is prepared: EAGAIN,
    not a second file of that name; after the rename it is EEXIST."""
    src, dst, pm, m_b, h_a, _ = _rename_roles()
    fss = [MemFS() for _ in range(5)]
    fss[h_a].create(src)
    c = DirectCluster(5, local=fss)
    create = c.nodes[m_b].on_home_info(m_b, HomeInfo(dst, "file"))
    state, eff = _step(c, m_b, create, stop=lambda e: type(e).__name__ == "Call")
    assert state == "paused" and eff.request.kind == "GetEntry"
    answer = c._perform(m_b, eff)  # None: absent
    rename = c.nodes[pm].on_rename(h_a, Rename(src, dst))
    is_prepare = lambda e: type(e).__name__ == "Call" and e.request.kind == "RenamePrepare"  # noqa: E731
    state, prepare = _step(c, pm, rename, stop=is_prepare)
    assert state == "paused" and dst in c.nodes[m_b].rename_marks
    with pytest.raises(BlockingIOError):
        _step(c, m_b, create, answer)
    assert _step(c, pm, rename, c._perform(pm, prepare))[0] == "done"
    assert outcome(c.op, 0, "create", dst) == ("err", errno.EEXIST)
    assert c.namespace()[dst] == b"" and src not in c.namespace()
    assert sum(dst in fs.tree() for fs in fss) == 1


@pytest.mark.parametrize("n", [1, 3])
def test_a_rename_onto_an_ancestor_of_its_source_is_enotempty(n):
    """Found by the property above in CI (its random examples): ``rename /a/a /a`` answered
    EAGAIN, for good: the coordinator held /a, the source's directory, and its own prepare
    found that hold under the target.  Linux answers ENOTEMPTY (the target holds the source)
    for a directory and a file alike, once the source is found."""
    params = {"n": n, "hashing": "mod_n", "placement": "with_manager", "dt": 1, "vd": 1, "bits": 8, "seed": 0}
    c, ref = build(params, [])
    for op in [("mkdir", "/a"), ("mkdir", "/a/a"), ("create", "/a/a/f"), ("rename", "/a/a", "/a"),
               ("rename", "/a/a/f", "/a"), ("rename", "/a/a/f", "/a/a"), ("rename", "/a/zz", "/a")]:  # fmt: skip
        got, want = outcome(c.op, 0, *op), outcome(getattr(ref, op[0]), *op[1:])
        assert got[0] == want[0] and (got[0] == "ok" or got[1] == want[1]), (op, got, want)
    assert [outcome(c.op, 0, "rename", o, "/a")[1] for o in ("/a/a", "/a/a/f")] == [errno.ENOTEMPTY] * 2
    assert outcome(c.op, 0, "rename", "/a/zz", "/a")[1] == errno.ENOENT
    assert c.walk(0) == ref.t
