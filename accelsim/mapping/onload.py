"""What a mapping must hold resident above the array before its first MAC: (LayerDims, Mapping, Geometry,
array rows x cols) -> the resident tile of each read operand, in elements.

Why: a layer run alone cannot stream everything while it computes. Its fold loops (outermost first) reuse an
operand across every loop that does not index it, and an operand read once from memory but used by every
iteration of such a loop must be held between them; as in ZigZag's latency model (Mei et al., "A Uniform
Latency Model for DNN Accelerators with Diverse Architectures and Dataflows", DATE 2022), a level's tile is
loaded whole before the loops under it start. So an operand's resident tile is its footprint over all the
loops inside the outermost loop that reuses it (ws under [cols, rows]: the whole input, re-read by every
column fold), or, when no fold loop reuses it, what the first fold reads (its slice of the array's axes and
its stream tiles). The output is produced, not loaded: it has no on-loading. A conv's input footprint counts
the pixels the tile's windows touch, scaled from the pixels the whole layer's windows touch (ops/conv.py),
so the whole layer's resident input is exactly what the layer reads.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from accelsim.mapping.dims import OPERAND_ROLES, LayerDims
from accelsim.mapping.record import DATAFLOW_ROLES, FOLD_LOOPS, Geometry, Mapping


@dataclass(frozen=True, slots=True)
class ResidentTile:
    """Elements of each read operand loaded before the first MAC, and the loop each is reused across (None:
    no fold loop reuses it, so only the first fold's tile)."""

    input_elems: int
    weight_elems: int
    input_reused_by: str | None
    weight_reused_by: str | None

    @property
    def elems(self) -> int:
        return self.input_elems + self.weight_elems


def _loop_indexes(loop: str, operand: str, layer: LayerDims, mapping: Mapping) -> bool:
    """Whether fold loop `loop` ("rows", "cols" or a dimension) steps through `operand`'s elements."""
    roles = OPERAND_ROLES[operand]
    if loop in FOLD_LOOPS:
        row_role, col_role, _ = DATAFLOW_ROLES[mapping.dataflow]
        return (row_role if loop == "rows" else col_role) in roles
    return layer.dim(loop).role in roles


def _reused_by(operand: str, layer: LayerDims, mapping: Mapping, geom: Geometry) -> tuple[str | None, set[str]]:
    """The outermost fold loop of more than one iteration that does not index `operand`, and the loops inside it
    (all of them run through before the operand's tile is replaced)."""
    looping = [loop for loop in mapping.order if geom.loop_counts.get(loop, 1) > 1]
    for depth, loop in enumerate(looping):
        if not _loop_indexes(loop, operand, layer, mapping):
            return loop, set(looping[depth + 1:])
    return None, set()


def _split_axis(share: int, dims: tuple[str, ...], sizes: dict[str, int]) -> dict[str, int]:
    """Per dimension, the extent `share` consecutive positions of an axis flattening `dims` (last innermost,
    as im2col lays out C x FY x FX) cover: whole inner dimensions, then part of the next."""
    out = {d: 1 for d in dims}
    left = share
    for d in reversed(dims):
        if left >= sizes[d]:
            out[d], left = sizes[d], -(-left // sizes[d])
        else:
            out[d], left = max(left, 1), 1
    return out


def _axis_shares(mapping: Mapping, geom: Geometry, rows: int, cols: int, inside: set[str]) -> dict[str, int]:
    """Positions of each array axis in the resident tile: the whole flattened extent where its fold loop is
    inside the reuse (or folds once), else the first fold's."""
    out = {}
    for axis, extent, length in (("rows", geom.spatial_rows, rows), ("cols", geom.spatial_cols, cols)):
        out[axis] = extent if axis in inside or geom.loop_counts[axis] == 1 else min(extent, length)
    return out


def _extents(layer: LayerDims, mapping: Mapping, geom: Geometry, shares: dict[str, int],
             inside: set[str]) -> dict[str, int]:
    """Per dimension, its extent in the resident tile: whole where its loop is inside the reuse, else one
    fold's (its part of the array axis's share, the stream tile)."""
    sizes = layer.sizes()
    out: dict[str, int] = {}
    out.update(_split_axis(shares["rows"], mapping.rows, sizes))
    out.update(_split_axis(shares["cols"], mapping.cols, sizes))
    for name, tile in geom.tiles.items():
        out[name] = sizes[name] if name in inside else tile
    return out


def _plain_elems(operand: str, layer: LayerDims, mapping: Mapping, shares: dict[str, int],
                 ext: dict[str, int]) -> int:
    """Elements of an operand without a halo (a weight, a GEMM's left operand): the axes' shares that index it
    (exact: a fold's tile is share positions, whatever dimensions it spans) times its temporal extents."""
    roles = OPERAND_ROLES[operand]
    row_role, col_role, _ = DATAFLOW_ROLES[mapping.dataflow]
    count = (shares["rows"] if row_role in roles else 1) * (shares["cols"] if col_role in roles else 1)
    on_array = set(mapping.rows) | set(mapping.cols)
    return count * math.prod(ext[d.name] for d in layer.dims if d.role in roles and d.name not in on_array)


def _span(outputs: int, taps: int, stride: int) -> int:
    """Input positions `outputs` windows of `taps` taps touch along one axis, padding aside: one run where the
    windows overlap or abut, separate taps where the stride skips positions."""
    return (outputs - 1) * stride + taps if taps >= stride else outputs * taps


def _conv_input_elems(layer: LayerDims, ext: dict[str, int]) -> int:
    """Pixels of a conv's input a tile of extents `ext` reads (its windows' span, padding aside, scaled to what
    the whole layer's windows read)."""
    sizes = layer.sizes()
    touched = layer.read_elems - layer.operand_elems("weight")  # what the layer's windows read (ops/conv.py)
    part = math.prod(ext[d] for d in ("G", "N", "C"))
    whole = math.prod(sizes[d] for d in ("G", "N", "C"))
    for out, taps, stride in (("OY", "FY", layer.stride_h), ("OX", "FX", layer.stride)):
        part *= _span(ext[out], ext[taps], stride)
        whole *= _span(sizes[out], sizes[taps], stride)
    return min(touched, -(-touched * part // whole))


def resident_tile(layer: LayerDims, mapping: Mapping, geom: Geometry, rows: int, cols: int) -> ResidentTile:
    """The tiles of input and weight `mapping` loads before its first MAC on a rows x cols array (module
    docstring)."""
    counts, loops = {}, {}
    for operand in ("input", "weight"):
        loops[operand], inside = _reused_by(operand, layer, mapping, geom)
        shares = _axis_shares(mapping, geom, rows, cols, inside)
        ext = _extents(layer, mapping, geom, shares, inside)
        counts[operand] = _conv_input_elems(layer, ext) if operand == "input" and layer.op == "conv2d" \
            else _plain_elems(operand, layer, mapping, shares, ext)
    return ResidentTile(counts["input"], counts["weight"], loops["input"], loops["weight"])
