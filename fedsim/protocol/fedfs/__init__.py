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
  two names' managers and homes: ``rename.py``;
* membership changes (FedFS 3.3): join and graceful leave as view changes,
  with the hand-off of the names whose manager changes: ``membership.py``.

Everything here is a generator that yields effects (``fedsim.protocol.effects``)
and never does I/O, so the simulator and the real agent run this exact code.
Where would migration go?  A new role module beside these, mixed into
``FedNode`` below, with its messages registered in its own module.
"""

from __future__ import annotations

from fedsim.protocol.designs import DESIGNS
from fedsim.protocol.fedfs.membership import Membership


@DESIGNS.register("fedfs")
class FedNode(Membership):
    """One member of a FedFS federation: every role, one object.  The roles
    are a chain of classes (summaries <- directory <- manager <- home <-
    requester <- renaming <- membership), each adding its own state in ``__init__`` and its
    handlers."""


__all__ = ["FedNode"]
