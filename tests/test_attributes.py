"""Attributes, statfs and fsync with their real values (issue 15).

The conformance scenario ("attributes: ...") checks that every runtime gives
the same results and messages, but it cannot compare wall-clock times, real
inode numbers, owners or the hosts' file-system sizes.  These tests check
exactly those, on real agents: separate processes over TCP through the
``Client`` (what the FUSE mount calls), in-process agents where a test needs
to stop one or change its privileges, and the in-memory runtime for the
protocol's own rules (the lowest holder, a member that does not answer).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fednode.client import KEEP, UTIME_NOW, UTIME_OMIT, Attr, Client, StatFS
from fednode.cluster import AgentGroup, ProcessCluster, local_spec, write_local
from fednode.config import Cluster, write_cluster
from fednode.localfs import LocalFS
from fedsim.direct import DirectCluster
from fedsim.memfs import MemFS
from fedsim.network import preset
from fedsim.protocol.attrs import ROOT_INO, dir_ino, file_ino
from fedsim.protocol.hashing import make_hashing
from fedsim.runtime import SimCluster


@pytest.fixture(scope="module")
def fed() -> Iterator[tuple[Client, Client, Path]]:
    """Two agent processes over TCP on this machine, a client at each."""
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        cf = write_local(base, 2)
        with ProcessCluster(cf, log_dir=base / "logs") as pc:
            pc.wait_ready()
            a, b = Client(cf, node=0), Client(cf, node=1)
            try:
                yield a, b, base
            finally:
                a.disconnect()
                b.disconnect()


def _local(base: Path, home: int, path: str) -> Path:
    return base / f"n{home}" / path.lstrip("/")


def test_getattr_of_a_file_is_its_homes_with_one_ino_from_every_node(fed):
    a, b, base = fed
    a.mkdir("/ga")
    home = a.write_file("/ga/f", b"hello")
    got_a, got_b = a.getattr("/ga/f"), b.getattr("/ga/f")
    st = os.stat(_local(base, home, "/ga/f"))
    assert isinstance(got_a, Attr)
    assert got_a.ino == got_b.ino == file_ino(home, st.st_ino)
    assert got_a.ino not in (0, ROOT_INO)
    assert got_a._replace(atime_ns=0) == got_b._replace(atime_ns=0)  # (a read between may move atime)
    assert (got_a.is_dir, got_a.mode, got_a.nlink, got_a.size) == (False, st.st_mode, 1, 5)
    assert (got_a.uid, got_a.gid, got_a.mtime_ns, got_a.ctime_ns) == (st.st_uid, st.st_gid, st.st_mtime_ns,
                                                                      st.st_ctime_ns)  # fmt: skip
    assert a.getattr("/ga/f").ino == got_a.ino  # and across calls


def test_getattr_of_a_directory_has_a_path_ino_nlink_1_and_of_the_root_ino_1(fed):
    a, b, base = fed
    home = a.mkdir("/gd")
    got = b.getattr("/")
    assert got.is_dir and got.ino == ROOT_INO and got.nlink == 1 and stat.S_ISDIR(got.mode)
    d = a.getattr("/gd")
    assert d.ino == dir_ino("/gd") == b.getattr("/gd").ino and d.nlink == 1 and d.size == 0
    st = os.stat(_local(base, home, "/gd"))
    assert (d.mode, d.uid, d.mtime_ns) == (st.st_mode, st.st_uid, st.st_mtime_ns)


def _on_both(c: Client, directory: str) -> dict[int, str]:
    """Files in ``directory`` until one lives on each node: both hold the directory."""
    homes: dict[int, str] = {}
    i = 0
    while len(homes) < 2:
        path = f"{directory}/f{i}"
        homes.setdefault(c.write_file(path, b"x"), path)
        i += 1
    return homes


def test_chmod_of_a_file_and_of_a_directory_at_every_holder(fed):
    a, b, base = fed
    a.mkdir("/cm")
    homes = _on_both(a, "/cm")
    home, f = next(iter(homes.items()))
    b.chmod(f, 0o640)
    assert stat.S_IMODE(a.getattr(f).mode) == 0o640
    assert stat.S_IMODE(os.stat(_local(base, home, f)).st_mode) == 0o640
    b.chmod("/cm", 0o711)
    for n in (0, 1):
        assert stat.S_IMODE(os.stat(_local(base, n, "/cm")).st_mode) == 0o711, f"node {n}"
    assert a.getattr("/cm").mode == stat.S_IFDIR | 0o711 == b.getattr("/cm").mode
    a.utimens("/cm", 10**18, 10**18 + 1)
    for n in (0, 1):
        assert os.stat(_local(base, n, "/cm")).st_mtime_ns == 10**18 + 1, f"node {n}"


def test_utimens_sets_exact_ns_omit_keeps_now_is_the_homes_clock(fed):
    a, b, base = fed
    a.mkdir("/ut")
    home = a.write_file("/ut/f", b"x")
    b.utimens("/ut/f", 1_234_567_891_123_456_789, -5_000_000_001)  # before 1970 too
    got = a.getattr("/ut/f")
    assert (got.atime_ns, got.mtime_ns) == (1_234_567_891_123_456_789, -5_000_000_001)
    st = os.stat(_local(base, home, "/ut/f"))
    assert (st.st_atime_ns, st.st_mtime_ns) == (1_234_567_891_123_456_789, -5_000_000_001)
    b.utimens("/ut/f", UTIME_OMIT, 42)
    assert (a.getattr("/ut/f").atime_ns, a.getattr("/ut/f").mtime_ns) == (1_234_567_891_123_456_789, 42)
    before = time.time_ns()
    b.utimens("/ut/f", UTIME_NOW, UTIME_OMIT)
    after = time.time_ns()
    got = a.getattr("/ut/f")
    # The kernel stamps with its coarse clock (one tick, at most 10 ms, behind time_ns).
    assert before - 10_000_000 <= got.atime_ns <= after and got.mtime_ns == 42
    assert got.ctime_ns >= before - 10_000_000


def test_writes_and_truncates_move_mtime_and_ctime(fed):
    a, _, _ = fed
    a.mkdir("/wt")
    a.write_file("/wt/f", b"x")
    a.utimens("/wt/f", 5, 5)
    fd = a.open("/wt/f")
    try:
        a.write(fd, b"more")
    finally:
        a.close(fd)
    assert a.getattr("/wt/f").mtime_ns > 5
    a.utimens("/wt/f", 5, 5)
    a.truncate("/wt/f", 1)
    got = a.getattr("/wt/f")
    assert got.mtime_ns > 5 and got.size == 1


def test_chown_minus_one_is_a_no_op_and_root_may_give_files_away(fed):
    a, b, base = fed
    a.mkdir("/co")
    home = a.write_file("/co/f", b"x")
    before = a.getattr("/co/f")
    b.chown("/co/f", -1, -1)
    after = a.getattr("/co/f")
    assert (after.uid, after.gid, after.mode) == (before.uid, before.gid, before.mode)
    if os.geteuid() != 0:
        with pytest.raises(PermissionError) as info:
            b.chown("/co/f", 0, 0)
        assert info.value.errno == errno.EPERM
        return
    b.chown("/co/f", 1234, -1)
    got = a.getattr("/co/f")
    assert (got.uid, got.gid) == (1234, before.gid)
    st = os.stat(_local(base, home, "/co/f"))
    assert (st.st_uid, st.st_gid) == (1234, before.gid)


def test_statfs_sums_the_members_and_fsync_flushes(fed):
    a, b, base = fed
    got = a.statfs()
    assert isinstance(got, StatFS)
    v = os.statvfs(base / "n0")  # both agents' roots are on this one host file system
    assert (got.frsize, got.blocks, got.files, got.namemax) == (v.f_frsize, 2 * v.f_blocks, 2 * v.f_files,
                                                                 min(v.f_namemax, 255))  # fmt: skip
    assert 0 < got.bfree <= got.blocks and got.bavail <= got.bfree
    assert b.statfs().blocks == got.blocks
    a.mkdir("/fs")
    a.write_file("/fs/f", b"data")
    fd = b.open("/fs/f")
    b.write(fd, b"DATA")
    b.fsync(fd)
    b.close(fd)
    assert a.read_file("/fs/f") == b"DATA"
    with pytest.raises(OSError) as info:
        b.fsync(fd)  # closed
    assert info.value.errno == errno.EBADF


@pytest.mark.parametrize(
    "call, code",
    [
        (lambda c: c.chmod("/bad/f", 0o10000), errno.EINVAL),
        (lambda c: c.chmod("/bad/f", -2), errno.EINVAL),
        (lambda c: c.chown("/bad/f", 1 << 32, -1), errno.EINVAL),
        (lambda c: c.chown("/bad/f", -7, -1), errno.EINVAL),
        (lambda c: c.utimens("/bad/f", 1 << 62 | 7, 0), errno.EINVAL),
        (lambda c: c.utimens("/bad/f", 0, -(1 << 62) - 1), errno.EINVAL),
        (lambda c: c.getattr("/bad/f/below"), errno.ENOTDIR),
        (lambda c: c.chmod("/bad/f/below", 0o600), errno.ENOTDIR),
        (lambda c: c.getattr("/bad/none"), errno.ENOENT),
        (lambda c: c.utimens("/bad/none", 1, 1), errno.ENOENT),
        (lambda c: c.getattr("/../etc"), errno.EINVAL),
        (lambda c: c.call("setattr", "/bad/f", 0o600, KEEP, KEEP, 1.5, 0), errno.EINVAL),
        (lambda c: c.call("setattr", "/bad/f", True, KEEP, KEEP, 0, 0), errno.EINVAL),
        (lambda c: c.call("statfs", "/"), errno.EINVAL),
        (lambda c: c.call("fsync", "/bad/f"), errno.EINVAL),
        (lambda c: c.truncate("/bad/f", -1), errno.EINVAL),
        (lambda c: c.truncate("/bad/f", 1 << 63), errno.EINVAL),
        (lambda c: c.truncate("/bad/f/below", 0), errno.ENOTDIR),
    ],
)
def test_bad_input_is_a_clear_error_and_changes_nothing(fed, call, code):
    a, b, _ = fed
    if not a.exists("/bad/f"):
        a.mkdir("/bad")
        a.write_file("/bad/f", b"x")
        a.chmod("/bad/f", 0o644)
        a.utimens("/bad/f", 7, 7)
    before = a.getattr("/bad/f")
    with pytest.raises(OSError) as info:
        call(b)
    assert info.value.errno == code
    assert a.getattr("/bad/f")._replace(atime_ns=0) == before._replace(atime_ns=0)


# ---------------------------------------------------------------------------- in-process agents
@contextlib.contextmanager
def _group(n: int) -> Iterator[tuple[AgentGroup, Path]]:
    base = Path(tempfile.mkdtemp(prefix="fedattr"))
    try:
        spec = local_spec(base, n)
        write_cluster(base / "cluster.yaml", spec)
        with AgentGroup(Cluster(spec, base / "cluster.yaml")) as g:
            yield g, base
    finally:
        import shutil

        shutil.rmtree(base, ignore_errors=True)


def test_statfs_leaves_out_a_member_that_does_not_answer():
    with _group(3) as (g, base):
        v = os.statvfs(base / "n0")
        assert g.op(0, "statfs")[2] == 3 * v.f_blocks
        g.stop_agent(2)
        assert g.op(0, "statfs")[2] == 2 * v.f_blocks
        assert g.op(1, "statfs")[5] == 2 * v.f_files


@contextlib.contextmanager
def _unprivileged(paths: list[Path]) -> Iterator[None]:
    """Run as an unprivileged user for the block: as root, the effective ids
    become nobody's (the agents' threads with them) and ``paths`` are given
    to nobody; as anyone else, nothing changes."""
    if os.geteuid() != 0:
        yield
        return
    for p in paths:
        for dirpath, dirnames, filenames in os.walk(p):
            for name in [dirpath, *(os.path.join(dirpath, x) for x in dirnames + filenames)]:
                os.chown(name, 65534, 65534)
    os.setegid(65534)
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


def test_an_unprivileged_agents_eperm_reaches_the_client_as_eperm():
    """Agents normally run unprivileged: a chown to another user is refused by
    the local file system, and the requester is told EPERM, not EIO; nothing
    changed.  (As root, the test drops to nobody's effective ids around it.)"""
    with _group(2) as (g, base):
        home = g.op(0, "create", "/own")
        os.chmod(base, 0o755)
        with _unprivileged([base / "n0", base / "n1"]):
            before = g.op(1, "getattr", "/own")
            with pytest.raises(PermissionError) as info:
                g.op(1, "setattr", "/own", KEEP, 0, KEEP, UTIME_OMIT, UTIME_OMIT)
            assert info.value.errno == errno.EPERM
            after = g.op(1, "getattr", "/own")
            g.op(1, "setattr", "/own", 0o600, KEEP, KEEP, UTIME_OMIT, UTIME_OMIT)  # its own file: allowed
            mode = g.op(0, "getattr", "/own")[1]
        assert after == before and after[3] != 0
        assert stat.S_IMODE(mode) == 0o600 == stat.S_IMODE(os.stat(base / f"n{home}" / "own").st_mode)


def test_create_and_mkdir_give_the_new_name_its_mode_and_owner_or_leave_nothing():
    """Issue 22: create, mkdir and create_open with a mode and an owner make the
    entry with them at its home (the local file itself has them); bad values
    are EINVAL from the agent's type and range checks; an agent that may not
    give a file away (not root) answers EPERM and leaves no file, no directory
    and no missing parent it made behind, while its own ids are still allowed."""
    with _group(2) as (g, base):
        g.op(0, "mkdir", "/o")
        if os.geteuid() == 0:
            home = g.op(1, "create", "/o/f", 0o4750, 1234, 5678)
            st = os.stat(base / f"n{home}" / "o" / "f")
            assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (1234, 5678, 0o4750)
            home = g.op(0, "mkdir", "/o/d", 0o2770, 1234, 5678)
            a = g.op(1, "getattr", "/o/d")
            assert (a[3], a[4], stat.S_IMODE(a[1])) == (1234, 5678, 0o2770)
            fd, a = g.op(0, "create_open", "/o/d/g", 0o600, 4321, 5678)
            assert (a[3], a[4], stat.S_IMODE(a[1])) == (4321, 5678, 0o600)
            g.op(0, "close", fd)
        for args in [("/o/x", 0o644, 1 << 32, 0), ("/o/x", 0o644, 0, -2), ("/o/x", 0o20644, 0, 0),
                     ("/o/x", "0644", 0, 0), ("/o/x", 0o644, 0.0, 0), ("/o/x", 0o644, 0, 0, 0)]:  # fmt: skip
            for op in ("create", "mkdir", "create_open"):
                with pytest.raises(OSError) as info:
                    g.op(1, op, *args)
                assert info.value.errno == errno.EINVAL, (op, args)
        assert not any((base / f"n{n}" / "o" / "x").exists() for n in (0, 1))
        os.chmod(base, 0o755)
        with _unprivileged([base / "n0", base / "n1"]):
            me, group = os.geteuid(), os.getegid()
            for op, path in (("create", "/o/p/f"), ("mkdir", "/o/q/d"), ("create_open", "/o/r/f")):
                g.op(0, "mkdir", os.path.dirname(path))
                if me != 0:  # (as root the agent may: the test dropped to nobody's ids, or it is unprivileged)
                    with pytest.raises(PermissionError):
                        g.op(1, op, path, 0o644, me + 1 if me < 60000 else 1, group)
                    assert not any((base / f"n{n}" / path.lstrip("/")).exists() for n in (0, 1)), path
                    with pytest.raises(FileNotFoundError):
                        g.op(0, "getattr", path)
            g.op(1, "create", "/o/p/own", 0o640, me, group)  # its own ids: no chown needed, allowed
            a = g.op(0, "getattr", "/o/p/own")
        assert (a[3], stat.S_IMODE(a[1])) == (me, 0o640)


# ---------------------------------------------------------------------------- the protocol's rules
def _mod_n(path: str, n: int) -> int:
    return make_hashing("mod_n", list(range(n)), 64).manager_of(path)


def test_a_directory_answers_from_its_lowest_holder_and_setattr_reaches_every_holder():
    fss = [MemFS() for _ in range(4)]
    for n in (1, 2, 3):
        fss[n].mkdir("/e")
    fss[3].setattr("/e", 0o700, KEEP, KEEP, 5, 5)  # the copies differ before the federation starts
    fss[1].setattr("/e", 0o711, KEEP, KEEP, 9, 9)
    c = DirectCluster(4, local=fss)  # /e's manager is node 0, its parent's node 3
    for asker in range(4):
        got = c.op(asker, "getattr", "/e")
        assert (got[1], got[7], got[2]) == (stat.S_IFDIR | 0o711, 9, 1)  # node 1's: the lowest holder
    c.advance(2.0)
    c.op(0, "setattr", "/e", 0o750, 77, KEEP, UTIME_NOW, UTIME_OMIT)
    for n in (1, 2, 3):
        m = fss[n].getattr("/e")
        assert (m[1], m[3], m[6], m[7]) == (stat.S_IFDIR | 0o750, 77, 2_000_000_000, 9 if n == 1 else
                                            (5 if n == 3 else 0)), n  # fmt: skip
    assert "/e" not in fss[0].meta  # a node that does not hold it is not given a copy
    c.down.add(1)  # the lowest holder is down: the next one answers
    assert c.op(0, "getattr", "/e")[1] == stat.S_IFDIR | 0o750


def test_a_directory_setattr_changes_nothing_while_a_holder_may_be_missed():
    fss = [MemFS() for _ in range(3)]
    for n in range(3):
        fss[n].mkdir("/d")
    c = DirectCluster(3, local=fss)
    c.down.add(2 if _mod_n("/d", 3) != 2 else 1)
    with pytest.raises(ConnectionError):
        c.op(_mod_n("/d", 3), "setattr", "/d", 0o700, KEEP, KEEP, UTIME_OMIT, UTIME_OMIT)
    assert all(stat.S_IMODE(fs.getattr("/d")[1]) == 0o755 for fs in fss)


def test_statfs_in_memory_leaves_out_a_down_member_and_sums_the_rest():
    fss = [MemFS(capacity_bytes=(n + 1) << 30, capacity_inodes=1000) for n in range(3)]
    fss[1].populate([("/f", 10_000)])
    c = DirectCluster(3, local=fss)
    got = c.op(0, "statfs")
    assert got[:3] == (4096, 4096, 6 << 18) and got[3] == got[2] - 3 and got[5] == 3000
    c.down.add(2)
    assert c.op(0, "statfs")[2] == 3 << 18


def test_memfs_times_follow_the_simulated_clock_and_fsync_costs_a_flush():
    c = SimCluster(2, network=preset("tcp_loopback"), keep_data=True)
    c.preload_summaries()
    c.env.run(until=1_000_000)  # one simulated second (the environment counts microseconds)
    c.run_op(0, "create", "/t")
    got = c.run_op(1, "getattr", "/t")
    c.env.run()
    assert got[7] == got[8] >= 1_000_000_000
    again = SimCluster(2, network=preset("tcp_loopback"), keep_data=True)
    again.preload_summaries()
    again.env.run(until=1_000_000)
    again.run_op(0, "create", "/t")
    assert again.run_op(1, "getattr", "/t") == got  # same config, same bytes
    fd = c.run_op(0, "open", "/t")
    t0 = c.env.now
    c.run_op(0, "fsync", fd)
    assert c.env.now - t0 >= c.storage[0].c["fsync"]


def test_memfs_writes_truncates_and_entries_move_times_on_the_runtimes_clock():
    c = DirectCluster(2)
    c.op(0, "mkdir", "/m")
    c.advance(1.0)
    home = c.op(1, "create", "/m/f")
    created = c.op(0, "getattr", "/m/f")
    assert created[6:9] == (1_000_000_000,) * 3
    assert c.fs[home].getattr("/m")[7:9] == (1_000_000_000,) * 2  # a new entry: the home's copy changed
    c.advance(1.0)
    fd = c.op(1, "open", "/m/f")
    c.op(1, "write", fd, 0, b"abc")
    c.op(1, "close", fd)
    got = c.op(0, "getattr", "/m/f")
    assert got[6:9] == (1_000_000_000, 2_000_000_000, 2_000_000_000) and got[5] == 3  # atime kept
    c.advance(1.0)
    c.op(0, "truncate", "/m/f", 1)
    assert c.op(1, "getattr", "/m/f")[7:9] == (3_000_000_000,) * 2
    c.advance(1.0)
    c.op(0, "setattr", "/m/f", 0o600, KEEP, KEEP, UTIME_OMIT, UTIME_OMIT)
    assert c.op(1, "getattr", "/m/f")[7:9] == (3_000_000_000, 4_000_000_000)  # chmod: ctime only


def test_huge_sizes_are_efbig_in_memory_not_a_memory_error():
    c = DirectCluster(2)
    c.op(0, "create", "/big")
    for op, args in (("truncate", ("/big", 1 << 40)), ("truncate", ("/big", 1 << 62))):
        with pytest.raises(OSError) as info:
            c.op(1, op, *args)
        assert info.value.errno == errno.EFBIG
    fd = c.op(1, "open", "/big")
    with pytest.raises(OSError) as info:
        c.op(1, "write", fd, (1 << 32) - 1, b"xx")
    assert info.value.errno == errno.EFBIG
    assert c.op(0, "getattr", "/big")[5] == 0  # nothing changed
    sizes_only = MemFS(keep_data=False)
    sizes_only.create("/f")
    sizes_only.truncate("/f", 1 << 62)  # only a number is kept: any off_t is fine
    assert sizes_only.getattr("/f")[5] == 1 << 62


def test_localfs_setattr_never_follows_a_symlink(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    target = tmp_path / "outside"
    target.write_bytes(b"x")
    os.chmod(target, 0o644)
    (root / "link").symlink_to(target)
    with LocalFS(root) as fs:
        # a symlink's chmod is refused (Linux has none), fsync would open it (never)
        for op, args, code in (("setattr", (0o777, KEEP, KEEP, 1, 1), errno.EOPNOTSUPP), ("fsync", (), errno.ELOOP)):
            with pytest.raises(OSError) as info:
                fs.apply(op, "/link", args)
            assert info.value.errno == code, op
        # the link's own attributes and times (issue 22: lstat semantics), never its target's
        fs.setattr("/link", KEEP, KEEP, KEEP, 1, 1)
        a = fs.getattr("/link")
        assert stat.S_ISLNK(a[1]) and a[5] == len(os.fsencode(str(target))) and a[7] == 1
        assert fs.statfs("/link")[7] > 0
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o644 and os.stat(target).st_mtime_ns != 1


# ---------------------------------------------------------------------------- a property
NAMES = ("a", "b", "c")
attr_ops = st.one_of(
    st.tuples(st.just("create"), st.sampled_from(NAMES)),
    st.tuples(st.just("unlink"), st.sampled_from(NAMES)),
    st.tuples(st.just("rename"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
    st.tuples(st.just("chmod"), st.sampled_from(NAMES), st.sampled_from([0o600, 0o640, 0o755])),
    st.tuples(st.just("write"), st.sampled_from(NAMES), st.integers(0, 5)),
    st.tuples(st.just("getattr"), st.sampled_from(NAMES)),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), attr_ops), min_size=1, max_size=40))
def test_inode_numbers_and_modes_follow_files_through_renames(ops):
    """Random creates, unlinks, renames, chmods and writes in one directory on
    four nodes (round-robin homes): getattr from any node shows the mode and
    size last set, a file keeps its inode number through renames, and no two
    live files share one."""
    c = DirectCluster(4, placement="round_robin")
    c.op(0, "mkdir", "/d")
    # name -> [mode, size, ino or None]: one list per file, moved by renames; a KeyError
    # is an operation the federation allowed on a name the model says is absent
    model: dict[str, list] = {}
    for who, (op, name, *rest) in ops:
        path = f"/d/{name}"
        try:
            if op == "create":
                c.op(who, "create", path)
                assert name not in model, f"created {name} twice"
                model[name] = [0o644, 0, None]
            elif op == "unlink":
                c.op(who, "unlink", path)
                del model[name]
            elif op == "rename":
                c.op(who, "rename", path, f"/d/{rest[0]}")
                model[rest[0]] = model.pop(name)
            elif op == "chmod":
                c.op(who, "setattr", path, rest[0], KEEP, KEEP, UTIME_OMIT, UTIME_OMIT)
                model[name][0] = rest[0]
            elif op == "write":
                c.op(who, "truncate", path, rest[0])
                model[name][1] = rest[0]
            else:
                got = c.op(who, "getattr", path)
                want = model[name]
                assert (got[0], got[1], got[5]) == (False, stat.S_IFREG | want[0], want[1]), (name, got)
                if want[2] is None:
                    want[2] = got[9]
                assert got[9] == want[2], f"{name}: ino {got[9]}, was {want[2]}"
        except FileNotFoundError:
            assert name not in model, (op, name)
        except FileExistsError:
            assert op == "create" and name in model, (op, name)
    inos = [c.op(0, "getattr", f"/d/{n}")[9] for n in model]
    assert len(set(inos)) == len(inos) and not {0, ROOT_INO} & set(inos)


def test_a_copy_made_only_to_hold_a_file_does_not_change_a_directorys_attributes():
    """/e is node 2's (mode 0o700); a file placed on node 0 makes node 0 a
    holder too, with its default mode: getattr still answers node 2's, and
    once the file is gone (node 0 prunes its copy) nothing changed either."""
    fss = [MemFS() for _ in range(3)]
    fss[2].mkdir("/e")
    fss[2].setattr("/e", 0o700, KEEP, KEEP, UTIME_OMIT, UTIME_OMIT)
    c = DirectCluster(3, local=fss)  # placement with the manager: a file's home is its manager
    name = next(f"/e/f{i}" for i in range(100) if _mod_n(f"/e/f{i}", 3) == 0)
    assert stat.S_IMODE(c.op(1, "getattr", "/e")[1]) == 0o700
    c.op(1, "create", name)
    assert stat.S_IMODE(fss[0].getattr("/e")[1]) == 0o755  # node 0's own copy, made for the file
    for asker in range(3):
        assert stat.S_IMODE(c.op(asker, "getattr", "/e")[1]) == 0o700
    c.op(1, "setattr", "/e", 0o750, KEEP, KEEP, UTIME_OMIT, UTIME_OMIT)  # every holder, node 0's copy too
    assert stat.S_IMODE(fss[0].getattr("/e")[1]) == 0o750 == stat.S_IMODE(c.op(0, "getattr", "/e")[1])
    c.op(1, "unlink", name)
    assert "/e" not in fss[0].meta and stat.S_IMODE(c.op(0, "getattr", "/e")[1]) == 0o750


def test_a_dead_lowest_holder_costs_one_timeout_then_the_next_answers():
    """Node 0 (the root's lowest holder) is down: the first getattr of / waits
    for it and is answered by node 1; later ones ask node 1 first (node 0 is a
    suspect), until node 0 is heard from again or SUSPECT_S has passed."""
    from fedsim.protocol.fedfs.directory import SUSPECT_S

    c = DirectCluster(3)
    c.fs[1].setattr("/", 0o711, KEEP, KEEP, UTIME_OMIT, UTIME_OMIT)
    assert stat.S_IMODE(c.op(2, "getattr", "/")[1]) == 0o755  # node 0's
    c.down.add(0)
    mark = len(c.trace)
    assert stat.S_IMODE(c.op(2, "getattr", "/")[1]) == 0o711
    assert [d for _, d, _ in c.messages_since(mark)] == [0, 1]
    mark = len(c.trace)
    assert stat.S_IMODE(c.op(2, "getattr", "/")[1]) == 0o711
    assert [d for _, d, _ in c.messages_since(mark)] == [1]  # the suspect is not asked first
    c.down.clear()
    c.advance(SUSPECT_S + 1)
    assert stat.S_IMODE(c.op(2, "getattr", "/")[1]) == 0o755  # back: the rule's answer again
