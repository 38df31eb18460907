"""CLI commands on schedules: compile (write one), run (compile, simulate, plot), simulate (replay one),
check (execute one on real numbers); and the step options `accelsim optimize` shares with them."""
from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import NamedTuple

from rich.console import Console

from accelsim import fmt
from accelsim.cli.common import (DEFAULT_HW, STEP_RULE, add_hw_args, add_json_arg, add_limit_args, add_model_args,
                                 check_file_target, finite_float, is_model_file, limits_from,
                                 load_hw_arg, model_label, out_console, path_arg, positive_int, step_graph, step_name,
                                 write_json, write_problem, zoo_options)
from accelsim.cli.progress import counter, phase
from accelsim.cli.stage_step import print_stage_step
from accelsim.cli.layer_table import energy_table, time_table
from accelsim.cli.summary import exact_line, print_check, print_summary, step_words
from accelsim.errors import AccelsimError
from accelsim.graph.ir import Graph
from accelsim.hw import load_hw
from accelsim.hw.overrides import parse_assignments
from accelsim.hw.spec import HwSpec
from accelsim.kernels.registry import BACKENDS, load_backend
from accelsim.fusion_groups import group_of_nodes
from accelsim.layer_names import layer_names
from accelsim.per_layer import LayerReport, build_layer_report
from accelsim.per_layer_io import check_report_path, write_layer_report
from accelsim.limits import Limits, check_eval_size, check_step_size
from accelsim.passes import PASSES, OptimizeLog
from accelsim.pass_search import optimize_with_log
from accelsim.pass_search.auto import DEFAULT_BUDGET, SearchOptions
from accelsim.cli.step_flags import PARALLEL, add_step_flags, step_options
from accelsim.passes.table import AUTO
from accelsim.report import run_summary
from accelsim.compiler import compile as compile_schedule
from accelsim.compiler.fusion import step_graph as fused_step_graph
from accelsim.compiler.hierarchy.layer_templates import Recipe, recipe
from accelsim.compiler.hierarchy.step import StageStep, compile_recipe_step, granularity_and_tasks
from accelsim.compiler.planning.partition_report import partition_report
from accelsim.schedule.levels import chip_list
from accelsim.schedule.mapping_file import write_mapping_file
from accelsim.schedule.plan import Schedule
from accelsim.summary import RunSummary

def check_chips(hw: HwSpec, args: argparse.Namespace) -> str | None:
    """Refuse --data-parallel x --pipeline-stages x --tensor-parallel above the chips of `hw` in one
    paragraph saying what fits. Plain data parallelism (no stages, ranks or ZeRO) may put several replicas
    on one chip, where they share its units (seed 001's data-parallel timeline on one chip): that is
    allowed, and the returned note says so. A step on fewer chips than `hw` has gets a note naming the
    idle chips and the flags that spread it. None when every chip is used by one replica, stage or rank."""
    d, p, t, zero = args.data_parallel, args.pipeline_stages, args.tensor_parallel, args.zero
    n = hw.n_chips
    has = f"{hw.name} has {fmt.plural(n, 'chip')}"
    flags = [f"--pipeline-stages {p}"] * (p > 1) + [f"--tensor-parallel {t}"] * (t > 1)
    if p * t > n:
        fits = (f"--tensor-parallel at most {n}" if t > n else
                f"at most --pipeline-stages {n // t}" + (f" with --tensor-parallel {t}" if t > 1 else ""))
        raise AccelsimError(f"{' x '.join(flags)} needs {p * t} chips (one per stage{' and rank' if t > 1 else ''}), "
                            f"but {has}: use {fits} on it, or hardware with at least {p * t} chips")
    if d * p * t > n and (p > 1 or t > 1 or zero):
        why = ("ZeRO shards state over the replicas' chips, so each replica needs its own" if zero else
               "each replica's stages and ranks need chips of their own")
        fits = f"at most --data-parallel {n // (p * t)}" + (" with these stages and ranks" if p * t > 1 else "")
        raise AccelsimError(f"{' x '.join([f'--data-parallel {d}'] + flags)} needs {d * p * t} chips ({why}), but "
                            f"{has}: use {fits}" + (", or --zero 0 to let replicas share chips" if zero and p * t == 1
                                                   else ""))
    if d > n:
        most = math.ceil(d / n)
        return (f"{d} replicas on {fmt.plural(n, 'chip')}: replicas share chips (up to {most} on one) and take "
                f"turns on its units; --data-parallel {n} or less gives each replica a chip of its own")
    if d * p * t < n:
        used = d * p * t
        example = f", e.g. --data-parallel {n // (p * t)}" if n // (p * t) > d else ""
        return (f"{n - used} of the {n} chips of {hw.name} {'sits' if n - used == 1 else 'sit'} idle: the step uses {fmt.plural(used, 'chip')} (one "
                f"per replica x stage x rank); --data-parallel, --pipeline-stages and --tensor-parallel spread it "
                f"over more{example}")
    return None


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
        with phase(f"optimizing: {args.optimize.strip()}"):
            return optimize_with_log(graph, args.optimize, hw=hw)
    search = SearchOptions(budget=args.budget or DEFAULT_BUDGET, time_limit_s=args.time_limit,
                           step=step_options(args), limits=limits)
    with counter("optimizing (auto): compiling candidates", search.budget) as progress:
        return optimize_with_log(graph, AUTO, hw=hw, search=search, progress=progress)


