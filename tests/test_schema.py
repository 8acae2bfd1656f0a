"""The one protocol schema (``fedsim.schema.ProtocolSpec``): the ``protocol:``
section of a simulator config and of a cluster file is the same model, with
the same spelling and checks; only the defaults differ (closed world in the
simulator, open world in the agent)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from experiments.common import build_cluster, run_workload
from fednode.cluster import write_local
from fednode.config import AgentProtocolSpec, load_cluster
from fedsim.cli import main
from fedsim.config import check_key, load, validate
from fedsim.protocol.config import ProtocolConfig
from fedsim.protocol.designs import build_nodes, design_class
from fedsim.protocol.policies.homes import HOMES
from fedsim.schema import PROTOCOL_KEYS, SHAPE_KEYS, ConfigError, ProtocolSpec

SECRET = "0123456789abcdef0123"
NODES = "nodes: [{id: 0, root: /x}, {id: 1, root: /y, port: 7401}]\n"
#: Every key of the section, none at its default in either world.
FULL = {
    "architecture": "fedfs", "hashing": "ring", "vnodes": 16, "placement": "round_robin", "dt_entries": 64,
    "dt_coherence": "dnfsp2",
    "vd_entries": 32, "summary_bits": 2048, "summary_hashes": 3, "summary_layout": "per_hash",
    "async_dir_updates": True, "vd_max_age_s": 3.0, "vd_miss_age_s": 0.5, "summary_refresh_s": 2.0,
    "summary_retry_s": 0.1, "summary_retry_max_s": 1.0, "migration": "load_based", "migration_period_s": 2.0,
    "migration_decay": 0.25, "migration_fanout": 3, "migration_threshold": 0.5, "migration_hysteresis": 2,
    "migration_share": 0.75, "migration_min_hits": 2.0, "migration_batch": 2, "migration_chunk": 4096,
    "block_cache_blocks": 128, "block_size": 8192, "leave_files": "migrate",
    "replicas": 2, "heartbeat_s": 0.5, "heartbeat_misses": 4, "rename": "redistribute", "redistribute_limit": 2,
    "redistribute_hold": 0.5, "devices": True, "security_xattrs": True,
}  # fmt: skip


def _sim(tmp_path: Path, protocol: dict) -> Path:
    p = tmp_path / "sim.yaml"
    p.write_text(yaml.safe_dump({"study": "simulate", "protocol": protocol}))
    return p


def _cluster(tmp_path: Path, protocol: dict) -> Path:
    p = tmp_path / "cluster.yaml"
    p.write_text(f"secret: {SECRET}\n" + yaml.safe_dump({"protocol": protocol}) + NODES)
    return p


def test_the_schema_has_every_protocol_knob_and_the_agent_changes_only_defaults():
    """A knob added to ProtocolConfig must be added here too; the agent's
    section is the same model (keys, types, constraints), other defaults."""
    assert set(PROTOCOL_KEYS) == {f.name for f in dataclasses.fields(ProtocolConfig)}
    assert list(ProtocolSpec.model_fields) == [*SHAPE_KEYS, *PROTOCOL_KEYS]
    assert issubclass(AgentProtocolSpec, ProtocolSpec)
    for name, f in ProtocolSpec.model_fields.items():
        g = AgentProtocolSpec.model_fields[name]
        assert (g.annotation, g.metadata) == (f.annotation, f.metadata), name
    changed = {k for k in ProtocolSpec.model_fields if ProtocolSpec.model_fields[k].default !=
               AgentProtocolSpec.model_fields[k].default}  # fmt: skip
    assert changed == {"vd_max_age_s", "vd_miss_age_s", "summary_refresh_s"}
    assert ProtocolSpec().config() == ProtocolConfig()  # the simulator: the papers' closed world
    agent = AgentProtocolSpec().config()
    assert agent.aging and agent.summary_refresh_s == 5.0


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("placement", "nearest", "unknown placement policy 'nearest'; allowed: with_manager, round_robin, random"),
        ("hashing", "md5", "unknown hashing 'md5'; allowed: mod_n, ring"),
        ("architecture", "ursa", "unknown architecture 'ursa'; allowed: "),  # (in the order the designs were imported)
        ("summary_layout", "sharded", "unknown summary layout 'sharded'; allowed: shared, per_hash, partitioned"),
        ("migration", "greedy", "unknown migration policy 'greedy'; allowed: none, load_based, co_locate"),
        ("dt_coherence", "dnfsp3", "unknown dt coherence policy 'dnfsp3'; allowed: lazy, dnfsp1, dnfsp2"),
    ],
)
def test_both_files_reject_an_unknown_name_with_the_registrys_allowed_list(tmp_path, key, value, allowed):
    sim, cluster = _sim(tmp_path, {key: value}), _cluster(tmp_path, {key: value})
    with pytest.raises(ConfigError) as s:
        load(sim)
    with pytest.raises(ConfigError) as c:
        load_cluster(cluster)
    for err, path in ((s, sim), (c, cluster)):
        assert f"{path}: protocol.{key}: {allowed}" in str(err.value), str(err.value)


def test_equivalent_yaml_gives_the_same_protocol_in_both_files(tmp_path):
    sim = load(_sim(tmp_path, FULL))
    cluster = load_cluster(_cluster(tmp_path, FULL)).spec
    fed = cluster.federation()
    assert sim.protocol.config() == fed.protocol == ProtocolConfig(**{k: FULL[k] for k in PROTOCOL_KEYS})
    c = build_cluster(sim.model_copy(update={"cluster": sim.cluster.model_copy(update={"nodes": 2})}))
    assert c.spec.protocol == fed.protocol
    assert (c.spec.design, c.spec.hashing, c.spec.vnodes, c.spec.placement) == (
        fed.design, fed.hashing, fed.vnodes, fed.placement)  # fmt: skip


def test_a_deployed_cluster_files_protocol_section_simulates_as_it_is(tmp_path):
    """``fednode local``/``init`` write the whole section; pasted into a
    simulator config it gives the agents' very protocol (ageing and refresh on)."""
    path = write_local(tmp_path / "fed", 2, protocol={"placement": "random"})
    deployed = yaml.safe_load(path.read_text())["protocol"]
    cfg = load(_sim(tmp_path, deployed))
    assert cfg.protocol.config() == load_cluster(path).spec.federation().protocol
    assert cfg.protocol.config().aging and cfg.protocol.summary_refresh_s == 5.0


