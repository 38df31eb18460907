"""Common-subexpression elimination: nodes with the same op, inputs and attributes become one
(Graph -> Graph); equal constants (same dtype, shape and bytes) become one constant.

Every op of the registry is a deterministic function of its inputs and attributes, so the later
duplicate may read the earlier node's value. Inputs and parameters are never merged: each is its own
tensor, whatever its initializer. Nodes merge only within a phase (a forward node and its backward
twin stay two: the scheduler runs phases at different times).
"""
from __future__ import annotations

from typing import Any, Hashable

from accelsim.graph.ir import Graph, Node
from accelsim.passes.rebuild import Rebuild, Rewrite


def _attr_key(attrs: Any) -> str:
    """Attributes as an exact, order-independent key (repr keeps 1, 1.0 and True apart)."""
    return repr(sorted(attrs.items()))


def _key(rb: Rebuild, old: Node) -> Hashable | None:
    """What makes two nodes interchangeable; None for inputs and parameters."""
    if old.op == "const":
        value = rb.source.leaf_value(old.id)
        return ("const", old.phase, old.dtype, tuple(old.shape), value.tobytes())
    if old.is_leaf:
        return None
    return (old.op, old.phase, rb.mapped(old), _attr_key(old.attrs))


def run(graph: Graph) -> Rewrite:
    """The CSE rewrite, one line per merged node naming the node it merged into."""
    rb = Rebuild(graph)
    first: dict[Hashable, Node] = {}  # key -> the source node of its first occurrence
    for old in graph.nodes:
        key = _key(rb, old)
        kept = first.get(key) if key is not None else None
        if kept is not None and rb.alias(old, rb.new_id[kept.id], f"duplicate of %{kept.id} {kept.name!r}"):
            continue
        rb.copy(old)
        if key is not None:
            first.setdefault(key, old)
    return rb.finish()


def cse(graph: Graph) -> Graph:
    """`graph` with duplicate computations and equal constants merged into their first occurrence."""
    return run(graph).graph
