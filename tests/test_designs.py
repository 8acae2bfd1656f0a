"""The design seam: a second design, defined and registered here in the test,
runs on the simulator, the in-memory runtime and in-process agents without a
line of any runtime knowing it.

The design is the trivial one of issue 11: every name is managed and held by
node 0 (a central server, NFS-style); every other node forwards its client's
operations there.  It brings its own request type, its own handler and its
own client API.
"""

from __future__ import annotations

import errno
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from fednode.cluster import AgentGroup, local_spec
from fednode.config import Cluster, write_cluster
from fedsim.direct import DirectCluster
from fedsim.network import preset
from fedsim.protocol.designs import DESIGNS, design_class
from fedsim.protocol.effects import Local
from fedsim.protocol.messages import Request, decode_request, encode_request, fs_error, register_request
from fedsim.protocol.names import normalize
from fedsim.protocol.node import Gen, Node, api, handles
from fedsim.protocol.view import GetView
from fedsim.runtime import OpTrace, SimCluster

NAME = "central_test"


@register_request
@dataclass(slots=True, frozen=True)
class CentralOp(Request):
    """One local operation, run at the central node."""

    reply: ClassVar[Any] = list[tuple[str, bool]] | tuple[bool, int] | None  # listdir | stat | the others
    op: str
    path: str


class Central(Node):
    """Node 0 holds and manages every name; the others forward."""

    SERVER = 0
    OPS = ("create", "mkdir", "listdir", "stat", "unlink")  # a closed table: no name from the wire runs code

    def _forward(self, op: str, path: str) -> Gen:
        return (yield from self.call(self.SERVER, CentralOp(op, normalize(path))))

    @api(str)
    def create(self, path: str) -> Gen:
        yield from self._forward("create", path)
        return self.SERVER

    @api(str)
    def mkdir(self, path: str) -> Gen:
        yield from self._forward("mkdir", path)
        return self.SERVER

    @api(str)
    def readdir(self, path: str) -> Gen:
        return sorted((yield from self._forward("listdir", path)))

    @api(str)
    def stat(self, path: str) -> Gen:
        return tuple((yield from self._forward("stat", path)))

    @api(str)
    def unlink(self, path: str) -> Gen:
        yield from self._forward("unlink", path)

    @handles(CentralOp)
    def on_central_op(self, src: int, req: CentralOp) -> Gen:
        if self.id != self.SERVER:
            raise fs_error(errno.EINVAL, req.path, f"node {self.id} is not the central server")
        if req.op not in self.OPS:
            raise fs_error(errno.EINVAL, req.path, f"unknown operation {req.op!r}")
        result = yield Local(req.op, req.path)
        return None if req.op in ("create", "mkdir", "unlink") else result


@pytest.fixture(autouse=True)
def central_registered():
    """Registered for this module's tests only, so other tests see the
    registry as shipped (their error messages list the allowed designs)."""
    DESIGNS.add(NAME, Central)
    yield
    DESIGNS.remove(NAME)


SCRIPT: list[tuple[int, str, tuple[Any, ...]]] = [
    (1, "mkdir", ("/d",)),
    (2, "create", ("/d/f",)),
    (0, "create", ("/d/g",)),
    (1, "readdir", ("/d",)),
    (2, "stat", ("/d/f",)),
    (1, "create", ("/d/f",)),
    (2, "unlink", ("/d/g",)),
    (0, "readdir", ("/d",)),
    (1, "stat", ("/nowhere",)),
]


def canonical(v: Any) -> Any:
    if isinstance(v, BaseException):
        return ("error", getattr(v, "errno", None))
    if isinstance(v, (list, tuple)):
        return tuple(canonical(x) for x in v)
    return v


def expected() -> list[Any]:
    return [
        0, 0, 0, (("f", False), ("g", False)), (False, 0), ("error", errno.EEXIST), None, (("f", False),),
        ("error", errno.ENOENT),
    ]  # fmt: skip


def play(run_one: Any) -> tuple[list[Any], list[list[tuple[int, int, str]]]]:
    results, messages = [], []
    for node, op, args in SCRIPT:
        value, log = run_one(node, op, args)
        results.append(canonical(value))
        messages.append([m for m in log if m[2] != "reply"])
    return results, messages


