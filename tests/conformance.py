"""The conformance suite's scenarios and the runners for every world.

A scenario is an initial placement of local files (what each node's directory
holds before the federation starts) and a script of operations, each issued at
a given node.  A runner plays it on one runtime and returns, per operation,
the outcome (value, or the errno it failed with) and the protocol messages it
caused, plus every node's local tree at the end.  The suite asserts that every
runtime gives the same: that is the promise "the same protocol code in both
worlds", checked.

Messages are compared as the sequence of requests (type, source, destination)
in causal order and the number of replies: replies to a multicast arrive in
whatever order the peers answer, so their order is not part of the protocol.
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from fednode.cluster import AgentGroup, ProcessCluster, local_spec
from fednode.config import Cluster, write_cluster
from fedsim.direct import DirectCluster
from fedsim.memfs import MemFS
from fedsim.network import preset
from fedsim.protocol.attrs import KEEP, ROOT_INO, UTIME_NOW, UTIME_OMIT
from fedsim.protocol.config import FederationSpec, ProtocolConfig
from fedsim.protocol.routing import Router
from fedsim.runtime import OpTrace, SimCluster

FD = "$fd"  # in an op's args: the descriptor the last open at that node returned

Op = tuple[int, str, tuple[Any, ...]]


@dataclass
class Scenario:
    name: str
    nodes: int
    files: dict[int, list[tuple[str, bytes]]] = field(default_factory=dict)
    dirs: dict[int, list[str]] = field(default_factory=dict)
    ops: list[Op] = field(default_factory=list)
    placement: str = "with_manager"
    protocol: dict[str, Any] = field(default_factory=dict)  # overrides of PROTOCOL
    #: groups of op indices (getattr calls) whose inode numbers must be equal in every world
    same_ino: list[tuple[int, ...]] = field(default_factory=list)
    #: symlinks in the local trees before the start: node -> [(path, target)] (issue 22)
    links: dict[int, list[tuple[str, str]]] = field(default_factory=dict)
    #: sets user extended attributes in the local trees (skipped by the agents where those cannot hold them)
    local_xattrs: bool = False
    #: gives entries owners (create/mkdir with uid/gid): getattr results then show uid and gid too,
    #: and the agents must run as root to give them (skipped otherwise)
    owners: bool = False
    #: the design the scenario runs on (``fedsim.protocol.designs``; a config's ``protocol.architecture``)
    architecture: str = "fedfs"
    #: (i, j, how): getattr results i and j of one name, and how the calls between moved its mtime and
    #: ctime: "+" advanced, "=" unchanged (``check_times``: POSIX's rules, checked in every world)
    times: list[tuple[int, int, str]] = field(default_factory=list)
    #: seconds of wall clock before each operation: past a real file system's clock tick (4 ms at 250 Hz),
    #: so that a change after another shows a later time in every world (the simulated ones move anyway)
    pause_s: float = 0.0


# A pseudo-operation: (node, OUTSIDE, (path, data)) writes a file straight
# into that node's local tree, as a user of the local file system would
# (FedFS autonomy), between two federated operations.
OUTSIDE = "outside_create"
# (node, OUTSIDE_LINK, (path, target)): a symlink made the same way (issue 22)
OUTSIDE_LINK = "outside_symlink"
# Membership pseudo-operations (FedFS 3.3): (seed, JOIN, (files, dirs)) starts
# a new node (the next id: sc.nodes, sc.nodes + 1 ...) over a local tree of
# ``files`` [(path, data)] and ``dirs``, which joins through member ``seed``;
# (node, LEAVE, ()) makes a member leave gracefully.  Their result is the new
# view's epoch; their own messages are not compared (a view change's
# hand-offs nest in a multicast, whose order differs between worlds), the
# operations after them are.
JOIN = "join"
LEAVE = "leave"
# Crash pseudo-operations (issue 13, ``fedfs/failure.py``): (node, CRASH, ())
# crashes a member; (node, DETECT, (crashed,)) lets time run until the
# heartbeats have found it out and every live member has installed (and
# settled) the view without it; (seed, RESTART, (crashed,)) restarts it over
# its old local tree through member ``seed``.  DETECT and RESTART give the
# epoch at ``node``/``seed``; their own messages are not compared (timers
# run meanwhile), the operations after them are.
CRASH = "crash"
DETECT = "detect"
RESTART = "restart"
DYNAMIC = (JOIN, LEAVE, CRASH, DETECT, RESTART)
# As an op's node: the node a mount picks (issue 23: ``fedsim.protocol.routing``'s
# ``home`` route, as ``fednode.mount.Entries`` and the FUSE model run it): the
# file's home once a getattr or create_open taught it, else the path's manager;
# a descriptor's call goes to the node of the last routed open.
ROUTED = -1


SCENARIOS = [
    Scenario(
        "union of pre-populated directories",
        3,
        files={0: [("/a/x", b"x on n0")], 1: [("/a/y", b"y on n1"), ("/b/deep/f", b"f")]},
        dirs={2: ["/e"]},
        ops=[
            (2, "readdir", ("/",)),
            (0, "readdir", ("/a",)),
            (2, "stat", ("/a/y",)),
            (1, "open", ("/a/x",)),
            (1, "read", (FD, 0, 100)),
            (1, "close", (FD,)),
            (1, "create", ("/a/z",)),
            (1, "open", ("/a/z",)),
            (1, "write", (FD, 0, b"zzz")),
            (1, "close", (FD,)),
            (0, "open", ("/a/z",)),
            (0, "read", (FD, 1, 10)),
            (0, "close", (FD,)),
            (2, "unlink", ("/a/x",)),
            (0, "mkdir", ("/c",)),
            (1, "create", ("/c/f",)),
            (2, "readdir", ("/c",)),
            (0, "rmdir", ("/a",)),
            (1, "rmdir", ("/e",)),
            (2, "readdir", ("/b/deep",)),
            (0, "readdir", ("/",)),
        ],
    ),
    Scenario(
        "errors a file-system user expects",
        3,
        files={0: [("/d/f", b"data")]},
        dirs={1: ["/d/sub"]},
        ops=[
            (1, "create", ("/d/f",)),
            (2, "stat", ("/d/f/x",)),
            (0, "open", ("/d/sub",)),
            (2, "unlink", ("/d/none",)),
            (1, "rmdir", ("/d",)),
            (0, "rmdir", ("/d/f",)),
            (2, "mkdir", ("/d/sub",)),
            (1, "readdir", ("/nowhere",)),
            (0, "create", ("/nowhere/f",)),
            (2, "stat", ("/../etc/passwd",)),
            (1, "read", (99, 0, 1)),
            (0, "unlink", ("/d/sub",)),
            (0, "rmdir", ("/",)),
        ],
    ),
    Scenario(
        "name collision resolves to the lowest node",
        3,
        files={0: [("/c/f", b"copy on n0")], 2: [("/c/f", b"copy on n2"), ("/c/g", b"g")], 1: [("/c/g/h", b"h")]},
        ops=[
            (1, "readdir", ("/c",)),
            (1, "stat", ("/c/f",)),
            (2, "open", ("/c/f",)),
            (2, "read", (FD, 0, 100)),
            (2, "close", (FD,)),
            (0, "stat", ("/c/g",)),
            (0, "readdir", ("/c/g",)),
        ],
    ),
    Scenario(
        "round-robin homes, remote lookups and stale directory tables",
        4,
        dirs={0: ["/w"], 1: ["/w"], 2: ["/w"], 3: ["/w"]},
        placement="round_robin",
        ops=[
            *[(i % 4, "create", (f"/w/f{i}",)) for i in range(6)],
            *[((i + 1) % 4, "stat", (f"/w/f{i}",)) for i in range(6)],
            (3, "unlink", ("/w/f1",)),
            (2, "stat", ("/w/f1",)),
            (1, "create", ("/w/f1",)),
            (2, "stat", ("/w/f1",)),
            (0, "readdir", ("/w",)),
            (3, "mkdir", ("/w/sub",)),
            (2, "create", ("/w/sub/g",)),
            (1, "unlink", ("/w/sub/g",)),
            (0, "rmdir", ("/w/sub",)),
            (1, "readdir", ("/w",)),
        ],
    ),
    Scenario(
        # /r's manager is node 1; /r/a's node 3, /r/b's node 0, /r/c's node 4 (mod_n over 5 nodes)
        "rename within a directory",
        5,
        files={2: [("/r/a", b"a on n2"), ("/r/g", b"g on n2")], 4: [("/r/b", b"b on n4")], 0: [("/q/z", b"z")]},
        dirs={3: ["/r/sub"]},
        ops=[
            (0, "stat", ("/r/a",)),  # node 0 caches /r/a -> 2
            (1, "stat", ("/r/b",)),  # node 1 caches /r/b -> 4
            (3, "rename", ("/r/a", "/r/b")),  # target on another home: PM 1, M_a 3, M_b 0, H_a 2, H_b 4
            (0, "stat", ("/r/a",)),  # stale entry: ENOENT from the home, then from the manager
            (1, "stat", ("/r/b",)),  # stale entry to the old target's home: ESTALE, asked again
            (1, "open", ("/r/b",)),
            (1, "read", (FD, 0, 100)),  # the moved content
            (1, "close", (FD,)),
            (4, "readdir", ("/r",)),
            (0, "rename", ("/r/b", "/r/c")),  # target absent: M_a 0, M_b 4
            (3, "stat", ("/r/c",)),
            (4, "stat", ("/r/b",)),
            (1, "rename", ("/r/c", "/r/g")),  # target on the source's own home
            (1, "readdir", ("/r",)),
            (0, "rename", ("/r/g", "/q/g")),  # EXDEV: another directory
            (0, "rename", ("/r/g", "/r/sub")),  # EISDIR
            (2, "rename", ("/r/none", "/r/y")),  # ENOENT
            (3, "rename", ("/r/sub", "/r/sub2")),  # EXDEV: a directory
            (4, "rename", ("/r/g", "/r/g")),  # no-op
            (4, "rename", ("/r/nope", "/r/nope")),  # ENOENT
            (2, "open", ("/r/g",)),
            (3, "rename", ("/r/g", "/r/h")),  # EBUSY: open; the target's mark is rolled back
            (2, "close", (FD,)),
            (3, "rename", ("/r/g", "/r/h")),
            (0, "truncate", ("/r/h", 3)),
            (0, "open", ("/r/h",)),
            (0, "read", (FD, 0, 100)),
            (0, "close", (FD,)),
            (0, "truncate", ("/r/sub", 0)),  # EISDIR
            (4, "readdir", ("/r",)),
            (2, "create", ("/r/a",)),  # the old name is free again
            (1, "readdir", ("/r",)),
        ],
        protocol={"rename": "local"},  # (across directories EXDEV, as before 2pc: ``rename_across``)
    ),
]

SCENARIOS.append(
    Scenario(
        "ageing: a miss in an older VD re-merges and finds a file made outside",
        3,
        dirs={0: ["/a"], 2: ["/a"]},
        files={1: [("/a/f", b"f")]},
        # VDs never expire during the script (an hour), but any miss in a
        # cached VD re-merges it (1 us: every world's clock moves at least
        # that between two operations; the in-memory runner ticks it).
        protocol={"vd_max_age_s": 3600.0, "vd_miss_age_s": 1e-6},
        ops=[
            (0, "readdir", ("/a",)),
            (2, OUTSIDE, ("/a/new", b"made outside")),
            (1, "stat", ("/a/new",)),
            (2, "readdir", ("/a",)),
            (1, "stat", ("/a/none",)),
            (0, "mkdir", ("/a/d",)),
            (1, "create", ("/a/d/g",)),
            (2, "readdir", ("/a/d",)),
        ],
    )
)


def _manager_of(path: str, nodes: int) -> int:
    from fedsim.protocol.hashing import make_hashing

    return make_hashing("mod_n", list(range(nodes)), 64).manager_of(path)


_DEEP = "/" + "/".join(f"m{i}" for i in range(20)) + "/leaf"  # deeper than the agent's wire.MAX_DEPTH
SCENARIOS.append(
    Scenario(
        # issue 12: a create the chosen home refuses drops its reservation
        # (a second create reaches the home again, no EEXIST from a leftover
        # reservation); a path under 20 missing ancestors is ENOENT through
        # one probe per ancestor, none nested in another.
        "failure semantics: a refused create leaves no reservation; deep missing paths",
        3,
        dirs={0: ["/k"], 1: ["/k"], 2: ["/k"]},
        ops=[
            (0, "readdir", ("/k",)),  # /k's VD is cached (closed world: it never re-merges)
            (_manager_of("/k/f", 3), OUTSIDE, ("/k/f", b"made outside")),  # on the home create will choose
            (1, "create", ("/k/f",)),  # the home says EEXIST: the reservation is dropped (Forget)
            (0, "create", ("/k/f",)),  # the same again, not EEXIST from the manager's DT
            (2, "stat", (_DEEP,)),
            (0, "mkdir", (_DEEP,)),
            (1, "readdir", (_DEEP,)),
        ],
    )
)

SCENARIOS.append(
    Scenario(
        # issue 14: the remote data-block cache.  /c/f lives on node 0; node 1
        # reads it twice (a BlockRead, then no message at all), a write through
        # node 2 invalidates node 1's blocks before it returns (BlockInvalidate),
        # so node 1's next read fetches again and sees it; the same for a write
        # at the home, a truncate and an unlink.  Blocks of 4 bytes, room for 3
        # (the whole file): a read past the end is answered from the short last
        # block, with no message.
        "remote block cache: hits, write-through, invalidation",
        3,
        files={0: [("/c/f", b"0123456789")]},
        dirs={1: ["/c"], 2: ["/c"]},
        ops=[
            (1, "open", ("/c/f",)),
            (1, "read", (FD, 0, 10)),
            (1, "read", (FD, 2, 5)),
            (1, "read", (FD, 8, 100)),
            (2, "open", ("/c/f",)),
            (2, "write", (FD, 1, b"AB")),
            (1, "read", (FD, 0, 4)),
            (1, "read", (FD, 0, 4)),
            (0, "open", ("/c/f",)),
            (0, "write", (FD, 3, b"Z")),
            (1, "read", (FD, 0, 6)),
            (2, "close", (FD,)),
            (0, "close", (FD,)),
            (2, "truncate", ("/c/f", 2)),
            (1, "read", (FD, 0, 10)),
            (1, "read", (FD, 0, 10)),
            (1, "close", (FD,)),
            (2, "unlink", ("/c/f",)),
            (1, "stat", ("/c/f",)),
        ],
        protocol={"block_cache_blocks": 3, "block_size": 4},
    )
)

SCENARIOS.append(
    Scenario(
        # FedFS 3.2: a file moves in chunks (4 bytes here: several messages), keeps its name and
        # content; a stale DT entry and an open descriptor find it at its new home; a tree moves
        # file by file; bad targets are clear errors.  /m's manager is node 1 (mod_n over 4 nodes).
        "migration of a file and of a tree",
        4,
        files={2: [("/m/f", b"twelve bytes"), ("/m/t/a", b"a on n2")], 3: [("/m/t/u/b", b"b on n3")]},
        dirs={0: ["/m"]},
        protocol={"migration_chunk": 4},
        ops=[
            (0, "stat", ("/m/f",)),  # node 0 manages /m/f: its DT says 2
            (1, "open", ("/m/f",)),  # pinned at node 2; node 1 caches /m/f -> 2
            (2, "migrate", ("/m/f", 3)),
            (0, "stat", ("/m/f",)),  # the manager's DT was switched: straight to node 3
            (1, "read", (FD, 0, 100)),  # stale: ESTALE from node 2, resolved again, the descriptor follows
            (1, "write", (FD, 0, b"TW")),
            (1, "close", (FD,)),
            (2, "readdir", ("/m",)),
            (0, "migrate", ("/m/f", 3)),  # already there: 0 moved
            (3, "migrate", ("/m/f", 9)),  # EINVAL: not a member
            (0, "migrate", ("/m/none", 1)),  # ENOENT
            (2, "migrate", ("/m/t", 1)),  # the tree: two files
            (0, "readdir", ("/m/t/u",)),
            (3, "open", ("/m/t/u/b",)),
            (3, "read", (FD, 0, 100)),
            (3, "close", (FD,)),
            (1, "rename", ("/m/f", "/m/g")),
            (2, "migrate", ("/m/g", 0)),
            (0, "unlink", ("/m/g",)),
            (1, "readdir", ("/m",)),
        ],
    )
)


_KEEP3 = (KEEP, KEEP, KEEP)
_OMIT2 = (UTIME_OMIT, UTIME_OMIT)
SCENARIOS.append(
    Scenario(
        # issue 15: the attribute operations a FUSE mount needs.  /p is held by
        # nodes 0, 1, 2 (its manager is node 0), /p/a lives on node 0 (its
        # manager is node 3), /p/b on node 2, /p/s only on node 3.
        "attributes: getattr, chmod/chown/utimens, statfs, fsync",
        4,
        files={0: [("/p/a", b"aaaa")], 2: [("/p/b", b"bb")]},
        dirs={1: ["/p"], 3: ["/p/s"]},
        ops=[
            (2, "setattr", ("/", 0o755, KEEP, KEEP, *_OMIT2)),  # 0: the root, at every node
            (0, "getattr", ("/",)),  # 1: ino 1, node 0's own root (the lowest member)
            (1, "getattr", ("/p/a",)),  # 2: at its home, node 0
            (3, "getattr", ("/p/a",)),  # 3: the same ino from another node
            (2, "getattr", ("/p",)),  # 4: the lowest holder's (node 0), nlink 1
            (2, "setattr", ("/p/a", 0o600, KEEP, KEEP, *_OMIT2)),  # 5: chmod a file
            (1, "getattr", ("/p/a",)),  # 6
            (3, "setattr", ("/p", 0o750, KEEP, KEEP, *_OMIT2)),  # 7: chmod a directory: holders 0, 1, 2
            (1, "getattr", ("/p",)),  # 8
            (1, "setattr", ("/p", *_KEEP3, 10**18, 2 * 10**18)),  # 9: utimens of a directory
            (2, "setattr", ("/p/b", *_KEEP3, UTIME_NOW, UTIME_OMIT)),  # 10: utimens, now and omit
            (0, "setattr", ("/p/a", KEEP, KEEP, KEEP, *_OMIT2)),  # 11: chown -1 -1: nothing changes
            (3, "setattr", ("/p/a", 0o17777, KEEP, KEEP, *_OMIT2)),  # 12: EINVAL, no message
            (3, "setattr", ("/p/a", KEEP, KEEP, KEEP, UTIME_OMIT + 1, UTIME_OMIT)),  # 13: EINVAL: no such time
            (3, "setattr", ("/p/a/x", 0o644, KEEP, KEEP, *_OMIT2)),  # 14: through a file
            (0, "getattr", ("/p/none",)),  # 15: ENOENT
            (1, "open", ("/p/b",)),  # 16
            (1, "write", (FD, 0, b"more data")),  # 17
            (1, "fsync", (FD,)),  # 18
            (1, "close", (FD,)),  # 19
            (3, "getattr", ("/p/b",)),  # 20: size 9
            (0, "fsync", (99,)),  # 21: EBADF
            (2, "statfs", ()),  # 22: every member asked
            (0, "rename", ("/p/a", "/p/c")),  # 23
            (1, "getattr", ("/p/c",)),  # 24: a renamed file keeps its ino
            (0, "getattr", ("/p/s",)),  # 25: a directory on node 3 only
            (3, "getattr", ("/p/s",)),  # 26
            (2, "getattr", ("/p/b/",)),  # 27: not canonical, but normalised by the requester
            (3, "getattr", ("/",)),  # 28: the root's lowest holder, node 0, asked directly
        ],
        same_ino=[(2, 3, 6, 24), (4, 8), (25, 26), (20, 27), (1, 28)],
    )
)


SCENARIOS.append(
    Scenario(
        # issue 23: readdir with attributes (``ls -l``, a mount's readdirplus) in two round
        # trips of the requester: the listing at /p's manager (node 0), then one EntryAttrs
        # per node at once (files to their homes, the subdirectories to every holder of /p).
        # /p is held by all four; /p/s by node 3 only, until the create of /p/s/q (managed,
        # so homed, at node 1) makes an implicit copy at node 1: /p/s's attributes stay
        # node 3's (chmod 700 before the copy existed), as getattr gives them.
        "readdir_attrs: a listing with every entry's attributes in two round trips",
        4,
        files={0: [("/p/a", b"aaaa")], 1: [("/p/d", b"d"), ("/p/e", b"eee")], 2: [("/p/b", b"bb"), ("/p/f", b"")]},
        dirs={3: ["/p/s"], 2: ["/p/t"]},
        ops=[
            (1, "readdir_attrs", ("/p",)),  # 0: homes 0, 1, 2; holders 0-3 for s and t
            (3, "setattr", ("/p/s", 0o700, KEEP, KEEP, *_OMIT2)),  # 1: at its one holder, node 3
            (0, "create", ("/p/s/q",)),  # 2: home node 1, which makes /p/s there (implicit)
            (2, "setattr", ("/p/a", 0o600, KEEP, KEEP, *_OMIT2)),  # 3
            (2, "unlink", ("/p/b",)),  # 4
            (2, "readdir_attrs", ("/p",)),  # 5: no b; a 600; s 700 (node 3's own copy)
            (0, "getattr", ("/p/s",)),  # 6: the same as op 5 gives for s
            (3, "getattr", ("/p/a",)),  # 7: the same as op 5 gives for a
            (1, "readdir_attrs", ("/p/a",)),  # 8: ENOTDIR
            (1, "readdir_attrs", ("/none",)),  # 9: ENOENT
            (3, "readdir_attrs", ("/",)),  # 10: the root: p, every member a holder
            (0, "readdir_attrs", ("/p/s/",)),  # 11: q, at node 1; not canonical, normalised
            (2, "mkdir", ("/empty",)),  # 12
            (2, "readdir_attrs", ("/empty",)),  # 13: nothing to fetch: the listing only
        ],
    )
)


_XC, _XR = os.XATTR_CREATE, os.XATTR_REPLACE
_BIG = bytes(range(256)) * 12  # 3 KiB: within the 64 KiB limit and within ext4's room per file (one 4 KiB block)
SCENARIOS.append(
    Scenario(
        # issue 22: extended attributes where getattr/setattr find attributes.  /x is held by
        # all four nodes (its manager is node 0 over 4 nodes); /x/a lives on node 0, /x/b on
        # node 2, /x/s on node 3 only.  A file's at its home; a directory's read at its lowest
        # holder, changed at every holder lowest first.  Refused names cost no message.
        "extended attributes: get/set/list/remove on files and directories",
        4,
        files={0: [("/x/a", b"aaaa")], 2: [("/x/b", b"bb")]},
        dirs={1: ["/x"], 3: ["/x/s"]},
        local_xattrs=True,
        ops=[
            (1, "setxattr", ("/x/a", "user.k", b"v1", 0)),  # 0: at its home, node 0
            (3, "getxattr", ("/x/a", "user.k")),  # 1: v1
            (2, "setxattr", ("/x/a", "user.k", b"v2", _XC)),  # 2: EEXIST
            (2, "setxattr", ("/x/a", "user.new", b"n", _XR)),  # 3: ENODATA
            (2, "setxattr", ("/x/a", "user.k", b"v2", _XR)),  # 4
            (0, "setxattr", ("/x/a", "user.big", _BIG, 0)),  # 5: big but allowed
            (1, "listxattr", ("/x/a",)),  # 6: sorted: user.big, user.k
            (3, "getxattr", ("/x/a", "user.none")),  # 7: ENODATA
            (3, "setxattr", ("/x/a", "user.huge", bytes(65537), 0)),  # 8: E2BIG, no message
            (3, "setxattr", ("/x/a", "trusted.t", b"t", 0)),  # 9: EPERM at the home: no caller named, not root
            (3, "getxattr", ("/x/a", "security.selinux")),  # 10: EOPNOTSUPP: security. is off, no message
            (3, "setxattr", ("/x/a", "system.posix_acl_access", b"", 0)),  # 11: EOPNOTSUPP: no ACLs
            (1, "getxattr", ("/x/a", "user." + "n" * 251)),  # 12: ERANGE: a name over 255 bytes
            (2, "setxattr", ("/x/a", "user.k", b"v", 4)),  # 13: EINVAL: no such flag
            (2, "setxattr", ("/x", "user.d", b"dir", 0)),  # 14: at holders 0, 1, 2, 3
            (3, "getxattr", ("/x", "user.d")),  # 15: at the lowest holder, node 0
            (1, "listxattr", ("/x",)),  # 16
            (0, "setxattr", ("/x", "user.d", b"again", _XC)),  # 17: EEXIST at the lowest: nothing changed
            (2, "removexattr", ("/x", "user.d")),  # 18: at every holder
            (3, "getxattr", ("/x", "user.d")),  # 19: ENODATA
            (1, "removexattr", ("/x", "user.d")),  # 20: ENODATA
            (0, "rename", ("/x/a", "/x/c")),  # 21: the local rename keeps them
            (2, "getxattr", ("/x/c", "user.k")),  # 22: v2
            (1, "migrate", ("/x/c", 3)),  # 23: copied with the data, under the freeze
            (0, "listxattr", ("/x/c",)),  # 24: both, at node 3
            (2, "getxattr", ("/x/c", "user.big")),  # 25
            (3, "removexattr", ("/x/c", "user.k")),  # 26
            (1, "listxattr", ("/x/c",)),  # 27: user.big
            (0, "setxattr", ("/", "user.root", b"r", 0)),  # 28: the root, at every member
            (3, "getxattr", ("/", "user.root")),  # 29: at the lowest member, asked directly
            (2, "removexattr", ("/", "user.root")),  # 30
            (0, "getxattr", ("/x/none", "user.k")),  # 31: ENOENT
            (2, "setxattr", ("/x/b/z", "user.k", b"", 0)),  # 32: ENOTDIR: through a file
            (1, "listxattr", ("/x/s",)),  # 33: none, at its one holder (node 3)
            (0, "setxattr", ("/x/b", "user.empty", b"", 0)),  # 34: an empty value
            (3, "getxattr", ("/x/b", "user.empty")),  # 35
            (1, "listxattr", ("/x/b/",)),  # 36: not canonical, normalised by the requester
        ],
    )
)


def _holds_xattrs(where: str) -> str | None:
    """Why a directory made in ``where`` cannot hold ``user.`` extended attributes, or None."""
    try:
        with tempfile.TemporaryDirectory(dir=where) as tmp:
            os.setxattr(tmp, "user.fedfs-probe", b"1")
    except OSError as exc:
        return f"{where}: {exc.strerror}"
    return None


@functools.cache
def trees_dir() -> str:
    """Where the agents' local trees are made: the system's temporary directory
    if its file system holds ``user.`` extended attributes, else the first of
    /var/tmp and /dev/shm that does (a guest's or an older kernel's tmpfs holds
    none), else the temporary directory all the same (``xattrs_missing`` says why)."""
    for where in (tempfile.gettempdir(), "/var/tmp", "/dev/shm"):
        if os.path.isdir(where) and _holds_xattrs(where) is None:
            return where
    return tempfile.gettempdir()


def xattrs_missing() -> str | None:
    """Why the agents' local trees (``trees_dir``) cannot hold ``user.``
    extended attributes, or None: the scenarios that set them are skipped there."""
    why = _holds_xattrs(trees_dir())
    return None if why is None else f"no file system here holds user xattrs (tried /tmp, /var/tmp, /dev/shm): {why}"


def owners_missing() -> str | None:
    """Why the agents (this process's user) cannot give files other owners, or None."""
    if os.geteuid() != 0:
        return "giving a file another user's uid/gid needs the agents to run as root"
    return None


def view(op: str, value: Any, owners: bool = False) -> Any:
    """What of an attribute result every world must agree on.  Times, owners
    and a file's local inode number are the host's (wall clock, the agent's
    uid, the local file system's numbering): they are checked by the agent
    tests (tests/test_attributes.py); here a file's inode number shows only
    its home (``attrs.file_ino``), a directory's is compared whole (a hash of
    its path), and statfs shows only namemax (the sizes are the hosts').  With
    ``owners`` (``Scenario.owners``: every owner in the script is given
    explicitly) uid and gid are compared too."""
    if isinstance(value, BaseException):
        return value
    if op in ("getattr", "fgetattr"):
        is_dir, mode, nlink, uid, gid, size, _a, _m, _c, ino = value
        where = ino if is_dir else ("home", (ino >> 48) - 1)
        seen = (is_dir, stat.S_IFMT(mode), stat.S_IMODE(mode), nlink, size, where)
        return (*seen, uid, gid) if owners else seen
    if op == "statfs":
        return ("statfs", value[7])
    if op == "create_open":
        return (value[0], None if value[1] is None else view("getattr", value[1], owners))
    if op == "readdir_attrs":
        return [(name, is_dir, None if a is None else view("getattr", a, owners)) for name, is_dir, a in value]
    return value


def check_times(sc: Scenario, raw: list[Any], world: str) -> None:
    """``sc.times``: the mtime and ctime of getattr result j against result i, as POSIX says the
    calls between move them (the values are each world's clock: only their order is compared)."""
    for i, j, how in sc.times:
        a, b = raw[i], raw[j]
        assert not isinstance(a, BaseException) and not isinstance(b, BaseException), (world, i, j, a, b)
        got = "".join("+" if b[k] > a[k] else "=" if b[k] == a[k] else "-" for k in (7, 8))
        assert got == how, f"{world}: ops {i}..{j} ({sc.ops[i][2][0]}): mtime, ctime moved {got!r}, not {how!r}"


def check_inos(sc: Scenario, raw: list[Any], world: str) -> None:
    """The inode numbers of ``sc.same_ino``'s groups are equal, never 0, 1 only for the root."""
    for group in sc.same_ino:
        inos = {raw[i][9] for i in group}
        assert len(inos) == 1, f"{world}: ops {group} gave inode numbers {inos}"
    for (_, op, args), r in zip(sc.ops, raw, strict=True):
        if op == "getattr" and not isinstance(r, BaseException):
            assert r[9] != 0 and (r[9] == ROOT_INO) == (args[0] == "/"), f"{world}: {args[0]} has ino {r[9]}"


SCENARIOS.append(
    Scenario(
        # /a's VD is cached before the join; the newcomer (node 3) holds a file in
        # /a: the VD merges with it only.  mod_n over 4 nodes moves most managers.
        "membership: a node joins a running federation",
        3,
        files={0: [("/a/x", b"x on n0")], 1: [("/a/z", b"z on n1"), ("/b/f", b"f")]},
        dirs={2: ["/a"]},
        ops=[
            (0, "readdir", ("/a",)),
            (1, "stat", ("/a/x",)),
            (2, "create", ("/b/g",)),
            (0, JOIN, ([("/a/new", b"new on n3"), ("/n3/own", b"own")], ["/empty"])),
            (2, "readdir", ("/a",)),
            (3, "stat", ("/a/x",)),
            (3, "create", ("/a/y",)),
            (1, "stat", ("/a/y",)),
            (1, "open", ("/a/new",)),
            (1, "read", (FD, 0, 100)),
            (1, "close", (FD,)),
            (0, "stat", ("/b/g",)),
            (0, "readdir", ("/",)),
            (3, "mkdir", ("/m",)),
            (0, "create", ("/m/f",)),
            (2, "readdir", ("/m",)),
            (3, "readdir", ("/empty",)),
        ],
    )
)
SCENARIOS.append(
    Scenario(
        # node 2 leaves: the names it manages are handed off, its own files
        # become unavailable (leave_files: unavailable), the others stay whole
        "membership: a node leaves gracefully",
        4,
        files={2: [("/d/on2", b"2")], 0: [("/d/on0", b"0")], 3: [("/e/on3", b"3")]},
        dirs={1: ["/d"]},
        ops=[
            *[(i % 4, "create", (f"/d/f{i}",)) for i in range(6)],
            (1, "readdir", ("/d",)),
            (3, "stat", ("/d/on2",)),
            (2, LEAVE, ()),
            (0, "readdir", ("/d",)),
            (1, "stat", ("/d/on2",)),
            (3, "stat", ("/d/on0",)),
            *[(i % 3 if i % 3 != 2 else 3, "stat", (f"/d/f{i}",)) for i in range(6)],
            (0, "create", ("/d/after",)),
            (3, "readdir", ("/d",)),
            (1, "mkdir", ("/n",)),
            (3, "create", ("/n/g",)),
            (0, "readdir", ("/",)),
        ],
    )
)
SCENARIOS.append(
    Scenario(
        # the same, with leave_files: migrate: before its Leave node 2 makes
        # its directories at the remaining members and moves each of its
        # files to the member the placement names in the view without it
        # (with_manager: the file's new manager); nothing leaves the
        # namespace, every moved file reads back its bytes at its pathname
        "membership: a node leaves gracefully and migrates its files",
        4,
        files={
            2: [("/d/on2", b"2" * 3000), ("/own2/x", b"x of node 2")],
            0: [("/d/on0", b"0")],
            3: [("/e/on3", b"3")],
        },
        dirs={1: ["/d"], 2: ["/own2/empty"]},
        protocol={"leave_files": "migrate"},
        ops=[
            *[(i % 4, "create", (f"/d/f{i}",)) for i in range(6)],
            (1, "readdir", ("/d",)),
            (3, "stat", ("/d/on2",)),
            (2, LEAVE, ()),
            (0, "readdir", ("/d",)),
            (1, "stat", ("/d/on2",)),
            (1, "open", ("/d/on2",)),
            (1, "read", (FD, 0, 4000)),
            (1, "close", (FD,)),
            (3, "open", ("/own2/x",)),
            (3, "read", (FD, 0, 100)),
            (3, "close", (FD,)),
            (0, "readdir", ("/own2",)),
            *[(i % 3 if i % 3 != 2 else 3, "stat", (f"/d/f{i}",)) for i in range(6)],
            (0, "unlink", ("/own2/x",)),
            (3, "readdir", ("/own2",)),
            (0, "create", ("/d/after",)),
            (3, "readdir", ("/d",)),
            (0, "readdir", ("/",)),
        ],
    )
)

SCENARIOS.append(
    Scenario(
        # issue 13, replication (replicas: 2): every change of a file reaches
        # the copy at successor(home), in the replica space the namespace never
        # shows (EPERM to name it, readdir of / omits it); node 2 leaves and its
        # successor promotes its copies (nothing lost); node 4 joins and takes
        # over node 3's copies.  Files made before the federation started get
        # their copy at start (the initial sync, before the first operation).
        # The trees compared at the end include every replica space.
        "replication: copies at the successor, promotion on leave, secondaries moved on join",
        4,
        files={0: [("/r/pre0", b"made before the start")], 1: [("/s/pre1", b"on n1")]},
        dirs={1: ["/r"], 2: ["/r"]},
        protocol={"replicas": 2, "migration_chunk": 4},
        ops=[
            *[(i % 4, "create", (f"/r/f{i}",)) for i in range(6)],
            (1, "open", ("/r/f1",)),
            (1, "write", (FD, 0, b"written through n1")),
            (1, "close", (FD,)),
            (2, "truncate", ("/r/f1", 7)),
            (0, "open", ("/r/f2",)),
            (0, "write", (FD, 0, b"f2 data")),
            (0, "close", (FD,)),
            (3, "open", ("/r/pre0",)),
            (3, "write", (FD, 0, b"MADE")),  # its copy came with the initial sync: the write is forwarded
            (3, "close", (FD,)),
            (3, "rename", ("/r/f2", "/r/g2")),
            (1, "rename", ("/r/f5", "/r/f3")),  # replaces f3, homed on another node
            (0, "setattr", ("/r/f0", 0o600, KEEP, KEEP, *_OMIT2)),
            (0, "unlink", ("/r/f4",)),
            (1, "migrate", ("/r/f0", 2)),  # its copy moves from node 1 to node 3
            (2, "stat", ("/.fedfs-replicas/r/f1",)),  # EPERM, no message
            (1, "readdir", ("/",)),
            (3, LEAVE, ()),  # node 0 promotes node 3's files; node 2's copies go to node 0
            (0, "readdir", ("/r",)),
            *[(n, "getattr", (p,)) for n, p in ((0, "/r/f0"), (1, "/r/f1"), (2, "/r/g2"), (0, "/r/f3"))],
            (1, "getattr", ("/r/pre0",)),
            (2, "open", ("/r/g2",)),
            (2, "read", (FD, 0, 100)),
            (2, "close", (FD,)),
            (1, "open", ("/r/f1",)),
            (1, "write", (FD, 2, b"++")),  # a promoted file is an ordinary file: its copy follows
            (1, "close", (FD,)),
            (0, JOIN, ([("/r/joiner", b"on n4")], [])),  # node 2's copies move from node 0 to node 4
            (4, "readdir", ("/r",)),
            (1, "open", ("/r/joiner",)),
            (1, "read", (FD, 0, 100)),
            (1, "close", (FD,)),
            (4, "create", ("/r/after",)),
            (0, "unlink", ("/r/g2",)),
            (2, "readdir", ("/r",)),
        ],
    )
)

for _method in ("2pc", "redistribute"):
    SCENARIOS.append(
        Scenario(
            # issue 24 with copies (replicas: 2): a rename across directories logs its
            # decision at the coordinator's heir before its commit point (RenameLog) and
            # forgets it as its last step; the moved file's copy follows it (ReplicaRename),
            # the replaced target's copy goes.  The same messages and trees everywhere.
            f"replication: renames across directories logged at the coordinator's heir ({_method})",
            4,
            files={
                0: [("/s/a", b"a on n0"), ("/d/t", b"target on n0")],
                1: [("/s/b", b"b on n1")],
                2: [("/d/u", b"u on n2")],
            },
            dirs={3: ["/s", "/d"]},
            protocol={"replicas": 2, "rename": _method},
            ops=[
                (1, "rename", ("/s/a", "/d/a")),
                (2, "rename", ("/s/b", "/d/t")),  # over a target on another home
                (3, "rename", ("/d/u", "/s/u")),
                (0, "readdir", ("/s",)),
                (1, "readdir", ("/d",)),
                (2, "open", ("/d/t",)),
                (2, "read", (FD, 0, 100)),
                (2, "close", (FD,)),
                (3, "getattr", ("/d/a",)),
                (0, "stat", ("/s/a",)),  # ENOENT
            ],
        )
    )


SCENARIOS.append(
    Scenario(
        # Node 2 crashes (round-robin homes: /c/f1 and /c/f5 live there).  Before
        # the heartbeats find it out a stat of its file fails with EHOSTDOWN; its
        # successor (3) suspects it, the coordinator (0) checks and evicts it:
        # view 1 without it, no hand-off from it.  Its files are then absent
        # (ENOENT naming it), the others' work, the federation goes on; it
        # restarts over its old tree (replicas 1: its files come back with it)
        # and rejoins: view 2.
        "crash: detection by heartbeats, eviction, restart",
        4,
        dirs={0: ["/c"], 1: ["/c"], 2: ["/c"], 3: ["/c"]},
        placement="round_robin",
        # a period far above the rpc timeout (1 s in the simulator), so that
        # operations waiting on the crashed node end long before the detection
        protocol={"heartbeat_s": 5.0, "heartbeat_misses": 3},
        ops=[
            *[(i % 4, "create", (f"/c/f{i}",)) for i in range(8)],
            (3, "open", ("/c/f5",)),
            (3, "write", (FD, 0, b"five, on node 2")),
            (3, "close", (FD,)),
            (1, "readdir", ("/c",)),
            (2, CRASH, ()),
            (0, "stat", ("/c/f1",)),  # EHOSTDOWN: its home is down
            (1, "stat", ("/c/f2",)),
            (3, DETECT, (2,)),
            (0, "readdir", ("/c",)),  # rebuilt without node 2
            (1, "stat", ("/c/f5",)),  # ENOENT: unavailable
            (3, "stat", ("/c/f3",)),
            (0, "create", ("/c/during",)),
            (3, "mkdir", ("/e",)),
            (1, "create", ("/e/g",)),
            (1, RESTART, (2,)),
            (0, "stat", ("/c/f1",)),  # back
            (2, "open", ("/c/f5",)),
            (2, "read", (FD, 0, 100)),
            (2, "close", (FD,)),
            (2, "readdir", ("/c",)),
            (3, "readdir", ("/c",)),
            (2, "stat", ("/e/g",)),
            (2, "create", ("/e/after",)),
            (0, "readdir", ("/",)),
        ],
    )
)

# Protocol settings every world shares unless a scenario says otherwise: the
# papers' closed world (no VD ageing: real time and simulated time differ, so
# age-triggered merges could differ too), and no periodic re-summarising.
PROTOCOL = {"vd_max_age_s": 0.0, "vd_miss_age_s": 0.0, "summary_refresh_s": 0.0}


def protocol_of(sc: Scenario) -> dict[str, Any]:
    return {**PROTOCOL, **sc.protocol}


@dataclass
class Outcome:
    results: list[Any]
    messages: list[list[tuple[int, int, str]]]
    trees: list[dict[str, bytes | None]]
    raw: list[Any] = field(default_factory=list)  # results before ``view`` and ``canonical``

    def requests(self, i: int) -> list[tuple[int, int, str]]:
        return [m for m in self.messages[i] if m[2] != "reply"]

    def replies(self, i: int) -> int:
        return sum(1 for m in self.messages[i] if m[2] == "reply")


def canonical(value: Any) -> Any:
    """Outcomes compared across runtimes: sequences as tuples, errors as errno."""
    if isinstance(value, BaseException):
        return ("error", getattr(value, "errno", None) or type(value).__name__)
    if isinstance(value, (list, tuple)):
        return tuple(canonical(v) for v in value)
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def _args(args: tuple[Any, ...], fd: int | None) -> tuple[Any, ...]:
    return tuple(fd if a == FD else a for a in args)


def _populate(fs: Any, sc: Scenario, node: int) -> None:
    for d in sc.dirs.get(node, []):
        fs.mkdir(d)
    for path, data in sc.files.get(node, []):
        fs.create(path)
        fs.write(path, 0, data)
    for path, target in sc.links.get(node, []):
        fs.symlink(path, target)


def joins(sc: Scenario) -> int:
    """How many nodes join during the script."""
    return sum(1 for _, op, _ in sc.ops if op == JOIN)


def _populate_joiner(fs: Any, files: list[tuple[str, bytes]], dirs: list[str]) -> None:
    for d in dirs:
        fs.mkdir(d)
    for path, data in files:
        fs.create(path)
        fs.write(path, 0, data)


def _play(
    sc: Scenario, run_one: Any, local_fs: Any, membership: Any = None
) -> tuple[list[Any], list[list[tuple[int, int, str]]], list[Any]]:
    """Play the script; ``local_fs(node)`` is that node's local file system
    (MemFS or LocalFS), for the OUTSIDE pseudo-operation; ``membership(op,
    node, new id, args)`` runs a JOIN or LEAVE and returns the new epoch.
    Returns the canonical results, the messages, and the raw results (for
    checks of values that differ between worlds, such as inode numbers)."""
    results, messages, raw = [], [], []
    fds: dict[int, int] = {}
    nodes = sc.nodes
    router = Router("home", FederationSpec(range(sc.nodes), placement=sc.placement))
    opened_at = 0  # the node of the last routed open
    for node, op, args in sc.ops:
        if sc.pause_s:
            time.sleep(sc.pause_s)
        routed = node == ROUTED
        if routed:
            node = opened_at if FD in args else router.entry(0, args[0])
        if op in (OUTSIDE, OUTSIDE_LINK):
            path, data = args
            fs = local_fs(node)
            if op == OUTSIDE_LINK:
                fs.symlink(path, data)
            else:
                fs.create(path)
                fs.write(path, 0, data)
            results.append(None)
            messages.append([])
            raw.append(None)
            continue
        if op in DYNAMIC:
            results.append(membership(op, node, nodes, args))
            messages.append([])
            raw.append(None)
            nodes += op == JOIN
            continue
        value, log = run_one(node, op, _args(args, fds.get(node)))
        if op == "open" and isinstance(value, int):
            fds[node] = value
        elif op == "create_open" and isinstance(value, (list, tuple)):
            fds[node] = value[0]
        if routed:
            if op in ("open", "create_open"):
                opened_at = node
            if isinstance(value, FileNotFoundError) or op == "unlink":
                router.forget(args[0])
            elif op == "getattr" and not isinstance(value, BaseException):
                router.learn(args[0], value)
            elif op == "create_open" and isinstance(value, (list, tuple)) and value[1] is not None:
                router.learn(args[0], value[1])
        raw.append(value)
        results.append(canonical(view(op, value, sc.owners)))
        messages.append([tuple(m) for m in log])
    return results, messages, raw


# ---------------------------------------------------------------------------- the worlds
def run_sim(sc: Scenario) -> Outcome:
    c = SimCluster(
        sc.nodes,
        network=preset("tcp_loopback"),
        keep_data=True,
        placement=sc.placement,
        protocol=ProtocolConfig(**protocol_of(sc)),
        design=sc.architecture,
    )
    for n in range(sc.nodes):
        _populate(c.fs[n], sc, n)
    c.preload_summaries()
    period = c.protocol.heartbeat_s
    if period or c.protocol.replicas == 2:
        # the heartbeats' timers, the replicas' initial sync (start() would
        # run them; preloading skips it); the sync ends before the first
        # operation, as in the worlds that run start() (ready waits for it)
        for node in c.nodes:
            for timer in node.background():
                c.spawn(node.id, timer)
        while not all(node.ready for node in c.nodes):
            c.env.run(until=c.env.now + SETTLE_US)

    def settle() -> None:
        """Run what the last step left in flight: to the end, or, with
        timers that never end, until every member's view is settled."""
        if not period:
            c.env.run()
            return
        c.env.run(until=c.env.now + SETTLE_US)
        for _ in range(1000):
            if all(c.nodes[n].describe().get("view_settled", True) for n in _up(c)):
                return
            c.env.run(until=c.env.now + SETTLE_US)
        raise AssertionError(f"{sc.name}: the view did not settle")

    def one(node: int, op: str, args: tuple[Any, ...]) -> tuple[Any, list[Any]]:
        trace = OpTrace(log=[])
        try:
            value = c.run_op(node, op, *args, trace=trace)
        except Exception as exc:
            value = exc
        settle()
        return value, list(trace.log or [])

    def membership(op: str, node: int, new: int, args: tuple[Any, ...]) -> int:
        if op == CRASH:
            c.crash(node)
            return None
        if op == DETECT:
            while any(args[0] in c.nodes[n].members for n in _up(c)):
                c.env.run(until=c.env.now + period * 1e6)
            settle()
            return c.nodes[node].epoch
        if op == JOIN:
            assert c.add_node(seed=node) == new
            _populate_joiner(c.fs[new], *args)
            p = c.join(new, seed=node)
        elif op == RESTART:
            p = c.restart(args[0], seed=node)
        else:
            p = c.leave(node)
        c.env.run(until=p)
        settle()
        return p.value

    results, messages, raw = _play(sc, one, lambda n: c.fs[n], membership)
    return Outcome(results, messages, [fs.tree() for fs in c.fs], raw)


def run_direct(sc: Scenario) -> Outcome:
    fss = [MemFS() for _ in range(sc.nodes)]
    for n, fs in enumerate(fss):
        _populate(fs, sc, n)
    c = DirectCluster(
        sc.nodes, placement=sc.placement, config=ProtocolConfig(**protocol_of(sc)), local=fss, design=sc.architecture
    )

    def one(node: int, op: str, args: tuple[Any, ...]) -> tuple[Any, list[Any]]:
        c.advance(0.001)  # time passes between operations, as in every other world
        mark = len(c.trace)
        try:
            value = c.op(node, op, *args)
        except Exception as exc:
            value = exc
        # the in-memory runtime records requests only; replies are implied by calls
        return value, c.messages_since(mark)

    def membership(op: str, node: int, new: int, args: tuple[Any, ...]) -> int:
        c.advance(0.001)
        if op == CRASH:
            c.crash(node)
            return None
        if op == DETECT:
            while any(args[0] in c.nodes[n].members for n in _up(c)):
                c.advance(c.config.heartbeat_s)
            return c.nodes[node].epoch
        if op == RESTART:
            return c.restart(args[0], seed=node)
        if op == LEAVE:
            return c.leave(node)
        fs = MemFS()
        _populate_joiner(fs, *args)
        assert c.join(node, local=fs) == new
        return c.nodes[new].epoch

    results, messages, raw = _play(sc, one, lambda n: c.fs[n], membership)
    return Outcome(results, messages, [fs.tree() for fs in c.fs], raw)


#: microseconds the simulator runs after a step when timers never let it run dry
SETTLE_US = 10_000.0


def _up(c: Any) -> list[int]:
    """The nodes of a simulated or in-memory cluster that are neither gone nor down."""
    return [n for n in c.live if n not in c.down]


def _real_cluster(sc: Scenario, base: Path, **options: Any) -> Cluster:
    """The cluster file of the scenario's first members (``base/cluster.yaml``)
    and, when nodes join, ``base/joined.yaml`` naming them too (their own file)."""
    total = sc.nodes + joins(sc)
    shape = {"placement": sc.placement, "architecture": sc.architecture}
    spec = local_spec(base, total, protocol={**protocol_of(sc), **shape}, **options)
    from fednode.localfs import LocalFS

    for n in range(sc.nodes):
        _populate(LocalFS(base / f"n{n}"), sc, n)
    write_cluster(base / "joined.yaml", spec)
    first = spec.model_copy(update={"nodes": spec.nodes[: sc.nodes]})
    write_cluster(base / "cluster.yaml", first)
    return Cluster(first, base / "cluster.yaml")


def _joined(base: Path) -> Cluster:
    from fednode.config import load_cluster

    return load_cluster(base / "joined.yaml")


def _prepare_joiner(base: Path, new: int, args: tuple[Any, ...]) -> None:
    from fednode.localfs import LocalFS

    _populate_joiner(LocalFS(base / f"n{new}"), *args)


def _local(base: Path) -> Any:
    from fednode.localfs import LocalFS

    return lambda n: LocalFS(base / f"n{n}")


def _trees(base: Path, n: int) -> list[dict[str, bytes | None]]:
    from fednode.localfs import LocalFS

    return [LocalFS(base / f"n{i}").tree() for i in range(n)]


@contextlib.contextmanager
def _umask() -> Iterator[None]:
    """The umask MemFS models (022: files 0o644, directories 0o755) while a
    real world is built and runs, so that modes agree with the in-memory worlds."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def run_inproc(sc: Scenario) -> Outcome:
    with tempfile.TemporaryDirectory(dir=trees_dir()) as tmp, _umask():
        base = Path(tmp)
        cluster = _real_cluster(sc, base)
        with AgentGroup(cluster, transport="inproc") as g:

            def membership(op: str, node: int, new: int, args: tuple[Any, ...]) -> int | None:
                if op == CRASH:
                    g.crash(node)  # its host loses its power: what is sent to it is lost
                    return None
                if op == DETECT:

                    async def views() -> dict[int, tuple[tuple[int, ...], bool]]:
                        return {
                            n: (a.node.members, a.node.describe().get("view_settled", True))
                            for n, a in g.agents.items()
                            if n not in g.network.down
                        }

                    _until_detected(args[0], lambda: g.lt.run(views()))
                    return g.agents[node].node.epoch
                if op == RESTART:
                    return g.restart(args[0]).node.epoch
                if op == LEAVE:
                    return g.leave(node)
                _prepare_joiner(base, new, args)
                return g.join(_joined(base), new).node.epoch

            results, messages, raw = _play(
                sc, lambda node, op, args: g.traced(node, op, *args), _local(base), membership
            )
        return Outcome(results, messages, _trees(base, sc.nodes + joins(sc)), raw)


def run_tcp(sc: Scenario, **options: Any) -> Outcome:
    """Separate agent processes talking TCP (or what ``options`` say, e.g.
    ``transport="verbs"``); operations through the client API."""
    from fednode.client import Client

    with tempfile.TemporaryDirectory(dir=trees_dir()) as tmp, _umask():
        base = Path(tmp)
        cluster = _real_cluster(sc, base, **options)
        joiners: list[ProcessCluster] = []
        with ProcessCluster(base / "cluster.yaml", log_dir=base / "logs") as pc:
            pc.wait_ready()
            clients = {n: Client(cluster, node=n) for n in range(sc.nodes)}

            def membership(op: str, node: int, new: int, args: tuple[Any, ...]) -> int | None:
                if op == CRASH:
                    clients.pop(node).disconnect()
                    pc.freeze(node)  # SIGSTOP: a host without power, whose sockets stay open
                    return None
                if op == DETECT:
                    _until_detected(args[0], lambda: {n: _view_of(c.status()) for n, c in clients.items()})
                    return clients[node].status()["epoch"]
                if op == RESTART:
                    pc.kill(args[0])  # the frozen process ends; its restart is ``serve --join`` over its tree
                    started, new, path = args[0], args[0], base / "cluster.yaml"
                else:
                    if op == LEAVE:
                        return clients.pop(node).call("leave", cluster.leave_proof(node))
                    _prepare_joiner(base, new, args)
                    started, path = new, base / "joined.yaml"
                joiners.append(ProcessCluster(path, nodes=[started], log_dir=base / "logs", join=True))
                joiners[-1].wait_ready()
                clients[new] = Client(_joined(base), node=new)
                return clients[new].status()["epoch"]

            try:
                results, messages, raw = _play(
                    sc, lambda node, op, args: clients[node].traced(op, *args), _local(base), membership
                )
            finally:
                for c in clients.values():
                    c.disconnect()
                for j in joiners:
                    j.stop()
        return Outcome(results, messages, _trees(base, sc.nodes + joins(sc)), raw)


def _view_of(status: dict[str, Any]) -> tuple[tuple[int, ...], bool]:
    return tuple(status["members"]), status.get("view_settled", True)


#: how long DETECT waits for a crash to be found out before it calls the run
#: hung (only a bound on a hang: the heartbeats take ``heartbeat_misses``
#: periods and a check, however slow the machine)
DETECT_LIMIT_S = 600.0


def until(what: str, cond: Callable[[], bool], limit_s: float = 120.0) -> None:
    """Poll ``cond`` (a question to the agents) until it holds: a readiness
    signal for what the agents do on the wall clock; the limit only turns a
    hang into a failure."""
    end = time.monotonic() + limit_s
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"not within {limit_s} s: {what}")
        time.sleep(0.05)


def _until_detected(crashed: int, views: Any) -> None:
    """Until every live member (``views()``: live node -> (members, view
    settled)) has installed and settled a view without ``crashed``: the DETECT
    step in the agents' worlds, which detect on the wall clock."""
    until(
        f"every live member settled a view without node {crashed}",
        lambda: all(crashed not in members and settled for members, settled in views().values()),
        DETECT_LIMIT_S,
    )


def run_verbs(sc: Scenario) -> Outcome:
    """Agent processes whose peers talk RDMA (verbs), alternating between the
    test bed's two Soft-RoCE devices as if on two hosts.  They run in the
    test bed's guest, under TCG emulation on a host that may be busy with the
    rest of the suite: a peer's reply may take seconds there, which is slow,
    not a failure (no scenario depends on a timeout), so the rpc timeout is
    ``GUEST_RPC_TIMEOUT_MS``."""
    return run_tcp(sc, transport="verbs", devices=RDMA_DEVICES, rpc_timeout_ms=GUEST_RPC_TIMEOUT_MS)


#: the rpc timeout of agents in the emulated Soft-RoCE guest (``run_verbs``, tests/test_verbs.py)
GUEST_RPC_TIMEOUT_MS = 30_000.0


RDMA_DEVICES = ("rxe_v0", "rxe_v1")  # the test bed's veth pair; see fednode.tools.testbed


def verbs_missing() -> str | None:
    """Why the verbs transport cannot be tested here (None: it can)."""
    from fednode.transport.verbs import VerbsUnavailable, devices

    try:
        have = devices()
    except VerbsUnavailable as exc:
        return f"{exc} (the verbs tests run in the Soft-RoCE guest: fednode testbed rxe)"
    missing = [d for d in RDMA_DEVICES if d not in have]
    if missing:
        return f"RDMA devices {missing} not present (have {have}); fednode testbed rxe creates them"
    return None


__all__ = [
    "CRASH", "DETECT", "GUEST_RPC_TIMEOUT_MS", "JOIN", "LEAVE", "OUTSIDE", "OUTSIDE_LINK", "RDMA_DEVICES", "RESTART",
    "SCENARIOS", "Outcome", "Scenario",
    "check_inos", "check_times", "owners_missing", "run_direct", "run_inproc", "run_sim", "run_tcp", "run_verbs",
    "until", "verbs_missing",
]  # fmt: skip

SCENARIOS.append(
    Scenario(
        # issue 23: a mount's creat(2) in one round trip: create, open and getattr of a new
        # file in one call (descriptor, attributes).  Exclusive as create: an existing name
        # is EEXIST and opens nothing; a missing parent ENOENT; the descriptor it returns
        # reads and writes as open's; with the block cache (whose open wraps the requester's).
        "create_open: a new file created, opened and its attributes in one call",
        3,
        files={0: [("/d/old", b"old")]},
        dirs={1: ["/d"]},
        ops=[
            (1, "create_open", ("/d/new",)),
            (1, "write", (FD, 0, b"made")),
            (1, "close", (FD,)),
            (2, "open", ("/d/new",)),
            (2, "read", (FD, 0, 10)),
            (2, "close", (FD,)),
            (2, "create_open", ("/d/old",)),
            (0, "create_open", ("/nowhere/f",)),
            (2, "create_open", ("/d/n2",)),
            (2, "getattr", ("/d/n2",)),
            (2, "close", (FD,)),
            (0, "readdir", ("/d",)),
        ],
        same_ino=[],
        protocol={"block_cache_blocks": 3, "block_size": 4},
    )
)


_RF = "/r/f"
_RM = _manager_of(_RF, 4)
SCENARIOS.append(
    Scenario(
        # issue 23: a mount routes each call to the file's home or the name's manager
        # (ROUTED).  /r/f lives on a node that does not manage it (autonomy): the first
        # getattr goes to its manager, which relays; the next to its home (which asks the
        # manager once, then serves alone).  After a migration the hint is stale: the old
        # home's requester finds the file at its new home, and the answer teaches the
        # router; an unlinked name's hint is dropped.  A new file's calls go to its
        # manager, its home: served where received.
        "routing: a mount's calls go to the home or the manager, and a stale hint is recovered",
        4,
        files={(_RM + 1) % 4: [(_RF, b"routed data")]},
        dirs={0: ["/r"], 2: ["/r"]},
        ops=[
            (ROUTED, "readdir", ("/r",)),  # at /r's manager
            (ROUTED, "getattr", (_RF,)),  # at the manager: relayed to the home; learnt
            (ROUTED, "getattr", (_RF,)),  # at the home: asks the manager once
            (ROUTED, "open", (_RF,)),  # at the home, alone
            (ROUTED, "read", (FD, 0, 100)),
            (ROUTED, "close", (FD,)),
            (0, "migrate", (_RF, (_RM + 2) % 4)),
            (ROUTED, "getattr", (_RF,)),  # the stale hint: the old home finds it moved; learnt again
            (ROUTED, "stat", (_RF,)),  # at the new home
            (ROUTED, "create_open", ("/r/g",)),  # at /r/g's manager, where the file is made
            (ROUTED, "write", (FD, 0, b"new")),
            (ROUTED, "close", (FD,)),
            (ROUTED, "getattr", ("/r/g",)),
            (ROUTED, "unlink", (_RF,)),  # at the new home; the hint dropped
            (ROUTED, "getattr", (_RF,)),  # at the manager: ENOENT
            (ROUTED, "readdir", ("/r",)),
        ],
        same_ino=[(1, 2)],
    )
)


_FIFO = stat.S_IFIFO | 0o640
SCENARIOS.append(
    Scenario(
        # issue 22: symlinks and fifos are names with a home, made as files are (reserved at
        # the manager, made at the home), listed with their types, never followed or opened.
        # /s/found is a symlink a user made in node 2's tree before the start (autonomy): listed
        # and read like the others.  A target is data: one pointing out of every root is stored
        # and returned verbatim.  Errors as a local file system gives them.
        "links: symlink, readlink, mknod fifo, listed and never followed; their errors",
        3,
        files={0: [("/s/f", b"data")]},
        dirs={1: ["/s/sub"]},
        links={2: [("/s/found", "f")]},
        ops=[
            (1, "symlink", ("f", "/s/l")),  # 0: its home (the manager's choice)
            (2, "readlink", ("/s/l",)),  # 1: "f"
            (0, "getattr", ("/s/l",)),  # 2: S_IFLNK 0o777, size 1, its home
            (2, "stat", ("/s/l",)),  # 3: (False, 1): the link itself
            (0, "symlink", ("../../../etc/passwd", "/s/sub/up")),  # 4: stored verbatim, never resolved
            (1, "readlink", ("/s/sub/up",)),  # 5
            (2, "mknod", ("/s/p", _FIFO, 0)),  # 6
            (1, "getattr", ("/s/p",)),  # 7: S_IFIFO 0o640
            (0, "readdir", ("/s",)),  # 8: f, found, l, p, sub
            (2, "readdir_attrs", ("/s",)),  # 9: with their types
            (1, "readlink", ("/s/found",)),  # 10: made outside the federation
            (1, "getattr", ("/s/found",)),  # 11
            (1, "open", ("/s/l",)),  # 12: ELOOP: never followed
            (0, "open", ("/s/p",)),  # 13: ELOOP: never opened
            (2, "symlink", ("x", "/s/f")),  # 14: EEXIST
            (1, "mknod", ("/s/l", _FIFO, 0)),  # 15: EEXIST
            (0, "readlink", ("/s/f",)),  # 16: EINVAL
            (0, "readlink", ("/s/sub",)),  # 17: EINVAL
            (1, "readlink", ("/s/none",)),  # 18: ENOENT
            (2, "symlink", ("x", "/nowhere/l")),  # 19: ENOENT
            (0, "mknod", ("/s/dev", stat.S_IFCHR | 0o600, 0x0103)),  # 20: EPERM: no caller identity
            (1, "symlink", ("a\x00b", "/s/nul")),  # 21: EINVAL
            (2, "symlink", ("x" * 4096, "/s/long")),  # 22: ENAMETOOLONG
            (0, "mknod", ("/s/reg", stat.S_IFREG | 0o644, 0)),  # 23: EINVAL: create makes files
            (2, "getattr", ("/s/l/x",)),  # 24: nothing is walked through a symlink
            (0, "rename", ("/s/l", "/s/l2")),  # 25: as a file's
            (1, "readlink", ("/s/l2",)),  # 26
            (2, "unlink", ("/s/l2",)),  # 27
            (0, "unlink", ("/s/p",)),  # 28
            (1, "unlink", ("/s/found",)),  # 29
            (2, "readdir", ("/s",)),  # 30: f, sub
            (1, "symlink", ("f", "/s/l")),  # 31: the name free again: no leftover reservation
            (2, "readlink", ("/s/l",)),  # 32
            (0, "mknod", ("/s/dev", stat.S_IFCHR | 0o600, 0x0103, 0, 0)),  # 33: EPERM: root, but devices are off
        ],
    )
)
SCENARIOS.append(
    Scenario(
        # issue 22, autonomy and failure semantics: a symlink a user makes in a node's tree
        # while the federation runs is found by a miss in an older VD, as a file is; one made
        # on the home a new symlink of the same name would get makes that symlink EEXIST at
        # the home, and the reservation is dropped (Forget): once the user's link is unlinked,
        # the name can be made again.
        "links: a symlink made outside is found; a refused symlink leaves no reservation",
        3,
        dirs={0: ["/a"], 1: ["/a"], 2: ["/a"]},
        protocol={"vd_max_age_s": 3600.0, "vd_miss_age_s": 1e-6},
        ops=[
            (0, "readdir", ("/a",)),  # 0: cached
            (2, OUTSIDE_LINK, ("/a/out", "../elsewhere")),  # 1
            (1, "readlink", ("/a/out",)),  # 2: a miss re-merges /a: found
            (0, "getattr", ("/a/out",)),  # 3
            (_manager_of("/a/l", 3), OUTSIDE_LINK, ("/a/l", "user's")),  # 4: on the home a symlink would get
            (1, "symlink", ("mine", "/a/l")),  # 5: EEXIST at the home; the reservation dropped
            (2, "readlink", ("/a/l",)),  # 6: the user's
            (0, "unlink", ("/a/l",)),  # 7
            (2, "symlink", ("mine", "/a/l")),  # 8: made
            (1, "readlink", ("/a/l",)),  # 9
            (0, "readdir_attrs", ("/a",)),  # 10
        ],
    )
)
_U, _G = 4321, 8765  # owners no agent's user has
SCENARIOS.append(
    Scenario(
        # issue 22: a new name's mode and owner travel with create/mkdir/create_open and are
        # the entry's from its first instant, at its home (no chmod or chown after it): what a
        # mount passes for the calling user.  The mode is stored exactly (set-id and sticky bits
        # too); a directory's mode and owner are its making holder's (getattr's answer).  Out
        # of range values are EINVAL before any message; a failed create (EEXIST, a missing
        # parent's file) leaves nothing; KEEP (-1) is the home's default.
        "owners: create and mkdir with a mode and an owner, in one request",
        3,
        files={0: [("/d/old", b"old")]},
        dirs={1: ["/d"]},
        ops=[
            (2, "create", ("/d/f", 0o640, _U, _G)),  # 0
            (0, "getattr", ("/d/f",)),
            (1, "mkdir", ("/d/sub", 0o2775, _U, _G)),
            (2, "getattr", ("/d/sub",)),
            (0, "create_open", ("/d/sub/g", 0o4755, _U + 1, _G)),  # 4: a setuid file, made so
            (0, "close", (FD,)),
            (1, "getattr", ("/d/sub/g",)),
            (2, "mkdir", ("/t", 0o1777, 0, 0)),  # 7: a sticky directory
            (1, "getattr", ("/t",)),
            (1, "create", ("/d/m", 0o600, -1, -1)),  # 9: a mode only: the home's owner (the test runs as root)
            (0, "getattr", ("/d/m",)),
            (1, "create", ("/d/old", 0o600, _U, _G)),  # 11: EEXIST: the old file's mode and owner unchanged
            (2, "getattr", ("/d/old",)),
            (2, "create", ("/d/bad", 0o10644, _U, _G)),  # 13: a file-type bit: EINVAL
            (2, "create", ("/d/bad", 0o644, -2, _G)),  # EINVAL
            (2, "mkdir", ("/d/bad", 0o755, _U, 1 << 32)),  # EINVAL (2**32 - 1 is chown's "unchanged")
            (2, "create_open", ("/d/bad", 0o644, _U, (1 << 32) - 1)),  # EINVAL
            (0, "create", ("/d/old/x", 0o644, _U, _G)),  # 17: a file as a parent: ENOTDIR
            (0, "readdir_attrs", ("/d",)),  # the owners as a listing gives them; no /d/bad
            (1, "setattr", ("/d/f", KEEP, 0, 0, UTIME_OMIT, UTIME_OMIT)),  # 19: setattr still changes them
            (2, "getattr", ("/d/f",)),
        ],
        owners=True,
    )
)


SCENARIOS.append(
    Scenario(
        # issue 24: a rename across directories by two-phase commit (``rename: 2pc``, the
        # default).  mod_n over 5 nodes: /s and /t are managed by node 3, /u by node 1;
        # /s/a's manager 3, /u/b's 4, /t/n's 1.  The file stays at its home (node 2),
        # moved between its local directories; the new parent is made there implicitly,
        # the old one pruned once empty.
        "rename across directories, atomic by two-phase commit",
        5,
        files={2: [("/s/a", b"a on n2"), ("/s/o", b"o")], 4: [("/u/b", b"b on n4")], 0: [("/t/x", b"x")]},
        dirs={3: ["/t/sub"], 1: ["/u/sub"]},
        links={2: [("/s/l", "a")]},
        ops=[
            (0, "getattr", ("/s/a",)),  # 0: node 0 caches /s/a -> 2
            (1, "stat", ("/u/b",)),  # node 1 caches /u/b -> 4
            (0, "rename", ("/s/a", "/u/b")),  # over a target on another home: PM2 1, PM1 3, M_new 4, H_a 2, H_b 4
            (0, "stat", ("/s/a",)),  # the stale entry: ENOENT from the home, then from the manager
            (1, "stat", ("/u/b",)),  # the stale entry to the old target's home: ESTALE, asked again
            (3, "open", ("/u/b",)),
            (3, "read", (FD, 0, 100)),  # the moved content
            (3, "close", (FD,)),
            (4, "readdir", ("/s",)),
            (4, "readdir", ("/u",)),
            (2, "rename", ("/u/b", "/t/n")),  # 10: target absent; /t made at node 2, /u pruned there
            (4, "rename", ("/s/l", "/t/l")),  # a symlink; both directories managed by node 3
            (1, "readlink", ("/t/l",)),
            (0, "rename", ("/t/n", "/nowhere/c")),  # 13: ENOENT: the target's directory is missing
            (0, "rename", ("/t/n", "/u/sub")),  # EISDIR: onto a directory
            (2, "rename", ("/s/none", "/u/c")),  # ENOENT: the source is missing
            (3, "rename", ("/t/sub", "/u/sub2")),  # a directory (the scenario below for the details)
            (0, "rename", ("/t/n", "/t/x/y")),  # ENOTDIR: the target's directory is a file
            (2, "open", ("/t/n",)),  # 18
            (3, "rename", ("/t/n", "/s/a")),  # EBUSY: open; every hold rolled back
            (2, "close", (FD,)),
            (3, "rename", ("/t/n", "/s/a")),  # 21: back where it was
            (0, "readdir", ("/t",)),
            (1, "readdir", ("/u",)),
            (4, "readdir", ("/s",)),
            (1, "create", ("/t/n",)),  # the old names are free again
            (4, "create", ("/u/b",)),
            (2, "getattr", ("/s/a",)),  # 27: the same file (inode number) after three moves
            (3, "readdir_attrs", ("/s",)),
            # 29: chmod of /u, which the file left at op 10: its VD (managed by node 1) still lists
            # node 2, whose implicit copy was pruned; that holder is passed over (was ENOENT, with
            # node 1's copy changed already), and every remaining copy changes
            (3, "setattr", ("/u", 0o700, KEEP, KEEP, *_OMIT2)),
            (0, "getattr", ("/u",)),  # 30: mode 0o700
        ],
        same_ino=[(0, 27)],
    )
)


SCENARIOS.append(
    replace(
        SCENARIOS[-1],
        # issue 24: the same renames by dynamic redistribution (``rename: redistribute``, Ursa
        # Minor 4.2.2): the target directory's manager borrows the source directory's table
        # (Lend, GiveBack), renames as its single manager, and gives it back at once; the
        # directory (op 16) is renamed by 2PC, its source's table borrowed all the same.
        name="rename across directories, atomic by dynamic redistribution",
        protocol={"rename": "redistribute"},
    )
)


SCENARIOS.append(
    Scenario(
        # issue 24: a rename of a directory, by two-phase commit (``rename: 2pc``).  mod_n
        # over 5 nodes: /p and /q are managed by node 4 (the coordinator of moves into /q),
        # /p/d's manager is 2.  /p/d has parts on nodes 0, 1 and 2; every member freezes
        # both subtrees (prepare), then renames its own part in its local tree (finish): no
        # file moves between nodes, the inode numbers stay.
        "rename of a directory, atomic by two-phase commit, and its errors",
        5,
        files={
            0: [("/p/d/f0", b"f0 on n0")],
            1: [("/p/d/s/f1", b"f1 on n1")],
            2: [("/p/d/s/f2", b"f2 on n2"), ("/q/full/x", b"x")],
            4: [("/p/o", b"o")],
        },
        dirs={3: ["/q/empty"]},
        ops=[
            (0, "getattr", ("/p/d/s/f1",)),  # 0
            (1, "stat", ("/p/d/f0",)),  # node 1 caches /p/d/f0 -> 0
            (2, "rename", ("/p/d", "/q/d")),  # across directories
            (3, "readdir", ("/p",)),
            (4, "readdir", ("/q/d",)),
            (0, "readdir", ("/q/d/s",)),
            (1, "stat", ("/p/d/f0",)),  # 6: ENOENT (its cached entry was forgotten by the finish)
            (0, "getattr", ("/q/d/s/f1",)),  # the same file, the same inode number
            (3, "open", ("/q/d/s/f2",)),
            (3, "read", (FD, 0, 100)),
            (3, "close", (FD,)),
            (1, "rename", ("/q/d", "/q/d/s/x")),  # 11: EINVAL: into its own subtree
            (1, "rename", ("/q/d", "/p/o")),  # ENOTDIR: a directory over a file
            (1, "rename", ("/p/o", "/q/d")),  # EISDIR: a file over a directory
            (2, "rename", ("/q/d", "/q/full")),  # ENOTEMPTY
            (2, "open", ("/q/d/f0",)),  # 15
            (4, "rename", ("/q/d", "/p/d")),  # EBUSY: a file under it is open; every freeze undone
            (2, "close", (FD,)),
            (4, "rename", ("/q/d", "/q/empty")),  # 18: within a directory, over an empty directory
            (0, "readdir", ("/q",)),
            (0, "rename", ("/q/empty", "/q/empty")),  # no-op
            (3, "rename", ("/q/nope", "/p/nope")),  # ENOENT
            (3, "rename", ("/", "/p/r")),  # EBUSY: the root
            (1, "create", ("/q/empty/s/new",)),  # 23
            (2, "readdir", ("/q/empty/s",)),
            (3, "mkdir", ("/p/d",)),  # the old name is free again
            (4, "readdir", ("/p",)),
            (1, "getattr", ("/q/empty/s/f1",)),  # 27
            (0, "rmdir", ("/q/full",)),  # ENOTEMPTY still
            (0, "rename", ("/q", "/q/empty/s/q2")),  # EINVAL: into its own subtree, deeper
            (2, "readdir", ("/",)),
        ],
        same_ino=[(0, 7, 27)],
    )
)

SCENARIOS.append(
    Scenario(
        # issue 22: hard links.  The new name's manager records the old name's home and the home
        # makes a local hard link (/h/sub exists on node 1 only: the home makes it locally, as a
        # create would, and prunes it when its last file there goes).  Both names are one local
        # inode: the same federated ino and nlink from every node, data written through one read
        # through the other; unlink of one keeps the others; a rename of one keeps the others,
        # a rename onto another name of the same file does nothing (rename(2)).  Errors as
        # linkat(2) gives them; a file with several names is not migrated (EMLINK) until it has one.
        "hard links: one inode and nlink from every node, unlink and rename keep the other names",
        3,
        files={0: [("/h/a", b"data")]},
        dirs={1: ["/h", "/h/sub"]},
        ops=[
            (1, "link", ("/h/a", "/h/b")),  # 0: the home of /h/a
            (2, "getattr", ("/h/a",)),  # 1: nlink 2
            (0, "getattr", ("/h/b",)),  # 2: nlink 2, the same ino
            (2, "open", ("/h/b",)),  # 3
            (2, "write", (FD, 0, b"DATA via b")),
            (2, "close", (FD,)),
            (1, "open", ("/h/a",)),  # 6
            (1, "read", (FD, 0, 100)),  # 7: what was written through /h/b
            (1, "close", (FD,)),
            (0, "readdir", ("/h",)),  # 9: a, b, sub
            (1, "link", ("/h/a", "/h/sub/c")),  # 10: /h/sub made at the home
            (2, "getattr", ("/h/sub/c",)),  # 11: nlink 3
            (0, "rename", ("/h/a", "/h/b")),  # 12: one file: nothing done
            (2, "readdir", ("/h",)),  # 13: a, b, sub
            (1, "rename", ("/h/b", "/h/b2")),  # 14: the others stay
            (2, "getattr", ("/h/b2",)),  # 15: nlink 3
            (0, "unlink", ("/h/a",)),  # 16
            (1, "getattr", ("/h/b2",)),  # 17: nlink 2
            (2, "stat", ("/h/a",)),  # 18: ENOENT
            (2, "link", ("/h/b2", "/h/sub/c")),  # 19: EEXIST
            (0, "link", ("/h/none", "/h/x")),  # 20: ENOENT
            (1, "link", ("/h/sub", "/h/x")),  # 21: EPERM: a directory
            (2, "link", ("/h/sub", "/h/b2")),  # 22: EEXIST (before EPERM, as linkat(2))
            (0, "link", ("/h/b2", "/nowhere/x")),  # 23: ENOENT: no such directory
            (1, "migrate", ("/h/b2", 2)),  # 24: EMLINK
            (2, "unlink", ("/h/sub/c",)),  # 25
            (0, "getattr", ("/h/b2",)),  # 26: nlink 1
            (0, "readdir", ("/h/sub",)),  # 27: empty
            (1, "link", ("/h/b2", "/h/x")),  # 28: no reservation was left by the refusals
            (2, "readdir_attrs", ("/h",)),  # 29
            (2, "unlink", ("/h/x",)),  # 30
            (1, "migrate", ("/h/b2", 2)),  # 31: one name again: moved
            (0, "stat", ("/h/b2",)),  # 32
            (1, "link", ("/h/b2", "/h/sub/d")),  # 33
            (0, "rename", ("/h/b2", "/h/sub/d")),  # 34: across directories, one file: nothing done
            (2, "readdir", ("/h",)),  # 35: b2 stays
            (2, "readdir", ("/h/sub",)),  # 36: d
            (1, "getattr", ("/h/sub/d",)),  # 37: nlink 2
        ],
        same_ino=[(1, 2, 11)],
    )
)


# ---------------------------------------------------------------------------- the other designs (issue 25)
# NFS: node 0 is the server and holds the whole tree; nodes 1 and 2 forward every operation to it.
SCENARIOS.append(
    Scenario(
        "nfs: one server holds everything",
        3,
        files={0: [("/a/x", b"x at the server")]},
        dirs={0: ["/e"]},
        architecture="nfs",
        ops=[
            (1, "readdir", ("/",)),
            (2, "readdir", ("/a",)),
            (1, "stat", ("/a/x",)),
            (2, "open", ("/a/x",)),
            (2, "read", (FD, 0, 100)),
            (2, "close", (FD,)),
            (1, "create", ("/a/z",)),
            (1, "open", ("/a/z",)),
            (1, "write", (FD, 0, b"zzz")),
            (1, "fsync", (FD,)),
            (1, "close", (FD,)),
            (0, "open", ("/a/z",)),
            (0, "read", (FD, 1, 10)),
            (0, "close", (FD,)),
            (2, "getattr", ("/a/z",)),
            (1, "readdir_attrs", ("/a",)),
            (2, "create", ("/a/z",)),
            (1, "create", ("/nodir/f",)),
            (1, "create", ("/a/x/f",)),
            (2, "mkdir", ("/c",)),
            (2, "mkdir", ("/c",)),
            (1, "rename", ("/a/z", "/c/z")),
            (2, "stat", ("/a/z",)),
            (1, "rename", ("/c", "/d")),
            (1, "truncate", ("/c/z", 1)),
            (0, "stat", ("/c/z",)),
            (2, "create_open", ("/c/n",)),
            (2, "write", (FD, 0, b"new")),
            (2, "close", (FD,)),
            (1, "setattr", ("/c/n", 0o600, KEEP, KEEP, UTIME_OMIT, UTIME_OMIT)),
            (2, "getattr", ("/c/n",)),
            (2, "unlink", ("/a/x",)),
            (1, "rmdir", ("/a",)),
            (2, "rmdir", ("/c",)),
            (1, "unlink", ("/e",)),
            (1, "symlink", ("target", "/c/l")),
            (2, "readlink", ("/c/l",)),
            (1, "link", ("/c/z", "/c/w")),
            (2, "getattr", ("/c/w",)),
            (0, "statfs", ()),
            (1, "open", ("/c",)),
            (2, "close", (99,)),
            (2, "readdir", ("/",)),
            (1, "readdir", ("/c",)),
        ],
    )
)

# NFSp: node 0 is the meta-server (names, attributes, empty shadows cut to each file's size), nodes 1
# and 2 the I/O daemons (data, at the daemon the path hashes to: /d/f and /d/g at node 2, /d/h at node 1,
# so renaming /d/f to /d/h moves its data and /d/g to /d/k does not).
SCENARIOS.append(
    Scenario(
        "nfsp: a meta-server and I/O daemons",
        3,
        dirs={0: ["/d"]},
        architecture="nfsp",
        ops=[
            (1, "create", ("/d/f",)),
            (1, "open", ("/d/f",)),
            (1, "write", (FD, 0, b"hello world")),
            (2, "stat", ("/d/f",)),
            (2, "open", ("/d/f",)),
            (2, "read", (FD, 6, 100)),
            (2, "close", (FD,)),
            (1, "close", (FD,)),
            (0, "getattr", ("/d/f",)),
            (2, "create_open", ("/d/g",)),
            (2, "write", (FD, 0, b"g")),
            (2, "close", (FD,)),
            (1, "rename", ("/d/f", "/d/h")),
            (1, "open", ("/d/h",)),
            (1, "read", (FD, 0, 100)),
            (1, "close", (FD,)),
            (2, "rename", ("/d/g", "/d/k")),
            (1, "open", ("/d/k",)),
            (1, "read", (FD, 0, 100)),
            (1, "close", (FD,)),
            (0, "open", ("/d/k",)),
            (0, "read", (FD, 0, 100)),
            (0, "write", (FD, 3, b"k")),
            (0, "fsync", (FD,)),
            (0, "close", (FD,)),
            (2, "truncate", ("/d/h", 5)),
            (1, "open", ("/d/h",)),
            (1, "read", (FD, 0, 100)),
            (1, "close", (FD,)),
            (2, "link", ("/d/h", "/d/l")),
            (1, "symlink", ("target", "/d/s")),
            (2, "rename", ("/d/s", "/d/t")),
            (1, "readdir", ("/d",)),
            (2, "readdir_attrs", ("/d",)),
            (1, "rmdir", ("/d",)),
            (2, "unlink", ("/d/h",)),
            (1, "unlink", ("/d/k",)),
            (0, "unlink", ("/d/t",)),
            (1, "create", ("/d/e",)),
            (2, "open", ("/d/e",)),
            (2, "read", (FD, 0, 10)),
            (2, "close", (FD,)),
            (0, "readdir", ("/",)),
        ],
    )
)

# FedFS's DT coherence policies (issue 25; ``fedsim.protocol.policies.coherence``): the same script under dnfsp1
# (a DT miss asks every other member first: DtFetch) and dnfsp2 (tokens at the managers: DtToken, DtRecall).
# /m/f's manager is node 0, /m/g's node 1, /m/h's node 3 (mod_n over 4 nodes).  Entries cached at nodes 1 and 3
# name node 2; the migration, the rename and the unlink change them: dnfsp1 keeps them until they fail (stale
# retries), dnfsp2 takes their tokens back first.
_DTC_OPS = [
    (1, "stat", ("/m/f",)),
    (3, "stat", ("/m/f",)),
    (3, "stat", ("/m/g",)),
    (2, "migrate", ("/m/f", 3)),
    (1, "stat", ("/m/f",)),
    (3, "stat", ("/m/f",)),
    (1, "open", ("/m/f",)),
    (1, "read", (FD, 0, 100)),
    (1, "close", (FD,)),
    (1, "rename", ("/m/g", "/m/h")),
    (3, "stat", ("/m/g",)),
    (0, "stat", ("/m/h",)),
    (0, "unlink", ("/m/f",)),
    (1, "stat", ("/m/f",)),
    (3, "create", ("/m/f",)),
    (1, "stat", ("/m/f",)),
    (2, "readdir", ("/m",)),
]
for _policy in ("dnfsp1", "dnfsp2"):
    SCENARIOS.append(
        Scenario(
            f"dt_coherence {_policy}: cached entries across a migration, a rename and an unlink",
            4,
            files={2: [("/m/f", b"twelve bytes"), ("/m/g", b"g on n2")]},
            dirs={0: ["/m"], 1: ["/m"], 3: ["/m"]},
            protocol={"dt_coherence": _policy},
            ops=list(_DTC_OPS),
        )
    )

# dNFSp: nodes 0 and 1 are the meta-servers (node 2's clients at 0, node 3's at 1), nodes 2 and 3 the I/O
# daemons.  The same script on both schemes: dnfsp1's meta-server 0 keeps /d/f's size of its first fetch
# (5) after meta-server 1 grew it; dnfsp2's fetches the token and sees 11.
_DNFSP_OPS = [
    (2, "mkdir", ("/d",)),
    (3, "create", ("/d/f",)),
    (3, "open", ("/d/f",)),
    (3, "write", (FD, 0, b"hello")),
    (2, "stat", ("/d/f",)),
    (2, "open", ("/d/f",)),
    (2, "read", (FD, 0, 100)),
    (2, "close", (FD,)),
    (3, "write", (FD, 5, b" world")),
    (3, "close", (FD,)),
    (2, "stat", ("/d/f",)),
    (3, "stat", ("/d/f",)),
    (2, "create", ("/d/f",)),
    (2, "symlink", ("target", "/d/s")),
    (3, "readlink", ("/d/s",)),
    (3, "rename", ("/d/s", "/d/t")),
    (2, "readlink", ("/d/s",)),
    (0, "create_open", ("/d/g",)),
    (0, "write", (FD, 0, b"g")),
    (0, "close", (FD,)),
    (1, "getattr", ("/d/g",)),
    (3, "unlink", ("/d/g",)),
    (2, "stat", ("/d/g",)),
    (3, "stat", ("/d/g",)),
    (2, "readdir", ("/d",)),
]
for _scheme in (1, 2):
    SCENARIOS.append(
        Scenario(
            f"dnfsp{_scheme}: two meta-servers, two I/O daemons",
            4,
            architecture=f"dnfsp{_scheme}",
            ops=list(_DNFSP_OPS),
        )
    )

# mNFS: nodes 0, 1 and 2 are all servers and entries.  Metadata writes reach every server, metadata reads one
# (round-robin by the entry's transaction id), data is striped in 8 KiB chunks at server (chunk + ino) mod 3:
# /d/f's chunk 0 at node 2 (its ino is 2 mod 3), /d/h's at node 1, so renaming /d/f to /d/h moves every
# chunk; /d/g to /d/n moves none.  /d/h is left in the trees: its chunks at their servers, holes elsewhere.
_MNFS_DATA = bytes((i * 7 + i // 8192) % 251 for i in range(8192 * 2 + 3000))
SCENARIOS.append(
    Scenario(
        "mnfs: requests multicast to every server, data striped",
        3,
        architecture="mnfs",
        ops=[
            (0, "mkdir", ("/d",)),
            (1, "create", ("/d/f",)),
            (1, "open", ("/d/f",)),
            (1, "write", (FD, 100, _MNFS_DATA)),
            (1, "close", (FD,)),
            (2, "stat", ("/d/f",)),
            (2, "stat", ("/d/f",)),
            (2, "stat", ("/d/f",)),
            (0, "open", ("/d/f",)),
            (0, "read", (FD, 8000, 9000)),
            (0, "read", (FD, 0, 1 << 16)),
            (0, "write", (FD, 8190, b"across")),
            (0, "fsync", (FD,)),
            (0, "close", (FD,)),
            (2, "create_open", ("/d/g",)),
            (2, "write", (FD, 0, b"small")),
            (2, "close", (FD,)),
            (1, "rename", ("/d/f", "/d/h")),
            (1, "rename", ("/d/g", "/d/n")),
            (2, "open", ("/d/h",)),
            (2, "read", (FD, 8100, 200)),
            (2, "close", (FD,)),
            (0, "getattr", ("/d/h",)),
            (1, "readdir", ("/d",)),
            (2, "readdir_attrs", ("/d",)),
            (1, "truncate", ("/d/h", 8193)),
            (0, "stat", ("/d/h",)),
            (1, "setattr", ("/d/n", 0o600, KEEP, KEEP, UTIME_OMIT, UTIME_OMIT)),
            (0, "getattr", ("/d/n",)),
            (2, "create", ("/d/h",)),
            (0, "mkdir", ("/d",)),
            (1, "create", ("/nodir/f",)),
            (2, "stat", ("/d/none",)),
            (1, "open", ("/d",)),
            (0, "link", ("/d/h", "/d/l")),
            (2, "rename", ("/d", "/e")),
            (1, "rmdir", ("/d",)),
            (0, "statfs", ()),
            (1, "unlink", ("/d/n",)),
            (0, "rmdir", ("/d",)),
            (1, "open", ("/d/h",)),
            (1, "write", (FD, 8192 * 3 - 1, b"end")),
            (1, "close", (FD,)),
            (1, "readdir", ("/",)),
        ],
    )
)

_OMIT = (KEEP, KEEP, UTIME_OMIT, UTIME_OMIT)
SCENARIOS.append(
    Scenario(
        # issue 22, timestamps as POSIX says: a directory's mtime and ctime move on every change of its
        # entries wherever the entry's home is (/t is node 0's; its files' homes are nodes 1 and 2:
        # implicit copies, pruned again, which the directory's manager then touches at node 0); a
        # file's ctime on chmod, link, unlink of another name and rename, both on truncate and
        # write; nothing on a failed call.  (mod_n over 4 nodes: /t/a, /t/c, /t/z, /t/p: home 2,
        # /t/sub, /t/y, /r1: home 1.)
        "timestamps: parents and files move as POSIX says",
        4,
        dirs={0: ["/t", "/u"]},
        pause_s=0.01,
        ops=[
            (3, "getattr", ("/t",)),
            (1, "create", ("/t/a",)),
            (3, "getattr", ("/t",)),
            (2, "create", ("/t/a",)),  # EEXIST
            (3, "getattr", ("/t",)),
            (0, "getattr", ("/t/a",)),  # 5
            (1, "setattr", ("/t/a", 0o600, *_OMIT)),
            (0, "getattr", ("/t/a",)),
            (3, "getattr", ("/t",)),
            (2, "truncate", ("/t/a", 5)),
            (0, "getattr", ("/t/a",)),  # 10
            (1, "link", ("/t/a", "/t/c")),
            (0, "getattr", ("/t/a",)),
            (3, "getattr", ("/t",)),
            (1, "rename", ("/t/c", "/t/z")),
            (0, "getattr", ("/t/z",)),  # 15
            (3, "getattr", ("/t",)),
            (2, "unlink", ("/t/z",)),
            (0, "getattr", ("/t/a",)),
            (3, "getattr", ("/t",)),
            (1, "unlink", ("/t/a",)),  # 20: node 2's copy of /t is pruned
            (3, "getattr", ("/t",)),
            (1, "mkdir", ("/t/sub",)),
            (3, "getattr", ("/t",)),
            (2, "rmdir", ("/t/sub",)),  # node 1's copy of /t is pruned
            (3, "getattr", ("/t",)),  # 25
            (0, "unlink", ("/t/none",)),
            (2, "rmdir", ("/t/none",)),
            (3, "getattr", ("/t",)),
            (0, "symlink", ("x", "/t/p")),
            (3, "getattr", ("/t",)),  # 30
            (3, "getattr", ("/",)),
            (1, "create", ("/r1",)),
            (3, "getattr", ("/",)),
            (3, "getattr", ("/u",)),
            (1, "rename", ("/t/p", "/u/x")),  # 35: across directories, node 2's /t pruned
            (3, "getattr", ("/t",)),
            (3, "getattr", ("/u",)),
            (1, "rename", ("/t/none", "/u/y")),
            (3, "getattr", ("/u",)),
            (1, "create", ("/t/y",)),  # 40
            (0, "getattr", ("/t/y",)),
            (0, "open", ("/t/y",)),
            (0, "write", (FD, 0, b"data")),
            (0, "close", (FD,)),
            (0, "getattr", ("/t/y",)),  # 45
        ],
        times=[
            (0, 2, "++"),
            (2, 4, "=="),
            (5, 7, "=+"),
            (4, 8, "=="),
            (7, 10, "++"),
            (10, 12, "=+"),
            (8, 13, "++"),
            (12, 15, "=+"),
            (13, 16, "++"),
            (15, 18, "=+"),
            (16, 19, "++"),
            (19, 21, "++"),
            (21, 23, "++"),
            (23, 25, "++"),
            (25, 28, "=="),
            (28, 30, "++"),
            (31, 33, "++"),
            (30, 36, "++"),
            (34, 37, "++"),
            (37, 39, "=="),
            (41, 45, "++"),
        ],
    )
)
SCENARIOS.append(
    Scenario(
        # issue 22, open files unlinked: a file unlinked (or renamed over) while open at another node
        # stays readable, writable, fstat-able and truncatable through that node's descriptor (by its
        # orphan number at the home: ``fedfs/home.py``) until its close, which removes it (the trees at
        # the end have no orphan space); the name is free meanwhile (a new /d/f, /d/g is another file).
        # /d/g's old file is replaced by a rename from another home (RenameDrop at node 1), /d/k's by
        # one from its own home (RenameFinish at node 1).
        "open files unlinked or renamed over stay usable until the last close",
        3,
        files={
            1: [("/d/f", b"old f"), ("/d/g", b"old g"), ("/d/k", b"old k"), ("/d/j", b"new k")],
            0: [("/d/h", b"new g")],
        },
        ops=[
            (2, "open", ("/d/f",)),
            (0, "unlink", ("/d/f",)),
            (2, "read", (FD, 0, 100)),
            (2, "write", (FD, 5, b" kept")),
            (2, "fgetattr", (FD,)),
            (0, "readdir", ("/d",)),  # 5
            (0, "stat", ("/d/f",)),  # ENOENT
            (0, "create", ("/d/f",)),
            (2, "read", (FD, 0, 100)),  # the orphan's data, not the new file's
            (2, "ftruncate", (FD, 3)),
            (2, "fsync", (FD,)),  # 10
            (2, "fsetattr", (FD, 0o600, *_OMIT)),  # fchmod
            (2, "fgetattr", (FD,)),
            (2, "read", (FD, 0, 100)),
            (2, "close", (FD,)),
            (2, "read", (FD, 0, 100)),  # 15: EBADF
            (1, "stat", ("/d/f",)),
            (2, "open", ("/d/g",)),
            (0, "rename", ("/d/h", "/d/g")),
            (2, "read", (FD, 0, 100)),
            (1, "open", ("/d/g",)),
            (1, "read", (FD, 0, 100)),
            (1, "close", (FD,)),
            (2, "write", (FD, 0, b"OLD")),
            (2, "close", (FD,)),
            (0, "open", ("/d/k",)),
            (2, "rename", ("/d/j", "/d/k")),
            (0, "read", (FD, 0, 100)),
            (0, "close", (FD,)),
            (2, "open", ("/d/k",)),
            (2, "read", (FD, 0, 100)),
            (2, "close", (FD,)),
            (1, "readdir", ("/d",)),
        ],
    )
)
SCENARIOS.append(
    Scenario(
        # issue 22: a home that crashes while it keeps a file unlinked while open leaves nothing behind
        # once it is back (no descriptor survives a restart: it empties its orphan space as it starts);
        # the descriptor's next call is EBADF, its close too, and the trees have no orphan space.
        "open files unlinked: a crash of their home leaves nothing behind",
        3,
        files={1: [("/d/f", b"f on n1"), ("/d/g", b"g on n1")]},
        protocol={"heartbeat_s": 5.0, "heartbeat_misses": 3},
        ops=[
            (2, "open", ("/d/f",)),
            (0, "unlink", ("/d/f",)),
            (2, "write", (FD, 0, b"F")),
            (1, CRASH, ()),
            (0, DETECT, (1,)),
            (0, RESTART, (1,)),
            (2, "read", (FD, 0, 100)),  # EBADF: its home restarted
            (2, "close", (FD,)),
            (0, "readdir", ("/d",)),
            (2, "stat", ("/d/g",)),
        ],
    )
)
SCENARIOS.append(
    Scenario(
        # issue 22: the requester holding files open crashes: once the heartbeats have evicted it, the
        # homes drop its pins (a lease the failure detector ends): the file it held after an unlink is
        # freed (the trees have no orphan space), and the one it held open can be renamed again.
        "open files unlinked: a crash of the node holding them leaves nothing behind",
        3,
        files={1: [("/d/f", b"f on n1"), ("/d/g", b"g on n1")]},
        protocol={"heartbeat_s": 5.0, "heartbeat_misses": 3},
        ops=[
            (2, "open", ("/d/g",)),
            (2, "open", ("/d/f",)),
            (0, "unlink", ("/d/f",)),
            (1, "rename", ("/d/g", "/d/h")),  # EBUSY: open at node 2
            (2, CRASH, ()),
            (0, DETECT, (2,)),
            (1, "rename", ("/d/g", "/d/h")),
            (0, "readdir", ("/d",)),
            (0, RESTART, (2,)),
            (2, "stat", ("/d/h",)),
        ],
    )
)


_NULL, _LOOP0 = os.makedev(1, 3), os.makedev(7, 0)  # /dev/null's and /dev/loop0's numbers
_ALICE = 4321  # a caller that is not root
SCENARIOS.append(
    Scenario(
        # issue 22: a device is made for a caller of uid 0 where the federation allows devices
        # (protocol.devices), at its home as a fifo is, owned by its caller from its first instant,
        # its number carried in getattr's size (attrs.Attr.rdev) and kept in the trees; renamed and
        # unlinked as any name, never opened (ELOOP).  Anyone else, and a call naming no caller,
        # is EPERM before any message; a fifo is anyone's, owned by its caller.  (With the setting
        # off even root is EPERM: the "links" scenario's last call.)
        "devices: mknod of a character or block device by root; refused for others",
        3,
        dirs={0: ["/v"], 2: ["/v"]},
        protocol={"devices": True},
        owners=True,
        ops=[
            (1, "mknod", ("/v/null", stat.S_IFCHR | 0o666, _NULL, 0, 0)),  # 0
            (2, "getattr", ("/v/null",)),  # 1: S_IFCHR, size = rdev, at its home
            (0, "mknod", ("/v/loop", stat.S_IFBLK | 0o660, _LOOP0, 0, 6)),  # 2: a block device, group disk
            (1, "getattr", ("/v/loop",)),  # 3
            (2, "readdir_attrs", ("/v",)),  # 4: with their types and numbers
            (0, "open", ("/v/null",)),  # 5: ELOOP: never opened by an agent
            (1, "mknod", ("/v/mine", stat.S_IFCHR | 0o600, _NULL, _ALICE, _ALICE)),  # 6: EPERM: not root
            (2, "mknod", ("/v/mine", stat.S_IFBLK | 0o600, _LOOP0)),  # 7: EPERM: no caller named
            (0, "mknod", ("/v/fifo", stat.S_IFIFO | 0o640, 99, _ALICE, _ALICE)),  # 8: anyone's; dev ignored
            (1, "getattr", ("/v/fifo",)),  # 9: owned by its caller, size 0
            (2, "rename", ("/v/null", "/v/zero")),  # 10: as a file's
            (0, "getattr", ("/v/zero",)),  # 11: the same node: number, rdev, owner
            (1, "mknod", ("/v/loop", stat.S_IFCHR | 0o600, _NULL, 0, 0)),  # 12: EEXIST
            (2, "mknod", ("/v/big", stat.S_IFCHR | 0o600, -1, 0, 0)),  # 13: EINVAL: no such number
            (0, "unlink", ("/v/zero",)),  # 14
            (1, "unlink", ("/v/loop",)),  # 15
            (2, "readdir", ("/v",)),  # 16: fifo only
            (0, "mknod", ("/v/null", stat.S_IFCHR | 0o666, _NULL, 0, 0)),  # 17: the name free again
        ],
        same_ino=[(1, 11)],
    )
)
# a valid file capability (VFS_CAP_REVISION_2: cap_net_bind_service permitted): a real file system checks its form
_CAPS = (0x02000000).to_bytes(4, "little") + (1 << 10).to_bytes(4, "little") + bytes(12)
SCENARIOS.append(
    Scenario(
        # issue 22: the namespaces a root user may set, at a file's home and a directory's holders,
        # decided by the caller's uid the requests carry: trusted. is root's alone (ENODATA and
        # unlisted for others, EPERM to change); security. (served with protocol.security_xattrs)
        # is read by anyone, changed by root only, except that anyone may remove
        # security.capability (the kernel does, on a write); system. stays EOPNOTSUPP.  A refusal
        # is the home's, once the name resolved (ENOENT first), and changes nothing.  A migration
        # carries them.
        "extended attributes: trusted. and security. for root; refused for others",
        3,
        files={0: [("/t/a", b"aaaa")]},
        dirs={1: ["/t"], 2: ["/t"]},
        protocol={"security_xattrs": True},
        local_xattrs=True,
        owners=True,
        ops=[
            (1, "setxattr", ("/t/a", "trusted.k", b"t1", 0, 0)),  # 0: root, at its home (node 0)
            (2, "getxattr", ("/t/a", "trusted.k", 0)),  # 1: t1
            (0, "getxattr", ("/t/a", "trusted.k", _ALICE)),  # 2: ENODATA: invisible to others
            (1, "getxattr", ("/t/a", "trusted.k")),  # 3: ENODATA: no caller named
            (2, "setxattr", ("/t/a", "trusted.k", b"x", 0, _ALICE)),  # 4: EPERM at the home
            (0, "removexattr", ("/t/a", "trusted.k", _ALICE)),  # 5: EPERM
            (1, "setxattr", ("/t/a", "security.fedfs", b"s", 0, 0)),  # 6: root
            (2, "getxattr", ("/t/a", "security.fedfs", _ALICE)),  # 7: s: anyone reads security.
            (0, "setxattr", ("/t/a", "security.fedfs", b"y", 0, _ALICE)),  # 8: EPERM
            (1, "removexattr", ("/t/a", "security.fedfs", _ALICE)),  # 9: EPERM
            (2, "setxattr", ("/t/a", "user.u", b"u", 0, _ALICE)),  # 10: user. is anyone's
            (0, "listxattr", ("/t/a", 0)),  # 11: security.fedfs, trusted.k, user.u
            (1, "listxattr", ("/t/a", _ALICE)),  # 12: security.fedfs, user.u
            (2, "listxattr", ("/t/a",)),  # 13: as 12
            (0, "getxattr", ("/t/a", "trusted.k", _ALICE)),  # 14: still ENODATA; t1 unchanged below
            (1, "getxattr", ("/t/a", "trusted.k", 0)),  # 15: t1
            (2, "setxattr", ("/t", "trusted.d", b"d", 0, 0)),  # 16: at every holder
            (0, "getxattr", ("/t", "trusted.d", 0)),  # 17: d
            (1, "listxattr", ("/t", _ALICE)),  # 18: none
            (2, "setxattr", ("/t", "trusted.d", b"e", 0, _ALICE)),  # 19: EPERM at its manager, before any holder
            (0, "getxattr", ("/t", "trusted.d", 0)),  # 20: d: nothing changed
            (1, "removexattr", ("/t", "trusted.d", 0)),  # 21: at every holder
            (2, "listxattr", ("/t", 0)),  # 22: none
            (0, "setxattr", ("/t/a", "security.capability", _CAPS, 0, 0)),  # 23: root
            (1, "getxattr", ("/t/a", "security.capability", _ALICE)),  # 24
            (2, "removexattr", ("/t/a", "security.capability", _ALICE)),  # 25: anyone may remove it
            (0, "getxattr", ("/t/a", "security.capability", 0)),  # 26: ENODATA
            (1, "setxattr", ("/t/a", "system.posix_acl_access", b"", 0, 0)),  # 27: EOPNOTSUPP: no ACLs
            (2, "migrate", ("/t/a", 2)),  # 28: trusted. and security. move with the data
            (0, "listxattr", ("/t/a", 0)),  # 29: at node 2
            (1, "getxattr", ("/t/a", "trusted.k", 0)),  # 30: t1
            (2, "getxattr", ("/t/none", "trusted.k", _ALICE)),  # 31: ENOENT: resolved before the caller's check
            (0, "setxattr", ("/t/a", "trusted.k", b"v", 0, -2)),  # 32: EINVAL: no such uid
        ],
    )
)