@pytest.fixture
def placement_registered_now() -> Iterator[str]:
    """A placement policy a plugin might register: every new name on node 0."""

    class NodeZero:
        name = "node_zero"

        def choose_home(self, path, is_dir, requester, manager, members):
            return members[0]

    HOMES.add("node_zero", lambda node_id, seed: NodeZero())
    try:
        yield "node_zero"
    finally:
        HOMES._items.pop("node_zero")  # leave the registry as other tests expect it


def test_a_placement_registered_at_test_time_is_accepted_by_both_schemas(tmp_path, placement_registered_now):
    name = placement_registered_now
    cfg = load(_sim(tmp_path, {"placement": name}))
    assert cfg.protocol.placement == name
    spec = load_cluster(_cluster(tmp_path, {"placement": name})).spec
    assert {n.placement.name for n in build_nodes(spec.federation())} == {name}
    small = cfg.model_copy(update={"workload": cfg.workload.model_copy(update={"files": 200, "dirs": 10, "ops": 100})})
    out = run_workload(small)  # and the simulator runs it
    assert out.metrics["errors"] == 0 and out.cluster.fs[0].files
    assert all(not fs.files for fs in out.cluster.fs[1:])


def test_the_simulator_runs_with_the_agents_ageing_and_refresh_on(tmp_path, monkeypatch):
    """The agent's knobs are not just accepted: the periodic refresh runs in
    simulated time and VD ageing forces re-merges; and the same config and
    seed still give the same bytes."""
    refreshes: Counter[int] = Counter()
    cls = design_class("fedfs")
    regenerate = cls.regenerate_summary

    def counted(self, *args, **kw):
        refreshes[self.id] += 1
        return regenerate(self, *args, **kw)

    monkeypatch.setattr(cls, "regenerate_summary", counted)
    base = {"study": "simulate", "cluster": {"nodes": 4},
            "workload": {"files": 400, "dirs": 20, "ops": 400, "rate": 500}}  # fmt: skip
    closed = run_workload(validate(base))
    closed_refreshes = sum(refreshes.values())
    refreshes.clear()
    knobs = {"summary_refresh_s": 0.1, "vd_max_age_s": 0.2, "vd_miss_age_s": 0.05}
    aged = run_workload(validate({**base, "protocol": knobs}))
    sim_s = aged.metrics["sim_seconds"]
    assert closed_refreshes == 4  # the preload only
    assert min(refreshes.values()) >= 1 + int(sim_s / 0.1) - 1  # preload + one per period
    assert aged.metrics["dirmerges"] > closed.metrics["dirmerges"]
    assert aged.metrics["errors"] == 0
    p = tmp_path / "aged.yaml"
    p.write_text(yaml.safe_dump({**base, "protocol": knobs}))
    outs = []
    for i in range(2):
        assert main(["run", str(p), "--out", str(tmp_path / f"r{i}")]) == 0
        outs.append((tmp_path / f"r{i}" / "results.csv").read_bytes())
    assert outs[0] == outs[1]


