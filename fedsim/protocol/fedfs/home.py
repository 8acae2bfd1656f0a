"""The home of a file (the node whose local file system holds it) and the
holder of a directory (any node whose local tree has it): the handlers that
touch the local file system.

Autonomy: the federation writes no metadata into the local trees.  The only
directories it makes itself are the missing parents of a file it creates
(``implicit_dirs``), and it removes them again once they are empty.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from fedsim.protocol.effects import Local
from fedsim.protocol.fedfs.manager import Manager
from fedsim.protocol.messages import (
    AddEntry,
    Close,
    Create,
    DelEntry,
    Forget,
    Mkdir,
    Open,
    Read,
    ReadDir,
    RmLocal,
    Stat,
    Unlink,
    Write,
)
from fedsim.protocol.names import parent, split
from fedsim.protocol.node import Gen, handles
from fedsim.protocol.tables import DTEntry


class Home(Manager):
    def __init__(self, node_id: int, spec: Any, **kw: Any) -> None:
        super().__init__(node_id, spec, **kw)
        self.opens: Counter[str] = Counter()  # open count per local file (the home's DT note)
        # Local directories this node created only to hold a file (create's
        # missing parents): removed again once empty, so the federation leaves
        # no directory of its own in the local tree (autonomy).
        self.implicit_dirs: set[str] = set()

    @handles(Create)
    def on_create(self, src: int, req: Create) -> Gen:
        created = yield Local("create", req.path)
        self.implicit_dirs.update(created)
        for d in created:
            yield from self.summary_add(d, new_dir=False)
        d, name = split(req.path)
        yield from self.notify(self.manager_of(d), AddEntry(d, name, False, self.id))
        self.dt.put(req.path, DTEntry(False, self.id))

    @handles(Mkdir)
    def on_mkdir(self, src: int, req: Mkdir) -> Gen:
        created = yield Local("mkdir", req.path)
        self.implicit_dirs.update(d for d in created if d != req.path)
        for d in created:
            yield from self.summary_add(d, new_dir=d == req.path)
        d, name = split(req.path)
        yield from self.notify(self.manager_of(d), AddEntry(d, name, True, self.id))

    @handles(Unlink)
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

    @handles(Open)
    def on_open(self, src: int, req: Open) -> Gen:
        yield Local("open", req.path)
        self.opens[req.path] += 1

    @handles(Close)
    def on_close(self, src: int, req: Close) -> Gen:
        yield Local("close", req.path)
        if self.opens[req.path] > 1:
            self.opens[req.path] -= 1
        else:
            self.opens.pop(req.path, None)

    @handles(Stat)
    def on_stat(self, src: int, req: Stat) -> Gen:
        return (yield Local("stat", req.path))

    @handles(Read)
    def on_read(self, src: int, req: Read) -> Gen:
        return (yield Local("read", req.path, (req.offset, req.size)))

    @handles(Write)
    def on_write(self, src: int, req: Write) -> Gen:
        return (yield Local("write", req.path, (req.offset, req.data)))

    # ------------------------------------------------------------------ as a directory's holder
    @handles(ReadDir)
    def on_read_dir(self, src: int, req: ReadDir) -> Gen:
        """Dirmerge: this node's local entries of a directory."""
        return (yield Local("listdir", req.path))

    @handles(RmLocal)
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
