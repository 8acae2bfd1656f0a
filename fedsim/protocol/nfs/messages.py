"""The NFS procedures (RFC 1813's, as this design uses them) as requests.

One request type per procedure, with typed fields: the codec checks every
field of a request from the wire (types; paths canonical), so the server
never sees a relative path or a name with NUL, and no name from the wire
selects code (there is no "operation" string to dispatch on).  Replies are
the local layer's values (``fedsim.protocol.effects.LOCAL_OPS``), with
inode numbers made federated (``attrs.federated``).

Names are prefixed ``Nfs``: the codec knows request types by class name,
across every design.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from fedsim.protocol.attrs import ATTR_WIRE, STATFS_WIRE
from fedsim.protocol.messages import Request, register_request


@register_request
@dataclass(slots=True, frozen=True)
class NfsLookup(Request):
    """LOOKUP of ``path``.  Reply: (is_dir, size)."""

    reply: ClassVar[Any] = tuple[bool, int]
    path: str


@register_request
@dataclass(slots=True, frozen=True)
class NfsGetAttr(Request):
    """GETATTR.  Reply: ``attrs.Attr`` as a tuple."""

    reply: ClassVar[Any] = ATTR_WIRE
    path: str


@register_request
@dataclass(slots=True, frozen=True)
class NfsSetAttr(Request):
    """SETATTR: chmod, chown and utimens in one (``attrs.KEEP``, ``UTIME_OMIT``)."""

    reply: ClassVar[Any] = None
    path: str
    mode: int
    uid: int
    gid: int
    atime_ns: int
    mtime_ns: int


@register_request
@dataclass(slots=True, frozen=True)
class NfsTruncate(Request):
    """SETATTR of the size: cut or extend a regular file."""

    reply: ClassVar[Any] = None
    path: str
    size: int


@register_request
@dataclass(slots=True, frozen=True)
class NfsAccess(Request):
    """ACCESS at open: the name is a regular file the client may use."""

    reply: ClassVar[Any] = None
    path: str


@register_request
@dataclass(slots=True, frozen=True)
class NfsRead(Request):
    """READ.  Reply: the bytes (short at the end of the file)."""

    size_field: ClassVar[str | None] = "size"
    bulk_reply: ClassVar[bool] = True
    reply: ClassVar[Any] = bytes
    path: str
    offset: int
    size: int


@register_request
@dataclass(slots=True, frozen=True)
class NfsWrite(Request):
    """WRITE, stable (FILE_SYNC: the reply means the data is at the server).  Reply: bytes written."""

    reply: ClassVar[Any] = int
    path: str
    offset: int
    data: bytes


@register_request
@dataclass(slots=True, frozen=True)
class NfsCreate(Request):
    """CREATE, exclusive.  Reply: the new file's attributes (NFSv3 returns them: post-op attributes)."""

    reply: ClassVar[Any] = ATTR_WIRE
    path: str
    mode: int
    uid: int
    gid: int


@register_request
@dataclass(slots=True, frozen=True)
class NfsMkdir(Request):
    reply: ClassVar[Any] = None
    path: str
    mode: int
    uid: int
    gid: int


@register_request
@dataclass(slots=True, frozen=True)
class NfsRemove(Request):
    reply: ClassVar[Any] = None
    path: str


@register_request
@dataclass(slots=True, frozen=True)
class NfsRmdir(Request):
    reply: ClassVar[Any] = None
    path: str


@register_request
@dataclass(slots=True, frozen=True)
class NfsRename(Request):
    reply: ClassVar[Any] = None
    old: str
    new: str


@register_request
@dataclass(slots=True, frozen=True)
class NfsReadDir(Request):
    """READDIR.  Reply: [(name, is_dir)], sorted."""

    reply: ClassVar[Any] = list[tuple[str, bool]]
    path: str


@register_request
@dataclass(slots=True, frozen=True)
class NfsReadDirPlus(Request):
    """READDIRPLUS.  Reply: [(name, is_dir, attributes or None)], sorted."""

    reply: ClassVar[Any] = list[tuple[str, bool, ATTR_WIRE | None]]
    path: str


@register_request
@dataclass(slots=True, frozen=True)
class NfsFsStat(Request):
    """FSSTAT of the server's file system.  Reply: ``attrs.StatFS`` as a tuple."""

    reply: ClassVar[Any] = STATFS_WIRE


@register_request
@dataclass(slots=True, frozen=True)
class NfsCommit(Request):
    """COMMIT (fsync): the file's data and metadata to stable storage."""

    reply: ClassVar[Any] = None
    path: str


@register_request
@dataclass(slots=True, frozen=True)
class NfsSymlink(Request):
    reply: ClassVar[Any] = None
    path: str
    target: str


@register_request
@dataclass(slots=True, frozen=True)
class NfsReadLink(Request):
    reply: ClassVar[Any] = str
    path: str


@register_request
@dataclass(slots=True, frozen=True)
class NfsMknod(Request):
    reply: ClassVar[Any] = None
    path: str
    mode: int


@register_request
@dataclass(slots=True, frozen=True)
class NfsLink(Request):
    """LINK: ``new`` another name of ``old``."""

    reply: ClassVar[Any] = None
    old: str
    new: str
