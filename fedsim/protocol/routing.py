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
* ``fixed``: client ``i`` always calls server ``members[i mod N]``;
* ``home``: the client of the whole federation a mount is (``fednode
  mount``'s default): a path's operations go to the file's home where the
  client has learned it (``learn``: the home a file's inode number names, from
  the attributes every ``getattr`` and ``create_open`` brings back), else to
  the path's manager, as ``hash`` does.  A name operation (create, mkdir,
  readdir, rmdir, rename) therefore starts where the name is decided, and a
  file operation where the file is, whatever the placement: a file found in a
  node's own tree (autonomy) or migrated is served by its home with no relay
  once its attributes were seen.

The last three ignore the file, so about (N-1)/N of the accesses reach a
server that is not the file's home (Fig. 7).  One implementation serves the
simulator's PostMark driver and the agents' ``fednode.client.ClientPool``: a
client knows the cluster's members and hashing from its configuration, the
same ``FederationSpec`` the servers build their nodes from.

A request that carries a descriptor must go back to the server that opened
it; callers route once per file operation (open ... close), not per call.

A hint is only a hint.  Every agent serves every path (its requester looks
the name up and relays to the home, retrying a stale entry once: the
requester's ``_at_home``), so a wrong server costs a hop, never a wrong
answer: a file that moved since its hint is found by the server the hint
names, whose reply's attributes then teach the client the new home
(``learn``); a name that failed with ENOENT, or was unlinked or renamed
away, is forgotten (``forget``).  So the recovery is the requester's, written
once, and the client's table is a bounded cache (``HINTS``, least recently
learned dropped first) of the homes that differ from the managers.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from typing import Any, Literal, get_args

from fedsim.protocol.attrs import home_of_ino
from fedsim.protocol.config import FederationSpec
from fedsim.protocol.hashing import make_hashing
from fedsim.protocol.names import under

Route = Literal["fixed", "hash", "round_robin", "random", "home"]
ROUTES: tuple[str, ...] = get_args(Route)
#: home hints a ``home`` router keeps (the files whose home is not their manager): bounded memory
HINTS = 65536


class Router:
    """Entry servers for ``clients`` numbered 0, 1, ...; ``entry(client, path)``
    is called once per file operation."""

    def __init__(self, route: str, federation: FederationSpec) -> None:
        if route not in ROUTES:
            raise ValueError(f"unknown route {route!r}; allowed: {', '.join(ROUTES)}")
        self.route = route
        self.members = tuple(federation.members)
        hashed = route in ("hash", "home")
        self._hashing = make_hashing(federation.hashing, self.members, federation.vnodes) if hashed else None
        self._hints: OrderedDict[str, int] = OrderedDict()  # path -> home, where it is not the manager
        self._turn: dict[int, int] = {}
        self._rngs: dict[int, random.Random] = {}
        self.seed = federation.seed

    def entry(self, client: int, path: str) -> int:
        """The server ``client`` sends its operation on ``path`` to."""
        n = len(self.members)
        if self._hashing is not None:
            hint = self._hints.get(path)
            return hint if hint is not None else self._hashing.manager_of(path)
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

    def learn(self, path: str, attr: Any) -> None:
        """``path``'s attributes came back (an ``Attr`` or its wire tuple): remember
        the home its inode number names, for a ``home`` router (others ignore it)."""
        if self.route != "home" or self._hashing is None:
            return
        home = None if attr[0] else home_of_ino(attr[-1])
        if home is None or home not in self.members or home == self._hashing.manager_of(path):
            self._hints.pop(path, None)  # at its manager (or unknown): the default route, nothing to keep
            return
        self._hints[path] = home
        self._hints.move_to_end(path)
        if len(self._hints) > HINTS:
            self._hints.popitem(last=False)

    def forget(self, path: str, below: bool = False) -> None:
        """``path`` is gone (ENOENT, unlinked, renamed away): drop its hint;
        with ``below`` (a directory renamed), the hints of every name under it too."""
        self._hints.pop(path, None)
        if below:
            for p in [p for p in self._hints if under(p, path)]:
                del self._hints[p]


__all__ = ["HINTS", "ROUTES", "Route", "Router"]
