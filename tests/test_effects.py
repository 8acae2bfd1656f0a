"""Every runtime gives every effect its meaning.

One small protocol generator per effect kind in ``EFFECTS`` is driven through
each runtime's public driver (``SimCluster.spawn``, ``DirectCluster.run``, an
``Agent``'s ``drive`` over the in-process transport), and must give the same
result everywhere.  A Compute naming unknown work and an object that is not
an effect are errors raised into the generator in every runtime.  A new
effect added to ``EFFECTS`` without a case here fails the coverage test, so
it cannot land with a meaning in only some runtimes.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from fedsim.direct import DirectCluster
from fedsim.network import preset
from fedsim.protocol.effects import (
    EFFECTS,
    WORK,
    Await,
    Call,
    Compute,
    Local,
    Multicast,
    Now,
    Send,
    Sleep,
    Spawn,
    UnknownWork,
    Wake,
)
from fedsim.protocol.messages import ReadDir, Stat
from fedsim.runtime import CpuCosts, SimCluster

Gen = Generator[Any, Any, Any]
Runner = Callable[[int, Gen], Any]


def _stat_root_at(node: int) -> Gen:
    return (yield Call(node, Stat("/")))


def _send() -> Gen:
    return (yield Send(1, Stat("/")))


def _multicast() -> Gen:
    return (yield Multicast((1, 2), Stat("/")))


def _multicast_each() -> Gen:
    return (yield Multicast((1, 2), (Stat("/"), ReadDir("/"))))


def _local() -> Gen:
    made = yield Local("mkdir", "/fx/y")
    return made, (yield Local("stat", "/fx"))


def _compute() -> Gen:
    out = []
    for w in WORK:
        out.append((yield Compute(w, 3)))
    return out


def _spawn() -> Gen:
    seen: list[str] = []

    def child() -> Gen:
        seen.append("child ran")
        yield Local("mkdir", "/spawned")

    r = yield Spawn(child())
    yield Sleep(0.001)  # the child runs beside us (at once in the in-memory runtime)
    return r, seen, (yield Local("stat", "/spawned"))


def _await_wake() -> Gen:
    def waker() -> Gen:
        yield Sleep(0.001)
        yield Wake("k", 7)

    yield Spawn(waker())
    return (yield Await("k"))


def _wake_alone() -> Gen:
    return (yield Wake("nobody waits", 1))


def _now() -> Gen:
    t = yield Now()
    return type(t) is float and t >= 0.0


def _sleep() -> Gen:
    t0 = yield Now()
    r = yield Sleep(0.002)
    t1 = yield Now()
    return r, t1 - t0 >= 0.002 - 1e-9


#: effect -> (generator, what every runtime returns).  ``None`` as the
#: expected value of Await marks the in-memory runtime's documented refusal.
CASES: dict[type, tuple[Callable[[], Gen], Any]] = {
    Call: (lambda: _stat_root_at(1), (True, 0)),
    Send: (_send, None),
    Multicast: (_multicast, [(True, 0), (True, 0)]),
    Local: (_local, (["/fx", "/fx/y"], (True, 0))),
    Compute: (_compute, [None] * len(WORK)),
    Spawn: (_spawn, (None, ["child ran"], (True, 0))),
    Await: (_await_wake, 7),
    Wake: (_wake_alone, None),
    Now: (_now, True),
    Sleep: (_sleep, (None, True)),
}


def _canonical(v: Any) -> Any:
    """Lists and tuples alike (the agent's replies cross msgpack)."""
    if isinstance(v, (list, tuple)):
        return tuple(_canonical(x) for x in v)
    return v


# ---------------------------------------------------------------------------- runtimes
def _sim() -> Iterator[Runner]:
    sim = SimCluster(3, network=preset("via_clan"), keep_data=True)
    sim.preload_summaries()

    def run(node: int, gen: Gen) -> Any:
        p = sim.spawn(node, gen)
        sim.env.run(until=p)
        return p.value

    yield run


def _direct() -> Iterator[Runner]:
    c = DirectCluster(3)
    yield c.run


def _agents() -> Iterator[Runner]:
    from fednode.cluster import AgentGroup, local_spec
    from fednode.config import Cluster

    with tempfile.TemporaryDirectory() as tmp:
        spec = local_spec(Path(tmp), 3, protocol={"summary_refresh_s": 0.0})
        with AgentGroup(Cluster(spec), transport="inproc") as g:
            yield lambda node, gen: g.lt.run(g.agents[node].drive(gen, 0, None))


RUNTIMES = {"simulator": _sim, "direct": _direct, "agent": _agents}


@pytest.fixture(params=sorted(RUNTIMES), scope="module")
def runtime(request: pytest.FixtureRequest) -> Iterator[tuple[str, Runner]]:
    gen = RUNTIMES[request.param]()
    yield request.param, next(gen)
    gen.close()


def test_every_effect_has_a_case() -> None:
    assert set(CASES) == set(EFFECTS)


@pytest.mark.parametrize("effect", list(CASES), ids=lambda e: e.__name__)
def test_every_runtime_handles_every_effect(runtime: tuple[str, Runner], effect: type) -> None:
    name, run = runtime
    make, want = CASES[effect]
    if name == "direct" and effect is Await:
        # one thread and no concurrency: a client generator that awaits would
        # wait forever, so the in-memory runtime refuses it at once
        with pytest.raises(RuntimeError, match="wait forever"):
            run(0, make())
        return
    assert _canonical(run(0, make())) == _canonical(want)


def test_a_multicast_of_one_request_per_node(runtime: tuple[str, Runner]) -> None:
    """``Multicast`` with a tuple sends its i-th request to the i-th node
    (a batch per home), the replies in ``nodes`` order as for one request."""
    _, run = runtime
    assert _canonical(run(0, _multicast_each())) == ((True, 0), ())
    with pytest.raises(ValueError, match="2 requests for 1 nodes"):
        Multicast((1,), (Stat("/"), Stat("/")))


def test_unknown_compute_work_is_an_error_naming_the_known_work(runtime: tuple[str, Runner]) -> None:
    _, run = runtime

    def gen() -> Gen:
        try:
            yield Compute("fedfs_opp")
        except UnknownWork as e:
            return str(e)
        return "accepted"

    msg = run(0, gen())
    assert "'fedfs_opp'" in msg and all(w in msg for w in WORK)


def test_an_object_that_is_not_an_effect_is_a_type_error(runtime: tuple[str, Runner]) -> None:
    _, run = runtime

    def gen() -> Gen:
        try:
            yield ("Call", 1)
        except TypeError as e:
            return "TypeError" if "not an effect" in str(e) else str(e)
        return "accepted"

    assert run(0, gen()) == "TypeError"


def test_the_simulator_prices_exactly_the_known_work() -> None:
    assert set(CpuCosts(hash_us=0.1).table(4)) == set(WORK)
