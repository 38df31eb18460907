"""Parameter values between a torch module and its imported graph, by the names they share (both directions).

A graph draws its leaves from initializers (frontends/torch_leaves.py), so to compare numbers with the module
either run the graph on the module's values (`module_feeds` -> `A.evaluate(graph, feeds=...)`) or give the
module the graph's drawn values (`load_into_module`).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from accelsim.errors import FrontendError
from accelsim.graph.ir import Graph


def _module_tensors(module: Any) -> dict[str, Any]:
    return {**dict(module.named_parameters()), **dict(module.named_buffers())}


def _leaf_pairs(graph: Graph, module: Any) -> list[tuple[str, int, Any]]:
    """(name, graph node id, module tensor) for every parameter leaf of the graph the module has."""
    tensors = _module_tensors(module)
    pairs = []
    for n in graph.params:
        if n.name not in tensors:
            if n.trainable:
                raise FrontendError(f"graph {graph.name!r}: parameter {n.name!r} is not a parameter or buffer of "
                                    f"the {type(module).__name__} module")
            continue  # optimizer state (`<param>.momentum`, not trainable) that training_graph added
        t = tensors[n.name]
        if tuple(t.shape) != n.shape:
            raise FrontendError(f"graph {graph.name!r}: parameter {n.name!r} has shape {n.shape}, the module's "
                                f"{tuple(t.shape)}")
        pairs.append((n.name, n.id, t))
    return pairs


def module_feeds(module: Any, graph: Graph) -> dict[str, np.ndarray]:
    """The module's current parameter and buffer values for the graph's parameter leaves, by name (feeds for
    A.evaluate)."""
    return {name: t.detach().cpu().numpy().astype(graph.nodes[i].dtype) for name, i, t in _leaf_pairs(graph, module)}


def load_into_module(graph: Graph, module: Any) -> None:
    """Copy the graph's drawn parameter values into the module's parameters and buffers of the same names."""
    import torch

    with torch.no_grad():
        for _, i, t in _leaf_pairs(graph, module):
            t.copy_(torch.from_numpy(np.ascontiguousarray(graph.leaf_value(i))).to(t.dtype))
