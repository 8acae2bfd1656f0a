"""Membership changes (FedFS 3.3): join and graceful leave, as view changes
(``fedsim.protocol.view``) plus the transfers they imply.

Join: the new node N asks any member (a *seed*) for the view, then asks it to
let N in (``Join``, carrying the epoch N saw; the seed forwards it to the
coordinator).  The coordinator installs epoch + 1 with N added and pushes it
to every member and to N (``ViewChange``).  On installing a view every node
moves the state the hashing moves:

* the DT entries it managed and no longer manages are handed to their new
  manager (``HandOff``), and only those: with the ring about 1/(N+1) of the
  names, with mod-N nearly all;
* a DT entry it now manages but did not manage is a requester's cached hint,
  not an exact entry: dropped (a miss asks the parent's VD, the truth);
* cached VDs of directories it no longer manages are dropped (soft state:
  the new manager rebuilds them by dirmerge on first use, and caches them
  once the coordinator says every member has the new view, ``ViewSettled``:
  until then a member still under the old view sends updates to the old
  manager, which a VD cached at the new one would miss);
* its summary is pushed to all again if it changed since its last full
  push: a directory made since then was added only to its manager's copy,
  and a new manager of it must not miss it (a Bloom false negative).

Then N sends its summary to all (a fresh push: each member answers with its
own), and a member's VD that predates the join and that N's summary may
contribute to is merged with N only, on its next use
(``Directory._merge_newcomers``).

Leave (graceful): the leaving node L asks the coordinator of the view without
it (the lowest other member) to drop it (``Leave``).  The new view reaches L
too, so L hands every name it manages to its new manager.  L's own files
follow ``ProtocolConfig.leave_files``:

* "unavailable": they leave the namespace with L (every member drops L's
  summary, its cached DT entries naming L as a home and the VDs L held a
  part of);
* "migrate": before its Leave, L makes each of its local directories at a
  remaining member (a ``Mkdir`` at that home, after the directory's manager
  merged it: no reservation, the name exists) and moves each of its regular
  files there with the migration mechanism (``MigrateIn``, as ``fednode
  migrate``: L is the source, the move commits or leaves no trace).  The
  target is the federation's placement policy asked as the name's manager
  in the view without L would ask it (with_manager: the new manager, so a
  moved file costs no extra hop; round_robin, random: spread storage), or
  round-robin over the others when the policy names L itself.  A move that
  fails (a target down, a name collision) aborts the leave with an error
  naming the file and the target: every file is whole at L or at its
  target, L is still a member, and the leave can be retried.  Passes repeat
  while new files keep arriving at L (EAGAIN after ``LEAVE_PASSES``).
  Known limit: a create placed at L between its last pass and the view
  change leaves with L, as under "unavailable".

Eviction (a crashed or cut-off member dropped without its participation)
is a view change too, made by ``failure.py``; the view counts as settled
once every member of the new view has installed it (the node dropped need
not answer, and an evicted one cannot): a member answers the ViewChange once
its install has handed its names off and pushed its summary to the new
managers, even when another request began that install.  Until the view
settles, a directory's new manager merges it from every member, not from
its summaries (which lack the directories members made since their last
full push, until they push).

One view change at a time: a coordinator that is installing one answers
EAGAIN to the next.  A join or leave decided under another epoch than the
coordinator's is refused with ESTALE (the sender fetches the view and asks
again), so two changes cannot both build on the same view at one
coordinator.  Known limit: a leave of the coordinator itself is decided by
the next lowest member, so a join and that leave arriving at once are two
coordinators' changes; only the higher epoch's members win.  Reservations,
rename marks and create holds in flight at a node whose names move are not
handed off (the names' new manager asks the parent's VD, as after a DT
eviction).  Operations racing a graceful leave may fail with PeerUnavailable
(a request in flight to the leaver when it stops), and an update the leaver
sent while leaving may outlive it in a VD (a parent's manager ignores an
AddEntry naming a non-member home, but not every interleaving is covered by
a test yet; joins under load are: ``tests/test_membership.py``).
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import Any, ClassVar

from fedsim.protocol.effects import Call, Local, Multicast, Sleep
from fedsim.protocol.fedfs.migration import MigrateIn
from fedsim.protocol.fedfs.rename import Renaming
from fedsim.protocol.messages import (
    ListVD,
    Mkdir,
    PeerUnavailable,
    ProtocolError,
    Request,
    fs_error,
    pack,
    register_request,
    unpack,
)
from fedsim.protocol.names import ROOT, InvalidPath, is_reserved, join, normalize
from fedsim.protocol.node import Gen, handles
from fedsim.protocol.tables import DIR_ENTRY, DTEntry
from fedsim.protocol.view import GetView, View, check_contacts, check_epoch, check_members, unpack_view

#: DT entries per HandOff message (a view change of a large DT travels in several)
HANDOFF_BATCH = 1024
#: With ``leave_files: migrate``: passes over the leaver's local tree (each
#: moves what the last one found) before it gives up on files that keep arriving
LEAVE_PASSES = 3
#: A ViewChange that finds its view's install here begun by another request
#: waits for that install's hand-offs and summary push, backing off from
#: ``summary_retry_s`` to ``summary_retry_max_s``, at most this many times
#: (then it answers all the same: an install stuck that long is no longer
#: worth the view's settling)
VIEW_CHANGE_WAITS = 16


@register_request
@dataclass(slots=True, frozen=True)
class Join(Request):
    """Let ``node`` in, under view ``epoch`` (any member forwards it to the
    coordinator); ``contact``: how the runtimes reach it, if their own
    configuration does not say (``View.contacts``). Reply: the new view's
    (epoch, members)."""

    reply: ClassVar[Any] = tuple[int, list[int]]
    node: int
    epoch: int
    contact: str = ""


@register_request
@dataclass(slots=True, frozen=True)
class Leave(Request):
    """Drop ``node`` from view ``epoch`` (at the coordinator of the view without it).
    Reply: the new view (epoch, members)."""

    reply: ClassVar[Any] = tuple[int, list[int]]
    node: int
    epoch: int


@register_request
@dataclass(slots=True, frozen=True)
class ViewChange(Request):
    """The coordinator's new view: its members and contacts packed (``View.to_bytes``)."""

    reply: ClassVar[Any] = None
    epoch: int
    view: bytes