class Compiled(NamedTuple):
    hw: HwSpec
    graph: Graph | None  # None for a step measured from layer templates (stage_recipe), never built whole
    schedule: Schedule | StageStep  # a StageStep at stage granularity (--granularity stage, or auto on a large step)
    seconds: float  # wall time of the compile
    note: str | None  # check_chips's note on replicas sharing chips or chips left idle


def stage_recipe(args: argparse.Namespace) -> Recipe | None:
    """The recipe of --model's training step where --granularity stage measures it from layer templates
    (compiler/hierarchy/layer_templates.py) without building it: a zoo model whose layers repeat, trained,
    with no --optimize rewrite and a layer-local --remat; None otherwise."""
    if (args.granularity != "stage" or getattr(args, "inference", False) or is_model_file(args.model)
            or getattr(args, "optimize", "").strip()):
        return None
    remat = getattr(args, "remat", None)
    return recipe(args.model, zoo_options(args), {"optimizer": args.optimizer, "lr": args.lr},
                  None if remat is None else remat.label)


def _compile(args: argparse.Namespace, checking: bool = False) -> Compiled:
    """Load --hw, build the step (under the builder's evaluation limit only when `checking`: compiling and
    simulating compute no tensor), check its chips, rewrite it by --optimize and compile it under
    --max-tasks; `checking` also loads --backend and sizes the check's tensors (every micro-batch and
    replica is evaluated) under --max-bytes first."""
    hw = load_hw_arg(args)
    templates = None if checking else stage_recipe(args)
    if templates is not None:  # the step is measured from a few of its layers: never built whole
        note, limits = check_chips(hw, args), limits_from(args)
        start = time.perf_counter()
        with phase("compiling the step from layer templates"):
            schedule = compile_recipe_step(templates, hw, step_options(args), limits)
        return Compiled(hw, None, schedule, time.perf_counter() - start, note)
    step = step_graph(args, evaluates=checking)  # first: a model's own option errors (heads that --tensor-parallel must divide) lead
    note = check_chips(hw, args)
    limits = limits_from(args)
    graph, log = optimize_step(step, hw, args, limits)
    if log is not None:
        print("\n".join(f"optimize: {line}" for line in log.summary().splitlines()))
    # cheap refusals first (milliseconds): the step's size, then the check's tensors, then the backend,
    # whose first load compiles kernels for seconds (an unusable one, cuda without a GPU, is refused here)
    granularity, tasks = granularity_and_tasks(graph, step_options(args), len(chip_list(hw)), limits)
    stage = granularity == "stage"
    if stage and checking:
        raise AccelsimError("--check executes a task-level schedule; a step at stage granularity has none: use "
                            "--granularity task (a smaller step if auto chose stage)")
    if not stage:  # at stage granularity compile bounds the one micro-batch it schedules
        check_step_size(graph, args.microbatches, args.data_parallel, args.pipeline_stages, limits, args.zero,
                        tasks=tasks)
    if checking:
        check_eval_size(graph, samples=args.microbatches * args.data_parallel, limits=limits, what="checking")
        with phase(f"loading the {args.backend} kernels"):
            load_backend(args.backend)
    exact = "" if args.exact is None else f" + CP-SAT for {fmt.number(args.exact)} s"
    start = time.perf_counter()
    with phase(f"compiling the schedule{exact}"):
        schedule = compile_schedule(graph, hw, step_options(args), limits=limits)
    seconds = time.perf_counter() - start
    if isinstance(schedule, Schedule):  # a fused step is the schedule of the fused graph
        graph, groups = fused_step_graph(graph, schedule)
        for line in groups:
            print(f"fusion: {line}")
    return Compiled(hw, graph, schedule, seconds, note)


