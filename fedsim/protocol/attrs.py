"""File attributes as the federation reports them: the values ``getattr``
and ``statfs`` return, the sentinels of ``setattr``, and the federated inode
numbers.  One module that the protocol, the local layers (``fedsim.memfs``,
``fednode.localfs``) and the client (``fednode.client``) all import, so the
tuple layouts and the checks exist once.

Inode numbers (``ino``; FUSE's ``use_ino``)
    The same name has the same number seen from every node and across calls,
    never 0, and 1 only for the root (FUSE's root inode).  Within 63 bits:

    * a regular file (and a symlink or special file, which has a home as a
      file does: ``fedfs/links.py``): ``(home + 1) << 48 | local_ino`` while its home's id is
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
# st_mode's type bits (POSIX's values, as the ``stat`` module has them: the protocol imports no
# I/O-side module, tests/test_boundaries.py), for the kinds of entry a name may be (``fedfs/links.py``)
S_IFMT = 0o170000
S_IFDIR, S_IFREG, S_IFLNK = 0o040000, 0o100000, 0o120000
S_IFIFO, S_IFSOCK, S_IFCHR, S_IFBLK = 0o010000, 0o140000, 0o020000, 0o060000


def kind(mode: int) -> int:
    """``mode``'s type bits (``stat.S_IFMT``)."""
    return mode & S_IFMT


def is_regular(mode: int) -> bool:
    return mode & S_IFMT == S_IFREG


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
    mode: int  # full st_mode: the type bits (S_IFREG, S_IFDIR, S_IFLNK, S_IFIFO ...) and the permission bits
    nlink: int  # 1 for directories: unknown (several holders), as btrfs says
    uid: int
    gid: int
    size: int  # a symlink's: its target's length in bytes; a device's: its device number (see ``rdev``)
    atime_ns: int
    mtime_ns: int
    ctime_ns: int
    ino: int

    @property
    def rdev(self) -> int:
        """The device number of a character or block device, else 0.

        It travels in ``size``: a device has no size (Linux reports 0), and
        a field of its own would change ``ATTR_WIRE``, the reply of every
        attribute request, so that agents of before and after could not
        talk; ``ls -l`` of a device found in a node's tree (the federation
        makes none: ``links.py``) shows its major and minor from this."""
        return self.size if is_device(self.mode) else 0

    @property
    def st_size(self) -> int:
        """The size ``stat(2)`` gives: ``size``, except 0 for a device (whose ``size`` is its ``rdev``)."""
        return 0 if is_device(self.mode) else self.size


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


def is_device(mode: int) -> bool:
    """Whether ``mode`` is a character or block device's (whose ``Attr.size`` is its device number)."""
    return kind(mode) in (S_IFCHR, S_IFBLK)


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


#: a symlink's target, in bytes at most: PATH_MAX (4096) less its NUL, as symlink(2) takes
TARGET_MAX = 4095
#: the kinds ``mknod`` makes for anyone, and the devices it makes for root where allowed (``fedfs/links.py``)
NODE_TYPES = (S_IFIFO, S_IFSOCK)
DEVICE_TYPES = (S_IFCHR, S_IFBLK)


def check_target(path: str, target: object) -> None:
    """A symlink's target is data, stored verbatim and never interpreted: any
    string the kernel would store (``symlink(2)``'s errnos): ENOENT if empty,
    EINVAL with a NUL or what no file name can encode, ENAMETOOLONG beyond
    ``TARGET_MAX`` bytes.  Checked by the requester (before any message), the
    home (a peer's request is untrusted) and both local layers."""
    if type(target) is not str:
        raise fs_error(errno.EINVAL, path, "a symlink's target must be a string")
    if not target:
        raise fs_error(errno.ENOENT, path, "a symlink's target cannot be empty")
    if "\x00" in target:
        raise fs_error(errno.EINVAL, path, "a symlink's target cannot hold a NUL")
    if len(target) > TARGET_MAX or not target.isascii():
        try:
            raw = target.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            raise fs_error(errno.EINVAL, path, "a symlink's target must encode as a file name") from None
        if len(raw) > TARGET_MAX:
            raise fs_error(errno.ENAMETOOLONG, path, f"a symlink's target of {len(raw)} bytes (at most {TARGET_MAX})")


def target_size(target: str) -> int:
    """A symlink's size: its target's length in bytes, as ``lstat`` gives it."""
    return len(target) if target.isascii() else len(target.encode("utf-8", "surrogateescape"))


