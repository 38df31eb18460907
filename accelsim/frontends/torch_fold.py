"""Constant subgraphs of an exported program, evaluated at import (FX nodes -> torch tensors -> graph constants).

A mask built inside `forward` from constants alone (`torch.tril(torch.ones(T, T, dtype=torch.bool))`, which
core ATen spells with full, arange, sub, le, logical_and) depends on no input or parameter: torch computes it
once here and the graph holds the result as a constant, so none of those ops needs an accelsim counterpart.
Bool results become 0/1 masks in the graph's float dtype (accelsim.ops.select), integer ones int64.
"""
from __future__ import annotations

from typing import Any

from accelsim.errors import FrontendError
from accelsim.graph.ir import Graph, Var

MAX_FOLDED_ELEMENTS = 1 << 24
"""Largest constant an import evaluates (elements): a graph constant is stored in the graph file."""


def const_dtype(g: Graph, torch_dtype: Any) -> str:
    """The graph dtype a constant of `torch_dtype` is held in: int64 for integers, else the graph's float."""
    if torch_dtype is not None and not torch_dtype.is_floating_point and str(torch_dtype) != "torch.bool":
        return "int64"
    return g.dtype


def foldable(fx: Any, needed: set[Any]) -> set[Any]:
    """The needed call nodes that read no placeholder, directly or through other nodes, and draw no random
    numbers."""
    import torch

    out: set[Any] = set()
    for n in fx.nodes:
        if n.op != "call_function" or n not in needed:
            continue
        tags = getattr(n.target, "tags", ())
        if torch.Tag.nondeterministic_seeded in tags:
            continue
        if all(i in out for i in n.all_input_nodes):
            out.add(n)
    return out


def fold(fx: Any, nodes: set[Any], model: str) -> dict[Any, Any]:
    """FX node -> its value, computed by torch (in graph order)."""
    from torch.fx.node import map_arg

    values: dict[Any, Any] = {}
    for n in fx.nodes:
        if n not in nodes:
            continue
        args, kwargs = map_arg((n.args, dict(n.kwargs)), lambda i: values[i])
        try:
            values[n] = n.target(*args, **kwargs)
        except Exception as e:  # torch raises many kinds; the user needs the first line
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise FrontendError(f"model {model!r}: node {n.name!r} ({n.target}) reads only constants, but torch "
                                f"could not evaluate it: {first}") from None
        numel = getattr(values[n], "numel", lambda: 0)()
        if numel > MAX_FOLDED_ELEMENTS:
            raise FrontendError(f"model {model!r}: node {n.name!r} is a constant of {numel} elements (at most "
                                f"{MAX_FOLDED_ELEMENTS} are evaluated at import)")
    return values


def as_graph_value(g: Graph, value: Any, model: str, node: str) -> Var | Any:
    """A folded tensor as a graph constant; anything else (a Python number, a tuple) as it is."""
    import torch

    if not isinstance(value, torch.Tensor):
        return value
    if value.dtype.is_complex:
        raise FrontendError(f"model {model!r}: node {node!r} is a constant of dtype {value.dtype}; accelsim graphs "
                            "hold float and int64 tensors")
    return g.const(value.detach().cpu().numpy(), dtype=const_dtype(g, value.dtype))
