"""What only FedFS counts (``FedStats``): the lookup paths of the FedFS paper's
Table 2, dirmerges and whom they asked (the Bloom summaries' false and true
hits), the block cache, remote file accesses (Federated DAFS Fig. 7),
migration's per-home requests and membership's hand-offs.  Kept apart from the
design-neutral ``NodeStats`` so the shared ``Node`` names nothing of one
design; reported to the runtimes through ``FedStats.counters`` (``Node.counters``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from fedsim.protocol.node import NodeStats


@dataclass(slots=True)
class FedStats(NodeStats):
    """A FedFS node's statistics: the design-neutral ones and FedFS's own."""

    lookup_paths: list[int] = field(default_factory=lambda: [0, 0, 0, 0, 0])  # index 1..4
    stale_retries: int = 0
    dirmerges: int = 0
    dirmerge_contacted: list[int] = field(default_factory=list)  # remote nodes asked per merge
    dirmerge_holders: list[int] = field(default_factory=list)  # of those, the ones that had the dir
    merge_waits: int = 0  # requests told EAGAIN because a dirmerge of their directory was in flight
    merges_by_dir: Counter[str] = field(default_factory=Counter)
    incomplete_merges: int = 0
    block_cache_hits: int = 0  # reads of remote files answered from this node's block cache
    block_cache_misses: int = 0  # ... that fetched their blocks from the home
    # client file requests (open, read, write, close) this node took from its
    # clients, and those for files homed on another node (remote file accesses,
    # Federated DAFS Fig. 7)
    client_file_requests: int = 0
    remote_file_requests: int = 0
    file_requests: int = 0  # requests served as a file's home (what migration can move elsewhere)
    incremental_merges: int = 0  # dirmerges with the members that joined since a VD was built (FedFS 3.3)
    view_retries: int = 0  # dirmerges merged again because the view changed while they ran
    handed_off: int = 0  # managed DT entries handed to their new manager at view changes
    vds_dropped: int = 0  # cached VDs dropped at view changes because their manager changed
    vds_invalidated: int = 0  # cached VDs dropped at view changes because a holder of the directory left
    # ``rename: redistribute`` (``delegation.py``): tables (directories' management) this node
    # borrowed for a rename it coordinated, and renames that found the table still held from an
    # earlier one (``redistribute_hold``: no move needed)
    redistributions: int = 0
    hold_hits: int = 0

    def counters(self) -> dict[str, float]:
        """The scalar counts, by name (``lookup_path_1`` .. ``_4`` for the paths; the per-merge
        lists and the per-directory counts are distributions, read from the stats themselves)."""
        out: dict[str, float] = {f"lookup_path_{i}": self.lookup_paths[i] for i in range(1, 5)}
        for name in SCALARS:
            out[name] = getattr(self, name)
        return out


#: FedStats' scalar counters (what ``counters`` reports besides the lookup paths)
SCALARS = ("stale_retries", "dirmerges", "merge_waits", "incomplete_merges", "block_cache_hits",
           "block_cache_misses", "client_file_requests", "remote_file_requests", "file_requests",
           "incremental_merges", "view_retries", "handed_off", "vds_dropped", "vds_invalidated", "redistributions",
           "hold_hits")  # fmt: skip