def special_entry(mode: int, value: object) -> tuple[object, ...]:
    """A symlink or special file in a local layer's ``tree()`` (MemFS and
    LocalFS alike, for tests): ("symlink", target) or ("node", its type bits,
    rdev): neither None (a directory) nor bytes (a file's content)."""
    if kind(mode) == S_IFLNK:
        return ("symlink", value)
    return ("node", kind(mode), value)


def check_mknod(path: str, mode: object, dev: object = 0, uid: int = KEEP, gid: int = KEEP) -> None:
    """``mknod``'s mode, device number and owner: a fifo, socket, character or
    block device with permission bits only (a regular file, directory or
    symlink is EINVAL: made by create, mkdir and symlink), ``dev`` in
    0..2**64-1, the owner as ``check_new``'s.  Who may make a device is ``check_device``'s (the requester's and the
    home's); a local layer makes what its home asks."""
    if type(mode) is not int or mode < 0 or mode & ~(S_IFMT | PERM_BITS):
        raise fs_error(errno.EINVAL, path, f"mknod mode {mode!r} has bits beyond a type and 0o7777")
    what = kind(mode)
    if what not in NODE_TYPES and what not in DEVICE_TYPES:
        raise fs_error(errno.EINVAL, path, f"mknod makes fifos, sockets and devices, not type {what:#o}")
    if type(dev) is not int or not 0 <= dev < 1 << 64:
        raise fs_error(errno.EINVAL, path, f"device number {dev!r} outside 0..2**64-1")
    check_new(path, KEEP, uid, gid)


def check_device(path: str, mode: int, uid: int, allowed: bool) -> None:
    """EPERM, as Linux gives a caller without CAP_MKNOD, for a character or
    block device unless the caller's ``uid`` is 0 (KEEP, no caller named,
    is not root) and the federation allows devices (``protocol.devices``:
    ``fedfs/links.py``).  Nothing for a fifo or socket."""
    if kind(mode) not in DEVICE_TYPES:
        return
    if not allowed:
        raise fs_error(
            errno.EPERM, path,
            "device files are off in this federation: set protocol.devices: true in the cluster file "
            "to let root make them",
        )  # fmt: skip
    if uid != 0:
        who = "no caller uid was given" if uid == KEEP else f"the caller's uid is {uid}"
        raise fs_error(errno.EPERM, path, f"only root (uid 0) may make a device file; {who}")


def check_no_device(path: str, mode: int, design: str) -> None:
    """EPERM for a character or block device in a design whose ``mknod`` carries no
    caller (every design but fedfs's, ``fedfs/links.py``): it cannot tell root."""
    if kind(mode) in DEVICE_TYPES:
        raise fs_error(errno.EPERM, path, f"device files are refused by the {design} design (no caller uid)")


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


def check_new(path: str, mode: int, uid: int, gid: int) -> None:
    """EINVAL unless the mode and owner a ``create``/``mkdir`` asks for are
    each KEEP (the home's default) or in range: the permission bits and
    set-id/sticky bits (0..0o7777, no file-type bits) and ids in 0..ID_MAX.

    A new name's mode and owner travel with the request that makes it, so the
    home makes the entry with them in one step: a create followed by a chmod
    and a chown would leave, between them or after a failure of the second,
    a file owned by the agent's user with the agent's default mode.  Checked
    where ``check_setattr`` is (requester, home, both local layers)."""
    check_setattr(path, mode, uid, gid, UTIME_OMIT, UTIME_OMIT)


def new_args(mode: int, uid: int, gid: int) -> tuple[int, ...]:
    """The ``Local`` arguments of a create/mkdir: none when every value is
    KEEP (the local layer's defaults; the hot path stays as it was)."""
    return () if mode == KEEP and uid == KEEP and gid == KEEP else (mode, uid, gid)


__all__ = [
    "ATTR_WIRE", "DEVICE_TYPES", "KEEP", "NODE_TYPES", "OFF_MAX", "ROOT_INO", "STATFS_WIRE", "TARGET_MAX",
    "UTIME_NOW", "UTIME_OMIT", "Attr", "StatFS", "check_device", "check_mknod", "check_new", "check_no_device",
    "check_setattr", "check_size", "check_target", "dir_ino", "federated", "file_ino", "home_of_ino", "is_device",
    "is_regular", "kind", "new_args", "special_entry", "target_size",
]  # fmt: skip
