"""Designs: the file systems the framework can run, by the name a config's
``architecture`` (``FederationSpec.design``) gives.  Each maps to a ``Node``
subclass; every runtime builds its nodes through ``build_nodes``, so a design
registered here runs on the simulator, the in-memory runtime and the agent
without any runtime knowing it.

FedFS registers itself as ``fedfs``.  The other papers' systems (NFS, mNFS,
dNFSp, Ursa Minor) register the same way, from their own modules.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from fedsim.protocol.config import FederationSpec
from fedsim.protocol.registry import Registry

if TYPE_CHECKING:
    from fedsim.protocol.node import Node
    from fedsim.protocol.policies.homes import PlacementPolicy

DESIGNS: Registry[Any] = Registry("architecture")


def design_class(name: str) -> type[Node]:
    """The node class of design ``name`` (ValueError naming the registered ones)."""
    _load_builtin()
    return DESIGNS.get(name)


def build_node(spec: FederationSpec, node_id: int, **kw: Any) -> Node:
    """One member of the federation ``spec`` describes (the agent's case)."""
    return design_class(spec.design)(node_id, spec, **kw)


def build_nodes(
    spec: FederationSpec,
    ids: Iterable[int] | None = None,
    placements: Sequence[PlacementPolicy] | None = None,
) -> list[Node]:
    """Every member (or those in ``ids``); they share one hashing object (a
    ring of a thousand members is built once, not a thousand times:
    ``view.shared_hashing``).
    ``placements`` overrides the placement policy per member (studies that
    force homes)."""
    cls = design_class(spec.design)
    ids = list(spec.members if ids is None else ids)
    return [cls(i, spec, placement=None if placements is None else placements[k]) for k, i in enumerate(ids)]


def _load_builtin() -> None:
    """Import the designs this package ships (they register on import)."""
    import fedsim.protocol.dnfsp
    import fedsim.protocol.fedfs
    import fedsim.protocol.mnfs
    import fedsim.protocol.nfs
    import fedsim.protocol.nfsp  # noqa: F401
