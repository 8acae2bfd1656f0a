"""Path names of the federated namespace: normalisation and validation in one place.

Every pathname that enters protocol code passes through :func:`normalize`, so the
rest of the protocol can assume canonical absolute paths ("/", "/a", "/a/b").
Managers are found by hashing pathnames, so two spellings of one name
("/a//b/", "/a/b") must map to one string or they would land on different
managers.  Components "." and ".." are rejected rather than resolved: a
federation node must never be talked into walking out of a directory, and
FedFS names carry no notion of a current directory.
"""

from __future__ import annotations

import errno

ROOT = "/"
MAX_PATH = 4096
MAX_NAME = 255
#: The replica space (issue 13, replication): a member keeps the secondary
#: copies of its predecessor's files under this reserved top-level directory of
#: its local tree, at the same federated path.  The namespace never shows it:
#: clients may not name it (``ReservedPath``), a holder's listing of "/" omits
#: it (``hide_replicas``), summaries skip it, and so do the runtimes' tree helpers.
REPLICA_NAME = ".fedfs-replicas"
REPLICA_ROOT = "/" + REPLICA_NAME
_REPLICA_PREFIX = REPLICA_ROOT + "/"
#: The orphan space (issue 22): a home keeps a file that was unlinked or
#: renamed over while open under this reserved top-level directory of its
#: local tree, named by a number, until its last descriptor closes
#: (``fedfs/home.py``).  Reserved as the replica space is, and emptied when the
#: home starts (no descriptor survives a restart).
ORPHAN_NAME = ".fedfs-orphans"
ORPHAN_ROOT = "/" + ORPHAN_NAME
#: the federation's own top-level names in a local tree: never part of the namespace
RESERVED_NAMES = frozenset({REPLICA_NAME, ORPHAN_NAME})


class InvalidPath(OSError):
    """A pathname that the federation refuses (EINVAL), with the reason."""

    def __init__(self, path: object, reason: str) -> None:
        super().__init__(errno.EINVAL, f"invalid path {path!r}: {reason}")
        self.path = path
        self.reason = reason

    def __reduce__(self):  # keep the (path, reason) signature through pickling
        return (InvalidPath, (self.path, self.reason))


class ReservedPath(InvalidPath):
    """A pathname in the federation's own replica or orphan space (EPERM): the
    namespace does not have it, and no client or peer request may name it."""

    def __init__(self, path: object) -> None:
        OSError.__init__(
            self, errno.EPERM, f"path {path!r}: {REPLICA_ROOT} and {ORPHAN_ROOT} are reserved for the federation"
        )
        self.path = path
        self.reason = f"{REPLICA_ROOT} and {ORPHAN_ROOT} are reserved"

    def __reduce__(self):
        return (ReservedPath, (self.path,))


def is_replica(path: str) -> bool:
    """Whether canonical ``path`` is in the replica space (the root of it included)."""
    return path == REPLICA_ROOT or path.startswith(_REPLICA_PREFIX)


def is_reserved(path: str) -> bool:
    """Whether canonical ``path`` is in the federation's own space (replicas,
    orphans), which no local tree's share of the namespace includes."""
    if path[:2] != "/.":  # the common case: no reserved name starts otherwise
        return False
    return path[1:].split("/", 1)[0] in RESERVED_NAMES


def orphan_path(orphan: int) -> str:
    """Where a home keeps its orphan number ``orphan`` (``fedfs/home.py``)."""
    return f"{ORPHAN_ROOT}/{orphan}"


def hide_replicas(directory: str, entries: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    """A local listing of ``directory`` without the federation's own spaces
    (replicas, orphans: only "/" holds them)."""
    if directory != ROOT:
        return entries
    return [e for e in entries if e[0] not in RESERVED_NAMES]


def normalize(path: object, local: bool = False) -> str:
    """Return the canonical form of an absolute federated pathname.

    Accepts "/a/b", "/a/b/" and "/a//b" (all -> "/a/b").  Rejects, with an
    :class:`InvalidPath` naming the problem: non-strings, relative paths,
    NUL bytes, "." and ".." components, over-long names; and a name in the
    replica or orphan space (``ReservedPath``, EPERM) unless ``local`` (a local
    file system's own check: the protocol keeps its replicas and orphans there).  A canonical
    path with no component starting with "." never reaches these checks.
    """
    if (
        type(path) is str
        and len(path) <= MAX_NAME
        and path[:1] == "/"
        and (path[-1] != "/" or path == ROOT)
        and "//" not in path
        and "/." not in path
        and "\x00" not in path
    ):
        # Already canonical (the common case: every call of every operation
        # comes here): absolute, no empty, "." or ".." component (none starts
        # with "."), no NUL, and too short for an over-long component.
        return path
    if not isinstance(path, str):
        raise InvalidPath(path, f"a path must be a str, not {type(path).__name__}")
    if not path.startswith("/"):
        raise InvalidPath(path, "must be absolute (start with '/')")
    if "\x00" in path:
        raise InvalidPath(path, "contains a NUL byte")
    if len(path) > MAX_PATH:
        raise InvalidPath(path, f"longer than {MAX_PATH} characters")
    parts = [p for p in path.split("/") if p]
    for p in parts:
        if p in (".", ".."):
            raise InvalidPath(path, f"component {p!r} is not allowed (no relative components)")
        if len(p) > MAX_NAME:
            raise InvalidPath(path, f"component longer than {MAX_NAME} characters")
    if parts and parts[0] in RESERVED_NAMES and not local:
        raise ReservedPath(path)
    return "/" + "/".join(parts)


def split(path: str) -> tuple[str, str]:
    """Split a canonical path into (parent, name); the root has no parent."""
    if path == ROOT:
        raise InvalidPath(path, "the root has no parent")
    i = path.rfind("/")
    return (path[:i] or ROOT, path[i + 1 :])


def parent(path: str) -> str:
    return split(path)[0]


def join(directory: str, name: str) -> str:
    return directory + name if directory == ROOT else f"{directory}/{name}"


def under(path: str, top: str) -> bool:
    """Whether canonical ``path`` is ``top`` or lies below it (a directory
    rename's subtree, what it freezes and what forgets its names)."""
    return path == top or top == ROOT or path.startswith(top + "/")


def ancestors(path: str) -> list[str]:
    """Proper ancestors of a canonical path, root first: "/a/b/c" -> ["/", "/a", "/a/b"]."""
    if path == ROOT:
        return []
    out = [ROOT]
    i = path.find("/", 1)
    while i != -1:
        out.append(path[:i])
        i = path.find("/", i + 1)
    return out
