"""Replication (FedFS 3.2, issue 13): two coherent copies of every regular
file when ``ProtocolConfig.replicas`` is 2; with 1 this role is inert (its
handlers and wrappers are not even installed: no message, no generator
frame on any hot path).

* The *primary* is the file's home H (as ever); the *secondary* is
  ``successor(H)``, the next member after H in the view's sorted members
  (wrapping).  The secondary keeps its copy in its *replica space*: the same
  federated path under ``names.REPLICA_ROOT`` of its local tree, which the
  namespace never shows.  Directories are not replicated: a promoted file's
  missing parents are made, as a create makes them.
* **Writes.**  Every change of a regular file at its home (create, write,
  truncate, unlink, setattr, the local steps of a rename, a migration's
  commit at the target and removal at the source) is applied locally, then
  forwarded to the secondary (``ReplicaPut``, ``ReplicaWrite``,
  ``ReplicaTruncate``, ``ReplicaDrop``, ``ReplicaRename``,
  ``ReplicaSetattr``) before the home replies: a change is acknowledged
  only once both copies hold it (issue 13).  A secondary that does not
  answer fails a create, write, truncate, unlink or setattr with
  ``PeerUnavailable`` naming the secondary, unless a view installed
  meanwhile gave the home another successor (the file goes to it whole,
  then the reply) or the home is alone.  The local step stays applied: the
  outcome is ambiguous, as after a timeout (the rule "a failed operation
  leaves no trace" allows it there); the path goes into ``unsynced`` and
  is copied whole (``replicate``) by a background repair with back-off, on
  the next change of the file, or at the next view change; a home evicted
  meanwhile (cut off) drops it at its restart for the promoted copy, which
  is then the truth of every acknowledged change.  A crashed secondary thus
  costs failed changes of its primary's files until it is evicted (about
  ``heartbeat_misses * heartbeat_s`` plus the check), not a lost write.  A
  secondary that answers with an error (its copy is missing) gets the file
  whole at once.
* **The steps of a commit** follow the same rule, with the same helpers
  (``_forward``, ``_ack_or_fail``).  A rename's steps at the homes
  (``RenameFinish`` renames at H_a, ``RenameDrop`` removes the replaced
  target at H_b) and a migration's ``MigrateDone`` (the source removes its
  file) come after their commit point, where undoing is not atomic (a
  client may have seen the new state): the home does its step, forwards it,
  and answers ``PeerUnavailable`` naming its secondary if that did not take
  it; the coordinator (the directory's manager, the move's target) runs
  every step left and then fails the operation with that error
  (``rename._lagging``): committed and visible, ambiguous to the client as
  after a timeout, the copy completed by the repair.  A rename's copy
  not taken leaves *both* names unsynced (the copy of the old name is
  dropped, the new one put whole: before, only the new name was repaired
  and the old name's copy stayed, to be promoted with a crash).  A
  migration's target copies the file to its own successor *before* the
  commit point (``moved_in``, under the source's freeze): not taken, the
  move is undone and fails, leaving no trace, so no moved file is ever held
  by one node alone (before, the copy went after the source had dropped
  its own).
* **Reads while the home is down.**  A requester whose stat, getattr, open,
  read or close of a regular file meets ``PeerUnavailable`` from the file's
  home asks ``successor(home)`` (``ReplicaStat``, ``ReplicaAttr``,
  ``ReplicaRead``).  Mutations fail with the ``PeerUnavailable`` until the
  view changes.
* **View changes** (``install_view``, after the roles below): copies whose
  primary is no longer a member are *promoted* (renamed into the namespace,
  parents made, the parent's manager told, the new parents summarised, and
  copied on to this node's own successor); if this node's successor changed,
  every file it homes is copied whole to the new one and the old one, if
  still a member, is told to drop this node's copies (``ReplicaRelease``).
  A copy is dropped only when its primary says so, never guessed.
* **A home that left, at once.**  The name of a file whose home left never
  looks missing: as a member installs the view, its DT entries naming the
  departed home are re-pointed to that home's successor in the old view (the
  node promoting the copy), before the view's own clean-up would drop them;
  the promoting node answers EAGAIN for a name whose promotion is in flight
  (the requester backs off), lists those names in its part of a dirmerge,
  and, asked for a name it holds a copy of under a view it has not
  installed yet, fetches the view from the asker first.  While such a view
  change is unsettled, a lookup's miss at the parent's manager asks the
  departed homes' successors (a merge's ReadDir carries no epoch).
* **Initial sync.**  Files a local tree held before the federation started
  (autonomy) are copied to the successor at start (``initial_sync``: in the
  background, file after file, each whole in chunks; started by ``start``
  or, in a simulator that preloads, by ``background``); an agent is
  ``ready`` once it ran.  A full copy of a node's files (that sync, or a
  view change that gave it a new successor, e.g. its join) ends with
  ``SYNC_MARK`` in its local tree: "every file here has had a secondary".
* **Restart** (``reconcile``, before a restarted node joins again).  With
  two copies, when a node is evicted every file it was the primary of is
  promoted at its successor: from then on the federation holds the truth
  of each of them (written, renamed or unlinked meanwhile), and the
  restarted node's own copies never are.  So, if its tree holds
  ``SYNC_MARK``, reconcile drops *every* regular file of its namespace
  tree, and its whole replica space (the mark with it; the primaries copy
  to their successors again on the join's view change); then it keeps the
  local directories the federation still lists and removes, deepest first,
  those it no longer has that are empty now (an rmdir made while it was
  down); a directory its manager cannot answer for is kept.  A tree
  without the mark (the node crashed before its first full copy had run)
  keeps the files no other member holds (they had no secondary, so nobody
  could have promoted or removed them) and drops only those another member
  holds now.  The window: a node that crashes while its initial sync runs
  brings back, at restart, those of its already-copied files that were
  unlinked while it was down (the old behaviour, for that window only).
  A file whose copy lagged when its home crashed (``unsynced``: its
  secondary had been down just before) lives on as the promoted, older
  copy; the newer local one is dropped at restart (two failures in a row,
  outside the one-node-down promise).

Which copies a secondary holds for which primary (``held``) is soft state of
this incarnation; a restarted node drops its replica space anyway.

Known limits: the home does not wait (``Sleep``) for its secondary or a
view change before it fails a change: the protocol does not know its
caller's patience (the runtime's rpc timeout), and in the simulator a
silent secondary has used three quarters of it already (``nested_timeout``);
the client retries.  The ambiguous outcome is completed by the repair; if
the home crashes before it (its secondary had been down just before: two
failures in a row, outside the one-node-down promise) the promoted copy is
the state before that home's step: a plain change, or a rename whose
participants are that home alone, is then simply not done; a rename over a
file homed elsewhere keeps the target's removal (done at its own home) but
brings the old name back; and a copy that a rename's ``RenameDrop`` or a
migration's ``MigrateDone`` did not remove is promoted beside the file that
replaced it (a name collision, resolved as any: the lowest node wins).  A
change acknowledged while a whole copy of its file is in flight is
acknowledged before that copy ends.  Two writes of one file in flight at once at its home may reach
the secondary in another order than they were applied (the workloads and
tests write a file from one client at a time); a write acknowledged while a
whole copy of that file is in flight reaches the secondary with the copy's
next round, just after the acknowledgement; a promotion onto a name the
promoting node holds a local file of is left undone (counted in
``promote_conflicts``); a create whose check (``ENTRY_HOLD``) runs while a
promotion of that name is in flight is not held back by it (a collision the
promotion then leaves undone).
"""

from __future__ import annotations

import errno
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from types import GeneratorType
from typing import Any, ClassVar

from fedsim.protocol.attrs import (
    KEEP,
    PERM_BITS,
    UTIME_OMIT,
    Attr,
    check_setattr,
    check_size,
    federated,
    is_regular,
)
from fedsim.protocol.effects import Call, Local, Multicast, Sleep, Spawn
from fedsim.protocol.fedfs.attributes import GetAttr, SetAttr
from fedsim.protocol.fedfs.blockcache import BlockRead
from fedsim.protocol.fedfs.membership import Membership
from fedsim.protocol.fedfs.migration import MigrateDone
from fedsim.protocol.fedfs.rename import RenameDrop, RenameFinish
from fedsim.protocol.messages import (
    AddEntry,
    Close,
    Create,
    GetEntry,
    HomeInfo,
    Open,
    PeerUnavailable,
    Read,
    Request,
    Stat,
    Truncate,
    Unlink,
    Write,
    fs_error,
    register_request,
)
from fedsim.protocol.names import REPLICA_ROOT, ROOT, is_replica, is_reserved, join, parent, split, under
from fedsim.protocol.node import Gen, handles
from fedsim.protocol.tables import DTEntry
from fedsim.protocol.view import GetView, View, check_contacts, check_members

