"""Attributes, file-system figures and durability: the operations a mounted
federation needs beyond FedFS's file API (issue 15): ``getattr``,
``setattr`` (chmod, chown, utimens), ``statfs`` and ``fsync``.

A regular file's attributes are its home's, answered from its local file
system (``GetAttr``/``SetAttr``).  ``getattr`` is the operation a mount calls
most (every path component the kernel looks up), so it, and ``setattr``
with it, take one round trip less than a lookup followed by a request
(``_by_name``): a requester that knows the file's home (its DT, lookup path
1) asks the home; any other asks the name's manager (``PathAttr``,
``PathSetAttr``), which resolves the name (its DT or the parent's manager,
paths 2-4) and serves a directory itself or forwards to the file's home,
and the requester caches the home it is told.

A directory exists on every node that holds it, each copy with its own
mode, owner and times, so one rule picks the answer and keeps giving it:

* ``getattr`` of a directory is its mode and owners at the *lowest-numbered
  holder* its manager knows (the holders of its virtual directory, known
  from the last dirmerge; the manager of a directory is the node that holds
  its VD), skipping the holders whose copy the federation made only to hold
  a file (a create's missing parents, ``Home.implicit_dirs``): such a copy
  appears, with its node's default mode, whenever a file is placed on a node
  that did not hold the directory, and must not change the answer.  Only if
  every copy is such a one does the lowest of them answer.  If a holder does
  not answer or lost the directory, the next one answers, and the silent one
  is a suspect (``Node.suspects``, as for a dirmerge) asked after the others
  for ``SUSPECT_S``: a dead member costs one timeout, not one per getattr.
  (Which copies are implicit is a node's memory: after a restart its
  implicit copies count as its own.)  The root is held by every member (the
  top of its local tree), so a requester asks the lowest member directly.
  ``nlink`` is 1, "unknown", as btrfs reports for directories,
  so that ``find`` does not use the leaf optimisation (the link count at one
  holder says nothing about the union's subdirectories); ``size`` is 0 (a
  union has no size of its own); ``ino`` comes from the path
  (``fedsim.protocol.attrs``).
* ``setattr`` of a directory applies at *every* holder, lowest first, so the
  rule above keeps answering what was set whichever holder answers.  The
  merge asks every candidate (as rmdir's does); if one may hold the directory
  but does not answer, nothing is changed and the error names it.  The
  lowest holder goes first: if it refuses (EPERM), nothing has changed.  A
  later holder refusing (its copy belongs to another user) leaves the copies
  before it changed and reports its error: the answer getattr gives already
  shows the change, and a repeat of the call finishes it.  A holder whose
  copy is gone (ENOENT) is passed over, as getattr passes it over: a copy
  the federation made only to hold a file is pruned when that file leaves
  (an unlink, a rename across directories), and the VD, built before, still
  lists its node until the next merge (found by the posix differential test:
  a chmod of a directory a file was renamed out of was ENOENT, and had
  changed the lower holders' copies already).  Only if no holder has a copy
  is the answer ENOENT.
* a directory's times are the *newest* of all its copies' (issue 22,
  "timestamps as POSIX says"): an entry is made or removed at one node, in
  that node's copy, so only the newest copy shows that the union changed.
  So the manager asks every holder at once (``HolderAttr`` to each, one
  round trip, ``_every_holder``; before, one holder, the lowest, answered,
  and a create whose home was another node left the directory's mtime as it
  was).  A copy made to hold a file counts here: it was made by a change of
  the directory.  When such a copy is removed again (pruned: its last entry
  left, ``Home._prune``), its times would leave the answer with it, and the
  directory's times would go *back* on that unlink, rename or rmdir; the
  pruning node tells the directory's manager (``CopyPruned``), which sets the
  mtime and ctime of the lowest other holder's copy to its now.  That costs
  two messages, only when a copy is pruned, and is best effort: a manager
  that does not have the directory's VD cached, or no other holder that
  answers, leaves the times as the remaining copies have them.  Known
  exceptions, documented in the README: the holders' clocks are compared
  (synchronise them); a copy made or pruned in a subdirectory's parent (a
  create in ``/a/b`` at a node that held no ``/a/b``) moves ``/a``'s times
  too, at that node, although ``/a``'s entries did not change; a migration
  moves its file's directory's times; a suspect holder (not asked for
  ``SUSPECT_S``) is missed.  A setattr (chmod, chown, utimens)
  reaches every copy, so it sets what the rule answers.

``UTIME_NOW`` is the clock of the node whose local file system holds the
entry (each holder's, for a directory), as for any file system served over
a network.

``statfs`` is the aggregate of every member's local file system, as mNFS's
STATFS is: one ``FsStat`` multicast to the other members, their answers and
the requester's own summed (sizes in bytes, rebased to the smallest fragment
size; ``namemax`` the smallest).  A member that does not answer (down,
unreachable, its root lost) is left out: the figures are then a lower bound
of the federation's, and ``df`` or a program checking free space keeps
working while one member is down (its own files fail with EHOSTDOWN).

``fsync`` flushes a file at its home (``os.fsync`` of the real file; the
simulator's storage model charges a disk flush).

``readdir_attrs`` is ``readdir`` with every entry's ``getattr`` (what ``ls
-l``, ``find -ls`` and a mount's readdirplus need) in two round trips of the
requester, whatever the number of entries: the listing at the directory's
manager (``ListHomes``: each name with its home, and the directory's
holders), then one ``EntryAttrs`` per node, all sent at once (``Multicast``
of one request per node), carrying the names whose attributes it gives: a
file's to its home, each subdirectory's to every holder of the directory
(a node holding ``/d/s`` holds ``/d``), at most ``ATTR_BATCH`` names or
``ATTR_BATCH_BYTES`` per request (more go in several, in the same multicast).
A subdirectory's attributes follow getattr's rule over the answers: the
lowest holder's that is not a copy made for a file, else the lowest copy's,
with the newest times of them all.
That takes no extra round trip and gives getattr's answer whenever the
directory's holders as its parent's VD knows them are its own holders (as
after any merge; a holder made outside the federation since the parent's
VD was built is missed until that VD is rebuilt, as readdir misses its
names).  A name gone between the listing and its attributes (removed,
renamed) is left out, as a local readdir would; one whose attributes are
busy or moved (a rename or migration in flight: EAGAIN, ESTALE) is asked
again by ``getattr``; one whose home or holders did not answer (down, a
suspect not asked again for ``SUSPECT_S``) is listed with no attributes
(None), so a listing survives a dead member as readdir does.

``stat`` stays as it was, the cheap ``(is_dir, size)`` of FedFS's file API:
it is what the Table 2 study and the workloads time, and its two-value reply
is what their simulated message sizes were calibrated with; a ``getattr``
reply carries ten values.  Both end at a file's home, so for a file ``stat``
is ``getattr`` minus the attributes; for a directory ``stat`` needs only the
lookup (``fednode.tools.attr_bench`` prints the two side by side).
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from fedsim.protocol.attrs import (
    ATTR_WIRE,
    KEEP,
    STATFS_WIRE,
    UTIME_NOW,
    UTIME_OMIT,
    check_setattr,
    check_size,
    federated,
)
from fedsim.protocol.effects import NOW, Compute, Local, Multicast
from fedsim.protocol.fedfs.directory import SUSPECT_S
from fedsim.protocol.fedfs.home import OrphanAttr, OrphanSetAttr, OrphanSync
from fedsim.protocol.fedfs.rename import Renaming
from fedsim.protocol.fedfs.requester import ORPHAN_REQUESTS
from fedsim.protocol.messages import (
    PeerUnavailable,
    ProtocolError,
    Request,
    Truncate,
    fs_error,
    pack,
    register_request,
    unpack,
)
from fedsim.protocol.names import ROOT, InvalidPath, join, normalize
from fedsim.protocol.node import Gen, api, handles
from fedsim.protocol.tables import DTEntry

_U64 = (1 << 64) - 1  # statfs figures are unsigned 64-bit counts
#: names one ``EntryAttrs`` carries at most, and their packed bytes at most:
#: a request of at most 64 KB and a reply of about 40 KB (some 75 bytes per
#: name), whatever the names; a home of more files of one directory gets
#: several, in the same multicast
ATTR_BATCH = 512
ATTR_BATCH_BYTES = 64 << 10
#: errnos of a name in an ``EntryAttrs`` reply that mean "gone": left out of the listing
_GONE_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR})
#: ... that mean "busy or moved" (a rename or migration in flight): asked again by ``getattr``
_AGAIN_ERRNOS = frozenset({errno.EAGAIN, errno.ESTALE})
_GONE = object()  # ``_pick``'s verdicts besides attributes and None
_AGAIN = object()


# --- at the home of a file, or at a holder of a directory ------------------------------------
@register_request
@dataclass(slots=True, frozen=True)
class GetAttr(Request):
    """This node's local attributes of ``path``, with the federated inode
    number.  Reply: ``attrs.Attr`` as a tuple."""

    reply: ClassVar[Any] = ATTR_WIRE
    path: str


@register_request
@dataclass(slots=True, frozen=True)
class SetAttr(Request):
    """Change ``path``'s attributes in this node's local file system (KEEP /
    UTIME_OMIT leave one as it is; see ``attrs``)."""

    reply: ClassVar[Any] = None
    path: str
    mode: int
    uid: int
    gid: int
    atime_ns: int
    mtime_ns: int


@register_request
@dataclass(slots=True, frozen=True)
class Fsync(Request):
    """Flush the file to stable storage at its home."""

    reply: ClassVar[Any] = None
    path: str


# a descriptor's fstat and fsync of a file unlinked while open (``home.py``)
ORPHAN_REQUESTS[GetAttr] = lambda n, r: OrphanAttr(n)
ORPHAN_REQUESTS[Fsync] = lambda n, r: OrphanSync(n)
ORPHAN_REQUESTS[SetAttr] = lambda n, r: OrphanSetAttr(n, r.mode, r.uid, r.gid, r.atime_ns, r.mtime_ns)

@register_request
@dataclass(slots=True, frozen=True)
class FsStat(Request):
    """This member's local file system figures (``statfs``).  Reply: ``attrs.StatFS`` as a tuple."""

    reply: ClassVar[Any] = STATFS_WIRE


