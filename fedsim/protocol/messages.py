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
import os
from dataclasses import dataclass, fields
from typing import Any, ClassVar

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


class ProtocolError(ValueError):
    """A message that cannot be decoded: garbled, truncated, unknown type."""


@dataclass(slots=True, frozen=True)
class Request:
    """Base of all requests; ``kind`` is the wire name (the class name)."""

    kind: ClassVar[str] = "Request"


_REGISTRY: dict[str, type[Request]] = {}


def _register(cls: type[Request]) -> type[Request]:
    cls.kind = cls.__name__
    _REGISTRY[cls.__name__] = cls
    return cls


# --- at the manager of a pathname -------------------------------------------------------
@_register
@dataclass(slots=True, frozen=True)
class HomeInfo(Request):
    """Where does ``path`` live?  With ``create`` set ("file"/"dir"), the manager
    instead decides a home for a new name (EEXIST if it exists).
    Reply: (is_dir, home, lookup_path)."""

    path: str
    create: str | None = None


@_register
@dataclass(slots=True, frozen=True)
class Forget(Request):
    """The file was removed at its home: drop the manager's DT entry."""

    path: str


@_register
@dataclass(slots=True, frozen=True)
class SummaryAdd(Request):
    """``node`` now holds local directory ``path``: update the manager's copy of
    that node's summary (FedFS 2.2).  ``new_dir`` marks the target of a mkdir,
    whose virtual directory is known to be empty."""

    path: str
    node: int
    new_dir: bool = False


@_register
@dataclass(slots=True, frozen=True)
class ListVD(Request):
    """readdir of a virtual directory at its manager. Reply: [(name, is_dir)] sorted."""

    path: str


@_register
@dataclass(slots=True, frozen=True)
class Rmdir(Request):
    """Remove an empty virtual directory, at its manager."""

    path: str


# --- at the manager of a directory (the parent's manager) ----------------------------------
@_register
@dataclass(slots=True, frozen=True)
class GetEntry(Request):
    """Look ``name`` up in virtual directory ``directory`` (dirmerge if not cached).
    Reply: (is_dir, home, lookup_path) with lookup_path 3 (VD cached) or 4 (dirmerge)."""

    directory: str
    name: str


@_register
@dataclass(slots=True, frozen=True)
class AddEntry(Request):
    directory: str
    name: str
    is_dir: bool
    home: int


@_register
@dataclass(slots=True, frozen=True)
class DelEntry(Request):
    directory: str
    name: str


# --- at a node that may hold a directory (dirmerge, rmdir) ----------------------------------
@_register
@dataclass(slots=True, frozen=True)
class ReadDir(Request):
    """Dirmerge: this node's local entries of ``path``. Reply: [(name, is_dir)]."""

    path: str


@_register
@dataclass(slots=True, frozen=True)
class RmLocal(Request):
    path: str


@_register
@dataclass(slots=True, frozen=True)
class SummaryPush(Request):
    """A node's whole directory-tree summary (start, join, regeneration)."""

    node: int
    summary: bytes


# --- at the home of a file ---------------------------------------------------------------
@_register
@dataclass(slots=True, frozen=True)
class Create(Request):
    path: str


@_register
@dataclass(slots=True, frozen=True)
class Mkdir(Request):
    path: str


@_register
@dataclass(slots=True, frozen=True)
class Unlink(Request):
    path: str


@_register
@dataclass(slots=True, frozen=True)
class Open(Request):
    path: str


@_register
@dataclass(slots=True, frozen=True)
class Close(Request):
    path: str


@_register
@dataclass(slots=True, frozen=True)
class Stat(Request):
    """Reply: (is_dir, size)."""

    path: str


@_register
@dataclass(slots=True, frozen=True)
class Read(Request):
    path: str
    offset: int
    size: int


@_register
@dataclass(slots=True, frozen=True)
class Write(Request):
    path: str
    offset: int
    data: bytes


REQUEST_TYPES: dict[str, type[Request]] = dict(_REGISTRY)

# One table per request class: (field name, accepted types).  encode_request
# reads the names; decode_request checks the types, so a message whose fields
# have the wrong types is rejected before any handler sees it.
_WIRE_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "bool": (bool,),
    "bytes": (bytes,),
    "str | None": (str, type(None)),
}
_FIELDS: dict[type[Request], tuple[tuple[str, tuple[type, ...]], ...]] = {
    cls: tuple((f.name, _WIRE_TYPES[str(f.type)]) for f in fields(cls)) for cls in REQUEST_TYPES.values()
}


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
_PATH_FIELDS = frozenset({"path", "directory", "name"})


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
    """An exception as [errno, message, filename, node]; non-OS errors become EIO."""
    if isinstance(exc, PeerUnavailable):
        return [exc.errno, exc.reason, None, exc.node]
    if isinstance(exc, OSError) and exc.errno:
        return [exc.errno, exc.strerror or os.strerror(exc.errno), exc.filename, None]
    return [_errno.EIO, f"{type(exc).__name__}: {exc}", None, None]


def decode_error(obj: Any) -> OSError:
    """Rebuild the exception: OSError(errno, ...) picks the right subclass
    (FileNotFoundError, FileExistsError, NotADirectoryError ...)."""
    if not isinstance(obj, (list, tuple)) or len(obj) != 4 or not isinstance(obj[0], int):
        raise ProtocolError("an error must be [errno, message, filename, node]")
    code, msg, filename, node = obj
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
    return OSError(code, detail or os.strerror(code), path)
