"""The parent's manager: the node that manages a directory's name holds its
virtual directory (VD), cached or rebuilt by dirmerge from the local
directories of the nodes whose summaries may hold it (FedFS 2.2), and runs
what must see the whole directory (readdir, rmdir, entry lookups).

Invariant the property tests check: a cached VD is exact.  AddEntry/DelEntry
keep it current, including while a dirmerge for it is in flight (updates are
queued and replayed on the merge's result).  A rename past its commit point
(``rename.py``) is applied the same way to a merge of its directory, since the
local trees catch up with it only when the rename finishes.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import Any

from fedsim.protocol.effects import NOW, Compute, Local, Multicast, Sleep, Spawn
from fedsim.protocol.fedfs.summaries import Summaries
from fedsim.protocol.messages import (
    ENTRY_FRESH,
    ENTRY_HOLD,
    ENTRY_PROBE,
    AddEntry,
    DelEntry,
    GetEntry,
    ListVD,
    PeerUnavailable,
    ReadDir,
    Request,
    Rmdir,
    RmLocal,
    Settle,
    SummaryAdd,
    fs_error,
)
from fedsim.protocol.names import ROOT, hide_replicas, join, parent, split
from fedsim.protocol.node import Gen, handles
from fedsim.protocol.tables import DIR_ENTRY, LRU, DTEntry, VirtualDirectory

# A create's hold on its name in the parent's VD (``GetEntry`` with
# ENTRY_HOLD) lasts until the create's AddEntry, its settle, or this many
# seconds: far above a create's few round trips, so only a hold whose create
# failed without a word (its requester crashed) ever expires.
HOLD_S = 2.0
# Background repairs (``repair``): first try at once, then back off from
# REPAIR_FIRST_S doubling to REPAIR_MAX_S, until the peer answers.
REPAIR_FIRST_S = 0.05
REPAIR_MAX_S = 5.0
# A peer that did not answer a dirmerge's ReadDir is not asked again by this
# node's merges for readers (``Node.suspects``) for this long, or until a
# request or an answer from it arrives: a hung peer costs one timeout here,
# not one per read that merges a directory it may hold.  A create's check, a
# settle and rmdir ask it all the same.  The VDs served meanwhile miss its entries,
# are not cached, and are trusted by no create check, settle or rmdir
# (``VirtualDirectory.unreachable``): those fail naming it.
SUSPECT_S = 10.0
# A dirmerge overtaken by this many view changes in a row is served as it is
# (uncached): only a federation changing membership faster than one merge
# could do that.
VIEW_RETRIES = 3
# SummaryAdds kept per node whose summary has not arrived (``on_summary_add``):
# far above the directories a node makes in one join's round trip.
EARLY_ADDS = 65536


@dataclass(slots=True)
class RenameFlight:
    """A rename in flight in one directory, at the directory's manager."""

    old: str  # the two names, within the directory
    new: str
    home: int | None = None  # set at the commit point: the home ``new`` now names
    #: its rollback or post-commit steps are still being retried (``Renaming._tell``):
    #: the directory stays busy until every participant got them
    telling: bool = False
    #: the source directory's hold of a rename across directories (``rename.py``):
    #: ``old`` is in doubt (its readdir and its lookups here answer EAGAIN) until
    #: the coordinator, node ``by``, tells the outcome
    doubt: bool = False
    by: int = -1
    #: the moved name is a directory (``rename.py``): the commit names it one
    is_dir: bool = False
    #: the source directory's flight of a rename across directories: ``new``
    #: is in another directory, so the commit only drops ``old`` here
    moved_out: bool = False


