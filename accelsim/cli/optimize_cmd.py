"""CLI command `optimize`: rewrite a model's step with graph passes (or search them: `auto`) and print
each rewrite's effect on the compiled makespan, the bytes moved and the peak memory on the hardware."""
from __future__ import annotations

import argparse
import time

from rich.table import Table

from accelsim import fmt
from accelsim.cli.common import (STEP_RULE, add_hw_args, add_json_arg, add_limit_args, add_model_args, limits_from,
                                 load_hw_arg, out_console, step_graph, write_json)
from accelsim.cli.progress import phase
from accelsim.cli.sched_cmds import add_optimize_args, add_parallel_args, check_chips, optimize_step
from accelsim.cli.step_flags import step_options
from accelsim.pass_search.score import Score, StepEffect, step_effects
from accelsim.passes.table import AUTO


MEASURES = (("makespan", "makespan_cycles", "cycles"), ("bytes moved", "moved_bytes", "B"),
            ("peak memory", "peak_bytes", "B"))
"""What each rewrite's effect is shown on: (label, Score attribute, unit)."""


def _pct(before: Score | None, after: Score, attr: str) -> str:
    """The change of `attr` from `before` to `after` in percent ("" without a before)."""
    if before is None:
        return ""
    return fmt.change(getattr(before, attr), getattr(after, attr))


def _totals(score: Score, base: Score | None = None) -> str:
    """Makespan, bytes moved and peak memory of `score`, each with its change from `base` if given."""
    parts = []
    for label, attr, unit in MEASURES:
        change = _pct(base, score, attr)
        parts.append(f"{label} {fmt.count(getattr(score, attr))} {unit}" + (f" ({change})" if change else ""))
    return ", ".join(parts)


def effects_table(title: str, baseline: Score, effects: tuple[StepEffect, ...]) -> Table:
    """The unoptimized step, then one row per applied pass with its change from the step before it."""
    table = Table(title=title)
    table.add_column("step")
    table.add_column("rewrites", justify="right")
    for label, _, unit in MEASURES:
        table.add_column(f"{label} ({unit})", justify="right")
        table.add_column("change", justify="right")
    rows = [("unoptimized", "", None, baseline)] + [
        (f"{k}. {e.step.label}", str(e.rewrites), e.before, e.after) for k, e in enumerate(effects, 1)]
    for label, rewrites, before, after in rows:
        if after is None:
            table.add_row(label, rewrites, "did not compile", *[""] * (2 * len(MEASURES) - 1))
            continue
        cells = [c for _, attr, _ in MEASURES for c in (fmt.count(getattr(after, attr)), _pct(before, after, attr))]
        table.add_row(label, rewrites, *cells)
    return table


def cmd_optimize(args: argparse.Namespace) -> int:
    hw = load_hw_arg(args)
    graph = step_graph(args)
    note = check_chips(hw, args)
    training = not args.inference
    limits = limits_from(args)
    options = step_options(args)
    console = out_console()
    console.print(f"optimize the {'training step' if training else 'inference'} of {graph.name} on {hw.name} "
                  f"({fmt.plural(options.microbatches, 'micro-batch', 'micro-batches')}, "
                  f"{fmt.plural(options.data_parallel, 'replica')}, {fmt.plural(options.pipeline_stages, 'stage')}) "
                  f"with {args.optimize.strip() or 'no passes'}")
    if note:
        console.print(f"  note: {note}")
    start = time.perf_counter()
    out, log = optimize_step(graph, hw, args, limits)
    search = log.search if log is not None else None
    if search is not None:  # every candidate on the chosen path was compiled by the search
        baseline, effects = search.baseline, search.steps
    else:
        with phase("compiling the step before and after each rewrite"):
            baseline, effects = step_effects(graph, log.applied if log is not None else (), hw, options, limits)
    seconds = time.perf_counter() - start
    after = effects[-1].after if effects else baseline
    console.print(f"  numeric check: {log.check if log is not None else 'none (no passes)'}")
    if search is not None:
        console.print(f"  search: {search.headline()}")
        console.print(f"  best rule-based pipeline: {search.best_pipeline.describe()}, "
                      f"{fmt.cycles(search.best_pipeline.score.makespan_cycles)}")
    console.print(effects_table(f"rewrites of {graph.name} and their effect on {hw.name}", baseline, effects))
    for r in log.records if log is not None else ():
        more = f"; and {len(r.rewrites) - 3} more" if len(r.rewrites) > 3 else ""
        console.print(f"  {r.summary()}" + ("".join(f"\n    {line}" for line in r.rewrites[:3]) + more
                                             if r.status == "applied" else ""))
    console.print(f"  before: {_totals(baseline)}")
    console.print(f"  after:  {_totals(after, baseline)}")
    console.print(f"  passes applied: {', '.join(p.label for p in out.passes) or 'none'} (in {fmt.wall(seconds)})")
    for line in search.notes() if search is not None else ():
        console.print(f"  note: {line}")
    write_json(args.json, {
        "graph": graph.name, "hw": hw.name, "training": training, "optimize": args.optimize,
        "check": log.check if log is not None else None,
        "applied": [{"pass": p.name, "only": list(p.only) if p.only is not None else None} for p in out.passes],
        "before": baseline.to_json(), "after": after.to_json(), "steps": [e.to_json() for e in effects],
        "records": [r.summary() for r in (log.records if log is not None else ())],
        "search": search.to_json() if search is not None else None, "seconds": seconds})
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    text = ("rewrite a step with graph passes (or search them: auto) and show each rewrite's effect on makespan, "
            "bytes moved and peak memory")
    p = sub.add_parser("optimize", help=text, description=f"{text[0].upper()}{text[1:]}. {STEP_RULE}")
    add_hw_args(p)
    add_model_args(p)
    add_parallel_args(p)
    add_optimize_args(p, default=AUTO)
    add_json_arg(p, "the rewrites and their effects")
    add_limit_args(p)
    p.set_defaults(fn=cmd_optimize)
