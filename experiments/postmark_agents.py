"""PostMark on a local federation of real agents, beside the simulator.

    python -m experiments.postmark_agents [--quick] [--agents 1 2 4]

For each federation size N it starts N agent processes on this machine
(``ProcessCluster`` over ``write_local``: TCP on loopback, default protocol:
``mod_n`` hashing, ``with_manager`` placement) and runs N PostMark clients
(``fedsim.workloads.postmark.Clients``: client i in ``/pm<i>``, its own seed)
three ways:

* **client API**: the generator's operation stream of each client replayed
  through ``fednode.client.ClientPool``, each operation sent to the agent the
  simulator's driver would pick (``route: hash``, ``fedsim.protocol.routing``),
  mapped onto API calls by the simulator's own ``op_calls``; the clients run
  concurrently, one thread each;
* **mount**: the real ``postmark`` binary, one per client, each on a FUSE
  mount (``fednode.mount.MountProcess``) of its own agent (client i on agent
  i: a mount's requests all go to its agent, the ``fixed`` route);
* **simulated**: the same clients on the simulator (``run_postmark``,
  network preset ``tcp_loopback``, ``route: hash``).

One table: PostMark's counts (which must agree: the same generator, the same
binary's algorithm) and transactions per second in each column, with the
measured-over-simulated ratios.  Transactions per second is PostMark's own
definition everywhere: transactions over the span from the first client's
first transaction to the last client's last.  The ratios say how far the
simulator's model (LogGP loopback messages, calibrated CPU and ext2 costs) is
from real agents in Python; the mount column adds FUSE and the kernel.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments.common import run_postmark
from fednode.client import ClientPool
from fednode.cluster import ProcessCluster, write_local
from fednode.config import Cluster
from fednode.tools.census import Census
from fedsim.config import validate
from fedsim.schema import table
from fedsim.workloads.postmark import Clients, PostMarkParams, parse_report, run_binary, run_op_sync

#: the table's columns
HEAD = ["agents", "", "measured API", "predicted API", "measured mount", "predicted mount", "measured / predicted"]
#: PostMark's counts compared across the columns (the binary's report names)
COUNTS = ("created", "read", "appended", "deleted_alone", "deleted_mixed")


@dataclass
class Column:
    """One way of running the clients: summed counts and transactions per second."""

    counts: dict[str, int] = field(default_factory=dict)
    tps: float = 0.0
    skipped: str = ""  # why the column is empty
    #: CPU per transaction by kind of process (us): measured (``fednode.tools.census``) or the model's
    cpu_us: dict[str, float] = field(default_factory=dict)
    wait_us: dict[str, float] = field(default_factory=dict)  # runnable, waiting for a core, per transaction
    switches: dict[str, float] = field(default_factory=dict)  # involuntary (preempted), per transaction
    busy: float = 0.0  # the machine's busy cores over the run (measured: /proc/stat; the model: its CPU / span)


def params_for(quick: bool) -> PostMarkParams:
    return PostMarkParams(
        number=30 if quick else 150, transactions=60 if quick else 1000, size_low=500, size_high=10000,
        subdirectories=3 if quick else 10, seed=42,
    )  # fmt: skip


def _span_tps(spans: list[tuple[float, float]], transactions: int) -> float:
    start, end = min(s for s, _ in spans), max(e for _, e in spans)
    return transactions / (end - start) if end > start else 0.0


def _summed(counts: list[dict[str, Any]]) -> dict[str, int]:
    return {k: sum(int(c[k]) for c in counts) for k in COUNTS}


def client_api(cluster_file: Path, clients: Clients) -> Column:
    """Every client's generated stream through the client API, concurrently."""
    streams = [clients.client(i) for i in range(clients.clients)]
    spans: list[tuple[float, float]] = [(0.0, 0.0)] * clients.clients
    errors: list[BaseException] = []

    def one(i: int) -> None:
        pm = streams[i]
        try:
            with ClientPool(cluster_file, route="hash", client=i) as pool:
                pool.for_path(clients.location(i)).mkdir(clients.location(i))
                t_start = t_end = None
                for op in pm.ops():
                    if op.phase == "transactions" and t_start is None:
                        t_start = time.perf_counter()
                    client = pool.at(pool.entry(op.path))  # routed once per PostMark operation
                    run_op_sync(op, pm, lambda name, args: client.call(name, *args))  # noqa: B023
                    if op.phase == "transactions":
                        t_end = time.perf_counter()
                spans[i] = (t_start or 0.0, t_end or 0.0)
        except BaseException as exc:  # reported by the caller, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,), name=f"postmark{i}") for i in range(clients.clients)]
    census = Census(scope=str(cluster_file)).start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    census.stop()
    if errors:
        raise errors[0]
    done = sum(pm.counts.transactions_done for pm in streams)
    col = Column(_summed([pm.counts.as_dict() for pm in streams]), _span_tps(spans, done))
    return _with_census(col, census, sum(pm.counts.transactions_done for pm in streams) + _creations(clients))


