"""Hard links as protocol operations (issue 22, ``fedsim/protocol/fedfs/links.py``), in the
in-memory runtime: the refusals where the federation keeps no hard links right, a stale
entry of the old name followed to its home, and a peer's untrusted reservation refused.
(The conformance scenario "hard links: ..." runs the main path in every runtime.)"""

from __future__ import annotations

import errno

import pytest

from fedsim.direct import DirectCluster
from fedsim.protocol.attrs import Attr
from fedsim.protocol.config import ProtocolConfig
from fedsim.protocol.fedfs.links import HardLink, LinkInfo


def _errno(fn, *args) -> int | None:
    try:
        fn(*args)
    except OSError as exc:
        return exc.errno
    return None


def _file_on(c: DirectCluster, node: int, path: str, data: bytes = b"data") -> None:
    c.fs[node].create(path)
    c.fs[node].write(path, 0, data)


@pytest.mark.parametrize("config", [ProtocolConfig(replicas=2), ProtocolConfig(block_cache_blocks=4, block_size=8)])
def test_link_is_eperm_where_copies_or_cachers_are_kept_per_name_and_leaves_no_trace(config) -> None:
    c = DirectCluster(3, config=config)
    c.op(0, "create", "/f")
    assert _errno(c.op, 1, "link", "/f", "/g") == errno.EPERM
    assert [n for n, _ in c.op(2, "readdir", "/")] == ["f"]
    assert not any(fs.meta.get("/g") for fs in c.fs)


def test_a_stale_entry_of_the_old_name_is_resolved_again_at_its_manager() -> None:
    """Node 1 caches /d/f's home; the file then migrates: the link is made at its new home."""
    c = DirectCluster(3)
    c.op(0, "mkdir", "/d")
    home = c.op(0, "create", "/d/f")
    c.op(1, "stat", "/d/f")  # cached at node 1 (unless node 1 manages it: then exact)
    to = next(n for n in range(3) if n != home)
    assert c.op(2, "migrate", "/d/f", to) == 1
    retries = c.nodes[1].stats.stale_retries
    assert c.op(1, "link", "/d/f", "/d/g") == to
    if c.nodes[1].manager_of("/d/f") != 1:  # (its own names' entries are exact: moved by the migration)
        assert c.nodes[1].stats.stale_retries == retries + 1  # the old home said ESTALE
    a, b = Attr(*c.op(2, "getattr", "/d/f")), Attr(*c.op(0, "getattr", "/d/g"))
    assert a.ino == b.ino and a.nlink == b.nlink == 2
    assert c.fs[to].meta["/d/f"] is c.fs[to].meta["/d/g"] and "/d/g" not in c.fs[home].meta


def test_a_link_to_a_name_unlinked_meanwhile_is_enoent_and_leaves_no_name() -> None:
    c = DirectCluster(3)
    _file_on(c, 2, "/f")
    c.op(1, "stat", "/f")
    c.op(0, "unlink", "/f")
    assert _errno(c.op, 1, "link", "/f", "/g") == errno.ENOENT
    assert c.op(2, "readdir", "/") == []
    assert c.op(1, "create", "/g") is not None  # the name was not left reserved


def test_a_peer_cannot_reserve_a_name_on_a_home_outside_the_federation() -> None:
    c = DirectCluster(3)
    m = c.nodes[0].manager_of("/x")
    with pytest.raises(OSError) as e:
        c.run(m, c.nodes[m].handle(1, LinkInfo("/x", 7, 1)))
    assert e.value.errno == errno.EINVAL and c.nodes[m].dt.get("/x") is None


def test_the_home_refuses_a_link_with_the_old_name_gated_and_one_through_a_directory() -> None:
    c = DirectCluster(2)
    _file_on(c, 0, "/f")
    c.op(0, "mkdir", "/d")
    c.nodes[0].gates.add("/f")
    with pytest.raises(OSError) as e:
        c.run(0, c.nodes[0].handle(1, HardLink("/g", "/f")))
    assert e.value.errno == errno.EAGAIN
    c.nodes[0].gates.discard("/f")
    assert _errno(c.op, 1, "link", "/d", "/g") == errno.EPERM
    assert _errno(c.op, 1, "link", "/", "/g") == errno.EPERM
    assert _errno(c.op, 1, "link", "/f", "/") == errno.EEXIST
