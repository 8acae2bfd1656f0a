"""Validation: the simulator's prediction beside the real federation's measurement, point by point.

    fedsim run configs/validation/small.yaml     # what CI runs: 1, 2 agents, small workloads
    fedsim run configs/validation/tcp.yaml       # 1, 2, 4 agents, the full table

The framework's promise is that the simulator can be trusted where no
testbed reaches, because it runs the agents' own protocol code.  The
semantics agree (the conformance suite); this study checks the performance.
On this machine it starts real agents (TCP on loopback, the cluster file's
default protocol) and runs, for 1, 2 and 4 agents:

* **per-operation latency** at each hop count: FedFS Table 2's cells
  (``fedsim.table2_cells``, the arrangements ``fednode bench`` forces: names
  hashed to the cell's managers, the home pinned), timed through the client
  API from this process, median of ``latency_repeat`` calls;
* **SPEC SFS97, closed loop**: a file set laid into the agents' directories
  before they start (as the simulator's ``place`` lays it), then 1, 2, 4 ...
  client threads, each attached to one agent, running the mix back to back:
  throughput per client count (the median of ``sfs_repeat`` runs), up to saturation;
* **PostMark through the client API** (``experiments.postmark_agents``:
  one client per agent, ``route: hash``) and, where FUSE works, **through
  the mount**: the real ``postmark`` binary on a mount of each agent.

Each point is then simulated on the same federation: the cluster file's
protocol section and workers, its hashing and placement, the same names and
pins, the same client streams; the machine as the calibrated profile says
(``machine: model: calibrated``, all agents and this process on one host of
this machine's cores, the client threads one process).  The profile comes
from ``fednode calibrate``'s microbenchmarks, run first unless ``profile:``
names one (a cached one is reused while the code and the machine are those
it was taken with): no parameter is fitted to the numbers it is compared with.

Every row: workload, agents, point, measured, predicted, relative error
(predicted / measured - 1).  The summary gives the issue's measures: the
mean absolute relative error of the latencies and of the throughputs below
saturation, the saturation point, and the 1 -> 2 -> 4 agent scaling; and,
where a prediction misses, which model it points at (the report says how
busy the machine was: a 2-core machine shared with other work measures that
work too).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field

from experiments.common import build_cluster, run_postmark, run_workload, saturated
from fednode.client import Client
from fednode.cluster import ProcessCluster, write_local
from fednode.config import Cluster, load_cluster
from fednode.tools.calibrate import nearer_placement, parallel_capacity, placement_mode
from fedsim.calibration import apply_calibration, fitted_contention, foreign, microbench_check
from fedsim.config import SFS97_MIX, Config, validate
from fedsim.protocol.hashing import names_managed_by
from fedsim.protocol.policies.homes import Pinned
from fedsim.results import StudyResult
from fedsim.schema import table
from fedsim.studies import register_study
from fedsim.table2_cells import CELLS, Cell
from fedsim.workloads.postmark import PostMarkParams
from fedsim.workloads.sfs97 import make_fileset

IO = 4096
#: the Table 2 cells both worlds can arrange (as ``fednode bench``): warm reads and writes, no all-R DT miss
LAT_CELLS: tuple[Cell, ...] = tuple(
    c
    for c in CELLS
    if c.roles is not None and c.variant != "cache-hit" and (c.dt_hit or c.op != "unlink" or set(c.roles) != {"R"})
)


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agents: list[int] = Field(default_factory=lambda: [1, 2, 4])
    latency_repeat: int = Field(30, ge=5)
    sfs_clients: list[int] = Field(default_factory=lambda: [1, 2, 4, 8])
    sfs_ops: int = Field(600, ge=50)  # per client count
    # runs of each client count on its federation, the measured rate their median: one run of a few
    # thousand operations lasts a fraction of a second, in which the scheduler's placement of the
    # processes on the cores settles one way or another (the same point measured 5,200 and 7,900 ops/s)
    sfs_repeat: int = Field(3, ge=1)
    # operations run before the clock starts, in both worlds (the simulator's ``warmup_ops``): the real
    # clients' connections made, the agents' code warm, most files opened; 0: the clock starts at once
    sfs_warmup: int = Field(0, ge=0)
    sfs_files: int = Field(300, ge=10)
    sfs_dirs: int = Field(12, ge=1)
    postmark: PostMarkParams = PostMarkParams(number=60, transactions=300, subdirectories=3, seed=42)
    mount: bool = True  # PostMark through a FUSE mount too, where FUSE works
    profile: str | None = None  # a fednode calibrate profile; None: calibrate here first (cached)
    calibrate_repeat: int = Field(150, ge=10)
    cache: str = "results/calibration"  # where a calibration made here is kept for reuse ...
    max_age_s: float = 600.0  # ... for this long: a shared VM's speed drifts within the hour
    # where the agents' directories go, for the calibration and the validation alike (""; the system's
    # temporary directory): the local file system's costs are those of the file system there
    agent_dir: str = ""
    # the agents' transport: tcp (loopback), or verbs with RDMA ``devices`` (the Soft-RoCE guest:
    # ``fednode testbed rxe -- python3 -m experiments.validation run configs/validation/verbs.yaml``)
    transport: Literal["tcp", "verbs"] = "tcp"
    devices: list[str] = Field(default_factory=list)
    workloads: list[Literal["latency", "sfs97", "postmark"]] = Field(
        default_factory=lambda: ["latency", "sfs97", "postmark"]
    )


# ----------------------------------------------------------------------------------------- two worlds
class Real:
    """A running local federation, driven from this process (one client per agent)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.clients = {n: Client(cluster, node=n) for n in cluster.spec.members}

    def close(self) -> None:
        for c in self.clients.values():
            c.disconnect()

    def pin(self, manager: int, path: str, home: int) -> None:
        self.clients[manager].call("pin", path, home)

    def call(self, node: int, op: str, *args: Any) -> Any:
        return self.clients[node].call(op, *args)

    def timed(self, node: int, op: str, calls: list[tuple[Any, ...]]) -> list[float]:
        c = self.clients[node]
        out = []
        for args in calls:
            t0 = time.perf_counter_ns()
            c.call(op, *args)
            out.append((time.perf_counter_ns() - t0) / 1000)
        return out


