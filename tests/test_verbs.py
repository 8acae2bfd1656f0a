"""The RDMA (verbs) transport: messages by SEND/RECV under credits, bulk data by
RDMA WRITE or READ, failures of queue pairs and peers, and the fallback to TCP.

Tests that need a verbs device skip where there is none (this machine's
kernel has no RDMA); ``fednode testbed rxe`` runs them inside a Soft-RoCE guest
with devices ``rxe_v0`` and ``rxe_v1`` on the two ends of a veth pair."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fednode import wire
from fednode.client import Client
from fednode.cluster import AgentGroup, ProcessCluster, local_spec
from fednode.config import Cluster, RdmaSpec, write_cluster
from fednode.transport import make_transport
from fedsim.protocol.hashing import names_managed_by
from fedsim.protocol.messages import PeerUnavailable, pack
from fedsim.schema import ConfigError
from tests.conformance import GUEST_RPC_TIMEOUT_MS, RDMA_DEVICES, verbs_missing

MISSING = verbs_missing()
needs_rdma = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")
MIB = 1 << 20


@given(kind=st.integers(0, len(wire.KIND_NAMES) - 1), rid=st.integers(0, 2**64 - 1))
def test_peek_reads_an_envelopes_kind_and_id_without_decoding_it(kind, rid):
    assert wire.peek(pack((kind, rid, b"x" * 100, None))) == (kind, rid)


@pytest.mark.parametrize("junk", [b"", b"\x93", b"\x81\x00\x00", b"\x93\x00\xd0\x01", b"\x93\x00\xcd\x01"])
def test_peek_refuses_what_is_not_an_envelope(junk):
    with pytest.raises(wire.ProtocolError):
        wire.peek(junk)


def test_verbs_without_a_device_is_a_clear_error_and_auto_falls_back_to_tcp(tmp_path):
    """``transport: verbs`` where the device is missing refuses to start and
    says why; ``auto`` serves over TCP and ``status`` says it fell back."""
    spec = local_spec(tmp_path, 2, devices=["nosuch0"], transport="verbs")
    with pytest.raises(ConfigError, match=r"transport 'verbs' is not usable here: .*(nosuch0|pyverbs|RDMA device)"):
        make_transport(Cluster(spec), 0)
    auto = spec.model_copy(update={"transport": "auto"})
    with AgentGroup(Cluster(auto), transport="auto") as g:
        g.op(0, "mkdir", "/d")
        g.op(1, "create", "/d/f")
        assert [n for n, _ in g.op(0, "readdir", "/d")] == ["f"]
        st_ = g.op(1, "status")
        assert st_["transport"] == "tcp" and st_["fallback"]


# ---------------------------------------------------------------------------- with a device
def _spec(base: Path, n: int = 3, **options):
    options.setdefault("protocol", {"vd_max_age_s": 0.5, "vd_miss_age_s": 0.1, "summary_refresh_s": 0.0})
    options.setdefault("rpc_timeout_ms", GUEST_RPC_TIMEOUT_MS)  # the emulated guest is slow, not failing
    return local_spec(base, n, devices=RDMA_DEVICES, transport="verbs", **options)


def _home_file(spec, home: int, size: int) -> tuple[str, bytes]:
    """A file under /big whose name the placement homes at ``home``."""
    path = names_managed_by(spec.hashing_fn(), home, "/big/f", 1)[0]
    return path, bytes(range(256)) * (size // 256)


def _stats(g: AgentGroup, node: int) -> dict[str, int]:
    return dict(g.agents[node].transport.describe()["rdma"])


@pytest.fixture
def verbs_group(tmp_path):
    if MISSING:
        pytest.skip(MISSING)
    g = AgentGroup(Cluster(_spec(tmp_path)), transport="verbs")
    yield g
    g.stop()


@needs_rdma
def test_operations_over_verbs_and_status_names_the_device(verbs_group):
    g = verbs_group
    g.op(0, "mkdir", "/d")
    for n in range(3):
        g.op(n, "create", f"/d/f{n}")
    assert [name for name, _ in g.op(2, "readdir", "/d")] == ["f0", "f1", "f2"]
    st_ = g.op(1, "status")
    assert st_["transport"] == "verbs" and st_["device"] == RDMA_DEVICES[1] and st_["rdma_connections"] >= 1
    assert st_["rdma"]["sends"] > 0 and st_["rdma"]["recvs"] > 0


@needs_rdma
@pytest.mark.parametrize("bulk", ["write", "read"])
def test_a_1mib_read_through_a_non_home_agent_moves_its_data_by_rdma(tmp_path, bulk):
    """The home RDMA-WRITEs the reply into the slot the request named (bulk:
    write), or the requester RDMA-READs it from where the home exposed it
    (bulk: read); either way the bytes are right and did not go by SEND."""
    spec = _spec(tmp_path, 2, rdma=RdmaSpec(bulk=bulk))
    path, data = _home_file(spec, 1, MIB)
    with AgentGroup(Cluster(spec), transport="verbs") as g:
        g.op(0, "mkdir", "/big")
        g.op(1, "create", path)
        fd = g.op(1, "open", path)
        g.op(1, "write", fd, 0, data)
        g.op(1, "close", fd)
        assert (tmp_path / "n1" / path.lstrip("/")).stat().st_size == MIB  # it lives at node 1
        before = {n: _stats(g, n) for n in (0, 1)}
        fd = g.op(0, "open", path)
        got = g.op(0, "read", fd, 0, MIB)
        g.op(0, "close", fd)
        after = {n: _stats(g, n) for n in (0, 1)}
    assert got == data
    if bulk == "write":
        assert after[1]["rdma_writes"] - before[1]["rdma_writes"] >= 1
        assert after[1]["rdma_bytes"] - before[1]["rdma_bytes"] >= MIB
    else:
        assert after[0]["rdma_reads"] - before[0]["rdma_reads"] >= 1
        assert after[0]["rdma_bytes"] - before[0]["rdma_bytes"] >= MIB
    sent = sum(after[n]["sends"] - before[n]["sends"] for n in (0, 1))
    assert sent < 16  # a handful of small messages, not 1 MiB of SENDs


@needs_rdma
def test_a_write_bigger_than_a_slot_is_pulled_by_the_home(tmp_path):
    spec = _spec(tmp_path, 2)
    path, data = _home_file(spec, 1, 3 * MIB)
    with AgentGroup(Cluster(spec), transport="verbs") as g:
        g.op(0, "mkdir", "/big")
        g.op(0, "create", path)
        fd = g.op(0, "open", path)
        before = _stats(g, 1)
        g.op(0, "write", fd, 0, data)
        after = _stats(g, 1)
        g.op(0, "close", fd)
        assert (tmp_path / "n1" / path.lstrip("/")).read_bytes() == data
        fd = g.op(0, "open", path)
        assert g.op(0, "read", fd, 0, 3 * MIB) == data  # bigger than a landing slot: pulled too
    assert after["rdma_reads"] > before["rdma_reads"] and after["registrations"] > before["registrations"]


@needs_rdma
def test_a_burst_waits_for_credits_instead_of_overrunning_the_receiver(tmp_path):
    """300 concurrent round trips against 4 receive buffers: every one completes,
    the sender stalled for credits, no connection failed."""
    spec = _spec(tmp_path, 2, rdma=RdmaSpec(recv_depth=4))
    with AgentGroup(Cluster(spec), transport="verbs") as g:
        a = g.agents[0]

        async def burst() -> None:
            await asyncio.gather(*(a.ping(1, b"p" * (i % 3000)) for i in range(300)))

        g.lt.run(burst())
        assert _stats(g, 0)["stalls"] > 0
        assert g.agents[0].transport.failures == g.agents[1].transport.failures == 0


@needs_rdma
def test_a_queue_pair_in_error_fails_the_pending_call_and_the_agent_reconnects(verbs_group, caplog):
    g = verbs_group
    a = g.agents[0]
    g.op(0, "mkdir", "/q")  # connections made

    async def fault() -> float:
        await a.ping(1)
        conn = a.transport.connection(1)
        assert conn is not None
        call = asyncio.ensure_future(a.ping(1))
        await asyncio.sleep(0)  # the PING is posted
        t0 = time.monotonic()
        conn.force_error()
        with pytest.raises(PeerUnavailable) as err:
            await call
        assert err.value.node == 1
        return time.monotonic() - t0

    took = g.lt.run(fault())
    assert took < a.timeout  # the flushed completions, not the call's timeout
    assert "work request flushed" in caplog.text and "RDMA connection to node 1 failed" in caplog.text
    g.lt.run(a.ping(2))  # the agent still serves its other peers
    g.lt.run(a.ping(1))  # and reconnects to the one that failed
    g.op(1, "create", "/q/after")
    assert [n for n, _ in g.op(0, "readdir", "/q")] == ["after"]


@needs_rdma
def test_a_killed_peer_gives_peer_unavailable_and_the_others_keep_serving(tmp_path):
    spec = _spec(tmp_path, 3, rpc_timeout_ms=3000.0)
    write_cluster(tmp_path / "cluster.yaml", spec)
    h = spec.hashing_fn()
    with ProcessCluster(tmp_path / "cluster.yaml", log_dir=tmp_path / "logs") as pc:
        pc.wait_ready()
        c = Client(pc.cluster, node=0, timeout=60)
        d = names_managed_by(h, 0, "/d", 1)[0]
        c.mkdir(d)
        on1 = names_managed_by(h, 1, f"{d}/f", 1)[0]
        on2 = names_managed_by(h, 2, f"{d}/f", 1)[0]
        c.write_file(on1, b"one")
        c.write_file(on2, b"two")
        assert c.status()["rdma_connections"] >= 2
        pc.kill(2)
        t0 = time.monotonic()
        with pytest.raises(PeerUnavailable) as err:
            c.read_file(on2)
        assert err.value.node == 2
        assert time.monotonic() - t0 < 30  # an answer, not a hang (the client's own limit is 60 s)
        assert c.read_file(on1) == b"one"
        assert c.stat(d).is_dir
        c.disconnect()
