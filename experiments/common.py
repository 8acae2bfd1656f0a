"""Shared plumbing of the studies: config -> simulated cluster -> metrics."""

from __future__ import annotations

import resource
import time
from collections import Counter
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from fedsim.config import Config
from fedsim.fuse import FuseParams
from fedsim.machine import MachineParams
from fedsim.network import LogGP, preset
from fedsim.runtime import CpuCosts, SimCluster, long_run_gc
from fedsim.schema import ConfigError
from fedsim.storage import EXT2_PAPER, StorageParams
from fedsim.workloads.postmark import Clients, PostMarkParams
from fedsim.workloads.postmark_sim import PostMarkDriver
from fedsim.workloads.sfs97 import FileSet, Recorder, Sfs97, make_fileset, place

#: what builds a workload's driver from the cluster, its file set, the config and the random stream
MakeDriver = Callable[[SimCluster, FileSet, Config, np.random.Generator], Sfs97]


def network_of(cfg: Config) -> LogGP:
    n = cfg.network
    base = preset(n.preset)
    return LogGP(
        L=base.L if n.L_us is None else n.L_us,
        o=base.o if n.o_us is None else n.o_us,
        g=base.g if n.g_us is None else n.g_us,
        G=base.G if n.G_us_per_byte is None else n.G_us_per_byte,
        name=base.name,
    )


def machine_of(cfg: Config) -> MachineParams | None:
    """The calibrated machine of ``cfg.machine`` (None: the papers' model)."""
    m = cfg.machine
    return None if m.model == "none" else MachineParams.of(m.model_dump(exclude_none=True))