def _step_header(s: RunSummary, c: Compiled) -> str:
    o = c.schedule.options
    parts = step_words(o, s.samples_per_step)
    parts += ["tensor nodes split over unit instances"] * bool(o.split)
    # the options that change the step but had no word here: a header must say what was simulated
    parts += [f"pipeline schedule {o.pipeline_schedule}"] * (o.pipeline_schedule is not None)
    parts += [f"at most {o.max_in_flight} in flight"] * (o.max_in_flight is not None)
    parts += [f"{o.precision} precision"] * (o.precision is not None)
    parts += [f"remat {o.remat}"] * (o.remat is not None)
    parts += [f"fusion {o.fusion}"] * (o.fusion != "off")
    parts += [f"gradients reduced {o.gradient_reduction}"] * (o.gradient_reduction != "overlap")
    return (f"{'training step' if s.training else 'inference'} of {c.graph.name} on {c.hw.name}: "
            f"{', '.join(parts)}; {fmt.count(s.tasks)} tasks compiled in {fmt.wall(c.seconds)}")


def default_schedule_path(args: argparse.Namespace, hw: HwSpec) -> Path:
    """Where `compile` writes without -o: schedules/<model>_<train|infer>_<hw>.json below the current
    directory (the names of the shipped schedules)."""
    return Path("schedules") / f"{model_label(args)}_{step_name(args)}_{hw.name}.json"


def _check_mapping_args(args: argparse.Namespace) -> None:
    """Before any work: --mapping-out's target, and --mapping's file (read and checked as a mapping file)."""
    check_file_target(args.mapping_out, "--mapping-out")
    if args.mapping is not None:
        step_options(args)


def _write_mappings(args: argparse.Namespace, schedule: Schedule | StageStep, console: Console | None = None) -> None:
    """--mapping-out: the schedule's mappings, as a file --mapping reads back (a stage-level step's where it was
    measured whole: layer templates' mappings name the nodes of a smaller graph than the step's)."""
    if args.mapping_out is None:
        return
    if isinstance(schedule, StageStep) and schedule.template_layers is not None:
        raise AccelsimError(f"--mapping-out {args.mapping_out}: this step was measured from layer templates, whose "
                            "mappings name the nodes of a smaller graph than the step's, so a file of them would not "
                            "apply to the step; use --granularity task")
    written = write_mapping_file(schedule.mappings, args.mapping_out)
    line = f"wrote the mappings of {fmt.plural(len(schedule.mappings), 'layer-unit pair')} to {written}"
    (console.print if console is not None else print)(line)


def cmd_compile(args: argparse.Namespace) -> int:
    from accelsim.schedule.io import save_schedule

    check_file_target(args.output, "-o")
    _check_mapping_args(args)
    c = _compile(args)
    if isinstance(c.schedule, StageStep):
        raise AccelsimError("compile writes a task-level schedule; a step at stage granularity has none: use "
                            "`accelsim run --granularity stage` for its figures, or --granularity task")
    out = args.output or str(default_schedule_path(args, c.hw))
    check_file_target(out, "-o")
    save_schedule(c.schedule, out)
    if c.note:
        print(f"note: {c.note}")
    print(f"wrote {out}: {fmt.count(len(c.schedule.tasks))} tasks, makespan {fmt.cycles(c.schedule.makespan_cycles)}, "
          f"makespan/bound {fmt.ratio(c.schedule.bound_ratio)} (compiled and validated in {fmt.wall(c.seconds)})")
    if c.schedule.exact is not None:
        print(exact_line(c.schedule))
    _write_mappings(args, c.schedule)
    return 0


