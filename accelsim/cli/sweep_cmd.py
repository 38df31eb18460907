"""CLI command `accelsim sweep SPEC --out DIR`: run a design-space sweep (accelsim/sweep) and summarize it.
As a sweep starts it prints the estimate of its time; a long one goes on only with --yes or a yes at the
prompt."""
from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Callable

from accelsim import fmt
from accelsim.cli import progress
from accelsim.cli.common import path_arg, positive_int
from accelsim.errors import SweepError

if TYPE_CHECKING:  # the runner loads the sweep's dependencies: imported when a sweep runs
    from accelsim.dse.runner import Estimate

CONFIRM_ABOVE_S = 3600.0
"""A sweep estimated to take longer than this goes on only with --yes, or a yes at the prompt."""


def _estimate_line(e: Estimate) -> str:
    per = f"{fmt.wall(e.seconds_per_point)} a point (median of the first {fmt.count(e.measured)})"
    on = f" on {fmt.plural(e.workers, 'worker')}" if e.workers > 1 else ""
    return (f"sweep {e.sweep}: estimate {fmt.wall(e.seconds)} for the {fmt.plural(e.points, 'point')} left, "
            f"{per}{on}")


def confirm_estimate(yes: bool) -> Callable[[Estimate], None]:
    """The runner's `confirm`: print the estimate on stderr; above CONFIRM_ABOVE_S go on with `yes`, ask
    where stdin is a terminal, and refuse otherwise."""

    def confirm(e: Estimate) -> None:
        print(_estimate_line(e), file=sys.stderr, flush=True)
        if yes or e.seconds <= CONFIRM_ABOVE_S:
            return
        over = (f"sweep {e.sweep}: the estimate, {fmt.wall(e.seconds)} for {fmt.plural(e.points, 'point')} "
                f"({fmt.wall(e.seconds_per_point)} a point measured on its first {fmt.count(e.measured)}"
                f"{f', over {e.workers} workers' if e.workers > 1 else ''}), is over the "
                f"{fmt.wall(CONFIRM_ABOVE_S)} a sweep runs without asking")
        keep = ("the points finished so far are saved in --out, and a rerun reuses them; sweep fewer points (a "
                "random or optuna search with `points`), or use more --workers or --dask")
        if not sys.stdin.isatty():
            raise SweepError(f"{over}; stdin is not a terminal to ask on, so it stops here: rerun with --yes to "
                             f"go ahead; {keep}")
        print(f"{over}. Go on? [y/N] ", end="", file=sys.stderr, flush=True)
        answer = sys.stdin.readline().strip().lower()
        if answer not in ("y", "yes"):
            raise SweepError(f"{over}; stopped at the prompt (answer {answer[:20]!r}): rerun with --yes to go ahead "
                             f"without asking; {keep}")

    return confirm


def cmd_sweep(args: argparse.Namespace) -> int:
    from accelsim.dse.runner import run_sweep

    # the runner draws its own bar of points (M/N, elapsed, ETA) on stderr, only where that is a terminal
    run = run_sweep(args.spec, out=args.out, workers=args.workers, dask=args.dask, progress=progress.enabled(),
                    plots=not args.no_plots, confirm=confirm_estimate(args.yes))
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
    p.add_argument("--yes", action="store_true",
                   help=f"go on when the estimate (printed once the first points are timed) is over "
                        f"{fmt.wall(CONFIRM_ABOVE_S)}; without it such a sweep asks, or stops where stdin is not "
                        f"a terminal")
    p.set_defaults(fn=cmd_sweep)
