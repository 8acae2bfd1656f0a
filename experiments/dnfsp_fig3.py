"""dNFSp Fig. 3 (issue 25): the same data written as 1 to 128 files, in the
simulator, by each design's protocol code (``fedsim.protocol.nfs``,
``.dnfsp``) under the same network, CPU and disk models.

The paper's set-up (dNFSp paper, section 4.1): 4 meta-servers, 4 I/O
daemons, 4 clients, each client writing 50 MB split into 1 to 128 files
(200 MB in all per step); the figure plots each step's execution time.
Here the federation has ``metas + iods`` members (dNFSp makes the lower
half its meta-servers); client ``k`` calls the entry at member
``metas + k``, which sends its procedures to meta-server ``k`` (dNFSp) or
to the one server (NFS).  Each client makes its own directory ``/c<k>``,
then creates, writes (``write_size`` bytes a call) and closes its files
one after the other; the time is from the first call to the last reply.

The paper's figure did not survive the text conversion: only its text
does, and that is qualitative (dNFSp2 "sustains almost the same transfer
time for all the given sizes", dNFSp1 "a significant performance
degradation as the number of files grow", NFS's time "stable").  So the
paper column states the shape, not numbers.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PositiveInt

from experiments.common import build_cluster, counters
from experiments.dafs import variant
from fedsim.config import Config
from fedsim.results import StudyResult
from fedsim.runtime import SimCluster
from fedsim.schema import table
from fedsim.studies import register_study

#: what the paper's text says of each design's curve (its figure's numbers are lost)
PAPER_SHAPE = {
    "nfs": "stable (single server: no synchronisation)",
    "nfsp": "(not in the figure)",
    "dnfsp1": "significant degradation as files grow (O(n) search)",
    "dnfsp2": "almost the same time for every split",
}


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")

    designs: list[str] = Field(default_factory=lambda: ["nfs", "dnfsp1", "dnfsp2"])
    metas: PositiveInt = 4
    iods: PositiveInt = 4
    clients: PositiveInt = 4
    mb_per_client: float = Field(50.0, gt=0)
    files: list[PositiveInt] = Field(default_factory=lambda: [1, 2, 4, 8, 16, 32, 64, 128])
    write_size: PositiveInt = 32768


def client(c: SimCluster, k: int, node: int, n_files: int, size: int, write_size: int) -> Generator[Any, Any, None]:
    """Client ``k`` at ``node``: its directory, then ``n_files`` files of ``size`` bytes each, written in order."""
    yield from c.client_op(k, node, "mkdir", f"/c{k}")
    block = bytes(write_size)
    for j in range(n_files):
        fd, _ = yield from c.client_op(k, node, "create_open", f"/c{k}/f{j}")
        for off in range(0, size, write_size):
            yield from c.client_op(k, node, "write", fd, off, block[: min(write_size, size - off)])
        yield from c.client_op(k, node, "close", fd)


def run_point(cfg: Config, params: Params, design: str, n_files: int) -> dict[str, float]:
    """One bar of the figure: every client writes its share as ``n_files`` files; the time and the messages."""
    v = variant(cfg, cluster__nodes=params.metas + params.iods, protocol__architecture=design)
    c = build_cluster(v)
    c.preload_summaries()
    size = max(1, round(params.mb_per_client * 2**20 / n_files))
    before = counters(c)
    t0 = c.env.now
    procs = [
        c.env.process(client(c, k, params.metas + k % params.iods, n_files, size, params.write_size))
        for k in range(params.clients)
    ]
    c.env.run(until=c.env.all_of(procs))
    after = counters(c)
    design_counts = after["design"] - before["design"]
    return {
        "time_s": (c.env.now - t0) * 1e-6,
        "messages": after["messages"] - before["messages"],
        "meta_fetches": design_counts.get("meta_fetches", 0),
        "token_requests": design_counts.get("token_requests", 0),
    }


def run(cfg: Config, params: Params) -> StudyResult:
    res = StudyResult()
    out: dict[tuple[str, int], dict[str, float]] = {}
    for design in params.designs:
        for n in params.files:
            m = out[(design, n)] = run_point(cfg, params, design, n)
            res.extend(f"design={design} files={n}", m)
    lo, hi = min(params.files), max(params.files)
    res.report = "\n".join(
        [
            f"dNFSp Fig. 3: {params.clients} clients x {params.mb_per_client:g} MB each, split into "
            f"{lo}-{hi} files, {params.metas} meta-servers + {params.iods} I/O daemons, "
            f"{params.write_size} B writes, {cfg.network.preset} network; execution time (s), simulated",
            table(
                ["design", *(f"{n} files" for n in params.files), f"{hi}/{lo}", "paper (text; figure lost)"],
                [
                    [
                        d,
                        *(f"{out[(d, n)]['time_s']:.3f}" for n in params.files),
                        f"{out[(d, hi)]['time_s'] / out[(d, lo)]['time_s']:.2f}",
                        PAPER_SHAPE.get(d, ""),
                    ]
                    for d in params.designs
                ],
            ),
            "",
            "Messages between nodes per step (dNFSp1: misses asked of every other meta-server; "
            "dNFSp2: token requests to a hash server)",
            table(
                ["design", *(f"{n} files" for n in params.files), "fetches / token req. at max"],
                [
                    [
                        d,
                        *(f"{out[(d, n)]['messages']:.0f}" for n in params.files),
                        f"{out[(d, hi)]['meta_fetches']:.0f} / {out[(d, hi)]['token_requests']:.0f}",
                    ]
                    for d in params.designs
                ],
            ),
            "",
            *differences(params, out),
        ]
    )
    return res


def differences(params: Params, out: dict[tuple[str, int], dict[str, float]]) -> list[str]:
    """Where and why this simulation differs from the paper's text, with the numbers it measured."""
    lo, hi = min(params.files), max(params.files)
    lines = ["Where the simulation differs from the paper, and why:"]
    if "dnfsp1" in params.designs and "dnfsp2" in params.designs:
        t1, t2 = out[("dnfsp1", hi)]["time_s"], out[("dnfsp2", hi)]["time_s"]
        lines.append(
            f"- dNFSp1 vs dNFSp2 at {hi} files: {t1 / t2:.3f}x the time, though dNFSp1 sends "
            f"{out[('dnfsp1', hi)]['messages'] - out[('dnfsp1', lo)]['messages']:.0f} more messages than at {lo} "
            f"against dNFSp2's {out[('dnfsp2', hi)]['messages'] - out[('dnfsp2', lo)]['messages']:.0f}: the "
            f"search of the {params.metas - 1} other meta-servers is one concurrent Multicast (one round trip, as "
            "dNFSp2's token request) and costs each a stat; the paper's degradation needs a per-message cost "
            "at the meta-servers (user-level daemons over UDP) that this network model (LogGP: the sender's gap "
            "only) does not charge, so the O(n) shows in messages, hardly in time."
        )
    if "dnfsp1" in params.designs:
        f_lo, f_hi = out[("dnfsp1", lo)], out[("dnfsp1", hi)]
        per_client = (f_hi["meta_fetches"] - f_lo["meta_fetches"]) / params.clients  # the clients run in parallel
        if "dnfsp2" in params.designs:  # dNFSp1's time over dNFSp2's: what the searches cost beyond a token request
            extra = (f_hi["time_s"] - out[("dnfsp2", hi)]["time_s"]) - (f_lo["time_s"] - out[("dnfsp2", lo)]["time_s"])
            what = "dNFSp1's time over dNFSp2's grows by"
        else:
            extra, what = f_hi["time_s"] - f_lo["time_s"], "dNFSp1's time grows by"
        per = extra / per_client * 1e6 if per_client else 0.0
        lines.append(
            f"- Checked against the paper (section 2 and 4.1), the protocol follows it: a meta-server searches the "
            "others only on its first access to a name it lacks ('no further synchronization'), which in this "
            "benchmark is each new file's existence check, as the paper's explanation of Fig. 3 says; the paper "
            "does not say the search is sequential, nor that a lookup's cost grows with the entries held, and no "
            "access after the first misses (a real NFS client's LOOKUP before its CREATE would make it two a "
            f"file, still one round trip each).  So each client makes {per_client:.0f} more searches at {hi} files "
            f"than at {lo}, and {what} {per:+.0f} us a search: one round trip to the {params.metas - 1} others at "
            "once, the time of dNFSp2's one round trip to a hash server, against "
            f"{params.mb_per_client:g} MB of writes a client that cross the network twice.  The O(n) is in "
            "messages, not in time.  A sequential search or a per-entry lookup cost would bring the paper's "
            "curve, but the paper describes neither, so neither is modelled."
        )
    lines.append(
        "- The paper's figure also has PVFS2 (degrading like dNFSp1); PVFS2 is no design here, so it has no row."
    )
    lines.append(
        "- Every design's time grows a little with the files (per-file create, open and close, and smaller last "
        "writes): the paper's 'flat' NFS and dNFSp2 are flat to the same few per cent here."
    )
    if "nfs" in params.designs and "dnfsp2" in params.designs:
        lines.append(
            f"- NFS is faster than dNFSp here ({out[('nfs', lo)]['time_s']:.3f} s against "
            f"{out[('dnfsp2', lo)]['time_s']:.3f} s at {lo} file), the reverse of the paper's 'higher transfer rate' "
            "of dNFSp2: a receiving NIC is no bottleneck in this network model, so the one NFS server takes the 4 "
            "clients' data at 4 links' speed, while each dNFSp write crosses the network twice (client -> "
            "meta-server -> I/O daemon, NFSp's forwarding as the paper describes it)."
        )
    return lines


register_study("dnfsp_fig3", Params, run)
