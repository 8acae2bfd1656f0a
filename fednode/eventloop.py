"""The agents' event loop: uvloop where it is installed, asyncio's own loop otherwise.

Every agent's work is small callbacks (a frame arrives, a generator advances,
a reply is written), so the loop's own cost per callback is most of the raw
round trip: measured here, a PING/PONG between two agents on uvloop takes
about half the time it takes on the default loop (``fednode bench --loop
asyncio,uvloop`` prints both side by side).  uvloop is an optional extra
(``pip install 'fedfs[fast]'``); without it the agents run on asyncio's
default loop, which is always correct, only slower.

``FEDNODE_LOOP`` (or ``fednode serve --loop``) picks the loop:

* ``auto`` (the default): uvloop if it imports, else asyncio;
* ``uvloop``: uvloop, and an error if it is not installed;
* ``asyncio``: the default loop even where uvloop is installed.

Where agents start their loop (``fednode serve``, the in-process
``AgentGroup``) they log which loop runs, and why.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any

ENV = "FEDNODE_LOOP"
CHOICES = ("auto", "uvloop", "asyncio")

LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def choose(choice: str | None = None) -> tuple[LoopFactory, str]:
    """(a factory of new event loops, a line saying which loop it makes and why).

    ``choice`` defaults to ``$FEDNODE_LOOP``, then ``auto``."""
    want = choice or os.environ.get(ENV) or "auto"
    if want not in CHOICES:
        raise ValueError(f"event loop {want!r}: must be one of {', '.join(CHOICES)} (from --loop or ${ENV})")
    if want == "asyncio":
        return asyncio.new_event_loop, f"asyncio (default loop, chosen by {ENV}=asyncio or --loop asyncio)"
    try:
        import uvloop
    except ImportError as exc:
        if want == "uvloop":
            raise ValueError(f"event loop 'uvloop' was asked for but cannot be imported: {exc}") from None
        return asyncio.new_event_loop, "asyncio (default loop; uvloop is not installed: pip install 'fedfs[fast]')"
    return uvloop.new_event_loop, f"uvloop {uvloop.__version__}"


def name_of(loop: asyncio.AbstractEventLoop) -> str:
    """``uvloop`` or ``asyncio``: which loop this is (for status and benchmarks)."""
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"


def run(main: Coroutine[Any, Any, Any], factory: LoopFactory) -> Any:
    """``asyncio.run(main)`` on a loop made by ``factory`` (Python 3.11 has no ``loop_factory=`` in run)."""
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