# --- at a holder of a directory, from its manager --------------------------------------------
@register_request
@dataclass(slots=True, frozen=True)
class HolderAttr(Request):
    """This holder's attributes of directory ``path`` and whether its copy was
    made only to hold a file (module docstring).  Reply: (implicit, attr)."""

    reply: ClassVar[Any] = tuple[bool, ATTR_WIRE]
    path: str


@register_request
@dataclass(slots=True, frozen=True)
class EntryAttrs(Request):
    """This node's attributes of entries of ``directory``: ``names`` packs
    their names (``pack_names``: at most ``ATTR_BATCH``, ``ATTR_BATCH_BYTES``).
    Reply, per name in order: (implicit, attr) as ``HolderAttr``'s, or the
    errno its local getattr failed with."""

    reply: ClassVar[Any] = list[tuple[bool, ATTR_WIRE] | int]
    directory: str
    names: bytes


def pack_names(names: list[str]) -> bytes:
    return pack(names)


def unpack_names(directory: str, data: bytes) -> list[str]:
    """``EntryAttrs.names`` from the wire: an array of at most ATTR_BATCH
    names, each making a canonical path under ``directory`` (no "/", "." or
    "..", NUL, over-long or reserved name), within ATTR_BATCH_BYTES
    (ProtocolError otherwise: a peer's request is untrusted)."""
    if len(data) > ATTR_BATCH_BYTES:
        raise ProtocolError(f"EntryAttrs: names of {len(data)} bytes, more than {ATTR_BATCH_BYTES}")
    obj = unpack(data, max_size=ATTR_BATCH_BYTES, use_list=False)
    if type(obj) is not tuple or len(obj) > ATTR_BATCH:
        raise ProtocolError(f"EntryAttrs: names must be an array of at most {ATTR_BATCH} names")
    for name in obj:
        if type(name) is not str or not name or "/" in name:
            raise ProtocolError(f"EntryAttrs: {name!r} is not a name")
        path = join(directory, name)
        try:
            ok = normalize(path) == path
        except InvalidPath:  # (ReservedPath too: the replica space is no entry)
            ok = False
        if not ok:
            raise ProtocolError(f"EntryAttrs: {name!r} is not a canonical name in {directory}")
    return list(obj)


