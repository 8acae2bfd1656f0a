"""``fedsim``: run a study from a YAML config, a parameter sweep, a quick plot, or the demo.

    fedsim run CONFIG [--seed N] [--set key=value ...] [--out DIR]
    fedsim sweep SWEEP.yaml [--executor local|dask] [--workers N] [--scheduler ADDRESS] [--out DIR]
    fedsim plot RESULTS --x PARAM --y METRIC [--hue PARAM] [--out FILE.png|.pdf]
    fedsim demo [--out DIR] [--quick]

``run`` writes ``DIR/results.csv`` (tidy: study, case, seed, metric, value) and
``DIR/config.yaml`` (the resolved config) and prints the study's report.  The
same config and seed give byte-identical files.
"""

from __future__ import annotations

import argparse
import sys
from importlib import metadata
from pathlib import Path

import yaml

from fedsim.config import load
from fedsim.results import write_csv
from fedsim.schema import ConfigError
from fedsim.studies import run_study

#: ``fedsim demo`` runs the function this entry point names (fedfs declares
#: ``experiments.demo:demo``): the demo draws on the studies and the agent, so it
#: lives above fedsim and fedsim finds it the way it finds studies, by name.
DEMO_GROUP = "fedsim.demo"


def run_config(config: str, seed: int | None, sets: list[str] | None, out: str | None) -> Path:
    cfg = load(config, sets, seed)
    result = run_study(cfg, config)
    out_dir = Path(out) if out else Path("results") / Path(config).stem
    out_dir.mkdir(parents=True, exist_ok=True)
    write_csv(out_dir / "results.csv", cfg.study, cfg.seed, result.rows)
    (out_dir / "config.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=True))
    print(result.report)
    print(f"\n{len(result.rows)} result rows -> {out_dir / 'results.csv'}")
    return out_dir


def sweep_command(args: argparse.Namespace) -> int:
    from fedsim.sweep import check_executor, load_sweep, run_sweep, summary

    check_executor(args.executor, args.scheduler, args.workers)
    sweep = load_sweep(args.sweep, args.set)
    print(
        f"{sweep.source}: study {sweep.base.study}, {len(sweep.points)} points "
        f"({', '.join(sweep.keys) or 'no parameters'}; seeds {sorted({p.seed for p in sweep.points})}), "
        f"executor {args.executor}" + (f" at {args.scheduler}" if args.scheduler else ""),
        flush=True,
    )
    try:
        outcome = run_sweep(
            sweep,
            args.out,
            executor=args.executor,
            workers=args.workers,
            scheduler=args.scheduler,
            progress=not args.no_progress,
        )
    except KeyboardInterrupt:
        print(
            "\nfedsim sweep: interrupted; the points that finished are recorded. Run the same command again "
            "to run only the missing ones.",
            file=sys.stderr,
        )
        return 130
    print(summary(sweep, outcome))
    return 1 if outcome.failed else 0


def demo_command(out: Path, quick: bool) -> int:
    eps = list(metadata.entry_points(group=DEMO_GROUP, name="demo"))
    if not eps:
        raise ConfigError(
            f"fedsim demo: no '{DEMO_GROUP}' entry point named 'demo' is installed; "
            "install fedfs (pip install -e . in the repository, or ./dev.sh setup)"
        )
    eps[0].load()(out, quick=quick)
    return 0


def plot_command(args: argparse.Namespace) -> int:
    from fedsim.plot import plot

    path = plot(args.results, args.x, args.y, args.hue, args.out, args.where, args.logx, args.logy, args.title)
    print(f"figure -> {path}")
    return 0


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{n}: must be at least 1")
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="fedsim", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the study a config names")
    r.add_argument("config")
    r.add_argument("--seed", type=int, default=None, help="override the config's seed")
    r.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key, e.g. cluster.nodes=8")
    r.add_argument("--out", default=None, help="output directory (default results/<config name>)")
    s = sub.add_parser("sweep", help="run a parameter sweep (grid, zip, random samples x seeds)")
    s.add_argument("sweep", help="the sweep file (see README: Parameter sweeps)")
    s.add_argument(
        "--executor",
        choices=("local", "dask"),
        default="local",
        help="local: a process pool on this machine (default); dask: dask.distributed",
    )
    s.add_argument(
        "--workers",
        type=_positive,
        default=None,
        help="processes (local) or LocalCluster workers (dask); default: the machine's cores",
    )
    s.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="a running Dask scheduler, e.g. tcp://10.0.0.5:8786 (with --executor dask)",
    )
    s.add_argument("--out", default=None, help="output directory (default results/sweeps/<sweep name>)")
    s.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a base config key for every point")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    p = sub.add_parser("plot", help="plot a metric of sweep or run results, mean and 95%% CI over seeds")
    p.add_argument("results", help="a sweep output directory or a results.csv")
    p.add_argument("--x", required=True, help="column on the x axis (a sweep parameter, or a case key)")
    p.add_argument("--y", required=True, help="metric on the y axis")
    p.add_argument("--hue", default=None, help="column that splits the lines")
    p.add_argument("--where", action="append", metavar="COLUMN=VALUE", help="keep only these rows")
    p.add_argument("--out", default=None, help="figure file, .png or .pdf (default beside the results)")
    p.add_argument("--logx", action="store_true")
    p.add_argument("--logy", action="store_true")
    p.add_argument("--title", default=None)
    d = sub.add_parser("demo", help="simulate NFS vs a 4-node federation and write a figure")
    d.add_argument("--out", default="results/demo")
    d.add_argument("--quick", action="store_true", help="fewer operations per point")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "run":
            run_config(args.config, args.seed, args.set, args.out)
        elif args.cmd == "sweep":
            return sweep_command(args)
        elif args.cmd == "plot":
            return plot_command(args)
        else:
            return demo_command(Path(args.out), quick=args.quick)
    except ConfigError as exc:
        print(f"fedsim: configuration error:\n{exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
