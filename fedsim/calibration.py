"""Calibration profiles: costs measured on real agents, loaded by simulator configs.

``fednode bench`` writes a profile (YAML) with a ``network`` section (the
measured round trip as LogGP overrides: ``L_us``, ``o_us``, ``g_us``,
``G_us_per_byte``) and a ``storage.costs_us`` section (the local file
system's per-operation costs).  A config names it::

    calibration: results/fednode_bench/profile.yaml   # relative to the config file
    network: {preset: tcp_loopback}                    # the preset the profile refines

and the profile's values fill in every network and storage key the config
does not set itself (the config's own keys win), so a study then predicts the
machine the profile was measured on.

A profile of ``fednode calibrate`` also has a ``machine`` section: the CPU
each message, request, local operation and client call costs, and the host
it was measured on (``fedsim.machine``).  It fills ``machine:`` the same way
and turns the model on (``model: calibrated``) unless the config says
``model: none``.  A profile taken on another host, or on one with another
number of cores, is used with a warning naming both: its costs describe
that machine, not this one.
"""

from __future__ import annotations

import os
import platform
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

NETWORK_KEYS = ("L_us", "o_us", "g_us", "G_us_per_byte")


class CalibrationError(ValueError):
    """A profile that cannot be used, worded for the user."""


def apply_calibration(raw: dict[str, Any], source: str | Path) -> dict[str, Any]:
    """Merge the profile ``raw["calibration"]`` names into ``raw`` (in place) and drop the key."""
    ref = raw.pop("calibration", None)
    if ref is None:
        return raw
    if not isinstance(ref, str):
        raise CalibrationError(f"{source}: calibration: expected the path of a profile, got {ref!r}")
    path = Path(ref)
    if not path.is_absolute():
        path = Path(source).parent / path
    try:
        profile = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise CalibrationError(
            f"{source}: calibration: cannot read {path}: {exc.strerror} (write one with `fednode bench --out DIR`)"
        ) from None
    except yaml.YAMLError as exc:
        raise CalibrationError(f"{source}: calibration: {path} is not valid YAML: {exc}") from None
    if not isinstance(profile, dict):
        raise CalibrationError(f"{source}: calibration: {path} must be a mapping with network/storage sections")
    net = profile.get("network") or {}
    unknown = set(net) - set(NETWORK_KEYS)
    if unknown:
        raise CalibrationError(f"{source}: calibration: {path}: unknown network keys {sorted(unknown)}")
    network = raw.setdefault("network", {})
    for k, v in net.items():
        network.setdefault(k, v)
    mach = profile.get("machine")
    if mach is not None:
        if not isinstance(mach, dict):
            raise CalibrationError(f"{source}: calibration: {path}: machine: expected a mapping")
        own_m = raw.setdefault("machine", {})
        own_m.setdefault("model", "calibrated")
        own_keys = set(own_m)
        for k, v in mach.items():
            own_m.setdefault(k, v)
        if {"contention", "chain", "fan_in"} & set(mach):  # their fits, unless the profile or the config holds them
            for k, v in fitted_contention(path, mach).items():
                if k not in own_keys and k not in mach:
                    own_m[k] = v
        other = foreign(mach.get("measured_on") or {})
        if other:
            warnings.warn(f"{source}: calibration: {path} {other}", ProfileElsewhere, stacklevel=2)
    costs = ((profile.get("storage") or {}).get("costs_us")) or {}
    if costs:
        storage = raw.setdefault("storage", {})
        own = storage.setdefault("costs_us", {})
        for k, v in costs.items():
            own.setdefault(k, v)
    return raw


class ProfileElsewhere(UserWarning):
    """A profile measured on another machine than the one reading it."""


def this_machine() -> dict[str, Any]:
    """What a profile records of the machine it was taken on (and a reader compares)."""
    return {"host": platform.node(), "cores": os.cpu_count() or 1}


def foreign(measured_on: dict[str, Any]) -> str:
    """'' when ``measured_on`` describes this machine, else a sentence naming both."""
    here = this_machine()
    diff = [k for k in ("host", "cores") if k in measured_on and measured_on[k] != here[k]]
    if not diff:
        return ""
    theirs = ", ".join(f"{k} {measured_on[k]}" for k in ("host", "cores") if k in measured_on)
    ours = ", ".join(f"{k} {here[k]}" for k in ("host", "cores"))
    return (
        f"was measured on another machine ({theirs}) than this one ({ours}): its predictions describe that machine; "
        "run `fednode calibrate` here for this one's"
    )


_FITTED: dict[tuple[str, int], dict[str, float]] = {}


