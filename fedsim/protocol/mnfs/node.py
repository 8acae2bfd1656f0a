"""The mNFS member: NFS's server handlers, answered at every member, and a
client entry that sends each request where mNFS sends it.

Where requests go (``MnfsEntry.rpc`` and the data operations):

* a metadata write goes to every server, in one order: the entry sends it
  to the sequencer (``servers[0]``), which applies it first, under its one
  lock of the order (``fedsim.protocol.locks``), and only if it succeeded
  there multicasts it to the others (``Multicast``) and waits for them all
  before the next.  So every server applies the same writes in the same
  order to the same namespace and meets the same outcome, and a write that
  fails fails at the sequencer before any other server saw it (no trace).
  The paper multicasts each request straight from the client and lets the
  servers apply it in arrival order; two clients' writes of related names
  (two creates of one name, a mkdir and a mkdir inside it, a remove and a
  create) then arrive in different orders at different servers, each
  server has its own outcome, the entry reports the first error, and the
  servers' namespaces diverge (a name present at some, absent at others:
  ``tests/test_designs_properties.py``'s concurrent tests found it).  The
  sequencer is the classic fixed-sequencer total order; it costs one more
  hop per metadata write from an entry other than the sequencer's and
  serialises metadata writes, as the paper's "metadata write operations
  must be performed synchronously by all of the cluster nodes" allows;
* file data and COMMIT are not ordered (the paper: "NFS does not consider
  an order of I/O requests"): each write round is multicast straight from
  the entry.  What that leaves weaker: a write racing a truncate, or a
  removal and re-creation of its file, by another client may grow the
  file's size at some servers and not at others (a write grows a file at
  every server to max(size, end), which commutes with other writes but not
  with a truncate);
* a metadata read goes to ``servers[xid % n]``, ``xid`` the entry's
  transaction counter.  The paper multicasts it too and the servers not
  chosen drop it; the effects have no multicast whose other recipients stay
  silent (a ``Multicast`` waits for every reply), so it is sent to the
  chosen server alone, which is what it costs the servers that work;
* a write is split at chunk boundaries into rounds of at most n consecutive
  chunks (n different servers); each round is one ``Multicast`` to every
  server (``MnfsWrite``), the owner of a chunk getting its data and every
  server growing the file's size;
* a read asks the owner of each chunk (one ``Multicast`` per round).

``ino`` in the stripe formula is the file's inode number as getattr reports
it, a hash of its path (the file handle is the path, as in this framework's
NFS): renaming a file moves each chunk whose owner changes (read at the old
owner, written at the new one, zeroed at the old), after the rename every
server applied.  A read concurrent with that move may see zeros.  Hard links
are refused (EPERM): data is placed by name, and two names would be two
files.  Directories are not renamed (EXDEV, as in NFS), nor a file whose
rename would move more than ``MOVE_MAX`` bytes (EXDEV: ``mv`` copies it).

Attributes are the answering server's: its times (each server stamps its own
clock on the metadata writes it applies) and, for a file, the path's inode
number.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from typing import Any

from fedsim.protocol.attrs import KEEP, OFF_MAX, check_new, check_size, file_ino, is_regular
from fedsim.protocol.effects import Compute, Local, Multicast
from fedsim.protocol.hashing import path_hash
from fedsim.protocol.locks import Locks
from fedsim.protocol.messages import ProtocolError, Request, fs_error
from fedsim.protocol.mnfs.messages import MnfsClear, MnfsWrite
from fedsim.protocol.names import join, normalize
from fedsim.protocol.nfs.client import ClientEntry
from fedsim.protocol.nfs.messages import (
    NfsCommit,
    NfsCreate,
    NfsFsStat,
    NfsGetAttr,
    NfsLink,
    NfsMkdir,
    NfsMknod,
    NfsRead,
    NfsReadDirPlus,
    NfsRemove,
    NfsRename,
    NfsRmdir,
    NfsSetAttr,
    NfsSymlink,
    NfsTruncate,
    NfsWrite,
)
from fedsim.protocol.node import Gen, api, handles

#: the stripe unit (bytes): chunk c of a file is its bytes [c * STRIPE_UNIT, (c + 1) * STRIPE_UNIT)
STRIPE_UNIT = 8192

#: the metadata writes: every server applies each, in the sequencer's one order
ORDERED = (NfsCreate, NfsMkdir, NfsRemove, NfsRmdir, NfsRename, NfsSetAttr, NfsTruncate, NfsSymlink, NfsMknod)
#: procedures every server applies (the metadata writes; COMMIT too, unordered: every server holds part of the data)
EVERYWHERE = (*ORDERED, NfsCommit)
#: the sequencer's lock: held from a metadata write's application there until every server applied it
ORDER = "order"


def stripe_ino(path: str) -> int:
    """The ``ino`` of the stripe formula for the file at ``path``."""
    return path_hash(path)


#: the most data a rename moves between servers; a bigger file's rename is EXDEV (``mv`` then copies it)
MOVE_MAX = 1 << 30


def pieces(offset: int, size: int) -> Iterator[tuple[int, int]]:
    """[offset, offset + size) cut at chunk boundaries: (offset, length) each, lazily (a
    read's size may be far beyond the end of the file)."""
    end = offset + size
    while offset < end:
        n = min(end, (offset // STRIPE_UNIT + 1) * STRIPE_UNIT) - offset
        yield offset, n
        offset += n


def rounds(offset: int, size: int, n: int) -> Iterator[list[tuple[int, int]]]:
    """The pieces in rounds of at most ``n`` consecutive chunks (``n`` different servers)."""
    rnd: list[tuple[int, int]] = []
    for piece in pieces(offset, size):
        rnd.append(piece)
        if len(rnd) == n:
            yield rnd
            rnd = []
    if rnd:
        yield rnd


class MnfsEntry(ClientEntry):
    """Every member is a server (NFS's handlers) and an entry."""

    def __init__(self, node_id: int, spec: Any, **kw: Any) -> None:
        super().__init__(node_id, spec, **kw)
        #: the servers, in the order the stripe formula counts them: every member
        self.servers = tuple(sorted(spec.members))
        #: the transaction id of this entry's next metadata read (starts at the node's id, so
        #: the entries do not all ask the same server first)
        self.xid = node_id
        #: the server that orders the metadata writes: the first member
        self.sequencer = self.servers[0]
        self.order = Locks("mnfs")
        self.stripe_writes = 0  # MnfsWrite pieces this node stored as a chunk's owner

    def counters(self) -> dict[str, float]:
        return {**super().counters(), "stripe_writes": self.stripe_writes}

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "servers": list(self.servers), "stripe_unit": STRIPE_UNIT}

    # ------------------------------------------------------------------ placement
    def owner(self, path: str, offset: int) -> int:
        """The server holding the byte at ``offset`` of the file at ``path``."""
        return self.servers[(offset // STRIPE_UNIT + stripe_ino(path)) % len(self.servers)]

    def ino(self, path: str, attr: Any) -> Any:
        """``attr`` with a regular file's inode number made the path's (the same at every server)."""
        if attr is None or attr[0]:
            return attr
        return (*attr[:9], file_ino(self.servers[0], stripe_ino(path)))

    # ------------------------------------------------------------------ where requests go
    def _fanout(self, nodes: tuple[int, ...], requests: tuple[Request, ...]) -> Gen:
        """Each request at its node, concurrently (this node's own at once, without a
        message): a list of replies or exceptions, in ``nodes`` order."""
        out: list[Any] = [None] * len(nodes)
        others = [i for i, n in enumerate(nodes) if n != self.id]
        for i, n in enumerate(nodes):
            if n == self.id:
                try:
                    out[i] = yield from self.handle(self.id, requests[i])
                except OSError as e:
                    out[i] = e
        if len(others) == 1:
            i = others[0]
            try:
                out[i] = yield from self.call(nodes[i], requests[i])
            except OSError as e:
                out[i] = e
        elif others:
            replies = yield Multicast(tuple(nodes[i] for i in others), tuple(requests[i] for i in others))
            for i, r in zip(others, replies, strict=True):
                out[i] = r
        return out

    def everywhere(self, request: Request) -> Gen:
        """``request`` applied by every server: the replies, in server order; the first error raised."""
        return (yield from self.everywhere_each((request,) * len(self.servers)))

    def next_server(self) -> int:
        """The server of the next metadata read: round-robin by transaction id."""
        server = self.servers[self.xid % len(self.servers)]
        self.xid += 1
        return server

    def rpc(self, request: Request) -> Gen:
        if isinstance(request, ORDERED):  # the sequencer applies it everywhere (``handle``)
            if self.sequencer == self.id:
                return (yield from self.handle(self.id, request))
            return (yield from self.call(self.sequencer, request))
        if isinstance(request, EVERYWHERE):
            return (yield from self.everywhere(request))[0]
        return (yield from self.call(self.next_server(), request))

    # ------------------------------------------------------------------ the client entry
    @api(str)
    def getattr(self, path: str) -> Gen:
        path = normalize(path)
        return self.ino(path, (yield from self.rpc(NfsGetAttr(path))))

    @api(str, int, int, int, fd="opens", optional=3)
    def create_open(self, path: str, mode: int = KEEP, uid: int = KEEP, gid: int = KEEP) -> Gen:
        path = normalize(path)
        check_new(path, mode, uid, gid)
        attr = yield from self.rpc(NfsCreate(path, mode, uid, gid))
        return self._new_fd(path), self.ino(path, attr)

    @api(str)
    def readdir_attrs(self, path: str) -> Gen:
        path = normalize(path)
        entries = yield from self.rpc(NfsReadDirPlus(path))
        return [(name, d, self.ino(join(path, name), a)) for name, d, a in entries]

    @api(str, str)
    def link(self, old: str, new: str) -> Gen:
        raise fs_error(errno.EPERM, normalize(new), "mNFS places data by name: no hard links")
        yield

    @api()
    def statfs(self) -> Gen:
        """The servers' space summed (in the first one's fragment size); files: the fewest any
        server has, as every file takes an inode at every server."""
        replies = yield from self.everywhere(NfsFsStat())
        bsize, frsize, *_, namemax = replies[0]
        frsize = frsize or 1
        blocks = bfree = bavail = 0
        for _, fr, b, f, a, *_ in replies:
            fr = fr or 1
            blocks += b * fr // frsize
            bfree += f * fr // frsize
            bavail += a * fr // frsize
        files = min(r[5] for r in replies)
        ffree = min(r[6] for r in replies)
        return (bsize, frsize, blocks, bfree, bavail, files, ffree, namemax)

    @api(int, int, int, fd="uses", size_arg=2)
    def read(self, fd: int, offset: int, size: int) -> Gen:
        path = self._fd(fd)
        check_size(path, offset)
        if size < 0:
            raise fs_error(errno.EINVAL, path, f"read size {size}")
        out = []
        for rnd in rounds(offset, min(size, OFF_MAX - offset), len(self.servers)):
            yield Compute("hash")
            nodes = tuple(self.owner(path, o) for o, _ in rnd)
            replies = yield from self._fanout(nodes, tuple(NfsRead(path, o, n) for o, n in rnd))
            for (_, n), r in zip(rnd, replies, strict=True):
                if isinstance(r, BaseException):
                    raise r
                out.append(r[:n])  # a peer's reply: never more than asked
                if len(r) < n:  # the end of the file
                    return b"".join(out)
        return b"".join(out)

    @api(int, int, bytes, fd="uses")
    def write(self, fd: int, offset: int, data: bytes) -> Gen:
        path = self._fd(fd)
        check_size(path, offset)
        check_size(path, offset + len(data))
        written = 0
        for rnd in rounds(offset, len(data), len(self.servers)):
            end = rnd[-1][0] + rnd[-1][1]
            yield Compute("hash")
            mine = {self.owner(path, o): (o, n) for o, n in rnd}
            reqs = []
            for s in self.servers:
                o, n = mine.get(s, (0, 0))
                reqs.append(MnfsWrite(path, o, data[o - offset : o - offset + n], end))
            replies = yield from self.everywhere_each(tuple(reqs))
            written += sum(min(r, len(q.data)) for r, q in zip(replies, reqs, strict=True))
        return written

    def everywhere_each(self, requests: tuple[Request, ...]) -> Gen:
        """The i-th request at the i-th server; the first error raised."""
        replies = yield from self._fanout(self.servers, requests)
        for r in replies:
            if isinstance(r, BaseException):
                raise r
        return replies

    @api(str, str)
    def rename(self, old: str, new: str) -> Gen:
        """Renamed at every server; then each chunk whose owner the new name changes moved."""
        old, new = normalize(old), normalize(new)
        attr = yield from self.rpc(NfsGetAttr(old))
        n_servers = len(self.servers)
        moves = not attr[0] and is_regular(attr[1]) and stripe_ino(old) % n_servers != stripe_ino(new) % n_servers
        if moves and attr[5] > MOVE_MAX:
            raise fs_error(errno.EXDEV, old, f"renaming would move {attr[5]} bytes between servers")
        yield from self.rpc(NfsRename(old, new))
        if not moves or old == new:
            return  # every chunk keeps its server
        for o, n in pieces(0, attr[5]):
            was, now = self.servers[(o // STRIPE_UNIT + stripe_ino(old)) % n_servers], self.owner(new, o)
            data = yield from self.call(was, NfsRead(new, o, n))
            if data:
                yield from self.call(now, MnfsWrite(new, o, data, o + len(data)))
                yield from self.call(was, MnfsClear(new, o, len(data)))

    # ------------------------------------------------------------------ at every server
    def handle(self, src: int, request: Request) -> Gen:
        """A metadata write: at the sequencer, applied there and then at every other server, in
        its one order; at any other server, applied, if the sequencer sent it (an entry's own
        would be out of that order)."""
        if not isinstance(request, ORDERED) or len(self.servers) == 1:
            return (yield from super().handle(src, request))
        if self.id != self.sequencer:
            if src != self.sequencer:
                raise ProtocolError(f"node {src} -> {self.id}: an mNFS metadata write comes from the sequencer")
            return (yield from super().handle(src, request))
        return (yield from self.order.holding(ORDER, self._sequenced(src, request)))

    def _sequenced(self, src: int, request: Request) -> Gen:
        """At the sequencer, holding the order: ``request`` applied here (its outcome is every
        server's), then at every other server; their first error raised."""
        reply = yield from super().handle(src, request)
        others = tuple(s for s in self.servers if s != self.id)
        for r in (yield from self._fanout(others, (request,) * len(others))):
            if isinstance(r, BaseException):
                raise r
        return reply

    def _serving(self, path: str) -> None:
        """EINVAL unless this node is a server (every member is)."""
        if self.id not in self.servers:
            raise fs_error(errno.EINVAL, path, f"node {self.id} is no mNFS server")
        self.served += 1

    def _check_piece(self, path: str, offset: int, length: int) -> None:
        check_size(path, offset)
        if length < 0 or length > STRIPE_UNIT - offset % STRIPE_UNIT:
            raise fs_error(errno.EINVAL, path, f"{length} bytes at {offset} are not within one chunk")

    @handles(MnfsWrite)
    def on_mnfs_write(self, src: int, req: MnfsWrite) -> Gen:
        self._serving(req.path)
        self._check_piece(req.path, req.offset, len(req.data))
        check_size(req.path, req.end)
        if req.data and self.owner(req.path, req.offset) != self.id:
            raise fs_error(errno.EINVAL, req.path, f"node {self.id} does not own the chunk at {req.offset}")
        yield Local("open", req.path)
        n = 0
        if req.data:
            n = yield Local("write", req.path, (req.offset, req.data))
            self.stripe_writes += 1
        _, size = yield Local("stat", req.path)
        if size < req.end:
            if self.owner(req.path, req.end - 1) == self.id:
                raise fs_error(errno.EINVAL, req.path, f"growing to {req.end} would overwrite node {self.id}'s data")
            yield Local("write", req.path, (req.end - 1, b"\0"))  # a byte of a chunk held elsewhere: a hole here
        return n

    @handles(MnfsClear)
    def on_mnfs_clear(self, src: int, req: MnfsClear) -> Gen:
        self._serving(req.path)
        self._check_piece(req.path, req.offset, req.length)
        if self.owner(req.path, req.offset) == self.id:
            raise fs_error(errno.EINVAL, req.path, f"node {self.id} owns the chunk at {req.offset}")
        yield Local("open", req.path)
        _, size = yield Local("stat", req.path)
        n = max(0, min(req.length, size - req.offset))
        if n:
            yield Local("write", req.path, (req.offset, bytes(n)))

    @handles(NfsWrite)
    def on_write(self, src: int, req: NfsWrite) -> Gen:
        raise ProtocolError("mNFS writes are striped (MnfsWrite), not NFS WRITEs")
        yield

    @handles(NfsLink)
    def on_link(self, src: int, req: NfsLink) -> Gen:
        raise fs_error(errno.EPERM, req.new, "mNFS places data by name: no hard links")
        yield
