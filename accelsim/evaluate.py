"""Reference evaluation: run any graph with the ops' numpy reference implementations."""
from __future__ import annotations

from numbers import Integral
from typing import Any, Iterable, Mapping

import numpy as np

from accelsim.errors import GraphError, ShapeError
from accelsim.graph.ir import Graph
from accelsim.limits import DEFAULT_LIMITS, Limits, check_eval_size
from accelsim.ops.registry import get_op


def _feed_values(graph: Graph, feeds: Mapping[str | int, np.ndarray] | None) -> dict[int, np.ndarray]:
    out: dict[int, np.ndarray] = {}
    for key, value in (feeds or {}).items():
        node = graph.nodes[_node_id(graph, key, "feed")] if isinstance(key, int) else graph.by_name(key)
        if not node.is_leaf:
            raise GraphError(f"feed {key!r}: %{node.id} is a {node.op} node; only leaves can be fed")
        try:
            arr = np.asarray(value, dtype=node.dtype)
        except (TypeError, ValueError) as e:
            raise GraphError(f"feed {key!r}: not an array of {node.dtype} ({e})") from None
        if arr.shape != node.shape:
            raise ShapeError(f"feed {key!r}: expected shape {node.shape}, got {arr.shape}")
        _check_index_range(key, node, arr)
        out[node.id] = arr
    return out


def _check_index_range(key: Any, node: Any, arr: np.ndarray) -> None:
    """An int64 input an importer marked as indices (`indices=True`: class labels, embedding ids) must be fed values
    in its [low, high): numpy would wrap a negative label and pick a wrong class silently."""
    if node.op != "input" or not node.attrs.get("indices") or "high" not in node.attrs or arr.size == 0:
        return
    low, high = int(node.attrs.get("low", 0)), int(node.attrs["high"])
    bad = (arr < low) | (arr >= high)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        raise GraphError(f"feed {key!r}: input %{node.id} {node.name!r} holds {int(arr[index])} at index {index}; "
                         f"expected integers in [{low}, {high}) (class labels or embedding ids of that range)")


def _node_id(graph: Graph, key: Any, what: str) -> int:
    if not isinstance(key, Integral) or isinstance(key, bool) or not 0 <= key < len(graph.nodes):
        raise GraphError(f"{what} {key!r}: graph {graph.name!r} has no such node (ids 0..{len(graph.nodes) - 1})")
    return int(key)


def evaluate(graph: Graph, feeds: Mapping[str | int, np.ndarray] | None = None,
             outputs: Iterable[str] | None = None, keep: Iterable[int] = (),
             overrides: Mapping[int, np.ndarray] | None = None,
             dtype: str | None = None, limits: Limits | None = None) -> dict[str, np.ndarray]:
    """Named outputs of `graph` (default: all), with leaves from `feeds` or their seeded defaults.

    `keep` adds node ids whose values are returned under the key "%<id>". `overrides` gives values
    for (non-leaf) nodes, which are then not computed, nor anything only they needed. Only the
    nodes the wanted values depend on run, and each value is dropped after its last use.
    `dtype` computes every floating-point node in that dtype instead of the graph's (float64 on a
    float32 graph's exact leaf values is the oracle that measures float32 rounding). The graph's tensor
    bytes are estimated first and refused above `limits` (accelsim.limits.DEFAULT_LIMITS: 4 GiB).
    """
    if not isinstance(graph, Graph):
        raise GraphError(f"evaluate needs a Graph, got {type(graph).__name__}")
    check_eval_size(graph, 1, limits or DEFAULT_LIMITS, what="evaluating")  # before allocating anything
    names = list(graph.outputs) if outputs is None else list(outputs)
    for name in names:
        if name not in graph.outputs:
            raise GraphError(f"graph {graph.name!r} has no output {name!r}; it has {', '.join(graph.outputs)}")
    overrides = {_node_id(graph, i, "override"): v for i, v in (overrides or {}).items()}
    keep = [_node_id(graph, i, "keep") for i in keep]
    wanted = {graph.outputs[n] for n in names} | set(keep)
    needed = set(wanted)
    for node in reversed(graph.nodes):
        if node.id in needed and node.id not in overrides:
            needed.update(node.inputs)
    last_use: dict[int, int] = {}
    for node in graph.nodes:
        if node.id in needed and node.id not in overrides:
            for i in node.inputs:
                last_use[i] = node.id
    fed = _feed_values(graph, feeds)
    values: dict[int, np.ndarray] = {}
    for node in graph.nodes:
        if node.id not in needed:
            continue
        node_dtype = dtype if dtype is not None and np.dtype(node.dtype).kind == "f" else node.dtype
        if node.id in overrides:
            values[node.id] = np.asarray(overrides[node.id], dtype=node_dtype)
        elif node.is_leaf:
            leaf = fed[node.id] if node.id in fed else graph.leaf_value(node.id)
            values[node.id] = np.asarray(leaf, dtype=node_dtype)
        else:
            args = [values[i] for i in node.inputs]
            values[node.id] = np.asarray(get_op(node.op).ref(*args, **node.attrs), dtype=node_dtype)
            for i in set(node.inputs):
                if last_use.get(i) == node.id and i not in wanted:
                    del values[i]
    result = {n: values[graph.outputs[n]] for n in names}
    result.update({f"%{i}": values[i] for i in keep})
    return result
