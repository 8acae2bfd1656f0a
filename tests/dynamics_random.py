"""Random (not derandomized) runs of issue 13's property, counting the failing
schedules: the CI runs a fixed set of examples (``tests/test_dynamics_properties.py``);
this explores new ones and prints each failure's schedule, to replay with
``tests.test_dynamics_properties._replay`` (``files=True``) or ``_replay_in_memory``.

    python -m tests.dynamics_random sim 300             # the simulator variant
    python -m tests.dynamics_random mem 300             # the in-memory variant
    python -m tests.dynamics_random sim 300 --shrink    # and shrink each failure
    python -m tests.dynamics_random shrink sim "(6, 'round_robin', 'mod_n', [...], 'redistribute')"

The shrinker is greedy: it drops a step, a batch of a step or an operation of
a batch, keeps the smaller schedule if it still fails the same way (the same
check, the same message up to its log), and starts over until nothing can be
dropped; then it prints the shrunk schedule and the line that replays it.
"""

from __future__ import annotations

import ast
import collections
import sys
import traceback
from collections.abc import Callable, Iterator
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings

import tests.test_dynamics_properties as T

Case = tuple[int, str, str, list[tuple[Any, ...]], str]  # (n, placement, hashing, schedule, rename method)


def replayer(which: str) -> Callable[..., Any]:
    """What plays a schedule, outside hypothesis (the properties' bodies call ``event``)."""
    if which == "sim":
        return lambda n, placement, hashing, schedule, rename: T._replay(
            n, placement, hashing, schedule, files=True, rename=rename
        )
    return lambda n, placement, hashing, schedule, rename: T._replay_in_memory(
        n, placement, hashing, schedule, rename=rename
    )


def signature(exc: BaseException) -> str:
    """How a schedule fails: the exception's type, the line of the test module
    that raised it (which check) and its message up to the log."""
    line = next((f.lineno for f in reversed(traceback.extract_tb(exc.__traceback__))
                 if f.filename.endswith("test_dynamics_properties.py")), 0)  # fmt: skip
    text = str(exc).split("log [")[0].split("; log")[0].strip()
    return f"{type(exc).__name__}@{line}: {text[:80]}"


def failure(which: str, case: Case) -> str | None:
    """``case``'s signature, or None if it passes."""
    try:
        replayer(which)(*case)
    except Exception as exc:  # any failure, the protocol's exceptions included
        return signature(exc)
    return None


def smaller(case: Case) -> Iterator[Case]:
    """``case`` less one step, one batch of a step or one operation of a batch,
    the biggest cuts first."""
    n, placement, hashing, schedule, rename = case
    for i in range(len(schedule)):
        yield n, placement, hashing, schedule[:i] + schedule[i + 1 :], rename
    for i, step in enumerate(schedule):
        if step[0] == "ops":
            batches, rebuild = [step[1]], (lambda b: ("ops", b[0]))
        else:
            batches, rebuild = list(step[-1]), (lambda b, step=step: (*step[:-1], b))
        for j, batch in enumerate(batches):
            if step[0] != "ops":
                fewer = batches[:j] + batches[j + 1 :]
                yield n, placement, hashing, [*schedule[:i], rebuild(fewer), *schedule[i + 1 :]], rename
            for k in range(len(batch)):
                if step[0] == "ops" and len(batch) == 1:
                    continue  # (an ops step has one batch, of at least one operation)
                cut = list(batches)
                cut[j] = batch[:k] + batch[k + 1 :]
                yield n, placement, hashing, [*schedule[:i], rebuild(cut), *schedule[i + 1 :]], rename


def shrink(which: str, case: Case, target: str | None = None, out: Any = sys.stdout) -> Case:
    """Drop what can be dropped from a failing ``case`` while it fails with
    the same signature (``target``; by default its own); print the result
    and how to replay it."""
    target = target or failure(which, case)
    assert target, f"{case!r} does not fail"
    print("  shrinking:", target, flush=True, file=out)
    tried = 0
    progress = True
    while progress:
        progress = False
        for candidate in smaller(case):
            tried += 1
            if failure(which, candidate) == target:
                case, progress = candidate, True
                break
    n, placement, hashing, schedule, rename = case
    call = "_replay" if which == "sim" else "_replay_in_memory"
    extra = (", files=True" if which == "sim" else "") + f", rename={rename!r}"
    print(f"  shrunk ({tried} replays):", repr(case), file=out)
    print(f"  replay (python): import tests.test_dynamics_properties as T; "
          f"T.{call}({n}, {placement!r}, {hashing!r}, {schedule!r}{extra})", flush=True, file=out)  # fmt: skip
    return case


def main(which: str, n: int, shrinking: bool = False) -> int:
    variants = {
        "sim": T.test_simulated_schedules_of_operations_and_faults_lose_no_acknowledged_file,
        "mem": T.test_in_memory_schedules_of_operations_and_faults_lose_no_acknowledged_file,
    }
    inner = variants[which].hypothesis.inner_test
    stats: collections.Counter[str] = collections.Counter()
    kinds: collections.Counter[str] = collections.Counter()
    failed: list[tuple[Case, str]] = []

    @settings(max_examples=n, deadline=None, derandomize=False, phases=[Phase.generate], database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(*T.CLUSTER, T.schedule_st)
    def run(nn: int, placement: str, hashing: str, rename: str, schedule: list) -> None:
        stats["runs"] += 1
        stats[rename] += 1
        try:
            inner(nn, placement, hashing, rename, schedule)
        except Exception as exc:  # counted and printed: the point is to see them all
            stats["fail"] += 1
            stats[f"fail {rename}"] += 1
            kinds[str(exc).split(";")[0][:90]] += 1
            failed.append(((nn, placement, hashing, schedule, rename), signature(exc)))
            print("FAIL", nn, placement, hashing, repr(schedule), rename, "\n   ", str(exc)[:300], flush=True)

    run()
    print(which, dict(stats), flush=True)
    for k, v in kinds.most_common():
        print(v, k)
    if shrinking:
        for case, _ in failed:
            print("FAIL", repr(case), flush=True)
            if failure(which, case) is None:  # (a run's outcome depends on nothing but the schedule, but say so)
                print("  passes when replayed: not shrunk", flush=True)
                continue
            shrink(which, case)
    return 1 if stats["fail"] else 0


if __name__ == "__main__":
    if sys.argv[1] == "shrink":
        shrink(sys.argv[2], ast.literal_eval(sys.argv[3]))
        sys.exit(0)
    sys.exit(main(sys.argv[1], int(sys.argv[2]), "--shrink" in sys.argv[3:]))