def mount_missing() -> str:
    """Why the mount column cannot run here ('' when it can)."""
    missing = [t for t in ("postmark", "fusermount3") if shutil.which(t) is None]
    if not Path("/dev/fuse").exists():
        missing.append("/dev/fuse")
    try:
        import fednode.mount  # noqa: F401 - libfuse3, which mfusepy loads at import
    except (ImportError, OSError) as exc:
        missing.append(f"libfuse3 ({exc})")
    return f"{', '.join(missing)} missing (./dev.sh setup installs them)" if missing else ""


def mounted(cluster_file: Path, clients: Clients, base: Path) -> Column:
    """The real binary, client i on a mount of agent i, all at once.  The
    binary reports only its run's total seconds (pool creation included), so
    its rate is transactions over the longest binary's wall time: a lower
    bound of PostMark's transaction rate on the mount."""
    why = mount_missing()
    if why:
        return Column(skipped=why)
    from fednode.mount import MountProcess

    mounts: list[MountProcess] = []
    logs = []
    reports: list[dict[str, Any]] = [{}] * clients.clients
    errors: list[BaseException] = []
    try:
        for i in range(clients.clients):
            mnt = base / f"m{i}"
            mnt.mkdir()
            logs.append(open(base / f"mount{i}.log", "wb"))  # libfuse chatter; closed below
            mounts.append(MountProcess.federation(cluster_file, i, mnt, stderr=logs[-1]))
        for m in mounts:
            m.wait_ready()

        def one(i: int) -> None:
            try:
                where = base / f"m{i}" / clients.location(i).lstrip("/")
                where.mkdir()
                reports[i] = parse_report(run_binary(clients.client(i).p, where))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(clients.clients)]
        census = Census(scope=str(cluster_file)).start()
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        census.stop()
    finally:
        for m in mounts:
            m.stop()
        for f in logs:
            f.close()
    if errors:
        raise errors[0]
    col = Column(_summed(reports), clients.clients * clients.params.transactions / wall)
    return _with_census(col, census, clients.clients * clients.params.transactions + _creations(clients))


def _creations(clients: Clients) -> int:
    """The pool's creations and deletions of a whole run: counted with the transactions, per
    transaction of work, since the census covers the whole run (the binary's too)."""
    return 2 * clients.clients * clients.params.number


def _with_census(col: Column, census: Census, work: int) -> Column:
    """``col`` with the census's CPU, waits and preemptions per unit of ``work``."""
    for kind, u in census.kinds.items():
        col.cpu_us[kind] = u.cpu_ns / 1e3 / work
        col.wait_us[kind] = u.wait_ns / 1e3 / work
        col.switches[kind] = u.involuntary / work
    col.busy = census.busy_share() * (os.cpu_count() or 1)
    return col


