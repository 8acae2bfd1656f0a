"""The mount beside a local file system (issue 22): sequences of system calls run
in a directory of a ``fednode mount`` of a 4-agent federation and in a plain
local directory of this machine, as root and as an ordinary user; each call's
result (its value or its errno) and the final trees must agree.

``RUNNER`` is the program that makes the calls: standard library only, so that
any user's ``/usr/bin/python3`` runs it (``setpriv`` to the user, as
``tests/test_mount.py``'s ``as_user``); it reads the root and the calls as JSON
on stdin and prints one result per call.  ``snapshot`` reads a tree as root:
names, types, modes, owners, sizes, device numbers, link counts, contents, symlink
targets, ``user.`` and ``trusted.`` extended attributes, and the timestamps by class only (an explicit
time a ``utime`` set, or "now": the two file systems run at different times).
POSIX's timestamp rules are checked call by call instead: the runner reads the
mtime and ctime of each call's file and parent(s) before and after it (``probes``),
and each result carries how they moved ("+" advanced, "=" unchanged, "-" back),
which must be the same on both sides (issue 22).  The runner waits 10 ms before
such a call, past the file systems' clock tick, so that a change shows.  The
mount's documented exception (the README's "Timestamps as POSIX says"):
``chown(path, -1, -1)`` does not reach the mount, so its file's ctime is not compared.

``tests/test_posix_diff.py`` runs a few dozen hypothesis examples
(derandomized: the same ones in every CI run) and the shrunk counterexamples
found so far as explicit tests.  For a longer exploration::

    python -m tests.posix_diff 500            # 500 random examples as root and as fedfs-alice
    python -m tests.posix_diff 200 --user root --seed 7
    python -m tests.posix_diff 200 --root-only  # root on a mount only root enters (no kernel mode checks)

prints each shrunk counterexample (the calls, and where the results or trees
differ) and exits 1 if there was one.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

USER_PY = "/usr/bin/python3"  # a Python every user can run (the venv's may live under /root)
ALICE, BOB, TEAM = "fedfs-alice", "fedfs-bob", "fedfs-team"  # the test users: alice is in TEAM, bob is not
HANG = 120
# A time before any file was made here: a utime's explicit times are this or later, "now" is after all
EXPLICIT_BEFORE = 1_500_000_000 * 10**9

# The names the calls use: files, directories, symlinks and fifos all come and go among them
PATHS = ("a", "b", "d", "d/a", "d/b", "e", "e/a")
SYMLINK_TARGETS = ("a", "d", "d/a", "x")  # relative and inside the tree ("x": dangling)
FLAGS = ("O_RDONLY", "O_WRONLY", "O_RDWR")
FLAG_BITS = ("O_CREAT", "O_EXCL", "O_TRUNC", "O_APPEND")
MODES = (0o644, 0o600, 0o755, 0o000, 0o4755, 0o2775, 0o1777)
# user. for everyone, trusted. root's (the federation's protocol.devices and root's namespaces: issue 22)
XATTR_NAMES = ("user.a", "user.b", "trusted.t")
XATTR_SHOWN = ("user.", "trusted.")  # what a listing and the snapshot compare (security.: a host's own labels)
# character devices mknod makes (as root: EPERM for a user): /dev/null's and /dev/zero's numbers, which a
# local file system's node and the mount's (mounted dev: ``fednode.mount.device_mount``) open alike
DEVICES = ((1, 3), (1, 5))
TIMES = (None, (1_000_000_000 * 10**9, 1_100_000_000 * 10**9), (1_200_000_000 * 10**9, 1_300_000_123 * 10**9))
SLOTS = 3  # descriptors open at once

RUNNER = r"""
import errno, json, os, stat, sys, time
spec = json.load(sys.stdin)
os.umask(0o022)
os.chdir(spec["root"])
ids = spec["ids"]
fds = {}
where = {}  # slot -> [the file's path, its directory's inode] (refused_fstat)
def real(path):
    return os.path.relpath(os.path.join(os.path.realpath(os.path.dirname(path) or "."), os.path.basename(path)))
def dir_ino(path):
    try:
        return os.lstat(os.path.dirname(path) or ".").st_ino
    except OSError:
        return None
