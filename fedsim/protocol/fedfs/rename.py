"""Rename within one directory and across directories, atomic for every
observer: the rename role.

For ``rename(old, new)`` in directory D, four roles take part (often on four
nodes, even though both names are in one directory):

* PM = manager_of(D), which holds D's virtual directory, coordinates (it
  serialises renames in D: a second one is answered EAGAIN while one is in
  flight);
* M_b = manager_of(new) checks that no create or removal of ``new`` is in
  flight and *marks* it, so that creates of it wait (EAGAIN) until the end;
* H_a, the home of ``old``, keeps the file: it is renamed there, in its local
  file system (``Local("rename")``, atomic and replacing), never copied;
* H_b, the home of an existing target ``new`` (if not H_a), removes it once
  the rename has committed.  M_a = manager_of(old) forgets ``old``.

Messages (PM's calls, in order; a call to oneself is no message)::

    R   -> PM   Rename(old, new)                 the client's operation
    PM  -> M_b  RenameCheck(new, H_b or -1)      mark new; EAGAIN if its DT disagrees
    PM  -> H_a  RenamePrepare(old, new)          gate old+new; old a file? not open?
    PM  -> H_b  RenameGate(new)                  gate new; not open?    (target on H_b)
         --- commit point: PM's VD of D says new -> H_a, old gone ---
    PM  -> H_a  RenameFinish(old, new, True)     the local rename; gates open
    PM  -> M_b  RenameDone(old, new, H_a)        DT new -> H_a (and old gone if M_a = M_b)
    PM  -> H_b  RenameDrop(new, True)            remove the old target; tombstone; gate opens
    PM  -> M_a  Forget(old)                      (if M_a is not M_b)

The commit point is one in-memory step at PM: the update of D's VD.  Why it
makes the rename atomic: every way to observe either name goes through PM or
through a gated participant.  readdir and VD lookups (``GetEntry``) are
answered by PM, from the VD, so they see the old state before the commit
point and the new state after it, never a mix.  Every other lookup ends at a
home (found in a DT: the requester's own, or a manager's), and from the
prepare on, both homes answer EAGAIN for the names until the local trees
agree with the VD: H_a renames before it opens its gates, H_b drops the old
target (leaving a tombstone, so a late request is told ESTALE, "resolve
again", not ENOENT) only after M_b's DT already names H_a.  So an observer
that completes before the commit point sees ``old`` (and the old ``new``),
one that starts after it sees only ``new``, with the moved content, and the
ones in between are held off by a gate or read PM; none sees both names or
neither (``test_simulator`` checks this, linearisability included, with
readers on every node racing renames).
A merge of D while the rename is past its commit point applies it over the
local trees, which lag until the rename finishes (``Directory._merge``).

No handler waits: a gated name, a marked target and a directory with a
rename in flight are answered EAGAIN at once, and the requester, which runs
the client's operation and holds no worker, backs off and asks again
(``Requester._busy``).  A handler that waited for the rename would hold a
worker of its stage while the rename's own messages might need one of the
same stage at that node: with bounded pools, a deadlock.

Two races the target's manager closes: a create of ``new`` that asked PM
before the mark and resumes after it is told EAGAIN (not given a second file
of that name), and a lookup answer PM sent before the commit point is
returned but not cached over ``RenameDone``'s entry (``Manager.dt_epoch``).

Before the commit point nothing has changed but marks and gates, and every
failure (source missing ENOENT, open file EBUSY, a participant unavailable,
a concurrent create or unlink of a name EAGAIN) undoes them in reverse order
(``RenameFinish``/``RenameDrop``/``RenameUncheck`` with commit False) and
leaves no trace.  After it, the steps cannot fail by the protocol's own
doing: the gates keep every federated operation off both names.  Only the
local tree changed behind the federation's back (autonomy) or a crash can
still fail the local rename; PM then restores the VD and rolls back, which
observers that read the VD meanwhile may have noticed (the one window this
protocol cannot close without writing to the local file systems).

With two copies (``replication``), a home's step after the commit point
(RenameFinish at H_a, RenameDrop at H_b) reaches its secondary before the
home answers; a secondary that does not take it makes the home answer
``PeerUnavailable`` naming that secondary.  The step was done, so PM does
not roll back: it runs the remaining steps and then fails the rename with
that error (``_lagging``): committed and visible, ambiguous to the client
as after a timeout, the copy brought in line by the home's repair.  A
rename is thus acknowledged only once both copies of every file it
changed hold the change.

An open file pins its name, as it pins its home: a rename of a file that is
open anywhere is refused with EBUSY.  A rename onto an open file replaces it
as on a local file system: the target's home keeps it as an orphan for the
descriptors open on it until their last close (``home.py``).

A directory is renamed too (``rename: 2pc`` or ``redistribute``; see
"Renaming a directory" below): its subtree is frozen at every member, then
every member renames its own part in its local tree.

Across directories (``rename: 2pc``, the default; ``local`` answers EXDEV
as before), a file (a symlink, a special file: ``links.py``) moves from D1
to D2 by two-phase commit.  The coordinator is PM2 = manager_of(D2): its
VD update is the commit point, as PM's is within a directory.  Phase 1
holds everything; phase 2 applies it::

    R   -> PM2   Rename(old, new)                     the client's operation
    PM2 -> PM1   RenameSource(old, new)               hold D1: old in doubt; old a file? -> H_a
                 (PM2 holds D2 itself; the two directories in path order)
    PM2 -> M_new RenameCheck(new, H_b or -1)          mark new
    PM2 -> M_old Forget(old)                          soft: lookups of old ask PM1 (EAGAIN) from here
    PM2 -> H_a   RenamePrepare(old, new)              gate old+new; not open?
    PM2 -> H_b   RenameGate(new)                      (target on another home)
         --- commit point: PM2's decision, its VD of D2 says new -> H_a ---
    PM2 -> H_a   RenameFinish(old, new, True)         local rename across local directories
    PM2 -> PM1   RenameSourceEnd(old, new, True, H_a) D1's VD drops old; D1's hold ends
    PM2 -> M_new RenameDone(old, new, H_a)            DT new -> H_a
    PM2 -> H_b   RenameDrop(new, True)                the old target goes; tombstone

H_a keeps the file: no data moves.  Its local rename goes between local
directories (``_move_here``): the new parent is made there if missing, as a
create makes it (implicit, summarised to D2's manager before the rename, so
that D2's dirmerges ask H_a), and the old parent is pruned once empty if it
was implicit.  Every refusal before the commit point (old missing ENOENT, a
directory EXDEV, D2 missing ENOENT or a file ENOTDIR, onto a directory
EISDIR, open EBUSY, a busy name or directory EAGAIN) undoes the holds in
reverse order and leaves no trace; after it, as within a directory.

Why readers see the old or the new name, never both nor neither.  D2's
listing and lookups of new change at one instant, the commit point.  D1's
cannot change then (PM1 hears of it one message later), so D1 is *in
doubt* from its hold to the outcome: a readdir of D1 (``ListVD``,
``ListHomes``) and a lookup of old at PM1 (``GetEntry``) answer EAGAIN,
which the requester retries (``Directory.in_doubt``); the other names of
D1 are served.  The alternative, serving D1's pre-commit state until the
outcome, would let a reader list D2 after the commit (the file there) and
then D1 (the file still there): both.  With the doubt, every listing of D1
ends before the hold or starts after D1's update, which follows the
commit, and every listing of D2 is before or after the commit point, so
each observation is of the state before or after the rename, in real-time
order (linearisable: ``test_simulator``'s readers list both directories and
stat both names while renames across directories run).  A reader that
lists D2 and then D1 may see the file in neither only if the rename ran
between its two listings, as with a local file system (two operations,
each atomic).  Lookups of old through a DT end at H_a, gated until its
local rename; of new, at H_b (gated, then ESTALE) or at PM2's VD.  A
dirmerge of D2 after the commit applies the rename over the lagging local
trees (``RenameFlight.home``, as within a directory); D1 is updated only
once H_a renamed, so its merges need no such overlay.  An rmdir of D2
while a rename into it is in flight is EAGAIN (its VD lacks the name until
the commit).

The coordinator's log is its flight (``renames[D2]``, ``home`` set at the
decision) and, with ``replicas: 2``, a copy of the decision at its *heir*
(its successor, the node that promotes its files), written before the
commit point (``RenameLog``: a refused or unanswered log aborts the
rename, which leaves no trace) and forgotten as the last post-commit
step.  A coordinator that crashes between the phases is evicted by the
heartbeats (``failure.py``).  At that view change every participant hands
what the rename holds (gates, marks, D1's doubt) to the heir and asks it
(``RenameOutcome``, once the heir has installed the same view): a heir
that logged the commit finishes the rename, a cooperative termination
(``_terminate``: H_a's finish, D1's end, the RenameDone, H_b's drop, each
retried until its participant answers or leaves), and those steps release
the holds; one that did not says so, and the participant releases at once
(the rename never committed).  Readers meanwhile meet the held names as
during the rename (EAGAIN), so none sees it undone or half done: before
the log, a crash after H_a renamed and before H_b dropped an existing
target left that target colliding with the moved file, the lowest node id
keeping the name (the most frequent failure of
``tests.rename_histories_random``).  A home that does not answer its
committed finish (crashed) has its heir rename the copy it holds for it
at once (``RenameCopy``), before the eviction would promote it under the
old name; a heir that promoted it already renames the promoted file (so
does the coordinator's heir when the coordinator was H_a), and the
rename's ends then name the heir (``_tell_later``, ``left_at``).  Without
copies the log is in the coordinator's memory only: every participant
releases what that rename held at the view change (``renames_orphaned``):
gates open, marks go with their DT entries, D1's hold ends with its VD
dropped, and the outcome is what H_a's local tree says (renamed if its
``RenameFinish`` ran, else not), the VDs and DT entries dropped merged
and resolved again from the local trees; a crash after H_a renamed and
before H_b dropped an existing target then leaves that target as a
collision beside the moved file.  Known limits with the log: a heir that
crashes too (two failures) leaves the participants to ask its own heir,
which has no log: released, the local trees the truth; the heir is the
coordinator's successor in the view of the decision, so a view change
between the decision and the crash may make the participants ask another
node (which answers "not logged"); only renames of files across
directories are logged (within a directory and of directories, the
coordinator's memory only, as without copies); and a home evicted and
back before a later step names it may still be named by a DT entry that
a lookup made meanwhile (``CRASHES_NOT_FIXED`` in
``tests/test_rename_histories.py``).  Without heartbeats a crash is never
detected, and the holds stay, as within a directory.  A view change that moves D1's management during the rename
does not hand the doubt off (as marks and holds are not): the end goes to
the node that took the hold (``pm1``), and the new manager serves D1
meanwhile (a known window, like the other hand-off limits of
``membership.py``).

Lost messages (``_tell``).  A participant whose reply was lost ran its
step: a prepare step that ends in ``PeerUnavailable`` is rolled back too
(a rollback of a step that never ran is a no-op: a home opens only the
gates a rename set, ``rename_gated``).  A ``RenameFinish`` that got no
answer is past the commit point: the rename goes forward, the finish is
asked again (H_a renames only while its gates are the rename's, so a second
one is a no-op), and until H_a answered the client is told
``PeerUnavailable`` (it may or may not have happened).  The rollbacks and the post-commit
steps (RenameDone, RenameDrop) are each tried once; from the first one
whose participant does not answer, the rest are retried in order in the
background, with back-off, until they get through or the participant is no
member any more (evicted or gone: its marks and gates went with it), and
the directory's rename stays in flight at PM meanwhile (``RenameFlight.
telling``: the next rename in it is told EAGAIN), so a late retry never
opens a newer rename's mark or gate.  Before this, one lost reply (of
RenamePrepare, say) left the names gated for good: every later operation
on them was EAGAIN (found by the in-memory dynamics property).

Across directories by dynamic redistribution (``rename: redistribute``,
Ursa Minor 4.2.2).  PM2 first makes itself the manager of D1 too: it
borrows D1's *table* from its manager by the hashing (``delegation.py``;
nothing to borrow if PM2 manages D1 already, nor if it still holds it from
an earlier rename: a hold hit), and then both directories' VDs are in its
memory and the rename is a single-manager rename.  The same steps as the
two-phase commit, but the source's hold is a local call with no doubt, and
the commit changes both tables at once::

    R   -> PM2   Rename(old, new)                     the client's operation
    PM2 -> L1    Lend(D1, epoch)                      D1's table to PM2 (L1 redirects its requests here)
                 (D1, D2 held here in path order; D1's VD merged from every member)
    PM2 -> M_new RenameCheck(new, H_b or -1)          mark new
    PM2 -> M_old Forget(old)
    PM2 -> H_a   RenamePrepare(old, new)              gate old+new; not open?
    PM2 -> H_b   RenameGate(new)                      (target on another home)
         --- commit point: PM2's VD of D2 names new -> H_a and its VD of D1 drops old, one step ---
    PM2 -> H_a   RenameFinish(old, new, True)         local rename across local directories
    PM2 -> M_new RenameDone(old, new, H_a)            DT new -> H_a
    PM2 -> H_b   RenameDrop(new, True)                the old target goes; tombstone
    PM2 -> M_old Forget(old, H_a)                     (old's entry cached between its Forget and the commit)
    PM2 -> L1    GiveBack(D1, epoch, holders)         at once, or ``redistribute_hold`` s after the last use

Why it is atomic: it is the within-directory argument with one directory
more.  Every listing of D1 or D2 and every VD lookup of old or new is
answered by PM2 (the lender redirects them, the borrower answers EAGAIN
while the table moves, so one node serves each table at any instant), from
VDs that change together at the commit point; every other lookup ends at a
home gated from the prepare until its local tree agrees (H_a renames before
it opens its gates; H_b drops the old target, leaving a tombstone, after
M_new names H_a).  A merge of D1 after the commit (an evicted VD) drops
old over the lagging local tree (``RenameFlight.moved_out``), as a merge of
D2 adds new.  So an observer sees the state before or after the rename,
never both names nor neither, and an existing target names the old file
until the commit and the moved one after it (``test_simulator``'s
linearisability races run for both methods).  Failures and their
rollbacks are the two-phase commit's (every refusal before the commit
undoes the holds and leaves no trace); the borrowed table is given back
whatever the outcome.  A directory is renamed by the two-phase commit over
every member, below, its source in doubt as there (the table borrowed all
the same: no redistribute version of it, since a directory's rename must
freeze every member's part whoever manages the parents).  Limits: those of
the two-phase commit, and a view change during the rename hands nothing
off (it voids the delegation; the local trees are the truth, as for a
coordinator that crashed).  A borrower that crashes is no manager after
the view change that evicts it (every delegation is dropped: its tables
return to the hashing's managers), and with ``replicas: 2`` its committed
renames are finished by its heir as for the two-phase commit.

Renaming a directory.  What a directory is in FedFS decides what its
rename must change.  A directory has no home and no inode of its own: it
is the union of the local directories of that path on every node that
holds something in it (its *holders*), found through the Bloom summaries
of each node's local directories, which its manager keeps.  Its manager,
like every name's, is picked by hashing the *full path*, and holds its VD
(a cache, rebuilt by dirmerge from the holders).  A file lives at its home
under the same full path in the local tree; the DT entry of a name at its
manager (and in the requesters' caches) is soft state too: an entry
missing is looked up again in the parent's VD, which a dirmerge rebuilds
from the local trees.  So the managers of every name below a directory do
depend on the full path, and a rename changes all of them; but what those
managers hold is only what the federation can rebuild from the local
trees.  Moving their management therefore means forgetting it, not
shipping it: no per-descendant message, no bounded batches.  What a
rename of directory ``old`` to ``new`` changes:

1. each holder's local directory: renamed in place (``Local("rename_dir")``,
   one ``renameat``, the same inodes), never copied; a holder of an empty
   target ``new`` replaces it (or removes its copy, holding no ``old``);
2. the parents: D1's VD loses ``old``, D2's VD names ``new`` a directory;
3. every cached DT entry and VD of a name under either path, on every
   node (any node may cache them, as a requester or a manager): forgotten,
   so the new managers rebuild theirs on demand and no stale answer names
   an old path;
4. the summaries: each holder tells the new managers of its directories
   under ``new`` that it holds them (``SummaryAdd``, one acknowledged call
   per directory per holder: the only cost that grows with the tree, and
   only with its directories), at the prepare, so that no merge after the
   commit can miss a holder; the old paths stay in the Bloom filters, and
   the new ones are false positives until the commit.

No file data moves and no file changes home.  The cost is two messages
per member (prepare, finish), the parents' holds, and the summaries.  A
directory's federated inode number hashes its path (``attrs.dir_ino``), so
it changes with the name; the files' numbers are their homes' and stay.

The protocol, at PM2 = manager_of(D2) as for a file (PM within a
directory), after D1's hold (``RenameSource`` answers -1: a directory)::

    PM2 -> every member, in id order   DirRenamePrepare(old, new)   freeze both subtrees; no file open
                                                                     under old (EBUSY), nothing in flight
                                                                     under either (EAGAIN), the local new
                                                                     absent or empty (ENOTDIR, ENOTEMPTY);
                                                                     a holder summarises new's directories
         --- commit point: PM2's VD of D2 names new a directory (and drops old, within one directory) ---
    PM2 -> every member                DirRenameFinish(old, new, True)   rename the local part, forget;
                                                                         the freeze ends
    PM2 -> PM1                         RenameSourceEnd(old, new, True)   D1's VD drops old; its doubt ends

EINVAL (into its own subtree) and ENOTDIR (onto a file) come before the
prepare; a file onto a directory stays EISDIR.  A frozen path is any path
equal to or below ``old`` or ``new``; every request naming one (a path, a
directory and a name, an old or new name) is answered EAGAIN at once by
``Renaming.handle`` and retried by its requester, except the rename's own
steps and the ends of what was in flight when the freeze came (a file
rename's finish or rollback, a create's AddEntry, an unlink's DelEntry and
Forget, an rmdir's RmLocal, a summary's growth: refused, they would leave a
gate, a mark or a stale VD behind); the prepare refuses (EAGAIN) while any
of those holds something under either path.  Why it is atomic: from the
prepare at a node until its finish, nothing under either name is served
there, so no observer sees part of the subtree moved; D2's listing changes
at the commit point; D1's listing and its lookup of ``old`` are in doubt
(EAGAIN) from the hold until ``RenameSourceEnd``, which goes after every
member's finish.  A lookup under ``old`` after the commit reaches a node
that is frozen (EAGAIN) or finished (ENOENT: the rename is over there, and
it committed before); under ``new``, a frozen node (EAGAIN) or the moved
tree, merged from finished holders only (every holder is a candidate of
the merge since its prepare's summaries, and an unfinished one answers its
ReadDir EAGAIN, which fails the merge: ``Directory._merge``).  So every observation is of the state before the
commit or after it, never both names nor neither.

Failures as for a file.  Every member takes part: with one down, the
rename fails EHOSTDOWN (and leaves no trace) until it is back or evicted.
Before the commit, a refusal or a member that
does not answer undoes every freeze in reverse order (``DirRenameFinish``
with commit False) and leaves no trace; a view change between the first
prepare and the commit fails the rename EAGAIN (a joiner was not frozen).
After it, the finishes (and D1's end) are retried in the background until
each member answers or leaves (``_tell``), the directories staying busy
meanwhile.  A coordinator that leaves the view releases its freezes at
every member (``renames_orphaned``); a graceful leaver runs its rename on
(a released freeze still takes its finish).  Limits: a coordinator that
crashes after the commit, its finishes sent to some members only, leaves
the subtree split between the two names (the local trees are the truth,
as for a file rename's crashed coordinator; a cooperative termination,
members asking each other for the outcome, would close it); a rename
over a directory that collides across nodes with a file of the same name
is refused ENOTDIR by that node.  With ``replicas: 2`` every member also
renames its part of the replica space (the copies it holds for its
predecessor: ``Replication._dir_move_here``), so the copies follow their
primaries without a message of their own.

Known limits: a name that collides (a file of the same name on several
nodes) is renamed or replaced only in the copy it resolves to; the other
copies keep the name, as after an unlink, and the next merge shows them.
Marks and gates of a participant that crashes mid-rename stay until it
restarts (crash-stop; there is no lease yet).
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from fedsim.protocol.effects import Compute, Local, Sleep, Spawn
from fedsim.protocol.fedfs.delegation import Delegation
from fedsim.protocol.fedfs.directory import REPAIR_FIRST_S, REPAIR_MAX_S, RenameFlight
from fedsim.protocol.fedfs.requester import BUSY_FIRST_S, BUSY_MAX_S
from fedsim.protocol.messages import (
    AddEntry,
    DelEntry,
    Forget,
    PeerUnavailable,
    Request,
    RmLocal,
    Stat,
    SummaryAdd,
    fs_error,
    register_request,
)
from fedsim.protocol.names import ROOT, ancestors, join, normalize, parent, split, under
from fedsim.protocol.node import Gen, api, handles
from fedsim.protocol.tables import DIR_ENTRY, DTEntry


# --- at the directory's manager (PM) ----------------------------------------------------
@register_request
@dataclass(slots=True, frozen=True)
class Rename(Request):
    """Rename ``old`` to ``new`` at the target directory's manager.  Reply:
    new's home (-1: a directory, which has none)."""

    reply: ClassVar[Any] = int
    old: str
    new: str
    epoch: int = 0  # the sender's view (``Node.call_manager``: checked with ``rename: redistribute``)


