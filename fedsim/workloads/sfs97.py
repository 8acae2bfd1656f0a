"""The SPEC SFS97 (LADDIS) operation mix of FedFS Table 1 over a synthetic file set.

File set: shaped like FedFS 4.1's (about 19,500 files in 650 directories,
495 MB): directories in a two-level tree, file sizes from the SFS97 size
distribution (mostly small files, a tail to 1 MB; mean about 26 KB).  The
files already exist on the nodes' local file systems when the federation
starts, placed as the configured placement policy would have placed them, so
the run starts the way FedFS does: over existing data with cold tables.

Operations (Table 1: lookup 46 %, read 34 %, write 17 %, create 2 %,
remove 1 %) are NFS-like: lookup = stat, read/write = one ``io_size`` block
at a random offset through a descriptor each node keeps open per file.
Arrivals are open-loop Poisson at an offered load, or closed-loop clients.
"""

from __future__ import annotations

import errno
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import simpy

from fedsim.protocol.names import join
from fedsim.protocol.policies.homes import make_placement
from fedsim.runtime import OpTrace, SimCluster

# SFS97 file size distribution (KB, percent of files).
SFS_SIZES_KB = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256, 1024])
SFS_SIZE_PCT = np.array([33, 21, 13, 10, 8, 5, 4, 3, 2, 1], dtype=float)


@dataclass(slots=True)
class FileSet:
    dirs: list[str]
    files: list[str]
    sizes: dict[str, int]


def make_fileset(n_files: int, n_dirs: int, rng: np.random.Generator) -> FileSet:
    """``n_dirs`` directories (about sqrt(n) top-level ones, the rest below
    them) and ``n_files`` files spread over them."""
    top = max(1, round(n_dirs**0.5))
    dirs = [f"/d{i:03d}" for i in range(min(top, n_dirs))]
    for j in range(n_dirs - len(dirs)):
        dirs.append(f"{dirs[j % top]}/s{j:04d}")
    which = rng.integers(0, len(dirs), size=n_files)
    kb = rng.choice(SFS_SIZES_KB, size=n_files, p=SFS_SIZE_PCT / SFS_SIZE_PCT.sum())
    files = [join(dirs[d], f"f{i:05d}") for i, d in enumerate(which)]
    sizes = {f: int(k) * 1024 for f, k in zip(files, kb, strict=True)}
    return FileSet(dirs, files, sizes)


def place(cluster: SimCluster, fs: FileSet, placement: str, rng: np.random.Generator) -> None:
    """Put the file set on the nodes' local trees where ``placement`` would
    have put it: each name's manager asks its own policy object (the same
    ``make_placement`` objects the protocol uses), for a requester drawn at random."""
    n = len(cluster.nodes)
    members = cluster.nodes[0].members
    manager_of = cluster.nodes[0].manager_of
    seed = int(rng.integers(0, 2**31))
    policies = {m: make_placement(placement, m, seed) for m in members}
    per_node_files: dict[int, list[tuple[str, int]]] = defaultdict(list)
    per_node_dirs: dict[int, list[str]] = defaultdict(list)

    def home(path: str, is_dir: bool) -> int:
        m = manager_of(path)
        return policies[m].choose_home(path, is_dir, int(rng.integers(0, n)), m, members)

    for d in fs.dirs:
        per_node_dirs[home(d, True)].append(d)
    for f in fs.files:
        per_node_files[home(f, False)].append((f, fs.sizes[f]))
    for node in range(n):
        cluster.populate(node, per_node_files.get(node, []), per_node_dirs.get(node, []))


@dataclass
class Recorder:
    """Latencies and per-operation message counts of the measured operations."""

    latency: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    messages: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    nodes: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    started: int = 0
    done: int = 0