#: the most data one ReplicaPut carries (whole copies go in chunks of
#: ``migration_chunk``, at most this)
MAX_REPLICA_CHUNK = 1 << 20
#: a whole copy that a write overtook is made again, at most this often in a row
COPY_ROUNDS = 3
#: the background repair of unsynced copies: back-off from the first to the
#: longest wait, and how many rounds before it leaves the rest to the next
#: change of the file or of the view (a simulation must come to rest)
RESYNC_FIRST_S = 0.05
RESYNC_MAX_S = 5.0
RESYNC_ROUNDS = 16
#: In a node's local tree: "every file here has had a secondary" (written when
#: a full copy of the node's files to its successor has run: the initial sync
#: or a view change that gave it a new successor).  The one name of the
#: replica space no copy can take (clients may not name the replica space).
SYNC_MARK = REPLICA_ROOT + REPLICA_ROOT
#: requests a home serves for a regular file: while that file's promotion is
#: in flight here they are answered EAGAIN (the requester backs off), not ENOENT
_AT_HOME: frozenset[type[Request]] = frozenset(
    {Stat, Open, GetAttr, Read, BlockRead, Close, Write, Truncate, Unlink, SetAttr, Create}
)


# --- at the secondary: changes of its copies -----------------------------------------------
@register_request
@dataclass(slots=True, frozen=True)
class ReplicaPut(Request):
    """One chunk of a whole copy of ``path`` into the receiver's replica
    space: at ``offset`` 0 the copy starts afresh (made, with its parents,
    or cut to nothing); the chunk that reaches ``size`` ends it (cut to
    ``size``, permission bits ``mode`` unless KEEP)."""

    reply: ClassVar[Any] = None
    path: str
    offset: int
    data: bytes
    size: int
    mode: int


@register_request
@dataclass(slots=True, frozen=True)
class ReplicaWrite(Write):
    """A write the primary applied, applied to the copy (ENOENT: no copy)."""

    reply: ClassVar[Any] = int


@register_request
@dataclass(slots=True, frozen=True)
class ReplicaTruncate(Truncate):
    """A truncate the primary applied, applied to the copy."""

    reply: ClassVar[Any] = None


@register_request
@dataclass(slots=True, frozen=True)
class ReplicaSetattr(SetAttr):
    """A chmod/chown/utimens the primary applied, applied to the copy."""

    reply: ClassVar[Any] = None


@register_request
@dataclass(slots=True, frozen=True)
class ReplicaRename(Request):
    """The primary renamed ``old`` to ``new`` (replacing; across directories too): so does the copy."""

    reply: ClassVar[Any] = None
    old: str
    new: str


@register_request
@dataclass(slots=True, frozen=True)
class RenameCopy(Request):
    """A rename committed over ``old`` -> ``new``, homed at ``home``, whose
    ``RenameFinish`` that home did not answer (crashed, cut off): sent to
    its successor, which renames the copy it holds for it, so that the
    promotion after the home's eviction makes the file under the new name,
    not the old one (``Replication.on_rename_copy``)."""

    reply: ClassVar[Any] = None
    old: str
    new: str
    home: int


@register_request
@dataclass(slots=True, frozen=True)
class ReplicaDrop(Request):
    """The primary's file is gone: drop the copy (idempotent)."""

    reply: ClassVar[Any] = None
    path: str


@register_request
@dataclass(slots=True, frozen=True)
class ReplicaRelease(Request):
    """The receiver is no longer the sender's secondary: drop every copy it holds for the sender."""

    reply: ClassVar[Any] = None


# --- at the secondary: reads while the primary is down --------------------------------------
@register_request
@dataclass(slots=True, frozen=True)
class ReplicaRead(Read):
    """A read of the copy (the primary did not answer)."""

    reply: ClassVar[Any] = bytes


@register_request
@dataclass(slots=True, frozen=True)
class ReplicaStat(Stat):
    """(is_dir, size) of the copy (the primary did not answer)."""

    reply: ClassVar[Any] = tuple[bool, int]


@register_request
@dataclass(slots=True, frozen=True)
class ReplicaAttr(GetAttr):
    """The copy's attributes (the primary did not answer)."""

    reply: ClassVar[Any] = GetAttr.reply


#: requests a requester may serve from the secondary when the home is down
_FAILOVER: frozenset[type[Request]] = frozenset({Stat, Open, GetAttr, Read, BlockRead, Close})

#: request at the home -> the wrapper (a method name) that forwards its change
_PRIMARY: dict[type[Request], str] = {
    Create: "_rep_create",
    Write: "_rep_write",
    Truncate: "_rep_truncate",
    Unlink: "_rep_unlink",
    SetAttr: "_rep_setattr",
    RenameFinish: "_rep_rename_finish",
    RenameDrop: "_rep_rename_drop",
    MigrateDone: "_rep_migrate_done",
}


#: copies renamed ahead of their primary's ``ReplicaRename`` remembered at a time (``RenameCopy``: a peer fills it)
RENAMED_AHEAD_MAX = 1024


def _rp(path: str) -> str:
    """Where the copy of federated ``path`` lives in a secondary's local tree."""
    return REPLICA_ROOT + path


def _run(result: Any) -> Gen:
    """A handler's value, whether it needed effects (a generator) or not."""
    if type(result) is GeneratorType:
        return (yield from result)
    return result


