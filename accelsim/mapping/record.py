"""A mapping of one layer onto one array unit (a typed record) and its check against the layer and unit.

Spatial unrolling: the dimensions listed in `rows` are flattened into one index folded over the array's
rows (ceil(product / rows) row folds), as im2col does for C x FY x FX; likewise `cols`. Which roles may go
where is the dataflow's (DATAFLOW_ROLES). Every other dimension is temporal: a dimension of the dataflow's
streamed role may stream through the array `stream` elements per fold (a tile that divides it), and what
is left of each temporal dimension is a loop over folds. `order` lists those fold loops, outermost first,
by dimension name, with "rows" and "cols" for the row and column folds; on a unit with operand buffers it
must be the order their traffic model knows (mapping/gemm_view.py). Loops of one iteration may be left
out of `order`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from accelsim.mapping.dims import LayerDims
from accelsim.mapping.errors import MappingSpecError

DATAFLOW_ROLES = {"os": ("m", "n", "k"), "ws": ("k", "n", "m"), "is": ("k", "m", "n")}
"""(rows, cols, streamed) role of each dataflow: cost/systolic.py's (Sr, Sc, T) in the GEMM view's terms."""
FOLD_LOOPS = ("rows", "cols")


@dataclass(frozen=True, slots=True)
class Mapping:
    """How one layer runs on one array: dataflow, spatial unrolling, stream tiles and fold-loop order."""

    dataflow: str
    rows: tuple[str, ...]  # dimensions flattened onto the array's rows
    cols: tuple[str, ...]  # dimensions flattened onto the array's columns
    stream: tuple[tuple[str, int], ...]  # (dimension, elements streamed per fold); unlisted temporal dims: 1
    order: tuple[str, ...]  # fold loops, outermost first: dimension names, "rows", "cols"

    def describe(self) -> str:
        """One line: `ws rows<-C*FY*FX cols<-K stream N:1*OY:112*OX:112 order [cols, rows]`."""
        axis = lambda dims: "*".join(dims) or "1"  # noqa: E731
        stream = "*".join(f"{d}:{t}" for d, t in self.stream) or "1"
        return (f"{self.dataflow} rows<-{axis(self.rows)} cols<-{axis(self.cols)} stream {stream} "
                f"order [{', '.join(self.order)}]")


@dataclass(frozen=True, slots=True)
class Geometry:
    """What a checked mapping implies on a rows x cols array: extents, fold counts and loop counts."""

    spatial_rows: int  # Sr: the product of the rows dimensions
    spatial_cols: int
    row_folds: int
    col_folds: int
    temporal: int  # T: elements streamed through each fold
    tiles: dict[str, int]  # per temporal dimension, its extent inside one fold (1 unless streamed)
    loop_counts: dict[str, int]  # per fold loop ("rows", "cols", temporal dims): iterations
    folds: int


def _problem(layer: LayerDims, unit: str, key: str, msg: str) -> MappingSpecError:
    return MappingSpecError(f"mapping of {layer.describe()} on unit {unit!r}: {key}: {msg}")


def check_mapping(layer: LayerDims, mapping: Mapping, rows: int, cols: int, dataflows: tuple[str, ...],
                  unit: str) -> Geometry:
    """The mapping's geometry on a rows x cols array allowing `dataflows`; MappingSpecError naming the key."""
    if mapping.dataflow not in dataflows:
        raise _problem(layer, unit, "dataflow", f"{mapping.dataflow!r} is not one unit {unit!r} allows "
                       f"(its dataflows: {', '.join(dataflows)})")
    names = [d.name for d in layer.dims]
    by_name = {d.name: d for d in layer.dims}
    row_role, col_role, stream_role = DATAFLOW_ROLES[mapping.dataflow]
    placed: dict[str, str] = {}
    for key, listed, role in (("rows", mapping.rows, row_role), ("cols", mapping.cols, col_role),
                              ("stream", tuple(d for d, _ in mapping.stream), stream_role)):
        for name in listed:
            if name not in names:
                raise _problem(layer, unit, key, f"no dimension {name!r} (the layer's: {', '.join(names)})")
            if name in placed:
                raise _problem(layer, unit, key, f"dimension {name!r} is already on {placed[name]}; each "
                               f"dimension goes on rows, cols or stream once")
            placed[name] = key
            dim = by_name[name]
            if dim.role != role and dim.size > 1:
                raise _problem(layer, unit, key, f"dimension {name!r} ({dim.role}-role) cannot go there under "
                               f"dataflow {mapping.dataflow!r}, which puts {role}-role dimensions on {key} "
                               f"({', '.join(d.name for d in layer.of_role(role)) or 'none'})")
    tiles = {d.name: 1 for d in layer.dims if d.name not in mapping.rows and d.name not in mapping.cols}
    for name, tile in mapping.stream:
        size = by_name[name].size
        if isinstance(tile, bool) or not isinstance(tile, int) or not 1 <= tile <= size or size % tile:
            raise _problem(layer, unit, f"stream.{name}", f"{tile!r} elements per fold does not divide "
                           f"{name}={size}; expected a divisor of {size} (the folds would not cover it evenly)")
        tiles[name] = tile
    sr = math.prod(by_name[d].size for d in mapping.rows)
    sc = math.prod(by_name[d].size for d in mapping.cols)
    counts = {"rows": -(-sr // rows), "cols": -(-sc // cols)}
    counts.update({name: by_name[name].size // tile for name, tile in tiles.items()})
    seen: set[str] = set()
    for name in mapping.order:
        if name not in counts:
            raise _problem(layer, unit, "order", f"{name!r} is not a fold loop of this mapping (loops: "
                           f"{', '.join(counts)}; a dimension on rows or cols is folded by 'rows' or 'cols')")
        if name in seen:
            raise _problem(layer, unit, "order", f"{name!r} listed twice")
        seen.add(name)
    missing = [f"{name} ({count} iterations)" for name, count in counts.items() if count > 1 and name not in seen]
    if missing:
        raise _problem(layer, unit, "order", f"leaves out the fold loops {', '.join(missing)}; list every loop "
                       f"of more than one iteration so the folds cover each dimension")
    temporal = math.prod(tiles[d] for d, _ in mapping.stream)
    return Geometry(sr, sc, counts["rows"], counts["cols"], temporal, tiles, counts, math.prod(counts.values()))
