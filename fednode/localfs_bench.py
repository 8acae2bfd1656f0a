"""Micro-benchmark: LocalFS operations against the direct os calls, side by side in one run.

    python -m fednode.localfs_bench [--depth 1 2 3] [--n 200] [--rounds 15] [--dir DIR]

For each operation it times batches of ``n`` calls, alternating LocalFS and
the direct call round by round (so drift in the machine hits both alike), and
prints the median over rounds of the per-call time and the ratio.  A file at
depth d has the federated path /d1/.../f (d components).  The direct side
uses the absolute host path, as a program on the node would.

The last section prints the costs behind the choice of no directory-descriptor
cache in ``fednode.localfs``: a fresh walk costs an openat+close per level, a
safe cache would still need one fstatat per level to revalidate.

This is a measurement, not a test: nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

from fednode.localfs import LocalFS
from fedsim.schema import table

BLOCK = 4096
LISTDIR_ENTRIES = 32
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC


def _timed(batch: Callable[[], None], n: int) -> float:
    """µs per call of one batch of ``n`` calls."""
    t0 = time.perf_counter_ns()
    batch()
    return (time.perf_counter_ns() - t0) / n / 1000


class _Pair:
    """Alternating rounds of a LocalFS batch and its direct counterpart."""

    def __init__(self, n: int, rounds: int) -> None:
        self.n, self.rounds = n, rounds
        self.rows: list[tuple[str, float, float]] = []

    def run(
        self,
        name: str,
        local: Callable[[int], Callable[[], None]],
        direct: Callable[[int], Callable[[], None]],
        cleanup: Callable[[], None] = lambda: None,
    ) -> None:
        """``local(r)``/``direct(r)`` set round ``r`` up (untimed) and return the batch to time."""
        lt: list[float] = []
        dt: list[float] = []
        for r in range(-1, self.rounds):  # round -1 warms caches and is discarded
            for side, out in ((local, lt), (direct, dt)):
                batch = side(r)
                gc.disable()
                try:
                    t = _timed(batch, self.n)
                finally:
                    gc.enable()
                cleanup()
                if r >= 0:
                    out.append(t)
        self.rows.append((name, statistics.median(lt), statistics.median(dt)))

    def print(self, title: str) -> None:
        print(title)
        body = [[name, f"{lt:.2f}", f"{dt:.2f}", f"{lt / dt:.2f}"] for name, lt, dt in self.rows]
        for line in table(["op", "LocalFS µs", "direct µs", "ratio"], body).splitlines():
            print("  " + line)


def bench_depth(base: str, depth: int, n: int, rounds: int) -> None:
    """One table: every op on files at ``depth`` under a fresh root inside ``base``."""
    host = tempfile.mkdtemp(prefix=f"localfs-bench-d{depth}-", dir=base)
    try:
        with LocalFS(host) as fs:
            d = "".join(f"/d{i}" for i in range(1, depth))  # the files' directory ("" = the root)
            fd_dir = d or "/"
            hd = host + d
            fs.mkdir(fd_dir)
            f = f"{d}/f"
            hf = host + f
            fs.populate([(f, bytes(range(256)) * (4 * BLOCK // 256))])
            ls_dir = f"{d}/ls"
            fs.populate([(f"{ls_dir}/e{i}", 16) for i in range(LISTDIR_ENTRIES // 2)])
            for i in range(LISTDIR_ENTRIES // 2):
                fs.mkdir(f"{ls_dir}/s{i}")
            pair = _Pair(n, rounds)
            names = [f"x{i}" for i in range(n)]
            fed = [f"{d}/{x}" for x in names]
            hst = [f"{hd}/{x}" for x in names]

            def remove_files() -> None:
                for h in hst:
                    if os.path.lexists(h):
                        os.unlink(h)

            def remove_dirs() -> None:
                for h in hst:
                    if os.path.lexists(h):
                        os.rmdir(h)

            def make_files() -> None:
                for h in hst:
                    os.close(os.open(h, _CREATE, 0o666))

            # Batches are plain for loops that drop each result at once, on both sides alike (a list
            # comprehension would keep n results alive and bias the allocator against one side).
            create, mkdir, unlink, fstat, read, write, listdir = (
                fs.create,
                fs.mkdir,
                fs.unlink,
                fs.stat,
                fs.read,
                fs.write,
                fs.listdir,
            )
            loop = range(n)
            block = b"w" * BLOCK
            hls = host + ls_dir

            def l_create() -> None:
                for p in fed:
                    create(p)

            def d_create() -> None:
                for h in hst:
                    os.close(os.open(h, _CREATE, 0o666))

            def l_mkdir() -> None:
                for p in fed:
                    mkdir(p)

            def d_mkdir() -> None:
                for h in hst:
                    os.mkdir(h)

            def l_unlink() -> None:
                for p in fed:
                    unlink(p)

            def d_unlink() -> None:
                for h in hst:
                    os.unlink(h)

            def l_stat() -> None:
                for _ in loop:
                    fstat(f)

            def d_stat() -> None:
                for _ in loop:
                    os.stat(hf)

            def l_read() -> None:
                for _ in loop:
                    read(f, BLOCK, BLOCK)

            def d_read() -> None:
                for _ in loop:
                    fd = os.open(hf, os.O_RDONLY | os.O_CLOEXEC)
                    os.pread(fd, BLOCK, BLOCK)
                    os.close(fd)

            def l_write() -> None:
                for _ in loop:
                    write(f, BLOCK, block)

            def d_write() -> None:
                for _ in loop:
                    fd = os.open(hf, os.O_WRONLY | os.O_CLOEXEC)
                    os.pwrite(fd, block, BLOCK)
                    os.close(fd)

            def d_read_open() -> None:
                for _ in loop:
                    os.pread(hfd, BLOCK, BLOCK)

            def d_write_open() -> None:
                for _ in loop:
                    os.pwrite(hfd, block, BLOCK)

            def l_listdir() -> None:
                for _ in loop:
                    listdir(ls_dir)

            def d_listdir() -> None:
                for _ in loop:
                    with os.scandir(hls) as it:
                        sorted((e.name, e.is_dir(follow_symlinks=False)) for e in it)

            pair.run("create", lambda r: l_create, lambda r: d_create, remove_files)
            pair.run("mkdir", lambda r: l_mkdir, lambda r: d_mkdir, remove_dirs)
            pair.run("unlink", lambda r: (make_files(), l_unlink)[1], lambda r: (make_files(), d_unlink)[1])
            pair.run("stat", lambda r: l_stat, lambda r: d_stat)
            pair.run("read 4 KiB", lambda r: l_read, lambda r: d_read)
            pair.run("write 4 KiB", lambda r: l_write, lambda r: d_write)
            fs.open(f)
            hfd = os.open(hf, os.O_RDWR | os.O_CLOEXEC)
            try:
                pair.run("read 4 KiB (open)", lambda r: l_read, lambda r: d_read_open)
                pair.run("write 4 KiB (open)", lambda r: l_write, lambda r: d_write_open)
            finally:
                os.close(hfd)
                fs.close(f)
            pair.run(f"listdir ({LISTDIR_ENTRIES} entries)", lambda r: l_listdir, lambda r: d_listdir)
            pair.print(f"depth {depth}: file /{f.lstrip('/')} ; median of {rounds} rounds x {n} calls")
    finally:
        shutil.rmtree(host, ignore_errors=True)


def bench_walk(base: str, n: int, rounds: int) -> None:
    """Per directory level: a fresh O_PATH walk step vs the fstatat a safe fd cache would need."""
    host = tempfile.mkdtemp(prefix="localfs-bench-walk-", dir=base)
    try:
        os.mkdir(os.path.join(host, "d"))
        root = os.open(host, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        loop = range(n)

        def step() -> None:
            for _ in loop:
                os.close(os.open("d", flags, dir_fd=root))

        def revalidate() -> None:
            for _ in loop:
                st = os.stat("d", dir_fd=root, follow_symlinks=False)
                _ = st.st_ino == ino and st.st_dev == dev

        dev, ino = os.stat("d", dir_fd=root).st_dev, os.stat("d", dir_fd=root).st_ino
        walk, val = [], []
        for _ in range(rounds):
            walk.append(_timed(step, n))
            val.append(_timed(revalidate, n))
        os.close(root)
        print("directory-fd cache decision, cost per directory level:")
        print(f"  fresh walk step (openat O_PATH + close)   {statistics.median(walk):6.2f} µs")
        print(f"  cache revalidation (fstatat + compare)    {statistics.median(val):6.2f} µs")
    finally:
        shutil.rmtree(host, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fednode.localfs_bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--depth", type=int, nargs="+", default=[2], help="path depth(s) of the files (default 2)")
    ap.add_argument("--n", type=int, default=200, help="calls per timed batch")
    ap.add_argument("--rounds", type=int, default=15, help="timed batches per side")
    ap.add_argument("--dir", default=None, help="where to make the scratch tree (default: the temp dir)")
    a = ap.parse_args(argv)
    if min(a.depth) < 1 or a.n < 1 or a.rounds < 1:
        ap.error("--depth, --n and --rounds must be positive")
    base = a.dir or tempfile.gettempdir()
    print(
        f"LocalFS vs direct os calls in {base} (Python {platform.python_version()}, {platform.system()} "
        f"{platform.release()})"
    )
    for depth in a.depth:
        bench_depth(base, depth, a.n, a.rounds)
    bench_walk(base, a.n, a.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
