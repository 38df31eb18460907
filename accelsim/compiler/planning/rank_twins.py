"""Tensor-parallel ranks as copies of rank 0 (Graph -> for each rank, node -> its rank-0 twin).

A Megatron-style graph builds each rank's shard of a layer with the same ops on the same shapes: rank k's
matmul reads rank k's weight shard where rank 0's reads rank 0's. Matching every rank-k node to the rank-0
node built the same way (same op, shape, dtype, phase and attributes but its op's rank_attrs, inputs that are twins or the same
replicated node; a sharded leaf by its unsharded name, axis and count) lets the scheduler time one rank
and stamp the others (compiler/timing/symmetry.py). Where the ranks differ in any node, there is no map.
"""
from __future__ import annotations

import re
from collections import defaultdict

from accelsim.graph.ir import Graph, Node
from accelsim.ops.registry import get_op

_SHARD_NAME = re.compile(r"\[\d+/(\d+)\]")


def _leaf_key(graph: Graph, n: Node) -> tuple:
    """A leaf as every rank builds it: its name and shard attribute without the rank's index; a constant
    (named after its id) by its value."""
    if n.op == "const":
        value = graph.leaf_value(n.id)
        return (repr(sorted(n.attrs.items())), value.dtype.str, value.tobytes())
    attrs = dict(n.attrs)
    shard = attrs.pop("shard", None)
    if shard is not None:
        attrs["shard"] = (shard[0], shard[2])  # axis and count, not the index
    return (_SHARD_NAME.sub(r"[*/\1]", n.name), repr(sorted(attrs.items())))


def _attrs_key(n: Node) -> str:
    """A computed node's attributes but those naming its rank's shard (OpDef.rank_attrs)."""
    skip = get_op(n.op).rank_attrs
    return repr(sorted((k, v) for k, v in n.attrs.items() if k not in skip))


def rank_twins(graph: Graph) -> tuple[dict[int, int], ...]:
    """For each rank k of `graph`, every rank-k node -> the rank-0 node built the same way (rank 0: the
    identity on its nodes); () for a graph without ranks or whose ranks are not copies of each other."""
    t = graph.tensor_parallel
    if t < 2:
        return ()
    rank_of = {n.id: n.rank for n in graph.nodes}
    twins: list[dict[int, int]] = [{} for _ in range(t)]
    first: dict[tuple, list[int]] = defaultdict(list)  # key -> rank-0 nodes with it, in build order
    taken: list[dict[tuple, int]] = [defaultdict(int) for _ in range(t)]  # key -> how many rank k matched

    def twin(i: int) -> int:
        return i if rank_of[i] < 0 else twins[rank_of[i]].get(i, -1)

    # rank 0 first: autodiff builds a later rank's gradient of a layer before rank 0's, and a rank-k node
    # can be matched only once every rank-0 node of its key is known; each pass is in topological order
    for n in [n for n in graph.nodes if n.rank == 0] + [n for n in graph.nodes if n.rank > 0]:
        if n.rank >= t:
            return ()
        inputs = tuple(twin(i) for i in n.inputs)
        if -1 in inputs:
            return ()
        key = (n.op, n.shape, n.dtype, n.phase, inputs, _leaf_key(graph, n) if n.is_leaf else _attrs_key(n))
        if n.rank == 0:
            first[key].append(n.id)
            twins[0][n.id] = n.id
            continue
        k = taken[n.rank][key]
        if k >= len(first[key]):
            return ()
        twins[n.rank][n.id] = first[key][k]
        taken[n.rank][key] = k + 1
    if any(len(m) != len(twins[0]) for m in twins):
        return ()
    return tuple(twins)
