"""The agent's reliability (issue 12): what an unlucky or hostile world does to live agents.

* Defects, each with a test that failed before its fix: a root directory
  deleted, renamed away or replaced under a running agent; ``fednode serve``
  with a missing root; a ``Client`` whose agent restarts; a restarted agent
  and its peers' summaries.
* Garbage: hypothesis-generated frames, envelopes, protocol requests with
  random field types (every type of ``REQUEST_TYPES``) and client calls
  (every operation of the node's API and every admin operation), over a
  client and over a peer credential, against live agents: every request is
  answered or its connection closed, the agent answers the next good request,
  and a rejected request leaves the file systems as they were.
* Traversal: names with ``..``, absolute escapes, NUL and symlinks planted in
  a root, through every request type, admin ones included: nothing created
  or read outside the roots.
* SIGKILL and SIGSTOP of a peer under a workload of creates, writes and reads
  from several clients (agent processes, ``ProcessCluster``): every call
  returns, no acknowledged file is lost, no name is a phantom.

Waiting is on readiness signals (``ProcessCluster.wait_ready``, a reply, a
closed socket, a condition the agent reports), never on sleeps.

``python -m tests.test_reliability`` runs this file and prints, per test, the
tries, crashes, hangs, wrong results and data lost (tests/test_security.py's
table printer).
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fednode.runtime
import fedsim.protocol.fedfs  # noqa: F401  (registers every FedFS request type, rename's too)
from fednode import wire
from fednode.cli import format_status
from fednode.client import Client
from fednode.cluster import AgentGroup, ProcessCluster, local_spec
from fednode.config import Cluster, LimitsSpec, load_cluster, write_cluster
from fednode.localfs import LocalFS
from fednode.runtime import ADMIN_OPS
from fedsim.protocol.hashing import names_managed_by
from fedsim.protocol.messages import REQUEST_TYPES, PeerUnavailable, pack
from fedsim.protocol.names import InvalidPath
from tests.test_security import TALLY, client_conn, dial, frame_of, handshake, until
from tests.test_security import main as print_table

MIB = 1 << 20
SECRET = b"do not touch"


@pytest.fixture(autouse=True)
def tally(request: pytest.FixtureRequest) -> Counter[str]:
    """This test's counts, in the table printer's TALLY (tests.test_security's)."""
    return TALLY.setdefault(request.node.name, Counter())


def snapshot(top: Path) -> dict[str, bytes | str | None]:
    """Everything under ``top`` without following links: path -> content,
    None for a directory, "-> target" for a symlink."""
    out: dict[str, bytes | str | None] = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in [*dirnames, *filenames]:
            p = Path(dirpath, name)
            rel = str(p.relative_to(top))
            if p.is_symlink():
                out[rel] = "-> " + os.readlink(p)
            elif p.is_dir():
                out[rel] = None
            elif p.is_file():
                out[rel] = p.read_bytes()
            else:
                out[rel] = "special"
    return out


# ============================================================================ defects: the root
@pytest.fixture
def two_agents(tmp_path: Path) -> Iterator[tuple[AgentGroup, Cluster, Path]]:
    """Two in-process agents over TCP, re-summarising their trees every 0.1 s
    (a refresh that runs into a lost root must not log it a second time);
    a long rpc_timeout, so that a loaded machine is slow, not a failure."""
    spec = local_spec(tmp_path, 2, rpc_timeout_ms=10_000.0, protocol={"summary_refresh_s": 0.1})
    write_cluster(tmp_path / "cluster.yaml", spec)
    cluster = load_cluster(tmp_path / "cluster.yaml")
    g = AgentGroup(cluster, transport="tcp")
    try:
        yield g, cluster, tmp_path
    finally:
        g.stop()


def _refreshing(agent: Any) -> bool:
    """Whether the agent's summary timer (the protocol's periodic refresh) still runs."""
    for task in list(agent._tasks):
        frame = getattr(task.get_coro(), "cr_frame", None)
        gen = frame.f_locals.get("gen") if frame is not None else None
        if getattr(gen, "__name__", "") == "summary_timer":
            return True
    return False


def _lose_root(root: Path, how: str) -> None:
    if how == "deleted":
        shutil.rmtree(root)
    elif how == "renamed":
        root.rename(root.with_name(root.name + "-moved"))
    else:  # replaced: moved away, and a new, empty directory at its path
        root.rename(root.with_name(root.name + "-old"))
        root.mkdir()


@pytest.mark.parametrize("how", ["deleted", "renamed", "replaced"])
def test_an_agent_whose_root_is_lost_fails_loudly(two_agents, tally, caplog, how):
    """An agent whose root was deleted, renamed away or replaced kept serving
    the old, unlinked tree silently (creates in a renamed-away root succeeded,
    in a deleted one failed as ENOENT).  Now the first operation that changes
    the namespace or fails notices it: every operation is EIO naming the
    root and the remedy, status shows it, the log says it once, and the other
    agent goes on serving its own files."""
    g, cluster, _ = two_agents
    caplog.set_level(logging.INFO, logger="fednode")
    h = cluster.spec.hashing_fn()
    mine, new = names_managed_by(h, 0, "/f", 2)  # with_manager placement: node 0 is their home
    theirs = names_managed_by(h, 1, "/g", 1)[0]
    root = Path(cluster.root_of(0))
    with Client(cluster, node=0) as c0, Client(cluster, node=1) as c1:
        # Ready (every summary here) comes before the timer: node 0's start
        # spawns it once its own push's replies are in, which node 1 may
        # send after node 0 already holds node 1's summary.
        until(lambda: c0.status() is not None and _refreshing(g.agents[0]))
        c0.write_file(mine, b"mine")
        c1.write_file(theirs, b"theirs")
        fd = c0.open(mine)
        _lose_root(root, how)
        for attempt in (lambda: c0.create(new), lambda: c0.read(fd, 4), lambda: c0.stat(mine),
                        lambda: c1.read_file(mine), lambda: c0.mkdir(new)):  # fmt: skip
            tally["tries"] += 1
            with pytest.raises(OSError) as err:
                attempt()
            if err.value.errno != errno.EIO or str(root) not in str(err.value) or "restart" not in str(err.value):
                tally["wrong_results"] += 1
                raise AssertionError(f"{how}: {err.value!r}")
        # the refresh timer runs into the lost root too, and ends (said once, by LocalFS; not again as its failure)
        until(lambda: c0.status() is not None and not _refreshing(g.agents[0]), tries=100_000)
        st_ = c0.status()
        assert st_["root_lost"] and str(root) in st_["root_lost"] and st_["local_files"] is None
        shown = format_status([{"node": 0, "reachable": True, **st_}])
        assert "ROOT LOST" in shown and str(root) in shown
        assert c1.read_file(theirs) == b"theirs"  # node 1 needs nothing of node 0's
        assert c1.status()["root_lost"] is None
    said = [r for r in caplog.records if str(root) in r.getMessage() and r.levelno >= logging.ERROR]
    assert len(said) == 1, [r.getMessage() for r in said]


@pytest.mark.parametrize("resolver", ["openat2", "walk"])
@pytest.mark.parametrize("how", ["deleted", "renamed", "replaced"])
def test_localfs_touches_nothing_once_its_root_is_lost(tmp_path, tally, resolver, how):
    """The local layer itself: after the loss no operation reaches the old
    tree (nothing is created in a renamed-away root) or the new one; each is
    EIO naming the root, and a bad path is still EINVAL, found before any check."""
    root = tmp_path / "root"
    root.mkdir()
    try:
        fs = LocalFS(root, resolver=resolver)
    except ValueError as exc:
        pytest.skip(str(exc))
    with fs:
        fs.populate([("/d/f", b"data")])
        fs.open("/d/f")
        _lose_root(root, how)
        # the create is checked first and finds the loss; then even the open file's read is refused
        for op, path, args in (("create", "/d/g", ()), ("read", "/d/f", (0, 4)), ("stat", "/d/f", ()),
                               ("mkdir", "/e", ()), ("listdir", "/", ()), ("write", "/d/f", (0, b"x"))):  # fmt: skip
            tally["tries"] += 1
            with pytest.raises(OSError) as err:
                fs.apply(op, path, args)
            assert err.value.errno == errno.EIO and str(root) in str(err.value), (op, err.value)
        with pytest.raises(InvalidPath):
            fs.apply("create", "/../x")
        assert fs.check_root() is False and fs.lost is not None
    for moved in tmp_path.iterdir():
        if moved.name != "root" or how == "replaced":
            assert sorted(p.name for p in moved.rglob("*")) in ([], ["d", "f"]), moved


def test_an_agent_notices_a_root_moved_away_with_nothing_failing(tmp_path, tally, monkeypatch):
    """Reads of a file held open go on working in a renamed-away tree (no
    operation fails, none changes the namespace): the agent's own periodic
    check (every ``ROOT_CHECK_S``, here every sweep tick) catches it."""
    monkeypatch.setattr(fednode.runtime, "ROOT_CHECK_S", 0.0)
    spec = local_spec(tmp_path, 1, protocol={"summary_refresh_s": 0.0})
    cluster = Cluster(spec)
    g = AgentGroup(cluster, transport="tcp")
    try:
        with Client(cluster, node=0) as c:
            c.write_file("/f", b"data")
            fd = c.open("/f")
            _lose_root(Path(cluster.root_of(0)), "renamed")

            def stale() -> bool:
                try:
                    c.read(fd, 4)
                except OSError as exc:
                    assert exc.errno == errno.EIO, exc
                    return True
                return False

            tally["tries"] += 1
            until(stale)  # each try is a round trip; the agent's sweeper runs between them
    finally:
        g.stop()


def test_serve_with_a_missing_root_says_how_to_fix_it(tmp_path, tally):
    """A missing root ended ``fednode serve`` with a traceback."""
    spec = local_spec(tmp_path, 1)
    write_cluster(tmp_path / "cluster.yaml", spec)
    root = Path(spec.nodes[0].root)
    for make in (root.rmdir, root.touch):  # missing; then a file where the directory should be
        make()
        tally["tries"] += 1
        r = subprocess.run([sys.executable, "-m", "fednode.cli", "serve", "--cluster", str(tmp_path / "cluster.yaml"),
                            "--node", "0"], capture_output=True, text=True, timeout=60)  # fmt: skip
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
        assert str(root) in lines[0] and "root: of node 0" in lines[0]
        if make == root.rmdir:
            assert f"mkdir -p {root}" in lines[0]


# ============================================================================ defects: restarts (processes)
def _processes(tmp_path: Path, n: int, **options: Any) -> Path:
    spec = local_spec(tmp_path, n, protocol={"summary_refresh_s": 0.0}, **options)
    write_cluster(tmp_path / "cluster.yaml", spec)
    return tmp_path / "cluster.yaml"


def test_a_client_reconnects_after_its_agent_restarts(tmp_path, tally):
    """A ``Client`` never reconnected after its agent restarted.  Now the
    call after the failure connects anew; a call that may have reached the
    old agent raises PeerUnavailable and is not sent again; descriptors of
    the old connection are EBADF even though the new agent numbers its
    descriptors from the same start."""
    path = _processes(tmp_path, 2, rpc_timeout_ms=500.0)
    with ProcessCluster(path, log_dir=tmp_path / "logs") as pc:
        pc.wait_ready()
        c = Client(pc.cluster, node=1, timeout=1.5)
        c.write_file("/a", b"old")
        c.write_file("/b", b"new")
        old_fd = c.open("/a")
        pc.kill(1)
        for _ in range(2):  # the agent is down: an error each time, never a broken Client
            tally["tries"] += 1
            with pytest.raises(PeerUnavailable):
                c.stat("/a")
        pc.start_node(1)
        pc.wait_ready()
        tally["tries"] += 1
        new_fd = c.open("/b")  # the same Client, a new connection; the agent's first descriptor again
        assert c.read(new_fd, 3) == b"new"
        with pytest.raises(OSError) as err:
            c.read(old_fd, 3)  # the old connection's: not the file opened since under the same number
        assert err.value.errno == errno.EBADF
        c.close(new_fd)
        # A request in flight when the agent stops is PeerUnavailable, and is not sent again later.
        pc.procs[1].send_signal(signal.SIGSTOP)  # (kill() waits for an exit)
        tally["tries"] += 1
        with pytest.raises(PeerUnavailable):
            c.create("/c")  # sits unread in the stopped agent's socket
        pc.kill(1, signal.SIGKILL)
        pc.start_node(1)
        pc.wait_ready()
        assert not c.exists("/c") and c.read_file("/a") == b"old"
        c.disconnect()


def test_a_restarted_agent_gets_every_summary_back(tmp_path, tally):
    """A restarted agent never got its peers' summaries back (they send them
    at start-up only, and refresh is off here): its dirmerges missed their
    files.  A fresh SummaryPush is now answered with the receiver's summary."""
    path = _processes(tmp_path, 3)
    cluster = load_cluster(path)
    d = names_managed_by(cluster.spec.hashing_fn(), 1, "/d", 1)[0]  # node 1 merges it
    for node, name in ((0, "x"), (2, "y")):  # made before the federation: known only through summaries
        (Path(cluster.root_of(node)) / d[1:]).mkdir()
        (Path(cluster.root_of(node)) / d[1:] / name).write_bytes(name.encode())
    with ProcessCluster(path, log_dir=tmp_path / "logs") as pc:
        pc.wait_ready()
        pc.kill(1)
        pc.start_node(1)
        pc.wait_ready()  # node 1 says it is ready once it holds every summary
        tally["tries"] += 1
        with Client(pc.cluster, node=1, timeout=10) as c:
            st_ = c.status()
            assert list(st_["summaries"]) == [0, 1, 2] and st_["ready"]
            assert c.readdir(d) == [("x", False), ("y", False)]  # a dirmerge at node 1 over nodes 0 and 2
            assert c.status()["dirmerges"] >= 1
            assert c.read_file(f"{d}/x") == b"x" and c.read_file(f"{d}/y") == b"y"


# ============================================================================ garbage
LIMITS = LimitsSpec(max_ping_count=20, max_ping_bytes=4096, max_bench_calls=8, max_pins=4)


class Fed(NamedTuple):
    group: AgentGroup
    cluster: Cluster
    base: Path
    outside: Path
    watcher: Client  # asks node 0 how busy it is


@pytest.fixture(scope="module")
def fed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fed]:
    """Two agents over TCP, node 0's root with a file, a symlinked directory
    and a symlinked file out of the root, node 1's with a fifo."""
    base = tmp_path_factory.mktemp("rel")
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret.txt").write_bytes(SECRET)
    spec = local_spec(base, 2, max_message_bytes=MIB, limits=LIMITS, protocol={"summary_refresh_s": 0.0})
    (base / "n0/d").mkdir()
    (base / "n0/d/file").write_bytes(b"inside")
    (base / "n0/d/escape").symlink_to(outside)
    (base / "n0/d/leak").symlink_to(outside / "secret.txt")
    (base / "n1/d").mkdir()
    os.mkfifo(base / "n1/d/fifo")
    write_cluster(base / "cluster.yaml", spec)
    cluster = load_cluster(base / "cluster.yaml")
    g = AgentGroup(cluster, transport="tcp")
    watcher = Client(cluster, node=0)
    yield Fed(g, cluster, base, outside, watcher)
    watcher.disconnect()
    crashed = [n for n, a in g.agents.items() if not a.running]
    g.stop()
    assert not crashed, f"agents stopped serving: {crashed}"
    assert snapshot(outside) == {"secret.txt": SECRET}
    assert sorted(p.name for p in base.iterdir()) == ["cluster.yaml", "n0", "n1"]  # nothing beside the roots


