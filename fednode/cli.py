"""``fednode``: the real agent's command line.

    fednode serve  --cluster FILE --node ID       run one agent in the foreground
                   [--join]                      ... joining a running federation (the file's other nodes: seeds)
                   [--mount MOUNTPOINT]          ... and the federation mounted there, in the same process
    fednode leave  --cluster FILE --node ID       that agent leaves its federation gracefully
    fednode local  --nodes N --base DIR [--mount MOUNTPOINT [--inproc | --allow-other] [--consistency cto|sync]]
                                                  N agents on this machine (writes DIR/cluster.yaml),
                                                  with --mount: the federation mounted there too
                                                  (--inproc: in the first agent's process)
    fednode mount  --cluster FILE --node ID MOUNTPOINT [--foreground] [--route home|entry]
                   [--consistency cto|sync] [--allow-other]
                                                  the federation as a directory (FUSE): each call to the
                                                  file's home or name's manager (entry: all via node ID);
                                                  --allow-other: every user of the machine may enter it
    fednode umount MOUNTPOINT                     unmount (also after the mount process crashed)
    fednode fs     --cluster FILE CMD ARGS...     ls, stat, mkdir, put, get, cat, rm, rmdir, mv
    fednode migrate --cluster FILE PATH --to NODE move a file, or every file under a directory, to NODE
    fednode status --cluster FILE                 each node: reachable?, view epoch and members, transport/device,
                                                  files, names, tables, migrations in flight, the loads it knows
    fednode init   --hosts H1,H2,... [--device D] a cluster file for a real testbed (new secret, mode 0600)
    fednode hosts  --cluster FILE                 'ID HOST' per node, for launcher loops (see deploy/)
    fednode client-file --cluster FILE --out F    a file for client programs: the client key, not the secret
    fednode testbed rxe [-- COMMAND]              boot a Soft-RoCE guest (QEMU), run the RDMA suite or COMMAND
    fednode bench  [--cluster FILE]... [--transport verbs,tcp] [--out P]
                                                  raw round trip vs FedFS ops at 0-3 hops vs local ops,
                                                  one column per transport or per running federation
    fednode calibrate [--cluster FILE] [--mount] [--out P]
                                                  what the simulator's machine model needs, measured here:
                                                  LogGP fit, CPU per message, request, call, local op

Exit status: 0 on success, 1 when an operation failed (the message says
why), 2 for a usage or cluster-file error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from fednode import eventloop
from fednode.config import load_cluster
from fedsim.schema import ConfigError


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )


# ---------------------------------------------------------------------------- serve
def serve(
    cluster_file: str, node: int, loop_choice: str | None = None, join: bool = False, mountpoint: str | None = None
) -> int:
    """Run agent ``node`` in the foreground; with ``mountpoint``, a FUSE mount
    of the federation in the same process too (``fednode.serve``)."""
    cluster = load_cluster(cluster_file)
    cluster.spec.node(node)  # a clear error for an unknown id before anything starts
    if mountpoint is not None:
        from fednode.serve import mountpoint_error

        why = mountpoint_error(mountpoint)
        if why is not None:  # before the agent starts: nothing is left half-started
            print(f"fednode serve: {why}", file=sys.stderr)
            return 2
    from fednode.cluster import READY_LISTENING
    from fednode.localfs import LocalFS, RootUnusable
    from fednode.runtime import Agent
    from fednode.transport import make_transport

    # The root first, before any loop or port: a missing one is the commonest start-up mistake,
    # and its fix is one command, not a traceback.
    try:
        fs = LocalFS(cluster.root_of(node))
    except RootUnusable as exc:
        print(f"fednode serve: {root_advice(exc, node, cluster_file)}", file=sys.stderr)
        return 2

    log = logging.getLogger("fednode")
    try:
        factory, which = eventloop.choose(loop_choice)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if mountpoint is not None:  # its own choice of loop (fednode.serve.SharedLoop)
        from fednode.serve import serve_mounted

        return serve_mounted(cluster, cluster_file, node, fs, loop_choice, mountpoint, join)
    log.info("node %d: event loop: %s", node, which)

    async def main() -> int:
        agent = Agent(cluster, node, make_transport(cluster, node), fs=fs, join=join)
        await agent.start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        me = cluster.spec.node(node)
        print(f"{READY_LISTENING} {me.host}:{me.port} {agent.transport.name}", flush=True)
        if agent.joined is not None:
            try:
                await agent.joined
            except Exception as exc:
                print(f"fednode serve: node {node} could not join the federation: {exc}", file=sys.stderr)
                await agent.stop()
                return 1
        ready = loop.create_task(_announce_ready(agent))
        await stop.wait()
        ready.cancel()
        log.info("node %d stopping", node)
        await agent.stop()
        return 0

    return eventloop.run(main(), factory)


def leave(cluster_file: str, node: int) -> int:
    """Make agent ``node`` leave its federation gracefully (it hands off the
    names it manages; its files follow ``protocol.leave_files``)."""
    from fednode.client import Client

    cluster = load_cluster(cluster_file)
    cluster.spec.node(node)  # a clear error for an id the cluster file does not name
    with Client(cluster, node=node) as c:
        epoch = c.call("leave", cluster.leave_proof(node))
    print(f"node {node} left the federation: view {epoch}")
    return 0


def root_advice(exc: Any, node: int, cluster_file: str) -> str:
    """One line for a root ``fednode serve`` cannot serve (``RootUnusable``): the path, why, the fix."""
    import errno

    root = exc.root
    where = f"root: of node {node} in {cluster_file}"
    if exc.errno == errno.ENOENT:
        return f"node {node}: root {root} does not exist; create it (mkdir -p {root}) or correct {where}"
    if exc.errno == errno.ENOTDIR:
        return f"node {node}: root {root} is not a directory; correct {where}"
    return f"node {node}: root {root} cannot be opened ({os.strerror(exc.errno)}); fix its permissions or {where}"


async def _announce_ready(agent: Any) -> None:
    """Print the READY_COMPLETE line (``fednode.cluster``) once the agent's
    node is ready, whatever its design (FedFS: it holds every member's
    summary); the agent's own state, looked at between turns of its loop."""
    from fednode.cluster import READY_COMPLETE

    while not agent.ready:
        await asyncio.sleep(0.01)
    print(READY_COMPLETE, flush=True)


