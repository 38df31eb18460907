"""The mapping that reproduces accelsim's fixed-dataflow model (cost/systolic.py): im2col's view, the unit's
own dataflow, whole operands streamed, column folds outside row folds: (LayerDims, dataflow) -> Mapping.
"""
from __future__ import annotations

from accelsim.mapping.dims import LayerDims
from accelsim.mapping.record import DATAFLOW_ROLES, Mapping


def im2col_mapping(layer: LayerDims, dataflow: str) -> Mapping:
    """Every dimension of the rows role flattened onto the rows (a conv's C x FY x FX), of the cols role onto
    the columns, of the streamed role streamed whole; the batch role (groups, batch) outermost. Dimensions
    of extent 1 are left out (they change nothing), as the mapper's space leaves them out."""
    row_role, col_role, stream_role = DATAFLOW_ROLES[dataflow]
    placed = lambda role: tuple(d for d in layer.of_role(role) if d.size > 1)  # noqa: E731  extent 1: nowhere
    rows = tuple(d.name for d in placed(row_role))
    cols = tuple(d.name for d in placed(col_role))
    stream = tuple((d.name, d.size) for d in placed(stream_role))
    batch = tuple(d.name for d in layer.of_role("b") if d.size > 1)
    return Mapping(dataflow, rows, cols, stream, (*batch, "cols", "rows"))
