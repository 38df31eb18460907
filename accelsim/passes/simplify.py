"""Algebraic simplification: identities that leave a value unchanged, one typed record per op
(Graph -> Graph).

Each identity holds exactly in floating point, for every value including inf and NaN: x*1, x/1,
x+0, x-0, x**1, -(-x); a reshape, transpose, broadcast, sum_to or slice that keeps its input as it
is; one-input concat; a reshape of a reshape and a transpose of a transpose become one node. (x*0 is
not 0 for x = inf, nor x-x, so neither is a rule.) The constant operand must be a `const` node
whose every element is 1 (or 0), and the result must have the other operand's shape, so no
broadcast is dropped.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from accelsim.graph.ir import Graph, Node
from accelsim.passes.rebuild import Rebuild, Rewrite

Result = tuple[int | None, str] | None
"""A rule's answer: (id in the new graph that computes the same value, why), or None: no match."""


@dataclass(frozen=True)
class Identity:
    """The identities of one op. `apply(rb, node, ins)`: `ins` are the node's inputs as ids of the
    graph being built; a rule may emit nodes (a composed transpose) and returns their id."""

    op: str
    doc: str
    apply: Callable[[Rebuild, Node, tuple[int, ...]], Result]


def _const_all(rb: Rebuild, new_id: int, value: float) -> bool:
    v = rb.const_value(new_id)
    return v is not None and v.size > 0 and bool(np.all(v == value))


def _keeps(rb: Rebuild, node: Node, new_id: int) -> bool:
    """`new_id` already has `node`'s shape and dtype: dropping the op loses no broadcast or cast."""
    kept = rb.node(new_id)
    return tuple(kept.shape) == tuple(node.shape) and kept.dtype == node.dtype


def _neutral(value: float, either_side: bool, name: str) -> Callable[[Rebuild, Node, tuple[int, ...]], Result]:
    """x op c -> x (and c op x -> x when `either_side`) where every element of c equals `value`."""
    def apply(rb: Rebuild, node: Node, ins: tuple[int, ...]) -> Result:
        a, b = ins
        if _const_all(rb, b, value) and _keeps(rb, node, a):
            return a, f"{name} -> its first input"
        if either_side and _const_all(rb, a, value) and _keeps(rb, node, b):
            return b, f"{name} -> its second input"
        return None
    return apply


def _same_shape_is_input(name: str) -> Callable[[Rebuild, Node, tuple[int, ...]], Result]:
    def apply(rb: Rebuild, node: Node, ins: tuple[int, ...]) -> Result:
        return (ins[0], f"{name} to the input's own shape -> its input") if _keeps(rb, node, ins[0]) else None
    return apply


def _reshape(rb: Rebuild, node: Node, ins: tuple[int, ...]) -> Result:
    if _keeps(rb, node, ins[0]):
        return ins[0], "reshape to the input's own shape -> its input"
    inner = rb.node(ins[0])
    if inner.op == "reshape":
        (x,) = inner.inputs
        if _keeps(rb, node, x):
            return x, "reshape of a reshape back to the original shape -> the original"
        return rb.emit("reshape", (x,), {"shape": tuple(node.shape)}, node.phase), "reshape of a reshape -> one reshape"
    return None


def _transpose(rb: Rebuild, node: Node, ins: tuple[int, ...]) -> Result:
    axes = tuple(node.attrs["axes"])
    if axes == tuple(range(len(axes))):
        return ins[0], "identity transpose -> its input"
    inner = rb.node(ins[0])
    if inner.op != "transpose":
        return None
    (x,) = inner.inputs
    composed = tuple(inner.attrs["axes"][a] for a in axes)  # out axis i reads x's axis inner[axes[i]]
    if composed == tuple(range(len(composed))):
        return x, "transpose of a transpose with the inverse axes -> the original"
    return rb.emit("transpose", (x,), {"axes": composed}, node.phase), "transpose of a transpose -> one transpose"


def _neg(rb: Rebuild, node: Node, ins: tuple[int, ...]) -> Result:
    inner = rb.node(ins[0])
    return (inner.inputs[0], "neg(neg(x)) -> x") if inner.op == "neg" else None


def _pow(rb: Rebuild, node: Node, ins: tuple[int, ...]) -> Result:
    return (ins[0], "x**1 -> x") if float(node.attrs["exponent"]) == 1.0 else None


def _slice(rb: Rebuild, node: Node, ins: tuple[int, ...]) -> Result:
    return (ins[0], "slice of the whole tensor -> its input") if _keeps(rb, node, ins[0]) else None


def _concat(rb: Rebuild, node: Node, ins: tuple[int, ...]) -> Result:
    return (ins[0], "concat of one tensor -> its input") if len(ins) == 1 else None


IDENTITIES: dict[str, Identity] = {r.op: r for r in (
    Identity("mul", "x*1 = 1*x = x", _neutral(1.0, True, "x*1")),
    Identity("div", "x/1 = x", _neutral(1.0, False, "x/1")),
    Identity("add", "x+0 = 0+x = x", _neutral(0.0, True, "x+0")),
    Identity("sub", "x-0 = x", _neutral(0.0, False, "x-0")),
    Identity("neg", "-(-x) = x", _neg),
    Identity("pow", "x**1 = x", _pow),
    Identity("reshape", "to its own shape; of a reshape", _reshape),
    Identity("transpose", "identity axes; of a transpose", _transpose),
    Identity("broadcast_to", "to its own shape", _same_shape_is_input("broadcast_to")),
    Identity("sum_to", "to its own shape", _same_shape_is_input("sum_to")),
    Identity("slice", "of the whole tensor", _slice),
    Identity("concat", "of one tensor", _concat),
)}


def run(graph: Graph) -> Rewrite:
    """The simplifying rewrite, one line per simplified node."""
    rb = Rebuild(graph)
    for old in graph.nodes:
        rule = IDENTITIES.get(old.op)
        found = rule.apply(rb, old, rb.mapped(old)) if rule is not None else None
        if found is None or not rb.replace(old, found[0], found[1]):
            rb.copy(old)
    return rb.finish()


def simplify(graph: Graph) -> Graph:
    """`graph` with the identities of IDENTITIES applied wherever they match."""
    return run(graph).graph
