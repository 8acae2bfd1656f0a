"""The real agent's local layer: the LOCAL_OPS of ``fedsim.protocol.effects`` over a real directory.

``LocalFS(root)`` serves one host directory as this node's share of the
federated namespace.  It answers exactly like ``fedsim.memfs.MemFS`` (same
results, same errno, same federated path in the error), so protocol code sees
the same failures in simulation and for real; ``tests/test_localfs.py`` runs
random operation sequences on both and compares them step by step.

Confinement (the agent serves requests from the network)
    Every path argument must be a canonical federated path
    (``normalize(p) == p``) or it is refused with EINVAL (``InvalidPath``)
    before any system call.  Paths are then resolved relative to an
    ``O_PATH`` descriptor of the root held for the object's lifetime, in one
    of two ways (``LocalFS(root, resolver=...)``, default "auto": the first
    where the kernel has it):

    * ``openat2`` (Linux 5.6+, called through libc's ``syscall``): the parent
      directory, or for open/listdir the whole path, in one system call with
      ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS``: the
      kernel itself refuses any component that would leave the root ("..",
      an absolute jump) and any symlink, intermediate or last.  When it fails
      for any reason the component walk below redoes the resolution, so the
      errors (which component, which kind, ELOOP vs ENOENT vs ENOTDIR) are
      exactly the walk's, and create/mkdir make missing parents there.
    * the component walk (everywhere else: ENOSYS, a seccomp filter's EPERM,
      another OS): each intermediate directory is opened with
      ``O_PATH|O_DIRECTORY|O_NOFOLLOW`` relative to the previous one.

    The final operation uses ``dir_fd=`` with ``O_NOFOLLOW`` /
    ``follow_symlinks=False``.  No host path string is ever built from a
    request, so there is nothing to escape from; and errors are rebuilt with
    the federated path, so the host root never leaks to a peer.
    ``tests/test_localfs.py`` runs every test once per resolver.

Symlinks and special files (fifos, sockets, devices) inside the root
    They are entries of the federated namespace like files (issue 22), but
    nothing here ever follows or opens one.  ``listdir`` lists them (is_dir
    False); ``stat`` and ``getattr`` describe the entry itself (``lstat``: a
    symlink's size is its target's length, a device's ``getattr`` size its
    ``st_rdev``, see ``attrs.Attr.rdev``); ``readlink`` reads a symlink's
    target with ``readlinkat`` on its parent's descriptor; ``symlink`` and
    ``mknod`` (fifos, sockets and devices, with an owner where given:
    ``fchownat`` without following, the node removed again if that fails)
    make them with ``symlinkat``/``mknodat`` there; ``unlink`` removes one and ``rename`` moves or replaces one;
    ``setattr`` changes the entry itself through its ``O_PATH|O_NOFOLLOW``
    descriptor (a symlink's owner and times; its mode is EOPNOTSUPP, as on
    Linux).  The target is data: stored and returned verbatim, never
    resolved, so no target (``/etc``, ``../../..``) can lead anywhere.

    What would follow or open one fails with **ELOOP** naming that entry:
    a path through one as an intermediate "directory" (the walk's
    ``O_NOFOLLOW|O_DIRECTORY``, or openat2's ``RESOLVE_NO_SYMLINKS``, refuse
    it), ``listdir`` of one, and open, read, write, truncate and fsync (the
    one exception: a device is briefly opened, never read or written, by
    read/write/open, whose type check is an ``fstat`` of the opened
    descriptor so that no rename race can slip a different file under the
    check).  ELOOP rather than ENOENT because

    * it is what the kernel itself answers to ``O_NOFOLLOW`` on a symlink, so
      the common open/read/write paths need no extra system call to produce it;
    * ENOENT would be a lie the protocol acts on: a home answering ENOENT makes
      the requester treat its directory-table entry as stale and retry at the
      manager, and a client told "absent" would go on to create the name and be
      told EEXIST.  ELOOP says "a name is taken here by something the
      federation will not follow", consistently for every operation.

    Creating over such a name (create, mkdir, symlink, mknod) is EEXIST, as
    on any file system; rmdir of one ENOTDIR.  ``list_dirs`` keeps MemFS's
    habit of answering ``[]`` for a missing path or a file, and raises ELOOP
    only when the path reaches one.

MemFS parity beyond POSIX
    * A regular file used as an intermediate directory gives ENOENT (on the
      requested path) for the non-creating operations and ENOTDIR (on the
      file's path) for create/mkdir, as MemFS does; the kernel would say ENOTDIR
      for all of them.
    * A zero-length write past end of file extends the file with zeros (MemFS
      does; POSIX ``pwrite`` would not).
    * ``rename`` (a LOCAL_OP since the protocol renames files) moves regular
      files only; a rename made outside LocalFS is not one of its operations:
      LocalFS copes with the tree being changed behind its back, but promises
      MemFS parity only for changes made through it.

Open files
    ``open`` keeps one descriptor per path, reference counted, so ``read`` and
    ``write`` of an open path are a dict lookup and one ``pread``/``pwrite``.
    ``unlink`` (or a ``create`` at the same path) through LocalFS drops the
    descriptor at once: LOCAL_OPS address files by path, and MemFS answers
    ENOENT for the path of a removed file, so must we.  A later ``close`` of
    that path is then a no-op (as ``close`` always is in MemFS).  A file
    removed or renamed *outside* LocalFS while open stays readable through its
    path until the last close (as NFS or any POSIX holder of a descriptor
    would); a second ``open`` of the path revalidates and picks up the new file.

No directory-descriptor cache
    Every operation resolves its path afresh, so a directory renamed out of
    the root, replaced by a symlink or by a new directory outside the
    federation is seen by the very next operation.  A cached parent
    descriptor would save the resolution, but to stay confined it must be
    revalidated on every use against *every* ancestor up to the root (a
    directory renamed out of the root by a local user takes its cached
    descendants along, and checking only the last level cannot see that).
    With openat2 the revalidation is itself an openat2 of the path (the only
    confined way to ask "is this still root/a/b?"), so a cache cannot be
    cheaper than the fresh resolution it replaces (an inotify watch per
    cached level could announce changes, but reading its queue before each
    operation is itself a system call, and the watch set one more thing to
    get exactly right); with the component walk
    it costs one ``fstatat`` per level against an ``openat``+``close`` per
    level for a fresh walk, a saving of a few percent of an operation in
    exchange for a security-critical invalidation surface
    (``python -m fednode.tools.localfs_bench`` prints these costs).  Not worth it.
    Files directly in the root need no resolution at all.

The root itself
    The root descriptor is held for the object's life, so a root deleted,
    renamed away or replaced under a running agent would go on being served
    (an unlinked tree, or one nobody else sees).  ``check_root`` compares the
    configured path's (st_dev, st_ino) with the descriptor's: ``apply`` runs
    it before every operation that changes the namespace (and ``list_dirs``,
    the summary's scan) and after every operation that fails; the agent also
    runs it every ``fednode.runtime.ROOT_CHECK_S`` and at ``status``.  Reads
    and writes of open files between two checks still reach the old tree.
    Once lost, the root and every open file are closed and every operation
    fails with EIO naming the root and what to do (``lost_error``).

Extended attributes
    ``getxattr``/``setxattr``/``listxattr``/``removexattr`` act on the entry
    held by an ``O_PATH`` descriptor (``_entry``: the confined walk, O_NOFOLLOW;
    a symlink or special file has no ``user.`` ones, by Linux's rule: reading
    ENODATA, writing EPERM; ``trusted.`` and ``security.`` it may have), through
    its ``/proc/self/fd`` link,
    as ``setattr`` does: Linux's f*xattr calls refuse an O_PATH descriptor, and
    the link names exactly the inode held, never a path built from a request.
    Names are checked first (``fedsim.protocol.xattrs``: ``user.``,
    ``trusted.``, ``security.``; EOPNOTSUPP otherwise), and a listing shows only
    those namespaces (who may see or change which is the home's decision, made
    before the call: ``xattrs.check_caller``).  A file system without user xattrs answers EOPNOTSUPP; one
    with less room than 64 KiB per file (ext4: about 4 KiB) answers ENOSPC.

Autonomy
    LocalFS writes no metadata of its own into the tree: no hidden files, no
    temporary files, no extended attributes (the ``user.`` attributes a client
    sets are the client's, as any user's).  The directory looks exactly as
    if the federation were not serving it.

Not thread safe: the agent calls it from its one event-loop thread.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import platform
import stat as _stat
import sys
from collections.abc import Callable, Iterable
from typing import Any

from fedsim.protocol.attrs import (
    KEEP,
    UTIME_NOW,
    UTIME_OMIT,
    check_mknod,
    check_new,
    check_setattr,
    check_target,
    is_device,
    special_entry,
)
from fedsim.protocol.effects import LOCAL_OPS
from fedsim.protocol.messages import fs_error
from fedsim.protocol.names import MAX_NAME, ROOT, InvalidPath, join, normalize, under
from fedsim.protocol.xattrs import allowed, check_list, check_name, check_set

__all__ = ["FOREIGN_ERRNO", "ROOT_LOST_ERRNO", "LocalFS", "RootUnusable"]

log = logging.getLogger("fednode")

#: errno of every operation once the root directory is lost (see ``LocalFS.check_root``).  EIO, not
#: ESTALE: to the protocol ESTALE means "renamed away from this home, resolve the name again", and a
#: requester told so would retry and then report ENOENT, hiding the message that says what to do.
ROOT_LOST_ERRNO = errno.EIO
# Operations that change the namespace (or read the whole of it, as a summary refresh does): the root
# is checked before they run, so none of them acts on a root that was moved away.
_CHECKED_FIRST = frozenset(
    {
        "create",
        "mkdir",
        "unlink",
        "rmdir",
        "rename",
        "rename_dir",
        "setattr",
        "list_dirs",
        "symlink",
        "mknod",
        "link",
        "setxattr",
        "removexattr",
    }
)


class RootUnusable(ValueError):
    """The configured root cannot be served: ``errno`` says why (ENOENT: it does not exist)."""

    def __init__(self, root: str, code: int, message: str) -> None:
        super().__init__(message)
        self.root = root
        self.errno = code


#: errno of any operation that reaches a symlink or special file (see module docstring).
FOREIGN_ERRNO = errno.ELOOP
_FOREIGN_DETAIL = "symlink or special file: never followed or opened by the federation"
# mknod's permission bits lose these, whatever the process's umask lets through too (MemFS.UMASK)
_UMASK = 0o022

_O_PATH = getattr(os, "O_PATH", os.O_RDONLY)  # Linux; elsewhere a read-only open (needs read permission)
_CLOEXEC = os.O_CLOEXEC
# Intermediate directories: an O_PATH handle (no read permission needed, nothing "opened");
# O_NOFOLLOW|O_DIRECTORY makes a symlink fail (ENOTDIR on Linux, ELOOP elsewhere) instead of being followed.
_WALK = _O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
_DIR_READ = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
# Files: O_NONBLOCK so that a fifo swapped in under us cannot block the event loop (it is then
# refused by the fstat type check); O_NOCTTY so that a tty device cannot become our terminal.
_FILE = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | _CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC
_WRITE_REFUSED = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ETXTBSY)
# Above this a read is clamped to the file size first, so a request for 2**40 bytes does not make
# os.pread allocate a 1 TB buffer.
_READ_CLAMP = 1 << 20
# A path this short cannot hold a component longer than names.MAX_NAME (255), nor exceed MAX_PATH.
_FAST_LEN = 255

_S_ISDIR = _stat.S_ISDIR
_S_ISREG = _stat.S_ISREG
_KIND_DIR, _KIND_FILE, _KIND_FOREIGN = 1, 2, 3
# os.fsencode's own arguments, bound (a Python-level os.fsencode call costs as much again as the encode)
_FS_ENCODING, _FS_ERRORS = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()


# -- openat2(2) with RESOLVE_BENEATH: the kernel's own confined walk ------------------------------
# The syscall number is 437 on every architecture of the unified table (x86_64, arm64, i386, arm,
# riscv64, ppc64le, s390x); elsewhere (alpha, mips, ia64) the component walk is used.
_SYS_OPENAT2 = 437
_OPENAT2_MACHINES = frozenset(
    {"x86_64", "amd64", "aarch64", "arm64", "i386", "i686", "armv7l", "armv8l", "riscv64", "ppc64le", "s390x"}
)
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04  # any symlink, intermediate or last, is ELOOP: never followed
RESOLVE_BENEATH = 0x08  # no component may leave the starting directory (no "..", no absolute jump)
_RESOLVE = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


#: open flags -> (its struct open_how, kept alive here, and that struct's address)
_HOWS: dict[int, tuple[_OpenHow, int]] = {}


def _how(flags: int) -> int:
    """Address of a struct open_how for ``flags`` under ``_RESOLVE`` (made once per flag set)."""
    h = _HOWS.get(flags)
    if h is None:
        how = _OpenHow(flags, 0, _RESOLVE)
        h = _HOWS[flags] = (how, ctypes.addressof(how))
    return h[1]


def _load_openat2() -> Callable[[int, bytes, int], int] | None:
    """``openat2(dir_fd, path, how_address) -> fd or -1`` through libc's ``syscall``, or None
    where this cannot be Linux's openat2 (another OS or architecture, no usable libc)."""
    if sys.platform != "linux" or platform.machine() not in _OPENAT2_MACHINES:
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).syscall
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_long
    fn.argtypes = (ctypes.c_long, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t)
    size = ctypes.sizeof(_OpenHow)

    def openat2(dir_fd: int, path: bytes, how: int) -> int:
        return fn(_SYS_OPENAT2, dir_fd, path, how, size)

    return openat2


