"""fednode.localfs.LocalFS: MemFS parity over a real directory, confinement, autonomy, open files.

The parity test runs random LOCAL_OPS sequences on ``fedsim.memfs.MemFS`` and
on a fresh ``LocalFS`` and demands the same result, or the same exception
class, errno and (federated) path, at every step, and the same tree at the
end -- as LocalFS reports it and as an independent ``os.walk`` of the host
directory sees it.  The other tests pin down what MemFS cannot model:
symlinks and special files, traversal attempts, descriptors, host paths.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import os
import signal
import socket
import stat
import tempfile
import traceback
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fednode import localfs
from fednode.localfs import FOREIGN_ERRNO, LocalFS
from fedsim.memfs import MemFS
from fedsim.protocol.attrs import KEEP, UTIME_OMIT, Attr
from fedsim.protocol.effects import LOCAL_OPS
from fedsim.protocol.names import InvalidPath

# -- both resolvers --------------------------------------------------------------------------


def _has_openat2() -> bool:
    fd = os.open(tempfile.gettempdir(), os.O_PATH | os.O_DIRECTORY)
    try:
        return localfs.openat2_usable(fd)[0]
    finally:
        os.close(fd)


HAS_OPENAT2 = _has_openat2()
RESOLVERS = ["walk", "openat2"] if HAS_OPENAT2 else ["walk"]


@pytest.fixture(autouse=True, params=RESOLVERS)
def resolver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test of this file runs once per resolver this kernel has: each must be exact alone,
    since openat2 is used where it exists and the component walk everywhere else."""
    chosen = request.param

    class Fixed(localfs.LocalFS):
        def __init__(self, root: str | os.PathLike[str], resolver: str = chosen) -> None:
            super().__init__(root, resolver)

    monkeypatch.setitem(globals(), "LocalFS", Fixed)
    return chosen


# -- helpers ------------------------------------------------------------------------------


def disk_tree(root: str) -> dict[str, Any]:
    """What is really under ``root`` (independently of LocalFS): path -> None | bytes | "other"."""
    out: dict[str, Any] = {"/": None}
    for dirpath, dirnames, filenames in os.walk(root):
        rel = "/" + os.path.relpath(dirpath, root).removeprefix(".").lstrip("/")
        base = rel.rstrip("/")
        for name in dirnames + filenames:
            host = os.path.join(dirpath, name)
            fed = f"{base}/{name}"
            mode = os.lstat(host).st_mode
            if stat.S_ISDIR(mode):
                out[fed] = None
            elif stat.S_ISREG(mode):
                out[fed] = Path(host).read_bytes()
            elif stat.S_ISLNK(mode):
                out[fed] = ("symlink", os.readlink(host))
            else:
                out[fed] = ("node", stat.S_IFMT(mode), os.lstat(host).st_rdev)
    return out


