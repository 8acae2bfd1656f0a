"""Attributes, file-system figures and durability: the operations a mounted
federation needs beyond FedFS's file API (issue 15): ``getattr``,
``setattr`` (chmod, chown, utimens), ``statfs`` and ``fsync``.

A regular file's attributes are its home's: the requester looks the name up
(the four lookup paths) and asks the home (``GetAttr``/``SetAttr``), which
answers from its local file system.  A directory exists on every node that
holds it, each copy with its own mode, owner and times, so one rule picks
the answer and keeps giving it:

* ``getattr`` of a directory is its attributes at the *lowest-numbered
  holder* its manager knows (the holders of its virtual directory, known
  from the last dirmerge; the manager of a directory is the node that holds
  its VD).  If that holder does not answer or lost the directory, the next
  one answers.  ``nlink`` is 1, "unknown", as btrfs reports for directories,
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
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import Any, ClassVar

from fedsim.protocol.attrs import ATTR_WIRE, STATFS_WIRE, check_setattr, federated
from fedsim.protocol.effects import Compute, Local, Multicast
from fedsim.protocol.fedfs.rename import Renaming
from fedsim.protocol.messages import PeerUnavailable, Request, fs_error, register_request
from fedsim.protocol.names import ROOT, normalize
from fedsim.protocol.node import Gen, api, handles

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


# --- at the manager of a directory ----------------------------------------------------------
@register_request
@dataclass(slots=True, frozen=True)
class DirAttr(Request):
    """The attributes of directory ``path``: its lowest holder's (module docstring)."""

    reply: ClassVar[Any] = ATTR_WIRE
    path: str


@register_request
@dataclass(slots=True, frozen=True)
class DirSetAttr(Request):
    """Set directory ``path``'s attributes at every holder, lowest first."""

    reply: ClassVar[Any] = None
    path: str
    mode: int
    uid: int
    gid: int
    atime_ns: int
    mtime_ns: int


class Attributes(Renaming):
    # ------------------------------------------------------------------ the client API
    @api(str)
    def getattr(self, path: str) -> Gen:
        """``attrs.Attr`` of ``path`` (as a tuple): a file's from its home, a directory's by the rule above."""
        path = normalize(path)
        yield Compute("fedfs_op")
        r = yield from self._at_home(path, GetAttr, None)
        if r is not None:
            return r[0]
        m = self.manager_of(path)
        return (yield from self._busy(lambda: self.call(m, DirAttr(path))))

    @api(str, int, int, int, int, int)
    def setattr(self, path: str, mode: int, uid: int, gid: int, atime_ns: int, mtime_ns: int) -> Gen:
        """chmod, chown and utimens in one (``attrs.KEEP`` leaves mode/uid/gid,
        ``UTIME_OMIT`` a time; ``UTIME_NOW`` is the holder's clock): at a
        file's home, at every holder of a directory."""
        path = normalize(path)
        check_setattr(path, mode, uid, gid, atime_ns, mtime_ns)
        yield Compute("fedfs_op")
        args = (mode, uid, gid, atime_ns, mtime_ns)
        r = yield from self._at_home(path, lambda p: SetAttr(p, *args), None)
        if r is None:
            m = self.manager_of(path)
            yield from self._busy(lambda: self.call(m, DirSetAttr(path, *args)))

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

    # ------------------------------------------------------------------ at a directory's manager
    def _holders(self, path: str, ask_all: bool) -> Gen:
        vd, _ = yield from self.ensure_vd(path, ask_all=ask_all)
        return vd, sorted(vd.holders) or [self.id]  # (the root, before any merge found a holder)

    @handles(DirAttr)
    def on_dir_attr(self, src: int, req: DirAttr) -> Gen:
        _, holders = yield from self._holders(req.path, ask_all=False)
        err: OSError | None = None
        for h in holders:
            try:
                attr = yield from self.call(h, GetAttr(req.path))
            except (PeerUnavailable, FileNotFoundError) as exc:
                err = exc  # gone since the merge: the next holder answers
                continue
            if not attr[0]:  # a file now, made outside the federation since the merge
                err = fs_error(errno.ENOTDIR, req.path)
                continue
            return attr
        assert err is not None
        raise err

    @handles(DirSetAttr)
    def on_dir_set_attr(self, src: int, req: DirSetAttr) -> Gen:
        args = (req.mode, req.uid, req.gid, req.atime_ns, req.mtime_ns)
        check_setattr(req.path, *args)
        vd, holders = yield from self._holders(req.path, ask_all=True)
        if vd.unreachable >= 0:  # its copy would keep the old attributes
            raise PeerUnavailable(vd.unreachable, f"may hold {req.path} and did not answer its dirmerge")
        for h in holders:
            yield from self.call(h, SetAttr(req.path, *args))


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
