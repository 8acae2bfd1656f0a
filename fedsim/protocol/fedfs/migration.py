"""File migration (FedFS 3.2): the mechanism, and the periodic work that runs
a migration policy (``fedsim.protocol.policies.migration``).

"Whenever the migration policy decides to move a file, the file is added to
a list at the target node.  For each file in the list, the file is
transferred and the file's manager and parent's manager are updated with the
information about the new location."  For a file P in directory D, moved
from its home S (the source) to T (the target), with M = manager_of(P) and
PM = manager_of(D), T runs the move; its calls, in order::

    T -> S   MigrateBegin(P, T, token)     S notes the move: writes now mark a dirty range
    T        (local) create P, hidden      T's ReadDir does not list it; requests for it: EAGAIN
    T -> S   MigrateRead(P, off, n) ...    the copy, one chunk (``migration_chunk``) per message
    T -> S   MigrateFreeze(P)              S gates P (EAGAIN) once no write to it is in flight;
                                           reply: size, the dirty range, the open pins
    T -> S   MigrateRead ...               only the range written during the copy
    T -> S   MigrateXattrs(P)              the extended attributes, read under the freeze (if it has any)
    (T -> T' ReplicaPut ...                with two copies: the file whole to T's successor)
    T -> M   MigrateDT(P, S, T)            M's DT names T
    T -> PM  MigrateSwitch(D, name, T, S)  --- the commit point: PM's VD names T ---
    T        P is T's: visible, ungated, the pins added to ``opens``
    T -> S   MigrateDone(P, token, True)   S deletes its copy, leaves a tombstone (ESTALE)
    T -> PM  MigrateRelease(D, name, T)    the flight ends

Each move is named by a token (the target's, as a create attempt's), so an
undo or a repeated step that arrives late (``repair``) touches only its own
move's state, never a newer move of the same file.

The extended attributes (``extattrs.py``) are read once the file is
frozen, so one set during the copy moves too; the target sets them on its
copy before the commit point (one that its local file system refuses,
ENOSPC say, fails the move, which is undone).

Service is not disrupted: until the freeze, S serves P as before (reads,
writes, opens); a write during the copy marks its range dirty at S and T
copies that range again under the freeze, so no write is lost.  The frozen
window is one message round trip per step plus the dirty range; requests
that meet it are answered EAGAIN and the requester backs off, as for a
rename.  From the freeze on, nothing changes P at S.

Why PM registers the switch as an in-flight rename of ``name`` onto itself
(``RenameFlight``): from the commit point until S's copy is gone, S and T
both hold P in their local trees (or, an instant later, only T); a dirmerge
of D meanwhile would see both (a collision) or miss T's summary.  The flight
makes every merge at PM answer T, as it does for a rename past its commit
point, and keeps renames in D off (EAGAIN) for those few messages.  T sends
``SummaryAdd`` for the directories it made before the release, so later
merges ask T.

Open descriptors survive a move: S hands its open count for P to T with the
freeze (it pins P there now), and answers later requests for P with ESTALE
(the tombstone in ``Home.moved``); the requester's descriptor then follows
the file (``Requester._at_fd``): it re-resolves P at M and sends the request
to T, with no new Open.  Stale DT entries elsewhere are corrected lazily:
they lead to S, which answers ESTALE, and the requester asks M again
(``Requester._at_home``).

A failed move leaves no trace: before the commit point T undoes what it did
in reverse (M's DT back to S, S's note and gate dropped, T's hidden copy
and the directories made for it removed) and the file stays whole at S; a
name removed or renamed meanwhile, a target that holds a local file of that
name, a source or manager that does not answer: the client is told why.
After the commit point the steps cannot fail by the protocol's doing; a
peer that does not answer gets them by ``repair`` (retried in the
background until it answers).

With two copies (``replication``) the target copies the file whole to its
own successor before the commit point (``moved_in``): a successor that does
not take it fails the move, undone as above (the copy made there dropped
too).  The source's ``MigrateDone`` drops its secondary's copy before it
answers; not taken, the source answers ``PeerUnavailable`` naming that
secondary, and the target ends the move and then fails it with that error
(``rename._lagging``): moved and visible, ambiguous to the client, the
stale copy dropped by the source's repair.

Not moved (``links.py``): a symlink or special file (ELOOP) and a file with
more than one name (EMLINK, from ``MigrateBegin`` or, for one linked during
the copy, ``MigrateFreeze``: the move is undone); a directory's migration
leaves them on their home.

Known limit, as for rename: a source that crashes after the commit point
and restarts keeps its copy (a collision at the next merge, resolved to the
lowest node id, which ``fednode status`` reports).

Policies: a periodic timer (``migration_timer``) decays this node's request
counters, gossips its load (``LoadGossip``, one-way, to ``migration_fanout``
random members, carrying the freshest loads it knows), asks the policy, and
issues the moves it returns through the same mechanism (``MigrateIn`` to the
target).  A file that arrived by migration stays ``migration_hysteresis``
periods before any policy may move it again.
"""

