"""A real RDMA device for a machine whose kernel has none: Soft-RoCE (``rdma_rxe``) in a QEMU guest.

    python -m fednode.tools.testbed rxe [--rebuild] [--cache DIR] [--mem MIB] [--smp N] [--timeout S]
                                  [--out DIR] [--log FILE] [-- COMMAND ...]

The project's RDMA transport needs a verbs provider to be tested against, and the machines this
project runs on (developers' and CI's) have neither an RDMA NIC nor the ``rdma_rxe`` module.  So this
boots a small Debian guest under QEMU whose kernel has both, with three rxe devices ready (``rxe0``
on a dummy netdev for loopback, ``rxe_v0``/``rxe_v1`` on the two ends of a veth pair to model two
hosts), runs COMMAND in a copy of the project source at ``/fedfs`` and returns its exit status.

Why it is built this way (each point cost time to find; see shared/reference/softroce/README.md):

* TCG, never KVM: ``/dev/kvm`` on these machines is a nested software hypervisor that either aborts
  or boots unusably slowly.  With TCG, booting the *uncompressed* kernel (``vmlinux``, PVH entry) takes
  5-7 s to a shell instead of 10-40 s through the in-kernel decompressor.
* Everything from Debian packages, nothing installed on the host: the kernel package is downloaded and
  unpacked, the root made by ``debootstrap``, and the guest's Python dependencies installed offline
  into the guest root by the host's pip (the guest has no network: ``-nic none``).  PyPI's ``pyverbs``
  does not work against Debian 12's rdma-core, so the guest uses Debian's ``python3-pyverbs``, which
  exists only for Debian's own ``/usr/bin/python3`` (3.11).
* The slow part (kernel, root, Python packages, modules) is built once and cached under ``--cache``,
  one directory per stage named by a fingerprint of everything that stage depends on, including
  the source of the function that builds it.  Every run packs the project source and ``/init`` into
  a small gzip cpio appended to the cached zstd ones, so code changes never rebuild the base.
* The guest ``/init`` (``guest_init.sh`` beside this file) prints marker lines tagged with a per-run
  nonce; the host trusts only those for the exit status and for the ``/out`` archive, so a command
  that prints marker-like text cannot fool it.

Exit status: the command's; 124 when the guest ran out of time; 125 when the guest stopped without
reporting one (see the log).  Build and environment problems raise :class:`TestbedError`.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import contextlib
import fcntl
import gzip
import hashlib
import inspect
import io
import json
import lzma
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import tomllib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

# ------------------------------------------------------------------------------------------ what goes in
#: The guest's Debian release.  Tied to Python 3.11 (Debian's python3-pyverbs exists only for it).
GUEST_SUITE = "bookworm"
#: debootstrap --include: pyverbs, the rdma tools (ibv_devices), ip, modprobe, and busybox/procps for debugging.
GUEST_PACKAGES: tuple[str, ...] = (
    "python3-minimal",
    "python3-pyverbs",
    "rdma-core",
    "ibverbs-providers",
    "iproute2",
    "kmod",
    "ibverbs-utils",
    "busybox",
    "procps",
)
#: Loaded in this order by /init; modprobe pulls in the rest (ib_core, udp_tunnel, ...).  The crc32
#: providers come first because rxe computes its ICRC through the crypto API, which modules.dep does not
#: list as a dependency.
GUEST_MODULES: tuple[str, ...] = (
    "crc32_generic",
    "crc32-pclmul",
    "rdma_rxe",
    "ib_uverbs",
    "rdma_ucm",
    "ib_umad",
    "dummy",
    "veth",
)
GUEST_NETDEVS: tuple[str, ...] = ("dummy0", "veth0", "veth1")
#: pyproject dependencies the guest does not need (matplotlib is imported lazily, only for figures).
GUEST_EXCLUDED_DEPENDENCIES = frozenset({"matplotlib"})
#: What running pytest in the guest needs beyond [project].dependencies; pins come from pyproject when it
#: names the package anywhere (dependencies or an extra), else from the fallback here.
GUEST_TEST_REQUIREMENTS: dict[str, str] = {
    "pytest": "pytest>=8",
    "hypothesis": "hypothesis>=6.100",
    "pytest-timeout": "pytest-timeout>=2.2",
}
#: The project source packed into /fedfs on every run.
PROJECT_ITEMS: tuple[str, ...] = ("fedsim", "fednode", "experiments", "tests", "configs", "pyproject.toml")
PROJECT_EXCLUDED_NAMES = frozenset(
    {"__pycache__", ".venv", ".cache", ".hypothesis", ".pytest_cache", ".ruff_cache", ".mypy_cache"}
)
DEFAULT_COMMAND: tuple[str, ...] = ("python3", "-m", "fednode.tools.testbed.suite")
DEFAULT_TIMEOUT = 1800.0
EXIT_TIMEOUT = 124
EXIT_NO_STATUS = 125
#: How long a guest that reported its exit status may take to power off before it is killed.
POWEROFF_GRACE = 30.0

#: host tool -> the Debian package that provides it.  qemu is needed on every run, the rest to build.
RUN_TOOLS = {"qemu-system-x86_64": "qemu-system-x86"}
BUILD_TOOLS = {
    "debootstrap": "debootstrap",
    "cpio": "cpio",
    "zstd": "zstd",
    "depmod": "kmod",
    "modprobe": "kmod",
    "xz": "xz-utils",
    "apt-get": "apt",
    "apt-cache": "apt",
    "dpkg-deb": "dpkg",
}

REPO = Path(__file__).resolve().parents[3]
INIT_SCRIPT = Path(__file__).with_name("guest_init.sh")
# depmod, modprobe and debootstrap live in sbin, which a non-root PATH often lacks.
_TOOL_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/local/sbin", "/usr/sbin", "/sbin"])


class TestbedError(RuntimeError):
    """The test bed could not be built or started (not a failure of the guest command)."""

    __test__ = False  # not a pytest test class, despite the name


# ------------------------------------------------------------------------------------------ small helpers
def _say(msg: str) -> None:
    print(f"testbed: {msg}", flush=True)


def _is_root() -> bool:
    return os.geteuid() == 0


def _which(tool: str) -> str | None:
    return shutil.which(tool, path=_TOOL_PATH)


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PATH=_TOOL_PATH, LC_ALL="C.UTF-8", DEBIAN_FRONTEND="noninteractive")
    env.update(extra)
    return env


def _run(argv: Sequence[str | Path], *, timeout: float = 600, cwd: Path | None = None, log: Path | None = None) -> str:
    """Run a build step; its output goes to ``log`` when given (and is returned otherwise).

    A failure raises TestbedError with the step's last lines, so the user sees why without digging.
    """
    argv = [str(a) for a in argv]
    out: IO[str] | int = subprocess.PIPE
    with contextlib.ExitStack() as stack:
        if log is not None:
            out = stack.enter_context(log.open("a"))
            out.write(f"$ {shlex.join(argv)}\n")
            out.flush()
        try:
            proc = subprocess.run(
                argv, cwd=cwd, env=_env(), stdout=out, stderr=subprocess.STDOUT, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired as exc:
            raise TestbedError(f"{shlex.join(argv)} took longer than {timeout:.0f} s") from exc
        except FileNotFoundError as exc:
            raise TestbedError(f"{argv[0]} not found") from exc
    text = proc.stdout if log is None else log.read_text(errors="replace")
    if proc.returncode != 0:
        tail = "\n".join(text.splitlines()[-15:])
        where = f" (full log: {log})" if log else ""
        raise TestbedError(f"{shlex.join(argv)} failed with status {proc.returncode}{where}:\n{tail}")
    return text or ""


def _fingerprint(inputs: dict[str, Any]) -> str:
    blob = json.dumps(inputs, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _source_digest(*funcs: Callable[..., Any]) -> str:
    """A digest of the builders' own source: editing how a stage is built invalidates that stage only."""
    h = hashlib.sha256()
    for f in funcs:
        h.update(inspect.getsource(f).encode())
    return h.hexdigest()[:16]


