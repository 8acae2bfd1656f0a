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
