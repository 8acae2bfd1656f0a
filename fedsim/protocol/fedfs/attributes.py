"""Attributes, file-system figures and durability: the operations a mounted
federation needs beyond FedFS's file API (issue 15): ``getattr``,
``setattr`` (chmod, chown, utimens), ``statfs`` and ``fsync``.

A regular file's attributes are its home's, answered from its local file
system (``GetAttr``/``SetAttr``).  ``getattr`` is the operation a mount calls
most (every path component the kernel looks up), so it, and ``setattr``
with it, take one round trip less than a lookup followed by a request
(``_by_name``): a requester that knows the file's home (its DT, lookup path
1) asks the home; any other asks the name's manager (``PathAttr``,
``PathSetAttr``), which resolves the name (its DT or the parent's manager,
paths 2-4) and serves a directory itself or forwards to the file's home,
and the requester caches the home it is told.

A directory exists on every node that holds it, each copy with its own
mode, owner and times, so one rule picks the answer and keeps giving it:

* ``getattr`` of a directory is its attributes at the *lowest-numbered
  holder* its manager knows (the holders of its virtual directory, known
  from the last dirmerge; the manager of a directory is the node that holds
  its VD), skipping the holders whose copy the federation made only to hold
  a file (a create's missing parents, ``Home.implicit_dirs``): such a copy
  appears, with its node's default mode, whenever a file is placed on a node
  that did not hold the directory, and must not change the answer.  Only if
  every copy is such a one does the lowest of them answer.  If a holder does
  not answer or lost the directory, the next one answers, and the silent one
  is a suspect (``Node.suspects``, as for a dirmerge) asked after the others
  for ``SUSPECT_S``: a dead member costs one timeout, not one per getattr.
  (Which copies are implicit is a node's memory: after a restart its
  implicit copies count as its own.)  The root is held by every member (the
  top of its local tree), so a requester asks the lowest member directly.
  ``nlink`` is 1, "unknown", as btrfs reports for directories,
  so that ``find`` does not use the leaf optimisation (the link count at one
  holder says nothing about the union's subdirectories); ``size`` is 0 (a
  union has no size of its own); ``ino`` comes from the path
  (``fedsim.protocol.attrs``).
* ``setattr`` of a directory applies at *every* holder, lowest first, so the
  rule above keeps answering what was set whichever holder answers.  The
  merge asks every candidate (as rmdir's does); if one may hold the directory
  but does not answer, nothing is changed and the error names it.  The
  lowest holder goes first: if it refuses (EPERM), nothing has changed.  A
  later holder refusing (its copy belongs to another user) leaves the copies
  before it changed and reports its error: the answer getattr gives already
  shows the change, and a repeat of the call finishes it.
* a directory's mtime is therefore its answering holder's: an entry added at
  another holder does not move it (the union has no mtime of its own).

``UTIME_NOW`` is the clock of the node whose local file system holds the
entry (each holder's, for a directory), as for any file system served over
a network.

``statfs`` is the aggregate of every member's local file system, as mNFS's
STATFS is: one ``FsStat`` multicast to the other members, their answers and
the requester's own summed (sizes in bytes, rebased to the smallest fragment
size; ``namemax`` the smallest).  A member that does not answer (down,
unreachable, its root lost) is left out: the figures are then a lower bound
of the federation's, and ``df`` or a program checking free space keeps
working while one member is down (its own files fail with EHOSTDOWN).

``fsync`` flushes a file at its home (``os.fsync`` of the real file; the
simulator's storage model charges a disk flush).

``stat`` stays as it was, the cheap ``(is_dir, size)`` of FedFS's file API:
it is what the Table 2 study and the workloads time, and its two-value reply
is what their simulated message sizes were calibrated with; a ``getattr``
reply carries ten values.  Both end at a file's home, so for a file ``stat``
is ``getattr`` minus the attributes; for a directory ``stat`` needs only the
lookup (``fednode.tools.attr_bench`` prints the two side by side).
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from fedsim.protocol.attrs import ATTR_WIRE, STATFS_WIRE, check_setattr, federated
from fedsim.protocol.effects import NOW, Compute, Local, Multicast
from fedsim.protocol.fedfs.directory import SUSPECT_S
from fedsim.protocol.fedfs.rename import Renaming
from fedsim.protocol.messages import PeerUnavailable, Request, fs_error, register_request
from fedsim.protocol.names import ROOT, normalize
from fedsim.protocol.node import Gen, api, handles
from fedsim.protocol.tables import DTEntry

_U64 = (1 << 64) - 1  # statfs figures are unsigned 64-bit counts


# --- at the home of a file, or at a holder of a directory ------------------------------------
@register_request
@dataclass(slots=True, frozen=True)
class GetAttr(Request):
    """This node's local attributes of ``path``, with the federated inode
    number.  Reply: ``attrs.Attr`` as a tuple."""

    reply: ClassVar[Any] = ATTR_WIRE
    path: str


@register_request
@dataclass(slots=True, frozen=True)
class SetAttr(Request):
    """Change ``path``'s attributes in this node's local file system (KEEP /
    UTIME_OMIT leave one as it is; see ``attrs``)."""

    reply: ClassVar[Any] = None
    path: str
    mode: int
    uid: int
    gid: int
    atime_ns: int
    mtime_ns: int


@register_request
@dataclass(slots=True, frozen=True)
class Fsync(Request):
    """Flush the file to stable storage at its home."""

    reply: ClassVar[Any] = None
    path: str


@register_request
@dataclass(slots=True, frozen=True)
class FsStat(Request):
    """This member's local file system figures (``statfs``).  Reply: ``attrs.StatFS`` as a tuple."""

    reply: ClassVar[Any] = STATFS_WIRE