#: the raw call, or None (module attribute so that tests can watch it, as they watch ``os``)
_openat2 = _load_openat2()
_HOW_WALK = _how(_WALK)
_HOW_DIR_READ = _how(_DIR_READ)


def openat2_usable(dir_fd: int) -> tuple[bool, str]:
    """(whether openat2 with RESOLVE_BENEATH works here, why not): a probe relative to ``dir_fd``.

    ENOSYS (a kernel before 5.6), EPERM (a seccomp filter that refuses
    unknown syscalls, as some container runtimes have), E2BIG/EINVAL (a
    kernel that does not know a flag) all mean: use the component walk."""
    if _openat2 is None:
        return False, f"no openat2 on {sys.platform}/{platform.machine()}"
    fd = _openat2(dir_fd, b".", _how(_WALK))
    if fd >= 0:
        os.close(fd)
        return True, "openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS)"
    code = ctypes.get_errno()
    return False, f"openat2 refused by this kernel: {errno.errorcode.get(code, code)}"


def _check_slow(path: object) -> None:
    """The full check behind the fast one in ``_check``: canonical or InvalidPath (EINVAL)."""
    if isinstance(path, str) and type(path) is not str:
        # A str subclass could override the very methods the checks rely on.
        raise InvalidPath(path, "must be a plain str")
    canonical = normalize(path, local=True)  # raises InvalidPath naming the problem (replica space allowed)
    if canonical != path:
        raise InvalidPath(path, f"not in canonical form (canonical: {canonical!r})")
    try:
        os.fsencode(canonical)
    except UnicodeEncodeError:
        raise InvalidPath(path, "cannot be encoded as a host file name") from None


