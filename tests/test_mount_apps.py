"""Issue 22's application checks on a 4-agent ``fednode mount``: programs written for a
local file system, run on the mount as a user would run them.

* ``python -m venv`` inside the mount, ``pip install --no-index`` of a wheel from a
  local directory into it (the wheel written by hand, so no build backend is needed;
  this process's pip installs into the venv with ``--python``, as the venv's own would:
  ensurepip's 1,600 files would make the test minutes long), then the installed
  console script runs;
* ``git clone`` of a local repository with symbolic links (to a file, to a directory,
  dangling) and an executable: ``git status`` clean, ``git fsck`` passes, the links'
  targets as committed;
* ``tar -x`` of an archive with hard links, symbolic links and fifos, on the mount and
  in a local directory: ``diff -r --no-dereference`` finds no difference (fifos aside:
  diff calls any two fifos different), and every
  entry's ``lstat`` (type, mode, owner, link count, size, mtime, a link's target)
  agrees, except what the README documents (a directory's link count is 1 on the mount).

The federation and its mount are ``tests.test_mount``'s (``Federation``: agents and
the mount waited for by their readiness lines), in both consistency modes.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import stat
import sys
import zipfile
from pathlib import Path

import pytest

from tests.test_mount import mount_fixtures, sh

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs /dev/fuse and fusermount3 (FUSE 3; ./dev.sh setup installs fuse3)",
)


fed, mnt = mount_fixtures("apps")


# ---------------------------------------------------------------------------- venv + pip
def _wheel(where: Path, name: str = "fedfs_hello", version: str = "1.0") -> Path:
    """A pure-Python wheel with a console script ``fedfs-hello``, written as the wheel
    format says (PEP 427: the files, ``.dist-info`` with METADATA, WHEEL,
    entry_points.txt and a RECORD of their hashes)."""
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": "import sys\n\n\ndef main():\n    print('hello from', sys.prefix)\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: fedfs-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/entry_points.txt": f"[console_scripts]\nfedfs-hello = {name}:main\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = "\n".join(record) + "\n"
    out = where / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for path, text in files.items():
            z.writestr(path, text)
    return out


def test_venv_pip_install_of_a_local_wheel_and_its_console_script(mnt: Path, tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels)
    venv = mnt / "venv"
    # Without pip in the venv: ensurepip unpacks some 1,600 files, half a minute on a loaded machine's
    # local disk already; this test's pip (``--python``) installs into the venv as its own pip would.
    sh([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    py = venv / "bin" / "python"
    assert os.path.islink(py)
    pip = [sys.executable, "-m", "pip", "--python", str(py)]
    env = {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_CACHE_DIR": "1", "PIP_NO_INPUT": "1"}
    sh([*pip, "install", "-q", "--no-index", "--find-links", str(wheels), "fedfs_hello"], env=env)
    assert sh([str(venv / "bin" / "fedfs-hello")]).split() == ["hello", "from", str(venv)]
    assert "fedfs_hello==1.0" in sh([*pip, "list", "--format=freeze"], env=env).split()
    assert sh([str(py), "-c", "import fedfs_hello; print(fedfs_hello.__file__)"]).startswith(str(venv))


# ---------------------------------------------------------------------------- git clone with symlinks
GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"}  # fmt: skip
LINKS = {"link-to-file": "src/main.c", "src/up": "../README", "link-to-dir": "src", "dangling": "no/such/file"}


def test_git_clone_of_a_repository_with_symlinks(mnt: Path, tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), **GIT_ENV}
    src = tmp_path / "origin"
    (src / "src").mkdir(parents=True)
    (src / "README").write_text("hello\n")
    (src / "src" / "main.c").write_text("int main(void) { return 0; }\n")
    (src / "run.sh").write_text("#!/bin/sh\necho run\n")
    (src / "run.sh").chmod(0o755)
    for name, target in LINKS.items():
        os.symlink(target, src / name)
    sh(["git", "init", "-q"], cwd=src, env=env)
    sh(["git", "add", "-A"], cwd=src, env=env)
    sh(["git", "commit", "-q", "-m", "with symlinks"], cwd=src, env=env)

    clone = mnt / "clone"
    sh(["git", "clone", "-q", str(src), str(clone)], env=env)
    assert sh(["git", "status", "--porcelain"], cwd=clone, env=env) == ""
    sh(["git", "fsck", "--strict"], cwd=clone, env=env)
    for name, target in LINKS.items():
        assert os.path.islink(clone / name), name
        assert os.readlink(clone / name) == target
    assert (clone / "link-to-file").read_text() == (src / "src" / "main.c").read_text()  # the kernel follows it
    assert sorted(os.listdir(clone / "link-to-dir")) == ["main.c", "up"]
    assert (clone / "src" / "up").read_text() == "hello\n"
    assert os.stat(clone / "run.sh").st_mode & 0o111
    assert sh(["git", "ls-files", "-s", "link-to-file"], cwd=clone, env=env).startswith("120000 ")


# ---------------------------------------------------------------------------- tar -x with links and fifos
def _tree(root: Path) -> None:
    """What the archive holds: files of several modes, a file with three names, a
    relative, an absolute and a dangling symlink, a symlink to a directory, fifos."""
    (root / "d" / "sub").mkdir(parents=True)
    (root / "d").chmod(0o750)
    (root / "a").write_bytes(b"a" * 5000)
    (root / "exe").write_text("#!/bin/sh\n")
    (root / "exe").chmod(0o755)
    (root / "private").write_text("p")
    (root / "private").chmod(0o600)
    (root / "d" / "sub" / "deep").write_text("deep")
    os.link(root / "a", root / "d" / "a2")  # three names of one file, in two directories
    os.link(root / "a", root / "d" / "sub" / "a3")
    os.link(root / "private", root / "private2")
    os.symlink("a", root / "rel")
    os.symlink("../exe", root / "d" / "up")
    os.symlink("/etc/hostname", root / "abs")
    os.symlink("missing", root / "dangling")
    os.symlink("d/sub", root / "dirlink")
    os.mkfifo(root / "fifo", 0o644)
    os.mkfifo(root / "d" / "sub" / "fifo2", 0o600)


def _lstats(root: Path) -> dict[str, tuple]:
    """Every entry's lstat as the comparison sees it (a directory's link count left out)."""
    out = {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(d, n)
            st = os.lstat(p)
            kind = stat.S_IFMT(st.st_mode)
            out[os.path.relpath(p, root)] = (
                kind, stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid,
                None if kind == stat.S_IFDIR else st.st_nlink,
                st.st_size if kind in (stat.S_IFREG, stat.S_IFLNK) else None,
                st.st_mtime_ns // 10**9,
                os.readlink(p) if kind == stat.S_IFLNK else None,
            )  # fmt: skip
    return out


def test_tar_x_of_hard_links_symlinks_and_fifos_equals_a_local_extraction(mnt: Path, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    _tree(src)
    archive = tmp_path / "t.tar"
    sh(["tar", "-cf", str(archive), "-C", str(src), "."])
    assert "hard link" in sh(["tar", "-tvf", str(archive)]).replace("link to", "hard link")
    local, there = tmp_path / "local", mnt / "x"
    local.mkdir()
    there.mkdir()
    sh(["tar", "-xf", str(archive), "-C", str(local)])
    sh(["tar", "-xf", str(archive), "-C", str(there)])
    # (diff reports two fifos as a difference whatever they are: they are compared by lstat below)
    sh(["diff", "-r", "--no-dereference", "-x", "fifo", "-x", "fifo2", str(local), str(there)])
    want, got = _lstats(local), _lstats(there)
    assert got.keys() == want.keys()
    assert {p: got[p] for p in got if got[p] != want[p]} == {}, {p: want[p] for p in want if got[p] != want[p]}
    assert os.lstat(there / "a").st_ino == os.lstat(there / "d" / "sub" / "a3").st_ino  # one inode
    assert stat.S_ISFIFO(os.lstat(there / "d" / "sub" / "fifo2").st_mode)
