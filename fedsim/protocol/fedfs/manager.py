"""The manager of a pathname: decides a new name's home (the placement
policy) and remembers every name it manages in its directory table (DT),
answering lookups from it (FedFS 2.1, lookup path 2).

The DT is one bounded table serving two roles: the exact entries of the
names this node manages, and the requester's cache of names managed
elsewhere (lookup path 1), which may go stale (FedFS 3.2's lazy scheme).

Invariant the property tests check: the DT entries a manager holds for the
names it manages are exact: every operation that changes a name's existence
or home goes through, or notifies, its manager (creates are decided here,
unlinks send ``Forget``, rmdir runs here).
"""

from __future__ import annotations

import errno
from typing import Any

from fedsim.protocol.fedfs.directory import Directory
from fedsim.protocol.messages import Forget, GetEntry, HomeInfo, fs_error
from fedsim.protocol.names import split
from fedsim.protocol.node import Gen, handles
from fedsim.protocol.tables import DIR_ENTRY, LRU, DTEntry


class Manager(Directory):
    def __init__(self, node_id: int, spec: Any, **kw: Any) -> None:
        super().__init__(node_id, spec, **kw)
        self.dt: LRU[str, DTEntry] = LRU(self.config.dt_entries)

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
        r = yield from self.call(self.manager_of(d), GetEntry(d, name))
        if r is None:
            raise fs_error(errno.ENOENT, path)
        is_dir, home, how = r
        self.dt.put(path, DIR_ENTRY if is_dir else DTEntry(False, home))
        return is_dir, home, how

    @handles(HomeInfo)
    def on_home_info(self, src: int, req: HomeInfo) -> Gen:
        """Where ``req.path`` lives; with ``req.create``, reserve the name and
        choose its home (EEXIST if it exists)."""
        path = req.path
        if req.create is None:
            return (yield from self.resolve(path, check_dt=src != self.id))
        if self.dt.get(path) is not None:
            raise fs_error(errno.EEXIST, path)
        d, name = split(path)
        r = yield from self.call(self.manager_of(d), GetEntry(d, name))
        if r is not None:
            self.dt.put(path, DIR_ENTRY if r[0] else DTEntry(False, r[1]))
            raise fs_error(errno.EEXIST, path)
        if self.dt.peek(path) is not None:  # a concurrent create of the same name won
            raise fs_error(errno.EEXIST, path)
        is_dir = req.create == "dir"
        home = self.placement.choose_home(path, is_dir, src, self.id, self.members)
        self.dt.put(path, DIR_ENTRY if is_dir else DTEntry(False, home))
        return is_dir, home, 0

    @handles(Forget)
    def on_forget(self, src: int, req: Forget) -> None:
        self.dt.pop(req.path)