def _check(path: object) -> None:
    """Refuse anything but a canonical federated path, before any system call.

    The fast test (a few C-level substring checks) accepts only strings that
    are certainly canonical; anything else -- including legitimate names
    starting with "." -- goes through ``names.normalize`` for the verdict."""
    if (
        type(path) is not str
        or len(path) > _FAST_LEN
        or path[:1] != "/"
        or "//" in path
        or "/." in path
        or "\x00" in path
        or (path[-1] == "/" and path != "/")
        or not path.isascii()
    ):
        _check_slow(path)


def _foreign(path: str) -> OSError:
    return fs_error(FOREIGN_ERRNO, path, _FOREIGN_DETAIL)


def _kind(dir_fd: int, name: str) -> int | None:
    """Type of ``name`` in ``dir_fd`` without following it; None if it is gone (error paths only)."""
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError:
        return None
    if _S_ISDIR(mode):
        return _KIND_DIR
    if _S_ISREG(mode):
        return _KIND_FILE
    return _KIND_FOREIGN


def _entries(dir_fd: int) -> list[tuple[str, bool]]:
    """(name, is_dir) of every entry in an open directory (unsorted): a
    symlink or special file is listed as a file is (is_dir False).

    scandir's d_type tells the types without a stat per entry; where the file
    system does not provide it, CPython stats relative to this same descriptor."""
    with os.scandir(dir_fd) as it:
        return [(e.name, e.is_dir(follow_symlinks=False)) for e in it]


# -- utimensat(2) with UTIME_NOW / UTIME_OMIT, which os.utime cannot express --------------------
_UTIME_NOW_NSEC = (1 << 30) - 1  # the kernel's tv_nsec sentinels
_UTIME_OMIT_NSEC = (1 << 30) - 2
_AT_FDCWD = -100


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_int64), ("tv_nsec", ctypes.c_long)]