from __future__ import annotations

import errno
import random
import struct
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from fedsim.protocol.attrs import KEEP, PERM_BITS, Attr, is_regular
from fedsim.protocol.effects import Compute, Local, Send, Sleep, Spawn
from fedsim.protocol.fedfs.directory import RenameFlight
from fedsim.protocol.fedfs.rename import Renaming, _best_effort, _lagging
from fedsim.protocol.messages import (
    Close,
    Create,
    ListVD,
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
from fedsim.protocol.names import ROOT, join, normalize, split
from fedsim.protocol.node import Gen, api, handles
from fedsim.protocol.policies.migration import FileLoad, LoadView, make_migration_policy
from fedsim.protocol.tables import LRU, DTEntry
from fedsim.protocol.xattrs import check_served, check_set, served

CLEAN = -1  # no dirty range
TRACKED_FILES = 4096  # per-file counters a node keeps for its policy (the hottest survive decay)
GOSSIP_ENTRIES = 64  # loads one gossip message carries at most
_GOSSIP = struct.Struct("<IIf")  # node, round, load


# --- at the target (T) ----------------------------------------------------------------------
@register_request
@dataclass(slots=True, frozen=True)
class MigrateIn(Request):
    """Put ``path`` (a file whose home is ``source``) on this node's list and
    move it here.  ``load`` > 0: a policy asks, for a file with that much
    recent load, and this node's policy may refuse (EBUSY); 0: asked by hand.
    Reply: the bytes copied."""

    reply: ClassVar[Any] = int
    path: str
    source: int
    load: float = 0.0


# --- at the source (S) ----------------------------------------------------------------------
@register_request
@dataclass(slots=True, frozen=True)
class MigrateBegin(Request):
    """``target`` starts copying ``path`` (its move ``token``): note it, track
    writes.  Reply: the size."""

    reply: ClassVar[Any] = int
    path: str
    target: int
    token: int


@register_request
@dataclass(slots=True, frozen=True)
class MigrateRead(Read):
    """One chunk of a file being migrated: a ``Read`` (its fields, size bound
    and bulk reply inherited), its own type so that the source counts it as
    the copy, not as a client's load."""

    reply: ClassVar[Any] = bytes


@register_request
@dataclass(slots=True, frozen=True)
class MigrateFreeze(Request):
    """Gate ``path`` for the switch.  Reply: (size, dirty_lo, dirty_hi, open
    pins, permission bits, atime_ns, mtime_ns, extended attributes); dirty_lo
    = -1 if nothing was written since MigrateBegin.  The attributes are read
    once the file is gated, so a chmod or utimens made during the copy moves
    with it; the last is how many extended attributes the file has, so that
    ``MigrateXattrs`` is asked only of a file that has some (most have none:
    a move costs no round trip more for them)."""

    reply: ClassVar[Any] = tuple[int, int, int, int, int, int, int, int]
    path: str


@register_request
@dataclass(slots=True, frozen=True)
class MigrateXattrs(Request):
    """The frozen file's extended attributes, so that a moved file keeps them
    (asked only when MigrateFreeze counted some: values do not ride on its reply,
    whose size then stays that of a file without them).  Reply:
    [(name, value)], each as ``fedsim.protocol.xattrs`` bounds them (at most
    64 KiB of names, each value at most 64 KiB; all in one message: a file
    whose attributes need more than ``max_message_bytes`` cannot move, and
    its move is undone)."""

    reply: ClassVar[Any] = list[tuple[str, bytes]]
    path: str


@register_request
@dataclass(slots=True, frozen=True)
class MigrateDone(Request):
    """Move ``token`` committed (delete the local copy, leave a tombstone) or
    aborted (forget the move, open the gate).  Idempotent: a repair may
    repeat it, and one for another move is ignored."""

    reply: ClassVar[Any] = None
    path: str
    token: int
    commit: bool


# --- at the file's manager (M) and the parent's manager (PM) ---------------------------------
@register_request
@dataclass(slots=True, frozen=True)
class MigrateDT(Request):
    """The manager's DT: ``path`` lives at ``home`` now, not ``source`` (move
    ``token``).  With ``undo``: back to ``source``, if the entry is still
    that move's (a late undo does not overwrite a newer move)."""

    reply: ClassVar[Any] = None
    path: str
    source: int
    home: int
    token: int
    undo: bool = False


@register_request
@dataclass(slots=True, frozen=True)
class MigrateSwitch(Request):
    """The commit point: ``directory``'s VD names ``home`` for ``name`` (held
    as a flight until MigrateRelease).  ENOENT if the VD has no such file at
    ``source``."""

    reply: ClassVar[Any] = None
    directory: str
    name: str
    home: int
    source: int
    token: int


@register_request
@dataclass(slots=True, frozen=True)
class MigrateRelease(Request):
    """End move ``token``'s switch in ``directory``; the VD names ``home``
    for ``name`` (the target: committed; the source: undone).  Idempotent."""

    reply: ClassVar[Any] = None
    directory: str
    name: str
    home: int
    token: int


# --- between any two members ----------------------------------------------------------------
@register_request
@dataclass(slots=True, frozen=True)
class LoadGossip(Request):
    """Loads the sender knows: ``loads`` packs (node, round, load) entries,
    at most ``GOSSIP_ENTRIES``; a receiver keeps the freshest round per node."""

    reply: ClassVar[Any] = None
    node: int
    loads: bytes


@dataclass(slots=True)
class Outgoing:
    """A move of a local file in flight, at the source."""

    target: int
    token: int
    lo: int = CLEAN  # the range written since MigrateBegin: [lo, hi)
    hi: int = CLEAN
    frozen: bool = False

    def dirty(self, lo: int, hi: int) -> None:
        self.lo = lo if self.lo == CLEAN else min(self.lo, lo)
        self.hi = max(self.hi, hi)


#: Requests that a file's home serves for a client: what a node's load and a
#: file's heat count (the load a migration can move).
FILE_REQUESTS = frozenset({Stat, Open, Read, Write, Truncate, Close, Unlink, Create})
INF = 1 << 62


def _single(path: str, a: Attr) -> None:
    """EMLINK for a file with more than one name (hard links): not migrated (``links.py``)."""
    if a.nlink > 1:
        raise fs_error(
            errno.EMLINK, path,
            f"a file with {a.nlink} names (hard links) is not migrated: moving one name would split it; it stays home",
        )  # fmt: skip


class Migration(Renaming):
    def __init__(self, node_id: int, spec: Any, **kw: Any) -> None:
        super().__init__(node_id, spec, **kw)
        self.incoming: dict[str, int] = {}  # the list at the target: path -> source
        self.outgoing: dict[str, Outgoing] = {}  # at the source: path -> its move
        self.mutating: Counter[str] = Counter()  # writes, truncates, unlinks in flight per path
        self.migrated_in = 0
        self.migrated_out = 0
        self.migration_bytes = 0  # bytes this node copied in
        self.moves: Counter[str] = Counter()  # moves per path this node received (ping-pong check)
        # At a manager: path -> the move whose MigrateDT set its entry; at a
        # parent's manager: directory -> (name, move) of the switch it holds.
        self.dt_moves: LRU[str, int] = LRU(TRACKED_FILES)
        self.switches: dict[str, tuple[str, int]] = {}
        # (target, token) of moves undone here: a step of one that arrives
        # after its undo (late, or repeated) is refused, as a fenced create.
        self.undone: LRU[tuple[int, int], bool] = LRU(TRACKED_FILES)
        # the policy and what it sees
        c = self.config
        self.policy = make_migration_policy(c.migration, node_id, c, spec.seed)
        self.timer = c.migration != "none"  # the policy's periodic work (none: moves only on request)
        self.round = 0
        self.file_load: LRU[str, FileLoad] = LRU(TRACKED_FILES)
        self.served = 0.0  # file requests served this period
        self.accepted = 0.0  # load of the moves this node accepted since its last period
        self.load = 0.0  # decayed
        self.loads: dict[int, tuple[int, float]] = {}  # node -> (its round, its load), gossiped
        self.arrived: LRU[str, int] = LRU(TRACKED_FILES)  # path -> round it arrived by migration
        self._rng = random.Random(spec.seed * 1_000_003 + node_id)

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "migration_policy": self.policy.name,
            "migrations_in": sorted([p, s] for p, s in self.incoming.items()),
            "migrations_out": sorted([p, o.target] for p, o in self.outgoing.items()),
            "migrated_in": self.migrated_in,
            "migrated_out": self.migrated_out,
            # Every load this node knows: gossiped ones, and its own (decayed per
            # period; with no policy running, the file requests served so far).
            "loads": {str(n): round(v, 3) for n, v in sorted(self._known_loads().items())},
        }

    def dir_busy(self, near: Callable[[str], bool]) -> list[str]:
        """A migration in flight under a directory rename's paths (``rename.py``)."""
        return super().dir_busy(near) + [p for p in (*self.incoming, *self.outgoing) if near(p)]

    def _known_loads(self) -> dict[int, float]:
        return {**{n: v for n, (_, v) in self.loads.items()}, self.id: self.load if self.round else self.served}

    # ------------------------------------------------------------------ counting load
    def handle(self, src: int, request: Request) -> Gen:
        if type(request) in FILE_REQUESTS:  # counted under every policy: status shows the load
            self._count(request.path, src)  # type: ignore[attr-defined]
        return super().handle(src, request)

    def _count(self, path: str, src: int) -> None:
        self.served += 1
        self.stats.file_requests += 1
        f = self.file_load.peek(path)
        if f is None:
            f = FileLoad()
            self.file_load.put(path, f)
        f.hits += 1
        f.by[src] = f.by.get(src, 0.0) + 1

    # ------------------------------------------------------------------ the client's operation
    @api(str, int)
    def migrate(self, path: str, to: int) -> Gen:
        """Move a file, or every file under a directory (one by one), to node
        ``to``; returns how many files moved (0: already there).  EINVAL if
        ``to`` is not a member; a target that is down is PeerUnavailable."""
        path = normalize(path)
        yield Compute("fedfs_op")
        if to not in self.members:
            raise fs_error(errno.EINVAL, path, f"node {to} is not a member of the federation {list(self.members)}")
        entry, _ = yield from self._lookup(path)
        if entry.is_dir:
            return (yield from self._migrate_tree(path, to))
        return (yield from self._migrate_file(path, to))

    def _migrate_tree(self, top: str, to: int) -> Gen:
        moved = 0
        stack = [top]
        while stack:
            d = stack.pop()
            for name, is_dir in reversed((yield from self._busy(lambda d=d: self._list(d)))):
                p = join(d, name)
                if is_dir:
                    stack.append(p)
                    continue
                try:
                    moved += yield from self._migrate_file(p, to)
                except OSError as exc:
                    if exc.errno not in (errno.ELOOP, errno.EMLINK):
                        raise  # (a symlink, special file or file with several names stays where it is: ``links.py``)
        return moved

    def _list(self, d: str) -> Gen:
        return (yield from self.call(self.manager_of(d), ListVD(d)))

    def _migrate_file(self, path: str, to: int) -> Gen:
        """One file to ``to``: asked of the target with the home as this node
        resolves it; a stale entry (the source answers ENOENT or ESTALE) is
        resolved again at the manager, once.  A cached entry that already names
        ``to`` is asked of ``to`` first (``_at_home``'s Stat): the file may have
        been removed or moved since, and "already there" must not answer for a
        file that is gone (ENOENT, as any operation on it)."""
        entry, cached = yield from self._lookup(path)
        if cached and not entry.is_dir and entry.home == to:
            _, home = yield from self._at_home(path, Stat, errno.EISDIR)
            entry = DTEntry(False, home)
        for attempt in (0, 1):
            if entry.is_dir:
                raise fs_error(errno.EISDIR, path)
            if entry.home == to:
                return 0
            home = entry.home
            assert home is not None
            try:
                yield from self._busy(lambda home=home: self.call(to, MigrateIn(path, home)))
                break
            except OSError as exc:
                if attempt or exc.errno not in (errno.ENOENT, errno.ESTALE) or isinstance(exc, PeerUnavailable):
                    raise
            self.dt.pop(path)
            entry = yield from self._lookup_at_manager(path)
        self.dt.put(path, DTEntry(False, to))
        return 1

    # ------------------------------------------------------------------ T: the target runs the move
    @handles(MigrateIn)
    def on_migrate_in(self, src: int, req: MigrateIn) -> Gen:
        path, source = req.path, req.source
        if path == ROOT or source == self.id or source not in self.members:
            raise fs_error(errno.EINVAL, path, f"cannot move from node {source} to node {self.id}")
        if path in self.incoming or path in self.outgoing or path in self.gates:
            raise fs_error(errno.EAGAIN, path, "a rename or migration of this name is in flight; try again")
        if req.load > 0:
            accept = getattr(self.policy, "accept", None)  # optional: a policy without one takes every move
            if not req.load < INF or (accept is not None and not accept(self.load_view(), self.accepted + req.load)):
                raise fs_error(errno.EBUSY, path, f"node {self.id} takes on no more load now")
            self.accepted += req.load
        d, name = split(path)
        m, pm = self.manager_of(path), self.manager_of(d)
        self._next_token += 1
        token = self._next_token
        try:
            size = yield from self.call(source, MigrateBegin(path, self.id, token))
        except PeerUnavailable:
            yield from self.repair(source, MigrateDone(path, token, False))  # it may have noted the move
            raise
        self.incoming[path] = source
        self.gates.add(path)
        created: list[str] | None = None
        asked_m = asked_pm = copied_on = False
        try:
            try:
                created = yield Local("create", path)
            except FileExistsError:
                raise fs_error(errno.EEXIST, path, f"node {self.id} holds a local file of that name") from None
            self.implicit_dirs.update(created)
            copied = yield from self._copy(source, path, 0, size)
            frozen = yield from self._busy(lambda: self.call(source, MigrateFreeze(path)))
            size, lo, hi, pins, mode, atime_ns, mtime_ns, xattrs = frozen
            yield Local("truncate", path, (size,))
            if lo != CLEAN and lo < size:
                copied += yield from self._copy(source, path, lo, min(hi, size))
            for attr, value in (yield from self.call(source, MigrateXattrs(path))) if xattrs else ():
                check_set(path, attr, value, 0)  # a peer's names are untrusted
                check_served(path, attr, self.config.security_xattrs)
                yield Local("setxattr", path, (attr, value, 0))
            # last, so that the copy's own writes do not stamp the times
            yield Local("setattr", path, (mode, KEEP, KEEP, atime_ns, mtime_ns))
            copied_on = True
            yield from self.moved_in(path)  # (replication: its copy at this node's successor, before the commit)
            asked_m = True
            yield from self._busy(lambda: self.call(m, MigrateDT(path, source, self.id, token)))
            asked_pm = True
            yield from self._busy(lambda: self.call(pm, MigrateSwitch(d, name, self.id, source, token)))
        except Exception:  # not GeneratorExit: an abandoned generator must not yield its rollback
            # In reverse; a step whose outcome is unknown (no answer) is undone
            # too, by repair until its peer answers (each undo is idempotent
            # and ignored by a peer that did not take the step).
            if asked_pm:
                yield from self._surely(pm, MigrateRelease(d, name, source, token))
            if asked_m:
                yield from self._surely(m, MigrateDT(path, source, self.id, token, undo=True))
            yield from self._surely(source, MigrateDone(path, token, False))
            self.incoming.pop(path, None)
            self.gates.discard(path)
            if created is not None:
                yield from _best_effort(self._drop_copy(path))
                if copied_on:
                    yield from _best_effort(self.moved_in(path))  # (the copy made of it there goes too)
            raise
        # Committed: the file is this node's.
        self.incoming.pop(path, None)
        self.gates.discard(path)
        self.moved.pop(path)
        self.dt.put(path, DTEntry(False, self.id))
        if pins:
            self.opens[path] += pins
        for c in created:
            yield from self.summary_add(c, new_dir=False)
        lag = yield from self._surely(source, MigrateDone(path, token, True))
        yield from self._surely(pm, MigrateRelease(d, name, self.id, token))
        self.migrated_in += 1
        self.migration_bytes += copied
        self.moves[path] += 1
        if len(self.moves) > TRACKED_FILES:  # bounded: the oldest path's count goes
            del self.moves[next(iter(self.moves))]
        self.arrived.put(path, self.round)
        if lag is not None:
            raise lag  # moved, but the source's secondary still holds its copy: not acknowledged
        return copied

    def moved_in(self, path: str) -> Gen:
        """A move's target, before its commit point, holds the whole file
        (hidden, the source frozen); called again after an undo (``path``
        gone here).  Nothing to do with one copy; replication overrides it
        (a successor that does not take the file fails the move)."""
        return
        yield

    def _surely(self, node: int, req: Request) -> Gen:
        """An idempotent step that must reach ``node``: now, or by repair in
        the background until it answers (a gate, a note of the move, a copy
        or a switch must not stay behind).  Returns the error of a step
        ``node`` did while its secondary did not take it (``_lagging``)."""
        try:
            return (yield from _lagging(self.call(node, req), node))
        except (PeerUnavailable, BlockingIOError):
            yield from self.repair(node, req)
        except OSError:
            pass  # answered: nothing of this move there
        return None

    def _copy(self, source: int, path: str, lo: int, hi: int) -> Gen:
        """Copy bytes [lo, hi) of the source's file into the local copy."""
        chunk = self.config.migration_chunk
        off = lo
        while off < hi:
            data = yield from self.call(source, MigrateRead(path, off, min(chunk, hi - off)))
            if not data:
                break  # shorter now: the freeze tells the final size
            yield Local("write", path, (off, data))
            off += len(data)
        return off - lo

    def _drop_copy(self, path: str) -> Gen:
        try:
            yield Local("unlink", path)
        except FileNotFoundError:
            pass
        d = split(path)[0]
        if d in self.implicit_dirs:
            yield from self._prune(d, changed=False)  # an aborted move's copy: no entry of d changed

    def local_entries(self, directory: str) -> Gen:
        """Dirmerge (a peer's ReadDir, or a merge here when this node is the
        parent's manager too): a copy still arriving is not this node's
        entry yet.  (Read only by a peer's ReadDir before, a merge at a
        target that manages the parent saw its own hidden copy as a
        collision that it won, and the move's switch failed ENOENT.)"""
        entries = yield from super().local_entries(directory)
        if self.incoming:
            entries = [(n, is_dir) for n, is_dir in entries if join(directory, n) not in self.incoming]
        return entries

    # ------------------------------------------------------------------ S: the source
    @handles(MigrateBegin)
    def on_migrate_begin(self, src: int, req: MigrateBegin) -> Gen:
        path = req.path
        if path in self.gates or path in self.outgoing or path in self.incoming:
            raise fs_error(errno.EAGAIN, path, "a rename or migration of this name is in flight; try again")
        a = Attr(*(yield from self._local("getattr", path)))  # (as cheap as a stat)
        if a.is_dir:
            raise fs_error(errno.EISDIR, path)
        _single(path, a)
        size = a.size
        self._not_undone(src, req.token, path)
        if path in self.gates or path in self.outgoing:  # (one began while we looked)
            raise fs_error(errno.EAGAIN, path, "a rename or migration of this name is in flight; try again")
        self.outgoing[path] = Outgoing(src, req.token)
        return size

    def _outgoing(self, src: int, path: str) -> Outgoing:
        out = self.outgoing.get(path)
        if out is None or out.target != src:
            raise fs_error(errno.EINVAL, path, f"no migration of this file to node {src} is in flight")
        return out

    @handles(MigrateRead)
    def on_migrate_read(self, src: int, req: MigrateRead) -> Gen:
        self._outgoing(src, req.path)
        return (yield Local("read", req.path, (req.offset, req.size)))

    @handles(MigrateFreeze)
    def on_migrate_freeze(self, src: int, req: MigrateFreeze) -> Gen:
        path = req.path
        out = self._outgoing(src, path)
        if not out.frozen:
            if self.mutating.get(path) or path in self.gates:
                raise fs_error(errno.EAGAIN, path, "a write to this file is in flight; try again")
            self.gates.add(path)
            out.frozen = True
        try:
            a = Attr(*(yield Local("getattr", path)))
            if not is_regular(a.mode):  # (a symlink with a target was refused by its first MigrateRead already)
                raise fs_error(errno.ELOOP, path, "symlinks and special files are not migrated: they stay home")
            _single(path, a)  # (linked while it was copied)
            xattrs = len(self._migrated_xattrs((yield Local("listxattr", path))))
        except OSError:
            self.gates.discard(path)
            out.frozen = False
            raise
        pins = self.opens.get(path, 0)
        return a.size, out.lo, min(out.hi, INF), pins, a.mode & PERM_BITS, a.atime_ns, a.mtime_ns, xattrs

    def _migrated_xattrs(self, names: list[str]) -> list[str]:
        """The attributes a move carries: those of the namespaces the federation
        serves (``trusted.`` too; ``security.`` only with ``protocol.security_xattrs``:
        a host's own label of a local file does not travel)."""
        return [n for n in names if served(n, self.config.security_xattrs)]

    @handles(MigrateXattrs)
    def on_migrate_xattrs(self, src: int, req: MigrateXattrs) -> Gen:
        path = req.path
        if not self._outgoing(src, path).frozen:
            raise fs_error(errno.EINVAL, path, f"the migration of this file to node {src} is not frozen")
        out = []
        for attr in self._migrated_xattrs((yield Local("listxattr", path))):
            try:
                out.append((attr, (yield Local("getxattr", path, (attr,)))))
            except OSError as exc:
                if exc.errno != errno.ENODATA:  # (removed outside the federation since listed: not moved)
                    raise
        return out

    @handles(MigrateDone)
    def on_migrate_done(self, src: int, req: MigrateDone) -> Gen:
        path = req.path
        out = self.outgoing.get(path)
        if out is None or out.token != req.token:
            if not req.commit:
                self.undone.put((src, req.token), True)  # its MigrateBegin, if late, is refused
            return None  # a repeated outcome (repair), or another move's: nothing to do
        del self.outgoing[path]
        if out.frozen:
            self.gates.discard(path)
        if not req.commit:
            return None
        self.moved.put(path, True)
        e = self.dt.peek(path)
        if e is not None and e.home == self.id:
            self.dt.pop(path)
        self.opens.pop(path, None)
        self.file_load.pop(path)
        try:
            yield Local("unlink", path)
        except OSError:
            pass  # changed outside the federation meanwhile: nothing of ours left to remove
        d = split(path)[0]
        if d in self.implicit_dirs:
            yield from self._prune(d)
        self.migrated_out += 1
        return None

    # Writes, truncates and unlinks: a move in flight learns what they changed.
    def _mutation(self, path: str, lo: int, hi: int, gen: Gen) -> Gen:
        self.mutating[path] += 1
        try:
            return (yield from gen)
        finally:
            if self.mutating[path] > 1:
                self.mutating[path] -= 1
            else:
                del self.mutating[path]
            out = self.outgoing.get(path)
            if out is not None:
                out.dirty(lo, hi)

    # (Counted even with no move near: a move may begin while one is in flight.)
    @handles(Write)
    def on_write(self, src: int, req: Write) -> Gen:
        return (yield from self._mutation(req.path, req.offset, req.offset + len(req.data), super().on_write(src, req)))

    @handles(Truncate)
    def on_truncate(self, src: int, req: Truncate) -> Gen:
        return (yield from self._mutation(req.path, req.size, INF, super().on_truncate(src, req)))

    @handles(Unlink)
    def on_unlink(self, src: int, req: Unlink) -> Gen:
        return (yield from self._mutation(req.path, 0, INF, super().on_unlink(src, req)))

    def _not_undone(self, src: int, token: int, path: str) -> None:
        if (src, token) in self.undone:
            raise fs_error(errno.ECANCELED, path, "this migration was given up by its target")

    # ------------------------------------------------------------------ M and PM
    @handles(MigrateDT)
    def on_migrate_dt(self, src: int, req: MigrateDT) -> None:
        path = req.path
        if self.manager_of(path) != self.id:
            raise fs_error(errno.EINVAL, path, "not managed here")
        if req.undo:
            self.undone.put((src, req.token), True)
            if self.dt_moves.peek(path) == req.token:
                self.dt_moves.pop(path)
                self.dt.put(path, DTEntry(False, req.source))
                self.dt_epoch += 1
            return
        self._not_undone(src, req.token, path)
        self._unmarked(path)
        e = self.dt.peek(path)
        if e is not None and (e.is_dir or e.home not in (req.source, req.home)):
            raise fs_error(errno.EAGAIN, path, "a create or removal of this name is in flight; try again")
        self.dt.put(path, DTEntry(False, req.home))
        self.dt_moves.put(path, req.token)
        self.dt_epoch += 1

    @handles(MigrateSwitch)
    def on_migrate_switch(self, src: int, req: MigrateSwitch) -> Gen:
        d, name = req.directory, req.name
        self._not_undone(src, req.token, d)
        if d in self.renames:
            raise fs_error(errno.EAGAIN, d, "a rename or migration in this directory is in flight; try again")
        vd, _ = yield from self.ensure_vd(d)
        entry = vd.entries.get(name)
        if entry is None or entry.is_dir or entry.home != req.source:
            raise fs_error(errno.ENOENT, join(d, name), f"no file of that name at node {req.source}")
        if d in self.renames:  # (one began while the VD was merged)
            raise fs_error(errno.EAGAIN, d, "a rename or migration in this directory is in flight; try again")
        self._not_undone(src, req.token, d)
        self.renames[d] = RenameFlight(name, name, req.home)
        self.switches[d] = (name, req.token)
        self._vd_update(d, ("add", name, DTEntry(False, req.home)))

    @handles(MigrateRelease)
    def on_migrate_release(self, src: int, req: MigrateRelease) -> None:
        d = req.directory
        if req.home != src:
            self.undone.put((src, req.token), True)  # an undo: a late MigrateSwitch is refused
        if self.switches.get(d) != (req.name, req.token):
            return  # not switched here (an undo of a step never taken), or released already
        del self.switches[d]
        del self.renames[d]
        self._vd_update(d, ("add", req.name, DTEntry(False, req.home)))

    # ------------------------------------------------------------------ the policy's timer
    def start(self) -> Gen:
        result = yield from super().start()
        if self.timer:
            yield Spawn(self.migration_timer())
        return result

    def background(self) -> list[Gen]:
        return [*super().background(), *([self.migration_timer()] if self.timer else [])]

    def migration_timer(self) -> Gen:
        """Every ``migration_period_s``: decay the counters, gossip the load,
        run the policy and make the moves it asks for (one after the other:
        a move that fails is left, the policy sees the file again)."""
        while True:
            yield Sleep(self.config.migration_period_s)
            yield from self.migration_round()

    def migration_round(self) -> Gen:
        self._decay()
        yield from self._gossip()
        for path, to in self.policy.decide(self.load_view()):
            f = self.file_load.peek(path)
            if to == self.id or to not in self.members or path in self.outgoing or f is None:
                continue
            try:
                yield from self.call(to, MigrateIn(path, self.id, max(f.hits, 1e-3)))
            except OSError:
                continue  # no trace left; asked again if the policy still wants it

    def _decay(self) -> None:
        k = self.config.migration_decay
        self.round += 1
        self.load = self.load * (1 - k) + self.served * k
        self.served = 0.0
        self.accepted = 0.0
        self.loads[self.id] = (self.round, self.load)
        for p in list(self.file_load.keys()):
            f = self.file_load.peek(p)
            assert f is not None
            f.hits *= 1 - k
            if f.hits < 0.05:
                self.file_load.pop(p)
                continue
            f.by = {n: v * (1 - k) for n, v in f.by.items() if v * (1 - k) >= 0.05}

    def load_view(self) -> LoadView:
        hyst = self.config.migration_hysteresis

        def movable(path: str) -> bool:
            r = self.arrived.peek(path)
            return (r is None or self.round - r >= hyst) and path not in self.outgoing and path not in self.gates

        files = {p: f for p in self.file_load.keys() if p not in self.outgoing and (f := self.file_load.peek(p))}
        return LoadView(self.id, self.members, self.load, self._known_loads(), files, movable)

    def _gossip(self) -> Gen:
        peers = [n for n in self.members if n != self.id]
        if not peers:
            return
        fresh = sorted(self.loads.items(), key=lambda kv: (-kv[1][0], kv[0]))[:GOSSIP_ENTRIES]
        data = b"".join(_GOSSIP.pack(n, r, v) for n, (r, v) in fresh)
        for peer in self._rng.sample(peers, min(self.config.migration_fanout, len(peers))):
            yield Send(peer, LoadGossip(self.id, data))

    @handles(LoadGossip)
    def on_load_gossip(self, src: int, req: LoadGossip) -> None:
        data = req.loads
        if len(data) % _GOSSIP.size or len(data) > GOSSIP_ENTRIES * _GOSSIP.size:
            raise fs_error(errno.EINVAL, ROOT, "malformed load gossip")
        members = set(self.members)
        for n, r, v in _GOSSIP.iter_unpack(data):
            if n == self.id or n not in members or not v >= 0:  # (NaN fails v >= 0)
                continue
            old = self.loads.get(n)
            if old is None or r > old[0]:
                self.loads[n] = (r, v)


__all__ = [
    "LoadGossip", "MigrateBegin", "MigrateDT", "MigrateDone", "MigrateFreeze", "MigrateIn", "MigrateRead",
    "MigrateRelease", "MigrateSwitch", "MigrateXattrs", "Migration",
]  # fmt: skip