def name_batches(names: list[str]) -> list[list[str]]:
    """``names`` cut into EntryAttrs batches: at most ATTR_BATCH names and
    ATTR_BATCH_BYTES packed each (a name costs at most its bytes plus 3)."""
    out: list[list[str]] = []
    batch: list[str] = []
    size = 5  # the array's header, at most
    for name in names:
        n = len(name.encode("utf-8", "surrogateescape")) + 3
        if batch and (len(batch) == ATTR_BATCH or size + n > ATTR_BATCH_BYTES):
            out.append(batch)
            batch, size = [], 5
        batch.append(name)
        size += n
    if batch:
        out.append(batch)
    return out


# --- at the manager of a name ---------------------------------------------------------------
@register_request
@dataclass(slots=True, frozen=True)
class CopyPruned(Request):
    """The sender removed its implicit copy of directory ``path`` right after an
    entry left it: the directory's manager touches another copy (module docstring)."""

    route: ClassVar[str | None] = "path"
    reply: ClassVar[Any] = None
    path: str
    epoch: int = 0  # the sender's view (``route``)


@register_request
@dataclass(slots=True, frozen=True)
class ListHomes(Request):
    """``readdir_attrs``'s listing at the directory's manager. Reply: (sorted
    [(name, home or None for a directory)], the directory's holders sorted)."""

    route: ClassVar[str | None] = "path"
    reply: ClassVar[Any] = tuple[list[tuple[str, int | None]], list[int]]
    path: str
    epoch: int = 0  # the sender's view (``route``)


