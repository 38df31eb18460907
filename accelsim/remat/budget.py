"""The memory-budget policy: choose what to recompute so the step's estimated peak fits a byte budget
(Graph, bytes -> forward ids to recompute).

Greedy by bytes saved per recompute cost: every saved value (a forward value the backward pass reads)
starts kept; in order of its bytes over the work of recomputing it (its node and the unsaved forward
values between it and the saved ones; work = the registry's FLOPs, or the elements written for an op
that does no arithmetic), each is dropped when that does not raise the estimate (remat/memory.py),
until the estimate fits. Then, cheapest first to keep, every dropped value is kept again where the
budget still holds, so nothing is recomputed that the budget did not need. Where the greedy order
cannot reach the budget, checkpointing every k layers (k = 1..layers) is tried too, and the fitting
plan with the least recompute work wins.
"""
from __future__ import annotations

from math import prod

from accelsim.errors import GraphError
from accelsim.graph.ir import NUMPY_BYTES, Graph, Node
from accelsim.ops.registry import get_op
from accelsim.remat.layers import layer_boundaries
from accelsim.remat.memory import emission_peak_bytes
from accelsim.remat.rewrite import emit, recomputable, recompute_set, saved_values, whole_segments


def work(graph: Graph, node: Node) -> int:
    """What recomputing `node` costs: its FLOPs, or the elements it writes where it does no arithmetic."""
    flops = int(get_op(node.op).flops(node.shape, *(graph.nodes[i].shape for i in node.inputs), **node.attrs))
    return max(flops, prod(node.shape), 1)


def plan_work(graph: Graph, recompute: frozenset[int]) -> int:
    return sum(work(graph, graph.nodes[i]) for i in recompute)


def estimate(graph: Graph, recompute: frozenset[int]) -> int:
    """The estimated peak bytes of computed tensors when `recompute` is recomputed (remat/memory.py)."""
    return emission_peak_bytes(graph, emit(graph, recompute))


def _ratio_order(graph: Graph, saved: list[int]) -> list[int]:
    """`saved` by bytes per recompute work, highest first (ties by id): the work of a value counts the
    unsaved forward values it is recomputed from."""
    is_saved = set(saved)
    ratio = {}
    for v in saved:
        chain, todo = set(), [v]
        while todo:
            i = todo.pop()
            if i in chain:
                continue
            chain.add(i)
            todo += [j for j in graph.nodes[i].inputs if j not in is_saved and recomputable(graph, graph.nodes[j])]
        node = graph.nodes[v]
        ratio[v] = prod(node.shape) * NUMPY_BYTES[node.dtype] / sum(work(graph, graph.nodes[i]) for i in chain)
    return sorted(saved, key=lambda v: (-ratio[v], v))


def every_plan(graph: Graph, k: int) -> frozenset[int]:
    """What checkpointing every k-th layer boundary recomputes (all other saved values)."""
    return recompute_set(graph, set(layer_boundaries(graph)[k - 1::k]))


def full_plan(graph: Graph, k: int) -> frozenset[int]:
    """What full recomputation with a checkpoint every k-th layer boundary recomputes: every computed forward
    value of each checkpointed segment, read by the backward pass or not (rewrite.whole_segments), so the
    recomputed FLOPs are the segments' forward FLOPs. The segment ending at the loss is not checkpointed
    (torch.utils.checkpoint.checkpoint_sequential runs its last segment plainly, Megatron-LM checkpoints the
    transformer layers, not the LM head): its backward starts as its forward ends, so recomputing it would
    save nothing. A segment's last value stays kept as the next segment's checkpoint and is not computed
    again (the frameworks do, and discard it: one elementwise residual add per segment in a transformer).
    Tensor-parallel all-reduces inside a segment are recomputed too: Megatron-LM's checkpointed layer
    re-runs its row-parallel linears' all-reduces."""
    kept = layer_boundaries(graph)[k - 1::k]
    if not kept:
        return frozenset()
    keep = set(kept)
    segments = {n.id for n in graph.nodes[:kept[-1]] if n.id not in keep and recomputable(graph, n, collectives=True)}
    return whole_segments(graph, segments)


def choose(graph: Graph, budget_bytes: int, label: str) -> frozenset[int]:
    """The forward ids to recompute so the estimate is at most `budget_bytes`; GraphError naming the
    budget and the smallest estimate reached when no plan fits. `label` names the policy in errors."""
    base = estimate(graph, frozenset())
    if base <= budget_bytes:
        return frozenset()
    saved = saved_values(graph)
    keep, current, dropped = set(saved), base, []
    smallest = base
    for v in _ratio_order(graph, saved):
        trial = recompute_set(graph, keep - {v})
        peak = estimate(graph, trial)
        if peak <= current:
            keep.discard(v)
            current = peak
            dropped.append(v)
            smallest = min(smallest, peak)
            if peak <= budget_bytes:
                break
    if current <= budget_bytes:
        for v in reversed(dropped):  # the most work per byte first: keep what the budget allows
            if estimate(graph, recompute_set(graph, keep | {v})) <= budget_bytes:
                keep.add(v)
        return recompute_set(graph, keep)
    layers = len(layer_boundaries(graph)) + 1
    fitting = []
    for k in range(1, layers + 1):
        plan = every_plan(graph, k)
        peak = estimate(graph, plan)
        smallest = min(smallest, peak)
        if peak <= budget_bytes:
            fitting.append((plan_work(graph, plan), k, plan))
    if fitting:
        return min(fitting, key=lambda f: f[:2])[2]
    raise GraphError(f"rematerialize {label}: graph {graph.name!r} cannot fit a peak of {_fmt(budget_bytes)} of "
                     f"computed tensors: the least any recomputation plan reaches is {_fmt(smallest)} (without "
                     f"recomputation {_fmt(base)}; estimated by liveness in topological order, in {graph.dtype} "
                     f"bytes, leaves not counted). Give a budget of at least {smallest} bytes, or make the step "
                     "smaller (batch, sequence length, micro-batches)")


def _fmt(nbytes: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.4g} {unit} ({nbytes} bytes)"
    return f"{nbytes} bytes"
