"""Constant folding: a node whose inputs are all constants becomes a constant holding its value
(Graph -> Graph).

The IR has a constant leaf kind (`const`, an array stored with the graph), so any such node can be
folded. Parameters and inputs are never folded: a parameter is the model's state (a training step
changes it), an input is data. The value is computed by the op's numpy reference in float64 and
stored once in the graph's dtype, so a float32 graph keeps one rounding of each folded value. A fold
never writes more constant elements than the constants it reads: a scalar broadcast to a large
tensor stays a node rather than becoming a large array.
"""
from __future__ import annotations

import numpy as np

from accelsim.graph.ir import Graph
from accelsim.ops.registry import get_op, numel
from accelsim.passes.rebuild import Rebuild, Rewrite


def run(graph: Graph) -> Rewrite:
    """The folding rewrite, one line per folded node."""
    rb = Rebuild(graph)
    for old in graph.nodes:
        if old.is_leaf or not old.inputs:
            rb.copy(old)
            continue
        ins = rb.mapped(old)
        values = [rb.const_value(i) for i in ins]
        if any(v is None for v in values) or numel(old.shape) > sum(v.size for v in values):
            rb.copy(old)
            continue
        args = [v.astype(np.float64) if v.dtype.kind == "f" else v for v in values]
        value = np.asarray(get_op(old.op).ref(*args, **old.attrs), dtype=old.dtype)
        new_id = rb.const(value, old.phase, dtype=old.dtype)
        if not rb.alias(old, new_id, f"folded to a constant of shape {old.shape}"):
            rb.copy(old)
    return rb.finish()


def constant_fold(graph: Graph) -> Graph:
    """`graph` with every all-constant subgraph replaced by its value."""
    return run(graph).graph
