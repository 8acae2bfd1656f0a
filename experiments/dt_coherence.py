"""FedFS's directory table under its three coherence policies (issue 25,
``protocol: dt_coherence``; ``fedsim.protocol.policies.coherence``): messages per
operation and stale entries found on use, SFS97 at small size, without and with
load-based migration (which is what makes cached entries stale).

Neither paper measured this: FedFS (3.2) describes only its lazy scheme, and the
dNFSp paper (004_..., section 3) its two schemes between meta-servers.  The table
prints the dNFSp paper's claims beside the simulated numbers: dNFSp1's miss asks
every other server (``n - 1`` requests where lazy asks one manager), no further
synchronisation (stale entries stay possible: as many as lazy's, or more); dNFSp2's
holder answers without a round trip, transfers go through the hash server (recalls),
and a holder is never stale after a change (0 stale entries in a run without
concurrent uses racing a change; a use that races one may still meet one).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from experiments.common import run_workload
from fedsim.config import Config
from fedsim.protocol.policies.coherence import DT_COHERENCES
from fedsim.results import StudyResult
from fedsim.schema import table
from fedsim.studies import register_study

#: the dNFSp paper's claim for each policy, printed beside its row
CLAIMS = {
    "lazy": "FedFS 3.2: stale found on use",
    "dnfsp1": "miss asks n-1 servers; stale stays",
    "dnfsp2": "holder: no round trip; never stale",
}


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")
    policies: list[str] = Field(default_factory=lambda: list(DT_COHERENCES.names()), min_length=1)
    migration: list[str] = Field(default_factory=lambda: ["none", "load_based"], min_length=1)


def run(cfg: Config, params: Params) -> StudyResult:
    for p in params.policies:
        DT_COHERENCES.get(p)  # ValueError naming the registered ones
    res = StudyResult()
    rows = []
    for mig in params.migration:
        for policy in params.policies:
            c = cfg.model_copy(update={"protocol": cfg.protocol.model_copy(
                update={"dt_coherence": policy, "migration": mig})})  # fmt: skip
            out = run_workload(c)
            m = out.metrics
            # (a node's policy counts from the start: the run has no warm-up, ``workload.warmup_ops: 0``)
            stale = sum(n.dt_coherence.stale_entries for n in out.cluster.nodes)
            keep = {
                "messages_per_op": m["messages_per_op"],
                "messages_per_op.lookup": m.get("messages_per_op.lookup", float("nan")),
                "latency_mean_us.lookup": m.get("latency_mean_us.lookup", float("nan")),
                "dt_hit_rate": m["dt_hit_rate"],
                "stale_entries": stale,
                "stale_retries": m["stale_retries"],
                "dt_fetches": m.get("design.dt_fetches", 0),
                "dt_recalls": m.get("design.dt_recalls", 0),
                "dt_token_grants": m.get("design.dt_token_grants", 0),
            }
            res.extend(f"migration={mig} policy={policy}", keep)
            rows.append([mig, policy, f"{keep['messages_per_op']:.2f}", f"{keep['messages_per_op.lookup']:.2f}",
                         f"{keep['latency_mean_us.lookup']:.0f}", f"{keep['dt_hit_rate']:.1%}", stale,
                         keep["stale_retries"], keep["dt_fetches"], keep["dt_recalls"],
                         CLAIMS.get(policy, "")])  # fmt: skip
    res.report = "\n".join(
        [
            f"DT coherence policies, {cfg.cluster.nodes} nodes, {cfg.workload.files} files in {cfg.workload.dirs} "
            f"directories, {cfg.workload.ops} SFS97 operations (locality {cfg.workload.locality:g}) per row",
            table(["migration", "policy", "msgs/op", "msgs/lookup", "lookup us", "DT hit", "stale DT", "stale retries",
                   "fetches", "recalls", "the dNFSp paper's claim (no numbers: not measured there)"], rows),
            "stale DT: DT entries used and found stale at the old home; stale retries adds open descriptors "
            "following a moved file (the same under every policy).  DT hit counts every table hit, an entry a "
            "dnfsp2 requester holds no token for included.",
        ]
    )
    return res


register_study("dt_coherence", Params, run)