def fitted_contention(path: Path, mach: dict[str, Any]) -> dict[str, float]:
    """The profile's ``cold_us`` and ``cold_cap_us`` fitted by simulating its chain microbenchmark
    (``fedsim.machine.fit_cold``), ``poll_us`` and ``wake_us`` by its fan-in one (``fit_poll``),
    ``gil_us`` by the client program's CPU in both (``fit_gil``), then ``oversub_share`` and
    ``capacity`` by simulating its contention microbenchmark with those priced (``fit_contention``: threads calling
    agents at once also take turns), once per profile file.  A profile without a microbenchmark
    gets nothing for it (the machine's defaults: none)."""
    key = (str(path.resolve()), path.stat().st_mtime_ns)
    if key not in _FITTED:
        from fedsim.machine import MachineParams, fit_cold, fit_contention, fit_gil, fit_poll

        fitted = ("oversub_share", "capacity", "cold_us", "cold_cap_us", "wake_us", "poll_us", "gil_us")
        params = MachineParams.of({k: v for k, v in mach.items() if k not in fitted})
        out: dict[str, float] = {}
        chain = mach.get("chain") or {}
        if chain:
            cold = fit_cold(params, {int(k): float(v["cpu_per_call_us"]) for k, v in chain.items()})
            out["cold_us"], out["cold_cap_us"] = cold
            params = replace(params, cold_us=cold[0], cold_cap_us=cold[1])
        fan_in = mach.get("fan_in") or {}
        if fan_in:
            out["poll_us"], out["wake_us"] = fit_poll(
                params,
                {int(k): float(v["cpu_per_call_us"]) for k, v in fan_in.items()},
                {int(k): float(v["calls_per_s"]) for k, v in fan_in.items() if "calls_per_s" in v},
            )
            params = replace(params, poll_us=out["poll_us"], wake_us=out["wake_us"])
        contention = mach.get("contention") or {}
        program = _client_column(contention)  # the client program's own CPU per call
        if program:
            out["gil_us"] = fit_gil(params, program, _client_column(fan_in))
            params = replace(params, gil_us=out["gil_us"])
        if contention:
            measured = {int(k): float(v["cpu_per_call_us"]) for k, v in contention.items()}
            rates = {int(k): float(v["calls_per_s"]) for k, v in contention.items() if "calls_per_s" in v}
            fan_rates = {int(k): float(v["calls_per_s"]) for k, v in fan_in.items() if "calls_per_s" in v}
            out["oversub_share"], out["capacity"] = fit_contention(params, measured, rates, fan_rates)
        _FITTED[key] = out
    return _FITTED[key]


def _client_column(rows: dict[Any, dict[str, float]]) -> dict[int, float]:
    """A microbenchmark's client program's CPU per call by count (where it was recorded)."""
    return {int(k): float(v["client_cpu_per_call_us"]) for k, v in rows.items() if "client_cpu_per_call_us" in v}


#: the microbenchmarks a profile's contention models are fitted on: the profile's key, what it varies,
#: and the simulated bench (``fedsim.machine``; each returns CPU per call over all processes and calls/s)
MICROBENCHES = (("contention", "threads"), ("fan_in", "threads"), ("chain", "agents"))


def microbench_check(mach: dict[str, Any]) -> list[tuple[str, int, float, float, float, float, float, float]]:
    """Each microbenchmark of a profile's ``machine`` section beside the model the profile gives
    (its fitted ``cold_us``, ``wake_us``, ``oversub_share`` and ``capacity`` included) simulating
    it: ``(bench, count, measured CPU per call, model's, measured calls/s, model's, measured client
    program's CPU per call, model's)`` (the client's 0 where the profile did not record it apart).  Why: the fits
    are relative to one thread's level and each weighs several counts, so a rule that cannot follow
    its benchmark (a jump the model does not make, a level it misses) shows here, on the benchmark
    it was fitted to, before it shows as a validation miss."""
    from fedsim.machine import MachineParams, chain_run, contention_bench, fan_in_bench

    benches = {"contention": contention_bench, "fan_in": fan_in_bench, "chain": chain_run}
    params = MachineParams.of(mach)
    rows = []
    for key, _count in MICROBENCHES:
        for k, v in sorted(((int(k), v) for k, v in (mach.get(key) or {}).items())):
            run = benches[key](params, k)
            rows.append((key, k, float(v["cpu_per_call_us"]), run.cpu, float(v.get("calls_per_s", 0.0)), run.rate,
                         float(v.get("client_cpu_per_call_us", 0.0)), run.client))  # fmt: skip
    return rows
