"""dNFSp's meta-servers (dNFSp paper, sections 2-3): NFSp (``fedsim.protocol.nfsp``)
with the meta-server's role spread over several nodes, each serving a subset
of the clients, and the I/O daemons shared by all.

Roles: the lower half of the members (at least one) are the meta-servers,
the others the I/O daemons (a federation of one is both).  The client entry
at the k-th member sends its procedures to meta-server ``metas[k % len(metas)]``
(to the clients each meta-server is an NFS server, as in NFSp); data lives
at the daemon its path hashes to, as NFSp's (``NfspMeta.iod_of``), so data is
shared and only the metadata (names, kinds, modes, sizes: a meta-server's
local tree, with NFSp's shadows) needs keeping coherent.

Before a meta-server serves a procedure it makes each name the procedure
touches coherent (``_coherent``), by one of the paper's two schemes:

* **dNFSp1** (``scheme = 1``, lazy release consistency): a name this
  meta-server has is used as it is; a miss asks every other meta-server at
  once (``DnfspFetch``, one ``Multicast``) and copies the first answer.  No
  further synchronisation: a copy made once is not updated, so a file grown,
  chmodded or removed at another meta-server keeps its old attributes here
  (the data itself, at the daemons, is shared).  A new name is a miss too:
  every create asks all the others (the O(n) cost the paper's Fig. 3 shows).
* **dNFSp2** (``scheme = 2``, hash-based): each name has a hash server,
  ``metas[path_hash(path) % len(metas)]``, which records the holder of its
  token.  A meta-server holding the token answers without a message.  One
  that does not asks the hash server (``DnfspToken``), which makes it the
  holder and answers with the metadata if it held the token itself, or with
  the node that did; that node then gives up the token and its metadata
  (``DnfspHandOver``).  The metadata a holder serves is the latest.

  The token is held across the whole procedure, not only taken before it:
  a meta-server locks each name (``fedsim.protocol.locks``: first come first
  served, per name) before it takes the token and until the procedure has
  ended, and gives a token up (a hand-over, or the hash server's own token
  at a ``DnfspToken``) only under the same lock.  A transfer asked of a
  holder in mid-procedure is therefore served after the procedure, with its
  outcome; and a holder the hash server has named but whose token is still
  on its way (the hash server names it at once, the paper's flow) is asked
  in turn and answers once the token has arrived and its procedure ended:
  the named holders of a name form a queue in the hash server's order, each
  waiting on the one before.  A handler must not wait (``locks``: the
  simulator's bounded worker pools), so a holder that is busy with the name
  answers "later" and sends the metadata when it is done (``DnfspGive``,
  one-way, to the procedure that waits for it).  Deadlock-free: a procedure
  locks its names in one global order (``names_of``: sorted), takes each
  token before the next lock, and holds them to its end; the one that waits
  for a name's token waits on procedures that hold it and take only higher
  names after it.

What neither scheme covers here (the paper does not describe it): a
directory's listing (readdir, readdir_attrs) and rmdir's emptiness are this
meta-server's view: the names it has made or fetched.  Hard links are EPERM,
as in NFSp.
"""

from __future__ import annotations

import errno
from typing import Any, ClassVar

from fedsim.protocol.attrs import (
    KEEP,
    OFF_MAX,
    PERM_BITS,
    S_IFDIR,
    S_IFLNK,
    S_IFREG,
    UTIME_OMIT,
    check_mknod,
    check_no_device,
    check_target,
    kind,
)
from fedsim.protocol.dnfsp.messages import DnfspFetch, DnfspGive, DnfspHandOver, DnfspToken, Meta
from fedsim.protocol.effects import Await, Call, Compute, Local, Multicast, Send, Sleep, Spawn, Wake
from fedsim.protocol.hashing import path_hash
from fedsim.protocol.locks import Locks
from fedsim.protocol.messages import PeerUnavailable, ProtocolError, Request, fs_error
from fedsim.protocol.names import ROOT, ancestors
from fedsim.protocol.nfs.messages import (
    NfsAccess,
    NfsCommit,
    NfsCreate,
    NfsGetAttr,
    NfsLink,
    NfsLookup,
    NfsMkdir,
    NfsMknod,
    NfsRead,
    NfsReadLink,
    NfsRemove,
    NfsRename,
    NfsRmdir,
    NfsSetAttr,
    NfsSymlink,
    NfsTruncate,
    NfsWrite,
)
from fedsim.protocol.nfsp.messages import NfspRead
from fedsim.protocol.nfsp.meta import NfspMeta
from fedsim.protocol.node import Gen, handles
from fedsim.protocol.view import GetView

