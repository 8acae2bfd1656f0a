"""mNFS's own requests; every other procedure is NFS's (``fedsim.protocol.nfs.messages``),
sent to every server or to one (``node.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from fedsim.protocol.messages import Request, register_request


@register_request
@dataclass(slots=True, frozen=True)
class MnfsWrite(Request):
    """One round of a striped WRITE, as each server receives the multicast:
    the server owning a chunk of the round gets its piece (``data`` at
    ``offset``, within that chunk); every server, owner or not, makes its
    file at least ``end`` bytes long (the file's size is metadata, which every
    server holds).  A server owning no piece gets ``data`` empty: the wire
    carries the data once, to its owner.  Reply: bytes of ``data`` written."""

    reply: ClassVar[Any] = int
    path: str
    offset: int
    data: bytes
    end: int


@register_request
@dataclass(slots=True, frozen=True)
class MnfsClear(Request):
    """Zero ``length`` bytes at ``offset`` of a chunk this server no longer
    owns (its data moved to the owner the new name's stripe names, at a
    rename).  Never grows the file.  Reply: None."""

    reply: ClassVar[Any] = None
    path: str
    offset: int
    length: int
