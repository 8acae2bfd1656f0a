"""What every member of a federation must agree on: the protocol's knobs and
the federation's shape.  Plain dataclasses, validated on construction; the
YAML schemas of the simulator's config and the agent's cluster file are built
from these (one spelling of each key), not beside them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

#: What a leaving node may do with its own files (``ProtocolConfig.leave_files``).
LEAVE_FILES = ("unavailable", "migrate")


@dataclass(slots=True)
class ProtocolConfig:
    """Protocol parameters shared by every node of a federation."""

    dt_entries: int = 4096
    vd_entries: int = 1024
    summary_bits: int = 4096  # the prototype's 4 Kbit summary (FedFS section 4)
    summary_hashes: int = 4
    summary_layout: str = "shared"
    async_dir_updates: bool = False
    # Local trees change outside the federation (FedFS autonomy): a cached VD
    # older than ``vd_max_age_s`` is rebuilt on its next use, and a lookup that
    # misses in a VD older than ``vd_miss_age_s`` rebuilds it once before
    # answering ENOENT.  0 disables either (the papers' closed world, and the
    # simulator's default); the agent enables both.
    vd_max_age_s: float = 0.0
    vd_miss_age_s: float = 0.0
    # Every ``summary_refresh_s`` a node re-summarises its local tree (dropping
    # the false positives of deleted directories, catching directories made
    # outside the federation), pushes it if it changed, and evicts VDs older
    # than ``vd_max_age_s``.  0 = never (the simulator's default).
    summary_refresh_s: float = 0.0
    # First and largest wait between re-pushes of a summary a peer did not
    # acknowledge (peers start in any order).
    summary_retry_s: float = 0.05
    summary_retry_max_s: float = 2.0
    # What a node that leaves gracefully does with its own files (FedFS 3.3):
    # "unavailable" (they leave the namespace with it) or "migrate" (moved to
    # the remaining members first; needs the migration mechanism).
    leave_files: str = "unavailable"

    def __post_init__(self) -> None:
        for name in ("dt_entries", "vd_entries", "summary_bits", "summary_hashes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("vd_max_age_s", "vd_miss_age_s", "summary_refresh_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative, got {getattr(self, name)}")
        for name in ("summary_retry_s", "summary_retry_max_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")

        if self.leave_files not in LEAVE_FILES:
            raise ValueError(f"leave_files must be one of {', '.join(LEAVE_FILES)}, got {self.leave_files!r}")

    @property
    def aging(self) -> bool:
        """Whether VDs carry the time they were built (either refresh is on)."""
        return bool(self.vd_max_age_s or self.vd_miss_age_s)


@dataclass(slots=True)
class FederationSpec:
    """Everything needed to build any member of a federation: which design
    (``fedsim.protocol.designs``), the members, how names map to managers
    (``hashing``, ``vnodes``), where new names go (``placement``), the
    protocol's knobs and the seed of the per-node policy state.  The
    simulator, the in-memory runtime and the agent all build their nodes from
    one of these with ``designs.build_node``."""

    members: Sequence[int]
    design: str = "fedfs"
    hashing: str = "mod_n"
    vnodes: int = 64
    placement: str = "with_manager"
    seed: int = 0
    protocol: ProtocolConfig = field(default_factory=ProtocolConfig)

    def __post_init__(self) -> None:
        self.members = tuple(sorted(self.members))
        if not self.members:
            raise ValueError("a federation needs at least one member")
        if len(set(self.members)) != len(self.members):
            raise ValueError(f"members must be distinct, got {self.members}")
