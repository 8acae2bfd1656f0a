"""The study registry (fedsim/studies.py): studies are plugins found through the
``fedsim.studies`` entry points, so a researcher's own package adds one without
editing fedsim, and every process that has the package installed (a pool or
Dask worker) finds it from the name alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

import fedsim.studies as st
from fedsim.cli import main
from fedsim.config import ConfigError, validate
from fedsim.results import StudyResult
from fedsim.studies import UnknownStudyError, get_study, register_study, run_study, study_names
from fedsim.sweep import load_sweep, run_sweep

ROOT = Path(__file__).resolve().parents[1]

#: A researcher's study, as it would sit in their own package: it imports only
#: fedsim's public API and registers itself when imported.
LAB_STUDY = '''
"""A lab's own study: no simulation, just the config's numbers, so it is fast."""

from pydantic import BaseModel, ConfigDict

from fedsim.config import Config
from fedsim.results import StudyResult
from fedsim.studies import register_study


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")
    scale: float = 1.0


def run(cfg: Config, params: Params) -> StudyResult:
    res = StudyResult(report=f"lab_hops: {cfg.cluster.nodes} nodes x {params.scale:g}")
    res.add(f"nodes={cfg.cluster.nodes}", "scaled_nodes", cfg.cluster.nodes * params.scale)
    res.add(f"nodes={cfg.cluster.nodes}", "seed", cfg.seed)
    return res


register_study("lab_hops", Params, run)
'''


def _site(tmp_path: Path, entry_points: str | None, modules: dict[str, str]) -> Path:
    """A directory laid out like site-packages holding the lab's package
    ``mylab`` and, when ``entry_points`` is given, its installed metadata
    (what ``pip install`` of a pyproject.toml with
    ``[project.entry-points."fedsim.studies"]`` writes)."""
    site = tmp_path / "site"
    pkg = site / "mylab"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for name, text in modules.items():
        (pkg / f"{name}.py").write_text(textwrap.dedent(text))
    if entry_points is not None:
        info = site / "mylab-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mylab\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))
    return site


LAB_ENTRY_POINTS = """\
    [fedsim.studies]
    lab_hops = mylab.hops
    """


@pytest.fixture
def isolated(monkeypatch):
    """The registry and the imported modules as they were: a test's
    registrations must not leak into the next test, and a module that
    registered during the test is forgotten with its registration (else a
    later get_study would find it imported, not re-run it, and so find
    nothing registered)."""
    before = dict(st._REGISTRY)
    monkeypatch.setattr(st, "_REGISTRY", dict(before))
    yield
    added = {s.module for n, s in st._REGISTRY.items() if n not in before}
    for name in [m for m in sys.modules if m in added or m == "mylab" or m.startswith("mylab.")]:
        del sys.modules[name]


@pytest.fixture
def lab(tmp_path, monkeypatch, isolated):
    site = _site(tmp_path, LAB_ENTRY_POINTS, {"hops": LAB_STUDY})
    monkeypatch.syspath_prepend(str(site))
    return site


def _config(tmp_path: Path, raw: dict) -> Path:
    p = tmp_path / "lab.yaml"
    p.write_text(yaml.safe_dump(raw))
    return p


# ---------------------------------------------------------------------------- a plugin package
def test_an_installed_package_adds_a_study_that_fedsim_run_finds_by_name(lab, tmp_path, capsys):
    assert "lab_hops" in study_names()  # declared, not yet imported: studies load on first use
    assert "mylab.hops" not in sys.modules
    out = tmp_path / "out"
    cfg = _config(tmp_path, {"study": "lab_hops", "seed": 3, "cluster": {"nodes": 5}, "params": {"scale": 2.5}})
    assert main(["run", str(cfg), "--out", str(out)]) == 0
    assert "lab_hops: 5 nodes x 2.5" in capsys.readouterr().out
    lines = (out / "results.csv").read_text().splitlines()
    assert lines[1:] == ["lab_hops,nodes=5,3,scaled_nodes,12.5", "lab_hops,nodes=5,3,seed,3"]
    # its params are validated against its own model, like a built-in study's
    assert main(["run", str(_config(tmp_path, {"study": "lab_hops", "params": {"scael": 2}}))]) == 2
    assert "scael" in capsys.readouterr().err


def test_a_sweep_over_a_plugin_study_checks_its_params_and_runs_it(lab, tmp_path):
    base = _config(tmp_path, {"study": "lab_hops", "seed": 1})
    body = {"base": str(base), "grid": {"cluster.nodes": [2, 4], "params.scale": [1.0, 3.0]}}
    sweep_file = tmp_path / "s.yaml"
    sweep_file.write_text(yaml.safe_dump(body))
    outcome = run_sweep(load_sweep(sweep_file), tmp_path / "o", workers=1, progress=False)
    assert outcome.ok == 4 and not outcome.failed
    text = (tmp_path / "o" / "results.csv").read_text()
    assert ",4,3,1,nodes=4,scaled_nodes,12\n" in text
    sweep_file.write_text(yaml.safe_dump({**body, "grid": {"params.scael": [1.0]}}))
    with pytest.raises(ConfigError, match=r"params\.scael"):
        load_sweep(sweep_file)


WORKER = """
import json, sys
from fedsim.sweep import Task, run_point
task = Task("p0", {"study": "lab_hops", "seed": 9, "params": {"scale": 2.0}}, "point 0", None,
            study_module=sys.argv[1] or None)
