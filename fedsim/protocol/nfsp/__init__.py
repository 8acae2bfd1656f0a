"""NFSp (parallel NFS, the design dNFSp extends; dNFSp paper, section 2):
one meta-server holds the namespace and the attributes and is, to its
clients, an NFS server; the I/O daemons (every other member) hold the file
data.  Written over NFS (``fedsim.protocol.nfs``): the same procedures and
client entry, with the data operations sent on to the daemons.

* the daemons' requests and the meta-server's read answer: ``messages.py``;
* the I/O daemons: ``iod.py``;
* the meta-server, forwarding data operations: ``meta.py``.

The meta-server is the federation's lowest member.
"""

from __future__ import annotations

from fedsim.protocol.designs import DESIGNS
from fedsim.protocol.nfsp.meta import NfspMeta


@DESIGNS.register("nfsp")
class NfspNode(NfspMeta):
    """One member of an NFSp federation: client entry, meta-server and I/O
    daemon handlers, one object (each answered only where it is the role)."""


__all__ = ["NfspNode"]
