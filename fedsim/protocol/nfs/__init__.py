"""NFS: one server holds every file and directory in its local file system;
every other node is an entry that forwards each client operation to it.

The baseline every paper compares with (FedFS, Federated DAFS, mNFS and
dNFSp all measure against one NFS server), written on the same effects as
FedFS so that the simulator prices it with the same network, CPU and disk
models, and the agents run it for real:

* the server's procedures, one request type each: ``messages.py``;
* the server (stateless; a path is the file handle): ``server.py``;
* the client side at every node (open files, the file API): ``client.py``.

The server is the federation's lowest member.  Operations not listed in
``NfsNode.API`` (extended attributes, migration) are not offered: the agent
answers them "unknown operation".
"""

from __future__ import annotations

from fedsim.protocol.designs import DESIGNS
from fedsim.protocol.nfs.client import ClientEntry


@DESIGNS.register("nfs")
class NfsNode(ClientEntry):
    """One member of an NFS federation: the server's handlers (answered only
    at the server) and the client entry, one object."""


__all__ = ["NfsNode"]
