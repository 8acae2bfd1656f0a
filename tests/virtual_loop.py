"""An asyncio event loop whose clock is virtual, for testing agents' timing code.

``loop.time()`` starts at 0 and moves only when every task is blocked: then
the loop jumps straight to its next timer instead of sleeping.  Timeouts,
retry backoffs and periodic work of real ``Agent`` code thus run in
microseconds of real time, and the order of events depends only on the code
and the schedule of faults (``fedsim.faults`` through the in-process
transport), never on the machine's load: a test is deterministic.

Only code that reads the loop's clock (``loop.time()``, ``asyncio.sleep``,
``call_later``) is virtualised; the agent reads its clock through its loop
for exactly this reason.
"""

from __future__ import annotations

import asyncio
import selectors
from typing import Any


class VirtualTimeExceeded(RuntimeError):
    """The virtual clock passed the loop's limit: something waits forever
    while periodic timers keep the loop alive (a hang, found at once)."""


class VirtualClockLoop(asyncio.SelectorEventLoop):
    def __init__(self, limit: float = 3600.0) -> None:
        self._virtual_now = 0.0
        self.limit = limit
        super().__init__(_VirtualSelector(self))

    def time(self) -> float:
        return self._virtual_now


class _VirtualSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    """Polls the real file descriptors (the loop's self-pipe) without
    blocking; a wait the loop asks for becomes a jump of the virtual clock."""

    def __init__(self, loop: VirtualClockLoop) -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[Any]:
        events = super().select(0)
        if events or timeout == 0:
            return events
        loop = self._loop
        if timeout is None:
            raise RuntimeError("deadlock: every task is blocked and no timer is pending")
        loop._virtual_now += timeout
        if loop._virtual_now > loop.limit:
            raise VirtualTimeExceeded(f"virtual time passed {loop.limit:g} s")
        return []


def run_virtual(coro: Any, limit: float = 3600.0) -> Any:
    """Run ``coro`` to completion on a fresh virtual-clock loop."""
    loop = VirtualClockLoop(limit)
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
