"""Symbolic links and special files (issue 22): ``symlink``, ``readlink`` and
``mknod`` as protocol operations, so that the simulator, the in-memory
runtime and the agents give the same results (conformance), and a mount
only translates.

A symlink or special file is a *name with a home*, exactly as a regular file
is: placement chooses its home, its manager reserves the name first
(``Requester._make``, with create's failure semantics: an error the home
answered drops the reservation, ``Forget``; an unknown outcome is settled
from the local trees, ``Settle``), the home makes it in its local tree
(``Local("symlink")``, ``Local("mknod")``: a real symlink, fifo or socket,
made on the confined parent's descriptor), adds it to the parent's virtual
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

Devices.  The protocol carries no caller identity (a client proves the
client key, not a user), so the agent, which runs as root, cannot tell a
root caller from any other: ``mknod`` of a character or block device is
EPERM for everyone, and only fifos and sockets are made.  A device a local
user (root) made in a node's tree is served like any entry (listed, its
attributes with the device number in ``Attr.rdev``, unlinked, renamed),
never opened.

Not covered (clear errors): migration of a symlink or special file is
refused (ELOOP at its home: they stay on their home; a directory's
migration moves its files and leaves them in place), and replication
(``replicas: 2``) keeps no secondary copy of them.  Hard links are not
supported (EPERM on a mount).
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import Any, ClassVar

from fedsim.protocol.attrs import check_mknod, check_target
from fedsim.protocol.effects import Compute, Local
from fedsim.protocol.fedfs.blockcache import BlockCaching
from fedsim.protocol.messages import Request, fs_error, register_request
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
    """Make the fifo or socket ``path`` (``mode``: its type and permission bits) at its home."""

    reply: ClassVar[Any] = None
    path: str
    mode: int
    token: int = 0


@register_request
@dataclass(slots=True, frozen=True)
class ReadLink(Request):
    """The target of the symlink ``path``, at its home."""

    reply: ClassVar[Any] = str
    path: str


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

    @api(str, int, int)
    def mknod(self, path: str, mode: int, dev: int) -> Gen:
        """Make a fifo or socket (``mode``: S_IFIFO or S_IFSOCK and the permission
        bits; ``dev`` is ignored for them, as by ``mknod(2)``); returns its home.
        A device is EPERM (no caller identity: module docstring)."""
        path = normalize(path)
        check_mknod(path, mode)
        if not 0 <= dev < 1 << 64:
            raise fs_error(errno.EINVAL, path, f"device number {dev} outside 0..2**64-1")
        yield Compute("fedfs_op")
        return (yield from self._make_entry(path, lambda p, token: MakeNode(p, mode, token)))

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
        check_mknod(req.path, req.mode)
        yield from self._made_here(src, req.token, req.path, Local("mknod", req.path, (req.mode,)))

    @handles(ReadLink)
    def on_read_link(self, src: int, req: ReadLink) -> Gen:
        return (yield from self._local("readlink", req.path))


__all__ = ["Links", "MakeLink", "MakeNode", "ReadLink"]
