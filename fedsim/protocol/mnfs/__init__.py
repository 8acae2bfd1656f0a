"""mNFS (the 001 paper): n servers, every one a full NFS server of the same
namespace, and each client request multicast to all of them:

* metadata writes (create, mkdir, unlink, rmdir, rename, setattr, truncate,
  symlink, mknod) are applied by every server, in one order (a sequencer:
  ``node.py``), so every server holds the whole namespace and every file's
  size, and meets the same outcome;
* metadata reads (getattr, stat/lookup, readdir, access at open, readlink)
  are answered by one server, chosen round-robin by the transaction id (a
  counter at the requesting entry);
* file data is striped: chunk ``c = offset // STRIPE_UNIT`` lives at server
  ``(c + ino) mod n`` (servers in member order), in that server's local file
  of the same path, at the same offset (the other chunks are holes there);
* STATFS is the servers' sum.

Written over NFS (``fedsim.protocol.nfs``): the same procedures, handlers and
client entry, with where each request goes changed (``node.py``).
"""

from __future__ import annotations

from fedsim.protocol.designs import DESIGNS
from fedsim.protocol.mnfs.node import STRIPE_UNIT, MnfsEntry


@DESIGNS.register("mnfs")
class MnfsNode(MnfsEntry):
    """One member of an mNFS federation: a server and a client entry, one object."""


__all__ = ["STRIPE_UNIT", "MnfsNode"]
