"""The SFS97 driver (``fedsim.workloads.sfs97``) does not race itself: a remove
never takes a file another client's operation is using, so an error it counts
is the design's, not the benchmark's (CI once counted a write whose file another
client had just removed as an NFS failure)."""

from __future__ import annotations

import numpy as np
import pytest

from fedsim.network import preset
from fedsim.runtime import SimCluster
from fedsim.workloads.sfs97 import Sfs97, make_fileset, place

#: removes as often as reads and writes, on few files: without the guard, clashes are certain
MIX = {"lookup": 0.3, "read": 0.2, "write": 0.2, "remove": 0.3}


def _run(guard: bool) -> Sfs97:
    rng = np.random.default_rng(3)
    c = SimCluster(3, network=preset("via_clan"), keep_data=False, seed=3)
    fs = make_fileset(60, 4, rng)
    place(c, fs, "with_manager", rng)
    d = Sfs97(c, fs, mix=MIX, rng=rng)
    if not guard:
        d._removable = lambda i: i  # type: ignore[method-assign]  # the driver before the guard
    c.env.process(d.closed_loop(12, 300, 0.0))
    c.env.run()
    return d


@pytest.mark.parametrize("guard", [True, False])
def test_a_remove_never_takes_a_file_an_operation_in_flight_uses(guard):
    d = _run(guard)
    errors = sum(d.rec.errors.values())
    assert d.rec.errors["remove"] == 0  # every remove names a file no one removed before
    if guard:
        assert errors == 0, dict(d.rec.errors)
        assert not d.busy  # every pick released when its operation ended
    else:
        assert errors > 0  # the check can fail: the same run without the guard races itself