# ---------------------------------------------------------------------------- local
def local(
    nodes: int,
    base: str,
    placement: str | None,
    mountpoint: str | None = None,
    inproc: bool = False,
    allow_other: bool = False,
    consistency: str | None = None,
    architecture: str | None = None,
) -> int:
    """``fednode local``: ``nodes`` agents on this machine (of the design
    ``architecture``, default FedFS) until Ctrl-C; with
    ``mountpoint`` the federation mounted there at the first node, by a
    ``fednode mount`` process (``allow_other``: for every user), or
    (``inproc``) in that agent's own process (``fednode serve --mount``: no
    socket between the mount and its agent)."""
    from pydantic import ValidationError

    from fednode.cluster import READY_MOUNTED, AgentExited, ProcessCluster, write_local
    from fednode.config import ClusterSpec
    from fedsim.schema import word_errors

    if mountpoint is not None and inproc:
        from fednode.serve import mountpoint_error

        why = mountpoint_error(mountpoint)
        if why is not None:  # before anything is written or started
            raise ConfigError(f"--mount: {why}")
    protocol = {k: v for k, v in (("placement", placement), ("architecture", architecture)) if v}
    opts = {"protocol": protocol} if protocol else {}
    try:
        path = write_local(base, nodes, **opts)
    except ValidationError as exc:  # --placement or --architecture names no registered one
        raise ConfigError(word_errors("fednode local", exc, ClusterSpec)) from None
    first = load_cluster(path).spec.members[0]
    # own sessions (agents and mount): a Ctrl-C at the terminal reaches this process only, which
    # unmounts first and stops the agents after, so no call of the mount finds its agent gone
    pc = ProcessCluster(path, log_dir=Path(base) / "logs", new_session=mountpoint is not None,
                        mount=(first, mountpoint) if mountpoint is not None and inproc else None)  # fmt: skip
    mp = None
    stopping = False

    def on_signal(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        try:
            pc.wait_ready()
        except AgentExited as exc:
            print(f"fednode local: {exc}", file=sys.stderr)
            return 1
        print(f"{nodes} agents serving {Path(base).resolve()}/n0 ... n{nodes - 1}", flush=True)
        print(f"cluster file: {path}", flush=True)
        if mountpoint is not None and inproc:
            mp_path = Path(mountpoint).resolve()
            print(f"{READY_MOUNTED} {mp_path}", flush=True)  # wait_ready waited for it
            print(f"mounted at {mp_path} by agent {first}      (Ctrl-C unmounts and stops the agents)", flush=True)
        elif mountpoint is not None:
            from fednode.mount import MountProcess

            with open(Path(base) / "logs" / "mount.log", "ab") as mlog:
                mp = MountProcess.federation(
                    path, pc.cluster.spec.members[0], mountpoint, stderr=mlog, allow_other=allow_other,
                    consistency=consistency,
                )  # fmt: skip
            try:
                print(mp.wait_ready(), flush=True)
            except RuntimeError as exc:
                print(f"fednode local: {exc} (see {Path(base) / 'logs' / 'mount.log'})", file=sys.stderr)
                return 1
            print(f"mounted at {Path(mountpoint).resolve()}      (Ctrl-C unmounts and stops the agents)", flush=True)
        else:
            print(f"try: fednode fs --cluster {path} ls /      (Ctrl-C stops the agents)", flush=True)
        reported: set[int] = set()
        while not stopping:
            for n, p in pc.procs.items():
                if p.poll() is not None and n not in reported:
                    reported.add(n)
                    print(f"fednode local: agent {n} exited with status {p.returncode}", file=sys.stderr)
            if mp is not None and mp.proc.poll() is not None and "mount" not in reported:
                reported.add("mount")  # type: ignore[arg-type]
                print(f"fednode local: the mount process exited with status {mp.proc.returncode}", file=sys.stderr)
            time.sleep(0.2)
    finally:
        mount_rc = mp.stop() if mp is not None else 0
        codes = pc.stop()
    bad = {n: c for n, c in codes.items() if c not in (0, -signal.SIGTERM)}
    return 1 if bad or mount_rc else 0


# ---------------------------------------------------------------------------- mount
# fednode.mount's CONSISTENCY_MODES, spelled here: importing it loads libfuse, which --help must not need
_CONSISTENCY = ("cto", "sync")
_CONSISTENCY_HELP = ("cto: writes kept until close/fsync, an open sees every close before it (NFS's close-to-open); "
                     "sync: every write sent before it returns. Default: $FEDNODE_MOUNT_CONSISTENCY, else the "
                     "mount's default (README, Mount)")  # fmt: skip


def mount(
    cluster_file: str,
    node: int,
    mountpoint: str,
    foreground: bool,
    log_file: str | None,
    route: str = "home",
    allow_other: bool = False,
    consistency: str | None = None,
) -> int:
    """``fednode mount``: in the foreground, serve until unmounted or signalled;
    else start that as a process in its own session, wait until the mount is
    live, print its readiness line, and leave it running."""
    load_cluster(cluster_file).spec.node(node)  # a clear usage error here, not in the background
    if not Path(mountpoint).is_dir():
        raise ConfigError(f"mount point {mountpoint} is not a directory (mkdir -p {mountpoint})")
    from fednode.mount import MountProcess
    from fednode.mount import mount as run_mount

    if foreground:
        return run_mount(cluster_file, node, mountpoint, route, allow_other=allow_other, consistency=consistency)
    err = open(log_file, "ab") if log_file else subprocess.DEVNULL
    try:
        mp = MountProcess.federation(
            Path(cluster_file).resolve(), node, Path(mountpoint).resolve(), stderr=err, route=route,
            allow_other=allow_other,
            consistency=consistency,
        )  # fmt: skip
    finally:
        if log_file:
            err.close()  # type: ignore[union-attr]
    try:
        print(mp.wait_ready(), flush=True)
    except RuntimeError as exc:
        print(f"fednode mount: {exc}" + (f" (see {log_file})" if log_file else " (--log FILE keeps its errors)"),
              file=sys.stderr)  # fmt: skip
        return 1
    return 0


def umount(mountpoint: str) -> int:
    from fednode.mount import unmount

    return unmount(mountpoint)


# ---------------------------------------------------------------------------- fs
FS_COMMANDS = {
    "ls": 1,
    "stat": 1,
    "mkdir": 1,
    "put": 2,
    "get": (1, 2),
    "cat": 1,
    "rm": 1,
    "rmdir": 1,
    "mv": 2,
    "ln": 2,
    "readlink": 1,
}


def _long_line(name: str, is_dir: bool, a: Any) -> str:
    """One ``ls -l`` line (mode, links, owner, group, size, mtime, name); ``?`` where the attributes are unknown."""
    if a is None:
        return f"{'d' if is_dir else '-'}?????????  ?  ?  ?  ? {'?':>16} {name}{'/' if is_dir else ''}"
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(a.mtime_ns / 1e9))
    size = f"{os.major(a.rdev):3}, {os.minor(a.rdev):3}" if a.rdev else f"{a.size:8}"
    return f"{stat.filemode(a.mode)} {a.nlink:2} {a.uid} {a.gid} {size} {when} {name}{'/' if is_dir else ''}"


