"""The field's file-system benchmarks on a federation mount, beside their fair baselines.

    python -m fednode.tools.mount_bench [--quick] [--only CASE,...] [--out DIR]

Runs the Debian ``postmark``, ``fio`` (4 KB random read and random write,
and its ``filecreate`` and ``filestat`` engines), ``dbench`` and ``fs_mark``,
each on:

* ``local``: a plain directory of this machine;
* ``passthrough``: a minimal Python FUSE file system (mfusepy, the same libfuse
  options as the federation mount: ``fednode.mount.FuseConfig``) over a plain
  directory: the fair baseline for "FUSE plus Python", which the federation
  mount cannot beat;
* ``fed1``: a 1-agent federation mounted with ``fednode mount``;
* ``fed4-manager``: 4 agents, ``placement: with_manager``;
* ``fed4-rr``: 4 agents, ``placement: round_robin``.

It prints one table, every figure with its cost relative to the passthrough
measured in the same run (``x pt``: the passthrough's figure over this one for
rates, this one's over the passthrough's for times; above 1 is slower).  The
issue's targets: 4 agents within 2x the passthrough's PostMark wall time and
within 3x its dbench throughput.  Timings vary with the machine's load; only
ratios from one run mean anything.

A benchmark tool (``fednode/tools``): agents never import it.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CASES = ("local", "passthrough", "fed1", "fed4-manager", "fed4-rr")
DBENCH_LOADFILE = "/usr/share/dbench/client.txt"


# ---------------------------------------------------------------------------- the passthrough baseline
def passthrough_ops(root: str) -> Any:
    """A minimal passthrough file system over ``root``: each FUSE callback one
    ``os`` call (the baseline's cost is FUSE plus Python, nothing else)."""
    import mfusepy

    from fednode.mount import FuseConfig

    class Passthrough(mfusepy.Operations):
        use_ns = True

        def __init__(self, root: str, on_ready: Callable[[], None]) -> None:
            self.root = root
            self.on_ready = on_ready

        def _p(self, path: str) -> str:
            return self.root + path

        def init_with_config(self, conn_info: Any, config: Any) -> None:
            if config is not None:
                FuseConfig.apply(config)
            self.on_ready()

        def getattr(self, path: str, fh: int | None = None) -> dict[str, int]:
            st = os.fstat(fh) if fh is not None else os.lstat(self._p(path))
            keys = ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_ino", "st_blocks", "st_blksize")
            d = {k: getattr(st, k) for k in keys}
            d.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
            return d

        def readdir(self, path: str, fh: int) -> list[Any]:
            out: list[Any] = [".", ".."]
            with os.scandir(self._p(path)) as it:
                for e in it:
                    out.append(
                        (e.name, {"st_mode": stat.S_IFDIR if e.is_dir() else stat.S_IFREG, "st_ino": e.inode()}, 0)
                    )
            return out

        def mkdir(self, path: str, mode: int) -> None:
            os.mkdir(self._p(path), mode)

        def rmdir(self, path: str) -> None:
            os.rmdir(self._p(path))

        def unlink(self, path: str) -> None:
            os.unlink(self._p(path))

        def rename(self, old: str, new: str, flags: int = 0) -> None:
            if flags:  # as the federation mount: Python has no renameat2
                raise OSError(errno.EINVAL, "rename flags are not supported")
            os.rename(self._p(old), self._p(new))

        def chmod(self, path: str, mode: int) -> None:
            os.chmod(self._p(path), mode)

        def chown(self, path: str, uid: int, gid: int) -> None:
            os.chown(self._p(path), uid, gid)

        def utimens(self, path: str, times: tuple[int, int] | None = None) -> None:
            os.utime(self._p(path), ns=times)

        def truncate(self, path: str, length: int, fh: int | None = None) -> None:
            os.truncate(self._p(path), length)

        def statfs(self, path: str) -> dict[str, int]:
            s = os.statvfs(self._p(path))
            keys = ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree", "f_namemax")
            return {k: getattr(s, k) for k in keys}

        def create(self, path: str, mode: int, flags: int = 0) -> int:
            return os.open(self._p(path), os.O_RDWR | os.O_CREAT | os.O_EXCL, mode)

        def open(self, path: str, flags: int) -> int:
            return os.open(self._p(path), flags & ~(os.O_CREAT | os.O_EXCL))

        def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
            return os.pread(fh, size, offset)

        def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
            return os.pwrite(fh, data, offset)

        def fsync(self, path: str, datasync: int, fh: int) -> None:
            os.fsync(fh)

        def flush(self, path: str, fh: int) -> None:
            pass

        def release(self, path: str, fh: int) -> None:
            os.close(fh)

    return Passthrough


def serve_passthrough(root: str, mountpoint: str) -> int:
    """``python -m fednode.tools.mount_bench passthrough ROOT MOUNTPOINT``: the baseline, in the foreground."""
    from fednode.mount import serve_fuse

    cls = passthrough_ops(root)
    return serve_fuse(lambda ready: cls(os.path.realpath(root), ready), mountpoint, fsname=f"passthrough:{root}")


# ---------------------------------------------------------------------------- the workloads
@dataclass
class Figure:
    bench: str
    metric: str  # what the number is, with its unit
    value: float
    higher_is_better: bool


def _run(cmd: list[str], cwd: str | None = None, timeout: float = 1800) -> tuple[str, float]:
    """Run a benchmark binary; its stdout and the wall time it took."""
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, encoding="utf-8", errors="replace", timeout=timeout)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stdout[-2000:]} {r.stderr[-2000:]}")
    return r.stdout, wall


