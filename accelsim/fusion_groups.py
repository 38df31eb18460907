"""Fusion groups of a graph (Graph -> the layer-fused chains and their tiles), for the planner's tile order,
the per-layer report and the timeline.

The layer-fusion pass (passes/fuse_layers.py) stages a chain's weights once, builds tile t of T of the chain one
tile after the other (depth-first), ends the chain with the concat of the tiles, and records on each of those nodes where it put it
(Node.fused: its group, tile and label); later passes carry the record (passes/rebuild.py). This module reads
the groups from those records, never from layer names: a user's layer named "conv[tile 1/2]" is just a name.
The tile's layer name (`tile_layer`) is for people: reports and plots show it. It imports nothing but the IR,
so the simulator and the reports may use it.
"""
from __future__ import annotations

from dataclasses import dataclass

from accelsim.graph.ir import CONCAT, STAGED, FusedTile, Graph


def tile_layer(layer: str, tile: int, tiles: int) -> str:
    """The layer name shown for tile `tile` (1-based) of `tiles` of a fused chain's layer `layer`."""
    return f"{layer}[tile {tile}/{tiles}]"


@dataclass(frozen=True)
class FusionGroup:
    """One fused chain: its label ("first .. last" layer), and per tile, first tile first, the ids of its
    computed (non-leaf) nodes in id order; the last id of a tile is its output, which the group's concat
    (`concat`) reads."""

    label: str
    tiles: tuple[tuple[int, ...], ...]
    concat: int
    staged: tuple[int, ...] = ()  # the copies of its weights made once before its tiles, which they all read

    def nodes(self) -> tuple[int, ...]:
        """Every computed node of the group, its staged weights and its concat included."""
        return self.staged + tuple(i for tile in self.tiles for i in tile) + (self.concat,)


def fusion_groups(graph: Graph) -> tuple[FusionGroup, ...]:
    """The fusion groups of `graph` in id order of their concats (() for a graph no fusion pass rewrote): the
    computed nodes recording tiles 1..T of one group (Node.fused), closed by the group's concat of the T tile
    outputs. A group whose record a later rewrite broke (a tile missing, a concat reading other nodes) is
    none."""
    tiles: dict[int, dict[int, list[int]]] = {}
    concats: dict[int, list[int]] = {}
    staged: dict[int, list[int]] = {}
    tags: dict[int, FusedTile] = {}
    for n in graph.nodes:
        tag = n.fused
        if tag is None or n.is_leaf:
            continue
        tags.setdefault(tag.group, tag)
        if tag.tile == CONCAT:
            concats.setdefault(tag.group, []).append(n.id)
        elif tag.tile == STAGED:
            staged.setdefault(tag.group, []).append(n.id)
        else:
            tiles.setdefault(tag.group, {}).setdefault(tag.tile, []).append(n.id)
    groups = []
    for group, ids in concats.items():
        tag, by_tile = tags[group], tiles.get(group, {})
        per_tile = tuple(tuple(by_tile.get(t, ())) for t in range(1, tag.tiles + 1))
        concat = graph.nodes[ids[-1]]
        if (len(ids) == 1 and concat.op == "concat" and set(by_tile) == set(range(1, tag.tiles + 1))
                and tuple(concat.inputs) == tuple(tile[-1] for tile in per_tile)):
            groups.append(FusionGroup(tag.label, per_tile, concat.id, tuple(staged.get(group, ()))))
    return tuple(sorted(groups, key=lambda g: g.concat))


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
