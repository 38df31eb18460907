"""CLI commands on schedules: compile (write one), run (compile, simulate, plot), simulate (replay one),
check (execute one on real numbers); and the step options `accelsim optimize` shares with them."""
from __future__ import annotations

import argparse
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from rich.console import Console
from rich.table import Table

from accelsim.cli.common import (add_hw_set_arg, add_json_arg, add_limit_args, add_model_args, add_optimizer_args,
                                 add_remat_arg, apply_remat, check_file_target, exact_seconds_arg, finite_float, format_si, forward_model,
                                 limits_from, path_arg, positive_int, write_json, write_problem)
from accelsim.errors import AccelsimError
from accelsim.graph.ir import Graph
from accelsim.hw import load_hw
from accelsim.hw.overrides import parse_assignments
from accelsim.hw.spec import HwSpec
from accelsim.kernels.registry import BACKENDS, load_backend
from accelsim.limits import ZERO_STAGES, Limits, check_eval_size, check_step_size
from accelsim.passes import PASSES, OptimizeLog, inference_graph, optimize_with_log
from accelsim.passes.auto import DEFAULT_BUDGET, SearchOptions
from accelsim.passes.score import CompileOptions
from accelsim.passes.table import AUTO
from accelsim.report import run_summary
from accelsim.schedule import compile as compile_schedule
from accelsim.schedule.exact import MAX_EXACT_TASKS
from accelsim.schedule.exact_step import DEFAULT_EXACT_SECONDS
from accelsim.schedule.plan import Schedule
from accelsim.training import training_graph

DEFAULT_HW = "groq_like"


def step_graph(args: argparse.Namespace) -> Graph:
    """The training step (default, rematerialized by --remat) or the inference graph of --model."""
    fwd = forward_model(args)
    if args.inference:
        return apply_remat(inference_graph(fwd), args)  # refuses --remat
    return apply_remat(training_graph(fwd, optimizer=args.optimizer, lr=args.lr), args)


def compile_options(args: argparse.Namespace, limits: Limits) -> CompileOptions:
    """How the step of --microbatches, --data-parallel, --pipeline-stages and --split is compiled."""
    return CompileOptions(microbatches=args.microbatches, data_parallel=args.data_parallel,
                          pipeline_stages=args.pipeline_stages, split=SPLIT_CHOICES[args.split], limits=limits,
                          zero=args.zero)


@contextmanager
def search_progress(budget: int) -> Iterator[Callable[[int, int], None] | None]:
    """A transient progress bar on stderr for the auto search (compiles of the budget); None where stderr
    is no terminal (a log file gets no bar)."""
    console = Console(stderr=True)
    if not console.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("optimize auto: compiling candidates"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=True) as bar:
        task = bar.add_task("search", total=budget)
        yield lambda done, budget: bar.update(task, completed=done, total=max(done, budget))


def optimize_step(graph: Graph, hw: HwSpec, args: argparse.Namespace,
                  limits: Limits) -> tuple[Graph, OptimizeLog | None]:
    """`graph` rewritten as --optimize says (None: no log when it is empty); auto compiles its candidates
    with the step's own options, within --budget and --time-limit."""
    auto = args.optimize.strip() == AUTO
    if not auto and (args.budget is not None or args.time_limit is not None):
        raise AccelsimError(f"--budget and --time-limit bound the search of --optimize {AUTO}; got --optimize "
                            f"{args.optimize!r}")
    if not args.optimize.strip():
        return graph, None
    if not auto:
        return optimize_with_log(graph, args.optimize, hw=hw)
    search = SearchOptions(budget=args.budget or DEFAULT_BUDGET, time_limit_s=args.time_limit,
                           step=compile_options(args, limits))
    with search_progress(search.budget) as progress:
        return optimize_with_log(graph, AUTO, hw=hw, search=search, progress=progress)


