"""Messages and simulated latency of a burst of ten cross-directory renames
(/s to /t, managed by different nodes, on the FedFS prototype's network):
``rename: 2pc`` against ``redistribute`` with no hold and with a 1 s hold
(issue 24; not a study of the paper's figures, which another module makes:
a quick look at what a borrowed table costs and what a hold saves).

    python -m tests.redistribute_costs
"""

from __future__ import annotations

from fedsim.network import preset
from fedsim.protocol.config import ProtocolConfig
from fedsim.runtime import SimCluster


def main() -> None:
    for name, kw in [
        ("2pc", {}),
        ("redistribute", {"rename": "redistribute"}),
        ("redistribute hold 1s", {"rename": "redistribute", "redistribute_hold": 1.0}),
    ]:
        sim = SimCluster(6, network=preset("fedfs_prototype"), protocol=ProtocolConfig(**kw))
        sim.run_op(0, "mkdir", "/s")
        pm = sim.nodes[0].manager_of("/s")
        t = next(p for i in range(100) if sim.nodes[0].manager_of(p := f"/t{i}") != pm)
        sim.run_op(1, "mkdir", t)
        for k in range(10):
            sim.run_op(k % 6, "create", f"/s/f{k}")
        lat, msgs = [], 0
        for k in range(10):
            t0, m0 = sim.env.now, sum(n.stats.requests_served for n in sim.nodes)
            sim.run_op((k + 2) % 6, "rename", f"/s/f{k}", f"{t}/g{k}")
            lat.append(sim.env.now - t0)
            msgs += sum(n.stats.requests_served for n in sim.nodes) - m0
        c = {k: sum(n.counters().get(k, 0) for n in sim.nodes) for k in ("redistributions", "hold_hits")}
        print(
            f"{name:22s} mean latency {sum(lat) / len(lat):8.1f} us  first {lat[0]:7.1f}  last {lat[-1]:7.1f}  "
            f"requests served/rename {msgs / 10:5.1f}  {c}"
        )


if __name__ == "__main__":
    main()
