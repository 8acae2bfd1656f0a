"""Architecture guards: the protocol stays pure, the tree stays lint-clean."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = {"__future__", "bisect", "collections", "dataclasses", "difflib", "errno", "math", "random", "struct",
           "typing", "types", "zlib", "numpy", "mmh3", "msgpack", "fedsim"}
# Modules the protocol may take single names from, and only these names (os
# has the clock, the file system and processes: the protocol needs its errno text).
ALLOWED_NAMES = {"os": {"strerror"}}


def imports(package: str, names: bool = False) -> list[tuple[str, str]]:
    """(file, imported module) for every import statement under ``package``
    (with ``names``: "module.name" for each name a ``from`` import takes)."""
    out = []
    for f in (ROOT / package).rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                out += [(str(f.relative_to(ROOT)), a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                if names:
                    out += [(str(f.relative_to(ROOT)), f"{node.module}:{a.name}") for a in node.names]
                else:
                    out.append((str(f.relative_to(ROOT)), node.module))
    return out


def _allowed_in_protocol(imported: str) -> bool:
    module, _, name = imported.partition(":")
    top = module.split(".")[0]
    if top in ALLOWED_NAMES:
        return module == top and name in ALLOWED_NAMES[top]
    return top in ALLOWED and (not module.startswith("fedsim") or module.startswith("fedsim.protocol"))


def test_protocol_imports_no_runtime_no_clock_no_io_library():
    """DESIGN.md: fedsim/protocol imports nothing from the rest of fedsim or
    fednode, and no SimPy, socket, thread or time module: that is what lets
    the simulator and the agent run the very same code."""
    bad = [f"{f}: {n}" for f, n in imports("fedsim/protocol", names=True) if not _allowed_in_protocol(n)]
    assert not bad, bad


def test_the_protocol_guard_catches_what_it_guards():
    """The allowance is exact: all of os, a clock, a runtime are refused."""
    for imported in ("os", "os:getcwd", "time:monotonic", "simpy", "fedsim.runtime:SimCluster", "fednode.wire"):
        assert not _allowed_in_protocol(imported), imported
    for imported in ("os:strerror", "fedsim.protocol.messages:Request", "collections:Counter"):
        assert _allowed_in_protocol(imported), imported


def test_the_tree_is_ruff_clean():
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed")
    r = subprocess.run([ruff, "check", str(ROOT)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:]


def test_fednode_uses_the_protocol_but_never_the_simulator():
    """DESIGN.md: fednode imports fedsim.protocol and never fedsim.runtime (nor
    SimPy, nor the studies): the agent runs the protocol, not a model of it."""
    bad = [
        f"{f}: {n}"
        for f, n in imports("fednode")
        if n.split(".")[0] in ("simpy", "experiments") or n.startswith(("fedsim.runtime", "fedsim.direct"))
    ]
    assert not bad, bad


def test_fednode_never_loads_the_simulators_config_network_or_disk_model():
    """The agent shares the protocol schema, config errors, YAML reading and
    the table printer through ``fedsim.schema``; it must not load the
    simulator's config layer, network or disk models.  Checked twice: no
    import statement names them, and importing every fednode module (in a
    fresh interpreter, so transitive imports count) leaves them unloaded."""
    banned = ("fedsim.config", "fedsim.network", "fedsim.storage", "fedsim.runtime", "simpy")
    bad = [f"{f}: {n}" for f, n in imports("fednode") if n.startswith(banned)]
    assert not bad, bad
    probe = (
        "import importlib, pkgutil, sys, fednode\n"
        "for m in pkgutil.walk_packages(fednode.__path__, 'fednode.'):\n"
        "    if not m.name.endswith('__main__'):\n"
        "        importlib.import_module(m.name)\n"
        f"print(sorted(k for k in sys.modules if k.startswith({banned!r})))\n"
    )
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "[]", f"importing fednode loads {r.stdout.strip()}"
