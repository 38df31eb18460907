"""Depth-first order of fused tiles (Graph, planned tasks -> ordering edges added in place).

Layer fusion (passes/fuse_layers.py) pays off only when a chain runs tile by tile: tile t's layers one after the
other while its intermediates are on chip, then tile t + 1's. The tiles are independent nodes, so a list
scheduler free to choose would start every tile's first layer before any second layer (breadth-first), keeping
all tiles' intermediates alive at once: the whole-layer working set fusion was meant to avoid. Ordering edges
(TaskSpec.after) let tile t start only once tile t - w has ended, so at most w tiles of a group are in flight:
w = TILES_IN_FLIGHT, one tile's next layer overlapping the following tile's first layer on another unit (double
buffering), or as many as the instances of a unit the group's tasks may run on (four cores each take a tile).
"""
from __future__ import annotations

from accelsim.compiler.planning.tasks import TaskSpec
from accelsim.fusion_groups import fusion_groups
from accelsim.graph.ir import Graph

TILES_IN_FLIGHT = 2
"""Tiles of one fusion group in flight at once, at least (module docstring)."""


def tiles_in_flight(instances: int) -> int:
    """Tiles of a group in flight when its tasks may run on up to `instances` instances of one unit."""
    return max(TILES_IN_FLIGHT, instances)


def order_fused_tiles(graph: Graph, tasks: list[TaskSpec]) -> int:
    """Add the ordering edges that keep each fusion group of `graph` depth-first to the tasks of its tiles, per
    (micro-batch, replica, tensor-parallel rank's chip); the number of edges added. Deterministic: tasks
    ascend by id."""
    groups = fusion_groups(graph)
    if not groups:
        return 0
    by_node: dict[int, list[TaskSpec]] = {}
    for t in tasks:
        if t.kind == "node":
            by_node.setdefault(t.node, []).append(t)
    added = 0
    for group in groups:
        window = tiles_in_flight(max((n for i in group.nodes() for t in by_node.get(i, []) for _, n, _ in t.options),
                                     default=1))
        for k in range(window, len(group.tiles)):
            members = set(group.tiles[k])
            entries = [i for i in group.tiles[k] if not members.intersection(graph.nodes[i].inputs)]
            ends: dict[tuple[int, int, int], list[int]] = {}
            for t in by_node.get(group.tiles[k - window][-1], []):
                ends.setdefault((t.microbatch, t.replica, t.chip), []).append(t.id)
            for node in entries:
                for t in by_node.get(node, []):
                    new = [e for e in ends.get((t.microbatch, t.replica, t.chip), []) if e not in t.deps
                           and e not in t.after]
                    if new:
                        t.after = sorted(t.after + new)
                        added += len(new)
    return added