class Sim:
    """The same federation on the simulator, its calls made by one client program (this process's model)."""

    def __init__(self, cfg: Config) -> None:
        self.c = build_cluster(cfg)
        self.c.preload_summaries()
        for node in self.c.nodes:
            for timer in node.background():
                self.c.spawn(node.id, timer)

    def pin(self, manager: int, path: str, home: int) -> None:
        node = self.c.nodes[manager]
        if not isinstance(node.placement, Pinned):
            node.placement = Pinned({}, node.placement)
        node.placement.homes[path] = home

    def call(self, node: int, op: str, *args: Any) -> Any:
        p = self.c.env.process(self.c.client_op(0, node, op, *args))
        self.c.env.run(until=p)
        return p.value

    def timed(self, node: int, op: str, calls: list[tuple[Any, ...]]) -> list[float]:
        out = []
        for args in calls:
            t0 = self.c.env.now
            self.call(node, op, *args)
            out.append(self.c.env.now - t0)
        return out


def placement_probe(real: Real, hashing: Any, calls: int = 2000) -> float:
    """The median wall time (us) of a 0-hop ``stat`` at R (a file R manages and holds), ``calls`` of
    them: compared with the calibration's pinned placements (one core, two cores), it says which one
    the scheduler chose for this client and its agent while the points beside it are measured."""
    probe = names_managed_by(hashing, 0, "/placement-probe", 1)[0]
    real.pin(0, probe, 0)
    real.call(0, "create", probe)
    try:
        return statistics.median(real.timed(0, "stat", [(probe,)] * calls))
    finally:
        real.call(0, "unlink", probe)


def placement_correction(placed: dict[str, dict[str, float]], wall: float) -> tuple[str, float]:
    """The placement a probe's wall time shows (the pinned row of the calibration's placement
    microbenchmark it is nearer to) and the ``handoff_us`` that moves the profile's costs to it: a
    round trip on two cores costs (two - one) more CPU than on one, in its two wakes, so a profile
    measured on two cores predicts one core's machine with half of that less per waking receipt, and
    the other way round.  ('', 0) without the pinned rows."""
    try:
        same, two, free = (placed[k]["cpu_per_call_us"] for k in ("same core", "two cores", "free"))
        now = nearer_placement(placed, wall, "wall_per_call_us")
    except KeyError:
        return "", 0.0
    then = nearer_placement(placed, free)
    half = (two - same) / 2
    return now, (0.0 if now == then else (half if now == "two cores" else -half))


def probed(out: Outcome, cluster: Cluster) -> tuple[str, float]:
    """``placement_correction`` of a probe on the running ``cluster`` (nothing without the calibration's
    rows).  The correction only where the probe's pair is the whole federation (one agent): with more,
    the probe sees one client and R, while the other agents' hand-offs are placed as the scheduler
    pleases (on one run of SFS97 with 4 agents, a probe on one core and a correction of every waking
    receipt by it predicted 43 % too fast); there the placement is reported and the profile's kept."""
    if not out.placed:
        return "", 0.0
    real = Real(cluster)
    try:
        placed, handoff = placement_correction(out.placed, placement_probe(real, cluster.spec.hashing_fn()))
    finally:
        real.close()
    return placed, handoff if len(cluster.spec.members) == 1 else 0.0


