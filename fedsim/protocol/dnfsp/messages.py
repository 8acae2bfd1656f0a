"""dNFSp's requests between meta-servers (dNFSp paper, sections 2-3).
Everything a client asks is an NFS procedure (``fedsim.protocol.nfs``) at its
own meta-server; the data travels as NFSp's (``fedsim.protocol.nfsp``).

A name's metadata travels as ``Meta``: (mode, size, symlink target or "");
a reply is checked against it like any value from the wire, and the
receiver checks it again before installing it (``meta.DnfspMeta._install``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from fedsim.protocol.messages import Request, register_request

#: a name's metadata between meta-servers: (mode, size, symlink target or "")
Meta = tuple[int, int, str]


@register_request
@dataclass(slots=True, frozen=True)
class DnfspFetch(Request):
    """dNFSp1: a meta-server that misses ``path`` asks every other one.
    Reply: its metadata, or None if this meta-server does not know the name."""

    reply: ClassVar[Any] = Meta | None
    path: str


@register_request
@dataclass(slots=True, frozen=True)
class DnfspToken(Request):
    """dNFSp2: at the name's hash server, the token of ``path`` for the sender.
    Reply: (the node to fetch the metadata from, the metadata if that node is
    the hash server itself, else None, whether that metadata is in this reply);
    the token is the sender's from now on.  Not in the reply (the hash server
    holds the name in a procedure of its own): it follows as a ``DnfspGive``
    once that procedure has ended."""

    callback: ClassVar[bool] = True  # never waits: a token's holder gets it through (``meta``)
    reply: ClassVar[Any] = tuple[int, Meta | None, bool]
    path: str


@register_request
@dataclass(slots=True, frozen=True)
class DnfspHandOver(Request):
    """dNFSp2: from the hash server's answer, to the meta-server that held the
    token: its metadata of ``path`` (None: it removed the name), and it gives
    the token up.  Only the hash server's arbitration makes it the sender's.
    Reply: (the metadata, whether it is in this reply); not in it (the holder
    is in a procedure on the name, or still waits for the token itself), it
    follows as a ``DnfspGive`` once the holder is done with the name."""

    callback: ClassVar[bool] = True  # never waits: a token's holder gets it through (``meta``)
    reply: ClassVar[Any] = tuple[Meta | None, bool]
    path: str


@register_request
@dataclass(slots=True, frozen=True)
class DnfspGive(Request):
    """dNFSp2, one-way: the metadata of ``path`` (``found`` False: no such name)
    a ``DnfspToken`` or ``DnfspHandOver`` reply said would follow, from the node
    that gave the token up, to its next holder."""

    callback: ClassVar[bool] = True  # never waits: a token's holder gets it through (``meta``)
    reply: ClassVar[Any] = None
    path: str
    found: bool
    mode: int
    size: int
    target: str
