"""Optimizer fusion (Graph -> Graph): training_graph's per-parameter Adam or SGD update nodes become one
multi-tensor update (ops/fused_optimizer.py) per layer and tensor-parallel rank, as apex's FusedAdam
updates a model's parameters in a few multi_tensor_apply launches instead of ~14 elementwise kernels each.

A parameter's update is recognised from what training_graph records: the graph's `optimizer` settings,
the outputs `<p>.grad` and `<p>.new` (and `<p>.adam_m.new`, `<p>.adam_v.new` with the state parameters
`<p>.adam_m`, `<p>.adam_v`), and between them exactly the update's elementwise nodes and constants, read by
nothing else. A parameter whose update looks otherwise keeps its nodes. Momentum SGD is left unfused.

Parameters are grouped by tensor-parallel rank and layer (the name before the first dot: `h3`, `wte`), so
a group never spans pipeline stages that split the model between layers; the scheduler runs each group
as one update task per chip. The fused node's value packs the new tensors; each output is a
multi_tensor_part view of it. The references compute the unfused expression tree, so the step's numbers
are unchanged to the last bit.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from accelsim.errors import GraphError
from accelsim.graph.ir import Graph, Node
from accelsim.ops.fused_optimizer import adam_constants
from accelsim.passes.rebuild import Rebuild, Rewrite

CHAIN_OPS = {  # the update's nodes per parameter (training._update), as an op count
    "adam": Counter({"mul": 8, "add": 3, "sqrt": 1, "div": 1, "sub": 1}),
    "sgd": Counter({"mul": 1, "sub": 1}),
}
STATES = {"adam": ("adam_m", "adam_v"), "sgd": ()}


@dataclass(frozen=True)
class ParamUpdate:
    """One parameter's recognised update: its leaves and gradient (source ids), in the fused op's input
    order, and the nodes that become parts of the packed value (w', then m', v')."""

    name: str
    rank: int
    inputs: tuple[int, ...]   # w, dw (, m, v)
    roots: tuple[int, ...]    # w' (, m', v')
    chain: frozenset[int]     # every update node of the parameter, roots included


def _expected_constants(graph: Graph) -> list[float]:
    s = graph.optimizer
    if s.optimizer == "sgd":
        return [float(np.dtype(graph.dtype).type(s.lr))]
    return sorted(float(c) for c in adam_constants(graph.dtype, s.lr, s.beta1, s.beta2, s.eps, s.step))


def _recognise(graph: Graph, param: Node, consumers: list[list[int]]) -> ParamUpdate | None:
    """The parameter's update if training_graph's shape of it is intact, else None."""
    kind = graph.optimizer.optimizer
    out = graph.outputs
    name = param.name
    roots = [out.get(f"{name}.new")] + [out.get(f"{name}.{s}.new") for s in STATES[kind]]
    if f"{name}.grad" not in out or any(r is None for r in roots):
        return None
    states = []
    for s in STATES[kind]:
        try:
            states.append(graph.by_name(f"{name}.{s}").id)
        except GraphError:
            return None
    inputs = (param.id, out[f"{name}.grad"], *states)
    chain: set[int] = set()
    consts: list[float] = []
    todo = list(roots)
    while todo:
        i = todo.pop()
        if i in chain or i in inputs:
            continue
        node = graph.nodes[i]
        if node.op == "const":
            if node.shape != ():
                return None
            consts.append(float(graph.leaf_value(i)))
            continue
        if node.is_leaf or node.phase != "update":
            return None
        chain.add(i)
        todo.extend(node.inputs)
    if Counter(graph.nodes[i].op for i in chain) != CHAIN_OPS[kind] or sorted(consts) != _expected_constants(graph):
        return None
    readers_outside = [c for i in chain for c in consumers[i] if c not in chain]
    if readers_outside:
        return None
    return ParamUpdate(name, param.rank, inputs, tuple(roots), frozenset(chain))


def _group_key(update: ParamUpdate) -> tuple[int, str]:
    return update.rank, update.name.split(".", 1)[0]


def run(graph: Graph) -> Rewrite:
    """Fuse the update of every recognised parameter, one fused node per (rank, layer)."""
    settings = graph.optimizer
    if settings is None or settings.optimizer not in CHAIN_OPS:
        return Rewrite(graph.copy(), ())
    consumers = graph.consumers()
    groups: dict[tuple[int, str], list[ParamUpdate]] = {}
    for p in graph.params:
        if p.attrs.get("trainable", True) and (u := _recognise(graph, p, consumers)) is not None:
            groups.setdefault(_group_key(u), []).append(u)
    owner: dict[int, list[ParamUpdate]] = {}
    for members in groups.values():
        first_root = min(r for u in members for r in u.roots)
        if all(u.inputs[1] < first_root for u in members):  # every gradient exists before the group's update
            for u in members:
                for r in u.roots:
                    owner[r] = members
    rb = Rebuild(graph)
    parts: dict[int, int] = {}  # source root id -> its part node in rb.out
    for node in graph.nodes:
        if node.id in owner and node.id not in parts:
            parts.update(_emit_group(rb, graph, owner[node.id], settings))
        why = (f"-> part of {_op(settings)} over {len(owner[node.id])} parameter(s) of "
               f"{_group_key(owner[node.id][0])[1]!r}") if node.id in parts else ""
        if not (node.id in parts and rb.alias(node, parts[node.id], why)):
            rb.copy(node)
    return rb.finish()


def _op(settings) -> str:
    return f"fused_{settings.optimizer}"


def _emit_group(rb: Rebuild, graph: Graph, members: list[ParamUpdate], settings) -> dict[int, int]:
    """The group's fused node and one multi_tensor_part per root; {source root id: part id}."""
    inputs = tuple(rb.hoist(i) if graph.nodes[i].is_leaf else rb.new_id[i] for u in members for i in u.inputs)
    attrs = ({"lr": settings.lr} if settings.optimizer == "sgd" else
             {"lr": settings.lr, "beta1": settings.beta1, "beta2": settings.beta2, "eps": settings.eps,
              "step": settings.step})
    rank = members[0].rank
    parts: dict[int, int] = {}
    with rb.out.rank(rank):
        fused = rb.emit(_op(settings), inputs, attrs, "update", name=f"{_op(settings)}.{_group_key(members[0])[1]}")
        assert fused is not None, "update nodes read leaves and gradients only"
        at = 0
        for u in members:
            shape = graph.nodes[u.inputs[0]].shape
            size = int(np.prod(shape, dtype=np.int64))
            for root in u.roots:
                parts[root] = rb.emit("multi_tensor_part", (fused,), {"offset": at, "shape": tuple(shape)}, "update",
                                      name=graph.nodes[root].name)
                at += size
    return parts