class Directory(Summaries):
    def __init__(self, node_id: int, spec: Any, **kw: Any) -> None:
        super().__init__(node_id, spec, **kw)
        self.vds: LRU[str, VirtualDirectory] = LRU(self.config.vd_entries)
        # directory -> VD updates queued while its dirmerge is in flight
        self._merging: dict[str, list[Any]] = {}
        # Name collisions seen by dirmerges at this node: path -> (the home the
        # name resolves to, None for a directory; every node holding it as a file).
        self.collisions: dict[str, tuple[int | None, tuple[int, ...]]] = {}
        # directory -> the rename in flight in it (one at a time per directory)
        self.renames: dict[str, RenameFlight] = {}
        # directory -> {name: when}: creates in flight in it, between their
        # check here (GetEntry with ENTRY_HOLD) and their AddEntry; an rmdir
        # of the directory meanwhile is told EAGAIN (else the create's home
        # would make the removed directory again, outside the namespace).
        self.holds: dict[str, dict[str, float]] = {}
        # directories whose rmdir is removing them from their holders: a
        # create inside one is told EAGAIN until the rmdir is decided.
        self.removing: set[str] = set()
        self.repairs_pending = 0  # background repairs still trying to reach a peer

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
            "repairs_pending": self.repairs_pending,
        }

    # ------------------------------------------------------------------ background repair
    def repair(self, node: int, request: Request) -> Gen:
        """Deliver ``request`` (an idempotent repair: ``Settle``) to ``node``
        in the background: at once, and while the peer is unreachable or
        busy, again with backoff (``Sleep``) until it answers.  A repair that
        needs a peer that is down is retried, never forgotten (so in the
        simulator a pending repair keeps ``env.run()`` going until the peer
        is back; ``describe()`` counts them as ``repairs_pending``)."""
        self.repairs_pending += 1
        yield Spawn(self._repair_loop(node, request))

    def _repair_loop(self, node: int, request: Request) -> Gen:
        delay = REPAIR_FIRST_S
        try:
            route = type(request).route
            while True:
                if route is not None:  # the name's manager in the current view (one that left is not asked)
                    node = self.manager_of(getattr(request, route))
                try:
                    yield from self.call(node, request)
                    return
                except (PeerUnavailable, BlockingIOError):
                    pass
                except OSError:
                    return  # answered: the name's state is decided there
                yield Sleep(delay)
                delay = min(2 * delay, REPAIR_MAX_S)
        finally:
            self.repairs_pending -= 1

    # ------------------------------------------------------------------ the VD cache
    def ensure_vd(self, directory: str, check_parent: bool = True, ask_all: bool = False) -> Gen:
        """The VD of ``directory`` and how it was found: 3 = cached, 4 = dirmerge."""
        vd = self.vds.get(directory)
        if vd is not None:
            age = self.config.vd_max_age_s
            if not age or (yield NOW) - vd.built <= age:
                if vd.missing:
                    return (yield from self._merge_newcomers(directory, vd)), 4
                return vd, 3
            self.vds.pop(directory)  # too old: the local trees may have changed
        return (yield from self.dirmerge(directory, check_parent, ask_all)), 4

    def _merge_newcomers(self, directory: str, vd: VirtualDirectory) -> Gen:
        """FedFS 3.3's incremental dirmerge: a cached VD that predates a join
        merges with the members that joined since (``vd.missing``) only.  A
        newcomer that does not answer, or a name it holds that the VD has
        too (a collision, decided by a full merge in id order), falls back
        to a full dirmerge."""
        if directory in self._merging:
            self.stats.merge_waits += 1
            raise fs_error(errno.EAGAIN, directory, "a dirmerge of this directory is in flight; try again")
        nodes = tuple(sorted(n for n in vd.missing if n in self.members and n != self.id))
        self._merging[directory] = []
        try:
            replies = (yield Multicast(nodes, ReadDir(directory))) if nodes else []
        finally:
            del self._merging[directory]
        if self.vds.peek(directory) is not vd:  # dropped meanwhile (a view change, an rmdir)
            return (yield from self.dirmerge(directory))
        add: list[tuple[int, str, bool]] = []
        for node, ans in zip(nodes, replies, strict=True):
            if isinstance(ans, FileNotFoundError):
                continue  # a Bloom false positive
            if isinstance(ans, BaseException) or any(name in vd.entries for name, _ in ans):
                self.vds.pop(directory)
                return (yield from self.dirmerge(directory))
            add.extend((node, name, is_dir) for name, is_dir in ans)
            vd.holders.add(node)
        for node, name, is_dir in add:
            self._merge_entry(vd, name, is_dir, node)
        vd.missing.clear()
        st = self.stats
        st.dirmerges += 1
        st.incremental_merges += 1
        st.dirmerge_contacted.append(len(nodes))
        st.dirmerge_holders.append(sum(1 for r in replies if not isinstance(r, BaseException)))
        st.merges_by_dir[directory] += 1
        return vd

    def dirmerge(self, directory: str, check_parent: bool = True, ask_all: bool = False) -> Gen:
        """Build a VD from the local directories of the nodes whose summary says
        they may hold it (FedFS 2.2).  Bloom filters give no false negatives, so
        no holder is missed; false positives cost one wasted ReadDir each.

        One merge per directory at a time: a request that finds a merge of the
        same directory in flight is answered EAGAIN instead of starting its
        own, so concurrent first lookups do not multiply the fan-out; the
        requester backs off and asks again (``Requester._busy``), and finds
        the merged VD cached.  It is not made to wait here: a handler waiting
        for the merge would hold a worker of its stage while the merge's
        ReadDirs may need workers of that very stage on the other nodes
        (bounded pools: a deadlock), the same reason renames answer EAGAIN."""
        if directory in self._merging:
            self.stats.merge_waits += 1
            raise fs_error(errno.EAGAIN, directory, "a dirmerge of this directory is in flight; try again")
        for _ in range(VIEW_RETRIES):
            epoch = self.epoch
            pending: list[Any] = []
            self._merging[directory] = pending
            try:
                vd = yield from self._merge(directory, pending, check_parent, ask_all)
            finally:
                del self._merging[directory]
            if self.epoch == epoch:
                return vd
            # The view changed while the merge was in flight: a member may
            # have joined (its entries were not asked for) or left, and this
            # node may no longer manage the directory.  Merge again under
            # the new view (the local trees hold every update made since).
            self.vds.pop(directory)
            self.stats.view_retries += 1
        return vd

    def local_entries(self, directory: str) -> Gen:
        """This node's part of ``directory`` in a dirmerge: its local entries
        (what ``ReadDir`` answers a peer's merge and a merge here reads, so
        that a role hiding an entry, as migration does for a copy still
        arriving, hides it from both; the replica space is never an entry)."""
        return hide_replicas(directory, (yield Local("listdir", directory)))

    def _merge(self, directory: str, pending: list[Any], check_parent: bool = True, ask_all: bool = False) -> Gen:
        cacheable = self.may_cache(directory)  # (as the merge starts: updates before it may have gone elsewhere)
        yield Compute("bloom_probe", len(self.members))
        candidates = self.merge_candidates(directory)
        answers: dict[int, Any] = {}
        if self.id in candidates:
            try:
                answers[self.id] = yield from self.local_entries(directory)
            except OSError as exc:
                answers[self.id] = exc
        remote = tuple(n for n in candidates if n != self.id)
        ask = remote
        if self.suspects and not ask_all:  # (a create's check, a settle, rmdir: ask every candidate)
            now = yield NOW
            for n in [n for n, until in self.suspects.items() if until <= now]:
                del self.suspects[n]
            ask = tuple(n for n in remote if n not in self.suspects)
            for n in remote:
                if n in self.suspects:
                    answers[n] = PeerUnavailable(n, "did not answer a recent dirmerge; not asked")
        if ask:
            replies = yield Multicast(ask, ReadDir(directory))
            answers.update(zip(ask, replies, strict=True))
            silent = [n for n, r in zip(ask, replies, strict=True) if isinstance(r, PeerUnavailable) and r.node == n]
            if self.suspects:
                for n in ask:
                    if n not in silent:
                        self.suspects.pop(n, None)  # it answered
            if silent:
                until = (yield NOW) + SUSPECT_S
                for n in silent:
                    self.suspects[n] = until
        vd = VirtualDirectory()
        if self.config.aging:
            vd.built = yield NOW  # when the merge started: updates after it are replayed
        not_dir = unavailable = False
        for node in sorted(answers):
            ans = answers[node]
            if isinstance(ans, PeerUnavailable):
                unavailable = ans
            elif isinstance(ans, NotADirectoryError):
                not_dir = True
            elif isinstance(ans, BlockingIOError):
                # A holder frozen by a directory rename (``rename.py``): its part is
                # unknown until the rename ends there; a VD without it is no VD.
                raise fs_error(errno.EAGAIN, directory, "a rename of this directory is in flight; try again")
            elif isinstance(ans, BaseException):
                continue  # ENOENT: a Bloom false positive
            else:
                vd.holders.add(node)
                for name, is_dir in ans:
                    self._merge_entry(vd, name, is_dir, node)
        for op in pending:  # namespace updates that arrived while the merge was in flight
            self._apply_vd_update(vd, op)
        flight = self.renames.get(directory)
        if flight is not None and flight.home is not None:  # committed; the local trees may lag
            vd.entries.pop(flight.old, None)
            if not flight.moved_out:
                vd.entries[flight.new] = DIR_ENTRY if flight.is_dir else DTEntry(False, flight.home)
                vd.collisions.pop(flight.new, None)
        if vd.collisions or self.collisions:
            self._note_collisions(directory, vd)
        st = self.stats
        st.dirmerges += 1
        st.dirmerge_contacted.append(len(ask))
        st.dirmerge_holders.append(len(vd.holders - {self.id}))
        st.merges_by_dir[directory] += 1
        if not vd.holders and directory != ROOT:
            if unavailable:
                raise PeerUnavailable(unavailable.node, f"no reachable holder of {directory}: {unavailable.reason}")
            if not not_dir and check_parent:
                # Summaries hold directories only, so a file by this name was
                # never asked: the VDs above tell ENOTDIR from ENOENT (error
                # path only).
                not_dir = yield from self._under_a_file(directory)
            raise fs_error(errno.ENOTDIR if not_dir else errno.ENOENT, directory)
        if unavailable:
            st.incomplete_merges += 1  # serve it, but do not cache a partial VD
            vd.unreachable = unavailable.node
        elif cacheable and self.may_cache(directory):
            self.vds.put(directory, vd)
        return vd

    def merge_candidates(self, directory: str) -> list[int]:
        """The members a dirmerge of ``directory`` asks: those whose summary
        may hold it (or whose summary is not here yet)."""
        return [n for n in self.members if (s := self.summaries.get(n)) is None or s.may_contain(directory)]

    def may_cache(self, directory: str) -> bool:
        """Whether a VD of ``directory`` built now may be cached here: only at
        its manager (a view change may have moved it away while the merge ran;
        the membership role adds its own condition)."""
        return self.manager_of(directory) == self.id

    def _under_a_file(self, directory: str) -> Gen:
        """Whether ``directory``, which no local tree holds, is a file or lies
        under one: the VD of its nearest existing ancestor tells.  One probe
        (``GetEntry`` with ENTRY_PROBE, which does not look further up
        itself) per missing ancestor, one after the other: a path under 40
        missing ancestors costs 40 probes, never 40 nested requests (the
        agent refuses nesting deeper than ``wire.MAX_DEPTH``)."""
        d = directory
        while d != ROOT:
            parent_dir, name = split(d)
            try:
                r = yield from self.call(self.manager_of(parent_dir), GetEntry(parent_dir, name, ENTRY_PROBE))
            except FileNotFoundError:
                d = parent_dir  # the parent is missing too: ask about it
                continue
            except NotADirectoryError:
                return True  # an ancestor is a file
            return r is not None and not r[0]
        return False

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
            home = op[2] if len(op) > 2 else -1  # ("del", name[, home]): see ``DelEntry``
            e = vd.entries.get(op[1])
            if e is not None and (home < 0 or (not e.is_dir and e.home == home)):
                del vd.entries[op[1]]
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
    def in_doubt(self, directory: str, name: str | None = None) -> None:
        """EAGAIN while a rename across directories out of ``directory`` is in
        doubt here (for a readdir; for a lookup of ``name``, if it is the
        moved name): the source's directory is the one whose update follows
        the commit point (``rename.py``)."""
        f = self.renames.get(directory)
        if f is not None and f.doubt and (name is None or name == f.old):
            raise fs_error(errno.EAGAIN, directory, "a rename out of this directory is in flight; try again")

    def _release(self, directory: str, name: str) -> None:
        held = self.holds.get(directory)
        if held is not None:
            held.pop(name, None)
            if not held:
                del self.holds[directory]

    def _held(self, directory: str) -> Gen:
        """Whether a create inside ``directory`` is in flight (an unexpired hold)."""
        held = self.holds.get(directory)
        if not held:
            return False
        now = yield NOW
        for name in [n for n, t in held.items() if now - t > HOLD_S]:
            del held[name]
        if not held:
            del self.holds[directory]
            return False
        return True

    @handles(AddEntry)
    def on_add_entry(self, src: int, req: AddEntry) -> None:
        entry = DIR_ENTRY if req.is_dir else DTEntry(False, req.home)
        self._release(req.directory, req.name)
        if req.home not in self.members:
            return  # from a node that has left (an update that raced its leave): its files are not ours
        self._vd_update(req.directory, ("add", req.name, entry))

    @handles(DelEntry)
    def on_del_entry(self, src: int, req: DelEntry) -> None:
        self._vd_update(req.directory, ("del", req.name, req.home))

    @handles(SummaryAdd)
    def on_summary_add(self, src: int, req: SummaryAdd) -> Gen:
        """``req.node`` now holds local directory ``req.path``: update that
        node's summary here and the directory's VD holders."""
        summary = self.summaries.get(req.node)
        if summary is None:
            # None yet: the node is asked by every merge until its summary
            # arrives, which then gets this directory too (a summary made of
            # this one directory would hide the others it holds: a joiner's
            # new managers get SummaryAdds before the summary its fresh push
            # brings, and that summary may have been made before this add).
            early = self.early_adds.setdefault(req.node, set())
            if len(early) < EARLY_ADDS:
                early.add(req.path)
        else:
            if req.node in self._shared:
                summary = self.summaries[req.node] = summary.copy()
                self._shared.discard(req.node)
            summary.add(req.path)
        vd = self.vds.peek(req.path)
        if vd is not None:
            vd.holders.add(req.node)
        elif req.path in self._merging:
            self._merging[req.path].append(("holder", req.node))
        elif req.new_dir and self.may_cache(req.path):
            # The mkdir's manager found no such name anywhere: its VD is empty.
            vd = VirtualDirectory(holders={req.node})
            if self.config.aging:
                vd.built = yield NOW
            self.vds.put(req.path, vd)

    @handles(GetEntry)
    def on_get_entry(self, src: int, req: GetEntry) -> Gen:
        flags = req.flags
        if self.renames and not flags & ENTRY_PROBE:  # (a probe asks "a file?": the moved name is one either way)
            self.in_doubt(req.directory, req.name)
        if flags & ENTRY_FRESH:
            # A settle: the truth from the local trees, not a cached VD that
            # may have missed a lost AddEntry/DelEntry.  With ENTRY_HOLD the
            # settled create's hold ends; without, a create in flight (a
            # hold) must finish first.
            if flags & ENTRY_HOLD:
                self._release(req.directory, req.name)
            elif req.name in self.holds.get(req.directory, ()) and (yield from self._held(req.directory)):
                if req.name in self.holds.get(req.directory, ()):
                    raise fs_error(errno.EAGAIN, req.directory, "a create of this name is in flight; try again")
            if req.directory in self._merging:
                raise fs_error(errno.EAGAIN, req.directory, "a dirmerge of this directory is in flight; try again")
            self.vds.pop(req.directory)
            vd, how = (yield from self.dirmerge(req.directory, ask_all=True)), 4
        else:
            if flags & ENTRY_HOLD and req.directory in self.removing:
                raise fs_error(errno.EAGAIN, req.directory, "an rmdir of this directory is in flight; try again")
            vd, how = yield from self.ensure_vd(
                req.directory, check_parent=not flags & ENTRY_PROBE, ask_all=bool(flags & ENTRY_HOLD)
            )
        entry = vd.entries.get(req.name)
        if entry is None and how == 3 and self.config.vd_miss_age_s:
            # A miss in an older VD: the name may have been created in a local
            # tree outside the federation since; look once more.
            if (yield NOW) - vd.built >= self.config.vd_miss_age_s:
                self.vds.pop(req.directory)
                vd, how = (yield from self.dirmerge(req.directory)), 4
                entry = vd.entries.get(req.name)
        if entry is None and vd.unreachable >= 0 and flags & (ENTRY_HOLD | ENTRY_FRESH):
            # The name may be on the node that did not answer: a create must
            # not take it, a settle must not drop it.
            raise PeerUnavailable(vd.unreachable, f"may hold {req.directory} and did not answer its dirmerge")
        if entry is None:
            if flags & ENTRY_HOLD:
                # No yield between the VD's answer and the hold: an rmdir
                # checks both at one instant, so it sees the create or the
                # create sees the directory gone.
                now = yield NOW  # (answered at once in every runtime: no interleaving here)
                if req.directory in self.removing:
                    raise fs_error(errno.EAGAIN, req.directory, "an rmdir of this directory is in flight; try again")
                self.holds.setdefault(req.directory, {})[req.name] = now
            return None
        return entry.is_dir, entry.home, how

    @handles(ListVD)
    def on_list_vd(self, src: int, req: ListVD) -> Gen:
        self.in_doubt(req.path)
        vd, _ = yield from self.ensure_vd(req.path)
        self.in_doubt(req.path)  # (one began while the VD was merged)
        return sorted((name, e.is_dir) for name, e in vd.entries.items())

    @handles(Rmdir)
    def on_rmdir(self, src: int, req: Rmdir) -> Gen:
        """At the directory's own manager (which holds its VD): remove an
        empty virtual directory from every node that holds it."""
        path = req.path
        is_dir, _, _ = yield from self.resolve(path, check_dt=True)
        if not is_dir:
            raise fs_error(errno.ENOTDIR, path)
        if path in self.removing:
            raise fs_error(errno.EAGAIN, path, "an rmdir of this directory is in flight; try again")
        vd, _ = yield from self.ensure_vd(path, ask_all=True)
        if vd.entries:
            raise fs_error(errno.ENOTEMPTY, path)
        if vd.unreachable >= 0:  # it may hold entries, and its copy would stay
            raise PeerUnavailable(vd.unreachable, f"may hold {path} and did not answer its dirmerge")
        if (yield from self._held(path)):
            raise fs_error(errno.EAGAIN, path, "a create in this directory is in flight; try again")
        if path in self.removing:  # another rmdir began while we looked
            raise fs_error(errno.EAGAIN, path, "an rmdir of this directory is in flight; try again")
        if path in self.renames:  # a rename into it (across directories: its VD lacks the name until the commit)
            raise fs_error(errno.EAGAIN, path, "a rename in this directory is in flight; try again")
        self.removing.add(path)
        try:
            for h in sorted(vd.holders):
                yield from self.call(h, RmLocal(path))
            self.vds.pop(path)
            self.dt.pop(path)
        finally:
            self.removing.discard(path)
        d, name = split(path)
        try:
            yield from self.notify(self.manager_of(d), DelEntry(d, name))
        except PeerUnavailable:
            # Removed everywhere; the parent's VD may still list it: settle
            # the name (here: its manager) from the local trees, in the background.
            yield from self.repair(self.id, Settle(path))
            raise