def cell_latency(world: Real | Sim, cell: Cell, n: int, repeat: int, top: str, hashing: Any) -> float:
    """Mean latency (us) of ``cell``'s call at R = node 0, arranged as ``fednode bench`` arranges it.

    The mean, not the median: an agent's calls are fast most of the time and now and then slow (its
    collector, its timers), and the calibration's costs are CPU totals over many calls, so they
    predict the mean; a median would compare the fast calls alone with it."""
    assert cell.roles is not None
    role = {"R": 0, **{x: i + 1 if i + 1 < n else None for i, x in enumerate("ABC")}}
    m, pm, h = (role[x] for x in cell.roles)
    assert m is not None and pm is not None and h is not None
    tag = cell.case.replace(" ", "_")
    parent = names_managed_by(hashing, pm, f"{top}/{tag}_")[0]
    world.pin(pm, parent, h)
    world.call(0, "mkdir", parent)
    paths = names_managed_by(hashing, m, f"{parent}/n", repeat + 1)
    for p in paths:
        world.pin(m, p, h)
    calls: list[tuple[Any, ...]]
    if cell.api in ("create", "mkdir"):
        calls = [(p,) for p in paths]
    else:
        maker = 0 if cell.dt_hit else next((x for x in (m, pm, h) if x != 0), 0)
        if cell.api in ("read", "write"):
            world.call(maker, "create", paths[0])
            fd = world.call(maker, "open", paths[0])
            world.call(maker, "write", fd, 0, bytes(IO))
            world.call(maker, "close", fd)
            fd = world.call(0, "open", paths[0])
            calls = [(fd, 0, IO) if cell.api == "read" else (fd, 0, bytes(IO))] * (repeat + 1)
        else:
            for p in paths:
                world.call(maker, "create", p)
            calls = [(p,) for p in paths]
    lat = world.timed(0, cell.api, calls)
    return float(statistics.fmean(lat[1:]))  # the first warms the connections and caches


# ----------------------------------------------------------------------------------------- SFS97 on agents
def lay_out(cluster: Cluster, files: list[str], dirs: list[str], sizes: dict[str, int]) -> None:
    """The file set in the agents' directories before they start, each name
    at its manager (placement ``with_manager``), as ``sfs97.place`` lays it."""
    hashing = cluster.spec.hashing_fn()
    for d in dirs:
        root = cluster.root_of(hashing.manager_of(d))
        (root / d.lstrip("/")).mkdir(parents=True, exist_ok=True)
    for f in files:
        path = cluster.root_of(hashing.manager_of(f)) / f.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes(sizes[f]))


def sfs_real(
    cluster: Cluster, files: list[str], clients: int, ops: int, seed: int, warmup: int = 0, tag: str = ""
) -> float:
    """Closed-loop SFS97 on the agents: ``clients`` threads (client i at agent i mod N), ``ops`` in all; ops/s.

    The threads start, connect and run ``warmup`` operations in all before the clock starts (as the
    simulator's ``warmup_ops``), so the rate is the steady state's, not a thread start's or a connection's.
    ``tag`` sets the names the run creates apart from another run's on the same federation."""
    members = cluster.spec.members
    names, weights = zip(*SFS97_MIX.items(), strict=True)
    p = np.array(weights, float) / sum(weights)
    left = [warmup]
    lock = threading.Lock()
    errors: list[BaseException] = []
    t0 = [0.0]

    def start() -> None:  # run once, when every client is warm, before any goes on
        left[0] = ops
        t0[0] = time.perf_counter()

    ready = threading.Barrier(clients + 1, action=start)

    # Every client's operations drawn before the clock starts: the simulator's driver costs no
    # simulated time, so the real one must not spend its CPU choosing either.
    plans = []
    for i in range(clients):
        rng = np.random.default_rng(seed * 1000 + i)
        kinds = rng.choice(len(names), size=ops + warmup, p=p)
        picks = rng.integers(0, len(files), size=ops + warmup)
        plans.append([(names[int(k)], files[int(f)]) for k, f in zip(kinds, picks, strict=True)])

    def client(i: int) -> None:
        c = Client(cluster, node=members[i % len(members)])
        fds: dict[str, int] = {}
        made: list[str] = []
        plan = iter(plans[i])

        def phase() -> None:
            while True:
                with lock:
                    if left[0] <= 0:
                        return
                    left[0] -= 1
                op, path = next(plan)
                if op == "lookup":
                    c.call("stat", path)
                elif op in ("read", "write"):
                    fd = fds.get(path)
                    if fd is None:
                        fd = fds[path] = c.call("open", path)
                    c.call(op, fd, 0, IO if op == "read" else bytes(IO))
                elif op == "create":
                    new = f"{path}.c{tag}{i}_{len(made)}"
                    c.call("create", new)
                    made.append(new)
                elif made:
                    c.call("unlink", made.pop())

        try:
            c.status()  # connected before the clock
            phase()
            ready.wait()
            phase()
        except BaseException as exc:
            errors.append(exc)
            ready.abort()  # the others stop waiting for this one
        finally:
            c.disconnect()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    with contextlib.suppress(threading.BrokenBarrierError):
        ready.wait()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0[0]
    if errors:
        raise errors[0]
    return ops / wall