# --- at the source directory's manager (PM1), across directories ------------------------
@register_request
@dataclass(slots=True, frozen=True)
class RenameSource(Request):
    """Hold ``old``'s directory for a rename to ``new`` in another directory:
    ``old`` is in doubt (EAGAIN) until ``RenameSourceEnd``.  Reply: old's home
    (-1: a directory, whose subtree the coordinator then freezes)."""

    reply: ClassVar[Any] = int
    old: str
    new: str


@register_request
@dataclass(slots=True, frozen=True)
class RenameSourceEnd(Request):
    """The coordinator's outcome: committed (``old`` leaves the VD; it lived at
    ``home``) or aborted; the hold ends either way."""

    reply: ClassVar[Any] = None
    old: str
    new: str
    commit: bool
    home: int = -1


# --- at the coordinator's heir (with ``replicas: 2``), across directories ----------------
@register_request
@dataclass(slots=True, frozen=True)
class RenameLog(Request):
    """The coordinator's log of a rename across directories, kept at its
    heir (its successor, the node that promotes its files): ``commit`` True
    records the decision just before the commit point (H_a ``home``, the
    replaced target's home ``target`` or -1, D1's holder ``pm1``, new's
    manager ``m_new``); False forgets it (rolled back, or every step done).
    The heir finishes a logged rename if the coordinator leaves the view
    before forgetting it (``Renaming._terminate``)."""

    reply: ClassVar[Any] = None
    old: str
    new: str
    home: int
    target: int
    pm1: int
    m_new: int
    commit: bool


