"""The requester: the node whose file API a client called (Federated DAFS
Fig. 3), and the four lookup paths of FedFS 3.1, as counted in
``NodeStats.lookup_paths``: 1 = R's own DT, 2 = M's DT, 3 = PM's cached VD,
4 = PM had to dirmerge.

Namespace updates (AddEntry, DelEntry, SummaryAdd, Forget) are acknowledged
calls, as in Federated DAFS Fig. 4 ("the wait for response is implicit"): a
one-way update could be overtaken by the client's next request (create
returns, the following readdir at the parent's manager does not show the file
yet).  ``ProtocolConfig.async_dir_updates`` makes them one-way, for studying
what that would save; the Table 2 study finds the prototype's latencies fit
acknowledged updates better.

Busy names: a participant of a rename in flight answers EAGAIN for the names
it holds (``rename.py``), and so does the directory's manager while a dirmerge
of the directory, or an rmdir of it, or a create inside it that an rmdir
would race, is in flight (``directory.py``); the requester backs off (``Sleep``) and asks again,
up to ``BUSY_TRIES`` times.  The requester is the one place that can wait
for free: it runs the client's operation, not a handler, so it holds none of
the bounded worker pools (a handler waiting there for a rename whose own
messages need a worker of the same stage could deadlock the node).
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from typing import Any

from fedsim.protocol.attrs import KEEP, check_new, check_size
from fedsim.protocol.effects import NOW, Compute, Sleep
from fedsim.protocol.fedfs.home import Home, OrphanClose, Orphaned, OrphanRead, OrphanTruncate, OrphanWrite
from fedsim.protocol.messages import (
    Close,
    Create,
    Forget,
    HomeInfo,
    ListVD,
    Mkdir,
    Open,
    PeerUnavailable,
    Read,
    Request,
    Rmdir,
    Settle,
    Stat,
    Truncate,
    Unlink,
    Write,
    fs_error,
)
from fedsim.protocol.names import ROOT, normalize
from fedsim.protocol.node import Gen, api, handles
from fedsim.protocol.tables import DIR_ENTRY, DTEntry

# Back-off for EAGAIN (a name held by a rename in flight, a directory being
# merged or removed, a create's hold): 100 us doubling to 50 ms, about 4.6 s
# in all: far above a rename's few round trips, and above a dirmerge that
# waits out a hung peer (the agent's 2 s rpc timeout) and a create's hold
# whose create died silently (``directory.HOLD_S``), so a client is told
# EAGAIN only when something stays busy much longer than any of those.
BUSY_FIRST_S = 100e-6
BUSY_MAX_S = 50e-3
BUSY_TRIES = 100
# A descriptor follows its file through this many moves within one request
# (each a migration that completed while the request travelled).
FD_MOVES = 4
#: descriptors one requester holds open at once (EMFILE past it): a bound on
#: its table and on the pins it asks homes to keep
MAX_FDS = 1 << 16

#: A descriptor's request for its file, as its request for the file once it
#: was unlinked while open (``home.py``): by the orphan's number, not a name.
#: A role whose descriptor requests are its own adds theirs (``attributes``).
ORPHAN_REQUESTS: dict[type[Request], Callable[[int, Any], Request]] = {
    Read: lambda n, r: OrphanRead(n, r.offset, r.size),
    Write: lambda n, r: OrphanWrite(n, r.offset, r.data),
    Truncate: lambda n, r: OrphanTruncate(n, r.size),
    Close: lambda n, r: OrphanClose(n),
}


class Requester(Home):
    def __init__(self, node_id: int, spec: Any, **kw: Any) -> None:
        super().__init__(node_id, spec, **kw)
        self.fds: dict[int, tuple[str, int]] = {}
        # descriptors whose file was unlinked while open -> its orphan number
        # at the home (``Orphaned``); descriptors being closed (not followed)
        self.orphan_fds: dict[int, int] = {}
        self._closing: set[int] = set()
        self._next_fd = 3
        self._next_token = 0  # names each create/mkdir attempt at its manager (``Settle``)

    def start(self) -> Gen:
        """Tokens of this incarnation start from the clock (microseconds): a
        restarted node does not reuse the tokens its managers saw settled
        (and refuse) before; a collision all the same is answered ECANCELED
        and the attempt is made again under the next token (``_make``)."""
        self._next_token = int((yield NOW) * 1e6)
        return (yield from super().start())

    def describe(self) -> dict[str, Any]:
        # (the files unlinked while open that this node keeps as their home: ``home.py``)
        return {**super().describe(), "open_files": len(self.fds), "orphans": len(self.orphans)}

    # ------------------------------------------------------------------ lookup
    def lookup(self, path: str) -> Gen:
        """Resolve a pathname to (DTEntry, from_own_dt) by the four paths of FedFS 3.1."""
        return (yield from self._lookup(normalize(path)))

    def _lookup(self, path: str) -> Gen:
        """``lookup`` of a path already in canonical form."""
        if path == ROOT:
            return DIR_ENTRY, False
        e = self.dt.get(path)
        if e is not None and self.dt_coherence.trusted(path):
            self.stats.lookup_paths[1] += 1
            return e, True
        e = yield from self.dt_coherence.miss(path)  # (dnfsp1: every other member's DT first)
        if e is not None:
            return e, True
        return (yield from self._lookup_at_manager(path)), False

    def _lookup_at_manager(self, path: str) -> Gen:
        """Ask P's manager (paths 2-4), as the DT coherence policy does it
        (``lazy``: ``home_info``; ``dnfsp2``: taking the name's token)."""
        return (yield from self.dt_coherence.at_manager(path))

    def home_info(self, path: str) -> Gen:
        """Ask P's manager (paths 2-4).  The manager skips its DT when it is
        this node (the caller just missed there).  Directory entries are cached
        only at their manager: a requester could not notice a stale one."""
        m = self.manager_of(path)
        is_dir, home, how = yield from self._busy(lambda: self.call(m, HomeInfo(path)))
        self.stats.lookup_paths[how] += 1
        entry = DIR_ENTRY if is_dir else DTEntry(False, home)
        if not is_dir and m != self.id:
            self.dt.put(path, entry)
        return entry

    def _busy(self, attempt: Callable[[], Gen]) -> Gen:
        """Run ``attempt()`` (a generator factory), backing off and trying again
        while it fails with EAGAIN; the last attempt's EAGAIN is the client's."""
        delay = BUSY_FIRST_S
        for _ in range(BUSY_TRIES):
            try:
                return (yield from attempt())
            except BlockingIOError:
                yield Sleep(delay)
                delay = min(2 * delay, BUSY_MAX_S)
        return (yield from attempt())

    def _at_home(self, path: str, make: Callable[[str], Request], dir_errno: int | None) -> Gen:
        """Look the canonical ``path`` up and run a request at its home.  A stale
        entry from this node's own DT (the file moved or was removed elsewhere)
        shows up as ENOENT from the old home: drop it and ask the manager once more.
        ESTALE (the home's file was replaced by a rename from another node) is
        asked again even when the entry was not cached: the name exists, elsewhere."""
        entry, cached = yield from self._lookup(path)
        for attempt in (0, 1):
            if entry.is_dir:
                if dir_errno is None:
                    return None
                raise fs_error(dir_errno, path)
            home = entry.home
            try:
                return (yield from self._busy(lambda home=home: self.call(home, make(path)))), home
            except FileNotFoundError:
                if not cached or attempt:
                    raise
            except OSError as exc:
                if exc.errno != errno.ESTALE:
                    raise
                if attempt:  # renamed away twice while we looked: it is gone as far as we know
                    raise fs_error(errno.ENOENT, path) from None
            self.stats.stale_retries += 1
            if cached:
                self.dt_coherence.stale_entries += 1  # (what the DT coherence policies differ in)
            self.dt.pop(path)
            entry = yield from self._lookup_at_manager(path)
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ the file API
    def _make(
        self, path: str, kind: str, make: Callable[[str, int], Request], reserve: Callable[[int], Request] | None = None
    ) -> Gen:
        """create and mkdir: reserve the name at its manager, then make it at
        the chosen home.  Failure semantics: an error the home answered (it
        made nothing) drops the reservation (``Forget``); a ``PeerUnavailable``
        anywhere leaves the outcome unknown (a lost reply, a lost AddEntry),
        so the manager settles the attempt from the local trees (``Settle``,
        in the background until it gets through): no reservation outlives a
        create that made nothing, and one that made the file is kept.
        ``reserve(token)``: the reservation's request, if not ``HomeInfo``
        (a hard link's, whose home is given: ``links.py``)."""
        m = self.manager_of(path)
        reserve = reserve or (lambda token: HomeInfo(path, kind, token))
        for _ in range(3):
            self._next_token += 1
            token = self._next_token
            try:
                _, home, _ = yield from self._busy(lambda token=token: self.call(m, reserve(token)))
                break
            except PeerUnavailable:
                yield from self.repair(m, Settle(path, token))
                raise
            except OSError as exc:
                if exc.errno != errno.ECANCELED:
                    raise
        else:
            raise fs_error(errno.ECANCELED, path, "the manager refused every attempt's token")
        try:
            yield from self.call(home, make(path, token))
        except PeerUnavailable:
            yield from self.repair(m, Settle(path, token))
            raise
        except OSError:
            try:
                yield from self.notify(m, Forget(path))  # undo the manager's reservation
            except PeerUnavailable:
                yield from self.repair(m, Settle(path, token))
            raise
        return home

    # The optional mode and owner of a new name: the new entry has them from
    # its first instant, at its home (``messages.Create``).  The client API has
    # no notion of a calling user: a program holding the cluster's client key
    # chooses them (as an NFS client with AUTH_SYS does); a mount passes the
    # kernel-authenticated caller's (``fednode.mount``).
    @api(str, int, int, int, optional=3)
    def create(self, path: str, mode: int = KEEP, uid: int = KEEP, gid: int = KEEP) -> Gen:
        """Create an empty regular file (exclusive: EEXIST if the name exists),
        with permission bits ``mode`` and owner ``uid``/``gid`` (KEEP: the
        home's default: the agent's user, 0644)."""
        path = normalize(path)
        check_new(path, mode, uid, gid)
        yield Compute("fedfs_op")
        return (yield from self._make_entry(path, lambda p, token: Create(p, token, mode, uid, gid)))

    def _make_entry(
        self, path: str, make: Callable[[str, int], Request], reserve: Callable[[int], Request] | None = None
    ) -> Gen:
        """A new name with a home (a file, a symlink, special file or hard link:
        ``links.py``), reserved at its manager and made at its home (``_make``);
        returns the home."""
        if path == ROOT:
            raise fs_error(errno.EEXIST, path)
        home = yield from self._make(path, "file", make, reserve)
        if home in self.members:
            self.dt.put(path, DTEntry(False, home))
        elif self.manager_of(path) != self.id:
            # A home that left meanwhile (its successor promoted the copy):
            # no hint naming it.  At the name's manager the DT entry is the
            # manager's own (the hand-off's, the promotion's); put over it,
            # it named the leaver for good (found by the dynamics property:
            # a create during a leave, the final walk's open timed out).
            self.dt.pop(path)
        return home

    @api(str, int, int, int, optional=3)
    def mkdir(self, path: str, mode: int = KEEP, uid: int = KEEP, gid: int = KEEP) -> Gen:
        """Make a directory with ``mode`` and owner ``uid``/``gid`` (KEEP: the
        home's default).  Only the holder that makes it has them: a directory
        copy made later on another node to hold a file has that node's default
        (``attributes``: getattr answers from the lowest holder's own copy)."""
        path = normalize(path)
        check_new(path, mode, uid, gid)
        yield Compute("fedfs_op")
        if path == ROOT:
            raise fs_error(errno.EEXIST, path)
        return (yield from self._make(path, "dir", lambda p, token: Mkdir(p, token, mode, uid, gid)))

    @api(str)
    def unlink(self, path: str) -> Gen:
        path = normalize(path)
        yield Compute("fedfs_op")
        yield from self._at_home(path, Unlink, errno.EISDIR)
        self.dt.pop(path)

    @api(str)
    def rmdir(self, path: str) -> Gen:
        path = normalize(path)
        yield Compute("fedfs_op")
        if path == ROOT:
            raise fs_error(errno.EBUSY, path, "cannot remove the root of the federation")
        m = self.manager_of(path)
        yield from self._busy(lambda: self.call(m, Rmdir(path)))
        self.dt.pop(path)

    @api(str)
    def readdir(self, path: str) -> Gen:
        """Sorted [(name, is_dir)] of a virtual directory."""
        path = normalize(path)
        yield Compute("fedfs_op")
        m = self.manager_of(path)
        return (yield from self._busy(lambda: self.call(m, ListVD(path))))

    @api(str)
    def stat(self, path: str) -> Gen:
        """(is_dir, size)."""
        path = normalize(path)
        yield Compute("fedfs_op")
        r = yield from self._at_home(path, Stat, None)
        return (True, 0) if r is None else tuple(r[0])

    @api(str, int)
    def truncate(self, path: str, size: int) -> Gen:
        """Cut a regular file to ``size`` bytes or extend it with zeros; returns
        its home (as ``create`` does).  With open + write it overwrites a file
        in place: the name never goes missing, as between an unlink and a create."""
        path = normalize(path)
        check_size(path, size)
        yield Compute("fedfs_op")
        _, home = yield from self._at_home(path, lambda p: Truncate(p, size), errno.EISDIR)
        return home

    @api(str, fd="opens")
    def open(self, path: str) -> Gen:
        """Open a regular file; returns a descriptor for read/write/close."""
        path = normalize(path)
        yield Compute("fedfs_op")
        if len(self.fds) >= MAX_FDS:
            raise fs_error(errno.EMFILE, path, f"{MAX_FDS} files open at this node already")
        _, home = yield from self._at_home(path, Open, errno.EISDIR)
        fd = self._next_fd
        self._next_fd += 1
        self.fds[fd] = (path, home)
        return fd

    def _fd(self, fd: int) -> tuple[str, int]:
        try:
            return self.fds[fd]
        except KeyError:
            raise OSError(errno.EBADF, f"bad file descriptor {fd}") from None

    def _at_fd(self, fd: int, make: Callable[[str], Request]) -> Gen:
        """Run a request for descriptor ``fd`` at its file's home.  A migration
        moves an open file's pins with it and leaves the old home answering
        ESTALE: the descriptor then follows the file to its new home (resolved
        again at the manager, no new Open: the pin is already there) and the
        request is sent again.  EAGAIN (the switch itself) is waited out.
        A descriptor of a file unlinked while open goes by its orphan number
        (``Orphaned``), also when the unlink overtook this very request."""
        path, home = self._fd(fd)
        if self.orphan_fds and fd in self.orphan_fds:
            return (yield from self._at_orphan(fd, home, make(path)))
        for _ in range(FD_MOVES):
            try:
                return (yield from self._busy(lambda home=home: self.call(home, make(path))))
            except OSError as exc:
                if fd in self.orphan_fds:  # unlinked meanwhile (ENOENT, ESTALE): the orphan has it
                    return (yield from self._at_orphan(fd, home, make(path)))
                if exc.errno != errno.ESTALE:
                    raise
            self.stats.stale_retries += 1
            self.dt.pop(path)
            entry = yield from self._lookup_at_manager(path)
            if entry.is_dir or entry.home is None:
                break
            home = entry.home
            if fd in self.fds:
                self.fds[fd] = (path, home)
        raise fs_error(errno.ESTALE, path, "the open file moved again and again; try again")

    def _at_orphan(self, fd: int, home: int, req: Request) -> Gen:
        to_orphan = ORPHAN_REQUESTS.get(type(req))
        if to_orphan is None:  # (a block cache's read: its blocks are named by path)
            raise fs_error(errno.EBADF, self.fds[fd][0], "unlinked while open: not through the block cache")
        return (yield from self.call(home, to_orphan(self.orphan_fds[fd], req)))

    @handles(Orphaned)
    def on_orphaned(self, src: int, req: Orphaned) -> int:
        """The home ``src`` made the file our descriptors of ``req.path`` name
        an orphan: they follow it (not those being closed: their close, sent
        by name, is the home's already, or will find nothing there)."""
        n = 0
        for fd, (path, home) in self.fds.items():
            if path == req.path and home == src and fd not in self._closing and fd not in self.orphan_fds:
                self.orphan_fds[fd] = req.orphan
                n += 1
        return n

    @api(int, fd="closes")
    def close(self, fd: int) -> Gen:
        self._fd(fd)
        self._closing.add(fd)
        try:
            yield from self._at_fd(fd, Close)
        finally:
            self._closing.discard(fd)
            self.fds.pop(fd, None)
            self.orphan_fds.pop(fd, None)

    @api(int, int, int, fd="uses", size_arg=2)
    def read(self, fd: int, offset: int, size: int) -> Gen:
        self._fd(fd)
        yield Compute("fedfs_op")
        return (yield from self._at_fd(fd, lambda p: Read(p, offset, size)))

    @api(int, int, bytes, fd="uses")
    def write(self, fd: int, offset: int, data: bytes) -> Gen:
        self._fd(fd)
        yield Compute("fedfs_op")
        return (yield from self._at_fd(fd, lambda p: Write(p, offset, data)))