class Replication(Membership):
    def __init__(self, node_id: int, spec: Any, **kw: Any) -> None:
        super().__init__(node_id, spec, **kw)
        self.replicating = self.config.replicas == 2
        self.held: dict[str, int] = {}  # at a secondary: path of a copy -> its primary
        self.unsynced: set[str] = set()  # at a primary: files whose secondary may lag
        self.copying: dict[str, bool] = {}  # whole copies in flight: path -> a change overtook it
        # files a view change's install will copy whole to the successor, not begun yet: a
        # directory rename's prepare refuses meanwhile (``dir_busy``), else the copy, made
        # under the old name after the rename, dropped the file's copy (``_copy_queue``)
        self.to_copy: set[str] = set()
        self._repairing = False
        self.promoting: set[str] = set()  # copies whose promotion (their primary left) is in flight here
        self.renaming_in: set[str] = set()  # new names of the replica renames in flight here
        # (old, new) -> the primary whose copy ``on_rename_copy`` renamed here before that primary's own
        # ``ReplicaRename`` (which then has nothing left to do)
        self.renamed_ahead: dict[tuple[str, str], int] = {}
        #: names whose target a promoted file was renamed over here (``on_rename_copy``) -> its departed home
        self.replaced_here: dict[str, int] = {}
        self.adopted: dict[str, int] = {}  # files promoted here (since the last view change) -> their departed primary
        self.synced = False  # a full copy of this node's files to its successor has run (``initial_sync``)
        self._syncing = False
        self.promoted = 0
        self.promote_conflicts = 0
        self.promote_failures = 0
        self.unsynced_failures = 0  # changes not acknowledged: the secondary did not take them
        self.replica_bytes = 0  # bytes this node sent in whole copies
        if self.replicating:  # with one copy, not even a frame: the handlers below stay as they are
            for req, name in _PRIMARY.items():
                inner = self._handlers[req]
                wrapper = getattr(self, name)
                self._handlers[req] = lambda src, r, inner=inner, wrapper=wrapper: wrapper(inner, src, r)
            inner_get = self._handlers[GetEntry]
            self._handlers[GetEntry] = lambda src, r: self._rep_get_entry(inner_get, src, r)

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        d["replicas"] = self.config.replicas
        if self.replicating:
            d["unsynced"] = len(self.unsynced)
            d["replica_files"] = len(self.held)
            d["promoted"] = self.promoted
        return d

    @property
    def ready(self) -> bool:
        """With two copies, also: the initial sync has run (an agent says it
        is ready once every file it started with has its secondary)."""
        return super().ready and (not self.replicating or self.synced or self.successor(self.id) is None)

    def start(self) -> Gen:
        result = yield from super().start()
        if self.replicating and self.member and not self.synced and not self._syncing:
            self._syncing = True
            yield Spawn(self.initial_sync())
        return result

    def background(self) -> list[Gen]:
        return [*super().background(), *([self.initial_sync()] if self.replicating else [])]

    def initial_sync(self) -> Gen:
        """Copy every file this node's tree held when the federation started
        (autonomy: files made outside it) to its successor, one after the
        other, each whole in chunks (``replicate``), in the background; then
        write ``SYNC_MARK``.  Skipped when a view change made the full copy
        already (a joiner's, a restarted node's)."""
        self._syncing = True
        try:
            if self.synced or not self.member or self.successor(self.id) is None:
                return
            files = yield from self.local_files()
            for path in files:
                yield from self.replicate(path)
            # A successor not listening yet (agents start one by one): the
            # files it missed are copied again, backing off, before this
            # node says it is ready.
            delay = RESYNC_FIRST_S
            for _ in range(RESYNC_ROUNDS):
                pending = [p for p in files if p in self.unsynced]
                if not pending or self.synced or not self.member:
                    break
                yield Sleep(delay)
                delay = min(2 * delay, RESYNC_MAX_S)
                for path in pending:
                    if path in self.unsynced:
                        yield from self.replicate(path)
            yield from self._mark_synced(files)
        finally:
            self._syncing = False

    def _mark_synced(self, files: list[str]) -> Gen:
        """The full copy of ``files`` has run: ``synced`` (ready), and
        ``SYNC_MARK`` written if each of them reached the successor (one that
        did not keeps the tree unmarked until the next full copy: a restart
        then keeps what no member holds)."""
        if self.member and not any(p in self.unsynced for p in files):
            try:
                yield Local("create", SYNC_MARK)
            except FileExistsError:
                pass
        self.synced = True

    def handle(self, src: int, request: Request) -> Gen:
        """Not a generator of its own: a request for a file whose promotion
        is in flight here is answered EAGAIN (the name must never look
        missing: its manager points at this node already)."""
        if self.replicating and type(request) in _AT_HOME:
            path = request.path  # type: ignore[attr-defined]
            if not self.member:
                return self._not_member(path)
            if path in self.promoting:
                return self._promotion_busy(path)
            if path in self.held:
                return self._at_home_holding_copy(src, request)
        return super().handle(src, request)

    def _not_member(self, path: str) -> Gen:
        """A restarted node serves no file until it has joined: a requester
        under an older view may still name it a home, and what it made here
        before ``reconcile`` would be dropped after its acknowledgement.
        To the requester it is down (a PeerUnavailable naming it: reads fail
        over to the secondary, as while it was crashed)."""
        raise PeerUnavailable(self.id, f"not a member (it is rejoining); try again ({path})")
        yield

    @staticmethod
    def _promotion_busy(path: str) -> Gen:
        raise fs_error(errno.EAGAIN, path, "this file is being promoted here (its home left); try again")
        yield

    def listed_attr(self, path: str) -> Gen:
        """A ``readdir_attrs`` batch's name, refused as ``handle`` refuses a home
        request: not a member yet (down, to the requester), a promotion in
        flight (EAGAIN), or missing where a copy is held (EAGAIN: the one-name
        ``getattr`` then finds it as ``_at_home_holding_copy`` does)."""
        if self.replicating:
            if not self.member:
                return (yield from self._not_member(path))
            if path in self.promoting:
                return (yield from self._promotion_busy(path))
            if path in self.held:
                try:
                    return (yield from super().listed_attr(path))
                except FileNotFoundError:
                    raise fs_error(errno.EAGAIN, path, "a copy is held here; ask for it by name") from None
        return (yield from super().listed_attr(path))

    def _at_home_holding_copy(self, src: int, request: Any) -> Gen:
        """A home request for a name this node holds a copy of: a requester
        under a newer view (its primary left) was pointed here before this
        node learnt of it.  On ENOENT the view is fetched from the sender;
        a newer one (its promotions made) and the request is served again."""
        try:
            return (yield from super().handle(src, request))
        except FileNotFoundError:
            epoch = self.epoch
            if src != self.id:
                try:
                    yield from self.fetch_view(src)
                except OSError:
                    pass
            if self.epoch == epoch and request.path not in self.promoting:
                raise
        if request.path in self.promoting:
            yield from self._promotion_busy(request.path)
        return (yield from super().handle(src, request))

    def local_entries(self, directory: str) -> Gen:
        if not self.promoting:
            return super().local_entries(directory)
        return self._entries_promoting(directory)

    def _entries_promoting(self, directory: str) -> Gen:
        """A dirmerge while promotions are in flight here: the copies being
        promoted are this node's entries already (the merge without the
        departed home must not miss them)."""
        names = {split(p)[1] for p in self.promoting if parent(p) == directory}
        try:
            entries = yield from super().local_entries(directory)
        except FileNotFoundError:
            if not names:
                raise
            entries = []
        have = {n for n, _ in entries}
        return sorted([*entries, *((n, False) for n in names if n not in have)])

    def successor(self, node: int, view: View | None = None) -> int | None:
        """The member after ``node`` in ``view``'s sorted members, wrapping (None alone)."""
        members = (view or self.view).members
        if len(members) < 2:
            return None
        after = members[bisect_right(members, node) % len(members)]
        return None if after == node else after

    # ------------------------------------------------------------------ the primary's changes
    def _rep_create(self, inner: Any, src: int, req: Create) -> Gen:
        return (yield from self._mutated(req.path, inner(src, req), lambda: ReplicaPut(req.path, 0, b"", 0, req.mode)))

    def _rep_write(self, inner: Any, src: int, req: Write) -> Gen:
        forward = lambda: ReplicaWrite(req.path, req.offset, req.data)  # noqa: E731
        return (yield from self._mutated(req.path, inner(src, req), forward))

    def _rep_truncate(self, inner: Any, src: int, req: Truncate) -> Gen:
        return (yield from self._mutated(req.path, inner(src, req), lambda: ReplicaTruncate(req.path, req.size)))

    def _rep_unlink(self, inner: Any, src: int, req: Unlink) -> Gen:
        return (yield from self._mutated(req.path, inner(src, req), lambda: ReplicaDrop(req.path)))

    def _rep_setattr(self, inner: Any, src: int, req: SetAttr) -> Gen:
        yield from _run(inner(src, req))
        try:
            is_dir, _ = yield Local("stat", req.path)
        except OSError:
            return None
        if not is_dir:  # (a directory's holders are asked one by one; directories have no copies)
            args = (req.mode, req.uid, req.gid, req.atime_ns, req.mtime_ns)
            yield from self._forward(ReplicaSetattr(req.path, *args), req.path)
        return None

    def _rep_rename_finish(self, inner: Any, src: int, req: RenameFinish) -> Gen:
        """H_a's step of a rename's commit (``rename.py``): renamed here, then
        at the secondary, before the reply.  Not taken, both names are copied
        whole by the repair (the copy of ``old`` dropped, ``new`` put), and the
        step answers ``PeerUnavailable`` naming the secondary: the coordinator
        finishes the rename and tells the client so (``rename._lagging``).  A
        second finish (the coordinator's retry after a lost reply) is a no-op
        here (``on_rename_finish``) and forwards nothing."""
        fresh = req.commit and (req.old in self.rename_gated or self.rename_released.get(req.old) == src)
        yield from _run(inner(src, req))
        if fresh:
            # The moved file replaced whatever held the new name here: a target this node promoted
            # from a departed home is gone, so the drop its heir is told (``_drop_for_departed``) must
            # not unlink the name again (found by ``tests.dynamics_random sim``: a leaver's target
            # promoted here, the moved file's home, then unlinked under the moved file).
            self.adopted.pop(req.new, None)
            yield from self._forward(ReplicaRename(req.old, req.new), req.new, req.old)

    def _rep_rename_drop(self, inner: Any, src: int, req: RenameDrop) -> Gen:
        """H_b's step: the replaced target goes here and at the secondary.  A
        copy of the name from a departed primary waiting in the replica space
        (its rename onto this node's file, acknowledged as it left:
        ``_promote_late``) takes the name then."""
        if req.heir_of >= 0:
            return (yield from self._drop_for_departed(src, req))
        if req.commit and self.replaced_here.pop(req.path, None) is not None:
            self._ungate(req.path)  # (the moved file replaced the target here already: ``on_rename_copy``)
            return
        yield from _run(inner(src, req))
        if req.commit:
            yield from self._gone(req.path)
            if self.member and self.held.get(req.path, self.id) not in self.members:
                yield from self._promote_late(req.path)

    def _heir(self, node: int) -> int | None:
        view = self.view if node in self.members else self._prev_view
        if not self.replicating or view is None or node not in view.members:
            return None
        return self.successor(node, view)

    def _finish_for(self, node: int, finish: RenameFinish) -> tuple[int, Request] | None:
        heir = self._heir(node)
        return None if heir is None else (heir, RenameCopy(finish.old, finish.new, node))

    def _drop_for_departed(self, src: int, req: RenameDrop) -> Gen:
        """A rename committed over ``req.path``, homed at ``req.heir_of``,
        whose drop that home did not answer (crashed, cut off): this node,
        its successor, drops the copy it holds for it, or unlinks the file
        it promoted from it (``_unlink_adopted``).  Without this, the
        eviction promoted the replaced target: an acknowledged rename's
        destination named the old file again, beside the moved one (found by
        ``tests/test_rename_histories.py``: a crash of the target's home).
        Told at once, not after the eviction, so that the copy is gone
        before the promotion would make it the file.  The home itself is
        still told (it may be alive); what it drops then is gone here already."""
        path, gone = req.path, req.heir_of
        if not self.replicating or not req.commit or gone == self.id or src not in self.members:
            raise fs_error(errno.EINVAL, path, "not a drop this node can take for another home")
        if path in self.promoting:
            yield from self._promotion_busy(path)
        if self.held.get(path) == gone:
            yield from self._drop_copy_of(_rp(path))
            if self.held.get(path) == gone:
                del self.held[path]
        if self.adopted.get(path) == gone and gone not in self.members and self.member:
            yield from self._unlink_adopted(path)

    def _rep_migrate_done(self, inner: Any, src: int, req: MigrateDone) -> Gen:
        yield from _run(inner(src, req))
        if req.commit:
            yield from self._gone(req.path)

    def moved_in(self, path: str) -> Gen:
        """A move's target, before its commit point: the file it holds now
        (hidden, complete, its source frozen) goes whole to this node's
        successor; not taken, the move fails (``PeerUnavailable`` naming the
        successor) and is undone, so a moved file is never held by one node
        alone.  After an undo (``path`` gone here), the copy is dropped there."""
        if not self.replicating:
            return
        to = self.successor(self.id)
        yield from self.replicate(path)
        if to is not None:
            yield from self._ack_or_fail(to, path)

    def _rep_get_entry(self, inner: Any, src: int, req: GetEntry) -> Gen:
        """A lookup's miss at the parent's manager while a view change that
        dropped members is not settled (``_prev_view``): the departed home's
        successor may not have installed the view yet (a merge's ReadDir
        carries no epoch), so the merge missed the name it is to promote.
        That node is asked (``Stat``: it fetches the view from this node if
        it must, answers EAGAIN while promoting); if it holds the file, the
        entry names it.  Plain lookups only: a create's check
        (``ENTRY_HOLD``) and a settle keep their own rules.  The miss path
        only, and only until the view settles."""
        if req.flags or self._prev_view is None:
            return (yield from _run(inner(src, req)))
        path = join(req.directory, req.name)
        try:
            entry = yield from _run(inner(src, req))
        except FileNotFoundError:
            home = yield from self._promoting_home(path)
            if home is None:
                raise
            return False, home, 4
        if entry is None:
            home = yield from self._promoting_home(path)
            if home is not None:
                return False, home, 4
        return entry

    def _promoting_home(self, path: str) -> Gen:
        """The successor (in the unsettled previous view) of a departed
        member that holds ``path`` as a regular file, if any."""
        prev = self._prev_view
        if prev is None:
            return None
        for g in sorted(set(prev.members) - set(self.members)):
            s = self.successor(g, prev)
            if s is None or s not in self.members:
                continue
            try:
                is_dir, _ = yield from self.call(s, Stat(path))
            except (FileNotFoundError, NotADirectoryError, PeerUnavailable):
                continue
            if not is_dir:
                return s
        return None

    def _gone(self, path: str) -> Gen:
        """A step of a rename's or a migration's commit that may have removed
        ``path`` here (``RenameDrop`` at the replaced target's home,
        ``MigrateDone`` at the source): if it did, so goes the copy, before
        the reply (``_forward``)."""
        try:
            yield Local("stat", path)
        except FileNotFoundError:
            yield from self._forward(ReplicaDrop(path), path)

    def _mutated(self, path: str, gen: Gen, make: Any) -> Gen:
        """Run a change of ``path`` here, then forward it (``make()``) to the
        secondary.  A change that failed on the way after its local step (a
        manager did not answer) leaves the copy to follow the local file whole."""
        try:
            result = yield from _run(gen)
        except PeerUnavailable:
            yield from self.replicate(path)
            raise
        yield from self._forward(make(), path)
        return result

    def _forward(self, req: Request, *paths: str) -> Gen:
        """One change of ``paths`` (a rename: the new name, then the old) to
        the secondary, before the reply.  A file whose copy lags (unsynced)
        or is being copied whole goes whole instead (each of ``paths``: the
        copy of a name gone here is dropped); a change not answered leaves
        every one of ``paths`` unsynced, one refused (no copy there) sends
        them whole.  Then ``_ack_or_fail``: acknowledged only once both
        copies hold it."""
        to = self.successor(self.id)
        if to is None:
            return
        late = self._leaving  # (it may install the view without it while this runs)
        if any(p in self.unsynced or p in self.copying for p in paths):
            for p in paths:
                yield from self.replicate(p, late)  # (one in flight goes round once more: see "Known limits")
        else:
            try:
                yield Call(to, req)
                return
            except PeerUnavailable:
                for p in paths:
                    yield from self._mark_unsynced(p)
            except OSError:
                for p in paths:
                    yield from self.replicate(p, late)
        yield from self._ack_or_fail(to, *paths)

    def _ack_or_fail(self, to: int, *paths: str) -> Gen:
        """The change of ``paths`` may not have reached secondary ``to``
        (those still unsynced): it is acknowledged only once both copies
        hold it (issue 13).  If a view installed meanwhile gave this node
        another successor, the files go to it whole and the change is
        acknowledged; otherwise the change fails with ``PeerUnavailable``
        naming the secondary.  The local step stays applied (an ambiguous
        outcome, as after a timeout: the copy follows it by the background
        repair once the secondary answers, or a restart after an eviction
        drops it for the promoted copy)."""
        lagging = [p for p in paths if p in self.unsynced]
        if not lagging:
            return
        now = self.successor(self.id)
        if now is None:
            self.unsynced.difference_update(lagging)
            return  # alone: the one copy there can be
        if now != to and self.member:
            for p in lagging:
                yield from self.replicate(p)
            if not any(p in self.unsynced for p in lagging):
                return
            to = now
        self.unsynced_failures += 1
        raise PeerUnavailable(to, f"the secondary did not take the change of {lagging[0]}: not acknowledged")

    def replicate(self, path: str, late: bool = False) -> Gen:
        """Copy local file ``path`` whole to this node's successor (or drop
        the copy there, if the file is gone).  A node that is no member
        copies nothing, but for ``late``: the step of a commit a leaver does
        after its install of the view without it (a ``RenameFinish`` past
        its commit point), which its successor refused (it promoted the
        copy meanwhile).  The successor takes it as any late change from a
        departed primary (``_promote_late``, ``_unlink_adopted``); found by
        the dynamics property: a rename the leaver acknowledged so was lost,
        the copy promoted under the old name."""
        to = self.successor(self.id)
        self.unsynced.discard(path)
        if to is None or not (self.member or late):
            return
        if path in self.copying:
            self.copying[path] = True
            return
        self.copying[path] = False
        try:
            for _ in range(COPY_ROUNDS):
                yield from self._copy_whole(path, to)
                if not self.copying[path]:
                    break
                self.copying[path] = False
            else:
                # overtaken every round: copied again by the background
                # repair (the writes may stop now, and nothing else would)
                yield from self._mark_unsynced(path)
        except (PeerUnavailable, BlockingIOError):  # (EAGAIN: its promotion of an older copy of the name in flight)
            yield from self._mark_unsynced(path)
        except OSError:
            pass  # the secondary refused the copy (a directory of that name there): nothing to be done here
        finally:
            self.copying.pop(path, None)

    def _copy_whole(self, path: str, to: int) -> Gen:
        try:
            a = Attr(*(yield Local("getattr", path)))
        except FileNotFoundError:
            yield Call(to, ReplicaDrop(path))
            return
        if a.is_dir or not is_regular(a.mode):  # symlinks and special files keep no copy (``links.py``)
            return
        size, mode = a.size, a.mode & PERM_BITS
        chunk = min(self.config.migration_chunk, MAX_REPLICA_CHUNK)
        off = 0
        while True:
            n = min(chunk, size - off)
            data = (yield Local("read", path, (off, n))) if n > 0 else b""
            if len(data) < n:
                size = off + len(data)  # shorter now (the change that cut it marks the copy for another round)
            yield Call(to, ReplicaPut(path, off, data, size, mode))
            self.replica_bytes += len(data)
            off += len(data)
            if off >= size:
                return

    def _mark_unsynced(self, path: str) -> Gen:
        self.unsynced.add(path)
        if not self._repairing:
            self._repairing = True
            yield Spawn(self._resync_loop())

    def _resync_loop(self) -> Gen:
        """Copy the unsynced files whole once the secondary answers again,
        backing off; after ``RESYNC_ROUNDS`` the rest waits for the next
        change of a file or of the view."""
        delay = RESYNC_FIRST_S
        try:
            for _ in range(RESYNC_ROUNDS):
                yield Sleep(delay)
                delay = min(2 * delay, RESYNC_MAX_S)
                for path in sorted(self.unsynced):
                    if path in self.unsynced:
                        yield from self.replicate(path)
                    if path in self.unsynced:
                        break  # still not answering
                if not self.unsynced:
                    return
        finally:
            self._repairing = False

    # ------------------------------------------------------------------ the secondary
    def _check_replicating(self, path: str) -> None:
        if not self.replicating:
            raise fs_error(errno.ENOTSUP, path, "this federation keeps one copy of each file (replicas: 1)")

    def _replica_path(self, path: str) -> str:
        self._check_replicating(path)
        if path == ROOT:
            raise fs_error(errno.EINVAL, path, "the root is not a file")
        return _rp(path)

    @handles(ReplicaPut)
    def on_replica_put(self, src: int, req: ReplicaPut) -> Gen:
        rp = self._replica_path(req.path)
        check_size(req.path, req.size)  # (a file size from the wire: bounded like a client's truncate)
        end = req.offset + len(req.data)
        if not (0 <= req.offset and end <= req.size and len(req.data) <= MAX_REPLICA_CHUNK):
            raise fs_error(errno.EINVAL, req.path, "a replica chunk outside the file")
        if req.mode != KEEP and not 0 <= req.mode <= PERM_BITS:
            raise fs_error(errno.EINVAL, req.path, "not permission bits")
        if req.path in self.renaming_in:
            # A replica rename onto this name is in flight (another primary's
            # rename over this sender's file; this node the successor of
            # both): written now, the put truncated and wrote the renamed
            # copy, promoted so with the old target's content (found by the
            # dynamics property: a rename onto a file during a leave lost).
            raise fs_error(errno.EAGAIN, req.path, "a copy is being renamed onto this name here; try again")
        other = self.held.get(req.path, src)
        if src in self.members and (req.path in self.promoting or (other != src and other not in self.members)):
            # A copy of this name from a departed primary is (to be) promoted
            # here (a rename over it by another home raced the leave): the
            # replica space holds one copy per name; the sender tries again
            # once the promotion ran (``replicate``: EAGAIN is repaired).
            raise fs_error(errno.EAGAIN, req.path, "a copy of this name is being promoted here; try again")
        try:
            yield from self._put(rp, src, req)
        except FileNotFoundError:
            if src in self.members or req.offset != 0:
                raise
            # A departed primary's late copy (``_promote_late``) whose older
            # copy this node's promotion moved into the namespace mid-way:
            # written again (found by the dynamics property: a rename's late
            # copy was refused so, and the rename lost).
            yield from self._put(rp, src, req)
        if end >= req.size and self.member and src not in self.members and req.path not in self.promoting:
            yield from self._promote_late(req.path)

    def _put(self, rp: str, src: int, req: ReplicaPut) -> Gen:
        if req.offset == 0:
            try:
                yield Local("create", rp)
            except FileExistsError:
                yield Local("truncate", rp, (0,))
            self.held[req.path] = src
        if req.data:
            yield Local("write", rp, (req.offset, req.data))
        if req.offset + len(req.data) >= req.size:
            yield Local("truncate", rp, (req.size,))
            if req.mode != KEEP:
                yield Local("setattr", rp, (req.mode, KEEP, KEEP, UTIME_OMIT, UTIME_OMIT))

    def _promote_late(self, path: str) -> Gen:
        """A whole copy (or a renamed one) from a primary that is no member
        of this node's view any more: the view change's promotions ran already, so it would stay
        in the replica space, unseen.  A leaver (or a node evicted while it
        still served) acknowledges a change of a file it held until its own
        install of the view without it; its copy arriving here after this
        node promoted the rest is promoted now, over the older copy promoted
        before (found by the dynamics property: a create, and an overwrite,
        acknowledged by a leaving node were lost).  A local file of that name
        not promoted from that primary is this node's own: the departed
        primary's rename onto it (its target, here) is not over yet, and
        the copy waits for the rename's ``RenameDrop`` (``_rep_rename_drop``;
        replacing the file now, the drop then removed the renamed file)."""
        try:
            try:
                is_dir, _ = yield Local("stat", path)
            except FileNotFoundError:
                is_dir = None
            if is_dir is False and self.adopted.get(path) != self.held.get(path):
                self.promote_conflicts += 1  # (promoted at the drop, or the next view change)
            elif is_dir is False:
                # Promoted here already, from the same primary's older copy
                # (names are unique: the departed primary was its home): the
                # newer whole copy it sent since replaces it.
                rp = _rp(path)
                yield Local("rename", rp, (path,))
                primary = self.held.pop(path, None)
                if primary is not None:
                    self.adopted[path] = primary
                yield from self._prune_replicas(parent(rp))
                yield from self.replicate(path)
            elif is_dir is None and (yield from self._promote(path)):
                yield from self.replicate(path)
        except OSError:
            self.promote_failures += 1  # the copy stays, promoted at the next view change

    @handles(ReplicaWrite)
    def on_replica_write(self, src: int, req: ReplicaWrite) -> Gen:
        return (yield Local("write", self._replica_path(req.path), (req.offset, req.data)))

    @handles(ReplicaTruncate)
    def on_replica_truncate(self, src: int, req: ReplicaTruncate) -> Gen:
        yield Local("truncate", self._replica_path(req.path), (req.size,))

    @handles(ReplicaSetattr)
    def on_replica_setattr(self, src: int, req: ReplicaSetattr) -> Gen:
        args = (req.mode, req.uid, req.gid, req.atime_ns, req.mtime_ns)
        check_setattr(req.path, *args)
        yield Local("setattr", self._replica_path(req.path), args)

    # ------------------------------------------------------------------ a directory renamed (``rename.py``)
    def dir_busy(self, near: Callable[[str], bool]) -> list[str]:
        """A whole copy, a promotion or a copy's rename in flight under a
        directory rename's paths: the prepare refuses (EAGAIN)."""
        return super().dir_busy(near) + [
            p for p in (*self.copying, *self.promoting, *self.renaming_in, *self.to_copy) if near(p)
        ]

    def _dir_move_here(self, old: str, new: str) -> Gen:
        """This node's part of a committed directory rename, and of the copies
        it holds for its predecessor: the replica space's ``old`` renamed in
        place too (every member does its own part, so the copies follow
        their primaries without a message), and what this role notes by
        path (copies held, files promoted, files whose copy lags) renamed."""
        yield from super()._dir_move_here(old, new)
        if not self.replicating:
            return
        r_old, r_new = _rp(old), _rp(new)
        try:
            holds = (yield Local("stat", r_old))[0]
        except FileNotFoundError:
            holds = False
        if holds:
            try:
                yield Local("mkdir", parent(r_new))
                yield Local("rename_dir", r_old, (r_new,))
            except OSError:
                return  # (copies of another primary's files there: they stay; the next full copy mends them)
            yield from self._prune_replicas(parent(r_old))
        else:
            try:
                yield Local("rmdir", r_new)
            except OSError:
                pass
        cut = len(old)
        for table in (self.held, self.adopted):
            for p in [p for p in table if under(p, old)]:
                table[new + p[cut:]] = table.pop(p)
        for p in [p for p in self.unsynced if under(p, old)]:
            self.unsynced.discard(p)
            self.unsynced.add(new + p[cut:])

    @handles(ReplicaRename)
    def on_replica_rename(self, src: int, req: ReplicaRename) -> Gen:
        self._replica_path(req.old), self._replica_path(req.new)  # (checked: a peer's paths)
        if self.renamed_ahead.pop((req.old, req.new), None) == src and self.held.get(req.new) == src:
            return  # renamed here already for this primary, its finish unanswered (``on_rename_copy``)
        yield from self._copy_renamed(src, req.old, req.new)

    @handles(RenameCopy)
    def on_rename_copy(self, src: int, req: RenameCopy) -> Gen:
        """The coordinator of a committed rename whose home ``req.home`` did not answer its finish: the copy
        held here for that home is renamed now, before the home's eviction would promote it under the old
        name (a committed rename undone: found by ``tests.rename_histories_random``, H_a crashed between its
        prepare and its finish).  Nothing to do if the home renamed it already (``ReplicaRename``) or holds
        no copy here.  A copy promoted here already (the home evicted: from its coordinator's heir,
        ``Renaming._terminate``) is this node's file: it is renamed as its home would have, its own copy
        told (``_forward``)."""
        if not self.replicating or req.home == self.id or src not in self.members:
            raise fs_error(errno.EINVAL, req.old, "not a copy this node can rename for another home")
        self._replica_path(req.old), self._replica_path(req.new)  # (checked: a peer's paths)
        if req.old in self.promoting or req.new in self.promoting:
            yield from self._promotion_busy(req.old)
        if self.held.get(req.old) == req.home and req.new not in self.renaming_in:
            yield from self._copy_renamed(req.home, req.old, req.new)
            if len(self.renamed_ahead) < RENAMED_AHEAD_MAX:
                self.renamed_ahead[(req.old, req.new)] = req.home
        elif self.adopted.get(req.old) == req.home and req.home not in self.members and self.member:
            try:
                yield Local("stat", req.new)
                replacing = True
            except FileNotFoundError:
                replacing = False
            if parent(req.old) == parent(req.new):
                yield Local("rename", req.old, (req.new,))
            else:
                yield from self._move_here(req.old, req.new)
            if replacing and len(self.replaced_here) < RENAMED_AHEAD_MAX:
                # This node's own file, the rename's target, is replaced now, as the home's local
                # rename would have: the drop the target's home is told next must not unlink the
                # moved file (found by ``tests.rename_histories_random``: the coordinator, also
                # the moved file's home, crashed; its heir, the target's home, renamed the
                # promoted file over the target, then dropped it: neither file was left).  Noted
                # only once the rename is done: a failed one leaves the target to its drop.
                self.replaced_here[req.new] = req.home
            self.adopted[req.new] = self.adopted.pop(req.old)
            self.dt.pop(req.old)
            self.dt.put(req.new, DTEntry(False, self.id))
            yield from self._forward(ReplicaRename(req.old, req.new), req.new, req.old)

    def _copy_renamed(self, src: int, old_path: str, new_path: str) -> Gen:
        """Rename the copy of ``old_path`` held for primary ``src`` to ``new_path`` (replacing)."""
        old, new = _rp(old_path), _rp(new_path)
        self.renaming_in.add(new_path)  # (a put of the new name is refused meanwhile: ``on_replica_put``)
        try:
            if parent(old) != parent(new):  # across directories (``rename: 2pc``): the copy's new parent is made
                yield Local("mkdir", parent(new))
            yield Local("rename", old, (new,))
        finally:
            self.renaming_in.discard(new_path)
        if parent(old) != parent(new):
            yield from self._prune_replicas(parent(old))
        self.held.pop(old_path, None)
        self.held[new_path] = src
        if self.member and src not in self.members and new_path not in self.promoting:
            yield from self._promote_late(new_path)

    @handles(ReplicaDrop)
    def on_replica_drop(self, src: int, req: ReplicaDrop) -> Gen:
        rp = self._replica_path(req.path)
        if self.held.get(req.path, src) == src:  # (a copy this node holds for another primary now stays)
            yield from self._drop_copy_of(rp)
            self.held.pop(req.path, None)
        if self.adopted.get(req.path) == src and src not in self.members and self.member:
            yield from self._unlink_adopted(req.path)

    def _unlink_adopted(self, path: str) -> Gen:
        """A departed primary removed ``path`` (an unlink, the source side of
        a rename or a migration it acknowledged until its own install of the
        view without it) after this node promoted its copy: the promoted file
        is this node's now, so it is unlinked here as its home does, through
        the home's own unlink (the parent's VD and the manager's DT learn it,
        this node's successor drops its copy).  Found by the dynamics
        property: an unlink acknowledged by a leaving home came back."""
        del self.adopted[path]
        try:
            yield from super().handle(self.id, Unlink(path))  # (past ``handle``'s promotion guard)
        except FileNotFoundError:
            pass  # unlinked here meanwhile

    @handles(ReplicaRelease)
    def on_replica_release(self, src: int, req: ReplicaRelease) -> Gen:
        self._check_replicating(ROOT)
        for path in sorted(p for p, primary in self.held.items() if primary == src):
            # (a ReplicaDrop of the name may run meanwhile: it found it
            # dropped, and the KeyError failed the primary's view change
            # for good; found by the dynamics property: a hang after a join)
            if self.held.get(path) != src:
                continue
            yield from self._drop_copy_of(_rp(path))
            if self.held.get(path) == src:
                del self.held[path]

    def _drop_copy_of(self, rp: str) -> Gen:
        try:
            yield Local("unlink", rp)
        except FileNotFoundError:
            pass
        yield from self._prune_replicas(parent(rp))

    def _prune_replicas(self, d: str) -> Gen:
        """Remove empty directories of the replica space from ``d`` up (its root included)."""
        while is_replica(d):
            try:
                if (yield Local("listdir", d)):
                    return
                yield Local("rmdir", d)
            except OSError:
                return
            d = parent(d)

    @handles(ReplicaRead)
    def on_replica_read(self, src: int, req: ReplicaRead) -> Gen:
        return (yield Local("read", self._replica_path(req.path), (req.offset, req.size)))

    @handles(ReplicaStat)
    def on_replica_stat(self, src: int, req: ReplicaStat) -> Gen:
        return (yield Local("stat", self._replica_path(req.path)))

    @handles(ReplicaAttr)
    def on_replica_attr(self, src: int, req: ReplicaAttr) -> Gen:
        return federated((yield Local("getattr", self._replica_path(req.path))), req.path, self.id)

    # ------------------------------------------------------------------ the requester: reads while the home is down
    def _at_home(self, path: str, make: Any, dir_errno: int | None) -> Gen:
        if not self.replicating:
            return super()._at_home(path, make, dir_errno)
        return self._at_home_or_copy(path, make, dir_errno)

    def _at_home_or_copy(self, path: str, make: Any, dir_errno: int | None) -> Gen:
        try:
            return (yield from super()._at_home(path, make, dir_errno))
        except PeerUnavailable as exc:
            req = make(path)
            if type(req) not in _FAILOVER:
                raise
            return (yield from self._failover(path, req, exc))

    def _at_fd(self, fd: int, make: Any) -> Gen:
        if not self.replicating:
            return super()._at_fd(fd, make)
        return self._at_fd_or_copy(fd, make)

    def _at_fd_or_copy(self, fd: int, make: Any) -> Gen:
        try:
            return (yield from super()._at_fd(fd, make))
        except PeerUnavailable as exc:
            path, home = self.fds.get(fd, (None, None))
            if path is None or home != exc.node:
                raise
            req = make(path)
            if type(req) not in _FAILOVER:
                raise
            return (yield from self._from_copy(exc, home, req))

    def _by_name(self, path: str, at_home: Any, at_manager: Any) -> Gen:
        if not self.replicating:
            return super()._by_name(path, at_home, at_manager)
        return self._by_name_or_copy(path, at_home, at_manager)

    def _by_name_or_copy(self, path: str, at_home: Any, at_manager: Any) -> Gen:
        try:
            return (yield from super()._by_name(path, at_home, at_manager))
        except PeerUnavailable as exc:
            req = at_home(path)
            if type(req) is not GetAttr:
                raise
            return (yield from self._failover(path, req, exc))[0]

    def _failover(self, path: str, req: Any, exc: PeerUnavailable) -> Gen:
        """(value, home) of ``req`` about ``path`` when ``exc.node`` did not
        answer for it.  A DT entry of this node that named the silent node
        may be stale (the file was renamed or removed and made elsewhere):
        with no copy at the secondary, the name is resolved again, once."""
        for attempt in (0, 1):
            cached = self.dt.peek(path) is not None
            home = yield from self._home_without(path, exc)
            try:
                return (yield from self._elsewhere(exc, home, req)), home
            except PeerUnavailable:
                if attempt or not cached:
                    raise
            self.stats.stale_retries += 1
            self.dt.pop(path)
        raise AssertionError("unreachable")

    def _home_without(self, path: str, exc: PeerUnavailable) -> Gen:
        """The home of ``path`` when node ``exc.node`` did not answer for it:
        the one this node's DT names, if that is the silent node; else, when
        the silent node is the name's manager, the parent's VD's answer
        (``GetEntry`` at the parent's manager), or the manager itself (with
        the usual placement it homes the names it manages; its secondary's
        answer settles it, a copy there is a copy of its predecessor's file).
        Otherwise ``exc`` is the client's."""
        e = self.dt.peek(path)
        if e is not None:
            if e.is_dir or e.home != exc.node:
                raise exc
            return (yield from self._still_named(path, exc))
        if path == ROOT:
            raise exc
        if exc.node != self.manager_of(path):  # the home did not answer, and its entry is gone here: ask again
            entry = yield from self._lookup_at_manager(path)
            if entry.is_dir:
                raise exc
            return entry.home
        d, name = split(path)
        pm = self.manager_of(d)
        if pm != exc.node:
            try:
                entry = yield from self._busy(lambda: self.call(pm, GetEntry(d, name)))
            except OSError:
                entry = None  # (its merge may have missed the silent node's part: ask the copy)
            if entry is not None:
                if entry[0]:
                    raise exc
                return entry[1]
            return exc.node
        # Both managers are the silent node: ask every other member whether it
        # holds the file (the summaries here cannot tell: a directory made for a
        # file reaches only its manager's copy of a summary, ``summary_add``);
        # the lowest that does is its home (as a merge resolves a collision).
        # The failure path only, while a member is down and not yet evicted.
        probe = tuple(n for n in self.members if n != exc.node)
        if self.id in probe:
            try:
                is_dir, _ = yield Local("stat", path)
                if not is_dir:
                    return self.id
            except OSError:
                pass
        others = tuple(n for n in probe if n != self.id)
        if others:
            for n, answer in zip(others, (yield Multicast(others, Stat(path))), strict=True):
                if not isinstance(answer, BaseException) and not answer[0]:
                    return n
        return exc.node

    def _still_named(self, path: str, exc: PeerUnavailable) -> Gen:
        """The silent home ``exc.node`` of ``path`` (this node's DT names it),
        once its parent's VD still lists the name, before a read of its copy:
        a copy is not gated by a rename, and a rename's commit point is that
        VD.  Read on the cached entry alone, a lost reply let a reader stat
        the old name at the secondary after a listing had shown the new one
        (found by ``tests/test_rename_histories.py``: both names, under a loss
        window).  A VD without the name (renamed or removed, or merged
        without the silent node's part) or no answer: ``exc`` (the DT entry
        stays; dropped, the next lookup at a manager cut off from the silent
        node said ENOENT: ``test_crash_agents``)."""
        d, name = split(path)
        pm = self.manager_of(d)
        if path == ROOT or pm == exc.node:
            return exc.node  # (the VD is the silent node's: the copy's answer stands, as before)
        try:
            entry = yield from self._busy(lambda: self.call(pm, GetEntry(d, name)))
        except OSError:
            raise exc from None
        if entry is None or entry[0]:
            raise exc  # (the entry stays: a VD merged without the silent node's part lacks its names too)
        return entry[1]  # (another home: a rename onto the name committed; the silent one held the replaced file)

    def _elsewhere(self, exc: PeerUnavailable, home: int, req: Any) -> Gen:
        """``req`` at ``home`` if it is not the silent node, else from the secondary's copy."""
        if home != exc.node:
            try:
                value = yield from self._busy(lambda: self.call(home, req))
                return None if type(req) is Open else value
            except PeerUnavailable as again:
                exc = again
        return (yield from self._from_copy(exc, home, req))

    def _from_copy(self, exc: PeerUnavailable, home: int, req: Any) -> Gen:
        """Serve ``req`` (meant for ``home``, which did not answer) from the secondary's copy."""
        to = self.successor(home)
        t = type(req)
        if t is Close:
            return None  # the descriptor is let go here; the home's pin went with it
        if to is None:
            raise exc
        if t is Read or t is BlockRead:
            ask: Request = ReplicaRead(req.path, req.offset, req.size)
            if t is BlockRead:
                self.cache_era += 1  # no invalidation will reach this node for these blocks: not kept
        elif t is GetAttr:
            ask = ReplicaAttr(req.path)
        else:
            ask = ReplicaStat(req.path)
        try:
            value = yield from self.call(to, ask)
        except PeerUnavailable:
            raise exc from None
        except FileNotFoundError:
            raise exc from None  # no copy (not its file, or one left unsynced): the silent node's error is the truth
        return None if t is Open else value

    # ------------------------------------------------------------------ view changes
    def install_view(self, view: View) -> Gen:
        if not self.replicating:
            return super().install_view(view)
        return self._install_replicated(view)

    def _install_replicated(self, view: View) -> Gen:
        old = self.view
        if view.epoch > old.epoch and self.id in view.members:
            self._repoint(old, view)
            self.promoting |= {p for p, primary in self.held.items() if primary not in view.members}
        yield from super().install_view(view)
        if view.epoch <= old.epoch or not self.member:
            return
        view = self.view
        promoted = []
        self.adopted = {}  # (late changes from the primaries of an older view are over)
        yield from self._rename_logged_copies(view)
        orphans = sorted(p for p, primary in self.held.items() if primary not in view.members)
        try:
            for path in orphans:
                try:
                    if (yield from self._promote(path)):
                        promoted.append(path)
                        self.to_copy.add(path)  # (held against a directory rename until copied: ``_copy_queue``)
                except OSError:
                    self.promote_failures += 1  # the copy stays, promoted at the next view change
                finally:
                    self.promoting.discard(path)
            self.promoting.clear()  # (copies dropped meanwhile: nothing left to promote)
            for path in sorted(
                p for p, primary in self.held.items()
                if primary not in view.members and (p in promoted or p not in orphans)
            ):  # fmt: skip
                yield from self._promote_late(path)  # sent whole by a departed primary while the promotions ran
            was = self.successor(self.id, old) if self.id in old.members else None
            now = self.successor(self.id, view)
            if now is not None and now != was:
                files = yield from self.local_files()
                yield from self._copy_queue(files)
                yield from self._mark_synced(files)
                if was is not None and was in view.members:
                    try:
                        yield Call(was, ReplicaRelease())
                    except OSError:
                        pass  # down: a restarted node drops its replica space anyway (``reconcile``)
            else:
                yield from self._copy_queue(promoted + sorted(self.unsynced))
        finally:
            self.to_copy.difference_update(promoted)

    def _copy_queue(self, paths: list[str]) -> Gen:
        """Copy ``paths`` whole to the successor, one after another, each
        held against a directory rename until its copy begins (``to_copy``;
        found by the dynamics property: a directory renamed during a leave
        moved a file its successor had just promoted, and the copy, made
        under the old name, dropped the successor's copy instead)."""
        self.to_copy.update(paths)
        try:
            for path in paths:
                self.to_copy.discard(path)
                yield from self.replicate(path)
        finally:
            self.to_copy.difference_update(paths)

    def _rename_logged_copies(self, view: View) -> Gen:
        """A committed rename logged here (this node is its coordinator's heir) whose moved file's
        home left: the copy held here takes its new name before the promotions, which then make it
        the file under that name.  Promoted under the old name and renamed after (the heir's
        ``RenameCopy``, ``Renaming._terminate``), the old name was listed again in between: an
        observer saw the committed rename undone (found by ``tests.rename_histories_random``: the
        coordinator, also the moved file's home, crashed after its commit point)."""
        for _, log in list(self.rename_log.values()):
            if log.commit and log.home not in view.members and self.held.get(log.old) == log.home \
                    and log.new not in self.held:  # fmt: skip
                self.promoting.add(log.new)  # (promoted by the loop that follows, not at once)
                try:
                    yield from self._copy_renamed(log.home, log.old, log.new)
                except OSError:
                    self.promoting.discard(log.new)
                    continue
                self.promoting.discard(log.old)

    def _repoint(self, old: View, view: View) -> None:
        """Before the view change drops them (no yield: atomic with it), DT
        entries naming a departed home are pointed at that home's successor
        in ``old``, the node promoting the file's copy: the name never looks
        missing (that node answers EAGAIN until the promotion is done, then
        serves it; a file that had no copy there is its ENOENT, the truth)."""
        gone = set(old.members) - set(view.members)
        if not gone:
            return
        dt = self.dt
        for p in list(dt.keys()):
            e = dt.peek(p)
            if e is not None and not e.is_dir and e.home in gone:
                s = self._promoter(e.home, old, view)
                if s is not None:
                    dt.put(p, DTEntry(False, s))
        # So is a committed rename's decision still in flight here (``RenameFlight.home``): every
        # merge of its directory names the moved file there until its steps are done.  Left naming
        # the departed home, a merge after the promotion listed the file but cached its entry as
        # that home's, and every lookup of it was ENOENT once the home restarted empty
        # (tests/test_rename_histories.py: the moved file's home crashed after the commit point).
        for f in self.renames.values():
            if f.home is not None and f.home in gone:
                s = self._promoter(f.home, old, view)
                if s is not None:
                    f.home = s

    def _promoter(self, home: int, old: View, view: View) -> int | None:
        """The node promoting departed ``home``'s copies: its successor in ``old``, if ``view`` keeps it."""
        s = self.successor(home, old)
        return s if s is not None and s in view.members else None

    def _renamed_home_left(self, path: str, home: int) -> None:
        """As ``_repoint`` does at the install: while the view change that
        dropped ``home`` is unsettled, the entry names ``home``'s successor in
        the previous view, the node promoting the renamed copy.  Without an
        entry, the old manager's hand-off, overtaken here by this end while
        this node fetched the view it came with, put back the replaced
        target's home (found by the dynamics property: a rename during a
        leave left the name listed and ENOENT for good)."""
        prev = self._prev_view
        s = None
        if self.replicating and prev is not None and home in prev.members:
            s = self._promoter(home, prev, self.view)
        if s is not None:
            self.dt.put(path, DTEntry(False, s))
        else:
            super()._renamed_home_left(path, home)

    def _promote(self, path: str) -> Gen:
        """The copy of ``path`` becomes the file (its primary left the view)."""
        try:
            yield Local("stat", path)
            self.promote_conflicts += 1  # a local name of its own: left as it is
            return False
        except FileNotFoundError:
            pass
        d, name = split(path)
        created = (yield Local("mkdir", d)) if d != ROOT else []
        rp = _rp(path)
        try:
            yield Local("rename", rp, (path,))
        except OSError:
            # The copy went meanwhile (dropped or renamed by its departed
            # primary): the parents made for it go too, deepest first, or
            # a later promotion into them would find them made and never
            # summarise them (its new manager's merges would miss the file).
            for c in reversed(created):
                try:
                    yield Local("rmdir", c)
                except OSError:
                    break
            raise
        self.adopted[path] = self.held.pop(path)
        self.promoted += 1
        self.implicit_dirs.update(created)
        self.moved.pop(path)
        self.dt.put(path, DTEntry(False, self.id))
        for c in created:
            try:
                yield from self.summary_add(c, new_dir=False)
            except OSError:
                pass  # a manager that refuses (evicted meanwhile): the next view change re-pushes the summary
            # The parent's VD may have been merged since its last holder
            # left and before this mkdir (the root's, for a create's check):
            # told as a mkdir tells it (found by the dynamics property: /b
            # was missing from every walk, its files promoted here).
            pd, leaf = split(c)
            try:
                yield from self.notify(self.manager_of(pd), AddEntry(pd, leaf, True, self.id))
            except OSError:
                pass  # the parent's next merge finds it
        try:
            yield from self.notify(self.manager_of(d), AddEntry(d, name, False, self.id))
        except OSError:
            pass  # the parent's next merge finds it (its VD lost the leaver's entries)
        yield from self._prune_replicas(parent(rp))
        return True

    def local_files(self) -> Gen:
        """Every regular file of this node's namespace tree (not the replica or orphan space), sorted."""
        dirs = yield Local("list_dirs", ROOT)
        out = []
        for d in sorted(dirs):
            if is_reserved(d):
                continue
            for name, is_dir in (yield Local("listdir", d)):
                p = join(d, name)
                if not is_dir and p not in self.incoming and not is_reserved(p):
                    out.append(p)
        return sorted(out)

    # ------------------------------------------------------------------ a restarted node
    def reconcile(self, seed: int) -> Gen:
        """Before a restarted node joins again (module docstring, "Restart"):
        drop its regular files and its replica space, keep the directories
        the federation lists, remove the empty ones it no longer has.
        Returns how many files were removed."""
        epoch, members, contacts = yield Call(seed, GetView())
        members = check_members(members)
        view = self.view.adopt(epoch, members, check_contacts(contacts, members))
        try:
            yield Local("stat", SYNC_MARK)
            every_file = True
        except FileNotFoundError:
            every_file = False  # crashed before its first full copy: keep what no member holds
        removed = 0
        for path in (yield from self.local_files()):
            if not every_file and not (yield from self._held_elsewhere(view, path)):
                continue
            try:
                yield Local("unlink", path)
                removed += 1
            except FileNotFoundError:
                pass
        dirs = yield Local("list_dirs", ROOT)
        for d in sorted((d for d in dirs if d != ROOT and not is_reserved(d)), reverse=True):  # deepest first
            if (yield Local("listdir", d)) or (yield from self._listed_dir(view, d)):
                continue
            yield Local("rmdir", d)
        yield from self._drop_replica_space()
        self.held.clear()
        self.unsynced.clear()
        self.synced = False
        return removed

    def was_member(self) -> Gen:
        """With two copies, a tree that has a replica space was a member's
        (it held copies or its sync mark): a restart, to be reconciled.  A
        node that never was one (no replica space) joins with its tree as it
        is (autonomy: its empty directories too)."""
        if not self.replicating:
            return False
        try:
            is_dir, _ = yield Local("stat", REPLICA_ROOT)
        except FileNotFoundError:
            return False
        return bool(is_dir)

    def _held_elsewhere(self, view: View, path: str) -> Gen:
        """Whether the name's manager in ``view`` answers another home for ``path``."""
        m = view.manager_of(path)
        if m == self.id:
            return False
        try:
            is_dir, home, _ = yield Call(m, HomeInfo(path, epoch=view.epoch))
        except OSError:
            return False  # nobody else has it (ENOENT) or cannot tell now: kept
        return not is_dir and home is not None and home != self.id

    def _listed_dir(self, view: View, d: str) -> Gen:
        """Whether the namespace of ``view`` still has directory ``d`` (True
        when its manager cannot tell now: nothing removed blind)."""
        try:
            is_dir, _, _ = yield Call(view.manager_of(d), HomeInfo(d, epoch=view.epoch))
        except FileNotFoundError:
            return False
        except OSError:
            return True
        return bool(is_dir)

    def _drop_replica_space(self) -> Gen:
        dirs = yield Local("list_dirs", REPLICA_ROOT)
        for d in sorted(dirs, reverse=True):  # deepest first
            for name, is_dir in (yield Local("listdir", d)):
                if not is_dir:
                    yield Local("unlink", join(d, name))
            yield Local("rmdir", d)


__all__ = [
    "ReplicaAttr", "ReplicaDrop", "ReplicaPut", "ReplicaRead", "ReplicaRelease", "ReplicaRename", "ReplicaSetattr",
    "ReplicaStat", "ReplicaTruncate", "ReplicaWrite", "Replication",
]  # fmt: skip
