"""A delegation overlay on the manager map (Ursa Minor's dynamic
redistribution, CMU-PDL-06-105 section 4.2.2): management of a directory,
its *table*, moves from the node the hashing picks (its *lender*) to another
node (its *borrower*) and back.  ``rename: redistribute`` uses it
(``rename.py``): the manager of a rename's target directory borrows the
source directory, so that one node manages both and the rename is a
single-manager rename; the other rename methods never lend anything, and
with them this role is inert (``Node.overlay`` off: no check, no message).

What moves.  In FedFS a directory's manager holds its VD (the listing, a
cache of the local trees), its own DT entry as a name of its parent, the
holds of the creates in it and the copies of the summaries that name it.
All of it is keyed by the directory's path: every request routed by that
path (``ListVD``, ``GetEntry``, ``AddEntry``, ``DelEntry``, ``HomeInfo``,
``Rmdir``, ``SummaryAdd``, ...) goes to the borrower while the table is
lent.  The names *in* the directory keep their own managers (their DT
entries hash by their own paths, and a rename marks the target at its
manager as ever).  Nothing is shipped: the lender drops its VD and the
directory's DT entry (soft state), and the borrower rebuilds the VD by a
dirmerge that asks every member (its copies of the summaries lack what the
lender was told before the lend).  The summary additions the borrower is
told meanwhile travel back with the table (``GiveBack.holders``), so the
lender's merges after the return miss no holder.

Messages (``C`` the borrower, ``L`` the lender: the hashing's manager)::

    C -> L   Lend(path, epoch)                 L: nothing of the table in flight (else EAGAIN);
                                               from here L redirects the table's requests to C
    C -> L   GiveBack(path, epoch, holders)    L manages the table again
    L -> C   Recall(path, epoch)               (one way) another asked L for it: C ends its hold

Redirects.  With the overlay on, every routed request is checked where it
arrives (``Node.handle``), not only one sent under another view: a node
that does not manage the name answers ``Redirected`` naming the node that
does in its view (a lender names its borrower; a borrower that gave the
table back names the lender), and the requester caches that
(``hints``, bounded as a DT) and asks there: the stale-view retry
``Node._routed`` already wrote, which a stale hint thus recovers through
too (two hops at most: a hint's node names the lender, the lender its
current borrower).  The two moves are made so that no request is served
by two nodes or bounced between two: the borrower answers EAGAIN for the
table from before its ``Lend`` until it was answered, and from before its
``GiveBack`` until it was answered (``moving``); the requester backs off
and asks again (``Requester._busy``).  So at every instant at most one node
serves the table: the lender until it answers ``Lend``, the borrower from
that answer until it sends ``GiveBack``, the lender again once it took it.

Views.  A view change voids every delegation at every node as it installs
the view (``drop_delegations``): lender's records, borrowers' tables and
every hint.  Under the new view every name's manager is the hashing's, one
per name, whatever was lent or in flight when the view changed: a ``Lend``
or ``GiveBack`` from the old view is refused (ESTALE) or finds nothing, and
the VDs the borrowers built are dropped as any VD whose manager changed
(``Membership.install_view``).  A crashed lender or borrower is evicted by
the heartbeats (``failure.py``), which is such a view change: that is how
management comes back from a borrower that died with it (without
heartbeats a crash is never detected, as for every hold of ``rename.py``).
A lost ``Lend`` reply (the table may be lent) and a lost ``GiveBack`` are
given back again in the background until the lender answers or leaves the
view; meanwhile the borrower answers EAGAIN for the table.

The coordinator's bound.  A node borrows at most ``redistribute_limit``
tables at a time (0: no bound), held ones included; one more is refused
EAGAIN and the rename retried by its requester, and the tables only held
there (no rename using them) are given back meanwhile, for the retry.  No node ever waits for a
table while holding one (a refused ``Lend`` is EAGAIN at once), and a
rename takes its two directories in path order, the borrow of the source at
the source's place in that order (``Renaming._cross``), so two coordinators
cannot keep refusing each other either: deadlock-free at every bound, 1
(the paper's one redistribution at a time, per coordinating node) included.
The bound is per node, not federation-wide (one token for the whole
federation would serialise every cross-directory rename through it).
A held table asked for by another coordinator is recalled: its lender
answers that one EAGAIN and tells the holder (``Recall``, one way), which
gives it back once no rename uses it; the retry then borrows it.  Without
the recall a hold shut out every other coordinator until it lapsed, and
each use started it again (Ursa Fig. 6's bursts with a 1 s hold ran at a
twentieth of their rate without one).  A lost ``Recall`` costs only that:
the hold lapses at its time.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass, field
from typing import Any, ClassVar

from fedsim.protocol.effects import NOW, Send, Sleep, Spawn
from fedsim.protocol.fedfs.directory import REPAIR_FIRST_S, REPAIR_MAX_S
from fedsim.protocol.fedfs.requester import Requester
from fedsim.protocol.messages import (
    PeerUnavailable,
    ProtocolError,
    Request,
    SummaryAdd,
    fs_error,
    pack,
    register_request,
    unpack,
)
from fedsim.protocol.node import Gen, handles
from fedsim.protocol.tables import LRU
from fedsim.protocol.view import check_epoch, check_members


@register_request
@dataclass(slots=True, frozen=True)
class Lend(Request):
    """Lend the table of directory ``path`` (managed here by the hashing) to
    the sender, under view ``epoch``; EAGAIN while anything of it is in flight
    here, or while it is lent to another."""

    reply: ClassVar[Any] = None
    path: str
    epoch: int


@register_request
@dataclass(slots=True, frozen=True)
class GiveBack(Request):
    """The table of ``path`` comes back from the sender; ``holders``: the
    members it was told hold the directory meanwhile (packed node ids)."""

    reply: ClassVar[Any] = None
    path: str
    epoch: int
    holders: bytes = b""


@register_request
@dataclass(slots=True, frozen=True)
class Recall(Request):
    """From the lender of ``path``'s table to its borrower (one way): another
    coordinator asked for it, so end its hold and give it back as soon as no
    rename uses it.  A hold amortises a burst of renames between the same
    directories; without a recall it also shuts out every other coordinator
    until it lapses, and each use starts it again (Fig. 6 with a 1 s hold ran
    at a twentieth of the rate without one)."""

    reply: ClassVar[Any] = None
    path: str
    epoch: int


@dataclass(slots=True)
class Borrow:
    """A table borrowed here, from ``lender`` under view ``epoch``."""

    lender: int
    epoch: int
    #: "pending" (Lend sent), "held", "returning" (GiveBack sent)
    state: str = "pending"
    users: int = 0  # renames coordinated here that use it now
    until: float = 0.0  # with ``redistribute_hold``: kept until then
    holders: set[int] = field(default_factory=set)  # SummaryAdds taken for it here
    timer: bool = False  # a hold timer runs for it
    recalled: bool = False  # wanted elsewhere (``Recall``, or the bound here): no more holding


def pack_holders(holders: set[int]) -> bytes:
    return pack(sorted(holders)) if holders else b""


def unpack_holders(data: bytes, members: tuple[int, ...]) -> list[int]:
    """Holders from the wire: distinct member ids (ProtocolError otherwise)."""
    if not data:
        return []
    holders = check_members(unpack(data, max_size=16 * len(members) + 16))
    if any(h not in members for h in holders):
        raise ProtocolError("GiveBack holders: member ids")
    return list(holders)


class Delegation(Requester):
    def __init__(self, node_id: int, spec: Any, **kw: Any) -> None:
        super().__init__(node_id, spec, **kw)
        self.overlay = self.config.rename == "redistribute"
        self.lent: dict[str, int] = {}  # tables lent from here -> their borrower
        self.borrowed: dict[str, Borrow] = {}  # tables borrowed here
        #: redirects learnt: path -> the node that manages it (not the hashing's)
        self.hints: LRU[str, int] = LRU(self.config.dt_entries)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "lent": dict(self.lent), "borrowed": sorted(self.borrowed)}

    # ------------------------------------------------------------------ the overlay
    def manager_of(self, path: str) -> int:
        """The hashing's manager, unless the overlay moved ``path``'s table:
        here (held), to a borrower (lent from here) or elsewhere (a hint)."""
        if self.overlay and (self.borrowed or self.lent or len(self.hints)):
            b = self.borrowed.get(path)
            if b is not None and b.state == "held":
                return self.id
            to = self.lent.get(path)
            if to is None:
                to = self.hints.peek(path)
            if to is not None:
                return to
        return self.view.hashing.manager_of(path)

    def moving(self, name: str) -> None:
        b = self.borrowed.get(name)
        if b is not None and b.state != "held":
            raise fs_error(errno.EAGAIN, name, "the management of this directory is moving; try again")

    def redirected(self, name: str, to: int) -> int:
        if to == self.id:
            if self.manager_of(name) == self.id:
                return to
            raise fs_error(errno.EAGAIN, name, "the management of this directory is moving; try again")
        if to == self.view.manager_of(name):
            self.hints.pop(name)
        else:
            self.hints.put(name, to)
        return to

    def drop_delegations(self) -> None:
        """A view change voids every delegation (module docstring).  A
        borrowed directory's DT entry goes too: directory entries are cached
        at their manager only (a requester could not notice a stale one)."""
        for path in self.borrowed:
            self.dt.pop(path)
        self.lent.clear()
        self.borrowed.clear()
        self.hints = LRU(self.config.dt_entries)

    def merge_candidates(self, directory: str) -> list[int]:
        """A borrowed table is merged from every member: the summaries that
        name it were told to its lender."""
        if directory in self.borrowed:
            return list(self.members)
        return super().merge_candidates(directory)

    @handles(SummaryAdd)
    def on_summary_add(self, src: int, req: SummaryAdd) -> Gen:
        b = self.borrowed.get(req.path)
        if b is not None and len(b.holders) < len(self.members):
            b.holders.add(req.node)  # (travels back to the lender with the table)
        return (yield from super().on_summary_add(src, req))

    def table_busy(self, path: str) -> Gen:
        """Whether something of directory ``path``'s table is in flight here:
        a rename in it, its rmdir, an unexpired create's hold (``_held``), a
        dirmerge.  Its management moves only when nothing is.  A hold whose
        create's AddEntry was lost lapses (``HOLD_S``) as for an rmdir; read
        as held for good, the borrower never gave the table back (found by
        ``tests/test_rename_histories.py``: a loss window under a hold; every
        other coordinator's rename from that directory was refused for good)."""
        if path in self.renames or path in self.removing or path in self._merging:
            return True
        return (yield from self._held(path))

    # ------------------------------------------------------------------ the lender
    @handles(Lend)
    def on_lend(self, src: int, req: Lend) -> Gen:
        path = req.path
        if not self.overlay or src == self.id or src not in self.members:  # (a peer is as untrusted)
            raise fs_error(errno.EINVAL, path, "no table is lent under this rename method")
        check_epoch(req, self.view)
        if self.view.manager_of(path) != self.id:
            raise fs_error(errno.EAGAIN, path, "not this node's table; try again")
        lent = self.lent.get(path)
        if lent == src:
            return None  # (asked again: its reply was lost)
        if lent is not None:
            yield Send(lent, Recall(path, self.epoch))  # (its holder gives it back once unused)
            raise fs_error(errno.EAGAIN, path, "the table is lent to another; try again")
        if path in self.borrowed or (yield from self.table_busy(path)):
            raise fs_error(errno.EAGAIN, path, "the table is lent or busy here; try again")
        self.lent[path] = src
        self.hints.pop(path)
        self.vds.pop(path)  # (soft state: the borrower merges its own)
        self.dt.pop(path)
        self.dt_epoch += 1
        return None

    @handles(GiveBack)
    def on_give_back(self, src: int, req: GiveBack) -> Gen:
        check_epoch(req, self.view)
        holders = unpack_holders(req.holders, self.members)
        if self.lent.get(req.path) != src:
            return  # given back already (a retry after a lost reply), or voided by a view change
        del self.lent[req.path]
        for n in holders:
            yield from super().on_summary_add(src, SummaryAdd(req.path, n))

    @handles(Recall)
    def on_recall(self, src: int, req: Recall) -> Gen:
        check_epoch(req, self.view)
        b = self.borrowed.get(req.path)
        if b is None or b.lender != src or b.state != "held":
            return  # (given back already, moving, or voided by a view change)
        yield from self._recall(req.path, b)

    def _recall(self, path: str, b: Borrow) -> Gen:
        """End ``b``'s hold: give it back now if no rename uses it, else when the last one ends."""
        b.recalled = True
        b.until = 0.0
        if not b.users:
            yield from self._give_back(path, b)  # (not now if busy: the hold's timer retries)

    # ------------------------------------------------------------------ the borrower
    def borrow(self, path: str) -> Gen:
        """Manage directory ``path``'s table here from now on (until
        ``release``): borrowed from its lender, or still held from an
        earlier rename (a hold hit).  EAGAIN if it is moving, if the bound
        of redistributions is reached, or if the lender refuses."""
        b = self.borrowed.get(path)
        if b is not None:
            if b.state != "held":
                raise fs_error(errno.EAGAIN, path, "the management of this directory is moving; try again")
            b.users += 1
            self.stats.hold_hits += 1
            return
        limit = self.config.redistribute_limit
        if limit and len(self.borrowed) >= limit:
            # tables only held (no rename uses them) make room: recalled, for the retry to find it
            for other, ob in list(self.borrowed.items()):
                if ob.state == "held" and not ob.users and not ob.recalled:
                    yield Spawn(self._recall(other, ob))
            raise fs_error(errno.EAGAIN, path, f"{limit} redistributions in flight here already; try again")
        lender, epoch = self.view.manager_of(path), self.epoch
        if lender == self.id:
            raise fs_error(errno.EAGAIN, path, "this node's own table is lent; try again")
        b = self.borrowed[path] = Borrow(lender, epoch)
        self.hints.pop(path)
        try:
            yield from self.call(lender, Lend(path, epoch))
        except PeerUnavailable:
            b.state = "returning"  # (lent or not: its reply may be what was lost)
            yield Spawn(self._give_back_later(path, b))
            raise
        except OSError as exc:
            if self.borrowed.get(path) is b:
                del self.borrowed[path]
            if exc.errno != errno.ESTALE:
                raise
            yield from self.fetch_view(lender)
            raise fs_error(errno.EAGAIN, path, "the view changed; try again") from None
        if self.borrowed.get(path) is not b:  # a view change voided it meanwhile
            raise fs_error(errno.EAGAIN, path, "the view changed; try again")
        b.state, b.users = "held", 1
        self.stats.redistributions += 1

    def release(self, path: str) -> Gen:
        """A rename that ``borrow``ed ``path`` ended: give the table back now
        (no hold), or once ``redistribute_hold`` seconds passed without
        another rename using it."""
        b = self.borrowed.get(path)
        if b is None or b.state != "held":
            return  # voided by a view change meanwhile
        b.users -= 1
        hold = 0.0 if b.recalled else self.config.redistribute_hold
        if hold > 0:
            b.until = (yield NOW) + hold
        elif not b.users and (yield from self._give_back(path, b)):
            return
        if not b.timer:
            b.timer = True
            yield Spawn(self._give_back_later(path, b))

    def _give_back(self, path: str, b: Borrow) -> Gen:
        """One attempt; True once the lender has the table again (or the
        view voided it).  Not while anything of it is in flight here."""
        if b.state == "held" and (b.users or (yield from self.table_busy(path))):
            return False
        b.state = "returning"
        self.vds.pop(path)
        self.dt.pop(path)
        self.dt_epoch += 1
        try:
            yield from self.call(b.lender, GiveBack(path, b.epoch, pack_holders(b.holders)))
        except PeerUnavailable:
            if b.lender in self.members:
                return False
        except OSError:
            pass  # (ESTALE: a view change voided it)
        if self.borrowed.get(path) is b:
            del self.borrowed[path]
        return True

    def _give_back_later(self, path: str, b: Borrow) -> Gen:
        """The hold's timer, and the retries of a ``GiveBack`` (or of a
        ``Lend`` whose reply was lost) that got no answer."""
        delay = REPAIR_FIRST_S
        while self.borrowed.get(path) is b:
            now = yield NOW
            if b.state == "held" and b.until > now:
                yield Sleep(b.until - now)
                continue
            if (yield from self._give_back(path, b)):
                return
            yield Sleep(delay)
            delay = min(2 * delay, REPAIR_MAX_S)


__all__ = ["Borrow", "Delegation", "GiveBack", "Lend", "Recall"]
