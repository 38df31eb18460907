"""A step compiled at stage granularity (Graph, HwSpec, StepOptions -> StageStep): the stage-level work
measured from one micro-batch's task schedule (templates.py), composed by the pipeline schedule's event
simulation (compose.py); and the choice of granularity for `granularity="auto"`."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from accelsim.compiler.hierarchy.compose import Composition, compose
from accelsim.compiler.hierarchy.layer_templates import PROBE_LAYERS, Recipe, recipe_of, templated_work
from accelsim.compiler.planning.layers import find_layers
from accelsim.compiler.hierarchy.templates import measure_step, work_of
from accelsim.compiler.hierarchy.work import StepWork
from accelsim.errors import ScheduleError
from accelsim.graph.ir import Graph
from accelsim.graph.stats import samples_per_microbatch
from accelsim.hw.spec import HwSpec
from accelsim.limits import DEFAULT_LIMITS, Limits, estimate_tasks
from accelsim.schedule.levels import chip_list
from accelsim.schedule.mappings import NodeMapping
from accelsim.schedule.plan import Schedule
from accelsim.schedule.options import StepOptions

AUTO_STAGE_TASKS = 200_000
"""`granularity="auto"` schedules a step task by task up to this many estimated tasks (limits.estimate_tasks)
and at stage granularity above: about three minutes of CPU and 1.5 GiB at task level (issue 27 measured
~0.9 ms and ~7.5 KiB per task), below the default task limit, so every step that compiled at task level
before keeps its schedule."""
DEFAULT_STAGE_SCHEDULE = "1f1b"
"""The pipeline schedule of a stage-granularity step whose options name none (StepOptions.pipeline_schedule)."""


UNSUPPORTED = {"zero": (0, 1, 2, 3), "exact": (None,)}
"""Options stage granularity does not model in full yet, with the values it accepts (every ZeRO stage: templates
measure the sharded update, compose.py times the reductions and gathers as the task level plans them)."""


ITEMS_PER_CHUNK = 3
"""Work items a chunk runs per micro-batch in the composition: forward, backward and (ZB-H1) weight gradient."""


def composed_items(options: StepOptions) -> int:
    """Work items the composition simulates: one replica's micro-batches through every chunk (replicas are
    identical: their pipelines are not simulated)."""
    return options.microbatches * options.pipeline_stages * options.virtual_stages * ITEMS_PER_CHUNK


def stage_refusal(graph: Graph, options: StepOptions, chips: int, limits: Limits) -> str | None:
    """Why stage granularity cannot take this step (None: it can): an inference graph, an option it does
    not model, more composed items than limits.max_tasks, or replicas x stages x ranks beyond the chips."""
    if not any(n.phase == "backward" for n in graph.nodes):
        return (f"stage granularity composes training steps (forward and backward passes per micro-batch); "
                f"{graph.name!r} is an inference graph")
    for key, accepted in UNSUPPORTED.items():
        if getattr(options, key) not in accepted:
            return (f"{key}={getattr(options, key)!r} is not modelled at stage granularity yet (it takes {key} "
                    f"{' or '.join(map(repr, accepted))})")
    items = composed_items(options)
    if items > limits.max_tasks:
        return (f"the composition would simulate {items:,} work items (microbatches={options.microbatches} x "
                f"pipeline_stages={options.pipeline_stages} x virtual_stages={options.virtual_stages} x "
                f"{ITEMS_PER_CHUNK}), above the limit of {limits.max_tasks:,} (--max-tasks, or "
                f"limits=Limits(max_tasks=N) from Python)")
    used = options.data_parallel * options.pipeline_stages * options.tensor_parallel
    if used > chips:
        return (f"stage granularity puts every replica's stages and ranks on chips of their own: data_parallel="
                f"{options.data_parallel} x pipeline_stages={options.pipeline_stages} x tensor_parallel="
                f"{options.tensor_parallel} = {used:,} chips, but the hardware has {chips:,}")
    return None


def granularity_of(graph: Graph, options: StepOptions, chips: int, limits: Limits) -> str:
    """"task" or "stage" (granularity_and_tasks without the estimate)."""
    return granularity_and_tasks(graph, options, chips, limits)[0]


def granularity_and_tasks(graph: Graph, options: StepOptions, chips: int, limits: Limits) -> tuple[str, int | None]:
    """"task" or "stage": the options' choice, or for "auto" task unless the step is a training step of
    more than AUTO_STAGE_TASKS estimated tasks that stage granularity can take (stage_refusal): a step it
    cannot take stays at task level, with the task level's own limits and messages. With it, the task
    estimate (limits.estimate_tasks, the step's ZeRO stage included) where one was made, so that the
    caller's size check (check_step_size(..., tasks=)) does not walk the graph again; else None."""
    if options.granularity != "auto":
        return options.granularity, None
    if not any(n.phase == "backward" for n in graph.nodes):
        return "task", None
    tasks = estimate_tasks(graph, options.microbatches, options.data_parallel, options.pipeline_stages, options.zero)
    if tasks <= AUTO_STAGE_TASKS:
        return "task", tasks
    return ("task" if stage_refusal(graph, options, chips, limits) is not None else "stage"), tasks


@dataclass(frozen=True)
class StageStep:
    """One step compiled at stage granularity: how it was compiled, the work measured per stage and chunk,
    and the composed step's timeline and figures (cycles at the hardware clock)."""

    graph_name: str
    hw_name: str
    clock_hz: float
    options: StepOptions
    """As given, with the pipeline schedule the composition followed filled in."""
    training: bool
    samples_per_step: int
    """Samples of every micro-batch of every replica."""
    work: StepWork
    composition: Composition
    measured_graph_nodes: int = 0
    """Nodes of the graph whose one micro-batch was list-scheduled: the step's, or its layer templates'."""
    template_layers: int | None = None
    """The repeated layers of a step measured from layer templates (layer_templates.py); None: measured whole."""
    mappings: tuple[NodeMapping, ...] | None = None
    """The mappings the measured graph's nodes ran with on units that search them (as Schedule.mappings): of the
    step's own nodes, or of the layer templates' graph where template_layers is set; None: no such unit."""

    @property
    def makespan_cycles(self) -> int:
        return self.composition.makespan_cycles

    @property
    def makespan_seconds(self) -> float:
        return self.makespan_cycles / self.clock_hz

    @property
    def throughput(self) -> float:
        """Samples per second."""
        return self.samples_per_step / self.makespan_seconds if self.makespan_cycles else 0.0

    @property
    def bubble_fraction(self) -> float:
        return self.composition.bubble_fraction

    @property
    def exposed_cycles(self) -> dict[str, int]:
        """Per kind of communication (compose.EXPOSED_KINDS): the cycles by which it lengthens the step, on
        its critical path (Composition.exposed_cycles)."""
        return dict(self.composition.exposed_cycles)

    def to_dict(self) -> dict[str, Any]:
        """The step's figures as JSON-ready data (the CLI's --json)."""
        o = self.options
        return {
            "granularity": "stage", "graph": self.graph_name, "hw": self.hw_name, "training": self.training,
            "options": o.model_dump(mode="json"), "pipeline_schedule": o.pipeline_schedule,
            "samples_per_step": self.samples_per_step, "makespan_cycles": self.makespan_cycles,
            "makespan_s": self.makespan_seconds, "throughput_samples_per_s": self.throughput,
            "bubble_fraction": self.bubble_fraction, "exposed_cycles": self.exposed_cycles,
            "measured_graph_nodes": self.measured_graph_nodes, "template_layers": self.template_layers,
            "mappings": None if self.mappings is None else [m.model_dump(mode="json") for m in self.mappings],
            "peak_gathered_bytes": list(self.composition.peak_gathered_bytes),
            "stages": [{"stage": s.stage, "chips": list(s.chips), "busy_cycles": busy, "update_cycles": s.update_cycles,
                        "parameter_bytes": s.parameter_bytes, "optimizer_bytes": s.optimizer_bytes,
                        "gradient_bytes": s.gradient_bytes, "peak_stash_bytes": stash}
                       for s, busy, stash in zip(self.work.stages, self.composition.busy_cycles,
                                                 self.composition.peak_stash_bytes)],
            "chunks": [{"chunk": c.chunk, "forward_cycles": c.forward_cycles, "backward_cycles": c.backward_cycles,
                        "weight_grad_cycles": c.weight_grad_cycles, "recompute_cycles": c.recompute_cycles,
                        "activation_bytes": c.activation_bytes, "stash_bytes": c.stash_bytes,
                        # ZeRO 3: what each pass all-gathers over the replicas per micro-batch and rank
                        "forward_gather_bytes": sum(g[0] for g in c.forward_gathers if g[4] < 0),
                        "backward_gather_bytes": sum(g[0] for g in c.backward_gathers if g[4] < 0)}
                       for c in self.work.chunks],
        }


def task_schedule(compiled: Schedule | StageStep, what: str) -> Schedule:
    """`compiled` (compile's result) for a caller that reads a task-level Schedule (`what`: who, for the
    message); a ScheduleError when the step was compiled at stage granularity."""
    if isinstance(compiled, Schedule):
        return compiled
    o = compiled.options
    raise ScheduleError(f"{what} needs a task-level schedule, but the step of {compiled.graph_name!r} was compiled at "
                        f"stage granularity (granularity={o.granularity!r}: 'auto' composes steps of more than "
                        f"{AUTO_STAGE_TASKS:,} estimated tasks from stage templates); set granularity 'task' (and a "
                        f"task limit above the step's tasks) or use fewer micro-batches or replicas")


def with_filler(work: StepWork, composition: Composition) -> StepWork:
    """`work` with each stage's update lengthened by the filler (StageWork.filler_cycles) that the stage's
    idle time before its update, in `composition`, cannot hold: a list scheduler runs such work in the
    pipeline's bubbles, and only what does not fit there lengthens the step."""
    stages = []
    update_starts: dict[int, int] = {}
    for start, s, kind, *_ in composition.span_rows:  # rows, not spans: a large step has ~10^6 of them
        if kind == "update":
            update_starts[s] = min(start, update_starts.get(s, start))
    for stage in work.stages:
        update_start = update_starts.get(stage.stage, composition.makespan_cycles)
        # its items' cycles (all before its update), without the cycles they wait for gathers (ZeRO 3): idle
        busy = composition.busy_cycles[stage.stage] - stage.update_cycles
        excess = max(0, stage.filler_cycles - (update_start - busy))
        stages.append(replace(stage, update_cycles=stage.update_cycles + excess))
    return replace(work, stages=tuple(stages))


TEMPLATE_TASKS = 50_000
"""A step whose one-micro-batch measurement would have more estimated tasks than this is measured from layer
templates where its model's layers repeat (layer_templates.py: the same StepWork from a few of its layers);
at or below it the whole graph is measured, as every stage step was before layer templates (GPT-2 small at
t=2 on 4 chunks, Adam, remat every:1, is about 19,000)."""


def _refuse(graph: Graph, options: StepOptions, hw: HwSpec, limits: Limits) -> None:
    refusal = stage_refusal(graph, options, len(chip_list(hw)), limits)
    if refusal is not None:
        raise ScheduleError(f"{refusal}; compile with granularity='task' (--granularity task) or change the step")


def _with_schedule(options: StepOptions) -> StepOptions:
    return options.model_copy(update={"pipeline_schedule": options.pipeline_schedule or DEFAULT_STAGE_SCHEDULE})


def compile_stage_step(graph: Graph, hw: HwSpec, options: StepOptions, limits: Limits | None = None) -> StageStep:
    """Measure the stage-level work of the step from one micro-batch of one replica and compose the step
    under the options' pipeline schedule (DEFAULT_STAGE_SCHEDULE when none). Above TEMPLATE_TASKS, a zoo
    step whose layers repeat is measured from layer templates (its graph's source rebuilds a few of its
    layers). `limits` bound the measurement's tasks (one micro-batch, one replica), not the step's."""
    limits = limits or DEFAULT_LIMITS
    _refuse(graph, options, hw, limits)
    options = _with_schedule(options)
    measured = estimate_tasks(graph, 1, 1, options.pipeline_stages * options.virtual_stages)
    found = recipe_of(graph, options) if measured > TEMPLATE_TASKS else None
    templated = templated_work(found, hw, options, limits.max_tasks, step=graph) if found is not None else None
    if templated is not None:
        return _composed(templated.graph, hw, options, templated.work, found.layers, templated.mappings)
    if measured > limits.max_tasks:
        raise ScheduleError(f"stage granularity list-schedules one micro-batch of {graph.name!r}: about "
                            f"{measured:,} tasks, above the limit of {limits.max_tasks:,}; raise the limit "
                            f"(--max-tasks, or limits=Limits(max_tasks=N) from Python)")
    m = measure_step(graph, hw, options)
    return _composed(graph, hw, options, work_of(m, options), None, m.costs.recorded())


def compile_recipe_step(recipe: Recipe, hw: HwSpec, options: StepOptions, limits: Limits | None = None) -> StageStep:
    """compile_stage_step of the step `recipe` builds, without building it whole where layer templates
    measure it (its one-micro-batch measurement estimated above TEMPLATE_TASKS: the estimate of the
    graph with PROBE_LAYERS repeated layers, scaled by the layer count); else of the whole step."""
    limits = limits or DEFAULT_LIMITS
    probe = recipe.build(PROBE_LAYERS)
    _refuse(probe, options, hw, limits)
    options = _with_schedule(options)
    probe_layers = len(find_layers(probe).names)
    chunks = options.pipeline_stages * options.virtual_stages
    scale = (probe_layers + recipe.layers - PROBE_LAYERS) / probe_layers
    about = estimate_tasks(probe, 1, 1, min(chunks, probe_layers)) * scale
    templated = templated_work(recipe, hw, options, limits.max_tasks, probe) if about > TEMPLATE_TASKS else None
    if templated is None:
        return compile_stage_step(recipe.build(recipe.layers), hw, options, limits)
    return _composed(templated.graph, hw, options, templated.work, recipe.layers, templated.mappings)


def _composed(graph: Graph, hw: HwSpec, options: StepOptions, work: StepWork, template_layers: int | None,
              mappings: tuple[NodeMapping, ...] | None) -> StageStep:
    """The StageStep of `work` (measured from `graph`: the step's, or its layer templates') composed under
    the options' pipeline schedule, with the filler its idle time cannot hold added to the updates. It records
    the mappings measured, not the ones asked for (options.mapping), as a task-level Schedule does."""
    schedule = options.pipeline_schedule
    reduction = options.gradient_reduction
    composition = compose(work, schedule, hw, reduction=reduction, zero=options.zero)
    if any(s.filler_cycles for s in work.stages):
        filled = with_filler(work, composition)
        if filled != work:  # the idle time held all the filler: composing again would give the same step
            work, composition = filled, compose(filled, schedule, hw, reduction=reduction, zero=options.zero)
    return StageStep(graph_name=graph.name, hw_name=hw.name, clock_hz=hw.clock_hz,
                     options=options.model_copy(update={"mapping": None}),
                     training=any(n.phase == "update" for n in graph.nodes),
                     samples_per_step=samples_per_microbatch(graph) * options.microbatches * options.data_parallel,
                     work=work, composition=composition, measured_graph_nodes=len(graph.nodes),
                     template_layers=template_layers, mappings=mappings)