ROLES = ("client", "peer")


def _connect(f: Fed, role: str) -> socket.socket:
    """An authenticated connection to node 0: as a client program, or as member 1."""
    if role == "client":
        return client_conn(f.cluster)
    s = dial(f.cluster)
    assert handshake(s, f.cluster.key_for(1), 1)[0] is True
    return s


def _good(role: str, rid: int) -> bytes:
    """A request any live agent answers: a client's stat, a peer's protocol Stat."""
    if role == "client":
        return wire.encode((wire.CLIENT, rid, "stat", ("/d/file",), False))
    return wire.encode((wire.REQUEST, rid, 1, False, ["Stat", "/d/file"]))


GOOD_RID = 987_654_321


def _answer_due(garbage: bytes) -> Any:
    """The request id the agent answers ``garbage`` with, if it owes an answer
    (a request or a client call: it may run after the next request; its
    errors carry that id, or 0 when it has none), else None (one-way,
    replies, pings, undecodable: answered at once or never)."""
    try:
        env = wire.decode(garbage[4:], 64 * MIB)
    except ValueError:
        return None
    if env[0] in (wire.REQUEST, wire.CLIENT) and len(env) > 1:  # (a PING is answered at once, before the good one)
        return env[1] if type(env[1]) is int and env[1] != GOOD_RID else 0
    return None


