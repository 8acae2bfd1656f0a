"""dNFSp (the dNFSp paper, 004_... in the papers): NFSp with several
meta-servers, each serving a subset of the clients, over shared I/O daemons,
and the paper's two metadata coherence schemes (``meta.py``):

* ``dnfsp1``: on a miss, ask every other meta-server; no further synchronisation;
* ``dnfsp2``: a hash server per name holds its ownership token; the holder
  answers without a round trip; the hash server arbitrates transfers.

The requests between meta-servers: ``messages.py``.  Everything else is
NFSp's (``fedsim.protocol.nfsp``) and NFS's (``fedsim.protocol.nfs``).
"""

from __future__ import annotations

from fedsim.protocol.designs import DESIGNS
from fedsim.protocol.dnfsp.meta import DnfspMeta


@DESIGNS.register("dnfsp1")
class Dnfsp1Node(DnfspMeta):
    """dNFSp1: lazy release consistency (a miss asks every other meta-server)."""

    scheme = 1


@DESIGNS.register("dnfsp2")
class Dnfsp2Node(DnfspMeta):
    """dNFSp2: hash servers and ownership tokens."""

    scheme = 2


__all__ = ["Dnfsp1Node", "Dnfsp2Node"]