# ----------------------------------------------------------------------------------------- the profile
def code_digest() -> str:
    """What the calibration's numbers depend on: the agents' and the simulator's
    code, and the machine model (the profile stores the values it fitted)."""
    h = hashlib.sha1()
    base = Path(__file__).resolve().parents[1]
    files = [f for d in ("fednode", "fedsim/protocol") for f in sorted((base / d).rglob("*.py"))]
    for f in [*files, base / "fedsim" / "machine.py"]:
        h.update(f.read_bytes())
    return h.hexdigest()[:12]


def cache_path(params: Params) -> Path:
    """Where a calibration made for ``params`` is kept: one per place the agents'
    directories are (its file system's costs) and per transport."""
    where = (params.agent_dir.strip("/").replace("/", "-") or "tmp") + ("" if params.transport == "tcp" else "-verbs")
    return Path(params.cache) / where / "profile.yaml"


def _mount_mode() -> str:
    """The consistency mode a mount started now runs in (``fednode.mount.default_consistency``)."""
    from experiments.postmark_agents import mount_missing

    if mount_missing():
        return "sync"
    from fednode.mount import default_consistency

    return default_consistency()


#: a profile taken while CPU-bound processes side by side got less than this share of the cores measured
#: other work too: it is not reused (``profile_for``)
CROWDED = 0.75


def was_crowded(measured_on: dict[str, Any]) -> bool:
    """Whether other work held the cores while a calibration was taken (``measured_on``: its
    record): two CPU-bound processes side by side got under ``CROWDED`` of the cores.  Its
    fits then describe that load, not the machine (a contention fit of 1.09 cores' worth of 2)."""
    spin, cores = measured_on.get("parallel_capacity"), measured_on.get("cores") or 1
    return spin is not None and spin < CROWDED * cores


def profile_for(params: Params, say: Callable[[str], None]) -> Path:
    """The profile to predict with: ``params.profile``, or a cached calibration of
    this machine and code, or a new one (``fednode calibrate``)."""
    if params.profile:
        return Path(params.profile)
    from fednode.tools.calibrate import calibrate

    path = cache_path(params)
    digest = code_digest()
    if path.exists():
        prof = yaml.safe_load(path.read_text()) or {}
        on = (prof.get("machine") or {}).get("measured_on") or {}
        fuse_prof = (prof.get("machine") or {}).get("fuse") or {}
        # the mount's costs as measured in the mode the mounts will run in (writes held or not)
        has_fuse = bool(fuse_prof) and (not params.mount or fuse_prof.get("consistency", "sync") == _mount_mode())
        wanted = prof.get("code") == digest and prof.get("agent_dir") == params.agent_dir
        fresh = time.time() - float(on.get("at", 0)) < params.max_age_s
        spin, cores = on.get("parallel_capacity"), on.get("cores") or 1
        crowded = was_crowded(on)
        if wanted and fresh and not foreign(on) and (has_fuse or not params.mount):
            if not crowded:
                say(f"calibration: reusing {path} (this machine, this code, under {params.max_age_s:.0f} s old)")
                return path
            say(f"calibration: not reusing {path}: other work held the cores while it was taken ({cores} CPU-bound "
                f"processes side by side got {spin:.2f} cores' worth, under {CROWDED:.0%} of {cores})")
    say("calibration: measuring this machine (fednode calibrate)")
    from experiments.postmark_agents import mount_missing

    fuse = params.mount and not mount_missing()
    calibrate(None, path.parent, repeat=params.calibrate_repeat, quiet=True, base=params.agent_dir or None, mount=fuse,
              transport=params.transport, devices=tuple(params.devices))  # fmt: skip
    prof = yaml.safe_load(path.read_text())
    # the simulator's fit of the contention microbenchmark, once, into the profile (else every load refits it)
    prof["machine"].update(fitted_contention(path, prof["machine"]))
    prof["code"] = digest
    prof["agent_dir"] = params.agent_dir
    path.write_text(yaml.safe_dump(prof, sort_keys=False))
    return path


