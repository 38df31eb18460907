"""Layer names of a graph's nodes (Graph -> one name per node id), for reports, traces and plots.

A node's layer is the one it was built in (`Graph.layer`: a zoo model's readable name, the module path of a
PyTorch import, the node name of an ONNX import); autodiff builds a node's gradient in the node's layer and
training_graph a parameter's update in the parameter's layer. A node built outside any layer (a rewrite
pass's fused node, a graph file) takes the layer of its first computed (non-leaf) input, so a fused chain keeps
its producer's name; one that reads only leaves is named by itself ("matmul3"), a leaf by its name ("x")."""
from __future__ import annotations

from accelsim.graph.ir import Graph


def param_layers(graph: Graph) -> dict[int, str]:
    """Parameter id -> its layer: the one it was built in, else that of the first node reading it that was
    built in one (a PyTorch module's weight, created before its module's nodes), else its own name."""
    readers: dict[int, str] = {}
    for n in graph.nodes:
        if n.layer and not n.is_leaf:
            for i in n.inputs:
                readers.setdefault(i, n.layer)
    return {p.id: p.layer or readers.get(p.id, p.name) for p in graph.params}


def layer_names(graph: Graph) -> tuple[str, ...]:
    """Every node's layer name, by node id (module docstring)."""
    params = param_layers(graph)
    names: list[str] = []
    for n in graph.nodes:
        if n.layer:
            names.append(n.layer)
        elif n.is_leaf:
            names.append(params.get(n.id, n.name))
        else:
            computed = [i for i in n.inputs if not graph.nodes[i].is_leaf]
            names.append(names[computed[0]] if computed else n.name)
    return tuple(names)
