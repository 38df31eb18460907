"""Stage templates of a model whose layers repeat (gpt2's blocks), measured on a small graph of the same model
(Recipe, HwSpec, StepOptions -> StepWork): a GPT-3 175B step is scheduled without building its graph whole.

How. A step's layers (compiler/planning/layers.py) are the model's prologue (gpt2: `wte`, one layer per
tensor-parallel rank's shard, and `wpe`), L repeated layers (`h0` .. `h{L-1}`, models.REPEATS) and its
epilogue (gpt2: `ln_f` with the LM head and the loss). Each layer has a *role*: its own name outside the
repeated layers, and there `first`, `middle` or `last` (planning/layers.py gives a layer's boundary work,
such as a norm's gradient that reads the layer's input, to a neighbour, so the first and last repeated
layers differ from a middle one, and every middle one is the same).
1. The layer costs (planning/stages.py's LayerCost) are read from the model built with PROBE_LAYERS = 3
   repeated layers (its first, middle and last), and the real p*v chunks are split from the real sequence
   of roles' costs by the same code as the whole graph's partition (stages.split_layers).
2. Each chunk is a sequence of roles; chunks with equal sequences are one *chunk kind* (GPT-3 175B on 32
   chunks: the first with the prologue and three blocks, 30 of three middle blocks, the last with the LM
   head: three kinds). The model is built again with just enough repeated layers for one chunk of each
   kind, in order, and measured by templates.py, one chunk per kind (its tensor-parallel ranks and their
   collectives inside, ranks timed as copies of rank 0: compiler/timing/symmetry.py). Every real chunk
   takes its kind's ChunkWork; each stage sums its chunks'.

What is scaled, and how exactly:
- exact by construction: the layer costs and so the partition (repeated layers have the same nodes and
  costs); per chunk, its forward, backward, weight-gradient and recompute cycles' *work*, accumulation,
  stash bytes (its own values and those its neighbours send), and per stage the update and filler work,
  gradient bytes and parameter and optimizer bytes (the leaves of repeated layers once per chunk, the
  others, such as gpt2's tied `wte`, once per stage), since the measured chunk holds the real chunk's
  nodes on chips of the real kind;
- exact where every value crossing a chunk boundary goes to the next or previous chunk or to a chunk with
  prologue or epilogue layers (gpt2: the residual stream and its gradient, the tied embedding and its
  gradient): activation and backward bytes;
- approximate: busy cycles are read from a one-micro-batch list schedule of the small graph, where a chunk's
  input arrives sooner than in the whole step (fewer chunks before it), so work that waits for no input
  (filler: a weight's transpose, Adam's decay of its moments) may overlap the chunk's other work
  differently; tests/test_layer_templates.py bounds the difference against measuring the whole graph.
Only rematerialization policies that act within one layer (none, every:1, full:1) keep the layers identical;
others (sqrt, budget, every:K > 1, full:K > 1) are measured on the whole graph.
Mappings given per layer (StepOptions.mapping) name the step's nodes; template_mappings.py carries each to the
node of the probe and of the small graph that stands for it, and refuses copies of a repeated layer given
different mappings (one template measures them all).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

from accelsim import models
from accelsim.compiler.hierarchy.template_mappings import mappings_by_place, template_entries
from accelsim.compiler.hierarchy.templates import chunk_figures, chunk_options, measure_step, replica0_leaf_bytes
from accelsim.compiler.hierarchy.work import StageWork, StepWork
from accelsim.compiler.planning.chip_map import chip_map
from accelsim.compiler.planning.expand import Planner
from accelsim.compiler.planning.layers import find_layers, scope
from accelsim.compiler.planning.stages import split_layers
from accelsim.errors import ModelError, ScheduleError
from accelsim.graph.ir import Graph
from accelsim.hw.spec import HwSpec
from accelsim.limits import estimate_tasks
from accelsim.model_states import model_state_kinds
from accelsim.remat import REMAT_PASS, rematerialize
from accelsim.remat.policy import parse_policy
from accelsim.schedule.levels import chip_list
from accelsim.schedule.mappings import NodeMapping
from accelsim.schedule.options import StepOptions
from accelsim.training import training_graph

PROBE_LAYERS = 3
"""Repeated layers of the graph the layer costs are read from: a first, a middle and a last one."""
FIRST, MIDDLE, LAST = "first", "middle", "last"
LAYER_LOCAL_REMAT = ("none", "every:1", "full:1")
"""Rematerialization policies whose checkpoints are the same in every repeated layer."""


@dataclass(frozen=True)
class Recipe:
    """How to build a training step whose layers repeat: the zoo model, its options but the repeated count,
    the real count, the training_graph settings and the rematerialization policy."""

    model: str
    model_options: tuple[tuple[str, Any], ...]
    layers: int
    optimizer: tuple[tuple[str, Any], ...]
    remat: str | None

    def build(self, layers: int) -> Graph:
        """The step of the model with `layers` repeated layers (shapes only: nothing is evaluated)."""
        option = models.REPEATS[self.model].option
        try:
            fwd = models.build(self.model, limits=None, **{**dict(self.model_options), option: layers})
        except ModelError as e:
            raise ModelError(f"{e} (layer templates build {option}={layers} of the model's {self.layers})") from None
        step = training_graph(fwd, **dict(self.optimizer))
        return step if self.remat is None else rematerialize(step, self.remat)

    def scope(self, i: int) -> str:
        """The layer name of the i-th repeated layer."""
        return models.REPEATS[self.model].scope.format(i)


def recipe(model: str, model_options: Mapping[str, Any], optimizer: Mapping[str, Any],
           remat: str | None) -> Recipe | None:
    """The recipe of a zoo model's training step, or None where its layers do not repeat (no
    models.REPEATS entry) or the rematerialization policy is not layer-local. Option errors: ModelError."""
    repeats = models.REPEATS.get(model)
    if repeats is None:
        return None
    label = None if remat is None else parse_policy(remat).label
    if label is not None and label not in LAYER_LOCAL_REMAT:
        return None
    layers = models.option_value(model, repeats.option, model_options)
    rest = tuple(sorted((k, v) for k, v in model_options.items() if k != repeats.option))
    return Recipe(model, rest, int(layers), tuple(sorted(optimizer.items())), None if label == "none" else label)


def recipe_of(graph: Graph, options: StepOptions) -> Recipe | None:
    """The recipe that rebuilds `graph` (a zoo training step, rematerialized by options.remat or not at all,
    with no other rewrite), or None. Short of building the step again, its layer names and node count are
    checked against the recipe's (node counts grow linearly with the repeated layers: two small builds
    give the count; a graph rewritten after it was built, or rematerialized by another policy, differs)."""
    if graph.source is None or graph.optimizer is None or graph.source.model not in models.REPEATS:
        return None
    rewrites = [p.name for p in graph.passes]
    if rewrites not in ([], [REMAT_PASS]) or bool(rewrites) != (options.remat not in (None, "none")):
        return None
    found = recipe(graph.source.model, graph.source.options_dict(), graph.optimizer.kwargs(), options.remat)
    if found is None:
        return None
    names = find_layers(graph).names
    if not any(n == found.scope(found.layers - 1) for n in names) or found.scope(found.layers) in names:
        return None
    if found.layers > PROBE_LAYERS:
        few, more = (len(found.build(k).nodes) for k in (PROBE_LAYERS, PROBE_LAYERS + 1))
        if len(graph.nodes) != few + (found.layers - PROBE_LAYERS) * (more - few):
            return None
    return found


@dataclass(frozen=True)
class Templated:
    """The StepWork of a step measured from layer templates, and how: the small graph measured, the real
    layer names, the chunks' first layers (p*v + 1 positions), each chunk's kind (its measured chunk) and the
    mappings the small graph's nodes were measured with (of units that search them; None: no such unit)."""

    work: StepWork
    graph: Graph
    names: tuple[str, ...]
    starts: tuple[int, ...]
    kinds: tuple[int, ...]
    mappings: tuple[NodeMapping, ...] | None = None


