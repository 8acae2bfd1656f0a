"""``fednode.tools.census``: where a real run's CPU went, by kind of process."""

from __future__ import annotations

import threading
import time

from fednode.tools.census import Census


def _burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_the_census_counts_this_programs_cpu_even_of_threads_that_ended_inside_it() -> None:
    census = Census().start()
    t = threading.Thread(target=_burn, args=(0.2,))
    t.start()
    t.join()
    census.stop()
    driver = census.kinds["driver"]
    assert driver.cpu_ns >= 0.2e9  # the ended thread's 0.2 s: a live-threads-only count would miss it
    assert census.machine_busy_s() > 0
    assert 0.0 < census.busy_share() <= 1.0


def test_the_census_counts_a_child_that_exited_inside_the_window_as_the_callers_kind() -> None:
    import subprocess
    import sys

    census = Census(children="program").start()
    subprocess.run([sys.executable, "-c", "import time\nt=time.process_time()\nwhile time.process_time()-t<0.2: pass"],
                   check=True)  # fmt: skip
    census.stop()
    assert census.kinds["program"].cpu_ns >= 0.15e9
