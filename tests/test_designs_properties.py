"""Issue 25: every design other than FedFS against a single reference tree in the
in-memory runtime (FedFS's own: ``tests.test_protocol_properties``, whose
``Reference`` and helpers are used here).

Hypothesis draws a federation size and a sequence of operations, each from a
client at a random member; the clients' operations interleave one at a time
(the in-memory runtime runs an operation to its end).  What each design
promises, and what is checked:

* **NFS, NFSp, mNFS, dNFSp2**: one namespace, sequentially consistent: every
  operation, whichever member's client issues it, has the reference's result
  or errno, and at the end every member's clients see the reference tree.
  (NFS and NFSp: one server; mNFS: every server applies every metadata write,
  in its sequencer's one order; dNFSp2: the token holder of a name has its
  latest metadata, and every meta-server holds the tokens of a procedure's
  names across the procedure.)  dNFSp2's one exception: a directory's listing
  is the meta-server's own view (neither of dNFSp's schemes covers listings),
  so with several meta-servers its ``readdir`` and walk are not compared;
  every name's ``stat`` is, at every client.
* **dNFSp1** (lazy: a meta-server copies a name from the others on its first
  miss and never synchronises it again) is checked in two parts:
  - the clients of one meta-server see exactly the reference (a meta-server's
    own tree is coherent with itself);
  - clients of several meta-servers, on a namespace that only grows (create,
    mkdir, write, read, stat: no removal), see every name any other
    meta-server made (a miss asks them all), so every create, mkdir, write and
    read has the reference's outcome and reads return the reference's bytes
    (the data lives at the shared I/O daemons); only a file's size may lag:
    ``stat`` at a meta-server gives the size it last knew, never more than the
    reference's, and is exact at the meta-server whose client wrote last.

Concurrent clients, in the simulator (whose clients' calls interleave at every
message):

* clients at different members, each in its own directory, run at once and
  each sees the reference, dNFSp1's included;
* a client at each member creating one name at once: exactly one succeeds,
  except dNFSp1 (one per meta-server: its weaker promise);
* clients at different members making, removing, writing and renaming the same
  names at once end in one tree that every member's clients see alike (no
  deadlock on the way), except: dNFSp1 (not checked: a name removed at one
  meta-server stays at the others that copied it, its stated promise), and
  mNFS's file sizes when a client's write races another's removal or rename of
  its file: file data is not ordered (the paper's "NFS does not consider an
  order of I/O requests"), so a write may grow the file at the servers it
  reached before the removal and not at the others (``fedsim.protocol.mnfs.node``);
  its names and kinds are still one tree.

The concurrent tests found two gaps, since fixed: dNFSp2's token was taken
before a procedure but not held across it (two meta-servers both created one
name; a named holder still waiting for the token handed over nothing), and
mNFS's servers applied concurrent multicast metadata writes in different
orders (every concurrent create failed though the name existed; a mkdir inside
a directory made at once existed at some servers only).
"""

from __future__ import annotations

import errno
import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedsim.direct import DirectCluster
from tests.test_protocol_properties import NAMES, OPS, Reference, fed_read, fed_write, outcome

STRONG = ("nfs", "nfsp", "mnfs", "dnfsp2")
#: designs whose directory listing is the meta-server's own view (the names it made or fetched: neither of
#: dNFSp's schemes covers listings, ``fedsim.protocol.dnfsp.meta``): their listings are checked only when
#: there is one meta-server
PER_META_LISTINGS = ("dnfsp2",)

paths = st.lists(st.sampled_from(NAMES), min_size=1, max_size=3).map(lambda p: "/" + "/".join(p))


def op_strategy(names: list[str]) -> st.SearchStrategy:
    return st.one_of(
        st.tuples(st.sampled_from(names), paths),
        st.tuples(st.just("write"), paths, st.integers(0, 8), st.binary(min_size=1, max_size=8)),
        st.tuples(st.just("read"), paths, st.integers(0, 8), st.integers(0, 16)),
    )