def _quiet(f: Fed) -> bool:
    """No agent has calls out, no client request runs (asked with a status
    round trip each time, which also lets the agents' loop run)."""
    busy = f.watcher.status()["client_requests_in_flight"]
    return busy == 0 and all(not a.pending for a in f.group.agents.values())


def _exchange(f: Fed, role: str, garbage: bytes, tally: Counter[str]) -> None:
    """Send ``garbage`` then a good request on one connection; every frame up
    to the good request's answer is read.  The agent must answer the good
    request, or close the connection and answer it on a new one (0 crashes);
    a socket timeout is a hang.  A request the agent rejected (an ERROR and no
    REPLY came back) must leave the file systems as they were."""
    until(lambda: _quiet(f))  # what earlier requests started (a one-way message's work, say) has finished
    before = snapshot(f.base)
    tally["tries"] += 1
    s = _connect(f, role)
    s.settimeout(10)
    expect: Any = _answer_due(garbage)
    kinds: set[int] = set()
    try:
        try:
            s.sendall(garbage + _good(role, GOOD_RID))
            good = False
            while not good or expect is not None:  # the good request's answer, and the garbage's own
                payload = frame_of(s)
                if SECRET in payload:
                    tally["wrong_results"] += 1
                    raise AssertionError(f"a reply carried the file outside the roots: {payload[:200]!r}")
                env = wire.decode(payload, 64 * MIB)
                if env[0] in (wire.REPLY, wire.ERROR) and env[1] == GOOD_RID:
                    good = True
                    continue
                if env[1] == expect or env[1] == 0:
                    expect = None
                kinds.add(env[0])
        except (ConnectionError, BrokenPipeError):  # closed by the agent: it must serve a new connection
            with _connect(f, role) as again:
                again.settimeout(10)
                again.sendall(_good(role, GOOD_RID))
                while wire.decode(frame_of(again), 64 * MIB)[1] != GOOD_RID:
                    pass
    except TimeoutError:
        tally["hangs"] += 1
        raise
    finally:
        s.close()
    if wire.ERROR in kinds and wire.REPLY not in kinds and wire.PONG not in kinds:
        after = snapshot(f.base)
        if after != before:
            tally["wrong_results"] += 1
            changed = set(after.items()) ^ set(before.items())
            raise AssertionError(f"a rejected request changed the file systems: {changed}")