def remote_requests() -> list[list[tuple[int, int, str]]]:
    """What the design says each operation sends: one CentralOp to node 0, unless at node 0."""
    return [[] if node == 0 else [(node, 0, "CentralOp")] for node, _, _ in SCRIPT]


def test_the_design_is_registered_and_its_interface_is_its_own():
    assert design_class(NAME) is Central
    assert set(Central.API) == {"create", "mkdir", "readdir", "stat", "unlink"}
    # its own handler, and the view every design's node answers (fedsim.protocol.view)
    assert Central.HANDLERS == {CentralOp: "on_central_op", GetView: "on_get_view"}
    assert decode_request(encode_request(CentralOp("stat", "/x"))) == CentralOp("stat", "/x")
    with pytest.raises(ValueError, match=r"unknown architecture 'centrl_test'.*did you mean 'central_test'"):
        design_class("centrl_test")


def test_the_second_design_runs_on_the_simulator():
    c = SimCluster(3, network=preset("tcp_loopback"), design=NAME)
    assert all(type(n) is Central for n in c.nodes)

    def one(node: int, op: str, args: tuple[Any, ...]) -> tuple[Any, list[Any]]:
        trace = OpTrace(log=[])
        try:
            value = c.run_op(node, op, *args, trace=trace)
        except Exception as exc:
            value = exc
        return value, list(trace.log or [])

    results, messages = play(one)
    assert results == expected()
    assert messages == remote_requests()
    assert set(c.fs[0].tree()) == {"/", "/d", "/d/f"}
    assert set(c.fs[1].tree()) == {"/"} == set(c.fs[2].tree())


def test_the_second_design_runs_in_memory():
    c = DirectCluster(3, design=NAME)

    def one(node: int, op: str, args: tuple[Any, ...]) -> tuple[Any, list[Any]]:
        mark = len(c.trace)
        try:
            value = c.op(node, op, *args)
        except Exception as exc:
            value = exc
        return value, c.messages_since(mark)

    results, messages = play(one)
    assert results == expected()
    assert messages == remote_requests()


def test_the_second_design_runs_on_agents():
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        spec = local_spec(base, 3, protocol={"architecture": NAME, "summary_refresh_s": 0.0})
        write_cluster(base / "cluster.yaml", spec)
        cluster = Cluster(spec, base / "cluster.yaml")
        with AgentGroup(cluster, transport="inproc") as g:
            assert all(type(a.node) is Central for a in g.agents.values())
            results, messages = play(lambda node, op, args: g.traced(node, op, *args))
            with pytest.raises(OSError, match="unknown operation 'open'"):
                g.op(1, "open", "/d/f")  # the agent serves the design's API, not FedFS's
        assert results == expected()
        assert messages == remote_requests()
        assert (base / "n0" / "d" / "f").is_file() and not (base / "n1" / "d").exists()


@pytest.mark.parametrize("design", ["nfs", "nfsp", "dnfsp1", "dnfsp2", "mnfs"])
def test_the_shared_node_counts_nothing_of_fedfs_and_each_design_reports_through_counters(design: str) -> None:
    """``NodeStats`` (every design's) has none of FedFS's counts; FedFS's ``FedStats`` has them and
    reports them through ``Node.counters``, the interface studies sum for any design."""
    from fedsim.protocol.fedfs.stats import FedStats
    from fedsim.protocol.node import NodeStats

    other, fed = DirectCluster(3, design=design), DirectCluster(3)
    for c in (other, fed):
        c.op(1, "mkdir", "/d")
        c.op(2, "create", "/d/f")
        c.op(0, "stat", "/d/f")
    assert type(other.nodes[0].stats) is NodeStats and not hasattr(other.nodes[0].stats, "lookup_paths")
    assert not {"lookup_path_1", "dirmerges"} & set(other.nodes[0].counters())
    assert isinstance(fed.nodes[0].stats, FedStats)
    counted = [n.counters() for n in fed.nodes]
    assert sum(sum(k[f"lookup_path_{i}"] for i in range(1, 5)) for k in counted) > 0  # the stat's lookup
    assert all(set(k) >= {"dirmerges", "stale_retries", "block_cache_hits"} for k in counted)
