"""The cells of FedFS Table 2 as scenarios: one list for the simulated study
(``experiments/table2.py``) and the real agents' bench (``fednode/bench.py``).

A cell is one of the paper's calls (creat, mkdir, read, write, unlink) in one
of its columns (Local, 0 to 6 hops), with the paper's number and the *role
arrangement* that reproduces it: for the cell's pathname P, which node is M =
manager_of(P), PM = manager_of(parent of P) and H = P's home, as letters (R the
requester; A, B, C three distinct other nodes).  Why each column gets the
arrangement it does is explained in ``experiments/table2.py``; both runtimes
force the arrangement by picking names that hash to M and PM and pinning the
home at H, so the simulator and the agents time the very same scenarios.

Standard library only: the agent imports this, and must load neither the
simulator nor the studies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Op = Literal["creat", "mkdir", "read", "write", "unlink"]
OPS: tuple[Op, ...] = ("creat", "mkdir", "read", "write", "unlink")
COLUMNS = ("local", "0 hop", "1 hop", "2 hops", "3 hops", "5 hops", "6 hops")
#: Role letters -> node ids in the simulated study.  R is the requester; A, B, C are distinct remote nodes.
ROLE_NODE = {"R": 0, "A": 1, "B": 2, "C": 3}
#: The API call (node method / ``Local`` op) behind each of the paper's call names.
API: dict[str, str] = {"creat": "create", "mkdir": "mkdir", "read": "read", "write": "write", "unlink": "unlink"}


@dataclass(frozen=True, slots=True)
class Cell:
    """One cell of the paper's Table 2 and the scenario that reproduces it."""

    op: Op
    column: str
    variant: Literal["", "cache-hit", "dt-hit"]
    paper_us: float
    roles: tuple[str, str, str] | None  # (M, PM, H) as role letters; None for Local

    @property
    def case(self) -> str:
        return f"{self.op} {self.column}" + (f" {self.variant}" if self.variant else "")

    @property
    def api(self) -> str:
        """The node API call that performs the paper's call."""
        return API[self.op]

    @property
    def paper_hops(self) -> int | None:
        return None if self.column == "local" else int(self.column.split()[0])

    @property
    def dt_hit(self) -> bool:
        """Whether R's directory table holds the name when the call starts
        (only unlink's cells depend on it: read and write go by descriptor,
        creat and mkdir make a new name)."""
        return self.variant == "dt-hit"

    @property
    def requests(self) -> int | None:
        """Requests our protocol sends on the critical path of this arrangement:
        the paper's hops, except that our manager checks a new name with the
        parent's manager and picks its home in one HomeInfo request, where the
        prototype looks the name up first and then creates (creat 5 hops and
        mkdir 6 hops send one fewer)."""
        hops = self.paper_hops
        if hops is None:
            return None
        return hops - (self.op in ("creat", "mkdir") and hops >= 5)

    @property
    def nodes(self) -> tuple[int, int, int] | None:
        """(manager, parent's manager, home) as the simulated study's node ids."""
        if self.roles is None:
            return None
        m, pm, h = (ROLE_NODE[r] for r in self.roles)
        return m, pm, h


_ALL_R = ("R", "R", "R")
_M_REMOTE = ("A", "R", "R")
_DISTINCT = ("A", "C", "B")
_ONE_REMOTE = ("A", "A", "A")

#: Table 2 of the FedFS paper (microseconds), in its row and column order.
CELLS: tuple[Cell, ...] = (
    Cell("creat", "local", "", 89, None),
    Cell("creat", "0 hop", "", 140, _ALL_R),
    Cell("creat", "2 hops", "", 522, _M_REMOTE),
    Cell("creat", "5 hops", "", 1179, _DISTINCT),
    Cell("mkdir", "local", "", 164, None),
    Cell("mkdir", "0 hop", "", 175, _ALL_R),
    Cell("mkdir", "3 hops", "", 820, _M_REMOTE),
    Cell("mkdir", "6 hops", "", 1420, _DISTINCT),
    Cell("read", "local", "", 105, None),
    Cell("read", "local", "cache-hit", 14, None),
    Cell("read", "0 hop", "", 105, _ALL_R),
    Cell("read", "0 hop", "cache-hit", 11, _ALL_R),
    Cell("read", "1 hop", "", 452, _ONE_REMOTE),
    Cell("write", "local", "", 19, None),
    Cell("write", "0 hop", "", 75, _ALL_R),
    Cell("write", "0 hop", "cache-hit", 16, _ALL_R),
    Cell("write", "1 hop", "", 305, _ONE_REMOTE),
    Cell("unlink", "local", "", 25, None),
    Cell("unlink", "0 hop", "", 90, _ALL_R),
    Cell("unlink", "0 hop", "dt-hit", 62, _ALL_R),
    Cell("unlink", "1 hop", "dt-hit", 339, _ONE_REMOTE),
    Cell("unlink", "2 hops", "", 570, _ONE_REMOTE),
    Cell("unlink", "3 hops", "", 792, ("A", "B", "A")),
    Cell("unlink", "3 hops", "dt-hit", 664, _DISTINCT),
)
