"""Random (not derandomized) histories of issue 24's rename property, counted:
the CI plays a fixed set (``tests/test_rename_histories.py``); this explores new
ones, each method as often, and prints every failing one with the call that
replays it (``sim_history``; ``check`` names each violation's kind).

    python -m tests.rename_histories_random 300          # 300 histories of each method
"""

from __future__ import annotations

import collections
import sys
import time

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import tests.test_rename_histories as T


def main(n: int) -> int:
    stats: collections.Counter[str] = collections.Counter()
    kinds: collections.Counter[str] = collections.Counter()
    for method in T.METHODS:

        @settings(max_examples=n, deadline=None, derandomize=False, phases=[Phase.generate], database=None,
                  suppress_health_check=list(HealthCheck))  # fmt: skip
        @given(*T.CLUSTER[:3], st.just(method), *T.HISTORY[4:])
        def run(nn, placement, hashing, method, exists, creates, fault, seed) -> None:
            args = (nn, placement, hashing, method, exists, creates, fault, seed)
            stats[f"runs {method}"] += 1
            stats[f"{method} {fault[0]}"] += 1
            try:
                v = T.assert_linearizable(T.sim_history(*args))
                stats[f"overlapping {method}"] += v.overlapping
            except Exception as exc:  # counted and printed: the point is to see them all
                stats[f"fail {method}"] += 1
                stats[f"fail {method} {fault[0]} {fault[1] if fault[0] == 'crash' else ''}".rstrip()] += 1
                kinds[f"{type(exc).__name__}: {str(exc).split(':')[0][:60]} {str(exc).split('first: [')[-1][:40]}"] += 1
                print("FAIL", f"T.sim_history{args!r}", "\n   ", str(exc)[:600], flush=True)

        t0 = time.monotonic()
        run()
        print(method, f"{time.monotonic() - t0:.0f} s", {k: v for k, v in stats.items() if method in k}, flush=True)
    for k, v in kinds.most_common():
        print(v, k)
    return 1 if any(k.startswith("fail") for k in stats) else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