# -- strategies: random wire values, envelopes, requests, client calls
scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(allow_nan=False),
                    st.text(max_size=12), st.binary(max_size=16))  # fmt: skip
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
PATHS = ["/", "/d", "/d/file", "/d/new", "/x", "/d/escape", "/d/escape/secret.txt", "/d/leak", "/d/fifo",
         "/../x", "/d/../../x", "x", "", "/d/a\x00b", "//x", "/d/", "/" + "a" * 300]  # fmt: skip
typed = {
    str: st.sampled_from(PATHS) | st.text(max_size=8),
    int: st.integers(-3, 8) | st.integers(-(2**63), 2**64 - 1),
    bytes: st.binary(max_size=32),
    bool: st.booleans(),
    float: st.floats(allow_nan=False),
    tuple: st.lists(st.lists(st.sampled_from(PATHS) | st.integers(-1, 8), max_size=3), max_size=3),
}


def _field_values(types: tuple[type, ...]) -> st.SearchStrategy[list[Any]]:
    """Arguments for a signature: the right types with random values, or anything at all."""
    right = st.tuples(*(typed.get(t, values) for t in types)).map(list)
    return st.one_of(right, st.lists(values, max_size=len(types) + 1))


def _wire_types(cls: type) -> tuple[type, ...]:
    out = []
    for fld in dataclasses.fields(cls):
        first = str(fld.type).split(" | ")[0]
        out.append({"str": str, "int": int, "bool": bool, "bytes": bytes, "float": float}.get(first, str))
    return tuple(out)