def _compile(args: argparse.Namespace, checking: bool = False):
    """Load --hw, build the step (rewritten by --optimize) and compile it under --max-tasks; `checking`
    also loads --backend and sizes the check's tensors (every micro-batch and replica is evaluated)
    under --max-bytes first."""
    hw = load_hw(args.hw or DEFAULT_HW, overrides=parse_assignments(args.hw_set))
    limits = limits_from(args)
    graph, log = optimize_step(step_graph(args), hw, args, limits)
    if log is not None:
        print("\n".join(f"optimize: {line}" for line in log.summary().splitlines()))
    # cheap refusals first (milliseconds): the step's size, then the check's tensors, then the backend,
    # whose first load compiles kernels for seconds (an unusable one, cuda without a GPU, is refused here)
    check_step_size(graph, args.microbatches, args.data_parallel, args.pipeline_stages, limits)
    if checking:
        check_eval_size(graph, samples=args.microbatches * args.data_parallel, limits=limits, what="checking")
        load_backend(args.backend)
    start = time.perf_counter()
    schedule = compile_schedule(graph, hw, microbatches=args.microbatches, data_parallel=args.data_parallel,
                                pipeline_stages=args.pipeline_stages, limits=limits,
                                exact=False if args.exact is None else args.exact, split=SPLIT_CHOICES[args.split],
                                zero=args.zero)
    return hw, graph, schedule, time.perf_counter() - start


def exact_line(schedule: Schedule) -> str | None:
    """What the exact mode proved, in one line ("exact: optimal (proved) ..."); None without it."""
    e = schedule.exact
    if e is None:
        return None
    what = "optimal (proved)" if e.status == "optimal" else f"within {100 * e.gap:.2f}% of optimal"
    return (f"exact: {what}, makespan {schedule.makespan_cycles} cycles (bound {e.bound_cycles}; list schedule "
            f"{e.list_makespan_cycles}; CP-SAT budget {e.time_limit_s:g} s)")


def efficiency_lines(s: dict) -> list[str]:
    """Energy, power and area of a run summary (report.efficiency), for the lines `run` and `simulate` print."""
    lines = []
    if s["energy_j"] is not None:
        lines.append(f"energy      {format_si(s['energy_j'], 'J')} per step, {format_si(s['energy_per_sample_j'], 'J')} "
                     f"per sample; power {format_si(s['power_w'], 'W')} (dynamic only); "
                     f"{format_si(s['tops_per_w'] * 1e12, 'OPS/W')} over {format_si(s['ops_per_step'], 'op')} per step")
    if s["area_mm2"] is not None:
        chips = ", ".join(f"{name} {area:.4g} mm^2" for name, area in s["chip_area_mm2"].items())
        lines.append(f"area        {s['area_mm2']:.4g} mm^2 modelled for the machine (per chip: {chips}; datapaths "
                     f"and SRAM only); {format_si(s['throughput_per_mm2'], 'samples/s')} per mm^2")
    return lines


def cmd_compile(args: argparse.Namespace) -> int:
    from accelsim.schedule.io import save_schedule

    check_file_target(args.output, "-o")
    hw, graph, schedule, seconds = _compile(args)
    out = args.output or f"schedules/{graph.name}_{hw.name}.json"
    save_schedule(schedule, out)
    print(f"wrote {out}: {len(schedule.tasks)} tasks, makespan {schedule.makespan_cycles} cycles, "
          f"makespan/bound {schedule.bound_ratio:.3f} (compiled and validated in {seconds:.2f} s)")
    if schedule.exact is not None:
        print(exact_line(schedule))
    return 0


def _simulate_and_plot(schedule, hw, args: argparse.Namespace, console: Console) -> dict:
    """Simulate (static and, with --dynamic, the work-queue runtime too) and write the plots. The
    callers have validated the schedule (compile, or api.resolve), so the engine runs it directly."""
    from accelsim.sim import simulate
    from accelsim.viz import plot_memory, plot_timeline, plot_utilization, write_perfetto

    modes = ["static"] + (["dynamic"] if args.dynamic else [])
    model = schedule.source.model if schedule.source is not None else schedule.graph_name
    out = Path(args.out or f"plots/{model}_{hw.name}")
    report = {}
    for mode in modes:
        start = time.perf_counter()
        result = simulate(schedule, hw, mode=mode)
        seconds = time.perf_counter() - start
        suffix = "" if mode == "static" else "_dynamic"
        try:
            plot_timeline(result, out / f"timeline{suffix}.png")
            plot_utilization(result, out / f"utilization{suffix}.png")
            plot_memory(result, out / f"memory{suffix}.png")
            write_perfetto(result, out / f"trace{suffix}.json")
        except OSError as e:
            raise AccelsimError(f"cannot write plots to {out}: {write_problem(out, e)}") from None
        stalls = result.stall_cycles()
        console.print(f"  simulated ({mode}): makespan {result.makespan_cycles} cycles vs compiled "
                      f"{schedule.makespan_cycles} ({result.makespan_cycles / max(schedule.makespan_cycles, 1):.3f}x); "
                      f"stalls " + ", ".join(f"{k} {v}" for k, v in stalls.items()) +
                      f"; {result.events} events in {seconds:.2f} s")
        report[mode] = result.summary()
    console.print(f"  wrote timeline, utilization, memory plots and Perfetto trace to {out}/")
    return report


