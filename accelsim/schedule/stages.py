"""Pipeline model parallelism: partition a graph into stages of balanced cost (one chip each)."""
from __future__ import annotations

from accelsim.graph.ir import Graph


def partition_stages(graph: Graph, node_cycles: dict[int, int], stages: int) -> list[int]:
    """Stage of every node. Forward nodes: contiguous runs in topological order of about equal
    cost. Parameters and inputs: the stage of their first consumer. Backward and update nodes:
    the lowest stage among their inputs, so each layer's gradient is computed where its
    activations and weights live (the backward pass walks the stages in reverse)."""
    n = len(graph.nodes)
    stage = [-1] * n
    forward = [v for v in graph.nodes if v.phase == "forward" and not v.is_leaf]
    total = sum(node_cycles.get(v.id, 0) for v in forward) or 1
    acc = 0
    for v in forward:
        # a node belongs to the stage in which the midpoint of its cost falls
        mid = acc + node_cycles.get(v.id, 0) / 2
        stage[v.id] = min(stages - 1, int(mid * stages / total))
        acc += node_cycles.get(v.id, 0)
    consumers = graph.consumers()
    for v in graph.nodes:
        if v.is_leaf and v.op != "const":
            users = [stage[c] for c in consumers[v.id] if stage[c] >= 0]
            stage[v.id] = users[0] if users else 0
    for v in graph.nodes:  # consts are still -1 here, so they do not pull gradients to stage 0
        if stage[v.id] >= 0 or v.is_leaf:
            continue
        staged = [stage[i] for i in v.inputs if stage[i] >= 0]
        stage[v.id] = min(staged) if staged else stages - 1
    for v in graph.nodes:
        if v.op == "const":  # constants are copied to every chip that reads them
            stage[v.id] = 0
    return stage