def refused_fstat(slot, st):
    # The mount's documented limit: fstat of a file unlinked while open, once the directory it was
    # unlinked from is removed too, is ESTALE (libfuse has no path for it; read, write, ftruncate work)
    path, ino = where[slot]
    return st.st_nlink == 0 and os.path.dirname(path) != "" and dir_ino(path) != ino
def run(op, args):
    if op == "open":
        path, how, bits, mode = args
        flags = getattr(os, how) | os.O_NONBLOCK  # a fifo's open must not wait for its other end
        for b in bits:
            flags |= getattr(os, b)
        fd = os.open(path, flags, mode)
        slot = min(s for s in range(len(fds) + 1) if s not in fds)
        fds[slot] = fd
        p = real(path)
        where[slot] = [p, dir_ino(p)]
        return slot
    if op in ("close", "write", "pwrite", "read", "pread", "ftruncate", "fstat", "fchmod"):
        slot = args[0]
        if slot not in fds:
            return "no-slot"
        fd = fds[slot]
        if op == "close":
            del fds[slot]
            return os.close(fd)
        if op == "write":
            return os.write(fd, args[1].encode())
        if op == "pwrite":
            return os.pwrite(fd, args[1].encode(), args[2])
        if op == "read":
            return os.read(fd, args[1]).decode()
        if op == "pread":
            return os.pread(fd, args[1], args[2]).decode()
        if op == "ftruncate":
            return os.ftruncate(fd, args[1])
        if op == "fchmod":
            return os.fchmod(fd, args[1])
        st = os.fstat(fd)
        if spec["refusals"] and refused_fstat(slot, st):
            raise OSError(errno.ESTALE, "unlinked, and its directory removed (documented)")
        if stat.S_ISDIR(st.st_mode):  # a directory's size and link count: see snapshot
            return [stat.S_IFDIR, stat.S_IMODE(st.st_mode)]
        return [stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_size, st.st_nlink]
    if op == "truncate":
        return os.truncate(args[0], args[1])
    if op == "rename":
        old, new = real(args[0]), real(args[1])
        os.rename(args[0], args[1])
        for w in where.values():  # the open file moves with its name (or its directory's), as libfuse's node does
            if w[0] == old or w[0].startswith(old + "/"):
                p = new + w[0][len(old):]
                w[:] = [p, dir_ino(p)]
        return None
    if op == "link":
        return os.link(args[0], args[1], follow_symlinks=False)
    if op == "symlink":
        return os.symlink(args[0], args[1])
    if op == "mkfifo":
        return os.mkfifo(args[0], args[1])
    if op == "mknod":
        return os.mknod(args[0], stat.S_IFCHR | args[1], os.makedev(*args[2]))
    if op == "chmod":
        return os.chmod(args[0], args[1])
    if op == "chown":
        return os.chown(args[0], ids[args[1]], ids[args[2]])
    if op == "utime":
        return os.utime(args[0]) if args[1] is None else os.utime(args[0], ns=tuple(args[1]))
    if op == "setxattr":
        return os.setxattr(args[0], args[1], args[2].encode(), args[3])
    if op == "getxattr":
        return os.getxattr(args[0], args[1]).decode()
    if op == "listxattr":
        return sorted(n for n in os.listxattr(args[0]) if n.startswith(("user.", "trusted.")))
    if op == "removexattr":
        return os.removexattr(args[0], args[1])
    if op == "unlink":
        return os.unlink(args[0])
    if op == "mkdir":
        return os.mkdir(args[0], args[1])
    if op == "rmdir":
        return os.rmdir(args[0])
    if op == "listdir":
        return sorted(os.listdir(args[0]))
    if op == "lstat":
        st = os.lstat(args[0])
        if stat.S_ISDIR(st.st_mode):  # a directory's size and link count: see snapshot
            return [stat.S_IFDIR, stat.S_IMODE(st.st_mode)]
        return [stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_nlink, st.st_size, st.st_rdev]
    if op == "readlink":
        return os.readlink(args[0])
    if op == "access":
        return os.access(args[0], args[1])
    raise ValueError(op)
PATH_OPS = ("open", "truncate", "chmod", "chown", "utime", "setxattr", "removexattr", "unlink", "mkdir", "rmdir",
            "mkfifo", "mknod")
