"""Dead-code elimination: keep only the nodes some kept output needs (Graph -> Graph)."""
from __future__ import annotations

from typing import Iterable

from accelsim.errors import GraphError
from accelsim.graph.ir import Graph
from accelsim.graph.verify import verify


def prune_to_outputs(graph: Graph, outputs: Iterable[str], name: str | None = None) -> Graph:
    """A new graph with the named outputs and every node they depend on, renumbered in order."""
    keep_names = list(outputs)
    for o in keep_names:
        if o not in graph.outputs:
            raise GraphError(f"graph {graph.name!r} has no output {o!r}; it has {', '.join(graph.outputs)}")
    live = {graph.outputs[o] for o in keep_names}
    for node in reversed(graph.nodes):
        if node.id in live:
            live.update(node.inputs)
    out = Graph(name=name or graph.name, dtype=graph.dtype, seed=graph.seed, source=graph.source,
                optimizer=graph.optimizer)
    new_id: dict[int, int] = {}
    for node in graph.nodes:
        if node.id not in live:
            continue
        new_id[node.id] = out.append_from(graph, node, tuple(new_id[i] for i in node.inputs))
    out.outputs = {o: new_id[graph.outputs[o]] for o in keep_names}
    if graph.loss is not None and graph.loss in new_id:
        out.loss = new_id[graph.loss]
    return verify(out)  # every transformation ends by checking the IR's invariants


def inference_graph(forward: Graph) -> Graph:
    """The forward graph without its loss: what serving a model computes."""
    outs = [o for o in forward.outputs if o != "loss"]
    if not outs:
        raise GraphError(f"graph {forward.name!r} has no output besides its loss to serve")
    return prune_to_outputs(forward, outs, name=f"{forward.name}.infer")
