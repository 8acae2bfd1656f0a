"""Federated DAFS Fig. 6: PostMark throughput for files of 2 KB to 16 KB on
1, 2, 4 and 8 servers, each driven to saturation by adding clients, and the
speedups beside the paper's ("speedups of 2.6 on a four node cluster and 4.5
on an eight node cluster relative to throughput on a single node"); then
16, 64 and 256 servers.

The paper's setup, as the config gives it: each transaction "performed a
create/delete coupled with a file read operation (no writes)" (PostMark
``bias_read: 10``), files of one size per run (``size_low = size_high``),
files placed at their manager and clients routing each request by the
federation's hash (``route: hash``: every file access is local, section
VI-B), clients across the cLAN from the servers (``client_link``, the
``via_clan`` preset: 8 us one way, 105 MB/s).  "For each configuration, we
measured the maximum throughput ... by increasing the number of clients until
the server CPUs reached saturation": here ``clients_per_server`` levels in
turn until throughput grows by less than ``saturation_gain``.

The scaling part (``scale_servers``) runs one size at ``scale_clients_per_server``
clients per server with ``scale_transactions`` each (saturating 256 servers
takes thousands of clients), against 1 server under the same load per server.

The paper's open question (section VI-C: "file migration to relocate files
based on load information ... will help us achieve better speedups"): the
scaling run again at ``migration_servers`` (8 and 64) with the dynamics
issue's ``protocol.migration`` policy off (``none``) and on
(``load_based``), its period shortened to ``migration_period_s`` so that a
run of a fraction of a simulated second sees several policy rounds; the
speedups over one server, and the files and bytes moved.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt

from experiments.dafs import PostMarkRun, postmark_run, saturate
from fedsim.config import Config
from fedsim.results import StudyResult
from fedsim.schema import table
from fedsim.studies import register_study

#: Federated DAFS section VI-C: servers -> speedup over one server
PAPER_SPEEDUP: dict[int, float] = {4: 2.6, 8: 4.5}


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")

    servers: list[PositiveInt] = Field(default_factory=lambda: [1, 2, 4, 8])
    sizes: list[PositiveInt] = Field(default_factory=lambda: [2048, 4096, 8192, 16384])
    clients_per_server: list[PositiveInt] = Field(default_factory=lambda: [1, 2, 4, 8, 16])
    saturation_gain: PositiveFloat = 0.05
    scale_servers: list[PositiveInt] = Field(default_factory=lambda: [16, 64, 256])
    scale_size: PositiveInt = 4096
    scale_clients_per_server: PositiveInt = 4
    scale_transactions: PositiveInt = 100
    migration_servers: list[PositiveInt] = Field(default_factory=list)
    migration_policies: list[str] = Field(default_factory=lambda: ["none", "load_based"])
    migration_period_s: PositiveFloat = 0.01


def _sized(size: int) -> dict[str, Any]:
    return {"workload__postmark__size_low": size, "workload__postmark__size_high": size}


def run(cfg: Config, params: Params) -> StudyResult:
    res = StudyResult()
    best: dict[tuple[int, int], PostMarkRun] = {}
    for size in params.sizes:
        for n in params.servers:
            top, runs = saturate(cfg, n, params.clients_per_server, params.saturation_gain, **_sized(size))
            best[(size, n)] = top
            for r in runs:
                res.extend(
                    f"size={size} servers={n} clients={r.clients}",
                    {"tps": r.tps, "remote_share": r.remote_share, "errors": r.errors},
                )
    base_n = min(params.servers)
    speedups: dict[tuple[int, int], float] = {}
    for (size, n), r in best.items():
        speedups[(size, n)] = r.tps / best[(size, base_n)].tps
        res.extend(
            f"size={size} servers={n} saturated",
            {
                "tps": r.tps,
                "clients": r.clients,
                "speedup": speedups[(size, n)],
                "paper_speedup": PAPER_SPEEDUP.get(n, float("nan")),
            },
        )
    scale: dict[int, PostMarkRun] = {}
    if params.scale_servers:
        kw = {**_sized(params.scale_size), "workload__postmark__transactions": params.scale_transactions}
        for n in [1, *params.scale_servers]:
            scale[n] = postmark_run(cfg, n, params.scale_clients_per_server * n, **kw)
            res.extend(
                f"scale servers={n}",
                {
                    "tps": scale[n].tps,
                    "clients": scale[n].clients,
                    "speedup": scale[n].tps / scale[1].tps,
                    "errors": scale[n].errors,
                },
            )
    migr = _migration(cfg, params, res)
    res.report = _report(cfg, params, best, speedups, scale)
    if migr:
        res.report += "\n\n" + _migration_report(params, migr)
    return res


def _migration(cfg: Config, params: Params, res: StudyResult) -> dict[tuple[int, str], PostMarkRun]:
    """The scaling run at each of ``migration_servers`` under each migration
    policy (one server, where there is nowhere to move to, is the baseline)."""
    out: dict[tuple[int, str], PostMarkRun] = {}
    if not params.migration_servers:
        return out
    kw = {
        **_sized(params.scale_size),
        "workload__postmark__transactions": params.scale_transactions,
        "protocol__migration_period_s": params.migration_period_s,
    }
    base = postmark_run(cfg, 1, params.scale_clients_per_server, **kw)
    for n in params.migration_servers:
        for policy in params.migration_policies:
            r = out[(n, policy)] = postmark_run(
                cfg, n, params.scale_clients_per_server * n, protocol__migration=policy, **kw
            )
            res.extend(
                f"migration servers={n} policy={policy}",
                {
                    "tps": r.tps,
                    "speedup": r.tps / base.tps,
                    "files_moved": r.files_moved,
                    "bytes_moved": r.bytes_moved,
                    "remote_share": r.remote_share,
                    "errors": r.errors,
                },
            )
    out[(1, "none")] = base
    return out


def _migration_report(params: Params, migr: dict[tuple[int, str], PostMarkRun]) -> str:
    base = migr[(1, "none")]
    rows = []
    for n in params.migration_servers:
        off = migr.get((n, "none"))
        for policy in params.migration_policies:
            r = migr[(n, policy)]
            rows.append(
                [
                    n,
                    policy,
                    f"{r.tps:.0f}",
                    f"{r.tps / base.tps:.2f}",
                    f"{r.tps / off.tps - 1:+.1%}" if off else "-",
                    r.files_moved,
                    f"{r.bytes_moved / 1024:.0f}",
                    f"{r.remote_share:.3f}",
                    f"{PAPER_SPEEDUP[n]:.1f}" if n in PAPER_SPEEDUP else "-",
                ]
            )
    return "\n".join(
        [
            'The paper\'s open question (VI-C: migration "will help us achieve better speedups"): '
            f"the scaling run with migration off and on (period {params.migration_period_s:g} s, "
            f"{params.scale_clients_per_server} clients per server, {params.scale_transactions} transactions, "
            f"{params.scale_size} B files)",
            table(
                [
                    "servers",
                    "migration",
                    "tx/s",
                    "speedup",
                    "vs off",
                    "files moved",
                    "KiB moved",
                    "remote share",
                    "paper speedup",
                ],
                rows,
            ),
        ]
    )


def _report(
    cfg: Config,
    params: Params,
    best: dict[tuple[int, int], PostMarkRun],
    speedups: dict[tuple[int, int], float],
    scale: dict[int, PostMarkRun],
) -> str:
    pm = cfg.workload.postmark
    lines = [
        f"Federated DAFS Fig. 6: PostMark transactions/s at saturation ({pm.number} files and {pm.transactions} "
        f"transactions per client, bias_read {pm.bias_read}, route {pm.route}, {cfg.protocol.placement} placement, "
        f"{cfg.network.preset} network, client link {'on' if pm.client_link else 'off'})",
        table(
            ["file size", *(f"{n} srv tx/s (clients)" for n in params.servers)],
            [
                [size, *(f"{best[(size, n)].tps:.0f} ({best[(size, n)].clients})" for n in params.servers)]
                for size in params.sizes
            ],
        ),
        "",
        "Speedup over one server (the paper: 2.6 on 4, 4.5 on 8; target within 20 %)",
        table(
            ["file size", *(f"{n} srv" for n in params.servers)],
            [[size, *(f"{speedups[(size, n)]:.2f}" for n in params.servers)] for size in params.sizes]
            + [["paper", *(f"{PAPER_SPEEDUP[n]:.1f}" if n in PAPER_SPEEDUP else "-" for n in params.servers)]],
        ),
    ]
    for n, p in PAPER_SPEEDUP.items():
        if n in params.servers:
            mean = sum(speedups[(s, n)] for s in params.sizes) / len(params.sizes)
            lines.append(f"{n} servers: mean speedup {mean:.2f} vs paper {p:.1f} ({(mean / p - 1):+.0%})")
    if scale:
        lines += [
            "",
            f"Scaling: {params.scale_clients_per_server} clients per server, "
            f"{params.scale_transactions} transactions each, {params.scale_size} B files",
            table(
                ["servers", "clients", "tx/s", "speedup", "per server"],
                [
                    [n, r.clients, f"{r.tps:.0f}", f"{r.tps / scale[1].tps:.1f}", f"{r.tps / n:.0f}"]
                    for n, r in scale.items()
                ],
            ),
        ]
    return "\n".join(lines)


register_study("dafs_fig6", Params, run)