def _simulate_and_plot(schedule, hw, args: argparse.Namespace, console: Console, graph: Graph | None = None,
                       static: list | None = None) -> dict:
    """Simulate (static and, with --dynamic, the work-queue runtime too) and write the plots, their bars and
    events named by `graph`'s layers (by op without it). The callers have validated the schedule (compile,
    or api.resolve), so the engine runs it directly. `static`: a list the static Result is appended to."""
    from accelsim.sim import simulate
    from accelsim.viz import plot_memory, plot_timeline, plot_utilization, write_perfetto

    modes = ["static"] + (["dynamic"] if args.dynamic else [])
    src = schedule.source
    model = (Path(src.model_file[0]).stem if src.model_file is not None else src.model) if src is not None \
        else schedule.graph_name
    out = Path(args.out or f"plots/{model}_{hw.name}")
    layers = None if graph is None else layer_names(graph)
    groups = None if graph is None else group_of_nodes(graph)
    report = {}
    for mode in modes:
        start = time.perf_counter()
        with phase(f"simulating ({mode})"):
            result = simulate(schedule, hw, mode=mode)
        seconds = time.perf_counter() - start
        suffix = "" if mode == "static" else "_dynamic"
        try:
            with phase(f"writing the {mode} plots and trace"):
                plot_timeline(result, out / f"timeline{suffix}.png", layers=layers)
                plot_utilization(result, out / f"utilization{suffix}.png")
                plot_memory(result, out / f"memory{suffix}.png")
                write_perfetto(result, out / f"trace{suffix}.json", layers=layers, groups=groups)
        except OSError as e:
            raise AccelsimError(f"cannot write plots to {out}: {write_problem(out, e)}") from None
        stalls = ", ".join(f"{k.replace('_', ' ')} {fmt.count(v)}" for k, v in result.stall_cycles().items())
        console.print(f"  simulated ({mode}): makespan {fmt.cycles(result.makespan_cycles)} vs compiled "
                      f"{fmt.count(schedule.makespan_cycles)} "
                      f"({fmt.factor(result.makespan_cycles / max(schedule.makespan_cycles, 1))}); stall cycles: "
                      f"{stalls}; {fmt.count(result.events)} events in {fmt.wall(seconds)}")
        report[mode] = result.summary()
        if mode == "static" and static is not None:
            static.append(result)
    console.print(f"  wrote timeline, utilization, memory plots and Perfetto trace to {out}/")
    return report


def cmd_run(args: argparse.Namespace) -> int:
    if args.report is not None:
        check_report_path(args.report)  # before any work
    _check_mapping_args(args)
    c = _compile(args, checking=args.check)
    console = out_console()
    if isinstance(c.schedule, StageStep):
        if args.report is not None:
            raise AccelsimError(f"--report {args.report}: a step at stage granularity has no tasks to report per "
                                "layer; use --granularity task (a smaller step if auto chose stage)")
        if args.dynamic:  # it was ignored: the stage-level figures printed as if they answered it
            raise AccelsimError("--dynamic runs a task-level schedule's tasks through a work queue; a step at "
                                "stage granularity has no tasks to run; use --granularity task (a smaller step if "
                                "auto chose stage)")
        print_stage_step(console, c.schedule, c.seconds)
        write_json(args.json, c.schedule.to_dict())
        _write_mappings(args, c.schedule, console)
        return 0
    s = run_summary(c.schedule, c.hw, c.graph)
    console.print(_step_header(s, c))
    if c.note:
        console.print(f"  note: {c.note}")
    print_summary(console, s, c.schedule)
    if c.schedule.options.pipeline_stages > 1:
        console.print(partition_report(c.graph, c.hw, c.schedule.options).text(), highlight=False, markup=False)
    payload = s.to_dict()  # the JSON: the summary's figures, then what running the step added
    if c.schedule.exact is not None:
        payload["exact"] = c.schedule.exact.model_dump(mode="json")
    static: list = []
    if not args.no_sim:
        payload["simulation"] = _simulate_and_plot(c.schedule, c.hw, args, console, c.graph, static)
    _print_layers(console, build_layer_report(c.schedule, c.hw, c.graph, static[0] if static else None),
                  args.report)
    _write_mappings(args, c.schedule, console)
    if args.check:
        payload["check"] = _check(c.schedule, c.graph, c.hw, args.backend, console, args.verbose)
    write_json(args.json, payload)
    return 0 if not args.check or payload["check"]["passed"] else 1


def _print_layers(console: Console, report: LayerReport, path: str | None) -> None:
    """The top layers by time and by energy; the whole report to `path` (.csv or .json) if given."""
    console.print(time_table(report))
    energy = energy_table(report)
    if energy is not None:
        console.print(energy)
    if path is not None:
        written = write_layer_report(report, path)
        console.print(f"  wrote the per-layer report ({fmt.plural(len(report.layers), 'layer')}) to {written}")