peer_requests = st.sampled_from(sorted(REQUEST_TYPES)).flatmap(
    lambda kind: st.tuples(st.just(kind), _field_values(_wire_types(REQUEST_TYPES[kind])))
)
frames = st.binary(max_size=96).map(wire.frame)
truncated = st.binary(min_size=1, max_size=64).map(lambda b: wire.HEADER.pack(len(b) + 10) + b)
envelopes = st.tuples(st.integers(-1, 9), values, st.lists(values, max_size=4)).map(
    lambda t: wire.frame(pack([t[0], t[1], *t[2]]))
)


@st.composite
def request_envelopes(draw: Any) -> bytes:
    kind, fields = draw(peer_requests)
    which = draw(st.sampled_from([wire.REQUEST, wire.ONEWAY]))
    depth = draw(st.integers(-1, wire.MAX_DEPTH + 1))
    return wire.encode((which, draw(st.integers(0, 2**32)), depth, draw(st.booleans()), [kind, *fields]))


def _client_ops() -> dict[str, tuple[type, ...]]:
    """Every operation a client may call: the FedFS node's API and the admin table."""
    return {**_api_of(), **{op: fednode.runtime.ADMIN[op][1] for op in ADMIN_OPS}}


def _api_of() -> dict[str, tuple[type, ...]]:
    from fedsim.protocol.designs import DESIGNS

    return dict(DESIGNS.get("fedfs").API)


CLIENT_OPS = _client_ops()


@st.composite
def client_calls(draw: Any) -> bytes:
    op = draw(st.sampled_from([*sorted(CLIENT_OPS), "__class__", "handle", "", "admin_status"]))
    args = draw(_field_values(CLIENT_OPS.get(op, ())))
    if op == "bench" and draw(st.booleans()):  # bench's inner calls: well-typed kinds and ops, random calls
        args = [draw(st.sampled_from(["fedfs", "local", "cleanup", "x"])),
                draw(st.sampled_from(["stat", "read", "write", "create", "mkdir", "unlink", "readdir", "listdir"])),
                draw(typed[tuple]), *draw(st.lists(st.integers(-1, 2), max_size=1))]  # fmt: skip
    return wire.encode((wire.CLIENT, draw(st.integers(0, 2**32)), op, args, draw(st.booleans())))


GARBAGE = {
    "frames": frames,
    "truncated": truncated,
    "envelopes": envelopes,
    "requests": request_envelopes(),
    "client_calls": client_calls(),
}
_HYP = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("kind", sorted(GARBAGE))
def test_garbage_gets_an_answer_and_the_agent_keeps_serving(fed, tally, kind, role):
    """0 crashes, 0 hangs, rejected requests leave no trace (hypothesis;
    ``kind``: random frames, frames cut short, envelopes with random bodies,
    protocol requests of every type with random field types, client calls of
    every API and admin operation with random arguments)."""

    @_HYP
    @given(garbage=GARBAGE[kind])
    def run(garbage: bytes) -> None:
        if kind == "truncated":  # half a frame, then the connection goes: the agent must not wait on it
            tally["tries"] += 1
            with _connect(fed, role) as s:
                s.sendall(garbage)
            with _connect(fed, role) as s:
                s.settimeout(10)
                s.sendall(_good(role, GOOD_RID))
                while wire.decode(frame_of(s), 64 * MIB)[1] != GOOD_RID:
                    pass
            return
        _exchange(fed, role, garbage, tally)

    run()
    assert all(a.running for a in fed.group.agents.values())