def _pack_tree(tree: Path, dest: Path, *, compress: Sequence[str] = ("zstd", "-q", "-T0", "-3")) -> None:
    """Write ``tree`` as a newc cpio (paths relative to it) compressed by zstd: one initramfs segment.

    GNU cpio rather than Python because the Debian root holds device nodes and hard links.
    """
    script = (
        "set -euo pipefail; find . -mindepth 1 -xdev -print0 | cpio --null -o -H newc --quiet | "
        f"{shlex.join(compress)} -o {shlex.quote(str(dest))}"
    )
    _run(["bash", "-c", script], cwd=tree, timeout=900)


# ------------------------------------------------------------------------------------------ host tools
def missing_tools(*, build: bool) -> dict[str, str]:
    """Host tools absent from this machine, mapped to the Debian package that provides each."""
    wanted = dict(RUN_TOOLS, **(BUILD_TOOLS if build else {}))
    return {tool: pkg for tool, pkg in wanted.items() if _which(tool) is None}


def _apt_lists_present() -> bool:
    return any(Path("/var/lib/apt/lists").glob("*_Packages*"))


def _apt_update() -> None:
    _say("apt-get update")
    _run(["apt-get", "update", "-q"], timeout=600)


def ensure_host_tools(*, build: bool) -> None:
    """Install what is missing when root (CI starts from a fresh Debian 12), else say what to install."""
    missing = missing_tools(build=build)
    if not missing:
        return
    pkgs = sorted(set(missing.values()))
    if not _is_root():
        raise TestbedError(
            f"missing host tools {', '.join(sorted(missing))}; install them with:\n"
            f"    sudo apt-get install -y --no-install-recommends {' '.join(pkgs)}"
        )
    if _which("apt-get") is None:
        raise TestbedError(f"missing host tools {', '.join(sorted(missing))} and no apt-get: needs a Debian host")
    _say(f"installing host packages: {' '.join(pkgs)}")
    if not _apt_lists_present():
        _apt_update()
    argv = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *pkgs]
    try:
        _run(argv, timeout=900)
    except TestbedError:
        _apt_update()  # stale lists are the usual cause
        _run(argv, timeout=900)
    still = missing_tools(build=build)
    if still:
        raise TestbedError(f"still missing after apt-get install: {', '.join(sorted(still))}")


# ------------------------------------------------------------------------------------------ cache stages
def default_cache() -> Path:
    """``$FEDFS_TESTBED_CACHE``, else ``<repo>/.cache/testbed`` (shared by runs from this checkout)."""
    env = os.environ.get("FEDFS_TESTBED_CACHE")
    return Path(env).expanduser() if env else REPO / ".cache" / "testbed"


@dataclass
class _Build:
    """What this run built or reused, for the progress lines and the summary."""

    cache: Path
    rebuild: bool
    built: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)


def _complete(path: Path) -> bool:
    return (path / ".complete").is_file()