def cmd_run(args: argparse.Namespace) -> int:
    hw, graph, schedule, seconds = _compile(args, checking=args.check)
    s = run_summary(schedule, hw)
    console = Console(width=120, highlight=False)
    o = schedule.options
    console.print(f"{'training step' if s['training'] else 'inference'} of {graph.name} on {hw.name}: "
                  f"{s['samples_per_step']} samples/step, {o.microbatches} micro-batch(es), "
                  f"{o.data_parallel} replica(s), {o.pipeline_stages} stage(s)"
                  f"{f', {o.tensor_parallel} tensor-parallel ranks' if o.tensor_parallel > 1 else ''}"
                  f"{f', ZeRO stage {o.zero}' if o.zero else ''}"
                  f"{', tensor nodes split over unit instances' if o.split else ''}; {s['tasks']} tasks "
                  f"compiled in {seconds:.2f} s")
    console.print(f"  makespan    {schedule.makespan_cycles} cycles = {format_si(s['makespan_s'], 's')}")
    console.print(f"  throughput  {s['throughput_samples_per_s']:.6g} samples/s")
    console.print(f"  latency     {format_si(s['latency_s'], 's')} per input")
    for line in efficiency_lines(s):
        console.print(f"  {line}")
    console.print(f"  bound       {s['bound_cycles']} cycles (critical path {s['critical_path_cycles']}, "
                  f"busiest resource {s['resource_bound_unit']} {s['resource_bound_cycles']}); "
                  f"makespan/bound {s['bound_ratio']:.3f}")
    if schedule.exact is not None:
        console.print(f"  {exact_line(schedule)}")
        s["exact"] = schedule.exact.model_dump(mode="json")
    if s["allreduce_cycles"] or s["transfer_cycles"]:
        console.print(f"  communication: all-reduce {s['allreduce_cycles']} cycles, transfers "
                      f"{s['transfer_cycles']} cycles (summed over tasks)")
    table = Table(title="utilization and memory")
    table.add_column("unit / memory")
    table.add_column("value", justify="right")
    for unit, frac in s["utilization"].items():
        table.add_row(unit, f"{100 * frac:.1f} % busy")
    for mem, peak in s["peak_memory_bytes"].items():
        cap = s["memory_capacity_bytes"][mem]
        table.add_row(mem, f"peak {peak / 2**20:.3f} MiB of {cap / 2**20:.4g} MiB")
    console.print(table)
    if not args.no_sim:
        s["simulation"] = _simulate_and_plot(schedule, hw, args, console)
    if args.check:
        s["check"] = _check(schedule, graph, hw, args.backend, console)
    write_json(args.json, s)
    return 0 if not args.check or s["check"]["passed"] else 1


def _check(schedule, graph: Graph, hw, backend: str, console: Console) -> dict:
    from accelsim.api import check
    from accelsim.execute.check import SLACK

    start = time.perf_counter()
    report = check(schedule, backend=backend, graph=graph, hw=hw)
    seconds = time.perf_counter() - start
    slack = "" if graph.dtype == "float64" else f", or {SLACK:g} x numpy's own {graph.dtype} error"
    table = Table(title=f"check: {backend} kernels through the schedule's memory vs a float64 numpy "
                        f"evaluation (tolerance per tensor: {report.tolerance:g} relative{slack})")
    for col in ("tensor", "max abs err", "max rel err", f"numpy {graph.dtype}", "tolerance", "ok"):
        table.add_column(col, justify="left" if col == "tensor" else "right")
    for e in report.entries:
        table.add_row(e.name, f"{e.max_abs_err:.3g}", f"{e.max_rel_err:.3g}", f"{e.reference_rel_err:.3g}",
                      f"{e.tolerance:.3g}", "yes" if e.passed else "NO")
    console.print(table)
    for c in report.corruptions:
        console.print(f"  corrupted: {c}")
    for f in report.failures:
        console.print(f"  failed: {f}")
    console.print(f"  check {'passed' if report.passed else 'FAILED'} in {seconds:.2f} s")
    return report.to_json()