# ============================================================================ traversal
EVIL = ["/../escaped", "/d/../../escaped", "/..", "..", "/d/a\x00b", "/\x00", "/d/escape/secret.txt",
        "/d/escape/new", "/d/escape/newdir/x", "/d/leak", "/d/escape", "/d/fifo"]  # fmt: skip


def _traversal_requests(f: Fed) -> list[tuple[str, bytes]]:
    """(role, frame) for every request type with every path argument evil."""
    out: list[tuple[str, bytes]] = []
    api = _api_of()
    for op, types in sorted(api.items()):
        for p in EVIL:
            args = [p if t is str else (0 if t is int else b"x" if t is bytes else t()) for t in types]
            out.append(("client", wire.encode((wire.CLIENT, 1, op, args, False))))
            if op == "rename":
                out.append(("client", wire.encode((wire.CLIENT, 1, op, ["/d/file", p], False))))
    for p in EVIL:
        out.append(("client", wire.encode((wire.CLIENT, 1, "pin", [p, 1], False))))
        for op in ("stat", "create", "mkdir", "unlink", "rmdir", "readdir"):
            out.append(("client", wire.encode((wire.CLIENT, 1, "bench", ["fedfs", op, [[p]]], False))))
        for op, extra in (("create", []), ("mkdir", []), ("stat", []), ("unlink", []), ("rmdir", []),
                          ("listdir", []), ("read", [0, 64]), ("write", [0, b"pwned"])):  # fmt: skip
            out.append(("client", wire.encode((wire.CLIENT, 1, "bench", ["local", op, [[p, *extra]]], False))))
        out.append(("client", wire.encode((wire.CLIENT, 1, "bench", ["cleanup", "", []], False))))
    for kind, cls in sorted(REQUEST_TYPES.items()):
        types = _wire_types(cls)
        for p in EVIL:
            fields = [p if t is str else (1 if t is int else b"x" if t is bytes else False if t is bool else 0.0)
                      for t in types]  # fmt: skip
            out.append(("peer", wire.encode((wire.REQUEST, 1, 1, False, [kind, *fields]))))
    return out


def test_traversal_through_every_request_type_escapes_nothing(fed, tally):
    """Every request type, admin ones included, with every path argument
    escaping (``..``, NUL, symlinks out of the root, a fifo): nothing is
    created or read outside the roots, and the agent keeps serving."""
    for role, frame in _traversal_requests(fed):
        _exchange(fed, role, frame, tally)
    escaped = [*fed.base.parent.rglob("escaped*"), *(p for p in fed.outside.iterdir() if p.name != "secret.txt")]
    tally["wrong_results"] += len(escaped)
    assert escaped == []
    assert (fed.outside / "secret.txt").read_bytes() == SECRET


# ============================================================================ SIGKILL / SIGSTOP under load
class Outcome(NamedTuple):
    client: int
    phase: int
    op: str
    path: str
    error: BaseException | None
    seconds: float


PHASE_OPS = (10, 8, 10)  # writes per client: before the fault, during it, after recovery
CLIENT_NODES = (0, 1, 0)  # each client's agent: the survivors


def _workload(cluster: Cluster, me: int, node: int, wdir: str, barrier: threading.Barrier,
              acked: dict[str, bytes], outcomes: list[Outcome], timeout: float) -> None:  # fmt: skip
    """One client: per phase, create+write new files and read back earlier
    acknowledged ones, recording every call's outcome and duration; the
    barrier lets the main thread inject and heal the fault between phases."""
    rng = random.Random(me)
    try:
        c = Client(cluster, node=node, timeout=timeout)
    except BaseException:
        barrier.abort()  # the main thread must not wait for a client that never came
        raise
    try:
        for phase, count in enumerate(PHASE_OPS):
            barrier.wait()  # the phase starts ...
            for k in range(count):
                path = f"{wdir}/c{me}p{phase}k{k}"
                data = f"{path} {rng.random()}".encode() * rng.randint(1, 200)
                mine = [p for p in acked if p.startswith(f"{wdir}/c{me}")]
                earlier = rng.choice(mine) if mine else None
                for op, target in (("write_file", path), ("read_file", earlier)):
                    if target is None:
                        continue
                    t0 = time.monotonic()
                    err: BaseException | None = None
                    try:
                        if op == "write_file":
                            c.write_file(target, data)
                        elif c.read_file(target) != acked[target]:
                            err = AssertionError(f"{target}: read back different bytes")
                    except OSError as exc:
                        err = exc
                    outcomes.append(Outcome(me, phase, op, target, err, time.monotonic() - t0))
                    if op == "write_file" and err is None:
                        acked[path] = data
            barrier.wait()  # ... and ends: the main thread injects or heals the fault now
    except BaseException:
        barrier.abort()
        raise
    finally:
        c.disconnect()