def _stage(b: _Build, name: str, inputs: dict[str, Any], build: Callable[[Path], None], what: str) -> Path:
    """Return the directory of stage ``name`` for ``inputs``, building it unless a complete one exists.

    Built into a temporary sibling and renamed into place, so an interrupted build is never mistaken
    for a finished one; other fingerprints of the same stage are then deleted (they are stale).
    """
    fp = _fingerprint(inputs)
    parent = b.cache / name
    final = parent / fp
    if _complete(final) and not b.rebuild:
        _say(f"{name}: reused {what} ({final})")
        b.reused.append(name)
        return final
    if not _is_root():
        raise TestbedError(
            f"the {name} stage of the base image ({what}) must be built, which needs root "
            f"(debootstrap, device nodes): run once as root, e.g. sudo {sys.executable} -m fednode.tools.testbed rxe"
        )
    ensure_host_tools(build=True)
    parent.mkdir(parents=True, exist_ok=True)
    tmp = parent / f".tmp-{fp}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    t0 = time.monotonic()
    _say(f"{name}: building {what}")
    try:
        build(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    (tmp / ".complete").write_text(json.dumps(inputs, indent=1, sort_keys=True, default=str) + "\n")
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    for other in parent.iterdir():
        if other != final and other.is_dir():
            shutil.rmtree(other, ignore_errors=True)
    _say(f"{name}: built in {time.monotonic() - t0:.1f} s ({final})")
    b.built.append(name)
    return final


def _latest_complete(parent: Path) -> Path | None:
    done = [p for p in parent.glob("*") if p.is_dir() and _complete(p)] if parent.is_dir() else []
    return max(done, key=lambda p: p.stat().st_mtime) if done else None


# --- (a) kernel
def _kernel_package() -> tuple[str, str] | None:
    """The versioned kernel package ``linux-image-amd64`` points at in this host's apt lists, and its version."""
    try:
        deps = _run(["apt-cache", "depends", "linux-image-amd64"], timeout=120)
    except TestbedError:
        return None
    m = re.search(r"Depends:\s*(linux-image-\d\S*)", deps)
    if not m:
        return None
    pkg = m.group(1)
    show = _run(["apt-cache", "show", "--no-all-versions", pkg], timeout=120)
    v = re.search(r"^Version:\s*(\S+)", show, re.M)
    return pkg, (v.group(1) if v else "")


def _build_kernel(tmp: Path, pkg: str, version: str) -> None:
    """Download (not install) the kernel package, keep the .deb for the modules, unpack an uncompressed vmlinux."""
    spec = f"{pkg}={version}" if version else pkg
    try:
        _run(["apt-get", "download", "-q", spec], cwd=tmp, timeout=900)
    except TestbedError:
        _apt_update()  # the version in stale lists may be gone from the mirror
        _run(["apt-get", "download", "-q", spec], cwd=tmp, timeout=900)
    deb = next(tmp.glob(f"{pkg}_*.deb"))
    deb.rename(tmp / "kernel.deb")
    release = pkg.removeprefix("linux-image-")
    with tempfile.TemporaryDirectory(dir=tmp) as x:
        _run(["dpkg-deb", "-x", tmp / "kernel.deb", x], timeout=600)
        vmlinuz = next(Path(x).glob(f"boot/vmlinuz-{release}"))
        image = vmlinuz.read_bytes()
    (tmp / "vmlinux").write_bytes(_uncompressed_kernel(image))
    (tmp / "release").write_text(release + "\n")


def _uncompressed_kernel(image: bytes) -> bytes:
    """The ELF vmlinux inside a bzImage: QEMU boots it through its PVH entry without the slow decompressor."""
    i = image.find(b"\xfd7zXZ\x00")  # Debian 12 kernels are CONFIG_KERNEL_XZ
    if i >= 0:
        return lzma.LZMADecompressor().decompress(image[i:])
    i = image.find(b"\x28\xb5\x2f\xfd")  # zstd, in case a later Debian switches
    if i >= 0:
        return subprocess.run(["zstd", "-dcq"], input=image[i:], capture_output=True, check=True).stdout
    _say("WARNING: kernel payload neither xz nor zstd; booting the compressed image (slower)")
    return image


def _kernel_stage(b: _Build) -> Path:
    found = _kernel_package()
    if found is None and _is_root():
        _apt_update()  # a fresh machine may have no apt lists yet
        found = _kernel_package()
    if found is None:
        cached = _latest_complete(b.cache / "kernel")
        if cached is None:
            raise TestbedError("apt-cache does not know linux-image-amd64: run apt-get update (needs a Debian host)")
        _say(f"kernel: apt does not know linux-image-amd64 here; reusing the cached one ({cached})")
        b.reused.append("kernel")
        return cached
    pkg, version = found
    inputs = {"package": pkg, "version": version, "builder": _source_digest(_build_kernel, _uncompressed_kernel)}
    return _stage(b, "kernel", inputs, lambda tmp: _build_kernel(tmp, pkg, version), f"{pkg} {version}")


# --- (b) root filesystem
def _host_mirror(suite: str) -> str | None:
    """The first Debian mirror the host's apt sources use for ``suite``; None lets debootstrap pick its default."""
    files = [Path("/etc/apt/sources.list")]
    d = Path("/etc/apt/sources.list.d")
    if d.is_dir():
        files += sorted(p for p in d.iterdir() if p.suffix in (".list", ".sources"))
    for f in files:
        try:
            text = f.read_text()
        except OSError:
            continue
        if f.suffix == ".sources":  # deb822 stanzas
            for stanza in re.split(r"\n\s*\n", text):
                fields: dict[str, str] = {}
                for line in stanza.splitlines():
                    if line.startswith("#") or ":" not in line or line[:1].isspace():
                        continue
                    k, v = line.split(":", 1)
                    fields[k.strip().lower()] = v.strip()
                if (
                    "deb" in fields.get("types", "").split()
                    and suite in fields.get("suites", "").split()
                    and fields.get("enabled", "yes").lower() != "no"
                ):
                    uris = fields.get("uris", "").split()
                    if uris and uris[0].startswith(("http://", "https://", "file:")):
                        return uris[0]
        else:
            for line in text.splitlines():
                words = re.sub(r"\[[^\]]*\]", " ", line.split("#", 1)[0]).split()
                if len(words) >= 3 and words[0] == "deb" and words[2] == suite:
                    if words[1].startswith(("http://", "https://", "file:")):
                        return words[1]
    return None


#: Regenerable bulk removed from the guest root: it lives in RAM in the guest, and is cpio'd every build.
_ROOT_SLIM = (
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
    "usr/share/lintian",
    "usr/share/bash-completion",
    "usr/lib/udev/hwdb.d",  # 22 MB of hardware names for a udev that never runs in the guest
    "usr/lib/udev/hwdb.bin",
    "var/cache/apt",
    "var/lib/apt/lists",
    "var/cache/debconf/templates.dat-old",
    "var/log",
)


def _build_root(tmp: Path, suite: str, packages: Sequence[str]) -> None:
    """debootstrap a minimal Debian root, describe it in guest.json, slim it and pack it as a cpio segment."""
    root = tmp / "root"
    log = tmp.parent / "debootstrap.log"
    log.write_text("")
    mirror = _host_mirror(suite)
    argv = ["debootstrap", "--variant=minbase", f"--include={','.join(packages)}", suite, root]
    if mirror:
        argv.append(mirror)
    _say(f"debootstrap {suite} from {mirror or 'the default mirror'} (a few minutes; log: {log})")
    _run(argv, timeout=2400, log=log)
    python = os.readlink(root / "usr/bin/python3")  # "python3.11"
    libc = _run(["dpkg-query", f"--admindir={root}/var/lib/dpkg", "-W", "-f=${Version}", "libc6"], timeout=60)
    glibc = re.match(r"(\d+\.\d+)", libc.strip())  # "2.36-9+deb12u10" -> "2.36": picks the wheels that run there
    if glibc is None:
        raise TestbedError(f"cannot read the guest's glibc version from {libc!r}")
    info = {"suite": suite, "python": python.removeprefix("python"), "glibc": glibc.group(1)}
    (tmp / "guest.json").write_text(json.dumps(info) + "\n")
    for rel in _ROOT_SLIM:
        target = root / rel
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
            target.mkdir()
        elif target.is_file():
            target.unlink()
    (root / "var/log/apt").mkdir(parents=True, exist_ok=True)
    _pack_tree(root, tmp / "root.cpio.zst")
    shutil.rmtree(root)


def _root_stage(b: _Build) -> Path:
    inputs = {
        "suite": GUEST_SUITE,
        "packages": sorted(GUEST_PACKAGES),
        "builder": _source_digest(_build_root, _pack_tree) + str(_ROOT_SLIM),
    }
    what = f"Debian {GUEST_SUITE} root with {', '.join(GUEST_PACKAGES)}"
    return _stage(b, "root", inputs, lambda tmp: _build_root(tmp, GUEST_SUITE, GUEST_PACKAGES), what)


# --- (c) the project's Python dependencies, for the guest's interpreter
def _req_name(req: str) -> str:
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
    if not m:
        raise TestbedError(f"cannot read a package name from requirement {req!r}")
    return re.sub(r"[-_.]+", "-", m.group(1)).lower()


def guest_requirements(pyproject: Path = REPO / "pyproject.toml") -> list[str]:
    """The requirements installed into the guest, with pyproject's pins.

    [project].dependencies less GUEST_EXCLUDED_DEPENDENCIES, plus what pytest in the guest needs.
    """
    project = tomllib.loads(pyproject.read_text())["project"]
    deps = [r for r in project.get("dependencies", []) if _req_name(r) not in GUEST_EXCLUDED_DEPENDENCIES]
    known = {_req_name(r): r for extra in project.get("optional-dependencies", {}).values() for r in extra}
    known.update({_req_name(r): r for r in deps})
    have = {_req_name(r) for r in deps}
    for name, fallback in GUEST_TEST_REQUIREMENTS.items():
        if name not in have:
            deps.append(known.get(name, fallback))
    return [r.strip() for r in deps]


def _manylinux_platforms(glibc: str) -> list[str]:
    """Every manylinux tag a guest with this glibc runs: pip does not widen --platform manylinux_2_X itself."""
    major, minor = (int(x) for x in glibc.split(".")[:2])
    tags = [f"manylinux_{major}_{m}_x86_64" for m in range(minor, 4, -1)]
    return [*tags, "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]


def _build_pydeps(tmp: Path, requirements: Sequence[str], python: str, glibc: str) -> None:
    """Install the requirements for the guest's Python into what becomes /usr/local/lib/pythonX.Y/dist-packages.

    Offline for the guest: the host's pip downloads wheels for the guest's platform.  Some packages
    (pybloom-live) publish only an sdist, so first ``pip wheel`` every top-level requirement on the host
    (pure-Python ones build to a py3-none-any wheel; ones with binary wheels are simply saved) and let
    the platform-targeted install find them there.
    """
    pip = [sys.executable, "-m", "pip"]
    if subprocess.run([*pip, "--version"], capture_output=True).returncode != 0:
        raise TestbedError(f"{sys.executable} has no pip; run this from the project's venv (./dev.sh setup)")
    log = tmp.parent / "pip.log"
    log.write_text("")
    house = tmp / "wheelhouse"
    tree = tmp / "tree"
    target = tree / f"usr/local/lib/python{python}/dist-packages"
    quiet = ["--disable-pip-version-check", "--no-input", "--progress-bar", "off"]
    _say(f"pip: {' '.join(requirements)} for Python {python} (log: {log})")
    _run([*pip, "wheel", *quiet, "--no-deps", "-w", house, *requirements], timeout=1800, log=log)
    abi = "cp" + python.replace(".", "")
    platforms = [x for tag in _manylinux_platforms(glibc) for x in ("--platform", tag)]
    same_python = f"{sys.version_info.major}.{sys.version_info.minor}" == python
    argv = [*pip, "install", *quiet, "--target", target, "--only-binary=:all:", *platforms]
    argv += ["--python-version", python, "--implementation", "cp", "--abi", abi, "--find-links", house]
    # pip byte-compiles with the host interpreter: worth it (imports under TCG are slow) only if it is the guest's.
    argv += ["--no-warn-script-location", *([] if same_python else ["--no-compile"]), *requirements]
    _run(argv, timeout=1800, log=log)
    shutil.rmtree(target / "bin", ignore_errors=True)  # console scripts with the host's shebang
    for tests in sorted(target.glob("*/**/tests")):  # packages' own test suites (numpy's: 15 MB), never imported here
        if tests.is_dir() and (tests.parent / "__init__.py").exists():
            shutil.rmtree(tests)
    dists = sorted(p.name.removesuffix(".dist-info") for p in target.glob("*.dist-info"))
    (tmp / "installed.txt").write_text("\n".join(dists) + "\n")
    _pack_tree(tree, tmp / "pydeps.cpio.zst")
    shutil.rmtree(tree)
    shutil.rmtree(house)


def _pydeps_stage(b: _Build, guest: dict[str, str]) -> Path:
    reqs = guest_requirements()
    inputs = {
        "requirements": reqs,
        "python": guest["python"],
        "glibc": guest["glibc"],
        "builder": _source_digest(_build_pydeps, _manylinux_platforms, _pack_tree),
    }
    what = f"{len(reqs)} Python requirements for Python {guest['python']}"
    return _stage(b, "pydeps", inputs, lambda tmp: _build_pydeps(tmp, reqs, guest["python"], guest["glibc"]), what)


# --- (d) kernel modules
def _build_modules(tmp: Path, kernel: Path, modules: Sequence[str]) -> None:
    """Copy the wanted modules and their dependencies (modprobe --show-depends) into a cpio segment."""
    release = (kernel / "release").read_text().strip()
    tree = tmp / "tree"
    dest = tree / "usr/lib/modules" / release  # /lib is a symlink to usr/lib in the guest
    with tempfile.TemporaryDirectory(dir=tmp) as xs:
        x = Path(xs)
        _run(["dpkg-deb", "-x", kernel / "kernel.deb", x], timeout=600)
        base = x if (x / "lib/modules" / release).is_dir() else x / "usr"
        src = base / "lib/modules" / release
        _run(["depmod", "-b", base, release], timeout=300)
        files: set[Path] = set()
        for m in modules:
            out = _run(["modprobe", "-d", base, "-S", release, "--show-depends", m], timeout=60)
            for line in out.splitlines():
                parts = line.split()
                if len(parts) >= 2 and parts[0] == "insmod":
                    files.add(Path(parts[1]))
        for f in sorted(files):
            rel = f.relative_to(src)
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, dest / rel)
        for f in src.glob("modules.builtin*"):
            shutil.copy2(f, dest / f.name)
        shutil.copy2(src / "modules.order", dest / "modules.order")
    _run(["depmod", "-b", tree / "usr", release], timeout=300)
    (tmp / "modules.txt").write_text("\n".join(str(f.relative_to(src)) for f in sorted(files)) + "\n")
    _pack_tree(tree, tmp / "modules.cpio.zst")
    shutil.rmtree(tree)


def _modules_stage(b: _Build, kernel: Path) -> Path:
    inputs = {
        "kernel": kernel.name,
        "modules": list(GUEST_MODULES),
        "builder": _source_digest(_build_modules, _pack_tree),
    }
    what = f"modules {' '.join(GUEST_MODULES)} and their dependencies"
    return _stage(b, "modules", inputs, lambda tmp: _build_modules(tmp, kernel, GUEST_MODULES), what)


@dataclass
class Base:
    """The cached pieces a boot needs: the kernel and the initramfs segments, in load order."""

    vmlinux: Path
    segments: list[Path]
    built: list[str]
    reused: list[str]
    seconds: float

    @property
    def size(self) -> int:
        return sum(p.stat().st_size for p in self.segments)


def build_base(cache: Path | None = None, *, rebuild: bool = False) -> Base:
    """Build (or reuse) the kernel and the base initramfs: root, Python dependencies, kernel modules."""
    t0 = time.monotonic()
    b = _Build(cache=(cache or default_cache()).resolve(), rebuild=rebuild)
    b.cache.mkdir(parents=True, exist_ok=True)
    kernel = _kernel_stage(b)
    root = _root_stage(b)
    guest = json.loads((root / "guest.json").read_text())
    pydeps = _pydeps_stage(b, guest)
    modules = _modules_stage(b, kernel)
    segments = [root / "root.cpio.zst", pydeps / "pydeps.cpio.zst", modules / "modules.cpio.zst"]
    return Base(kernel / "vmlinux", segments, b.built, b.reused, time.monotonic() - t0)


# ------------------------------------------------------------------------------------------ per-run overlay
class _Cpio:
    """A minimal newc cpio writer for the per-run overlay (regular files and directories only)."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.ino = 1  # only has to be distinct: the kernel hard-links entries only when nlink > 1
        self.dirs: set[str] = set()

    def _entry(self, name: str, mode: int, data: bytes = b"", mtime: int = 0) -> None:
        self.ino += 1
        raw = name.encode() + b"\0"
        nlink = 2 if mode & 0o040000 else 1
        fields = (self.ino, mode, 0, 0, nlink, mtime, len(data), 0, 0, 0, 0, len(raw), 0)
        header = b"070701" + b"".join(b"%08X" % v for v in fields)
        self.out.write(header + raw + b"\0" * (-(len(header) + len(raw)) % 4))
        self.out.write(data + b"\0" * (-len(data) % 4))

    def dir(self, name: str) -> None:
        if not name or name in self.dirs:
            return
        self.dir(os.path.dirname(name))
        self.dirs.add(name)
        self._entry(name, 0o040755)

    def file(self, name: str, data: bytes, *, executable: bool = False, mtime: int = 0) -> None:
        self.dir(os.path.dirname(name))
        self._entry(name, 0o100755 if executable else 0o100644, data, mtime)

    def close(self) -> None:
        self._entry("TRAILER!!!", 0)


def _project_files(repo: Path) -> Iterator[tuple[str, Path]]:
    """(path under /fedfs, host path) for the project source, without caches, venvs or bytecode."""
    for item in PROJECT_ITEMS:
        top = repo / item
        if top.is_file():
            yield item, top
            continue
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = sorted(d for d in dirnames if d not in PROJECT_EXCLUDED_NAMES)
            for fn in sorted(filenames):
                p = Path(dirpath) / fn
                if fn.endswith((".pyc", ".pyo")) or not p.is_file():
                    continue
                yield p.relative_to(repo).as_posix(), p


def make_overlay(command: Sequence[str], *, nonce: str, want_out: bool, repo: Path = REPO) -> bytes:
    """The gzip cpio appended to the base for one run: /init, the run's settings and command, /fedfs."""
    config = {
        "FEDFS_NONCE": nonce,
        "FEDFS_EPOCH": str(int(time.time())),
        "FEDFS_WANT_OUT": "1" if want_out else "0",
        "FEDFS_MODULES": " ".join(GUEST_MODULES),
        "FEDFS_NETDEVS": " ".join(GUEST_NETDEVS),
    }
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=1, mtime=0) as gz:
        cpio = _Cpio(gz)
        cpio.file("init", INIT_SCRIPT.read_bytes(), executable=True)
        cpio.file("testbed/config.sh", "".join(f"{k}={shlex.quote(v)}\n" for k, v in config.items()).encode())
        cpio.file("testbed/command.sh", f"exec {shlex.join(command)}\n".encode())
        cpio.dir("out")
        cpio.dir("fedfs")
        for rel, path in _project_files(repo):
            st = path.stat()
            cpio.file(f"fedfs/{rel}", path.read_bytes(), executable=bool(st.st_mode & 0o111), mtime=int(st.st_mtime))
        cpio.close()
    return buf.getvalue()