def sim_config(
    cfg: Config,
    cluster: Cluster,
    profile: Path,
    n: int,
    workload: dict[str, Any],
    handoff_us: float = 0.0,
) -> Config:
    """The simulator's config of the federation ``cluster`` describes, on this machine (``handoff_us``:
    the placement correction a probe beside the measurement gave, ``placement_correction``)."""
    raw: dict[str, Any] = {
        "study": "simulate",
        "seed": cfg.seed,
        "cluster": {"nodes": n, "workers": cluster.spec.workers, "rpc_timeout_ms": cluster.spec.rpc_timeout_ms},
        "protocol": cluster.spec.protocol.model_dump(),
        "machine": {"hosts": 1, "handoff_us": handoff_us},  # every agent and this process on this one machine
        "calibration": str(profile.resolve()),
        "workload": workload,
    }
    apply_calibration(raw, "validation")
    return validate(raw, "validation")


# ----------------------------------------------------------------------------------------- the study
@dataclass
class Point:
    workload: str
    agents: int
    point: str
    measured: float
    predicted: float
    unit: str
    saturated: bool = False
    #: the measurement's repeats (SFS97's ``sfs_repeat``; ``measured`` is their median), if repeated: how
    #: far apart the machine itself put them, beside how far the prediction is
    runs: tuple[float, ...] = ()
    #: the placement a probe found on its federation before it was measured ("one core", "two cores"; ''
    #: not probed), which the prediction was made for (``placement_correction``)
    placed: str = ""

    @property
    def spread(self) -> float | None:
        """The repeats' range over their lowest (None: measured once)."""
        return max(self.runs) / min(self.runs) - 1 if len(self.runs) > 1 and min(self.runs) > 0 else None

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1 if self.measured else float("nan")


@dataclass
class Outcome:
    points: list[Point] = field(default_factory=list)
    load: list[float] = field(default_factory=list)
    #: cores' worth of CPU-bound work the machine ran at once, before and after (``parallel_capacity``)
    capacity: list[float] = field(default_factory=list)
    transport: str = "tcp"  # the agents' (tcp: loopback; verbs: RDMA devices)
    #: the profile's microbenchmarks beside the fitted model simulating them (``microbench_check``)
    bench: list[tuple[str, int, float, float, float, float, float, float]] = field(default_factory=list)
    #: the calibration's placement microbenchmark (``fednode calibrate``: one client and its agent pinned to
    #: one core, to two, and free): each point is probed against it (``Point.placed``)
    placed: dict[str, dict[str, float]] = field(default_factory=dict)
    #: the contention models' values fitted to those microbenchmarks (``fitted_contention``)
    fitted: dict[str, float] = field(default_factory=dict)


def warm_up(cluster: Cluster, rounds: int = 40) -> None:
    """Bring fresh agents to their steady state before a measurement, as the
    calibration's discarded first round does: every operation in turn at every
    agent, on names of every agent, then removed (``warm_ops``).  A new Python
    process runs its first thousands of requests slower (its interpreter
    specialises the code it runs, its allocator grows), and the profile describes
    warm agents."""
    real = Real(cluster)
    try:
        warm_ops(real, cluster.spec.members, rounds)
    finally:
        real.close()


def warm_ops(world: Real | Sim, members: list[int], rounds: int = 40) -> None:
    """The warm-up's operations in ``world``: a simulation that must send the
    real federation's messages makes them too (the directories it leaves in
    the nodes' summaries change later dirmerges)."""
    for i, n in enumerate(members):
        top = f"/.warm{i}"
        world.call(n, "mkdir", top)
        for j in range(rounds):
            f = f"{top}/f{j}"
            world.call(n, "create", f)
            world.call(n, "stat", f)
            fd = world.call(n, "open", f)
            world.call(n, "write", fd, 0, bytes(IO))
            world.call(n, "read", fd, 0, IO)
            world.call(n, "close", fd)
            world.call(n, "getattr", f)
            world.call(n, "unlink", f)
            world.call(n, "mkdir", f"{top}/d{j}")
            world.call(n, "rmdir", f"{top}/d{j}")
        world.call(n, "rmdir", top)