def fs(
    cluster_file: str, node: int | None, cmd: str, args: list[str], long: bool = False, symbolic: bool = False
) -> int:
    from fednode.client import Client

    want = FS_COMMANDS[cmd]
    counts = want if isinstance(want, tuple) else (want,)
    if len(args) not in counts:
        want_n = " or ".join(map(str, counts))
        print(f"fednode fs {cmd}: expected {want_n} argument(s), got {len(args)}", file=sys.stderr)
        return 2
    try:
        with Client(load_cluster(cluster_file), node=node) as c:
            if cmd == "ls" and long:  # one call for the listing and every entry's attributes
                for name, is_dir, a in c.readdir_attrs(args[0]):
                    line = _long_line(name, is_dir, a)
                    if a is not None and stat.S_ISLNK(a.mode):
                        line += " -> " + c.readlink(args[0].rstrip("/") + "/" + name)
                    print(line)
            elif cmd == "ls":
                for name, is_dir in c.readdir(args[0]):
                    print(name + ("/" if is_dir else ""))
            elif cmd == "stat":
                st = c.stat(args[0])
                print(json.dumps({"path": args[0], "type": "directory" if st.is_dir else "file", "size": st.size}))
            elif cmd == "mkdir":
                c.mkdir(args[0])
            elif cmd == "put":
                data = sys.stdin.buffer.read() if args[0] == "-" else Path(args[0]).read_bytes()
                home = c.write_file(args[1], data, overwrite=True)
                print(f"{args[1]}: {len(data)} bytes on node {home}")
            elif cmd in ("get", "cat"):
                data = c.read_file(args[0])
                if cmd == "cat" or len(args) == 1 or args[1] == "-":
                    sys.stdout.buffer.write(data)
                    sys.stdout.flush()
                else:
                    Path(args[1]).write_bytes(data)
            elif cmd == "rm":
                c.unlink(args[0])
            elif cmd == "rmdir":
                c.rmdir(args[0])
            elif cmd == "mv":
                c.rename(args[0], args[1])
            elif cmd == "ln" and symbolic:
                home = c.symlink(args[0], args[1])
                print(f"{args[1]} -> {args[0]} on node {home}")
            elif cmd == "ln":  # a hard link: the new name on the old name's home
                home = c.link(args[0], args[1])
                print(f"{args[1]} => {args[0]} on node {home}")
            elif cmd == "readlink":
                print(c.readlink(args[0]))
    except OSError as exc:
        what = exc.strerror or str(exc)
        name = f" {exc.filename}" if getattr(exc, "filename", None) else ""
        print(f"fednode fs {cmd}{name}: {what}", file=sys.stderr)
        return 1
    return 0