# ------------------------------------------------------------------------------------------ the console
#: Terminal control sequences (SeaBIOS clears the screen): noise in a log.
_ANSI = re.compile(r"\x1b(?:\[[0-9;?]*[A-Za-z]|[@-~])")


class _Console:
    """Reads QEMU's serial console: echoes and logs it with elapsed seconds, and picks out this run's markers."""

    def __init__(self, nonce: str, log: IO[str], echo: bool, t0: float) -> None:
        self.nonce = nonce
        self.log = log
        self.echo = echo
        self.t0 = t0
        self.ready_at: float | None = None
        self.exit_at: float | None = None
        self.exit_status: int | None = None
        self.out_sha: str | None = None
        self.out_lines: list[str] | None = None  # collecting while not None and out_done is False
        self.out_done = False
        tag = re.escape(nonce)
        self._ready = re.compile(rf"FEDFS_GUEST_READY nonce={tag}\b")
        self._exit = re.compile(rf"FEDFS_GUEST_EXIT=(\d+) nonce={tag}\b")
        self._out_begin = re.compile(rf"FEDFS_OUT_BEGIN nonce={tag} sha256=([0-9a-f]{{64}})")
        self._out_end = re.compile(rf"FEDFS_OUT_END nonce={tag}\b")

    def write(self, line: str, *, show: bool = True) -> None:
        stamped = f"[{time.monotonic() - self.t0:8.3f}] {line}"
        self.log.write(stamped + "\n")
        self.log.flush()
        if self.echo and show:
            print(stamped, flush=True)

    def feed(self, raw: bytes) -> None:
        line = _ANSI.sub("", raw.decode("utf-8", "replace").rstrip("\r\n").replace("\r", ""))
        now = time.monotonic()
        if self.out_lines is not None and not self.out_done:
            if self._out_end.search(line):
                self.out_done = True
                self.write(f"(testbed: /out archive received, {len(self.out_lines)} lines)")
                self.write(line)
            else:
                self.out_lines.append(line.strip())
            return
        if self._ready.search(line) and self.ready_at is None:
            self.ready_at = now
        elif (m := self._exit.search(line)) and self.exit_status is None:
            self.exit_status = int(m.group(1))
            self.exit_at = now
        elif m := self._out_begin.search(line):
            self.out_sha = m.group(1)
            self.out_lines = []
        self.write(line)

    def pump(self, stream: IO[bytes]) -> None:
        for raw in iter(stream.readline, b""):
            self.feed(raw)

    def archive(self) -> bytes:
        """The /out tarball the guest sent, checked against the digest it announced."""
        if self.out_lines is None or not self.out_done or self.out_sha is None:
            raise TestbedError("the guest sent no complete /out archive")
        try:
            data = base64.b64decode("".join(self.out_lines), validate=True)
        except binascii.Error as exc:
            raise TestbedError(f"the /out archive is garbled: {exc}") from exc
        if hashlib.sha256(data).hexdigest() != self.out_sha:
            raise TestbedError("the /out archive does not match its checksum (console noise?)")
        return data


