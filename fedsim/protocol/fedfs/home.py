"""The home of a file (the node whose local file system holds it) and the
holder of a directory (any node whose local tree has it): the handlers that
touch the local file system.

Autonomy: the federation writes no metadata into the local trees.  The only
directories it makes itself are the missing parents of a file it creates
(``implicit_dirs``), and it removes them again once they are empty.

Rename gates (``rename.py``): while a rename that involves a local file is in
flight, its names are *gated* here: a request for a gated name is answered
EAGAIN at once (the requester backs off and asks again; it holds no worker,
so waiting there cannot deadlock the pools a waiting handler would hold).
A name a rename moved away from this node (the replaced target) leaves a
tombstone in ``moved``: a request that finds it missing is answered ESTALE,
"resolve the name again", instead of ENOENT, because the name still exists,
on another node.

Open files unlinked (issue 22).  Every ``Open`` pins its file here, counted
per requester (``openers``).  An unlink of a pinned file, or a rename over
one (``rename.py``), does not remove it: the home moves it into its orphan
space (``names.ORPHAN_ROOT``, outside every federated name), numbers it, and
tells each requester holding it (``Orphaned``, an acknowledged call inside
the unlink, before the name is released, so no new file of that name can be
opened meanwhile); the requester's descriptors of it go on by that number
(``OrphanRead``, ``OrphanWrite``, ``OrphanTruncate``, ``OrphanAttr``,
``OrphanSetAttr``, ``OrphanSync``, ``OrphanClose``), which this home answers only for the
requesters that hold it.  The last close removes it, so its space is freed
then, as on a local file system.  No descriptor survives a restart of its
home or of its requester: the home empties its orphan space when it starts,
and an agent closes the descriptors of a client whose connection is lost,
which reach the home as closes.  The common case costs nothing more: an open,
a close and an unlink of a file nobody holds send exactly what they sent.
"""

from __future__ import annotations

import errno
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, ClassVar

from fedsim.protocol.attrs import ATTR_WIRE, KEEP, check_new, check_setattr, check_size, federated, new_args
from fedsim.protocol.effects import Local
from fedsim.protocol.fedfs.coherence import Coherence
from fedsim.protocol.messages import (
    AddEntry,
    Close,
    Create,
    DelEntry,
    Fence,
    Forget,
    Mkdir,
    Open,
    Read,
    ReadDir,
    Request,
    RmLocal,
    Settle,
    Stat,
    Truncate,
    Unlink,
    Write,
    fs_error,
    register_request,
)
from fedsim.protocol.names import ORPHAN_ROOT, orphan_path, parent, split
from fedsim.protocol.node import Gen, handles
from fedsim.protocol.tables import LRU, DTEntry

MOVED_ENTRIES = 1024  # tombstones of names renamed away from a home (a bounded hint, like the DT)
#: open pins one requester may hold at a home, and all requesters together:
#: a peer's Opens cannot grow a home's tables without bound (EMFILE, ENFILE)
MAX_PINS_PER_PEER = 1 << 16
MAX_PINS = 1 << 18


@register_request
@dataclass(slots=True, frozen=True)
class Orphaned(Request):
    """Home -> requester: the file the requester's descriptors of ``path`` at
    this home name was unlinked (or renamed over) while open, and is orphan
    number ``orphan`` now.  Reply: how many of its descriptors follow it
    (the ones not closing already), which the home counts as pins."""

    reply: ClassVar[Any] = int
    path: str
    orphan: int


@register_request
@dataclass(slots=True, frozen=True)
class OrphanRead(Request):
    size_field: ClassVar[str | None] = "size"
    bulk_reply: ClassVar[bool] = True
    reply: ClassVar[Any] = bytes
    orphan: int
    offset: int
    size: int


@register_request
@dataclass(slots=True, frozen=True)
class OrphanWrite(Request):
    reply: ClassVar[Any] = int
    orphan: int
    offset: int
    data: bytes


@register_request
@dataclass(slots=True, frozen=True)
class OrphanTruncate(Request):
    reply: ClassVar[Any] = None
    orphan: int
    size: int


@register_request
@dataclass(slots=True, frozen=True)
class OrphanAttr(Request):
    """An orphan's attributes (its link count without the orphan space's name)."""

    reply: ClassVar[Any] = ATTR_WIRE
    orphan: int