def test_old_keys_are_errors_that_name_the_new_place(tmp_path):
    old_sim = tmp_path / "old.yaml"
    old_sim.write_text("study: simulate\ncluster: {nodes: 4, hashing: ring}\nsummary: {layout: per_hash}\n")
    with pytest.raises(ConfigError) as e:
        load(old_sim)
    msg = str(e.value)
    assert "cluster.hashing: moved to protocol.hashing" in msg
    assert "summary: this section moved: summary.bits -> protocol.summary_bits" in msg
    with pytest.raises(ConfigError, match=r"--set: cluster.placement: moved to protocol.placement"):
        check_key("cluster.placement", "--set")
    old_cluster = tmp_path / "cluster.yaml"
    old_cluster.write_text(f"secret: {SECRET}\nplacement: random\nhashing: ring\nsummary_refresh_s: 1\n" + NODES)
    with pytest.raises(ConfigError) as e:
        load_cluster(old_cluster)
    msg = str(e.value)
    for key in ("placement", "hashing", "summary_refresh_s"):
        assert f"{old_cluster}: {key}: moved to protocol.{key}" in msg


@pytest.mark.parametrize("key", ["devices", "security_xattrs"])
def test_the_host_hazards_are_off_unless_a_file_says_true_and_a_non_boolean_is_refused(tmp_path, key):
    """``protocol.devices`` and ``protocol.security_xattrs`` (issue 22): off in both worlds
    by default, on when a file says so, and anything but a boolean an error naming the key."""
    assert getattr(ProtocolSpec().config(), key) is False
    assert getattr(AgentProtocolSpec().config(), key) is False
    assert getattr(load_cluster(_cluster(tmp_path, {key: True})).spec.federation().protocol, key) is True
    assert getattr(load(_sim(tmp_path, {key: True})).protocol.config(), key) is True
    for loader, path in ((load, _sim(tmp_path, {key: "sometimes"})), (load_cluster, _cluster(tmp_path, {key: [1]}))):
        with pytest.raises(ConfigError) as err:
            loader(path)
        assert f"protocol.{key}" in str(err.value) and "bool" in str(err.value), str(err.value)
