"""The two soft-state caches of a FedFS node: the directory table and the
virtual-directory cache.

Both are bounded LRU maps.  Everything in them can be rebuilt: a DT miss falls
back to the file's manager, a VD miss to a dirmerge.  That is what keeps the
federation's metadata soft state (FedFS autonomy): nothing of it is written
into the local file systems.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LRU(Generic[K, V]):
    """A bounded map that evicts the least recently used entry and counts hits."""

    __slots__ = ("_d", "capacity", "evictions", "hits", "misses")

    def __init__(self, capacity: int) -> None:
        if capacity <= 0:
            raise ValueError(f"an LRU cache needs a positive capacity, got {capacity}")
        self.capacity = capacity
        self._d: OrderedDict[K, V] = OrderedDict()
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def get(self, key: K) -> V | None:
        """Look up and count a hit or a miss (use ``peek`` to look without counting)."""
        v = self._d.get(key)
        if v is None:
            self.misses += 1
            return None
        self.hits += 1
        self._d.move_to_end(key)
        return v

    def peek(self, key: K) -> V | None:
        return self._d.get(key)

    def put(self, key: K, value: V) -> None:
        d = self._d
        d[key] = value
        d.move_to_end(key)
        if len(d) > self.capacity:
            d.popitem(last=False)
            self.evictions += 1

    def pop(self, key: K) -> V | None:
        return self._d.pop(key, None)

    def __contains__(self, key: object) -> bool:
        return key in self._d

    def __len__(self) -> int:
        return len(self._d)

    def keys(self) -> list[K]:
        return list(self._d)


class WatchedLRU(LRU[K, V]):
    """An LRU that tells ``watch(key, value)`` of every put and every removal (value None;
    not of an eviction): how a DT coherence policy learns that a managed entry changed
    (``fedsim.protocol.policies.coherence``) wherever in the protocol the change is made."""

    __slots__ = ("watch",)

    def __init__(self, capacity: int, watch: Callable[[K, V | None], None]) -> None:
        super().__init__(capacity)
        self.watch = watch

    def put(self, key: K, value: V) -> None:
        super().put(key, value)
        self.watch(key, value)

    def pop(self, key: K) -> V | None:
        v = super().pop(key)
        if v is not None:
            self.watch(key, None)
        return v


@dataclass(slots=True, frozen=True)
class DTEntry:
    """A directory-table entry: where a pathname lives.  ``home`` is None for
    a directory (a virtual directory lives everywhere its holders are)."""

    is_dir: bool
    home: int | None


DIR_ENTRY = DTEntry(True, None)


@dataclass(slots=True)
class VirtualDirectory:
    """The union of the local directories with one pathname (FedFS 2.1).

    ``entries``: name -> DTEntry (files carry their home).  ``holders``: the
    nodes whose local file system has this directory, so rmdir knows where to
    remove it.  ``collisions``: names present as files on more than one node
    (or as a file and a directory), which FedFS left unhandled: the name
    resolves to one copy chosen deterministically, the others are listed here.
    """

    entries: dict[str, DTEntry] = field(default_factory=dict)
    holders: set[int] = field(default_factory=set)
    collisions: dict[str, list[int]] = field(default_factory=dict)
    built: float = 0.0  # runtime clock (seconds) when built; kept only when VDs age
    # A node that may hold the directory but did not answer its merge (-1:
    # none).  Such a VD is served to readers but never cached, and nothing
    # that must not miss a name (a create's check, a settle, rmdir) trusts it.
    unreachable: int = -1
    # Members that joined after this VD was built and whose summaries say
    # they may hold the directory: the next use merges with them only
    # (FedFS 3.3's incremental dirmerge), not with every holder again.
    missing: set[int] = field(default_factory=set)
