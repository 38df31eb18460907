"""Rematerialization (activation recomputation) of training graphs: forward values the backward pass
reads are computed again there from the nearest kept values instead of staying alive from the forward
pass (Graph, policy -> Graph). The numbers are unchanged: the same ops on the same inputs give the same
bits.

`rematerialize(graph, "sqrt")` (or "none", "every:K", "full:K", "budget:64MiB"; see remat/policy.py) returns the
rewritten graph, which records the rewrite in `Graph.passes` as AppliedPass("rematerialize", only=the
recomputed forward ids), so a schedule compiled from it names what rebuilds it (source.py
replays it with `replay`, in order with the other passes). Layers: remat/layers.py; the memory
estimate: remat/memory.py; the rewrite and its ordering barrier: remat/rewrite.py.
"""
from __future__ import annotations

from typing import Iterable

from accelsim.errors import GraphError
from accelsim.graph.ir import Graph
from accelsim.remat.layers import cut_points, layer_boundaries, layer_count
from accelsim.remat.memory import activation_peak_bytes
from accelsim.remat.policy import POLICY_KINDS, RematPolicy, parse_policy
from accelsim.remat.policy import choose as choose_recompute
from accelsim.remat.rewrite import NONDETERMINISTIC_OPS, REMAT_PASS, build, recomputable

__all__ = ["NONDETERMINISTIC_OPS", "POLICY_KINDS", "REMAT_PASS", "RematPolicy", "activation_peak_bytes",
           "check_training_graph", "cut_points", "layer_boundaries", "layer_count", "parse_policy",
           "rematerialize", "replay"]


def check_training_graph(graph: object) -> Graph:
    """`graph` if rematerialization applies to it: a Graph with a backward pass, not rematerialized yet."""
    if not isinstance(graph, Graph):
        raise GraphError(f"rematerialize needs a training Graph (from A.training_graph), got {type(graph).__name__}")
    if not any(n.phase == "backward" for n in graph.nodes):
        what = ("an inference graph" if graph.optimizer is None else
                "a training step with no backward pass (no trainable parameter the loss depends on)")
        raise GraphError(f"rematerialize: graph {graph.name!r} is {what}; recomputation trades memory of activations "
                         "kept for the backward pass, so it applies to a training step with one (A.training_graph)")
    if graph.loss is None:
        raise GraphError(f"rematerialize: graph {graph.name!r} has no loss; recomputation is ordered after it")
    if any(p.name == REMAT_PASS for p in graph.passes):
        raise GraphError(f"rematerialize: graph {graph.name!r} is rematerialized already; apply one policy to the "
                         "training step")
    return graph


def rematerialize(graph: Graph, policy: str | RematPolicy) -> Graph:
    """`graph` (a training step) with the forward values `policy` chooses recomputed in the backward pass:
    "none" (the identity), "sqrt", "every:K" (selective: recompute what the backward pass reads), "full:K"
    (re-run each checkpointed segment's whole forward, as Megatron-LM does) or "budget:BYTES" (e.g.
    "budget:64MiB"). The outputs,
    gradients and updates are bit-identical; the result records the rewrite in its `passes`."""
    policy = parse_policy(policy)
    check_training_graph(graph)
    return build(graph, choose_recompute(graph, policy))


def replay(graph: Graph, only: Iterable[int]) -> Graph:
    """`graph` rematerialized exactly as recorded (AppliedPass("rematerialize", only=ids)): the ids must be
    forward nodes that may be recomputed (collectives too: full:K records the all-reduces it re-runs)."""
    check_training_graph(graph)
    ids = frozenset(only)
    for i in sorted(ids):
        known = isinstance(i, int) and 0 <= i < len(graph.nodes)
        if not known or not recomputable(graph, graph.nodes[i], collectives=True):
            what = (f"%{i} {graph.nodes[i].op} {graph.nodes[i].name!r} ({graph.nodes[i].phase})"
                    if isinstance(i, int) and 0 <= i < len(graph.nodes) else f"{i!r}, not a node of it,")
            raise GraphError(f"rematerialize: graph {graph.name!r} cannot recompute {what}: only computed forward "
                             "nodes that are not outputs can be recomputed")
    return build(graph, ids)
