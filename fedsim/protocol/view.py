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
from fedsim.protocol.messages import ProtocolError, Redirected, Request, fs_error, pack, register_request, unpack

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
    #: (member, contact) for members that joined with one: an address the
    #: protocol never reads (the agent's "host:port"), for the runtimes that
    #: must reach a member their own configuration does not list
    contacts: tuple[tuple[int, str], ...] = ()
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
        object.__setattr__(self, "contacts", tuple(sorted((m, c) for m, c in self.contacts if m in members)))
        object.__setattr__(self, "hashing", shared_hashing(self.scheme, members, self.vnodes))

    @property
    def coordinator(self) -> int:
        """The member that installs the next view (the lowest id)."""
        return self.members[0]

    def manager_of(self, path: str) -> int:
        return self.hashing.manager_of(path)

    def contact(self, node: int) -> str | None:
        """The contact ``node`` joined with, if any."""
        return next((c for m, c in self.contacts if m == node), None)

    def changed(self, members: tuple[int, ...] | list[int], contact: tuple[int, str] | None = None) -> View:
        """The next view: epoch + 1 with ``members`` (and one more contact),
        the same hashing scheme; the contacts of members that left are dropped."""
        contacts = self.contacts + ((contact,) if contact and contact[1] else ())
        return View(self.epoch + 1, tuple(members), self.scheme, self.vnodes, contacts)

    def adopt(self, epoch: int, members: tuple[int, ...] | list[int], contacts: Any = ()) -> View:
        """The view a peer sent (``GetView``'s reply, a ``ViewChange``), with this one's scheme."""
        return View(epoch, tuple(members), self.scheme, self.vnodes, tuple((m, c) for m, c in contacts))

    def to_bytes(self) -> bytes:
        """Members and contacts, as a ``ViewChange`` carries them."""
        return pack([list(self.members), [list(mc) for mc in self.contacts]])


#: the longest contact a view carries (an address: "host:port")
MAX_CONTACT = 255


def unpack_view(data: bytes) -> tuple[tuple[int, ...], tuple[tuple[int, str], ...]]:
    """(members, contacts) from the wire (``View.to_bytes``): distinct
    non-negative ids, bounded; contacts of members only, short strings."""
    try:
        obj = unpack(data, max_size=(32 + MAX_CONTACT) * MAX_MEMBERS, use_list=False)
    except ProtocolError as exc:
        raise ProtocolError(f"view: {exc}") from None
    if type(obj) is not tuple or len(obj) != 2 or type(obj[0]) is not tuple or type(obj[1]) is not tuple:
        raise ProtocolError("view: [members, contacts]")
    members = check_members(obj[0])
    return members, check_contacts(obj[1], members)


def check_members(obj: Any) -> tuple[int, ...]:
    """Members from the wire: 1..MAX_MEMBERS distinct ints in 0..2^31-1 (ProtocolError otherwise)."""
    if type(obj) not in (tuple, list) or not 0 < len(obj) <= MAX_MEMBERS:
        raise ProtocolError(f"view members: an array of 1..{MAX_MEMBERS} node ids")
    if any(type(m) is not int or not 0 <= m < 1 << 31 for m in obj) or len(set(obj)) != len(obj):
        raise ProtocolError("view members: distinct node ids (ints 0..2^31-1)")
    return tuple(sorted(obj))


def check_contacts(obj: Any, members: tuple[int, ...]) -> tuple[tuple[int, str], ...]:
    """Contacts from the wire: [member, str of at most MAX_CONTACT characters] pairs."""
    out = []
    for mc in obj:
        if type(mc) not in (tuple, list) or len(mc) != 2 or mc[0] not in members or type(mc[1]) is not str:
            raise ProtocolError("view contacts: [member id, address] pairs of members")
        if not 0 < len(mc[1]) <= MAX_CONTACT or "\x00" in mc[1]:
            raise ProtocolError(f"view contacts: an address of 1..{MAX_CONTACT} characters")
        out.append((mc[0], mc[1]))
    return tuple(out)


def redirect(node: int, view: View, name: str, to: int | None = None) -> OSError:
    """The redirect a node answers for a name it does not manage under ``view``:
    naming ``to``, its manager, when the sender's view is this one (the name
    was delegated: ``Redirected``), else naming nobody (fetch the view)."""
    if to is not None:
        return Redirected(to, name, f"node {node} does not manage this name; node {to} does")
    return fs_error(
        REDIRECT, name, f"node {node} does not manage this name in view {view.epoch}; fetch the view and ask again"
    )


# --- the requests every design's node answers (``Node``) -------------------------------------
@register_request
@dataclass(slots=True, frozen=True)
class GetView(Request):
    """The receiver's view. Reply: (epoch, members, contacts)."""

    reply: ClassVar[Any] = tuple[int, list[int], list[tuple[int, str]]]


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
