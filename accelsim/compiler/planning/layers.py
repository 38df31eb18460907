"""The layers of a graph: the units a pipeline partition moves between stages (Graph -> Layers).

A layer is named by the scope of the parameters its forward nodes read: a parameter's name up to its
first all-digit component (a module list: `layer1.0.conv1.w` -> `layer1.0`, `encoder.layer.3.fc.w` ->
`encoder.layer.3`), else its first component (`h0.attn.q.w` -> `h0`, `ln_f.gamma` -> `ln_f`, `wte` ->
`wte`). Walking the forward nodes in order, a node that reads a parameter of a scope not seen before
opens that scope's layer; every other node joins the layer open before it. Layers are therefore
contiguous runs of the forward pass, each reading only earlier layers, and a parameter read again later
does not reopen its layer (GPT-2's LM head reads the tied `wte` and stays with `ln_f`).

Backward and update nodes belong to the layer of the forward work they differentiate or update, so a
stage runs the whole training work of its layers (backward_layers, update_layers below). A graph whose
forward nodes read no parameter has no layers; `node_units` makes every forward node a unit of its own.
"""
from __future__ import annotations

from dataclasses import dataclass

from accelsim.graph.ir import Graph, Node

NO_LAYER = -1


@dataclass(frozen=True, slots=True)
class Layers:
    """The units of a graph's forward pass, in order, and the unit of every node."""

    names: tuple[str, ...]
    layer_of: tuple[int, ...]
    """For every node id: the index of its layer in `names`; NO_LAYER for leaves (inputs, parameters,
    constants), which go where their readers go."""


def scope(name: str) -> str:
    """A parameter's layer name (see the module docstring)."""
    parts = name.split(".")
    for i, part in enumerate(parts[:-1]):
        if part.isdecimal() and i > 0:
            return ".".join(parts[:i + 1])
    return parts[0]


def find_layers(graph: Graph, consumers: list[list[int]] | None = None) -> Layers:
    """The graph's layers by its parameters' scopes; no names (and every node NO_LAYER) where no forward
    node reads a parameter. `consumers`: graph.consumers(), if the caller has it."""
    layer = [NO_LAYER] * len(graph.nodes)
    names: list[str] = []
    opened: dict[str, int] = {}
    current = NO_LAYER
    for n in _forward_compute(graph):
        for i in n.inputs:
            leaf = graph.nodes[i]
            if leaf.op == "param" and leaf.phase == "forward" and scope(leaf.name) not in opened:
                opened[scope(leaf.name)] = len(names)
                names.append(scope(leaf.name))
                current = len(names) - 1
                break
        layer[n.id] = current
    if not names:
        return Layers((), tuple(layer))
    layer = [0 if lay == NO_LAYER and _is_forward_compute(n) else lay  # work before the first parameter
             for lay, n in zip(layer, graph.nodes)]
    return Layers(tuple(names), tuple(_training_layers(graph, layer, consumers)))


def node_units(graph: Graph, consumers: list[list[int]] | None = None) -> Layers:
    """Every forward compute node a unit of its own, named `%id op` (a graph without layer structure)."""
    layer = [NO_LAYER] * len(graph.nodes)
    names: list[str] = []
    for n in _forward_compute(graph):
        layer[n.id] = len(names)
        names.append(f"%{n.id} {n.op}")
    return Layers(tuple(names), tuple(_training_layers(graph, layer, consumers)))


def _is_forward_compute(n: Node) -> bool:
    return n.phase == "forward" and not n.is_leaf


def _forward_compute(graph: Graph) -> list[Node]:
    return [n for n in graph.nodes if _is_forward_compute(n)]


def _training_layers(graph: Graph, layer: list[int], consumers: list[list[int]] | None) -> list[int]:
    """`layer` (forward compute nodes set) completed for backward and update nodes."""
    consumers = graph.consumers() if consumers is None else consumers
    layer = backward_layers(graph, layer, consumers)
    return update_layers(graph, layer, consumers)


def backward_layers(graph: Graph, layer: list[int], consumers: list[list[int]]) -> list[int]:
    """Each backward node's layer, from the forward values it reads.

    Autodiff walks the forward pass in reverse, so the backward nodes of later layers come first and a
    backward node differentiates the forward node that produced or consumed a forward value it reads:
    layer_norm's gamma gradient reads the norm's input (the previous layer's output) and belongs to the
    norm's layer, a ReLU's gradient may read the ReLU's output, read next by the next layer. Of those
    candidate layers a node takes the latest not after the layer the walk has reached (the latest
    layer among the nodes before it), else the earliest; a node that reads no forward value (a sum of
    gradients, a reshape of one) stays in the layer reached. Recomputation nodes (rematerialization's
    copies of forward nodes, backward phase) read the checkpoints of their layer the same way."""
    last = max(layer, default=NO_LAYER)
    candidates: dict[int, set[int]] = {}
    reached = last
    for n in graph.nodes:
        if n.phase != "backward" or n.is_leaf:
            continue
        cands: set[int] = set()
        for i in n.inputs:
            x = graph.nodes[i]
            if x.phase != "forward" or x.op == "const":
                continue
            if i not in candidates:
                candidates[i] = {layer[c] for c in consumers[i] if _is_forward_compute(graph.nodes[c])}
                if not x.is_leaf:
                    candidates[i].add(layer[i])
                candidates[i].discard(NO_LAYER)
            cands |= candidates[i]
        below = [c for c in cands if c <= reached]
        here = max(below) if below else min(cands) if cands else reached
        layer[n.id] = here
        reached = min(reached, here)
    return layer


def update_layers(graph: Graph, layer: list[int], consumers: list[list[int]]) -> list[int]:
    """Each update node's layer: that of the parameter it updates (the layer of the parameter's first
    forward reader), found from the node that reads the parameter back along the optimizer's chain of
    update nodes; a node none of whose update readers has a layer takes the earliest layer of its inputs.
    A parameter's gradient (the backward node updates read) joins its update's layer, so that it is summed
    over micro-batches where the parameter lives."""
    home: dict[int, int] = {}  # parameter -> its layer
    for n in graph.nodes:
        if n.op == "param" and n.phase == "forward":
            readers = [layer[c] for c in consumers[n.id] if _is_forward_compute(graph.nodes[c])]
            if readers:
                home[n.id] = readers[0]
    update = [n.phase == "update" for n in graph.nodes]
    last = max(layer, default=NO_LAYER)
    gradients: set[int] = set()
    for n in reversed(graph.nodes):
        if not update[n.id] or n.is_leaf:
            continue
        params = [home[i] for i in n.inputs if i in home]
        readers = [layer[c] for c in consumers[n.id] if update[c] and layer[c] != NO_LAYER]
        inputs = [layer[i] for i in n.inputs if layer[i] != NO_LAYER]
        layer[n.id] = min(params or readers or inputs or [last])
        gradients.update(i for i in n.inputs if graph.nodes[i].phase == "backward")
    for g in sorted(gradients):  # a parameter's gradient is summed where its update runs
        layer[g] = min(layer[c] for c in consumers[g] if update[c])
    return layer
