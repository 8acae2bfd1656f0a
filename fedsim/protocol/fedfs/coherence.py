"""The directory table's coherence policy (``protocol: dt_coherence:``; the policies and
what each promises: ``fedsim.protocol.policies.coherence``), as a role of the FedFS node
between the manager (whose DT it watches) and the home and requester (whose lookups it
steers: ``Requester._lookup``).

The role only routes: its three requests to the policy's handlers, every handled
request through the policy's ``after`` (dnfsp2 takes the tokens of the names the
request changed back before the request is answered), and a view change to
``view_changed``.  Under ``lazy`` each of these is a no-op (no effect), so the lazy
federation's messages and numbers are exactly those before the role existed.
"""

from __future__ import annotations

from typing import Any

from fedsim.protocol.fedfs.manager import Manager
from fedsim.protocol.messages import Request
from fedsim.protocol.node import Gen, handles
from fedsim.protocol.policies.coherence import DT_COHERENCES, DtFetch, DtRecall, DtToken
from fedsim.protocol.tables import WatchedLRU
from fedsim.protocol.view import View


class Coherence(Manager):
    def __init__(self, node_id: int, spec: Any, **kw: Any) -> None:
        super().__init__(node_id, spec, **kw)
        self.dt_coherence = DT_COHERENCES.get(self.config.dt_coherence)(self)
        if self.dt_coherence.watches:
            self.dt = WatchedLRU(self.config.dt_entries, self.dt_coherence.changed)

    def counters(self) -> dict[str, float]:
        return {**super().counters(), **self.dt_coherence.counters()}

    def handle(self, src: int, request: Request) -> Gen:
        policy = self.dt_coherence
        if not policy.watches:
            return (yield from super().handle(src, request))
        try:
            result = yield from super().handle(src, request)
        except GeneratorExit:
            raise  # closed by its runtime: nothing runs on this node after it
        except BaseException:
            yield from policy.after()
            raise
        yield from policy.after()
        return result

    def install_view(self, view: View) -> Gen:
        epoch = self.view.epoch
        yield from super().install_view(view)
        if self.view.epoch != epoch:
            self.dt_coherence.view_changed()

    @handles(DtFetch)
    def on_dt_fetch(self, src: int, req: DtFetch) -> Any:
        return self.dt_coherence.on_fetch(src, req)

    @handles(DtToken)
    def on_dt_token(self, src: int, req: DtToken) -> Gen:
        return (yield from self.dt_coherence.on_token(src, req))

    @handles(DtRecall)
    def on_dt_recall(self, src: int, req: DtRecall) -> None:
        return self.dt_coherence.on_recall(src, req)
