"""The message codec: round trips, clear rejection of garbage, exact sizes."""

from __future__ import annotations

import errno

import pytest
from hypothesis import given
from hypothesis import strategies as st

import fedsim.protocol.fedfs  # noqa: F401  (registers the design's own request types: Rename ...)
from fedsim.protocol.messages import (
    REQUEST_TYPES,
    PeerUnavailable,
    ProtocolError,
    Read,
    Write,
    decode_error,
    decode_request,
    encode_error,
    encode_request,
    fs_error,
    pack,
    packed_size,
    unpack,
)

values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=300)
    | st.binary(max_size=70000),
    lambda inner: st.lists(inner, max_size=20) | st.tuples(inner, inner),
    max_leaves=30,
)


@given(values)
def test_packed_size_equals_the_length_of_the_msgpack_encoding(v):
    assert packed_size(v) == len(pack(v))


def test_every_request_type_round_trips_through_bytes():
    samples = {"str": "/a/b", "int": 7, "bool": True, "bytes": b"xy", "str | None": None, "float": 1.5}
    from dataclasses import fields

    for cls in REQUEST_TYPES.values():
        req = cls(*["b" if f.name == "name" else samples[str(f.type)] for f in fields(cls)])
        assert decode_request(unpack(pack(encode_request(req)))) == req


@pytest.mark.parametrize(
    "obj",
    [
        ["Create", "../../etc/passwd", 0, -1, -1, -1],
        ["Create", "/a/../../etc/passwd", 0, -1, -1, -1],
        ["Read", "a/b", 0, 1],
        ["Stat", "/a//b"],
        ["Unlink", "/a\x00b"],
        ["GetEntry", "/a", "../b", 0, 0],
        ["GetEntry", "/a", "b/c", 0, 0],
        ["AddEntry", "/a", "..", False, 0, 0],
        ["Rename", "/a/b", "/a/../etc/passwd", 0],
        ["RenameFinish", "../x", "/a/y", True],
        ["MigrateIn", "/a/../../x", 1, 0.5],
        ["MigrateSwitch", "/a", "../b", 1, 2, 3],
        ["EntryAttrs", "/a/../b", b"\x90"],
        ["ListHomes", "a", 0],
        ["MakeLink", "/a/../../x", "target", 0],
        ["MakeNode", "a/p", 0o10644, 0, 0, -1, -1],
        ["ReadLink", "/a/./l"],
    ],
)
def test_requests_naming_non_canonical_paths_are_refused_before_any_handler(obj):
    """A peer cannot smuggle '..', relative or NUL-carrying names past the codec."""
    with pytest.raises(ProtocolError, match="canonical"):
        decode_request(obj)


@pytest.mark.parametrize(
    "obj",
    [[], ["NoSuchRequest", "/a"], ["Read", "/a", 1], ["Read", "/a", "1", 2], ["Write", 3, 0, b""], "Read", 42],
)
def test_malformed_requests_are_rejected_with_protocol_error(obj):
    with pytest.raises(ProtocolError):
        decode_request(obj)


@pytest.mark.parametrize(
    ("target", "code"),
    [("", errno.ENOENT), ("a\x00b", errno.EINVAL), ("x" * 4096, errno.ENAMETOOLONG)],
)
def test_a_peers_symlink_target_is_checked_at_the_home(target, code):
    """A MakeLink decodes (its target is a plain string: data, never a path), but the
    home refuses a target no symlink may hold before it touches its local tree."""
    from fedsim.direct import DirectCluster
    from fedsim.protocol.config import ProtocolConfig
    from fedsim.protocol.fedfs.links import MakeLink, MakeNode

    req = decode_request(unpack(pack(encode_request(MakeLink("/d/l", target, 0)))))
    c = DirectCluster(2)
    with pytest.raises(OSError) as info:
        next(c.nodes[1].on_make_link(0, req))
    assert info.value.errno == code
    for uid in (-1, 0, 1000):  # a character device: devices are off (the default), for root too
        with pytest.raises(OSError) as info:
            next(c.nodes[1].on_make_node(0, MakeNode("/d/c", 0o20600, 0, 0x0103, uid, 0)))
        assert info.value.errno == errno.EPERM
    on = DirectCluster(2, config=ProtocolConfig(devices=True))
    for uid in (-1, 1000):  # on: still only for uid 0, whatever a peer sends
        with pytest.raises(OSError) as info:
            next(on.nodes[1].on_make_node(0, MakeNode("/d/c", 0o20600, 0, 0x0103, uid, 0)))
        assert info.value.errno == errno.EPERM
    assert c.fs[1].tree() == on.fs[1].tree() == {"/": None}