# ---------------------------------------------------------------------------- migrate
def migrate(cluster_file: str, node: int | None, path: str, to: int) -> int:
    """Move a file or a directory tree by hand (FedFS 3.2's mechanism, no policy)."""
    from fednode.client import Client

    try:
        with Client(load_cluster(cluster_file), node=node) as c:
            moved = c.migrate(path, to)
    except OSError as exc:
        what = exc.strerror or str(exc)
        name = f" {exc.filename}" if getattr(exc, "filename", None) else ""
        print(f"fednode migrate{name}: {what}", file=sys.stderr)
        return 1
    print(f"{path}: {moved} file{'' if moved == 1 else 's'} moved to node {to}" + ("" if moved else " (already there)"))
    return 0


# ---------------------------------------------------------------------------- status
def status(cluster_file: str, as_json: bool) -> int:
    from fednode.client import Client

    cluster = load_cluster(cluster_file)
    rows: list[dict[str, Any]] = []
    for n in cluster.spec.members:
        try:
            with Client(cluster, node=n, timeout=5) as c:
                st = c.status()
            rows.append({"node": n, "reachable": True, **st})
        except OSError as exc:
            rows.append({"node": n, "reachable": False, "error": str(exc)})
    if as_json:
        print(json.dumps(rows, indent=1, default=list))
    else:
        print(format_status(rows))
    return 0 if all(r["reachable"] and not r.get("root_lost") for r in rows) else 1