class Sfs97:
    """Drives a SimCluster with the SFS97 mix; call ``run()``."""

    def __init__(
        self,
        cluster: SimCluster,
        fileset: FileSet,
        *,
        mix: dict[str, float],
        rng: np.random.Generator,
        io_size: int = 8192,
        locality: float = 0.0,
        hot_files: int = 64,
        frontend_us: float = 0.0,
        zipf: float = 0.0,
    ) -> None:
        self.frontend_us = frontend_us
        self.c = cluster
        self.fs = fileset
        self.rng = rng
        self.io_size = io_size
        self.locality = locality
        names = sorted(mix)
        w = np.array([mix[k] for k in names], dtype=float)
        self.op_names = names
        self.op_p = w / w.sum()
        # rng.choice(len(names), p=op_p) draws one rng.random() and finds it in
        # this CDF (numpy's own arithmetic); bisecting the list directly draws
        # the same operations from the same random stream, 20x cheaper per op.
        cdf = self.op_p.cumsum()
        cdf /= cdf[-1]
        self._op_cdf: list[float] = cdf.tolist()
        self.files = list(fileset.files)
        self.sizes = dict(fileset.sizes)
        n = len(cluster.nodes)
        k = min(hot_files, len(self.files))
        self.hot = [list(rng.choice(len(self.files), size=k, replace=False)) for _ in range(n)]
        # Zipf-skewed picks (``zipf`` > 0): the initial files in a random order,
        # the k-th with weight 1/k^zipf; drawn by bisecting the CDF (one
        # rng.random() per pick).  Nothing is drawn when zipf is 0, so the
        # uniform workload's random stream is unchanged.
        self._zipf_files: list[str] = []
        self._zipf_cdf: list[float] = []
        if zipf > 0:
            order = rng.permutation(len(self.files))
            w = 1.0 / np.arange(1, len(self.files) + 1, dtype=float) ** zipf
            cdf = w.cumsum()
            self._zipf_cdf = (cdf / cdf[-1]).tolist()
            self._zipf_files = [self.files[int(i)] for i in order]
        #: each client program's open descriptors (a descriptor belongs to the client that opened it,
        #: as an agent's belong to their connection); client i defaults to node i
        self.fds: defaultdict[int, dict[str, int]] = defaultdict(dict)
        #: the files an operation in flight uses (a pick counts until its operation ends): a remove
        #: passes them by, so that the benchmark never races itself (a write through a descriptor whose
        #: file another client just removed is the workload's doing, not the design's error)
        self.busy: defaultdict[str, int] = defaultdict(int)
        self.created = 0
        self.rec = Recorder()
        self.measuring = True

    def _pick(self, node: int) -> str:
        if self.locality and self.rng.random() < self.locality:
            i = self.hot[node][int(self.rng.integers(0, len(self.hot[node])))]
            if i < len(self.files):
                return self.files[i]
        if self._zipf_files:
            return self._zipf_files[min(bisect_right(self._zipf_cdf, self.rng.random()), len(self._zipf_files) - 1)]
        return self.files[int(self.rng.integers(0, len(self.files)))]

    def _use(self, node: int) -> str:
        """A file for an operation that reads or writes it (``_pick``), busy until the operation ends."""
        path = self._pick(node)
        self.busy[path] += 1
        return path

    def _removable(self, i: int) -> int | None:
        """``files[i]``, or the next file after it that no operation in flight uses (None: all are
        used): no random draw beyond the one that chose ``i``, so a run without such a clash draws what
        it always drew."""
        n = len(self.files)
        for k in range(n):
            j = (i + k) % n
            if self.files[j] not in self.busy:
                return j
        return None

    def _fd(self, client: int, node: int, path: str, trace: OpTrace) -> Generator[Any, Any, int]:
        fd = self.fds[client].get(path)
        if fd is None:
            fd = yield from self.c.client_op(client, node, "open", path, trace=trace)
            self.fds[client][path] = fd
        return fd

    def one(self, node: int, client: int | None = None) -> Generator[Any, Any, None]:
        """One operation from a client attached to ``node`` (a SimPy process
        body); ``client`` numbers the client program (default: one per node),
        which a machine model (``fedsim.machine``) places and charges."""
        client = node if client is None else client
        c, env = self.c, self.c.env
        op = self.next_op(client)
        trace = OpTrace()
        t0 = env.now
        self.rec.started += 1
        path = used = ""  # used: the file ``_use`` marked busy for this operation
        if self.frontend_us:
            yield c.cpu_work(node, self.frontend_us)
        try:
            if op == "lookup":
                path = used = self._use(node)
                yield from c.client_op(client, node, "stat", path, trace=trace)
            elif op in ("read", "write"):
                path = used = self._use(node)
                fd = yield from self._fd(client, node, path, trace)
                size = self.sizes.get(path, 0)
                blocks = max(1, -(-size // self.io_size))
                off = int(self.rng.integers(0, blocks)) * self.io_size
                if op == "read":
                    yield from c.client_op(client, node, "read", fd, off, self.io_size, trace=trace)
                else:
                    yield from c.client_op(client, node, "write", fd, off, bytes(self.io_size), trace=trace)
                    self.sizes[path] = max(size, off + self.io_size)
            elif op == "create":
                d = self.fs.dirs[int(self.rng.integers(0, len(self.fs.dirs)))]
                path = join(d, f"n{node:04d}_{self.created:06d}")
                self.created += 1
                yield from c.client_op(client, node, "create", path, trace=trace)
                self.files.append(path)
                self.sizes[path] = 0
            elif op == "remove":
                if len(self.files) <= 1:
                    return
                i = self._removable(int(self.rng.integers(0, len(self.files))))
                if i is None:
                    return
                path = self.files[i]
                self.files[i] = self.files[-1]
                self.files.pop()
                self.sizes.pop(path, None)
                yield from c.client_op(client, node, "unlink", path, trace=trace)
            else:
                yield from self.other_op(op, client, node, trace)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.EHOSTDOWN) and path:
                self.fds[client].pop(path, None)
            if self.measuring:
                self.rec.errors[op] += 1
            return
        finally:
            if used:
                self.busy[used] -= 1
                if not self.busy[used]:
                    del self.busy[used]
        if self.measuring:
            r = self.rec
            r.latency[op].append(env.now - t0)
            r.messages[op].append(trace.messages)
            r.nodes[op].append(len(trace.nodes - {node}))
            r.done += 1

    def next_op(self, client: int) -> str:
        """The next operation of ``client``: drawn from the mix (one ``rng.random()``).  A
        workload with operations that follow one another (``ursa_mix``'s bursts) overrides it."""
        return self.op_names[bisect_right(self._op_cdf, self.rng.random())]

    def other_op(self, op: str, client: int, node: int, trace: OpTrace) -> Generator[Any, Any, None]:
        """An operation of a mix beyond SFS97's five (``ursa_mix``'s updates and renames): the
        mix workloads that add operations override this, so that one driver times, counts and
        records every mix the same way."""
        raise ValueError(f"{type(self).__name__} has no operation {op!r}")
        yield  # a generator, as the operations it stands for

    def open_loop(self, rate_per_s: float, n_ops: int) -> Generator[Any, Any, None]:
        env = self.c.env
        n = len(self.c.nodes)
        # The operations still running, in start order: a finished one leaves
        # (its first callback), so a million-operation run holds a few hundred
        # processes, not a million.  Waiting on them in order at the end is what
        # waiting on every process in order did: finished ones were skipped.
        live: dict[simpy.Process, None] = {}
        finished = live.pop
        mean_gap_us = 1e6 / rate_per_s
        for _ in range(n_ops):
            yield env.timeout(float(self.rng.exponential(mean_gap_us)))
            proc = env.process(self.one(int(self.rng.integers(0, n))))
            proc.callbacks.append(finished)
            live[proc] = None
        while live:
            yield next(iter(live))

    def closed_loop(self, clients: int, n_ops: int, think_us: float) -> Generator[Any, Any, None]:
        env = self.c.env
        n = len(self.c.nodes)
        remaining = [n_ops]

        def client(i: int) -> Generator[Any, Any, None]:
            while remaining[0] > 0:
                remaining[0] -= 1
                yield from self.one(i % n, i)
                if think_us:
                    yield env.timeout(float(self.rng.exponential(think_us)))

        procs = [env.process(client(i)) for i in range(clients)]
        yield from procs