def simulated(clients: Clients, cluster: Cluster, profile: Path, mount: bool = False) -> Column:
    """The same clients on the simulator, on this machine as the calibrated
    ``profile`` models it: through the client API (``route: hash``), or with
    ``mount`` as the binary on a FUSE mount of each agent (the FUSE model)."""
    from experiments.validation import sim_config

    n = clients.clients
    route = {"route": "fixed", "mount": True} if mount else {"route": "hash"}
    cfg = sim_config(validate({"study": "validation"}, "postmark_agents"), cluster, profile, n, {
        "kind": "postmark", "clients": n, "postmark": {**clients.params.model_dump(), **route},
    })  # fmt: skip
    out = run_postmark(cfg)
    m = out.metrics
    col = Column({k: int(m[f"postmark.{k}"]) for k in COUNTS}, m["postmark_binary_tps" if mount else "postmark_tps"])
    machine = out.cluster.machine
    if machine is not None:  # the model's CPU by kind of process, per unit of work as the census counts it
        work = n * clients.params.transactions + _creations(clients)
        for proc, us in machine.busy.items():
            kind = _SIM_KINDS.get(proc[0] if isinstance(proc, tuple) else "node", "other")
            col.cpu_us[kind] = col.cpu_us.get(kind, 0.0) + us / work
        col.busy = sum(machine.busy.values()) / (m["postmark_span_s"] * 1e6)
    return col


#: the simulator's processes (``fedsim.machine``) by the census's kinds
_SIM_KINDS = {"node": "agent", "mount": "mount", "app": "program", "client": "driver", "client-thread": "driver"}


def compare(
    agents: int, params: PostMarkParams, profile: Path, mount: bool = True, agent_dir: str | None = None
) -> dict[str, Column]:
    """The four columns for ``agents`` agents and as many clients: measured and
    predicted, through the client API and through the mount (the agents'
    directories in ``agent_dir``, the profile's file system; None: beside the mounts)."""
    clients = Clients(params, clients=agents)
    with (
        tempfile.TemporaryDirectory(prefix="pma", dir="/tmp") as tmp,  # short: PostMark keeps 81-byte paths
        tempfile.TemporaryDirectory(prefix="pma", dir=agent_dir or tmp) as dirs,
    ):
        base = Path(tmp)
        path = write_local(Path(dirs) / "c", agents)
        with ProcessCluster(path, log_dir=base / "logs") as pc:
            pc.wait_ready()
            api = client_api(path, clients)
            sim_api = simulated(clients, pc.cluster, profile)
        # a fresh federation for the mount: the binary starts from empty directories too
        if mount and not mount_missing():
            path2 = write_local(Path(dirs) / "d", agents)
            with ProcessCluster(path2, log_dir=base / "logs2") as pc:
                pc.wait_ready()
                mnt = mounted(path2, clients, base)
                sim_mnt = simulated(clients, pc.cluster, profile, mount=True)
        else:
            mnt = sim_mnt = Column(skipped=mount_missing() or "not asked (--no-mount)")
    return {"client API": api, "predicted API": sim_api, "mount": mnt, "predicted mount": sim_mnt}


