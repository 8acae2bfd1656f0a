"""The table1 study (Federated DAFS Table I): PostMark's files per server by
the protocol's hashing and placement, beside the paper's numbers."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from experiments.table1 import PAPER, balance
from fedsim.config import ConfigError, load, validate
from fedsim.protocol.hashing import make_hashing
from fedsim.studies import run_study
from fedsim.workloads.postmark import Clients, PostMarkParams

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "fedfs" / "dafs_table1.yaml"
SMALL = ["workload.postmark.transactions=300", "params.trials=100"]


def _rows(sets: list[str]) -> dict[tuple[str, str], float]:
    cfg = load(CONFIG, SMALL + sets)
    return {(r.case, r.metric): r.value for r in run_study(cfg, str(CONFIG)).rows}


def test_pool_counts_are_the_protocols_hash_of_postmarks_names() -> None:
    """Files per server are what the protocol's hashing gives PostMark's pool
    names (placement at the manager), summing to 150 per client; the report
    prints the paper's Table I beside them."""
    cfg = load(CONFIG, SMALL)
    result = run_study(cfg, str(CONFIG))
    val = {(r.case, r.metric): r.value for r in result.rows}
    clients = Clients(PostMarkParams(number=150, transactions=300), clients=16)
    for n, k in ((2, 6), (4, 10), (8, 16)):
        names = [op.path for i in range(k) for op in clients.client(i).ops() if op.phase == "pool"]
        for h in ("mod_n", "ring"):
            scheme = make_hashing(h, list(range(n)), 64)
            want = [sum(scheme.manager_of(p) == s for p in names) for s in range(n)]
            got = [int(val[(f"servers={n} files=pool hashing={h}", f"server_{s + 1}")]) for s in range(n)]
            assert got == want and sum(got) == 150 * k
        assert val[(f"servers={n} paper", "max_over_mean")] == pytest.approx(balance(PAPER[n][1]))
    assert "452" in result.report and "1.004" in result.report  # the paper's 2-server column


def test_placement_is_the_configured_policy() -> None:
    """With placement at the requester, a file lives on its client's server
    (client i -> server i mod N): 6 clients on 2 servers give 450 each."""
    val = _rows(["protocol.placement=with_requester", "params.servers=[2]", "params.clients=[6]"])
    assert [val[("servers=2 files=pool hashing=mod_n", f"server_{s}")] for s in (1, 2)] == [450, 450]


def test_deterministic_and_the_pool_does_not_depend_on_the_transactions() -> None:
    a = _rows([])
    assert a == _rows([])
    b = _rows(["workload.postmark.transactions=900"])
    pool = {k: v for k, v in a.items() if "files=pool" in k[0] and not k[1].startswith("random")}
    assert pool == {k: v for k, v in b.items() if k in pool}
    assert a[("servers=8 files=created hashing=mod_n", "files")] < b[("servers=8 files=created hashing=mod_n", "files")]


@pytest.mark.parametrize(
    ("sets", "words"),
    [(["params.servers=[2,4]"], "must pair up"), (["params.hashings=[md5]"], "md5")],
)
def test_bad_params_are_refused(sets: list[str], words: str) -> None:
    cfg = load(CONFIG, SMALL + sets)
    with pytest.raises(ConfigError, match=words):
        run_study(cfg, str(CONFIG))


def test_the_config_is_the_papers() -> None:
    cfg = validate(yaml.safe_load(CONFIG.read_text()))
    assert (cfg.workload.postmark.number, cfg.workload.postmark.transactions) == (150, 30000)
    assert cfg.params["servers"] == [2, 4, 8] and cfg.params["clients"] == [6, 10, 16]
    assert cfg.protocol.placement == "with_manager"
