"""Typed protocol requests and the one codec the real transports use.

Requests are small frozen dataclasses named after the FedFS handlers (Federated
DAFS Fig. 4).  Replies are plain values (None, bool, int, str, bytes, lists and
tuples of those) so they need no schema.  Failures travel as errno triples and
come back out of the codec as the matching ``OSError`` subclass, or as
``PeerUnavailable``.

The simulator charges every message its encoded size (``wire_size``), so the
bytes a simulated network carries are the bytes a real one would.
"""

from __future__ import annotations

import errno as _errno
from dataclasses import dataclass, fields
from os import strerror
from types import UnionType
from typing import Any, ClassVar, Union, get_args, get_origin

import msgpack

from fedsim.protocol.names import InvalidPath, normalize


class PeerUnavailable(ConnectionError):
    """A peer did not answer (crashed, left, timed out, unreachable).

    Raised into protocol code at the ``yield`` of a Call to that peer."""

    def __init__(self, node: int, reason: str = "did not answer") -> None:
        super().__init__(_errno.EHOSTDOWN, f"node {node} unavailable: {reason}")
        self.node = node
        self.reason = reason

    def __reduce__(self):
        return (PeerUnavailable, (self.node, self.reason))


class Redirected(OSError):
    """A redirect that names the node managing ``filename`` (``node``): the
    name's management was delegated to it, or given back from it
    (``fedfs/delegation.py``).  EREMCHG, as a view change's redirect, which
    names nobody (the requester fetches the view instead)."""

    def __init__(self, node: int, filename: str, message: str = "") -> None:
        super().__init__(_errno.EREMCHG, message or f"managed by node {node}", filename)
        self.node = node

    def __reduce__(self):
        return (Redirected, (self.node, self.filename, self.strerror))


class ProtocolError(ValueError):
    """A message that cannot be decoded: garbled, truncated, unknown type."""


@dataclass(slots=True, frozen=True)
class Request:
    """Base of all requests; ``kind`` is the wire name (the class name).

    Every request type declares ``reply``: the type of its handler's value,
    written as a type expression over wire values (``None``, ``bool``,
    ``int``, ``str``, ``bytes``, ``tuple[...]``, ``list[...]``, ``X | None``).
    A reply from the wire is checked against it (``check_reply``) before
    protocol code sees it, as a request's fields are checked on decoding."""

    kind: ClassVar[str] = "Request"
    reply: ClassVar[Any] = None
    #: a speculative probe (a dirmerge's ReadDir: a Bloom false positive costs
    #: one): runtimes count its traffic apart from the nodes an operation reached
    probe: ClassVar[bool] = False
    #: the field that bounds the size of the reply (a Read's byte count): a
    #: runtime with a message size limit refuses a request asking for more
    size_field: ClassVar[str | None] = None
    #: the reply is file data, a bulk transfer apart from the messages (Federated
    #: DAFS V-A: "a handle to the reply region is included in the request header
    #: so that the bulk data can be transferred using RDMA").  Runtimes honour it
    #: by attribute, never by naming the request.  The simulator charges the
    #: bytes' transfer time on the replying node's NIC and the link, as for any
    #: payload (``wire_size``; LogGP has no per-byte receive cost, so an RDMA
    #: WRITE and a SEND of the same bytes cost the same there).  The agents: TCP
    #: carries the data in the reply frame (its plain path); verbs moves every
    #: reply larger than ``rdma.inline_bytes`` by an RDMA WRITE into the landing
    #: slot the request named (``rdma.bulk: write``), which covers data replies
    #: of more than a few KB.  Not done: choosing that path by this attribute
    #: rather than by size (small data replies still go by SEND, which is the
    #: cheaper path below ``inline_bytes``).
    bulk_reply: ClassVar[bool] = False
    #: the field naming the pathname whose manager this request is sent to
    #: (None: not routed by name).  A routed request has an ``epoch`` field,
    #: the sender's view (``fedsim.protocol.view``), which ``Node.call`` sets
    #: and ``Node.handle`` checks: a request that reaches a node that does
    #: not manage its name is redirected (EREMCHG).
    route: ClassVar[str | None] = None
    #: the handler never waits for another generator of its node (no ``Await``, no lock): a
    #: runtime that serves requests with bounded pools of workers (the simulator) serves it in
    #: a stage of its own, never queued behind workers that wait.  What a lock protocol's own
    #: messages need (dNFSp2's token transfers, ``fedsim.protocol.locks``): the lock's holder
    #: must get them through while other procedures wait on the lock in every worker.
    callback: ClassVar[bool] = False


