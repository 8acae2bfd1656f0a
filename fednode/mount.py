"""A federation as an ordinary directory: FUSE (libfuse3 through mfusepy) over ``fednode.client``.

    fednode mount --cluster FILE --node ID MOUNTPOINT [--foreground] [--route home|entry] [--consistency cto|sync]
                  [--allow-other]
    fednode umount MOUNTPOINT

``FedOps`` only translates: each FUSE callback becomes the ``Client`` call of
the same meaning, and the client's ``OSError`` goes back to the kernel with
its errno unchanged.  Every decision about names, homes, renames and failures
is the protocol's, and so is where a call goes (``Entries``): the mount is a
client of the whole federation, as a Federated DAFS client is, and sends a
path's operation straight to the file's home where it has seen the file, else
to the name's manager (``fedsim.protocol.routing``'s ``home`` route, the one
the simulator's FUSE model runs); ``--route entry`` makes every call enter at
the mount's node instead, which relays (as a DNFS server is entered at one).

Threads.  libfuse runs callbacks on several threads so that calls waiting on
other nodes overlap.  A ``Client`` serialises its calls (one request at a time
per connection), so the mount keeps a pool of clients of each agent it calls
(``POOL_SIZE`` connections at most): a path operation borrows one for the call; an open
file keeps the client its descriptor was opened on (descriptors belong to
their connection), whose lock orders that file's reads and writes.
Thread-local clients would not work: libfuse's threads enter Python through
ctypes callbacks, whose thread state (and so ``threading.local``) lasts one
callback.

Caching and coherence across mounts.  The kernel caches names (entries) and
attributes for ``ENTRY_TIMEOUT`` = ``ATTR_TIMEOUT`` = 1 s, the libfuse
defaults, used by the passthrough baseline of ``fednode.tools.mount_bench``
too: shorter multiplies the lookups of ``stat``-heavy programs (git, tar, a
compiler), longer delays what other mounts see.  Failed lookups are not cached
(``NEGATIVE_TIMEOUT`` = 0), so a name created elsewhere is found at once.
The attributes libfuse asks for right after a ``create`` come with the
create's open (``Client.pipeline``: one round trip for both), used once and
only within ``_PREFETCH_AGE_S``: as fresh as a getattr round trip of its own.
File data follows the mount's consistency mode (``fednode mount --consistency``;
``DEFAULT_CONSISTENCY``, or ``CONSISTENCY_ENV`` when the option is not given):

* ``sync`` (the mount before issue 23): writes go through to the file's
  home before ``write`` returns (a 4 KiB write that straddles a page is two
  round trips), and the kernel drops a file's pages at each open (no
  ``keep_cache``).  Property: once a write, close or metadata change has
  returned at one mount, every open and read that *starts*
  ``COHERENCE_BOUND_S`` (1 s) later at any mount sees it; two mounts that
  both have a file open see each other's writes at their next open.
* ``cto`` (the default), close-to-open, NFS's: an open file's writes are
  held by the mount, per handle (``_WriteBuffer``: coalesced, at most
  ``WRITE_BUFFER`` bytes in ``MAX_EXTENTS`` ranges), and sent in one round trip (the ranges are disjoint,
  so their writes commute and are pipelined) at ``flush`` (``close(2)`` waits
  for it), at ``fsync``, when the buffer is full, and before anything on this
  mount must see them: a read of the file through any handle, its getattr
  (the size), a truncate, a change of its times, mode or owner (else the held
  writes, sent later, would set the mtime a ``cp -p`` just set); an unlink at
  this mount drops them.  An open fetches the file's attributes in its own
  round trip and keeps the kernel's pages (``keep_cache``) only if the file
  is the version they were read from (ino, size, mtime_ns, ctime_ns: ctime
  moves with every change; ext4 and tmpfs on Linux 6.13+ give a changed file a
  new ctime even within one clock tick once its ctime was read); if the
  attributes the kernel holds are not the open's, it is told to drop them
  (``fuse_invalidate_path``: FUSE_NOTIFY_INVAL_INODE, which without dirty
  pages never waits), else a size it trusts for ``ATTR_TIMEOUT`` would cut
  reads of a file another mount extended short.  Property (tested with two
  mounts at different nodes): an open at any mount that starts after a
  ``close`` (or ``fsync``) returned at another sees all that close's data, at
  once; what another mount wrote and has not closed may be seen or not (held
  writes are sent when the buffer fills), and each 4 KiB page-aligned record
  is seen whole, never torn (a send is cut at ``fclient.CHUNK`` multiples, and
  an agent runs one call at a time).  Metadata keep the 1 s bound (a ``stat``
  may show the size before another mount's close for up to ``ATTR_TIMEOUT``;
  the open after it does not).  Errors: a held write that fails is reported
  by ``close`` or ``fsync`` (as NFS does: check them), once; one found while
  sending for another call (a read, a getattr) is kept for the handle's next
  ``close``/``fsync``; a ``write`` that finds the buffer full and its send
  failing fails itself and its data is not kept.  The data of a failed send
  is dropped, not retried.  After ``close`` a handle still used (a ``dup``,
  a shared mapping written back) writes through, since no later flush would
  report an error.

Why buffer in the mount rather than use the kernel's ``writeback_cache``:
with it the kernel keeps a regular file's size and times as its own
(``fuse_get_cache_mask``) and never takes the size another mount wrote, which
breaks close-to-open across mounts, and it writes dirty pages back whenever
it likes, so an open elsewhere could not know it has everything; a buffer per
handle is sent exactly when the protocol needs it, and its errors reach
``close``.

Listings (readdirplus).  A readdir is one ``Client.readdir_attrs`` per
listing (two round trips of the agent whatever the number of entries) kept
with the directory handle, and every entry goes to the kernel with its full
attributes (``FUSE_FILL_DIR_PLUS``; ``_FUSE.readdir_fuse_3``), readdirplus
on every readdir (not "auto"): the kernel then knows each name and its
attributes for the cache timeouts above, so ``ls -l``, ``find -ls`` and
``scandir`` + ``stat`` make no lookup or getattr per name (before: a
getattr round trip per file in readdir, then a lookup per name).

Extended attributes.  ``getxattr``, ``setxattr`` (XATTR_CREATE, XATTR_REPLACE),
``listxattr`` and ``removexattr`` (``user.``; ``trusted.`` for root;
``security.`` where ``protocol.security_xattrs`` serves it) are the ``Client``
calls of the same names, with the FUSE caller's uid, which the home applies as
Linux does for an unprivileged caller (a file's at its home, a directory's at its holders: the
protocol's rules, ``fedsim.protocol.fedfs.extattrs``), with the errnos a local
file system gives: ENODATA, EEXIST, ERANGE (a name over 255 bytes, or a
caller's buffer too small: mfusepy compares it with what we return, and a
size of 0 gets the length), E2BIG (a value over 64 KiB), and ENOSPC where the
home's file system has no more room for the file's attributes (ext4: about
4 KiB per file).  Names in other namespaces are refused here without a call.

Many users (issue 22).  Permission checks are the kernel's
(``default_permissions``, always on) against the modes, owners and groups the
federation stores; ``--allow-other`` (libfuse's ``allow_other``) lets every
user of the machine enter the mount, not only the mounter (a mounter that is
not root needs ``user_allow_other`` in /etc/fuse.conf; root does not).  A
name made through the mount is the caller's: ``create``/``mkdir`` send the
uid and fsgid libfuse's context carries (``fuse_get_context``: what the
kernel authenticated), the parent's group instead when the parent is
set-group-ID (a new directory then inherits S_ISGID: Linux's rule, from the
parent's attributes as this mount last gave them to the kernel), and the mode
as the kernel sent it (the VFS applied the caller's umask and dropped a
file's S_ISGID for a caller outside its group), all in the one create or
mkdir request: the home makes the entry with them (``messages.Create``), so
it is never, even for an instant or after a failure, the agent's.  The
agents must run as root to give files to other users (else EPERM, and
nothing is made).  What the kernel already does, tested as ordinary users:
EACCES for a caller the mode refuses; EPERM for chown by a non-owner and for
removing or renaming another's file in a sticky directory (``may_delete``);
S_ISUID (and S_ISGID with group execute) cleared when a user other than root
writes a file (``file_remove_privs``: the mount claims no
``FUSE_HANDLE_KILLPRIV``, so the kernel sends a SETATTR, which the mount
stores) and on chown (``notify_change``); supplementary groups.  The client
API has no calling user: a program holding the cluster's client key chooses
the owners it gives (as an NFS client with AUTH_SYS does).

Open files and renames.  A descriptor pins its file at the home (a rename of
an open file is ``EBUSY``: the protocol's rule); a rename of a file open at
this mount gives up this mount's descriptors of it first (their buffered
writes sent), so it is ``EBUSY`` only while another mount holds it open.  A
file unlinked or renamed over while open at this mount keeps working through
every descriptor of this mount until its last close, as on a local file
system, and so it does at every other mount: the protocol's (``fedfs/home.py``:
the home keeps a file unlinked or renamed over while open as an orphan for
the descriptors open on it, at any node, until their last close).  libfuse's
hide-on-unlink (``hard_remove`` off) renames such a file to a ``.fuse_hidden``
name; ``rename`` unlinks it in the federation instead, with this mount's
descriptors of it held open (``_hide``), so the directory it left lists
nothing and may be removed, and the hidden name is served by descriptor
(``fgetattr``, ``ftruncate``, ``fsetattr``; its link count is the home's,
less the orphan's own name).  The last ``release`` closes the last descriptor,
which frees it; a mount that crashes leaves nothing: its agent closes the
descriptors of a connection it lost.  FUSE's ``release`` reaches
the file system after ``close(2)`` has returned, so a program that closes a
file and renames it at once (git's lock files) would race it; the mount
therefore closes the federation descriptor at ``flush``, which ``close(2)``
waits for, and reopens it by name should the kernel use the handle again (a
``dup``'ed descriptor, a shared mapping written back later).

Symbolic links and special files (issue 22) are the protocol's
(``fedsim/protocol/fedfs/links.py``): ``symlink``, ``readlink`` and
``mknod`` (fifos and sockets, owned by the caller from their first instant;
a device for a caller of uid 0 where ``protocol.devices`` allows it, else
``EPERM``) become the client calls of the same names, and getattr
gives the entry's own type (``S_IFLNK``, ``S_IFIFO`` ...).  The federation
never follows a symlink: the kernel does, asking ``readlink`` and looking the
target's components up as ordinary names.  The I/O of a fifo, socket or
device node is the kernel's own (its open never reaches a FUSE file
system), so a fifo on the mount connects a writer and a reader of this
machine, as on any local file system.

Hard links (issue 22) are the protocol's ``link``: the new name gets the
old name's home, where the two names are one local file, so ``stat`` of
either gives the same ``st_ino`` and ``st_nlink`` counts the names; unlink
of one keeps the others, and ``tar -x`` of an archive with hard links makes
them.  The call goes where the old name is routed (its home, once known).
Refused: ``EPERM`` when the federation runs ``replicas: 2`` or the block
cache (see ``fedsim/protocol/fedfs/links.py``); a migration of a file with
several names is refused (``EMLINK``) and leaves it in place.  In ``cto``
mode a write buffered through one name is sent at its close (or fsync), so
a ``stat`` of another name of the file sees it from then on.

What it does not do (clear errors, not silent surprises): devices unless
``protocol.devices`` (``EPERM``), chmod of a symlink (``EOPNOTSUPP``, as on
Linux); ``rename`` flags such as ``RENAME_NOREPLACE`` (``EINVAL``: callers
fall back to a plain rename); extended attributes in ``system.`` (POSIX ACLs)
and, unless ``protocol.security_xattrs``, in ``security.`` (``EOPNOTSUPP``; see
``fedsim.protocol.xattrs`` for why); a file unlinked while open at *another*
mount is gone for that mount's descriptors (``ENOENT``).  Byte-range locks are the
kernel's, local to one mount.  Names longer than 255 bytes and paths of 4096 bytes or more are
``ENAMETOOLONG``, as the kernel expects (``statfs`` reports the same
``namemax``).  An agent that dies makes its files ``EHOSTDOWN`` within the
client timeout; an operation routed to a dead agent (a name it manages, a file
it holds; with ``--route entry``, every call) is ``EHOSTDOWN``, never a hang.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import errno
import functools
import inspect
import itertools
import json
import logging
import os
import queue
import re
import select
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from fedsim.protocol import xattrs
from fedsim.protocol.attrs import Attr, dir_ino
from fedsim.protocol.designs import design_class
from fedsim.protocol.names import MAX_NAME, MAX_PATH, under
from fedsim.protocol.routing import Router

# mfusepy picks libfuse2 ("fuse") before libfuse3 when both are installed, unless told:
# FUSE_LIBRARY_NAME / FUSE_LIBRARY_PATH are read once, at its import.
if not os.environ.get("FUSE_LIBRARY_PATH"):
    os.environ["FUSE_LIBRARY_NAME"] = "fuse3"
import mfusepy

from fednode import client as fclient
from fednode.config import Cluster, load_cluster

log = logging.getLogger("fednode.mount")

if mfusepy.fuse_version_major != 3:  # pragma: no cover - a machine with FUSE_LIBRARY_PATH set to libfuse2
    raise ImportError(f"fednode mount needs libfuse3; mfusepy loaded {mfusepy._libfuse_path} (FUSE_LIBRARY_PATH?)")

ENTRY_TIMEOUT = 1.0  # seconds the kernel trusts a name it looked up
ATTR_TIMEOUT = 1.0  # seconds the kernel trusts a file's attributes
NEGATIVE_TIMEOUT = 0.0  # a failed lookup is not remembered
COHERENCE_BOUND_S = max(ENTRY_TIMEOUT, ATTR_TIMEOUT, NEGATIVE_TIMEOUT)
POOL_SIZE = 16  # connections to each agent: more than libfuse's threads, far below limits.max_connections
ROUTES = ("home", "entry")  # where a mount's calls go (``Entries``)
READY_MOUNTED = "fednode-mounted"  # the line `fednode mount` prints once the kernel talks to the mount
#: directories whose mode and group a mount remembers for the set-group-ID rule of new names (``_Dirs``)
DIR_ATTRS = 4096
# create's attributes answer the getattr libfuse makes right after it only this soon (the same thread, at
# once): no older than the attributes a getattr round trip would bring, so the coherence bound is unchanged
_PREFETCH_AGE_S = 0.02
#: names the file a mount writes its callback counters to (``MountStats``); unset, nothing is counted
STATS_ENV = "FEDNODE_MOUNT_STATS"
#: the kernel's readahead on a mount, KiB (``raise_readahead``): as large as one FUSE read (max_pages, 1 MiB)
READAHEAD_KB = 1024
#: the consistency modes (see the module docstring): writes buffered until close, or sent by each write
CONSISTENCY_MODES = ("cto", "sync")
# cto: every test of the mount passes in it, and the FUSE model follows it (round trips per PostMark
# run within the same few per cent of the mount's count as in sync); sync stays for programs that
# never check close(2)'s status
DEFAULT_CONSISTENCY = "cto"
#: the mode a mount runs in when none is given (``--consistency``): for a whole experiment at once
CONSISTENCY_ENV = "FEDNODE_MOUNT_CONSISTENCY"
#: bytes of writes an open file may hold back in ``cto`` (one client message: sent in one round trip) ...
WRITE_BUFFER = fclient.CHUNK
#: ... in at most this many separate ranges (a random writer's buffer is sent before it grows long)
MAX_EXTENTS = 64
#: where a mount keeps a file unlinked (or renamed over) while open through it, until its last close:
#: a directory at the federation's root, left out of the root's listing (``FedOps.rename``)
#: libfuse's name for such a file (``hard_remove`` off: it renames the file to ``DIR/.fuse_hidden...``)
LIBFUSE_HIDDEN = ".fuse_hidden"
#: files whose last-seen attributes the mount remembers (for ``keep_cache`` at open), oldest forgotten first
_SEEN_MAX = 65536


def default_consistency() -> str:
    """``CONSISTENCY_ENV`` if set, else ``DEFAULT_CONSISTENCY``; ``ValueError`` for an unknown mode."""
    mode = os.environ.get(CONSISTENCY_ENV) or DEFAULT_CONSISTENCY
    if mode not in CONSISTENCY_MODES:
        raise ValueError(f"{CONSISTENCY_ENV}={mode!r}: not one of {', '.join(CONSISTENCY_MODES)}")
    return mode


def check_name(path: str) -> None:
    """``ENAMETOOLONG`` for what the kernel would refuse on a local file
    system: a component over ``MAX_NAME`` bytes or a path of ``MAX_PATH`` bytes
    or more (the protocol counts characters; the kernel counts bytes)."""
    raw = path.encode("utf-8", "surrogateescape")
    if len(raw) >= MAX_PATH or any(len(part) > MAX_NAME for part in raw.split(b"/")):
        raise OSError(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG), path)


class FuseConfig:
    """The libfuse options both the federation mount and the passthrough baseline use (one place)."""

    @staticmethod
    def apply(config: Any) -> None:
        config.entry_timeout = ENTRY_TIMEOUT
        config.attr_timeout = ATTR_TIMEOUT
        config.negative_timeout = NEGATIVE_TIMEOUT
        config.use_ino = 1  # st_ino from getattr and readdir, not libfuse's own numbers
        config.hard_remove = 1  # unlink really unlinks (the baseline's; FedOps turns it off: see its init)
        config.kernel_cache = 0
        config.auto_cache = 0


# libfuse3's readdir flags (fuse.h): the kernel asked for readdirplus; a filler entry carries full attributes
FUSE_READDIR_PLUS = 1 << 0
FUSE_FILL_DIR_PLUS = 1 << 1
# fuse_common.h: the kernel may use readdirplus; ... and decides per call whether to (``init_with_config``)
FUSE_CAP_READDIRPLUS = 1 << 13
FUSE_CAP_READDIRPLUS_AUTO = 1 << 14


class _FUSE(mfusepy.FUSE):
    """mfusepy's FUSE, with ``rename``'s flags passed on (mfusepy drops them,
    which would turn ``RENAME_NOREPLACE`` into a silent overwrite), and
    readdirplus (mfusepy passes only a name's type and inode number)."""

    def rename_fuse_3(self, old: bytes, new: bytes, flags: int) -> int:
        return self.operations.rename(
            old.decode(self.encoding, self.errors), new.decode(self.encoding, self.errors), flags
        )

    def truncate_fuse_3(self, path: bytes | None, length: int, fip: Any) -> int:
        """ftruncate(2) with its file handle (mfusepy drops it): the open file, whatever its name now."""
        fh = fip.contents.fh if fip else None
        return self.operations.truncate(None if path is None else path.decode(self.encoding, self.errors), length, fh)

    def open(self, path: bytes, fip: Any) -> int:
        """mfusepy's open, and the kernel told to keep the file's cached pages
        when the operations say so (``keep_cache(fh)``: ``cto``'s revalidation)."""
        fi = fip.contents
        fi.fh = self.operations.open(path.decode(self.encoding, self.errors), fi.flags)
        keep = getattr(self.operations, "keep_cache", None)
        if keep is not None and keep(fi.fh):
            fi.keep_cache = 1
        return 0

    def readdir_fuse_3(self, path: bytes | None, buf: Any, filler: Any, offset: int, fip: Any, flags: int) -> int:
        """Entries from ``offset`` on, each with its full ``struct stat`` and
        ``FUSE_FILL_DIR_PLUS`` when the kernel asked for readdirplus, so that
        the kernel caches every name and its attributes and ``ls -l`` looks up
        and stats none of them.  The entries carry non-zero offsets (their
        position + 1): libfuse 3.14's high-level readdir passes a readdirplus
        entry's attributes on only in that mode (without offsets it buffers
        the listing and sends nodeid 0, "ignore these attributes"; fixed in
        3.18), calling the file system again from the offset where the
        kernel's buffer filled.  ``FedOps.readdir`` keeps its listing per
        directory handle, so one listing serves all those calls."""
        if not getattr(self.operations, "readdir_plus", False):  # (the passthrough baseline): mfusepy's way
            return super().readdir_fuse_3(path, buf, filler, offset, fip, flags)
        plus = bool(flags & FUSE_READDIR_PLUS)
        decoded = None if path is None else path.decode(self.encoding, self.errors)
        st = mfusepy.c_stat()
        for name, attrs, off in self.operations.readdir(decoded, fip.contents.fh, offset):
            ctypes.memset(ctypes.byref(st), 0, ctypes.sizeof(st))
            full = plus and "st_nlink" in attrs
            if full:
                mfusepy.set_st_attrs(st, attrs, use_ns=True)
            else:  # a plain entry: its type and inode number (use_ino); the kernel looks it up when needed
                st.st_mode = attrs["st_mode"]
                st.st_ino = attrs.get("st_ino", 0)
            if filler(buf, name.encode(self.encoding, self.errors), st, off, FUSE_FILL_DIR_PLUS if full else 0):
                break  # the kernel's buffer is full: it asks again from ``off``
        return 0


class ClientPool:
    """Up to ``size`` clients of one agent, made when first needed."""

    def __init__(self, factory: Callable[[], fclient.Client], size: int = POOL_SIZE) -> None:
        self._factory = factory
        self._free: queue.LifoQueue[fclient.Client] = queue.LifoQueue()
        self._size = size
        self._made = 0
        self._lock = threading.Lock()
        self.all: list[fclient.Client] = []

    @contextlib.contextmanager
    def client(self) -> Iterator[fclient.Client]:
        c = self.take()
        try:
            yield c
        finally:
            self._free.put(c)

    def take(self) -> fclient.Client:
        """A client no other thread has borrowed (``give`` it back)."""
        try:
            return self._free.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            make = self._made < self._size
            if make:
                self._made += 1
        if not make:
            return self._free.get()
        try:
            c = self._factory()
        except BaseException:
            with self._lock:
                self._made -= 1
            raise
        with self._lock:
            self.all.append(c)
        return c

    def give(self, c: fclient.Client) -> None:
        self._free.put(c)

    def close(self) -> None:
        with self._lock:
            for c in self.all:
                with contextlib.suppress(OSError):
                    c.disconnect()


class Entries:
    """Where a mount's calls go: the agent a path's operation is routed to, and a
    pool of clients of each agent (made when first needed).

    ``route="home"`` (the default): the mount is a client of the whole
    federation, as a Federated DAFS client is.  A path's operation goes to the
    file's home where the mount has seen it (the home its inode number names,
    learnt from every getattr and create's attributes), else to the path's
    manager: ``fedsim.protocol.routing.Router``, the protocol's code, which the
    simulator's FUSE model runs too.  With the default placement a file's home
    is its manager, so a stat, open, read or write is served by the agent that
    receives it, with no relay.  A hint gone stale (the file migrated) costs a
    relay, never a wrong answer: the agent's requester finds the file, and the
    attributes of the next getattr teach the mount its new home.
    ``route="entry"``: every call enters at ``node`` (today's DNFS-style mount,
    kept for comparison), and always for a design other than FedFS
    (``Node.CLIENT_ROUTE``: its clients each mount one server, as the papers'
    do; dNFSp1's coherence is per meta-server).  ``statfs`` always asks ``node``.

    The router's table is shared by libfuse's threads: a lock around it."""

    def __init__(
        self, cluster: Cluster, node: int, route: str, connect: Callable[[int], fclient.Client], pool_size: int
    ) -> None:
        if route not in ROUTES:
            raise ValueError(f"unknown mount route {route!r}; allowed: {', '.join(ROUTES)}")
        federation = cluster.spec.federation()
        if design_class(federation.design).CLIENT_ROUTE != "home":
            route = "entry"  # a design whose clients each mount one server (dNFSp: its meta-server's view)
        self.node = node
        self.route = route
        self.router = Router("home", federation) if route == "home" else None
        self._connect = connect
        self._size = pool_size
        self._pools: dict[int, ClientPool] = {}
        self._lock = threading.Lock()

    def node_of(self, path: str | None) -> int:
        """The agent an operation on ``path`` goes to (``node`` for none)."""
        if path is None or self.router is None:
            return self.node
        with self._lock:
            return self.router.entry(0, path)

    def pool(self, path: str | None = None) -> ClientPool:
        """The clients of the agent an operation on ``path`` goes to."""
        n = self.node_of(path)
        pool = self._pools.get(n)
        if pool is None:
            with self._lock:
                pool = self._pools.get(n)
                if pool is None:
                    pool = self._pools[n] = ClientPool(functools.partial(self._connect, n), self._size)
        return pool

    def learn(self, path: str, attr: Any) -> None:
        if self.router is not None:
            with self._lock:
                self.router.learn(path, attr)

    def forget(self, path: str, below: bool = False) -> None:
        if self.router is not None:
            with self._lock:
                self.router.forget(path, below)

    @contextlib.contextmanager
    def client(self, path: str | None = None) -> Iterator[fclient.Client]:
        """A client of ``path``'s agent for one call; a path that turns out not to
        exist loses its hint (its next operation goes to its manager)."""
        try:
            with self.pool(path).client() as c:
                yield c
        except FileNotFoundError:
            if path is not None:
                self.forget(path)
            raise

    def close(self) -> None:
        for pool in list(self._pools.values()):
            pool.close()


class _Dirs:
    """The mode and group of the directories a mount last described to the
    kernel (getattr, readdirplus), at most ``size``, the least recently seen
    dropped first: what the group of a name made in one comes from
    (``FedOps._new_owner``).  Fresh enough by construction: the kernel's
    permission check of the create used attributes it got from this mount,
    which are never newer than these.  libfuse's threads share it: a lock."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._seen: collections.OrderedDict[str, tuple[int, int]] = collections.OrderedDict()
        self._lock = threading.Lock()

    def saw(self, path: str, a: Attr) -> None:
        if not a.is_dir:
            return
        with self._lock:
            self._seen[path] = (a.mode, a.gid)
            self._seen.move_to_end(path)
            if len(self._seen) > self._size:
                self._seen.popitem(last=False)

    def get(self, path: str) -> tuple[int, int] | None:
        with self._lock:
            return self._seen.get(path)

    def forget(self, path: str, below: bool = False) -> None:
        with self._lock:
            self._seen.pop(path, None)
            if below:
                for p in [p for p in self._seen if under(p, path)]:
                    del self._seen[p]


class _NoCaps:
    """The files this mount found without ``security.capability`` in the last
    ``ttl`` seconds, at most ``size`` (the oldest dropped first): the kernel's
    question before every write answered with no round trip (the extended
    attributes' comment in ``FedOps``).  A set or remove of an attribute of a
    file at this mount drops it, and a change of names (unlink, rename, link)
    drops them all, so that another file taking a path is asked about; a
    capability set at another mount is seen within ``ttl``, as attributes are.
    libfuse's threads share it: a lock."""

    def __init__(self, size: int, ttl: float) -> None:
        self._size, self._ttl = size, ttl
        self._seen: collections.OrderedDict[str, float] = collections.OrderedDict()
        self._lock = threading.Lock()

    def has(self, path: str) -> bool:
        with self._lock:
            t = self._seen.get(path)
            return t is not None and time.monotonic() - t < self._ttl

    def add(self, path: str) -> None:
        with self._lock:
            self._seen[path] = time.monotonic()
            self._seen.move_to_end(path)
            if len(self._seen) > self._size:
                self._seen.popitem(last=False)

    def drop(self, path: str | None = None) -> None:
        """Forget ``path`` (None: every file)."""
        with self._lock:
            if path is None:
                self._seen.clear()
            else:
                self._seen.pop(path, None)


class _Links:
    """The names of files with more than one (hard links) that the mount told
    the kernel of, by the file's inode number, at most ``size`` names, the
    oldest forgotten first; libfuse's threads share it: a lock."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._ino: collections.OrderedDict[str, int] = collections.OrderedDict()  # path -> ino
        self._names: dict[int, set[str]] = {}
        #: a link's new name -> the name it links (``made``), until the new name's inode is seen
        self._made: collections.OrderedDict[str, str] = collections.OrderedDict()
        self._lock = threading.Lock()

    def __bool__(self) -> bool:
        return bool(self._ino)

    def made(self, old: str, new: str) -> None:
        """``new`` was just linked to ``old``: when the kernel learns ``new``'s inode (libfuse asks
        its attributes right after the link), ``old`` is a name of that file too, though the kernel
        may never ask ``old``'s again (nothing does where it checks no modes, ``kernel_checks``)."""
        with self._lock:
            self._made[new] = old
            if len(self._made) > self._size:
                self._made.popitem(last=False)

    def saw(self, path: str, ino: int) -> None:
        with self._lock:
            self._saw(path, ino)
            old = self._made.pop(path, None)
            if old is not None:
                self._saw(old, ino)

    def _saw(self, path: str, ino: int) -> None:
        if self._ino.get(path) != ino:
            self._drop(path)
            self._ino[path] = ino
            self._names.setdefault(ino, set()).add(path)
            if len(self._ino) > self._size:
                self._drop(next(iter(self._ino)))

    def names(self, paths: tuple[str, ...]) -> list[str]:
        """``paths`` and every other name known of their files."""
        with self._lock:
            out = set(paths)
            for p in paths:
                ino = self._ino.get(p)
                if ino is not None:
                    out |= self._names.get(ino, set())
            return sorted(out)

    def drop(self, path: str) -> None:
        with self._lock:
            self._drop(path)

    def _drop(self, path: str) -> None:
        ino = self._ino.pop(path, None)
        if ino is not None:
            names = self._names.get(ino)
            if names is not None:
                names.discard(path)
                if not names:
                    del self._names[ino]


class _Handle:
    """An open file of the mount: the client its descriptor belongs to, and the descriptor (None once flushed)."""

    __slots__ = ("attr", "buf", "client", "error", "fd", "flushed", "keep_cache", "lock", "path")

    def __init__(self, client: fclient.Client, fd: int, path: str) -> None:
        self.client = client  # of the agent that opened it, which its descriptor belongs to
        self.fd: int | None = fd
        self.path = path
        self.lock = threading.Lock()
        #: the attributes ``create`` fetched with its open, and when: for libfuse's getattr right after it, once
        self.attr: tuple[Attr, float] | None = None
        #: ``cto``: the writes not sent yet; the error sending them met outside flush/fsync, for them to report
        self.buf: _WriteBuffer | None = None
        self.error: OSError | None = None
        self.flushed = False  # closed once: later writes (a dup, a mapping written back) go through
        self.keep_cache = False  # what open tells the kernel about the file's cached pages


class _WriteBuffer:
    """The writes of one open file not sent yet (``cto``): disjoint ranges,
    a later write merged over the earlier ones it touches.  Disjoint, so the
    writes that send them commute and go out together (``Client.pipeline``
    serves its calls in no promised order)."""

    __slots__ = ("extents", "size")

    def __init__(self) -> None:
        self.extents: list[tuple[int, bytearray]] = []  # (offset, data), sorted by offset
        self.size = 0

    def fits(self, n: int) -> bool:
        return self.size + n <= WRITE_BUFFER and len(self.extents) < MAX_EXTENTS

    def add(self, offset: int, data: bytes) -> None:
        end = offset + len(data)
        if self.extents:
            o, b = self.extents[-1]
            if o + len(b) == offset:  # the next bytes of a sequential writer: the common case, no search
                b += data
                self.size += len(data)
                return
        keep: list[tuple[int, bytearray]] = []
        touched: list[tuple[int, bytearray]] = []
        for o, b in self.extents:
            (touched if o <= end and offset <= o + len(b) else keep).append((o, b))
        lo = min([offset, *(o for o, _ in touched)])
        hi = max([end, *(o + len(b) for o, b in touched)])
        merged = bytearray(hi - lo)
        for o, b in touched:
            merged[o - lo : o - lo + len(b)] = b
        merged[offset - lo : end - lo] = data
        keep.append((lo, merged))
        keep.sort(key=lambda e: e[0])
        self.extents = keep
        self.size = sum(len(b) for _, b in keep)

    def calls(self, fd: int) -> list[tuple[str, tuple[Any, ...]]]:
        """The writes that send it: one per range, cut at multiples of ``fclient.CHUNK``
        in the file (page-aligned, so a page is never written in two parts)."""
        out: list[tuple[str, tuple[Any, ...]]] = []
        for o, b in self.extents:
            pos = 0
            while pos < len(b):
                cut = min(len(b), (o + pos) // fclient.CHUNK * fclient.CHUNK + fclient.CHUNK - o)
                out.append(("write", (fd, o + pos, bytes(b[pos:cut]))))
                pos = cut
        return out


def _errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """An ``OSError`` goes to the kernel with its errno (mfusepy does that);
    anything else is a bug here or in the client: logged, and ``EIO`` rather
    than mfusepy's ``EINVAL``, which would blame the caller."""

    @functools.wraps(fn)  # keeps the signature mfusepy inspects (create's flags)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except OSError as exc:
            if not isinstance(exc.errno, int) or exc.errno <= 0:
                log.exception("%s: an OSError without an errno", fn.__name__)
                raise OSError(errno.EIO, str(exc)) from None
            raise
        except Exception:
            log.exception("%s failed", fn.__name__)
            raise OSError(errno.EIO, f"{fn.__name__}: internal error (see the mount's log)") from None

    return wrapper


def _fuse_ops(cls: type) -> type:
    """Wrap every FUSE callback ``cls`` defines in ``_errors``; their names are
    ``cls._fuse_callbacks`` (what ``MountStats.install`` counts)."""
    names = []
    for name, value in list(vars(cls).items()):
        if callable(value) and not name.startswith("_") and hasattr(mfusepy.Operations, name):
            setattr(cls, name, _errors(value))
            names.append(name)
    cls._fuse_callbacks = tuple(names)  # type: ignore[attr-defined]
    return cls


_STAT_FIELDS = ("calls", "cpu_ns", "round_trips", "client_calls")


class MountStats:
    """Counters per FUSE callback of one mount: calls, the thread CPU time
    spent in the callback (``time.thread_time_ns``: Python, the client's
    packing and its socket system calls), and the ``Client`` round trips
    (``Client._exchange``: a ``pipeline`` of k calls is one) and calls the
    callback made.  What ``fednode.tools.calibrate_fuse`` measures the FUSE
    layer with.

    Off by default and then free: ``mount`` makes one only when ``STATS_ENV``
    names a file, and only then are the callbacks (per ``FedOps`` instance)
    and the pool's clients wrapped.  ``write`` replaces that file (atomically)
    with a JSON snapshot of the cumulative counters: ``serve_fuse`` calls it
    on SIGUSR1 and when the mount ends (``"final": true``).  Each snapshot has
    a ``seq`` (1, 2, ...: a reader waits for it to grow), the mount's ``pid``,
    ``process_cpu_ns`` (the process's CPU clock, every thread, when it was
    taken) and ``snapshot_cpu_ns`` (the CPU the earlier snapshots cost, to
    subtract).  Callbacks run on several libfuse threads: the counters are
    updated under a lock; a callback's client round trips are counted in the
    thread that makes them (a callback's calls all run on its thread)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._by: dict[str, list[int]] = {}  # callback -> [calls, cpu_ns, round_trips, client_calls]
        self._thread = threading.local()  # round_trips, client_calls: this thread's running totals
        self._seq = 0
        self._snapshot_cpu_ns = 0

    @classmethod
    def from_env(cls) -> MountStats | None:
        path = os.environ.get(STATS_ENV)
        return cls(path) if path else None

    def install(self, ops: Any) -> None:
        """Count the FUSE callbacks of ``ops`` (a ``_fuse_ops`` class's instance)."""
        for name in type(ops)._fuse_callbacks:
            setattr(ops, name, self._counted(name, getattr(ops, name)))

    def watch(self, client: fclient.Client) -> fclient.Client:
        """Count ``client``'s round trips and calls (returned, for a pool's factory)."""
        exchange = client._exchange
        here = self._thread

        def counted_exchange(calls: Any, trace: bool) -> Any:
            here.round_trips = getattr(here, "round_trips", 0) + 1
            here.client_calls = getattr(here, "client_calls", 0) + len(calls)
            return exchange(calls, trace)

        client._exchange = counted_exchange  # type: ignore[method-assign]
        return client

    def _counted(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        here, lock, by = self._thread, self._lock, self._by

        @functools.wraps(fn)
        def counted(*args: Any, **kwargs: Any) -> Any:
            rt0, calls0 = getattr(here, "round_trips", 0), getattr(here, "client_calls", 0)
            t0 = time.thread_time_ns()
            try:
                return fn(*args, **kwargs)
            finally:
                cpu = time.thread_time_ns() - t0
                rt, calls = getattr(here, "round_trips", 0) - rt0, getattr(here, "client_calls", 0) - calls0
                with lock:
                    c = by.get(name)
                    if c is None:
                        c = by[name] = [0, 0, 0, 0]
                    c[0] += 1
                    c[1] += cpu
                    c[2] += rt
                    c[3] += calls

        counted.__signature__ = inspect.signature(fn)  # type: ignore[attr-defined]  # mfusepy counts create's
        return counted

    def snapshot(self) -> dict[str, Any]:
        """The counters now (cumulative), as ``write`` writes them."""
        cpu = time.process_time_ns()
        with self._lock:
            by = {name: dict(zip(_STAT_FIELDS, c, strict=True)) for name, c in sorted(self._by.items())}
        return {"seq": self._seq, "pid": os.getpid(), "process_cpu_ns": cpu,
                "snapshot_cpu_ns": self._snapshot_cpu_ns, "callbacks": by}  # fmt: skip

    def write(self, final: bool = False) -> None:
        """Replace the file with a snapshot (one thread at a time: ``serve_fuse``'s main thread)."""
        t0 = time.thread_time_ns()
        self._seq += 1
        snap = self.snapshot()
        snap["final"] = final
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(snap, indent=1) + "\n")
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("mount statistics not written to %s: %s", self.path, exc)
        self._snapshot_cpu_ns += time.thread_time_ns() - t0


@_fuse_ops
class FedOps(mfusepy.Operations):
    """FUSE callbacks as ``Client`` calls at one node (see the module docstring)."""

    use_ns = True  # times in nanoseconds, as the client carries them
    readdir_plus = True  # ``readdir`` takes an offset and gives full attributes (``_FUSE.readdir_fuse_3``)
    _fuse_callbacks: tuple[str, ...]  # set by _fuse_ops

    def __init__(
        self,
        cluster: Cluster,
        node: int,
        pool_size: int = POOL_SIZE,
        on_ready: Callable[[], None] | None = None,
        timeout: float | None = None,
        stats: MountStats | None = None,
        route: str = "home",
        client_factory: Callable[[int], fclient.Client] | None = None,
        consistency: str | None = None,
    ) -> None:
        """``client_factory(node)``: a new client of agent ``node`` (default a
        ``Client`` over TCP; ``fednode serve --mount`` gives the agent's own
        in-process clients, ``fednode.serve.LocalClient``)."""
        self.cluster = cluster
        self.node = node
        make = client_factory or (lambda n: fclient.Client(cluster, node=n, timeout=timeout))
        self.consistency = consistency or default_consistency()
        if self.consistency not in CONSISTENCY_MODES:
            raise ValueError(f"consistency {self.consistency!r}: not one of {', '.join(CONSISTENCY_MODES)}")
        self.cto = self.consistency == "cto"
        self._dirty: dict[str, set[_Handle]] = {}  # path -> its handles holding writes not sent (cto)
        self._dirty_lock = threading.Lock()
        self._told: dict[str, tuple[int, ...]] = {}  # path -> the attributes last given the kernel (cto)
        self._pages: dict[str, tuple[int, ...]] = {}  # path -> its attributes when the kernel's pages were (cto)
        self._fuse: ctypes.c_void_p | None = None  # libfuse's ``struct fuse``, for fuse_invalidate_path
        self._linked = _Links(_SEEN_MAX)  # the names of files with several (hard links) the kernel was told of
        #: libfuse's hidden names of files unlinked while open here (orphans: no name in the federation),
        #: served through their handles' descriptors; each goes with libfuse's unlink of it
        self._hidden: set[str] = set()

        def connect(n: int) -> fclient.Client:
            c = make(n)
            return c if stats is None else stats.watch(c)

        self.entries = Entries(cluster, node, route, connect, pool_size)
        self.handles: dict[int, _Handle] = {}
        #: open directory handle -> its listing (``readdir``), fetched at offset 0 and served from here
        self.listings: dict[int, list[tuple[str, dict[str, int], int]]] = {}
        self._fh = itertools.count(1)
        self._on_ready = on_ready
        #: directories' modes and groups as last given to the kernel: a new name's group (``_new_owner``)
        self.dirs = _Dirs(DIR_ATTRS)
        #: whether the federation serves ``security.`` (the extended attributes' comment), and the
        #: files seen without ``security.capability`` lately
        self._security = cluster.spec.federation().protocol.security_xattrs
        self._nocaps = _NoCaps(_SEEN_MAX, ATTR_TIMEOUT)
        self._served = False  # set by ``init``: callbacks then come from libfuse, with a caller's context
        if stats is not None:
            stats.install(self)

    # ------------------------------------------------------------------ set-up
    def init_with_config(self, conn_info: Any, config: Any) -> None:
        self._served = True
        if config is not None:
            FuseConfig.apply(config)
            # libfuse hides a file unlinked or renamed over while open here (a rename to
            # ``.fuse_hidden...``, which ``rename`` makes an unlink in the federation with this mount's
            # descriptors held: ``_hide``) and unlinks that name at its last release
            config.hard_remove = 0
        if conn_info is not None and conn_info.capable & FUSE_CAP_READDIRPLUS:
            # readdirplus for every readdir, not "auto": with auto the kernel asks for it only for a
            # directory's first buffer (about 30 entries) until lookups show it is worth it, so ``ls -l``
            # of a larger directory would still look up and stat most names one by one.  A plain ``ls``
            # then gets the attributes too: one listing call either way (``readdir``).
            conn_info.want = (conn_info.want | FUSE_CAP_READDIRPLUS) & ~FUSE_CAP_READDIRPLUS_AUTO
        # a callback: libfuse's context names the file system, which invalidations need (cto's, hard links')
        self._fuse = ctypes.c_void_p(mfusepy._libfuse.fuse_get_context().contents.fuse)
        if self._on_ready is not None:
            self._on_ready()

    def destroy(self, path: str) -> None:
        self.entries.close()  # (the agents close the descriptors of files unlinked while open: freed)

    def _orphan(self, path: str | None, fh: int | None = None) -> _Handle | None:
        """The handle to serve a call on ``path`` through, if ``path`` is libfuse's
        hidden name of a file unlinked while open here (``fh``'s, or any of its)."""
        if not self._hidden or path not in self._hidden:
            return None
        h = self.handles.get(fh) if fh is not None else None
        if h is not None and h.path == path and h.fd is not None:
            return h
        for h in list(self.handles.values()):
            if h.path == path and h.fd is not None:
                return h
        raise OSError(errno.ENOENT, "unlinked, and no longer open", path)

    # ------------------------------------------------------------------ the owners of new names
    def _caller(self) -> tuple[int, int]:
        """The uid and gid (the kernel's fsuid/fsgid) of the process whose system
        call this callback serves, as the kernel sent them with the request
        (libfuse's ``fuse_get_context``).  Outside a FUSE callback (a
        ``FedOps`` called directly, in tests) this process's own."""
        if not self._served:
            return os.geteuid(), os.getegid()
        uid, gid, _pid = mfusepy.fuse_get_context()
        return uid, gid

    def _new_owner(self, path: str, mode: int, is_dir: bool) -> tuple[int, int, int]:
        """The (mode, uid, gid) Linux gives a name ``path`` made with ``mode`` by
        the caller: the caller's uid; the parent directory's gid if the parent
        is set-group-ID (and a new directory inherits S_ISGID), else the
        caller's fsgid.  ``mode`` is stored as the kernel sent it: the VFS has
        applied the caller's umask (no ``FUSE_CAP_DONT_MASK``, no POSIX ACLs)
        and dropped S_ISGID of a file for a caller outside its group
        (``mode_strip_sgid``).  The parent's mode and group are the ones this
        mount last gave the kernel (``_Dirs``), which its permission check of
        this call used; only a parent not seen since it left ``_Dirs`` costs
        a getattr round trip."""
        mode = stat.S_IMODE(mode)
        uid, gid = self._caller()
        parent = path.rsplit("/", 1)[0] or "/"
        seen = self.dirs.get(parent)
        if seen is None:
            with self.entries.client(parent) as c:
                a = c.getattr(parent)
            self.dirs.saw(parent, a)
            seen = (a.mode, a.gid)
        if seen[0] & stat.S_ISGID:
            gid = seen[1]
            if is_dir:
                mode |= stat.S_ISGID
        return mode, uid, gid

    # ------------------------------------------------------------------ attributes
    def getattr(self, path: str, fh: int | None = None) -> dict[str, int]:
        h = self.handles.get(fh) if fh is not None else None
        if h is not None:
            path = h.path
            fresh, h.attr = h.attr, None
            if fresh is not None and time.monotonic() - fresh[1] < _PREFETCH_AGE_S:
                return self._tell(path, fresh[0])
        o = self._orphan(path, fh)
        if o is not None:  # unlinked while open: fstat by its descriptor
            if self._dirty:
                self._settle(o.path)
            return _stat_dict(o.client.fgetattr(o.fd))
        check_name(path)  # the kernel's lookup of every new name comes here first
        if self._dirty:
            self._settle(path)  # the size and times with this mount's buffered writes in them
        try:
            with self.entries.client(path) as c:
                a = c.getattr(path)
        except FileNotFoundError:
            if h is None or h.fd is None:
                raise
            return _stat_dict(h.client.fgetattr(h.fd))  # fstat of a file unlinked at another mount
        self.entries.learn(path, a)
        self.dirs.saw(path, a)
        return self._tell(path, a)

    def _tell(self, path: str, a: Attr) -> dict[str, int]:
        """``a`` for the kernel, remembered (``cto``) as what it holds of a file."""
        if not a.is_dir:
            if self.cto:
                _remember(self._told, path, _version(a))
            if a.nlink > 1:
                self._linked.saw(path, a.ino)
        return _stat_dict(a)

    def _relinked(self, *paths: str) -> None:
        """A name of each of ``paths``' files came or went (link, unlink, rename): the
        kernel forgets the attributes (the link count, ctime) it holds of them and of
        every other name it was told of for the same file.  libfuse gives each name an
        inode of its own in the kernel, so the kernel cannot tell they are one file."""
        for path in self._linked.names(paths):
            self._invalidate(path)

    def _changed(self, path: str) -> None:
        """The file at ``path`` changed through it (its data, size, times, mode or
        owner): the kernel forgets what it holds of the file's *other* names (not of
        ``path``, whose pages a write in flight may hold locked)."""
        if self._linked:
            for other in self._linked.names((path,)):
                if other != path:
                    self._invalidate(other)

    def chmod(self, path: str, mode: int) -> None:
        o = self._orphan(path)
        if o is not None:
            return o.client.fchmod(o.fd, stat.S_IMODE(mode))
        if self._dirty:
            self._settle(path)
        with self.entries.client(path) as c:
            c.chmod(path, stat.S_IMODE(mode))
        self._changed(path)

    def chown(self, path: str, uid: int, gid: int) -> None:
        o = self._orphan(path)
        if o is not None:
            return o.client.fchown(o.fd, uid, gid)
        if self._dirty:
            self._settle(path)
        with self.entries.client(path) as c:
            c.chown(path, uid, gid)
        self._changed(path)

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> None:
        if times is None:
            atime, mtime = fclient.UTIME_NOW, fclient.UTIME_NOW
        else:
            atime, mtime = (_utime(t) for t in times)
        o = self._orphan(path)
        if o is not None:
            return o.client.futimens(o.fd, atime, mtime)
        if self._dirty:
            self._settle(path)  # else the buffered writes, sent later, would set the mtime again (cp -p)
        with self.entries.client(path) as c:
            c.utimens(path, atime, mtime)
        self._changed(path)

    def access(self, path: str, amode: int) -> int:
        """``access(2)`` (and ``chdir``) where the kernel does not check modes itself: a mount only
        root may enter (``kernel_checks``).  Root may read, write and search anything; it may
        execute a file only if one of its execute bits is set, as on a local file system."""
        if amode & os.X_OK:
            st = self.getattr(path)
            if stat.S_ISREG(st["st_mode"]) and not st["st_mode"] & 0o111:
                raise OSError(errno.EACCES, "no execute bit", path)
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        with self.entries.client() as c:
            s = c.statfs()
        return {
            "f_bsize": s.bsize,
            "f_frsize": s.frsize,
            "f_blocks": s.blocks,
            "f_bfree": s.bfree,
            "f_bavail": s.bavail,
            "f_files": s.files,
            "f_ffree": s.ffree,
            "f_favail": s.ffree,
            "f_namemax": min(s.namemax, MAX_NAME),
        }

    # ------------------------------------------------------------------ extended attributes
    # ``fedsim.protocol.xattrs``: each call carries the caller's uid (``_caller``), which decides
    # ``trusted.`` and ``security.`` at the home.  The kernel asks for ``security.capability``
    # before every write (FUSE clears SB_NOSEC), which must not cost a round trip to an agent:
    # while the federation serves no ``security.`` (``protocol.security_xattrs``, the default) a
    # name there is EOPNOTSUPP here with no call, as any name outside the namespaces; with it on,
    # a file's *absence* of ``security.capability`` is kept for ``ATTR_TIMEOUT`` (``_NoCaps``), as
    # the kernel keeps its attributes: one round trip per file per second of writes, and a
    # capability set at another mount is seen within the coherence bound.  Sizes are mfusepy's:
    # size 0 asks for the length, a buffer too small is ERANGE (it compares what we return).
    def getxattr(self, path: str, name: str, position: int = 0) -> bytes:
        xattrs.check_name(path, name)
        xattrs.check_served(path, name, self._security)
        caps = name == xattrs.CAPABILITY
        if caps and self._nocaps.has(path):
            raise OSError(errno.ENODATA, "no file capabilities", path)
        uid, _ = self._caller()
        try:
            with self.entries.client(path) as c:
                return c.getxattr(path, name, uid=uid)
        except OSError as exc:
            if caps and exc.errno == errno.ENODATA:
                self._nocaps.add(path)
            raise

    def setxattr(self, path: str, name: str, value: bytes, options: int, position: int = 0) -> None:
        xattrs.check_set(path, name, value, options)
        xattrs.check_served(path, name, self._security)
        uid, _ = self._caller()
        try:
            with self.entries.client(path) as c:
                c.setxattr(path, name, value, options, uid=uid)
        finally:  # (after the call, even a failed one: a question meanwhile may have kept the absence)
            self._nocaps.drop(path)

    def listxattr(self, path: str) -> list[str]:
        uid, _ = self._caller()
        with self.entries.client(path) as c:
            return c.listxattr(path, uid=uid)

    def removexattr(self, path: str, name: str) -> None:
        xattrs.check_name(path, name)
        xattrs.check_served(path, name, self._security)
        uid, _ = self._caller()
        with self.entries.client(path) as c:
            c.removexattr(path, name, uid=uid)

    # ------------------------------------------------------------------ names
    def opendir(self, path: str) -> int:
        """A handle for the listing ``readdir`` keeps while the directory is open."""
        return next(self._fh)

    def releasedir(self, path: str, fh: int) -> None:
        self.listings.pop(fh, None)

    def readdir(self, path: str, fh: int, offset: int = 0) -> list[tuple[str, dict[str, int], int]]:
        """The entries from ``offset`` on, each (name, attributes, its offset + 1),
        with every entry's attributes as ``getattr`` gives them (inode numbers
        included: ``use_ino``), for ``_FUSE.readdir_fuse_3`` to hand the
        kernel as readdirplus.  One ``Client.readdir_attrs`` at offset 0 (a
        rewind too): a round trip of the mount and two of its agent for the
        whole directory, where a readdir and a getattr per file cost a round
        trip each; the later calls of the same listing (the kernel's buffer
        holds a few dozen entries) are served from the handle.  A name
        removed since the listing is not listed, as a local readdir would
        not; one whose attributes did not come (its home down) is listed
        with its type only, and the kernel's lookup of it fails as a
        getattr would."""
        listing = self.listings.get(fh) if offset else None
        if listing is None:
            dot = {"st_mode": stat.S_IFDIR, "st_ino": dir_ino(path)}
            listing = [(".", dot, 1), ("..", {"st_mode": stat.S_IFDIR}, 2)]
            prefix = path.rstrip("/") + "/"
            with self.entries.client(path) as c:
                entries = c.readdir_attrs(path)
            for name, is_dir, a in entries:
                if a is not None:
                    attrs = self._tell(prefix + name, a)  # (cto) what the kernel now holds of the file
                    self.entries.learn(prefix + name, a)  # a listing names its files' homes too
                    self.dirs.saw(prefix + name, a)
                else:
                    attrs = {"st_mode": stat.S_IFDIR if is_dir else stat.S_IFREG}
                    if is_dir:
                        attrs["st_ino"] = dir_ino(prefix + name)
                listing.append((name, attrs, len(listing) + 1))
            if fh:
                self.listings[fh] = listing
        return listing[offset:]

    def mkdir(self, path: str, mode: int) -> None:
        check_name(path)
        mode, uid, gid = self._new_owner(path, mode, is_dir=True)
        with self.entries.client(path) as c:
            c.mkdir(path, mode, uid, gid)  # the mode and owner made with it, at its home: one round trip

    def rmdir(self, path: str) -> None:
        with self.entries.client(path) as c:
            c.rmdir(path)
        self.dirs.forget(path)

    def unlink(self, path: str) -> None:
        if self._hidden and path in self._hidden:
            self._hidden.discard(path)  # libfuse's, after a hidden file's last close: the orphan is freed
            return
        with self.entries.client(path) as c:
            c.unlink(path)
        self.entries.forget(path)
        self._nocaps.drop()
        if self._linked:
            self._relinked(path)
            self._linked.drop(path)
        if self._dirty:
            self._discard(path)

    def _discard(self, path: str) -> None:
        """Drop the buffered writes of a file just unlinked: nobody can read them now."""
        with self._dirty_lock:
            held = self._dirty.pop(path, set())
        for h in held:
            with h.lock:
                h.buf = None

    def rename(self, old: str, new: str, flags: int = 0) -> None:
        """rename(2) of a file, symlink or special file, or of a directory
        (``rename: 2pc``, the default, or ``redistribute``), within a directory or across
        directories: the protocol's atomic rename, so ``mv`` keeps the inode
        numbers and moves no data.  Both names lose their home hints, and for
        a directory every name under them: the moved files' are learnt again
        at their next getattr."""
        if flags:
            raise OSError(errno.EINVAL, "rename flags (RENAME_NOREPLACE, RENAME_EXCHANGE) are not supported")
        check_name(new)
        if new.rsplit("/", 1)[-1].startswith(LIBFUSE_HIDDEN):
            return self._hide(old, new)
        # the protocol renames no file open anywhere (EBUSY): this mount's descriptors of it are given up
        # first (their writes sent) and reopened by the new name when next used
        moving = sorted((h for h in list(self.handles.values()) if under(h.path, old)), key=id)
        with contextlib.ExitStack() as held:
            for h in moving:
                held.enter_context(h.lock)
            for h in moving:
                self._release_fd_locked(h)
            with self.entries.client(old) as c:
                c.rename(old, new)
            for h in moving:
                h.path = new + h.path[len(old) :]  # (a file under a renamed directory keeps its place in it)
        self.entries.forget(old, below=True)
        self.entries.forget(new, below=True)  # what was replaced there; the moved is learnt at its next getattr
        self._nocaps.drop()
        self.dirs.forget(old, below=True)
        if self._linked:
            self._relinked(old, new)
            self._linked.drop(old)
            self._linked.drop(new)

    def _hide(self, old: str, hidden: str) -> None:
        """libfuse hides ``old``, unlinked or renamed over while open here, as
        ``hidden``: the federation unlinks it with every descriptor of it at
        this mount open (reopened if ``flush`` gave one up, buffered writes
        sent), so that its home keeps it for them (an orphan) and the name
        is free at once; the handles go on by descriptor under ``hidden``."""
        moving = sorted((h for h in list(self.handles.values()) if h.path == old), key=id)
        with contextlib.ExitStack() as held:
            for h in moving:
                held.enter_context(h.lock)
            for h in moving:
                try:
                    self._send_locked(h)
                except OSError as exc:
                    h.error = h.error or exc
                if h.fd is None:
                    h.fd = h.client.open(old)
            with self.entries.client(old) as c:
                c.unlink(old)
            for h in moving:
                h.path = hidden
            self._hidden.add(hidden)
        self.entries.forget(old)
        self.dirs.forget(old, below=True)
        if self._linked:
            self._relinked(old)
            self._linked.drop(old)

    def _release_fd_locked(self, h: _Handle) -> None:
        """Send ``h``'s buffered writes (an error kept for its close) and close its federation
        descriptor (``h.lock`` held); the handle reopens the file by ``h.path`` when next used."""
        try:
            self._send_locked(h)
        except OSError as exc:
            h.error = h.error or exc
        fd, h.fd = h.fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                h.client.close(fd)

    def symlink(self, target: str, source: str) -> None:
        """``ln -s source target`` (mfusepy's names: ``target`` is the new link,
        ``source`` what it holds): the protocol's ``symlink``, at the name's manager."""
        check_name(target)
        _, uid, gid = self._new_owner(target, 0o777, is_dir=False)
        with self.entries.client(target) as c:
            c.symlink(source, target)
        self._give(target, uid, gid)

    def _give(self, path: str, uid: int, gid: int) -> None:
        """A symlink just made at ``path`` becomes the caller's: the protocol's
        ``symlink`` carries no owner (as ``create`` and ``mknod`` do), so a chown
        follows it (a second round trip: until it, the name is the
        agents' user's); if it fails the name is removed again (no trace)."""
        if (uid, gid) == (os.geteuid(), os.getegid()):  # the agents' user, which made it (they run as we do)
            return
        try:
            with self.entries.client(path) as c:
                c.chown(path, uid, gid)
        except OSError:
            with contextlib.suppress(OSError), self.entries.client(path) as c:
                c.unlink(path)
            raise

    def readlink(self, path: str) -> str:
        """A symlink's target: the kernel follows it itself (the federation never does)."""
        with self.entries.client(path) as c:
            return c.readlink(path)

    def link(self, target: str, source: str) -> None:
        """``ln source target`` (mfusepy's names, as ``symlink``'s: ``target`` is
        the new name, ``source`` the existing file): the protocol's ``link``,
        sent where ``source`` is routed (its home, where the new name is made
        too); the kernel then asks the new name's attributes, which teach the
        router that home."""
        check_name(target)
        with self.entries.client(source) as c:
            c.link(source, target)
        self._nocaps.drop()
        self._linked.made(source, target)
        self._relinked(source)

    def mknod(self, path: str, mode: int, dev: int) -> None:
        """``mkfifo``, a socket's ``bind``, ``mknod``: the protocol's ``mknod``,
        owned by the caller from its first instant (one round trip, as
        ``create``); a device only for a caller of uid 0 where the federation
        allows devices (``protocol.devices``), else EPERM.  The kernel then
        does the node's I/O itself: a fifo's, socket's or device's open never
        reaches this file system (a device's needs the mount's ``-o dev``)."""
        check_name(path)
        perm, uid, gid = self._new_owner(path, mode, is_dir=False)
        with self.entries.client(path) as c:
            c.mknod(path, stat.S_IFMT(mode) | perm, dev, uid, gid)

    # ------------------------------------------------------------------ files
    def _handle(self, c: fclient.Client, fd: int, path: str) -> int:
        fh = next(self._fh)
        self.handles[fh] = _Handle(c, fd, path)
        return fh

    def create(self, path: str, mode: int, flags: int = 0) -> int:
        check_name(path)
        mode, uid, gid = self._new_owner(path, mode, is_dir=False)
        pool = self.entries.pool(path)
        c = pool.take()
        try:
            # create with the caller's mode and owner, open, and the attributes libfuse asks
            # for next, in one round trip (a failed call leaves no file: ``create_open``)
            fd, attr = c.create_open(path, mode, uid, gid)
            fh = self._handle(c, fd, path)
            if attr is not None:
                self.handles[fh].attr = (attr, time.monotonic())
                self.entries.learn(path, attr)
            return fh
        finally:
            pool.give(c)

    def open(self, path: str, flags: int) -> int:
        pool = self.entries.pool(path)
        c = pool.take()
        try:
            try:
                if self.cto:
                    if self._dirty:
                        self._settle(path)  # this mount's held writes are part of the version it opens
                    # close-to-open: the file's attributes now, in the open's round trip, decide
                    # whether the pages the kernel holds of it are still the file's
                    fd, attr = c.pipeline(("open", (path,)), ("getattr", (path,)))
                    if isinstance(fd, BaseException):
                        raise fd
                    if not isinstance(attr, BaseException):
                        self.entries.learn(path, Attr(*attr))
                else:
                    fd, attr = c.open(path), None
            except FileNotFoundError:
                self.entries.forget(path)
                raise
            if flags & os.O_TRUNC:  # libfuse3 asks the kernel for atomic O_TRUNC: it arrives here
                try:
                    if self._dirty:
                        self._settle(path)  # this mount's earlier writes first, then the cut
                    c.truncate(path, 0)
                except OSError:
                    c.close(fd)
                    raise
                self._pages.pop(path, None)
            fh = self._handle(c, fd, path)
            if self.cto and not flags & os.O_TRUNC:
                self.handles[fh].keep_cache = self._revalidate(path, attr)
            return fh
        finally:
            pool.give(c)

    def keep_cache(self, fh: int) -> bool:
        """Whether ``open`` found the kernel's pages of the file current (``_FUSE.open`` tells the kernel)."""
        h = self.handles.get(fh)
        return h is not None and h.keep_cache

    def _revalidate(self, path: str, attr: Any) -> bool:
        """``cto`` at open: keep the kernel's pages of ``path`` only if the file
        is the version they were read from (ino, size, mtime, ctime: ctime moves
        with every change); and if the attributes the kernel holds are not
        these, drop them too (``fuse_invalidate_path``), else a cached size,
        trusted for ``ATTR_TIMEOUT``, would cut reads of a file another mount
        extended short."""
        if isinstance(attr, BaseException):
            self._pages.pop(path, None)
            self._invalidate(path)
            return False
        v = _version(Attr(*attr))
        keep = self._pages.get(path) == v
        _remember(self._pages, path, v)
        if self._told.get(path) != v:
            self._invalidate(path)  # the pages go too: not kept
            _remember(self._told, path, v)  # the kernel now holds nothing older than this
            return False
        return keep

    def _invalidate(self, path: str) -> None:
        """The kernel forgets ``path``'s attributes and pages (FUSE_NOTIFY_INVAL_INODE
        through libfuse, which knows the kernel's number for the path).  Without a
        write-back cache there are no dirty pages, so it never waits, and is safe
        inside ``open``."""
        if self._fuse is not None:
            rc = _libfuse_invalidate_path(self._fuse, path.encode(errors="surrogateescape"))
            if rc not in (0, -errno.ENOENT):  # ENOENT: the kernel holds nothing of it
                log.warning("fuse_invalidate_path(%s): %s", path, os.strerror(-rc))

    def _fd(self, fh: int) -> tuple[_Handle, int]:
        """The handle and its federation descriptor, reopened by name if ``flush`` closed it."""
        h = self.handles.get(fh)
        if h is None:
            raise OSError(errno.EBADF, f"no open file {fh}")
        with h.lock:
            if h.fd is None:
                h.fd = h.client.open(h.path)
            return h, h.fd

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        if self._dirty:
            h = self.handles.get(fh)
            if h is not None:
                self._settle(h.path)  # this mount's buffered writes, through any of its handles, first
        h, fd = self._fd(fh)
        return h.client.read(fd, size, offset)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        if not self.cto:
            h, fd = self._fd(fh)
            n = h.client.write(fd, data, offset)
            self._changed(h.path)
            return n
        h = self.handles.get(fh)
        if h is None:
            raise OSError(errno.EBADF, f"no open file {fh}")
        held = self._dirty.get(h.path) if self._dirty else None
        if held and (len(held) > 1 or h not in held):
            # another descriptor of the file at this mount holds earlier writes: they go first, so that
            # overlapping writes through two descriptors land in the order they were made
            with self._dirty_lock:
                others = [o for o in self._dirty.get(h.path, ()) if o is not h]
            for o in others:
                with o.lock:
                    try:
                        self._send_locked(o)
                    except OSError as exc:
                        o.error = o.error or exc
        with h.lock:
            if h.flushed or len(data) > WRITE_BUFFER:
                # after close no flush would report an error: through at once (and a write larger than
                # the buffer goes as it is, after what the buffer holds)
                self._send_locked(h)
                if h.fd is None:
                    h.fd = h.client.open(h.path)
                self._pages.pop(h.path, None)
                return h.client.write(h.fd, data, offset)
            if h.buf is None:
                h.buf = _WriteBuffer()
                with self._dirty_lock:
                    self._dirty.setdefault(h.path, set()).add(h)
            elif not h.buf.fits(len(data)):
                self._send_locked(h)  # its error is this write's: the write fails and its data is not kept
                h.buf = _WriteBuffer()
                with self._dirty_lock:
                    self._dirty.setdefault(h.path, set()).add(h)
            h.buf.add(offset, data)
            return len(data)

    def _send_locked(self, h: _Handle) -> None:
        """Send ``h``'s buffered writes (its lock held), in one round trip.  The
        buffer is gone whatever happens: a failed send is reported once, by
        whoever sent it (as NFS reports a failed write-back once)."""
        buf, h.buf = h.buf, None
        if buf is None:
            return
        with self._dirty_lock:
            held = self._dirty.get(h.path)
            if held is not None:
                held.discard(h)
                if not held:
                    del self._dirty[h.path]
        if not buf.extents:
            return
        self._pages.pop(h.path, None)  # the file is no longer what the kernel's pages were read from
        if h.fd is None:
            h.fd = h.client.open(h.path)
        calls = buf.calls(h.fd)
        for (_, (_, _, data)), r in zip(calls, h.client.pipeline(*calls), strict=True):
            if isinstance(r, BaseException):
                raise r
            if r != len(data):
                raise OSError(errno.EIO, f"{h.path}: short write ({r} of {len(data)} bytes)")

    def _settle(self, path: str) -> None:
        """Send every buffered write of ``path`` at this mount, before a call
        that must see them (a read, getattr, truncate, a change of its
        attributes).  An error is kept for the handle's close or fsync to report."""
        with self._dirty_lock:
            held = list(self._dirty.get(path, ()))
        for h in held:
            with h.lock:
                try:
                    self._send_locked(h)
                except OSError as exc:
                    h.error = h.error or exc

    def truncate(self, path: str, length: int, fh: int | None = None) -> None:
        h = self.handles.get(fh) if fh is not None else None
        if h is not None:
            path = h.path
        o = self._orphan(path, fh)
        if self._dirty:
            self._settle(path)  # the writes made before the cut, first
        if o is not None:  # unlinked while open here: by its descriptor
            o.client.ftruncate(o.fd, length)
        else:
            try:
                with self.entries.client(path) as c:
                    c.truncate(path, length)
            except FileNotFoundError:
                if h is None or h.fd is None:
                    raise
                h.client.ftruncate(h.fd, length)  # ftruncate of a file unlinked at another mount
        self._pages.pop(path, None)
        self._changed(path)

    def fsync(self, path: str, datasync: int, fh: int) -> None:
        h, fd = self._fd(fh)
        if self.cto:
            with h.lock:
                err, h.error = h.error, None
                self._send_locked(h)
                if err is not None:
                    raise err
                fd = h.fd if h.fd is not None else fd
        h.client.fsync(fd)

    def flush(self, path: str, fh: int) -> None:
        """``close(2)`` of one of the file's descriptors: give up the federation
        descriptor now, so the file is not pinned once ``close`` returned; in
        ``cto`` send the buffered writes first, and report their error (or one
        met sending them earlier, outside flush and fsync) as close's."""
        h = self.handles.get(fh)
        if h is None:
            return
        err = None
        with h.lock:
            if self.cto:
                err, h.error = h.error, None
                h.flushed = True
                try:
                    self._send_locked(h)
                except OSError as exc:
                    err = err or exc
            # (a file unlinked while open keeps its descriptor to the last release: it has no name to
            # reopen it by, and nothing to race a rename of)
            fd, h.fd = (None, h.fd) if h.path in self._hidden else (h.fd, None)
        self._changed(h.path)  # (cto: the writes just sent)
        if fd is not None:
            try:
                h.client.close(fd)
            except OSError:
                if err is None:
                    raise
        if err is not None:
            raise err

    def release(self, path: str, fh: int) -> None:
        h = self.handles.get(fh)
        if h is not None and h.buf is not None:  # written after the last flush (not in cto: through at once)
            with h.lock, contextlib.suppress(OSError):
                self._send_locked(h)
        h = self.handles.pop(fh, None)
        if h is not None and h.fd is not None:
            with contextlib.suppress(OSError):  # the connection may be gone: its files closed with it
                h.client.close(h.fd)
        # (the last close of a file unlinked while open here frees it at its home; libfuse's unlink of
        # its hidden name follows, and ends it here: ``unlink``)


def _version(a: Attr) -> tuple[int, ...]:
    """What tells two versions of a file apart: ctime moves with every change, and ino tells files apart."""
    return (a.ino, a.size, a.mtime_ns, a.ctime_ns)


def _remember(seen: dict[str, tuple[int, ...]], path: str, v: tuple[int, ...]) -> None:
    seen[path] = v
    if len(seen) > _SEEN_MAX:
        with contextlib.suppress(StopIteration, KeyError, RuntimeError):
            del seen[next(iter(seen))]


def _libfuse_invalidate_path(fuse: ctypes.c_void_p, path: bytes) -> int:
    fn = mfusepy._libfuse.fuse_invalidate_path
    fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_char_p], ctypes.c_int
    return int(fn(fuse, path))


def _stat_dict(a: Any) -> dict[str, int]:
    """The kernel's ``struct stat`` of ``Attr`` ``a``: its type from the mode
    (a symlink, fifo, socket or device is one to the kernel too), a device's
    number in ``st_rdev`` (``Attr.rdev``)."""
    kind = stat.S_IFMT(a.mode) or (stat.S_IFDIR if a.is_dir else stat.S_IFREG)
    size = a.st_size
    return {
        "st_mode": kind | stat.S_IMODE(a.mode),
        "st_nlink": a.nlink,
        "st_uid": a.uid,
        "st_gid": a.gid,
        "st_size": size,
        "st_rdev": a.rdev,
        "st_blocks": (size + 511) // 512,
        "st_blksize": 4096,
        "st_atime": a.atime_ns,
        "st_mtime": a.mtime_ns,
        "st_ctime": a.ctime_ns,
        "st_ino": a.ino,
    }


# libfuse3 hands a time to leave alone or to set to now as these tv_nsec values (with tv_sec 0)
_UTIME_NOW_NS = (1 << 30) - 1
_UTIME_OMIT_NS = (1 << 30) - 2


def _utime(ns: int) -> int:
    if ns == _UTIME_NOW_NS:
        return fclient.UTIME_NOW
    if ns == _UTIME_OMIT_NS:
        return fclient.UTIME_OMIT
    return ns


# ---------------------------------------------------------------------------- running a mount
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def kernel_checks(allow_other: bool) -> bool:
    """Whether the kernel checks each call against the modes, owners and groups the federation
    stores (libfuse's ``default_permissions``).  Needed wherever a caller may be refused: a mount
    other users may enter (``allow_other``), or one mounted by an ordinary user, who is refused
    what its own modes refuse.  A mount only root may enter needs none: root passes every such
    check on a local file system (CAP_DAC_OVERRIDE, CAP_FOWNER), and the kernel still refuses to
    execute a file with no execute bit and asks ``access`` for ``access(2)`` and ``chdir``.
    Why it matters: with the checks on, every create, unlink, mkdir and rmdir makes the kernel
    drop its parent's attributes, and the next call in that directory fetches them again, one
    round trip more per change (``fednode.tools.calibrate_fuse`` records which way it measured)."""
    return allow_other or os.geteuid() != 0


def serve_fuse(
    make_ops: Callable[[Callable[[], None]], mfusepy.Operations],
    mountpoint: str | Path,
    fsname: str,
    snapshot: Callable[[bool], None] | None = None,
    allow_other: bool = False,
    dev: bool = False,
) -> int:
    """Run a FUSE file system from this process until it is unmounted or the
    process gets SIGINT/SIGTERM/SIGHUP; 0 when it ended either way.
    ``make_ops(ready)`` builds the operations, whose ``init`` must call
    ``ready()``: it prints the readiness line (``READY_MOUNTED``).
    Multithreaded; the libfuse options every mount of this project shares.
    ``allow_other``: every user of the machine may enter the mount, not only
    the mounter (libfuse's ``allow_other``; with ``default_permissions``, on
    always, the kernel checks each caller against the stored modes and owners).
    ``dev``: the kernel opens device nodes on the mount (libfuse's ``dev``,
    root's only; a FUSE mount is ``nodev`` otherwise: such an open is EACCES).

    Signals.  libfuse's own handlers would end the loop, but make
    ``fuse_main`` report a failure (the loop returns the signal's number), and
    they wake the waiting main loop only when the kernel happens to deliver the
    signal to that thread, not to one of the threads a library started at
    import (numpy's BLAS): then nothing ends.  So libfuse runs in a thread of
    its own, the signals get Python handlers (libfuse leaves a handled signal
    alone; mfusepy's reset of SIGINT works only in the main thread), and their
    wake-up byte, whichever thread took the signal, reaches the main thread
    through a pipe.  It asks libfuse to exit (``fuse_exit``, what libfuse's
    handlers do) and sends one request (``statvfs``, never answered from a
    cache) for a worker to notice that; ``fuse_main`` then unmounts and returns.

    ``snapshot`` (``MountStats.write``), if given, is called on the main
    thread with False on SIGUSR1 (which then neither unmounts nor ends the
    process) and with True once the mount has ended."""
    mp = str(Path(mountpoint).resolve())
    session: list[Any] = []

    def ready() -> None:  # in init, a FUSE callback: the one place libfuse's context names the session
        session.append(ctypes.c_void_p(mfusepy._libfuse.fuse_get_context().contents.fuse))
        # not here: the mount answers nothing until init returns, and the stat would wait for it
        threading.Thread(target=raise_readahead, args=(mp,), name="fednode-readahead", daemon=True).start()
        print(f"{READY_MOUNTED} {mp}", flush=True)

    rfd, wfd = os.pipe()
    os.set_blocking(wfd, False)
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            options = {"allow_other": True} if allow_other else {}  # (mfusepy would pass a False one on)
            if dev:
                options["dev"] = True
            _FUSE(make_ops(ready), mp, foreground=True, fsname=fsname, subtype="fedfs",
                  default_permissions=kernel_checks(allow_other),
                  **options)  # fmt: skip
            outcome.append(None)
        except BaseException as exc:  # reported by the main thread
            outcome.append(exc)
        finally:
            os.write(wfd, b"\0")

    handled = _STOP_SIGNALS if snapshot is None else (*_STOP_SIGNALS, signal.SIGUSR1)
    old = {sig: signal.signal(sig, lambda *_: None) for sig in handled}
    old_wakeup = signal.set_wakeup_fd(wfd)
    signalled = None
    try:
        fuse = threading.Thread(target=run, name="fednode-fuse", daemon=True)
        fuse.start()
        while not outcome:
            select.select([rfd], [], [])
            got = os.read(rfd, 64)
            if snapshot is not None and signal.SIGUSR1 in got:
                snapshot(False)
            if signalled is None and (sigs := [b for b in got if b in _STOP_SIGNALS]):
                signalled = sigs[0]
                log.info("signal %d: unmounting %s", signalled, mp)
                if session:
                    mfusepy._libfuse.fuse_exit(session[0])
                    threading.Thread(target=_poke, args=(mp,), daemon=True).start()
                else:  # not mounted yet: detach whatever exists, and the loop ends
                    unmount(mp)
        fuse.join()
    finally:
        if snapshot is not None:
            snapshot(True)
        signal.set_wakeup_fd(old_wakeup)
        for sig, handler in old.items():
            signal.signal(sig, handler)
        os.close(rfd)
        os.close(wfd)
    exc = outcome[0]
    if exc is not None and not (signalled is not None and isinstance(exc, RuntimeError)):
        print(f"fednode mount: {mp}: {exc!r}", file=sys.stderr)
        return 1
    return 0


def raise_readahead(mountpoint: str, kb: int = READAHEAD_KB) -> None:
    """Let the kernel read ahead ``kb`` KiB on the mount, not its default 128.

    A FUSE mount's readahead is its backing device's (``/sys/class/bdi/MAJ:MIN/
    read_ahead_kb``, 128 KiB by default), which caps every sequential read at
    128 KiB per FUSE request, a round trip each, although libfuse3 already
    negotiates requests of up to 1 MiB (``max_pages``; writes use them).  Root
    may raise it (a sequential read of 8 MiB then takes 8 round trips, not 64);
    for anyone else it stays as it is, logged, and the mount works the same.
    Random reads are unaffected: the kernel reads ahead only what it sees read
    in sequence.

    The kernel caps the value when it processes the reply to FUSE's init, so
    this waits for that with a ``stat`` of the mount point, made by a child
    process: a stat from a thread of this process is a FUSE request to
    itself, and a mount SIGKILLed while it was in flight kept that thread in
    uninterruptible wait, the process a zombie holding ``/dev/fuse``, and
    every process that touched the mount hung with it (until the connection
    was aborted by hand).  A child's stat fails once this process is gone.
    The device number comes from ``/proc/self/mountinfo``."""
    try:
        probe = [sys.executable, "-c", "import os, sys; os.stat(sys.argv[1])", mountpoint]
        subprocess.run(probe, check=True, timeout=60, stdin=subprocess.DEVNULL, capture_output=True)
        dev = _mount_dev(os.path.abspath(mountpoint))  # (realpath would lstat the mount: a FUSE request)
        with open(f"/sys/class/bdi/{dev}/read_ahead_kb", "w") as f:
            f.write(str(kb))
    except (OSError, subprocess.SubprocessError) as exc:
        log.info("readahead of %s left at the kernel's default: %s", mountpoint, exc)


def _mount_dev(mountpoint: str) -> str:
    """The device number ("MAJ:MIN") of the last mount at ``mountpoint``, from
    mountinfo (which writes a space, tab, newline or backslash as octal)."""
    dev = None
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            fields = line.split()
            if re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4]) == mountpoint:
                dev = fields[2]
    if dev is None:
        raise OSError(errno.ENOENT, "not in /proc/self/mountinfo", mountpoint)
    return dev