@contextlib.contextmanager
def agents(
    n: int, base: Path, prepare: Callable[[Cluster], None] | None = None, transport: str = "tcp",
    devices: tuple[str, ...] = (),
) -> Iterator[tuple[Path, Cluster]]:  # fmt: skip
    """``n`` local agents (the default cluster file, on ``transport``) in ``base``,
    ready and warmed up (``warm_up``); ``prepare`` gets the cluster before they
    start (to lay files into their directories)."""
    path = write_local(base, n, transport=transport, devices=devices)
    if prepare is not None:
        prepare(load_cluster(path))
    with ProcessCluster(path, log_dir=base / "logs") as pc:
        pc.wait_ready()
        warm_up(pc.cluster)
        yield path, pc.cluster


def run_points(cfg: Config, params: Params, say: Callable[[str], None]) -> Outcome:
    out = Outcome(load=[os.getloadavg()[0]], capacity=[parallel_capacity()], transport=params.transport)
    profile = profile_for(params, say)
    mach = dict((yaml.safe_load(profile.read_text()) or {}).get("machine") or {})
    for k, v in fitted_contention(profile, mach).items():  # (a profile written here holds them already)
        mach.setdefault(k, v)
        out.fitted[k] = mach[k]
    out.bench = microbench_check(mach)
    out.placed = mach.get("placement") or {}
    # (the cores' worth is the profile's, fitted to its contention microbenchmark: CPU-bound processes side
    # by side, measured now and after, say how loaded the machine was, not what processes that wake each
    # other get)
    for n in params.agents:
        with tempfile.TemporaryDirectory(prefix="val", dir=params.agent_dir or None) as tmp:
            start = functools.partial(agents, transport=params.transport, devices=tuple(params.devices))
            for workload in params.workloads:
                POINTS[workload](cfg, params, profile, n, Path(tmp), start, out)
                say(f"{n} agents: {workload} done")
    out.load.append(os.getloadavg()[0])
    out.capacity.append(parallel_capacity())
    return out


def latency_points(cfg: Config, params: Params, profile: Path, n: int, base: Path, start: Any,
                   out: Outcome) -> None:  # fmt: skip
    """Table 2's cells: each call's median latency at R, measured and predicted (in the placement a
    probe finds first, ``probed``)."""
    with start(n, base / "lat") as (_path, cluster):
        placed, handoff = probed(out, cluster)
        real = Real(cluster)
        try:
            sim = Sim(sim_config(cfg, cluster, profile, n, {}, handoff))
            hashing = cluster.spec.hashing_fn()
            real.call(0, "mkdir", "/v")
            sim.call(0, "mkdir", "/v")
            for cell in LAT_CELLS:
                needed = {x for x in cell.roles or () if x != "R"}
                if needed and max("ABC".index(x) + 2 for x in needed) > n:
                    continue  # the cell needs more agents than run
                measured = cell_latency(real, cell, n, params.latency_repeat, "/v", hashing)
                predicted = cell_latency(sim, cell, n, params.latency_repeat, "/v", hashing)
                out.points.append(Point("latency", n, cell.case, measured, predicted, "us", placed=placed))
        finally:
            real.close()


def sfs_points(cfg: Config, params: Params, profile: Path, n: int, base: Path, start: Any,
               out: Outcome) -> None:  # fmt: skip
    """SFS97 closed loop over a laid-out file set, at each client count."""
    rng = np.random.default_rng(cfg.seed)
    fs = make_fileset(params.sfs_files, params.sfs_dirs, rng)
    sizes = {f: min(s, 64 * 1024) for f, s in fs.sizes.items()}
    rates: list[tuple[int, tuple[float, ...], float, str]] = []
    for k in params.sfs_clients:
        lay = functools.partial(lay_out, files=fs.files, dirs=fs.dirs, sizes=sizes)
        with start(n, base / f"sfs{k}", lay) as (_path, cluster):
            placed, handoff = probed(out, cluster)
            runs = tuple(
                sfs_real(cluster, fs.files, k, params.sfs_ops, cfg.seed, params.sfs_warmup, tag=f"r{r}")
                for r in range(params.sfs_repeat)
            )
            scfg = sim_config(cfg, cluster, profile, n, {
                "kind": "sfs97", "files": params.sfs_files, "dirs": params.sfs_dirs, "arrivals": "closed",
                "clients": k, "ops": params.sfs_ops, "warmup_ops": params.sfs_warmup, "io_size": IO,
            }, handoff)  # fmt: skip
        rates.append((k, runs, run_workload(scfg).metrics["throughput_ops_s"], placed))
    medians = [statistics.median(runs) for _, runs, _, _ in rates]
    for (k, runs, predicted, placed), measured, sat in zip(rates, medians, saturated(medians), strict=True):
        out.points.append(Point("sfs97", n, f"{k} clients", measured, predicted, "ops/s", saturated=sat, runs=runs,
                                placed=placed))  # fmt: skip