def real_layers(recipe: Recipe, probe: Graph) -> tuple[tuple[str, ...], tuple[str, ...], tuple[int, ...]]:
    """The real step's layer names, their roles, and for each the probe's layer that stands for it."""
    names = find_layers(probe).names
    blocks = [recipe.scope(i) for i in range(PROBE_LAYERS)]
    if blocks[0] not in names or tuple(names[names.index(blocks[0]):][:PROBE_LAYERS]) != tuple(blocks):
        raise ScheduleError(f"layer templates: model {recipe.model!r}'s repeated layers {', '.join(blocks)} are not "
                            f"consecutive layers of its step (layers: {', '.join(names)})")
    b = names.index(blocks[0])
    prologue, epilogue = names[:b], names[b + PROBE_LAYERS:]
    real = (*prologue, *(recipe.scope(i) for i in range(recipe.layers)), *epilogue)
    roles = (*prologue, FIRST, *[MIDDLE] * (recipe.layers - 2), LAST, *epilogue)
    probe_of = {**{r: i for i, r in enumerate(prologue)}, FIRST: b, MIDDLE: b + 1, LAST: b + 2,
                **{r: b + PROBE_LAYERS + i for i, r in enumerate(epilogue)}}
    return real, roles, tuple(probe_of[r] for r in roles)


