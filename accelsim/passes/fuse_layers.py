"""Layer fusion (Graph -> Graph): each chain of consecutive layers (fuse_chains.py) is rewritten into T
tiles along the output rows (H) of its last layer, computed depth-first, then concatenated.

For tile t the pass slices the chain's input rows the tile needs (the receptive field with its halo,
layer_tiles.py), makes a window's padding explicit where the tile touches the tensor's edge (blocks of
zeros, or of the lowest finite value for max pooling, concatenated along H, as the ONNX importer
emulates asymmetric padding), runs every layer of the chain on the tile with the same ops, and concats
the T output tiles: depth-first (layer-fused) execution as in Alwani et al., "Fused-layer CNN
accelerators" (MICRO 2016) and Stream (Symons et al., "Towards Heterogeneous Multi-core Accelerators
Exploiting Fine-grained Scheduling of Layer-Fused Deep Neural Networks", 2023). Each tile's layer is an
ordinary node, so an ordinary task: the memory planner keeps the small intermediate tiles on chip, and
ports, the simulators and `check` need nothing new. Each weight is staged once per group (a copy the tiles
read, kept on chip where the memory planner finds room, as Stream keeps a group's weights in its cores), so it
crosses from where parameters live once, not once per tile (with stage_weights=False, the passes
fuse_layers_t<T>_unstaged, every tile reads the weights itself: compile's fallback where the copies do not
fit memory, compiler/fusion.py); each tile's nodes and the concat record their fusion group
(Node.fused), which the planner and the reports read (fusion_groups.py). Its costs are real and counted as such: the halo
rows that overlapping tiles recompute (FLOPs), the weights' staging copies, and where a staged weight finds
no room on chip, the weights every tile reads again (traffic).
Values are the unfused graph's: every output element is computed from the same inputs by the same op.
Inference graphs only: a training graph's backward pass reads the intermediates fusion would drop.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

import numpy as np

from accelsim.errors import GraphError
from accelsim.fusion_groups import tile_layer
from accelsim.graph.ir import CONCAT, STAGED, FusedTile, Graph
from accelsim.layer_names import layer_names
from accelsim.limits import FUSION_TILES  # noqa: F401  (re-exported: the tile counts of the fusion passes)
from accelsim.passes.fuse_chains import Chain, Member, plan_fusion
from accelsim.passes.layer_tiles import Band, chain_bands, tile_rows
from accelsim.passes.rebuild import Rebuild, Rewrite




UNSTAGED = "_unstaged"
"""The suffix of a fusion pass whose tiles each read the weights themselves (no staged copy)."""


def pass_name(tiles: int, stage_weights: bool = True) -> str:
    """The pass that fuses every chain into `tiles` tiles, staging each weight once for the tiles or not
    (compile falls back to the unstaged pass where the staged copies do not fit: compiler/fusion.py)."""
    return f"fuse_layers_t{tiles}" + ("" if stage_weights else UNSTAGED)


def _pad_value(op: str, dtype: str) -> float:
    """What a window's padding holds: zeros (convolution, average pooling counts them), or for max pooling
    the lowest finite value, which never wins a window holding an input row (pool padding <= kernel // 2)."""
    return float(-np.finfo(np.dtype(dtype)).max) if op == "max_pool2d" else 0.0


def _rows(rb: Rebuild, x: int, start: int, stop: int, layer: str) -> int:
    """Rows [start, stop) along H of NCHW node `x` of the graph being built (x itself if that is all)."""
    n, c, h, _ = rb.node(x).shape
    if (start, stop) == (0, h):
        return x
    with rb.out.layer(layer):
        out = rb.emit("slice", (x,), {"starts": (0, 0, start), "stops": (n, c, stop)}, "forward")
    assert out is not None
    return out


def _padded(rb: Rebuild, x: int, band: Band, value: float, layer: str) -> int:
    """`x` with band.pad_top and band.pad_bottom rows of `value` concatenated above and below."""
    if not band.pad_top and not band.pad_bottom:
        return x
    n, c, _, w = rb.node(x).shape
    dtype = rb.node(x).dtype
    with rb.out.layer(layer):
        scalar = rb.const(np.asarray(value), "forward", dtype)
        parts = []
        for rows, at_top in ((band.pad_top, True), (band.pad_bottom, False)):
            if rows:
                parts.append((at_top, rb.emit("broadcast_to", (scalar,), {"shape": (n, c, rows, w)}, "forward")))
        pieces = [p for top, p in parts if top] + [x] + [p for top, p in parts if not top]
        out = rb.emit("concat", tuple(pieces), {"axis": 2}, "forward")
    assert out is not None
    return out


def _staged(rb: Rebuild, m: Member, layer: str, staged: dict[int, int], tag: FusedTile) -> list[int]:
    """`m`'s inputs, each parameter read through the group's one copy of it (`staged`: new id -> its copy's),
    made here at its first reader (so a runtime that starts ready tasks in id order stages a weight just before
    the first tile needs it): a full slice in the layer of that reader, recording `tag`. The copy is a value the
    group produces and consumes, so the memory planner keeps it on chip where there is room
    (fusion_groups.group_internal_nodes): the weight then crosses from where parameters live once per group, not
    once per tile; with no room it goes where the planner finds some, and every tile reads it there."""
    inputs = list(rb.mapped(m.node))
    for k, i in enumerate(inputs):
        leaf = rb.node(i)
        if k == m.operand or leaf.op != "param" or not leaf.shape:
            continue
        if i not in staged:
            with rb.out.layer(layer):
                copy = rb.emit("slice", (i,), {"starts": (0,), "stops": (leaf.shape[0],)}, "forward",
                               name=f"{leaf.name}.staged")
            assert copy is not None
            rb.out.nodes[copy] = replace(rb.node(copy), fused=tag)
            staged[i] = copy
        inputs[k] = staged[i]
    return inputs


def _tile_member(rb: Rebuild, m: Member, x: int, band: Band, layer: str, suffix: str,
                 inputs: list[int]) -> int:
    """Member `m` computed on its tile input `x` (rows band.start..band.stop of its real input), given its
    `inputs` (new ids; its parameters' staged copies)."""
    node = m.node
    inputs = list(inputs)
    attrs = dict(node.attrs)
    if m.windowed:
        x = _padded(rb, x, band, _pad_value(node.op, node.dtype), layer)
        attrs["padding"] = (0, node.attrs["padding"][1])
    else:
        for k, i in enumerate(inputs):  # a residual read in this tile's rows; per-channel operands as they are
            if k != m.operand and len(rb.node(i).shape) == 4 and rb.node(i).shape[2] == node.shape[2] > 1:
                inputs[k] = _rows(rb, i, band.start, band.stop, layer)
    inputs[m.operand] = x
    with rb.out.layer(layer):
        out = rb.emit(node.op, tuple(inputs), attrs, "forward", name=f"{node.name}{suffix}")
    assert out is not None
    return out


def _tag(rb: Rebuild, since: int, tag: FusedTile) -> None:
    """Record `tag` on the computed nodes emitted since id `since` that have none (one tile's but its staged
    weights, or the group's concat)."""
    for i in range(since, len(rb.out.nodes)):
        if not rb.node(i).is_leaf and rb.node(i).fused is None:
            rb.out.nodes[i] = replace(rb.node(i), fused=tag)


def _fuse(rb: Rebuild, chain: Chain, tiles: int, names: tuple[str, ...], group: int,
          stage_weights: bool) -> tuple[int, int]:
    """Emit `chain` as `tiles` depth-first tiles and their concat, recording fusion group `group` on their
    nodes (Node.fused), each weight staged once for the tiles or read by every tile itself: the concat's id,
    and the rows its layers compute beyond the unfused graph's (the halo that overlapping tiles recompute)."""
    members = chain.members
    windows = [m.window for m in members]
    in_rows = [rb.source.nodes[m.node.inputs[m.operand]].shape[2] for m in members]
    source_x = rb.new_id[members[0].node.inputs[0]]
    label = f"{names[members[0].node.id]} .. {names[chain.last.id]}"
    outs, rows_computed = [], 0
    staged: dict[int, int] = {}
    for t, (start, stop) in enumerate(tile_rows(chain.last.shape[2], tiles)):
        since = len(rb.out.nodes)
        bands = chain_bands(windows, in_rows, start, stop)
        x = _rows(rb, source_x, bands[0].start, bands[0].stop, tile_layer(names[members[0].node.id], t + 1, tiles))
        for m, band in zip(members, bands):
            inputs = (_staged(rb, m, names[m.node.id], staged, FusedTile(group, STAGED, tiles, label))
                      if stage_weights else list(rb.mapped(m.node)))
            x = _tile_member(rb, m, x, band, tile_layer(names[m.node.id], t + 1, tiles), f".t{t + 1}", inputs)
            rows_computed += rb.node(x).shape[2]
        _tag(rb, since, FusedTile(group, t + 1, tiles, label))
        outs.append(x)
    since = len(rb.out.nodes)
    with rb.out.layer(names[chain.last.id]):
        out = rb.emit("concat", tuple(outs), {"axis": 2}, "forward", name=f"{chain.last.name}.tiles")
    assert out is not None
    _tag(rb, since, FusedTile(group, CONCAT, tiles, label))
    rows_needed = sum(m.node.shape[2] for m in members)
    return out, rows_computed - rows_needed


def _check_only(only: object) -> frozenset[int] | None:
    if only is None:
        return None
    if not isinstance(only, (set, frozenset)) or not all(isinstance(i, int) and not isinstance(i, bool)
                                                          for i in only):
        raise GraphError(f"fuse_layers: only must be None or a set of node ids (the first layer of each chain "
                         f"to fuse, as Rewrite.sites lists them), got {only!r:.80}")
    return frozenset(only)


def fuse_layers(graph: Graph, tiles: int, only: frozenset[int] | None = None,
                stage_weights: bool = True) -> Rewrite:
    """Fuse every chain of `graph` (only those whose first layer's id is in `only`, when given) into
    `tiles` tiles; one line per fused chain, naming its layers, tiles and recomputed halo rows. With
    `stage_weights` False every tile reads the weights itself (no staged copy that lives across the group's
    tiles: what compile falls back to where the staged copies do not fit memory)."""
    if not isinstance(tiles, int) or isinstance(tiles, bool) or tiles not in FUSION_TILES:
        raise GraphError(f"fuse_layers: tiles must be one of {', '.join(map(str, FUSION_TILES))}, got {tiles!r:.40}")
    if not isinstance(stage_weights, bool):
        raise GraphError(f"fuse_layers: stage_weights must be True or False, got {stage_weights!r:.40}")
    chosen = _check_only(only)
    by_last = {c.last.id: c for c in plan_fusion(graph, tiles).chains if chosen is None or c.anchor in chosen}
    names = layer_names(graph) if by_last else ()
    made = max((n.fused.group for n in graph.nodes if n.fused is not None), default=0)  # groups made before
    rb = Rebuild(graph)
    for old in graph.nodes:
        chain = by_last.get(old.id)
        if chain is None:
            rb.copy(old)
            continue
        made += 1
        out, halo = _fuse(rb, chain, tiles, names, made, stage_weights)
        group = f"layers {names[chain.anchor]} .. {names[chain.last.id]}"
        weights = "" if stage_weights else ", weights re-read per tile"
        if not rb.replace(old, out, f"chain {chain.describe()}, {group} -> {tiles} tiles along H, {halo} halo "
                                    f"row(s) recomputed{weights}"):
            rb.copy(old)
            continue
        rb.site(chain.anchor)
    return rb.finish()


def runner(tiles: int, stage_weights: bool = True) -> Callable[..., Rewrite]:
    """The pass function of `pass_name(tiles, stage_weights)` (PassDef.run: graph, only=None -> Rewrite)."""
    def run(graph: Graph, only: frozenset[int] | None = None) -> Rewrite:
        return fuse_layers(graph, tiles, only, stage_weights)
    weights = "each weight staged once" if stage_weights else "every tile reading the weights itself"
    run.__doc__ = f"Fuse every chain of consecutive layers into {tiles} tiles along H, {weights} (fuse_layers)."
    return run