def _poke(mountpoint: str) -> None:
    with contextlib.suppress(OSError):
        os.statvfs(mountpoint)


def mount(
    cluster_file: str | Path,
    node: int,
    mountpoint: str | Path,
    route: str = "home",
    allow_other: bool = False,
    consistency: str | None = None,
) -> int:
    """``fednode mount --foreground``: serve until unmounted or signalled; 0 when it ended cleanly.
    ``consistency``: ``cto`` or ``sync`` (None: ``default_consistency()``).  A federation that
    makes devices (``protocol.devices: true``) is mounted ``dev`` by root (``device_mount``)."""
    cluster = load_cluster(cluster_file)
    cluster.spec.node(node)
    consistency = consistency or default_consistency()
    stats = MountStats.from_env()  # STATS_ENV: count the callbacks
    return serve_fuse(lambda ready: FedOps(cluster, node, on_ready=ready, stats=stats, route=route,
                                           consistency=consistency), mountpoint,
                      fsname=f"fedfs:{Path(cluster_file).resolve()}#{node}",
                      snapshot=None if stats is None else stats.write, allow_other=allow_other,
                      dev=device_mount(cluster))  # fmt: skip


def device_mount(cluster: Cluster) -> bool:
    """Whether the mount lets the kernel open device nodes (libfuse's ``dev``): where the
    federation makes them (``protocol.devices: true``, the operator's opt-in to the hazard
    a device node is to the hosts' users: ``fedsim/protocol/fedfs/links.py``) and the
    mounter is root (the kernel allows ``dev`` to no one else)."""
    return cluster.spec.federation().protocol.devices and os.geteuid() == 0