def roles_of(recipe: Recipe, names: tuple[str, ...], repeated: int) -> tuple[str, ...]:
    """The role of each of `names`, the layers of the recipe's step built with `repeated` repeated layers."""
    first, last = recipe.scope(0), recipe.scope(repeated - 1)
    middle = {recipe.scope(i) for i in range(1, repeated - 1)}
    return tuple(FIRST if n == first else LAST if n == last else MIDDLE if n in middle else n for n in names)


def templated_work(recipe: Recipe, hw: HwSpec, options: StepOptions, max_tasks: int,
                   probe: Graph | None = None, step: Graph | None = None) -> Templated | None:
    """The StepWork of the step `options` describe, measured from layer templates (module docstring); None
    where they would measure no fewer repeated layers than the model has, or the real layers are fewer than
    the chunks (the partition then splits nodes, not layers). `probe`: recipe.build(PROBE_LAYERS), if the
    caller built it. ScheduleError when the small graph's one micro-batch is above `max_tasks` tasks.
    options.mapping names the step's nodes: the step (`step`, or built here when the caller has none) is read
    to carry each entry to the template graphs' nodes that stand for its node (template_mappings.py)."""
    if recipe.layers <= PROBE_LAYERS:
        return None
    probe = probe if probe is not None else recipe.build(PROBE_LAYERS)
    names, roles, probe_of = real_layers(recipe, probe)
    one = chunk_options(options).model_copy(update={"microbatches": options.microbatches, "mapping": None})
    n_chunks = one.pipeline_stages
    user = options.stage_layers is not None or options.stage_boundaries is not None
    if not user and len(names) < n_chunks:
        return None
    chips = chip_list(hw)
    by_place = None
    if options.mapping is not None:
        step = step if step is not None else recipe.build(recipe.layers)
        by_place = mappings_by_place(step, roles, options.mapping, chips)
    probe_entries = None if by_place is None else template_entries(
        probe, roles_of(recipe, find_layers(probe).names, PROBE_LAYERS), by_place)
    whole = one.model_copy(update={"pipeline_stages": 1, "virtual_stages": 1, "stage_layers": None,
                                   "stage_boundaries": None, "pipeline_schedule": None, "mapping": probe_entries})
    probe_costs = Planner(probe, hw, whole).partition.layers
    costs = [replace(probe_costs[i], name=name) for i, name in zip(probe_of, names)]
    chip_of = chip_map(len(chips), one)
    starts, _, _ = split_layers(probe.name, names, costs, one, [chips[chip_of[(0, s, 0)]] for s in range(n_chunks)])
    signatures = [roles[a:b] for a, b in zip(starts, starts[1:])]
    kinds: dict[tuple[str, ...], int] = {}
    for sig in signatures:
        kinds.setdefault(sig, len(kinds))
    ordered = list(kinds)
    repeated = sum(r in (FIRST, MIDDLE, LAST) for sig in ordered for r in sig)
    expected = (*names[:names.index(recipe.scope(0))], FIRST, *[MIDDLE] * (repeated - 2), LAST,
                *names[names.index(recipe.scope(recipe.layers - 1)) + 1:])
    if repeated >= recipe.layers or tuple(r for sig in ordered for r in sig) != expected:
        return None
    small = recipe.build(repeated)
    small_entries = None if by_place is None else template_entries(small, expected, by_place)
    measured_options = options.model_copy(update={
        "pipeline_stages": len(ordered), "virtual_stages": 1, "stage_layers": tuple(len(sig) for sig in ordered),
        "stage_boundaries": None, "pipeline_schedule": None, "mapping": small_entries})
    tasks = estimate_tasks(small, 1, 1, len(ordered))
    if tasks > max_tasks:
        raise ScheduleError(f"stage granularity list-schedules one micro-batch of {small.name!r} with {repeated} of "
                            f"its {recipe.layers} repeated layers (one chunk of each of its {len(ordered)} kinds): "
                            f"about {tasks:,} tasks, above the limit of {max_tasks:,}; raise the limit "
                            f"(--max-tasks, or limits=Limits(max_tasks=N) from Python)")
    m = measure_step(small, hw, measured_options)
    figures = chunk_figures(m, measured_options)
    chunk_kind = tuple(kinds[sig] for sig in signatures)
    held = {**m.plan.leaf_bytes, **replica0_leaf_bytes(m, measured_options)}  # ZeRO 1 and 2: replica 0's shards
    work = _step_work(small, held, figures, chunk_kind, options, chips, recipe)
    return Templated(work, small, names, tuple(starts), chunk_kind, m.costs.recorded())


