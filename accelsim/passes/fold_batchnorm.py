"""Conv + batch-norm folding for inference (Graph -> Graph): conv2d (with or without a per-channel
bias add) followed by inference batch norm becomes one conv2d with folded weights plus one bias add.

With s = gamma / sqrt(var + eps) per output channel: W' = W * s, b' = (b - mean) * s + beta (seed 003:
at inference the statistics and affine parameters are constants). W' and b' are computed once in
float64 from the graph's parameter values and stored as constants, so the folded graph no longer
reads those parameters: it serves the model as it is, which is why a training graph (whose step
updates them) is refused. Training-mode `batch_norm` normalizes with the batch's own statistics and
is not folded; `freeze_batchnorm` turns it into inference batch norm first.
"""
from __future__ import annotations

import numpy as np

from accelsim.errors import GraphError
from accelsim.graph.ir import Graph, Node
from accelsim.passes.kind import training_node
from accelsim.passes.rebuild import Rebuild, Rewrite


def _only_reader(graph: Graph, readers: list[list[int]], node_id: int, reader: int) -> bool:
    """`node_id` feeds `reader` alone and is no output: folding may drop its value."""
    return readers[node_id] == [reader] and node_id not in graph.outputs.values() and node_id != graph.loss


def _stored(graph: Graph, node_id: int) -> np.ndarray | None:
    """The float64 value of a parameter or constant; None for anything else."""
    n = graph.nodes[node_id]
    return graph.leaf_value(node_id).astype(np.float64) if n.op in ("param", "const") else None


def _bias(graph: Graph, node_id: int, channels: int) -> np.ndarray | None:
    """A per-channel bias (channels,) from a leaf, or a reshape of one, that broadcasts to
    (1, channels, 1, 1) without growing; None if `node_id` is no such thing."""
    n = graph.nodes[node_id]
    value = _stored(graph, n.inputs[0]) if n.op == "reshape" else _stored(graph, node_id)
    if value is None:
        return None
    value = value.reshape(n.shape)
    try:
        if np.broadcast_shapes(value.shape, (1, channels, 1, 1)) != (1, channels, 1, 1):
            return None
    except ValueError:
        return None
    return np.broadcast_to(value, (1, channels, 1, 1)).reshape(channels)


def _match(graph: Graph, readers: list[list[int]], bn: Node) -> tuple[Node, np.ndarray, np.ndarray] | None:
    """(the conv2d, its weight, its bias or zeros) when `bn` folds into the conv before it."""
    y = graph.nodes[bn.inputs[0]]
    if not _only_reader(graph, readers, y.id, bn.id):
        return None
    channels = y.shape[1]
    bias = np.zeros(channels)
    if y.op == "add":
        for conv_at, bias_at in ((0, 1), (1, 0)):
            conv, b = graph.nodes[y.inputs[conv_at]], _bias(graph, y.inputs[bias_at], channels)
            if conv.op == "conv2d" and b is not None and conv.shape == y.shape and _only_reader(
                    graph, readers, conv.id, y.id):
                y, bias = conv, b
                break
        else:
            return None
    weight = _stored(graph, y.inputs[1]) if y.op == "conv2d" else None
    return (y, weight, bias) if weight is not None else None


def run(graph: Graph) -> Rewrite:
    """The folding rewrite, one line per folded batch norm."""
    rb = Rebuild(graph)
    readers = graph.consumers()
    for old in graph.nodes:
        found = _match(graph, readers, old) if old.op == "batch_norm_inference" else None
        stats = [_stored(graph, i) for i in old.inputs[1:]] if found is not None else []
        if found is None or any(s is None for s in stats):
            rb.copy(old)
            continue
        conv, weight, bias = found
        gamma, beta, mean, var = stats
        scale = gamma / np.sqrt(var + float(old.attrs["eps"]))
        w = rb.const(weight * scale.reshape(-1, 1, 1, 1), old.phase)
        b = rb.const(((bias - mean) * scale + beta).reshape(1, -1, 1, 1), old.phase)
        y = rb.emit("conv2d", (rb.new_id[conv.inputs[0]], w), conv.attrs, old.phase, name=conv.name)
        out = rb.emit("add", (y, b), {}, old.phase, name=old.name) if y is not None else None
        if not rb.replace(old, out, f"folded into conv2d %{conv.id} {conv.name!r}"):
            rb.copy(old)
    return rb.finish()


def fold_batchnorm(graph: Graph) -> Graph:
    """`graph` (an inference graph) with each conv2d + inference batch norm folded into one conv2d."""
    later = training_node(graph)
    if later is not None:
        raise GraphError(f"fold_batchnorm applies to inference graphs, but graph {graph.name!r} has {later.phase} "
                         f"node %{later.id} {later.name!r}: folding freezes parameters into constants, which a "
                         "training step updates")
    return run(graph).graph
