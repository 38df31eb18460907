"""Stage templates: the stage-level work of a step, measured from the fine-grained schedule of one
micro-batch of one replica (Graph, HwSpec, StepOptions -> StepWork).

The step is expanded and list-scheduled by the existing planner and timing search with microbatches=1,
data_parallel=1 and pipeline_stages=p*v (one stage per model chunk: the partition is the planner's own,
`Planner.stage`, asked for p*v contiguous chunks); chunk c then belongs to pipeline chip c % p. For the
measurement each chunk has chips of its own (p*v*t of them: one micro-batch visits the chunks one after
the other, so chunks c and c + p, which share a chip in the step, would not overlap here either). Every figure
below is read from that task schedule, so the costs, collectives and placement are exactly those of the
task-granularity compiler:

- forward / backward / update cycles: the busy time of a chunk's chip (the union of its tasks' intervals;
  transfers out of the chunk are left to the composition, which times them over the links), each busy
  cycle attributed to one phase (PARTS: forward first, then recompute, input gradient, weight gradient,
  update, filler), so the phases add up to the chip's busy time; with tensor parallelism, of its busiest
  rank's chip (the ranks work side by side, their collectives inside);
- filler cycles: work that reads no micro-batch's data (filler_nodes: a weight's transpose, Adam's decay
  of its moments), per step (M times the per-micro-batch part); the list scheduler runs it wherever a
  unit idles, so compile_stage_step fits it into the composed step's idle time (step.with_filler);
- recompute cycles: the backward tasks that recompute a forward value (accelsim.remat's rewrite names
  them `<forward name>.recompute`);
- weight-gradient cycles (ZB-H1's W pass): the backward tasks of *weight-gradient nodes*: a parameter's
  gradient (a backward node an update reads) and, recursively, a backward node read by exactly one node,
  itself a weight-gradient node of the same chunk (a transpose or product feeding only that gradient; a
  value sent to another chunk per micro-batch is never W; a tied gradient's part summed over the step on its
  own chunk, planning/step_sums.py, is). A value read by two nodes is counted in the input-gradient
  pass (B) even when both readers are weight-gradient nodes: W is the work that certainly computes weight
  gradients only, and the chain of activation gradients (each read by its layer's weight gradient and by
  the next input gradient) stays in B;
- gradient accumulation: with M > 1 micro-batches the task-level step adds every parameter gradient into
  its running sum once per micro-batch after the first. The accumulation of a chunk (the cheapest unit's
  cycles of one add per gradient node, from the planner's cost table) is charged to its backward pass and
  W pass as its average per micro-batch, (M - 1) / M of it, rounded up;
- activation_bytes / backward_bytes: the bytes of the forward values a chunk sends to later chunks and of
  the backward values it sends to earlier chunks (the transfer tasks leaving one of its chips, summed), per
  tensor-parallel rank (its busiest): each rank sends its own copy to its twin on the other stage at once
  (compose.py's transfers, links.transfer_hold, take bytes per rank);
- stash bytes: the forward values on a chunk's chip (its own and those received) that its backward pass
  reads, per rank (the busiest: what one chip's memory holds);
- parameter / optimizer bytes: the leaves each chunk's rank-0 chip reads (accelsim.model_states' kinds);
  gradient bytes: the parameter gradients computed on that chip (reduced over replicas when d > 1).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

from accelsim.compiler.hierarchy.backward_sends import backward_sends, input_grad_transfers, update_send_tasks
from accelsim.compiler.hierarchy.handoffs import handoffs
from accelsim.compiler.hierarchy.work import ChunkWork, StageWork, StepWork
from accelsim.compiler.hierarchy.zero3 import (first_readers, gathered_bytes, pass_gathers, shard_update_share,
                                               zero3_sharding)
from accelsim.compiler.planning.chip_map import chip_map
from accelsim.compiler.planning.expand import Planner
from accelsim.compiler.planning.node_costs import CostTable
from accelsim.compiler.planning.step_sums import step_summed_gradients, step_summed_parts
from accelsim.compiler.planning.tasks import Plan, TaskSpec
from accelsim.compiler.planning.zero import Sharding, sharding
from accelsim.compiler.timing.list_sched import Timed
from accelsim.compiler.timing.search import time_plan
from accelsim.errors import ScheduleError
from accelsim.graph.ir import Graph
from accelsim.hw.precision import master_split, tensor_bytes, tensor_elem_bytes
from accelsim.hw.spec import HwSpec
from accelsim.model_states import model_state_kinds
from accelsim.ops.registry import numel
from accelsim.remat import REMAT_PASS, rematerialize
from accelsim.schedule.levels import chip_list
from accelsim.schedule.options import StepOptions
from accelsim.schedule.split import rows_shape

RECOMPUTE_SUFFIX = ".recompute"
"""How accelsim.remat's rewrite names the backward copy of a recomputed forward node."""
TRANSFER = "transfer"


@dataclass(frozen=True)
class Measured:
    """The one-micro-batch step a StepWork is read from: its plan and each task's time."""

    graph: Graph
    """The step graph measured (rematerialized when the options ask for it)."""
    hw: HwSpec
    options: StepOptions
    """The measured step's options: one micro-batch, one replica, p*v stages."""
    plan: Plan
    timed: tuple[Timed, ...]
    costs: CostTable


def chunk_options(options: StepOptions) -> StepOptions:
    """The options of the one-micro-batch, one-replica step whose stages are the step's model chunks."""
    return options.model_copy(update={
        "microbatches": 1, "data_parallel": 1, "max_in_flight": None, "zero": 0, "exact": None,
        "split": bool(options.split), "granularity": "task",
        "pipeline_stages": options.pipeline_stages * options.virtual_stages})


def measure_step(graph: Graph, hw: HwSpec, options: StepOptions) -> Measured:
    """List-schedule one micro-batch of one replica on p*v stages (one per model chunk). The chunks run
    on chips of their own for the measurement (p*v*t chips): a micro-batch visits them one after the
    other, so the chips chunk c and c + p share in the step would not overlap here either."""
    one = chunk_options(options)
    chunks, t = one.pipeline_stages, options.tensor_parallel
    n_chips = len(chip_list(hw))
    if chunks * t > n_chips:
        raise ScheduleError(f"stage granularity measures each of the {chunks} model chunks (pipeline_stages="
                            f"{options.pipeline_stages} x virtual_stages={options.virtual_stages}) on chips of its "
                            f"own ({chunks * t} with tensor_parallel={t}), but {hw.name} has {n_chips}; use fewer "
                            f"virtual stages or hardware with at least {chunks * t} chips")
    if options.remat is not None and not any(p.name == REMAT_PASS for p in graph.passes):
        graph = rematerialize(graph, options.remat)
    costs = CostTable(graph, hw, chip_list(hw), options.mapping)  # the user's, by this graph's node names
    planner = Planner(graph, hw, one, costs)
    if options.microbatches > 1:  # the step's partition, which may weigh M micro-batches' work against one update
        planner.stage = Planner(graph, hw, one.model_copy(update={"microbatches": options.microbatches}), costs).stage
    plan = planner.plan(None)
    timed, _ = time_plan(plan, hw)
    return Measured(graph, hw, one, plan, tuple(timed), costs)


def busy_cycles(intervals: list[tuple[int, int]]) -> int:
    """Cycles covered by at least one of `intervals` (start, end): the time a chip is doing something."""
    total, reach = 0, -1
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


PARTS = ("forward", "recompute", "input_grad", "weight_grad", "update", "filler", "update_filler")
"""What a chip's busy cycles are attributed to, first first: a cycle in which tasks of several parts run
counts once, for the first of them (work that runs beside another part costs nothing there). Filler is
work that reads no micro-batch's data (filler_nodes: a weight's transpose, Adam's decay of its moments):
per micro-batch (filler) or per step (update_filler), it runs whenever its chip would idle."""


def attributed_cycles(intervals: list[tuple[int, int, int]]) -> list[int]:
    """Cycles per part (PARTS' order) of one chip's `intervals` (start, end, part index): every cycle in
    which the chip is busy counts once, for the first part (lowest index) running then."""
    events = sorted([(start, 1, part) for start, _, part in intervals] + [(end, -1, part) for _, end, part in intervals])
    running = [0] * len(PARTS)
    cycles = [0] * len(PARTS)
    last = None
    for at, change, part in events:
        if last is not None and at > last:
            first = next((i for i, n in enumerate(running) if n), None)
            if first is not None:
                cycles[first] += at - last
        running[part] += change
        last = at
    return cycles


def weight_grad_nodes(graph: Graph, stage: list[int], summed: frozenset[int] = frozenset()) -> frozenset[int]:
    """The weight-gradient nodes (module docstring): parameter gradients and the backward nodes read by
    exactly one node, itself a weight-gradient node on the same stage (`stage`: each node's chunk; a value
    sent to another chunk per micro-batch is that chunk's input gradient, never W). `summed`: the parts of
    step-summed gradients (planning/step_sums.step_summed_parts), summed on their own stage and sent once
    per step: weight gradients, as the task level's ZB-H1 order counts them (timing/pipeline_order.py)."""
    consumers = graph.consumers()
    wgrad = set(graph.gradient_nodes()) | set(summed)
    for n in reversed(graph.nodes):
        readers = consumers[n.id]
        if n.phase == "backward" and not n.name.endswith(RECOMPUTE_SUFFIX) and len(readers) == 1 \
                and readers[0] in wgrad and stage[readers[0]] == stage[n.id]:
            wgrad.add(n.id)
    return frozenset(wgrad)


def sent_gradient_updates(graph: Graph, stage: list[int]) -> frozenset[int]:
    """The update nodes that read, directly or not, a parameter gradient with a part computed on another stage
    for it alone (`stage`: each node's chunk; gpt2's tied vocabulary matrix, whose LM-head part the last stage
    sends): they wait for that stage's send (ChunkWork.update_sends); the rest of a stage's update does not."""
    consumers = graph.consumers()
    sent = {g for g in graph.gradient_nodes() if any(
        stage[i] != stage[g] and graph.nodes[i].phase == "backward" and consumers[i] == [g]
        for i in graph.nodes[g].inputs)}
    for n in graph.nodes:
        if n.id not in sent and any(i in sent for i in n.inputs):
            sent.add(n.id)
    return frozenset(n for n in sent if graph.nodes[n].phase == "update")


def recompute_nodes(graph: Graph) -> frozenset[int]:
    """The backward nodes that recompute a forward value (none unless the graph was rematerialized)."""
    if not any(p.name == REMAT_PASS for p in graph.passes):
        return frozenset()
    return frozenset(n.id for n in graph.nodes if n.phase == "backward" and n.name.endswith(RECOMPUTE_SUFFIX))


def filler_nodes(graph: Graph) -> frozenset[int]:
    """Computed nodes none of whose inputs depends on a micro-batch's data (an `input` leaf): their value is
    the same for every micro-batch, so a list scheduler runs them wherever a unit is free."""
    data: set[int] = set()
    filler = set()
    for n in graph.nodes:
        if n.op == "input" or any(i in data for i in n.inputs):
            data.add(n.id)
        elif not n.is_leaf:
            filler.add(n.id)
    return frozenset(filler)


def _part(task: TaskSpec, wgrad: frozenset[int], recompute: frozenset[int], filler: frozenset[int]) -> str:
    """Which of PARTS a (non-transfer) task's cycles belong to."""
    if task.node in filler:
        return "update_filler" if task.phase == "update" else "filler"
    if task.phase != "backward":
        return task.phase
    if task.node in recompute:
        return "recompute"
    return "weight_grad" if task.node in wgrad else "input_grad"


def accumulate_cycles(m: Measured, chunk: int, step_sums: bool) -> int:
    """One accumulation (an add on the fastest unit) of every parameter gradient computed on the chunk's
    rank-0 chip. `step_sums`: as the task level plans a step of several micro-batches without ZeRO, a
    gradient summed from several stages' parts (planning/step_sums.py) is accumulated part by part on each
    part's stage, and computed once per step, after the other stages' sums arrive (chunk_figures counts that
    add in its stage's update)."""
    stage_of = m.plan.stage_of_node
    chip = m.plan.chip_of[(0, chunk, 0)]
    summed = step_summed_gradients(m.graph, stage_of) if step_sums else {}
    accumulated = [g for g in m.graph.gradient_nodes() if g not in summed]
    accumulated += sorted(i for parts in summed.values() for i in parts)
    total = 0
    for g in accumulated:
        node = m.graph.nodes[g]
        if stage_of[g] == chunk and node.rank in (-1, 0):
            total += min(c for _, _, c in m.costs.add(node.shape, node.dtype, chip).options)
    return total


def _node_bytes(m: Measured, node_id: int) -> int:
    node = m.graph.nodes[node_id]
    return tensor_bytes(m.graph, node, m.hw)


def step_work(graph: Graph, hw: HwSpec, options: StepOptions) -> StepWork:
    """The stage-level work of the step `options` describe, measured from one micro-batch (module docstring)."""
    return work_of(measure_step(graph, hw, options), options)


@dataclass(frozen=True)
class ChunkFigures:
    """One measured chunk: its ChunkWork and its share of its stage's StageWork (module docstring)."""

    work: ChunkWork
    update_cycles: int
    filler_cycles: int
    """Per step: its per-step filler and M times its per-micro-batch filler."""
    gradient_bytes: int
    """The parameter gradients computed on its rank-0 chip (whether or not replicas reduce them)."""
    leaves: frozenset[int]
    """The leaves its rank-0 chip reads (parameters, optimizer state, inputs)."""
    sent_update_cycles: int = 0
    """The part of update_cycles that waits for weight gradients other chunks send (sent_gradient_updates)."""
    sent_sum_cycles: int = 0
    """The part of sent_update_cycles that adds those gradients to this chunk's parts of them (a step-summed
    gradient's add: planning/step_sums.py)."""


def work_of(m: Measured, options: StepOptions) -> StepWork:
    """Read a StepWork for `options` (M micro-batches, d replicas) from the one-micro-batch measurement."""
    p, v, t = options.pipeline_stages, options.virtual_stages, options.tensor_parallel
    figures = chunk_figures(m, options)
    kinds = model_state_kinds(m.graph) if m.graph.optimizer is not None else {}
    step_chips = chip_map(len(m.plan.chips), options)
    held = replica0_leaf_bytes(m, options)
    stages = []
    for s in range(p):
        mine = [figures[c] for c in range(s, p * v, p)]
        leaves = frozenset().union(*(f.leaves for f in mine))
        state_bytes = {kind: sum(held.get(n, m.plan.leaf_bytes[n]) for n in leaves if kinds.get(n) == kind)
                       for kind in ("param", "optimizer_state")}
        stages.append(StageWork(
            stage=s, chips=tuple(step_chips[(0, s, k)] for k in range(t)),
            update_cycles=sum(f.update_cycles for f in mine), filler_cycles=sum(f.filler_cycles for f in mine),
            gradient_bytes=sum(f.gradient_bytes for f in mine) if options.data_parallel > 1 else 0,
            parameter_bytes=state_bytes["param"], optimizer_bytes=state_bytes["optimizer_state"],
            sent_update_cycles=sum(f.sent_update_cycles for f in mine),
            sent_sum_cycles=sum(f.sent_sum_cycles for f in mine)))
    return StepWork(stages=tuple(stages), chunks=tuple(f.work for f in figures), microbatches=options.microbatches,
                    data_parallel=options.data_parallel, tensor_parallel=t, virtual_stages=v)


def replica0_leaf_bytes(m: Measured, options: StepOptions) -> dict[int, int]:
    """ZeRO 1 and 2: leaf -> the bytes replica 0 holds of each leaf the task level stores as shards (optimizer
    state: rows part 0 of d, as zero.ZeroSteps.leaf_shards), and of each trainable parameter whose fp32 master
    it shards (the whole working copy and rows part 0 of the master, as ZeroSteps.master_shards); {} otherwise
    (ZeRO 3's figures are left as they were measured)."""
    d = options.data_parallel
    if options.zero not in (1, 2) or d == 1:
        return {}
    graph, hw = m.graph, m.hw
    shards = sharding(graph, options.zero, d)
    out = {i: numel(rows_shape(graph.nodes[i].shape, 0, d)) * tensor_elem_bytes(graph, graph.nodes[i], hw)
           for i in shards.leaves}
    for i in shards.masters:
        node = graph.nodes[i]
        split = master_split(graph, node, hw)
        if split is not None:
            out[i] = numel(node.shape) * split[0] + numel(rows_shape(node.shape, 0, d)) * split[1]
    return out


def chunk_figures(m: Measured, options: StepOptions) -> list[ChunkFigures]:
    """Every measured chunk's figures, in chunk order (`options`: the step's M micro-batches; the measured
    plan's stages are the chunks)."""
    graph, plan = m.graph, m.plan
    n_chunks, t = m.options.pipeline_stages, options.tensor_parallel
    chunk_of_chip = {chip: s for (_, s, _), chip in plan.chip_of.items()}
    # as the task level plans M > 1 micro-batches without ZeRO, a tied gradient's parts are summed per step,
    # and the gradient is added from them once, after the sends (update work that waits for them)
    # ZeRO with one replica plans exactly as without it (zero.ZeroSteps.of: a shard of one is the whole)
    zero = options.zero if options.data_parallel > 1 else 0
    step_sums = options.microbatches > 1 and zero == 0
    summed = step_summed_parts(graph, plan.stage_of_node) if step_sums else frozenset()
    per_step = frozenset(step_summed_gradients(graph, plan.stage_of_node)) if step_sums else frozenset()
    wgrad, recompute = weight_grad_nodes(graph, plan.stage_of_node, summed), recompute_nodes(graph)
    filler, late = filler_nodes(graph), sent_gradient_updates(graph, plan.stage_of_node) | per_step
    kinds = model_state_kinds(graph) if graph.optimizer is not None else {}
    readers: dict[int, list[TaskSpec]] = {}
    for task in plan.tasks:
        for d in task.deps:
            readers.setdefault(d, []).append(task)
    intervals: dict[int, list[tuple[int, int, int]]] = {}  # chip -> (start, end, part index)
    late_spans: dict[int, list[tuple[int, int]]] = {}  # chip -> (start, end) of its work waiting for sends
    sum_spans: dict[int, list[tuple[int, int]]] = {}  # chip -> (start, end) of its adds of the parts sent to it
    sent: dict[tuple[int, str], int] = {}  # (chip, phase) -> bytes it sends to other chunks' chips
    stash: dict[int, int] = {}  # chip -> bytes of forward values on it that a backward task there reads
    for task, x in zip(plan.tasks, m.timed):
        chunk = chunk_of_chip[task.chip]
        if task.kind == TRANSFER:
            to = chunk_of_chip[task.out_chip]
            if to != chunk and task.phase in ("forward", "backward"):
                sent[(task.chip, task.phase)] = sent.get((task.chip, task.phase), 0) + task.out_bytes
        else:
            part = "update" if task.node in per_step else _part(task, wgrad, recompute, filler)
            intervals.setdefault(task.chip, []).append((x.start, x.end, PARTS.index(part)))
            if task.node in late and task.node not in filler:
                late_spans.setdefault(task.chip, []).append((x.start, x.end))
                if task.node in per_step:
                    sum_spans.setdefault(task.chip, []).append((x.start, x.end))
        if task.phase == "forward" and any(r.phase == "backward" for r in readers.get(task.id, ())):
            stash[task.out_chip] = stash.get(task.out_chip, 0) + task.out_bytes
    per_chip = {chip: dict(zip(PARTS, attributed_cycles(spans))) for chip, spans in intervals.items()}
    ranks = {c: [plan.chip_of[(0, c, k)] for k in range(t)] for c in range(n_chunks)}
    rank0 = {ranks[c][0]: c for c in range(n_chunks)}
    grads: list[set[int]] = [set() for _ in range(n_chunks)]  # gradients computed on each chunk's rank-0 chip
    leaves: list[set[int]] = [set() for _ in range(n_chunks)]  # leaves that chip reads
    for task in plan.tasks:
        c = rank0.get(task.chip)
        if c is None:
            continue
        leaves[c].update(node for node, _ in task.reads)
        if kinds.get(task.node) == "gradient" and task.kind != TRANSFER:
            grads[c].add(task.node)
    def busy(c: int, *parts: str) -> int:
        """The chunk's busiest rank in `parts` (the ranks work side by side, each on its own chip)."""
        return max(sum(per_chip.get(chip, {}).get(part, 0) for part in parts) for chip in ranks[c])

    later = options.microbatches - 1
    shards = zero3_sharding(graph, options.data_parallel) if zero == 3 else None
    # ZeRO 1 and 2: the update is replica 0's rows parts of the nodes the task level cuts (zero.sharding)
    update_shards = sharding(graph, zero, options.data_parallel) if zero in (1, 2) else None
    handed = input_grad_transfers(plan, chunk_of_chip, wgrad)
    update_sends = update_send_tasks(plan, chunk_of_chip, handed)  # weight gradients sent back
    # ZeRO 3: the weight gradients sent to other stages' updates run after the input gradient's chain, not in a
    # wait for a gathered parameter (the task level sends them every micro-batch, off the critical path)
    sent_grads = frozenset(plan.tasks[d].node for t in update_sends for d in t.deps if plan.tasks[d].kind != TRANSFER)
    figures = []
    for c in range(n_chunks):
        acc = math.ceil(accumulate_cycles(m, c, zero == 0) * later / options.microbatches)
        # a chunk with no forward or backward work of its own still passes its micro-batch on: one cycle
        work = ChunkWork(chunk=c, forward_cycles=max(1, busy(c, "forward")),
                         backward_cycles=max(1, busy(c, "recompute", "input_grad", "weight_grad") + acc),
                         weight_grad_cycles=busy(c, "weight_grad") + acc, recompute_cycles=busy(c, "recompute"),
                         activation_bytes=max(sent.get((chip, "forward"), 0) for chip in ranks[c]),
                         stash_bytes=max(stash.get(chip, 0) for chip in ranks[c]),
                         backward_bytes=max(sent.get((chip, "backward"), 0) for chip in ranks[c]))
        sent_update = min(busy(c, "update"), max(busy_cycles(late_spans.get(chip, [])) for chip in ranks[c]))
        update = busy(c, "update")
        if shards is not None:  # ZeRO 3: the passes wait for their parameters' gathers; the update is one shard's
            work, update, sent_update = _zero3(m, ranks[c][0], work, intervals, shards, update, sent_update,
                                               chunk_of_chip, sent_grads)
        elif update_shards is not None:
            update, sent_update = _sharded_update(m, ranks[c][0], update_shards, update, sent_update)
        figures.append(ChunkFigures(
            work=work, update_cycles=update, sent_update_cycles=sent_update,
            sent_sum_cycles=min(sent_update, max(busy_cycles(sum_spans.get(chip, [])) for chip in ranks[c])),
            filler_cycles=busy(c, "update_filler") + options.microbatches * busy(c, "filler"),
            gradient_bytes=sum(_node_bytes(m, g) for g in grads[c]), leaves=frozenset(leaves[c])))
    sends = backward_sends(update_sends, chunk_of_chip, n_chunks)
    lags = handoffs(plan, m.timed, chunk_of_chip, n_chunks, handed, filler)  # when the neighbour may start
    summed_on = frozenset(plan.stage_of_node[i] for i in summed)  # the chunks whose update_sends are W work
    send_lags = update_send_lags(m, chunk_of_chip, update_sends, intervals, summed_on, summed)
    return [replace(f, work=replace(f.work, input_grad_after=h.backward_after, output_after=h.forward_after,
                                    update_sends=x.update_sends, sends_after_weight_grad=f.work.chunk in summed_on,
                                    update_send_after=send_lags.get(f.work.chunk, (-1, -1))[0],
                                    update_send_after_split=send_lags.get(f.work.chunk, (-1, -1))[1]))
            for f, x, h in zip(figures, sends, lags)]


def _zero3(m: Measured, chip: int, work: ChunkWork, intervals: dict[int, list[tuple[int, int, int]]], shards,
           update: int, sent_update: int, chunk_of_chip: dict[int, int], no_slack: frozenset[int]
           ) -> tuple[ChunkWork, int, int]:
    """A chunk's work under ZeRO 3 (hierarchy/zero3.py), read on its rank-0 chip (the ranks are alike): its
    passes' parameter gathers, and its update (and the part of it waiting for sent gradients) cut to the
    share replica 0's rows parts cost."""
    tasks, timed = m.plan.tasks, m.timed
    params = gathered_bytes(m.graph, m.hw, shards)
    firsts = first_readers(tasks, chunk_of_chip, params)
    c = chunk_of_chip[chip]
    sources = {phase: {leaf: k for leaf, k in first.items() if k != c} for phase, first in firsts.items()}
    mine = [t for t in tasks if t.chip == chip and t.kind != TRANSFER]
    spans = {t.id: (timed[t.id].start, timed[t.id].end) for t in mine}

    def ready_at(reader: TaskSpec) -> int | None:
        # zero.PREFETCH = 1: once the tasks one step before the producers of the reader's inputs have ended;
        # None: it reads only leaves (the micro-batch's input), so nothing holds its gather back
        made = {tasks[d].deps[0] if tasks[d].kind == TRANSFER and tasks[d].deps else d for d in reader.deps}
        before = {x for d in made for x in tasks[d].deps} or made
        return max(timed[x].end for x in before) if before else None

    def before(parts: list[int]) -> Callable[[int], int]:
        def busy_before(at: int) -> int:
            cycles = attributed_cycles([(a, min(b, at), k) for a, b, k in intervals.get(chip, ()) if a < at])
            return sum(cycles[k] for k in parts)
        return busy_before

    forward = pass_gathers([t for t in mine if t.phase == "forward"], spans, ready_at, before([0]), busy_cycles, params,
                           sources["forward"], no_slack)
    backward = pass_gathers([t for t in mine if t.phase == "backward"], spans, ready_at, before([1, 2, 3]),
                            busy_cycles, params, sources["backward"], no_slack)
    part, whole = shard_update_share(m.graph, m.costs, chip, [t for t in mine if t.phase == "update"], shards)
    share = (lambda n: math.ceil(n * part / whole)) if whole else (lambda n: n)
    return replace(work, forward_gathers=forward, backward_gathers=backward), share(update), share(sent_update)


def _sharded_update(m: Measured, chip: int, shards: Sharding, update: int, sent_update: int) -> tuple[int, int]:
    """ZeRO 1 and 2: a chunk's update (and the part of it waiting for sent gradients), read on its rank-0 chip, cut
    to the share replica 0's rows parts cost (zero3.shard_update_share), as the task level updates one shard."""
    mine = [t for t in m.plan.tasks if t.chip == chip and t.kind != TRANSFER and t.phase == "update"]
    part, whole = shard_update_share(m.graph, m.costs, chip, mine, shards)
    if not whole:
        return update, sent_update
    return math.ceil(update * part / whole), math.ceil(sent_update * part / whole)


def update_send_lags(m: Measured, chunk_of_chip: dict[int, int], sends: list[TaskSpec],
                     intervals: dict[int, list[tuple[int, int, int]]], summed_on: frozenset[int],
                     summed: frozenset[int]) -> dict[int, tuple[int, int]]:
    """Chunk -> (update_send_after, update_send_after_split) of its weight gradients for earlier chunks
    (ChunkWork), from `sends` (backward_sends.update_send_tasks): the busy cycles, attributed as the item's cycles are (`intervals`: chip -> (start, end, PARTS
    index)), of the item's parts before the last of them is computed, on its busiest rank. A whole backward
    item is every backward part; split (ZB-H1), the W item's weight gradients for a chunk in `summed_on`, else
    the B item's parts. A step-summed part (`summed`) is added into its running sum before it is sent: one add
    more (the last micro-batch's)."""
    tasks, timed = m.plan.tasks, m.timed
    b_parts = [PARTS.index("recompute"), PARTS.index("input_grad")]
    w_part = PARTS.index("weight_grad")
    lags: dict[int, tuple[int, int]] = {}
    for task in sends:
        src = chunk_of_chip[task.chip]
        made = [d for d in task.deps if tasks[d].kind != TRANSFER]
        produced = max((timed[d].end for d in made), default=timed[task.id].start)
        before = attributed_cycles([(start, min(end, produced), part)
                                    for start, end, part in intervals.get(task.chip, ()) if start < produced])
        added = 0
        for d in made:
            node = m.graph.nodes[tasks[d].node]
            if node.id in summed:
                added = max(added, min(c for _, _, c in m.costs.add(node.shape, node.dtype, task.chip).options))
        whole = sum(before[i] for i in b_parts) + before[w_part] + added
        split = (before[w_part] if src in summed_on else sum(before[i] for i in b_parts)) + added
        old = lags.get(src, (0, 0))
        lags[src] = (max(old[0], whole), max(old[1], split))
    return lags
