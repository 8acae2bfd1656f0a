"""The benchmark's "Local" column: each operation done on a node's directory
without the federation, as a program that bypasses it would.

Kept apart from ``fednode.tools.bench`` because it runs inside an agent (the
``bench`` admin call), next to the same directory and the same CPU as the
federated operation it is compared with.  The paths come from the wire, so
the operations go through the agent's confined local layer (``LocalFS``: no
``..``, no symlink followed, nothing outside the root), never through plain
``os`` calls on root + path; its cost over the bare system calls is the
``fednode.tools.localfs_bench`` micro-benchmark's.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Sequence
from typing import Any

from fednode.localfs import LocalFS
from fednode.wire import check_args, over_limit


def _read(fs: LocalFS, path: str, offset: int, size: int) -> bytes:
    return fs.read(path, offset, size)


def _write(fs: LocalFS, path: str, offset: int, data: bytes) -> int:
    return fs.write(path, offset, data)


#: wire name -> (LocalFS operation, argument types after the path).  A closed
#: table: a name from the wire selects one of these or is refused.
LOCAL_OPS: dict[str, tuple[Callable[..., Any], tuple[type, ...]]] = {
    "create": (LocalFS.create, ()),
    "mkdir": (LocalFS.mkdir, ()),
    "stat": (LocalFS.stat, ()),
    "unlink": (LocalFS.unlink, ()),
    "rmdir": (LocalFS.rmdir, ()),
    "listdir": (LocalFS.listdir, ()),
    "read": (_read, (int, int)),
    "write": (_write, (int, bytes)),
    "rename": (LocalFS.rename, (str,)),
    "truncate": (LocalFS.truncate, (int,)),
    "fsync": (LocalFS.fsync, ()),
    "statfs": (LocalFS.statfs, ()),
}


class LocalBench:
    """One agent's local benchmark operations; read and write use a file it
    keeps open (as a program holds a descriptor), until ``close_all``."""

    def __init__(self, fs: LocalFS) -> None:
        self.fs = fs
        self.opened: set[str] = set()

    def check(self, op: str, calls: Sequence[Any], max_io: int) -> None:
        """Refuse the whole request (EINVAL) unless every call is ``op``'s typed
        arguments; read sizes at most ``max_io`` (what one reply may carry)."""
        entry = LOCAL_OPS.get(op)
        if entry is None:
            raise OSError(errno.EINVAL, f"bench local: op must be one of {', '.join(LOCAL_OPS)}, not {op!r}")
        want = (str, *entry[1])
        for args in calls:
            check_args(f"bench local {op}", want, args)
            if op == "read" and not 0 <= args[2] <= max_io:
                raise over_limit("read size", args[2], max_io, "max_message_bytes")

    def run(self, op: str, args: Sequence[Any]) -> Any:
        """One checked call (``check`` first)."""
        fn = LOCAL_OPS[op][0]
        path = args[0]
        if op in ("read", "write") and path not in self.opened:
            self.fs.open(path)
            self.opened.add(path)
        try:
            return fn(self.fs, *args)
        except OSError:
            if self.fs.lost is not None:  # the root is gone: say so, not EBADF (as LocalFS.apply does)
                raise self.fs.lost_error(path) from None
            raise

    def close_all(self) -> None:
        for path in self.opened:
            self.fs.close(path)
        self.opened.clear()