def format_status(rows: list[dict[str, Any]]) -> str:
    from fedsim.schema import table

    body = []
    notes = []
    for r in rows:
        if not r["reachable"]:
            body.append([r["node"], "UNREACHABLE", *["-"] * 9])
            notes.append(f"node {r['node']}: {r['error']}")
            continue
        if r.get("root_lost"):
            notes.append(f"node {r['node']}: ROOT LOST: {r['root_lost']}")
        body.append(
            [
                r["node"],
                "ROOT LOST" if r.get("root_lost") else f"up {r['uptime_s']:.0f}s",
                r.get("epoch", "-"),
                ",".join(map(str, r["members"]))
                if r.get("member", True)
                else (f"evicted (view {r['evicted']})" if r.get("evicted") is not None else "left"),
                r["transport"],
                "-" if r["local_files"] is None else r["local_files"],
                r.get("managed_names", "-"),  # FedFS's (``describe``); "-" for a design without them
                r.get("dt_entries", "-"),
                r.get("vd_entries", "-"),
                len(r.get("collisions", ())),
                len(r.get("migrations_in", [])) + len(r.get("migrations_out", [])),
            ]
        )
        hb = r.get("heartbeat")
        if hb:
            age = "never" if hb["last_heard_age_s"] is None else f"{hb['last_heard_age_s']:g} s ago"
            notes.append(f"node {r['node']}: heard its predecessor node {hb['predecessor']} {age}"
                         + (" (SUSPECTED)" if hb["suspected"] else ""))  # fmt: skip
            lease = hb.get("lease")
            if lease:
                left = lease["left_s"]
                state = "not started" if left is None else (f"{left:g} s left" if left else "LAPSED")
                notes.append(f"node {r['node']}: read lease {state} ({lease['pings']} pings, "
                             f"{lease['refused']} client requests refused)")  # fmt: skip
        for gone, epoch in r.get("absent", {}).items():
            notes.append(f"node {r['node']}: node {gone} left the federation in view {epoch}: "
                         "its files are unavailable until it rejoins")  # fmt: skip
        bc = r.get("block_cache")
        if bc:
            notes.append(
                f"node {r['node']}: block cache {bc['hits']} hits, {bc['misses']} misses, "
                f"{bc['blocks']}/{bc['capacity']} blocks, {bc['invalidations']} invalidations"
            )
        if r.get("replicas", 1) > 1:
            notes.append(
                f"node {r['node']}: replicas {r['replicas']}: {r.get('replica_files', 0)} copies held for its "
                f"predecessor, {r.get('unsynced', 0)} files unsynced, {r.get('promoted', 0)} promoted"
            )
        for path, source in r.get("migrations_in", []):
            notes.append(f"node {r['node']}: migrating {path} in from node {source}")
        for path, target in r.get("migrations_out", []):
            notes.append(f"node {r['node']}: migrating {path} out to node {target}")
        if r.get("loads"):
            loads = ", ".join(f"{n}: {v:g}" for n, v in r["loads"].items())
            notes.append(f"node {r['node']}: migration policy {r.get('migration_policy')}; loads it knows {{{loads}}}")
        if r.get("counters") and r.get("architecture", "fedfs") != "fedfs":  # FedFS's are the columns above
            counts = ", ".join(f"{k} {v:g}" for k, v in sorted(r["counters"].items()))
            notes.append(f"node {r['node']}: {r['architecture']}: {counts}")
        for path, winner, homes in r.get("collisions", ()):
            who = "the directory" if winner is None else f"node {winner}"
            notes.append(f"node {r['node']}: name collision {path} on nodes {list(homes)}: resolves to {who}")
    head = ["node", "state", "view", "members", "transport", "files", "managed names", "DT", "VD", "collisions",
            "migrating"]  # fmt: skip
    out = table(head, body)
    return out + ("\n" + "\n".join(notes) if notes else "")