def _unpack_out(data: bytes, out: Path) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        names = [m.name for m in tar.getmembers() if m.isfile()]
        if hasattr(tarfile, "data_filter"):
            tar.extractall(out, filter="data")
        else:  # Python < 3.11.4
            tar.extractall(out)  # our own guest's archive
    return names


@contextlib.contextmanager
def _lock(cache: Path) -> Iterator[None]:
    """One test bed run at a time per cache: builds must not race, and two TCG guests on 2 cores crawl.

    A user who may only read a cache that root built still takes the lock (flock needs no write access).
    """
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / ".lock"
    try:
        f = path.open("a")
    except PermissionError:
        f = path.open("r") if path.exists() else open(os.devnull)
    with f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _say(f"waiting for another test bed run to finish (lock {path})")
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


# ------------------------------------------------------------------------------------------ run
def qemu_argv(vmlinux: Path, initrd: Path, *, mem: int, smp: int) -> list[str]:
    """TCG, never KVM (see the module docstring); no NIC; the serial console on stdio; no reboot on panic."""
    append = "console=ttyS0 panic=-1 quiet loglevel=4 rdinit=/init"
    return [
        "qemu-system-x86_64",
        *("-accel", "tcg,thread=multi", "-cpu", "max", "-m", str(mem), "-smp", str(smp), "-M", "q35"),
        *("-kernel", str(vmlinux), "-initrd", str(initrd), "-append", append),
        *("-nographic", "-serial", "mon:stdio", "-nic", "none", "-no-reboot"),
    ]


