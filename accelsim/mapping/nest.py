"""A mapping shown as the loop nest it runs (LayerDims, Mapping, array rows x cols -> LoopNest): the fold loops
outermost first with their iterations (a dimension's loop steps by its stream tile; "rows" and "cols" fold what
does not fit on the array), then what one fold does: the dimensions flattened onto the array's rows and
columns and the elements streamed through it, and what the layer loads before its first MAC when run alone
(mapping/onload.py; a schedule overlaps it with the predecessors). For the per-layer report's JSON (the nest)
and its CSV and table (one compact line)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from accelsim.mapping.dims import LayerDims
from accelsim.mapping.onload import ResidentTile, resident_tile
from accelsim.mapping.record import Mapping, check_mapping


@dataclass(frozen=True, slots=True)
class Axis:
    """The dimensions flattened onto one array axis, their product and the axis's length."""

    dims: tuple[str, ...]
    extent: int
    length: int


@dataclass(frozen=True, slots=True)
class LoopNest:
    """One layer's mapping on one unit as loops: `loops` (name, iterations, tile: elements per iteration of a
    dimension's loop, 0 for the row and column folds), outermost first; the array's axes; the streamed tiles."""

    unit: str
    dataflow: str
    loops: tuple[tuple[str, int, int], ...]
    rows: Axis
    cols: Axis
    stream: tuple[tuple[str, int], ...]
    resident: ResidentTile

    def compact(self) -> str:
        """One line: `is rows<-C*FY*FX:576/128 cols<-OY*OX:1024/256 | cols x4 rows x5 | stream K:64`."""
        axis = lambda a: f"{'*'.join(a.dims) or '1'}:{a.extent}/{a.length}"  # noqa: E731
        loops = " ".join(f"{name} x{n}" for name, n, _ in self.loops) or "one fold"
        stream = " ".join(f"{d}:{t}" for d, t in self.stream) or "1"
        return (f"{self.unit} {self.dataflow} rows<-{axis(self.rows)} cols<-{axis(self.cols)} | {loops} | "
                f"stream {stream}")

    def lines(self) -> list[str]:
        """The nest as indented pseudo-code, outermost loop first."""
        out = []
        for depth, (name, n, tile) in enumerate(self.loops):
            step = f" step {tile}" if tile > 1 else ""
            what = {"rows": f" ({'*'.join(self.rows.dims)} = {self.rows.extent} over {self.rows.length} rows)",
                    "cols": f" ({'*'.join(self.cols.dims)} = {self.cols.extent} over {self.cols.length} cols)"}
            out.append("  " * depth + f"for {name} in {n} iterations{step}{what.get(name, '')}:")
        pad = "  " * len(self.loops)
        out.append(f"{pad}array ({self.dataflow}): rows <- {'*'.join(self.rows.dims) or '1'}, cols <- "
                   f"{'*'.join(self.cols.dims) or '1'}")
        out.append(f"{pad}stream " + (", ".join(f"{d}: {t}" for d, t in self.stream) or "1 element") + " per fold")
        r = self.resident
        reuse = lambda loop: f" (reused across {loop})" if loop else " (the first fold's)"  # noqa: E731
        out.append(f"loaded before the first MAC when run alone: input {r.input_elems:,} elements"
                   f"{reuse(r.input_reused_by)}, weight {r.weight_elems:,}{reuse(r.weight_reused_by)}")
        return out

    def to_dict(self) -> dict:
        axis = lambda a: {"dims": list(a.dims), "extent": a.extent, "array": a.length}  # noqa: E731
        return {"unit": self.unit, "dataflow": self.dataflow, "rows": axis(self.rows), "cols": axis(self.cols),
                "loops": [{"loop": name, "iterations": n, "tile": tile} for name, n, tile in self.loops],
                "stream": dict(self.stream), "nest": self.lines(), "compact": self.compact(),
                "resident": {"input_elems": self.resident.input_elems, "weight_elems": self.resident.weight_elems,
                             "input_reused_by": self.resident.input_reused_by,
                             "weight_reused_by": self.resident.weight_reused_by}}


def loop_nest(layer: LayerDims, mapping: Mapping, rows: int, cols: int, dataflows: tuple[str, ...],
              unit: str) -> LoopNest:
    """`mapping` of `layer` on a rows x cols array as its loop nest (checked first: MappingSpecError if it
    does not fit)."""
    geom = check_mapping(layer, mapping, rows, cols, dataflows, unit)
    sizes = layer.sizes()
    loops = tuple((name, geom.loop_counts[name], 0 if name in ("rows", "cols") else geom.tiles[name])
                  for name in mapping.order if geom.loop_counts[name] > 1)
    row_extent = math.prod(sizes[d] for d in mapping.rows)
    col_extent = math.prod(sizes[d] for d in mapping.cols)
    return LoopNest(unit, mapping.dataflow, loops, Axis(mapping.rows, row_extent, rows),
                    Axis(mapping.cols, col_extent, cols), mapping.stream, resident_tile(layer, mapping, geom, rows, cols))
