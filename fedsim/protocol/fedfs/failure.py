"""Crash detection, eviction and restart (issue 13, FedFS 3.3).

A node that crashes answers nothing; without this role it stays a member
forever, and every operation that needs it fails with PeerUnavailable.  Here
it is found out and the view changes without it:

* **Heartbeats.**  With ``heartbeat_s > 0`` every member runs a timer
  (``heartbeat_timer``: ``Sleep`` and a one-way ``Heartbeat(epoch)`` to its
  ``successor`` in the view), and watches its ``predecessor``: the ``Now`` of
  the last heartbeat it heard from it.  A predecessor silent for
  ``heartbeat_misses`` periods is *suspected*: ``Suspect(node, epoch)`` to the
  coordinator of the view without it (the lowest other member).  One message
  per member per period, whatever the federation's size.
* **The check.**  The coordinator, once it reached a majority of the
  other members, asks the suspect itself (a ``GetView`` ``Call``, the last
  step before the view change): a node that answers and still lists itself is alive (a slow link,
  a one-sided partition) and stays; one that does not answer, or answers from
  a fresh incarnation that lists itself no more (it restarted and lost its
  soft state), is *evicted*, provided the coordinator reaches a majority of
  the other members (a node cut off with a minority evicts nobody, or a
  partition would make two views of one epoch): ``evict(node)``, a view change without it
  (``Membership._change_view``, as a graceful leave).  The evicted node does
  not hand anything off: the names it managed are soft state, rebuilt by
  dirmerge at their new managers; the members drop its summary, the DT
  entries naming it a home and the VDs it held a part of, as for a leave.
  Its own files are unavailable until it rejoins (``replicas: 1``; with 2 the
  replication role promotes their secondaries).
* **Learning one is out.**  A node that installs a view without itself that
  it did not ask for (a partition healed: a ``ViewChange``, a redirect, or a
  member's answer to its heartbeat under an older epoch, which is that
  member's view) is ``evicted``: it stops its timer, drops its DT without
  handing it off (entries the members have since rebuilt, which a hand-off
  would overwrite with stale ones) and answers peers' requests, but for the
  view's own, with a PeerUnavailable naming itself (EHOSTDOWN): to them it
  is down.  The runtime restarts it
  (``restart``: a fresh object, ``recover``); an agent says so in its log
  and status.
* **Restart.**  A crashed node restarts as a fresh object over its old local
  tree and runs ``recover(seed)``: fetch the view; while it still lists this
  node, ask the coordinator to ``Evict`` it (it lost its soft state: its
  managed names, its VDs, its reservations); with ``replicas: 2`` reconcile
  the local tree (``Replication.reconcile``); then ``join``.  With
  ``replicas: 1`` its files simply come back with it.  Until its join the
  restarted node is down to its peers: it refuses all but the view's
  requests (a PeerUnavailable naming it), and takes no peer's view that
  lists it (``Membership.adopts``: that is its old incarnation's, whose
  eviction it would then take for its own); its join clears ``evicted``.
  An agent restarted with ``serve --join`` runs ``rejoin``, which recovers
  also when the federation no longer lists the node (evicted already) but
  its tree shows it was a member (``was_member``: with two copies, its
  replica space).

* **The read lease** (``replicas: 2``, ``heartbeat_misses >= 2``).  A node
  cut off by a partition never hears of its eviction, while its successor
  promotes its files and they take new writes: served from its own tree,
  its clients' reads would be stale.  So a member serves *its own clients*
  (requests from itself: its client operations' local calls, short-circuited
  in ``Node.call``) only while it has heard from the federation within
  ``LEASE = (heartbeat_misses - 1) * heartbeat_s``; past it such a request
  fails with a PeerUnavailable naming the node itself (EHOSTDOWN), which
  every client path already meets when a node is down (the requester's
  failover to the secondary, unreachable too when it is cut off, gives
  the client that error).  Renewals: a heartbeat from a member (stamped
  with the ``Now`` of its receipt), a view change from one (likewise), and
  a member's answer to a *ping* (a ``GetView`` to the successor, stamped
  with the ``Now`` it was sent: conservative), sent in the background by
  the timer, which checks the lease every half period, when nothing
  renewed it for a whole period: so a live node whose predecessor crashed
  (no heartbeat reaches it) keeps its lease.  Pings exist only on that
  failure path (a late heartbeat may cost one).  Why a cut-off node stops
  before any promotion: cut off at ``t``, its last renewal is at ``t`` at
  the latest (a message already on its way may still arrive: a transit
  time, far below the check's rpc timeout), so its lease ends by
  ``t + (misses - 1) * hb``; its successor heard its last heartbeat no
  earlier than ``t - hb`` (one goes every period), so suspects it no
  earlier than ``t + (misses - 1) * hb``, and the eviction (hence any
  promotion) follows the coordinator's check of it, which waits out an
  rpc timeout (in the in-memory runtime, which has no timeouts, the
  timers run in one phase: the successor's suspicion comes a whole period
  after the lease ended).  The clocks need the same rate, not the same
  time: every span is measured on one node's clock.  Peers' requests are
  served as before (a peer that reaches the node is not cut off from it;
  refusing them would make a node whose pings failed look down to all),
  and so are the membership protocol's own requests (``LEASE_FREE``: a
  node must evict its crashed peer to serve again, e.g. the survivor of
  two).  Background work that calls this node itself (a repair, a
  resync, a promotion's ``AddEntry`` to itself) meets the refusal as it
  meets a node that is down, and retries or leaves it to the next view
  change.  Limits: a member alone in its view needs no lease; with
  ``heartbeat_misses: 2`` the lease is one period, so a heartbeat a little
  late already lapses it for a moment (use 3 or more); the argument
  assumes the node and its successor agree on who is whose successor (a
  node that missed a view change and is cut off just then may be suspected
  by a new successor that never heard from it, before its lease ends), and
  at most one node cut off: two nodes cut off together from the majority
  renew each other's leases (outside the one-node-down promise, which
  their eviction breaks anyway).

A member that learns nodes have left the view remembers the most recent of
them (``absent``), so that a lookup that misses names them: "No such file or
directory (node 2 left the federation in view 5: its files are unavailable
until it rejoins)" (the errno stays ENOENT).

With ``heartbeat_s == 0`` (the default) nothing here runs: no timer, no
message; a crash is never detected.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from math import inf
from typing import Any, ClassVar

from fedsim.protocol.effects import NOW, Call, Multicast, Send, Sleep, Spawn
from fedsim.protocol.fedfs.membership import Join, Leave, Membership, ViewChange, ViewSettled
from fedsim.protocol.messages import PeerUnavailable, Request, fs_error, register_request
from fedsim.protocol.node import Gen, handles
from fedsim.protocol.view import GetView, View, check_contacts, check_epoch, check_members

#: how many times ``recover`` asks for its own eviction before giving up
RECOVER_TRIES = 8
#: how many departed nodes a member names in its lookups' ENOENT (``absent``)
ABSENT_KEPT = 32


def successor(members: tuple[int, ...], node: int) -> int:
    """The member after ``node`` in the sorted member list, wrapping (``node``
    itself when it is the only one)."""
    for m in members:
        if m > node:
            return m
    return members[0]


def predecessor(members: tuple[int, ...], node: int) -> int:
    """The member before ``node`` in the sorted member list, wrapping."""
    for m in reversed(members):
        if m < node:
            return m
    return members[-1]


@register_request
@dataclass(slots=True, frozen=True)
class Heartbeat(Request):
    """One-way, to the sender's successor every ``heartbeat_s``: "alive, at view ``epoch``"."""

    reply: ClassVar[Any] = None
    epoch: int


