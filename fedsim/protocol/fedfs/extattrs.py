"""Extended attributes (issue 22): ``getxattr``, ``setxattr`` (with
XATTR_CREATE / XATTR_REPLACE), ``listxattr`` and ``removexattr`` of a file
or directory, where ``getattr`` and ``setattr`` find its attributes
(``attributes.py``), by the same rules:

* a regular file's are its home's, in its local file system: one round trip
  to the home the requester's DT knows, else one to the name's manager
  (``PathGetXattr`` ...), which resolves the name and forwards to the home
  (``Attributes._by_name``, the home cached as for getattr);
* a directory's are read (get, list) at the holder whose attributes getattr
  answers with, the lowest holder that has a copy of its own
  (``Attributes._answering_holder``: a dead holder becomes a suspect, the
  next answers), and changed (set, remove) at *every* holder, lowest first,
  as setattr changes a directory: if a holder that may hold it did not
  answer its dirmerge nothing is changed (PeerUnavailable naming it); the
  lowest refusing (EEXIST for XATTR_CREATE, ENODATA for XATTR_REPLACE or a
  remove, EPERM, ENOSPC) changes nothing; a later holder refusing leaves the
  copies before it changed and reports its error (a repeat finishes it).
  The flags are the lowest holder's decision: the later copies are set
  without them (a copy made after the attribute was set, for a file placed
  on a node that did not hold the directory, lacks it and gets it), and a
  remove ignores a later copy that lacks the name.  (Known limit: when the
  lowest holder's copy is such a late implicit one, its flags' verdict may
  differ from what getxattr, answered by a higher holder's own copy, showed.)
* the root is every member's: read at the lowest member directly, changed
  through its manager at every holder.

Names, limits, flags and errnos are ``fedsim.protocol.xattrs``'s: checked
by the requester before any message, again by the home or holder (a peer's
request is untrusted), and by the local layer.  Namespaces: ``user.`` for
everyone; ``trusted.`` for a caller of uid 0; ``security.`` only where
``protocol.security_xattrs`` serves it (else EOPNOTSUPP at the requester,
naming the key), set and removed by root; ``system.`` EOPNOTSUPP.  Every
request carries the caller's ``uid`` (-1: none named, not root; anything
outside -1..ID_MAX is garbled at decoding), and the home or holder decides
what the caller may do (``xattrs.check_caller``) once the name resolved: a
refused caller's missing file is ENOENT, as a local lookup answers first
(one local getattr, on the refusal only).  A directory's change is refused
at its manager, before any holder; a listing is filtered at the home or
holder (``xattrs.visible``: no ``trusted.`` for others).  A
request from the wire whose name or value no requester sends (NUL, over 255
bytes, a value over 64 KiB) is garbled: ProtocolError at decoding.

The size a caller's buffer has (``getxattr(2)``'s ``size``; 0 asks for the
length, ERANGE when too small) is the caller's business: a value is at most
64 KiB, one message, so the protocol always returns it whole and the mount
(mfusepy) or the client compares it with the buffer.

What moves with a file: a rename keeps its attributes (the home renames it
in its own tree); a migration copies them from the frozen source with the
data (``migration.py``: ``MigrateXattrs``; the served namespaces only, so a
host's own ``security.`` label stays while ``security.`` is off).  Replication (``replicas: 2``)
does not carry them: a secondary copy has the data, mode and times but no
extended attributes, so a file promoted after its home left has none
(tested: tests/test_replication.py).
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar

from fedsim.protocol.attrs import ID_MAX, KEEP
from fedsim.protocol.effects import Compute
from fedsim.protocol.fedfs.attributes import Attributes
from fedsim.protocol.messages import PeerUnavailable, Request, fs_error, register_request
from fedsim.protocol.names import ROOT, normalize
from fedsim.protocol.node import Gen, api, handles
from fedsim.protocol.xattrs import check_caller, check_name, check_served, check_set, check_uid, visible, wire_check


# --- at the home of a file, or at a holder of a directory ------------------------------------
# (``attr`` is the attribute's name: a field called ``name`` is checked as a path component by
# the codec, and an attribute's name may hold "/")
@dataclass(slots=True, frozen=True)
class _Named(Request):
    """(not a request of its own) one attribute of ``path``: the name checked from the wire."""

    path: str
    attr: str
    uid: int = -1  # the caller's (attrs.KEEP: none named, not root): ``xattrs.check_caller``

    def __post_init__(self) -> None:
        wire_check(self.kind, self.attr)
        check_uid(self.kind, self.uid)


@register_request
@dataclass(slots=True, frozen=True)
class GetXattr(_Named):
    """The value of extended attribute ``attr`` of ``path`` here (ENODATA if unset)."""

    reply: ClassVar[Any] = bytes


@register_request
@dataclass(slots=True, frozen=True)
class SetXattr(Request):
    """Set ``attr`` of ``path`` here to ``value`` (``flags``: XATTR_CREATE / XATTR_REPLACE)."""

    reply: ClassVar[Any] = None
    path: str
    attr: str
    value: bytes
    flags: int
    uid: int = -1  # the caller's, as ``GetXattr.uid``

    def __post_init__(self) -> None:
        wire_check(self.kind, self.attr, self.value)
        check_uid(self.kind, self.uid)


@register_request
@dataclass(slots=True, frozen=True)
class ListXattr(Request):
    """The names of ``path``'s extended attributes here that the caller sees, sorted."""

    reply: ClassVar[Any] = list[str]
    path: str
    uid: int = -1  # the caller's, as ``GetXattr.uid``

    def __post_init__(self) -> None:
        check_uid(self.kind, self.uid)


