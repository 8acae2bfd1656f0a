"""A FedFS node: the file API stubs (Federated DAFS Fig. 3) and the request
handlers at the home, the file's manager and the directory's manager (Fig. 4).

Everything here is a generator that yields effects (``fedsim.protocol.effects``)
and never does I/O, so the simulator and the real agent run this exact code.

Roles for a pathname P with parent directory D:

* the *requester* R: the node whose API was called;
* the *manager* M = manager_of(P): decides P's home at creation and remembers
  it in its directory table (DT);
* the *parent's manager* PM = manager_of(D): holds D's virtual directory (VD),
  cached or rebuilt by dirmerge;
* the *home* H: the node whose local file system holds P.

The four lookup paths of FedFS 3.1, as counted in ``NodeStats.lookup_paths``:
1 = R's own DT, 2 = M's DT, 3 = PM's cached VD, 4 = PM had to dirmerge.

Invariants the property tests check:

* The DT entries a manager holds for the names it manages are exact: every
  operation that changes a name's existence or home goes through, or notifies,
  its manager (creates are decided there, unlinks send ``Forget``, rmdir is
  run there).  Entries a requester caches for names managed elsewhere may go
  stale (FedFS 3.2's lazy scheme): a home that answers ENOENT makes the
  requester drop its entry and ask the manager again, once.
* A cached VD is exact: AddEntry/DelEntry keep it current, including while a
  dirmerge for it is in flight (updates are queued and replayed on the result).

Namespace updates (AddEntry, DelEntry, SummaryAdd, Forget) are acknowledged
calls, as in Federated DAFS Fig. 4 ("the wait for response is implicit"): a
one-way update could be overtaken by the client's next request (create
returns, the following readdir at the parent's manager does not show the file
yet).  ``ProtocolConfig.async_dir_updates`` makes them one-way, for studying
what that would save; the Table 2 study finds the prototype's latencies fit
acknowledged updates better.
"""

from __future__ import annotations

import errno
from collections import Counter
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from types import GeneratorType
from typing import Any

from fedsim.protocol.effects import NOW, Await, Call, Compute, Local, Multicast, Send, Wake
from fedsim.protocol.messages import (
    AddEntry,
    Close,
    Create,
    DelEntry,
    Forget,
    GetEntry,
    HomeInfo,
    ListVD,
    Mkdir,
    Open,
    PeerUnavailable,
    ProtocolError,
    Read,
    ReadDir,
    Request,
    Rmdir,
    RmLocal,
    Stat,
    SummaryAdd,
    SummaryPush,
    Unlink,
    Write,
    fs_error,
)
from fedsim.protocol.names import ROOT, join, normalize, parent, split
from fedsim.protocol.placement import ModN, Ring
from fedsim.protocol.policies.placement import PlacementPolicy, WithManager
from fedsim.protocol.summary import BloomSummary
from fedsim.protocol.tables import DIR_ENTRY, LRU, DTEntry, VirtualDirectory

Gen = Generator[Any, Any, Any]


