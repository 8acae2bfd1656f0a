"""Issue 13's fault-injection property, in the simulator: with ``replicas: 2``
and heartbeats on, hypothesis draws a cluster size (3-7), a placement, a
hashing and a schedule of steps: batches of operations issued concurrently
from several nodes (mkdir, create, write, overwrite, unlink, rename within a
directory and across directories, of files and of directories, read), joins
of new nodes, graceful leaves, crashes (found out by the heartbeats and
evicted, or restarted before that) with their restarts,
windows of message loss, and a partition isolating one node, then healed.

At most one node is down, isolated or leaving at a time: every fault step
carries its own repair (restart, heal, restart of a node evicted meanwhile)
and the next step waits until the federation settled (``settled``: one view
at every member, installed everywhere, no copy unsynced, no promotion or
view change in flight).  At the end every crashed or evicted node is back
and the federation settled; then

(a) every acknowledged file reads back, at every member, with its last
    acknowledged content;
(b) acknowledged unlinks (and the old names of acknowledged renames) stay
    done;
(c) the namespace (``SimCluster.namespace``) equals the reference tree;
(d) every file has its copy at its home's successor.

An operation that failed with EHOSTDOWN (a peer down, a message lost, a
timeout: ``PeerUnavailable``), EAGAIN or ESTALE (a view change in flight; an
overwrite whose truncate took and whose write did not) may or may not have
happened: its paths are *ambiguous* until a later acknowledged
operation fixes their content (a create, an unlink, an overwrite).  Other
errors (ENOENT, EEXIST ...) must leave no trace.  Empty directories are
compared loosely, as in ``test_replication``: directories are not
replicated, so an empty one may go with its node (a file's parent is always
there).

Every schedule starts with six files, made and written through different
nodes.  The property runs 120 derandomized examples (the same ones in every
run: CI stays reproducible); ``python -m tests.dynamics_random sim|mem N``
plays N random ones and prints each failing schedule, to replay with
``_replay`` or ``_replay_in_memory``; the ones understood are pinned below
(``test_found_...``).
The in-memory variant (``_replay_in_memory``) plays the same schedules one
operation at a time.  Its clock moves only when the player advances it, so
a background repair (a home's ``Settle`` after a lost DelEntry, a rename's
retried rollback) waits parked on a timer until then: ``settled`` counts
those as unsettled (``repairs_pending``, ``renames_coordinated``).

Clients use a node while it is cut off by a partition, in both variants:
it acknowledges no change with one copy (a change, the steps of a rename's
or a migration's commit included, is acknowledged only once both copies
hold it), and past its read lease (``FailureDetection``: before the others
can evict it) it refuses its own clients, so an evicted node that does
not know it serves no stale read of the files it homed while their
promoted copies take new writes (pinned:
``test_found_a_cut_off_node_serves_no_stale_read_after_its_eviction``;
before the lease the in-memory player kept its clients off such a node).

Clients use a node while it leaves (a leaver serves them until it installs
the view without itself): what it acknowledges after its successor promoted
its copies reaches the successor late (``Replication._promote_late``,
``_unlink_adopted``; the pinned leaver schedules below)."""

from __future__ import annotations

import errno
from dataclasses import replace
from typing import Any

import pytest
import simpy
from hypothesis import event, given, settings
from hypothesis import strategies as st

from fedsim.direct import DirectCluster
from fedsim.faults import FaultPlan, Partition
from fedsim.network import preset
from fedsim.protocol.config import ProtocolConfig
from fedsim.protocol.names import under
from fedsim.runtime import SimCluster
from tests.test_crash import _sim_walk
from tests.test_replication import _evicted, assert_replicated, files

HB = 0.5  # heartbeat_s
MISSES = 3
CONFIG = ProtocolConfig(replicas=2, heartbeat_s=HB, heartbeat_misses=MISSES)
SETTLE_LIMIT_S = 120.0  # simulated seconds a step may take to settle: past it, the test fails (a hang)
MAX_NODES = 7
MIN_MEMBERS = 3  # a leave keeps at least this many members

DIRS = ["/a", "/b", "/c"]  # /a and /b exist from the start; /c only if a mkdir made it
LEAVES = ["f0", "f1", "f2"]
PATHS = [f"{d}/{f}" for d in DIRS for f in LEAVES]
OPS = {"mkdir", "create", "write", "overwrite", "unlink", "rename", "read"}
#: errors after which the operation may or may not have taken effect
AMBIGUOUS = {errno.EHOSTDOWN, errno.EAGAIN, errno.ETIMEDOUT, errno.ESTALE}
#: errors that say the operation did nothing (the reference explains them)
#: (EBUSY: a rename of an open file, or of a directory with one; ENOTEMPTY, EINVAL: of a directory)
REFUSED = {errno.ENOENT, errno.EEXIST, errno.EISDIR, errno.ENOTDIR, errno.EBUSY, errno.ENOTEMPTY, errno.EINVAL}
#: where a directory is renamed to (issue 24): another top directory (over an empty one or
#: not), into another (then its files live under paths no other operation names), into itself
MOVED_DIRS = [f"{d}/d" for d in DIRS]

DATA = st.binary(min_size=1, max_size=8)  # (reads and walks read the first 64 bytes)
op_st = st.one_of(
    st.tuples(st.just("mkdir"), st.integers(0, 99), st.sampled_from(DIRS)),
    st.tuples(st.just("create"), st.integers(0, 99), st.sampled_from(PATHS)),
    st.tuples(st.just("create"), st.integers(0, 99), st.sampled_from(PATHS)),
    st.tuples(st.just("write"), st.integers(0, 99), st.sampled_from(PATHS), st.integers(0, 6), DATA),
    st.tuples(st.just("overwrite"), st.integers(0, 99), st.sampled_from(PATHS), st.binary(max_size=8)),
    st.tuples(st.just("unlink"), st.integers(0, 99), st.sampled_from(PATHS)),
    st.tuples(st.just("rename"), st.integers(0, 99), st.sampled_from(PATHS), st.sampled_from(LEAVES)),
    st.tuples(st.just("rename"), st.integers(0, 99), st.sampled_from(PATHS), st.sampled_from(PATHS)),  # (any directory)
    st.tuples(st.just("read"), st.integers(0, 99), st.sampled_from(PATHS)),
    st.tuples(st.just("rename"), st.integers(0, 99), st.sampled_from(DIRS), st.sampled_from(DIRS + MOVED_DIRS)),
)
batch_st = st.lists(op_st, min_size=1, max_size=6)
batches_st = st.lists(batch_st, max_size=2)
step_st = st.one_of(
    st.tuples(st.just("ops"), batch_st),
    st.tuples(st.just("ops"), batch_st),
    st.tuples(st.just("join"), batches_st),
    st.tuples(st.just("leave"), st.integers(0, 99), batches_st),
    st.tuples(st.just("crash"), st.integers(0, 99), st.booleans(), batches_st),
    st.tuples(st.just("loss"), st.sets(st.integers(0, 300), min_size=1, max_size=6), batches_st),
    st.tuples(st.just("partition"), st.integers(0, 99), st.booleans(), batches_st),
)
schedule_st = st.lists(step_st, min_size=1, max_size=8)
#: the cluster: its size, placement, hashing and rename method (issue 24: across directories by
#: two-phase commit, or by dynamic redistribution, which borrows the source directory's table)
CLUSTER = (st.integers(3, 7), st.sampled_from(["with_manager", "round_robin"]), st.sampled_from(["mod_n", "ring"]),
           st.sampled_from(["2pc", "redistribute"]))  # fmt: skip


