"""The parent's manager: the node that manages a directory's name holds its
virtual directory (VD), cached or rebuilt by dirmerge from the local
directories of the nodes whose summaries may hold it (FedFS 2.2), and runs
what must see the whole directory (readdir, rmdir, entry lookups).

Invariant the property tests check: a cached VD is exact.  AddEntry/DelEntry
keep it current, including while a dirmerge for it is in flight (updates are
queued and replayed on the merge's result).
"""

from __future__ import annotations

import errno
from typing import Any

from fedsim.protocol.effects import NOW, Await, Compute, Local, Multicast, Wake
from fedsim.protocol.fedfs.summaries import Summaries
from fedsim.protocol.messages import (
    AddEntry,
    DelEntry,
    GetEntry,
    ListVD,
    PeerUnavailable,
    ReadDir,
    Rmdir,
    RmLocal,
    SummaryAdd,
    fs_error,
)
from fedsim.protocol.names import ROOT, join, parent, split
from fedsim.protocol.node import Gen, handles
from fedsim.protocol.tables import DIR_ENTRY, LRU, DTEntry, VirtualDirectory


class Directory(Summaries):
    def __init__(self, node_id: int, spec: Any, **kw: Any) -> None:
        super().__init__(node_id, spec, **kw)
        self.vds: LRU[str, VirtualDirectory] = LRU(self.config.vd_entries)
        # directory -> VD updates queued while its dirmerge is in flight
        self._merging: dict[str, list[Any]] = {}
        # Name collisions seen by dirmerges at this node: path -> (the home the
        # name resolves to, None for a directory; every node holding it as a file).
        self.collisions: dict[str, tuple[int | None, tuple[int, ...]]] = {}

    # The manager role's DT and ``resolve``, which rmdir uses.
    dt: LRU[str, DTEntry]

    def collisions_seen(self) -> dict[str, tuple[int | None, tuple[int, ...]]]:
        return self.collisions

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "summaries": sorted(self.summaries),
            "vd_entries": len(self.vds),
            "lookup_paths": self.stats.lookup_paths[1:],
            "dirmerges": self.stats.dirmerges,
            "collisions": [[p, w, list(h)] for p, (w, h) in sorted(self.collisions.items())],
        }

    # ------------------------------------------------------------------ the VD cache
    def ensure_vd(self, directory: str) -> Gen:
        """The VD of ``directory`` and how it was found: 3 = cached, 4 = dirmerge."""
        vd = self.vds.get(directory)
        if vd is not None:
            age = self.config.vd_max_age_s
            if not age or (yield NOW) - vd.built <= age:
                return vd, 3
            self.vds.pop(directory)  # too old: the local trees may have changed
        return (yield from self.dirmerge(directory)), 4

    def dirmerge(self, directory: str) -> Gen:
        """Build a VD from the local directories of the nodes whose summary says
        they may hold it (FedFS 2.2).  Bloom filters give no false negatives, so
        no holder is missed; false positives cost one wasted ReadDir each.

        One merge per directory at a time: a request that finds a merge of the
        same directory in flight waits for its result instead of starting its
        own, so concurrent first lookups do not multiply the fan-out."""
        if directory in self._merging:
            self.stats.merge_waits += 1
            result = yield Await(("dirmerge", directory))
            if isinstance(result, BaseException):
                raise result
            return result
        pending: list[Any] = []
        self._merging[directory] = pending
        try:
            vd = yield from self._merge(directory, pending)
        except Exception as exc:
            del self._merging[directory]
            yield Wake(("dirmerge", directory), exc)
            raise
        del self._merging[directory]
        yield Wake(("dirmerge", directory), vd)
        return vd

    def _merge(self, directory: str, pending: list[Any]) -> Gen:
        yield Compute("bloom_probe", len(self.members))
        candidates = [
            n for n in self.members if (s := self.summaries.get(n)) is None or s.may_contain(directory)
        ]
        answers: dict[int, Any] = {}
        if self.id in candidates:
            try:
                answers[self.id] = yield Local("listdir", directory)
            except OSError as exc:
                answers[self.id] = exc
        remote = tuple(n for n in candidates if n != self.id)
        if remote:
            replies = yield Multicast(remote, ReadDir(directory))
            answers.update(zip(remote, replies, strict=True))
        vd = VirtualDirectory()
        if self.config.aging:
            vd.built = yield NOW  # when the merge started: updates after it are replayed
        not_dir = unavailable = False
        for node in sorted(answers):
            ans = answers[node]
            if isinstance(ans, PeerUnavailable):
                unavailable = True
            elif isinstance(ans, NotADirectoryError):
                not_dir = True
            elif isinstance(ans, BaseException):
                continue  # ENOENT: a Bloom false positive
            else:
                vd.holders.add(node)
                for name, is_dir in ans:
                    self._merge_entry(vd, name, is_dir, node)
        for op in pending:  # namespace updates that arrived while the merge was in flight
            self._apply_vd_update(vd, op)
        if vd.collisions or self.collisions:
            self._note_collisions(directory, vd)
        st = self.stats
        st.dirmerges += 1
        st.dirmerge_contacted.append(len(remote))
        st.dirmerge_holders.append(len(vd.holders - {self.id}))
        st.merges_by_dir[directory] += 1
        if not vd.holders and directory != ROOT:
            if unavailable:
                raise PeerUnavailable(-1, f"no reachable holder of {directory}")
            if not not_dir:
                # Summaries hold directories only, so a file by this name was
                # never asked: its parent's VD tells ENOTDIR from ENOENT (error
                # path only; raises ENOENT itself if an ancestor is missing).
                parent_dir, name = split(directory)
                r = yield from self.call(self.manager_of(parent_dir), GetEntry(parent_dir, name))
                not_dir = r is not None and not r[0]
            raise fs_error(errno.ENOTDIR if not_dir else errno.ENOENT, directory)
        if unavailable:
            st.incomplete_merges += 1  # serve it, but do not cache a partial VD
        else:
            self.vds.put(directory, vd)
        return vd

    def _note_collisions(self, directory: str, vd: VirtualDirectory) -> None:
        """Record this merge's collisions in ``self.collisions`` (replacing what
        an earlier merge of the same directory found) for status and logs."""
        for p in [p for p in self.collisions if parent(p) == directory]:
            del self.collisions[p]
        for name, homes in vd.collisions.items():
            winner = vd.entries.get(name)
            self.collisions[join(directory, name)] = (None if winner is None else winner.home, tuple(homes))

    @staticmethod
    def _merge_entry(vd: VirtualDirectory, name: str, is_dir: bool, node: int) -> None:
        """Union one local entry into a VD.  A directory may live on many nodes;
        a file name on two nodes is a collision: the lowest node id keeps the
        name (nodes are merged in id order), a directory beats a file."""
        old = vd.entries.get(name)
        new = DIR_ENTRY if is_dir else DTEntry(False, node)
        if old is None:
            vd.entries[name] = new
            return
        if old.is_dir and is_dir:
            return
        homes = vd.collisions.setdefault(name, [] if old.home is None else [old.home])
        homes.append(node)
        if is_dir and not old.is_dir:
            vd.entries[name] = new

    @staticmethod
    def _apply_vd_update(vd: VirtualDirectory, op: tuple[Any, ...]) -> None:
        if op[0] == "add":
            _, name, entry = op
            vd.entries[name] = entry
        elif op[0] == "del":
            vd.entries.pop(op[1], None)
        else:  # ("holder", node)
            vd.holders.add(op[1])

    def _vd_update(self, directory: str, op: tuple[Any, ...]) -> None:
        vd = self.vds.peek(directory)
        if vd is not None:
            self._apply_vd_update(vd, op)
        elif directory in self._merging:
            self._merging[directory].append(op)
        # else: not cached; the next dirmerge reads the local directories

    # ------------------------------------------------------------------ handlers
    @handles(AddEntry)
    def on_add_entry(self, src: int, req: AddEntry) -> None:
        entry = DIR_ENTRY if req.is_dir else DTEntry(False, req.home)
        self._vd_update(req.directory, ("add", req.name, entry))

    @handles(DelEntry)
    def on_del_entry(self, src: int, req: DelEntry) -> None:
        self._vd_update(req.directory, ("del", req.name))

    @handles(SummaryAdd)
    def on_summary_add(self, src: int, req: SummaryAdd) -> Gen:
        """``req.node`` now holds local directory ``req.path``: update that
        node's summary here and the directory's VD holders."""
        summary = self.summaries.get(req.node)
        if summary is None:
            summary = self.summaries[req.node] = self.new_summary()
        elif req.node in self._shared:
            summary = self.summaries[req.node] = summary.copy()
            self._shared.discard(req.node)
        summary.add(req.path)
        vd = self.vds.peek(req.path)
        if vd is not None:
            vd.holders.add(req.node)
        elif req.path in self._merging:
            self._merging[req.path].append(("holder", req.node))
        elif req.new_dir:
            # The mkdir's manager found no such name anywhere: its VD is empty.
            vd = VirtualDirectory(holders={req.node})
            if self.config.aging:
                vd.built = yield NOW
            self.vds.put(req.path, vd)

    @handles(GetEntry)
    def on_get_entry(self, src: int, req: GetEntry) -> Gen:
        vd, how = yield from self.ensure_vd(req.directory)
        entry = vd.entries.get(req.name)
        if entry is None and how == 3 and self.config.vd_miss_age_s:
            # A miss in an older VD: the name may have been created in a local
            # tree outside the federation since; look once more.
            if (yield NOW) - vd.built >= self.config.vd_miss_age_s:
                self.vds.pop(req.directory)
                vd, how = (yield from self.dirmerge(req.directory)), 4
                entry = vd.entries.get(req.name)
        if entry is None:
            return None
        return entry.is_dir, entry.home, how

    @handles(ListVD)
    def on_list_vd(self, src: int, req: ListVD) -> Gen:
        vd, _ = yield from self.ensure_vd(req.path)
        return sorted((name, e.is_dir) for name, e in vd.entries.items())

    @handles(Rmdir)
    def on_rmdir(self, src: int, req: Rmdir) -> Gen:
        """At the directory's own manager (which holds its VD): remove an
        empty virtual directory from every node that holds it."""
        path = req.path
        is_dir, _, _ = yield from self.resolve(path, check_dt=True)
        if not is_dir:
            raise fs_error(errno.ENOTDIR, path)
        vd, _ = yield from self.ensure_vd(path)
        if vd.entries:
            raise fs_error(errno.ENOTEMPTY, path)
        for h in sorted(vd.holders):
            yield from self.call(h, RmLocal(path))
        self.vds.pop(path)
        self.dt.pop(path)
        d, name = split(path)
        yield from self.notify(self.manager_of(d), DelEntry(d, name))
