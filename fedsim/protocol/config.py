"""What every member of a federation must agree on: the protocol's knobs and
the federation's shape.  Plain dataclasses, validated on construction; the
YAML schemas of the simulator's config and the agent's cluster file are built
from these (one spelling of each key), not beside them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

#: The largest cache block: a miss fetches at most a read's size plus two blocks
#: in one reply, which must stay far below the agents' frame limit.
MAX_BLOCK_SIZE = 1 << 20
#: The most one block-cache miss fetches in one reply (larger reads bypass the
#: cache): an agent's messages must carry at least this much when the cache is on.
MAX_BLOCK_FETCH = 1 << 20
#: What a leaving node may do with its own files (``ProtocolConfig.leave_files``).
LEAVE_FILES = ("unavailable", "migrate")
#: How a rename across directories or of a directory is done (``ProtocolConfig.rename``).
RENAMES = ("local", "2pc", "redistribute")


@dataclass(slots=True)
class ProtocolConfig:
    """Protocol parameters shared by every node of a federation."""

    dt_entries: int = 4096
    # How requesters' DT entries for names managed elsewhere are kept coherent
    # (``policies/coherence.py``): "lazy" (FedFS: found stale on use), "dnfsp1"
    # (a miss asks every other member first), "dnfsp2" (per-name tokens at the
    # names' managers).
    dt_coherence: str = "lazy"
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
    # The remote data-block cache (Federated DAFS IV-C, ``fedfs/blockcache.py``):
    # how many blocks of files homed elsewhere a node keeps (LRU), and the
    # block size.  0 = no cache (the default: the studies before it unchanged).
    block_cache_blocks: int = 0
    block_size: int = 4096
    # Migration (FedFS 3.2; ``fedfs/migration.py``): the policy that decides
    # which files a node moves (``policies/migration.py``: none, load_based,
    # co_locate), how often it runs and gossips its load to
    # ``migration_fanout`` random members, how fast counters decay per period,
    # and the policies' knobs.  A file moves in chunks of ``migration_chunk``
    # bytes (each one message).
    migration: str = "none"
    migration_period_s: float = 1.0
    migration_decay: float = 0.5
    migration_fanout: int = 2
    migration_threshold: float = 0.25
    migration_hysteresis: int = 4
    migration_share: float = 0.6
    migration_min_hits: float = 4.0
    migration_batch: int = 4
    migration_chunk: int = 1 << 16
    # What a node that leaves gracefully does with its own files (FedFS 3.3):
    # "unavailable" (they leave the namespace with it) or "migrate" (moved to
    # the remaining members first; needs the migration mechanism).
    leave_files: str = "unavailable"
    # Replication (FedFS 3.2; ``fedfs/replication.py``): 1 = one copy of each
    # file (the papers' prototype), 2 = a primary at the file's home and a
    # coherent secondary at the home's successor in the view, a write
    # acknowledged once both hold it.
    replicas: int = 1
    # Rename across directories and of directories (``fedfs/rename.py``):
    # "2pc" moves a file (a symlink, a special file) from one directory to
    # another atomically, by two-phase commit between the two directories'
    # managers and the homes, and renames a directory by two-phase commit
    # over every member (each renames its own part in place); "local"
    # answers EXDEV for both, as before (``mv`` then copies by itself);
    # "redistribute" moves a file by dynamic redistribution (below).
    rename: str = "2pc"
    # ``rename: redistribute`` (Ursa Minor 4.2.2; ``fedfs/delegation.py``):
    # a file moves across directories by borrowing the management of the
    # source directory (its VD, the paper's "table") to the target
    # directory's manager, which then renames as within one directory; a
    # directory is renamed as with "2pc".  At most ``redistribute_limit``
    # borrowed tables per coordinating node at a time (1: the paper's one
    # redistribution at a time; 0: no bound), each given back as soon as its
    # rename ends, or ``redistribute_hold`` seconds after the last rename
    # that used it (a burst of renames between the same directories then
    # pays for one move).
    redistribute_limit: int = 1
    redistribute_hold: float = 0.0
    # Crash detection (FedFS 3.3; ``fedfs/failure.py``): every
    # ``heartbeat_s`` a member sends a heartbeat to its successor in the
    # view; one that hears nothing from its predecessor for
    # ``heartbeat_misses`` periods has the coordinator check it and, if it
    # does not answer, evict it (a view change without it).  0 = no
    # heartbeats (the simulator's default: a crash is then never detected).
    heartbeat_s: float = 0.0
    heartbeat_misses: int = 3
    # Hazards to the hosts' local users, opt-in (issue 22; ``fedfs/links.py``,
    # ``fedsim.protocol.xattrs``): ``devices`` lets a caller with uid 0 make
    # character and block devices (a device node in an agent's tree, say a
    # world-writable raw disk, is open to that host's users); ``security_xattrs``
    # serves the ``security.`` extended attributes (``security.capability``
    # grants capabilities to whoever runs the file on its home's host).  Off:
    # EPERM for a device, EOPNOTSUPP for ``security.``, each naming its key.
    devices: bool = False
    security_xattrs: bool = False

    def __post_init__(self) -> None:
        for name in ("dt_entries", "vd_entries", "summary_bits", "summary_hashes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.block_cache_blocks < 0:
            raise ValueError(f"block_cache_blocks must not be negative, got {self.block_cache_blocks}")
        if not 0 < self.block_size <= MAX_BLOCK_SIZE:
            raise ValueError(f"block_size must be in 1..{MAX_BLOCK_SIZE}, got {self.block_size}")
        for name in ("vd_max_age_s", "vd_miss_age_s", "summary_refresh_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative, got {getattr(self, name)}")
        for name in ("migration_period_s", "migration_chunk", "migration_batch", "migration_fanout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("migration_threshold", "migration_hysteresis", "migration_min_hits"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative, got {getattr(self, name)}")
        for name in ("migration_decay", "migration_share"):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {getattr(self, name)}")
        for name in ("summary_retry_s", "summary_retry_max_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")

        if self.replicas not in (1, 2):
            raise ValueError(f"replicas must be 1 (no replication) or 2 (primary and secondary), got {self.replicas}")
        if self.heartbeat_s < 0:
            raise ValueError(f"heartbeat_s must not be negative (0 = no heartbeats), got {self.heartbeat_s}")
        if self.heartbeat_misses < 1:
            raise ValueError(f"heartbeat_misses must be at least 1, got {self.heartbeat_misses}")
        if self.redistribute_limit < 0:
            raise ValueError(f"redistribute_limit must not be negative (0 = no bound), got {self.redistribute_limit}")
        if self.redistribute_hold < 0:
            raise ValueError(f"redistribute_hold must not be negative, got {self.redistribute_hold}")
        if self.rename not in RENAMES:
            raise ValueError(f"rename must be one of {', '.join(RENAMES)}, got {self.rename!r}")
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