def _check(schedule, graph: Graph, hw, backend: str, console: Console, verbose: bool = False) -> dict:
    """Execute the step on real numbers and print the report (cli/summary.py: one summary line, the rows of
    the tensors out of tolerance, every row with `verbose`)."""
    from accelsim.api import check
    from accelsim.execute.check import SLACK, reference_format

    start = time.perf_counter()
    with phase(f"checking: executing the schedule with {backend} kernels"):
        report = check(schedule, backend=backend, graph=graph, hw=hw)
    print_check(console, report, reference_format(schedule, graph), SLACK, time.perf_counter() - start, verbose)
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
        with phase(f"loading the {args.backend} kernels"):
            load_backend(args.backend)
    else:
        c = _compile(args, checking=True)
        schedule, hw, graph = c.schedule, c.hw, c.graph
    result = _check(schedule, graph, hw, args.backend, out_console(), args.verbose)
    write_json(args.json, result)
    return 0 if result["passed"] else 1


def _saved(args: argparse.Namespace) -> tuple[Schedule, HwSpec, Graph]:
    """The schedule file args.schedule, its hardware (--hw, else the one it names with its overrides, or the
    description it carries) and its graph rebuilt from its source, the schedule validated against both."""
    from accelsim.api import resolve
    from accelsim.schedule.hardware import hardware_of
    from accelsim.schedule.io import read_schedule

    if args.hw is None and args.hw_set:  # it was ignored: the schedule replayed on its own hardware, silently
        raise AccelsimError(f"--hw-set {args.hw_set[0]}: without --hw a saved schedule is replayed on the hardware "
                            f"it was compiled for ({args.schedule} names it), which --hw-set does not change; a "
                            "schedule is valid only on that hardware (its hash is checked), so recompile with "
                            "`accelsim compile --hw-set ...` to run on changed hardware")
    with phase(f"loading {args.schedule} and rebuilding its graph"):
        given_hw = load_hw(args.hw, overrides=parse_assignments(args.hw_set)) if args.hw is not None else None
        schedule = read_schedule(args.schedule)  # parsed once; its messages name the file
        hw = given_hw or hardware_of(schedule)
        if hw.name != schedule.hw_name:
            raise AccelsimError(f"{args.schedule} was compiled for {schedule.hw_name}, not {hw.name}")
        try:  # validated once: itself, against the hardware (its hash too) and against its rebuilt graph
            hw, graph = resolve(schedule, hw)
        except AccelsimError as e:
            raise AccelsimError(f"{args.schedule}: {e}") from None
    return schedule, hw, graph


def cmd_simulate(args: argparse.Namespace) -> int:
    schedule, hw, graph = _saved(args)
    s = run_summary(schedule, hw, graph)
    console = out_console()
    o = schedule.options
    console.print(f"{args.schedule}: {'training step' if s.training else 'inference'} of {schedule.graph_name} "
                  f"on {hw.name}, {fmt.count(len(schedule.tasks))} tasks "
                  f"({fmt.plural(s.samples_per_step, 'sample')} "
                  f"per step, {fmt.plural(o.microbatches, 'micro-batch', 'micro-batches')}, "
                  f"{fmt.plural(o.data_parallel, 'replica')}, {fmt.plural(o.pipeline_stages, 'stage')}); as compiled:")
    print_summary(console, s, schedule)
    write_json(args.json, _simulate_and_plot(schedule, hw, args, console, graph))
    return 0


def add_parallel_args(p: argparse.ArgumentParser) -> None:
    """How one step is compiled: the step-option flags every compiling command has (cli/step_flags.py)."""
    add_step_flags(p, PARALLEL)


def add_optimize_args(p: argparse.ArgumentParser, default: str = "") -> None:
    """--optimize PASSES|auto (alias --passes), --budget and --time-limit. (argparse takes a prefix of an
    option for the option: where --optimizer is defined too, the exact --optimize wins.)"""
    p.add_argument("--optimize", "--passes", dest="optimize", metavar="PASSES|auto", default=default,
                   help=f"rewrite the step first with these graph passes, comma-separated, each verified "
                        f"numerically (known: {', '.join(PASSES)}), or '{AUTO}': search sequences of them, and "
                        f"where each applies, for the shortest compiled makespan of this step on --hw"
                        + (f" (default {default})" if default else " (default: none)") + "; --passes is an older name")
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


