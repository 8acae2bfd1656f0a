"""Symbolic links and special files (issue 22): ``symlink``, ``readlink`` and
``mknod`` as protocol operations, so that the simulator, the in-memory
runtime and the agents give the same results (conformance), and a mount
only translates.

A symlink or special file is a *name with a home*, exactly as a regular file
is: placement chooses its home, its manager reserves the name first
(``Requester._make``, with create's failure semantics: an error the home
answered drops the reservation, ``Forget``; an unknown outcome is settled
from the local trees, ``Settle``), the home makes it in its local tree
(``Local("symlink")``, ``Local("mknod")``: a real symlink, fifo, socket or
device, made on the confined parent's descriptor), adds it to the parent's virtual
directory as a file (``AddEntry``, is_dir False) and keeps it in its DT.
Everything that handles names therefore handles them unchanged: listings
(``readdir`` says is_dir False; ``readdir_attrs`` gives their attributes,
S_IFLNK, S_IFIFO ... in the mode), dirmerge and the Bloom summaries (which
summarise directories only), ``unlink`` (at the home), ``rename`` within a
directory (the home renames the entry: ``Local("rename")`` moves any
non-directory), getattr (``lstat`` semantics: a symlink's own attributes, its
size the target's length), chmod/chown/utimens (a symlink's mode is
EOPNOTSUPP, as on Linux) and the routing of a mount's calls (a home learnt
from the inode number).

Never followed, never opened.  The federation resolves no symlink anywhere:
a path through one is ELOOP at the home (its local layer walks with
``O_NOFOLLOW``/``RESOLVE_NO_SYMLINKS``), and on a mount the kernel follows
symlinks itself, asking ``readlink`` and then looking up the target's
components, which are ordinary federated names.  The target is data, stored
verbatim and returned by ``readlink``: any string of at most
``attrs.TARGET_MAX`` bytes without NUL (``attrs.check_target``, checked by
the requester and again by the home, as a peer's request is untrusted), and
no target can make the agent leave its root, because nothing resolves it.
``open`` (and so read, write) of a symlink or special file is ELOOP: the
agent never opens a fifo, socket or device.  On a mount that costs nothing:
the kernel does the I/O of a fifo, socket or device node itself and never
sends their open to the file system.

Owners and devices.  ``mknod`` carries the new node's owner (``uid``,
``gid``: the caller's, as ``create`` carries a file's; KEEP, the home's
default, names no caller), so a fifo or socket is its caller's from its first
instant.  A character or block device is made only for a caller of uid 0, and
only where the federation allows devices (``protocol.devices: true``, off by
default): anything else is EPERM, Linux's errno for a caller without
CAP_MKNOD, with a message naming the setting or the uid
(``attrs.check_device``: at the requester before any message, and again at
the home, whose own config decides, as a peer's request is untrusted).  The
uid is the client's word: a client key already lets its holder do anything to
any file (the README's threat model), and a mount passes its kernel-checked
caller.  Opt-in, because a device node in an agent's local tree is a device
*of that host*, open to its local users by its mode (a world-writable raw
disk).  The home makes it with ``mknodat`` on the confined parent's
descriptor and gives it its owner with ``fchownat`` (no following) on the
same descriptor, removing it again if that fails; its number travels in
``Attr.rdev``.  A device made so, or by a local user in a node's tree, is
served like any entry (listed, renamed, unlinked, hard linked), never opened:
``open`` is ELOOP at the agent, and on a mount the kernel opens it itself
(the mount is ``dev`` where devices are allowed: ``fednode.mount.device_mount``).

Not covered (clear errors): migration of a symlink or special file is
refused (ELOOP at its home: they stay on their home; a directory's
migration moves its files and leaves them in place), and replication
(``replicas: 2``) keeps no secondary copy of them.

Hard links (``link``).  A hard link cannot span local file systems, so the
new name gets the *same home* as the old one: the requester looks the old
name up (ENOENT; a directory is EPERM, or EEXIST if the new name exists, in
``linkat(2)``'s order), the new name's manager reserves it with that home
recorded in its DT (``LinkInfo``: ``Manager.reserve`` as a create's, EEXIST
if it exists, with the home given instead of placed), and the home makes a
local hard link (``Local("link")``, its missing parents made and
summarised as a create's, ``HardLink``) and adds the name to its parent's
virtual directory (``Home._made_here``).  Failure semantics are create's
(``Requester._make``): an error at the home drops the reservation, an
unknown outcome is settled from the local trees, where a made link is a
name like any other.  A stale DT entry for the old name (the file moved or
went) is resolved again at its manager, once, as ``_at_home`` does; the old
name held by a rename or a migration is EAGAIN at the home, waited out.

Everything else follows from the local hard link: both names are the same
local inode at the same home, so they give the same federated inode number
(``attrs.file_ino``: home and local ino) and ``getattr``'s nlink is the
local link count, from every node (getattr is answered at the home); data
written through one name is read through the other (one local file);
``unlink`` of one name removes that name at the home and keeps the others;
a rename within a directory renames the one name locally and keeps the
others, and a rename onto another name of the same file does nothing, as
``rename(2)`` says (the home's prepare finds the two names one file and the
directory's manager undoes the rename's marks: ``rename.py``).  The file's
ctime changes on link and on the unlink of one of its names (the local
file system's).

Refused, with a clear error (documented in the README):

* migration of a file with more than one name: EMLINK at its home
  (``migration.py``): moving one name would split the file in two, and
  moving them all is a change of several managers' DT entries the
  migration protocol has no commit for.  A directory's migration leaves
  such files where they are, as it leaves symlinks.
* ``link`` with ``replicas: 2``: EPERM (``link(2)``'s errno for "the file
  system does not support hard links").  The secondary keeps one copy per
  name, and a promotion would make two files of one; a hard link a user
  made in a local tree (autonomy) is replicated so, which is the known limit.
* ``link`` with the block cache on (``block_cache_blocks`` > 0): EPERM.  A
  home keeps the cachers of a file per name, so a write through one name
  would not invalidate the blocks cached under another.
* across the federation nothing is refused: both names always share a home,
  so EXDEV never arises.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import Any, ClassVar

from fedsim.protocol.attrs import KEEP, check_device, check_mknod, check_target, is_device
from fedsim.protocol.effects import Compute, Local
from fedsim.protocol.fedfs.blockcache import BlockCaching
from fedsim.protocol.messages import PeerUnavailable, Request, fs_error, register_request
from fedsim.protocol.names import ROOT, normalize
from fedsim.protocol.node import Gen, api, handles


@register_request
@dataclass(slots=True, frozen=True)
class MakeLink(Request):
    """Make the symlink ``path`` -> ``target`` at the home its manager chose (as ``Create``)."""

    reply: ClassVar[Any] = None
    path: str
    target: str
    token: int = 0  # the requester's attempt (``HomeInfo.token``): refused here once fenced


@register_request
@dataclass(slots=True, frozen=True)
class MakeNode(Request):
    """Make the fifo, socket or device ``path`` (``mode``: its type and permission
    bits; ``dev``: a device's number) at its home, owned by ``uid``/``gid`` (the
    caller's, as ``Create``'s; -1: the home's default).  A device only for uid 0
    where ``protocol.devices`` allows it: the home checks again (``attrs.check_device``)."""

    reply: ClassVar[Any] = None
    path: str
    mode: int
    token: int = 0
    dev: int = 0
    uid: int = -1  # attrs.KEEP
    gid: int = -1


@register_request
@dataclass(slots=True, frozen=True)
class ReadLink(Request):
    """The target of the symlink ``path``, at its home."""

    reply: ClassVar[Any] = str
    path: str


@register_request
@dataclass(slots=True, frozen=True)
class LinkInfo(Request):
    """At the new name ``path``'s manager: reserve it, as ``HomeInfo`` with
    ``create`` does, with ``home`` (the old name's) recorded as its home.
    Reply: (is_dir, home, lookup_path), as ``HomeInfo``'s."""

    route: ClassVar[str | None] = "path"
    reply: ClassVar[Any] = tuple[bool, int | None, int]
    path: str
    home: int
    token: int = 0
    epoch: int = 0  # the sender's view (``route``)


@register_request
@dataclass(slots=True, frozen=True)
class HardLink(Request):
    """At the home of ``old``: make ``path`` a hard link to it (its manager reserved it)."""

    reply: ClassVar[Any] = None
    path: str
    old: str
    token: int = 0  # the requester's attempt (``LinkInfo.token``): refused here once fenced


class Links(BlockCaching):
    # ------------------------------------------------------------------ the client API
    @api(str, str)
    def symlink(self, target: str, path: str) -> Gen:
        """Make the symlink ``path`` holding ``target`` (``symlink(2)``'s argument
        order); returns its home, as ``create`` does.  Exclusive: EEXIST if the
        name exists; the target is never resolved (module docstring)."""
        path = normalize(path)
        check_target(path, target)
        yield Compute("fedfs_op")
        return (yield from self._make_entry(path, lambda p, token: MakeLink(p, target, token)))

    @api(str, int, int, int, int, optional=2)
    def mknod(self, path: str, mode: int, dev: int, uid: int = KEEP, gid: int = KEEP) -> Gen:
        """Make a fifo, socket or device (``mode``: S_IFIFO, S_IFSOCK, S_IFCHR or
        S_IFBLK and the permission bits; ``dev``: a device's number, ignored for
        the others, as by ``mknod(2)``), owned by ``uid``/``gid`` (the caller's:
        KEEP, the home's default, names no caller); returns its home.  A device
        is EPERM unless ``uid`` is 0 and ``protocol.devices`` is on (module docstring)."""
        path = normalize(path)
        check_mknod(path, mode, dev, uid, gid)
        check_device(path, mode, uid, self.config.devices)
        yield Compute("fedfs_op")
        return (yield from self._make_entry(path, lambda p, token: MakeNode(p, mode, token, dev, uid, gid)))

    @api(str, str)
    def link(self, old: str, new: str) -> Gen:
        """Make ``new`` a hard link to the file (symlink, special file) ``old``
        (``link(2)``'s argument order); returns their home (module docstring)."""
        old, new = normalize(old), normalize(new)
        yield Compute("fedfs_op")
        self._links_allowed(new)
        return (yield from self._busy(lambda: self._link(old, new)))

    def _links_allowed(self, path: str) -> None:
        """EPERM where the federation keeps no hard links right (module docstring)."""
        cfg = self.config
        if cfg.replicas > 1 or cfg.block_cache_blocks:
            why = "replicas: 2" if cfg.replicas > 1 else "the block cache (block_cache_blocks)"
            raise fs_error(errno.EPERM, path, f"hard links are not supported with {why}")

    def _link(self, old: str, new: str) -> Gen:
        entry, cached = yield from self._lookup(old)
        for attempt in (0, 1):
            if entry.is_dir:
                raise (yield from self._dir_link_error(old, new))
            home = entry.home
            try:
                reserve = lambda token, home=home: LinkInfo(new, home, token)  # noqa: E731
                return (yield from self._make_entry(new, lambda p, token: HardLink(p, old, token), reserve))
            except OSError as exc:
                # The old name missing at the home its entry named: stale (moved or gone)?
                stale = exc.errno == errno.ESTALE or (exc.errno == errno.ENOENT and exc.filename == old and cached)
                if attempt or not stale or isinstance(exc, PeerUnavailable):
                    if exc.errno == errno.ESTALE:
                        raise fs_error(errno.ENOENT, old) from None
                    raise
            self.stats.stale_retries += 1
            self.dt.pop(old)
            entry = yield from self._lookup_at_manager(old)
        raise AssertionError("unreachable")

    def _dir_link_error(self, old: str, new: str) -> Gen:
        """A directory cannot be hard linked: EEXIST if ``new`` exists, else EPERM (``linkat(2)``'s order)."""
        try:
            yield from self._lookup(new)
        except OSError:
            return fs_error(errno.EPERM, old, "a directory cannot be hard linked")
        return fs_error(errno.EEXIST, new)

    @api(str)
    def readlink(self, path: str) -> Gen:
        """A symlink's target, verbatim; EINVAL for a file, directory or special file."""
        path = normalize(path)
        yield Compute("fedfs_op")
        if path == ROOT:
            raise fs_error(errno.EINVAL, path, "not a symlink")
        r = yield from self._at_home(path, ReadLink, errno.EINVAL)
        return r[0]

    # ------------------------------------------------------------------ at the home
    @handles(MakeLink)
    def on_make_link(self, src: int, req: MakeLink) -> Gen:
        check_target(req.path, req.target)  # a peer's request is as untrusted as a client's
        yield from self._made_here(src, req.token, req.path, Local("symlink", req.path, (req.target,)))

    @handles(MakeNode)
    def on_make_node(self, src: int, req: MakeNode) -> Gen:
        # a peer's request is untrusted: checked again, and the device rule is this home's config
        check_mknod(req.path, req.mode, req.dev, req.uid, req.gid)
        check_device(req.path, req.mode, req.uid, self.config.devices)
        plain = req.dev == 0 and req.uid == KEEP and req.gid == KEEP
        args = (req.mode,) if plain else (req.mode, req.dev if is_device(req.mode) else 0, req.uid, req.gid)
        yield from self._made_here(src, req.token, req.path, Local("mknod", req.path, args))

    @handles(HardLink)
    def on_hard_link(self, src: int, req: HardLink) -> Gen:
        self._links_allowed(req.path)  # (a peer's request is untrusted; the federation agrees on its config)
        old = req.old
        if old in self.gates:
            raise fs_error(errno.EAGAIN, old, "a rename or migration of this name is in flight; try again")
        try:
            yield from self._made_here(src, req.token, req.path, Local("link", req.path, (old,)))
        except FileNotFoundError as exc:
            if exc.filename == old and old in self.moved:
                raise fs_error(errno.ESTALE, old, "moved away from this node; resolve the name again") from None
            raise

    @handles(LinkInfo)
    def on_link_info(self, src: int, req: LinkInfo) -> Gen:
        if req.home not in self.members:
            raise fs_error(errno.EINVAL, req.path, f"node {req.home} is not a member")
        return (yield from self.reserve(src, req.path, req.token, False, lambda: req.home))

    @handles(ReadLink)
    def on_read_link(self, src: int, req: ReadLink) -> Gen:
        return (yield from self._local("readlink", req.path))


__all__ = ["HardLink", "LinkInfo", "Links", "MakeLink", "MakeNode", "ReadLink"]