def _faulted_run(tmp_path: Path, sig: int, tally: Counter[str]) -> tuple[dict[str, bytes], list[Outcome], Any]:
    """Three agent processes; clients on nodes 0 and 1; node 2 is killed
    (SIGKILL, then restarted) or stopped (SIGSTOP, then SIGCONT) between the
    workload's first and second phases and brought back before the third."""
    rpc = 0.3
    path = _processes(tmp_path, 3, rpc_timeout_ms=rpc * 1000)
    cluster = load_cluster(path)
    wdir = names_managed_by(cluster.spec.hashing_fn(), 0, "/w", 1)[0]  # its parent's manager survives
    timeout = 4 * rpc + 1.0  # the Client's own default
    acked: dict[str, bytes] = {}
    outcomes: list[Outcome] = []
    pc = ProcessCluster(path, log_dir=tmp_path / "logs")
    try:
        pc.wait_ready()
        with Client(pc.cluster, node=0) as c:
            c.mkdir(wdir)
        # The main thread's waits are bounded by what every call of a phase could take at worst:
        # a barrier a client never reaches is a hang, reported as one.
        barrier = threading.Barrier(len(CLIENT_NODES) + 1, timeout=timeout * 6 * max(PHASE_OPS) + 60)
        threads = [threading.Thread(target=_workload, args=(pc.cluster, i, n, wdir, barrier, acked, outcomes, timeout),
                                    daemon=True) for i, n in enumerate(CLIENT_NODES)]  # fmt: skip
        for t in threads:
            t.start()
        for phase in range(len(PHASE_OPS)):
            barrier.wait()  # the clients run the phase
            barrier.wait()  # ... and are done with it
            if phase == 0:  # the fault
                pc.kill(2, sig) if sig == signal.SIGKILL else pc.procs[2].send_signal(sig)
            elif phase == 1:  # the recovery
                if sig == signal.SIGKILL:
                    pc.start_node(2)
                    pc.wait_ready()
                else:
                    pc.procs[2].send_signal(signal.SIGCONT)
                    with Client(pc.cluster, node=2, timeout=30) as c:
                        c.status()  # answered: it runs again
        # Every call returns (the Client's timeout bounds each); a thread still alive after all of
        # them could have timed out is a hang.
        for t in threads:
            t.join(timeout * sum(PHASE_OPS) * 6)
        hung = [t for t in threads if t.is_alive()]
        tally["hangs"] += len(hung)
        assert not hung, "a workload call never returned"
        for n in (0, 1):
            if pc.procs[n].poll() is not None:
                tally["crashes"] += 1
        assert all(pc.procs[n].poll() is None for n in (0, 1)), "a survivor exited"
        return acked, outcomes, pc
    except BaseException:
        pc.stop()
        raise


class FaultResult(NamedTuple):
    """What one faulted workload run found (see ``_check_after_recovery``)."""

    outcomes: list[Outcome]
    acked: int
    lost: list[str]  # acknowledged files that do not read back identical
    phantoms: list[str]  # listed but unusable, found but not listed, or neither found nor creatable
    failed_healthy: list[str]  # calls that failed while every agent was up
    hangs: int
    crashes: int
    blamed_live: int  # calls during the fault whose error named a node that was up


def _check_after_recovery(pc: ProcessCluster, wdir: str, acked: dict[str, bytes],
                          outcomes: list[Outcome]) -> tuple[list[str], list[str]]:  # fmt: skip
    """(lost, phantoms): acknowledged files that do not read back identical;
    names readdir lists that cannot be stat'ed and read, names stat finds
    that readdir does not list, and names tried that stat does not find but
    create refuses (reserved for good)."""
    lost, phantoms = [], []
    with Client(pc.cluster, node=1, timeout=30) as c:
        for p, data in sorted(acked.items()):
            try:
                if c.read_file(p) != data:
                    lost.append(f"acknowledged {p}: different bytes")
            except OSError as exc:
                lost.append(f"acknowledged {p}: {exc!r}")
        listed = {f"{wdir}/{name}" for name, _ in c.readdir(wdir)}
        for p in sorted(listed):
            try:
                c.stat(p)
                c.read_file(p)
            except OSError as exc:
                phantoms.append(f"listed but unusable {p}: {exc!r}")
        for p in sorted({o.path for o in outcomes if o.op == "write_file"}):
            try:
                c.stat(p)
            except FileNotFoundError:
                try:
                    c.create(p)
                except OSError as exc:
                    phantoms.append(f"phantom {p}: stat says ENOENT, create says {exc!r}")
                else:
                    c.unlink(p)
                continue
            if p not in listed:
                phantoms.append(f"phantom {p}: stat finds it, readdir does not list it")
    return lost, phantoms


