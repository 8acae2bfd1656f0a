"""Random (not derandomized) runs of issue 13's property, counting the failing
schedules: the CI runs a fixed set of examples (``tests/test_dynamics_properties.py``);
this explores new ones and prints each failure's schedule, to replay with
``tests.test_dynamics_properties._replay``.

    python -m tests.dynamics_random sim 300     # the simulator variant
    python -m tests.dynamics_random mem 300     # the in-memory variant
"""

from __future__ import annotations

import collections
import sys

from hypothesis import HealthCheck, Phase, given, settings

import tests.test_dynamics_properties as T


def main(which: str, n: int) -> int:
    variants = {
        "sim": T.test_simulated_schedules_of_operations_and_faults_lose_no_acknowledged_file,
        "mem": T.test_in_memory_schedules_of_operations_and_faults_lose_no_acknowledged_file,
    }
    inner = variants[which].hypothesis.inner_test
    stats: collections.Counter[str] = collections.Counter()
    kinds: collections.Counter[str] = collections.Counter()

    @settings(max_examples=n, deadline=None, derandomize=False, phases=[Phase.generate], database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(*T.CLUSTER, T.schedule_st)
    def run(nn: int, placement: str, hashing: str, schedule: list) -> None:
        stats["runs"] += 1
        try:
            inner(nn, placement, hashing, schedule)
        except Exception as exc:  # counted and printed: the point is to see them all
            stats["fail"] += 1
            kinds[str(exc).split(";")[0][:90]] += 1
            print("FAIL", nn, placement, hashing, repr(schedule), "\n   ", str(exc)[:300], flush=True)

    run()
    print(which, dict(stats), flush=True)
    for k, v in kinds.most_common():
        print(v, k)
    return 1 if stats["fail"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2])))