@given(st.binary(max_size=64))
def test_garbage_bytes_never_decode_into_a_request_silently(data):
    try:
        obj = unpack(data)
    except ProtocolError:
        return
    try:
        req = decode_request(obj)
    except ProtocolError:
        return
    assert type(req) in REQUEST_TYPES.values()


def test_oversized_message_is_refused():
    with pytest.raises(ProtocolError, match="exceeds"):
        unpack(b"\x00" * 100, max_size=10)


def test_errors_cross_the_wire_as_the_same_oserror_subclass():
    e = decode_error(unpack(pack(encode_error(fs_error(errno.ENOTEMPTY, "/d")))))
    assert isinstance(e, OSError) and e.errno == errno.ENOTEMPTY and e.filename == "/d"
    p = decode_error(encode_error(PeerUnavailable(5, "timed out")))
    assert isinstance(p, PeerUnavailable) and p.node == 5
    assert decode_error(encode_error(ValueError("boom"))).errno == errno.EIO
    assert Read("/a", 0, 1) != Write("/a", 0, b"x")


# --- typed replies ---------------------------------------------------------------------------
def test_every_request_type_declares_its_reply():
    from fedsim.protocol import fedfs  # noqa: F401  (registers the FedFS design's own requests)
    from fedsim.protocol.messages import REQUEST_TYPES

    assert all("reply" in vars(cls) for cls in REQUEST_TYPES.values())
    assert {"HomeInfo", "Rename", "Stat", "Read"} <= set(REQUEST_TYPES)


def test_replies_are_checked_against_their_declared_type():
    from fedsim.protocol.messages import GetEntry, HomeInfo, ListVD, Read, Stat, check_reply

    check_reply(Stat("/f"), (False, 12))
    check_reply(HomeInfo("/d"), (True, None, 3))  # a directory has no single home
    check_reply(GetEntry("/", "d"), None)
    check_reply(ListVD("/"), (("a", True), ("b", False)))  # msgpack arrays decode as tuples
    check_reply(ListVD("/"), [])
    check_reply(Read("/f", 0, 1), b"x")
    for req, bad, words in [
        (Stat("/f"), (False, "12"), r"Stat reply: \[1\]: expected int, got str"),
        (Stat("/f"), (False, True), "expected int, got bool"),
        (Stat("/f"), (False,), "expected tuple"),
        (ListVD("/"), [("a", 1)], r"\[0\]: \[1\]: expected bool"),
        (Read("/f", 0, 1), "x", "expected bytes, got str"),
        (GetEntry("/", "d"), (True, 1), "expected"),
    ]:
        with pytest.raises(ProtocolError, match=words):
            check_reply(req, bad)


def test_a_request_type_without_a_reply_type_is_refused():
    from dataclasses import dataclass

    from fedsim.protocol.messages import Request, register_request

    @dataclass(slots=True, frozen=True)
    class NoReply(Request):
        path: str

    with pytest.raises(TypeError, match="declare its reply type"):
        register_request(NoReply)


def test_an_agent_refuses_a_peers_reply_of_the_wrong_type(tmp_path):
    """A peer whose handler answers garbage: the caller gets EBADMSG naming
    that peer, and protocol code never sees the value."""
    import errno

    from fednode.cluster import AgentGroup, local_spec
    from fednode.config import Cluster
    from fedsim.protocol.hashing import names_managed_by
    from fedsim.protocol.messages import Stat

    spec = local_spec(tmp_path, 2, protocol={"summary_refresh_s": 0.0})
    cluster = Cluster(spec)
    with AgentGroup(cluster) as g:
        name = names_managed_by(g.agents[0].node.hashing, 1, "/f")[0]
        g.op(1, "create", name)  # managed and held by node 1
        g.agents[1].node._handlers[Stat] = lambda src, req: "not a stat"
        with pytest.raises(OSError) as ei:
            g.op(0, "stat", name)
        assert ei.value.errno == errno.EBADMSG and "node 1 sent a bad reply: Stat reply" in str(ei.value)


# --- extended attributes (issue 22) ------------------------------------------------------------
@pytest.mark.parametrize(
    "obj",
    [
        ["GetXattr", "/a", "user.a\x00b"],  # a NUL: no requester sends it
        ["GetXattr", "/a", ""],
        ["GetXattr", "/a", "user." + "n" * 300],  # over 255 bytes
        ["GetXattr", "/a", 5],
        ["SetXattr", "/a", "user.k", b"x" * 65537, 0],  # over 64 KiB
        ["SetXattr", "/a", "user.k", "text, not bytes", 0],
        ["PathSetXattr", "/a", "user.k", b"v", "0"],
        ["RemoveXattr", "../a", "user.k"],
        ["PathRemoveXattr", "/a", "user.\u00e9" * 100],  # 700 bytes of UTF-8
        ["ListXattr", "/a", "extra"],
        ["PathListXattr", "/a//b"],
        ["MigrateXattrs", "a/b"],
    ],
)
def test_garbled_xattr_requests_are_refused_before_any_handler(obj):
    with pytest.raises(ProtocolError):
        decode_request(obj)