FD_OPS = ("write", "pwrite", "ftruncate", "fchmod", "close")
def parent(path):
    return os.path.dirname(path) or "."
def probes(op, args):
    # {label: (path before, path after)}: the file a call is about and its parent(s), whose times it
    # must move (or leave) as POSIX says
    if op == "chown" and args[1:] == ["-1", "-1"]:
        # The mount's documented limit: the kernel sends FUSE an empty SETATTR, which libfuse's
        # high-level API answers without a call, so the ctime stays; the parent is still compared
        return {"parent": (parent(args[0]), parent(args[0]))}
    if op in PATH_OPS:
        return {"file": (args[0], args[0]), "parent": (parent(args[0]), parent(args[0]))}
    if op in FD_OPS:
        if args[0] not in fds:
            return {}
        p = where[args[0]][0]
        return {"file": (p, p), "parent": (parent(p), parent(p))}
    if op == "symlink":
        return {"parent": (parent(args[1]), parent(args[1]))}
    if op == "link":
        return {"file": (args[0], args[0]), "parent": (parent(args[1]), parent(args[1]))}
    if op == "rename":
        return {"file": (args[0], args[1]), "parent": (parent(args[0]), parent(args[0])),
                "new parent": (parent(args[1]), parent(args[1]))}
    return {}
def times(path):
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_ctime_ns
def moved(a, b):
    return "+" if b > a else "=" if b == a else "-"
out = []
for op, *args in spec["ops"]:
    watch = probes(op, args) if spec["times"] else {}
    before = {k: times(b) for k, (b, _) in watch.items()}
    if watch:
        time.sleep(0.01)  # past the file systems' clock tick (coarse: 4 ms at 250 Hz): a change shows
    try:
        r = run(op, args)
        res = ["ok", r]
    except OSError as exc:
        res = ["err", errno.errorcode.get(exc.errno, exc.errno)]
    if watch:  # how the call moved each one's mtime and ctime (a name missing before or after: not compared)
        after = {k: times(a) for k, (_, a) in watch.items()}
        res.append({k: moved(before[k][0], after[k][0]) + moved(before[k][1], after[k][1])
                    for k in sorted(watch) if before[k] and after[k]})
    out.append(res)
closed = []  # the descriptors left open, closed: close reports a write that failed (cto)
for slot in sorted(fds):
    try:
        os.close(fds[slot])
        closed.append(0)
    except OSError as exc:
        closed.append(errno.errorcode.get(exc.errno, exc.errno))
