"""The field's file-system benchmarks on a federation mount, beside their fair baselines.

    python -m fednode.tools.mount_bench [--quick] [--only CASE,...] [--workloads W,...] [--out FILE]
    python -m fednode.tools.mount_bench --only gluster4,fed4-manager   # GlusterFS against 4 agents
    python -m fednode.tools.mount_bench --only fed1,fed4-rr --consistency sync,cto   # the two modes side by side

Runs the Debian ``postmark``, ``fio`` (4 KB random read and random write,
and its ``filecreate`` and ``filestat`` engines), ``dbench`` and ``fs_mark``,
each on:

* ``local``: a plain directory of this machine;
* ``passthrough``: a minimal Python FUSE file system (mfusepy, the same libfuse
  options as the federation mount: ``fednode.mount.FuseConfig``) over a plain
  directory: the fair baseline for "FUSE plus Python", which the federation
  mount cannot beat;
* ``gluster4``: a GlusterFS distribute volume of 4 bricks on this machine,
  mounted with ``mount -t glusterfs``: what a peer would install instead of
  fedfs (Debian ``glusterfs-server`` and ``glusterfs-client``, 10.3), so the
  yardstick a federation of 4 agents has to be judged against.  The script
  starts ``glusterd`` if none is running (and stops only the one it started),
  makes the volume from brick directories under the run's work directory
  (``force``: the bricks share one host and may sit on the root file system),
  waits for the mount by polling it, and unmounts, stops and deletes the volume
  and removes its bricks afterwards, on failure and Ctrl-C too.  It needs root;
  without ``glusterd`` or ``mount.glusterfs`` it is skipped with a line naming
  the package, and the rest of the table still runs;
* ``fed1``: a 1-agent federation mounted with ``fednode mount``;
* ``fed1-inproc``: the same agent and its mount in one process, ``fednode
  serve --mount``: what the socket between the mount and its agent costs is
  ``fed1`` beside this;
* ``fed4-manager``: 4 agents, ``placement: with_manager``;
* ``fed4-rr``: 4 agents, ``placement: round_robin``;
* ``fed4-entry``: as ``fed4-manager``, the mount with ``--route entry``: every
  call through the mount's own agent, which relays (what routing saves).

The federation's mounts route each call to the file's home or the name's
manager (``fednode mount``'s default ``--route home``) unless the case says.

A federation case runs its mount in the mode ``--consistency`` names
(``fednode mount --consistency``); given several (``sync,cto``), each
federation case runs once per mode, its column named ``fed1:sync``,
``fed1:cto`` ...; a case may also name its mode itself (``--only fed1:cto``).

It prints one table: each figure, and under it two rows of its cost relative
to the baselines measured in the same run, ``x gl`` to GlusterFS and ``x pt``
to the passthrough (the baseline's figure over this one for rates, this one's
over the baseline's for times: above 1 is slower, so ``fed4-manager``'s ``x gl``
is how many times slower than GlusterFS a federation of 4 agents is).  A row is
left out when its baseline did not run (``--only``, or GlusterFS skipped).  The
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
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GLUSTER = "gluster4"  # the GlusterFS case: a distribute volume of GLUSTER_BRICKS bricks
GLUSTER_BRICKS = 4
INPROC = "fed1-inproc"  # one agent and its mount in one process: ``fednode serve --mount``
CASES = ("local", "passthrough", GLUSTER, "fed1", INPROC, "fed4-manager", "fed4-rr", "fed4-entry")
# the baselines every figure is compared with, by the tag its ratio row carries
BASELINES = (("gl", GLUSTER), ("pt", "passthrough"))
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


# ---------------------------------------------------------------------------- the GlusterFS baseline
# The programs the GlusterFS case runs and the Debian package each comes in
# (``gluster``, the CLI, is glusterfs-cli, which glusterfs-server pulls in).
GLUSTER_PROGRAMS = {
    "glusterd": "glusterfs-server",
    "gluster": "glusterfs-server",
    "mount.glusterfs": "glusterfs-client",
}
GLUSTER_CLI = ("gluster", "--mode=script")  # script mode: no interactive "continue? (y/n)"


def _which(prog: str) -> str | None:
    """``shutil.which`` that also looks in the sbin directories, where Debian
    puts glusterd and mount.glusterfs and which a non-login PATH may lack."""
    return shutil.which(prog, path=os.pathsep.join([os.environ.get("PATH", os.defpath), "/usr/sbin", "/sbin"]))


def skip_reason(case: str) -> str | None:
    """Why ``case`` cannot run on this machine (one line naming what to
    install), or None.  Only the GlusterFS case has prerequisites beyond the
    benchmarks': skipping it rather than failing keeps the rest of the table."""
    if case != GLUSTER:
        return None
    missing = [p for p in GLUSTER_PROGRAMS if _which(p) is None]
    if missing:
        packages = " ".join(dict.fromkeys(GLUSTER_PROGRAMS[p] for p in missing))
        return f"{case} skipped: no {', '.join(missing)} (apt-get install {packages})"
    if os.geteuid() != 0:
        return f"{case} skipped: glusterd and mount -t glusterfs need root"
    return None


