"""Open files unlinked or renamed over while open (issue 22, ``fedsim/protocol/fedfs/home.py``):
the protocol's orphans, on the in-memory runtime.

A random sequence of opens, writes, reads, unlinks, renames (onto open files too), creates and
closes from every node runs beside a reference in which a descriptor holds its file, not its name
(a local file system's semantics); every result agrees, and once every descriptor is closed no
node keeps an orphan, a pin or an orphan space.  Then what a peer's request may and may not do:
only a node holding an orphan reaches it, and a node's pins at a home are bounded.
"""

from __future__ import annotations

import errno
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedsim.direct import DirectCluster
from fedsim.protocol.fedfs import home as home_module
from fedsim.protocol.fedfs.home import OrphanClose, OrphanRead
from fedsim.protocol.names import ORPHAN_ROOT, is_reserved

NAMES = ("/d/a", "/d/b")
SLOTS = 4


def _outcome(fn: Any, *args: Any) -> tuple[str, Any]:
    try:
        return "ok", fn(*args)
    except OSError as e:
        return "err", e.errno


class _Reference:
    """Names -> files, descriptors -> files: a file lives while a name or a descriptor holds it."""

    def __init__(self) -> None:
        self.names: dict[str, bytearray] = {}
        self.fds: dict[int, bytearray] = {}

    def is_open(self, path: str) -> bool:
        f = self.names.get(path)
        return f is not None and any(g is f for g in self.fds.values())