# (the same fields as GetAttr and SetAttr; their own types, because the
# manager's handlers differ: they resolve the name and pick or reach the holders)
@register_request
@dataclass(slots=True, frozen=True)
class PathAttr(GetAttr):
    """getattr at ``path``'s manager (module docstring).  Reply: (the
    attributes, the file's home or None for a directory, the lookup path)."""

    reply: ClassVar[Any] = tuple[ATTR_WIRE, int | None, int]


@register_request
@dataclass(slots=True, frozen=True)
class PathSetAttr(SetAttr):
    """setattr at ``path``'s manager: a directory's at every holder, lowest
    first, a file's at its home.  Reply: (None, the file's home or None, the lookup path)."""

    reply: ClassVar[Any] = tuple[None, int | None, int]


class Attributes(Renaming):
    # ------------------------------------------------------------------ the client API
    @api(str)
    def getattr(self, path: str) -> Gen:
        """``attrs.Attr`` of ``path`` (as a tuple): a file's from its home, a directory's by the rule above."""
        path = normalize(path)
        yield Compute("fedfs_op")
        if path == ROOT:  # every member holds it (its local tree's top): all asked at once, no manager needed
            return (yield from self._every_holder(ROOT, sorted(self.members)))
        return (yield from self._by_name(path, GetAttr, PathAttr))

    def _current_suspects(self) -> Gen:
        """``Node.suspects`` with the expired ones dropped: the holders not asked again for a while."""
        suspects = self.suspects
        if suspects:
            now = yield NOW
            for n in [n for n, until in suspects.items() if until <= now]:
                del suspects[n]
        return suspects

    def _ask_each(self, requests: list[tuple[int, Request]]) -> Gen:
        """Each (node, request)'s reply or exception, in order: this node's own
        first, with no message (as a dirmerge's part), then the others in one
        ``Multicast``, so a question to every holder costs one round trip."""
        replies: dict[int, Any] = {}
        for i, (n, req) in enumerate(requests):
            if n == self.id:
                try:
                    replies[i] = yield from self.call(self.id, req)
                except OSError as exc:
                    replies[i] = exc
        remote = [(i, n, req) for i, (n, req) in enumerate(requests) if n != self.id]
        if remote:
            got = yield Multicast(tuple(n for _, n, _ in remote), tuple(req for _, _, req in remote))
            replies.update((i, r) for (i, _, _), r in zip(remote, got, strict=True))
        return [replies[i] for i in range(len(requests))]

    @api(str)
    def readdir_attrs(self, path: str) -> Gen:
        """Sorted [(name, is_dir, attr or None)] of a directory: readdir with each
        entry's getattr, in two round trips (the listing, then one batch per
        node at once) instead of one per entry (module docstring)."""
        path = normalize(path)
        yield Compute("fedfs_op")
        m = self.manager_of(path)
        entries, holders = yield from self._busy(lambda: self.call(m, ListHomes(path)))
        dirs = [name for name, home in entries if home is None]
        ask: dict[int, list[str]] = {n: list(dirs) for n in holders} if dirs else {}
        for name, home in entries:
            if home is not None:
                ask.setdefault(home, []).append(name)
        suspects = yield from self._current_suspects()  # not asked again for a while: their names get None
        answers: dict[tuple[int, str], Any] = {}  # (node, name) -> (implicit, attr), errno, or None
        sent: list[tuple[int, list[str], EntryAttrs]] = [
            (n, batch, EntryAttrs(path, pack_names(batch)))
            for n in sorted(ask)
            if n not in suspects
            for batch in name_batches(ask[n])
        ]
        replies = yield from self._ask_each([(n, req) for n, _, req in sent])
        silent: set[int] = set()
        for (n, batch, _), reply in zip(sent, replies, strict=True):
            if isinstance(reply, BaseException):
                if isinstance(reply, PeerUnavailable) and reply.node == n:
                    silent.add(n)
                continue  # its names get None (down, root lost ...); a listing is still given
            if len(reply) != len(batch):
                raise ProtocolError(f"EntryAttrs reply: {len(reply)} answers for {len(batch)} names")
            answers.update(((n, name), a) for name, a in zip(batch, reply, strict=True))
        if silent:
            until = (yield NOW) + SUSPECT_S
            for n in silent:
                suspects[n] = until
        out: list[tuple[str, bool, Any]] = []
        for name, home in entries:
            got = [answers.get((home, name))] if home is not None else [answers.get((h, name)) for h in holders]
            attr = _pick(got, home is None)
            if attr is _AGAIN:  # busy or moved at its home: the one-name path waits or follows it
                try:
                    attr = yield from self.getattr(join(path, name))
                except FileNotFoundError:
                    attr = _GONE
                except OSError:
                    attr = None
            if attr is not _GONE:
                out.append((name, home is None, attr))
        return out

    @api(str, int, int, int, fd="opens", optional=3)
    def create_open(self, path: str, mode: int = KEEP, uid: int = KEEP, gid: int = KEEP) -> Gen:
        """``create``, ``open`` and ``getattr`` of a new file in one call: (descriptor,
        attributes).  What a program's ``creat(2)`` on a mount needs, in one round trip
        of the mount to its agent instead of two (the three cannot share a pipeline:
        its calls run in no promised order).  Exclusive, as ``create``: EEXIST opens
        nothing.  An open that fails after the create removes the file again, so a
        failed call leaves no trace; the attributes are None if the file went before
        they were read (it is open: the caller has it).  ``mode`` and ``uid``/``gid``
        as ``create``'s: the caller's, made with the file (no chmod or chown after)."""
        yield from self.create(path, mode, uid, gid)
        try:
            fd = yield from self.open(path)
        except OSError:
            try:
                yield from self.unlink(path)
            except OSError:
                pass  # gone already (another client unlinked it): nothing of ours is left
            raise
        try:
            attr = yield from self.getattr(path)
        except OSError:
            attr = None
        return fd, attr

    @api(str, int, int, int, int, int)
    def setattr(self, path: str, mode: int, uid: int, gid: int, atime_ns: int, mtime_ns: int) -> Gen:
        """chmod, chown and utimens in one (``attrs.KEEP`` leaves mode/uid/gid,
        ``UTIME_OMIT`` a time; ``UTIME_NOW`` is the holder's clock): at a
        file's home, at every holder of a directory."""
        path = normalize(path)
        check_setattr(path, mode, uid, gid, atime_ns, mtime_ns)
        yield Compute("fedfs_op")
        args = (mode, uid, gid, atime_ns, mtime_ns)
        yield from self._by_name(path, lambda p: SetAttr(p, *args), lambda p: PathSetAttr(p, *args))

    def _by_name(self, path: str, at_home: Callable[[str], Request], at_manager: Callable[[str], Request]) -> Gen:
        """The value of a request about canonical ``path``: ``at_home`` at the
        home this node's DT knows for a file (a stale entry is dropped there),
        else ``at_manager`` at the name's manager, which resolves the name and
        serves a directory itself or forwards to a file's home; the home it
        names is cached.  One round trip either way, not a lookup and then one."""
        e = self.dt.peek(path)
        if e is not None and not e.is_dir:
            r = yield from self._at_home(path, at_home, None)
            if r is not None:
                return r[0]
        m = self.manager_of(path)
        for attempt in (0, 1):
            try:
                value, home, how = yield from self._busy(lambda: self.call(m, at_manager(path)))
                break
            except OSError as exc:
                if exc.errno != errno.ESTALE:
                    raise
                if attempt:  # renamed away twice while we looked (as in ``_at_home``)
                    raise fs_error(errno.ENOENT, path) from None
        if how:
            self.stats.lookup_paths[how] += 1
        if home is not None and m != self.id:
            self.dt.put(path, DTEntry(False, home))
        return value

    @api()
    def statfs(self) -> Gen:
        """``attrs.StatFS`` (as a tuple) of the whole federation: every member's
        local file system summed (a member that does not answer is left out)."""
        yield Compute("fedfs_op")
        answers: list[Any] = []
        try:
            answers.append((yield Local("statfs", ROOT)))
        except OSError as exc:
            answers.append(exc)
        others = tuple(n for n in self.members if n != self.id)
        if others:
            answers += yield Multicast(others, FsStat())
        figures = [a for a in answers if not isinstance(a, BaseException)]
        if not figures:
            err = next(a for a in answers if isinstance(a, BaseException))
            raise err
        return _sum_statfs(figures)

    @api(int, fd="uses")
    def fsync(self, fd: int) -> Gen:
        """Flush an open file's data and metadata at its home."""
        self._fd(fd)
        yield Compute("fedfs_op")
        yield from self._at_fd(fd, Fsync)

    @api(int, fd="uses")
    def fgetattr(self, fd: int) -> Gen:
        """``fstat``: the attributes of the open file ``fd`` at its home, whatever
        its name now (one unlinked while open too: its link count is then 0)."""
        self._fd(fd)
        yield Compute("fedfs_op")
        return (yield from self._at_fd(fd, GetAttr))

    @api(int, int, int, int, int, int, fd="uses")
    def fsetattr(self, fd: int, mode: int, uid: int, gid: int, atime_ns: int, mtime_ns: int) -> Gen:
        """fchmod, fchown and futimens of the open file ``fd`` (as ``setattr``), whatever its name now."""
        path, _ = self._fd(fd)
        check_setattr(path, mode, uid, gid, atime_ns, mtime_ns)
        yield Compute("fedfs_op")
        yield from self._at_fd(fd, lambda p: SetAttr(p, mode, uid, gid, atime_ns, mtime_ns))

    @api(int, int, fd="uses")
    def ftruncate(self, fd: int, size: int) -> Gen:
        """Cut the open file ``fd`` to ``size`` bytes or extend it with zeros (one unlinked while open too)."""
        path, _ = self._fd(fd)
        check_size(path, size)
        yield Compute("fedfs_op")
        yield from self._at_fd(fd, lambda p: Truncate(p, size))

    # ------------------------------------------------------------------ at a home or holder
    @handles(GetAttr)
    def on_getattr(self, src: int, req: GetAttr) -> Gen:
        path = req.path
        if not self.gates and not self.moved:  # the hot path, as on_stat's
            local = yield Local("getattr", path)
        else:
            local = yield from self._local("getattr", path)
        return federated(local, path, self.id)

    @handles(SetAttr)
    def on_setattr(self, src: int, req: SetAttr) -> Gen:
        args = (req.mode, req.uid, req.gid, req.atime_ns, req.mtime_ns)
        check_setattr(req.path, *args)  # a peer's request is as untrusted as a client's
        yield from self._local("setattr", req.path, args)

    @handles(Fsync)
    def on_fsync(self, src: int, req: Fsync) -> Gen:
        # An open file cannot be renamed (EBUSY), so no rename gate can be in the way.
        yield Local("fsync", req.path)

    @handles(FsStat)
    def on_fs_stat(self, src: int, req: FsStat) -> Gen:
        return (yield Local("statfs", ROOT))

    @handles(HolderAttr)
    def on_holder_attr(self, src: int, req: HolderAttr) -> Gen:
        local = yield Local("getattr", req.path)
        return req.path in self.implicit_dirs, federated(local, req.path, self.id)

    @handles(EntryAttrs)
    def on_entry_attrs(self, src: int, req: EntryAttrs) -> Gen:
        directory = req.directory
        out: list[Any] = []
        for name in unpack_names(directory, req.names):
            path = join(directory, name)
            try:
                local = yield from self.listed_attr(path)
            except OSError as exc:
                out.append(exc.errno if isinstance(exc.errno, int) and exc.errno > 0 else errno.EIO)
                continue
            out.append((path in self.implicit_dirs, federated(local, path, self.id)))
        return out

    def listed_attr(self, path: str) -> Gen:
        """The local attributes of an entry ``EntryAttrs`` names, through its
        rename gate (EAGAIN, ESTALE: the requester asks ``getattr`` then).
        A role that must refuse a name (replication, promoting it) wraps this."""
        if not self.gates and not self.moved:  # the hot path, as on_getattr's
            return (yield Local("getattr", path))
        return (yield from self._local("getattr", path))

    # ------------------------------------------------------------------ at a directory's manager
    def _holders(self, path: str, ask_all: bool) -> Gen:
        vd, _ = yield from self.ensure_vd(path, ask_all=ask_all)
        return vd, sorted(vd.holders) or [self.id]  # (the root, before any merge found a holder)

    def _resolve_here(self, path: str) -> Gen:
        """(is_dir, home, lookup path) of a name managed here (the root is a directory)."""
        if path == ROOT:
            return True, None, 0
        return (yield from self.resolve(path, check_dt=True))

    @handles(PathAttr)
    def on_path_attr(self, src: int, req: PathAttr) -> Gen:
        path = req.path
        is_dir, home, how = yield from self._resolve_here(path)
        if is_dir:
            return (yield from self._dir_attr(path)), None, how
        return (yield from self.call(home, GetAttr(path))), home, how

    def _dir_attr(self, path: str) -> Gen:
        """A directory's attributes (module docstring): its lowest holder's that is
        not a copy made for a file, with the newest times of all its copies."""
        _, holders = yield from self._holders(path, ask_all=False)
        return (yield from self._every_holder(path, holders))

    def _every_holder(self, path: str, holders: list[int]) -> Gen:
        """getattr's rule over every holder's answer, asked at once (one round
        trip): the mode and owners of the lowest holder's own copy, and the
        newest mtime, ctime and atime of any copy, so that an entry made or
        removed at any holder moves the directory's times (POSIX).  Suspects
        are not asked; if no other holder answers with the directory, the
        holders are asked one by one, suspects last (``_lowest_holder``)."""
        suspects = yield from self._current_suspects()
        ask = [h for h in holders if h not in suspects]
        replies = yield from self._ask_each([(h, HolderAttr(path)) for h in ask])
        silent = [h for h, r in zip(ask, replies, strict=True) if isinstance(r, PeerUnavailable) and r.node == h]
        if silent:
            until = (yield NOW) + SUSPECT_S
            for h in silent:
                suspects[h] = until
        got = [r if not isinstance(r, BaseException) else None for r in replies]
        for h, r in zip(ask, replies, strict=True):
            if not isinstance(r, BaseException):
                suspects.pop(h, None)  # it answered
        attr = _pick(got, True)
        if isinstance(attr, tuple):
            return attr
        return (yield from self._lowest_holder(path, holders))  # every error as the one-by-one rule gives it

    def _lowest_holder(self, path: str, holders: list[int]) -> Gen:
        """The attributes at the lowest of ``holders`` that answers with a copy
        of its own (else the lowest implicit copy).  A holder that does not
        answer becomes a suspect (``Node.suspects``, as a dirmerge's silent
        peer does) and is asked again only after the others, so a dead member
        costs one timeout, not one per getattr of every directory it holds."""
        return (yield from self._answering_holder(path, holders))[1]

    def _answering_holder(self, path: str, holders: list[int]) -> Gen:
        """(the holder, its attributes) that ``_lowest_holder`` answers from:
        what a directory's extended attributes are read at, too."""
        err: OSError | None = None
        fallback: tuple[int, Any] | None = None  # the lowest implicit copy's, if no holder has one of its own
        suspects = yield from self._current_suspects()
        order = holders
        if suspects:
            order = [h for h in holders if h not in suspects] + [h for h in holders if h in suspects]
        for h in order:
            try:
                implicit, attr = yield from self.call(h, HolderAttr(path))
            except PeerUnavailable as exc:
                if exc.node == h:
                    suspects[h] = (yield NOW) + SUSPECT_S
                err = exc
                continue
            except FileNotFoundError as exc:
                err = exc  # gone since the merge: the next holder answers
                continue
            suspects.pop(h, None)  # it answered
            if not attr[0]:  # a file now, made outside the federation since the merge
                err = fs_error(errno.ENOTDIR, path)
            elif not implicit:
                return h, attr
            elif fallback is None:
                fallback = h, attr
        if fallback is not None:
            return fallback
        assert err is not None
        raise err

    def copy_pruned(self, directory: str) -> Gen:
        """(``Home._prune``) the directory's times live on in its other copies:
        its manager touches one (``CopyPruned``).  Best effort: an unreachable
        manager or holder leaves the times as the remaining copies have them."""
        try:
            yield from self.call(self.manager_of(directory), CopyPruned(directory))
        except OSError:
            pass  # (PeerUnavailable, a redirect ...) the entry's removal is done and stays done

    @handles(CopyPruned)
    def on_copy_pruned(self, src: int, req: CopyPruned) -> Gen:
        """Set the mtime and ctime of the lowest other holder's copy of ``req.path`` to now
        (``UTIME_NOW`` there), from the VD cached here: no dirmerge is started for it."""
        vd = self.vds.peek(req.path)
        if vd is None:
            return  # not cached: the next merge's copies are all there is to answer from
        for h in sorted(vd.holders):
            if h == src:
                continue
            try:
                yield from self.call(h, SetAttr(req.path, KEEP, KEEP, KEEP, UTIME_OMIT, UTIME_NOW))
                return
            except OSError:
                continue  # gone there too, or down: the next holder

    @handles(ListHomes)
    def on_list_homes(self, src: int, req: ListHomes) -> Gen:
        self.in_doubt(req.path)
        vd, _ = yield from self.ensure_vd(req.path)
        self.in_doubt(req.path)
        return sorted((name, e.home) for name, e in vd.entries.items()), sorted(vd.holders)

    @handles(PathSetAttr)
    def on_path_set_attr(self, src: int, req: PathSetAttr) -> Gen:
        path = req.path
        args = (req.mode, req.uid, req.gid, req.atime_ns, req.mtime_ns)
        check_setattr(path, *args)
        is_dir, home, how = yield from self._resolve_here(path)
        if not is_dir:
            yield from self.call(home, SetAttr(path, *args))
            return None, home, how
        vd, holders = yield from self._holders(path, ask_all=True)
        if vd.unreachable >= 0:  # its copy would keep the old attributes
            raise PeerUnavailable(vd.unreachable, f"may hold {path} and did not answer its dirmerge")
        changed = False
        for h in holders:
            try:
                yield from self.call(h, SetAttr(path, *args))
            except FileNotFoundError:
                continue  # its copy was pruned since the merge (see the module docstring)
            changed = True
        if not changed:
            raise fs_error(errno.ENOENT, path)
        return None, None, how


