"""Micro-benchmark: LocalFS operations against the direct os calls, side by side in one run.

    python -m fednode.tools.localfs_bench [--depth 1 2 3] [--n 200] [--rounds 15] [--dir DIR]

For each operation it times batches of ``n`` calls, alternating LocalFS and
the direct call round by round (so drift in the machine hits both alike), and
prints the median over rounds of the per-call time and the ratio.  A file at
depth d has the federated path /d1/.../f (d components).  The direct side
uses the absolute host path, as a program on the node would.

Each LocalFS resolver this kernel has gets its column (``walk``: an openat per
component; ``openat2``: one RESOLVE_BENEATH call), beside the direct call.
The last section prints the costs behind the choice of no directory-descriptor
cache in ``fednode.localfs``: a fresh walk costs an openat+close per level, a
safe cache would still need one fstatat per level to revalidate, and one
openat2 resolves any depth at once.

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

from fednode.localfs import LocalFS, openat2_usable
from fedsim.schema import table

BLOCK = 4096
LISTDIR_ENTRIES = 32
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC


def _timed(batch: Callable[[], None], n: int) -> float:
    """µs per call of one batch of ``n`` calls."""
    t0 = time.perf_counter_ns()
    batch()
    return (time.perf_counter_ns() - t0) / n / 1000


class _Sides:
    """Alternating rounds of one batch per side (LocalFS per resolver, then the direct calls)."""

    def __init__(self, names: list[str], n: int, rounds: int) -> None:
        self.names, self.n, self.rounds = names, n, rounds
        self.rows: list[tuple[str, list[float]]] = []

    def run(
        self,
        name: str,
        sides: list[Callable[[int], Callable[[], None]]],
        cleanup: Callable[[], None] = lambda: None,
    ) -> None:
        """``side(r)`` sets round ``r`` up (untimed) and returns the batch to time; one side per name."""
        times: list[list[float]] = [[] for _ in sides]
        for r in range(-1, self.rounds):  # round -1 warms caches and is discarded
            for side, out in zip(sides, times, strict=True):
                batch = side(r)
                gc.disable()
                try:
                    t = _timed(batch, self.n)
                finally:
                    gc.enable()
                cleanup()
                if r >= 0:
                    out.append(t)
        self.rows.append((name, [statistics.median(t) for t in times]))

    def print(self, title: str) -> None:
        print(title)
        heads = ["op", *(f"{n} µs" for n in self.names), *(f"{n}/direct" for n in self.names[:-1])]
        body = [[name, *(f"{t:.2f}" for t in ts), *(f"{t / ts[-1]:.2f}" for t in ts[:-1])] for name, ts in self.rows]
        for line in table(heads, body).splitlines():
            print("  " + line)


def resolvers() -> list[str]:
    """The LocalFS resolvers this kernel has (the component walk always; openat2 where it works)."""
    fd = os.open(tempfile.gettempdir(), os.O_PATH | os.O_DIRECTORY)
    try:
        return ["walk", "openat2"] if openat2_usable(fd)[0] else ["walk"]
    finally:
        os.close(fd)


def bench_depth(base: str, depth: int, n: int, rounds: int) -> None:
    """One table: every op on files at ``depth`` under a fresh root inside ``base``, by each
    resolver of LocalFS and by the direct os call."""
    host = tempfile.mkdtemp(prefix=f"localfs-bench-d{depth}-", dir=base)
    kinds = resolvers()
    fss = [LocalFS(host, k) for k in kinds]
    try:
        fs = fss[0]
        d = "".join(f"/d{i}" for i in range(1, depth))  # the files' directory ("" = the root)
        hd = host + d
        fs.mkdir(d or "/")
        f = f"{d}/f"
        hf = host + f
        fs.populate([(f, bytes(range(256)) * (4 * BLOCK // 256))])
        ls_dir = f"{d}/ls"
        fs.populate([(f"{ls_dir}/e{i}", 16) for i in range(LISTDIR_ENTRIES // 2)])
        for i in range(LISTDIR_ENTRIES // 2):
            fs.mkdir(f"{ls_dir}/s{i}")
        table = _Sides([*kinds, "direct"], n, rounds)
        names = [f"x{i}" for i in range(n)]
        fed = [f"{d}/{x}" for x in names]
        hst = [f"{hd}/{x}" for x in names]
        loop = range(n)
        block = b"w" * BLOCK
        hls = host + ls_dir

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

        # Batches are plain for loops that drop each result at once, on every side alike (a list
        # comprehension would keep n results alive and bias the allocator against one side).
        def each_path(op: Callable[[str], object]) -> Callable[[], None]:
            def batch() -> None:
                for p in fed:
                    op(p)

            return batch

        def repeated(op: Callable[..., object], *args: object) -> Callable[[], None]:
            def batch() -> None:
                for _ in loop:
                    op(*args)

            return batch

        def d_create() -> None:
            for h in hst:
                os.close(os.open(h, _CREATE, 0o666))

        def d_mkdir() -> None:
            for h in hst:
                os.mkdir(h)

        def d_unlink() -> None:
            for h in hst:
                os.unlink(h)

        def d_stat() -> None:
            for _ in loop:
                os.stat(hf)

        def d_read() -> None:
            for _ in loop:
                fd = os.open(hf, os.O_RDONLY | os.O_CLOEXEC)
                os.pread(fd, BLOCK, BLOCK)
                os.close(fd)

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

        def d_listdir() -> None:
            for _ in loop:
                with os.scandir(hls) as it:
                    sorted((e.name, e.is_dir(follow_symlinks=False)) for e in it)

        Side = Callable[[int], Callable[[], None]]

        def sides(
            make: Callable[[LocalFS], Callable[[], None]],
            direct: Callable[[], None],
            setup: Callable[[], None] | None = None,
        ) -> list[Side]:
            """One side per LocalFS, then the direct calls; ``setup`` runs untimed before each batch."""

            def side(batch: Callable[[], None]) -> Side:
                def prepare(r: int) -> Callable[[], None]:
                    if setup is not None:
                        setup()
                    return batch

                return prepare

            return [*(side(make(x)) for x in fss), side(direct)]

        table.run("create", sides(lambda x: each_path(x.create), d_create), remove_files)
        table.run("mkdir", sides(lambda x: each_path(x.mkdir), d_mkdir), remove_dirs)
        table.run("unlink", sides(lambda x: each_path(x.unlink), d_unlink, make_files))
        table.run("stat", sides(lambda x: repeated(x.stat, f), d_stat))
        table.run("read 4 KiB", sides(lambda x: repeated(x.read, f, BLOCK, BLOCK), d_read))
        table.run("write 4 KiB", sides(lambda x: repeated(x.write, f, BLOCK, block), d_write))
        for x in fss:
            x.open(f)
        hfd = os.open(hf, os.O_RDWR | os.O_CLOEXEC)
        try:
            table.run("read 4 KiB (open)", sides(lambda x: repeated(x.read, f, BLOCK, BLOCK), d_read_open))
            table.run("write 4 KiB (open)", sides(lambda x: repeated(x.write, f, BLOCK, block), d_write_open))
        finally:
            os.close(hfd)
            for x in fss:
                x.close(f)
        table.run(f"listdir ({LISTDIR_ENTRIES} entries)", sides(lambda x: repeated(x.listdir, ls_dir), d_listdir))
        table.print(f"depth {depth}: file /{f.lstrip('/')} ; median of {rounds} rounds x {n} calls")
    finally:
        for x in fss:
            x.close_all()
        shutil.rmtree(host, ignore_errors=True)


def bench_walk(base: str, n: int, rounds: int) -> None:
    """Resolving a directory 1 and 3 levels down: the component walk (openat O_PATH + close per
    level), one openat2, and the fstatat per level a safe descriptor cache would need."""
    from fednode import localfs

    host = tempfile.mkdtemp(prefix="localfs-bench-walk-", dir=base)
    try:
        os.makedirs(os.path.join(host, "d", "d", "d"))
        root = os.open(host, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        loop = range(n)

        def walk(levels: int) -> Callable[[], None]:
            def batch() -> None:
                for _ in loop:
                    fd = root
                    for _ in range(levels):
                        nfd = os.open("d", flags, dir_fd=fd)
                        if fd != root:
                            os.close(fd)
                        fd = nfd
                    os.close(fd)

            return batch

        def openat2(levels: int) -> Callable[[], None]:
            o2, how, path = localfs._openat2, localfs._HOW_WALK, os.fsencode("/".join(["d"] * levels))
            assert o2 is not None

            def batch() -> None:
                for _ in loop:
                    os.close(o2(root, path, how))

            return batch

        def revalidate() -> None:
            for _ in loop:
                st = os.stat("d", dir_fd=root, follow_symlinks=False)
                _ = st.st_ino == ino and st.st_dev == dev

        dev, ino = os.stat("d", dir_fd=root).st_dev, os.stat("d", dir_fd=root).st_ino
        cases: dict[str, Callable[[], None]] = {
            "component walk, 1 level (openat O_PATH + close)": walk(1),
            "component walk, 3 levels": walk(3),
        }
        if "openat2" in resolvers():
            cases["openat2 RESOLVE_BENEATH + close, 1 level"] = openat2(1)
            cases["openat2 RESOLVE_BENEATH + close, 3 levels"] = openat2(3)
        cases["cache revalidation, per level (fstatat + compare)"] = revalidate
        times: dict[str, list[float]] = {k: [] for k in cases}
        for _ in range(rounds):
            for k, batch in cases.items():
                times[k].append(_timed(batch, n))
        os.close(root)
        print("resolving a directory, and the directory-fd cache decision:")
        for k, ts in times.items():
            print(f"  {k:<52}{statistics.median(ts):7.2f} µs")
    finally:
        shutil.rmtree(host, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fednode.tools.localfs_bench", description=__doc__.split("\n\n")[0])
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
