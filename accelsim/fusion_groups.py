"""Fusion groups of a graph (Graph -> the layer-fused chains and their tiles), for the planner's tile order,
the per-layer report and the timeline.

The layer-fusion pass (passes/fuse_layers.py) builds tile t of T of a chain in layer `tile_layer(name, t, T)`,
one tile after the other (depth-first), and ends the chain with the concat of the tiles in the chain's last
layer. The label is the one fact the pass leaves on its nodes, so this module both writes it (tile_layer) and
reads it back (fusion_groups); it imports nothing but the IR, so the simulator and the reports may use it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from accelsim.graph.ir import Graph

_TILE = re.compile(r"^(?P<layer>.*)\[tile (?P<t>[1-9][0-9]*)/(?P<of>[1-9][0-9]*)\]$")


def tile_layer(layer: str, tile: int, tiles: int) -> str:
    """The layer of tile `tile` (1-based) of `tiles` of a fused chain's layer `layer`."""
    return f"{layer}[tile {tile}/{tiles}]"


def untiled(layer: str) -> tuple[str, int, int]:
    """`layer` without its tile tag, and the tag's (tile, tiles); (layer, 0, 0) when it has none."""
    m = _TILE.match(layer) if layer.endswith("]") else None
    return (m["layer"], int(m["t"]), int(m["of"])) if m else (layer, 0, 0)


@dataclass(frozen=True)
class FusionGroup:
    """One fused chain: its label ("first .. last" layer), and per tile, first tile first, the ids of its
    computed (non-leaf) nodes in id order; the last id of a tile is its output, which the group's concat
    (`concat`) reads."""

    label: str
    tiles: tuple[tuple[int, ...], ...]
    concat: int

    def nodes(self) -> tuple[int, ...]:
        """Every computed node of the group, its concat included."""
        return tuple(i for tile in self.tiles for i in tile) + (self.concat,)


def fusion_groups(graph: Graph) -> tuple[FusionGroup, ...]:
    """The fusion groups of `graph` in id order (() for a graph no fusion pass rewrote): each a run of
    computed nodes in tile layers 1..T, in tile order, closed by the concat of the T tile outputs."""
    groups: list[FusionGroup] = []
    tiles: list[list[int]] = []
    first = ""
    for n in graph.nodes:
        if n.is_leaf:
            continue
        layer, t, of = untiled(n.layer)
        if t:
            if t == len(tiles) + 1:
                tiles.append([])
                first = layer if t == 1 else first
            if t != len(tiles) or not tiles:  # not the tile being built nor the next: a label of another kind
                tiles, first = [], ""
                continue
            tiles[-1].append(n.id)
            continue
        if tiles and n.op == "concat" and tuple(n.inputs) == tuple(tile[-1] for tile in tiles):
            groups.append(FusionGroup(f"{first} .. {layer}", tuple(map(tuple, tiles)), n.id))
        tiles, first = [], ""
    return tuple(groups)


def group_internal_nodes(graph: Graph) -> frozenset[int]:
    """The nodes whose value a fusion group both produces and consumes: every computed node of a group but its
    concat (the group's output), read by no node outside the group and no graph output. Layer fusion keeps
    these between-tile values on chip; only a group's inputs and its concat cross to where activations live
    (hw/placement.py)."""
    groups = fusion_groups(graph)
    if not groups:
        return frozenset()
    readers: dict[int, set[int]] = {}
    for n in graph.nodes:
        for i in n.inputs:
            readers.setdefault(i, set()).add(n.id)
    outputs = set(graph.outputs.values())
    inside: set[int] = set()
    for g in groups:
        members = set(g.nodes())
        inside.update(i for i in members - {g.concat}
                      if i not in outputs and readers.get(i, set()) <= members)
    return frozenset(inside)


def group_of_nodes(graph: Graph) -> dict[int, str]:
    """Node id -> the label of the fusion group it belongs to (its tiles' nodes and the concat)."""
    return {i: g.label for g in fusion_groups(graph) for i in g.nodes()}
