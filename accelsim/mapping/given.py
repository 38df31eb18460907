"""A user's mapping for one layer (schedule/mappings.LayerMapping) applied to the mapper: a complete one as the
Mapping it names, a partial one as the part of the space it leaves (LayerDims x LayerMapping -> Mapping or
MappingSpace). Dimensions of extent 1 change nothing and the space never places them, so a partial mapping
may list them or not: they are dropped before matching."""
from __future__ import annotations

from accelsim.mapping.dims import LayerDims
from accelsim.mapping.errors import MappingSpecError
from accelsim.mapping.record import DATAFLOW_ROLES, Mapping
from accelsim.mapping.space import DataflowSpace, MappingSpace, canonical_order
from accelsim.mapping.entry import LayerMapping


def _problem(layer: LayerDims, given: LayerMapping, msg: str) -> MappingSpecError:
    return MappingSpecError(f"the mapping given for layer {given.layer!r} ({layer.describe()}) on unit "
                            f"{given.unit!r}: {msg}")


def _check_names(layer: LayerDims, given: LayerMapping) -> None:
    names = [d.name for d in layer.dims]
    listed = [("rows", d) for d in given.rows or ()] + [("cols", d) for d in given.cols or ()]
    listed += [("stream", d) for d, _ in given.stream or ()]
    for key, name in listed:
        if name not in names:
            raise _problem(layer, given, f"{key}: no dimension {name!r} (the layer's: {', '.join(names)})")
    for key, values in (("rows", given.rows or ()), ("cols", given.cols or ()),
                        ("stream", tuple(n for n, _ in given.stream or ()))):  # a name given twice was dropped
        twice = next((v for i, v in enumerate(values) if v in values[:i]), None)
        if twice is not None:
            raise _problem(layer, given, f"{key}: {twice!r} is listed twice in {list(values)}; list each once")


def given_mapping(layer: LayerDims, given: LayerMapping, rows: int, cols: int) -> Mapping:
    """The Mapping a complete entry names; its order, when left out, is the canonical one. (check_mapping,
    run when it is costed, refuses one that does not fit the layer or the unit.)"""
    _check_names(layer, given)
    order = given.order if given.order is not None else \
        canonical_order(layer, rows, cols, given.rows, given.cols, given.stream)
    return Mapping(given.dataflow, given.rows, given.cols, given.stream, order)


def _placed(layer: LayerDims, names: tuple[str, ...] | None) -> frozenset[str] | None:
    return None if names is None else frozenset(n for n in names if layer.size(n) > 1)


def constrained_space(space: MappingSpace, given: LayerMapping) -> MappingSpace:
    """The points of `space` that agree with every choice `given` makes (a partial entry: its order is refused,
    as the order is not searched); MappingSpecError saying why when none does."""
    layer = space.layer
    _check_names(layer, given)
    if given.order is not None:
        raise _problem(layer, given, "order: a loop order is kept only with a complete mapping (dataflow, rows, "
                                     "cols and stream all given); leave it out to let the mapper order the loops")
    rows, cols = _placed(layer, given.rows), _placed(layer, given.cols)
    tiles = dict(given.stream or ())
    kept, why = [], []
    for df in space.spaces:
        row_role, col_role, stream_role = DATAFLOW_ROLES[df.dataflow]
        if given.dataflow is not None and df.dataflow != given.dataflow:
            continue
        row_sets = tuple(s for s in df.row_sets if rows is None or frozenset(s) == rows)
        col_sets = tuple(s for s in df.col_sets if cols is None or frozenset(s) == cols)
        off_role = [n for n, _ in tiles.items() if layer.size(n) > 1 and layer.dim(n).role != stream_role]
        if not row_sets or not col_sets or off_role:
            why.append(f"{df.dataflow} puts {row_role}-role dimensions on rows, {col_role}-role on cols and streams "
                       f"{stream_role}-role ones")
            continue
        choices = []
        for name, options in zip(df.stream_dims, df.tiles):
            tile = tiles.get(name)
            if tile is None:
                choices.append(options)
            elif isinstance(tile, bool) or not isinstance(tile, int) or not 1 <= tile <= layer.size(name) \
                    or layer.size(name) % tile:
                raise _problem(layer, given, f"stream.{name}: {tile!r} elements per fold does not divide "
                                             f"{name}={layer.size(name)}; expected a divisor of it")
            else:
                choices.append((tile,))
        kept.append(DataflowSpace(df.dataflow, row_sets, col_sets, df.stream_dims, tuple(choices)))
    if not kept:
        allowed = ", ".join(df.dataflow for df in space.spaces)
        detail = "; ".join(why) if why else f"the unit allows only {allowed}"
        raise _problem(layer, given, f"no mapping the unit allows agrees with {', '.join(given.given())} "
                                     f"({detail})")
    return MappingSpace(layer, space.rows, space.cols, tuple(kept))


def allows(space: MappingSpace, mapping: Mapping) -> bool:
    """Whether `mapping`'s choices (dataflow, row and column sets, stream tiles) are a point of `space`."""
    for df in space.spaces:
        if df.dataflow == mapping.dataflow and mapping.rows in df.row_sets and mapping.cols in df.col_sets:
            tiles = dict(mapping.stream)
            return all(tiles.get(name) in options for name, options in zip(df.stream_dims, df.tiles))
    return False
