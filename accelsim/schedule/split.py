"""Splitting one tensor op across several instances of a unit: the parts of a node's output, the
slices of its inputs each part reads, and what each part costs.

A node split `parts` ways along one of its op's Splits (ops/registry.Split) becomes `parts` tasks, part
i computing output indices [lo, hi) of the split axis from the matching slices of the inputs it cuts
and the whole of the others. Parts are exact slices of the whole node's output (no partial sums), so
a reader concatenates them and gets the node's value bit for bit. The planner (compiler/planning/expand.py)
splits a node over the instances of its fastest unit kind when its slowest part then finishes before
the whole node would (Groq's compiler spreads a GEMM over the four MXM planes; a GPU, over its SMs);
compile keeps the split plan only when the step gets shorter.

Besides its op's splits, every value of rank >= 1 has one more cut, after them: its rows (axis 0). ZeRO
(compiler/planning/zero.py) shards along it: a collective or a transfer moves rows of any value, and an
elementwise node computes its rows from its inputs' rows. The planner's speed splits never use it.
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


def rows_split(graph: Graph, node: Node) -> Split:
    """The rows cut of a node's value: part i holds rows [lo, hi) of axis 0. Inputs of the node's rank
    with the same rows are cut with it; the others (a scalar, a row broadcast) are read whole. Only an
    elementwise node computes its rows this way (computes_rows)."""
    ins = tuple(0 if len(s) == len(node.shape) and s[:1] == node.shape[:1] else None
                for s in (graph.nodes[i].shape for i in node.inputs))
    return Split("rows", 0, ins)


def cuts_of(graph: Graph, node: Node) -> tuple[Split, ...]:
    """Every cut a part of the node's value may be of: its op's splits, then its rows (not for a scalar)."""
    rows = (rows_split(graph, node),) if node.shape else ()
    return splits_of(graph, node) + rows


def rows_part(graph: Graph, node: Node, index: int, parts: int) -> Part:
    """Part `index` of `parts` of the node's rows."""
    return Part(len(splits_of(graph, node)), index, parts)


def is_rows(graph: Graph, node: Node, split: int) -> bool:
    return split == len(splits_of(graph, node))


def computes_rows(graph: Graph, node: Node) -> bool:
    """Whether a node task may compute a rows part of the node: an elementwise op that a unit computes."""
    op = get_op(node.op)
    return bool(node.shape) and op.category == "elementwise" and op.collective is None


def take_part(graph: Graph, node: Node, part: Part, value: np.ndarray) -> np.ndarray:
    """A part of the node's whole value."""
    split, lo, hi = _span(graph, node, part)
    return np.ascontiguousarray(value[(slice(None),) * split.out_axis + (slice(lo, hi),)])


def rows_shape(shape: Shape, index: int, parts: int) -> Shape:
    """The shape of rows part `index` of `parts` of a value of `shape`."""
    lo, hi = bounds(shape[0], parts, index)
    return (hi - lo,) + tuple(shape[1:])


def take_rows(value: np.ndarray, index: int, parts: int) -> np.ndarray:
    """Rows part `index` of `parts` of a whole value (bounds along axis 0)."""
    lo, hi = bounds(value.shape[0], parts, index)
    return np.ascontiguousarray(value[lo:hi])


def _cut(shape: Shape, axis: int | None, lo: int, hi: int) -> Shape:
    if axis is None:
        return shape
    return shape[:axis] + (hi - lo,) + shape[axis + 1:]


def _span(graph: Graph, node: Node, part: Part) -> tuple[Split, int, int]:
    """The split a part is cut along, and the [lo, hi) of the split axis it covers."""
    split = cuts_of(graph, node)[part.split]
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


def slice_inputs(graph: Graph, node: Node, part: Part, args: Sequence[np.ndarray],
                 sliced: Sequence[bool] = ()) -> list[np.ndarray]:
    """The part's inputs from the whole node's input arrays; `sliced[j]`: input j arrived as the part's
    slice already (a ZeRO shard, or the same part of another node), so it is taken as it is."""
    split, lo, hi = _span(graph, node, part)
    out = []
    for j, (arr, axis) in enumerate(zip(args, split.in_axes)):
        if axis is not None and not (j < len(sliced) and sliced[j]):
            arr = np.ascontiguousarray(arr[(slice(None),) * axis + (slice(lo, hi),)])
        out.append(arr)
    return out


def part_node(graph: Graph, node: Node, part: Part) -> Node:
    """The node as a part computes it: its op with the part's output shape and attributes."""
    _, out, attrs = part_geometry(graph, node, part)
    return Node(node.id, node.op, node.inputs, attrs, out, node.dtype, node.name, node.phase)


def assemble(graph: Graph, node: Node, split: int, pieces: Sequence[np.ndarray]) -> np.ndarray:
    """The node's whole value from its parts' values, in part order."""
    return np.concatenate(pieces, axis=cuts_of(graph, node)[split].out_axis)
