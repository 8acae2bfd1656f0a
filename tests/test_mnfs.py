"""mNFS (issue 25, the 001 paper): where its requests go and where its data lands.
That every runtime gives the same outcomes, messages and trees is the
conformance suite's (``tests/conformance.py``: the "mnfs:" scenario)."""

from __future__ import annotations

import errno

import pytest

from fedsim.direct import DirectCluster
from fedsim.protocol.designs import design_class
from fedsim.protocol.messages import ProtocolError
from fedsim.protocol.mnfs import STRIPE_UNIT, MnfsNode
from fedsim.protocol.mnfs.messages import MnfsClear, MnfsWrite
from fedsim.protocol.mnfs.node import stripe_ino
from fedsim.protocol.nfs.messages import NfsMkdir, NfsWrite

SU = STRIPE_UNIT


def cluster(n: int = 3) -> DirectCluster:
    return DirectCluster(n, design="mnfs")


def sent(c: DirectCluster, mark: int, kind: str | None = None) -> list[tuple[int, int, str]]:
    return [m for m in c.trace[mark:] if kind is None or m[2] == kind]


def owner(path: str, offset: int, n: int) -> int:
    return (offset // SU + stripe_ino(path)) % n


def test_registered():
    assert design_class("mnfs") is MnfsNode


@pytest.mark.parametrize("op,args", [("mkdir", ("/d/e",)), ("create", ("/d/f",)), ("rmdir", ("/d/x",)),
                                     ("setattr", ("/d/x", 0o700, -1, -1, -1, -1))])  # fmt: skip
def test_a_metadata_write_reaches_every_server(op, args):
    c = cluster(4)
    c.op(2, "mkdir", "/d")
    c.op(2, "mkdir", "/d/x")
    mark = len(c.trace)
    c.op(1, op, *args)
    to_sequencer, *fanned = sent(c, mark)
    assert to_sequencer[:2] == (1, 0)  # the entry sends it to the sequencer, which applies it first
    assert sorted(dst for _, dst, _ in fanned) == [1, 2, 3] and {s for s, _, _ in fanned} == {0}
    for n in range(4):  # applied by each, the entry (node 1) included
        listing = dict(c.fs[n].listdir("/d"))
        if op == "rmdir":
            assert "x" not in listing
        elif op == "setattr":
            assert c.fs[n].getattr("/d/x")[1] & 0o7777 == 0o700
        else:
            assert args[0].rsplit("/", 1)[1] in listing


def test_an_error_at_the_servers_is_the_operations():
    c = cluster()
    c.op(0, "create", "/f")
    with pytest.raises(FileExistsError):
        c.op(1, "create", "/f")
    with pytest.raises(FileNotFoundError):
        c.op(2, "mkdir", "/no/d")


def test_a_failed_metadata_write_fails_at_the_sequencer_before_any_other_server_sees_it():
    c = cluster(4)
    c.op(2, "create", "/f")
    mark = len(c.trace)
    with pytest.raises(FileExistsError):
        c.op(1, "create", "/f")
    assert [m[:2] for m in sent(c, mark)] == [(1, 0)]  # to the sequencer only: no server but it applied it


def test_a_metadata_write_that_skips_the_sequencer_is_refused():
    c = cluster(3)
    with pytest.raises(ProtocolError):  # an entry's own multicast would be out of the sequencer's order
        c.run(2, c.nodes[2].handle(1, NfsMkdir("/d", -1, -1, -1)))
    assert all("d" not in dict(c.fs[n].listdir("/")) for n in range(3))
    c.run(2, c.nodes[2].handle(0, NfsMkdir("/d", -1, -1, -1)))  # from the sequencer: applied
    assert dict(c.fs[2].listdir("/"))["d"]


def test_successive_metadata_reads_go_round_robin():
    c = cluster(3)
    c.op(0, "mkdir", "/d")
    c.op(0, "create", "/d/f")
    targets = []
    for op in ("stat", "getattr", "stat", "readdir", "getattr", "stat"):
        mark = len(c.trace)
        c.op(1, op, "/d/f" if op != "readdir" else "/d")
        msgs = sent(c, mark)
        assert len(msgs) <= 1  # one server answers (none sent when it is the entry itself)
        targets.append(msgs[0][1] if msgs else 1)
    assert targets == [1, 2, 0, 1, 2, 0]  # xid starts at the entry's id
    assert all(targets[i] != targets[i + 1] for i in range(len(targets) - 1))


def test_reads_are_answered_by_one_server_and_agree():
    c = cluster(3)
    c.op(0, "create", "/f")
    fd = c.op(0, "open", "/f")
    c.op(0, "write", fd, 0, b"x" * 100)
    assert {c.op(2, "getattr", "/f")[9] for _ in range(3)} == {c.op(1, "getattr", "/f")[9]}  # one inode number
    assert {c.op(2, "stat", "/f") for _ in range(3)} == {(False, 100)}


@pytest.mark.parametrize("n", [2, 3, 5])
def test_chunks_land_on_the_servers_the_formula_names(n):
    c = cluster(n)
    c.op(0, "mkdir", "/d")
    c.op(0, "create", "/d/f")
    fd = c.op(0, "open", "/d/f")
    data = bytes((i * 7 + i // SU) % 251 for i in range(3 * SU + 1000))  # 4 chunks, the last partial
    assert c.op(0, "write", fd, 0, data) == len(data)
    for node in range(n):
        local = c.fs[node].read("/d/f", 0, 1 << 20)
        assert len(local) == len(data)  # every server holds the file's size
        for chunk in range(4):
            lo, hi = chunk * SU, min((chunk + 1) * SU, len(data))
            want = data[lo:hi] if owner("/d/f", lo, n) == node else bytes(hi - lo)
            assert local[lo:hi] == want, (node, chunk)


def test_a_write_is_one_multicast_round_carrying_each_chunk_to_its_owner():
    c = cluster(3)
    c.op(0, "create", "/f")
    fd = c.op(1, "open", "/f")
    mark = len(c.trace)
    c.op(1, "write", fd, SU - 10, b"y" * 20)  # two chunks: two owners
    msgs = sent(c, mark)
    assert sorted(d for _, d, k in msgs if k == "MnfsWrite") == [0, 2]
    assert c.nodes[owner("/f", 0, 3)].stripe_writes + c.nodes[owner("/f", SU, 3)].stripe_writes == 2


@pytest.mark.parametrize("offset,size", [(0, SU), (SU - 1, 2), (100, 3 * SU), (5 * SU - 7, 4 * SU + 14), (0, 9 * SU)])
def test_reading_back_across_chunk_boundaries_gives_the_bytes_written(offset, size):
    c = cluster(3)
    c.op(0, "create", "/f")
    fd = c.op(0, "open", "/f")
    data = bytes((i * 31 + 7) % 256 for i in range(size))
    c.op(0, "write", fd, offset, data)
    rfd = c.op(2, "open", "/f")
    assert c.op(2, "read", rfd, offset, size) == data
    assert c.op(2, "read", rfd, 0, offset + size + 5000) == bytes(offset) + data  # short at the end
    assert c.op(1, "read", c.op(1, "open", "/f"), offset + 1, size) == data[1:]
    assert c.op(2, "stat", "/f") == (False, offset + size)


def test_overwrite_and_truncate_keep_every_server_consistent():
    c = cluster(3)
    c.op(0, "create", "/f")
    fd = c.op(0, "open", "/f")
    c.op(0, "write", fd, 0, b"a" * (3 * SU))
    c.op(1, "write", c.op(1, "open", "/f"), SU - 2, b"BBBB")
    c.op(2, "truncate", "/f", SU + 1)
    want = (b"a" * (SU - 2) + b"BBBB" + b"a" * (3 * SU))[: SU + 1]
    assert c.op(2, "read", c.op(2, "open", "/f"), 0, 10 * SU) == want
    assert {c.fs[n].stat("/f") for n in range(3)} == {(False, SU + 1)}


def test_rename_moves_each_chunk_to_its_new_owner():
    c = cluster(3)
    old, new = "/d/a", next(f"/d/b{i}" for i in range(100) if stripe_ino(f"/d/b{i}") % 3 != stripe_ino("/d/a") % 3)
    c.op(0, "mkdir", "/d")
    c.op(0, "create", old)
    data = bytes(i % 253 for i in range(4 * SU + 3))
    c.op(0, "write", c.op(0, "open", old), 0, data)
    c.op(1, "rename", old, new)
    assert c.op(2, "read", c.op(2, "open", new), 0, 1 << 20) == data
    for node in range(3):
        local = c.fs[node].read(new, 0, 1 << 20)
        for chunk in range(5):
            lo, hi = chunk * SU, min((chunk + 1) * SU, len(data))
            assert local[lo:hi] == (data[lo:hi] if owner(new, lo, 3) == node else bytes(hi - lo)), (node, chunk)
        assert [name for name, _ in c.fs[node].listdir("/d")] == [new.rsplit("/", 1)[1]]


def test_statfs_sums_the_servers():
    one = DirectCluster(1, design="mnfs").op(0, "statfs")
    three = cluster(3).op(1, "statfs")
    assert three[2] == 3 * one[2] and three[3] == 3 * one[3] and three[6] == one[6]


def test_hard_links_are_refused():
    c = cluster()
    c.op(0, "create", "/f")
    with pytest.raises(OSError) as e:
        c.op(1, "link", "/f", "/g")
    assert e.value.errno == errno.EPERM


def test_a_peers_striped_requests_are_checked():
    """A peer's request is as untrusted as a client's: no piece across a chunk, none at a
    server not owning it, no growth over the server's own data, no plain NFS WRITE."""
    c = cluster(3)
    c.op(0, "create", "/f")
    own = owner("/f", 0, 3)
    other = (own + 1) % 3
    bad = [
        (own, MnfsWrite("/f", SU - 1, b"ab", SU + 1)),  # across chunks
        (other, MnfsWrite("/f", 0, b"a", 1)),  # not the owner
        (own, MnfsWrite("/f", 0, b"", 1)),  # growth by zeros over its own chunk
        (own, MnfsWrite("/f", -1, b"", 0)),
        (other, MnfsWrite("/f", 0, b"", 1 << 63)),
        (own, MnfsClear("/f", 0, 1)),  # clearing its own chunk
        (other, MnfsClear("/f", 0, SU + 1)),
        (own, NfsWrite("/f", 0, b"a")),
    ]
    for node, req in bad:
        with pytest.raises((OSError, ProtocolError)) as e:
            c.run(node, c.nodes[node].handle(3 - node if node else 1, req))
        assert isinstance(e.value, ProtocolError) or e.value.errno == errno.EINVAL, req
    assert all(c.fs[n].stat("/f") == (False, 0) for n in range(3))


def test_a_simulated_postmark_runs_on_mnfs():
    from experiments.common import run_postmark
    from experiments.dafs import variant
    from tests.test_machine import postmark_config

    out = run_postmark(variant(postmark_config(4), protocol__architecture="mnfs"))
    m, c = out.metrics, out.cluster
    assert m["errors"] == 0 and m["postmark_tps"] > 0
    assert m["design.stripe_writes"] > 0
    assert all(n.stats.requests_served > 0 for n in c.nodes)  # every node serves: no central server


def test_a_read_far_past_the_end_stops_at_the_end():
    c = cluster(3)
    c.op(0, "create", "/f")
    fd = c.op(0, "open", "/f")
    c.op(0, "write", fd, 0, b"abc")
    assert c.op(1, "read", c.op(1, "open", "/f"), 1, 1 << 62) == b"bc"  # lazily cut: one round, not 2**49 pieces
    with pytest.raises(OSError) as e:
        c.op(1, "read", fd, -1, 10)
    assert e.value.errno == errno.EINVAL


def test_a_rename_that_would_move_too_much_is_exdev(monkeypatch):
    import fedsim.protocol.mnfs.node as mnfs_node

    monkeypatch.setattr(mnfs_node, "MOVE_MAX", SU)
    c = cluster(3)
    new = next(f"/b{i}" for i in range(100) if stripe_ino(f"/b{i}") % 3 != stripe_ino("/a") % 3)
    c.op(0, "create", "/a")
    c.op(0, "truncate", "/a", SU + 1)
    with pytest.raises(OSError) as e:
        c.op(1, "rename", "/a", new)
    assert e.value.errno == errno.EXDEV
    assert all(c.fs[n].stat("/a") == (False, SU + 1) for n in range(3))  # nothing renamed anywhere
