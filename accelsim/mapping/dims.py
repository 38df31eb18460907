"""A layer's loop dimensions, taken from a graph node: Graph node -> LayerDims.

A conv2d is the 7-deep loop nest G (groups), N (images), K (out channels per group), C (in channels per
group), OY, OX (output rows, columns), FY, FX (filter rows, columns); any other op with a GEMM view
(matmul, its fused epilogue, the conv gradients) is B (batch) x M x K x N of that view. Each dimension has
a role in the GEMM the array computes: "m" indexes the left operand and the output, "k" is reduced
(indexes the left and right operands), "n" indexes the right operand and the output, "b" indexes all three
(independent GEMMs). Roles are what dataflows and the traffic view work with; names are what users read.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from accelsim.graph.ir import Graph, Node
from accelsim.mapping.errors import MappingSpecError
from accelsim.ops.registry import get_op, numel

ROLES = ("b", "m", "k", "n")
OPERAND_ROLES = {"input": frozenset("bmk"), "weight": frozenset("bkn"), "output": frozenset("bmn")}
"""The roles that index each operand: left (input), right (weight) and output of the GEMM view."""

CONV_DIMS = (("G", "b"), ("N", "m"), ("K", "n"), ("C", "k"), ("OY", "m"), ("OX", "m"), ("FY", "k"), ("FX", "k"))
GEMM_DIMS = (("B", "b"), ("M", "m"), ("K", "k"), ("N", "n"))


@dataclass(frozen=True, slots=True)
class Dim:
    """One loop of a layer: its name, its extent and its role in the GEMM view."""

    name: str
    size: int
    role: str


@dataclass(frozen=True, slots=True)
class LayerDims:
    """The loop nest of one layer plus what its cost needs besides the loops; hashable, so that layers of
    the same shape (the mapper's cache key) compare equal whatever their node ids."""

    op: str
    dims: tuple[Dim, ...]
    input_elems: int  # distinct elements of the left operand (a conv's raw input, fewer than its im2col view)
    flops: int
    read_elems: int
    written_elems: int
    dtype: str
    stride: int = 1  # a conv's stride along the width, where its im2col pixels repeat (cost/tile_traffic.py)
    stride_h: int = 1  # a conv's stride along the height (the pixels a tile of its rows touches: mapping/onload.py)

    def size(self, name: str) -> int:
        return self.dim(name).size

    def sizes(self) -> dict[str, int]:
        """Extent by dimension name (build once where a loop asks for many)."""
        return {d.name: d.size for d in self.dims}

    def dim(self, name: str) -> Dim:
        for d in self.dims:
            if d.name == name:
                return d
        raise MappingSpecError(f"{self.op} layer has no dimension {name!r}; its dimensions are "
                               f"{', '.join(d.name for d in self.dims)}")

    def of_role(self, role: str) -> tuple[Dim, ...]:
        return tuple(d for d in self.dims if d.role == role)

    def role_size(self, role: str) -> int:
        """The extent of a role: the product of its dimensions (a conv's m is N*OY*OX)."""
        return math.prod(d.size for d in self.of_role(role))

    @property
    def macs(self) -> int:
        return math.prod(d.size for d in self.dims)

    def operand_elems(self, operand: str) -> int:
        """Elements of an operand's GEMM view (a conv's input as its im2col matrix)."""
        return math.prod(d.size for d in self.dims if d.role in OPERAND_ROLES[operand])

    def describe(self) -> str:
        return f"{self.op} " + " ".join(f"{d.name}={d.size}" for d in self.dims)


def layer_dims(graph: Graph, node: Node) -> LayerDims:
    """The loop dimensions of `node` (a conv2d, or any op with a GEMM view); MappingSpecError otherwise."""
    op = get_op(node.op)
    if op.gemm is None:
        raise MappingSpecError(f"{node.op} node %{node.id} {node.name!r} has no GEMM view (OpDef.gemm), so no "
                               f"loop nest an array could map; only tensor ops (matmul, conv2d and their "
                               f"gradients) are mapped")
    shapes = tuple(graph.nodes[i].shape for i in node.inputs)
    flops = int(op.flops(node.shape, *shapes, **node.attrs))
    read = int(op.read_elems(node.shape, *shapes, **node.attrs))
    written = int(op.written_elems(node.shape, *shapes, **node.attrs))
    batch, m, k, n = (int(v) for v in op.gemm(node.shape, *shapes, **node.attrs))
    if node.op == "conv2d":
        (images, _, oy, ox), (_, c, fy, fx) = node.shape, shapes[1]
        sizes = dict(G=batch, N=images, K=n, C=c, OY=oy, OX=ox, FY=fy, FX=fx)
        dims = tuple(Dim(name, int(sizes[name]), role) for name, role in CONV_DIMS)
        unique_left = numel(shapes[0])
    else:
        sizes = dict(B=batch, M=m, K=k, N=n)
        dims = tuple(Dim(name, sizes[name], role) for name, role in GEMM_DIMS)
        unique_left = batch * m * k
    layer = LayerDims("conv2d" if node.op == "conv2d" else "gemm", dims, int(unique_left), flops, read, written,
                      node.dtype, int(node.attrs["stride"][1]) if node.op == "conv2d" else 1,
                      int(node.attrs["stride"][0]) if node.op == "conv2d" else 1)
    assert (layer.role_size("b"), layer.role_size("m"), layer.role_size("k"), layer.role_size("n")) == \
        (batch, m, k, n), f"{node.op}: loop dims {layer.describe()} disagree with its GEMM view {(batch, m, k, n)}"
    return layer
