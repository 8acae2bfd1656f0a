"""The FUSE layer as a runtime model: a program's system calls on a mount, simulated.

A program on a mount (``fednode mount``) does not call the federation: its
system calls enter the kernel, which sends FUSE requests to the mount
process, whose callbacks (``fednode.mount.FedOps``) make client calls to the
mount's agent.  ``fednode.tools.calibrate_fuse`` measures what that costs on a
machine: for each kind of system call (a *phase*: ``creat``, ``write4k``,
``close_written``, ``open_cached``, ``open_cold``, ``open_append``,
``unlink``, ``mkdir``, ``rmdir`` ...), how many FUSE callbacks of each kind
and how many round trips to the agent it became, the program's own CPU per
call, and the mount's CPU per callback (inside the callback, its client
calls' encoding included, and outside it: libfuse, ctypes, ``/dev/fuse``).
That is the ``fuse:`` section of a profile (``machine.fuse`` in a config).

``Mount.syscall`` replays one system call in the simulator: the program's
CPU; the kernel's request to the mount (the message flight ``L``); the
mount's CPU for every callback the phase makes; the phase's round trips to
the agent, each the agent's receipt, its API call run by the protocol (so
messages, local operations and errors are the protocol's), and its reply; the
answer back to the program.  Round trips beyond the call's own (the kernel's
``getattr`` of the name before a create, of the parent after a change) are
``getattr`` calls, on the name first and then on its parent, as FedOps makes
them.  What a phase costs is measured; which protocol operations it runs is
FedOps' translation, written once here.

The kernel's caches are modelled where they decide the count: an entry looked
up within ``entry_timeout_s`` (1 s, the mount's) opens with one round trip
(``open_cached``) instead of two (``open_cold``), unless a write through the
mount has since made its attributes stale (the open's lookup then asks
again); and a file read after its open is fetched by the first ``read`` in
one request of up to the readahead window (``read_window``); later reads of
it hit the page cache (the program's CPU only).  A write that starts inside a
page and runs past its end reaches the mount as two writes (``write_parts``:
an append of 4 KiB is two round trips).  A directory's attributes,
which the kernel checks (``default_permissions``) before it looks a name up
in it, are dropped by every change in it (a create, unlink, mkdir, rmdir) and
fetched again by the next call there: one ``getattr`` of the directory more.
Only where the kernel checks modes (``default_permissions`` in the profile:
the calibration's mount did; a mount only root may enter does not,
``fednode.mount.kernel_checks``).
An unlink or rmdir was measured on a name the kernel had looked up: one
of a name it has not (within ``entry_timeout_s``) pays that lookup.
The phases that change a directory were measured back to back in one
directory, so with the checks they include that getattr; an open was measured
in a directory nobody changed, so it does not.  An open in a changed directory
pays it, and a change in a directory whose attributes the kernel holds is
spared it.

The mount's consistency mode (``consistency`` in the profile: the mode the
calibration's mount ran in, ``fednode mount --consistency``) decides where a
write's round trip is.  ``sync``: every FUSE write is one (``write4k``).
``cto`` (close-to-open): the mount holds a descriptor's writes
(``write_buffered``: the program's and the mount's CPU of ``write4k``, no
round trip) until the buffer would pass ``write_buffer_bytes``, when the held
writes go out in one round trip, and until the close: ``close_written``
carries what is held, one round trip for the writes (their bytes: the
message's size is theirs) and one for the close; a close with nothing held
makes only the close's.  An open fetches the file's attributes in its own
round trip (a pipelined ``getattr``), and the kernel keeps the pages it read
of a file across opens when nobody wrote the file since (``versions``: shared
by the mounts of one simulation), so such a read costs the program's CPU only.
"""

from __future__ import annotations

from collections.abc import Generator, Hashable
from dataclasses import dataclass, field
from typing import Any

from fedsim.protocol.designs import design_class
from fedsim.protocol.names import split
from fedsim.protocol.routing import Router

