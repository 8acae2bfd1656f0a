"""``python -m experiments.postmark_agents --quick``: the same PostMark
clients through the client API of real agents, as the real binary on FUSE
mounts of them, and simulated; PostMark's counts must agree in all three
(rates are printed by the tool, never asserted)."""

from __future__ import annotations

import pytest

from experiments import postmark_agents as pa
from fedsim.workloads.postmark import Clients


@pytest.mark.parametrize("agents", [1, 2])
def test_the_three_columns_count_the_same_postmark(agents: int, capsys: pytest.CaptureFixture[str]) -> None:
    params = pa.params_for(quick=True)
    cols = pa.compare(agents, params)
    api, mnt, sim = cols["client API"], cols["mount"], cols["simulated"]
    expected = Clients(params, clients=agents)
    want = {k: 0 for k in pa.COUNTS}
    for i in range(agents):
        pm = expected.client(i)
        for _ in pm.ops():
            pass
        for k in pa.COUNTS:
            want[k] += pm.counts.as_dict()[k]
    assert want["created"] > 0 and want["read"] > 0 and want["appended"] > 0
    assert api.counts == sim.counts == want
    assert api.tps > 0 and sim.tps > 0
    print(pa.report({agents: cols}, params))
    if mnt.skipped:
        pytest.skip(f"mount column: {mnt.skipped}")
    assert mnt.counts == want  # the real binary did what the generator says it does


def test_main_prints_the_table_and_says_why_a_column_is_missing(capsys: pytest.CaptureFixture[str]) -> None:
    assert pa.main(["--quick", "--agents", "1", "--no-mount"]) == 0
    out = capsys.readouterr().out
    assert "measured (client API)" in out and "transactions/s" in out
    assert "mount column skipped: not asked (--no-mount)" in out