class Reference:
    """What the acknowledged operations made: ``files`` path -> content,
    ``dirs``; ``ambiguous``: paths an ambiguous failure may have changed
    (not checked until an acknowledged operation fixes them again)."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.dirs: set[str] = {"/a", "/b"}
        self.ambiguous: set[str] = set()

    def known(self, path: str) -> bool:
        return path not in self.ambiguous

    def fix(self, path: str, content: bytes | None) -> None:
        """``path`` is now known: ``content``, or absent (None)."""
        self.ambiguous.discard(path)
        if content is None:
            self.files.pop(path, None)
        else:
            self.files[path] = content


def settled(c: SimCluster | DirectCluster) -> bool:
    """The federation has settled: every live node is a member of the one
    view whose members are exactly the live nodes, that view is installed
    everywhere (``view_settled``), no view change or promotion is in flight
    and no primary has a copy to repair (``unsynced``)."""
    up = [n for n in c.live if n not in c.down]
    if sorted(up) != c.live:
        return False
    views = {(c.nodes[n].epoch, c.nodes[n].members) for n in up}
    if len(views) != 1 or next(iter(views))[1] != tuple(sorted(up)):
        return False
    now = c.clock if isinstance(c, DirectCluster) else c.env.now * 1e-6
    for n in up:
        node = c.nodes[n]
        d = node.describe()
        if not d["view_settled"] or d.get("unsynced") or node.promoting or node._changing or not node.ready:
            return False
        if d["renames_coordinated"] or node.repairs_pending:  # (retries: ``Renaming._tell``, ``Directory.repair``)
            return False
        if d["borrowed"]:  # (a table given back in the background: ``delegation.py``)
            return False
        if node.copying or node._suspecting or any(until > now for until in node.suspects.values()):
            return False
    return True


def _run_until(c: SimCluster, done: Any, what: str, log: list[Any]) -> None:
    end = c.env.now + SETTLE_LIMIT_S * 1e6
    while not done():
        assert c.env.now < end, f"{what}: not done in {SETTLE_LIMIT_S} s; log {log}"
        c.env.run(until=c.env.now + HB / 4 * 1e6)


def _guarded(c: SimCluster, work: Any) -> simpy.Process:
    """A process whose value is (True, result) or (False, OSError), of a
    generator or of a process (``join``, ``leave``, ``restart``)."""

    def run() -> Any:
        try:
            return True, (yield work) if isinstance(work, simpy.Process) else (yield from work)
        except OSError as exc:
            return False, exc

    return c.env.process(run())


def _op_gen(c: SimCluster, at: int, step: tuple[Any, ...]) -> Any:
    """The client side of one step at node ``at``, as one generator (a
    write is open, write, close; an overwrite truncate then write)."""
    kind, path = step[0], step[2]
    if kind in ("mkdir", "create", "unlink"):
        return (yield from c.call_op(at, kind, path))
    if kind == "rename":
        return (yield from c.call_op(at, "rename", path, _target(step)))
    if kind == "overwrite":
        yield from c.call_op(at, "truncate", path, 0)
    fd = yield from c.call_op(at, "open", path)
    try:
        if kind == "read":
            return (yield from c.call_op(at, "read", fd, 0, 64))
        data = step[4] if kind == "write" else step[3]
        off = step[3] if kind == "write" else 0
        return (yield from c.call_op(at, "write", fd, off, data))
    finally:
        yield from c.call_op(at, "close", fd)


def _target(step: tuple[Any, ...]) -> str:
    """A rename's new name: a sibling (``step[3]`` a leaf) or any path (across
    directories, ``rename: 2pc``)."""
    new = step[3]
    return new if new.startswith("/") else step[2].rsplit("/", 1)[0] + "/" + new


def _touches(step: tuple[Any, ...]) -> set[str]:
    if step[0] == "rename":
        return {step[2], _target(step)}
    return {step[2]}


def _dir_rename(step: tuple[Any, ...]) -> bool:
    """A rename of a directory (issue 24): its source names no file."""
    return step[0] == "rename" and step[2].rsplit("/", 1)[1] not in LEAVES


def _conflicts(step: tuple[Any, ...], taken: set[str], subtrees: set[str]) -> bool:
    """Whether ``step`` may not run in a batch beside the steps that took
    ``taken`` (their paths) and ``subtrees`` (directories they rename or
    make): their order would be unknown to the reference."""
    mine = _touches(step)
    if any(under(p, t) for p in mine for t in subtrees):
        return True
    if _dir_rename(step) or step[0] == "mkdir":
        return any(under(t, p) for p in mine for t in taken | subtrees)
    return bool(mine & taken) or step[2].rsplit("/", 1)[0] in taken


def _account_dir_rename(ref: Reference, old: str, new: str, ok: bool) -> None:
    """A directory rename's outcome in the reference: done, every file and
    directory under ``old`` now under ``new`` (which was absent or empty);
    ambiguous, every name under either, and where it would have moved, unknown."""
    moved = lambda p: new + p[len(old) :]  # noqa: E731
    if ok:
        if new == old:
            return
        assert not any(under(p, new) for p in ref.files if ref.known(p)), f"{old} moved over files under {new}"
        ref.files = {moved(p) if under(p, old) else p: v for p, v in ref.files.items()}
        ref.ambiguous = {moved(p) if under(p, old) else p for p in ref.ambiguous}
        ref.dirs = {moved(p) if under(p, old) else p for p in ref.dirs if not under(p, new)} | {new}
        return
    names = {p for p in (*ref.files, *ref.ambiguous, *ref.dirs) if under(p, old) or under(p, new)} | {old, new}
    ref.ambiguous |= names | {moved(p) for p in names if under(p, old)}


def _account(ref: Reference, step: tuple[Any, ...], ok: bool, value: Any, log: list[Any]) -> None:
    """Update the reference with one operation's outcome, and check what
    can be checked at once: a read of a known file returns its content."""
    kind, path = step[0], step[2]
    if _dir_rename(step):
        if not ok:
            assert value.errno in AMBIGUOUS | REFUSED, f"{step}: unexpected {value!r}; log {log}"
        if ok or value.errno in AMBIGUOUS:
            _account_dir_rename(ref, path, step[3], ok)
        return
    if not ok:
        code = value.errno
        assert code in AMBIGUOUS | REFUSED, f"{step}: unexpected {value!r}; log {log}"
        if code in AMBIGUOUS:
            if kind == "mkdir":
                ref.ambiguous.add(path)
            elif kind != "read":
                ref.ambiguous |= _touches(step)
        return
    if kind == "mkdir":
        ref.dirs.add(path)
        ref.ambiguous.discard(path)
    elif kind == "create":
        ref.fix(path, b"")
    elif kind == "unlink":
        ref.fix(path, None)
    elif kind == "overwrite":
        ref.fix(path, step[3])
    elif kind in ("write", "rename", "read") and ref.known(path) and path not in ref.files:
        raise AssertionError(f"{kind} of {path} acknowledged, but the acknowledged operations removed it; log {log}")
    elif kind == "write":
        if ref.known(path):
            off, data = step[3], step[4]
            old = ref.files[path]
            old = old + b"\0" * max(0, off - len(old))
            ref.files[path] = old[:off] + data + old[off + len(data) :]
    elif kind == "rename":
        new = _target(step)
        if new != path:
            if ref.known(path):
                ref.fix(new, ref.files.pop(path))
            else:
                ref.ambiguous.add(new)
                ref.fix(path, None)
    elif kind == "read" and ref.known(path):
        assert value == ref.files[path], f"read {path} at node {step[1]}: {value!r}, acknowledged {ref.files[path]!r}"


class Player:
    """Plays a schedule on a simulated federation, keeping the reference."""

    def __init__(
        self,
        n: int,
        placement: str,
        hashing: str,
        files: bool = True,
        rename: str = "2pc",
        **protocol: Any,
    ) -> None:
        """``protocol``: more of ``ProtocolConfig`` over ``CONFIG`` (``redistribute_hold``:
        ``tests/test_rename_histories.py``)."""
        c = SimCluster(n, network=preset("tcp_loopback"), keep_data=True, placement=placement, hashing=hashing,
                       protocol=replace(CONFIG, rename=rename, **protocol))  # fmt: skip
        c.preload_summaries()
        for node in c.nodes:  # what start() runs: heartbeats, the initial sync
            for timer in node.background():
                c.spawn(node.id, timer)
        self.c = c
        self.ref = Reference()
        self.log: list[Any] = []
        c.run_op(0, "mkdir", "/a")
        c.run_op(n - 1, "mkdir", "/b")
        seeded = [p for p in PATHS if not p.startswith("/c/")] if files else []
        for i, path in enumerate(seeded):  # files to lose from the start
            c.run_op(i % n, "create", path)
            fd = c.run_op((i + 1) % n, "open", path)
            c.run_op((i + 1) % n, "write", fd, 0, path.encode())
            c.run_op((i + 1) % n, "close", fd)
            self.ref.fix(path, path.encode())

    # -------------------------------------------------------------- helpers
    def clients(self) -> list[int]:
        """Nodes a client may use now: members that are up."""
        c = self.c
        return [n for n in c.live if n not in c.down and c.nodes[n].member]

    def settle(self, what: str) -> None:
        self._run_until(lambda: settled(self.c), what)

    def _run_until(self, done: Any, what: str) -> None:
        _run_until(self.c, done, what, self.log)

    def batch(self, steps: list[tuple[Any, ...]], avoid: int | None = None) -> None:
        """Issue the operations at once, each at a client node (no two touch
        the same path: their order would be unknown), and wait for all.  No
        client uses node ``avoid`` (see the module docstring)."""
        clients = [n for n in self.clients() if n != avoid]
        taken: set[str] = set()
        subtrees: set[str] = set()
        procs = []
        for step in steps:
            if _conflicts(step, taken, subtrees):
                continue
            taken |= _touches(step)
            if _dir_rename(step) or step[0] == "mkdir":
                subtrees |= _touches(step)
            at = clients[step[1] % len(clients)]
            procs.append((step, at, _guarded(self.c, _op_gen(self.c, at, step))))
        self._run_until(lambda: all(p.triggered for _, _, p in procs), "operations")
        for step, at, p in procs:
            ok, value = p.value
            self.log.append((step[0], step[2:], at, "ok" if ok else errno.errorcode.get(value.errno, value.errno)))
            _account(self.ref, (step[0], at, *step[2:]), ok, value, self.log)

    def batches(self, batches: list[list[tuple[Any, ...]]], avoid: int | None = None) -> None:
        for b in batches:
            self.batch(b, avoid)

    def restart(self, node: int) -> None:
        p = _guarded(self.c, self.c.restart(node))
        self._run_until(lambda: p.triggered, f"restart of {node}")
        ok, value = p.value
        self.log.append(("restart", node, "ok" if ok else repr(value)))
        assert ok, f"restart of node {node}: {value!r}; log {self.log}"

    def repair(self, what: str) -> None:
        """Heal, restart the crashed and the evicted nodes, and settle."""
        c = self.c
        c.heal()
        self._run_until(lambda: settled(c) or bool(c.evicted) or bool(c.crashed), what)
        for _ in range(3):
            for n in sorted(c.crashed | set(c.evicted)):
                self.restart(n)
            self._run_until(lambda: settled(c) or bool(c.evicted) or bool(c.crashed), what)
            if settled(c) and self._quiet():
                return
        raise AssertionError(f"{what}: evicted again and again; log {self.log}")

    def _quiet(self) -> bool:
        """Still settled one rpc timeout later.  ``settled`` sees no request
        in flight: a handler waiting on a message a fault lost (a home's
        ReplicaDrop to a secondary cut off a moment ago) ends only with its
        timeout, and what it starts then (the path unsynced, the repair)
        must be seen too: the copy check once failed on such a drop, still
        waiting when the federation looked settled (``tests.dynamics_random``)."""
        c = self.c
        c.env.run(until=c.env.now + c.rpc_timeout_us)
        return settled(c)

    # -------------------------------------------------------------- steps
    def play(self, step: tuple[Any, ...]) -> None:
        c, kind = self.c, step[0]
        self.log.append(step[:2] if kind != "ops" else ("ops",))
        members = self.clients()
        if kind == "ops":
            self.batch(step[1])
        elif kind == "join":
            if len(c.live) >= MAX_NODES:
                return self.batches(step[1])
            n = c.add_node()
            p = _guarded(c, c.join(n))
            self.batches(step[1])  # (the join goes on meanwhile)
            self._run_until(lambda: p.triggered, "join")
            assert p.value[0], f"join: {p.value[1]!r}; log {self.log}"  # (its start() spawned its timers)
        elif kind == "leave":
            if len(members) <= MIN_MEMBERS:
                return self.batches(step[2])
            node = members[step[1] % len(members)]
            p = _guarded(c, c.leave(node))
            self.batches(step[2])  # (at the leaver too)
            self._run_until(lambda: p.triggered, "leave")
            assert p.value[0], f"leave of {node}: {p.value[1]!r}; log {self.log}"
        elif kind == "crash":
            node = members[step[1] % len(members)]
            c.crash(node)
            if step[2]:  # found out and evicted before anything else
                self._run_until(lambda: all(node not in c.nodes[m].members for m in members if m != node), "eviction")
            self.batches(step[3])
        elif kind == "loss":
            c.inject(FaultPlan.of(lose=step[1]))
            self.batches(step[2])
        elif kind == "partition":
            node = members[step[1] % len(members)]
            c.inject(FaultPlan.of(partitions=[Partition(frozenset({node}))]))
            if step[2]:  # until the others evict it
                self._run_until(lambda: all(node not in c.nodes[m].members for m in members if m != node), "eviction")
            self.batches(step[3])  # clients at the cut-off node too: it acknowledges nothing with one copy
        self.repair(f"after {kind}")

    def check(self) -> None:
        c, ref = self.c, self.ref
        self.repair("at the end")
        ns = c.namespace()
        got = files(ns)
        want = dict(ref.files)
        for p in ref.ambiguous:
            got.pop(p, None)
            want.pop(p, None)
        why = f"log {self.log}"
        # (a) every acknowledged file with its content, (b) nothing unlinked came back
        assert got == want, why
        # (c) the namespace is the reference tree (empty directories loosely)
        dirs = {p for p, v in ns.items() if v is None}
        parents = {p.rsplit("/", 1)[0] for p in files(ns)}
        assert parents <= dirs, why
        assert dirs <= {"/"} | ref.dirs | ref.ambiguous, why
        for viewer in c.live:  # every member reads it back: names and contents
            walked = _sim_walk(c, viewer)
            assert walked == ns, f"node {viewer}; {why}"
        # (d) every file has its copy at its home's successor
        assert_replicated(c.fs, c.live)
        # (e) one manager per name: no table lent or borrowed once settled (``delegation.py``)
        assert not any(c.nodes[m].lent or c.nodes[m].borrowed for m in c.live), why


@settings(max_examples=120, deadline=None, derandomize=True)
@given(*CLUSTER, schedule_st)
def test_simulated_schedules_of_operations_and_faults_lose_no_acknowledged_file(
    n, placement, hashing, rename, schedule
):
    player = Player(n, placement, hashing, rename=rename)
    for step in schedule:
        player.play(step)
        event(step[0])
    player.check()
    for outcome in sorted({entry[3] for entry in player.log if entry[0] in OPS and entry[3] != "ok"}):
        event(f"an operation failed: {outcome}")
    acked = sum(1 for entry in player.log if entry[0] in OPS and entry[3] == "ok")
    event(f"acknowledged operations: {'0' if not acked else '1-9' if acked < 10 else '10+'}")
    checked = len(files(player.c.namespace()))
    event(f"files checked at the end: {'0' if not checked else '1-4' if checked < 5 else '5+'}")


# ---------------------------------------------------------------------------- schedules the property found
def _replay(n: int, placement: str, hashing: str, schedule: list[tuple[Any, ...]], **kw: Any) -> Player:
    kw.setdefault("files", False)  # (the first ones were found before the files made at the start)
    player = Player(n, placement, hashing, **kw)
    for step in schedule:
        player.play(step)
    player.check()
    return player


def test_found_settled_waits_for_the_copy_in_flight_after_a_partition_of_the_successor():
    """Node 2, node 1's successor, is cut off while node 1 creates /a/f0:
    the copy is repaired after the heal, and ``settled`` must wait for it
    (``replicate`` takes the path out of ``unsynced`` while it runs)."""
    _replay(6, "with_manager", "mod_n", [
        ("ops", [("mkdir", 0, "/a")]),
        ("join", [[("create", 0, "/a/f1")]]),
        ("partition", 79, False, [[("mkdir", 0, "/a")], [("create", 57, "/a/f0")]]),
    ])  # fmt: skip


def test_found_settled_waits_for_the_check_of_a_suspicion_raised_during_a_partition():
    """Node 2 is cut off and suspected; the check outlives the heal.  A
    crash of node 1 right after used to find node 2 evicted too (two nodes
    down): ``settled`` waits for the suspicion's check, and the check asks
    the suspect last (``on_suspect``), so node 2, answering again, stays."""
    _replay(6, "with_manager", "mod_n", [
        ("ops", [("mkdir", 0, "/a")]),
        ("join", [[("create", 0, "/a/f1")]]),
        ("partition", 79, False, [[("mkdir", 0, "/a")], [("write", 58, "/a/f0", 0, b"\x00")]]),
        ("crash", 1, False, [[("mkdir", 0, "/a")], [("create", 0, "/a/f1")]]),
    ])  # fmt: skip


def test_found_a_create_acknowledged_by_a_leaving_node_is_not_lost():
    """Node 2 leaves while clients create files; one create, at node 2
    itself, is acknowledged by node 2 after its successor promoted its
    copies (the view change reached node 3 first): the copy node 3 then
    got stayed in its replica space, unseen, and node 2 left with the
    file.  Fixed: a whole copy from a primary that is no member any more
    is promoted at once (``Replication._promote_late``)."""
    _replay(4, "round_robin", "ring", [
        ("leave", 58, [[("create", 27, "/b/f0"), ("create", 42, "/a/f0"), ("overwrite", 47, "/a/f1", b"\x99\x89%"),
                        ("create", 39, "/b/f2")]]),
    ])  # fmt: skip


def test_found_a_partition_healed_during_an_eviction_check_makes_no_two_views_of_one_epoch():
    """Node 0 (of 0, 1, 3) is cut off; it suspects node 3 and, as the
    coordinator of the view without 3, asked node 3 (no answer: the
    partition) and then the majority, whose calls waited out their timeout
    while the partition healed: node 3 was evicted alive, while node 1 had
    evicted node 0: two views of epoch 3, (0, 1) and (1, 3), for good.
    Fixed: the majority first, the suspect last, just before the view
    change (``FailureDetection.on_suspect``)."""
    _replay(3, "round_robin", "mod_n", [
        ("ops", [("create", 43, "/a/f2"), ("write", 54, "/b/f0", 3, b"H\xea\x98\xe3Wf\x1d"), ("mkdir", 49, "/b"),
                 ("create", 21, "/c/f0"), ("read", 58, "/c/f0"), ("overwrite", 58, "/a/f2", b"\x0b\x00j\t\x13b")]),
        ("join", []),
        ("leave", 94, []),
        ("partition", 0, False, [[("unlink", 63, "/a/f2")], [("create", 43, "/a/f2"), ("create", 63, "/a/f1"),
                                 ("create", 77, "/b/f0"), ("rename", 98, "/c/f0", "f2"), ("create", 28, "/a/f0"),
                                 ("read", 21, "/b/f0")]]),
    ])  # fmt: skip


def test_found_a_rename_acknowledged_by_a_leaving_node_is_not_lost():
    """As for a create (above): node 4 renames /b/f0 (its file) to /b/f1
    while it leaves, after its successor promoted its copies; the renamed
    copy stayed in the replica space and node 4 left with the file.
    Fixed: ``on_replica_rename`` promotes it at once too.  Then the file
    was promoted but unlisted: the promotion of /b/f0 at node 5 had made
    /b and failed (its copy was dropped for the whole copy of /b/f1), so
    the late promotion found /b made and never summarised it (the new
    manager's merges skipped node 5: a failed promotion now removes the
    parents it made); and /b/f1's manager took the rename's end naming the
    departed node 4 (``on_rename_done`` keeps no entry naming a non-member:
    the next lookup asks the parent's VD)."""
    _replay(6, "round_robin", "ring", [
        ("join", [[("overwrite", 66, "/a/f2", b"\xf1\x1f~\xea0"), ("rename", 92, "/a/f2", "f2")],
                  [("create", 15, "/b/f0"), ("write", 87, "/a/f2", 1, b"1"),
                   ("write", 26, "/b/f0", 1, b"\x90/\xa2")]]),
        ("leave", 53, [[("create", 65, "/c/f2"), ("read", 18, "/a/f0"), ("overwrite", 45, "/a/f0", b""),
                        ("rename", 45, "/c/f2", "f1"), ("rename", 11, "/b/f0", "f1"), ("create", 54, "/a/f1")]]),
    ])  # fmt: skip


def test_found_an_overwrite_acknowledged_by_a_leaving_node_is_not_lost():
    """A client at node 2 overwrites /a/f1 (truncate, then write) homed at
    node 0 as node 0 leaves: node 1 promoted the truncated copy and the
    write's whole copy, sent while that promotion ran, stayed in the replica
    space.  Fixed: after its promotions a node promotes the copies departed
    primaries sent meanwhile, over the older promoted file
    (``Replication._promote_late``)."""
    _replay(6, "with_manager", "ring", [("leave", 72, [[("overwrite", 36, "/a/f1", b"4\x06w\xb6")]])], files=True)


def test_found_a_change_acknowledged_by_a_cut_off_primary_is_lost():
    """Node 2 of 3 is cut off; a client at node 2 overwrites /a/f0, homed
    at node 2, whose secondary (node 0) is out of reach.  It was
    acknowledged with one copy; node 2 was evicted, node 0 promoted the
    older copy, node 2's restart dropped its own: the acknowledged overwrite
    was lost.  Now a change is acknowledged only once both copies hold it:
    the overwrite fails (PeerUnavailable naming node 0), ambiguous."""
    _replay(3, "with_manager", "ring", [
        ("partition", 35, False, [[("rename", 89, "/b/f1", "f0")], [("overwrite", 65, "/a/f0", b"\xa5")]]),
    ], files=True)  # fmt: skip


def test_found_a_rename_over_an_existing_file_during_a_join_stays_reachable():
    """/a/f2 (home 4) is renamed onto /a/f0 (home 2) while node 5 joins
    and becomes /a/f0's manager: the rename is acknowledged, node 4 holds
    /a/f0, but node 5's DT entry (handed off before the rename's commit)
    still named home 2, which answered ENOENT, for good: the file was
    listed and could not be opened.  Fixed: the old manager, which got the
    rename's end (``RenameDone``) after the view change, forwards it to the
    name's new manager, and a hand-off overtaken by it does not overwrite
    the newer entry (``Membership.on_hand_off``)."""
    _replay(5, "with_manager", "ring", [("join", [[("rename", 39, "/a/f2", "f0")]])], files=True)


def test_found_an_unlink_acknowledged_by_a_leaving_home_stays_done():
    """Node 0 leaves; a client at node 3 unlinks /a/f1, homed at node 0,
    which applies it; node 1 has promoted its copy meanwhile and the
    ReplicaDrop found nothing left to drop: /a/f1 was back at node 1.
    Fixed: a late drop from a departed primary unlinks the file promoted
    from it, as its new home (``Replication._unlink_adopted``)."""
    _replay(4, "round_robin", "ring", [("leave", 16, [[("unlink", 41, "/a/f1")], [("mkdir", 46, "/c")]])], files=True)


def test_found_a_rename_over_an_existing_file_during_a_leave_replaces_it():
    """Node 2 leaves; a client at node 1 renames /b/f2 (homed at node 1)
    onto /b/f1 (homed at node 2, promoted at node 3): acknowledged; node 1
    held /b/f1 with /b/f2's content and node 3 still held the old /b/f1.
    Fixed: node 2's late ReplicaDrop of /b/f1 unlinks the file node 3
    promoted (``_unlink_adopted``), and only the entries naming node 3
    (``DelEntry``/``Forget`` carry the removing home: the rename's entry
    naming node 1 stays); node 1's whole copy of its /b/f1, meeting node
    3's promotion of the old one, is told EAGAIN and repaired later (the
    replica space holds one copy per name), and the late drop leaves a copy
    held for another primary alone."""
    _replay(5, "with_manager", "mod_n", [
        ("loss", {256, 81, 255}, [[("overwrite", 78, "/a/f0", b"0")]]),
        ("leave", 2, [[("unlink", 1, "/c/f1"), ("rename", 81, "/b/f2", "f1")]]),
    ], files=True)  # fmt: skip


def test_found_a_cut_off_node_serves_no_stale_read_after_its_eviction():
    """Node 0 is cut off and evicted; a client at node 2 overwrites /a/f0,
    homed at node 0 (its promoted copy takes it); node 0's client then read
    the old content from node 0's tree.  Fixed: node 0's read lease ended
    before its eviction, and it refuses its clients (EHOSTDOWN)."""
    player = _replay(3, "with_manager", "ring", [
        ("partition", 0, True, [[("overwrite", 2, "/a/f0", b"new")], [("read", 0, "/a/f0")]]),
    ], files=True)  # fmt: skip
    assert ("read", ("/a/f0",), 0, "EHOSTDOWN") in player.log, player.log


def test_found_a_rename_during_a_leave_points_the_new_manager_at_the_renamed_file():
    """Node 2 leaves while /a/f0 is renamed onto /a/f1: /a/f1's manager in
    the old view (node 0, the leave's coordinator, in the new view already)
    forwards the rename's RenameDone to the name's new manager (node 3),
    which had not installed the new view: it kept the entry as a hint,
    dropped it when the view came, then took node 0's hand-off, which named
    the replaced file's home: /a/f1 was ENOENT for good.  Fixed: RenameDone
    carries the sender's epoch, and a receiver under an older view fetches
    the newer one first."""
    _replay(5, "with_manager", "mod_n", [("leave", 47, [[("rename", 85, "/a/f0", "f1")]])], files=True)


def test_found_a_rename_the_leaver_finishes_after_installing_its_leave_is_not_lost():
    """Found by ``tests.dynamics_random sim`` (issue 24): node 2 leaves
    while /a/f0 (homed at node 2) is renamed onto /a/f1.  Node 2 installed
    the view without itself, then took the rename's prepare and finish (past
    the commit point: acknowledged); its successor, node 3, had promoted
    /a/f0 meanwhile and refused the ReplicaRename, and node 2, no member
    any more, copied nothing: the renamed file left with it and the old name
    came back.  Fixed: a leaver still sends such a late step whole
    (``Replication.replicate``, ``late``), which its successor promotes."""
    _replay(4, "with_manager", "ring", [("leave", 34, [[("rename", 64, "/a/f0", "f1")]])], files=True)


def test_found_a_rename_whose_copy_the_leaver_sends_as_it_installs_its_leave_is_not_lost():
    """As above, across directories (node 6 leaves; /b/f2, its file, is
    renamed to /a/f1): node 0 promoted /b/f2 and refused the ReplicaRename;
    node 6 sent /a/f1 whole, installed the view without itself meanwhile,
    and then skipped dropping the copy of /b/f2: the old name stayed beside
    the new one.  The leave is asked for, so the whole step is sent."""
    _replay(7, "with_manager", "ring", [
        ("leave", 97, [[("rename", 76, "/b/f2", "/a/f1")], [("rename", 26, "/b/f2", "f2")]]),
    ], files=True)  # fmt: skip


def test_found_a_rename_across_directories_onto_the_successors_file_during_a_leave_is_not_lost():
    """Found by ``tests.dynamics_random sim`` (issue 24): node 0 leaves while
    /b/f2 (homed at node 0) is renamed onto /a/f0, homed at node 1, node
    0's successor.  The late ReplicaRename made node 1 promote the renamed
    copy over its own /a/f0, taking it for an older copy from node 0; the
    rename's RenameDrop then removed the old target at node 1: the renamed
    file.  Fixed: a late copy replaces only a file promoted from the same
    primary; one that meets this node's own file waits for the rename's
    drop, which promotes it (``_promote_late``, ``_rep_rename_drop``)."""
    _replay(4, "with_manager", "mod_n", [("leave", 0, [[("rename", 0, "/b/f2", "/a/f0")]])], files=True)


def test_found_a_hand_off_overtaken_by_a_rename_end_naming_a_leaver_does_not_point_at_the_replaced_target():
    """Found by ``tests.dynamics_random sim`` (issue 24; the final walk's
    ENOENT): node 2 leaves while /b/f1 (homed at node 2) is renamed onto
    /b/f0 (homed at node 0).  /b/f0's new manager, node 1, got node 0's
    hand-off (/b/f0 at node 0) under the new view and fetched that view
    first; meanwhile the rename's end, forwarded by node 0, named the leaver
    and left no entry, so the hand-off then put the replaced target's home
    back: /b/f0 was listed and ENOENT for good.  Fixed: the end names the
    leaver's successor, promoting the renamed file, as ``_repoint`` does
    (``Replication._renamed_home_left``), and the hand-off keeps it."""
    _replay(6, "with_manager", "mod_n", [
        ("leave", 81, []),
        ("ops", [("rename", 85, "/a/f1", "/b/f0")]),
        ("leave", 32, [[("rename", 48, "/b/f1", "f0")]]),
    ], files=True)  # fmt: skip


def test_found_a_leaving_directory_manager_does_not_release_the_gates_of_its_own_rename():
    """Found by ``tests.dynamics_random sim`` (issue 24): node 2, the
    manager of /b and the home of /b/f1, leaves while it renames /b/f1 onto
    /b/f0.  Installing the view without itself, it released the holds of
    renames coordinated by departed nodes (``renames_orphaned``): its own;
    its RenameFinish then found no gate and did nothing, while /b's VD and
    /b/f0's manager said renamed and the old /b/f0 was dropped.  Fixed: a
    node never releases the holds of its own renames."""
    _replay(6, "with_manager", "mod_n", [("leave", 32, [[("rename", 48, "/b/f1", "f0")]])], files=True)


def test_found_a_renaming_client_at_the_targets_manager_caches_no_entry_naming_the_leaver():
    """Found by ``tests.dynamics_random sim`` (issue 24; the final walk's open
    timed out): /b/f1, homed at the leaving node 2, is renamed onto /b/f0
    by a client at node 4, /b/f0's manager.  The rename's end left node 4
    no entry naming the leaver, and the client's side of ``rename`` then
    cached the answer (home 2) in that same DT: the manager named a node
    that had left, for good.  Fixed: no hint naming a non-member."""
    _replay(6, "round_robin", "ring", [("leave", 26, [[("rename", 40, "/b/f1", "f0")]])], files=True)


def test_found_a_directory_made_implicitly_while_its_holder_leaves_is_kept():
    """Found by ``tests.dynamics_random sim`` (issue 24; the final walk listed
    /c, which no local tree held): /c is held by node 0 alone; node 0 leaves
    while a client creates /c/f1, whose home, node 1, makes /c implicitly
    after installing the view (past its clearing of ``implicit_dirs``).
    /'s VD then listed /c from node 1, and a rename of /c/f1 to /b/f1
    pruned it.  Fixed: the view's settling keeps the implicit directories
    made meanwhile, as the install keeps the older ones."""
    _replay(5, "with_manager", "mod_n", [
        ("crash", 77, True, [[("mkdir", 82, "/c")]]),
        ("leave", 85, [[("create", 41, "/c/f1")], [("rename", 48, "/c/f1", "/b/f1"), ("mkdir", 24, "/a")]]),
    ], files=True)  # fmt: skip


def test_found_a_late_copy_meeting_the_promotion_of_its_name_is_written_again():
    """Found by ``tests.dynamics_random sim`` (issue 24): node 2 leaves while
    /a/f0 is renamed across directories onto /b/f1, both homed at node 2.
    Node 3 promoted the old /b/f1 while node 2's whole copy of the renamed
    /b/f1 arrived; the promotion moved the copy the put had just created,
    the put's write found nothing, and the leaver took the refusal for
    final: the rename was lost.  Fixed: a departed primary's whole copy is
    written again then (``on_replica_put``) and promoted over the old one."""
    _replay(5, "with_manager", "ring", [("leave", 37, [[("rename", 98, "/a/f0", "/b/f1")]])], files=True)


def test_found_a_leaving_directory_managers_rename_is_finished_at_a_home_that_released_its_gates():
    """Found by ``tests.dynamics_random sim`` (issue 24): node 1, the manager
    of /b, leaves while it renames /b/f1 (homed at node 2) onto /b/f0.  Node
    2 installed the view without node 1 between the prepare and the finish
    and released node 1's gates (``renames_orphaned``, for a coordinator
    that crashed); the RenameFinish then did nothing, while the VD said
    renamed and the old /b/f0 was dropped.  Fixed: a home finishes a rename
    whose gates it released when their coordinator asks it to
    (``rename_released``): a graceful leaver runs its renames to the end."""
    _replay(5, "with_manager", "ring", [
        ("join", []), ("leave", 82, []), ("leave", 3, []),
        ("leave", 85, [[("rename", 87, "/b/f1", "f0"), ("unlink", 94, "/a/f1")]]),
    ], files=True)  # fmt: skip


def test_found_a_rename_onto_a_file_whose_copy_the_leavers_successor_takes_meanwhile_is_not_lost():
    """Found by ``tests.dynamics_random sim`` (shrunk): node 4 leaves while
    /b/f2 (homed at node 4) is renamed onto /b/f1 (homed at node 3).  Node 5
    is the successor of both in the new view: node 3's put of the old /b/f1
    arrived while node 5 renamed node 4's copy onto that name, truncated and
    wrote it, and node 5 promoted the old content.  Fixed: a put of a name
    a replica rename is renaming onto is refused (EAGAIN, repaired) until
    the rename is over (``renaming_in``)."""
    _replay(6, "round_robin", "mod_n", [("leave", 28, [[("rename", 51, "/b/f2", "f1")]])], files=True)


def test_found_a_release_of_copies_meeting_the_drop_of_one_of_them_does_not_stop_the_view_change():
    """Found by ``tests.dynamics_random sim`` (shrunk: "after join: not done
    in 120 s"): node 5 joins while /b/f1 is unlinked at its home, node 3,
    whose successor changes: node 3's ReplicaDrop of /b/f1 and then its
    ReplicaRelease of all its copies reach node 0, its old successor; the
    release listed /b/f1 before the drop removed it, then failed on it
    (KeyError) and with it node 3's install of the view, for good.  Fixed:
    the release skips a copy dropped (or taken by another primary)
    meanwhile (``on_replica_release``)."""
    _replay(5, "round_robin", "ring", [("leave", 94, []), ("join", [[("unlink", 29, "/b/f1")]])], files=True)


def test_found_a_rename_across_directories_whose_managers_left_ends_at_the_names_new_manager():
    """Found by ``tests.dynamics_random sim`` (shrunk: the final walk's
    ENOENT): node 5, the manager of both /a/f1 and /b/f2, leaves while
    /a/f1 is renamed onto /b/f2 (an earlier leave and a rename made that
    layout).  The coordinator's RenameSourceEnd to node 5 went unanswered,
    and its retries skipped every step for a node gone: the RenameDone too,
    so /b/f2's new manager kept the entry node 5 handed off, naming the
    replaced file's home: ENOENT for good.  Fixed: a RenameDone for a
    manager that left goes to the name's manager now (``_addressee``)."""
    _replay(5, "round_robin", "ring", [
        ("join", []), ("leave", 85, []), ("ops", [("rename", 94, "/a/f0", "/b/f2")]),
        ("leave", 94, [[("rename", 50, "/a/f1", "/b/f2")]]),
    ], files=True)  # fmt: skip


def test_found_a_rename_whose_retried_finish_lags_still_ends_at_every_participant():
    """Found by ``tests.dynamics_random sim`` (shrunk: EAGAIN on /a/f2 in
    the final walk): in a loss window, node 4 renames /a/f0 (homed at node
    3) onto /a/f2 (homed at node 0); the RenameFinish is lost, and its retry
    is done at node 3 but its ReplicaRename to node 3's secondary is lost
    too (a lagging step).  ``_tell`` kept that lag as ``lag or (yield from
    ...)``, which skipped every step after it: the RenameDone and the
    RenameDrop never went out, /a/f2's gate and mark stayed at node 0 for
    good.  Fixed: every step runs, whatever lagged before it."""
    _replay(5, "with_manager", "mod_n", [
        ("crash", 49, True, []),
        ("loss", {32, 69, 13, 20, 276, 94}, [[
            ("overwrite", 71, "/a/f1", b"L\x0f\xdf<"), ("read", 68, "/b/f0"), ("rename", 74, "/a/f0", "f2"),
        ]]),
    ], files=True)  # fmt: skip


def test_found_a_creating_client_at_the_names_manager_caches_no_entry_naming_the_leaver():
    """Found by ``tests.dynamics_random sim`` (shrunk: the final walk's open
    timed out): node 0 leaves while a client at node 3 creates /b/f2, homed
    at node 0; node 1 promotes the copy and node 3, the name's manager in
    the new view, is handed off the entry naming node 1.  The create's
    answer (home 0) came after, and the client side put it in node 3's DT,
    over the manager's entry: the name pointed at the leaver for good.
    Fixed as for a rename: a client caches no entry naming a departed home
    (``Requester._make_entry``)."""
    _replay(6, "round_robin", "mod_n", [
        ("ops", [("rename", 29, "/b/f2", "/a/f2")]), ("join", []), ("leave", 91, [[("create", 73, "/b/f2")]]),
    ], files=True)  # fmt: skip


def test_found_a_rename_across_directories_whose_source_manager_released_it_drops_the_old_name():
    """Found by ``tests.dynamics_random sim`` (shrunk: the final walk's
    ENOENT on /a/f2): node 2, the manager of /b, leaves while it renames
    /a/f2 onto /b/f1.  Node 6, /a's manager, installed the view without
    node 2 while it checked the source: it released the rename's hold on /a
    (``renames_orphaned``, for a coordinator that crashed) and merged /a's
    VD again, still listing f2; the leaver ran its rename on, and its
    RenameSourceEnd found no hold and did nothing.  Fixed: as for a home's
    released gates, the source's manager drops the old name when the
    departed coordinator ends the rename (``sources_released``)."""
    _replay(7, "round_robin", "mod_n", [("leave", 3, []), ("leave", 62, [[("rename", 48, "/a/f2", "/b/f1")]])],
            files=True)  # fmt: skip


def test_found_a_directory_a_promotion_makes_after_its_parents_merge_is_listed():
    """Found by ``tests.dynamics_random sim`` (shrunk: /b missing from the
    final walk at every member): node 2, the only holder of /b, leaves; a
    create of /c/f1 makes the root's manager merge the root's VD after node
    2 left and before node 3, promoting /b's files, made /b: the VD lacked
    /b for good (the promotion told /b's manager, not the root's).  Fixed:
    a promotion tells the parent's manager of each directory it makes, as
    a mkdir does (``Replication._promote``)."""
    _replay(6, "with_manager", "mod_n", [("leave", 43, []), ("leave", 6, [[("create", 64, "/c/f1")]])], files=True)


@pytest.mark.xfail(strict=True, reason="not fixed yet: a RenameDrop for a target home that left is skipped")
def test_found_a_rename_onto_a_leavers_file_drops_the_target_its_successor_promoted():
    """Found by ``tests.dynamics_random sim`` (shrunk: node 3's walk read
    the old /a/f1): node 2, the home of /a/f1, leaves while /b/f1 (homed at
    node 4) is renamed onto it.  Node 2 took the gate, then installed its
    leave; the RenameDrop found it gone and its retries skip a node that
    left, while node 3, node 2's successor, promoted the old /a/f1: two
    files of one name, node 3 serving the replaced one.  Not fixed yet: the
    drop should go to the successor that promoted the target (and the
    parent's VD name the rename's home)."""
    _replay(7, "round_robin", "mod_n", [("leave", 79, [[("rename", 27, "/b/f1", "/a/f1")]])], files=True)


def test_found_a_leavers_target_promoted_at_the_moved_files_home_is_not_unlinked_under_it():
    """Found by ``tests.dynamics_random sim 100`` (3 of 100, one schedule) on the heir's log
    (issue 24): node 2 leaves while /a/f0 is renamed onto its /b/f1 (redistribute).  Node 3 is
    node 2's heir and the moved file's home: it promotes the target, renames /a/f0 over it, and
    the target's drop it is then told for node 2 (``Replication._drop_for_departed``) unlinked
    /b/f1, the moved file: an acknowledged rename's file lost.  The home now forgets a promoted
    target once a rename replaced it (``_rep_rename_finish``)."""
    _replay(5, "with_manager", "mod_n", [
        ("ops", [("unlink", 56, "/a/f1"), ("write", 82, "/c/f2", 5, b"\xea\xaa\xc2\xa3\x80\x95V\xde"),
                 ("mkdir", 98, "/c"), ("rename", 72, "/b", "/a"), ("rename", 64, "/a/f1", "f2")]),
        ("leave", 2, [[("rename", 86, "/a/f0", "/b/f1"), ("read", 96, "/a/f1")], [("create", 68, "/a/f2"),
                                                                                  ("mkdir", 4, "/a")]]),
    ], files=True, rename="redistribute")  # fmt: skip


@pytest.mark.xfail(strict=True, reason="not fixed yet: a write during a leave is refused EREMCHG (redistribute)")
def test_found_a_write_during_a_leave_beside_a_redistributed_rename_is_not_refused_with_a_redirect():
    """Found by ``tests.dynamics_random sim 150`` (3 of 150, one schedule; shrunk), on main as on
    issue 24's crash fixes: with ``rename: redistribute`` node 3 writes /c/f1 while node 0 leaves and
    a rename of /c/f0 into /a (ENOENT) runs beside it; the write fails EREMCHG, "node 0 does not
    manage this name; node 4 does": a redirect the client sees instead of its requester following it
    (``Node._routed``), a delegation and a view change crossing.  Not a rename across a crash's doing."""
    _replay(5, "with_manager", "mod_n", [("leave", 18, [[("rename", 48, "/c/f0", "/a/f0"),
            ("write", 28, "/c/f1", 2, b"\xff\xfd\xf1Am\xa1\xd8\x1d")]])], files=True,
            rename="redistribute")  # fmt: skip


def test_found_a_directory_rename_during_a_leave_leaves_no_stale_name_in_its_parents_listing():
    """Found by ``tests.dynamics_random sim 300`` (1 of 300, shrunk from a 6-step schedule):
    with 2pc, node 2 renames the directory /a to /b/d while node 0 leaves (and /c's files'
    renames fail ENOENT beside it).  The rename answers ok and every local tree has moved it
    (no /a anywhere), but every member's listing of / still names ``a``, whose listing is then
    ENOENT.  The leave moved /'s management from node 3, which held / in doubt, to node 5,
    which merged its VD of / while the local trees still had /a; the rename's end went to
    node 3 only.  Now it goes to / 's manager in the coordinator's view too, which forgets
    its VD of / (``Renaming._source_ends``)."""
    _replay(3, "with_manager", "mod_n", [
        ("join", []), ("join", []),
        ("join", [[("rename", 33, "/a/f0", "/b/f2")], [("unlink", 18, "/a/f1"), ("mkdir", 75, "/c")]]),
        ("crash", 55, False, []),
        ("leave", 54, [[("rename", 38, "/a", "/b/d"), ("rename", 72, "/c/f1", "f0"), ("rename", 25, "/c/f2", "f2")]]),
    ], files=True, rename="2pc")  # fmt: skip


def test_found_a_rename_during_a_join_whose_name_comes_back_to_its_manager_names_its_home():
    """Found by ``tests.dynamics_random sim 300`` (3 of 300, shrunk; there before today's
    changes): node 0 renames /a/f2 to /a/f1 while node 3 joins, node 3 leaves, another joins.
    The file ends at node 1 (its copy at node 2), but node 2, /a/f1's manager again after the
    leave, answers home 0 from its table: every member's listing names f1 and its lookup is
    ENOENT.  The join made node 2, the rename's coordinator, /a/f1's manager, but it sent the
    rename's end to node 0, the manager it had looked up before, which did not forward it back
    to its sender; node 2 kept the entry node 0 handed off (the old target's home).  Now an end
    that reaches a node that no longer manages the name goes to its manager, sender or not."""
    _replay(3, "round_robin", "mod_n", [("join", [[("rename", 0, "/a/f2", "/a/f1")]]), ("leave", 75, []), ("join", [])],
            files=True, rename="2pc")  # fmt: skip


# ---------------------------------------------------------------------------- the in-memory variant
def _direct_op(c: DirectCluster, at: int, step: tuple[Any, ...]) -> Any:
    """``_op_gen``'s operation, run to its end in the in-memory runtime."""
    kind, path = step[0], step[2]
    if kind in ("mkdir", "create", "unlink"):
        return c.op(at, kind, path)
    if kind == "rename":
        return c.op(at, "rename", path, _target(step))
    if kind == "overwrite":
        c.op(at, "truncate", path, 0)
    fd = c.op(at, "open", path)
    try:
        if kind == "read":
            return c.op(at, "read", fd, 0, 64)
        data, off = (step[4], step[3]) if kind == "write" else (step[3], 0)
        return c.op(at, "write", fd, off, data)
    finally:
        c.op(at, "close", fd)


def _replay_in_memory(n: int, placement: str, hashing: str, schedule: list[tuple[Any, ...]], seed_files: bool = True,
                      rename: str = "2pc") -> DirectCluster:  # fmt: skip
    """Play ``schedule`` in the in-memory runtime (one operation at a time:
    no concurrency, the faults and their repairs as in the simulator, the
    same reference and checks); returns the cluster."""
    c = DirectCluster(n, config=replace(CONFIG, rename=rename), placement=placement, hashing=hashing)
    c.op(0, "mkdir", "/a")
    c.op(n - 1, "mkdir", "/b")
    ref, log = Reference(), []
    seeded = [p for p in PATHS if not p.startswith("/c/")] if seed_files else []
    for i, path in enumerate(seeded):
        c.op(i % n, "create", path)
        _direct_op(c, (i + 1) % n, ("overwrite", 0, path, path.encode()))
        ref.fix(path, path.encode())

    def ops(batches: list[list[tuple[Any, ...]]], avoid: int | None = None) -> None:
        clients = [m for m in c.live if m not in c.down and c.nodes[m].member and m != avoid]
        for step in (s for b in batches for s in b):
            at = clients[step[1] % len(clients)]
            try:
                ok, value = True, _direct_op(c, at, step)
            except OSError as exc:
                ok, value = False, exc
            log.append((step[0], step[2:], at, "ok" if ok else errno.errorcode.get(value.errno, value.errno)))
            _account(ref, (step[0], at, *step[2:]), ok, value, log)

    def repair() -> None:
        c.heal()
        for _ in range(40):
            for m in sorted({*c.down, *c.evicted} - c.left):
                c.restart(m)
            if settled(c):
                return
            c.advance(HB)
        raise AssertionError(f"not settled; log {log}")

    for step in schedule:
        kind, members = step[0], [m for m in c.live if m not in c.down and c.nodes[m].member]
        log.append(step[:2] if kind != "ops" else ("ops",))
        if kind == "ops":
            ops([step[1]])
        elif kind == "join":
            if len(c.live) < MAX_NODES:
                c.join()
            ops(step[1])
        elif kind == "leave":
            if len(members) > MIN_MEMBERS:
                c.leave(members[step[1] % len(members)])
            ops(step[2])
        elif kind in ("crash", "partition"):
            node = members[step[1] % len(members)]
            if kind == "crash":
                c.crash(node)
            else:
                c.inject(FaultPlan.of(partitions=[Partition(frozenset({node}))]))
            if step[2]:
                _evicted(c, node)
            ops(step[3])  # (clients at a cut-off node too: past its read lease it refuses them)
        else:
            c.inject(FaultPlan.of(lose=step[1]))
            ops(step[2])
        repair()
    got, want = files(c.namespace()), dict(ref.files)
    for p in ref.ambiguous:
        got.pop(p, None)
        want.pop(p, None)
    assert got == want, f"log {log}"
    whole = c.namespace()
    for viewer in c.live:
        assert c.walk(viewer) == whole, f"node {viewer}; log {log}"
    assert_replicated(c.fs, c.members)
    assert not any(c.nodes[m].lent or c.nodes[m].borrowed for m in c.members), f"log {log}"
    return c


@settings(max_examples=60, deadline=None, derandomize=True)
@given(*CLUSTER, schedule_st)
def test_in_memory_schedules_of_operations_and_faults_lose_no_acknowledged_file(
    n, placement, hashing, rename, schedule
):
    """The same schedules in the in-memory runtime (``_replay_in_memory``)."""
    _replay_in_memory(n, placement, hashing, schedule, rename=rename)


# ---------------------------------------------------------------------------- schedules the in-memory variant found
#: A rename in a loss window, message ``k`` of the window lost: PM's Rename
#: (from the requester), RenameCheck, RenamePrepare, RenameGate,
#: RenameFinish, the forwarded ReplicaRename, RenameDone, RenameDrop, ... or
#: a reply to one, for three layouts of PM, the target's manager and homes.
RENAME_IN_A_LOSS = [("rename", 91, "/b/f0", "f2")]


@pytest.mark.parametrize("k", range(16))
@pytest.mark.parametrize("cluster", [("with_manager", "mod_n"), ("round_robin", "mod_n"), ("round_robin", "ring")])
@pytest.mark.parametrize("runtime", ["in memory", "simulated"])
def test_found_a_rename_that_loses_any_one_of_its_messages_holds_no_name_and_loses_no_copy(runtime, cluster, k):
    """Found by ``tests.dynamics_random mem`` (an EAGAIN after settle): a
    reply to RenamePrepare was lost, the rename failed and its rollback
    skipped H_a, whose gates stayed: every later operation on both names
    was EAGAIN for good; so after a lost RenameGate reply, RenameFinish or
    RenameDrop (and a mark after a lost RenameCheck reply or RenameDone).
    Fixed: a step without an answer is rolled back too, and the rollbacks
    and the steps after the commit point are retried until the participant
    answers (``Renaming._tell``).  The same schedules found two more: a lost
    reply to RenameFinish rolled the VD back while H_a had renamed (listed,
    and ENOENT): the rename now goes forward; a lost ReplicaRename left the
    copy under the old name at the secondary besides the whole copy of the
    new one (``_rep_rename_finish`` marks the old name unsynced too).
    Protocol bugs: the simulator failed at the same messages."""
    schedule = [("loss", {k}, [RENAME_IN_A_LOSS])]
    if runtime == "in memory":
        c: Any = _replay_in_memory(4, *cluster, schedule)
    else:
        c = _replay(4, *cluster, schedule, files=True).c
    for n in c.live:
        node = c.nodes[n]
        assert not node.gates and not node.rename_marks and not node.renames, f"node {n}"


def test_found_in_memory_settled_waits_for_the_repair_of_an_unlink_its_parents_manager_missed():
    """Found by ``tests.dynamics_random mem`` (the final walk's ENOENT): node
    0, the manager of /b, is cut off while /b/f0 is unlinked: its home
    answers done and repairs the name in the background (``Settle``, with
    back-off).  The in-memory runtime runs a repair's next try only when the
    clock is advanced, and the driver took the federation for settled at
    once: /b's VD still listed /b/f0.  A driver artefact (the protocol
    repairs it once time passes): ``settled`` waits for ``repairs_pending``
    (and for a rename's retried steps), in both variants."""
    _replay_in_memory(4, "with_manager", "mod_n", [("partition", 0, False, [[("unlink", 1, "/b/f0")]])])


def test_found_a_rename_whose_directory_merge_misses_a_holder_does_not_take_the_target_name():
    """Found by ``tests.dynamics_random mem`` (the final walk read the old
    /a/f0 at two nodes): with 7 nodes, one evicted after a partition, /a's
    manager rebuilds /a's VD while another node, the home of /a/f0, is cut
    off.  The merge serves a partial VD (``VirtualDirectory.unreachable``),
    and the rename of /a/f2 onto f0 took it for a rename onto a free name:
    /a/f0 was left at its home beside the renamed file, two files of one
    name for good.  Fixed: a rename whose VD lacks either name and missed a
    holder fails naming it (EHOSTDOWN), as a create's check does."""
    _replay_in_memory(7, "round_robin", "mod_n", [
        ("partition", 50, True, [[]]),
        ("partition", 16, False, [[("rename", 78, "/a/f2", "f0")], []]),
    ])  # fmt: skip


# ------------------------------------------------------------------ found with the rename method drawn (issue 24)
def test_found_a_directory_renamed_during_a_leave_keeps_the_copy_of_a_promoted_file():
    """Node 0 leaves; node 1 promotes its copy of /b/f0 and is to copy it
    whole to its successor, node 2, while /b is renamed to /c: the copy,
    made under the old name after the rename, dropped node 2's copy instead
    (on ``2pc`` as well: the replica check failed).  Fixed: a view change's
    whole copies hold their files against a directory rename until each
    begins (``Replication._copy_queue``)."""
    schedule = [("leave", 15, [[("rename", 17, "/b", "/c"), ("rename", 17, "/b", "/c"), ("unlink", 29, "/b/f1"),
                                ("rename", 29, "/b/f1", "f1"), ("rename", 17, "/b", "/c")]])]  # fmt: skip
    for rename in ("2pc", "redistribute"):
        _replay(5, "with_manager", "mod_n", schedule, files=True, rename=rename)


def test_found_a_rename_after_a_restart_and_a_join_is_not_redirected_back_and_forth():
    """``rename: redistribute``: node 3 restarts and a node joins; a rename
    into /c asked at a node whose view differed was redirected with a hint of
    its own view, followed back and forth until the client got EREMCHG.
    Fixed: a rename carries its sender's epoch and its coordinator checks it
    as a routed request's (``Node.check_manager``): a redirect names a
    manager only under the same view, else the sender fetches the view."""
    _replay(4, "with_manager", "mod_n", [
        ("crash", 3, False, [[("rename", 14, "/b/f1", "f0"), ("create", 74, "/a/f2"), ("mkdir", 6, "/a")]]),
        ("join", [[("rename", 15, "/a/f1", "/c/f2"), ("rename", 33, "/a/f1", "f2"), ("rename", 7, "/a/f2", "/a/f1"),
                   ("unlink", 43, "/a/f1"), ("create", 48, "/b/f0"), ("write", 16, "/b/f2", 6, b"\x99\x95\xc6\x02%")]]),
    ], files=True, rename="redistribute")  # fmt: skip


@pytest.mark.parametrize("k", range(32))
@pytest.mark.parametrize("cluster", [("with_manager", "mod_n"), ("round_robin", "ring")])
def test_a_redistributed_rename_that_loses_any_one_of_its_messages_leaves_one_manager_and_no_hold(cluster, k):
    """``rename: redistribute`` across directories (/b/f0 to /a/f2), message
    ``k`` of the loss window lost: the Lend or its reply (the table may be
    lent: given back in the background), the rename's own steps, the
    GiveBack or its reply (given back again until the lender answers).
    Once settled, no table is lent or borrowed (``_replay_in_memory`` checks
    it), no name is held, and the namespace is the reference's."""
    c = _replay_in_memory(4, *cluster, [("loss", {k}, [[("rename", 91, "/b/f0", "/a/f2")]])], rename="redistribute")
    for n in c.live:
        node = c.nodes[n]
        assert not node.gates and not node.rename_marks and not node.renames, f"node {n}"


@pytest.mark.xfail(strict=True, reason="not fixed yet: / lists c, made beside a lossy rename; /c's dirmerge is ENOENT")
def test_found_in_memory_a_mkdir_beside_a_lossy_redistributed_rename_into_it_stays():
    """Found by ``tests.dynamics_random mem 300`` (3 of 300, shrunk; there before today's
    changes): with ``rename: redistribute`` and six messages lost, /b/f1 is renamed to /c/f0
    while /c is made; the settled federation's listing of / names c, and the walk's listing of
    /c fails ENOENT in its dirmerge (no holder answers for it).  Not traced yet."""
    _replay_in_memory(3, "round_robin", "mod_n", [
        ("loss", {9, 298, 77, 13, 88, 30}, [[("rename", 34, "/b/f1", "f0"), ("mkdir", 96, "/c")]]),
    ], rename="redistribute")  # fmt: skip
