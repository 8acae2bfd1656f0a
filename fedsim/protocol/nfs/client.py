"""The client side of NFS: every node is an entry a client may call, and
forwards each operation to the server as one procedure (``messages.py``).

What is kept here is what an NFS client keeps: the open files (a descriptor
names a path; the server has no notion of open), nothing cached.  Writes are
stable (FILE_SYNC), so close sends nothing (no COMMIT of unstable data is
owed) and an open is an ACCESS check.  At the server itself the calls are
local (``Node.call`` sends no message to the node itself).
"""

from __future__ import annotations

import errno
from typing import Any

from fedsim.protocol.attrs import KEEP, check_mknod, check_new, check_no_device, check_setattr, check_size, check_target
from fedsim.protocol.messages import Request, fs_error
from fedsim.protocol.names import ROOT, normalize
from fedsim.protocol.nfs.messages import (
    NfsAccess,
    NfsCommit,
    NfsCreate,
    NfsFsStat,
    NfsGetAttr,
    NfsLink,
    NfsLookup,
    NfsMkdir,
    NfsMknod,
    NfsRead,
    NfsReadDir,
    NfsReadDirPlus,
    NfsReadLink,
    NfsRemove,
    NfsRename,
    NfsRmdir,
    NfsSetAttr,
    NfsSymlink,
    NfsTruncate,
    NfsWrite,
)
from fedsim.protocol.nfs.server import Server
from fedsim.protocol.node import Gen, api


class ClientEntry(Server):
    """The file API of a node, over the procedures of the server."""

    def __init__(self, node_id: int, spec: Any, **kw: Any) -> None:
        super().__init__(node_id, spec, **kw)
        self.fds: dict[int, str] = {}
        self._next_fd = 3

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "open_files": len(self.fds)}

    def rpc(self, request: Request) -> Gen:
        """One procedure at the server (a local call at the server itself)."""
        return (yield from self.call(self.server, request))

    def _fd(self, fd: int) -> str:
        try:
            return self.fds[fd]
        except KeyError:
            raise OSError(errno.EBADF, f"bad file descriptor {fd}") from None

    def _new_fd(self, path: str) -> int:
        fd = self._next_fd
        self._next_fd += 1
        self.fds[fd] = path
        return fd

    # ------------------------------------------------------------------ the namespace
    @api(str, int, int, int, optional=3)
    def create(self, path: str, mode: int = KEEP, uid: int = KEEP, gid: int = KEEP) -> Gen:
        """An empty regular file (exclusive); returns the node that holds it (the server)."""
        path = normalize(path)
        check_new(path, mode, uid, gid)
        yield from self.rpc(NfsCreate(path, mode, uid, gid))
        return self.server

    @api(str, int, int, int, fd="opens", optional=3)
    def create_open(self, path: str, mode: int = KEEP, uid: int = KEEP, gid: int = KEEP) -> Gen:
        """create, open and getattr in one: (descriptor, attributes), one
        procedure (CREATE returns the new file's attributes)."""
        path = normalize(path)
        check_new(path, mode, uid, gid)
        attr = yield from self.rpc(NfsCreate(path, mode, uid, gid))
        return self._new_fd(path), attr

    @api(str, int, int, int, optional=3)
    def mkdir(self, path: str, mode: int = KEEP, uid: int = KEEP, gid: int = KEEP) -> Gen:
        path = normalize(path)
        check_new(path, mode, uid, gid)
        yield from self.rpc(NfsMkdir(path, mode, uid, gid))
        return self.server

    @api(str)
    def unlink(self, path: str) -> Gen:
        yield from self.rpc(NfsRemove(normalize(path)))

    @api(str)
    def rmdir(self, path: str) -> Gen:
        yield from self.rpc(NfsRmdir(normalize(path)))

    @api(str, str)
    def rename(self, old: str, new: str) -> Gen:
        yield from self.rpc(NfsRename(normalize(old), normalize(new)))

    @api(str)
    def readdir(self, path: str) -> Gen:
        """Sorted [(name, is_dir)]."""
        return (yield from self.rpc(NfsReadDir(normalize(path))))

    @api(str)
    def readdir_attrs(self, path: str) -> Gen:
        """Sorted [(name, is_dir, attributes or None)]: one READDIRPLUS."""
        return (yield from self.rpc(NfsReadDirPlus(normalize(path))))

    @api(str, str)
    def symlink(self, target: str, path: str) -> Gen:
        path = normalize(path)
        check_target(path, target)
        yield from self.rpc(NfsSymlink(path, target))
        return self.server

    @api(str)
    def readlink(self, path: str) -> Gen:
        path = normalize(path)
        if path == ROOT:
            raise fs_error(errno.EINVAL, path, "not a symlink")
        return (yield from self.rpc(NfsReadLink(path)))

    @api(str, int, int)
    def mknod(self, path: str, mode: int, dev: int) -> Gen:
        path = normalize(path)
        check_mknod(path, mode)
        check_no_device(path, mode, "nfs")
        if not 0 <= dev < 1 << 64:
            raise fs_error(errno.EINVAL, path, f"device number {dev} outside 0..2**64-1")
        yield from self.rpc(NfsMknod(path, mode))
        return self.server

    @api(str, str)
    def link(self, old: str, new: str) -> Gen:
        yield from self.rpc(NfsLink(normalize(old), normalize(new)))
        return self.server

    # ------------------------------------------------------------------ attributes
    @api(str)
    def stat(self, path: str) -> Gen:
        """(is_dir, size)."""
        return tuple((yield from self.rpc(NfsLookup(normalize(path)))))

    @api(str)
    def getattr(self, path: str) -> Gen:
        return (yield from self.rpc(NfsGetAttr(normalize(path))))

    @api(str, int, int, int, int, int)
    def setattr(self, path: str, mode: int, uid: int, gid: int, atime_ns: int, mtime_ns: int) -> Gen:
        path = normalize(path)
        check_setattr(path, mode, uid, gid, atime_ns, mtime_ns)
        yield from self.rpc(NfsSetAttr(path, mode, uid, gid, atime_ns, mtime_ns))

    @api(str, int)
    def truncate(self, path: str, size: int) -> Gen:
        path = normalize(path)
        check_size(path, size)
        yield from self.rpc(NfsTruncate(path, size))
        return self.server

    @api()
    def statfs(self) -> Gen:
        return (yield from self.rpc(NfsFsStat()))

    # ------------------------------------------------------------------ open files
    @api(str, fd="opens")
    def open(self, path: str) -> Gen:
        """A descriptor for read/write/close, once the server says the name is a regular file."""
        path = normalize(path)
        yield from self.rpc(NfsAccess(path))
        return self._new_fd(path)

    @api(int, fd="closes")
    def close(self, fd: int) -> Gen:
        self._fd(fd)
        del self.fds[fd]
        return
        yield

    @api(int, int, int, fd="uses", size_arg=2)
    def read(self, fd: int, offset: int, size: int) -> Gen:
        return (yield from self.rpc(NfsRead(self._fd(fd), offset, size)))

    @api(int, int, bytes, fd="uses")
    def write(self, fd: int, offset: int, data: bytes) -> Gen:
        return (yield from self.rpc(NfsWrite(self._fd(fd), offset, data)))

    @api(int, fd="uses")
    def fsync(self, fd: int) -> Gen:
        yield from self.rpc(NfsCommit(self._fd(fd)))