def run(
    command: list[str] | None = None,
    *,
    cache: Path | None = None,
    rebuild: bool = False,
    mem: int = 2048,
    smp: int = 2,
    timeout: float = DEFAULT_TIMEOUT,
    out: Path | None = None,
    log: Path | None = None,
    echo: bool = True,
) -> int:
    """Boot the Soft-RoCE guest, run ``command`` in /fedfs there and return its exit status.

    ``timeout`` bounds the guest (boot, command, power-off), not the one-time build.  ``out``: a
    directory that receives whatever the command wrote under /out in the guest.  ``log``: the console
    transcript (default ``<cache>/guest.log``).  ``echo``: stream the console to stdout as it comes.
    Returns 124 on timeout and 125 when the guest stopped without reporting an exit status.
    """
    command = list(command) if command else list(DEFAULT_COMMAND)
    cache = (cache or default_cache()).resolve()
    with _lock(cache):
        # The per-run files go to the cache unless this user may only read it (root built it).
        scratch = cache if os.access(cache, os.W_OK) else Path(tempfile.mkdtemp(prefix="fedfs-testbed-"))
        log = (log or scratch / "guest.log").resolve()
        ensure_host_tools(build=False)
        base = build_base(cache, rebuild=rebuild)
        build_note = "reused" if not base.built else f"built {'+'.join(base.built)}"
        nonce = secrets.token_hex(8)
        overlay = make_overlay(command, nonce=nonce, want_out=out is not None)
        rundir = scratch / "run"
        rundir.mkdir(exist_ok=True)
        for stale in rundir.glob("initrd-*.img"):  # left by a run that was killed; none is running (the lock)
            stale.unlink(missing_ok=True)
        initrd = rundir / f"initrd-{nonce}.img"
        with initrd.open("wb") as f:
            for seg in base.segments:
                with seg.open("rb") as s:
                    shutil.copyfileobj(s, f)
            f.write(overlay)
        _say(f"initramfs {base.size / 2**20:.1f} MiB base + {len(overlay) / 2**10:.0f} KiB project overlay")
        log.parent.mkdir(parents=True, exist_ok=True)
        try:
            with log.open("w") as logf:
                rc, console, times = _boot(base, initrd, command, nonce, logf, mem, smp, timeout, echo)
        finally:
            initrd.unlink(missing_ok=True)
        if out is not None and console.exit_status is not None:
            try:
                names = _unpack_out(console.archive(), out)
                _say(f"/out -> {out}: {len(names)} file(s)")
            except (TestbedError, tarfile.TarError, OSError) as exc:
                _say(f"ERROR: could not unpack /out into {out}: {exc}")
                rc = rc or 1
        boot_s, cmd_s = times
        _say(
            f"summary: build {base.seconds:.1f} s ({build_note}), boot {_secs(boot_s)}, command {_secs(cmd_s)}, "
            f"exit status {rc} (log: {log})"
        )
        return rc


