"""Where a real run's CPU went, by kind of process: agents, mounts, programs, the kernel's threads.

A prediction that misses says the model's CPU differs from the machine's; this
says by how much and where.  ``Census.start()`` and ``.stop()`` read, for every
process of this machine whose command line names a kind (``fednode.cli serve``:
an agent, ``fednode.cli mount``: a mount, ``postmark``: a program; the kernel's
``ksoftirqd`` and ``kworker`` threads), each thread's scheduler statistics
(``/proc/PID/task/TID/schedstat``: CPU time and time spent runnable waiting
for a core, in ns, exact; and its context switches, voluntary and not), and
the machine's ``/proc/stat`` (busy and idle, softirq and steal, in ticks).
Programs that exit inside the window (a ``postmark`` binary) are counted by
their parent with ``RUSAGE_CHILDREN`` (``children``: the caller says which
kind its waited children were).

The waiting time is what the machine model's first-come-first-served cores
turn into queueing: a process runnable while both cores run others.  The
involuntary switches are the preemptions the model does not price.  The
kernel threads' CPU is work no process was charged for: loopback softirqs
deferred to ``ksoftirqd`` under load, or FUSE's and the page cache's work
queues.  This program itself is ``driver`` (the client API's threads run in
it; its CPU is its process clock, ended threads included, but its waits and
switches are its live threads' only).  Read only from ``/proc``: no privilege, no dependency.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path

#: a process's kind by its command line (the first that matches), or by its name for the kernel's threads
KINDS = (("fednode.cli serve", "agent"), ("fednode.cli mount", "mount"), ("postmark", "program"))
KERNEL = (("ksoftirqd", "ksoftirqd"), ("kworker", "kworker"))
#: /proc/stat's cpu line, in order
STAT = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


@dataclass
class Usage:
    """One kind's counters over a window."""

    cpu_ns: int = 0
    wait_ns: int = 0  # runnable, not running: waiting for a core
    voluntary: int = 0  # switches out because it blocked (a wait for a message)
    involuntary: int = 0  # preempted
    processes: int = 0

    def add(self, other: Usage) -> None:
        self.cpu_ns += other.cpu_ns
        self.wait_ns += other.wait_ns
        self.voluntary += other.voluntary
        self.involuntary += other.involuntary


def _kind(pid: str, scope: str = "") -> str | None:
    if pid == str(os.getpid()):
        return "driver"  # this program: the client API's threads
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        if not raw:  # a kernel thread: its name
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            return next((k for pre, k in KERNEL if name.startswith(pre)), None)
    except OSError:
        return None
    line = raw.replace(b"\0", b" ").decode(errors="replace")
    kind = next((k for pat, k in KINDS if pat in line), None)
    if kind in ("agent", "mount") and scope not in line:
        return None  # another federation's, on the same machine
    return kind


def _threads(pid: str) -> Usage:
    u = Usage(processes=1)
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return u
    for tid in tids:
        try:
            run, wait, _ = Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()
            status = Path(f"/proc/{pid}/task/{tid}/status").read_text()
        except (OSError, ValueError):
            continue
        u.cpu_ns += int(run)
        u.wait_ns += int(wait)
        for line in status.splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                u.voluntary += int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches:"):
                u.involuntary += int(line.split()[1])
    return u


def snapshot(scope: str = "") -> tuple[dict[str, Usage], dict[str, int]]:
    """Every named process's counters by pid (key ``kind:pid``), and /proc/stat's cpu line;
    agents and mounts only if their command line holds ``scope`` (their cluster file's path)."""
    procs: dict[str, Usage] = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit() and (kind := _kind(pid, scope)) is not None:
            procs[f"{kind}:{pid}"] = _threads(pid)
    me = procs.get(f"driver:{os.getpid()}")
    if me is not None:  # this program's threads that have ended count too (its CPU clock keeps them)
        me.cpu_ns = time.process_time_ns()
    with open("/proc/stat") as f:
        values = f.readline().split()[1:]
    return procs, {k: int(v) for k, v in zip(STAT, values, strict=False)}


@dataclass
class Census:
    """CPU by kind of process between ``start`` and ``stop`` (see the module's doc)."""

    children: str = "program"  # the kind of the caller's children that exit inside the window
    scope: str = ""  # agents and mounts counted: those whose command line holds it (their cluster file)
    kinds: dict[str, Usage] = field(default_factory=dict)
    machine: dict[str, int] = field(default_factory=dict)  # /proc/stat's ticks over the window
    _before: tuple[dict[str, Usage], dict[str, int]] | None = None
    _rusage: float = 0.0

    def start(self) -> Census:
        self._rusage = _children_s()
        self._before = snapshot(self.scope)
        return self

    def stop(self) -> Census:
        assert self._before is not None, "start() first"
        after, stat = snapshot(self.scope)
        before, stat0 = self._before
        self.kinds = {}
        for key, u in after.items():
            u0 = before.get(key, Usage())  # a process started inside the window: all of it
            kind = key.split(":")[0]
            d = Usage(u.cpu_ns - u0.cpu_ns, u.wait_ns - u0.wait_ns, u.voluntary - u0.voluntary,
                      u.involuntary - u0.involuntary)  # fmt: skip
            if d.cpu_ns or kind not in ("ksoftirqd", "kworker"):
                self.kinds.setdefault(kind, Usage()).add(d)
                self.kinds[kind].processes += 1
        exited = _children_s() - self._rusage
        if exited > 0:
            self.kinds.setdefault(self.children, Usage()).add(Usage(cpu_ns=int(exited * 1e9)))
        self.machine = {k: stat[k] - stat0.get(k, 0) for k in stat}
        return self

    def busy_share(self) -> float:
        """Of the machine's CPU over the window, the share not idle (all cores; steal counted busy)."""
        total = sum(self.machine.values())
        idle = self.machine.get("idle", 0) + self.machine.get("iowait", 0)
        return (total - idle) / total if total else 0.0

    def machine_busy_s(self) -> float:
        """The machine's CPU seconds over the window, every process's and the kernel's (ticks at USER_HZ)."""
        hz = os.sysconf("SC_CLK_TCK")
        busy = sum(v for k, v in self.machine.items() if k not in ("idle", "iowait"))
        return busy / hz


def _children_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime
