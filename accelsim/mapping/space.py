"""The mappings a mapper may choose from for one layer on one array unit: LayerDims x unit -> MappingSpace.

A point is a dataflow, which dimensions of its rows role are flattened onto the rows (the others become
fold loops), likewise for the columns, and a stream tile for each dimension of its streamed role; its fold
loops run in one canonical order (batch role, dimensions off the array, stream remainders, then column
folds, then row folds: im2col's). The fold-loop order is not searched. Without operand buffers it moves
no byte. With them, the buffers' one traffic model (cost/tile_traffic.py, through mapping/gemm_view.py)
runs every loop but the row and column folds as independent repeats of one GEMM, outermost, then the
column folds, then the row folds, and has no notion of another order, so that freedom is left out of the
space (and a user's mapping in another order is refused on such a unit). Stream tiles are searched only
with operand buffers: without them a split stream only adds fills and drains (one fold of T elements
costs less than two of T/2, and under fold_overlap two folds issue every max(T/2, P) >= T/2 cycles), so
streams are whole. Dimensions of extent 1 are never placed.
"""
from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass

from accelsim.mapping.dims import LayerDims
from accelsim.mapping.record import DATAFLOW_ROLES, Mapping

MAX_TILE_CHOICES = 6  # stream tiles tried per dimension: whole, 1 and divisors spread between


def _subsets(names: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    """Every subset, in a fixed order (all of them first: im2col's choice)."""
    out = [tuple(c) for r in range(len(names), -1, -1) for c in itertools.combinations(names, r)]
    return tuple(out)


def tile_choices(size: int) -> tuple[int, ...]:
    """Stream tiles for a dimension of `size`: the whole of it first, then up to MAX_TILE_CHOICES - 1
    divisors spread from large to 1."""
    divisors = [d for d in range(size, 0, -1) if size % d == 0]
    if len(divisors) <= MAX_TILE_CHOICES:
        return tuple(divisors)
    step = (len(divisors) - 1) / (MAX_TILE_CHOICES - 1)
    return tuple(sorted({divisors[round(i * step)] for i in range(MAX_TILE_CHOICES)}, reverse=True))


def canonical_order(layer: LayerDims, rows: int, cols: int, row_set: tuple[str, ...], col_set: tuple[str, ...],
                    stream: tuple[tuple[str, int], ...]) -> tuple[str, ...]:
    """The fold loops of more than one iteration, in the canonical order: batch role, outer dimensions,
    stream remainders, then columns and rows (im2col's order)."""
    tiles = dict(stream)
    placed = set(row_set) | set(col_set)
    outer = [d for d in layer.dims if d.size > 1 and d.name not in placed and tiles.get(d.name, 1) < d.size]
    loops = [d.name for d in sorted(outer, key=lambda d: (d.role != "b", d.name in tiles))]
    sizes = layer.sizes()
    sr = math.prod(sizes[d] for d in row_set)
    sc = math.prod(sizes[d] for d in col_set)
    return tuple(loops + (["cols"] if sc > cols else []) + (["rows"] if sr > rows else []))


@dataclass(frozen=True, slots=True)
class DataflowSpace:
    """The choices under one dataflow."""

    dataflow: str
    row_sets: tuple[tuple[str, ...], ...]
    col_sets: tuple[tuple[str, ...], ...]
    stream_dims: tuple[str, ...]
    tiles: tuple[tuple[int, ...], ...]  # per stream dimension, its tile choices


@dataclass(frozen=True, slots=True)
class MappingSpace:
    """All choices for one layer on one unit."""

    layer: LayerDims
    rows: int
    cols: int
    spaces: tuple[DataflowSpace, ...]

    def _loops(self, row_set: tuple[str, ...], col_set: tuple[str, ...],
               stream: tuple[tuple[str, int], ...]) -> list[str]:
        return list(canonical_order(self.layer, self.rows, self.cols, row_set, col_set, stream))

    def _build(self, df: DataflowSpace, r: int, c: int, tiles: tuple[int, ...]) -> Mapping:
        """The point (row set r, column set c, these stream tiles) of `df`, its fold loops in canonical order."""
        stream = tuple(zip(df.stream_dims, tiles))
        loops = self._loops(df.row_sets[r], df.col_sets[c], stream)
        return Mapping(df.dataflow, df.row_sets[r], df.col_sets[c], stream, tuple(loops))

    def size(self) -> int:
        """Points in the space."""
        return sum(len(df.row_sets) * len(df.col_sets) * math.prod(len(choices) for choices in df.tiles)
                   for df in self.spaces)

    def enumerate(self):
        """Every point (a generator: the space may be large)."""
        for df in self.spaces:
            for r, c in itertools.product(range(len(df.row_sets)), range(len(df.col_sets))):
                for tiles in itertools.product(*df.tiles):
                    yield self._build(df, r, c, tiles)

    def sample(self, rng: random.Random) -> Mapping:
        """One point drawn uniformly per choice (dataflow, row set, column set, tiles)."""
        df = self.spaces[rng.randrange(len(self.spaces))]
        tiles = tuple(choices[rng.randrange(len(choices))] for choices in df.tiles)
        return self._build(df, rng.randrange(len(df.row_sets)), rng.randrange(len(df.col_sets)), tiles)

    def neighbour(self, mapping: Mapping, rng: random.Random) -> Mapping:
        """A point one move away: another row or column set, or another stream tile for one dimension; a fresh
        sample where no move exists."""
        df = next((s for s in self.spaces if s.dataflow == mapping.dataflow), None)
        if df is None or mapping.rows not in df.row_sets or mapping.cols not in df.col_sets:
            return self.sample(rng)  # not a point of this space (a user's mapping listing extent-1 dimensions)
        moves = [("tile", i) for i, choices in enumerate(df.tiles) if len(choices) > 1]
        moves += [("rows", 0)] * (len(df.row_sets) > 1) + [("cols", 0)] * (len(df.col_sets) > 1)
        if not moves:
            return self.sample(rng)
        kind, i = moves[rng.randrange(len(moves))]
        stream = list(mapping.stream)
        r, c = df.row_sets.index(mapping.rows), df.col_sets.index(mapping.cols)
        if kind == "tile":
            stream[i] = (stream[i][0], df.tiles[i][rng.randrange(len(df.tiles[i]))])
        elif kind == "rows":
            r = rng.randrange(len(df.row_sets))
        else:
            c = rng.randrange(len(df.col_sets))
        return self._build(df, r, c, tuple(t for _, t in stream))


def mapping_space(layer: LayerDims, rows: int, cols: int, dataflows: tuple[str, ...], buffered: bool) -> MappingSpace:
    """The space for `layer` on a rows x cols array allowing `dataflows`; `buffered`: the unit has operand
    buffers, so stream tiles change traffic and are searched."""
    spaces = []
    for dataflow in dataflows:
        row_role, col_role, stream_role = DATAFLOW_ROLES[dataflow]
        names = lambda role: tuple(d.name for d in layer.of_role(role) if d.size > 1)  # noqa: E731
        stream_dims = names(stream_role)
        tiles = tuple(tile_choices(layer.size(d)) if buffered else (layer.size(d),) for d in stream_dims)
        spaces.append(DataflowSpace(dataflow, _subsets(names(row_role)), _subsets(names(col_role)), stream_dims,
                                    tiles))
    return MappingSpace(layer, rows, cols, tuple(spaces))
