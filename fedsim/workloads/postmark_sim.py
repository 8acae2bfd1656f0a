"""PostMark clients driving a simulated federation (``workload: kind: postmark``).

Each client runs one PostMark stream (``fedsim.workloads.postmark``) in its own
directory, closed loop: it issues the next file operation when the previous
one returned, as a PostMark process does.  A stream's operations become the
federation's client API calls the way PostMark's system calls reach a file
server: a create is ``create``, ``open``, the writes, ``close``; an append is
``open``, the writes at the file's end, ``close``; a read is ``open``, the
reads, ``close``; a delete is ``unlink``; the subdirectories are ``mkdir`` and
``rmdir``.  Request sizes follow PostMark's I/O mode (``io_sizes``).

Where a client's operations go (``route``) is the client's choice, made by
``fedsim.protocol.routing.Router`` once per PostMark operation (the agents'
``fednode.client.ClientPool`` uses the same one): ``hash`` sends each to the
manager of its pathname (Federated DAFS VI-B: with placement at the manager,
every access is local); ``fixed``, ``round_robin`` and ``random`` spread
clients over the servers whatever the file (about (N-1)/N of accesses reach
a server that is not the file's home, Fig. 7).

With ``client_link`` the clients are across a network from the servers, as
the paper's DAFS clients were (Fig. 5): each call's request travels to the
server (its one-way time) and its reply back, occupying the server's NIC for
its bytes (``SimCluster.to_client``): what makes large files slower in Fig. 6
("the latency from client-server data transfers dominates").  Without it the
clients run on the servers (no client network), as before.

Latencies and messages are recorded per PostMark operation (create, read,
append, delete, mkdir, rmdir) in the same ``Recorder`` the SFS97 driver fills,
so a study's metrics work unchanged.
"""

from __future__ import annotations

import errno
from collections.abc import Generator
from typing import Any

from fedsim.fuse import FuseParams, Mount
from fedsim.protocol.routing import Route, Router
from fedsim.runtime import CLIENT_HEADER, OpTrace, SimCluster
from fedsim.workloads.postmark import Clients, Op, PostMark, op_calls
from fedsim.workloads.sfs97 import Recorder


