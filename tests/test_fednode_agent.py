"""The real agent: a federation of local directories, its client API and
command line, failures of peers, and input that must be refused."""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fednode import wire
from fednode.client import Client
from fednode.cluster import AgentGroup, ProcessCluster, local_spec, write_local
from fednode.config import AgentProtocolSpec, Cluster, load_cluster, write_cluster
from fedsim.protocol.hashing import names_managed_by
from fedsim.protocol.messages import PeerUnavailable, pack
from fedsim.schema import ConfigError

FEDNODE = [sys.executable, "-m", "fednode.cli"]


def tree(root: Path) -> set[str]:
    """Every path under ``root``, relative, directories with a trailing '/'."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        rel = Path(dirpath).relative_to(root)
        for d in dirnames:
            out.add(f"{(rel / d).as_posix()}/")
        for f in filenames:
            out.add((rel / f).as_posix())
    return out


def fs_cmd(cluster: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*FEDNODE, "fs", "--cluster", str(cluster), *args], input=stdin, capture_output=True, timeout=60
    )


# ---------------------------------------------------------------------------- the walk-through
def test_local_federation_lists_the_union_and_leaves_no_trace_of_itself(tmp_path):
    """`fednode local` over DIR/n0/a/x and DIR/n1/a/y: `ls /a` lists both; put, get,
    mv, rm and mkdir work across nodes; afterwards the local trees hold exactly
    what the operations made, nothing the federation added for itself."""
    (tmp_path / "n0/a").mkdir(parents=True)
    (tmp_path / "n0/a/x").write_bytes(b"x")
    (tmp_path / "n1/a").mkdir(parents=True)
    (tmp_path / "n1/a/y").write_bytes(b"y")
    local = subprocess.Popen(
        [*FEDNODE, "local", "--nodes", "2", "--base", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    cluster = tmp_path / "cluster.yaml"
    try:
        line = local.stdout.readline().decode()  # printed once every agent is up
        assert "agents serving" in line, line + local.stderr.read().decode()
        assert fs_cmd(cluster, "ls", "/a").stdout.decode().split() == ["x", "y"]
        src = tmp_path / "payload.bin"
        payload = os.urandom(300_000)
        src.write_bytes(payload)
        homes = set()
        for i in range(6):  # enough names that both nodes become homes
            r = fs_cmd(cluster, "put", str(src), f"/a/p{i}")
            assert r.returncode == 0, r.stderr
            homes.add(int(r.stdout.decode().rsplit(" ", 1)[1]))
        assert homes == {0, 1}
        got = tmp_path / "got.bin"
        assert fs_cmd(cluster, "get", "/a/p0", str(got)).returncode == 0
        assert got.read_bytes() == payload
        assert fs_cmd(cluster, "mv", "/a/p1", "/a/q1").returncode == 0
        linked = fs_cmd(cluster, "ln", "/a/p0", "/a/h0")  # a hard link: one more name, on p0's node
        assert linked.returncode == 0, linked.stderr
        assert fs_cmd(cluster, "cat", "/a/h0").stdout == payload
        long = fs_cmd(cluster, "-l", "ls", "/a").stdout.decode().splitlines()
        assert [line.split()[1] for line in long if line.endswith(("p0", "h0"))] == ["2", "2"]
        assert fs_cmd(cluster, "rm", "/a/h0").returncode == 0
        assert fs_cmd(cluster, "cat", "/a/q1").stdout == payload
        for name in ("x", "p2", "p3", "p4", "p5"):
            assert fs_cmd(cluster, "rm", f"/a/{name}").returncode == 0
        assert fs_cmd(cluster, "mkdir", "/m").returncode == 0
        assert fs_cmd(cluster, "put", "-", "/m/s", stdin=b"small").returncode == 0
        assert fs_cmd(cluster, "ls", "/a").stdout.decode().split() == ["p0", "q1", "y"]
        missing = fs_cmd(cluster, "cat", "/a/x")
        assert missing.returncode == 1 and b"No such file" in missing.stderr
    finally:
        local.send_signal(signal.SIGINT)
        assert local.wait(30) == 0
    union = tree(tmp_path / "n0") | tree(tmp_path / "n1")
    assert union == {"a/", "a/y", "a/p0", "a/q1", "m/", "m/s"}
    for n in ("n0", "n1"):  # no empty directory the federation made to hold a file it no longer holds
        t = tree(tmp_path / n)
        for d in (p for p in t if p.endswith("/")):
            assert any(q != d and q.startswith(d) for q in t) or d in ("a/", "m/"), (n, d)


# ---------------------------------------------------------------------------- in-process federations
@pytest.fixture
def group(tmp_path):
    spec = local_spec(
        tmp_path, 3, protocol=AgentProtocolSpec(summary_refresh_s=0.2, vd_max_age_s=0.5, vd_miss_age_s=0.2)
    )
    for n, files in {0: ["/a/x", "/c/f"], 1: ["/a/y"], 2: ["/c/f"]}.items():
        for f in files:
            p = tmp_path / f"n{n}{f}"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(f"{f} on n{n}".encode())
    g = AgentGroup(Cluster(spec), transport="inproc")
    yield g, tmp_path
    g.stop()


def _eventually(check, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except OSError:  # not there yet: ENOENT, or an agent not listening yet
            pass
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)


def test_files_created_outside_the_federation_become_visible(group):
    g, base = group
    assert [n for n, _ in g.op(0, "readdir", "/a")] == ["x", "y"]
    (base / "n2/a").mkdir()
    (base / "n2/a/late").write_bytes(b"late")  # behind the federation's back
    (base / "n1/newdir").mkdir()
    (base / "n1/newdir/f").write_bytes(b"f")
    _eventually(lambda: g.op(1, "stat", "/a/late") == (False, 4))  # a miss re-merges an older VD
    _eventually(lambda: "late" in [n for n, _ in g.op(0, "readdir", "/a")])  # the VD ages out
    _eventually(lambda: ("newdir", True) in g.op(2, "readdir", "/"))
    _eventually(lambda: list(g.op(2, "readdir", "/newdir")) == [("f", False)])  # the summary was refreshed


def test_name_collision_resolves_to_the_lowest_node_and_is_reported(group, caplog):
    g, _ = group
    fd = g.op(1, "open", "/c/f")
    assert g.op(1, "read", fd, 0, 100) == b"/c/f on n0"
    g.op(1, "close", fd)
    merged_at = g.agents[0].node.manager_of("/c")
    st = g.op(merged_at, "status")
    assert st["collisions"] == [["/c/f", 0, [0, 2]]]
    assert "name collision: /c/f exists on nodes [0, 2]" in caplog.text


def test_two_federations_serve_the_same_directories_at_once(tmp_path):
    for n, f in ((0, "a/x"), (1, "a/y")):
        p = tmp_path / f"n{n}" / f
        p.parent.mkdir(parents=True)
        p.write_bytes(b"d")
    fast = AgentProtocolSpec(vd_miss_age_s=0.01)
    one = AgentGroup(Cluster(local_spec(tmp_path, 2, protocol=fast)), transport="tcp")
    two = AgentGroup(Cluster(local_spec(tmp_path, 2, protocol=fast)), transport="tcp")
    try:
        assert list(one.op(0, "readdir", "/a")) == list(two.op(1, "readdir", "/a")) == [("x", False), ("y", False)]
        one.op(0, "create", "/a/z")
        time.sleep(0.05)
        assert two.op(0, "stat", "/a/z") == (False, 0)
    finally:
        one.stop()
        two.stop()


# ---------------------------------------------------------------------------- failures of peers
def test_a_killed_agent_fails_the_operations_that_need_it_and_only_those(tmp_path):
    spec = local_spec(tmp_path, 3, rpc_timeout_ms=800.0, protocol={"summary_refresh_s": 0.0})
    write_cluster(tmp_path / "cluster.yaml", spec)
    h = spec.hashing_fn()
    with ProcessCluster(tmp_path / "cluster.yaml", log_dir=tmp_path / "logs") as pc:
        pc.wait_ready()
        c = Client(pc.cluster, node=0, timeout=30)
        d = next(p for p in names_managed_by(h, 0, "/d", 50))
        c.mkdir(d)
        on1 = names_managed_by(h, 1, f"{d}/f", 1)[0]
        on2 = names_managed_by(h, 2, f"{d}/f", 1)[0]
        c.write_file(on1, b"one")
        c.write_file(on2, b"two")
        pc.kill(2)
        t0 = time.monotonic()
        with pytest.raises(PeerUnavailable) as err:
            c.read_file(on2)
        assert err.value.node == 2 and "unavailable" in str(err.value)
        assert time.monotonic() - t0 < 20  # an answer, not a hang (the client's own limit is 30 s)
        assert c.read_file(on1) == b"one"  # needs nodes 0 and 1 only
        assert c.stat(d).is_dir
        st = Client(pc.cluster, node=1).status()
        assert st["node"] == 1
        with pytest.raises(PeerUnavailable):
            Client(pc.cluster, node=2, timeout=5)
        c.disconnect()


def test_fednode_serve_stops_cleanly_on_sigterm(tmp_path):
    path = write_local(tmp_path, 1)
    p = subprocess.Popen([*FEDNODE, "serve", "--cluster", str(path), "--node", "0"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)  # fmt: skip
    assert p.stdout is not None
    if not p.stdout.readline().startswith(b"fednode-listening"):  # its readiness line
        p.kill()
        raise AssertionError(f"fednode serve did not start: {p.stderr.read().decode()}")  # type: ignore[union-attr]
    assert Client(path, node=0, timeout=30).status()["node"] == 0
    p.send_signal(signal.SIGTERM)
    assert p.wait(20) == 0
    assert b"stopping" in p.stderr.read()


# ---------------------------------------------------------------------------- bad input
@pytest.fixture(scope="module")
def tcp_agent(tmp_path_factory):
    base = tmp_path_factory.mktemp("fed")
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret.txt").write_bytes(b"do not touch")
    spec = local_spec(base, 2, max_message_bytes=1 << 16)
    (base / "n0/d").mkdir()
    (base / "n0/d/file").write_bytes(b"inside")
    os.symlink(outside, base / "n0/d/escape")
    os.symlink(outside / "secret.txt", base / "n0/d/leak")
    write_cluster(base / "cluster.yaml", spec)
    cluster = load_cluster(base / "cluster.yaml")
    g = AgentGroup(cluster, transport="tcp")
    yield g, cluster, outside
    g.stop()
    assert (outside / "secret.txt").read_bytes() == b"do not touch"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def raw_conn(cluster: Cluster, node: int = 0, secret: bytes | None = None, who: int = wire.CLIENT_ID) -> socket.socket:
    spec = cluster.spec.node(node)
    s = socket.create_connection((spec.host, spec.port), timeout=10)
    challenge = _read_frame(s)
    hello, _ = wire.hello(secret or cluster.key_for(who), challenge, who)
    s.sendall(hello)
    _read_frame(s)  # welcome or refusal
    return s


def _read_frame(s: socket.socket) -> bytes:
    head = _exact(s, 4)
    return _exact(s, wire.HEADER.unpack(head)[0])


def _exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def still_serving(cluster: Cluster) -> None:
    with Client(cluster, node=0) as c:
        assert c.read_file("/d/file") == b"inside"


def test_a_client_with_the_wrong_secret_is_refused(tcp_agent):
    g, cluster, _ = tcp_agent
    bad = Cluster(cluster.spec.model_copy(update={"secret": "not-the-secret-0123456789"}), cluster.source)
    with pytest.raises(PeerUnavailable, match=r"refused|secret"):
        Client(bad, node=0)
    before = g.agents[0].transport.refused
    s = raw_conn(cluster, secret=b"wrong-wrong-wrong-wrong")
    with pytest.raises(ConnectionError):  # no request is read from an unauthenticated peer
        s.sendall(wire.encode((wire.CLIENT, 1, "status", (), False)))
        _read_frame(s)
    assert g.agents[0].transport.refused > before
    still_serving(cluster)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=200))
def test_garbage_frames_get_an_error_and_the_agent_keeps_serving(tcp_agent, junk):
    _, cluster, _ = tcp_agent
    s = raw_conn(cluster)
    try:
        s.sendall(wire.frame(junk))
        reply = wire.decode(_read_frame(s), 1 << 16)
        assert reply[0] == wire.ERROR
        s.sendall(wire.encode((wire.CLIENT, 7, "stat", ("/d/file",), False)))  # same connection, still usable
        reply = wire.decode(_read_frame(s), 1 << 16)
        assert reply[:3] == (wire.REPLY, 7, (False, 6))
    finally:
        s.close()


@pytest.mark.parametrize(
    "envelope",
    [
        (99, 1),  # unknown envelope kind
        (wire.CLIENT, 1, "format_disk", (), False),  # unknown operation
        (wire.CLIENT, 1, "stat", (42,), False),  # wrong argument type
        (wire.CLIENT, 1, "read", (3, 0), False),  # wrong arity
        (wire.REQUEST, 1, 1, False, ["Stat", "/d/file"]),  # protocol request from a client
    ],
)
def test_malformed_messages_are_answered_with_an_error(tcp_agent, envelope):
    _, cluster, _ = tcp_agent
    with raw_conn(cluster) as s:
        s.sendall(wire.frame(pack(envelope)))
        reply = wire.decode(_read_frame(s), 1 << 16)
        assert reply[0] == wire.ERROR
        assert reply[2][0] in (errno.EBADMSG, errno.EINVAL)
    still_serving(cluster)


@pytest.mark.parametrize(
    "request_",
    [
        ["Create", "../../etc/passwd", 0, -1, -1, -1],
        ["Read", "/d/../../x", 0, 10],
        ["Stat", "d/file"],
        ["Unlink", "/d/f\x00"],
        ["Read", "/d/file", 0, 1 << 30],
    ],
)
def test_a_peer_cannot_send_traversals_or_huge_reads(tcp_agent, request_):
    _, cluster, _ = tcp_agent
    with raw_conn(cluster, who=1) as s:  # authenticated as member 1
        s.sendall(wire.encode((wire.REQUEST, 5, 1, False, request_)))
        reply = wire.decode(_read_frame(s), 1 << 16)
        assert reply[0] == wire.ERROR and reply[2][0] == errno.EBADMSG
    still_serving(cluster)


def test_truncated_and_oversized_frames_close_only_that_connection(tcp_agent):
    _, cluster, _ = tcp_agent
    s = raw_conn(cluster)
    s.sendall(wire.HEADER.pack(1000) + b"only part")
    s.close()  # truncated: the agent drops the connection
    s = raw_conn(cluster)
    s.sendall(wire.HEADER.pack(1 << 30))  # beyond max_message_bytes
    with pytest.raises(ConnectionError):
        _read_frame(s)
    s.close()
    still_serving(cluster)


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("../../etc/passwd", errno.EINVAL),
        ("/d/../../etc/passwd", errno.EINVAL),
        ("/d/f\x00x", errno.EINVAL),
        ("/etc/passwd", errno.ENOENT),
        ("/d/escape/secret.txt", None),
        ("/d/leak", None),
    ],
)
def test_paths_cannot_reach_outside_the_root(tcp_agent, path, code):
    """'..', NUL and relative names are invalid; an absolute name is the root's;
    a symlink out of the root is never followed (reads, writes, creates).  A
    symlink is a name of its own (issue 22): unlinking it removes the link, never
    its target."""
    _, cluster, outside = tcp_agent
    link = path == "/d/leak"
    with Client(cluster, node=0) as c:
        for attempt in (
            lambda: c.read_file(path),
            lambda: c.write_file(path, b"x", overwrite=True),
            lambda: c.create(path + "/new"),
            lambda: c.readdir(path),
            *(() if link else (lambda: c.unlink(path),)),
        ):
            with pytest.raises(OSError) as err:
                attempt()
            if code is not None:
                assert err.value.errno == code
        with pytest.raises(OSError):
            c.create("/d/escape/new")  # through a symlinked directory
        with pytest.raises(OSError):
            c.mkdir("/d/escape/newdir")
        if link:
            assert c.readlink(path) == str(outside / "secret.txt")
            c.unlink(path)  # the link itself
    assert (outside / "secret.txt").read_bytes() == b"do not touch"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


# ---------------------------------------------------------------------------- the cluster file
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("secret: 0123456789abcdef0123\nnodez: []\n", "nodez: unknown key; allowed keys: secret"),
        ("secret: 0123456789abcdef0123\nnodes: [{id: 0, root: /x}, {id: 0, root: /y, port: 2}]\n", "distinct"),
        ("nodes: [{id: 0, root: /x}]\n", "exactly one of 'secret' and 'secret_file'"),
        ("secret: short\nnodes: [{id: 0, root: /x}]\n", "at least 16"),
        (
            "secret: 0123456789abcdef0123\nprotocol: {placement: nearest}\nnodes: [{id: 0, root: /x}]\n",
            "protocol.placement: unknown placement policy 'nearest'; allowed: with_manager",
        ),
        # files written before the shared protocol schema: the error names the new place
        (
            "secret: 0123456789abcdef0123\nplacement: random\nnodes: [{id: 0, root: /x}]\n",
            "placement: moved to protocol.placement",
        ),
        (
            "secret: 0123456789abcdef0123\nsummary_refresh_s: 2\nnodes: [{id: 0, root: /x}]\n",
            "summary_refresh_s: moved to protocol.summary_refresh_s",
        ),
        ("- just\n- a list\n", "top level must be a mapping"),
    ],
)
def test_bad_cluster_files_are_rejected_with_the_key_named(tmp_path, text, message):
    f = tmp_path / "c.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_cluster(f)
    r = subprocess.run([*FEDNODE, "status", "--cluster", str(f)], capture_output=True, timeout=60)
    assert r.returncode == 2 and message.split(":")[0].encode() in r.stderr


def test_status_reports_unreachable_nodes(tmp_path):
    path = write_local(tmp_path, 2)
    r = subprocess.run([*FEDNODE, "status", "--cluster", str(path)], capture_output=True, timeout=60)
    assert r.returncode == 1
    assert r.stdout.decode().count("UNREACHABLE") == 2


def test_the_demo_runs_a_real_federation_that_sends_the_simulated_messages(tmp_path, capsys):
    from experiments.demo import real_federation

    png = real_federation(tmp_path, quick=True)
    assert png.exists() and png.stat().st_size > 10_000
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.startswith(("create", "stat"))]
    assert rows and all(r[5] == r[6] for r in rows)  # messages/op: real == simulated
    assert all(float(r[3]) > 0 for r in rows)  # each operation's predicted latency beside the measured


def test_a_bench_profile_calibrates_a_simulator_config(tmp_path):
    """`fednode bench` writes a profile; a config naming it gets the measured
    network and local costs, and its own keys still win."""
    from fednode.tools.bench import report
    from fedsim.config import load

    res = {
        "rtt_us": 40.0,
        "rtt_big_us": 40.0 + 2 * 65536 * 0.001,
        "local": {"create": 7.0, "mkdir": 9.0, "rmdir": 8.0, "stat": 2.0, "read": 1.5, "write": 1.8, "unlink": 6.0},
        "cells": {},
    }
    _, _, profile = report(res)
    (tmp_path / "profile.yaml").write_text(yaml.safe_dump(profile))
    (tmp_path / "c.yaml").write_text(
        "study: simulate\ncalibration: profile.yaml\n"
        "network: {preset: tcp_loopback, L_us: 1.0}\nstorage: {costs_us: {create: 50}}\n"
    )
    cfg = load(tmp_path / "c.yaml")
    assert cfg.network.o_us == 10.0 and cfg.network.L_us == 1.0
    assert abs(cfg.network.G_us_per_byte - 0.001) < 1e-9
    assert cfg.storage.costs_us["stat"] == 2.0 and cfg.storage.costs_us["create"] == 50
    (tmp_path / "d.yaml").write_text("study: simulate\ncalibration: missing.yaml\n")
    with pytest.raises(ConfigError, match="fednode bench"):
        load(tmp_path / "d.yaml")


# ---------------------------------------------------------------------------- rename and overwrite
def test_client_rename_and_overwrite_are_protocol_operations(tmp_path):
    """Over TCP: overwrite keeps the file's home and replaces its content in
    place (open + truncate + write); rename replaces a target on another node
    and moves no data, across directories too, and of a directory (EINVAL into
    itself); EBUSY while open."""
    spec = local_spec(tmp_path, 3)
    write_cluster(tmp_path / "cluster.yaml", spec)
    cluster = load_cluster(tmp_path / "cluster.yaml")
    g = AgentGroup(cluster, transport="tcp")
    try:
        with Client(cluster, node=0) as c:
            c.mkdir("/w")
            home = c.write_file("/w/f", b"a long first version")
            assert c.write_file("/w/f", b"short", overwrite=True) == home
            assert c.read_file("/w/f") == b"short"
            with pytest.raises(FileExistsError):
                c.write_file("/w/f", b"x")
            with pytest.raises(IsADirectoryError):
                c.write_file("/w", b"x", overwrite=True)
            homes = {home}
            i = 0
            while len(homes) < 2:  # a target on another node than the source
                target_home = c.write_file(f"/w/t{i}", b"target")
                homes.add(target_home)
                i += 1
            target = f"/w/t{i - 1}"
            fd = c.open("/w/f")
            with pytest.raises(OSError) as busy:
                c.rename("/w/f", target)
            assert busy.value.errno == errno.EBUSY
            c.close(fd)
            value, log = c.traced("rename", "/w/f", target)
            assert value is None and not [m for m in log if m[2] in ("Read", "Write", "Create")]
            assert c.read_file(target) == b"short" and not c.exists("/w/f")
            assert (tmp_path / f"n{home}{target}").read_bytes() == b"short"
            assert not (tmp_path / f"n{target_home}{target}").exists()
            c.mkdir("/v")
            value, log = c.traced("rename", target, "/v/x")  # across directories: no data moves either
            assert value is None and not [m for m in log if m[2] in ("Read", "Write", "Create")]
            assert c.read_file("/v/x") == b"short" and not c.exists(target)
            assert (tmp_path / f"n{home}/v/x").read_bytes() == b"short"  # moved between local directories
            value, log = c.traced("rename", "/v", "/w/v")  # a directory: renamed in place, no data moves
            assert value is None and not [m for m in log if m[2] in ("Read", "Write", "Create")]
            assert c.read_file("/w/v/x") == b"short" and not c.exists("/v")
            assert (tmp_path / f"n{home}/w/v/x").read_bytes() == b"short"
            with pytest.raises(OSError) as inval:
                c.rename("/w", "/w/v/w")
            assert inval.value.errno == errno.EINVAL  # into its own subtree
    finally:
        g.stop()
