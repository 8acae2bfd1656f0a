"""An in-memory local file system: the simulator's stand-in for a node's disk.

It implements the local operations of ``fedsim.protocol.effects.LOCAL_OPS``
with the errno behaviour of a POSIX file system, so protocol code sees the
same failures in simulation as on ``fednode.localfs``.  Costs are not modelled
here (see ``fedsim.storage``); this is only the state.

With ``keep_data=False`` only file sizes are kept and reads return zeros:
the simulated SPEC SFS file set (~500 MB) then costs a few MB of memory.

Attributes: every entry has a mode, owner, three times and an inode number
(``meta``).  Times come from ``clock`` (integer nanoseconds), which the
runtime sets to its own clock (simulated time in the simulator, the settable
clock of the in-memory runtime), never the wall clock, so a simulation stays
a function of its seed; the default clock stands still at 0.  New entries
get the modes a process with umask 022 gets (0o644 files, 0o755
directories) and the owner ``uid``/``gid``.  There are no permission checks
(a simulated node may chown anything; create and mkdir give a new entry
the mode and owner asked for, as an agent running as root does).  create/write/truncate set mtime and
ctime, a change of a directory's entries its mtime and ctime, setattr the
ctime; a read does not touch atime (as ``noatime``: no real file system's
relatime heuristic is modelled).

Symlinks and special files (``special``: a symlink's target, 0 for a fifo
or socket, a device's number for a device; their type is their mode's): entries like files, as
``fednode.localfs`` serves them.  Nothing follows or opens one: a path
through one (as an intermediate "directory") is ELOOP naming it, and so are
open, read, write, truncate, fsync and listdir of one; stat and getattr
describe the entry itself (a symlink's size is its target's length);
unlink removes it; rename moves it and replaces one; chmod of a symlink is
EOPNOTSUPP, as Linux has no mode for a symlink.

Hard links (``link``): the names of one file share its data, its
attributes (the same ``meta`` list: one inode number, one mode, three
times) and its extended attributes; ``links`` holds the names of every file
that has more than one, so ``getattr``'s nlink is their count.  A file's
data is one bytearray for all its names (or, without ``keep_data``, a size
kept equal on each).  Unlinking one name keeps the others (the file's ctime
changes); a rename onto another name of the same file does nothing, as
``rename(2)`` says.

Extended attributes: per entry, name -> value (``xattrs``), with the names,
limits, flags and errnos of ``fedsim.protocol.xattrs``; they go with a
renamed file and with a removed entry.  No per-file space limit is modelled
(ext4's ENOSPC past about 4 KiB per file is the real file system's).
"""

from __future__ import annotations

import errno
import stat as _stat
from collections.abc import Callable, Iterable
from typing import Any

from fedsim.protocol.attrs import (
    KEEP,
    OFF_MAX,
    UTIME_NOW,
    UTIME_OMIT,
    check_mknod,
    check_new,
    check_setattr,
    check_target,
    is_device,
    special_entry,
    target_size,
)
from fedsim.protocol.effects import LOCAL_OPS
from fedsim.protocol.messages import fs_error
from fedsim.protocol.names import ROOT, ancestors, is_reserved, split, under
from fedsim.protocol.xattrs import USER, XATTR_CREATE, XATTR_REPLACE, check_list, check_name, check_set

FILE_MODE = _stat.S_IFREG | 0o644
DIR_MODE = _stat.S_IFDIR | 0o755
LINK_MODE = _stat.S_IFLNK | 0o777  # a symlink's mode on Linux, whatever the umask
UMASK = 0o022  # what mknod's permission bits lose (the umask the modes above assume)
#: errno of an operation that would follow or open a symlink or special file (``fednode.localfs``'s too)
FOREIGN_ERRNO = errno.ELOOP
BLOCK = 4096  # statfs's block size
# meta fields
_MODE, _UID, _GID, _ATIME, _MTIME, _CTIME, _INO = range(7)