def postmark_points(cfg: Config, params: Params, profile: Path, n: int, base: Path, start: Any,
                    out: Outcome) -> None:  # fmt: skip
    """PostMark through the client API, and the binary on FUSE mounts where FUSE works."""
    from experiments.postmark_agents import client_api, mount_missing, mounted
    from fedsim.workloads.postmark import Clients

    pm = params.postmark
    clients = Clients(pm, clients=n)
    with start(n, base / "pm") as (path, cluster):
        placed, handoff = probed(out, cluster)
        api = client_api(path, clients)
        pcfg = sim_config(cfg, cluster, profile, n, {
            "kind": "postmark", "clients": n, "postmark": {**pm.model_dump(), "route": "hash"},
        }, handoff)  # fmt: skip
    predicted = run_postmark(pcfg).metrics["postmark_tps"]
    out.points.append(Point("postmark api", n, "transactions/s", api.tps, predicted, "tx/s", placed=placed))
    if params.mount and not mount_missing():
        with start(n, base / "pmm") as (path, cluster):
            placed, handoff = probed(out, cluster)
            mnt = mounted(path, clients, base)
            mcfg = sim_config(cfg, cluster, profile, n, {
                "kind": "postmark", "clients": n, "postmark": {**pm.model_dump(), "route": "fixed", "mount": True},
            }, handoff)  # fmt: skip
        predicted = run_postmark(mcfg).metrics["postmark_binary_tps"]
        out.points.append(Point("postmark mount", n, "transactions/s", mnt.tps, predicted, "tx/s", placed=placed))


#: the workloads a validation can run, by name (``params.workloads``)
POINTS = {"latency": latency_points, "sfs97": sfs_points, "postmark": postmark_points}


# ----------------------------------------------------------------------------------------- summary
#: what a miss of each workload points at first, in the words of the models (``fedsim.machine``)
SUSPECTS = {
    "latency": "the per-request CPU costs (dispatch_us, call_us) or the flight L: a cell's path is sequential",
    "sfs97": "the shared cores and how the scheduler places woken processes (capacity), the client program's "
    "one process (the GIL), waking (wake_us, cold_us): contention among processes",
    "postmark api": "the shared cores, the client threads' GIL and the local file system's create/mkdir",
    "postmark mount": "the FUSE layer: callbacks per system call, the mount's CPU outside callbacks; "
    "`python -m experiments.postmark_agents` prints each kind of process's CPU, measured beside the model's",
}


def summarize(points: list[Point]) -> dict[str, float]:
    """The issue's measures: mean absolute relative errors, saturation and scaling."""
    m: dict[str, float] = {}
    lat = [abs(p.error) for p in points if p.workload == "latency"]
    if lat:
        m["latency_mare"] = float(np.mean(lat))
    below = [abs(p.error) for p in points if p.workload != "latency" and not p.saturated]
    if below:
        m["throughput_mare"] = float(np.mean(below))
    for n in sorted({p.agents for p in points}):
        sfs = [p for p in points if p.workload == "sfs97" and p.agents == n]
        if sfs:
            meas = max(p.measured for p in sfs)
            pred = max(p.predicted for p in sfs)
            m[f"sfs97_saturation_error.{n}"] = pred / meas - 1
    for wl in ("postmark api", "postmark mount", "sfs97"):
        by_n: dict[int, tuple[float, float]] = {}
        for p in points:
            if p.workload == wl:
                meas, pred = by_n.get(p.agents, (0.0, 0.0))
                by_n[p.agents] = (max(meas, p.measured), max(pred, p.predicted))
        if 1 in by_n:
            for n, (meas, pred) in by_n.items():
                if n != 1 and by_n[1][0] and by_n[1][1]:
                    sm, sp = meas / by_n[1][0], pred / by_n[1][1]
                    m[f"scaling_error.{wl}.{n}"] = sp / sm - 1
    return m


