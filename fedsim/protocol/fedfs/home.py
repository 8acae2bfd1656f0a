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
"""

from __future__ import annotations

import errno
from collections import Counter
from typing import Any

from fedsim.protocol.attrs import check_new, new_args
from fedsim.protocol.effects import Local
from fedsim.protocol.fedfs.manager import Manager
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
    RmLocal,
    Settle,
    Stat,
    Truncate,
    Unlink,
    Write,
    fs_error,
)
from fedsim.protocol.names import parent, split
from fedsim.protocol.node import Gen, handles
from fedsim.protocol.tables import LRU, DTEntry

MOVED_ENTRIES = 1024  # tombstones of names renamed away from a home (a bounded hint, like the DT)


class Home(Manager):
    def __init__(self, node_id: int, spec: Any, **kw: Any) -> None:
        super().__init__(node_id, spec, **kw)
        self.opens: Counter[str] = Counter()  # open count per local file (the home's DT note)
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
        self.opens[req.path] += 1
        try:
            if not self.gates and not self.moved:  # the hot path, as in on_stat
                yield Local("open", req.path)
            else:
                yield from self._local("open", req.path)
        except OSError:
            self._unpin(req.path)
            raise

    def _unpin(self, path: str) -> None:
        if self.opens[path] > 1:
            self.opens[path] -= 1
        else:
            self.opens.pop(path, None)

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
        self._unpin(path)

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
