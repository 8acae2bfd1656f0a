"""Fixtures shared by the test modules."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def calibrated_profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``fednode calibrate`` profile of this machine, measured once per test
    worker (the mount too where FUSE works): what the predictions beside real
    measurements are made from."""
    from experiments.postmark_agents import mount_missing
    from experiments.validation import Params, profile_for

    cache = tmp_path_factory.mktemp("calibration")
    return profile_for(Params(cache=str(cache), calibrate_repeat=30, mount=not mount_missing()), lambda s: None)


#: the tests that boot the Soft-RoCE guest in ``./dev.sh test``'s parallel phase (``tests/test_testbed.py``;
#: the first builds the guest's image), in the order they run
GUEST_TESTS = (
    "test_guest_has_active_rxe_devices_runs_the_project_and_reports_its_exit_status",
    "test_the_rdma_suite_passes_in_the_guest",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The guest's tests first.  ``./dev.sh test`` distributes by work stealing, so they run one
    after the other at the head of one worker's share while the other worker takes the rest and
    then the tail of theirs.  Why: under QEMU's TCG they take about half an hour, longer than every
    other test of the phase together on the other worker; where they were collected they started
    17 minutes in and were the phase's tail (47 of its minutes on this VM, 2026-12-02).  (The
    module's ``xdist_group`` cannot hold them together: pytest 9 ignores the node id suffix
    ``--dist loadgroup`` groups by.)"""
    order = {name: i for i, name in enumerate(GUEST_TESTS)}
    guest = sorted((it for it in items if getattr(it, "originalname", "") in order),
                   key=lambda it: order[getattr(it, "originalname", "")])  # fmt: skip
    if guest:
        first = set(map(id, guest))
        items[:] = guest + [it for it in items if id(it) not in first]
