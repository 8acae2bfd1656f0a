"""``readdir_attrs`` (issue 23): a directory's entries with getattr's
attributes in two round trips of the requester, whatever their number.

In the in-memory runtime (its message trace is exact): the listing at the
directory's manager, then one ``EntryAttrs`` per node, all in one multicast
(more than ``ATTR_BATCH`` names at a node: several, in the same multicast);
every entry's attributes equal its ``getattr``; the errors (ENOENT, ENOTDIR);
a name removed between the listing and the fetch left out; a name busy at
its home (a rename's gate) asked again by name; a home that is down leaves
its files listed with no attributes; garbled batches refused.  Then once on
real agents (TCP), against ``os.stat`` of the local files.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from fednode.client import Client
from fednode.cluster import ProcessCluster, write_local
from fedsim.direct import DirectCluster
from fedsim.memfs import MemFS
from fedsim.protocol.attrs import KEEP, UTIME_OMIT, file_ino
from fedsim.protocol.fedfs import attributes
from fedsim.protocol.fedfs.attributes import (
    ATTR_BATCH,
    ATTR_BATCH_BYTES,
    EntryAttrs,
    name_batches,
    pack_names,
    unpack_names,
)
from fedsim.protocol.messages import ProtocolError, pack


def _fed(n: int = 4, files: int = 40) -> DirectCluster:
    """``n`` nodes; /d with ``files`` files spread over every node (round robin) and two subdirectories."""
    c = DirectCluster(n, placement="round_robin")
    c.op(0, "mkdir", "/d")
    for i in range(files):
        c.op(i % n, "create", f"/d/f{i:03d}")
    c.op(1, "mkdir", "/d/s1")
    c.op(2, "mkdir", "/d/s2")
    return c


def _kinds(c: DirectCluster, mark: int) -> Counter[str]:
    return Counter(kind for _, _, kind in c.messages_since(mark) if kind != "reply")


def test_every_entry_has_its_getattr_in_two_round_trips() -> None:
    c = _fed()
    mark = len(c.trace)
    got = c.op(3, "readdir_attrs", "/d")
    kinds = _kinds(c, mark)
    # one listing, and one batch to each node but the requester (its own part takes no message)
    assert kinds == {"ListHomes": 1, "EntryAttrs": 3}, kinds
    assert [n for n, _, _ in got] == [n for n, _ in c.op(0, "readdir", "/d")]
    for name, is_dir, attr in got:
        assert tuple(attr) == tuple(c.op(1, "getattr", f"/d/{name}")), name
        assert is_dir == attr[0] == name.startswith("s")


def test_a_directorys_attributes_follow_getattrs_rule_not_an_implicit_copy() -> None:
    """/d/s is node 3's (chmod 700); a file created in it with a lower home
    makes an implicit copy there (mode 755): the listing still gives node
    3's attributes, as getattr does."""
    local = [MemFS() for _ in range(4)]
    local[3].mkdir("/d/s")
    c = DirectCluster(4, local=local)
    c.op(0, "setattr", "/d/s", 0o700, KEEP, KEEP, UTIME_OMIT, UTIME_OMIT)
    name = next(f"/d/s/x{i}" for i in range(500) if c.nodes[0].manager_of(f"/d/s/x{i}") < 3)
    home = c.op(1, "create", name)  # with_manager: home < 3, which makes /d/s there (implicit)
    assert home < 3 and local[home].stat("/d/s")[0] and local[home].getattr("/d/s")[1] & 0o777 == 0o755
    (entry,) = c.op(2, "readdir_attrs", "/d")
    assert entry[0] == "s" and entry[1] and entry[2][1] & 0o777 == 0o700
    assert tuple(entry[2]) == tuple(c.op(0, "getattr", "/d/s"))


def test_errors_of_the_directory_itself() -> None:
    c = _fed(files=4)
    with pytest.raises(FileNotFoundError):
        c.op(0, "readdir_attrs", "/none")
    with pytest.raises(NotADirectoryError):
        c.op(0, "readdir_attrs", "/d/f000")
    with pytest.raises(FileNotFoundError):
        c.op(0, "readdir_attrs", "/none/deeper")
    assert c.op(2, "readdir_attrs", "/d/s1") == []


def test_a_name_removed_after_the_listing_is_left_out() -> None:
    """The manager's VD still lists the file (it was removed in its home's
    local tree, behind the federation's back): its home answers ENOENT and the
    listing leaves it out, as a local readdir would not list it."""
    c = _fed(files=8)
    c.op(0, "readdir", "/d")  # the VD is cached at /d's manager
    home = c.op(0, "create", "/d/gone")
    c.fs[home].unlink("/d/gone")
    assert "gone" in [n for n, _ in c.op(1, "readdir", "/d")]
    names = [n for n, _, _ in c.op(1, "readdir_attrs", "/d")]
    assert "gone" not in names and "f000" in names


