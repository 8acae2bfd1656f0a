"""File attributes as the federation reports them: the values ``getattr``
and ``statfs`` return, the sentinels of ``setattr``, and the federated inode
numbers.  One module that the protocol, the local layers (``fedsim.memfs``,
``fednode.localfs``) and the client (``fednode.client``) all import, so the
tuple layouts and the checks exist once.

Inode numbers (``ino``; FUSE's ``use_ino``)
    The same name has the same number seen from every node and across calls,
    never 0, and 1 only for the root (FUSE's root inode).  Within 63 bits:

    * a regular file: ``(home + 1) << 48 | local_ino`` while its home's id is
      below 2**14 - 1 and its local ``st_ino`` below 2**48 (every ext4 inode;
      XFS's and btrfs' numbers in all but huge file systems): exact, so two
      files never share a number (the home and its local inode identify a
      file).  Beyond those ranges a 48-bit hash of (home, local_ino) stands in
      for ``local_ino``: two such files collide with odds about n**2 / 2**49
      for n such files on one home.
    * a directory (it exists on several holders, under one path): bit 62 set
      and a 62-bit hash (MurmurHash3 x64/128, the family the managers' hash
      is from) of its canonical path below it, the same
      at every node with no message.  Two of n directories share a number
      with odds about n**2 / 2**63 (1 in 10**7 for a million directories).
      File and directory numbers never meet (bit 62).
    * rename keeps a file's number: a rename within a directory renames the
      file in its home's local tree (never copies it), which keeps its local
      inode, and its home stays.  Directories are not renamed (EXDEV); a
      directory removed and made again under the same path gets the same
      number, as it would from any path-hashed scheme.

Times are integer nanoseconds since the epoch, on the clock of the node
whose local file system holds the entry (``UTIME_NOW`` is that node's now).
"""

from __future__ import annotations

import errno
from typing import NamedTuple

import mmh3

from fedsim.protocol.messages import fs_error
from fedsim.protocol.names import ROOT

ROOT_INO = 1
#: ``setattr``'s mode, uid and gid: leave it as it is (chown's -1)
KEEP = -1
#: ``setattr``'s times: set to the holder's current time / leave unchanged
#: (utimensat's UTIME_NOW and UTIME_OMIT, outside every settable time)
UTIME_NOW = 1 << 62
UTIME_OMIT = (1 << 62) + 1
#: settable times lie in [-TIME_LIMIT, TIME_LIMIT) ns (about +-146 years around 1970)
TIME_LIMIT = 1 << 62
#: the largest uid/gid (2**32 - 1 is chown's own "unchanged" in C)
ID_MAX = (1 << 32) - 2
PERM_BITS = 0o7777
#: the largest file size or offset (off_t)
OFF_MAX = (1 << 63) - 1

_FILE_SHIFT = 48
_FILE_HOMES = (1 << 14) - 1  # home + 1 must fit bits 48..61
_DIR_BIT = 1 << 62


class Attr(NamedTuple):
    """What ``getattr`` returns (a ``stat`` of the federated name)."""

    is_dir: bool
    mode: int  # full st_mode: S_IFREG/S_IFDIR and the permission bits
    nlink: int  # 1 for directories: unknown (several holders), as btrfs says
    uid: int
    gid: int
    size: int
    atime_ns: int
    mtime_ns: int
    ctime_ns: int
    ino: int


class StatFS(NamedTuple):
    """What ``statfs`` returns: the members' local file systems summed (see ``Requester.statfs``)."""

    bsize: int
    frsize: int
    blocks: int  # in frsize units
    bfree: int
    bavail: int
    files: int
    ffree: int
    namemax: int


#: the reply type of a local ``getattr`` and of ``GetAttr``: Attr's fields,
#: the last being the local inode number (local layer) or the federated one
ATTR_WIRE = tuple[bool, int, int, int, int, int, int, int, int, int]
STATFS_WIRE = tuple[int, int, int, int, int, int, int, int]


def file_ino(home: int, local_ino: int) -> int:
    """The federated inode number of the regular file ``local_ino`` at ``home``."""
    if 0 <= home < _FILE_HOMES and 0 <= local_ino < 1 << _FILE_SHIFT:
        return (home + 1) << _FILE_SHIFT | local_ino
    low = mmh3.hash128(f"{home}:{local_ino}", 0, True, signed=False) & ((1 << _FILE_SHIFT) - 1)
    return (min(home, _FILE_HOMES - 1) % _FILE_HOMES + 1) << _FILE_SHIFT | low


def home_of_ino(ino: int) -> int | None:
    """The home a regular file's federated inode number names (``file_ino``),
    or None where it names none for sure: a directory, the root, a home at or
    beyond the last exact id.  A client uses it as a hint only (the file may
    have moved since): the requester that receives the call still finds the
    file (``fedsim.protocol.routing``)."""
    if ino & _DIR_BIT or ino >> _FILE_SHIFT == 0:
        return None
    home = (ino >> _FILE_SHIFT) - 1
    return home if home < _FILE_HOMES - 1 else None


def dir_ino(path: str) -> int:
    """The federated inode number of the directory at canonical ``path``."""
    if path == ROOT:
        return ROOT_INO
    return _DIR_BIT | mmh3.hash128(path.encode("utf-8", "surrogateescape"), 0, True, signed=False) & (_DIR_BIT - 1)


def federated(local: tuple, path: str, home: int) -> tuple:
    """A local ``getattr`` result as the federation reports it: the inode
    number made federated, and nlink 1 for a directory (its link count at
    one holder says nothing about the union)."""
    is_dir = local[0]
    if is_dir:
        return (*local[:2], 1, *local[3:9], dir_ino(path))
    return (*local[:9], file_ino(home, local[9]))


def check_size(path: str, size: int) -> None:
    """EINVAL unless ``size`` is a file size (0..OFF_MAX), before any message is sent."""
    if not 0 <= size <= OFF_MAX:
        raise fs_error(errno.EINVAL, path, f"size {size} outside 0..2**63-1")


def check_setattr(path: str, mode: int, uid: int, gid: int, atime_ns: int, mtime_ns: int) -> None:
    """EINVAL unless every value of a ``setattr`` is KEEP/a sentinel or in range.

    Checked by the requester (before any message), by the holder (a peer's
    request is untrusted) and by both local layers."""
    if mode != KEEP and not 0 <= mode <= PERM_BITS:
        raise fs_error(errno.EINVAL, path, f"mode {mode:#o} has bits outside 0o7777")
    for what, v in (("uid", uid), ("gid", gid)):
        if v != KEEP and not 0 <= v <= ID_MAX:
            raise fs_error(errno.EINVAL, path, f"{what} {v} outside 0..{ID_MAX} (or -1: unchanged)")
    for what, t in (("atime", atime_ns), ("mtime", mtime_ns)):
        if t not in (UTIME_NOW, UTIME_OMIT) and not -TIME_LIMIT <= t < TIME_LIMIT:
            raise fs_error(errno.EINVAL, path, f"{what} {t} ns outside +-2**62 (or UTIME_NOW/UTIME_OMIT)")


__all__ = [
    "ATTR_WIRE", "KEEP", "OFF_MAX", "ROOT_INO", "STATFS_WIRE", "UTIME_NOW", "UTIME_OMIT", "Attr", "StatFS",
    "check_setattr", "check_size", "dir_ino", "federated", "file_ino", "home_of_ino",
]  # fmt: skip