def stage_of(request: Request, depth: int) -> int:
    """The stage (worker pool) that serves ``request`` arriving at nesting ``depth``, in a runtime
    with bounded pools: its depth, or -1 (below every depth) for a ``callback`` request."""
    return -1 if request.callback else depth


#: Every request type by its wire name.  Open: a design or policy module
#: defines its own requests with ``@register_request`` and they encode, decode,
#: validate and size on the wire like these.
REQUEST_TYPES: dict[str, type[Request]] = {}

# One table per request class: (field name, accepted types).  encode_request
# reads the names; decode_request checks the types, so a message whose fields
# have the wrong types is rejected before any handler sees it.
_WIRE_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "bool": (bool,),
    "bytes": (bytes,),
    "float": (float, int),
    "str | None": (str, type(None)),
    "int | None": (int, type(None)),
}
_FIELDS: dict[type[Request], tuple[tuple[str, tuple[type, ...]], ...]] = {}


# --- replies ----------------------------------------------------------------------------
_CHECKERS: dict[Any, Any] = {}


def _reply_checker(t: Any, where: str) -> Any:
    """A function value -> error text or None, for reply type ``t`` (cached)."""
    try:
        return _CHECKERS[t]
    except (KeyError, TypeError):
        pass
    origin, args = get_origin(t), get_args(t)
    if t is None or t is type(None):
        fn = _none_ok
    elif t is Any:
        fn = _any_ok
    elif t in (bool, str, bytes, float):
        fn = _instance(t)
    elif t is int:
        fn = _int_ok
    elif origin in (Union, UnionType):
        alts = [_reply_checker(a, where) for a in args]
        fn = _union(alts, t)
    elif origin is tuple:
        fn = _tuple([_reply_checker(a, where) for a in args], t)
    elif origin is list:
        fn = _list(_reply_checker(args[0], where), t)
    else:
        raise TypeError(f"{where}: reply type {t!r} is not a wire value type")
    try:
        _CHECKERS[t] = fn
    except TypeError:
        pass
    return fn


def _none_ok(v: Any) -> str | None:
    return None if v is None else f"expected None, got {type(v).__name__}"


def _any_ok(v: Any) -> str | None:
    return None


def _int_ok(v: Any) -> str | None:
    return None if type(v) is int else f"expected int, got {type(v).__name__}"


def _instance(t: type) -> Any:
    def check(v: Any) -> str | None:
        ok = type(v) is t or (t is float and type(v) is int)
        return None if ok else f"expected {t.__name__}, got {type(v).__name__}"

    return check


def _union(alts: list[Any], t: Any) -> Any:
    def check(v: Any) -> str | None:
        for a in alts:
            if a(v) is None:
                return None
        return f"expected {t}, got {type(v).__name__}"

    return check


def _tuple(items: list[Any], t: Any) -> Any:
    def check(v: Any) -> str | None:
        if type(v) not in (tuple, list) or len(v) != len(items):
            return f"expected {t}, got {type(v).__name__} of {len(v) if isinstance(v, (tuple, list)) else '-'}"
        for i, (c, x) in enumerate(zip(items, v, strict=True)):
            err = c(x)
            if err:
                return f"[{i}]: {err}"
        return None

    return check


def _list(item: Any, t: Any) -> Any:
    def check(v: Any) -> str | None:
        if type(v) not in (tuple, list):  # msgpack arrays decode as tuples in the agent
            return f"expected {t}, got {type(v).__name__}"
        for i, x in enumerate(v):
            err = item(x)
            if err:
                return f"[{i}]: {err}"
        return None

    return check


def check_reply(req: Request, value: Any) -> None:
    """Raise ProtocolError unless ``value`` has ``req``'s declared reply type:
    a peer's reply is as untrusted as its request."""
    err = _reply_checker(type(req).reply, req.kind)(value)
    if err:
        raise ProtocolError(f"{req.kind} reply: {err}")