def test_a_name_busy_at_its_home_is_asked_again_by_name() -> None:
    """A gated name (a rename in flight) answers EAGAIN in the batch; the
    requester then asks ``getattr``, which waits the gate out."""
    c = _fed(files=4)
    home = c.op(0, "create", "/d/busy")
    node = c.nodes[home]
    node.gates.add("/d/busy")
    calls = 0
    real = node.listed_attr

    def gated_once(path: str):  # the gate opens after the batch asked (as a rename ends)
        nonlocal calls
        calls += 1
        try:
            return (yield from real(path))
        finally:
            node.gates.discard(path)

    node.listed_attr = gated_once  # type: ignore[method-assign]
    mark = len(c.trace)
    got = {n: a for n, _, a in c.op((home + 1) % 4, "readdir_attrs", "/d")}
    kinds = _kinds(c, mark)
    assert calls >= 1 and kinds["EntryAttrs"] >= 1
    assert 1 <= kinds["GetAttr"] + kinds["PathAttr"] <= 2  # the one name asked again (at its home or manager)
    assert got["busy"] is not None and tuple(got["busy"]) == tuple(c.op(0, "getattr", "/d/busy"))


def test_a_home_that_is_down_leaves_its_files_without_attributes() -> None:
    c = _fed(files=8)
    c.op(0, "readdir", "/d")
    homes = {n: c.op(0, "getattr", f"/d/{n}")[9] >> 48 for n, _ in c.op(0, "readdir", "/d") if n.startswith("f")}
    down = 2
    if c.nodes[0].manager_of("/d") == down:
        down = 3
    c.crash(down)
    got = {n: a for n, _, a in c.op(1, "readdir_attrs", "/d")}
    for name, h in homes.items():
        assert (got[name] is None) == (h - 1 == down), name
    assert got["s1"] is not None and got["s2"] is not None  # (other holders answer for the directories)


def test_batches_are_bounded_and_split(monkeypatch: pytest.MonkeyPatch) -> None:
    names = [f"n{i}" for i in range(2 * ATTR_BATCH + 1)]
    batches = name_batches(names)
    assert [len(b) for b in batches] == [ATTR_BATCH, ATTR_BATCH, 1]
    assert all(len(pack_names(b)) <= ATTR_BATCH_BYTES for b in batches)
    long = ["x" * 255 + str(i) for i in range(400)]  # (too long to be names; the byte bound alone)
    assert all(len(pack_names(b)) <= ATTR_BATCH_BYTES for b in name_batches(long))
    assert sum(map(len, name_batches(long))) == 400
    # a small batch: one node gets several EntryAttrs, in the same multicast, and the answer is whole
    monkeypatch.setattr(attributes, "ATTR_BATCH", 3)
    c = _fed(files=24)
    mark = len(c.trace)
    got = c.op(0, "readdir_attrs", "/d")
    assert len(got) == 26 and all(a is not None for _, _, a in got)
    assert _kinds(c, mark)["EntryAttrs"] > 3


@pytest.mark.parametrize(
    "data",
    [
        pack(["ok", ".."]),
        pack(["a/b"]),
        pack([""]),
        pack(["x\x00y"]),
        pack(["n" * 256]),
        pack([1]),
        pack({"a": 1}),
        pack(["n"] * (ATTR_BATCH + 1)),
        b"\xc1",
        pack(["a" * 200] * 400),
    ],
)
def test_garbled_batches_are_refused_before_any_local_call(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        unpack_names("/d", data)
    c = DirectCluster(2)
    with pytest.raises(ProtocolError):
        c.run(0, c.nodes[0].call(1, EntryAttrs("/", data)))


def test_the_replica_space_is_no_entry() -> None:
    with pytest.raises(ProtocolError):
        unpack_names("/", pack([".fedfs-replicas"]))
    assert unpack_names("/d", pack([".fedfs-replicas", "a"])) == [".fedfs-replicas", "a"]


def test_on_agents_the_attributes_are_the_local_files() -> None:
    """Real agents over TCP: sizes, modes and inode numbers as ``os.stat`` of
    each file at its home gives them, and equal to ``getattr``."""
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        cf = write_local(base, 3)
        with ProcessCluster(cf, log_dir=base / "logs") as pc:
            pc.wait_ready()
            with Client(cf, node=1) as c:
                c.mkdir("/r")
                homes = {f"f{i}": c.write_file(f"/r/f{i}", b"x" * i) for i in range(12)}
                c.mkdir("/r/sub")
                got = c.readdir_attrs("/r")
                assert [n for n, _, _ in got] == sorted([*homes, "sub"])
                for name, is_dir, a in got:
                    assert a == c.getattr(f"/r/{name}")._replace(atime_ns=a.atime_ns)
                    if is_dir:
                        continue
                    st = os.stat(base / f"n{homes[name]}" / "r" / name)
                    assert (a.size, a.mode, a.ino) == (st.st_size, st.st_mode, file_ino(homes[name], st.st_ino))
                with pytest.raises(OSError) as e:
                    c.readdir_attrs("/r/f1")
                assert e.value.errno == errno.ENOTDIR