@register_request
@dataclass(slots=True, frozen=True)
class RenameOutcome(Request):
    """A participant's question to the heir of ``coordinator``, which left
    the view while a rename of its held ``path`` here: True if the heir
    logged that rename's commit (it finishes it: keep the hold for its
    steps), False if not (it never committed: release).  EAGAIN while the
    heir has not installed ``epoch``, the asker's view without the
    coordinator (which, restarted, may be a member again by then)."""

    reply: ClassVar[Any] = bool
    path: str
    coordinator: int
    epoch: int


# --- at the target's manager (M_b) --------------------------------------------------------
@register_request
@dataclass(slots=True, frozen=True)
class RenameCheck(Request):
    """Mark ``path`` as a rename's target; ``home`` is where PM's VD says it
    lives (-1: absent).  EAGAIN if this manager's DT disagrees: a create or
    an unlink of the name is in flight."""

    reply: ClassVar[Any] = None
    path: str
    home: int


@register_request
@dataclass(slots=True, frozen=True)
class RenameUncheck(Request):
    """Rollback of RenameCheck."""

    reply: ClassVar[Any] = None
    path: str


@register_request
@dataclass(slots=True, frozen=True)
class RenameDone(Request):
    """Committed: ``new`` lives at ``home``; unmark it (and forget ``old`` if
    managed here).  ``epoch``: the sender's view (a receiver under an older
    one fetches it first: ``on_rename_done``)."""

    reply: ClassVar[Any] = None
    old: str
    new: str
    home: int
    epoch: int = 0


# --- at the homes (H_a keeps the file, H_b held the replaced target) ----------------------
@register_request
@dataclass(slots=True, frozen=True)
class RenamePrepare(Request):
    """Gate ``old`` and ``new`` here and check the rename can be done locally.
    Reply: True when they are two names of one file (hard links: ``links.py``),
    which ``rename(2)`` leaves as they are."""

    reply: ClassVar[Any] = bool | None
    old: str
    new: str


@register_request
@dataclass(slots=True, frozen=True)
class RenameFinish(Request):
    """Commit (do the local rename) or abort; the gates open either way."""

    reply: ClassVar[Any] = None
    old: str
    new: str
    commit: bool


@register_request
@dataclass(slots=True, frozen=True)
class RenameGate(Request):
    """Gate the target ``path`` here (its home, not the source's) and check it is a closed file."""

    reply: ClassVar[Any] = None
    path: str


@register_request
@dataclass(slots=True, frozen=True)
class RenameDrop(Request):
    """Commit (remove the replaced target, leave a tombstone) or abort; the gate opens either way.

    ``heir_of`` (>= 0, with ``replicas: 2``, commit only): sent to the
    successor of the target's home ``heir_of``, which did not answer its own
    drop: drop the copy held for it, or the file promoted from it
    (``Replication._drop_for_departed``), so that the replaced target does
    not come back when that home is evicted and its copies promoted."""

    reply: ClassVar[Any] = None
    path: str
    commit: bool
    heir_of: int = -1


# --- at every member, for a rename of a directory -----------------------------------------
@register_request
@dataclass(slots=True, frozen=True)
class DirRenamePrepare(Request):
    """Freeze the subtrees of ``old`` and ``new`` here (every request naming
    a path in either is answered EAGAIN until ``DirRenameFinish``) and check
    this node's part: no file open under ``old``, no create, rmdir, rename
    or migration in flight under either, and its local ``new``, if any, an
    empty directory (ENOTDIR, ENOTEMPTY)."""

    reply: ClassVar[Any] = None
    old: str
    new: str


@register_request
@dataclass(slots=True, frozen=True)
class DirRenameFinish(Request):
    """Commit (rename this node's part of ``old``, if it holds one, in its
    local tree; forget every cached name under both) or abort; the freeze
    ends either way."""

    reply: ClassVar[Any] = None
    old: str
    new: str
    commit: bool


def _refused(exc: OSError) -> Gen:
    """A handler's generator that fails at once with ``exc`` (a frozen name)."""
    raise exc
    yield  # (a generator: the runtimes drive every handler the same way)


# What passes a directory rename's freeze: its own steps, and the ends and
# rollbacks of what was already in flight when it began (a file rename's
# finish, a create's AddEntry, a removal's DelEntry or Forget, an rmdir's
# RmLocal, a summary's growth): they release holds or record local changes
# already made, and refused they would leave a gate, a mark or a stale VD behind.
_THROUGH_FREEZE: frozenset[type] = frozenset({
    DirRenamePrepare, DirRenameFinish, RenameFinish, RenameDrop, RenameUncheck, RenameSourceEnd, RenameDone,
    AddEntry, DelEntry, Forget, RmLocal, SummaryAdd, RenameLog, RenameOutcome,
})  # fmt: skip
# The fields of a request that name a path, per request type (a directory
# and a name together name one path too: ``GetEntry``, ``AddEntry``).
_PATH_FIELDS = ("path", "old", "new", "directory")
#: renames logged at one heir at a time (``RenameLog``: a peer's request fills it)
RENAME_LOG_MAX = 4096


def _paths(request: Request) -> list[str]:
    out = [v for f in _PATH_FIELDS if isinstance(v := getattr(request, f, None), str)]
    name = getattr(request, "name", None)
    d = getattr(request, "directory", None)
    if isinstance(name, str) and isinstance(d, str) and name:
        out.append(join(d, name))
    return out


def _best_effort(gen: Gen) -> Gen:
    """A rollback or post-commit step: a participant that does not answer
    cannot be helped here (crash-stop), and must not hide the outcome.
    Returns the step's value (None when it failed)."""
    try:
        return (yield from gen)
    except (PeerUnavailable, OSError):
        return None


def _lagging(gen: Gen, node: int) -> Gen:
    """A step at ``node`` after a commit point.  Returns the
    ``PeerUnavailable`` it answered naming *another* node, else None: with
    two copies (``replication``), ``node`` did its step but its secondary
    did not take it, so the change is not acknowledged.  The coordinator
    still runs every step left (the change is committed and visible; undoing
    it could not be done atomically), then raises that error to the client:
    ambiguous, as after a timeout, and the background repair brings the copy
    in line.  Any other error propagates."""
    try:
        yield from gen
    except PeerUnavailable as exc:
        if exc.node == node:
            raise
        return exc
    return None


