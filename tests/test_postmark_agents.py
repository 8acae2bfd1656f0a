"""``python -m experiments.postmark_agents --quick``: the same PostMark
clients through the client API of real agents, as the real binary on FUSE
mounts of them, and each predicted by the simulator (calibrated machine
model, FUSE model); PostMark's counts must agree in every column (rates are
printed by the tool, never asserted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments import postmark_agents as pa
from fedsim.workloads.postmark import Clients


@pytest.mark.parametrize("agents", [1, 2])
def test_every_column_counts_the_same_postmark(
    agents: int, calibrated_profile: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    params = pa.params_for(quick=True)
    cols = pa.compare(agents, params, calibrated_profile)
    api, mnt, sim, sim_mnt = cols["client API"], cols["mount"], cols["predicted API"], cols["predicted mount"]
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
    print(pa.report({agents: cols}, params, calibrated_profile))
    if mnt.skipped:
        pytest.skip(f"mount column: {mnt.skipped}")
    assert mnt.counts == want  # the real binary did what the generator says it does
    assert sim_mnt.counts == want and sim_mnt.tps > 0  # and the FUSE model ran the same operations


def test_main_prints_the_table_and_says_why_a_column_is_missing(
    calibrated_profile: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("experiments.validation.profile_for", lambda params, say: calibrated_profile)
    assert pa.main(["--quick", "--agents", "1", "--no-mount"]) == 0
    out = capsys.readouterr().out
    assert "measured API" in out and "predicted API" in out and "transactions/s" in out
    assert "mount columns skipped: not asked (--no-mount)" in out
