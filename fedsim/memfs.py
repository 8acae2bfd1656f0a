"""An in-memory local file system: the simulator's stand-in for a node's disk.

It implements the local operations of ``fedsim.protocol.effects.LOCAL_OPS``
with the errno behaviour of a POSIX file system, so protocol code sees the
same failures in simulation as on ``fednode.localfs``.  Costs are not modelled
here (see ``fedsim.storage``); this is only the state.

With ``keep_data=False`` only file sizes are kept and reads return zeros:
the simulated SPEC SFS file set (~500 MB) then costs a few MB of memory.
"""

from __future__ import annotations

import errno
from collections.abc import Iterable
from typing import Any

from fedsim.protocol.effects import LOCAL_OPS
from fedsim.protocol.messages import fs_error
from fedsim.protocol.names import ROOT, ancestors, split


class MemFS:
    """Directories as name -> is_dir maps, files as bytearrays (or sizes)."""

    def __init__(self, keep_data: bool = True) -> None:
        self.keep_data = keep_data
        self.dirs: dict[str, dict[str, bool]] = {ROOT: {}}
        self.files: dict[str, Any] = {}
        self._ops: dict[str, Any] = {op: getattr(self, op) for op in LOCAL_OPS}  # bound once for apply

    # -- helpers --------------------------------------------------------------------
    def _make_parents(self, path: str) -> list[str]:
        created = []
        for a in ancestors(path):
            if a in self.dirs:
                continue
            if a in self.files:
                raise fs_error(errno.ENOTDIR, a)
            p, name = split(a)
            self.dirs[p][name] = True
            self.dirs[a] = {}
            created.append(a)
        return created

    def _file(self, path: str) -> Any:
        if path in self.files:
            return self.files[path]
        if path in self.dirs:
            raise fs_error(errno.EISDIR, path)
        raise fs_error(errno.ENOENT, path)

    def populate(self, files: Iterable[tuple[str, int]], dirs: Iterable[str] = ()) -> None:
        """Pre-populate (as if written before the federation started)."""
        for d in dirs:
            self.mkdir(d)
        for path, size in files:
            self.create(path)
            self.files[path] = bytearray(size) if self.keep_data else size

    # -- LOCAL_OPS --------------------------------------------------------------------
    def create(self, path: str) -> list[str]:
        if path in self.files or path in self.dirs:
            raise fs_error(errno.EEXIST, path)
        created = self._make_parents(path)
        p, name = split(path)
        self.dirs[p][name] = False
        self.files[path] = bytearray() if self.keep_data else 0
        return created

    def mkdir(self, path: str) -> list[str]:
        if path in self.dirs:
            return []
        if path in self.files:
            raise fs_error(errno.EEXIST, path)
        created = self._make_parents(path)
        p, name = split(path)
        self.dirs[p][name] = True
        self.dirs[path] = {}
        created.append(path)
        return created

    def unlink(self, path: str) -> None:
        self._file(path)
        del self.files[path]
        p, name = split(path)
        del self.dirs[p][name]

    def rmdir(self, path: str) -> None:
        if path not in self.dirs:
            raise fs_error(errno.ENOTDIR if path in self.files else errno.ENOENT, path)
        if self.dirs[path]:
            raise fs_error(errno.ENOTEMPTY, path)
        if path == ROOT:
            raise fs_error(errno.EBUSY, path)
        del self.dirs[path]
        p, name = split(path)
        del self.dirs[p][name]

    def listdir(self, path: str) -> list[tuple[str, bool]]:
        d = self.dirs.get(path)
        if d is None:
            raise fs_error(errno.ENOTDIR if path in self.files else errno.ENOENT, path)
        return sorted(d.items())

    def stat(self, path: str) -> tuple[bool, int]:
        if path in self.dirs:
            return (True, 0)
        f = self._file(path)
        return (False, f if isinstance(f, int) else len(f))

    def open(self, path: str) -> None:
        self._file(path)

    def close(self, path: str) -> None:
        return None

    def read(self, path: str, offset: int, size: int) -> bytes:
        f = self._file(path)
        if offset < 0 or size < 0:
            raise fs_error(errno.EINVAL, path, "negative offset or size")
        if isinstance(f, int):
            return bytes(max(0, min(size, f - offset)))
        return bytes(f[offset : offset + size])

    def write(self, path: str, offset: int, data: bytes) -> int:
        f = self._file(path)
        if offset < 0:
            raise fs_error(errno.EINVAL, path, "negative offset")
        end = offset + len(data)
        if isinstance(f, int):
            self.files[path] = max(f, end)
        else:
            if offset > len(f):
                f.extend(bytes(offset - len(f)))
            f[offset:end] = data
        return len(data)

    def truncate(self, path: str, size: int) -> None:
        f = self._file(path)
        if size < 0:
            raise fs_error(errno.EINVAL, path, "negative size")
        if isinstance(f, int):
            self.files[path] = size
        elif size < len(f):
            del f[size:]
        else:
            f.extend(bytes(size - len(f)))

    def rename(self, path: str, new: str) -> None:
        """The source is checked first (ENOENT, EISDIR), then the target (EISDIR
        for a directory, ENOENT when its parent is missing), as LocalFS does."""
        data = self._file(path)
        if new in self.dirs:
            raise fs_error(errno.EISDIR, new)
        p, name = split(new)
        if p not in self.dirs:
            raise fs_error(errno.ENOENT, new)
        if new == path:
            return
        self.unlink(path)
        self.dirs[p][name] = False
        self.files[new] = data

    def list_dirs(self, path: str) -> list[str]:
        if path == ROOT:
            return list(self.dirs)
        prefix = path + "/"
        return [d for d in self.dirs if d == path or d.startswith(prefix)]

    # -- whole-tree view, for tests -----------------------------------------------------
    def tree(self) -> dict[str, Any]:
        """path -> None for directories, content (or size) for files."""
        out: dict[str, Any] = {d: None for d in self.dirs}
        for p, f in self.files.items():
            out[p] = f if isinstance(f, int) else bytes(f)
        return out

    def apply(self, op: str, path: str, args: tuple[Any, ...] = ()) -> Any:
        """Run one LOCAL_OPS operation by name (what a runtime does for a Local effect)."""
        fn = self._ops.get(op)
        if fn is None:
            raise ValueError(f"unknown local operation {op!r}; allowed: {', '.join(LOCAL_OPS)}")
        return fn(path, *args)


def union_tree(trees: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The federated namespace as the members' local trees make it: the union
    of their paths (None for directories, a file's content from the last tree
    that has it)."""
    out: dict[str, Any] = {}
    for tree in trees:
        for p, v in tree.items():
            if v is None:
                out.setdefault(p, None)
            else:
                out[p] = v
    return out
