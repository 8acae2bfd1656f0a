"""Home placement policies: which node becomes the home of a new name
(which node *manages* a name is ``fedsim.protocol.hashing``).

The file's manager decides the home at creation (Federated DAFS IV-B).  A
policy is one object per node, named by the configuration (``placement``) and
called the same way in the simulator and in the real agent.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from fedsim.protocol.registry import Registry


class PlacementPolicy(Protocol):
    name: str

    def choose_home(self, path: str, is_dir: bool, requester: int, manager: int, members: Sequence[int]) -> int:
        """Return the node (one of ``members``) that will hold ``path``."""
        ...


#: Placement policies by the name a config uses: ``factory(node_id, seed)``.
#: Per-node state (round-robin position, random stream) is derived from the
#: node id and the run's seed so runs are deterministic and nodes differ.
HOMES: Registry[Callable[[int, int], PlacementPolicy]] = Registry("placement policy")


class WithManager:
    """Collocate a name with its manager (the papers' default): the manager
    then answers lookups from its own DT and the home needs no extra hop."""

    name = "with_manager"

    def choose_home(self, path, is_dir, requester, manager, members):
        return manager


class RoundRobin:
    """Each manager deals new names out to the members in turn (Federated DAFS
    VI-D): balances storage, but about (N-1)/N of accesses become remote."""

    name = "round_robin"

    def __init__(self, start: int = 0) -> None:
        self._next = start

    def choose_home(self, path, is_dir, requester, manager, members):
        node = members[self._next % len(members)]
        self._next += 1
        return node


class RandomPlacement:
    """A uniformly random member, from a seeded generator (deterministic runs)."""

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self._rng = random.Random(seed)

    def choose_home(self, path, is_dir, requester, manager, members):
        return members[self._rng.randrange(len(members))]


class WithRequester:
    """Place a name on the node that asked for it (locality for the creator)."""

    name = "with_requester"

    def choose_home(self, path, is_dir, requester, manager, members):
        return requester


class Pinned:
    """Explicit homes for chosen paths, another policy for the rest.  Used by
    studies that force a placement (FedFS Table 2's multi-hop cases)."""

    name = "pinned"

    def __init__(self, homes: Mapping[str, int], fallback: PlacementPolicy | None = None) -> None:
        self.homes = dict(homes)
        self.fallback = fallback or WithManager()

    def choose_home(self, path, is_dir, requester, manager, members):
        home = self.homes.get(path)
        if home is None:
            return self.fallback.choose_home(path, is_dir, requester, manager, members)
        return home


HOMES.add("with_manager", lambda node_id, seed: WithManager())
HOMES.add("round_robin", lambda node_id, seed: RoundRobin(start=node_id))
HOMES.add("random", lambda node_id, seed: RandomPlacement(seed=seed * 1_000_003 + node_id))
HOMES.add("with_requester", lambda node_id, seed: WithRequester())


def make_placement(name: str, node_id: int, seed: int = 0) -> PlacementPolicy:
    """The policy object a config names, for node ``node_id``."""
    return HOMES.get(name)(node_id, seed)