def _add_step_args(p: argparse.ArgumentParser, hw_default: str = f"default {DEFAULT_HW}") -> None:
    add_hw_args(p, hw_default)
    add_model_args(p, batch_help="micro-batch size")
    add_parallel_args(p)
    add_optimize_args(p)
    add_step_flags(p, ("remat", "exact"))


def _add_mapping_args(p: argparse.ArgumentParser) -> None:
    add_step_flags(p, ("mapping",))
    p.add_argument("--mapping-out", metavar="FILE.yaml|FILE.json", type=path_arg,
                   help="write the mapping chosen for each layer on each unit that searches them (`mapping: "
                        "search`) as a file --mapping reads back (edit it to fix or constrain layers)")


def _add_sim_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dynamic", action="store_true",
                   help="also simulate a dynamic runtime, for comparison with the static schedule: ready tasks "
                        "wait in a work queue and any free unit that can run one takes it, with no compiled order")
    p.add_argument("--out", metavar="DIR", type=path_arg,
                   help="directory the plots and the trace go to (created; default plots/<model>_<hw>/)")


def _add_check_args(p: argparse.ArgumentParser, what: str = "") -> None:
    p.add_argument("--backend", choices=BACKENDS, default="numba",
                   help=f"kernels that execute the schedule{what}: numba (CPU, default), cuda (a GPU, or numba's "
                        "simulator with NUMBA_ENABLE_CUDASIM=1) or numpy")
    p.add_argument("--verbose", "-v", action="store_true",
                   help=f"list every tensor's errors{what}, not only the summary line and the tensors out of "
                        "tolerance")


def register(sub: argparse._SubParsersAction) -> None:
    text = "compile a training step (or inference), simulate it, plot it"
    p = sub.add_parser("run", help=text, description=f"{text[0].upper()}{text[1:]}. {STEP_RULE}")
    _add_step_args(p)
    _add_sim_args(p)
    p.add_argument("--no-sim", action="store_true", help="compile and summarize only: no simulation, no plots")
    p.add_argument("--check", action="store_true", help="also execute the schedule on real numbers and check them")
    _add_check_args(p, " with --check")
    add_json_arg(p, "the summary")
    _add_mapping_args(p)
    p.add_argument("--report", metavar="FILE.csv|FILE.json", type=path_arg,
                   help="write the per-layer report: per layer ideal, stall and wait cycles, bytes read and written "
                        "per memory, energy per component, utilization and mapping efficiency (JSON: per node too)")
    add_limit_args(p)
    p.set_defaults(fn=cmd_run)

    text = "execute a compiled step with real kernels and compare it with a float64 reference"
    p = sub.add_parser("check", help=text,
                       description=f"{text[0].upper()}{text[1:]}. Prints one line per check (how many tensors are "
                                   f"within tolerance, the worst) and exits 1 if any is not. {STEP_RULE}")
    p.add_argument("schedule", nargs="?", type=path_arg,
                   help="a schedule JSON written by `accelsim compile` to check (default: compile the step of "
                        "--model and the step options; a saved schedule brings its own)")
    _add_step_args(p, f"default {DEFAULT_HW}; for a saved schedule, the one it was compiled for")
    _add_check_args(p)
    add_json_arg(p, "the report")
    add_limit_args(p)
    p.set_defaults(fn=cmd_check)

    text = "replay a saved schedule (static) or its graph's work queue (--dynamic)"
    p = sub.add_parser("simulate", help=text, description=f"{text[0].upper()}{text[1:]}; prints the step's summary "
                                                          "as compiled, then the simulated makespan and stalls.")
    p.add_argument("schedule", type=path_arg, help="a schedule JSON written by `accelsim compile`")
    add_hw_args(p, "default: the one the schedule was compiled for, a bundled config it names or the description it carries")
    _add_sim_args(p)
    add_json_arg(p, "the simulation summary")
    p.set_defaults(fn=cmd_simulate)

    text = "compile a static schedule and write it as JSON"
    p = sub.add_parser("compile", help=text, description=f"{text[0].upper()}{text[1:]}. {STEP_RULE}")
    _add_step_args(p)
    p.add_argument("-o", "--output", type=path_arg, metavar="FILE",
                   help="schedule path (default schedules/<model>_<train|infer>_<hw>.json below the current "
                        "directory, the names of the shipped schedules; the path is printed)")
    _add_mapping_args(p)
    add_limit_args(p)
    p.set_defaults(fn=cmd_compile)