def report(out: Outcome, summary: dict[str, float]) -> str:
    rows = [[p.workload, p.agents, p.point, f"{p.measured:,.1f}", f"{p.predicted:,.1f}", p.unit,
             f"{100 * p.error:+.1f}%" + (" (sat)" if p.saturated else ""),
             "" if p.spread is None else f"{100 * p.spread:.0f}%"
             + (" (in)" if min(p.runs) <= p.predicted <= max(p.runs) else ""),
             p.placed] for p in out.points]  # fmt: skip
    lines = [
        "Validation: the simulator (calibrated machine model) beside real agents on this machine "
        + ("(TCP loopback)" if out.transport == "tcp" else f"({out.transport})"),
        table(["workload", "agents", "point", "measured", "predicted", "unit", "error", "spread", "placed"], rows),
        "",
        "error = predicted / measured - 1; (sat) marks SFS97 points at saturation (from the first within 90 % of the "
        "best measured on); spread: a repeated measurement's range over its lowest (measured is the median), "
        "(in) where the prediction lies within that range",
    ]
    targets = {"latency_mare": 0.15, "throughput_mare": 0.20}
    for k, v in summary.items():
        bound = targets.get(k, 0.25)
        verdict = "within" if abs(v) <= bound else "MISSED"
        lines.append(f"{k}: {100 * v:+.1f}% ({verdict} the {bound:.0%} target)")
    if out.placed:
        lines.append("calibration: " + placement_mode(out.placed))
    if any(p.placed for p in out.points):
        lines.append(
            "placed: the placement a probe found before the point was measured (a free 0-hop stat's median wall "
            "time at R, nearer the calibration's one-core or two-core pinning); a one-agent point placed otherwise "
            "than the calibration is predicted with half a round trip's gap off or on each waking receipt (handoff_us)"
        )
    repeated = [p for p in out.points if p.spread is not None]
    if repeated:
        inside = sum(1 for p in repeated if min(p.runs) <= p.predicted <= max(p.runs))
        lines.append(
            f"repeated points: {inside} of {len(repeated)} predicted within the range the machine gave across repeats; "
            f"median spread {100 * statistics.median(p.spread or 0.0 for p in repeated):.0f}% (noise of that size "
            "bounds what any model can show)"
        )
    if out.bench:
        lines += [
            "",
            "The microbenchmarks the contention models were fitted on (fednode calibrate), measured and "
            "simulated by the fitted model (fits are relative to one thread's level, weighing every count):",
        ]
        rows = [[b, k, f"{mc:,.1f}", f"{pc:,.1f}", f"{100 * (pc / mc - 1):+.1f}%" if mc else "",
                 f"{mr:,.0f}", f"{pr:,.0f}", f"{100 * (pr / mr - 1):+.1f}%" if mr else "",
                 f"{ml:,.1f}" if ml else "", f"{pl:,.1f}" if ml else ""]
                for b, k, mc, pc, mr, pr, ml, pl in out.bench]  # fmt: skip
        lines.append(table(["bench", "count", "CPU/call us", "model", "error", "calls/s", "model", "error",
                            "client us", "model"], rows))  # fmt: skip
    if out.fitted:
        lines.append("fitted: " + ", ".join(f"{k} {v:g}" for k, v in sorted(out.fitted.items())))
    missed = {p.workload for p in out.points if abs(p.error) > (0.15 if p.workload == "latency" else 0.20)}
    for wl in sorted(missed):
        lines.append(f"misses in {wl}: look first at {SUSPECTS.get(wl, 'the machine model')}")
    lines.append(
        f"machine: {os.cpu_count()} cores, load average {out.load[0]:.2f} before and {out.load[-1]:.2f} after "
        "(a busy machine measures the other work too)"
    )
    if out.capacity:
        lines.append(
            f"parallel capacity: {out.capacity[0]:.2f} cores' worth before and {out.capacity[-1]:.2f} after "
            f"({os.cpu_count()} CPU-bound processes side by side; the model's cores' worth is fitted to the "
            "calibration's contention microbenchmark, processes that wake each other)"
        )
    return "\n".join(lines)


def run(cfg: Config, params: Params) -> StudyResult:
    out = run_points(cfg, params, lambda s: print(s, flush=True))
    summary = summarize(out.points)
    res = StudyResult()
    for p in out.points:
        case = f"{p.workload} agents={p.agents} {p.point}"
        res.extend(case, {"measured": p.measured, "predicted": p.predicted, "error": p.error})
    res.extend("summary", summary)
    res.add("summary", "load_before", out.load[0])
    res.add("summary", "load_after", out.load[-1])
    if out.capacity:
        res.add("summary", "capacity_before", out.capacity[0])
        res.add("summary", "capacity_after", out.capacity[-1])
    res.report = report(out, summary)
    return res


register_study("validation", Params, run)


if __name__ == "__main__":
    # ``python3 -m experiments.validation run CONFIG ...``: fedsim's command line with this study
    # registered by its import, for a source tree that is not installed (the Soft-RoCE guest runs
    # the project from /fedfs, where no entry point declares the study).
    import sys

    from fedsim.cli import main

    raise SystemExit(main(sys.argv[1:]))