def register_request(cls: type[Request]) -> type[Request]:
    """Class decorator (over ``@dataclass(slots=True, frozen=True)``): make a
    request type known to the codec under its class name.  Fields must be
    flat wire values (see ``_WIRE_TYPES``); a field named ``path``,
    ``directory`` or ``name`` is checked to be canonical on decoding."""
    name = cls.__name__
    old = REQUEST_TYPES.get(name)
    if old is not None and old.__module__ != cls.__module__:
        raise ValueError(f"request type {name} is already registered by {old.__module__}")
    try:
        table = tuple((f.name, _WIRE_TYPES[str(f.type)]) for f in fields(cls))
    except KeyError as exc:
        raise TypeError(f"{name}: field type {exc.args[0]!r} cannot travel; use one of {list(_WIRE_TYPES)}") from None
    if "reply" not in cls.__dict__:
        raise TypeError(f"{name}: declare its reply type (reply: ClassVar[Any] = ...), e.g. None or tuple[bool, int]")
    if cls.route is not None and not {cls.route, "epoch"} <= {f.name for f in fields(cls)}:
        raise TypeError(f"{name}: a request routed by {cls.route!r} needs that field and an 'epoch' field")
    _reply_checker(cls.reply, name)  # a type the checker cannot read is a TypeError now, not at the first reply
    cls.kind = name
    REQUEST_TYPES[name] = cls
    _FIELDS[cls] = table
    return cls


# --- at the manager of a pathname -------------------------------------------------------
@register_request
@dataclass(slots=True, frozen=True)
class HomeInfo(Request):
    """Where does ``path`` live?  With ``create`` set ("file"/"dir"), the manager
    instead decides a home for a new name (EEXIST if it exists).
    Reply: (is_dir, home, lookup_path)."""

    route: ClassVar[str | None] = "path"
    reply: ClassVar[Any] = tuple[bool, int | None, int]
    path: str
    create: str | None = None
    token: int = 0  # with ``create``: names this attempt (per requester), so a late request can be refused
    epoch: int = 0  # the sender's view (``route``)


@register_request
@dataclass(slots=True, frozen=True)
class Settle(Request):
    """Failure semantics (issue 12): a create/mkdir that failed with
    ``PeerUnavailable`` (or a namespace update that was lost) sends this to the
    name's manager, which settles ``path`` from the local trees: it refuses a
    HomeInfo carrying ``token`` that arrives later, drops that attempt's
    reservation if the name was not made, keeps it (now visible) if it was.
    ``token`` 0: no reservation to abort, just re-check the name."""

    route: ClassVar[str | None] = "path"
    reply: ClassVar[Any] = None
    path: str
    token: int = 0
    epoch: int = 0  # the sender's view (``route``)


@register_request
@dataclass(slots=True, frozen=True)
class Forget(Request):
    """The file was removed at its home: drop the manager's DT entry (with
    ``home`` >= 0, only an entry naming that home: a newer one naming
    another home, e.g. a rename's over the removed file, stays)."""

    route: ClassVar[str | None] = "path"
    reply: ClassVar[Any] = None
    path: str
    epoch: int = 0  # the sender's view (``route``)
    home: int = -1


@register_request
@dataclass(slots=True, frozen=True)
class SummaryAdd(Request):
    """``node`` now holds local directory ``path``: update the manager's copy of
    that node's summary (FedFS 2.2).  ``new_dir`` marks the target of a mkdir,
    whose virtual directory is known to be empty."""

    route: ClassVar[str | None] = "path"
    reply: ClassVar[Any] = None
    path: str
    node: int
    new_dir: bool = False
    epoch: int = 0  # the sender's view (``route``)


@register_request
@dataclass(slots=True, frozen=True)
class ListVD(Request):
    """readdir of a virtual directory at its manager. Reply: [(name, is_dir)] sorted."""

    route: ClassVar[str | None] = "path"
    reply: ClassVar[Any] = list[tuple[str, bool]]
    path: str
    epoch: int = 0  # the sender's view (``route``)


@register_request
@dataclass(slots=True, frozen=True)
class Rmdir(Request):
    """Remove an empty virtual directory, at its manager."""

    route: ClassVar[str | None] = "path"
    reply: ClassVar[Any] = None
    path: str
    epoch: int = 0  # the sender's view (``route``)