def _secs(s: float | None) -> str:
    return "-" if s is None else f"{s:.1f} s"


def _boot(
    base: Base,
    initrd: Path,
    command: Sequence[str],
    nonce: str,
    logf: IO[str],
    mem: int,
    smp: int,
    timeout: float,
    echo: bool,
) -> tuple[int, _Console, tuple[float | None, float | None]]:
    argv = qemu_argv(base.vmlinux, initrd, mem=mem, smp=smp)
    t0 = time.monotonic()
    console = _Console(nonce, logf, echo, t0)
    console.write(f"(testbed: command: {shlex.join(command)})")
    console.write(f"(testbed: {shlex.join(argv)})")
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    reader = threading.Thread(target=console.pump, args=(proc.stdout,), daemon=True)
    reader.start()
    verdict: int | None = None
    try:
        while proc.poll() is None:
            now = time.monotonic()
            if now - t0 > timeout:
                proc.kill()
                console.write(f"(testbed: timed out after {timeout:.0f} s; qemu killed)")
                verdict = EXIT_TIMEOUT
                break
            if console.exit_at is not None and now - console.exit_at > POWEROFF_GRACE:
                if console.out_lines is None or console.out_done:
                    proc.kill()
                    console.write(f"(testbed: guest did not power off {POWEROFF_GRACE:.0f} s after exiting; killed)")
                    break
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        reader.join(timeout=10)
    boot_s = None if console.ready_at is None else console.ready_at - t0
    cmd_s = None
    if console.ready_at is not None:
        cmd_s = (console.exit_at if console.exit_at is not None else time.monotonic()) - console.ready_at
    if verdict == EXIT_TIMEOUT:
        _say(f"ERROR: the guest did not finish within {timeout:.0f} s (--timeout); console log: {logf.name}")
        return EXIT_TIMEOUT, console, (boot_s, cmd_s)
    if console.exit_status is None:
        where = "before it was ready" if console.ready_at is None else "while the command ran"
        _say(
            f"ERROR: the guest stopped {where} without reporting an exit status (qemu status {proc.returncode}); "
            f"see the console log: {logf.name}"
        )
        return EXIT_NO_STATUS, console, (boot_s, cmd_s)
    return console.exit_status, console, (boot_s, cmd_s)


