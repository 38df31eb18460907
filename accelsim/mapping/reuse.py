"""Reuse analysis: how many elements of each operand a mapping fetches into its operand buffer, from the
fold-loop order and the buffer's capacity: (LayerDims, Mapping, Geometry, capacities) -> OperandFetch.

Walk the fold loops from the innermost out, tracking an operand's footprint (the elements the loops inside
touch) and how many times that footprint is fetched:
- a loop over a dimension that indexes the operand enlarges the footprint (new elements, each fetched once
  per time the footprint is);
- a loop that does not index it repeats the inner loops on the same elements: they stay in the buffer if the
  footprint fits its active part, else the whole footprint is fetched again every iteration (a cyclic sweep
  through a smaller buffer reuses nothing).
A stationary operand (indexed by both fold loops) is thus fetched once; a streamed one once per sweep unless
it fits. For the output operand a refetch is a spill: every extra pass writes its partial sums out and reads
them back. A conv's input is judged by its raw pixels (what a buffer holding the layer's input keeps), and
fetched raw when it is never swept twice; otherwise each sweep fetches its im2col rows.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from accelsim.mapping.dims import OPERAND_ROLES, LayerDims
from accelsim.mapping.record import Geometry, Mapping

OPERANDS = ("input", "weight", "output")


@dataclass(frozen=True, slots=True)
class OperandFetch:
    """One operand at the operand-buffer level: its tile inside one fold, its whole view, and the elements
    moved from the backing memory (for the output: written; `passes` - 1 of them read back)."""

    operand: str
    tile_elems: int
    view_elems: int
    passes: int  # how many times the whole view moves (1: full reuse)
    fetched_elems: int


def _axis_roles(layer: LayerDims, mapping: Mapping) -> dict[str, str | None]:
    """The role each fold loop's index belongs to (a fold axis holds dimensions of one role)."""
    roles: dict[str, str | None] = {}
    by_name = {d.name: d for d in layer.dims}
    for axis, dims in (("rows", mapping.rows), ("cols", mapping.cols)):
        sized = [by_name[d].role for d in dims if by_name[d].size > 1]
        roles[axis] = sized[0] if sized else None
    roles.update({d.name: d.role for d in layer.dims})
    return roles


def operand_fetches(layer: LayerDims, mapping: Mapping, geom: Geometry, rows: int, cols: int,
                    active_elems: dict[str, int]) -> dict[str, OperandFetch]:
    """Each operand's fetches into a buffer whose active part holds `active_elems[operand]` elements
    (module docstring)."""
    roles = _axis_roles(layer, mapping)
    sizes = layer.sizes()
    inner = {"rows": min(rows, geom.spatial_rows), "cols": min(cols, geom.spatial_cols), **geom.tiles}
    full = {"rows": geom.spatial_rows, "cols": geom.spatial_cols, **{d: sizes[d] for d in geom.tiles}}
    raw_per_batch = layer.input_elems // max(1, layer.role_size("b"))
    loops = tuple(reversed(mapping.order))  # innermost first
    out = {}
    for operand in OPERANDS:
        relevant = OPERAND_ROLES[operand]
        conv_input = operand == "input" and layer.op == "conv2d"
        footprint = math.prod(inner[a] for a in inner if roles[a] in relevant)
        tile, passes = footprint, 1
        for loop in loops:
            if roles[loop] in relevant:
                footprint = footprint // inner[loop] * full[loop]
                continue
            held = min(footprint, raw_per_batch) if conv_input else footprint
            if held > active_elems[operand]:
                passes *= geom.loop_counts[loop]
        view = math.prod(sizes[d.name] for d in layer.dims if d.role in relevant)
        fetched = passes * view
        if conv_input and passes == 1 and raw_per_batch <= active_elems[operand]:
            fetched = layer.input_elems
        out[operand] = OperandFetch(operand, tile, view, passes, fetched)
    return out