class Renaming(Delegation):
    def __init__(self, node_id: int, spec: Any, **kw: Any) -> None:
        super().__init__(node_id, spec, **kw)
        # The names of ``gates`` a rename's prepare or target gate set here
        # (not a migration's freeze): only these does a rename's end open.
        self.rename_gated: set[str] = set()
        # ("gate" or "mark", path) -> the rename's coordinator, for each hold
        # a rename set here: released if the coordinator leaves the view
        # (``renames_orphaned``)
        self.rename_by: dict[tuple[str, str], int] = {}
        # gates ``renames_orphaned`` released -> the departed coordinator: a
        # leaver runs its rename on, and its ``RenameFinish`` still renames
        self.rename_released: dict[str, int] = {}
        # source directories (PM1) whose flight ``renames_orphaned`` released
        # -> (old, new, the departed coordinator): its ``RenameSourceEnd``
        # still drops the old name from the VD
        self.sources_released: dict[str, tuple[str, str, int]] = {}
        # Directory renames prepared here: (old, new) -> their coordinator.
        # Every request naming a path under either is answered EAGAIN
        # (``handle``) until the coordinator's finish, or its leave.
        self.dir_freezes: dict[tuple[str, str], int] = {}
        # freezes ``renames_orphaned`` released -> the departed coordinator:
        # a leaver runs its rename on, and its commit is still done here
        self.dir_released: dict[tuple[str, str], int] = {}
        # member -> the epoch of the last view that dropped it (a step retried for it since then
        # reaches, at most, a fresh incarnation that holds none of the rename: ``_tell_later``)
        self.left_at: dict[int, int] = {}
        # As a coordinator's heir: (old, new) -> (the coordinator, its log of that
        # rename's decision), from just before its commit point until every step
        # is done; finished here if the coordinator leaves the view (``_terminate``)
        self.rename_log: dict[tuple[str, str], tuple[int, RenameLog]] = {}

    def describe(self) -> dict[str, Any]:
        """Status adds what renames hold here: a name that stays held long
        after its rename names a participant that crashed mid-rename."""
        return {
            **super().describe(),
            "renames_coordinated": sorted(self.renames),
            "rename_holds": sorted(self.gates | self.rename_marks | {p for f in self.dir_freezes for p in f}),
        }

    # ------------------------------------------------------------------ a directory rename's freeze
    def handle(self, src: int, request: Request) -> Gen:
        """Every request: EAGAIN if it names a path a directory rename has
        frozen here (see the module docstring); the requester backs off and
        asks again.  No freeze, no cost but one test."""
        if self.dir_freezes and type(request) not in _THROUGH_FREEZE:
            for p in _paths(request):
                if self._frozen(p):
                    return _refused(fs_error(errno.EAGAIN, p, "a rename of a directory above is in flight; try again"))
        return super().handle(src, request)

    def _frozen(self, path: str) -> bool:
        return any(under(path, old) or under(path, new) for old, new in self.dir_freezes)

    # ------------------------------------------------------------------ the file API
    @api(str, str)
    def rename(self, old: str, new: str) -> Gen:
        """Rename a file, atomically (see the module docstring): within its
        directory, and with ``rename: 2pc`` (the default) or ``redistribute``
        into another one.

        A directory too (``2pc``, ``redistribute``): EINVAL into its own subtree,
        ENOTDIR onto a file, ENOTEMPTY onto a non-empty directory, EBUSY if
        a file under it is open; a file onto a directory is EISDIR.  EXDEV
        across directories or for a directory with ``rename: local``;
        ENOENT if the target's directory is missing;
        ENOENT if ``old`` is missing; EBUSY if it is open; EAGAIN if
        a conflicting operation on the names stayed in flight; ``old == new``
        is a no-op if the name exists."""
        old, new = normalize(old), normalize(new)
        yield Compute("fedfs_op")
        if ROOT in (old, new):
            raise fs_error(errno.EBUSY, ROOT, "cannot rename the root of the federation")
        d = split(new)[0]
        if split(old)[0] != d and self.config.rename == "local":
            raise fs_error(
                errno.EXDEV, new, "rename moves a file within its directory only; copy and unlink to move it elsewhere"
            )
        if old == new:
            yield from self._at_home(old, Stat, None)
            return None
        if under(old, new):
            # ``new`` holds ``old``: not empty, whatever ``old`` is (Linux's check, before any other
            # but the source's lookup).  Sent on, the coordinator's own hold of old's directory made
            # the prepare refuse it EAGAIN, for good (found by the property test's random examples).
            yield from self._at_home(old, Stat, None)
            raise fs_error(errno.ENOTEMPTY, new, "the target directory holds the source")
        # the target directory's manager coordinates (across directories too)
        home = yield from self._busy(lambda: self.call_manager(d, Rename(old, new)))
        self.dt.pop(old)
        if home < 0:  # a directory: every member forgot the names under both already (``DirRenameFinish``)
            self.dt.pop(new)
        elif home in self.members:
            self.dt.put(new, DTEntry(False, home))
        elif self.manager_of(new) != self.id:
            # A home that left meanwhile: no hint naming it.  The manager's
            # own entry is the rename's end's (``on_rename_done``); this one,
            # put over it, named the leaver for good (found by the dynamics
            # property: the final walk's open timed out).
            self.dt.pop(new)
        return None

    # ------------------------------------------------------------------ PM: the coordinator
    @handles(Rename)
    def on_rename(self, src: int, req: Rename) -> Gen:
        d, old_name = split(req.old)
        new_d, new_name = split(req.new)
        yield from self.check_manager(src, req, new_d)  # (a stale hint, another view: ``delegation.py``)
        if new_d != d and self.config.rename != "local" and ROOT not in (req.old, req.new):
            return (yield from self._cross(req.old, req.new))
        if new_d != d or old_name == new_name:  # the requester answers these itself; a peer may not
            raise fs_error(errno.EXDEV if new_d != d else errno.EINVAL, req.new, "not a rename within a directory")
        if d in self.renames:
            raise fs_error(errno.EAGAIN, req.old, "another rename in this directory is in flight; try again")
        flight = self.renames[d] = RenameFlight(old_name, new_name)
        try:
            return (yield from self._rename(d, req.old, req.new, flight))
        finally:
            if not flight.telling:  # (else ``_tell_later`` ends the flight)
                del self.renames[d]

    def _rename(self, d: str, old: str, new: str, flight: RenameFlight) -> Gen:
        vd, _ = yield from self.ensure_vd(d, ask_all=True)  # (as a create's check: every candidate asked)
        src = vd.entries.get(flight.old)
        missing = old if src is None else new if flight.new not in vd.entries else None
        if missing is not None and vd.unreachable >= 0:
            # A name the VD lacks may be on the node that did not answer its
            # merge: a rename must not report it missing, nor take it (a
            # target there would stay beside the renamed file: two files of
            # one name; found by the dynamics property).
            raise PeerUnavailable(vd.unreachable, f"may hold {missing} and did not answer its dirmerge")
        if src is None:
            raise fs_error(errno.ENOENT, old)
        dst = vd.entries.get(flight.new)
        if src.is_dir:
            undo: list[tuple[int, Request]] = []
            try:
                return (yield from self._dir_moved(d, old, new, dst, flight, undo, None))
            except Exception:  # (as ``_cross``)
                yield from self._tell(d, flight, undo[::-1])
                raise
        if dst is not None and dst.is_dir:
            raise fs_error(errno.EISDIR, new)
        h_a = src.home
        assert h_a is not None
        h_b = None if dst is None or dst.home == h_a else dst.home
        m_b = self.manager_of(new)

        # Prepare: mark, then gate; each failure undoes what came before it,
        # and a step without an answer itself too (its reply may be what was lost).
        steps: list[tuple[int, Request, Request]] = [
            (m_b, RenameCheck(new, -1 if dst is None else dst.home), RenameUncheck(new)),
            (h_a, RenamePrepare(old, new), RenameFinish(old, new, False)),
        ]
        if h_b is not None:
            steps.append((h_b, RenameGate(new), RenameDrop(new, False)))
        undo = []
        one_file = False
        try:
            for node, request, rollback in steps:
                one_file = (yield from self._prepared(undo, node, request, rollback)) is True or one_file
        except Exception:  # not GeneratorExit: an abandoned generator must not yield its rollback
            yield from self._tell(d, flight, undo[::-1])
            raise
        if one_file:  # two names of one file (H_a's prepare said so): rename(2) does nothing
            yield from self._tell(d, flight, undo[::-1])
            return h_a

        # The commit point: from here on, PM answers with the new state.
        flight.home = h_a
        self._vd_update(d, ("del", flight.old))
        self._vd_update(d, ("add", flight.new, DTEntry(False, h_a)))
        done: list[tuple[int, Request]] = [(m_b, RenameDone(old, new, h_a, self.epoch))]
        if h_b is not None:
            done.append((h_b, RenameDrop(new, True)))
        try:
            lag = yield from _lagging(self.call(h_a, RenameFinish(old, new, True)), h_a)
        except PeerUnavailable:
            # H_a may have renamed (its reply lost) or not (the request
            # lost): the rename goes forward, its finish retried with the
            # rest (a second one is a no-op: ``on_rename_finish``).
            lag = None
            done.insert(0, (h_a, RenameFinish(old, new, True)))
        except Exception:
            # The local tree changed outside the federation, or H_a failed:
            # restore the VD and undo the rest (see the module docstring).
            flight.home = None
            self._vd_update(d, ("del", flight.new))
            self._vd_update(d, ("add", flight.old, src))
            if dst is not None:
                self._vd_update(d, ("add", flight.new, dst))
            yield from self._tell(d, flight, (undo[:1] + undo[2:])[::-1])
            raise
        pending, lag_done = yield from self._tell(d, flight, done)
        m_a = self.manager_of(old)
        if m_a != m_b:
            yield from _best_effort(self.notify(m_a, Forget(old)))
        if pending and isinstance(pending[0][1], RenameFinish):
            raise PeerUnavailable(h_a, f"the rename of {old} to {new} is committed, its home has not answered yet")
        if lag or lag_done:
            raise lag or lag_done  # renamed, but a home's secondary did not take its step: not acknowledged
        return h_a

    def _tell(self, d: str, flight: RenameFlight, steps: list[tuple[int, Request]]) -> Gen:
        """Deliver a rename's rollback or post-commit ``steps`` (idempotent:
        each undoes or ends what the rename holds at one participant), in
        order: at once, and from the first participant that does not answer
        on, in the background (see the module docstring: a lost message
        must not leave a name marked or gated for good).  Returns the steps
        left to the background (empty: all delivered), and the error of a
        step done whose copy lags (``_lagging``: its home's secondary did
        not take it; not retried, the home's repair completes it)."""
        lag: PeerUnavailable | None = None
        steps = [self._addressee(node, request) for node, request in steps]
        for i, (node, request) in enumerate(steps):
            try:
                # (not ``lag or (yield from ...)``: once a step lagged, that
                # skipped every step after it, its gate and mark left for
                # good; found by the dynamics property: EAGAIN on a renamed
                # name after a loss)
                lagged = yield from _lagging(self.call(node, request), node)
                lag = lag or lagged
            except PeerUnavailable:
                flight.telling = True
                # A replaced target's home that is not told now may be evicted, its copy promoted: the
                # copy's holder is told first (``RenameDrop.heir_of``), before that eviction.
                heirs = [(self._heir(n), replace(r, heir_of=n)) for n, r in steps[i:]
                         if isinstance(r, RenameDrop) and r.commit]  # fmt: skip
                # A moved file's home that did not rename may be evicted too, its copy promoted under
                # the old name: the copy is renamed first, at once (``RenameFinish`` for its heir).
                copies = [hr for n, r in steps[i:] if isinstance(r, RenameFinish) and r.commit
                          and (hr := self._finish_for(n, r)) is not None]  # fmt: skip
                for j, (h, r) in enumerate(copies):
                    try:
                        yield from self.call(h, r)
                    except PeerUnavailable:
                        heirs[:0] = copies[j:]
                        break
                    except OSError:
                        pass  # (promoting there, or no copy held: the promotion decides)
                later = [*((h, r) for h, r in heirs if h is not None), *steps[i:]]
                yield Spawn(self._tell_later(d, flight, later, self.epoch))
                return later, lag
            except OSError:
                pass  # answered: nothing of ours is held there (a participant that crashed and restarted)
        return [], lag

    def _tell_later(self, d: str, flight: RenameFlight, steps: list[tuple[int, Request]], epoch: int) -> Gen:
        """``_tell``'s retries, with back-off; the directory's rename stays in
        flight here until they end, so no newer rename's mark or gate can be
        opened by one of them."""
        delay = REPAIR_FIRST_S
        # A moved file's home evicted before its finish -> its heir, which renamed the copy it promoted
        # (``_finish_for``): the ends name the heir, not a node that may be back, empty, by then.
        heirs: dict[int, int] = {}
        try:
            for node, request in steps:
                if isinstance(request, (RenameDone, RenameSourceEnd)) and request.home in heirs:
                    request = replace(request, home=heirs[request.home])
                while True:
                    # (addressed again each time: a manager evicted meanwhile hands its RenameDone on)
                    node, request = self._addressee(node, request)
                    if isinstance(request, RenameFinish) and self.left_at.get(node, -1) > epoch:
                        # (evicted since, perhaps back, empty: its heir promoted the file, and renamed it)
                        if hr := self._finish_for(node, request):
                            heirs[node] = hr[0]
                        break
                    if node not in self.members:
                        break  # (one evicted or gone holds nothing any more)
                    yield Sleep(delay)
                    delay = min(2 * delay, REPAIR_MAX_S)
                    try:
                        yield from _lagging(self.call(node, request), node)  # (done: the copy is its repair)
                    except PeerUnavailable:
                        continue
                    except OSError as exc:
                        if exc.errno == errno.EAGAIN and isinstance(request, RenameDrop) and request.heir_of >= 0:
                            continue  # (the heir is promoting the copy: once done, its drop unlinks the file)
                    break
        finally:
            if self.renames.get(d) is flight:
                del self.renames[d]

    def _source_ends(self, pm1: int, end: RenameSourceEnd) -> list[tuple[int, Request]]:
        """Where a committed rename's end goes: the node holding D1 (whatever the view says now),
        and D1's manager in this view where that is another node (this one included): a view
        change while D1 was in doubt moved its management, and the new manager may have merged
        D1's VD while the old name was still in the local trees (``on_rename_source_end``; found
        by the dynamics property: /a renamed to /b/d as a leave moved /'s management stayed
        listed in /, ENOENT for good).  A step of the rest, so it lands after every finish."""
        m = self.manager_of(split(end.old)[0])
        return [(pm1, end)] if m == pm1 else [(pm1, end), (m, end)]

    def _addressee(self, node: int, request: Request) -> tuple[int, Request]:
        """Where a post-commit step goes now: a ``RenameDone`` for a manager
        that left the view goes to the name's manager in this node's view
        (the old one handed off the entry naming the replaced file's home;
        skipped, the name stayed ENOENT for good: found by the dynamics
        property, a rename across directories during a leave of the
        manager of both names)."""
        if isinstance(request, RenameDone) and node not in self.members:
            return self.manager_of(request.new), replace(request, epoch=self.epoch)
        if isinstance(request, RenameSourceEnd) and request.commit and node not in self.members:
            return self.manager_of(split(request.old)[0]), request  # (see ``on_rename_source_end``)
        return node, request

    def _heir(self, node: int) -> int | None:
        """The node that promotes ``node``'s files if it is evicted (with
        ``replicas: 2``: ``Replication``); None without copies."""
        return None

    def _finish_for(self, node: int, finish: RenameFinish) -> tuple[int, Request] | None:
        """Where a committed ``finish`` that home ``node`` did not answer goes first: with copies, to
        ``node``'s heir, which renames the copy it holds (``Replication.on_rename_copy``); None without."""
        return None

    # ------------------------------------------------------------------ PM2: across directories
    def _hold(self, d: str, flight: RenameFlight) -> None:
        """Take directory ``d`` for a rename coordinated here (EAGAIN if one is in flight in it)."""
        if d in self.renames or d in self.removing:
            raise fs_error(errno.EAGAIN, d, "another rename in this directory (or its rmdir) is in flight; try again")
        if self.overlay and self.manager_of(d) != self.id:  # (lent away while this rename borrowed: ``delegation``)
            raise fs_error(errno.EAGAIN, d, "this directory's management moved; try again")
        self.renames[d] = flight

    def _prepared(self, undo: list[tuple[int, Request]], node: int, request: Request, rollback: Request | None) -> Gen:
        """One prepare step: a refusal holds nothing there; a step without an
        answer is undone too (its reply may be what was lost)."""
        if rollback is not None:
            undo.append((node, rollback))
        try:
            return (yield from self.call(node, request))
        except Exception as exc:
            if rollback is not None and not isinstance(exc, PeerUnavailable):
                undo.pop()
            raise

    def _cross(self, old: str, new: str) -> Gen:
        """A rename across directories, coordinated here, at the target
        directory's manager (see the module docstring).  The two directories
        are held in path order, so two renames crossing in opposite
        directions cannot keep refusing each other."""
        (d1, _), (d2, new_name) = split(old), split(new)
        flight = RenameFlight(new_name, new_name)
        undo: list[tuple[int, Request]] = []
        borrowed = False
        try:
            if d2 < d1:
                self._hold(d2, flight)
            if self.config.rename == "redistribute" and (self.manager_of(d1) != self.id or d1 in self.borrowed):
                yield from self.borrow(d1)  # (``delegation.py``: D1's table is managed here till ``release``)
                borrowed = True
            pm1 = self.manager_of(d1)
            h_a = yield from self._prepared(undo, pm1, RenameSource(old, new), RenameSourceEnd(old, new, False))
            if d2 > d1:
                self._hold(d2, flight)
            home = yield from self._cross_held(d2, old, new, pm1, h_a, flight, undo)
        except Exception:  # not GeneratorExit: an abandoned generator must not yield its rollback
            yield from self._tell(d2, flight, undo[::-1])
            if borrowed:
                yield from self.release(d1)
            raise
        finally:
            if self.renames.get(d2) is flight and not flight.telling:  # (else ``_tell_later`` ends the flight)
                del self.renames[d2]
        if borrowed:
            yield from self.release(d1)
        return home

    def _cross_held(
        self, d2: str, old: str, new: str, pm1: int, h_a: int, flight: RenameFlight, undo: list[tuple[int, Request]]
    ) -> Gen:
        vd, _ = yield from self.ensure_vd(d2, ask_all=True)  # ENOENT, ENOTDIR: the target's directory
        dst = vd.entries.get(flight.new)
        if dst is None and vd.unreachable >= 0:
            raise PeerUnavailable(vd.unreachable, f"may hold {new} and did not answer its dirmerge")
        if h_a < 0:  # a directory (``on_rename_source``)
            return (yield from self._dir_moved(d2, old, new, dst, flight, undo, pm1))
        if dst is not None and dst.is_dir:
            raise fs_error(errno.EISDIR, new)
        h_b = None if dst is None or dst.home == h_a else dst.home
        m_new = self.manager_of(new)
        yield from self._prepared(undo, m_new, RenameCheck(new, -1 if dst is None else dst.home), RenameUncheck(new))
        yield from self._prepared(undo, self.manager_of(old), Forget(old), None)  # (soft: re-asked of PM1)
        if (yield from self._prepared(undo, h_a, RenamePrepare(old, new), RenameFinish(old, new, False))) is True:
            yield from self._tell(d2, flight, undo[::-1])  # two names of one file: rename(2) does nothing
            del undo[:]
            return h_a
        if h_b is not None:
            yield from self._prepared(undo, h_b, RenameGate(new), RenameDrop(new, False))
        # The decision, logged at the heir before anyone can see it (``replicas: 2``): if this
        # node leaves the view before its last step, the heir finishes the rename (``_terminate``).
        heir = self._heir(self.id)
        log = RenameLog(old, new, h_a, -1 if h_b is None else h_b, pm1, m_new, True)
        if heir is not None:
            yield from self._prepared(undo, heir, log, replace(log, commit=False))

        # The commit point, the coordinator's decision, in its memory (``flight.home``)
        # and its heir's log: D2's VD names the file from here on.
        flight.home = h_a
        self._vd_update(d2, ("add", flight.new, DTEntry(False, h_a)))
        single = self._single(old, pm1)
        if single:  # (one manager, both tables: D1 changes at the same instant; its merges too)
            self.renames[split(old)[0]].home = h_a
            self._vd_update(split(old)[0], ("del", split(old)[1], h_a))
        done: list[tuple[int, Request]] = [
            *self._source_ends(pm1, RenameSourceEnd(old, new, True, h_a)),
            (m_new, RenameDone(old, new, h_a, self.epoch)),
        ]
        if h_b is not None:
            done.append((h_b, RenameDrop(new, True)))
        if single and self.manager_of(old) != m_new:
            # old's manager may have cached old -> H_a between its Forget and the commit
            # (D1 is not in doubt here): forget it again, as within a directory
            done.append((self.manager_of(old), Forget(old, home=h_a)))
        if heir is not None:
            done.append((heir, replace(log, commit=False)))  # (last: every step before it done)
        try:
            lag = yield from _lagging(self.call(h_a, RenameFinish(old, new, True)), h_a)
        except PeerUnavailable:
            lag = None  # (as within a directory: renamed or not, the finish is retried first)
            done.insert(0, (h_a, RenameFinish(old, new, True)))
        except Exception:
            flight.home = None  # the local rename failed: restore the VDs and undo the rest
            self._vd_update(d2, ("del", flight.new))
            if dst is not None:
                self._vd_update(d2, ("add", flight.new, dst))
            if single:
                self.renames[split(old)[0]].home = None
                self._vd_update(split(old)[0], ("add", split(old)[1], DTEntry(False, h_a)))
            rest = [u for u in undo if u[0] != h_a or not isinstance(u[1], RenameFinish)]
            del undo[:]  # (``_cross`` has nothing left to roll back)
            yield from self._tell(d2, flight, rest[::-1])
            raise
        del undo[:]  # (committed: nothing left to roll back)
        pending, lag_done = yield from self._tell(d2, flight, done)
        if pending and isinstance(pending[0][1], RenameFinish):
            raise PeerUnavailable(h_a, f"the rename of {old} to {new} is committed, its home has not answered yet")
        if lag or lag_done:
            raise lag or lag_done
        return h_a

    def _single(self, old: str, pm1: int) -> bool:
        """Whether this coordinator manages ``old``'s directory too, its hold
        taken without doubt (``rename: redistribute``): then the commit point
        changes both tables at once."""
        f = self.renames.get(split(old)[0])
        return pm1 == self.id and f is not None and not f.doubt and f.by == self.id

    # ------------------------------------------------------------------ the coordinator: a directory
    def _dir_moved(
        self, d2: str, old: str, new: str, dst: DTEntry | None, flight: RenameFlight,
        undo: list[tuple[int, Request]], pm1: int | None,
    ) -> Gen:  # fmt: skip
        """A rename of the directory ``old``, coordinated here, at the manager
        of ``new``'s directory ``d2``, which this node holds (and ``old``'s,
        in doubt at ``pm1``, when the two differ): see the module docstring.
        Phase 1 freezes both subtrees at every member, in id order; the
        commit point is ``d2``'s VD naming ``new`` a directory; phase 2 has
        every member rename its own part in its local tree.  Returns -1
        (no home: a directory)."""
        if self.config.rename == "local":
            raise fs_error(errno.EXDEV, old, "rename: local renames no directory; copy it instead")
        if under(new, old):
            raise fs_error(errno.EINVAL, new, "a directory cannot move into its own subtree")
        if dst is not None and not dst.is_dir:
            raise fs_error(errno.ENOTDIR, new)
        epoch, members = self.epoch, sorted(self.members)
        for m in members:
            yield from self._prepared(undo, m, DirRenamePrepare(old, new), DirRenameFinish(old, new, False))
        if self.epoch != epoch:  # a joiner was not frozen, a leaver's part not asked
            raise fs_error(errno.EAGAIN, old, "the view changed during the rename; try again")

        # The commit point: ``d2``'s VD names ``new`` a directory from here on.
        flight.home, flight.is_dir = -1, True
        if pm1 is None:
            self._vd_update(d2, ("del", split(old)[1]))
        self._vd_update(d2, ("add", flight.new, DIR_ENTRY))
        done: list[tuple[int, Request]] = [(m, DirRenameFinish(old, new, True)) for m in members]
        if pm1 is not None:
            done += self._source_ends(pm1, RenameSourceEnd(old, new, True))  # (last: ``old`` in doubt till all moved)
        del undo[:]  # (committed: nothing left to roll back)
        yield from self._tell(d2, flight, done)
        return -1

    # ------------------------------------------------------------------ every member: a directory's part
    @handles(DirRenamePrepare)
    def on_dir_rename_prepare(self, src: int, req: DirRenamePrepare) -> Gen:
        old, new = req.old, req.new
        if self.config.rename == "local" or ROOT in (old, new) or under(new, old):  # (a peer is as untrusted)
            raise fs_error(errno.EINVAL, new, "not a rename of a directory")
        for o, n in self.dir_freezes:
            if any(under(a, b) or under(b, a) for a in (o, n) for b in (old, new)):
                raise fs_error(errno.EAGAIN, old, "a rename of a directory near this one is in flight; try again")
        near = lambda p: under(p, old) or under(p, new)  # noqa: E731
        if any(n and under(p, old) for p, n in self.opens.items()):
            raise fs_error(errno.EBUSY, old, "a file under it is open: an open file pins its name")
        busy = self.dir_busy(near)
        if busy:
            raise fs_error(errno.EAGAIN, busy[0], "a create, removal, rename or migration here is in flight; try again")
        self.dir_freezes[(old, new)] = src
        self.dir_released.pop((old, new), None)
        try:
            try:
                is_dir, _ = yield Local("stat", new)
            except FileNotFoundError:
                pass
            else:
                if not is_dir:
                    raise fs_error(errno.ENOTDIR, new)
                if (yield Local("listdir", new)):
                    raise fs_error(errno.ENOTEMPTY, new)
            yield from self._dir_summarised(old, new)
            return None
        except BaseException:
            self.dir_freezes.pop((old, new), None)
            raise

    def _dir_summarised(self, old: str, new: str) -> Gen:
        """A holder of ``old``, at the prepare: the managers of the
        directories it will hold under ``new`` (and of the parents its finish
        will make) learn it now, before the commit, so that a dirmerge of one
        after the commit asks this node, frozen until its finish (EAGAIN),
        rather than missing its part (found by the dynamics property: a
        summary sent at the finish and lost left ``new``'s VD without the
        holder's files).  Before the commit they are Bloom false positives."""
        try:
            if not (yield Local("stat", old))[0]:
                return
        except FileNotFoundError:
            return
        paths = []
        for a in [*ancestors(new)[1:], new]:
            try:
                yield Local("stat", a)
            except FileNotFoundError:
                paths.append(a)
            except OSError:
                pass  # a file there: the finish's mkdir fails, and so does its rename
        paths += [new + d[len(old) :] for d in (yield Local("list_dirs", old)) if d != old]
        for p in paths:
            yield from self.summary_add(p, new_dir=False, sure=True)

    def dir_busy(self, near: Callable[[str], bool]) -> list[str]:
        """The names ``near`` a directory rename (under either of its paths)
        that something in flight here holds: a rename's gate or mark, a
        rename or rmdir of a directory, a create's hold, a dirmerge.  The
        prepare refuses while there is one (EAGAIN); a role with holds of
        its own (migration, replication) adds them."""
        return (
            [p for p in self.gates if near(p)] + [p for p in self.rename_marks if near(p)]
            + [d for d in self.renames if near(d)] + [d for d in self.removing if near(d)]
            + [d for d, held in self.holds.items() if held and near(d)]
            + [d for d in self._merging if near(d)]
        )  # fmt: skip

    @handles(DirRenameFinish)
    def on_dir_rename_finish(self, src: int, req: DirRenameFinish) -> Gen:
        key = (req.old, req.new)
        if key not in self.dir_freezes and self.dir_released.pop(key, None) != src:
            return  # done already (a retry after a lost reply), or never prepared here
        try:
            if req.commit:
                yield from self._dir_move_here(req.old, req.new)
        finally:
            self.dir_freezes.pop(key, None)

    def _dir_move_here(self, old: str, new: str) -> Gen:
        """This node's part of a committed directory rename: its local part
        of ``old`` (if any) renamed in place, no file data moved; an empty
        local ``new`` it replaces (or, holding no ``old``, removed); what
        this node cached or noted under either name forgotten, and the
        directories now under ``new`` summarised to their managers."""
        try:
            holds_old = (yield Local("stat", old))[0]
        except FileNotFoundError:
            holds_old = False
        if holds_old:  # (the directories it makes and moves were summarised at the prepare)
            self.implicit_dirs.update((yield Local("mkdir", parent(new))))
            yield Local("rename_dir", old, (new,))
        else:
            try:
                yield Local("rmdir", new)
            except OSError:
                pass  # not held here (an empty target's other holders remove theirs)
        cut = len(old)
        for p in [p for p in self.implicit_dirs if under(p, old) or under(p, new)]:
            self.implicit_dirs.discard(p)
            if holds_old and under(p, old):
                self.implicit_dirs.add(new + p[cut:])
        for table in (self.dt, self.vds, self.moved):
            for p in [p for p in table.keys() if under(p, old) or under(p, new)]:
                table.pop(p)
        for p in [p for p in self.collisions if under(p, old) or under(p, new)]:
            del self.collisions[p]
        self.dt_epoch += 1
        for d in {parent(old), parent(new)}:
            if d in self.implicit_dirs:
                yield from self._prune(d)

    # ------------------------------------------------------------------ PM1: the source's directory
    @handles(RenameSource)
    def on_rename_source(self, src: int, req: RenameSource) -> Gen:
        (d1, name), d2 = split(req.old), split(req.new)[0]
        if d1 == d2 or self.config.rename == "local":  # (a peer's request is as untrusted as a client's)
            raise fs_error(errno.EXDEV, req.new, "not a rename across directories")
        if d1 in self.renames or d1 in self.removing:
            raise fs_error(errno.EAGAIN, d1, "another rename in this directory (or its rmdir) is in flight; try again")
        # With ``redistribute`` the coordinator manages D1 too (``_single``): one
        # node, both tables, so no doubt: D1 changes at the commit point as D2.
        single = src == self.id and self.config.rename == "redistribute"
        flight = self.renames[d1] = RenameFlight(name, req.new, doubt=not single, by=src, moved_out=True)
        self.sources_released.pop(d1, None)
        try:
            vd, _ = yield from self.ensure_vd(d1, ask_all=True)
            src_entry = vd.entries.get(name)
            if src_entry is None and vd.unreachable >= 0:
                raise PeerUnavailable(vd.unreachable, f"may hold {req.old} and did not answer its dirmerge")
            if src_entry is None:
                raise fs_error(errno.ENOENT, req.old)
            if src_entry.is_dir:
                flight.doubt = True  # (a directory is renamed by 2PC over every member, its source in doubt)
                return -1  # a directory: the coordinator freezes its subtree (``_dir_moved``)
            assert src_entry.home is not None
            return src_entry.home
        except BaseException:
            if self.renames.get(d1) is flight:
                del self.renames[d1]
            raise

    @handles(RenameSourceEnd)
    def on_rename_source_end(self, src: int, req: RenameSourceEnd) -> None:
        d1, name = split(req.old)
        f = self.renames.get(d1)
        if f is None and self.sources_released.get(d1) == (name, req.new, src):
            # Released as its coordinator left (``renames_orphaned``): a
            # leaver runs its rename on, and the merge made since may list
            # the old name still (found by the dynamics property: /a/f2 was
            # renamed across directories as /a's manager learnt of the
            # coordinator's leave, and stayed listed, ENOENT for good).
            del self.sources_released[d1]
            if req.commit:
                self._vd_update(d1, ("del", name, req.home))
            return
        if f is None and req.commit and self.manager_of(d1) == self.id:
            # The end of a committed rename whose source directory this node manages but never
            # held: its management moved in a view change while the rename was in doubt
            # (``_source_ends``; ``_addressee`` for a holder that left).  Every participant finished
            # before this end was sent: the local trees are the truth, and its VD is forgotten, to be
            # merged again from them (a merge in flight drops the old name); not while a rename in
            # d1 is in flight here (its commit point is this VD).
            if d1 not in self.renames:
                self.vds.pop(d1)
                self._vd_update(d1, ("del", name, req.home))
            return
        if f is None or src not in (f.by, self._heir(f.by)) or (f.old, f.new) != (name, req.new):
            # ended already (a retry after a lost reply), or never held here; the coordinator's
            # heir ends it too (``_terminate``), even before this node saw the coordinator leave
            return
        if req.commit and f.doubt:  # (else D1 changed at the commit point already: ``_single``)
            self._vd_update(d1, ("del", name, req.home))
        del self.renames[d1]

    # ------------------------------------------------------------------ a coordinator that left
    def renames_orphaned(self, gone: set[int]) -> Gen:
        """The view no longer lists ``gone``: what renames they coordinated
        hold here is released (see the module docstring: a coordinator that
        crashed between the phases).  The local trees are the truth then: a
        held directory's VD and a marked name's entry are dropped, to be
        merged and resolved again.  Not the holds of this node's own renames:
        it runs them still (it is the leaver, installing the view without
        itself; found by the dynamics property: a leaving directory manager
        released the gates of its own rename, and its RenameFinish then
        found nothing to do: the rename was acknowledged and not done).

        With ``replicas: 2`` a file rename's holds are not released at once:
        they pass to the coordinator's heir, which is asked whether it logged
        the rename's commit (``_ask_outcome``); if it did, it finishes the
        rename (``_terminate``) and its steps release them, so no observer
        sees a committed rename undone or half done in between (found by
        ``tests.rename_histories_random``: a coordinator crashed after H_a
        renamed and before H_b dropped the replaced target, which then kept
        the name: the moved file under neither name)."""
        for g in gone:
            self.left_at[g] = self.epoch
        for by, log in list(self.rename_log.values()):
            if by in gone and by != self.id:
                yield Spawn(self._terminate(by, log))
        heirs = {g: h for g in gone if g != self.id and (h := self._heir(g)) is not None and h not in gone}
        asks: list[tuple[str, str, int]] = []  # (kind, path, the departed coordinator)
        for d, f in list(self.renames.items()):
            if f.doubt and f.by in gone and f.by != self.id:
                if f.by in heirs and not f.is_dir:
                    asks.append(("source", d, f.by))
                    f.by = heirs[f.by]
                else:
                    self._release_source(d, f.by)
        for key, by in list(self.dir_freezes.items()):
            if by in gone and by != self.id:  # (a directory rename's freeze, as a gate)
                del self.dir_freezes[key]
                self.dir_released[key] = by
        for (kind, p), by in list(self.rename_by.items()):
            if by not in gone or by == self.id:
                continue
            if by in heirs:
                self.rename_by[(kind, p)] = heirs[by]
                asks.append((kind, p, by))
            else:
                self._release_hold(kind, p, by)
        for kind, p, by in asks:
            yield Spawn(self._ask_outcome(kind, p, by, heirs[by]))

    def _release_source(self, d: str, by: int) -> None:
        """End the source directory's hold of a rename whose coordinator ``by`` left (its VD merged again)."""
        f = self.renames.pop(d)
        self.vds.pop(d)
        self.sources_released[d] = (f.old, f.new, by)

    def _release_hold(self, kind: str, p: str, by: int) -> None:
        """Open a gate, or drop a mark (and its DT entry), of a rename whose coordinator ``by`` left."""
        if kind == "gate":
            self._ungate(p)
            self.rename_released[p] = by
        elif p in self.rename_marks:
            self.rename_by.pop((kind, p), None)
            self.rename_marks.discard(p)
            self.dt.pop(p)
            self.dt_epoch += 1

    def _held_for(self, kind: str, p: str, heir: int) -> bool:
        """Whether the hold ``(kind, p)`` is still the heir's to end (no step of its released it)."""
        if kind == "source":
            f = self.renames.get(p)
            return f is not None and f.doubt and f.by == heir
        return self.rename_by.get((kind, p)) == heir

    def _ask_outcome(self, kind: str, p: str, by: int, heir: int) -> Gen:
        """Ask ``heir`` whether the departed coordinator ``by`` committed the
        rename that holds ``p`` here; released at once if not (it never
        committed: aborted), kept for the heir's steps if so.  Asked again,
        with back-off, while the heir has not yet evicted ``by`` (EAGAIN) or
        does not answer; if the heir leaves the view too, its own leave hands
        the hold on (``renames_orphaned``)."""
        delay, epoch = REPAIR_FIRST_S, self.epoch
        while self._held_for(kind, p, heir) and heir in self.members:
            path = join(p, self.renames[p].old) if kind == "source" else p
            try:
                logged = yield from self.call(heir, RenameOutcome(path, by, epoch))
            except (PeerUnavailable, OSError):
                logged = True  # (asked again)
            if not logged and self._held_for(kind, p, heir):
                if kind == "source":
                    self._release_source(p, by)
                else:
                    self._release_hold(kind, p, by)
                return
            # Logged: the heir's steps end the hold; asked again until they did (a step
            # that came before this node took the hold over ends it then, ``on_rename_source_end``;
            # once the heir's log is gone, the answer is False and the local trees are the truth).
            yield Sleep(delay)
            delay = min(2 * delay, REPAIR_MAX_S)

    # ------------------------------------------------------------------ the coordinator's heir
    @handles(RenameLog)
    def on_rename_log(self, src: int, req: RenameLog) -> None:
        key = (req.old, req.new)
        if not req.commit:
            if self.rename_log.get(key, (-1,))[0] == src:
                del self.rename_log[key]
            return
        # (a coordinator this node has evicted, or that is not its predecessor, is refused: its
        # rename is aborted; the log is bounded, as every table a peer's request fills)
        if src == self.id or src not in self.members or self._heir(src) != self.id:
            raise fs_error(errno.EAGAIN, req.new, "this node is not the coordinator's heir in its view; try again")
        if key not in self.rename_log and len(self.rename_log) >= RENAME_LOG_MAX:
            raise fs_error(errno.EAGAIN, req.new, "too many renames logged here; try again")
        self.rename_log[key] = (src, req)

    @handles(RenameOutcome)
    def on_rename_outcome(self, src: int, req: RenameOutcome) -> bool:
        if self.epoch < req.epoch:
            raise fs_error(errno.EAGAIN, req.path, "the view without its coordinator is not installed here yet")
        return any(by == req.coordinator and req.path in (log.old, log.new) for by, log in self.rename_log.values())

    def _terminate(self, by: int, log: RenameLog) -> Gen:
        """Finish the rename ``by`` logged here and left the view before its
        last step (a cooperative termination): the coordinator's own steps
        after its commit point, each retried until it gets through or its
        participant is no member (a step done already is a no-op); the log
        entry stays until then, so participants asking meanwhile keep their
        holds for these steps.  A target whose home left is dropped at that
        home's heir, as by the coordinator (``RenameDrop.heir_of``)."""
        old, new, home = log.old, log.new, log.home
        finish: tuple[int, Request] | None = (home, RenameFinish(old, new, True))
        if home not in self.members:  # (the coordinator itself, often: its heir promoted, or will, its files)
            finish = self._finish_for(home, RenameFinish(old, new, True))
            home = -1 if finish is None else finish[0]
        steps: list[tuple[int, Request]] = [
            *([] if finish is None else [finish]),
            *self._source_ends(log.pm1, RenameSourceEnd(old, new, True, home)),
            (log.m_new, RenameDone(old, new, home, self.epoch)),
        ]
        if log.target >= 0:
            heir = self._heir(log.target) if log.target not in self.members else None
            if heir is not None:
                steps.append((heir, RenameDrop(new, True, heir_of=log.target)))
            steps.append((log.target, RenameDrop(new, True)))
        delay, busy = REPAIR_FIRST_S, BUSY_FIRST_S
        try:
            for node, request in steps:
                first = finish is not None and request is finish[1]
                while True:
                    node, request = self._addressee(node, request)
                    if node not in self.members:
                        break
                    try:
                        yield from _lagging(self.call(node, request), node)
                    except PeerUnavailable:
                        pass
                    except OSError as exc:
                        if exc.errno == errno.EAGAIN and first:
                            # The finish at a heir whose copy of the departed home's file is being
                            # promoted (``RenameCopy``): renamed once promoted, which the view change
                            # does at once, so asked again as a busy requester asks, before a restart
                            # of the home (a member again) leaves the heir nothing to rename.  Given up,
                            # the target was dropped and the moved file promoted under its old name:
                            # the destination held neither (found by ``tests.rename_histories_random``).
                            yield Sleep(busy)
                            busy = min(2 * busy, BUSY_MAX_S)
                            continue
                        if not (exc.errno == errno.EAGAIN and isinstance(request, RenameDrop)):
                            break
                    else:
                        break
                    yield Sleep(delay)
                    delay = min(2 * delay, REPAIR_MAX_S)
        finally:
            if self.rename_log.get((old, new)) == (by, log):
                del self.rename_log[(old, new)]

    # ------------------------------------------------------------------ M_b: the target's manager
    @handles(RenameCheck)
    def on_rename_check(self, src: int, req: RenameCheck) -> None:
        path = req.path
        self._unmarked(path)
        e = self.dt.peek(path)
        if e is not None and (e.is_dir or e.home != req.home):
            raise fs_error(errno.EAGAIN, path, "a create or removal of this name is in flight; try again")
        self.rename_marks.add(path)
        self.rename_by[("mark", path)] = src
        self.dt_epoch += 1

    @handles(RenameUncheck)
    def on_rename_uncheck(self, src: int, req: RenameUncheck) -> None:
        self.rename_marks.discard(req.path)
        self.rename_by.pop(("mark", req.path), None)

    @handles(RenameDone)
    def on_rename_done(self, src: int, req: RenameDone) -> Gen:
        if req.epoch > self.epoch and src != self.id:
            # Sent (or forwarded, below) under a view this node has not
            # installed yet: take it first, or this node, not yet the name's
            # manager, would keep the entry only as a hint, drop it when the
            # view arrives, and then take the old manager's hand-off, which
            # names the replaced file's home (found by the dynamics property:
            # a rename during a leave left /a/f1 pointing at the old target's
            # home, ENOENT for good).
            try:
                yield from self.fetch_view(src)
            except OSError:
                pass  # (its next view change or request brings it)
        self.rename_marks.discard(req.new)
        self.rename_by.pop(("mark", req.new), None)
        self.dt_epoch += 1
        if self.manager_of(req.old) == self.id:
            self.dt.pop(req.old)
        m = self.manager_of(req.new)
        if m != self.id:
            # A view change (a join, a leave) moved ``new``'s entry to another
            # manager after the mark: the entry it was handed off names the
            # replaced file's home; the new one goes there too (found by the
            # dynamics property: a rename over a file racing a join left the
            # name pointing at the old target's home, ENOENT for good).  Even
            # back to its sender: a coordinator that became the manager in the
            # view change sent it here by the manager it had looked up before
            # (found by the dynamics property: /a/f1 renamed over during a
            # join, its new manager the coordinator, kept the old home).  No
            # ping-pong: the one forwarded carries this node's epoch, and a
            # node behind it takes that view first (above), so the two agree.
            self.dt.pop(req.new)
            try:
                yield from self.call(m, replace(req, epoch=self.epoch))
            except OSError:
                pass  # soft state: its next miss asks the parent's VD, which PM committed
            return
        if req.home in self.members:
            self.dt.put(req.new, DTEntry(False, req.home))
        else:
            self._renamed_home_left(req.new, req.home)

    def _renamed_home_left(self, path: str, home: int) -> None:
        """A rename's end names ``home``, which left while the rename ran:
        no entry naming it; the next lookup asks the parent's VD, which the
        promotion at its successor told (``Replication`` points the entry at
        that successor while the view change is unsettled)."""
        self.dt.pop(path)

    # ------------------------------------------------------------------ the homes
    def _gate(self, *paths: str, by: int = -1, target: str | None = None) -> None:
        """Gate ``paths``; EBUSY if one of them other than ``target`` is open
        (an open target is replaced all the same: ``_drop_target``)."""
        for p in paths:
            if p in self.gates:
                raise fs_error(errno.EAGAIN, p, "a rename of this name is in flight; try again")
        for p in paths:
            if p != target and self.opens.get(p):
                raise fs_error(errno.EBUSY, p, "the file is open: an open file pins its name")
        self.gates.update(paths)
        self.rename_gated.update(paths)
        for p in paths:
            self.rename_released.pop(p, None)
        for p in paths:
            self.rename_by[("gate", p)] = by

    def _ungate(self, *paths: str) -> None:
        """Open the gates a rename set on ``paths`` (none it did not set: a
        rollback of a prepare that never ran here, its request lost, leaves
        a migration's freeze alone)."""
        for p in paths:
            if p in self.rename_gated:
                self.rename_gated.discard(p)
                self.gates.discard(p)
                self.rename_by.pop(("gate", p), None)

    @handles(RenamePrepare)
    def on_rename_prepare(self, src: int, req: RenamePrepare) -> Gen:
        self._gate(req.old, req.new, by=src, target=req.new)
        try:
            a = yield Local("getattr", req.old)  # (is_dir, mode, nlink, ...): as cheap as a stat
            if a[0]:
                raise fs_error(errno.EISDIR, req.old)
            try:
                is_dir, _ = yield Local("stat", req.new)
            except FileNotFoundError:
                return None
            if is_dir:
                raise fs_error(errno.EISDIR, req.new)
            if a[2] > 1 and (yield Local("getattr", req.new))[9] == a[9]:
                return True  # hard links of one file: nothing to rename (the gates go with the rollback)
            return None
        except BaseException:
            self._ungate(req.old, req.new)
            raise

    @handles(RenameFinish)
    def on_rename_finish(self, src: int, req: RenameFinish) -> Gen:
        if req.commit and req.old not in self.rename_gated and self.rename_released.pop(req.old, None) != src:
            # Done already (PM asks again when a reply was lost), or never
            # prepared here.  Gates released because their coordinator left
            # the view do not stop its commit: a graceful leaver runs its
            # renames to the end (found by the dynamics property: a leaving
            # directory manager's rename was acknowledged and not done).
            return
        try:
            if req.commit:
                d_old, d_new = parent(req.old), parent(req.new)
                if self.opens.get(req.new) and req.old != req.new:
                    yield from self.orphan(req.new)  # replaced while open: its descriptors go on (``home.py``)
                if d_old == d_new:
                    yield Local("rename", req.old, (req.new,))
                else:
                    yield from self._move_here(req.old, req.new)
                self.moved.pop(req.new)
                self.dt.pop(req.old)
                self.dt.put(req.new, DTEntry(False, self.id))
                if d_old != d_new and d_old in self.implicit_dirs:
                    yield from self._prune(d_old)
        finally:
            self._ungate(req.old, req.new)

    def _move_here(self, old: str, new: str) -> Gen:
        """The local rename across directories: the new parent is made here
        if missing, as a create makes it (implicit, summarised, so that a
        dirmerge of it asks this node), and pruned again if the rename fails."""
        made = yield Local("mkdir", parent(new))
        self.implicit_dirs.update(made)
        for d in made:
            yield from self.summary_add(d, new_dir=False)
        try:
            yield Local("rename", old, (new,))
        except OSError:
            if made:
                yield from self._prune(parent(new), changed=False)  # a failed rename moves no time
            raise

    @handles(RenameGate)
    def on_rename_gate(self, src: int, req: RenameGate) -> Gen:
        self._gate(req.path, by=src, target=req.path)
        try:
            try:
                is_dir, _ = yield Local("stat", req.path)
            except FileNotFoundError:
                # Removed here, its updates still travelling to the managers.
                raise fs_error(errno.EAGAIN, req.path, "the target is being removed; try again") from None
            if is_dir:
                raise fs_error(errno.EISDIR, req.path)
        except BaseException:
            self._ungate(req.path)
            raise

    @handles(RenameDrop)
    def on_rename_drop(self, src: int, req: RenameDrop) -> Gen:
        path = req.path
        if req.heir_of >= 0:  # (a peer is as untrusted: only ``Replication`` has heirs)
            raise fs_error(errno.EINVAL, path, "no copies here to drop for another home")
        try:
            if req.commit:
                self.moved.put(path, True)
                e = self.dt.peek(path)
                if e is not None and e.home == self.id:
                    self.dt.pop(path)
                try:
                    if self.opens.get(path):
                        yield from self.orphan(path)  # replaced while open: its descriptors go on (``home.py``)
                    else:
                        yield Local("unlink", path)
                except OSError:
                    pass  # changed outside the federation meanwhile: nothing of ours left to remove
                d = split(path)[0]
                if d in self.implicit_dirs:
                    yield from self._prune(d)
        finally:
            self._ungate(path)


__all__ = [
    "Rename", "RenameCheck", "RenameDone", "RenameDrop", "RenameFinish", "RenameGate", "RenameLog", "RenameOutcome",
    "RenamePrepare", "RenameSource", "RenameSourceEnd", "RenameUncheck", "Renaming",
]  # fmt: skip
