"""Calibration of the FUSE layer: what one application system call on a federation mount costs.

    python -m fednode.tools.calibrate_fuse [--repeat N] [--consistency cto|sync] [--out FILE]

``measure_fuse`` mounts one node of a running federation (``fednode mount``,
its callbacks counted: ``fednode.mount.MountStats`` through ``STATS_ENV``)
and makes system calls on it from this process, one kind per phase, each
``repeat`` times on fresh names.  Per phase it takes the mount's counters (a
snapshot on SIGUSR1, waited for by its sequence number) and the mount
process's CPU clock, so per system call it knows the FUSE callbacks the
kernel made, their ``Client`` round trips and calls, the mount's CPU in and
outside the callbacks (libfuse, mfusepy, the ``/dev/fuse`` reads and
writes), the caller's own CPU (``time.thread_time_ns`` around the call: the
kernel's FUSE work on the caller's side too) and the wall latency (median).
The result, under ``fuse:``, is what ``fedsim`` calibrates its model of the
mount with.  ``main`` runs it on a 1-agent federation it starts itself and
prints it as YAML.

Phases (names relative to a directory descriptor, so only the last
component is looked up; the kernel keeps a looked-up name and its attributes
``ENTRY_TIMEOUT`` = ``ATTR_TIMEOUT`` = 1 s, a failed lookup not at all):

* ``creat``: ``open(O_CREAT|O_WRONLY|O_TRUNC)`` of a new name (what ``creat(2)``
  is, and what C's ``fopen(name, "w")`` does);
* ``write4k``: 4 KiB ``write`` to one open file at sequential offsets;
* ``close_written``: ``close`` of a file just created and written;
* ``stat_cold`` / ``open_cold``: ``stat`` / ``open(O_RDONLY)`` of a name the
  kernel never saw (files made by a ``Client`` of the agent, not through
  the mount): the lookup included;
* ``stat_cached`` / ``open_cached``: the same of a name ``stat``'ed just
  before (within the timeouts: no lookup);
* ``read4k``: 4 KiB ``read``, sequential, of 16 KiB files just opened
  (``read_callbacks_per_kib``: the kernel's readahead makes one READ
  callback serve several reads, here the whole file);
* ``read4k_seq``: 4 KiB ``read``, sequential, through one file of
  ``repeat`` x 4 KiB (``read_seq_callbacks_per_kib``: readahead's window
  once it has grown);
* ``close_read``: ``close`` of a file opened for reading;
* ``open_append``: ``open(O_WRONLY|O_APPEND)`` of an existing file (cached name);
* ``unlink``, ``rmdir``: of a cached name; ``mkdir``: of a new name.

The phases run back to back in one directory, as a program's calls would:
where the kernel checks modes (``default_permissions``: a mount an ordinary
user made, or one with ``allow_other``; ``fednode.mount.kernel_checks``,
recorded as ``default_permissions``), each change of a directory (create,
unlink, mkdir, rmdir) makes the kernel drop the directory's attributes, which
it needs again for the next call in it, so consecutive changes pay a getattr
of the directory each (a mount only root may enter has no such checks); and
a directory's attributes, like a file's, are looked up again once they are
``ATTR_TIMEOUT`` old.
The mount's CPU is its process CPU clock (``time.process_time_ns`` in the
snapshot: every thread, nanoseconds) less what the snapshots themselves cost;
``mount_cpu_total_ms`` sets it beside utime+stime from ``/proc/PID/stat``
(clock ticks) over the whole run, as a check.  A FUSE ``release`` reaches the
mount after ``close`` returned: a phase ends only when every file closed has
been released (the snapshot's opens less releases equal the files still open),
so a close's release counts with the close.  A warm-up pass (``repeat`` 10, in
a directory of its own) comes first: the mount's connections, the
interpreter's caches.  Nothing here asserts on time.

The mount runs in the consistency mode the federation's mounts will
(``consistency``, by default the mount's default: ``fednode.mount.default_consistency``),
recorded with the result: in ``cto`` a ``write4k`` is held by the mount (no
round trip until ``write_buffer_bytes`` are held) and ``close_written``
carries the held writes (one round trip for them, one for the close), and an
open fetches the file's attributes in its round trip.

A benchmark tool (``fednode/tools``): agents never import it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fednode.client import Client
from fednode.mount import (
    ATTR_TIMEOUT,
    ENTRY_TIMEOUT,
    NEGATIVE_TIMEOUT,
    STATS_ENV,
    WRITE_BUFFER,
    MountProcess,
    default_consistency,
    kernel_checks,
)

BLOCK = 4096
READ_FILE = 4 * BLOCK  # the files read4k reads (16 KiB)
WARMUP_REPEAT = 10
CACHED_CHUNK = 50  # names warmed, then measured: well within ENTRY_TIMEOUT of their warming
SNAPSHOT_TIMEOUT_S = 10.0
MOUNT_TIMEOUT_S = 60.0
PHASES = ("creat", "write4k", "close_written", "stat_cold", "stat_cached", "open_cold", "read4k", "close_read",
          "read4k_seq", "open_cached", "open_append", "unlink", "mkdir", "rmdir")  # fmt: skip


def proc_cpu_ns(pid: int) -> int:
    """utime+stime of process ``pid`` (all its threads, ended ones too) from ``/proc/PID/stat``, in ns."""
    with open(f"/proc/{pid}/stat") as f:
        data = f.read()
    fields = data[data.rindex(")") + 2 :].split()  # from field 3 (state) on: the name may hold spaces
    return (int(fields[11]) + int(fields[12])) * 1_000_000_000 // os.sysconf("SC_CLK_TCK")


class _Probe:
    """The mount's counters: a ``MountStats`` snapshot asked for with SIGUSR1."""

    def __init__(self, mp: MountProcess, path: Path) -> None:
        self.mp = mp
        self.path = path
        self.seq = 0

    def snapshot(self) -> dict[str, Any]:
        """A snapshot taken after this call started (its ``seq`` is newer than the last one's)."""
        os.kill(self.mp.proc.pid, signal.SIGUSR1)
        deadline = time.monotonic() + SNAPSHOT_TIMEOUT_S
        seen = None
        while True:
            with contextlib.suppress(FileNotFoundError):
                st = os.stat(self.path)
                if (st.st_ino, st.st_mtime_ns) != seen:  # written anew (os.replace: a new inode, never partial)
                    seen = st.st_ino, st.st_mtime_ns
                    snap = json.loads(self.path.read_text())
                    if snap["seq"] > self.seq:
                        self.seq = snap["seq"]
                        return snap
            if self.mp.proc.poll() is not None:
                raise RuntimeError(f"the mount process exited ({self.mp.proc.returncode}) before its snapshot")
            if time.monotonic() > deadline:
                raise TimeoutError(f"no statistics from the mount in {self.path} within {SNAPSHOT_TIMEOUT_S} s")
            time.sleep(0.0005)

    def settled(self, held: int) -> dict[str, Any]:
        """A snapshot once every file this process closed was released: opens less releases == ``held``."""
        deadline = time.monotonic() + SNAPSHOT_TIMEOUT_S
        while True:
            snap = self.snapshot()
            cb = snap["callbacks"]
            calls = {k: cb.get(k, {}).get("calls", 0) for k in ("create", "open", "release")}
            if calls["create"] + calls["open"] - calls["release"] == held:
                return snap
            if time.monotonic() > deadline:
                raise TimeoutError(f"the mount did not release the closed files: {calls}, {held} open")


