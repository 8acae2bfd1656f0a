"""Parameter sweeps: one YAML file, many runs of a study, on local cores or Dask.

A sweep file names a base config and what to vary::

    base: ../fedfs/fig5.yaml          # relative to the sweep file
    set: {workload.ops: 6000}         # fixed overrides of the base (optional)
    grid:                             # full cartesian product
      cluster.nodes: [1, 4]
      workload.rate: [500, 1000, 2000]
    zip:                              # lists advanced together (one axis; equal lengths)
      workload.files: [3000, 6000]
      workload.dirs: [100, 200]
    random:                           # seeded random samples (one axis of `samples` points)
      samples: 8
      seed: 1
      params:
        workload.locality: {uniform: [0.0, 0.9]}
        protocol.dt_entries: {integers: [16, 4096]}
        protocol.summary_bits: {log_uniform: [1024, 65536]}
        protocol.placement: {choice: [with_manager, round_robin]}
    seeds: 3                          # repetitions per point: 3 means seeds 1, 2, 3; or a list
    metrics: [latency_mean_us, "latency_mean_us.*"]   # rows to keep (fnmatch patterns; optional)

Points are grid x zip x random, each run once per seed.  Parameters are dotted
config keys, checked against the base config's schema (and the study's own
``params`` model) before anything runs, and every point's config is validated
up front too: a sweep never fails half-way on a typo.

Each point is one call of :func:`fedsim.studies.run_study`, the function ``fedsim
run`` uses, on the point's resolved config; a point is a pure function of that
config, so the executor and the worker count cannot change its rows.

The output directory holds:

- ``results.csv``: tidy rows ``point, <parameters...>, seed, case, metric, value``,
  appended as points finish and rewritten in point order when the sweep stops
  (a complete sweep gives byte-identical files whatever the executor);
- ``points.jsonl``: the ledger, one JSON line per finished point (id, parameters,
  seed, status ok/failed, error text, elapsed seconds, rows).  It is the truth:
  ``results.csv`` is rebuilt from it, so a crash between the two writes loses
  nothing and duplicates nothing;
- ``sweep.yaml`` (the sweep file as given), ``config.yaml`` (the resolved base
  config) and ``versions.json`` (Python and package versions, git commit).

Running the same sweep again skips the points already done (resume after a
crash or Ctrl-C) and retries the failed ones.  A point's id is a hash of its
parameter values and seed, so reordering or extending the grid keeps the
points already done.
"""

from __future__ import annotations

import contextlib
import csv
import fnmatch
import hashlib
import itertools
import json
import math
import os
import platform
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from pydantic import Field, PositiveInt, ValidationError, field_validator, model_validator

from fedsim.config import Config, apply_overrides, check_key, parse_set, validate
from fedsim.results import fmt
from fedsim.schema import ConfigError, Strict, read_yaml, word_errors
from fedsim.studies import UnknownStudyError, get_study, run_study

EXECUTORS = ("local", "dask")
LEDGER = "points.jsonl"
RESULTS = "results.csv"


# ---------------------------------------------------------------------------- the sweep file
class Dist(Strict):
    """One random parameter: exactly one of the four distributions."""

    uniform: tuple[float, float] | None = None
    log_uniform: tuple[float, float] | None = None
    integers: tuple[int, int] | None = None  # inclusive bounds
    choice: list[Any] | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _one(self) -> Dist:
        given = [k for k in ("uniform", "log_uniform", "integers", "choice") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of uniform: [lo, hi], log_uniform: [lo, hi], integers: [lo, hi], choice: [...]"
                + (f" (got {', '.join(given)})" if given else "")
            )
        for k in ("uniform", "log_uniform", "integers"):
            lo_hi = getattr(self, k)
            if lo_hi is not None and lo_hi[0] > lo_hi[1]:
                raise ValueError(f"{k}: the low bound {lo_hi[0]} is above the high bound {lo_hi[1]}")
        if self.log_uniform is not None and self.log_uniform[0] <= 0:
            raise ValueError("log_uniform: bounds must be positive")
        return self

    def draw(self, rng: np.random.Generator) -> Any:
        if self.uniform is not None:
            return float(rng.uniform(*self.uniform))
        if self.log_uniform is not None:
            lo, hi = self.log_uniform
            return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))
        if self.integers is not None:
            return int(rng.integers(self.integers[0], self.integers[1] + 1))
        assert self.choice is not None
        return self.choice[int(rng.integers(0, len(self.choice)))]