out = run_point(task)
out["experiments_imported"] = sorted(m for m in sys.modules if m.split(".")[0] == "experiments")
print(json.dumps(out))
"""


def _fresh_worker(site: Path, study_module: str = "") -> dict:
    """run_point in a new interpreter, as a pool or Dask worker runs it: only
    the Task crosses over; the study must be found from what is installed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run(
        [sys.executable, "-c", WORKER, study_module], capture_output=True, text=True, env=env, timeout=120, check=True
    )
    return json.loads(r.stdout.splitlines()[-1])


def test_a_fresh_worker_finds_an_installed_study_by_its_entry_point_alone(lab):
    out = _fresh_worker(lab)
    assert out["status"] == "ok", out["error"]
    assert out["rows"] == [["nodes=4", "scaled_nodes", 8.0], ["nodes=4", "seed", 9.0]]
    # and running it took nothing from experiments: fedsim does not import the studies it does not run
    assert out["experiments_imported"] == []


def test_a_study_no_entry_point_declares_reaches_a_fresh_worker_through_its_module(tmp_path, monkeypatch, isolated):
    """A study registered by a module that is importable but not declared (a
    notebook's helper, a test) is found in a worker through the module name
    the sweep ships with each point; without it the worker cannot know it."""
    site = _site(tmp_path, None, {"hops": LAB_STUDY})
    monkeypatch.syspath_prepend(str(site))
    assert "lab_hops" not in study_names()
    alone = _fresh_worker(site)
    assert alone["status"] == "failed" and "unknown study 'lab_hops'" in alone["error"]
    with_module = _fresh_worker(site, "mylab.hops")
    assert with_module["status"] == "ok", with_module["error"]
    assert with_module["rows"][0] == ["nodes=4", "scaled_nodes", 8.0]


def test_dask_process_workers_find_a_plugin_study(lab, tmp_path):
    """Dask workers are separate processes; the same sweep gives the same rows there."""
    pytest.importorskip("distributed")
    base = _config(tmp_path, {"study": "lab_hops", "seed": 1})
    sweep_file = tmp_path / "s.yaml"
    sweep_file.write_text(yaml.safe_dump({"base": str(base), "grid": {"cluster.nodes": [2, 3]}}))
    serial = run_sweep(load_sweep(sweep_file), tmp_path / "serial", workers=1, progress=False)
    dask = run_sweep(load_sweep(sweep_file), tmp_path / "dask", executor="dask", workers=1, progress=False)
    assert serial.ok == dask.ok == 2
    assert serial.results.read_bytes() == dask.results.read_bytes()


# ---------------------------------------------------------------------------- the registry's rules
class _P(BaseModel):
    pass


def _run_a(cfg, params):
    return StudyResult()


def _run_b(cfg, params):
    return StudyResult()


def test_registering_the_same_study_twice_is_harmless_but_a_taken_name_is_refused(isolated):
    first = register_study("twice", _P, _run_a)
    assert register_study("twice", _P, _run_a) == first  # a module imported again, a notebook cell re-run
    with pytest.raises(ValueError, match=r"'twice' is already registered by tests\.test_studies\._run_a"):
        register_study("twice", _P, _run_b)
    assert get_study("twice").run is _run_a