# --- at a holder of a directory, from its manager --------------------------------------------
@register_request
@dataclass(slots=True, frozen=True)
class HolderAttr(Request):
    """This holder's attributes of directory ``path`` and whether its copy was
    made only to hold a file (module docstring).  Reply: (implicit, attr)."""

    reply: ClassVar[Any] = tuple[bool, ATTR_WIRE]
    path: str


# --- at the manager of a name ---------------------------------------------------------------
# (the same fields as GetAttr and SetAttr; their own types, because the
# manager's handlers differ: they resolve the name and pick or reach the holders)
@register_request
@dataclass(slots=True, frozen=True)
class PathAttr(GetAttr):
    """getattr at ``path``'s manager (module docstring).  Reply: (the
    attributes, the file's home or None for a directory, the lookup path)."""

    reply: ClassVar[Any] = tuple[ATTR_WIRE, int | None, int]


@register_request
@dataclass(slots=True, frozen=True)
class PathSetAttr(SetAttr):
    """setattr at ``path``'s manager: a directory's at every holder, lowest
    first, a file's at its home.  Reply: (None, the file's home or None, the lookup path)."""

    reply: ClassVar[Any] = tuple[None, int | None, int]


class Attributes(Renaming):
    # ------------------------------------------------------------------ the client API
    @api(str)
    def getattr(self, path: str) -> Gen:
        """``attrs.Attr`` of ``path`` (as a tuple): a file's from its home, a directory's by the rule above."""
        path = normalize(path)
        yield Compute("fedfs_op")
        if path == ROOT:  # every member holds it (its local tree's top): the lowest answers, no manager needed
            return (yield from self._lowest_holder(ROOT, sorted(self.members)))
        return (yield from self._by_name(path, GetAttr, PathAttr))

    @api(str, fd="opens")
    def create_open(self, path: str) -> Gen:
        """``create``, ``open`` and ``getattr`` of a new file in one call: (descriptor,
        attributes).  What a program's ``creat(2)`` on a mount needs, in one round trip
        of the mount to its agent instead of two (the three cannot share a pipeline:
        its calls run in no promised order).  Exclusive, as ``create``: EEXIST opens
        nothing.  An open that fails after the create removes the file again, so a
        failed call leaves no trace; the attributes are None if the file went before
        they were read (it is open: the caller has it)."""
        yield from self.create(path)
        try:
            fd = yield from self.open(path)
        except OSError:
            try:
                yield from self.unlink(path)
            except OSError:
                pass  # gone already (another client unlinked it): nothing of ours is left
            raise
        try:
            attr = yield from self.getattr(path)
        except OSError:
            attr = None
        return fd, attr

    @api(str, int, int, int, int, int)
    def setattr(self, path: str, mode: int, uid: int, gid: int, atime_ns: int, mtime_ns: int) -> Gen:
        """chmod, chown and utimens in one (``attrs.KEEP`` leaves mode/uid/gid,
        ``UTIME_OMIT`` a time; ``UTIME_NOW`` is the holder's clock): at a
        file's home, at every holder of a directory."""
        path = normalize(path)
        check_setattr(path, mode, uid, gid, atime_ns, mtime_ns)
        yield Compute("fedfs_op")
        args = (mode, uid, gid, atime_ns, mtime_ns)
        yield from self._by_name(path, lambda p: SetAttr(p, *args), lambda p: PathSetAttr(p, *args))

    def _by_name(self, path: str, at_home: Callable[[str], Request], at_manager: Callable[[str], Request]) -> Gen:
        """The value of a request about canonical ``path``: ``at_home`` at the
        home this node's DT knows for a file (a stale entry is dropped there),
        else ``at_manager`` at the name's manager, which resolves the name and
        serves a directory itself or forwards to a file's home; the home it
        names is cached.  One round trip either way, not a lookup and then one."""
        e = self.dt.peek(path)
        if e is not None and not e.is_dir:
            r = yield from self._at_home(path, at_home, None)
            if r is not None:
                return r[0]
        m = self.manager_of(path)
        for attempt in (0, 1):
            try:
                value, home, how = yield from self._busy(lambda: self.call(m, at_manager(path)))
                break
            except OSError as exc:
                if exc.errno != errno.ESTALE:
                    raise
                if attempt:  # renamed away twice while we looked (as in ``_at_home``)
                    raise fs_error(errno.ENOENT, path) from None
        if how:
            self.stats.lookup_paths[how] += 1
        if home is not None and m != self.id:
            self.dt.put(path, DTEntry(False, home))
        return value

    @api()
    def statfs(self) -> Gen:
        """``attrs.StatFS`` (as a tuple) of the whole federation: every member's
        local file system summed (a member that does not answer is left out)."""
        yield Compute("fedfs_op")
        answers: list[Any] = []
        try:
            answers.append((yield Local("statfs", ROOT)))
        except OSError as exc:
            answers.append(exc)
        others = tuple(n for n in self.members if n != self.id)
        if others:
            answers += yield Multicast(others, FsStat())
        figures = [a for a in answers if not isinstance(a, BaseException)]
        if not figures:
            err = next(a for a in answers if isinstance(a, BaseException))
            raise err
        return _sum_statfs(figures)

    @api(int, fd="uses")
    def fsync(self, fd: int) -> Gen:
        """Flush an open file's data and metadata at its home."""
        path, home = self._fd(fd)
        yield Compute("fedfs_op")
        yield from self.call(home, Fsync(path))

    # ------------------------------------------------------------------ at a home or holder
    @handles(GetAttr)
    def on_getattr(self, src: int, req: GetAttr) -> Gen:
        path = req.path
        if not self.gates and not self.moved:  # the hot path, as on_stat's
            local = yield Local("getattr", path)
        else:
            local = yield from self._local("getattr", path)
        return federated(local, path, self.id)

    @handles(SetAttr)
    def on_setattr(self, src: int, req: SetAttr) -> Gen:
        args = (req.mode, req.uid, req.gid, req.atime_ns, req.mtime_ns)
        check_setattr(req.path, *args)  # a peer's request is as untrusted as a client's
        yield from self._local("setattr", req.path, args)

    @handles(Fsync)
    def on_fsync(self, src: int, req: Fsync) -> Gen:
        # An open file cannot be renamed (EBUSY), so no rename gate can be in the way.
        yield Local("fsync", req.path)

    @handles(FsStat)
    def on_fs_stat(self, src: int, req: FsStat) -> Gen:
        return (yield Local("statfs", ROOT))

    @handles(HolderAttr)
    def on_holder_attr(self, src: int, req: HolderAttr) -> Gen:
        local = yield Local("getattr", req.path)
        return req.path in self.implicit_dirs, federated(local, req.path, self.id)

    # ------------------------------------------------------------------ at a directory's manager
    def _holders(self, path: str, ask_all: bool) -> Gen:
        vd, _ = yield from self.ensure_vd(path, ask_all=ask_all)
        return vd, sorted(vd.holders) or [self.id]  # (the root, before any merge found a holder)

    def _resolve_here(self, path: str) -> Gen:
        """(is_dir, home, lookup path) of a name managed here (the root is a directory)."""
        if path == ROOT:
            return True, None, 0
        return (yield from self.resolve(path, check_dt=True))

    @handles(PathAttr)
    def on_path_attr(self, src: int, req: PathAttr) -> Gen:
        path = req.path
        is_dir, home, how = yield from self._resolve_here(path)
        if is_dir:
            return (yield from self._dir_attr(path)), None, how
        return (yield from self.call(home, GetAttr(path))), home, how

    def _dir_attr(self, path: str) -> Gen:
        """A directory's attributes: its lowest holder's that is not a copy made for a file."""
        _, holders = yield from self._holders(path, ask_all=False)
        return (yield from self._lowest_holder(path, holders))

    def _lowest_holder(self, path: str, holders: list[int]) -> Gen:
        """The attributes at the lowest of ``holders`` that answers with a copy
        of its own (else the lowest implicit copy).  A holder that does not
        answer becomes a suspect (``Node.suspects``, as a dirmerge's silent
        peer does) and is asked again only after the others, so a dead member
        costs one timeout, not one per getattr of every directory it holds."""
        err: OSError | None = None
        fallback = None  # the lowest implicit copy's, if no holder has one of its own
        suspects = self.suspects
        order = holders
        if suspects:
            now = yield NOW
            for n in [n for n, until in suspects.items() if until <= now]:
                del suspects[n]
            order = [h for h in holders if h not in suspects] + [h for h in holders if h in suspects]
        for h in order:
            try:
                implicit, attr = yield from self.call(h, HolderAttr(path))
            except PeerUnavailable as exc:
                if exc.node == h:
                    suspects[h] = (yield NOW) + SUSPECT_S
                err = exc
                continue
            except FileNotFoundError as exc:
                err = exc  # gone since the merge: the next holder answers
                continue
            suspects.pop(h, None)  # it answered
            if not attr[0]:  # a file now, made outside the federation since the merge
                err = fs_error(errno.ENOTDIR, path)
            elif not implicit:
                return attr
            elif fallback is None:
                fallback = attr
        if fallback is not None:
            return fallback
        assert err is not None
        raise err

    @handles(PathSetAttr)
    def on_path_set_attr(self, src: int, req: PathSetAttr) -> Gen:
        path = req.path
        args = (req.mode, req.uid, req.gid, req.atime_ns, req.mtime_ns)
        check_setattr(path, *args)
        is_dir, home, how = yield from self._resolve_here(path)
        if not is_dir:
            yield from self.call(home, SetAttr(path, *args))
            return None, home, how
        vd, holders = yield from self._holders(path, ask_all=True)
        if vd.unreachable >= 0:  # its copy would keep the old attributes
            raise PeerUnavailable(vd.unreachable, f"may hold {path} and did not answer its dirmerge")
        for h in holders:
            yield from self.call(h, SetAttr(path, *args))
        return None, None, how


def _sum_statfs(figures: list[tuple[int, ...]]) -> tuple[int, ...]:
    """The members' statfs figures as one file system's: block counts in
    bytes summed and rebased to the smallest fragment size, inode counts
    summed, the smallest bsize and namemax."""
    frsize = max(1, min(f[1] for f in figures))
    bsize = max(1, min(f[0] for f in figures))

    def blocks(i: int) -> int:
        return min(_U64, sum(f[i] * f[1] for f in figures) // frsize)

    files = min(_U64, sum(f[5] for f in figures))
    ffree = min(_U64, sum(f[6] for f in figures))
    return (bsize, frsize, blocks(2), blocks(3), blocks(4), files, ffree, min(f[7] for f in figures))