@register_request
@dataclass(slots=True, frozen=True)
class RemoveXattr(_Named):
    """Remove ``attr`` of ``path`` here (ENODATA if unset)."""

    reply: ClassVar[Any] = None


# --- at the manager of a name: the same fields, their own types (the handlers resolve the name);
# reply: (the value, the file's home or None for a directory, the lookup path), as PathAttr's
@register_request
@dataclass(slots=True, frozen=True)
class PathGetXattr(GetXattr):
    reply: ClassVar[Any] = tuple[bytes, int | None, int]


@register_request
@dataclass(slots=True, frozen=True)
class PathSetXattr(SetXattr):
    reply: ClassVar[Any] = tuple[None, int | None, int]


@register_request
@dataclass(slots=True, frozen=True)
class PathListXattr(ListXattr):
    reply: ClassVar[Any] = tuple[list[str], int | None, int]


@register_request
@dataclass(slots=True, frozen=True)
class PathRemoveXattr(RemoveXattr):
    reply: ClassVar[Any] = tuple[None, int | None, int]


#: the request a manager sends on to a home or holder, per request it handles
_AT_HOLDER: dict[type[Request], type[Request]] = {
    PathGetXattr: GetXattr,
    PathSetXattr: SetXattr,
    PathListXattr: ListXattr,
    PathRemoveXattr: RemoveXattr,
}


def _check(req: Request, security: bool) -> None:
    """A peer's request checked as a client's is (EOPNOTSUPP, ERANGE, E2BIG, EINVAL)."""
    if isinstance(req, ListXattr):
        return
    if isinstance(req, SetXattr):
        check_set(req.path, req.attr, req.value, req.flags)
    else:
        check_name(req.path, req.attr)  # type: ignore[attr-defined]
    check_served(req.path, req.attr, security)  # type: ignore[attr-defined]


def _check_caller(req: Request) -> None:
    """The caller's right to the request (EPERM, ENODATA: ``xattrs.check_caller``)."""
    if not isinstance(req, ListXattr):
        op = "set" if isinstance(req, SetXattr) else "remove" if isinstance(req, RemoveXattr) else "get"
        check_caller(req.path, req.attr, req.uid, op)  # type: ignore[attr-defined]


def _check_uid(path: str, uid: int) -> None:
    """EINVAL for a caller's uid no user has, before any message."""
    if not KEEP <= uid <= ID_MAX:
        raise fs_error(errno.EINVAL, path, f"caller uid {uid} outside 0..{ID_MAX} (or -1: none named)")


