"""PostMark clients driving a simulated federation (``workload: kind: postmark``).

Each client runs one PostMark stream (``fedsim.workloads.postmark``) in its own
directory, closed loop: it issues the next file operation when the previous
one returned, as a PostMark process does.  A stream's operations become the
federation's client API calls the way PostMark's system calls reach a file
server: a create is ``create``, ``open``, the writes, ``close``; an append is
``open``, the writes at the file's end, ``close``; a read is ``open``, the
reads, ``close``; a delete is ``unlink``; the subdirectories are ``mkdir`` and
``rmdir``.  Request sizes follow PostMark's I/O mode (``io_sizes``).

Where a client's requests go (``route``):

* ``fixed``: client ``i`` talks to server ``i mod N`` for everything (clients
  spread over the servers, whatever the file: about (N-1)/N of accesses are
  to files homed elsewhere, Federated DAFS Fig. 7);
* ``hash``: each operation goes to the manager of its pathname, the
  federation's own hash applied by the client (Federated DAFS VI-B: with
  placement at the manager, every access is local).

Latencies and messages are recorded per PostMark operation (create, read,
append, delete, mkdir, rmdir) in the same ``Recorder`` the SFS97 driver fills,
so a study's metrics work unchanged.
"""

from __future__ import annotations

import errno
from collections.abc import Generator
from typing import Any, Literal

from fedsim.runtime import OpTrace, SimCluster
from fedsim.workloads.postmark import Clients, Op, PostMark, io_sizes
from fedsim.workloads.sfs97 import Recorder

Route = Literal["fixed", "hash"]


class PostMarkDriver:
    """Runs ``clients`` on ``cluster``; ``run()`` is the SimPy process body.
    After it: ``rec`` (per-operation latencies), ``counts`` (each client's
    PostMark counts) and the simulated span of each client's transactions."""

    def __init__(self, cluster: SimCluster, clients: Clients, *, route: Route = "fixed") -> None:
        if route not in ("fixed", "hash"):
            raise ValueError(f"route must be 'fixed' or 'hash', not {route!r}")
        self.c = cluster
        self.clients = clients
        self.route = route
        self.rec = Recorder()
        self.measuring = True
        self.streams = [clients.client(i) for i in range(clients.clients)]
        self.tx_span: list[tuple[float, float]] = [(0.0, 0.0)] * clients.clients

    @property
    def counts(self) -> list[dict[str, int]]:
        return [pm.counts.as_dict() for pm in self.streams]

    def transactions_per_s(self) -> float:
        """PostMark's headline number for all clients together: transactions
        done over the simulated time from the first client's first transaction
        to the last one's last (each client's pool creation excluded, as
        PostMark excludes it)."""
        start = min(s for s, _ in self.tx_span)
        end = max(e for _, e in self.tx_span)
        done = sum(pm.counts.transactions_done for pm in self.streams)
        return done / ((end - start) / 1e6) if end > start else 0.0

    def _node(self, client: int, path: str) -> int:
        if self.route == "hash":
            return self.c.nodes[0].manager_of(path)
        return client % len(self.c.nodes)

    def _op(self, node: int, op: Op, pm: PostMark, trace: OpTrace) -> Generator[Any, Any, None]:
        c, p = self.c, pm.p
        if op.kind in ("mkdir", "rmdir"):
            yield from c.call_op(node, op.kind, op.path, trace=trace)
            return
        if op.kind == "delete":
            yield from c.call_op(node, "unlink", op.path, trace=trace)
            return
        if op.kind == "create":
            yield from c.call_op(node, "create", op.path, trace=trace)
        fd = yield from c.call_op(node, "open", op.path, trace=trace)
        try:
            offset = op.offset
            if op.kind == "read":
                for n in io_sizes(op.size, p.read_block_size, p.buffering):
                    yield from c.call_op(node, "read", fd, offset, n, trace=trace)
                    offset += n
            else:  # create or append: PostMark writes from the start of its source buffer
                at = 0
                for n in io_sizes(op.size, p.write_block_size, p.buffering):
                    yield from c.call_op(node, "write", fd, offset, pm.source[at : at + n], trace=trace)
                    offset += n
                    at += n
        finally:
            yield from c.call_op(node, "close", fd, trace=trace)

    def client(self, i: int) -> Generator[Any, Any, None]:
        """Client ``i``: make its directory (PostMark's location must exist),
        then its PostMark stream, one operation at a time."""
        env, pm = self.c.env, self.streams[i]
        home = self.clients.location(i)
        try:
            yield from self.c.call_op(self._node(i, home), "mkdir", home)
        except OSError as exc:
            if exc.errno != errno.EEXIST:
                raise
        t_start: float | None = None
        t_end = env.now
        for op in pm.ops():
            if op.phase == "transactions" and t_start is None:
                t_start = env.now
            trace = OpTrace()
            t0 = env.now
            self.rec.started += 1
            try:
                yield from self._op(self._node(i, op.path), op, pm, trace)
            except OSError:
                if self.measuring:
                    self.rec.errors[op.kind] += 1
                continue
            if op.phase == "transactions":
                t_end = env.now
            if self.measuring:
                r = self.rec
                r.latency[op.kind].append(env.now - t0)
                r.messages[op.kind].append(trace.messages)
                r.nodes[op.kind].append(len(trace.nodes - {self._node(i, op.path)}))
                r.done += 1
        self.tx_span[i] = (t_end if t_start is None else t_start, t_end)

    def run(self) -> Generator[Any, Any, None]:
        procs = [self.c.env.process(self.client(i)) for i in range(self.clients.clients)]
        yield from procs
