"""Merge parallel tensor ops (Graph -> Graph): nodes of one op that read the same input and a weight
each become one node against the concatenated weights, followed by one slice per original node.

`merge_qkv`: matmuls sharing their left operand (attention's q, k and v projections of one
normalized input) become one (m, k) @ (k, n_q + n_k + n_v) matmul, so a matrix unit streams the input
once. `merge_parallel_convs`: conv2d nodes sharing their input with equal stride, padding, dilation
and kernel (ResNet's first bottleneck: conv1 and the downsample shortcut, both 1x1) become one conv2d
with the filters stacked along the output channels.

Only weights that are leaves (parameters or constants) are merged: their concat reads no activation,
and a leaf may move before the merged node. In a training graph the backward nodes read the original
weights and inputs, not the merged output, so the gradients are computed exactly as before.

Both passes are sited (PassDef.sited): a group is anchored at its first node, `Rewrite.sites` lists the
anchors of the groups merged, and `run_qkv(graph, only=ids)` merges only the groups anchored there, so
the `auto` search can merge where it pays and leave the rest.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Hashable

from accelsim.graph.ir import Graph, Node
from accelsim.ops.registry import Shape
from accelsim.passes.rebuild import Rebuild, Rewrite


@dataclass(frozen=True)
class MergeRule:
    """How nodes of one op merge. `weight_axis(node, w_shape)`: the axis along which the weights
    concatenate (None: this node never merges); `out_axis(node)`: the output axis that holds each
    node's share; `key(node, w_shape)`: what else must be equal between merged nodes."""

    op: str
    weight_axis: Callable[[Node, Shape], int | None]
    out_axis: Callable[[Node], int]
    key: Callable[[Node, Shape], Hashable]


def _matmul_weight_axis(node: Node, w: Shape) -> int:
    return len(w) - 2 if node.attrs["transpose_b"] else len(w) - 1


def _without(shape: Shape, axis: int) -> Shape:
    return tuple(shape[:axis]) + tuple(shape[axis + 1:])


MATMUL = MergeRule(
    "matmul", weight_axis=_matmul_weight_axis, out_axis=lambda n: len(n.shape) - 1,
    key=lambda n, w: (n.attrs["transpose_a"], n.attrs["transpose_b"], _without(w, _matmul_weight_axis(n, w))))
CONV2D = MergeRule(
    "conv2d", weight_axis=lambda n, w: 0 if n.attrs["groups"] == 1 else None, out_axis=lambda n: 1,
    key=lambda n, w: (tuple(n.attrs["stride"]), tuple(n.attrs["padding"]), tuple(n.attrs["dilation"]), tuple(w[1:])))


def _groups(graph: Graph, rule: MergeRule) -> dict[int, list[Node]]:
    """Mergeable nodes by the id of the first of their group (groups of two or more), each group in id order."""
    by_key: dict[Hashable, list[Node]] = {}
    for n in graph.nodes:
        if n.op != rule.op or graph.nodes[n.inputs[1]].op not in ("param", "const"):
            continue
        w = graph.nodes[n.inputs[1]].shape
        if rule.weight_axis(n, w) is None:
            continue
        key = (n.inputs[0], n.phase, n.dtype, _attr_key(n.attrs), rule.key(n, w))
        by_key.setdefault(key, []).append(n)
    return {g[0].id: g for g in by_key.values() if len(g) > 1}


def _attr_key(attrs: Any) -> str:
    return repr(sorted(attrs.items()))


def _merge(rb: Rebuild, rule: MergeRule, group: list[Node]) -> None:
    """Emit concat, the merged node and one slice per member, or copy the members if refused; the
    group's anchor is a site once a member reads the merged node."""
    first = group[0]
    weights = tuple(rb.hoist(n.inputs[1]) for n in group)
    axis = rule.weight_axis(first, rb.source.nodes[first.inputs[1]].shape)
    cat = rb.emit("concat", weights, {"axis": axis}, first.phase, name=f"{first.name}.weights")
    merged = None
    if cat is not None:
        merged = rb.emit(rule.op, (rb.new_id[first.inputs[0]], cat), first.attrs, first.phase,
                         name=f"{first.name}.merged")
    if merged is None:
        for n in group:
            rb.copy(n)
        return
    out_axis, offset = rule.out_axis(first), 0
    names = ", ".join(f"%{n.id}" for n in group)
    for n in group:
        width = n.shape[out_axis]
        starts = (0,) * out_axis + (offset,)
        stops = tuple(n.shape[:out_axis]) + (offset + width,)
        part = rb.emit("slice", (merged,), {"starts": starts, "stops": stops}, n.phase, name=n.name)
        if rb.replace(n, part, f"one {rule.op} with {names}, then a slice"):
            rb.site(first.id)
        else:
            rb.copy(n)
        offset += width


def run_rule(graph: Graph, rule: MergeRule, only: frozenset[int] | None = None) -> Rewrite:
    """Merge every group of parallel `rule.op` nodes (with `only`, the groups whose first node's id is in
    it); one line per merged node, one site per merged group."""
    groups = _groups(graph, rule)
    if only is not None:
        groups = {anchor: g for anchor, g in groups.items() if anchor in only}
    rb = Rebuild(graph)
    for old in graph.nodes:
        if rb.built(old.id):
            continue  # a weight moved before its merged node, or a member already merged
        if old.id in groups:
            _merge(rb, rule, groups[old.id])
        else:
            rb.copy(old)
    return rb.finish()


def run_qkv(graph: Graph, only: frozenset[int] | None = None) -> Rewrite:
    return run_rule(graph, MATMUL, only)


def run_convs(graph: Graph, only: frozenset[int] | None = None) -> Rewrite:
    return run_rule(graph, CONV2D, only)


def merge_qkv(graph: Graph) -> Graph:
    """`graph` with matmuls that share their left operand merged (see the module docstring)."""
    return run_qkv(graph).graph


def merge_parallel_convs(graph: Graph) -> Graph:
    """`graph` with conv2d nodes that share their input merged (see the module docstring)."""
    return run_convs(graph).graph
