"""Where a training graph's forward pass may be cut into layers for checkpointing (Graph -> node ids).

A *cut point* is a forward value that alone carries everything later forward work needs from earlier
forward work: no earlier computed value is read after it (leaves, which are never recomputed, do not
count). Recomputing from a kept cut point therefore needs nothing else from the forward pass. In a
pre-LN transformer the cut points are the residual stream after each attention and each MLP (the
residual keeps the block's input alive across its inside); in a chain (an MLP, a plain CNN) every node
is one.

A *layer* is a run of consecutive cut-point segments holding one segment with a tensor op (matmul,
convolution: the registry's "tensor" category) and the cheaper work around it; a layer ends at the cut
point before the next segment with a tensor op. This is robust across the zoo without reading node
names: GPT-2's layers are each block's attention half and MLP half (the embedding joins the first, the
final layer norm the last MLP half, the LM head and loss form the last layer); an MLP's are its linear
layers; a ResNet's its residual blocks and stem. A graph with no tensor op is one layer.
"""
from __future__ import annotations

from accelsim.graph.ir import Graph
from accelsim.ops.registry import get_op


def cut_points(graph: Graph) -> list[int]:
    """Ids of the forward values that are single-tensor boundaries of the forward pass, ascending."""
    last_reader: dict[int, int] = {}
    for n in graph.nodes:
        if n.phase == "forward":
            for i in n.inputs:
                last_reader[i] = n.id
    cuts: list[int] = []
    reach = -1  # the last forward reader of any computed forward value seen so far
    for n in graph.nodes:
        if n.phase != "forward" or n.is_leaf:
            continue
        if reach <= n.id:
            cuts.append(n.id)
        reach = max(reach, last_reader.get(n.id, n.id))
    return cuts


def layer_boundaries(graph: Graph) -> list[int]:
    """The cut points that end a layer (see the module docstring), ascending: a graph of n layers has
    n - 1 of them (the last layer ends at the loss, which is never recomputed)."""
    cuts = cut_points(graph)
    segment_has_tensor = []
    start = -1
    for c in cuts:
        segment_has_tensor.append(any(get_op(n.op).category == "tensor" for n in graph.nodes[start + 1:c + 1]
                                      if n.phase == "forward"))
        start = c
    bounds = []
    seen_tensor = False
    for j, c in enumerate(cuts[:-1]):
        seen_tensor = seen_tensor or segment_has_tensor[j]
        if seen_tensor and segment_has_tensor[j + 1]:
            bounds.append(c)
            seen_tensor = False
    return bounds


def layer_count(graph: Graph) -> int:
    """How many layers the forward pass has (1 + its layer boundaries)."""
    return len(layer_boundaries(graph)) + 1
