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

Namespaces (``NAMESPACES``).  Every name is checked twice: its form and
namespace by ``check_name`` (requester, home or holder, both local layers),
and what the *caller* may do with it by ``check_caller`` at the home or holder,
from the caller's uid the request carries (``GetXattr.uid`` ...: the mount's
FUSE caller, as ``create`` carries a new file's owner; -1, ``attrs.KEEP``,
names no caller and counts as not root).  The uid is the client's word, the
trust the README's threat model already gives a client (it may chown any file):
this is POSIX's behaviour for a mount's users, not an authentication.

* ``user.``: everyone, as before (the mode bits are the kernel's check on a
  mount: ``default_permissions``).  Only on regular files and directories:
  on a symlink or special file reading is ENODATA, writing EPERM (Linux's rule).
* ``trusted.``: root's (uid 0) alone, as a local file system has it
  (CAP_SYS_ADMIN): for anyone else getxattr is ENODATA, setxattr and
  removexattr EPERM, and listxattr leaves them out (Linux's answers).
* ``security.``: only where the federation enables it (``protocol.
  security_xattrs: true``; default off: EOPNOTSUPP naming the key, as before).
  The namespace belongs to the host's security modules, and
  ``security.capability`` grants file capabilities on the *home's* host to
  whoever runs the file there, set by a caller that host's kernel never
  checked; an SELinux label is meaningful under the policy of the host that
  set it.  So it is an operator's decision, as ``protocol.devices`` is.  On:
  everyone reads and lists them, only root sets or removes them (EPERM), except
  that anyone may remove ``security.capability``: removing a capability grants
  nothing, and the kernel itself removes it in the writer's name when any
  caller writes the file (``file_remove_privs``; a mount's kernel checks a
  direct ``setfattr -x`` by an ordinary user before it reaches the mount).
* ``system.`` holds POSIX ACLs (``system.posix_acl_access``), which the
  federation does not implement (the mount's permission checks are the
  kernel's on the mode bits): EOPNOTSUPP, as is any other namespace.

A listing shows what the caller may see of the served namespaces only (a
local file's ``security.`` label is not listed while they are off), so
``cp --preserve=xattr`` or ``rsync -X`` of a federated file never trips over
a name it may not set back.  A name must be valid UTF-8 (the wire carries
names as text): EINVAL otherwise.
"""

from __future__ import annotations

import errno

from fedsim.protocol.attrs import ID_MAX
from fedsim.protocol.messages import ProtocolError, fs_error

XATTR_NAME_MAX = 255
XATTR_SIZE_MAX = 1 << 16
XATTR_LIST_MAX = 1 << 16
#: setxattr's flags (``os.XATTR_CREATE``, ``os.XATTR_REPLACE``): fail if it exists / if it does not
XATTR_CREATE = 1
XATTR_REPLACE = 2
XATTR_FLAGS = XATTR_CREATE | XATTR_REPLACE
#: the namespaces the federation carries (module docstring): whom each serves is ``check_caller``'s
USER, TRUSTED, SECURITY = "user.", "trusted.", "security."
NAMESPACES: tuple[str, ...] = (USER, TRUSTED, SECURITY)
#: the file capabilities: anyone may remove them (module docstring)
CAPABILITY = "security.capability"
#: the setting that serves ``security.`` (``ProtocolConfig.security_xattrs``)
SECURITY_KEY = "protocol.security_xattrs"


def allowed(name: str) -> bool:
    """Whether ``name`` is in a namespace the federation carries (what a local layer lists)."""
    return name.startswith(NAMESPACES)


def served(name: str, security: bool) -> bool:
    """Whether ``name``'s namespace is served with ``security_xattrs`` = ``security``
    (what a listing and a migration may carry)."""
    return name.startswith((USER, TRUSTED)) or (security and name.startswith(SECURITY))


def check_served(path: str, name: str, security: bool) -> None:
    """EOPNOTSUPP for a ``security.`` name while the federation serves none
    (``protocol.security_xattrs``), naming the key: at the requester before
    any message, and again at the home or holder."""
    if not security and name.startswith(SECURITY):
        raise fs_error(
            errno.EOPNOTSUPP, path,
            f"extended attribute {name!r}: the security. namespace is off in this federation "
            f"(set {SECURITY_KEY}: true in the cluster file to serve it)",
        )  # fmt: skip


def check_caller(path: str, name: str, uid: int, op: str) -> None:
    """What a caller of ``uid`` may do (``op``: "get", "set" or "remove") with
    ``name``, as Linux answers an unprivileged one (module docstring): at the
    home or holder, once the name resolved (so a missing file is ENOENT first)."""
    if uid == 0 or name.startswith(USER):
        return
    if name.startswith(TRUSTED):
        if op == "get":
            raise fs_error(errno.ENODATA, path)  # invisible to all but root
        raise fs_error(errno.EPERM, path, f"extended attribute {name!r}: trusted. is root's alone")
    if op == "set" or (op == "remove" and name != CAPABILITY):
        raise fs_error(errno.EPERM, path, f"extended attribute {name!r}: only root sets or removes security.")


def visible(names: list[str], uid: int, security: bool) -> list[str]:
    """The names of a listing a caller of ``uid`` sees (module docstring)."""
    return [n for n in names if served(n, security) and (uid == 0 or not n.startswith(TRUSTED))]


def check_uid(kind: str, uid: object) -> None:
    """A request from the wire carrying a caller's uid no requester sends: ProtocolError."""
    if type(uid) is not int or not -1 <= uid <= ID_MAX:
        raise ProtocolError(f"{kind}: caller uid {uid!r} outside -1..{ID_MAX}")


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
        raise fs_error(
            errno.EOPNOTSUPP, path,
            f"extended attribute {name!r}: only the {carried} namespaces are carried (no POSIX ACLs, system.)",
        )  # fmt: skip
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
    "CAPABILITY", "NAMESPACES", "SECURITY", "SECURITY_KEY", "TRUSTED", "USER", "XATTR_CREATE", "XATTR_FLAGS",
    "XATTR_LIST_MAX", "XATTR_NAME_MAX", "XATTR_REPLACE", "XATTR_SIZE_MAX", "allowed", "check_caller", "check_list",
    "check_name", "check_served", "check_set", "check_uid", "name_bytes", "served", "visible", "wire_check",
]  # fmt: skip