@register_request
@dataclass(slots=True, frozen=True)
class ViewSettled(Request):
    """Every member has installed view ``epoch`` (the coordinator's ViewChange
    was answered by all): updates of a name now reach its new manager only."""

    reply: ClassVar[Any] = None
    epoch: int


@register_request
@dataclass(slots=True, frozen=True)
class HandOff(Request):
    """DT entries whose manager is now the receiver (in view ``epoch``):
    ``entries`` packed as [[path, is_dir, home or -1], ...]."""

    reply: ClassVar[Any] = None
    epoch: int
    entries: bytes


def pack_entries(entries: list[tuple[str, DTEntry]]) -> bytes:
    return pack([[p, e.is_dir, -1 if e.home is None else e.home] for p, e in entries])


def unpack_entries(data: bytes, members: tuple[int, ...]) -> list[tuple[str, DTEntry]]:
    """HandOff entries from the wire: at most HANDOFF_BATCH, canonical paths,
    homes that are members (ProtocolError otherwise)."""
    obj = unpack(data, max_size=len(data) + 1, use_list=False)
    if type(obj) is not tuple or len(obj) > HANDOFF_BATCH:
        raise ProtocolError(f"HandOff: an array of at most {HANDOFF_BATCH} entries")
    out = []
    for item in obj:
        if type(item) is not tuple or len(item) != 3:
            raise ProtocolError("HandOff: each entry is [path, is_dir, home]")
        path, is_dir, home = item
        if type(path) is not str or type(is_dir) is not bool or type(home) is not int:
            raise ProtocolError("HandOff: each entry is [path (str), is_dir (bool), home (int)]")
        try:
            if normalize(path) != path:
                raise InvalidPath(path)
        except InvalidPath:
            raise ProtocolError(f"HandOff: {path!r} is not a canonical federated path") from None
        if is_dir:
            out.append((path, DIR_ENTRY))
        elif home in members:
            out.append((path, DTEntry(False, home)))
        else:
            raise ProtocolError(f"HandOff: home {home} of {path} is not a member")
    return out


