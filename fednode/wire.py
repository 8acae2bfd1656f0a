"""What travels between agents and clients: frames, envelopes, the handshake.

Frames are length-prefixed (4 bytes, big endian) msgpack documents; the
payload codec is ``fedsim.protocol.messages`` (one codec for every transport).
An envelope is a msgpack array whose first element says what it is:

=========  ===========================================================
REQUEST    [0, rid, depth, trace, request]   a protocol request (Call)
ONEWAY     [1, 0, depth, trace, request]     a protocol request (Send)
REPLY      [2, rid, value, log]              a successful reply
ERROR      [3, rid, error, log]              a failed one (errno triple)
PING       [4, rid, payload]                 the raw round trip (``fednode bench``)
PONG       [5, rid, payload]
CLIENT     [6, rid, op, args, trace]         an API call from a client program
RDMA       [7, 0, parameters]                the verbs transport's queue-pair set-up
=========  ===========================================================

``depth`` is the request's nesting (a client's call is 0, a request a handler
sends is one deeper): each depth has its own worker pool, so bounded pools
cannot deadlock (as in the simulator).  With ``trace`` set the reply carries
``log``, the (src, dst, kind) of every message the handler caused, so the
requester can rebuild the whole message sequence of an operation across
processes (the conformance suite compares it with the simulator's).

The handshake on every connection: the server sends a random challenge; the
connecting side answers with HMAC-SHA256(key, "hello" + challenge + who), its
own challenge and who it is (a node id, or -1 for a client program); the
server checks it with the key of the role ``who`` claims, then proves it knows
that key too (HMAC over the connecting side's challenge).  The keys are per
role (``fednode.config.role_key``): a node id must prove the peer key, a
client the client key, so a client credential cannot pose as a member.
Nothing else is read before that.  What this proves, and what it does not,
is the README's threat model.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import os
import struct
from collections.abc import Callable
from typing import Any

from fedsim.protocol.messages import ProtocolError, pack, unpack

REQUEST, ONEWAY, REPLY, ERROR, PING, PONG, CLIENT, RDMA = range(8)
KIND_NAMES = ("REQUEST", "ONEWAY", "REPLY", "ERROR", "PING", "PONG", "CLIENT", "RDMA")
HEADER = struct.Struct("!I")
NONCE_BYTES = 32
HANDSHAKE_MAX = 512  # bytes: a handshake frame is small; anything bigger is refused
CLIENT_ID = -1
MAX_DEPTH = 16  # deeper nesting than any protocol operation makes: refused


class AuthError(ConnectionError):
    """The other side does not know the key of the role it claims."""


def frame(payload: bytes) -> bytes:
    return HEADER.pack(len(payload)) + payload


def encode(obj: Any) -> bytes:
    """One envelope as a frame, ready for the wire."""
    payload = pack(obj)
    return HEADER.pack(len(payload)) + payload


def decode(payload: bytes, max_size: int) -> tuple[Any, ...]:
    """One frame's payload -> envelope (a tuple whose first item is its kind).
    Arrays decode as tuples all the way down: replies then look exactly as
    the handlers built them (and as the simulator hands them over)."""
    obj = unpack(payload, max_size, use_list=False)
    if not isinstance(obj, tuple) or not obj or type(obj[0]) is not int or not 0 <= obj[0] < len(KIND_NAMES):
        raise ProtocolError("an envelope must be an array [kind, ...] with a known kind")
    return obj


# ---------------------------------------------------------------------------- request arguments
def check_args(op: str, want: tuple[type, ...], args: tuple[Any, ...] | list[Any], optional: int = 0) -> None:
    """Refuse ``args`` unless they are exactly of the types ``want`` (the last
    ``optional`` ones may be left out); EINVAL says what was expected.  Exact
    types: a bool is not an int, a str subclass not a str."""
    if type(args) is not tuple and type(args) is not list:
        raise OSError(errno.EINVAL, f"{op}: the arguments must be an array, not {type(args).__name__}")
    ok = len(want) - optional <= len(args) <= len(want) and all(
        type(a) is t or (t is tuple and type(a) is list) for a, t in zip(args, want, strict=False)
    )
    if not ok:
        shown = ", ".join(type(a).__name__ for a in args)
        names = ", ".join("list" if t is tuple else t.__name__ for t in want)
        raise OSError(errno.EINVAL, f"{op} takes ({names}){f' (the last {optional} optional)' if optional else ''}, "
                      f"got ({shown})")  # fmt: skip


def over_limit(what: str, value: int, limit: int, key: str) -> OSError:
    """The EINVAL for a size or count outside 0..``limit``: names the bound and
    the cluster-file ``key`` that raises it (a dotted key, e.g. "limits.max_pins")."""
    return OSError(errno.EINVAL, f"{what} {value} is outside 0..{limit} ({key} in the cluster file raises the limit)")


_UINT = {0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8}


def peek(payload: bytes) -> tuple[int, int]:
    """(kind, rid) of a packed envelope, read from its first bytes without
    decoding the rest: the verbs transport must know which messages are
    requests and which reply to which (to name and find reply regions), and
    decoding a 1 MiB read reply just for that would cost more than moving it.
    Raises ProtocolError for anything that does not start like an envelope."""
    if len(payload) < 3 or payload[0] & 0xF0 != 0x90 or payload[1] >= len(KIND_NAMES):
        raise ProtocolError("not an envelope")
    b = payload[2]
    if b < 0x80:
        return payload[1], b
    n = _UINT.get(b)
    if n is None or len(payload) < 3 + n:
        raise ProtocolError("an envelope's id must be an unsigned integer")
    return payload[1], int.from_bytes(payload[3 : 3 + n], "big")


# ---------------------------------------------------------------------------- handshake
def nonce() -> bytes:
    return os.urandom(NONCE_BYTES)


def mac(key: bytes, label: bytes, challenge: bytes, who: int = 0) -> bytes:
    """HMAC-SHA256 binding a label (which step), a challenge and the claimed identity."""
    return hmac.new(key, label + challenge + who.to_bytes(8, "big", signed=True), hashlib.sha256).digest()


def hello(key: bytes, challenge: bytes, who: int) -> tuple[bytes, bytes]:
    """The connecting side's answer to ``challenge`` with its role's ``key``: (frame, its own challenge)."""
    mine = nonce()
    return frame(pack([mac(key, b"hello", challenge, who), mine, who])), mine


def check_hello(key_for: Callable[[int], bytes], challenge: bytes, payload: bytes) -> tuple[int, bytes]:
    """Server side: verify a hello against the key of the role it claims
    (``key_for(who)``); returns (who, the reply frame proving the server knows that key)."""
    try:
        obj = unpack(payload, HANDSHAKE_MAX, use_list=False)
        proof, theirs, who = obj
        ok = (
            isinstance(proof, bytes)
            and isinstance(theirs, bytes)
            and len(theirs) == NONCE_BYTES
            and type(who) is int
            and -(1 << 63) <= who < 1 << 63
        )
    except (ProtocolError, TypeError, ValueError):
        ok = False
    if not ok:
        raise AuthError("malformed handshake")
    key = key_for(who)
    if not hmac.compare_digest(proof, mac(key, b"hello", challenge, who)):
        role = "client" if who == CLIENT_ID else f"peer (node {who})"
        raise AuthError(f"wrong key for the {role} role: the HMAC does not match the cluster file's secret")
    return who, frame(pack([True, mac(key, b"welcome", theirs, who)]))


def refusal(reason: str) -> bytes:
    """The frame a server sends before closing an unauthenticated connection."""
    return frame(pack([False, reason]))


def check_welcome(key: bytes, mine: bytes, payload: bytes, who: int) -> None:
    """Connecting side: verify the server's proof (it knows ``key``, our role's key)."""
    try:
        obj = unpack(payload, HANDSHAKE_MAX, use_list=False)
        ok = isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[0], bool)
    except ProtocolError:
        ok = False
    if not ok:
        raise AuthError("malformed handshake reply (is this a fednode agent?)")
    if obj[0] is False:
        raise AuthError(f"the agent refused the connection: {obj[1]}")
    if not isinstance(obj[1], bytes) or not hmac.compare_digest(obj[1], mac(key, b"welcome", mine, who)):
        raise AuthError("the agent does not know the cluster's secret")