#: the phases a program's calls map onto, and the calls each must make (the rest are getattrs)
ESSENTIAL = {"creat": 1, "open_cached": 1, "open_cold": 1, "open_append": 1, "write4k": 1, "close_written": 1,
             "close_read": 1, "unlink": 1, "mkdir": 1, "rmdir": 1}  # fmt: skip
#: the kernel's page: a write that starts inside one and runs past its end reaches the mount in two parts
PAGE = 4096
#: the phases that change their directory (measured back to back: each paid the directory's getattr)
CHANGES = frozenset({"creat", "unlink", "mkdir", "rmdir"})
#: the phases that remove a name, measured on names the kernel had just looked up
REMOVALS = frozenset({"unlink", "rmdir"})
#: the phases that look a name up in a directory without changing it
OPENS = frozenset({"open_cached", "open_cold", "open_append"})
#: cto's own round trips where they differ from ``ESSENTIAL``: a write is held; the close
#: (measured after writes) sends them, one round trip, before its own
CTO_ESSENTIAL = {"write4k": 0, "close_written": 2}


class FuseProfileError(ValueError):
    """A ``fuse:`` section the model cannot use, worded for the user."""


@dataclass(slots=True)
class Phase:
    callbacks: float  # FUSE callbacks per call
    round_trips: int  # to the agent
    app_us: float  # the program's CPU (its side of the kernel included)
    mount_us: float  # the mount process's CPU


@dataclass(slots=True)
class FuseParams:
    phases: dict[str, Phase]
    read_window: int = 131072
    entry_timeout_s: float = 1.0
    attr_timeout_s: float = 1.0
    read_app_us: float = 3.0  # a read served by the page cache: the program's CPU only
    getattr_us: float = 0.0  # the mount's CPU for one getattr callback (a directory's, fetched again)
    consistency: str = "sync"  # the mode the mount was measured in: "sync" or "cto"
    write_buffer: int = 1 << 20  # cto: bytes a descriptor's held writes may reach before they are sent
    dir_checks: bool = True  # the kernel checks modes (default_permissions): a change costs the next call a getattr

    @property
    def cto(self) -> bool:
        return self.consistency == "cto"

    def essential(self, phase: str) -> int:
        """The round trips of ``phase`` that are its own call's (the rest were lookups: getattrs)."""
        if self.cto and phase in CTO_ESSENTIAL:
            return CTO_ESSENTIAL[phase]
        return ESSENTIAL.get(phase, 1)

    @classmethod
    def from_profile(cls, fuse: dict[str, Any]) -> FuseParams:
        """From a profile's ``fuse:`` section (``fednode calibrate --mount``)."""
        fuse = fuse.get("fuse", fuse)
        try:
            syscalls, callbacks = fuse["syscalls"], fuse["callbacks"]
            outside = float(fuse["mount_cpu_outside_callbacks_us"])
        except KeyError as exc:
            raise FuseProfileError(
                f"machine.fuse: no {exc.args[0]!r}: measure the mount with `fednode calibrate --mount`"
            ) from None
        missing = [p for p in ESSENTIAL if p not in syscalls]
        if missing:
            raise FuseProfileError(
                f"machine.fuse.syscalls: no {', '.join(missing)}: measure the mount with `fednode calibrate --mount`"
            )
        phases = {}
        for name, ph in syscalls.items():
            cbs = ph.get("callbacks") or {}
            mount = sum(n * (outside + float((callbacks.get(cb) or {}).get("cpu_us", 0.0))) for cb, n in cbs.items())
            phases[name] = Phase(float(sum(cbs.values())), round(float(ph.get("round_trips", 0.0))),
                                 float(ph.get("app_cpu_us", 0.0)), mount)  # fmt: skip
        cache = fuse.get("cache") or {}
        read_app = phases["read4k"].app_us if "read4k" in phases else 3.0
        getattr_us = outside + float((callbacks.get("getattr") or {}).get("cpu_us", 0.0))
        consistency = str(fuse.get("consistency", "sync"))
        if consistency not in ("sync", "cto"):
            raise FuseProfileError(f"machine.fuse.consistency: {consistency!r}, not sync or cto")
        return cls(phases, entry_timeout_s=float(cache.get("entry_timeout_s", 1.0)),
                   attr_timeout_s=float(cache.get("attr_timeout_s", 1.0)), read_app_us=read_app,
                   getattr_us=getattr_us, consistency=consistency,
                   write_buffer=int(fuse.get("write_buffer_bytes", 1 << 20)),
                   dir_checks=bool(fuse.get("default_permissions", True)))  # fmt: skip