@pytest.mark.parametrize(
    ("name", "params", "run", "error", "words"),
    [
        ("two words", _P, _run_a, ValueError, "letters, digits"),
        ("cluster.nodes", _P, _run_a, ValueError, "letters, digits"),
        ("ok", dict, _run_a, TypeError, "pydantic BaseModel"),
        ("ok", _P, "run", TypeError, "callable"),
    ],
)
def test_a_malformed_registration_is_refused(isolated, name, params, run, error, words):
    with pytest.raises(error, match=words):
        register_study(name, params, run)


def test_an_unknown_study_lists_the_known_ones_and_the_nearest(isolated):
    register_study("my_study", _P, _run_a)
    with pytest.raises(UnknownStudyError) as info:
        get_study("tabel2")
    msg = str(info.value)
    assert msg.startswith("unknown study 'tabel2'; allowed: ") and msg.endswith("did you mean 'table2'?")
    for name in ("simulate", "table2", "table3", "bloom_summary", "lookup_paths", "scale", "my_study"):
        assert name in msg
    with pytest.raises(ConfigError, match=r"^x\.yaml: study: unknown study 'tabel2'"):
        run_study(validate({"study": "tabel2"}), "x.yaml")


def test_with_no_studies_installed_the_error_says_how_to_install_them(isolated, monkeypatch):
    """An environment whose fedfs metadata predates the entry points (an
    editable install not refreshed) must say so, not just list nothing."""
    monkeypatch.setattr(st, "_REGISTRY", {})
    monkeypatch.setattr(st, "_entry_points", lambda name=None: [])
    with pytest.raises(UnknownStudyError, match=r"no studies are registered.*pip install -e \."):
        get_study("simulate")


def test_an_entry_point_whose_module_registers_nothing_is_named(tmp_path, monkeypatch, isolated):
    site = _site(
        tmp_path,
        "[fedsim.studies]\nlab_hops = mylab.empty\nlab_broken = mylab.broken\n",
        {"empty": "X = 1\n", "broken": "import no_such_module_anywhere\n"},
    )
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(ValueError, match=r"lab_hops = mylab.empty \(mylab\) was imported but registered no study"):
        get_study("lab_hops")
    with pytest.raises(ModuleNotFoundError) as info:  # the plugin's own error, with where it came from
        get_study("lab_broken")
    assert "while loading study 'lab_broken' from entry point mylab.broken (mylab)" in info.value.__notes__


def test_fedfs_declares_each_of_its_study_modules_and_each_registers_its_name():
    """pyproject.toml's entry points and the modules agree: every shipped
    config's study resolves, and to the module the entry point names."""
    declared = {ep.name: ep.value for ep in st._entry_points()}
    assert {"simulate", "table2", "table3", "bloom_summary", "lookup_paths", "scale"} <= set(declared)
    for name, module in declared.items():
        if module.startswith("experiments."):
            assert get_study(name).module == module
    for cfg in (ROOT / "configs" / "fedfs").glob("*.yaml"):
        assert yaml.safe_load(cfg.read_text())["study"] in declared, cfg


# ---------------------------------------------------------------------------- fedsim demo
def test_fedsim_demo_runs_the_demo_its_entry_point_names(monkeypatch, tmp_path, capsys):
    """`fedsim demo` lives in experiments (it runs studies and real agents), so
    fedsim finds it by entry point; without one it is a clear error, exit 2."""
    from importlib import metadata

    import fedsim.cli as cli
    from experiments.demo import demo

    (ep,) = metadata.entry_points(group=cli.DEMO_GROUP, name="demo")
    assert ep.load() is demo
    calls = []

    class FakeEntryPoint:
        def load(self):
            return lambda out, quick: calls.append((out, quick))

    monkeypatch.setattr(cli.metadata, "entry_points", lambda **kw: [FakeEntryPoint()])
    assert main(["demo", "--out", str(tmp_path), "--quick"]) == 0
    assert calls == [(tmp_path, True)]
    monkeypatch.setattr(cli.metadata, "entry_points", lambda **kw: [])
    assert main(["demo"]) == 2
    assert "no 'fedsim.demo' entry point named 'demo' is installed" in capsys.readouterr().err
