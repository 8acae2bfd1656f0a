"""Directory-table coherence policies for FedFS (``protocol: dt_coherence:``): how a
requester's DT entries for names managed elsewhere are kept coherent with the names'
managers.  Issue 25 asks for dNFSp's two metadata coherence schemes (the dNFSp paper,
004_... in the papers, section 3, "metadata coherence") beside FedFS's own:

* ``lazy`` (FedFS 3.2, the default): a requester caches what its lookups at a manager
  answered and uses it until it fails: a stale entry shows up as ENOENT or ESTALE from
  the old home, is dropped and asked again at the manager (``Requester._at_home``).
  Nothing is sent to keep entries coherent; this policy runs no code of its own, so
  every pinned number of the lazy federation is unchanged.

* ``dnfsp1`` (the paper's dNFSp1, "lazy release consistency": a meta-server that misses
  a name asks every other meta-server, no further synchronisation).  The mapping: a
  requester whose DT misses a name it does not manage asks every other member at once
  (``DtFetch``, one ``Multicast``) for its DT entry and copies the first one found, in
  member order; only if nobody has one does it ask the name's manager (FedFS's paths
  2-4).  No further synchronisation: a copy is taken from whichever node had the name,
  which may itself hold a stale entry (one cached before a migration, a rename or an
  unlink elsewhere), and is never updated.  So dNFSp1 promises only what ``lazy``
  promises, per use: a stale copy is found on use (the old home answers ENOENT or
  ESTALE) and the manager is asked then; and it may *spread* a stale entry to a node
  that never had one (``tests/test_dt_coherence.py`` checks exactly that).  Its cost:
  every miss is ``n - 1`` requests (the paper's O(n) cost in Fig. 3), against one.

* ``dnfsp2`` (the paper's dNFSp2: a hash server per name holds its ownership token; the
  holder answers without a round trip; the hash server arbitrates transfers).  The
  mapping: a name's hash server is its FedFS manager (FedFS already hashes each name to
  one node, which holds its exact DT entry).  A requester's DT entry for a name managed
  elsewhere is used only while it holds the name's token (``trusted``), and then
  without any message, as a dNFSp2 holder does.  A requester without the token asks the
  manager (``DtToken``, in place of the lazy ``HomeInfo``: the same one round trip);
  the manager answers the entry and makes the requester the holder, taking the token
  back from the previous holder first if there was one (``DtRecall``, the transfer the
  hash server arbitrates).  One holder at a time, as in dNFSp2; the paper's new holder
  fetches the metadata from the old one, but in FedFS the manager already holds the
  exact entry (the old holder's is only a copy of it), so the hash server's reply
  carries it and the transfer is only the old holder giving the token up.
  The promise: any change of a name's entry at its manager (a migration's switch, an
  unlink's ``Forget``, a rename, an rmdir, a settle) takes the token back before the
  request that made the change is answered (``Coherence.handle``), so once a migration,
  unlink or rename has completed no holder's DT names the old home: a holder never
  serves a stale entry after the change.  A use racing the change itself may still
  reach the old home, which answers ENOENT or ESTALE, and the requester asks again
  (the lazy fallback, kept).  Bounds: a manager records at most ``dt_entries`` holders
  (past that it answers without a token: that requester asks again on every use, which
  is coherent); a requester's tokens are bounded by its managers' records.  What it does
  not cover (the paper has no membership changes): a view change drops every token and
  holder record at each node as it installs the view, so while a view change is being
  installed an entry may be served stale (found on use, as with ``lazy``); a holder that
  does not answer a recall is dropped from the record (with heartbeats on it is then
  evicted; one partitioned but alive may serve its stale entry until it uses it).  With
  ``async_dir_updates`` an unlink's ``Forget`` is one-way, so the recall may follow the
  unlink's reply.  With ``rename: redistribute`` a directory's table is lent to another
  node for a while (``fedfs/delegation.py``); tokens are recorded where ``DtToken`` was
  served and changes recalled where they are made, so a name changed while its
  directory is lent may be served stale until it is used (not covered: the paper has no
  redistribution).

The ``dt_coherence`` study (``experiments/dt_coherence.py``) measures the three side by
side: messages per operation and stale entries used, without and with migration.

A policy is a class registered in ``DT_COHERENCES``, built once per node with the node
(``factory(node)``); the FedFS node calls its hooks (``fedsim.protocol.fedfs.coherence``).
The same class runs in every runtime.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from fedsim.protocol.effects import Multicast
from fedsim.protocol.messages import PeerUnavailable, ProtocolError, Request, fs_error, register_request
from fedsim.protocol.names import normalize
from fedsim.protocol.node import Gen
from fedsim.protocol.registry import Registry
from fedsim.protocol.tables import DIR_ENTRY, DTEntry


@register_request
@dataclass(slots=True, frozen=True)
class DtFetch(Request):
    """dnfsp1: a requester that misses ``path`` in its DT asks every other member.
    Reply: the home its DT names for the file, or None (no entry, or a directory)."""

    callback: ClassVar[bool] = True  # never waits (a DT lookup)
    reply: ClassVar[Any] = int | None
    path: str


@register_request
@dataclass(slots=True, frozen=True)
class DtToken(Request):
    """dnfsp2: at the name's manager (its hash server), where ``path`` lives and its token
    for the sender.  Reply: (is_dir, home, lookup path, whether the token is the sender's now)."""

    route: ClassVar[str | None] = "path"
    reply: ClassVar[Any] = tuple[bool, int | None, int, bool]
    path: str
    epoch: int = 0  # the sender's view (``route``)


@register_request
@dataclass(slots=True, frozen=True)
class DtRecall(Request):
    """dnfsp2: from the name's manager to the holder of ``path``'s token: give it up (and
    drop the DT entry it vouched for).  Reply: None."""

    callback: ClassVar[bool] = True  # never waits: the manager's change waits for it
    reply: ClassVar[Any] = None
    path: str


class DtCoherence:
    """``lazy``: FedFS's own scheme, and the hooks every policy has (each a no-op here:
    no effect, so the lazy federation's messages and numbers are exactly as before)."""

    name: ClassVar[str] = "lazy"
    #: whether the manager's DT reports its changes (``changed``)
    watches: ClassVar[bool] = False

    def __init__(self, node: Any) -> None:
        self.node = node
        #: DT entries this node used and found stale (the old home answered ENOENT or ESTALE;
        #: not an open descriptor following its file).  Under every policy; reported in
        #: ``counters`` by the others only (lazy's counters stay as they were before policies)
        self.stale_entries = 0

    def trusted(self, path: str) -> bool:
        """Whether the requester may use its DT entry of ``path`` without asking anyone."""
        return True

    def miss(self, path: str) -> Gen:
        """On a DT miss, before the manager is asked: an entry found elsewhere, or None."""
        return None
        yield

    def at_manager(self, path: str) -> Gen:
        """The lookup at ``path``'s manager (FedFS's paths 2-4): its DTEntry."""
        return (yield from self.node.home_info(path))

    def changed(self, path: str, entry: DTEntry | None) -> None:
        """The manager's DT entry of ``path`` became ``entry`` (None: dropped)."""

    def after(self) -> Gen:
        """Run after every request this node handled (what its changes owe the holders)."""
        return None
        yield

    def view_changed(self) -> None:
        """This node installed a newer view."""

    def counters(self) -> dict[str, float]:
        return {}

    # The requests of the other policies: refused (every member runs the same policy).
    def on_fetch(self, src: int, req: DtFetch) -> Any:
        raise self._refused(req)

    def on_token(self, src: int, req: DtToken) -> Gen:
        raise self._refused(req)
        yield

    def on_recall(self, src: int, req: DtRecall) -> None:
        raise self._refused(req)

    def _refused(self, req: Any) -> OSError:
        return fs_error(errno.EINVAL, req.path, f"{type(req).__name__} is not part of dt_coherence {self.name!r}")


#: DT coherence policies by the name a config uses: ``factory(node)``.
DT_COHERENCES: Registry[Callable[[Any], DtCoherence]] = Registry("dt coherence policy")
DT_COHERENCES.add("lazy", DtCoherence)


def _peer_path(node: Any, src: int, path: str) -> None:
    """A coherence request from the wire: from a member, on a canonical name."""
    if src not in node.members or normalize(path) != path:
        raise fs_error(errno.EINVAL, path, f"no DT coherence request from {src} on this name")


@DT_COHERENCES.register("dnfsp1")
class Dnfsp1(DtCoherence):
    """On a miss, ask every other member; no further synchronisation (module docstring)."""

    name = "dnfsp1"

    def __init__(self, node: Any) -> None:
        super().__init__(node)
        self.fetches = 0  # misses sent to every other member
        self.fetch_hits = 0  # ... that another member answered

    def miss(self, path: str) -> Gen:
        node = self.node
        if node.manager_of(path) == node.id:
            return None  # this node's own DT is the authority: paths 3-4 follow
        others = tuple(m for m in node.members if m != node.id)
        if not others:
            return None
        self.fetches += 1
        for reply in (yield Multicast(others, DtFetch(path))):
            if type(reply) is int and reply in node.members:  # (a peer's reply is untrusted)
                self.fetch_hits += 1
                entry = DTEntry(False, reply)
                node.dt.put(path, entry)
                return entry
        return None

    def on_fetch(self, src: int, req: DtFetch) -> int | None:
        node = self.node
        _peer_path(node, src, req.path)
        e = node.dt.peek(req.path)
        return None if e is None or e.is_dir else e.home

    def counters(self) -> dict[str, float]:
        return {"dt_fetches": self.fetches, "dt_fetch_hits": self.fetch_hits, "dt_stale_entries": self.stale_entries}


@DT_COHERENCES.register("dnfsp2")
class Dnfsp2(DtCoherence):
    """A name's manager holds its token; the holder's entry is used without a message; every
    change at the manager takes the token back first (module docstring)."""

    name = "dnfsp2"
    watches = True

    def __init__(self, node: Any) -> None:
        super().__init__(node)
        #: at a requester: the names whose token it holds
        self.tokens: set[str] = set()
        #: at a manager: name -> (its token's holder, the home it was given)
        self.holders: dict[str, tuple[int, int | None]] = {}
        self.pending: dict[str, int] = {}  # at a manager: names changed whose holder must give the token up
        self.asking: dict[str, int] = {}  # at a requester: DtTokens in flight per name
        self.recalled: set[str] = set()  # ... recalled while one was in flight (its grant is void)
        self.grants = 0
        self.transfers = 0
        self.recalls = 0

    def trusted(self, path: str) -> bool:
        return path in self.tokens or self.node.manager_of(path) == self.node.id

    def at_manager(self, path: str) -> Gen:
        node = self.node
        m = node.manager_of(path)
        if m == node.id:
            return (yield from node.home_info(path))
        self.asking[path] = self.asking.get(path, 0) + 1
        try:
            reply = yield from node._busy(lambda: node.call(m, DtToken(path)))
        finally:
            self.asking[path] -= 1
            if not self.asking[path]:
                del self.asking[path]
        if not isinstance(reply, (tuple, list)) or len(reply) != 4:  # (a peer's reply is untrusted: checked below too)
            raise ProtocolError(f"DtToken reply for {path}: {reply!r:.200}")
        is_dir, home, how, granted = reply
        void = path in self.recalled
        if path not in self.asking:
            self.recalled.discard(path)
        if type(is_dir) is not bool or type(granted) is not bool or how not in (2, 3, 4) or (
                not is_dir and home not in node.members):  # fmt: skip
            raise ProtocolError(f"DtToken reply for {path}: {(is_dir, home, how, granted)!r}")
        node.stats.lookup_paths[how] += 1
        entry = DIR_ENTRY if is_dir else DTEntry(False, home)
        if granted and not void:
            node.dt.put(path, entry)
            self.tokens.add(path)
        return entry

    def on_token(self, src: int, req: DtToken) -> Gen:
        node = self.node
        path = req.path
        epoch = node.dt_epoch
        is_dir, home, how = yield from node.resolve(path, check_dt=src != node.id)
        if is_dir or src == node.id or node.dt_epoch != epoch:
            return is_dir, home, how, False  # (changed while resolved: no token for what may be old)
        old = self.holders.get(path)
        if old is None and len(self.holders) >= node.config.dt_entries:
            return is_dir, home, how, False  # the records are full: asked again on every use
        if old is not None and old[0] != src:
            self.transfers += 1
            del self.holders[path]
            yield from self._recall(path, old[0])
            if node.dt_epoch != epoch:
                return is_dir, home, how, False
        self.holders[path] = (src, home)
        self.grants += 1
        return is_dir, home, how, True

    def changed(self, path: str, entry: DTEntry | None) -> None:
        held = self.holders.get(path)
        if held is not None and (entry is None or entry.is_dir or entry.home != held[1]):
            self.pending[path] = held[0]

    def after(self) -> Gen:
        while self.pending:
            path = next(iter(self.pending))
            holder = self.pending.pop(path)
            if self.holders.get(path, (None,))[0] == holder:
                del self.holders[path]
            yield from self._recall(path, holder)

    def _recall(self, path: str, holder: int) -> Gen:
        self.recalls += 1
        try:
            yield from self.node.call(holder, DtRecall(path))
        except (PeerUnavailable, OSError):
            pass  # a holder that does not answer is dropped from the record (module docstring)

    def on_recall(self, src: int, req: DtRecall) -> None:
        node = self.node
        _peer_path(node, src, req.path)
        self.tokens.discard(req.path)
        if req.path in self.asking:
            self.recalled.add(req.path)
        if node.manager_of(req.path) != node.id:
            node.dt.pop(req.path)

    def view_changed(self) -> None:
        node = self.node
        for path in self.tokens:
            if node.manager_of(path) != node.id:
                node.dt.pop(path)
        self.tokens.clear()
        self.holders.clear()
        self.pending.clear()

    def counters(self) -> dict[str, float]:
        return {"dt_token_grants": self.grants, "dt_token_transfers": self.transfers, "dt_recalls": self.recalls,
                "dt_stale_entries": self.stale_entries}  # fmt: skip