out.append(["closed", closed])
print(json.dumps(out))
"""


# ---------------------------------------------------------------------------- users
def users_missing() -> str | None:
    """Why the calls cannot run as an ordinary user here (None: they can; the users are made if absent)."""
    if os.geteuid() != 0:
        return "needs root: creates users and runs calls as them (on an --allow-other mount)"
    for tool in ("useradd", "groupadd", "setpriv"):
        if shutil.which(tool) is None:
            return f"needs {tool} to create users and run calls as them"
    if not os.access(USER_PY, os.X_OK):
        return f"needs {USER_PY} (a Python every user can run)"
    import grp
    import pwd

    try:
        grp.getgrnam(TEAM)
    except KeyError:
        subprocess.run(["groupadd", TEAM], check=True, capture_output=True)
    for user, extra in ((ALICE, ["-G", TEAM]), (BOB, [])):
        try:
            pwd.getpwnam(user)
        except KeyError:
            subprocess.run(["useradd", "-M", "-U", "-d", "/nonexistent", "-s", "/bin/sh", *extra, user],
                           check=True, capture_output=True)  # fmt: skip
    return None


def ids() -> dict[str, int]:
    """The owners a chown may give: by name, for the runner (-1: unchanged)."""
    import grp
    import pwd

    out = {"-1": -1, "root": 0}
    for user in (ALICE, BOB):
        pw = pwd.getpwnam(user)
        out[user] = pw.pw_uid
        out[user + ":group"] = pw.pw_gid
    out[TEAM] = grp.getgrnam(TEAM).gr_gid
    return out


OWNER_NAMES = ("-1", "root", ALICE, BOB)
GROUP_NAMES = ("-1", "root", TEAM, ALICE + ":group", BOB + ":group")


# ---------------------------------------------------------------------------- running and reading
def run(
    root: Path, ops: list[list[Any]], user: str = "root", refusals: bool = False, times: bool = True
) -> list[list[Any]]:
    """Each call's ``["ok", value]`` or ``["err", "ENOENT"]``, run in ``root`` as ``user``; ``refusals``:
    the local side, which refuses what the README documents the mount refuses (``refused_fstat``).
    ``times``: each call that changes the namespace or a file also gives how it moved the times of
    its file and parent(s) (``{"parent": "++", "file": "=+"}``: mtime, ctime each advanced ``+``,
    unchanged ``=`` or back ``-``), so POSIX's timestamp rules are compared by effect, not value."""
    cmd = [USER_PY, "-c", RUNNER]
    if user != "root":
        import pwd

        pw = pwd.getpwnam(user)
        cmd = ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--init-groups", *cmd]
    spec = {"root": str(root), "ops": ops, "ids": ids(), "refusals": refusals, "times": times}
    r = subprocess.run(cmd, input=json.dumps(spec), capture_output=True, text=True, timeout=HANG, cwd="/")
    if r.returncode != 0:
        raise RuntimeError(f"the runner failed ({r.returncode}) as {user}:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout)


def _time_class(ns: int) -> int | str:
    return ns if ns < EXPLICIT_BEFORE else "now"


def snapshot(root: Path) -> dict[str, dict[str, Any]]:
    """Every entry under ``root`` (``"."`` for itself), read without following a symlink, as root."""
    out: dict[str, dict[str, Any]] = {}

    def entry(path: str, rel: str) -> None:
        st = os.lstat(path)
        kind = stat.S_IFMT(st.st_mode)
        e: dict[str, Any] = {
            "type": {stat.S_IFREG: "file", stat.S_IFDIR: "dir", stat.S_IFLNK: "symlink", stat.S_IFIFO: "fifo",
                     stat.S_IFCHR: "chr"}.get(kind, oct(kind)),
            "rdev": st.st_rdev,
            "mode": oct(stat.S_IMODE(st.st_mode)), "uid": st.st_uid, "gid": st.st_gid,
            # a directory's link count is 1 on the mount (documented: "unknown", as btrfs gives; find copes)
            "nlink": st.st_nlink if kind != stat.S_IFDIR else None,
            "mtime": _time_class(st.st_mtime_ns),
            # ctime cannot be set: "now" for all; what order tells is that a change came after any explicit mtime
            "ctime_after_mtime": st.st_ctime_ns >= st.st_mtime_ns,
        }  # fmt: skip
        if kind == stat.S_IFREG:
            e["size"] = st.st_size
            with open(path, "rb") as f:
                e["data"] = f.read().decode(errors="replace")
        elif kind == stat.S_IFLNK:
            e["size"] = st.st_size
            e["target"] = os.readlink(path)
        if kind != stat.S_IFLNK:
            names = sorted(n for n in os.listxattr(path, follow_symlinks=False) if n.startswith(XATTR_SHOWN))
            e["xattrs"] = {n: os.getxattr(path, n, follow_symlinks=False).decode(errors="replace") for n in names}
        out[rel] = e
        if kind == stat.S_IFDIR:
            for name in sorted(os.listdir(path)):
                entry(os.path.join(path, name), name if rel == "." else f"{rel}/{name}")

    entry(str(root), ".")
    return out


def compare(
    ops: list[list[Any]], local: tuple[list[Any], dict[str, Any]], mounted: tuple[list[Any], dict[str, Any]]
) -> str | None:
    """Where the two runs differ (a readable account), or None."""
    (lr, lt), (mr, mt) = local, mounted
    for i, (op, a, b) in enumerate(zip([*ops, ["close the rest"]], lr, mr, strict=True)):
        if a != b:
            return f"call {i} {op}: local {a}, mount {b}\n" + _calls(ops)
    if lt != mt:
        lines = []
        for rel in sorted(set(lt) | set(mt)):
            x, y = lt.get(rel), mt.get(rel)
            if x != y:
                if x is None or y is None:
                    lines.append(f"  {rel}: local {x}, mount {y}")
                else:
                    diff = {k: (x.get(k), y.get(k)) for k in sorted(set(x) | set(y)) if x.get(k) != y.get(k)}
                    lines.append(f"  {rel}: " + ", ".join(f"{k} local {u!r} mount {v!r}" for k, (u, v) in diff.items()))
        return "final trees differ:\n" + "\n".join(lines) + "\n" + _calls(ops)
    return None


def _calls(ops: list[list[Any]]) -> str:
    return "calls:\n" + "\n".join(f"  {i}: {op}" for i, op in enumerate(ops))


class Sides:
    """Where the calls run: fresh directories (one per sequence) of a local directory and of a mount,
    every user may enter both (their owners are the user who runs the calls)."""

    def __init__(self, local_top: Path, mount_top: Path, roots: tuple[Path, ...] = ()) -> None:
        self.local_top, self.mount_top = local_top, mount_top
        self.roots = roots  # the agents' local trees
        self.n = 0

    def fresh(self, user: str) -> tuple[Path, Path]:
        self.n += 1
        dirs = []
        for top in (self.local_top, self.mount_top):
            d = top / f"{user}-{self.n}"
            d.mkdir()
            if user != "root":
                import pwd

                pw = pwd.getpwnam(user)
                os.chown(d, pw.pw_uid, pw.pw_gid)
            d.chmod(0o755)
            dirs.append(d)
        return dirs[0], dirs[1]

    def check(self, ops: list[list[Any]], user: str = "root") -> str | None:
        """Run ``ops`` on both sides as ``user``; the difference, or None."""
        local, mounted = self.fresh(user)
        lr = run(local, ops, user, refusals=True)
        mr = run(mounted, ops, user)
        return compare(ops, (lr, snapshot(local)), (mr, snapshot(mounted)))


# ---------------------------------------------------------------------------- the calls hypothesis makes
def calls_strategy(user: str = "root") -> Any:
    """Lists of calls (JSON-able lists) as ``RUNNER`` takes them."""
    from hypothesis import strategies as st

    path = st.sampled_from(PATHS)
    slot = st.integers(0, SLOTS - 1)
    data = st.text(alphabet="xyz\n", min_size=0, max_size=6)
    size = st.integers(0, 9)
    mode = st.sampled_from(MODES)
    one = st.one_of(
        st.tuples(
            st.just("open"),
            path,
            st.sampled_from(FLAGS),
            st.lists(st.sampled_from(FLAG_BITS), unique=True),
            st.sampled_from((0o644, 0o600, 0o666, 0o4755)),
        ),
        st.tuples(st.just("close"), slot),
        st.tuples(st.just("write"), slot, data),
        st.tuples(st.just("pwrite"), slot, data, size),
        st.tuples(st.just("read"), slot, size),
        st.tuples(st.just("pread"), slot, size, size),
        st.tuples(st.just("ftruncate"), slot, size),
        st.tuples(st.just("fstat"), slot),
        st.tuples(st.just("fchmod"), slot, mode),
        st.tuples(st.just("truncate"), path, size),
        st.tuples(st.just("rename"), path, path),
        st.tuples(st.just("link"), path, path),
        st.tuples(st.just("symlink"), st.sampled_from(SYMLINK_TARGETS), path),
        st.tuples(st.just("mkfifo"), path, st.sampled_from((0o644, 0o600))),
        st.tuples(st.just("mknod"), path, st.sampled_from((0o666, 0o600)), st.sampled_from(DEVICES)),
        st.tuples(st.just("chmod"), path, mode),
        st.tuples(st.just("chown"), path, st.sampled_from(OWNER_NAMES), st.sampled_from(GROUP_NAMES)),
        st.tuples(st.just("utime"), path, st.sampled_from(TIMES)),
        st.tuples(st.just("setxattr"), path, st.sampled_from(XATTR_NAMES), data, st.sampled_from((0, 1, 2))),
        st.tuples(st.just("getxattr"), path, st.sampled_from(XATTR_NAMES)),
        st.tuples(st.just("listxattr"), path),
        st.tuples(st.just("removexattr"), path, st.sampled_from(XATTR_NAMES)),
        st.tuples(st.just("unlink"), path),
        st.tuples(st.just("mkdir"), path, st.sampled_from((0o755, 0o700, 0o2775, 0o1777))),
        st.tuples(st.just("rmdir"), path),
        st.tuples(st.just("listdir"), st.sampled_from((".", "d", "e"))),
        st.tuples(st.just("lstat"), path),
        st.tuples(st.just("readlink"), path),
        # (os.F_OK, R_OK, W_OK, X_OK, R_OK|X_OK: a mount only root enters answers access itself)
        st.tuples(st.just("access"), path, st.sampled_from((0, 4, 2, 1, 5))),
    )
    # a few directories and files first, so that most calls find something
    start = st.lists(st.one_of(st.tuples(st.just("mkdir"), st.sampled_from(("d", "e")), st.just(0o755)),
                               st.tuples(st.just("open"), path, st.just("O_WRONLY"), st.just(["O_CREAT"]),
                                         st.just(0o644))), max_size=4)  # fmt: skip
    return st.builds(lambda s, r: [list(c) for c in s + r], start, st.lists(one, min_size=1, max_size=16))


# ---------------------------------------------------------------------------- a federation to run on
@contextmanager
def federation(base: Path, nodes: int = 4, consistency: str | None = None, allow_other: bool = True) -> Iterator[Sides]:
    """``nodes`` local agents and a mount at node 0 with ``--allow-other``, and a local directory
    on a file system with user xattrs (``tests.conformance.trees_dir``); everything stopped after.
    ``allow_other`` False: a mount only its mounter enters, where root's checks no modes in the
    kernel (``fednode.mount.kernel_checks``): root's calls only.  The federation makes devices
    (``protocol.devices: true``), so root's mknod of one is compared too, and the mount is ``dev``."""
    from fednode import mount
    from fednode.cluster import ProcessCluster, write_local
    from tests.conformance import trees_dir

    path = write_local(base / "fed", nodes, protocol={"devices": True})
    pc = ProcessCluster(path, log_dir=base / "logs", new_session=True)
    top = Path(tempfile.mkdtemp(prefix="fedfs-posixdiff-", dir=trees_dir()))
    mp = None
    try:
        pc.wait_ready()
        top.chmod(0o755)
        (top / "local").mkdir(mode=0o755)
        mnt = top / "m"
        mnt.mkdir()
        with open(base / "mount.log", "ab") as log:
            mp = mount.MountProcess.federation(
                path, 0, mnt, stderr=log, allow_other=allow_other, consistency=consistency
            )
        mp.wait_ready()
        (mnt / "diff").mkdir()
        (mnt / "diff").chmod(0o755)
        yield Sides(top / "local", mnt / "diff", tuple(base / "fed" / f"n{i}" for i in range(nodes)))
    finally:
        try:
            if mp is not None:
                mp.stop()
        finally:
            pc.stop()
            shutil.rmtree(top, ignore_errors=True)


def _property(sides: Sides, user: str, examples: int) -> Any:
    from hypothesis import HealthCheck, given, settings

    @settings(max_examples=examples, deadline=None, database=None, print_blob=True,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(calls_strategy(user))
    def prop(ops: list[list[Any]]) -> None:
        diff = sides.check(ops, user)
        assert diff is None, diff

    return prop


def main(argv: list[str] | None = None) -> int:
    import argparse

    from hypothesis import seed

    ap = argparse.ArgumentParser(prog="python -m tests.posix_diff", description=__doc__.split("\n\n")[0])
    ap.add_argument("examples", type=int, nargs="?", default=200)
    ap.add_argument("--user", action="append", help="root, fedfs-alice (default: both)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--consistency", choices=("cto", "sync"), default=None)
    ap.add_argument(
        "--root-only",
        action="store_true",
        help="a mount without --allow-other (as root: no mode checks in the kernel); root's calls only",
    )
    args = ap.parse_args(argv)
    users = ["root"] if args.root_only else args.user or ["root", ALICE]
    why = users_missing()
    if why and users != ["root"]:
        print(f"as root only: {why}", file=sys.stderr)
        users = ["root"]
    found = 0
    with (
        tempfile.TemporaryDirectory(prefix="posixdiff-") as base,
        federation(Path(base), consistency=args.consistency, allow_other=not args.root_only) as sides,
    ):
        for user in users:
            prop = _property(sides, user, args.examples)
            if args.seed is not None:
                prop = seed(args.seed)(prop)
            try:
                prop()
                print(f"{user}: {args.examples} examples agree")
            except AssertionError as exc:
                found += 1
                print(f"{user}: counterexample\n{exc}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
