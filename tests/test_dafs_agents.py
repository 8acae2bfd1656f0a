"""Federated DAFS's mechanisms in a local federation of real agents (TCP):
the remote block cache as ``fednode status`` counts it, write-through and
invalidation, and client-side routing by the federation's hash."""

from __future__ import annotations

from pathlib import Path

from fednode.cli import format_status
from fednode.client import Client, ClientPool
from fednode.cluster import AgentGroup, local_spec
from fednode.config import load_cluster, write_cluster
from fednode.localfs import LocalFS
from fedsim.protocol.hashing import names_managed_by


def _cluster(tmp_path: Path, n: int, **protocol: object):
    spec = local_spec(tmp_path, n, protocol={"placement": "with_manager", **protocol})
    write_cluster(tmp_path / "cluster.yaml", spec)
    return load_cluster(tmp_path / "cluster.yaml")


def test_block_cache_in_agents_second_read_write_through_and_invalidation(tmp_path: Path) -> None:
    cluster = _cluster(tmp_path, 3, block_cache_blocks=64, block_size=4096)
    home = 0
    path = names_managed_by(cluster.spec.hashing_fn(), home, "/f")[0]
    data = bytes(range(256)) * 40  # 10,240 B: three blocks, the last short
    g = AgentGroup(cluster, transport="tcp")
    try:
        with Client(cluster, node=home) as at_home, Client(cluster, node=1) as reader, \
                Client(cluster, node=2) as writer:  # fmt: skip
            assert at_home.write_file(path, data) == home
            # a read through a non-home server: the first from the home, the second from its cache
            fd = reader.open(path)
            assert reader.read(fd, len(data)) == data
            st = reader.status()["block_cache"]
            assert (st["hits"], st["misses"], st["blocks"]) == (0, 1, 3)
            assert reader.read(fd, 100, 5000) == data[5000:5100]
            st = reader.status()["block_cache"]
            assert (st["hits"], st["misses"]) == (1, 1)
            # a write through another server is at the home when it returns (write-through) ...
            wfd = writer.open(path)
            assert writer.write(wfd, b"NEW", 5000) == 3
            home_fs = LocalFS(cluster.root_of(home))
            assert home_fs.read(path, 5000, 3) == b"NEW"
            # ... and the reader's blocks were invalidated before it returned
            st = reader.status()["block_cache"]
            assert (st["invalidations"], st["blocks"]) == (1, 0)
            assert reader.read(fd, 5, 4998) == data[4998:5000] + b"NEW"
            # a write at the home invalidates the cached blocks elsewhere too
            hfd = at_home.open(path)
            at_home.write(hfd, b"HOME", 0)
            st = reader.status()["block_cache"]
            assert (st["invalidations"], st["blocks"]) == (2, 0)
            assert reader.read(fd, 4, 0) == b"HOME"
            st = reader.status()["block_cache"]
            assert (st["hits"], st["misses"]) == (1, 3)
            assert at_home.status()["cached_elsewhere"] == 1
            rows = [{"node": n, "reachable": True, **c.status()} for n, c in ((1, reader),)]
            assert "node 1: block cache 1 hits, 3 misses" in format_status(rows)
            for c, f in ((reader, fd), (writer, wfd), (at_home, hfd)):
                c.close(f)
    finally:
        g.stop()


def test_client_pool_routes_by_the_federations_hash(tmp_path: Path) -> None:
    """route hash: every operation reaches the path's manager, where with_manager
    placement put the file, so its open and read send no message between servers;
    round_robin spreads a client's operations over every server in turn."""
    cluster = _cluster(tmp_path, 3)
    g = AgentGroup(cluster, transport="tcp")
    try:
        with ClientPool(cluster, route="hash") as pool:
            h = cluster.spec.hashing_fn()
            for i in range(6):
                p = f"/g{i}"
                c = pool.for_path(p)
                assert pool.entry(p) == h.manager_of(p)
                assert c.write_file(p, b"x" * 10) == h.manager_of(p)  # created where the client sent it
                _, log = c.traced("stat", p)
                assert log == []  # answered by the server it reached: a local access
        with ClientPool(cluster, route="round_robin", client=1) as pool:
            assert [pool.entry("/g0") for _ in range(4)] == [1, 2, 0, 1]
    finally:
        g.stop()


def test_a_cluster_file_whose_messages_cannot_carry_a_cache_fetch_is_refused(tmp_path: Path) -> None:
    import pytest
    import yaml

    from fedsim.schema import ConfigError

    write_cluster(tmp_path / "cluster.yaml", local_spec(tmp_path, 2, protocol={"block_cache_blocks": 8}))
    raw = yaml.safe_load((tmp_path / "cluster.yaml").read_text())
    raw["max_message_bytes"] = 256 << 10
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match="block_cache_blocks needs max_message_bytes"):
        load_cluster(tmp_path / "cluster.yaml")
    raw["protocol"]["block_cache_blocks"] = 0  # without the cache the same messages are fine
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(raw))
    assert load_cluster(tmp_path / "cluster.yaml").spec.max_message_bytes == 256 << 10