class _Phase:
    """What one phase measured: counter differences and the caller's per-call times."""

    def __init__(self) -> None:
        self.n = 0
        self.counters: dict[str, list[int]] = {}  # callback -> [calls, cpu_ns, round_trips, client_calls]
        self.mount_cpu_ns = 0
        self.app_cpu_ns: list[int] = []
        self.wall_ns: list[int] = []

    def add(self, before: dict[str, Any], after: dict[str, Any]) -> None:
        for name, c in after["callbacks"].items():
            b = before["callbacks"].get(name, {})
            d = [c[k] - b.get(k, 0) for k in ("calls", "cpu_ns", "round_trips", "client_calls")]
            if d[0]:
                acc = self.counters.setdefault(name, [0, 0, 0, 0])
                for i, v in enumerate(d):
                    acc[i] += v
        cpu = after["process_cpu_ns"] - before["process_cpu_ns"]
        self.mount_cpu_ns += cpu - (after["snapshot_cpu_ns"] - before["snapshot_cpu_ns"])


class _Bench:
    """The phases in one directory of the mount (``dfd``), its cold files made by ``fs``."""

    def __init__(self, probe: _Probe, fs: Client, fed_dir: str, local_dir: Path, n: int) -> None:
        self.probe, self.fs, self.fed_dir, self.n = probe, fs, fed_dir, n
        fs.mkdir(fed_dir)
        self.dfd = os.open(local_dir, os.O_RDONLY | os.O_DIRECTORY)
        self.held = 0  # files of the mount this process has open
        self.phases: dict[str, _Phase] = {}

    def close(self) -> None:
        os.close(self.dfd)

    @classmethod
    def measured(cls, probe: _Probe, fs: Client, fed_dir: str, local_dir: Path, n: int) -> _Bench:
        """Every phase, ``n`` calls each, in a directory of its own (its results in ``phases``)."""
        bench = cls(probe, fs, fed_dir, local_dir, n)
        try:
            bench.all_phases()
        finally:
            bench.close()
        return bench

    def _open(self, name: str, flags: int) -> int:
        fd = os.open(name, flags, 0o644, dir_fd=self.dfd)
        self.held += 1
        return fd

    def _close(self, fd: int) -> None:
        os.close(fd)
        self.held -= 1

    def _stat(self, names: list[str]) -> None:
        for name in names:
            os.stat(name, dir_fd=self.dfd)

    def run(
        self,
        phase: str,
        call: Callable[[int], Any],
        held: int = 0,
        setup: Callable[[range], None] | None = None,
        count: int | None = None,
    ) -> list[Any]:
        """``call(i)`` for i < ``count`` (default ``n``), timed, between two
        snapshots; ``setup(chunk)`` before each chunk of ``CACHED_CHUNK`` calls,
        outside them.  ``held``: how the call changes the files open."""
        count = self.n if count is None else count
        ph = self.phases[phase] = _Phase()
        out: list[Any] = []
        step = CACHED_CHUNK if setup is not None else count
        for start in range(0, count, step):
            chunk = range(start, min(start + step, count))
            if setup is not None:
                setup(chunk)
            before = self.probe.settled(self.held)
            for i in chunk:
                w0 = time.perf_counter_ns()
                c0 = time.thread_time_ns()
                value = call(i)
                c1 = time.thread_time_ns()
                w1 = time.perf_counter_ns()
                ph.app_cpu_ns.append(c1 - c0)
                ph.wall_ns.append(w1 - w0)
                out.append(value)
            self.held += held * len(chunk)
            ph.add(before, self.probe.settled(self.held))
        ph.n = count
        return out

    def all_phases(self) -> None:
        n, d, fs, base = self.n, self.dfd, self.fs, self.fed_dir
        block = b"x" * BLOCK
        content = os.urandom(READ_FILE)
        for i in range(n):  # never looked up through the mount: cold
            fs.create(f"{base}/s{i}")
            fs.write_file(f"{base}/r{i}", content)
        fs.write_file(f"{base}/seq", os.urandom(n * BLOCK))

        creat = os.O_CREAT | os.O_WRONLY | os.O_TRUNC
        created = self.run("creat", lambda i: os.open(f"c{i}", creat, 0o644, dir_fd=d), held=1)
        self.run("write4k", lambda i: os.write(created[0], block))
        for fd in created[1:]:
            os.write(fd, block)
        self.run("close_written", lambda i: os.close(created[i]), held=-1)

        self.run("stat_cold", lambda i: os.stat(f"s{i}", dir_fd=d))
        self.run("stat_cached", lambda i: os.stat(f"s{i}", dir_fd=d), setup=lambda c: self._stat([f"s{i}" for i in c]))

        readers = self.run("open_cold", lambda i: os.open(f"r{i}", os.O_RDONLY, dir_fd=d), held=1)
        got = self.run("read4k", lambda j: os.read(readers[j // (READ_FILE // BLOCK)], BLOCK))
        assert all(len(b) == BLOCK for b in got), "read4k: a short read"
        self.run("close_read", lambda i: os.close(readers[i]), held=-1)
        seq = self._open("seq", os.O_RDONLY)
        got = self.run("read4k_seq", lambda i: os.read(seq, BLOCK))
        assert all(len(b) == BLOCK for b in got), "read4k_seq: a short read"
        self._close(seq)

        for phase, flags in (("open_cached", os.O_RDONLY), ("open_append", os.O_WRONLY | os.O_APPEND)):
            fds = self.run(phase, lambda i, f=flags: os.open(f"r{i}", f, dir_fd=d), held=1,
                           setup=lambda c: self._stat([f"r{i}" for i in c]))  # fmt: skip
            for fd in fds:
                self._close(fd)

        self.run("unlink", lambda i: os.unlink(f"s{i}", dir_fd=d), setup=lambda c: self._stat([f"s{i}" for i in c]))
        self.run("mkdir", lambda i: os.mkdir(f"d{i}", dir_fd=d))
        self.run("rmdir", lambda i: os.rmdir(f"d{i}", dir_fd=d), setup=lambda c: self._stat([f"d{i}" for i in c]))


def _remove_tree(fs: Client, top: str) -> None:
    for name, is_dir in fs.readdir(top):
        path = f"{top}/{name}"
        if is_dir:
            _remove_tree(fs, path)
        else:
            fs.unlink(path)
    fs.rmdir(top)


def measure_fuse(
    cluster_file: Path, node: int, workdir: Path, repeat: int = 200, consistency: str | None = None
) -> dict[str, Any]:
    """Mount node ``node`` of the running federation of ``cluster_file`` (in mode
    ``consistency``; None: the mount's default) at
    ``workdir/mnt`` (its statistics in ``workdir/mount-stats.json``, its
    stderr in ``workdir/mount.log``), measure every phase ``repeat`` times
    (see the module docstring), unmount; the calibration as ``{"fuse": ...}``.
    It works in a directory of its own at the federation's root, removed after."""
    workdir = Path(workdir)
    mnt = workdir / "mnt"
    mnt.mkdir(parents=True, exist_ok=True)
    stats_file = workdir / "mount-stats.json"
    stats_file.unlink(missing_ok=True)
    top = f"/calibrate-fuse-{os.getpid()}-{time.time_ns()}"
    consistency = consistency or default_consistency()
    with Client(cluster_file, node=node) as fs, open(workdir / "mount.log", "ab") as log:
        mp = MountProcess.federation(cluster_file, node, mnt, stderr=log, env={STATS_ENV: str(stats_file)},
                                     consistency=consistency)  # fmt: skip
        try:
            mp.wait_ready(MOUNT_TIMEOUT_S)
            probe = _Probe(mp, stats_file)
            fs.mkdir(top)
            _Bench.measured(probe, fs, f"{top}/warm", mnt / top.lstrip("/") / "warm", min(repeat, WARMUP_REPEAT))
            first = probe.settled(0)
            proc0 = proc_cpu_ns(mp.proc.pid)
            bench = _Bench.measured(probe, fs, f"{top}/run", mnt / top.lstrip("/") / "run", repeat)
            last = probe.settled(0)
            proc1 = proc_cpu_ns(mp.proc.pid)
            if last["pid"] != mp.proc.pid:
                raise RuntimeError(f"statistics of process {last['pid']}, not the mount's {mp.proc.pid}")
        finally:
            mp.stop()
        with contextlib.suppress(OSError):
            _remove_tree(fs, top)
    clock_ms = (last["process_cpu_ns"] - first["process_cpu_ns"]) / 1e6
    return {"fuse": _summary(bench.phases, repeat, clock_ms, (proc1 - proc0) / 1e6, consistency)}


def _r(x: float) -> float:
    return round(float(x), 3)


def _summary(
    phases: dict[str, _Phase], repeat: int, clock_ms: float, proc_stat_ms: float, consistency: str = "sync"
) -> dict[str, Any]:
    syscalls: dict[str, Any] = {}
    totals: dict[str, list[int]] = {}
    mount_cpu = 0
    for phase in PHASES:
        ph = phases[phase]
        n = ph.n
        for name, c in ph.counters.items():
            acc = totals.setdefault(name, [0, 0, 0, 0])
            for i, v in enumerate(c):
                acc[i] += v
        mount_cpu += ph.mount_cpu_ns
        syscalls[phase] = {
            "callbacks": {name: _r(c[0] / n) for name, c in sorted(ph.counters.items())},
            "round_trips": _r(sum(c[2] for c in ph.counters.values()) / n),
            "client_calls": _r(sum(c[3] for c in ph.counters.values()) / n),
            "app_cpu_us": _r(sum(ph.app_cpu_ns) / n / 1000),
            "latency_us": _r(statistics.median(ph.wall_ns) / 1000),
            "mount_cpu_us": _r(ph.mount_cpu_ns / n / 1000),
            "callback_cpu_us": _r(sum(c[1] for c in ph.counters.values()) / n / 1000),
        }
    n_callbacks = sum(c[0] for c in totals.values())
    callback_cpu = sum(c[1] for c in totals.values())

    def reads_per_kib(phase: str) -> float:
        return _r(phases[phase].counters.get("read", [0])[0] / (phases[phase].n * BLOCK / 1024))

    return {
        "measured_by": "fednode.tools.calibrate_fuse",
        "repeat": repeat,
        "consistency": consistency,
        # whether the kernel checked modes (its mount is this user's, no allow_other): with the checks,
        # every change of a directory costs the next call there a getattr of it (fedsim.fuse)
        "default_permissions": kernel_checks(False),
        "write_buffer_bytes": WRITE_BUFFER,
        "cache": {
            "entry_timeout_s": ENTRY_TIMEOUT,
            "attr_timeout_s": ATTR_TIMEOUT,
            "negative_timeout_s": NEGATIVE_TIMEOUT,
        },
        "syscalls": syscalls,
        "callbacks": {
            name: {
                "calls": c[0],
                "cpu_us": _r(c[1] / c[0] / 1000),
                "round_trips": _r(c[2] / c[0]),
                "client_calls": _r(c[3] / c[0]),
            }
            for name, c in sorted(totals.items())
        },
        "mount_cpu_per_callback_us": _r(mount_cpu / n_callbacks / 1000),
        "mount_cpu_outside_callbacks_us": _r((mount_cpu - callback_cpu) / n_callbacks / 1000),
        "read_callbacks_per_kib": reads_per_kib("read4k"),
        "read_seq_callbacks_per_kib": reads_per_kib("read4k_seq"),
        "mount_cpu_total_ms": {"process_clock": _r(clock_ms), "proc_stat": _r(proc_stat_ms)},
    }


def main(argv: list[str] | None = None) -> int:
    import yaml

    from fednode.cluster import ProcessCluster, write_local

    ap = argparse.ArgumentParser(prog="python -m fednode.tools.calibrate_fuse", description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=200, help="system calls per phase (default 200)")
    ap.add_argument("--out", default=None, help="also write the YAML to this file")
    ap.add_argument("--consistency", choices=("cto", "sync"), default=None, help="the mount's mode (default: its "
                    "default)")  # fmt: skip
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="calibrate-fuse-") as tmp:
        base = Path(tmp)
        path = write_local(base / "fed", 1)
        with ProcessCluster(path, log_dir=base / "logs", new_session=True) as pc:
            pc.wait_ready(MOUNT_TIMEOUT_S)
            result = measure_fuse(path, pc.cluster.spec.members[0], base / "work", args.repeat, args.consistency)
    text = yaml.safe_dump(result, sort_keys=False)
    if args.out:
        Path(args.out).write_text(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