class ExtendedAttributes(Attributes):
    # ------------------------------------------------------------------ the client API
    # ``uid``: the caller's (the mount's FUSE caller; KEEP names none and is not root), which
    # decides ``trusted.`` and ``security.`` at the home or holder (``xattrs.check_caller``)
    @api(str, str, int, optional=1)
    def getxattr(self, path: str, name: str, uid: int = KEEP) -> Gen:
        """The value of extended attribute ``name`` (bytes, at most 64 KiB; ENODATA if unset)."""
        path = normalize(path)
        self._xattr_name(path, name, uid)
        return (yield from self._xattr(path, GetXattr(path, name, uid), PathGetXattr(path, name, uid), read=True))

    @api(str, str, bytes, int, int, optional=1)
    def setxattr(self, path: str, name: str, value: bytes, flags: int, uid: int = KEEP) -> Gen:
        """Set ``name`` to ``value``: at a file's home, at every holder of a directory."""
        path = normalize(path)
        check_set(path, name, value, flags)
        self._xattr_name(path, name, uid)
        req = SetXattr(path, name, value, flags, uid)
        yield from self._xattr(path, req, PathSetXattr(path, name, value, flags, uid), read=False)

    @api(str, int, optional=1)
    def listxattr(self, path: str, uid: int = KEEP) -> Gen:
        """The names of the extended attributes of ``path`` the caller sees, sorted."""
        path = normalize(path)
        _check_uid(path, uid)
        return (yield from self._xattr(path, ListXattr(path, uid), PathListXattr(path, uid), read=True))

    @api(str, str, int, optional=1)
    def removexattr(self, path: str, name: str, uid: int = KEEP) -> Gen:
        """Remove ``name`` (ENODATA if unset): at a file's home, at every holder of a directory."""
        path = normalize(path)
        self._xattr_name(path, name, uid)
        yield from self._xattr(path, RemoveXattr(path, name, uid), PathRemoveXattr(path, name, uid), read=False)

    def _xattr_name(self, path: str, name: str, uid: int) -> None:
        """The requester's checks, before any message: the name, its namespace served, the uid."""
        check_name(path, name)
        check_served(path, name, self.config.security_xattrs)
        _check_uid(path, uid)

    def _xattr(self, path: str, at_home: Request, at_manager: Request, read: bool) -> Gen:
        yield Compute("fedfs_op")
        if path == ROOT and read:  # every member holds it: the lowest answers, no manager needed
            h, _ = yield from self._answering_holder(ROOT, sorted(self.members))
            return (yield from self.call(h, at_home))
        return (yield from self._by_name(path, _same(at_home), _same(at_manager)))

    # ------------------------------------------------------------------ at a home or holder
    def _checked(self, req: Request) -> Gen:
        """``_check`` and ``_check_caller`` at a home or holder; a refused caller's
        missing name is ENOENT, as a local file system's lookup answers first
        (a local getattr on the refusal only: the served calls cost nothing more)."""
        _check(req, self.config.security_xattrs)
        try:
            _check_caller(req)
        except OSError:
            yield from self._local("getattr", req.path)
            raise

    @handles(GetXattr)
    def on_get_xattr(self, src: int, req: GetXattr) -> Gen:
        yield from self._checked(req)
        return (yield from self._local("getxattr", req.path, (req.attr,)))

    @handles(SetXattr)
    def on_set_xattr(self, src: int, req: SetXattr) -> Gen:
        yield from self._checked(req)
        yield from self._local("setxattr", req.path, (req.attr, req.value, req.flags))

    @handles(ListXattr)
    def on_list_xattr(self, src: int, req: ListXattr) -> Gen:
        names = yield from self._local("listxattr", req.path)
        return visible(names, req.uid, self.config.security_xattrs)

    @handles(RemoveXattr)
    def on_remove_xattr(self, src: int, req: RemoveXattr) -> Gen:
        yield from self._checked(req)
        yield from self._local("removexattr", req.path, (req.attr,))

    # ------------------------------------------------------------------ at the name's manager
    @handles(PathGetXattr)
    def on_path_get_xattr(self, src: int, req: PathGetXattr) -> Gen:
        return (yield from self._xattr_here(req, read=True))

    @handles(PathListXattr)
    def on_path_list_xattr(self, src: int, req: PathListXattr) -> Gen:
        return (yield from self._xattr_here(req, read=True))

    @handles(PathSetXattr)
    def on_path_set_xattr(self, src: int, req: PathSetXattr) -> Gen:
        return (yield from self._xattr_here(req, read=False))

    @handles(PathRemoveXattr)
    def on_path_remove_xattr(self, src: int, req: PathRemoveXattr) -> Gen:
        return (yield from self._xattr_here(req, read=False))

    def _xattr_here(self, req: Any, read: bool) -> Gen:
        """A manager's part (module docstring): a file's request forwarded to its
        home; a directory's read at its answering holder, changed at every
        holder lowest first (the flags the lowest's alone)."""
        _check(req, self.config.security_xattrs)
        path = req.path
        plain = _AT_HOLDER[type(req)]
        at_home = plain(*[getattr(req, f.name) for f in fields(plain)])
        is_dir, home, how = yield from self._resolve_here(path)
        if not is_dir:  # (its home checks the caller)
            return (yield from self.call(home, at_home)), home, how
        _check_caller(req)  # (the directory exists: refused here, before any holder)
        if read:
            _, holders = yield from self._holders(path, ask_all=False)
            h, _ = yield from self._answering_holder(path, holders)
            return (yield from self.call(h, at_home)), None, how
        vd, holders = yield from self._holders(path, ask_all=True)
        if vd.unreachable >= 0:  # its copy would keep the old attributes
            raise PeerUnavailable(vd.unreachable, f"may hold {path} and did not answer its dirmerge")
        done = 0  # holders changed: the flags (and ENODATA) are the first one's alone
        for h in holders:
            if done and isinstance(at_home, SetXattr) and at_home.flags:
                at_home = replace(at_home, flags=0)
            try:
                yield from self.call(h, at_home)
            except FileNotFoundError:
                continue  # its copy was pruned since the merge, as for setattr (``attributes.py``)
            except OSError as exc:
                if not (done and isinstance(at_home, RemoveXattr) and exc.errno == errno.ENODATA):
                    raise
            done += 1
        if not done:
            raise fs_error(errno.ENOENT, path)
        return None, None, how


def _same(req: Request) -> Callable[[str], Request]:
    """``_by_name``'s request factory for a request made already (its path is the canonical one)."""
    return lambda _path: req


__all__ = [
    "ExtendedAttributes", "GetXattr", "ListXattr", "PathGetXattr", "PathListXattr", "PathRemoveXattr",
    "PathSetXattr", "RemoveXattr", "SetXattr",
]  # fmt: skip