def is_mounted(mountpoint: str | Path) -> bool:
    """Whether the kernel has a mount at ``mountpoint`` (from /proc/self/mountinfo:
    ``os.path.ismount`` says False for a FUSE mount whose process died, as its
    ``stat`` fails with ENOTCONN)."""
    mp = os.path.realpath(mountpoint)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            field = line.split()[4]
            if field.encode().decode("unicode_escape") == mp:
                return True
    return False


def unmount(mountpoint: str | Path) -> int:
    """``fusermount3 -u``, and a lazy unmount when that fails (a busy mount or a
    dead server: the kernel detaches it once it is no longer in use); 0 if the
    mount point is no longer a mount."""
    mp = str(mountpoint)
    tool = shutil.which("fusermount3") or "fusermount3"
    r = subprocess.run([tool, "-u", mp], capture_output=True, text=True)
    if r.returncode != 0 and is_mounted(mp):
        r = subprocess.run([tool, "-uz", mp], capture_output=True, text=True)
    if is_mounted(mp):
        print(f"fednode umount: {mp} is still mounted: {r.stderr.strip()}", file=sys.stderr)
        return 1
    return 0


class MountProcess:
    """``fednode mount --foreground`` as a child process in its own session,
    waited for by its readiness line (``READY_MOUNTED``): what ``fednode mount``
    (daemon mode), ``fednode local --mount``, the tests and the benchmark use.
    ``stop`` sends SIGTERM (the mount unmounts and exits 0) and, if the process
    is gone without unmounting, cleans up with ``unmount``."""

    def __init__(
        self, cmd: list[str], mountpoint: str | Path, stderr: Any = None, env: dict[str, str] | None = None
    ) -> None:
        """``env``: variables set for the mount process besides this one's (``STATS_ENV``)."""
        self.mountpoint = Path(mountpoint)
        env = dict(os.environ, **(env or {}), PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr, env=env, bufsize=0,
            start_new_session=True,
        )  # fmt: skip

    @classmethod
    def federation(
        cls,
        cluster_file: str | Path,
        node: int,
        mountpoint: str | Path,
        stderr: Any = None,
        env: dict[str, str] | None = None,
        route: str = "home",
        allow_other: bool = False,
        consistency: str | None = None,
    ) -> MountProcess:
        """``fednode mount --foreground``; ``proc.pid`` is the process serving the mount (no shell between).
        ``allow_other``: ``--allow-other`` (every user of the machine may enter it); ``consistency``: its
        ``--consistency`` (None: the mount's default, ``CONSISTENCY_ENV`` included)."""
        cmd = [sys.executable, "-m", "fednode.cli", "mount", "--cluster", str(cluster_file), "--node", str(node),
               "--route", route, "--foreground", *(["--allow-other"] if allow_other else []),
               str(mountpoint)]  # fmt: skip
        if consistency is not None:
            cmd[-1:-1] = ["--consistency", consistency]
        return cls(cmd, mountpoint, stderr, env)

    def wait_ready(self, timeout: float | None = None) -> str:
        """Until the readiness line (returned); ``RuntimeError`` if the process exits first."""
        assert self.proc.stdout is not None
        buf = b""
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            while True:
                if not sel.select(timeout):
                    raise TimeoutError(f"mount of {self.mountpoint} not ready within {timeout} s")
                data = os.read(self.proc.stdout.fileno(), 4096)
                if not data:
                    rc = self.proc.wait()
                    raise RuntimeError(
                        f"the mount process exited with status {rc} before {self.mountpoint} was mounted"
                    )
                buf += data
                for line in buf.decode(errors="replace").splitlines():
                    if line.startswith(READY_MOUNTED):
                        return line

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM, wait, unmount whatever is left; the process's exit status."""
        rc = None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        else:
            rc = self.proc.returncode
        if is_mounted(self.mountpoint):
            unmount(self.mountpoint)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return rc