# --- at the manager of a directory (the parent's manager) ----------------------------------
@register_request
@dataclass(slots=True, frozen=True)
class GetEntry(Request):
    """Look ``name`` up in virtual directory ``directory`` (dirmerge if not cached).
    Reply: (is_dir, home, lookup_path) with lookup_path 3 (VD cached) or 4 (dirmerge).

    ``flags`` (``ENTRY_*``): HOLD, a create's check: the directory's manager
    holds the name until its AddEntry (an rmdir meanwhile is told EAGAIN);
    PROBE, the error path of a dirmerge telling ENOTDIR from ENOENT: no
    further check up the tree (bounded nesting); FRESH, a settle: rebuild the
    VD from the local trees first and release the name's hold."""

    route: ClassVar[str | None] = "directory"
    reply: ClassVar[Any] = tuple[bool, int | None, int] | None
    directory: str
    name: str
    flags: int = 0
    epoch: int = 0  # the sender's view (``route``)


ENTRY_HOLD = 1
ENTRY_PROBE = 2
ENTRY_FRESH = 4


@register_request
@dataclass(slots=True, frozen=True)
class AddEntry(Request):
    route: ClassVar[str | None] = "directory"
    reply: ClassVar[Any] = None

    directory: str
    name: str
    is_dir: bool
    home: int
    epoch: int = 0  # the sender's view (``route``)


@register_request
@dataclass(slots=True, frozen=True)
class DelEntry(Request):
    """``name`` is gone from ``directory``: drop it from the VD (with ``home``
    >= 0, only a file entry naming that home, as ``Forget``)."""

    route: ClassVar[str | None] = "directory"
    reply: ClassVar[Any] = None

    directory: str
    name: str
    epoch: int = 0  # the sender's view (``route``)
    home: int = -1


# --- at a node that may hold a directory (dirmerge, rmdir) ----------------------------------
@register_request
@dataclass(slots=True, frozen=True)
class ReadDir(Request):
    """Dirmerge: this node's local entries of ``path``. Reply: [(name, is_dir)]."""

    probe: ClassVar[bool] = True
    reply: ClassVar[Any] = list[tuple[str, bool]]
    path: str


@register_request
@dataclass(slots=True, frozen=True)
class RmLocal(Request):
    reply: ClassVar[Any] = None

    path: str


@register_request
@dataclass(slots=True, frozen=True)
class SummaryPush(Request):
    """A node's whole directory-tree summary (start, join, regeneration).
    A ``fresh`` push (the node is starting) is answered with the receiver's
    own summary, so a (re)starting node learns them all in one round."""

    reply: ClassVar[Any] = bytes | None
    node: int
    summary: bytes
    fresh: bool = False


# --- at the home of a file ---------------------------------------------------------------
@register_request
@dataclass(slots=True, frozen=True)
class Create(Request):
    """Make the file at the home the manager chose.  ``mode`` (permission,
    set-id and sticky bits) and ``uid``/``gid`` are the new file's from its
    first instant (-1, ``attrs.KEEP``: the home's default), so a file made
    for a mount's user is never, even briefly or after a failure, the
    agent's; the home checks them (``attrs.check_new``: EINVAL)."""

    reply: ClassVar[Any] = None

    path: str
    token: int = 0  # the requester's attempt (``HomeInfo.token``): refused here once fenced
    mode: int = -1  # attrs.KEEP (attrs imports this module)
    uid: int = -1
    gid: int = -1


@register_request
@dataclass(slots=True, frozen=True)
class Mkdir(Request):
    """Make the directory at the home the manager chose; ``mode``/``uid``/``gid`` as ``Create``'s."""

    reply: ClassVar[Any] = None

    path: str
    token: int = 0
    mode: int = -1
    uid: int = -1
    gid: int = -1


@register_request
@dataclass(slots=True, frozen=True)
class Fence(Request):
    """A settle, at the home the manager chose for an attempt: refuse a
    Create/Mkdir of ``requester``'s attempt ``token`` that arrives from now on
    (it would make a name the manager is dropping)."""

    reply: ClassVar[Any] = None
    path: str
    requester: int
    token: int


@register_request
@dataclass(slots=True, frozen=True)
class Unlink(Request):
    reply: ClassVar[Any] = None

    path: str


