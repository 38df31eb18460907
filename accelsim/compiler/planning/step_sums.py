"""Gradients summed from contributions of several stages (a tied weight: Graph + stage partition -> the
gradient nodes whose contributions each stage sums over micro-batches itself, and their inputs).

gpt2's vocabulary matrix `wte` is read by the embedding (stage 0) and by the LM head (the last stage): its
gradient is an add of the two stages' contributions. Summed per micro-batch, the LM head's contribution
crosses the pipeline M times; Megatron-LM accumulates it on its own stage and all-reduces the embedding
group's gradients once per step, as the stage granularity's composition (hierarchy/compose.py) does. By
linearity the step's sum is the same: sum over micro-batches of (a + b) = (sum of a) + (sum of b).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from accelsim.compiler.planning.tasks import PlannerView
from accelsim.graph.ir import Graph
from accelsim.ops.registry import get_op
from accelsim.schedule.identity import PER_STEP


def step_summed_gradients(graph: Graph, stage_of: Sequence[int]) -> dict[int, tuple[int, ...]]:
    """Gradient node -> its inputs, for every parameter gradient that is an add of backward values of which
    one comes from another stage than the add's, each read by that add only (so its per-micro-batch values
    are needed nowhere else). A gradient with an input the step reports (a graph output other than a
    gradient, which check compares by its step mean) or a collective reads keeps its per-micro-batch sums."""
    consumers = graph.consumers()
    grads = graph.gradient_nodes()
    keep_whole = (set(graph.outputs.values()) - set(grads)) | {
        i for n in graph.nodes if not n.is_leaf and get_op(n.op).collective for i in n.inputs}
    sums: dict[int, tuple[int, ...]] = {}
    for g in grads:
        node = graph.nodes[g]
        inputs = tuple(node.inputs)
        if node.op != "add" or g in keep_whole or len(set(inputs)) != len(inputs):
            continue
        sources = [graph.nodes[i] for i in inputs]
        if any(s.is_leaf or s.phase != "backward" or s.id in keep_whole or consumers[s.id] != [g]
               or s.rank not in (-1, node.rank) for s in sources):  # a rank's own input only beside its own sum
            continue
        if any(stage_of[i] != stage_of[g] for i in inputs):
            sums[g] = inputs
    return sums


def step_summed_parts(graph: Graph, stage_of: Sequence[int]) -> frozenset[int]:
    """The inputs of step-summed gradients (step_summed_gradients) computed on another stage than their add
    (gpt2's LM-head part of the vocabulary matrix's gradient): each is a weight gradient summed over the step
    on its own stage and sent once, so no micro-batch's backward pass on any stage waits for it (ZB-H1's W)."""
    return frozenset(i for g, parts in step_summed_gradients(graph, stage_of).items()
                     for i in parts if stage_of[i] != stage_of[g])


@dataclass(frozen=True)
class StepSums:
    """The step-summed gradients of one expansion (expand.Planner): gradient -> its inputs, and those inputs,
    whose per-micro-batch values are summed on their own stage and are never split (each is accumulated whole)."""

    gradients: dict[int, tuple[int, ...]]
    inputs: frozenset[int]

    @classmethod
    def of(cls, graph: Graph, stage_of: Sequence[int], microbatches: int, zero: bool) -> StepSums:
        """The step's sums; none with one micro-batch, or under ZeRO (`zero`), which reduces every gradient per
        micro-batch or at the boundary itself."""
        if zero or microbatches < 2:
            return cls({}, frozenset())
        sums = step_summed_gradients(graph, stage_of)
        return cls(sums, frozenset(i for inputs in sums.values() for i in inputs))

    def sum(self, planner: PlannerView, g: int, replica: int, rank: int) -> int:
        """Plan gradient `g` of `replica` and tensor-parallel `rank`: each input summed over micro-batches on its
        own chip (planner.accumulate), then `g` once, on its chip, from those sums (one transfer per input on
        another chip); the task id of `g`."""
        for i in self.gradients[g]:
            planner.producer[(i, PER_STEP, replica, rank)] = [planner.accumulate(i, replica, rank)]
        (task,) = planner.rank_task(planner.graph.nodes[g], PER_STEP, replica, rank)
        return task.id