def postmark(d: Path, quick: bool) -> list[Figure]:
    n, t = (100, 200) if quick else (1000, 4000)
    d.mkdir()
    conf = d.parent / f"{d.name}.pmrc"
    conf.write_text(
        f"set location .\nset number {n}\nset transactions {t}\nset size 500 10000\nset subdirectories 5\n"
        "set buffering false\nrun\nquit\n"
    )
    out, wall = _run(["postmark", str(conf)], cwd=str(d))  # postmark overflows on long locations: run in it
    conf.unlink()
    if "Time:" not in out:
        raise RuntimeError(f"postmark printed no summary: {out[-1000:]}")
    return [Figure("postmark", f"wall s ({n} files, {t} transactions)", wall, False)]


def _fio(d: Path, name: str, args: list[str]) -> dict[str, Any]:
    out, _ = _run(["fio", f"--name={name}", f"--directory={d}", "--output-format=json", *args])
    return json.loads(out[out.index("{") :])["jobs"][0]


def fio(d: Path, quick: bool) -> list[Figure]:
    d.mkdir()
    size = "2M" if quick else "16M"
    common = ["--bs=4k", f"--size={size}", "--ioengine=psync", "--direct=0", "--invalidate=1"]
    rr = _fio(d, "randread", [*common, "--rw=randread"])
    rw = _fio(d, "randwrite", [*common, "--rw=randwrite"])
    nfiles = 50 if quick else 500
    # filestat stats the files filecreate made: one file-name format for both
    files = [f"--nrfiles={nfiles}", "--filesize=4k", "--openfiles=1", "--bs=4k", "--filename_format=fc.$filenum"]
    fc = _fio(d, "filecreate", [*files, "--ioengine=filecreate", "--rw=write", "--create_on_open=1"])
    fs = _fio(d, "filestat", [*files, "--ioengine=filestat", "--rw=read"])
    return [
        Figure("fio randread 4k", "IOPS", rr["read"]["iops"], True),
        Figure("fio randwrite 4k", "IOPS", rw["write"]["iops"], True),
        Figure("fio filecreate", "files/s", fc["write"]["iops"], True),
        Figure("fio filestat", "stats/s", fs["read"]["iops"], True),
    ]


def dbench(d: Path, quick: bool) -> list[Figure]:
    d.mkdir()
    secs, clients = (3, 1) if quick else (10, 2)
    out, _ = _run(["dbench", "-c", DBENCH_LOADFILE, "-D", str(d), "-t", str(secs), str(clients)])
    m = re.search(r"Throughput ([\d.]+) MB/sec", out)
    if not m:
        raise RuntimeError(f"dbench printed no throughput: {out[-1000:]}")
    return [Figure("dbench", f"MB/s ({clients} clients, {secs} s)", float(m.group(1)), True)]


def fs_mark(d: Path, quick: bool) -> list[Figure]:
    d.mkdir()
    n = 100 if quick else 1000
    # fs_mark takes directory names under 40 bytes only: it runs in the directory
    out, _ = _run(["fs_mark", "-d", ".", "-n", str(n), "-s", "4096", "-t", "1", "-S", "1", "-L", "1", "-k"], cwd=str(d))
    rows = [ln.split() for ln in out.splitlines() if re.match(r"\s*\d+\s+\d+\s+\d+\s+[\d.]+", ln)]
    if not rows:
        raise RuntimeError(f"fs_mark printed no result row: {out[-1000:]}")
    return [Figure("fs_mark", f"files/s ({n} x 4 KB, fsync)", float(rows[-1][3]), True)]


