"""`compile(graph, hw, ...)`: the static scheduler's entry point (Graph, HwSpec -> Schedule)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from accelsim.errors import AccelsimError, MemoryFitError, ScheduleError
from accelsim.gc_pause import paused_gc
from accelsim.graph.ir import Graph
from accelsim.graph.stats import samples_per_microbatch
from accelsim.hw import load_hw
from accelsim.hw.precision import at_precision
from accelsim.hw.spec import HwSpec
from accelsim.limits import (DEFAULT_LIMITS, Limits, check_step_options, check_step_size, check_tensor_parallel,
                             check_zero, estimate_tasks)
from accelsim.compiler.timing.bounds import lower_bounds
from accelsim.compiler.exact import MAX_EXACT_TASKS
from accelsim.compiler.exact_step import check_exact_step, exact_seconds, solve_step
from accelsim.compiler.fusion import compile_fusion
from accelsim.compiler.hierarchy.step import StageStep, compile_stage_step, granularity_and_tasks
from accelsim.compiler.planning.expand import expand
from accelsim.compiler.planning.node_costs import CostTable
from accelsim.compiler.planning.tasks import Plan
from accelsim.schedule.levels import chip_list
from accelsim.compiler.timing.improve import makespan_of
from accelsim.compiler.timing.list_sched import Timed, list_schedule
from accelsim.compiler.timing.memory_planner import MemoryPlanner
from accelsim.compiler.timing.memory import Block
from accelsim.schedule.identity import identity_of
from accelsim.schedule.hardware import carried_spec
from accelsim.schedule.plan import (PER_STEP, Candidate, MemoryUse, Schedule, Source, SourcePass, Task, Tensor,
                                    graph_hash, hw_hash, peak_bytes)
from accelsim.schedule.options import StepOptions
from accelsim.schedule.ports import unit_ports
from accelsim.compiler.timing.search import effort_budget, time_plan
from accelsim.compiler.timing.pipeline_order import PipelineOrder
from accelsim.compiler.hierarchy.schedules import pipeline_schedule, windowed_order
from accelsim.compiler.timing.symmetry import reduce
from accelsim.compiler.verify import verify_schedule
from accelsim.remat import REMAT_PASS, rematerialize


def _block_peak(blocks: list[Block]) -> int:
    return peak_bytes([(b.start, int(b.end), b.size_bytes) for b in blocks])


def source_of(graph: Graph) -> Source | None:
    """What rebuilds the graph: the zoo model and its options, the training settings if any, and the
    rewrite passes optimize applied to the step graph."""
    if graph.source is None:
        return None
    optimizer = graph.optimizer.kwargs() if graph.optimizer is not None else None
    passes = tuple(SourcePass(name=p.name, only=p.only) for p in graph.passes)
    return Source(model=graph.source.model, options=graph.source.options_dict(), optimizer=optimizer, passes=passes)


def _auto_window(graph: Graph, hw: HwSpec, options: StepOptions, costs: CostTable) -> int:
    """How many micro-batches' working sets fit in each chip's first-choice memory at once, judged from
    a one-micro-batch schedule: the per-step leaves (parameters, optimizer state) are there once
    whatever the window, so what a micro-batch adds is the peak less them."""
    probe_opts = options.model_copy(update={"microbatches": 1, "data_parallel": 1})
    plan = expand(graph, hw, probe_opts, costs=costs)
    copies = reduce(plan)  # tensor-parallel ranks that are copies: one rank's memory tells every rank's
    _, mem = list_schedule(copies.reduced if copies is not None else plan, hw)
    fits = []
    for row in mem.order:
        _, arena = row[0]
        shared = sum(b.size_bytes for b in arena.blocks if b.key[0] == "leaf" and b.key[2] == PER_STEP)
        peak = _block_peak(arena.blocks) - shared
        if peak > 0:
            fits.append(max(1, (arena.capacity_bytes - shared) // peak))
    return max(1, min(fits, default=options.microbatches))


Fitted = tuple[StepOptions, Plan, list[Timed], MemoryPlanner]
ALL_IN_FLIGHT_FACTOR = 4
"""No window is tried only up to this many times the estimated window: beyond, every micro-batch's
forward pass starting at once cannot fit, and finding that out costs a long failed search."""


def _fit(graph: Graph, hw: HwSpec, options: StepOptions, window: int | None, costs: CostTable,
         halve: bool = True) -> Fitted:
    """Expand and time the step with `window` micro-batches in flight; when its tensors do not fit,
    halve the window (fewer micro-batches' activations alive at once) down to one before giving up:
    a step that fits with few micro-batches in flight must still fit with more micro-batches."""
    while True:
        options = options.model_copy(update={"max_in_flight": window})
        plan = expand(graph, hw, options, window, costs)
        try:
            return (options, plan, *time_plan(plan, hw, effort_budget(options.effort), _pipeline_order(options)))
        except MemoryFitError:
            if not halve or window is None or window <= 1:  # None: all in flight, or one micro-batch
                raise
            window //= 2


def _pipeline_order(options: StepOptions) -> PipelineOrder | None:
    """The per-chip order of options.pipeline_schedule for the task-level list scheduler (None: its own)."""
    if options.virtual_stages > 1:  # refused, not ignored: without a schedule it used to change nothing
        raise ScheduleError(f"pipeline_schedule={options.pipeline_schedule!r} with virtual_stages="
                            f"{options.virtual_stages}: the task-level compiler partitions the model into one chunk "
                            f"per pipeline stage, so it has no model chunks to interleave; compile it at stage "
                            f"granularity (granularity='stage', --granularity stage), or leave virtual_stages at 1")
    if options.pipeline_schedule is None:
        return None
    schedule = pipeline_schedule(options.pipeline_schedule)
    p, m = options.pipeline_stages, options.microbatches
    return PipelineOrder(windowed_order(schedule, p, 1, m, options.max_in_flight), schedule.splits_weight_grad)


def _fit_best(graph: Graph, hw: HwSpec, options: StepOptions, window: int | None, chosen: bool,
              costs: CostTable) -> Fitted:
    """With a window the caller chose, that window (halved while it does not fit). Otherwise the automatic
    window, one more, twice as many, and no window at all, the shortest step kept (the first on a tie).
    The estimate from one micro-batch's memory is a starting point, not an optimum: the window keeps
    micro-batches from starting forward passes that memory cannot follow through, but it runs them in
    waves, and which width overlaps best depends on the model and the machine (superres training on
    bespoke_superres, 32 micro-batches: 6.9K samples/s with 2 in flight, 9.1K with 3, 6.5K with 4;
    resnet50 training on groq_like, 16 micro-batches: 2.1K in waves of 4, 2.4K with all in flight)."""
    best = _fit(graph, hw, options, window, costs)
    if chosen or window is None or window >= options.microbatches:
        return best
    m = options.microbatches
    widths = (window + 1, 2 * window) + ((m,) if m <= ALL_IN_FLIGHT_FACTOR * window else ())
    tries = list(dict.fromkeys(None if w >= m else w for w in widths))
    for w in tries:
        try:
            fitted = _fit(graph, hw, options, w, costs, halve=False)
        except MemoryFitError:
            continue
        if makespan_of(fitted[2]) < makespan_of(best[2]):
            best = fitted
    return best


def _split_extra_tasks(graph: Graph, hw: HwSpec, options: StepOptions, costs: CostTable | None = None) -> int:
    """How many tasks splitting adds to the step: parts - 1 per split node (and per moved part), per
    micro-batch and replica, counted on a one-micro-batch expansion."""
    one = options.model_copy(update={"microbatches": 1, "data_parallel": 1, "max_in_flight": None, "split": True})
    extra = sum(t.part.parts - 1 for t in expand(graph, hw, one, costs=costs).tasks if t.part is not None and t.part.index == 0)
    return extra * options.microbatches * options.data_parallel


def _fit_split(graph: Graph, hw: HwSpec, options: StepOptions, window: int | None, chosen: bool,
               split: bool | None, max_tasks: int, costs: CostTable) -> Fitted:
    """The step fitted unsplit, split, or (split None) both, the shorter kept and the unsplit one on a
    tie. Splitting trades unit time (every part pays its own fill and drain) for a shorter critical
    path, so whether it pays depends on how busy the units already are: a single micro-batch's layers
    run faster on four Groq MXM planes than on one, sixty-four micro-batches in flight already fill all
    four. A split step above `max_tasks` is refused (split True) or not tried (None)."""
    options = options.model_copy(update={"split": False})  # the unsplit step, recorded as such
    if split is False:
        return _fit_best(graph, hw, options, window, chosen, costs)
    extra = _split_extra_tasks(graph, hw, options, costs)
    tasks = estimate_tasks(graph, options.microbatches, options.data_parallel, options.pipeline_stages,
                           options.zero) + extra
    if split and tasks > max_tasks:
        raise ScheduleError(f"splitting the tensor nodes of {graph.name} over their units' instances would build "
                            f"about {tasks:,} tasks, above the limit of {max_tasks:,}; compile with split=False "
                            f"(--split off), fewer micro-batches or replicas, or a higher limit")
    cut = options.model_copy(update={"split": True})
    if split:
        return _fit_best(graph, hw, cut, window, chosen, costs)
    best = _fit_best(graph, hw, options, window, chosen, costs)
    if not extra or tasks > max_tasks:  # nothing splits here (the same plan twice), or too many tasks split
        return best
    try:
        fitted = _fit_best(graph, hw, cut, window, chosen, costs)
    except MemoryFitError:
        return best
    return fitted if makespan_of(fitted[2]) < makespan_of(best[2]) else best


def compile(graph: Graph, hw: HwSpec | str | Path | dict[str, Any], options: StepOptions | None = None,  # noqa: A001
            *, validate: bool = True, limits: Limits | None = None, **step: Any) -> Schedule | StageStep:
    """List-schedule one step of `graph` (training or inference) on `hw` under `options` (StepOptions; its
    fields may also be given as keyword arguments, which change `options`: `compile(g, hw, microbatches=4)`).

    `max_in_flight` micro-batches of a replica may be active at once; by default as many as fit
    the fastest memory, judged from a one-micro-batch schedule (parallelism needs memory). The
    step's size is estimated first and refused above `limits` (accelsim.limits.DEFAULT_LIMITS).
    `exact`: True (DEFAULT_EXACT_SECONDS) or a number of seconds also runs CP-SAT on the step (needs
    accelsim[exact]), seeded with the list schedule; the schedule is never longer, and `schedule.exact`
    records the proved lower bound and gap (compiler/exact_step.py). Steps above MAX_EXACT_TASKS are
    refused. `split`: True cuts each tensor node over the instances of its unit where the parts finish
    sooner than the whole (schedule/split.py), False never; None (default) schedules the step both ways
    and keeps the shorter (the unsplit one on a tie), recorded in `schedule.options.split`.
    `tensor_parallel`: the ranks of a graph built Megatron-style (models.build(..., tensor_parallel=t)),
    one chip each; left out, the graph's own (1 for a graph without ranks). `zero`: the ZeRO stage
    (0 none, 1 optimizer state, 2 + gradients, 3 + parameters sharded over the data-parallel replicas,
    each on its own chip; compiler/planning/zero.py); with data_parallel=1 it changes nothing. `remat`: a
    rematerialization policy; a training graph not rematerialized yet is rewritten by it first (the
    schedule's source records the rewrite, so the schedule is of the rewritten graph). `granularity`:
    "task" schedules every task (a Schedule); "stage" measures each stage's work from one micro-batch and
    composes the step under `pipeline_schedule` (a StageStep, compiler/hierarchy/step.py; the step's size
    limit applies to that one micro-batch); "auto" (default) is "task" up to AUTO_STAGE_TASKS estimated
    tasks and "stage" above. `fusion`: "off" (default), a tile count (2, 4, 8, 16) or "auto": layer fusion of
    an inference step (compiler/fusion.py); the schedule is of the fused graph, which its source records, so
    a graph without a model source is checked with graph=A.optimize(graph, ["fuse_layers_t<T>"])."""
    if not isinstance(graph, Graph):
        raise AccelsimError(f"compile needs an accelsim Graph (from A.models.build or A.Graph), got "
                            f"{type(graph).__name__}")
    hw = load_hw(hw)  # an HwSpec as it is; a bundled name, a path or a parsed dict validated
    if not isinstance(validate, bool):
        raise AccelsimError(f"validate must be True or False, got {validate!r}")
    options = _options(graph, options, step)
    if options.fusion != "off":  # compiles the step (or each candidate) with fusion off (compiler/fusion.py)
        return compile_fusion(graph, hw, options, lambda g, o: compile(g, hw, o, validate=validate, limits=limits))
    hw = at_precision(hw, options.precision)  # bytes and unit rates at the step's precision (hw/precision.py)
    graph = _rematerialized(graph, options.remat)
    granularity, tasks = granularity_and_tasks(graph, options, len(chip_list(hw)), limits or DEFAULT_LIMITS)
    if granularity == "stage":
        return compile_stage_step(graph, hw, options, limits or DEFAULT_LIMITS)
    check_step_size(graph, options.microbatches, options.data_parallel, options.pipeline_stages,
                    limits or DEFAULT_LIMITS, options.zero, tasks=tasks)
    if options.exact is not None:
        check_exact_step(graph, hw, options)  # before the list schedule: refusing late wastes its time
    with paused_gc():  # millions of objects that live to the end: collecting midway is wasted work
        return _compile(graph, hw, options, limits or DEFAULT_LIMITS, validate)


def _options(graph: Graph, options: StepOptions | None, step: dict[str, Any]) -> StepOptions:
    """`options` changed by compile's keyword arguments, checked against the graph: the messages name the
    option as compile's argument (a Python caller's mistake is in a keyword)."""
    if options is not None and not isinstance(options, StepOptions):
        raise AccelsimError(f"compile: options must be an accelsim StepOptions, got {type(options).__name__}")
    base = options or StepOptions()
    get = lambda key: step.get(key, getattr(base, key))  # noqa: E731
    check_step_options(get("microbatches"), get("data_parallel"), get("pipeline_stages"), get("max_in_flight"))
    split = get("split")
    if split is not None and not isinstance(split, bool):
        raise AccelsimError(f"split must be True, False or None (try both), got {split!r}")
    if "exact" in step:
        step = {**step, "exact": exact_seconds(step["exact"])}
    tensor_parallel = step.get("tensor_parallel", base.tensor_parallel if options is not None else None)
    step = {**step, "tensor_parallel": check_tensor_parallel(graph, tensor_parallel),
            "zero": check_zero(graph, get("zero"), get("data_parallel"))}
    return StepOptions.of(options, **step)


def _rematerialized(graph: Graph, remat: str | None) -> Graph:
    """`graph` rewritten by the remat policy, unless there is none or the graph records one already (the CLI
    and sweeps rematerialize the step before optimizing it, as the pass order matters)."""
    if remat is None or any(p.name == REMAT_PASS for p in graph.passes):
        return graph
    return rematerialize(graph, remat)


def _compile(graph: Graph, hw: HwSpec, options: StepOptions, limits: Limits, validate: bool) -> Schedule:
    """compile's work once its arguments are checked: the window, the fitted plan and its timing, the
    exact mode's improvement, the Schedule, and its validation."""
    microbatches, max_in_flight = options.microbatches, options.max_in_flight
    # every expansion below prices the same nodes on the same chips
    costs = CostTable(graph, hw, chip_list(hw), options.mapping)
    if _pipeline_order(options) is not None and max_in_flight is None:  # refuses what it cannot follow first
        # the schedule says how many micro-batches may be in flight (1F1B: p, GPipe and ZB-H1: all): the window
        max_in_flight = pipeline_schedule(options.pipeline_schedule).window(options.pipeline_stages, 1, microbatches)
    window = max_in_flight or (_auto_window(graph, hw, options, costs) if microbatches > 1 else None)
    if window is not None:
        window = min(window, microbatches)
    max_tasks = limits.max_tasks
    if options.exact is not None:
        max_tasks = min(max_tasks, MAX_EXACT_TASKS)
    options, plan, timed, mem = _fit_split(graph, hw, options, window, max_in_flight is not None, options.split,
                                           max_tasks, costs)
    report = None
    if options.exact is not None:
        timed, mem, report = solve_step(plan, hw, (timed, mem), options.exact)
    schedule = _schedule(graph, hw, options, plan, timed, mem, costs)
    if report is not None:
        schedule = schedule.model_copy(update={"exact": report})
    if validate:
        verify_schedule(schedule, graph, hw, plan=plan)
    return schedule


def _candidates(plan: Plan) -> tuple[list[tuple[Candidate, ...]], list[int]]:
    """Every distinct candidate list once, and each task's index into them."""
    table: dict[tuple, int] = {}
    index = []
    for t in plan.tasks:
        index.append(table.setdefault(t.options, len(table)))
    lists = [tuple(Candidate(resource=r, instances=n, cycles=c) for r, n, c in options) for options in table]
    return lists, index


def _schedule(graph: Graph, hw: HwSpec, options: StepOptions, plan: Plan, timed: list[Timed],
              mem: MemoryPlanner, costs: CostTable) -> Schedule:
    candidates, index = _candidates(plan)
    ports = {(c, u): memory for (c, u), (_, memory) in unit_ports(plan.chips).items()}
    tasks = tuple(Task(**identity_of(t), id=t.id, out_chip=t.out_chip, resource=x.resource, instance=x.instance,
                       start=x.start, end=x.end, deps=tuple(t.deps), after=tuple(t.after), candidates=index[t.id],
                       reads=tuple(t.reads), out_bytes=t.out_bytes, bytes_moved=t.port_bytes,
                       port=ports.get((t.chip, x.resource), ""), keep=t.keep, group=t.group,
                       energy_pj=float(t.energy_pj), flops=t.flops, partial_reads=t.partial_reads,
                       **t.part_fields())
                  for t, x in zip(plan.tasks, timed))
    tensors = []
    for (chip, memory), arena in mem.arenas.items():
        for b in arena.blocks:
            if b.key[0] == "out":
                t = plan.tasks[b.key[1]]
                node, mb, replica, task = t.node, t.microbatch, t.replica, t.id
            else:
                _, node, mb, replica, _chip = b.key
                task = -1
            parts = len(plan.shards.get(node, ())) if task < 0 else 0  # a ZeRO leaf shard: replica r's rows part r
            shard = {"part": replica, "parts": parts} if parts > 1 else {}
            tensors.append(Tensor(node=node, microbatch=mb, replica=replica, task=task, chip=chip, memory=memory,
                                  offset=b.offset, size_bytes=b.size_bytes, start=b.start, end=int(b.end), **shard))
    tensors.sort(key=lambda x: (x.chip, x.memory, x.start, x.offset))
    memories = tuple(MemoryUse(chip=chip, memory=memory, capacity_bytes=arena.capacity_bytes,
                               peak_bytes=_block_peak(arena.blocks)) for (chip, memory), arena in mem.arenas.items())
    m, d = options.microbatches, options.data_parallel
    return Schedule(
        graph_name=graph.name, graph_hash=graph_hash(graph), hw_name=hw.name, hw_hash=hw_hash(hw),
        # the schedule records the mappings chosen (costs.recorded), not the ones asked for
        clock_hz=hw.clock_hz, options=options.model_copy(update={"mapping": None}),
        training=any(n.phase == "update" for n in graph.nodes),
        samples_per_step=samples_per_microbatch(graph) * m * d, candidates=tuple(candidates), tasks=tasks,
        tensors=tuple(tensors), memories=memories, makespan_cycles=max((t.end for t in tasks), default=0),
        bounds=lower_bounds(plan, hw), energy_pj=sum(t.energy_pj for t in tasks) if plan.has_energy else None,
        source=source_of(graph), hw_overrides=hw.overrides or None,
        hw_spec=carried_spec(hw), mappings=costs.recorded())


