"""NFSp's own requests: the meta-server's answer to a read (where the data
is) and the I/O daemons' procedures.  Everything else a client asks is an
NFS procedure (``fedsim.protocol.nfs.messages``): to its clients the
meta-server is an NFS server."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from fedsim.protocol.messages import Request, register_request


@register_request
@dataclass(slots=True, frozen=True)
class NfspRead(Request):
    """READ at the meta-server, which checks the file and names the I/O
    daemon that holds its data.  Reply: that daemon's node."""

    reply: ClassVar[Any] = int
    path: str
    offset: int
    size: int


@register_request
@dataclass(slots=True, frozen=True)
class IodRead(Request):
    """The data of a READ, from the I/O daemon holding the file (nothing past what it holds)."""

    size_field: ClassVar[str | None] = "size"
    bulk_reply: ClassVar[bool] = True
    reply: ClassVar[Any] = bytes
    path: str
    offset: int
    size: int


@register_request
@dataclass(slots=True, frozen=True)
class IodWrite(Request):
    """A WRITE the meta-server forwards (the file made at the daemon on its first write).  Reply: bytes written."""

    reply: ClassVar[Any] = int
    path: str
    offset: int
    data: bytes


@register_request
@dataclass(slots=True, frozen=True)
class IodTruncate(Request):
    reply: ClassVar[Any] = None
    path: str
    size: int


@register_request
@dataclass(slots=True, frozen=True)
class IodRemove(Request):
    """Drop a file's data (none held: nothing to do)."""

    reply: ClassVar[Any] = None
    path: str


@register_request
@dataclass(slots=True, frozen=True)
class IodRename(Request):
    """Move a file's data to its new name at the same daemon, replacing the data held there."""

    reply: ClassVar[Any] = None
    old: str
    new: str


@register_request
@dataclass(slots=True, frozen=True)
class IodCommit(Request):
    reply: ClassVar[Any] = None
    path: str