def _pick(answers: list[Any], is_dir: bool) -> Any:
    """An entry's attributes from its ``EntryAttrs`` answers (a file: its
    home's; a directory: every holder's, in id order): the attributes, None
    (no answer), ``_GONE`` (not there: left out) or ``_AGAIN`` (ask getattr).
    A directory's are getattr's rule (``_every_holder``): the lowest holder's
    own copy, else the lowest implicit one, with the newest times of every
    copy; a holder where the name is a file does not count."""
    fallback = None
    gone = again = False
    copies: list[tuple[Any, ...]] = []
    for a in answers:
        if type(a) is int:
            gone |= a in _GONE_ERRNOS
            again |= a in _AGAIN_ERRNOS
        elif a is None:
            continue
        elif not is_dir:
            return a[1]
        elif a[1][0]:
            copies.append(a[1])
            if not a[0] and fallback is None:
                fallback = a[1]
        else:
            gone = True  # a file there now (made outside the federation): not this directory
    if copies:
        return _newest_times(fallback or copies[0], copies)
    if again:
        return _AGAIN
    if gone and all(type(a) is int or (a is not None and not a[1][0]) for a in answers):
        return _GONE  # every node asked says it is not there
    return None


def _newest_times(attr: tuple[Any, ...], copies: list[tuple[Any, ...]]) -> tuple[Any, ...]:
    """``attr`` (a directory's answering copy) with the newest atime, mtime and
    ctime of all its ``copies``: a union changes whenever any copy does.  The
    holders' clocks are compared, so the rule needs them synchronised (NTP)."""
    newest = (max(c[i] for c in copies) for i in (6, 7, 8))  # (``attrs.Attr``'s atime_ns, mtime_ns, ctime_ns)
    return (*attr[:6], *newest, attr[9])


def _sum_statfs(figures: list[tuple[int, ...]]) -> tuple[int, ...]:
    """The members' statfs figures as one file system's: block counts in
    bytes summed and rebased to the smallest fragment size, inode counts
    summed, the smallest bsize and namemax."""
    frsize = max(1, min(f[1] for f in figures))
    bsize = max(1, min(f[0] for f in figures))

    def blocks(i: int) -> int:
        return min(_U64, sum(f[i] * f[1] for f in figures) // frsize)

    files = min(_U64, sum(f[5] for f in figures))
    ffree = min(_U64, sum(f[6] for f in figures))
    return (bsize, frsize, blocks(2), blocks(3), blocks(4), files, ffree, min(f[7] for f in figures))
