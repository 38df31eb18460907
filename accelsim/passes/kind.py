"""Which kind of graph a pass is given: inference (forward nodes only) or training (also backward and
update nodes), the distinction a pass's `applies_to` is written against (Graph -> kind)."""
from __future__ import annotations

from accelsim.graph.ir import Graph, Node

GRAPH_KINDS = ("inference", "training")


def training_node(graph: Graph) -> Node | None:
    """The first backward or update node: a training graph has one, an inference graph none."""
    return next((n for n in graph.nodes if n.phase != "forward"), None)


def graph_kind(graph: Graph) -> str:
    """"training" if the graph has backward or update nodes, else "inference"."""
    return "inference" if training_node(graph) is None else "training"
