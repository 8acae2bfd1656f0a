"""The manager of a pathname: decides a new name's home (the placement
policy) and remembers every name it manages in its directory table (DT),
answering lookups from it (FedFS 2.1, lookup path 2).

The DT is one bounded table serving two roles: the exact entries of the
names this node manages, and the requester's cache of names managed
elsewhere (lookup path 1), which may go stale (FedFS 3.2's lazy scheme).

Invariant the property tests check: the DT entries a manager holds for the
names it manages are exact: every operation that changes a name's existence
or home goes through, or notifies, its manager (creates are decided here,
unlinks send ``Forget``, rmdir runs here, renames check the target here and
send ``RenameDone``).  An answer from the parent's manager is cached only if
no managed name moved or vanished while it travelled (``dt_epoch``): a reply
sent before a rename's commit must not overwrite what the rename set.

Failure semantics (issue 12): a create's reservation is made here, in
``on_home_info``, before the reply, which may be lost or come after the
requester's timeout.  The requester names each attempt with a token; when
the attempt fails with ``PeerUnavailable`` (here or at the home), it sends
``Settle(path, token)`` (retried in the background until it gets through).
The manager then refuses that token for good (a HomeInfo carrying it that
arrives later reserves nothing) and, if the reservation is that attempt's,
first has the home it chose refuse the attempt's Create/Mkdir (``Fence``:
one still in flight must not make the name after it is dropped), then
settles the name from the local trees (the parent's manager re-merges,
asking every candidate; a merge that missed one decides nothing):
dropped if no home made it, kept (and now listed) if one did.  A settle
that needs a node that is down fails and is retried, never decided blind;
meanwhile the name stays reserved (create says EEXIST, stat names the
unreachable home).  So a create
reported as failed either left no trace or completed and is visible.  The
normal path sends no extra message.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from typing import Any

from fedsim.protocol.fedfs.directory import Directory
from fedsim.protocol.messages import ENTRY_FRESH, ENTRY_HOLD, Fence, Forget, GetEntry, HomeInfo, Settle, fs_error
from fedsim.protocol.names import split
from fedsim.protocol.node import Gen, handles
from fedsim.protocol.tables import DIR_ENTRY, LRU, DTEntry


class Manager(Directory):
    def __init__(self, node_id: int, spec: Any, **kw: Any) -> None:
        super().__init__(node_id, spec, **kw)
        self.dt: LRU[str, DTEntry] = LRU(self.config.dt_entries)
        # Targets of renames in flight (``rename.py``): a create of one is
        # answered EAGAIN until the rename commits (then EEXIST) or aborts.
        self.rename_marks: set[str] = set()
        self.dt_epoch = 0  # bumped whenever a managed name is forgotten or moved
        # path -> (requester, token, home): the attempt whose create made the
        # name's reservation here, and the home chosen for it.
        self.reservations: LRU[str, tuple[int, int, int]] = LRU(max(1024, self.config.dt_entries))
        # (requester, token) of attempts settled here: a late HomeInfo carrying one is refused.
        self.settled: LRU[tuple[int, int], bool] = LRU(max(1024, self.config.dt_entries))

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "managed_names": sum(1 for p in self.dt.keys() if self.manager_of(p) == self.id),
            "dt_entries": len(self.dt),
        }

    def resolve(self, path: str, check_dt: bool) -> Gen:
        """At P's manager: (is_dir, home, lookup_path) from the DT, else from
        the parent's manager.  ENOENT if the name does not exist."""
        if check_dt:
            e = self.dt.get(path)
            if e is not None:
                return e.is_dir, e.home, 2
        d, name = split(path)
        epoch = self.dt_epoch
        r = yield from self.call(self.manager_of(d), GetEntry(d, name))
        if r is None:
            raise fs_error(errno.ENOENT, path)
        is_dir, home, how = r
        if self.dt_epoch == epoch:
            self.dt.put(path, DIR_ENTRY if is_dir else DTEntry(False, home))
        return is_dir, home, how

    def _unmarked(self, path: str) -> None:
        if path in self.rename_marks:
            raise fs_error(errno.EAGAIN, path, "a rename onto this name is in flight; try again")

    @handles(HomeInfo)
    def on_home_info(self, src: int, req: HomeInfo) -> Gen:
        """Where ``req.path`` lives; with ``req.create``, reserve the name and
        choose its home (EEXIST if it exists)."""
        path = req.path
        if req.create is None:
            return (yield from self.resolve(path, check_dt=src != self.id))
        is_dir = req.create == "dir"
        choose = lambda: self.placement.choose_home(path, is_dir, src, self.id, self.members)  # noqa: E731
        return (yield from self.reserve(src, path, req.token, is_dir, choose))

    def reserve(self, src: int, path: str, token: int, is_dir: bool, choose: Callable[[], int]) -> Gen:
        """Reserve the new name ``path`` for ``src``'s attempt ``token`` (EEXIST
        if it exists) and record the home ``choose()`` gives it (a create's
        placement; a hard link's old name's home: ``links.py``)."""
        attempt = (src, token)
        self._unsettled(attempt, path)
        if self.dt.get(path) is not None:
            raise fs_error(errno.EEXIST, path)
        self._unmarked(path)
        d, name = split(path)
        epoch = self.dt_epoch
        r = yield from self.call(self.manager_of(d), GetEntry(d, name, ENTRY_HOLD))
        if r is not None:
            if self.dt_epoch == epoch:
                self.dt.put(path, DIR_ENTRY if r[0] else DTEntry(False, r[1]))
            raise fs_error(errno.EEXIST, path)
        if self.dt.peek(path) is not None:  # a concurrent create of the same name won
            raise fs_error(errno.EEXIST, path)
        self._unmarked(path)  # a rename onto it began while the parent's manager answered
        self._unsettled(attempt, path)  # its requester gave up while the parent's manager answered
        home = choose()
        self.dt.put(path, DIR_ENTRY if is_dir else DTEntry(False, home))
        if token:
            self.reservations.put(path, (src, token, home))
        return is_dir, home, 0

    def _unsettled(self, attempt: tuple[int, int], path: str) -> None:
        if attempt[1] and attempt in self.settled:
            raise fs_error(errno.ECANCELED, path, "this create was given up by its requester")

    @handles(Settle)
    def on_settle(self, src: int, req: Settle) -> Gen:
        """Settle ``path`` from the local trees (see the module docstring)."""
        path = req.path
        if self.manager_of(path) != self.id:
            raise fs_error(errno.EINVAL, path, "not managed here")
        mine = None
        if req.token:
            self.settled.put((src, req.token), True)  # refused if it comes late
            res = self.reservations.peek(path)
            if res is not None and res[:2] == (src, req.token):
                mine = res
                # The home refuses this attempt's Create/Mkdir from now on
                # (one still in flight would make the name after we drop it);
                # an unreachable home fails the settle, which is retried.
                yield from self.call(res[2], Fence(path, src, req.token))
        # The parent's manager re-merges; while another create of the name is
        # in flight there (its hold), it answers EAGAIN and the repair retries:
        # that create's own outcome comes first.  The hold of this attempt's
        # reservation is released.
        flags = ENTRY_FRESH | (ENTRY_HOLD if mine is not None else 0)
        d, name = split(path)
        epoch = self.dt_epoch
        try:
            r = yield from self.call(self.manager_of(d), GetEntry(d, name, flags))
        except (FileNotFoundError, NotADirectoryError):
            r = None  # the parent is gone (or no directory): so is the name
        if mine is not None and self.reservations.peek(path) == mine:
            self.reservations.pop(path)
        if self.dt_epoch != epoch or path in self.rename_marks:
            return None  # a rename or removal changed it meanwhile: that is newer
        if r is None:
            self.dt.pop(path)
            self.dt_epoch += 1
        else:
            self.dt.put(path, DIR_ENTRY if r[0] else DTEntry(False, r[1]))
        return None

    @handles(Forget)
    def on_forget(self, src: int, req: Forget) -> None:
        if req.home >= 0:
            e = self.dt.peek(req.path)
            if e is not None and (e.is_dir or e.home != req.home):
                return  # newer than the removal (a rename's entry over it)
        self.dt.pop(req.path)
        self.dt_epoch += 1
