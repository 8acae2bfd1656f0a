"""The designs study (issue 25, first slice) on a tiny config: a row per
design and cluster size, no errors, and the difference it exists to show."""

from __future__ import annotations

from pathlib import Path

import experiments.designs_postmark as study
from fedsim.config import load, validate_params

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "fedfs" / "designs_postmark.yaml"
TINY = ["workload.postmark.number=20", "workload.postmark.transactions=40", "params.servers=[1,4]",
        "params.clients_per_server=2"]  # fmt: skip


def test_the_designs_study_prints_its_table_and_fedfs_scales_where_nfs_does_not():
    cfg = load(CONFIG, TINY)
    res = study.run(cfg, validate_params(cfg, study.Params, str(CONFIG)))
    rows = {(r.case, r.metric): r.value for r in res.rows}
    for d in ("fedfs", "nfs", "nfsp"):
        for n in (1, 4):
            assert rows[(f"design={d} servers={n}", "errors")] == 0
    tps = {d: [rows[(f"design={d} servers={n}", "tps")] for n in (1, 4)] for d in ("fedfs", "nfs", "nfsp")}
    speedup = {d: t[1] / t[0] for d, t in tps.items()}
    assert speedup["fedfs"] > 1.2  # FedFS spreads the files over the servers
    assert speedup["nfs"] < 1.0 < speedup["fedfs"]  # one server serves every operation however many nodes
    assert tps["nfsp"][1] < tps["nfs"][1]  # PostMark's small files: the second hop to a daemon costs
    assert "PostMark transactions/s by design and servers" in res.report and "nfsp" in res.report