class PostMarkDriver:
    """Runs ``clients`` on ``cluster``; ``run()`` is the SimPy process body.
    After it: ``rec`` (per-operation latencies), ``counts`` (each client's
    PostMark counts) and the simulated span of each client's transactions."""

    def __init__(
        self,
        cluster: SimCluster,
        clients: Clients,
        *,
        route: Route = "fixed",
        client_link: bool = False,
        mount: FuseParams | None = None,
        mount_route: str = "home",
    ) -> None:
        self.c = cluster
        self.client_link = client_link
        self.clients = clients
        self.route = route
        self.router = Router(route, cluster.spec)
        self.rec = Recorder()
        self.measuring = True
        self.streams = [clients.client(i) for i in range(clients.clients)]
        self.tx_span: list[tuple[float, float]] = [(0.0, 0.0)] * clients.clients
        #: each client's whole run (its directory, pool, transactions, clean-up): what a binary's wall time spans
        self.span: list[tuple[float, float]] = [(0.0, 0.0)] * clients.clients
        #: with ``mount``: client i is the PostMark binary on a FUSE mount of node i, its system calls
        #: simulated by the FUSE model (``fedsim.fuse``; needs the machine model) and routed as the
        #: mount routes them (``mount_route``: ``home``, the mount's default, or ``entry``)
        self.mounts: list[Mount] | None = None
        if mount is not None:
            if cluster.machine is None:
                raise ValueError("PostMark on a mount needs the machine model (machine: model: calibrated)")
            n = len(cluster.nodes)
            versions: dict[str, int] = {}  # every file's version, shared: a write at one mount is seen by all
            self.mounts = [Mount(cluster, mount, i, i % n, mount_route, versions=versions)
                           for i in range(clients.clients)]  # fmt: skip

    @property
    def counts(self) -> list[dict[str, int]]:
        return [pm.counts.as_dict() for pm in self.streams]

    def binary_tps(self) -> float:
        """Transactions over the wall time of the longest client, pool creation
        and deletion included: what ``experiments.postmark_agents`` measures of
        the binaries on mounts (which report no finer time)."""
        start = min(s for s, _ in self.span)
        end = max(e for _, e in self.span)
        total = self.clients.clients * self.clients.params.transactions
        return total / ((end - start) / 1e6) if end > start else 0.0

    def transactions_per_s(self) -> float:
        """PostMark's headline number for all clients together: transactions
        done over the simulated time from the first client's first transaction
        to the last one's last (each client's pool creation excluded, as
        PostMark excludes it)."""
        start = min(s for s, _ in self.tx_span)
        end = max(e for _, e in self.tx_span)
        done = sum(pm.counts.transactions_done for pm in self.streams)
        return done / ((end - start) / 1e6) if end > start else 0.0

    def _call(
        self, client: int, node: int, name: str, args: tuple[Any, ...], trace: OpTrace
    ) -> Generator[Any, Any, Any]:
        """One call of client ``client`` at ``node`` (across the client network with
        ``client_link``; on a machine model, a client program's call, ``SimCluster.client_op``)."""
        c = self.c
        if c.machine is not None:
            return (yield from c.client_op(client, node, name, *args, trace=trace))
        if not self.client_link:
            return (yield from c.call_op(node, name, *args, trace=trace))
        sent = CLIENT_HEADER + sum(len(a) for a in args if isinstance(a, (bytes, str)))
        yield c.env.timeout(c.net.one_way(sent))
        value = yield from c.call_op(node, name, *args, trace=trace)
        yield c.env.timeout(c.to_client(node, CLIENT_HEADER + (len(value) if isinstance(value, bytes) else 0)))
        return value

    def _mount_call(
        self, mount: Mount, op: Op, name: str, args: tuple[Any, ...], trace: OpTrace
    ) -> Generator[Any, Any, Any]:
        """One of ``op_calls``' calls as the binary's system call on the mount: a
        create is ``open(O_CREAT)``, whose one call (``create_open``) opened the
        file, so the open that follows it is answered with that descriptor and
        costs nothing."""
        if name == "create":
            mount.written(args[0])  # a new file: no mount's pages of the name are its
            mount.seen[args[0]] = self.c.env.now
            made = yield from mount.syscall("creat", [("create_open", args)], args[0], trace)
            mount.created = made[0]  # the descriptor (the attributes went to the kernel)
            return None
        if name == "open":
            if mount.created is not None:
                fd, mount.created = mount.created, None
                mount.opened(fd, args[0])
                return fd
            fresh = mount._fresh(args[0])
            phase = "open_cold" if not fresh else "open_append" if op.kind == "append" else "open_cached"
            calls = [("open", args)]
            if mount.params.cto:
                calls.append(("getattr", args))  # cto's open revalidates: the attributes in its round trip
            fd = yield from mount.syscall(phase, calls, args[0], trace)
            mount.opened(fd, args[0])
            return fd
        if name == "write":
            mount.written(op.path)  # its attributes stale: the next open of it looks it up again
            done = 0
            for part in mount.write_parts(args):
                if mount.params.cto:
                    done += yield from mount.write_buffered(part, trace)
                else:
                    done += yield from mount.syscall("write4k", [("write", part)], "", trace)
            return done
        if name == "read":
            return (yield from mount.read(args[0], args[1], args[2], op.size, trace))
        if name == "close":
            phase = "close_read" if op.kind == "read" else "close_written"
            return (yield from mount.close(args[0], phase, trace))
        return (yield from mount.syscall(name, [(name, args)], args[0], trace))  # unlink, mkdir, rmdir

    def _op(self, client: int, node: int, op: Op, pm: PostMark, trace: OpTrace) -> Generator[Any, Any, None]:
        calls = op_calls(op, pm)
        call = next(calls)
        mount = self.mounts[client] if self.mounts is not None else None
        while True:
            try:
                if mount is not None:
                    value = yield from self._mount_call(mount, op, *call, trace=trace)
                else:
                    value = yield from self._call(client, node, *call, trace=trace)
            except OSError as exc:
                call = calls.throw(exc)  # the stream closes its descriptor, then the error goes on
                continue
            try:
                call = calls.send(value)
            except StopIteration:
                return

    def client(self, i: int) -> Generator[Any, Any, None]:
        """Client ``i``: make its directory (PostMark's location must exist),
        then its PostMark stream, one operation at a time."""
        env, pm = self.c.env, self.streams[i]
        home = self.clients.location(i)
        begun = env.now
        try:
            if self.mounts is not None:
                yield from self.mounts[i].syscall("mkdir", [("mkdir", (home,))], home, None)
            else:
                yield from self.c.client_op(i, self.router.entry(i, home), "mkdir", home)
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
            node = self.router.entry(i, op.path)
            try:
                yield from self._op(i, node, op, pm, trace)
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
                r.nodes[op.kind].append(len(trace.nodes - {node}))
                r.done += 1
        self.tx_span[i] = (t_end if t_start is None else t_start, t_end)
        self.span[i] = (begun, env.now)

    def run(self) -> Generator[Any, Any, None]:
        procs = [self.c.env.process(self.client(i)) for i in range(self.clients.clients)]
        yield from procs