@dataclass(slots=True)
class ProtocolConfig:
    """Protocol parameters shared by every node of a federation."""

    dt_entries: int = 4096
    vd_entries: int = 1024
    summary_bits: int = 4096  # the prototype's 4 Kbit summary (FedFS section 4)
    summary_hashes: int = 4
    summary_layout: str = "shared"
    async_dir_updates: bool = False
    # Local trees change outside the federation (FedFS autonomy): a cached VD
    # older than ``vd_max_age_s`` is rebuilt on its next use, and a lookup that
    # misses in a VD older than ``vd_miss_age_s`` rebuilds it once before
    # answering ENOENT.  0 disables either (the papers' closed world, and the
    # simulator's default); the agent enables both.
    vd_max_age_s: float = 0.0
    vd_miss_age_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("dt_entries", "vd_entries", "summary_bits", "summary_hashes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("vd_max_age_s", "vd_miss_age_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative, got {getattr(self, name)}")

    @property
    def aging(self) -> bool:
        """Whether VDs carry the time they were built (either refresh is on)."""
        return bool(self.vd_max_age_s or self.vd_miss_age_s)


@dataclass(slots=True)
class NodeStats:
    """What one node observed; runtimes aggregate these into run metrics."""

    lookup_paths: list[int] = field(default_factory=lambda: [0, 0, 0, 0, 0])  # index 1..4
    stale_retries: int = 0
    dirmerges: int = 0
    dirmerge_contacted: list[int] = field(default_factory=list)  # remote nodes asked per merge
    dirmerge_holders: list[int] = field(default_factory=list)  # of those, the ones that had the dir
    merge_waits: int = 0  # requests that waited on an in-flight dirmerge of the same directory
    merges_by_dir: Counter[str] = field(default_factory=Counter)
    incomplete_merges: int = 0
    requests_served: int = 0


class FedNode:
    """One member of a federation: its tables, its copies of the summaries and
    the generator functions that implement the protocol."""

    def __init__(
        self,
        node_id: int,
        members: Sequence[int],
        hashing: ModN | Ring | None = None,
        placement: PlacementPolicy | None = None,
        config: ProtocolConfig | None = None,
    ) -> None:
        self.id = node_id
        self.members: tuple[int, ...] = tuple(sorted(members))
        if node_id not in self.members:
            raise ValueError(f"node {node_id} is not among the members {self.members}")
        self.hashing = hashing or ModN(self.members)
        self.placement = placement or WithManager()
        self.config = config or ProtocolConfig()
        self.dt: LRU[str, DTEntry] = LRU(self.config.dt_entries)
        self.vds: LRU[str, VirtualDirectory] = LRU(self.config.vd_entries)
        self.summaries: dict[int, BloomSummary] = {}
        self._shared: set[int] = set()  # summaries shared with other nodes (copy on write)
        self.stats = NodeStats()
        self.opens: Counter[str] = Counter()  # open count per local file (the home's DT note)
        self.fds: dict[int, tuple[str, int]] = {}
        self._next_fd = 3
        # directory -> VD updates queued while its dirmerge is in flight
        self._merging: dict[str, list[Any]] = {}
        # Name collisions seen by dirmerges at this node: path -> (the home the
        # name resolves to, None for a directory; every node holding it as a file).
        self.collisions: dict[str, tuple[int | None, tuple[int, ...]]] = {}
        # Local directories this node created only to hold a file (create's
        # missing parents): removed again once empty, so the federation leaves
        # no directory of its own in the local tree (autonomy).
        self.implicit_dirs: set[str] = set()
        self._handlers: dict[type[Request], Callable[[int, Any], Any]] = {
            HomeInfo: self.on_home_info,
            Forget: self.on_forget,
            SummaryAdd: self.on_summary_add,
            ListVD: self.on_list_vd,
            Rmdir: self.on_rmdir,
            GetEntry: self.on_get_entry,
            AddEntry: self.on_add_entry,
            DelEntry: self.on_del_entry,
            ReadDir: self.on_read_dir,
            RmLocal: self.on_rm_local,
            SummaryPush: self.on_summary_push,
            Create: self.on_create,
            Mkdir: self.on_mkdir,
            Unlink: self.on_unlink,
            Open: self.on_open,
            Close: self.on_close,
            Stat: self.on_stat,
            Read: self.on_read,
            Write: self.on_write,
        }

    # ------------------------------------------------------------------ plumbing
    def manager_of(self, path: str) -> int:
        return self.hashing.manager_of(path)

    def call(self, node: int, request: Request) -> Gen:
        """Request/reply, short-circuited when the peer is this node (no message)."""
        if node == self.id:
            return (yield from self.handle(self.id, request))
        return (yield Call(node, request))

    def notify(self, node: int, request: Request) -> Gen:
        """A namespace update (AddEntry, DelEntry, SummaryAdd, Forget): an
        acknowledged call, or a one-way message with ``async_dir_updates``."""
        if node == self.id:
            yield from self.handle(self.id, request)
        elif self.config.async_dir_updates:
            yield Send(node, request)
        else:
            yield Call(node, request)

    def handle(self, src: int, request: Request) -> Gen:
        """Serve one request from ``src``: the entry point runtimes call."""
        handler = self._handlers.get(type(request))
        if handler is None:
            raise ProtocolError(f"no handler for request type {type(request).__name__}")
        result = handler(src, request)
        if type(result) is GeneratorType:  # handlers that need no effects return plainly
            result = yield from result
        return result

    # ------------------------------------------------------------------ summaries
    def new_summary(self) -> BloomSummary:
        c = self.config
        return BloomSummary(c.summary_bits, c.summary_hashes, c.summary_layout)

    def start(self) -> Gen:
        """Summarise the local directory tree and send it to every other member
        (FedFS 2.2: "when the cluster is first established or when the node joins")."""
        data = yield from self.regenerate_summary(push=False)
        others = tuple(m for m in self.members if m != self.id)
        if others:
            yield Multicast(others, SummaryPush(self.id, data))

    def regenerate_summary(self, push: bool = True) -> Gen:
        """Rebuild this node's summary from its local tree: drops the false
        positives that deleted directories left behind."""
        dirs = yield Local("list_dirs", ROOT)
        summary = self.new_summary()
        summary.add_many(dirs)
        yield Compute("bloom_insert", len(dirs))
        self.summaries[self.id] = summary
        data = summary.to_bytes()
        others = tuple(m for m in self.members if m != self.id)
        if push and others:
            yield Multicast(others, SummaryPush(self.id, data))
        return data

    def install_summary(self, node: int, data: bytes | BloomSummary) -> None:
        """Adopt ``node``'s summary.  A summary from a node this one had none
        for (a join) invalidates the cached VDs it may contribute to, so the
        next access re-merges them with the newcomer.

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
        self.summaries[node] = summary
        if not known and len(self.vds):
            for d in self.vds.keys():
                if summary.may_contain(d):
                    self.vds.pop(d)

    def on_summary_push(self, src: int, req: SummaryPush) -> None:
        self.install_summary(req.node, req.summary)

    def _summary_add(self, path: str, new_dir: bool) -> Gen:
        """This node now holds local directory ``path``: tell its manager."""
        if self.manager_of(path) != self.id:  # else on_summary_add updates it
            own = self.summaries.get(self.id)
            if own is not None:
                if self.id in self._shared:
                    own = self.summaries[self.id] = own.copy()
                    self._shared.discard(self.id)
                own.add(path)
        yield from self.notify(self.manager_of(path), SummaryAdd(path, self.id, new_dir))

    def on_summary_add(self, src: int, req: SummaryAdd) -> Gen:
        summary = self.summaries.get(req.node)
        if summary is None:
            summary = self.summaries[req.node] = self.new_summary()
        elif req.node in self._shared:
            summary = self.summaries[req.node] = summary.copy()
            self._shared.discard(req.node)
        summary.add(req.path)
        vd = self.vds.peek(req.path)
        if vd is not None:
            vd.holders.add(req.node)
        elif req.path in self._merging:
            self._merging[req.path].append(("holder", req.node))
        elif req.new_dir:
            # The mkdir's manager found no such name anywhere: its VD is empty.
            vd = VirtualDirectory(holders={req.node})
            if self.config.aging:
                vd.built = yield NOW
            self.vds.put(req.path, vd)

    # ------------------------------------------------------------------ virtual directories
    def ensure_vd(self, directory: str) -> Gen:
        """The VD of ``directory`` and how it was found: 3 = cached, 4 = dirmerge."""
        vd = self.vds.get(directory)
        if vd is not None:
            age = self.config.vd_max_age_s
            if not age or (yield NOW) - vd.built <= age:
                return vd, 3
            self.vds.pop(directory)  # too old: the local trees may have changed
        return (yield from self.dirmerge(directory)), 4

    def dirmerge(self, directory: str) -> Gen:
        """Build a VD from the local directories of the nodes whose summary says
        they may hold it (FedFS 2.2).  Bloom filters give no false negatives, so
        no holder is missed; false positives cost one wasted ReadDir each.

        One merge per directory at a time: a request that finds a merge of the
        same directory in flight waits for its result instead of starting its
        own, so concurrent first lookups do not multiply the fan-out."""
        if directory in self._merging:
            self.stats.merge_waits += 1
            result = yield Await(("dirmerge", directory))
            if isinstance(result, BaseException):
                raise result
            return result
        pending: list[Any] = []
        self._merging[directory] = pending
        try:
            vd = yield from self._merge(directory, pending)
        except Exception as exc:
            del self._merging[directory]
            yield Wake(("dirmerge", directory), exc)
            raise
        del self._merging[directory]
        yield Wake(("dirmerge", directory), vd)
        return vd

    def _merge(self, directory: str, pending: list[Any]) -> Gen:
        yield Compute("bloom_probe", len(self.members))
        candidates = [
            n for n in self.members if (s := self.summaries.get(n)) is None or s.may_contain(directory)
        ]
        answers: dict[int, Any] = {}
        if self.id in candidates:
            try:
                answers[self.id] = yield Local("listdir", directory)
            except OSError as exc:
                answers[self.id] = exc
        remote = tuple(n for n in candidates if n != self.id)
        if remote:
            replies = yield Multicast(remote, ReadDir(directory))
            answers.update(zip(remote, replies, strict=True))
        vd = VirtualDirectory()
        if self.config.aging:
            vd.built = yield NOW  # when the merge started: updates after it are replayed
        not_dir = unavailable = False
        for node in sorted(answers):
            ans = answers[node]
            if isinstance(ans, PeerUnavailable):
                unavailable = True
            elif isinstance(ans, NotADirectoryError):
                not_dir = True
            elif isinstance(ans, BaseException):
                continue  # ENOENT: a Bloom false positive
            else:
                vd.holders.add(node)
                for name, is_dir in ans:
                    self._merge_entry(vd, name, is_dir, node)
        for op in pending:  # namespace updates that arrived while the merge was in flight
            self._apply_vd_update(vd, op)
        if vd.collisions or self.collisions:
            self._note_collisions(directory, vd)
        st = self.stats
        st.dirmerges += 1
        st.dirmerge_contacted.append(len(remote))
        st.dirmerge_holders.append(len(vd.holders - {self.id}))
        st.merges_by_dir[directory] += 1
        if not vd.holders and directory != ROOT:
            if unavailable:
                raise PeerUnavailable(-1, f"no reachable holder of {directory}")
            if not not_dir:
                # Summaries hold directories only, so a file by this name was
                # never asked: its parent's VD tells ENOTDIR from ENOENT (error
                # path only; raises ENOENT itself if an ancestor is missing).
                parent, name = split(directory)
                r = yield from self.call(self.manager_of(parent), GetEntry(parent, name))
                not_dir = r is not None and not r[0]
            raise fs_error(errno.ENOTDIR if not_dir else errno.ENOENT, directory)
        if unavailable:
            st.incomplete_merges += 1  # serve it, but do not cache a partial VD
        else:
            self.vds.put(directory, vd)
        return vd

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
            vd.entries.pop(op[1], None)
        else:  # ("holder", node)
            vd.holders.add(op[1])

    def _vd_update(self, directory: str, op: tuple[Any, ...]) -> None:
        vd = self.vds.peek(directory)
        if vd is not None:
            self._apply_vd_update(vd, op)
        elif directory in self._merging:
            self._merging[directory].append(op)
        # else: not cached; the next dirmerge reads the local directories

    def on_add_entry(self, src: int, req: AddEntry) -> None:
        entry = DIR_ENTRY if req.is_dir else DTEntry(False, req.home)
        self._vd_update(req.directory, ("add", req.name, entry))

    def on_del_entry(self, src: int, req: DelEntry) -> None:
        self._vd_update(req.directory, ("del", req.name))

    def on_get_entry(self, src: int, req: GetEntry) -> Gen:
        vd, how = yield from self.ensure_vd(req.directory)
        entry = vd.entries.get(req.name)
        if entry is None and how == 3 and self.config.vd_miss_age_s:
            # A miss in an older VD: the name may have been created in a local
            # tree outside the federation since; look once more.
            if (yield NOW) - vd.built >= self.config.vd_miss_age_s:
                self.vds.pop(req.directory)
                vd, how = (yield from self.dirmerge(req.directory)), 4
                entry = vd.entries.get(req.name)
        if entry is None:
            return None
        return entry.is_dir, entry.home, how

    def on_read_dir(self, src: int, req: ReadDir) -> Gen:
        return (yield Local("listdir", req.path))

    def on_list_vd(self, src: int, req: ListVD) -> Gen:
        vd, _ = yield from self.ensure_vd(req.path)
        return sorted((name, e.is_dir) for name, e in vd.entries.items())

    # ------------------------------------------------------------------ lookup
    def _resolve(self, path: str, check_dt: bool) -> Gen:
        """At P's manager: (is_dir, home, lookup_path) from the DT, else from
        the parent's manager.  ENOENT if the name does not exist."""
        if check_dt:
            e = self.dt.get(path)
            if e is not None:
                return e.is_dir, e.home, 2
        d, name = split(path)
        r = yield from self.call(self.manager_of(d), GetEntry(d, name))
        if r is None:
            raise fs_error(errno.ENOENT, path)
        is_dir, home, how = r
        self.dt.put(path, DIR_ENTRY if is_dir else DTEntry(False, home))
        return is_dir, home, how

    def on_home_info(self, src: int, req: HomeInfo) -> Gen:
        path = req.path
        if req.create is None:
            return (yield from self._resolve(path, check_dt=src != self.id))
        if self.dt.get(path) is not None:
            raise fs_error(errno.EEXIST, path)
        d, name = split(path)
        r = yield from self.call(self.manager_of(d), GetEntry(d, name))
        if r is not None:
            self.dt.put(path, DIR_ENTRY if r[0] else DTEntry(False, r[1]))
            raise fs_error(errno.EEXIST, path)
        if self.dt.peek(path) is not None:  # a concurrent create of the same name won
            raise fs_error(errno.EEXIST, path)
        is_dir = req.create == "dir"
        home = self.placement.choose_home(path, is_dir, src, self.id, self.members)
        self.dt.put(path, DIR_ENTRY if is_dir else DTEntry(False, home))
        return is_dir, home, 0

    def on_forget(self, src: int, req: Forget) -> None:
        self.dt.pop(req.path)

    def lookup(self, path: str) -> Gen:
        """Resolve a pathname to (DTEntry, from_own_dt) by the four paths of FedFS 3.1."""
        return (yield from self._lookup(normalize(path)))

    def _lookup(self, path: str) -> Gen:
        """``lookup`` of a path already in canonical form."""
        if path == ROOT:
            return DIR_ENTRY, False
        e = self.dt.get(path)
        if e is not None:
            self.stats.lookup_paths[1] += 1
            return e, True
        return (yield from self._lookup_at_manager(path)), False

    def _lookup_at_manager(self, path: str) -> Gen:
        """Ask P's manager (paths 2-4).  The manager skips its DT when it is
        this node (the caller just missed there).  Directory entries are cached
        only at their manager: a requester could not notice a stale one."""
        m = self.manager_of(path)
        is_dir, home, how = yield from self.call(m, HomeInfo(path))
        self.stats.lookup_paths[how] += 1
        entry = DIR_ENTRY if is_dir else DTEntry(False, home)
        if not is_dir and m != self.id:
            self.dt.put(path, entry)
        return entry

    def _at_home(self, path: str, make: Callable[[str], Request], dir_errno: int | None) -> Gen:
        """Look the canonical ``path`` up and run a request at its home.  A stale
        entry from this node's own DT (the file moved or was removed elsewhere)
        shows up as ENOENT from the old home: drop it and ask the manager once more."""
        entry, cached = yield from self._lookup(path)
        for attempt in (0, 1):
            if entry.is_dir:
                if dir_errno is None:
                    return None
                raise fs_error(dir_errno, path)
            try:
                return (yield from self.call(entry.home, make(path))), entry.home
            except FileNotFoundError:
                if not cached or attempt:
                    raise
                self.stats.stale_retries += 1
                self.dt.pop(path)
                entry = yield from self._lookup_at_manager(path)
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ file API (requester side)
    def create(self, path: str) -> Gen:
        """Create an empty regular file (exclusive: EEXIST if the name exists)."""
        path = normalize(path)
        yield Compute("fedfs_op")
        if path == ROOT:
            raise fs_error(errno.EEXIST, path)
        m = self.manager_of(path)
        _, home, _ = yield from self.call(m, HomeInfo(path, "file"))
        try:
            yield from self.call(home, Create(path))
        except OSError:
            yield from self.notify(m, Forget(path))  # undo the manager's reservation
            raise
        self.dt.put(path, DTEntry(False, home))
        return home

    def mkdir(self, path: str) -> Gen:
        path = normalize(path)
        yield Compute("fedfs_op")
        if path == ROOT:
            raise fs_error(errno.EEXIST, path)
        m = self.manager_of(path)
        _, home, _ = yield from self.call(m, HomeInfo(path, "dir"))
        try:
            yield from self.call(home, Mkdir(path))
        except OSError:
            yield from self.notify(m, Forget(path))
            raise
        return home

    def unlink(self, path: str) -> Gen:
        path = normalize(path)
        yield Compute("fedfs_op")
        yield from self._at_home(path, Unlink, errno.EISDIR)
        self.dt.pop(path)

    def rmdir(self, path: str) -> Gen:
        path = normalize(path)
        yield Compute("fedfs_op")
        if path == ROOT:
            raise fs_error(errno.EBUSY, path, "cannot remove the root of the federation")
        yield from self.call(self.manager_of(path), Rmdir(path))
        self.dt.pop(path)

    def readdir(self, path: str) -> Gen:
        """Sorted [(name, is_dir)] of a virtual directory."""
        path = normalize(path)
        yield Compute("fedfs_op")
        return (yield from self.call(self.manager_of(path), ListVD(path)))

    def stat(self, path: str) -> Gen:
        """(is_dir, size)."""
        path = normalize(path)
        yield Compute("fedfs_op")
        r = yield from self._at_home(path, Stat, None)
        return (True, 0) if r is None else tuple(r[0])

    def open(self, path: str) -> Gen:
        """Open a regular file; returns a descriptor for read/write/close."""
        path = normalize(path)
        yield Compute("fedfs_op")
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

    def close(self, fd: int) -> Gen:
        path, home = self._fd(fd)
        del self.fds[fd]
        yield from self.call(home, Close(path))

    def read(self, fd: int, offset: int, size: int) -> Gen:
        path, home = self._fd(fd)
        yield Compute("fedfs_op")
        return (yield from self.call(home, Read(path, offset, size)))

    def write(self, fd: int, offset: int, data: bytes) -> Gen:
        path, home = self._fd(fd)
        yield Compute("fedfs_op")
        return (yield from self.call(home, Write(path, offset, data)))

    # ------------------------------------------------------------------ handlers at the home
    def on_create(self, src: int, req: Create) -> Gen:
        created = yield Local("create", req.path)
        self.implicit_dirs.update(created)
        for d in created:
            yield from self._summary_add(d, new_dir=False)
        d, name = split(req.path)
        yield from self.notify(self.manager_of(d), AddEntry(d, name, False, self.id))
        self.dt.put(req.path, DTEntry(False, self.id))

    def on_mkdir(self, src: int, req: Mkdir) -> Gen:
        created = yield Local("mkdir", req.path)
        self.implicit_dirs.update(d for d in created if d != req.path)
        for d in created:
            yield from self._summary_add(d, new_dir=d == req.path)
        d, name = split(req.path)
        yield from self.notify(self.manager_of(d), AddEntry(d, name, True, self.id))

    def on_unlink(self, src: int, req: Unlink) -> Gen:
        path = req.path
        yield Local("unlink", path)
        self.dt.pop(path)
        d, name = split(path)
        if d in self.implicit_dirs:
            yield from self._prune(d)
        yield from self.notify(self.manager_of(d), DelEntry(d, name))
        m = self.manager_of(path)
        if m != self.id:
            yield from self.notify(m, Forget(path))

    def on_open(self, src: int, req: Open) -> Gen:
        yield Local("open", req.path)
        self.opens[req.path] += 1

    def on_close(self, src: int, req: Close) -> Gen:
        yield Local("close", req.path)
        if self.opens[req.path] > 1:
            self.opens[req.path] -= 1
        else:
            self.opens.pop(req.path, None)

    def on_stat(self, src: int, req: Stat) -> Gen:
        return (yield Local("stat", req.path))

    def on_read(self, src: int, req: Read) -> Gen:
        return (yield Local("read", req.path, (req.offset, req.size)))

    def on_write(self, src: int, req: Write) -> Gen:
        return (yield Local("write", req.path, (req.offset, req.data)))

    # ------------------------------------------------------------------ handlers at a directory's manager
    def on_rmdir(self, src: int, req: Rmdir) -> Gen:
        path = req.path
        is_dir, _, _ = yield from self._resolve(path, check_dt=True)
        if not is_dir:
            raise fs_error(errno.ENOTDIR, path)
        vd, _ = yield from self.ensure_vd(path)
        if vd.entries:
            raise fs_error(errno.ENOTEMPTY, path)
        for h in sorted(vd.holders):
            yield from self.call(h, RmLocal(path))
        self.vds.pop(path)
        self.dt.pop(path)
        d, name = split(path)
        yield from self.notify(self.manager_of(d), DelEntry(d, name))

    def on_rm_local(self, src: int, req: RmLocal) -> Gen:
        try:
            yield Local("rmdir", req.path)
        except FileNotFoundError:
            pass  # already gone here: rmdir is idempotent per holder
        self.implicit_dirs.discard(req.path)
        d = parent(req.path)
        if d in self.implicit_dirs:
            yield from self._prune(d)

    def _prune(self, directory: str) -> Gen:
        """Remove ``directory`` and its implicit ancestors from the local tree
        while they are empty.  The namespace does not change: an implicit
        directory was created to hold a file in a directory that exists on
        another node, and stays there."""
        d = directory
        while d in self.implicit_dirs:
            try:
                if (yield Local("listdir", d)):
                    return  # still holds something: pruned when that goes
                yield Local("rmdir", d)
            except OSError:
                self.implicit_dirs.discard(d)
                return  # changed under us (outside the federation): leave it
            self.implicit_dirs.discard(d)
            d = parent(d)