@register_request
@dataclass(slots=True, frozen=True)
class Suspect(Request):
    """``node`` was silent for ``heartbeat_misses`` periods (in view ``epoch``):
    the coordinator of the view without it checks it and evicts it if it does
    not answer.  Reply: whether it was evicted."""

    reply: ClassVar[Any] = bool
    node: int
    epoch: int


@register_request
@dataclass(slots=True, frozen=True)
class Evict(Request):
    """Drop ``node`` from view ``epoch`` without its participation (at the
    coordinator of the view without it): sent by a restarted node for its own
    old incarnation (``recover``), or by ``evict``.  Reply: the new view
    (epoch, members)."""

    reply: ClassVar[Any] = tuple[int, list[int]]
    node: int
    epoch: int


#: the requests an evicted node still answers: those that tell it the view
EVICTED_SERVES: tuple[type[Request], ...] = (GetView, ViewChange, ViewSettled, Heartbeat)
#: the requests a node serves itself past its read lease: the membership
#: protocol's own, which read no file or name (its eviction of a crashed peer
#: is what lets the survivor of two serve again)
LEASE_FREE: frozenset[type[Request]] = frozenset({*EVICTED_SERVES, Suspect, Evict, Join, Leave})


class FailureDetection(Membership):
    def __init__(self, node_id: int, spec: Any, **kw: Any) -> None:
        super().__init__(node_id, spec, **kw)
        #: member -> the ``Now`` of the last heartbeat heard from it
        self.last_heard: dict[int, float] = {}
        self._watched: tuple[int, float] | None = None  # (predecessor watched, since when)
        self._heartbeats = False  # a heartbeat_timer runs
        self._suspecting: set[int] = set()  # Suspects in flight from here
        self._clock = 0.0  # the last ``Now`` the timer saw (for ``describe``'s ages)
        #: the epoch of the view that dropped this node without its asking (None: not evicted)
        self.evicted: int | None = None
        self._view_seen: View | None = None  # the view ``_in_view`` was computed for (``handle``)
        self._in_view = False
        #: nodes that left the view (crashed, evicted, left) and have not come back -> that view's epoch
        self.absent: dict[int, int] = {}
        self.suspicions = 0  # Suspects this node sent
        self.evictions = 0  # evictions this node made as the coordinator
        c = self.config
        #: the read lease's length (module docstring); 0: no lease (one copy, or no heartbeats)
        self.lease_s = (c.heartbeat_misses - 1) * c.heartbeat_s if c.replicas == 2 else 0.0
        self.renewed = -inf  # the ``Now`` of the lease's last renewal (set as the timer starts)
        self._pinging = False  # a ping is in flight
        self.pings = 0  # pings this node sent to keep its lease
        self.refused = 0  # its own clients' requests it refused past its lease

    def describe(self) -> dict[str, Any]:
        out = {**super().describe(), "evicted": self.evicted}
        if self.config.heartbeat_s and self.member:
            pred = predecessor(self.members, self.id)
            heard = self.last_heard.get(pred)
            out["heartbeat"] = {
                "predecessor": pred,
                "last_heard_age_s": None if heard is None else round(max(self._clock - heard, 0.0), 3),
                "suspected": pred in self._suspecting,
                "suspicions": self.suspicions,
            }
            if self.lease_s:
                left = self.renewed + self.lease_s - self._clock
                out["heartbeat"]["lease"] = {
                    "left_s": round(max(left, 0.0), 3) if self._leasing else None,
                    "pings": self.pings,
                    "refused": self.refused,
                }
        if self.absent:
            out["absent"] = {str(n): e for n, e in self.absent.items()}
        return out

    # ------------------------------------------------------------------ the timer
    def start(self) -> Gen:
        result = yield from super().start()
        if self.config.heartbeat_s and self.member and not self._heartbeats:
            self._heartbeats = True
            yield Spawn(self.heartbeat_timer())
        return result

    def background(self) -> list[Gen]:
        return [*super().background(), *([self.heartbeat_timer()] if self.config.heartbeat_s else [])]

    def heartbeat_timer(self) -> Gen:
        """Every ``heartbeat_s``: a heartbeat to the successor, then the check
        of the predecessor.  Returns once this node is no member (it left or
        was evicted)."""
        self._heartbeats = True
        try:
            period = self.config.heartbeat_s
            if self.lease_s:
                self.renewed = self._clock = yield NOW  # the lease starts with the timer
            while self.member:
                succ = successor(self.members, self.id)
                if succ != self.id:
                    yield Send(succ, Heartbeat(self.epoch))
                if self.lease_s:  # the lease is checked every half period (see ``_keep_lease``)
                    yield Sleep(period / 2)
                    if not self.member:
                        return
                    yield from self._keep_lease((yield NOW))
                    yield Sleep(period / 2)
                else:
                    yield Sleep(period)
                if not self.member:
                    return
                now = self._clock = yield NOW
                yield from self._watch(now)
                if self.lease_s:
                    yield from self._keep_lease(now)
        finally:
            self._heartbeats = False

    @property
    def _leasing(self) -> bool:
        """Whether the read lease is in force here: two copies, heartbeats
        (``lease_s``), and a member whose heartbeat timer runs."""
        return self._heartbeats and self.lease_s > 0

    def _renew(self, when: float) -> None:
        if when > self.renewed:
            self.renewed = when

    def _keep_lease(self, now: float) -> Gen:
        """Ping the successor if nothing renewed the lease for a whole period
        (checked every half period, the ping leaves at least half a period
        before the lease ends with ``heartbeat_misses: 3``; checked once per
        period, the heartbeats' phase could leave it a transit time)."""
        self._clock = now
        if now - self.renewed > self.config.heartbeat_s and not self._pinging:
            succ = successor(self.members, self.id)
            if succ != self.id:
                self._pinging = True
                self.pings += 1
                yield Spawn(self._ping(succ, now))

    def _ping(self, node: int, sent: float) -> Gen:
        """A ``GetView`` to ``node`` (a background generator of its own: an
        unanswered ping waits out an rpc timeout, and the heartbeats go on
        meanwhile).  An answer from a member that counts this node one
        renews the lease as of ``sent``; a newer view is installed (one
        without this node: it was evicted, and learns it here)."""
        try:
            epoch, members, contacts = yield Call(node, GetView())
            members = check_members(members)
            if self.id in members:
                self._renew(sent)
            if epoch > self.epoch:
                view = self.view.adopt(epoch, members, check_contacts(contacts, members))
                if self.adopts(view):
                    yield from self.install_view(view)
        except OSError:
            pass  # unanswered: pinged again at the next check
        finally:
            self._pinging = False

    def _watch(self, now: float) -> Gen:
        """Suspect the predecessor if it was silent ``heartbeat_misses``
        periods (counted from when it became the predecessor, at the latest)."""
        pred = predecessor(self.members, self.id)
        if pred == self.id:
            return
        if self._watched is None or self._watched[0] != pred:
            self._watched = (pred, now)  # a new predecessor gets the full grace
        heard = max(self.last_heard.get(pred, -inf), self._watched[1])  # never heard: since it was watched
        c = self.config
        if now - heard >= c.heartbeat_misses * c.heartbeat_s and pred not in self._suspecting:
            self._watched = (pred, now)  # not again before another full grace
            self._suspecting.add(pred)
            self.suspicions += 1
            yield Spawn(self._suspect(pred, self.epoch))

    def _suspect(self, node: int, epoch: int) -> Gen:
        """Tell the coordinator of the view without ``node`` (a background
        generator of its own: the check may wait out an rpc timeout, and the
        heartbeats must go on meanwhile)."""
        coordinator = next(m for m in self.members if m != node)
        try:
            yield from self.call(coordinator, Suspect(node, epoch))
        except OSError as exc:
            if exc.errno == errno.ESTALE:  # this node missed a view change: learn it
                try:
                    yield from self.fetch_view(coordinator)
                except OSError:
                    pass
            # else (the coordinator busy or unreachable): suspected again after another grace
        finally:
            self._suspecting.discard(node)

    @handles(Heartbeat)
    def on_heartbeat(self, src: int, req: Heartbeat) -> Gen:
        """Note the sender alive; a sender under an older view (it missed a
        change, or it was evicted meanwhile) is sent the current one; a newer
        epoch is fetched from it."""
        if src in self.members:
            self.last_heard[src] = now = yield NOW
            self._renew(now)
        if req.epoch > self.epoch:
            try:
                yield from self.fetch_view(src)
            except OSError:
                pass  # learnt from the next request or heartbeat
        elif req.epoch < self.epoch:
            yield Send(src, ViewChange(self.epoch, self.view.to_bytes()))

    @handles(ViewChange)
    def on_view_change(self, src: int, req: ViewChange) -> Gen:
        """A view change from a member renews the lease, as a heartbeat does."""
        if self.lease_s and src != self.id and src in self.members:
            self._renew((yield NOW))
        return (yield from super().on_view_change(src, req))

    # ------------------------------------------------------------------ eviction, at the coordinator
    def _evictable(self, node: int) -> tuple[int, ...]:
        """The members without ``node``: ENOENT unless it is a member, EINVAL if it is the last one."""
        if node not in self.members:
            raise fs_error(errno.ENOENT, "/", f"node {node} is not a member (view {self.epoch}: {list(self.members)})")
        rest = tuple(m for m in self.members if m != node)
        if not rest:
            raise fs_error(errno.EINVAL, "/", f"node {node} is the last member; a federation cannot be empty")
        return rest

    def evict(self, node: int) -> Gen:
        """Drop ``node`` from the view without its participation (a view change
        at the coordinator of the view without it; asked there with ``Evict``
        from any other member).  Returns the new view (epoch, members)."""
        if node == self.id:
            raise fs_error(errno.EINVAL, "/", f"node {node} cannot evict itself; a member leaves (leave)")
        return (yield from self.on_evict(self.id, Evict(node, self.epoch)))

    @handles(Evict)
    def on_evict(self, src: int, req: Evict) -> Gen:
        rest = self._evictable(req.node)
        if self.id != rest[0]:
            return (yield from self.call(rest[0], req))
        check_epoch(req, self.view)
        yield from self._quorum(rest)
        if req.node not in self.members or self.epoch != req.epoch:
            raise fs_error(errno.ESTALE, "/", f"the view changed while node {req.node}'s eviction was checked")
        self.evictions += 1
        return (yield from self._change_view(self.view.changed(rest)))

    @handles(Suspect)
    def on_suspect(self, src: int, req: Suspect) -> Gen:
        node = req.node
        if node == src:
            raise fs_error(errno.EINVAL, "/", f"node {src} cannot suspect itself")
        if node == self.id:
            raise fs_error(errno.EINVAL, "/", f"node {node} is answering this very request: it has not crashed")
        rest = self._evictable(node)
        if self.id != rest[0]:
            return (yield from self.call(rest[0], req))
        check_epoch(req, self.view)
        # The majority first, the suspect last: the check of the suspect is
        # the evidence the eviction acts on, so nothing that may wait out a
        # timeout comes between it and the view change (asked first, a
        # suspect cut off by a partition that healed while the quorum's
        # calls timed out was evicted alive; two coordinators, each on its
        # side, made two views of one epoch: found by the dynamics property).
        yield from self._quorum(rest)
        if (yield from self._alive(node)):
            return False
        if node not in self.members or self.epoch != req.epoch:
            return False  # the view changed while the check waited (it left, or was evicted already)
        self.evictions += 1
        yield from self._change_view(self.view.changed(rest))
        return True

    def _quorum(self, rest: tuple[int, ...]) -> Gen:
        """EHOSTDOWN unless this node reaches a strict majority of ``rest``
        (the view without the node to evict), itself included: a node cut
        off with a minority (a partition) must not evict the majority's
        members, or two views of one epoch would exist.  (Two members cut in
        two halves cannot tell a partition from a crash: each reaches one of
        one, and both evict the other.)"""
        others = tuple(m for m in rest if m != self.id)
        reached = 1
        if others:
            replies = yield Multicast(others, GetView())
            reached += sum(1 for r in replies if not isinstance(r, BaseException))
        if 2 * reached <= len(rest):
            raise fs_error(
                errno.EHOSTDOWN,
                "/",
                f"node {self.id} reaches {reached} of the {len(rest)} other members: a minority evicts nobody",
            )

    def _alive(self, node: int) -> Gen:
        """Whether ``node`` answers and still counts itself a member (a fresh
        incarnation that does not has lost its soft state: it must go)."""
        try:
            _epoch, members, _contacts = yield Call(node, GetView())
        except PeerUnavailable:
            return False
        except OSError:
            return True  # it answered, with an error
        return node in members

    # ------------------------------------------------------------------ views
    def install_view(self, view: View) -> Gen:
        if view.epoch > self.epoch:
            gone = set(self.members) - set(view.members)
            for n in view.members:
                self.absent.pop(n, None)
            for g in sorted(gone):
                self.last_heard.pop(g, None)
                if g != self.id:
                    self.absent[g] = view.epoch
            while len(self.absent) > ABSENT_KEPT:
                del self.absent[next(iter(self.absent))]  # the oldest
            if not self.member and self.id in view.members:
                self.evicted = None  # its own join (``adopts``): a member again, serving
            elif self.member and self.id in gone and not self._leaving:
                # Evicted (a partition healed, a slow node): what it managed
                # was rebuilt at the new managers meanwhile; handing its DT
                # off would overwrite their entries with stale ones.
                self.evicted = view.epoch
                for p in self.dt.keys():
                    self.dt.pop(p)
                self.dt_epoch += 1
        yield from super().install_view(view)

    def handle(self, src: int, request: Request) -> Gen:
        """Not a generator of its own (no extra frame on every request's
        path): the chain's, or the refusal of a node that is out: evicted,
        or no member and not joining (a restarted node before its join:
        the members may still list its old incarnation, but it holds no
        view of its own to serve or redirect by, and its tree is not
        reconciled yet).  A node that left gracefully still redirects.
        A request of this node's own (its clients') past its read lease is
        refused (``_within_lease``)."""
        t = type(request)
        if t not in EVICTED_SERVES:
            if self.evicted is not None:
                return self._refuse()
            view = self.view
            if view is not self._view_seen:  # membership looked up once per view, not per request
                self._view_seen, self._in_view = view, self.id in view.members
            if not self._in_view and self._joining is None and not self._leaving:
                return self._refuse_outsider()
        if src == self.id and self._heartbeats and self.lease_s and t not in LEASE_FREE:
            return self._within_lease(src, request)
        return super().handle(src, request)

    def _within_lease(self, src: int, request: Request) -> Gen:
        """Serve this node's own request if its read lease holds (or it is
        alone in its view: nobody could have promoted its files); else a
        PeerUnavailable naming it, as if it were down (module docstring)."""
        now = yield NOW
        heard = now - self.renewed
        if heard >= self.lease_s and len(self.members) > 1:
            self.refused += 1
            raise PeerUnavailable(
                self.id,
                f"node {self.id} heard from no member for {heard:.3g} s (read lease {self.lease_s:g} s): it may "
                "be cut off from the federation, whose members may have promoted its files; it serves its "
                "clients again once it hears from one",
            )
        return (yield from super().handle(src, request))

    def _refuse_outsider(self) -> Gen:
        raise PeerUnavailable(
            self.id, f"not a member (restarting, view {self.epoch}); it serves its peers once it has joined"
        )
        yield

    def _refuse(self) -> Gen:
        """A PeerUnavailable naming this node (EHOSTDOWN): to its peers an
        evicted node is a node that is down, and every handler that copes
        with one (a retry, a failover to the secondary, a resync) copes
        with this refusal too."""
        raise PeerUnavailable(
            self.id,
            f"evicted from the federation in view {self.evicted}; it serves nothing until it is restarted and rejoins",
        )
        yield

    def _lookup(self, path: str) -> Gen:
        """A miss names the nodes whose files are unavailable (``absent``).
        Not a generator of its own while nobody is absent (no extra frame on
        every lookup's path)."""
        if not self.absent:
            return super()._lookup(path)
        return self._lookup_naming_absent(path)

    def _lookup_naming_absent(self, path: str) -> Gen:
        try:
            return (yield from super()._lookup(path))
        except FileNotFoundError as exc:
            if not self.absent:
                raise
            gone = "; ".join(
                f"node {n} left the federation in view {e}: its files are unavailable until it rejoins"
                for n, e in self.absent.items()
            )
            raise fs_error(errno.ENOENT, path, f"{exc.strerror} ({gone})") from None

    # ------------------------------------------------------------------ restart
    def rejoin(self, seed: int, contact: str = "") -> Gen:
        """What a node started to join a running federation does (the agent's
        ``serve --join``): ``join``, or ``recover`` when it comes back after a
        crash: ``seed``'s view still lists this node (its process was killed
        and started again before it was found out), or its local tree shows
        it was a member (``was_member``: it was evicted meanwhile, and its
        tree must be reconciled before it joins, or its stale files would
        come back beside their promoted copies)."""
        _epoch, members, _contacts = yield Call(seed, GetView())
        if self.id in check_members(members) or (yield from self.was_member()):
            return (yield from self.recover(seed, contact))
        return (yield from self.join(seed, contact))

    def was_member(self) -> Gen:
        """Whether this node's local tree shows it was a member before (the
        replication role's replica space says so); a plain tree cannot tell,
        and needs no reconcile."""
        return False
        yield

    def recover(self, seed: int, contact: str = "") -> Gen:
        """Come back after a crash: this node is a fresh object over the old
        local tree (built with a view that does not name it).  While member
        ``seed``'s view still lists it, ask the coordinator to evict the old
        incarnation; with ``replicas: 2`` reconcile the local tree
        (``Replication.reconcile``); then ``join``.  Returns the new epoch."""
        if self.member:
            raise fs_error(errno.EEXIST, "/", f"node {self.id} is already a member (view {self.epoch})")
        delay = self.config.heartbeat_s or self.config.summary_retry_s
        reconciled = self.config.replicas != 2 or getattr(self, "reconcile", None) is None
        last = RECOVER_TRIES - 1
        for attempt in range(RECOVER_TRIES):
            epoch, members, _contacts = yield Call(seed, GetView())
            members = check_members(members)
            try:
                if self.id in members:
                    rest = [m for m in members if m != self.id]
                    if not rest:
                        raise fs_error(
                            errno.EINVAL, "/", f"node {self.id} was the only member; start it as the federation"
                        )
                    yield Call(rest[0], Evict(self.id, epoch))
                    seed = rest[0]  # the coordinator holds the view it made
                    continue
                if not reconciled:
                    yield from self.reconcile(seed)  # type: ignore[attr-defined]
                    reconciled = True
                return (yield from self.join(seed, contact))
            except OSError as exc:
                # a view change in flight (EAGAIN), one made meanwhile (ESTALE), an
                # eviction made already (ENOENT), a seed that missed it (EEXIST)
                if exc.errno not in (errno.ESTALE, errno.EAGAIN, errno.ENOENT, errno.EEXIST) or attempt == last:
                    raise
            yield Sleep(delay)
            delay *= 2
        raise fs_error(errno.EAGAIN, "/", f"node {seed} still lists node {self.id} after {RECOVER_TRIES} evictions")


__all__ = ["Evict", "FailureDetection", "Heartbeat", "Suspect", "predecessor", "successor"]