@register_request
@dataclass(slots=True, frozen=True)
class Open(Request):
    reply: ClassVar[Any] = None

    path: str


@register_request
@dataclass(slots=True, frozen=True)
class Close(Request):
    reply: ClassVar[Any] = None

    path: str


@register_request
@dataclass(slots=True, frozen=True)
class Stat(Request):
    """Reply: (is_dir, size)."""

    reply: ClassVar[Any] = tuple[bool, int]
    path: str


@register_request
@dataclass(slots=True, frozen=True)
class Read(Request):
    size_field: ClassVar[str | None] = "size"
    bulk_reply: ClassVar[bool] = True
    reply: ClassVar[Any] = bytes

    path: str
    offset: int
    size: int


@register_request
@dataclass(slots=True, frozen=True)
class Write(Request):
    reply: ClassVar[Any] = int

    path: str
    offset: int
    data: bytes


@register_request
@dataclass(slots=True, frozen=True)
class Truncate(Request):
    """Cut the file to ``size`` bytes or extend it with zeros (overwrite in place)."""

    reply: ClassVar[Any] = None
    path: str
    size: int


# --- codec ------------------------------------------------------------------------------
def encode_request(req: Request) -> list[Any]:
    """A request as a msgpack-ready list: [kind, field values...] (fields are
    flat values, so no deep copy as ``dataclasses.astuple`` would make)."""
    return [req.kind, *[getattr(req, name) for name, _ in _FIELDS[type(req)]]]


def decode_request(obj: Any) -> Request:
    """Inverse of encode_request; rejects unknown kinds and wrong field types."""
    if not isinstance(obj, (list, tuple)) or not obj or not isinstance(obj[0], str):
        raise ProtocolError("a request must be a list [kind, fields...]")
    cls = REQUEST_TYPES.get(obj[0])
    if cls is None:
        raise ProtocolError(f"unknown request type {obj[0]!r}")
    want = _FIELDS[cls]
    args = obj[1:]
    if len(args) != len(want):
        raise ProtocolError(f"{obj[0]} takes {len(want)} fields, got {len(args)}")
    for a, (name, types) in zip(args, want, strict=True):
        if not isinstance(a, types) or (isinstance(a, bool) and bool not in types):
            expected = " or ".join(t.__name__ for t in types)
            raise ProtocolError(f"{obj[0]}.{name}: got {type(a).__name__}, expected {expected}")
        if name in _PATH_FIELDS:
            _check_name(obj[0], name, a)
    return cls(*args)


# Fields that carry names of the namespace: a request from the wire must carry
# them in canonical form, so no handler ever sees "..", NUL or a relative path.
_PATH_FIELDS = frozenset({"path", "directory", "name", "old", "new"})  # old/new: a rename's two paths


def _check_name(kind: str, field: str, value: str) -> None:
    if field == "name":
        ok = value not in ("", ".", "..") and "/" not in value and "\x00" not in value
    else:
        try:
            ok = normalize(value) == value
        except InvalidPath:
            ok = False
    if not ok:
        what = "name" if field == "name" else "path"
        raise ProtocolError(f"{kind}.{field}: {value!r} is not a canonical federated {what}")


def encode_error(exc: BaseException) -> list[Any]:
    """An exception as [errno, message, filename, node]; non-OS errors become EIO.
    ``node`` names the peer that did not answer (EHOSTDOWN, ``PeerUnavailable``)
    or the name's manager a redirect points at (EREMCHG, ``Redirected``)."""
    if isinstance(exc, PeerUnavailable):
        return [exc.errno, exc.reason, None, exc.node]
    if isinstance(exc, Redirected):
        return [exc.errno, exc.strerror, exc.filename, exc.node]
    if isinstance(exc, OSError) and exc.errno:
        return [exc.errno, exc.strerror or strerror(exc.errno), exc.filename, None]
    return [_errno.EIO, f"{type(exc).__name__}: {exc}", None, None]


