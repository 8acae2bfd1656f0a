"""What every design's node is: identity, membership, the two placement
policies, the effect plumbing every role uses, and the two tables that make
a design pluggable (its client API and its request handlers).

A design (``fedsim.protocol.designs``) is a subclass of ``Node`` whose
methods are marked ``@api(...)`` (operations a client may call, with the
types of their arguments) or ``@handles(RequestType)`` (what it does when a
peer's request arrives).  The runtimes know nothing else about it: the agent
serves exactly ``type(node).API`` to its clients, and every runtime delivers
a request through ``node.handle``.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, replace
from types import GeneratorType
from typing import Any, ClassVar, TypeVar

from fedsim.protocol.config import FederationSpec, ProtocolConfig
from fedsim.protocol.effects import Call, Send
from fedsim.protocol.hashing import ModN, Ring
from fedsim.protocol.messages import ProtocolError, Request
from fedsim.protocol.policies.homes import PlacementPolicy, make_placement
from fedsim.protocol.view import REDIRECT, REDIRECTS, GetView, View, check_contacts, check_members, redirect

Gen = Generator[Any, Any, Any]
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class ApiMeta:
    """What a runtime serving clients must know of an operation beyond its
    argument types, so that it need not know the operation by name:

    * ``fd``: "opens" (returns a descriptor, or a tuple whose first item is
      one), "uses" (its first argument is
      one) or "closes" (its first argument is one, released): the agent ties
      descriptors to the connection that opened them and closes what a
      vanished client left open;
    * ``size_arg``: the index of the argument that bounds the reply's size
      (a read's byte count), which the agent clamps to what one message
      carries and reserves against its buffer limits;
    * ``optional``: how many of the last arguments a client may leave out
      (the method's defaults then apply): an operation grows arguments
      without breaking the clients that do not use them (create's mode and
      owner)."""

    fd: str | None = None
    size_arg: int | None = None
    optional: int = 0


def api(*types: type, fd: str | None = None, size_arg: int | None = None, optional: int = 0) -> Callable[[F], F]:
    """Mark a generator method as a client operation taking arguments of
    ``types`` (checked by the agent before a call from the wire runs), the
    last ``optional`` of which may be left out (``ApiMeta.optional``)."""
    if not 0 <= optional < max(1, len(types)):
        raise ValueError(f"optional {optional}: at most {len(types) - 1} of {types} may be left out")
    if fd not in (None, "opens", "uses", "closes"):
        raise ValueError(f"fd must be 'opens', 'uses' or 'closes', not {fd!r}")
    if fd in ("uses", "closes") and (not types or types[0] is not int):
        raise ValueError("an operation that uses a descriptor takes it (an int) as its first argument")
    if size_arg is not None and not (0 <= size_arg < len(types) and types[size_arg] is int):
        raise ValueError(f"size_arg {size_arg} must index an int argument of {types}")

    def mark(fn: F) -> F:
        fn._fed_api = (types, ApiMeta(fd, size_arg, optional))  # type: ignore[attr-defined]
        return fn

    return mark


def handles(request: type[Request]) -> Callable[[F], F]:
    """Mark a method as the handler of ``request`` at this node."""

    def mark(fn: F) -> F:
        fn._fed_handles = request  # type: ignore[attr-defined]
        return fn

    return mark


@dataclass(slots=True)
class NodeStats:
    """What every node observes, whatever its design.  A design that counts more
    (FedFS: lookup paths, dirmerges, block cache hits) keeps a subclass of its own
    (``Node.STATS``) and reports it through ``Node.counters()``, the one interface
    the runtimes and studies sum: so the shared base names nothing one design does."""

    requests_served: int = 0  # peers' requests this node served (the load a study plots per node)
    redirects: int = 0  # requests this node sent again after a redirect (a view change it had missed)


class Node:
    """One member of a federation, whatever its design."""

    #: client operation -> argument types (collected from ``@api`` methods)
    API: ClassVar[dict[str, tuple[type, ...]]] = {}
    #: client operation -> its descriptor role and reply-size argument
    API_META: ClassVar[dict[str, ApiMeta]] = {}
    #: request type -> handler method name (collected from ``@handles`` methods)
    HANDLERS: ClassVar[dict[type[Request], str]] = {}
    #: the statistics each node keeps (a design's subclass of ``NodeStats`` for what only it counts)
    STATS: ClassVar[type[NodeStats]] = NodeStats
    #: where a client that mounts member ``k`` sends a call on a path: ``"entry"``, always to ``k``
    #: (the designs whose clients each mount one server: NFS, NFSp, dNFSp's meta-server per client
    #: subset, whose dNFSp1 coherence is per meta-server, so a call sent elsewhere would see
    #: another meta-server's view); ``"home"``, to the file's home or the name's manager (FedFS,
    #: where every member serves every name: ``fedsim.protocol.routing.Router``)
    CLIENT_ROUTE: ClassVar[str] = "entry"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        ops: dict[str, tuple[type, ...]] = {}
        meta: dict[str, ApiMeta] = {}
        handlers: dict[type[Request], str] = {}
        for klass in reversed(cls.__mro__):
            for name, fn in vars(klass).items():
                marked = getattr(fn, "_fed_api", None)
                if marked is not None:
                    ops[name], meta[name] = marked
                req = getattr(fn, "_fed_handles", None)
                if req is not None:
                    handlers[req] = name
        cls.API = ops
        cls.API_META = meta
        cls.HANDLERS = handlers
        closers = [n for n, m in meta.items() if m.fd == "closes"]
        if any(m.fd == "opens" for m in meta.values()) and len(closers) != 1:
            raise TypeError(f"{cls.__name__}: a design that opens descriptors needs exactly one 'closes' operation")

    def __init__(
        self,
        node_id: int,
        spec: FederationSpec,
        *,
        placement: PlacementPolicy | None = None,
        view: View | None = None,
    ) -> None:
        self.id = node_id
        self.spec = spec
        #: the membership view this node holds (``fedsim.protocol.view``);
        #: a node built with an explicit ``view`` that does not name it is
        #: joining (``Membership.join``), and is no member until a view does
        self.view = view or View(0, tuple(spec.members), spec.hashing, spec.vnodes)
        if view is None and node_id not in self.view.members:
            raise ValueError(f"node {node_id} is not among the members {self.view.members}")
        self.placement = placement or make_placement(spec.placement, node_id, spec.seed)
        self.config: ProtocolConfig = spec.protocol
        self.stats = self.STATS()
        # Peers this node's design treats as hung (peer -> until when, on the
        # runtime's clock): any request from one shows it is not, and clears it.
        self.suspects: dict[int, float] = {}
        self._handlers: dict[type[Request], Callable[[int, Any], Any]] = {
            req: getattr(self, name) for req, name in self.HANDLERS.items()
        }

    # ------------------------------------------------------------------ the view
    @property
    def members(self) -> tuple[int, ...]:
        return self.view.members

    @property
    def hashing(self) -> ModN | Ring:
        return self.view.hashing

    @property
    def epoch(self) -> int:
        return self.view.epoch

    @property
    def member(self) -> bool:
        """Whether this node is a member of the view it holds (not joining, not left)."""
        return self.id in self.view.members

    def manager_of(self, path: str) -> int:
        return self.view.hashing.manager_of(path)

    # ------------------------------------------------------------------ a delegation overlay
    #: Whether management of a name may be delegated away from the node the
    #: hashing picks (FedFS's ``rename: redistribute``, ``fedfs/delegation.py``):
    #: then every routed request is checked where it arrives, not only one
    #: from another view, and a redirect names the name's manager.
    overlay: bool = False

    def redirected(self, name: str, to: int) -> int:
        """A redirect named ``to`` the manager of ``name``: where to ask now
        (a design with an overlay caches it).  ``to`` itself, by default."""
        return to

    def moving(self, name: str) -> None:
        """With an overlay, called for every routed request from a peer: a
        design whose management of ``name`` is moving to or from this node
        raises EAGAIN (the requester backs off and asks again), so that a
        request is neither served by two nodes nor redirected back and forth
        while the move is in flight.  Nothing by default."""
        return None

    def install_view(self, view: View) -> Gen:
        """Adopt ``view`` if it is newer than this node's.  The base class only
        switches; a design with state derived from the view (FedFS: its
        managers' DT entries, its VDs, the summaries) moves that state here."""
        if view.epoch > self.view.epoch:
            self.view = view
        return
        yield

    def fetch_view(self, node: int) -> Gen:
        """Ask ``node`` for its view and install it if it is newer."""
        epoch, members, contacts = yield Call(node, GetView())
        if epoch > self.view.epoch:
            members = check_members(members)
            view = self.view.adopt(epoch, members, check_contacts(contacts, members))
            if self.adopts(view):
                yield from self.install_view(view)

    def adopts(self, view: View) -> bool:
        """Whether a peer's ``view`` (newer than this node's) may be installed
        here.  Always, by default; a design with joins refuses one that lists
        this node unless its own join made it (``Membership.adopts``)."""
        return True

    @handles(GetView)
    def on_get_view(self, src: int, req: GetView) -> tuple[int, list[int], list[tuple[int, str]]]:
        return self.view.epoch, list(self.view.members), list(self.view.contacts)

    # ------------------------------------------------------------------ plumbing
    def call(self, node: int, request: Request) -> Gen:
        """Request/reply, short-circuited when the peer is this node (no message).
        A request routed to a name's manager carries this node's epoch; a
        redirect (the name's manager changed in a view this node had not
        seen) fetches the view from the node that answered it and sends the
        request again to the name's manager in that view: the one place
        every routed request's stale-view retry is written."""
        route = type(request).route
        if route is not None:
            return (yield from self._routed(node, request, getattr(request, route), oneway=False))
        if node == self.id:
            return (yield from self.handle(self.id, request))
        return (yield Call(node, request))

    def call_manager(self, name: str, request: Request) -> Gen:
        """Call the manager of ``name`` with a request not routed by a field
        of its own (a rename, at its target directory's manager), following
        redirects as a routed request does; its ``epoch`` field, if any, is
        this node's view (the receiver checks it: ``check_manager``)."""
        return (yield from self._routed(self.manager_of(name), request, name, oneway=False))

    def _routed(self, node: int, request: Any, name: str, oneway: bool) -> Gen:
        routed = type(request).route is not None or hasattr(request, "epoch")  # (a rename: ``call_manager``)
        for attempt in range(REDIRECTS + 1):
            if routed and request.epoch != self.view.epoch:
                request = replace(request, epoch=self.view.epoch)
            if node == self.id and self.overlay and (m := self.manager_of(name)) != self.id:
                # The name's management moved away since the caller chose this node (a retry
                # after EAGAIN reuses its choice): what a peer's request is told (a redirect),
                # which ``handle`` does not check of this node's own.  Served here, a borrowed
                # directory given back was merged from this node's summaries, which lack what
                # its lender was told: a listing missed files (tests/test_rename_histories.py).
                self.stats.redirects += 1
                node = m
            if node == self.id:
                return (yield from self.handle(self.id, request))
            if oneway:
                return (yield Send(node, request))
            try:
                return (yield Call(node, request))
            except OSError as exc:
                if exc.errno != REDIRECT or attempt == REDIRECTS:
                    raise
                to = getattr(exc, "node", None)  # (a ``Redirected``: the name's management was delegated)
            self.stats.redirects += 1
            if to is None:
                yield from self.fetch_view(node)
                node = self.manager_of(name)
            else:
                node = self.redirected(name, to)
        raise AssertionError("unreachable")

    def notify(self, node: int, request: Request) -> Gen:
        """A namespace update (AddEntry, DelEntry, SummaryAdd, Forget ...): an
        acknowledged call, or a one-way message with ``async_dir_updates``."""
        if node == self.id or not self.config.async_dir_updates:
            yield from self.call(node, request)
        elif type(request).route is not None:
            yield from self._routed(node, request, getattr(request, type(request).route), oneway=True)
        else:
            yield Send(node, request)

    def check_manager(self, src: int, request: Any, name: str) -> Gen:
        """For a handler whose request names its manager's name in no field
        of its own (``call_manager``): what ``handle`` checks of a routed
        request, with an overlay (a redirect, or EAGAIN while the name's
        management moves)."""
        if self.overlay and src != self.id:
            yield from self._check_name(src, request, name)

    def _check_route(self, src: int, request: Any, route: str) -> Gen:
        yield from self._check_name(src, request, getattr(request, route))

    def _check_name(self, src: int, request: Any, name: str) -> Gen:
        """A routed request under another epoch than this node's (or any, with
        a delegation overlay): from a newer view, fetch it first; then
        redirect unless its name is managed here: naming its manager when the
        sender's view is this one and the overlay moved the name, else
        naming nobody (the sender fetches the view)."""
        if request.epoch > self.view.epoch:
            yield from self.fetch_view(src)
        if self.overlay:
            self.moving(name)
        m = self.manager_of(name)
        if m != self.id:
            raise redirect(self.id, self.view, name, m if self.overlay and request.epoch == self.view.epoch else None)

    def handle(self, src: int, request: Request) -> Gen:
        """Serve one request from ``src``: the entry point runtimes call."""
        if self.suspects and src in self.suspects:
            del self.suspects[src]  # heard from it
        handler = self._handlers.get(type(request))
        if handler is None:
            raise ProtocolError(f"no handler for request type {type(request).__name__}")
        route = type(request).route
        if route is not None and (self.overlay or request.epoch != self.view.epoch) and src != self.id:  # type: ignore[attr-defined]
            yield from self._check_route(src, request, route)
        result = handler(src, request)
        if type(result) is GeneratorType:  # handlers that need no effects return plainly
            result = yield from result
        return result

    def start(self) -> Gen:
        """What a node does when it joins (run once by every runtime before
        client operations; it may ``Spawn`` periodic work).  Nothing by default."""
        return
        yield

    def background(self) -> list[Gen]:
        """The periodic work ``start`` would go on with (timers), for a
        simulator that warms the federation up without running ``start``
        (``prepare``/``adopt``) and spawns these instead.  None by default."""
        return []

    def describe(self) -> dict[str, Any]:
        """The design's own state, for ``fednode status`` (plain values)."""
        return {}

    def counters(self) -> dict[str, float]:
        """The design's own cumulative counters (name -> number), which the
        runtimes and studies sum over the members and difference around a
        measured phase (``experiments.common``), whatever the design: the one
        interface through which a design reports what only it counts.  None by
        default."""
        return {}

    def collisions_seen(self) -> dict[str, tuple[int | None, tuple[int, ...]]]:
        """Names found on more than one node: path -> (the home it resolves
        to, None for a directory; every node holding it).  None by default."""
        return {}

    @property
    def ready(self) -> bool:
        """Whether the start-up exchange is done here (what a runtime waits
        for before it lets clients in).  Always, by default."""
        return True

    # A simulator may skip the start-up exchange and warm the federation up
    # outside simulated time: ``prepare`` is the local part of ``start`` (only
    # Local effects), ``adopt`` takes what ``other`` would have sent.
    def prepare(self) -> Gen:
        return
        yield

    def adopt(self, other: Node) -> None:
        return None

    def prepared(self) -> None:
        """Every member has adopted this one's start-up state."""
        return None
