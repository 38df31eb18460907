"""Pipeline model parallelism: partition a graph into stages of balanced cost (one chip each)."""
from __future__ import annotations

from accelsim.graph.ir import Graph

UNSET = -1


def partition_stages(graph: Graph, node_cycles: dict[int, int], stages: int) -> list[int]:
    """Stage of every node.

    Forward nodes: contiguous runs in topological order of about equal cost. Leaves read by forward
    nodes: the stage of their first forward reader. Backward and update nodes: the lowest stage among
    their staged inputs, so each layer's gradient is computed where its activations and weights live
    (the backward pass walks the stages in reverse). A node none of whose inputs has a stage yet (an
    optimizer-state product such as m * beta1) takes the stage of its readers, and optimizer state
    the stage of its first reader: an update runs on the stage that owns its parameter. Constants
    are copied to every chip that reads them (stage 0 by convention)."""
    stage = [UNSET] * len(graph.nodes)
    forward = [v for v in graph.nodes if v.phase == "forward" and not v.is_leaf]
    total = sum(node_cycles.get(v.id, 0) for v in forward) or 1
    acc = 0
    for v in forward:
        mid = acc + node_cycles.get(v.id, 0) / 2  # a node belongs to the stage in which its cost's midpoint falls
        stage[v.id] = min(stages - 1, int(mid * stages / total))
        acc += node_cycles.get(v.id, 0)
    consumers = graph.consumers()
    for v in graph.nodes:
        if v.is_leaf and v.op != "const":
            readers = [stage[c] for c in consumers[v.id] if stage[c] != UNSET]
            if readers:
                stage[v.id] = readers[0]
    rest = [v for v in graph.nodes if not v.is_leaf and stage[v.id] == UNSET]
    for v in rest:  # topological order: inputs first
        staged = [stage[i] for i in v.inputs if stage[i] != UNSET and graph.nodes[i].op != "const"]
        if staged:
            stage[v.id] = min(staged)
    for v in reversed(rest):  # readers first
        if stage[v.id] == UNSET:
            readers = [stage[c] for c in consumers[v.id] if stage[c] != UNSET]
            stage[v.id] = min(readers) if readers else stages - 1
    for v in graph.nodes:
        if v.is_leaf and stage[v.id] == UNSET:
            readers = [stage[c] for c in consumers[v.id] if stage[c] != UNSET]
            stage[v.id] = readers[0] if readers and v.op != "const" else 0
    return stage