WORKLOADS: dict[str, Callable[[Path, bool], list[Figure]]] = {
    "postmark": postmark,
    "fio": fio,
    "dbench": dbench,
    "fs_mark": fs_mark,
}


# ---------------------------------------------------------------------------- the cases
@contextlib.contextmanager
def case_dir(case: str, work: Path) -> Iterator[Path]:
    """The directory a case's workloads run in, set up and torn down around them."""
    from fednode.cluster import ProcessCluster, write_local
    from fednode.mount import MountProcess

    base = work / case
    base.mkdir()
    mnt = base / "mnt"
    if case == "local":
        mnt.mkdir()
        yield mnt
        return
    mnt.mkdir()
    log = open(base / "mount.log", "ab")
    if case == "passthrough":
        back = base / "back"
        back.mkdir()
        cmd = [sys.executable, "-m", "fednode.tools.mount_bench", "passthrough", str(back), str(mnt)]
        mp = MountProcess(cmd, mnt, stderr=log)
        try:
            mp.wait_ready()
            yield mnt
        finally:
            mp.stop()
            log.close()
        return
    nodes = 1 if case == "fed1" else 4
    placement = {"fed4-manager": "with_manager", "fed4-rr": "round_robin"}.get(case)
    path = write_local(base / "fed", nodes, **({"protocol": {"placement": placement}} if placement else {}))
    pc = ProcessCluster(path, log_dir=base / "logs", new_session=True)
    mp = None
    try:
        pc.wait_ready()
        mp = MountProcess.federation(path, 0, mnt, stderr=log)
        mp.wait_ready()
        yield mnt
    finally:
        if mp is not None:
            mp.stop()
        pc.stop()
        log.close()


def run(cases: list[str], workloads: list[str], quick: bool, work: Path) -> dict[str, dict[str, Figure]]:
    results: dict[str, dict[str, Figure]] = {}
    for case in cases:
        results[case] = {}
        with case_dir(case, work) as d:
            for w in workloads:
                print(f"  {case}: {w} ...", file=sys.stderr, flush=True)
                for f in WORKLOADS[w](d / w, quick):
                    results[case][f.bench] = f
    return results


def table(results: dict[str, dict[str, Figure]]) -> str:
    from fedsim.schema import table as fmt

    cases = list(results)
    benches: list[Figure] = []
    for figs in results.values():
        for f in figs.values():
            if all(b.bench != f.bench for b in benches):
                benches.append(f)
    rows = []
    base = results.get("passthrough", {})
    for b in benches:
        row: list[Any] = [b.bench, b.metric]
        for c in cases:
            f = results[c].get(b.bench)
            if f is None:
                row.append("-")
                continue
            cell = f"{f.value:.4g}"
            p = base.get(b.bench)
            if p is not None and c != "passthrough" and f.value > 0 and p.value > 0:
                ratio = p.value / f.value if f.higher_is_better else f.value / p.value
                cell += f" ({ratio:.2f}x pt)"
            row.append(cell)
        rows.append(row)
    return fmt(["benchmark", "figure", *cases], rows)


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["passthrough"]:
        return serve_passthrough(argv[1], argv[2])
    ap = argparse.ArgumentParser(prog="python -m fednode.tools.mount_bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--quick", action="store_true", help="small sizes: a smoke run, not a measurement")
    ap.add_argument("--only", default=",".join(CASES), help=f"cases, comma-separated (of {', '.join(CASES)})")
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help=f"of {', '.join(WORKLOADS)}")
    ap.add_argument("--work", default=None, help="where the cases' directories go (default: a temporary directory)")
    ap.add_argument("--out", default=None, help="also write the table to this file")
    args = ap.parse_args(argv)
    cases = [c for c in args.only.split(",") if c]
    workloads = [w for w in args.workloads.split(",") if w]
    bad = [c for c in cases if c not in CASES] + [w for w in workloads if w not in WORKLOADS]
    if bad or not cases or not workloads:
        print(f"unknown case or workload: {bad}", file=sys.stderr)
        return 2
    missing = [t for t in ("postmark", "fio", "dbench", "fs_mark", "fusermount3") if shutil.which(t) is None]
    if missing:
        print(f"missing programs: {', '.join(missing)} (./dev.sh setup installs them)", file=sys.stderr)
        return 2
    with contextlib.ExitStack() as stack:
        work = Path(args.work) if args.work else Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mb-")))
        work.mkdir(parents=True, exist_ok=True)
        results = run(cases, workloads, args.quick, work)
    out = table(results)
    print(out)
    if args.out:
        Path(args.out).write_text(out + "\n")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
    sys.exit(errno.EPIPE)
