"""Simulate a federation under the SFS97 workload the config describes and
report latency per operation, lookup paths, dirmerges and load balance."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from experiments.common import run_workload
from fedsim.config import Config
from fedsim.results import StudyResult
from fedsim.schema import table
from fedsim.studies import register_study


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


def run(cfg: Config, params: Params) -> StudyResult:
    out = run_workload(cfg)
    m = out.metrics
    res = StudyResult()
    res.extend(f"nodes={cfg.cluster.nodes}", m)
    ops = sorted(out.recorder.latency)
    rows = [
        [
            op,
            int(m[f"count.{op}"]),
            f"{m[f'latency_mean_us.{op}']:.0f}",
            f"{m[f'latency_p95_us.{op}']:.0f}",
            f"{m[f'messages_per_op.{op}']:.2f}",
        ]
        for op in ops
    ]
    w = cfg.workload
    if w.kind == "postmark":
        pm = w.postmark
        offered = (
            f"{w.clients} PostMark clients ({pm.number} files of {pm.size_low}-{pm.size_high} B, "
            f"{pm.transactions} transactions each, route {pm.route})"
        )
        result = (
            f"PostMark: {m['postmark_tps']:.0f} transactions/s; created {int(m['postmark.created'])}, "
            f"read {int(m['postmark.read'])}, appended {int(m['postmark.appended'])}, "
            f"deleted {int(m['postmark.deleted'])}"
        )
    else:
        offered, result = f"{w.arrivals}-loop {w.rate:g} ops/s offered", ""
    shares = ", ".join(f"{i}: {m[f'lookup_path_share_{i}']:.1%}" for i in range(1, 5))
    res.report = "\n".join(
        [
            f"{cfg.cluster.nodes} nodes, {cfg.network.preset} network, {cfg.protocol.placement} placement, " + offered,
            table(["op", "count", "mean us", "p95 us", "msgs/op"], rows),
            *([result] if result else []),
            f"throughput {m['throughput_ops_s']:.0f} ops/s, mean latency {m['latency_mean_us']:.0f} us, "
            f"errors {int(m['errors'])}",
            f"lookup paths (1 local DT, 2 manager DT, 3 parent VD, 4 dirmerge): {shares}",
            f"dirmerges {int(m['dirmerges'])} over {int(m['dirs_merged'])} directories "
            f"(max {int(m['max_merges_per_dir'])} per directory), "
            f"{m['dirmerge_contacted_mean']:.1f} nodes asked per merge (max {int(m['dirmerge_contacted_max'])})",
            f"DT hit rate {m['dt_hit_rate']:.1%}, VD hit rate {m['vd_hit_rate']:.1%}, "
            f"load max/mean {m['load_max_over_mean']:.2f}",
            out.speed(),
        ]
    )
    return res


register_study("simulate", Params, run)