# ---------------------------------------------------------------------------- init, hosts
def init(out: str, hosts: list[str], roots: str, port: int, transport: str, device: str | None,
         gid_index: int | None) -> int:  # fmt: skip
    """Write a cluster file for a federation of ``hosts`` (one agent each, in
    order: node ids 0..N-1) with a fresh secret, mode 0600."""
    from fednode.config import ClusterSpec, NodeSpec, new_secret, write_cluster

    if not hosts:
        raise ConfigError("--hosts: give at least one host (host1,host2,...)")
    nodes = [
        NodeSpec(id=i, host=h, port=port, root=roots.format(id=i, host=h), rdma_device=device, gid_index=gid_index)
        for i, h in enumerate(hosts)
    ]
    spec = ClusterSpec(secret=new_secret(), transport=transport, nodes=nodes)  # type: ignore[arg-type]
    if Path(out).exists():
        raise ConfigError(f"{out} exists; remove it or choose another --out (a new secret would lock out the old)")
    write_cluster(out, spec)
    print(f"wrote {out}: {len(hosts)} nodes, transport {transport}; copy it to every host (it holds the secret)")
    return 0


def client_file(cluster_file: str, out: str) -> int:
    """Write the cluster file client programs need: the client role's key in
    place of the secret (mode 0600), so a client cannot authenticate as a node."""
    from fednode.config import client_file_spec, write_cluster

    cluster = load_cluster(cluster_file)
    if cluster.secret is None:
        raise ConfigError(f"{cluster_file} is already a client file (it holds client_key, not the secret)")
    if Path(out).exists():
        raise ConfigError(f"{out} exists; remove it or choose another --out")
    write_cluster(out, client_file_spec(cluster))
    print(f"wrote {out}: for client programs (it can connect clients, not agents); keep the secret off their hosts")
    return 0


def hosts(cluster_file: str) -> int:
    """``ID HOST`` per line: what a launcher loop over the cluster needs."""
    for n in load_cluster(cluster_file).spec.nodes:
        print(n.id, n.host)
    return 0