@dataclass
class Mount:
    """One program on one mount of ``node`` (``client`` numbers both processes).

    Where each round trip goes is the real mount's decision, made by the same
    code (``fednode.mount.Entries``): with ``route="home"`` (the mount's
    default) a path's call goes to the file's home the mount learnt from the
    attributes a getattr or create brought back, else to the name's manager
    (``fedsim.protocol.routing.Router``); a descriptor's call to the agent that
    opened it.  ``route="entry"``: every call to ``node``."""

    cluster: Any  # SimCluster
    params: FuseParams
    client: int
    node: int
    route: str = "home"
    app: Hashable = None
    proc: Hashable = None
    seen: dict[str, float] = field(default_factory=dict)  # path -> when the kernel last looked it up (us)
    dirs: dict[str, float] = field(default_factory=dict)  # directory -> when the kernel last fetched its attributes
    fetched: set[int] = field(default_factory=set)  # descriptors whose data the first read brought
    created: Any = None  # the descriptor a create's own call opened (create_open), for the open that follows it
    fd_nodes: dict[int, int] = field(default_factory=dict)  # descriptor -> the agent that opened it
    router: Router | None = None
    # cto: each descriptor's held writes ([fd, offset, bytearray], coalesced when sequential), the file
    # each descriptor is of, the version of each file the kernel holds pages of, and every file's version
    held: dict[int, list[list[Any]]] = field(default_factory=dict)
    paths: dict[int, str] = field(default_factory=dict)
    pages: dict[str, int] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)  # shared by the mounts of one simulation

    def __post_init__(self) -> None:
        if self.route not in ("home", "entry"):
            raise ValueError(f"unknown mount route {self.route!r}; allowed: home, entry")
        m = self.cluster.machine
        host = 0 if m.p.hosts == 1 else m.host_of_node(self.node)
        self.app = m.add_proc(("app", self.client), host)
        self.proc = m.add_proc(("mount", self.client), host)
        if self.route == "home" and design_class(self.cluster.spec.design).CLIENT_ROUTE == "home":
            self.router = Router("home", self.cluster.spec)  # else, as fednode.mount.Entries: every call at node

    def entry(self, path: str) -> int:
        """The agent a call on ``path`` goes to (``fednode.mount.Entries.node_of``)."""
        return self.node if self.router is None else self.router.entry(self.client, path)

    def _call(self, path: str, calls: list[tuple[str, tuple[Any, ...]]], trace: Any) -> Generator:
        """One round trip of ``calls`` to the agent a call on ``path`` goes to (for
        a descriptor's call, ``path`` empty, its opener); what it returned teaches
        the router (a getattr's or create's attributes) and the descriptor map."""
        c = self.cluster
        op, args = calls[0]
        if path:
            node = self.entry(path)
        else:  # a descriptor's call: where it was opened (a close forgets it)
            node = (self.fd_nodes.pop if op == "close" else self.fd_nodes.get)(args[0], self.node)
        try:
            value = yield from c.agent_call(node, calls, trace)
        except FileNotFoundError:
            if self.router is not None and path:
                self.router.forget(path)
            raise
        if op == "getattr" and self.router is not None:
            self.router.learn(path, value)
        elif op in ("open", "create_open"):
            fd = value if op == "open" else value[0]
            self.fd_nodes[fd] = node
            if op == "create_open" and self.router is not None and value[1] is not None:
                self.router.learn(path, value[1])
        elif op == "unlink" and self.router is not None:
            self.router.forget(path)
        return value

    def _fresh(self, path: str) -> bool:
        t = self.seen.get(path)
        now = self.cluster.env.now
        self.seen[path] = now
        return t is not None and now - t < self.params.entry_timeout_s * 1e6

    @staticmethod
    def write_parts(args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """The FUSE writes a ``write(fd, offset, data)`` becomes: one, or two when
        it starts inside a page and runs past its end (the kernel sends the part
        up to the page boundary apart: an append of 4 KiB is two round trips)."""
        fd, offset, data = args
        head = PAGE - offset % PAGE
        if head == PAGE or len(data) <= head:
            return [args]
        return [(fd, offset, data[:head]), (fd, offset + head, data[head:])]

    def written(self, path: str) -> None:
        """A write through the mount made ``path``'s attributes stale: its next open looks it up again;
        and the file changed, so no mount's pages of it are kept at its next open."""
        self.seen.pop(path, None)
        self.versions[path] = self.versions.get(path, 0) + 1

    def opened(self, fd: int, path: str) -> None:
        """``fd`` is ``path`` opened (cto: the kernel keeps its pages if nobody wrote it since they were read)."""
        self.paths[fd] = path
        if self.params.cto and self.pages.get(path) == self.versions.get(path, 0):
            self.fetched.add(fd)  # its first read is served by the pages kept
        else:
            self.pages.pop(path, None)

    def write_buffered(self, args: tuple[Any, ...], trace: Any) -> Generator:
        """cto: one FUSE write the mount holds: ``write4k``'s CPU, and a round
        trip only when the held writes would pass ``write_buffer`` (then they
        go out together, before this one is held)."""
        c, ph = self.cluster, self.params.phases["write4k"]
        fd, offset, data = args
        yield c.cpu_at(self.app, ph.app_us)
        yield c.env.timeout(c.machine.p.L_us)
        held = self.held.setdefault(fd, [])
        if held and sum(len(h[2]) for h in held) + len(data) > self.params.write_buffer:
            yield from self._send(fd, trace)
            held = self.held.setdefault(fd, [])
        if held and held[-1][1] + len(held[-1][2]) == offset:
            held[-1][2] += data
        else:
            held.append([fd, offset, bytearray(data)])
        yield c.cpu_at(self.proc, ph.mount_us)
        yield c.env.timeout(c.machine.p.L_us)
        return len(data)

    def _send(self, fd: int, trace: Any) -> Generator:
        """The held writes of ``fd`` in one round trip (the mount's CPU: a close's share per round trip)."""
        held = self.held.pop(fd, None)
        if not held:
            return
        c = self.cluster
        ph = self.params.phases.get("close_written")
        share = ph.mount_us / max(ph.round_trips, 1) / 2 if ph is not None else 0.0
        yield c.cpu_at(self.proc, share)
        yield from self._call("", [("write", (f, o, bytes(d))) for f, o, d in held], trace)  # to fd's opener
        yield c.cpu_at(self.proc, share)

    def close(self, fd: int, phase: str, trace: Any) -> Generator:
        """A close(2) of ``fd`` (``phase``: ``close_read`` or ``close_written``); in cto
        the held writes go first (a round trip) and only then the close."""
        self.closed(fd)
        held = self.held.pop(fd, None) if self.params.cto else None
        before = [[("write", (f, o, bytes(d))) for f, o, d in held]] if held else []
        return (yield from self.syscall(phase, [("close", (fd,))], "", trace, before=before))

    def _dir_fresh(self, directory: str) -> bool:
        """Whether the kernel holds ``directory``'s attributes (fetched within the timeout, unchanged since)."""
        t = self.dirs.get(directory)
        return t is not None and self.cluster.env.now - t < self.params.attr_timeout_s * 1e6

    def syscall(
        self,
        phase: str,
        calls: list[tuple[str, tuple[Any, ...]]],
        path: str,
        trace: Any,
        before: list[list[tuple[str, tuple[Any, ...]]]] | None = None,
    ) -> Generator:
        """One system call of ``phase`` whose own round trip is ``calls`` (a
        pipeline where it is a list of more than one), after the round trips
        ``before`` (cto's held writes, which the phase's measured round trips
        count as its own); the value of its first call."""
        c, ph = self.cluster, self.params.phases[phase]
        mach = c.machine
        yield c.cpu_at(self.app, ph.app_us)
        yield c.env.timeout(mach.p.L_us)  # the kernel hands the request to the mount
        extra = max(ph.round_trips - self.params.essential(phase), 0)
        parent = split(path)[0] if path else "/"
        names = [path if i == 0 else parent for i in range(extra)]  # the getattrs: the name's, then its parent's
        mount_us = ph.mount_us
        if path and phase in REMOVALS and not self._fresh(path):
            names.insert(0, path)  # measured on names the kernel had: this one it looks up first
            mount_us += self.params.getattr_us
        checks = self.params.dir_checks  # (without: no directory's attributes fetched again, measured or here)
        if checks and path and phase in CHANGES and extra and self._dir_fresh(parent):
            names.pop()  # measured in a changed directory: here the kernel holds its attributes
            mount_us -= self.params.getattr_us
        elif checks and path and phase in OPENS and not self._dir_fresh(parent):
            names.append(parent)  # measured in an unchanged directory: this one changed, or its time ran out
            mount_us += self.params.getattr_us
        share = max(mount_us, 0.0) / (len(names) + 2)
        for name in names:
            yield c.cpu_at(self.proc, share)
            try:
                yield from self._call(name, [("getattr", (name,))], trace)
            except OSError:
                pass  # a lookup of a name not made yet: ENOENT, as the kernel expects
        for held in before or ():
            yield from self._call("", held, trace)  # a descriptor's writes: to the agent that opened it
        yield c.cpu_at(self.proc, share)
        value = yield from self._call(path, calls, trace)
        yield c.cpu_at(self.proc, share)
        yield c.env.timeout(mach.p.L_us)  # the answer back to the program
        if path:
            if phase in CHANGES:
                self.dirs.pop(parent, None)  # the change drops the directory's attributes
            else:
                self.dirs[parent] = c.env.now  # looked a name up in it: the attributes are fresh
        return value

    def read(self, fd: int, offset: int, size: int, file_size: int, trace: Any) -> Generator:
        """A read(2): the first after the open fetches up to the readahead
        window in one READ (``read4k``'s costs); the rest come from the page
        cache (in cto, across opens: ``opened``)."""
        c = self.cluster
        if fd in self.fetched and offset + size <= self.params.read_window:
            yield c.cpu_at(self.app, self.params.read_app_us)
            return b""
        self.fetched.add(fd)
        path = self.paths.get(fd)
        if path is not None and self.params.cto and file_size <= self.params.read_window:
            self.pages[path] = self.versions.get(path, 0)  # the whole file is in the kernel's pages now
        want = min(max(file_size, offset + size), self.params.read_window) - offset
        phase = "read4k" if "read4k" in self.params.phases else "write4k"
        ph = self.params.phases[phase]
        yield c.cpu_at(self.app, ph.app_us)
        yield c.env.timeout(c.machine.p.L_us)
        yield c.cpu_at(self.proc, ph.mount_us / max(ph.callbacks, 1e-9) / 2 if ph.callbacks else 0.0)
        value = yield from self._call("", [("read", (fd, offset, max(want, size)))], trace)
        yield c.cpu_at(self.proc, ph.mount_us / max(ph.callbacks, 1e-9) / 2 if ph.callbacks else 0.0)
        yield c.env.timeout(c.machine.p.L_us)
        return value

    def closed(self, fd: int) -> None:
        self.fetched.discard(fd)
        self.paths.pop(fd, None)