@dataclass(frozen=True)
class GlusterVolume:
    """A distribute volume of bricks on this host, as the command lines that
    make, mount and remove it (kept apart from running them so they can be
    checked without GlusterFS)."""

    name: str
    host: str  # glusterd refuses localhost and 127.0.0.1 for a brick, not this host's name
    bricks: tuple[Path, ...]

    @classmethod
    def under(cls, base: Path, n: int = GLUSTER_BRICKS) -> GlusterVolume:
        """Bricks ``base/brick1..n``; the name carries the pid so a volume a
        killed run left behind cannot clash with the next run's."""
        return cls(f"fedfs-mb-{os.getpid()}", socket.gethostname(), tuple(base / f"brick{i}" for i in range(1, n + 1)))

    def create(self) -> list[str]:
        # force: glusterd otherwise refuses bricks on the root file system and several on one host
        bricks = [f"{self.host}:{b}" for b in self.bricks]
        return [*GLUSTER_CLI, "volume", "create", self.name, "transport", "tcp", *bricks, "force"]

    def start(self) -> list[str]:
        return [*GLUSTER_CLI, "volume", "start", self.name]

    def stop(self) -> list[str]:
        # force: stop even if a brick died, so that the delete after it can run
        return [*GLUSTER_CLI, "volume", "stop", self.name, "force"]

    def delete(self) -> list[str]:
        return [*GLUSTER_CLI, "volume", "delete", self.name]

    def mount(self, mountpoint: Path, log: Path) -> list[str]:
        return ["mount", "-t", "glusterfs", "-o", f"log-file={log}", f"{self.host}:/{self.name}", str(mountpoint)]


def _gluster_run(cmd: list[str]) -> None:
    """One set-up step; its output in the error if it fails."""
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stdout.strip()} {r.stderr.strip()}")


