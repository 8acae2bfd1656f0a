"""Client-side request distribution (Federated DAFS VI-B): which server a
client sends a request to, decided by the client before anything reaches the
federation.

* ``hash``: the federation's own hashing applied to the request's pathname:
  the request goes to the path's manager, which is the file's home under
  ``with_manager`` placement, so (with that placement) every file access is
  local to the server that received it;
* ``round_robin``: each client deals its requests out to the servers in turn,
  starting at its own index;
* ``random``: a uniformly random server per request, from a per-client seeded
  stream (deterministic runs);
* ``fixed``: client ``i`` always calls server ``members[i mod N]``.

The last three ignore the file, so about (N-1)/N of the accesses reach a
server that is not the file's home (Fig. 7).  One implementation serves the
simulator's PostMark driver and the agents' ``fednode.client.ClientPool``: a
client knows the cluster's members and hashing from its configuration, the
same ``FederationSpec`` the servers build their nodes from.

A request that carries a descriptor must go back to the server that opened
it; callers route once per file operation (open ... close), not per call.
"""

from __future__ import annotations

import random
from typing import Literal, get_args

from fedsim.protocol.config import FederationSpec
from fedsim.protocol.hashing import make_hashing

Route = Literal["fixed", "hash", "round_robin", "random"]
ROUTES: tuple[str, ...] = get_args(Route)


class Router:
    """Entry servers for ``clients`` numbered 0, 1, ...; ``entry(client, path)``
    is called once per file operation."""

    def __init__(self, route: str, federation: FederationSpec) -> None:
        if route not in ROUTES:
            raise ValueError(f"unknown route {route!r}; allowed: {', '.join(ROUTES)}")
        self.route = route
        self.members = tuple(federation.members)
        self._hashing = make_hashing(federation.hashing, self.members, federation.vnodes) if route == "hash" else None
        self._turn: dict[int, int] = {}
        self._rngs: dict[int, random.Random] = {}
        self.seed = federation.seed

    def entry(self, client: int, path: str) -> int:
        """The server ``client`` sends its operation on ``path`` to."""
        n = len(self.members)
        if self._hashing is not None:
            return self._hashing.manager_of(path)
        if self.route == "fixed":
            return self.members[client % n]
        if self.route == "round_robin":
            turn = self._turn.get(client, client)
            self._turn[client] = turn + 1
            return self.members[turn % n]
        rng = self._rngs.get(client)
        if rng is None:
            rng = self._rngs[client] = random.Random(self.seed * 1_000_003 + client)
        return self.members[rng.randrange(n)]


__all__ = ["ROUTES", "Route", "Router"]
