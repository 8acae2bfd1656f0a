"""Configs: bad ones are rejected naming the key; every shipped config runs
and gives byte-identical results for the same seed."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import experiments.dt_coherence  # noqa: F401  (registers the study where the installed entry points predate it)
from fedsim.cli import main
from fedsim.config import load
from fedsim.schema import ConfigError

ROOT = Path(__file__).resolve().parents[1]
# Study configs; sweep files (configs/sweeps) are checked by tests/test_sweep.py.
#: every simulation config; the validation configs measure real agents (never the same bytes twice:
#: tests/test_validation.py checks them)
CONFIGS = sorted(
    p for p in (ROOT / "configs").rglob("*.yaml") if not {"sweeps", "validation"} & set(p.relative_to(ROOT).parts)
)

# Shrink each study so the whole set runs in seconds; the shipped sizes are the papers'.
SMALL = {
    "bloom_summary": ["params.bits=16384", "params.valid=3000", "params.invalid=2000"],
    "membership": ["params.nodes=[8,16]", "params.names_per_node=4"],
    "availability": ["params.nodes=[6]", "params.duration_s=1.0", "params.settle_s=0.3"],
    "lookup_paths": [
        "workload.files=600",
        "workload.dirs=30",
        "workload.ops=400",
        "params.dt_entries=[16,1024]",
        "params.locality=[0.0,0.9]",
    ],
    "scale": ["cluster.nodes=64", "workload.files=1000", "workload.dirs=40", "workload.ops=600"],
    "simulate": ["workload.files=500", "workload.dirs=20", "workload.ops=300"],
    "migration": [
        "params.nodes=[8]",
        "params.windows=2",
        "workload.files=300",
        "workload.dirs=10",
        "workload.ops=1500",
        "protocol.migration_period_s=0.02",
    ],
    "table1": ["workload.postmark.transactions=500", "params.trials=200"],
    "designs_postmark": ["workload.postmark.transactions=40", "workload.postmark.number=20", "params.servers=[1,2]",
                         "params.clients_per_server=1"],
    "dnfsp_fig3": ["params.mb_per_client=0.25", "params.files=[1,8]"],
    "dt_coherence": ["cluster.nodes=4", "workload.files=200", "workload.dirs=10", "workload.ops=300"],
    "mnfs_table3": ["storage.cache_mb=0.25"],
    "dafs_fig6": [
        "workload.postmark.transactions=60",
        "workload.postmark.number=40",
        "params.servers=[1,2]",
        "params.sizes=[2048]",
        "params.clients_per_server=[1,2]",
        "params.scale_servers=[4]",
        "params.scale_clients_per_server=1",
        "params.scale_transactions=20",
    ],
    "dafs_fig7": [
        "workload.postmark.transactions=80",
        "workload.postmark.number=40",
        "params.servers=[2]",
        "params.clients_per_server=1",
    ],
    "dafs_fig8": [
        "workload.postmark.transactions=100",
        "workload.postmark.number=30",
        "params.servers=2",
        "params.clients_per_server=1",
        "params.cache_blocks=[0,64]",
    ],
    "table2": [],
    # (designs_scale.yaml and designs_scale_large.yaml: the same study)
    "designs_scale": ["workload.files=150", "workload.dirs=8", "params.ops_per_client=20",
                      "workload.postmark.number=15", "workload.postmark.transactions=30", "params.servers=[1,2]",
                      "params.clients_per_server=[1,2]", "params.profiles={via: {network: {preset: via_clan}}}",
                      "params.designs={fedfs: {route: hash}, nfs: {}}"],
    "ursa_table3": [],
    "ursa_fig4": ["params.servers=[1,2]", "params.ops_per_server=200", "params.warmup_per_server=50",
                  "params.files_per_server=100", "params.dirs_per_server=4", "params.clients_per_server=4"],
    # (ursa_fig5.yaml and ursa_fig5_large.yaml: the same study)
    "ursa_fig5": ["params.shares_pct=[0,5]", "params.scale_servers=[]", "params.bursts=[0.7]",
                  "params.ops_per_server=200", "params.warmup_per_server=50", "params.files_per_server=100",
                  "params.dirs_per_server=4", "params.clients_per_server=4"],
    "table3": ["workload.files=500", "workload.dirs=20", "workload.ops=300", "workload.warmup_ops=50"],
}


def _write(tmp_path: Path, raw: dict) -> Path:
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(raw))
    return p


@pytest.mark.parametrize(
    ("raw", "key", "words"),
    [
        ({"study": "simulate", "cluster": {"nodez": 4}}, "cluster.nodez", "did you mean 'nodes'"),
        ({"study": "simulate", "cluster": {"nodes": "four"}}, "cluster.nodes", "integer"),
        (
            {"study": "simulate", "protocol": {"placement": "nearest"}},
            "protocol.placement",
            "unknown placement policy 'nearest'; allowed: with_manager, round_robin, random, with_requester",
        ),
        ({"study": "simulate", "protocol": {"hashing": "md5"}}, "protocol.hashing", "allowed: mod_n, ring"),
        (
            {"study": "simulate", "protocol": {"architecture": "ursa_minor"}},
            "protocol.architecture",
            "unknown architecture 'ursa_minor'; allowed: ",
        ),
        (
            {"study": "simulate", "protocol": {"summary_layout": "per-hash"}},
            "protocol.summary_layout",
            "did you mean 'per_hash'",
        ),
        ({"study": "simulate", "workload": {"files": -5}}, "workload.files", "greater than 0"),
        ({"study": "simulate", "protocol": {"summary_bits": 0}}, "protocol.summary_bits", "greater than 0"),
        (
            {"study": "simulate", "cluster": {"placement": "round_robin"}},
            "cluster.placement",
            "moved to protocol.placement",
        ),
        ({"study": "simulate", "summary": {"bits": 64}}, "summary", "summary.bits -> protocol.summary_bits"),
        ({"study": "simulate", "storage": {"cache_mb": -1}}, "storage.cache_mb", "greater than or equal to 0"),
        ({"study": "simulate", "network": {"preset": "ethernet"}}, "network.preset", "'via_clan'"),
        ({"study": "simulate", "workload": {"mix": {"readdir": 3}}}, "workload.mix.readdir", "'lookup'"),
        ({"cluster": {"nodes": 4}}, "study", "Field required"),
    ],
)
def test_bad_config_is_rejected_with_file_key_and_allowed_values(tmp_path, raw, key, words):
    p = _write(tmp_path, raw)
    with pytest.raises(ConfigError) as ei:
        load(p)
    msg = str(ei.value)
    assert str(p) in msg and f"{key}:" in msg and words in msg, msg


def test_unknown_study_and_unknown_param_are_rejected_by_the_cli(tmp_path, capsys):
    assert main(["run", str(_write(tmp_path, {"study": "tabel2"}))]) == 2
    assert "unknown study 'tabel2'" in capsys.readouterr().err
    assert main(["run", str(_write(tmp_path, {"study": "scale", "params": {"vd_entris": [1]}}))]) == 2
    err = capsys.readouterr().err
    assert "params.vd_entris: unknown key" in err and "did you mean 'vd_entries'" in err


def test_malformed_yaml_and_missing_file_are_clear_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("study: [simulate\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load(bad)
    with pytest.raises(ConfigError, match="cannot read the config"):
        load(tmp_path / "missing.yaml")
    bad.write_text("- a list\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load(bad)


def test_set_overrides_apply_and_are_validated(tmp_path):
    p = _write(tmp_path, {"study": "simulate"})
    assert load(p, ["cluster.nodes=9", "workload.locality=0.5"]).cluster.nodes == 9
    with pytest.raises(ConfigError, match=r"cluster\.nodes"):
        load(p, ["cluster.nodes=-2"])
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        load(p, ["cluster.nodes"])


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_every_shipped_config_runs_and_the_same_seed_gives_identical_files(config, tmp_path):
    study = yaml.safe_load(config.read_text())["study"]
    sets = [a for s in SMALL[study] for a in ("--set", s)]
    outs = []
    for i in range(2):
        out = tmp_path / f"run{i}"
        assert main(["run", str(config), "--out", str(out), *sets]) == 0
        outs.append((out / "results.csv").read_bytes())
    assert outs[0] == outs[1]
    assert outs[0].count(b"\n") > 2


def test_a_different_seed_gives_a_different_simulation(tmp_path):
    p = _write(tmp_path, {"study": "simulate", "workload": {"files": 300, "dirs": 10, "ops": 200}})
    res = []
    for seed in (1, 2):
        out = tmp_path / f"s{seed}"
        assert main(["run", str(p), "--seed", str(seed), "--out", str(out)]) == 0
        res.append((out / "results.csv").read_text().replace(f",{seed},", ",S,"))
    assert res[0] != res[1]
