"""Which nodes of a graph no unit of a hardware description can run (HwSpec, Graph -> nodes by kind).

The pass manager skips a pass whose result has a kind of node the machine cannot run that its input
did not have (a merged convolution whose output channels no dedicated conv unit matches, a concat on
a machine without a data-movement unit), so an optimized graph still compiles where the original did.
"""
from __future__ import annotations

from accelsim.cost.model import can_run, node_features
from accelsim.graph.ir import Graph, Node
from accelsim.hw.spec import HwSpec


def unrunnable(hw: HwSpec, graph: Graph) -> dict[str, Node]:
    """First node of each kind (op and the features a unit's `when:` reads) that no unit of any chip
    runs, keyed by a description of the kind."""
    found: dict[str, Node] = {}
    for node in graph.nodes:
        if node.is_leaf:
            continue
        feats = node_features(graph, node)
        kind = f"{node.op} {dict(sorted(feats.items()))}"
        if kind in found:
            continue
        if not any(can_run(unit, graph, node) for chip in hw.chips for unit in chip.units):
            found[kind] = node
    return found


def new_unrunnable(hw: HwSpec, before: Graph, after: Graph) -> list[Node]:
    """Nodes of `after` of a kind no unit runs that `before` did not have, one per kind, in id order."""
    known = unrunnable(hw, before)
    return [n for kind, n in unrunnable(hw, after).items() if kind not in known]
