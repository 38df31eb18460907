"""The dataflow structure of an ONNX graph: every tensor defined once, every read defined, no cycle
(GraphProto -> its nodes in a topological order). Runs before the ONNX checker so that a cycle or a
dangling input is reported as what it is, naming the nodes, not as an ordering complaint."""
from __future__ import annotations

from typing import Any

from accelsim.frontends.onnx_errors import fail


def _node_label(node: Any, index: int) -> str:
    return f"node {node.name or f'#{index}'!r} ({node.op_type})"


def check_structure(graph: Any, label: str) -> list[Any]:
    """graph's nodes in a topological order (stable: a sorted file keeps its order)."""
    nodes = list(graph.node)
    defined = {vi.name for vi in graph.input} | {t.name for t in graph.initializer}
    producer: dict[str, int] = {}
    for i, node in enumerate(nodes):
        for out in node.output:
            if not out:
                continue
            if out in defined or out in producer:
                first = "a graph input or initializer" if out in defined else _node_label(nodes[producer[out]],
                                                                                          producer[out])
                raise fail(f"{label}: {_node_label(node, i)}", f"writes tensor {out!r}, which {first} already "
                                                                f"defines (ONNX tensors are defined once)")
            producer[out] = i
    for i, node in enumerate(nodes):
        for name in node.input:
            if name and name not in defined and name not in producer:
                raise fail(f"{label}: {_node_label(node, i)}",
                           f"reads {name!r}, which no node, graph input or initializer defines (a dangling input)")
    for vi in graph.output:
        if vi.name not in defined and vi.name not in producer:
            raise fail(f"{label}: output {vi.name!r}", "is not defined by any node, graph input or initializer")
    deps = [sorted({producer[n] for n in node.input if n in producer}) for node in nodes]
    order = _topological(deps)
    if len(order) < len(nodes):
        cycle = _find_cycle(deps, set(range(len(nodes))) - set(order))
        path = " -> ".join(_node_label(nodes[i], i) for i in cycle + cycle[:1])
        raise fail(label, f"the graph has a cycle: {path}; an ONNX graph must be acyclic")
    return [nodes[i] for i in order]


def _topological(deps: list[list[int]]) -> list[int]:
    """Kahn's algorithm, always taking the lowest-numbered ready node (deterministic, stable)."""
    import heapq

    users: list[list[int]] = [[] for _ in deps]
    waiting = [len(d) for d in deps]
    for i, d in enumerate(deps):
        for j in d:
            users[j].append(i)
    ready = [i for i, w in enumerate(waiting) if w == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, u)
    return order


def _find_cycle(deps: list[list[int]], stuck: set[int]) -> list[int]:
    """One cycle among the nodes Kahn could not order: walk dependencies inside `stuck` until a node
    repeats (each stuck node has a stuck dependency, so the walk never ends outside a cycle)."""
    seen: dict[int, int] = {}
    path: list[int] = []
    i = min(stuck)
    while i not in seen:
        seen[i] = len(path)
        path.append(i)
        i = next(j for j in deps[i] if j in stuck)
    return list(reversed(path[seen[i]:]))