def cmd_check(args: argparse.Namespace) -> int:
    if args.schedule is not None:
        if args.optimize.strip():
            raise AccelsimError(f"--optimize rewrites a step before compiling it; {args.schedule} is compiled "
                                "already (its source records the passes that rewrote its graph)")
        if args.remat is not None:
            raise AccelsimError(f"--remat rewrites a step before compiling it; {args.schedule} is compiled already "
                                "(its source records any rematerialization)")
        schedule, hw, graph = _saved(args)
        check_eval_size(graph, samples=schedule.options.microbatches * schedule.options.data_parallel,
                        limits=limits_from(args), what="checking")
        load_backend(args.backend)
    else:
        hw, graph, schedule, _ = _compile(args, checking=True)
    console = Console(width=140, highlight=False)
    result = _check(schedule, graph, hw, args.backend, console)
    write_json(args.json, result)
    return 0 if result["passed"] else 1


def _saved(args: argparse.Namespace) -> tuple[Schedule, HwSpec, Graph]:
    """The schedule file args.schedule, its hardware (--hw, else the one it names, with its overrides) and
    its graph rebuilt from its source, the schedule validated against both."""
    from accelsim.api import resolve
    from accelsim.schedule.io import read_schedule

    given_hw = load_hw(args.hw, overrides=parse_assignments(args.hw_set)) if args.hw is not None else None
    schedule = read_schedule(args.schedule)  # parsed once; its messages name the file
    hw = given_hw or load_hw(schedule.hw_name, overrides=schedule.hw_overrides)
    if hw.name != schedule.hw_name:
        raise AccelsimError(f"{args.schedule} was compiled for {schedule.hw_name}, not {hw.name}")
    try:  # validated once: itself, against the hardware (its hash too) and against its rebuilt graph
        hw, graph = resolve(schedule, hw)
    except AccelsimError as e:
        raise AccelsimError(f"{args.schedule}: {e}") from None
    return schedule, hw, graph


def cmd_simulate(args: argparse.Namespace) -> int:
    schedule, hw, _ = _saved(args)
    console = Console(width=120, highlight=False)
    console.print(f"{args.schedule}: {schedule.graph_name} on {hw.name}, {len(schedule.tasks)} tasks")
    for line in efficiency_lines(run_summary(schedule, hw)):
        console.print(f"  {line}")
    write_json(args.json, _simulate_and_plot(schedule, hw, args, console))
    return 0


SPLIT_CHOICES = {"auto": None, "on": True, "off": False}


def add_parallel_args(p: argparse.ArgumentParser) -> None:
    """--microbatches, --data-parallel, --pipeline-stages and --split: how one step is compiled."""
    p.add_argument("--microbatches", type=positive_int, default=1, help="inputs in flight (pipeline parallelism)")
    p.add_argument("--data-parallel", type=positive_int, default=1, help="replicas (data parallelism)")
    p.add_argument("--pipeline-stages", type=positive_int, default=1, help="graph partitions on separate chips")
    p.add_argument("--tensor-parallel", type=positive_int, default=1, metavar="T",
                   help="build the model Megatron-LM's way over T ranks, one chip each (gpt2, transformer_block, "
                        "resnet_block); d x p x T chips in all")
    p.add_argument("--zero", type=int, choices=ZERO_STAGES, default=0,
                   help="ZeRO stage over the data-parallel replicas: 0 none (default), 1 optimizer state, "
                        "2 + gradients, 3 + parameters sharded")
    p.add_argument("--split", choices=tuple(SPLIT_CHOICES), default="auto",
                   help="cut matmuls and convolutions over the instances of their unit where the parts finish "
                        "sooner: 'on', 'off', or 'auto' (default): schedule the step both ways and keep the shorter")


