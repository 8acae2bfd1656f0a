"""FedFS (Gopalakrishnan et al.), the design every other is compared with.

A FedFS node, split into the rooms of its roles.  For a pathname P with
parent directory D:

* the *requester* R, whose API was called: ``requester.py`` (the file API,
  the four lookup paths);
* the *manager* M = manager_of(P), which decides P's home at creation and
  remembers it in its directory table (DT): ``manager.py``;
* the *parent's manager* PM = manager_of(D), which holds D's virtual
  directory (VD), cached or rebuilt by dirmerge: ``directory.py``, guided by
  the Bloom summaries of ``summaries.py`` (and their periodic refresh);
* the *home* H, whose local file system holds P: ``home.py``;
* rename within a directory, coordinated by the directory's manager with the
  two names' managers and homes, and across directories by two-phase commit
  (``rename: 2pc``), coordinated by the target directory's manager: ``rename.py``;
  or by dynamic redistribution (``rename: redistribute``), that manager borrowing
  the source directory's table through a delegation overlay on the manager map:
  ``delegation.py``;
* attributes (getattr, chmod/chown/utimens), statfs and fsync, at a file's
  home or a directory's holders through its manager: ``attributes.py``;
* symbolic links and special files (symlink, readlink, mknod), names with a
  home as files are, never followed or opened, and hard links (link: the new
  name on the old name's home): ``links.py``;
* extended attributes (getxattr, setxattr, listxattr, removexattr), by the
  same rules: ``extattrs.py``;
* file migration (FedFS 3.2) and the periodic work of a migration policy:
  ``migration.py``;
* the remote data-block cache, at the requester for files homed elsewhere,
  kept coherent by their homes: ``blockcache.py``;
* membership changes (FedFS 3.3): join and graceful leave as view changes,
  with the hand-off of the names whose manager changes: ``membership.py``;
* replication (FedFS 3.2, ``replicas: 2``): a secondary copy of every file at
  the home's successor, promoted when the home leaves: ``replication.py``;
* crash detection by heartbeats, eviction and restart: ``failure.py``.

Everything here is a generator that yields effects (``fedsim.protocol.effects``)
and never does I/O, so the simulator and the real agent run this exact code.

A new role is a module beside these, its class inserted into the chain
below, with its messages registered in its own module.
"""

from __future__ import annotations

from fedsim.protocol.designs import DESIGNS
from fedsim.protocol.fedfs.extattrs import ExtendedAttributes
from fedsim.protocol.fedfs.failure import FailureDetection
from fedsim.protocol.fedfs.links import Links
from fedsim.protocol.fedfs.membership import Membership
from fedsim.protocol.fedfs.migration import Migration
from fedsim.protocol.fedfs.replication import Replication


@DESIGNS.register("fedfs")
class FedNode(Replication, FailureDetection, Membership, Migration, Links, ExtendedAttributes):
    """One member of a FedFS federation: every role, one object.  The roles
    are a chain of classes (summaries <- directory <- manager <- home <-
    requester <- delegation <- renaming), each adding its own state in ``__init__`` and its
    handlers; attributes (then block caching and extended attributes, over
    attributes), migration and
    membership all extend renaming and are joined here (membership first, as
    a view change reaches every role, with failure detection before it: an
    eviction is a view change; then migration, so that its bookkeeping
    of a file's writes wraps the handlers below it).  Replication comes before
    them all: it forwards a change to the secondary once every role below has
    made it, and re-replicates once the view change has moved their state.
    Links (symlinks and special files) extend block caching and add only
    operations and handlers of their own.
    Each calls ``super()``, so the order of the chain is Python's method
    resolution order: replication, failure detection, membership, migration,
    links, block caching, extended attributes, attributes, renaming, delegation,
    requester, home, manager, directory, summaries."""

    CLIENT_ROUTE = "home"  # every member serves every name: a call goes straight to the file's home


__all__ = ["FedNode"]
