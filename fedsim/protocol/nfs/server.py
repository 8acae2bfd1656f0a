"""The NFS server: one node whose local file system holds every file and
directory of the federation, serving the procedures of ``messages.py``.

It is stateless, as an NFSv3 server is: no open files, no client state; a
path is the file handle (the local layer confines it to the server's tree).
Every request is checked here as a client's call is at its entry (modes,
sizes, targets), because a peer's request is as untrusted as a client's, and
a request reaching a node that is not the server is refused.

Local operations make missing parents (``effects.LOCAL_OPS``: FedFS's homes
need that); an NFS server does not, so a new name's parent is checked first
(ENOENT, ENOTDIR).  The check and the creation are two local operations: an
rmdir of the parent between them would see it recreated (a real server holds
the directory's vnode lock across both; the simulated one does not).
"""

from __future__ import annotations

import errno
from typing import Any

from fedsim.protocol.attrs import (
    check_mknod,
    check_new,
    check_no_device,
    check_setattr,
    check_size,
    check_target,
    federated,
    new_args,
)
from fedsim.protocol.effects import Local
from fedsim.protocol.messages import Request, fs_error
from fedsim.protocol.names import ROOT, ancestors, join, parent
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
from fedsim.protocol.node import Gen, Node, handles


class Server(Node):
    """The server's handlers (every node has them; only the server answers)."""

    def __init__(self, node_id: int, spec: Any, **kw: Any) -> None:
        super().__init__(node_id, spec, **kw)
        #: the server: the federation's lowest member (a cluster file lists it first)
        self.server = min(spec.members)
        self.served = 0  # procedures this node served as the server

    def counters(self) -> dict[str, float]:
        return {**super().counters(), "server_requests": self.served}

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "server": self.server}

    def _serving(self, path: str) -> None:
        """EINVAL unless this node is the server (a peer that thinks otherwise is wrong or hostile)."""
        if self.id != self.server:
            raise fs_error(errno.EINVAL, path, f"node {self.id} is not the NFS server (node {self.server} is)")
        self.served += 1

    def handle(self, src: int, request: Request) -> Gen:
        """Any procedure; ENOENT for a name under a file becomes ENOTDIR, as POSIX says.  The local
        layer says ENOENT there (``LocalFS``, ``MemFS``: to FedFS a local tree is a partial view, so
        a file on the way means only "not here"); the NFS-family servers' trees are the namespace,
        so the first ancestor that is not a directory decides.  Only an error pays the check."""
        try:
            return (yield from super().handle(src, request))
        except FileNotFoundError as e:
            if not isinstance(e.filename, str) or not e.filename.startswith(ROOT):
                raise
            for a in ancestors(e.filename)[1:]:
                try:
                    is_dir, _ = yield Local("stat", a)
                except (FileNotFoundError, NotADirectoryError):
                    raise e from None
                if not is_dir:
                    raise fs_error(errno.ENOTDIR, a) from None
            raise

    def _new_name(self, path: str) -> Gen:
        """EEXIST for the root; ENOENT/ENOTDIR unless the parent is a directory."""
        if path == ROOT:
            raise fs_error(errno.EEXIST, path)
        d = parent(path)
        if d != ROOT:
            is_dir, _ = yield Local("stat", d)
            if not is_dir:
                raise fs_error(errno.ENOTDIR, d)

    # ------------------------------------------------------------------ attributes
    @handles(NfsLookup)
    def on_lookup(self, src: int, req: NfsLookup) -> Gen:
        self._serving(req.path)
        return (yield Local("stat", req.path))

    @handles(NfsGetAttr)
    def on_getattr(self, src: int, req: NfsGetAttr) -> Gen:
        self._serving(req.path)
        return federated((yield Local("getattr", req.path)), req.path, self.id)

    @handles(NfsSetAttr)
    def on_setattr(self, src: int, req: NfsSetAttr) -> Gen:
        self._serving(req.path)
        args = (req.mode, req.uid, req.gid, req.atime_ns, req.mtime_ns)
        check_setattr(req.path, *args)
        yield Local("setattr", req.path, args)

    @handles(NfsTruncate)
    def on_truncate(self, src: int, req: NfsTruncate) -> Gen:
        self._serving(req.path)
        check_size(req.path, req.size)
        yield Local("truncate", req.path, (req.size,))

    @handles(NfsFsStat)
    def on_fsstat(self, src: int, req: NfsFsStat) -> Gen:
        self._serving(ROOT)
        return (yield Local("statfs", ROOT))

    # ------------------------------------------------------------------ data
    @handles(NfsAccess)
    def on_access(self, src: int, req: NfsAccess) -> Gen:
        self._serving(req.path)
        yield Local("open", req.path)

    @handles(NfsRead)
    def on_read(self, src: int, req: NfsRead) -> Gen:
        self._serving(req.path)
        return (yield Local("read", req.path, (req.offset, req.size)))

    @handles(NfsWrite)
    def on_write(self, src: int, req: NfsWrite) -> Gen:
        self._serving(req.path)
        return (yield Local("write", req.path, (req.offset, req.data)))

    @handles(NfsCommit)
    def on_commit(self, src: int, req: NfsCommit) -> Gen:
        self._serving(req.path)
        yield Local("fsync", req.path)

    # ------------------------------------------------------------------ the namespace
    @handles(NfsCreate)
    def on_create(self, src: int, req: NfsCreate) -> Gen:
        self._serving(req.path)
        check_new(req.path, req.mode, req.uid, req.gid)
        yield from self._new_name(req.path)
        yield Local("create", req.path, new_args(req.mode, req.uid, req.gid))
        return federated((yield Local("getattr", req.path)), req.path, self.id)

    @handles(NfsMkdir)
    def on_mkdir(self, src: int, req: NfsMkdir) -> Gen:
        self._serving(req.path)
        check_new(req.path, req.mode, req.uid, req.gid)
        yield from self._new_name(req.path)
        try:
            yield Local("stat", req.path)
        except FileNotFoundError:
            yield Local("mkdir", req.path, new_args(req.mode, req.uid, req.gid))
            return
        raise fs_error(errno.EEXIST, req.path)  # the local mkdir is content with an existing directory

    @handles(NfsRemove)
    def on_remove(self, src: int, req: NfsRemove) -> Gen:
        self._serving(req.path)
        yield Local("unlink", req.path)

    @handles(NfsRmdir)
    def on_rmdir(self, src: int, req: NfsRmdir) -> Gen:
        self._serving(req.path)
        if req.path == ROOT:
            raise fs_error(errno.EBUSY, req.path, "cannot remove the root of the file system")
        yield Local("rmdir", req.path)

    @handles(NfsRename)
    def on_rename(self, src: int, req: NfsRename) -> Gen:
        """A file (symlink, special file) renamed in the server's tree.  A
        directory is EXDEV, as in FedFS (``mv`` then copies by itself)."""
        self._serving(req.old)
        is_dir, _ = yield Local("stat", req.old)
        if is_dir or req.old == ROOT:
            raise fs_error(errno.EXDEV, req.old, "renaming a directory is not supported")
        if req.new == ROOT:
            raise fs_error(errno.EISDIR, req.new)
        yield Local("rename", req.old, (req.new,))

    @handles(NfsReadDir)
    def on_readdir(self, src: int, req: NfsReadDir) -> Gen:
        self._serving(req.path)
        return sorted((yield Local("listdir", req.path)))

    @handles(NfsReadDirPlus)
    def on_readdirplus(self, src: int, req: NfsReadDirPlus) -> Gen:
        self._serving(req.path)
        out = []
        for name, is_dir in sorted((yield Local("listdir", req.path))):
            path = join(req.path, name)
            try:
                attr = federated((yield Local("getattr", path)), path, self.id)
            except FileNotFoundError:
                continue  # gone since the listing
            except OSError:
                attr = None
            out.append((name, is_dir, attr))
        return out

    # ------------------------------------------------------------------ links and special files
    @handles(NfsSymlink)
    def on_symlink(self, src: int, req: NfsSymlink) -> Gen:
        self._serving(req.path)
        check_target(req.path, req.target)
        yield from self._new_name(req.path)
        yield Local("symlink", req.path, (req.target,))

    @handles(NfsReadLink)
    def on_readlink(self, src: int, req: NfsReadLink) -> Gen:
        self._serving(req.path)
        return (yield Local("readlink", req.path))

    @handles(NfsMknod)
    def on_mknod(self, src: int, req: NfsMknod) -> Gen:
        self._serving(req.path)
        check_mknod(req.path, req.mode)
        check_no_device(req.path, req.mode, "nfs")
        yield from self._new_name(req.path)
        yield Local("mknod", req.path, (req.mode,))

    @handles(NfsLink)
    def on_link(self, src: int, req: NfsLink) -> Gen:
        self._serving(req.new)
        yield Local("stat", req.old)  # linkat(2)'s order: ENOENT for the old name first
        yield from self._new_name(req.new)
        yield Local("link", req.new, (req.old,))