class RandomSpec(Strict):
    samples: PositiveInt
    seed: int = 0
    params: dict[str, Dist] = Field(min_length=1)


class SweepSpec(Strict):
    base: str
    set: dict[str, Any] = Field(default_factory=dict)
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    zip: dict[str, list[Any]] = Field(default_factory=dict)
    random: RandomSpec | None = None
    seeds: PositiveInt | list[int] | None = None
    metrics: list[str] | None = Field(default=None, min_length=1)

    @field_validator("grid", "zip")
    @classmethod
    def _non_empty(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for k, values in v.items():
            if not values:
                raise ValueError(f"{k}: needs at least one value")
        return v

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, v: int | list[int] | None) -> int | list[int] | None:
        if isinstance(v, list) and (not v or len(set(v)) != len(v)):
            raise ValueError(f"seeds must be distinct and not empty, got {v}")
        return v

    @model_validator(mode="after")
    def _zip_lengths(self) -> SweepSpec:
        lengths = {k: len(v) for k, v in self.zip.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(
                "zip: the lists must have the same length, got " + ", ".join(f"{k}: {n}" for k, n in lengths.items())
            )
        return self


# ---------------------------------------------------------------------------- points
@dataclass(frozen=True, slots=True)
class Point:
    """One run of the sweep: parameter values and a seed, resolved into a config."""

    index: int
    params: dict[str, Any]
    seed: int
    id: str
    config: dict[str, Any]  # the full resolved config (JSON-able), validated


@dataclass(frozen=True, slots=True)
class Sweep:
    source: str  # the sweep file, for messages
    text: str  # the sweep file as given (copied beside the results)
    spec: SweepSpec
    base: Config  # the base config after `set` and --set overrides
    keys: tuple[str, ...]  # varied parameters, in column order
    points: tuple[Point, ...]

    @property
    def name(self) -> str:
        return Path(self.source).stem


def point_id(params: dict[str, Any], seed: int) -> str:
    """Stable id of a point: its parameter values and seed, not its position."""
    blob = json.dumps({"params": params, "seed": seed}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha1(blob.encode()).hexdigest()[:12]


def _axes(spec: SweepSpec) -> list[list[dict[str, Any]]]:
    """The sweep's axes; each is a list of partial assignments.  Points are their product."""
    axes: list[list[dict[str, Any]]] = [[{k: v} for v in values] for k, values in spec.grid.items()]
    if spec.zip:
        keys = list(spec.zip)
        axes.append([dict(zip(keys, vals, strict=True)) for vals in zip(*spec.zip.values(), strict=True)])
    if spec.random is not None:
        rng = np.random.default_rng(spec.random.seed)
        axes.append([{k: d.draw(rng) for k, d in spec.random.params.items()} for _ in range(spec.random.samples)])
    return axes


def _seeds(spec: SweepSpec, base_seed: int) -> list[int]:
    if spec.seeds is None:
        return [base_seed]
    if isinstance(spec.seeds, int):
        return list(range(1, spec.seeds + 1))
    return list(spec.seeds)


def _study_params_model(study: str, source: str) -> Any:
    try:
        return get_study(study).Params
    except UnknownStudyError as exc:
        raise ConfigError(f"{source}: study: {exc}") from None


def parse_sweep(raw: dict[str, Any], source: str, root: Path, sets: Sequence[str] | None = None) -> Sweep:
    """Validate a sweep (the parsed YAML) and expand it into points.

    ``root`` is the directory ``base`` is relative to (the sweep file's);
    ``sets`` are ``--set key=value`` overrides of the base config, applied to
    every point.  Every parameter path and every point's config is checked
    here, before anything runs; errors are ConfigError naming ``source``."""
    try:
        spec = SweepSpec.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(word_errors(source, exc, SweepSpec)) from None
    base_path = Path(spec.base) if Path(spec.base).is_absolute() else root / spec.base
    try:
        base_raw = read_yaml(base_path)
    except ConfigError as exc:
        raise ConfigError(f"{source}: base: {exc}") from None
    study = base_raw.get("study")
    if not isinstance(study, str):
        raise ConfigError(f"{base_path}: study: the base config must name its study")
    params_model = _study_params_model(study, str(base_path))

    # where each key is given: one place only
    origin: dict[str, str] = {}
    blocks: list[tuple[str, Iterable[str]]] = [
        ("set", spec.set),
        ("grid", spec.grid),
        ("zip", spec.zip),
        ("random.params", spec.random.params if spec.random else ()),
    ]
    for block, keys in blocks:
        for key in keys:
            check_key(key, f"{source}: {block}", params_model)
            if key in origin:
                raise ConfigError(f"{source}: {block}: {key}: already given in {origin[key]}; give it in one place")
            origin[key] = block
    fixed = [(k.split("."), v) for k, v in spec.set.items()]
    for parts, _ in parse_set(list(sets or [])):
        check_key(".".join(parts), "--set", params_model)
    base_raw = apply_overrides(apply_overrides(base_raw, fixed), parse_set(list(sets or [])))
    base = validate(base_raw, str(base_path))
    base_raw = base.model_dump(mode="json")

    keys = tuple(k for k in origin if origin[k] != "set")
    seeds = _seeds(spec, base.seed)
    points: list[Point] = []
    seen: dict[str, int] = {}
    for combo in itertools.product(*_axes(spec)):
        values: dict[str, Any] = {}
        for part in combo:
            values.update(part)
        values = {k: values[k] for k in keys}
        for seed in seeds:
            pid = point_id(values, seed)
            where = f"{source}: point {len(points)} ({_describe(values, seed)})"
            if pid in seen:
                raise ConfigError(f"{where}: the same parameters and seed as point {seen[pid]}; drop the duplicate")
            seen[pid] = len(points)
            raw_pt = apply_overrides(json.loads(json.dumps(base_raw)), [(k.split("."), v) for k, v in values.items()])
            raw_pt["seed"] = seed
            cfg = validate(raw_pt, where)
            try:
                params_model.model_validate(cfg.params)
            except ValidationError as exc:
                raise ConfigError(word_errors(where, exc, params_model, prefix="params.")) from None
            points.append(Point(len(points), values, seed, pid, cfg.model_dump(mode="json")))
    text = yaml.safe_dump(raw, sort_keys=False)
    return Sweep(source, text, spec, base, keys, tuple(points))


def load_sweep(path: str | Path, sets: Sequence[str] | None = None) -> Sweep:
    """Read and expand a sweep file (see the module docstring)."""
    p = Path(path)
    sweep = parse_sweep(read_yaml(p), str(p), p.parent, sets)
    try:
        text = p.read_text()
    except OSError:  # pragma: no cover - read_yaml has read it a moment ago
        text = sweep.text
    return Sweep(sweep.source, text, sweep.spec, sweep.base, sweep.keys, sweep.points)


def _describe(values: dict[str, Any], seed: int) -> str:
    return " ".join([*(f"{k}={_cell(v)}" for k, v in values.items()), f"seed={seed}"])


def _cell(v: Any) -> str:
    """A parameter value as a CSV cell (numbers stay parseable)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return fmt(v)
    if isinstance(v, str):
        return v
    return json.dumps(v, sort_keys=True, separators=(",", ":"))


# ---------------------------------------------------------------------------- one point (in a worker)
@dataclass(frozen=True, slots=True)
class Task:
    """What a worker needs to run a point: picklable, self-contained (no files)."""

    id: str
    config: dict[str, Any]
    source: str
    metrics: tuple[str, ...] | None
    #: the module that registered the study: a fresh worker finds an installed study by
    #: its entry point, and imports this for one registered without (see get_study)
    study_module: str | None = None


def run_point(task: Task) -> dict[str, Any]:
    """Run one point; never raises (a failure is a result: status 'failed' and
    the error).  Top-level so process pools and Dask can ship it."""
    t0 = time.perf_counter()
    try:
        res = run_study(validate(task.config, task.source), task.source, task.study_module)
        rows = [
            [r.case, r.metric, r.value]
            for r in res.rows
            if task.metrics is None or any(fnmatch.fnmatchcase(r.metric, p) for p in task.metrics)
        ]
        out: dict[str, Any] = {"status": "ok", "rows": rows, "error": ""}
    except Exception as exc:  # a failed point is recorded, the sweep goes on
        last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
        at = f" (at {Path(last[0].filename).name}:{last[0].lineno})" if last else ""
        out = {"status": "failed", "rows": [], "error": f"{type(exc).__name__}: {exc}{at}"}
    out["id"] = task.id
    out["elapsed_s"] = round(time.perf_counter() - t0, 3)
    return out


def _ignore_sigint() -> None:
    """Pool workers leave Ctrl-C to the parent, which stops them all at once."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


# ---------------------------------------------------------------------------- executors
OnResult = Callable[[dict[str, Any]], None]


def _run_local(tasks: list[Task], workers: int, on_result: OnResult) -> None:
    """``workers`` == 1 runs in this process (the serial baseline); more use a
    process pool, fed one point at a time so a slow point does not hold others."""
    if workers == 1 or len(tasks) <= 1:
        for t in tasks:
            on_result(run_point(t))
        return
    import multiprocessing as mp

    with mp.get_context().Pool(min(workers, len(tasks)), initializer=_ignore_sigint) as pool:
        for result in pool.imap_unordered(run_point, tasks, chunksize=1):
            on_result(result)
    # leaving the `with` terminates the workers, also on KeyboardInterrupt


DASK_CONNECT_TIMEOUT = "10s"


@contextlib.contextmanager
def dask_client(workers: int, scheduler: str | None, processes: bool = True) -> Iterator[Any]:
    """A client of the scheduler at ``scheduler``, or of a LocalCluster of
    ``workers`` single-threaded workers (``processes=False``: threads, for tests)."""
    try:
        import logging

        from distributed import Client, LocalCluster
    except ImportError:
        raise ConfigError(
            "--executor dask needs dask.distributed; install it with: pip install 'fedfs[dask]'"
        ) from None
    if scheduler:
        try:
            client = Client(scheduler, timeout=DASK_CONNECT_TIMEOUT)
        except (OSError, TimeoutError, ValueError) as exc:
            raise ConfigError(
                f"--scheduler {scheduler}: cannot reach a Dask scheduler there ({type(exc).__name__}: {exc}); "
                "start one (`dask scheduler`, then `dask worker ADDRESS` on each machine) or leave out "
                "--scheduler for a LocalCluster on this machine"
            ) from None
        try:
            yield client
        finally:
            client.close()
        return
    with _workers_ignore_sigint():  # only while the worker processes start
        cluster = LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=processes,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )
    try:
        with Client(cluster) as client:
            yield client
    finally:
        cluster.close()


@contextlib.contextmanager
def _workers_ignore_sigint() -> Iterator[None]:
    """Start LocalCluster workers with Ctrl-C ignored (an ignored signal stays
    ignored in a child, and Python then installs no KeyboardInterrupt handler):
    a Ctrl-C reaches the whole process group, and only this process should act
    on it, closing the cluster, instead of every worker printing a traceback."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _run_dask(client: Any, tasks: list[Task], on_result: OnResult) -> None:
    """Submit every point; record each as it finishes (any order)."""
    from distributed import as_completed

    futures = [client.submit(run_point, t, pure=False) for t in tasks]
    try:
        for fut in as_completed(futures):
            on_result(fut.result())
    except BaseException:
        client.cancel(futures)
        raise


def check_executor(executor: str, scheduler: str | None, workers: int | None) -> None:
    """Reject a bad executor choice before anything starts."""
    if executor not in EXECUTORS:
        raise ConfigError(f"--executor {executor}: unknown executor; allowed: {', '.join(EXECUTORS)}")
    if scheduler and executor != "dask":
        raise ConfigError("--scheduler names a Dask scheduler: use it with --executor dask")
    if workers is not None and workers < 1:
        raise ConfigError(f"--workers {workers}: must be at least 1")


# ---------------------------------------------------------------------------- the output directory
def versions() -> dict[str, Any]:
    """What produced the results: Python, packages, platform, git commit."""
    out: dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform()}
    for pkg in ("fedfs", "simpy", "numpy", "pydantic", "mmh3", "msgpack", "dask", "distributed", "tqdm"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    repo = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        if head.returncode == 0:
            out["git_commit"] = head.stdout.strip()
            out["git_dirty"] = bool(dirty.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    return out


def read_ledger(out: Path) -> dict[str, dict[str, Any]]:
    """The latest record of each point in ``out/points.jsonl``.  A torn last
    line (a crash mid-write) is cut off so the next append starts clean."""
    path = out / LEDGER
    if not path.exists():
        return {}
    data = path.read_bytes()
    records: dict[str, dict[str, Any]] = {}
    good = 0
    pos = 0
    for line in data.splitlines(keepends=True):
        pos += len(line)
        if not line.endswith(b"\n"):
            break
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            break
        records[rec["id"]] = rec
        good = pos
    if good != len(data):
        with path.open("r+b") as f:
            f.truncate(good)
    return records


def _header(sweep: Sweep) -> list[str]:
    return ["point", *sweep.keys, "seed", "case", "metric", "value"]


def _csv_rows(sweep: Sweep, point: Point, rows: list[list[Any]]) -> list[list[str]]:
    lead = [point.id, *(_cell(point.params[k]) for k in sweep.keys), str(point.seed)]
    return [[*lead, case, metric, fmt(float(value))] for case, metric, value in rows]


def write_results(sweep: Sweep, out: Path, ledger: dict[str, dict[str, Any]]) -> int:
    """Rewrite ``results.csv`` from the ledger, in point order (atomically).
    Returns the number of rows."""
    tmp = out / (RESULTS + ".tmp")
    n = 0
    with tmp.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(_header(sweep))
        for p in sweep.points:
            rec = ledger.get(p.id)
            if rec is not None and rec["status"] == "ok":
                rows = _csv_rows(sweep, p, rec["rows"])
                w.writerows(rows)
                n += len(rows)
    os.replace(tmp, out / RESULTS)
    return n


def _prepare(sweep: Sweep, out: Path) -> None:
    """Create ``out`` or check that it holds this sweep's base config."""
    out.mkdir(parents=True, exist_ok=True)
    cfg_text = yaml.safe_dump(sweep.base.model_dump(mode="json"), sort_keys=True)
    cfg_path = out / "config.yaml"
    if cfg_path.exists() and (out / LEDGER).exists():
        old = cfg_path.read_text()
        if old != cfg_text:
            diff = _first_difference(yaml.safe_load(old) or {}, yaml.safe_load(cfg_text))
            raise ConfigError(
                f"{out}: holds a sweep over another base config ({diff}); give another --out, or delete "
                f"{out} to start over"
            )
    cfg_path.write_text(cfg_text)
    (out / "sweep.yaml").write_text(sweep.text)
    (out / "versions.json").write_text(json.dumps(versions(), indent=2, sort_keys=True) + "\n")


def _first_difference(a: Any, b: Any, path: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k):
                return _first_difference(a.get(k), b.get(k), f"{path}.{k}" if path else str(k))
    return f"{path or 'config'}: {a!r} there, {b!r} now"


# ---------------------------------------------------------------------------- running
@dataclass(slots=True)
class SweepOutcome:
    out: Path
    points: int
    ok: int = 0  # finished in this run
    failed: int = 0  # failed in this run
    skipped: int = 0  # already done before this run
    elapsed_s: float = 0.0
    errors: dict[str, str] = field(default_factory=dict)  # point id -> error
    interrupted: bool = False
    metrics_seen: set[str] = field(default_factory=set)  # metric names of the rows kept in this run

    @property
    def results(self) -> Path:
        return self.out / RESULTS


def run_sweep(
    sweep: Sweep,
    out: str | Path | None = None,
    *,
    executor: str = "local",
    workers: int | None = None,
    scheduler: str | None = None,
    progress: bool = True,
    processes: bool = True,
) -> SweepOutcome:
    """Run the points of ``sweep`` not yet done in ``out`` (default
    ``results/sweeps/<sweep name>``).  ``processes=False`` runs Dask's
    LocalCluster workers as threads (tests).  KeyboardInterrupt stops the
    sweep after recording what finished; it is re-raised."""
    check_executor(executor, scheduler, workers)
    n_workers = workers or os.cpu_count() or 1
    out_dir = Path(out) if out is not None else Path("results") / "sweeps" / sweep.name
    with contextlib.ExitStack() as stack:
        client = None
        if executor == "dask":  # connect first: an unreachable scheduler is an error before any file is touched
            client = stack.enter_context(dask_client(n_workers, scheduler, processes))
        return _run(sweep, out_dir, n_workers, client, progress)
    raise AssertionError("unreachable")  # pragma: no cover - the with block returns or raises


def _run(sweep: Sweep, out_dir: Path, workers: int, client: Any, progress: bool) -> SweepOutcome:
    _prepare(sweep, out_dir)
    ledger = read_ledger(out_dir)
    done = {p.id for p in sweep.points if ledger.get(p.id, {}).get("status") == "ok"}
    todo = [p for p in sweep.points if p.id not in done]
    outcome = SweepOutcome(out_dir, len(sweep.points), skipped=len(done))
    metrics = tuple(sweep.spec.metrics) if sweep.spec.metrics else None
    module = get_study(sweep.base.study).module
    tasks = [Task(p.id, p.config, f"{sweep.source}: point {p.index}", metrics, module) for p in todo]
    by_id = {p.id: p for p in sweep.points}
    write_results(sweep, out_dir, ledger)  # drop rows of points the ledger does not hold

    bar = None
    if progress and todo:
        from tqdm import tqdm

        bar = tqdm(
            total=len(todo),
            unit="pt",
            desc=f"sweep {sweep.name}",
            dynamic_ncols=True,
            file=sys.stderr,
            postfix={"failed": 0},
        )
    t0 = time.perf_counter()
    with (out_dir / LEDGER).open("a") as led, (out_dir / RESULTS).open("a", newline="") as res:
        writer = csv.writer(res, lineterminator="\n")

        def on_result(r: dict[str, Any]) -> None:
            p = by_id[r["id"]]
            rec = {"id": p.id, "index": p.index, "params": p.params, "seed": p.seed, **r}
            if r["status"] == "ok":
                writer.writerows(_csv_rows(sweep, p, r["rows"]))
                res.flush()
                outcome.ok += 1
                outcome.metrics_seen.update(row[1] for row in r["rows"])
            else:
                outcome.failed += 1
                outcome.errors[p.id] = r["error"]
            led.write(json.dumps(rec, separators=(",", ":")) + "\n")
            led.flush()
            ledger[p.id] = rec
            if bar is not None:
                bar.set_postfix(failed=outcome.failed, refresh=False)
                bar.update(1)

        try:
            if client is None:
                _run_local(tasks, workers, on_result)
            else:
                _run_dask(client, tasks, on_result)
        except KeyboardInterrupt:
            outcome.interrupted = True
            raise
        finally:
            if bar is not None:
                bar.close()
            outcome.elapsed_s = time.perf_counter() - t0
            led.flush()
            res.flush()
            write_results(sweep, out_dir, ledger)
    return outcome


def summary(sweep: Sweep, o: SweepOutcome) -> str:
    """What a person wants to read when a sweep stops."""
    lines = [
        f"{o.points} points: {o.ok} run ok, {o.failed} failed, {o.skipped} already done; {o.elapsed_s:.1f} s",
    ]
    for pid, err in list(o.errors.items())[:10]:
        p = next(p for p in sweep.points if p.id == pid)
        lines.append(f"  failed point {p.index} ({_describe(p.params, p.seed)}): {err}")
    if len(o.errors) > 10:
        lines.append(f"  ... and {len(o.errors) - 10} more failures (see {o.out / LEDGER})")
    if o.failed:
        lines.append("Failed points are retried when the same sweep is run again.")
    if o.ok and sweep.spec.metrics:
        unmatched = [m for m in sweep.spec.metrics if not fnmatch.filter(o.metrics_seen, m)]
        if unmatched:
            lines.append(
                f"warning: metrics: {', '.join(unmatched)} matched no row of study '{sweep.base.study}' "
                "(misspelt? `fedsim run` on the base config lists its metrics in results.csv)"
            )
    lines.append(f"results -> {o.results}")
    return "\n".join(lines)