def apply(c: DirectCluster, ref: Reference, node: int, op: tuple) -> tuple[Any, Any]:
    """``op`` by a client at ``node`` and on the reference: (federation's outcome, reference's)."""
    name, path, *rest = op
    if name == "write":
        return outcome(fed_write, c, node, path, *rest), outcome(ref.write, path, *rest)
    if name == "read":
        return outcome(fed_read, c, node, path, *rest), outcome(ref.read, path, *rest)
    got = outcome(c.op, node, name, path)
    if name == "stat" and got[0] == "ok":
        got = ("ok", tuple(got[1]))
    want = outcome(getattr(ref, name), path)
    if name in ("create", "mkdir") and want[0] == "ok" and got[0] == "ok":
        got = ("ok", None)
    if name == "readdir" and got[0] == "ok":
        got = ("ok", sorted((n, bool(d)) for n, d in got[1]))
    return got, want


def check_sequence(
    c: DirectCluster, ref: Reference, steps: list[tuple[int, tuple]], clients: list[int], listings: bool = True
) -> None:
    """Each step's outcome the reference's (a listing only if ``listings``)."""
    for who, op in steps:
        node = clients[who % len(clients)]
        got, want = apply(c, ref, node, op)
        if not listings and op[0] == "readdir":
            continue
        assert got == want, f"{op} at node {node}: federation {got}, reference {want}"


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(STRONG), st.integers(1, 6), st.lists(st.tuples(st.integers(0, 5), op_strategy(OPS)),
                                                         min_size=5, max_size=40))  # fmt: skip
def test_strong_designs_equal_the_reference_from_every_client(design: str, n: int, steps: list) -> None:
    c, ref = DirectCluster(n, design=design), Reference()
    listings = design not in PER_META_LISTINGS or len(c.nodes[0].metas) == 1
    check_sequence(c, ref, steps, list(range(n)), listings=listings)
    for viewer in range(n):
        if listings:
            assert c.walk(viewer) == ref.t, viewer
        for path in ref.t:  # every name, at every client, as the reference has it
            assert tuple(c.op(viewer, "stat", path)) == ref.stat(path), (viewer, path)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.lists(st.tuples(st.integers(0, 5), op_strategy(OPS)), min_size=5, max_size=40))
def test_dnfsp1_the_clients_of_one_meta_server_see_the_reference(n: int, steps: list) -> None:
    c, ref = DirectCluster(n, design="dnfsp1"), Reference()
    meta = c.nodes[0]
    clients = [k for k in range(n) if c.nodes[k].server == meta.server]  # the entries of node 0's meta-server
    check_sequence(c, ref, steps, clients)
    assert c.walk(clients[0]) == ref.t


GROWING = ["mkdir", "mkdir", "create", "create", "stat", "stat"]


@settings(max_examples=60, deadline=None)
@given(st.integers(4, 7), st.lists(st.tuples(st.integers(0, 6), op_strategy(GROWING)), min_size=5, max_size=50))
def test_dnfsp1_across_meta_servers_names_are_found_and_only_sizes_lag(n: int, steps: list) -> None:
    c, ref = DirectCluster(n, design="dnfsp1"), Reference()
    assert len(c.nodes[0].metas) >= 2  # several meta-servers, or nothing weaker to check
    last_writer: dict[str, int] = {}  # file -> the meta-server whose client wrote it last
    for who, op in steps:
        node = who % n
        server = c.nodes[node].server
        got, want = apply(c, ref, node, op)
        name, path = op[0], op[1]
        if name == "stat" and got[0] == want[0] == "ok" and not want[1][0] and got[1] != want[1]:
            # the weaker coherence: a size this meta-server copied, or last saw, before another's client grew it
            assert not got[1][0] and got[1][1] < want[1][1], (op, node, got, want)
            assert last_writer.get(path) != server, (op, node, got, want)
            continue
        assert got == want, f"{op} at node {node} (meta-server {server}): federation {got}, reference {want}"
        if name == "write" and want[0] == "ok":
            last_writer[path] = server


