"""NFSp's meta-server: to its clients an NFS server (every procedure of
``fedsim.protocol.nfs`` arrives here), holding the namespace and the
attributes in its local tree, with the data at the I/O daemons.

The file's data lives whole at the daemon its path hashes to (``iod_of``);
the meta-server keeps a *shadow* of each file, an empty sparse file cut to
the file's size, so getattr, lookup and readdir are answered here without
asking a daemon (as NFSp's meta-server does from its own inodes).

Data operations, as in the dNFSp paper (section 2, Fig. 1): the client
sends every request to the meta-server, which forwards the data operations
to the daemon holding the file; the daemon answers the client directly.
The effects have no reply from a third node, so the two directions are
written as follows, each keeping what costs most where the paper has it:

* a write carries its data to the meta-server ("clients send whole data
  blocks to the meta-servers"), which forwards it to the daemon and grows
  the shadow; the daemon's acknowledgement returns through the meta-server
  (one small message more than the paper's);
* a read goes to the meta-server, which checks the file and answers with
  the daemon's node; the client's entry then asks the daemon, whose reply
  carries the data to the client directly (the paper's request from the
  meta-server to the daemon is sent by the client instead: the same small
  message, from another node).

Renaming a file moves its data when its new path hashes to another daemon
(read there, written at the new one, in chunks).  Hard links are refused
(EPERM): data is placed by name, and two names would be two files.  A
federation of one node is its own daemon: the shadow is then the file.
"""

from __future__ import annotations

import errno

from fedsim.protocol.attrs import is_regular
from fedsim.protocol.effects import Compute, Local
from fedsim.protocol.hashing import path_hash
from fedsim.protocol.messages import ProtocolError, fs_error
from fedsim.protocol.nfs.messages import NfsCommit, NfsLink, NfsRemove, NfsRename, NfsTruncate, NfsWrite
from fedsim.protocol.nfsp.iod import Iod
from fedsim.protocol.nfsp.messages import IodCommit, IodRead, IodRemove, IodRename, IodTruncate, IodWrite, NfspRead
from fedsim.protocol.node import Gen, api, handles

#: the most a moved file's data travels in one message at a rename
MOVE_CHUNK = 1 << 16


class NfspMeta(Iod):
    """The meta-server's handlers, and the client entry's reads through the daemons."""

    @property
    def data_apart(self) -> bool:
        """Whether the data lives at daemons other than the meta-server."""
        return self.iods != (self.server,)

    def iod_of(self, path: str) -> int:
        """The daemon that holds ``path``'s data."""
        return self.iods[path_hash(path) % len(self.iods)]

    # ------------------------------------------------------------------ the client entry
    @api(int, int, int, fd="uses", size_arg=2)
    def read(self, fd: int, offset: int, size: int) -> Gen:
        path = self._fd(fd)
        if not self.data_apart:
            return (yield from super().read(fd, offset, size))
        iod = yield from self.rpc(NfspRead(path, offset, size))
        if iod not in self.iods:
            raise ProtocolError(f"NfspRead reply: node {iod} is no I/O daemon")
        return (yield from self.call(iod, IodRead(path, offset, size)))

    # ------------------------------------------------------------------ at the meta-server
    @handles(NfspRead)
    def on_nfsp_read(self, src: int, req: NfspRead) -> Gen:
        self._serving(req.path)
        yield Local("open", req.path)  # a regular file (NFS's handle check)
        yield Compute("hash")
        return self.iod_of(req.path)

    @handles(NfsWrite)
    def on_write(self, src: int, req: NfsWrite) -> Gen:
        if not self.data_apart:
            return (yield from super().on_write(src, req))
        self._serving(req.path)
        _, size = yield Local("stat", req.path)
        yield Local("open", req.path)
        yield Compute("hash")
        n = yield from self.call(self.iod_of(req.path), IodWrite(req.path, req.offset, req.data))
        if req.offset + n > size:
            yield Local("truncate", req.path, (req.offset + n,))  # the shadow grows with the file
        return n

    @handles(NfsTruncate)
    def on_truncate(self, src: int, req: NfsTruncate) -> Gen:
        yield from super().on_truncate(src, req)
        if self.data_apart:
            yield Compute("hash")
            yield from self.call(self.iod_of(req.path), IodTruncate(req.path, req.size))

    @handles(NfsCommit)
    def on_commit(self, src: int, req: NfsCommit) -> Gen:
        yield from super().on_commit(src, req)
        if self.data_apart:
            yield Compute("hash")
            yield from self.call(self.iod_of(req.path), IodCommit(req.path))

    @handles(NfsRemove)
    def on_remove(self, src: int, req: NfsRemove) -> Gen:
        self._serving(req.path)
        attr = yield Local("getattr", req.path)
        yield Local("unlink", req.path)
        if self.data_apart and is_regular(attr[1]):
            yield Compute("hash")
            yield from self.call(self.iod_of(req.path), IodRemove(req.path))

    @handles(NfsRename)
    def on_rename(self, src: int, req: NfsRename) -> Gen:
        """The shadow renamed first (it checks everything rename(2) does), then
        the data: at its daemon, or moved to the new name's daemon."""
        attr = None
        if self.data_apart:
            attr = yield Local("getattr", req.old)
            try:
                replaced = yield Local("getattr", req.new)
            except FileNotFoundError:
                replaced = None
            if replaced is not None and replaced[9] == attr[9]:
                return  # another name of the same file: rename(2) does nothing
        yield from super().on_rename(src, req)
        if attr is None or not is_regular(attr[1]):
            return
        yield Compute("hash")
        old, new = self.iod_of(req.old), self.iod_of(req.new)
        if old == new:
            yield from self.call(old, IodRename(req.old, req.new))
            return
        yield from self.call(new, IodRemove(req.new))  # the replaced file's data, if any
        size = attr[5]
        if not size:
            yield from self.call(new, IodTruncate(req.new, 0))
        for at in range(0, size, MOVE_CHUNK):
            data = yield from self.call(old, IodRead(req.old, at, min(MOVE_CHUNK, size - at)))
            if data:
                yield from self.call(new, IodWrite(req.new, at, data))
        yield from self.call(old, IodRemove(req.old))

    @handles(NfsLink)
    def on_link(self, src: int, req: NfsLink) -> Gen:
        if self.data_apart:
            self._serving(req.new)
            raise fs_error(errno.EPERM, req.new, "NFSp places data by name: hard links are not supported")
        return (yield from super().on_link(src, req))