def report(results: dict[int, dict[str, Column]], params: PostMarkParams, profile: Path) -> str:
    rows = []
    for n, cols in results.items():
        api, papi, mnt, pmnt = (cols[k] for k in ("client API", "predicted API", "mount", "predicted mount"))
        for k in COUNTS:
            rows.append([n, k, api.counts[k], papi.counts[k], mnt.counts.get(k, "-"), pmnt.counts.get(k, "-"), ""])
        ratio = f"api {api.tps / papi.tps:.2f}"
        if not mnt.skipped:
            ratio += f", mount {mnt.tps / pmnt.tps:.2f}"
        rows.append([n, "transactions/s", f"{api.tps:.0f}", f"{papi.tps:.0f}",
                     f"{mnt.tps:.0f}" if not mnt.skipped else "-", f"{pmnt.tps:.0f}" if not mnt.skipped else "-",
                     ratio])  # fmt: skip
    lines_cpu = census_table(results)
    skipped = {c["mount"].skipped for c in results.values()} - {""}
    lines = [
        f"PostMark ({params.number} files, {params.transactions} transactions, {params.size_low}-{params.size_high} B "
        "per client; one client per agent) on local agents beside the simulator's prediction",
        f"(calibrated machine model, profile {profile})",
        table(HEAD, rows),
    ]
    if skipped:
        lines.append(f"mount columns skipped: {'; '.join(sorted(skipped))}")
    lines.append(
        "the mount's rate is transactions over the binaries' wall time, pool creation included, and so is its "
        "prediction (the simulated span of each client's whole run)"
    )
    lines += lines_cpu
    return "\n".join(lines)


#: the census's kinds, in the table's order
CENSUS_KINDS = ("program", "driver", "mount", "agent", "ksoftirqd", "kworker")


def census_table(results: dict[int, dict[str, Column]]) -> list[str]:
    """Where the CPU went, measured (``fednode.tools.census``) beside the model's: us of CPU per
    transaction (the pool's creations and deletions counted as transactions) by kind of process,
    the measured time runnable but waiting for a core and the preemptions, and the busy cores."""
    rows = []
    for n, cols in results.items():
        for way, real, sim in (("API", "client API", "predicted API"), ("mount", "mount", "predicted mount")):
            m, p = cols[real], cols[sim]
            if m.skipped or not m.cpu_us:
                continue
            for kind in CENSUS_KINDS:
                if kind in m.cpu_us or kind in p.cpu_us:
                    mc, pc = m.cpu_us.get(kind, 0.0), p.cpu_us.get(kind, 0.0)
                    rows.append([n, way, kind, f"{mc:.0f}", f"{pc:.0f}", f"{mc / pc:.2f}" if pc else "-",
                                 f"{m.wait_us.get(kind, 0.0):.0f}", f"{m.switches.get(kind, 0.0):.2f}"])  # fmt: skip
            mt, pt = sum(m.cpu_us.values()), sum(p.cpu_us.values())
            rows.append([n, way, "all", f"{mt:.0f}", f"{pt:.0f}", f"{mt / pt:.2f}" if pt else "-",
                         f"{sum(m.wait_us.values()):.0f}", f"busy {m.busy:.2f} / {p.busy:.2f} cores"])  # fmt: skip
    if not rows:
        return []
    head = ["agents", "", "process", "measured CPU us/tx", "model's", "measured / model", "waiting us/tx",
            "preempted /tx"]  # fmt: skip
    return ["", "where the CPU went, per transaction (measured: fednode.tools.census; the model's: its machine)",
            table(head, rows)]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.postmark_agents", description=__doc__.split("\n")[0])
    ap.add_argument("--agents", type=int, nargs="+", default=None, help="federation sizes (default 1 2 4)")
    ap.add_argument("--quick", action="store_true", help="30 files, 60 transactions per client")
    ap.add_argument("--no-mount", action="store_true", help="leave out the FUSE mount column")
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else ""
    ap.add_argument("--agent-dir", default=shm, help="where the agents' directories go (default /dev/shm: on a VM "
                    "the root file system's create costs drift with the moment, tmpfs's do not; '': the system's "
                    "temporary directory)")  # fmt: skip
    a = ap.parse_args(argv)
    params = params_for(a.quick)
    from experiments.validation import Params, profile_for

    want = Params(mount=not a.no_mount and not mount_missing(), agent_dir=a.agent_dir)
    profile = profile_for(want, lambda s: print(s, flush=True))
    results = {n: compare(n, params, profile, not a.no_mount, a.agent_dir or None) for n in a.agents or [1, 2, 4]}
    print(report(results, params, profile))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
