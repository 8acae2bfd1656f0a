"""Membership views (issue 13, FedFS 3.3): who the members are, and the
hashing that maps names to managers, numbered by an epoch.

Every node holds one ``View``; ``Node.members`` and ``Node.manager_of``
derive from it, so managers, summaries and cached VDs are soft state of the
view.  A view changes only at its *coordinator* (the lowest member id: every
member computes the same one with no message), which installs epoch + 1 and
pushes it to every member (``ViewChange``).

Requests that are routed to a name's manager (``Request.route`` names the
field holding that name) carry the sender's epoch.  ``Node.handle`` checks
it: a request from a newer epoch makes the receiver fetch the view from the
sender first (``GetView``); a request that reaches a node that does not
manage its name under the receiver's view (the sender's view is older) is
answered ``EREMCHG``, a redirect, and ``Node.call`` fetches the view from the
redirecting node and sends the request again to the right manager, once per
view change.  Requests that are not routed by name (to a home, a holder, a
summary push) carry no epoch: a view change does not move them.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass, field
from typing import Any, ClassVar

from fedsim.protocol.hashing import ModN, Ring, make_hashing
from fedsim.protocol.messages import ProtocolError, Request, fs_error, pack, register_request, unpack

#: The most members a view may name (a view travels in one message).
MAX_MEMBERS = 1 << 16
#: How many times ``Node.call`` follows a redirect before the error is the caller's
#: (each one follows a view change that happened while the request travelled).
REDIRECTS = 3
#: The errno of a redirect: "the name's manager changed; fetch the view and ask again".
REDIRECT = errno.EREMCHG


_HASHINGS: dict[tuple[str, tuple[int, ...], int], ModN | Ring] = {}
_HASHINGS_KEPT = 16


def shared_hashing(name: str, members: tuple[int, ...], vnodes: int) -> ModN | Ring:
    """One hashing object per (scheme, members, vnodes): a ring of a thousand
    members is built once per view, not once per node (a pure function of
    its key, so sharing it changes nothing but memory and time)."""
    key = (name, members, vnodes)
    h = _HASHINGS.get(key)
    if h is None:
        if len(_HASHINGS) >= _HASHINGS_KEPT:
            del _HASHINGS[next(iter(_HASHINGS))]  # the oldest
        h = _HASHINGS[key] = make_hashing(name, members, vnodes)
    return h


@dataclass(frozen=True, slots=True)
class View:
    """An epoch, the members, and the hashing of names to managers."""

    epoch: int
    members: tuple[int, ...]
    scheme: str = "mod_n"
    vnodes: int = 64
    hashing: ModN | Ring = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        members = tuple(sorted(self.members))
        if not members:
            raise ValueError("a view needs at least one member")
        if len(set(members)) != len(members):
            raise ValueError(f"members must be distinct, got {members}")
        if self.epoch < 0:
            raise ValueError(f"epoch must not be negative, got {self.epoch}")
        object.__setattr__(self, "members", members)
        object.__setattr__(self, "hashing", shared_hashing(self.scheme, members, self.vnodes))

    @property
    def coordinator(self) -> int:
        """The member that installs the next view (the lowest id)."""
        return self.members[0]

    def manager_of(self, path: str) -> int:
        return self.hashing.manager_of(path)

    def changed(self, members: tuple[int, ...] | list[int]) -> View:
        """The next view: epoch + 1 with ``members``, the same hashing scheme."""
        return View(self.epoch + 1, tuple(members), self.scheme, self.vnodes)

    def adopt(self, epoch: int, members: tuple[int, ...] | list[int]) -> View:
        """The view ``epoch``/``members`` that a peer sent, with this one's scheme."""
        return View(epoch, tuple(members), self.scheme, self.vnodes)


def pack_members(members: tuple[int, ...]) -> bytes:
    return pack(list(members))


def unpack_members(data: bytes) -> tuple[int, ...]:
    """Members from the wire: a msgpack array of distinct non-negative ints, bounded."""
    try:
        obj = unpack(data, max_size=16 * MAX_MEMBERS, use_list=False)
    except ProtocolError as exc:
        raise ProtocolError(f"view members: {exc}") from None
    if type(obj) is not tuple or not 0 < len(obj) <= MAX_MEMBERS:
        raise ProtocolError(f"view members: an array of 1..{MAX_MEMBERS} node ids")
    if any(type(m) is not int or not 0 <= m < 1 << 31 for m in obj) or len(set(obj)) != len(obj):
        raise ProtocolError("view members: distinct node ids (ints 0..2^31-1)")
    return tuple(sorted(obj))


def redirect(node: int, view: View, name: str) -> OSError:
    """The redirect a node answers for a name it does not manage under ``view``."""
    return fs_error(
        REDIRECT, name, f"node {node} does not manage this name in view {view.epoch}; fetch the view and ask again"
    )


# --- the requests every design's node answers (``Node``) -------------------------------------
@register_request
@dataclass(slots=True, frozen=True)
class GetView(Request):
    """The receiver's view. Reply: (epoch, members)."""

    reply: ClassVar[Any] = tuple[int, list[int]]


def check_epoch(req: Any, view: View) -> None:
    """ESTALE unless ``req.epoch`` is ``view``'s (a join or leave must be
    decided against the view its sender saw)."""
    if req.epoch != view.epoch:
        raise fs_error(
            errno.ESTALE,
            "/",
            f"the request was made under view {req.epoch}, the federation is at view {view.epoch}; "
            "fetch the view and ask again",
        )