class MemFS:
    """Directories as name -> is_dir maps, files as bytearrays (or sizes);
    every entry's attributes in ``meta`` (path -> [mode, uid, gid, atime,
    mtime, ctime, ino])."""

    def __init__(
        self,
        keep_data: bool = True,
        clock: Callable[[], int] | None = None,
        uid: int = 0,
        gid: int = 0,
        capacity_bytes: int = 1 << 40,
        capacity_inodes: int = 1 << 26,
        max_file_bytes: int | None = None,
    ) -> None:
        self.keep_data = keep_data
        #: a write or truncate past this is EFBIG: 4 GiB when the data is kept
        #: (memory), else off_t's limit (only a size is kept)
        self.max_file_bytes = max_file_bytes if max_file_bytes is not None else (1 << 32 if keep_data else OFF_MAX)
        #: now, in integer nanoseconds (see the module docstring)
        self.clock: Callable[[], int] = clock or (lambda: 0)
        self.uid, self.gid = uid, gid
        self.capacity_bytes, self.capacity_inodes = capacity_bytes, capacity_inodes
        self.dirs: dict[str, dict[str, bool]] = {ROOT: {}}
        self.files: dict[str, Any] = {}
        #: symlinks (path -> target), fifos/sockets (path -> 0), devices (path -> rdev): see the module docstring
        self.special: dict[str, Any] = {}
        self._next_ino = 1  # the root gets 2, as on ext4
        self.meta: dict[str, list[int]] = {ROOT: self._new_meta(DIR_MODE)}
        #: path -> its extended attributes (name -> value); an entry without any has none here
        self.xattrs: dict[str, dict[str, bytes]] = {}
        #: inode number -> the names of a file that has more than one (hard links)
        self.links: dict[int, set[str]] = {}
        self._ops: dict[str, Any] = {op: getattr(self, op) for op in LOCAL_OPS}  # bound once for apply

    # -- helpers --------------------------------------------------------------------
    def _new_meta(self, mode: int) -> list[int]:
        now = self.clock()
        self._next_ino += 1
        return [mode, self.uid, self.gid, now, now, now, self._next_ino]

    def _changed(self, path: str) -> None:
        """``path``'s content (a file's data, a directory's entries) changed now."""
        m = self.meta[path]
        m[_MTIME] = m[_CTIME] = self.clock()

    def _add(self, path: str, is_dir: bool, mode: int | None = None) -> None:
        p, name = split(path)
        self.dirs[p][name] = is_dir
        self.meta[path] = self._new_meta(mode if mode is not None else DIR_MODE if is_dir else FILE_MODE)
        self._changed(p)

    def _remove(self, path: str) -> None:
        p, name = split(path)
        del self.dirs[p][name]
        m = self.meta.pop(path)
        self.xattrs.pop(path, None)
        names = self.links.get(m[_INO]) if self.links else None
        if names is not None:  # another name keeps the file: its link count (and so its ctime) changed
            names.discard(path)
            if len(names) < 2:
                del self.links[m[_INO]]
            m[_CTIME] = self.clock()
        self._changed(p)

    def _sized(self, path: str, size: int) -> None:
        """Without ``keep_data``: ``path``'s size, on every name of its file."""
        names = self.links.get(self.meta[path][_INO]) if self.links else None
        for p in names or (path,):
            self.files[p] = size

    def _make_parents(self, path: str) -> list[str]:
        created = []
        for a in ancestors(path):
            if a in self.dirs:
                continue
            if a in self.files:
                raise fs_error(errno.ENOTDIR, a)
            if a in self.special:
                raise _foreign(a)
            self._add(a, True)
            self.dirs[a] = {}
            created.append(a)
        return created

    def _file(self, path: str) -> Any:
        if path in self.files:
            return self.files[path]
        if path in self.dirs:
            raise fs_error(errno.EISDIR, path)
        if path in self.special:
            raise _foreign(path)
        raise fs_error(errno.ENOENT, path)

    def _through_special(self, path: str) -> None:
        """ELOOP naming the first proper ancestor of ``path`` that is a symlink
        or special file: the local layer walks through none (``apply``)."""
        for a in ancestors(path):
            if a in self.special:
                raise _foreign(a)

    def _new_special(self, path: str, mode: int, value: Any) -> list[str]:
        """Make the symlink or special file ``path`` (exclusive, parents made as create's)."""
        if path in self.files or path in self.dirs or path in self.special:
            raise fs_error(errno.EEXIST, path)
        created = self._make_parents(path)
        self._add(path, False, mode)
        self.special[path] = value
        return created

    def populate(self, files: Iterable[tuple[str, int]], dirs: Iterable[str] = ()) -> None:
        """Pre-populate (as if written before the federation started)."""
        for d in dirs:
            self.mkdir(d)
        for path, size in files:
            self.create(path)
            self.files[path] = bytearray(size) if self.keep_data else size

    # -- LOCAL_OPS --------------------------------------------------------------------
    def _own(self, path: str, mode: int, uid: int, gid: int) -> None:
        """Set ``path``'s mode and owner where not KEEP (a new entry's, setattr's)."""
        m = self.meta[path]
        if mode != KEEP:
            m[_MODE] = _stat.S_IFMT(m[_MODE]) | mode
        if uid != KEEP:
            m[_UID] = uid
        if gid != KEEP:
            m[_GID] = gid

    def create(self, path: str, mode: int = KEEP, uid: int = KEEP, gid: int = KEEP) -> list[str]:
        check_new(path, mode, uid, gid)
        if path in self.files or path in self.dirs or path in self.special:
            raise fs_error(errno.EEXIST, path)
        created = self._make_parents(path)
        self._add(path, False)
        self.files[path] = bytearray() if self.keep_data else 0
        self._own(path, mode, uid, gid)
        return created

    def mkdir(self, path: str, mode: int = KEEP, uid: int = KEEP, gid: int = KEEP) -> list[str]:
        check_new(path, mode, uid, gid)
        if path in self.dirs:
            return []
        if path in self.files or path in self.special:
            raise fs_error(errno.EEXIST, path)
        created = self._make_parents(path)
        self._add(path, True)
        self.dirs[path] = {}
        self._own(path, mode, uid, gid)
        created.append(path)
        return created

    def unlink(self, path: str) -> None:
        if path in self.special:
            del self.special[path]
        else:
            self._file(path)
            del self.files[path]
        self._remove(path)

    def rmdir(self, path: str) -> None:
        if path not in self.dirs:
            raise fs_error(errno.ENOTDIR if path in self.files or path in self.special else errno.ENOENT, path)
        if self.dirs[path]:
            raise fs_error(errno.ENOTEMPTY, path)
        if path == ROOT:
            raise fs_error(errno.EBUSY, path)
        del self.dirs[path]
        self._remove(path)

    def listdir(self, path: str) -> list[tuple[str, bool]]:
        d = self.dirs.get(path)
        if d is None:
            if path in self.special:
                raise _foreign(path)
            raise fs_error(errno.ENOTDIR if path in self.files else errno.ENOENT, path)
        return sorted(d.items())

    def stat(self, path: str) -> tuple[bool, int]:
        if path in self.dirs:
            return (True, 0)
        v = self.special.get(path)
        if v is not None:
            return (False, target_size(v) if isinstance(v, str) else 0)  # (a device's size is 0, not its rdev)
        f = self._file(path)
        return (False, f if isinstance(f, int) else len(f))

    def open(self, path: str) -> None:
        self._file(path)

    def close(self, path: str) -> None:
        return None

    def read(self, path: str, offset: int, size: int) -> bytes:
        f = self._file(path)
        if offset < 0 or size < 0:
            raise fs_error(errno.EINVAL, path, "negative offset or size")
        if isinstance(f, int):
            return bytes(max(0, min(size, f - offset)))
        return bytes(f[offset : offset + size])

    def write(self, path: str, offset: int, data: bytes) -> int:
        f = self._file(path)
        if offset < 0:
            raise fs_error(errno.EINVAL, path, "negative offset")
        end = offset + len(data)
        if end > self.max_file_bytes:
            raise fs_error(errno.EFBIG, path)
        if isinstance(f, int):
            self._sized(path, max(f, end))
        else:
            if offset > len(f):
                f.extend(bytes(offset - len(f)))
            f[offset:end] = data
        self._changed(path)
        return len(data)

    def truncate(self, path: str, size: int) -> None:
        f = self._file(path)
        if size < 0:
            raise fs_error(errno.EINVAL, path, "negative size")
        if size > self.max_file_bytes:
            raise fs_error(errno.EFBIG, path)
        if isinstance(f, int):
            self._sized(path, size)
        elif size < len(f):
            del f[size:]
        else:
            f.extend(bytes(size - len(f)))
        self._changed(path)

    def rename(self, path: str, new: str) -> None:
        """The source is checked first (ENOENT, EISDIR), then the target (EISDIR
        for a directory, ENOENT when its parent is missing), as LocalFS does."""
        special = path in self.special
        data = self.special[path] if special else self._file(path)
        if self.special:
            self._through_special(new)
        if new in self.dirs:
            raise fs_error(errno.EISDIR, new)
        p, name = split(new)
        if p not in self.dirs:
            raise fs_error(errno.ENOENT, new)
        if new == path or self.meta.get(new) is self.meta[path]:
            return  # the same name, or two names of one file: nothing to do (rename(2))
        meta = self.meta[path]
        names = self.links.get(meta[_INO]) if self.links else None
        xattrs = self.xattrs.pop(path, None)
        self.unlink(path)
        if new in self.files or new in self.special:
            self.unlink(new)
        self.dirs[p][name] = False
        (self.special if special else self.files)[new] = data
        self.meta[new] = meta  # the same file: its inode number and times go with it
        if xattrs is not None:  # ... and its extended attributes
            self.xattrs[new] = xattrs
        if names is not None:  # the file's other names stay; ``new`` is one of them now
            names.discard(path)
            names.add(new)
            self.links[meta[_INO]] = names
        meta[_CTIME] = self.clock()
        self._changed(p)

    def rename_dir(self, path: str, new: str) -> None:
        """Rename the directory ``path`` with everything under it (the same
        inodes), atomically replacing an empty directory at ``new``.  The
        source is checked first (ENOENT, ENOTDIR, EBUSY for the root), then
        the target (EINVAL inside the source, ENOTDIR for a file, ENOTEMPTY,
        ENOENT when its parent is missing), as LocalFS does."""
        if path == ROOT:
            raise fs_error(errno.EBUSY, ROOT)
        if self.special:
            self._through_special(path)
        if path not in self.dirs:
            raise fs_error(errno.ENOTDIR if path in self.files or path in self.special else errno.ENOENT, path)
        if new == ROOT:
            raise fs_error(errno.EBUSY, ROOT)
        if new == path:
            return
        if under(new, path):
            raise fs_error(errno.EINVAL, new, "a directory cannot move into its own subtree")
        if self.special:
            self._through_special(new)
        if new in self.files or new in self.special:
            raise fs_error(errno.ENOTDIR, new)
        p, name = split(new)
        if p not in self.dirs:
            raise fs_error(errno.ENOENT, new)
        if new in self.dirs:
            self.rmdir(new)  # ENOTEMPTY unless empty
        cut = len(path)
        for table in (self.dirs, self.files, self.special, self.meta, self.xattrs):
            for q in [q for q in table if under(q, path)]:
                table[new + q[cut:]] = table.pop(q)
        for names in self.links.values():
            for q in [q for q in names if under(q, path)]:
                names.discard(q)
                names.add(new + q[cut:])
        op, oname = split(path)
        del self.dirs[op][oname]
        self.dirs[p][name] = True
        self.meta[new][_CTIME] = self.clock()
        self._changed(op)
        self._changed(p)

    def getattr(self, path: str) -> tuple[bool, int, int, int, int, int, int, int, int, int]:
        """(is_dir, mode, nlink, uid, gid, size, atime_ns, mtime_ns, ctime_ns, local inode number)."""
        m = self.meta.get(path)
        if m is None:
            raise fs_error(errno.ENOENT, path)
        d = self.dirs.get(path)
        if d is not None:
            nlink = 2 + sum(d.values())  # "." and its parent's entry, and each subdirectory's ".."
            return (True, m[_MODE], nlink, m[_UID], m[_GID], 0, m[_ATIME], m[_MTIME], m[_CTIME], m[_INO])
        if path in self.special:
            size = self._special_size(path)
        else:
            f = self.files[path]
            size = f if isinstance(f, int) else len(f)
        names = self.links.get(m[_INO]) if self.links else None
        nlink = len(names) if names else 1
        return (False, m[_MODE], nlink, m[_UID], m[_GID], size, m[_ATIME], m[_MTIME], m[_CTIME], m[_INO])

    def setattr(self, path: str, mode: int, uid: int, gid: int, atime_ns: int, mtime_ns: int) -> None:
        """Change what is not KEEP / UTIME_OMIT (UTIME_NOW: this file system's clock); ctime is now."""
        check_setattr(path, mode, uid, gid, atime_ns, mtime_ns)
        m = self.meta.get(path)
        if m is None:
            raise fs_error(errno.ENOENT, path)
        if mode != KEEP and _stat.S_ISLNK(m[_MODE]):
            raise fs_error(errno.EOPNOTSUPP, path, "a symlink has no mode of its own (Linux)")
        now = self.clock()
        self._own(path, mode, uid, gid)
        for i, t in ((_ATIME, atime_ns), (_MTIME, mtime_ns)):
            if t != UTIME_OMIT:
                m[i] = now if t == UTIME_NOW else t
        m[_CTIME] = now

    def statfs(self, path: str) -> tuple[int, int, int, int, int, int, int, int]:
        """(bsize, frsize, blocks, bfree, bavail, files, ffree, namemax) of this
        file system: ``capacity_bytes`` in 4 KiB blocks, less the blocks the
        files use; ``capacity_inodes`` less the entries."""
        if path not in self.meta:
            raise fs_error(errno.ENOENT, path)
        files = {self.meta[p][_INO]: f for p, f in self.files.items()} if self.links else self.files
        used = sum(-(-(f if isinstance(f, int) else len(f)) // BLOCK) for f in files.values())
        blocks = self.capacity_bytes // BLOCK
        free = max(0, blocks - used)
        inodes = self.capacity_inodes
        used_inodes = len(self.meta) - sum(len(names) - 1 for names in self.links.values())
        return (BLOCK, BLOCK, blocks, free, free, inodes, max(0, inodes - used_inodes), 255)

    def fsync(self, path: str) -> None:
        """Nothing to flush in memory; the file must exist (its cost is the storage model's)."""
        self._file(path)

    def symlink(self, path: str, target: str) -> list[str]:
        """A symlink holding ``target`` verbatim; returns the parents made (as create)."""
        check_target(path, target)
        return self._new_special(path, LINK_MODE, target)

    def link(self, path: str, old: str) -> list[str]:
        """A hard link ``path`` to the file, symlink or special file ``old``
        (never followed); returns the parents made (as create).  Errors in
        ``linkat(2)``'s order: ENOENT for ``old``, EEXIST for ``path``, EPERM
        when ``old`` is a directory.  The file's ctime becomes now."""
        if self.special:  # (the new name's parents: ``_make_parents``)
            self._through_special(old)
        m = self.meta.get(old)
        if m is None:
            raise fs_error(errno.ENOENT, old)
        if path in self.meta:
            raise fs_error(errno.EEXIST, path)
        created = self._make_parents(path)  # (ENOTDIR, ELOOP for a parent as create's, before EPERM: LocalFS's)
        if old in self.dirs:
            for d in reversed(created):
                self.rmdir(d)
            raise fs_error(errno.EPERM, old, "a directory cannot be hard linked")
        p, name = split(path)
        self.dirs[p][name] = False
        if old in self.special:
            self.special[path] = self.special[old]
        else:
            self.files[path] = self.files[old]  # a bytearray shared by both names (or a size: ``_sized``)
        self.meta[path] = m
        self.xattrs[path] = self.xattrs.setdefault(old, {})
        self.links.setdefault(m[_INO], {old}).add(path)
        m[_CTIME] = self.clock()
        self._changed(p)
        return created

    def readlink(self, path: str) -> str:
        if path in self.special and _stat.S_ISLNK(self.meta[path][_MODE]):
            return self.special[path]
        if path in self.meta:
            raise fs_error(errno.EINVAL, path, "not a symlink")
        raise fs_error(errno.ENOENT, path)

    def mknod(self, path: str, mode: int, dev: int = 0, uid: int = KEEP, gid: int = KEEP) -> list[str]:
        """A fifo, socket or device (``attrs.check_mknod``; who may make a device
        is its home's decision), its permission bits less ``UMASK``, owned by
        ``uid``/``gid`` where not KEEP; a device keeps ``dev`` (its rdev), a fifo
        or socket 0.  Returns the parents made."""
        check_mknod(path, mode, dev, uid, gid)
        value = dev if is_device(mode) else 0
        created = self._new_special(path, _stat.S_IFMT(mode) | (_stat.S_IMODE(mode) & ~UMASK), value)
        self._own(path, KEEP, uid, gid)
        return created

    def _special_size(self, path: str) -> int:
        v = self.special[path]
        return target_size(v) if isinstance(v, str) else v

    def _xattrs(self, path: str, name: str | None = None, write: bool = False) -> dict[str, bytes]:
        """``path``'s attributes; on a symlink or special file none in ``user.``
        (Linux: ``user.`` only on regular files and directories: reading
        ENODATA, writing EPERM), while ``trusted.`` and ``security.`` are kept."""
        if path not in self.meta:
            raise fs_error(errno.ENOENT, path)
        x = self.xattrs.get(path) or {}
        if path in self.special and (name is None or name.startswith(USER)):
            if write:
                raise fs_error(errno.EPERM, path, "no user extended attributes on a symlink or special file")
            return {n: v for n, v in x.items() if not n.startswith(USER)}
        return x

    def getxattr(self, path: str, name: str) -> bytes:
        check_name(path, name)
        value = self._xattrs(path, name).get(name)
        if value is None:
            raise fs_error(errno.ENODATA, path)
        return value

    def setxattr(self, path: str, name: str, value: bytes, flags: int) -> None:
        """Set ``name``; XATTR_CREATE fails (EEXIST) if it is set, XATTR_REPLACE (ENODATA) if not."""
        check_set(path, name, value, flags)
        have = name in self._xattrs(path, name, write=True)
        if have and flags & XATTR_CREATE:
            raise fs_error(errno.EEXIST, path)
        if not have and flags & XATTR_REPLACE:
            raise fs_error(errno.ENODATA, path)
        self.xattrs.setdefault(path, {})[name] = bytes(value)
        self.meta[path][_CTIME] = self.clock()

    def listxattr(self, path: str) -> list[str]:
        return check_list(path, list(self._xattrs(path)))

    def removexattr(self, path: str, name: str) -> None:
        check_name(path, name)
        x = self._xattrs(path, name, write=True)
        if name not in x:
            raise fs_error(errno.ENODATA, path)
        del x[name]
        self.meta[path][_CTIME] = self.clock()

    def list_dirs(self, path: str) -> list[str]:
        if path in self.special:
            raise _foreign(path)
        if path == ROOT:
            return list(self.dirs)
        prefix = path + "/"
        return [d for d in self.dirs if d == path or d.startswith(prefix)]

    # -- whole-tree view, for tests -----------------------------------------------------
    def tree(self) -> dict[str, Any]:
        """path -> None for directories, content (or size) for files."""
        out: dict[str, Any] = {d: None for d in self.dirs}
        for p, f in self.files.items():
            out[p] = f if isinstance(f, int) else bytes(f)
        for p, v in self.special.items():
            out[p] = special_entry(self.meta[p][_MODE], v)
        return out

    def apply(self, op: str, path: str, args: tuple[Any, ...] = ()) -> Any:
        """Run one LOCAL_OPS operation by name (what a runtime does for a Local effect)."""
        fn = self._ops.get(op)
        if fn is None:
            raise ValueError(f"unknown local operation {op!r}; allowed: {', '.join(LOCAL_OPS)}")
        if self.special and op != "close":  # (none: nothing to walk through; close never fails, as LocalFS's)
            check = _ARG_CHECKS.get(op)
            if check is not None:  # a bad argument first, as LocalFS refuses it before any system call
                check(path, *args)
            if op != "link":  # (link checks its old name's, then its new name's parents: LocalFS's order)
                self._through_special(path)  # (rename checks its target's, after its source: LocalFS's order)
        return fn(path, *args)


#: the argument checks of operations that validate before touching anything
_ARG_CHECKS: dict[str, Callable[..., None]] = {
    "setattr": check_setattr, "mknod": check_mknod, "symlink": check_target,
    "getxattr": check_name, "setxattr": check_set, "removexattr": check_name,
}  # fmt: skip


def _foreign(path: str) -> OSError:
    return fs_error(FOREIGN_ERRNO, path, "symlink or special file: never followed or opened by the federation")


def union_tree(trees: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The federated namespace as the members' local trees make it: the union
    of their paths (None for directories, a file's content from the last tree
    that has it).  The replica and orphan spaces are not part of it."""
    out: dict[str, Any] = {}
    for tree in trees:
        for p, v in tree.items():
            if is_reserved(p):
                continue
            if v is None:
                out.setdefault(p, None)
            else:
                out[p] = v
    return out