#: dNFSp2: a procedure waiting this long for a ``DnfspGive`` checks that the node that promised it still
#: answers (a ``GetView``, which every node serves), and again each period: far above any procedure a
#: holder runs on a name, so a live holder is asked at most now and then; one that crashed after its
#: "later" fails the check with ``PeerUnavailable``, which ends the waiting procedure (its client is
#: told the node is down) instead of leaving it waiting for ever.
GIVE_CHECK_S = 1.0

#: the procedures on one existing name, and those that make a name (each name's ancestors made coherent first)
_ON_NAME = (NfsLookup, NfsGetAttr, NfsSetAttr, NfsTruncate, NfsAccess, NfsRead, NfspRead, NfsWrite, NfsCommit,
            NfsRemove, NfsRmdir, NfsReadLink)  # fmt: skip
_NEW_NAME = (NfsCreate, NfsMkdir, NfsSymlink, NfsMknod)


def names_of(req: Request) -> tuple[str, ...]:
    """The names a client's procedure touches but the root, in the order they are made coherent
    (and, in dNFSp2, locked): sorted, which puts each name's ancestors (its prefixes) before it,
    as an NFS client's walk looks up every component before the name (so a name under a file
    another meta-server made is ENOTDIR here too, not ENOENT), and is one global order for a
    procedure that needs several tokens (a rename's two names), so two never wait on each other."""
    if isinstance(req, (*_ON_NAME, *_NEW_NAME)):
        names: tuple[str, ...] = (req.path,)
    elif isinstance(req, (NfsRename, NfsLink)):
        names = (req.old, req.new)
    else:
        return ()
    out = {a for name in names for a in ancestors(name)[1:]} | set(names)
    return tuple(sorted(out - {ROOT}))