class Membership(Renaming):
    def __init__(self, node_id: int, spec: Any, **kw: Any) -> None:
        super().__init__(node_id, spec, **kw)
        self._changing = False  # this node (the coordinator) is installing a view
        # The view before the current one until the coordinator says every
        # member has installed the current one (``ViewSettled``); None: settled.
        self._prev_view: View | None = None
        # The newest epoch whose install here has handed its names off and
        # pushed this node's summary to the new managers (``on_view_change``)
        self._handed_off = 0
        # While this node's own Join is in flight: the epoch it was asked
        # under (a view after it that lists this node is the join's); None
        # otherwise (``adopts``).
        self._joining: int | None = None
        # This node asked to leave: a view without it is no eviction
        # (``failure.py``), and a change it acknowledges after installing that
        # view still reaches its successor (``Replication._forward``).
        self._leaving = False

    def describe(self) -> dict[str, Any]:
        settled = self._prev_view is None
        return {**super().describe(), "epoch": self.epoch, "member": self.member, "view_settled": settled}

    @property
    def ready(self) -> bool:
        return self.member and super().ready

    # ------------------------------------------------------------------ installing a view
    def may_cache(self, directory: str) -> bool:
        """Until every member has installed the view, a directory this node
        has just come to manage gets no cached VD: a member still under the
        old view sends the directory's updates (AddEntry, DelEntry) to the old
        manager, which a VD built here would miss.  Served uncached, each
        read merges the local trees again (which hold those updates)."""
        if not super().may_cache(directory):
            return False
        prev = self._prev_view
        return prev is None or prev.manager_of(directory) == self.id

    def merge_candidates(self, directory: str) -> list[int]:
        """Until every member has installed the view, a directory this node
        has just come to manage is merged from every member, not from the
        summaries here: a member's directory made since its last full push
        reached only the old manager's copy of its summary (``summary_add``),
        and the member pushes it to the new manager only as it installs the
        view itself.  Trusting the summaries meanwhile missed that member's
        files: a lookup said ENOENT, and a create of an existing name made a
        second file of it elsewhere (the agents' eviction under load)."""
        prev = self._prev_view
        if prev is not None and prev.manager_of(directory) != self.id:
            return list(self.members)
        return super().merge_candidates(directory)

    @handles(ViewSettled)
    def on_view_settled(self, src: int, req: ViewSettled) -> None:
        if req.epoch == self.epoch:
            self._settled()

    def _settled(self) -> None:
        """The current view is installed everywhere.  If it dropped members,
        the directories made implicitly since this node installed it are kept
        too (as ``install_view`` keeps the older ones): a create decided
        under the old view, whose parent the leaver held explicitly, made it
        here while the view changed, and it may be the namespace's only copy
        now (found by the dynamics property: a rename moved the file out and
        pruned the directory, which its parent's VD still listed)."""
        prev, self._prev_view = self._prev_view, None
        if prev is not None and set(prev.members) - set(self.members):
            self.implicit_dirs.clear()

    def install_view(self, view: View) -> Gen:
        """Adopt a newer view and move the state it moves (module docstring)."""
        old = self.view
        if view.epoch <= old.epoch:
            return
        self.view = view  # before any yield: a concurrent install sees it
        self.drop_delegations()  # (every name's manager is the hashing's again: ``delegation.py``)
        if self._prev_view is None:
            self._prev_view = old
        # (else an older unsettled view stays: it names managers that may still get updates)
        me = self.id
        gone = set(old.members) - set(view.members)
        moving: dict[int, list[tuple[str, DTEntry]]] = {}
        dt = self.dt
        for p in list(dt.keys()):
            e = dt.peek(p)
            was = old.manager_of(p) == me
            now = view.manager_of(p)
            if gone and (e.is_dir or e.home in gone):
                # A file whose home left is unavailable; a directory may have
                # been held by the leaver alone: the parent's VD (rebuilt
                # without the leaver) tells, on the next lookup.
                dt.pop(p)
            elif was and now != me:
                moving.setdefault(now, []).append((p, e))
                dt.pop(p)
            elif not was and now == me:
                dt.pop(p)  # a cached hint, not the exact entry a manager keeps
        if moving or gone:
            self.dt_epoch += 1  # lookup answers in flight must not re-cache what moved
        for d in list(self.vds.keys()):
            if view.manager_of(d) != me:
                self.vds.pop(d)
                self.stats.vds_dropped += 1
            elif self.vds.peek(d).holders & gone:
                self.vds.pop(d)  # it lists what the leaver held
                self.stats.vds_invalidated += 1
        if gone:
            # A directory this node made only to hold a file (``implicit_dirs``)
            # may now be the namespace's only copy of it: its explicit holder
            # may be the node that went.  Which one it was, this node cannot
            # tell, so it keeps them all: pruning one once empty would remove
            # a directory the namespace still lists (found by the in-memory
            # join/leave property: mkdir /b at the leaver, /b/a elsewhere, the
            # leave, then unlink /b/a took /b with it).  The cost: empty
            # directories may stay in this node's local tree.
            self.implicit_dirs.clear()
        if gone:
            yield from self.renames_orphaned(gone)  # holds of renames the leavers coordinated (``rename.py``)
            yield from self.unpin_gone(gone - {me})  # the leavers' descriptors (``home.py``)
        for g in gone:
            self.summaries.pop(g, None)
            self._shared.discard(g)
            self.summary_unacked.discard(g)
            self.suspects.pop(g, None)
        for node in sorted(moving):
            entries = moving[node]
            self.stats.handed_off += len(entries)
            for i in range(0, len(entries), HANDOFF_BATCH):
                try:
                    yield from self.call(node, HandOff(view.epoch, pack_entries(entries[i : i + HANDOFF_BATCH])))
                except PeerUnavailable:
                    pass  # soft state: the new manager asks the parent's VD on its first miss
        if self.member and me in old.members and self.summaries.get(me) is not None:
            # Directories made since this node's last full push reached only
            # their manager's copy of its summary (``summary_add``); one whose
            # manager changed would be a Bloom false negative at the new one.
            # Re-summarise and, if that differs from the last full push, send
            # it to the new managers of this node's directories, a joiner
            # too: the answer to its fresh push may have left before this
            # node made a directory whose ``summary_add`` went to the old
            # manager (found by the join race test).
            def new_managers(dirs: list[str]) -> set[int]:
                return {view.manager_of(d) for d in dirs if old.manager_of(d) != view.manager_of(d)}

            yield from self.regenerate_summary(push=True, to=new_managers)
            yield from self.keep_summary_current()  # pushed again to the members that missed it
        self._handed_off = max(self._handed_off, view.epoch)

    def adopts(self, view: View) -> bool:
        """A node that is no member takes a peer's view that lists it only
        from its own join (a view after the epoch it asked to join under).
        Any other such view is an old incarnation's: a restarted node that
        installed it would count itself a member, then take the eviction of
        its old incarnation for its own.  Views without it (the epoch and
        members it joins by) it learns as ever."""
        if self.member or self.id not in view.members:
            return True
        return self._joining is not None and view.epoch > self._joining

    @handles(ViewChange)
    def on_view_change(self, src: int, req: ViewChange) -> Gen:
        """Install the view; the answer tells the coordinator this node has
        (once every member answered, the view settles: new managers trust
        their summaries and cache VDs again).  So a view whose install here
        another request began (a heartbeat, a hand-off or a client's call
        under the new epoch) is answered once that install has handed its
        names off and pushed this node's summary to the new managers: until
        then they would miss this node's entries."""
        members, contacts = unpack_view(req.view)
        if req.epoch > self.epoch:
            view = self.view.adopt(req.epoch, members, contacts)
            if self.adopts(view):
                yield from self.install_view(view)
        c = self.config
        delay = c.summary_retry_s or 0.05
        for _ in range(VIEW_CHANGE_WAITS):
            if self._handed_off >= req.epoch or self.epoch != req.epoch:
                return
            yield Sleep(delay)
            delay = min(2 * delay, c.summary_retry_max_s or 2.0)

    @handles(HandOff)
    def on_hand_off(self, src: int, req: HandOff) -> Gen:
        if req.epoch > self.epoch:
            yield from self.fetch_view(src)
        for path, entry in unpack_entries(req.entries, self.members):
            # (not moved on again by a newer view; and an entry put here since
            # this node took the name over is newer than the old manager's:
            # a rename's end forwarded by it may overtake its hand-off)
            if self.manager_of(path) == self.id and self.dt.peek(path) is None:
                self.dt.put(path, entry)

    # ------------------------------------------------------------------ at the coordinator
    def _change_view(self, view: View) -> Gen:
        """Install ``view`` here and push it to every member of the old and
        the new view (a leaver hands off its names when it gets it)."""
        if self._changing:
            raise fs_error(errno.EAGAIN, "/", "a view change is in flight here; try again")
        self._changing = True
        try:
            targets = tuple(sorted((set(self.members) | set(view.members)) - {self.id}))
            yield from self.install_view(view)
            if targets:
                # A member that misses it learns the view from its next
                # request's redirect, or from a peer's newer epoch.
                replies = yield Multicast(targets, ViewChange(view.epoch, view.to_bytes()))
                members = tuple(m for m in view.members if m != self.id)
                # (a node the view drops need not answer: an evicted one cannot)
                answered = all(
                    not isinstance(r, BaseException) for t, r in zip(targets, replies, strict=True) if t in members
                )
                if answered and self.epoch == view.epoch:
                    # every member routes by the new view now (one that missed
                    # it would still send updates to old managers: no settle)
                    self._settled()
                    if members:
                        yield Multicast(members, ViewSettled(view.epoch))
            elif self.epoch == view.epoch:
                self._settled()
        finally:
            self._changing = False
        return view.epoch, list(view.members)

    @handles(Join)
    def on_join(self, src: int, req: Join) -> Gen:
        if not self.member:
            raise fs_error(errno.ENOTCONN, "/", f"node {self.id} is not a member; ask a member to join")
        if self.id != self.view.coordinator:
            return (yield from self.call(self.view.coordinator, req))
        if req.node in self.members:
            raise fs_error(errno.EEXIST, "/", f"node {req.node} is already a member (view {self.epoch})")
        if not 0 <= req.node < 1 << 31:
            raise fs_error(errno.EINVAL, "/", f"node id {req.node} is outside 0..2^31-1")
        check_epoch(req, self.view)
        check_contacts([(req.node, req.contact)] if req.contact else [], (req.node,))
        return (yield from self._change_view(self.view.changed((*self.members, req.node), (req.node, req.contact))))

    @handles(Leave)
    def on_leave(self, src: int, req: Leave) -> Gen:
        if req.node not in self.members:
            raise fs_error(
                errno.ENOENT, "/", f"node {req.node} is not a member (view {self.epoch}: {list(self.members)})"
            )
        rest = tuple(m for m in self.members if m != req.node)
        if not rest:
            raise fs_error(errno.EINVAL, "/", f"node {req.node} is the last member; a federation cannot be empty")
        if self.id != rest[0]:
            return (yield from self.call(rest[0], req))
        check_epoch(req, self.view)
        return (yield from self._change_view(self.view.changed(rest)))

    # ------------------------------------------------------------------ at the joining or leaving node
    def join(self, seed: int, contact: str = "") -> Gen:
        """Join the federation through member ``seed`` (this node was built
        with a view that does not name it); ``contact``: how peers reach this
        node if their configuration does not list it.  Returns the new view's
        epoch once this node is a member and has sent its summary to all."""
        if self.member:
            raise fs_error(errno.EEXIST, "/", f"node {self.id} is already a member (view {self.epoch})")
        epoch, members, contacts = yield Call(seed, GetView())
        members = check_members(members)
        if self.id in members:
            raise fs_error(errno.EEXIST, "/", f"node {self.id} is already a member of view {epoch}")
        # not a member yet: nothing of this view is ours to move
        self.view = self.view.adopt(epoch, members, check_contacts(contacts, members))
        self._joining = epoch
        try:
            yield Call(seed, Join(self.id, epoch, contact))
            if not self.member:  # its ViewChange did not reach us: ask for the view
                yield from self.fetch_view(seed)
        finally:
            self._joining = None
        yield from self.start()  # FedFS 3.3: the summary to all (a fresh push), and the node's timers
        return self.epoch

    def leave(self) -> Gen:
        """Leave the federation gracefully: hand off the names this node
        manages; its files follow ``leave_files`` (with "migrate" they are
        moved to the remaining members first, ``_migrate_away``).  Returns
        the new epoch."""
        if not self.member:
            raise fs_error(errno.ENOENT, "/", f"node {self.id} is not a member (view {self.epoch})")
        rest = [m for m in self.members if m != self.id]
        if not rest:
            raise fs_error(errno.EINVAL, "/", f"node {self.id} is the last member; a federation cannot be empty")
        self._leaving = True
        try:
            if self.config.leave_files == "migrate":
                yield from self._migrate_away(tuple(rest))
            yield from self.call(rest[0], Leave(self.id, self.epoch))
            if self.member:  # the ViewChange did not reach us
                yield from self.fetch_view(rest[0])
        except BaseException:
            self._leaving = not self.member  # (refused: still a member)
            raise
        if self.orphans:  # files unlinked while open here: no descriptor of them outlives the leave
            yield from self._clear_orphans()
        return self.epoch

    def _migrate_away(self, rest: tuple[int, ...]) -> Gen:
        """Before a leave with ``leave_files: migrate``: make each of this
        node's directories at a remaining member (``Mkdir`` at a home: the
        directory is in the namespace already, so no reservation; made
        explicitly, not as a moved file's implicit parent, so it outlives
        its last file as it would have here) and move each of its regular
        files there with the migration mechanism (``MigrateIn`` to the
        target, which runs the move from this node).  Targets: the
        federation's placement policy, asked as the file's manager in the
        view without this node would ask it for a new name, so that
        with_manager keeps a file with its new manager (no extra hop) and
        round_robin / random spread the storage; a choice outside ``rest``
        (with_requester, a pin to this node) goes round-robin over ``rest``.  Passes repeat while files keep arriving
        (a create placed here meanwhile), up to ``LEAVE_PASSES``.

        A file that cannot be moved (its target down or refusing) aborts the
        leave: every move either committed (the file is whole at its target)
        or left no trace (whole here), and this node is still a member, so
        the leave can be retried."""
        after = self.view.changed(rest)
        turn = 0

        def target(path: str, is_dir: bool) -> int:
            nonlocal turn
            t = self.placement.choose_home(path, is_dir, self.id, after.manager_of(path), rest)
            if t not in rest:
                t, turn = rest[turn % len(rest)], turn + 1
            return t

        def abort(path: str, to: int, exc: OSError) -> OSError:
            return fs_error(
                exc.errno or errno.EIO,
                path,
                f"leave of node {self.id} aborted: cannot move it to node {to} ({exc}); "
                "nothing was lost and the node is still a member: retry the leave",
            )

        made: set[str] = set()
        for attempt in range(LEAVE_PASSES + 1):
            # sorted: a directory before what it holds (the federation's own spaces are no part of the
            # namespace: the files unlinked while open end with the leave, as with a restart)
            dirs = [d for d in (yield Local("list_dirs", ROOT)) if not is_reserved(d)]
            for d in [d for d in dirs if d != ROOT and d not in made]:
                to = target(d, True)
                try:
                    # Merged at its manager first: a Mkdir that makes the
                    # directory at a node without it says "new directory" to
                    # its manager, which then caches an empty VD unless one
                    # is there already (right for a fresh mkdir, not here).
                    yield from self._busy(lambda d=d: self.call(self.manager_of(d), ListVD(d)))
                    yield from self.call(to, Mkdir(d))
                except OSError as exc:
                    raise abort(d, to, exc) from exc
                made.add(d)
            files: list[str] = []
            for d in dirs:
                entries = yield Local("listdir", d)
                files += [join(d, name) for name, is_dir in entries if not is_dir]
            files = [f for f in files if f not in self.incoming]  # type: ignore[attr-defined]  # hidden copies in
            if not files:
                return
            if attempt == LEAVE_PASSES:
                raise fs_error(
                    errno.EAGAIN,
                    "/",
                    f"leave of node {self.id}: files kept arriving while its files were moved away; "
                    "nothing was lost and the node is still a member: retry the leave",
                )
            for f in files:
                to = target(f, False)
                try:
                    yield from self._busy(lambda f=f, to=to: self.call(to, MigrateIn(f, self.id)))
                except OSError as exc:
                    if exc.errno == errno.ENOENT and not (yield from self._holds_file(f)):
                        continue  # unlinked or renamed away meanwhile: nothing to move
                    raise abort(f, to, exc) from exc

    def _holds_file(self, path: str) -> Gen:
        """Whether the local tree still holds ``path`` (a move that found no
        such file may be racing an unlink: nothing then to move)."""
        try:
            yield Local("stat", path)
        except FileNotFoundError:
            return False
        return True
