"""Reverse-mode autodiff: appends the symbolic backward pass to a graph (Graph -> Graph).

As in seed 002's `gradient(out)`: walk nodes in reverse topological order, sum the partial
adjoints each tensor receives from its consumers, and emit nodes, never numbers.
"""
from __future__ import annotations

from numbers import Integral
from typing import Iterable

from accelsim.errors import GraphError
from accelsim.graph.ir import Graph, Var
from accelsim.ops import add
from accelsim.ops.parallel import tp_allreduce
from accelsim.ops.registry import get_op


def _relevant(graph: Graph, loss: int, wrt: set[int]) -> set[int]:
    """Nodes that lie on some path from a `wrt` leaf to the loss: only they get adjoints."""
    reaches_wrt = [False] * (loss + 1)
    for n in graph.nodes[: loss + 1]:
        reaches_wrt[n.id] = n.id in wrt or any(reaches_wrt[i] for i in n.inputs)
    feeds_loss = {loss}
    for n in reversed(graph.nodes[: loss + 1]):
        if n.id in feeds_loss:
            feeds_loss.update(n.inputs)
    return {i for i in feeds_loss if reaches_wrt[i]}


def _sum(parts: list[Var]) -> Var:
    total = parts[0]
    for p in parts[1:]:
        total = add(total, p)
    return total


def _accumulate(graph: Graph, rank: int, parts: list[Var]) -> Var:
    """The adjoint of a node of tensor-parallel `rank` from its partial adjoints, in order. Partials
    built on different ranks (a replicated value read by every rank's column-parallel matmul) are
    summed on their own rank, then across ranks by one tp_allreduce (Megatron-LM's `f` in backward),
    then added to the replicated partials; partials of one rank or none add up where they are."""
    by_rank: dict[int, list[Var]] = {}
    for p in parts:
        by_rank.setdefault(p.node.rank, []).append(p)
    ranks = sorted(r for r in by_rank if r >= 0)
    if len(ranks) < 2:
        with graph.rank(rank):
            return _sum(parts)
    per_rank = []
    for r in ranks:
        with graph.rank(r):
            per_rank.append(_sum(by_rank[r]))
    with graph.rank(-1):
        total = tp_allreduce(*per_rank)
        for p in by_rank.get(-1, []):
            total = add(total, p)
    return total


def gradients(graph: Graph, loss: int, wrt: Iterable[int]) -> dict[int, Var]:
    """Append d(loss)/d(x) for each x in `wrt` to `graph` (phase backward), in place.

    Returns {x: Var of its gradient}; an x that the loss does not depend on is absent.
    """
    wrt = set(wrt)
    bad = [i for i in [loss, *wrt] if isinstance(i, bool) or not (isinstance(i, Integral) and 0 <= i < len(graph))]
    if bad:
        raise GraphError(f"gradients: graph {graph.name!r} has no nodes {bad} (ids 0..{len(graph.nodes) - 1})")
    if graph.nodes[loss].shape != ():
        raise GraphError(f"loss %{loss} must be a scalar, got shape {graph.nodes[loss].shape}")
    for x in wrt:
        if graph.nodes[x].dtype == "int64":
            raise GraphError(f"cannot differentiate with respect to integer tensor %{x} {graph.nodes[x].name!r}")
    relevant = _relevant(graph, loss, wrt)
    if loss not in relevant:
        return {}
    partials: dict[int, list[Var]] = {}
    adjoint: dict[int, Var] = {}
    with graph.phase("backward"):
        partials[loss] = [graph.const(1.0)]
        for node_id in sorted(relevant, reverse=True):
            parts = partials.pop(node_id, None)
            if parts is None:
                continue
            node = graph.nodes[node_id]
            with graph.layer(node.layer):  # a node's gradient belongs to its layer
                total = adjoint[node_id] = _accumulate(graph, node.rank, parts)
            if node.is_leaf:
                continue
            rule = get_op(node.op).grad
            if rule is None:
                raise GraphError(f"{node.op} node %{node_id} ({node.name!r}) lies between the loss and a "
                                 f"parameter but op {node.op!r} has no gradient rule")
            ins = [graph.var(i) for i in node.inputs]
            with graph.rank(node.rank), graph.layer(node.layer):
                grads = rule(total, graph.var(node_id), *ins, **node.attrs)
            for x, gx in zip(ins, grads):
                if gx is None or x.id not in relevant:
                    continue
                if gx.shape != x.shape:
                    raise GraphError(f"gradient rule of {node.op} (node %{node_id}) gave shape {gx.shape} "
                                     f"for input %{x.id} of shape {x.shape}")
                partials.setdefault(x.id, []).append(gx)
    return {x: adjoint[x] for x in wrt if x in adjoint}