def _gluster_undo(cmd: list[str]) -> None:
    """One tear-down step: a failure is reported, not raised, so that the
    steps after it still run and an error that stopped the run stays the one
    the user sees."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        ok, why = r.returncode == 0, f"{r.stdout.strip()} {r.stderr.strip()}"
    except (OSError, subprocess.TimeoutExpired) as e:
        ok, why = False, str(e)
    if not ok:
        print(f"mount_bench: clean-up step failed: {' '.join(cmd)}: {why}", file=sys.stderr, flush=True)


def wait_until(ready: Callable[[], bool], what: str, tries: int = 200, interval: float = 0.05) -> None:
    """Poll ``ready`` until it holds, at most ``tries`` times: a bounded wait on
    a condition instead of a sleep long enough for a fast machine."""
    for _ in range(tries):
        if ready():
            return
        time.sleep(interval)
    raise RuntimeError(f"{what}: not ready after {tries} checks {interval} s apart")


def glusterd_answers() -> bool:
    """Whether a glusterd answers the CLI (it fails at once when none runs)."""
    try:
        return subprocess.run([*GLUSTER_CLI, "pool", "list"], capture_output=True, timeout=30).returncode == 0
    except subprocess.TimeoutExpired:
        return False


@contextlib.contextmanager
def glusterd(log: Path) -> Iterator[None]:
    """A glusterd for the case: the one already running, left running, or one
    started here in the foreground (``-N``, in its own session so Ctrl-C
    reaches this script's clean-up first) and stopped afterwards."""
    if glusterd_answers():
        yield
        return
    with open(log, "ab") as out:
        proc = subprocess.Popen([_which("glusterd") or "glusterd", "-N", f"--log-file={log}"], stdin=subprocess.DEVNULL,
                                stdout=out, stderr=out, start_new_session=True)  # fmt: skip
    try:

        def up() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"glusterd exited ({proc.returncode}) at start; see {log}")
            return glusterd_answers()

        wait_until(up, f"glusterd (log: {log})")
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _mounted(mountpoint: Path) -> bool:
    """The GlusterFS client answers: mounted, and a stat of its root works."""
    try:
        os.stat(mountpoint)
    except OSError:
        return False
    return os.path.ismount(mountpoint)


def _unmount(mountpoint: Path) -> None:
    if os.path.ismount(mountpoint):
        _gluster_undo(["umount", str(mountpoint)])
    if os.path.ismount(mountpoint):  # busy (a benchmark killed mid-run): detach it
        _gluster_undo(["umount", "-l", str(mountpoint)])


@contextlib.contextmanager
def gluster_mount(base: Path, mountpoint: Path) -> Iterator[Path]:
    """A GlusterFS distribute volume of 4 bricks under ``base``, mounted at
    ``mountpoint``.  Each step's undo is registered once the step has
    succeeded, so a failure or Ctrl-C anywhere unwinds exactly what was made:
    unmount, stop and delete the volume, remove the bricks, stop glusterd if
    this started it."""
    vol = GlusterVolume.under(base)
    with contextlib.ExitStack() as stack:
        stack.enter_context(glusterd(base / "glusterd.log"))
        stack.callback(lambda: [shutil.rmtree(b, ignore_errors=True) for b in vol.bricks])
        for b in vol.bricks:
            b.mkdir()
        _gluster_run(vol.create())
        stack.callback(_gluster_undo, vol.delete())
        _gluster_run(vol.start())
        stack.callback(_gluster_undo, vol.stop())
        stack.callback(_unmount, mountpoint)  # before the mount: a mount that half-failed is undone too
        log = base / "mount.log"
        _gluster_run(vol.mount(mountpoint, log))
        wait_until(lambda: _mounted(mountpoint), f"GlusterFS volume {vol.name} at {mountpoint} (log: {log})")
        yield mountpoint


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
    """The directory a case's workloads run in, set up and torn down around them
    (``fed1:cto``: the case ``fed1`` with its mount in mode ``cto``)."""
    from fednode.cluster import ProcessCluster, write_local
    from fednode.mount import MountProcess

    base = work / case.replace(":", "-")
    case, _, mode = case.partition(":")
    base.mkdir()
    mnt = base / "mnt"
    if case == "local":
        mnt.mkdir()
        yield mnt
        return
    mnt.mkdir()
    if case == GLUSTER:
        with gluster_mount(base, mnt) as d:
            yield d
        return
    log = open(base / "mount.log", "ab")
    if case in ("passthrough", INPROC):  # one process serves the mount
        if case == INPROC:
            path = write_local(base / "fed", 1)
            cmd = [sys.executable, "-m", "fednode.cli", "serve", "--cluster", str(path), "--node", "0", "--mount",
                   str(mnt)]  # fmt: skip
        else:
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
    placement = {"fed4-manager": "with_manager", "fed4-rr": "round_robin", "fed4-entry": "with_manager"}.get(case)
    path = write_local(base / "fed", nodes, **({"protocol": {"placement": placement}} if placement else {}))
    pc = ProcessCluster(path, log_dir=base / "logs", new_session=True)
    mp = None
    try:
        pc.wait_ready()
        route = "entry" if case == "fed4-entry" else "home"
        mp = MountProcess.federation(path, 0, mnt, stderr=log, route=route, consistency=mode or None)
        mp.wait_ready()
        yield mnt
    finally:
        if mp is not None:
            mp.stop()
        pc.stop()
        log.close()


def with_modes(cases: list[str], modes: list[str]) -> list[str]:
    """Each federation case once per consistency mode (``fed1:sync``, ``fed1:cto``) when
    more than one is asked for, else with the one asked for; the others as they are."""
    out = []
    for case in cases:
        if case.startswith("fed") and ":" not in case and modes:
            out += [f"{case}:{m}" for m in modes] if len(modes) > 1 else [f"{case}:{modes[0]}"]
        else:
            out.append(case)
    return out


def run(cases: list[str], workloads: list[str], quick: bool, work: Path) -> dict[str, dict[str, Figure]]:
    results: dict[str, dict[str, Figure]] = {}
    for case in cases:
        why = skip_reason(case)
        if why is not None:
            print(why, file=sys.stderr, flush=True)
            continue
        results[case] = {}
        with case_dir(case, work) as d:
            for w in workloads:
                print(f"  {case}: {w} ...", file=sys.stderr, flush=True)
                for f in WORKLOADS[w](d / w, quick):
                    results[case][f.bench] = f
    return results


def ratio(f: Figure, base: Figure) -> float | None:
    """``f``'s cost relative to ``base``: above 1 is slower (for a rate, the
    base's over this one; for a time, this one's over the base's); None when
    either is not positive."""
    if f.value <= 0 or base.value <= 0:
        return None
    return base.value / f.value if f.higher_is_better else f.value / base.value


def _num(v: float) -> str:
    """A figure as a person reads it: ``1,224`` rather than ``1.224e+03``."""
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"


def table(results: dict[str, dict[str, Figure]]) -> str:
    """One row per figure, and under it one row of ratios per baseline that
    ran (``x gl``, ``x pt``): ratios in a cell of their own keep the columns
    narrow enough to read side by side."""
    from fedsim.schema import table as fmt

    cases = list(results)
    benches: list[Figure] = []
    for figs in results.values():
        for f in figs.values():
            if all(b.bench != f.bench for b in benches):
                benches.append(f)
    rows: list[list[Any]] = []
    for b in benches:
        figs = [results[c].get(b.bench) for c in cases]
        rows.append([b.bench, b.metric, *("-" if f is None else _num(f.value) for f in figs)])
        for tag, baseline in BASELINES:
            if baseline not in results:
                continue
            base = results[baseline].get(b.bench)
            rs = [None if f is None or base is None else ratio(f, base) for f in figs]
            rows.append(["", f"x {tag}", *("-" if r is None else f"{r:.2f}" for r in rs)])
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
    ap.add_argument("--work", default=None,
                    help="where the cases' directories go (default: a temporary directory; on an ext4 without a "
                    "journal a case pays for the files earlier cases deleted: /dev/shm/DIR does not)")  # fmt: skip
    ap.add_argument("--out", default=None, help="also write the table to this file")
    ap.add_argument("--consistency", default="", help="the federation mounts' modes, comma-separated (of sync, "
                    "cto; several: each federation case once per mode; default: the mount's default)")  # fmt: skip
    args = ap.parse_args(argv)
    modes = [m for m in args.consistency.split(",") if m]
    cases = with_modes([c for c in args.only.split(",") if c], modes)
    workloads = [w for w in args.workloads.split(",") if w]
    bad = [c for c in cases if c.partition(":")[0] not in CASES or c.partition(":")[2] not in ("", "sync", "cto")]
    bad += [m for m in modes if m not in ("sync", "cto")] + [w for w in workloads if w not in WORKLOADS]
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