# ---------------------------------------------------------------------------- concurrent clients, in the simulator
def _client(c: Any, node: int, top: str, ops: list[tuple], out: list) -> Any:
    """One client program at ``node``: ``ops`` on names under ``top``, one after the other, each
    outcome appended to ``out`` (a SimPy process: the clients' calls interleave at every message)."""

    def run(name: str, *args: Any) -> Any:
        return (yield from c.call_op(node, name, *args))

    def attempt(gen: Any) -> Any:
        try:
            return ("ok", (yield from gen))
        except OSError as e:
            return ("err", e.errno)

    def rw(name: str, path: str, offset: int, arg: Any) -> Any:
        fd = yield from run("open", path)
        try:
            return (yield from run(name, fd, offset, arg))
        finally:
            yield from run("close", fd)

    for name, path, *rest in ops:
        path = top + path
        if name == "rename":
            got = yield from attempt(run(name, path, top + rest[0]))
        elif name in ("write", "read"):
            got = yield from attempt(rw(name, path, *rest))
        else:
            got = yield from attempt(run(name, path))
            if got[0] == "ok" and name in ("create", "mkdir"):
                got = ("ok", None)
            elif got[0] == "ok" and name == "stat":
                got = ("ok", tuple(got[1]))
            elif got[0] == "ok" and name == "readdir":
                got = ("ok", sorted((n, bool(d)) for n, d in got[1]))
        out.append(got)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from((*STRONG, "dnfsp1")), st.integers(2, 6),
       st.lists(st.lists(op_strategy(OPS), min_size=1, max_size=15), min_size=2, max_size=4))  # fmt: skip
def test_concurrent_clients_in_the_simulator_each_see_the_reference(design: str, n: int, programs: list) -> None:
    """Clients at different members run at once in the simulator, each in its own directory
    (so the reference's outcome does not depend on the interleaving): every outcome the
    reference's.  This holds for dNFSp1 too: a directory used through one meta-server is
    coherent there, and its clients at other meta-servers' directories do not touch it."""
    from fedsim.network import preset
    from fedsim.runtime import SimCluster

    c = SimCluster(n, network=preset("tcp_loopback"), keep_data=True, design=design)
    c.preload_summaries()
    refs, outs, procs = [], [], []
    for i, ops in enumerate(programs):
        node = i % n
        c.env.run(until=c.env.process(c.call_op(node, "mkdir", f"/c{i}")))
        ref, out = Reference(), []
        refs.append(ref)
        outs.append(out)
        procs.append(c.env.process(_client(c, node, f"/c{i}", ops, out)))
    c.env.run(until=c.env.all_of(procs))
    for i, ops in enumerate(programs):
        want = [apply_reference(refs[i], op) for op in ops]
        assert outs[i] == want, (i, ops)


def apply_reference(ref: Reference, op: tuple) -> tuple[Any, Any]:
    """``op``'s outcome on the reference, as ``_client`` reports the federation's."""
    name, path, *rest = op
    got = outcome(getattr(ref, name), path, *rest)
    if name in ("create", "mkdir") and got[0] == "ok":
        return ("ok", None)
    return got


#: why a design lets more than one of several concurrent creates of one name succeed, or none
RACY_CREATE = {
    "dnfsp1": "dNFSp1's promise is weaker: each meta-server misses, asks the others at once, finds the name "
    "nowhere yet and creates it: every meta-server's first client succeeds (the paper: no further synchronisation)",
}


@pytest.mark.parametrize("design", [*STRONG, "dnfsp1"])
def test_concurrent_creates_of_one_name_one_succeeds(design: str) -> None:
    """A client at each of 6 members creates ``/x`` and makes ``/d`` at once, in the simulator:
    exactly one create and one mkdir succeed, the others are EEXIST, and the name is there after.
    dNFSp1 states its weaker promise instead: at most one success per meta-server."""
    from fedsim.network import preset
    from fedsim.runtime import SimCluster

    n = 6
    c = SimCluster(n, network=preset("tcp_loopback"), keep_data=True, design=design)
    c.preload_summaries()
    outs: list[list] = [[] for _ in range(n)]
    procs = [c.env.process(_client(c, node, "", [("create", "/x"), ("mkdir", "/d")], outs[node])) for node in range(n)]
    c.env.run(until=c.env.all_of(procs))
    for k in range(2):
        results = [out[k] for out in outs]
        assert all(r in (("ok", None), ("err", errno.EEXIST)) for r in results), results
        wins = [node for node, r in enumerate(results) if r[0] == "ok"]
        if design in RACY_CREATE:
            servers = [c.nodes[node].server for node in wins]
            assert wins and len(servers) == len(set(servers)), (RACY_CREATE[design], wins, servers)
        else:
            assert len(wins) == 1, results
    assert tuple(c.env.run(until=c.env.process(c.call_op(0, "stat", "/x")))) == (False, 0)