# ---------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="fednode", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("-v", "--verbose", action="store_true")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="run one agent in the foreground")
    s.add_argument("--cluster", required=True)
    s.add_argument("--node", type=int, required=True)
    s.add_argument("--loop", default=None, choices=eventloop.CHOICES, help="event loop (default: $FEDNODE_LOOP, auto)")
    s.add_argument("--join", action="store_true",
                   help="join a running federation: the cluster file's other nodes are its seeds")  # fmt: skip
    s.add_argument("--mount", default=None, metavar="MOUNTPOINT",
                   help="also mount the federation there, in this process (FUSE; no socket to this agent)")  # fmt: skip
    lv = sub.add_parser("leave", help="make one agent leave its federation gracefully")
    lv.add_argument("--cluster", required=True)
    lv.add_argument("--node", type=int, required=True)
    lo = sub.add_parser("local", help="start N agents on this machine")
    lo.add_argument("--nodes", type=int, default=2)
    lo.add_argument("--base", required=True)
    lo.add_argument("--placement", default=None, help="protocol.placement of the cluster file (default with_manager)")
    lo.add_argument(
        "--architecture", default=None,
        help="protocol.architecture of the cluster file: a registered design (fedfs, nfs, nfsp, dnfsp1, dnfsp2, mnfs)",
    )  # fmt: skip
    lo.add_argument("--mount", default=None, metavar="MOUNTPOINT", help="also mount the federation there (FUSE)")
    lo.add_argument("--inproc", action="store_true",
                    help="with --mount: mount in the first agent's own process (fednode serve --mount)")  # fmt: skip
    lo.add_argument("--allow-other", action="store_true", help="with --mount: as fednode mount --allow-other")
    lo.add_argument("--consistency", choices=_CONSISTENCY, default=None, help=_CONSISTENCY_HELP)
    mo = sub.add_parser("mount", help="mount a federation as a directory (FUSE)")
    mo.add_argument("--cluster", required=True)
    mo.add_argument(
        "--node", type=int, required=True, help="the mount's own agent (statfs; all calls with --route entry)"
    )
    mo.add_argument(
        "--route", choices=("home", "entry"), default="home",
        help="home: each call straight to the file's home or the name's manager (default); entry: all through --node",
    )  # fmt: skip
    mo.add_argument("--foreground", action="store_true", help="serve in this process (default: in the background)")
    mo.add_argument("--log", default=None, help="in the background: append the mount's messages to this file")
    mo.add_argument(
        "--allow-other", action="store_true",
        help="let every user of this machine enter the mount (libfuse's allow_other; the kernel checks the modes "
        "and owners the federation stores; a mounter that is not root needs user_allow_other in /etc/fuse.conf)",
    )  # fmt: skip
    mo.add_argument("--consistency", choices=_CONSISTENCY, default=None, help=_CONSISTENCY_HELP)
    mo.add_argument("mountpoint")
    um = sub.add_parser("umount", help="unmount a federation mount (also after its process crashed)")
    um.add_argument("mountpoint")
    f = sub.add_parser("fs", help="file commands over the client API")
    f.add_argument("--cluster", required=True)
    f.add_argument("--node", type=int, default=None, help="the agent to talk to (default: the first that answers)")
    f.add_argument("-l", dest="long", action="store_true", help="ls: with every entry's attributes (one call)")
    f.add_argument(
        "-s", dest="symbolic", action="store_true", help="ln -s TARGET PATH: a symbolic link (ln OLD NEW: a hard link)"
    )
    f.add_argument("command", choices=sorted(FS_COMMANDS))
    f.add_argument("args", nargs="*")
    ini = sub.add_parser("init", help="write a cluster file for a list of hosts (with a new secret)")
    ini.add_argument("--out", default="cluster.yaml")
    ini.add_argument("--hosts", required=True, help="comma-separated host names or addresses; node i is the i-th")
    ini.add_argument("--root", default="/srv/fedfs/n{id}", help="each node's directory ({id} and {host} expand)")
    ini.add_argument("--port", type=int, default=7400)
    ini.add_argument("--transport", default="auto", choices=["tcp", "verbs", "auto"])
    ini.add_argument("--device", default=None, help="RDMA device on every host (default: each host's first)")
    ini.add_argument("--gid-index", type=int, default=None, help="GID index (default: the first RoCE v2 GID)")
    cf = sub.add_parser("client-file", help="write a cluster file for client programs (client key, no secret)")
    cf.add_argument("--cluster", required=True)
    cf.add_argument("--out", required=True)
    ho = sub.add_parser("hosts", help="print 'ID HOST' per node of a cluster file (for launcher loops)")
    ho.add_argument("--cluster", required=True)
    from fednode.tools import testbed

    testbed.add_parser(sub)
    mg = sub.add_parser("migrate", help="move a file or a directory tree to another node")
    mg.add_argument("--cluster", required=True)
    mg.add_argument("--node", type=int, default=None, help="the agent to talk to (default: the first that answers)")
    mg.add_argument("--to", type=int, required=True, help="the node that becomes the files' home")
    mg.add_argument("path")
    st = sub.add_parser("status", help="per-node state")
    st.add_argument("--cluster", required=True)
    st.add_argument("--json", action="store_true")
    b = sub.add_parser("bench", help="raw round trip vs FedFS operations vs local operations")
    b.add_argument(
        "--cluster",
        action="append",
        default=None,
        help="a running federation (repeat for side-by-side columns; default: start 4 local agents per --transport)",
    )
    b.add_argument("--transport", default="tcp", help="for local agents: tcp, verbs, auto, or a list (verbs,tcp)")
    b.add_argument("--devices", default="", help="for local agents: RDMA devices, node i gets the i-th (cycled)")
    b.add_argument(
        "--loop",
        default="",
        help="for local agents: the event loop, auto, uvloop, asyncio, or a list (asyncio,uvloop) for side-by-side "
        "columns (default: $FEDNODE_LOOP, auto)",
    )
    b.add_argument("--requester", type=int, default=None, help="node that issues the operations (default: the first)")
    b.add_argument("--repeat", type=int, default=200, help="timed calls per cell")
    b.add_argument("--out", default="results/fednode_bench", help="directory for the table and the profile")
    cb = sub.add_parser("calibrate", help="measure this machine for the simulator's machine model (a profile)")
    cb.add_argument("--cluster", default=None, help="a running federation (default: start 2 local agents)")
    cb.add_argument("--transport", default="tcp", choices=["tcp", "verbs", "auto"], help="for local agents")
    cb.add_argument("--devices", default="", help="for local agents: RDMA devices, node i gets the i-th (cycled)")
    cb.add_argument("--repeat", type=int, default=100, help="calls per operation per round")
    cb.add_argument("--max-rounds", type=int, default=5, help="rounds at most while the costs' spread is too wide")
    cb.add_argument("--mount", action="store_true", help="calibrate the FUSE mount too (needs /dev/fuse)")
    cb.add_argument("--base", default=None, help="for local agents: where their directories go (default: $TMPDIR)")
    cb.add_argument("--out", default="results/calibration", help="directory for profile.yaml and calibration.txt")
    args, extra = ap.parse_known_args(argv)
    if extra and args.cmd == "fs" and not any(a.startswith("-") for a in extra):
        args.args += extra  # ``fs ls -l DIR``: argparse stops taking positionals at the option
    elif extra:
        ap.error(f"unrecognized arguments: {' '.join(extra)}")
    _setup_logging(args.verbose)
    try:
        if args.cmd == "serve":
            return serve(args.cluster, args.node, args.loop, args.join, args.mount)
        if args.cmd == "leave":
            return leave(args.cluster, args.node)
        if args.cmd == "local":
            if args.nodes <= 0:
                raise ConfigError(f"--nodes must be at least 1, not {args.nodes}")
            if (args.inproc or args.allow_other) and args.mount is None:
                raise ConfigError("fednode local: --inproc and --allow-other need --mount MOUNTPOINT")
            if args.inproc and (args.allow_other or args.consistency):
                raise ConfigError(
                    "fednode local: --allow-other and --consistency are for a mount process, not --inproc "
                    "(serve --mount mounts in the default mode; FEDNODE_MOUNT_CONSISTENCY sets it)"
                )
            return local(args.nodes, args.base, args.placement, args.mount, args.inproc, args.allow_other,
                         args.consistency, args.architecture)  # fmt: skip
        if args.cmd == "mount":
            return mount(args.cluster, args.node, args.mountpoint, args.foreground, args.log, args.route,
                         args.allow_other, args.consistency)  # fmt: skip
        if args.cmd == "umount":
            return umount(args.mountpoint)
        if args.cmd == "fs":
            return fs(args.cluster, args.node, args.command, args.args, args.long, args.symbolic)
        if args.cmd == "status":
            return status(args.cluster, args.json)
        if args.cmd == "migrate":
            return migrate(args.cluster, args.node, args.path, args.to)
        if args.cmd == "init":
            hs = [h for h in args.hosts.split(",") if h]
            return init(args.out, hs, args.root, args.port, args.transport, args.device, args.gid_index)
        if args.cmd == "hosts":
            return hosts(args.cluster)
        if args.cmd == "client-file":
            return client_file(args.cluster, args.out)
        if args.cmd == "testbed":
            return testbed.main(args)
        if args.cmd == "calibrate":
            from fednode.tools.calibrate import calibrate

            if args.repeat < 10:
                raise ConfigError(f"--repeat must be at least 10, not {args.repeat}")
            devs = tuple(d for d in args.devices.split(",") if d)
            calibrate(args.cluster, Path(args.out), args.repeat, args.transport, devs, args.max_rounds,
                      mount=args.mount, base=args.base)  # fmt: skip
            return 0
        from fednode.tools.bench import bench

        transports = [t for t in args.transport.split(",") if t]
        bad = [t for t in transports if t not in ("tcp", "verbs", "auto")]
        if bad or not transports:
            raise ConfigError(f"--transport: {bad or args.transport!r}: each must be tcp, verbs or auto")
        devices = [d for d in args.devices.split(",") if d]
        loops: list[str | None] = [lp for lp in args.loop.split(",") if lp] or [None]
        for lp in loops:
            eventloop.choose(lp)  # an unknown or missing loop is a usage error before any agent starts
        return bench(args.cluster, args.requester, args.repeat, Path(args.out), transports, devices, loops)
    except ConfigError as exc:
        print(f"fednode: configuration error:\n{exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        if args.cmd != "bench":
            raise
        print(f"fednode bench: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"fednode {args.cmd}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