RPC_S = 0.3  # the faulted federation's rpc_timeout


def _run_fault(tmp_path: Path, sig: int) -> FaultResult:
    tally: Counter[str] = Counter()
    try:
        acked, outcomes, pc = _faulted_run(tmp_path, sig, tally)
    except (AssertionError, threading.BrokenBarrierError):
        return FaultResult([], 0, [], [], [], max(tally["hangs"], 1), tally["crashes"], 0)
    try:
        wdir = names_managed_by(pc.cluster.spec.hashing_fn(), 0, "/w", 1)[0]
        lost, phantoms = _check_after_recovery(pc, wdir, acked, outcomes)
    finally:
        pc.stop()
    failed_healthy = [f"{o.op} {o.path}: {o.error!r}" for o in outcomes if o.phase != 1 and o.error is not None]
    blamed = sum(1 for o in outcomes if o.phase == 1 and isinstance(o.error, PeerUnavailable) and o.error.node != 2)
    return FaultResult(outcomes, len(acked), lost, phantoms, failed_healthy, 0, 0, blamed)


@pytest.fixture(scope="module", params=["SIGKILL", "SIGSTOP"])
def fault(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> FaultResult:
    """One run of the workload per fault, shared by the tests that judge it."""
    return _run_fault(tmp_path_factory.mktemp(request.param.lower()), getattr(signal, request.param))


def _durations(outcomes: list[Outcome]) -> str:
    by_phase = {ph: [o.seconds for o in outcomes if o.phase == ph] for ph in range(len(PHASE_OPS))}
    return ", ".join(f"{('before', 'during', 'after')[ph]} the fault: {len(v)} calls, longest "
                     f"{max(v) / RPC_S:.1f} x rpc_timeout" for ph, v in by_phase.items() if v)  # fmt: skip


def test_a_peer_killed_or_stopped_under_load_crashes_hangs_and_loses_nothing(fault, tally, record_property):
    """SIGKILL (then a restart) or SIGSTOP (then SIGCONT) of node 2 under
    creates, writes and reads from three clients on the survivors: the
    survivors keep running, every call returns (each call's duration is
    recorded, in multiples of rpc_timeout), every file acknowledged before,
    during or after the fault reads back identical once node 2 is back, and
    nothing fails while every agent is up."""
    tally["tries"] += len(fault.outcomes)
    tally["hangs"] += fault.hangs
    tally["crashes"] += fault.crashes
    tally["data_lost"] += len(fault.lost)
    tally["wrong_results"] += len(fault.failed_healthy)
    record_property("durations", _durations(fault.outcomes))
    record_property("acknowledged", fault.acked)
    record_property("errors blaming a live node", fault.blamed_live)
    assert fault.hangs == 0 and fault.crashes == 0, "a call never returned, or a survivor exited"
    assert not fault.lost, "\n".join(fault.lost)
    assert not fault.failed_healthy, "\n".join(fault.failed_healthy)


def test_a_peer_killed_or_stopped_under_load_leaves_no_phantom_name(fault, tally):
    """After recovery every name readdir lists can be stat'ed and read, every
    name stat finds is listed, and a name stat does not find can be created.
    (SIGSTOP: a create whose manager was stopped fails at the requester, which
    settles the name with the manager once it runs again: ``Settle``.)"""
    tally["tries"] += len({o.path for o in fault.outcomes if o.op == "write_file"})
    tally["wrong_results"] += len(fault.phantoms)
    assert fault.hangs == 0, "the workload did not finish"
    assert not fault.phantoms, "\n".join(fault.phantoms)


def test_a_peer_killed_or_stopped_under_load_is_the_node_errors_name(fault, tally):
    """Every call that failed during the fault names node 2, the node that
    failed (a nested call's timeout is shorter than its caller's,
    ``nested_timeout``, so the inner one fires first and names the hung node)."""
    failed = [o for o in fault.outcomes if o.phase == 1 and isinstance(o.error, PeerUnavailable)]
    tally["tries"] += len(failed)
    tally["wrong_results"] += fault.blamed_live
    wrong = [f"{o.op} {o.path}: {o.error}" for o in failed if o.error.node != 2]
    said = "\n".join(wrong)
    assert fault.blamed_live == 0, f"{fault.blamed_live} of {len(failed)} errors named a node that was up:\n{said}"


if __name__ == "__main__":
    sys.exit(print_table(__file__))
