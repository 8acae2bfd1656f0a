"""NFS and NFSp (issue 25) as designs: what each promises about where its
messages go and where its data lives, checked in the simulator and in the
in-memory runtime, and a simulated PostMark on each.  That every runtime
gives the same outcomes, messages and trees is the conformance suite's
(``tests/conformance.py``: the "nfs:" and "nfsp:" scenarios)."""

from __future__ import annotations

import errno

import pytest

from experiments.common import run_postmark
from experiments.dafs import variant
from fedsim.direct import DirectCluster
from fedsim.protocol.designs import design_class
from fedsim.protocol.nfs import NfsNode
from fedsim.protocol.nfs.messages import NfsRead
from fedsim.protocol.nfsp import NfspNode
from fedsim.protocol.nfsp.messages import IodWrite
from tests.conformance import SCENARIOS, run_sim
from tests.test_machine import postmark_config

POSTMARK_OPS = {"mkdir", "rmdir", "create", "open", "read", "write", "close", "unlink"}
SFS97_OPS = {"stat", "open", "read", "write", "close", "create", "unlink"}
MOUNT_OPS = {"getattr", "readdir_attrs", "create_open", "setattr", "statfs", "fsync", "rename", "truncate"}


def scenario(prefix: str):
    return next(sc for sc in SCENARIOS if sc.name.startswith(prefix))


@pytest.mark.parametrize(("name", "cls"), [("nfs", NfsNode), ("nfsp", NfspNode)])
def test_registered_with_the_client_api_the_drivers_and_the_mount_call(name, cls):
    assert design_class(name) is cls
    assert POSTMARK_OPS | SFS97_OPS | MOUNT_OPS <= set(cls.API)
    assert "getxattr" not in cls.API  # not offered: the agent answers "unknown operation"


def test_nfs_sends_every_operation_to_the_server_and_nothing_else():
    sc = scenario("nfs:")
    out = run_sim(sc)
    for i, (node, op, _) in enumerate(sc.ops):
        sent = out.requests(i)
        if node == 0 or op == "close":  # at the server: local calls; close: stateless, nothing owed
            assert sent == [], (i, op, sent)
        elif op != "close" and not (isinstance(out.results[i], tuple) and out.results[i][:1] == ("error",)
                                    and out.results[i][1] == errno.EBADF):  # fmt: skip
            assert len(sent) == 1 and sent[0][:2] == (node, 0) and sent[0][2].startswith("Nfs"), (i, op, sent)
    assert set(out.trees[1]) == {"/"} == set(out.trees[2])  # nothing lives anywhere but at the server


def test_nfsp_data_goes_to_the_iods_and_metadata_to_the_meta_server():
    sc = scenario("nfsp:")
    out = run_sim(sc)
    meta = NfspNode(0, _spec())
    kinds = set()
    for i, (node, op, args) in enumerate(sc.ops):
        for src, dst, kind in out.requests(i):
            kinds.add(kind)
            if kind.startswith("Iod"):
                assert dst in (1, 2), (i, op, kind)  # data never at the meta-server
                if op in ("read", "write", "truncate"):
                    path = args[0] if op == "truncate" else None
                    if path is not None:
                        assert dst == meta.iod_of(path)
            else:
                assert (src, dst) == (node, 0), (i, op, kind)  # the client's request: at the meta-server
        if op == "read" and node not in (0, meta.iod_of("/d/k")) and i and sc.ops[i - 1][2] == ("/d/k",):
            # a read the meta-server located: the data comes from the daemon to the client, not via the meta-server
            assert out.requests(i) == [(node, 0, "NfspRead"), (node, meta.iod_of("/d/k"), "IodRead")]
    assert {"NfsWrite", "IodWrite", "NfspRead", "IodRead", "IodRename", "IodRemove"} <= kinds


def _spec():
    from fedsim.protocol.config import FederationSpec

    return FederationSpec(range(3), design="nfsp")


def test_nfsp_keeps_data_at_the_daemon_and_a_sized_shadow_at_the_meta_server():
    c = DirectCluster(3, design="nfsp")
    c.op(1, "mkdir", "/d")
    c.op(1, "create", "/d/f")
    fd = c.op(1, "open", "/d/f")
    c.op(1, "write", fd, 4, b"data")
    iod = c.nodes[0].iod_of("/d/f")
    assert c.fs[iod].tree()["/d/f"] == b"\0\0\0\0data"
    assert c.fs[0].tree()["/d/f"] == bytes(8)  # the shadow: the file's size, none of its data
    assert c.op(2, "stat", "/d/f") == (False, 8)
    c.op(2, "unlink", "/d/f")
    assert set(c.fs[iod].tree()) == {"/"}  # the daemon's copy of /d pruned with its last file


def test_requests_for_a_role_a_node_does_not_have_are_refused():
    c = DirectCluster(3, design="nfsp")
    with pytest.raises(OSError) as e1:
        c.run(1, c.nodes[1].handle(2, NfsRead("/x", 0, 1)))
    assert e1.value.errno == errno.EINVAL and "not the NFS server" in str(e1.value)
    with pytest.raises(OSError) as e2:
        c.run(0, c.nodes[0].handle(2, IodWrite("/x", 0, b"x")))
    assert e2.value.errno == errno.EINVAL and "no I/O daemon" in str(e2.value)


@pytest.mark.parametrize("design", ["nfs", "nfsp"])
def test_a_simulated_postmark_runs_on_the_design(design):
    out = run_postmark(variant(postmark_config(4), protocol__architecture=design))
    m, c = out.metrics, out.cluster
    assert m["errors"] == 0 and m["postmark_tps"] > 0
    assert m["design.server_requests"] > 0
    # every node's peers' requests: all at the server (NFS) or at the meta-server and the daemons (NFSp)
    served = [n.stats.requests_served for n in c.nodes]
    if design == "nfs":
        assert served[0] > 0 and served[1:] == [0, 0, 0]
    else:
        assert served[0] > 0 and all(s > 0 for s in served[1:]) and m["design.iod_requests"] > 0
        assert served[0] > max(served[1:])  # every operation passes the meta-server


@pytest.mark.parametrize("design", ["nfs", "nfsp", "dnfsp1", "mnfs"])
def test_designs_whose_mknod_names_no_caller_refuse_devices(design):
    """Only fedfs's mknod carries a caller uid (``fedfs/links.py``): the others make fifos
    and refuse a device with EPERM, even where the config allows devices, leaving nothing."""
    import stat

    from fedsim.protocol.config import ProtocolConfig

    c = DirectCluster(3, design=design, config=ProtocolConfig(devices=True))
    c.op(0, "mknod", "/p", stat.S_IFIFO | 0o644, 0)
    with pytest.raises(OSError) as e:
        c.op(1, "mknod", "/c", stat.S_IFCHR | 0o600, 0x0103)
    assert e.value.errno == errno.EPERM and "no caller uid" in str(e.value)
    assert not any("/c" in fs.tree() for fs in c.fs)
