"""Architecture guards: the protocol stays pure, the tree stays lint-clean."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = {
    "__future__",
    "bisect",
    "collections",
    "dataclasses",
    "difflib",
    "errno",
    "math",
    "random",
    "struct",
    "typing",
    "types",
    "zlib",
    "numpy",
    "mmh3",
    "msgpack",
    "fedsim",
}
# Modules the protocol may take single names from, and only these names (os
# has the clock, the file system and processes: the protocol needs its errno text).
ALLOWED_NAMES = {"os": {"strerror"}}


@dataclass(frozen=True)
class ImportSite:
    """One import: where (file relative to the repository, line) and what (absolute module name)."""

    file: str
    line: int
    module: str
    #: ``from module import these`` (each may itself be a submodule)
    names: tuple[str, ...] = ()

    def modules(self) -> list[str]:
        """What this may import: the module, and module.name for each from-imported name."""
        return [self.module, *(f"{self.module}.{n}" for n in self.names)]

    def __str__(self) -> str:
        names = f" ({', '.join(self.names)})" if self.names else ""
        return f"{self.file}:{self.line}: imports {self.module}{names}"


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_sites(package: str) -> list[ImportSite]:
    """Every import under ``package`` (a directory of the repository), by line:
    ``import a.b``, ``from a import b`` (module ``a``, names ``b``: ``a.b`` may
    be a module), relative imports resolved to absolute names, and
    ``importlib.import_module("literal")`` / ``__import__("literal")`` calls,
    the obvious way around a statement check.  Imports inside functions count:
    a lazy import is still a dependency."""
    out = []
    for f in sorted((ROOT / package).rglob("*.py")):
        rel = str(f.relative_to(ROOT))
        here = _module_of(f).split(".")
        is_pkg = f.name == "__init__.py"
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.Import):
                out += [ImportSite(rel, node.lineno, a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = here if is_pkg else here[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, *([base] if base else [])])
                if base:
                    names = tuple(a.name for a in node.names if a.name != "*")
                    out.append(ImportSite(rel, node.lineno, base, names))
            elif (
                isinstance(node, ast.Call)
                and (
                    (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                    or (isinstance(node.func, ast.Name) and node.func.id in ("import_module", "__import__"))
                )
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                out.append(ImportSite(rel, node.lineno, node.args[0].value))
    return out


def imports(package: str, names: bool = False) -> list[tuple[str, str]]:
    """(file, imported module) for every import under ``package`` (see import_sites)
    (with ``names``: "module:name" for each name a ``from`` import takes)."""
    out = []
    for s in import_sites(package):
        if names and s.names:
            out += [(s.file, f"{s.module}:{n}") for n in s.names]
        else:
            out.append((s.file, s.module))
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


#: The import direction: protocol <- runtimes <- experiments <- notebooks.  Each
#: package (a directory) and the modules it must never import, with why.  A
#: prefix forbids the module and everything under it.
FORBIDDEN: dict[str, tuple[tuple[str, ...], str]] = {
    "fedsim": (
        ("experiments", "notebooks"),
        "the simulator is a runtime; studies sit on top of it and are found through the "
        "'fedsim.studies' entry points (fedsim/studies.py), never imported by name",
    ),
    "experiments": (("notebooks",), "notebooks present the studies; the studies must not depend on them"),
    "fednode": (
        ("experiments", "notebooks", "fedsim.runtime", "fedsim.direct", "simpy"),
        "the agent runs the protocol, not a model of it: no simulator, no in-memory runtime, no studies",
    ),
}


def violations(package: str, forbidden: tuple[str, ...]) -> list[str]:
    """Each import under ``package`` of a module in ``forbidden`` (or below one), as 'file:line: imports x'."""
    return [
        str(s)
        for s in import_sites(package)
        if any(m == f or m.startswith(f + ".") for m in s.modules() for f in forbidden)
    ]


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_down_protocol_runtimes_experiments_notebooks(package):
    """DESIGN.md: each layer imports only the layers below it.  The failure
    names every offending file, line and import, and the rule it breaks."""
    forbidden, why = FORBIDDEN[package]
    bad = violations(package, forbidden)
    assert not bad, f"{package}/ must not import {', '.join(forbidden)} ({why}):\n  " + "\n  ".join(bad)


@pytest.mark.parametrize(
    ("package", "text", "culprit"),
    [
        ("fedsim", "from experiments import run_study\n", "from experiments"),
        ("fedsim", "def f():\n    import experiments.table2\n", "lazy import"),
        ("fedsim", "import importlib\nimportlib.import_module('experiments.simulate')\n", "import_module"),
        ("fedsim", "from notebooks import x\n", "notebooks"),
        ("experiments", "import notebooks.scale\n", "notebooks"),
        ("fednode", "import simpy\n", "simpy"),
        ("fednode", "from fedsim import runtime\n", "from-import of a module"),
        ("fednode", "from fedsim.direct import DirectCluster\n", "fedsim.direct"),
        ("fednode", "from experiments.common import build_cluster\n", "experiments"),
    ],
)
def test_the_direction_test_catches_a_bad_import(package, text, culprit, tmp_path, monkeypatch):
    """The guard must fail on the imports it exists for: plant one in a
    package tree and check the message names the file and the line."""
    (tmp_path / package / "sub").mkdir(parents=True)
    (tmp_path / package / "sub" / "planted.py").write_text('"""planted"""\n' + text)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    bad = violations(package, FORBIDDEN[package][0])
    line = 1 + text.count("\n")  # the import is the planted text's last line, after the docstring
    assert bad == [str(s) for s in import_sites(package) if s.line == line], culprit
    assert len(bad) == 1 and bad[0].startswith(f"{package}/sub/planted.py:{line}: imports "), (culprit, bad)


def test_relative_imports_resolve_to_absolute_names(tmp_path, monkeypatch):
    """``from ..runtime import X`` inside fednode/sub/ is fednode.runtime, and
    ``from . import y`` in a package __init__ is the package's own y: the
    collector must not mistake either for a top-level module."""
    (tmp_path / "fednode" / "sub").mkdir(parents=True)
    (tmp_path / "fednode" / "sub" / "__init__.py").write_text("from . import y\n")
    (tmp_path / "fednode" / "sub" / "m.py").write_text("from ..runtime import X\nfrom .y import Z\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    got = {(s.file, m) for s in import_sites("fednode") for m in s.modules()}
    assert ("fednode/sub/__init__.py", "fednode.sub.y") in got
    assert ("fednode/sub/m.py", "fednode.runtime.X") in got and ("fednode/sub/m.py", "fednode.sub.y.Z") in got
    assert not violations("fednode", FORBIDDEN["fednode"][0])


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


def test_the_agent_never_imports_its_tools():
    """The agent package reads as the agent: runtime, transports, local layer,
    client.  The test bed and the benchmarks are tools beside it
    (``fednode/tools``), which only the CLI loads, for their own commands."""
    bad = [
        str(s)
        for s in import_sites("fednode")
        if not s.file.startswith(("fednode/tools/", "fednode/cli.py"))
        and any(m == "fednode.tools" or m.startswith("fednode.tools.") for m in s.modules())
    ]
    assert not bad, "fednode's agent modules must not import fednode.tools:\n  " + "\n  ".join(bad)


RUNTIMES = ("fedsim/runtime.py", "fedsim/direct.py", "fednode/runtime.py", "fednode/transport")
TRANSPORTS = "fednode/transport"  # bytes only: their words ('write' is an RDMA verb) are not checked for op names


def test_no_runtime_names_a_protocol_message_or_operation():
    """``grep`` finds no protocol decision in a runtime: no runtime module
    imports a concrete request type or compares against the name of one, or
    names a design's client operation.  What a runtime must know of a request
    or an operation, the protocol declares (``Request.probe``,
    ``Request.size_field``, ``Request.reply``, ``@api(fd=..., size_arg=...)``)."""
    from fedsim.protocol.designs import design_class
    from fedsim.protocol.messages import REQUEST_TYPES

    ops = set(design_class("fedfs").API)
    kinds = set(REQUEST_TYPES)
    bad = []
    for target in RUNTIMES:
        files = sorted((ROOT / target).rglob("*.py")) if (ROOT / target).is_dir() else [ROOT / target]
        for f in files:
            rel = str(f.relative_to(ROOT))
            for node in ast.walk(ast.parse(f.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module == "fedsim.protocol.messages":
                    bad += [f"{rel}:{node.lineno}: imports request {a.name}" for a in node.names if a.name in kinds]
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    if node.value in kinds or (node.value in ops and not rel.startswith(TRANSPORTS)):
                        bad.append(f"{rel}:{node.lineno}: names {node.value!r}")
    assert not bad, "protocol knowledge in a runtime:\n  " + "\n  ".join(bad)


@pytest.mark.parametrize(
    "text",
    [
        'def f(req):\n    return req.kind == "ReadDir"\n',
        "from fedsim.protocol.messages import Read\n",
        'OPS = ("open", "close")\n',
    ],
)
def test_the_protocol_knowledge_guard_catches_a_decision(text, tmp_path, monkeypatch):
    for target in RUNTIMES:
        p = tmp_path / target
        if target.endswith(".py"):
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text('"""clean"""\n')
        else:
            p.mkdir(parents=True, exist_ok=True)
    (tmp_path / "fednode" / "runtime.py").write_text(text)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    with pytest.raises(AssertionError, match=r"fednode/runtime\.py:"):
        test_no_runtime_names_a_protocol_message_or_operation()
