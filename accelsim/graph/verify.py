"""`verify(graph)`: check the IR's invariants after a builder or a pass (Graph -> Graph or GraphError).

Every problem is listed at once, each naming the node: ids are positions, inputs come earlier
(topological order), shapes and dtypes are what the op registry infers, phases only read the same
or earlier phases, outputs and loss exist, leaves read nothing, and leaf names are unique.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from accelsim.errors import AccelsimError, GraphError
from accelsim.graph.ir import DTYPES, FLOAT_DTYPES, LEAF_OPS, PHASES, Graph, Node, infer_type
from accelsim.graph.provenance import ModelSource, OptimizerSettings


def verify(graph: Graph) -> Graph:
    """`graph` itself when it satisfies the IR's invariants, so calls chain; else one GraphError
    listing every problem."""
    found = problems(graph)
    if found:
        raise GraphError(f"graph {graph.name!r} fails verification: {len(found)} problem(s)\n  "
                         + "\n  ".join(found))
    return graph


def problems(graph: Graph) -> list[str]:
    """Every broken invariant of `graph`, one line each naming the node, output or field."""
    out = _graph_fields(graph)
    leaf_names: dict[str, int] = {}
    inferred: list[Node | None] = []  # each node as the registry types it, so a wrong shape is reported
    for pos, node in enumerate(graph.nodes):  # at its node, not again at every consumer
        if not isinstance(node, Node):
            out.append(f"position {pos}: {type(node).__name__} is not a Node")
            inferred.append(None)
            continue
        found, typed = _node_problems(graph, inferred, pos, node)
        out.extend(found)
        inferred.append(typed)
        if node.op in ("input", "param"):
            if node.name in leaf_names:
                out.append(f"%{pos} {node.op} {node.name!r}: name already used by %{leaf_names[node.name]}")
            leaf_names[node.name] = pos
    out.extend(_name_lookup(graph, leaf_names))
    out.extend(_outputs(graph))
    return out


def _graph_fields(graph: Graph) -> list[str]:
    out = []
    if graph.dtype not in FLOAT_DTYPES:
        out.append(f"graph dtype {graph.dtype!r} is not one of {FLOAT_DTYPES}")
    if graph.source is not None and not isinstance(graph.source, ModelSource):
        out.append(f"source {graph.source!r} is not a ModelSource")
    if graph.optimizer is not None and not isinstance(graph.optimizer, OptimizerSettings):
        out.append(f"optimizer {graph.optimizer!r} is not an OptimizerSettings")
    return out


def _node_problems(graph: Graph, inferred: list[Node | None], pos: int, node: Node) -> tuple[list[str], Node]:
    """The node's problems, and the node with the shape and dtype the registry infers (as recorded
    where inference fails) for its consumers' checks."""
    where = f"%{pos} {node.op} {node.name!r}"
    out = []
    if node.id != pos:
        out.append(f"{where}: id {node.id} differs from its position {pos}")
    if node.phase not in PHASES:
        out.append(f"{where}: phase {node.phase!r} is not one of {PHASES}")
    if node.dtype not in DTYPES:
        out.append(f"{where}: dtype {node.dtype!r} is not one of {DTYPES}")
    bad = [i for i in node.inputs if not (isinstance(i, int) and 0 <= i < pos)]
    if bad:
        out.append(f"{where}: inputs {bad} are not earlier nodes (topological order needs ids 0..{pos - 1})")
        return out, node  # the checks below read the inputs
    ins = [inferred[i] for i in node.inputs]
    if node.op in LEAF_OPS and ins:
        out.append(f"{where}: a leaf reads inputs {list(node.inputs)}")
    if any(x is None for x in ins):
        return out, node  # reported at their own positions
    if node.phase in PHASES:
        for x in ins:
            if x.phase in PHASES and PHASES.index(x.phase) > PHASES.index(node.phase):
                out.append(f"{where}: a {node.phase} node reads {x.phase} node %{x.id} {x.name!r}")
    try:
        shape, dtype = infer_type(node.op, ins, node.attrs, graph.dtype, where)  # type: ignore[arg-type]
    except AccelsimError as e:
        return out + [f"{e} (the op registry refuses the node)"], node
    if tuple(node.shape) != shape:
        out.append(f"{where}: shape {node.shape} but the op registry infers {shape} from its inputs and attrs")
    if node.dtype != dtype:
        out.append(f"{where}: dtype {node.dtype} but the op registry infers {dtype}")
    if node.op == "const":
        out.extend(_const_value(graph, where, node))
    return out, node if (node.shape, node.dtype) == (shape, dtype) else replace(node, shape=shape, dtype=dtype)


def _const_value(graph: Graph, where: str, node: Node) -> list[str]:
    try:
        value: Any = graph.leaf_value(node.id)
    except AccelsimError:
        return [f"{where}: a constant without a value"]
    if np.shape(value) != node.shape:
        return [f"{where}: its value has shape {np.shape(value)}, the node {node.shape}"]
    return []


def _name_lookup(graph: Graph, leaf_names: dict[str, int]) -> list[str]:
    """Graph.by_name must find each input and parameter at its own node."""
    out = []
    for name, pos in leaf_names.items():
        try:
            found = getattr(graph.by_name(name), "id", None)
        except AccelsimError:
            found = None
        if found != pos:
            out.append(f"%{pos} {graph.nodes[pos].op} {name!r}: by_name finds "
                       + ("nothing" if found is None else f"%{found}"))
    return out


def _outputs(graph: Graph) -> list[str]:
    n = len(graph.nodes)
    out = [f"output {name!r} refers to %{i}, not a node (ids 0..{n - 1})"
           for name, i in graph.outputs.items() if not (isinstance(i, int) and 0 <= i < n)]
    if graph.loss is not None:
        if not (isinstance(graph.loss, int) and 0 <= graph.loss < n):
            out.append(f"loss refers to %{graph.loss}, not a node (ids 0..{n - 1})")
        elif getattr(graph.nodes[graph.loss], "shape", ()) != ():
            out.append(f"loss %{graph.loss} has shape {graph.nodes[graph.loss].shape}, not a scalar")
    return out