#: operations of clients sharing names: each name made and removed, written and renamed by any of them
SHARED = ["mkdir", "mkdir", "create", "create", "unlink", "rmdir", "stat"]
#: every name the shared programs can reach
ALL_PATHS = ["/" + "/".join(p) for k in (1, 2) for p in itertools.product(NAMES, repeat=k)]


def shared_ops() -> st.SearchStrategy:
    short = st.lists(st.sampled_from(NAMES), min_size=1, max_size=2).map(lambda p: "/" + "/".join(p))
    return st.one_of(
        st.tuples(st.sampled_from(SHARED), short),
        st.tuples(st.just("write"), short, st.integers(0, 8), st.binary(min_size=1, max_size=8)),
        st.tuples(st.just("rename"), short, short),
    )


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(STRONG), st.integers(2, 6),
       st.lists(st.lists(shared_ops(), min_size=1, max_size=12), min_size=2, max_size=4))  # fmt: skip
def test_concurrent_clients_on_shared_names_end_in_one_tree(design: str, n: int, programs: list) -> None:
    """Clients at different members make, remove, write and rename the same names at once, in the
    simulator (a rename takes two names: dNFSp2's two tokens, in one global order).  The outcomes
    depend on the interleaving, so they are not compared; what a one-namespace design promises is
    checked: every program ends (no deadlock: the simulation would run out of events first), and
    afterwards every member's clients see one tree, a tree (each name's parent a directory)."""
    from fedsim.network import preset
    from fedsim.runtime import SimCluster

    c = SimCluster(n, network=preset("tcp_loopback"), keep_data=True, design=design)
    c.preload_summaries()
    outs: list[list] = [[] for _ in programs]
    procs = [c.env.process(_client(c, i % n, "", ops, outs[i])) for i, ops in enumerate(programs)]
    c.env.run(until=c.env.all_of(procs))
    assert all(len(out) == len(ops) for out, ops in zip(outs, programs, strict=True))

    def stat(node: int, path: str) -> Any:
        try:
            return tuple(c.env.run(until=c.env.process(c.call_op(node, "stat", path))))
        except OSError as e:
            return e.errno

    views = [{path: stat(node, path) for path in ALL_PATHS} for node in range(n)]
    writers = {i for i, ops in enumerate(programs) if any(op[0] == "write" for op in ops)}
    removers = {i for i, ops in enumerate(programs) if any(op[0] in ("unlink", "rename") for op in ops)}
    if design == "mnfs" and any(w != r for w in writers for r in removers):  # its unordered data: kinds only
        views = [{p: v[0] if isinstance(v, tuple) else v for p, v in view.items()} for view in views]
    for node in range(1, n):
        assert views[node] == views[0], (node, programs, outs)
    for path, st_ in views[0].items():
        parent = path.rsplit("/", 1)[0]
        if isinstance(st_, tuple) and parent:
            assert views[0][parent] == (True, 0), (path, parent, programs, outs)


def test_mnfs_a_write_racing_a_removal_and_re_creation_may_leave_sizes_apart() -> None:
    """mNFS's stated weaker promise, shown (``fedsim.protocol.mnfs.node``): file data is not ordered
    with the metadata writes, so a client's write that races another client's unlink and create of
    its file grows the new file at the servers it reached after the create and not at the others:
    the namespace is one, the file's size is not.  (If data is ordered one day, this fails: then
    drop the size exception in ``test_concurrent_clients_on_shared_names_end_in_one_tree``.)"""
    from fedsim.network import preset
    from fedsim.runtime import SimCluster

    c = SimCluster(3, network=preset("tcp_loopback"), keep_data=True, design="mnfs")
    c.preload_summaries()
    c.env.run(until=c.env.process(c.call_op(0, "create", "/f")))
    outs: list[list] = [[], []]
    writer = _client(c, 1, "", [("stat", "/f"), ("write", "/f", 0, b"x")], outs[0])
    remover = _client(c, 0, "", [("unlink", "/f"), ("create", "/f")], outs[1])
    c.env.run(until=c.env.all_of([c.env.process(writer), c.env.process(remover)]))
    assert outs[1] == [("ok", None), ("ok", None)]
    assert all("f" in dict(c.fs[k].listdir("/")) for k in range(3))  # one namespace
    assert len({c.fs[k].stat("/f")[1] for k in range(3)}) == 2, outs  # two sizes
