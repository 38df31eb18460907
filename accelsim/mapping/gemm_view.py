"""A mapping as the GEMM that cost/tile_traffic.py models: (LayerDims, Mapping, Geometry) -> TrafficView.

The operand buffers have one traffic model, cost/tile_traffic.py, and a mapping is costed through it. Its
GEMM is what the mapping puts on the array: the dimensions on the rows flattened into the rows role's
extent, those on the columns into the columns role's, the stream tiles into the streamed role's (which of
M, K, N each is follows the dataflow, record.DATAFLOW_ROLES). Every other fold loop (the batch role, a
row or column role dimension left off the array, what is left of a stream after its tile) repeats that
GEMM: the model's batch, each iteration fetching its operands afresh. The model runs those repeats
outermost, then the column folds, then the row folds, and knows no other order, so a mapping on a unit
with operand buffers must list its fold loops that way (check_traffic_order). A conv keeps its im2col
geometry (where the left operand's pixels repeat) when C, FY and FX all lie whole in the GEMM's reduction
and OX whole in its rows of outputs, as im2col lays them out; otherwise its left operand is a plain matrix.
The model overlaps every repeat's initial buffer fill with neighbouring work, as it does a batched GEMM's;
mapping/cost.py charges the fills of the repeats a mapping adds beyond the layer's own batch in the node's
channel time (they happen mid-layer), so a split is not chosen for fills it would never pay for.
"""
from __future__ import annotations

from dataclasses import dataclass

from accelsim.mapping.dims import LayerDims
from accelsim.mapping.errors import MappingSpecError
from accelsim.mapping.record import DATAFLOW_ROLES, FOLD_LOOPS, Geometry, Mapping


@dataclass(frozen=True, slots=True)
class TrafficView:
    """The arguments of cost/tile_traffic.py's tile_traffic that a mapping sets."""

    batch: int  # repeats of the GEMM: the fold loops other than the row and column folds
    m: int
    k: int
    n: int
    im2col: tuple[int, int, int, int] | None  # a conv's (channels per group, kernel width, output width, stride)


def _keeps_im2col(layer: LayerDims, mapping: Mapping) -> bool:
    """C, FY and FX whole in the reduction and OX whole among the outputs (extent-1 dimensions count as whole)."""
    sizes = layer.sizes()
    on_array = set(mapping.rows) | set(mapping.cols)
    tiles = dict(mapping.stream)
    whole = lambda name: sizes[name] == 1 or name in on_array or tiles.get(name) == sizes[name]  # noqa: E731
    return all(whole(d.name) for d in layer.of_role("k")) and whole("OX")


def traffic_view(layer: LayerDims, mapping: Mapping, geom: Geometry) -> TrafficView:
    """The GEMM (and repeats) that `mapping` runs on the array, for tile_traffic (module docstring)."""
    row_role, col_role, stream_role = DATAFLOW_ROLES[mapping.dataflow]
    extent = {row_role: geom.spatial_rows, col_role: geom.spatial_cols, stream_role: geom.temporal}
    batch = geom.folds // (geom.row_folds * geom.col_folds)
    im2col = None
    if layer.op == "conv2d" and _keeps_im2col(layer, mapping):
        sizes = layer.sizes()
        im2col = (sizes["C"], sizes["FX"], sizes["OX"], layer.stride)
    return TrafficView(batch, extent["m"], extent["k"], extent["n"], im2col)


def traffic_order(mapping: Mapping, geom: Geometry) -> tuple[str, ...]:
    """`mapping`'s fold loops in the order the traffic model runs them: repeats first (as listed), then the
    column folds, then the row folds (each only when it has more than one iteration)."""
    folds = tuple(axis for axis in ("cols", "rows") if geom.loop_counts[axis] > 1)
    return tuple(loop for loop in mapping.order if loop not in FOLD_LOOPS) + folds


def check_traffic_order(layer: LayerDims, mapping: Mapping, geom: Geometry, unit: str) -> None:
    """MappingSpecError naming `order` unless the column folds, then the row folds, are the innermost loops of
    more than one iteration: the only order the operand buffers' traffic model knows."""
    expected = traffic_order(mapping, geom)
    looping = tuple(loop for loop in mapping.order if geom.loop_counts.get(loop, 1) > 1)
    if looping != tuple(loop for loop in expected if geom.loop_counts.get(loop, 1) > 1):
        raise MappingSpecError(
            f"mapping of {layer.describe()} on unit {unit!r}: order: [{', '.join(mapping.order)}] cannot be "
            f"costed through the unit's operand buffers, whose traffic model (cost/tile_traffic.py) runs "
            f"the other fold loops outermost, then the column folds, then the row folds; expected "
            f"[{', '.join(expected)}]")
