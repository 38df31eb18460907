"""Splitting one tensor op across several instances of a unit: the parts of a node's output, the
slices of its inputs each part reads, and what each part costs.

A node split `parts` ways along one of its op's Splits (ops/registry.Split) becomes `parts` tasks, part
i computing output indices [lo, hi) of the split axis from the matching slices of the inputs it cuts
and the whole of the others. Parts are exact slices of the whole node's output (no partial sums), so
a reader concatenates them and gets the node's value bit for bit. The planner (schedule/expand.py)
splits a node over the instances of its fastest unit kind when its slowest part then finishes before
the whole node would (Groq's compiler spreads a GEMM over the four MXM planes; a GPU, over its SMs);
compile keeps the split plan only when the step gets shorter.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from accelsim.graph.ir import Graph, Node
from accelsim.ops.registry import Shape, Split, apply, get_op

MAX_PARTS = 64
"""At most this many parts per node: more instances than this share the parts (the list scheduler
places each part on the first free instance), so a 4096-instance unit cannot make a node 4096 tasks."""


@dataclass(frozen=True)
class Part:
    """Part `index` of `parts` of a node cut along `split` (the index into its op's splits)."""

    split: int
    index: int
    parts: int


def bounds(size: int, parts: int, index: int) -> tuple[int, int]:
    """[lo, hi) of part `index` when `size` indices are cut into `parts` near-equal runs (the first
    size % parts runs one longer), so parts differ by at most one index."""
    return size * index // parts, size * (index + 1) // parts


def splits_of(graph: Graph, node: Node) -> tuple[Split, ...]:
    """The ways the node's op may cut its output, for this node's shapes and attributes."""
    shapes = tuple(graph.nodes[i].shape for i in node.inputs)
    return get_op(node.op).splits(node.shape, *shapes, **node.attrs)


def _cut(shape: Shape, axis: int | None, lo: int, hi: int) -> Shape:
    if axis is None:
        return shape
    return shape[:axis] + (hi - lo,) + shape[axis + 1:]


def _span(graph: Graph, node: Node, part: Part) -> tuple[Split, int, int]:
    """The split a part is cut along, and the [lo, hi) of the split axis it covers."""
    split = splits_of(graph, node)[part.split]
    return (split, *bounds(node.shape[split.out_axis], part.parts, part.index))


def part_geometry(graph: Graph, node: Node, part: Part) -> tuple[tuple[Shape, ...], Shape, dict[str, Any]]:
    """(input shapes, output shape, attributes) of one part."""
    split, lo, hi = _span(graph, node, part)
    ins = tuple(_cut(graph.nodes[i].shape, axis, lo, hi) for i, axis in zip(node.inputs, split.in_axes))
    out = _cut(node.shape, split.out_axis, lo, hi)
    attrs = dict(node.attrs)
    if split.shape_attr is not None:
        attrs[split.shape_attr] = out
    return ins, out, attrs


def part_graph(graph: Graph, node: Node, part: Part) -> tuple[Graph, Node]:
    """A one-node graph computing the part (inputs of the part's shapes and the node's input dtypes):
    what the cost model prices, so a part costs what the same op on smaller operands costs."""
    ins, _, attrs = part_geometry(graph, node, part)
    g = Graph(f"{node.name}.part{part.index}", dtype=graph.dtype)
    leaves = [g.input(f"in{j}", shape, dtype=graph.nodes[i].dtype)
              for j, (i, shape) in enumerate(zip(node.inputs, ins))]
    out = apply(node.op, *leaves, **attrs)
    return g, out.node


def slice_inputs(graph: Graph, node: Node, part: Part, args: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The part's inputs from the whole node's input arrays."""
    split, lo, hi = _span(graph, node, part)
    out = []
    for arr, axis in zip(args, split.in_axes):
        if axis is not None:
            arr = np.ascontiguousarray(arr[(slice(None),) * axis + (slice(lo, hi),)])
        out.append(arr)
    return out


def part_node(graph: Graph, node: Node, part: Part) -> Node:
    """The node as a part computes it: its op with the part's output shape and attributes."""
    _, out, attrs = part_geometry(graph, node, part)
    return Node(node.id, node.op, node.inputs, attrs, out, node.dtype, node.name, node.phase)


def assemble(graph: Graph, node: Node, split: int, pieces: Sequence[np.ndarray]) -> np.ndarray:
    """The node's whole value from its parts' values, in part order."""
    return np.concatenate(pieces, axis=splits_of(graph, node)[split].out_axis)
