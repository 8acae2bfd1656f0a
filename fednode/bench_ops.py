"""The benchmark's "Local" column: each operation done straight on a node's
directory with the os module, as a program that bypasses the federation would.

Kept apart from ``fednode.bench`` because it runs inside an agent (the
``bench`` admin call), next to the same directory and the same CPU as the
federated operation it is compared with.
"""

from __future__ import annotations

import os
from typing import Any

from fednode.localfs import LocalFS

_fds: dict[str, int] = {}  # open descriptors of the files read/written, like an fd a program holds


def _fd(path: str) -> int:
    fd = _fds.get(path)
    if fd is None:
        fd = _fds[path] = os.open(path, os.O_RDWR)
    return fd


def local_op(fs: LocalFS, op: str, path: str, *args: Any) -> Any:
    """``op`` on ``fs.root + path`` with no federal layer (paths are the benchmark's own)."""
    p = fs.root + path
    if op == "create":
        os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    elif op == "mkdir":
        os.mkdir(p)
    elif op == "stat":
        return os.stat(p)
    elif op == "unlink":
        os.unlink(p)
    elif op == "rmdir":
        os.rmdir(p)
    elif op == "read":
        return os.pread(_fd(p), args[1], args[0])
    elif op == "write":
        return os.pwrite(_fd(p), args[1], args[0])
    elif op == "listdir":
        return os.listdir(p)
    else:
        raise ValueError(f"no local form of {op!r}")
    return None


def close_all() -> None:
    for fd in _fds.values():
        os.close(fd)
    _fds.clear()
