"""The summary role: this node's Bloom summary of its local directory tree,
its copies of every other member's, and the periodic work that keeps them
current (FedFS 2.2).

Summaries are soft state: each node rebuilds its own from its local tree and
pushes it to the members when it starts, whenever it changed at a refresh,
and again (with backoff) to members that did not acknowledge it, since peers
start in any order.  A *fresh* push (a node starting, or restarting) is
answered with the receiver's own summary, so a node that joins or comes back
learns every summary in one round without waiting for anyone's refresh.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fedsim.protocol.effects import NOW, Compute, Local, Multicast, Sleep, Spawn
from fedsim.protocol.fedfs.stats import FedStats
from fedsim.protocol.messages import PeerUnavailable, SummaryAdd, SummaryPush
from fedsim.protocol.names import ROOT, is_reserved
from fedsim.protocol.node import Gen, Node, handles
from fedsim.protocol.summary import BloomSummary
from fedsim.protocol.tables import LRU, VirtualDirectory


class Summaries(Node):
    vds: LRU[str, VirtualDirectory]  # the directory role's VD cache, which summaries invalidate
    STATS = FedStats  # what only FedFS counts (the bottom of its chain of roles: every role counts in it)
    stats: FedStats

    def counters(self) -> dict[str, float]:
        return {**super().counters(), **self.stats.counters()}

    def __init__(self, node_id: int, spec: Any, **kw: Any) -> None:
        super().__init__(node_id, spec, **kw)
        self.summaries: dict[int, BloomSummary] = {}
        self._shared: set[int] = set()  # summaries shared with other nodes (copy on write)
        self._pushed: bytes | None = None  # the summary last sent to the members
        # ... and the one every member was sent (a push ``to`` a few, at a
        # view change, leaves the others with an older one: see regenerate_summary)
        self._pushed_all: bytes | None = None
        self.summary_unacked: set[int] = set()  # members that have not acknowledged it
        self._timer_running = False  # a summary_timer is running (one per node)
        # SummaryAdds for a node whose summary has not arrived yet (a joiner's
        # new manager hears them before the summary its fresh push brings):
        # applied when it comes, so the summary does not lack them.  Bounded.
        self.early_adds: dict[int, set[str]] = {}

    def new_summary(self) -> BloomSummary:
        c = self.config
        return BloomSummary(c.summary_bits, c.summary_hashes, c.summary_layout)

    def start(self) -> Gen:
        """Summarise the local directory tree and send it to every other member
        (FedFS 2.2: "when the cluster is first established or when the node
        joins"); then keep it current in the background (``summary_timer``)."""
        yield from self.regenerate_summary(push=True, fresh=True)
        yield from self.keep_summary_current()

    def keep_summary_current(self) -> Gen:
        """Run ``summary_timer`` unless it runs already or has nothing to do."""
        if not self._timer_running and (self.summary_unacked or self.config.summary_refresh_s):
            self._timer_running = True
            yield Spawn(self.summary_timer())

    def background(self) -> list[Gen]:
        return [*super().background(), self.summary_timer()]

    @property
    def ready(self) -> bool:
        """Every member's summary is here (dirmerge may need any of them)."""
        return len(self.summaries) == len(self.members)

    def prepare(self) -> Gen:
        yield from self.regenerate_summary(push=False)

    def adopt(self, other: Node) -> None:
        self.install_summary(other.id, other.summaries[other.id])  # type: ignore[attr-defined]

    def prepared(self) -> None:
        self.summary_unacked.clear()  # every member holds it now

    def regenerate_summary(
        self, push: bool = True, fresh: bool = False, to: Callable[[list[str]], set[int]] | None = None
    ) -> Gen:
        """Rebuild this node's summary from its local tree (drops the false
        positives that deleted directories left behind) and, with ``push``,
        send it to every member that has not acknowledged this version.
        ``to(local directories)``: the members that need a changed summary
        (default: every member)."""
        dirs = [d for d in (yield Local("list_dirs", ROOT)) if not is_reserved(d)]  # (not the namespace's)
        summary = self.new_summary()
        summary.add_many(dirs)
        yield Compute("bloom_insert", len(dirs))
        self.summaries[self.id] = summary
        self._shared.discard(self.id)
        data = summary.to_bytes()
        # With ``to``, compared with what every member was sent: a directory
        # made since then reached only its manager's copy, and if a first
        # view change did not move its manager (so it was not pushed), a
        # later one that does must push it to the new manager although the
        # summary has not changed since the first (found by the migrating
        # leaves' property test: a moved file's implicit directory, missing
        # from its new manager's merges).
        if data != (self._pushed if to is None else self._pushed_all) or fresh:
            self._pushed = data
            need = set(self.members) if to is None else to(dirs) | self.summary_unacked
            self.summary_unacked = {m for m in need if m != self.id}
            if to is None:
                self._pushed_all = data
        if push:
            yield from self._push_summary(fresh)
        return data

    def _push_summary(self, fresh: bool) -> Gen:
        todo = tuple(sorted(self.summary_unacked))
        if not todo or self._pushed is None:
            return
        replies = yield Multicast(todo, SummaryPush(self.id, self._pushed, fresh))
        for node, reply in zip(todo, replies, strict=True):
            if isinstance(reply, BaseException):
                continue  # retried by the timer
            self.summary_unacked.discard(node)
            if type(reply) is bytes:
                # A reply to a fresh push, merged into what is here: the
                # multicast waits for every reply, and a SummaryAdd that the
                # replier sent after answering may have arrived first.
                self.install_summary(node, reply, merge=True)

    def summary_timer(self) -> Gen:
        """The summary's periodic work: re-push to members that did not
        acknowledge it (backoff from ``summary_retry_s`` to
        ``summary_retry_max_s``), and every ``summary_refresh_s`` re-summarise
        the local tree and drop VDs older than ``vd_max_age_s``.  Returns when
        there is nothing left to do (no refresh configured, everyone acked)."""
        try:
            yield from self._summary_timer()
        finally:
            self._timer_running = False

    def _summary_timer(self) -> Gen:
        c = self.config
        backoff = c.summary_retry_s
        now = yield NOW
        next_refresh = now + c.summary_refresh_s
        while True:
            if self.summary_unacked:
                wait = min(backoff, next_refresh - now) if c.summary_refresh_s else backoff
                backoff = min(2 * backoff, c.summary_retry_max_s)
            elif c.summary_refresh_s:
                wait, backoff = next_refresh - now, c.summary_retry_s
            else:
                return
            yield Sleep(max(wait, 0.0))
            now = yield NOW
            if c.summary_refresh_s and now >= next_refresh:
                next_refresh = now + c.summary_refresh_s
                self.age_vds(now)
                yield from self.regenerate_summary(push=False)
            if self.summary_unacked:
                yield from self._push_summary(fresh=False)

    def age_vds(self, now: float) -> None:
        """Evict cached VDs older than ``vd_max_age_s`` (they would be rebuilt
        on their next use anyway; evicting them bounds what stale state a
        quiet node keeps)."""
        age = self.config.vd_max_age_s
        if not age:
            return
        vds = self.vds
        for d in [d for d in vds.keys() if now - vds.peek(d).built > age]:
            vds.pop(d)

    def install_summary(self, node: int, data: bytes | BloomSummary, merge: bool = False) -> None:
        """Adopt ``node``'s summary.  A summary from a node this one had none
        for (a join) invalidates the cached VDs it may contribute to, so the
        next access re-merges them with the newcomer.  ``merge`` keeps what
        is already here too (a union: Bloom summaries only grow between two
        full pushes, so at worst a false positive until the next refresh).

        A ``BloomSummary`` object (rather than bytes) is shared, not copied:
        a runtime that preloads one summary into a thousand nodes pays for one
        array; the first SummaryAdd to this node's copy copies it."""
        if isinstance(data, BloomSummary):
            summary = data
            self._shared.add(node)
        else:
            summary = BloomSummary.from_bytes(data)
            self._shared.discard(node)
        known = node in self.summaries
        if merge and known:
            summary = summary.union(self.summaries[node])
            self._shared.discard(node)
        early = self.early_adds.pop(node, None)
        if early:
            if node in self._shared:
                summary = summary.copy()
                self._shared.discard(node)
            summary.add_many(sorted(early))
        self.summaries[node] = summary
        if not known and len(self.vds):
            # FedFS 3.3: a VD that predates the newcomer merges with it only,
            # on its next use (``Directory.ensure_vd``).
            for d in self.vds.keys():
                if summary.may_contain(d):
                    self.vds.peek(d).missing.add(node)

    @handles(SummaryPush)
    def on_summary_push(self, src: int, req: SummaryPush) -> bytes | None:
        """Adopt a member's summary; answer a fresh one (a member starting)
        with this node's own, which it then holds too."""
        self.install_summary(req.node, req.summary)
        if not req.fresh or self._pushed is None:
            return None
        self.summary_unacked.discard(req.node)
        # The current summary, not the last full push: directories made
        # since reached only their managers' copies (``summary_add``), and
        # the node starting or joining may manage some of them now.
        own = self.summaries.get(self.id)
        return self._pushed if own is None else own.to_bytes()

    def summary_add(self, path: str, new_dir: bool, sure: bool = False) -> Gen:
        """This node now holds local directory ``path``: tell its manager.
        ``sure``: by an acknowledged call whose failure is the caller's (a
        directory rename's prepare, which must not commit while a manager
        may not know of a holder: ``rename.py``), not retried behind it."""
        if self.manager_of(path) != self.id:  # else on_summary_add updates it
            own = self.summaries.get(self.id)
            if own is not None:
                if self.id in self._shared:
                    own = self.summaries[self.id] = own.copy()
                    self._shared.discard(self.id)
                own.add(path)
        m = self.manager_of(path)
        if sure:
            yield from self.call(m, SummaryAdd(path, self.id, new_dir))
            return
        try:
            yield from self.notify(m, SummaryAdd(path, self.id, new_dir))
        except PeerUnavailable:
            # Bloom summaries only grow by this, so it may come late and
            # twice; but not as ``new_dir`` (the directory may be gone by
            # then: an empty VD must not be made for it).
            yield Spawn(self._summary_add_later(m, SummaryAdd(path, self.id, False)))

    def _summary_add_later(self, m: int, req: SummaryAdd) -> Gen:
        delay = self.config.summary_retry_s or 0.05
        while True:
            yield Sleep(delay)
            if not self.member:
                return  # this node left: nobody merges its directories any more
            m = self.manager_of(req.path)  # (the view may have changed: the manager that was down may be gone)
            try:
                yield from self.notify(m, req)
                return
            except PeerUnavailable:
                delay = min(2 * delay, self.config.summary_retry_max_s or 5.0)
