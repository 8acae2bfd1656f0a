"""Every design on one workload, side by side, as the cluster grows (issue 25's
last study): each design's throughput at saturation, its latency below
saturation and its messages per operation, on 1 to 64 servers (FedFS, Ursa Minor and
dNFSp2 on to 1,024 in ``configs/fedfs/designs_scale_large.yaml``), under each
network/CPU profile: the VIA preset, the InfiniBand preset and this machine's
calibrated profile.

Every design is its protocol package (``fedsim.protocol.fedfs``, ``.nfs``,
``.nfsp``, ``.dnfsp``, ``.mnfs``) under the same network, CPU and disk
models; the lists are parameters, so a design added later (Ursa Minor: FedFS
with another rename protocol key) or a workload (the Harvard EECS mix) is a
config entry, not code:

* ``designs``: name -> the protocol keys that make it (``architecture`` is the
  name unless given), its PostMark clients' route (FedFS's apply the
  federation's hash, the others enter at a fixed node each, as in
  ``designs_postmark``) and the largest cluster it is run on;
* ``workloads``: name -> the ``workload:`` keys that make it, over the config's,
  and ``trace``: a Table 4 mix of Ursa Minor's paper (``eecs``: the Harvard EECS
  mix, ``fedsim.workloads.ursa_mix``) driven over SFS97's file set;
* ``profiles``: name -> config sections (``network``, ``machine``, ...) over
  the config's; ``calibration: auto`` takes the profile ``fednode calibrate``
  left where ``experiments.validation`` keeps it (none: the column is skipped
  and the report says so).

Saturation is found the papers' way (``common.climb``, Federated DAFS VI's
"increasing the number of clients until the server CPUs reached saturation"):
``clients_per_server`` levels in turn until throughput grows by less than
``saturation_gain``.  Latency below saturation is the mean operation latency
at the heaviest level ``common.saturated`` (the validation's rule: from the
first level within 90 % of the best on is saturated) does not mark.  Messages
per operation are those between nodes each measured operation sent (the
runtime's trace), at saturation.

A preexisting file set (SFS97's) is made through each design's own calls
before the clock starts (``common.lay_through``), since only FedFS's layout
can be written into the local trees directly (``sfs97.place``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveFloat, PositiveInt

from experiments.common import RunOutcome, climb, run_workload, saturated
from experiments.dafs_fig6 import PAPER_SPEEDUP
from experiments.mnfs_table3 import PAPER as MNFS_TABLE3
from fedsim.calibration import apply_calibration
from fedsim.config import Config, apply_overrides, validate
from fedsim.results import StudyResult
from fedsim.schema import table
from fedsim.studies import register_study
from fedsim.workloads.ursa_mix import UrsaMix, mix

#: what each workload's throughput is counted in (the run's metric, the unit); others: operations/s
RATE: dict[str, tuple[str, str]] = {"postmark": ("postmark_tps", "tx/s")}
#: mNFS paper, abstract: mNFS (3 nodes) over NFSp (3 nodes), IOzone's best case
MNFS_OVER_NFSP = 1.99


class Design(BaseModel):
    """One design as the study runs it."""

    model_config = ConfigDict(extra="forbid")

    protocol: dict[str, Any] = Field(default_factory=dict)  # protocol keys over the config's (architecture: the name)
    route: str = "fixed"  # where its PostMark clients send each call (workload.postmark.route)
    max_servers: PositiveInt | None = None  # the largest cluster it is run on (None: every size)


def _designs() -> dict[str, Design]:
    return {
        "fedfs": Design(route="hash"),
        "nfs": Design(),
        "nfsp": Design(),
        "dnfsp1": Design(),
        "dnfsp2": Design(),
        "mnfs": Design(),
    }


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")

    designs: dict[str, Design] = Field(default_factory=_designs, min_length=1)
    workloads: dict[str, dict[str, Any]] = Field(
        default_factory=lambda: {"sfs97": {"kind": "sfs97"}, "postmark": {"kind": "postmark"}}, min_length=1
    )
    profiles: dict[str, dict[str, Any]] = Field(
        default_factory=lambda: {
            "via": {"network": {"preset": "via_clan"}},
            "infiniband": {"network": {"preset": "infiniband_hdr"}},
            "calibrated": {"calibration": "auto"},
        },
        min_length=1,
    )
    servers: list[PositiveInt] = Field(default_factory=lambda: [1, 2, 4, 8, 16, 32, 64], min_length=1)
    clients_per_server: list[PositiveInt] = Field(default_factory=lambda: [1, 2, 4, 8], min_length=1)
    saturation_gain: PositiveFloat = 0.05
    # closed-loop workloads (all but PostMark, whose clients run their own transactions): operations
    # per client measured, and run before the clock starts
    ops_per_client: PositiveInt = 40
    warmup_per_client: NonNegativeInt = 5


#: a calibrated profile runs each server on a host of its own (a cluster of machines like this one),
#: each client program a process of its own on its server's host
CALIBRATED_MACHINE = {"model": "calibrated", "hosts": 0, "clients": "own"}


def calibrated_profile(ref: str) -> Path | None:
    """The profile ``ref`` names (None: there is none).  ``auto``: the one ``fednode calibrate``
    last left where ``experiments.validation`` keeps it (tmpfs agents' first, then the temporary
    directory's), relative to the working directory as the validation's is, unless other work
    crowded the cores while it was taken (``validation.was_crowded``: a validation does not reuse
    such a profile either; its fits describe the load: found when CI's parallel tests calibrated)."""
    if ref != "auto":
        path = Path(ref)
        return path if path.is_file() else None
    import yaml

    from experiments.validation import Params as Validation
    from experiments.validation import cache_path, was_crowded

    for agent_dir in ("/dev/shm", ""):
        path = cache_path(Validation(agent_dir=agent_dir))
        if path.is_file():
            on = ((yaml.safe_load(path.read_text()) or {}).get("machine") or {}).get("measured_on") or {}
            if not was_crowded(on):
                return path
    return None


def _dotted(prefix: list[str], tree: dict[str, Any]) -> list[tuple[list[str], Any]]:
    """A nested mapping of keys as (dotted key, value) overrides (``apply_overrides``'s form)."""
    out: list[tuple[list[str], Any]] = []
    for k, v in tree.items():
        out += _dotted([*prefix, k], v) if isinstance(v, dict) else [([*prefix, k], v)]
    return out


def point_config(
    cfg: Config, params: Params, design: str, workload: str, profile: dict[str, Any], servers: int, per_server: int
) -> Config:
    """The config of one run: ``cfg`` with the design's, the workload's and the profile's keys, on
    ``servers`` servers with ``per_server`` clients each."""
    d = params.designs[design]
    spec = {k: v for k, v in params.workloads[workload].items() if k != "trace"}
    raw = cfg.model_dump(exclude_none=True)
    profile = dict(profile)
    ref = profile.pop("calibration", None)
    overrides = [
        *_dotted(["protocol"], {"architecture": design, **d.protocol}),
        *_dotted(["workload"], spec),
        *_dotted([], profile),
    ]
    apply_overrides(raw, overrides)
    clients = per_server * servers
    w = raw["workload"]
    raw["cluster"]["nodes"] = servers
    w["clients"] = clients
    if w.get("kind") == "postmark":
        w["postmark"]["route"] = d.route
    else:
        w.update(arrivals="closed", ops=params.ops_per_client * clients, warmup_ops=params.warmup_per_client * clients)
    if ref is not None:
        raw["calibration"] = str(Path(ref).resolve())
        raw["network"] = {"preset": "tcp_loopback"}  # the profile's measured LogGP refines this preset
        raw["machine"] = {**CALIBRATED_MACHINE, **profile.get("machine", {})}
        apply_calibration(raw, "designs_scale")
    return validate(raw, f"designs_scale {design} {workload} {servers} servers")


def rate_of(cfg: Config, params: Params, workload: str) -> tuple[str, str]:
    """The metric a workload's throughput is and its unit (PostMark's transactions, others' operations)."""
    return RATE.get(str(params.workloads[workload].get("kind", cfg.workload.kind)), ("throughput_ops_s", "ops/s"))


def run_point(
    cfg: Config, params: Params, design: str, workload: str, profile: dict[str, Any], servers: int
) -> tuple[dict[str, float], list[tuple[int, dict[str, float]]]]:
    """One design on one workload and profile at one cluster size, driven to saturation: its numbers
    (throughput at saturation, latency below it, messages per operation) and each level's run."""
    metric, _ = rate_of(cfg, params, workload)

    trace = params.workloads[workload].get("trace")
    weights = mix(str(trace)) if trace is not None else None

    def make(c: Any, fs: Any, _cfg: Config, rng: Any) -> UrsaMix:
        assert weights is not None
        return UrsaMix(c, fs, mix=weights, rng=rng)

    def one(k: int) -> tuple[int, dict[str, float]]:
        v = point_config(cfg, params, design, workload, profile, servers, k)
        out: RunOutcome = run_workload(v, make_driver=make if weights else None, through_protocol=True)
        return k, out.metrics

    best, runs = climb(params.clients_per_server, one, lambda r: r[1][metric], params.saturation_gain)
    marks = saturated([m[metric] for _, m in runs])
    below = [r for r, sat in zip(runs, marks, strict=True) if not sat][-1]
    k, m = best
    ops = m["ops_done"]
    # what the design itself counts (``Node.counters()``: dNFSp's searches and token requests, FedFS's
    # lookups and dirmerges ...), per measured operation at saturation
    own = {f"{key}_per_op": m[key] / ops for key in sorted(m) if key.startswith("design.") and ops}
    return {
        "tps": m[metric],
        "clients_per_server": k,
        "latency_us": below[1]["latency_mean_us"],
        "latency_clients_per_server": below[0],
        "messages_per_op": m["messages_per_op"] if m["ops_done"] else float("nan"),
        "messages_total_per_op": m["messages_total"] / m["ops_done"] if m["ops_done"] else float("nan"),
        "errors": sum(mm["errors"] for _, mm in runs),
        "levels": len(runs),
        **own,
    }, runs


def run(cfg: Config, params: Params) -> StudyResult:
    res = StudyResult()
    out: dict[tuple[str, str, str, int], dict[str, float]] = {}
    notes: list[str] = []
    profiles: dict[str, dict[str, Any]] = {}
    for name, prof in params.profiles.items():
        ref = prof.get("calibration")
        if ref is None:
            profiles[name] = prof
            continue
        path = calibrated_profile(str(ref))
        if path is None:
            notes.append(
                f"profile {name}: no calibration of this machine found ({ref}), or only one taken while other work "
                "crowded its cores: column skipped; make one on an idle machine with "
                "`fedsim run configs/validation/small.yaml` or `python -m experiments.postmark_agents`"
            )
            res.add(f"profile={name}", "available", 0)
            continue
        profiles[name] = {**prof, "calibration": str(path)}
        notes.append(
            f"profile {name}: {path} (fednode calibrate), each server a host of its own, clients own processes"
        )
        res.add(f"profile={name}", "available", 1)
    for workload in params.workloads:
        for pname, prof in profiles.items():
            for design, d in params.designs.items():
                for n in params.servers:
                    if d.max_servers is not None and n > d.max_servers:
                        continue
                    m, runs = run_point(cfg, params, design, workload, prof, n)
                    out[(workload, pname, design, n)] = m
                    case = f"workload={workload} profile={pname} design={design} servers={n}"
                    res.extend(case, m)
                    metric, _ = rate_of(cfg, params, workload)
                    for k, rm in runs:
                        res.extend(f"{case} clients_per_server={k}",
                                   {"level_tps": rm[metric], "level_latency_us": rm["latency_mean_us"]})  # fmt: skip
    res.report = report(cfg, params, list(profiles), out, notes)
    return res


def _cell(out: dict[tuple[str, str, str, int], dict[str, float]], key: tuple[str, str, str, int], metric: str,
          fmt: str) -> str:  # fmt: skip
    m = out.get(key)
    return "-" if m is None or math.isnan(m[metric]) else format(m[metric], fmt)


def report(
    cfg: Config,
    params: Params,
    profiles: list[str],
    out: dict[tuple[str, str, str, int], dict[str, float]],
    notes: list[str],
) -> str:
    servers = params.servers
    rows = [(w, p, d) for w in params.workloads for p in profiles for d in params.designs]
    base = min(servers)

    def growth(w: str, p: str, d: str) -> str:
        sizes = [n for n in servers if (w, p, d, n) in out]
        top = max(sizes, default=base)
        if base not in sizes or top == base:
            return "-"
        return f"{out[(w, p, d, top)]['tps'] / out[(w, p, d, base)]['tps']:.2f} ({top}/{base})"

    units = {w: rate_of(cfg, params, w)[1] for w in params.workloads}
    errors = [f"{sum(out[(w, p, d, n)]['errors'] for n in servers if (w, p, d, n) in out):.0f}" for w, p, d in rows]
    lines = [
        f"Every design side by side: throughput at saturation ({params.clients_per_server} clients per server in "
        f"turn until it grows by less than {params.saturation_gain:.0%}); simulated, measured here",
        table(
            ["workload", "profile", "design", *(f"{n} srv" for n in servers), "growth", "errors"],
            [
                [w, p, d, *(_cell(out, (w, p, d, n), "tps", ",.0f") for n in servers), growth(w, p, d), e]
                for (w, p, d), e in zip(rows, errors, strict=True)
            ],
        ),
        "units: " + ", ".join(f"{w} {u}" for w, u in units.items()) + "; errors: failed operations over every level",
        "",
        "Latency below saturation (mean us per operation, at the heaviest level not saturated)",
        table(
            ["workload", "profile", "design", *(f"{n} srv" for n in servers)],
            [[w, p, d, *(_cell(out, (w, p, d, n), "latency_us", ",.0f") for n in servers)] for w, p, d in rows],
        ),
        "",
        "Messages between nodes per operation, at saturation",
        table(
            ["workload", "profile", "design", *(f"{n} srv" for n in servers)],
            [[w, p, d, *(_cell(out, (w, p, d, n), "messages_per_op", ".2f") for n in servers)] for w, p, d in rows],
        ),
        "",
        *paper_lines(params, profiles, out),
        "",
        *failures(params, profiles, out),
        *notes,
    ]
    return "\n".join(lines)


Outcomes = dict[tuple[str, str, str, int], dict[str, float]]


def failures(params: Params, profiles: list[str], out: Outcomes) -> list[str]:
    """Which designs failed operations, and where: a failed operation is not in the throughput, and
    a design that fails some is not doing all the work the others do."""
    lines = []
    for d in params.designs:
        where = [f"{w}/{p}/{n} srv: {out[(w, p, d, n)]['errors']:.0f}" for w in params.workloads for p in profiles
                 for n in params.servers if (w, p, d, n) in out and out[(w, p, d, n)]["errors"]]  # fmt: skip
        if where:
            lines.append(f"{d} failed operations (not counted in its throughput): {', '.join(where)}")
    return lines


def paper_lines(params: Params, profiles: list[str], out: Outcomes) -> list[str]:
    """The papers' numbers beside ours where a paper gives one (none measured these designs on one
    workload: each row says what the paper measured)."""
    rows: list[list[str]] = []
    base = min(params.servers)

    def ratio(a: tuple[str, str, str, int], b: tuple[str, str, str, int]) -> str:
        return f"{out[a]['tps'] / out[b]['tps']:.2f}" if a in out and b in out and out[b]["tps"] else "-"

    near3 = min(params.servers, key=lambda n: (abs(n - 3), -n))
    lo, hi = min(v[2] for v in MNFS_TABLE3.values()), max(v[2] for v in MNFS_TABLE3.values())
    for w in params.workloads:
        for p in profiles:
            for n, paper in PAPER_SPEEDUP.items():
                if n in params.servers and "fedfs" in params.designs:
                    rows.append([f"FedFS speedup {n}/{base} srv", "Federated DAFS Fig. 6 (PostMark, cLAN)",
                                 f"{paper:.2f}", w, p, ratio((w, p, "fedfs", n), (w, p, "fedfs", base))])  # fmt: skip
            if "mnfs" in params.designs and "nfs" in params.designs:
                mnfs_nfs = ratio((w, p, "mnfs", near3), (w, p, "nfs", base))
                rows.append([f"mNFS {near3} srv / NFS 1 srv", "mNFS Table 3 (IOzone, 3 nodes vs 3-disk NFS)",
                             f"{lo:.2f}-{hi:.2f}", w, p, mnfs_nfs])  # fmt: skip
            if "mnfs" in params.designs and "nfsp" in params.designs:
                rows.append([f"mNFS / NFSp, {near3} srv", "mNFS abstract (IOzone, 3 nodes)", f"{MNFS_OVER_NFSP:.2f}",
                             w, p, ratio((w, p, "mnfs", near3), (w, p, "nfsp", near3))])  # fmt: skip
    return [
        "The papers' numbers beside ours (labelled: the paper's are other workloads on other hardware; "
        "the direction is what compares)",
        table(["ratio", "paper's source", "paper's", "workload", "profile", "ours"], rows),
        "dNFSp paper: no numbers survive (Fig. 3's are lost; its text: dNFSp2 flat, dNFSp1 degrading with files): "
        "see dnfsp_fig3.",
    ]


register_study("designs_scale", Params, run)