def _step_work(small: Graph, leaf_bytes: Mapping[int, int], figures: list, chunk_kind: tuple[int, ...],
               options: StepOptions, chips: list, recipe: Recipe) -> StepWork:
    """The real StepWork: every chunk its kind's measured ChunkWork; every stage the sum of its chunks'
    figures, a leaf of a repeated layer once per chunk and any other leaf once per stage."""
    p, v, t = options.pipeline_stages, options.virtual_stages, options.tensor_parallel
    state = model_state_kinds(small)
    repeated = {recipe.scope(i) for i in range(recipe.layers)}
    step_chips = chip_map(len(chips), options)
    stages = []
    for s in range(p):
        mine = [figures[chunk_kind[c]] for c in range(s, p * v, p)]
        state_bytes = {"param": 0, "optimizer_state": 0}
        shared: set[int] = set()
        for f in mine:
            for leaf in f.leaves:
                kind = state.get(leaf)
                if kind not in state_bytes:
                    continue
                if scope(small.nodes[leaf].name) in repeated:
                    state_bytes[kind] += leaf_bytes[leaf]
                elif leaf not in shared:
                    shared.add(leaf)
                    state_bytes[kind] += leaf_bytes[leaf]
        stages.append(StageWork(
            stage=s, chips=tuple(step_chips[(0, s, k)] for k in range(t)),
            update_cycles=sum(f.update_cycles for f in mine), filler_cycles=sum(f.filler_cycles for f in mine),
            gradient_bytes=sum(f.gradient_bytes for f in mine) if options.data_parallel > 1 else 0,
            parameter_bytes=state_bytes["param"], optimizer_bytes=state_bytes["optimizer_state"],
            sent_update_cycles=sum(f.sent_update_cycles for f in mine),
            sent_sum_cycles=sum(f.sent_sum_cycles for f in mine)))
    chunks = tuple(replace(figures[k].work, chunk=c) for c, k in enumerate(chunk_kind))
    return StepWork(stages=tuple(stages), chunks=chunks, microbatches=options.microbatches,
                    data_parallel=options.data_parallel, tensor_parallel=t, virtual_stages=v)