def build_cluster(cfg: Config, **overrides: Any) -> SimCluster:
    """A SimCluster as the config describes it; keyword overrides win."""
    cl = cfg.cluster
    costs = dict(EXT2_PAPER)
    costs.update(cfg.storage.costs_us)
    kw: dict[str, Any] = dict(
        network=network_of(cfg),
        storage=StorageParams(
            costs_us=costs,
            block_size=cfg.storage.block_size,
            cache_blocks=int(cfg.storage.cache_mb * 2**20 // cfg.storage.block_size),
        ),
        protocol=cfg.protocol.config(),
        design=cfg.protocol.architecture,
        hashing=cfg.protocol.hashing,
        vnodes=cfg.protocol.vnodes,
        placement=cfg.protocol.placement,
        workers=cl.workers,
        cpu=CpuCosts(hash_us=cfg.cpu.hash_us, cores=cl.cores),
        seed=cfg.seed,
        rpc_timeout_us=cl.rpc_timeout_ms * 1000.0,
        machine=machine_of(cfg),
    )
    n = overrides.pop("n_nodes", cl.nodes)
    kw.update(overrides)
    return SimCluster(n, **kw)


def counters(c: SimCluster) -> dict[str, Any]:
    """Cumulative counters of a cluster, to difference around a measured phase.  What a
    design counts comes through ``Node.counters()`` (summed over the members); the
    lookup paths, dirmerges and stale retries (FedFS's, reported under their own
    names, 0 for a design without them) are taken out of it, the rest is ``design``."""
    design = _design_counters(c)
    paths = [0] + [design.pop(f"lookup_path_{i}", 0) for i in range(1, 5)]
    dirmerges, stale = design.pop("dirmerges", 0), design.pop("stale_retries", 0)
    return {
        "paths": paths,
        "dirmerges": dirmerges,
        "merge_contacted": [x for n in c.nodes for x in getattr(n.stats, "dirmerge_contacted", ())],
        "merge_holders": [x for n in c.nodes for x in getattr(n.stats, "dirmerge_holders", ())],
        "merged_dirs": _merged_dirs(c),
        "dt": _table(c, "dt"),
        "vd": _table(c, "vds"),
        "design": design,
        "load": [n.stats.requests_served + c.client_ops[n.id] for n in c.nodes],
        "messages": c.messages,
        "stale": stale,
    }


def _merged_dirs(c: SimCluster) -> Counter[str]:
    """Dirmerges per directory over all nodes (one Counter updated in place:
    summing 1,024 Counters with ``+`` copied the running total each time)."""
    merged: Counter[str] = Counter()
    for n in c.nodes:
        merged.update(getattr(n.stats, "merges_by_dir", ()))  # (FedFS's distribution: none in other designs)
    return +merged  # what ``+`` kept: positive counts


def _table(c: SimCluster, name: str) -> tuple[int, int]:
    """Hits and misses of the nodes' table ``name`` (FedFS's DT and VD cache;
    (0, 0) for a design without it)."""
    tables = [t for t in (getattr(n, name, None) for n in c.nodes) if t is not None]
    return sum(t.hits for t in tables), sum(t.misses for t in tables)


def _design_counters(c: SimCluster) -> Counter[str]:
    """Every node's ``Node.counters()`` summed: what the design itself counts."""
    total: Counter[str] = Counter()
    for n in c.nodes:
        total.update(n.counters())
    return total


def _rate(hits: int, misses: int) -> float:
    return hits / (hits + misses) if hits + misses else float("nan")


@dataclass
class RunOutcome:
    metrics: dict[str, float]
    recorder: Recorder
    cluster: SimCluster
    # How fast the simulator ran (wall clock: printed, never in results.csv).
    events: int = 0  # SimPy events scheduled by the workload (warm-up and measured phase)
    wall_s: float = 0.0  # wall-clock seconds of those phases
    peak_rss_mb: float = 0.0  # the process's peak resident memory so far

    def speed(self) -> str:
        """One line for a study's report: simulator events/s and peak memory."""
        rate = self.events / self.wall_s if self.wall_s > 0 else float("nan")
        return (
            f"simulator: {self.events:,} events in {self.wall_s:.1f} s wall ({rate:,.0f} events/s), "
            f"peak memory {self.peak_rss_mb:,.0f} MB"
        )


def metrics_between(before: dict[str, Any], after: dict[str, Any], rec: Recorder, sim_us: float) -> dict[str, float]:
    m: dict[str, float] = {}
    all_lat = [x for v in rec.latency.values() for x in v]
    all_msgs = [x for v in rec.messages.values() for x in v]
    m["ops_done"] = rec.done
    m["errors"] = sum(rec.errors.values())
    m["sim_seconds"] = sim_us / 1e6
    m["throughput_ops_s"] = rec.done / (sim_us / 1e6) if sim_us > 0 else 0.0
    m["latency_mean_us"] = float(np.mean(all_lat)) if all_lat else float("nan")
    m["messages_per_op"] = float(np.mean(all_msgs)) if all_msgs else float("nan")
    m["max_nodes_per_op"] = max((max(v) for v in rec.nodes.values() if v), default=0)
    for op in sorted(rec.latency):
        lat = np.asarray(rec.latency[op])
        m[f"latency_mean_us.{op}"] = float(lat.mean())
        for q in (50, 95, 99):
            m[f"latency_p{q}_us.{op}"] = float(np.percentile(lat, q))
        m[f"messages_per_op.{op}"] = float(np.mean(rec.messages[op]))
        m[f"count.{op}"] = len(lat)
    paths = [a - b for a, b in zip(after["paths"], before["paths"], strict=True)]
    total = sum(paths[1:])
    m["lookups"] = total
    for i in range(1, 5):
        m[f"lookup_path_{i}"] = paths[i]
        m[f"lookup_path_share_{i}"] = paths[i] / total if total else float("nan")
    m["stale_retries"] = after["stale"] - before["stale"]
    contacted = after["merge_contacted"][len(before["merge_contacted"]) :]
    holders = after["merge_holders"][len(before["merge_holders"]) :]
    m["dirmerges"] = after["dirmerges"] - before["dirmerges"]
    m["dirmerge_contacted_mean"] = float(np.mean(contacted)) if contacted else 0.0
    m["dirmerge_contacted_max"] = max(contacted, default=0)
    m["dirmerge_holders_mean"] = float(np.mean(holders)) if holders else 0.0
    merged = after["merged_dirs"] - before["merged_dirs"]
    m["dirs_merged"] = len(merged)
    m["max_merges_per_dir"] = max(merged.values(), default=0)
    m["dt_hit_rate"] = _rate(after["dt"][0] - before["dt"][0], after["dt"][1] - before["dt"][1])
    m["vd_hit_rate"] = _rate(after["vd"][0] - before["vd"][0], after["vd"][1] - before["vd"][1])
    load = np.asarray(after["load"], float) - np.asarray(before["load"], float)
    m["load_max_over_mean"] = float(load.max() / load.mean()) if load.mean() > 0 else float("nan")
    m["load_cv"] = float(load.std() / load.mean()) if load.mean() > 0 else float("nan")
    m["messages_total"] = after["messages"] - before["messages"]
    for key in sorted(after["design"]):
        m[f"design.{key}"] = after["design"][key] - before["design"].get(key, 0)
    return m


def run_workload(
    cfg: Config, make_driver: MakeDriver | None = None, through_protocol: bool = False, **overrides: Any
) -> RunOutcome:
    """Build the cluster, lay out the SFS97 file set, run warm-up then the
    measured operations; return the measured metrics.  With ``workload.kind:
    postmark``: the PostMark clients on an empty federation instead.
    ``make_driver`` drives another operation mix over the same file set, loops
    and measurement (an ``Sfs97`` subclass: ``fedsim.workloads.ursa_mix``).

    The file set is laid into the nodes' local trees where FedFS's placement
    puts it (``place``), or, with ``through_protocol``, written through the
    design's own operations before the clock starts (``lay_through``): a
    design other than FedFS keeps its files elsewhere (NFS's at its one
    server, mNFS's namespace at every server), and its own calls put them there."""
    if cfg.workload.kind == "postmark":
        return run_postmark(cfg, **overrides)
    rng = np.random.default_rng(cfg.seed)
    c = build_cluster(cfg, **overrides)
    w = cfg.workload
    fs = make_fileset(w.files, w.dirs, rng)
    if through_protocol:
        start_federation(cfg, c)
        c.env.run(until=c.env.process(lay_through(c, fs)))
    else:
        place(c, fs, cfg.protocol.placement, rng)
        start_federation(cfg, c)
    drv = (make_driver or driver)(c, fs, cfg, rng)

    def phase(n_ops: int) -> None:
        if w.arrivals == "open":
            body = drv.open_loop(w.rate, n_ops)
        else:
            body = drv.closed_loop(w.clients, n_ops, w.think_ms * 1000.0)
        c.env.run(until=c.env.process(body))

    with long_run_gc():  # the cluster lives for the whole run: keep the collector off it
        e0 = simulator_events(c)
        t_wall = time.perf_counter()
        if w.warmup_ops:
            drv.measuring = False
            phase(w.warmup_ops)
            drv.measuring = True
        before = counters(c)
        t0 = c.env.now
        phase(w.ops)
        after = counters(c)
        wall_s = time.perf_counter() - t_wall
    events = simulator_events(c) - e0 - 1
    out = RunOutcome(metrics_between(before, after, drv.rec, c.env.now - t0), drv.rec, c)
    out.events, out.wall_s, out.peak_rss_mb = events, wall_s, peak_rss_mb()
    return out


def lay_through(c: SimCluster, fs: FileSet) -> Generator[Any, Any, None]:
    """``fs`` made by the federation's own calls, one after the other (a SimPy
    process body): each directory, then each file created and cut to its size
    (a sparse file: the local file system's data is not modelled), by a client
    at node i mod N for the i-th name, as clients spread over the nodes would."""
    n = len(c.nodes)
    for i, d in enumerate(fs.dirs):
        yield from c.client_op(i % n, i % n, "mkdir", d)
    for i, f in enumerate(fs.files):
        yield from c.client_op(i % n, i % n, "create", f)
        if fs.sizes[f]:
            yield from c.client_op(i % n, i % n, "truncate", f, fs.sizes[f])


def start_federation(cfg: Config, c: SimCluster) -> None:
    """Bring the federation to where measurement starts: the summaries the
    nodes would have exchanged (preloaded, or exchanged in simulated time)."""
    if cfg.cluster.bootstrap == "preload":
        c.preload_summaries()
        # What start() would go on with after its push: the node's periodic
        # work (summary refresh, VD ageing, a migration policy).  The summary
        # timer returns at once when protocol.summary_refresh_s is 0, and no
        # migration timer runs under the policy none, so closed-world runs
        # are unchanged.
        for node in c.nodes:
            for timer in node.background():
                c.spawn(node.id, timer)
    else:
        c.env.run(until=c.exchange_summaries())


def postmark_clients(cfg: Config, clients: int | None = None) -> Clients:
    """The PostMark clients ``cfg.workload`` describes (client i in /pm<i>);
    ``clients`` overrides how many."""
    pm = cfg.workload.postmark
    routing = {"seed_step", "route", "client_link", "mount", "mount_route"}
    params = PostMarkParams(**pm.model_dump(exclude=routing))  # its own
    return Clients(params, clients=clients or cfg.workload.clients, seed_step=pm.seed_step)


def run_postmark(cfg: Config, **overrides: Any) -> RunOutcome:
    """PostMark clients (``workload.clients`` of them, ``workload.postmark``'s
    parameters) on a federation that starts empty; every operation of every
    client is measured (PostMark has no warm-up).  ``metrics`` adds PostMark's
    own numbers: transactions per second and the counts it reports."""
    c = build_cluster(cfg, **overrides)
    start_federation(cfg, c)
    pm = cfg.workload.postmark
    fuse = None
    if pm.mount:
        if not cfg.machine.fuse:
            raise ConfigError(
                "workload.postmark.mount: the FUSE model needs machine.fuse: run `fednode calibrate --mount` "
                "and name its profile under calibration:"
            )
        fuse = FuseParams.from_profile(cfg.machine.fuse)
    drv = PostMarkDriver(
        c, postmark_clients(cfg), route=pm.route, client_link=pm.client_link, mount=fuse, mount_route=pm.mount_route
    )
    with long_run_gc():
        e0 = simulator_events(c)
        t_wall = time.perf_counter()
        before = counters(c)
        t0 = c.env.now
        c.env.run(until=c.env.process(drv.run()))
        after = counters(c)
        wall_s = time.perf_counter() - t_wall
    events = simulator_events(c) - e0 - 1
    m = metrics_between(before, after, drv.rec, c.env.now - t0)
    m["postmark_tps"] = drv.transactions_per_s()
    m["postmark_binary_tps"] = drv.binary_tps()
    m["postmark_span_s"] = (max(e for _, e in drv.span) - min(b for b, _ in drv.span)) / 1e6
    for key in drv.counts[0]:
        m[f"postmark.{key}"] = sum(cnt[key] for cnt in drv.counts)
    out = RunOutcome(m, drv.rec, c)
    out.events, out.wall_s, out.peak_rss_mb = events, wall_s, peak_rss_mb()
    return out


T = TypeVar("T")


def climb(levels: list[int], run: Callable[[int], T], rate: Callable[[T], float], gain: float) -> tuple[T, list[T]]:
    """Throughput at saturation, the papers' way (Federated DAFS VI: "increasing the number of clients
    until the server CPUs reached saturation"): ``run`` each load level in turn until ``rate`` grows by
    less than ``gain`` (relative) over the level before; the best run and every run made."""
    runs: list[T] = []
    for k in levels:
        runs.append(run(k))
        if len(runs) > 1 and rate(runs[-1]) < (1 + gain) * rate(runs[-2]):
            break
    return max(runs, key=rate), runs


def saturated(rates: list[float]) -> list[bool]:
    """Which of a closed loop's rates (by growing client count) are at saturation: every one from the
    first within 90 % of the best on, the first count excepted.  A rate past the peak that falls below
    90 % is beyond saturation too, not below it (if the first count is the best, all later ones are)."""
    if not rates:
        return []
    best = max(rates)
    first = next((i for i, r in enumerate(rates) if i and r >= 0.9 * best), 1)
    return [i >= first for i in range(len(rates))]


def driver(c: SimCluster, fs: FileSet, cfg: Config, rng: np.random.Generator) -> Sfs97:
    """The SFS97 driver the config's workload section describes."""
    w = cfg.workload
    return Sfs97(c, fs, mix=dict(w.mix), rng=rng, io_size=w.io_size, locality=w.locality, hot_files=w.hot_files,
                 frontend_us=w.frontend_us, zipf=w.zipf)  # fmt: skip


def simulator_events(c: SimCluster) -> int:
    """Events ``c``'s environment has scheduled so far.  SimPy numbers events
    with a counter used only to break ties in its queue; drawing a number from
    it leaves the order of events (and so the results) unchanged."""
    return next(c.env._eid)


def peak_rss_mb() -> float:
    """Peak resident memory of this process in MB (ru_maxrss is in KB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