def unavailable_reason(cache: Path | None = None) -> str | None:
    """Why this machine cannot run the test bed now, or None when it can (root builds what it lacks)."""
    if _is_root():
        if _which("apt-get") is None and missing_tools(build=False):
            return "no qemu-system-x86_64 and no apt-get to install it (needs a Debian host)"
        return None
    missing = missing_tools(build=False)
    if missing:
        return f"not root and host tools missing: {', '.join(sorted(set(missing.values())))}"
    cache = (cache or default_cache()).resolve()
    if not all(_latest_complete(cache / s) for s in ("kernel", "root", "pydeps", "modules")):
        return f"not root and the test bed's base image is not built in {cache} (building it needs root)"
    return None


# ------------------------------------------------------------------------------------------ command line
def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``rxe`` command to an argparse subparsers object (``fednode testbed rxe``)."""
    p = subparsers.add_parser(
        "rxe",
        help="run a command in a QEMU guest with Soft-RoCE (rdma_rxe) devices",
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "The guest has rxe0 (on dummy0), rxe_v0/rxe_v1 (on the veth pair veth0/veth1), all PORT_ACTIVE;\n"
            "the command runs in /fedfs (the project source) with PYTHONPATH=/fedfs and FEDFS_TESTBED=1.\n"
            "Exit status: the command's; 124 on timeout; 125 if the guest reported none; 2 if the build failed."
        ),
    )
    p.add_argument("--rebuild", action="store_true", help="rebuild the cached kernel, root and packages")
    p.add_argument(
        "--cache", type=Path, default=None, help="cache directory (default: $FEDFS_TESTBED_CACHE or .cache/testbed)"
    )
    p.add_argument("--mem", type=int, default=2048, metavar="MIB", help="guest memory (default: 2048)")
    p.add_argument("--smp", type=int, default=2, metavar="N", help="guest CPUs (default: 2)")
    p.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"limit for the guest run, build excluded (default: {DEFAULT_TIMEOUT:.0f})",
    )
    p.add_argument("--out", type=Path, default=None, metavar="DIR", help="copy what the command wrote to /out here")
    p.add_argument("--log", type=Path, default=None, metavar="FILE", help="console log (default: <cache>/guest.log)")
    p.add_argument("--quiet", action="store_true", help="do not stream the guest console (it is still logged)")
    p.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        help=f"command to run in the guest, after -- (default: {shlex.join(DEFAULT_COMMAND)})",
    )
    p.set_defaults(testbed_main=main)
    return p


def main(args: argparse.Namespace) -> int:
    """Run ``rxe`` from parsed arguments; build and environment errors become exit status 2."""
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if args.mem < 256 or args.smp < 1 or args.timeout <= 0:
        print("testbed rxe: --mem must be at least 256, --smp at least 1, --timeout positive", file=sys.stderr)
        return 2
    try:
        return run(
            command or None,
            cache=args.cache,
            rebuild=args.rebuild,
            mem=args.mem,
            smp=args.smp,
            timeout=args.timeout,
            out=args.out,
            log=args.log,
            echo=not args.quiet,
        )
    except TestbedError as exc:
        print(f"testbed rxe: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("testbed rxe: interrupted", file=sys.stderr)
        return 130