def decode_error(obj: Any) -> OSError:
    """Rebuild the exception: OSError(errno, ...) picks the right subclass
    (FileNotFoundError, FileExistsError, NotADirectoryError ...)."""
    if not isinstance(obj, (list, tuple)) or len(obj) != 4 or not isinstance(obj[0], int):
        raise ProtocolError("an error must be [errno, message, filename, node]")
    code, msg, filename, node = obj
    if node is not None and code == _errno.EREMCHG and isinstance(filename, str):
        return Redirected(int(node), filename, str(msg))
    if node is not None:
        return PeerUnavailable(int(node), str(msg))
    if filename is None:
        return OSError(code, str(msg))
    return OSError(code, str(msg), filename)


def pack(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def unpack(data: bytes, max_size: int = 64 << 20, use_list: bool = True) -> Any:
    """Decode one message.  ``use_list=False`` gives tuples for arrays, as the
    protocol's replies are built (the real runtime decodes so)."""
    if len(data) > max_size:
        raise ProtocolError(f"message of {len(data)} bytes exceeds the {max_size}-byte limit")
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=True, max_bin_len=max_size, use_list=use_list)
    except Exception as exc:  # msgpack raises several unrelated types
        raise ProtocolError(f"garbled message: {exc}") from None


HEADER_BYTES = 16  # envelope: type, request id, source


def packed_size(obj: Any) -> int:
    """``len(pack(obj))`` computed from msgpack's format rules without
    encoding (the simulator sizes every message; packing each one, data
    included, was its largest single cost)."""
    t = type(obj)
    if t is str:
        n = len(obj) if obj.isascii() else len(obj.encode())
        return n + (1 if n < 32 else 2 if n < 256 else 3 if n < 65536 else 5)
    if t is tuple or t is list:
        return _seq_size(obj)
    if obj is None or t is bool:
        return 1
    if t is int:
        if -32 <= obj <= 127:
            return 1
        if obj < 0:
            return 2 if obj >= -128 else 3 if obj >= -32768 else 5 if obj >= -(2**31) else 9
        return 2 if obj <= 0xFF else 3 if obj <= 0xFFFF else 5 if obj <= 0xFFFFFFFF else 9
    if t is bytes or t is bytearray or t is memoryview:
        n = len(obj)
        return n + (2 if n < 256 else 3 if n < 65536 else 5)
    if t is float:
        return 9
    return len(pack(obj))


def _seq_size(seq: list[Any] | tuple[Any, ...]) -> int:
    """``packed_size`` of a list or tuple: the common items (short strings,
    None, bools, small ints, tuples of them: directory listings) sized inline."""
    n = len(seq)
    size = 1 if n < 16 else 3 if n < 65536 else 5
    for x in seq:
        t = type(x)
        if t is str and x.isascii():
            k = len(x)
            size += k + (1 if k < 32 else 2 if k < 256 else 3 if k < 65536 else 5)
        elif x is None or t is bool or (t is int and -32 <= x <= 127):
            size += 1
        else:
            size += packed_size(x)
    return size


def _request_sizer(cls: type[Request]) -> tuple[int, tuple[str, ...]]:
    """What ``packed_size(encode_request(req))`` needs for one request class:
    the size of the list header and the kind, and the field names."""
    names = tuple(name for name, _ in _FIELDS[cls])
    return packed_size([cls.kind, *[None] * len(names)]) - len(names), names


_REQUEST_SIZERS: dict[type[Request], tuple[int, tuple[str, ...]]] = {
    cls: _request_sizer(cls) for cls in REQUEST_TYPES.values()
}


def wire_size(payload: Any) -> int:
    """Bytes on the wire for a request or reply payload: the encoded size plus the envelope."""
    sizer = _REQUEST_SIZERS.get(type(payload))
    if sizer is not None:  # a request: packed_size(encode_request(payload)), field by field
        size, names = sizer
        for name in names:
            v = getattr(payload, name)
            if type(v) is str and v.isascii():  # most fields are paths and names
                n = len(v)
                size += n + (1 if n < 32 else 2 if n < 256 else 3 if n < 65536 else 5)
            else:
                size += packed_size(v)
        return HEADER_BYTES + size
    if isinstance(payload, Request):
        payload = encode_request(payload)
    elif isinstance(payload, BaseException):
        payload = encode_error(payload)
    return HEADER_BYTES + packed_size(payload)


def fs_error(code: int, path: str, detail: str | None = None) -> OSError:
    """The OSError subclass for ``code`` on ``path`` (one place builds them)."""
    return OSError(code, detail or strerror(code), path)
