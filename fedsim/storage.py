"""Cost model of a node's local file system: per-operation costs and a block cache.

Defaults are FedFS Table 2's "Local" column (ext2 on a 300 MHz Pentium II):
creat 89 us, mkdir 164 us, read 105 us on a cache miss and 14 us on a hit,
write 19 us, unlink 25 us.  Operations the paper did not measure (rmdir,
readdir, stat, open, close) carry stated assumptions; a profile measured by
``fednode bench`` replaces them all.

Costs are charged per block for read/write: a read costs ``read_hit`` for each
block found in the node's LRU block cache and ``read_miss`` for each block
that is not; written blocks enter the cache (write-back, as ext2 does).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

# FedFS Table 2, "Local" column, microseconds.
EXT2_PAPER: dict[str, float] = {
    "create": 89.0,
    "mkdir": 164.0,
    "read_miss": 105.0,
    "read_hit": 14.0,
    "write": 19.0,
    "unlink": 25.0,
    # not in the paper (assumptions, same order as unlink/creat on ext2):
    "rmdir": 60.0,
    "listdir": 30.0,
    "listdir_entry": 0.5,
    "stat": 8.0,
    "open": 8.0,
    "close": 2.0,
    "list_dirs": 0.0,  # start-up summary generation is not timed
    "rename": 25.0,  # a metadata update of one directory, like unlink
    "rename_dir": 25.0,  # the same: the moved directory's entries stay where they are
    "truncate": 19.0,  # an inode update, like a write of no data
    "getattr": 8.0,  # a stat
    "setattr": 19.0,  # an inode update, like truncate
    "statfs": 8.0,  # the superblock's counters, in memory, like a stat
    # a flush of the file's dirty data and inode to the disk: one rotational
    # latency plus a seek of a 1999 7200 rpm disk, as ext2's fsync waits for
    "fsync": 8000.0,
    # symlinks and special files (``fedfs/links.py``): a symlink and a node are an inode and a
    # directory entry, as a creat; reading a link's target is a lookup, like a stat
    "symlink": 89.0,
    "mknod": 89.0,
    "readlink": 8.0,
    # a hard link: a directory entry and the inode's link count, a metadata update like a rename
    "link": 25.0,
    # extended attributes: a read of the inode's attribute area, like a stat; a change of it, like setattr
    "getxattr": 8.0,
    "listxattr": 8.0,
    "setxattr": 19.0,
    "removexattr": 19.0,
}
ASSUMED = (
    "rmdir", "listdir", "listdir_entry", "stat", "open", "close", "list_dirs", "rename", "rename_dir", "truncate",
    "getattr", "setattr", "statfs", "fsync", "symlink", "mknod", "readlink", "link", "getxattr", "listxattr",
    "setxattr", "removexattr",
)  # fmt: skip


#: the operations that make missing parent directories and return them (each costs a mkdir)
_MAKES = frozenset({"create", "mkdir", "symlink", "mknod", "link"})


@dataclass(slots=True)
class StorageParams:
    costs_us: dict[str, float] = field(default_factory=lambda: dict(EXT2_PAPER))
    block_size: int = 8192
    cache_blocks: int = 16384  # 128 MB of 8 KB blocks: the FedFS server cache


class BlockCache:
    """LRU set of (path, block number), sized in blocks."""

    __slots__ = ("_d", "capacity", "hits", "misses")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._d: OrderedDict[tuple[str, int], None] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def touch(self, key: tuple[str, int]) -> bool:
        """Access a block: True on a hit; the block is cached afterwards either way."""
        d = self._d
        if key in d:
            d.move_to_end(key)
            self.hits += 1
            return True
        self.misses += 1
        if self.capacity > 0:
            d[key] = None
            if len(d) > self.capacity:
                d.popitem(last=False)
        return False

    def insert(self, key: tuple[str, int]) -> None:
        if self.capacity > 0:
            self._d[key] = None
            self._d.move_to_end(key)
            if len(self._d) > self.capacity:
                self._d.popitem(last=False)


class StorageModel:
    """Turns one local operation into a service time, updating the block cache."""

    def __init__(self, params: StorageParams) -> None:
        self.p = params
        self.c = params.costs_us
        self.cache = BlockCache(params.cache_blocks)
        #: a failed operation costs a metadata lookup (it found nothing to change)
        self.error_cost = self.c.get("stat", 0.0)

    def _blocks(self, offset: int, size: int) -> range:
        bs = self.p.block_size
        if size <= 0:
            return range(0)
        return range(offset // bs, (offset + size - 1) // bs + 1)

    def cost(self, op: str, path: str, args: tuple, result: object = None) -> float:
        """Service time in microseconds of ``op`` (called after the op ran, so
        ``result`` is known, e.g. the entries a listdir returned)."""
        c = self.c
        if op == "read":
            offset, size = args
            t = 0.0
            for b in self._blocks(offset, size):
                t += c["read_hit"] if self.cache.touch((path, b)) else c["read_miss"]
            return t if t else c["read_hit"]
        if op == "write":
            offset, data = args
            blocks = self._blocks(offset, len(data))
            for b in blocks:
                self.cache.insert((path, b))
            return c["write"] * max(1, len(blocks))
        if op == "listdir":
            n = len(result) if isinstance(result, list) else 0
            return c["listdir"] + c["listdir_entry"] * n
        if op in _MAKES and isinstance(result, list) and len(result) > 1:
            return c[op] + c["mkdir"] * (len(result) - (op == "mkdir"))
        return c.get(op, 0.0)