class DnfspMeta(NfspMeta):
    """A dNFSp member: client entry, meta-server (if among ``metas``) and I/O daemon handlers."""

    #: the metadata coherence scheme: 1 (ask every other meta-server on a miss) or 2 (tokens)
    scheme: ClassVar[int] = 1

    def __init__(self, node_id: int, spec: Any, **kw: Any) -> None:
        super().__init__(node_id, spec, **kw)
        members = sorted(spec.members)
        #: the meta-servers: the lower half of the members (at least one)
        self.metas = tuple(members[: max(1, len(members) // 2)])
        self.iods = tuple(m for m in members if m not in self.metas) or self.metas[:1]
        #: this entry's meta-server (its clients' NFS server)
        self.server = self.metas[members.index(node_id) % len(self.metas)] if node_id in members else self.metas[0]
        self.tokens: set[str] = set()  # dNFSp2: the names whose token this meta-server holds
        self.owner: dict[str, int] = {}  # dNFSp2, at a hash server: each of its names' holder (absent: itself)
        #: dNFSp2: the names a generator here holds (a procedure, or a hand-over of the name's token)
        self.locks = Locks("dnfsp")
        self.awaiting: dict[str, int] = {}  # dNFSp2: the names a procedure here awaits a DnfspGive of, from whom
        self.waits: dict[str, int] = {}  # dNFSp2: ... and that wait's number (its watchdog's: ``_watch_give``)
        self._wait = 0  # the last wait's number
        self.given: dict[tuple[str, int], Meta | None] = {}  # dNFSp2: DnfspGives come before their "later"
        self.fetches = 0  # dNFSp1: misses sent to every other meta-server
        self.token_requests = 0  # dNFSp2: names this meta-server had to ask a hash server for
        self.token_hits = 0  # dNFSp2: names it held the token of (answered without a message)

    def counters(self) -> dict[str, float]:
        return {**super().counters(), "meta_fetches": self.fetches, "token_requests": self.token_requests,
                "token_hits": self.token_hits}  # fmt: skip

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "metas": list(self.metas), "scheme": self.scheme, "tokens": len(self.tokens)}

    @property
    def data_apart(self) -> bool:
        """Whether the data lives at daemons apart from the meta-servers (all but a federation of one)."""
        return self.iods != self.metas[:1]

    def hash_of(self, path: str) -> int:
        """dNFSp2: the meta-server that arbitrates ``path``'s token."""
        return self.metas[path_hash(path) % len(self.metas)]

    def _serving(self, path: str) -> None:
        if self.id not in self.metas:
            raise fs_error(errno.EINVAL, path, f"node {self.id} is no dNFSp meta-server")
        self.served += 1

    def _peer_meta(self, src: int, path: str) -> None:
        if self.id not in self.metas or src not in self.metas or src == self.id:
            raise fs_error(errno.EINVAL, path, f"node {src} -> {self.id}: not between two dNFSp meta-servers")

    # ------------------------------------------------------------------ coherence before every procedure
    def handle(self, src: int, request: Request) -> Gen:
        names = names_of(request) if self.id in self.metas and len(self.metas) > 1 else ()
        if not names:
            return (yield from super().handle(src, request))
        if self.scheme == 1:
            for path in names:
                yield from self._fetch(path)
            return (yield from super().handle(src, request))
        return (yield from self._holding(names, super().handle(src, request)))

    def _holding(self, names: tuple[str, ...], body: Gen) -> Gen:
        """dNFSp2: ``body`` run holding each of ``names``' lock and token, taken in their order, each
        token before the next lock (so a hand-over of a token this procedure holds from before is
        never kept waiting while it waits for a lower name)."""
        if not names:
            return (yield from body)
        return (yield from self.locks.holding(names[0], self._taken(names, body)))

    def _taken(self, names: tuple[str, ...], body: Gen) -> Gen:
        """dNFSp2: under ``names[0]``'s lock, its token, then the rest of ``_holding``."""
        yield from self._take(names[0])
        return (yield from self._holding(names[1:], body))

    def _fetch(self, path: str) -> Gen:
        """dNFSp1: ``path`` as this meta-server has it, or, on a miss, the first copy another one has."""
        if (yield from self._local_meta(path)) is not None:
            return
        self.fetches += 1
        others = tuple(m for m in self.metas if m != self.id)
        for reply in (yield Multicast(others, DnfspFetch(path))):
            if isinstance(reply, tuple):
                yield from self._install(path, reply)
                return

    def _take(self, path: str) -> Gen:
        """dNFSp2: the token of ``path`` here, with its latest metadata (the caller holds ``path``'s lock)."""
        if path in self.tokens:
            self.token_hits += 1
            return
        self.token_requests += 1
        yield Compute("hash")
        h = self.hash_of(path)
        if h == self.id:
            holder = self.owner.get(path, self.id)
            self.owner[path] = self.id
        else:
            holder, meta, now = yield from self.call(h, DnfspToken(path))
            if holder not in self.metas or (holder != h and (meta is not None or not now)):
                raise ProtocolError(f"DnfspToken reply: holder {holder} with {meta!r}, {now}")
            if holder == h:
                yield from self._install(path, meta if now else (yield from self._given(path, h)))
        if holder not in (h, self.id):
            meta, now = yield from self.call(holder, DnfspHandOver(path))
            yield from self._install(path, meta if now else (yield from self._given(path, holder)))
        self.tokens.add(path)

    def _given(self, path: str, giver: int) -> Gen:
        """dNFSp2: the metadata ``giver`` said would follow (``DnfspGive``): arrived already, or awaited."""
        if (path, giver) in self.given:
            return self.given.pop((path, giver))
        self._wait += 1
        wait = self._wait
        yield Spawn(self._watch_give(path, giver, wait))  # (it sleeps first: nothing runs before the Await)
        if (path, giver) in self.given:  # arrived while the watchdog was spawned
            self._wait_ended(path)
            return self.given.pop((path, giver))
        self.awaiting[path] = giver
        self.waits[path] = wait
        return (yield Await(("dnfsp-give", path)))

    def _wait_ended(self, path: str) -> None:
        self.awaiting.pop(path, None)
        self.waits.pop(path, None)

    def _watch_give(self, path: str, giver: int, wait: int) -> Gen:
        """dNFSp2: the watchdog of a wait for ``giver``'s ``DnfspGive`` of ``path``: every
        ``GIVE_CHECK_S`` while the wait lasts, ask ``giver`` whether it is up; if it does not
        answer (it crashed after its "later"), end the wait with ``PeerUnavailable``."""
        while True:
            yield Sleep(GIVE_CHECK_S)
            if self.waits.get(path) != wait:
                return  # given meanwhile
            try:
                yield Call(giver, GetView())
            except PeerUnavailable as exc:
                if self.waits.get(path) == wait:
                    self._wait_ended(path)
                    yield Wake(("dnfsp-give", path), exc)
                return

    def _give_up(self, path: str, to: int) -> Gen:
        """dNFSp2, for a handler: (this meta-server's metadata of ``path``, True), its token given up;
        or, if a procedure here holds the name, (None, False): they follow to ``to`` when it is done."""
        if self.locks.busy(path):
            self.locks.after(path, self._give_later(path, to))
            return (None, False)
        return ((yield from self.locks.holding(path, self._hand_over(path))), True)

    def _give_later(self, path: str, to: int) -> Gen:
        """dNFSp2, spawned under ``path``'s lock: the hand-over a busy holder promised ``to``."""
        try:
            meta = yield from self._hand_over(path)
        except OSError:
            meta = None  # the name is unreadable here: as good as none (the next holder's view)
        mode, size, target = meta if meta is not None else (0, 0, "")
        yield Send(to, DnfspGive(path, meta is not None, mode, size, target))

    def _hand_over(self, path: str) -> Gen:
        """dNFSp2, under ``path``'s lock: the token given up, the metadata it vouched for."""
        self.tokens.discard(path)
        return (yield from self._local_meta(path))

    def _local_meta(self, path: str) -> Gen:
        """This meta-server's metadata of ``path`` (None: it has no such name)."""
        try:
            attr = yield Local("getattr", path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        mode, size = attr[1], attr[5]
        return (mode, size, (yield Local("readlink", path)) if kind(mode) == S_IFLNK else "")

    def _install(self, path: str, meta: Meta | None) -> Gen:
        """Make this meta-server's copy of ``path`` what another one said (checked: a peer's reply is untrusted)."""
        if meta is not None:
            mode, size, target = meta
            what = kind(mode)
            if mode < 0 or mode & ~(0o170000 | PERM_BITS) or not 0 <= size <= OFF_MAX:
                raise ProtocolError(f"dNFSp metadata of {path}: mode {mode:o}, size {size}")
            if what == S_IFLNK:
                check_target(path, target)
            elif what not in (S_IFDIR, S_IFREG):
                check_mknod(path, mode)
                check_no_device(path, mode, "dnfsp")
        local = yield from self._local_meta(path)
        if local is not None and (meta is None or kind(local[0]) != kind(meta[0]) or local[2] != meta[2]):
            try:
                yield Local("rmdir" if kind(local[0]) == S_IFDIR else "unlink", path)
            except OSError:
                return  # a directory this meta-server still lists names in: its own view stays
            local = None
        if meta is None:
            return
        if local is None:
            if what == S_IFDIR:
                yield Local("mkdir", path)
            elif what == S_IFREG:
                yield Local("create", path)
            elif what == S_IFLNK:
                yield Local("symlink", path, (meta[2],))
            else:
                yield Local("mknod", path, (mode,))
            local = yield from self._local_meta(path)
        if what == S_IFREG and local[1] != size:
            yield Local("truncate", path, (size,))  # the shadow: the file's size
        if what != S_IFLNK and local[0] & PERM_BITS != mode & PERM_BITS:
            yield Local("setattr", path, (mode & PERM_BITS, KEEP, KEEP, UTIME_OMIT, UTIME_OMIT))

    # ------------------------------------------------------------------ between meta-servers
    @handles(DnfspFetch)
    def on_fetch(self, src: int, req: DnfspFetch) -> Gen:
        self._peer_meta(src, req.path)
        return (yield from self._local_meta(req.path))

    @handles(DnfspToken)
    def on_token(self, src: int, req: DnfspToken) -> Gen:
        self._peer_meta(src, req.path)
        if self.hash_of(req.path) != self.id:
            raise fs_error(errno.EINVAL, req.path, f"node {self.id} is not the hash server of this name")
        holder = self.owner.get(req.path, self.id)
        self.owner[req.path] = src  # named at once: a later request is sent to src, which answers in turn
        if holder != self.id:
            return (holder, None, True)
        meta, now = yield from self._give_up(req.path, src)
        return (self.id, meta, now)

    @handles(DnfspHandOver)
    def on_hand_over(self, src: int, req: DnfspHandOver) -> Gen:
        self._peer_meta(src, req.path)
        return (yield from self._give_up(req.path, src))

    @handles(DnfspGive)
    def on_give(self, src: int, req: DnfspGive) -> Gen:
        """Only for a name a procedure here holds (so at most one per lock held), from the node it asked."""
        self._peer_meta(src, req.path)
        if not self.locks.busy(req.path) or (req.path, src) in self.given:
            raise ProtocolError(f"DnfspGive of {req.path} from {src}: nothing here waits for it")
        meta = (req.mode, req.size, req.target) if req.found else None
        if self.awaiting.get(req.path) == src:
            self._wait_ended(req.path)
            yield Wake(("dnfsp-give", req.path), meta)
        else:  # its reply's "later" is still on the way
            self.given[(req.path, src)] = meta