def _timespec(t: int) -> _Timespec:
    if t == UTIME_NOW:
        return _Timespec(0, _UTIME_NOW_NSEC)
    if t == UTIME_OMIT:
        return _Timespec(0, _UTIME_OMIT_NSEC)
    return _Timespec(t // 1_000_000_000, t % 1_000_000_000)  # floor: a time before 1970 keeps nsec >= 0


_libc: Any = None


def _utimens(link: str, atime_ns: int, mtime_ns: int) -> None:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    times = (_Timespec * 2)(_timespec(atime_ns), _timespec(mtime_ns))
    if _libc.utimensat(_AT_FDCWD, os.fsencode(link), times, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def _proc_fd(fd: int, path: str) -> str:
    """``/proc/self/fd/N``: the link naming the inode ``fd`` holds (ENOTSUP without /proc)."""
    link = f"/proc/self/fd/{fd}"
    if not os.path.lexists(link):
        raise fs_error(errno.ENOTSUP, path, "changing attributes needs /proc (Linux) to name the entry held")
    return link


class _Open:
    """One open path: its descriptor, how many opens hold it, and its identity."""

    __slots__ = ("dev", "fd", "ino", "refs", "write_errno")

    def __init__(self, fd: int, st: os.stat_result, write_errno: int) -> None:
        self.fd = fd
        self.refs = 1
        self.dev = st.st_dev
        self.ino = st.st_ino
        self.write_errno = write_errno  # nonzero: opened read-only, writes fail with this


class LocalFS:
    """One host directory served as the node's local file system (see the module docstring)."""

    def __init__(self, root: str | os.PathLike[str], resolver: str = "auto") -> None:
        """``resolver``: how paths are resolved under the root: "openat2" (the
        kernel's confined walk; ValueError where it is missing), "walk" (one
        ``openat`` per component), or "auto" (openat2 where it works)."""
        if resolver not in ("auto", "openat2", "walk"):
            raise ValueError(f"resolver must be 'auto', 'openat2' or 'walk', not {resolver!r}")
        # The root itself may be a symlink: it is configuration, not a request, and is resolved once here.
        self.root = os.fspath(root)
        try:
            self._root: int = os.open(self.root, _O_PATH | os.O_DIRECTORY | _CLOEXEC)
        except FileNotFoundError:
            raise RootUnusable(self.root, errno.ENOENT, f"LocalFS root {self.root!r} does not exist") from None
        except NotADirectoryError:
            raise RootUnusable(self.root, errno.ENOTDIR, f"LocalFS root {self.root!r} is not a directory") from None
        except OSError as e:
            raise RootUnusable(
                self.root, e.errno or errno.EIO, f"LocalFS root {self.root!r} cannot be opened: {e.strerror}"
            ) from None
        st = os.fstat(self._root)
        self._root_id = (st.st_dev, st.st_ino)
        #: why the root is no longer served (None while it is): see ``check_root``
        self.lost: str | None = None
        self._open: dict[str, _Open] = {}
        self._o2 = False  # resolve with openat2 (else the component walk)
        if resolver != "walk":
            self._o2, why = openat2_usable(self._root)
            if not self._o2 and resolver == "openat2":
                os.close(self._root)
                self._root = -1  # so that __del__'s close_all cannot close the number again once reused
                raise ValueError(f"LocalFS: resolver 'openat2' is not available: {why}")
        self.resolver = "openat2" if self._o2 else "walk"
        # LOCAL_OPS name -> bound method: apply() is one dict lookup, not a membership test and a getattr.
        self._ops: dict[str, Callable[..., Any]] = {op: getattr(self, op) for op in LOCAL_OPS}

    def __repr__(self) -> str:
        return f"LocalFS({self.root!r}, resolver={self.resolver!r})"

    def __del__(self) -> None:
        # Best effort for owners that forget close_all(); a finalizer must never raise.
        with contextlib.suppress(Exception):
            self.close_all()

    def __enter__(self) -> LocalFS:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close_all()

    def close_all(self) -> None:
        """Release every descriptor (open files and the root): agent shutdown.

        Afterwards every operation fails with EBADF (the root descriptor is -1,
        which the kernel refuses; it is never AT_FDCWD, so nothing resolves
        against the working directory)."""
        for of in self._open.values():
            os.close(of.fd)
        self._open.clear()
        if self._root >= 0:
            os.close(self._root)
            self._root = -1

    # -- resolution -------------------------------------------------------------------
    def _walk(self, path: str, created: list[str] | None = None) -> tuple[int, str]:
        """(descriptor of the parent directory, last component) for a canonical non-root path.

        The caller closes the descriptor unless it is the root's.  Given a
        ``created`` list, missing intermediate directories are made and
        appended to it, as create/mkdir require."""
        i = path.rfind("/")
        root = self._root
        if i == 0:
            return root, path[1:]
        if self._o2 and path.find("/", 1, i) > 0:
            # One syscall for the whole parent (of two components or more: for one, a plain openat
            # is cheaper than the ctypes call), confined by the kernel: every component a real
            # directory beneath the root, no symlink followed, no "..".  On any failure the
            # component walk below runs instead: it gives the exact MemFS-parity error (which
            # component, which kind), makes missing parents for create/mkdir, or, if the tree
            # changed in between, simply succeeds on what is there now.
            fd = _openat2(root, path[1:i].encode(_FS_ENCODING, _FS_ERRORS), _HOW_WALK)
            if fd >= 0:
                return fd, path[i + 1 :]
        fd = root
        comps = path[1:i].split("/")
        k = 0
        try:
            for k, comp in enumerate(comps):
                try:
                    nfd = os.open(comp, _WALK, dir_fd=fd)
                except FileNotFoundError:
                    if created is None:
                        raise
                    try:
                        os.mkdir(comp, 0o777, dir_fd=fd)
                    except FileExistsError:
                        pass  # made concurrently: use it (the open below checks what it is)
                    else:
                        created.append("/" + "/".join(comps[: k + 1]))
                    nfd = os.open(comp, _WALK, dir_fd=fd)
                if fd != root:
                    os.close(fd)
                fd = nfd
        except OSError as e:
            err = self._walk_error(e, fd, comps, k, path, created is not None)
            if fd != root:
                os.close(fd)
            raise err from None
        return fd, path[i + 1 :]

    @staticmethod
    def _walk_error(e: OSError, fd: int, comps: list[str], k: int, path: str, creating: bool) -> OSError:
        """The MemFS-equivalent error for a walk that failed at ``comps[k]`` (looked up in ``fd``)."""
        code = e.errno
        if code in (errno.ENOTDIR, errno.ELOOP):
            prefix = "/" + "/".join(comps[: k + 1])
            kind = _kind(fd, comps[k])
            if kind == _KIND_FOREIGN:
                return _foreign(prefix)
            if kind == _KIND_FILE:
                return fs_error(errno.ENOTDIR, prefix) if creating else fs_error(errno.ENOENT, path)
        if code == errno.ENOENT or code == errno.ENOTDIR:
            return fs_error(errno.ENOENT, path)
        return fs_error(code or errno.EIO, path)

    def _final_error(self, e: OSError, dir_fd: int, name: str, path: str) -> OSError:
        """The error for a final-component operation: ELOOP for foreign entries, else as the kernel said."""
        code = e.errno
        if code in (errno.ELOOP, errno.ENXIO, errno.ENOTDIR) and _kind(dir_fd, name) == _KIND_FOREIGN:
            return _foreign(path)
        return fs_error(code or errno.EIO, path)

    def _open_file(self, path: str, flags: int) -> tuple[int, os.stat_result]:
        """Open the regular file at ``path``: (descriptor, its fstat).  ENOENT, EISDIR or ELOOP."""
        i = path.rfind("/")
        if i == 0 and path == ROOT:
            raise fs_error(errno.EISDIR, path)
        fd = -1
        if i and self._o2:
            # The whole path in one confined syscall (the last component too: RESOLVE_NO_SYMLINKS makes
            # a symlink there ELOOP).  On failure the walk below redoes it and gives the exact error.
            fd = _openat2(self._root, path[1:].encode(_FS_ENCODING, _FS_ERRORS), _how(flags | _FILE))
        if fd < 0:
            root = self._root
            dfd, name = self._walk(path)
            try:
                fd = os.open(name, flags | _FILE, dir_fd=dfd)
            except OSError as e:
                raise self._final_error(e, dfd, name, path) from None
            finally:
                if dfd != root:
                    os.close(dfd)
        # Checked on the opened descriptor, not by name beforehand: no rename can race between the two.
        try:
            st = os.fstat(fd)
        except OSError as e:
            os.close(fd)
            raise fs_error(e.errno or errno.EIO, path) from None
        if not _S_ISREG(st.st_mode):
            os.close(fd)
            raise fs_error(errno.EISDIR, path) if _S_ISDIR(st.st_mode) else _foreign(path)
        return fd, st

    def _drop(self, path: str) -> None:
        """Forget the descriptor of a path that no longer names the file it was opened on."""
        of = self._open.pop(path, None)
        if of is not None:
            os.close(of.fd)

    # -- LOCAL_OPS --------------------------------------------------------------------
    @staticmethod
    def _own(fd: int, path: str, mode: int, uid: int, gid: int) -> None:
        """Give the entry just made (open as ``fd``) the owner, then the mode,
        asked for (KEEP: leave the kernel's).  The owner first: a chown clears
        set-id bits, which the mode then sets (as ``install`` orders them).  A
        chown to the ids it already has is skipped, so an agent that is not
        root can still make its own user's files; to give one away it must be
        root (EPERM otherwise)."""
        try:
            if uid != KEEP or gid != KEEP:
                st = os.fstat(fd)
                if (uid != KEEP and uid != st.st_uid) or (gid != KEEP and gid != st.st_gid):
                    os.fchown(fd, uid, gid)
            if mode != KEEP:
                os.fchmod(fd, mode)
        except OSError as e:
            raise fs_error(e.errno or errno.EIO, path) from None

    def _own_new(
        self, fd: int, path: str, wanted: tuple[int, int, int], dfd: int, name: str, is_dir: bool, created: list[str]
    ) -> None:
        """``_own`` the entry just made as ``name`` in ``dfd`` (open as ``fd``,
        closed here) with ``wanted`` (mode, uid, gid); if that fails, ``_unmake`` it."""
        try:
            self._own(fd, path, *wanted)
        except OSError:
            self._unmake(dfd, name, is_dir, created)
            raise
        finally:
            os.close(fd)

    def _unmake(self, dfd: int, name: str, is_dir: bool, created: list[str]) -> None:
        """Undo a create/mkdir whose mode or owner could not be given: the
        entry and the parents it made go again (a failed operation leaves no trace)."""
        with contextlib.suppress(OSError):
            (os.rmdir if is_dir else os.unlink)(name, dir_fd=dfd)
        self._unmake_parents(created)

    def _unmake_parents(self, created: list[str]) -> None:
        """Remove the parents an operation made (``created``, root first) that failed after making them."""
        for d in reversed(created):
            with contextlib.suppress(OSError):
                self.rmdir(d)

    def create(self, path: str, mode: int = KEEP, uid: int = KEEP, gid: int = KEEP) -> list[str]:
        """Exclusive create (O_CREAT|O_EXCL), making missing parents; returns the made directories, root first.
        ``mode`` and ``uid``/``gid`` (KEEP: the process's umask and ids) are the file's before the
        name can be used: it is made 0600 and changed through its descriptor (``_own``)."""
        _check(path)
        check_new(path, mode, uid, gid)
        if path == ROOT:
            raise fs_error(errno.EEXIST, path)
        created: list[str] = []
        dfd, name = self._walk(path, created)
        owned = mode != KEEP or uid != KEEP or gid != KEEP
        try:
            try:
                fd = os.open(name, _CREATE, 0o600 if owned else 0o666, dir_fd=dfd)
            except OSError as e:
                raise self._final_error(e, dfd, name, path) from None
            if owned:
                self._own_new(fd, path, (mode, uid, gid), dfd, name, False, created)
            else:
                os.close(fd)
        finally:
            if dfd != self._root:
                os.close(dfd)
        if self._open:
            self._drop(path)
        return created

    def mkdir(self, path: str, mode: int = KEEP, uid: int = KEEP, gid: int = KEEP) -> list[str]:
        """Make a directory and missing parents; [] if it already is one (exist ok), EEXIST if a file.
        ``mode`` and ``uid``/``gid`` as ``create``'s, for the directory made (not its parents; an
        existing one is left as it is)."""
        _check(path)
        check_new(path, mode, uid, gid)
        if path == ROOT:
            return []
        created: list[str] = []
        dfd, name = self._walk(path, created)
        owned = mode != KEEP or uid != KEEP or gid != KEEP
        try:
            try:
                os.mkdir(name, 0o700 if owned else 0o777, dir_fd=dfd)
            except FileExistsError:
                if _kind(dfd, name) == _KIND_DIR:
                    return created
                raise fs_error(errno.EEXIST, path) from None
            except OSError as e:
                raise fs_error(e.errno or errno.EIO, path) from None
            if owned:
                try:
                    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC, dir_fd=dfd)
                except OSError as e:
                    self._unmake(dfd, name, True, created)
                    raise fs_error(e.errno or errno.EIO, path) from None
                self._own_new(fd, path, (mode, uid, gid), dfd, name, True, created)
        finally:
            if dfd != self._root:
                os.close(dfd)
        if self._open:
            self._drop(path)
        created.append(path)
        return created

    def unlink(self, path: str) -> None:
        """Remove a regular file, symlink or special file (EISDIR for a directory)."""
        _check(path)
        if path == ROOT:
            raise fs_error(errno.EISDIR, path)
        dfd, name = self._walk(path)
        try:
            # unlinkat refuses a directory with EISDIR itself (no type check needed, none is followed)
            os.unlink(name, dir_fd=dfd)
        except OSError as e:
            if e.filename == path:  # already ours
                raise
            raise fs_error(e.errno or errno.EIO, path) from None
        finally:
            if dfd != self._root:
                os.close(dfd)
        if self._open:
            self._drop(path)

    def truncate(self, path: str, size: int) -> None:
        """Cut a regular file to ``size`` bytes or extend it with zeros (EINVAL if negative)."""
        of = self._open.get(path) if type(path) is str else None  # see read
        if of is not None:
            if size < 0:
                raise fs_error(errno.EINVAL, path, "negative size")
            if of.write_errno:
                raise fs_error(of.write_errno, path)
            self._ftruncate(of.fd, size, path)
            return
        _check(path)
        fd, _ = self._open_file(path, os.O_WRONLY)
        try:
            if size < 0:
                raise fs_error(errno.EINVAL, path, "negative size")
            self._ftruncate(fd, size, path)
        finally:
            os.close(fd)

    @staticmethod
    def _ftruncate(fd: int, size: int, path: str) -> None:
        try:
            os.ftruncate(fd, size)
        except OverflowError:
            raise fs_error(errno.EINVAL, path, "size out of range") from None
        except OSError as e:
            raise fs_error(e.errno or errno.EIO, path) from None

    def rename(self, path: str, new: str) -> None:
        """Rename the regular file ``path`` to ``new`` with one ``renameat``
        between the two confined parent descriptors, so a regular file at
        ``new`` is replaced atomically: no observer of the local tree sees
        ``new`` missing.  A symlink or special file moves and is replaced as
        a file is.  Errors as MemFS: the source first (ENOENT, EISDIR), then
        the target (EISDIR for a directory, ENOENT when its parent is missing)."""
        self._renameat(path, new, is_dir=False)
        if self._open:  # neither path names the file a held descriptor was opened on any more
            self._drop(path)
            self._drop(new)

    def rename_dir(self, path: str, new: str) -> None:
        """Rename the directory ``path`` with everything under it, with one
        ``renameat`` between the two confined parent descriptors: the same
        inodes, an empty directory at ``new`` replaced atomically.  Errors
        as MemFS: the source first (ENOENT, ENOTDIR, EBUSY for the root),
        then the target (EINVAL inside the source, ENOTDIR for a file,
        ENOTEMPTY, ENOENT when its parent is missing)."""
        self._renameat(path, new, is_dir=True)
        if self._open:  # no held descriptor names its file by the old path any more
            for q in [q for q in self._open if under(q, path)]:
                self._drop(q)

    def _renameat(self, path: str, new: str, is_dir: bool) -> None:
        """``rename`` (a file, ``is_dir`` False) or ``rename_dir``: each
        name's kind checked, source first, then one ``renameat``."""
        _check(path)
        _check(new)
        root_errno = errno.EBUSY if is_dir else errno.EISDIR
        if path == ROOT:
            raise fs_error(root_errno, path)
        sfd, sname = self._walk(path)
        dfd = -1
        try:
            try:
                mode = os.stat(sname, dir_fd=sfd, follow_symlinks=False).st_mode
            except OSError as e:
                raise fs_error(e.errno or errno.EIO, path) from None
            if _S_ISDIR(mode) != is_dir:
                raise fs_error(errno.ENOTDIR if is_dir else errno.EISDIR, path)
            if new == ROOT:
                raise fs_error(root_errno, new)
            if is_dir and new == path:
                return
            if is_dir and under(new, path):
                raise fs_error(errno.EINVAL, new, "a directory cannot move into its own subtree")
            dfd, dname = self._walk(new)
            try:
                tmode = os.stat(dname, dir_fd=dfd, follow_symlinks=False).st_mode
            except FileNotFoundError:
                tmode = None
            except OSError as e:
                raise fs_error(e.errno or errno.EIO, new) from None
            if tmode is not None and _S_ISDIR(tmode) != is_dir:
                raise fs_error(errno.ENOTDIR if is_dir else errno.EISDIR, new)
            if new == path:
                return
            try:
                os.rename(sname, dname, src_dir_fd=sfd, dst_dir_fd=dfd)
            except OSError as e:
                if is_dir and e.errno in (errno.ENOTEMPTY, errno.EEXIST):
                    raise fs_error(errno.ENOTEMPTY, new) from None
                raise fs_error(e.errno or errno.EIO, path) from None
        finally:
            for fd in (sfd, dfd):
                if fd >= 0 and fd != self._root:
                    os.close(fd)

    def rmdir(self, path: str) -> None:
        """Remove an empty directory (ENOENT, ENOTDIR, ENOTEMPTY; EBUSY for the root, as MemFS)."""
        _check(path)
        if path == ROOT:
            fd = self._open_dir(ROOT)
            try:
                with os.scandir(fd) as it:
                    empty = next(it, None) is None
            finally:
                os.close(fd)
            raise fs_error(errno.EBUSY if empty else errno.ENOTEMPTY, path)
        dfd, name = self._walk(path)
        try:
            os.rmdir(name, dir_fd=dfd)
        except OSError as e:
            if e.errno == errno.EEXIST:  # some file systems say EEXIST for a non-empty directory
                raise fs_error(errno.ENOTEMPTY, path) from None
            if e.errno == errno.ENOTDIR:  # a file, symlink or special file: not a directory, as MemFS says
                raise fs_error(errno.ENOTDIR, path) from None
            raise self._final_error(e, dfd, name, path) from None
        finally:
            if dfd != self._root:
                os.close(dfd)

    def _open_dir(self, path: str) -> int:
        """A readable descriptor of the directory at ``path`` (ENOENT, ENOTDIR or ELOOP)."""
        if path == ROOT:
            try:
                return os.open(".", _DIR_READ, dir_fd=self._root)
            except OSError as e:
                raise fs_error(e.errno or errno.EIO, path) from None
        if self._o2 and path.find("/", 1) > 0:  # below the root's own entries: one call replaces the walk
            fd = _openat2(self._root, path[1:].encode(_FS_ENCODING, _FS_ERRORS), _HOW_DIR_READ)
            if fd >= 0:  # else the walk below, for its exact error
                return fd
        dfd, name = self._walk(path)
        try:
            return os.open(name, _DIR_READ, dir_fd=dfd)
        except OSError as e:
            raise self._final_error(e, dfd, name, path) from None
        finally:
            if dfd != self._root:
                os.close(dfd)

    def listdir(self, path: str) -> list[tuple[str, bool]]:
        """Sorted (name, is_dir) of every entry of a directory (symlinks and special files as files)."""
        _check(path)
        fd = self._open_dir(path)
        try:
            out = _entries(fd)
        except OSError as e:
            raise fs_error(e.errno or errno.EIO, path) from None
        finally:
            os.close(fd)
        out.sort()
        return out

    def _lstat(self, path: str) -> os.stat_result:
        """The stat of the entry at ``path`` itself, never followed: what stat and getattr report."""
        _check(path)
        root = self._root
        i = path.rfind("/")
        if i == 0:  # in the root: no walk (the common case of a flat export, kept lean)
            dfd, name = (root, ".") if path == ROOT else (root, path[1:])
        else:
            dfd, name = self._walk(path)
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except OSError as e:
            raise fs_error(e.errno or errno.EIO, path) from None
        finally:
            if dfd != root:
                os.close(dfd)
        return st

    def stat(self, path: str) -> tuple[bool, int]:
        """(is_dir, size) of the entry itself; size 0 for directories, a symlink's its target's length."""
        if path == ROOT:
            return (True, 0)
        st = self._lstat(path)
        return (True, 0) if _S_ISDIR(st.st_mode) else (False, st.st_size)

    def getattr(self, path: str) -> tuple[bool, int, int, int, int, int, int, int, int, int]:
        """(is_dir, mode, nlink, uid, gid, size, atime_ns, mtime_ns, ctime_ns, st_ino); size 0 for directories."""
        st = self._lstat(path)
        is_dir = _S_ISDIR(st.st_mode)
        size = 0 if is_dir else st.st_rdev if is_device(st.st_mode) else st.st_size  # (``attrs.Attr.rdev``)
        return (is_dir, st.st_mode, st.st_nlink, st.st_uid, st.st_gid, size,
                st.st_atime_ns, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)  # fmt: skip

    def _entry(self, path: str) -> int:
        """An ``O_PATH`` descriptor of the entry at ``path`` itself (a symlink's,
        never its target's), for the operations that act on the entry, not
        its data (setattr, statfs): nothing is opened for reading or writing."""
        _check(path)
        if path == ROOT:
            dfd, name = self._root, "."
        else:
            dfd, name = self._walk(path)
        try:
            return os.open(name, _O_PATH | os.O_NOFOLLOW | _CLOEXEC, dir_fd=dfd)
        except OSError as e:
            raise self._final_error(e, dfd, name, path) from None
        finally:
            if dfd != self._root:
                os.close(dfd)

    def setattr(self, path: str, mode: int, uid: int, gid: int, atime_ns: int, mtime_ns: int) -> None:
        """chown, then chmod, then utimensat, on the entry itself (``attrs.KEEP``
        / ``UTIME_OMIT`` skip a part; ``UTIME_NOW`` is this host's clock).

        The entry is held by an ``O_PATH`` descriptor opened with O_NOFOLLOW
        and changed through its ``/proc/self/fd`` link, which names exactly
        that inode: Linux has no fchmodat without following, and fchmod or
        futimens refuse an O_PATH descriptor, which (unlike a read/write
        open) needs no permission on the file.  chown goes first: it is the
        part most likely refused (EPERM for an agent that is not root), and
        a refusal then leaves nothing changed; it also clears set-id bits,
        which a chmod after it may set again (as ``install`` orders them)."""
        check_setattr(path, mode, uid, gid, atime_ns, mtime_ns)
        fd = self._entry(path)
        try:
            if mode != KEEP and _stat.S_ISLNK(os.fstat(fd).st_mode):  # refused before anything changed
                raise fs_error(errno.EOPNOTSUPP, path, "a symlink has no mode of its own (Linux)")
            link = _proc_fd(fd, path)
            if uid != KEEP or gid != KEEP:
                os.chown(link, uid, gid)
            if mode != KEEP:
                os.chmod(link, mode)
            if atime_ns != UTIME_OMIT or mtime_ns != UTIME_OMIT:
                _utimens(link, atime_ns, mtime_ns)
        except OSError as e:
            raise fs_error(e.errno or errno.EIO, path) from None
        finally:
            os.close(fd)

    def _xattr(self, path: str, call: Callable[[str], Any]) -> Any:
        """``call(link)`` on the entry at ``path`` (module docstring: Extended attributes)."""
        fd = self._entry(path)
        try:
            return call(_proc_fd(fd, path))
        except OSError as e:
            raise fs_error(e.errno or errno.EIO, path) from None
        finally:
            os.close(fd)

    def getxattr(self, path: str, name: str) -> bytes:
        """The value of extended attribute ``name`` (ENODATA if unset)."""
        _check(path)  # a bad path is refused first, as by every operation
        check_name(path, name)
        return self._xattr(path, lambda link: os.getxattr(link, name))

    def setxattr(self, path: str, name: str, value: bytes, flags: int) -> None:
        """Set ``name`` (``os.XATTR_CREATE``: EEXIST if set; ``XATTR_REPLACE``: ENODATA if not)."""
        _check(path)
        check_set(path, name, value, flags)
        self._xattr(path, lambda link: os.setxattr(link, name, value, flags))

    def listxattr(self, path: str) -> list[str]:
        """The names of the entry's extended attributes in the namespaces the federation carries, sorted."""
        _check(path)
        names = self._xattr(path, os.listxattr)
        return check_list(path, [n for n in names if allowed(n)])

    def removexattr(self, path: str, name: str) -> None:
        """Remove ``name`` (ENODATA if unset)."""
        _check(path)
        check_name(path, name)
        self._xattr(path, lambda link: os.removexattr(link, name))

    def statfs(self, path: str) -> tuple[int, int, int, int, int, int, int, int]:
        """(bsize, frsize, blocks, bfree, bavail, files, ffree, namemax) of the
        host file system holding ``path`` (namemax at most the federation's MAX_NAME)."""
        fd = self._entry(path)
        try:
            v = os.fstatvfs(fd)
        except OSError as e:
            raise fs_error(e.errno or errno.EIO, path) from None
        finally:
            os.close(fd)
        return (v.f_bsize, v.f_frsize, v.f_blocks, v.f_bfree, v.f_bavail, v.f_files, v.f_ffree,
                min(v.f_namemax, MAX_NAME))  # fmt: skip

    def fsync(self, path: str) -> None:
        """``os.fsync`` of the regular file (its open descriptor, or one opened for it)."""
        of = self._open.get(path) if type(path) is str else None  # see read
        if of is not None:
            fd, own = of.fd, False
        else:
            _check(path)
            fd, _ = self._open_file(path, os.O_RDONLY)
            own = True
        try:
            os.fsync(fd)
        except OSError as e:
            raise fs_error(e.errno or errno.EIO, path) from None
        finally:
            if own:
                os.close(fd)

    def open(self, path: str) -> None:
        """Check ``path`` is a regular file and keep a descriptor for it (one per path, reference counted)."""
        _check(path)
        try:
            try:
                fd, st = self._open_file(path, os.O_RDWR)
                write_errno = 0
            except OSError as e:
                if e.errno not in _WRITE_REFUSED:
                    raise
                fd, st = self._open_file(path, os.O_RDONLY)  # readable but not writable: writes get e.errno
                write_errno = e.errno
        except OSError as e:
            if e.errno in (errno.ENOENT, errno.EISDIR, FOREIGN_ERRNO):
                self._drop(path)  # the path no longer names the file we may hold
            raise
        of = self._open.get(path)
        if of is None:
            self._open[path] = _Open(fd, st, write_errno)
        elif of.dev == st.st_dev and of.ino == st.st_ino:
            os.close(fd)
            of.refs += 1
        else:  # replaced outside LocalFS since it was opened: follow the name, keep the count
            os.close(of.fd)
            refs = of.refs
            of = self._open[path] = _Open(fd, st, write_errno)
            of.refs = refs + 1

    def close(self, path: str) -> None:
        """Drop one reference; the descriptor is closed at zero.  Never fails for a canonical path (as MemFS)."""
        _check(path)
        of = self._open.get(path)
        if of is not None:
            of.refs -= 1
            if of.refs <= 0:
                del self._open[path]
                os.close(of.fd)

    def read(self, path: str, offset: int, size: int) -> bytes:
        """Up to ``size`` bytes at ``offset`` (short at end of file); EINVAL if either is negative."""
        # An open path is a key of self._open, which holds only canonical plain strs: a hit needs no _check.
        of = self._open.get(path) if type(path) is str else None
        if of is not None:
            if offset < 0 or size < 0:
                raise fs_error(errno.EINVAL, path, "negative offset or size")
            if size <= _READ_CLAMP:  # the hot path: one pread
                try:
                    data = os.pread(of.fd, size, offset)
                except OSError as e:
                    raise fs_error(e.errno or errno.EIO, path) from None
                except OverflowError:
                    raise fs_error(errno.EINVAL, path, "offset out of range") from None
                if len(data) == size or not data:
                    return data
            return self._pread(of.fd, offset, size, path)
        _check(path)
        fd, _ = self._open_file(path, os.O_RDONLY)
        try:
            if offset < 0 or size < 0:
                raise fs_error(errno.EINVAL, path, "negative offset or size")
            return self._pread(fd, offset, size, path)
        finally:
            os.close(fd)

    def write(self, path: str, offset: int, data: bytes) -> int:
        """Write ``data`` at ``offset`` (a gap is filled with zeros); returns len(data)."""
        of = self._open.get(path) if type(path) is str else None  # see read
        if of is not None:
            if offset < 0:
                raise fs_error(errno.EINVAL, path, "negative offset")
            if of.write_errno:
                raise fs_error(of.write_errno, path)
            n = len(data)
            if n:  # the hot path: one pwrite
                try:
                    done = os.pwrite(of.fd, data, offset)
                except OSError as e:
                    raise fs_error(e.errno or errno.EIO, path) from None
                except OverflowError:
                    raise fs_error(errno.EINVAL, path, "offset out of range") from None
                if done == n:
                    return n
                return done + self._pwrite(of.fd, offset + done, memoryview(data)[done:], path)
            return self._pwrite(of.fd, offset, data, path)
        _check(path)
        fd, _ = self._open_file(path, os.O_WRONLY)
        try:
            if offset < 0:
                raise fs_error(errno.EINVAL, path, "negative offset")
            return self._pwrite(fd, offset, data, path)
        finally:
            os.close(fd)

    # -- symlinks and special files (never followed, never opened) ----------------------
    def _make_entry(self, path: str, make: Callable[[str, int], None]) -> list[str]:
        """``make(name, parent_fd)`` in ``path``'s parent, made with its missing
        parents as create's (returned, root first); EEXIST if the name is taken."""
        _check(path)
        if path == ROOT:
            raise fs_error(errno.EEXIST, path)
        created: list[str] = []
        dfd, name = self._walk(path, created)
        try:
            make(name, dfd)
        except OSError as e:
            self._unmake_parents(created)
            raise fs_error(e.errno or errno.EIO, path) from None
        finally:
            if dfd != self._root:
                os.close(dfd)
        if self._open:
            self._drop(path)
        return created

    def symlink(self, path: str, target: str) -> list[str]:
        """A symlink at ``path`` holding ``target`` verbatim (``symlinkat`` on the
        parent's descriptor: the target is never resolved, here or later)."""
        _check(path)
        check_target(path, target)
        return self._make_entry(path, lambda name, dfd: os.symlink(target, name, dir_fd=dfd))

    def mknod(self, path: str, mode: int, dev: int = 0, uid: int = KEEP, gid: int = KEEP) -> list[str]:
        """A fifo, socket or device at ``path`` (``mknodat`` on the confined
        parent's descriptor; never opened by the agent), owned by ``uid``/``gid``
        where not KEEP (``fchownat`` without following, on the same descriptor;
        if that fails the node goes again).  A device gets ``dev``; who may make
        one is the home's decision (``attrs.check_device``), made before this."""
        _check(path)
        check_mknod(path, mode, dev, uid, gid)
        mode = _stat.S_IFMT(mode) | (_stat.S_IMODE(mode) & ~_UMASK)
        rdev = dev if is_device(mode) else 0

        def make(name: str, dfd: int) -> None:
            os.mknod(name, mode, rdev, dir_fd=dfd)
            if uid != KEEP or gid != KEEP:
                try:
                    os.chown(name, uid, gid, dir_fd=dfd, follow_symlinks=False)
                except OSError:
                    with contextlib.suppress(OSError):
                        os.unlink(name, dir_fd=dfd)
                    raise

        return self._make_entry(path, make)

    def link(self, path: str, old: str) -> list[str]:
        """A hard link ``path`` to the entry ``old`` (``linkat`` between the two
        confined parent descriptors, without AT_SYMLINK_FOLLOW: a symlink is
        linked itself, never followed), its missing parents made as create's
        (returned; removed again if the link fails).  Errors as MemFS's, in
        ``linkat(2)``'s order: ENOENT for ``old``, EEXIST for ``path``, EPERM
        for a directory."""
        _check(path)
        _check(old)
        root = self._root
        ofd, oname = (root, ".") if old == ROOT else self._walk(old)
        nfd = -1
        created: list[str] = []
        try:
            try:
                omode = os.stat(oname, dir_fd=ofd, follow_symlinks=False).st_mode
            except OSError as e:
                raise fs_error(e.errno or errno.EIO, old) from None
            if path == ROOT:
                raise fs_error(errno.EEXIST, path)
            nfd, nname = self._walk(path, created)
            try:
                if _S_ISDIR(omode):
                    if _kind(nfd, nname) is not None:
                        raise fs_error(errno.EEXIST, path)
                    raise fs_error(errno.EPERM, old, "a directory cannot be hard linked")
                try:
                    os.link(oname, nname, src_dir_fd=ofd, dst_dir_fd=nfd, follow_symlinks=False)
                except OSError as e:
                    raise fs_error(e.errno or errno.EIO, old if e.errno == errno.ENOENT else path) from None
            except OSError:
                self._unmake_parents(created)
                raise
        finally:
            for fd in (ofd, nfd):
                if fd >= 0 and fd != root:
                    os.close(fd)
        if self._open:
            self._drop(path)
        return created

    def readlink(self, path: str) -> str:
        """A symlink's target (``readlinkat`` on the parent's descriptor); EINVAL for anything else."""
        _check(path)
        if path == ROOT:
            raise fs_error(errno.EINVAL, path, "not a symlink")
        dfd, name = self._walk(path)
        try:
            return os.readlink(name, dir_fd=dfd)
        except OSError as e:
            raise fs_error(e.errno or errno.EIO, path) from None
        finally:
            if dfd != self._root:
                os.close(dfd)

    def list_dirs(self, path: str) -> list[str]:
        """Every directory under ``path``, inclusive, sorted; [] if ``path`` is missing or a file (as MemFS)."""
        _check(path)
        try:
            fd = self._open_dir(path)
        except OSError as e:
            if e.errno in (errno.ENOENT, errno.ENOTDIR):
                return []
            raise
        out = self._scan(path, fd, None)
        out.sort()
        return out

    # -- data transfer ----------------------------------------------------------------
    @staticmethod
    def _pread(fd: int, offset: int, size: int, path: str) -> bytes:
        try:
            if size > _READ_CLAMP:
                size = max(0, min(size, os.fstat(fd).st_size - offset))
            data = os.pread(fd, size, offset)
            if 0 < len(data) < size:  # a short read that may not be end of file: go on until it is
                parts = [data]
                got = len(data)
                while got < size:
                    more = os.pread(fd, size - got, offset + got)
                    if not more:
                        break
                    parts.append(more)
                    got += len(more)
                data = b"".join(parts)
            return data
        except OverflowError:
            raise fs_error(errno.EINVAL, path, "offset or size out of range") from None
        except OSError as e:
            raise fs_error(e.errno or errno.EIO, path) from None

    @staticmethod
    def _pwrite(fd: int, offset: int, data: bytes, path: str) -> int:
        try:
            n = len(data)
            if n == 0:
                # MemFS extends the file to ``offset`` even for an empty write; POSIX pwrite would not.
                if offset > os.fstat(fd).st_size:
                    os.ftruncate(fd, offset)
                return 0
            done = os.pwrite(fd, data, offset)
            if done < n:
                view = memoryview(data)
                while done < n:
                    w = os.pwrite(fd, view[done:], offset + done)
                    if w <= 0:
                        raise OSError(errno.EIO, "short write")
                    done += w
            return n
        except OverflowError:
            raise fs_error(errno.EINVAL, path, "offset out of range") from None
        except OSError as e:
            raise fs_error(e.errno or errno.EIO, path) from None

    # -- whole-tree walk ----------------------------------------------------------------
    def _scan(self, top: str, top_fd: int, files: dict[str, Any] | None) -> list[str]:
        """Directories under ``top`` (inclusive), depth first from the open ``top_fd`` (closed here).

        One descriptor per level of the current branch, each opened relative to
        its parent with O_NOFOLLOW, so symlinked directories are never entered.
        With ``files``, also reads every regular file into it (for ``tree``)."""
        dirs = [top]
        try:
            first = _entries(top_fd)
        except OSError as e:
            os.close(top_fd)
            raise fs_error(e.errno or errno.EIO, top) from None
        stack: list[tuple[str, int, Any]] = [(top, top_fd, iter(first))]
        try:
            while stack:
                p, fd, it = stack[-1]
                for name, is_dir in it:
                    child = join(p, name)
                    if not is_dir:
                        if files is not None:
                            files[child] = self._slurp(fd, name, child)
                        continue
                    dirs.append(child)
                    try:
                        cfd = os.open(name, _DIR_READ, dir_fd=fd)
                    except OSError:
                        continue  # vanished or replaced since listed: nothing to descend into
                    try:
                        entries = _entries(cfd)
                    except OSError:
                        os.close(cfd)
                        continue
                    stack.append((child, cfd, iter(entries)))
                    break
                else:
                    stack.pop()
                    os.close(fd)
        finally:
            for _, fd, _ in stack:
                os.close(fd)
        return dirs

    @staticmethod
    def _slurp(dir_fd: int, name: str, path: str) -> bytes | tuple[object, ...]:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if _stat.S_ISLNK(st.st_mode):
            return special_entry(st.st_mode, os.readlink(name, dir_fd=dir_fd))
        if not _S_ISREG(st.st_mode):  # never opened: a fifo would block, a device is not ours to read
            return special_entry(st.st_mode, st.st_rdev)
        fd = os.open(name, os.O_RDONLY | _FILE, dir_fd=dir_fd)
        try:
            if not _S_ISREG(os.fstat(fd).st_mode):
                raise _foreign(path)
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    # -- set-up and inspection, for tests and conformance scenarios -----------------------
    def populate(self, files: Iterable[tuple[str, int | bytes]], dirs: Iterable[str] = ()) -> None:
        """Pre-populate (as if written before the federation started): int content = that many zero bytes."""
        for d in dirs:
            self.mkdir(d)
        for path, content in files:
            if isinstance(content, int) and content < 0:
                raise ValueError(f"negative size {content} for {path!r}")
            self.create(path)
            if isinstance(content, int):
                if content:
                    fd, _ = self._open_file(path, os.O_WRONLY)
                    try:
                        os.ftruncate(fd, content)  # zeros, without writing them
                    finally:
                        os.close(fd)
            elif content:
                self.write(path, 0, bytes(content))

    def tree(self) -> dict[str, Any]:
        """path -> None for directories, content for files, ``attrs.special_entry``
        for symlinks and special files: the whole served namespace (like MemFS.tree)."""
        files: dict[str, Any] = {}
        out: dict[str, Any] = {d: None for d in self._scan(ROOT, self._open_dir(ROOT), files)}
        out.update(files)
        return out

    def apply(self, op: str, path: str, args: tuple[Any, ...] = ()) -> Any:
        """Run one LOCAL_OPS operation by name (what a runtime does for a Local effect).

        The root is checked (``check_root``) before an operation that changes
        the namespace or summarises it, and after any operation that failed:
        a root deleted or moved away makes most operations fail (ENOENT in a
        deleted directory), and a check then costs nothing on the hot path.
        Once the root is lost every operation fails with EIO saying so."""
        fn = self._ops.get(op)
        if fn is None:
            raise ValueError(f"unknown local operation {op!r}; allowed: {', '.join(LOCAL_OPS)}")
        if op in _CHECKED_FIRST:
            _check(path)  # a bad path is refused before any system call, the root's stat included
            if not self.check_root():
                raise self.lost_error(path)
        try:
            return fn(path, *args)
        except InvalidPath:
            raise  # the request's fault, found without touching the file system: nothing to check
        except OSError:
            if not self.check_root():
                raise self.lost_error(path) from None
            raise

    # -- the root itself ---------------------------------------------------------------
    def check_root(self) -> bool:
        """Whether the configured root path still names the directory this object serves.

        The root descriptor is held for the object's life, so a root deleted,
        renamed away or replaced by a new directory at the same path would
        otherwise go on being served, silently: files written into an unlinked
        tree, a namespace nobody else sees.  One ``stat`` of the configured
        path against the descriptor's (st_dev, st_ino) tells.  On the first
        mismatch the root and every open file are closed (nothing can reach
        the old tree any more: the root descriptor is -1, which the kernel
        refuses), ``lost`` says what happened and what to do, and the log says
        it once; every later operation fails with ``lost_error``.  Another
        error of the stat (EACCES on a parent, say) is not taken as a loss: the
        tree held is still the configured one as far as can be told."""
        if self.lost is not None:
            return False
        if self._root < 0:  # closed by close_all: not lost, just shut
            return True
        try:
            st = os.stat(self.root)
        except (FileNotFoundError, NotADirectoryError):
            st = None
        except OSError:
            return True
        if st is not None and (st.st_dev, st.st_ino) == self._root_id:
            return True
        try:
            gone = os.fstat(self._root).st_nlink == 0
        except OSError:
            gone = False
        if st is None:
            what = "was deleted" if gone else "was renamed or moved away (the path no longer exists)"
        elif not _S_ISDIR(st.st_mode):
            what = "was replaced by something that is not a directory"
        else:
            what = f"was {'deleted' if gone else 'moved away'} and another directory now has its path"
        self.lost = (
            f"the node's root {self.root} {what} since the agent started; it serves nothing until restarted: "
            f"restore {self.root} (or correct root: in the cluster file) and restart the agent"
        )
        log.error("LocalFS: %s", self.lost)
        for of in self._open.values():
            os.close(of.fd)
        self._open.clear()
        os.close(self._root)
        self._root = -1
        return False

    def lost_error(self, path: str) -> OSError:
        """The error every operation gets once the root is lost (EIO, naming the root and the remedy)."""
        return fs_error(ROOT_LOST_ERRNO, path, self.lost or "the root is no longer served")
