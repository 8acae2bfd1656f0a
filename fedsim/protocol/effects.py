"""The closed set of effects that protocol code may ask of a runtime.

Protocol operations and request handlers are generator functions: they
``yield`` one of these objects and receive the result (or have the failure
thrown back in as an exception).  They never touch a socket, a clock, a thread
or a disk themselves, which is what lets the very same code run on the SimPy
runtime (``fedsim.runtime``), on the real agent (``fednode``) and on the
in-memory runtime used by the property tests (``fedsim.direct``).

Keep this set small: every new effect must be given a meaning in every runtime.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from fedsim.protocol.messages import Request


@dataclass(slots=True, frozen=True)
class Call:
    """Request/reply to a peer.  Result: the handler's return value; its
    exception (OSError, PeerUnavailable) is raised at the ``yield``."""

    node: int
    request: Request


def nested_timeout(timeout: float, depth: int) -> float:
    """The timeout every runtime gives a ``Call`` made at nesting ``depth``
    (a client's operation is depth 0, a handler of its request depth 1 ...):
    ``timeout`` at depth 0, a quarter less per level below, down to a
    quarter of it.  A handler waiting on a hung peer thus gives up before
    its own caller gives up on it, and its error, which names the hung peer,
    reaches the caller: the error names the node that actually failed, not
    a live one in between."""
    return timeout * 0.75 ** min(depth, 5)


@dataclass(slots=True, frozen=True)
class Send:
    """One-way message to a peer; the result is None as soon as it is sent."""

    node: int
    request: Request


@dataclass(slots=True, frozen=True)
class Multicast:
    """A request to each of several peers at once: the same one (dirmerge,
    summary pushes), or with ``request`` a tuple, the i-th to ``nodes[i]``
    (a batch per home: ``readdir_attrs``), so a fan-out of different
    requests costs the slowest round trip, not their sum, with no
    ``Spawn``/``Await`` (which the in-memory runtime cannot wait on).

    Result: a list, in ``nodes`` order, holding each reply or the exception
    that peer's handler raised (exceptions are returned, not raised, so one
    unavailable peer does not hide the others' answers)."""

    nodes: tuple[int, ...]
    request: Request | tuple[Request, ...]

    def __post_init__(self) -> None:
        if type(self.request) is tuple and len(self.request) != len(self.nodes):
            raise ValueError(f"Multicast: {len(self.request)} requests for {len(self.nodes)} nodes")

    def requests(self) -> tuple[Request, ...]:
        """The request each of ``nodes`` gets, in their order (every runtime reads them so)."""
        r = self.request
        return r if type(r) is tuple else (r,) * len(self.nodes)  # type: ignore[return-value]


@dataclass(slots=True, frozen=True)
class Local:
    """An operation on this node's local file system (see LOCAL_OPS)."""

    op: str
    path: str
    args: tuple[Any, ...] = ()


@dataclass(slots=True, frozen=True)
class Compute:
    """CPU work of the federal layer (hashing, Bloom probes, table updates).

    ``work`` names the kind of work and ``units`` how much; the simulator maps
    it to time from its cost table, the real runtime ignores it (the real CPU
    is spent anyway)."""

    work: str
    units: float = 1.0


#: The kinds of federal-layer work a ``Compute`` may name: one home, so that
#: the simulator's cost table (``fedsim.runtime.CpuCosts.table``) prices
#: exactly these and every runtime rejects any other name.  A misspelt name
#: would otherwise be free work in the simulator and go unnoticed.
WORK: tuple[str, ...] = (
    "fedfs_op",  # the DT hash and the manager hash of a path, per operation
    "bloom_probe",  # testing one member's summary (units: summaries tested)
    "bloom_insert",  # adding one directory to the own summary (units: directories)
    "hash",  # one hash of a path (designs that hash once per step)
)
known_work = frozenset(WORK)  # for membership tests on hot paths


class UnknownWork(ValueError):
    """A ``Compute`` naming work no runtime knows how to price (raised into
    the generator that yielded it, as every runtime does with a bad effect)."""

    def __init__(self, work: str) -> None:
        super().__init__(f"unknown Compute work {work!r}; known: {', '.join(WORK)}")
        self.work = work


def check_work(eff: Compute) -> None:
    """UnknownWork unless ``eff`` names one of ``WORK`` (for the runtimes that
    otherwise ignore Compute: the agent and the in-memory runtime)."""
    if eff.work not in known_work:
        raise UnknownWork(eff.work)


@dataclass(slots=True, frozen=True)
class Spawn:
    """Run a protocol generator concurrently on this node; result is None."""

    gen: Generator[Any, Any, Any]


@dataclass(slots=True, frozen=True)
class Await:
    """Suspend until another generator on this node yields ``Wake`` with the
    same key; the result is the value it passes.  Used to coalesce work that
    must happen once, e.g. concurrent lookups waiting on one dirmerge."""

    key: Any


@dataclass(slots=True, frozen=True)
class Wake:
    """Resume every generator on this node waiting on ``key`` with ``value``
    (an exception object is raised in the waiters).  No waiter: no effect."""

    key: Any
    value: Any = None


@dataclass(slots=True, frozen=True)
class Now:
    """The runtime's clock, in seconds: simulated time in the simulator,
    ``time.monotonic()`` in the agent, a settable counter in the in-memory
    runtime.  Protocol code asks for it only where time is part of the
    protocol (the age of a cached virtual directory), so the protocol itself
    stays clock-free and a simulation stays a function of its seed."""


NOW = Now()


@dataclass(slots=True, frozen=True)
class Sleep:
    """Suspend this generator for ``seconds`` of the runtime's clock; result None.

    The timer of periodic protocol work (summary refresh and re-push, VD
    ageing, heartbeats): simulated time in the simulator, an event-loop timer
    in the agent.  In the in-memory runtime a generator started by ``Spawn``
    parks until the test advances the clock past its wake-up time; a client
    operation that sleeps just moves the clock on (nothing runs beside it)."""

    seconds: float


EFFECTS = (Call, Send, Multicast, Local, Compute, Spawn, Await, Wake, Now, Sleep)

# The local file system operations protocol code may ask for, with their
# arguments after the path.  Every local layer (fedsim.memfs.MemFS,
# fednode.localfs.LocalFS) implements exactly these.
LOCAL_OPS: dict[str, str] = {
    "create": "([mode, uid, gid]) -> list[str]: exclusive create, missing parent directories created; returns "
    "them.  The optional mode (0..0o7777) and owner (attrs.KEEP: the layer's default) are the new file's "
    "from the start; if they cannot be given (EPERM) nothing is left made",
    "mkdir": "([mode, uid, gid]) -> list[str]: create directory and missing parents (exist ok); returns created "
    "dirs.  The optional mode and owner are the new directory's (not the parents'; an existing one is left as "
    "it is); if they cannot be given nothing is left made",
    "unlink": "() -> None",
    "rmdir": "() -> None: the directory must be empty",
    "listdir": "() -> list[tuple[str, bool]]: (name, is_dir) of every entry",
    "stat": "() -> tuple[bool, int]: (is_dir, size)",
    "read": "(offset, size) -> bytes",
    "write": "(offset, data) -> int: bytes written",
    "truncate": "(size) -> None: cut a regular file to size bytes or extend it with zeros",
    "rename": "(new_path) -> None: rename a regular file, atomically replacing a regular file at "
    "new_path (EISDIR if either is a directory; the new parent must exist, none is created)",
    "rename_dir": "(new_path) -> None: rename a directory with everything under it (the same inodes), "
    "atomically replacing an empty directory at new_path (EINVAL into its own subtree, ENOTDIR onto a file, "
    "ENOTEMPTY; the new parent must exist, none is created)",
    "open": "() -> None: check the file exists and is a regular file",
    "close": "() -> None",
    "list_dirs": "() -> list[str]: every directory under the path (inclusive), for summaries",
    "getattr": "() -> tuple: (is_dir, mode, nlink, uid, gid, size, atime_ns, mtime_ns, ctime_ns, local ino) "
    "of the entry itself, never followed (fedsim.protocol.attrs.ATTR_WIRE; a device's size is its rdev)",
    "setattr": "(mode, uid, gid, atime_ns, mtime_ns) -> None: chmod/chown/utimens in one; attrs.KEEP (-1) "
    "leaves mode/uid/gid, UTIME_OMIT a time, UTIME_NOW is this node's clock; ctime becomes now",
    "statfs": "() -> tuple: (bsize, frsize, blocks, bfree, bavail, files, ffree, namemax) of the local "
    "file system holding the path",
    "fsync": "() -> None: flush a regular file's data and metadata to stable storage",
    # Symlinks and special files (``fedfs/links.py``): entries like files (listdir says is_dir False;
    # stat/getattr describe the entry itself, never a target; unlink and rename take them), which no
    # operation follows (an intermediate component, ELOOP) or opens (open/read/write/truncate/fsync, ELOOP).
    "symlink": "(target) -> list[str]: exclusive create of a symlink holding target verbatim, missing "
    "parent directories created (as create); returns them",
    "readlink": "() -> str: a symlink's target (EINVAL for anything else)",
    "mknod": "(mode[, dev, uid, gid]) -> list[str]: exclusive create of a fifo, socket or device (mode: "
    "S_IFIFO/S_IFSOCK/S_IFCHR/S_IFBLK | permission bits; dev: a device's number; uid/gid: its owner, -1 the "
    "default; who may make a device is the home's decision), missing parent directories created (as create); "
    "returns them",
    # Hard links (``fedfs/links.py``): one more name of an existing file, symlink or special file
    "link": "(old_path) -> list[str]: a hard link at the path to the entry old_path, never followed (a "
    "symlink is linked itself); missing parent directories of the path created (as create) and returned, "
    "removed again if the link fails.  linkat(2)'s errnos in its order: ENOENT for old_path, EEXIST for the "
    "path, EPERM for a directory; getattr's nlink counts the names, the file's ctime becomes now, unlink of "
    "one name keeps the others, rename onto another name of the same file does nothing",
    # extended attributes of a regular file or directory (fedsim.protocol.xattrs: names, limits, errnos)
    "getxattr": "(name) -> bytes: the value (ENODATA if unset)",
    "setxattr": "(name, value, flags) -> None: XATTR_CREATE (EEXIST if set) / XATTR_REPLACE (ENODATA if "
    "unset); ctime becomes now",
    "listxattr": "() -> list[str]: the names, sorted, of the namespaces the federation carries",
    "removexattr": "(name) -> None: ENODATA if unset; ctime becomes now",
}


def run_sync(gen: Generator[Any, Any, Any], perform: Callable[[Any], Any]) -> Any:
    """Drive a protocol generator to completion, synchronously.

    ``perform(effect)`` returns the effect's result or raises; a raised
    exception is thrown into the generator at its ``yield`` (that is how
    protocol code sees PeerUnavailable and OSError).  This is the whole of the
    in-memory runtime's scheduler and is also used to run start-up work
    (summaries) outside simulated time."""
    value: Any = None
    exc: BaseException | None = None
    while True:
        try:
            eff = gen.throw(exc) if exc is not None else gen.send(value)
        except StopIteration as stop:
            return stop.value
        value, exc = None, None
        try:
            value = perform(eff)
        except Exception as e:  # delivered into the generator
            exc = e