def test_xattr_replies_are_checked_and_a_peers_request_is_checked_as_a_clients():
    from fedsim.direct import DirectCluster
    from fedsim.protocol.fedfs.extattrs import GetXattr, ListXattr, SetXattr
    from fedsim.protocol.fedfs.migration import MigrateXattrs
    from fedsim.protocol.messages import check_reply

    check_reply(ListXattr("/f"), ("user.a", "user.b"))
    check_reply(MigrateXattrs("/f"), (("user.a", b"v"),))
    for req, bad in [(ListXattr("/f"), ("user.a", 1)), (GetXattr("/f", "user.a"), "v"),
                     (MigrateXattrs("/f"), (("user.a", "v"),))]:  # fmt: skip
        with pytest.raises(ProtocolError):
            check_reply(req, bad)
    c = DirectCluster(2)
    c.op(0, "create", "/f")
    home = next(n for n in (0, 1) if "/f" in c.fs[n].tree())
    for req, code in [
        (SetXattr("/f", "trusted.x", b"v", 0), errno.EPERM),  # root's: a request naming no caller is not root
        (SetXattr("/f", "trusted.x", b"v", 0, 1000), errno.EPERM),
        (SetXattr("/f", "user.x", b"v", 8), errno.EINVAL),  # no such flag
        (GetXattr("/f", "security.selinux", 0), errno.EOPNOTSUPP),  # security. is off (the default)
        (SetXattr("/f", "system.posix_acl_access", b"", 0, 0), errno.EOPNOTSUPP),  # not carried, whoever asks
    ]:
        with pytest.raises(OSError) as e:
            c.run(home, c.nodes[home].handle(1 - home, req))
        assert e.value.errno == code, req
    assert c.fs[home].listxattr("/f") == []
    garbled = [["GetXattr", "/f", "trusted.x", -2], ["ListXattr", "/f", 1 << 40]]
    for obj in [*garbled, ["SetXattr", "/f", "user.x", b"", 0, 2**32]]:
        with pytest.raises(ProtocolError, match="caller uid"):  # a uid no requester sends: garbled
            decode_request(obj)


@pytest.mark.parametrize(
    "obj",
    [
        ["Create", "/a", 0, "0644", -1, -1],  # a mode as text
        ["Create", "/a", 0, 0o644, -1],  # a field missing
        ["Create", "/a", 0, 0o644, -1, -1, 7],  # one too many
        ["Create", "/a", 0, True, -1, -1],  # a bool is not a mode
        ["Mkdir", "/a", 0, 0o755, 1.5, 0],  # a float uid
        ["Mkdir", "/a", 0, 0o755, 0, None],
        ["Mkdir", "a/../b", 0, 0o755, 0, 0],
    ],
)
def test_garbled_create_and_mkdir_owner_fields_are_refused_before_any_handler(obj):
    """Issue 22: the mode and owner a Create/Mkdir carries are typed on the wire."""
    with pytest.raises(ProtocolError):
        decode_request(obj)


@pytest.mark.parametrize(
    "fields",
    [(0o17777, 1, 1), (0o100644, 1, 1), (-2, 1, 1), (0o644, -2, 1), (0o644, 1, 1 << 32), (0o644, (1 << 32) - 1, 1)],
)
def test_a_peers_create_with_an_out_of_range_mode_or_owner_is_einval_and_makes_nothing(fields):
    """Out-of-range values decode (they are ints) but the home checks them as the
    requester does (``attrs.check_new``): EINVAL, and nothing is made."""
    from fedsim.direct import DirectCluster
    from fedsim.protocol.messages import Create, Mkdir

    c = DirectCluster(2)
    c.op(0, "mkdir", "/new")
    for req in (Create("/new/f", 0, *fields), Mkdir("/new/d", 0, *fields)):
        assert decode_request(encode_request(req)) == req
        with pytest.raises(OSError) as e:
            c.run(1, c.nodes[1].handle(0, req))
        assert e.value.errno == errno.EINVAL, req
        with pytest.raises(OSError) as e:  # the requester refuses them before any message
            c.op(0, "create" if type(req) is Create else "mkdir", req.path, *fields)
        assert e.value.errno == errno.EINVAL
    assert not any(p in ("/new/f", "/new/d") for n in (0, 1) for p in c.fs[n].tree())
    c.op(0, "create", "/new/f", 0o4750, 7, 8)  # in range: made so, at its home
    home = next(n for n in (0, 1) if "/new/f" in c.fs[n].tree())
    assert c.fs[home].getattr("/new/f")[1:5] == (0o104750, 1, 7, 8)