ops = st.lists(
    st.one_of(
        st.tuples(st.just("create"), st.integers(0, 3), st.sampled_from(NAMES)),
        st.tuples(st.just("open"), st.integers(0, 3), st.sampled_from(NAMES), st.integers(0, SLOTS - 1)),
        st.tuples(st.just("unlink"), st.integers(0, 3), st.sampled_from(NAMES)),
        st.tuples(st.just("rename"), st.integers(0, 3), st.sampled_from(NAMES), st.sampled_from(NAMES)),
        st.tuples(st.just("write"), st.integers(0, SLOTS - 1), st.integers(0, 6), st.binary(min_size=1, max_size=4)),
        st.tuples(st.just("read"), st.integers(0, SLOTS - 1)),
        st.tuples(st.just("truncate"), st.integers(0, SLOTS - 1), st.integers(0, 6)),
        st.tuples(st.just("close"), st.integers(0, SLOTS - 1)),
    ),
    min_size=4,
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(st.integers(2, 4), st.sampled_from(["with_manager", "round_robin"]), ops)
def test_descriptors_hold_their_file_not_its_name(n: int, placement: str, script: list[tuple[Any, ...]]) -> None:
    c = DirectCluster(n, placement=placement)
    c.op(0, "mkdir", "/d")
    ref = _Reference()
    fds: dict[int, tuple[int, int]] = {}  # slot -> (node, the federation's descriptor)
    # every name made and open at the start (at two nodes): the script's unlinks and renames meet open files
    start = [("create", i, p) for i, p in enumerate(NAMES)] + [("open", i + 1, p, i) for i, p in enumerate(NAMES)]
    for op, *args in start + script:
        if op == "create":
            node, p = args
            got = _outcome(c.op, node % n, "create", p)[0]
            want = "err" if p in ref.names else "ok"
            if want == "ok":
                ref.names[p] = bytearray()
        elif op == "open":
            node, p, slot = args
            if slot in fds:
                continue
            got, fd = _outcome(c.op, node % n, "open", p)
            want = "ok" if p in ref.names else "err"
            if got == "ok":
                fds[slot] = (node % n, fd)
                ref.fds[slot] = ref.names[p]
        elif op == "unlink":
            node, p = args
            got = _outcome(c.op, node % n, "unlink", p)[0]
            want = "ok" if ref.names.pop(p, None) is not None else "err"
        elif op == "rename":
            node, p, q = args
            if p == q:
                continue
            r = _outcome(c.op, node % n, "rename", p, q)
            got = r[0] if r[0] == "ok" else r[1]
            # a source open anywhere is pinned (EBUSY); an open target is replaced all the same
            want = errno.ENOENT if p not in ref.names else errno.EBUSY if ref.is_open(p) else "ok"
            if want == "ok":
                ref.names[q] = ref.names.pop(p)
        elif op in ("write", "read", "truncate", "close"):
            slot = args[0]
            if slot not in fds:
                continue
            node, fd = fds[slot]
            f = ref.fds[slot]
            if op == "write":
                off, data = args[1:]
                got = _outcome(c.op, node, "write", fd, off, data)
                f.extend(bytes(max(0, off - len(f))))
                f[off : off + len(data)] = data
                want = ("ok", len(data))
            elif op == "read":
                got = _outcome(c.op, node, "read", fd, 0, 100)
                want = ("ok", bytes(f))
            elif op == "truncate":
                got = _outcome(c.op, node, "ftruncate", fd, args[1])
                del f[args[1] :]
                f.extend(bytes(args[1] - len(f)))
                want = ("ok", None)
            else:
                got = _outcome(c.op, node, "close", fd)
                del fds[slot], ref.fds[slot]
                want = ("ok", None)
        assert got == want, (op, args, got, want)
        for slot, (node, fd) in fds.items():  # every descriptor still reaches its own file
            assert c.op(node, "fgetattr", fd)[5] == len(ref.fds[slot]), (op, args, slot)
    for node, fd in fds.values():
        c.op(node, "close", fd)
    assert {p: bytes(v) for p, v in c.namespace().items() if v is not None} == {
        p: bytes(f) for p, f in ref.names.items()
    }
    for node, fs in zip(c.nodes, c.fs, strict=True):
        assert not node.orphans and not node.opens and not node.openers and not node.pins_of, node.id
        assert not node.orphan_fds and not node.fds, node.id
        assert not any(is_reserved(p) for p in fs.tree()), (node.id, fs.tree())


def _orphaned(c: DirectCluster) -> tuple[int, int]:
    """/d/f made at node 1, opened at node 2, unlinked at node 0: (its home, the requester's descriptor)."""
    c.op(0, "mkdir", "/d")
    home = c.op(1, "create", "/d/f")
    fd = c.op(2, "open", "/d/f")
    c.op(2, "write", fd, 0, b"kept")
    c.op(0, "unlink", "/d/f")
    return home, fd


def test_only_a_node_holding_an_orphan_reaches_it() -> None:
    """A peer that holds no descriptor of an orphan gets EBADF for it, whatever its number."""
    c = DirectCluster(3)
    home, fd = _orphaned(c)
    (n,) = c.nodes[home].orphans
    assert c._serve(2, home, OrphanRead(n, 0, 10)) == b"kept"
    for src, number in ((0, n), (1, n), (2, n + 1)):
        with pytest.raises(OSError) as e:
            c._serve(src, home, OrphanRead(number, 0, 10))
        assert e.value.errno == errno.EBADF
        with pytest.raises(OSError):
            c._serve(src, home, OrphanClose(number))
    assert c.nodes[home].orphans[n].pins == {2: 1}  # nobody else's close counted
    c.op(2, "close", fd)
    assert not c.nodes[home].orphans and ORPHAN_ROOT not in c.fs[home].tree()


def test_a_nodes_pins_at_a_home_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the bound an open is EMFILE and pins nothing; a close makes room again."""
    monkeypatch.setattr(home_module, "MAX_PINS_PER_PEER", 2)
    c = DirectCluster(2)
    c.op(0, "mkdir", "/d")
    home = c.op(0, "create", "/d/f")
    other = 1 - home
    fds = [c.op(other, "open", "/d/f") for _ in range(2)]
    with pytest.raises(OSError) as e:
        c.op(other, "open", "/d/f")
    assert e.value.errno == errno.EMFILE
    assert c.nodes[home].opens["/d/f"] == 2 and c.nodes[home].pins_of[other] == 2
    c.op(other, "close", fds.pop())
    fds.append(c.op(other, "open", "/d/f"))
    for fd in fds:
        c.op(other, "close", fd)
    assert not c.nodes[home].opens and not c.nodes[home].pins_of
