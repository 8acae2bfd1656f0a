"""Manager hashing, pathname -> manager: the hash schemes that tell every
node, with no communication, which node manages a name (FedFS 2.1).  Which
node *holds* a new name is home placement, ``policies.homes``.

Two schemes, chosen by configuration (``hashing``):

* ``mod_n`` -- the papers' scheme: mmh3(path) mod number of nodes.  Cheap and
  perfectly balanced in expectation, but a join or leave moves almost every
  name to a new manager.
* ``ring`` -- a consistent-hash ring with virtual nodes: a join or leave moves
  only about 1/N of the names, at the price of a binary search per lookup.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import mmh3

from fedsim.protocol.registry import Registry


def path_hash(path: str) -> int:
    """The one hash of a pathname used for manager placement (unsigned 32-bit mmh3)."""
    return mmh3.hash(path, 0, signed=False)


#: Manager hashing schemes by the name a config uses: ``cls(members, vnodes)``.
HASHINGS: Registry[type] = Registry("hashing")


@HASHINGS.register("mod_n")
class ModN:
    """Manager = members[mmh3(path) mod N] (FedFS 3.3: "we incorporate the
    number of nodes in the hash function")."""

    name = "mod_n"

    def __init__(self, members: Sequence[int], vnodes: int = 0) -> None:
        if not members:
            raise ValueError("a federation needs at least one member")
        self.members = tuple(sorted(members))

    def manager_of(self, path: str) -> int:
        return self.members[path_hash(path) % len(self.members)]

    def with_members(self, members: Sequence[int]) -> ModN:
        return ModN(members)


@HASHINGS.register("ring")
class Ring:
    """Consistent hashing: each member owns ``vnodes`` points on a 2^32 ring;
    a name belongs to the first point clockwise from its hash."""

    name = "ring"

    def __init__(self, members: Sequence[int], vnodes: int = 64) -> None:
        if not members:
            raise ValueError("a federation needs at least one member")
        if vnodes <= 0:
            raise ValueError(f"vnodes must be positive, got {vnodes}")
        self.members = tuple(sorted(members))
        self.vnodes = vnodes
        points = sorted(
            (mmh3.hash(f"node-{m}-vnode-{v}", 0x5EED, signed=False), m) for m in self.members for v in range(vnodes)
        )
        self._keys = [p for p, _ in points]
        self._owners = [m for _, m in points]

    def manager_of(self, path: str) -> int:
        i = bisect.bisect_right(self._keys, path_hash(path))
        return self._owners[i % len(self._owners)]

    def with_members(self, members: Sequence[int]) -> Ring:
        return Ring(members, self.vnodes)


def make_hashing(name: str, members: Sequence[int], vnodes: int = 64) -> ModN | Ring:
    """Build the hashing scheme a config names (any registered in ``HASHINGS``)."""
    return HASHINGS.get(name)(members, vnodes)


def names_managed_by(hashing: ModN | Ring, node: int, prefix: str, count: int = 1, limit: int = 1_000_000) -> list[str]:
    """The first ``count`` names ``f"{prefix}{i}"`` (i = 0, 1, ...) that ``node``
    manages: how studies and benchmarks force a role arrangement (a file's
    manager, its parent's manager) without touching the hash."""
    out: list[str] = []
    for i in range(limit):
        name = f"{prefix}{i}"
        if hashing.manager_of(name) == node:
            out.append(name)
            if len(out) == count:
                return out
    raise ValueError(f"only {len(out)} of {count} names {prefix}<i> (i < {limit}) hash to node {node}")
