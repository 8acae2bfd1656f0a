"""Every design on one workload, first slice (issue 25): PostMark
throughput of FedFS, NFS and NFSp as the cluster grows, in the simulator,
each design the protocol code the agents run (``fedsim.protocol.fedfs``,
``.nfs``, ``.nfsp``) under the same network, CPU and disk models.

Each point runs ``clients_per_server`` PostMark clients per server (so the
load grows with the cluster, as in Federated DAFS Fig. 6's scaling run).
Clients reach the cluster as each design's clients would: FedFS's by the
federation's hash (``route: hash``, Federated DAFS VI-B: every request at
the manager of its path), NFS's and NFSp's at a fixed entry node each
(``route: fixed``: client i at node i mod n), which forwards to the server
or the meta-server; the route is a config key per design (``routes``).

What the table shows is measured here, in simulated time; no paper has
these three on one workload, so there is no paper column.  Expected shape:
NFS and NFSp flat (one server, one meta-server: every operation passes it),
NFSp below NFS on PostMark's small files (each data operation is a second
hop to an I/O daemon), FedFS growing with the servers.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, PositiveInt

from experiments.common import run_postmark
from experiments.dafs import variant
from fedsim.config import Config
from fedsim.results import StudyResult
from fedsim.schema import table
from fedsim.studies import register_study


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")

    designs: list[str] = Field(default_factory=lambda: ["fedfs", "nfs", "nfsp"])
    servers: list[PositiveInt] = Field(default_factory=lambda: [1, 2, 4, 8])
    clients_per_server: PositiveInt = 4
    routes: dict[str, str] = Field(default_factory=lambda: {"fedfs": "hash", "nfs": "fixed", "nfsp": "fixed"})


def run(cfg: Config, params: Params) -> StudyResult:
    res = StudyResult()
    tps: dict[tuple[str, int], float] = {}
    msgs: dict[tuple[str, int], float] = {}
    for design in params.designs:
        for n in params.servers:
            v = variant(
                cfg,
                cluster__nodes=n,
                workload__clients=params.clients_per_server * n,
                protocol__architecture=design,
                workload__postmark__route=params.routes.get(design, cfg.workload.postmark.route),
            )
            m = run_postmark(v).metrics
            tps[(design, n)] = m["postmark_tps"]
            msgs[(design, n)] = m["messages_per_op"]
            res.extend(
                f"design={design} servers={n}",
                {"tps": m["postmark_tps"], "messages_per_op": m["messages_per_op"], "errors": m["errors"]},
            )
    pm = cfg.workload.postmark
    base, top = min(params.servers), max(params.servers)
    res.report = "\n".join(
        [
            f"PostMark transactions/s by design and servers ({params.clients_per_server} clients per server, "
            f"{pm.number} files and {pm.transactions} transactions per client, {pm.size_low}-{pm.size_high} B, "
            f"{cfg.network.preset} network; simulated, measured here: no paper reports these three side by side)",
            table(
                ["design", "route", *(f"{n} srv tx/s" for n in params.servers), f"speedup {top}/{base}"],
                [
                    [
                        d,
                        params.routes.get(d, pm.route),
                        *(f"{tps[(d, n)]:.0f}" for n in params.servers),
                        f"{tps[(d, top)] / tps[(d, base)]:.2f}",
                    ]
                    for d in params.designs
                ],
            ),
            "",
            "Messages between nodes per PostMark operation (requests and replies; one operation is several calls)",
            table(
                ["design", *(f"{n} srv" for n in params.servers)],
                [[d, *(f"{msgs[(d, n)]:.2f}" for n in params.servers)] for d in params.designs],
            ),
        ]
    )
    return res


register_study("designs_postmark", Params, run)
