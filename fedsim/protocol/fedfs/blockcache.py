"""The remote data-block cache (Federated DAFS IV-C, Fig. 8): a requester
keeps blocks of files homed on other nodes, so a second read of them costs no
message.

"The first access to any data block of a file has to be handled by the home
node where the file resides physically.  FedFS caches data blocks of files
located in other server nodes in the cluster ...  The blocks are cached at the
time of first access and an LRU replacement policy is used ...  Writes are
performed synchronously using a write-through mechanism."

Requester side (the node whose API a client called, for a file homed
elsewhere): a read whose blocks (``protocol.block_size``) are all cached is
answered here; otherwise the blocks it covers are fetched from the home in one
``BlockRead`` and kept (LRU over ``protocol.block_cache_blocks`` blocks).  A
block shorter than ``block_size`` is the file's last: it marks the end of the
file, so a read past it is answered from the cache too.  A write goes to the
home as before (write-through); when it returns, this node drops its own
blocks of the file.

Home side: a ``BlockRead`` registers its sender as a *cacher* of the file
(before the home reads its data).  Every change of a local file (a write,
a truncate, an unlink, either end of a rename, a migration's freeze and its
commit at the source) is followed, before the change's reply leaves the
home, by an acknowledged ``BlockInvalidate`` to each cacher other than the
one that asked for the change (which drops its own blocks itself); the file's
cachers are then forgotten (they register again on their next miss).

Why that is coherent ("a read returns the latest acknowledged write"):

* the home changes its file before it invalidates, so a ``BlockRead`` that
  registers after the invalidation reads the new data, and one that
  registered before is invalidated;
* a ``BlockRead`` whose reply was still travelling when an invalidation
  reached the requester must not fill the cache with what it read: the
  requester counts invalidations (``cache_era``) and keeps a fetch's blocks only
  if no invalidation (and no write-through of its own) arrived while it was
  in flight.  Conservative (any invalidation cancels every fetch in flight),
  cheap and bounded (one counter, no per-file history);
* the writer drops its blocks after its write returned, and bumps ``cache_era``
  too, so its own concurrent fetch cannot re-cache the old data either;
* migration (``migration.py``): the source invalidates its cachers when it
  freezes the file; from then on a ``BlockRead`` there is EAGAIN (the gate),
  and after the move ESTALE, so no node caches blocks the new home does not
  know about; the new home collects its own cachers.  A requester's fetch
  goes through ``_at_fd``, so its descriptor follows the file as a read's does.

With the cache off (``block_cache_blocks: 0``, the default) nothing here sends
a message: reads are plain ``Read``s, and no node is ever a cacher.

What it does not cover: a file changed in the home's local tree outside the
federation (autonomy) is not invalidated; files opened before a rename keep
their old path, as without the cache.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, ClassVar

from fedsim.protocol.config import MAX_BLOCK_FETCH
from fedsim.protocol.effects import Compute
from fedsim.protocol.fedfs.attributes import Attributes
from fedsim.protocol.fedfs.migration import MigrateDone, MigrateFreeze
from fedsim.protocol.fedfs.rename import RenameDrop, RenameFinish
from fedsim.protocol.messages import (
    PeerUnavailable,
    Read,
    Request,
    Truncate,
    Unlink,
    Write,
    register_request,
)
from fedsim.protocol.node import Gen, api, handles

#: A miss fetches the blocks a read covers in one reply; larger spans bypass the
#: cache (a plain ``Read``) so the reply stays within every runtime's frame
#: (an agent's cluster file is refused if its messages cannot carry this much).
MAX_FETCH = MAX_BLOCK_FETCH


@register_request
@dataclass(slots=True, frozen=True)
class BlockRead(Read):
    """A ``Read`` (``size`` bytes at a block-aligned ``offset``) that also
    registers the sender as a cacher of ``path``: its blocks are invalidated
    when the file changes.  Its own type, so the home knows which reads to track."""

    reply: ClassVar[Any] = bytes


@register_request
@dataclass(slots=True, frozen=True)
class BlockInvalidate(Request):
    """Drop every cached block of ``path``: its home changed it (acknowledged,
    so the change's reply leaves the home only after every cacher dropped them)."""

    reply: ClassVar[Any] = None

    path: str


class BlockCache:
    """An LRU of blocks keyed (path, block number), with a per-file index so a
    file's blocks are dropped at once.  Counts hits, misses and evictions."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._blocks: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        self._by_path: dict[str, set[int]] = {}
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self.invalidations = 0

    def __len__(self) -> int:
        return len(self._blocks)

    def lookup(self, path: str, first: int, last: int, block_size: int) -> list[bytes] | None:
        """The cached blocks ``first..last`` of ``path`` (stopping after a short
        block, the file's end), or None if one is missing."""
        out: list[bytes] = []
        for b in range(first, last + 1):
            data = self._blocks.get((path, b))
            if data is None:
                return None
            out.append(data)
            if len(data) < block_size:
                break
        for b in range(first, first + len(out)):
            self._blocks.move_to_end((path, b))
        return out

    def put(self, path: str, block: int, data: bytes) -> None:
        key = (path, block)
        self._blocks[key] = data
        self._blocks.move_to_end(key)
        self._by_path.setdefault(path, set()).add(block)
        while len(self._blocks) > self.capacity:
            (p, b), _ = self._blocks.popitem(last=False)
            blocks = self._by_path[p]
            blocks.discard(b)
            if not blocks:
                del self._by_path[p]
            self.evictions += 1

    def drop(self, path: str) -> None:
        for b in self._by_path.pop(path, ()):
            del self._blocks[(path, b)]


class BlockCaching(Attributes):
    def __init__(self, node_id: int, spec: Any, **kw: Any) -> None:
        super().__init__(node_id, spec, **kw)
        cfg = self.config
        self.block_size = cfg.block_size
        self.bcache = BlockCache(cfg.block_cache_blocks) if cfg.block_cache_blocks else None
        self.cache_era = 0  # invalidations and own writes seen here (fetches in flight across one are not kept)
        self.cachers: dict[str, set[int]] = {}  # at a home: local file -> nodes that may cache its blocks

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        c = self.bcache
        if c is not None:
            d["block_cache"] = {
                "blocks": len(c),
                "capacity": c.capacity,
                "hits": c.hits,
                "misses": c.misses,
                "evictions": c.evictions,
                "invalidations": c.invalidations,
            }
        if self.cachers:
            d["cached_elsewhere"] = sum(len(s) for s in self.cachers.values())
        return d

    # ------------------------------------------------------------------ requester side
    def _count_access(self, home: int) -> None:
        """Access locality (Fig. 7): a client file request served here, remote
        when the file's home is another node (cache or not)."""
        st = self.stats
        st.client_file_requests += 1
        if home != self.id:
            st.remote_file_requests += 1

    @api(str, fd="opens")
    def open(self, path: str) -> Gen:
        fd = yield from super().open(path)
        self._count_access(self.fds[fd][1])
        return fd

    @api(int, fd="closes")
    def close(self, fd: int) -> Gen:
        self._count_access(self._fd(fd)[1])
        return (yield from super().close(fd))

    @api(int, int, int, fd="uses", size_arg=2)
    def read(self, fd: int, offset: int, size: int) -> Gen:
        path, home = self._fd(fd)
        self._count_access(home)
        c = self.bcache
        if c is None or home == self.id or size <= 0 or offset < 0:
            return (yield from super().read(fd, offset, size))
        bs = self.block_size
        first, last = offset // bs, (offset + size - 1) // bs
        start = first * bs
        if (last + 1 - first) * bs > MAX_FETCH:
            return (yield from super().read(fd, offset, size))
        yield Compute("fedfs_op")
        blocks = c.lookup(path, first, last, bs)
        if blocks is not None:
            c.hits += 1
            self.stats.block_cache_hits += 1
        else:
            c.misses += 1
            self.stats.block_cache_misses += 1
            era = self.cache_era
            span = (last + 1 - first) * bs
            data = yield from self._at_fd(fd, lambda p: BlockRead(p, start, span))
            blocks = [data[i : i + bs] for i in range(0, len(data), bs)]
            if len(data) % bs == 0 and len(blocks) <= last - first:
                blocks.append(b"")  # the file ends at a block boundary inside the read
            if era == self.cache_era:  # no invalidation crossed the fetch: the blocks are current
                for i, block in enumerate(blocks):
                    c.put(path, first + i, block)
        at = offset - start
        return b"".join(blocks)[at : at + size]

    def _changed_here(self, path: str) -> None:
        """This node asked the home to change ``path`` (and it did, or may have):
        forget its blocks, and let no fetch in flight keep what it read."""
        if self.bcache is not None:
            self.cache_era += 1
            self.bcache.drop(path)

    @api(int, int, bytes, fd="uses")
    def write(self, fd: int, offset: int, data: bytes) -> Gen:
        path, home = self._fd(fd)
        self._count_access(home)  # (the file may have moved here or away meanwhile: drop either way)
        try:
            return (yield from super().write(fd, offset, data))
        finally:
            self._changed_here(path)

    @api(str, int)
    def truncate(self, path: str, size: int) -> Gen:
        try:
            return (yield from super().truncate(path, size))
        finally:
            self._changed_here(path)

    @api(str)
    def unlink(self, path: str) -> Gen:
        try:
            return (yield from super().unlink(path))
        finally:
            self._changed_here(path)

    @handles(BlockInvalidate)
    def on_block_invalidate(self, src: int, req: BlockInvalidate) -> None:
        self.cache_era += 1
        if self.bcache is not None:
            self.bcache.invalidations += 1
            self.bcache.drop(req.path)

    # ------------------------------------------------------------------ home side
    @handles(BlockRead)
    def on_block_read(self, src: int, req: BlockRead) -> Gen:
        if src != self.id:
            self.cachers.setdefault(req.path, set()).add(src)  # before the data is read: see the module doc
        # through the gates: EAGAIN while a rename or a migration's freeze holds
        # the file, ESTALE once it moved away (the requester's descriptor follows)
        return (yield from self._local("read", req.path, (req.offset, req.size)))

    def invalidate_cachers(self, paths: tuple[str, ...], asker: int | None = None) -> Gen:
        """Make every node that may cache blocks of ``paths`` drop them (all but
        ``asker``, which drops its own) and forget them as cachers.  Called
        after a local change, before its reply; a migration of a file calls it
        too.  A cacher that does not answer is forgotten all the same: it is
        down (crash-stop), and a restarted node starts with an empty cache."""
        for path in paths:
            nodes = self.cachers.pop(path, None)
            for node in sorted(nodes or ()):
                if node != asker:
                    try:
                        yield from self.call(node, BlockInvalidate(path))
                    except PeerUnavailable:
                        pass

    def handle(self, src: int, request: Request) -> Gen:
        """Every request, and after one that changed a local file with cachers,
        their invalidation (before the reply).  A federation without the cache
        (every member agrees on ``block_cache_blocks``) has no cachers: its
        requests go straight through, with no generator frame of this role
        on the hot path of every request."""
        if not self.config.block_cache_blocks:
            return super().handle(src, request)
        return self._handle_invalidating(src, request)

    def _handle_invalidating(self, src: int, request: Request) -> Gen:
        result = yield from super().handle(src, request)
        if self.cachers:
            paths = _changed_paths(request)
            if paths and any(p in self.cachers for p in paths):
                asker = src if type(request) in _ASKER_DROPS else None
                yield from self.invalidate_cachers(paths, asker)
        return result


#: The requests after which the requester itself drops its blocks (``_changed_here``).
_ASKER_DROPS: frozenset[type[Request]] = frozenset({Write, Truncate, Unlink})


def _changed_paths(req: Request) -> tuple[str, ...]:
    """The local files a request changes at the home that serves it."""
    t = type(req)
    if t is Write or t is Truncate or t is Unlink:
        return (req.path,)  # type: ignore[attr-defined]
    if t is RenameFinish and req.commit:  # type: ignore[attr-defined]
        return (req.old, req.new)  # type: ignore[attr-defined]
    if t is RenameDrop and req.commit:  # type: ignore[attr-defined]
        return (req.path,)  # type: ignore[attr-defined]
    if t is MigrateFreeze:  # the file is gated from here on (no new cacher), then moved or released
        return (req.path,)  # type: ignore[attr-defined]
    if t is MigrateDone and req.commit:  # type: ignore[attr-defined]
        return (req.path,)  # type: ignore[attr-defined]
    return ()


__all__ = ["MAX_FETCH", "BlockCache", "BlockCaching", "BlockInvalidate", "BlockRead"]
