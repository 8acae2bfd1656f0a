"""Which of the four lookup paths (FedFS 3.1) serve lookups, and how many
messages a lookup costs, as the directory table size and the workload's
locality vary.

Path 1 is the requester's own DT, 2 the file manager's DT, 3 the parent
manager's cached VD, 4 a dirmerge.  A bigger DT and a more local workload
should move lookups toward path 1; the paper argues the costly paths are
"one time costs, easily amortized".  The grid measures how quickly.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from experiments.common import run_workload
from fedsim.config import Config
from fedsim.results import StudyResult
from fedsim.schema import table
from fedsim.studies import register_study


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")
    dt_entries: list[int] = Field(default_factory=lambda: [16, 256, 4096, 65536], min_length=1)
    locality: list[float] = Field(default_factory=lambda: [0.0, 0.5, 0.9], min_length=1)


def run(cfg: Config, params: Params) -> StudyResult:
    for d in params.dt_entries:
        if d <= 0:
            raise ValueError(f"params.dt_entries: {d} must be positive")
    res = StudyResult()
    printed = []
    for dt in params.dt_entries:
        for loc in params.locality:
            c = cfg.model_copy(
                update={
                    "protocol": cfg.protocol.model_copy(update={"dt_entries": dt}),
                    "workload": cfg.workload.model_copy(update={"locality": loc}),
                }
            )
            m = run_workload(c).metrics
            case = f"dt_entries={dt} locality={loc:g}"
            keep = {k: v for k, v in m.items() if k.startswith(("lookup_path", "messages_per_op", "dt_hit", "vd_hit"))}
            keep["lookups"] = m["lookups"]
            keep["dirmerges"] = m["dirmerges"]
            keep["latency_mean_us.lookup"] = m.get("latency_mean_us.lookup", float("nan"))
            res.extend(case, keep)
            printed.append(
                [dt, f"{loc:g}"]
                + [f"{m[f'lookup_path_share_{i}']:.1%}" for i in range(1, 5)]
                + [
                    f"{m.get('messages_per_op.lookup', float('nan')):.2f}",
                    f"{m['dt_hit_rate']:.1%}",
                    f"{m.get('latency_mean_us.lookup', float('nan')):.0f}",
                ]
            )
    res.report = "\n".join(
        [
            f"Lookup paths, {cfg.cluster.nodes} nodes, {cfg.workload.files} files in {cfg.workload.dirs} "
            f"directories, {cfg.workload.ops} SFS97 operations per point",
            table(
                [
                    "DT entries",
                    "locality",
                    "1 own DT",
                    "2 mgr DT",
                    "3 parent VD",
                    "4 dirmerge",
                    "msgs/lookup op",
                    "DT hit",
                    "lookup us",
                ],
                printed,
            ),
            "msgs/lookup op counts every message of a 'lookup' (stat) operation: resolving the home "
            "plus the stat at the home.",
        ]
    )
    return res


register_study("lookup_paths", Params, run)