def snapshot(top: str) -> dict[str, tuple[Any, ...]]:
    """Every entry under ``top`` with its type, size, mtime and (for files) content."""
    out: dict[str, tuple[Any, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st_ = os.lstat(p)
            content = Path(p).read_bytes() if stat.S_ISREG(st_.st_mode) else None
            out[os.path.relpath(p, top)] = (stat.S_IFMT(st_.st_mode), st_.st_size, st_.st_mtime_ns, content)
    return out


def open_fds(under: str | None = None) -> int:
    """This process's open descriptors; with ``under``, only those naming a
    path below it (other tests' background threads in the same worker, e.g.
    agents' sockets closing, must not make a leak check flaky)."""
    if under is None:
        return len(os.listdir("/proc/self/fd"))
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        n += target == under or target.startswith(under + "/")
    return n


def outcome(fs: Any, op: str, path: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """A comparable result: ("ok", value) or ("error", class, errno, filename)."""
    try:
        value = fs.apply(op, path, args)
    except OSError as e:
        return ("error", type(e), e.errno, e.filename)
    if op == "getattr":  # times, owners and inode numbers are the host's (tests/test_attributes.py)
        return ("ok", value[0], stat.S_IFMT(value[1]), stat.S_IMODE(value[1]), value[5])
    if op == "statfs":  # sizes are the host's
        return ("ok", value[7])
    return ("ok", sorted(value) if op == "list_dirs" else value)


@contextlib.contextmanager
def raises_errno(code: int, filename: str | None = None) -> Iterator[None]:
    """An OSError with ``code`` (and ``filename`` if given) must be raised inside."""
    with pytest.raises(OSError) as info:
        yield
    assert info.value.errno == code, f"expected {errno.errorcode[code]}, got {info.value!r}"
    if filename is not None:
        assert info.value.filename == filename


ARGS: dict[str, tuple[Any, ...]] = {
    "read": (0, 16),
    "write": (0, b"pwned"),
    "truncate": (0,),
    "rename": ("/renamed",),
    "rename_dir": ("/renamed",),
    "setattr": (0o777, KEEP, KEEP, 1, 1),
    "symlink": ("/etc/passwd",),
    "mknod": (stat.S_IFIFO | 0o600,),
    "link": ("/",),
    "getxattr": ("user.a",),
    "setxattr": ("user.a", b"v", 0),
    "removexattr": ("user.a",),
}

#: what each local operation does at a symlink or special file itself (issue 22): the errno it
#: is refused with, or None: served, without following or opening it.  (unlink and rename,
#: which remove or move the entry, are tested apart; readlink is a symlink's only.)
ON_ENTRY: dict[str, int | None] = {
    "create": errno.EEXIST, "mkdir": errno.EEXIST, "symlink": errno.EEXIST, "mknod": errno.EEXIST,
    "link": errno.EEXIST,
    "rmdir": errno.ENOTDIR, "rename_dir": errno.ENOTDIR,
    "listdir": FOREIGN_ERRNO, "list_dirs": FOREIGN_ERRNO, "open": FOREIGN_ERRNO, "read": FOREIGN_ERRNO,
    "write": FOREIGN_ERRNO, "truncate": FOREIGN_ERRNO, "fsync": FOREIGN_ERRNO,
    "stat": None, "getattr": None, "statfs": None, "close": None,
    # Linux keeps user. extended attributes on regular files and directories only
    "getxattr": errno.ENODATA, "listxattr": None, "setxattr": errno.EPERM, "removexattr": errno.EPERM,
}  # fmt: skip


def _at_entry(fs: LocalFS, path: str, symlink: bool) -> None:
    """Every operation but unlink and rename at the symlink or special file ``path``, as ``ON_ENTRY`` says."""
    for op in LOCAL_OPS:
        if op in ("unlink", "rename"):
            continue
        if op == "readlink":
            want = None if symlink else errno.EINVAL
        elif op == "setattr":
            want = errno.EOPNOTSUPP if symlink else None  # a symlink has no mode (Linux); chmod 777 of a node
        else:
            want = ON_ENTRY[op]
        if want is None:
            fs.apply(op, path, ARGS.get(op, ()))
        else:
            with raises_errno(want, path):
                fs.apply(op, path, ARGS.get(op, ()))


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """tmp/root (served) beside tmp/outside (a secret file and a directory)."""
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    (outside / "sub").mkdir(parents=True)
    (outside / "secret.txt").write_bytes(b"top secret")
    (tmp_path / "x").write_bytes(b"sibling of root")
    return root, outside


# -- 1. parity with MemFS ------------------------------------------------------------------

NAMES = ("a", "b")
PATHS = ["/"] + [
    "/" + "/".join(parts)
    for parts in [(a,) for a in NAMES]
    + [(a, b) for a in NAMES for b in NAMES]
    + [(a, b, c) for a in NAMES for b in NAMES for c in NAMES]
]
# Each depth about equally likely, so that operations often meet what earlier ones made.
paths = st.one_of(
    st.sampled_from(["/", "/a", "/b"]), *(st.sampled_from([p for p in PATHS if p.count("/") == d]) for d in (2, 3))
)
# Creations and data operations weighted up, so that sequences build trees worth operating on.
WEIGHTED_OPS = (
    ["create"] * 4
    + ["mkdir"] * 3
    + ["write"] * 3
    + ["read"] * 2
    + ["open"] * 2
    + ["rename"] * 3
    + ["rename_dir"] * 2
    + ["unlink", "rmdir", "listdir", "stat", "close", "list_dirs", "truncate"]
    + ["getattr", "setattr", "statfs", "fsync"]
    + ["symlink"] * 2
    + ["mknod", "readlink"]
    + ["link"] * 2
    + ["setxattr"] * 2
    + ["getxattr", "listxattr", "removexattr"]
)
XATTR_NAMES = st.sampled_from(["user.a", "user.b", "trusted.t", "user.", ""])
ARG_STRATEGIES: dict[str, st.SearchStrategy[tuple[Any, ...]]] = {
    "read": st.tuples(st.integers(-1, 12), st.integers(-1, 12)),
    "write": st.tuples(st.integers(-1, 12), st.binary(max_size=6)),
    "truncate": st.tuples(st.integers(-1, 12)),
    "rename": st.tuples(paths),  # onto files, directories, symlinks, missing names and missing parents
    "rename_dir": st.tuples(paths),  # (as rename) and into its own subtree, onto itself, the root
    "symlink": st.tuples(st.sampled_from(["a", "../b", "/etc", "a/b/../.."])),
    "link": st.tuples(paths),  # (the old name) files, directories, symlinks, missing names, the root
    "mknod": st.tuples(st.sampled_from([stat.S_IFIFO | 0o644, stat.S_IFSOCK | 0o600, stat.S_IFCHR | 0o600, 0o644])),
    # modes that keep the owner's rwx (an agent that is not root must still reach what it made),
    # and one out of range; times exact or omitted (UTIME_NOW is each clock's own)
    "setattr": st.tuples(
        st.sampled_from([KEEP, 0o700, 0o755, 0o751, 0o10000]),
        st.just(KEEP),
        st.just(KEEP),
        st.sampled_from([UTIME_OMIT, 0, 10**18]),
        st.sampled_from([UTIME_OMIT, -(10**9), 1]),
    ),
    # extended attributes: two names, refused ones (a namespace not carried, an empty suffix or name),
    # both flags and a bad one; values within what any file system holds
    "getxattr": st.tuples(XATTR_NAMES),
    "setxattr": st.tuples(XATTR_NAMES, st.binary(max_size=6), st.sampled_from([0, 1, 2, 3, 4])),
    "removexattr": st.tuples(XATTR_NAMES),
}


@contextlib.contextmanager
def _umask_022() -> Iterator[None]:
    """The umask whose modes MemFS gives new entries (0o644 files, 0o755 directories)."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_random_op_sequences_match_memfs_step_by_step(data: st.DataObject) -> None:
    """Each step's path is from the alphabet or, half the time, a path that exists now, so that
    reads, writes, unlinks and rmdirs of real files and directories are common, not flukes."""
    mem = MemFS()
    with tempfile.TemporaryDirectory() as root, _umask_022():
        root = os.path.realpath(root)
        os.chmod(root, 0o755)  # MemFS's root
        with LocalFS(root) as fs:
            for i in range(data.draw(st.integers(0, 40), label="steps")):
                op = data.draw(st.sampled_from(WEIGHTED_OPS))
                path = data.draw(st.one_of(paths, st.sampled_from(sorted(mem.tree()))))
                args = data.draw(ARG_STRATEGIES.get(op, st.just(())))
                expected = outcome(mem, op, path, args)
                got = outcome(fs, op, path, args)
                assert got == expected, f"step {i}: {op}{(path, *args)}: LocalFS {got} != MemFS {expected}"
            assert fs.tree() == mem.tree()
            assert disk_tree(root) == mem.tree()
        assert open_fds(root) == 0  # every descriptor, open files included, released


def test_populate_and_tree_match_memfs(tmp_path: Path) -> None:
    files = [("/a/b/f", 5), ("/a/g", b"hello"), ("/h", 0), ("/c/d/e/big", 70000), ("/.hidden", b"dot")]
    dirs = ["/empty", "/a/b/sub"]
    mem = MemFS()
    mem.populate([(p, c if isinstance(c, int) else len(c)) for p, c in files], dirs)
    for p, c in files:
        if isinstance(c, bytes):
            mem.write(p, 0, c)
    with LocalFS(tmp_path) as fs:
        fs.populate(files, dirs)
        assert fs.tree() == mem.tree() == disk_tree(str(tmp_path))
        assert fs.list_dirs("/") == sorted(mem.list_dirs("/"))
        assert fs.list_dirs("/a") == sorted(mem.list_dirs("/a"))
        with raises_errno(errno.EEXIST, "/h"):
            fs.populate([("/h", 1)])


def test_names_needing_the_slow_canonical_check_are_served(tmp_path: Path) -> None:
    with LocalFS(tmp_path) as fs:
        for p in ("/.hidden", "/.d/..x", "/caf\u00e9/\u00fcber", "/" + "n" * 255):
            fs.create(p)
            assert fs.stat(p) == (False, 0)
        assert ("caf\u00e9", True) in fs.listdir("/")
        assert (tmp_path / ".d" / "..x").is_file()


def test_zero_length_write_past_end_extends_the_file_like_memfs(tmp_path: Path) -> None:
    mem = MemFS()
    mem.create("/f")
    mem.write("/f", 7, b"")
    with LocalFS(tmp_path) as fs:
        fs.create("/f")
        assert fs.write("/f", 7, b"") == 0
        assert fs.read("/f", 0, 100) == mem.read("/f", 0, 100) == bytes(7)
        fs.open("/f")
        fs.write("/f", 9, b"")
        assert fs.stat("/f") == (False, 9)
        fs.close("/f")


def test_huge_read_size_is_clamped_to_the_file(tmp_path: Path) -> None:
    with LocalFS(tmp_path) as fs:
        fs.populate([("/f", b"abc")])
        assert fs.read("/f", 1, 1 << 45) == b"bc"  # no terabyte buffer allocated
        fs.open("/f")
        assert fs.read("/f", 0, 1 << 45) == b"abc"
        assert fs.read("/f", 10, 1 << 45) == b""
        fs.close("/f")


def test_unknown_op_is_a_value_error(tmp_path: Path) -> None:
    with LocalFS(tmp_path) as fs, pytest.raises(ValueError, match="unknown local operation 'chmod'"):
        fs.apply("chmod", "/a", (0o600,))
    assert set(LOCAL_OPS) <= {name for name in dir(LocalFS) if not name.startswith("_")}


# -- 2. traversal attempts --------------------------------------------------------------------


class _Str(str):
    pass


BAD_PATHS: list[Any] = [
    "../../etc/passwd",
    "../outside/secret.txt",
    "/../outside/secret.txt",
    "/../x",
    "/..",
    "a/b",
    "outside/secret.txt",
    "",
    "/a/../b",
    "/a/./b",
    "/./a",
    "/a/.",
    "/a//b",
    "/a/",
    "/a\x00b",
    "\x00",
    "/" + "x" * 256,
    b"/a",
    None,
    7,
    ["/a"],
    PurePosixPath("/a"),
    _Str("/a"),
]


class _Tripwire:
    """Stands in for the ``os`` module: any use of it is a test failure."""

    def __init__(self) -> None:
        self.touched: list[str] = []

    def __getattr__(self, name: str) -> Any:
        self.touched.append(name)
        raise AssertionError(f"os.{name} used while refusing a bad path")


@pytest.mark.parametrize("bad", BAD_PATHS, ids=repr)
def test_traversal_attempts_are_refused_with_einval_before_any_system_call(
    bad: Any, layout: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _ = layout
    before = snapshot(str(root.parent))
    with LocalFS(root) as fs:
        fs.populate([("/a/f", b"x")])
        inside = snapshot(str(root.parent))
        tripwire = _Tripwire()
        # another test's LocalFS left to the cyclic collector (its bound-method table is a cycle)
        # must not close its descriptors through the tripwire while it is armed
        gc.collect()
        monkeypatch.setattr(localfs, "os", tripwire)
        for op in LOCAL_OPS:
            with pytest.raises(InvalidPath) as info:
                fs.apply(op, bad, ARGS.get(op, ()))
            assert info.value.errno == errno.EINVAL
        with pytest.raises(InvalidPath):
            fs.populate([(bad, b"x")])
        with pytest.raises(InvalidPath):
            fs.rename("/a/f", bad)  # a rename's target is confined like any path
        assert tripwire.touched == []
        monkeypatch.undo()
    assert snapshot(str(root.parent)) == inside
    assert {k for k in inside if not k.startswith("root")} == {k for k in before if not k.startswith("root")}


# -- 3. symlinks and special files --------------------------------------------------------------


@pytest.fixture
def linked(layout: tuple[Path, Path]) -> Iterator[tuple[LocalFS, Path, Path]]:
    root, outside = layout
    (root / "real").mkdir()
    (root / "real" / "mine.txt").write_bytes(b"mine")
    os.symlink(outside, root / "link")  # absolute, to a directory outside
    os.symlink("../outside", root / "rel")  # relative, to the same
    os.symlink(outside / "secret.txt", root / "flink")  # to a file outside
    os.symlink(outside / "new.txt", root / "dangling")  # to a file that does not exist (yet)
    os.symlink(outside, root / "real" / "inner")  # a link one level down
    os.symlink("mine.txt", root / "real" / "same")  # a link to a file inside the root: still refused
    fs = LocalFS(root)
    yield fs, root, outside
    fs.close_all()


LINKS = ["/link", "/rel", "/flink", "/dangling", "/real/inner", "/real/same"]
DIR_LINKS = ["/link", "/rel", "/real/inner"]


def test_symlinks_are_served_as_entries_and_never_followed(linked: tuple[LocalFS, Path, Path]) -> None:
    """A symlink is an entry (issue 22): listed, its own attributes, its target
    read verbatim, removed and renamed; nothing ever follows it, as the last
    component or as an intermediate one, whatever it points at (outside the
    root, absolute or relative, dangling, or inside the root)."""
    fs, root, outside = linked
    before = snapshot(str(outside))
    for link in LINKS:
        _at_entry(fs, link, symlink=True)
        target = os.readlink(root / link.lstrip("/"))
        assert fs.readlink(link) == target
        a = fs.getattr(link)
        assert stat.S_ISLNK(a[1]) and not a[0] and a[5] == len(os.fsencode(target))
        assert fs.stat(link) == (False, len(os.fsencode(target)))
        assert os.path.islink(root / link.lstrip("/")), f"{link} was removed"
    for link in DIR_LINKS:
        through = [
            ("stat", f"{link}/secret.txt", ()),
            ("getattr", f"{link}/secret.txt", ()),
            ("setattr", f"{link}/secret.txt", (0o777, KEEP, KEEP, 1, 1)),
            ("read", f"{link}/secret.txt", (0, 16)),
            ("write", f"{link}/secret.txt", (0, b"pwned")),
            ("open", f"{link}/secret.txt", ()),
            ("unlink", f"{link}/secret.txt", ()),
            ("readlink", f"{link}/secret.txt", ()),
            ("rename", f"{link}/secret.txt", ("/stolen",)),
            ("rmdir", f"{link}/sub", ()),
            ("listdir", f"{link}/sub", ()),
            ("list_dirs", f"{link}/sub", ()),
            ("create", f"{link}/new.txt", ()),
            ("create", f"{link}/sub/new.txt", ()),
            ("mkdir", f"{link}/newdir", ()),
            ("mkdir", f"{link}/sub/x/y", ()),
            ("symlink", f"{link}/sub/ln", ("/etc",)),
            ("mknod", f"{link}/fifo", (stat.S_IFIFO | 0o600,)),
        ]
        for op, path, args in through:
            with raises_errno(FOREIGN_ERRNO, link):
                fs.apply(op, path, args)
    # a symlink's own times change, never its target's
    fs.setattr("/flink", KEEP, KEEP, KEEP, 10**9, 2 * 10**9)
    assert os.lstat(root / "flink").st_mtime_ns == 2 * 10**9
    assert snapshot(str(outside)) == before  # unchanged, and nothing new appeared outside
    # moved and removed as entries: the link goes, what it pointed at stays
    fs.rename("/flink", "/real/moved")
    assert fs.readlink("/real/moved") == str(outside / "secret.txt")
    fs.unlink("/real/moved")
    fs.unlink("/link")
    assert not os.path.lexists(root / "real" / "moved") and not os.path.lexists(root / "link")
    assert snapshot(str(outside)) == before
    assert not (outside / "new.txt").exists()
    assert (root / "real" / "mine.txt").read_bytes() == b"mine"


def test_symlinks_made_hold_any_target_verbatim_and_never_follow_it(layout: tuple[Path, Path]) -> None:
    """``symlink`` stores the target as data (``symlinkat`` on the confined parent):
    targets leaving the root are stored and read back, and lead nowhere."""
    root, outside = layout
    before = snapshot(str(outside))
    with LocalFS(root) as fs:
        for i, target in enumerate(["../outside/secret.txt", str(outside), "/etc/passwd", "../" * 40, "é/ü"]):
            assert fs.symlink(f"/d/l{i}", target) == (["/d"] if i == 0 else [])
            assert fs.readlink(f"/d/l{i}") == os.readlink(root / "d" / f"l{i}") == target
            with raises_errno(FOREIGN_ERRNO, f"/d/l{i}"):
                fs.read(f"/d/l{i}", 0, 100)
            with raises_errno(FOREIGN_ERRNO, f"/d/l{i}"):
                fs.listdir(f"/d/l{i}")
        for bad, code in (("", errno.ENOENT), ("a\x00b", errno.EINVAL), ("x" * 4096, errno.ENAMETOOLONG)):
            with raises_errno(code, "/d/bad"):
                fs.symlink("/d/bad", bad)
        assert not os.path.lexists(root / "d" / "bad")
        assert fs.mknod("/d/p", stat.S_IFIFO | 0o666) == []
        assert stat.S_ISFIFO(os.lstat(root / "d" / "p").st_mode)
        if os.geteuid() == 0:  # a device: the local layer makes what its home asks (who may is the
            # protocol's: attrs.check_device), with its number and owner, on the confined parent
            assert fs.mknod("/d/c", stat.S_IFCHR | 0o600, os.makedev(1, 3), 4321, 8765) == []
            made = os.lstat(root / "d" / "c")
            assert stat.S_ISCHR(made.st_mode) and made.st_rdev == os.makedev(1, 3)
            assert (made.st_uid, made.st_gid) == (4321, 8765)
        with raises_errno(errno.EINVAL, "/d/n"):
            fs.mknod("/d/n", stat.S_IFBLK | 0o600, -1)
        with raises_errno(errno.EINVAL, "/d/r"):
            fs.mknod("/d/r", stat.S_IFREG | 0o600)
    assert snapshot(str(outside)) == before


def test_symlinked_intermediate_directory_is_not_followed_by_create_or_mkdir(
    linked: tuple[LocalFS, Path, Path],
) -> None:
    fs, root, _ = linked
    before = snapshot(str(root.parent))
    for path in ("/link/a", "/link/a/b/c", "/real/inner/sub/z", "/rel/q"):
        with raises_errno(FOREIGN_ERRNO):
            fs.create(path)
        with raises_errno(FOREIGN_ERRNO):
            fs.mkdir(path)
        with raises_errno(FOREIGN_ERRNO):
            fs.symlink(path, "x")
    assert snapshot(str(root.parent)) == before


def test_listings_show_symlinks_and_special_files_as_files(
    linked: tuple[LocalFS, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    fs, root, outside = linked
    os.mkfifo(root / "fifo")
    monkeypatch.chdir(root)  # a unix socket's path must be short: bind it relative to the root
    with socket.socket(socket.AF_UNIX) as s:
        s.bind("sock")
        names = ["dangling", "fifo", "flink", "link", "rel", "sock"]
        assert fs.listdir("/") == sorted([(n, False) for n in names] + [("real", True)])
        assert fs.listdir("/real") == [("inner", False), ("mine.txt", False), ("same", False)]
        assert fs.list_dirs("/") == ["/", "/real"]  # no symlinked directory is entered
        tree = fs.tree()
        assert tree["/link"] == ("symlink", str(outside)) and tree["/rel"] == ("symlink", "../outside")
        assert tree["/fifo"] == ("node", stat.S_IFIFO, 0) and tree["/sock"] == ("node", stat.S_IFSOCK, 0)
        assert tree["/real/mine.txt"] == b"mine" and "/link/secret.txt" not in tree


@contextlib.contextmanager
def _no_hang(seconds: int = 5) -> Iterator[None]:
    """Fail, rather than hang the suite, if a special file blocks."""

    def alarm(*_: object) -> None:
        raise TimeoutError("LocalFS blocked on a special file")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_special_files_are_never_opened_and_never_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    os.mkfifo(tmp_path / "fifo")
    specials = ["/fifo", "/sock"]
    try:
        os.mknod(tmp_path / "null", stat.S_IFCHR | 0o600, os.makedev(1, 3))  # /dev/null's numbers
        specials.append("/null")
    except (PermissionError, OSError):
        pass  # not privileged: fifos and sockets still cover the policy
    monkeypatch.chdir(tmp_path)
    with socket.socket(socket.AF_UNIX) as s, LocalFS(tmp_path) as fs, _no_hang():
        s.bind("sock")
        for path in specials:
            _at_entry(fs, path, symlink=False)
            with raises_errno(FOREIGN_ERRNO, path):
                fs.create(f"{path}/below")
            assert os.path.lexists(tmp_path / path.lstrip("/"))
        assert fs.listdir("/") == sorted((p[1:], False) for p in specials)
        if "/null" in specials:  # a device's number travels in getattr's size (attrs.Attr.rdev)
            a = Attr(*fs.getattr("/null"))
            assert stat.S_ISCHR(a.mode) and a.rdev == os.makedev(1, 3) and a.st_size == 0
            assert fs.stat("/null") == (False, 0)
        for path in specials:
            fs.unlink(path)
            assert not os.path.lexists(tmp_path / path.lstrip("/"))


def test_symlink_as_the_root_argument_is_resolved_once(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    alias = root.parent / "alias"
    os.symlink(root, alias)
    with LocalFS(alias) as fs:
        fs.create("/via/alias")
        assert (root / "via" / "alias").is_file()
        os.unlink(alias)
        os.symlink(outside, alias)  # retargeting the alias afterwards does not move the served tree
        assert fs.listdir("/") == [("via", True)]
        with raises_errno(errno.ENOENT, "/secret.txt"):
            fs.stat("/secret.txt")


# -- 4. autonomy ---------------------------------------------------------------------------------


def test_tree_holds_exactly_what_the_operations_made(tmp_path: Path) -> None:
    steps: list[tuple[str, str, tuple[Any, ...]]] = [
        ("create", "/a/b/f", ()),
        ("mkdir", "/a/c/d", ()),
        ("write", "/a/b/f", (0, b"data")),
        ("open", "/a/b/f", ()),
        ("write", "/a/b/f", (10, b"more")),
        ("read", "/a/b/f", (0, 100)),
        ("close", "/a/b/f", ()),
        ("create", "/.hidden", ()),
        ("create", "/gone", ()),
        ("open", "/gone", ()),
        ("unlink", "/gone", ()),
        ("mkdir", "/tmpdir", ()),
        ("rmdir", "/tmpdir", ()),
        ("listdir", "/a", ()),
        ("list_dirs", "/", ()),
        ("stat", "/a/b/f", ()),
    ]
    mem = MemFS()
    with LocalFS(tmp_path) as fs:
        for op, path, args in steps:
            assert outcome(fs, op, path, args) == outcome(mem, op, path, args)
    assert disk_tree(str(tmp_path)) == mem.tree()  # no hidden, temporary or lock files of its own
    for entry in [tmp_path, *tmp_path.rglob("*")]:
        try:
            xattrs = os.listxattr(entry, follow_symlinks=False)
        except OSError:  # the file system has no xattrs at all
            continue
        assert [x for x in xattrs if not x.startswith("security.")] == [], entry


# -- 5. open files -----------------------------------------------------------------------------


class _CountingOS:
    """Forwards to ``os`` and records which functions LocalFS calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        real = getattr(os, name)
        if callable(real):
            self.calls.append(name)
        return real


def test_open_file_reads_and_writes_match_direct_file_access(tmp_path: Path) -> None:
    content = bytes(range(256)) * 64
    with LocalFS(tmp_path) as fs:
        fs.populate([("/d/f", content)])
        host = tmp_path / "d" / "f"
        fs.open("/d/f")
        for offset, size in [(0, 16), (100, 4096), (16380, 100), (20000, 5), (0, 0)]:
            assert fs.read("/d/f", offset, size) == host.read_bytes()[offset : offset + size]
        assert fs.write("/d/f", 10, b"HELLO") == 5
        assert host.read_bytes()[10:15] == b"HELLO"
        assert fs.write("/d/f", 20000, b"tail") == 4  # past the end: a zero-filled gap
        assert host.read_bytes() == content[:10] + b"HELLO" + content[15:] + bytes(20000 - 16384) + b"tail"
        fs.close("/d/f")
        assert fs.read("/d/f", 0, 30000) == host.read_bytes()  # and the same without the descriptor
        with raises_errno(errno.EINVAL, "/d/f"):
            fs.read("/d/f", -1, 1)


def test_io_on_an_open_file_uses_its_descriptor_not_the_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with LocalFS(tmp_path) as fs:
        fs.populate([("/d/f", b"0123456789")])
        fs.open("/d/f")
        fs.open("/d/f")  # reference counted: one descriptor
        spy = _CountingOS()
        monkeypatch.setattr(localfs, "os", spy)
        if localfs._openat2 is not None:
            raw = localfs._openat2
            monkeypatch.setattr(localfs, "_openat2", lambda *a: spy.calls.append("openat2") or raw(*a))
        assert fs.read("/d/f", 2, 3) == b"234"
        assert fs.write("/d/f", 0, b"ab") == 2
        assert spy.calls == ["pread", "pwrite"]  # no open, no walk, no stat
        fs.close("/d/f")
        assert fs.read("/d/f", 0, 4) == b"ab23"
        assert "open" not in spy.calls  # one close left: still open
        fs.close("/d/f")
        assert spy.calls[-1] == "close"  # the last close released the descriptor
        spy.calls.clear()
        assert fs.read("/d/f", 0, 4) == b"ab23"
        opened = "openat2" if fs.resolver == "openat2" else "open"
        assert opened in spy.calls and spy.calls[-1] == "close"  # not open: a temporary descriptor


def test_descriptors_are_released_by_close_and_close_all(tmp_path: Path) -> None:
    base = open_fds(str(tmp_path.resolve()))
    fs = LocalFS(tmp_path)
    assert open_fds(str(tmp_path.resolve())) == base + 1  # the root
    fs.populate([("/a", b"1"), ("/b", b"2"), ("/c/d", b"3")])
    for p in ("/a", "/b", "/c/d", "/a"):
        fs.open(p)
    assert open_fds(str(tmp_path.resolve())) == base + 4
    fs.close("/a")
    fs.close("/b")
    fs.close("/nonexistent")  # like MemFS: closing what is not open is not an error
    assert open_fds(str(tmp_path.resolve())) == base + 3  # /a still has one reference
    fs.close_all()
    assert open_fds(str(tmp_path.resolve())) == base
    with raises_errno(errno.EBADF, "/a"):
        fs.stat("/a")
    with raises_errno(errno.EBADF, "/c/d"):
        fs.read("/c/d", 0, 1)
    fs.close_all()  # idempotent


def test_unlink_of_an_open_file_succeeds_and_the_path_then_answers_like_memfs(tmp_path: Path) -> None:
    base = open_fds(str(tmp_path.resolve()))
    mem = MemFS()
    with LocalFS(tmp_path) as fs:
        for f in (fs, mem):
            f.create("/f")
            f.write("/f", 0, b"old")
            f.open("/f")
        for op, args in [
            ("unlink", ()),
            ("read", (0, 10)),
            ("write", (0, b"x")),
            ("stat", ()),
            ("close", ()),
            ("create", ()),
            ("read", (0, 10)),
            ("write", (0, b"new")),
            ("read", (0, 10)),
        ]:
            assert outcome(fs, op, "/f", args) == outcome(mem, op, "/f", args), op
        assert not (tmp_path / "f").exists() or (tmp_path / "f").read_bytes() == b"new"
    assert open_fds(str(tmp_path.resolve())) == base


def test_reopen_after_outside_replacement_follows_the_new_file(tmp_path: Path) -> None:
    with LocalFS(tmp_path) as fs:
        fs.populate([("/f", b"first")])
        fs.open("/f")
        os.unlink(tmp_path / "f")
        (tmp_path / "f").write_bytes(b"second")
        assert fs.read("/f", 0, 10) == b"first"  # documented: an open path keeps its file until reopened
        fs.open("/f")
        assert fs.read("/f", 0, 10) == b"second"
        os.unlink(tmp_path / "f")
        with raises_errno(errno.ENOENT, "/f"):
            fs.open("/f")
        with raises_errno(errno.ENOENT, "/f"):
            fs.read("/f", 0, 10)  # the stale descriptor was dropped


# -- 6. error paths are federated -------------------------------------------------------------------


def test_errors_carry_the_federated_path_not_the_host_path(linked: tuple[LocalFS, Path, Path]) -> None:
    fs, root, _ = linked
    fs.populate([("/d/f", b"x")])
    host = str(root)
    cases = [
        ("stat", "/nope/deeper", (), errno.ENOENT, "/nope/deeper"),
        ("create", "/d/f/g", (), errno.ENOTDIR, "/d/f"),
        ("mkdir", "/d/f", (), errno.EEXIST, "/d/f"),
        ("create", "/d", (), errno.EEXIST, "/d"),
        ("unlink", "/d", (), errno.EISDIR, "/d"),
        ("rmdir", "/d", (), errno.ENOTEMPTY, "/d"),
        ("rmdir", "/d/f", (), errno.ENOTDIR, "/d/f"),
        ("rmdir", "/", (), errno.ENOTEMPTY, "/"),
        ("listdir", "/d/f", (), errno.ENOTDIR, "/d/f"),
        ("read", "/d/f", (-1, 1), errno.EINVAL, "/d/f"),
        ("write", "/d/missing", (0, b"x"), errno.ENOENT, "/d/missing"),
        ("open", "/d", (), errno.EISDIR, "/d"),
        ("read", "/link/secret.txt", (0, 1), FOREIGN_ERRNO, "/link"),
        ("open", "/flink", (), FOREIGN_ERRNO, "/flink"),
        ("readlink", "/d/f", (), errno.EINVAL, "/d/f"),
    ]
    for op, path, args, code, filename in cases:
        with pytest.raises(OSError) as info:
            fs.apply(op, path, args)
        e = info.value
        assert (e.errno, e.filename) == (code, filename), (op, path, e)
        text = str(e) + "".join(traceback.format_exception(e))
        assert host not in text, (op, path, text)
    with pytest.raises(InvalidPath) as bad:
        fs.stat("/../" + host)
    assert bad.value.errno == errno.EINVAL
    assert "canonical" in str(bad.value) or "not allowed" in str(bad.value)


def test_an_empty_root_cannot_be_removed(tmp_path: Path) -> None:
    with LocalFS(tmp_path) as fs, raises_errno(errno.EBUSY, "/"):
        fs.rmdir("/")


# -- 7. bad roots -----------------------------------------------------------------------------------


def test_bad_root_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        LocalFS(tmp_path / "missing")
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(ValueError, match="is not a directory"):
        LocalFS(tmp_path / "file")
    os.symlink(tmp_path / "file", tmp_path / "to-file")
    with pytest.raises(ValueError, match="is not a directory"):
        LocalFS(tmp_path / "to-file")
    os.symlink(tmp_path / "missing", tmp_path / "dangling")
    with pytest.raises(ValueError, match="does not exist"):
        LocalFS(tmp_path / "dangling")


def test_rename_replaces_the_target_atomically_and_keeps_its_content(tmp_path: Path) -> None:
    """One renameat: the target's inode is swapped, never removed first, and a
    descriptor held for either path is dropped (neither path names its file any more)."""
    with LocalFS(tmp_path) as fs:
        fs.populate([("/d/a", b"new content"), ("/d/b", b"old target")])
        fs.open("/d/b")
        before = os.stat(tmp_path / "d" / "a").st_ino
        fs.rename("/d/a", "/d/b")
        assert os.stat(tmp_path / "d" / "b").st_ino == before
        assert fs.read("/d/b", 0, 100) == b"new content"
        with raises_errno(errno.ENOENT, "/d/a"):
            fs.stat("/d/a")
        fs.close("/d/b")
        fs.truncate("/d/b", 3)
        assert (tmp_path / "d" / "b").read_bytes() == b"new"
        with raises_errno(errno.EISDIR, "/d"):
            fs.rename("/d/b", "/d")


# -- 7. the resolvers: openat2 and the component walk ------------------------------------------------


def test_resolver_choice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, resolver: str) -> None:
    with localfs.LocalFS(tmp_path, resolver) as fs:
        assert fs.resolver == resolver
        assert resolver in repr(fs)
    with localfs.LocalFS(tmp_path) as fs:  # auto: openat2 wherever the kernel has it
        assert fs.resolver == ("openat2" if HAS_OPENAT2 else "walk")
    with pytest.raises(ValueError, match="resolver must be"):
        localfs.LocalFS(tmp_path, "fast")


@pytest.mark.parametrize("refusal", [errno.ENOSYS, errno.EPERM, errno.E2BIG])
def test_a_kernel_without_openat2_gets_the_component_walk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refusal: int, resolver: str
) -> None:
    """ENOSYS (before Linux 5.6), EPERM (a seccomp filter), E2BIG (an older open_how): auto falls back
    to the walk and still serves; asking for openat2 outright is an error that says why."""
    import ctypes

    def refused(*_: object) -> int:
        ctypes.set_errno(refusal)
        return -1

    monkeypatch.setattr(localfs, "_openat2", refused)
    base = open_fds(str(tmp_path.resolve()))
    with localfs.LocalFS(tmp_path) as fs:
        assert fs.resolver == "walk"
        fs.create("/a/b/c")
        assert fs.stat("/a/b/c") == (False, 0)
    with pytest.raises(ValueError, match=errno.errorcode[refusal]):
        localfs.LocalFS(tmp_path, "openat2")
    monkeypatch.setattr(localfs, "_openat2", None)
    with pytest.raises(ValueError, match="not available"):
        localfs.LocalFS(tmp_path, "openat2")
    assert open_fds(str(tmp_path.resolve())) == base  # the refused constructor released the root
    reused = os.open(tmp_path, os.O_RDONLY)  # most likely the refused root's number, now someone else's
    try:
        gc.collect()  # the half-made LocalFS's finalizer must not close it again
        os.fstat(reused)
    finally:
        os.close(reused)


@pytest.mark.skipif(not HAS_OPENAT2, reason="this kernel has no openat2")
def test_openat2_flags_refuse_dotdot_absolute_paths_and_symlinks(layout: tuple[Path, Path], resolver: str) -> None:
    """The kernel-level guarantee on its own, below LocalFS's path check: with the flags LocalFS
    uses, no ".." may climb out, no absolute path may jump, and no symlink is followed, at any
    component, whether it points inside or outside."""
    import ctypes

    root, outside = layout
    (root / "d").mkdir()
    (root / "d" / "f").write_bytes(b"in")
    os.symlink(outside, root / "out")
    os.symlink("d", root / "in")
    os.symlink("f", root / "d" / "lf")
    rfd = os.open(root, os.O_PATH | os.O_DIRECTORY)
    try:
        cases: dict[bytes, int | tuple[int, ...]] = {
            b"..": errno.EXDEV,
            b"../outside/secret.txt": errno.EXDEV,
            b"d/../../x": errno.EXDEV,
            str(outside / "secret.txt").encode(): errno.EXDEV,
            b"out/secret.txt": errno.ELOOP,
            b"in/f": errno.ELOOP,
            # a symlink as the last component: ELOOP, or ENOTDIR from O_DIRECTORY|O_NOFOLLOW
            b"out": (errno.ELOOP, errno.ENOTDIR),
            b"d/lf": (errno.ELOOP, errno.ENOTDIR),
        }
        for how in (localfs._HOW_WALK, localfs._how(os.O_RDONLY | localfs._FILE), localfs._HOW_DIR_READ):
            for path, code in cases.items():
                ctypes.set_errno(0)
                fd = localfs._openat2(rfd, path, how)
                if fd >= 0:
                    os.close(fd)
                assert fd == -1, f"openat2 opened {path!r}"
                got = ctypes.get_errno()
                assert got in (code if isinstance(code, tuple) else (code,)), (path, errno.errorcode.get(got))
        fd = localfs._openat2(rfd, b"d/f", localfs._how(os.O_RDONLY | localfs._FILE))
        assert fd >= 0
        assert os.read(fd, 10) == b"in"
        os.close(fd)
    finally:
        os.close(rfd)


def test_a_directory_renamed_out_of_the_root_takes_nothing_of_ours_with_it(layout: tuple[Path, Path]) -> None:
    """Resolution is per operation: after a local user moves /a out of the root (between two
    operations, outside the federation), nothing can reach the moved tree any more, and what is
    made at /a/b next is made inside the root."""
    root, outside = layout
    with LocalFS(root) as fs:
        fs.populate([("/a/b/f", b"old"), ("/a/b/c/g", b"deep")])
        assert fs.stat("/a/b/f") == (False, 3)
        assert fs.listdir("/a/b") == [("c", True), ("f", False)]
        os.rename(root / "a", outside / "a")
        moved = snapshot(str(outside))
        for op, args in [("stat", ()), ("read", (0, 10)), ("write", (0, b"x")), ("open", ()), ("unlink", ())]:
            with raises_errno(errno.ENOENT, "/a/b/f"):
                fs.apply(op, "/a/b/f", args)
        with raises_errno(errno.ENOENT, "/a/b"):
            fs.listdir("/a/b")
        with raises_errno(errno.ENOENT, "/a/b/c"):
            fs.rmdir("/a/b/c")
        assert fs.list_dirs("/a") == []
        assert fs.create("/a/b/f") == ["/a", "/a/b"]  # made afresh inside the root
        assert fs.mkdir("/a/b/c") == ["/a/b/c"]
        fs.write("/a/b/f", 0, b"new")
        assert snapshot(str(outside)) == moved  # the moved tree was not touched
        assert (root / "a" / "b" / "f").read_bytes() == b"new"
        assert (outside / "a" / "b" / "f").read_bytes() == b"old"


def test_a_directory_replaced_by_a_symlink_or_a_new_directory_is_seen_at_once(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    with LocalFS(root) as fs:
        fs.populate([("/a/b/f", b"one")])
        assert fs.read("/a/b/f", 0, 10) == b"one"
        # Replaced by a symlink to the moved directory, outside: refused, never followed.
        os.rename(root / "a", outside / "a")
        os.symlink(outside / "a", root / "a")
        moved = snapshot(str(outside))
        for op, path, args in [
            ("stat", "/a/b/f", ()),
            ("read", "/a/b/f", (0, 10)),
            ("open", "/a/b/f", ()),
            ("listdir", "/a/b", ()),
            ("create", "/a/b/g", ()),
            ("mkdir", "/a/b/h", ()),
            ("unlink", "/a/b/f", ()),
            ("rmdir", "/a/b", ()),
        ]:
            with raises_errno(FOREIGN_ERRNO, "/a"):
                fs.apply(op, path, args)
        assert snapshot(str(outside)) == moved
        # Replaced by a new directory: the next operation sees the new one.
        os.unlink(root / "a")
        (root / "a" / "b").mkdir(parents=True)
        (root / "a" / "b" / "f").write_bytes(b"two")
        assert fs.read("/a/b/f", 0, 10) == b"two"
        assert fs.listdir("/a/b") == [("f", False)]
        # Removed: gone for every operation, and nothing is made anywhere but in the root.
        (root / "a" / "b" / "f").unlink()
        (root / "a" / "b").rmdir()
        with raises_errno(errno.ENOENT, "/a/b/f"):
            fs.stat("/a/b/f")
        assert fs.create("/a/b/f") == ["/a/b"]
        assert (root / "a" / "b" / "f").is_file()
        assert snapshot(str(outside)) == moved


def test_an_intermediate_file_or_fifo_in_place_of_a_directory(tmp_path: Path) -> None:
    """The openat2 fast path fails on these and the component walk gives MemFS's exact answers."""
    with LocalFS(tmp_path) as fs:
        fs.populate([("/a/f", b"x")])
        os.mkfifo(tmp_path / "a" / "p")
        with _no_hang():
            for op in ("stat", "unlink", "listdir", "open"):
                with raises_errno(errno.ENOENT, "/a/f/g/h"):
                    fs.apply(op, "/a/f/g/h", ())
                with raises_errno(FOREIGN_ERRNO, "/a/p"):
                    fs.apply(op, "/a/p/g/h", ())
            with raises_errno(errno.ENOTDIR, "/a/f"):
                fs.create("/a/f/g/h")
            with raises_errno(FOREIGN_ERRNO, "/a/p"):
                fs.mkdir("/a/p/g/h")
