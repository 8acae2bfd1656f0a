"""NFSp's I/O daemons: they hold file data, each file whole at the daemon
its path hashes to (``NfspMeta.iod_of``), in a tree that mirrors the
meta-server's (a file's missing parents made with it, and pruned again once
empty, so a daemon holds no empty directory of its own).

A daemon keeps no metadata: a file it has no data for is an empty file (it
is made at its first write or truncate), and a read past what it holds is
short, as at the end of a file.
"""

from __future__ import annotations

import errno
from typing import Any

from fedsim.protocol.attrs import check_size
from fedsim.protocol.effects import Local
from fedsim.protocol.messages import fs_error
from fedsim.protocol.names import ROOT, parent
from fedsim.protocol.nfs.client import ClientEntry
from fedsim.protocol.nfsp.messages import IodCommit, IodRead, IodRemove, IodRename, IodTruncate, IodWrite
from fedsim.protocol.node import Gen, handles


class Iod(ClientEntry):
    """The I/O daemon's handlers (every node has them; only the daemons answer)."""

    def __init__(self, node_id: int, spec: Any, **kw: Any) -> None:
        super().__init__(node_id, spec, **kw)
        #: the I/O daemons: every member but the meta-server (the meta-server alone if it is alone)
        self.iods = tuple(m for m in sorted(spec.members) if m != self.server) or (self.server,)
        self.iod_served = 0

    def counters(self) -> dict[str, float]:
        return {**super().counters(), "iod_requests": self.iod_served}

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "iods": list(self.iods)}

    def _daemon(self, path: str) -> None:
        if self.id not in self.iods:
            raise fs_error(errno.EINVAL, path, f"node {self.id} is no I/O daemon")
        self.iod_served += 1

    def _made(self, path: str) -> Gen:
        """The daemon's file at ``path``, made (with its parents) if it has none."""
        try:
            yield Local("create", path)
        except FileExistsError:
            pass

    @handles(IodRead)
    def on_iod_read(self, src: int, req: IodRead) -> Gen:
        self._daemon(req.path)
        try:
            return (yield Local("read", req.path, (req.offset, req.size)))
        except FileNotFoundError:
            return b""  # never written: an empty file

    @handles(IodWrite)
    def on_iod_write(self, src: int, req: IodWrite) -> Gen:
        self._daemon(req.path)
        try:
            return (yield Local("write", req.path, (req.offset, req.data)))
        except FileNotFoundError:
            yield from self._made(req.path)
            return (yield Local("write", req.path, (req.offset, req.data)))

    @handles(IodTruncate)
    def on_iod_truncate(self, src: int, req: IodTruncate) -> Gen:
        self._daemon(req.path)
        check_size(req.path, req.size)
        try:
            yield Local("truncate", req.path, (req.size,))
        except FileNotFoundError:
            if req.size:
                yield from self._made(req.path)
                yield Local("truncate", req.path, (req.size,))

    @handles(IodCommit)
    def on_iod_commit(self, src: int, req: IodCommit) -> Gen:
        self._daemon(req.path)
        try:
            yield Local("fsync", req.path)
        except FileNotFoundError:
            pass  # no data: nothing to flush

    @handles(IodRemove)
    def on_iod_remove(self, src: int, req: IodRemove) -> Gen:
        self._daemon(req.path)
        yield from self._drop(req.path)

    @handles(IodRename)
    def on_iod_rename(self, src: int, req: IodRename) -> Gen:
        self._daemon(req.old)
        try:
            yield Local("stat", parent(req.new))
        except FileNotFoundError:
            yield Local("mkdir", parent(req.new))
        try:
            yield Local("rename", req.old, (req.new,))
        except FileNotFoundError:
            yield from self._drop(req.new)  # no data under the old name: none under the new either
        yield from self._prune(parent(req.old))

    def _drop(self, path: str) -> Gen:
        try:
            yield Local("unlink", path)
        except FileNotFoundError:
            return
        yield from self._prune(parent(path))

    def _prune(self, directory: str) -> Gen:
        """Remove ``directory`` and its ancestors while they are empty (the
        daemon's tree only mirrors the files it holds)."""
        d = directory
        while d != ROOT:
            try:
                if (yield Local("listdir", d)):
                    return
                yield Local("rmdir", d)
            except OSError:
                return  # gone or filled meanwhile
            d = parent(d)