def add_optimize_args(p: argparse.ArgumentParser, default: str = "") -> None:
    """--optimize PASSES|auto (alias --passes), --budget and --time-limit. (argparse takes a prefix of an
    option for the option: where --optimizer is defined too, the exact --optimize wins.)"""
    p.add_argument("--optimize", "--passes", dest="optimize", metavar="PASSES|auto", default=default,
                   help=f"rewrite the step first with these graph passes, comma-separated, each verified "
                        f"numerically (known: {', '.join(PASSES)}), or '{AUTO}': search sequences of them, and "
                        f"where each applies, for the shortest compiled makespan of this step on --hw"
                        + (f" (default {default})" if default else "") + "; --passes is an older name")
    p.add_argument("--budget", type=positive_int, metavar="N",
                   help=f"compiles the {AUTO} search may spend (default {DEFAULT_BUDGET}; the unoptimized step "
                        "and the rule-based pipelines are always compiled)")
    p.add_argument("--time-limit", type=positive_seconds, metavar="SECONDS",
                   help=f"also stop the {AUTO} search after SECONDS of wall time (the result may then depend on "
                        "the machine's speed; the log says when it did)")


def positive_seconds(text: str) -> float:
    """Seconds: a finite number above 0."""
    value = finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected seconds above 0, got {text!r}")
    return value


def _add_step_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hw", type=path_arg,
                   help=f"hardware YAML or bundled name (default {DEFAULT_HW}; for a saved schedule, the one it "
                        "was compiled for)")
    add_hw_set_arg(p)
    add_model_args(p, batch_help="micro-batch size")
    p.add_argument("--inference", action="store_true", help="schedule inference instead of a training step")
    add_optimizer_args(p)
    add_parallel_args(p)
    add_optimize_args(p)
    add_remat_arg(p)
    p.add_argument("--exact", nargs="?", const=DEFAULT_EXACT_SECONDS, type=exact_seconds_arg, metavar="SECONDS",
                   help=f"also solve the step with OR-Tools CP-SAT (pip install accelsim[exact]) seeded with the "
                        f"list schedule, for SECONDS of CP-SAT's deterministic time (default "
                        f"{DEFAULT_EXACT_SECONDS:g}; reproducible, often 2-7x that in wall time); prints the "
                        f"proved bound and gap. Steps above {MAX_EXACT_TASKS:,} tasks are refused")


def _add_sim_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dynamic", action="store_true", help="also run seed 001's dynamic work-queue runtime")
    p.add_argument("--out", metavar="DIR", type=path_arg,
                   help="directory the plots and the trace go to (created; default plots/<model>_<hw>/)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="compile a training step (or inference), simulate it, plot it")
    _add_step_args(p)
    _add_sim_args(p)
    p.add_argument("--no-sim", action="store_true", help="compile and summarize only")
    p.add_argument("--check", action="store_true", help="also execute the schedule on real numbers and check them")
    p.add_argument("--backend", choices=BACKENDS, default="numba", help="kernels for --check")
    add_json_arg(p, "the summary")
    add_limit_args(p)
    p.set_defaults(fn=cmd_run)
    p = sub.add_parser("check", help="execute a compiled step with real kernels and compare with the reference")
    p.add_argument("schedule", nargs="?", type=path_arg,
                   help="a schedule JSON written by `accelsim compile` to check (default: compile the step of "
                        "--model and the step options; a saved schedule brings its own)")
    _add_step_args(p)
    p.add_argument("--backend", choices=BACKENDS, default="numba")
    add_json_arg(p, "the report")
    add_limit_args(p)
    p.set_defaults(fn=cmd_check)
    p = sub.add_parser("simulate", help="replay a saved schedule (static) or its graph's work queue (--dynamic)")
    p.add_argument("schedule", type=path_arg, help="a schedule JSON written by `accelsim compile`")
    p.add_argument("--hw", type=path_arg, help="hardware YAML or bundled name (default: the one it was compiled for)")
    add_hw_set_arg(p)
    _add_sim_args(p)
    add_json_arg(p, "the simulation summary")
    p.set_defaults(fn=cmd_simulate)
    p = sub.add_parser("compile", help="compile a static schedule and write it as JSON")
    _add_step_args(p)
    p.add_argument("-o", "--output", type=path_arg, help="schedule path (default schedules/<graph>_<hw>.json)")
    add_limit_args(p)
    p.set_defaults(fn=cmd_compile)