@register_request
@dataclass(slots=True, frozen=True)
class OrphanSetAttr(Request):
    """fchmod, fchown, futimens of an orphan (as ``SetAttr``)."""

    reply: ClassVar[Any] = None
    orphan: int
    mode: int
    uid: int
    gid: int
    atime_ns: int
    mtime_ns: int


@register_request
@dataclass(slots=True, frozen=True)
class OrphanSync(Request):
    reply: ClassVar[Any] = None
    orphan: int


@register_request
@dataclass(slots=True, frozen=True)
class OrphanClose(Request):
    """One descriptor of the orphan closed; the last one removes it."""

    reply: ClassVar[Any] = None
    orphan: int


@dataclass(slots=True)
class Orphan:
    """A file unlinked while open: where it is here, and its pins per requester."""

    where: str
    pins: Counter[int] = field(default_factory=Counter)


class Home(Coherence):
    def __init__(self, node_id: int, spec: Any, **kw: Any) -> None:
        super().__init__(node_id, spec, **kw)
        self.opens: Counter[str] = Counter()  # open count per local file (the home's DT note)
        # ... and by whom (requester -> count; a migration's pins, counted
        # only in ``opens``, are not here), with each requester's total
        self.openers: dict[str, Counter[int]] = {}
        self.pins_of: Counter[int] = Counter()
        # Files unlinked while open (orphan number -> Orphan), and the next number
        self.orphans: dict[int, Orphan] = {}
        self._next_orphan = 1
        # Local directories this node created only to hold a file (create's
        # missing parents): removed again once empty, so the federation leaves
        # no directory of its own in the local tree (autonomy).
        self.implicit_dirs: set[str] = set()
        # Names held by a rename in flight (answered EAGAIN), and names a
        # rename moved to another node (answered ESTALE when missing here).
        self.gates: set[str] = set()
        self.moved: LRU[str, bool] = LRU(MOVED_ENTRIES)
        # (requester, token) of create attempts their manager settled: refused here (``Fence``)
        self.fenced: LRU[tuple[int, int], bool] = LRU(MOVED_ENTRIES)

    def start(self) -> Gen:
        """Empty the orphan space first: no descriptor survives a restart, so
        no file that was unlinked while open before it is wanted (a crash
        leaves nothing behind once the home is back)."""
        yield from self._clear_orphans()
        return (yield from super().start())

    def _clear_orphans(self) -> Gen:
        try:
            entries = yield Local("listdir", ORPHAN_ROOT)
        except OSError:
            return  # none (the common case), or not a directory of ours: left alone
        for name, is_dir in entries:
            if not is_dir:
                try:
                    yield Local("unlink", f"{ORPHAN_ROOT}/{name}")
                except OSError:
                    pass
        try:
            yield Local("rmdir", ORPHAN_ROOT)
        except OSError:
            pass
        self.orphans.clear()

    def _local(self, op: str, path: str, args: tuple[Any, ...] = ()) -> Gen:
        """A local operation on a name a client asked for, through its rename
        gate: EAGAIN while a rename holds it, ESTALE for a name renamed away."""
        if path in self.gates:
            raise fs_error(errno.EAGAIN, path, "a rename or migration of this name is in flight; try again")
        try:
            return (yield Local(op, path, args))
        except FileNotFoundError:
            if path in self.moved:
                raise fs_error(errno.ESTALE, path, "moved away from this node; resolve the name again") from None
            raise

    def _unfenced(self, src: int, token: int, path: str) -> None:
        if token and (src, token) in self.fenced:
            raise fs_error(errno.ECANCELED, path, "this create was given up by its requester")

    @handles(Fence)
    def on_fence(self, src: int, req: Fence) -> None:
        self.fenced.put((req.requester, req.token), True)

    @handles(Create)
    def on_create(self, src: int, req: Create) -> Gen:
        check_new(req.path, req.mode, req.uid, req.gid)  # a peer's request is as untrusted as a client's
        yield from self._made_here(
            src, req.token, req.path, Local("create", req.path, new_args(req.mode, req.uid, req.gid))
        )

    def _made_here(self, src: int, token: int, path: str, make: Local) -> Gen:
        """A new name with its home here (a file; a symlink or special file:
        ``links.py``): made in the local tree by ``make`` (its missing parents
        implicit, summarised), told to the parent's manager, kept in the DT."""
        self._unfenced(src, token, path)
        created = yield make
        self.moved.pop(path)
        self.implicit_dirs.update(created)
        for d in created:
            yield from self.summary_add(d, new_dir=False)
        d, name = split(path)
        yield from self.notify(self.manager_of(d), AddEntry(d, name, False, self.id))
        self.dt.put(path, DTEntry(False, self.id))

    @handles(Mkdir)
    def on_mkdir(self, src: int, req: Mkdir) -> Gen:
        self._unfenced(src, req.token, req.path)
        check_new(req.path, req.mode, req.uid, req.gid)
        created = yield Local("mkdir", req.path, new_args(req.mode, req.uid, req.gid))
        self.implicit_dirs.update(d for d in created if d != req.path)
        for d in created:
            yield from self.summary_add(d, new_dir=d == req.path)
        d, name = split(req.path)
        yield from self.notify(self.manager_of(d), AddEntry(d, name, True, self.id))

    @handles(Unlink)
    def on_unlink(self, src: int, req: Unlink) -> Gen:
        path = req.path
        if self.opens.get(path) and path not in self.gates:
            yield from self.orphan(path)
        else:
            yield from self._local("unlink", path)
        self.dt.pop(path)
        d, name = split(path)
        if d in self.implicit_dirs:
            yield from self._prune(d)
        m = self.manager_of(path)
        try:
            # (only entries naming this node: a rename over this file may
            # have named its new home there already)
            yield from self.notify(self.manager_of(d), DelEntry(d, name, home=self.id))
            if m != self.id:
                yield from self.notify(m, Forget(path, home=self.id))
        except OSError:  # PeerUnavailable mostly (a busy or redirected manager too)
            # The file is gone; the parent's VD or the manager's DT may not
            # know yet.  Replaying DelEntry/Forget later could undo a newer
            # create of the name, so the repair settles the name from the
            # local trees instead (its manager re-merges the parent), in the
            # background until it gets through.  The unlink itself is done
            # and answered as done: an error here would report a failure that
            # changed the tree (a failed operation leaves no trace), and the
            # namespace catches up as with ``async_dir_updates``.
            yield from self.repair(m, Settle(path))

    @handles(Open)
    def on_open(self, src: int, req: Open) -> Gen:
        # Counted before the local open, so a rename preparing meanwhile sees
        # the file pinned (EBUSY) rather than renaming it under a new descriptor.
        if self.pins_of[src] >= MAX_PINS_PER_PEER or sum(self.pins_of.values()) >= MAX_PINS:
            raise fs_error(errno.EMFILE, req.path, "too many files open at this home")
        self.opens[req.path] += 1
        self._pin(req.path, src)
        try:
            if not self.gates and not self.moved:  # the hot path, as in on_stat
                yield Local("open", req.path)
            else:
                yield from self._local("open", req.path)
        except OSError:
            self._unpin(req.path, src)
            raise

    def _pin(self, path: str, src: int) -> None:
        by = self.openers.get(path)
        if by is None:
            by = self.openers[path] = Counter()
        by[src] += 1
        self.pins_of[src] += 1

    def _unpin(self, path: str, src: int) -> None:
        if self.opens[path] > 1:
            self.opens[path] -= 1
        else:
            self.opens.pop(path, None)
        by = self.openers.get(path)
        if by is not None and by.get(src):
            _dec(by, src)
            if not by:
                del self.openers[path]
            _dec(self.pins_of, src)

    @handles(Close)
    def on_close(self, src: int, req: Close) -> Gen:
        path = req.path
        if self.gates or self.moved:
            # A migration moves the pins of an open file with it: while it
            # switches, the count here is being handed over (EAGAIN); after
            # it, the descriptor's pin is at the new home (ESTALE: resolve).
            if path in self.gates:
                raise fs_error(errno.EAGAIN, path, "a rename or migration of this name is in flight; try again")
            if path in self.moved and not self.opens.get(path):
                raise fs_error(errno.ESTALE, path, "migrated away from this node; resolve the name again")
        yield Local("close", path)
        self._unpin(path, src)

    # ------------------------------------------------------------------ files unlinked while open
    def orphan(self, path: str) -> Gen:
        """Instead of removing the open file ``path``: move it into the orphan
        space and tell its requesters (see the module's docstring).  Its pins
        leave ``opens`` (the name is free); the orphan keeps the ones whose
        requesters answered.  The caller holds the name (a rename's gate, or
        the unlink itself, which releases the name only after this)."""
        n = self._next_orphan
        self._next_orphan += 1
        where = orphan_path(n)
        yield Local("mkdir", ORPHAN_ROOT, new_args(0o700, KEEP, KEEP))
        try:
            yield Local("rename", path, (where,))
        except FileNotFoundError:
            if path in self.moved:
                raise fs_error(errno.ESTALE, path, "moved away from this node; resolve the name again") from None
            raise
        yield Local("open", where)  # one local descriptor while it is an orphan (its I/O's, as an open file's)
        by = self.openers.pop(path, None) or Counter()
        self.opens.pop(path, None)
        orphan = self.orphans[n] = Orphan(where)
        for src in sorted(by):
            try:
                held = yield from self.call(src, Orphaned(path, n))
            except OSError:
                held = 0  # gone or unreachable: its descriptors will find nothing (EBADF)
            held = max(0, min(held, by[src]))  # never more pins than it had (an untrusted reply)
            for _ in range(by[src] - held):
                _dec(self.pins_of, src)
            if held:
                orphan.pins[src] = held
        if not orphan.pins and self.orphans.get(n) is orphan:
            # (a requester told first may have closed it meanwhile, and that close dropped it: found by
            # ``tests/test_rename_histories.py``, a KeyError that failed a rename over a file open twice)
            yield from self._drop_orphan(n)

    def unpin_gone(self, gone: set[int]) -> Gen:
        """Requesters that left the view (evicted after a crash, or gone for
        good): no descriptor of theirs survives, so their pins go, as a lease
        that the failure detector ends; an orphan only they held is freed
        (and a file they held open can be renamed again)."""
        if not self.pins_of.keys() & gone:
            return
        for path in list(self.openers):
            by = self.openers[path]
            for g in gone & by.keys():
                k = by.pop(g)
                if self.opens[path] > k:
                    self.opens[path] -= k
                else:
                    self.opens.pop(path, None)
            if not by:
                del self.openers[path]
        for g in gone:
            self.pins_of.pop(g, None)
        for n in list(self.orphans):
            pins = self.orphans[n].pins
            for g in gone:
                pins.pop(g, None)
            if not pins:
                yield from self._drop_orphan(n)

    def _orphan_of(self, src: int, n: int) -> Orphan:
        """Orphan ``n``, if ``src`` holds it (no peer reaches another's orphans)."""
        o = self.orphans.get(n)
        if o is None or not o.pins.get(src):
            raise OSError(errno.EBADF, f"no open file {n} unlinked while open here for node {src}")
        return o

    def _drop_orphan(self, n: int) -> Gen:
        o = self.orphans.pop(n)
        yield Local("close", o.where)
        try:
            yield Local("unlink", o.where)
        except OSError:
            pass  # removed outside the federation meanwhile: nothing of ours left
        if not self.orphans:
            try:
                yield Local("rmdir", ORPHAN_ROOT)
            except OSError:
                pass

    @handles(OrphanRead)
    def on_orphan_read(self, src: int, req: OrphanRead) -> Gen:
        return (yield Local("read", self._orphan_of(src, req.orphan).where, (req.offset, req.size)))

    @handles(OrphanWrite)
    def on_orphan_write(self, src: int, req: OrphanWrite) -> Gen:
        return (yield Local("write", self._orphan_of(src, req.orphan).where, (req.offset, req.data)))

    @handles(OrphanTruncate)
    def on_orphan_truncate(self, src: int, req: OrphanTruncate) -> Gen:
        where = self._orphan_of(src, req.orphan).where
        check_size(where, req.size)
        yield Local("truncate", where, (req.size,))

    @handles(OrphanAttr)
    def on_orphan_attr(self, src: int, req: OrphanAttr) -> Gen:
        where = self._orphan_of(src, req.orphan).where
        local = yield Local("getattr", where)
        # the orphan space's name is none of the file's: its link count without it
        return federated((*local[:2], max(0, local[2] - 1), *local[3:]), where, self.id)

    @handles(OrphanSetAttr)
    def on_orphan_setattr(self, src: int, req: OrphanSetAttr) -> Gen:
        where = self._orphan_of(src, req.orphan).where
        args = (req.mode, req.uid, req.gid, req.atime_ns, req.mtime_ns)
        check_setattr(where, *args)  # a peer's request is as untrusted as a client's
        yield Local("setattr", where, args)

    @handles(OrphanSync)
    def on_orphan_sync(self, src: int, req: OrphanSync) -> Gen:
        yield Local("fsync", self._orphan_of(src, req.orphan).where)

    @handles(OrphanClose)
    def on_orphan_close(self, src: int, req: OrphanClose) -> Gen:
        o = self._orphan_of(src, req.orphan)
        _dec(o.pins, src)
        _dec(self.pins_of, src)
        if not o.pins:
            yield from self._drop_orphan(req.orphan)

    @handles(Stat)
    def on_stat(self, src: int, req: Stat) -> Gen:
        path = req.path
        if not self.gates and not self.moved:  # the hot path: no rename near, no generator within
            return (yield Local("stat", path))
        return (yield from self._local("stat", path))

    @handles(Truncate)
    def on_truncate(self, src: int, req: Truncate) -> Gen:
        return (yield from self._local("truncate", req.path, (req.size,)))

    # Reads and writes through a descriptor pass the gates too: an open file
    # may be migrated (``migration.py``), which gates it for the switch and
    # leaves a tombstone here, so the requester re-resolves the descriptor.
    @handles(Read)
    def on_read(self, src: int, req: Read) -> Gen:
        if not self.gates and not self.moved:  # the hot path, as in on_stat
            return (yield Local("read", req.path, (req.offset, req.size)))
        return (yield from self._local("read", req.path, (req.offset, req.size)))

    @handles(Write)
    def on_write(self, src: int, req: Write) -> Gen:
        if not self.gates and not self.moved:
            return (yield Local("write", req.path, (req.offset, req.data)))
        return (yield from self._local("write", req.path, (req.offset, req.data)))

    # ------------------------------------------------------------------ as a directory's holder
    @handles(ReadDir)
    def on_read_dir(self, src: int, req: ReadDir) -> Gen:
        """Dirmerge: this node's local entries of a directory (the replica space hidden)."""
        return (yield from self.local_entries(req.path))

    @handles(RmLocal)
    def on_rm_local(self, src: int, req: RmLocal) -> Gen:
        try:
            yield Local("rmdir", req.path)
        except FileNotFoundError:
            pass  # already gone here: rmdir is idempotent per holder
        self.implicit_dirs.discard(req.path)
        d = parent(req.path)
        if d in self.implicit_dirs:
            yield from self._prune(d)

    def _prune(self, directory: str, changed: bool = True) -> Gen:
        """Remove ``directory`` and its implicit ancestors from the local tree
        while they are empty.  The namespace does not change: an implicit
        directory was created to hold a file in a directory that exists on
        another node, and stays there.  ``directory`` itself just lost an entry,
        and its copy here may have been the one with the newest times, which a
        directory's getattr answers (``attributes``): the remaining copies are
        told (``copy_pruned``), so that its times advance as POSIX says rather
        than go back.  ``changed`` False: the copy goes because the call that
        made it failed, and a failed call must move no time, so nobody is told."""
        d = directory
        while d in self.implicit_dirs:
            try:
                if (yield Local("listdir", d)):
                    return  # still holds something: pruned when that goes
                yield Local("rmdir", d)
            except OSError:
                self.implicit_dirs.discard(d)
                return  # changed under us (outside the federation): leave it
            self.implicit_dirs.discard(d)
            if d == directory and changed:
                yield from self.copy_pruned(d)
            d = parent(d)

    def copy_pruned(self, directory: str) -> Gen:
        """This node removed its implicit copy of ``directory``, which had just
        changed: a role that serves directories' times makes another copy
        show the change (``attributes``).  Here: nothing."""
        return
        yield


def _dec(counter: Counter[int], key: int) -> None:
    """One less of ``key``; gone at zero (so a table's size is its live keys)."""
    if counter[key] > 1:
        counter[key] -= 1
    else:
        counter.pop(key, None)
