"""First-come-first-served locks for protocol generators on one node, made of
``Await``/``Wake``: what a design uses to keep a handler's effects from
interleaving with another's where its promise needs it (dNFSp2: a name's token
held across a procedure; mNFS: one order of metadata writes at its sequencer).

A lock nobody holds is taken without yielding anything, so a runtime that
never runs two generators of a node at once (the in-memory runtime, whose
``Await`` would wait forever) never waits on one.  A waiter is woken by the
holder before it, which passes the lock on directly: the order is the order of
asking, whatever order the runtime resumes woken generators in, so a
simulation stays a function of its seed.

Who may wait: a client's procedure (which is waited for only by its client).
A handler of a peer's request must not wait on a lock: the simulator serves
each nesting depth with a bounded pool of workers, sound because a worker only
ever waits on deeper stages; handlers blocked on procedures that wait on those
same handlers elsewhere would exhaust a pool and deadlock.  Such a handler
leaves its work with ``after`` instead (run, spawned, when its turn comes) and
answers at once.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from typing import Any

from fedsim.protocol.effects import Await, Spawn, Wake
from fedsim.protocol.node import Gen


class Locks:
    """A node's locks, by any hashable key; each with its waiters' wake-up keys, in order."""

    def __init__(self, tag: str) -> None:
        #: tells this table's wake-up keys from any other's on the node (``Await`` keys are per node)
        self.tag = tag
        #: each held key's queue: ("wake", a waiter's wake-up key) or ("spawn", work left with ``after``)
        self.held: dict[Hashable, deque[tuple[str, Any]]] = {}
        self._waiter = 0  # the last waiter's number

    def acquire(self, key: Hashable) -> Gen:
        """``key`` for the calling generator alone, once those that asked before have released it."""
        queue = self.held.get(key)
        if queue is None:
            self.held[key] = deque()
            return
        self._waiter += 1
        wake = (self.tag, self._waiter)
        queue.append(("wake", wake))
        yield Await(wake)

    def release(self, key: Hashable) -> Gen:
        """``key`` passed to its next waiter, or free."""
        queue = self.held[key]
        if not queue:
            del self.held[key]
            return
        kind, nxt = queue.popleft()
        if kind == "wake":
            yield Wake(nxt)
        else:
            yield Spawn(self._owned(key, nxt))

    def busy(self, key: Hashable) -> bool:
        """Whether a generator holds ``key`` (or it is passed on to one)."""
        return key in self.held

    def after(self, key: Hashable, body: Gen) -> None:
        """``body`` run holding ``key`` once those that asked before have released it, spawned
        (so nobody waits for it); ``key`` is held now (``busy``)."""
        self.held[key].append(("spawn", body))

    def holding(self, key: Hashable, body: Gen) -> Gen:
        """``body``'s result, run holding ``key``, which is released however ``body`` ends.
        (A caller that needs several nests them, taken in one global order, so two never
        wait on each other.)"""
        yield from self.acquire(key)
        return (yield from self._owned(key, body))

    def _owned(self, key: Hashable, body: Gen) -> Gen:
        """``body``'s result, holding ``key`` (taken, or passed on to it); then released, however it ends."""
        try:
            result = yield from body
        except GeneratorExit:
            raise  # closed by its runtime: nothing runs on this node after it, nothing to wake
        except BaseException:
            yield from self.release(key)
            raise
        yield from self.release(key)
        return result
