"""CLI command `accelsim sweep SPEC --out DIR`: run a design-space sweep (accelsim/sweep) and summarize it."""
from __future__ import annotations

import argparse

from accelsim.cli import fmt, progress
from accelsim.cli.common import path_arg, positive_int


def cmd_sweep(args: argparse.Namespace) -> int:
    from accelsim.dse.runner import run_sweep

    # the runner draws its own bar of points (M/N, elapsed, ETA) on stderr, only where that is a terminal
    run = run_sweep(args.spec, out=args.out, workers=args.workers, dask=args.dask, progress=progress.enabled(),
                    plots=not args.no_plots)
    print(f"sweep {run.spec.name}: {fmt.count(len(run.results))} points ({fmt.count(run.new)} new, "
          f"{fmt.count(run.reused)} reused; {fmt.count(run.failed)} failed, {fmt.count(run.infeasible)} infeasible)")
    print(f"  results: {run.results_path}")
    if run.plots:
        print(f"  plots:   {fmt.count(len(run.plots))} in {run.plots[0].parent}")
    for note in run.notes:
        print(f"  note: {note}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    text = "evaluate a design-space sweep (grid, random or Optuna) and write results.parquet and Pareto plots"
    p = sub.add_parser("sweep", help=text, description=f"{text[0].upper()}{text[1:]}. Each point compiles and "
                                                       "simulates the step its spec describes (the spec names the "
                                                       "hardware; its step trains unless it says training: false).")
    p.add_argument("spec", type=path_arg, help="sweep spec YAML, e.g. experiments/sweeps/tpu_array.yaml")
    p.add_argument("--out", required=True, metavar="DIR", type=path_arg,
                   help="directory for points/, results.parquet, spec.yaml and plots/; a rerun resumes there")
    p.add_argument("--workers", type=positive_int, default=1,
                   help="processes evaluating points (1: in this process; default 1)")
    p.add_argument("--dask", metavar="local|tcp://HOST:PORT",
                   help="run the points on Dask: 'local' starts a LocalCluster of --workers processes; an "
                        "address connects to a running scheduler (needs accelsim[dask])")
    p.add_argument("--no-plots", action="store_true", help="skip the Pareto and timeline plots")
    p.set_defaults(fn=cmd_sweep)
