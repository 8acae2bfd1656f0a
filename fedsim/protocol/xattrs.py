"""Extended attributes as the federation carries them: the limits, the flags,
the namespaces it allows, and the checks.  One module that the protocol
(``fedsim.protocol.fedfs.extattrs``), both local layers (``fedsim.memfs``,
``fednode.localfs``), the client and the mount import, so that every place
refuses the same names with the same errno, as Linux's ``setxattr(2)`` would.

Limits (Linux's, ``<linux/limits.h>``): a name of 1 to ``XATTR_NAME_MAX``
(255) bytes, a value of at most ``XATTR_SIZE_MAX`` (64 KiB), a list of names
of at most ``XATTR_LIST_MAX`` (64 KiB, NUL-terminated names).  Beyond them:
ERANGE for a name (as the kernel says), E2BIG for a value or a list.  A file
system may hold less: ext4 keeps a file's attributes in its inode and one
block (about 4 KiB together, without the ``ea_inode`` feature) and answers
ENOSPC past that; that errno comes back from the home's local file system
unchanged.  ``fedsim.memfs`` models no such per-file space (a simulated node
holds values up to the limits above).

Namespaces.  ``user.`` only (``NAMESPACES``); any other name is EOPNOTSUPP,
as a file system without that handler answers:

* ``trusted.`` is root's alone on a local file system (CAP_SYS_ADMIN to read
  or write; invisible to others in a listing).  No caller identity travels
  with a client's call (the agent, running as root, applies it), so carried
  by the federation it would be readable and writable by every client.
* ``security.`` belongs to the host's security modules: an SELinux label is
  meaningful only under the policy of the host that set it, and
  ``security.capability`` grants file capabilities on the *home's* host, set
  by a caller the kernel of that host never checked (the mount's kernel
  checks CAP_SETFCAP for its own host only).
* ``system.`` holds POSIX ACLs (``system.posix_acl_access``), which the
  federation does not implement: the mount's permission checks are the
  kernel's on the mode bits (``default_permissions``).

A listing shows the allowed namespaces only (a local file's ``security.``
label, say, is not listed), so ``cp --preserve=xattr`` or ``rsync -X`` of a
federated file never trips over a name it may not set back.  A name must be
valid UTF-8 (the wire carries names as text): EINVAL otherwise.
"""

from __future__ import annotations

import errno

from fedsim.protocol.messages import ProtocolError, fs_error

XATTR_NAME_MAX = 255
XATTR_SIZE_MAX = 1 << 16
XATTR_LIST_MAX = 1 << 16
#: setxattr's flags (``os.XATTR_CREATE``, ``os.XATTR_REPLACE``): fail if it exists / if it does not
XATTR_CREATE = 1
XATTR_REPLACE = 2
XATTR_FLAGS = XATTR_CREATE | XATTR_REPLACE
#: the namespaces the federation carries (module docstring)
NAMESPACES: tuple[str, ...] = ("user.",)


def allowed(name: str) -> bool:
    """Whether ``name`` is in a namespace the federation carries (what a listing shows)."""
    return name.startswith(NAMESPACES)


def name_bytes(name: str) -> int:
    """The length of ``name`` in bytes, as the kernel counts it (-1 if it is not valid UTF-8)."""
    try:
        return len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return -1


def check_name(path: str, name: object) -> None:
    """The errno ``setxattr(2)`` gives for a bad name: ERANGE for an empty
    one or one over 255 bytes, EINVAL for one that is not text or has a NUL
    or nothing after its namespace, EOPNOTSUPP outside ``NAMESPACES``.
    Checked by the requester (before any message), by the home or holder (a
    peer's request is untrusted) and by both local layers."""
    if type(name) is not str:
        raise fs_error(errno.EINVAL, path, "an extended attribute's name must be text")
    n = name_bytes(name)
    if n < 0 or "\x00" in name:
        raise fs_error(errno.EINVAL, path, f"extended attribute name {name!r} is not valid UTF-8 text without NUL")
    if not 0 < n <= XATTR_NAME_MAX:
        raise fs_error(errno.ERANGE, path, f"extended attribute name of {n} bytes (1..{XATTR_NAME_MAX})")
    if not allowed(name):
        carried = ", ".join(NAMESPACES)
        raise fs_error(errno.EOPNOTSUPP, path, f"extended attribute {name!r}: only the {carried} namespace is carried")
    if name in NAMESPACES:
        raise fs_error(errno.EINVAL, path, f"extended attribute name {name!r} has nothing after its namespace")


def check_set(path: str, name: object, value: object, flags: object) -> None:
    """``check_name``, then E2BIG for a value over 64 KiB, EINVAL for flags
    other than XATTR_CREATE / XATTR_REPLACE (both: "create", then "replace")."""
    check_name(path, name)
    if type(value) is not bytes:
        raise fs_error(errno.EINVAL, path, "an extended attribute's value must be bytes")
    if len(value) > XATTR_SIZE_MAX:
        raise fs_error(errno.E2BIG, path, f"extended attribute value of {len(value)} bytes (at most {XATTR_SIZE_MAX})")
    if type(flags) is not int or flags & ~XATTR_FLAGS:
        raise fs_error(errno.EINVAL, path, f"setxattr flags {flags!r}: only XATTR_CREATE (1), XATTR_REPLACE (2)")


def check_list(path: str, names: list[str]) -> list[str]:
    """``names`` as listxattr gives them (sorted, so every local layer lists in
    one order), E2BIG if their NUL-terminated list is over XATTR_LIST_MAX."""
    size = sum(max(0, name_bytes(n)) + 1 for n in names)
    if size > XATTR_LIST_MAX:
        raise fs_error(errno.E2BIG, path, f"extended attribute list of {size} bytes (at most {XATTR_LIST_MAX})")
    return sorted(names)


def wire_check(kind: str, name: str, value: bytes | None = None) -> None:
    """A request from the wire carrying an attribute name (and value) that no
    requester would send: ProtocolError, before any handler (garbled)."""
    n = name_bytes(name)
    if not 0 < n <= XATTR_NAME_MAX or "\x00" in name:
        raise ProtocolError(f"{kind}: {name[:40]!r}... is not an extended attribute name (1..255 bytes of UTF-8)")
    if value is not None and len(value) > XATTR_SIZE_MAX:
        raise ProtocolError(f"{kind}: a value of {len(value)} bytes, more than {XATTR_SIZE_MAX}")


__all__ = [
    "NAMESPACES", "XATTR_CREATE", "XATTR_FLAGS", "XATTR_LIST_MAX", "XATTR_NAME_MAX", "XATTR_REPLACE",
    "XATTR_SIZE_MAX", "allowed", "check_list", "check_name", "check_set", "name_bytes", "wire_check",
]  # fmt: skip
